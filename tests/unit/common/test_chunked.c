/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aws-chunked decoder of common/chunked.c: the AWS example ("Example
 * calculations: PUT object, chunked upload", S3 API reference), every mode
 * with bodies built by the signer helpers, input split at every byte, and
 * framing and signature errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "tests/unit/common/test_common.h"

struct sink {
    struct mg_buf data;
    int fail_after; /* on_data returns MG_EIO once this many bytes were delivered (-1: never) */
};

static int on_data(void *ctx, const void *p, size_t n)
{
    struct sink *s = ctx;
    mg_buf_append(&s->data, p, n);
    if (s->fail_after >= 0 && s->data.len >= (size_t)s->fail_after)
        return MG_EIO;
    return 0;
}

static const char DATE[] = "20130524T000000Z";
static const char SCOPE[] = "20130524/us-east-1/s3/aws4_request";
static const char SEED[] = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";

static void example_key(uint8_t key[32])
{
    mg_sigv4_signing_key(test_str(TEST_SECRET), test_str("20130524"), test_str("us-east-1"),
                         test_str("s3"), key);
}

/* Encode data as aws-chunked in `mode` with chunks of `chunk` bytes; trailer is a full
 * "name:value" line or NULL. */
static void encode(struct mg_buf *out, enum mg_chunked_mode mode, const char *data, size_t len,
                   size_t chunk, const char *trailer)
{
    uint8_t key[32];
    char prev[65], sig[65];
    example_key(key);
    memcpy(prev, SEED, 65);
    size_t off = 0;
    for (;;) {
        size_t n = len - off < chunk ? len - off : chunk;
        if (mode == MG_CHUNKED_UNSIGNED_TRAILER) {
            mg_buf_appendf(out, "%zx\r\n", n);
        } else {
            mg_chunked_chunk_signature(key, test_str(DATE), test_str(SCOPE), test_str(prev),
                                       data + off, n, sig);
            mg_buf_appendf(out, "%zx;chunk-signature=%s\r\n", n, sig);
            memcpy(prev, sig, 65);
        }
        if (n == 0)
            break;
        mg_buf_append(out, data + off, n);
        mg_buf_append(out, "\r\n", 2);
        off += n;
    }
    if (trailer != NULL) {
        mg_buf_appendf(out, "%s\r\n", trailer);
        if (mode == MG_CHUNKED_SIGNED_TRAILER) {
            char text[256];
            snprintf(text, sizeof(text), "%s\n", trailer);
            mg_chunked_trailer_signature(key, test_str(DATE), test_str(SCOPE), test_str(prev),
                                         test_str(text), sig);
            mg_buf_appendf(out, "x-amz-trailer-signature:%s\r\n", sig);
        }
    }
    mg_buf_append(out, "\r\n", 2);
}

static void dec_init(struct mg_chunked *c, enum mg_chunked_mode mode, struct sink *s)
{
    memset(c, 0, sizeof(*c));
    c->mode = mode;
    example_key(c->key);
    memcpy(c->prev_sig, SEED, 65);
    memcpy(c->amz_date, DATE, 17);
    snprintf(c->scope, sizeof(c->scope), "%s", SCOPE);
    c->on_data = on_data;
    c->ctx = s;
    mg_buf_init(&s->data);
    s->fail_after = -1;
    mg_chunked_init(c);
}

/* Decode body fed in pieces of `step` bytes; returns the first error or finish's result. */
static int decode(enum mg_chunked_mode mode, const char *body, size_t len, size_t step,
                  struct sink *s, struct mg_chunked *c)
{
    dec_init(c, mode, s);
    int rv = 0;
    for (size_t off = 0; off < len && rv == 0; off += step)
        rv = mg_chunked_feed(c, body + off, len - off < step ? len - off : step);
    if (rv == 0)
        rv = mg_chunked_finish(c);
    mg_chunked_close(c);
    return rv;
}

static void test_aws_example(void **state)
{
    static const char *const sigs[] = {
        "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
        "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
        "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    };
    char *data = malloc(66560);
    memset(data, 'a', 66560);
    struct mg_buf body;
    mg_buf_init(&body);
    encode(&body, MG_CHUNKED_SIGNED, data, 66560, 65536, NULL);
    assert_int_equal(body.len, 66824); /* the example's Content-Length */
    for (int i = 0; i < 3; i++)
        assert_non_null(strstr(body.base, sigs[i]));

    /* the seed signature of the example request verifies too */
    static const struct mg_http_hdr h[] = {
        {{"Host", 4}, {"s3.amazonaws.com", 16}},
        {{"x-amz-date", 10}, {"20130524T000000Z", 16}},
        {{"x-amz-storage-class", 19}, {"REDUCED_REDUNDANCY", 18}},
        {{"x-amz-content-sha256", 20}, {"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", 34}},
        {{"Content-Encoding", 16}, {"aws-chunked", 11}},
        {{"x-amz-decoded-content-length", 28}, {"66560", 5}},
        {{"Content-Length", 14}, {"66824", 5}},
    };
    struct mg_sig_req r = {
        test_str("PUT"), test_str("/examplebucket/chunkObject.txt"), test_str(""), h, 7, {NULL, 0}};
    struct mg_sigv4_auth a;
    memset(&a, 0, sizeof(a));
    a.access_key = test_str(TEST_AK);
    a.date = test_str("20130524");
    a.region = test_str("us-east-1");
    a.service = test_str("s3");
    a.signed_headers = test_str("content-encoding;content-length;host;x-amz-content-sha256;"
                                "x-amz-date;x-amz-decoded-content-length;x-amz-storage-class");
    a.signature = test_str(SEED);
    a.amz_date = test_str(DATE);
    a.expires_s = -1;
    uint8_t key[32];
    assert_int_equal(mg_sigv4_verify(&r, &a, test_str(TEST_SECRET),
                                     test_str("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"), key),
                     0);

    /* decode through mg_chunked_setup, one feed */
    struct mg_chunked c;
    struct sink s;
    mg_buf_init(&s.data);
    s.fail_after = -1;
    assert_int_equal(mg_chunked_setup(&c, MG_CHUNKED_SIGNED, &a, key, on_data, &s), 0);
    assert_int_equal(mg_chunked_feed(&c, body.base, body.len), 0);
    assert_int_equal(mg_chunked_finish(&c), 0);
    assert_int_equal(c.decoded_total, 66560);
    assert_int_equal(s.data.len, 66560);
    assert_memory_equal(s.data.base, data, 66560);
    mg_chunked_close(&c);
    mg_buf_close(&s.data);
    mg_buf_close(&body);
    free(data);
}

static void test_modes_split_everywhere(void **state)
{
    char obj[1024];
    test_small_object(obj);
    static const enum mg_chunked_mode modes[] = {MG_CHUNKED_SIGNED, MG_CHUNKED_SIGNED_TRAILER,
                                                 MG_CHUNKED_UNSIGNED_TRAILER};
    for (int m = 0; m < 3; m++) {
        struct mg_buf body;
        mg_buf_init(&body);
        const char *tr = modes[m] == MG_CHUNKED_SIGNED ? NULL : "x-amz-checksum-crc32:5qwIxQ==";
        encode(&body, modes[m], obj, sizeof(obj), 300, tr);
        for (size_t step = 1; step <= body.len; step += step < 20 ? 1 : 97) {
            struct mg_chunked c;
            struct sink s;
            assert_int_equal(decode(modes[m], body.base, body.len, step, &s, &c), 0);
            assert_int_equal(s.data.len, 1024);
            assert_memory_equal(s.data.base, obj, 1024);
            assert_int_equal(c.decoded_total, 1024);
            if (tr != NULL) {
                assert_string_equal(c.trailer_name, "x-amz-checksum-crc32");
                assert_string_equal(c.trailer_value, "5qwIxQ==");
            } else {
                assert_string_equal(c.trailer_name, "");
            }
            mg_buf_close(&s.data);
        }
        mg_buf_close(&body);
    }
}

/* Flipping any byte of a signed body breaks it: data -> MG_ESIGNATURE, framing ->
 * MG_EINVALIDREQUEST or MG_ESIGNATURE, never success. */
static void test_signed_mutations(void **state)
{
    char obj[1024];
    test_small_object(obj);
    static const enum mg_chunked_mode modes[] = {MG_CHUNKED_SIGNED, MG_CHUNKED_SIGNED_TRAILER};
    for (int m = 0; m < 2; m++) {
        struct mg_buf body;
        mg_buf_init(&body);
        encode(&body, modes[m], obj, sizeof(obj), 400,
               modes[m] == MG_CHUNKED_SIGNED ? NULL : "x-amz-checksum-crc32c:9GxN+w==");
        for (size_t i = 0; i < body.len; i++) {
            char saved = body.base[i];
            body.base[i] = (char)(saved == 'a' ? 'b' : 'a');
            struct mg_chunked c;
            struct sink s;
            int rv = decode(modes[m], body.base, body.len, body.len, &s, &c);
            assert_int_not_equal(rv, 0);
            if (rv != MG_ESIGNATURE && rv != MG_EINVALIDREQUEST && rv != MG_EINCOMPLETEBODY)
                fail_msg("offset %zu: rv %d", i, rv);
            mg_buf_close(&s.data);
            body.base[i] = saved;
        }
        mg_buf_close(&body);
    }
}

static void test_errors(void **state)
{
    static const struct {
        enum mg_chunked_mode mode;
        const char *body;
        int rv;
    } cases[] = {
        {MG_CHUNKED_UNSIGNED_TRAILER, "", MG_EINCOMPLETEBODY},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3\r\nabc\r\n", MG_EINCOMPLETEBODY},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3\r\nabc\r\n0\r\n", MG_EINCOMPLETEBODY},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3\r\nabc\r\n0\r\n\r\n", 0},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3\r\nabc\r\n0\r\n\r\nx", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3\nabc\r\n0\r\n\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3\r\nabcd\r\n0\r\n\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "x\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "3z\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "1000000000000000\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "0\r\nnocolon\r\n\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_UNSIGNED_TRAILER, "0\r\nx-amz-trailer-signature:00\r\n\r\n",
         MG_EINVALIDREQUEST},
        {MG_CHUNKED_SIGNED, "3\r\nabc\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_SIGNED, "3;chunk-signature=00\r\nabc\r\n", MG_EINVALIDREQUEST},
        {MG_CHUNKED_SIGNED,
         "3;chunk-signature=0000000000000000000000000000000000000000000000000000000000000000\r\n"
         "abc\r\n",
         MG_ESIGNATURE},
        {MG_CHUNKED_SIGNED_TRAILER,
         "0;chunk-signature=0000000000000000000000000000000000000000000000000000000000000000\r\n",
         MG_ESIGNATURE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mg_chunked c;
        struct sink s;
        int rv = decode(cases[i].mode, cases[i].body, strlen(cases[i].body), 1000, &s, &c);
        if (rv != cases[i].rv)
            fail_msg("case %zu: rv %d, want %d", i, rv, cases[i].rv);
        mg_buf_close(&s.data);
    }
    /* an over-long line is bounded */
    char *line = malloc(4096);
    memset(line, '0', 4095);
    line[4095] = '\0';
    struct mg_chunked c;
    struct sink s;
    assert_int_equal(decode(MG_CHUNKED_UNSIGNED_TRAILER, line, 4095, 4095, &s, &c),
                     MG_EINVALIDREQUEST);
    mg_buf_close(&s.data);
    free(line);
}

static void test_callback_error_and_poison(void **state)
{
    struct mg_chunked c;
    struct sink s;
    dec_init(&c, MG_CHUNKED_UNSIGNED_TRAILER, &s);
    s.fail_after = 2;
    assert_int_equal(mg_chunked_feed(&c, "3\r\nabc\r\n", 8), MG_EIO);
    assert_int_equal(mg_chunked_feed(&c, "0\r\n\r\n", 5), MG_EINVALIDREQUEST);
    assert_int_not_equal(mg_chunked_finish(&c), 0);
    mg_chunked_close(&c);
    mg_buf_close(&s.data);
}

/* Signed trailer without its signature, or with a line after it. */
static void test_signed_trailer_rules(void **state)
{
    struct mg_buf body;
    mg_buf_init(&body);
    encode(&body, MG_CHUNKED_SIGNED_TRAILER, "abc", 3, 64, "x-amz-checksum-crc32:NSRBwg==");
    struct mg_chunked c;
    struct sink s;
    assert_int_equal(decode(MG_CHUNKED_SIGNED_TRAILER, body.base, body.len, 7, &s, &c), 0);
    mg_buf_close(&s.data);
    /* drop the signature line */
    char *sigl = strstr(body.base, "x-amz-trailer-signature:");
    struct mg_buf cut;
    mg_buf_init(&cut);
    mg_buf_append(&cut, body.base, (size_t)(sigl - body.base));
    mg_buf_append(&cut, "\r\n", 2);
    assert_int_equal(decode(MG_CHUNKED_SIGNED_TRAILER, cut.base, cut.len, 7, &s, &c),
                     MG_ESIGNATURE);
    mg_buf_close(&s.data);
    /* a line after the signature */
    cut.len = 0;
    mg_buf_append(&cut, body.base, body.len - 2);
    mg_buf_append(&cut, "x-amz-meta-a:b\r\n\r\n", 18);
    assert_int_equal(decode(MG_CHUNKED_SIGNED_TRAILER, cut.base, cut.len, 7, &s, &c),
                     MG_EINVALIDREQUEST);
    mg_buf_close(&s.data);
    /* a changed trailer value */
    char *v = strstr(body.base, "NSRBwg==");
    v[0] = 'M';
    assert_int_equal(decode(MG_CHUNKED_SIGNED_TRAILER, body.base, body.len, 7, &s, &c),
                     MG_ESIGNATURE);
    mg_buf_close(&s.data);
    mg_buf_close(&cut);
    mg_buf_close(&body);
}

int test_chunked_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aws_example),
        cmocka_unit_test(test_modes_split_everywhere),
        cmocka_unit_test(test_signed_mutations),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_callback_error_and_poison),
        cmocka_unit_test(test_signed_trailer_rules),
    };
    return cmocka_run_group_tests_name("common/chunked", tests, NULL, NULL);
}
