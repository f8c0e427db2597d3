/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Splits of data shards at bucket boundaries (issue 10; docs/cluster.md "Splits").
 *
 * With N <= 3 nodes every node replicates every shard and all shards' rows live in the
 * node's one RocksDB, so a split moves no data: one entry on the parent's log (the split
 * command) is applied by every replica at the same index, shrinking the parent to [lo, at)
 * and creating the child [at, hi) with a new id, both at the next range epoch. The child's
 * state is the parent's rows of [at, hi) at that index, identical everywhere; its raft
 * group (same voters, bootstrapped like the initial ones) starts empty. shard.c applies it
 * (layout row and parent's applied index in one RocksDB write) and refuses, at apply time
 * and so identically on every replica, every entry whose range epoch is not its shard's:
 * an op encoded against the old layout and appended after the split never applies, its
 * proposer gets MG_ENOTLEADER and the router retries it on the new home shard.
 *
 * The driver runs on the manager (the ready leader of shard 0), one split at a time:
 *   check  a libuv worker walks each data shard's rows (counting up to the thresholds) and,
 *          for the first shard past cluster.split_keys or cluster.split_bytes, the rows per
 *          bucket, to choose the boundary that best halves them;
 *   mark   an op on shard 0 allocates the child id (one past every id in the 'H' rows and
 *          the local layout) and writes its 'H' row with state=splitting before anything
 *          else, so a later manager never hands that id out again and finds the split;
 *   split  the split entry is proposed on the parent (locally or through its leader,
 *          META_RPC_ENTRY), resent every second until this node has applied it;
 *   finish an op on shard 0 rewrites the parent's and the child's 'H' rows as applied.
 * A manager that takes over first looks for an 'H' row in state=splitting and drives that
 * split on (a resent split entry that finds the parent at a later epoch is refused: a
 * no-op). A single node (no cluster) never splits.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/cluster.h"
#include "meta/split.h"

#define LAYOUT_MAGIC "MGLY"
#define LAYOUT_VERSION 1
#define LAYOUT_SHARD_BYTES 32
#define SPLIT_CMD_VERSION 1
#define SPLIT_CMD_BYTES 29

/* ------------------------------------------------------------------ codecs */

void meta__layout_encode(const struct meta__layout *l, struct mg_buf *out)
{
    uint8_t v = LAYOUT_VERSION;
    mg_buf_append(out, LAYOUT_MAGIC, 4);
    mg_buf_append(out, &v, 1);
    meta__put_u32(out, l->initial);
    meta__put_u32(out, l->n);
    for (unsigned i = 0; i < l->n; i++) {
        meta__put_u32(out, l->s[i].id);
        meta__put_u32(out, l->s[i].epoch);
        meta__put_u64(out, l->s[i].lo);
        meta__put_u64(out, l->s[i].hi);
        meta__put_u64(out, l->s[i].since);
    }
}

int meta__layout_decode(const void *buf, size_t len, struct meta__layout *l)
{
    const uint8_t *p = buf;
    if (len < 13 || memcmp(p, LAYOUT_MAGIC, 4) != 0 || p[4] != LAYOUT_VERSION)
        return MG_ECORRUPT;
    uint32_t initial = meta__get_u32(p + 5), n = meta__get_u32(p + 9);
    if (initial == 0 || initial > META_SHARDS_MAX - 1 || n == 0 || n > META_SHARDS_MAX - 1 ||
        len != 13 + (size_t)n * LAYOUT_SHARD_BYTES)
        return MG_ECORRUPT;
    memset(l, 0, sizeof(*l));
    l->initial = initial;
    l->n = n;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *q = p + 13 + (size_t)i * LAYOUT_SHARD_BYTES;
        struct meta__layout_shard *s = &l->s[i];
        s->id = meta__get_u32(q);
        s->epoch = meta__get_u32(q + 4);
        s->lo = meta__get_u64(q + 8);
        s->hi = meta__get_u64(q + 16);
        s->since = meta__get_u64(q + 24);
        if (s->id == 0 || s->id > META_SHARDS_MAX - 1 || s->epoch == 0 ||
            (i > 0 && s->id <= l->s[i - 1].id) || (s->hi != 0 && s->hi <= s->lo))
            return MG_ECORRUPT;
    }
    return 0;
}

