/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shard state machine (meta__shard_owner, meta/shard.c) over several
 * voters (issue 7, done-when 3): three nodes, each a real meta store (its own
 * RocksDB in a temp dir; its own single-voter groups keep running on its meta
 * thread, untouched) plus a group of one test shard driven over libraft's
 * in-memory raft_fixture through the raft/ glue (raft/internal.h), as
 * tests/unit/raft/test_raft.c does for its toy engine. Entries are real write
 * sets (meta/wset.h) of rows under a bucket id no op of the stores uses; every
 * check reads the node's RocksDB itself.
 *  - a leader deposed in the middle of an op: the proposer gets MG_ENOTLEADER
 *    (outcome unknown), never success; on every node the entry's rows are then
 *    all there or all absent, the same on the three, and the next leader's
 *    write is everywhere;
 *  - a partitioned old leader acknowledges no write and confirms no read while
 *    the majority elects a leader that does both; once healed its RocksDB
 *    converges to the majority's rows and its unacknowledged write is gone.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <raft.h>
#include <raft/fixture.h>

#include "meta/opcodec.h"
#include "meta/shard.h"
#include "raft/internal.h"
#include "tests/unit/meta/test_meta.h"

#define N_NODES 3
/* Not a shard of the stores (they have 0 and 1, meta.initial_shards = 1): the test shard's
 * applied-index row 0x01 'A' . id must not collide with a real shard's. */
#define SHARD_ID 9
#define BUCKET_ID 0x7fff0000ull /* no op of the stores creates a bucket with this id */
#define STEP_MS 10000           /* budget of simulated time per wait */

struct node {
    char dir[64];
    struct meta_store *ms;
    struct meta__shards *ss; /* ms and dedup only; ss->shards[0] is the test shard */
    struct mraft_group g;
};

struct cluster {
    struct raft_fixture f; /* first: the step hook gets &f */
    struct node *n[N_NODES];
};

static struct meta__shard *shard_of(struct node *nd)
{
    return &nd->ss->shards[0];
}

/* ---- one node ----------------------------------------------------------------------- */

static struct node *node_create(void)
{
    struct node *nd = mg_calloc(1, sizeof(*nd));
    snprintf(nd->dir, sizeof(nd->dir), "/tmp/test_shard_fx.XXXXXX");
    assert_non_null(mkdtemp(nd->dir));
    struct meta_opts o = {.data_dir = nd->dir, .inline_max_bytes = FX_INLINE_MAX};
    char errmsg[256];
    int rv = meta_store_open(&o, &nd->ms, errmsg);
    if (rv != 0)
        fail_msg("meta_store_open: %s %s", mg_err_name(rv), errmsg);
    /* on_apply and on_restore touch ss->ms, ss->dedup, ss->applied_entries and the
     * shard's id, applied, durable and restored: nothing else of the struct */
    nd->ss = mg_calloc(1, sizeof(*nd->ss));
    nd->ss->ms = nd->ms;
    nd->ss->dedup = mg_calloc(META_DEDUP_SLOTS, sizeof(*nd->ss->dedup));
    struct meta__shard *s = shard_of(nd);
    s->id = SHARD_ID;
    s->lo_id = 0;
    s->hi_id = 0;
    s->epoch = 1;
    s->ss = nd->ss;
    s->g = &nd->g; /* as a real shard has it (on_apply does not use it) */
    return nd;
}

