/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every captured client request of fixtures/clients (issue 2 done-when 3,
 * issue 3 done-when 4): each file's signature verifies (SigV4 header,
 * presigned SigV4, presigned SigV2) at a fixed "now" next to its capture
 * time; its payload (literal SHA-256, aws-chunked signed chunks, unsigned
 * trailer checksum, Content-MD5, x-amz-checksum-*) checks against the body
 * where the body is complete, or against the 20 MiB object regenerated from
 * the README's description where the capture truncated a literal body; the
 * signer functions reproduce each recorded signature from the recorded date;
 * and changing any signed byte (header value, path, query, X-Amz-Expires,
 * chunk data) makes verification fail with MG_ESIGNATURE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/mem.h"
#include "tests/lib/httpfix.h"
#include "tests/unit/common/test_common.h"

#define NFIXTURES 296
#define BIG_SIZE 20971520

struct counts {
    int files, v4_header, v4_query, v2_query, v2_header;
    int payload_literal, payload_literal_regen, streaming_signed, streaming_trailer;
    int streaming_regen;
    int content_md5, amz_checksum, signed_repro;
    long mutations;
};

static struct counts cnt;
static char *big; /* the 20 MiB object, regenerated */

static const char *fixtures_dir(void)
{
    const char *d = getenv("MG_FIXTURES_DIR");
    return d != NULL ? d : MG_FIXTURES_DIR_DEFAULT;
}

static void big_object(void)
{
    if (big != NULL)
        return;
    /* 79 bytes a line including the newline (the README's "79-byte lines plus newline"
     * counts one too many: see any capture) */
    big = malloc(BIG_SIZE + 80);
    for (size_t i = 0; i * 79 < BIG_SIZE; i++)
        snprintf(big + i * 79, 80,
                 "big-object line %08zu abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\n",
                 i);
}

static struct mg_str hdr(const struct httpfix *f, const char *name)
{
    return httpfix_header(f, name);
}

static int str_is(struct mg_str s, const char *c)
{
    return s.base != NULL && s.len == strlen(c) && memcmp(s.base, c, s.len) == 0;
}

static int64_t iso_time(struct mg_str d)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    char buf[17];
    assert_int_equal(d.len, 16);
    memcpy(buf, d.base, 16);
    buf[16] = '\0';
    assert_non_null(strptime(buf, "%Y%m%dT%H%M%SZ", &tm));
    return (int64_t)timegm(&tm);
}

/* Query parameter value (raw) by name, or {NULL,0}. */
static struct mg_str query_param(struct mg_str q, const char *name)
{
    size_t n = strlen(name), i = 0;
    while (i < q.len) {
        size_t j = i;
        while (j < q.len && q.base[j] != '&')
            j++;
        if (j - i > n && memcmp(q.base + i, name, n) == 0 && q.base[i + n] == '=')
            return (struct mg_str){q.base + i + n + 1, j - i - n - 1};
        i = j + 1;
    }
    return (struct mg_str){NULL, 0};
}

/* ------------------------------------------------------------- payloads */

static void check_digest_b64(enum mg_cksum_algo a, const void *data, size_t len, struct mg_str want,
                             const char *file)
{
    struct mg_cksum c;
    uint8_t d[32];
    char b64[64];
    mg_cksum_init(&c, a);
    mg_cksum_update(&c, data, len);
    size_t n = mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    mg_base64_encode(d, n, b64);
    if (want.len != strlen(b64) || memcmp(want.base, b64, want.len) != 0)
        fail_msg("%s: %s is %s, header says %.*s", file, mg_cksum_algo_name(a), b64, (int)want.len,
                 want.base);
}

