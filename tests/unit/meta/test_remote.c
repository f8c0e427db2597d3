/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/remote.c unit tests: ops forwarded over a real loopback RPC to a real
 * store (RocksDB + raft group in a temp dir) and their results decoded back.
 * The remote layer runs on a runtime of the test's own (its loop is the test
 * thread's, its ms the store): meta__remote_listen submits through a
 * meta_client on that loop exactly as on the meta thread, so the op path under
 * test is the store's real one (queue, dedup, proposal), while the test can
 * drive the loop. The read fence runs against a raft host and groups on the
 * same loop, seen through a stand-in struct meta__shards.
 */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta/opcodec.h"
#include "meta/remote.h"
#include "meta/shard.h"
#include "tests/unit/meta/test_loop.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})
#define NODE 2     /* the node id the test maps to its own server */
#define NOBODY 3   /* a node id mapped to a port nobody listens on */

struct fx {
    char dir[64];
    struct meta_store *ms;
    struct meta__rt rt; /* the test's runtime: loop + ms */
    char addr[32];
};

static int on_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int free_port(void)
{
    uv_loop_t l;
    uv_loop_init(&l);
    uv_tcp_t t;
    uv_tcp_init(&l, &t);
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", 0, &sa);
    uv_tcp_bind(&t, (const struct sockaddr *)&sa, 0);
    int len = sizeof(sa);
    uv_tcp_getsockname(&t, (struct sockaddr *)&sa, &len);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&l, UV_RUN_DEFAULT);
    uv_loop_close(&l);
    return ntohs(sa.sin_port);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_remote.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    struct meta_opts o = {.data_dir = f->dir, .inline_max_bytes = 64};
    char errmsg[256];
    int rv = meta_store_open(&o, &f->ms, errmsg);
    if (rv != 0)
        fail_msg("meta_store_open: %s %s", mg_err_name(rv), errmsg);
    f->ms->free_grace_ms = 0;
    f->rt.ms = f->ms;
    uv_loop_init(&f->rt.loop);
    assert_int_equal(meta__remote_listen(&f->rt, "127.0.0.1:0"), 0);
    assert_int_equal(meta__remote_listen(&f->rt, "127.0.0.1:0"), MG_EINVALIDARGUMENT);
    snprintf(f->addr, sizeof(f->addr), "127.0.0.1:%d", meta__remote_port(&f->rt));
    meta__remote_set_node(&f->rt, NODE, f->addr);
    char nobody[32];
    snprintf(nobody, sizeof(nobody), "127.0.0.1:%d", free_port());
    meta__remote_set_node(&f->rt, NOBODY, nobody);
    *state = f;
    return 0;
}

static int g_closed; /* meta__remote_close's callback ran */

