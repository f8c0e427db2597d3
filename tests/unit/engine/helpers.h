/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fixtures shared by the engine unit tests: a temporary directory under the
 * build tree (removed with everything in it), deterministic pseudo-random
 * bytes, and the suite entry points main.c runs.
 */
#ifndef MG_TEST_ENGINE_HELPERS_H
#define MG_TEST_ENGINE_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* mkdtemp under the build directory; returns a malloc'ed path. */
char *test_tmpdir(void);
/* rm -r path, then free it. */
void test_tmpdir_remove(char *path);
/* Fill p with n bytes determined by seed. */
void test_fill(void *p, size_t n, uint64_t seed);
/* Clock id's time in milliseconds (CLOCK_MONOTONIC for wall time, CLOCK_THREAD_CPUTIME_ID for
 * the calling thread's CPU time). */
double test_clock_ms(clockid_t id);

int test_db_run(void);
int test_blob_run(void);

#endif
