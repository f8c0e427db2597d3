/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/rpc.c unit tests: the frame codec, and a real server and peer on one
 * libuv loop over loopback TCP (127.0.0.1, free ports): pipelining, replies
 * out of order, backpressure at the server's bound, MG_ESLOWDOWN at the
 * peer's, a server dying mid-call (MG_EIO), timeouts, reconnect after the
 * server restarts on the same port, and garbage or oversize frames closing
 * only the connection that sent them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/common.h"
#include "meta/rpc.h"
#include "tests/unit/meta/test_loop.h"

/* ---------------------------------------------------------------- harness */

static void run_ms(uv_loop_t *loop, unsigned ms)
{
    int never = 0;
    run_until(loop, &never, ms);
}

static void on_flag(void *data)
{
    *(int *)data = 1;
}

static void drain(uv_loop_t *loop)
{
    for (int i = 0; i < 100 && uv_run(loop, UV_RUN_NOWAIT) != 0; i++)
        ;
}

/* The server side: echoes, or holds calls for the test to answer. */
#define HELD_MAX 4096
struct srv {
    uv_loop_t *loop;
    struct mrpc_server *s;
    char addr[32];
    int hold;                       /* keep calls in held[] instead of answering */
    struct mrpc_call *held[HELD_MAX];
    size_t nheld;
    unsigned handled;               /* handler invocations */
};

static void on_request(void *data, struct mrpc_call *call, uint16_t method, const void *payload,
                       size_t len)
{
    struct srv *v = data;
    v->handled++;
    if (v->hold) {
        assert_true(v->nheld < HELD_MAX);
        v->held[v->nheld++] = call;
        return;
    }
    /* method 7 answers an error status with the payload as its body */
    mrpc_reply(call, method == 7 ? MG_ENOSUCHKEY : 0, payload, len);
}

static void srv_start(struct srv *v, uv_loop_t *loop, int port)
{
    memset(v, 0, sizeof(*v));
    v->loop = loop;
    char a[32];
    snprintf(a, sizeof(a), "127.0.0.1:%d", port);
    assert_int_equal(mrpc_server_create(loop, a, on_request, v, &v->s), 0);
    snprintf(v->addr, sizeof(v->addr), "127.0.0.1:%d", mrpc_server_port(v->s));
}

static void srv_stop(struct srv *v)
{
    int done = 0;
    mrpc_server_destroy(v->s, on_flag, &done);
    assert_true(run_until(v->loop, &done, 2000));
    v->s = NULL;
}

/* The client side: outcomes by call index. */
#define CALLS_MAX 20000
struct res {
    int done;
    int status;
    size_t len;
    unsigned char first; /* first payload byte */
    uint32_t tag;        /* first 4 payload bytes */
};
struct cli {
    struct res r[CALLS_MAX];
    unsigned ndone;
    unsigned order[CALLS_MAX]; /* completion order */
};
struct ctx {
    struct cli *c;
    unsigned i;
};
static struct ctx ctxs[CALLS_MAX];

static void on_result(void *data, int status, const void *payload, size_t len)
{
    struct ctx *x = data;
    struct res *r = &x->c->r[x->i];
    assert_false(r->done); /* exactly once */
    r->done = 1;
    r->status = status;
    r->len = len;
    if (len > 0)
        r->first = ((const unsigned char *)payload)[0];
    if (len >= 4)
        memcpy(&r->tag, payload, 4);
    x->c->order[x->c->ndone++] = x->i;
}

static int call_tag(struct mrpc_peer *p, struct cli *c, unsigned i, uint16_t method,
                    unsigned timeout_ms)
{
    ctxs[i] = (struct ctx){c, i};
    uint32_t tag = i;
    return mrpc_call(p, method, &tag, sizeof(tag), timeout_ms, on_result, &ctxs[i]);
}

static void peer_stop(uv_loop_t *loop, struct mrpc_peer *p)
{
    int done = 0;
    mrpc_peer_destroy(p, on_flag, &done);
    assert_true(run_until(loop, &done, 2000));
}