static void on_closed(struct meta__rt *rt)
{
    (void)rt;
    g_closed = 1;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    g_closed = 0;
    meta__remote_close(&f->rt, on_closed);
    assert_true(run_until(&f->rt.loop, &g_closed, 5000));
    for (int i = 0; i < 100 && uv_run(&f->rt.loop, UV_RUN_NOWAIT) != 0; i++)
        ;
    assert_int_equal(uv_loop_close(&f->rt.loop), 0);
    meta_store_close(f->ms);
    nftw(f->dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* --------------------------------------------------------------- helpers */

struct done {
    int fired;
    int status;
};

static void on_done(struct meta_op *op, int status)
{
    struct done *d = op->data;
    assert_false(d->fired);
    d->fired = 1;
    d->status = status;
}

/* Execute op on node over the wire; returns its status. */
static int exec_on(struct fx *f, uint64_t node, struct meta_op *op)
{
    struct done d = {0};
    op->data = &d;
    int rv = meta__remote_exec(&f->rt, node, op, on_done);
    if (rv != 0)
        return rv;
    assert_false(d.fired); /* never inside the call */
    assert_true(run_until(&f->rt.loop, &d.fired, 10000));
    return d.status;
}

static int exec_new(struct fx *f, struct meta_op *op)
{
    return exec_on(f, NODE, op);
}

static struct meta_op *bucket_create(const char *name)
{
    struct meta_op *op = meta_op_create(META_OP_BUCKET_CREATE);
    op->in.bucket = (struct mg_str){name, strlen(name)};
    op->in.owner = S("alice");
    return op;
}

static struct meta_op *put_inline(const char *bucket, const char *key, const char *bytes)
{
    struct meta_op *op = meta_op_create(META_OP_OBJECT_PUT);
    op->in.bucket = (struct mg_str){bucket, strlen(bucket)};
    op->in.object.key = (struct mg_str){key, strlen(key)};
    op->in.object.etag = S("0123456789abcdef0123456789abcdef");
    op->in.object.size = strlen(bytes);
    op->in.object.data.size = strlen(bytes);
    op->in.object.data.inline_data = (struct mg_str){bytes, strlen(bytes)};
    static struct meta_kv um[] = {{{"color", 5}, {"blue", 4}}};
    op->in.object.user_meta = um;
    op->in.object.nuser_meta = 1;
    return op;
}

/* ------------------------------------------------------------------ tests */

static void test_ops_over_the_wire(void **state)
{
    struct fx *f = *state;
    struct meta_op *op = bucket_create("bkt");
    assert_int_equal(exec_new(f, op), 0);
    assert_true(op->in.request_id != 0); /* given one, so that a retry dedups */
    meta_op_destroy(op);
    /* the store has it */
    struct mg_arena a;
    mg_arena_init(&a);
    struct meta_bucket b;
    assert_int_equal(meta_bucket_get(f->ms, S("bkt"), &a, &b), 0);
    assert_int_equal(b.owner.len, 5);
    /* a failing op's status comes back as it is */
    op = bucket_create("bkt");
    assert_int_equal(exec_new(f, op), MG_EBUCKETOWNED);
    meta_op_destroy(op);

    op = put_inline("bkt", "k1", "hello");
    assert_int_equal(exec_new(f, op), 0);
    assert_true(op->out.object.mtime_ms > 0); /* results decoded into the op */
    meta_op_destroy(op);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, S("bkt"), S("k1"), &a, &o), 0);
    assert_int_equal(o.size, 5);
    assert_memory_equal(o.data.inline_data.base, "hello", 5);
    assert_int_equal(o.nuser_meta, 1);
    assert_memory_equal(o.user_meta[0].v.base, "blue", 4);

    op = put_inline("nope", "k1", "x");
    assert_int_equal(exec_new(f, op), MG_ENOSUCHBUCKET);
    meta_op_destroy(op);

    /* DELETE_MANY: the per-key flags come back */
    op = meta_op_create(META_OP_OBJECT_DELETE_MANY);
    op->in.bucket = S("bkt");
    struct mg_str keys[] = {S("k1"), S("absent")};
    op->in.keys = keys;
    op->in.nkeys = 2;
    assert_int_equal(exec_new(f, op), 0);
    assert_non_null(op->out.existed_many);
    assert_int_equal(op->out.existed_many[0], 1);
    assert_int_equal(op->out.existed_many[1], 0);
    meta_op_destroy(op);

    /* multipart: create answers an upload id, abort removes it */
    op = meta_op_create(META_OP_MPU_CREATE);
    op->in.bucket = S("bkt");
    op->in.object.key = S("big");
    assert_int_equal(exec_new(f, op), 0);
    assert_int_equal(op->out.upload_id.len, META_UPLOAD_ID_LEN);
    struct mg_str uid = {mg_arena_dup(&a, op->out.upload_id.base, op->out.upload_id.len),
                         op->out.upload_id.len};
    meta_op_destroy(op);
    op = meta_op_create(META_OP_MPU_ABORT);
    op->in.bucket = S("bkt");
    op->in.key = S("big");
    op->in.upload_id = uid;
    assert_int_equal(exec_new(f, op), 0);
    meta_op_destroy(op);
    op = meta_op_create(META_OP_MPU_ABORT);
    op->in.bucket = S("bkt");
    op->in.key = S("big");
    op->in.upload_id = uid;
    assert_int_equal(exec_new(f, op), MG_ENOSUCHUPLOAD);
    meta_op_destroy(op);
    mg_arena_close(&a);
}

/* An object whose bytes are in the blob store: the extents travel verbatim and the remote
 * store reads the same bytes back. */
static void test_blob_data(void **state)
{
    struct fx *f = *state;
    struct meta_op *op = bucket_create("bkt");
    assert_int_equal(exec_new(f, op), 0);
    meta_op_destroy(op);
    char bytes[4096];
    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (char)(i * 31 + 1);
    struct meta_data_writer *w;
    assert_int_equal(meta_data_writer_create(f->ms, sizeof(bytes), &w), 0);
    assert_int_equal(meta_data_writer_append(w, bytes, sizeof(bytes)), 0);
    op = meta_op_create(META_OP_OBJECT_PUT);
    assert_int_equal(meta_data_writer_finish(w, &op->priv->arena, &op->in.object.data), 0);
    assert_true(op->in.object.data.nextents > 0);
    op->in.bucket = S("bkt");
    op->in.object.key = S("blob");
    op->in.object.size = sizeof(bytes);
    op->in.object.etag = S("00000000000000000000000000000000");
    assert_int_equal(exec_new(f, op), 0);
    meta_op_destroy(op);
    struct mg_arena a;
    mg_arena_init(&a);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, S("bkt"), S("blob"), &a, &o), 0);
    char back[sizeof(bytes)];
    assert_int_equal(meta_data_read(f->ms, &o.data, 0, back, sizeof(back)), 0);
    assert_memory_equal(back, bytes, sizeof(bytes));
    mg_arena_close(&a);
}

