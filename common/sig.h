/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request signing for S3: SigV4 (header and presigned query forms, and the
 * aws-chunked streaming payload modes) and SigV2 (header and query forms).
 * There is ONE canonicalization in the project: the gateway verifies with
 * these functions and mgbench signs with them (DESIGN.md 3, issue 3).
 *
 * Canonical URI rule (fixtures/clients/README.md, "Signature
 * re-verification"): percent-decode the request path, then re-encode every
 * byte outside A-Z a-z 0-9 - _ . ~ / ; canonical query: decode each name and
 * value, re-encode the same way ('/' encoded too), sort by name then value.
 *
 * All strings are (base, len) pairs unless noted. Functions are pure or use
 * thread-safe caches; callable from any thread.
 */
#ifndef MG_COMMON_SIG_H
#define MG_COMMON_SIG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/mem.h"

#define MG_SHA256_HEX_LEN 64
#define MG_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct mg_str {
    const char *base;
    size_t len;
};

struct mg_http_hdr {
    struct mg_str name;  /* as sent (any case) */
    struct mg_str value; /* as sent (untrimmed) */
};

/* What a verifier or signer needs to know about an HTTP request. */
struct mg_sig_req {
    struct mg_str method;  /* "PUT" */
    struct mg_str path;    /* raw request-target path as sent, percent-encoded, no query */
    struct mg_str query;   /* raw query string after '?', may be empty */
    const struct mg_http_hdr *headers;
    size_t nheaders;
    /* SigV2 only (added 2026-11-30): the bucket of a virtual-host-style request (Host
     * "example-bucket.s3.local"), whose path lacks it; the V2 CanonicalizedResource is then
     * "/" bucket path. Leave empty for path-style requests. SigV4 ignores it: its canonical
     * URI is the path as sent (the bucket is in the signed Host header). */
    struct mg_str v2_bucket;
};

/* The value of the first header named `name` (case-insensitive); {NULL, 0} if absent.
 * (added 2026-11-30) */
struct mg_str mg_sig_req_header(const struct mg_sig_req *req, const char *name);

/* ------------------------------------------------------------------ SigV4 */

/* Parsed "AWS4-HMAC-SHA256 Credential=AK/20261130/us-east-1/s3/aws4_request,
 * SignedHeaders=host;x-amz-date, Signature=hex" or the X-Amz-* query form.
 * Fields point into the input (or into the query string decoded into arena). */
struct mg_sigv4_auth {
    struct mg_str access_key;
    struct mg_str date;           /* yyyymmdd of the credential scope */
    struct mg_str region;
    struct mg_str service;
    struct mg_str signed_headers; /* "host;x-amz-date", lower case, ';'-separated */
    struct mg_str signature;      /* 64 hex */
    struct mg_str amz_date;       /* yyyymmddThhmmssZ (header x-amz-date / Date, or X-Amz-Date) */
    int64_t expires_s;            /* presigned only: X-Amz-Expires, else -1 */
    int presigned;                /* 1 for the query form */
    struct mg_str content_sha256; /* presigned only: X-Amz-Content-Sha256 if in the query
                                   * (aws-sdk-js-v3 sends UNSIGNED-PAYLOAD), else empty
                                   * (added 2026-11-30) */
};

/* Parse the Authorization header value. Returns 0, MG_EAUTHHEADER if malformed (also: more
 * than 128 SignedHeaders names, or upper-case ones; the same for the query form). The header
 * carries no date: out->amz_date is left empty; set it from the x-amz-date header (or use
 * mg_sigv4_parse_request, which does). */
int mg_sigv4_parse_header(struct mg_str authorization, struct mg_sigv4_auth *out);

/* Parse the presigned query form (X-Amz-Algorithm=AWS4-HMAC-SHA256 ...); decoded values are
 * allocated from arena. Returns 0, MG_EAUTHQUERY if malformed or X-Amz-Expires > 604800. */
int mg_sigv4_parse_query(struct mg_str query, struct mg_arena *arena, struct mg_sigv4_auth *out);

/* (added 2026-11-30) Find SigV4 credentials in req: the Authorization header
 * ("AWS4-HMAC-SHA256 ...", amz_date taken from x-amz-date, or from Date when that is in
 * yyyymmddThhmmssZ form) or else the presigned query (X-Amz-Algorithm present). Returns 0,
 * MG_EAUTHHEADER, MG_EAUTHQUERY, MG_EINVALIDARGUMENT when the request has an Authorization
 * header and X-Amz-Algorithm both ("Only one auth mechanism allowed"), or MG_ENOTFOUND when
 * the request has neither form (it may
 * be anonymous, or SigV2: an "AWS AKID:sig" Authorization header is left to mg_sigv2_*). The
 * payload hash to verify with is then: header form, the x-amz-content-sha256 header value;
 * presigned, out->content_sha256 if set, else "UNSIGNED-PAYLOAD". */