struct fx {
    uv_loop_t loop;
    struct srv v;
    struct cli *c;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    uv_loop_init(&f->loop);
    f->c = calloc(1, sizeof(*f->c));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    drain(&f->loop);
    assert_int_equal(uv_loop_close(&f->loop), 0); /* every handle closed */
    free(f->c);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------ frames */

static void test_frame_codec(void **state)
{
    (void)state;
    struct mrpc_hdr h = {.kind = MRPC_KIND_RESPONSE, .method = 0x1234,
                         .call_id = 0x0102030405060708ULL, .status = MG_ENOTLEADER, .len = 5};
    unsigned char buf[MRPC_HDR_LEN + 5];
    mrpc_hdr_encode(&h, buf);
    memcpy(buf + MRPC_HDR_LEN, "hello", 5);
    /* little endian, fixed layout */
    assert_memory_equal(buf, "MRPC\x01\x02\x34\x12\x08\x07\x06\x05\x04\x03\x02\x01", 16);
    struct mrpc_hdr g;
    size_t flen;
    for (size_t n = 0; n < sizeof(buf); n++) {
        assert_int_equal(mrpc_frame_parse(buf, n, &g, &flen), 0);
        assert_int_equal(flen, 0); /* every prefix: wait for more */
    }
    assert_int_equal(mrpc_frame_parse(buf, sizeof(buf), &g, &flen), 0);
    assert_int_equal(flen, sizeof(buf));
    assert_int_equal(g.kind, h.kind);
    assert_int_equal(g.method, h.method);
    assert_true(g.call_id == h.call_id);
    assert_int_equal(g.status, h.status);
    assert_int_equal(g.len, 5);

    unsigned char bad[sizeof(buf)];
    struct {
        size_t off;
        unsigned char v;
        int rv;
    } cases[] = {
        {0, 'X', MG_ECORRUPT},   /* magic */
        {4, 2, MG_ECORRUPT},     /* version */
        {5, 0, MG_ECORRUPT},     /* kind */
        {5, 3, MG_ECORRUPT},
        {19, 0x80, MG_ECORRUPT}, /* negative status */
        {23, 0x10, MG_EENTITYTOOLARGE}, /* 256 MiB */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(bad, buf, sizeof(buf));
        bad[cases[i].off] = cases[i].v;
        assert_int_equal(mrpc_frame_parse(bad, MRPC_HDR_LEN, &g, &flen), cases[i].rv);
    }
    /* a request with a status */
    h.kind = MRPC_KIND_REQUEST;
    h.status = 0;
    mrpc_hdr_encode(&h, bad);
    bad[16] = 1;
    assert_int_equal(mrpc_frame_parse(bad, MRPC_HDR_LEN, &g, &flen), MG_ECORRUPT);
    /* exactly the bound is fine */
    h.len = MRPC_PAYLOAD_MAX;
    mrpc_hdr_encode(&h, bad);
    assert_int_equal(mrpc_frame_parse(bad, MRPC_HDR_LEN, &g, &flen), 0);
    assert_int_equal(flen, 0);
}

static void test_bad_address(void **state)
{
    struct fx *f = *state;
    struct mrpc_server *s;
    struct mrpc_peer *p;
    const char *bad[] = {"", "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:70000",
                         "nohost:80", NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        assert_int_equal(mrpc_server_create(&f->loop, bad[i], on_request, NULL, &s), MG_ECONFIG);
        assert_int_equal(mrpc_peer_create(&f->loop, bad[i], NULL, &p), MG_ECONFIG);
    }
    /* a port in use */
    srv_start(&f->v, &f->loop, 0);
    assert_int_equal(mrpc_server_create(&f->loop, f->v.addr, on_request, NULL, &s), MG_EIO);
    srv_stop(&f->v);
}

/* ---------------------------------------------------------------- calls */

static void test_echo_and_status(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, NULL, &p), 0);
    assert_int_equal(call_tag(p, f->c, 0, 1, 2000), 0);
    assert_int_equal(call_tag(p, f->c, 1, 7, 2000), 0);
    assert_int_equal(f->c->ndone, 0); /* never inside mrpc_call */
    /* an empty payload */
    ctxs[2] = (struct ctx){f->c, 2};
    assert_int_equal(mrpc_call(p, 3, NULL, 0, 0, on_result, &ctxs[2]), 0);
    while (f->c->ndone < 3)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(f->c->r[0].status, 0);
    assert_int_equal(f->c->r[0].tag, 0);
    assert_int_equal(f->c->r[1].status, MG_ENOSUCHKEY);
    assert_int_equal(f->c->r[1].tag, 1);
    assert_int_equal(f->c->r[2].status, 0);
    assert_int_equal(f->c->r[2].len, 0);
    assert_int_equal(mrpc_peer_inflight(p), 0);
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

