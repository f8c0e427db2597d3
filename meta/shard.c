/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shards as raft groups (DESIGN.md 5, 6; docs/ops.md). The meta thread owns
 * one raft/ host and one group per shard: shard 0 (group 1) holds the
 * manager's rows, data shards 1..n-1 (groups 2..n) split the bucket id space
 * into equal ranges, so every bucket's rows (one contiguous key range) live in
 * exactly one data shard.
 *
 * The Raft log is the only write-ahead log. apply() writes an entry's rows and
 * the shard's applied index in ONE RocksDB write with the WAL off; the flusher
 * (a timer plus a worker thread) records each shard's applied index A, flushes
 * RocksDB's memtables, and then reports A as the group's durable index, so
 * libraft never truncates an entry RocksDB may still lose. After kill -9
 * RocksDB comes back at its last flush, restore() reads the applied index
 * stored with it and the host replays the log above it. Replaying an entry
 * twice is harmless: its rows are absolute puts and deletes computed on the
 * leader, and a retire of a blob already freed is a logged no-op.
 *
 * Side effects of an entry run in apply, on every replica: retiring the blobs
 * the op stopped referencing, and invalidating the bucket cache for the
 * bucket rows it wrote.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "common/fs.h"
#include "meta/cluster.h"
#include "meta/install.h"
#include "meta/opcodec.h"
#include "meta/orphan.h"
#include "meta/remote.h"
#include "meta/shard.h"
#include "meta/split.h"

#define FLUSH_TICK_MS 1000
/* Point reads of rows still in the memtable are ~20% faster than of rows flushed to L0 (GET
 * A/B, 30 s vs 5 s cadence: 1.21x), so the flusher does not flush on a short clock: it flushes
 * when 100,000 entries are not durable (the log above the durable index stays bounded, about
 * 130 MB at 1 KiB objects, replayed in ~2 s after kill -9) or a minute has passed. */
#define FLUSH_MAX_ENTRIES 100000 /* flush early when this many entries are not durable */
#define FLUSH_MAX_AGE_MS 60000   /* and at least this often when anything is not durable */
/* Entries a cluster keeps behind each snapshot (on_install): a node down for a while catches
 * up from the log. At 1 KiB entries 8 MiB a group; about 30 s of writes at this box's rate. */
#define CLUSTER_SNAPSHOT_TRAILING 8192
#define CLUSTER_BALANCE_MS 2000 /* leader balancing round (mraft_host_balance) */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ----------------------------------------------------------------- routing */

struct meta__shard *meta__shard_of_key(struct meta__shards *ss, const void *k, size_t kl)
{
    const uint8_t *p = k;
    if (kl == 0)
        return NULL;
    if (p[0] == META_K_SHARD0)
        return &ss->shards[0];
    uint64_t id;
    if (p[0] == META_K_DATA && meta__key_bucket_of(k, kl, &id) == 0)
        return meta__shard_of_bucket(ss, id);
    return NULL;
}

struct meta__shard *meta__shard_of_bucket(struct meta__shards *ss, uint64_t bucket_id)
{
    for (unsigned i = 1; i < ss->n; i++)
        if (ss->shards[i].present && bucket_id >= ss->shards[i].lo_id &&
            (bucket_id < ss->shards[i].hi_id || ss->shards[i].hi_id == 0))
            return &ss->shards[i];
    return &ss->shards[1];
}

uint64_t meta__shards_bucket_id(struct meta__shards *ss, uint64_t n)
{
    if (ss->cl != NULL && mg_env_u64("MG_FAULT_BUCKET_ID_LAYOUT", 0)) {
        /* Fault switch (test_cluster_split shows it fails): ids spread over the CURRENT
         * layout, as before splits existed, which collide with live ids after a split. */
        struct meta__shard *d[META_SHARDS_MAX];
        unsigned nd = 0;
        for (unsigned i = 1; i < ss->n; i++)
            if (ss->shards[i].present)
                d[nd++] = &ss->shards[i];
        return d[n % nd]->lo_id + n / nd + 1;
    }
    return meta__bucket_id_initial(ss->initial, n);
}

/* The data shards of ss as a layout (shard ids ascending). */
static void layout_of(const struct meta__shards *ss, struct meta__layout *l)
{
    memset(l, 0, sizeof(*l));
    l->initial = ss->initial;
    for (unsigned i = 1; i < ss->n; i++) {
        const struct meta__shard *s = &ss->shards[i];
        if (s->present)
            l->s[l->n++] = (struct meta__layout_shard){.id = s->id,
                                                       .epoch = s->epoch,
                                                       .lo = s->lo_id,
                                                       .hi = s->hi_id,
                                                       .since = s->since};
    }
}

/* Make l the layout of ss (on the meta thread): shard 0 stays; data shards take l's ranges
 * and epochs; a shard new to ss starts with nothing applied and no group (open_timer opens
 * it). Then the copy other threads read. */
static void layout_install(struct meta__shards *ss, const struct meta__layout *l)
{
    ss->initial = l->initial;
    ss->shards[0].id = 0;
    ss->shards[0].ss = ss;
    ss->shards[0].present = 1;
    ss->shards[0].epoch = 1;
    unsigned n = 1;
    for (unsigned i = 0; i < l->n; i++) {
        struct meta__shard *s = &ss->shards[l->s[i].id];
        s->id = l->s[i].id;
        s->ss = ss;
        s->lo_id = l->s[i].lo;
        s->hi_id = l->s[i].hi;
        s->epoch = l->s[i].epoch;
        s->since = l->s[i].since;
        s->present = 1;
        if (s->id + 1 > n)
            n = s->id + 1;
    }
    for (unsigned i = 1; i < n; i++)
        if (!ss->shards[i].present) {
            ss->shards[i].id = i; /* a hole: looked up by id, never routed to */
            ss->shards[i].ss = ss;
        }
    ss->n = n;
    pthread_mutex_lock(&ss->stats_lock);
    *ss->pub = *l;
    pthread_mutex_unlock(&ss->stats_lock);
}

void meta__shards_layout_get(struct meta__shards *ss, struct meta__layout *out)
{
    pthread_mutex_lock(&ss->stats_lock);
    *out = *ss->pub;
    pthread_mutex_unlock(&ss->stats_lock);
}

/* ------------------------------------------------------------ request ids */

/* Open addressing over a window of 64 slots from the id's hash. A lookup scans the whole
 * window (a slot freed by a refused op leaves a hole, so an empty slot does not end the
 * search); an insert takes the first empty slot, else evicts a finished one without waiters. */
