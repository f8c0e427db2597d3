/* SPDX-License-Identifier: Apache-2.0 */
/* xoshiro256** and the samplers of rng.h. */
#include "tests/bench/rng.h"

#include <assert.h>
#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void mgb_rng_seed(struct mgb_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t mgb_rng_next(struct mgb_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t mgb_rng_below(struct mgb_rng *r, uint64_t n)
{
    assert(n > 0);
    if (n <= UINT32_MAX)
        return ((mgb_rng_next(r) >> 32) * n) >> 32;
    return mgb_rng_next(r) % n;
}

double mgb_rng_double(struct mgb_rng *r)
{
    return (double)(mgb_rng_next(r) >> 11) * 0x1.0p-53;
}

double mgb_pareto(struct mgb_rng *r, double alpha, double xm)
{
    assert(alpha > 0 && xm > 0);
    double u = 1.0 - mgb_rng_double(r); /* (0, 1] */
    return xm / pow(u, 1.0 / alpha);
}

size_t mgb_rng_pick(struct mgb_rng *r, const double *cum, size_t n)
{
    assert(n > 0 && cum[n - 1] > 0);
    double x = mgb_rng_double(r) * cum[n - 1];
    for (size_t i = 0; i < n; i++)
        if (x < cum[i])
            return i;
    return n - 1;
}