int mg_sigv4_parse_request(const struct mg_sig_req *req, struct mg_arena *arena,
                           struct mg_sigv4_auth *out);

/* Derive the signing key HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service),
 * "aws4_request") into key[32]. Cached per (secret, date, region, service). */
void mg_sigv4_signing_key(struct mg_str secret, struct mg_str date, struct mg_str region,
                          struct mg_str service, uint8_t key[32]);

/* Build the canonical request and the string to sign; compute the signature (64 lower hex +
 * NUL) for req with the given signed header list and payload hash (hex sha256, or
 * "UNSIGNED-PAYLOAD", or "STREAMING-..."). For presigned requests the X-Amz-Signature
 * parameter is excluded from the canonical query. If a signed header is missing from req,
 * out_hex is all NUL bytes (it matches no signature). */
void mg_sigv4_signature(const struct mg_sig_req *req, const struct mg_sigv4_auth *auth,
                        struct mg_str payload_hash, const uint8_t key[32], char out_hex[65]);

/* Verify: returns 0 when the signature matches (constant-time compare), MG_ESIGNATURE when
 * not, MG_EAUTHHEADER when a signed header is missing from the request. Does not check the
 * clock; see mg_sigv4_check_time. On success, key[32] receives the signing key (for
 * aws-chunked chunk signatures). Also (added 2026-11-30), as S3 does: MG_EAUTHHEADER
 * (MG_EAUTHQUERY presigned) when "host" is not among the signed headers, and
 * MG_EACCESSDENIED when the request carries an x-amz-* header that is not signed ("There
 * were headers present in the request which were not signed"). */
int mg_sigv4_verify(const struct mg_sig_req *req, const struct mg_sigv4_auth *auth,
                    struct mg_str secret, struct mg_str payload_hash, uint8_t key[32]);

/* Clock checks: header form must be within 15 minutes of now (MG_ESKEWED); presigned form
 * must satisfy amz_date <= now + 15 min and now <= amz_date + expires (MG_EEXPIRED).
 * Returns 0, MG_ESKEWED, MG_EEXPIRED or MG_EAUTHHEADER (unparseable date, or a credential
 * scope date that is not the day of amz_date; MG_EAUTHQUERY for those in the presigned
 * form). */
int mg_sigv4_check_time(const struct mg_sigv4_auth *auth, time_t now);

/* Signer (mgbench, tests): sign req in place of a client. amz_date is yyyymmddThhmmssZ;
 * signed_headers must list headers present in req (lower case, sorted, ';'-separated).
 * Writes the full Authorization header value into out (mg_buf_append). */
void mg_sigv4_sign_header(const struct mg_sig_req *req, struct mg_str access_key,
                          struct mg_str secret, struct mg_str region, struct mg_str amz_date,
                          struct mg_str signed_headers, struct mg_str payload_hash,
                          struct mg_buf *out);

/* Presign: appends "X-Amz-Algorithm=...&X-Amz-Signature=hex" (the full query string that
 * replaces req->query, which may hold other parameters to keep) to out. */
void mg_sigv4_presign(const struct mg_sig_req *req, struct mg_str access_key,
                      struct mg_str secret, struct mg_str region, struct mg_str amz_date,
                      int64_t expires_s, struct mg_buf *out);

/* ------------------------------------------------------- aws-chunked body */

/* Decoder for aws-chunked payloads (STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER],
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER). Feed it the body as a byte stream AFTER HTTP chunked
 * framing has been removed (h2o does that); it emits decoded data through on_data and
 * verifies each chunk-signature (signed modes: chained from the seed signature) and the
 * trailer's checksum (x-amz-checksum-* trailer, verified against data by the caller via
 * mg_cksum; the trailer value is exposed in trailer_name/trailer_value). Bounded memory: it
 * never buffers more than one header line. */