#define DEDUP_WINDOW 64
static struct meta_dedup_slot *dedup_find(struct meta__shards *ss, uint64_t id, int insert)
{
    size_t mask = META_DEDUP_SLOTS - 1;
    size_t start = (size_t)(id * 0x9E3779B97F4A7C15ull) & mask;
    struct meta_dedup_slot *empty = NULL, *evict = NULL;
    for (size_t probe = 0; probe < DEDUP_WINDOW; probe++) {
        struct meta_dedup_slot *d = &ss->dedup[(start + probe) & mask];
        if (d->id == id)
            return d;
        if (d->id == 0 && empty == NULL)
            empty = d;
        else if (d->id != 0 && d->done && d->waiters == NULL && evict == NULL)
            evict = d;
    }
    struct meta_dedup_slot *d = empty != NULL ? empty : evict;
    if (!insert || d == NULL)
        return NULL; /* insert with the window all in flight: run without dedup (logged) */
    mg_free(d->result);
    memset(d, 0, sizeof(*d));
    d->id = id;
    return d;
}

/* A retry answered from slot d: its status, and in a cluster the first attempt's results
 * (upload id, ETag, checksum, mtime, ...), which the retry's client needs as much as the
 * status: without them a CreateMultipartUpload retried across a failover answered an empty
 * UploadId. */
static int dedup_answer(const struct meta_dedup_slot *d, struct meta_op *op)
{
    int status = d->status;
    if (d->result != NULL &&
        meta__opcodec_decode_out(d->result, d->result_len, op, &status) != 0) {
        mg_log(MG_LOG_ERROR, "event=dedup_result_corrupt request_id=%llu",
               (unsigned long long)d->id);
        return MG_EIO; /* our own bytes, checked by their CRC: never answer half a result */
    }
    return status;
}

/* The results an op's entry carries for the dedup tables (RESULT record): op->out without
 * what no response uses and what would double the entry (inline bytes, extents, user
 * metadata, tags, part lists). */
static void dedup_result_encode(const struct meta_op *op, struct mg_buf *out)
{
    struct meta_op t = *op;
    struct meta_object *o = &t.out.object;
    o->data = (struct meta_data){.size = o->data.size};
    o->user_meta = NULL;
    o->nuser_meta = 0;
    o->tags = NULL;
    o->ntags = 0;
    o->parts = NULL;
    o->nparts = 0;
    meta__opcodec_encode_out(&t, 0, out);
}

int meta__dedup_begin(struct meta__shards *ss, struct meta_op *op, int *status)
{
    uint64_t id = op->in.request_id;
    if (id == 0)
        return 0;
    struct meta_dedup_slot *d = dedup_find(ss, id, 0);
    if (d != NULL && d->done) {
        ss->dedup_hits++;
        *status = dedup_answer(d, op);
        return 1;
    }
    if (d != NULL) {
        op->priv->next = d->waiters;
        d->waiters = op->priv;
        ss->dedup_hits++;
        return 2;
    }
    if (dedup_find(ss, id, 1) == NULL)
        mg_log(MG_LOG_WARN, "event=dedup_full request_id=%llu", (unsigned long long)id);
    return 0;
}

void meta__dedup_finish(struct meta__shards *ss, struct meta_op *op, int status, int appended)
{
    uint64_t id = op->in.request_id;
    struct meta_dedup_slot *d = id != 0 ? dedup_find(ss, id, 0) : NULL;
    if (d == NULL)
        return;
    struct meta__op_priv *w = d->waiters;
    d->waiters = NULL;
    if (appended) {
        d->done = 1;
        d->status = status;
    } else {
        d->id = 0; /* refused before the log: a retry may run the op */
    }
    while (w != NULL) {
        struct meta__op_priv *next = w->next;
        w->next = NULL;
        meta__op_complete(w->op, appended ? dedup_answer(d, w->op) : status);
        w = next;
    }
    if (!appended) {
        mg_free(d->result);
        d->result = NULL;
    }
}

/* An applied entry with a request id (any replica, replay included) is a finished op. */
static void dedup_applied(struct meta__shards *ss, uint64_t id, struct mg_str result)
{
    if (id == 0)
        return;
    struct meta_dedup_slot *d = dedup_find(ss, id, 0);
    if (d == NULL && (d = dedup_find(ss, id, 1)) != NULL) {
        d->done = 1; /* another node's op: it succeeded, since its entry applied */
        d->status = 0;
    }
    /* This node's own op in flight records its outcome itself; its results come from here
     * too, so that retries queued behind it get them. */
    if (d != NULL && d->result == NULL && result.len > 0) {
        d->result = mg_malloc(result.len);
        memcpy(d->result, result.base, result.len);
        d->result_len = (uint32_t)result.len;
    }
}

/* ------------------------------------------------------------------- apply */

static void invalidate_bucket(struct meta_store *ms, struct mg_str key)
{
    struct mg_str name;
    if (meta__key_bucket_decode(key.base, key.len, &name) != 0)
        return;
    struct meta_bucket_cache_slot *slot = meta__bucket_slot(ms, name);
    pthread_mutex_lock(&slot->lock);
    atomic_fetch_add(&ms->buckets.gen, 1);
    slot->valid = 0;
    pthread_mutex_unlock(&slot->lock);
}

/* A cluster's blobs live in one shared RADOS namespace, and every replica applies every
 * RETIRE record, but a reader's pin (meta_data_pin) holds only on the node that serves the
 * GET: a retire on another replica would remove the object under it (test_consistency's
 * streaming GET ended cleanly after 9 of 48 MiB). So a cluster retires a blob
 * CLUSTER_RETIRE_DELAY_MS after the entry applied, on every replica (RADOS removal is
 * idempotent): a GET of the replaced object that began before its replacement has that long
 * on any node. A clock bound, not a pin; a crash forgets the delayed retires (orphans).
 * TODO(#10): pins across nodes, one remover. Bounded: past CLUSTER_RETIRE_QUEUE_MAX queued,
 * blobs are retired at once. */
#define CLUSTER_RETIRE_DELAY_MS 30000
#define CLUSTER_RETIRE_QUEUE_MAX (1u << 20)
#define CLUSTER_RETIRE_TICK_MS 1000

struct delayed_retire {
    struct eng_blob_ref ref;
    int64_t due_ms;
    struct delayed_retire *next;
};

static void retire_now(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    struct meta_extent e = {.ref = *ref};
    struct meta_data d = {.size = ref->length, .extents = &e, .nextents = 1};
    meta__data_retire(ms, &d);
}

static void retire_later(struct meta__shards *ss, const struct eng_blob_ref *ref)
{
    if (ss->retire_n >= CLUSTER_RETIRE_QUEUE_MAX || ss->closing) {
        retire_now(ss->ms, ref);
        return;
    }
    struct delayed_retire *d = mg_malloc(sizeof(*d));
    d->ref = *ref;
    d->due_ms = now_ms() + CLUSTER_RETIRE_DELAY_MS;
    d->next = NULL;
    if (ss->retire_tail != NULL)
        ss->retire_tail->next = d;
    else
        ss->retire_head = d;
    ss->retire_tail = d;
    ss->retire_n++;
}

/* Every CLUSTER_RETIRE_TICK_MS (and at close, all=1): retire what is due, oldest first (the
 * queue is in due order). */
