/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The delete tracker (DESIGN.md 8; ENG_COMPACTION_LOCALITY). RocksDB's own
 * deletion-triggered compaction (CompactOnDeletionCollector) only looks at
 * SSTs as they are written, so tombstones that sit in the memtable, or are
 * spread over SSTs that never cross its window, stay there and every LIST
 * over them steps across each one (issue 8: a 1,000-key LIST after removing
 * 150,000 of 200,000 timestamp keys took 178-640 ms minutes later). The
 * tracker sees every delete eng_batch_commit makes (point and range), counts
 * them per narrow key range in a sliding window, and when a range crosses a
 * threshold one background worker runs CompactRange over the span of keys
 * actually deleted there (not the whole bucket), at a bounded rate.
 *
 * Ranges. A range is (column family, the key's first prefix_len bytes), or
 * as many bytes as the caller's range_len classifier says for that key (the
 * layout owner knows which bytes cluster per table). With the meta CF's
 * layout, 0x03 · bucket-id(8) · 'M' · parent-id(8) · name, the default 22 is
 * the 18-byte entry prefix plus the first 4 bytes of the name:
 * timestamp-prefixed names (logs/2026-..., 1733..., 2026/12/...) that expire
 * together share those bytes and land in one range, and two prefixes of one
 * bucket (logs/ and tmp/) stay apart, so compacting one never rewrites the
 * other. What gets compacted is [min, max] of the keys deleted in the range
 * since its last compaction, kept as 64-byte truncations (a truncated min is
 * still <= the key; a truncated max is widened to its successor), so a range
 * costs a fixed-size record and the hot path never allocates. A due row,
 * 0x03 · bucket-id · 'D' · due-ms(8) · key, needs another length (10 bytes
 * plus the top 5 bytes of due-ms: one range per 2^24 ms, ~4.7 hours, of due
 * times): with 22, every due time would be its own range and none would ever
 * trigger; that is what range_len is for (meta sets it: meta__lc_tracker_range_len in
 * meta/expire.c, for due rows and time index rows 0x03 · bucket-id · 'T' · mtime-ms · key).
 *
 * Bounds (STYLE.md 7a): at most ranges_max ranges (default 1024) in an open-
 * addressing table of twice that many ~240-byte records (~0.5 MiB); when it
 * is full, a delete in a new range is counted as untracked and left to
 * RocksDB. Ranges that saw no delete for a window and hold fewer than
 * age_min_deletes are dropped by the worker's sweep, so scattered deletes do
 * not pin the table. The work queue is the table itself (a "queued" flag);
 * the worker takes the due range with the most pending deletes first, so with
 * every range due at once the last waits ranges_max / compactions_per_sec_max
 * (256 s at the defaults).
 *
 * What a compaction costs: CompactRange flushes the memtable if it overlaps
 * the range (with the WAL off, atomic_flush flushes every CF), then rewrites
 * whole SSTs: every file that meets [min, max] is an input, so the rewrite is
 * the files overlapping the deleted span, not the span alone. The bytes it
 * read and wrote (eng_db_stats) are measured from the live-file lists around
 * the call, so they show exactly that.
 */
#define MG_MODULE "engine"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "engine/internal.h"

#define TRK_PREFIX_MAX 48                    /* cap on prefix_len */
#define TRK_BOUND_MAX ENG__TRACKER_BOUND_MAX /* bytes of a range's min/max key kept */
#define TRK_WIN_SLOTS 4                      /* the sliding window is this many sub-windows */
#define TRK_TICK_MS_MAX 100                  /* worker re-checks age triggers at least this often */
#define TRK_HEX_BYTES 24                     /* key bytes shown in a log line */

/* Defaults of struct eng_tracker_opts (engine.h). */
#define TRK_PREFIX_LEN 22
#define TRK_RANGES_MAX 1024
#define TRK_WINDOW_MS 10000
#define TRK_TRIGGER_DELETES 4096
#define TRK_AGE_MS 5000
#define TRK_AGE_MIN_DELETES 256
#define TRK_RANGE_DELETE_WEIGHT 256
#define TRK_COMPACTIONS_PER_SEC 4
#define TRK_BYTES_PER_SEC (64ull << 20)

