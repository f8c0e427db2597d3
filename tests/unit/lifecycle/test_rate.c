/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle/rate.c: the token bucket grants per_second objects per second with
 * one second of burst, exactly over long runs, waits the right time, ignores a
 * clock that goes back, and 0 means unlimited. The clock is driven by hand.
 */
#include "tests/unit/lifecycle/test_lifecycle.h"

#define SEC 1000000000LL

static void test_unlimited(void **state)
{
    struct lc_rate r;
    (void)state;
    lc_rate_init(&r, 0, 0);
    assert_int_equal(lc_rate_take(&r, 1000000, 0), 1000000);
    assert_int_equal(lc_rate_take(&r, UINT64_MAX, 0), UINT64_MAX);
    assert_int_equal(lc_rate_wait_ns(&r, 0), 0);
}

static void test_burst_and_refill(void **state)
{
    struct lc_rate r;
    (void)state;
    lc_rate_init(&r, 100, 5 * SEC);
    assert_int_equal(lc_rate_take(&r, 1000, 5 * SEC), 100); /* one second of burst */
    assert_int_equal(lc_rate_take(&r, 1, 5 * SEC), 0);
    assert_int_equal(lc_rate_wait_ns(&r, 5 * SEC), SEC / 100);
    assert_int_equal(lc_rate_take(&r, 10, 5 * SEC + SEC / 100 - 1), 0);
    assert_int_equal(lc_rate_take(&r, 10, 5 * SEC + SEC / 100), 1);
    assert_int_equal(lc_rate_take(&r, 10, 5 * SEC + SEC / 10), 9); /* 10 per 100 ms */
    /* A long idle refills one second's worth, not more. */
    assert_int_equal(lc_rate_take(&r, 1000, 100 * SEC), 100);
    /* A clock that goes back adds nothing. */
    assert_int_equal(lc_rate_take(&r, 1, 99 * SEC), 0);
    assert_int_equal(lc_rate_wait_ns(&r, 99 * SEC), SEC / 100);
}

/* Taking in small steps for 10 s grants exactly 10 s of rate (plus the initial burst). */
static void test_exact_over_time(void **state)
{
    struct lc_rate r;
    uint64_t granted = 0;
    (void)state;
    lc_rate_init(&r, 3, 0);
    for (int64_t t = 0; t <= 10 * SEC; t += 7777777)
        granted += lc_rate_take(&r, 1000, t);
    /* 3 burst + 3/s * 9.99999... s taken in steps: floor((3 + 29.99...)) */
    assert_true(granted >= 32 && granted <= 33);
    lc_rate_init(&r, 1000000, 0);
    lc_rate_take(&r, 1000000, 0);
    granted = 0;
    for (int64_t t = 1; t <= SEC; t += 1000)
        granted += lc_rate_take(&r, 1000000, t);
    assert_true(granted >= 999000 && granted <= 1000000);
}

static void test_max_rate(void **state)
{
    struct lc_rate r;
    (void)state;
    lc_rate_init(&r, LC_RATE_MAX, 0);
    assert_int_equal(lc_rate_take(&r, UINT64_MAX, 0), LC_RATE_MAX);
    assert_int_equal(lc_rate_take(&r, UINT64_MAX, 1000 * SEC), LC_RATE_MAX); /* no overflow */
    assert_int_equal(lc_rate_wait_ns(&r, 1000 * SEC), 1);
}

int test_rate_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unlimited),
        cmocka_unit_test(test_burst_and_refill),
        cmocka_unit_test(test_exact_over_time),
        cmocka_unit_test(test_max_rate),
    };
    return cmocka_run_group_tests_name("lifecycle_rate", tests, NULL, NULL);
}
