/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lifecycle scheduler (issue 8): one thread per node that turns the due
 * index meta keeps into expire-batch ops. It owns no state that matters after
 * a crash: the due rows, the scheduler's cursor and the re-index position all
 * live in meta (meta/meta.h "lifecycle", the bucket's 'L' row), written by the
 * ops themselves, so a scheduler started after kill -9 carries on where the
 * old one stopped. It only uses meta's public API (blocking calls: this is a
 * thread that may block, never an event loop).
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "lifecycle"
#include "lifecycle/lifecycle.h"
#include "meta/meta.h"

#define BATCHES_PER_BUCKET 16  /* per pass, so one bucket's backlog cannot starve the others */
#define UPLOADS_PER_PASS 1000  /* uploads listed per bucket per pass for AbortIncomplete... */
#define REINDEX_PER_SECOND 1000000 /* default re-index pace: it still yields to foreground load */
#define BACKOFF_SLEEP_MS 2
#define BACKOFF_ROUNDS_MAX 100 /* 200 ms: then one batch goes anyway */
#define UPLOAD_MARKERS 64      /* buckets whose upload listing resumes where it stopped */

/* Where the listing of a bucket's uploads stopped (in memory: after a restart it starts over,
 * which only costs a re-listing). Direct-mapped by bucket id. */
struct upload_marker {
    uint64_t bucket_id;
    struct mg_buf key;
    struct mg_buf upload_id;
};

