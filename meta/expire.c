/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lifecycle enforcement inside meta (issue 8; docs/ops.md "Lifecycle"): the
 * due-time index and the two lifecycle ops. When an op writes an object (put,
 * copy's put, multipart complete) or changes its tags, meta__lc_due evaluates
 * the bucket's compiled rules (lifecycle/lifecycle.h) and the due row
 * 0x03·id·'D'·due·key rides in the same write set; the entry keeps due-ms and
 * the rules generation (entry.c T_LC_DUE/T_LC_GEN), so an overwrite, delete
 * or tag change removes the old row without recomputing. Objects no rule
 * matches cost one cache probe: no row, no TLV.
 *
 * expire-batch (META_OP_EXPIRE_BATCH) takes due rows the scheduler read and
 * re-checks each under the meta thread's serialization: the entry must still
 * have the mtime that was indexed and the current rules must still expire it
 * at or before now (the entries are read with one iterator over the batch's
 * span when no pending write falls in it). A run of consecutive expiring
 * entries in the bucket's 'M' range becomes ONE range tombstone, guarded:
 * every committed row in the run must be an expiring entry of this batch and
 * no pending write (the overlay) may fall in it; a PUT that executes after
 * the op applies after the tombstone (one thread, one log). Otherwise: point
 * deletes. Their due rows (due · key) are contiguous too for timestamp-prefixed
 * keys, and go the same way, guarded alike.
 * re-index (META_OP_LC_REINDEX) walks the bucket's entries after a rules
 * change, writing due rows only (the entry is not rewritten, so it does not
 * record them: such a row may outlive its entry's write or delete, and is
 * dropped when due); expire-batch only ever expires when both the row (old
 * rules until re-indexed) and the current entry under the current rules say
 * so: never early, never an overwritten or re-tagged key.
 * Both ops keep their progress in the bucket's 0x03·id·'L' row.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "meta"
#include "lifecycle/lifecycle.h"
#include "meta/expire.h"

/* -------------------------------------------------------- the rules cache
 *
 * Loaded configurations per bucket, on the meta thread only (thread-local: every op body runs
 * there, so no lock). Direct-mapped by bucket id, LC_CACHE_SLOTS slots (bounded memory: one
 * configuration of at most 1,000 rules per slot). Coherence: rules change only through the
 * bucket-update body, which runs on this thread and drops the slot (meta__lc_rules_changed);
 * the next op reloads through meta__get, so it sees the pending record too. A slot also
 * caches "no rules", so buckets without lifecycle pay one probe per write.
 * Cost measured by test_expire's lc_put_cost (1 KiB inline puts, ns/op printed). */

#define LC_CACHE_SLOTS 64

struct lc_slot {
    int valid;
    uint64_t bucket_id;
    uint64_t gen;         /* the bucket record's lc_gen */
    int has_rules;
    struct mg_arena a;    /* cfg's strings and arrays */
    struct lc_config cfg;
};

struct lc_cache {
    struct lc_slot slots[LC_CACHE_SLOTS];
};

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
    struct lc_cache *c = p;
    for (size_t i = 0; i < LC_CACHE_SLOTS; i++)
        if (c->slots[i].valid)
            mg_arena_close(&c->slots[i].a);
    mg_free(c);
}

static void cache_key_init(void)
{
    int rv = pthread_key_create(&cache_key, cache_free);
    assert(rv == 0);
    (void)rv;
}

static struct lc_cache *cache_get(void)
{
    pthread_once(&cache_once, cache_key_init);
    struct lc_cache *c = pthread_getspecific(cache_key);
    if (c == NULL) {
        c = mg_calloc(1, sizeof(*c));
        pthread_setspecific(cache_key, c);
    }
    return c;
}

static void slot_drop(struct lc_slot *s)
{
    if (s->valid)
        mg_arena_close(&s->a);
    memset(s, 0, sizeof(*s));
}

void meta__lc_rules_changed(uint64_t bucket_id)
{
    assert(meta__exec_active());
    struct lc_slot *s = &cache_get()->slots[bucket_id % LC_CACHE_SLOTS];
    if (s->valid && s->bucket_id == bucket_id)
        slot_drop(s);
}

/* The bucket's rules (NULL: none) and generation, from the cache or loaded into it. */
static int rules_get(struct meta_store *ms, uint64_t bucket_id, struct mg_str bucket,
                     const struct lc_config **cfg, uint64_t *gen)
{
    assert(meta__exec_active());
    struct lc_slot *s = &cache_get()->slots[bucket_id % LC_CACHE_SLOTS];
    if (!(s->valid && s->bucket_id == bucket_id)) {
        struct mg_arena a;
        struct meta_bucket b;
        mg_arena_init(&a);
        int rv = meta_bucket_get(ms, bucket, &a, &b);
        if (rv != 0 || b.id != bucket_id) {
            mg_arena_close(&a);
            *cfg = NULL;
            *gen = 0;
            return rv == MG_ENOSUCHBUCKET || rv == 0 ? 0 : rv;
        }
        slot_drop(s);
        s->valid = 1;
        s->bucket_id = bucket_id;
        s->gen = b.lc_gen;
        mg_arena_init(&s->a);
        if (b.lifecycle_bin.len > 0) {
            rv = lc_config_load(b.lifecycle_bin.base, b.lifecycle_bin.len, &s->a, &s->cfg);
            s->has_rules = rv == 0;
            if (rv != 0)
                mg_log(MG_LOG_ERROR, "event=lifecycle_rules_corrupt bucket_id=%llu gen=%llu",
                       (unsigned long long)bucket_id, (unsigned long long)b.lc_gen);
        }
        mg_arena_close(&a);
    }
    *cfg = s->has_rules ? &s->cfg : NULL;
    *gen = s->gen;
    return 0;
}

static uint32_t day_seconds(const struct meta_store *ms)
{
    return ms->opts.lc_day_seconds != 0 ? ms->opts.lc_day_seconds : LC_DAY_SECONDS;
}

/* The due time the rules give o (0: none). */
static int64_t due_of(const struct meta_store *ms, const struct lc_config *cfg,
                      const struct meta_object *o)
{
    struct lc_tag stack_tags[16];
    struct lc_tag *tags = o->ntags <= 16 ? stack_tags : mg_malloc(o->ntags * sizeof(*tags));
    for (size_t i = 0; i < o->ntags; i++)
        tags[i] = (struct lc_tag){.key = o->tags[i].k, .value = o->tags[i].v};
    struct lc_object lo = {.key = o->key, .size = o->size, .tags = tags, .ntags = o->ntags,
                           .mtime_ms = o->mtime_ms};
    int64_t due = 0;
    const struct lc_rule *rule;
    if (!lc_config_expiry(cfg, &lo, day_seconds(ms), &due, &rule))
        due = 0;
    if (tags != stack_tags)
        mg_free(tags);
    return due > 0 ? due : (due == 0 ? 0 : 1); /* a date before 1970 is due at once */
}

