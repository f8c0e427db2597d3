# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system
"""Canned ACLs are enforced (issue 2): anonymous requests (curl with no
signature) are denied unless an ACL or a presigned URL allows them;
public-read objects and buckets, public-read-write buckets and
authenticated-read objects behave as the S3 ACL overview documents; GET ?acl
returns the grant; explicit grants answer NotImplemented, never silently
ignored."""

import os

import mgtest
import s3raw
from mgtest import S3TestCase, client, payload, run

ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"
AUTH_USERS = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"


def curl_anon(url, *extra):
    """(status, body) of an anonymous curl request."""
    out = os.path.join(mgtest.TMP, "anon.out")
    p = run(["curl", "-sS", "-o", out, "-w", "%{http_code}"] + list(extra) + [url],
            check=False)
    with open(out, "rb") as f:
        return int(p.stdout or 0), f.read()


class CannedAcl(S3TestCase):
    def setUp(self):
        self.s3 = client()
        self.bucket = self.new_bucket(self.s3, "acl")
        self.url = "%s/%s" % (mgtest.ENDPOINT, self.bucket)

    def grants(self, **kw):
        acl = (self.s3.get_object_acl(**kw) if "Key" in kw else self.s3.get_bucket_acl(**kw))
        return {(g["Grantee"].get("URI") or g["Grantee"].get("ID"), g["Permission"])
                for g in acl["Grants"]}

    def test_private_object_denied(self):
        self.s3.put_object(Bucket=self.bucket, Key="priv", Body=b"secret")
        status, body = curl_anon(self.url + "/priv")
        self.assertEqual((status, s3raw.error_code(body)), (403, "AccessDenied"))

    def test_public_read_object(self):
        data = payload(2048, 1)
        self.s3.put_object(Bucket=self.bucket, Key="pub", Body=data, ACL="public-read")
        status, body = curl_anon(self.url + "/pub")
        self.assertEqual(status, 200)
        self.assertEqual(body, data)
        status, _ = curl_anon(self.url + "/pub", "-I")
        self.assertEqual(status, 200)
        self.assertIn((ALL_USERS, "READ"), self.grants(Bucket=self.bucket, Key="pub"))
        # Reading is all it allows.
        status, body = curl_anon(self.url + "/pub", "-X", "DELETE")
        self.assertEqual((status, s3raw.error_code(body)), (403, "AccessDenied"))
        status, body = curl_anon(self.url + "/pub", "-X", "PUT", "--data-binary", "x")
        self.assertEqual((status, s3raw.error_code(body)), (403, "AccessDenied"))

    def test_put_object_acl_toggles(self):
        self.s3.put_object(Bucket=self.bucket, Key="t", Body=b"toggle")
        self.assertEqual(curl_anon(self.url + "/t")[0], 403)
        self.s3.put_object_acl(Bucket=self.bucket, Key="t", ACL="public-read")
        self.assertEqual(curl_anon(self.url + "/t"), (200, b"toggle"))
        self.s3.put_object_acl(Bucket=self.bucket, Key="t", ACL="private")
        self.assertEqual(curl_anon(self.url + "/t")[0], 403)
        self.assertNotIn((ALL_USERS, "READ"), self.grants(Bucket=self.bucket, Key="t"))

    def test_public_read_bucket_lists_but_objects_stay_private(self):
        self.s3.put_bucket_acl(Bucket=self.bucket, ACL="public-read")
        self.s3.put_object(Bucket=self.bucket, Key="inside", Body=b"x")
        status, body = curl_anon(self.url + "?list-type=2")
        self.assertEqual(status, 200, body)
        self.assertIn(b"<Key>inside</Key>", body)
        self.assertIn((ALL_USERS, "READ"), self.grants(Bucket=self.bucket))
        self.assertEqual(curl_anon(self.url + "/inside")[0], 403)

    def test_private_bucket_list_denied(self):
        status, body = curl_anon(self.url + "?list-type=2")
        self.assertEqual((status, s3raw.error_code(body)), (403, "AccessDenied"))

    def test_public_read_write_bucket_accepts_anonymous_put(self):
        b = mgtest.bucket_name("aclrw")
        self.s3.create_bucket(Bucket=b, ACL="public-read-write")
        self.cleanup_bucket(self.s3, b)
        status, body = curl_anon("%s/%s/anon.txt" % (mgtest.ENDPOINT, b), "-X", "PUT",
                                 "--data-binary", "from nobody")
        self.assertEqual(status, 200, body)
        self.assertEqual(self.s3.get_object(Bucket=b, Key="anon.txt")["Body"].read(),
                         b"from nobody")

    def test_authenticated_read_object(self):
        self.s3.put_object(Bucket=self.bucket, Key="auth", Body=b"members",
                           ACL="authenticated-read")
        other = client(user=2)
        self.assertEqual(other.get_object(Bucket=self.bucket, Key="auth")["Body"].read(),
                         b"members")
        self.assertEqual(curl_anon(self.url + "/auth")[0], 403)
        self.assertIn((AUTH_USERS, "READ"), self.grants(Bucket=self.bucket, Key="auth"))

    def test_private_object_denied_to_other_user(self):
        self.s3.put_object(Bucket=self.bucket, Key="mine", Body=b"x")
        self.assertS3Error("AccessDenied", 403, client(user=2).get_object,
                           Bucket=self.bucket, Key="mine")

    def test_presigned_url_allows_private(self):
        self.s3.put_object(Bucket=self.bucket, Key="pre", Body=b"presigned ok")
        url = client(signature="s3v4").generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": "pre"}, ExpiresIn=60)
        self.assertEqual(curl_anon(url), (200, b"presigned ok"))

    def test_explicit_grant_not_implemented(self):
        raw = s3raw.Client()
        r = raw.request("PUT", s3raw.key_path(self.bucket, "g"), body=b"x",
                        headers={"x-amz-grant-read": 'uri="%s"' % ALL_USERS})
        self.assertEqual((r.code, r.status), ("NotImplemented", 501), repr(r))
        self.assertEqual(curl_anon(self.url + "/g")[0], 403)


if __name__ == "__main__":
    mgtest.main()
