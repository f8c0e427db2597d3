# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system
"""Every S3 error of issue 2 with its Code and HTTP status, the way S3
documents it ("Error responses", S3 API reference): auth, checksum, range,
conditional, bucket, multipart and missing-key errors. boto3 where it can
send the request, s3raw where the request must be malformed on purpose
(wrong clock, tampered bytes, bad digests, anonymous)."""

import base64
import datetime
import hashlib
import zlib

import mgtest
import s3raw
from mgtest import S3TestCase, client, payload

MIB = 1 << 20


def b64(raw):
    return base64.b64encode(raw).decode()


def crc32_b64(data):
    return b64(zlib.crc32(data).to_bytes(4, "big"))


class Base(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("err")
        cls.data = payload(1024, 1)
        cls.etag = cls.s3.put_object(Bucket=cls.bucket, Key="obj", Body=cls.data)["ETag"]
        cls.raw = s3raw.Client()

    def assertRaw(self, r, code, status):
        self.assertEqual((r.code, r.status), (code, status), repr(r))
        self.assertIn("x-amz-request-id", r.headers, "error without x-amz-request-id")


class Auth(Base):
    def test_signature_does_not_match_wrong_secret(self):
        last = "A" if mgtest.SECRET_KEY[-1] != "A" else "B"
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"),
                             secret=mgtest.SECRET_KEY[:-1] + last)
        self.assertRaw(r, "SignatureDoesNotMatch", 403)

    def test_signature_does_not_match_boto3_wrong_secret(self):
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=mgtest.ENDPOINT, region_name=mgtest.REGION,
                          aws_access_key_id=mgtest.ACCESS_KEY,
                          aws_secret_access_key="x" * 40,
                          config=Config(s3={"addressing_style": "path"},
                                        retries={"max_attempts": 1}))
        self.assertS3Error("SignatureDoesNotMatch", 403, s3.list_objects_v2,
                           Bucket=self.bucket)

    def test_signature_does_not_match_tampered_path(self):
        # Signed for /bucket/obj, sent to /bucket/obj2: one changed byte.
        path = s3raw.key_path(self.bucket, "obj")
        r = self.raw.request("GET", path, raw_target=path + "2")
        self.assertRaw(r, "SignatureDoesNotMatch", 403)

    def test_signature_does_not_match_tampered_header(self):
        # x-amz-meta-a is signed; a proxy-style rewrite of its value must fail.
        import http.client
        h = {"Host": self.raw.hostport, "x-amz-meta-a": "1"}
        path = s3raw.key_path(self.bucket, "tamper")
        s3raw.sign_v4("PUT", path, [], h, hashlib.sha256(b"x").hexdigest(),
                      mgtest.ACCESS_KEY, mgtest.SECRET_KEY)
        h["x-amz-meta-a"] = "2"
        conn = http.client.HTTPConnection(*self.raw.hostport.split(":"))
        conn.request("PUT", path, body=b"x", headers=h)
        resp = conn.getresponse()
        body = resp.read()
        self.assertEqual((s3raw.error_code(body), resp.status),
                         ("SignatureDoesNotMatch", 403), body)

    def test_invalid_access_key_id(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"),
                             access_key="MGNOSUCHKEY000000000")
        self.assertRaw(r, "InvalidAccessKeyId", 403)

    def test_request_time_too_skewed(self):
        when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=20)
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"), when=when)
        self.assertRaw(r, "RequestTimeTooSkewed", 403)

    def test_request_time_too_skewed_future(self):
        when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=20)
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"), when=when)
        self.assertRaw(r, "RequestTimeTooSkewed", 403)

    def test_presigned_expired_access_denied(self):
        when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2)
        target = s3raw.presign_v4("GET", self.raw.hostport, s3raw.key_path(self.bucket, "obj"),
                                  mgtest.ACCESS_KEY, mgtest.SECRET_KEY, expires=60, when=when)
        r = self.raw.request("GET", target, sign=False)
        self.assertRaw(r, "AccessDenied", 403)

    def test_presigned_valid_then_tampered(self):
        target = s3raw.presign_v4("GET", self.raw.hostport, s3raw.key_path(self.bucket, "obj"),
                                  mgtest.ACCESS_KEY, mgtest.SECRET_KEY, expires=300)
        r = self.raw.request("GET", target, sign=False)
        self.assertEqual((r.status, r.body), (200, self.data))
        r = self.raw.request("GET", target.replace("X-Amz-Expires=300", "X-Amz-Expires=301"),
                             sign=False)
        self.assertRaw(r, "SignatureDoesNotMatch", 403)

    def test_presigned_expiry_limit_seven_days(self):
        path = s3raw.key_path(self.bucket, "obj")
        ok = s3raw.presign_v4("GET", self.raw.hostport, path, mgtest.ACCESS_KEY,
                              mgtest.SECRET_KEY, expires=604800)
        self.assertEqual(self.raw.request("GET", ok, sign=False).status, 200)
        too_long = s3raw.presign_v4("GET", self.raw.hostport, path, mgtest.ACCESS_KEY,
                                    mgtest.SECRET_KEY, expires=604801)
        self.assertRaw(self.raw.request("GET", too_long, sign=False),
                       "AuthorizationQueryParametersError", 400)

    def test_anonymous_access_denied(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"), sign=False)
        self.assertRaw(r, "AccessDenied", 403)

    def test_anonymous_list_buckets_denied(self):
        r = self.raw.request("GET", "/", sign=False)
        self.assertRaw(r, "AccessDenied", 403)


class Checksum(Base):
    def put(self, key, body, headers):
        return self.raw.request("PUT", s3raw.key_path(self.bucket, key), body=body,
                                headers=headers)

    def test_bad_digest_content_md5(self):
        r = self.put("md5", b"hello", {"Content-MD5": b64(hashlib.md5(b"hellO").digest())})
        self.assertRaw(r, "BadDigest", 400)
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket=self.bucket, Key="md5")

    def test_good_content_md5(self):
        r = self.put("md5ok", b"hello", {"Content-MD5": b64(hashlib.md5(b"hello").digest())})
        self.assertEqual(r.status, 200, repr(r))

    def test_invalid_digest_not_base64(self):
        r = self.put("md5bad", b"hello", {"Content-MD5": "not-base64!!"})
        self.assertRaw(r, "InvalidDigest", 400)

    def test_invalid_digest_wrong_length(self):
        r = self.put("md5short", b"hello", {"Content-MD5": b64(b"12345")})
        self.assertRaw(r, "InvalidDigest", 400)

    def test_bad_digest_crc32(self):
        r = self.put("crc", b"hello", {"x-amz-checksum-crc32": crc32_b64(b"hellO")})
        self.assertRaw(r, "BadDigest", 400)
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket=self.bucket, Key="crc")

    def test_good_crc32_is_stored_and_returned(self):
        r = self.put("crcok", b"hello", {"x-amz-checksum-crc32": crc32_b64(b"hello")})
        self.assertEqual(r.status, 200, repr(r))
        g = self.raw.request("GET", s3raw.key_path(self.bucket, "crcok"),
                             headers={"x-amz-checksum-mode": "ENABLED"})
        self.assertEqual(g.status, 200)
        self.assertEqual(g.headers.get("x-amz-checksum-crc32"), crc32_b64(b"hello"))

    def test_bad_digest_sha256_payload(self):
        # Literal x-amz-content-sha256 that does not match the body.
        r = self.raw.request("PUT", s3raw.key_path(self.bucket, "sha"), body=b"hello",
                             payload_hash=hashlib.sha256(b"hellO").hexdigest())
        self.assertIn(r.code, ("XAmzContentSHA256Mismatch", "BadDigest"), repr(r))
        self.assertEqual(r.status, 400, repr(r))


