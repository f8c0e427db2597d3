# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system timeout=600
"""Lifecycle enforcement end to end (issue 8, done-when 1 and 4), on servers
this suite starts with "lifecycle": {"day_seconds": 5}, so a Days=1 rule
expires an object 5-10 s after its write (lc_due_after rounds up to the next
multiple of day_seconds, S3's "next midnight UTC").

- Rules: aws-cli (Debian's /usr/bin/aws) put-bucket-lifecycle-configuration
  with Days=1 on prefix logs/; objects under logs/ are gone within
  3 x day_seconds, others remain, including a logs/ object overwritten after
  it was indexed (its clock restarts: still there when its first version
  would have expired, gone later); an incomplete multipart upload under
  AbortIncompleteMultipartUpload is aborted; tag and size filters select
  exactly what they should; get-bucket-lifecycle-configuration returns what
  was put; x-amz-expiration on PUT and HEAD (rule-id, a day boundary);
  malformed configurations answer MalformedXML / InvalidArgument /
  NotImplemented; DELETE answers 204 and GET then 404
  NoSuchLifecycleConfiguration; /metrics and `metagate admin lifecycle
  status` show the expiry.
- Crash: many due objects and "max_per_second": 40, kill -9 while expiry
  runs, restart on the same data: no live object was deleted, nothing that
  was gone comes back, and expiry resumes until the prefix is empty."""

import json
import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET

import mgserver
import mgtest
import s3raw
from mgtest import S3TestCase, run

AWS = "/usr/bin/aws"
DAY_S = 5
GONE_WITHIN_S = 3 * DAY_S  # done-when 1


def wait_for_boundary(offset_s):
    """Sleeps until the wall clock is offset_s past a multiple of DAY_S, so the
    test knows which lifecycle "day" a write falls in."""
    time.sleep((offset_s - time.time() % DAY_S) % DAY_S)


def due_after(t, days=1):
    """lc_due_after in seconds: t + days "days", rounded up to the next one."""
    x = t + days * DAY_S
    return (int(x) // DAY_S + (1 if x % DAY_S else 0)) * DAY_S


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class LifecycleServer:
    """A metagate with a 5 s lifecycle day, and the clients that talk to it."""

    def __init__(self, name, extra=None):
        self.workdir = os.path.join(mgtest.TMP, name)
        os.makedirs(self.workdir, exist_ok=True)
        cfg = {"lifecycle": {"day_seconds": DAY_S}}
        for k, v in (extra or {}).items():
            cfg["lifecycle"][k] = v
        self.server = mgserver.Server(os.environ["MG_BIN"], self.workdir,
                                      extra_config=cfg).start()
        u = self.server.users[0]
        self.ak, self.sk = u["access_key"], u["secret_key"]
        self.connect()

    def connect(self):
        mgtest.ENDPOINT = self.server.endpoint
        mgtest.ACCESS_KEY, mgtest.SECRET_KEY = self.ak, self.sk
        self.s3 = mgtest.client()
        self.raw = s3raw.Client(self.server.endpoint, self.ak, self.sk)

    def metrics(self):
        r = self.raw.request("GET", "/metrics", sign=False)
        assert r.status == 200, r
        return r.body.decode()

    def aws(self, *args, check=True):
        cfg = os.path.join(self.workdir, "aws-config")
        with open(cfg, "w") as f:
            f.write("[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.ak, AWS_SECRET_ACCESS_KEY=self.sk,
                   AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=cfg,
                   AWS_SHARED_CREDENTIALS_FILE=os.path.join(self.workdir, "none"),
                   AWS_EC2_METADATA_DISABLED="true", AWS_PAGER="", HOME=self.workdir)
        return run([AWS, "--endpoint-url", self.server.endpoint] + list(args), env=env,
                   check=check, timeout=300)

    def keys(self, bucket, prefix=""):
        out, token = [], None
        while True:
            kw = {"Bucket": bucket, "Prefix": prefix}
            if token:
                kw["ContinuationToken"] = token
            page = self.s3.list_objects_v2(**kw)
            out += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]


