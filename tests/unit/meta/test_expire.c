/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/expire.c: the lifecycle due-time index (rows written and removed with
 * put, overwrite, delete, tag change), expire-batch (only what is due, never
 * an entry rewritten after it was indexed), the range-delete guard (a PUT
 * racing a range expiry survives, in both submission orders; with
 * MG_TEST_NO_GUARD=1 in the environment the guard is off and the first order
 * loses the PUT), range and point deletes giving the same visible result, the
 * re-index after a rules change, and the cost of the index on a 1 KiB put.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "meta/expire.h"
#include "tests/unit/meta/test_meta.h"

#define XML_LOGS_1DAY                                                                        \
    "<LifecycleConfiguration><Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter>"   \
    "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"                 \
    "</LifecycleConfiguration>"
#define XML_TAG_1DAY                                                                         \
    "<LifecycleConfiguration><Rule><ID>tagged</ID><Filter><Tag><Key>k</Key><Value>v</Value>" \
    "</Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"  \
    "</LifecycleConfiguration>"
#define XML_LOGS_3DAYS                                                                       \
    "<LifecycleConfiguration><Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter>"   \
    "<Status>Enabled</Status><Expiration><Days>3</Days></Expiration></Rule>"                 \
    "</LifecycleConfiguration>"

static const char DATA[] = "0123456789abcdef";

static void set_rules(struct fx *f, struct mg_str bucket, const char *xml)
{
    struct meta_bucket v = {.lifecycle = {xml, xml != NULL ? strlen(xml) : 0}};
    assert_int_equal(meta_bucket_update(f->ms, bucket, META_BUCKET_SET_LIFECYCLE, &v), 0);
}

static uint64_t bucket_id(struct fx *f, struct mg_str bucket)
{
    struct meta_bucket b;
    assert_int_equal(meta_bucket_get(f->ms, bucket, &f->a, &b), 0);
    return b.id;
}

/* An iterator over one table of the bucket (the bounds are copied by the engine). */
static struct eng_iter *table_iter(struct fx *f, uint64_t id, char table)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_table_range(id, table, &lo, &hi);
    struct eng_iter *it = eng_iter_create(f->ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return it;
}

/* Due rows of bucket for key (all keys when key is NULL); *due gets the first (earliest). */
static size_t due_rows(struct fx *f, uint64_t id, const char *key, int64_t *due)
{
    struct eng_iter *it = table_iter(f, id, META_TBL_DUE);
    size_t n = 0;
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        uint64_t bid;
        int64_t d;
        struct mg_str name;
        assert_int_equal(meta__key_due_decode(k, kl, &bid, &d, &name), 0);
        if (key != NULL && (name.len != strlen(key) || memcmp(name.base, key, name.len) != 0))
            continue;
        if (due != NULL && n == 0)
            *due = d; /* the earliest */
        n++;
    }
    eng_iter_destroy(it);
    return n;
}

/* Rows of one table of the bucket. */
static size_t table_rows(struct fx *f, uint64_t id, char table)
{
    struct eng_iter *it = table_iter(f, id, table);
    size_t n = 0;
    for (; eng_iter_valid(it); eng_iter_next(it))
        n++;
    eng_iter_destroy(it);
    return n;
}

static int exists(struct fx *f, struct mg_str bucket, const char *key)
{
    struct meta_object o;
    int rv = meta_object_get(f->ms, bucket, str_of(key, strlen(key)), &f->a, &o);
    assert_true(rv == 0 || rv == MG_ENOSUCHKEY);
    return rv == 0;
}

static struct meta_object get(struct fx *f, const char *key)
{
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, str_of(key, strlen(key)), &f->a, &o), 0);
    return o;
}

static void put(struct fx *f, struct mg_str bucket, const char *key)
{
    assert_int_equal(fx_put(f, bucket, str_of(key, strlen(key)), DATA, sizeof(DATA) - 1, NULL), 0);
}

/* Every due row of the bucket up to now_ms, as the scheduler reads them. */
static size_t scan(struct fx *f, uint64_t id, int64_t now_ms, struct meta_expire_item *items,
                   size_t max, uint64_t *epoch)
{
    size_t n;
    int64_t oldest;
    assert_int_equal(meta_lc_due_scan(f->ms, id, now_ms, max, &f->a, items, &n, &oldest, epoch),
                     0);
    return n;
}

static void test_due_rows(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    set_rules(f, BKT, XML_LOGS_1DAY);
    uint64_t id = bucket_id(f, BKT);
    put(f, BKT, "logs/a");
    put(f, BKT, "other/b");
    int64_t due = 0;
    struct meta_object o = get(f, "logs/a");
    assert_int_equal(due_rows(f, id, "logs/a", &due), 1);
    assert_true(o.lc_due_ms == due && due >= o.mtime_ms + 1000 && due <= o.mtime_ms + 2000);
    assert_int_equal(due % 1000, 0); /* rounded up to a "midnight" (day_seconds = 1) */
    assert_int_equal(get(f, "other/b").lc_due_ms, 0); /* no rule: no row, no TLV */
    assert_int_equal(due_rows(f, id, NULL, NULL), 1);

    /* overwrite after the due unit moved on: the old row goes, the new one comes */
    usleep(1100 * 1000);
    put(f, BKT, "logs/a");
    int64_t due2 = 0;
    assert_int_equal(due_rows(f, id, "logs/a", &due2), 1);
    assert_true(due2 > due);
    assert_int_equal(get(f, "logs/a").lc_due_ms, due2);

    int existed = 0;
    assert_int_equal(meta_object_delete(f->ms, BKT, S("logs/a"), &existed), 0);
    assert_true(existed);
    assert_int_equal(due_rows(f, id, NULL, NULL), 0);
}

