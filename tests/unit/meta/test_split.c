/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Splits at bucket boundaries (meta/split.c), the parts every replica must agree on: the
 * layout row codec (round trip; every truncation and every corrupting byte is MG_ECORRUPT
 * or still a valid layout, never a crash), the split command and its entry, the split point
 * (the bucket boundary that best halves the rows, never inside a bucket, none with one
 * bucket), the apply rule (a split applies once: the same command again is a no-op; a
 * command for an old epoch, a taken id or a point outside the range changes nothing) and
 * bucket ids after splits (from the initial layout: no collision, wherever they land).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "meta/split.h"

static void test_layout_roundtrip(void **state)
{
    (void)state;
    struct meta__layout l, d;
    meta__layout_initial(&l, 3);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.s[0].lo, 0);
    assert_int_equal(l.s[2].hi, 0);
    struct meta__split_cmd c = {.parent = 2, .parent_epoch = 1, .child = 4,
                                .at = l.s[1].lo + 10, .hi = l.s[1].hi};
    assert_int_equal(meta__layout_split(&l, &c), 0);
    assert_int_equal(l.s[3].since, 0); /* the child's log starts with its epoch */
    l.s[1].since = 77;                 /* set by the apply: the split entry's index */
    struct mg_buf b;
    mg_buf_init(&b);
    meta__layout_encode(&l, &b);
    assert_int_equal(meta__layout_decode(b.base, b.len, &d), 0);
    assert_int_equal(d.initial, 3);
    assert_int_equal(d.n, 4);
    assert_memory_equal(d.s, l.s, sizeof(l.s[0]) * 4);
    /* every truncation fails; every single corrupted byte fails or decodes to a sane layout */
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(meta__layout_decode(b.base, n, &d), MG_ECORRUPT);
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.base[i] ^= (char)(1 << bit);
            if (meta__layout_decode(b.base, b.len, &d) == 0) {
                assert_true(d.n >= 1 && d.n <= META_SHARDS_MAX - 1);
                for (unsigned k = 0; k < d.n; k++) {
                    assert_true(d.s[k].id >= 1 && d.s[k].id < META_SHARDS_MAX);
                    assert_true(d.s[k].hi == 0 || d.s[k].hi > d.s[k].lo);
                }
            }
            b.base[i] ^= (char)(1 << bit);
        }
    }
    mg_buf_close(&b);
}

static void assert_cmd_equal(const struct meta__split_cmd *a, const struct meta__split_cmd *b)
{
    assert_int_equal(a->parent, b->parent); /* field by field: the struct has padding */
    assert_int_equal(a->parent_epoch, b->parent_epoch);
    assert_int_equal(a->child, b->child);
    assert_int_equal(a->at, b->at);
    assert_int_equal(a->hi, b->hi);
}

static void test_split_cmd_and_entry(void **state)
{
    (void)state;
    struct meta__split_cmd c = {.parent = 1, .parent_epoch = 7, .child = 9, .at = 12345,
                                .hi = 0}, d;
    struct mg_buf b;
    mg_buf_init(&b);
    meta__split_cmd_encode(&c, &b);
    assert_int_equal(meta__split_cmd_decode(b.base, b.len, &d), 0);
    assert_cmd_equal(&c, &d);
    for (size_t n = 0; n < b.len; n++)
        assert_int_equal(meta__split_cmd_decode(b.base, n, &d), MG_ECORRUPT);
    b.len = 0;
    meta__split_entry_encode(&c, &b);
    struct meta_ws_header h;
    assert_int_equal(meta__ws_decode(b.base, b.len, &h), 0);
    assert_int_equal(h.shard_id, 1);
    assert_int_equal(h.range_epoch, 7);
    assert_int_equal(h.request_id, 0);
    memset(&d, 0, sizeof(d));
    assert_int_equal(meta__split_entry(b.base, b.len, &d), 1);
    assert_cmd_equal(&c, &d);
    /* an ordinary entry is not a split */
    struct meta_ws *ws = meta__ws_create();
    meta__ws_put(ws, "\x03k", 2, "v", 1);
    b.len = 0;
    meta__ws_encode(ws, &h, &b);
    assert_int_equal(meta__split_entry(b.base, b.len, &d), 0);
    meta__ws_destroy(ws);
    mg_buf_close(&b);
}

static void test_split_point(void **state)
{
    (void)state;
    uint64_t at = 0;
    const uint64_t one_id[] = {5}, one_n[] = {1000};
    assert_int_equal(meta__split_choose(one_id, one_n, 1, &at), -1); /* one bucket: never */
    assert_int_equal(meta__split_choose(one_id, one_n, 0, &at), -1);
    const uint64_t ids[] = {3, 4, 8, 9, 20}, even[] = {10, 10, 10, 10, 10};
    assert_int_equal(meta__split_choose(ids, even, 5, &at), 0);
    assert_true(at == 8 || at == 9); /* 20/30 or 30/20 rows */
    const uint64_t heavy[] = {1, 1, 100, 1, 1}; /* the big bucket stays whole */
    assert_int_equal(meta__split_choose(ids, heavy, 5, &at), 0);
    assert_true(at == 8 || at == 9);
    const uint64_t skew[] = {100, 1, 1, 1, 1};
    assert_int_equal(meta__split_choose(ids, skew, 5, &at), 0);
    assert_int_equal(at, 4); /* the only boundary with the big bucket alone below */
    const uint64_t two_id[] = {7, 1000}, two_n[] = {1, 99};
    assert_int_equal(meta__split_choose(two_id, two_n, 2, &at), 0);
    assert_int_equal(at, 1000);
}

