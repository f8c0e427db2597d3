/* SPDX-License-Identifier: Apache-2.0 */
/* Checksums and byte helpers of common/cksum.c: known vectors, streaming, encodings. */
#include "common/sig_int.h"

#include <stdio.h>
#include <string.h>

#include "common/mem.h"
#include "tests/unit/common/test_common.h"

static size_t digest_of(enum mg_cksum_algo a, const void *p, size_t n, uint8_t out[32])
{
    struct mg_cksum c;
    mg_cksum_init(&c, a);
    mg_cksum_update(&c, p, n);
    size_t len = mg_cksum_final(&c, out);
    mg_cksum_close(&c);
    return len;
}

static void b64_of(enum mg_cksum_algo a, const void *p, size_t n, char *out)
{
    uint8_t d[32];
    size_t len = digest_of(a, p, n, d);
    mg_base64_encode(d, len, out);
}

static uint64_t be(const uint8_t *d, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | d[i];
    return v;
}

static void test_crc_known_vectors(void **state)
{
    uint8_t d[32];
    assert_int_equal(digest_of(MG_CKSUM_CRC64NVME, "123456789", 9, d), 8);
    assert_true(be(d, 8) == 0xAE8B14860A799888ULL);
    assert_int_equal(digest_of(MG_CKSUM_CRC32C, "123456789", 9, d), 4);
    assert_true(be(d, 4) == 0xE3069283u);
    assert_int_equal(digest_of(MG_CKSUM_CRC32, "123456789", 9, d), 4);
    assert_true(be(d, 4) == 0xCBF43926u);
    assert_int_equal(digest_of(MG_CKSUM_CRC32, "", 0, d), 4);
    assert_true(be(d, 4) == 0);
    assert_int_equal(digest_of(MG_CKSUM_CRC64NVME, "", 0, d), 8);
    assert_true(be(d, 8) == 0);
}

/* CRC-64/NVME bit by bit, the definition the fast paths must match. */
static uint64_t crc64nvme_ref(uint64_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ 0x9a6c9329ac4bc9b5ULL : crc >> 1;
    }
    return ~crc;
}

/* Table and carry-less-multiply paths against the bitwise definition: every length up to
 * 1100 at every alignment mod 16, and chained pieces. */
static void test_crc64nvme_paths(void **state)
{
    static unsigned char buf[1200 + 16];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 2654435761u >> 13);
    for (size_t off = 0; off < 16; off += 5)
        for (size_t n = 0; n <= 1100; n += (n < 300 ? 1 : 7)) {
            uint8_t d[32];
            digest_of(MG_CKSUM_CRC64NVME, buf + off, n, d);
            uint64_t want = crc64nvme_ref(0, buf + off, n);
            if (be(d, 8) != want)
                fail_msg("crc64nvme len %zu off %zu", n, off);
        }
    struct mg_cksum c;
    uint8_t d[32];
    mg_cksum_init(&c, MG_CKSUM_CRC64NVME);
    mg_cksum_update(&c, buf, 300);
    mg_cksum_update(&c, buf + 300, 5);
    mg_cksum_update(&c, buf + 305, 900);
    mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    assert_true(be(d, 8) == crc64nvme_ref(0, buf, 1205));
}

static void test_small_object_checksums(void **state)
{
    char obj[1024], b[64], hex[65];
    uint8_t d[32];
    test_small_object(obj);
    b64_of(MG_CKSUM_CRC32, obj, sizeof(obj), b);
    assert_string_equal(b, "5qwIxQ==");
    digest_of(MG_CKSUM_MD5, obj, sizeof(obj), d);
    mg_hex_encode(d, 16, hex);
    assert_string_equal(hex, "8a9dc219ca58335132158c35017ff8dc");
    digest_of(MG_CKSUM_SHA256, obj, sizeof(obj), d);
    mg_hex_encode(d, 32, hex);
    assert_string_equal(hex, "70e4234dc197da6a0963c99580550b38225a838cd62810054daf64da0ef453dc");
    mg_sha256(obj, sizeof(obj), d);
    mg_hex_encode(d, 32, hex);
    assert_string_equal(hex, "70e4234dc197da6a0963c99580550b38225a838cd62810054daf64da0ef453dc");
    /* minio-go's x-amz-checksum-crc32c of the same object (fixture 26.02) */
    b64_of(MG_CKSUM_CRC32C, obj, sizeof(obj), b);
    assert_string_equal(b, "9GxN+w==");
}

