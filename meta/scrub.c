/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data walk shared by the scrubber and fsck, and the scrubber thread
 * (meta/scrub.h has the contract; docs/ops.md "Scrubbing and fsck").
 *
 * Design: the walk never holds a RocksDB iterator across its callback. Each
 * batch opens an iterator at the cursor (the successor of the last row
 * visited), copies up to WALK_BATCH decoded rows into an arena, closes the
 * iterator, then hands the rows out. A pass over a large store at 8 MiB/s
 * takes hours; a snapshot held that long would pin every deleted row's SST
 * against compaction.
 *
 * Rate: after each blob the thread sleeps until (bytes verified this pass) /
 * rate seconds have passed since the pass started, so the average is bounded;
 * one blob is verified at disk speed (eng_blob_verify reads 1 MiB at a time),
 * so a single burst is at most one blob (<= 5 GiB for a part, usually far
 * less). The sleep is a condition wait: stop and trigger wake it.
 */
#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "meta/data.h"
#include "meta/internal.h"
#include "meta/scrub.h"

#define WALK_BATCH 64

/* ---------------------------------------------------------------- the walk */

struct walk_row {
    struct meta_scrub_item it;
    struct meta_data data;
};

/* Decode one 'M' or 'U' part row into r (from a). Returns 0, 1 (not an entry with data: an
 * upload template row), or MG_ECORRUPT. */
static int decode_row(const char *k, size_t kl, const char *v, size_t vl, char table,
                      struct mg_arena *a, struct walk_row *r)
{
    memset(r, 0, sizeof(*r));
    r->it.row_key = (struct mg_str){mg_arena_dup(a, k, kl), kl};
    if (table == META_TBL_META) {
        uint64_t bid, parent;
        struct mg_str name;
        struct meta_object o;
        if (meta__key_object_decode(k, kl, &bid, &parent, &name) != 0 ||
            meta__object_decode(v, vl, META_REC_OBJECT, a, &o) != 0)
            return MG_ECORRUPT;
        r->it.key = (struct mg_str){mg_arena_dup(a, name.base, name.len), name.len};
        r->data = o.data;
    } else {
        uint64_t bid;
        struct mg_buf name;
        struct mg_str upload_id;
        uint32_t part = 0;
        mg_buf_init(&name);
        int rv = meta__key_upload_decode(k, kl, &bid, &name, &upload_id, &part);
        if (rv == 0 && part != 0) {
            r->it.key = (struct mg_str){mg_arena_dup(a, name.base, name.len), name.len};
            r->it.upload_id = (struct mg_str){mg_arena_dup(a, upload_id.base, upload_id.len),
                                              upload_id.len};
            r->it.part = part;
            struct meta_part p;
            rv = meta__part_decode(v, vl, a, &p);
            if (rv == 0)
                r->data = p.data;
        }
        mg_buf_close(&name);
        if (rv != 0)
            return MG_ECORRUPT;
        if (part == 0)
            return 1;
    }
    return 0;
}

/* One table of one bucket, batch by batch. */
static int walk_table(struct meta_store *ms, const struct meta_bucket *b, char table,
                      meta_scrub_walk_cb cb, void *ctx, uint64_t *corrupt_rows)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_table_range(b->id, table, &lo, &hi);
    int rv = 0, more = 1;
    while (rv == 0 && more) {
        struct mg_arena a;
        struct walk_row rows[WALK_BATCH];
        size_t n = 0;
        mg_arena_init(&a);
        struct eng_iter *it =
            eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
        for (; n < WALK_BATCH && eng_iter_valid(it); eng_iter_next(it)) {
            size_t kl, vl;
            const char *k = eng_iter_key(it, &kl);
            const char *v = eng_iter_value(it, &vl);
            /* The next batch starts just past this row: k · 0x00 is its successor. */
            lo.len = 0;
            mg_buf_append(&lo, k, kl);
            mg_buf_append(&lo, "", 1);
            int d = decode_row(k, kl, v, vl, table, &a, &rows[n]);
            if (d == MG_ECORRUPT) {
                if (corrupt_rows != NULL)
                    (*corrupt_rows)++;
                mg_log(MG_LOG_ERROR, "event=scrub_corrupt_row bucket=%.*s table=%c key_len=%zu",
                       (int)b->name.len, b->name.base, table, kl);
            } else if (d == 0) {
                n++;
            }
        }
        more = eng_iter_valid(it);
        rv = eng_iter_status(it);
        eng_iter_destroy(it);
        for (size_t i = 0; i < n && rv == 0; i++) {
            rows[i].it.bucket = b->name;
            rows[i].it.bucket_id = b->id;
            rows[i].it.data = &rows[i].data;
            rv = cb(ctx, &rows[i].it);
        }
        mg_arena_close(&a);
    }
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return rv;
}