static void test_pipelining(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    struct mrpc_peer_opts o = {.max_inflight = 10000};
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, &o, &p), 0);
    const unsigned n = 10000;
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(call_tag(p, f->c, i, 1, 10000), 0);
    assert_int_equal(mrpc_peer_inflight(p), n);
    while (f->c->ndone < n)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(f->c->r[i].status, 0);
        assert_int_equal(f->c->r[i].tag, i); /* each reply matched its call */
    }
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

static void test_out_of_order(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    f->v.hold = 1;
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, NULL, &p), 0);
    const unsigned n = 100;
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(call_tag(p, f->c, i, 1, 5000), 0);
    while (f->v.nheld < n)
        uv_run(&f->loop, UV_RUN_ONCE);
    /* answer last first, each with a payload naming the position it was answered at */
    for (unsigned j = 0; j < n; j++) {
        uint32_t pos = j;
        mrpc_reply(f->v.held[n - 1 - j], 0, &pos, sizeof(pos));
    }
    while (f->c->ndone < n)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(f->c->r[i].tag, n - 1 - i);
        assert_int_equal(f->c->order[i], n - 1 - i);
    }
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

/* The server reads no further than its bound: the handler sees max_inflight calls, the rest
 * wait in the socket (and the client's buffer), and flow resumes as calls are answered. */
static void test_backpressure(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    mrpc_server_set_max_inflight(f->v.s, 4);
    f->v.hold = 1;
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, NULL, &p), 0);
    const unsigned n = 50;
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(call_tag(p, f->c, i, 1, 10000), 0);
    run_ms(&f->loop, 200);
    assert_int_equal(f->v.handled, 4);
    unsigned answered = 0;
    while (answered < n) {
        size_t k = f->v.nheld;
        assert_true(k - answered <= 4); /* never more than the bound unanswered */
        for (size_t j = answered; j < k; j++)
            mrpc_reply(f->v.held[j], 0, NULL, 0);
        answered = (unsigned)k;
        run_ms(&f->loop, 5);
    }
    while (f->c->ndone < n)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(f->c->r[i].status, 0);
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

static void test_peer_slowdown(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    f->v.hold = 1;
    struct mrpc_peer_opts o = {.max_inflight = 8};
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, &o, &p), 0);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(call_tag(p, f->c, i, 1, 5000), 0);
    assert_int_equal(call_tag(p, f->c, 8, 1, 5000), MG_ESLOWDOWN);
    assert_int_equal(mrpc_call(p, 1, "x", MRPC_PAYLOAD_MAX + (size_t)1, 0, on_result, NULL),
                     MG_ESLOWDOWN); /* the bound is checked first */
    while (f->v.nheld < 8)
        uv_run(&f->loop, UV_RUN_ONCE);
    mrpc_reply(f->v.held[0], 0, NULL, 0);
    while (f->c->ndone < 1)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(call_tag(p, f->c, 8, 1, 5000), 0); /* room again */
    /* destroy with calls outstanding: each fails with MG_ESHUTDOWN inside destroy */
    int done = 0;
    mrpc_peer_destroy(p, on_flag, &done);
    assert_int_equal(f->c->ndone, 9);
    for (unsigned i = 1; i < 9; i++)
        assert_int_equal(f->c->r[i].status, MG_ESHUTDOWN);
    assert_true(run_until(&f->loop, &done, 2000));
    /* the held calls' replies are dropped safely once their connection is gone */
    run_ms(&f->loop, 50);
    for (size_t j = 1; j < f->v.nheld; j++)
        mrpc_reply(f->v.held[j], 0, "late", 4);
    srv_stop(&f->v);
}

static void test_large_payload(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, NULL, &p), 0);
    size_t n = 10u << 20;
    unsigned char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = (unsigned char)(i * 7 + 3);
    ctxs[0] = (struct ctx){f->c, 0};
    assert_int_equal(mrpc_call(p, 1, big, n, 10000, on_result, &ctxs[0]), 0);
    assert_int_equal(mrpc_call(p, 1, big, MRPC_PAYLOAD_MAX + (size_t)1, 0, on_result, NULL),
                     MG_EENTITYTOOLARGE);
    free(big); /* copied */
    assert_true(run_until(&f->loop, &f->c->r[0].done, 10000));
    assert_int_equal(f->c->r[0].status, 0);
    assert_int_equal(f->c->r[0].len, n);
    assert_int_equal(f->c->r[0].first, 3);
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

/* ------------------------------------------------------------- failures */

