# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system
"""Consistency under concurrency, as S3 promises it ("Amazon S3 data
consistency model": strong read-after-write for PUT, DELETE and LIST; a
concurrent writer's last acknowledged PUT wins, never a mix): read-after-
write and read-after-delete across connections, racing PUTs to one key,
and a GET that streams an object while it is overwritten and deleted (it
must deliver the old bytes whole, or fail, never a 200 with holes)."""

import hashlib
import os
import threading
import time

import mgtest
import s3raw
from mgtest import S3TestCase, client, md5

MIB = 1 << 20


class Consistency(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("cons")

    def test_read_after_write_and_delete(self):
        readers = [client(), client()]
        for i in range(100):
            key = "raw/%03d" % i
            data = os.urandom(100 + i)
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
            r = readers[i % 2]
            self.assertEqual(r.get_object(Bucket=self.bucket, Key=key)["Body"].read(), data, key)
            listed = r.list_objects_v2(Bucket=self.bucket, Prefix=key)
            self.assertEqual([o["Key"] for o in listed.get("Contents", [])], [key])
            self.s3.delete_object(Bucket=self.bucket, Key=key)
            self.assertS3Error("404", 404, r.head_object, Bucket=self.bucket, Key=key)
            self.assertEqual(r.list_objects_v2(Bucket=self.bucket, Prefix=key)["KeyCount"], 0)

    def test_racing_puts_one_wins_whole(self):
        bodies = [os.urandom(256 * 1024 + n) for n in range(8)]
        errors = []

        def put(n):
            try:
                s3 = client()
                for _ in range(5):
                    s3.put_object(Bucket=self.bucket, Key="race", Body=bodies[n])
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=put, args=(n,)) for n in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        g = self.s3.get_object(Bucket=self.bucket, Key="race")
        body = g["Body"].read()
        self.assertIn(md5(body), {md5(b) for b in bodies}, "GET returned a mix of PUTs")
        self.assertEqual(g["ETag"], '"%s"' % md5(body))
        self.assertEqual(g["ContentLength"], len(body))

    def test_get_streaming_while_overwritten_and_deleted(self):
        old = os.urandom(48 * MIB)
        self.s3.put_object(Bucket=self.bucket, Key="stream", Body=old)
        raw = s3raw.Client()
        conn = raw.connection(timeout=120)
        h = {"Host": raw.hostport}
        path = s3raw.key_path(self.bucket, "stream")
        s3raw.sign_v4("GET", path, [], h, s3raw.EMPTY_SHA256, raw.access_key, raw.secret,
                      raw.region)
        conn.request("GET", path, headers=h)
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        got = hashlib.md5()
        got.update(resp.read(MIB))
        # The object is replaced, then deleted, while the GET is mid-stream.
        self.s3.put_object(Bucket=self.bucket, Key="stream", Body=os.urandom(48 * MIB))
        self.s3.delete_object(Bucket=self.bucket, Key="stream")
        n = MIB
        try:
            while True:
                piece = resp.read(MIB)
                if not piece:
                    break
                got.update(piece)
                n += len(piece)
                time.sleep(0.02)          # a slow reader: the stream outlives both writes
        except Exception as e:            # a cut connection is acceptable, wrong bytes are not
            print("# GET cut after %d bytes: %r" % (n, e), flush=True)
            return
        finally:
            conn.close()
        if n == len(old):
            self.assertEqual(got.hexdigest(), md5(old), "GET returned 200 with altered bytes")
        else:
            self.fail("GET ended cleanly after %d of %d bytes" % (n, len(old)))


if __name__ == "__main__":
    mgtest.main()
