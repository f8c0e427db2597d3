# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=600
"""A 3-node cluster under kill -9 (issue 10, done-when 1 and 2, and the
deposed-leader case of DESIGN.md 6). The nodes are started with
deploy/cluster-up (tests/lib/mgcluster.py), which brings up a throwaway Ceph
for the data of objects above inline_max_bytes.

- failover: writers PUT (small and larger than inline), GET, LIST and DELETE
  their own keys, and read each other's, through all three nodes, while the
  leader of the busiest shard is killed with kill -9 every 10 s and restarted.
  No acknowledged write may be missing afterwards, and no read may return a
  value older than the last write acknowledged before the read began (every
  body names its key and version). Prints the longest window without a
  successful write around each kill.
- all nodes: kill -9 of the three at once after acknowledged writes; after the
  restart every acknowledged object is there, byte for byte.
- deposed leader: the leader is frozen (SIGSTOP) while the others elect a new
  one and a new value is written; requests queued at the frozen node are
  answered after it wakes (SIGCONT), and it never acknowledges a write that
  is then missing, nor serves the old value.

Needs a Ceph: MG_TEST_DATA_RADOS names a deploy/ceph-up data.rados.json (tests/run.sh's
rados stage sets it and runs this suite there); without it the suite is skipped.
Environment: MG_CLUSTER_SECONDS (failover test duration, default 60)."""

import hashlib
import os
import random
import signal
import sys
import threading
import time
import xml.etree.ElementTree as ET

import mgcluster
import mgtest
import s3raw

SECONDS = float(os.environ.get("MG_CLUSTER_SECONDS", "60"))
KILL_EVERY_S = 10.0
INLINE_MAX = 4096
SMALL = 700
LARGE = 20000  # above inline_max_bytes: its bytes go to RADOS
WRITERS = 6