struct lc_scheduler {
    struct meta_store *ms;
    struct lc_scheduler_opts o;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stopping;           /* under mu */
    int kick;               /* under mu: start a pass now */
    uint64_t passes_begun;  /* under mu */
    uint64_t passes_ended;  /* under mu */
    struct lc_rate rate;    /* expiry, objects/s */
    struct lc_rate reindex; /* re-index, entries/s */
    struct upload_marker markers[UPLOAD_MARKERS]; /* scheduler thread only */
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int stopping(struct lc_scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    int v = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* The CLOCK_REALTIME deadline ns from now (pthread_cond_timedwait's clock). */
static struct timespec deadline(int64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t t = (int64_t)ts.tv_nsec + ns;
    ts.tv_sec += t / 1000000000;
    ts.tv_nsec = t % 1000000000;
    return ts;
}

/* Sleep up to ns, woken early by destroy. */
static void nap(struct lc_scheduler *s, int64_t ns)
{
    struct timespec ts = deadline(ns);
    pthread_mutex_lock(&s->mu);
    if (!s->stopping)
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    pthread_mutex_unlock(&s->mu);
}

/* Yielding to foreground load. meta_lc_load is the meta thread's submit queue plus the Raft
 * entries in flight: every foreground write passes through both, so it is the one figure that
 * rises first when the store is busy. While it is at or above busy_load the scheduler sleeps
 * BACKOFF_SLEEP_MS and looks again, up to BACKOFF_ROUNDS_MAX times (200 ms); then one batch
 * goes anyway. Under saturating foreground load expiry therefore slows to about five batches
 * a second (5,000 objects/s) instead of stopping, and on an idle store it never waits.
 * Returns 0, or -1 when stopping. */
static int yield_to_foreground(struct lc_scheduler *s)
{
    for (int i = 0; i < BACKOFF_ROUNDS_MAX && meta_lc_load(s->ms) >= s->o.busy_load; i++) {
        if (stopping(s))
            return -1;
        nap(s, (int64_t)BACKOFF_SLEEP_MS * 1000000);
    }
    return stopping(s) ? -1 : 0;
}

/* Tokens for up to want objects from r, waiting for at least one. 0 when stopping. */
static size_t take(struct lc_scheduler *s, struct lc_rate *r, size_t want)
{
    for (;;) {
        uint64_t got = lc_rate_take(r, want, mono_ns());
        if (got > 0)
            return (size_t)got;
        if (stopping(s))
            return 0;
        nap(s, lc_rate_wait_ns(r, mono_ns()));
    }
}

struct pass_stats {
    uint64_t backlog;        /* due rows seen left after the pass (each bucket: one scan) */
    int64_t oldest_due_ms;   /* the oldest of them (0: none) */
    uint64_t reindex_pending;
    int busy;                /* something was done: another pass right away */
};

static void note_backlog(struct pass_stats *ps, size_t n, int64_t oldest)
{
    ps->backlog += n;
    if (n > 0 && (ps->oldest_due_ms == 0 || oldest < ps->oldest_due_ms))
        ps->oldest_due_ms = oldest;
}

/* One round of expiry in bucket b: one scan of up to want due rows (granted by the rate
 * limiter; the scan reads each row's entry) and one expire-batch op over them. Returns the
 * rows scanned (0: nothing due) or -1 on an error (logged). *oldest: the first row's due
 * time. */
static long expire_round(struct lc_scheduler *s, const struct meta_bucket *b, size_t want,
                         struct meta_expire_item *items, int64_t *oldest)
{
    struct mg_arena a;
    size_t n = 0;
    uint64_t epoch = 0;
    struct meta_expire_result res = {0};
    mg_arena_init(&a);
    int rv = meta_lc_due_scan(s->ms, b->id, wall_ms(), want, &a, items, &n, oldest, &epoch);
    if (rv == 0 && n > 0)
        rv = meta_lc_expire_batch(s->ms, b->name, items, n, 0, epoch, &res);
    mg_arena_close(&a);
    if (rv > 0)
        mg_log(MG_LOG_WARN, "event=lifecycle_expire_failed bucket=%.*s err=%s",
               (int)b->name.len, b->name.base, mg_err_name(rv));
    if (rv != 0)
        return -1;
    if (n > 0)
        mg_log(MG_LOG_DEBUG, "event=lifecycle_batch bucket=%.*s rows=%zu expired=%u range=%u",
               (int)b->name.len, b->name.base, n, res.expired, res.range_deletes);
    return (long)n;
}

/* One step of the bucket's re-index walk when it is behind its rules. Returns 1 when it is
 * still behind (pending), 0 when it is done, -1 when stopping. Without a rate limit on expiry
 * (lifecycle.max_per_second 0, the default) the step also expires what the new rules make due
 * now (meta_lc_reindex_expire_step): a rule set on a bucket of old objects then reads each
 * entry once, instead of writing a due row that the next batch scans, reads back with its
 * entry and deletes. With a limit every expiry goes through the paced batches. */
static int reindex_round(struct lc_scheduler *s, const struct meta_bucket *b,
                         struct pass_stats *ps)
{
    struct mg_arena a;
    struct meta_lc_progress p;
    mg_arena_init(&a);
    int rv = meta_lc_progress_get(s->ms, b->id, &a, &p);
    mg_arena_close(&a);
    if (rv != 0 || (p.reindex_gen == b->lc_gen && p.reindex_done))
        return 0;
    size_t n = take(s, &s->reindex, LC_REINDEX_STEP_MAX);
    struct meta_expire_result res;
    if (n == 0)
        return -1;
    int64_t now = s->o.max_per_second == 0 ? wall_ms() : 0;
    if (meta_lc_reindex_expire_step(s->ms, b->name, n, now, now != 0 ? n : 0, &res) != 0)
        return 1;
    ps->busy |= !res.reindex_busy;
    if (res.expired > 0)
        mg_log(MG_LOG_DEBUG, "event=lifecycle_reindex_expired bucket=%.*s expired=%u range=%u",
               (int)b->name.len, b->name.base, res.expired, res.range_deletes);
    return res.reindex_done ? 0 : 1;
}

/* Work on one bucket: up to BATCHES_PER_BUCKET rounds, each a re-index round while the walk is
 * behind, then an expiry round over what is due (key order of the due rows, from the
 * persisted cursor), both yielding to foreground load and paced by their rate limiters. A
 * last scan only measures what is left (the backlog figure). */
static void bucket_work(struct lc_scheduler *s, const struct meta_bucket *b, int expire,
                        struct pass_stats *ps)
{
    size_t cap = s->o.batch_max;
    struct meta_expire_item *items = mg_malloc(cap * sizeof(*items));
    int reindexing = 1, drained = 0;
    for (int round = 0; round < BATCHES_PER_BUCKET; round++) {
        if (yield_to_foreground(s) != 0)
            break;
        if (reindexing) {
            int r = reindex_round(s, b, ps);
            if (r < 0)
                break;
            reindexing = r;
        }
        if (!expire) {
            if (!reindexing)
                break;
            continue;
        }
        size_t want = take(s, &s->rate, cap);
        if (want == 0)
            break;
        int64_t oldest = 0;
        long n = expire_round(s, b, want, items, &oldest);
        if (n < 0)
            break;
        drained = (size_t)n < want && !reindexing;
        ps->busy |= n > 0;
        if (drained)
            break;
    }
    ps->reindex_pending += reindexing; /* still behind after this pass */
    if (expire && !drained) { /* what is left, as far as one batch sees */
        struct mg_arena a;
        size_t n = 0;
        int64_t oldest = 0;
        uint64_t epoch;
        mg_arena_init(&a);
        if (meta_lc_due_scan(s->ms, b->id, wall_ms(), cap, &a, items, &n, &oldest, &epoch) == 0)
            note_backlog(ps, n, oldest);
        mg_arena_close(&a);
    }
    mg_free(items);
}

static struct upload_marker *marker_of(struct lc_scheduler *s, uint64_t bucket_id)
{
    struct upload_marker *m = &s->markers[bucket_id % UPLOAD_MARKERS];
    if (m->bucket_id != bucket_id) {
        m->bucket_id = bucket_id;
        m->key.len = m->upload_id.len = 0;
    }
    return m;
}

static void marker_set(struct upload_marker *m, const struct meta_upload *last, int truncated)
{
    m->key.len = m->upload_id.len = 0;
    if (truncated && last != NULL) {
        mg_buf_append(&m->key, last->key.base, last->key.len);
        mg_buf_append(&m->upload_id, last->upload_id.base, last->upload_id.len);
    }
}

/* AbortIncompleteMultipartUpload: uploads initiated more than DaysAfterInitiation days ago,
 * through meta's abort (which frees the parts). Up to UPLOADS_PER_PASS listed per pass, from
 * where the last pass stopped (back to the start after the last page). */
static void abort_uploads(struct lc_scheduler *s, const struct meta_bucket *b,
                          const struct lc_config *cfg)
{
    int any = 0;
    for (size_t i = 0; i < cfg->nrules; i++)
        any |= cfg->rules[i].enabled && cfg->rules[i].abort_days > 0;
    if (!any)
        return;
    struct mg_arena a;
    struct meta_upload *u;
    size_t n = 0;
    int truncated = 0;
    mg_arena_init(&a);
    struct upload_marker *m = marker_of(s, b->id);
    int rv = meta_mpu_list(s->ms, b->name, (struct mg_str){"", 0},
                           (struct mg_str){m->key.base, m->key.len},
                           (struct mg_str){m->upload_id.base, m->upload_id.len}, UPLOADS_PER_PASS,
                           &a, &u, &n, &truncated);
    if (rv == 0)
        marker_set(m, n > 0 ? &u[n - 1] : NULL, truncated);
    int64_t now = wall_ms();
    for (size_t i = 0; rv == 0 && i < n; i++) {
        int64_t due;
        const struct lc_rule *rule;
        if (!lc_config_abort_due(cfg, u[i].key, u[i].initiated_ms, s->o.day_seconds, &due,
                                 &rule) ||
            due > now)
            continue;
        rv = meta_mpu_abort(s->ms, b->name, u[i].key, u[i].upload_id);
        if (rv == MG_ENOSUCHUPLOAD) /* completed or aborted meanwhile */
            rv = 0;
        mg_log(MG_LOG_INFO, "event=lifecycle_abort_upload bucket=%.*s rule=%.*s rv=%d",
               (int)b->name.len, b->name.base, (int)rule->id.len, rule->id.base, rv);
    }
    mg_arena_close(&a);
}

static void bucket_pass(struct lc_scheduler *s, const struct meta_bucket *b,
                        struct pass_stats *ps)
{
    if (b->lifecycle_bin.len == 0 && b->lc_gen == 0)
        return; /* never had rules */
    struct mg_arena a;
    struct lc_config cfg;
    mg_arena_init(&a);
    int loaded = b->lifecycle_bin.len > 0 &&
                 lc_config_load(b->lifecycle_bin.base, b->lifecycle_bin.len, &a, &cfg) == 0;
    bucket_work(s, b, loaded, ps); /* without rules: only the re-index that drops due rows */
    if (loaded)
        abort_uploads(s, b, &cfg);
    mg_arena_close(&a);
}

/* One pass over every bucket. Returns 1 when it did work (another pass follows at once). */
static int pass(struct lc_scheduler *s)
{
    struct mg_arena a;
    struct meta_bucket *bk;
    size_t n = 0;
    struct pass_stats ps = {0};
    mg_arena_init(&a);
    int rv = meta_bucket_list(s->ms, (struct mg_str){"", 0}, &a, &bk, &n);
    for (size_t i = 0; rv == 0 && i < n && !stopping(s); i++)
        bucket_pass(s, &bk[i], &ps);
    mg_arena_close(&a);
    int64_t age = ps.oldest_due_ms != 0 ? wall_ms() - ps.oldest_due_ms : 0;
    meta_lifecycle_stats_backlog(s->ms, ps.backlog, age > 0 ? age : 0, ps.reindex_pending);
    return ps.busy;
}

static void *on_thread(void *arg)
{
    struct lc_scheduler *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        s->kick = 0;
        s->passes_begun++;
        pthread_mutex_unlock(&s->mu);
        int busy = pass(s);
        pthread_mutex_lock(&s->mu);
        s->passes_ended++;
        pthread_cond_broadcast(&s->cv);
        if (!busy && !s->kick && !s->stopping) {
            struct timespec ts = deadline((int64_t)s->o.idle_ms * 1000000);
            pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        }
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

int lc_scheduler_create(struct meta_store *ms, const struct lc_scheduler_opts *opts,
                        struct lc_scheduler **out)
{
    assert(ms != NULL && out != NULL);
    struct lc_scheduler *s = mg_calloc(1, sizeof(*s));
    s->ms = ms;
    for (size_t i = 0; i < UPLOAD_MARKERS; i++) {
        mg_buf_init(&s->markers[i].key);
        mg_buf_init(&s->markers[i].upload_id);
    }
    if (opts != NULL)
        s->o = *opts;
    if (s->o.day_seconds == 0)
        s->o.day_seconds = LC_DAY_SECONDS;
    if (s->o.batch_max == 0 || s->o.batch_max > META_EXPIRE_BATCH_MAX)
        s->o.batch_max = META_EXPIRE_BATCH_MAX;
    if (s->o.reindex_per_second == 0)
        s->o.reindex_per_second = REINDEX_PER_SECOND;
    if (s->o.idle_ms == 0)
        s->o.idle_ms = 1000;
    if (s->o.busy_load == 0)
        s->o.busy_load = 256;
    if (s->o.max_per_second > LC_RATE_MAX)
        s->o.max_per_second = LC_RATE_MAX;
    lc_rate_init(&s->rate, s->o.max_per_second, mono_ns());
    lc_rate_init(&s->reindex, s->o.reindex_per_second, mono_ns());
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL); /* CLOCK_REALTIME deadlines (deadline()) */
    int rv = pthread_create(&s->thread, NULL, on_thread, s);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=lifecycle_scheduler_start_failed errno=%d", rv);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        mg_free(s);
        return MG_EIO;
    }
    mg_log(MG_LOG_INFO, "event=lifecycle_scheduler_start max_per_second=%llu day_seconds=%u",
           (unsigned long long)s->o.max_per_second, s->o.day_seconds);
    *out = s;
    return 0;
}

void lc_scheduler_run_pass(struct lc_scheduler *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t want = s->passes_begun + 1; /* a pass that begins after this call */
    s->kick = 1;
    pthread_cond_broadcast(&s->cv);
    while (s->passes_ended < want && !s->stopping)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

void lc_scheduler_destroy(struct lc_scheduler *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    for (size_t i = 0; i < UPLOAD_MARKERS; i++) {
        mg_buf_close(&s->markers[i].key);
        mg_buf_close(&s->markers[i].upload_id);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    mg_free(s);
}
