/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard state machine on its raft groups (meta/shard.c, exec.c,
 * overlay.c; docs/ops.md), on the real single-voter host:
 *  - the pending-write overlay: ops on one key pipeline (many PUTs of one key in
 *    flight at once) and each still retires exactly the blob it replaced, so
 *    nothing leaks and the last write wins;
 *  - a retried request id returns the first outcome and is not applied twice;
 *  - a proposal refused before the log (disk-full admission) leaves no trace:
 *    the object is absent and its blob is freed;
 *  - snapshot and restore: past several snapshots (libraft truncates the log
 *    below what RocksDB flushed), a reopen restores every shard at its applied
 *    index and every object is there.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "meta/shard.h"
#include <raft.h>

#include "raft/internal.h"
#include "tests/unit/meta/test_meta.h"

static uint64_t live_blob_bytes(struct fx *f)
{
    struct meta_stats st;
    meta_stats_get(f->ms, &st);
    return st.blobs.bytes_written - st.blobs.bytes_freed;
}

struct pipe_arg {
    struct fx *f;
    int id;
};

enum { PIPE_THREADS = 8, PIPE_PUTS = 40, PIPE_SIZE = 3000 };

static void *on_pipe(void *arg)
{
    struct pipe_arg *p = arg;
    char buf[PIPE_SIZE];
    for (int i = 0; i < PIPE_PUTS; i++) {
        fx_fill(buf, sizeof(buf), (uint32_t)(p->id * 1000 + i));
        if (fx_put(p->f, BKT, S("hot"), buf, sizeof(buf), NULL) != 0)
            return (void *)1;
    }
    return NULL;
}

/* 8 threads x 40 blob-backed PUTs of ONE key, all pipelined through the meta thread: each
 * op reads the previous (still uncommitted) version from the overlay and retires its blob.
 * Afterwards exactly one version's bytes are live (each replaced one retired at apply and
 * freed by the reaper). */
static void test_overlay_pipeline(void **state)
{
    struct fx *f = *state;
    uint64_t live0 = live_blob_bytes(f);
    pthread_t t[PIPE_THREADS];
    struct pipe_arg a[PIPE_THREADS];
    for (int i = 0; i < PIPE_THREADS; i++) {
        a[i] = (struct pipe_arg){f, i};
        assert_int_equal(pthread_create(&t[i], NULL, on_pipe, &a[i]), 0);
    }
    for (int i = 0; i < PIPE_THREADS; i++) {
        void *rv;
        pthread_join(t[i], &rv);
        assert_null(rv);
    }
    /* The replaced versions' blobs are freed by the blob store's reaper thread after their
     * RETIRE records apply, so give it a moment (ASan builds are slow); a version that is never
     * freed, or one freed that should not be, still fails. */
    for (int i = 0; i < 500 && live_blob_bytes(f) - live0 > PIPE_SIZE; i++) {
        struct timespec ms10 = {0, 10 * 1000 * 1000};
        nanosleep(&ms10, NULL);
    }
    assert_int_equal(live_blob_bytes(f) - live0, PIPE_SIZE);
    /* the figures /metrics shows: the data shard committed every one of them */
    struct timespec ts = {0, (META_OP_STATS_PERIOD_MS + 200) * 1000 * 1000};
    nanosleep(&ts, NULL);
    struct meta_op_stats st;
    meta_op_stats_get(f->ms, &st);
    assert_int_equal(st.nshards, 2);
    assert_true(st.shards[1].leader);
    assert_true(st.shards[1].commits >= PIPE_THREADS * PIPE_PUTS);
    assert_true(st.shards[1].latency_count == st.shards[1].commits);
    assert_true(st.submitted >= PIPE_THREADS * PIPE_PUTS);
    size_t len;
    int rv;
    char *got = fx_get(f, BKT, S("hot"), &len, &rv);
    assert_non_null(got);
    assert_int_equal(len, PIPE_SIZE);
    mg_free(got);
}

