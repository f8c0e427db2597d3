/* SPDX-License-Identifier: Apache-2.0 */
/* test_engine: runs the KV-store and blob-store suites; the exit code is the failure count. */
#include "tests/unit/engine/helpers.h"

int main(void)
{
    return test_db_run() + test_blob_run();
}
