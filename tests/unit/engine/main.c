/* SPDX-License-Identifier: Apache-2.0 */
/* test_engine: runs the KV-store, blob-store and delete-tracker suites; the exit code is the
 * failure count. */
#include "tests/unit/engine/helpers.h"

int test_tracker_run(void); /* test_tracker.c */

int main(void)
{
    return test_db_run() + test_blob_run() + test_tracker_run();
}
