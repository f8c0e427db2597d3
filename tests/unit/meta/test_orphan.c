/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/orphan.c: the orphan collector and the retire intents, on a real store
 * (RocksDB + blob store) in a temp dir. The collector thread is off
 * (MG_ORPHAN_PERIOD_MS=0) and the tests run passes by hand, passing a later
 * "now" instead of sleeping through the grace period; the store keeps its
 * default free grace, so retires go through the reaper as in the server.
 */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/rados.h"
#include "meta/internal.h"
#include "meta/orphan.h"

#define GRACE_MS 1000
#define BLOB_BYTES (100u * 1024u) /* above the inline threshold: a blob */
#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})
#define BKT S("bkt")

struct ofx {
    char dir[64];
    struct meta_store *ms;
    struct mg_arena a;
};

static void ofx_open(struct ofx *f)
{
    struct meta_opts o = {.data_dir = f->dir, .inline_max_bytes = 64};
    char errmsg[256];
    int rv = meta_store_open(&o, &f->ms, errmsg);
    if (rv != 0)
        fail_msg("meta_store_open: %s %s", mg_err_name(rv), errmsg);
}

static int setup(void **state)
{
    setenv("MG_ORPHAN_PERIOD_MS", "0", 1);
    setenv("MG_ORPHAN_GRACE_MS", "1000", 1);
    struct ofx *f = mg_calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/test_orphan.XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    ofx_open(f);
    mg_arena_init(&f->a);
    assert_int_equal(meta_bucket_create(f->ms, BKT, S("alice"), META_ACL_PRIVATE), 0);
    *state = f;
    return 0;
}

static int on_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int teardown(void **state)
{
    struct ofx *f = *state;
    meta_store_close(f->ms);
    mg_arena_close(&f->a);
    nftw(f->dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
    mg_free(f);
    return 0;
}

/* A blob of n bytes that no metadata references (a PUT that died before its commit). */
static void write_blob(struct ofx *f, size_t n, uint8_t fill, struct meta_data *d)
{
    char *buf = mg_malloc(n);
    memset(buf, fill, n);
    struct meta_data_writer *w;
    assert_int_equal(meta_data_writer_create(f->ms, n, &w), 0);
    assert_int_equal(meta_data_writer_append(w, buf, n), 0);
    assert_int_equal(meta_data_writer_finish(w, &f->a, d), 0);
    assert_int_equal(d->nextents, 1);
    mg_free(buf);
}

static int put_data(struct ofx *f, struct mg_str key, const struct meta_data *d)
{
    struct meta_object o = {0};
    o.key = key;
    o.size = d->size;
    o.etag = S("0123456789abcdef0123456789abcdef");
    o.owner = S("alice");
    o.content_type = S("application/octet-stream");
    o.data = *d;
    return meta_object_put(f->ms, BKT, &o, NULL);
}

static int count_live(void *ctx, const struct eng_blob_ref *ref)
{
    (void)ref;
    (*(size_t *)ctx)++;
    return 0;
}

static size_t live_blobs(struct ofx *f)
{
    for (int i = 0; i < 500 && eng_blob_retire_backlog(f->ms->bs) > 0; i++)
        usleep(10000); /* the reaper frees in its own time */
    size_t n = 0;
    assert_int_equal(eng_blob_foreach(f->ms->bs, count_live, &n), 0);
    return n;
}

static size_t intent_rows(struct ofx *f)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_retire_intents_range(&lo, &hi);
    struct eng_iter *it = eng_iter_create(f->ms->db, ENG_CF_META, lo.base, lo.len, hi.base,
                                          hi.len);
    size_t n = 0;
    for (; eng_iter_valid(it); eng_iter_next(it))
        n++;
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return n;
}

/* An unreferenced blob is found, kept through the grace, then retired and freed; referenced
 * blobs (an object's, a part's) and inline objects are left alone. */
