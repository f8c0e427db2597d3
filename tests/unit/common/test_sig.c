/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SigV4 / SigV2 of common/sig.c against the published AWS examples (S3 API
 * reference "Examples: Signature Calculations in AWS Signature Version 4"
 * and "Signing and authenticating REST requests" for V2), plus the parsers,
 * the clock checks and presign expiry.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "tests/unit/common/test_common.h"

#define HDR(n, v)                                                                                  \
    {                                                                                              \
        {n, sizeof(n) - 1},                                                                        \
        {                                                                                          \
            v, sizeof(v) - 1                                                                       \
        }                                                                                          \
    }

static const struct mg_http_hdr get_hdrs[] = {
    HDR("Host", "examplebucket.s3.amazonaws.com"),
    HDR("Range", "bytes=0-9"),
    HDR("x-amz-content-sha256", MG_EMPTY_SHA256),
    HDR("x-amz-date", "20130524T000000Z"),
};

static struct mg_sig_req get_req(void)
{
    struct mg_sig_req r = {test_str("GET"), test_str("/test.txt"), test_str(""), get_hdrs, 4,
                           {NULL, 0}};
    return r;
}

/* AWS example "GET Object": Authorization header. */
static void test_v4_header_aws_example(void **state)
{
    static const char authz[] =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
    struct mg_sig_req r = get_req();
    struct mg_sigv4_auth a;
    assert_int_equal(mg_sigv4_parse_header(test_str(authz), &a), 0);
    a.amz_date = test_str("20130524T000000Z");
    uint8_t key[32];
    assert_int_equal(mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str(MG_EMPTY_SHA256), key),
                     0);

    struct mg_buf out;
    mg_buf_init(&out);
    mg_sigv4_sign_header(&r, test_str(TEST_AK), test_str(TEST_SECRET), test_str("us-east-1"),
                         test_str("20130524T000000Z"),
                         test_str("host;range;x-amz-content-sha256;x-amz-date"),
                         test_str(MG_EMPTY_SHA256), &out);
    assert_non_null(strstr(out.base, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6"));
    mg_buf_close(&out);

    /* parse_request finds the header form and the date */
    struct mg_http_hdr h[5];
    memcpy(h, get_hdrs, sizeof(get_hdrs));
    h[4].name = test_str("Authorization");
    h[4].value = test_str(authz);
    r.headers = h;
    r.nheaders = 5;
    struct mg_arena arena;
    mg_arena_init(&arena);
    assert_int_equal(mg_sigv4_parse_request(&r, &arena, &a), 0);
    assert_int_equal(a.amz_date.len, 16);
    assert_int_equal(mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str(MG_EMPTY_SHA256), key),
                     0);
    /* wrong secret, wrong payload hash, a missing signed header */
    assert_int_equal(mg_sigv4_verify(&r, &a, test_str("x"), test_str(MG_EMPTY_SHA256), key),
                     MG_ESIGNATURE);
    assert_int_equal(
        mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str("UNSIGNED-PAYLOAD"), key),
        MG_ESIGNATURE);
    /* an x-amz-* header that is not signed (S3: "headers ... which were not signed") */
    h[4].name = test_str("X-Amz-Acl");
    h[4].value = test_str("public-read");
    assert_int_equal(mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str(MG_EMPTY_SHA256), key),
                     MG_EACCESSDENIED);
    /* host not signed */
    struct mg_sigv4_auth nohost = a;
    nohost.signed_headers = test_str("range;x-amz-content-sha256;x-amz-date");
    assert_int_equal(
        mg_sigv4_verify(&r, &nohost, test_str(TEST_SECRET), test_str(MG_EMPTY_SHA256), key),
        MG_EAUTHHEADER);
    r.nheaders = 1;
    assert_int_equal(mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str(MG_EMPTY_SHA256), key),
                     MG_EAUTHHEADER);
    mg_arena_close(&arena);
}