def body_for(key, ver, size):
    head = ("%s|%d|" % (key, ver)).encode()
    fill = hashlib.sha256(head).digest() * (size // 32 + 1)
    return head + fill[: max(0, size - len(head))]


def parse_body(data):
    parts = data.split(b"|", 2)
    if len(parts) < 3:
        return None, None
    return parts[0].decode(errors="replace"), int(parts[1])


class History:
    """Per key, the operations in issue order (only its owner writes it, one at a time):
    (ver, kind 'put'|'del', start, end or None if not acknowledged, size)."""

    def __init__(self):
        self.ops = {}
        self.lock = threading.Lock()
        self.write_acks = []  # times of successful writes

    def begin(self, key, ver, kind, size=0):
        with self.lock:
            rec = [ver, kind, time.monotonic(), None, size]
            self.ops.setdefault(key, []).append(rec)
            return rec

    def ack(self, rec):
        with self.lock:
            rec[3] = time.monotonic()
            self.write_acks.append(rec[3])

    def acked_before(self, key, t):
        """The last op on key acknowledged before time t (None: nothing)."""
        with self.lock:
            last = None
            for r in self.ops.get(key, []):
                if r[3] is not None and r[3] < t:
                    last = r
            return last

    def ops_of(self, key):
        with self.lock:
            return list(self.ops.get(key, []))


def check_read(hist, key, start, end, status, data):
    """'' when a GET of key that ran in [start, end] is linearizable, else why not."""
    base = hist.acked_before(key, start)
    ops = hist.ops_of(key)
    later = [r for r in ops if r[2] <= end and (base is None or r[0] > base[0])]
    if status == 404:
        if base is None or base[1] == "del" or any(r[1] == "del" for r in later):
            return ""
        return "404 but version %d was acknowledged before the read" % base[0]
    k, ver = parse_body(data)
    if k != key:
        return "body names %r" % k
    rec = next((r for r in ops if r[0] == ver), None)
    if rec is None or rec[1] != "put":
        return "version %d was never written" % ver
    if rec[2] > end:
        return "version %d was issued after the read ended" % ver
    if base is not None and ver < base[0]:
        return "stale: version %d returned, %d acknowledged before the read" % (ver, base[0])
    if data != body_for(key, ver, rec[4]):
        return "bytes of version %d differ" % ver
    return ""


class ClusterTest(mgtest.S3TestCase):
    @classmethod
    def setUpClass(cls):
        data = mgcluster.rados_data("cluster-%d" % os.getpid())
        cls.workdir = os.path.join(mgtest.TMP, "cluster")
        cls.cluster = mgcluster.Cluster(os.environ["MG_BIN"], cls.workdir, n=3, base={
            "inline_max_bytes": INLINE_MAX, "data": data})
        cls.cluster.start()
        u = cls.cluster.users[0]
        cls.clients = [s3raw.Client(e, u["access_key"], u["secret_key"])
                       for e in cls.cluster.endpoints]

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def req(self, node, method, path, **kw):
        """One request to node (0-based); None when the connection failed."""
        try:
            return self.clients[node].request(method, path, **kw)
        except Exception:  # refused, reset, timed out, cut short: the node is down
            return None

    def get_settled(self, node, path):
        """GET through node, retried for up to 10 s while it answers nothing or 5xx."""
        r = None
        for _ in range(50):
            r = self.req(node, "GET", path)
            if r is not None and r.status in (200, 404):
                return r
            time.sleep(0.2)
        return r

    def make_bucket(self, name):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for node in range(3):
                r = self.req(node, "PUT", "/" + name)
                if r is not None and r.status == 200:
                    return
            time.sleep(0.5)
        self.fail("CreateBucket %s never succeeded" % name)

    # -------------------------------------------------------------- failover
    def test_1_failover_kill9_leader(self):
        cl = self.cluster
        bucket = mgtest.bucket_name("clu")
        self.make_bucket(bucket)
        hist = History()
        stop = threading.Event()
        problems = []
        counts = {"put": 0, "get": 0, "list": 0, "del": 0, "failed": 0}
        clock = threading.Lock()

        def writer(w):
            rnd = random.Random(w)
            keys = ["w%d/k%03d" % (w, i) for i in range(40)]
            ver = {}
            while not stop.is_set():
                node = rnd.randrange(3)
                x = rnd.random()
                key = rnd.choice(keys)
                path = "/%s/%s" % (bucket, key)
                if x < 0.55:  # a write: PUT (small or above inline) or DELETE
                    v = ver.get(key, 0) + 1
                    ver[key] = v
                    put = x < 0.45
                    size = (SMALL if rnd.random() < 0.6 else LARGE) if put else 0
                    rec = hist.begin(key, v, "put" if put else "del", size)
                    r = (self.req(node, "PUT", path, body=body_for(key, v, size)) if put
                         else self.req(node, "DELETE", path))
                    if r is not None and r.status == (200 if put else 204):
                        hist.ack(rec)
                        kind = "put" if put else "del"
                    else:
                        kind = "failed"
                elif x < 0.93:
                    other = "w%d/k%03d" % (rnd.randrange(WRITERS), rnd.randrange(40))
                    p = "/%s/%s" % (bucket, other)
                    t0 = time.monotonic()
                    r = self.req(node, "GET", p)
                    t1 = time.monotonic()
                    if r is not None and r.status in (200, 404):
                        why = check_read(hist, other, t0, t1, r.status, r.body)
                        if why:
                            problems.append("t=%.2f GET %s via node %d: %s" % (
                                t0 - T0, other, node + 1, why))
                        kind = "get"
                    else:
                        kind = "failed"
                else:
                    t0 = time.monotonic()
                    r = self.req(node, "GET", "/" + bucket,
                                 query=[("list-type", "2"), ("prefix", "w%d/" % w)])
                    if r is not None and r.status == 200:
                        root = ET.fromstring(r.body)
                        listed = {e.text for e in root.iter() if e.tag.endswith("}Key")}
                        for k in keys:  # only this writer writes them: no op in flight
                            ops = hist.ops_of(k)
                            last = next((o for o in reversed(ops) if o[3] is not None), None)
                            maybe = [o for o in ops if o[3] is None and
                                     (last is None or o[0] > last[0])]
                            present = last is not None and last[1] == "put"
                            if (k in listed) != present and not maybe:
                                problems.append("t=%.2f LIST via node %d: %s %s" % (
                                    t0 - T0, node + 1, k,
                                    "missing" if present else "listed, deleted"))
                        kind = "list"
                    else:
                        kind = "failed"
                with clock:
                    counts[kind] += 1
                if kind == "failed":
                    time.sleep(0.05)

        T0 = time.monotonic()
        threads = [threading.Thread(target=writer, args=(w,), daemon=True)
                   for w in range(WRITERS)]
        for t in threads:
            t.start()
        kills = []
        t_end = time.monotonic() + SECONDS
        next_kill = time.monotonic() + KILL_EVERY_S / 2
        while time.monotonic() < t_end:
            if time.monotonic() >= next_kill:
                led = cl.shard_leaders()
                data_shards = [s for s in led if s != 0]
                victim = led.get(data_shards[0] if data_shards else 0)
                if victim is not None:
                    print("# t=%.2f kill -9 node %d (ready leaders by shard: %s)" % (
                        time.monotonic() - T0, victim, led), flush=True)
                    kills.append((time.monotonic(), victim))
                    cl.kill(victim)
                    time.sleep(1.0)
                    cl.restart(victim)
                next_kill += KILL_EVERY_S
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join(60)
        cl.wait_led()
        # Failover gaps: after each kill (until the next one), the longest time between two
        # successful writes, counted from the last one before the kill. Acks of writes committed
        # just before the kill still arrive after it, so the gap is not simply the first one.
        acks = sorted(hist.write_acks)
        gaps = []
        for i, (tk, victim) in enumerate(kills):
            until = kills[i + 1][0] if i + 1 < len(kills) else float("inf")
            before = [a for a in acks if a <= tk]
            window = before[-1:] + [a for a in acks if tk < a <= until]
            if len(window) >= 2:
                gaps.append((victim, max(b - a for a, b in zip(window, window[1:]))))
        for i, (victim, g) in enumerate(gaps):
            print("# failover %d (killed node %d): %.2f s without a successful write"
                  % (i + 1, victim, g))
        print("# ops: %s over %.0f s, %d kills; longest gap %.2f s (goal < 5 s)" % (
            counts, SECONDS, len(kills), max((g for _, g in gaps), default=0)))
        # No acknowledged write missing, checked through every node.
        missing = []
        for key, ops in sorted(hist.ops.items()):
            last = next((o for o in reversed(ops) if o[3] is not None), None)
            if last is None:
                continue
            t0 = time.monotonic()
            for node in range(3):
                r = self.get_settled(node, "/%s/%s" % (bucket, key))
                why = ("no answer" if r is None or r.status not in (200, 404)
                       else check_read(hist, key, t0, time.monotonic(), r.status, r.body))
                if why:
                    missing.append("%s via node %d: %s" % (key, node + 1, why))
        for line in problems[:10] + missing[:10]:
            print("# " + line)
        print("# %d read problems, %d acknowledged writes missing" % (len(problems),
                                                                        len(missing)))
        self.assertEqual(problems[:20], [])
        self.assertEqual(missing[:20], [])
        self.assertGreaterEqual(len(kills), int(SECONDS / KILL_EVERY_S) - 1)
        self.assertGreater(counts["put"], 0)
        self.assertTrue(gaps and max(g for _, g in gaps) < 30, gaps)

    # ----------------------------------------------------------- all at once
    def test_2_kill9_all_nodes(self):
        cl = self.cluster
        cl.wait_led()
        bucket = mgtest.bucket_name("all")
        self.make_bucket(bucket)
        acked = {}
        rnd = random.Random(7)
        for i in range(120):
            key = "k%03d" % (i % 90)  # some overwritten
            size = rnd.choice([0, 1, SMALL, INLINE_MAX, INLINE_MAX + 1, LARGE, 300 * 1024])
            data = body_for(key, i, size) if size else b""
            for _ in range(100):
                r = self.req(i % 3, "PUT", "/%s/%s" % (bucket, key), body=data)
                if r is not None and r.status == 200:
                    acked[key] = data
                    break
                time.sleep(0.1)
            else:
                self.fail("PUT %s never acknowledged" % key)
        for k in (1, 2, 3):
            cl.kill(k)
        for k in (1, 2, 3):
            cl.restart(k)
        cl.wait_led(90)
        bad = []
        for key, data in sorted(acked.items()):
            for node in range(3):
                r = self.get_settled(node, "/%s/%s" % (bucket, key))
                if r is None or r.status != 200 or r.body != data:
                    bad.append("%s via node %d: %s" % (
                        key, node + 1, "no answer" if r is None else
                        "%d, %d bytes (want %d)" % (r.status, len(r.body), len(data))))
        print("# all three killed at once: %d acknowledged objects, %d bad" % (len(acked),
                                                                                len(bad)))
        self.assertEqual(bad[:20], [])

    # ------------------------------------------------------------ deposed
    def test_3_deposed_leader(self):
        cl = self.cluster
        led = cl.wait_led()
        bucket = mgtest.bucket_name("dep")
        self.make_bucket(bucket)
        key = "/%s/x" % bucket
        for node in range(3):
            self.assertEqual(self.req(node, "PUT", key, body=b"old").status, 200)
        led = cl.wait_led()
        old = led[max(led)]  # the leader of the data shard (shard 0 leads with it)
        others = [k for k in (1, 2, 3) if k != old]
        cl.kill(old, signal.SIGSTOP)
        results = {}
        try:
            # Requests to the frozen node wait in its socket: sent now, answered after SIGCONT.
            def frozen_get():
                results["get"] = self.req(old - 1, "GET", key)

            def frozen_put():
                results["put"] = self.req(old - 1, "PUT", "/%s/y" % bucket, body=b"from-old")

            deadline = time.monotonic() + 30
            new_ok = False
            while time.monotonic() < deadline and not new_ok:
                r = self.req(others[0] - 1, "PUT", key, body=b"new")
                new_ok = r is not None and r.status == 200
                if not new_ok:
                    time.sleep(0.2)
            self.assertTrue(new_ok, "the other two never elected a leader that took a write")
            t1 = threading.Thread(target=frozen_get)
            t2 = threading.Thread(target=frozen_put)
            t1.start()
            t2.start()
            time.sleep(0.5)
        finally:
            cl.kill(old, signal.SIGCONT)
        t1.join(60)
        t2.join(60)
        g = results.get("get")
        self.assertTrue(g is None or g.status != 200 or g.body == b"new",
                        "the deposed leader served %r" % (g.body if g else None))
        p = results.get("put")
        if p is not None and p.status == 200:  # acknowledged: it must be there, everywhere
            for node in range(3):
                r = self.req(node, "GET", "/%s/y" % bucket)
                self.assertTrue(r is not None and r.status == 200 and r.body == b"from-old",
                                "acknowledged PUT through the deposed leader missing")
        for node in range(3):
            r = self.req(node, "GET", key)
            self.assertTrue(r is not None and r.status == 200 and r.body == b"new")
        print("# deposed node %d answered GET %s, PUT %s" % (
            old, g.status if g else "none", p.status if p else "none"))

    # ------------------------------------------------------------- admin
    def test_4_admin_shards_nodes(self):
        cl = self.cluster
        for k in (1, 2, 3):
            for _ in range(40):  # leaders may still move (test 3 deposed one): until stable
                led = cl.wait_led()
                r = mgtest.run([cl.binary, "admin", "shards", "--endpoint",
                                cl.endpoints[k - 1]])
                rows = [l.split() for l in r.stdout.splitlines()[1:] if l.strip()]
                # shard lo hi epoch replicas leader keys bytes applied
                if all(int(x[5]) == led.get(int(x[0])) for x in rows):
                    break
                time.sleep(0.5)
            self.assertEqual(sorted(int(x[0]) for x in rows), sorted(led), r.stdout)
            for x in rows:
                self.assertEqual(x[4], "1,2,3", r.stdout)
                self.assertEqual(int(x[5]), led[int(x[0])], r.stdout)
        r = mgtest.run([cl.binary, "admin", "nodes", "--endpoint", cl.endpoints[0]])
        rows = [l.split() for l in r.stdout.splitlines()[1:] if l.strip()]
        self.assertEqual([x[0] for x in rows], ["1", "2", "3"], r.stdout)
        self.assertTrue(all(x[-1] == "written" for x in rows), r.stdout)
        shards = mgtest.run([cl.binary, "admin", "shards", "--endpoint", cl.endpoints[0]])
        for line in (shards.stdout + r.stdout).splitlines():
            print("# " + line)


if __name__ == "__main__":
    sys.exit(mgtest.main())