static void test_due_rows_tags(void **state)
{
    struct fx *f = *state;
    set_rules(f, BKT, XML_TAG_1DAY);
    uint64_t id = bucket_id(f, BKT);
    put(f, BKT, "x");
    assert_int_equal(due_rows(f, id, NULL, NULL), 0);
    struct meta_kv tags[1] = {{S("k"), S("v")}};
    struct meta_object v = {.tags = tags, .ntags = 1};
    assert_int_equal(meta_object_update(f->ms, BKT, S("x"), META_OBJECT_SET_TAGS, &v), 0);
    assert_int_equal(due_rows(f, id, "x", NULL), 1);
    assert_true(get(f, "x").lc_due_ms != 0);
    tags[0].v = S("other");
    assert_int_equal(meta_object_update(f->ms, BKT, S("x"), META_OBJECT_SET_TAGS, &v), 0);
    assert_int_equal(due_rows(f, id, NULL, NULL), 0);
    assert_int_equal(get(f, "x").lc_due_ms, 0);
    /* the acl alone leaves the row where it is */
    tags[0].v = S("v");
    assert_int_equal(meta_object_update(f->ms, BKT, S("x"), META_OBJECT_SET_TAGS, &v), 0);
    v.acl = META_ACL_PUBLIC_READ;
    assert_int_equal(meta_object_update(f->ms, BKT, S("x"), META_OBJECT_SET_ACL, &v), 0);
    assert_int_equal(due_rows(f, id, "x", NULL), 1);
}

static void test_expire_only_due(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    set_rules(f, BKT, XML_LOGS_1DAY);
    uint64_t id = bucket_id(f, BKT);
    const char *keys[] = {"logs/1", "logs/2", "logs/3", "logs/4", "keep/1"};
    for (size_t i = 0; i < 5; i++)
        put(f, BKT, keys[i]);
    struct meta_expire_item items[16];
    uint64_t epoch;
    assert_int_equal(scan(f, id, meta__now_ms() - 1000, items, 16, &epoch), 0); /* not yet */
    int64_t later = meta__now_ms() + 10000;
    size_t n = scan(f, id, later, items, 16, &epoch);
    assert_int_equal(n, 4);
    /* logs/3 is rewritten after it was indexed: its clock restarts, it is never expired */
    put(f, BKT, "logs/3");
    struct meta_expire_result r;
    /* "now" before the rows are due: nothing goes */
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, n, meta__now_ms() - 1000, epoch, &r),
                     0);
    assert_int_equal(r.expired, 0);
    assert_true(exists(f, BKT, "logs/1"));
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, n, later, epoch, &r), 0);
    assert_int_equal(r.expired, 3);
    assert_int_equal(r.stale, 1);
    assert_false(exists(f, BKT, "logs/1") || exists(f, BKT, "logs/2") || exists(f, BKT, "logs/4"));
    assert_true(exists(f, BKT, "logs/3") && exists(f, BKT, "keep/1"));
    assert_int_equal(due_rows(f, id, NULL, NULL), 1); /* logs/3's new row */
    assert_int_equal(due_rows(f, id, "logs/3", NULL), 1);
    /* the cursor moved past what was done; a later scan finds logs/3 once it is due */
    n = scan(f, id, later + 5000, items, 16, &epoch);
    assert_int_equal(n, 1);
    assert_memory_equal(items[0].key.base, "logs/3", 6);
    struct meta_lifecycle_stats st;
    meta_lifecycle_stats_get(f->ms, &st);
    assert_true(st.expired >= 3);
}

#define XML_LOGS_AND_DATE                                                                    \
    "<LifecycleConfiguration><Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter>"   \
    "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"                 \
    "<Rule><ID>old</ID><Filter><Prefix>old/</Prefix></Filter><Status>Enabled</Status>"      \
    "<Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>"                      \
    "</LifecycleConfiguration>"

/* A row written behind the scheduler's cursor (a Date rule in the past) moves the cursor back
 * to it, so the next scan still finds it. */
static void test_cursor_back(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    set_rules(f, BKT, XML_LOGS_AND_DATE);
    uint64_t id = bucket_id(f, BKT);
    put(f, BKT, "logs/a");
    struct meta_expire_item items[4];
    uint64_t epoch;
    int64_t later = meta__now_ms() + 10000;
    size_t n = scan(f, id, later, items, 4, &epoch);
    assert_int_equal(n, 1);
    struct meta_expire_result r;
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, n, later, epoch, &r), 0);
    assert_int_equal(r.expired, 1);
    assert_int_equal(scan(f, id, later, items, 4, &epoch), 0); /* the cursor is past logs/a */
    put(f, BKT, "old/x"); /* due 2020-01-01: far behind the cursor */
    n = scan(f, id, later, items, 4, &epoch);
    assert_int_equal(n, 1);
    assert_memory_equal(items[0].key.base, "old/x", 5);
    assert_int_equal(items[0].due_ms, 1577836800000LL);
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, n, 0, epoch, &r), 0);
    assert_int_equal(r.expired, 1);
    assert_false(exists(f, BKT, "old/x"));
}