struct trk_range {
    uint64_t hash;                  /* of (cf, prefix) */
    uint64_t pending;               /* deletes since the last compaction (0: lo/hi unset) */
    uint64_t first_ms;              /* commit time of the oldest of them */
    uint64_t win_epoch;             /* sub-window number of the newest win[] count */
    uint32_t win[TRK_WIN_SLOTS];    /* deletes per sub-window, a ring indexed by epoch */
    uint32_t win_sum;               /* sum of win[] */
    uint8_t used;                   /* 1: slot holds a range */
    uint8_t cf;                     /* enum eng_cf */
    uint8_t queued;                 /* 1: the count trigger fired, waiting for the worker */
    uint8_t plen;                   /* prefix bytes (a key shorter than prefix_len: its length) */
    uint8_t lo_len;                 /* bytes in lo */
    uint8_t hi_len;                 /* bytes in hi */
    uint8_t hi_open;                /* 1: hi was truncated: the bound is hi's successor */
    uint8_t prefix[TRK_PREFIX_MAX]; /* the range's name */
    uint8_t lo[TRK_BOUND_MAX];      /* smallest deleted key (truncated: <= it) */
    uint8_t hi[TRK_BOUND_MAX];      /* largest deleted key or range end (truncated) */
};

struct eng__tracker {
    struct eng_db *db;         /* owner (compactions go through db.c) */
    struct eng_tracker_opts o; /* resolved options (no zero field) */
    pthread_mutex_t mu;        /* guards everything below */
    pthread_cond_t cv;         /* worker sleeps here (CLOCK_MONOTONIC) */
    pthread_t worker;          /* the one compaction thread */
    int stop;                  /* 1: worker must exit */
    int wake;                  /* 1: a range was queued since the worker last looked */
    uint64_t now_ms;           /* clock at eng__tracker_begin, for the batch */
    uint64_t epoch;            /* its sub-window number */
    uint64_t sub_ms;           /* sub-window length */
    struct trk_range *last;    /* range of the batch's previous delete (or NULL) */
    struct trk_range *tab;     /* open addressing, linear probing, 2 * ranges_max slots */
    uint32_t mask;             /* slots - 1 */
    uint32_t used;             /* ranges in tab (<= ranges_max) */
    uint64_t compactions;      /* stats, since create */
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t deletes;
    uint64_t untracked;
    uint64_t running; /* deletes covered by the compaction running now */
};

static uint64_t clock_ms(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void opts_resolve(struct eng_tracker_opts *o, const struct eng_tracker_opts *in)
{
    *o = *in;
#define TRK_DEFAULT(f, v) o->f = o->f ? o->f : (v)
    TRK_DEFAULT(prefix_len, TRK_PREFIX_LEN);
    TRK_DEFAULT(ranges_max, TRK_RANGES_MAX);
    TRK_DEFAULT(window_ms, TRK_WINDOW_MS);
    TRK_DEFAULT(trigger_deletes, TRK_TRIGGER_DELETES);
    TRK_DEFAULT(age_ms, TRK_AGE_MS);
    TRK_DEFAULT(age_min_deletes, TRK_AGE_MIN_DELETES);
    TRK_DEFAULT(range_delete_weight, TRK_RANGE_DELETE_WEIGHT);
    TRK_DEFAULT(compactions_per_sec_max, TRK_COMPACTIONS_PER_SEC);
    TRK_DEFAULT(bytes_per_sec_max, TRK_BYTES_PER_SEC);
#undef TRK_DEFAULT
    if (o->prefix_len > TRK_PREFIX_MAX)
        o->prefix_len = TRK_PREFIX_MAX;
    if (o->window_ms < TRK_WIN_SLOTS)
        o->window_ms = TRK_WIN_SLOTS;
}

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    if (c != 0)
        return c;
    return al < bl ? -1 : al > bl;
}

