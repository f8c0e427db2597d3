#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Regenerates the seed corpora corpus/<name>/ of the request-signing fuzz targets from
# fixtures/clients (captured client requests) plus a few hand-written edge cases.
# Usage: tests/fuzz/mkcorpus.py [FIXTURES_DIR]   (default ../shared/fixtures/clients)
# The committed corpora also hold inputs the fuzzers found (40-char sha1 names), added with
#   fuzz_<name> -merge=1 NEW_DIR tests/fuzz/corpus/<name> RUN_CORPUS; cp -n NEW_DIR/* ...
import hashlib, hmac, os, sys

here = os.path.dirname(os.path.abspath(__file__))
fix = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', '..', '..', 'shared', 'fixtures', 'clients')
SECRET = b'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'
MARK = b'\n#### CAPTURE TRUNCATED:'


def put(name, data):
    d = os.path.join(here, 'corpus', name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), 'wb') as f:
        f.write(data)


def unchunk(b):
    out, i = b'', 0
    while True:
        j = b.index(b'\r\n', i)
        n = int(b[i:j].split(b';')[0], 16)
        i = j + 2
        if n == 0:
            return out
        out += b[i:i + n]
        i += n + 2


def parse(path):
    raw = open(path, 'rb').read()
    head, body = raw.split(b'\r\n\r\n', 1)
    lines = head.split(b'\r\n')
    method, target, _ = lines[0].split(b' ')
    hdrs = [tuple(l.split(b':', 1)) for l in lines[1:]]
    hdrs = [(k, v.lstrip()) for k, v in hdrs]
    p, _, q = target.partition(b'?')
    trunc = MARK in body[4096:4096 + len(MARK)]
    h = {k.lower(): v for k, v in hdrs}
    if not trunc and h.get(b'transfer-encoding', b'').lower() == b'chunked':
        body = unchunk(body)
    return method, p, q, hdrs, h, body, trunc


def layout(auth, p, q, hdrs):
    return b'\n'.join([auth, p, q] + [k + b':' + v for k, v in hdrs])


seen_shape = set()
for client in sorted(os.listdir(fix)):
    d = os.path.join(fix, client)
    if not os.path.isdir(d):
        continue
    for fn in sorted(os.listdir(d)):
        method, p, q, hdrs, h, body, trunc = parse(os.path.join(d, fn))
        auth = h.get(b'authorization', b'')
        shape = (client, auth.split(b'Signature')[0], q.split(b'=')[0])
        if auth.startswith(b'AWS4-HMAC-SHA256') and shape not in seen_shape:
            seen_shape.add(shape)
            put('sigv4_header', layout(auth, p, q, hdrs))
        if b'X-Amz-Algorithm' in q:
            put('sigv4_query', layout(b'', p, q, hdrs))
        if b'AWSAccessKeyId' in q:
            put('sigv2', layout(b'', p, q, hdrs))
        put('uri', p)
        if q:
            put('uri', q)
        mode = h.get(b'x-amz-content-sha256', b'')
        if not trunc and mode.startswith(b'STREAMING-'):
            m = 0 if mode == b'STREAMING-AWS4-HMAC-SHA256-PAYLOAD' else 2
            for step in (0, 7, 64):
                put('chunked', bytes([m, step]) + body)


# hand-written edge cases (the empty input first: it once hit qsort(NULL, 0))
for n in ('sigv4_header', 'sigv4_query', 'sigv2', 'chunked', 'uri'):
    put(n, b'')
for s in [b'AWS4-HMAC-SHA256 Credential=AK/20261130/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=' + b'0' * 64 + b'\n/\n\nhost:h',
          b'AWS4-HMAC-SHA256 Credential=/20261130//s3/aws4_request, SignedHeaders=;, Signature=\n%\n&&=&a=%zz\nHost: a  b   c \nhost:d',
          b'AWS4-HMAC-SHA256 \n/a%2Fb/%7e\nb=2&a=1&a=0&c\nHOST:x\nx-amz-date:20261130T160000Z']:
    put('sigv4_header', s)
for s in [b'\n/k\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20261130%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261130T160000Z&X-Amz-Expires=604800&X-Amz-SignedHeaders=host&X-Amz-Signature=' + b'a' * 64 + b'\nhost:h',
          b'\n/k\nX-Amz-Expires=604801&X-Amz-Expires=1\nhost:h',
          b'\n/\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%zz\nhost:h']:
    put('sigv4_query', s)
for s in [b'AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=\n/photos/puppy.jpg\n\nHost:johnsmith.s3.amazonaws.com\nDate:Tue, 27 Mar 2007 19:36:42 +0000',
          b'AWS a:b\n/b/k\nuploadId=1&partNumber=2&acl&versionId=&response-content-type=a%2Fb&x=y\nContent-MD5:x\nContent-Type:t\nx-amz-date:Tue, 27 Mar 2007 19:36:42 GMT\nX-Amz-Meta-A: 1 \nx-amz-meta-a:2',
          b'AWS :\n\nAWSAccessKeyId=&Signature=&Expires=99999999999999']:
    put('sigv2', s)
for s in [b'', b'%', b'%2', b'%zz', b'%2F%2f/+ ~', b'\xc3\xa9%C3%A9', b'Zm9vYmFy', b'Zg==', b'20261130T160000Z',
          b'Mon, 30 Nov 2026 16:00:00 GMT', b'Feb, 30 Feb 2026 25:00:00 +0000']:
    put('uri', s)


# chunked: hand-built signed and signed-trailer bodies, and framing edge cases
def sig(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()


k = b'AWS4' + SECRET
for part in ('20261130', 'us-east-1', 's3', 'aws4_request'):
    k = hmac.new(k, part.encode(), hashlib.sha256).digest()
seed = '72bb640645404096dd85a4374a98c9df8a6cb1eae11df599f188d52b652530d8'
scope = '20261130/us-east-1/s3/aws4_request'
empty = hashlib.sha256(b'').hexdigest()


def signed_body(chunks, trailer):
    prev, out = seed, b''
    for c in chunks + [b'']:
        s = sig(k, '\n'.join(['AWS4-HMAC-SHA256-PAYLOAD', '20261130T161350Z', scope, prev, empty,
                              hashlib.sha256(c).hexdigest()]))
        out += b'%x;chunk-signature=%s\r\n' % (len(c), s.encode())
        if c:
            out += c + b'\r\n'
        prev = s
    if trailer:
        out += trailer + b'\r\n'
        t = sig(k, '\n'.join(['AWS4-HMAC-SHA256-TRAILER', '20261130T161350Z', scope, prev,
                              hashlib.sha256(trailer + b'\n').hexdigest()]))
        out += b'x-amz-trailer-signature:' + t.encode() + b'\r\n'
    return out + b'\r\n'


put('chunked', bytes([0, 3]) + signed_body([b'hello', b' world'], None))
put('chunked', bytes([1, 5]) + signed_body([b'abc'], b'x-amz-checksum-crc32:NSRBwg=='))
for s in [b'3\r\nabc\r\n0\r\n\r\n', b'3\r\nabc\r\n0\r\nx-amz-checksum-crc64nvme:AAAAAAAAAAA=\r\n\r\n',
          b'ffffffffffffffff\r\n', b'0\r\n\r\nextra', b'1;ext=1\r\nA\r\n0\r\n\r\n']:
    put('chunked', bytes([2, 1]) + s)
