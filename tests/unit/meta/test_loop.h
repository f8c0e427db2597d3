/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loop helpers of the RPC tests (test_rpc.c, test_remote.c): run a libuv loop
 * until a flag is set, with a time bound.
 */
#ifndef MG_TEST_LOOP_H
#define MG_TEST_LOOP_H

#include <uv.h>

static inline void test_loop_on_timer(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Run loop until *flag is set, at most ms. Returns *flag. */
static inline int run_until(uv_loop_t *loop, const int *flag, unsigned ms)
{
    int expired = 0;
    uv_timer_t t;
    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, test_loop_on_timer, ms, 0);
    while (!*flag && !expired)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return *flag;
}

#endif