void meta__layout_initial(struct meta__layout *l, uint32_t initial)
{
    memset(l, 0, sizeof(*l));
    if (initial == 0 || initial > META_SHARDS_MAX - 1)
        initial = 1;
    l->initial = initial;
    l->n = initial;
    uint64_t span = UINT64_MAX / initial;
    for (uint32_t i = 1; i <= initial; i++) {
        struct meta__layout_shard *s = &l->s[i - 1];
        s->id = i;
        s->epoch = 1;
        s->lo = span * (i - 1);
        s->hi = i == initial ? 0 : span * i; /* 0: to the end of the id space */
    }
}

int meta__layout_find(const struct meta__layout *l, uint64_t bucket_id)
{
    for (unsigned i = 0; i < l->n; i++)
        if (bucket_id >= l->s[i].lo && (bucket_id < l->s[i].hi || l->s[i].hi == 0))
            return (int)i;
    return -1;
}

void meta__split_cmd_encode(const struct meta__split_cmd *c, struct mg_buf *out)
{
    uint8_t v = SPLIT_CMD_VERSION;
    mg_buf_append(out, &v, 1);
    meta__put_u32(out, c->parent);
    meta__put_u32(out, c->parent_epoch);
    meta__put_u32(out, c->child);
    meta__put_u64(out, c->at);
    meta__put_u64(out, c->hi);
}

int meta__split_cmd_decode(const void *buf, size_t len, struct meta__split_cmd *c)
{
    const uint8_t *p = buf;
    if (len != SPLIT_CMD_BYTES || p[0] != SPLIT_CMD_VERSION)
        return MG_ECORRUPT;
    c->parent = meta__get_u32(p + 1);
    c->parent_epoch = meta__get_u32(p + 5);
    c->child = meta__get_u32(p + 9);
    c->at = meta__get_u64(p + 13);
    c->hi = meta__get_u64(p + 21);
    return 0;
}

int meta__split_entry(const void *buf, size_t len, struct meta__split_cmd *c)
{
    struct meta_ws_header h;
    if (meta__ws_decode(buf, len, &h) != 0 || h.nrecords != 1)
        return 0;
    size_t pos = 0;
    struct meta_ws_record r;
    if (meta__ws_next(buf, len, &pos, &r) != 1 || r.type != META_WS_PUT || r.key.len != 2 ||
        (uint8_t)r.key.base[0] != META_K_SYS || r.key.base[1] != META_SYS_SPLIT)
        return 0;
    return meta__split_cmd_decode(r.value.base, r.value.len, c) == 0;
}

void meta__split_entry_encode(const struct meta__split_cmd *c, struct mg_buf *out)
{
    struct meta_ws *ws = meta__ws_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_sys_split(&k);
    meta__split_cmd_encode(c, &v);
    meta__ws_put(ws, k.base, k.len, v.base, v.len);
    struct meta_ws_header h = {.shard_id = c->parent,
                               .range_epoch = c->parent_epoch,
                               .timestamp_ms = meta__now_ms()};
    meta__ws_encode(ws, &h, out);
    meta__ws_destroy(ws);
    mg_buf_close(&k);
    mg_buf_close(&v);
}

/* ------------------------------------------------------------------- rules */

int meta__layout_split(struct meta__layout *l, const struct meta__split_cmd *c)
{
    for (unsigned i = 0; i < l->n; i++)
        if (l->s[i].id == c->child)
            return l->s[i].lo == c->at && l->s[i].hi == c->hi ? 1 : -1;
    if (c->child == 0 || c->child > META_SHARDS_MAX - 1 || l->n >= META_SHARDS_MAX - 1)
        return -1;
    int pi = -1;
    for (unsigned i = 0; i < l->n; i++)
        if (l->s[i].id == c->parent)
            pi = (int)i;
    if (pi < 0)
        return -1;
    struct meta__layout_shard *p = &l->s[pi];
    if (p->epoch != c->parent_epoch || p->hi != c->hi || c->at <= p->lo ||
        (p->hi != 0 && c->at >= p->hi) || p->epoch == UINT32_MAX)
        return -1;
    p->hi = c->at;
    p->epoch++;
    struct meta__layout_shard child = {
        .id = c->child, .epoch = p->epoch, .lo = c->at, .hi = c->hi};
    unsigned at = l->n; /* keep ids ascending */
    while (at > 0 && l->s[at - 1].id > child.id) {
        l->s[at] = l->s[at - 1];
        at--;
    }
    l->s[at] = child;
    l->n++;
    return 0;
}