static void test_timeout(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    f->v.hold = 1;
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, NULL, &p), 0);
    assert_int_equal(call_tag(p, f->c, 0, 1, 100), 0);
    assert_int_equal(call_tag(p, f->c, 1, 1, 0), 0);   /* no timeout */
    assert_int_equal(call_tag(p, f->c, 2, 1, 300), 0);
    uint64_t t0 = uv_now(&f->loop);
    assert_true(run_until(&f->loop, &f->c->r[0].done, 2000));
    assert_int_equal(f->c->r[0].status, MG_ETIMEOUT);
    assert_true(uv_now(&f->loop) - t0 >= 90);
    assert_true(run_until(&f->loop, &f->c->r[2].done, 2000));
    assert_int_equal(f->c->r[2].status, MG_ETIMEOUT);
    assert_false(f->c->r[1].done);
    /* the late replies of the timed-out calls are ignored; the other one still arrives */
    while (f->v.nheld < 3)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (size_t j = 0; j < 3; j++)
        mrpc_reply(f->v.held[j], 0, NULL, 0);
    assert_true(run_until(&f->loop, &f->c->r[1].done, 2000));
    assert_int_equal(f->c->r[1].status, 0);
    assert_int_equal(f->c->ndone, 3);
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

/* The server goes away with calls in flight: they fail with MG_EIO (outcome unknown); the
 * peer reconnects to a server restarted on the same port. */
static void test_server_dies_then_restarts(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    int port = mrpc_server_port(f->v.s);
    f->v.hold = 1;
    struct mrpc_peer_opts o = {.backoff_min_ms = 10, .backoff_max_ms = 40};
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, &o, &p), 0);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(call_tag(p, f->c, i, 1, 5000), 0);
    while (f->v.nheld < 5)
        uv_run(&f->loop, UV_RUN_ONCE);
    struct mrpc_call *held[5];
    memcpy(held, f->v.held, sizeof(held));
    srv_stop(&f->v);
    while (f->c->ndone < 5)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (unsigned i = 0; i < 5; i++)
        assert_int_equal(f->c->r[i].status, MG_EIO);
    for (unsigned i = 0; i < 5; i++)
        mrpc_reply(held[i], 0, NULL, 0); /* dropped: the server is gone */
    /* nobody listening: the connect fails, MG_EIO again */
    assert_int_equal(call_tag(p, f->c, 5, 1, 5000), 0);
    assert_true(run_until(&f->loop, &f->c->r[5].done, 2000));
    assert_int_equal(f->c->r[5].status, MG_EIO);
    /* a call made during the backoff waits for the next attempt, which finds the server */
    assert_int_equal(call_tag(p, f->c, 6, 1, 5000), 0);
    srv_start(&f->v, &f->loop, port);
    assert_true(run_until(&f->loop, &f->c->r[6].done, 2000));
    assert_int_equal(f->c->r[6].status, 0);
    assert_int_equal(f->c->r[6].tag, 6);
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

/* A raw TCP client for garbage. */
struct raw {
    uv_tcp_t tcp;
    uv_connect_t creq;
    uv_write_t wreq;
    int connected, closed_by_peer, closed;
    size_t got;
};

static void on_raw_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    (void)h;
    (void)s;
    static char buf[4096];
    *b = uv_buf_init(buf, sizeof(buf));
}

static void on_raw_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)b;
    struct raw *r = s->data;
    if (n > 0)
        r->got += (size_t)n;
    else if (n < 0)
        r->closed_by_peer = 1;
}

static void on_raw_connected(uv_connect_t *req, int status)
{
    struct raw *r = req->data;
    assert_int_equal(status, 0);
    r->connected = 1;
    uv_read_start((uv_stream_t *)&r->tcp, on_raw_alloc, on_raw_read);
}

