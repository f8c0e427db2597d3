# SPDX-License-Identifier: Apache-2.0
# mg: server=default python=system timeout=900
"""aws-cli v2 (Debian's /usr/bin/aws 2.9: the `aws` on a developer's PATH
may be another one) against metagate, path-style: `s3 mb/cp/ls/sync/rm
--recursive/presign` with a 1 KiB and a 100 MiB file (multipart, 8 MiB
parts), and `s3api` put-object, get-object --range, head-object,
list-objects-v2 (--delimiter, --max-items/--page-size pagination),
delete-objects, copy-object, put-object-tagging. Bytes and listings are
compared exactly."""

import hashlib
import json
import os
import re
import shutil

import mgtest
from mgtest import S3TestCase, file_md5, run

AWS = "/usr/bin/aws"
MIB = 1 << 20


def aws_env():
    cfg = os.path.join(mgtest.TMP, "aws-config")
    with open(cfg, "w") as f:
        f.write("[default]\nregion = %s\ns3 =\n  addressing_style = path\n" % mgtest.REGION)
    env = dict(os.environ)
    env.update({
        "AWS_ACCESS_KEY_ID": mgtest.ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": mgtest.SECRET_KEY,
        "AWS_DEFAULT_REGION": mgtest.REGION,
        "AWS_CONFIG_FILE": cfg,
        "AWS_SHARED_CREDENTIALS_FILE": os.path.join(mgtest.TMP, "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_PAGER": "",
        "HOME": mgtest.TMP,
    })
    return env


ENV = None


def aws(*args, check=True):
    global ENV
    if ENV is None:
        ENV = aws_env()
    return run([AWS, "--endpoint-url", mgtest.ENDPOINT] + list(args), env=ENV,
               check=check, timeout=900)


def aws_json(*args):
    out = aws(*args, "--output", "json").stdout
    return json.loads(out) if out.strip() else {}


def local(*parts):
    return os.path.join(mgtest.TMP, *parts)


def seed(bucket, keys, body=b"seed"):
    """Creates objects with boto3: setup only, so the aws-cli calls under
    test stay few (each costs a second of interpreter start)."""
    s3 = mgtest.client()
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=body)


def s3_ls(url):
    """`aws s3 ls URL` as [(size, name)], PRE lines as (None, name)."""
    rows = []
    for line in aws("s3", "ls", url).stdout.splitlines():
        m = re.match(r"^\s*PRE (.*)$", line)
        if m:
            rows.append((None, m.group(1)))
            continue
        m = re.match(r"^\S+ \S+\s+(\d+) (.*)$", line)
        if m:
            rows.append((int(m.group(1)), m.group(2)))
    return rows


