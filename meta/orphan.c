/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The orphan collector and the retire intents (meta/orphan.h; docs/ops.md,
 * "Orphans and retire intents").
 *
 * A pass, on the collector thread (or a test's):
 *   1. walk the blob store (eng_blob_foreach): every live blob, sorted by
 *      (segment, offset);
 *   2. walk the blob index rows of every bucket (0x03 · id · 'X' · segment ·
 *      offset, committed state) and mark each live blob they name;
 *   3. an unmarked blob is unreferenced: remember when it was first seen so;
 *      those seen unreferenced for at least the grace period are candidates;
 *   4. BEGIN op on the meta thread, then walk the index again for the
 *      candidates, then DECIDE op on the meta thread, which condemns every
 *      candidate still unmarked and not claimed (below); the collector then
 *      retires the condemned blobs (eng_blob_retire: freed by the reaper once
 *      no reader pins them);
 *   5. retire intents: each 0x01 'R' row whose blob is no longer live (and
 *      that is older than the walk) is deleted; on the first pass of a run,
 *      every intent whose blob is still live is retired again (the replay).
 *
 * Why a PUT about to commit a blob can never see it freed. A blob B becomes
 * referenced only by an op that brings it as new data (OBJECT_PUT, which
 * CopyObject uses too, or MPU_PUT_PART; MPU_COMPLETE only moves references
 * that part rows already hold in the index). Such an op O runs its body on
 * the meta thread, which also runs BEGIN and DECIDE, so O's body is ordered
 * against them:
 *   - O's body ran before BEGIN: BEGIN is a quiesce op (it runs only when no
 *     entry is in flight), so O's entry was applied, with its 'X' row, before
 *     BEGIN ran; the second index walk starts after BEGIN returned and sees
 *     the row, so B is marked and not condemned. (An entry whose outcome
 *     became unknown may apply later, from the log: after one, the collector
 *     stops for the rest of the run, meta__orphan_unknown_outcome.)
 *   - O's body ran between BEGIN and DECIDE: meta__orphan_claim recorded B
 *     as claimed (BEGIN turned claiming on), and DECIDE spares claimed blobs.
 *   - O's body runs after DECIDE: meta__orphan_claim finds B condemned and
 *     the op fails (MG_EIO, the client gets 500) before it writes anything.
 * So whatever the timing, no committed metadata ever names a condemned blob:
 * the meta thread, not the clock, makes it impossible. The grace period only
 * keeps the collector from condemning the blob of a PUT that is merely
 * between its blob's fsync and its op (normally milliseconds; the PUT would
 * then fail, never lose data): a blob must be seen unreferenced by passes
 * grace apart. The blob header carries no write time, so "age" is measured
 * from the first pass that saw the blob unreferenced (a blob orphaned by a
 * crash is therefore freed one grace after the first pass of the next run).
 * Condemned entries are kept for max(2 x grace, 1 h), far past any PUT's
 * fsync-to-body delay.
 *
 * Why the index walk. The blob index is per bucket, keyed by (segment,
 * offset), and a ref does not name its bucket, so "is this ref referenced" is
 * answered for all blobs at once: one ordered walk of every bucket's 'X'
 * table (a seek per bucket), marking live blobs by binary search. Cost per
 * pass: O(index rows x log blobs) CPU, O(blobs) memory (32 B per live blob).
 * TODO: for stores of 10^8 blobs, walk in segment ranges.
 *
 * Retire intents are node-local (0x01 'R'): a blob is a node-local resource
 * freed by this node's reaper, and apply runs on every replica from the RETIRE
 * record the replicated entry carries, so each node writes its own intent in
 * the same RocksDB write as the entry's rows (the delete of the 'X' row and
 * the applied index): either both are on disk or neither (then the entry is
 * above the durable index and replayed). The row is deleted by a local write
 * once the blob is gone, with no Raft round trip per free; a row that comes
 * back after a crash names a freed blob, and re-retiring it is a no-op
 * (segment numbers are never reused, freed headers are marked, refs carry the
 * epoch). Value, big-endian: segment, offset, length u64, crc32c, flags u32,
 * written (wall ms) u64.
 *
 * In a cluster (issue 10; 2 or 3 nodes sharing one RADOS namespace). The
 * argument above rests on one meta thread seeing every op that can commit a
 * blob; in a cluster an op is submitted on one node and its body runs on the
 * shard leader, maybe another node. What changes:
 *   - Partition by writer. A RADOS blob's segment is the writer id its process
 *     took at open (engine/rados.c, never reused), and only that process ever
 *     submits an op naming it (the gateway writes the data where the request
 *     arrived, and submits there). Each node records its writer ids (0x01 'W'
 *     · id, written and flushed at open before any blob, meta/data.c) and
 *     collects only blobs of those ids (eng_rados_foreach_segments): the
 *     current process's and every past one's of this node.
 *   - Current process: claims at submission. meta__orphan_submit, on the meta
 *     thread as the op enters it and before the router forwards it, records
 *     the op's blobs as in flight (or refuses the op, MG_EIO, if one is
 *     condemned: it never leaves the node); meta__orphan_done drops them at the
 *     op's final completion. DECIDE spares every blob in flight, every blob of
 *     an op that completed while the pass was deciding, and for one grace
 *     period every blob of an op that failed (its outcome may be unknown: a
 *     forwarded op that timed out can still commit, within an election and a
 *     retry, seconds, far below the 10 min default grace).
 *   - Fences. An op that completed with success before BEGIN committed before
 *     it, but this node may not have applied it yet. After BEGIN the pass
 *     fences shard 0 and then the shard of every bucket (meta_read_fence_create,
 *     docs/cluster.md "Reads"), so the second index walk reads a RocksDB that
 *     holds every entry committed before BEGIN. A failed fence condemns
 *     nothing. This needs every node to replicate every shard: true with at
 *     most 3 nodes (voters are the 3 lowest ids); with more the collector is
 *     off (not supported yet).
 *   - Past processes of this node are dead (this one replaced them), so no new
 *     op names their blobs; ops they had forwarded may still commit late, up
 *     to an election plus the router's 10 s deadline after the kill. Their
 *     blobs are condemned only after a grace counted from a pass of this
 *     process, so the grace must stay far above that bound (it does: 10 min).
 *   - Retires. A cluster retires a replaced blob 30 s after its entry applies
 *     (meta/shard.c, for GETs on other nodes); a crash forgets those. Its 'X'
 *     row is gone, so the writer node's collector frees it after the grace (a
 *     grace below 30 s could cut a GET of a replaced object short on another
 *     node; it can never lose an acknowledged object). Retire intents are not
 *     replayed in a cluster (a replay would skip the 30 s); intents whose blob
 *     is not one of this node's are simply dropped, the writer collects it.
 *   - An unknown outcome does not stop the collector here: the in-flight claims
 *     and the fences replace the "applied before BEGIN" premise.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "meta/cluster.h"