static uint64_t range_hash(enum eng_cf cf, const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)cf; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The range named by (cf, key's prefix), added if new and add is 1; NULL when the table is full
 * (or it is absent and add is 0). */
static struct trk_range *range_get(struct eng__tracker *t, enum eng_cf cf, const uint8_t *key,
                                   size_t plen, int add)
{
    uint64_t h = range_hash(cf, key, plen);
    for (uint32_t i = (uint32_t)h & t->mask;; i = (i + 1) & t->mask) {
        struct trk_range *r = &t->tab[i];
        if (!r->used) {
            if (!add || t->used >= t->o.ranges_max)
                return NULL;
            memset(r, 0, sizeof *r);
            r->used = 1;
            r->hash = h;
            r->cf = (uint8_t)cf;
            r->plen = (uint8_t)plen;
            memcpy(r->prefix, key, plen);
            r->win_epoch = t->epoch;
            t->wake |= t->used++ == 0; /* the worker sleeps long on an empty table */
            return r;
        }
        if (r->hash == h && r->cf == cf && r->plen == plen && memcmp(r->prefix, key, plen) == 0)
            return r;
    }
}

/* How many leading bytes of key name its range: the caller's classifier or prefix_len, capped
 * at TRK_PREFIX_MAX and the key's length. */
static size_t range_len(const struct eng__tracker *t, enum eng_cf cf, const void *key, size_t kl)
{
    size_t n = t->o.range_len ? t->o.range_len(cf, key, kl, t->o.range_arg) : t->o.prefix_len;
    n = n < TRK_PREFIX_MAX ? n : TRK_PREFIX_MAX;
    return n < kl ? n : kl;
}

/* Move r's window to epoch, dropping the sub-windows that fell out of it. */
static void window_advance(struct trk_range *r, uint64_t epoch)
{
    if (epoch <= r->win_epoch)
        return;
    uint64_t d = epoch - r->win_epoch;
    for (uint64_t s = 1; s <= d && s <= TRK_WIN_SLOTS; s++) {
        uint32_t *w = &r->win[(r->win_epoch + s) % TRK_WIN_SLOTS];
        r->win_sum -= *w;
        *w = 0;
    }
    r->win_epoch = epoch;
}

/* Record n deletes of keys in [key, hi] (hi == key for a point delete) in key's range. */
static void note(struct eng__tracker *t, enum eng_cf cf, const uint8_t *key, size_t kl,
                 const uint8_t *hi, size_t hl, uint32_t n)
{
    size_t plen = range_len(t, cf, key, kl);
    struct trk_range *r = t->last;
    assert(cf < ENG_CF__COUNT && n > 0);
    if (r == NULL || r->cf != cf || r->plen != plen || memcmp(r->prefix, key, plen) != 0)
        r = range_get(t, cf, key, plen, 1);
    if (r == NULL) {
        t->untracked += n;
        return;
    }
    t->last = r;
    size_t lt = kl < TRK_BOUND_MAX ? kl : TRK_BOUND_MAX;
    size_t ht = hl < TRK_BOUND_MAX ? hl : TRK_BOUND_MAX;
    if (r->pending == 0 || key_cmp(key, lt, r->lo, r->lo_len) < 0) {
        memcpy(r->lo, key, lt);
        r->lo_len = (uint8_t)lt;
    }
    int c = r->pending == 0 ? 1 : key_cmp(hi, ht, r->hi, r->hi_len);
    if (c > 0) {
        memcpy(r->hi, hi, ht);
        r->hi_len = (uint8_t)ht;
        r->hi_open = hl > TRK_BOUND_MAX;
    } else if (c == 0) {
        r->hi_open |= hl > TRK_BOUND_MAX;
    }
    if (r->pending == 0)
        r->first_ms = t->now_ms;
    r->pending += n;
    window_advance(r, t->epoch);
    r->win[t->epoch % TRK_WIN_SLOTS] += n;
    r->win_sum += n;
    t->deletes += n;
    if (!r->queued && r->win_sum >= t->o.trigger_deletes) {
        r->queued = 1;
        t->wake = 1;
    }
}

void eng__tracker_begin(struct eng__tracker *t)
{
    pthread_mutex_lock(&t->mu);
    t->now_ms = clock_ms(CLOCK_MONOTONIC_COARSE);
    t->epoch = t->now_ms / t->sub_ms;
    t->last = NULL;
}

void eng__tracker_delete(struct eng__tracker *t, enum eng_cf cf, const void *key, size_t klen)
{
    note(t, cf, key, klen, key, klen, 1);
}

void eng__tracker_delete_range(struct eng__tracker *t, enum eng_cf cf, const void *start, size_t sl,
                               const void *end, size_t el)
{
    /* [start, end) widened to [start, end]: the end key itself is harmless to compact. */
    note(t, cf, start, sl, end, el, t->o.range_delete_weight);
}

void eng__tracker_end(struct eng__tracker *t)
{
    t->last = NULL;
    if (t->wake)
        pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Remove tab[i] by backward shift (linear probing needs no tombstones). */
static void range_remove(struct eng__tracker *t, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & t->mask;
        if (!t->tab[j].used)
            break;
        uint32_t home = (uint32_t)t->tab[j].hash & t->mask;
        /* tab[j] may fill the hole at i unless its home lies cyclically in (i, j]. */
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays)
            continue;
        t->tab[i] = t->tab[j];
        i = j;
    }
    t->tab[i].used = 0;
    assert(t->used > 0);
    t->used--;
}

