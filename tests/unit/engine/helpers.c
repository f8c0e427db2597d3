/* SPDX-License-Identifier: Apache-2.0 */
/* Fixtures for the engine unit tests (see helpers.h). */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/engine/helpers.h"

char *test_tmpdir(void)
{
    size_t n = strlen(ENG_TEST_TMPDIR) + 32;
    char *p = malloc(n);
    snprintf(p, n, "%s/tmp-XXXXXX", ENG_TEST_TMPDIR);
    if (mkdtemp(p) == NULL) {
        perror("mkdtemp");
        abort();
    }
    return p;
}

static int on_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void test_tmpdir_remove(char *path)
{
    nftw(path, on_remove, 16, FTW_DEPTH | FTW_PHYS);
    free(path);
}

void test_fill(void *p, size_t n, uint64_t seed)
{
    unsigned char *c = p;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c[i] = (unsigned char)x;
    }
}

double test_clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