/* ------------------------------------------------------ the range guard */

struct race {
    uv_loop_t loop;
    struct meta_client *c;
    int done;
    int status[2];
};

static void on_done(struct meta_op *op)
{
    struct race *r = op->data;
    r->status[r->done++] = op->status;
}

static struct meta_op *put_op(struct fx *f, struct race *r, const char *key)
{
    struct meta_op *op = meta_op_create(META_OP_OBJECT_PUT);
    char *etag = mg_arena_alloc(&f->a, 33);
    fx_md5_hex(DATA, sizeof(DATA) - 1, etag);
    op->data = r;
    op->in.bucket = BKT;
    op->in.object.key = str_of(key, strlen(key));
    op->in.object.etag = str_of(etag, 32);
    op->in.object.owner = S("alice");
    fx_data(f, DATA, sizeof(DATA) - 1, &op->in.object.data);
    return op;
}

/* Submit two ops back to back (both in flight) and wait for both. */
static void race_run(struct fx *f, struct meta_op *first, struct meta_op *second)
{
    struct race *r = first->data;
    assert_int_equal(meta_op_submit(r->c, first, on_done), 0);
    assert_int_equal(meta_op_submit(r->c, second, on_done), 0);
    while (r->done < 2)
        uv_run(&r->loop, UV_RUN_ONCE);
    (void)f;
}

/* keys logs/a1..a4 due; logs/a2x lands between a2 and a3 while the expiry runs. put_first:
 * the PUT executes first (pending when the expire op decides: the overlay guard); else the
 * expire op executes first and the PUT applies after its tombstone. */
static void range_race(struct fx *f, int put_first)
{
    f->ms->opts.lc_day_seconds = 1;
    set_rules(f, BKT, XML_LOGS_1DAY);
    uint64_t id = bucket_id(f, BKT);
    const char *keys[] = {"logs/a1", "logs/a2", "logs/a3", "logs/a4"};
    for (size_t i = 0; i < 4; i++)
        put(f, BKT, keys[i]);
    struct meta_expire_item items[8];
    uint64_t epoch;
    int64_t later = meta__now_ms() + 10000;
    size_t n = scan(f, id, later, items, 8, &epoch);
    assert_int_equal(n, 4);

    struct race r = {0};
    assert_int_equal(uv_loop_init(&r.loop), 0);
    assert_int_equal(meta_client_create(f->ms, &r.loop, &r.c), 0);
    struct meta_op *ex = meta_op_create(META_OP_EXPIRE_BATCH);
    ex->data = &r;
    ex->in.bucket = BKT;
    ex->in.expire = items;
    ex->in.nexpire = n;
    ex->in.now_ms = later;
    ex->in.lc_epoch = epoch;
    struct meta_op *pu = put_op(f, &r, "logs/a2x");
    if (put_first)
        race_run(f, pu, ex);
    else
        race_run(f, ex, pu);
    assert_int_equal(r.status[0], 0);
    assert_int_equal(r.status[1], 0);
    assert_int_equal(ex->out.expire.expired, 4);
    int guard_on = !meta__lc_test_no_guard;
    if (put_first && guard_on)
        assert_int_equal(ex->out.expire.range_deletes, 0); /* the pending PUT: point deletes */
    else if (!put_first)
        assert_int_equal(ex->out.expire.range_deletes, 1); /* one tombstone over a1..a4 */
    meta_op_destroy(ex);
    meta_op_destroy(pu);
    meta_client_destroy(r.c);
    uv_run(&r.loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&r.loop), 0);

    for (size_t i = 0; i < 4; i++)
        assert_false(exists(f, BKT, keys[i]));
    assert_true(exists(f, BKT, "logs/a2x")); /* the racing PUT survives */
    struct meta_list_req req = {.prefix = S("logs/"), .max_keys = 100};
    struct meta_list_result lr;
    assert_int_equal(meta_object_list(f->ms, BKT, &req, &f->a, &lr), 0);
    assert_int_equal(lr.nobjects, 1);
    assert_int_equal(due_rows(f, id, "logs/a2x", NULL), 1);
}

static void test_range_guard_put_pending(void **state)
{
    range_race(*state, 1);
}

static void test_range_guard_put_after(void **state)
{
    range_race(*state, 0);
}

/* Range and point deletes leave the same visible state: the same keys in two buckets, one
 * expired each way; a live key not due sits inside the run (committed-row guard). */
