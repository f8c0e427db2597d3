/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle/codec.c: the binary form round-trips (load(compile(c)) compiles to
 * the same bytes), is little-endian with the documented header, and every
 * corruption — any flipped byte, any truncation, a valid checksum over invalid
 * content — is MG_ECORRUPT, never a crash.
 */
#include <string.h>

#include "tests/unit/lifecycle/test_lifecycle.h"

#define ON "<Status>Enabled</Status>"

static const char *const full_doc =
    "<LifecycleConfiguration>"
    "<Rule><ID>a</ID><Filter><And><Prefix>p/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag>"
    "<ObjectSizeGreaterThan>1</ObjectSizeGreaterThan><ObjectSizeLessThan>1000000</ObjectSizeLessThan>"
    "</And></Filter>" ON "<Expiration><Days>30</Days></Expiration></Rule>"
    "<Rule><Filter><Prefix>up/</Prefix></Filter><Status>Disabled</Status>"
    "<AbortIncompleteMultipartUpload><DaysAfterInitiation>3</DaysAfterInitiation>"
    "</AbortIncompleteMultipartUpload><Expiration><Date>2030-06-01T00:00:00Z</Date></Expiration>"
    "</Rule>"
    "<Rule><ID>t</ID><Filter><Tag><Key>x</Key><Value></Value></Tag></Filter>" ON
    "<Expiration><ExpiredObjectDeleteMarker>false</ExpiredObjectDeleteMarker></Expiration></Rule>"
    "</LifecycleConfiguration>";

static void put_crc(struct mg_buf *b)
{
    struct mg_cksum c;
    uint8_t d[32];
    uint32_t v;
    mg_cksum_init(&c, MG_CKSUM_CRC32C);
    mg_cksum_update(&c, b->base, b->len - 4);
    mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    v = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
    for (int i = 0; i < 4; i++)
        b->base[b->len - 4 + i] = (char)(v >> (8 * i));
}

static void test_roundtrip(void **state)
{
    struct lc_config c, d;
    struct mg_buf b1, b2;
    tl_parse_ok(*state, full_doc, &c);
    mg_buf_init(&b1), mg_buf_init(&b2);
    lc_config_compile(&c, &b1);
    assert_memory_equal(b1.base, "MGLC\x01\x00\x03\x00", 8); /* magic, v1, 3 rules LE */
    assert_int_equal(lc_config_load(b1.base, b1.len, *state, &d), 0);
    assert_int_equal(d.nrules, 3);
    assert_true(lc__str_eq(d.rules[1].id, S("rule-1")));
    assert_int_equal(d.rules[1].enabled, 0);
    assert_int_equal(d.rules[1].abort_days, 3);
    assert_int_equal(d.rules[1].exp_kind, LC_EXP_DATE);
    assert_int_equal(d.rules[0].filter.size_lt, 1000000);
    assert_true(lc__str_eq(d.rules[0].filter.tags[0].value, S("v")));
    lc_config_compile(&d, &b2);
    assert_int_equal(b1.len, b2.len);
    assert_memory_equal(b1.base, b2.base, b1.len);
    /* compile appends: a prefix in the buffer is kept. */
    b2.len = 0;
    mg_buf_append(&b2, "xy", 2);
    lc_config_compile(&c, &b2);
    assert_memory_equal(b2.base + 2, b1.base, b1.len);
    mg_buf_close(&b1), mg_buf_close(&b2);
}

static void test_every_byte_flip(void **state)
{
    struct lc_config c, d;
    struct mg_buf b;
    tl_parse_ok(*state, full_doc, &c);
    mg_buf_init(&b);
    lc_config_compile(&c, &b);
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.base[i] ^= (char)(1 << bit);
            assert_int_equal(lc_config_load(b.base, b.len, *state, &d), MG_ECORRUPT);
            assert_int_equal(d.nrules, 0);
            b.base[i] ^= (char)(1 << bit);
        }
    }
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(lc_config_load(b.base, n, *state, &d), MG_ECORRUPT);
    assert_int_equal(lc_config_load(b.base, b.len, *state, &d), 0);
    mg_buf_close(&b);
}

