/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for engine/tracker.c, the delete tracker behind
 * ENG_COMPACTION_LOCALITY: the count and age triggers fire for dense runs and
 * not for a scattered few; the worker's rate bounds (compactions per second,
 * bytes per second) hold; and the effect that matters (issue 8): after the
 * oldest 75% of a 200,000-key prefix is deleted with the WAL off, a scan of
 * the first 1,000 live keys steps over few tombstones once the tracker ran,
 * and over all of them with stock RocksDB compaction. Keys follow the meta
 * CF's layout 0x03 · bucket-id(8) · 'M' · parent-id(8) · name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "engine/internal.h"
#include "tests/unit/engine/helpers.h"

#define KEY_MAX 64
#define POLL_MS 10
#define EFFECT_KEYS 200000
#define EFFECT_DELETED 150000
#define EFFECT_SCAN 1000

struct fix {
    char *dir;         /* temporary directory */
    struct eng_db *db; /* open store (WAL off, like production) */
};

static double clock_of_ms(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double now_ms(void)
{
    return clock_of_ms(CLOCK_MONOTONIC);
}

/* This thread's CPU time: the overhead figures ignore the other processes on the machine
 * (with the WAL off a commit's work, the memtable insert, runs on the committing thread). */
static double cpu_ms(void)
{
    return clock_of_ms(CLOCK_THREAD_CPUTIME_ID);
}

static void open_db(struct fix *f, enum eng_compaction mode, const struct eng_tracker_opts *to)
{
    char errmsg[256] = "";
    struct eng_db_opts o = {.wal = 0, .block_cache_bytes = 8u << 20, .compaction = mode};
    if (to != NULL)
        o.tracker = *to;
    eng_db_close(f->db);
    f->db = NULL;
    int rv = eng_db_open(f->dir, &o, &f->db, errmsg);
    if (rv != 0)
        fprintf(stderr, "eng_db_open: %s\n", errmsg);
    assert_int_equal(rv, 0);
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    f->dir = test_tmpdir();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    eng_db_close(f->db);
    test_tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* The entry key of object "logs/<ms>-<i>" (a timestamp-prefixed name) in bucket. */
static size_t mkey(char *k, uint64_t bucket, uint32_t i)
{
    k[0] = 0x03;
    for (int b = 0; b < 8; b++)
        k[1 + b] = (char)(bucket >> (56 - 8 * b));
    k[9] = 'M';
    memset(k + 10, 0, 8); /* parent-id 0: a flat bucket */
    int n = snprintf(k + 18, KEY_MAX - 18, "logs/%013llu-%06u",
                     1733000000000ull + (unsigned long long)i * 10, i);
    return 18 + (size_t)n;
}

/* Put (del = 0) or delete keys [from, to) of bucket, batch keys per commit. */
static void write_keys(struct eng_db *db, uint64_t bucket, uint32_t from, uint32_t to, int del,
                       uint32_t batch)
{
    char k[KEY_MAX], v[40];
    memset(v, 'v', sizeof v);
    for (uint32_t i = from; i < to;) {
        struct eng_batch *b = eng_batch_create();
        for (uint32_t n = 0; n < batch && i < to; n++, i++) {
            size_t kl = mkey(k, bucket, i);
            if (del)
                eng_batch_delete(b, ENG_CF_META, k, kl);
            else
                eng_batch_put(b, ENG_CF_META, k, kl, v, sizeof v);
        }
        assert_int_equal(eng_batch_commit(db, b, 0), 0);
        eng_batch_destroy(b);
    }
}

static struct eng_db_stats stats(struct eng_db *db)
{
    struct eng_db_stats s;
    eng_db_stats_get(db, &s);
    return s;
}

/* Poll until the tracker ran at least n compactions and has nothing pending; fail after
 * timeout. Returns the time it took. */
static double wait_compactions(struct eng_db *db, uint64_t n, double timeout_ms)
{
    double t0 = now_ms();
    for (;;) {
        struct eng_db_stats s = stats(db);
        if (s.tracker_compactions >= n && s.tracker_deletes_pending == 0)
            return now_ms() - t0;
        if (now_ms() - t0 > timeout_ms)
            fail_msg("tracker: %llu compactions, %llu pending after %.0f ms (want %llu)",
                     (unsigned long long)s.tracker_compactions,
                     (unsigned long long)s.tracker_deletes_pending, timeout_ms,
                     (unsigned long long)n);
        usleep(POLL_MS * 1000);
    }
}

static struct eng_perf scan_live(struct eng_db *db, double *ms);

/* The count trigger fires for a dense run; the age trigger for a smaller one once it is old. */
static void test_dense_fires(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts to = {.trigger_deletes = 500,
                                  .age_ms = 300,
                                  .age_min_deletes = 200,
                                  .compactions_per_sec_max = 100};
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    write_keys(f->db, 1, 0, 2000, 0, 1000);
    write_keys(f->db, 2, 0, 2000, 0, 1000);
    assert_int_equal(eng_db_flush(f->db), 0);
    assert_int_equal(stats(f->db).tracker_compactions, 0);

    write_keys(f->db, 1, 0, 1000, 1, 1000); /* 1,000 >= 500: count trigger */
    wait_compactions(f->db, 1, 5000);
    struct eng_db_stats s = stats(f->db);
    assert_int_equal(s.tracker_compactions, 1);
    assert_int_equal(s.tracker_deletes, 1000);
    assert_true(s.tracker_bytes_read > 0);
    assert_int_equal(s.tombstones_mem[ENG_CF_META], 0); /* the compaction flushed them... */
    assert_int_equal(s.tombstones_sst[ENG_CF_META], 0); /* ...and dropped them */

    write_keys(f->db, 2, 0, 300, 1, 300); /* below 500, but >= 200 and soon 300 ms old */
    double ms = wait_compactions(f->db, 2, 5000);
    assert_true(ms >= 250); /* not before it was old enough (coarse clock: ~4 ms slack) */
    assert_int_equal(stats(f->db).tracker_compactions, 2);
}

/* A range delete counts range_delete_weight deletes and is compacted away with its keys. */
static void test_delete_range(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts to = {
        .trigger_deletes = 1000, .range_delete_weight = 1000, .age_ms = 60000};
    char lo[KEY_MAX], hi[KEY_MAX];
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    write_keys(f->db, 1, 0, 5000, 0, 1000);
    assert_int_equal(eng_db_flush(f->db), 0);
    size_t ll = mkey(lo, 1, 0), hl = mkey(hi, 1, 4000);
    struct eng_batch *b = eng_batch_create();
    eng_batch_delete_range(b, ENG_CF_META, lo, ll, hi, hl);
    assert_int_equal(eng_batch_commit(f->db, b, 0), 0);
    eng_batch_destroy(b);
    wait_compactions(f->db, 1, 5000);
    struct eng_db_stats s = stats(f->db);
    assert_int_equal(s.tracker_deletes, 1000);
    assert_true(s.tracker_bytes_read > 0);
    double ms;
    struct eng_perf p = scan_live(f->db, &ms);
    /* The covered rows are gone from the SSTs: the scan neither skips nor reseeks over them. */
    assert_int_equal(p.internal_delete_skipped, 0);
    assert_true(p.internal_key_skipped <= EFFECT_SCAN);
}

static int bytes_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

/* Every key of keys[0..n) lies in the span the tracker gives for its range. */
static void assert_span_covers(struct eng__tracker *t, uint8_t (*keys)[128], const size_t *kl,
                               int n, struct eng__tracker_span *sp)
{
    assert_int_equal(eng__tracker_span_get(t, ENG_CF_META, keys[0], kl[0], sp), 0);
    for (int i = 0; i < n; i++) {
        assert_true(bytes_cmp(sp->lo, sp->lo_len, keys[i], kl[i]) <= 0);
        assert_true(sp->hi_unbounded || bytes_cmp(keys[i], kl[i], sp->hi, sp->hi_len) < 0);
    }
}

/* The span compacted covers every deleted key, also keys longer than the 64 bytes kept. */
static void test_span_bounds(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts never = {.trigger_deletes = UINT32_MAX, .age_ms = UINT32_MAX};
    struct eng__tracker_span sp;
    uint8_t keys[4][128];
    size_t kl[4];
    open_db(f, ENG_COMPACTION_ROCKSDB, NULL);
    struct eng__tracker *t = eng__tracker_create(f->db, &never);

    /* Short keys, deleted out of order: exactly [smallest, largest + "\0"). */
    for (int i = 0; i < 3; i++)
        kl[i] = mkey((char *)keys[i], 1, (uint32_t)(7 - 3 * i)); /* 7, 4, 1 */
    eng__tracker_begin(t);
    for (int i = 0; i < 3; i++)
        eng__tracker_delete(t, ENG_CF_META, keys[i], kl[i]);
    eng__tracker_end(t);
    assert_span_covers(t, keys, kl, 3, &sp);
    assert_int_equal(sp.deletes, 3);
    assert_memory_equal(sp.lo, keys[2], kl[2]);
    assert_int_equal(sp.lo_len, kl[2]);
    assert_int_equal(sp.hi_len, kl[0] + 1);
    assert_memory_equal(sp.hi, keys[0], kl[0]);
    assert_int_equal(sp.hi[kl[0]], 0);

    /* 100-byte keys whose 64th byte is 0xFF: the successor carries into byte 63. */
    for (int i = 0; i < 3; i++) {
        memset(keys[i], 'k', 100);
        keys[i][0] = 0x05;
        keys[i][63] = 0xFF;
        keys[i][99] = (uint8_t)('a' + i);
        kl[i] = 100;
    }
    eng__tracker_begin(t);
    eng__tracker_delete(t, ENG_CF_META, keys[1], kl[1]);
    eng__tracker_delete(t, ENG_CF_META, keys[2], kl[2]);
    eng__tracker_delete_range(t, ENG_CF_META, keys[0], kl[0], keys[1], kl[1]);
    eng__tracker_end(t);
    assert_span_covers(t, keys, kl, 3, &sp);
    assert_int_equal(sp.lo_len, 64);
    assert_int_equal(sp.hi_unbounded, 0);
    assert_int_equal(sp.hi_len, 63);
    assert_int_equal(sp.hi[62], 'k' + 1);

    /* A key of all 0xFF bytes has no successor of its truncation: no end. */
    memset(keys[0], 0xFF, 100);
    kl[0] = 100;
    eng__tracker_begin(t);
    eng__tracker_delete(t, ENG_CF_META, keys[0], kl[0]);
    eng__tracker_end(t);
    assert_span_covers(t, keys, kl, 1, &sp);
    assert_int_equal(sp.hi_unbounded, 1);

    /* Another prefix, or another CF, is another range. */
    assert_int_equal(eng__tracker_span_get(t, ENG_CF_META, "zz", 2, &sp), MG_ENOTFOUND);
    assert_int_equal(eng__tracker_span_get(t, ENG_CF_INDEX, keys[0], kl[0], &sp), MG_ENOTFOUND);
    eng__tracker_destroy(t);
}

/* The layout owner's classifier: due rows (table 'D') cluster by the top 5 bytes of due-ms. */
static size_t on_range_len(enum eng_cf cf, const void *key, size_t len, void *arg)
{
    const uint8_t *k = key;
    (void)cf;
    (void)arg;
    return len > 9 && k[9] == 'D' ? 10 + 5 : 22;
}

/* Due rows 0x03 · bucket · 'D' · due-ms · key, one per second of due time: with the classifier
 * they are one range and trigger; with the fixed 22-byte prefix each is a range of its own. */
static void test_range_classifier(void **state)
{
    struct fix *f = *state;
    const uint64_t base = (1733000000000ull & ~((1ull << 24) - 1)) + 1000; /* one 2^24 slot */
    for (int use = 1; use >= 0; use--) {
        struct eng_tracker_opts to = {
            .trigger_deletes = 500, .age_ms = 60000, .range_len = use ? on_range_len : NULL};
        open_db(f, ENG_COMPACTION_LOCALITY, &to);
        struct eng_batch *b = eng_batch_create();
        for (uint32_t i = 0; i < 1000; i++) {
            char k[KEY_MAX];
            uint64_t due = base + i * 1000ull;
            size_t kl = mkey(k, 1, i); /* the 0x03 · bucket prefix, then the due row's own */
            k[9] = 'D';
            for (int j = 0; j < 8; j++)
                k[10 + j] = (char)(due >> (56 - 8 * j));
            eng_batch_delete(b, ENG_CF_META, k, kl);
        }
        assert_int_equal(eng_batch_commit(f->db, b, 0), 0);
        eng_batch_destroy(b);
        struct eng_db_stats s = stats(f->db);
        assert_int_equal(s.tracker_ranges, use ? 1 : 1000);
        if (use) {
            wait_compactions(f->db, 1, 5000);
        } else {
            usleep(300 * 1000);
            assert_int_equal(stats(f->db).tracker_compactions, 0);
        }
    }
}

/* A few deletes scattered over many ranges never trigger, and the sweep forgets them. */
static void test_scattered_few(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts to = {
        .trigger_deletes = 500, .age_ms = 100, .age_min_deletes = 50, .window_ms = 400};
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    struct eng_batch *b = eng_batch_create();
    for (uint64_t bucket = 1; bucket <= 200; bucket++) {
        char k[KEY_MAX];
        for (uint32_t i = 0; i < 5; i++) {
            size_t kl = mkey(k, bucket, i * 1000);
            eng_batch_delete(b, ENG_CF_META, k, kl);
        }
    }
    assert_int_equal(eng_batch_commit(f->db, b, 0), 0);
    eng_batch_destroy(b);
    struct eng_db_stats s = stats(f->db);
    assert_int_equal(s.tracker_deletes, 1000);
    assert_int_equal(s.tracker_ranges, 200);
    assert_int_equal(s.tracker_deletes_pending, 1000);
    usleep(1000 * 1000); /* age trigger long past, window expired twice */
    s = stats(f->db);
    assert_int_equal(s.tracker_compactions, 0);
    assert_int_equal(s.tracker_ranges, 0);
    assert_int_equal(s.tracker_deletes_pending, 0);
}

/* The range table is bounded: deletes in ranges beyond ranges_max are counted as untracked. */
static void test_ranges_bounded(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts to = {.ranges_max = 16, .window_ms = 60000, .age_ms = 60000};
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    struct eng_batch *b = eng_batch_create();
    char k[KEY_MAX];
    for (uint64_t bucket = 1; bucket <= 40; bucket++) {
        size_t kl = mkey(k, bucket, 0);
        eng_batch_delete(b, ENG_CF_META, k, kl);
    }
    eng_batch_delete_range(b, ENG_CF_INDEX, "a", 1, "b", 1); /* a 17th range, also untracked */
    assert_int_equal(eng_batch_commit(f->db, b, 0), 0);
    eng_batch_destroy(b);
    struct eng_db_stats s = stats(f->db);
    assert_int_equal(s.tracker_ranges, 16);
    assert_int_equal(s.tracker_deletes, 16);
    assert_int_equal(s.tracker_deletes_untracked, 24 + 256 /* range_delete_weight */);
}

#define RATE_RANGES 8
#define RATE_PER_SEC 4

/* compactions_per_sec_max holds: 8 ranges due at once take >= 7/4 s to compact. */
static void test_rate_count(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts to = {
        .trigger_deletes = 100, .age_ms = 60000, .compactions_per_sec_max = RATE_PER_SEC};
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    for (uint64_t bucket = 1; bucket <= RATE_RANGES; bucket++)
        write_keys(f->db, bucket, 0, 400, 0, 400);
    assert_int_equal(eng_db_flush(f->db), 0);
    double t0 = now_ms();
    for (uint64_t bucket = 1; bucket <= RATE_RANGES; bucket++)
        write_keys(f->db, bucket, 0, 200, 1, 200);
    wait_compactions(f->db, RATE_RANGES, 10000);
    double ms = now_ms() - t0;
    fprintf(stderr, "# rate: %d compactions in %.0f ms (bound %d/s)\n", RATE_RANGES, ms,
            RATE_PER_SEC);
    assert_true(ms >= (RATE_RANGES - 1) * 1000.0 / RATE_PER_SEC - 20);
    assert_int_equal(stats(f->db).tracker_compactions, RATE_RANGES);
}

/* bytes_per_sec_max holds: after a compaction that wrote B bytes the next one waits B/rate. */
static void test_rate_bytes(void **state)
{
    struct fix *f = *state;
    const uint64_t bps = 256 << 10; /* 256 KiB/s */
    struct eng_tracker_opts to = {.trigger_deletes = 100,
                                  .age_ms = 60000,
                                  .compactions_per_sec_max = 1000,
                                  .bytes_per_sec_max = bps};
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    write_keys(f->db, 1, 0, 4000, 0, 1000);
    write_keys(f->db, 2, 0, 4000, 0, 1000);
    assert_int_equal(eng_db_flush(f->db), 0);
    write_keys(f->db, 1, 0, 200, 1, 200);
    wait_compactions(f->db, 1, 5000);
    double t1 = now_ms(); /* >= the end of the first compaction */
    uint64_t b1 = stats(f->db).tracker_bytes_written;
    assert_true(b1 > 16 << 10); /* 3,800 live rows rewritten: the pause is long enough to see */
    write_keys(f->db, 2, 0, 200, 1, 200);
    wait_compactions(f->db, 2, 10000);
    double ms = now_ms() - t1;
    double bound = (double)b1 * 1000.0 / (double)bps;
    fprintf(stderr,
            "# rate: first compaction wrote %llu bytes, second ran %.0f ms later (bound "
            "%.0f ms)\n",
            (unsigned long long)b1, ms, bound);
    assert_true(ms >= bound - POLL_MS - 5);
}

/* Count the internal steps of a scan over the first EFFECT_SCAN live keys of bucket 1. */
static struct eng_perf scan_live(struct eng_db *db, double *ms)
{
    char lo[KEY_MAX], hi[KEY_MAX];
    struct eng_perf p;
    mkey(lo, 1, 0);
    mkey(hi, 2, 0);
    double t0 = now_ms();
    eng_perf_begin();
    struct eng_iter *it = eng_iter_create(db, ENG_CF_META, lo, 18, hi, 18);
    int n = 0;
    for (; eng_iter_valid(it) && n < EFFECT_SCAN; eng_iter_next(it))
        n++;
    assert_int_equal(eng_iter_status(it), 0);
    eng_iter_destroy(it);
    eng_perf_end(&p);
    *ms = now_ms() - t0;
    assert_int_equal(n, EFFECT_SCAN);
    return p;
}

/* Load 200,000 keys, flush, delete the oldest 75% in 1,000-key batches (WAL off); return the
 * perf counters of the 1,000-key scan that follows (after the tracker, if any, is done). */
static struct eng_perf effect_run(struct fix *f, enum eng_compaction mode, double *ms)
{
    open_db(f, mode, NULL); /* the default knobs */
    write_keys(f->db, 1, 0, EFFECT_KEYS, 0, 1000);
    assert_int_equal(eng_db_flush(f->db), 0);
    write_keys(f->db, 1, 0, EFFECT_DELETED, 1, 1000);
    if (mode == ENG_COMPACTION_LOCALITY) {
        /* Issue 8, done-when 6: LIST is fast again within 10 s of the deletes. */
        double ms_done = wait_compactions(f->db, 1, 10000);
        fprintf(stderr, "# locality: tracker done %.0f ms after the last delete\n", ms_done);
    } else {
        usleep(1000 * 1000); /* give stock compaction its chance */
    }
    struct eng_db_stats s = stats(f->db);
    struct eng_perf p = scan_live(f->db, ms);
    fprintf(stderr,
            "# %s: scan of %d live keys: %llu deletes skipped, %llu keys skipped, %.2f ms; "
            "tombstones mem %llu sst %llu; tracker: %llu compactions, read %llu B, wrote %llu B\n",
            mode == ENG_COMPACTION_LOCALITY ? "locality" : "rocksdb", EFFECT_SCAN,
            (unsigned long long)p.internal_delete_skipped,
            (unsigned long long)p.internal_key_skipped, *ms,
            (unsigned long long)s.tombstones_mem[ENG_CF_META],
            (unsigned long long)s.tombstones_sst[ENG_CF_META],
            (unsigned long long)s.tracker_compactions, (unsigned long long)s.tracker_bytes_read,
            (unsigned long long)s.tracker_bytes_written);
    assert_int_equal(s.wal, 0);
    assert_int_equal(s.compaction, mode);
    if (mode == ENG_COMPACTION_ROCKSDB) {
        assert_int_equal(s.tombstones_mem[ENG_CF_META] + s.tombstones_sst[ENG_CF_META],
                         EFFECT_DELETED);
        assert_int_equal(s.tracker_deletes, 0);
    }
    return p;
}

static void test_effect_locality(void **state)
{
    double ms;
    struct eng_perf p = effect_run(*state, ENG_COMPACTION_LOCALITY, &ms);
    assert_true(p.internal_delete_skipped < EFFECT_SCAN);
}

static void test_effect_rocksdb(void **state)
{
    double ms;
    struct eng_perf p = effect_run(*state, ENG_COMPACTION_ROCKSDB, &ms);
    assert_true(p.internal_delete_skipped >= EFFECT_DELETED);
}

/* Closing while the tracker compacts returns promptly and loses nothing (the deletes and the
 * rows left are all there after reopen). */
static void test_close_busy(void **state)
{
    struct fix *f = *state;
    struct eng_tracker_opts to = {.trigger_deletes = 1000};
    open_db(f, ENG_COMPACTION_LOCALITY, &to);
    write_keys(f->db, 1, 0, EFFECT_KEYS, 0, 1000);
    assert_int_equal(eng_db_flush(f->db), 0);
    write_keys(f->db, 1, 0, EFFECT_DELETED, 1, 10000);
    double t0 = now_ms();
    eng_db_close(f->db);
    f->db = NULL;
    fprintf(stderr, "# close with a compaction due or running: %.1f ms\n", now_ms() - t0);
    open_db(f, ENG_COMPACTION_ROCKSDB, NULL);
    char lo[KEY_MAX], want[KEY_MAX];
    mkey(lo, 1, 0);
    size_t wl = mkey(want, 1, EFFECT_DELETED), kl;
    struct eng_iter *it = eng_iter_create(f->db, ENG_CF_META, lo, 18, NULL, 0);
    assert_true(eng_iter_valid(it));
    const char *k = eng_iter_key(it, &kl);
    assert_int_equal(kl, wl);
    assert_memory_equal(k, want, wl);
    int n = 0;
    for (; eng_iter_valid(it); eng_iter_next(it))
        n++;
    assert_int_equal(n, EFFECT_KEYS - EFFECT_DELETED);
    eng_iter_destroy(it);
}

/* Every mode opens, and stats say which; the collector mode is today's behaviour. */
static void test_modes_open(void **state)
{
    struct fix *f = *state;
    enum eng_compaction c = ENG_COMPACTION_ROCKSDB;
    assert_int_equal(eng_compaction_parse("rocksdb+collector", 17, &c), 0);
    assert_int_equal(c, ENG_COMPACTION_ROCKSDB_COLLECTOR);
    assert_int_equal(eng_compaction_parse("locality", 8, &c), 0);
    assert_int_equal(c, ENG_COMPACTION_LOCALITY);
    assert_int_equal(eng_compaction_parse("rocksdb+", 8, &c), MG_EINVALIDARGUMENT);
    assert_int_equal(eng_compaction_parse("rocksdb", 7, &c), 0);
    assert_string_equal(eng_compaction_name(c), "rocksdb");
    for (int m = ENG_COMPACTION_LOCALITY; m <= ENG_COMPACTION_ROCKSDB_COLLECTOR; m++) {
        open_db(f, (enum eng_compaction)m, NULL);
        write_keys(f->db, 1, 0, 10, 1, 10);
        struct eng_db_stats s = stats(f->db);
        assert_int_equal(s.compaction, m);
        assert_int_equal(s.tracker_deletes, m == ENG_COMPACTION_LOCALITY ? 10 : 0);
        assert_int_equal(s.tombstones_mem[ENG_CF_META], 10);
        assert_int_equal(s.tombstones_mem[ENG_CF_INDEX], 0);
        assert_int_equal(eng_db_flush(f->db), 0);
        s = stats(f->db);
        assert_int_equal(s.tombstones_mem[ENG_CF_META], 0);
        /* The first flush leaves one L0 file with the 10; later ones may be compacted away
         * (nothing is beneath them) by RocksDB's own L0 compaction. */
        if (m == ENG_COMPACTION_LOCALITY)
            assert_int_equal(s.tombstones_sst[ENG_CF_META], 10);
        assert_true(s.tombstones_sst[ENG_CF_META] <= 10u * (unsigned)(m + 1));
    }
}

#define OVERHEAD_BATCH 1000
#define OVERHEAD_ROUNDS 200

/* Per-commit cost of the tracker on 1,000-delete batches (printed, not asserted: it is time).
 * Two stores side by side, one per mode, take turns so both see the same machine load. */
static void test_overhead(void **state)
{
    struct fix *f = *state;
    struct fix g = {.dir = test_tmpdir()};
    struct fix *fx[2] = {f, &g};
    double us[2] = {0, 0};
    struct eng_tracker_opts never = {.trigger_deletes = UINT32_MAX, .age_ms = UINT32_MAX};
    open_db(f, ENG_COMPACTION_ROCKSDB, &never);
    open_db(&g, ENG_COMPACTION_LOCALITY, &never);
    for (uint32_t r = 0; r < OVERHEAD_ROUNDS; r++) {
        for (int m = 0; m < 2; m++) {
            double t0 = cpu_ms();
            write_keys(fx[m]->db, 1, r * OVERHEAD_BATCH, (r + 1) * OVERHEAD_BATCH, 1,
                       OVERHEAD_BATCH);
            us[m] += (cpu_ms() - t0) * 1e3 / OVERHEAD_ROUNDS;
        }
    }
    assert_int_equal(stats(g.db).tracker_deletes, (uint64_t)OVERHEAD_ROUNDS * OVERHEAD_BATCH);
    eng_db_close(g.db);
    test_tmpdir_remove(g.dir);
    /* The tracker alone, through the hooks eng_batch_commit calls. */
    struct eng__tracker *t = eng__tracker_create(f->db, &never);
    char keys[OVERHEAD_BATCH][KEY_MAX];
    size_t kl[OVERHEAD_BATCH];
    for (uint32_t i = 0; i < OVERHEAD_BATCH; i++)
        kl[i] = mkey(keys[i], 7, i);
    double t0 = cpu_ms();
    for (uint32_t r = 0; r < OVERHEAD_ROUNDS; r++) {
        eng__tracker_begin(t);
        for (uint32_t i = 0; i < OVERHEAD_BATCH; i++)
            eng__tracker_delete(t, ENG_CF_META, keys[i], kl[i]);
        eng__tracker_end(t);
    }
    double tracker_us = (cpu_ms() - t0) * 1e3 / OVERHEAD_ROUNDS;
    struct eng_db_stats s;
    memset(&s, 0, sizeof s);
    eng__tracker_stats(t, &s);
    eng__tracker_destroy(t);
    fprintf(stderr,
            "# overhead (thread CPU time): 1,000-delete commit %.0f us (rocksdb) vs %.0f us "
            "(locality); tracker alone %.1f us per batch (%.1f ns per delete)\n",
            us[0], us[1], tracker_us, tracker_us * 1e3 / OVERHEAD_BATCH);
    assert_int_equal(s.tracker_deletes, (uint64_t)OVERHEAD_ROUNDS * OVERHEAD_BATCH);
    assert_int_equal(s.tracker_ranges, 1);
}

int test_tracker_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dense_fires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_span_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_classifier, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scattered_few, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_effect_locality, setup, teardown),
        cmocka_unit_test_setup_teardown(test_effect_rocksdb, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overhead, setup, teardown),
    };
    return cmocka_run_group_tests_name("engine/tracker", tests, NULL, NULL);
}
