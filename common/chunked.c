/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aws-chunked body decoder (S3 "Signature calculations for the
 * Authorization header: transferring payload in multiple chunks" and "...
 * including trailing headers"). The body, with HTTP chunked framing already
 * removed, is a sequence of
 *
 *     hex-size[;chunk-signature=64hex]\r\n  data  \r\n
 *
 * ending with a zero-size chunk, then either an empty line or trailer lines
 * ("x-amz-checksum-crc32:base64\r\n", in the signed-trailer mode followed by
 * "x-amz-trailer-signature:64hex\r\n") and an empty line. It is a byte-stream
 * state machine: framing may be split anywhere between feeds (aws-sdk-js-v3
 * sends size line, data and CRLF as separate HTTP chunks), and the only thing
 * it buffers is one line of at most sizeof(c->line) bytes.
 */
#include "common/sig_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"

enum {
    ST_SIZE,            /* reading a chunk-size line */
    ST_DATA,            /* chunk_left data bytes to go */
    ST_DATA_CR,         /* expecting the CR after data */
    ST_DATA_LF,         /* expecting the LF after data */
    ST_TRAILER,         /* reading trailer lines until an empty one */
    ST_TRAILER_PENDING, /* signed trailer: lines hashed, x-amz-trailer-signature due */
    ST_TRAILER_END,     /* signed trailer verified: only the empty line may follow */
    ST_DONE,            /* final empty line seen */
    ST_ERROR,           /* poisoned: every later feed fails */
};

static void sig_prefix(struct mg__hmac *h, const uint8_t key[32], const char *algo,
                       struct mg_str amz_date, struct mg_str scope, struct mg_str prev_sig)
{
    mg__hmac_init(h, key, 32);
    mg__hmac_update(h, algo, strlen(algo));
    mg__hmac_update(h, amz_date.base, amz_date.len);
    mg__hmac_update(h, "\n", 1);
    mg__hmac_update(h, scope.base, scope.len);
    mg__hmac_update(h, "\n", 1);
    mg__hmac_update(h, prev_sig.base, prev_sig.len);
    mg__hmac_update(h, "\n", 1);
}

static void sig_finish(struct mg__hmac *h, const uint8_t digest[32], char out[65])
{
    char hex[65];
    uint8_t mac[32];
    mg_hex_encode(digest, 32, hex);
    mg__hmac_update(h, hex, 64);
    mg__hmac_final(h, mac);
    mg_hex_encode(mac, 32, out);
}

static void chunk_sig(const uint8_t key[32], struct mg_str amz_date, struct mg_str scope,
                      struct mg_str prev_sig, const uint8_t data_sha[32], char out[65])
{
    struct mg__hmac h;
    sig_prefix(&h, key, "AWS4-HMAC-SHA256-PAYLOAD\n", amz_date, scope, prev_sig);
    mg__hmac_update(&h, MG_EMPTY_SHA256 "\n", 65);
    sig_finish(&h, data_sha, out);
}

void mg_chunked_chunk_signature(const uint8_t key[32], struct mg_str amz_date, struct mg_str scope,
                                struct mg_str prev_sig, const void *data, size_t len, char out[65])
{
    uint8_t d[32];
    mg_sha256(data, len, d);
    chunk_sig(key, amz_date, scope, prev_sig, d, out);
}

static void trailer_sig(const uint8_t key[32], struct mg_str amz_date, struct mg_str scope,
                        struct mg_str prev_sig, const uint8_t text_sha[32], char out[65])
{
    struct mg__hmac h;
    sig_prefix(&h, key, "AWS4-HMAC-SHA256-TRAILER\n", amz_date, scope, prev_sig);
    sig_finish(&h, text_sha, out);
}

void mg_chunked_trailer_signature(const uint8_t key[32], struct mg_str amz_date,
                                  struct mg_str scope, struct mg_str prev_sig,
                                  struct mg_str trailer_text, char out[65])
{
    uint8_t d[32];
    mg_sha256(trailer_text.base, trailer_text.len, d);
    trailer_sig(key, amz_date, scope, prev_sig, d, out);
}

static struct mg_str cstr(const char *s)
{
    struct mg_str r = {s, strlen(s)};
    return r;
}

static int is_signed(const struct mg_chunked *c)
{
    return c->mode != MG_CHUNKED_UNSIGNED_TRAILER;
}

void mg_chunked_init(struct mg_chunked *c)
{
    assert(c->on_data != NULL);
    c->state = ST_SIZE;
    c->chunk_left = 0;
    c->decoded_total = 0;
    c->line_len = 0;
    c->chunk_sig[0] = '\0';
    c->trailer_name[0] = '\0';
    c->trailer_value[0] = '\0';
    c->prev_sig[64] = '\0';
    c->amz_date[16] = '\0';
    c->scope[sizeof(c->scope) - 1] = '\0';
    c->sha_ctx = mg_malloc(sizeof(SHA256_CTX));
    SHA256_Init(c->sha_ctx);
}

int mg_chunked_setup(struct mg_chunked *c, enum mg_chunked_mode mode,
                     const struct mg_sigv4_auth *auth, const uint8_t key[32],
                     mg_chunked_data_cb on_data, void *ctx)
{
    size_t scope_len = auth->date.len + auth->region.len + auth->service.len + 15;
    if (auth->signature.len != 64 || auth->amz_date.len != 16 || scope_len >= sizeof(c->scope))
        return MG_EAUTHHEADER;
    c->mode = mode;
    memcpy(c->key, key, 32);
    memcpy(c->prev_sig, auth->signature.base, 64);
    c->prev_sig[64] = '\0';
    memcpy(c->amz_date, auth->amz_date.base, 16);
    c->amz_date[16] = '\0';
    snprintf(c->scope, sizeof(c->scope), "%.*s/%.*s/%.*s/aws4_request", (int)auth->date.len,
             auth->date.base, (int)auth->region.len, auth->region.base, (int)auth->service.len,
             auth->service.base);
    c->on_data = on_data;
    c->ctx = ctx;
    mg_chunked_init(c);
    return 0;
}

void mg_chunked_close(struct mg_chunked *c)
{
    mg_free(c->sha_ctx);
    c->sha_ctx = NULL;
}

static int fail(struct mg_chunked *c, int rv)
{
    c->state = ST_ERROR;
    return rv;
}

/* Verify the signature of the chunk whose data hash is in sha_ctx; chain it. */
static int check_chunk_sig(struct mg_chunked *c)
{
    uint8_t d[32];
    char want[65];
    SHA256_Final(d, c->sha_ctx);
    chunk_sig(c->key, cstr(c->amz_date), cstr(c->scope), cstr(c->prev_sig), d, want);
    if (!mg_ct_equal(want, c->chunk_sig, 64))
        return MG_ESIGNATURE;
    memcpy(c->prev_sig, c->chunk_sig, 65);
    SHA256_Init(c->sha_ctx); /* next: next chunk's data, or the trailer text */
    return 0;
}

/* "hex-size[;chunk-signature=64hex]" (CRLF stripped). */
static int on_size_line(struct mg_chunked *c, const char *l, size_t n)
{
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n && mg__hexval(l[i]) >= 0; i++) {
        if (i >= 15)
            return MG_EINVALIDREQUEST; /* >= 2^60 bytes: nonsense */
        size = size << 4 | (uint64_t)mg__hexval(l[i]);
    }
    if (i == 0)
        return MG_EINVALIDREQUEST;
    static const char ext[] = ";chunk-signature=";
    if (is_signed(c)) {
        if (n - i != sizeof(ext) - 1 + 64 || memcmp(l + i, ext, sizeof(ext) - 1) != 0)
            return MG_EINVALIDREQUEST;
        memcpy(c->chunk_sig, l + i + sizeof(ext) - 1, 64);
        c->chunk_sig[64] = '\0';
    } else if (i != n && l[i] != ';') {
        return MG_EINVALIDREQUEST;
    }
    c->chunk_left = size;
    if (size > 0) {
        c->state = ST_DATA;
        return 0;
    }
    if (is_signed(c)) {
        int rv = check_chunk_sig(c); /* the final chunk signs the empty string */
        if (rv != 0)
            return rv;
    }
    c->state = ST_TRAILER;
    return 0;
}