static void test_split_apply_idempotent(void **state)
{
    (void)state;
    struct meta__layout l, before;
    meta__layout_initial(&l, 1);
    struct meta__split_cmd c = {.parent = 1, .parent_epoch = 1, .child = 2, .at = 30, .hi = 0};
    assert_int_equal(meta__layout_split(&l, &c), 0);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.s[0].hi, 30);
    assert_int_equal(l.s[0].epoch, 2);
    assert_int_equal(l.s[1].id, 2);
    assert_int_equal(l.s[1].lo, 30);
    assert_int_equal(l.s[1].hi, 0);
    assert_int_equal(l.s[1].epoch, 2);
    before = l;
    /* the same command again (a replay, a re-driven split): a no-op */
    assert_int_equal(meta__layout_split(&l, &c), 1);
    assert_memory_equal(&l, &before, sizeof(l));
    /* the parent moved on: a command for its old epoch is refused */
    struct meta__split_cmd old = {.parent = 1, .parent_epoch = 1, .child = 3, .at = 10, .hi = 30};
    assert_int_equal(meta__layout_split(&l, &old), -1);
    /* a taken id with another range, a point outside or at the edge, a wrong end */
    struct meta__split_cmd bad[] = {
        {.parent = 1, .parent_epoch = 2, .child = 2, .at = 10, .hi = 30},
        {.parent = 1, .parent_epoch = 2, .child = 3, .at = 30, .hi = 30},
        {.parent = 1, .parent_epoch = 2, .child = 3, .at = 0, .hi = 30},
        {.parent = 1, .parent_epoch = 2, .child = 3, .at = 10, .hi = 0},
        {.parent = 1, .parent_epoch = 2, .child = 0, .at = 10, .hi = 30},
        {.parent = 1, .parent_epoch = 2, .child = 64, .at = 10, .hi = 30},
        {.parent = 9, .parent_epoch = 2, .child = 3, .at = 10, .hi = 30},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(meta__layout_split(&l, &bad[i]), -1);
        assert_memory_equal(&l, &before, sizeof(l));
    }
    /* a child id below another child's keeps ids ascending */
    struct meta__split_cmd c5 = {.parent = 2, .parent_epoch = 2, .child = 5, .at = 50, .hi = 0};
    struct meta__split_cmd c4 = {.parent = 1, .parent_epoch = 2, .child = 4, .at = 10, .hi = 30};
    assert_int_equal(meta__layout_split(&l, &c5), 0);
    assert_int_equal(meta__layout_split(&l, &c4), 0);
    assert_int_equal(l.n, 4);
    for (unsigned i = 1; i < l.n; i++)
        assert_true(l.s[i].id > l.s[i - 1].id);
    /* the ranges still cover the id space exactly once */
    const uint64_t probes[] = {0, 9, 10, 29, 30, 49, 50, UINT64_MAX};
    const uint32_t owner[] = {1, 1, 4, 4, 2, 2, 5, 5};
    for (size_t i = 0; i < 8; i++) {
        int at = meta__layout_find(&l, probes[i]);
        assert_true(at >= 0);
        assert_int_equal(l.s[at].id, owner[i]);
    }
}

static void test_bucket_ids_after_split(void **state)
{
    (void)state;
    /* ids from the initial layout: the same sequence before and after splits, all distinct,
     * and every one inside exactly one shard of the split layout */
    for (uint32_t initial = 1; initial <= 4; initial++) {
        struct meta__layout l;
        meta__layout_initial(&l, initial);
        uint64_t ids[200];
        for (uint64_t n = 0; n < 200; n++) {
            ids[n] = meta__bucket_id_initial(initial, n);
            assert_true(ids[n] != 0);
            for (uint64_t m = 0; m < n; m++)
                assert_true(ids[m] != ids[n]);
        }
        /* split shard 1 between its 10th and 11th bucket */
        struct meta__split_cmd c = {.parent = 1, .parent_epoch = 1, .child = initial + 1,
                                    .at = meta__bucket_id_initial(initial, 10 * initial),
                                    .hi = l.s[0].hi};
        assert_int_equal(meta__layout_split(&l, &c), 0);
        unsigned in_child = 0;
        for (uint64_t n = 0; n < 200; n++) {
            int at = meta__layout_find(&l, ids[n]);
            assert_true(at >= 0);
            in_child += l.s[at].id == initial + 1;
            assert_int_equal(meta__bucket_id_initial(initial, n), ids[n]);
        }
        assert_true(in_child > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_roundtrip),
        cmocka_unit_test(test_split_cmd_and_entry),
        cmocka_unit_test(test_split_point),
        cmocka_unit_test(test_split_apply_idempotent),
        cmocka_unit_test(test_bucket_ids_after_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