int meta__split_choose(const uint64_t *ids, const uint64_t *counts, size_t n, uint64_t *at)
{
    if (n < 2)
        return -1;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += counts[i];
    /* Boundary j (1..n-1) puts buckets [0, j) below: minimise |2 * below - total|. */
    uint64_t below = 0, best_diff = UINT64_MAX;
    size_t best = 1;
    for (size_t j = 1; j < n; j++) {
        below += counts[j - 1];
        uint64_t twice = 2 * below;
        uint64_t diff = twice > total ? twice - total : total - twice;
        if (diff < best_diff) {
            best_diff = diff;
            best = j;
        }
    }
    *at = ids[best];
    return 0;
}

uint64_t meta__bucket_id_initial(uint32_t initial, uint64_t n)
{
    if (initial == 0)
        initial = 1;
    uint64_t span = UINT64_MAX / initial;
    return span * (n % initial) + n / initial + 1;
}

/* ------------------------------------------------------------------ driver */

#define CHECK_MIN_MS 1000    /* between size checks at least */
#define CHECK_COST_FACTOR 20 /* and 20x the last check's walk: the walker uses <= 5% */
#define RESEND_MS 1000       /* a split entry not applied here yet is sent again */

enum sp_state { SP_IDLE, SP_CHECKING, SP_MARKING, SP_SPLITTING, SP_FINISHING };

struct check_range {
    uint32_t id, epoch;
    uint64_t lo, hi;
};

struct meta__splitter {
    enum sp_state state;
    int64_t next_check_ms;
    int64_t resend_ms;
    int entry_inflight;
    int stopping;
    struct meta__split_cmd cmd;
    uint64_t splits; /* completed here (metrics, logs) */
    /* the check, on a worker */
    uv_work_t work;
    int working;
    struct eng_db *db;
    uint64_t max_keys, max_bytes;
    struct check_range ranges[META_SHARDS_MAX];
    unsigned nranges;
    int found; /* out: a candidate */
    struct meta__split_cmd cand;
    uint64_t cand_keys, cand_bytes;
    int64_t took_ms;
    struct meta__shards *ss;
};

static int s0_ready(struct meta__shards *ss)
{
    struct meta__shard *s = &ss->shards[0];
    return s->g != NULL && !s->reopening && mraft_group_ready(s->g);
}

/* Rows and bytes of [lo, hi) up to the thresholds (0 = no limit on that one): 1 when past
 * either. Then, for a candidate, the rows per bucket. Worker thread; RocksDB iterators are
 * thread-safe. */
static void range_bounds(const struct check_range *r, struct mg_buf *lo, struct mg_buf *hi)
{
    struct mg_buf x;
    mg_buf_init(&x);
    meta__key_bucket_range(r->lo, lo, &x);
    x.len = 0;
    if (r->hi != 0)
        meta__key_bucket_range(r->hi, hi, &x);
    else
        meta__key_data_range(&x, hi);
    mg_buf_close(&x);
}

static int past_threshold(struct meta__splitter *sp, const struct check_range *r, uint64_t *keys,
                          uint64_t *bytes)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    range_bounds(r, &lo, &hi);
    *keys = *bytes = 0;
    int past = 0;
    struct eng_iter *it = eng_iter_create(sp->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl, vl;
        eng_iter_key(it, &kl);
        eng_iter_value(it, &vl);
        ++*keys;
        *bytes += kl + vl;
        if ((sp->max_keys != 0 && *keys > sp->max_keys) ||
            (sp->max_bytes != 0 && *bytes > sp->max_bytes)) {
            past = 1;
            break;
        }
    }
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return past;
}

