# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=300
"""Power cuts, not just process death (issue 9, done-when 2). metagate runs
with its data directory on mg_powercut (tests/fault/powercut/powercut.c), a
FUSE file system that keeps every write not yet fsynced in memory and drops
it on a "power cut", as Jepsen's LazyFS does. Writers PUT objects of 0 B to
3 MiB (inline, 64 KiB blobs in shared segments, larger ones in files of
their own), overwrite, DELETE and complete multipart uploads while the test
records every acknowledged state; then the power is cut, the
server is SIGKILLed, the file system unmounted and remounted fresh over the
same backing directory (the durable state only), and the server restarted:
every acknowledged state must be back byte for byte, and every key must hold
the bytes of one of its acknowledged or in-flight writes (nothing
half-visible). Several rounds; the last restart runs on the backing directory
mounted plainly (no FUSE).

It needs root and /dev/fuse; without them it prints a loud SKIP. The file
system binary is MG_POWERCUT_BIN, else tests/fault/powercut/mg_powercut in
the build directory of MG_BIN (built by the Release build when libfuse3 is
found; deploy/deps.sh installs libfuse3-dev and fuse3). A build with
-DMG_FAULT_SKIP_BLOB_FSYNC=ON (blob acknowledged without its fdatasync) must
fail this suite."""

import os
import random
import subprocess
import threading
import time
import xml.etree.ElementTree as ET

import mgserver
import mgtest
import s3raw
import test_durability as dur
from mgtest import S3TestCase

KIB = 1 << 10
MIB = 1 << 20
WRITERS = 4
ROUNDS = 5
WRITE_S = 4.0


sha = dur.sha


def powercut_bin():
    b = os.environ.get("MG_POWERCUT_BIN")
    if b:
        return b
    build = os.path.dirname(os.environ.get("MG_BIN", ""))
    return os.path.join(build, "tests", "fault", "powercut", "mg_powercut")


def skip_reason():
    if os.geteuid() != 0:
        return "not root (mounting the FUSE file system needs root)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    return None


class Ledger(dur.Ledger):
    """test_durability's ledger (per key: the acknowledged state, and the
    states of operations sent since without an answer), plus multipart
    counts and settling after a verified restart."""

    def __init__(self):
        super().__init__()
        self.counts["multipart"] = 0

    def settle(self, key, state):
        """After a verified restart the key's state is durable and known: what
        was in flight is decided, so it becomes the acknowledged state."""
        with self.lock:
            self.acked[key] = state
            self.pending.pop(key, None)


def mounted(point):
    """From /proc/mounts: after the cut, stat (os.path.ismount) fails with EIO."""
    with open("/proc/mounts") as f:
        return any(line.split()[1] == point for line in f)


class Mount:
    """One mg_powercut process over backing, mounted at point."""

    def __init__(self, binary, backing, point, log):
        self.point = point
        os.makedirs(point, exist_ok=True)
        self.log = open(log, "ab")
        self.proc = subprocess.Popen([binary, backing, point], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + 10
        while not mounted(point):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mg_powercut did not mount %s (exit %s)"
                                   % (point, self.proc.poll()))
            time.sleep(0.02)

    def stats(self):
        with open(os.path.join(self.point, ".powercut"), "rb") as f:
            return dict(line.split() for line in f.read().decode().splitlines())

    def cut(self):
        with open(os.path.join(self.point, ".powercut"), "wb") as f:
            f.write(b"cut")

    def unmount(self):
        if mounted(self.point):
            for _ in range(50):
                r = subprocess.run(["fusermount3", "-u", self.point], capture_output=True)
                if r.returncode == 0:
                    break
                time.sleep(0.1)     # a killed server's last descriptors are still closing
            else:
                print("# fusermount3 -u %s: %s; unmounting lazily"
                      % (self.point, r.stderr.decode().strip()), flush=True)
                subprocess.run(["fusermount3", "-uz", self.point])
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.proc.returncode


