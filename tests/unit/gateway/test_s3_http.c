/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the pure HTTP semantics of gateway/s3_http.c: Range header
 * parsing as S3 applies it (suffix ranges, clamping, 416, ignored multi-range
 * and malformed headers), conditional-header evaluation with the GetObject
 * precedence rules, entity-tag lists, continuation tokens and max-keys style
 * parameters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/s3.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})

/* ------------------------------------------------------------------- Range */

static void expect_range(const char *h, uint64_t size, int rv, uint64_t off, uint64_t len)
{
    uint64_t o = 999, l = 999;
    int got = gw_range_parse((struct mg_str){h, strlen(h)}, size, &o, &l);
    assert_int_equal(got, rv);
    if (rv == 1) {
        assert_int_equal(o, off);
        assert_int_equal(l, len);
    }
}

static void test_range_basic(void **state)
{
    (void)state;
    expect_range("bytes=0-9", 100, 1, 0, 10);
    expect_range("bytes=10-19", 100, 1, 10, 10);
    expect_range("bytes=99-99", 100, 1, 99, 1);
    expect_range("bytes=0-0", 1, 1, 0, 1);
    expect_range("bytes=90-", 100, 1, 90, 10);
    expect_range("bytes=0-", 100, 1, 0, 100);
    expect_range(" bytes = 5-6 ", 100, 0, 0, 0); /* "bytes =" is not the unit */
    expect_range("bytes= 5-6", 100, 1, 5, 2);
}

static void test_range_clamp(void **state)
{
    (void)state;
    expect_range("bytes=50-1000", 100, 1, 50, 50);
    expect_range("bytes=0-18446744073709551615", 100, 0, 0, 0); /* overflow: malformed */
    expect_range("bytes=0-9999999999", 100, 1, 0, 100);
}

static void test_range_suffix(void **state)
{
    (void)state;
    expect_range("bytes=-10", 100, 1, 90, 10);
    expect_range("bytes=-100", 100, 1, 0, 100);
    expect_range("bytes=-500", 100, 1, 0, 100);
    expect_range("bytes=-0", 100, MG_EINVALIDRANGE, 0, 0);
    expect_range("bytes=-1", 0, MG_EINVALIDRANGE, 0, 0);
}

static void test_range_unsatisfiable(void **state)
{
    (void)state;
    expect_range("bytes=100-", 100, MG_EINVALIDRANGE, 0, 0);
    expect_range("bytes=100-200", 100, MG_EINVALIDRANGE, 0, 0);
    expect_range("bytes=0-0", 0, MG_EINVALIDRANGE, 0, 0);
}

static void test_range_ignored(void **state)
{
    (void)state;
    expect_range("", 100, 0, 0, 0);
    expect_range("bytes=0-1,5-6", 100, 0, 0, 0); /* several ranges: 200 with everything */
    expect_range("items=0-1", 100, 0, 0, 0);
    expect_range("bytes=a-b", 100, 0, 0, 0);
    expect_range("bytes=5", 100, 0, 0, 0);
    expect_range("bytes=9-5", 100, 0, 0, 0);
    expect_range("bytes=-", 100, 0, 0, 0);
    expect_range("bytes=1-2x", 100, 0, 0, 0);
}

/* ------------------------------------------------------------- conditionals */

#define T0 1700000000000LL /* object mtime (ms) */

static struct gw_cond cond(const char *im, const char *inm, int64_t ims, int64_t ius)
{
    struct gw_cond c;
    c.if_match = im ? (struct mg_str){im, strlen(im)} : (struct mg_str){"", 0};
    c.if_none_match = inm ? (struct mg_str){inm, strlen(inm)} : (struct mg_str){"", 0};
    c.if_modified_since_ms = ims;
    c.if_unmodified_since_ms = ius;
    return c;
}

static int eval(struct gw_cond c)
{
    return gw_cond_eval(&c, S("abc"), T0 + 400); /* sub-second part must not matter */
}

static void test_cond_single(void **state)
{
    (void)state;
    assert_int_equal(eval(cond(NULL, NULL, -1, -1)), 0);
    assert_int_equal(eval(cond("\"abc\"", NULL, -1, -1)), 0);
    assert_int_equal(eval(cond("abc", NULL, -1, -1)), 0);
    assert_int_equal(eval(cond("*", NULL, -1, -1)), 0);
    assert_int_equal(eval(cond("\"xyz\"", NULL, -1, -1)), MG_EPRECONDITION);
    assert_int_equal(eval(cond(NULL, "\"abc\"", -1, -1)), MG_ENOTMODIFIED);
    assert_int_equal(eval(cond(NULL, "*", -1, -1)), MG_ENOTMODIFIED);
    assert_int_equal(eval(cond(NULL, "\"xyz\"", -1, -1)), 0);
    /* If-Modified-Since: not modified when mtime <= date (second resolution). */
    assert_int_equal(eval(cond(NULL, NULL, T0, -1)), MG_ENOTMODIFIED);
    assert_int_equal(eval(cond(NULL, NULL, T0 + 5000, -1)), MG_ENOTMODIFIED);
    assert_int_equal(eval(cond(NULL, NULL, T0 - 1000, -1)), 0);
    /* If-Unmodified-Since: fails when modified after the date. */
    assert_int_equal(eval(cond(NULL, NULL, -1, T0)), 0);
    assert_int_equal(eval(cond(NULL, NULL, -1, T0 - 1000)), MG_EPRECONDITION);
}

