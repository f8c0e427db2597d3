# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=900
"""kill -9 right after acknowledged writes (issue 2, done-when 6; STYLE.md 7:
every acknowledged write path has a kill -9 test). Writers PUT, overwrite
and DELETE objects on their own keys; the server is SIGKILLed while they
run, restarted on the same data directory, and every acknowledged state
must be there byte for byte. The one operation each writer had in flight
may have landed or not, but never half: every key that is listed must hold
exactly the bytes of one of its PUTs."""

import hashlib
import os
import random
import threading
import time
import xml.etree.ElementTree as ET

import mgserver
import mgtest
import s3raw
from mgtest import S3TestCase

MIB = 1 << 20
SIZES = [0, 1, 1024, 4097, 65536, 300 * 1024, MIB + 1, 3 * MIB]
WRITERS = 6


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Ledger:
    """What the client knows: per key, the acknowledged state (a sha256, or
    None for deleted) and the states of the unacknowledged operations sent
    since (the one in flight when the server died, and retries after)."""

    def __init__(self):
        self.acked = {}
        self.pending = {}
        self.counts = {"put": 0, "overwrite": 0, "delete": 0}
        self.lock = threading.Lock()

    def begin(self, key, state):
        with self.lock:
            self.pending.setdefault(key, set()).add(state)

    def ack(self, key, state, kind):
        with self.lock:
            self.acked[key] = state
            self.pending.pop(key, None)
            self.counts[kind] += 1

    def allowed(self, key):
        """States a key may be in after a crash."""
        with self.lock:
            states = set()
            if key in self.acked:
                states.add(self.acked[key])
            else:
                states.add(None)
            if key in self.pending:
                states |= self.pending[key]
            return states


