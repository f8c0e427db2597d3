# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=400
"""Orphan collection in a 3-node cluster (issue 10, "Object data"; meta/orphan.c,
"In a cluster"). Every node collects the unreferenced RADOS blobs of its own
writer ids (this process's and its past ones') after fencing every shard, and
spares the blobs of ops it submitted that have not completed.

- kill9_orphans: large PUTs (12 MiB, three 4 MiB stripes) stream through one
  node, which is killed with kill -9 in the middle: their stripes are in RADOS
  and no metadata names them (acknowledged PUTs are not orphans). The node is
  restarted with a 3 s grace: the orphans stay until the grace has passed and
  then the namespace holds exactly the stripes that committed objects name;
  every acknowledged object reads back byte for byte.
- no_loss_under_churn: PUT (inline and RADOS sizes), overwrite, DELETE and GET
  through all nodes for MG_CLUSTER_ORPHANS_SECONDS (default 20) while every
  collector runs every 200 ms with a zero grace (an unreferenced blob is a
  candidate at once, so only the submission claims and the fences keep the
  blob of a PUT in flight on a remote leader). Every PUT of a blob (in both
  tests) is held 300 ms on
  its node between its submission and the router (the MG_FAULT_ROUTE_HOLD_MS
  test switch, meta/client.c), so its blob stays unreferenced across whole
  passes of its node's collector while it is in flight. Afterwards every key reads back
  as its last acknowledged write, byte for byte, the collectors have freed the
  replaced blobs (long before the 30 s delayed retire), and the namespace holds
  exactly the referenced stripes. Every 6 s a data shard's leader is frozen
  (SIGSTOP) or killed (kill -9), alternately, for 3 s (MG_CLUSTER_ORPHANS_FAULT
  = stop | kill | both), so ops the other nodes forwarded to it stay in flight
  across whole passes of their own node's collector, some end with an unknown
  outcome, and the killed node's cut-short PUTs leave orphans of a past process.

Shown to fail without the fix: with the collector off on a cluster (the code
before it) both tests fail: kill9_orphans keeps the orphans, no_loss_under_churn
frees nothing. With meta__orphan_submit's claim removed the held PUTs' blobs are
freed while in flight and then committed: kill9_orphans finds committed objects
whose stripes are gone, and GETs of acknowledged objects fail (MG_ECORRUPT,
stripe missing).

Needs a Ceph: MG_TEST_DATA_RADOS (deploy/ceph-up's data.rados.json), else skipped."""

import functools
import os
import random
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import mgcluster
import mgtest
import s3raw
from test_cluster import body_for  # noqa: E402 (same directory)

INLINE_MAX = 4096
STRIPE = 4 << 20  # engine/rados.c's default stripe size
BIG = 12 << 20
SECONDS = float(os.environ.get("MG_CLUSTER_ORPHANS_SECONDS", "20"))
PERIOD_MS = 200
GRACE_KILL_MS = 3000
HOLD_MS = int(os.environ.get("MG_CLUSTER_ORPHANS_HOLD_MS", "300"))
FREEZE_EVERY_S = 6.0
FREEZE_S = 3.0
FAULT = os.environ.get("MG_CLUSTER_ORPHANS_FAULT", "both")  # stop | kill | both (alternate)


def stripes_of(size):
    return 0 if size <= INLINE_MAX else (size + STRIPE - 1) // STRIPE