/* With the checksum fixed up, the content checks still catch what the parser refuses. */
static void test_valid_crc_bad_content(void **state)
{
    struct lc_config c, d;
    struct mg_buf b;
    struct { size_t at; uint8_t v; } edits[] = {
        {4, 2},     /* version */
        {5, 1},     /* reserved */
        {6, 0},     /* nrules 0 */
        {6, 4},     /* more rules than bytes */
        {8, 0x80},  /* unknown flag */
        {9, 7},     /* form out of range */
        {9, 0},     /* form PREFIX with tags and sizes */
        {10, 9},    /* exp kind out of range */
        {10, 0},    /* Days kind NONE with days set */
        {11, 11},   /* more tags than allowed */
        {12, 0},    /* days 0 with kind DAYS */
    };
    tl_parse_ok(*state, full_doc, &c);
    mg_buf_init(&b);
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        b.len = 0;
        lc_config_compile(&c, &b);
        b.base[edits[i].at] = (char)edits[i].v;
        put_crc(&b);
        print_message("edit #%zu\n", i);
        assert_int_equal(lc_config_load(b.base, b.len, *state, &d), MG_ECORRUPT);
    }
    /* Trailing bytes inside the checksum. */
    b.len = 0;
    lc_config_compile(&c, &b);
    b.len -= 4;
    mg_buf_append(&b, "\0\0\0\0\0", 5);
    put_crc(&b);
    assert_int_equal(lc_config_load(b.base, b.len, *state, &d), MG_ECORRUPT);
    mg_buf_close(&b);
}

/* Two rules with the same ID: each rule is fine, the configuration is not. */
static void test_duplicate_id_corrupt(void **state)
{
    struct lc_config c, d;
    struct mg_buf b;
    char *p;
    tl_parse_ok(*state, "<LifecycleConfiguration><Rule><ID>aa</ID><Filter/>" ON
                        "<Expiration><Days>1</Days></Expiration></Rule><Rule><ID>ab</ID>"
                        "<Filter/>" ON "<Expiration><Days>1</Days></Expiration></Rule>"
                        "</LifecycleConfiguration>", &c);
    mg_buf_init(&b);
    lc_config_compile(&c, &b);
    p = memmem(b.base, b.len, "ab", 2);
    assert_non_null(p);
    p[1] = 'a';
    put_crc(&b);
    assert_int_equal(lc_config_load(b.base, b.len, *state, &d), MG_ECORRUPT);
    p[1] = 'b';
    put_crc(&b);
    assert_int_equal(lc_config_load(b.base, b.len, *state, &d), 0);
    mg_buf_close(&b);
}

static void test_limits_roundtrip(void **state)
{
    struct mg_buf x, b1, b2;
    struct lc_config c, d;
    mg_buf_init(&x), mg_buf_init(&b1), mg_buf_init(&b2);
    mg_buf_appendf(&x, "<LifecycleConfiguration>");
    for (int i = 0; i < LC_RULES_MAX; i++) {
        mg_buf_appendf(&x, "<Rule><ID>%0255d</ID><Filter><And><Prefix>", i);
        for (int k = 0; k < LC_PREFIX_MAX / 8; k++)
            mg_buf_appendf(&x, "%08d", i);
        mg_buf_appendf(&x, "</Prefix>");
        for (int t = 0; t < LC_FILTER_TAGS_MAX; t++)
            mg_buf_appendf(&x, "<Tag><Key>%d</Key><Value>v</Value></Tag>", t);
        mg_buf_appendf(&x, "</And></Filter>" ON "<Expiration><Days>2147483647</Days>"
                           "</Expiration></Rule>");
    }
    mg_buf_appendf(&x, "</LifecycleConfiguration>");
    tl_parse_ok(*state, (mg_buf_append(&x, "", 1), x.base), &c);
    lc_config_compile(&c, &b1);
    assert_int_equal(lc_config_load(b1.base, b1.len, *state, &d), 0);
    lc_config_compile(&d, &b2);
    assert_int_equal(b1.len, b2.len);
    assert_memory_equal(b1.base, b2.base, b1.len);
    mg_buf_close(&x), mg_buf_close(&b1), mg_buf_close(&b2);
}

int test_codec_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_every_byte_flip, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_valid_crc_bad_content, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_id_corrupt, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_limits_roundtrip, tl_setup, tl_teardown),
    };
    return cmocka_run_group_tests_name("lifecycle_codec", tests, NULL, NULL);
}