class S3Commands(S3TestCase):
    def setUp(self):
        if not os.access(AWS, os.X_OK):
            self.skipTest("no %s (Debian awscli)" % AWS)
        self.bucket = mgtest.bucket_name("cli")
        aws("s3", "mb", "s3://" + self.bucket)
        self.addCleanup(aws, "s3", "rb", "--force", "s3://" + self.bucket, check=False)

    def test_mb_and_ls_buckets(self):
        names = [line.split()[-1] for line in aws("s3", "ls").stdout.splitlines()]
        self.assertIn(self.bucket, names)

    def test_cp_1kib_roundtrip(self):
        src, dst = local("small.bin"), local("small.out")
        md5 = mgtest.write_file(src, 1024)
        aws("s3", "cp", src, "s3://%s/dir/small.bin" % self.bucket)
        self.assertEqual(s3_ls("s3://%s/dir/" % self.bucket), [(1024, "small.bin")])
        self.assertEqual(s3_ls("s3://%s/" % self.bucket), [(None, "dir/")])
        aws("s3", "cp", "s3://%s/dir/small.bin" % self.bucket, dst)
        self.assertEqual(file_md5(dst), md5)

    def test_cp_100mib_multipart_roundtrip(self):
        src, dst = local("big.bin"), local("big.out")
        size = 100 * MIB
        md5 = mgtest.write_file(src, size)
        aws("s3", "cp", src, "s3://%s/big.bin" % self.bucket)
        head = aws_json("s3api", "head-object", "--bucket", self.bucket, "--key", "big.bin")
        self.assertEqual(head["ContentLength"], size)
        # aws-cli's default multipart chunk is 8 MiB: 13 parts.
        digests = b""
        with open(src, "rb") as f:
            for block in iter(lambda: f.read(8 * MIB), b""):
                digests += hashlib.md5(block).digest()
        self.assertEqual(head["ETag"], '"%s-13"' % hashlib.md5(digests).hexdigest())
        aws("s3", "cp", "s3://%s/big.bin" % self.bucket, dst)
        self.assertEqual(file_md5(dst), md5)
        self.assertEqual(s3_ls("s3://%s/" % self.bucket), [(size, "big.bin")])
        os.unlink(src)
        os.unlink(dst)

    def test_sync_up_down_delete(self):
        up = local("sync-up")
        files = {"a.txt": 1024, "b/c.txt": 2048, "b/d/e.bin": 70000, "f g.txt": 1}
        md5 = {}
        for rel, size in files.items():
            os.makedirs(os.path.dirname(os.path.join(up, rel)), exist_ok=True)
            md5[rel] = mgtest.write_file(os.path.join(up, rel), size)
        url = "s3://%s/tree/" % self.bucket
        out = aws("s3", "sync", up, url).stdout
        self.assertEqual(out.count("upload:"), 4, out)
        listed = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket)
        self.assertEqual(sorted((o["Key"], o["Size"]) for o in listed["Contents"]),
                         sorted(("tree/" + k, v) for k, v in files.items()))
        # A second sync with no change uploads nothing; a changed file uploads once.
        self.assertEqual(aws("s3", "sync", up, url).stdout.count("upload:"), 0)
        md5["a.txt"] = mgtest.write_file(os.path.join(up, "a.txt"), 1500)
        out = aws("s3", "sync", up, url).stdout
        self.assertEqual(out.count("upload:"), 1, out)
        down = local("sync-down")
        aws("s3", "sync", url, down)
        for rel in files:
            self.assertEqual(file_md5(os.path.join(down, rel)), md5[rel], rel)
        os.unlink(os.path.join(up, "b", "c.txt"))
        aws("s3", "sync", "--delete", up, url)
        listed = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket)
        self.assertEqual(sorted(o["Key"] for o in listed["Contents"]),
                         ["tree/a.txt", "tree/b/d/e.bin", "tree/f g.txt"])
        shutil.rmtree(up)
        shutil.rmtree(down)

    def test_rm_recursive(self):
        seed(self.bucket, ("del/1", "del/2", "del/sub/3", "keep/1", "delta"))
        out = aws("s3", "rm", "--recursive", "s3://%s/del/" % self.bucket).stdout
        self.assertEqual(out.count("delete:"), 3, out)
        listed = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket)
        self.assertEqual([o["Key"] for o in listed["Contents"]], ["delta", "keep/1"])

    def test_presign(self):
        src, dst = local("p.bin"), local("p.out")
        md5 = mgtest.write_file(src, 1024)
        aws("s3", "cp", src, "s3://%s/dir/p.bin" % self.bucket)
        url = aws("s3", "presign", "s3://%s/dir/p.bin" % self.bucket,
                  "--expires-in", "300").stdout.strip()
        self.assertIn("X-Amz-Signature=", url)
        p = run(["curl", "-sS", "-o", dst, "-w", "%{http_code}", url], check=False)
        self.assertEqual(p.stdout, "200", open(dst, "rb").read()[:300])
        self.assertEqual(file_md5(dst), md5)


