# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system timeout=300
"""Issue 7 done-when 4: no handler blocks an event loop.

Load: 64 keep-alive connections PUTting 1 KiB objects as fast as they can,
from 4 client processes (16 threads each: no GIL ceiling) sending
pre-built anonymous requests into a public-read-write bucket, so the client
does no signing and costs far less per request than the server. Raw sockets,
no HTTP library: a request is one sendall and a few recv calls. The client
runs at nice 19, so on a small box its CPU use does not show up as server
loop lag.

- Loop lag: the p99 of every loop's lag histogram over the load window (the
  difference of two /metrics scrapes; an upper bound: the bucket's le) stays
  at or under 5 ms. This machine is shared (other engineers' builds and
  fuzzers often keep both cores busy: load averages of 10-25), and raw loop
  lag (metagate_loop_lag_seconds) also counts the time a loop thread waits on
  the run queue for a core, which no handler causes. The bound is therefore
  checked on metagate_loop_lag_self_seconds, the same probe minus the loop
  thread's run-queue wait (/proc/thread-self/schedstat): what the loop's own
  work or a blocking call costs. On a virtual machine that is not all: while
  the hypervisor runs another guest, a thread the guest thinks is running is
  not, and a do-nothing timer is late by milliseconds (in one CI run a bare
  sleeping process had a p99 of 8.7 ms, run-queue wait included). So a control thread, at the server's
  priority, wakes every 20 ms over the same window and is measured the same
  way (lateness minus its own run-queue wait); the bound is 5 ms beyond the
  control's p99. And a window in which the hypervisor took much of the vCPUs
  (a run here saw 40 %: the loops' self lag 25 ms, the idle control's 12 ms)
  measures the neighbours, not metagate: up to four windows run until one has
  under 5 % steal, and that one (else the least-stolen) decides. Printed alongside: raw lag p99, the control's p99, the share
  of vCPU time stolen by the hypervisor (/proc/stat) and the load average.
- Same key: 64 clients overwriting ONE key reach at least 0.7x the rate of
  64 clients writing distinct keys (writes to one key pipeline on the meta
  thread instead of waiting for each other's commit). Rounds alternate
  distinct/same twice and the sums are compared; both rates are printed.
"""

import multiprocessing
import os
import re
import socket
import threading
import time
import urllib.parse
import urllib.request

import mgtest
from mgtest import S3TestCase, client

CONNS = 64
PROCS = 4
BODY = b"x" * 1024
ROUND_S = float(os.environ.get("MG_ASYNC_ROUND_S", "4"))
LAG_P99_MAX_S = 0.005
LAG_WINDOWS = 4         # load windows at most, until one has little steal
LAG_CLEAN_STEAL = 0.05  # a window with less than 5 % of vCPU time stolen is clean
SAME_KEY_MIN_RATIO = 0.7


def _endpoint():
    u = urllib.parse.urlparse(mgtest.ENDPOINT)
    return u.hostname, u.port


def _request(bucket, key):
    return ("PUT /%s/%s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %d\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
            % (bucket, key, *_endpoint(), len(BODY))).encode() + BODY


def _read_response(sock, buf):
    """Reads one response off sock (buf: leftover bytes); returns
    (status, leftover)."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(rest) < n:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        rest += chunk
    return status, rest[n:]


def _conn_loop(bucket, same, conn_id, deadline, out):
    host, port = _endpoint()
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fixed = _request(bucket, "same-key") if same else None
    done = errors = 0
    buf = b""
    while time.monotonic() < deadline:
        req = fixed or _request(bucket, "k-%d-%d" % (conn_id, done))
        sock.sendall(req)
        status, buf = _read_response(sock, buf)
        if status == 200:
            done += 1
        else:
            errors += 1
    sock.close()
    out.append((done, errors))


def _proc_main(bucket, same, first_conn, nconns, start_at, seconds, q):
    # The client shares the machine's cores with the server: at nice 19 it cannot delay a
    # loop thread that has work (CFS weight 15 vs 1024), so the lag measured is the server's.
    os.nice(19)
    while time.time() < start_at:
        time.sleep(0.001)
    deadline = time.monotonic() + seconds
    out = []
    threads = [threading.Thread(target=_conn_loop,
                                args=(bucket, same, first_conn + i, deadline, out))
               for i in range(nconns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put((sum(d for d, _ in out), sum(e for _, e in out)))


def run_load(bucket, same, seconds):
    """64 connections for `seconds`; returns (PUT/s, errors)."""
    q = multiprocessing.Queue()
    start_at = time.time() + 0.5  # every process connected and ready
    per = CONNS // PROCS
    procs = [multiprocessing.Process(target=_proc_main,
                                     args=(bucket, same, i * per, per, start_at, seconds, q))
             for i in range(PROCS)]
    for p in procs:
        p.start()
    res = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    return sum(d for d, _ in res) / seconds, sum(e for _, e in res)


def _rq_wait_s():
    """This thread's run-queue wait so far (s), the second field of
    /proc/thread-self/schedstat; 0.0 where the kernel does not keep it."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _steal_ticks():
    """Clock ticks the hypervisor took from this machine's vCPUs so far (the
    'steal' column of /proc/stat's cpu line)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


def _control_probe(seconds, q):
    """The machine's own share of loop lag: a thread that does nothing but
    wake every 20 ms, measured the way the server's probe is (lateness minus
    the thread's run-queue wait). What remains is what no handler causes:
    time the hypervisor stole from the vCPU, wake-up latency, timer slack.
    Puts the sorted lateness-beyond-run-queue samples (seconds)."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rq = _rq_wait_s()
        due = time.monotonic() + 0.020
        time.sleep(0.020)
        late = max(0.0, time.monotonic() - due)
        out.append(max(0.0, late - (_rq_wait_s() - rq)))
    q.put(sorted(out))


