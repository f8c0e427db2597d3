/* SPDX-License-Identifier: Apache-2.0 */
/* test_common: runs every group; the exit code counts failed tests. */
#include <string.h>

#include "tests/unit/common/test_common.h"

void test_small_object(char out[1024])
{
    static const char line[] = "The quick brown fox jumps over the lazy dog 0123456789.\n";
    for (int i = 0; i < 18; i++)
        memcpy(out + 56 * i, line, 56);
    memcpy(out + 18 * 56, "The quick brown\n", 16);
}

int main(void)
{
    int failed = 0;
    failed += test_cksum_run();
    failed += test_sig_run();
    failed += test_chunked_run();
    failed += test_fixtures_run();
    return failed;
}
