/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals shared by common/sig.c (SigV4, SigV2), common/chunked.c
 * (aws-chunked) and common/cksum.c (hashes, encodings). Not a public header:
 * include common/sig.h from other modules.
 *
 * The signature path hashes with OpenSSL's low-level SHA256_CTX on the stack
 * instead of EVP: in OpenSSL 3.0 (Debian 12 ships 3.0.x) every
 * EVP_DigestInit frees and re-creates the provider context, i.e. one
 * malloc/free per hash, and a SigV4 verification runs up to six hashes (more
 * per aws-chunked chunk). The low-level functions are deprecated in 3.0 but
 * present; OPENSSL_SUPPRESS_DEPRECATED keeps -Werror quiet. This header must
 * be the first include of the files that use it.
 */
#ifndef MG_COMMON_SIG_INT_H
#define MG_COMMON_SIG_INT_H

#ifndef OPENSSL_SUPPRESS_DEPRECATED
#define OPENSSL_SUPPRESS_DEPRECATED
#endif
#include <openssl/sha.h>

#include <stddef.h>
#include <stdint.h>

#include "common/sig.h"

/* HMAC-SHA256 as two chained SHA-256 contexts (RFC 2104), no allocation. */
struct mg__hmac {
    SHA256_CTX inner; /* H((K ^ ipad) || m) in progress */
    SHA256_CTX outer; /* H((K ^ opad) || ...) keyed, waiting for the inner digest */
};

void mg__hmac_init(struct mg__hmac *h, const void *key, size_t klen);
void mg__hmac_update(struct mg__hmac *h, const void *data, size_t len);
void mg__hmac_final(struct mg__hmac *h, uint8_t out[32]);

/* Byte class tables (cksum.c): hex digit value or -1; 1 for RFC 3986 unreserved bytes. */
extern const signed char mg__hex_tab[256];
extern const unsigned char mg__unreserved_tab[256];

/* Value of a hex digit, or -1. */
static inline int mg__hexval(int c)
{
    return mg__hex_tab[(unsigned char)c];
}

/* 1 when c is an RFC 3986 unreserved byte (A-Z a-z 0-9 - _ . ~). */
static inline int mg__unreserved(unsigned char c)
{
    return mg__unreserved_tab[c];
}
/* S3 canonical form of one URI component: percent-decode `in` (a bad escape is taken
 * literally), then percent-encode every byte that is not unreserved ('/' kept when
 * keep_slash). Appends to out. */
void mg__uri_canon(struct mg_str in, int keep_slash, struct mg_buf *out);
/* Percent-decode in into out (room for in.len bytes); returns the decoded length or -1 on
 * a bad escape. '+' is kept. */
long mg__uri_decode_raw(struct mg_str in, char *out);

/* Case-insensitive equality of two byte strings. */
int mg__strieq(struct mg_str a, struct mg_str b);
/* Trim leading and trailing spaces and tabs. */
struct mg_str mg__trim(struct mg_str s);

/* Parse "yyyymmddThhmmssZ" into Unix time; 0 or -1. */
int mg__time_parse_iso8601(struct mg_str s, int64_t *out);
/* Parse an RFC 1123 date "Mon, 30 Nov 2026 16:00:00 GMT" into Unix time; 0 or -1. */
int mg__time_parse_rfc1123(struct mg_str s, int64_t *out);

#endif