/* Content-MD5 and x-amz-checksum-<algo> headers against the (decoded) body. */
static void check_integrity_headers(const struct httpfix *f, const void *data, size_t len,
                                    const char *file)
{
    struct mg_str md5 = hdr(f, "content-md5");
    if (md5.base != NULL) {
        check_digest_b64(MG_CKSUM_MD5, data, len, md5, file);
        cnt.content_md5++;
    }
    if (str_is(f->method, "POST"))
        return; /* CompleteMultipartUpload's x-amz-checksum-* is over the parts' checksums */
    for (size_t i = 0; i < f->nheaders; i++) {
        struct mg_str n = f->headers[i].name;
        if (n.len <= 15 || strncasecmp(n.base, "x-amz-checksum-", 15) != 0)
            continue;
        enum mg_cksum_algo a = mg_cksum_algo_parse(n);
        if (a == MG_CKSUM_NONE)
            continue; /* x-amz-checksum-algorithm, x-amz-checksum-mode */
        check_digest_b64(a, data, len, f->headers[i].value, file);
        cnt.amz_checksum++;
    }
}

static void check_sha256_hex(const void *data, size_t len, struct mg_str want, const char *file)
{
    uint8_t d[32];
    char hex[65];
    mg_sha256(data, len, d);
    mg_hex_encode(d, 32, hex);
    if (want.len != 64 || memcmp(want.base, hex, 64) != 0)
        fail_msg("%s: body sha256 %s != x-amz-content-sha256", file, hex);
}

/* A truncated literal body: locate it in the regenerated 20 MiB object from the first
 * "big-object line NNNNNNNN" it shows, check head and tail, then hash it whole. */
static void check_truncated_literal(const struct httpfix *f, struct mg_str sha, const char *file)
{
    if (f->http_chunked)
        return;
    const char *p = memmem(f->head.base, f->head.len, "big-object line ", 16);
    if (p == NULL)
        return;
    big_object();
    size_t k = (size_t)(p - f->head.base);
    size_t line = strtoul(p + 16, NULL, 10);
    assert_true(line * 79 >= k);
    size_t off = line * 79 - k;
    assert_true(off + f->wire_len <= BIG_SIZE);
    const char *data = big + off;
    if (memcmp(data, f->head.base, 4096) != 0 ||
        memcmp(data + f->wire_len - 1024, f->tail.base, 1024) != 0)
        fail_msg("%s: regenerated body does not match the capture", file);
    if (sha.len == 64)
        check_sha256_hex(data, f->wire_len, sha, file);
    check_integrity_headers(f, data, f->wire_len, file);
    cnt.payload_literal_regen++;
}

struct collect {
    struct mg_buf data;
};

static int on_collect(void *ctx, const void *p, size_t n)
{
    struct collect *c = ctx;
    mg_buf_append(&c->data, p, n);
    return 0;
}

static int run_chunked(const struct mg_sigv4_auth *a, const uint8_t key[32],
                       enum mg_chunked_mode mode, const char *body, size_t len, struct collect *col,
                       struct mg_chunked *c)
{
    assert_int_equal(mg_chunked_setup(c, mode, a, key, on_collect, col), 0);
    int rv = mg_chunked_feed(c, body, len);
    if (rv == 0)
        rv = mg_chunked_finish(c);
    mg_chunked_close(c);
    return rv;
}

/* Run mg_chunked over a complete aws-chunked body; check decoded length, trailer checksum
 * and integrity headers; then flip bytes of a signed body (every byte of a small one, 64
 * spread over a large one): never accepted, and a flipped data byte is MG_ESIGNATURE. */
static void check_streaming(const struct httpfix *f, char *body, size_t len,
                            const struct mg_sigv4_auth *a, const uint8_t key[32],
                            enum mg_chunked_mode mode, const char *file)
{
    struct mg_chunked c;
    struct collect col;
    mg_buf_init(&col.data);
    int rv = run_chunked(a, key, mode, body, len, &col, &c);
    if (rv != 0)
        fail_msg("%s: aws-chunked body: %s", file, mg_err_name(rv));
    struct mg_str dl = hdr(f, "x-amz-decoded-content-length");
    assert_non_null(dl.base);
    assert_int_equal(c.decoded_total, strtoull(dl.base, NULL, 10));
    if (mode != MG_CHUNKED_SIGNED) {
        struct mg_str want = hdr(f, "x-amz-trailer");
        assert_true(want.base != NULL && strlen(c.trailer_name) == want.len &&
                    strncasecmp(c.trailer_name, want.base, want.len) == 0);
        enum mg_cksum_algo algo = mg_cksum_algo_parse(test_str(c.trailer_name));
        check_digest_b64(algo, col.data.base, col.data.len, test_str(c.trailer_value), file);
        /* a changed data byte no longer matches the trailer checksum */
        col.data.base[col.data.len / 2] ^= 1;
        struct mg_cksum k;
        uint8_t d[32];
        char b64[64];
        mg_cksum_init(&k, algo);
        mg_cksum_update(&k, col.data.base, col.data.len);
        mg_base64_encode(d, mg_cksum_final(&k, d), b64);
        mg_cksum_close(&k);
        assert_string_not_equal(b64, c.trailer_value);
        col.data.base[col.data.len / 2] ^= 1;
        cnt.streaming_trailer++;
    } else {
        cnt.streaming_signed++;
    }
    check_integrity_headers(f, col.data.base, col.data.len, file);