static int range_due(const struct eng__tracker *t, const struct trk_range *r, uint64_t now)
{
    if (r->queued)
        return 1;
    return r->pending >= t->o.age_min_deletes && now - r->first_ms >= t->o.age_ms;
}

/* Drop ranges that saw no delete for a whole window and hold too few to ever be due by age. */
static void sweep(struct eng__tracker *t, uint64_t now)
{
    uint64_t epoch = now / t->sub_ms;
    uint32_t i = 0;
    while (i <= t->mask) {
        struct trk_range *r = &t->tab[i];
        if (r->used) {
            window_advance(r, epoch);
            if (!r->queued && r->win_sum == 0 && r->pending < t->o.age_min_deletes) {
                range_remove(t, i);
                continue; /* another range may have shifted into slot i */
            }
        }
        i++;
    }
}

/* The due range with the most pending deletes, or NULL. */
static struct trk_range *pick(struct eng__tracker *t, uint64_t now)
{
    struct trk_range *best = NULL;
    for (uint32_t i = 0; i <= t->mask; i++) {
        struct trk_range *r = &t->tab[i];
        if (r->used && r->pending > 0 && range_due(t, r, now) &&
            (best == NULL || r->pending > best->pending))
            best = r;
    }
    return best;
}

/* The span CompactRange gets for r: [lo, successor of hi). */
static void span_fill(const struct trk_range *r, uint64_t now, struct eng__tracker_span *j)
{
    assert(r->used && r->pending > 0);
    assert(r->lo_len <= TRK_BOUND_MAX && r->hi_len <= TRK_BOUND_MAX);
    j->cf = (enum eng_cf)r->cf;
    memcpy(j->lo, r->lo, r->lo_len);
    j->lo_len = r->lo_len;
    memcpy(j->hi, r->hi, r->hi_len);
    j->hi_len = r->hi_len;
    j->hi_unbounded = 0;
    if (!r->hi_open) {
        j->hi[j->hi_len++] = 0; /* hi itself is included: end at its immediate successor */
    } else {
        /* Successor of the truncated key: > every key starting with it. */
        while (j->hi_len > 0 && j->hi[j->hi_len - 1] == 0xFF)
            j->hi_len--;
        if (j->hi_len == 0)
            j->hi_unbounded = 1;
        else
            j->hi[j->hi_len - 1]++;
    }
    j->deletes = r->pending;
    j->age_ms = now - r->first_ms;
}

