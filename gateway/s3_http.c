/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure pieces of HTTP semantics the S3 handlers follow, kept free of
 * requests and I/O so unit tests call them directly: Range (RFC 7233 as S3
 * applies it: several ranges or a malformed header are ignored and the whole
 * object is sent; a start past the end is 416), conditional headers (RFC 7232
 * with the precedence the GetObject reference spells out), entity-tag lists,
 * ListObjectsV2 continuation tokens and max-keys style parameters.
 */
#include <assert.h>
#include <string.h>
#include <strings.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"

/* ------------------------------------------------------------- pure helpers */

struct mg_str gw__s3_trim(struct mg_str s)
{
    while (s.len > 0 && (s.base[0] == ' ' || s.base[0] == '\t'))
        s.base++, s.len--;
    while (s.len > 0 && (s.base[s.len - 1] == ' ' || s.base[s.len - 1] == '\t'))
        s.len--;
    return s;
}

int gw__s3_str_eq(struct mg_str a, struct mg_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.base, b.base, a.len) == 0);
}

int64_t gw__s3_parse_dec(struct mg_str s)
{
    uint64_t v = 0;
    size_t i;
    if (s.len == 0 || s.len > 19)
        return -1;
    for (i = 0; i < s.len; i++) {
        if (s.base[i] < '0' || s.base[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s.base[i] - '0');
    }
    return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
}

int gw_range_parse(struct mg_str hdr, uint64_t size, uint64_t *off, uint64_t *len)
{
    struct mg_str spec, first, last;
    const char *dash;
    int64_t a, b = -1;

    hdr = gw__s3_trim(hdr);
    if (hdr.len < 6 || strncasecmp(hdr.base, "bytes=", 6) != 0)
        return 0;
    spec = gw__s3_trim((struct mg_str){hdr.base + 6, hdr.len - 6});
    if (memchr(spec.base, ',', spec.len) != NULL)
        return 0; /* multiple ranges: S3 answers 200 with the whole object */
    dash = memchr(spec.base, '-', spec.len);
    if (dash == NULL)
        return 0;
    first = gw__s3_trim((struct mg_str){spec.base, (size_t)(dash - spec.base)});
    last = gw__s3_trim((struct mg_str){dash + 1, (size_t)(spec.base + spec.len - dash - 1)});
    if (first.len == 0) { /* suffix: the last n bytes */
        int64_t n = gw__s3_parse_dec(last);
        if (n < 0)
            return 0;
        if (n == 0 || size == 0)
            return MG_EINVALIDRANGE;
        if ((uint64_t)n > size)
            n = (int64_t)size;
        *off = size - (uint64_t)n;
        *len = (uint64_t)n;
        assert(*len > 0 && *off + *len == size);
        return 1;
    }
    a = gw__s3_parse_dec(first);
    if (a < 0)
        return 0;
    if (last.len > 0 && (b = gw__s3_parse_dec(last)) < 0)
        return 0;
    if (b >= 0 && b < a)
        return 0; /* syntactically invalid: ignored (RFC 7233 2.1) */
    if ((uint64_t)a >= size)
        return MG_EINVALIDRANGE;
    if (b < 0 || (uint64_t)b >= size)
        b = (int64_t)size - 1;
    *off = (uint64_t)a;
    *len = (uint64_t)(b - a) + 1;
    assert(*len > 0 && *off + *len <= size);
    return 1;
}

int gw_etag_list_match(struct mg_str list, struct mg_str etag)
{
    size_t i, start = 0;
    for (i = 0; i <= list.len; i++) {
        struct mg_str t;
        if (i < list.len && list.base[i] != ',')
            continue;
        t = gw__s3_trim((struct mg_str){list.base + start, i - start});
        start = i + 1;
        if (t.len == 1 && t.base[0] == '*')
            return 1;
        if (t.len >= 2 && t.base[0] == 'W' && t.base[1] == '/')
            t.base += 2, t.len -= 2;
        if (t.len >= 2 && t.base[0] == '"' && t.base[t.len - 1] == '"')
            t.base++, t.len -= 2;
        if (gw__s3_str_eq(t, etag))
            return 1;
    }
    return 0;
}

int gw_cond_eval(const struct gw_cond *c, struct mg_str etag, int64_t mtime_ms)
{
    int64_t mtime_s = mtime_ms / 1000;
    assert(c != NULL);
    /* "If both of the If-Match and If-Unmodified-Since headers are present ... If-Match
     * condition evaluates to true, and If-Unmodified-Since condition evaluates to false; then,
     * S3 returns 200 OK" (GetObject API reference). */
    if (c->if_match.len > 0) {
        if (!gw_etag_list_match(c->if_match, etag))
            return MG_EPRECONDITION;
    } else if (c->if_unmodified_since_ms >= 0 && mtime_s > c->if_unmodified_since_ms / 1000) {
        return MG_EPRECONDITION;
    }
    /* "If-None-Match condition evaluates to false, and If-Modified-Since condition evaluates to
     * true; then, S3 returns 304 Not Modified". */
    if (c->if_none_match.len > 0) {
        if (gw_etag_list_match(c->if_none_match, etag))
            return MG_ENOTMODIFIED;
    } else if (c->if_modified_since_ms >= 0 && mtime_s <= c->if_modified_since_ms / 1000) {
        return MG_ENOTMODIFIED;
    }
    return 0;
}

void gw_token_encode(struct mg_str marker, struct mg_arena *a, struct mg_str *out)
{
    char *p = mg_arena_alloc(a, 4 * ((marker.len + 2) / 3) + 1);
    out->len = mg_base64_encode((const uint8_t *)marker.base, marker.len, p);
    out->base = p;
}

int gw_token_decode(struct mg_str token, struct mg_arena *a, struct mg_str *out)
{
    size_t cap = token.len / 4 * 3 + 3;
    uint8_t *p = mg_arena_alloc(a, cap + 1);
    long n;
    if (token.len == 0)
        return MG_EINVALIDARGUMENT;
    n = mg_base64_decode(token, p, cap);
    if (n <= 0 || (size_t)n > META_KEY_MAX)
        return MG_EINVALIDARGUMENT;
    p[n] = '\0';
    out->base = (const char *)p;
    out->len = (size_t)n;
    return 0;
}

int gw_parse_max(struct mg_str v, int present, uint32_t dflt, uint32_t cap, uint32_t *out)
{
    size_t i;
    uint64_t n = 0;
    if (!present) {
        *out = dflt;
        return 0;
    }
    v = gw__s3_trim(v);
    if (v.len == 0)
        return MG_EINVALIDARGUMENT;
    for (i = 0; i < v.len; i++) {
        if (v.base[i] < '0' || v.base[i] > '9')
            return MG_EINVALIDARGUMENT;
        if (n <= cap)
            n = n * 10 + (uint64_t)(v.base[i] - '0');
    }
    *out = n > cap ? cap : (uint32_t)n;
    return 0;
}


struct mg_str gw__s3_hex_md5(struct gw_request *r, const uint8_t md5[16])
{
    char *p = mg_arena_alloc(&r->arena, 33);
    mg_hex_encode(md5, 16, p);
    return (struct mg_str){p, 32};
}