static int on_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void node_destroy(struct node *nd)
{
    meta_store_close(nd->ms);
    nftw(nd->dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
    for (size_t i = 0; i < META_DEDUP_SLOTS; i++)
        mg_free(nd->ss->dedup[i].result);
    mg_free(nd->ss->dedup);
    mg_free(nd->ss);
    mg_free(nd);
}

/* ---- the cluster -------------------------------------------------------------------- */

static void on_step(struct raft_fixture *f, struct raft_fixture_event *ev)
{
    (void)ev;
    struct cluster *c = (struct cluster *)f;
    for (unsigned i = 0; i < N_NODES; i++)
        if (raft_fixture_alive(f, i))
            mraft__group_tick(&c->n[i]->g);
}

static int cluster_setup(void **state)
{
    struct cluster *c = mg_calloc(1, sizeof(*c));
    struct mraft__tuning t = {.snapshot_threshold = 1024, .snapshot_trailing = 128,
                              .max_pending = 64};
    assert_int_equal(raft_fixture_initialize(&c->f), 0);
    for (unsigned i = 0; i < N_NODES; i++) {
        struct node *nd = c->n[i] = node_create();
        mraft__group_init(&nd->g, 1, &meta__shard_owner, shard_of(nd), &t);
        assert_int_equal(raft_fixture_grow(&c->f, mraft__group_fsm(&nd->g)), 0);
        mraft__group_attach(&nd->g, raft_fixture_get(&c->f, i));
        mraft__group_wrap_io(&nd->g);
    }
    struct raft_configuration conf;
    assert_int_equal(raft_fixture_configuration(&c->f, N_NODES, &conf), 0);
    assert_int_equal(raft_fixture_bootstrap(&c->f, &conf), 0);
    raft_configuration_close(&conf);
    assert_int_equal(raft_fixture_start(&c->f), 0);
    for (unsigned i = 0; i < N_NODES; i++)
        raft_set_pre_vote(raft_fixture_get(&c->f, i), true); /* as the host does */
    raft_fixture_hook(&c->f, on_step);
    *state = c;
    return 0;
}

static int cluster_teardown(void **state)
{
    struct cluster *c = *state;
    for (unsigned i = 0; i < N_NODES; i++)
        mraft__group_closing(&c->n[i]->g);
    raft_fixture_close(&c->f);
    for (unsigned i = 0; i < N_NODES; i++)
        node_destroy(c->n[i]);
    mg_free(c);
    return 0;
}

/* Cut (or restore) every link between node i and the others, both ways. */
static void isolate(struct cluster *c, unsigned i, bool cut)
{
    for (unsigned j = 0; j < N_NODES; j++) {
        if (j == i)
            continue;
        if (cut) {
            raft_fixture_saturate(&c->f, i, j);
            raft_fixture_saturate(&c->f, j, i);
        } else {
            raft_fixture_desaturate(&c->f, i, j);
            raft_fixture_desaturate(&c->f, j, i);
        }
    }
}

static bool until_ready(struct raft_fixture *f, void *arg)
{
    (void)f;
    return mraft_group_ready(arg);
}

/* A ready leader other than node `except`, or -1. */
static int other_leader(struct cluster *c, unsigned except)
{
    for (unsigned i = 0; i < N_NODES; i++)
        if (i != except && mraft_group_ready(&c->n[i]->g))
            return (int)i;
    return -1;
}

struct except {
    struct cluster *c;
    unsigned node;
};

static bool until_other_leader(struct raft_fixture *f, void *arg)
{
    (void)f;
    struct except *e = arg;
    return other_leader(e->c, e->node) >= 0;
}

static unsigned wait_other_leader(struct cluster *c, unsigned except)
{
    struct except e = {c, except};
    assert_true(raft_fixture_step_until(&c->f, until_other_leader, &e, STEP_MS));
    return (unsigned)other_leader(c, except);
}

/* ---- entries: rows of the test bucket ----------------------------------------------- */

struct row {
    const char *name;
    const char *val; /* NULL: delete */
};

static void row_key(struct mg_buf *k, const char *name)
{
    k->len = 0;
    meta__key_object(k, BUCKET_ID, str_of(name, strlen(name)));
}

/* The write set of rows as one shard entry, encoded into out. */
static void entry_encode(const struct row *rows, size_t n, uint64_t request_id,
                         struct mg_buf *out)
{
    struct meta_ws *ws = meta__ws_create();
    struct mg_buf k;
    mg_buf_init(&k);
    for (size_t i = 0; i < n; i++) {
        row_key(&k, rows[i].name);
        if (rows[i].val != NULL)
            meta__ws_put(ws, k.base, k.len, rows[i].val, strlen(rows[i].val));
        else
            meta__ws_delete(ws, k.base, k.len);
    }
    struct meta_ws_header h = {.request_id = request_id, .shard_id = SHARD_ID,
                               .range_epoch = 1, .timestamp_ms = 1};
    meta__ws_encode(ws, &h, out);
    mg_buf_close(&k);
    meta__ws_destroy(ws);
}

struct pr {
    struct mraft_propose req;
    unsigned calls; /* the callback runs exactly once */
    int status;
    uint64_t index;
};

static void on_prop(struct mraft_propose *req, int status, uint64_t index, uint64_t hint,
                    void *result)
{
    (void)hint, (void)result;
    struct pr *p = req->data;
    p->calls++;
    p->status = status;
    p->index = index;
}

static bool until_done(struct raft_fixture *f, void *arg)
{
    (void)f;
    return ((struct pr *)arg)->calls > 0;
}

static int propose(struct node *nd, struct pr *p, const struct row *rows, size_t n,
                   uint64_t request_id)
{
    struct mg_buf e;
    mg_buf_init(&e);
    entry_encode(rows, n, request_id, &e);
    memset(p, 0, sizeof(*p));
    p->req.data = p;
    int rv = mraft_group_propose(&nd->g, &p->req, e.base, e.len, on_prop, NULL);
    mg_buf_close(&e);
    return rv;
}

/* Propose on node i, step until acknowledged (asserting success) and applied everywhere. */
static uint64_t write_all(struct cluster *c, unsigned i, const struct row *rows, size_t n,
                          uint64_t request_id)
{
    struct pr p;
    assert_int_equal(propose(c->n[i], &p, rows, n, request_id), 0);
    assert_true(raft_fixture_step_until(&c->f, until_done, &p, STEP_MS));
    assert_int_equal(p.status, 0);
    assert_true(raft_fixture_step_until_applied(&c->f, N_NODES, p.index, STEP_MS));
    return p.index;
}

/* ---- what a node's RocksDB holds ---------------------------------------------------- */

/* 1 when the row is there with value val (val NULL: the row is absent), else 0. */
static int row_is(struct node *nd, const char *name, const char *val)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    row_key(&k, name);
    int rv = eng_get(nd->ms->db, ENG_CF_META, k.base, k.len, &v);
    assert_true(rv == 0 || rv == MG_ENOTFOUND);
    int is = val == NULL ? rv == MG_ENOTFOUND
                         : rv == 0 && v.len == strlen(val) && memcmp(v.base, val, v.len) == 0;
    mg_buf_close(&k);
    mg_buf_close(&v);
    return is;
}

