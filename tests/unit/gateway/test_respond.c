/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the time helpers of gateway/respond.c: HTTP dates in the
 * three forms RFC 9110 5.6.7 says a recipient must accept, ISO 8601 for XML
 * bodies, and the round trip between them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/gw.h"

static int64_t parse(const char *s)
{
    return gw_http_date_parse((struct mg_str){s, strlen(s)});
}

static void test_format(void **state)
{
    (void)state;
    char d[30], i[25];
    gw_http_date(1796083200000, d); /* 2026-12-01T00:00:00Z */
    assert_string_equal(d, "Tue, 01 Dec 2026 00:00:00 GMT");
    gw_http_date(0, d);
    assert_string_equal(d, "Thu, 01 Jan 1970 00:00:00 GMT");
    gw_iso8601(1796083200123, i);
    assert_string_equal(i, "2026-12-01T00:00:00.123Z");
    gw_iso8601(784111777000, i);
    assert_string_equal(i, "1994-11-06T08:49:37.000Z");
}

static void test_parse(void **state)
{
    (void)state;
    const int64_t want = 784111777000; /* Sun, 06 Nov 1994 08:49:37 GMT */
    assert_int_equal(parse("Sun, 06 Nov 1994 08:49:37 GMT"), want);
    assert_int_equal(parse("Sunday, 06-Nov-94 08:49:37 GMT"), want);
    assert_int_equal(parse("Sun Nov  6 08:49:37 1994"), want);
    assert_int_equal(parse("Sun, 06 Nov 1994 08:49:37 UTC"), want);
    assert_int_equal(parse("Mon, 30 Nov 2026 16:00:00 GMT"), 1796054400000);
    assert_int_equal(parse("Mon, 30 Nov 2026 16:00:00 +0000"), 1796054400000);
    assert_int_equal(parse("Sun, 6 Nov 1994 08:49:37 GMT"), want);
    /* Invalid */
    assert_int_equal(parse(""), -1);
    assert_int_equal(parse("yesterday"), -1);
    assert_int_equal(parse("Sun, 06 Nov 1994 08:49:37"), -1);
    assert_int_equal(parse("Sun, 06 Foo 1994 08:49:37 GMT"), -1);
    assert_int_equal(parse("Sun, 32 Nov 1994 08:49:37 GMT"), -1);
    assert_int_equal(parse("Sun, 31 Nov 1994 08:49:37 GMT"), -1);
    assert_int_equal(parse("Sun, 06 Nov 1994 24:49:37 GMT"), -1);
    assert_int_equal(parse("Sun, 06 Nov 1994 08:49 GMT"), -1);
    assert_int_equal(parse("Sun Nov  6 08:49:37 1994 trailing"), -1);
    assert_int_equal(parse("20261130T160049Z"), -1);
}

static void test_round_trip(void **state)
{
    (void)state;
    char d[30];
    for (int64_t ms = 0; ms < 4102444800000; ms += 86399999) {
        gw_http_date(ms, d);
        assert_int_equal(parse(d), ms / 1000 * 1000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
