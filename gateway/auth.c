/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authentication: SigV4 in the Authorization header or in the query
 * (presigned), SigV2 in the header or the query, or anonymous. The
 * canonicalization and signing live in common/sig (one implementation for the
 * gateway and mgbench); this file picks the scheme, finds the user, checks the
 * clock (15-minute skew, presigned expiry up to 7 days: S3 API reference,
 * "Authenticating Requests (AWS Signature Version 4)") and records the
 * payload mode from x-amz-content-sha256 for body.c, which verifies the
 * literal SHA-256, the chunk signatures and the trailer while streaming.
 *
 * h2o keeps Host, Content-Length and Transfer-Encoding out of req->headers;
 * Host comes back from req->authority and Content-Length from the entity
 * length (s3cmd and rclone sign it; h2o has already undone any HTTP chunked
 * framing, and clients that sign content-length send one).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "gateway"
#include "gateway/core.h"

static int str_eq(struct mg_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.base, lit, n) == 0;
}

static int has_prefix(struct mg_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len >= n && memcmp(s.base, lit, n) == 0;
}

static const struct gw_user *user_by_access_key(const struct gw_server *srv, struct mg_str ak)
{
    for (size_t i = 0; i < srv->nusers; i++)
        if (srv->users[i].access_key.len == ak.len &&
            memcmp(srv->users[i].access_key.base, ak.base, ak.len) == 0)
            return &srv->users[i];
    return NULL;
}

static void sig_req_build(struct gw_request *r, struct mg_sig_req *sr)
{
    h2o_req_t *req = r->req;
    size_t n = req->headers.size;
    struct mg_http_hdr *h = h2o_mem_alloc_pool(&req->pool, (n + 2) * sizeof(*h));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const h2o_header_t *e = &req->headers.entries[i];
        h[k].name = (struct mg_str){e->name->base, e->name->len};
        h[k].value = (struct mg_str){e->value.base, e->value.len};
        k++;
    }
    if (req->authority.base != NULL) {
        h[k].name = (struct mg_str){"host", 4};
        h[k].value = (struct mg_str){req->authority.base, req->authority.len};
        k++;
    }
    if (req->entity.base != NULL) {
        char *s = h2o_mem_alloc_pool(&req->pool, 24);
        int len = snprintf(s, 24, "%zu", req->entity.len);
        h[k].name = (struct mg_str){"content-length", 14};
        h[k].value = (struct mg_str){s, (size_t)len};
        k++;
    }
    sr->method = (struct mg_str){req->method.base, req->method.len};
    sr->path = r->core.path;
    sr->query = r->core.query;
    sr->headers = h;
    sr->nheaders = k;
    sr->v2_bucket = r->core.vhost ? r->bucket : (struct mg_str){"", 0};
}