class Streaming(Base):
    """aws-chunked bodies sent by hand: signed chunks (the minio-go mode no
    client here emits) and the unsigned trailer mode with a bad checksum."""

    SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
    TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

    def test_signed_chunks_roundtrip(self):
        data = payload(200 * 1024 + 3, 41)
        r = s3raw.put_streaming(self.raw, s3raw.key_path(self.bucket, "chunked"), data, self.SIGNED)
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="chunked")["Body"].read(), data)

    def test_signed_chunks_tampered_byte(self):
        data = payload(200 * 1024, 42)
        r = s3raw.put_streaming(self.raw, s3raw.key_path(self.bucket, "chunked-bad"), data,
                                self.SIGNED, corrupt_at=150 * 1024)
        self.assertRaw(r, "SignatureDoesNotMatch", 403)
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket=self.bucket,
                           Key="chunked-bad")

    def test_trailer_good_checksum(self):
        data = payload(100 * 1024, 43)
        r = s3raw.put_streaming(self.raw, s3raw.key_path(self.bucket, "trailer"), data, self.TRAILER,
                                trailer=("x-amz-checksum-crc32", crc32_b64(data)))
        self.assertEqual(r.status, 200, repr(r))
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="trailer")["Body"].read(), data)

    def test_trailer_bad_checksum(self):
        data = payload(100 * 1024, 44)
        r = s3raw.put_streaming(self.raw, s3raw.key_path(self.bucket, "trailer-bad"), data,
                                self.TRAILER, trailer=("x-amz-checksum-crc32", crc32_b64(b"x")))
        self.assertRaw(r, "BadDigest", 400)
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket=self.bucket,
                           Key="trailer-bad")


