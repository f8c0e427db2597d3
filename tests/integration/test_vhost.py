# SPDX-License-Identifier: Apache-2.0
# mg: server=domain python=system
"""Virtual-host style addressing with "domain": "s3.local" configured: the
bucket is named by Host: BUCKET.s3.local:PORT and removed from the path
(S3 "Virtual hosting of buckets"). Names under s3.local are resolved to
127.0.0.1 inside this process (as a wildcard DNS record would) and with
curl --resolve. Path style must keep working on the same server."""

import os
import socket

import mgtest
import s3raw
from mgtest import S3TestCase, client, payload, run

_real_getaddrinfo = socket.getaddrinfo


def _local_getaddrinfo(host, *args, **kw):
    if isinstance(host, str) and (host == mgtest.DOMAIN or host.endswith("." + str(mgtest.DOMAIN))):
        host = "127.0.0.1"
    return _real_getaddrinfo(host, *args, **kw)


socket.getaddrinfo = _local_getaddrinfo
PORT = os.environ.get("MG_PORT")
VHOST_ENDPOINT = "http://%s:%s" % (mgtest.DOMAIN, PORT)


class VirtualHost(S3TestCase):
    def setUp(self):
        self.s3 = client(endpoint=VHOST_ENDPOINT, addressing="virtual")
        self.hosts = []
        self.s3.meta.events.register(
            "before-send.s3", lambda request, **kw: self.hosts.append(request.url))
        self.bucket = mgtest.bucket_name("vh")
        self.s3.create_bucket(Bucket=self.bucket)
        self.cleanup_bucket(client(), self.bucket)

    def test_requests_use_bucket_host(self):
        self.s3.put_object(Bucket=self.bucket, Key="k", Body=b"v")
        want = "http://%s.%s:%s/" % (self.bucket, mgtest.DOMAIN, PORT)
        self.assertTrue(self.hosts and all(u.startswith(want) for u in self.hosts), self.hosts)

    def test_put_get_list_delete(self):
        data = payload(1024, 3)
        self.s3.put_object(Bucket=self.bucket, Key="dir/vhost.txt", Body=data)
        self.s3.put_object(Bucket=self.bucket, Key="dir/sub/x", Body=b"x")
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="dir/vhost.txt")["Body"].read(),
                         data)
        r = self.s3.list_objects_v2(Bucket=self.bucket, Prefix="dir/", Delimiter="/")
        self.assertEqual([o["Key"] for o in r["Contents"]], ["dir/vhost.txt"])
        self.assertEqual([c["Prefix"] for c in r["CommonPrefixes"]], ["dir/sub/"])
        # The same objects through path style on the same server.
        path = client()
        self.assertEqual(path.get_object(Bucket=self.bucket, Key="dir/vhost.txt")["Body"].read(),
                         data)
        self.s3.delete_object(Bucket=self.bucket, Key="dir/sub/x")
        self.assertEqual([o["Key"] for o in path.list_objects_v2(Bucket=self.bucket)["Contents"]],
                         ["dir/vhost.txt"])

    def test_presigned_with_curl_resolve(self):
        self.s3.put_object(Bucket=self.bucket, Key="p.txt", Body=b"virtual presigned")
        for signer in (self.s3, client(endpoint=VHOST_ENDPOINT, addressing="virtual",
                                       signature="s3v4")):
            url = signer.generate_presigned_url(
                "get_object", Params={"Bucket": self.bucket, "Key": "p.txt"}, ExpiresIn=60)
            host = "%s.%s" % (self.bucket, mgtest.DOMAIN)
            self.assertIn(host, url)
            out = os.path.join(mgtest.TMP, "vh.out")
            p = run(["curl", "-sS", "--resolve", "%s:%s:127.0.0.1" % (host, PORT), "-o", out,
                     "-w", "%{http_code}", url], check=False)
            with open(out, "rb") as f:
                self.assertEqual((p.stdout, f.read()), ("200", b"virtual presigned"), url)

    def test_raw_host_header(self):
        client().put_object(Bucket=self.bucket, Key="raw", Body=b"raw vhost")
        raw = s3raw.Client()
        r = raw.request("GET", "/raw", host="%s.%s:%s" % (self.bucket, mgtest.DOMAIN, PORT))
        self.assertEqual((r.status, r.body), (200, b"raw vhost"), repr(r))

    def test_list_buckets_on_domain_root(self):
        s3 = client(endpoint=VHOST_ENDPOINT, addressing="virtual")
        names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
        self.assertIn(self.bucket, names)


if __name__ == "__main__":
    mgtest.main()
