/* SPDX-License-Identifier: Apache-2.0 */
/* The parts of test_common (one cmocka group per source file of common/). */
#ifndef MG_TEST_COMMON_H
#define MG_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/sig.h"

#define TEST_AK "AKIAIOSFODNN7EXAMPLE"
#define TEST_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static inline struct mg_str test_str(const char *s)
{
    struct mg_str r = {s, __builtin_strlen(s)};
    return r;
}

/* The fixtures' 1 KiB object (fixtures/clients/README.md "Test-vector parameters"). */
void test_small_object(char out[1024]);

int test_cksum_run(void);
int test_sig_run(void);
int test_chunked_run(void);
int test_fixtures_run(void);

#endif
