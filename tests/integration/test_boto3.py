# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=both
"""boto3 as users run it, with both generations: Debian's boto3 1.26
(/usr/bin/python3: Content-MD5 on uploads) and a boto3 >= 1.36 on PATH
(CRC32 checksums by default). upload_file / download_file (multipart above
8 MiB), the list_objects_v2 paginator, object metadata, and
generate_presigned_url (SigV2 by default, SigV4 on request) fetched with
curl. Bytes and listings are compared exactly."""

import base64
import hashlib
import os
import zlib

import mgtest
from mgtest import S3TestCase, client, payload, run

MIB = 1 << 20


def local(name):
    return os.path.join(mgtest.TMP, name)


def curl(*args):
    cmd = ["curl", "-sS", "--max-time", "300"]
    if mgtest.CA_FILE:
        cmd += ["--cacert", mgtest.CA_FILE]
    return run(cmd + list(args), check=False)


class Transfer(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s3 = client()

    def test_upload_download_small(self):
        b = self.new_bucket(self.s3, "b3")
        src, dst = local("small.bin"), local("small.out")
        md5 = mgtest.write_file(src, 1024)
        self.s3.upload_file(src, b, "dir/small.bin")
        self.s3.download_file(b, "dir/small.bin", dst)
        self.assertEqual(mgtest.file_md5(dst), md5)
        h = self.s3.head_object(Bucket=b, Key="dir/small.bin")
        self.assertEqual(h["ContentLength"], 1024)
        self.assertEqual(h["ETag"], '"%s"' % md5)

    def test_upload_download_multipart(self):
        b = self.new_bucket(self.s3, "b3")
        src, dst = local("big.bin"), local("big.out")
        size = 20 * MIB + 12345
        mgtest.write_file(src, size)
        self.s3.upload_file(src, b, "big.bin")   # 8 MiB parts: 8 + 8 + 4.01
        self.s3.download_file(b, "big.bin", dst)
        self.assertEqual(mgtest.file_md5(dst), mgtest.file_md5(src))
        # ETag "md5-of-md5s-N" over the 8 MiB parts.
        digests = b""
        with open(src, "rb") as f:
            for block in iter(lambda: f.read(8 * MIB), b""):
                digests += hashlib.md5(block).digest()
        h = self.s3.head_object(Bucket=b, Key="big.bin")
        self.assertEqual(h["ETag"], '"%s-3"' % hashlib.md5(digests).hexdigest())
        self.assertEqual(h["ContentLength"], size)
        os.unlink(src)
        os.unlink(dst)

    def test_put_get_metadata(self):
        b = self.new_bucket(self.s3, "b3")
        data = payload(3000, 7)
        self.s3.put_object(Bucket=b, Key="m.txt", Body=data, ContentType="text/plain",
                           CacheControl="max-age=60", ContentDisposition="inline",
                           ContentEncoding="identity", Metadata={"color": "blue", "n": "1"})
        g = self.s3.get_object(Bucket=b, Key="m.txt")
        self.assertEqual(g["Body"].read(), data)
        self.assertEqual(g["ContentType"], "text/plain")
        self.assertEqual(g["CacheControl"], "max-age=60")
        self.assertEqual(g["ContentDisposition"], "inline")
        self.assertEqual(g["Metadata"], {"color": "blue", "n": "1"})

    def test_special_keys(self):
        b = self.new_bucket(self.s3, "b3")
        keys = ["dir/hello world+&=\u00e9~.txt", "a%2Fb", "sp ace/\u65e5\u672c\u8a9e",
                "x" * 1024, "q?uery#frag", "tab\tkey"]
        for i, k in enumerate(keys):
            self.s3.put_object(Bucket=b, Key=k, Body=payload(10 + i, i))
        got = [o["Key"] for p in self.s3.get_paginator("list_objects_v2").paginate(Bucket=b)
               for o in p.get("Contents", [])]
        self.assertEqual(got, sorted(keys, key=lambda k: k.encode()))
        for i, k in enumerate(keys):
            self.assertEqual(self.s3.get_object(Bucket=b, Key=k)["Body"].read(), payload(10 + i, i))

    def test_checksum_roundtrip(self):
        b = self.new_bucket(self.s3, "b3")
        data = payload(5000, 9)
        crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
        sha = base64.b64encode(hashlib.sha256(data).digest()).decode()
        self.s3.put_object(Bucket=b, Key="c32", Body=data, ChecksumAlgorithm="CRC32")
        self.s3.put_object(Bucket=b, Key="s256", Body=data, ChecksumAlgorithm="SHA256")
        g = self.s3.get_object(Bucket=b, Key="c32", ChecksumMode="ENABLED")
        self.assertEqual(g["Body"].read(), data)
        self.assertEqual(g.get("ChecksumCRC32"), crc)
        h = self.s3.head_object(Bucket=b, Key="s256", ChecksumMode="ENABLED")
        self.assertEqual(h.get("ChecksumSHA256"), sha)


class Listing(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("ls")
        cls.keys = sorted(["top%02d" % i for i in range(5)] +
                          ["a/%02d" % i for i in range(12)] +
                          ["a/b/%02d" % i for i in range(4)] +
                          ["c/d/e", "c/f", "z"])
        for k in cls.keys:
            cls.s3.put_object(Bucket=cls.bucket, Key=k, Body=k.encode())

    def test_paginator_all_keys(self):
        pages = list(self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, PaginationConfig={"PageSize": 7}))
        self.assertEqual(len(pages), 4)
        got = [o["Key"] for p in pages for o in p.get("Contents", [])]
        self.assertEqual(got, self.keys)
        self.assertEqual([p["IsTruncated"] for p in pages], [True, True, True, False])
        self.assertEqual([p["KeyCount"] for p in pages], [7, 7, 7, 3])
        for p in pages:
            for o in p["Contents"]:
                self.assertEqual(o["Size"], len(o["Key"]))
                self.assertEqual(o["ETag"], '"%s"' % hashlib.md5(o["Key"].encode()).hexdigest())

    def test_paginator_delimiter(self):
        pages = list(self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Delimiter="/", PaginationConfig={"PageSize": 2}))
        keys = [o["Key"] for p in pages for o in p.get("Contents", [])]
        prefixes = [c["Prefix"] for p in pages for c in p.get("CommonPrefixes", [])]
        self.assertEqual(keys, ["top%02d" % i for i in range(5)] + ["z"])
        self.assertEqual(prefixes, ["a/", "c/"])

    def test_prefix_delimiter(self):
        r = self.s3.list_objects_v2(Bucket=self.bucket, Prefix="a/", Delimiter="/")
        self.assertEqual([o["Key"] for o in r["Contents"]], ["a/%02d" % i for i in range(12)])
        self.assertEqual([c["Prefix"] for c in r["CommonPrefixes"]], ["a/b/"])
        self.assertEqual(r["KeyCount"], 13)
        self.assertFalse(r["IsTruncated"])

    def test_start_after_and_v1_marker(self):
        r = self.s3.list_objects_v2(Bucket=self.bucket, StartAfter="a/b/03", MaxKeys=3)
        self.assertEqual([o["Key"] for o in r["Contents"]], ["c/d/e", "c/f", "top00"])
        pages = list(self.s3.get_paginator("list_objects").paginate(
            Bucket=self.bucket, PaginationConfig={"PageSize": 5}))
        self.assertEqual([o["Key"] for p in pages for o in p["Contents"]], self.keys)

    def test_other_delimiter(self):
        r = self.s3.list_objects_v2(Bucket=self.bucket, Prefix="top", Delimiter="0")
        self.assertEqual([c["Prefix"] for c in r.get("CommonPrefixes", [])], ["top0"])
        self.assertEqual(r.get("Contents", []), [])


