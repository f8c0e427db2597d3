# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=both
"""The rest of the S3 surface issue 2 lists, through boto3: bucket
head/location/tagging, response-* overrides, partNumber GET, CopyObject
directives and copy-source conditions, UploadPartCopy with a range,
ListParts/ListMultipartUploads, object tagging, GetObjectAttributes,
DeleteObjects Quiet, ListObjects V1 markers, fetch-owner, empty objects,
ranges across parts and the 1,024-byte key limit. Expected values are the
S3 API reference's."""

import datetime
import urllib.parse

import mgtest
import s3raw
from mgtest import S3TestCase, client, md5, payload

MIB = 1 << 20


class Buckets(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("feat")

    def test_head_bucket(self):
        self.assertEqual(self.s3.head_bucket(Bucket=self.bucket)
                         ["ResponseMetadata"]["HTTPStatusCode"], 200)
        self.assertS3Error("404", 404, self.s3.head_bucket, Bucket=mgtest.bucket_name("none"))
        self.assertS3Error("403", 403, client(user=2).head_bucket, Bucket=self.bucket)

    def test_get_bucket_location(self):
        loc = self.s3.get_bucket_location(Bucket=self.bucket).get("LocationConstraint")
        self.assertIn(loc, (None, "", "us-east-1"))

    def test_list_buckets_fields(self):
        r = self.s3.list_buckets()
        mine = [b for b in r["Buckets"] if b["Name"] == self.bucket]
        self.assertEqual(len(mine), 1)
        age = datetime.datetime.now(datetime.timezone.utc) - mine[0]["CreationDate"]
        self.assertLess(abs(age.total_seconds()), 600)
        self.assertTrue(r["Owner"].get("ID"))

    def test_bucket_tagging(self):
        tags = [{"Key": "team", "Value": "storage"}, {"Key": "env", "Value": "test"}]
        self.s3.put_bucket_tagging(Bucket=self.bucket, Tagging={"TagSet": tags})
        got = self.s3.get_bucket_tagging(Bucket=self.bucket)["TagSet"]
        self.assertEqual(sorted((t["Key"], t["Value"]) for t in got),
                         [("env", "test"), ("team", "storage")])
        self.s3.delete_bucket_tagging(Bucket=self.bucket)
        self.assertS3Error("NoSuchTagSet", 404, self.s3.get_bucket_tagging, Bucket=self.bucket)

    def test_bucket_acl_owner(self):
        acl = self.s3.get_bucket_acl(Bucket=self.bucket)
        self.assertTrue(acl["Owner"].get("ID"))
        self.assertIn("FULL_CONTROL", [g["Permission"] for g in acl["Grants"]])


class Objects(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("feat")
        cls.data = payload(4000, 21)
        cls.s3.put_object(Bucket=cls.bucket, Key="src", Body=cls.data, ContentType="text/x-src",
                          Metadata={"origin": "src"}, Tagging="a=1&b=two")

    def test_empty_object(self):
        self.s3.put_object(Bucket=self.bucket, Key="empty", Body=b"")
        g = self.s3.get_object(Bucket=self.bucket, Key="empty")
        self.assertEqual((g["Body"].read(), g["ContentLength"], g["ETag"]),
                         (b"", 0, '"%s"' % md5(b"")))

    def test_response_overrides(self):
        g = self.s3.get_object(Bucket=self.bucket, Key="src",
                               ResponseContentType="application/x-override",
                               ResponseContentDisposition="attachment; filename=x.bin",
                               ResponseCacheControl="no-cache")
        self.assertEqual(g["ContentType"], "application/x-override")
        self.assertEqual(g["ContentDisposition"], "attachment; filename=x.bin")
        self.assertEqual(g["CacheControl"], "no-cache")
        self.assertEqual(g["Body"].read(), self.data)

    def test_tagging_on_put_get_delete(self):
        got = self.s3.get_object_tagging(Bucket=self.bucket, Key="src")["TagSet"]
        self.assertEqual(sorted((t["Key"], t["Value"]) for t in got), [("a", "1"), ("b", "two")])
        self.s3.put_object(Bucket=self.bucket, Key="tagged", Body=b"t", Tagging="k=v")
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="tagged").get("TagCount"), 1)
        self.s3.delete_object_tagging(Bucket=self.bucket, Key="tagged")
        self.assertEqual(self.s3.get_object_tagging(Bucket=self.bucket, Key="tagged")["TagSet"], [])

    def test_copy_directive_copy_and_replace(self):
        self.s3.copy_object(Bucket=self.bucket, Key="c-copy",
                            CopySource={"Bucket": self.bucket, "Key": "src"})
        h = self.s3.head_object(Bucket=self.bucket, Key="c-copy")
        self.assertEqual((h["ContentType"], h["Metadata"]), ("text/x-src", {"origin": "src"}))
        self.s3.copy_object(Bucket=self.bucket, Key="c-repl", MetadataDirective="REPLACE",
                            ContentType="text/x-new", Metadata={"origin": "copy"},
                            CopySource={"Bucket": self.bucket, "Key": "src"})
        g = self.s3.get_object(Bucket=self.bucket, Key="c-repl")
        self.assertEqual((g["ContentType"], g["Metadata"]), ("text/x-new", {"origin": "copy"}))
        self.assertEqual(g["Body"].read(), self.data)

    def test_copy_onto_itself_needs_replace(self):
        self.assertS3Error("InvalidRequest", 400, self.s3.copy_object, Bucket=self.bucket,
                           Key="src", CopySource={"Bucket": self.bucket, "Key": "src"})

    def test_copy_source_conditions(self):
        etag = '"%s"' % md5(self.data)
        self.assertS3Error("PreconditionFailed", 412, self.s3.copy_object, Bucket=self.bucket,
                           Key="c-cond", CopySource={"Bucket": self.bucket, "Key": "src"},
                           CopySourceIfMatch='"ffffffffffffffffffffffffffffffff"')
        self.assertS3Error("PreconditionFailed", 412, self.s3.copy_object, Bucket=self.bucket,
                           Key="c-cond", CopySource={"Bucket": self.bucket, "Key": "src"},
                           CopySourceIfNoneMatch=etag)
        self.s3.copy_object(Bucket=self.bucket, Key="c-cond", CopySourceIfMatch=etag,
                            CopySource={"Bucket": self.bucket, "Key": "src"})

    def test_copy_missing_source(self):
        self.assertS3Error("NoSuchKey", 404, self.s3.copy_object, Bucket=self.bucket,
                           Key="c-none", CopySource={"Bucket": self.bucket, "Key": "absent"})

    def test_delete_objects_quiet(self):
        for k in ("q1", "q2"):
            self.s3.put_object(Bucket=self.bucket, Key=k, Body=b"q")
        r = self.s3.delete_objects(Bucket=self.bucket, Delete={
            "Objects": [{"Key": "q1"}, {"Key": "q2"}], "Quiet": True})
        self.assertEqual(r.get("Deleted", []), [])
        self.assertEqual(r.get("Errors", []), [])
        self.assertEqual(self.s3.list_objects_v2(Bucket=self.bucket, Prefix="q")["KeyCount"], 0)

    def test_key_length_limit(self):
        self.s3.put_object(Bucket=self.bucket, Key="k" * 1024, Body=b"max")
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="k" * 1024)["Body"].read(),
                         b"max")
        self.assertS3Error("KeyTooLongError", 400, self.s3.put_object, Bucket=self.bucket,
                           Key="k" * 1025, Body=b"x")

    def test_get_object_attributes_simple(self):
        r = self.s3.get_object_attributes(Bucket=self.bucket, Key="src",
                                          ObjectAttributes=["ETag", "ObjectSize", "StorageClass"])
        self.assertEqual(r["ETag"], md5(self.data))          # unquoted in this API
        self.assertEqual(r["ObjectSize"], len(self.data))
        self.assertEqual(r["StorageClass"], "STANDARD")