class Range(Base):
    def test_invalid_range_416(self):
        self.assertS3Error("InvalidRange", 416, self.s3.get_object,
                           Bucket=self.bucket, Key="obj", Range="bytes=5000-6000")

    def test_invalid_range_raw_has_content_range(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"),
                             headers={"Range": "bytes=1024-"})
        self.assertRaw(r, "InvalidRange", 416)

    def test_ranges_that_are_served(self):
        for rng, want in (("bytes=0-0", self.data[:1]), ("bytes=1000-", self.data[1000:]),
                          ("bytes=-24", self.data[-24:]), ("bytes=1000-9999", self.data[1000:])):
            g = self.s3.get_object(Bucket=self.bucket, Key="obj", Range=rng)
            self.assertEqual(g["ResponseMetadata"]["HTTPStatusCode"], 206, rng)
            self.assertEqual(g["Body"].read(), want, rng)


class Conditional(Base):
    def test_if_match_412(self):
        self.assertS3Error("PreconditionFailed", 412, self.s3.get_object,
                           Bucket=self.bucket, Key="obj", IfMatch='"0123456789abcdef0123456789abcdef"')

    def test_if_match_ok(self):
        g = self.s3.get_object(Bucket=self.bucket, Key="obj", IfMatch=self.etag)
        self.assertEqual(g["Body"].read(), self.data)

    def test_if_unmodified_since_412(self):
        past = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)
        self.assertS3Error("PreconditionFailed", 412, self.s3.get_object,
                           Bucket=self.bucket, Key="obj", IfUnmodifiedSince=past)

    def test_if_none_match_304(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"),
                             headers={"If-None-Match": self.etag})
        self.assertEqual(r.status, 304, repr(r))
        self.assertEqual(r.body, b"")

    def test_if_modified_since_304(self):
        future = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1))
        r = self.raw.request("HEAD", s3raw.key_path(self.bucket, "obj"),
                             headers={"If-Modified-Since": future.strftime("%a, %d %b %Y %H:%M:%S GMT")})
        self.assertEqual(r.status, 304, repr(r))

    def test_head_if_match_412(self):
        r = self.raw.request("HEAD", s3raw.key_path(self.bucket, "obj"),
                             headers={"If-Match": '"ffffffffffffffffffffffffffffffff"'})
        self.assertEqual(r.status, 412, repr(r))

    def test_put_if_none_match_star_412(self):
        r = self.raw.request("PUT", s3raw.key_path(self.bucket, "obj"), body=b"new",
                             headers={"If-None-Match": "*"})
        self.assertRaw(r, "PreconditionFailed", 412)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="obj")["Body"].read(),
                         self.data)

    def test_put_if_match_wrong_412(self):
        r = self.raw.request("PUT", s3raw.key_path(self.bucket, "obj"), body=b"new",
                             headers={"If-Match": '"ffffffffffffffffffffffffffffffff"'})
        self.assertRaw(r, "PreconditionFailed", 412)


