/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SigV4 (Authorization header and presigned query) and SigV2 (header and
 * query) canonicalization, verification and signing: the one canonicalization
 * of the project (DESIGN.md 3), used by the gateway to verify and by mgbench
 * to sign. Rules follow the AWS "Signature Version 4 signing process"
 * (canonical request, string to sign, signing key) and the S3 "Signing and
 * authenticating REST requests" page for V2, as checked against the captured
 * clients in fixtures/clients (README "Signature re-verification").
 *
 * Hot path sketch: a verification builds one canonical request (~0.5-2 KB)
 * into a per-thread scratch buffer that keeps its capacity (no steady-state
 * allocation), hashes it once, and runs one HMAC over the ~150-byte string
 * to sign; the four-HMAC key derivation is cached per thread per (secret,
 * date, region, service), so a day costs one derivation per user per thread.
 * Per-thread state needs no lock (DESIGN.md 5a: nothing shared on the hot
 * path).
 */
#include "common/sig_int.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/err.h"
#include "common/mem.h"

#define SKEW_MAX_S 900          /* 15 minutes (S3 RequestTimeTooSkewed) */
#define PRESIGN_MAX_S 604800    /* 7 days (X-Amz-Expires upper bound) */
#define SCRATCH_KEEP_MAX 262144 /* scratch capacity kept between requests */
#define SIGNED_HEADERS_MAX 128  /* names in SignedHeaders (clients here sign at most 12) */

static const char ALGO_V4[] = "AWS4-HMAC-SHA256";

static struct mg_str S(const char *s) {
    struct mg_str r = {s, strlen(s)};
    return r;
}

static int
str_eq(struct mg_str a, const char *b)
{
    size_t n = strlen(b);
    return a.len == n && memcmp(a.base, b, n) == 0;
}

/* ------------------------------------------------------ per-thread state */

struct qparam {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
    size_t order; /* original position, keeps sorts stable */
    int has_eq;   /* SigV2: "uploads" vs "uploads=" */
};