RULES = {"Rules": [
    {"ID": "logs-rule", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
     "Expiration": {"Days": 1}},
    {"ID": "tag-rule", "Status": "Enabled",
     "Filter": {"And": {"Prefix": "tagged/", "Tags": [{"Key": "expire", "Value": "yes"}]}},
     "Expiration": {"Days": 1}},
    {"ID": "size-rule", "Status": "Enabled",
     "Filter": {"And": {"Prefix": "sized/", "ObjectSizeGreaterThan": 100,
                        "ObjectSizeLessThan": 1000}},
     "Expiration": {"Days": 1}},
    {"ID": "mpu-rule", "Status": "Enabled", "Filter": {"Prefix": "uploads/"},
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
    {"ID": "off-rule", "Status": "Disabled", "Filter": {"Prefix": "other/"},
     "Expiration": {"Days": 1}},
]}


class Lifecycle(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ls = LifecycleServer("lifecycle")
        cls.s3 = cls.ls.s3

    @classmethod
    def tearDownClass(cls):
        cls.ls.server.stop()

    def setUp(self):
        self.ls.connect()

    def put_rules(self, bucket, rules=RULES):
        path = os.path.join(self.ls.workdir, "rules-%s.json" % bucket)
        with open(path, "w") as f:
            json.dump(rules, f)
        self.ls.aws("s3api", "put-bucket-lifecycle-configuration", "--bucket", bucket,
                    "--lifecycle-configuration", "file://" + path)

    def test_expiry(self):
        """Done-when 1: what the rules select is gone within 3 x day_seconds, the
        rest stays; an overwritten object's clock restarts; a stale upload under
        AbortIncompleteMultipartUpload is aborted."""
        s3, b = self.s3, self.new_bucket(s3=self.s3, prefix="lc")
        self.put_rules(b)
        # GetBucketLifecycleConfiguration returns what was put.
        got = json.loads(self.ls.aws("s3api", "get-bucket-lifecycle-configuration",
                                     "--bucket", b, "--output", "json").stdout)
        self.assertEqual(got["Rules"], RULES["Rules"])
        # Write at 1 s into a lifecycle day so the overwrite below lands in the next one.
        wait_for_boundary(1.0)
        t0 = time.time()
        expiring = ["logs/a", "logs/b/c", "logs/2026-12-01T00:00:00", "tagged/yes",
                    "sized/mid"]
        staying = ["logs-old/a", "logsx", "other/a", "tagged/no", "tagged/none",
                   "sized/small", "sized/big", "sized/edge-100", "sized/edge-1000", "keep"]
        for k in expiring + staying + ["logs/overwritten"]:
            size = {"sized/mid": 500, "sized/small": 10, "sized/big": 2000,
                    "sized/edge-100": 100, "sized/edge-1000": 1000}.get(k, 4)
            tagging = {"tagged/yes": "expire=yes", "tagged/no": "expire=no"}.get(k)
            kw = {"Tagging": tagging} if tagging else {}
            s3.put_object(Bucket=b, Key=k, Body=b"x" * size, **kw)
        up_gone = s3.create_multipart_upload(Bucket=b, Key="uploads/stale")["UploadId"]
        up_kept = s3.create_multipart_upload(Bucket=b, Key="logs-uploads/x")["UploadId"]
        s3.upload_part(Bucket=b, Key="uploads/stale", UploadId=up_gone, PartNumber=1,
                       Body=b"p" * 100)
        first_due = due_after(t0)
        # Overwrite in the next lifecycle day (its index row already exists): due a day later.
        time.sleep(max(0.0, (first_due - DAY_S + 0.5) - time.time()))
        t1 = time.time()
        s3.put_object(Bucket=b, Key="logs/overwritten", Body=b"second")
        second_due = due_after(t1)
        self.assertEqual(second_due, first_due + DAY_S)
        # The siblings written with the first version expire...
        while set(self.ls.keys(b, "logs/")) & set(expiring) and time.time() < t0 + GONE_WITHIN_S:
            time.sleep(0.25)
        # ... while the overwritten object is still there (its new due time is later).
        self.assertLess(time.time(), second_due, "expiry too slow to tell the clocks apart")
        self.assertEqual(s3.get_object(Bucket=b, Key="logs/overwritten")["Body"].read(),
                         b"second")
        # Everything the rules select is gone within 3 x day_seconds of its write.
        while time.time() < t0 + GONE_WITHIN_S:
            if not set(self.ls.keys(b)) & set(expiring):
                break
            time.sleep(0.25)
        self.assertEqual(sorted(set(self.ls.keys(b)) & set(expiring)), [])
        self.assertEqual(sorted(set(self.ls.keys(b)) - {"logs/overwritten"}), sorted(staying))
        while "logs/overwritten" in self.ls.keys(b, "logs/") and time.time() < t1 + GONE_WITHIN_S:
            time.sleep(0.25)
        self.assertNotIn("logs/overwritten", self.ls.keys(b, "logs/"))
        # The stale upload is aborted, the one no rule names is not.
        while time.time() < t0 + GONE_WITHIN_S + DAY_S:
            ups = [u["Key"] for u in s3.list_multipart_uploads(Bucket=b).get("Uploads", [])]
            if "uploads/stale" not in ups:
                break
            time.sleep(0.5)
        self.assertEqual(ups, ["logs-uploads/x"])
        s3.abort_multipart_upload(Bucket=b, Key="logs-uploads/x", UploadId=up_kept)
        self.assertEqual(sorted(self.ls.keys(b)), sorted(staying))
        # The figures show it.
        m = self.ls.metrics()
        self.assertGreaterEqual(metric(m, "metagate_lifecycle_expired_total"),
                                len(expiring) + 1)
        for name in ("metagate_rocksdb_tombstones{cf=\"meta\"}",
                     "metagate_rocksdb_lsm_bytes_written", "metagate_lifecycle_due_backlog",
                     "metagate_lifecycle_range_deletes_total",
                     "metagate_lifecycle_point_deletes_total",
                     "metagate_lifecycle_due_oldest_age_seconds",
                     "metagate_tracker_compactions_total"):
            self.assertIsNotNone(metric(m, name), name)
        out = subprocess.run([os.environ["MG_BIN"], "admin", "lifecycle", "status",
                              "--endpoint", self.ls.server.endpoint],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        row = re.search(r"^objects expired\s+(\d+)$", out.stdout, re.M)
        self.assertIsNotNone(row, out.stdout)
        self.assertGreaterEqual(int(row.group(1)), len(expiring) + 1)

    def test_expiration_header(self):
        """x-amz-expiration on PUT, HEAD and GET of objects a rule selects,
        none on others."""
        s3, b = self.s3, self.new_bucket(s3=self.s3, prefix="lc")
        self.put_rules(b)
        t = time.time()
        put = s3.put_object(Bucket=b, Key="logs/h", Body=b"x")
        head = s3.head_object(Bucket=b, Key="logs/h")
        get = s3.get_object(Bucket=b, Key="logs/h")
        get["Body"].read()
        for resp in (put, head, get):
            v = resp.get("Expiration")
            self.assertIsNotNone(v, resp["ResponseMetadata"]["HTTPHeaders"])
            m = re.fullmatch(r'expiry-date="([^"]+)", rule-id="([^"]+)"', v)
            self.assertIsNotNone(m, v)
            self.assertEqual(m.group(2), "logs-rule")
            when = time.mktime(time.strptime(m.group(1), "%a, %d %b %Y %H:%M:%S GMT")) \
                - time.timezone
            self.assertEqual(int(when) % DAY_S, 0, v)  # rounded to a "day" boundary
            self.assertGreaterEqual(when, t + DAY_S - 1)
            self.assertLessEqual(when, t + 2 * DAY_S + 1)
        s3.put_object(Bucket=b, Key="tagged/no", Body=b"x", Tagging="expire=no")
        for k in ("tagged/no",):
            self.assertNotIn("Expiration", s3.head_object(Bucket=b, Key=k))
        s3.put_object(Bucket=b, Key="other/disabled", Body=b"x")
        self.assertNotIn("Expiration", s3.head_object(Bucket=b, Key="other/disabled"))

    def test_malformed(self):
        """Malformed or contradictory configurations get AWS's error, with the
        parser's message; DELETE is 204 and GET then NoSuchLifecycleConfiguration."""
        s3, b = self.s3, self.new_bucket(s3=self.s3, prefix="lc")
        rule = ("<Rule><ID>r</ID><Filter><Prefix>logs/</Prefix></Filter>"
                "<Status>Enabled</Status>%s</Rule>")
        cases = [
            ("<LifecycleConfiguration><Rule>", "MalformedXML", 400),
            ("<LifecycleConfiguration>" + rule.replace("<Status>Enabled</Status>", "")
             % "<Expiration><Days>1</Days></Expiration>" + "</LifecycleConfiguration>",
             "MalformedXML", 400),
            ("<LifecycleConfiguration>" + rule % "<Expiration><Days>0</Days></Expiration>"
             + "</LifecycleConfiguration>", "InvalidArgument", 400),
            ("<LifecycleConfiguration>" + rule % "<Expiration><Days>x</Days></Expiration>"
             + "</LifecycleConfiguration>", "MalformedXML", 400),
            ("<LifecycleConfiguration>" + rule %
             "<Expiration><Date>2030-01-01T12:00:00Z</Date></Expiration>"
             + "</LifecycleConfiguration>", "InvalidArgument", 400),
            ("<LifecycleConfiguration>" + rule % "" + "</LifecycleConfiguration>",
             "InvalidRequest", 400),
            ("<LifecycleConfiguration>" + rule %
             "<Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition>"
             + "</LifecycleConfiguration>", "NotImplemented", 501),
        ]
        path = "/%s" % b
        for body, code, status in cases:
            r = self.ls.raw.request("PUT", path, query=[("lifecycle", "")], body=body.encode())
            self.assertEqual((r.status, r.code), (status, code), body)
            msg = ET.fromstring(r.body).find("Message")
            self.assertTrue(msg is not None and msg.text, r.body)
        r = self.ls.raw.request("GET", path, query=[("lifecycle", "")])
        self.assertEqual((r.status, r.code), (404, "NoSuchLifecycleConfiguration"))
        self.put_rules(b)
        r = self.ls.raw.request("GET", path, query=[("lifecycle", "")])
        self.assertEqual(r.status, 200, r)
        r = self.ls.raw.request("DELETE", path, query=[("lifecycle", "")])
        self.assertEqual(r.status, 204, r)
        r = self.ls.raw.request("GET", path, query=[("lifecycle", "")])
        self.assertEqual((r.status, r.code), (404, "NoSuchLifecycleConfiguration"))
        s3.put_object(Bucket=b, Key="logs/after-delete", Body=b"x")
        self.assertNotIn("Expiration", s3.head_object(Bucket=b, Key="logs/after-delete"))


class Crash(S3TestCase):
    """Done-when 4: kill -9 during expiry, restart."""

    DUE = 400
    LIVE = 40
    RATE = 40  # lifecycle.max_per_second: expiry takes DUE / RATE = 10 s

    RULES = {"Rules": [{"ID": "logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
                        "Expiration": {"Days": 1}}]}

    def kill_midway(self, ls, b, due, live, what):
        """Wait until expiry is well under way but far from done, kill -9 and restart: no live
        object was deleted, no expired object came back, and the rest goes afterwards.
        Returns how many were gone before the kill."""
        deadline = time.time() + 3 * DAY_S + 60
        while time.time() < deadline:
            left = len(ls.keys(b, "logs/"))
            if left <= self.DUE - 3 * self.RATE:
                break
            time.sleep(0.2)
        self.assertGreater(left, 0, "%s ended before the kill: raise DUE" % what)
        self.assertLess(left, self.DUE, "%s never expired anything" % what)
        gone_before = set(due) - set(ls.keys(b, "logs/"))
        ls.server.restart(kill=True)
        ls.connect()
        after = set(ls.keys(b))
        self.assertEqual(sorted(set(live) - after), [], "a live object was deleted")
        self.assertEqual(sorted(gone_before & after), [], "an expired object came back")
        # It resumes: the rest goes at the configured rate.
        resume = time.time()
        while ls.keys(b, "logs/") and time.time() < resume + self.DUE / self.RATE + 3 * DAY_S:
            time.sleep(0.5)
        self.assertEqual(ls.keys(b, "logs/"), [])
        self.assertEqual(sorted(ls.keys(b)), sorted(live))
        for k in live:
            self.assertEqual(ls.s3.get_object(Bucket=b, Key=k)["Body"].read(), k.encode())
        self.assertGreater(metric(ls.metrics(), "metagate_lifecycle_expired_total"), 0)
        return len(gone_before)

    def test_kill9_during_expiry(self):
        ls = LifecycleServer("crash", {"max_per_second": self.RATE})
        self.addCleanup(ls.server.stop)
        b = mgtest.bucket_name("lccrash")
        ls.s3.create_bucket(Bucket=b)
        ls.s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=self.RULES)
        due = ["logs/%05d" % i for i in range(self.DUE)]
        live = ["live/%03d" % i for i in range(self.LIVE)] + ["logs"]
        t0 = time.time()
        for k in due + live:
            ls.s3.put_object(Bucket=b, Key=k, Body=k.encode())
        self.kill_midway(ls, b, due, live, "expiry")
        self.assertGreater(time.time() - t0, self.DUE / self.RATE * 0.5,
                           "max_per_second did not pace expiry")

    def test_kill9_during_reindex_walk(self):
        """The same for the re-index walk, which expires by itself what is due when the rule
        is set on a bucket of old objects (lifecycle.max_per_second 0, the default): the walk
        is paced with lifecycle.reindex_per_second and killed half-way."""
        ls = LifecycleServer("crash-walk", {"reindex_per_second": self.RATE})
        self.addCleanup(ls.server.stop)
        b = mgtest.bucket_name("lcwalk")
        ls.s3.create_bucket(Bucket=b)
        due = ["logs/%05d" % i for i in range(self.DUE)]
        live = ["live/%03d" % i for i in range(self.LIVE)] + ["logs", "logsx/0"]
        for k in due + live:
            ls.s3.put_object(Bucket=b, Key=k, Body=k.encode())
        # Every object is past its day before the rule exists: no due row was written at PUT
        # time, so only the walk can expire them.
        time.sleep(max(0.0, due_after(time.time()) - time.time()) + 0.5)
        t0 = time.time()
        ls.s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=self.RULES)
        before = self.kill_midway(ls, b, due, live, "the walk")
        took = time.time() - t0
        print("# walk: %d due objects expired in %.1f s across a kill -9 (%d before it)" % (
            self.DUE, took, before))
        self.assertGreater(took, self.DUE / self.RATE * 0.5,
                           "reindex_per_second did not pace the walk")

if __name__ == "__main__":
    mgtest.main()
