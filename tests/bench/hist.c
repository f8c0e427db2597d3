/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Log-linear latency histogram (see hist.h). The index of v >= 128 is
 * 128 + (shift - 1) * 64 + ((v >> shift) - 64) where shift = msb(v) - 6, so
 * (v >> shift) is always in [64, 127]: the top 7 significant bits pick the
 * bucket, as in HdrHistogram with 2 significant decimal digits.
 */
#include "tests/bench/hist.h"

#include <assert.h>
#include <string.h>

void mgb_hist_init(struct mgb_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

unsigned mgb_hist_index(uint64_t v)
{
    if (v < (1u << MGB_HIST_SUB_BITS))
        return (unsigned)v;
    if (v >= (UINT64_C(1) << MGB_HIST_MAX_BITS))
        return MGB_HIST_BUCKETS - 1;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - (MGB_HIST_SUB_BITS - 1);
    unsigned idx = (1u << MGB_HIST_SUB_BITS) + (shift - 1) * MGB_HIST_HALF +
                   (unsigned)((v >> shift) - MGB_HIST_HALF);
    assert(idx < MGB_HIST_BUCKETS);
    return idx;
}

void mgb_hist_bounds(unsigned idx, uint64_t *lo, uint64_t *hi)
{
    assert(idx < MGB_HIST_BUCKETS);
    if (idx < (1u << MGB_HIST_SUB_BITS)) {
        *lo = *hi = idx;
        return;
    }
    unsigned rel = idx - (1u << MGB_HIST_SUB_BITS);
    unsigned shift = rel / MGB_HIST_HALF + 1;
    uint64_t m = rel % MGB_HIST_HALF + MGB_HIST_HALF;
    *lo = m << shift;
    *hi = ((m + 1) << shift) - 1;
}

void mgb_hist_record(struct mgb_hist *h, uint64_t v)
{
    h->b[mgb_hist_index(v)]++;
    h->count++;
    h->sum += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void mgb_hist_merge(struct mgb_hist *dst, const struct mgb_hist *src)
{
    if (src->count == 0)
        return;
    for (unsigned i = 0; i < MGB_HIST_BUCKETS; i++)
        dst->b[i] += src->b[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t mgb_hist_quantile(const struct mgb_hist *h, double q)
{
    if (h->count == 0)
        return 0;
    if (q >= 1.0)
        return h->max;
    if (q < 0)
        q = 0;
    uint64_t rank = (uint64_t)(q * (double)h->count);
    if ((double)rank < q * (double)h->count)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < MGB_HIST_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t lo, hi;
            mgb_hist_bounds(i, &lo, &hi);
            uint64_t mid = lo + (hi - lo) / 2;
            if (mid < h->min)
                mid = h->min;
            if (mid > h->max)
                mid = h->max;
            return mid;
        }
    }
    return h->max;
}

double mgb_hist_mean(const struct mgb_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}