class Listing(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("featls")
        cls.keys = ["a/1", "a/2", "b/1", "c", "d/1", "d/2", "e"]
        for k in cls.keys:
            cls.s3.put_object(Bucket=cls.bucket, Key=k, Body=b"x")

    def test_v1_delimiter_next_marker(self):
        seen, marker, pages = [], "", 0
        while True:
            r = self.s3.list_objects(Bucket=self.bucket, Delimiter="/", MaxKeys=2, Marker=marker)
            seen += [o["Key"] for o in r.get("Contents", [])]
            seen += [p["Prefix"] for p in r.get("CommonPrefixes", [])]
            pages += 1
            if not r["IsTruncated"]:
                break
            self.assertIn("NextMarker", r)                  # required with a delimiter
            marker = r["NextMarker"]
            self.assertLess(pages, 10)
        self.assertEqual(sorted(seen), ["a/", "b/", "c", "d/", "e"])
        self.assertEqual(pages, 3)

    def test_fetch_owner(self):
        r = self.s3.list_objects_v2(Bucket=self.bucket, FetchOwner=True, MaxKeys=1)
        self.assertTrue(r["Contents"][0].get("Owner", {}).get("ID"))
        r = self.s3.list_objects_v2(Bucket=self.bucket, MaxKeys=1)
        self.assertNotIn("Owner", r["Contents"][0])

    def test_max_keys_zero(self):
        r = self.s3.list_objects_v2(Bucket=self.bucket, MaxKeys=0)
        self.assertEqual(r["KeyCount"], 0)
        self.assertNotIn("Contents", r)

    def test_encoding_type_url_raw(self):
        b = self.new_bucket(self.s3, "featenc")
        self.s3.put_object(Bucket=b, Key="enc/a b+c&d", Body=b"x")
        raw = s3raw.Client()
        r = raw.request("GET", "/" + b, query=[("list-type", "2"), ("prefix", "enc/"),
                                                         ("encoding-type", "url")])
        self.assertEqual(r.status, 200, repr(r))
        key = r.body.split(b"<Key>")[1].split(b"</Key>")[0].decode()
        self.assertNotRegex(key, "[ &]", "key not URL-encoded")
        self.assertEqual(urllib.parse.unquote_plus(key), "enc/a b+c&d")
        r = raw.request("GET", "/" + b, query=[("list-type", "2"), ("prefix", "enc/")])
        self.assertIn(b"<Key>enc/a b+c&amp;d</Key>", r.body)


class BigListing(S3TestCase):
    """2,500 keys: the default 1,000-key pages, page boundaries, and
    DeleteObjects at its 1,000-key limit."""

    @classmethod
    def setUpClass(cls):
        from concurrent.futures import ThreadPoolExecutor
        cls.class_bucket("featbig")
        cls.keys = sorted("k/%05d" % i for i in range(2500))
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: cls.s3.put_object(Bucket=cls.bucket, Key=k, Body=b""),
                          cls.keys))

    def page_sizes(self):
        n = len(self.keys)     # 2,500, or 1,500 once the DeleteObjects test ran
        return [1000] * (n // 1000) + ([n % 1000] if n % 1000 else [])

    def test_default_pages_of_1000(self):
        pages = list(self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket))
        self.assertEqual([p["KeyCount"] for p in pages], self.page_sizes())
        self.assertEqual([o["Key"] for p in pages for o in p["Contents"]], self.keys)

    def test_v1_pages_of_1000(self):
        pages = list(self.s3.get_paginator("list_objects").paginate(Bucket=self.bucket))
        self.assertEqual([len(p["Contents"]) for p in pages], self.page_sizes())
        self.assertEqual([o["Key"] for p in pages for o in p["Contents"]], self.keys)

    def test_delete_objects_limit(self):
        too_many = [{"Key": k} for k in self.keys[:1001]]
        self.assertS3Error("MalformedXML", 400, self.s3.delete_objects, Bucket=self.bucket,
                           Delete={"Objects": too_many, "Quiet": True})
        r = self.s3.delete_objects(Bucket=self.bucket,
                                   Delete={"Objects": too_many[:1000], "Quiet": True})
        self.assertEqual(r.get("Errors", []), [])
        left = [o["Key"] for p in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket) for o in p.get("Contents", [])]
        self.assertEqual(left, self.keys[1000:])
        type(self).keys = self.keys[1000:]