class Presign(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("pre")
        cls.data = payload(1024, 11)
        cls.s3.put_object(Bucket=cls.bucket, Key="dir/small.txt", Body=cls.data)

    def fetch(self, url):
        out = local("presigned.out")
        p = curl("-o", out, "-w", "%{http_code}", url)
        with open(out, "rb") as f:
            body = f.read()
        self.assertEqual(p.stdout, "200", "curl %s -> %s: %r" % (url, p.stdout, body[:300]))
        return body

    def test_presigned_get_default_v2(self):
        url = self.s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": "dir/small.txt"}, ExpiresIn=300)
        self.assertIn("Signature=", url)     # SigV2 query auth (boto3's default here)
        self.assertEqual(self.fetch(url), self.data)

    def test_presigned_get_s3v4(self):
        s3 = client(signature="s3v4")
        url = s3.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": "dir/small.txt"}, ExpiresIn=300)
        self.assertIn("X-Amz-Signature=", url)
        self.assertEqual(self.fetch(url), self.data)

    def test_presigned_special_key(self):
        key = "dir/hello world+&=\u00e9~.txt"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=b"special")
        for s3 in (self.s3, client(signature="s3v4")):
            url = s3.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=300)
            self.assertEqual(self.fetch(url), b"special")

    def test_presigned_put_s3v4(self):
        s3 = client(signature="s3v4")
        url = s3.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": "up.bin"}, ExpiresIn=300)
        src = local("up.bin")
        md5 = mgtest.write_file(src, 70000)
        p = curl("-o", "/dev/null", "-w", "%{http_code}", "-T", src, url)
        self.assertEqual(p.stdout, "200", p.stderr)
        g = self.s3.get_object(Bucket=self.bucket, Key="up.bin")
        self.assertEqual(hashlib.md5(g["Body"].read()).hexdigest(), md5)

    def test_presigned_put_v2(self):
        url = self.s3.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": "up2.bin"}, ExpiresIn=300)
        p = curl("-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "v2 body",
                 "-X", "PUT", "-H", "Content-Type:", url)
        self.assertEqual(p.stdout, "200", p.stderr)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="up2.bin")["Body"].read(),
                         b"v2 body")


if __name__ == "__main__":
    mgtest.main()