static void test_range_vs_point(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    struct mg_str b2 = S("bkt-point");
    assert_int_equal(meta_bucket_create(f->ms, b2, S("alice"), META_ACL_PRIVATE), 0);
    struct mg_str buckets[2] = {BKT, b2};
    const char *keys[] = {"logs/01", "logs/02", "logs/03", "logs/05", "logs/06", "logs/07"};
    struct meta_expire_result res[2];
    for (int m = 0; m < 2; m++) {
        f->ms->opts.lc_delete_point = m;
        set_rules(f, buckets[m], XML_LOGS_1DAY);
        for (size_t i = 0; i < 6; i++)
            put(f, buckets[m], keys[i]);
        put(f, buckets[m], "logs0"); /* no rule matches it */
        put(f, buckets[m], "logs/04-keep");
        uint64_t id = bucket_id(f, buckets[m]);
        struct meta_expire_item items[16];
        uint64_t epoch;
        int64_t later = meta__now_ms() + 10000;
        size_t n = scan(f, id, later, items, 16, &epoch);
        assert_int_equal(n, 7); /* logs/04-keep is due too: left out of the batch below */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (items[i].key.len != strlen("logs/04-keep"))
                items[k++] = items[i];
        assert_int_equal(meta_lc_expire_batch(f->ms, buckets[m], items, k, later, epoch,
                                              &res[m]),
                         0);
        assert_int_equal(res[m].expired, 6);
        /* the due rows went with them (range: in runs, guarded like the entries); that of
         * logs/04-keep (inside the span) stays; no time index row is written any more */
        assert_int_equal(due_rows(f, id, NULL, NULL), 1);
        assert_int_equal(due_rows(f, id, "logs/04-keep", NULL), 1);
        assert_int_equal(table_rows(f, id, META_TBL_TIME), 0);
    }
    f->ms->opts.lc_delete_point = 0;
    assert_int_equal(res[0].range_deletes, 2); /* 01-03 and 05-07: logs/04-keep between */
    assert_int_equal(res[0].point_deletes, 0);
    assert_int_equal(res[1].range_deletes, 0);
    assert_int_equal(res[1].point_deletes, 6);
    struct meta_list_req req = {.max_keys = 100};
    struct meta_list_result l0, l1;
    assert_int_equal(meta_object_list(f->ms, BKT, &req, &f->a, &l0), 0);
    assert_int_equal(meta_object_list(f->ms, b2, &req, &f->a, &l1), 0);
    assert_int_equal(l0.nobjects, 2);
    assert_int_equal(l1.nobjects, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(l0.objects[i].key.len, l1.objects[i].key.len);
        assert_memory_equal(l0.objects[i].key.base, l1.objects[i].key.base, l0.objects[i].key.len);
    }
    assert_memory_equal(l0.objects[0].key.base, "logs/04-keep", 12);
}

/* Rules change: existing objects are re-indexed; before that, the old rows (later due)
 * hold: never early. */
static void test_reindex(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    uint64_t id = bucket_id(f, BKT);
    put(f, BKT, "logs/old");
    put(f, BKT, "logs/old2");
    set_rules(f, BKT, XML_LOGS_3DAYS);
    assert_int_equal(due_rows(f, id, NULL, NULL), 0); /* written before any rule */
    struct meta_expire_result r;
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 1, &r), 0);
    assert_int_equal(r.reindexed, 1);
    assert_false(r.reindex_done);
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 10, &r), 0);
    assert_true(r.reindex_done);
    assert_int_equal(due_rows(f, id, NULL, NULL), 2);
    int64_t due3 = 0;
    due_rows(f, id, "logs/old", &due3);
    /* a shorter rule: until re-indexed, rows stay at 3 days; expire-batch re-checks with
     * the new rules but the scheduler only sees rows <= now */
    set_rules(f, BKT, XML_LOGS_1DAY);
    struct meta_expire_item items[4];
    uint64_t epoch;
    int64_t t = get(f, "logs/old").mtime_ms + 2500; /* 1-day due passed, 3-day not */
    assert_int_equal(scan(f, id, t, items, 4, &epoch), 0);
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 10, &r), 0);
    assert_true(r.reindex_done);
    assert_int_equal(r.reindexed, 2);
    int64_t due1 = 0;
    /* the walk writes rows only (entries keep no due time): the 3-day row stays, stale, until
     * it is due; test_reindex_stale_rows shows what expire-batch makes of such rows */
    assert_int_equal(due_rows(f, id, "logs/old", &due1), 2);
    assert_true(due1 < due3);
    assert_int_equal(scan(f, id, t, items, 4, &epoch), 2);
    struct meta_lifecycle_stats st;
    meta_lifecycle_stats_get(f->ms, &st);
    assert_true(st.reindexed >= 4);
    /* rules removed: the walk drops the rows, stale ones too (one range tombstone) */
    set_rules(f, BKT, NULL);
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 10, &r), 0);
    assert_true(r.reindex_done);
    assert_int_equal(due_rows(f, id, NULL, NULL), 0);
}

/* The re-index walk expires what the new rules make due now (meta_lc_reindex_expire_step):
 * no due row for those, consecutive ones in one guarded range tombstone, an entry not yet due
 * between them splits the run and gets its row; a recorded row of an expired entry goes with
 * it; expire_max bounds them (the rest get rows); range or point as configured. */