/* The split point of r: rows per bucket in key order (a bucket's rows are contiguous). */
static int choose_point(struct meta__splitter *sp, const struct check_range *r, uint64_t *at)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    range_bounds(r, &lo, &hi);
    size_t n = 0, cap = 64;
    uint64_t *ids = mg_malloc(cap * sizeof(*ids)), *counts = mg_malloc(cap * sizeof(*counts));
    struct eng_iter *it = eng_iter_create(sp->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        uint64_t id;
        if (meta__key_bucket_of(k, kl, &id) != 0)
            continue;
        if (n > 0 && ids[n - 1] == id) {
            counts[n - 1]++;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            ids = mg_realloc(ids, cap * sizeof(*ids));
            counts = mg_realloc(counts, cap * sizeof(*counts));
        }
        ids[n] = id;
        counts[n++] = 1;
    }
    eng_iter_destroy(it);
    int rv = meta__split_choose(ids, counts, n, at);
    mg_free(ids);
    mg_free(counts);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return rv;
}

static void check_work(uv_work_t *w)
{
    struct meta__splitter *sp = w->data;
    int64_t t0 = meta__now_ms();
    sp->found = 0;
    for (unsigned i = 0; i < sp->nranges && !sp->found; i++) {
        const struct check_range *r = &sp->ranges[i];
        uint64_t keys, bytes, at;
        if (!past_threshold(sp, r, &keys, &bytes) || choose_point(sp, r, &at) != 0)
            continue;
        sp->found = 1;
        sp->cand = (struct meta__split_cmd){
            .parent = r->id, .parent_epoch = r->epoch, .at = at, .hi = r->hi};
        sp->cand_keys = keys;
        sp->cand_bytes = bytes;
    }
    sp->took_ms = meta__now_ms() - t0;
}

static void submit_step(struct meta__shards *ss, unsigned step);

static int free_id_left(struct meta__shards *ss)
{
    for (unsigned i = 1; i < META_SHARDS_MAX; i++)
        if (i >= ss->n || !ss->shards[i].present)
            return 1;
    return 0;
}

static void check_after(uv_work_t *w, int status)
{
    struct meta__splitter *sp = w->data;
    struct meta__shards *ss = sp->ss;
    sp->working = 0;
    if (sp->stopping) {
        mg_free(sp); /* meta__split_stop left it to us */
        return;
    }
    int64_t pause = sp->took_ms * CHECK_COST_FACTOR;
    sp->next_check_ms = meta__now_ms() + (pause > CHECK_MIN_MS ? pause : CHECK_MIN_MS);
    if (sp->state != SP_CHECKING)
        return;
    sp->state = SP_IDLE;
    if (status != 0 || !sp->found || ss->closing || !s0_ready(ss))
        return;
    struct meta__shard *p = sp->cand.parent < ss->n ? &ss->shards[sp->cand.parent] : NULL;
    if (p == NULL || !p->present || p->epoch != sp->cand.parent_epoch)
        return; /* the layout moved meanwhile: the next check decides */
    sp->cmd = sp->cand;
    mg_log(MG_LOG_INFO, "event=split_begin shard=%u epoch=%u at=%llu keys=%s%llu bytes=%llu",
           sp->cmd.parent, sp->cmd.parent_epoch, (unsigned long long)sp->cmd.at,
           sp->max_keys != 0 && sp->cand_keys > sp->max_keys ? ">" : "",
           (unsigned long long)sp->cand_keys, (unsigned long long)sp->cand_bytes);
    sp->state = SP_MARKING;
    submit_step(ss, META_SPLIT_STEP_MARK);
}