static void retire_due(struct meta__shards *ss, int all)
{
    int64_t now = now_ms();
    while (ss->retire_head != NULL && (all || ss->retire_head->due_ms <= now)) {
        struct delayed_retire *d = ss->retire_head;
        ss->retire_head = d->next;
        if (ss->retire_head == NULL)
            ss->retire_tail = NULL;
        ss->retire_n--;
        retire_now(ss->ms, &d->ref);
        mg_free(d);
    }
}

static void on_retire_tick(uv_timer_t *t)
{
    retire_due(t->data, 0);
}

static void side_effects(struct meta__shards *ss, const void *buf, size_t len)
{
    struct meta_store *ms = ss->ms;
    size_t pos = 0;
    struct meta_ws_record r;
    while (meta__ws_next(buf, len, &pos, &r) == 1) {
        if (r.type == META_WS_RETIRE) {
            if (ss->cl != NULL)
                retire_later(ss, &r.ref);
            else
                retire_now(ms, &r.ref);
        } else if (r.type == META_WS_PUT || r.type == META_WS_DEL) {
            if (r.key.len > 1 && (uint8_t)r.key.base[0] == META_K_SHARD0 &&
                r.key.base[1] == META_S0_BUCKET)
                invalidate_bucket(ms, r.key);
            else if (r.type == META_WS_PUT && ss->cl != NULL && r.key.len > 1 &&
                     (uint8_t)r.key.base[0] == META_K_SHARD0 && r.key.base[1] == META_S0_NODE)
                meta__members_learn_row(ss, r.value.base, r.value.len); /* a node joined */
        }
    }
}

const char meta__entry_stale = 1;

static void on_open_tick(uv_timer_t *t);

/* The applied index of s (and, for a split, the new layout) in one RocksDB write. */
static int commit_applied(struct meta__shard *s, uint64_t index, const struct meta__layout *l)
{
    struct eng_batch *b = eng_batch_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    if (l != NULL) {
        meta__key_sys_layout(&k);
        meta__layout_encode(l, &v);
        eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
        k.len = v.len = 0;
    }
    meta__key_applied(&k, s->id);
    meta__put_u64(&v, index);
    eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
    int rv = eng_batch_commit(s->ss->ms->db, b, 0);
    eng_batch_destroy(b);
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

/* A refused entry (split NULL) or a split command at index of s (split.c): the layout row
 * is written with s's applied index, so after kill -9 either both are back or the log
 * replays the split; a split already in the layout is a no-op. The child's group is opened
 * from open_timer (never from inside another group's apply). */
static int apply_special(struct meta__shard *s, uint64_t index, const struct meta__split_cmd *split,
                         void **result)
{
    struct meta__shards *ss = s->ss;
    struct meta__layout *l = NULL;
    int how = -1;
    if (split != NULL) {
        l = mg_malloc(sizeof(*l));
        layout_of(ss, l);
        how = split->parent == s->id ? meta__layout_split(l, split) : -1;
        for (unsigned i = 0; how == 0 && i < l->n; i++)
            if (l->s[i].id == s->id)
                l->s[i].since = index; /* the parent's new epoch starts after this entry */
    }
    int rv = commit_applied(s, index, how == 0 ? l : NULL);
    if (rv != 0) {
        mg_free(l);
        mg_log(MG_LOG_ERROR, "event=apply_failed shard=%u index=%llu err=%s", s->id,
               (unsigned long long)index, mg_err_name(rv));
        return rv;
    }
    s->applied = index;
    atomic_fetch_add(&ss->applied_entries, 1);
    if (split == NULL) {
        s->refused_stale++;
        *result = (void *)&meta__entry_stale;
    } else if (how == 0) {
        layout_install(ss, l);
        mg_log(MG_LOG_INFO, "event=shard_split shard=%u index=%llu child=%u at=%llu hi=%llu "
               "epoch=%u", s->id, (unsigned long long)index, split->child,
               (unsigned long long)split->at, (unsigned long long)split->hi, s->epoch);
        if (!ss->closing && ss->open_timer.loop != NULL)
            uv_timer_start(&ss->open_timer, on_open_tick, 0, 0);
    } else {
        mg_log(MG_LOG_INFO, "event=shard_split_noop shard=%u index=%llu child=%u at=%llu "
               "how=%s", s->id, (unsigned long long)index, split->child,
               (unsigned long long)split->at, how == 1 ? "applied_before" : "refused");
    }
    mg_free(l);
    meta__fence_applied(s);
    return 0;
}

static int on_apply(void *data, uint64_t index, const void *buf, size_t len, void **result)
{
    struct meta__shard *s = data;
    struct meta_store *ms = s->ss->ms;
    struct meta_ws_header h;
    int rv = meta__ws_decode(buf, len, &h);
    if (rv != 0 || h.shard_id != s->id) {
        mg_log(MG_LOG_FATAL, "event=entry_corrupt shard=%u index=%llu len=%zu", s->id,
               (unsigned long long)index, len);
        return MG_ECORRUPT;
    }
    /* A cluster's data shard refuses an entry of another range epoch: it was encoded against
     * a layout that a split (applied before it in this log) changed. Deterministic, so every
     * replica refuses it; only the applied index moves. */
    int stale = s->ss->cl != NULL && s->id != 0 && h.range_epoch != s->epoch;
    if (stale && index <= s->since) {
        /* A replay (libraft replays the whole log when it has no snapshot) of an entry from
         * before the split that set this shard's epoch: RocksDB already holds its effects
         * (the layout row came with that split's write, after it), so only its request id
         * is recorded again, as its first apply did. Its own epoch decided it then. */
        s->applied = index;
        dedup_applied(s->ss, h.request_id, (struct mg_str){NULL, 0});
        return 0;
    }
    struct meta__split_cmd split;
    int is_split = !stale && s->ss->cl != NULL && meta__split_entry(buf, len, &split);
    if (stale || is_split)
        return apply_special(s, index, is_split ? &split : NULL, result);
    struct eng_batch *b = eng_batch_create();
    size_t pos = 0;
    struct meta_ws_record r;
    struct mg_str outcome = {NULL, 0};
    while (meta__ws_next(buf, len, &pos, &r) == 1) {
        if (r.type == META_WS_RESULT)
            outcome = r.value;
        else if (r.type == META_WS_PUT)
            eng_batch_put(b, ENG_CF_META, r.key.base, r.key.len, r.value.base, r.value.len);
        else if (r.type == META_WS_DEL)
            eng_batch_delete(b, ENG_CF_META, r.key.base, r.key.len);
        else if (r.type == META_WS_DELRANGE)
            eng_batch_delete_range(b, ENG_CF_META, r.key.base, r.key.len, r.value.base,
                                   r.value.len);
        else if (r.type == META_WS_RETIRE) /* persisted with the rows that stop naming it */
            meta__orphan_intent_put(b, &r.ref);
    }
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_applied(&k, s->id);
    meta__put_u64(&v, index);
    eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
    rv = eng_batch_commit(ms->db, b, 0);
    eng_batch_destroy(b);
    mg_buf_close(&k);
    mg_buf_close(&v);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=apply_failed shard=%u index=%llu err=%s", s->id,
               (unsigned long long)index, mg_err_name(rv));
        return rv;
    }
    s->applied = index;
    atomic_fetch_add(&s->ss->applied_entries, 1);
    dedup_applied(s->ss, h.request_id, outcome);
    side_effects(s->ss, buf, len);
    if (s->ss->cl != NULL) /* after the side effects: a released read sees the caches too */
        meta__fence_applied(s);
    *result = NULL;
    return 0;
}