static void test_orphan_reclaimed(void **state)
{
    struct ofx *f = *state;
    struct meta_data kept, orphan;
    write_blob(f, BLOB_BYTES, 'k', &kept);
    assert_int_equal(put_data(f, S("kept"), &kept), 0);
    struct mg_str upload;
    struct meta_object tmpl = {.key = S("mp"), .owner = S("alice")};
    assert_int_equal(meta_mpu_create(f->ms, BKT, &tmpl, &f->a, &upload), 0);
    struct meta_part part = {.number = 1, .etag = S("0123456789abcdef0123456789abcdef")};
    write_blob(f, BLOB_BYTES, 'p', &part.data);
    part.size = part.data.size;
    assert_int_equal(meta_mpu_put_part(f->ms, BKT, S("mp"), upload, &part), 0);
    write_blob(f, BLOB_BYTES, 'o', &orphan);
    assert_int_equal(live_blobs(f), 3);

    int64_t t0 = meta_orphan_now_ms();
    assert_int_equal(meta_orphan_pass(f->ms, t0), 0);
    struct meta_orphan_stats st;
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.blobs_seen, 3);
    assert_int_equal(st.orphans_found, 1);
    assert_int_equal(st.orphan_bytes, BLOB_BYTES);
    assert_int_equal(st.orphans_freed, 0); /* first seen now: inside the grace */
    assert_int_equal(meta_orphan_pass(f->ms, t0 + GRACE_MS - 1), 0);
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.orphans_freed, 0);

    assert_int_equal(meta_orphan_pass(f->ms, t0 + GRACE_MS), 0);
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.orphans_freed, 1);
    assert_int_equal(st.orphan_bytes_freed, BLOB_BYTES);
    assert_int_equal(live_blobs(f), 2);

    /* A later pass finds nothing more, and the kept object reads back. */
    assert_int_equal(meta_orphan_pass(f->ms, t0 + 10 * GRACE_MS), 0);
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.orphans_found, 0);
    assert_int_equal(st.orphans_freed, 1);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("kept"), &f->a, &o), 0);
    char buf[16];
    assert_int_equal(meta_data_read(f->ms, &o.data, 0, buf, sizeof buf), 0);
    assert_int_equal(buf[0], 'k');
}

/* The blob of a PUT that reaches the meta thread after the collector condemned it: the PUT
 * fails and nothing names the freed blob. */
static void test_put_of_collected_blob_refused(void **state)
{
    struct ofx *f = *state;
    struct meta_data late;
    write_blob(f, BLOB_BYTES, 'l', &late);
    int64_t t0 = meta_orphan_now_ms();
    assert_int_equal(meta_orphan_pass(f->ms, t0), 0);
    assert_int_equal(meta_orphan_pass(f->ms, t0 + GRACE_MS), 0);
    assert_int_equal(live_blobs(f), 0);

    assert_int_equal(put_data(f, S("late"), &late), MG_EIO);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("late"), &f->a, &o), MG_ENOSUCHKEY);
    struct meta_orphan_stats st;
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.puts_refused, 1);
    assert_int_equal(st.orphans_freed, 1);
}

/* A PUT whose body runs after the pass's last index walk but before DECIDE (the window the
 * grace normally keeps empty): it is claimed and spared, and its object reads back. */
static struct ofx *g_race_fx;
static struct meta_data g_race_data;
static int g_race_rv = -1;

static void put_in_window(struct meta_store *ms)
{
    assert_ptr_equal(ms, g_race_fx->ms);
    g_race_rv = put_data(g_race_fx, S("raced"), &g_race_data);
}

static void test_put_between_walk_and_decide_spared(void **state)
{
    struct ofx *f = *state;
    write_blob(f, BLOB_BYTES, 'w', &g_race_data);
    int64_t t0 = meta_orphan_now_ms();
    assert_int_equal(meta_orphan_pass(f->ms, t0), 0);
    g_race_fx = f;
    meta__orphan_test_before_decide = put_in_window;
    int rv = meta_orphan_pass(f->ms, t0 + GRACE_MS);
    meta__orphan_test_before_decide = NULL;
    assert_int_equal(rv, 0);
    assert_int_equal(g_race_rv, 0);
    struct meta_orphan_stats st;
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.orphans_freed, 0);
    assert_int_equal(live_blobs(f), 1);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("raced"), &f->a, &o), 0);
    char buf[16];
    assert_int_equal(meta_data_read(f->ms, &o.data, 0, buf, sizeof buf), 0);
    assert_int_equal(buf[0], 'w');
    /* Referenced now: later passes leave it alone. */
    assert_int_equal(meta_orphan_pass(f->ms, t0 + 10 * GRACE_MS), 0);
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.orphans_found, 0);
    assert_int_equal(live_blobs(f), 1);
}