/* How many of rows have taken effect in nd's RocksDB. */
static size_t rows_applied(struct node *nd, const struct row *rows, size_t n)
{
    size_t got = 0;
    for (size_t i = 0; i < n; i++)
        got += (size_t)row_is(nd, rows[i].name, rows[i].val);
    return got;
}

/* The applied-index row apply writes with every entry's rows. */
static uint64_t stored_applied(struct node *nd)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_applied(&k, SHARD_ID);
    uint64_t idx = 0;
    if (eng_get(nd->ms->db, ENG_CF_META, k.base, k.len, &v) == 0 && v.len == 8)
        idx = meta__get_u64(v.base);
    mg_buf_close(&k);
    mg_buf_close(&v);
    return idx;
}

#define NROWS(a) (sizeof(a) / sizeof((a)[0]))

static const struct row E0[] = {{"keep", "v0"}, {"gone", "v0"}};
/* E1 touches four rows (three puts and a delete): all take effect or none. */
static const struct row E1[] = {{"e1a", "1"}, {"e1b", "1"}, {"e1c", "1"}, {"gone", NULL}};
static const struct row E2[] = {{"e2", "2"}, {"keep", "v2"}};

/* ---- (a) a leader deposed in the middle of an op ------------------------------------ */

/* Node 0 leads and E0 is applied everywhere. */
static void start(struct cluster *c)
{
    raft_fixture_elect(&c->f, 0);
    assert_true(raft_fixture_step_until(&c->f, until_ready, &c->n[0]->g, STEP_MS));
    write_all(c, 0, E0, NROWS(E0), 100);
    for (unsigned i = 0; i < N_NODES; i++)
        assert_int_equal(rows_applied(c->n[i], E0, NROWS(E0)), NROWS(E0));
}

/* E1 is proposed on leader 0, which is deposed before E1 commits; if replicated, E1 reached
 * both followers first (the next leader commits it), else none (it dies with 0's term).
 * Returns how many of E1's rows each node holds (asserted the same on every node). */