    if (mode == MG_CHUNKED_SIGNED) {
        size_t step = len <= 65536 ? 1 : len / 64;
        const char *data0 = (const char *)memchr(body, '\n', len) + 1; /* first data byte */
        for (size_t i = 0; i < len; i += step) {
            body[i] ^= 0x20;
            col.data.len = 0;
            rv = run_chunked(a, key, mode, body, len, &col, &c);
            body[i] ^= 0x20;
            if (rv == 0 || (body + i == data0 && rv != MG_ESIGNATURE))
                fail_msg("%s: body byte %zu changed: %s", file, i, mg_err_name(rv));
            cnt.mutations++;
        }
    }
    mg_buf_close(&col.data);
}

/* A truncated aws-chunked capture: rebuild the whole body from the regenerated 20 MiB
 * object (data offset from the first "big-object line" shown), the chunk sizes shown in
 * the head (aws chunk, and HTTP chunk when Transfer-Encoding is chunked), the signature
 * chain from the seed (signed) or the trailer line shown in the tail (unsigned). The
 * rebuilt wire body must equal the capture's length, head and tail; the final chunk
 * signature in the tail chains over all the data. Then decode it as a complete body. */
static void check_truncated_streaming(const struct httpfix *f, const struct mg_sigv4_auth *a,
                                      const uint8_t key[32], enum mg_chunked_mode mode,
                                      const char *file)
{
    const char *h = f->head.base, *h_end = h + f->head.len;
    size_t http_chunk = 0, aws_chunk;
    if (f->http_chunked) {
        http_chunk = strtoul(h, NULL, 16);
        h = (const char *)memchr(h, '\n', (size_t)(h_end - h)) + 1;
    }
    aws_chunk = strtoul(h, NULL, 16);
    const char *data0 = (const char *)memchr(h, '\n', (size_t)(h_end - h)) + 1;
    const char *p = memmem(data0, (size_t)(h_end - data0), "big-object line ", 16);
    assert_non_null(p);
    big_object();
    size_t off = strtoul(p + 16, NULL, 10) * 79 - (size_t)(p - data0);
    size_t dlen = strtoull(hdr(f, "x-amz-decoded-content-length").base, NULL, 10);
    assert_true(off + dlen <= BIG_SIZE && aws_chunk > 0);
    const char *data = big + off;

    struct mg_buf aws, wire;
    mg_buf_init(&aws);
    mg_buf_init(&wire);
    char prev[65], sig[65];
    memcpy(prev, a->signature.base, 64);
    prev[64] = '\0';
    struct mg_str scope_date = a->amz_date;
    char scope[128];
    snprintf(scope, sizeof(scope), "%.*s/%.*s/%.*s/aws4_request", (int)a->date.len, a->date.base,
             (int)a->region.len, a->region.base, (int)a->service.len, a->service.base);
    for (size_t o = 0;; o += aws_chunk) {
        size_t n = dlen - o < aws_chunk ? dlen - o : aws_chunk;
        if (mode == MG_CHUNKED_SIGNED) {
            mg_chunked_chunk_signature(key, scope_date, test_str(scope), test_str(prev), data + o,
                                       n, sig);
            mg_buf_appendf(&aws, "%zx;chunk-signature=%s\r\n", n, sig);
            memcpy(prev, sig, 65);
        } else {
            mg_buf_appendf(&aws, "%zx\r\n", n);
        }
        if (n == 0)
            break;
        mg_buf_append(&aws, data + o, n);
        mg_buf_append(&aws, "\r\n", 2);
    }
    if (mode != MG_CHUNKED_SIGNED) {
        const char *t = memmem(f->tail.base, f->tail.len, "x-amz-checksum-", 15);
        assert_non_null(t);
        const char *e = memmem(t, (size_t)(f->tail.base + f->tail.len - t), "\r\n", 2);
        mg_buf_append(&aws, t, (size_t)(e - t) + 2);
    }
    mg_buf_append(&aws, "\r\n", 2);
    if (http_chunk) {
        for (size_t o = 0; o < aws.len; o += http_chunk) {
            size_t n = aws.len - o < http_chunk ? aws.len - o : http_chunk;
            mg_buf_appendf(&wire, "%zx\r\n", n);
            mg_buf_append(&wire, aws.base + o, n);
            mg_buf_append(&wire, "\r\n", 2);
        }
        mg_buf_append(&wire, "0\r\n\r\n", 5);
    } else {
        mg_buf_append(&wire, aws.base, aws.len);
    }
    if (wire.len != f->wire_len || memcmp(wire.base, f->head.base, 4096) != 0 ||
        memcmp(wire.base + wire.len - 1024, f->tail.base, 1024) != 0)
        fail_msg("%s: rebuilt aws-chunked body does not match the capture", file);
    check_streaming(f, aws.base, aws.len, a, key, mode, file);
    cnt.streaming_regen++;
    mg_buf_close(&aws);
    mg_buf_close(&wire);
}