class Multipart(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("featmp")
        cls.p1, cls.p2 = payload(5 * MIB, 31), payload(MIB + 7, 32)
        s3 = cls.s3
        uid = s3.create_multipart_upload(Bucket=cls.bucket, Key="mp")["UploadId"]
        e1 = s3.upload_part(Bucket=cls.bucket, Key="mp", UploadId=uid, PartNumber=1,
                            Body=cls.p1)["ETag"]
        e2 = s3.upload_part(Bucket=cls.bucket, Key="mp", UploadId=uid, PartNumber=2,
                            Body=cls.p2)["ETag"]
        s3.complete_multipart_upload(Bucket=cls.bucket, Key="mp", UploadId=uid, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})

    def test_get_part_number(self):
        g = self.s3.get_object(Bucket=self.bucket, Key="mp", PartNumber=2)
        self.assertEqual(g["Body"].read(), self.p2)
        self.assertEqual(g.get("PartsCount"), 2)
        self.assertEqual(g["ContentRange"], "bytes %d-%d/%d" % (
            len(self.p1), len(self.p1) + len(self.p2) - 1, len(self.p1) + len(self.p2)))

    def test_range_across_parts(self):
        lo, hi = 5 * MIB - 10, 5 * MIB + 9
        g = self.s3.get_object(Bucket=self.bucket, Key="mp", Range="bytes=%d-%d" % (lo, hi))
        self.assertEqual(g["Body"].read(), (self.p1 + self.p2)[lo:hi + 1])

    def test_list_parts_and_uploads(self):
        uid = self.s3.create_multipart_upload(Bucket=self.bucket, Key="open")["UploadId"]
        self.addCleanup(self.s3.abort_multipart_upload, Bucket=self.bucket, Key="open",
                        UploadId=uid)
        bodies = [b"one" * 10, b"two" * 20, b"three" * 30]
        for n, body in enumerate(bodies, 1):
            self.s3.upload_part(Bucket=self.bucket, Key="open", UploadId=uid, PartNumber=n,
                                Body=body)
        ups = self.s3.list_multipart_uploads(Bucket=self.bucket)["Uploads"]
        self.assertEqual([(u["Key"], u["UploadId"]) for u in ups], [("open", uid)])
        parts = self.s3.list_parts(Bucket=self.bucket, Key="open", UploadId=uid, MaxParts=2)
        self.assertEqual([(p["PartNumber"], p["Size"], p["ETag"]) for p in parts["Parts"]],
                         [(n, len(b), '"%s"' % md5(b)) for n, b in enumerate(bodies[:2], 1)])
        self.assertTrue(parts["IsTruncated"])
        rest = self.s3.list_parts(Bucket=self.bucket, Key="open", UploadId=uid,
                                  PartNumberMarker=parts["NextPartNumberMarker"])
        self.assertEqual([p["PartNumber"] for p in rest["Parts"]], [3])

    def test_upload_part_copy_range(self):
        uid = self.s3.create_multipart_upload(Bucket=self.bucket, Key="pc")["UploadId"]
        src = {"Bucket": self.bucket, "Key": "mp"}
        r1 = self.s3.upload_part_copy(Bucket=self.bucket, Key="pc", UploadId=uid, PartNumber=1,
                                      CopySource=src, CopySourceRange="bytes=0-%d" % (5 * MIB - 1))
        r2 = self.s3.upload_part_copy(Bucket=self.bucket, Key="pc", UploadId=uid, PartNumber=2,
                                      CopySource=src, CopySourceRange="bytes=%d-%d" % (
                                          5 * MIB, 5 * MIB + 99))
        self.s3.complete_multipart_upload(Bucket=self.bucket, Key="pc", UploadId=uid,
                                          MultipartUpload={"Parts": [
                                              {"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]},
                                              {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]}]})
        got = self.s3.get_object(Bucket=self.bucket, Key="pc")["Body"].read()
        self.assertEqual(got, (self.p1 + self.p2)[:5 * MIB + 100])

    def test_get_object_attributes_parts(self):
        r = self.s3.get_object_attributes(Bucket=self.bucket, Key="mp", MaxParts=1,
                                          ObjectAttributes=["ETag", "ObjectParts", "ObjectSize"])
        self.assertEqual(r["ObjectSize"], len(self.p1) + len(self.p2))
        self.assertTrue(r["ETag"].endswith("-2"), r["ETag"])
        parts = r["ObjectParts"]
        self.assertEqual(parts["TotalPartsCount"], 2)
        self.assertTrue(parts.get("IsTruncated"))
        self.assertEqual([p["PartNumber"] for p in parts.get("Parts", [])], [1])


if __name__ == "__main__":
    mgtest.main()