struct scratch {
    struct mg_buf canon;   /* canonical request / V2 string to sign */
    struct mg_buf enc;     /* encoded (or decoded) query names and values */
    struct qparam *params; /* query parameters being sorted */
    size_t params_cap;
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static _Thread_local struct scratch *tl_scratch;

static void scratch_free(void *p)
{
    struct scratch *s = p;
    mg_buf_close(&s->canon);
    mg_buf_close(&s->enc);
    mg_free(s->params);
    mg_free(s);
}

static void scratch_key_init(void)
{
    if (pthread_key_create(&scratch_key, scratch_free) != 0)
        abort();
}

static struct scratch *scratch_get(void)
{
    if (tl_scratch == NULL) {
        pthread_once(&scratch_once, scratch_key_init);
        tl_scratch = mg_calloc(1, sizeof(*tl_scratch));
        pthread_setspecific(scratch_key, tl_scratch); /* frees it at thread exit */
    }
    tl_scratch->canon.len = 0;
    tl_scratch->enc.len = 0;
    return tl_scratch;
}

/* Bound what a thread keeps after one huge request (STYLE.md 7a). */
static void scratch_put(struct scratch *s)
{
    if (s->canon.cap > SCRATCH_KEEP_MAX)
        mg_buf_close(&s->canon);
    if (s->enc.cap > SCRATCH_KEEP_MAX)
        mg_buf_close(&s->enc);
}

static struct qparam *param_push(struct scratch *s, size_t n)
{
    if (n == s->params_cap) {
        s->params_cap = s->params_cap ? 2 * s->params_cap : 32;
        s->params = mg_realloc(s->params, s->params_cap * sizeof(*s->params));
    }
    return &s->params[n];
}

static void buf_add(struct mg_buf *b, const void *p, size_t n)
{
    mg_buf_append(b, p, n);
}

static void buf_adds(struct mg_buf *b, const char *s)
{
    mg_buf_append(b, s, strlen(s));
}

static void buf_addc(struct mg_buf *b, char c)
{
    mg_buf_append(b, &c, 1);
}

/* -------------------------------------------------------------- headers */

struct mg_str mg_sig_req_header(const struct mg_sig_req *req, const char *name)
{
    struct mg_str n = S(name), none = {NULL, 0};
    for (size_t i = 0; i < req->nheaders; i++)
        if (mg__strieq(req->headers[i].name, n))
            return req->headers[i].value;
    return none;
}

/* Append a header value trimmed, with runs of spaces collapsed into one (SigV4 "Trimall"). */
static void add_trimall(struct mg_buf *b, struct mg_str v)
{
    v = mg__trim(v);
    mg_buf_reserve(b, v.len);
    char *o = b->base + b->len;
    for (size_t i = 0; i < v.len; i++) {
        char c = v.base[i] == '\t' ? ' ' : v.base[i];
        if (c == ' ' && i > 0 && (v.base[i - 1] == ' ' || v.base[i - 1] == '\t'))
            continue;
        *o++ = c;
    }
    b->len = (size_t)(o - b->base);
    b->base[b->len] = '\0';
}

/* CanonicalHeaders for the ';'-separated signed header list: "name:v1,v2\n" per name. */
static int canon_headers(const struct mg_sig_req *req, struct mg_str signed_headers,
                         struct mg_buf *b)
{
    size_t i = 0;
    while (i < signed_headers.len) {
        size_t j = i;
        while (j < signed_headers.len && signed_headers.base[j] != ';')
            j++;
        struct mg_str name = {signed_headers.base + i, j - i};
        if (name.len == 0)
            return MG_EAUTHHEADER;
        buf_add(b, name.base, name.len);
        buf_addc(b, ':');
        int found = 0;
        for (size_t h = 0; h < req->nheaders; h++) {
            if (!mg__strieq(req->headers[h].name, name))
                continue;
            if (found++)
                buf_addc(b, ',');
            add_trimall(b, req->headers[h].value);
        }
        if (!found)
            return MG_EAUTHHEADER;
        buf_addc(b, '\n');
        i = j + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- query */

/* Byte-wise (or ASCII case-insensitive) order of two strings; a prefix sorts first. */
static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen, int nocase)
{
    size_t n = alen < blen ? alen : blen;
    int c = n == 0 ? 0 : nocase ? strncasecmp(a, b, n) : memcmp(a, b, n);
    if (c == 0 && alen != blen)
        c = alen < blen ? -1 : 1;
    return c;
}

static int order_cmp(const struct qparam *a, const struct qparam *b)
{
    return a->order < b->order ? -1 : a->order > b->order;
}

/* SigV4 canonical query order: name, then value (encoded bytes). */
static int param_cmp(const void *pa, const void *pb)
{
    const struct qparam *a = pa, *b = pb;
    int c = bytes_cmp(a->name, a->nlen, b->name, b->nlen, 0);
    if (c == 0)
        c = bytes_cmp(a->value, a->vlen, b->value, b->vlen, 0);
    return c != 0 ? c : order_cmp(a, b);
}

/* Parse 1..maxdigits decimal digits; 0 or -1. */
static int parse_decimal(struct mg_str v, size_t maxdigits, int64_t *out)
{
    int64_t e = 0;
    if (v.len == 0 || v.len > maxdigits)
        return -1;
    for (size_t i = 0; i < v.len; i++) {
        if (v.base[i] < '0' || v.base[i] > '9')
            return -1;
        e = e * 10 + (v.base[i] - '0');
    }
    *out = e;
    return 0;
}

/* Split query on '&' and call fn for each non-empty "name[=value]". */
typedef void (*param_fn)(void *ctx, struct mg_str name, struct mg_str value, int has_eq);

static void query_each(struct mg_str q, param_fn fn, void *ctx)
{
    size_t i = 0;
    while (i < q.len) {
        size_t j = i;
        while (j < q.len && q.base[j] != '&')
            j++;
        if (j > i) {
            struct mg_str name = {q.base + i, j - i}, value = {q.base + j, 0};
            const char *eq = memchr(name.base, '=', name.len);
            if (eq != NULL) {
                value.base = eq + 1;
                value.len = (size_t)(name.base + name.len - value.base);
                name.len = (size_t)(eq - name.base);
            }
            fn(ctx, name, value, eq != NULL);
        }
        i = j + 1;
    }
}

struct canonq_ctx {
    struct scratch *s;
    size_t n;
    int skip_sig;
};

static void on_canon_param(void *vctx, struct mg_str name, struct mg_str value, int has_eq)
{
    struct canonq_ctx *c = vctx;
    if (c->skip_sig && str_eq(name, "X-Amz-Signature"))
        return;
    struct qparam *p = param_push(c->s, c->n);
    /* offsets now; pointers once enc stops growing */
    p->name = (const char *)(uintptr_t)c->s->enc.len;
    mg__uri_canon(name, 0, &c->s->enc);
    p->nlen = c->s->enc.len - (size_t)(uintptr_t)p->name;
    p->value = (const char *)(uintptr_t)c->s->enc.len;
    mg__uri_canon(value, 0, &c->s->enc);
    p->vlen = c->s->enc.len - (size_t)(uintptr_t)p->value;
    p->order = c->n++;
    p->has_eq = has_eq;
}

static void fix_offsets(struct scratch *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s->params[i].name = s->enc.base + (size_t)(uintptr_t)s->params[i].name;
        s->params[i].value = s->enc.base + (size_t)(uintptr_t)s->params[i].value;
    }
}

/* CanonicalQueryString: each name and value decoded then re-encoded ('/' too), sorted. */
static void canon_query(struct mg_str query, int presigned, struct scratch *s)
{
    struct canonq_ctx c = {s, 0, presigned};
    query_each(query, on_canon_param, &c);
    if (c.n == 0)
        return;
    fix_offsets(s, c.n);
    qsort(s->params, c.n, sizeof(*s->params), param_cmp);
    for (size_t i = 0; i < c.n; i++) {
        if (i)
            buf_addc(&s->canon, '&');
        buf_add(&s->canon, s->params[i].name, s->params[i].nlen);
        buf_addc(&s->canon, '=');
        buf_add(&s->canon, s->params[i].value, s->params[i].vlen);
    }
}

/* ---------------------------------------------------------------- SigV4 */

static int is_hex64(struct mg_str s)
{
    if (s.len != 64)
        return 0;
    for (size_t i = 0; i < 64; i++)
        if (mg__hexval(s.base[i]) < 0)
            return 0;
    return 1;
}

/* "AK/yyyymmdd/region/service/aws4_request" into out. */
static int parse_credential(struct mg_str cred, struct mg_sigv4_auth *out)
{
    struct mg_str part[5];
    size_t k = 0, i = 0;
    while (k < 5) {
        size_t j = i;
        while (j < cred.len && cred.base[j] != '/')
            j++;
        part[k].base = cred.base + i;
        part[k].len = j - i;
        k++;
        if (j >= cred.len)
            break;
        i = j + 1;
    }
    if (k != 5 || part[4].base + part[4].len != cred.base + cred.len)
        return -1;
    if (!str_eq(part[4], "aws4_request") || part[0].len == 0 || part[1].len != 8 ||
        part[2].len == 0 || part[3].len == 0)
        return -1;
    for (size_t d = 0; d < 8; d++)
        if (part[1].base[d] < '0' || part[1].base[d] > '9')
            return -1;
    out->access_key = part[0];
    out->date = part[1];
    out->region = part[2];
    out->service = part[3];
    return 0;
}

/* Lower-case header names separated by ';', at most SIGNED_HEADERS_MAX of them: the
 * canonical headers cost names x request headers comparisons (STYLE.md 7a bounds). */
static int signed_headers_ok(struct mg_str sh)
{
    size_t names = 1;
    if (sh.len == 0)
        return 0;
    for (size_t i = 0; i < sh.len; i++) {
        char c = sh.base[i];
        if (c <= ' ' || c >= 0x7f || c == ',' || c == ':' || (c >= 'A' && c <= 'Z'))
            return 0;
        names += c == ';';
    }
    return names <= SIGNED_HEADERS_MAX;
}

static void auth_reset(struct mg_sigv4_auth *out)
{
    memset(out, 0, sizeof(*out));
    out->expires_s = -1;
}

int mg_sigv4_parse_header(struct mg_str a, struct mg_sigv4_auth *out)
{
    auth_reset(out);
    a = mg__trim(a);
    size_t alen = sizeof(ALGO_V4) - 1;
    if (a.len <= alen || memcmp(a.base, ALGO_V4, alen) != 0 || a.base[alen] != ' ')
        return MG_EAUTHHEADER;
    struct mg_str rest = {a.base + alen, a.len - alen};
    int have_cred = 0, have_sh = 0, have_sig = 0;
    size_t i = 0;
    while (i < rest.len) {
        const char *comma = memchr(rest.base + i, ',', rest.len - i);
        size_t j = comma != NULL ? (size_t)(comma - rest.base) : rest.len;
        struct mg_str kv = mg__trim((struct mg_str){rest.base + i, j - i});
        const char *eq = memchr(kv.base, '=', kv.len);
        if (eq == NULL)
            return MG_EAUTHHEADER;
        struct mg_str k = {kv.base, (size_t)(eq - kv.base)};
        struct mg_str v = {eq + 1, (size_t)(kv.base + kv.len - eq - 1)};
        if (str_eq(k, "Credential") && !have_cred++) {
            if (parse_credential(v, out) != 0)
                return MG_EAUTHHEADER;
        } else if (str_eq(k, "SignedHeaders") && !have_sh++) {
            out->signed_headers = v;
        } else if (str_eq(k, "Signature") && !have_sig++) {
            out->signature = v;
        } else {
            return MG_EAUTHHEADER;
        }
        i = j + 1;
    }
    if (have_cred != 1 || have_sh != 1 || have_sig != 1 ||
        !signed_headers_ok(out->signed_headers) || !is_hex64(out->signature))
        return MG_EAUTHHEADER;
    return 0;
}

struct v4q_ctx {
    struct mg_arena *arena;
    struct mg_sigv4_auth *out;
    int seen[7];
    int bad;
};

static const char *const v4q_names[] = {
    "X-Amz-Algorithm",     "X-Amz-Credential", "X-Amz-Date",           "X-Amz-Expires",
    "X-Amz-SignedHeaders", "X-Amz-Signature",  "X-Amz-Content-Sha256",
};

static void on_v4_query_param(void *vctx, struct mg_str name, struct mg_str value, int has_eq)
{
    struct v4q_ctx *c = vctx;
    int k = -1;
    for (int i = 0; i < 7; i++)
        if (str_eq(name, v4q_names[i]))
            k = i;
    if (k < 0)
        return;
    if (c->seen[k]++) {
        c->bad = 1;
        return;
    }
    char *d = mg_arena_alloc(c->arena, value.len + 1);
    long n = mg__uri_decode_raw(value, d);
    if (n < 0) {
        c->bad = 1;
        return;
    }
    d[n] = '\0';
    struct mg_str v = {d, (size_t)n};
    struct mg_sigv4_auth *out = c->out;
    switch (k) {
    case 0:
        if (!str_eq(v, ALGO_V4))
            c->bad = 1;
        break;
    case 1:
        if (parse_credential(v, out) != 0)
            c->bad = 1;
        break;
    case 2:
        out->amz_date = v;
        break;
    case 3:
        /* "X-Amz-Expires must be less than a week (in seconds) that is 604800" */
        if (parse_decimal(v, 7, &out->expires_s) != 0 || out->expires_s > PRESIGN_MAX_S)
            c->bad = 1;
        break;
    case 4:
        out->signed_headers = v;
        break;
    case 5:
        out->signature = v;
        break;
    default:
        out->content_sha256 = v;
        break;
    }
}

int mg_sigv4_parse_query(struct mg_str query, struct mg_arena *arena, struct mg_sigv4_auth *out)
{
    auth_reset(out);
    struct v4q_ctx c = {.arena = arena, .out = out};
    query_each(query, on_v4_query_param, &c);
    for (int i = 0; i < 6; i++)
        if (c.seen[i] != 1)
            c.bad = 1;
    if (c.bad || !signed_headers_ok(out->signed_headers) || !is_hex64(out->signature) ||
        out->amz_date.len != 16) {
        auth_reset(out);
        return MG_EAUTHQUERY;
    }
    out->presigned = 1;
    return 0;
}

static int query_has_param(struct mg_str q, const char *name_eq)
{
    size_t k = strlen(name_eq);
    for (size_t i = 0; i + k <= q.len; i++)
        if ((i == 0 || q.base[i - 1] == '&') && memcmp(q.base + i, name_eq, k) == 0)
            return 1;
    return 0;
}

int mg_sigv4_parse_request(const struct mg_sig_req *req, struct mg_arena *arena,
                           struct mg_sigv4_auth *out)
{
    struct mg_str a = mg_sig_req_header(req, "authorization");
    struct mg_str at = mg__trim(a);
    int in_query = query_has_param(req->query, "X-Amz-Algorithm=");
    auth_reset(out);
    if (a.base != NULL && !(at.len >= 4 && memcmp(at.base, "AWS ", 4) == 0)) {
        /* "Only one auth mechanism allowed" (S3 InvalidArgument) */
        if (in_query)
            return MG_EINVALIDARGUMENT;
        int rv = mg_sigv4_parse_header(a, out);
        if (rv != 0)
            return rv;
        struct mg_str d = mg_sig_req_header(req, "x-amz-date");
        if (d.base == NULL)
            d = mg_sig_req_header(req, "date");
        d = mg__trim(d);
        int64_t t;
        if (d.base == NULL || mg__time_parse_iso8601(d, &t) != 0)
            return MG_EAUTHHEADER;
        out->amz_date = d;
        return 0;
    }
    if (in_query)
        return a.base != NULL ? MG_EINVALIDARGUMENT : mg_sigv4_parse_query(req->query, arena, out);
    return MG_ENOTFOUND;
}

/* Per-thread signing-key cache: direct-mapped, keyed by the exact
 * (secret, date, region, service) bytes. A miss costs four HMACs. */
#define SKEY_SLOTS 16
#define SKEY_ID_MAX 200

struct skey_slot {
    size_t idlen;         /* 0: empty */
    char id[SKEY_ID_MAX]; /* secret \0 date \0 region \0 service */
    uint8_t key[32];
};

static _Thread_local struct skey_slot tl_skeys[SKEY_SLOTS];

static void derive_key(struct mg_str secret, struct mg_str date, struct mg_str region,
                       struct mg_str service, uint8_t key[32])
{
    struct mg__hmac h;
    uint8_t k[32];
    char kbuf[4 + 256];
    size_t klen;
    if (secret.len <= 256) {
        memcpy(kbuf, "AWS4", 4);
        memcpy(kbuf + 4, secret.base, secret.len);
        klen = 4 + secret.len;
        mg__hmac_init(&h, kbuf, klen);
    } else {
        /* HMAC keys longer than a block are hashed first (RFC 2104). */
        SHA256_CTX c;
        SHA256_Init(&c);
        SHA256_Update(&c, "AWS4", 4);
        SHA256_Update(&c, secret.base, secret.len);
        SHA256_Final(k, &c);
        mg__hmac_init(&h, k, 32);
    }
    mg__hmac_update(&h, date.base, date.len);
    mg__hmac_final(&h, k);
    mg_hmac_sha256(k, 32, region.base, region.len, k);
    mg_hmac_sha256(k, 32, service.base, service.len, k);
    mg_hmac_sha256(k, 32, "aws4_request", 12, key);
    memset(kbuf, 0, sizeof(kbuf));
}

void mg_sigv4_signing_key(struct mg_str secret, struct mg_str date, struct mg_str region,
                          struct mg_str service, uint8_t key[32])
{
    size_t idlen = secret.len + date.len + region.len + service.len + 3;
    if (idlen > SKEY_ID_MAX) {
        derive_key(secret, date, region, service, key);
        return;
    }
    char id[SKEY_ID_MAX];
    char *p = id;
    const struct mg_str parts[4] = {secret, date, region, service};
    for (int i = 0; i < 4; i++) {
        if (parts[i].len)
            memcpy(p, parts[i].base, parts[i].len);
        p += parts[i].len;
        if (i < 3)
            *p++ = '\0';
    }
    uint32_t hsh = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < idlen; i++)
        hsh = (hsh ^ (unsigned char)id[i]) * 16777619u;
    struct skey_slot *s = &tl_skeys[hsh % SKEY_SLOTS];
    if (s->idlen == idlen && memcmp(s->id, id, idlen) == 0) {
        memcpy(key, s->key, 32);
        return;
    }
    derive_key(secret, date, region, service, key);
    memcpy(s->id, id, idlen);
    s->idlen = idlen;
    memcpy(s->key, key, 32);
}

