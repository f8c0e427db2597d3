# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=300
"""A replica that needs a snapshot gets the shard's checkpoint from its leader (issue 10,
meta/install.c, META_RPC_CHECKPOINT). A 3-node cluster (deploy/cluster-up,
tests/lib/mgcluster.py) whose leaders snapshot every MG_SNAPSHOT_THRESHOLD=64 entries and
keep MG_SNAPSHOT_TRAILING=32 behind each (test switches over 4096 and 8192; RocksDB is
flushed every second, MG_FLUSH_MAX_AGE_MS, so the snapshots' trailing counts are not raised
for undurable entries). Node 3 is killed (kill -9); hundreds of PUTs, overwrites and
DELETEs go through nodes 1 and 2, so the leaders' logs no longer hold what node 3 missed.
Node 3 is restarted: libraft sends it InstallSnapshot (a descriptor only), and each shard
it is behind in must copy its range from the leader (event=install_done, /metrics
metagate_meta_installs_total), then serve ListBuckets, LIST and GET of every object through
node 3, byte for byte, and take new writes.

Shown to fail without the transfer: MG_FAULT_NO_CHECKPOINT=1 (the nodes inherit it) keeps
the old wait (event=install_needed) and node 3 never installs.

Needs a Ceph: MG_TEST_DATA_RADOS names a deploy/ceph-up data.rados.json; without it the
suite is skipped."""

import concurrent.futures
import os
import re
import time
import xml.etree.ElementTree as ET

import mgcluster
import mgtest
import s3raw

BEFORE = 40   # objects written while node 3 is up
AFTER = 500   # objects written while it is down (many times the trailing 32 entries)
SWITCHES = {"MG_FLUSH_MAX_AGE_MS": "1000", "MG_SNAPSHOT_THRESHOLD": "64",
            "MG_SNAPSHOT_TRAILING": "32"}


def body_of(bucket, key, gen=0):
    return ("%s/%s/%d/" % (bucket, key, gen)).encode() * (1 + len(key) % 7)


SHARD_RE = re.compile(r'^metagate_shard_info\{shard="(\d+)",.*replicas="([^"]*)".*'
                      r'standby="([^"]*)"', re.M)


def members(body):
    """{shard: (voters, standbys)} (sets of node ids) of a node's /metrics."""
    ids = lambda t: {int(x) for x in t.split(",") if x}
    return {int(m.group(1)): (ids(m.group(2)), ids(m.group(3))) for m in SHARD_RE.finditer(body)}


class Client(s3raw.Client):
    """s3raw's client with a 15 s socket timeout (not 120 s): a request the cluster never
    answers fails here, with the nodes' logs, instead of running the suite out of time."""

    def connection(self, timeout=15):
        return super().connection(timeout)


def clients_of(cluster):
    """A client per node, with the cluster's first user's keys."""
    u = cluster.users[0]
    return [Client(e, u["access_key"], u["secret_key"]) for e in cluster.endpoints]