static void test_reindex_expires(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    struct mg_str b2 = S("bkt-point");
    assert_int_equal(meta_bucket_create(f->ms, b2, S("owner"), META_ACL_PRIVATE), 0);
    struct mg_str buckets[2] = {BKT, b2};
    struct meta_expire_result res[2];
    for (int m = 0; m < 2; m++) {
        f->ms->opts.lc_delete_point = m;
        uint64_t id = bucket_id(f, buckets[m]);
        struct meta_expire_result r;
        put(f, buckets[m], "logs/01");
        put(f, buckets[m], "logs/02");
        put(f, buckets[m], "logs/03");
        put(f, buckets[m], "logs/05");
        put(f, buckets[m], "logs/06");
        put(f, buckets[m], "other");
        set_rules(f, buckets[m], XML_LOGS_1DAY);
        put(f, buckets[m], "logs/00"); /* under the rule again: records its row */
        usleep(2100 * 1000); /* all of them due (1 s days, rounded up to the next) */
        put(f, buckets[m], "logs/04"); /* not due yet: splits the run */
        set_rules(f, buckets[m], XML_LOGS_1DAY); /* a new generation: the walk starts over */
        assert_int_equal(due_rows(f, id, NULL, NULL), 2); /* logs/00 and 04 record theirs */
        int64_t now = meta__now_ms();
        /* a budget of 2: logs/00 and 01 expire, the rest get rows */
        assert_int_equal(meta_lc_reindex_expire_step(f->ms, buckets[m], 3, now, 2, &r), 0);
        assert_int_equal(r.reindexed, 3);
        assert_int_equal(r.expired, 2);
        assert_false(exists(f, buckets[m], "logs/00"));
        assert_false(exists(f, buckets[m], "logs/01"));
        assert_int_equal(due_rows(f, id, "logs/00", NULL), 0);
        assert_int_equal(due_rows(f, id, "logs/01", NULL), 0);
        assert_int_equal(due_rows(f, id, "logs/02", NULL), 1); /* over the budget: a row */
        assert_int_equal(meta_lc_reindex_expire_step(f->ms, buckets[m], 10, now, 10, &res[m]),
                         0);
        assert_true(res[m].reindex_done);
        assert_int_equal(res[m].expired, 3); /* 03 | 05 06: the walk resumed after logs/02 */
        for (const char *const *k = (const char *const[]){"logs/03", "logs/05", "logs/06", NULL};
             *k != NULL; k++)
            assert_false(exists(f, buckets[m], *k));
        assert_true(exists(f, buckets[m], "logs/04"));
        assert_true(exists(f, buckets[m], "other"));
        /* logs/02 got a row in the first step: the batches expire it */
        assert_true(exists(f, buckets[m], "logs/02"));
        struct meta_expire_item items[4];
        uint64_t epoch;
        assert_int_equal(scan(f, id, now, items, 4, &epoch), 1);
        assert_int_equal(meta_lc_expire_batch(f->ms, buckets[m], items, 1, now, epoch, &r), 0);
        assert_int_equal(r.expired, 1);
        assert_false(exists(f, buckets[m], "logs/02"));
        assert_int_equal(due_rows(f, id, NULL, NULL), 1);
        assert_int_equal(due_rows(f, id, "logs/04", NULL), 1);
    }
    f->ms->opts.lc_delete_point = 0;
    assert_int_equal(res[0].range_deletes, 1); /* 05 06; 03 alone is a point delete */
    assert_int_equal(res[0].point_deletes, 1);
    assert_int_equal(res[1].range_deletes, 0);
    assert_int_equal(res[1].point_deletes, 3);
    /* the scheduler's stats count them as expired */
    struct meta_lifecycle_stats st;
    meta_lifecycle_stats_get(f->ms, &st);
    assert_true(st.expired >= 12); /* 2 + 3 + 1 per bucket */
}

/* The re-index decodes entries in full only when a rule filters on tags (else the summary,
 * which must still carry the due time an entry records, so its old row is replaced). */
static void test_reindex_decodes(void **state)
{
    struct fx *f = *state;
    struct meta_kv tags[1] = {{S("k"), S("v")}};
    struct meta_object v = {.tags = tags, .ntags = 1};
    put(f, BKT, "logs/t");
    put(f, BKT, "logs/u");
    assert_int_equal(meta_object_update(f->ms, BKT, S("logs/t"), META_OBJECT_SET_TAGS, &v), 0);
    f->ms->opts.lc_day_seconds = 1;
    set_rules(f, BKT, XML_TAG_1DAY);
    uint64_t id = bucket_id(f, BKT);
    struct meta_expire_result r;
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 10, &r), 0);
    assert_true(r.reindex_done);
    assert_int_equal(due_rows(f, id, "logs/t", NULL), 1); /* tagged: due */
    assert_int_equal(due_rows(f, id, NULL, NULL), 1);
    /* logs/w is written under the 1-day rule: its entry records the row; a 3-day rule
     * re-indexes it from the summary and moves the row, the recorded one deleted */
    set_rules(f, BKT, XML_LOGS_1DAY);
    put(f, BKT, "logs/w");
    int64_t d1 = get(f, "logs/w").lc_due_ms;
    assert_true(d1 != 0);
    set_rules(f, BKT, XML_LOGS_3DAYS);
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 10, &r), 0);
    assert_true(r.reindex_done);
    int64_t d3 = 0;
    assert_int_equal(due_rows(f, id, "logs/w", &d3), 1);
    assert_true(d3 > d1);
}

/* Rows the re-index wrote (the entries do not record them) for objects that were then
 * overwritten, re-tagged out of the rule or deleted: when due, expire-batch re-reads the
 * entry, recomputes with the current rules and drops the stale row; nothing is deleted early,
 * and the overwritten object's own row still expires it later. */