static void on_raw_written(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

static void on_raw_closed(uv_handle_t *h)
{
    ((struct raw *)h->data)->closed = 1;
}

static void raw_send(uv_loop_t *loop, const char *addr, const void *bytes, size_t len,
                     struct raw *r)
{
    memset(r, 0, sizeof(*r));
    struct sockaddr_in sa;
    const char *colon = strrchr(addr, ':');
    uv_ip4_addr("127.0.0.1", atoi(colon + 1), &sa);
    uv_tcp_init(loop, &r->tcp);
    r->tcp.data = r;
    r->creq.data = r;
    uv_tcp_connect(&r->creq, &r->tcp, (const struct sockaddr *)&sa, on_raw_connected);
    assert_true(run_until(loop, &r->connected, 2000));
    uv_buf_t b = uv_buf_init((char *)bytes, (unsigned)len);
    uv_write(&r->wreq, (uv_stream_t *)&r->tcp, &b, 1, on_raw_written);
}

static void test_garbage_closes_only_that_connection(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, f->v.addr, NULL, &p), 0);
    f->v.hold = 1;
    assert_int_equal(call_tag(p, f->c, 0, 1, 5000), 0); /* in flight across the garbage */
    while (f->v.nheld < 1)
        uv_run(&f->loop, UV_RUN_ONCE);

    unsigned char frame[MRPC_HDR_LEN];
    struct {
        const char *what;
        unsigned char bytes[MRPC_HDR_LEN];
    } bad[5];
    memcpy(bad[0].bytes, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", MRPC_HDR_LEN);
    bad[0].what = "http";
    mrpc_hdr_encode(&(struct mrpc_hdr){.kind = MRPC_KIND_REQUEST, .len = 0}, frame);
    memcpy(bad[1].bytes, frame, sizeof(frame));
    bad[1].bytes[20] = 0x01; /* length 64 MiB + 1 */
    bad[1].bytes[23] = 0x04;
    bad[1].what = "oversize";
    mrpc_hdr_encode(&(struct mrpc_hdr){.kind = MRPC_KIND_RESPONSE}, bad[2].bytes);
    bad[2].what = "response to a server";
    memcpy(bad[3].bytes, frame, sizeof(frame));
    bad[3].bytes[4] = 9;
    bad[3].what = "version";
    memcpy(bad[4].bytes, frame, sizeof(frame));
    bad[4].bytes[16] = 5;
    bad[4].what = "request with status";
    for (int i = 0; i < 5; i++) {
        struct raw r;
        raw_send(&f->loop, f->v.addr, bad[i].bytes, MRPC_HDR_LEN, &r);
        if (!run_until(&f->loop, &r.closed_by_peer, 2000))
            fail_msg("server kept a connection that sent %s", bad[i].what);
        assert_int_equal(r.got, 0);
        uv_close((uv_handle_t *)&r.tcp, on_raw_closed);
        assert_true(run_until(&f->loop, &r.closed, 1000));
    }
    assert_int_equal(f->v.handled, 1); /* no garbage reached the handler */
    /* the good connection lived through it */
    f->v.hold = 0;
    mrpc_reply(f->v.held[0], 0, NULL, 0);
    assert_int_equal(call_tag(p, f->c, 1, 1, 5000), 0);
    while (f->c->ndone < 2)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(f->c->r[0].status, 0);
    assert_int_equal(f->c->r[1].status, 0);
    peer_stop(&f->loop, p);
    srv_stop(&f->v);
}

/* A "server" that answers every connection with bytes that are no response frame: the
 * peer closes that connection and its calls fail with MG_EIO (outcome unknown). */
struct junk_srv {
    uv_tcp_t listener;
    uv_tcp_t conn;
    uv_write_t w;
    const unsigned char *bytes;
    size_t len;
    int accepted, closed;
};

static void on_junk_closed(uv_handle_t *h)
{
    ((struct junk_srv *)h->data)->closed++;
}

static void on_junk_conn(uv_stream_t *l, int status)
{
    struct junk_srv *j = l->data;
    assert_int_equal(status, 0);
    assert_int_equal(j->accepted, 0);
    uv_tcp_init(l->loop, &j->conn);
    j->conn.data = j;
    assert_int_equal(uv_accept(l, (uv_stream_t *)&j->conn), 0);
    j->accepted = 1;
    uv_buf_t b = uv_buf_init((char *)j->bytes, (unsigned)j->len);
    uv_write(&j->w, (uv_stream_t *)&j->conn, &b, 1, on_raw_written);
}