class Bucket(Base):
    def test_no_such_bucket(self):
        self.assertS3Error("NoSuchBucket", 404, self.s3.list_objects_v2,
                           Bucket=mgtest.bucket_name("none"))

    def test_no_such_bucket_put(self):
        self.assertS3Error("NoSuchBucket", 404, self.s3.put_object,
                           Bucket=mgtest.bucket_name("none"), Key="k", Body=b"x")

    def test_bucket_not_empty(self):
        b = self.new_bucket(self.s3, "full")
        self.s3.put_object(Bucket=b, Key="k", Body=b"x")
        self.assertS3Error("BucketNotEmpty", 409, self.s3.delete_bucket, Bucket=b)

    def test_bucket_already_exists_other_user(self):
        other = client(user=2)
        self.assertS3Error("BucketAlreadyExists", 409, other.create_bucket, Bucket=self.bucket)

    def test_recreate_own_bucket_succeeds(self):
        # us-east-1 answers 200 to the owner (rclone creates before every upload).
        r = self.s3.create_bucket(Bucket=self.bucket)
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 200)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="obj")["Body"].read(),
                         self.data)

    def test_invalid_bucket_name(self):
        for name in ("ab", "Upper-Case", "bad_underscore", "a..b", "-lead", "192.168.5.4",
                     "x" * 64):
            r = self.raw.request("PUT", "/" + name)
            self.assertRaw(r, "InvalidBucketName", 400)

    def test_other_users_bucket_access_denied(self):
        other = client(user=2)
        self.assertS3Error("AccessDenied", 403, other.list_objects_v2, Bucket=self.bucket)
        self.assertS3Error("AccessDenied", 403, other.get_object, Bucket=self.bucket, Key="obj")
        self.assertS3Error("AccessDenied", 403, other.put_object, Bucket=self.bucket,
                           Key="x", Body=b"x")
        self.assertS3Error("AccessDenied", 403, other.delete_object, Bucket=self.bucket, Key="obj")
        self.assertS3Error("AccessDenied", 403, other.delete_bucket, Bucket=self.bucket)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="obj")["Body"].read(),
                         self.data)

    def test_list_buckets_only_own(self):
        other = client(user=2)
        mine = {b["Name"] for b in self.s3.list_buckets()["Buckets"]}
        theirs = {b["Name"] for b in other.list_buckets()["Buckets"]}
        self.assertIn(self.bucket, mine)
        self.assertNotIn(self.bucket, theirs)

    def test_no_such_key(self):
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket=self.bucket,
                           Key="missing/key")

    def test_head_missing_key_404(self):
        self.assertS3Error("404", 404, self.s3.head_object, Bucket=self.bucket, Key="missing")

    def test_delete_missing_key_is_idempotent(self):
        r = self.s3.delete_object(Bucket=self.bucket, Key="never-there")
        self.assertEqual(r["ResponseMetadata"]["HTTPStatusCode"], 204)


