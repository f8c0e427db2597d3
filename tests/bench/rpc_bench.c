/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc_bench: calls/s and latency of the internal RPC (meta/rpc.h) on
 * loopback. An echo server runs on its own thread and loop, the client on the
 * main thread keeps `window` small calls in flight on one peer (one TCP
 * connection) until `calls` have completed, and prints calls/s and the p50,
 * p99 and max latency (mrpc_call -> callback). A figure, not a test: nothing
 * is asserted on timing.
 *
 *   rpc_bench [calls (200000)] [window (64)] [payload bytes (64)]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "meta/rpc.h"

static atomic_int g_port;
static uv_async_t g_stop;

static void on_echo(void *data, struct mrpc_call *call, uint16_t method, const void *payload,
                    size_t len)
{
    (void)data;
    (void)method;
    mrpc_reply(call, 0, payload, len);
}

static void on_stop(uv_async_t *a)
{
    mrpc_server_destroy(a->data, NULL, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

static void *server_main(void *arg)
{
    (void)arg;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct mrpc_server *s;
    if (mrpc_server_create(&loop, "127.0.0.1:0", on_echo, NULL, &s) != 0)
        abort();
    mrpc_server_set_max_inflight(s, 4096);
    uv_async_init(&loop, &g_stop, on_stop);
    g_stop.data = s;
    atomic_store(&g_port, mrpc_server_port(s));
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return NULL;
}

struct bench {
    struct mrpc_peer *p;
    unsigned calls, window, sent, done, errors;
    char *payload;
    size_t len;
    uint64_t *lat_ns;   /* by completion */
};

static void send_one(struct bench *b);

static void on_reply(void *data, int status, const void *payload, size_t len)
{
    (void)payload;
    struct bench *b;
    uint64_t *ctx = data;
    memcpy(&b, ctx, sizeof(b));
    b->lat_ns[b->done++] = uv_hrtime() - ctx[1];
    if (status != 0 || len != b->len)
        b->errors++;
    free(data);
    if (b->sent < b->calls)
        send_one(b);
}

static void send_one(struct bench *b)
{
    /* ctx: the bench pointer and the start time */
    uint64_t *ctx = malloc(2 * sizeof(uint64_t));
    memcpy(ctx, &b, sizeof(b));
    ctx[1] = uv_hrtime();
    if (mrpc_call(b->p, 1, b->payload, b->len, 10000, on_reply, ctx) != 0)
        abort();
    b->sent++;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
    return a < c ? -1 : a > c;
}

int main(int argc, char **argv)
{
    struct bench b = {.calls = 200000, .window = 64, .len = 64};
    if (argc > 1)
        b.calls = (unsigned)atoi(argv[1]);
    if (argc > 2)
        b.window = (unsigned)atoi(argv[2]);
    if (argc > 3)
        b.len = (size_t)atoi(argv[3]);
    if (b.calls == 0 || b.window == 0 || b.window > 4096)
        return 2;
    pthread_t t;
    pthread_create(&t, NULL, server_main, NULL);
    while (atomic_load(&g_port) == 0)
        ;
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", atomic_load(&g_port));
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct mrpc_peer_opts o = {.max_inflight = b.window};
    if (mrpc_peer_create(&loop, addr, &o, &b.p) != 0)
        return 1;
    b.payload = calloc(1, b.len + 1);
    b.lat_ns = calloc(b.calls, sizeof(*b.lat_ns));
    uint64_t t0 = uv_hrtime();
    for (unsigned i = 0; i < b.window && b.sent < b.calls; i++)
        send_one(&b);
    while (b.done < b.calls)
        uv_run(&loop, UV_RUN_ONCE);
    uint64_t t1 = uv_hrtime();
    mrpc_peer_destroy(b.p, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    uv_async_send(&g_stop);
    pthread_join(t, NULL);
    qsort(b.lat_ns, b.calls, sizeof(*b.lat_ns), cmp_u64);
    double secs = (double)(t1 - t0) / 1e9;
    printf("calls=%u window=%u payload=%zu errors=%u calls/s=%.0f p50_us=%.1f p99_us=%.1f "
           "max_us=%.1f\n",
           b.calls, b.window, b.len, b.errors, b.calls / secs,
           b.lat_ns[b.calls / 2] / 1e3, b.lat_ns[(size_t)(b.calls * 0.99)] / 1e3,
           b.lat_ns[b.calls - 1] / 1e3);
    free(b.payload);
    free(b.lat_ns);
    return b.errors != 0;
}