/* A delete writes the retire intent with its rows; once the reaper freed the blob, a pass
 * deletes the intent. */
static void test_intent_written_and_cleared(void **state)
{
    struct ofx *f = *state;
    struct meta_data d;
    write_blob(f, BLOB_BYTES, 'd', &d);
    assert_int_equal(put_data(f, S("gone"), &d), 0);
    assert_int_equal(intent_rows(f), 0);
    int existed = 0;
    assert_int_equal(meta_object_delete(f->ms, BKT, S("gone"), &existed), 0);
    assert_true(existed);
    assert_int_equal(intent_rows(f), 1);
    assert_int_equal(live_blobs(f), 0); /* no reader pins it: the reaper freed it */
    usleep(5000); /* the intent is older than the pass's walk */
    assert_int_equal(meta_orphan_pass(f->ms, meta_orphan_now_ms()), 0);
    assert_int_equal(intent_rows(f), 0);
    struct meta_orphan_stats st;
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.intents_cleared, 1);
    assert_int_equal(st.intents_pending, 0);
    assert_int_equal(st.intents_replayed, 0); /* the blob was gone: nothing to replay */
}

/* A crash after the delete's entry was durable and before the reaper freed its blob: the
 * RocksDB holds the intent, nothing replays the entry. The first pass of the next run retires
 * the blob from the intent alone (the orphan grace is far away), and the next pass clears the
 * intent. */
static void test_intent_replayed_after_crash(void **state)
{
    struct ofx *f = *state;
    struct meta_data d;
    write_blob(f, BLOB_BYTES, 'r', &d);
    struct eng_batch *b = eng_batch_create();
    meta__orphan_intent_put(b, &d.extents[0].ref);
    assert_int_equal(eng_batch_commit(f->ms->db, b, 0), 0);
    eng_batch_destroy(b);
    assert_int_equal(eng_db_flush(f->ms->db), 0);
    meta_store_close(f->ms); /* the blob was never retired in this run: it stays */
    setenv("MG_ORPHAN_GRACE_MS", "3600000", 1);
    ofx_open(f);
    setenv("MG_ORPHAN_GRACE_MS", "1000", 1);
    assert_int_equal(live_blobs(f), 1);
    assert_int_equal(intent_rows(f), 1);

    assert_int_equal(meta_orphan_pass(f->ms, meta_orphan_now_ms()), 0);
    struct meta_orphan_stats st;
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.intents_replayed, 1);
    assert_int_equal(st.orphans_freed, 0);
    assert_int_equal(live_blobs(f), 0);

    assert_int_equal(meta_orphan_pass(f->ms, meta_orphan_now_ms()), 0);
    assert_int_equal(intent_rows(f), 0);
    meta_orphan_stats_get(f->ms, &st);
    assert_int_equal(st.intents_replayed, 1); /* only the first pass of a run replays */
    assert_int_equal(st.intents_cleared, 1);
}

/* The key helpers: the index decoder reads what the builder wrote and refuses other rows;
 * intents sort inside their node-local range. */