static void test_reindex_stale_rows(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    uint64_t id = bucket_id(f, BKT);
    put(f, BKT, "logs/a"); /* overwritten after the re-index */
    put(f, BKT, "logs/b"); /* deleted after the re-index */
    put(f, BKT, "logs/c"); /* untouched: expires */
    set_rules(f, BKT, XML_LOGS_1DAY);
    struct meta_expire_result r;
    assert_int_equal(meta_lc_reindex_step(f->ms, BKT, 10, &r), 0);
    assert_true(r.reindex_done);
    assert_int_equal(due_rows(f, id, NULL, NULL), 3);
    assert_int_equal(get(f, "logs/a").lc_due_ms, 0); /* rows only */
    int64_t old_due = 0;
    due_rows(f, id, "logs/a", &old_due);
    usleep(1100 * 1000); /* the overwrite's due time is a later "day" */
    put(f, BKT, "logs/a");
    int existed = 0;
    assert_int_equal(meta_object_delete(f->ms, BKT, S("logs/b"), &existed), 0);
    assert_true(existed);
    struct meta_object a2 = get(f, "logs/a");
    assert_true(a2.lc_due_ms > old_due);
    assert_int_equal(due_rows(f, id, "logs/a", NULL), 2); /* the stale one and its own */
    struct meta_expire_item items[8];
    uint64_t epoch;
    int64_t t = old_due + 10; /* the old rows are due, the overwrite's is not */
    assert_true(t < a2.lc_due_ms);
    size_t n = scan(f, id, t, items, 8, &epoch);
    assert_int_equal(n, 3);
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, n, t, epoch, &r), 0);
    assert_int_equal(r.expired, 1);
    assert_true(exists(f, BKT, "logs/a"));
    assert_false(exists(f, BKT, "logs/c"));
    assert_int_equal(due_rows(f, id, NULL, NULL), 1); /* logs/a's own */
    assert_int_equal(scan(f, id, t, items, 8, &epoch), 0);
    n = scan(f, id, a2.lc_due_ms, items, 8, &epoch);
    assert_int_equal(n, 1);
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, n, a2.lc_due_ms, epoch, &r), 0);
    assert_int_equal(r.expired, 1);
    assert_false(exists(f, BKT, "logs/a"));
    assert_int_equal(due_rows(f, id, NULL, NULL), 0);
}

/* Every due row of the bucket rewritten with an empty value, as rows were before they
 * carried the entry's mtime. */
static void due_rows_make_legacy(struct fx *f, uint64_t id)
{
    struct eng_batch *b = eng_batch_create();
    struct eng_iter *it = table_iter(f, id, META_TBL_DUE);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        eng_batch_put(b, ENG_CF_META, k, kl, "", 0);
    }
    eng_iter_destroy(it);
    assert_int_equal(eng_batch_commit(f->ms->db, b, 0), 0);
    eng_batch_destroy(b);
}

/* The due scan takes each row's mtime from the row; a row without one (written before rows
 * had values) gets it from an iterator over the entries that follows the rows: rows in key
 * order take a next, rows out of key order a seek (backwards too). Either way each item must
 * carry its own entry's mtime. */
static void test_scan_mtimes(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    uint64_t id = bucket_id(f, BKT);
    set_rules(f, BKT, XML_LOGS_1DAY);
    const char *order[] = {"logs/c", "logs/a", "logs/b", "logs/d"}; /* due order != key order */
    int64_t mt[4];
    for (size_t i = 0; i < 4; i++) {
        put(f, BKT, order[i]);
        mt[i] = get(f, order[i]).mtime_ms;
        if (i < 2)
            usleep(1100 * 1000); /* due times round up to a whole "day" (1 s here) */
    }
    struct meta_expire_item items[8];
    uint64_t epoch;
    for (int legacy = 0; legacy < 2; legacy++) {
        if (legacy)
            due_rows_make_legacy(f, id);
        assert_int_equal(scan(f, id, mt[3] + 5000, items, 8, &epoch), 4);
        for (size_t i = 0; i < 4; i++) {
            assert_int_equal(items[i].key.len, strlen(order[i]));
            assert_memory_equal(items[i].key.base, order[i], items[i].key.len);
            assert_true(items[i].mtime_ms == mt[i]);
        }
    }
}

/* An overwrite that lands on the same due row (same due time) rewrites the row with the new
 * entry's mtime: the scheduler reads the mtime from the row, and a row naming the old mtime
 * would be taken for a stale one. */
static void test_overwrite_same_due(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    uint64_t id = bucket_id(f, BKT);
    set_rules(f, BKT, XML_LOGS_1DAY);
    struct meta_object o1, o2;
    for (int tries = 0;; tries++) { /* until both writes round up to the same "day" (1 s) */
        assert_true(tries < 20);
        put(f, BKT, "logs/x");
        o1 = get(f, "logs/x");
        usleep(5 * 1000);
        put(f, BKT, "logs/x");
        o2 = get(f, "logs/x");
        if (o1.lc_due_ms == o2.lc_due_ms && o1.mtime_ms != o2.mtime_ms)
            break;
    }
    assert_int_equal(due_rows(f, id, "logs/x", NULL), 1);
    struct meta_expire_item items[4];
    uint64_t epoch;
    assert_int_equal(scan(f, id, o2.lc_due_ms, items, 4, &epoch), 1);
    assert_true(items[0].mtime_ms == o2.mtime_ms);
    struct meta_expire_result r;
    assert_int_equal(meta_lc_expire_batch(f->ms, BKT, items, 1, o2.lc_due_ms, epoch, &r), 0);
    assert_int_equal(r.expired, 1);
    assert_false(exists(f, BKT, "logs/x"));
}

