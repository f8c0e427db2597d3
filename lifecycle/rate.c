/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rate control for the lifecycle scheduler (lifecycle.max_per_second): a token
 * bucket in objects per second with one second of burst. Integer arithmetic
 * only, in billionths of an object, so a rate is exact over any run length
 * (no floating drift): refill = elapsed_ns * per_second / 1e9 objects, and
 * elapsed is capped at one second before the multiply, so the product stays
 * below 1e9 * LC_RATE_MAX = 1e18 < 2^63. The clock is the caller's (tests
 * drive it by hand).
 */
#include <assert.h>

#define MG_MODULE "lifecycle"
#include "lifecycle/lifecycle.h"

#define NS_PER_S 1000000000ull

static void refill(struct lc_rate *r, int64_t now_ns)
{
    uint64_t cap = r->per_second * NS_PER_S, elapsed;
    if (now_ns <= r->last_ns)
        return; /* a clock that did not move (or went back) adds nothing */
    elapsed = (uint64_t)(now_ns - r->last_ns);
    if (elapsed > NS_PER_S)
        elapsed = NS_PER_S; /* the bucket holds one second; capping first bounds the product */
    r->tokens_nano += elapsed * r->per_second;
    if (r->tokens_nano > cap)
        r->tokens_nano = cap;
    r->last_ns = now_ns;
}

void lc_rate_init(struct lc_rate *r, uint64_t per_second, int64_t now_ns)
{
    assert(r != NULL && per_second <= LC_RATE_MAX);
    r->per_second = per_second;
    r->tokens_nano = per_second * NS_PER_S;
    r->last_ns = now_ns;
}

uint64_t lc_rate_take(struct lc_rate *r, uint64_t want, int64_t now_ns)
{
    uint64_t have;
    if (r->per_second == 0)
        return want;
    refill(r, now_ns);
    have = r->tokens_nano / NS_PER_S;
    if (want > have)
        want = have;
    r->tokens_nano -= want * NS_PER_S;
    assert(r->tokens_nano <= r->per_second * NS_PER_S);
    return want;
}

int64_t lc_rate_wait_ns(const struct lc_rate *r, int64_t now_ns)
{
    struct lc_rate probe = *r;
    uint64_t missing;
    if (r->per_second == 0)
        return 0;
    refill(&probe, now_ns);
    if (probe.tokens_nano >= NS_PER_S)
        return 0;
    missing = NS_PER_S - probe.tokens_nano; /* in 1e-9 objects; per_second of them per ns */
    return (int64_t)((missing + probe.per_second - 1) / probe.per_second);
}
