# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system timeout=600
"""Issue 9, "Hostile and careless clients" and the presigned/region entries
of tests/conformance/report.md (M1-M3, M8, M13, M15): each test sends the
request the differential tool found answered differently from AWS and checks
AWS's Code, status and Message. Raw requests (s3raw), since SDKs refuse to
send most of them."""

import datetime
import os
import stat
import xml.etree.ElementTree as ET

import mgtest
import s3raw
from mgtest import S3TestCase, payload


def message(body):
    el = ET.fromstring(body).find("Message")
    return el.text if el is not None else None


class Base(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.class_bucket("hard")
        cls.s3.put_object(Bucket=cls.bucket, Key="k", Body=b"hello")
        cls.raw = s3raw.Client()

    def presigned(self, expires, when=None, region="us-east-1"):
        target = s3raw.presign_v4("GET", self.raw.hostport, s3raw.key_path(self.bucket, "k"),
                                  mgtest.ACCESS_KEY, mgtest.SECRET_KEY, expires=expires,
                                  when=when, region=region)
        return self.raw.request("GET", target.split("?")[0], sign=False, raw_target=target)

    def assertError(self, r, status, code, msg=None):
        self.assertEqual((r.status, r.code), (status, code), repr(r))
        if msg is not None:
            self.assertEqual(message(r.body), msg, repr(r))


class PresignedExpires(Base):
    """M1-M3: X-Amz-Expires and X-Amz-Date of presigned URLs."""

    WEEK = "X-Amz-Expires must be less than a week (in seconds) that is 604800"
    NAN = "X-Amz-Expires should be a number"

    def test_valid(self):
        r = self.presigned(60)
        self.assertEqual((r.status, r.body), (200, b"hello"), repr(r))

    def test_above_a_week(self):
        for v in ("604801", "9999999", "100000000"):
            self.assertError(self.presigned(v), 400, "AuthorizationQueryParametersError",
                             self.WEEK)

    def test_negative(self):
        self.assertError(self.presigned("-1"), 400, "AuthorizationQueryParametersError",
                         "X-Amz-Expires must be non-negative")

    def test_not_a_number(self):
        for v in ("abc", "", "1e3", "99999999999999999999", "+5", "1.5"):
            self.assertError(self.presigned(v), 400, "AuthorizationQueryParametersError",
                             self.NAN)

    def test_zero_expires_at_once(self):
        self.assertError(self.presigned(0), 403, "AccessDenied", "Request has expired")

    def test_expired(self):
        past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=120)
        self.assertError(self.presigned(60, when=past), 403, "AccessDenied",
                         "Request has expired")

    def test_not_yet_valid(self):
        future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        self.assertError(self.presigned(60, when=future), 403, "AccessDenied",
                         "Request is not yet valid")


class WrongRegion(Base):
    """M15: a credential scope naming another region."""

    def test_header(self):
        raw = s3raw.Client(region="eu-west-1")
        r = raw.request("GET", s3raw.key_path(self.bucket))
        self.assertError(r, 400, "AuthorizationHeaderMalformed",
                         "The authorization header is malformed; the region 'eu-west-1' is "
                         "wrong; expecting 'us-east-1'")
        self.assertEqual(ET.fromstring(r.body).findtext("Region"), "us-east-1", repr(r))

    def test_presigned(self):
        self.assertError(self.presigned(60, region="eu-west-1"), 400,
                         "AuthorizationQueryParametersError",
                         "Error parsing the X-Amz-Credential parameter; the region "
                         "'eu-west-1' is wrong; expecting 'us-east-1'")

    def test_right_region(self):
        r = self.raw.request("GET", s3raw.key_path(self.bucket, "k"))
        self.assertEqual(r.status, 200, repr(r))


class KeyNames(Base):
    """M8: keys that are not UTF-8 are refused; listings stay well-formed XML."""

    def test_invalid_utf8_refused(self):
        for enc in ("%FF", "%C3%28", "%ED%A0%80", "%C0%AF", "%F4%90%80%80", "a%E2%82"):
            path = "/%s/%s" % (self.bucket, enc)
            r = self.raw.request("PUT", path, body=b"x")
            self.assertError(r, 400, "InvalidURI")

    def test_valid_utf8_accepted(self):
        key = "caf\u00e9-\u65e5\u672c-\U0001F600"
        r = self.raw.request("PUT", s3raw.key_path(self.bucket, key), body=b"x")
        self.assertEqual(r.status, 200, repr(r))
        keys = [o["Key"] for o in self.s3.list_objects_v2(Bucket=self.bucket)["Contents"]]
        self.assertIn(key, keys)


class ReservedBucketNames(Base):
    """M13: /health and /metrics stay the operational endpoints."""

    def test_refused(self):
        for name in ("health", "metrics"):
            r = self.raw.request("PUT", "/" + name)
            self.assertError(r, 400, "InvalidBucketName",
                             "The bucket names health and metrics are reserved for the "
                             "endpoints /health and /metrics.")
        r = self.raw.request("GET", "/health", sign=False)
        self.assertEqual((r.status, r.body), (200, b"ok\n"))

    def test_neighbours_allowed(self):
        b = "healthz-" + mgtest.bucket_name("x")[-8:]
        r = self.raw.request("PUT", "/" + b)
        self.assertEqual(r.status, 200, repr(r))
        self.raw.request("DELETE", "/" + b)


class FileModes(Base):
    """Data files 0600 and directories 0700 whatever the umask (run.py starts the
    server with the runner's umask, usually 022)."""

    def test_modes_after_put(self):
        if not mgtest.DATA_DIR:
            self.skipTest("MG_DATA_DIR not set")
        self.s3.put_object(Bucket=self.bucket, Key="modes", Body=payload(3 << 20, 7))
        bad = []
        for root, dirs, files in os.walk(mgtest.DATA_DIR):
            for d in dirs:
                m = stat.S_IMODE(os.lstat(os.path.join(root, d)).st_mode)
                if m & 0o077:
                    bad.append("%s %o" % (os.path.join(root, d), m))
            for f in files:
                p = os.path.join(root, f)
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o077:
                    bad.append("%s %o" % (p, stat.S_IMODE(st.st_mode)))
        self.assertEqual(bad, [])


if __name__ == "__main__":
    mgtest.main()