static void test_hash_vectors(void **state)
{
    uint8_t d[32];
    char hex[65];
    assert_int_equal(digest_of(MG_CKSUM_SHA1, "abc", 3, d), 20);
    mg_hex_encode(d, 20, hex);
    assert_string_equal(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    assert_int_equal(digest_of(MG_CKSUM_MD5, "abc", 3, d), 16);
    mg_hex_encode(d, 16, hex);
    assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72");
    assert_int_equal(digest_of(MG_CKSUM_SHA256, "", 0, d), 32);
    mg_hex_encode(d, 32, hex);
    assert_string_equal(hex, MG_EMPTY_SHA256);
    /* RFC 4231 test case 2 */
    mg_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    mg_hex_encode(d, 32, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* RFC 4231 test case 6: a key longer than the block */
    uint8_t key[131];
    memset(key, 0xaa, sizeof(key));
    static const char msg[] = "Test Using Larger Than Block-Size Key - Hash Key First";
    mg_hmac_sha256(key, sizeof(key), msg, sizeof(msg) - 1, d);
    mg_hex_encode(d, 32, hex);
    assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* Every algorithm gives the same digest fed at once and fed in odd pieces. */
static void test_streaming_equals_oneshot(void **state)
{
    static char buf[100003];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (char)(i * 7919 + (i >> 5));
    for (int a = MG_CKSUM_CRC32; a <= MG_CKSUM_MD5; a++) {
        uint8_t one[32], many[32];
        size_t n1 = digest_of(a, buf, sizeof(buf), one);
        struct mg_cksum c;
        mg_cksum_init(&c, a);
        size_t off = 0, step = 1;
        while (off < sizeof(buf)) {
            size_t n = step < sizeof(buf) - off ? step : sizeof(buf) - off;
            mg_cksum_update(&c, buf + off, n);
            off += n;
            step = step * 3 + 1;
        }
        size_t n2 = mg_cksum_final(&c, many);
        mg_cksum_close(&c);
        assert_int_equal(n1, n2);
        assert_memory_equal(one, many, n1);
    }
}

static void test_algo_names(void **state)
{
    assert_int_equal(mg_cksum_algo_parse(test_str("crc32")), MG_CKSUM_CRC32);
    assert_int_equal(mg_cksum_algo_parse(test_str("CRC32C")), MG_CKSUM_CRC32C);
    assert_int_equal(mg_cksum_algo_parse(test_str("x-amz-checksum-crc64nvme")), MG_CKSUM_CRC64NVME);
    assert_int_equal(mg_cksum_algo_parse(test_str("X-Amz-Checksum-Sha256")), MG_CKSUM_SHA256);
    assert_int_equal(mg_cksum_algo_parse(test_str("sha1")), MG_CKSUM_SHA1);
    assert_int_equal(mg_cksum_algo_parse(test_str("x-amz-checksum-algorithm")), MG_CKSUM_NONE);
    assert_int_equal(mg_cksum_algo_parse(test_str("x-amz-checksum-mode")), MG_CKSUM_NONE);
    assert_int_equal(mg_cksum_algo_parse(test_str("")), MG_CKSUM_NONE);
    assert_string_equal(mg_cksum_algo_name(MG_CKSUM_CRC64NVME), "CRC64NVME");
    assert_string_equal(mg_cksum_header_name(MG_CKSUM_CRC32C), "x-amz-checksum-crc32c");
}

static void test_base64(void **state)
{
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char out[16];
        uint8_t back[16];
        size_t n = mg_base64_encode((const uint8_t *)plain[i], strlen(plain[i]), out);
        assert_int_equal(n, strlen(enc[i]));
        assert_string_equal(out, enc[i]);
        long m = mg_base64_decode(test_str(enc[i]), back, sizeof(back));
        assert_int_equal(m, (long)strlen(plain[i]));
        assert_memory_equal(back, plain[i], (size_t)m);
    }
    uint8_t back[4];
    assert_int_equal(mg_base64_decode(test_str("Zg="), back, 4), -1);
    assert_int_equal(mg_base64_decode(test_str("Z!=="), back, 4), -1);
    assert_int_equal(mg_base64_decode(test_str("Zm=v"), back, 4), -1);
    assert_int_equal(mg_base64_decode(test_str("Zm9vYmFy"), back, 4), -1); /* cap */
}

static void test_ct_equal(void **state)
{
    assert_true(mg_ct_equal("abcdef", "abcdef", 6));
    assert_false(mg_ct_equal("abcdef", "abcdeg", 6));
    assert_false(mg_ct_equal("xbcdef", "abcdef", 6));
    assert_true(mg_ct_equal("", "", 0));
    /* Every single-bit difference at every position is seen. */
    char a[64], b[64];
    memset(a, 'q', sizeof(a));
    for (size_t i = 0; i < sizeof(a); i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, a, sizeof(a));
            b[i] ^= (char)(1 << bit);
            assert_false(mg_ct_equal(a, b, sizeof(a)));
        }
}

static void test_uri(void **state)
{
    struct mg_buf b;
    mg_buf_init(&b);
    mg_uri_encode(test_str("dir/hello world+&=\xc3\xa9~.txt"), 1, &b);
    assert_string_equal(b.base, "dir/hello%20world%2B%26%3D%C3%A9~.txt");
    b.len = 0;
    mg_uri_encode(test_str("a/b-_.~Z9"), 0, &b);
    assert_string_equal(b.base, "a%2Fb-_.~Z9");
    b.len = 0;
    assert_int_equal(mg_uri_decode(test_str("dir/hello%20world%2B%26%3D%C3%A9~.txt+x"), &b), 0);
    assert_string_equal(b.base, "dir/hello world+&=\xc3\xa9~.txt+x");
    b.len = 0;
    assert_int_equal(mg_uri_decode(test_str("%2f%2F"), &b), 0);
    assert_string_equal(b.base, "//");
    b.len = 0;
    assert_int_equal(mg_uri_decode(test_str("bad%2"), &b), -1);
    b.len = 0;
    assert_int_equal(mg_uri_decode(test_str("bad%zz"), &b), -1);
    b.len = 0;
    assert_int_equal(mg_uri_decode(test_str("%"), &b), -1);
    mg_buf_close(&b);
}

/* The byte-class tables against their definitions. */
static void test_byte_tables(void **state)
{
    for (int c = 0; c < 256; c++) {
        int hex = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
        int unres = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '-' || c == '_' || c == '.' || c == '~';
        assert_int_equal(mg__hexval(c), hex);
        assert_int_equal(mg__unreserved((unsigned char)c), unres);
    }
}

/* mg_crc_combine / mg_crc_concat (FULL_OBJECT multipart checksums): the CRC of the parts
 * combined equals the CRC of the concatenation, for every CRC, at every split of a buffer (an
 * empty part included), over more than two parts, and for lengths too large to hash here
 * (combining is associative: (AB)C = A(BC) with a part of 5 GiB). */
static void test_crc_combine(void **state)
{
    (void)state;
    static const enum mg_cksum_algo algos[] = {MG_CKSUM_CRC32, MG_CKSUM_CRC32C,
                                               MG_CKSUM_CRC64NVME};
    unsigned char buf[700];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)(i * 131 + (i >> 3) * 7 + 1);
    for (size_t a = 0; a < 3; a++) {
        uint8_t d[32];
        size_t dl = digest_of(algos[a], buf, sizeof(buf), d);
        uint64_t whole = be(d, dl);
        for (size_t k = 0; k <= sizeof(buf); k += 7) {
            digest_of(algos[a], buf, k, d);
            uint64_t ca = be(d, dl);
            digest_of(algos[a], buf + k, sizeof(buf) - k, d);
            uint64_t cb = be(d, dl);
            assert_true(mg_crc_combine(algos[a], ca, cb, sizeof(buf) - k) == whole);
        }
        /* three parts through the base64 interface, as meta/mpu.c uses it */
        char b64[48], got[16], want[48];
        struct mg_crc_concat c;
        mg_crc_concat_init(&c, algos[a]);
        size_t cuts[4] = {0, 100, 100, sizeof(buf)}; /* the middle part is empty */
        for (int p = 0; p < 3; p++) {
            b64_of(algos[a], buf + cuts[p], cuts[p + 1] - cuts[p], b64);
            mg_crc_concat_add(&c, (struct mg_str){b64, strlen(b64)}, cuts[p + 1] - cuts[p]);
        }
        size_t n = mg_crc_concat_final(&c, got);
        b64_of(algos[a], buf, sizeof(buf), want);
        assert_int_equal(n, strlen(want));
        assert_string_equal(got, want);
        uint64_t x = 0x0123456789abcdefULL & (dl == 4 ? 0xffffffffu : ~0ULL), y = whole;
        uint64_t z = 0x1111u, big = 5ULL << 30;
        assert_true(mg_crc_combine(algos[a], mg_crc_combine(algos[a], x, y, big), z, 3) ==
                    mg_crc_combine(algos[a], x, mg_crc_combine(algos[a], y, z, 3), big + 3));
    }
    struct mg_crc_concat c;
    char got[16];
    mg_crc_concat_init(&c, MG_CKSUM_SHA256); /* not a CRC */
    mg_crc_concat_add(&c, (struct mg_str){"AAAAAA==", 8}, 1);
    assert_int_equal(mg_crc_concat_final(&c, got), 0);
    mg_crc_concat_init(&c, MG_CKSUM_CRC32);
    mg_crc_concat_add(&c, (struct mg_str){"AAAAAAAAAAA=", 12}, 1); /* 8 bytes: not a CRC32 */
    assert_int_equal(mg_crc_concat_final(&c, got), 0);
}

int test_cksum_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_known_vectors), cmocka_unit_test(test_small_object_checksums),
        cmocka_unit_test(test_hash_vectors),      cmocka_unit_test(test_streaming_equals_oneshot),
        cmocka_unit_test(test_algo_names),        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_ct_equal),          cmocka_unit_test(test_uri),
        cmocka_unit_test(test_byte_tables),       cmocka_unit_test(test_crc64nvme_paths),
        cmocka_unit_test(test_crc_combine),
    };
    return cmocka_run_group_tests_name("common/cksum", tests, NULL, NULL);
}