def run_load_with_control(bucket, seconds):
    """run_load plus the control probe over the same window; returns
    (PUT/s, errors, control p99 seconds)."""
    cq = multiprocessing.Queue()
    probe = multiprocessing.Process(target=_control_probe, args=(seconds + 0.5, cq))
    probe.start()
    rate, errors = run_load(bucket, False, seconds)
    samples = cq.get(timeout=seconds + 60)
    probe.join()
    return rate, errors, samples[int(len(samples) * 0.99) - 1] if samples else 0.0


LAG_RE = re.compile(
    r'^(metagate_loop_lag(?:_self)?)_seconds_bucket\{loop="(\d+)",le="([^"]+)"\} (\d+)$')


def lag_buckets():
    """{family: {loop: [(le, cumulative count), ...]}} from /metrics, for
    metagate_loop_lag and metagate_loop_lag_self."""
    with urllib.request.urlopen(mgtest.ENDPOINT + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = LAG_RE.match(line)
        if m:
            le = float("inf") if m.group(3) == "+Inf" else float(m.group(3))
            out.setdefault(m.group(1), {}).setdefault(int(m.group(2)), []).append(
                (le, int(m.group(4))))
    return out


def p99(before, after):
    """p99 upper bound (seconds) of the samples between two scrapes of one
    loop, and how many samples there were."""
    delta = [(le, a - b) for (le, a), (_, b) in zip(after, before)]
    total = delta[-1][1]
    for le, cum in delta:
        if cum * 100 >= total * 99:
            return le, total
    return float("inf"), total


class AsyncLoops(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s3 = client()
        cls.bucket = mgtest.bucket_name("async")
        cls.s3.create_bucket(Bucket=cls.bucket, ACL="public-read-write")
        cls.addClassCleanup(mgtest.drop_bucket, cls.s3, cls.bucket)

    def _lag_window(self):
        """One load window: returns (worst self p99, control p99, steal share)."""
        before = lag_buckets()
        self.assertIn("metagate_loop_lag_self", before, "no loop-lag histograms in /metrics")
        steal0, t0 = _steal_ticks(), time.monotonic()
        rate, errors, control = run_load_with_control(self.bucket, ROUND_S)
        after = lag_buckets()
        steal = (_steal_ticks() - steal0) / os.sysconf("SC_CLK_TCK") / (
            (time.monotonic() - t0) * os.cpu_count())
        worst = {}
        for fam in ("metagate_loop_lag", "metagate_loop_lag_self"):
            worst[fam] = 0.0
            for loop in sorted(after[fam]):
                v, n = p99(before[fam][loop], after[fam][loop])
                print("# loop %d: %s p99 <= %g ms over %d samples"
                      % (loop, fam, v * 1e3, n), flush=True)
                self.assertGreater(n, 0, "loop %d took no lag samples" % loop)
                worst[fam] = max(worst[fam], v)
        print("# 64 x 1 KiB PUT: %.0f PUT/s, %d errors; worst loop p99: lag <= %g ms, "
              "lag beyond run-queue wait <= %g ms; control (an idle thread, same measure) "
              "p99 %.2f ms; steal %.1f %% of the vCPUs; load average %s"
              % (rate, errors, worst["metagate_loop_lag"] * 1e3,
                 worst["metagate_loop_lag_self"] * 1e3, control * 1e3, steal * 100,
                 open("/proc/loadavg").read().split()[0]), flush=True)
        self.assertEqual(errors, 0)
        self.assertGreater(rate, 0)
        return worst["metagate_loop_lag_self"], control, steal

    def test_loop_lag_p99_under_load(self):
        # The first window the hypervisor leaves (nearly) alone decides; if none of
        # LAG_WINDOWS is, the least-stolen one does. A handler that blocks shows in every
        # window; a neighbour guest only in some.
        windows = []
        for _ in range(LAG_WINDOWS):
            windows.append(self._lag_window())
            if windows[-1][2] < LAG_CLEAN_STEAL:
                break
        lag, control, steal = min(windows, key=lambda w: w[2])
        print("# deciding window: steal %.1f %%, loop p99 beyond run-queue wait <= %g ms, "
              "control p99 %.2f ms" % (steal * 100, lag * 1e3, control * 1e3), flush=True)
        self.assertLessEqual(lag, LAG_P99_MAX_S + control,
                             "loop p99 beyond run-queue wait exceeds 5 ms plus what the "
                             "machine adds to an idle thread")

    def test_same_key_rate(self):
        distinct = same = 0.0
        for _ in range(2):  # alternating rounds: drift hits both sides alike
            d, e1 = run_load(self.bucket, False, ROUND_S)
            s, e2 = run_load(self.bucket, True, ROUND_S)
            self.assertEqual((e1, e2), (0, 0))
            print("# round: distinct keys %.0f PUT/s, same key %.0f PUT/s" % (d, s), flush=True)
            distinct += d
            same += s
        ratio = same / distinct
        print("# 64 clients: distinct keys %.0f PUT/s, same key %.0f PUT/s, ratio %.2f"
              % (distinct / 2, same / 2, ratio), flush=True)
        got = self.s3.get_object(Bucket=self.bucket, Key="same-key")["Body"].read()
        self.assertEqual(got, BODY)
        self.assertGreaterEqual(ratio, SAME_KEY_MIN_RATIO)


if __name__ == "__main__":
    mgtest.main()