int meta__lc_due(struct meta_store *ms, uint64_t bucket_id, struct mg_str bucket,
                 struct meta_object *o)
{
    const struct lc_config *cfg;
    uint64_t gen;
    o->lc_due_ms = 0;
    o->lc_gen = 0;
    int rv = rules_get(ms, bucket_id, bucket, &cfg, &gen);
    if (rv != 0 || cfg == NULL)
        return rv;
    o->lc_due_ms = due_of(ms, cfg, o);
    o->lc_gen = o->lc_due_ms != 0 ? gen : 0;
    return 0;
}

/* The due row of key at due_ms: deleted (o NULL) or put with its value, the mtime of the entry
 * it indexes (8 bytes big-endian), so the scheduler reads it from the row (no entry read) and
 * expire-batch tells a row of an older write of the key from the entry's own. Rows written
 * before the value existed are "" (the scan then reads the entry's mtime). */
static void due_row(struct meta_ws *b, uint64_t bucket_id, int64_t due_ms, struct mg_str key,
                    const struct meta_object *o)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_due(&k, bucket_id, due_ms, key);
    if (o != NULL) {
        meta__put_u64(&v, (uint64_t)o->mtime_ms);
        meta__ws_put(b, k.base, k.len, v.base, v.len);
    } else {
        meta__ws_delete(b, k.base, k.len);
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
}

/* ------------------------------------------------------- tracker ranges
 *
 * The delete tracker's classifier for meta's keys (engine/tracker.c, "Ranges"). Due rows
 * (0x03·id·'D'·due-ms·key) and time index rows (0x03·id·'T'·mtime-ms·key) of objects that
 * expire together share the top 5 bytes of their time: one range per 2^24 ms (~4.7 hours), so
 * expiry's deletes there (a few range tombstones a batch, or a point delete a row) add up to a
 * trigger and get compacted like the entries'. With the default length every millisecond was its
 * own range: none triggered, the table filled, and those tombstones were left to RocksDB. Every
 * other key keeps the default (an entry's 18-byte prefix and the first 4 bytes of its name). */
#define LC_TRK_TIME_LEN (META_TABLE_KEY_LEN + 5)
#define LC_TRK_DEFAULT_LEN (META_OBJ_PREFIX_LEN + 4)

size_t meta__lc_tracker_range_len(enum eng_cf cf, const void *key, size_t len, void *arg)
{
    const uint8_t *k = key;
    (void)arg;
    if (cf == ENG_CF_META && len > LC_TRK_TIME_LEN && k[0] == META_K_DATA &&
        (k[META_TABLE_KEY_LEN - 1] == META_TBL_DUE || k[META_TABLE_KEY_LEN - 1] == META_TBL_TIME))
        return LC_TRK_TIME_LEN;
    return LC_TRK_DEFAULT_LEN;
}

/* ------------------------------------------------------------------ stats
 *
 * Counters per open store. struct meta_store has no slot for them (internal.h is not this
 * file's), so a small table keyed by the store pointer holds them; a store reopened at the
 * same address continues the old counts (TODO(#8): a field in struct meta_store). */

#define LC_STATS_SLOTS 16

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const struct meta_store *ms;
    struct meta_lifecycle_stats s;
} stats_tab[LC_STATS_SLOTS];
static unsigned stats_next;

/* Under stats_mu. */
static struct meta_lifecycle_stats *stats_of(const struct meta_store *ms)
{
    for (size_t i = 0; i < LC_STATS_SLOTS; i++)
        if (stats_tab[i].ms == ms)
            return &stats_tab[i].s;
    unsigned i = stats_next++ % LC_STATS_SLOTS;
    memset(&stats_tab[i], 0, sizeof(stats_tab[i]));
    stats_tab[i].ms = ms;
    return &stats_tab[i].s;
}

static void stats_add(const struct meta_store *ms, const struct meta_expire_result *r)
{
    pthread_mutex_lock(&stats_mu);
    struct meta_lifecycle_stats *s = stats_of(ms);
    s->expired += r->expired;
    s->range_deletes += r->range_deletes;
    s->point_deletes += r->point_deletes;
    s->stale += r->stale + r->rescheduled;
    s->reindexed += r->reindexed;
    pthread_mutex_unlock(&stats_mu);
}

void meta_lifecycle_stats_get(struct meta_store *ms, struct meta_lifecycle_stats *out)
{
    pthread_mutex_lock(&stats_mu);
    *out = *stats_of(ms);
    pthread_mutex_unlock(&stats_mu);
}

void meta_lifecycle_stats_backlog(struct meta_store *ms, uint64_t due_backlog,
                                  int64_t due_oldest_age_ms, uint64_t reindex_pending)
{
    pthread_mutex_lock(&stats_mu);
    struct meta_lifecycle_stats *s = stats_of(ms);
    s->due_backlog = due_backlog;
    s->due_oldest_age_ms = due_oldest_age_ms;
    s->reindex_pending = reindex_pending;
    pthread_mutex_unlock(&stats_mu);
}

/* ----------------------------------------------------------- progress row
 *
 * 0x03·id·'L' = version u8 (1) · sched-due u64 · sched-epoch u64 · sched-key-len u32 ·
 * sched-key · reindex-gen u64 · reindex-done u8 · reindex-key-len u32 · reindex-key. Written only by the two ops
 * below (read-modify-write through the overlay on the meta thread). */

#define LC_PROGRESS_VERSION 1

static void progress_encode(const struct meta_lc_progress *p, struct mg_buf *v)
{
    uint8_t ver = LC_PROGRESS_VERSION, done = p->reindex_done != 0;
    mg_buf_append(v, &ver, 1);
    meta__put_u64(v, (uint64_t)p->sched_due_ms);
    meta__put_u64(v, p->sched_epoch);
    meta__put_u32(v, (uint32_t)p->sched_key.len);
    mg_buf_append(v, p->sched_key.base, p->sched_key.len);
    meta__put_u64(v, p->reindex_gen);
    mg_buf_append(v, &done, 1);
    meta__put_u32(v, (uint32_t)p->reindex_key.len);
    mg_buf_append(v, p->reindex_key.base, p->reindex_key.len);
}

static int progress_decode(const char *v, size_t len, struct mg_arena *a,
                           struct meta_lc_progress *p)
{
    memset(p, 0, sizeof(*p));
    const char *end = v + len;
    if (len < 1 + 8 + 8 + 4 || (uint8_t)v[0] != LC_PROGRESS_VERSION)
        return MG_ECORRUPT;
    p->sched_due_ms = (int64_t)meta__get_u64(v + 1);
    p->sched_epoch = meta__get_u64(v + 9);
    uint32_t n = meta__get_u32(v + 17);
    v += 21;
    if (n > META_KEY_MAX || (size_t)(end - v) < (size_t)n + 8 + 1 + 4)
        return MG_ECORRUPT;
    p->sched_key = (struct mg_str){mg_arena_dup(a, v, n), n};
    v += n;
    p->reindex_gen = meta__get_u64(v);
    p->reindex_done = v[8] != 0;
    n = meta__get_u32(v + 9);
    v += 13;
    if (n > META_KEY_MAX || (size_t)(end - v) != n || p->sched_due_ms < 0)
        return MG_ECORRUPT;
    p->reindex_key = (struct mg_str){mg_arena_dup(a, v, n), n};
    return 0;
}