/* A retry with the same request id returns the first outcome and never applies twice. */
static void test_retry_dedups(void **state)
{
    struct fx *f = *state;
    struct meta_op *op = bucket_create("bkt");
    assert_int_equal(exec_new(f, op), 0);
    meta_op_destroy(op);
    struct meta_op_stats s0, s1;
    meta_op_stats_get(f->ms, &s0);
    op = put_inline("bkt", "k", "first");
    op->in.request_id = 0x4242424242ULL;
    assert_int_equal(exec_new(f, op), 0);
    meta_op_destroy(op);
    op = put_inline("bkt", "k", "second");
    op->in.request_id = 0x4242424242ULL;
    assert_int_equal(exec_new(f, op), 0);
    meta_op_destroy(op);
    struct mg_arena a;
    mg_arena_init(&a);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, S("bkt"), S("k"), &a, &o), 0);
    assert_int_equal(o.size, 5); /* "first": the retry did not apply */
    mg_arena_close(&a);
    usleep((META_OP_STATS_PERIOD_MS + 100) * 1000);
    meta_op_stats_get(f->ms, &s1);
    assert_true(s1.dedup_hits >= s0.dedup_hits + 1);
}

static void on_echo(struct meta__rt *rt, void *data, struct mrpc_call *call, const void *payload,
                    size_t len)
{
    (void)rt;
    *(int *)data += 1;
    mrpc_reply(call, 0, payload, len);
}

struct got {
    int fired, status;
    size_t len;
    char body[16];
};

static void on_got(void *data, int status, const void *payload, size_t len)
{
    struct got *g = data;
    g->fired = 1;
    g->status = status;
    g->len = len;
    memcpy(g->body, payload, len < sizeof(g->body) ? len : sizeof(g->body));
}

static int call_sync(struct fx *f, uint16_t method, const void *p, size_t len, struct got *g)
{
    memset(g, 0, sizeof(*g));
    int rv = meta__remote_call(&f->rt, NODE, method, p, len, 5000, on_got, g);
    if (rv != 0)
        return rv;
    assert_true(run_until(&f->rt.loop, &g->fired, 5000));
    return g->status;
}

/* Methods: unregistered ones, a registered one, garbage for the built-in ones. */
static void test_methods(void **state)
{
    struct fx *f = *state;
    struct got g;
    assert_int_equal(call_sync(f, META_RPC_ROUTE, "x", 1, &g), MG_ENOTIMPLEMENTED);
    assert_int_equal(call_sync(f, 1000, "x", 1, &g), MG_ENOTIMPLEMENTED);
    int hits = 0;
    assert_int_equal(meta__remote_handle(&f->rt, META_RPC_ROUTE, on_echo, &hits), 0);
    assert_int_equal(meta__remote_handle(&f->rt, META_RPC__MAX, on_echo, &hits),
                     MG_EINVALIDARGUMENT);
    assert_int_equal(call_sync(f, META_RPC_ROUTE, "route", 5, &g), 0);
    assert_int_equal(hits, 1);
    assert_int_equal(g.len, 5);
    assert_memory_equal(g.body, "route", 5);
    assert_int_equal(call_sync(f, META_RPC_OP, "garbage", 7, &g), MG_EBADREQUEST);
    assert_int_equal(call_sync(f, META_RPC_READ_INDEX, "abc", 3, &g), MG_EBADREQUEST);
    assert_int_equal(call_sync(f, META_RPC_READ_INDEX, "abcd", 4, &g), MG_ESHUTDOWN); /* no shards */
    /* unknown nodes and unreachable ones */
    struct meta_op *op = bucket_create("bkt");
    assert_int_equal(exec_on(f, 99, op), MG_ENOTFOUND);
    assert_int_equal(exec_on(f, NOBODY, op), MG_EIO);
    meta_op_destroy(op);
}

/* Closing with an op in flight: the caller's call fails with MG_ESHUTDOWN at once, the
 * executing op finishes and its reply is dropped; everything is released (ASan). */
static void test_close_in_flight(void **state)
{
    struct fx *f = *state;
    struct meta_op *op = bucket_create("bkt");
    struct done d = {0};
    op->data = &d;
    assert_int_equal(meta__remote_exec(&f->rt, NODE, op, on_done), 0);
    /* let the request reach the server and be submitted */
    for (int i = 0; i < 20; i++)
        uv_run(&f->rt.loop, UV_RUN_NOWAIT);
    g_closed = 0;
    meta__remote_close(&f->rt, on_closed);
    assert_true(d.fired);
    assert_int_equal(d.status, MG_ESHUTDOWN);
    assert_true(run_until(&f->rt.loop, &g_closed, 5000));
    meta_op_destroy(op);
    /* a fresh state for teardown */
    assert_int_equal(meta__remote_listen(&f->rt, "127.0.0.1:0"), 0);
}