/* Copy r's span into j and start r afresh (deletes from now on count towards the next run). */
static void job_take(struct trk_range *r, uint64_t now, struct eng__tracker_span *j)
{
    span_fill(r, now, j);
    r->pending = 0;
    r->queued = 0;
    memset(r->win, 0, sizeof r->win);
    r->win_sum = 0;
}

static void job_run(struct eng__tracker *t, const struct eng__tracker_span *j,
                    uint64_t *bytes_written)
{
    uint64_t br = 0, bw = 0;
    struct timespec a, b;
    char lo_hex[2 * TRK_HEX_BYTES + 1], hi_hex[2 * TRK_HEX_BYTES + 1];
    clock_gettime(CLOCK_MONOTONIC, &a);
    eng__db_compact_tracked(t->db, j->cf, j->lo, j->lo_len, j->hi_unbounded ? NULL : j->hi,
                            j->hi_len, &br, &bw);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    mg_hex_encode(j->lo, j->lo_len < TRK_HEX_BYTES ? j->lo_len : TRK_HEX_BYTES, lo_hex);
    mg_hex_encode(j->hi, j->hi_len < TRK_HEX_BYTES ? j->hi_len : TRK_HEX_BYTES, hi_hex);
    pthread_mutex_lock(&t->mu);
    int stopping = t->stop; /* the close cut the compaction short (db.c) */
    pthread_mutex_unlock(&t->mu);
    mg_log(MG_LOG_INFO,
           "event=tracker_compact cf=%s start=%s%s end=%s%s deletes=%llu age_ms=%llu ms=%.1f "
           "bytes_read=%llu bytes_written=%llu%s",
           eng__cf_name(j->cf), lo_hex, j->lo_len > TRK_HEX_BYTES ? "..." : "",
           j->hi_unbounded ? "inf" : hi_hex, j->hi_len > TRK_HEX_BYTES ? "..." : "",
           (unsigned long long)j->deletes, (unsigned long long)j->age_ms, ms,
           (unsigned long long)br, (unsigned long long)bw, stopping ? " cut_by_close=1" : "");
    pthread_mutex_lock(&t->mu);
    t->compactions++;
    t->bytes_read += br;
    t->bytes_written += bw;
    t->running = 0;
    pthread_mutex_unlock(&t->mu);
    *bytes_written = bw;
}