int meta_scrub_walk(struct meta_store *ms, meta_scrub_walk_cb cb, void *ctx,
                    uint64_t *corrupt_rows)
{
    struct mg_arena a;
    struct meta_bucket *bk = NULL;
    size_t nb = 0;
    mg_arena_init(&a);
    int rv = meta_bucket_list(ms, (struct mg_str){"", 0}, &a, &bk, &nb);
    for (size_t i = 0; i < nb && rv == 0; i++) {
        rv = walk_table(ms, &bk[i], META_TBL_META, cb, ctx, corrupt_rows);
        if (rv == 0)
            rv = walk_table(ms, &bk[i], META_TBL_UPLOAD, cb, ctx, corrupt_rows);
    }
    mg_arena_close(&a);
    return rv;
}

static int ref_eq(const struct eng_blob_ref *x, const struct eng_blob_ref *y)
{
    return x->segment == y->segment && x->offset == y->offset && x->length == y->length &&
           x->crc32c == y->crc32c && x->flags == y->flags;
}

int meta_scrub_row_has_ref(struct meta_store *ms, struct mg_str row_key,
                           const struct eng_blob_ref *ref)
{
    struct mg_buf v;
    struct mg_arena a;
    struct walk_row r;
    mg_buf_init(&v);
    mg_arena_init(&a);
    int has = 0;
    if (row_key.len > META_TABLE_KEY_LEN - 1 &&
        eng_get(ms->db, ENG_CF_META, row_key.base, row_key.len, &v) == 0 &&
        decode_row(row_key.base, row_key.len, v.base, v.len, row_key.base[META_TABLE_KEY_LEN - 1],
                   &a, &r) == 0)
        for (size_t i = 0; i < r.data.nextents && !has; i++)
            has = ref_eq(&r.data.extents[i].ref, ref);
    mg_arena_close(&a);
    mg_buf_close(&v);
    return has;
}

/* ------------------------------------------------------------ the scrubber */

struct scrub {
    struct meta_store *ms;
    struct meta_scrub_opts opts;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    int trigger;
    /* Under lock: */
    struct meta_scrub_stats st;
    /* Failures of the last completed pass (last) and of this pass (cur); st.failing is
     * rebuilt from both. */
    struct meta_scrub_failure *last, *cur;
    size_t nlast, ncur, last_total, cur_total;
    /* The pass in progress (scrubber thread only). */
    struct timespec pass_start;
    uint64_t pass_bytes;
};

#define SCRUBS_MAX 16 /* stores per process with a scrubber (tests open a few) */
static struct scrub *scrubs[SCRUBS_MAX];
static pthread_mutex_t scrubs_lock = PTHREAD_MUTEX_INITIALIZER;

/* ms's scrubber or NULL; scrubs_lock held (meta_scrub_stop frees it under that lock). */
static struct scrub *find_locked(struct meta_store *ms)
{
    for (size_t i = 0; i < SCRUBS_MAX; i++)
        if (scrubs[i] != NULL && scrubs[i]->ms == ms)
            return scrubs[i];
    return NULL;
}