static uint64_t on_durable_index(void *data)
{
    struct meta__shard *s = data;
    return s->durable;
}

static int on_restore(void *data, const struct mraft_snapshot_desc *desc, uint64_t *applied)
{
    struct meta__shard *s = data;
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_applied(&k, s->id);
    int rv = eng_get(s->ss->ms->db, ENG_CF_META, k.base, k.len, &v);
    uint64_t idx = 0;
    if (rv == 0 && v.len == 8)
        idx = meta__get_u64(v.base);
    else if (rv != 0 && rv != MG_ENOTFOUND)
        idx = 0;
    mg_buf_close(&k);
    mg_buf_close(&v);
    if (rv != 0 && rv != MG_ENOTFOUND)
        return rv;
    s->applied = idx;
    if (!s->restored) /* at start RocksDB holds only what was flushed: all of it durable */
        s->durable = idx;
    s->restored = 1;
    *applied = idx;
    mg_log(MG_LOG_INFO, "event=shard_restore shard=%u applied=%llu snapshot=%llu", s->id,
           (unsigned long long)idx, (unsigned long long)(desc != NULL ? desc->index : 0));
    return 0;
}

/* A follower behind its leader's truncated log: copy the shard's range from the leader
 * (install.c, META_RPC_CHECKPOINT); MG_EBUSY until the copy is in, retried by the host every
 * 500 ms while entries committed meanwhile wait. A single node never gets here. */
static int on_install(void *data, const struct mraft_snapshot_desc *desc, uint64_t *applied)
{
    struct meta__shard *s = data;
    if (mg_env_u64("MG_FAULT_NO_CHECKPOINT", 0)) {
        /* Fault switch (test_cluster_join shows it fails): no transfer, as before install.c:
         * the shard waits and is not served by this node. */
        if (s->install_waits++ == 0)
            mg_log(MG_LOG_ERROR, "event=install_needed shard=%u snapshot=%llu applied=%llu "
                   "action=wait (MG_FAULT_NO_CHECKPOINT)", s->id,
                   (unsigned long long)desc->index, (unsigned long long)s->applied);
        return MG_EBUSY;
    }
    return meta__install_step(s, desc, applied);
}

const struct mraft_owner meta__shard_owner = {
    .apply = on_apply,
    .durable_index = on_durable_index,
    .restore = on_restore,
    .install = on_install,
};

/* ----------------------------------------------------------------- flusher */

static void flush_work(uv_work_t *w)
{
    struct meta__shards *ss = w->data;
    ss->flush_rv = eng_db_flush(ss->ms->db);
}

static void flush_after(uv_work_t *w, int status)
{
    struct meta__shards *ss = w->data;
    ss->flushing = 0;
    ss->last_flush_ms = now_ms();
    if (status != 0 || ss->flush_rv != 0) {
        mg_log(MG_LOG_ERROR, "event=flush_failed err=%s",
               ss->flush_rv != 0 ? mg_err_name(ss->flush_rv) : uv_err_name(status));
        return;
    }
    ss->flushes++;
    for (unsigned i = 0; i < ss->n; i++)
        if (ss->shards[i].flush_at > ss->shards[i].durable)
            ss->shards[i].durable = ss->shards[i].flush_at;
}

static void flush_start(struct meta__shards *ss)
{
    assert(!ss->flushing);
    for (unsigned i = 0; i < ss->n; i++)
        ss->shards[i].flush_at = ss->shards[i].applied;
    ss->flushing = 1;
    ss->flush_work.data = ss;
    int rv = uv_queue_work(&ss->rt->loop, &ss->flush_work, flush_work, flush_after);
    if (rv != 0) {
        ss->flushing = 0;
        mg_log(MG_LOG_ERROR, "event=flush_queue_failed err=%s", uv_err_name(rv));
    }
}

/* FLUSH_MAX_AGE_MS, or MG_FLUSH_MAX_AGE_MS (a test switch: test_orphans.py makes a DELETE
 * durable in RocksDB within a second, so that a restart does not replay it from the log). */
static int64_t flush_max_age_ms(void)
{
    uint64_t v = mg_env_u64("MG_FLUSH_MAX_AGE_MS", 0);
    return v > 0 && v < INT64_MAX ? (int64_t)v : FLUSH_MAX_AGE_MS;
}

/* Budget: one RocksDB flush at most per tick; its cost (one L0 SST of what arrived since
 * the last one) runs on a worker. A flush is due when FLUSH_MAX_ENTRIES entries are not
 * durable or FLUSH_MAX_AGE_MS passed with anything not durable. meta.flusher = "hold" (a test switch)
 * never flushes: everything replays from the log after kill -9. */
static void on_flush_tick(uv_timer_t *t)
{
    struct meta__shards *ss = t->data;
    if (ss->flushing || ss->ms->opts.flusher_hold)
        return;
    uint64_t lag = 0;
    for (unsigned i = 0; i < ss->n; i++)
        lag += ss->shards[i].applied - ss->shards[i].durable;
    if (lag == 0)
        return;
    if (lag >= FLUSH_MAX_ENTRIES || now_ms() - ss->last_flush_ms >= flush_max_age_ms())
        flush_start(ss);
}

/* ------------------------------------------------------------------ figures */

const uint64_t meta_latency_bounds_us[META_LATENCY_BUCKETS - 1] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000};

/* Every META_OP_STATS_PERIOD_MS on the meta thread (mraft's figures are the loop's): copy
 * what /metrics shows into the sample under its lock. O(shards). */
