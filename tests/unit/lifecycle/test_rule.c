/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle/rule.c: filter matching (prefix, tags exact, strict size bounds,
 * And), due times with S3's rounding (real and scaled days), Date rules, the
 * earliest-rule choice, AbortIncompleteMultipartUpload, and x-amz-expiration.
 */
#include <string.h>

#include "tests/unit/lifecycle/test_lifecycle.h"

#define ON "<Status>Enabled</Status>"
#define EXP(d) "<Expiration><Days>" #d "</Days></Expiration>"
#define DAY_MS 86400000LL
/* 2014-01-15T10:30:00Z, the User Guide's example creation time. */
#define JAN15_1030 1389781800000LL

static struct lc_object obj(const char *key, uint64_t size, const struct lc_tag *tags,
                            size_t ntags, int64_t mtime_ms)
{
    return (struct lc_object){{key, strlen(key)}, size, tags, ntags, mtime_ms};
}

static void test_match_prefix(void **state)
{
    struct lc_config c;
    tl_parse_ok(*state, LC1("<Prefix>logs/</Prefix>" ON EXP(1)), &c);
    assert_true(tl_expires(&c, "logs/a", 1, NULL, 0));
    assert_true(tl_expires(&c, "logs/", 1, NULL, 0));
    assert_false(tl_expires(&c, "logs", 1, NULL, 0));
    assert_false(tl_expires(&c, "Logs/a", 1, NULL, 0));
    assert_false(tl_expires(&c, "x/logs/a", 1, NULL, 0));
    tl_parse_ok(*state, LC1("<Filter/>" ON EXP(1)), &c);
    assert_true(tl_expires(&c, "", 0, NULL, 0));
    tl_parse_ok(*state, LC1("<Filter><Prefix></Prefix></Filter>" ON EXP(1)), &c);
    assert_true(tl_expires(&c, "anything", 0, NULL, 0));
}

static void test_match_tags(void **state)
{
    struct lc_config c;
    struct lc_tag t_ok[] = {{S("x"), S("1")}, {S("env"), S("tmp")}};
    struct lc_tag t_val[] = {{S("env"), S("tmp2")}};
    struct lc_tag t_case[] = {{S("Env"), S("tmp")}};
    struct lc_tag t_empty[] = {{S("env"), S("")}};
    tl_parse_ok(*state, LC1("<Filter><Tag><Key>env</Key><Value>tmp</Value></Tag></Filter>" ON
                            EXP(1)), &c);
    assert_true(tl_expires(&c, "k", 1, t_ok, 2));
    assert_false(tl_expires(&c, "k", 1, t_val, 1));  /* value exact */
    assert_false(tl_expires(&c, "k", 1, t_case, 1)); /* key exact */
    assert_false(tl_expires(&c, "k", 1, NULL, 0));
    tl_parse_ok(*state, LC1("<Filter><Tag><Key>env</Key><Value></Value></Tag></Filter>" ON
                            EXP(1)), &c);
    assert_true(tl_expires(&c, "k", 1, t_empty, 1));
    assert_false(tl_expires(&c, "k", 1, t_ok, 2));
}

static void test_match_sizes(void **state)
{
    struct lc_config c;
    tl_parse_ok(*state, LC1("<Filter><ObjectSizeGreaterThan>100</ObjectSizeGreaterThan>"
                            "</Filter>" ON EXP(1)), &c);
    assert_false(tl_expires(&c, "k", 100, NULL, 0)); /* strict */
    assert_true(tl_expires(&c, "k", 101, NULL, 0));
    tl_parse_ok(*state, LC1("<Filter><ObjectSizeLessThan>100</ObjectSizeLessThan></Filter>" ON
                            EXP(1)), &c);
    assert_false(tl_expires(&c, "k", 100, NULL, 0));
    assert_true(tl_expires(&c, "k", 99, NULL, 0));
    assert_true(tl_expires(&c, "k", 0, NULL, 0));
}