#include "meta/data.h"
#include "meta/op.h"
#include "meta/orphan.h"

#define INTENT_VALUE_LEN 40
#define CONDEMNED_KEEP_MIN_MS (60 * 60 * 1000)

struct live {
    struct eng_blob_ref ref;
    int referenced;
    int condemned; /* DECIDE: 1 condemned now, 2 already condemned earlier */
};

struct seen {
    uint64_t seg, off;
    int64_t first_ms;
};

struct condemned {
    uint64_t seg, off;
    int64_t at_ms; /* meta_orphan_now_ms() when condemned */
};

struct vec {
    void *p;
    size_t n, cap;
};

/* A blob of an op submitted on this cluster node: in flight (ended_ms 0), completed while
 * a pass was deciding (ok), or failed at ended_ms. */
struct flight {
    uint64_t seg, off;
    int64_t ended_ms;
    int ok;
};

struct collector {
    struct collector *next;
    struct meta_store *ms;
    struct meta_orphan_opts o;
    pthread_t thread;
    int has_thread;
    pthread_mutex_t mu; /* stop, cv */
    pthread_cond_t cv;
    atomic_int stop;
    pthread_mutex_t pass_mu; /* one pass at a time; guards seen, replayed */
    int replayed;
    struct seen *seen;
    size_t nseen;
    /* Meta-thread state (read and written by op bodies and exec hooks only, under g_mu). */
    int deciding;
    struct vec claims;    /* struct seen (first_ms unused) */
    struct vec condemned; /* struct condemned, sorted */
    int unknown;
    int unknown_logged;
    /* A cluster member (see "In a cluster" above); fixed at start. */
    int cluster;
    int off;              /* a cluster of more than 3 nodes: no collection yet */
    uint64_t wid;         /* this process's writer id */
    uint64_t *wids;       /* every writer id of this node, ascending */
    size_t nwids;
    struct vec flights;   /* struct flight: meta thread, under g_mu */
    pthread_mutex_t stats_mu;
    struct meta_orphan_stats st;
};

/* Phases of META_OP__ORPHAN. */
enum { PHASE_BEGIN = 1, PHASE_DECIDE = 2 };

struct orphan_req {
    struct collector *c;
    int phase;
    struct live *cands;
    size_t n;
};

void (*meta__orphan_test_before_decide)(struct meta_store *ms);

/* Every collector, by store; the exec hooks hold g_mu while they use one. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct collector *g_list;

static struct collector *find_locked(struct meta_store *ms)
{
    for (struct collector *c = g_list; c != NULL; c = c->next)
        if (c->ms == ms)
            return c;
    return NULL;
}

int64_t meta_orphan_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void vec_push(struct vec *v, const void *item, size_t size)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        v->p = mg_realloc(v->p, v->cap * size);
    }
    memcpy((char *)v->p + v->n * size, item, size);
    v->n++;
}

/* Order by (segment, offset): struct live, seen and condemned all start with them (live via
 * its ref). */