/* CanonicalRequest into s->canon; MG_EAUTHHEADER if a signed header is missing. */
static int canon_request_v4(const struct mg_sig_req *req, const struct mg_sigv4_auth *auth,
                            struct mg_str payload_hash, struct scratch *s)
{
    struct mg_buf *b = &s->canon;
    buf_add(b, req->method.base, req->method.len);
    buf_addc(b, '\n');
    if (req->path.len == 0)
        buf_addc(b, '/');
    else
        mg__uri_canon(req->path, 1, b);
    buf_addc(b, '\n');
    canon_query(req->query, auth->presigned, s);
    buf_addc(b, '\n');
    int rv = canon_headers(req, auth->signed_headers, b);
    if (rv != 0)
        return rv;
    buf_addc(b, '\n');
    buf_add(b, auth->signed_headers.base, auth->signed_headers.len);
    buf_addc(b, '\n');
    buf_add(b, payload_hash.base, payload_hash.len);
    return 0;
}

static int signature_v4(const struct mg_sig_req *req, const struct mg_sigv4_auth *auth,
                        struct mg_str payload_hash, const uint8_t key[32], char out_hex[65])
{
    struct scratch *s = scratch_get();
    int rv = canon_request_v4(req, auth, payload_hash, s);
    if (rv == 0) {
        uint8_t d[32];
        char dhex[65];
        mg_sha256(s->canon.base, s->canon.len, d);
        mg_hex_encode(d, 32, dhex);
        struct mg__hmac h;
        mg__hmac_init(&h, key, 32);
        mg__hmac_update(&h, "AWS4-HMAC-SHA256\n", 17);
        mg__hmac_update(&h, auth->amz_date.base, auth->amz_date.len);
        mg__hmac_update(&h, "\n", 1);
        mg__hmac_update(&h, auth->date.base, auth->date.len);
        mg__hmac_update(&h, "/", 1);
        mg__hmac_update(&h, auth->region.base, auth->region.len);
        mg__hmac_update(&h, "/", 1);
        mg__hmac_update(&h, auth->service.base, auth->service.len);
        mg__hmac_update(&h, "/aws4_request\n", 14);
        mg__hmac_update(&h, dhex, 64);
        mg__hmac_final(&h, d);
        mg_hex_encode(d, 32, out_hex);
    }
    scratch_put(s);
    return rv;
}

