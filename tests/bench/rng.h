/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Random numbers for mgbench: xoshiro256** (Blackman and Vigna), seeded
 * through splitmix64, one generator per thread, and the samplers the
 * workloads need: uniform integers, uniform doubles, weighted choice and the
 * Pareto distribution of the Spotify offered rate (the λFS paper: alpha 2,
 * location = --rate).
 */
#ifndef MGB_RNG_H
#define MGB_RNG_H

#include <stddef.h>
#include <stdint.h>

struct mgb_rng {
    uint64_t s[4]; /* xoshiro256** state, never all zero */
};

void mgb_rng_seed(struct mgb_rng *r, uint64_t seed);
uint64_t mgb_rng_next(struct mgb_rng *r);
/* Uniform in [0, n) (n > 0), Lemire's multiply-shift (bias < 2^-32 for n < 2^32). */
uint64_t mgb_rng_below(struct mgb_rng *r, uint64_t n);
/* Uniform in [0, 1) with 53 random bits. */
double mgb_rng_double(struct mgb_rng *r);
/* Pareto(alpha, xm): xm / U^(1/alpha) with U uniform in (0, 1]; always >= xm. The mean is
 * alpha * xm / (alpha - 1) for alpha > 1 and the median xm * 2^(1/alpha). */
double mgb_pareto(struct mgb_rng *r, double alpha, double xm);
/* Index i with probability w[i] / sum(w) (cumulative weights cum[0..n-1], cum[n-1] > 0). */
size_t mgb_rng_pick(struct mgb_rng *r, const double *cum, size_t n);

#endif