class PowerCut(S3TestCase):
    def setUp(self):
        reason = skip_reason()
        if reason:
            print("*** SKIPPED powercut: %s: the power-cut harness did not run" % reason,
                  flush=True)
            self.skipTest(reason)
        self.binary = powercut_bin()
        self.assertTrue(os.access(self.binary, os.X_OK),
                        "no mg_powercut at %s (build it: libfuse3-dev, target mg_powercut; "
                        "or set MG_POWERCUT_BIN)" % self.binary)
        self.workdir = os.path.join(mgtest.TMP, self._testMethodName)
        self.backing = os.path.join(self.workdir, "backing")
        self.point = os.path.join(self.workdir, "data")
        os.makedirs(self.backing)
        self.fslog = os.path.join(self.workdir, "powercut.log")
        self.mount = None
        self.server = None
        self.addCleanup(self.cleanup)

    def cleanup(self):
        if self.server is not None:
            self.server.kill9()
        if self.mount is not None:
            self.mount.unmount()
        if os.path.exists(self.fslog):
            with open(self.fslog, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            for line in [ln for ln in lines if "power cut" in ln or "refus" in ln][-8:]:
                print("# fs: " + line, flush=True)

    def start(self, data_dir):
        u = self.user
        self.server = mgserver.Server(os.environ["MG_BIN"], self.workdir, users=[u],
                                      data_dir=data_dir)
        if self.port:
            self.server.port = self.port
        self.server.start(same_port=self.port is not None)
        self.port = self.server.port
        self.raw = s3raw.Client(self.server.endpoint, u["access_key"], u["secret_key"])

    def put(self, key, data):
        return self.raw.request("PUT", s3raw.key_path(self.bucket, key), body=data)

    def listed(self):
        keys, token = set(), None
        while True:
            q = [("list-type", "2"), ("max-keys", "1000")]
            if token:
                q.append(("continuation-token", token))
            r = self.raw.request("GET", "/" + self.bucket, query=q)
            self.assertEqual(r.status, 200, repr(r))
            root = ET.fromstring(r.body)
            ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
            keys |= {c.find(ns + "Key").text for c in root.findall(ns + "Contents")}
            t = root.find(ns + "NextContinuationToken")
            if root.findtext(ns + "IsTruncated") != "true" or t is None:
                return keys
            token = t.text

    def verify(self, ledger, where):
        """Every key holds its acknowledged state or one in flight; returns
        (keys checked, how many were acknowledged and came back)."""
        listed = self.listed()
        problems, back = [], 0
        for key in sorted(set(ledger.acked) | set(ledger.pending) | listed):
            allowed = ledger.allowed(key)
            try:
                g = self.raw.request("GET", s3raw.key_path(self.bucket, key))
            except Exception as e:   # e.g. the body cut short: a checksum failed mid-stream
                problems.append("%s: GET failed: %r (acked %s)"
                                % (key, e, ledger.acked.get(key, "never")))
                continue
            if g.status == 200:
                state = sha(g.body)
            elif g.status == 404 and g.code == "NoSuchKey":
                state = None
            else:
                problems.append("%s: GET answered %r" % (key, g))
                continue
            if state not in allowed:
                problems.append("%s: holds %s (%d bytes), not one of %s (acked %s)"
                                % (key, state, len(g.body), allowed,
                                   ledger.acked.get(key, "never")))
            elif state == ledger.acked.get(key) and key in ledger.acked:
                back += 1
            if (key in listed) != (state is not None):
                problems.append("%s: listed=%s but GET state=%s" % (key, key in listed, state))
            ledger.settle(key, state)
        if problems:
            self.fail("after the power cut (%s), %d of %d keys wrong:\n%s"
                      % (where, len(problems), len(ledger.acked), "\n".join(problems[:20])))
        return len(set(ledger.acked)), back

    # PUT, overwrite and DELETE on keys w<n>/... of sizes 0 B to 3 MiB (inline, 64 KiB
    # blob-backed, own-file blobs): test_durability's writer, over this class's raw client.
    writer = dur.Durability.writer

    def multipart_writer(self, n, ledger, stop, rng):
        """Completes multipart uploads (5 MiB + a small last part) on its keys."""
        i = 0
        while not stop.is_set():
            key = "mp%d/%04d" % (n, i % 3)   # new keys and overwrites
            i += 1
            parts = [os.urandom(5 * MIB), os.urandom(rng.choice([1, 1000, 64 * KIB]))]
            try:
                p = s3raw.key_path(self.bucket, key)
                r = self.raw.request("POST", p, query=[("uploads", "")])
                if r.status != 200:
                    time.sleep(0.01)
                    continue
                uid = r.body.split(b"<UploadId>")[1].split(b"</UploadId>")[0].decode()
                xml = "<CompleteMultipartUpload>"
                for pn, data in enumerate(parts, 1):
                    r = self.raw.request("PUT", p, body=data,
                                         query=[("partNumber", str(pn)), ("uploadId", uid)])
                    if r.status != 200:
                        raise IOError("part %r" % r)
                    xml += ("<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>"
                            % (pn, r.headers["etag"]))
                xml += "</CompleteMultipartUpload>"
                ledger.begin(key, sha(b"".join(parts)))
                r = self.raw.request("POST", p, body=xml.encode(), query=[("uploadId", uid)])
                if r.status == 200 and b"<Error>" not in r.body:
                    ledger.ack(key, sha(b"".join(parts)), "multipart")
            except Exception:
                time.sleep(0.01)

    def round(self, ledger, seed):
        stop = threading.Event()
        threads = [threading.Thread(target=self.writer,
                                    args=(n + 10 * seed, ledger, stop,
                                          random.Random(seed * 100 + n)))
                   for n in range(WRITERS)]
        threads.append(threading.Thread(target=self.multipart_writer,
                                        args=(seed, ledger, stop, random.Random(seed))))
        for t in threads:
            t.daemon = True
            t.start()
        try:
            time.sleep(WRITE_S)
            acked = dict(ledger.counts)
            before = self.mount.stats()
            self.mount.cut()                      # while the writers are mid-request
            self.server.kill9()
        finally:
            stop.set()
            for t in threads:
                t.join()
        rc = self.mount.unmount()
        self.mount = None
        self.assertEqual(rc, 0, "mg_powercut exited %s (see %s)" % (rc, self.fslog))
        # Every call metagate made was modelled: none refused as unsupported, none over the bound.
        self.assertEqual((before["unsupported"], before["refused"]), ("0", "0"),
                         "mg_powercut refused calls (see %s)" % self.fslog)
        print("# round %d: acked so far %s; at the cut %s unsynced bytes, %s name changes "
              "pending, %s syncs, %s O_DSYNC writes"
              % (seed, acked, before["dirty_bytes"], before["pending_names"],
                 before["syncs"], before["dsync_writes"]), flush=True)

    def test_power_cut_while_writing(self):
        t0 = time.monotonic()
        self.user = mgserver.make_user("main")
        self.port = None
        self.bucket = mgtest.bucket_name("pc")
        ledger = Ledger()
        for seed in range(1, ROUNDS + 1):
            self.mount = Mount(self.binary, self.backing, self.point, self.fslog)
            self.start(self.point)
            if seed == 1:
                r = self.raw.request("PUT", "/" + self.bucket)
                self.assertEqual(r.status, 200, repr(r))
                # The bucket is acknowledged: it must survive the first cut.
            else:
                keys, back = self.verify(ledger, "fresh FUSE, round %d" % seed)
                print("# round %d restart: %d keys checked, %d acknowledged states back"
                      % (seed, keys, back), flush=True)
            self.round(ledger, seed)
        # The last restart reads the backing directory itself.
        self.start(self.backing)
        keys, back = self.verify(ledger, "plain backing directory")
        print("# final restart on the plain backing directory: %d keys checked, %d acknowledged "
              "states back, 0 lost; counts %s; %.1f s"
              % (keys, back, ledger.counts, time.monotonic() - t0), flush=True)
        self.assertGreater(ledger.counts["put"], 50, ledger.counts)
        self.assertGreater(ledger.counts["multipart"], 0, ledger.counts)


if __name__ == "__main__":
    mgtest.main()