/* The delete tracker's ranges for meta's keys: due rows and time index rows an hour apart share
 * one range (so expiry's deletes there add up to a trigger), different buckets and tables do not;
 * entries keep the 22-byte default. */
static void test_tracker_ranges(void **state)
{
    (void)state;
    struct mg_buf a, b;
    mg_buf_init(&a);
    mg_buf_init(&b);
    int64_t t0 = 1764633600000; /* 2025-12-02T00:00:00Z */
    char tables[2] = {META_TBL_DUE, META_TBL_TIME};
    for (int i = 0; i < 2; i++) {
        a.len = b.len = 0;
        if (tables[i] == META_TBL_DUE) {
            meta__key_due(&a, 7, t0 + 1000, S("logs/a"));
            meta__key_due(&b, 7, t0 + 3600 * 1000, S("zzz/b"));
        } else {
            meta__key_time_index(&a, 7, t0 + 1000, S("logs/a"));
            meta__key_time_index(&b, 7, t0 + 3600 * 1000, S("zzz/b"));
        }
        size_t la = meta__lc_tracker_range_len(ENG_CF_META, a.base, a.len, NULL);
        size_t lb = meta__lc_tracker_range_len(ENG_CF_META, b.base, b.len, NULL);
        assert_int_equal(la, 15);
        assert_int_equal(lb, la);
        assert_memory_equal(a.base, b.base, la); /* one range */
        b.len = 0;
        meta__key_due(&b, 8, t0 + 1000, S("logs/a")); /* another bucket */
        assert_memory_not_equal(a.base, b.base, la);
    }
    a.len = 0;
    meta__key_object(&a, 7, S("logs/2026-12-01T00:00:00"));
    assert_int_equal(meta__lc_tracker_range_len(ENG_CF_META, a.base, a.len, NULL), 22);
    mg_buf_close(&a);
    mg_buf_close(&b);
}

/* Multipart complete writes the due row; the old records (no TLVs) still decode. */
static void test_mpu_complete_due(void **state)
{
    struct fx *f = *state;
    set_rules(f, BKT, XML_LOGS_1DAY);
    uint64_t id = bucket_id(f, BKT);
    struct meta_object tmpl = {.key = S("logs/mp"), .owner = S("alice")};
    struct mg_str uid;
    assert_int_equal(meta_mpu_create(f->ms, BKT, &tmpl, &f->a, &uid), 0);
    struct meta_part p = {.number = 1, .size = 4, .etag = S("e")};
    char etag[33];
    fx_md5_hex("abcd", 4, etag);
    p.etag = str_of(etag, 32);
    fx_data(f, "abcd", 4, &p.data);
    assert_int_equal(meta_mpu_put_part(f->ms, BKT, S("logs/mp"), uid, &p), 0);
    struct meta_part list = {.number = 1, .etag = str_of(etag, 32)};
    struct meta_object out;
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("logs/mp"), uid, &list, 1, &f->a, &out), 0);
    assert_int_equal(due_rows(f, id, "logs/mp", NULL), 1);
    /* a record without the new TLVs */
    struct meta_object plain = {.key = S("k"), .etag = S("x"), .owner = S("o")};
    struct mg_buf v;
    mg_buf_init(&v);
    meta__object_encode(&plain, META_REC_OBJECT, &v);
    struct meta_object back;
    assert_int_equal(meta__object_decode(v.base, v.len, META_REC_OBJECT, &f->a, &back), 0);
    assert_int_equal(back.lc_due_ms, 0);
    mg_buf_close(&v);
    struct meta_bucket ob = {.id = 7, .owner = S("o")};
    mg_buf_init(&v);
    meta__bucket_encode(&ob, &v);
    struct meta_bucket bb;
    assert_int_equal(meta__bucket_decode(v.base, v.len, &f->a, &bb), 0);
    assert_int_equal(bb.lifecycle_bin.len, 0);
    assert_int_equal(bb.lc_gen, 0);
    mg_buf_close(&v);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct cost {
    int done, failed;
};

static void on_cost_done(struct meta_op *op)
{
    struct cost *c = op->data;
    c->done++;
    c->failed += op->status != 0;
    meta_op_destroy(op);
}

/* The index's cost on a 1 KiB (inline) put: the same pipelined loop (COST_INFLIGHT puts in
 * flight, so the meta thread's CPU shows rather than the log's fsync) without rules, with
 * rules no object matches, and with a matching rule (one more row per put). Printed, not
 * asserted: figures in the commit message. */
