# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=600
"""Issue 9 done-when 3: a corrupted byte in a stored blob is never served.

One server of its own (scrubber every 300 ms at 64 MiB/s through the
MG_SCRUB_* variables, meta/scrub.h). Objects are PUT (a 3 MiB one, a
multipart one of 5 MiB + 1 MiB, an untouched 2 MiB control), then one byte
of the 3 MiB object's blob (in its 64 KiB chunk 24) and one of the multipart
object's second part are flipped on disk, found under data/blobs/ by the
bytes written there. Then, with the server still running:
  - a full GET, a ranged GET over the bad chunk and a full GET of the
    multipart object fail loudly: an error status, or the connection cut
    mid-body (never a complete response, never wrong bytes);
  - a ranged GET of an untouched chunk of the same objects and a GET of the
    control object return the right bytes;
  - the scrubber names both objects in /metrics
    (metagate_scrub_failing_object) and in the log
    (event=scrub_checksum_failure);
and, stopped: `metagate admin fsck --data DIR` refuses while the server
runs, then reports both checksum failures (table and JSON line); after a
PUT killed between its blob write and its metadata commit it reports that
blob as an orphan, which --repair frees."""

import http.client
import json
import os
import re
import subprocess
import threading
import time
import urllib.request

import mgserver
import mgtest
import s3raw
from mgtest import S3TestCase, payload

KIB = 1 << 10
MIB = 1 << 20
CHUNK = 64 * KIB
BIG_SIZE = 3 * MIB + 5
BIG_BAD = 24 * CHUNK + 100          # the flipped byte of "big" (chunk 24)
PART1 = 5 * MIB
PART2 = MIB + 7
MPU_BAD = PART1 + 300 * KIB + 3     # the flipped byte of "mpu" (its second part)
SCRUB_ENV = {"MG_SCRUB_DELAY_MS": "0", "MG_SCRUB_PERIOD_MS": "300",
             "MG_SCRUB_BYTES_PER_SEC": str(64 * MIB)}


def flip_on_disk(blobs_dir, data, offset):
    """Flips the byte at data[offset] where data's bytes sit in a blob file
    (found by the 64 bytes starting there, unique in a payload()). Returns
    (path, file offset)."""
    marker = data[offset:offset + 64]
    hits = []
    for root, _, files in os.walk(blobs_dir):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                content = f.read()
            at = content.find(marker)
            while at >= 0:
                hits.append((path, at))
                at = content.find(marker, at + 1)
    if len(hits) != 1:
        raise AssertionError("marker found %d times under %s" % (len(hits), blobs_dir))
    path, at = hits[0]
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))
        f.flush()
        os.fsync(f.fileno())
    return path, at


def flip_in_rados(server, data, offset):
    """flip_on_disk for data.backend rados (MG_TEST_DATA_RADOS): the byte is
    flipped in the stripe object holding it, in the server's namespace, with
    the rados CLI (get, flip, put: write_full keeps the object's xattrs, so its
    stored chunk CRCs no longer match). Returns (object name, offset)."""
    marker = data[offset:offset + 64]
    tmp = os.path.join(server.workdir, "stripe")
    hits = []
    for name in server.rados_stripes():
        server.rados_cmd("get", name, tmp)
        with open(tmp, "rb") as f:
            content = f.read()
        at = content.find(marker)
        if at >= 0:
            hits.append((name, at, content))
    if len(hits) != 1:
        raise AssertionError("marker found in %d RADOS objects" % len(hits))
    name, at, content = hits[0]
    with open(tmp, "wb") as f:
        f.write(content[:at] + bytes([content[at] ^ 0x5A]) + content[at + 1:])
    server.rados_cmd("put", name, tmp)
    return name, at