static int cmp_pos(uint64_t as, uint64_t ao, uint64_t bs, uint64_t bo)
{
    if (as != bs)
        return as < bs ? -1 : 1;
    return ao < bo ? -1 : ao > bo;
}

static int cmp_live(const void *a, const void *b)
{
    const struct live *x = a, *y = b;
    return cmp_pos(x->ref.segment, x->ref.offset, y->ref.segment, y->ref.offset);
}

static int cmp_seen(const void *a, const void *b)
{
    const struct seen *x = a, *y = b;
    return cmp_pos(x->seg, x->off, y->seg, y->off);
}

static int cmp_condemned(const void *a, const void *b)
{
    const struct condemned *x = a, *y = b;
    return cmp_pos(x->seg, x->off, y->seg, y->off);
}

static struct live *live_find(struct live *v, size_t n, uint64_t seg, uint64_t off)
{
    struct live key = {.ref = {.segment = seg, .offset = off}};
    return bsearch(&key, v, n, sizeof *v, cmp_live);
}

static struct condemned *condemned_find(struct collector *c, uint64_t seg, uint64_t off)
{
    struct condemned key = {.seg = seg, .off = off};
    return c->condemned.n ? bsearch(&key, c->condemned.p, c->condemned.n, sizeof key,
                                    cmp_condemned)
                          : NULL;
}

/* --------------------------------------------------------------- walks */

static int on_blob(void *ctx, const struct eng_blob_ref *ref)
{
    struct live l = {.ref = *ref};
    vec_push(ctx, &l, sizeof l);
    return 0;
}

static int key_before(const char *k, size_t kl, const struct mg_buf *bound)
{
    size_t n = kl < bound->len ? kl : bound->len;
    int c = memcmp(k, bound->base, n);
    return c < 0 || (c == 0 && kl < bound->len);
}

/* Mark every blob of v (sorted) that a committed blob index row names: one seek per bucket
 * to its 'X' table, then its rows in order. Returns 0 or MG_EIO. */
static int mark_index(struct meta_store *ms, struct live *v, size_t n)
{
    struct mg_buf lo, hi, xlo, xhi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    mg_buf_init(&xlo);
    mg_buf_init(&xhi);
    meta__key_data_range(&lo, &hi);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    while (eng_iter_valid(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        uint64_t id;
        if (meta__key_bucket_of(k, kl, &id) != 0)
            break; /* not a 0x03 · id key: nothing more to walk */
        xlo.len = xhi.len = 0;
        meta__key_table_range(id, META_TBL_BLOB, &xlo, &xhi);
        for (eng_iter_seek(it, xlo.base, xlo.len); eng_iter_valid(it); eng_iter_next(it)) {
            k = eng_iter_key(it, &kl);
            if (!key_before(k, kl, &xhi))
                break;
            uint64_t bid, seg, off;
            if (meta__key_blob_index_decode(k, kl, &bid, &seg, &off) != 0)
                continue;
            struct live *l = n ? live_find(v, n, seg, off) : NULL;
            if (l != NULL)
                l->referenced = 1;
        }
        if (id == UINT64_MAX)
            break;
        xlo.len = xhi.len = 0;
        meta__key_bucket_range(id + 1, &xlo, &xhi);
        eng_iter_seek(it, xlo.base, xlo.len);
    }
    int rv = eng_iter_status(it);
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    mg_buf_close(&xlo);
    mg_buf_close(&xhi);
    return rv;
}

/* ----------------------------------------------------------- intents */

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

void meta__orphan_intent_put(struct eng_batch *b, const struct eng_blob_ref *ref)
{
    struct mg_buf k;
    mg_buf_init(&k);
    meta__key_retire_intent(&k, ref);
    uint8_t v[INTENT_VALUE_LEN];
    put_be(v, ref->segment, 8);
    put_be(v + 8, ref->offset, 8);
    put_be(v + 16, ref->length, 8);
    put_be(v + 24, ref->crc32c, 4);
    put_be(v + 28, ref->flags, 4);
    put_be(v + 32, (uint64_t)meta__now_ms(), 8);
    eng_batch_put(b, ENG_CF_META, k.base, k.len, v, sizeof v);
    mg_buf_close(&k);
}

static int intent_decode(const char *v, size_t len, struct eng_blob_ref *ref, int64_t *written)
{
    if (len != INTENT_VALUE_LEN)
        return MG_ECORRUPT;
    ref->segment = meta__get_u64(v);
    ref->offset = meta__get_u64(v + 8);
    ref->length = meta__get_u64(v + 16);
    ref->crc32c = meta__get_u32(v + 24);
    ref->flags = meta__get_u32(v + 28);
    *written = (int64_t)meta__get_u64(v + 32);
    return 0;
}

/* Step 5: delete the intents of blobs gone before the walk (v: the walk's live blobs); on the
 * first pass of a run, retire the blobs of the others again. Returns 0, MG_EIO, MG_ENOSPC. */
static int intents_pass(struct collector *c, struct live *v, size_t n, int64_t walk_wall_ms,
                        int replay)
{
    struct meta_store *ms = c->ms;
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_retire_intents_range(&lo, &hi);
    struct eng_batch *b = eng_batch_create();
    uint64_t pending = 0, replayed = 0;
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl, vl;
        const char *k = eng_iter_key(it, &kl);
        const char *val = eng_iter_value(it, &vl);
        struct eng_blob_ref ref;
        int64_t written;
        if (intent_decode(val, vl, &ref, &written) != 0) {
            mg_log(MG_LOG_WARN, "event=retire_intent_corrupt len=%zu: deleted", vl);
            eng_batch_delete(b, ENG_CF_META, k, kl);
            continue;
        }
        struct live *l = n ? live_find(v, n, ref.segment, ref.offset) : NULL;
        if (l == NULL && written < walk_wall_ms) {
            eng_batch_delete(b, ENG_CF_META, k, kl); /* freed: the intent is done */
            continue;
        }
        pending++;
        if (l == NULL || !replay)
            continue;
        if (l->referenced) { /* never expected: a retired blob is never referenced again */
            mg_log(MG_LOG_WARN, "event=retire_intent_referenced seg=%" PRIx64 " off=%" PRIu64
                   ": kept, not retired", ref.segment, ref.offset);
            continue;
        }
        meta__blob_retire(ms, &ref);
        replayed++;
    }
    int rv = eng_iter_status(it);
    eng_iter_destroy(it);
    size_t cleared = eng_batch_count(b);
    if (rv == 0 && cleared > 0)
        rv = eng_batch_commit(ms->db, b, 0);
    eng_batch_destroy(b);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    pthread_mutex_lock(&c->stats_mu);
    c->st.intents_replayed += replayed;
    if (rv == 0)
        c->st.intents_cleared += cleared;
    c->st.intents_pending = pending;
    pthread_mutex_unlock(&c->stats_mu);
    if (replayed > 0 || cleared > 0)
        mg_log(MG_LOG_INFO, "event=retire_intents replayed=%" PRIu64 " cleared=%zu pending=%"
               PRIu64, replayed, cleared, pending);
    return rv;
}