/* AWS example "presigned URL" (query string authentication). */
static void test_v4_presign_aws_example(void **state)
{
    static const char sig[] = "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    struct mg_sig_req r = get_req();
    r.nheaders = 1; /* Host only */
    struct mg_buf q;
    mg_buf_init(&q);
    mg_sigv4_presign(&r, test_str(TEST_AK), test_str(TEST_SECRET), test_str("us-east-1"),
                     test_str("20130524T000000Z"), 86400, &q);
    assert_non_null(strstr(q.base, sig));

    struct mg_arena arena;
    mg_arena_init(&arena);
    struct mg_sigv4_auth a;
    r.query = (struct mg_str){q.base, q.len};
    assert_int_equal(mg_sigv4_parse_request(&r, &arena, &a), 0);
    assert_true(a.presigned);
    assert_int_equal(a.expires_s, 86400);
    uint8_t key[32];
    assert_int_equal(
        mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str("UNSIGNED-PAYLOAD"), key), 0);
    /* an Authorization header as well: only one auth mechanism allowed */
    struct mg_http_hdr two[2] = {get_hdrs[0], {{"Authorization", 13}, {"AWS a:b", 7}}};
    r.headers = two;
    r.nheaders = 2;
    assert_int_equal(mg_sigv4_parse_request(&r, &arena, &a), MG_EINVALIDARGUMENT);
    two[1].value = test_str("AWS4-HMAC-SHA256 Credential=x");
    assert_int_equal(mg_sigv4_parse_request(&r, &arena, &a), MG_EINVALIDARGUMENT);
    r.query = test_str("a=b");
    assert_int_equal(mg_sigv4_parse_request(&r, &arena, &a), MG_EAUTHHEADER);
    r.nheaders = 1;
    assert_int_equal(mg_sigv4_parse_request(&r, &arena, &a), MG_ENOTFOUND);
    mg_arena_close(&arena);
    mg_buf_close(&q);
}

static void test_signing_key_cache(void **state)
{
    uint8_t k1[32], k2[32], k3[32];
    mg_sigv4_signing_key(test_str(TEST_SECRET), test_str("20130524"), test_str("us-east-1"),
                         test_str("s3"), k1);
    mg_sigv4_signing_key(test_str(TEST_SECRET), test_str("20130524"), test_str("us-east-1"),
                         test_str("s3"), k2); /* cached */
    assert_memory_equal(k1, k2, 32);
    mg_sigv4_signing_key(test_str(TEST_SECRET), test_str("20130525"), test_str("us-east-1"),
                         test_str("s3"), k3);
    assert_memory_not_equal(k1, k3, 32);
    /* Many distinct keys through the small cache, then the first again. */
    for (int i = 0; i < 100; i++) {
        char sec[32];
        snprintf(sec, sizeof(sec), "secret%d", i);
        mg_sigv4_signing_key(test_str(sec), test_str("20130524"), test_str("us-east-1"),
                             test_str("s3"), k3);
    }
    mg_sigv4_signing_key(test_str(TEST_SECRET), test_str("20130524"), test_str("us-east-1"),
                         test_str("s3"), k2);
    assert_memory_equal(k1, k2, 32);
    /* A long secret (not cached) still derives the same key twice. */
    char longsec[300];
    memset(longsec, 'k', sizeof(longsec) - 1);
    longsec[sizeof(longsec) - 1] = '\0';
    mg_sigv4_signing_key(test_str(longsec), test_str("20130524"), test_str("us-east-1"),
                         test_str("s3"), k2);
    mg_sigv4_signing_key(test_str(longsec), test_str("20130524"), test_str("us-east-1"),
                         test_str("s3"), k3);
    assert_memory_equal(k2, k3, 32);
}

/* Threads verify and derive keys at once: per-thread caches and scratch never mix. */
static void *verify_loop(void *arg)
{
    long id = (long)arg;
    struct mg_sig_req r = get_req();
    struct mg_sigv4_auth a;
    uint8_t key[32];
    static const char authz[] =
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
    if (mg_sigv4_parse_header(test_str(authz), &a) != 0)
        return (void *)1;
    a.amz_date = test_str("20130524T000000Z");
    for (int i = 0; i < 2000; i++) {
        char date[16];
        snprintf(date, sizeof(date), "201305%02d", (int)((i + id) % 28) + 1);
        mg_sigv4_signing_key(test_str(TEST_SECRET), test_str(date), test_str("us-east-1"),
                             test_str("s3"), key);
        if (mg_sigv4_verify(&r, &a, test_str(TEST_SECRET), test_str(MG_EMPTY_SHA256), key) != 0)
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void **state)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, verify_loop, (void *)i), 0);
    for (int i = 0; i < 4; i++) {
        void *rv;
        assert_int_equal(pthread_join(t[i], &rv), 0);
        assert_null(rv);
    }
}

