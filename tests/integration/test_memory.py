# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system timeout=900
"""Memory bound of a large single PUT and GET (issue 2, done-when 5): one
1 GiB PUT (not multipart; a presigned SigV4 URL, streamed from this process
in 1 MiB pieces) and its GET must each keep the server's peak RssAnon
(/proc/PID/status, sampled every 50 ms) under 64 MiB, and h2o's spill file
for the request body must be created under the data directory, not in
/tmp. The spill file is unlinked as soon as it is created (h2o's
h2o_buffer_reserve: mkstemp, unlink, mmap), so it is caught two ways:
inotify IN_CREATE on every directory of the data dir and on /tmp, and the
server's file mappings in /proc/PID/maps.

MG_MEMORY_BYTES overrides the size (for quick runs while developing)."""

import ctypes
import hashlib
import os
import select
import shutil
import struct
import threading
import time

import mgtest
import s3raw
from mgtest import S3TestCase

MIB = 1 << 20
SIZE = int(os.environ.get("MG_MEMORY_BYTES", str(1 << 30)))
LIMIT_KIB = 64 * 1024
MIN_FREE = 4 << 30
IN_CREATE, IN_MOVED_TO, IN_ISDIR = 0x100, 0x80, 0x40000000


class Sampler(threading.Thread):
    """Samples RssAnon and the file mappings of one PID every 50 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.peak_kib = 0
        self.samples = 0
        self.mapped = set()      # file paths mapped by the server, seen while sampling

    def reset(self):
        with self.lock:
            self.peak_kib = 0
            self.samples = 0
            self.mapped = set()

    def run(self):
        while not self.stop.is_set():
            try:
                with open("/proc/%d/status" % self.pid) as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            kib = int(line.split()[1])
                            with self.lock:
                                self.peak_kib = max(self.peak_kib, kib)
                                self.samples += 1
                with open("/proc/%d/maps" % self.pid) as f:
                    for line in f:
                        parts = line.split(None, 5)
                        if len(parts) == 6 and parts[5].startswith("/"):
                            path = parts[5].strip()
                            if ".so" not in path and not path.startswith(
                                    ("/usr/", "/memfd:", "/dev/", "/SYSV")):
                                with self.lock:
                                    self.mapped.add(path)
            except OSError:
                pass
            time.sleep(0.05)


class Inotify(threading.Thread):
    """Reports files created under the given directory trees (recursively,
    following new subdirectories) and in the given single directories."""

    def __init__(self, trees, dirs):
        super().__init__(daemon=True)
        self.libc = ctypes.CDLL("libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs = {}
        self.created = []
        self.stop = threading.Event()
        for root in trees:
            for d, _, _ in os.walk(root):
                self.watch(d)
        for d in dirs:
            self.watch(d)

    def watch(self, d):
        wd = self.libc.inotify_add_watch(self.fd, d.encode(), IN_CREATE | IN_MOVED_TO)
        if wd >= 0:
            self.dirs[wd] = d

    def run(self):
        while not self.stop.is_set():
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if not r:
                continue
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            off = 0
            while off + 16 <= len(buf):
                wd, mask, _, n = struct.unpack_from("iIII", buf, off)
                name = buf[off + 16:off + 16 + n].rstrip(b"\0").decode("utf-8", "replace")
                off += 16 + n
                path = os.path.join(self.dirs.get(wd, "?"), name)
                if mask & IN_ISDIR:
                    self.watch(path)
                else:
                    self.created.append(path)

    def close(self):
        self.stop.set()
        self.join()
        os.close(self.fd)


def body_pieces(size, md5):
    """size bytes in 1 MiB pieces, each one different (a counter in front)."""
    base = bytearray(os.urandom(MIB))
    sent = 0
    n = 0
    while sent < size:
        k = min(MIB, size - sent)
        base[:8] = n.to_bytes(8, "big")
        piece = bytes(base[:k])
        md5.update(piece)
        yield piece
        sent += k
        n += 1


class Memory(S3TestCase):
    def setUp(self):
        free = shutil.disk_usage(mgtest.DATA_DIR).free
        if free < MIN_FREE:
            msg = ("only %.1f GiB free under %s (need 4 GiB): the 1 GiB memory test "
                   "DID NOT RUN" % (free / (1 << 30), mgtest.DATA_DIR))
            print("# *** SKIPPED: " + msg, flush=True)
            self.skipTest(msg)
        self.raw = s3raw.Client()
        self.bucket = mgtest.bucket_name("mem")
        r = self.raw.request("PUT", "/" + self.bucket)
        self.assertEqual(r.status, 200, repr(r))
        self.data_dir = os.path.realpath(mgtest.DATA_DIR)

    def url(self, method, key):
        return s3raw.presign_v4(method, self.raw.hostport, s3raw.key_path(self.bucket, key),
                                mgtest.ACCESS_KEY, mgtest.SECRET_KEY, expires=3600)

    def spill_files(self, paths):
        """Paths that look like a request-body spill: h2o's mkstemp names
        (h2o.b.XXXXXX), mapped files already unlinked, anything in
        <data_dir>/tmp."""
        tmp = os.path.join(self.data_dir, "tmp") + os.sep
        # "/[aio] (deleted)" is the kernel AIO ring libraft's log writer maps (io_setup),
        # not a file.
        return sorted({p for p in paths
                       if (os.path.basename(p).startswith("h2o") or p.endswith("(deleted)")
                           or p.startswith(tmp)) and not p.startswith("/[aio]")})

    def test_1gib_put_and_get(self):
        sampler = Sampler(mgtest.PID)
        sampler.start()
        time.sleep(0.2)
        base_kib = sampler.peak_kib
        watcher = Inotify([self.data_dir], ["/tmp"])
        watcher.start()
        sampler.reset()

        # PUT: one request, Content-Length 1 GiB, UNSIGNED-PAYLOAD presigned.
        md5 = hashlib.md5()
        conn = self.raw.connection(timeout=600)
        t0 = time.monotonic()
        conn.request("PUT", self.url("PUT", "big.bin"), body=body_pieces(SIZE, md5),
                     headers={"Content-Length": str(SIZE)})
        resp = conn.getresponse()
        body = resp.read()
        put_s = time.monotonic() - t0
        conn.close()
        time.sleep(0.1)
        watcher.close()
        with sampler.lock:
            put_peak, put_samples, put_maps = sampler.peak_kib, sampler.samples, set(sampler.mapped)
        self.assertEqual(resp.status, 200, body[:500])
        self.assertEqual(resp.getheader("ETag"), '"%s"' % md5.hexdigest())

        # GET: streamed and hashed here, never stored.
        sampler.reset()
        got = hashlib.md5()
        conn = self.raw.connection(timeout=600)
        t0 = time.monotonic()
        conn.request("GET", self.url("GET", "big.bin"))
        resp = conn.getresponse()
        n = 0
        for piece in iter(lambda: resp.read(MIB), b""):
            got.update(piece)
            n += len(piece)
        get_s = time.monotonic() - t0
        conn.close()
        with sampler.lock:
            get_peak, get_samples = sampler.peak_kib, sampler.samples
        sampler.stop.set()
        self.assertEqual(resp.status, 200)
        self.assertEqual((n, got.hexdigest()), (SIZE, md5.hexdigest()))

        created = watcher.created
        spills = self.spill_files(put_maps | set(created))
        inside = self.data_dir + os.sep
        in_data = sorted({p for p in spills if p.startswith(inside)})
        elsewhere = sorted({p for p in spills if not p.startswith(inside)})
        print("# %d MiB PUT: %.1f s (%.0f MiB/s), peak RssAnon %.1f MiB (%d samples; "
              "idle before %.1f MiB)" % (SIZE // MIB, put_s, SIZE / MIB / put_s,
                                         put_peak / 1024, put_samples, base_kib / 1024), flush=True)
        print("# %d MiB GET: %.1f s (%.0f MiB/s), peak RssAnon %.1f MiB (%d samples)"
              % (SIZE // MIB, get_s, SIZE / MIB / get_s, get_peak / 1024, get_samples), flush=True)
        print("# request-body spill files: under the data dir %s; elsewhere (e.g. /tmp) %s"
              % (in_data or "none", elsewhere or "none"), flush=True)
        self.assertGreater(put_samples, 3)
        self.assertLess(put_peak, LIMIT_KIB, "PUT peak RssAnon %d KiB" % put_peak)
        self.assertLess(get_peak, LIMIT_KIB, "GET peak RssAnon %d KiB" % get_peak)
        self.assertEqual(elsewhere, [], "request-body spill file outside the data dir")
        self.assertTrue(in_data,
                        "no request-body spill file seen under %s (created: %s, mapped: %s)"
                        % (self.data_dir, created[:20], sorted(put_maps)[:20]))
        self.raw.request("DELETE", s3raw.key_path(self.bucket, "big.bin"))


if __name__ == "__main__":
    mgtest.main()