static int put_with_id(struct fx *f, uint64_t request_id, const char *bytes, size_t len)
{
    struct meta_object o = {.key = S("r"), .etag = S("e")};
    fx_data(f, bytes, len, &o.data);
    o.size = o.data.size;
    struct meta_op *op = meta_op_create(META_OP_OBJECT_PUT);
    op->in.bucket = BKT;
    op->in.object = o;
    op->in.request_id = request_id;
    int rv = meta__op_run_sync(f->ms, op);
    meta_op_destroy(op);
    return rv;
}

/* A retried mutation (same request id) returns its first result instead of applying twice:
 * PUT (id 77), DELETE, then the PUT's retry with other bytes answers 0 and the key stays
 * deleted; the retry's own blob is released. */
static void test_retried_request_id(void **state)
{
    struct fx *f = *state;
    char a[2000], b[2000];
    fx_fill(a, sizeof(a), 1);
    fx_fill(b, sizeof(b), 2);
    assert_int_equal(put_with_id(f, 77, a, sizeof(a)), 0);
    assert_int_equal(meta_object_delete(f->ms, BKT, S("r"), NULL), 0);
    uint64_t live0 = live_blob_bytes(f);
    assert_int_equal(put_with_id(f, 77, b, sizeof(b)), 0);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("r"), &f->a, &o), MG_ENOSUCHKEY);
    assert_int_equal(live_blob_bytes(f), live0);
    assert_true(f->ms->rt->shards->dedup_hits >= 1);
    /* another id is a new op */
    assert_int_equal(put_with_id(f, 78, b, sizeof(b)), 0);
    assert_int_equal(meta_object_get(f->ms, BKT, S("r"), &f->a, &o), 0);
}

static uint64_t fake_free;
static int fake_free_space(const char *dir, uint64_t *free_bytes)
{
    (void)dir;
    *free_bytes = fake_free;
    return 0;
}

static void set_free_space(struct fx *f, mraft__free_space_fn fn)
{
    mraft__host_set_free_space(f->ms->rt->shards->host, fn);
    struct timespec ts = {0, 150 * 1000 * 1000}; /* past the 100 ms cache */
    nanosleep(&ts, NULL);
}

/* A proposal refused before the log append leaves no trace: the PUT answers MG_ENOSPC, the
 * key does not exist and the new blob's space is released; once space is back, PUTs work. */
static void test_refused_proposal_no_trace(void **state)
{
    struct fx *f = *state;
    char a[5000];
    fx_fill(a, sizeof(a), 3);
    uint64_t live0 = live_blob_bytes(f);
    fake_free = 1 << 20; /* below the host's min_free_bytes */
    set_free_space(f, fake_free_space);
    assert_int_equal(fx_put(f, BKT, S("nospace"), a, sizeof(a), NULL), MG_ENOSPC);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("nospace"), &f->a, &o), MG_ENOSUCHKEY);
    assert_int_equal(live_blob_bytes(f), live0);
    fake_free = 1ull << 40;
    set_free_space(f, NULL);
    assert_int_equal(fx_put(f, BKT, S("nospace"), a, sizeof(a), NULL), 0);
}

/* Enough entries for several libraft snapshots (threshold 4096): the log below the durable
 * index is truncated, and a reopen still restores every shard and every object. */
static void test_snapshot_restore(void **state)
{
    struct fx *f = *state;
    char key[32];
    for (int i = 0; i < 9000; i++) {
        snprintf(key, sizeof(key), "s/%05d", i);
        assert_int_equal(fx_put(f, BKT, str_of(key, strlen(key)), key, strlen(key), NULL), 0);
    }
    fx_reopen(f);
    struct meta__shards *ss = f->ms->rt->shards;
    uint64_t applied = 0;
    for (unsigned i = 0; i < ss->n; i++)
        applied += ss->shards[i].applied;
    assert_true(applied >= 9000);
    for (int i = 0; i < 9000; i += 97) {
        snprintf(key, sizeof(key), "s/%05d", i);
        size_t len;
        int rv;
        char *got = fx_get(f, BKT, str_of(key, strlen(key)), &len, &rv);
        assert_non_null(got);
        assert_memory_equal(got, key, len);
        mg_free(got);
    }
}

/* A retried CompleteMultipartUpload of an upload that already completed answers 200 with
 * the same ETag, as AWS does, instead of NoSuchUpload; another upload id still gets
 * NoSuchUpload, and once the key is overwritten the retry is NoSuchUpload too. */