static void test_v4_parse_header_errors(void **state)
{
    static const char *const bad[] = {
        "",
        "AWS4-HMAC-SHA256",
        "AWS4-HMAC-SHA1 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/2013052/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request/x, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb4",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=Host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41, Signature=x",
        "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
        "Signature=g0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    };
    struct mg_sigv4_auth a;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mg_sigv4_parse_header(test_str(bad[i]), &a), MG_EAUTHHEADER);
    /* SignedHeaders is bounded: 128 names parse, 129 do not */
    char big[2048];
    for (int names = 128; names <= 129; names++) {
        int n = snprintf(big, sizeof(big),
                         "AWS4-HMAC-SHA256 Credential=AK/20130524/us-east-1/s3/"
                         "aws4_request, SignedHeaders=host");
        for (int i = 1; i < names; i++)
            n += snprintf(big + n, sizeof(big) - (size_t)n, ";h%d", i);
        snprintf(big + n, sizeof(big) - (size_t)n, ", Signature=%064d", 0);
        assert_int_equal(mg_sigv4_parse_header(test_str(big), &a),
                         names <= 128 ? 0 : MG_EAUTHHEADER);
    }
    /* no spaces after commas (s3cmd, minio-go), any order */
    assert_int_equal(
        mg_sigv4_parse_header(
            test_str("AWS4-HMAC-SHA256 SignedHeaders=host;x-amz-date,Signature="
                     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41,"
                     "Credential=AK/20130524/eu-west-1/s3/aws4_request"),
            &a),
        0);
    assert_true(a.region.len == 9 && memcmp(a.region.base, "eu-west-1", 9) == 0);
    assert_int_equal(a.expires_s, -1);
    assert_false(a.presigned);
}

static int parse_q(const char *q, struct mg_sigv4_auth *a)
{
    struct mg_arena arena;
    mg_arena_init(&arena);
    int rv = mg_sigv4_parse_query(test_str(q), &arena, a);
    mg_arena_close(&arena);
    return rv;
}

#define Q_CRED "X-Amz-Credential=AK%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
#define Q_SIG "X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
#define Q_REST "X-Amz-Date=20130524T000000Z&X-Amz-SignedHeaders=host&" Q_SIG

static void test_v4_parse_query(void **state)
{
    struct mg_sigv4_auth a;
    assert_int_equal(
        parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA256&" Q_CRED "&X-Amz-Expires=604800&" Q_REST, &a), 0);
    assert_int_equal(a.expires_s, 604800);
    assert_int_equal(
        parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA256&" Q_CRED "&X-Amz-Expires=604801&" Q_REST, &a),
        MG_EAUTHQUERY);
    assert_int_equal(
        parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA256&" Q_CRED "&X-Amz-Expires=-1&" Q_REST, &a),
        MG_EAUTHQUERY);
    assert_int_equal(parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA256&" Q_CRED "&" Q_REST, &a),
                     MG_EAUTHQUERY); /* no X-Amz-Expires */
    assert_int_equal(
        parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA1&" Q_CRED "&X-Amz-Expires=60&" Q_REST, &a),
        MG_EAUTHQUERY);
    assert_int_equal(parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA256&" Q_CRED "&" Q_CRED
                             "&X-Amz-Expires=60&" Q_REST,
                             &a),
                     MG_EAUTHQUERY); /* duplicate */
    assert_int_equal(parse_q("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F2013&"
                             "X-Amz-Expires=60&" Q_REST,
                             &a),
                     MG_EAUTHQUERY);
    assert_int_equal(parse_q("", &a), MG_EAUTHQUERY);
}