class Multipart(Base):
    def create(self, key):
        return self.s3.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]

    def part(self, key, uid, n, data):
        return self.s3.upload_part(Bucket=self.bucket, Key=key, UploadId=uid,
                                   PartNumber=n, Body=data)["ETag"]

    def test_no_such_upload_part(self):
        self.assertS3Error("NoSuchUpload", 404, self.s3.upload_part, Bucket=self.bucket,
                           Key="mp", UploadId="no-such-upload", PartNumber=1, Body=b"x")

    def test_no_such_upload_complete(self):
        self.assertS3Error("NoSuchUpload", 404, self.s3.complete_multipart_upload,
                           Bucket=self.bucket, Key="mp", UploadId="no-such-upload",
                           MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]})

    def test_no_such_upload_abort(self):
        self.assertS3Error("NoSuchUpload", 404, self.s3.abort_multipart_upload,
                           Bucket=self.bucket, Key="mp", UploadId="no-such-upload")

    def test_invalid_part_missing(self):
        uid = self.create("mp1")
        e1 = self.part("mp1", uid, 1, payload(5 * MIB, 2))
        self.assertS3Error("InvalidPart", 400, self.s3.complete_multipart_upload,
                           Bucket=self.bucket, Key="mp1", UploadId=uid,
                           MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                      {"PartNumber": 2, "ETag": e1}]})

    def test_invalid_part_wrong_etag(self):
        uid = self.create("mp2")
        self.part("mp2", uid, 1, b"x" * 100)
        self.assertS3Error("InvalidPart", 400, self.s3.complete_multipart_upload,
                           Bucket=self.bucket, Key="mp2", UploadId=uid,
                           MultipartUpload={"Parts": [{"PartNumber": 1,
                                                       "ETag": '"00000000000000000000000000000000"'}]})

    def test_invalid_part_order(self):
        uid = self.create("mp3")
        e1 = self.part("mp3", uid, 1, payload(5 * MIB, 3))
        e2 = self.part("mp3", uid, 2, b"tail")
        self.assertS3Error("InvalidPartOrder", 400, self.s3.complete_multipart_upload,
                           Bucket=self.bucket, Key="mp3", UploadId=uid,
                           MultipartUpload={"Parts": [{"PartNumber": 2, "ETag": e2},
                                                      {"PartNumber": 1, "ETag": e1}]})

    def test_entity_too_small(self):
        uid = self.create("mp4")
        e1 = self.part("mp4", uid, 1, b"a" * 1024)
        e2 = self.part("mp4", uid, 2, b"b" * 1024)
        self.assertS3Error("EntityTooSmall", 400, self.s3.complete_multipart_upload,
                           Bucket=self.bucket, Key="mp4", UploadId=uid,
                           MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                      {"PartNumber": 2, "ETag": e2}]})
        self.assertS3Error("NoSuchKey", 404, self.s3.get_object, Bucket=self.bucket, Key="mp4")

    def test_complete_then_no_such_upload(self):
        uid = self.create("mp5")
        d1, d2 = payload(5 * MIB, 5), b"last part"
        e1, e2 = self.part("mp5", uid, 1, d1), self.part("mp5", uid, 2, d2)
        r = self.s3.complete_multipart_upload(
            Bucket=self.bucket, Key="mp5", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                       {"PartNumber": 2, "ETag": e2}]})
        md5s = hashlib.md5(hashlib.md5(d1).digest() + hashlib.md5(d2).digest()).hexdigest()
        self.assertEqual(r["ETag"], '"%s-2"' % md5s)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="mp5")["Body"].read(),
                         d1 + d2)
        self.assertS3Error("NoSuchUpload", 404, self.s3.upload_part, Bucket=self.bucket,
                           Key="mp5", UploadId=uid, PartNumber=3, Body=b"x")


class Envelope(Base):
    def test_error_body_is_s3_xml(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "missing"))
        self.assertRaw(r, "NoSuchKey", 404)
        self.assertTrue(r.headers.get("content-type", "").startswith(("application/xml", "text/xml")),
                        r.headers)
        import xml.etree.ElementTree as ET
        root = ET.fromstring(r.body)
        self.assertEqual(root.tag, "Error")
        self.assertIsNotNone(root.find("Message"))
        self.assertIsNotNone(root.find("RequestId"))

    def test_request_id_on_success(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "obj"))
        self.assertEqual(r.status, 200)
        self.assertTrue(r.headers.get("x-amz-request-id"))


if __name__ == "__main__":
    mgtest.main()