static void start_check(struct meta__shards *ss)
{
    struct meta__splitter *sp = ss->cl->split;
    sp->nranges = 0;
    for (unsigned i = 1; i < ss->n; i++) {
        const struct meta__shard *s = &ss->shards[i];
        if (s->present)
            sp->ranges[sp->nranges++] =
                (struct check_range){.id = s->id, .epoch = s->epoch, .lo = s->lo_id, .hi = s->hi_id};
    }
    sp->db = ss->ms->db;
    sp->max_keys = ss->cl->split_keys;
    sp->max_bytes = ss->cl->split_bytes;
    sp->work.data = sp;
    sp->state = SP_CHECKING;
    if (uv_queue_work(&ss->rt->loop, &sp->work, check_work, check_after) != 0) {
        sp->state = SP_IDLE;
        sp->next_check_ms = meta__now_ms() + CHECK_MIN_MS;
        return;
    }
    sp->working = 1;
}

/* ----------------------------------------------------------- shard 0 steps */

static void on_step_done(struct meta_op *op)
{
    struct meta__shards *ss = op->data;
    struct meta__splitter *sp = ss->cl != NULL ? ss->cl->split : NULL;
    unsigned step = op->in.mask;
    int status = op->status;
    meta_op_destroy(op);
    if (sp == NULL || sp->stopping)
        return;
    if (status != 0) {
        mg_log(MG_LOG_WARN, "event=split_step_failed step=%u shard=%u err=%s", step,
               sp->cmd.parent, mg_err_name(status));
        sp->state = SP_IDLE; /* a mark that committed is found again in the 'H' rows */
        sp->next_check_ms = meta__now_ms() + CHECK_MIN_MS;
        return;
    }
    if (step == META_SPLIT_STEP_MARK) {
        sp->state = SP_SPLITTING;
        sp->resend_ms = 0;
        return;
    }
    if (step == META_SPLIT_STEP_FINISH)
        sp->splits++;
    mg_log(MG_LOG_INFO, "event=split_%s shard=%u child=%u at=%llu",
           step == META_SPLIT_STEP_FINISH ? "done" : "abandoned", sp->cmd.parent, sp->cmd.child,
           (unsigned long long)sp->cmd.at);
    sp->state = SP_IDLE;
    sp->next_check_ms = 0; /* look again at once: another shard may be past the threshold */
}

static void submit_step(struct meta__shards *ss, unsigned step)
{
    struct meta__cluster *cl = ss->cl;
    struct meta__splitter *sp = cl->split;
    if (cl->client == NULL && meta_client_create(ss->ms, &ss->rt->loop, &cl->client) != 0) {
        sp->state = SP_IDLE;
        return;
    }
    struct meta_op *op = meta_op_create(META_OP_BUCKET_UPDATE);
    op->type = META_OP__SPLIT;
    op->in.mask = step;
    op->data = ss;
    if (meta_op_submit(cl->client, op, on_step_done) != 0) {
        meta_op_destroy(op);
        sp->state = SP_IDLE;
    }
}

/* "key=value ..." text of an 'H' row: the value of key, or 0 if absent. */
static uint64_t row_field(const char *v, size_t vl, const char *key, int *have)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 1 < vl; i++) {
        if ((i == 0 || v[i - 1] == ' ') && memcmp(v + i, key, kl) == 0 && v[i + kl] == '=') {
            uint64_t x = 0;
            size_t j = i + kl + 1;
            int digits = 0;
            for (; j < vl && v[j] >= '0' && v[j] <= '9' && digits < 20; j++, digits++)
                x = x * 10 + (uint64_t)(v[j] - '0');
            if (have != NULL)
                *have = digits > 0;
            return x;
        }
    }
    if (have != NULL)
        *have = 0;
    return 0;
}

static int row_splitting(const char *v, size_t vl)
{
    static const char tag[] = "state=splitting";
    size_t tl = sizeof(tag) - 1;
    for (size_t i = 0; i + tl <= vl; i++)
        if (memcmp(v + i, tag, tl) == 0)
            return 1;
    return 0;
}

/* Scan shard 0's 'H' rows as applied here: the highest shard id named, and the first split
 * left in state=splitting (*pending set, 1 returned). */