enum mg_chunked_mode {
    MG_CHUNKED_SIGNED,          /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
    MG_CHUNKED_SIGNED_TRAILER,  /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
    MG_CHUNKED_UNSIGNED_TRAILER /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

typedef int (*mg_chunked_data_cb)(void *ctx, const void *data, size_t len);

struct mg_chunked {
    enum mg_chunked_mode mode;
    uint8_t key[32];           /* signing key (signed modes) */
    char prev_sig[65];         /* seed signature, then each chunk's */
    char amz_date[17];         /* yyyymmddThhmmssZ */
    char scope[128];           /* date/region/service/aws4_request */
    mg_chunked_data_cb on_data;
    void *ctx;
    /* parser state (internal) */
    int state;
    uint64_t chunk_left;
    uint64_t decoded_total;
    char line[512];
    size_t line_len;
    char chunk_sig[65];
    void *sha_ctx;             /* running sha256 of the current chunk (signed modes) */
    char trailer_name[64];     /* e.g. "x-amz-checksum-crc32" ("" if none) */
    char trailer_value[128];   /* base64 value as sent */
};

/* mode, key, prev_sig (seed), amz_date, scope, on_data, ctx must be set by the caller;
 * mg_chunked_init resets the parser state. */
void mg_chunked_init(struct mg_chunked *c);
/* Returns 0, MG_ESIGNATURE (bad chunk signature), MG_EINCOMPLETEBODY / MG_EINVALIDREQUEST
 * (bad framing), or the first nonzero return of on_data. */
int mg_chunked_feed(struct mg_chunked *c, const void *data, size_t len);
/* Call at end of body: MG_EINCOMPLETEBODY unless the final 0-size chunk (and trailer) was
 * seen. on_data runs before a chunk's signature is checked (bounded memory): treat the
 * data as unverified until mg_chunked_finish returns 0. The caller compares
 * c->decoded_total with x-amz-decoded-content-length. */
int mg_chunked_finish(struct mg_chunked *c);
void mg_chunked_close(struct mg_chunked *c);

/* (added 2026-11-30) Set mode, key, seed signature (auth->signature), amz_date and scope
 * from a verified SigV4 request, plus the data callback, then mg_chunked_init. Returns 0,
 * or MG_EAUTHHEADER when auth's fields do not fit the struct. */
int mg_chunked_setup(struct mg_chunked *c, enum mg_chunked_mode mode,
                     const struct mg_sigv4_auth *auth, const uint8_t key[32],
                     mg_chunked_data_cb on_data, void *ctx);
/* (added 2026-11-30) Signer side (mgbench, tests): the chunk-signature of one chunk of
 * data chained from prev_sig (64 hex), into out[65]. */
void mg_chunked_chunk_signature(const uint8_t key[32], struct mg_str amz_date,
                                struct mg_str scope, struct mg_str prev_sig, const void *data,
                                size_t len, char out[65]);
/* (added 2026-11-30) The x-amz-trailer-signature over trailer lines given as
 * "name:value\n" text (what the decoder hashes), chained from prev_sig. */
void mg_chunked_trailer_signature(const uint8_t key[32], struct mg_str amz_date,
                                  struct mg_str scope, struct mg_str prev_sig,
                                  struct mg_str trailer_text, char out[65]);

/* ------------------------------------------------------------------ SigV2 */

/* Header form "AWS AKID:base64sig" or query form (AWSAccessKeyId, Signature, Expires). */
struct mg_sigv2_auth {
    struct mg_str access_key;
    struct mg_str signature;  /* base64 */
    int64_t expires;          /* query form: unix time; else -1 */
    int presigned;
};

int mg_sigv2_parse_header(struct mg_str authorization, struct mg_sigv2_auth *out);
int mg_sigv2_parse_query(struct mg_str query, struct mg_arena *arena, struct mg_sigv2_auth *out);
/* StringToSign = Method \n Content-MD5 \n Content-Type \n Date-or-Expires \n
 * CanonicalizedAmzHeaders CanonicalizedResource (with the S3 sub-resources: acl, delete,
 * lifecycle, location, tagging, uploads, uploadId, partNumber, versionId, response-* ...).
 * Returns 0, MG_ESIGNATURE. */
int mg_sigv2_verify(const struct mg_sig_req *req, const struct mg_sigv2_auth *auth,
                    struct mg_str secret);
/* (added 2026-11-30) Clock check: query form, MG_EEXPIRED when now > Expires; header form,
 * the x-amz-date (else Date) header in RFC 1123 form must be within 15 minutes of now
 * (MG_ESKEWED); MG_EAUTHHEADER when neither parses. */
int mg_sigv2_check_time(const struct mg_sig_req *req, const struct mg_sigv2_auth *auth,
                        time_t now);
/* Signer: base64 signature into out (NUL-terminated, <= 64 bytes); date_or_expires is the
 * Date header value or the Expires decimal. */
void mg_sigv2_sign(const struct mg_sig_req *req, struct mg_str secret,
                   struct mg_str date_or_expires, char out[64]);

/* -------------------------------------------------------------- checksums */

enum mg_cksum_algo {
    MG_CKSUM_NONE,
    MG_CKSUM_CRC32,     /* ISA-L crc32_gzip_refl */
    MG_CKSUM_CRC32C,    /* ISA-L crc32_iscsi */
    MG_CKSUM_CRC64NVME, /* ISA-L crc64 (NVMe polynomial, reflected) */
    MG_CKSUM_SHA1,
    MG_CKSUM_SHA256,
    MG_CKSUM_MD5,       /* Content-MD5 and ETags */
};

struct mg_cksum {
    enum mg_cksum_algo algo;
    uint64_t crc;
    void *md; /* EVP_MD_CTX for the hash algorithms */
};

/* "crc32" / "CRC32" / "x-amz-checksum-crc32" -> MG_CKSUM_CRC32; MG_CKSUM_NONE if unknown. */
enum mg_cksum_algo mg_cksum_algo_parse(struct mg_str name);
const char *mg_cksum_algo_name(enum mg_cksum_algo a);  /* "CRC32", "SHA256", ... */
const char *mg_cksum_header_name(enum mg_cksum_algo a); /* "x-amz-checksum-crc32" */
void mg_cksum_init(struct mg_cksum *c, enum mg_cksum_algo a);
void mg_cksum_update(struct mg_cksum *c, const void *data, size_t len);
/* Raw digest into out (<= 32 bytes); returns its length. Resets nothing; call close after. */
size_t mg_cksum_final(struct mg_cksum *c, uint8_t out[32]);
void mg_cksum_close(struct mg_cksum *c);

/* The CRC of A followed by B from crc(A), crc(B) and B's length, for MG_CKSUM_CRC32, CRC32C and
 * CRC64NVME (the values mg_cksum_final writes, big-endian, as integers); 0 for other
 * algorithms. A multipart upload's FULL_OBJECT checksum, from its parts' (cksum.c). */
uint64_t mg_crc_combine(enum mg_cksum_algo a, uint64_t crc_a, uint64_t crc_b, uint64_t len_b);

/* x-amz-checksum-type FULL_OBJECT. A multipart upload created with it keeps this text as its
 * template's cksum_value (an upload has no checksum value of its own; empty: COMPOSITE), which
 * meta/mpu.c reads at complete to store the combined CRC instead of the composite "-N" form. */
#define MG_CKSUM_FULL_OBJECT "FULL_OBJECT"

/* The same over a list: the parts' base64 checksums and sizes in order, the whole's base64 at
 * the end (final: its length, 0 when the algorithm is not a CRC or a part's checksum does not
 * decode to one; out holds at most 12 characters and a NUL). */
struct mg_crc_concat {
    enum mg_cksum_algo algo;
    uint64_t crc;
    int bad;
};
void mg_crc_concat_init(struct mg_crc_concat *c, enum mg_cksum_algo a);
void mg_crc_concat_add(struct mg_crc_concat *c, struct mg_str value, uint64_t size);
size_t mg_crc_concat_final(const struct mg_crc_concat *c, char out[16]);

/* Helpers. */
size_t mg_base64_encode(const uint8_t *in, size_t len, char *out); /* out: 4*ceil(len/3)+1 */
/* Returns decoded length or -1 on invalid input. */
long mg_base64_decode(struct mg_str in, uint8_t *out, size_t cap);
void mg_hex_encode(const uint8_t *in, size_t len, char *out); /* lower hex + NUL */
/* Value of one hex digit (either case), or -1. */
int mg_hex_value(int c);
void mg_sha256(const void *data, size_t len, uint8_t out[32]);
void mg_hmac_sha256(const void *key, size_t klen, const void *data, size_t len, uint8_t out[32]);
/* Constant-time equality of two equal-length strings; 0 if lengths differ. */
int mg_ct_equal(const void *a, const void *b, size_t len);
/* RFC 3986 percent-encoding as S3 signs it: every byte outside A-Z a-z 0-9 - _ . ~ is encoded
 * (and '/' too unless keep_slash). */
void mg_uri_encode(struct mg_str in, int keep_slash, struct mg_buf *out);
/* Percent-decode into out; returns 0 or -1 on a bad escape. '+' is kept literally. */
int mg_uri_decode(struct mg_str in, struct mg_buf *out);

#endif