static int progress_read(struct meta_store *ms, uint64_t bucket_id, struct mg_arena *a,
                         struct meta_lc_progress *p)
{
    struct mg_buf k, v;
    int found = 0;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_lc_progress(&k, bucket_id);
    int rv = meta__get(ms, ENG_CF_META, &k, &v, &found);
    memset(p, 0, sizeof(*p));
    if (rv == 0 && found)
        rv = progress_decode(v.base, v.len, a, p);
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

static void progress_write(struct meta_ws *b, uint64_t bucket_id, const struct meta_lc_progress *p)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_lc_progress(&k, bucket_id);
    progress_encode(p, &v);
    meta__ws_put(b, k.base, k.len, v.base, v.len);
    mg_buf_close(&k);
    mg_buf_close(&v);
}

int meta_lc_progress_get(struct meta_store *ms, uint64_t bucket_id, struct mg_arena *a,
                         struct meta_lc_progress *out)
{
    return progress_read(ms, bucket_id, a, out);
}

static int key_cmp(struct mg_str a, struct mg_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n > 0 ? memcmp(a.base, b.base, n) : 0;
    return c != 0 ? c : (a.len < b.len ? -1 : a.len > b.len);
}

/* A due row at (due, key) that may sit behind the scheduler's cursor (due <= now: a Date rule
 * in the past, a re-tag or re-index of an old object): move the cursor back to it and bump
 * the epoch, so a batch scanned before this write does not move the cursor past it. key is
 * borrowed: it must live as long as p is used. */
static void cursor_back(struct meta_lc_progress *p, int64_t due, struct mg_str key)
{
    if (due > p->sched_due_ms || (due == p->sched_due_ms && key_cmp(key, p->sched_key) >= 0))
        return;
    p->sched_due_ms = due;
    p->sched_key = key;
    p->sched_epoch++;
}

int meta__lc_due_rows(struct meta_store *ms, struct meta_ws *b, uint64_t bucket_id,
                      struct mg_str key, const struct meta_object *old, int had_old,
                      const struct meta_object *o, struct meta_lc_progress *p)
{
    int64_t od = had_old && old != NULL ? old->lc_due_ms : 0;
    int64_t nd = o != NULL ? o->lc_due_ms : 0;
    if (od == nd && (nd == 0 || old->mtime_ms == o->mtime_ms))
        return 0; /* same row (or none), same entry: it is already there */
    if (od != 0 && od != nd)
        due_row(b, bucket_id, od, key, NULL);
    if (nd == 0)
        return 0;
    due_row(b, bucket_id, nd, key, o);
    if (nd > meta__now_ms())
        return 0; /* ahead of every cursor: the scheduler only passes rows <= now */
    if (p != NULL) {
        cursor_back(p, nd, key);
        return 0;
    }
    struct mg_arena a;
    struct meta_lc_progress cur;
    mg_arena_init(&a);
    int rv = progress_read(ms, bucket_id, &a, &cur);
    if (rv == 0) {
        uint64_t epoch = cur.sched_epoch;
        cursor_back(&cur, nd, key);
        if (cur.sched_epoch != epoch)
            progress_write(b, bucket_id, &cur);
    }
    mg_arena_close(&a);
    return rv;
}

/* ----------------------------------------------------------- expire-batch */

/* Test hook (tests/unit/meta/test_expire.c): 1 skips the range guard, to show what it
 * prevents. Never set outside tests. */
int meta__lc_test_no_guard;

enum act { ACT_NONE, ACT_STALE, ACT_MOVE, ACT_EXPIRE };

struct exp_item {
    const struct meta_expire_item *in;
    size_t idx;               /* position in the caller's list (due-row order) */
    enum act act;
    int found;
    int left;                 /* its row stays (it indexes the current entry, not due yet) */
    struct meta_object cur;   /* the entry now (found) */
    struct mg_str okey;       /* its 'M' key (ACT_EXPIRE; in the op's arena) */
    struct exp_item *prev_row; /* the item whose committed 'M' row is right before its own */
    int no_row;               /* no due row at (in->due_ms, key): expired by the re-index walk */
};

static int cmp_exp(const void *x, const void *y)
{
    const struct exp_item *a = *(const struct exp_item *const *)x;
    const struct exp_item *b = *(const struct exp_item *const *)y;
    int c = key_cmp(a->in->key, b->in->key);
    return c != 0 ? c : (a->idx < b->idx ? -1 : a->idx > b->idx);
}

/* Rewrite the entry with a new due time (a reschedule, or no rule left). */
static void entry_rewrite(struct meta_ws *b, uint64_t bucket_id, const struct meta_object *o)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_object(&k, bucket_id, o->key);
    meta__object_encode(o, META_REC_OBJECT, &v);
    meta__ws_put(b, k.base, k.len, v.base, v.len);
    mg_buf_close(&k);
    mg_buf_close(&v);
}

/* The iterator is at row m. */
static int at_key(const struct eng_iter *it, struct mg_str m)
{
    if (!eng_iter_valid(it))
        return 0;
    size_t kl;
    const char *k = eng_iter_key(it, &kl);
    return kl == m.len && memcmp(k, m.base, kl) == 0;
}

/* Move the iterator to row k: a next when it is on the row before (keys read in order), else a
 * seek. Returns 1 when it is at k. */
static int iter_goto(struct eng_iter *it, struct mg_str k)
{
    if (at_key(it, k))
        return 1;
    if (eng_iter_valid(it)) {
        eng_iter_next(it);
        if (at_key(it, k))
            return 1;
    }
    eng_iter_seek(it, k.base, k.len);
    return at_key(it, k);
}

static struct mg_str buf_str(const struct mg_buf *b)
{
    return (struct mg_str){b->base, b->len};
}

/* expire-batch's reader of entries: one iterator over the batch's span of the 'M' range,
 * read in key order (a next per neighbour), instead of a point read per item. The committed
 * rows are the current ones when no pending write (overlay) falls in the span; otherwise
 * (it == NULL) every read goes through the overlay (meta__object_read). */
struct entry_reader {
    struct eng_iter *it;
    struct mg_buf k;
    struct exp_item *last; /* the last item found */
    int at_last;           /* the iterator is at last's row */
};