static void on_stats_tick(uv_timer_t *t)
{
    struct meta__shards *ss = t->data;
    struct meta__rt *rt = ss->rt;
    struct meta_op_stats st;
    memset(&st, 0, sizeof(st));
    st.submitted = atomic_load(&rt->submitted);
    st.slowdowns = atomic_load(&rt->slowdowns);
    pthread_mutex_lock(&rt->lock);
    st.queue_depth = rt->n;
    pthread_mutex_unlock(&rt->lock);
    for (struct meta__op_priv *q = ss->parked_head; q != NULL; q = q->next)
        st.parked++;
    st.overlay_rows = ss->ov.nrows;
    st.dedup_hits = ss->dedup_hits;
    st.flushes = ss->flushes;
    st.installs = ss->installs_done;
    st.nshards = 0;
    for (unsigned i = 0; i < ss->n && st.nshards < META_OP_STATS_SHARDS_MAX; i++) {
        struct meta__shard *sh = &ss->shards[i];
        if (!sh->present)
            continue; /* a hole in the ids (split.h) */
        struct meta_shard_stats *o = &st.shards[st.nshards++];
        struct mraft_group_stats g;
        memset(&g, 0, sizeof(g));
        if (sh->g != NULL && !sh->reopening)
            mraft_group_stats_get(sh->g, &g);
        o->shard_id = sh->id;
        o->leader = g.role == MRAFT_LEADER && g.ready;
        o->proposals = sh->proposals;
        o->inflight = g.inflight;
        o->queued = g.queued;
        o->commits = g.commits;
        o->refused_nospace = g.refused_nospace;
        for (unsigned b = 0; b < META_LATENCY_BUCKETS && b < MRAFT_LATENCY_BUCKETS; b++)
            o->latency_bucket[b] = g.latency_bucket[b];
        o->latency_count = g.latency_count;
        o->latency_sum_us = g.latency_sum_us;
        o->applied_index = g.applied_index;
        o->durable_index = sh->durable;
        o->last_index = g.last_index;
        o->log_bytes = g.log_bytes;
        o->leader_id = sh->g != NULL && !sh->reopening ? mraft_group_leader(sh->g, NULL) : 0;
        if (ss->cl != NULL) {
            meta__members_replicas(sh, o->voters, sizeof(o->voters), 1);
            meta__members_replicas(sh, o->standbys, sizeof(o->standbys), 0);
        }
    }
    pthread_mutex_lock(&ss->stats_lock);
    ss->sample = st;
    pthread_mutex_unlock(&ss->stats_lock);
}

void meta_op_stats_get(struct meta_store *ms, struct meta_op_stats *out)
{
    memset(out, 0, sizeof(*out));
    struct meta__rt *rt = ms->rt;
    if (rt == NULL || rt->shards == NULL)
        return;
    pthread_mutex_lock(&rt->shards->stats_lock);
    *out = rt->shards->sample;
    pthread_mutex_unlock(&rt->shards->stats_lock);
}

/* ---------------------------------------------------------------- open/close */

/* meta.raft_listen unset (tests, tools): a free port on 127.0.0.1, asked of the kernel. The
 * single voter never dials its own address, so the port only needs to be bindable now. */
static void free_address(char *out, size_t n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    unsigned port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    if (fd >= 0)
        close(fd);
    snprintf(out, n, "127.0.0.1:%u", port);
}

static int open_host(struct meta__shards *ss, char *errmsg)
{
    struct meta_store *ms = ss->ms;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/raft", ms->data_dir);
    if (mkdir(dir, 0700) == 0) {
        if (mg_fsync_dir(ms->data_dir) != 0) { /* the new raft/ entry */
            snprintf(errmsg, 256, "fsync of %.200s failed", ms->data_dir);
            return MG_EIO;
        }
    } else if (errno != EEXIST) {
        snprintf(errmsg, 256, "cannot create %.200s: %s", dir, strerror(errno));
        return MG_EIO;
    }
    if (ms->opts.raft_listen != NULL)
        snprintf(ss->address, sizeof(ss->address), "%s", ms->opts.raft_listen);
    else
        free_address(ss->address, sizeof(ss->address));
    if (ss->cl != NULL) /* the node's own raft address, as every voter set names it */
        snprintf(ss->address, sizeof(ss->address), "%s",
                 meta__cluster_node(ss->cl, ss->cl->self)->raft);
    const char *addr = ss->address;
    struct mraft_host_config hc = {
        .node_id = ss->cl != NULL ? ss->cl->self : 1,
        .address = addr,
        .data_dir = dir,
        /* MG_SNAPSHOT_THRESHOLD / MG_SNAPSHOT_TRAILING: test switches (test_cluster_join
         * truncates the log after a few hundred entries, not 12,288) */
        .snapshot_threshold = (unsigned)mg_env_u64("MG_SNAPSHOT_THRESHOLD", 4096),
        .snapshot_trailing = ss->cl != NULL ? (unsigned)mg_env_u64("MG_SNAPSHOT_TRAILING",
                                                                   CLUSTER_SNAPSHOT_TRAILING)
                                            : 0,
        .balance_interval_ms = ss->cl != NULL ? CLUSTER_BALANCE_MS : 0,
        .max_pending = 4096,
    };
    int rv = mraft_host_create(&ss->rt->loop, &hc, &ss->host);
    if (rv != 0)
        snprintf(errmsg, 256, "raft host on %s: %s (meta.raft_listen)", addr, mg_err_name(rv));
    return rv;
}

static int open_group(struct meta__shards *ss, struct meta__shard *s)
{
    struct mraft_voter voter = {.id = 1, .address = ss->address};
    struct mraft_group_config gc = {
        .group_id = s->id + 1,
        .voters = &voter,
        .n_voters = 1,
        .owner = &meta__shard_owner,
        .owner_data = s,
    };
    if (ss->cl != NULL) { /* every voter bootstraps with the same set (cluster.c) */
        gc.voters = ss->cl->voters;
        gc.n_voters = ss->cl->voter ? ss->cl->nvoters : 0;
    }
    return mraft_group_create(ss->host, &gc, &s->g);
}

/* Open the group of every shard in the layout that has none yet. At start-up a parent's
 * replay may apply a split and so add a shard with a higher id: the loop reaches it (ss->n
 * is read again), after the parent replayed through the split, as its state needs. */
static int open_groups(struct meta__shards *ss, char *errmsg)
{
    for (unsigned i = 0; i < ss->n; i++) {
        struct meta__shard *s = &ss->shards[i];
        if (!s->present || s->g != NULL || s->reopening)
            continue;
        int rv = open_group(ss, s);
        if (rv != 0) {
            snprintf(errmsg, 256, "raft group of shard %u: %s", s->id, mg_err_name(rv));
            return rv;
        }
    }
    return 0;
}

/* A split applied at run time added a shard: open its group (every replica bootstraps it
 * with the same voters). A failure is retried every second. */
static void on_open_tick(uv_timer_t *t)
{
    struct meta__shards *ss = t->data;
    if (ss->closing)
        return;
    char errmsg[256];
    if (open_groups(ss, errmsg) != 0) {
        mg_log(MG_LOG_ERROR, "event=shard_open_failed err=\"%s\" action=retry", errmsg);
        uv_timer_start(&ss->open_timer, on_open_tick, 1000, 0);
    }
}

/* A failed log append fenced the group (raft/raft.h): every proposal on it fails until it
 * is closed and reopened, which reloads the log from disk and replays what RocksDB has not
 * applied, as after a restart. Meanwhile its proposals are refused (507). A reopen that
 * fails (the disk is still full) is retried every second. */
static void on_retry_reopen(uv_timer_t *t);

static void reopen_now(struct meta__shard *s)
{
    struct meta__shards *ss = s->ss;
    int rv = ss->closing ? MG_ESHUTDOWN : open_group(ss, s);
    if (rv == 0) {
        s->reopening = 0;
        s->reopens++;
        mg_log(MG_LOG_WARN, "event=shard_reopened shard=%u applied=%llu", s->id,
               (unsigned long long)s->applied);
        return;
    }
    s->g = NULL;
    if (ss->closing)
        return;
    mg_log(MG_LOG_ERROR, "event=shard_reopen_failed shard=%u err=%s", s->id, mg_err_name(rv));
    if (s->retry_timer.loop == NULL) {
        uv_timer_init(&ss->rt->loop, &s->retry_timer);
        s->retry_timer.data = s;
    }
    uv_timer_start(&s->retry_timer, on_retry_reopen, 1000, 0);
}