static void test_match_and(void **state)
{
    struct lc_config c;
    struct lc_tag both[] = {{S("a"), S("1")}, {S("b"), S("2")}};
    struct lc_tag one[] = {{S("a"), S("1")}};
    tl_parse_ok(*state, LC1("<Filter><And><Prefix>p/</Prefix><Tag><Key>a</Key><Value>1</Value>"
                            "</Tag><Tag><Key>b</Key><Value>2</Value></Tag>"
                            "<ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
                            "<ObjectSizeLessThan>20</ObjectSizeLessThan></And></Filter>" ON
                            EXP(1)), &c);
    assert_true(tl_expires(&c, "p/x", 15, both, 2));
    assert_false(tl_expires(&c, "q/x", 15, both, 2)); /* prefix */
    assert_false(tl_expires(&c, "p/x", 15, one, 1));  /* every tag */
    assert_false(tl_expires(&c, "p/x", 10, both, 2)); /* lower bound strict */
    assert_false(tl_expires(&c, "p/x", 20, both, 2)); /* upper bound strict */
    assert_true(tl_expires(&c, "p/x", 11, both, 2));
    assert_true(tl_expires(&c, "p/x", 19, both, 2));
    /* And with only sizes. */
    tl_parse_ok(*state, LC1("<Filter><And><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan>"
                            "<ObjectSizeLessThan>3</ObjectSizeLessThan></And></Filter>" ON
                            EXP(1)), &c);
    assert_true(tl_expires(&c, "any", 2, NULL, 0));
    assert_false(tl_expires(&c, "any", 3, NULL, 0));
}

static void test_due_rounding(void **state)
{
    (void)state;
    /* "if an object was created on 1/15/2014 at 10:30 AM UTC and you specify 3 days ...
     * calculated as 1/19/2014 00:00 UTC" (S3 User Guide, lifecycle actions). */
    assert_int_equal(lc_due_after(JAN15_1030, 3, 86400), 1390089600000LL);
    /* Created 00:05 with one day: due the midnight after next (two calendar days later). */
    assert_int_equal(lc_due_after(1388620800000LL + 300000, 1, 86400), 1388620800000LL + 2 * DAY_MS);
    /* Already on a boundary: it stays (rounding up). */
    assert_int_equal(lc_due_after(1388620800000LL, 1, 86400), 1388620800000LL + DAY_MS);
    assert_int_equal(lc_due_after(1, 0, 86400), DAY_MS);
    /* Scaled days (lifecycle.day_seconds = 5): multiples of 5 s since the epoch. */
    assert_int_equal(lc_due_after(12345, 1, 5), 20000);
    assert_int_equal(lc_due_after(15000, 1, 5), 20000);
    assert_int_equal(lc_due_after(15001, 2, 5), 30000);
    assert_int_equal(lc_due_after(-1, 0, 5), 0);
    /* Saturates instead of overflowing. */
    assert_true(lc_due_after(INT64_MAX - 10, 1, 86400) == INT64_MAX);
    assert_true(lc_due_after(INT64_MAX - 25975807 + 1, 0, 86400) == INT64_MAX); /* past the last */
    {
        int64_t big = lc_due_after(INT64_MAX - DAY_MS * 3, 1, 86400);
        assert_true(big % DAY_MS == 0 && big > INT64_MAX - DAY_MS * 2);
    }
}