static size_t deposed_mid_op(struct cluster *c, bool replicated)
{
    start(c);
    struct pr p1;
    if (replicated) {
        /* the followers get E1 but their acks never reach 0: it cannot commit */
        raft_fixture_saturate(&c->f, 1, 0);
        raft_fixture_saturate(&c->f, 2, 0);
    } else {
        /* E1 never leaves 0 */
        raft_fixture_saturate(&c->f, 0, 1);
        raft_fixture_saturate(&c->f, 0, 2);
    }
    assert_int_equal(propose(c->n[0], &p1, E1, NROWS(E1), 101), 0);
    if (replicated) {
        assert_true(raft_fixture_step_until_delivered(&c->f, 0, 1, STEP_MS));
        assert_true(raft_fixture_step_until_delivered(&c->f, 0, 2, STEP_MS));
    }
    assert_true(raft_fixture_step_until(&c->f, until_done, &p1, STEP_MS));
    assert_int_equal(p1.status, MG_ENOTLEADER); /* leadership lost: outcome unknown */
    for (unsigned i = 0; i < N_NODES; i++)
        assert_int_equal(rows_applied(c->n[i], E1, NROWS(E1)) % NROWS(E1), 0);
    unsigned l = wait_other_leader(c, 0);
    for (unsigned i = 1; i < N_NODES; i++) {
        raft_fixture_desaturate(&c->f, i, 0);
        raft_fixture_desaturate(&c->f, 0, i);
    }
    uint64_t idx2 = write_all(c, l, E2, NROWS(E2), 102);
    assert_int_equal(p1.calls, 1); /* E1's callback never fires again (with success) */
    size_t e1 = rows_applied(c->n[0], E1, NROWS(E1));
    for (unsigned i = 0; i < N_NODES; i++) {
        struct node *nd = c->n[i];
        assert_int_equal(rows_applied(nd, E2, NROWS(E2)), NROWS(E2));
        assert_int_equal(rows_applied(nd, E1, NROWS(E1)), e1); /* the same on every node */
        assert_int_equal(stored_applied(nd), idx2); /* in the same write as E2's rows */
        assert_int_equal(shard_of(nd)->applied, idx2);
    }
    assert_true(e1 == 0 || e1 == NROWS(E1)); /* never a partial entry */
    return e1;
}

static void test_deposed_after_replicating(void **state)
{
    assert_int_equal(deposed_mid_op(*state, true), NROWS(E1)); /* the new leader commits E1 */
}

static void test_deposed_before_replicating(void **state)
{
    assert_int_equal(deposed_mid_op(*state, false), 0); /* E1 was only in 0's log */
}

/* ---- (b) a partitioned old leader --------------------------------------------------- */

struct rd {
    struct mraft_read req;
    struct node *nd;
    unsigned calls;
    int status;
    int saw_w2; /* the read, served inside the callback, saw W2's row */
};

static const struct row W1[] = {{"w1", "old-leader"}, {"keep", "w1"}};
static const struct row W2[] = {{"w2", "majority"}, {"keep", "w2"}};

static void on_read(struct mraft_read *req, int status)
{
    struct rd *r = req->data;
    r->calls++;
    r->status = status;
    if (status == 0)
        r->saw_w2 = row_is(r->nd, "w2", "majority");
}

static bool until_read_done(struct raft_fixture *f, void *arg)
{
    (void)f;
    return ((struct rd *)arg)->calls > 0;
}

static int read_on(struct node *nd, struct rd *r)
{
    memset(r, 0, sizeof(*r));
    r->req.data = r;
    r->nd = nd;
    return mraft_group_read(&nd->g, &r->req, on_read, NULL);
}

static void test_partitioned_leader(void **state)
{
    struct cluster *c = *state;
    start(c);
    isolate(c, 0, true);
    /* 0 still believes it leads: it takes the write and the read, and must confirm neither */
    assert_int_equal(mraft_group_role(&c->n[0]->g), MRAFT_LEADER);
    struct pr p1;
    struct rd r1;
    assert_int_equal(propose(c->n[0], &p1, W1, NROWS(W1), 200), 0);
    assert_int_equal(read_on(c->n[0], &r1), 0);

    unsigned l = wait_other_leader(c, 0);
    uint64_t idx2 = 0;
    {
        struct pr p2;
        assert_int_equal(propose(c->n[l], &p2, W2, NROWS(W2), 201), 0);
        assert_true(raft_fixture_step_until(&c->f, until_done, &p2, STEP_MS));
        assert_int_equal(p2.status, 0);
        idx2 = p2.index;
    }
    struct rd r2;
    assert_int_equal(read_on(c->n[l], &r2), 0);
    assert_true(raft_fixture_step_until(&c->f, until_read_done, &r2, STEP_MS));
    assert_int_equal(r2.status, 0);
    assert_true(r2.saw_w2);

    /* by now 0 has stepped down: neither acknowledged, a new read is refused */
    assert_true(raft_fixture_step_until(&c->f, until_done, &p1, STEP_MS));
    assert_true(raft_fixture_step_until(&c->f, until_read_done, &r1, STEP_MS));
    assert_int_not_equal(p1.status, 0);
    assert_int_equal(r1.status, MG_ENOTLEADER);
    assert_false(mraft_group_ready(&c->n[0]->g));
    struct rd r3;
    assert_int_equal(read_on(c->n[0], &r3), MG_ENOTLEADER);
    assert_int_equal(r3.calls, 0);
    for (unsigned i = 0; i < N_NODES; i++) {
        assert_true(row_is(c->n[i], "w1", NULL)); /* W1 applied nowhere */
        if (i != 0)
            assert_int_equal(rows_applied(c->n[i], W2, NROWS(W2)), NROWS(W2));
    }
    assert_int_equal(rows_applied(c->n[0], W2, NROWS(W2)), 0);
    assert_true(row_is(c->n[0], "keep", "v0")); /* 0 still holds E0's, not W1's */

    /* heal: 0 converges to the majority's rows; W1 is gone for good */
    isolate(c, 0, false);
    assert_true(raft_fixture_step_until_applied(&c->f, N_NODES, idx2, STEP_MS));
    uint64_t idx3 = write_all(c, l, E2, NROWS(E2), 202);
    assert_int_equal(p1.calls, 1);
    assert_int_equal(r1.calls, 1);
    for (unsigned i = 0; i < N_NODES; i++) {
        struct node *nd = c->n[i];
        assert_true(row_is(nd, "w1", NULL));
        assert_true(row_is(nd, "w2", "majority"));
        assert_true(row_is(nd, "gone", "v0"));
        assert_int_equal(rows_applied(nd, E2, NROWS(E2)), NROWS(E2));
        assert_int_equal(stored_applied(nd), idx3);
    }
}