class Integrity(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = os.path.join(mgtest.TMP, "integrity")
        os.makedirs(cls.workdir, exist_ok=True)
        os.environ.update(SCRUB_ENV)  # inherited by the server process
        cls.server = mgserver.Server(os.environ["MG_BIN"], cls.workdir).start()
        u = cls.server.users[0]
        cls.raw = s3raw.Client(cls.server.endpoint, u["access_key"], u["secret_key"])
        cls.bucket = mgtest.bucket_name("integ")
        cls.check(cls.raw.request("PUT", "/" + cls.bucket), 200)
        cls.big = payload(BIG_SIZE, seed=1)
        cls.ctl = payload(2 * MIB, seed=4)
        cls.check(cls.raw.request("PUT", cls.path("big"), body=cls.big), 200)
        cls.check(cls.raw.request("PUT", cls.path("ctl"), body=cls.ctl), 200)
        cls.mpu = payload(PART1, seed=2) + payload(PART2, seed=3)
        cls.put_multipart("mpu", [cls.mpu[:PART1], cls.mpu[PART1:]])
        # The bytes are on disk (every PUT fsyncs before it answers); flip them under the
        # running server. Reads go through the page cache, which now holds the bad byte.
        blobs = os.path.join(cls.server.data_dir, "blobs")
        if cls.server.rados:
            cls.flipped = [flip_in_rados(cls.server, cls.big, BIG_BAD),
                           flip_in_rados(cls.server, cls.mpu, MPU_BAD)]
        else:
            cls.flipped = [flip_on_disk(blobs, cls.big, BIG_BAD),
                           flip_on_disk(blobs, cls.mpu, MPU_BAD)]
        print("# flipped %s" % cls.flipped, flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        for k in SCRUB_ENV:
            os.environ.pop(k, None)

    @classmethod
    def path(cls, key):
        return s3raw.key_path(cls.bucket, key)

    @staticmethod
    def check(r, status):
        if r.status != status:
            raise AssertionError("expected %d: %r" % (status, r))
        return r

    @classmethod
    def put_multipart(cls, key, parts):
        r = cls.check(cls.raw.request("POST", cls.path(key), query=[("uploads", "")]), 200)
        upload_id = re.search(rb"<UploadId>([^<]+)</UploadId>", r.body).group(1).decode()
        etags = []
        for n, part in enumerate(parts, 1):
            r = cls.check(cls.raw.request("PUT", cls.path(key), body=part, query=[
                ("partNumber", str(n)), ("uploadId", upload_id)]), 200)
            etags.append(r.headers["etag"])
        body = ("<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
            "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e)
            for n, e in enumerate(etags, 1))).encode()
        cls.check(cls.raw.request("POST", cls.path(key), body=body,
                                  query=[("uploadId", upload_id)]), 200)

    def get(self, key, rng=None):
        """GET with the response read to its end. Returns (status, body, cut):
        cut is the exception that ended the body early, or None."""
        h = {"Host": self.raw.hostport}
        if rng is not None:
            h["Range"] = "bytes=%d-%d" % rng
        path = self.path(key)
        s3raw.sign_v4("GET", path, [], h, s3raw.hashlib.sha256(b"").hexdigest(),
                      self.raw.access_key, self.raw.secret, self.raw.region, None)
        conn = self.raw.connection(timeout=30)
        try:
            conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
            for k, v in h.items():
                conn.putheader(k, v)
            conn.endheaders()
            r = conn.getresponse()
            body = bytearray()
            try:
                while True:
                    piece = r.read(256 * KIB)
                    if not piece:
                        break
                    body += piece
                cut = None
                if r.length not in (None, 0):
                    cut = "short body: %d bytes missing" % r.length
            except (http.client.IncompleteRead, ConnectionError, OSError) as e:
                cut = e
            return r.status, bytes(body), cut
        finally:
            conn.close()

    def assertLoudFailure(self, key, rng, expected):
        status, body, cut = self.get(key, rng)
        print("# GET %s range=%s -> status %d, %d bytes, cut=%r"
              % (key, rng, status, len(body), cut), flush=True)
        if status >= 400:
            return
        self.assertIn(status, (200, 206))
        self.assertIsNotNone(cut, "a complete %d response for corrupt data (%s)" % (
            status, "the corrupt bytes" if body != expected else "the right bytes?!"))
        # What was sent before the cut must be the object's real bytes.
        self.assertEqual(body, expected[:len(body)], "wrong bytes before the cut")

    def assertGood(self, key, rng, expected):
        status, body, cut = self.get(key, rng)
        self.assertIsNone(cut)
        self.assertEqual(status, 200 if rng is None else 206)
        self.assertEqual(body, expected)

    def test_a_full_get_fails(self):
        self.assertLoudFailure("big", None, self.big)

    def test_b_ranged_get_over_bad_chunk_fails(self):
        rng = (BIG_BAD - 1000, BIG_BAD + 1000)
        self.assertLoudFailure("big", rng, self.big[rng[0]:rng[1] + 1])

    def test_c_multipart_get_fails(self):
        self.assertLoudFailure("mpu", None, self.mpu)

    def test_d_untouched_ranges_still_served(self):
        self.assertGood("big", (0, CHUNK - 1), self.big[:CHUNK])
        rng = (BIG_BAD + CHUNK, BIG_BAD + 3 * CHUNK)  # past chunk 24
        self.assertGood("big", rng, self.big[rng[0]:rng[1] + 1])
        self.assertGood("mpu", (MIB, 2 * MIB - 1), self.mpu[MIB:2 * MIB])
        self.assertGood("ctl", None, self.ctl)

    def metrics(self):
        with urllib.request.urlopen(self.server.endpoint + "/metrics", timeout=10) as r:
            return r.read().decode()

    def test_e_scrubber_reports_both(self):
        m = self.metrics()
        self.assertTrue(re.search(r"^metagate_scrub_enabled 1$", m, re.M),
                        "no scrubber in this server (meta_scrub_start not called)")
        deadline = time.monotonic() + 30
        want = ['key="big"', 'key="mpu"']
        while time.monotonic() < deadline:
            m = self.metrics()
            failing = [l for l in m.splitlines()
                       if l.startswith("metagate_scrub_failing_object{")]
            if all(any(w in l and self.bucket in l for l in failing) for w in want):
                break
            time.sleep(0.2)
        figures = {l.split()[0]: l.split()[1] for l in m.splitlines()
                   if l.startswith("metagate_scrub_") and "{" not in l}
        print("# scrub figures %s" % figures, flush=True)
        print("# failing %s" % failing, flush=True)
        for w in want:
            self.assertTrue(any(w in l and self.bucket in l for l in failing), (w, failing))
        self.assertGreaterEqual(int(figures["metagate_scrub_checksum_failures_total"]), 2)
        self.assertGreaterEqual(int(figures["metagate_scrub_failing_objects"]), 2)
        self.assertGreaterEqual(int(figures["metagate_scrub_passes_total"]), 1)
        self.assertGreater(int(figures["metagate_scrub_bytes_scanned_total"]), 0)
        with open(self.server.log_file, "rb") as f:
            log = f.read().decode("utf-8", "replace")
        for key in ("big", "mpu"):
            line = "event=scrub_checksum_failure bucket=%s key=%s " % (self.bucket, key)
            self.assertIn(line, log)

    def test_f_fsck_reports_checksum_failures(self):
        cmd = [os.environ["MG_BIN"], "admin", "fsck", "--data", self.server.data_dir]
        cmd += self.server.fsck_args()
        busy = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              env=self.server.rados_env())
        print("# fsck while serving: rc %d: %s" % (busy.returncode, busy.stderr.strip()),
              flush=True)
        self.assertEqual(busy.returncode, 1)
        self.assertIn("in use", busy.stderr)
        self.server.stop()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env=self.server.rados_env())
        print("".join("# " + l + "\n" for l in r.stdout.splitlines()), end="", flush=True)
        self.assertEqual(r.returncode, 3, r.stderr)
        report = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(report["checksum_failures"], 2, report)
        self.assertEqual(report["dangling"], 0, report)
        bad = sorted(p["key"] for p in report["problems"] if p["kind"] == "checksum")
        self.assertEqual(bad, ["big", "mpu"])
        self.assertRegex(r.stdout, r"checksum +%s +big " % self.bucket)

    def fsck(self, *extra):
        cmd = [os.environ["MG_BIN"], "admin", "fsck", "--data", self.server.data_dir]
        cmd += self.server.fsck_args()
        r = subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=120,
                           env=self.server.rados_env())
        print("".join("# " + l + "\n" for l in r.stdout.splitlines()), end="", flush=True)
        return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])

    def test_g_fsck_orphan(self):
        """An orphan: a PUT killed between its blob fsync and its metadata commit (the
        MG_FAULT_PAUSE_BEFORE_COMMIT switch of meta/orphan.c), the collector off so it
        stays; fsck reports it, --repair frees it, the checksum failures stay."""
        self.server.stop()
        flag = os.path.join(self.workdir, "paused")
        env = {"MG_FAULT_PAUSE_BEFORE_COMMIT": flag, "MG_ORPHAN_PERIOD_MS": "0"}
        os.environ.update(env)
        try:
            self.server.start()
        finally:
            for k in env:
                os.environ.pop(k, None)
        u = self.server.users[0]
        raw = s3raw.Client(self.server.endpoint, u["access_key"], u["secret_key"])
        data = payload(2 * MIB, seed=7)
        t = threading.Thread(target=lambda: self.swallow(
            raw.request, "PUT", self.path("orphan"), body=data), daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(flag), "the PUT never paused\n" + self.server.log_tail())
        seg, off, length = open(flag).read().split()
        self.server.kill9()
        t.join(10)
        rc, report = self.fsck()
        self.assertEqual(rc, 3)
        self.assertEqual((report["orphans"], report["orphan_bytes"]), (1, 2 * MIB), report)
        self.assertEqual(report["checksum_failures"], 2, report)
        orphans = [p for p in report["problems"] if p["kind"] == "orphan"]
        self.assertEqual([(p["segment"], p["offset"], p["length"]) for p in orphans],
                         [(int(seg, 16), int(off), int(length))])
        rc, report = self.fsck("--repair")
        self.assertEqual(rc, 3)  # the checksum failures are not repaired
        self.assertEqual(report["orphans_freed"], 1, report)
        rc, report = self.fsck()
        self.assertEqual((report["orphans"], report["dangling"], report["checksum_failures"]),
                         (0, 0, 2), report)

    @staticmethod
    def swallow(fn, *args, **kw):
        try:
            fn(*args, **kw)
        except Exception:  # the server is killed under it
            pass


if __name__ == "__main__":
    mgtest.main()