static void test_expiry_earliest(void **state)
{
    struct lc_config c;
    struct lc_object o = obj("logs/a", 5, NULL, 0, JAN15_1030);
    const struct lc_rule *r;
    int64_t due;
    tl_parse_ok(*state, "<LifecycleConfiguration>"
                        "<Rule><ID>long</ID><Filter><Prefix>logs/</Prefix></Filter>" ON EXP(30)
                        "</Rule>"
                        "<Rule><ID>off</ID><Filter/><Status>Disabled</Status>" EXP(1) "</Rule>"
                        "<Rule><ID>short</ID><Filter/>" ON EXP(3) "</Rule>"
                        "<Rule><ID>tie</ID><Filter/>" ON EXP(3) "</Rule>"
                        "<Rule><ID>abort</ID><Filter/>" ON "<AbortIncompleteMultipartUpload>"
                        "<DaysAfterInitiation>1</DaysAfterInitiation>"
                        "</AbortIncompleteMultipartUpload></Rule>"
                        "</LifecycleConfiguration>", &c);
    assert_int_equal(lc_config_expiry(&c, &o, 86400, &due, &r), 1);
    assert_true(lc__str_eq(r->id, S("short"))); /* disabled skipped; first of a tie */
    assert_int_equal(due, 1390089600000LL);
    /* Scaled: 3 "days" of 5 s from 10:30:00.000 is 10:30:15, already a multiple of 5 s. */
    assert_int_equal(lc_config_expiry(&c, &o, 5, &due, &r), 1);
    assert_int_equal(due, JAN15_1030 + 15000);
    o.mtime_ms += 1;
    assert_int_equal(lc_config_expiry(&c, &o, 5, &due, &r), 1);
    assert_int_equal(due, JAN15_1030 + 20000);
}

static void test_expiry_date(void **state)
{
    struct lc_config c;
    struct lc_object before = obj("k", 1, NULL, 0, 1000), after = obj("k", 1, NULL, 0, 4000000000000LL);
    const struct lc_rule *r;
    int64_t due;
    tl_parse_ok(*state, "<LifecycleConfiguration>"
                        "<Rule><ID>days</ID><Filter/>" ON EXP(365) "</Rule>"
                        "<Rule><ID>date</ID><Filter/>" ON "<Expiration><Date>2012-12-23"
                        "T00:00:00.000Z</Date></Expiration></Rule>"
                        "</LifecycleConfiguration>", &c);
    assert_int_equal(lc_config_expiry(&c, &before, 86400, &due, &r), 1);
    assert_true(lc__str_eq(r->id, S("days"))); /* 1971 comes before 2012 */
    assert_int_equal(due, 366 * DAY_MS);         /* 365 days and 1 s, rounded up */
    /* Objects written after the date are due at once (at the date). Not scaled. */
    assert_int_equal(lc_config_expiry(&c, &after, 5, &due, &r), 1);
    assert_true(lc__str_eq(r->id, S("date")));
    assert_int_equal(due, 1356220800000LL);
}

static void test_expiry_none(void **state)
{
    struct lc_config c;
    struct lc_object o = obj("other/x", 1, NULL, 0, 0);
    const struct lc_rule *r = NULL;
    int64_t due = -7;
    tl_parse_ok(*state, LC1("<Filter><Prefix>logs/</Prefix></Filter>" ON EXP(1)
                            "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
                            "</DaysAfterInitiation></AbortIncompleteMultipartUpload>"), &c);
    assert_int_equal(lc_config_expiry(&c, &o, 86400, &due, &r), 0);
    assert_int_equal(lc_config_abort_due(&c, S("other/x"), 0, 86400, &due, &r), 0);
    assert_null(r);
    assert_int_equal(due, -7);
}

static void test_abort_due(void **state)
{
    struct lc_config c;
    const struct lc_rule *r;
    int64_t due;
    tl_parse_ok(*state, "<LifecycleConfiguration>"
                        "<Rule><ID>exp-only</ID><Filter/>" ON EXP(1) "</Rule>"
                        "<Rule><ID>u7</ID><Filter><Prefix>up/</Prefix></Filter>" ON
                        "<AbortIncompleteMultipartUpload><DaysAfterInitiation>7"
                        "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
                        "<Rule><ID>u2</ID><Filter><Prefix>up/fast/</Prefix></Filter>" ON
                        "<AbortIncompleteMultipartUpload><DaysAfterInitiation>2"
                        "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>"
                        "</LifecycleConfiguration>", &c);
    assert_int_equal(lc_config_abort_due(&c, S("up/a"), JAN15_1030, 86400, &due, &r), 1);
    assert_true(lc__str_eq(r->id, S("u7")));
    assert_int_equal(due, 1390089600000LL + 4 * DAY_MS); /* 1/22 + 1 day rounded: 1/23 */
    assert_int_equal(lc_config_abort_due(&c, S("up/fast/a"), JAN15_1030, 86400, &due, &r), 1);
    assert_true(lc__str_eq(r->id, S("u2")));
    assert_int_equal(lc_config_abort_due(&c, S("up/fast/a"), 12345, 5, &due, &r), 1);
    assert_int_equal(due, 25000);
    assert_int_equal(lc_config_abort_due(&c, S("x"), 0, 86400, &due, &r), 0);
}