static int entry_reader_open(struct meta_store *ms, uint64_t bucket_id, struct exp_item **x,
                             size_t n, struct entry_reader *r)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    mg_buf_init(&r->k);
    r->it = NULL;
    r->last = NULL;
    r->at_last = 0;
    meta__key_object(&lo, bucket_id, x[0]->in->key);
    meta__key_object(&hi, bucket_id, x[n - 1]->in->key);
    mg_buf_append(&hi, "", 1); /* just past the last item */
    if (!meta__ov_any_in_range(&ms->rt->shards->ov, lo.base, lo.len, hi.base, hi.len))
        r->it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return 0;
}

static void entry_reader_close(struct entry_reader *r)
{
    if (r->it != NULL)
        eng_iter_destroy(r->it);
    mg_buf_close(&r->k);
}

/* As meta__object_read into e->cur / e->found, from r. With the iterator, e->prev_row is set
 * when e's row is the committed row right after the previous found item's (one next from it):
 * the entries' range guard then needs no second pass over the span. */
static int entry_read(struct meta_store *ms, struct entry_reader *r, uint64_t bucket_id,
                      struct exp_item *e, struct mg_arena *a)
{
    struct mg_str key = e->in->key;
    e->prev_row = NULL;
    if (r->it == NULL)
        return meta__object_read(ms, bucket_id, key, a, &e->cur, &e->found);
    r->k.len = 0;
    meta__key_object(&r->k, bucket_id, key);
    struct mg_str k = buf_str(&r->k);
    int adj = 0;
    if (r->at_last) {
        eng_iter_next(r->it);
        adj = e->found = at_key(r->it, k);
    } else {
        e->found = at_key(r->it, k);
    }
    if (!e->found) {
        eng_iter_seek(r->it, k.base, k.len);
        e->found = at_key(r->it, k);
    }
    r->at_last = e->found;
    if (!e->found)
        return eng_iter_status(r->it);
    e->prev_row = adj ? r->last : NULL;
    r->last = e;
    size_t vl;
    const char *v = eng_iter_value(r->it, &vl);
    int rv = meta__object_decode(v, vl, META_REC_OBJECT, a, &e->cur);
    if (rv != 0)
        mg_log(MG_LOG_ERROR, "event=corrupt_entry bucket_id=%llu key_len=%zu",
               (unsigned long long)bucket_id, key.len);
    else
        e->cur.key = (struct mg_str){mg_arena_dup(a, key.base, key.len), key.len};
    return rv;
}

/* Decide one item (the first of its key; later ones only drop their rows). */
static int decide(struct meta_store *ms, uint64_t bucket_id, const struct lc_config *cfg,
                  int64_t now, struct mg_arena *a, struct exp_item *e, struct meta_ws *b,
                  struct meta_lc_progress *p, struct entry_reader *r)
{
    const struct meta_expire_item *in = e->in;
    int rv = entry_read(ms, r, bucket_id, e, a);
    if (rv == MG_ECORRUPT) { /* leave a corrupt entry to fsck; its row goes */
        e->found = 0;
        rv = 0;
    }
    if (rv != 0)
        return rv;
    if (!e->found || e->cur.mtime_ms != in->mtime_ms) {
        /* Gone or rewritten after indexing: never expired. Its row is dropped unless the
         * current entry owns the same row (rewritten within the same due unit). */
        e->act = ACT_STALE;
        e->left = e->found && e->cur.lc_due_ms == in->due_ms;
        if (!e->left)
            due_row(b, bucket_id, in->due_ms, in->key, NULL);
        return 0;
    }
    int64_t nd = cfg != NULL ? due_of(ms, cfg, &e->cur) : 0;
    if (in->due_ms > now) { /* not due: the scheduler read ahead of the clock */
        e->act = ACT_NONE;
        e->left = 1;
        return 0;
    }
    if (nd != 0 && nd <= now) {
        e->act = ACT_EXPIRE;
        return 0;
    }
    /* No rule expires it any more (nd 0), or later (nd > now: rules changed): move or drop
     * the row; the entry records where its row now is. */
    e->act = nd == 0 ? ACT_STALE : ACT_MOVE;
    struct meta_object upd = e->cur;
    upd.lc_due_ms = nd;
    upd.lc_gen = nd != 0 ? e->cur.lc_gen : 0;
    if (in->due_ms != e->cur.lc_due_ms && in->due_ms != nd)
        due_row(b, bucket_id, in->due_ms, in->key, NULL);
    if (upd.lc_due_ms != e->cur.lc_due_ms)
        entry_rewrite(b, bucket_id, &upd);
    return meta__lc_due_rows(ms, b, bucket_id, in->key, &e->cur, 1, &upd, p);
}

/* The entry's rows that always go as point deletes: its blob index row (keyed by blob id, so
 * never next to another expiring one) and a second due row the entry recorded. Its 'M', time
 * index and due rows are the caller's (delete_keys: range or point). */
static void expire_rows(struct meta_ws *b, uint64_t bucket_id, struct exp_item *e)
{
    meta__blob_index_delete(b, bucket_id, &e->cur.data);
    if (e->cur.lc_due_ms != 0 && e->cur.lc_due_ms != e->in->due_ms)
        due_row(b, bucket_id, e->cur.lc_due_ms, e->in->key, NULL);
}

/* The range guard for k[0..m) (sorted, distinct rows of one table). contig[i] = 1 when k[i] and
 * k[i+1] are both committed rows with no committed row between them. One forward pass: a seek
 * per gap, a next per neighbour. */
static int committed_neighbours(struct meta_store *ms, struct mg_str *const *k, size_t m,
                                int *contig)
{
    struct mg_buf hi;
    mg_buf_init(&hi);
    mg_buf_append(&hi, k[m - 1]->base, k[m - 1]->len);
    mg_buf_append(&hi, "", 1); /* just past the last row */
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, k[0]->base, k[0]->len, hi.base,
                                          hi.len);
    int at = 0; /* the iterator is at k[i] already (after a next that matched) */
    for (size_t i = 0; i + 1 < m; i++) {
        contig[i] = 0;
        if (!at)
            eng_iter_seek(it, k[i]->base, k[i]->len);
        if (!at && !at_key(it, *k[i]))
            continue;
        eng_iter_next(it);
        at = contig[i] = at_key(it, *k[i + 1]);
    }
    int rv = eng_iter_status(it);
    eng_iter_destroy(it);
    mg_buf_close(&hi);
    return rv;
}

/* Delete k[i..j) (one run): a range tombstone when guarded, else point deletes. Counted in out
 * when count (the entries' run; due rows are not counted). */
