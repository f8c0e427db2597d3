# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system timeout=400
"""Freed bytes are never served (issue 9, done-when 4, first half).

A client GETs a 50 MiB object and reads it slowly, over 60 s. Meanwhile the
object is overwritten, then deleted, and other 8 MiB objects are written and
deleted again and again, so the store has every reason to reuse the space
the old version held. The slow reader must still receive the old bytes
whole: the GET pinned its blob when it started (engine/blob.c, reader pins),
and neither a retire nor the reaper may free or reuse a pinned blob. Before
pins, frees ran on a 30 s clock, so this read returned punched holes (zeros)
with a 200 after 30 s.

The second half of done-when 4 (100,000 deletes in a burst leave no writer
stalled by reaping) is tests/unit/engine/test_blob.c test_retire_burst: the
reaper runs on its own thread, and a concurrent writer's finish is timed
there, where the blob store's own reaping is the only thing in play.
"""

import hashlib
import os
import socket
import threading
import time
import urllib.parse

import mgtest
from mgtest import S3TestCase, client

MIB = 1 << 20
BIG = 50 * MIB
READ_S = float(os.environ.get("MG_RECLAIM_READ_S", "60"))
CHURN = 8 * MIB


class SlowReader(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s3 = client()
        cls.bucket = mgtest.bucket_name("reclaim")
        cls.s3.create_bucket(Bucket=cls.bucket)
        cls.addClassCleanup(mgtest.drop_bucket, cls.s3, cls.bucket)

    def _slow_get(self, url, out):
        """GET url over a raw socket, reading the body at BIG / READ_S bytes/s;
        out gets (status line, body bytes, seconds)."""
        u = urllib.parse.urlparse(url)
        sock = socket.create_connection((u.hostname, u.port), timeout=120)
        # A small receive buffer, so the server really has to wait for this reader.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        path = u.path + ("?" + u.query if u.query else "")
        sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
                      % (path, u.hostname, u.port)).encode())
        t0 = time.monotonic()
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        got = bytearray(body)
        rate = BIG / READ_S
        while True:
            chunk = sock.recv(64 * 1024)
            if not chunk:
                break
            got += chunk
            ahead = len(got) / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        sock.close()
        out.append((head.split(b"\r\n", 1)[0].decode(), bytes(got), time.monotonic() - t0))

    def test_slow_get_of_overwritten_object_returns_old_bytes(self):
        old = os.urandom(BIG)
        self.s3.put_object(Bucket=self.bucket, Key="big", Body=old)
        url = self.s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": "big"}, ExpiresIn=600)
        out = []
        reader = threading.Thread(target=self._slow_get, args=(url, out))
        reader.start()
        time.sleep(2)  # the GET has started streaming (and pinned what it reads)
        new = os.urandom(BIG)
        self.s3.put_object(Bucket=self.bucket, Key="big", Body=new)
        self.assertEqual(hashlib.sha256(
            self.s3.get_object(Bucket=self.bucket, Key="big")["Body"].read()).digest(),
            hashlib.sha256(new).digest(), "the overwrite is not what a new GET reads")
        self.s3.delete_object(Bucket=self.bucket, Key="big")
        churn = 0
        fill = os.urandom(CHURN)
        while reader.is_alive():  # give the freed space every chance to be reused
            k = "churn/%d" % (churn % 4)
            self.s3.put_object(Bucket=self.bucket, Key=k, Body=fill)
            self.s3.delete_object(Bucket=self.bucket, Key=k)
            churn += 1
            time.sleep(0.2)
        reader.join()
        status, body, took = out[0]
        print("# slow GET: %s, %d of %d bytes in %.1f s; %d churn PUT+DELETE of 8 MiB meanwhile"
              % (status, len(body), BIG, took, churn), flush=True)
        self.assertIn(" 200 ", status + " ")
        self.assertGreaterEqual(took, READ_S * 0.9, "the read was not slow")
        self.assertEqual(len(body), BIG, "the slow GET was cut short")
        if body != old:
            first = next(i for i in range(len(body)) if body[i] != old[i])
            zeros = body[first:first + 4096] == bytes(min(4096, len(body) - first))
            self.fail("the slow GET returned other bytes from offset %d (%s)"
                      % (first, "zeros: a punched hole" if zeros else "not the old version"))


if __name__ == "__main__":
    mgtest.main()