static void test_cond_precedence(void **state)
{
    (void)state;
    /* If-Match true + If-Unmodified-Since false -> 200. */
    assert_int_equal(eval(cond("\"abc\"", NULL, -1, T0 - 86400000)), 0);
    /* If-Match false wins whatever the date says. */
    assert_int_equal(eval(cond("\"x\"", NULL, -1, T0 + 86400000)), MG_EPRECONDITION);
    /* If-None-Match false (matches) + If-Modified-Since true -> 304. */
    assert_int_equal(eval(cond(NULL, "\"abc\"", T0 - 86400000, -1)), MG_ENOTMODIFIED);
    /* If-None-Match true (no match) makes If-Modified-Since irrelevant -> 200. */
    assert_int_equal(eval(cond(NULL, "\"x\"", T0 + 86400000, -1)), 0);
    /* 412 beats 304. */
    assert_int_equal(eval(cond("\"x\"", "\"abc\"", -1, -1)), MG_EPRECONDITION);
}

static void test_etag_list(void **state)
{
    (void)state;
    assert_true(gw_etag_list_match(S("\"a\", \"abc\""), S("abc")));
    assert_true(gw_etag_list_match(S("W/\"abc\""), S("abc")));
    assert_true(gw_etag_list_match(S(" abc "), S("abc")));
    assert_false(gw_etag_list_match(S("\"ab\",\"abcd\""), S("abc")));
    assert_false(gw_etag_list_match(S(""), S("abc")));
    assert_true(gw_etag_list_match(S("\"d41d8cd98f00b204e9800998ecf8427e-2\""),
                                   S("d41d8cd98f00b204e9800998ecf8427e-2")));
}

/* ------------------------------------------------------ tokens and max-keys */

static void test_token_roundtrip(void **state)
{
    struct mg_arena a;
    struct mg_str tok, back;
    static const char key[] = "dir/hello world+&=\xc3\xa9~.txt";
    (void)state;
    mg_arena_init(&a);
    gw_token_encode(S(key), &a, &tok);
    assert_true(tok.len > 0);
    assert_null(memchr(tok.base, '/', 0));
    assert_int_equal(gw_token_decode(tok, &a, &back), 0);
    assert_int_equal(back.len, sizeof(key) - 1);
    assert_memory_equal(back.base, key, back.len);
    gw_token_encode(S("a"), &a, &tok);
    assert_int_equal(gw_token_decode(tok, &a, &back), 0);
    assert_int_equal(back.len, 1);
    mg_arena_close(&a);
}

static void test_token_invalid(void **state)
{
    struct mg_arena a;
    struct mg_str back;
    (void)state;
    mg_arena_init(&a);
    assert_int_equal(gw_token_decode(S(""), &a, &back), MG_EINVALIDARGUMENT);
    assert_int_equal(gw_token_decode(S("!!!!"), &a, &back), MG_EINVALIDARGUMENT);
    mg_arena_close(&a);
}

static void test_parse_max(void **state)
{
    uint32_t v = 7;
    (void)state;
    assert_int_equal(gw_parse_max(S(""), 0, 1000, 1000, &v), 0);
    assert_int_equal(v, 1000);
    assert_int_equal(gw_parse_max(S("5"), 1, 1000, 1000, &v), 0);
    assert_int_equal(v, 5);
    assert_int_equal(gw_parse_max(S("0"), 1, 1000, 1000, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(gw_parse_max(S("5000"), 1, 1000, 1000, &v), 0);
    assert_int_equal(v, 1000);
    assert_int_equal(gw_parse_max(S("99999999999999999999999"), 1, 1000, 1000, &v), 0);
    assert_int_equal(v, 1000);
    assert_int_equal(gw_parse_max(S("-1"), 1, 1000, 1000, &v), MG_EINVALIDARGUMENT);
    assert_int_equal(gw_parse_max(S("abc"), 1, 1000, 1000, &v), MG_EINVALIDARGUMENT);
    assert_int_equal(gw_parse_max(S(""), 1, 1000, 1000, &v), MG_EINVALIDARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_basic),       cmocka_unit_test(test_range_clamp),
        cmocka_unit_test(test_range_suffix),      cmocka_unit_test(test_range_unsatisfiable),
        cmocka_unit_test(test_range_ignored),     cmocka_unit_test(test_cond_single),
        cmocka_unit_test(test_cond_precedence),   cmocka_unit_test(test_etag_list),
        cmocka_unit_test(test_token_roundtrip),   cmocka_unit_test(test_token_invalid),
        cmocka_unit_test(test_parse_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
