# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the Python integration suites: the server's address
and keys from the MG_* environment (set by run.py), boto3 clients for either
user, deterministic payloads, an assertion on S3 error codes, and main(),
which runs a unittest module and prints `ok - NAME` / `not ok - NAME` lines
for run.py to count.

Runs under Debian's /usr/bin/python3 (boto3 1.26) and the pyenv python3
(boto3 1.43); nothing here may depend on one of them.
"""

import hashlib
import os
import subprocess
import sys
import time
import traceback
import unittest
import uuid

ENDPOINT = os.environ.get("MG_ENDPOINT", "")
REGION = os.environ.get("MG_REGION", "us-east-1")
ACCESS_KEY = os.environ.get("MG_ACCESS_KEY", "")
SECRET_KEY = os.environ.get("MG_SECRET_KEY", "")
ACCESS_KEY2 = os.environ.get("MG_ACCESS_KEY2", "")
SECRET_KEY2 = os.environ.get("MG_SECRET_KEY2", "")
CA_FILE = os.environ.get("MG_CA_FILE")
DOMAIN = os.environ.get("MG_DOMAIN")
TMP = os.environ.get("MG_TMP", "/tmp")
DATA_DIR = os.environ.get("MG_DATA_DIR", "")
PID = int(os.environ.get("MG_PID", "0") or 0)


def boto3_version():
    import boto3
    return tuple(int(x) for x in boto3.__version__.split(".")[:2])


def client(user=1, endpoint=None, addressing="path", signature=None, **cfg):
    """A boto3 S3 client for user 1 (main) or 2 (other); retries off so an
    error surfaces as the server sent it."""
    import boto3
    from botocore.config import Config
    ak, sk = (ACCESS_KEY, SECRET_KEY) if user == 1 else (ACCESS_KEY2, SECRET_KEY2)
    s3cfg = {"addressing_style": addressing}
    kw = dict(s3=s3cfg, retries={"max_attempts": 1}, connect_timeout=10,
              read_timeout=300)
    if signature:
        kw["signature_version"] = signature
    kw.update(cfg)
    return boto3.client(
        "s3", endpoint_url=endpoint or ENDPOINT, region_name=REGION,
        aws_access_key_id=ak, aws_secret_access_key=sk,
        verify=CA_FILE if CA_FILE else True, config=Config(**kw))


def bucket_name(prefix="it"):
    """A fresh, valid bucket name."""
    return "%s-%s" % (prefix, uuid.uuid4().hex[:16])


def payload(size, seed=0):
    """size deterministic bytes that differ for every seed and every 32-byte
    block, so a misplaced or repeated block changes the content."""
    out = bytearray()
    block = 0
    while len(out) < size:
        out += hashlib.sha256(b"%d:%d" % (seed, block)).digest()
        block += 1
    return bytes(out[:size])


def write_file(path, size, chunk=1 << 20):
    """Writes `size` random bytes in 1 MiB pieces (a large file never sits
    whole in memory); returns its MD5 hex digest."""
    md5 = hashlib.md5()
    with open(path, "wb") as f:
        done = 0
        while done < size:
            data = os.urandom(min(chunk, size - done))
            f.write(data)
            md5.update(data)
            done += len(data)
    return md5.hexdigest()


def md5(data):
    """Hex MD5 of bytes: the ETag of a single-part object, unquoted."""
    return hashlib.md5(data).hexdigest()


def file_md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(cmd, check=True, env=None, input=None, timeout=600):
    """Runs a command; returns CompletedProcess with text stdout/stderr. With
    check, a non-zero exit raises AssertionError quoting the command and its
    output (what a bug report needs)."""
    p = subprocess.run(cmd, env=env, input=input, capture_output=True,
                       timeout=timeout)
    p.stdout = p.stdout.decode("utf-8", "replace")
    p.stderr = p.stderr.decode("utf-8", "replace")
    if check and p.returncode != 0:
        raise AssertionError("command failed (exit %d): %s\nstdout: %s\nstderr: %s"
                             % (p.returncode, " ".join(cmd), p.stdout[-2000:],
                                p.stderr[-2000:]))
    return p


def drop_bucket(s3, bucket):
    """Deletes every object and upload in the bucket, then the bucket;
    errors are ignored (cleanup must not mask the test's own result)."""
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})
        for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])
        s3.delete_bucket(Bucket=bucket)
    except Exception:
        pass


class S3TestCase(unittest.TestCase):
    maxDiff = None

    def assertS3Error(self, code, status, fn, *args, **kwargs):
        """fn(*args) must raise botocore ClientError with this Code and HTTP
        status; returns the error response."""
        from botocore.exceptions import ClientError
        try:
            fn(*args, **kwargs)
        except ClientError as e:
            got_code = e.response.get("Error", {}).get("Code")
            got_status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            self.assertEqual((got_code, got_status), (code, status),
                             "expected %s/%d, got %s/%s: %s"
                             % (code, status, got_code, got_status, e.response))
            return e.response
        self.fail("expected %s/%d, the call succeeded" % (code, status))

    def cleanup_bucket(self, s3, bucket):
        """Registers removal of the bucket and everything in it."""
        self.addCleanup(drop_bucket, s3, bucket)

    @classmethod
    def class_bucket(cls, prefix):
        """Sets cls.s3 (user 1) and cls.bucket, a bucket shared by the
        class's tests and dropped after them."""
        cls.s3 = client()
        cls.bucket = bucket_name(prefix)
        cls.s3.create_bucket(Bucket=cls.bucket)
        cls.addClassCleanup(drop_bucket, cls.s3, cls.bucket)

    def new_bucket(self, s3=None, prefix="it", **kw):
        s3 = s3 or client()
        b = bucket_name(prefix)
        s3.create_bucket(Bucket=b, **kw)
        self.cleanup_bucket(s3, b)
        return b


class _Result(unittest.TestResult):
    """Prints one TAP-like line per test as it ends (and its time when slow)."""

    def startTest(self, test):
        super().startTest(test)
        self._t0 = time.monotonic()

    def stopTest(self, test):
        super().stopTest(test)
        dt = time.monotonic() - getattr(self, "_t0", time.monotonic())
        if dt >= 2:
            print("# %s took %.1f s" % (self._name(test), dt), flush=True)

    def _name(self, test):
        return "%s.%s" % (type(test).__name__, test._testMethodName) \
            if hasattr(test, "_testMethodName") else str(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        print("ok - %s" % self._name(test), flush=True)

    def _bad(self, test, err):
        print("not ok - %s" % self._name(test), flush=True)
        for line in "".join(traceback.format_exception(*err)).rstrip().splitlines():
            print("#   " + line, flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._bad(test, err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        print("ok - %s # SKIP %s" % (self._name(test), reason), flush=True)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        print("ok - %s # expected failure" % self._name(test), flush=True)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        print("not ok - %s # unexpected success" % self._name(test), flush=True)


def main():
    """Runs the calling module's tests (optionally only the names given as
    arguments: Class or Class.test_x) and exits 1 on any failure."""
    mod = sys.modules["__main__"]
    loader = unittest.TestLoader()
    if len(sys.argv) > 1:
        suite = loader.loadTestsFromNames(sys.argv[1:], mod)
    else:
        suite = loader.loadTestsFromModule(mod)
    try:
        import boto3
        print("# python %s, boto3 %s, endpoint %s"
              % (sys.version.split()[0], boto3.__version__, ENDPOINT), flush=True)
    except ImportError:
        print("# python %s (no boto3)" % sys.version.split()[0], flush=True)
    result = _Result()
    suite.run(result)
    bad = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    sys.exit(1 if bad else 0)