static void on_retry_reopen(uv_timer_t *t)
{
    reopen_now(t->data);
}

static void on_fenced_closed(struct mraft_group *g, void *data)
{
    (void)g;
    struct meta__shard *s = data;
    s->g = NULL;
    reopen_now(s);
}

/* Destroy the fenced group from a timer: the failure reaches us inside the host's own
 * fence handling (which goes on to close the libraft instance), never destroy under it. */
static void on_destroy_fenced(uv_timer_t *t)
{
    struct meta__shard *s = t->data;
    if (s->ss->closing || s->g == NULL)
        return;
    mraft_group_destroy(s->g, false, on_fenced_closed, s);
}

static void maybe_reopen(struct meta__shard *s)
{
    if (s->reopening || s->g == NULL)
        return;
    struct mraft_group_stats st;
    mraft_group_stats_get(s->g, &st);
    if (st.fence_err == 0)
        return;
    s->reopening = 1;
    mg_log(MG_LOG_ERROR, "event=shard_fenced shard=%u err=%s action=reopen", s->id,
           mg_err_name(st.fence_err));
    if (s->retry_timer.loop == NULL) {
        uv_timer_init(&s->ss->rt->loop, &s->retry_timer);
        s->retry_timer.data = s;
    }
    uv_timer_start(&s->retry_timer, on_destroy_fenced, 50, 0);
}

/* The number of data shards is fixed when the store is created (meta.initial_shards) and
 * kept in the node-local rows; a later different setting is ignored with a log line. */
static unsigned data_shard_count(struct meta_store *ms)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_sys_shards(&k);
    unsigned want = ms->opts.initial_shards == 0 ? 1 : ms->opts.initial_shards;
    if (want > META_SHARDS_MAX - 1)
        want = META_SHARDS_MAX - 1;
    unsigned n = want;
    if (eng_get(ms->db, ENG_CF_META, k.base, k.len, &v) == 0 && v.len == 4) {
        n = meta__get_u32(v.base);
        if (n == 0 || n > META_SHARDS_MAX - 1)
            n = 1;
        if (n != want)
            mg_log(MG_LOG_WARN, "event=initial_shards_ignored configured=%u stored=%u", want, n);
    } else {
        struct eng_batch *b = eng_batch_create();
        v.len = 0;
        meta__put_u32(&v, n);
        eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
        if (eng_batch_commit(ms->db, b, 0) == 0)
            eng_db_flush(ms->db);
        eng_batch_destroy(b);
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
    return n;
}

/* The layout at open: the layout row a split wrote (with its parent's applied index, so it
 * matches what RocksDB holds; the log replays later splits), else the initial equal ranges.
 * Returns 0 or MG_ECORRUPT (an unreadable layout row). */
static int load_layout(struct meta__shards *ss, char *errmsg)
{
    struct meta__layout *l = mg_malloc(sizeof(*l));
    uint32_t initial = data_shard_count(ss->ms);
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_sys_layout(&k);
    int rv = 0, have = eng_get(ss->ms->db, ENG_CF_META, k.base, k.len, &v) == 0;
    if (have && (meta__layout_decode(v.base, v.len, l) != 0 || l->initial != initial)) {
        snprintf(errmsg, 256, "the shard layout row is unreadable (%zu bytes)", v.len);
        rv = MG_ECORRUPT;
    } else if (!have) {
        meta__layout_initial(l, initial);
    }
    if (rv == 0)
        layout_install(ss, l);
    mg_buf_close(&k);
    mg_buf_close(&v);
    mg_free(l);
    return rv;
}

int meta__shards_open(struct meta__rt *rt, char *errmsg)
{
    struct meta__shards *ss = mg_calloc(1, sizeof(*ss));
    ss->rt = rt;
    ss->ms = rt->ms;
    meta__ov_init(&ss->ov);
    ss->dedup = mg_calloc(META_DEDUP_SLOTS, sizeof(*ss->dedup));
    pthread_mutex_init(&ss->stats_lock, NULL);
    ss->pub = mg_calloc(1, sizeof(*ss->pub));
    rt->shards = ss;
    int rv = load_layout(ss, errmsg);
    if (rv == 0 && rt->ms->opts.cluster != NULL)
        rv = meta__cluster_create(rt->ms->opts.cluster, &ss->cl, errmsg);
    if (rv == 0 && ss->cl != NULL)
        meta__router_init(ss); /* before the groups open: their replay releases fences */
    if (rv == 0)
        rv = open_host(ss, errmsg);
    if (rv == 0)
        rv = open_groups(ss, errmsg);
    if (rv == 0 && ss->cl != NULL)
        rv = meta__cluster_start(ss, errmsg);
    if (rv != 0)
        return rv;
    uv_timer_init(&rt->loop, &ss->open_timer); /* from here a split opens its child's group */
    ss->open_timer.data = ss;
    uv_timer_init(&rt->loop, &ss->flush_timer);
    ss->flush_timer.data = ss;
    uv_timer_start(&ss->flush_timer, on_flush_tick, FLUSH_TICK_MS, FLUSH_TICK_MS);
    if (ss->cl != NULL) {
        uv_timer_init(&rt->loop, &ss->retire_timer);
        ss->retire_timer.data = ss;
        uv_timer_start(&ss->retire_timer, on_retire_tick, CLUSTER_RETIRE_TICK_MS,
                       CLUSTER_RETIRE_TICK_MS);
    }
    uv_timer_init(&rt->loop, &ss->stats_timer);
    ss->stats_timer.data = ss;
    uv_timer_start(&ss->stats_timer, on_stats_tick, 0, META_OP_STATS_PERIOD_MS);
    ss->last_flush_ms = now_ms();
    mg_log(MG_LOG_INFO, "event=shards_open shards=%u raft=%s rocksdb_wal=off flusher=%s", ss->n,
           ss->address, rt->ms->opts.flusher_hold ? "hold" : "on");
    return 0;
}

static void (*closed_cb)(struct meta__rt *rt);

static void on_host_closed(struct mraft_host *h, void *data)
{
    (void)h;
    struct meta__shards *ss = data;
    struct meta__rt *rt = ss->rt;
    meta__ov_close(&ss->ov);
    meta__install_close(ss);
    meta__cluster_destroy(ss->cl);
    for (size_t i = 0; i < META_DEDUP_SLOTS; i++)
        mg_free(ss->dedup[i].result);
    mg_free(ss->dedup);
    mg_free(ss->pub);
    pthread_mutex_destroy(&ss->stats_lock);
    mg_free(ss);
    rt->shards = NULL;
    if (closed_cb != NULL)
        closed_cb(rt);
}