static void delete_run(struct meta_store *ms, struct meta_ws *b, struct mg_str *const *k,
                       size_t i, size_t j, int count, struct mg_buf *hi,
                       struct meta_expire_result *out)
{
    const struct meta_overlay *ov = &ms->rt->shards->ov;
    hi->len = 0;
    mg_buf_append(hi, k[j - 1]->base, k[j - 1]->len);
    mg_buf_append(hi, "", 1);
    int pending = j - i >= 2 && !meta__lc_test_no_guard &&
                  meta__ov_any_in_range(ov, k[i]->base, k[i]->len, hi->base, hi->len);
    if (j - i >= 2 && !pending) {
        meta__ws_delete_range(b, k[i]->base, k[i]->len, hi->base, hi->len);
        out->range_deletes += count;
    } else {
        for (size_t x = i; x < j; x++)
            meta__ws_delete(b, k[x]->base, k[x]->len);
        out->point_deletes += count ? (uint32_t)(j - i) : 0;
    }
}

/* Delete the rows k[0..m) (sorted, distinct, one table): every run of them that is contiguous
 * among the committed rows and has no pending write in its span becomes one range tombstone
 * (lifecycle.delete = range), the rest point deletes. contig: the neighbours already known
 * (the entries', from expire-batch's reader), else NULL: looked up. */
static int delete_keys(struct meta_store *ms, struct meta_ws *b, struct mg_str *const *k,
                       size_t m, int *contig, int count, struct meta_expire_result *out)
{
    if (m == 0)
        return 0;
    int range = !ms->opts.lc_delete_point && m >= 2;
    int *own = contig == NULL ? mg_calloc(m, sizeof(*own)) : NULL;
    int rv = range && own != NULL ? committed_neighbours(ms, k, m, own) : 0;
    if (own != NULL)
        contig = own;
    struct mg_buf hi;
    mg_buf_init(&hi);
    for (size_t i = 0; rv == 0 && i < m;) {
        size_t j = i + 1;
        while (range && j < m && contig[j - 1])
            j++;
        delete_run(ms, b, k, i, j, count, &hi, out);
        i = j;
    }
    mg_buf_close(&hi);
    mg_free(own);
    return rv;
}

static int cmp_str_p(const void *x, const void *y)
{
    return key_cmp(**(struct mg_str *const *)x, **(struct mg_str *const *)y);
}

/* The key built in scratch, copied into a (keys of a batch: no allocation of their own). */
static struct mg_str arena_key(struct mg_arena *a, const struct mg_buf *scratch)
{
    return (struct mg_str){mg_arena_dup(a, scratch->base, scratch->len), scratch->len};
}

/* Delete the expiring entries x[0..m) (sorted by key) with their rows. Timestamp-prefixed keys
 * expire in runs, and so do their due rows (due · key): each of the two tables gets its own
 * guarded runs, so a batch of a dense prefix writes a few range tombstones instead of one
 * tombstone per row. read_adj: the entries were read by the reader's iterator (or the re-index
 * walk), so x[i]->prev_row tells their committed neighbours. */
static int delete_expiring(struct meta_store *ms, uint64_t bucket_id, struct meta_ws *b,
                           struct exp_item **x, size_t m, int read_adj, struct mg_arena *a,
                           struct meta_expire_result *out)
{
    if (m == 0)
        return 0;
    struct mg_str *keys = mg_arena_alloc(a, m * sizeof(*keys));
    struct mg_str **k = mg_arena_alloc(a, m * sizeof(*k));
    int *contig = read_adj ? mg_arena_alloc(a, m * sizeof(*contig)) : NULL;
    struct mg_buf scratch;
    mg_buf_init(&scratch);
    for (size_t i = 0; i < m; i++) {
        expire_rows(b, bucket_id, x[i]);
        scratch.len = 0;
        meta__key_object(&scratch, bucket_id, x[i]->in->key);
        x[i]->okey = arena_key(a, &scratch);
        scratch.len = 0;
        meta__key_due(&scratch, bucket_id, x[i]->in->due_ms, x[i]->in->key);
        keys[i] = arena_key(a, &scratch);
        k[i] = &x[i]->okey;
        if (contig != NULL && i + 1 < m)
            contig[i] = x[i + 1]->prev_row == x[i];
    }
    mg_buf_close(&scratch);
    int rv = delete_keys(ms, b, k, m, contig, 1, out);
    if (rv == 0) { /* the due rows (of the items that have one) */
        size_t md = 0;
        for (size_t i = 0; i < m; i++)
            if (!x[i]->no_row)
                k[md++] = &keys[i];
        qsort(k, md, sizeof(*k), cmp_str_p);
        rv = delete_keys(ms, b, k, md, NULL, 0, out);
    }
    out->expired += (uint32_t)m;
    return rv;
}

/* The scheduler's cursor after this batch: the first row left in place (due-row order), else
 * just past the last item; unchanged when a write moved it back since the scan (epoch). */
static void cursor_after(struct exp_item *items, size_t n, uint64_t epoch,
                         struct meta_lc_progress *p, struct mg_arena *a)
{
    if (p->sched_epoch != epoch)
        return;
    for (size_t i = 0; i < n; i++) {
        if (items[i].left) {
            p->sched_due_ms = items[i].in->due_ms;
            p->sched_key = items[i].in->key;
            return;
        }
    }
    const struct meta_expire_item *last = items[n - 1].in;
    char *k = mg_arena_alloc(a, last->key.len + 1);
    memcpy(k, last->key.base, last->key.len);
    k[last->key.len] = 0; /* key · 0x00: the smallest row after it of the same due time */
    p->sched_due_ms = last->due_ms;
    p->sched_key = (struct mg_str){k, last->key.len + 1};
}

/* A second row of one key in the batch (first decided for the entry). The same row: as
 * first. The current entry's row while first stays: left for the next batch (it is re-read
 * with the right mtime). Else an old row: dropped. */
static void duplicate(struct meta_ws *b, uint64_t bucket_id, const struct exp_item *first,
                      struct exp_item *e)
{
    e->act = ACT_NONE;
    if (e->in->due_ms == first->in->due_ms) {
        e->left = first->left;
    } else if (first->found && first->act != ACT_EXPIRE &&
               first->cur.lc_due_ms == e->in->due_ms) {
        e->left = 1;
    } else {
        e->act = ACT_STALE;
        due_row(b, bucket_id, e->in->due_ms, e->in->key, NULL);
    }
}