static void test_keys(void **state)
{
    (void)state;
    struct eng_blob_ref r = {.segment = 0x1122334455667788ull, .offset = 4160, .length = 9};
    struct mg_buf k, lo, hi;
    mg_buf_init(&k);
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_blob_index(&k, 42, &r);
    uint64_t id, seg, off;
    assert_int_equal(meta__key_blob_index_decode(k.base, k.len, &id, &seg, &off), 0);
    assert_int_equal(id, 42);
    assert_true(seg == r.segment);
    assert_int_equal(off, 4160);
    assert_int_equal(meta__key_blob_index_decode(k.base, k.len - 1, &id, &seg, &off),
                     MG_ECORRUPT);
    k.len = 0;
    meta__key_time_index(&k, 42, 7, S("name-name-name-n"));
    assert_int_equal(meta__key_blob_index_decode(k.base, k.len, &id, &seg, &off), MG_ECORRUPT);
    k.len = 0;
    meta__key_retire_intent(&k, &r);
    meta__key_retire_intents_range(&lo, &hi);
    assert_int_equal(k.len, 18);
    assert_true(memcmp(k.base, lo.base, lo.len) == 0);
    assert_true(memcmp(k.base, hi.base, hi.len) < 0);
    mg_buf_close(&k);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
}

/* A cluster node's writer-id rows (0x01 'W' · id): the decoder reads what the builder wrote,
 * refuses other rows, the keys sort by id, and a recorded row is in the store. */
static void test_writer_rows(void **state)
{
    struct ofx *f = *state;
    uint8_t k1[META_ORPHAN_WRITER_KEY_LEN], k2[META_ORPHAN_WRITER_KEY_LEN];
    meta__orphan_writer_key(k1, 255);
    meta__orphan_writer_key(k2, 256);
    assert_true(memcmp(k1, k2, sizeof k1) < 0); /* big-endian: ascending ids, ascending keys */
    uint64_t id = 0;
    assert_int_equal(meta__orphan_writer_decode(k2, sizeof k2, &id), 0);
    assert_int_equal(id, 256);
    assert_int_equal(meta__orphan_writer_decode(k2, sizeof k2 - 1, &id), MG_ECORRUPT);
    struct eng_blob_ref r = {.segment = 256, .offset = 1};
    struct mg_buf k;
    mg_buf_init(&k);
    meta__key_retire_intent(&k, &r); /* 0x01 'R': another node-local row */
    assert_int_equal(meta__orphan_writer_decode(k.base, META_ORPHAN_WRITER_KEY_LEN, &id),
                     MG_ECORRUPT);
    mg_buf_close(&k);
    assert_int_equal(meta__orphan_writer_record(f->ms, 0x1122334455667788ull), 0);
    uint8_t lo[2] = {META_K_SYS, META_SYS_WRITER}, hi[2] = {META_K_SYS, META_SYS_WRITER + 1};
    struct eng_iter *it = eng_iter_create(f->ms->db, ENG_CF_META, lo, 2, hi, 2);
    size_t n = 0;
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *key = eng_iter_key(it, &kl);
        assert_int_equal(meta__orphan_writer_decode(key, kl, &id), 0);
        assert_true(id == 0x1122334455667788ull);
        n++;
    }
    eng_iter_destroy(it);
    assert_int_equal(n, 1);
}

/* The segment filter of eng_rados_foreach_segments: membership in an ascending id list. */
static void test_segment_filter(void **state)
{
    (void)state;
    const uint64_t ids[] = {3, 9, 10, 4000000000ull};
    assert_false(eng__rados_seg_in(ids, 0, 3));
    assert_false(eng__rados_seg_in(NULL, 0, 3));
    for (size_t i = 0; i < 4; i++)
        assert_true(eng__rados_seg_in(ids, 4, ids[i]));
    const uint64_t out[] = {0, 1, 2, 4, 8, 11, 3999999999ull, 4000000001ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        assert_false(eng__rados_seg_in(ids, 4, out[i]));
    assert_true(eng__rados_seg_in(ids, 1, 3));
    assert_false(eng__rados_seg_in(ids, 1, 9));
}

int main(void)
{
    mg_log_set_level("warn");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_orphan_reclaimed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_of_collected_blob_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_put_between_walk_and_decide_spared, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_intent_written_and_cleared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_intent_replayed_after_crash, setup, teardown),
        cmocka_unit_test(test_keys),
        cmocka_unit_test_setup_teardown(test_writer_rows, setup, teardown),
        cmocka_unit_test(test_segment_filter),
    };
    return cmocka_run_group_tests_name("orphan", tests, NULL, NULL);
}