/* ------------------------------------------------- meta thread: the op */

static int run_op(struct collector *c, int phase, struct live *cands, size_t n)
{
    struct orphan_req rq = {.c = c, .phase = phase, .cands = cands, .n = n};
    struct meta_op *op = meta_op_create(META_OP_MPU_ABORT);
    op->type = META_OP__ORPHAN; /* private: exec.c runs it as a quiesce op */
    op->data = &rq;
    int rv = meta__op_run_sync(c->ms, op);
    meta_op_destroy(op);
    return rv;
}

/* DECIDE in a cluster (g_mu held): every flight is claimed; then those that completed while
 * deciding, and failed ones past the grace, are forgotten. */
static void flights_claim(struct collector *c, int64_t now)
{
    struct flight *f = c->flights.p;
    size_t w = 0;
    for (size_t i = 0; i < c->flights.n; i++) {
        struct seen s = {.seg = f[i].seg, .off = f[i].off};
        vec_push(&c->claims, &s, sizeof s);
        if (f[i].ended_ms == 0 ||
            (!f[i].ok && now - f[i].ended_ms < (int64_t)c->o.grace_ms))
            f[w++] = f[i];
    }
    c->flights.n = w;
}

int meta__orphan_do(struct meta_store *ms, struct meta_op *op)
{
    (void)ms;
    struct orphan_req *rq = op->data;
    struct collector *c = rq->c;
    int64_t now = meta_orphan_now_ms();
    pthread_mutex_lock(&g_mu);
    int rv = 0;
    if (c->unknown && !c->cluster && rq->phase == PHASE_BEGIN) {
        rv = MG_EBUSY;
    } else if (rq->phase == PHASE_BEGIN) {
        c->deciding = 1;
        c->claims.n = 0;
    } else {
        if (c->cluster)
            flights_claim(c, now);
        /* Claimed between BEGIN and now: spared. */
        if (c->claims.n > 1)
            qsort(c->claims.p, c->claims.n, sizeof(struct seen), cmp_seen);
        /* Condemned long ago: forgotten (no PUT's blob waits that long for its body). */
        int64_t keep = 2 * (int64_t)c->o.grace_ms;
        if (keep < CONDEMNED_KEEP_MIN_MS)
            keep = CONDEMNED_KEEP_MIN_MS;
        struct condemned *cd = c->condemned.p;
        size_t w = 0;
        for (size_t i = 0; i < c->condemned.n; i++)
            if (now - cd[i].at_ms < keep)
                cd[w++] = cd[i];
        c->condemned.n = w;
        size_t before = c->condemned.n;
        /* After an unknown outcome (between BEGIN and now) nothing is condemned. */
        size_t ncand = (c->unknown && !c->cluster) || !c->deciding ? 0 : rq->n;
        for (size_t i = 0; i < ncand; i++) {
            struct live *l = &rq->cands[i];
            struct seen key = {.seg = l->ref.segment, .off = l->ref.offset};
            if (l->referenced ||
                (c->claims.n && bsearch(&key, c->claims.p, c->claims.n, sizeof key, cmp_seen)))
                continue;
            if (before > 0 && condemned_find(c, key.seg, key.off) != NULL) {
                l->condemned = 2;
                continue;
            }
            struct condemned e = {.seg = key.seg, .off = key.off, .at_ms = now};
            vec_push(&c->condemned, &e, sizeof e);
            l->condemned = 1;
        }
        if (c->condemned.n > before)
            qsort(c->condemned.p, c->condemned.n, sizeof(struct condemned), cmp_condemned);
        c->deciding = 0;
        c->claims.n = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return rv;
}

static const struct meta_data *new_data_of(const struct meta_op *op)
{
    if (op->type == META_OP_OBJECT_PUT)
        return &op->in.object.data;
    if (op->type == META_OP_MPU_PUT_PART)
        return &op->in.part.data;
    return NULL;
}

static void count_refused(struct collector *c)
{
    pthread_mutex_lock(&c->stats_mu);
    c->st.puts_refused++;
    pthread_mutex_unlock(&c->stats_mu);
}

/* The extents of op's new data that this process wrote (a cluster's remote-origin ops carry
 * other nodes' blobs, which their own nodes track). */
static int own_blob(const struct collector *c, const struct eng_blob_ref *r)
{
    return c->cluster && r->segment == c->wid;
}

/* meta__orphan_claim (submit 0: every blob; claimed while a pass decides) and
 * meta__orphan_submit (1: this process's blobs; in flight until meta__orphan_done). */
static int claim(struct meta_store *ms, const struct meta_op *op, int submit)
{
    const struct meta_data *d = new_data_of(op);
    if (d == NULL || d->nextents == 0)
        return 0;
    int rv = 0;
    pthread_mutex_lock(&g_mu);
    struct collector *c = find_locked(ms);
    for (size_t i = 0; c != NULL && i < d->nextents && rv == 0; i++) {
        const struct eng_blob_ref *r = &d->extents[i].ref;
        if ((!submit || own_blob(c, r)) && condemned_find(c, r->segment, r->offset) != NULL)
            rv = MG_EIO;
    }
    for (size_t i = 0; c != NULL && i < d->nextents && rv == 0; i++) {
        const struct eng_blob_ref *r = &d->extents[i].ref;
        if (submit && own_blob(c, r)) {
            struct flight f = {.seg = r->segment, .off = r->offset};
            vec_push(&c->flights, &f, sizeof f);
        } else if (!submit && c->deciding) {
            struct seen s = {.seg = r->segment, .off = r->offset};
            vec_push(&c->claims, &s, sizeof s);
        }
    }
    if (rv != 0)
        count_refused(c);
    pthread_mutex_unlock(&g_mu);
    if (rv != 0)
        mg_log(MG_LOG_ERROR, "event=put_refused reason=blob_collected seg=%" PRIx64
               " off=%" PRIu64, d->extents[0].ref.segment, d->extents[0].ref.offset);
    return rv;
}

int meta__orphan_claim(struct meta_store *ms, const struct meta_op *op)
{
    return claim(ms, op, 0);
}

int meta__orphan_submit(struct meta_store *ms, const struct meta_op *op)
{
    return claim(ms, op, 1);
}

void meta__orphan_done(struct meta_store *ms, const struct meta_op *op, int status)
{
    const struct meta_data *d = new_data_of(op);
    if (d == NULL || d->nextents == 0)
        return;
    int64_t now = meta_orphan_now_ms();
    pthread_mutex_lock(&g_mu);
    struct collector *c = find_locked(ms);
    for (size_t i = 0; c != NULL && i < d->nextents; i++) {
        const struct eng_blob_ref *r = &d->extents[i].ref;
        if (!own_blob(c, r))
            continue;
        struct flight *f = c->flights.p; /* oldest first: ops mostly complete in order */
        for (size_t j = 0; j < c->flights.n; j++) {
            if (f[j].seg != r->segment || f[j].off != r->offset || f[j].ended_ms != 0)
                continue;
            if (status == 0 && !c->deciding) {
                f[j] = f[--c->flights.n]; /* committed before any later BEGIN: its fences */
            } else {
                f[j].ended_ms = now;
                f[j].ok = status == 0;
            }
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

void meta__orphan_unknown_outcome(struct meta_store *ms)
{
    pthread_mutex_lock(&g_mu);
    struct collector *c = find_locked(ms);
    if (c != NULL && !c->cluster) {
        c->unknown = 1;
        if (!c->unknown_logged)
            mg_log(MG_LOG_WARN, "event=orphan_collector_off reason=unknown_outcome: an "
                   "appended entry may still apply; orphans wait for the next start");
        c->unknown_logged = 1;
    }
    pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------- a pass */

/* Step 3: the unreferenced blobs of v, with first-seen times carried over from the previous
 * pass; returns how many were seen unreferenced since at least now - grace (moved to the
 * front of v, in order). */
static size_t update_seen(struct collector *c, struct live *v, size_t n, int64_t now,
                          uint64_t *found, uint64_t *bytes)
{
    struct seen *next = mg_malloc((n ? n : 1) * sizeof *next);
    size_t nn = 0, ne = 0;
    *found = *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].referenced)
            continue;
        struct seen key = {.seg = v[i].ref.segment, .off = v[i].ref.offset, .first_ms = now};
        struct seen *old = c->nseen ? bsearch(&key, c->seen, c->nseen, sizeof key, cmp_seen)
                                    : NULL;
        if (old != NULL)
            key.first_ms = old->first_ms;
        next[nn++] = key;
        (*found)++;
        *bytes += v[i].ref.length;
        if (now - key.first_ms >= (int64_t)c->o.grace_ms && ne < META_ORPHAN_BATCH_MAX) {
            struct live l = v[i];
            l.referenced = 0;
            v[ne++] = l; /* ne <= i: never overwrites an entry still to be read */
        }
    }
    mg_free(c->seen);
    c->seen = next;
    c->nseen = nn;
    return ne;
}

/* Fences for the walk after BEGIN in a cluster: shard 0 first (the bucket table), then every
 * bucket's shard, FENCE_WINDOW fences at a time (they share each shard's read index). Returns
 * 0, or the first fence's failure (MG_ESLOWDOWN, MG_ESHUTDOWN) or MG_EIO. */
#define FENCE_WINDOW 64u
static int fence_all(struct meta_store *ms)
{
    struct meta_op *f = meta_read_fence_create(ms, (struct mg_str){"", 0});
    if (f == NULL)
        return 0; /* not (or no longer) clustered */
    int rv = meta__op_run_sync(ms, f);
    meta_op_destroy(f);
    struct mg_arena a;
    mg_arena_init(&a);
    struct meta_bucket *bs = NULL;
    size_t n = 0;
    if (rv == 0)
        rv = meta_bucket_list(ms, (struct mg_str){"", 0}, &a, &bs, &n);
    struct meta_op *ops[FENCE_WINDOW];
    for (size_t i = 0; rv == 0 && i < n; i += FENCE_WINDOW) {
        size_t m = n - i < FENCE_WINDOW ? n - i : FENCE_WINDOW;
        for (size_t j = 0; j < m; j++) {
            ops[j] = meta_read_fence_create(ms, bs[i + j].name);
            ops[j]->in.bucket_id = bs[i + j].id; /* its shard, without a lookup */
        }
        rv = meta__op_run_sync_many(ms, ops, m);
        for (size_t j = 0; j < m; j++)
            meta_op_destroy(ops[j]);
    }
    mg_arena_close(&a);
    return rv;
}

static int pass(struct collector *c, int64_t now)
{
    struct meta_store *ms = c->ms;
    if (c->off)
        return MG_EBUSY;
    int64_t t0 = meta_orphan_now_ms();
    int64_t walk_wall = meta__now_ms();
    struct vec v = {0};
    int rv = c->cluster ? meta__blob_foreach_writers(ms, c->wids, c->nwids, on_blob, &v)
                        : meta__blob_foreach(ms, on_blob, &v);
    struct live *lv = v.p;
    size_t n = v.n;
    if (rv == 0 && n > 1)
        qsort(lv, n, sizeof *lv, cmp_live);
    if (rv == 0)
        rv = mark_index(ms, lv, n);
    int replay = !c->replayed && !c->cluster; /* a cluster: see "Retires" above */
    if (rv == 0)
        rv = intents_pass(c, lv, n, walk_wall, replay);
    if (rv == 0 && replay)
        c->replayed = 1;
    uint64_t found = 0, bytes = 0, freed = 0, freed_bytes = 0;
    size_t ne = rv == 0 ? update_seen(c, lv, n, now, &found, &bytes) : 0;
    if (ne > 0 && meta__blob_retire_backlog(ms) > ENG_BLOB_RETIRE_BACKLOG_MAX / 2)
        ne = 0; /* the reaper is behind: leave them for a later pass */
    if (atomic_load(&c->stop))
        ne = 0;
    if (ne > 0) {
        rv = run_op(c, PHASE_BEGIN, NULL, 0);
        if (rv == 0) {
            /* after BEGIN: sees every op that ran before (in a cluster: once fenced) */
            int mrv = c->cluster ? fence_all(ms) : 0;
            if (mrv == 0)
                mrv = mark_index(ms, lv, ne);
            if (meta__orphan_test_before_decide != NULL)
                meta__orphan_test_before_decide(ms);
            /* DECIDE always runs after a BEGIN, to end the claiming window (a failed walk
             * condemns nothing). */
            rv = run_op(c, PHASE_DECIDE, lv, mrv == 0 ? ne : 0);
            if (rv == 0)
                rv = mrv;
        }
    }
    for (size_t i = 0; ne > 0 && rv == 0 && i < ne; i++) {
        if (lv[i].condemned != 1)
            continue;
        mg_log(MG_LOG_INFO, "event=orphan_retired seg=%" PRIx64 " off=%" PRIu64
               " len=%" PRIu64, lv[i].ref.segment, lv[i].ref.offset, lv[i].ref.length);
        meta__blob_retire(ms, &lv[i].ref);
        freed++;
        freed_bytes += lv[i].ref.length;
    }
    pthread_mutex_lock(&c->stats_mu);
    if (rv == 0) {
        c->st.passes++;
        c->st.blobs_seen = n;
        c->st.orphans_found = found;
        c->st.orphan_bytes = bytes;
        c->st.last_pass_ms = (uint64_t)(meta_orphan_now_ms() - t0);
    }
    c->st.orphans_freed += freed;
    c->st.orphan_bytes_freed += freed_bytes;
    pthread_mutex_unlock(&c->stats_mu);
    if (rv != 0 && rv != MG_EBUSY && rv != MG_ESHUTDOWN)
        mg_log(MG_LOG_ERROR, "event=orphan_pass_failed err=%s", mg_err_name(rv));
    else if (found > 0 || freed > 0)
        mg_log(MG_LOG_INFO, "event=orphan_pass blobs=%zu unreferenced=%" PRIu64 " bytes=%"
               PRIu64 " retired=%" PRIu64, n, found, bytes, freed);
    mg_free(v.p);
    return rv;
}

int meta_orphan_pass(struct meta_store *ms, int64_t now_ms)
{
    pthread_mutex_lock(&g_mu);
    struct collector *c = find_locked(ms);
    pthread_mutex_unlock(&g_mu);
    if (c == NULL)
        return MG_ESHUTDOWN;
    pthread_mutex_lock(&c->pass_mu);
    int rv = pass(c, now_ms);
    pthread_mutex_unlock(&c->pass_mu);
    return rv;
}

static void *collector_main(void *arg)
{
    struct collector *c = arg;
    while (!atomic_load(&c->stop)) {
        pthread_mutex_lock(&c->pass_mu);
        int rv = pass(c, meta_orphan_now_ms());
        pthread_mutex_unlock(&c->pass_mu);
        if (rv == MG_EBUSY || rv == MG_ESHUTDOWN)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += c->o.period_ms / 1000;
        ts.tv_nsec += (long)(c->o.period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&c->mu);
        while (!atomic_load(&c->stop) &&
               pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

/* --------------------------------------------------- writer ids (a cluster) */

void meta__orphan_writer_key(uint8_t key[META_ORPHAN_WRITER_KEY_LEN], uint64_t id)
{
    key[0] = META_K_SYS;
    key[1] = META_SYS_WRITER;
    put_be(key + 2, id, 8);
}

int meta__orphan_writer_decode(const void *key, size_t len, uint64_t *id)
{
    const uint8_t *k = key;
    if (len != META_ORPHAN_WRITER_KEY_LEN || k[0] != META_K_SYS || k[1] != META_SYS_WRITER)
        return MG_ECORRUPT;
    *id = meta__get_u64(k + 2);
    return 0;
}

int meta__orphan_writer_record(struct meta_store *ms, uint64_t id)
{
    uint8_t k[META_ORPHAN_WRITER_KEY_LEN], v[8];
    meta__orphan_writer_key(k, id);
    put_be(v, (uint64_t)meta__now_ms(), 8);
    struct eng_batch *b = eng_batch_create();
    eng_batch_put(b, ENG_CF_META, k, sizeof k, v, sizeof v);
    int rv = eng_batch_commit(ms->db, b, 0);
    eng_batch_destroy(b);
    /* RocksDB's WAL is off (the Raft log is the WAL): only a flush makes the row durable,
     * and it must be before the first blob of this id exists. At open the memtable holds
     * nothing else yet, so the flush is one small file. */
    if (rv == 0)
        rv = eng_db_flush(ms->db);
    return rv;
}

/* Every writer id recorded on this node, ascending (the keys sort so). */
static void writers_load(struct collector *c)
{
    uint8_t lo[2] = {META_K_SYS, META_SYS_WRITER}, hi[2] = {META_K_SYS, META_SYS_WRITER + 1};
    struct eng_iter *it = eng_iter_create(c->ms->db, ENG_CF_META, lo, 2, hi, 2);
    struct vec v = {0};
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        uint64_t id;
        if (meta__orphan_writer_decode(k, kl, &id) == 0)
            vec_push(&v, &id, sizeof id);
    }
    int rv = eng_iter_status(it);
    eng_iter_destroy(it);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=orphan_writers_unreadable err=%s: collector off",
               mg_err_name(rv));
        c->off = 1;
    }
    c->wids = v.p;
    c->nwids = v.n;
}

/* From start, on a cluster member with RADOS (meta/data.c recorded this process's id). */
static void cluster_init(struct collector *c)
{
    struct meta_store *ms = c->ms;
    unsigned nodes = ms->opts.cluster != NULL ? ms->opts.cluster->n : 0;
    c->cluster = 1;
    c->wid = meta__blobs_writer_id(ms);
    if (nodes > META_ORPHAN_CLUSTER_NODES_MAX) {
        mg_log(MG_LOG_WARN, "event=orphan_collector_off reason=cluster nodes=%u: a node "
               "holds only some shards past %u nodes (not supported yet)", nodes,
               META_ORPHAN_CLUSTER_NODES_MAX);
        c->off = 1;
        return;
    }
    writers_load(c);
    if (c->o.grace_ms < META_ORPHAN_CLUSTER_GRACE_WARN_MS)
        mg_log(MG_LOG_WARN, "event=orphan_grace_short grace_ms=%u: in a cluster a grace "
               "under %u ms can cut short a GET of a replaced object on another node",
               c->o.grace_ms, META_ORPHAN_CLUSTER_GRACE_WARN_MS);
    mg_log(MG_LOG_INFO, "event=orphan_collector_cluster nodes=%u writer_id=%" PRIu64
           " writer_ids=%zu", nodes, c->wid, c->nwids);
}

/* A millisecond knob, at most UINT32_MAX. */
static uint32_t env_ms(const char *name, uint32_t dflt)
{
    uint64_t v = mg_env_u64(name, dflt);
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

int meta_orphan_start(struct meta_store *ms, const struct meta_orphan_opts *opts)
{
    struct collector *c = mg_calloc(1, sizeof *c);
    c->ms = ms;
    if (opts != NULL) {
        c->o = *opts;
    } else {
        c->o.period_ms = env_ms("MG_ORPHAN_PERIOD_MS", META_ORPHAN_PERIOD_MS_DEFAULT);
        c->o.grace_ms = env_ms("MG_ORPHAN_GRACE_MS", META_ORPHAN_GRACE_MS_DEFAULT);
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->pass_mu, NULL);
    pthread_mutex_init(&c->stats_mu, NULL);
    atomic_init(&c->stop, 0);
    if (ms->blobs_shared)
        cluster_init(c);
    pthread_mutex_lock(&g_mu);
    c->next = g_list;
    g_list = c;
    pthread_mutex_unlock(&g_mu);
    if (c->o.period_ms > 0 && !c->off &&
        pthread_create(&c->thread, NULL, collector_main, c) == 0)
        c->has_thread = 1;
    mg_log(MG_LOG_INFO, "event=orphan_collector period_ms=%u grace_ms=%u thread=%d",
           c->o.period_ms, c->o.grace_ms, c->has_thread);
    return 0;
}

void meta_orphan_stop(struct meta_store *ms)
{
    pthread_mutex_lock(&g_mu);
    struct collector *c = find_locked(ms);
    pthread_mutex_unlock(&g_mu);
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->stop, 1);
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->has_thread)
        pthread_join(c->thread, NULL);
    pthread_mutex_lock(&g_mu);
    for (struct collector **p = &g_list; *p != NULL; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->pass_mu);
    pthread_mutex_destroy(&c->stats_mu);
    mg_free(c->seen);
    mg_free(c->claims.p);
    mg_free(c->condemned.p);
    mg_free(c->flights.p);
    mg_free(c->wids);
    mg_free(c);
}

void meta_orphan_stats_get(struct meta_store *ms, struct meta_orphan_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&g_mu);
    struct collector *c = find_locked(ms);
    if (c != NULL) {
        pthread_mutex_lock(&c->stats_mu);
        *out = c->st;
        pthread_mutex_unlock(&c->stats_mu);
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---------------------------------------------------------- test switch */

static const char *g_pause_path;
static pthread_once_t g_pause_once = PTHREAD_ONCE_INIT;

static void pause_init(void)
{
    const char *p = getenv("MG_FAULT_PAUSE_BEFORE_COMMIT");
    g_pause_path = p != NULL && *p != '\0' ? p : NULL;
}

void meta__orphan_fault_pause(const struct meta_op *op)
{
    pthread_once(&g_pause_once, pause_init);
    if (g_pause_path == NULL || op->type != META_OP_OBJECT_PUT ||
        op->in.object.data.nextents == 0)
        return;
    const struct eng_blob_ref *r = &op->in.object.data.extents[0].ref;
    mg_log(MG_LOG_WARN, "event=fault_pause point=before_commit seg=%" PRIx64 " off=%" PRIu64
           " len=%" PRIu64 ": the meta thread sleeps until killed", r->segment, r->offset,
           r->length);
    int fd = open(g_pause_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        char line[96];
        int len = snprintf(line, sizeof line, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n",
                           r->segment, r->offset, r->length);
        if (write(fd, line, (size_t)len) < 0)
            mg_log(MG_LOG_WARN, "event=fault_pause_write err=%d", errno);
        close(fd);
    }
    for (;;)
        sleep(1);
}