class S3Api(S3TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bucket = mgtest.bucket_name("api")
        aws("s3api", "create-bucket", "--bucket", cls.bucket)
        cls.src = local("api.bin")
        cls.md5 = mgtest.write_file(cls.src, 1024)
        with open(cls.src, "rb") as f:
            cls.data = f.read()

    @classmethod
    def tearDownClass(cls):
        aws("s3", "rb", "--force", "s3://" + cls.bucket, check=False)

    def put(self, key, body=None):
        return aws_json("s3api", "put-object", "--bucket", self.bucket, "--key", key,
                        "--body", body or self.src)

    def test_put_object_etag(self):
        r = self.put("put/obj")
        self.assertEqual(r["ETag"], '"%s"' % self.md5)

    def test_get_object_range(self):
        self.put("range/obj")
        out = local("range.out")
        r = aws_json("s3api", "get-object", "--bucket", self.bucket, "--key", "range/obj",
                     "--range", "bytes=100-199", out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), self.data[100:200])
        self.assertEqual(r["ContentRange"], "bytes 100-199/1024")
        self.assertEqual(r["ContentLength"], 100)

    def test_head_object(self):
        self.put("head/obj")
        r = aws_json("s3api", "head-object", "--bucket", self.bucket, "--key", "head/obj")
        self.assertEqual(r["ContentLength"], 1024)
        self.assertEqual(r["ETag"], '"%s"' % self.md5)
        self.assertIn("LastModified", r)

    def test_list_objects_v2_delimiter_and_pagination(self):
        keys = ["lst/%s/%d" % (d, i) for d in ("a", "b") for i in range(3)] + \
               ["lst/top%d" % i for i in range(5)]
        seed(self.bucket, keys)
        r = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket,
                     "--prefix", "lst/", "--delimiter", "/")
        self.assertEqual([c["Prefix"] for c in r["CommonPrefixes"]], ["lst/a/", "lst/b/"])
        self.assertEqual([o["Key"] for o in r["Contents"]], ["lst/top%d" % i for i in range(5)])
        # --page-size 2: the CLI follows continuation tokens to the end.
        r = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket,
                     "--prefix", "lst/", "--page-size", "2")
        self.assertEqual([o["Key"] for o in r["Contents"]], sorted(keys))
        # --max-items 4 with --page-size 3: a NextToken, then the rest.
        first = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket, "--prefix", "lst/",
                         "--max-items", "4", "--page-size", "3")
        self.assertEqual([o["Key"] for o in first["Contents"]], sorted(keys)[:4])
        self.assertIn("NextToken", first)
        rest = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket, "--prefix", "lst/",
                        "--page-size", "3", "--starting-token", first["NextToken"])
        self.assertEqual([o["Key"] for o in rest["Contents"]], sorted(keys)[4:])

    def test_delete_objects(self):
        keys = ["delobj/%d" % i for i in range(5)]
        seed(self.bucket, keys)
        spec = json.dumps({"Objects": [{"Key": k} for k in keys[:3]] + [{"Key": "delobj/none"}]})
        r = aws_json("s3api", "delete-objects", "--bucket", self.bucket, "--delete", spec)
        self.assertEqual(sorted(d["Key"] for d in r["Deleted"]), sorted(keys[:3] + ["delobj/none"]))
        self.assertNotIn("Errors", r)
        left = aws_json("s3api", "list-objects-v2", "--bucket", self.bucket, "--prefix", "delobj/")
        self.assertEqual([o["Key"] for o in left["Contents"]], keys[3:])

    def test_copy_object(self):
        self.put("copy/src")
        r = aws_json("s3api", "copy-object", "--bucket", self.bucket, "--key", "copy/dst",
                     "--copy-source", "%s/copy/src" % self.bucket)
        self.assertEqual(r["CopyObjectResult"]["ETag"], '"%s"' % self.md5)
        out = local("copy.out")
        aws_json("s3api", "get-object", "--bucket", self.bucket, "--key", "copy/dst", out)
        self.assertEqual(file_md5(out), self.md5)

    def test_put_object_tagging(self):
        self.put("tag/obj")
        aws("s3api", "put-object-tagging", "--bucket", self.bucket, "--key", "tag/obj",
            "--tagging", "TagSet=[{Key=project,Value=metagate},{Key=tier,Value=hot}]")
        r = aws_json("s3api", "get-object-tagging", "--bucket", self.bucket, "--key", "tag/obj")
        self.assertEqual(sorted((t["Key"], t["Value"]) for t in r["TagSet"]),
                         [("project", "metagate"), ("tier", "hot")])


if __name__ == "__main__":
    mgtest.main()