static int scan_shard_rows(struct meta_store *ms, uint32_t *max_id, struct meta__split_cmd *pending)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_cluster_shard(&lo, 0);
    meta__key_cluster_shard(&hi, UINT32_MAX);
    int found = 0;
    *max_id = 0;
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl, vl;
        const char *k = eng_iter_key(it, &kl);
        const char *v = eng_iter_value(it, &vl);
        if (kl != 6)
            continue;
        uint32_t id = meta__get_u32(k + 2);
        if (id > *max_id)
            *max_id = id;
        if (found || !row_splitting(v, vl))
            continue;
        int h1, h2, h3, h4;
        struct meta__split_cmd c = {.child = id};
        c.at = row_field(v, vl, "lo", &h1);
        c.hi = row_field(v, vl, "hi", &h2);
        c.parent = (uint32_t)row_field(v, vl, "parent", &h3);
        c.parent_epoch = (uint32_t)row_field(v, vl, "pepoch", &h4);
        if (h1 && h2 && h3 && h4) {
            *pending = c;
            found = 1;
        }
    }
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return found;
}

int meta__split_do(struct meta_store *ms, struct meta_op *op)
{
    struct meta__shards *ss = ms->rt->shards;
    struct meta__cluster *cl = ss->cl;
    if (cl == NULL || cl->split == NULL)
        return MG_EINVALIDARGUMENT;
    struct meta__splitter *sp = cl->split;
    struct meta__split_cmd *c = &sp->cmd;
    struct meta_ws *ws = meta__ws_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    int rv = 0;
    if (op->in.mask == META_SPLIT_STEP_MARK) {
        uint32_t max_id;
        struct meta__split_cmd pending;
        if (scan_shard_rows(ms, &max_id, &pending)) {
            rv = MG_EBUSY; /* a split is half done: the driver re-drives that one first */
        } else {
            /* past every id shard 0 ever named and every id this node knows */
            c->child = (max_id > ss->n - 1 ? max_id : ss->n - 1) + 1;
            if (c->child >= META_SHARDS_MAX) {
                rv = MG_ENOSPC;
            } else {
                meta__key_cluster_shard(&k, c->child);
                char s[256];
                int len = snprintf(s, sizeof(s),
                                   "shard=%u lo=%llu hi=%llu epoch=%u parent=%u pepoch=%u "
                                   "state=splitting",
                                   c->child, (unsigned long long)c->at, (unsigned long long)c->hi,
                                   c->parent_epoch + 1, c->parent, c->parent_epoch);
                meta__ws_put(ws, k.base, k.len, s, (size_t)len);
            }
        }
    } else if (op->in.mask == META_SPLIT_STEP_ABANDON) {
        meta__key_cluster_shard(&k, c->child);
        meta__ws_delete(ws, k.base, k.len);
    } else {
        const uint32_t ids[2] = {c->parent, c->child};
        for (unsigned i = 0; i < 2; i++) {
            if (ids[i] >= ss->n || !ss->shards[ids[i]].present)
                continue;
            k.len = v.len = 0;
            meta__key_cluster_shard(&k, ids[i]);
            meta__cluster_shard_row(cl, &ss->shards[ids[i]], &v);
            meta__ws_put(ws, k.base, k.len, v.base, v.len);
        }
    }
    if (rv == 0)
        rv = meta__shard_apply(&ms->shard, ws);
    mg_buf_close(&k);
    mg_buf_close(&v);
    meta__ws_destroy(ws);
    return rv;
}

/* ------------------------------------------------------------- split entry */

struct entry_send {
    struct mraft_propose req;
    struct meta__shards *ss;
};

static void entry_sent(struct meta__shards *ss, int status)
{
    struct meta__splitter *sp = ss->cl != NULL ? ss->cl->split : NULL;
    if (sp == NULL || sp->stopping)
        return;
    sp->entry_inflight = 0;
    if (status != 0)
        mg_log(MG_LOG_INFO, "event=split_entry_retry shard=%u child=%u err=%s", sp->cmd.parent,
               sp->cmd.child, mg_err_name(status));
}

static void on_local_entry(struct mraft_propose *req, int status, uint64_t index, uint64_t hint,
                           void *result)
{
    (void)index, (void)hint, (void)result;
    struct entry_send *e = req->data;
    entry_sent(e->ss, status);
    mg_free(e);
}

static void on_remote_entry(void *data, int status)
{
    struct entry_send *e = data;
    entry_sent(e->ss, status);
    mg_free(e);
}