static void copy_lower(char *dst, size_t cap, const char *src, size_t n)
{
    size_t k = n < cap - 1 ? n : cap - 1;
    for (size_t i = 0; i < k; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] - 'A' + 'a' : src[i]);
    dst[k] = '\0';
}

/* One trailer line "name:value" (CRLF stripped); an empty line ends the body. In the
 * signed-trailer mode the lines are hashed as "name:value\n" (name lower case) until
 * "x-amz-trailer-signature", after which only the empty line may come. */
static int on_trailer_line(struct mg_chunked *c, const char *l, size_t n)
{
    if (n == 0) {
        if (c->mode == MG_CHUNKED_SIGNED_TRAILER && c->state != ST_TRAILER_END)
            return MG_ESIGNATURE; /* no (or no final) x-amz-trailer-signature */
        c->state = ST_DONE;
        return 0;
    }
    if (c->mode == MG_CHUNKED_SIGNED || c->state == ST_TRAILER_END)
        return MG_EINVALIDREQUEST;
    const char *colon = memchr(l, ':', n);
    if (colon == NULL || colon == l)
        return MG_EINVALIDREQUEST;
    struct mg_str name = {l, (size_t)(colon - l)};
    struct mg_str value = mg__trim((struct mg_str){colon + 1, n - name.len - 1});
    if (mg__strieq(name, cstr("x-amz-trailer-signature"))) {
        if (c->mode != MG_CHUNKED_SIGNED_TRAILER || value.len != 64)
            return MG_EINVALIDREQUEST;
        uint8_t d[32];
        char want[65];
        SHA256_Final(d, c->sha_ctx);
        trailer_sig(c->key, cstr(c->amz_date), cstr(c->scope), cstr(c->prev_sig), d, want);
        if (!mg_ct_equal(want, value.base, 64))
            return MG_ESIGNATURE;
        c->state = ST_TRAILER_END;
        return 0;
    }
    if (name.len >= sizeof(c->trailer_name) || value.len >= sizeof(c->trailer_value))
        return MG_EINVALIDREQUEST;
    if (name.len > 15 && strncasecmp(name.base, "x-amz-checksum-", 15) == 0) {
        copy_lower(c->trailer_name, sizeof(c->trailer_name), name.base, name.len);
        memcpy(c->trailer_value, value.base, value.len);
        c->trailer_value[value.len] = '\0';
    }
    if (c->mode == MG_CHUNKED_SIGNED_TRAILER) {
        char lname[sizeof(c->trailer_name)];
        copy_lower(lname, sizeof(lname), name.base, name.len);
        SHA256_Update(c->sha_ctx, lname, name.len);
        SHA256_Update(c->sha_ctx, ":", 1);
        SHA256_Update(c->sha_ctx, value.base, value.len);
        SHA256_Update(c->sha_ctx, "\n", 1);
        c->state = ST_TRAILER_PENDING;
    }
    return 0;
}

