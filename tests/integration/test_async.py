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
  work or a blocking call costs. Printed alongside: the raw lag p99, a
  control probe (a process at the server's priority sleeping 20 ms at a
  time; what the scheduler alone adds) and the load average.
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


def _control_probe(seconds, q):
    """Scheduler-only lag: wake every 20 ms for `seconds`, put the sorted
    lateness samples (seconds)."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        due = time.monotonic() + 0.020
        time.sleep(0.020)
        out.append(max(0.0, time.monotonic() - due))
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

    def test_loop_lag_p99_under_load(self):
        before = lag_buckets()
        self.assertIn("metagate_loop_lag_self", before, "no loop-lag histograms in /metrics")
        rate, errors, control = run_load_with_control(self.bucket, ROUND_S)
        after = lag_buckets()
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
              "lag beyond run-queue wait <= %g ms; control (scheduler only) p99 %.2f ms; "
              "load average %s"
              % (rate, errors, worst["metagate_loop_lag"] * 1e3,
                 worst["metagate_loop_lag_self"] * 1e3, control * 1e3,
                 open("/proc/loadavg").read().split()[0]), flush=True)
        self.assertEqual(errors, 0)
        self.assertGreater(rate, 0)
        self.assertLessEqual(worst["metagate_loop_lag_self"], LAG_P99_MAX_S)

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