static void test_header(void **state)
{
    struct mg_buf b;
    (void)state;
    mg_buf_init(&b);
    assert_int_equal(lc_expiration_header(1356220800000LL, S("picture-deletion-rule"), &b), 0);
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "expiry-date=\"Sun, 23 Dec 2012 00:00:00 GMT\", "
                                "rule-id=\"picture-deletion-rule\"");
    b.len = 0;
    /* AWS's sample date, Fri 21 Dec 2012, and an ID with a space (sent as is). */
    assert_int_equal(lc_expiration_header(1356048000000LL, S("Rule for testfile.txt"), &b), 0);
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "expiry-date=\"Fri, 21 Dec 2012 00:00:00 GMT\", "
                                "rule-id=\"Rule for testfile.txt\"");
    b.len = 0;
    assert_int_equal(lc_expiration_header(0, S("a\"b\\c\xc3\xa9"), &b), 0);
    mg_buf_append(&b, "", 1);
    assert_string_equal(b.base, "expiry-date=\"Thu, 01 Jan 1970 00:00:00 GMT\", "
                                "rule-id=\"a%22b%5Cc%C3%A9\"");
    b.len = 0;
    assert_int_equal(lc_expiration_header(-1, S("x"), &b), MG_EINVALIDARGUMENT);
    assert_int_equal(lc_expiration_header(INT64_MAX, S("x"), &b), MG_EINVALIDARGUMENT);
    assert_int_equal(b.len, 0);
    mg_buf_close(&b);
}

static void test_utf8_len(void **state)
{
    (void)state;
    assert_int_equal(lc__utf8_len(S("")), 0);
    assert_int_equal(lc__utf8_len(S("abc")), 3);
    assert_int_equal(lc__utf8_len(S("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80")), 3);
    assert_int_equal(lc__utf8_len(S("\xc3")), -1);         /* truncated */
    assert_int_equal(lc__utf8_len(S("\xe2\x82")), -1);
    assert_int_equal(lc__utf8_len(S("\x80")), -1);         /* lone continuation */
    assert_int_equal(lc__utf8_len(S("\xc0\xaf")), -1);     /* overlong */
    assert_int_equal(lc__utf8_len(S("\xff")), -1);
    assert_int_equal(lc__utf8_len(S("\xe0\x80\xaf")), -1);     /* overlong, 3 bytes */
    assert_int_equal(lc__utf8_len(S("\xed\xa0\x80")), -1);     /* surrogate */
    assert_int_equal(lc__utf8_len(S("\xf4\x90\x80\x80")), -1); /* past U+10FFFF */
    assert_int_equal(lc__utf8_len(S("\xef\xbf\xbe")), -1);     /* U+FFFE */
    assert_int_equal(lc__utf8_len(S("a\x01")), -1);             /* not an XML 1.0 char */
    assert_int_equal(lc__utf8_len(S("\t\n\r")), 3);
}

int test_rule_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_match_prefix, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_match_tags, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_match_sizes, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_match_and, tl_setup, tl_teardown),
        cmocka_unit_test(test_due_rounding),
        cmocka_unit_test_setup_teardown(test_expiry_earliest, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_expiry_date, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_expiry_none, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_abort_due, tl_setup, tl_teardown),
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_utf8_len),
    };
    return cmocka_run_group_tests_name("lifecycle_rule", tests, NULL, NULL);
}