static void send_entry(struct meta__shards *ss)
{
    struct meta__splitter *sp = ss->cl->split;
    struct meta__shard *p = sp->cmd.parent < ss->n ? &ss->shards[sp->cmd.parent] : NULL;
    if (p == NULL || !p->present)
        return;
    struct mg_buf buf;
    mg_buf_init(&buf);
    meta__split_entry_encode(&sp->cmd, &buf);
    struct entry_send *e = mg_calloc(1, sizeof(*e));
    e->ss = ss;
    e->req.data = e;
    int rv;
    if (p->g != NULL && !p->reopening && mraft_group_ready(p->g))
        rv = mraft_group_propose(p->g, &e->req, buf.base, buf.len, on_local_entry, NULL);
    else
        rv = meta__router_propose_remote(ss, p, buf.base, buf.len, on_remote_entry, e);
    mg_buf_close(&buf);
    if (rv != 0) {
        mg_free(e);
        return; /* resent at the next RESEND_MS */
    }
    sp->entry_inflight = 1;
}

/* The split in sp->cmd applied here: the child is in the layout with that range. */
static int applied_here(struct meta__shards *ss, const struct meta__split_cmd *c)
{
    if (c->child >= ss->n)
        return 0;
    const struct meta__shard *s = &ss->shards[c->child];
    return s->present && s->lo_id == c->at && s->hi_id == c->hi;
}

void meta__split_tick(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    if (cl->split == NULL) {
        if (cl->split_keys == 0 && cl->split_bytes == 0)
            return; /* splits off */
        cl->split = mg_calloc(1, sizeof(*cl->split));
        cl->split->ss = ss;
    }
    struct meta__splitter *sp = cl->split;
    if (ss->closing || sp->stopping || sp->state == SP_MARKING || sp->state == SP_FINISHING ||
        sp->state == SP_CHECKING)
        return; /* an op or the worker is out: its callback moves on */
    if (!s0_ready(ss)) {
        sp->state = SP_IDLE; /* not the manager (any more): the next one re-drives */
        return;
    }
    int64_t now = meta__now_ms();
    if (sp->state == SP_IDLE) {
        uint32_t max_id;
        struct meta__split_cmd pending;
        if (scan_shard_rows(ss->ms, &max_id, &pending)) {
            sp->cmd = pending;
            sp->state = SP_SPLITTING;
            sp->resend_ms = 0;
            mg_log(MG_LOG_INFO, "event=split_redrive shard=%u child=%u at=%llu", pending.parent,
                   pending.child, (unsigned long long)pending.at);
        } else if (now >= sp->next_check_ms && free_id_left(ss)) {
            start_check(ss);
            return;
        } else {
            return;
        }
    }
    if (sp->state == SP_SPLITTING) {
        if (applied_here(ss, &sp->cmd)) {
            sp->state = SP_FINISHING;
            submit_step(ss, META_SPLIT_STEP_FINISH);
            return;
        }
        /* The parent is past the epoch the command names and the child is not here: another
         * split of the parent came first in its log (this manager chose from a layout that
         * lagged), so this command is refused on every replica, now and on every replay.
         * Its id was never used anywhere: its 'H' row goes. (A parent not here yet, or still
         * below the epoch, is this node lagging: wait.) */
        const struct meta__shard *p =
            sp->cmd.parent < ss->n ? &ss->shards[sp->cmd.parent] : NULL;
        if (p != NULL && p->present && p->epoch > sp->cmd.parent_epoch) {
            sp->state = SP_FINISHING;
            submit_step(ss, META_SPLIT_STEP_ABANDON);
            return;
        }
        if (!sp->entry_inflight && now >= sp->resend_ms) {
            sp->resend_ms = now + RESEND_MS;
            send_entry(ss);
        }
    }
}

void meta__split_stop(struct meta__shards *ss)
{
    struct meta__splitter *sp = ss->cl->split;
    if (sp == NULL)
        return;
    ss->cl->split = NULL;
    if (sp->working)
        sp->stopping = 1; /* check_after frees it */
    else
        mg_free(sp);
}