#define COST_INFLIGHT 400
#define COST_ROUNDS 5
static void test_put_cost(void **state)
{
    struct fx *f = *state;
    f->ms->opts.inline_max_bytes = 4096;
    static char buf[1024];
    fx_fill(buf, sizeof(buf), 1);
    char etag[33];
    fx_md5_hex(buf, sizeof(buf), etag);
    const char *xml[3] = {NULL, XML_TAG_1DAY, XML_LOGS_1DAY};
    const char *name[3] = {"no rules", "rules, no match", "matching rule"};
    uv_loop_t loop;
    struct meta_client *c;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(meta_client_create(f->ms, &loop, &c), 0);
    for (int m = 0; m < 3; m++) {
        set_rules(f, BKT, xml[m]);
        struct cost cs = {0};
        int64_t t0 = mono_ns();
        for (int r = 0; r < COST_ROUNDS; r++) {
            int target = cs.done + COST_INFLIGHT;
            for (int i = 0; i < COST_INFLIGHT; i++) {
                struct meta_op *op = meta_op_create(META_OP_OBJECT_PUT);
                char key[64];
                snprintf(key, sizeof(key), "logs/%d-%02d-%04d", m, r, i);
                op->data = &cs;
                op->in.bucket = BKT;
                op->in.object.key = str_of(key, strlen(key));
                op->in.object.etag = str_of(etag, 32);
                op->in.object.size = sizeof(buf);
                op->in.object.data.size = sizeof(buf);
                op->in.object.data.inline_data = str_of(buf, sizeof(buf));
                assert_int_equal(meta_op_submit(c, op, on_cost_done), 0);
            }
            while (cs.done < target)
                uv_run(&loop, UV_RUN_ONCE);
        }
        int64_t ns = (mono_ns() - t0) / (COST_INFLIGHT * COST_ROUNDS);
        assert_int_equal(cs.failed, 0);
        printf("lc_put_cost: 1 KiB put, %-16s %lld ns/op (%d in flight)\n", name[m],
               (long long)ns, COST_INFLIGHT);
    }
    meta_client_destroy(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Expiry throughput through the op path: EXPIRE_N due objects (16-byte inline), scanned and
 * expired in batches of 1,000 as the scheduler does, range then point. Printed, not
 * asserted. */
#define EXPIRE_N 8000
static void test_expire_rate(void **state)
{
    struct fx *f = *state;
    f->ms->opts.lc_day_seconds = 1;
    uv_loop_t loop;
    struct meta_client *c;
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(meta_client_create(f->ms, &loop, &c), 0);
    char etag[33];
    fx_md5_hex(DATA, 16, etag);
    for (int m = 0; m < 2; m++) {
        char bname[16];
        snprintf(bname, sizeof(bname), "rate-%d", m);
        struct mg_str bucket = str_of(bname, strlen(bname));
        assert_int_equal(meta_bucket_create(f->ms, bucket, S("alice"), META_ACL_PRIVATE), 0);
        set_rules(f, bucket, XML_LOGS_1DAY);
        struct cost cs = {0};
        for (int r = 0; r < EXPIRE_N / COST_INFLIGHT; r++) {
            int target = cs.done + COST_INFLIGHT;
            for (int i = 0; i < COST_INFLIGHT; i++) {
                struct meta_op *op = meta_op_create(META_OP_OBJECT_PUT);
                char key[64];
                snprintf(key, sizeof(key), "logs/%02d-%04d", r, i);
                op->data = &cs;
                op->in.bucket = bucket;
                op->in.object.key = str_of(key, strlen(key));
                op->in.object.etag = str_of(etag, 32);
                op->in.object.size = op->in.object.data.size = 16;
                op->in.object.data.inline_data = str_of(DATA, 16);
                assert_int_equal(meta_op_submit(c, op, on_cost_done), 0);
            }
            while (cs.done < target)
                uv_run(&loop, UV_RUN_ONCE);
        }
        assert_int_equal(cs.failed, 0);
        f->ms->opts.lc_delete_point = m;
        uint64_t id = bucket_id(f, bucket);
        int64_t later = meta__now_ms() + 10000;
        static struct meta_expire_item items[META_EXPIRE_BATCH_MAX];
        size_t total = 0;
        uint32_t ranges = 0;
        int64_t t0 = mono_ns();
        for (;;) {
            struct mg_arena a;
            size_t n;
            int64_t oldest;
            uint64_t epoch;
            mg_arena_init(&a);
            assert_int_equal(meta_lc_due_scan(f->ms, id, later, META_EXPIRE_BATCH_MAX, &a, items,
                                              &n, &oldest, &epoch),
                             0);
            struct meta_expire_result r = {0};
            if (n > 0)
                assert_int_equal(meta_lc_expire_batch(f->ms, bucket, items, n, later, epoch, &r),
                                 0);
            mg_arena_close(&a);
            if (n == 0)
                break;
            total += r.expired;
            ranges += r.range_deletes;
        }
        int64_t ns = mono_ns() - t0;
        assert_int_equal(total, EXPIRE_N);
        printf("lc_expire_rate: %s: %zu objects in %lld ms: %.0f objects/s (%u range tombstones)\n",
               m ? "point" : "range", total, (long long)(ns / 1000000), total * 1e9 / (double)ns,
               ranges);
    }
    f->ms->opts.lc_delete_point = 0;
    meta_client_destroy(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int test_expire_run(void)
{
    if (getenv("MG_TEST_NO_GUARD") != NULL)
        meta__lc_test_no_guard = 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_due_rows, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_due_rows_tags, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_expire_only_due, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_cursor_back, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_range_guard_put_pending, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_range_guard_put_after, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_range_vs_point, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reindex, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reindex_decodes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reindex_expires, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reindex_stale_rows, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_overwrite_same_due, fx_setup, fx_teardown),
        cmocka_unit_test(test_tracker_ranges),
        cmocka_unit_test_setup_teardown(test_scan_mtimes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_mpu_complete_due, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_put_cost, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_expire_rate, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("meta_expire", tests, NULL, NULL);
}