static void close_host(struct meta__shards *ss)
{
    if (ss->host != NULL)
        mraft_host_destroy(ss->host, on_host_closed, ss);
    else
        on_host_closed(NULL, ss);
}

static void on_remote_closed(struct meta__rt *rt)
{
    close_host(rt->shards);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct meta__shards *ss = h->data;
    if (ss->cl != NULL) /* peers and the RPC server first: their ops fail, then the groups */
        meta__remote_close(ss->rt, on_remote_closed);
    else
        close_host(ss);
}

void meta__shards_close(struct meta__shards *ss, void (*on_closed)(struct meta__rt *rt))
{
    closed_cb = on_closed;
    ss->closing = 1;
    /* Graceful: everything applied becomes durable, so the next start replays nothing. */
    if (!ss->ms->opts.flusher_hold && eng_db_flush(ss->ms->db) == 0)
        for (unsigned i = 0; i < ss->n; i++)
            ss->shards[i].durable = ss->shards[i].applied;
    if (ss->cl != NULL)
        meta__cluster_stop(ss);
    retire_due(ss, 1); /* a graceful stop retires what it held back */
    if (ss->retire_timer.loop != NULL)
        uv_close((uv_handle_t *)&ss->retire_timer, NULL);
    if (ss->stats_timer.loop != NULL)
        uv_close((uv_handle_t *)&ss->stats_timer, NULL);
    if (ss->open_timer.loop != NULL)
        uv_close((uv_handle_t *)&ss->open_timer, NULL);
    for (unsigned i = 0; i < ss->n; i++)
        if (ss->shards[i].retry_timer.loop != NULL)
            uv_close((uv_handle_t *)&ss->shards[i].retry_timer, NULL);
    if (ss->flush_timer.loop != NULL)
        uv_close((uv_handle_t *)&ss->flush_timer, on_timer_closed);
    else
        close_host(ss); /* open failed before the timer existed */
}

/* ---------------------------------------------------------------- proposals */

/* One entry in flight. */
struct pending {
    struct mraft_propose req;
    struct meta__shards *ss;
    struct meta__shard *s;
    uint64_t seq;
    struct mg_buf entry;
    struct meta_op *op;       /* completed when the last entry of the chain commits */
    struct pending *next;     /* the op's next entry (proposed after this one commits) */
    int remote;               /* cluster: proposed through its shard's leader (router.c) */
};

static void pending_free(struct pending *p)
{
    mg_buf_close(&p->entry);
    mg_free(p);
}

static void chain_free(struct pending *p)
{
    while (p != NULL) {
        struct pending *next = p->next;
        pending_free(p);
        p = next;
    }
}

static int submit(struct pending *p);

/* The op's final outcome (appended: something of it reached the log, or it needed none). In
 * a cluster an outcome left unknown by a lost leadership is MG_ETIMEOUT and its request id
 * is forgotten: the router retries it on the next ready leader, whose dedup table knows the
 * id if (and only if) the entry committed (router.c). */
static void op_done(struct meta__shards *ss, struct meta_op *op, int status, int appended)
{
    if (ss->cl != NULL && status != 0 && appended) {
        status = MG_ETIMEOUT;
        appended = 0;
    }
    meta__dedup_finish(ss, op, status, appended);
    meta__op_complete(op, status);
}

/* Run parked ops in order while they can run: ops that need quiescence only when nothing
 * is in flight, the others at once (they were parked only to keep their order). */
static void run_parked(struct meta__shards *ss)
{
    while (ss->parked_head != NULL) {
        struct meta__op_priv *q = ss->parked_head;
        if (!meta__op_exec_parked_ready(ss->rt, q->op))
            return;
        ss->parked_head = q->next;
        if (ss->parked_head == NULL)
            ss->parked_tail = NULL;
        q->next = NULL;
        meta__op_exec_now(ss->rt, q->op);
    }
}

static int map_raft_err(struct meta__shards *ss, int rv)
{
    switch (rv) {
    case MG_ENOTLEADER: /* a cluster's router retries it on the leader (router.c) */
        return ss->cl != NULL ? MG_ENOTLEADER : MG_ESLOWDOWN;
    case MG_EBUSY:
        return MG_ESLOWDOWN;
    case MG_ENOSPC:
    case MG_ESHUTDOWN:
        return rv;
    default:
        return MG_EIO;
    }
}

static void proposal_done(struct pending *p, int status);

/* A proposal whose entry was refused at apply for its range epoch (meta__entry_stale). */
#define STATUS_STALE (-1)

static void on_proposed(struct mraft_propose *req, int status, uint64_t index, uint64_t hint,
                        void *result)
{
    (void)index, (void)hint;
    proposal_done(req->data, status == 0 && result == &meta__entry_stale ? STATUS_STALE : status);
}

/* An entry proposed through another node (its rows never entered our overlay). */
static void on_remote_proposed(void *data, int status)
{
    proposal_done(data, status);
}

static void proposal_done(struct pending *p, int status)
{
    struct meta__shards *ss = p->ss;
    assert(ss->inflight > 0);
    ss->inflight--;
    if (p->remote) {
        if (status != 0)
            mg_log(MG_LOG_WARN, "event=remote_entry_failed shard=%u err=%s", p->s->id,
                   mg_err_name(status));
    } else if (status == 0 || status == STATUS_STALE) { /* applied, or refused everywhere */
        size_t pos = 0;
        struct meta_ws_record r;
        while (meta__ws_next(p->entry.base, p->entry.len, &pos, &r) == 1)
            meta__ov_applied(&ss->ov, &r, p->seq);
    } else {
        /* Appended but the outcome is unknown (DESIGN.md 6): the entry may still apply
         * (after a restart, from the log), so nothing is freed; the overlay is rebuilt
         * from committed state. */
        mg_log(MG_LOG_ERROR, "event=proposal_failed shard=%u err=%s", p->s->id,
               mg_err_name(status));
        meta__ov_clear(&ss->ov);
        meta__orphan_unknown_outcome(ss->ms);
        if (status == MG_EIO || status == MG_ENOSPC)
            maybe_reopen(p->s);
    }
    struct pending *next = p->next;
    struct meta_op *op = p->op;
    p->next = NULL;
    pending_free(p);
    if (status == STATUS_STALE) {
        /* Nothing of this entry applied anywhere (a split moved its range): the router
         * retries the op on its new home shard, as if it had been refused before append. An
         * earlier entry of the chain is a data shard's too (data shards come first), so
         * nothing of the op applied. */
        chain_free(next);
        if (op != NULL)
            op_done(ss, op, MG_ENOTLEADER, 0);
        run_parked(ss);
        return;
    }
    if (status == 0 && next != NULL) {
        int rv = submit(next);
        if (rv != 0) {
            chain_free(next);
            op_done(ss, op, map_raft_err(ss, rv), 1); /* the first entry is in the log */
        }
    } else {
        chain_free(next);
        if (op != NULL)
            op_done(ss, op, status == 0 ? 0 : map_raft_err(ss, status), 1);
    }
    run_parked(ss);
}