void mg_sigv4_signature(const struct mg_sig_req *req, const struct mg_sigv4_auth *auth,
                        struct mg_str payload_hash, const uint8_t key[32], char out_hex[65])
{
    if (signature_v4(req, auth, payload_hash, key, out_hex) != 0)
        memset(out_hex, 0, 65); /* a missing signed header: matches no signature */
}

static int list_has(struct mg_str list, struct mg_str name)
{
    size_t i = 0;
    while (i < list.len) {
        const char *semi = memchr(list.base + i, ';', list.len - i);
        size_t j = semi != NULL ? (size_t)(semi - list.base) : list.len;
        if (mg__strieq((struct mg_str){list.base + i, j - i}, name))
            return 1;
        i = j + 1;
    }
    return 0;
}

/* S3 refuses x-amz-* request headers left out of SignedHeaders ("There were headers present
 * in the request which were not signed"): otherwise anyone replaying a signed request within
 * its validity could add, say, x-amz-acl: public-read. */
static int amz_headers_signed(const struct mg_sig_req *req, struct mg_str signed_headers)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        struct mg_str n = req->headers[i].name;
        if (n.len > 6 && strncasecmp(n.base, "x-amz-", 6) == 0 && !list_has(signed_headers, n))
            return 0;
    }
    return 1;
}