class Durability(S3TestCase):
    def setUp(self):
        self.workdir = os.path.join(mgtest.TMP, self._testMethodName)
        os.makedirs(self.workdir)
        self.server = mgserver.Server(os.environ["MG_BIN"], self.workdir).start()
        self.addCleanup(self.server.stop)
        u = self.server.users[0]
        self.raw = s3raw.Client(self.server.endpoint, u["access_key"], u["secret_key"])
        self.bucket = mgtest.bucket_name("dur")
        r = self.raw.request("PUT", "/" + self.bucket)
        self.assertEqual(r.status, 200, repr(r))

    def put(self, key, data):
        return self.raw.request("PUT", s3raw.key_path(self.bucket, key), body=data)

    def verify(self, ledger):
        """Every acknowledged key holds its acknowledged bytes; deleted keys
        are gone; any other listed key holds one of its PUTs. Returns the
        number of keys checked."""
        listed = set()
        token = None
        while True:
            q = [("list-type", "2"), ("max-keys", "1000")]
            if token:
                q.append(("continuation-token", token))
            r = self.raw.request("GET", "/" + self.bucket, query=q)
            self.assertEqual(r.status, 200, repr(r))
            root = ET.fromstring(r.body)
            ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            for c in root.findall(ns + "Contents"):
                listed.add(c.find(ns + "Key").text)
            t = root.find(ns + "NextContinuationToken")
            if root.findtext(ns + "IsTruncated") != "true" or t is None:
                break
            token = t.text
        problems = []
        keys = set(ledger.acked) | set(ledger.pending) | listed
        for key in sorted(keys):
            allowed = ledger.allowed(key)
            g = self.raw.request("GET", s3raw.key_path(self.bucket, key))
            if g.status == 200:
                state = sha(g.body)
            elif g.status == 404 and g.code == "NoSuchKey":
                state = None
            else:
                problems.append("%s: GET answered %r" % (key, g))
                continue
            if state not in allowed:
                problems.append("%s: state %s not in allowed %s (acked %s)"
                                % (key, state, allowed, ledger.acked.get(key, "never")))
            if (key in listed) != (state is not None):
                problems.append("%s: listed=%s but GET state=%s" % (key, key in listed, state))
        self.assertEqual(problems, [], "\n".join(problems[:20]))
        return len(keys)

    def writer(self, n, ledger, stop, rng):
        """Writer n owns keys w<n>/...: new PUTs, overwrites, deletes."""
        mine = []
        i = 0
        while not stop.is_set():
            roll = rng.random()
            try:
                if mine and roll < 0.15:
                    key = rng.choice(mine)
                    ledger.begin(key, None)
                    r = self.raw.request("DELETE", s3raw.key_path(self.bucket, key))
                    if r.status == 204:
                        ledger.ack(key, None, "delete")
                        mine.remove(key)
                    continue
                if mine and roll < 0.3:
                    key, kind = rng.choice(mine), "overwrite"
                else:
                    key, kind = "w%d/%06d" % (n, i), "put"
                    i += 1
                data = os.urandom(rng.choice(SIZES))
                ledger.begin(key, sha(data))
                r = self.put(key, data)
                if r.status == 200:
                    ledger.ack(key, sha(data), kind)
                    if kind == "put":
                        mine.append(key)
            except Exception:
                # The server is gone: the request in flight stays pending.
                time.sleep(0.01)

    def crash_cycle(self, ledger, seconds, seed):
        stop = threading.Event()
        threads = [threading.Thread(target=self.writer,
                                    args=(n + 10 * seed, ledger, stop, random.Random(seed * 100 + n)))
                   for n in range(WRITERS)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        acked_before = dict(ledger.counts)
        self.server.kill9()                  # while the writers are mid-request
        stop.set()
        for t in threads:
            t.join()
        self.server.start(same_port=True)
        checked = self.verify(ledger)
        print("# kill -9 #%d: acked %s before the kill; %d keys checked after restart, 0 lost"
              % (seed, acked_before, checked), flush=True)

    def test_kill9_while_writing(self):
        ledger = Ledger()
        # A completed multipart upload is an acknowledged write too.
        raw = self.raw
        r = raw.request("POST", s3raw.key_path(self.bucket, "mp/obj"), query=[("uploads", "")])
        self.assertEqual(r.status, 200, repr(r))
        upload_id = r.body.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
        parts = [os.urandom(5 * MIB), os.urandom(1000)]
        xml = "<CompleteMultipartUpload>"
        for n, data in enumerate(parts, 1):
            r = raw.request("PUT", s3raw.key_path(self.bucket, "mp/obj"), body=data,
                            query=[("partNumber", str(n)), ("uploadId", upload_id)])
            self.assertEqual(r.status, 200, repr(r))
            xml += "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, r.headers["etag"])
        xml += "</CompleteMultipartUpload>"
        r = raw.request("POST", s3raw.key_path(self.bucket, "mp/obj"), body=xml.encode(),
                        query=[("uploadId", upload_id)])
        self.assertEqual(r.status, 200, repr(r))
        ledger.ack("mp/obj", sha(b"".join(parts)), "put")
        for cycle in (1, 2):
            self.crash_cycle(ledger, 3.0, cycle)
        self.assertGreater(ledger.counts["put"], 50, ledger.counts)

    def test_kill9_right_after_acked_puts(self):
        ledger = Ledger()
        for i in range(100):
            data = os.urandom(SIZES[i % len(SIZES)] if i % 10 else 1024)
            r = self.put("quiet/%03d" % i, data)
            self.assertEqual(r.status, 200, repr(r))
            ledger.ack("quiet/%03d" % i, sha(data), "put")
        bucket2 = mgtest.bucket_name("dur2")
        self.assertEqual(self.raw.request("PUT", "/" + bucket2).status, 200)
        self.server.kill9()
        self.server.start(same_port=True)
        self.verify(ledger)
        r = self.raw.request("HEAD", "/" + bucket2)
        self.assertEqual(r.status, 200, "bucket created right before kill -9 is gone")

    def test_graceful_restart(self):
        data = os.urandom(100000)
        self.assertEqual(self.put("g", data).status, 200)
        rc = self.server.stop()
        self.assertEqual(rc, 0, "SIGTERM exit status\n" + self.server.log_tail())
        self.server.start(same_port=True)
        g = self.raw.request("GET", s3raw.key_path(self.bucket, "g"))
        self.assertEqual((g.status, sha(g.body)), (200, sha(data)))


if __name__ == "__main__":
    mgtest.main()