int meta_scrub_opts_from_env(struct meta_scrub_opts *o)
{
    o->bytes_per_sec = mg_env_u64("MG_SCRUB_BYTES_PER_SEC", META_SCRUB_RATE_DEFAULT);
    o->delay_ms = mg_env_u64("MG_SCRUB_DELAY_MS", META_SCRUB_DELAY_MS_DEFAULT);
    o->period_ms = mg_env_u64("MG_SCRUB_PERIOD_MS", META_SCRUB_PERIOD_MS_DEFAULT);
    return mg_env_u64("MG_SCRUB", 1) == 0;
}

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t mono_ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ms = (int64_t)(now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
    return ms > 0 ? (uint64_t)ms : 0;
}

/* Wait (lock held) until stop (or a trigger, if on_trigger), or ms have passed. Returns 1 if
 * stop. */
static int wait_ms(struct scrub *s, uint64_t ms, int on_trigger)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (ms > (uint64_t)365 * 24 * 3600 * 1000)
        ms = (uint64_t)365 * 24 * 3600 * 1000;
    dl.tv_sec += (time_t)(ms / 1000);
    dl.tv_nsec += (long)(ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    while (!s->stop && !(on_trigger && s->trigger))
        if (pthread_cond_timedwait(&s->cond, &s->lock, &dl) != 0)
            break;
    return s->stop;
}

/* st.failing = cur then last (deduplicated), lock held. */
static void failing_rebuild(struct scrub *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ncur; i++)
        s->st.failing[n++] = s->cur[i];
    size_t extra = 0;
    for (size_t i = 0; i < s->nlast; i++) {
        int dup = 0;
        for (size_t j = 0; j < s->ncur && !dup; j++)
            dup = s->cur[j].segment == s->last[i].segment && s->cur[j].offset == s->last[i].offset;
        if (dup)
            continue;
        extra++;
        if (n < META_SCRUB_FAILING_MAX)
            s->st.failing[n++] = s->last[i];
    }
    s->st.nfailing = n;
    /* Exact when neither list overflowed; else an upper bound. */
    s->st.failing_total = s->cur_total + (s->last_total - s->nlast) + extra;
}

static void put_escaped(char *out, size_t cap, struct mg_str s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < s.len && o + 4 < cap; i++) {
        unsigned char c = (unsigned char)s.base[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '~' || c == '/' || c == '-') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}

static void record_failure(struct scrub *s, const struct meta_scrub_item *it,
                           const struct eng_blob_ref *ref, int err)
{
    char esc[3 * META_KEY_MAX + 1];
    put_escaped(esc, sizeof(esc), it->key);
    mg_log(MG_LOG_ERROR,
           "event=scrub_checksum_failure bucket=%.*s key=%s upload_id=%.*s part=%u segment=%" PRIu64
           " offset=%" PRIu64 " length=%" PRIu64 " err=%s",
           (int)it->bucket.len, it->bucket.base, esc, (int)it->upload_id.len,
           it->upload_id.base, it->part, ref->segment, ref->offset, ref->length,
           mg_err_name(err));
    pthread_mutex_lock(&s->lock);
    s->st.checksum_failures++;
    s->cur_total++;
    if (s->ncur < META_SCRUB_FAILING_MAX) {
        struct meta_scrub_failure *f = &s->cur[s->ncur++];
        memset(f, 0, sizeof(*f));
        snprintf(f->bucket, sizeof(f->bucket), "%.*s", (int)it->bucket.len, it->bucket.base);
        snprintf(f->key, sizeof(f->key), "%.*s", (int)it->key.len, it->key.base);
        snprintf(f->upload_id, sizeof(f->upload_id), "%.*s", (int)it->upload_id.len,
                 it->upload_id.base);
        f->part = it->part;
        f->segment = ref->segment;
        f->offset = ref->offset;
        f->err = err;
    }
    failing_rebuild(s);
    pthread_mutex_unlock(&s->lock);
}

/* Sleep until this pass's bytes are within the rate. Returns 1 if asked to stop. */
static int pace(struct scrub *s)
{
    uint64_t rate = s->opts.bytes_per_sec ? s->opts.bytes_per_sec : META_SCRUB_RATE_DEFAULT;
    uint64_t due_ms = s->pass_bytes / rate * 1000 + s->pass_bytes % rate * 1000 / rate;
    uint64_t el = mono_ms_since(&s->pass_start);
    pthread_mutex_lock(&s->lock);
    int stop = s->stop;
    if (!stop && due_ms > el) /* a trigger during a pass is kept for after it */
        stop = wait_ms(s, due_ms - el, 0);
    pthread_mutex_unlock(&s->lock);
    return stop;
}