static int expire_batch(struct meta_store *ms, struct mg_str bucket, uint64_t bucket_id,
                        const struct meta_expire_item *in, size_t n, int64_t now, uint64_t epoch,
                        struct mg_arena *a, struct meta_ws *b, struct meta_expire_result *out)
{
    const struct lc_config *cfg;
    struct meta_lc_progress p;
    uint64_t gen;
    int rv = rules_get(ms, bucket_id, bucket, &cfg, &gen);
    if (rv == 0)
        rv = progress_read(ms, bucket_id, a, &p);
    if (rv != 0)
        return rv;
    struct exp_item *items = mg_arena_alloc(a, n * sizeof(*items));
    struct exp_item **by_key = mg_arena_alloc(a, n * sizeof(*by_key));
    for (size_t i = 0; i < n; i++) {
        items[i] = (struct exp_item){.in = &in[i], .idx = i};
        by_key[i] = &items[i];
    }
    qsort(by_key, n, sizeof(*by_key), cmp_exp);
    size_t m = 0; /* expiring ones are gathered at the front of by_key, in key order */
    struct exp_item *first = NULL; /* the first item of the current key */
    struct entry_reader r;
    entry_reader_open(ms, bucket_id, by_key, n, &r);
    for (size_t i = 0; rv == 0 && i < n; i++) {
        struct exp_item *e = by_key[i];
        if (first != NULL && key_cmp(first->in->key, e->in->key) == 0) {
            duplicate(b, bucket_id, first, e);
        } else {
            first = e;
            rv = decide(ms, bucket_id, cfg, now, a, e, b, &p, &r);
            if (rv == 0 && e->act == ACT_EXPIRE)
                by_key[m++] = e; /* m <= i: a slot already visited */
        }
        out->stale += e->act == ACT_STALE;
        out->rescheduled += e->act == ACT_MOVE;
    }
    int read_adj = r.it != NULL;
    entry_reader_close(&r);
    if (rv == 0)
        rv = delete_expiring(ms, bucket_id, b, by_key, m, read_adj, a, out);
    if (rv == 0) {
        cursor_after(items, n, epoch, &p, a);
        progress_write(b, bucket_id, &p);
    }
    for (size_t i = 0; rv == 0 && i < m; i++)
        meta__data_retire(ms, &by_key[i]->cur.data);
    return rv;
}

int meta__do_expire_batch(struct meta_store *ms, struct mg_str bucket,
                          const struct meta_expire_item *items, size_t n, int64_t now_ms,
                          uint64_t epoch, struct meta_expire_result *out)
{
    memset(out, 0, sizeof(*out));
    if (n > META_EXPIRE_BATCH_MAX)
        return MG_EINVALIDARGUMENT;
    if (n == 0)
        return 0;
    uint64_t bucket_id;
    int rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv != 0)
        return rv;
    struct mg_arena a;
    mg_arena_init(&a);
    struct meta_ws *b = meta__ws_create();
    int64_t now = now_ms != 0 ? now_ms : meta__now_ms();
    rv = expire_batch(ms, bucket, bucket_id, items, n, now, epoch, &a, b, out);
    if (rv == 0)
        rv = meta__shard_apply(&ms->shard, b);
    meta__ws_destroy(b);
    mg_arena_close(&a);
    if (rv == 0)
        stats_add(ms, out);
    else
        memset(out, 0, sizeof(*out));
    return rv;
}

/* --------------------------------------------------------------- re-index
 *
 * One step: up to n committed entries after the walk's position get their due row recomputed
 * with the current rules. A new rules generation restarts the walk. A pending write in the
 * step's key range (an op executed before this one, not applied yet) could carry a due time
 * from older rules that the committed scan cannot see: the step then writes nothing and
 * reports busy (the scheduler retries later). Budget: n iterator steps (each entry is decoded
 * from the iterator's value: no point read).
 *
 * Expiring in the walk (expire_now != 0): an entry the current rules make due at or before
 * expire_now is expired by the step itself instead of getting a due row, up to expire_max of
 * them. That is the check expire-batch makes (the committed entry, read under the op's
 * serialization, with no pending write in the step's range, and the current rules: never
 * early), made on the read the walk already did. Without it a rule set on a full bucket cost
 * each due entry a due row written, scanned, read back and range-deleted, and a second read
 * of its 1 KiB entry. Runs of such entries get one guarded range tombstone as in expire-batch
 * (the walk visits every committed row of the range, so it knows their neighbours). */

struct reindex_step {
    struct meta_store *ms;
    struct mg_str bucket;
    uint64_t bucket_id;
    const struct lc_config *cfg;
    uint64_t gen;
    int tags;                 /* a rule has a tag filter: entries are decoded in full */
    struct meta_lc_progress p;
    int64_t expire_now;       /* expire entries due at or before it in the walk (0: never) */
    size_t expire_max;        /* at most this many */
    struct exp_item *xs;      /* those expired: xs[0..nx), in key order */
    size_t nx;
    struct exp_item *prev_x;  /* the walk's previous row, when it is one of xs */
};

/* A rule of cfg filters on tags (the only input of a due time that the entry's summary lacks). */
static int cfg_uses_tags(const struct lc_config *cfg)
{
    for (size_t i = 0; cfg != NULL && i < cfg->nrules; i++)
        if (cfg->rules[i].filter.ntags > 0)
            return 1;
    return 0;
}

/* Expire the entry the walk is at (cur: decoded from v, as far as the walk needed) with due
 * time due: it joins r->xs, with its full record (its data is retired, its blob index rows
 * deleted). prev: the item of the walk's previous row, if any (committed neighbours). */
static int reindex_expire(struct reindex_step *r, struct mg_str name, const char *v, size_t vl,
                          const struct meta_object *cur, int64_t due, struct exp_item *prev,
                          struct mg_arena *a)
{
    assert(due != 0 && due <= r->expire_now && r->nx < r->expire_max);
    struct exp_item *e = &r->xs[r->nx];
    struct meta_expire_item *in = mg_arena_alloc(a, sizeof(*in));
    *in = (struct meta_expire_item){.key = name, .due_ms = due, .mtime_ms = cur->mtime_ms};
    *e = (struct exp_item){.in = in, .idx = r->nx, .act = ACT_EXPIRE, .found = 1,
                           .cur = *cur, .prev_row = prev, .no_row = cur->lc_due_ms != due};
    if (!r->tags && meta__object_decode(v, vl, META_REC_OBJECT, a, &e->cur) != 0)
        return 0; /* the summary decoded, the record does not: fsck's; nothing expired */
    e->cur.key = name;
    r->nx++;
    r->prev_x = e;
    return 0;
}

/* Recompute one entry (name, its committed value v) and write its rows when they change. The
 * value comes from the walk's iterator, not a read through the overlay: a pending write in the
 * step's range makes the step write nothing (reindex_walk's busy check), so the committed value
 * is the current one whenever the step's writes are kept. */