static void test_complete_retry(void **state)
{
    struct fx *f = *state;
    struct meta_object tmpl = {.key = S("mp")};
    struct mg_str uid;
    assert_int_equal(meta_mpu_create(f->ms, BKT, &tmpl, &f->a, &uid), 0);
    char bytes[1000];
    fx_fill(bytes, sizeof(bytes), 5);
    struct meta_part part = {.number = 1, .etag = S("0123456789abcdef0123456789abcdef")};
    fx_data(f, bytes, sizeof(bytes), &part.data);
    part.size = part.data.size;
    assert_int_equal(meta_mpu_put_part(f->ms, BKT, S("mp"), uid, &part), 0);
    struct meta_part want = {.number = 1, .etag = part.etag};
    struct meta_object first, again;
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("mp"), uid, &want, 1, &f->a, &first), 0);
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("mp"), uid, &want, 1, &f->a, &again), 0);
    assert_int_equal(again.etag.len, first.etag.len);
    assert_memory_equal(again.etag.base, first.etag.base, first.etag.len);
    assert_int_equal(again.size, sizeof(bytes));
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("mp"), S("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
                                       &want, 1, &f->a, &again),
                     MG_ENOSUCHUPLOAD);
    assert_int_equal(fx_put(f, BKT, S("mp"), "new", 3, NULL), 0);
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("mp"), uid, &want, 1, &f->a, &again),
                     MG_ENOSUCHUPLOAD);
}

/* A log append that fails (EIO from the disk) fences the data shard's group: the PUT in
 * flight gets an error and its outcome is unknown, so its blob is NOT freed; the shard is
 * closed and reopened from its log on its own, and PUTs work again without a restart. */
struct failing {
    struct raft_io_append mine;
    struct raft_io_append *req;
    raft_io_append_cb cb;
};
static int (*real_append)(struct raft_io *, struct raft_io_append *, const struct raft_entry[],
                          unsigned, raft_io_append_cb);
static int fail_next;

static void on_failing_append(struct raft_io_append *mine, int status)
{
    (void)status;
    struct failing *fa = mine->data;
    struct raft_io_append *req = fa->req;
    raft_io_append_cb cb = fa->cb;
    mg_free(fa);
    cb(req, RAFT_IOERR);
}

static int failing_append(struct raft_io *io, struct raft_io_append *req,
                          const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
    if (!__atomic_exchange_n(&fail_next, 0, __ATOMIC_SEQ_CST))
        return real_append(io, req, entries, n, cb);
    struct failing *fa = mg_calloc(1, sizeof(*fa));
    fa->req = req;
    fa->cb = cb;
    fa->mine.data = fa;
    return real_append(io, &fa->mine, entries, n, on_failing_append);
}

static void test_fenced_shard_reopens(void **state)
{
    struct fx *f = *state;
    struct mraft_group *g = f->ms->rt->shards->shards[1].g;
    real_append = g->io_append;
    g->io_append = failing_append;
    __atomic_store_n(&fail_next, 1, __ATOMIC_SEQ_CST);
    char a[3000];
    fx_fill(a, sizeof(a), 11);
    uint64_t live0 = live_blob_bytes(f);
    int rv = fx_put(f, BKT, S("fence"), a, sizeof(a), NULL);
    assert_int_not_equal(rv, 0);
    assert_true(live_blob_bytes(f) - live0 >= sizeof(a)); /* unknown outcome: not freed */
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        ok = fx_put(f, BKT, S("after"), a, sizeof(a), NULL) == 0;
        if (!ok) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    assert_true(ok);
    assert_true(f->ms->rt->shards->shards[1].reopens >= 1);
    size_t len;
    char *got = fx_get(f, BKT, S("after"), &len, &rv);
    assert_non_null(got);
    assert_memory_equal(got, a, sizeof(a));
    mg_free(got);
}

int test_shard_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_overlay_pipeline, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_retried_request_id, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_refused_proposal_no_trace, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_restore, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_complete_retry, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_fenced_shard_reopens, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("shard", tests, NULL, NULL);
}