static int scrub_item(void *ctx, const struct meta_scrub_item *it)
{
    struct scrub *s = ctx;
    pthread_mutex_lock(&s->lock);
    int stop = s->stop;
    s->st.objects_scanned++;
    pthread_mutex_unlock(&s->lock);
    if (stop)
        return MG_ESHUTDOWN;
    for (size_t i = 0; i < it->data->nextents; i++) {
        const struct eng_blob_ref *ref = &it->data->extents[i].ref;
        int rv = meta__blob_pin(s->ms, ref);
        int skipped = rv != 0;
        if (rv == 0) {
            /* Pinned, then confirmed referenced: the reaper cannot free it under the read. */
            if (!meta_scrub_row_has_ref(s->ms, it->row_key, ref))
                skipped = 1;
            else
                rv = meta__blob_verify(s->ms, ref);
            meta__blob_unpin(s->ms, ref);
        }
        if (!skipped && rv != 0 && !meta_scrub_row_has_ref(s->ms, it->row_key, ref))
            skipped = 1; /* overwritten meanwhile: not a failure */
        pthread_mutex_lock(&s->lock);
        if (skipped) {
            s->st.skipped++;
        } else {
            s->st.blobs_scanned++;
            s->st.bytes_scanned += ref->length;
        }
        pthread_mutex_unlock(&s->lock);
        if (!skipped && rv != 0)
            record_failure(s, it, ref, rv);
        if (!skipped)
            s->pass_bytes += ref->length;
        if (pace(s))
            return MG_ESHUTDOWN;
    }
    return 0;
}

static void run_pass(struct scrub *s)
{
    clock_gettime(CLOCK_MONOTONIC, &s->pass_start);
    s->pass_bytes = 0;
    pthread_mutex_lock(&s->lock);
    s->st.running = 1;
    s->ncur = s->cur_total = 0;
    failing_rebuild(s);
    pthread_mutex_unlock(&s->lock);
    uint64_t corrupt = 0;
    int rv = meta_scrub_walk(s->ms, scrub_item, s, &corrupt);
    uint64_t ms = mono_ms_since(&s->pass_start);
    pthread_mutex_lock(&s->lock);
    s->st.running = 0;
    s->st.corrupt_rows += corrupt;
    uint64_t failures = s->cur_total;
    if (rv == 0) {
        /* The pass is complete: its list replaces the last one. */
        struct meta_scrub_failure *t = s->last;
        s->last = s->cur;
        s->cur = t;
        s->nlast = s->ncur;
        s->last_total = s->cur_total;
        s->ncur = s->cur_total = 0;
        s->st.passes++;
        s->st.last_pass_end_ms = unix_ms();
        s->st.last_pass_ms = ms;
        s->st.last_pass_bytes = s->pass_bytes;
        failing_rebuild(s);
    }
    uint64_t objects = s->st.objects_scanned;
    pthread_mutex_unlock(&s->lock);
    mg_log(rv == 0 ? MG_LOG_INFO : MG_LOG_WARN,
           "event=scrub_pass status=%s ms=%" PRIu64 " bytes=%" PRIu64 " failures=%" PRIu64
           " corrupt_rows=%" PRIu64 " objects_total=%" PRIu64,
           rv == 0 ? "done" : mg_err_name(rv), ms, s->pass_bytes, failures, corrupt, objects);
}