static void test_v4_clock(void **state)
{
    struct mg_sigv4_auth a;
    memset(&a, 0, sizeof(a));
    a.date = test_str("20130524");
    a.amz_date = test_str("20130524T000000Z");
    a.expires_s = -1;
    const time_t t = 1369353600; /* 2013-05-24T00:00:00Z */
    assert_int_equal(mg_sigv4_check_time(&a, t), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t + 900), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t - 900), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t + 901), MG_ESKEWED);
    assert_int_equal(mg_sigv4_check_time(&a, t - 901), MG_ESKEWED);
    a.amz_date = test_str("20130524T000000");
    assert_int_equal(mg_sigv4_check_time(&a, t), MG_EAUTHHEADER);
    a.amz_date = test_str("20130532T000000Z");
    assert_int_equal(mg_sigv4_check_time(&a, t), MG_EAUTHHEADER);
    a.amz_date = test_str("20130525T000000Z"); /* scope date is another day */
    assert_int_equal(mg_sigv4_check_time(&a, t + 86400), MG_EAUTHHEADER);

    /* presigned: valid from amz_date - 15 min to amz_date + expires */
    a.amz_date = test_str("20130524T000000Z");
    a.presigned = 1;
    a.expires_s = 3600;
    assert_int_equal(mg_sigv4_check_time(&a, t), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t + 3600), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t + 3601), MG_EEXPIRED);
    assert_int_equal(mg_sigv4_check_time(&a, t - 900), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t - 901), MG_EEXPIRED);
    a.expires_s = 604800;
    assert_int_equal(mg_sigv4_check_time(&a, t + 604800), 0);
    assert_int_equal(mg_sigv4_check_time(&a, t + 604801), MG_EEXPIRED);
    a.date = test_str("20130523");
    assert_int_equal(mg_sigv4_check_time(&a, t), MG_EAUTHQUERY);
}

/* AWS V2 example "Object GET" (virtual-host style, bucket johnsmith). */
static void test_v2_aws_example(void **state)
{
    static const struct mg_http_hdr h[] = {
        HDR("Host", "johnsmith.s3.amazonaws.com"),
        HDR("Date", "Tue, 27 Mar 2007 19:36:42 +0000"),
        HDR("Authorization", "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU="),
    };
    struct mg_sig_req r = {test_str("GET"),      test_str("/photos/puppy.jpg"), test_str(""), h, 3,
                           test_str("johnsmith")};
    struct mg_sigv2_auth a;
    assert_int_equal(mg_sigv2_parse_header(h[2].value, &a), 0);
    assert_int_equal(a.access_key.len, 20);
    char sig[64];
    mg_sigv2_sign(&r, test_str(TEST_SECRET), test_str("Tue, 27 Mar 2007 19:36:42 +0000"), sig);
    assert_string_equal(sig, "bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), 0);
    r.v2_bucket = test_str("");
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), MG_ESIGNATURE);
    r.v2_bucket = test_str("johnsmith");
    assert_int_equal(mg_sigv2_check_time(&r, &a, 1175024202), 0);
    assert_int_equal(mg_sigv2_check_time(&r, &a, 1175024202 + 901), MG_ESKEWED);
    assert_int_equal(mg_sigv2_parse_header(test_str("AWS AKID"), &a), MG_EAUTHHEADER);
    assert_int_equal(mg_sigv2_parse_header(test_str("AWS :sig"), &a), MG_EAUTHHEADER);
    assert_int_equal(mg_sigv2_parse_header(test_str("AWS4 a:b"), &a), MG_EAUTHHEADER);
}

/* V2 sub-resources and amz headers in the string to sign (sign/verify round trip and
 * sensitivity). */
static void test_v2_canonical(void **state)
{
    struct mg_http_hdr h[] = {
        HDR("Host", "127.0.0.1:9000"),
        HDR("X-Amz-Meta-B", "  two  "),
        HDR("x-amz-date", "Tue, 27 Mar 2007 19:36:42 +0000"),
        HDR("x-amz-meta-a", "one"),
        HDR("Content-Type", "text/plain"),
        HDR("X-AMZ-META-B", "three"),
    };
    struct mg_sig_req r = {test_str("PUT"),
                           test_str("/b/k%20y"),
                           test_str("uploadId=x%2By&partNumber=2&foo=bar"),
                           h,
                           6,
                           {NULL, 0}};
    char sig[64], sig2[64];
    mg_sigv2_sign(&r, test_str(TEST_SECRET), test_str(""), sig);
    struct mg_sigv2_auth a = {test_str(TEST_AK), test_str(sig), -1, 0};
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), 0);
    r.query = test_str("partNumber=2&uploadId=x%2By"); /* unsigned foo, order: same */
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), 0);
    r.query = test_str("partNumber=3&uploadId=x%2By");
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), MG_ESIGNATURE);
    r.query = test_str("partNumber=2&uploadId=x%2By");
    h[5].value = test_str("four");
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), MG_ESIGNATURE);
    h[5].value = test_str("three");
    r.nheaders = 5; /* drop a repeated amz header */
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), MG_ESIGNATURE);
    r.nheaders = 6;
    mg_sigv2_sign(&r, test_str("other"), test_str(""), sig2);
    assert_string_not_equal(sig, sig2);
}

