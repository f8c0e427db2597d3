# SPDX-License-Identifier: Apache-2.0
"""A tiny S3 client for requests no SDK will send: SigV4 header signing and
presigning with a chosen clock, wrong keys, hand-made checksum headers,
anonymous requests, arbitrary Host headers. Built on http.client (stdlib),
so the bytes on the wire are exactly what a test asks for.

Canonicalization follows the SigV4 documentation ("Create a canonical
request", S3 flavour: the path is not normalized and not encoded twice);
check_fixture() re-derives the signatures of ../shared/fixtures/clients.
"""

import datetime
import hashlib
import hmac
import http.client
import os
import ssl
import urllib.parse
import xml.etree.ElementTree as ET

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def uri_encode(s, slash=True):
    """RFC 3986 encoding of everything but unreserved characters (and '/'
    when slash, as in a canonical URI)."""
    return urllib.parse.quote(s, safe="/~" if slash else "~")


def key_path(bucket, key=None):
    """/bucket or /bucket/key, encoded as on the wire and in the canonical URI."""
    if key is None:
        return "/" + bucket
    return "/%s/%s" % (bucket, uri_encode(key))


def _hmac(key, msg):
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


def signing_key(secret, date, region, service="s3"):
    k = _hmac(("AWS4" + secret).encode("utf-8"), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def canonical_query(query):
    """query: list of (name, value) pairs, values already decoded."""
    pairs = sorted((uri_encode(k, False), uri_encode(v, False)) for k, v in query)
    return "&".join("%s=%s" % kv for kv in pairs)


def canonical_request(method, path, query, headers, signed, payload_hash):
    lower = {}
    for k, v in headers.items():
        lower[k.lower()] = " ".join(str(v).strip().split())
    ch = "".join("%s:%s\n" % (h, lower[h]) for h in signed)
    return "\n".join([method, path, canonical_query(query), ch,
                      ";".join(signed), payload_hash])


def sign_v4(method, path, query, headers, payload_hash, access_key, secret,
            region="us-east-1", when=None):
    """Adds x-amz-date, x-amz-content-sha256 and Authorization to headers
    (a dict that already holds Host); returns headers."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    headers["x-amz-date"] = amz_date
    headers["x-amz-content-sha256"] = payload_hash
    signed = sorted(k.lower() for k in headers)
    scope = "%s/%s/s3/aws4_request" % (amz_date[:8], region)
    creq = canonical_request(method, path, query, headers, signed, payload_hash)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode("utf-8")).hexdigest()])
    sig = hmac.new(signing_key(secret, amz_date[:8], region), sts.encode("utf-8"),
                   hashlib.sha256).hexdigest()
    headers["Authorization"] = (
        "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
        % (access_key, scope, ";".join(signed), sig))
    return headers


def presign_v4(method, host, path, access_key, secret, expires=3600,
               region="us-east-1", when=None, query=None):
    """Returns the path?query of a presigned SigV4 URL (UNSIGNED-PAYLOAD)."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    scope = "%s/%s/s3/aws4_request" % (amz_date[:8], region)
    q = list(query or []) + [
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
        ("X-Amz-Credential", "%s/%s" % (access_key, scope)),
        ("X-Amz-Date", amz_date),
        ("X-Amz-Expires", str(expires)),
        ("X-Amz-SignedHeaders", "host"),
    ]
    creq = canonical_request(method, path, q, {"host": host}, ["host"],
                             "UNSIGNED-PAYLOAD")
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode("utf-8")).hexdigest()])
    sig = hmac.new(signing_key(secret, amz_date[:8], region), sts.encode("utf-8"),
                   hashlib.sha256).hexdigest()
    q.append(("X-Amz-Signature", sig))
    return path + "?" + canonical_query(q)


def chunk_signature(secret, region, amz_date, prev_sig, data):
    """The chunk-signature of one aws-chunked chunk (SigV4 "Signature
    calculations for the Authorization header: transferring payload in
    multiple chunks")."""
    scope = "%s/%s/s3/aws4_request" % (amz_date[:8], region)
    sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev_sig, EMPTY_SHA256,
                     hashlib.sha256(data).hexdigest()])
    return hmac.new(signing_key(secret, amz_date[:8], region), sts.encode("utf-8"),
                    hashlib.sha256).hexdigest()


def aws_chunked(data, chunk, sign=None, trailer=None):
    """Encodes data as aws-chunked. sign=(secret, region, amz_date,
    seed_signature) adds chunk signatures; trailer=(name, value) adds a
    trailing header after the final zero-length chunk."""
    out = bytearray()
    prev = sign[3] if sign else None
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    for piece in pieces:
        line = "%x" % len(piece)
        if sign:
            prev = chunk_signature(sign[0], sign[1], sign[2], prev, piece)
            line += ";chunk-signature=" + prev
        out += line.encode() + b"\r\n"
        if piece:
            out += piece + b"\r\n"
    if trailer:
        out += ("%s:%s\r\n" % trailer).encode()
    out += b"\r\n"
    return bytes(out)


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers          # lower-case name -> value
        self.body = body

    @property
    def code(self):
        """The S3 error Code of an XML error body, or None."""
        return error_code(self.body)

    def __repr__(self):
        return "<%d %s %r>" % (self.status, self.code, self.body[:300])


def error_code(body):
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return None
    el = root.find("Code")
    if el is None:
        el = root.find("{*}Code")
    return el.text if el is not None else None