static int submit(struct pending *p)
{
    struct meta__shards *ss = p->ss;
    if (ss->closing)
        return MG_ESHUTDOWN;
    if (p->s->reopening || p->s->g == NULL)
        return MG_ENOSPC; /* fenced, being reopened: the client retries (507) */
    if (ss->cl != NULL && !mraft_group_ready(p->s->g) && p->op != NULL &&
        meta__router_home(ss, p->op) != p->s) {
        /* A cluster's cross-shard op (bucket create/delete) runs on its home shard's leader;
         * the entry of its other shard goes to that shard's leader (router.c). */
        int rv = meta__router_propose_remote(ss, p->s, p->entry.base, p->entry.len,
                                             on_remote_proposed, p);
        if (rv != 0)
            return rv;
        p->remote = 1;
        ss->inflight++;
        p->s->proposals++;
        return 0;
    }
    p->req.data = p;
    /* Deletes free space: they may use the raft host's reserve, so a full disk can still
     * be emptied (S3 clients answer 507 by deleting). */
    enum meta_op_type t = p->op != NULL ? p->op->type : META_OP__COUNT;
    int frees = t == META_OP_OBJECT_DELETE || t == META_OP_OBJECT_DELETE_MANY ||
                t == META_OP_MPU_ABORT || t == META_OP_BUCKET_DELETE;
    int rv = frees ? mraft_group_propose_reserve(p->s->g, &p->req, p->entry.base, p->entry.len,
                                                 on_proposed, NULL)
                   : mraft_group_propose(p->s->g, &p->req, p->entry.base, p->entry.len,
                                         on_proposed, NULL);
    if (rv != 0)
        return rv;
    ss->inflight++;
    p->s->proposals++;
    size_t pos = 0;
    struct meta_ws_record r;
    while (meta__ws_next(p->entry.base, p->entry.len, &pos, &r) == 1)
        meta__ov_add(&ss->ov, &r, p->seq);
    return 0;
}

static struct pending *make_pending(struct meta__shards *ss, struct meta_op *op, unsigned shard,
                                    const struct meta_ws *ws, int last)
{
    struct pending *p = mg_calloc(1, sizeof(*p));
    p->ss = ss;
    p->s = &ss->shards[shard];
    p->seq = ++ss->seq;
    p->op = op;
    mg_buf_init(&p->entry);
    struct meta_ws_header h = {
        /* In a cluster only an op's last entry carries its request id: a replica that
         * applied an earlier entry must not answer a retry "done" (router.c). Their rows
         * are absolute puts and deletes, so a retry that writes them again is harmless. */
        .request_id = last || ss->cl == NULL ? op->in.request_id : 0,
        .shard_id = shard,
        .range_epoch = p->s->epoch,
        .timestamp_ms = meta__now_ms(),
    };
    if (ss->cl != NULL && h.request_id != 0) { /* every replica's dedup table answers with it */
        struct mg_buf res;
        mg_buf_init(&res);
        dedup_result_encode(op, &res);
        meta__ws_encode_result(ws, &h, res.base, res.len, &p->entry);
        mg_buf_close(&res);
    } else {
        meta__ws_encode(ws, &h, &p->entry);
    }
    return p;
}

/* The one shard every row of ws routes to, or -1 if they span several (retires ride along
 * wherever the rows go; a write set of retires only goes to shard 0). */
static int single_shard(struct meta__shards *ss, const struct meta_ws *ws)
{
    int shard = -1;
    size_t pos = 0;
    struct meta_ws_record r;
    while (meta__ws_next_builder(ws, &pos, &r) == 1) {
        if (r.type == META_WS_RETIRE)
            continue;
        struct meta__shard *s = meta__shard_of_key(ss, r.key.base, r.key.len);
        assert(s != NULL);
        if (shard >= 0 && (unsigned)shard != s->id)
            return -1;
        shard = (int)s->id;
    }
    return shard < 0 ? 0 : shard;
}

/* Split ws by shard: entry i of the chain holds the rows of one shard; retires ride with
 * the first data shard's entry (else shard 0's). Data shards come first: a bucket's own
 * rows (its attribute row) are written before the bucket table names it and removed
 * before the name goes, so a crash between the two leaves at worst an unnamed attribute
 * row, never a name without its bucket. Almost every op touches one shard: its write set is
 * encoded as it is, without the per-shard copies. */
static struct pending *split(struct meta__shards *ss, struct meta_op *op, struct meta_ws *ws)
{
    if (ws->n == 0)
        return NULL;
    int one = single_shard(ss, ws);
    if (one >= 0)
        return make_pending(ss, op, (unsigned)one, ws, 1);
    struct meta_ws *per[META_SHARDS_MAX] = {0};
    size_t pos = 0;
    struct meta_ws_record r;
    struct meta__shard *first_data = NULL;
    while (meta__ws_next_builder(ws, &pos, &r) == 1) {
        if (r.type == META_WS_RETIRE)
            continue;
        struct meta__shard *s = meta__shard_of_key(ss, r.key.base, r.key.len);
        if (s->id != 0 && first_data == NULL)
            first_data = s;
        if (per[s->id] == NULL)
            per[s->id] = meta__ws_create();
        meta__ws_add(per[s->id], &r);
    }
    struct meta__shard *rs = first_data != NULL ? first_data : &ss->shards[0];
    pos = 0;
    while (meta__ws_next_builder(ws, &pos, &r) == 1)
        if (r.type == META_WS_RETIRE)
            meta__ws_add(per[rs->id], &r);
    struct pending *head = NULL, **tail = &head;
    unsigned last = 0; /* the chain's last shard: 0 if touched, else the highest data shard */
    for (unsigned k = 0; k < ss->n; k++) {
        unsigned i = k + 1 < ss->n ? k + 1 : 0;
        if (per[i] != NULL)
            last = i;
    }
    for (unsigned k = 0; k < ss->n; k++) {
        unsigned i = k + 1 < ss->n ? k + 1 : 0; /* data shards, then shard 0 */
        if (per[i] == NULL)
            continue;
        *tail = make_pending(ss, op, i, per[i], i == last);
        meta__ws_destroy(per[i]);
        tail = &(*tail)->next;
    }
    return head;
}

int meta__shards_propose(struct meta__shards *ss, struct meta_op *op, struct meta_ws *ws)
{
    struct pending *chain = split(ss, op, ws);
    meta__ws_destroy(ws);
    if (chain == NULL) {
        op_done(ss, op, 0, 1); /* nothing to write (e.g. deleting a missing key): done */
        return 0;
    }
    int rv = submit(chain);
    if (rv != 0) {
        chain_free(chain);
        return map_raft_err(ss, rv);
    }
    return 0;
}

/* Park op until no entry is in flight (ops that scan ranges read committed state only). */
void meta__shards_park(struct meta__shards *ss, struct meta_op *op)
{
    meta__fifo_push(&ss->parked_head, &ss->parked_tail, op->priv);
}
