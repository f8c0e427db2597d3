# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=600
"""Data shards split at bucket boundaries (issue 10, done-when 4). A 3-node cluster
(deploy/cluster-up, tests/lib/mgcluster.py) with a tiny split threshold (MG_SPLIT_KEYS, the
test switch over cluster.split_keys): 50 buckets are created and loaded with small (inline)
objects through all nodes while a writer PUTs through the split; the data range must split
into several shards whose leaders sit on at least two nodes, as /metrics and `metagate admin
shards` show; ListBuckets and every bucket's LIST through every node must be exactly right
and every write the writer saw acknowledged must be there, also in 8 buckets created after
the splits (their ids come from the initial layout; MG_FAULT_BUCKET_ID_LAYOUT=1 spreads them
over the split layout and they collide); after kill -9 of a node and its
restart the same holds through every node, and the restarted node has the same shards
(children reopened from the layout row: RocksDB is flushed every second here,
MG_FLUSH_MAX_AGE_MS; the logs are short, so the restart also replays the parents' logs from
their start, entries from before the splits included).

Needs a Ceph: MG_TEST_DATA_RADOS names a deploy/ceph-up data.rados.json; without it the
suite is skipped. Environment: MG_SPLIT_TEST_KEYS (the threshold, default 120 rows)."""

import os
import re
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import mgcluster
import mgtest
import s3raw

BUCKETS = 50
OBJECTS = 12  # per bucket, small: inline in the entry
SPLIT_KEYS = int(os.environ.get("MG_SPLIT_TEST_KEYS", "120"))
WANT_DATA_SHARDS = 3  # "several": at least two splits

INFO_RE = re.compile(r'^metagate_shard_info\{shard="(\d+)",lo="(\d+)",hi="(\d+)",epoch="(\d+)",'
                     r'replicas="([^"]*)",leader="(\d+)",keys="(>=)?(\d+)"', re.M)


def shard_info(body):
    """[(shard, lo, hi, epoch, leader, keys)] of a node's /metrics."""
    return [(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)),
             int(m.group(6)), int(m.group(8))) for m in INFO_RE.finditer(body)]