/* Accumulate one CRLF-terminated line; returns 1 when c->line holds a full line (CRLF
 * stripped, length in c->line_len), 0 when more input is needed, <0 on an error. */
static int take_line(struct mg_chunked *c, const char **p, const char *end)
{
    while (*p < end) {
        char ch = *(*p)++;
        if (ch == '\n') {
            if (c->line_len == 0 || c->line[c->line_len - 1] != '\r')
                return -1;
            c->line_len--;
            return 1;
        }
        if (c->line_len == sizeof(c->line))
            return -1;
        c->line[c->line_len++] = ch;
    }
    return 0;
}

int mg_chunked_feed(struct mg_chunked *c, const void *data, size_t len)
{
    const char *p = data, *end = p + len;
    int rv;
    if (c->state == ST_ERROR)
        return MG_EINVALIDREQUEST;
    while (p < end) {
        switch (c->state) {
        case ST_SIZE:
        case ST_TRAILER:
        case ST_TRAILER_PENDING:
        case ST_TRAILER_END: {
            int got = take_line(c, &p, end);
            if (got < 0)
                return fail(c, MG_EINVALIDREQUEST);
            if (got == 0)
                return 0;
            size_t n = c->line_len;
            c->line_len = 0;
            rv = c->state == ST_SIZE ? on_size_line(c, c->line, n) : on_trailer_line(c, c->line, n);
            if (rv != 0)
                return fail(c, rv);
            break;
        }
        case ST_DATA: {
            size_t n = (size_t)(end - p) < c->chunk_left ? (size_t)(end - p) : c->chunk_left;
            if (is_signed(c))
                SHA256_Update(c->sha_ctx, p, n);
            c->chunk_left -= n;
            c->decoded_total += n;
            rv = c->on_data(c->ctx, p, n);
            if (rv != 0)
                return fail(c, rv);
            p += n;
            if (c->chunk_left == 0) {
                if (is_signed(c) && (rv = check_chunk_sig(c)) != 0)
                    return fail(c, rv);
                c->state = ST_DATA_CR;
            }
            break;
        }
        case ST_DATA_CR:
            if (*p++ != '\r')
                return fail(c, MG_EINVALIDREQUEST);
            c->state = ST_DATA_LF;
            break;
        case ST_DATA_LF:
            if (*p++ != '\n')
                return fail(c, MG_EINVALIDREQUEST);
            c->state = ST_SIZE;
            break;
        default: /* ST_DONE: nothing may follow the final empty line */
            return fail(c, MG_EINVALIDREQUEST);
        }
    }
    return 0;
}

int mg_chunked_finish(struct mg_chunked *c)
{
    if (c->state == ST_DONE)
        return 0;
    return c->state == ST_ERROR ? MG_EINVALIDREQUEST : MG_EINCOMPLETEBODY;
}