class ClusterJoinTest(mgtest.S3TestCase):
    @classmethod
    def setUpClass(cls):
        data = mgcluster.rados_data("join-%d" % os.getpid())
        for k, v in SWITCHES.items():  # the nodes (and the restart) inherit them
            os.environ[k] = v
        cls.workdir = os.path.join(mgtest.TMP, "cluster-join")
        cls.cluster = mgcluster.Cluster(os.environ["MG_BIN"], cls.workdir, n=3, base={"data": data})
        cls.clients = clients_of(cls.cluster.start())

    @classmethod
    def tearDownClass(cls):
        for k in SWITCHES:
            os.environ.pop(k, None)
        cls.cluster.stop()

    def req(self, node, method, path, **kw):
        try:
            return self.clients[node].request(method, path, **kw)
        except Exception:
            return None

    def until_ok(self, nodes, method, path, want=(200,), deadline_s=30, **kw):
        """method path through nodes in turn until a status in want; the response or None."""
        deadline = time.monotonic() + deadline_s
        n = 0
        while time.monotonic() < deadline:
            r = self.req(nodes[n % len(nodes)], method, path, **kw)
            if r is not None and r.status in want:
                return r
            n += 1
            time.sleep(0.1)
        return None

    def log_of(self, k):
        with open(os.path.join(self.cluster.node_dir(k), "log"), errors="replace") as f:
            return f.read()

    def test_lagging_replica_installs_checkpoint(self):
        cl = self.cluster
        t0 = time.monotonic()
        prefix = mgtest.bucket_name("join")
        buckets = ["%s-a" % prefix, "%s-b" % prefix]
        expect = {b: {} for b in buckets}  # key -> body
        for i, b in enumerate(buckets):
            self.assertIsNotNone(self.until_ok([i % 3], "PUT", "/" + b), "CreateBucket " + b)
        for i in range(BEFORE):
            b, key = buckets[i % 2], "before/%04d" % i
            self.assertIsNotNone(self.until_ok([i % 3], "PUT", "/%s/%s" % (b, key),
                                               body=body_of(b, key)), "PUT " + key)
            expect[b][key] = body_of(b, key)
        log3_at_kill = len(self.log_of(3))
        cl.kill(3)
        # Through nodes 1 and 2 only: new objects, overwrites of old ones, deletes.
        def put_after(i):
            b, key = buckets[i % 2], "after/%04d" % i
            r = self.until_ok([i % 2, (i + 1) % 2], "PUT", "/%s/%s" % (b, key),
                              body=body_of(b, key))
            return b, key, r is not None

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            for half in (range(AFTER // 2), range(AFTER // 2, AFTER)):
                for b, key, ok in ex.map(put_after, half):
                    self.assertTrue(ok, "PUT %s with node 3 down" % key)
                    expect[b][key] = body_of(b, key)
                time.sleep(2.5)  # a flush: later snapshots truncate past node 3's entries
        for i in range(0, BEFORE, 4):
            b, key = buckets[i % 2], "before/%04d" % i
            self.assertIsNotNone(self.until_ok([0, 1], "PUT", "/%s/%s" % (b, key),
                                               body=body_of(b, key, 1)), "overwrite " + key)
            expect[b][key] = body_of(b, key, 1)
        for i in range(1, BEFORE, 4):
            b, key = buckets[i % 2], "before/%04d" % i
            self.assertIsNotNone(self.until_ok([0, 1], "DELETE", "/%s/%s" % (b, key),
                                               want=(204,)), "DELETE " + key)
            del expect[b][key]
        t_written = time.monotonic()
        cl.restart(3)
        # Node 3's shards install a checkpoint from their leaders.
        deadline = time.monotonic() + 60
        installs = 0
        while time.monotonic() < deadline:
            m = re.search(r"^metagate_meta_installs_total (\d+)", cl.metrics(3), re.M)
            installs = int(m.group(1)) if m else 0
            log = self.log_of(3)[log3_at_kill:]
            pending = len(re.findall(r"event=install_pending", log))
            if installs > 0 and installs >= len(set(re.findall(
                    r"event=install_pending group=(\d+)", log))):
                break
            time.sleep(0.5)
        t_installed = time.monotonic()
        log = self.log_of(3)[log3_at_kill:]
        self.assertGreater(installs, 0, "node 3 installed no checkpoint (pending %d):\n%s" % (
            pending, "\n".join(log.splitlines()[-30:])))
        done = re.findall(r"event=install_done shard=(\d+) .*rows=(\d+) bytes=(\d+)", log)
        self.assertTrue(done, "no event=install_done in node 3's log")
        # Everything through node 3, byte for byte.
        r = self.until_ok([2], "GET", "/")
        self.assertIsNotNone(r, "ListBuckets via node 3")
        names = sorted(e.text for e in ET.fromstring(r.body).iter() if e.tag.endswith("}Name"))
        self.assertEqual(names, sorted(buckets))
        for b in buckets:
            keys = None
            for _ in range(100):
                keys = mgcluster.list_keys(self.clients[2], b)
                if keys is not None:
                    break
                time.sleep(0.2)
            self.assertIsNotNone(keys, "LIST %s via node 3" % b)
            self.assertEqual(keys, sorted(expect[b]), "LIST %s via node 3" % b)
            for key, want in expect[b].items():
                r = self.until_ok([2], "GET", "/%s/%s" % (b, key), want=(200,), deadline_s=10)
                self.assertIsNotNone(r, "GET %s/%s via node 3" % (b, key))
                self.assertEqual(r.body, want, "GET %s/%s via node 3" % (b, key))
        # And it takes writes, read back through the others.
        b, key = buckets[0], "after-install"
        self.assertIsNotNone(self.until_ok([2], "PUT", "/%s/%s" % (b, key), body=b"x" * 100))
        r = self.until_ok([0, 1], "GET", "/%s/%s" % (b, key))
        self.assertIsNotNone(r)
        self.assertEqual(r.body, b"x" * 100)
        expect[b][key] = b"x" * 100
        type(self).expect = expect  # test_node4_joins reads them back through node 4
        print("cluster_join: %d objects (%d written with node 3 down); installs on node 3: %d "
              "%s; write %.1f s, install %.1f s after restart, total %.1f s" % (
                  sum(len(v) for v in expect.values()), AFTER, installs,
                  ["shard %s rows %s bytes %s" % d for d in done], t_written - t0,
                  t_installed - t_written, time.monotonic() - t0))


    def test_node4_joins(self):
        """A 4th node started with a 4-node list (the running nodes list 3) joins: every
        shard keeps 3 voters, node 4 is a voter of some and a replica (voter or standby)
        of all, and everything reads back through it byte for byte."""
        cl = self.cluster
        expect = getattr(type(self), "expect", None)
        if expect is None:
            self.skipTest("needs test_lagging_replica_installs_checkpoint's objects")
        t0 = time.monotonic()
        cl.add_node(4)
        c4 = clients_of(cl)[3]
        self.clients = clients_of(cl)  # until_ok through node 4 too
        deadline = time.monotonic() + 60
        got = {}
        while time.monotonic() < deadline:
            got = members(cl.metrics(1))
            ok = bool(got) and all(len(v) == 3 and not (v & s) for v, s in got.values())
            ok = ok and all(4 in v | s for v, s in got.values())
            ok = ok and any(4 in v for v, s in got.values())
            ok = ok and all(v | s == {1, 2, 3, 4} for v, s in got.values())
            if ok:
                break
            time.sleep(0.5)
        t_placed = time.monotonic()
        self.assertTrue(ok, "shard members via node 1: %s\n%s" % (got, cl.logs(20)))
        for b, objs in expect.items():
            keys = None
            for _ in range(150):
                keys = mgcluster.list_keys(c4, b)
                if keys == sorted(objs):
                    break
                time.sleep(0.2)
            self.assertEqual(keys, sorted(objs), "LIST %s via node 4\n%s" % (b, cl.logs(30)))
            for key, want in objs.items():
                r = None
                for _ in range(50):
                    try:
                        r = c4.request("GET", "/%s/%s" % (b, key))
                    except Exception:
                        r = None
                    if r is not None and r.status == 200:
                        break
                    time.sleep(0.2)
                self.assertIsNotNone(r, "GET %s/%s via node 4\n%s" % (b, key, cl.logs(30)))
                self.assertEqual((r.status, r.body), (200, want), "GET %s/%s via node 4" % (b, key))
        b = sorted(expect)[0]
        r = self.until_ok([3], "PUT", "/%s/via-node4" % b, body=b"n4" * 50)
        self.assertIsNotNone(r, "PUT via node 4\n%s" % cl.logs(30))
        r = self.until_ok([0, 1, 2], "GET", "/%s/via-node4" % b)
        self.assertEqual(r.body if r else None, b"n4" * 50)
        print("node4: members %s; placed %.1f s after start; %d objects read through node 4; "
              "total %.1f s" % (sorted((k, sorted(v), sorted(s)) for k, (v, s) in got.items()),
                                t_placed - t0, sum(len(v) for v in expect.values()),
                                time.monotonic() - t0))


if __name__ == "__main__":
    mgtest.main()
