/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Latency histogram for mgbench: HDR-style log-linear buckets over
 * nanoseconds. Values below 128 ns get one bucket each; above, every power of
 * two is split into 64 equal buckets, so any recorded value is known to within
 * 1/64 (1.6 %) of itself and a percentile is reported as its bucket's midpoint
 * (error < 0.8 %). Count, sum, min and max are exact. Fixed size (about 18
 * KiB), no allocation, so each worker thread keeps one per operation and the
 * main thread merges them after the run (addition of bucket counts).
 * Not thread-safe: one writer per histogram.
 */
#ifndef MGB_HIST_H
#define MGB_HIST_H

#include <stdint.h>

#define MGB_HIST_SUB_BITS 7                                /* 128 linear buckets */
#define MGB_HIST_HALF (1u << (MGB_HIST_SUB_BITS - 1))      /* 64 buckets per octave */
#define MGB_HIST_MAX_BITS 40                               /* values < 2^40 ns (~18 min) */
#define MGB_HIST_BUCKETS                                                                           \
    ((1u << MGB_HIST_SUB_BITS) + (MGB_HIST_MAX_BITS - MGB_HIST_SUB_BITS) * MGB_HIST_HALF)

struct mgb_hist {
    uint64_t count;                   /* values recorded */
    uint64_t sum;                     /* sum of values (ns) */
    uint64_t min;                     /* smallest value, UINT64_MAX when empty */
    uint64_t max;                     /* largest value, 0 when empty */
    uint64_t b[MGB_HIST_BUCKETS];     /* bucket counts */
};

void mgb_hist_init(struct mgb_hist *h);
/* Record one value in ns; values >= 2^40 are clamped into the last bucket (max stays exact). */
void mgb_hist_record(struct mgb_hist *h, uint64_t v);
/* dst += src. */
void mgb_hist_merge(struct mgb_hist *dst, const struct mgb_hist *src);
/* Value at quantile q in [0, 1] (0.99 = p99): the midpoint of the bucket holding the
 * ceil(q * count)-th smallest value, clamped to [min, max]; q >= 1 gives max exactly.
 * Returns 0 for an empty histogram. */
uint64_t mgb_hist_quantile(const struct mgb_hist *h, double q);
double mgb_hist_mean(const struct mgb_hist *h);

/* Bucket helpers (exposed for the unit test). */
unsigned mgb_hist_index(uint64_t v);
void mgb_hist_bounds(unsigned idx, uint64_t *lo, uint64_t *hi);

#endif