static int is_hex64(struct mg_str s)
{
    if (s.len != 64)
        return 0;
    for (size_t i = 0; i < 64; i++) {
        char c = s.base[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return 0;
    }
    return 1;
}

/* x-amz-content-sha256 -> payload mode (S3 API reference, "Common Request Headers"). */
static int payload_mode(struct mg_str v, enum gw_payload *out)
{
    if (is_hex64(v))
        *out = GW_PAYLOAD_SHA256;
    else if (str_eq(v, "UNSIGNED-PAYLOAD"))
        *out = GW_PAYLOAD_NONE;
    else if (str_eq(v, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"))
        *out = GW_PAYLOAD_CHUNKED_SIGNED;
    else if (str_eq(v, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"))
        *out = GW_PAYLOAD_CHUNKED_SIGNED_TRAILER;
    else if (str_eq(v, "STREAMING-UNSIGNED-PAYLOAD-TRAILER"))
        *out = GW_PAYLOAD_CHUNKED_UNSIGNED_TRAILER;
    else
        return MG_EINVALIDARGUMENT;
    return 0;
}

static int is_chunked(enum gw_payload p)
{
    return p == GW_PAYLOAD_CHUNKED_SIGNED || p == GW_PAYLOAD_CHUNKED_SIGNED_TRAILER ||
           p == GW_PAYLOAD_CHUNKED_UNSIGNED_TRAILER;
}

static void set_sha(struct gw_request *r, struct mg_str v)
{
    for (size_t i = 0; i < 64; i++) {
        char c = v.base[i];
        r->core.content_sha256[i] = (char)(c >= 'A' && c <= 'F' ? c + 32 : c);
    }
    r->core.content_sha256[64] = '\0';
}

static int errf(struct gw_request *r, int rv, const char *msg)
{
    snprintf(r->errmsg, sizeof(r->errmsg), "%s", msg);
    return rv;
}

/* The credential scope must name our region. AWS (tests/conformance/report.md M15): "The
 * authorization header is malformed; the region 'eu-west-1' is wrong; expecting 'us-east-1'"
 * with <Region> (respond.c), and for the presigned form "Error parsing the X-Amz-Credential
 * parameter; the region ... is wrong; expecting ...". */
static int region_check(struct gw_request *r, const struct mg_sigv4_auth *a)
{
    if (a->region.len == r->srv->region.len &&
        memcmp(a->region.base, r->srv->region.base, a->region.len) == 0)
        return 0;
    int shown = a->region.len > 64 ? 64 : (int)a->region.len;
    snprintf(r->errmsg, sizeof(r->errmsg), "%s; the region '%.*s' is wrong; expecting '%s'",
             a->presigned ? "Error parsing the X-Amz-Credential parameter"
                          : "The authorization header is malformed",
             shown, a->region.base, r->srv->region.base);
    return a->presigned ? MG_EAUTHQUERY : MG_EWRONGREGION;
}

/* MG_EAUTHQUERY from the presigned parser: say which X-Amz-Expires rule failed, in AWS's words
 * (report.md M1); a request whose X-Amz-Expires is fine keeps the table's message. */
static int expires_message(struct gw_request *r, int rv)
{
    struct mg_str v;
    if (rv != MG_EAUTHQUERY || !gw_query(r, "X-Amz-Expires", &v))
        return rv;
    size_t digits = 0, neg = v.len > 0 && v.base[0] == '-';
    while (neg + digits < v.len && v.base[neg + digits] >= '0' && v.base[neg + digits] <= '9')
        digits++;
    if (digits == 0 || neg + digits != v.len || digits > 18)
        return errf(r, rv, "X-Amz-Expires should be a number");
    if (neg)
        return errf(r, rv, "X-Amz-Expires must be non-negative");
    if (digits > 6 || strtoll(v.base, NULL, 10) > 604800)
        return errf(r, rv, "X-Amz-Expires must be less than a week (in seconds) that is 604800");
    return rv;
}

/* MG_EEXPIRED for a presigned X-Amz-Date later than now + 15 min is "Request is not yet valid"
 * (AWS, quoted in minio/minio#2638; report.md M3). yyyymmddThhmmssZ strings compare as times. */
static int expired_message(struct gw_request *r, const struct mg_sigv4_auth *a, time_t now)
{
    char late[32];
    time_t edge = now + 900;
    struct tm tm;
    gmtime_r(&edge, &tm);
    strftime(late, sizeof(late), "%Y%m%dT%H%M%SZ", &tm);
    if (a->amz_date.len == 16 && memcmp(a->amz_date.base, late, 16) > 0)
        return errf(r, MG_EEXPIRED, "Request is not yet valid");
    return MG_EEXPIRED;
}

/* SigV4, header or presigned form (mg_sigv4_parse_request found one of them in sr). */
static int auth_v4(struct gw_request *r, const struct mg_sig_req *sr, struct mg_sigv4_auth *a,
                   time_t now)
{
    if (!str_eq(a->service, "s3"))
        return errf(r, a->presigned ? MG_EAUTHQUERY : MG_EAUTHHEADER,
                    "The credential scope must name the service s3.");
    int rv = region_check(r, a);
    if (rv != 0)
        return rv;
    const struct gw_user *u = user_by_access_key(r->srv, a->access_key);
    if (u == NULL)
        return MG_EINVALIDACCESSKEY;
    struct mg_str sha = {"UNSIGNED-PAYLOAD", 16};
    if (a->presigned) {
        if (a->content_sha256.len > 0)
            sha = a->content_sha256;
    } else if (!gw_header(r, "x-amz-content-sha256", &sha)) {
        return errf(r, MG_EINVALIDREQUEST,
                    "Missing required header for this request: x-amz-content-sha256");
    }
    enum gw_payload mode;
    if (payload_mode(sha, &mode) != 0 || (a->presigned && is_chunked(mode)))
        return errf(r, MG_EINVALIDARGUMENT,
                    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                    "STREAMING-... or a valid sha256 value.");
    rv = mg_sigv4_check_time(a, now);
    if (rv == MG_EEXPIRED && a->presigned)
        return expired_message(r, a, now);
    if (rv != 0)
        return rv;
    uint8_t key[32];
    if ((rv = mg_sigv4_verify(sr, a, u->secret_key, sha, key)) != 0) {
        if (rv == MG_EAUTHHEADER)
            errf(r, rv, "A header listed in SignedHeaders is missing from the request.");
        return rv;
    }
    r->user = u;
    r->presigned = a->presigned;
    r->core.payload = mode;
    if (mode == GW_PAYLOAD_SHA256)
        set_sha(r, sha);
    if (mode == GW_PAYLOAD_CHUNKED_SIGNED || mode == GW_PAYLOAD_CHUNKED_SIGNED_TRAILER) {
        memcpy(r->core.signing_key, key, 32);
        r->core.v4 = *a; /* points into the request's headers and arena */
    }
    return 0;
}

static int auth_v2(struct gw_request *r, const struct mg_sig_req *sr, const struct mg_sigv2_auth *a,
                   time_t now)
{
    const struct gw_user *u = user_by_access_key(r->srv, a->access_key);
    if (u == NULL)
        return MG_EINVALIDACCESSKEY;
    int rv = mg_sigv2_verify(sr, a, u->secret_key);
    if (rv == 0)
        rv = mg_sigv2_check_time(sr, a, now);
    if (rv == MG_EAUTHHEADER)
        return errf(r, MG_EACCESSDENIED,
                    "AWS authentication requires a valid Date or x-amz-date header");
    if (rv != 0)
        return rv;
    r->user = u;
    r->presigned = a->presigned;
    return 0;
}

/* Unsigned payload modes are decoded (and their trailers verified) whoever sent them. */
static int anonymous(struct gw_request *r)
{
    struct mg_str sha;
    if (!gw_header(r, "x-amz-content-sha256", &sha))
        return 0;
    enum gw_payload mode;
    if (payload_mode(sha, &mode) != 0)
        return errf(r, MG_EINVALIDARGUMENT,
                    "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                    "STREAMING-... or a valid sha256 value.");
    if (mode == GW_PAYLOAD_CHUNKED_SIGNED || mode == GW_PAYLOAD_CHUNKED_SIGNED_TRAILER)
        return errf(r, MG_EACCESSDENIED,
                    "Signed streaming payloads need an Authorization "
                    "header.");
    r->core.payload = mode;
    if (mode == GW_PAYLOAD_SHA256)
        set_sha(r, sha);
    return 0;
}

int gw__auth(struct gw_request *r, time_t now)
{
    assert(r != NULL && r->srv != NULL);
    r->user = NULL;
    r->presigned = 0;
    r->core.payload = GW_PAYLOAD_NONE;
    struct mg_sig_req sr;
    sig_req_build(r, &sr);
    struct mg_str authz;
    int has_header = gw_header(r, "authorization", &authz);
    int v4_query = gw_query(r, "X-Amz-Algorithm", NULL) || gw_query(r, "X-Amz-Credential", NULL);
    int v2_query = gw_query(r, "AWSAccessKeyId", NULL) && gw_query(r, "Signature", NULL);
    if (has_header && (v4_query || v2_query))
        return errf(r, MG_EINVALIDARGUMENT,
                    "Only one auth mechanism allowed; only the "
                    "X-Amz-Algorithm query parameter, Signature query "
                    "string parameter or the Authorization header "
                    "should be specified");
    if (has_header && !has_prefix(authz, "AWS ") && !has_prefix(authz, "AWS4-HMAC-SHA256"))
        return errf(r, MG_EINVALIDARGUMENT, "Unsupported Authorization Type");
    struct mg_sigv2_auth a2;
    int rv;
    if (has_header && has_prefix(authz, "AWS ")) {
        if ((rv = mg_sigv2_parse_header(authz, &a2)) != 0)
            return rv;
        return auth_v2(r, &sr, &a2, now);
    }
    if (v2_query && !v4_query) {
        if ((rv = mg_sigv2_parse_query(r->core.query, &r->arena, &a2)) != 0)
            return rv;
        return auth_v2(r, &sr, &a2, now);
    }
    struct mg_sigv4_auth a4;
    rv = mg_sigv4_parse_request(&sr, &r->arena, &a4);
    if (rv == MG_ENOTFOUND) {
        if (has_header)
            return errf(r, MG_EINVALIDARGUMENT, "Unsupported Authorization Type");
        return anonymous(r);
    }
    if (rv != 0)
        return expires_message(r, rv);
    return auth_v4(r, &sr, &a4, now);
}