static int reindex_entry(struct reindex_step *r, struct mg_str name, const char *v, size_t vl,
                         struct mg_arena *a, struct meta_ws *b)
{
    struct meta_object cur;
    struct exp_item *prev = r->prev_x;
    r->prev_x = NULL; /* set again only when this row is expired too */
    int bad = r->tags ? meta__object_decode(v, vl, META_REC_OBJECT, a, &cur)
                      : meta__object_decode_summary(v, vl, a, &cur); /* no copy of the value */
    if (bad != 0) {
        mg_log(MG_LOG_ERROR, "event=corrupt_entry bucket_id=%llu key_len=%zu",
               (unsigned long long)r->bucket_id, name.len);
        return 0; /* fsck's */
    }
    cur.key = name;
    struct meta_object upd = cur;
    upd.lc_due_ms = r->cfg != NULL ? due_of(r->ms, r->cfg, &cur) : 0;
    upd.lc_gen = upd.lc_due_ms != 0 ? r->gen : 0;
    if (upd.lc_due_ms != 0 && upd.lc_due_ms <= r->expire_now && r->nx < r->expire_max)
        return reindex_expire(r, name, v, vl, &cur, upd.lc_due_ms, prev, a);
    if (upd.lc_due_ms == cur.lc_due_ms)
        return 0;
    /* Only the due rows change: the entry keeps the due time it was written with. A row the
     * entry does not record (this one, after a later write or re-index) is a stale row at worst:
     * expire-batch recomputes the due time from the entry and the current rules before it
     * deletes anything, and drops a row they no longer make due. Rewriting the entry here (a
     * 1 KiB value through Raft per entry) was most of the re-index's cost. */
    return meta__lc_due_rows(r->ms, b, r->bucket_id, upd.key, &cur, 1, &upd, &r->p);
}