class Client:
    """Raw requests to one endpoint (MG_ENDPOINT by default)."""

    def __init__(self, endpoint=None, access_key=None, secret=None,
                 region=None, ca_file=None):
        endpoint = endpoint or os.environ["MG_ENDPOINT"]
        u = urllib.parse.urlsplit(endpoint)
        self.scheme = u.scheme
        self.hostport = u.netloc
        self.access_key = access_key or os.environ.get("MG_ACCESS_KEY")
        self.secret = secret or os.environ.get("MG_SECRET_KEY")
        self.region = region or os.environ.get("MG_REGION", "us-east-1")
        self.ca_file = ca_file or os.environ.get("MG_CA_FILE")

    def connection(self, timeout=120):
        host, _, port = self.hostport.rpartition(":")
        if self.scheme == "https":
            ctx = ssl.create_default_context(cafile=self.ca_file)
            return http.client.HTTPSConnection(host, int(port), timeout=timeout,
                                               context=ctx)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def request(self, method, path, query=None, headers=None, body=b"",
                sign=True, when=None, payload_hash=None, host=None,
                access_key=None, secret=None, raw_target=None):
        """Sends one request. query: list of (name, value); body: bytes;
        sign: SigV4 with this client's keys (or access_key/secret);
        payload_hash: x-amz-content-sha256 (default: the body's SHA-256);
        host: Host header (default: the endpoint's); raw_target: send this
        request-target instead of path?query (signature still over path/query).
        Returns a Response."""
        query = list(query or [])
        h = {"Host": host or self.hostport}
        h.update(headers or {})
        if sign:
            ph = payload_hash or hashlib.sha256(body).hexdigest()
            sign_v4(method, path, query, h, ph, access_key or self.access_key,
                    secret or self.secret, self.region, when)
        target = raw_target or path
        if query and not raw_target:
            target += "?" + "&".join(
                "%s=%s" % (uri_encode(k, False), uri_encode(v, False)) if v != ""
                else uri_encode(k, False) for k, v in query)
        conn = self.connection()
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for k, v in h.items():
                conn.putheader(k, v)
            if body or method in ("PUT", "POST"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders()
            if body:
                conn.send(body)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()


def put_streaming(client, path, data, mode, chunk=65536, corrupt_at=None, trailer=None):
    """PUT data as aws-chunked in one of two payload modes:
    STREAMING-AWS4-HMAC-SHA256-PAYLOAD (signed chunks) or
    STREAMING-UNSIGNED-PAYLOAD-TRAILER (trailer=(name, value) required).
    corrupt_at flips one decoded data byte after signing. Returns a Response."""
    h = {"Host": client.hostport, "Content-Encoding": "aws-chunked",
         "x-amz-decoded-content-length": str(len(data))}
    if trailer:
        h["x-amz-trailer"] = trailer[0]
    # The framing's length does not depend on the signature values.
    probe = aws_chunked(data, chunk, ("x", client.region, "20000101T000000Z", "0" * 64)
                        if mode.startswith("STREAMING-AWS4") else None, trailer)
    h["Content-Length"] = str(len(probe))
    sign_v4("PUT", path, [], h, mode, client.access_key, client.secret, client.region)
    seed = h["Authorization"].rsplit("Signature=", 1)[1]
    signing = (client.secret, client.region, h["x-amz-date"], seed) \
        if mode.startswith("STREAMING-AWS4") else None
    body = aws_chunked(data, chunk, signing, trailer)
    if corrupt_at is not None:
        flipped = bytearray(data)
        flipped[corrupt_at] ^= 0x01
        body = _swap_payload(body, data, bytes(flipped))
    conn = client.connection()
    try:
        conn.putrequest("PUT", path, skip_host=True, skip_accept_encoding=True)
        for k, v in h.items():
            conn.putheader(k, v)
        conn.endheaders()
        conn.send(body)
        r = conn.getresponse()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def _swap_payload(encoded, old, new):
    """encoded with the bytes of old replaced by new (same length), leaving
    the framing and signatures as they were."""
    assert len(old) == len(new)
    out = bytearray(encoded)
    pos = 0
    i = 0
    while i < len(old):
        eol = out.index(b"\r\n", pos)
        size = int(out[pos:eol].split(b";")[0], 16)
        start = eol + 2
        out[start:start + size] = new[i:i + size]
        i += size
        pos = start + size + 2
    return bytes(out)


def check_fixture(path, secret="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"):
    """Re-derives the header signature of a captured request (a self-check
    of this signer against ../shared/fixtures/clients); returns True when
    it matches."""
    with open(path, "rb") as f:
        raw = f.read()
    head = raw.split(b"\r\n\r\n", 1)[0].decode("utf-8")
    lines = head.split("\r\n")
    method, target, _ = lines[0].split(" ")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip()] = v.strip()
    hl = {k.lower(): v for k, v in headers.items()}
    auth = hl["authorization"]
    parts = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    signed = parts["SignedHeaders"].split(";")
    path, _, qs = target.partition("?")
    query = [(urllib.parse.unquote(k), urllib.parse.unquote(v))
             for k, _, v in (p.partition("=") for p in qs.split("&") if p)]
    creq = canonical_request(method, path, query, hl, signed,
                             hl["x-amz-content-sha256"])
    amz_date = hl["x-amz-date"]
    scope = parts["Credential"].split("/", 1)[1]
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode("utf-8")).hexdigest()])
    region = scope.split("/")[1]
    sig = hmac.new(signing_key(secret, amz_date[:8], region), sts.encode("utf-8"),
                   hashlib.sha256).hexdigest()
    return sig == parts["Signature"]