int mg_sigv4_verify(const struct mg_sig_req *req, const struct mg_sigv4_auth *auth,
                    struct mg_str secret, struct mg_str payload_hash, uint8_t key[32])
{
    char sig[65];
    /* "host" must be signed (SigV4 canonical headers), or a signature replays on any host */
    if (!list_has(auth->signed_headers, S("host")))
        return auth->presigned ? MG_EAUTHQUERY : MG_EAUTHHEADER;
    mg_sigv4_signing_key(secret, auth->date, auth->region, auth->service, key);
    int rv = signature_v4(req, auth, payload_hash, key, sig);
    if (rv != 0)
        return rv;
    if (auth->signature.len != 64 || !mg_ct_equal(sig, auth->signature.base, 64))
        return MG_ESIGNATURE;
    if (!amz_headers_signed(req, auth->signed_headers))
        return MG_EACCESSDENIED;
    return 0;
}

int mg_sigv4_check_time(const struct mg_sigv4_auth *auth, time_t now)
{
    int bad = auth->presigned ? MG_EAUTHQUERY : MG_EAUTHHEADER;
    int64_t t;
    if (mg__time_parse_iso8601(auth->amz_date, &t) != 0)
        return MG_EAUTHHEADER;
    /* "Invalid credential date. Date is not the same as X-Amz-Date." */
    if (auth->date.len != 8 || memcmp(auth->date.base, auth->amz_date.base, 8) != 0)
        return bad;
    int64_t n = (int64_t)now;
    if (!auth->presigned)
        return (n - t > SKEW_MAX_S || t - n > SKEW_MAX_S) ? MG_ESKEWED : 0;
    /* X-Amz-Expires=0 grants nothing: AWS's SDKs refuse it (ExpiresIn is 1..604800) and RGW
     * answers it "Request has expired" (tests/conformance/report.md M2). */
    if (t > n + SKEW_MAX_S || n > t + auth->expires_s || auth->expires_s == 0)
        return MG_EEXPIRED;
    return 0;
}