class ClusterSplitTest(mgtest.S3TestCase):
    @classmethod
    def setUpClass(cls):
        data = mgcluster.rados_data("split-%d" % os.getpid())
        # The nodes (and their restarts) inherit the environment: the split threshold.
        os.environ["MG_SPLIT_KEYS"] = str(SPLIT_KEYS)
        # RocksDB flushed every second: the kill -9 below finds the splits in the flushed
        # layout row, and the restart's replay of the parents' logs (no snapshot yet: libraft
        # replays them whole) meets entries from before the splits.
        os.environ["MG_FLUSH_MAX_AGE_MS"] = "1000"
        cls.workdir = os.path.join(mgtest.TMP, "cluster-split")
        cls.cluster = mgcluster.Cluster(os.environ["MG_BIN"], cls.workdir, n=3, base={
            "data": data})
        cls.cluster.start()
        u = cls.cluster.users[0]
        cls.clients = [s3raw.Client(e, u["access_key"], u["secret_key"])
                       for e in cls.cluster.endpoints]

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()
        os.environ.pop("MG_SPLIT_KEYS", None)
        os.environ.pop("MG_FLUSH_MAX_AGE_MS", None)

    def req(self, node, method, path, **kw):
        try:
            return self.clients[node].request(method, path, **kw)
        except Exception:
            return None

    def put_retry(self, path, body, node, deadline_s=30):
        """PUT through node (then the others) until acknowledged; False past the deadline."""
        deadline = time.monotonic() + deadline_s
        n = node
        while time.monotonic() < deadline:
            r = self.req(n % 3, "PUT", path, body=body)
            if r is not None and r.status == 200:
                return True
            n += 1
            time.sleep(0.1)
        return False

    def make_bucket(self, name, node):
        for _ in range(60):
            r = self.req(node, "PUT", "/" + name)
            if r is not None and r.status == 200:
                return
            time.sleep(0.2)
        self.fail("CreateBucket %s never succeeded" % name)

    def list_keys(self, node, bucket):
        return mgcluster.list_keys(self.clients[node], bucket)

    def list_buckets(self, node):
        r = self.req(node, "GET", "/")
        if r is None or r.status != 200:
            return None
        root = ET.fromstring(r.body)
        return sorted(e.text for e in root.iter() if e.tag.endswith("}Name"))

    def data_shards(self, node=1):
        return [s for s in shard_info(self.cluster.metrics(node)) if s[0] != 0]

    def settled_layout(self, quiet_s=4.0, timeout=40):
        """Node 1's data shards once no split changed them for quiet_s (a split may still
        be running when the wanted count is reached)."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            cur = self.data_shards()
            key = sorted((s[0], s[1], s[2], s[3], s[4] != 0) for s in cur)
            if key != last:
                last, since = key, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return cur
            time.sleep(0.5)
        return self.data_shards()

    def layout_of(self, node, like, timeout=20):
        """Node's (shard, lo, hi, epoch) list, polled until it matches like's or timeout."""
        want = sorted((s[0], s[1], s[2], s[3]) for s in like)
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            got = sorted((s[0], s[1], s[2], s[3]) for s in self.data_shards(node))
            if got == want:
                return got
            time.sleep(0.5)
        return got

    def same_layout(self, a, b, timeout=20):
        """Nodes a's and b's (shard, lo, hi, epoch) lists, polled until equal or timeout (the
        late buckets may split the last shard once more meanwhile)."""
        deadline = time.monotonic() + timeout
        while True:
            la = sorted((s[0], s[1], s[2], s[3]) for s in self.data_shards(a))
            lb = sorted((s[0], s[1], s[2], s[3]) for s in self.data_shards(b))
            if (la == lb and la) or time.monotonic() >= deadline:
                return la, lb
            time.sleep(0.5)

    def check_all(self, buckets, expect, maybe, what):
        """ListBuckets and every bucket's LIST through every node: exactly expect[b] (plus,
        for keys whose PUT was never acknowledged, maybe present)."""
        for node in range(3):
            got = None
            for _ in range(50):  # a node just restarted may answer 503 for a moment
                got = self.list_buckets(node)
                if got is not None:
                    break
                time.sleep(0.2)
            self.assertEqual(got, sorted(buckets), "%s: ListBuckets via node %d" % (what, node + 1))
            for b in buckets:
                keys = None
                for _ in range(50):
                    keys = self.list_keys(node, b)
                    if keys is not None:
                        break
                    time.sleep(0.2)
                self.assertIsNotNone(keys, "%s: LIST %s via node %d failed" % (what, b, node + 1))
                got_set = set(keys)
                self.assertEqual(len(keys), len(got_set), "%s: LIST %s repeats keys" % (what, b))
                missing = expect[b] - got_set
                extra = got_set - expect[b] - maybe.get(b, set())
                self.assertFalse(missing, "%s: LIST %s via node %d misses %s" % (
                    what, b, node + 1, sorted(missing)[:5]))
                self.assertFalse(extra, "%s: LIST %s via node %d has extra %s" % (
                    what, b, node + 1, sorted(extra)[:5]))

    def test_split_at_bucket_boundaries(self):
        cl = self.cluster
        t0 = time.monotonic()
        prefix = mgtest.bucket_name("spl")
        buckets = ["%s-%02d" % (prefix, i) for i in range(BUCKETS)]
        for i, b in enumerate(buckets):
            self.make_bucket(b, i % 3)
        self.assertEqual(len(self.data_shards()), 1, "split before any load")
        expect = {b: set() for b in buckets}
        maybe = {}
        lock = threading.Lock()
        stop = threading.Event()
        writer_stats = {"acked": 0, "failed": 0}

        def writer():
            """PUTs through the split, round robin over nodes and buckets; a PUT that fails
            is retried with the same key, and until acknowledged it is only 'maybe'."""
            n = 0
            while not stop.is_set():
                b = buckets[n % BUCKETS]
                key = "writer/%05d" % n
                with lock:
                    maybe.setdefault(b, set()).add(key)
                if self.put_retry("/%s/%s" % (b, key), key.encode(), n % 3, deadline_s=20):
                    with lock:
                        expect[b].add(key)
                        writer_stats["acked"] += 1
                else:
                    writer_stats["failed"] += 1
                n += 1

        wt = threading.Thread(target=writer)
        wt.start()
        errors = []

        def loader(part):
            for i, b in enumerate(buckets):
                if i % 4 != part:
                    continue
                for j in range(OBJECTS):
                    key = "obj/%03d" % j
                    if not self.put_retry("/%s/%s" % (b, key), ("%s/%s" % (b, key)).encode(),
                                          i + j):
                        errors.append("PUT %s/%s never acknowledged" % (b, key))
                        continue
                    with lock:
                        expect[b].add(key)

        loaders = [threading.Thread(target=loader, args=(p,)) for p in range(4)]
        for t in loaders:
            t.start()
        for t in loaders:
            t.join()
        self.assertFalse(errors, errors[:5])
        t_loaded = time.monotonic()
        # Until the data range has split into several shards, led by >= 2 nodes.
        deadline = time.monotonic() + 60
        shards, leaders = [], set()
        while time.monotonic() < deadline:
            shards = self.data_shards()
            leaders = {s[4] for s in shards}
            if len(shards) >= WANT_DATA_SHARDS and 0 not in leaders and len(leaders) >= 2:
                break
            time.sleep(0.5)
        t_split = time.monotonic()
        time.sleep(1.0)  # the writer goes on through the last split a moment longer
        stop.set()
        wt.join()
        shards = self.settled_layout()
        print("\nsplit: %d buckets loaded in %.1f s; %d data shards %.1f s later; writer: "
              "%d acknowledged, %d gave up" % (BUCKETS, t_loaded - t0, len(shards),
                                              t_split - t_loaded, writer_stats["acked"],
                                              writer_stats["failed"]))
        for s in shards:
            print("  shard %d [%d, %s) epoch %d leader %d keys %d" % (
                s[0], s[1], s[2] or "end", s[3], s[4], s[5]))
        self.assertGreaterEqual(len(shards), WANT_DATA_SHARDS, cl.logs())
        self.assertGreaterEqual(len(leaders - {0}), 2, "leaders %s" % shards)
        # The ranges tile the bucket-id space: sorted by lo, each ends where the next starts.
        tiles = sorted(shards, key=lambda s: s[1])
        self.assertEqual(tiles[0][1], 0)
        for a, b in zip(tiles, tiles[1:]):
            self.assertEqual(a[2], b[1], "ranges %s" % tiles)
        self.assertEqual(tiles[-1][2], 0)
        self.assertTrue(all(s[3] >= 2 for s in shards if s[0] != 1 or len(shards) > 1))
        # Every node applied the same layout.
        for k in (2, 3):
            self.assertEqual(self.layout_of(k, shards), self.layout_of(1, shards),
                             "node %d's layout" % k)
        # admin shards shows them.
        out = subprocess.run([os.environ["MG_BIN"], "admin", "shards", "--endpoint",
                              cl.endpoints[0]], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        print(out.stdout)
        for s in shards:
            self.assertRegex(out.stdout, r"(?m)^\D*%d\b" % s[0])
        # A bucket's rows never straddle a boundary: every bucket lists all it should (below)
        # and its keys of one shard; the writer's acknowledged PUTs are all there.
        # Buckets created after the splits get ids of their own (from the initial layout):
        # ids spread over the split layout would collide with live ones.
        late = ["%s-late%d" % (prefix, i) for i in range(8)]
        for i, b in enumerate(late):
            self.make_bucket(b, i % 3)
            expect[b] = set()
            for j in range(3):
                key = "late/%d" % j
                self.assertTrue(self.put_retry("/%s/%s" % (b, key), key.encode(), i + j))
                expect[b].add(key)
        buckets = buckets + late
        maybe_only = {b: maybe.get(b, set()) - expect[b] for b in buckets}
        self.check_all(buckets, expect, maybe_only, "after the split")
        print("split: checked through every node at %.1f s" % (time.monotonic() - t0))
        # kill -9 of one node (a leader of some data shard) and restart.
        victim = next(s[4] for s in shards if s[4] != 0)
        cl.kill(victim)
        time.sleep(1.0)
        cl.restart(victim)
        cl.wait_led(timeout=60)
        other = 1 if victim != 1 else 2
        mine, theirs = self.same_layout(victim, other)
        self.assertEqual(mine, theirs, "node %d's shards after kill -9" % victim)
        self.assertGreaterEqual(len(mine), len(shards))
        self.check_all(buckets, expect, maybe_only, "after kill -9 of node %d" % victim)
        print("split: total %.1f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    mgtest.main()