/* boto3 1.43 generate_presigned_url('list_objects_v2', Bucket='bk2', Prefix='a/'): botocore
 * signs "GET\n\n\n1796065148\n/bk2?list-type=2" (its auth path), other parameters not. */
static void test_v2_presigned_list_v2(void **state)
{
    static const struct mg_http_hdr h[] = {HDR("Host", "127.0.0.1:9100")};
    struct mg_arena arena;
    mg_arena_init(&arena);
    struct mg_sig_req r = {test_str("GET"), test_str("/bk2"),
                           test_str("list-type=2&prefix=a%2F&encoding-type=url&AWSAccessKeyId="
                                    "AKIAIOSFODNN7EXAMPLE&Signature=n%2BFhOBFi0YXCjtNdWckHoVEvmRY%3D&"
                                    "Expires=1796065148"),
                           h, 1, {NULL, 0}};
    struct mg_sigv2_auth a;
    assert_int_equal(mg_sigv2_parse_query(r.query, &arena, &a), 0);
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), 0);
    r.query = test_str("list-type=1&prefix=a%2F&encoding-type=url&AWSAccessKeyId="
                       "AKIAIOSFODNN7EXAMPLE&Signature=n%2BFhOBFi0YXCjtNdWckHoVEvmRY%3D&"
                       "Expires=1796065148");
    assert_int_equal(mg_sigv2_verify(&r, &a, test_str(TEST_SECRET)), MG_ESIGNATURE);
    mg_arena_close(&arena);
}

static void test_v2_query(void **state)
{
    struct mg_arena arena;
    mg_arena_init(&arena);
    struct mg_sigv2_auth a;
    assert_int_equal(mg_sigv2_parse_query(test_str("AWSAccessKeyId=AK&Signature=nC%2Bs1Z%3D&"
                                                   "Expires=1796058026"),
                                          &arena, &a),
                     0);
    assert_true(a.presigned);
    assert_int_equal(a.expires, 1796058026);
    assert_int_equal(a.signature.len, 7);
    assert_memory_equal(a.signature.base, "nC+s1Z=", 7);
    struct mg_sig_req r;
    memset(&r, 0, sizeof(r));
    assert_int_equal(mg_sigv2_check_time(&r, &a, 1796058026), 0);
    assert_int_equal(mg_sigv2_check_time(&r, &a, 1796058027), MG_EEXPIRED);
    assert_int_equal(mg_sigv2_parse_query(test_str("AWSAccessKeyId=AK&Signature=x"), &arena, &a),
                     MG_EAUTHQUERY);
    assert_int_equal(
        mg_sigv2_parse_query(test_str("AWSAccessKeyId=AK&Signature=x&Expires=1x"), &arena, &a),
        MG_EAUTHQUERY);
    assert_int_equal(mg_sigv2_parse_query(test_str("AWSAccessKeyId=AK&Signature=x&Expires=1&"
                                                   "Expires=2"),
                                          &arena, &a),
                     MG_EAUTHQUERY);
    mg_arena_close(&arena);
}

int test_sig_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4_header_aws_example),
        cmocka_unit_test(test_v4_presign_aws_example),
        cmocka_unit_test(test_signing_key_cache),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_v4_parse_header_errors),
        cmocka_unit_test(test_v4_parse_query),
        cmocka_unit_test(test_v4_clock),
        cmocka_unit_test(test_v2_aws_example),
        cmocka_unit_test(test_v2_canonical),
        cmocka_unit_test(test_v2_presigned_list_v2),
        cmocka_unit_test(test_v2_query),
    };
    return cmocka_run_group_tests_name("common/sig", tests, NULL, NULL);
}