/* ------------------------------------------------------------ mutations */

static char mutate_byte(char c)
{
    /* never a hex-case twin ('A' vs 'a' inside %XX decode the same) */
    return (char)(c == 'a' || c == 'A' ? 'b' : 'a');
}

typedef int (*verify_fn)(const struct mg_sig_req *req, const void *ctx);

/* Change each byte of s (a copy, wired into req by the caller) and expect verify to fail
 * with MG_ESIGNATURE (or, if the auth parameters themselves broke, with another error). */
static void mutate_each(char *s, size_t len, const struct mg_sig_req *req, verify_fn verify,
                        const void *ctx, const char *file, const char *what)
{
    for (size_t i = 0; i < len; i++) {
        char saved = s[i];
        s[i] = mutate_byte(saved);
        int rv = verify(req, ctx);
        s[i] = saved;
        if (rv != MG_ESIGNATURE)
            fail_msg("%s: %s byte %zu changed: %s", file, what, i, mg_err_name(rv));
        cnt.mutations++;
    }
}

struct v4ctx {
    const struct httpfix *f;
    struct mg_str payload;
    const struct mg_sigv4_auth *auth; /* header form */
};

static int verify_v4_header(const struct mg_sig_req *req, const void *vctx)
{
    const struct v4ctx *c = vctx;
    uint8_t key[32];
    return mg_sigv4_verify(req, c->auth, test_str(TEST_SECRET), c->payload, key);
}

/* Presigned: re-parse the (mutated) query each time. Bytes of the auth parameters may
 * make the query unparseable: the caller skips those. */
static int verify_v4_query(const struct mg_sig_req *req, const void *vctx)
{
    struct mg_arena arena;
    struct mg_sigv4_auth a;
    uint8_t key[32];
    mg_arena_init(&arena);
    int rv = mg_sigv4_parse_query(req->query, &arena, &a);
    if (rv == 0) {
        struct mg_str p = a.content_sha256.len ? a.content_sha256 : test_str("UNSIGNED-PAYLOAD");
        rv = mg_sigv4_verify(req, &a, test_str(TEST_SECRET), p, key);
    }
    mg_arena_close(&arena);
    return rv;
}

static int verify_v2_query(const struct mg_sig_req *req, const void *vctx)
{
    struct mg_arena arena;
    struct mg_sigv2_auth a;
    mg_arena_init(&arena);
    int rv = mg_sigv2_parse_query(req->query, &arena, &a);
    if (rv == 0)
        rv = mg_sigv2_verify(req, &a, test_str(TEST_SECRET));
    mg_arena_close(&arena);
    return rv;
}

