# SPDX-License-Identifier: Apache-2.0
# mg: server=tls python=both timeout=900
"""HTTPS with a self-signed certificate (generated with openssl by the
fixture). Clients change payload modes over TLS (fixtures README): boto3
1.26 sends UNSIGNED-PAYLOAD with Content-MD5, boto3 >= 1.36 sends
STREAMING-UNSIGNED-PAYLOAD-TRAILER with an aws-chunked body and a CRC32
trailer, for PutObject and every UploadPart. Each is checked on the wire
(botocore's before-send event) and by reading the bytes back."""

import base64
import hashlib
import os
import zlib

import mgtest
from mgtest import S3TestCase, client, run

MIB = 1 << 20


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


class Tls(S3TestCase):
    def setUp(self):
        self.assertTrue(mgtest.ENDPOINT.startswith("https://"), mgtest.ENDPOINT)
        self.s3 = client()
        self.modes = []
        self.s3.meta.events.register("before-send.s3", self.record)
        self.bucket = self.new_bucket(self.s3, "tls")

    def record(self, request, **kw):
        self.modes.append((request.method, request.url,
                           request.headers.get("x-amz-content-sha256", b""),
                           request.headers.get("Content-Encoding", b"")))

    def expected_mode(self):
        return (b"STREAMING-UNSIGNED-PAYLOAD-TRAILER" if mgtest.boto3_version() >= (1, 36)
                else b"UNSIGNED-PAYLOAD")

    def mode_of(self, method, needle):
        found = [m for m in self.modes if m[0] == method and needle in m[1]]
        self.assertTrue(found, self.modes)
        mode = found[-1][2]
        return mode.encode() if isinstance(mode, str) else mode

    def test_health_over_https(self):
        p = run(["curl", "-sS", "--cacert", mgtest.CA_FILE, "-o", "/dev/null",
                 "-w", "%{http_code}", mgtest.ENDPOINT + "/health"], check=False)
        self.assertEqual(p.stdout, "200", p.stderr)

    def test_put_object_payload_mode_and_bytes(self):
        data = os.urandom(300 * 1024 + 5)
        self.s3.put_object(Bucket=self.bucket, Key="tls/put.bin", Body=data)
        self.assertEqual(self.mode_of("PUT", "put.bin"), self.expected_mode())
        g = self.s3.get_object(Bucket=self.bucket, Key="tls/put.bin", ChecksumMode="ENABLED")
        self.assertEqual(g["Body"].read(), data)
        if mgtest.boto3_version() >= (1, 36):
            self.assertEqual(g.get("ChecksumCRC32"), crc32_b64(data))

    def test_upload_file_multipart_over_tls(self):
        src, dst = os.path.join(mgtest.TMP, "tls-big.bin"), os.path.join(mgtest.TMP, "tls-big.out")
        md5 = mgtest.write_file(src, 20 * MIB + 1)
        self.s3.upload_file(src, self.bucket, "tls/big.bin")
        parts = [m for m in self.modes if m[0] == "PUT" and "partNumber=" in m[1]]
        self.assertEqual(len(parts), 3, self.modes)
        for p in parts:
            mode = p[2].encode() if isinstance(p[2], str) else p[2]
            self.assertEqual(mode, self.expected_mode())
        self.s3.download_file(self.bucket, "tls/big.bin", dst)
        self.assertEqual(mgtest.file_md5(dst), md5)
        os.unlink(src)
        os.unlink(dst)

    def test_delete_objects_over_tls(self):
        for k in ("d1", "d2"):
            self.s3.put_object(Bucket=self.bucket, Key=k, Body=k.encode())
        r = self.s3.delete_objects(Bucket=self.bucket,
                                   Delete={"Objects": [{"Key": "d1"}, {"Key": "d2"}]})
        self.assertEqual(sorted(d["Key"] for d in r["Deleted"]), ["d1", "d2"])
        self.assertEqual(self.s3.list_objects_v2(Bucket=self.bucket)["KeyCount"], 0)

    def test_presigned_get_with_curl(self):
        data = os.urandom(1024)
        self.s3.put_object(Bucket=self.bucket, Key="p.bin", Body=data)
        url = client(signature="s3v4").generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": "p.bin"}, ExpiresIn=60)
        out = os.path.join(mgtest.TMP, "p.out")
        p = run(["curl", "-sS", "--cacert", mgtest.CA_FILE, "-o", out, "-w", "%{http_code}",
                 url], check=False)
        self.assertEqual(p.stdout, "200", p.stderr)
        with open(out, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).digest(), hashlib.sha256(data).digest())


if __name__ == "__main__":
    mgtest.main()