void mg_sigv4_sign_header(const struct mg_sig_req *req, struct mg_str access_key,
                          struct mg_str secret, struct mg_str region, struct mg_str amz_date,
                          struct mg_str signed_headers, struct mg_str payload_hash,
                          struct mg_buf *out)
{
    assert(amz_date.len == 16);
    struct mg_sigv4_auth a;
    auth_reset(&a);
    a.access_key = access_key;
    a.date = (struct mg_str){amz_date.base, 8};
    a.region = region;
    a.service = S("s3");
    a.signed_headers = signed_headers;
    a.amz_date = amz_date;
    uint8_t key[32];
    char sig[65];
    mg_sigv4_signing_key(secret, a.date, region, a.service, key);
    int rv = signature_v4(req, &a, payload_hash, key, sig);
    assert(rv == 0 && "signed_headers must name headers present in req");
    (void)rv;
    mg_buf_appendf(out,
                   "AWS4-HMAC-SHA256 Credential=%.*s/%.8s/%.*s/s3/aws4_request, "
                   "SignedHeaders=%.*s, Signature=%s",
                   (int)access_key.len, access_key.base, amz_date.base, (int)region.len,
                   region.base, (int)signed_headers.len, signed_headers.base, sig);
}

void mg_sigv4_presign(const struct mg_sig_req *req, struct mg_str access_key, struct mg_str secret,
                      struct mg_str region, struct mg_str amz_date, int64_t expires_s,
                      struct mg_buf *out)
{
    assert(amz_date.len == 16);
    assert(expires_s >= 0 && expires_s <= PRESIGN_MAX_S);
    size_t start = out->len;
    buf_adds(out, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=");
    mg_uri_encode(access_key, 0, out);
    mg_buf_appendf(out, "%%2F%.8s%%2F", amz_date.base);
    mg_uri_encode(region, 0, out);
    mg_buf_appendf(out,
                   "%%2Fs3%%2Faws4_request&X-Amz-Date=%.16s&X-Amz-Expires=%lld"
                   "&X-Amz-SignedHeaders=host",
                   amz_date.base, (long long)expires_s);
    if (req->query.len) {
        buf_addc(out, '&');
        buf_add(out, req->query.base, req->query.len);
    }
    struct mg_sig_req r = *req;
    r.query = (struct mg_str){out->base + start, out->len - start};
    struct mg_sigv4_auth a;
    auth_reset(&a);
    a.access_key = access_key;
    a.date = (struct mg_str){amz_date.base, 8};
    a.region = region;
    a.service = S("s3");
    a.signed_headers = S("host");
    a.amz_date = amz_date;
    a.presigned = 1;
    a.expires_s = expires_s;
    uint8_t key[32];
    char sig[65];
    mg_sigv4_signing_key(secret, a.date, region, a.service, key);
    int rv = signature_v4(&r, &a, S("UNSIGNED-PAYLOAD"), key, sig);
    assert(rv == 0 && "presigning needs a Host header in req");
    (void)rv;
    buf_adds(out, "&X-Amz-Signature=");
    buf_adds(out, sig);
}

/* ---------------------------------------------------------------- SigV2 */

int mg_sigv2_parse_header(struct mg_str a, struct mg_sigv2_auth *out)
{
    memset(out, 0, sizeof(*out));
    out->expires = -1;
    a = mg__trim(a);
    if (a.len < 6 || memcmp(a.base, "AWS ", 4) != 0)
        return MG_EAUTHHEADER;
    struct mg_str rest = mg__trim((struct mg_str){a.base + 4, a.len - 4});
    const char *colon = memchr(rest.base, ':', rest.len);
    if (colon == NULL || colon == rest.base || colon + 1 == rest.base + rest.len)
        return MG_EAUTHHEADER;
    out->access_key = (struct mg_str){rest.base, (size_t)(colon - rest.base)};
    out->signature = (struct mg_str){colon + 1, (size_t)(rest.base + rest.len - colon - 1)};
    return 0;
}

struct v2q_ctx {
    struct mg_arena *arena;
    struct mg_sigv2_auth *out;
    int seen[3];
    int bad;
};

static void on_v2_query_param(void *vctx, struct mg_str name, struct mg_str value, int has_eq)
{
    struct v2q_ctx *c = vctx;
    int k = str_eq(name, "AWSAccessKeyId") ? 0
            : str_eq(name, "Signature")    ? 1
            : str_eq(name, "Expires")      ? 2
                                           : -1;
    if (k < 0)
        return;
    if (c->seen[k]++) {
        c->bad = 1;
        return;
    }
    char *d = mg_arena_alloc(c->arena, value.len + 1);
    long n = mg__uri_decode_raw(value, d);
    if (n <= 0) {
        c->bad = 1;
        return;
    }
    d[n] = '\0';
    struct mg_str v = {d, (size_t)n};
    if (k == 0) {
        c->out->access_key = v;
    } else if (k == 1) {
        c->out->signature = v;
    } else {
        if (parse_decimal(v, 12, &c->out->expires) != 0)
            c->bad = 1;
    }
}

int mg_sigv2_parse_query(struct mg_str query, struct mg_arena *arena, struct mg_sigv2_auth *out)
{
    memset(out, 0, sizeof(*out));
    struct v2q_ctx c = {.arena = arena, .out = out};
    query_each(query, on_v2_query_param, &c);
    if (c.bad || c.seen[0] != 1 || c.seen[1] != 1 || c.seen[2] != 1) {
        memset(out, 0, sizeof(*out));
        out->expires = -1;
        return MG_EAUTHQUERY;
    }
    out->presigned = 1;
    return 0;
}

/* Sub-resources that are part of the V2 CanonicalizedResource (S3 "Signing and
 * authenticating REST requests", plus what botocore's HmacV1Auth.QSAOfInterest adds).
 * "list-type" is not a sub-resource in either list, but botocore signs the auth path of its
 * operation model, "/{Bucket}?list-type=2" for ListObjectsV2, so every V2 signature boto3
 * makes for a V2 listing (generate_presigned_url's default) covers it. */
static const char *const v2_subresources[] = {
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "delete",
    "encryption",
    "inventory",
    "legal-hold",
    "lifecycle",
    "list-type",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "ownershipControls",
    "partNumber",
    "policy",
    "policyStatus",
    "publicAccessBlock",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "retention",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
};

static int is_subresource(struct mg_str name)
{
    for (size_t i = 0; i < sizeof(v2_subresources) / sizeof(v2_subresources[0]); i++)
        if (str_eq(name, v2_subresources[i]))
            return 1;
    return 0;
}

struct v2res_ctx {
    struct scratch *s;
    size_t n;
};

static void on_v2_subresource(void *vctx, struct mg_str name, struct mg_str value, int has_eq)
{
    struct v2res_ctx *c = vctx;
    if (!is_subresource(name))
        return;
    struct qparam *p = param_push(c->s, c->n);
    p->name = name.base;
    p->nlen = name.len;
    /* Values are signed decoded ("must not be URL-encoded"); a bad escape stays as sent. */
    struct mg_buf *e = &c->s->enc;
    mg_buf_reserve(e, value.len);
    long n = mg__uri_decode_raw(value, e->base + e->len);
    if (n < 0) {
        memcpy(e->base + e->len, value.base, value.len);
        n = (long)value.len;
    }
    p->value = (const char *)(uintptr_t)e->len;
    p->vlen = (size_t)n;
    e->len += (size_t)n;
    p->order = c->n++;
    p->has_eq = has_eq;
}

/* V2 sub-resources: by name only (botocore sorts by name), stable. */
static int v2_param_cmp(const void *pa, const void *pb)
{
    const struct qparam *a = pa, *b = pb;
    int c = bytes_cmp(a->name, a->nlen, b->name, b->nlen, 0);
    return c != 0 ? c : order_cmp(a, b);
}

static void v2_resource(const struct mg_sig_req *req, struct scratch *s)
{
    struct mg_buf *b = &s->canon;
    if (req->v2_bucket.len) {
        buf_addc(b, '/');
        buf_add(b, req->v2_bucket.base, req->v2_bucket.len);
    }
    if (req->path.len)
        buf_add(b, req->path.base, req->path.len);
    else if (!req->v2_bucket.len)
        buf_addc(b, '/');
    struct v2res_ctx c = {s, 0};
    query_each(req->query, on_v2_subresource, &c);
    for (size_t i = 0; i < c.n; i++)
        s->params[i].value = s->enc.base + (size_t)(uintptr_t)s->params[i].value;
    if (c.n > 1)
        qsort(s->params, c.n, sizeof(*s->params), v2_param_cmp);
    for (size_t i = 0; i < c.n; i++) {
        buf_addc(b, i ? '&' : '?');
        buf_add(b, s->params[i].name, s->params[i].nlen);
        if (s->params[i].has_eq) {
            buf_addc(b, '=');
            buf_add(b, s->params[i].value, s->params[i].vlen);
        }
    }
}

/* x-amz-* headers: by lower-cased name, stable (repeats keep their order). */
static int amz_hdr_cmp(const void *pa, const void *pb)
{
    const struct qparam *a = pa, *b = pb;
    int c = bytes_cmp(a->name, a->nlen, b->name, b->nlen, 1);
    return c != 0 ? c : order_cmp(a, b);
}

/* CanonicalizedAmzHeaders: x-amz-* lower-cased, sorted, same names joined with ','. */
static void v2_amz_headers(const struct mg_sig_req *req, struct scratch *s)
{
    size_t n = 0;
    for (size_t i = 0; i < req->nheaders; i++) {
        struct mg_str name = req->headers[i].name;
        if (name.len <= 6 || strncasecmp(name.base, "x-amz-", 6) != 0)
            continue;
        struct qparam *p = param_push(s, n);
        p->name = name.base;
        p->nlen = name.len;
        p->value = req->headers[i].value.base;
        p->vlen = req->headers[i].value.len;
        p->order = n++;
    }
    if (n > 1)
        qsort(s->params, n, sizeof(*s->params), amz_hdr_cmp);
    struct mg_buf *b = &s->canon;
    for (size_t i = 0; i < n; i++) {
        const struct qparam *p = &s->params[i];
        int same = i > 0 && p->nlen == p[-1].nlen && strncasecmp(p->name, p[-1].name, p->nlen) == 0;
        if (same) {
            buf_addc(b, ',');
        } else {
            if (i > 0)
                buf_addc(b, '\n');
            for (size_t k = 0; k < p->nlen; k++) {
                char c = p->name[k];
                buf_addc(b, c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
            }
            buf_addc(b, ':');
        }
        add_trimall(b, (struct mg_str){p->value, p->vlen});
    }
    if (n > 0)
        buf_addc(b, '\n');
}

static void v2_string_to_sign(const struct mg_sig_req *req, struct mg_str date_or_expires,
                              struct scratch *s)
{
    struct mg_buf *b = &s->canon;
    struct mg_str md5 = mg__trim(mg_sig_req_header(req, "content-md5"));
    struct mg_str ctype = mg__trim(mg_sig_req_header(req, "content-type"));
    buf_add(b, req->method.base, req->method.len);
    buf_addc(b, '\n');
    buf_add(b, md5.base, md5.len);
    buf_addc(b, '\n');
    buf_add(b, ctype.base, ctype.len);
    buf_addc(b, '\n');
    buf_add(b, date_or_expires.base, date_or_expires.len);
    buf_addc(b, '\n');
    v2_amz_headers(req, s);
    v2_resource(req, s);
}

static void sign_v2(const struct mg_sig_req *req, struct mg_str secret,
                    struct mg_str date_or_expires, char out[64])
{
    struct scratch *s = scratch_get();
    v2_string_to_sign(req, date_or_expires, s);
    uint8_t mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    if (HMAC(EVP_sha1(), secret.base, (int)secret.len, (const unsigned char *)s->canon.base,
             s->canon.len, mac, &maclen) == NULL)
        abort();
    mg_base64_encode(mac, maclen, out);
    scratch_put(s);
}

void mg_sigv2_sign(const struct mg_sig_req *req, struct mg_str secret,
                   struct mg_str date_or_expires, char out[64])
{
    sign_v2(req, secret, date_or_expires, out);
}

int mg_sigv2_verify(const struct mg_sig_req *req, const struct mg_sigv2_auth *auth,
                    struct mg_str secret)
{
    char date[32];
    struct mg_str d;
    if (auth->presigned) {
        int n = snprintf(date, sizeof(date), "%lld", (long long)auth->expires);
        d = (struct mg_str){date, (size_t)n};
    } else if (mg_sig_req_header(req, "x-amz-date").base != NULL) {
        d = S(""); /* x-amz-date is signed among the amz headers; the Date line is empty */
    } else {
        d = mg__trim(mg_sig_req_header(req, "date"));
    }
    char sig[64];
    sign_v2(req, secret, d, sig);
    size_t n = strlen(sig);
    if (auth->signature.len != n || !mg_ct_equal(sig, auth->signature.base, n))
        return MG_ESIGNATURE;
    return 0;
}

int mg_sigv2_check_time(const struct mg_sig_req *req, const struct mg_sigv2_auth *auth, time_t now)
{
    if (auth->presigned)
        return (int64_t)now > auth->expires ? MG_EEXPIRED : 0;
    struct mg_str d = mg_sig_req_header(req, "x-amz-date");
    if (d.base == NULL)
        d = mg_sig_req_header(req, "date");
    int64_t t;
    if (d.base == NULL || mg__time_parse_rfc1123(d, &t) != 0)
        return MG_EAUTHHEADER;
    int64_t n = (int64_t)now;
    return (n - t > SKEW_MAX_S || t - n > SKEW_MAX_S) ? MG_ESKEWED : 0;
}