/* ------------------------------------------------------------- read fence */

struct toy {
    uint64_t applied;
};

static int toy_apply(void *data, uint64_t index, const void *buf, size_t len, void **result)
{
    (void)buf;
    (void)len;
    (void)result;
    ((struct toy *)data)->applied = index;
    return 0;
}

static uint64_t toy_durable(void *data)
{
    return ((struct toy *)data)->applied;
}

static const struct mraft_owner toy_owner = {.apply = toy_apply, .durable_index = toy_durable};

static void on_host_closed(struct mraft_host *h, void *data)
{
    (void)h;
    *(int *)data = 1;
}

struct rd {
    int fired, status;
    uint64_t index, hint;
};

static void on_rd(void *data, int status, uint64_t index, uint64_t hint)
{
    struct rd *r = data;
    r->fired = 1;
    r->status = status;
    r->index = index;
    r->hint = hint;
}

static int prop_done;

static void on_proposed(struct mraft_propose *req, int status, uint64_t index,
                        uint64_t leader_hint, void *result)
{
    (void)index;
    (void)leader_hint;
    (void)result;
    assert_int_equal(status, 0);
    *(int *)req->data = 1;
}

static int read_sync(struct fx *f, uint32_t shard, struct rd *r)
{
    memset(r, 0, sizeof(*r));
    int rv = meta__remote_read_index(&f->rt, NODE, shard, 5000, on_rd, r);
    if (rv != 0)
        return rv;
    assert_true(run_until(&f->rt.loop, &r->fired, 5000));
    return r->status;
}

static void test_read_index(void **state)
{
    struct fx *f = *state;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/test_remote_raft.XXXXXX");
    assert_non_null(mkdtemp(dir));
    char addr[32], other[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
    snprintf(other, sizeof(other), "127.0.0.1:%d", free_port());
    struct mraft_host_config hc = {.node_id = 1, .address = addr, .data_dir = dir, .tick_ms = 5};
    struct mraft_host *h;
    assert_int_equal(mraft_host_create(&f->rt.loop, &hc, &h), 0);
    struct toy t1 = {0}, t2 = {0};
    struct mraft_voter one = {1, addr};
    struct mraft_voter two[] = {{1, addr}, {9, other}}; /* node 9 never comes: no leader */
    struct mraft_group_config g1 = {.group_id = 1, .voters = &one, .n_voters = 1,
                                    .owner = &toy_owner, .owner_data = &t1};
    struct mraft_group_config g2 = {.group_id = 2, .voters = two, .n_voters = 2,
                                    .owner = &toy_owner, .owner_data = &t2};
    struct meta__shards *ss = calloc(1, sizeof(*ss));
    assert_int_equal(mraft_group_create(h, &g1, &ss->shards[0].g), 0);
    assert_int_equal(mraft_group_create(h, &g2, &ss->shards[1].g), 0);
    ss->shards[0].id = 1;
    ss->shards[1].id = 2;
    ss->n = 2;
    f->rt.shards = ss;
    for (int i = 0; i < 400 && !mraft_group_ready(ss->shards[0].g); i++) {
        int never = 0;
        run_until(&f->rt.loop, &never, 10);
    }
    assert_true(mraft_group_ready(ss->shards[0].g));
    struct rd r;
    assert_int_equal(read_sync(f, 1, &r), 0);
    /* the callee answers its applied index: that of the owner (barriers are not handed to
     * apply), which a follower compares with its own */
    assert_int_equal(r.index, 0);
    struct mraft_propose pr = {.data = &prop_done};
    static const char entry[8] = "command";
    assert_int_equal(mraft_group_propose(ss->shards[0].g, &pr, entry, 8, on_proposed, NULL), 0);
    assert_true(run_until(&f->rt.loop, &prop_done, 5000));
    assert_int_equal(read_sync(f, 1, &r), 0);
    assert_true(r.index >= 1 && r.index == t1.applied);
    assert_int_equal(read_sync(f, 2, &r), MG_ENOTLEADER);
    assert_int_equal(r.hint, 0);
    assert_int_equal(read_sync(f, 7, &r), MG_ENOTFOUND);
    ss->closing = 1;
    assert_int_equal(read_sync(f, 1, &r), MG_ENOTLEADER);
    f->rt.shards = NULL;
    int closed = 0;
    mraft_host_destroy(h, on_host_closed, &closed);
    assert_true(run_until(&f->rt.loop, &closed, 5000));
    free(ss);
    nftw(dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    mg_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ops_over_the_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blob_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_dedups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_index, setup, teardown),
    };
    return cmocka_run_group_tests_name("remote", tests, NULL, NULL);
}