static void *scrub_main(void *arg)
{
    struct scrub *s = arg;
    pthread_mutex_lock(&s->lock);
    uint64_t period = s->opts.period_ms ? s->opts.period_ms : (uint64_t)META_SCRUB_PERIOD_MS_DEFAULT;
    uint64_t wait = s->opts.delay_ms;
    while (!wait_ms(s, wait, 1)) {
        if (!s->trigger && wait == UINT64_MAX)
            continue;
        s->trigger = 0;
        pthread_mutex_unlock(&s->lock);
        run_pass(s);
        uint64_t took = mono_ms_since(&s->pass_start);
        pthread_mutex_lock(&s->lock);
        wait = took >= period ? 0 : period - took;
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void meta_scrub_start(struct meta_store *ms, const struct meta_scrub_opts *opts)
{
    struct meta_scrub_opts o;
    if (opts != NULL) {
        o = *opts;
    } else if (meta_scrub_opts_from_env(&o)) {
        mg_log(MG_LOG_INFO, "event=scrub_disabled reason=MG_SCRUB=0");
        return;
    }
    if (o.bytes_per_sec == 0)
        o.bytes_per_sec = META_SCRUB_RATE_DEFAULT;
    struct scrub *s = mg_calloc(1, sizeof(*s));
    s->ms = ms;
    s->opts = o;
    s->st.bytes_per_sec = o.bytes_per_sec;
    s->last = mg_calloc(META_SCRUB_FAILING_MAX, sizeof(*s->last));
    s->cur = mg_calloc(META_SCRUB_FAILING_MAX, sizeof(*s->cur));
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&scrubs_lock);
    size_t slot = SCRUBS_MAX;
    int dup = 0;
    for (size_t i = 0; i < SCRUBS_MAX; i++) {
        dup |= scrubs[i] != NULL && scrubs[i]->ms == ms;
        if (scrubs[i] == NULL && slot == SCRUBS_MAX)
            slot = i;
    }
    int err = dup || slot == SCRUBS_MAX ? MG_EINVALIDARGUMENT : 0;
    if (err == 0 && (err = pthread_create(&s->thread, NULL, scrub_main, s)) != 0)
        err = MG_EIO;
    if (err == 0)
        scrubs[slot] = s;
    pthread_mutex_unlock(&scrubs_lock);
    if (err != 0) {
        mg_log(MG_LOG_ERROR, "event=scrub_start_failed reason=%s",
               dup ? "already_running" : slot == SCRUBS_MAX ? "too_many_stores" : "thread");
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        mg_free(s->last);
        mg_free(s->cur);
        mg_free(s);
        return;
    }
    mg_log(MG_LOG_INFO,
           "event=scrub_start bytes_per_sec=%" PRIu64 " delay_ms=%" PRIu64 " period_ms=%" PRIu64,
           o.bytes_per_sec, o.delay_ms, o.period_ms ? o.period_ms : (uint64_t)META_SCRUB_PERIOD_MS_DEFAULT);
}

void meta_scrub_stop(struct meta_store *ms)
{
    struct scrub *s = NULL;
    pthread_mutex_lock(&scrubs_lock);
    for (size_t i = 0; i < SCRUBS_MAX && s == NULL; i++) {
        if (scrubs[i] != NULL && scrubs[i]->ms == ms) {
            s = scrubs[i];
            scrubs[i] = NULL;
        }
    }
    pthread_mutex_unlock(&scrubs_lock);
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    mg_free(s->last);
    mg_free(s->cur);
    mg_free(s);
}

int meta_scrub_trigger(struct meta_store *ms)
{
    /* Held across the signal so meta_scrub_stop cannot free s in between. */
    pthread_mutex_lock(&scrubs_lock);
    struct scrub *s = find_locked(ms);
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        s->trigger = 1;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&scrubs_lock);
    return s != NULL ? 0 : MG_ENOTFOUND;
}

int meta_scrub_stats_get(struct meta_store *ms, struct meta_scrub_stats *out)
{
    pthread_mutex_lock(&scrubs_lock);
    struct scrub *s = find_locked(ms);
    if (s != NULL) {
        pthread_mutex_lock(&s->lock);
        *out = s->st;
        pthread_mutex_unlock(&s->lock);
    } else {
        memset(out, 0, sizeof(*out));
    }
    pthread_mutex_unlock(&scrubs_lock);
    return s != NULL ? 0 : MG_ENOTFOUND;
}