/* Mutable copies of path, query and header values wired into a request. */
struct mreq {
    struct mg_sig_req req;
    struct mg_http_hdr hdrs[HTTPFIX_MAX_HEADERS];
    char *path, *query, *vals[HTTPFIX_MAX_HEADERS];
};

static void mreq_init(struct mreq *m, const struct httpfix *f, struct mg_str v2_bucket)
{
    m->req = httpfix_sig_req(f);
    m->req.v2_bucket = v2_bucket;
    m->path = mg_strndup(f->path.base, f->path.len);
    m->query = mg_strndup(f->query.base, f->query.len);
    m->req.path.base = m->path;
    m->req.query.base = m->query;
    for (size_t i = 0; i < f->nheaders; i++) {
        m->hdrs[i] = f->headers[i];
        m->vals[i] = mg_strndup(f->headers[i].value.base, f->headers[i].value.len);
        m->hdrs[i].value.base = m->vals[i];
    }
    m->req.headers = m->hdrs;
}

/* Append an unsigned "x-amz-meta-injected" header, as a replayer could. */
static void add_unsigned_amz(struct mreq *m, size_t n)
{
    assert_true(n < HTTPFIX_MAX_HEADERS);
    m->hdrs[n].name = test_str("x-amz-meta-injected");
    m->hdrs[n].value = test_str("public-read");
    m->vals[n] = NULL;
    m->req.nheaders = n + 1;
}

static void mreq_close(struct mreq *m, size_t n)
{
    mg_free(m->path);
    mg_free(m->query);
    for (size_t i = 0; i < n; i++)
        mg_free(m->vals[i]);
}

static int header_signed(struct mg_str signed_headers, struct mg_str name)
{
    size_t i = 0;
    while (i < signed_headers.len) {
        size_t j = i;
        while (j < signed_headers.len && signed_headers.base[j] != ';')
            j++;
        if (j - i == name.len && strncasecmp(signed_headers.base + i, name.base, name.len) == 0)
            return 1;
        i = j + 1;
    }
    return 0;
}

/* ------------------------------------------------------------ per form */