static void wait_ms(struct eng__tracker *t, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

/*
 * The worker: one thread, at most compactions_per_sec_max CompactRange calls
 * started per second, and after each one a pause so its writes stay under
 * bytes_per_sec_max. Each pass it sweeps idle ranges and picks the due range
 * with the most pending deletes (a range is due when the count trigger fired
 * or its oldest pending delete is age_ms old with age_min_deletes behind it).
 *
 * Sketch (this machine: 2 cores, NVMe, RocksDB 7.8, WAL off). Hot path: a
 * delete costs a memcmp of the prefix against the previous delete's range (a
 * 1,000-key batch of one prefix hashes once), two bound compares of <= 64
 * bytes and a window add, ~20-50 ns under one mutex taken once per commit;
 * RocksDB's own memtable insert is ~1 us per delete, so the tracker adds a
 * few per cent to a 1,000-delete commit. Measured (test_tracker.c
 * test_overhead, thread CPU time, Release, 1 Dec 2026): the hooks alone
 * 20-27 ns per delete; a 1,000-delete commit 857-919 us without the tracker,
 * 881-999 us with it. Memory: ~0.5 MiB for 1,024 ranges, fixed.
 * Worker: a pass scans 2,048 slots twice (~10 us) at most every 100 ms plus
 * once per queued range. Compactions: the whole SSTs that meet a range are
 * rewritten; for the 200,000-key prefix of test_effect_locality (~13 MB of
 * SST, 150,000 deleted in 1,000-key batches) the tracker ran 2-3 of them,
 * each reading 4-13 MB and writing 3-8 MB in 130-350 ms. At the defaults (4
 * per second, 64 MiB/s written) the worker can thus keep at most one of the
 * two cores busy, and a compaction repays itself after about one LIST:
 * stepping over 150,000 tombstones costs that LIST 141-330 ms here (Release;
 * 970 ms under ASan) and 178-640 ms in issue 8, every time it runs.
 */
static void *on_worker(void *arg)
{
    struct eng__tracker *t = arg;
    uint64_t next_ms = 0; /* earliest start of the next compaction (rate bound) */
    uint64_t tick = t->o.age_ms / 4 < TRK_TICK_MS_MAX ? t->o.age_ms / 4 + 1 : TRK_TICK_MS_MAX;
    uint64_t idle = 10 * TRK_TICK_MS_MAX; /* nothing tracked: only a signal brings work */
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        uint64_t now = clock_ms(CLOCK_MONOTONIC_COARSE); /* the commit path's clock */
        t->wake = 0;
        sweep(t, now);
        struct trk_range *r = pick(t, now);
        if (r == NULL || now < next_ms) {
            wait_ms(t, r != NULL ? next_ms - now : t->used > 0 ? tick : idle);
            continue;
        }
        struct eng__tracker_span j;
        uint64_t bw = 0;
        job_take(r, now, &j);
        t->running = j.deletes;
        pthread_mutex_unlock(&t->mu);
        job_run(t, &j, &bw);
        uint64_t end = clock_ms(CLOCK_MONOTONIC_COARSE);
        uint64_t by_count = now + 1000 / t->o.compactions_per_sec_max;
        uint64_t by_bytes = end + bw * 1000 / t->o.bytes_per_sec_max;
        next_ms = by_count > by_bytes ? by_count : by_bytes;
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

struct eng__tracker *eng__tracker_create(struct eng_db *db, const struct eng_tracker_opts *opts)
{
    struct eng__tracker *t = mg_calloc(1, sizeof *t);
    pthread_condattr_t ca;
    assert(db != NULL && opts != NULL);
    t->db = db;
    opts_resolve(&t->o, opts);
    t->sub_ms = t->o.window_ms / TRK_WIN_SLOTS;
    uint32_t slots = 1;
    while (slots < 2 * t->o.ranges_max)
        slots <<= 1;
    t->tab = mg_calloc(slots, sizeof *t->tab);
    t->mask = slots - 1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rv = pthread_create(&t->worker, NULL, on_worker, t);
    if (rv != 0)
        mg_log(MG_LOG_FATAL, "event=tracker_thread err=%s", strerror(rv));
    assert(rv == 0); /* thread creation only fails on resource exhaustion, like malloc */
    return t;
}

void eng__tracker_stop(struct eng__tracker *t)
{
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void eng__tracker_destroy(struct eng__tracker *t)
{
    if (t == NULL)
        return;
    eng__tracker_stop(t);
    pthread_join(t->worker, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    mg_free(t->tab);
    mg_free(t);
}

void eng__tracker_stats(struct eng__tracker *t, struct eng_db_stats *out)
{
    pthread_mutex_lock(&t->mu);
    out->tracker_compactions = t->compactions;
    out->tracker_bytes_read = t->bytes_read;
    out->tracker_bytes_written = t->bytes_written;
    out->tracker_ranges = t->used;
    out->tracker_deletes = t->deletes;
    out->tracker_deletes_untracked = t->untracked;
    out->tracker_deletes_pending = t->running;
    for (uint32_t i = 0; i <= t->mask; i++)
        if (t->tab[i].used)
            out->tracker_deletes_pending += t->tab[i].pending;
    pthread_mutex_unlock(&t->mu);
}

int eng__tracker_span_get(struct eng__tracker *t, enum eng_cf cf, const void *key, size_t klen,
                          struct eng__tracker_span *out)
{
    int rv = MG_ENOTFOUND;
    pthread_mutex_lock(&t->mu);
    struct trk_range *r = range_get(t, cf, key, range_len(t, cf, key, klen), 0);
    if (r != NULL && r->pending > 0) {
        span_fill(r, clock_ms(CLOCK_MONOTONIC_COARSE), out);
        rv = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return rv;
}