static int reindex_walk(struct reindex_step *r, size_t n, struct mg_arena *a, struct meta_ws *b,
                        struct meta_expire_result *out)
{
    struct mg_buf lo, hi, end;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    mg_buf_init(&end);
    meta__key_table_range(r->bucket_id, META_TBL_META, &lo, &hi);
    if (r->p.reindex_key.len > 0) {
        lo.len = 0;
        meta__key_object_after(&lo, r->bucket_id, r->p.reindex_key);
    }
    struct eng_iter *it = eng_iter_create(r->ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    int rv = 0;
    struct mg_str last = {NULL, 0};
    for (; rv == 0 && out->reindexed < n && eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        uint64_t bid, parent;
        struct mg_str name;
        if (meta__key_object_decode(k, kl, &bid, &parent, &name) != 0 || parent != 0) {
            r->prev_x = NULL; /* a committed row between two expiring entries */
            continue;
        }
        size_t vl;
        const char *v = eng_iter_value(it, &vl);
        last = (struct mg_str){mg_arena_dup(a, name.base, name.len), name.len};
        rv = reindex_entry(r, last, v, vl, a, b);
        out->reindexed++;
    }
    int done = rv == 0 && !eng_iter_valid(it);
    if (rv == 0)
        rv = eng_iter_status(it);
    eng_iter_destroy(it);
    if (done) {
        mg_buf_append(&end, hi.base, hi.len);
    } else if (last.len > 0) {
        meta__key_object_after(&end, r->bucket_id, last);
    }
    if (rv == 0 && end.len > 0 &&
        meta__ov_any_in_range(&r->ms->rt->shards->ov, lo.base, lo.len, end.base, end.len))
        out->reindex_busy = 1;
    if (last.len > 0)
        r->p.reindex_key = last;
    r->p.reindex_done = done;
    out->reindex_done = done;
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    mg_buf_close(&end);
    return rv;
}

/* Delete what the walk expired (r->xs, in key order) in b, as expire-batch does, and retire
 * their data. Only for a step whose writes are kept (not busy). */
static int reindex_expire_all(struct reindex_step *r, struct mg_arena *a, struct meta_ws *b,
                              struct meta_expire_result *out)
{
    struct exp_item **x = mg_arena_alloc(a, r->nx * sizeof(*x));
    for (size_t i = 0; i < r->nx; i++)
        x[i] = &r->xs[i];
    assert(r->nx > 0 && !out->reindex_busy);
    int rv = delete_expiring(r->ms, r->bucket_id, b, x, r->nx, 1, a, out);
    for (size_t i = 0; rv == 0 && i < r->nx; i++)
        meta__data_retire(r->ms, &x[i]->cur.data);
    return rv;
}

int meta__do_lc_reindex(struct meta_store *ms, struct mg_str bucket, size_t n,
                        int64_t expire_now_ms, size_t expire_max, struct meta_expire_result *out)
{
    memset(out, 0, sizeof(*out));
    if (n == 0 || n > LC_REINDEX_STEP_MAX)
        return MG_EINVALIDARGUMENT;
    struct reindex_step r = {.ms = ms, .bucket = bucket};
    int rv = meta__bucket_id(ms, bucket, &r.bucket_id);
    if (rv != 0)
        return rv;
    struct mg_arena a;
    mg_arena_init(&a);
    rv = rules_get(ms, r.bucket_id, bucket, &r.cfg, &r.gen);
    r.tags = cfg_uses_tags(r.cfg);
    if (rv == 0)
        rv = progress_read(ms, r.bucket_id, &a, &r.p);
    if (rv == 0 && r.p.reindex_gen != r.gen) { /* new rules: restart the walk */
        r.p.reindex_gen = r.gen;
        r.p.reindex_done = 0;
        r.p.reindex_key = (struct mg_str){NULL, 0};
    } else if (rv == 0 && r.p.reindex_done) {
        out->reindex_done = 1;
        mg_arena_close(&a);
        return 0;
    }
    struct meta_ws *b = meta__ws_create();
    if (rv == 0 && r.cfg == NULL) {
        /* No rules left: no row may stay, including rows the entries do not record (re-index
         * writes only rows). One range tombstone over the bucket's due table; writes executed
         * before this op apply before it, later ones write no row. */
        struct mg_buf lo, hi;
        mg_buf_init(&lo);
        mg_buf_init(&hi);
        meta__key_table_range(r.bucket_id, META_TBL_DUE, &lo, &hi);
        meta__ws_delete_range(b, lo.base, lo.len, hi.base, hi.len);
        mg_buf_close(&lo);
        mg_buf_close(&hi);
        r.p.reindex_done = out->reindex_done = 1;
        r.p.reindex_key = (struct mg_str){NULL, 0};
    } else if (rv == 0) {
        r.expire_max = expire_max < n ? expire_max : n;
        r.expire_now = r.expire_max > 0 ? expire_now_ms : 0;
        if (r.expire_now != 0)
            r.xs = mg_arena_alloc(&a, r.expire_max * sizeof(*r.xs));
        rv = reindex_walk(&r, n, &a, b, out);
    }
    if (rv == 0 && !out->reindex_busy && r.nx > 0)
        rv = reindex_expire_all(&r, &a, b, out);
    if (rv == 0 && !out->reindex_busy) {
        progress_write(b, r.bucket_id, &r.p);
        rv = meta__shard_apply(&ms->shard, b);
    }
    if (rv == 0 && out->reindex_busy) {
        out->reindexed = 0;
        out->reindex_done = 0;
    }
    meta__ws_destroy(b);
    mg_arena_close(&a);
    if (rv == 0)
        stats_add(ms, out);
    return rv;
}

/* ----------------------------------------------------- dispatch, wrappers */

int meta__do_lifecycle(struct meta_store *ms, struct meta_op *op)
{
    if (op->type == META_OP_EXPIRE_BATCH)
        return meta__do_expire_batch(ms, op->in.bucket, op->in.expire, op->in.nexpire,
                                     op->in.now_ms, op->in.lc_epoch, &op->out.expire);
    assert(op->type == META_OP_LC_REINDEX);
    return meta__do_lc_reindex(ms, op->in.bucket, op->in.nexpire, op->in.now_ms,
                               (size_t)op->in.lc_epoch, &op->out.expire);
}

int meta_lc_expire_batch(struct meta_store *ms, struct mg_str bucket,
                         const struct meta_expire_item *items, size_t n, int64_t now_ms,
                         uint64_t epoch, struct meta_expire_result *out)
{
    struct meta_op *op = meta_op_create(META_OP_EXPIRE_BATCH);
    op->in.bucket = bucket;
    op->in.expire = items; /* borrowed: this thread waits until done */
    op->in.nexpire = n;
    op->in.now_ms = now_ms;
    op->in.lc_epoch = epoch;
    int rv = meta__op_run_sync(ms, op);
    *out = rv == 0 ? op->out.expire : (struct meta_expire_result){0};
    meta_op_destroy(op);
    return rv;
}

int meta_lc_reindex_expire_step(struct meta_store *ms, struct mg_str bucket, size_t n,
                                int64_t expire_now_ms, size_t expire_max,
                                struct meta_expire_result *out)
{
    struct meta_op *op = meta_op_create(META_OP_LC_REINDEX);
    op->in.bucket = bucket;
    op->in.nexpire = n;
    op->in.now_ms = expire_now_ms;
    op->in.lc_epoch = expire_max;
    int rv = meta__op_run_sync(ms, op);
    *out = rv == 0 ? op->out.expire : (struct meta_expire_result){0};
    meta_op_destroy(op);
    return rv;
}

int meta_lc_reindex_step(struct meta_store *ms, struct mg_str bucket, size_t n,
                         struct meta_expire_result *out)
{
    return meta_lc_reindex_expire_step(ms, bucket, n, 0, 0, out);
}

uint64_t meta_lc_load(struct meta_store *ms)
{
    struct meta__rt *rt = meta__rt_get(ms);
    if (rt == NULL)
        return 0;
    pthread_mutex_lock(&rt->lock);
    uint64_t n = rt->n;
    pthread_mutex_unlock(&rt->lock);
    if (rt->shards != NULL) /* racy by design: a hint, read without the meta thread */
        n += __atomic_load_n(&rt->shards->inflight, __ATOMIC_RELAXED);
    return n;
}

/* ------------------------------------------------------------- due scan */

/* A due row carries the mtime of the entry it indexes. For a row without it (written before
 * rows had values) the scan reads the entry: an iterator over the bucket's 'M' range (opened
 * at the first such row) that follows the rows. Timestamp-prefixed keys expire in key order,
 * so the entry after the previous one is usually the next row's: one next instead of a point
 * read per row; otherwise one seek. Only the mtime is decoded (no copy of inline data). */
struct entry_cursor {
    struct meta_store *ms;
    struct eng_iter *it;
    struct mg_buf k;
};

/* *mtime of the entry key (0: gone or not decodable). */
static void entry_mtime(struct entry_cursor *c, uint64_t bucket_id, struct mg_str key,
                        struct mg_arena *a, int64_t *mtime)
{
    if (c->it == NULL) {
        struct mg_buf lo, hi;
        mg_buf_init(&lo);
        mg_buf_init(&hi);
        meta__key_table_range(bucket_id, META_TBL_META, &lo, &hi);
        c->it = eng_iter_create(c->ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
        mg_buf_close(&lo);
        mg_buf_close(&hi);
    }
    c->k.len = 0;
    meta__key_object(&c->k, bucket_id, key);
    *mtime = 0;
    if (!iter_goto(c->it, buf_str(&c->k)))
        return;
    size_t vl;
    const char *v = eng_iter_value(c->it, &vl);
    struct meta_object o;
    if (meta__object_decode_summary(v, vl, a, &o) == 0) /* corrupt: the op drops the row */
        *mtime = o.mtime_ms;
}

static int scan_item(struct entry_cursor *c, uint64_t bucket_id, struct eng_iter *it,
                     struct mg_arena *a, struct meta_expire_item *item)
{
    size_t kl, vl;
    const char *k = eng_iter_key(it, &kl);
    const char *v = eng_iter_value(it, &vl);
    uint64_t bid;
    int64_t due;
    struct mg_str key;
    int rv = meta__key_due_decode(k, kl, &bid, &due, &key);
    if (rv != 0 || meta__key_check(key) != 0)
        return MG_ECORRUPT;
    item->key = (struct mg_str){mg_arena_dup(a, key.base, key.len), key.len};
    item->due_ms = due;
    if (vl == 8)
        item->mtime_ms = (int64_t)meta__get_u64(v);
    else
        entry_mtime(c, bucket_id, key, a, &item->mtime_ms);
    return 0;
}

int meta_lc_due_scan(struct meta_store *ms, uint64_t bucket_id, int64_t now_ms, size_t max,
                     struct mg_arena *a, struct meta_expire_item *items, size_t *n,
                     int64_t *oldest_due_ms, uint64_t *epoch)
{
    assert(!meta__exec_active());
    struct meta_lc_progress p;
    *n = 0;
    *oldest_due_ms = 0;
    *epoch = 0;
    int rv = progress_read(ms, bucket_id, a, &p);
    if (rv != 0)
        return rv;
    *epoch = p.sched_epoch;
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_due(&lo, bucket_id, p.sched_due_ms, p.sched_key);
    meta__key_due(&hi, bucket_id, now_ms + 1, (struct mg_str){NULL, 0}); /* due <= now */
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    struct entry_cursor c = {.ms = ms};
    mg_buf_init(&c.k);
    for (; rv == 0 && *n < max && eng_iter_valid(it); eng_iter_next(it)) {
        rv = scan_item(&c, bucket_id, it, a, &items[*n]);
        if (rv == 0) {
            (*n)++;
        } else if (rv == MG_ECORRUPT) { /* skipped: fsck's, not a reason to stop expiring */
            size_t kl;
            eng_iter_key(it, &kl);
            mg_log(MG_LOG_ERROR, "event=corrupt_due_row bucket_id=%llu key_len=%zu",
                   (unsigned long long)bucket_id, kl);
            rv = 0;
        }
    }
    if (rv == 0)
        rv = eng_iter_status(it);
    if (rv == 0 && c.it != NULL)
        rv = eng_iter_status(c.it);
    if (*n > 0)
        *oldest_due_ms = items[0].due_ms;
    if (c.it != NULL)
        eng_iter_destroy(c.it);
    mg_buf_close(&c.k);
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return rv;
}