static void fixture_v4_header(struct httpfix *f, const char *file)
{
    struct mg_sig_req req = httpfix_sig_req(f);
    struct mg_arena arena;
    struct mg_sigv4_auth a;
    uint8_t key[32];
    mg_arena_init(&arena);
    assert_int_equal(mg_sigv4_parse_request(&req, &arena, &a), 0);
    assert_false(a.presigned);
    struct mg_str payload = hdr(f, "x-amz-content-sha256");
    assert_non_null(payload.base);
    int rv = mg_sigv4_verify(&req, &a, test_str(TEST_SECRET), payload, key);
    if (rv != 0)
        fail_msg("%s: SigV4 header: %s", file, mg_err_name(rv));
    int64_t t = iso_time(a.amz_date);
    assert_int_equal(mg_sigv4_check_time(&a, (time_t)(t + 60)), 0);
    assert_int_equal(mg_sigv4_check_time(&a, (time_t)(t + 901)), MG_ESKEWED);
    assert_int_equal(mg_sigv4_check_time(&a, (time_t)(t - 901)), MG_ESKEWED);
    cnt.v4_header++;

    /* the signer reproduces the recorded signature */
    struct mg_buf out;
    mg_buf_init(&out);
    mg_sigv4_sign_header(&req, test_str(TEST_AK), test_str(TEST_SECRET), a.region, a.amz_date,
                         a.signed_headers, payload, &out);
    const char *s = strstr(out.base, "Signature=");
    assert_non_null(s);
    if (strlen(s + 10) != 64 || memcmp(s + 10, a.signature.base, 64) != 0)
        fail_msg("%s: signer gave %s", file, s + 10);
    mg_buf_close(&out);
    cnt.signed_repro++;

    /* payload */
    if (payload.len == 64) {
        if (!f->truncated) {
            check_sha256_hex(f->body, f->body_len, payload, file);
            check_integrity_headers(f, f->body, f->body_len, file);
            cnt.payload_literal++;
        } else {
            check_truncated_literal(f, payload, file);
        }
    } else if (str_is(payload, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") ||
               str_is(payload, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")) {
        enum mg_chunked_mode mode = str_is(payload, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
                                        ? MG_CHUNKED_SIGNED
                                        : MG_CHUNKED_UNSIGNED_TRAILER;
        if (f->truncated)
            check_truncated_streaming(f, &a, key, mode, file);
        else
            check_streaming(f, f->body, f->body_len, &a, key, mode, file);
    } else if (str_is(payload, "UNSIGNED-PAYLOAD") && !f->truncated) {
        check_integrity_headers(f, f->body, f->body_len, file);
    } else if (str_is(payload, "UNSIGNED-PAYLOAD")) {
        check_truncated_literal(f, test_str(""), file);
    }

    /* mutations: every byte of every signed header value, the path, the query */
    struct mreq m;
    mreq_init(&m, f, (struct mg_str){NULL, 0});
    struct v4ctx c = {f, payload, &a};
    for (size_t i = 0; i < f->nheaders; i++) {
        if (!header_signed(a.signed_headers, f->headers[i].name))
            continue;
        mutate_each(m.vals[i], m.hdrs[i].value.len, &m.req, verify_v4_header, &c, file, "header");
    }
    mutate_each(m.path, f->path.len, &m.req, verify_v4_header, &c, file, "path");
    mutate_each(m.query, f->query.len, &m.req, verify_v4_header, &c, file, "query");
    add_unsigned_amz(&m, f->nheaders);
    assert_int_equal(verify_v4_header(&m.req, &c), MG_EACCESSDENIED);
    cnt.mutations++;
    mreq_close(&m, f->nheaders);
    mg_arena_close(&arena);
}

/* Presigned V4: the query without the six auth parameters, for the signer. */
static char *strip_v4_auth_params(struct mg_str q)
{
    static const char *const names[] = {
        "X-Amz-Algorithm=", "X-Amz-Credential=",    "X-Amz-Date=",
        "X-Amz-Expires=",   "X-Amz-SignedHeaders=", "X-Amz-Signature="};
    char *out = mg_malloc(q.len + 1);
    size_t o = 0, i = 0;
    while (i < q.len) {
        size_t j = i;
        while (j < q.len && q.base[j] != '&')
            j++;
        int drop = 0;
        for (int k = 0; k < 6; k++)
            if (j - i >= strlen(names[k]) && memcmp(q.base + i, names[k], strlen(names[k])) == 0)
                drop = 1;
        if (!drop) {
            if (o)
                out[o++] = '&';
            memcpy(out + o, q.base + i, j - i);
            o += j - i;
        }
        i = j + 1;
    }
    out[o] = '\0';
    return out;
}

static void fixture_v4_query(struct httpfix *f, const char *file)
{
    struct mg_sig_req req = httpfix_sig_req(f);
    struct mg_arena arena;
    struct mg_sigv4_auth a;
    uint8_t key[32];
    mg_arena_init(&arena);
    assert_int_equal(mg_sigv4_parse_request(&req, &arena, &a), 0);
    assert_true(a.presigned);
    struct mg_str payload = a.content_sha256.len ? a.content_sha256 : test_str("UNSIGNED-PAYLOAD");
    int rv = mg_sigv4_verify(&req, &a, test_str(TEST_SECRET), payload, key);
    if (rv != 0)
        fail_msg("%s: presigned SigV4: %s", file, mg_err_name(rv));
    int64_t t = iso_time(a.amz_date);
    assert_int_equal(mg_sigv4_check_time(&a, (time_t)(t + 60)), 0);
    assert_int_equal(mg_sigv4_check_time(&a, (time_t)(t + a.expires_s)), 0);
    assert_int_equal(mg_sigv4_check_time(&a, (time_t)(t + a.expires_s + 1)), MG_EEXPIRED);
    cnt.v4_query++;

    /* the signer reproduces the recorded signature */
    char *kept = strip_v4_auth_params(f->query);
    struct mg_sig_req sreq = req;
    sreq.query = test_str(kept);
    struct mg_buf out;
    mg_buf_init(&out);
    mg_sigv4_presign(&sreq, test_str(TEST_AK), test_str(TEST_SECRET), a.region, a.amz_date,
                     a.expires_s, &out);
    const char *s = strstr(out.base, "X-Amz-Signature=");
    assert_non_null(s);
    if (strlen(s + 16) != 64 || memcmp(s + 16, a.signature.base, 64) != 0)
        fail_msg("%s: presigner gave %s", file, s + 16);
    cnt.signed_repro++;
    mg_buf_close(&out);
    mg_free(kept);

    /* mutations: path bytes, and every query byte outside the auth parameters' names and
     * separators (those make the query unparseable: MG_EAUTHQUERY, checked apart) */
    struct mreq m;
    mreq_init(&m, f, (struct mg_str){NULL, 0});
    mutate_each(m.path, f->path.len, &m.req, verify_v4_query, NULL, file, "path");
    for (size_t i = 0; i < f->query.len; i++) {
        char saved = m.query[i];
        m.query[i] = mutate_byte(saved);
        rv = verify_v4_query(&m.req, NULL);
        m.query[i] = saved;
        /* MG_EAUTHQUERY: an auth parameter no longer parses; MG_EAUTHHEADER: the
         * X-Amz-SignedHeaders value now names a header the request lacks */
        if (rv != MG_ESIGNATURE && rv != MG_EAUTHQUERY && rv != MG_EAUTHHEADER)
            fail_msg("%s: query byte %zu changed: %s", file, i, mg_err_name(rv));
        cnt.mutations++;
    }
    /* X-Amz-Expires 3600 -> 3601 */
    struct mg_str e = query_param(test_str(m.query), "X-Amz-Expires");
    assert_non_null(e.base);
    char *ep = m.query + (e.base - m.query) + e.len - 1;
    char saved_e = *ep;
    *ep = (char)(saved_e == '9' ? '8' : saved_e + 1);
    assert_int_equal(verify_v4_query(&m.req, NULL), MG_ESIGNATURE);
    *ep = saved_e;
    cnt.mutations++;
    /* an unsigned x-amz-* header added */
    assert_int_equal(verify_v4_query(&m.req, NULL), 0);
    add_unsigned_amz(&m, f->nheaders);
    assert_int_equal(verify_v4_query(&m.req, NULL), MG_EACCESSDENIED);
    m.req.nheaders--;
    cnt.mutations++;
    /* every signed header (host) */
    for (size_t i = 0; i < f->nheaders; i++)
        if (header_signed(a.signed_headers, f->headers[i].name))
            mutate_each(m.vals[i], m.hdrs[i].value.len, &m.req, verify_v4_query, NULL, file,
                        "header");
    mreq_close(&m, f->nheaders);
    mg_arena_close(&arena);
}

/* Virtual-host style: the bucket is the first label of Host (example-bucket.s3.local). */
static struct mg_str vhost_bucket(const struct httpfix *f)
{
    struct mg_str h = hdr(f, "host");
    static const char b[] = "example-bucket.";
    if (h.len > sizeof(b) - 1 && memcmp(h.base, b, sizeof(b) - 1) == 0)
        return (struct mg_str){h.base, sizeof(b) - 2};
    return (struct mg_str){NULL, 0};
}

static void fixture_v2_query(struct httpfix *f, const char *file)
{
    struct mg_sig_req req = httpfix_sig_req(f);
    req.v2_bucket = vhost_bucket(f);
    struct mg_arena arena;
    struct mg_sigv2_auth a;
    mg_arena_init(&arena);
    assert_int_equal(mg_sigv2_parse_query(f->query, &arena, &a), 0);
    int rv = mg_sigv2_verify(&req, &a, test_str(TEST_SECRET));
    if (rv != 0)
        fail_msg("%s: presigned SigV2: %s", file, mg_err_name(rv));
    assert_int_equal(mg_sigv2_check_time(&req, &a, (time_t)a.expires), 0);
    assert_int_equal(mg_sigv2_check_time(&req, &a, (time_t)a.expires + 1), MG_EEXPIRED);
    cnt.v2_query++;

    char sig[64];
    struct mg_str exp = query_param(f->query, "Expires");
    mg_sigv2_sign(&req, test_str(TEST_SECRET), exp, sig);
    if (strlen(sig) != a.signature.len || memcmp(sig, a.signature.base, a.signature.len) != 0)
        fail_msg("%s: V2 signer gave %s", file, sig);
    cnt.signed_repro++;

    /* mutations: path bytes and the Expires value are signed (the access key is not) */
    struct mreq m;
    mreq_init(&m, f, req.v2_bucket);
    mutate_each(m.path, f->path.len, &m.req, verify_v2_query, NULL, file, "path");
    struct mg_str e = query_param(test_str(m.query), "Expires");
    for (size_t i = 0; i < e.len; i++) {
        char *p = m.query + (e.base - m.query) + i;
        char saved = *p;
        *p = (char)(saved == '9' ? '0' : saved + 1);
        assert_int_equal(verify_v2_query(&m.req, NULL), MG_ESIGNATURE);
        *p = saved;
        cnt.mutations++;
    }
    if (req.v2_bucket.len) {
        m.req.v2_bucket = test_str("other-bucket");
        assert_int_equal(verify_v2_query(&m.req, NULL), MG_ESIGNATURE);
        cnt.mutations++;
    }
    mreq_close(&m, f->nheaders);
    mg_arena_close(&arena);
}

static void fixture_one(const char *rel)
{
    char path[8192], err[128];
    snprintf(path, sizeof(path), "%s/%s", fixtures_dir(), rel);
    struct httpfix f;
    if (httpfix_load(path, &f, err, sizeof(err)) != 0)
        fail_msg("%s: %s", rel, err);
    struct mg_str authz = hdr(&f, "authorization");
    if (authz.base != NULL && authz.len > 17 && memcmp(authz.base, "AWS4-HMAC-SHA256 ", 17) == 0)
        fixture_v4_header(&f, rel);
    else if (authz.base != NULL)
        fail_msg("%s: unexpected Authorization form", rel);
    else if (query_param(f.query, "X-Amz-Algorithm").base != NULL)
        fixture_v4_query(&f, rel);
    else if (query_param(f.query, "AWSAccessKeyId").base != NULL)
        fixture_v2_query(&f, rel);
    else
        fail_msg("%s: no signature", rel);
    cnt.files++;
    httpfix_close(&f);
}

static void test_all_fixtures(void **state)
{
    char path[1024], line[4096];
    snprintf(path, sizeof(path), "%s/index.tsv", fixtures_dir());
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        fail_msg("cannot open %s (set MG_FIXTURES_DIR)", path);
    int lineno = 0;
    memset(&cnt, 0, sizeof(cnt));
    while (fgets(line, sizeof(line), fp) != NULL) {
        if (lineno++ == 0)
            continue; /* header */
        char *tab = strchr(line, '\t');
        if (tab == NULL)
            continue;
        *tab = '\0';
        fixture_one(line);
    }
    fclose(fp);
    print_message("fixtures: %d/%d verified (v4 header %d, v4 presigned %d, v2 presigned %d); "
                  "signer reproduced %d; payloads: literal %d + regenerated %d, signed chunks "
                  "%d, trailer %d (%d of them rebuilt from truncated captures); Content-MD5 %d, "
                  "x-amz-checksum %d; mutations %ld\n",
                  cnt.files, NFIXTURES, cnt.v4_header, cnt.v4_query, cnt.v2_query, cnt.signed_repro,
                  cnt.payload_literal, cnt.payload_literal_regen, cnt.streaming_signed,
                  cnt.streaming_trailer, cnt.streaming_regen, cnt.content_md5, cnt.amz_checksum,
                  cnt.mutations);
    assert_int_equal(cnt.files, NFIXTURES);
    assert_int_equal(cnt.signed_repro, NFIXTURES);
    free(big);
    big = NULL;
}

int test_fixtures_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_fixtures),
    };
    return cmocka_run_group_tests_name("common/fixtures", tests, NULL, NULL);
}