class ClusterOrphans(mgtest.S3TestCase):
    @classmethod
    def setUpClass(cls):
        data = mgcluster.rados_data("corph-%d" % os.getpid())
        cls.rados = data["rados"]
        cls.saved_env = {k: os.environ.get(k) for k in (
            "MG_ORPHAN_PERIOD_MS", "MG_ORPHAN_GRACE_MS", "MG_FAULT_ROUTE_HOLD_MS")}
        os.environ["MG_ORPHAN_PERIOD_MS"] = str(PERIOD_MS)  # nodes inherit these
        os.environ["MG_ORPHAN_GRACE_MS"] = "0"
        os.environ["MG_FAULT_ROUTE_HOLD_MS"] = str(HOLD_MS)
        cls.workdir = os.path.join(mgtest.TMP, "cluster_orphans")
        cls.cluster = mgcluster.Cluster(os.environ["MG_BIN"], cls.workdir, n=3, base={
            "inline_max_bytes": INLINE_MAX, "data": data})
        cls.cluster.start()
        u = cls.cluster.users[0]
        cls.clients = [s3raw.Client(e, u["access_key"], u["secret_key"])
                       for e in cls.cluster.endpoints]
        for c in cls.clients:  # a GET whose body stops short fails in 30 s, not 120
            c.connection = functools.partial(c.connection, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        for k, v in cls.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    # ---------------------------------------------------------------- helpers
    def req(self, node, method, path, **kw):
        try:
            return self.clients[node].request(method, path, **kw)
        except Exception:  # the node is down, or went down under the request
            return None

    def settled(self, method, path, node=0, tries=100, **kw):
        """A request retried (any node, from node on) every 0.2 s while it fails or answers 503
        (no leader yet), tries times at most; 500 (e.g. a blob gone) is an answer."""
        r = None
        for i in range(tries):
            r = self.req((node + i) % 3, method, path, **kw)
            if r is not None and r.status != 503:
                return r
            time.sleep(0.2)
        return r

    def rados_ls(self):
        r = self.rados
        out = subprocess.run(["rados", "-c", r["conf"], "--id", r["user"], "-p", r["pool"],
                              "-N", r["namespace"], "ls"], capture_output=True, text=True,
                             timeout=60, check=True).stdout.split()
        return sorted(n for n in out if n.startswith("mg.") and n != "mg.instances")

    def referenced_stripes(self):
        """Stripe objects the committed objects of every bucket name (LIST through node 1)."""
        r = self.settled("GET", "/")
        self.assertEqual(r.status, 200)
        ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
        total = 0
        for b in ET.fromstring(r.body).iter("{%s}Name" % ns["s3"]):
            marker = ""
            while True:
                q = [("max-keys", "1000")] + ([("marker", marker)] if marker else [])
                lr = self.settled("GET", "/" + b.text, query=q)
                self.assertEqual(lr.status, 200, lr.body[:300])
                root = ET.fromstring(lr.body)
                keys = list(root.iter("{%s}Contents" % ns["s3"]))
                for c in keys:
                    total += stripes_of(int(c.find("{%s}Size" % ns["s3"]).text))
                if root.findtext("{%s}IsTruncated" % ns["s3"]) != "true" or not keys:
                    break
                marker = keys[-1].find("{%s}Key" % ns["s3"]).text
        return total

    def wait_exact(self, timeout):
        """Until the namespace holds exactly the referenced stripes; (ok, seconds, extra)."""
        t0 = time.monotonic()
        extra = None
        while time.monotonic() - t0 < timeout:
            extra = len(self.rados_ls()) - self.referenced_stripes()
            if extra == 0:
                return True, time.monotonic() - t0, 0
            time.sleep(0.25)
        return False, time.monotonic() - t0, extra

    def metric_sum(self, name):
        total = 0.0
        for k in range(1, 4):
            for line in self.cluster.metrics(k).splitlines():
                if line.startswith(name + " "):
                    total += float(line.rsplit(" ", 1)[1])
        return total

    def make_bucket(self, name):
        r = self.settled("PUT", "/" + name)
        self.assertIsNotNone(r)
        self.assertIn(r.status, (200, 409), r.body[:300])

    # ------------------------------------------------------------------ tests
    def test_1_kill9_orphans(self):
        cl = self.cluster
        bucket = mgtest.bucket_name("corph")
        self.make_bucket(bucket)
        victim = 3  # node 3: its blobs carry its own writer ids
        acked = {}
        lock = threading.Lock()
        extra = 0
        for attempt in range(3):
            stop = threading.Event()

            def uploader(w):
                i = 0
                while not stop.is_set():
                    key = "a%d/w%d/%d" % (attempt, w, i)
                    i += 1
                    data = body_for(key, 1, BIG)
                    r = self.req(victim - 1, "PUT", "/%s/%s" % (bucket, key), body=data)
                    if r is not None and r.status == 200:
                        with lock:
                            acked[key] = data
            threads = [threading.Thread(target=uploader, args=(w,), daemon=True)
                       for w in range(4)]
            for t in threads:
                t.start()
            time.sleep(2.0 + attempt)
            cl.kill(victim)
            stop.set()
            for t in threads:
                t.join(30)
            extra = len(self.rados_ls()) - self.referenced_stripes()
            print("# kill9_orphans attempt %d: %d acknowledged PUTs so far, %d orphan stripes"
                  % (attempt, len(acked), extra))
            self.assertGreaterEqual(extra, 0, "%d stripes that committed objects name are "
                                    "gone: a collector freed blobs of ops in flight" % -extra)
            if extra > 0:
                break
            cl.restart(victim)
            cl.wait_led()
        self.assertGreater(extra, 0, "no PUT was cut short by the kill")

        os.environ["MG_ORPHAN_GRACE_MS"] = str(GRACE_KILL_MS)
        try:
            t_restart = time.monotonic()
            cl.restart(victim)
        finally:
            os.environ["MG_ORPHAN_GRACE_MS"] = "0"
        ok, secs, left = self.wait_exact(60)
        gone_after = time.monotonic() - t_restart
        self.assertTrue(ok, "%d orphan stripes left %.1f s after the restart\n%s"
                        % (left, gone_after, cl.logs()))
        # Nothing could free them before the grace (counted from a pass of the new process).
        self.assertGreaterEqual(gone_after, GRACE_KILL_MS / 1000.0)
        cl.wait_led()
        for key, data in acked.items():
            r = self.settled("GET", "/%s/%s" % (bucket, key))
            self.assertEqual(r.status, 200, key)
            self.assertTrue(r.body == data, "%s: bytes differ" % key)
        print("# kill9_orphans: %d orphan stripes reclaimed %.1f s after the restart "
              "(grace %.1f s); %d acknowledged 12 MiB objects intact"
              % (extra, gone_after, GRACE_KILL_MS / 1000.0, len(acked)))

    def test_2_no_loss_under_churn(self):
        self.cluster.wait_led()
        bucket = mgtest.bucket_name("corph")
        self.make_bucket(bucket)
        freed0 = self.metric_sum("metagate_orphans_freed_total")
        stop = threading.Event()
        hist = {}  # key -> [(ver, kind, size, acked)]
        counts = {"put": 0, "del": 0, "get": 0, "failed": 0}
        clock = threading.Lock()

        def writer(w):
            rnd = random.Random(1000 + w)
            keys = ["w%d/k%02d" % (w, i) for i in range(12)]
            ver = {}
            while not stop.is_set():
                node = rnd.randrange(3)
                key = rnd.choice(keys)
                path = "/%s/%s" % (bucket, key)
                x = rnd.random()
                if x < 0.15:
                    r = self.req(node, "GET", path)
                    with clock:
                        counts["get"] += 1
                    continue
                v = ver.get(key, 0) + 1
                ver[key] = v
                if x < 0.85:
                    size = 700 if rnd.random() < 0.3 else rnd.randrange(INLINE_MAX + 1, 300000)
                    rec = [v, "put", size, False]
                    hist.setdefault(key, []).append(rec)
                    r = self.req(node, "PUT", path, body=body_for(key, v, size))
                    ok = r is not None and r.status == 200
                else:
                    rec = [v, "del", 0, False]
                    hist.setdefault(key, []).append(rec)
                    r = self.req(node, "DELETE", path)
                    ok = r is not None and r.status == 204
                rec[3] = ok
                with clock:
                    counts["failed" if not ok else rec[1]] += 1

        freezes = []

        def freezer():
            # The leader of a data shard stops (SIGSTOP) for FREEZE_S every FREEZE_EVERY_S:
            # ops the other nodes forward to it stay in flight until a new leader commits
            # them, longer than a pass of their own node's collector takes, so only the
            # submission claims keep their blobs (a zero grace makes them candidates).
            while not stop.wait(FREEZE_EVERY_S):
                led = self.cluster.shard_leaders()
                data = [k for s, k in sorted(led.items()) if s != 0]
                if not data:
                    continue
                k = data[0]
                kill = FAULT == "kill" or (FAULT == "both" and len(freezes) % 2 == 1)
                freezes.append(("kill -9 " if kill else "stop ") + str(k))
                if kill:
                    self.cluster.kill(k)
                    time.sleep(FREEZE_S)
                    self.cluster.restart(k)
                else:
                    self.cluster.kill(k, signal.SIGSTOP)
                    time.sleep(FREEZE_S)
                    self.cluster.kill(k, signal.SIGCONT)

        threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(12)]
        threads.append(threading.Thread(target=freezer, daemon=True))
        for t in threads:
            t.start()
        time.sleep(SECONDS)
        stop.set()
        for t in threads:
            t.join(60)
        self.cluster.wait_led()

        problems = []
        for i, (key, ops) in enumerate(sorted(hist.items())):
            last = max((j for j, o in enumerate(ops) if o[3]), default=-1)
            # The last acknowledged write, or one issued after it that failed (its outcome
            # may be unknown): nothing older, nothing else.
            allowed = ops[last:] if last >= 0 else [[0, "del", 0, True]] + ops
            if len(problems) >= 5:
                break  # enough to fail on (a lost object may cost a 30 s timeout each)
            r = self.settled("GET", "/%s/%s" % (bucket, key), node=i % 3, tries=5)
            if r is None or r.status not in (200, 404):
                problems.append("%s: GET %s" % (key, None if r is None else r.status))
                continue
            if r.status == 404:
                if not any(o[1] == "del" for o in allowed):
                    problems.append("%s: 404, version %d acknowledged" % (key, ops[last][0]))
                continue
            good = [o for o in allowed
                    if o[1] == "put" and r.body == body_for(key, o[0], o[2])]
            if not good:
                problems.append("%s: %d bytes match no allowed version (last acked %s)"
                                % (key, len(r.body), ops[last][:3] if last >= 0 else None))
        freed = self.metric_sum("metagate_orphans_freed_total") - freed0
        refused = self.metric_sum("metagate_orphan_puts_refused_total")
        print("# no_loss_under_churn: %.0f s, %d PUT, %d DELETE, %d GET, %d failed; %d keys "
              "checked, %d problems; %d replaced/orphan blobs freed by the collectors, %d PUTs "
              "refused; data shard leader faults %d: %s"
              % (SECONDS, counts["put"], counts["del"], counts["get"], counts["failed"],
                 len(hist), len(problems), freed, refused, len(freezes), freezes))
        self.assertEqual(problems, [], "\n".join(problems[:20]))
        self.assertGreater(counts["put"], 50)
        self.assertGreater(freed, 0, "the collectors freed nothing")
        ok, secs, left = self.wait_exact(20)
        self.assertTrue(ok, "%d unreferenced stripes left 20 s after the churn" % (left,))
        print("# no_loss_under_churn: the namespace held exactly the referenced stripes "
              "%.1f s after the churn" % secs)


if __name__ == "__main__":
    mgtest.main()