/* ---- (c) a retry answered by another replica ---------------------------------------- */

/* The router retries an op whose outcome it could not learn (its leader died after the
 * append) at the next leader, under the same request id. That replica never ran the op: all
 * it has is the entry. The retry must get the first attempt's results, not only its status:
 * a CreateMultipartUpload answered "done" without its upload id gives the client an empty
 * UploadId (and an upload nobody can name). */
static void test_retry_gets_first_result(void **state)
{
    struct cluster *c = *state;
    start(c);
    struct meta_op *first = meta_op_create(META_OP_MPU_CREATE);
    first->in.request_id = 300;
    first->out.upload_id = str_of("Zx9-upload-id-of-the-first-attempt_00", 37);
    first->out.object.etag = str_of("\"d41d8cd98f00b204e9800998ecf8427e\"", 34);
    first->out.object.mtime_ms = 1764600000123;
    struct mg_buf res, e, k;
    mg_buf_init(&res);
    mg_buf_init(&e);
    mg_buf_init(&k);
    meta__opcodec_encode_out(first, 0, &res);
    struct meta_ws *ws = meta__ws_create();
    row_key(&k, "mpu");
    meta__ws_put(ws, k.base, k.len, "upload", 6);
    struct meta_ws_header h = {.request_id = 300, .shard_id = SHARD_ID, .range_epoch = 1,
                               .timestamp_ms = 1};
    meta__ws_encode_result(ws, &h, res.base, res.len, &e);
    meta__ws_destroy(ws);
    struct pr p;
    memset(&p, 0, sizeof(p));
    p.req.data = &p;
    assert_int_equal(mraft_group_propose(&c->n[0]->g, &p.req, e.base, e.len, on_prop, NULL), 0);
    assert_true(raft_fixture_step_until(&c->f, until_done, &p, STEP_MS));
    assert_int_equal(p.status, 0);
    assert_true(raft_fixture_step_until_applied(&c->f, N_NODES, p.index, STEP_MS));
    for (unsigned i = 1; i < N_NODES; i++) { /* the followers: the next leaders */
        struct meta_op *retry = meta_op_create(META_OP_MPU_CREATE);
        retry->in.request_id = 300;
        int status = -1;
        assert_int_equal(meta__dedup_begin(c->n[i]->ss, retry, &status), 1);
        assert_int_equal(status, 0);
        assert_int_equal(retry->out.upload_id.len, first->out.upload_id.len);
        assert_memory_equal(retry->out.upload_id.base, first->out.upload_id.base,
                            first->out.upload_id.len);
        assert_int_equal(retry->out.object.etag.len, first->out.object.etag.len);
        assert_int_equal(retry->out.object.mtime_ms, 1764600000123);
        meta_op_destroy(retry);
    }
    meta_op_destroy(first);
    mg_buf_close(&res);
    mg_buf_close(&e);
    mg_buf_close(&k);
}

int test_shard_fixture_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_deposed_after_replicating, cluster_setup,
                                        cluster_teardown),
        cmocka_unit_test_setup_teardown(test_deposed_before_replicating, cluster_setup,
                                        cluster_teardown),
        cmocka_unit_test_setup_teardown(test_partitioned_leader, cluster_setup,
                                        cluster_teardown),
        cmocka_unit_test_setup_teardown(test_retry_gets_first_result, cluster_setup,
                                        cluster_teardown),
    };
    return cmocka_run_group_tests_name("shard_fixture", tests, NULL, NULL);
}
