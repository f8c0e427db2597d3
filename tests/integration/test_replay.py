# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=900
"""The Raft log is the write-ahead log (issue 7, done-when 2). With the
flusher held back (meta.flusher = "hold": RocksDB, whose own WAL is off, is
never flushed while the server runs), 10,000 acknowledged PUTs and DELETEs
exist only in the Raft log when the server is killed with kill -9. After a
restart every acknowledged state must be back, replayed from the log; and a
second kill -9 while that replay runs must lose nothing either. The server's
log must show that the state did come from the log (a shard restored at a
low applied index) rather than from a flushed RocksDB."""

import concurrent.futures
import hashlib
import os
import random
import re
import signal
import subprocess
import time

import mgserver
import mgtest
import s3raw
from mgtest import S3TestCase

OPS = 10000
KEYS = 2000
THREADS = 16


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Replay(S3TestCase):
    def setUp(self):
        self.workdir = os.path.join(mgtest.TMP, self._testMethodName)
        os.makedirs(self.workdir)
        self.server = mgserver.Server(os.environ["MG_BIN"], self.workdir,
                                      extra_config={"meta": {"flusher": "hold"}}).start()
        self.addCleanup(self.server.stop)
        u = self.server.users[0]
        self.raw = s3raw.Client(self.server.endpoint, u["access_key"], u["secret_key"])
        self.bucket = mgtest.bucket_name("replay")
        r = self.raw.request("PUT", "/" + self.bucket)
        self.assertEqual(r.status, 200, repr(r))

    def run_ops(self):
        """OPS acknowledged operations over KEYS keys; each key is written by one thread
        only, in order, so its final acknowledged state is known exactly."""
        rng = random.Random(7)
        per_key = {}
        plan = [[] for _ in range(THREADS)]
        for i in range(OPS):
            k = rng.randrange(KEYS)
            key = "k/%05d" % k
            if key in per_key and rng.random() < 0.25:
                op = ("DELETE", key, None)
                per_key[key] = None
            else:
                size = rng.choice([0, 100, 1000, 8192])  # 8 KiB: blob-backed
                data = rng.randbytes(size) + b"#%d" % i
                op = ("PUT", key, data)
                per_key[key] = sha(data)
            plan[k % THREADS].append(op)

        def worker(ops):
            c = s3raw.Client(self.server.endpoint, self.raw.access_key, self.raw.secret)
            for method, key, data in ops:
                r = c.request(method, s3raw.key_path(self.bucket, key),
                              body=data if data is not None else b"")
                want = 200 if method == "PUT" else 204
                if r.status != want:
                    return "%s %s: %r" % (method, key, r)
            return None

        with concurrent.futures.ThreadPoolExecutor(THREADS) as ex:
            errors = [e for e in ex.map(worker, plan) if e]
        self.assertEqual(errors, [])
        return per_key

    def verify(self, expect):
        def check(item):
            key, state = item
            c = s3raw.Client(self.server.endpoint, self.raw.access_key, self.raw.secret)
            g = c.request("GET", s3raw.key_path(self.bucket, key))
            got = sha(g.body) if g.status == 200 else (None if g.status == 404 else "?%d" % g.status)
            return None if got == state else "%s: want %s got %s" % (key, state, got)

        with concurrent.futures.ThreadPoolExecutor(THREADS) as ex:
            problems = [p for p in ex.map(check, expect.items()) if p]
        self.assertEqual(problems, [], "\n".join(problems[:20]))

    def restored_indexes(self, since):
        """applied= of every event=shard_restore line the server logged after offset since."""
        with open(self.server.log_file, "rb") as f:
            f.seek(since)
            text = f.read().decode("utf-8", "replace")
        return [int(m) for m in re.findall(r"event=shard_restore shard=\d+ applied=(\d+)", text)]

    def test_kill9_replays_from_log(self):
        t0 = time.monotonic()
        expect = self.run_ops()
        t_ops = time.monotonic() - t0
        self.server.kill9()
        mark = os.path.getsize(self.server.log_file)
        t1 = time.monotonic()
        self.server.start(same_port=True)
        t_replay = time.monotonic() - t1
        applied = self.restored_indexes(mark)
        # Held flusher: RocksDB holds (almost) nothing of the 10,000 entries.
        self.assertTrue(applied and max(applied) < 100, applied)
        self.verify(expect)
        print("# %d ops acknowledged in %.1f s; kill -9; restart replayed them in %.1f s "
              "(shards restored at applied=%s); %d keys verified"
              % (OPS, t_ops, t_replay, applied, len(expect)), flush=True)

        # A second kill -9 in the middle of the replay loses nothing either.
        self.server.kill9()
        for delay in (0.05, 0.3):
            proc = subprocess.Popen(
                [self.server.binary, "serve", "--config", self.server.config_file,
                 "--listen", "127.0.0.1:%d" % self.server.port, "--data", self.server.data_dir],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            time.sleep(delay)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.server.start(same_port=True)
        self.verify(expect)
        print("# killed twice more during replay (after 50 ms and 300 ms); all %d keys intact"
              % len(expect), flush=True)


if __name__ == "__main__":
    mgtest.main()