static void test_garbage_from_server(void **state)
{
    struct fx *f = *state;
    unsigned char req[MRPC_HDR_LEN], oversize[MRPC_HDR_LEN];
    mrpc_hdr_encode(&(struct mrpc_hdr){.kind = MRPC_KIND_REQUEST, .call_id = 1}, req);
    mrpc_hdr_encode(&(struct mrpc_hdr){.kind = MRPC_KIND_RESPONSE, .call_id = 1}, oversize);
    oversize[23] = 0x10; /* 256 MiB */
    const unsigned char *cases[] = {(const unsigned char *)"HTTP/1.1 400 Bad Request\r\n\r\n..",
                                    req, oversize};
    for (int i = 0; i < 3; i++) {
        struct junk_srv j = {.bytes = cases[i], .len = MRPC_HDR_LEN};
        uv_tcp_init(&f->loop, &j.listener);
        j.listener.data = &j;
        struct sockaddr_in sa;
        uv_ip4_addr("127.0.0.1", 0, &sa);
        assert_int_equal(uv_tcp_bind(&j.listener, (const struct sockaddr *)&sa, 0), 0);
        assert_int_equal(uv_listen((uv_stream_t *)&j.listener, 8, on_junk_conn), 0);
        int len = sizeof(sa);
        uv_tcp_getsockname(&j.listener, (struct sockaddr *)&sa, &len);
        char a[32];
        snprintf(a, sizeof(a), "127.0.0.1:%d", ntohs(sa.sin_port));
        struct mrpc_peer *p;
        assert_int_equal(mrpc_peer_create(&f->loop, a, NULL, &p), 0);
        memset(f->c, 0, sizeof(*f->c));
        assert_int_equal(call_tag(p, f->c, 0, 1, 5000), 0);
        assert_int_equal(call_tag(p, f->c, 1, 1, 5000), 0);
        while (f->c->ndone < 2)
            uv_run(&f->loop, UV_RUN_ONCE);
        assert_int_equal(f->c->r[0].status, MG_EIO);
        assert_int_equal(f->c->r[1].status, MG_EIO);
        peer_stop(&f->loop, p);
        uv_close((uv_handle_t *)&j.conn, on_junk_closed);
        uv_close((uv_handle_t *)&j.listener, on_junk_closed);
        while (j.closed < 2)
            uv_run(&f->loop, UV_RUN_ONCE);
    }
}

/* A reply status this build does not know arrives as MG_EINTERNAL. */
static void on_garbage_request(void *data, struct mrpc_call *call, uint16_t method,
                               const void *payload, size_t len)
{
    (void)data;
    (void)method;
    (void)payload;
    (void)len;
    mrpc_reply(call, MG_ERR__COUNT + 5, NULL, 0); /* a status this build does not know */
}

static void test_unknown_status(void **state)
{
    struct fx *f = *state;
    struct mrpc_server *s;
    assert_int_equal(mrpc_server_create(&f->loop, "127.0.0.1:0", on_garbage_request, NULL, &s), 0);
    char a[32];
    snprintf(a, sizeof(a), "127.0.0.1:%d", mrpc_server_port(s));
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, a, NULL, &p), 0);
    assert_int_equal(call_tag(p, f->c, 0, 1, 5000), 0);
    assert_true(run_until(&f->loop, &f->c->r[0].done, 2000));
    assert_int_equal(f->c->r[0].status, MG_EINTERNAL);
    peer_stop(&f->loop, p);
    int done = 0;
    mrpc_server_destroy(s, on_flag, &done);
    assert_true(run_until(&f->loop, &done, 2000));
}

/* A refused connect fails the calls waiting for it (MG_EIO) and the next attempt waits out
 * the backoff. */
static void test_refused_backoff(void **state)
{
    struct fx *f = *state;
    srv_start(&f->v, &f->loop, 0);
    char addr[32];
    memcpy(addr, f->v.addr, sizeof(addr));
    srv_stop(&f->v);
    struct mrpc_peer_opts o = {.backoff_min_ms = 50, .backoff_max_ms = 50};
    struct mrpc_peer *p;
    assert_int_equal(mrpc_peer_create(&f->loop, addr, &o, &p), 0);
    assert_int_equal(call_tag(p, f->c, 0, 1, 5000), 0);
    assert_true(run_until(&f->loop, &f->c->r[0].done, 2000));
    assert_int_equal(f->c->r[0].status, MG_EIO);
    uint64_t t0 = uv_now(&f->loop);
    assert_int_equal(call_tag(p, f->c, 1, 1, 5000), 0);
    assert_true(run_until(&f->loop, &f->c->r[1].done, 2000));
    assert_int_equal(f->c->r[1].status, MG_EIO);
    assert_true(uv_now(&f->loop) - t0 >= 20); /* waited out the backoff (25..50 ms) */
    peer_stop(&f->loop, p);
}

int main(void)
{
    mg_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_codec),
        cmocka_unit_test_setup_teardown(test_bad_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_echo_and_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelining, setup, teardown),
        cmocka_unit_test_setup_teardown(test_out_of_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_slowdown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_payload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_dies_then_restarts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_closes_only_that_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_garbage_from_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_backoff, setup, teardown),
    };
    return cmocka_run_group_tests_name("rpc", tests, NULL, NULL);
}
