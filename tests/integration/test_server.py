# SPDX-License-Identifier: Apache-2.0
# mg: server=none python=system
"""The process interface of issue 2 that scripts rely on: the config is
checked at start (an unknown key or a bad value stops it with a message
naming the key), a config without users gets a generated key pair stored
in the data directory, printed, and reused on restart; GET /health and
GET /metrics (Prometheus text with per-operation requests and latency
histograms)."""

import json
import os
import re
import subprocess
import urllib.request

import mgserver
import mgtest
import s3raw
from mgtest import S3TestCase

BIN = os.environ.get("MG_BIN", "")


class Config(S3TestCase):
    def workdir(self):
        d = os.path.join(mgtest.TMP, self._testMethodName)
        os.makedirs(d, exist_ok=True)
        return d

    def start_with(self, cfg):
        """Runs `metagate serve` on cfg; it must exit non-zero within 20 s.
        Returns its output."""
        d = self.workdir()
        path = os.path.join(d, "bad.json")
        base = {"listen": "127.0.0.1:%d" % mgserver.free_port(),
                "data_dir": os.path.join(d, "data"), "region": "us-east-1",
                "users": [mgserver.make_user("main")]}
        base.update(cfg)
        with open(path, "w") as f:
            json.dump(base, f)
        try:
            p = subprocess.run([BIN, "serve", "--config", path], capture_output=True,
                               timeout=20, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.fail("metagate accepted %s and kept running" % cfg)
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        self.assertNotEqual(p.returncode, 0, out)
        return out

    def test_unknown_key_rejected_by_name(self):
        out = self.start_with({"bogus_setting": 1})
        self.assertIn("bogus_setting", out)

    def test_bad_region_type_rejected_by_name(self):
        out = self.start_with({"region": 42})
        self.assertIn("region", out)

    def test_bad_listen_rejected_by_name(self):
        out = self.start_with({"listen": "no-port-here"})
        self.assertIn("listen", out)

    def test_bad_user_entry_rejected_by_name(self):
        out = self.start_with({"users": [{"name": "x", "access_key": "AKIDONLY"}]})
        self.assertIn("secret_key", out)

    def test_generated_credentials_printed_stored_reused(self):
        d = self.workdir()
        srv = mgserver.Server(BIN, d, users=[])
        srv.start()
        self.addCleanup(srv.stop)
        cred_file = os.path.join(srv.data_dir, "credentials.json")
        self.assertTrue(os.path.exists(cred_file), os.listdir(srv.data_dir))
        self.assertEqual(os.stat(cred_file).st_mode & 0o077, 0, "credentials readable by others")
        with open(cred_file) as f:
            text = f.read()
        ak = re.search(r'"access_key"\s*:\s*"([^"]+)"', text).group(1)
        sk = re.search(r'"secret_key"\s*:\s*"([^"]+)"', text).group(1)
        self.assertIn(ak, srv.log_tail(200), "generated access key not printed at start")
        raw = s3raw.Client(srv.endpoint, ak, sk)
        self.assertEqual(raw.request("GET", "/").status, 200)
        srv.restart()
        with open(cred_file) as f:
            self.assertEqual(f.read(), text, "credentials changed across a restart")
        self.assertEqual(raw.request("GET", "/").status, 200)


class Endpoints(S3TestCase):
    def test_health_and_metrics(self):
        d = os.path.join(mgtest.TMP, "metrics")
        os.makedirs(d)
        srv = mgserver.Server(BIN, d).start()
        self.addCleanup(srv.stop)
        with urllib.request.urlopen(srv.endpoint + "/health", timeout=5) as r:
            self.assertEqual(r.status, 200)
        u = srv.users[0]
        raw = s3raw.Client(srv.endpoint, u["access_key"], u["secret_key"])
        b = mgtest.bucket_name("met")
        self.assertEqual(raw.request("PUT", "/" + b).status, 200)
        self.assertEqual(raw.request("PUT", s3raw.key_path(b, "k"), body=b"x" * 5000).status, 200)
        self.assertEqual(raw.request("GET", s3raw.key_path(b, "k")).status, 200)
        self.assertEqual(raw.request("GET", s3raw.key_path(b, "missing")).status, 404)
        with urllib.request.urlopen(srv.endpoint + "/metrics", timeout=5) as r:
            self.assertEqual(r.status, 200)
            ctype = r.headers.get("Content-Type", "")
            text = r.read().decode()
        self.assertTrue(ctype.startswith("text/plain"), ctype)
        self.assertIn("# TYPE", text)
        self.assertRegex(text, r'_bucket\{[^}]*le="', "no latency histogram")
        for op in ("PutObject", "GetObject", "CreateBucket"):
            self.assertIn(op, text, "no per-operation series for " + op)
        # Prometheus text format: every sample line is NAME{labels} VALUE.
        for line in text.splitlines():
            if line and not line.startswith("#"):
                self.assertRegex(line, r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? [-+0-9.eEInfa]+$', line)


if __name__ == "__main__":
    mgtest.main()
