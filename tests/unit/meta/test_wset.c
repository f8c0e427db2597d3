/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raft entry codec (meta/wset.c) and the pending-write overlay
 * (meta/overlay.c): an encoded entry decodes to the same header and records,
 * every single-byte corruption and every truncation is MG_ECORRUPT (never a
 * crash), and the overlay answers found / deleted / miss with the newest
 * pending write, drops a row only when the entry that wrote it last applied,
 * and lets a pending range delete hide rows RocksDB still has.
 */
#include <string.h>

#include "meta/shard.h"
#include "tests/unit/meta/test_meta.h"

static void build(struct mg_buf *out, struct meta_ws_header *h)
{
    struct meta_ws *ws = meta__ws_create();
    meta__ws_put(ws, "k1", 2, "v1", 2);
    meta__ws_delete(ws, "k2", 2);
    meta__ws_delete_range(ws, "a", 1, "b", 1);
    struct eng_blob_ref ref = {.segment = 7, .offset = 4096, .length = 1 << 20, .crc32c = 0xdead};
    meta__ws_retire(ws, &ref);
    meta__ws_put(ws, "k3", 2, "", 0);
    meta__ws_result(ws, "out", 3);
    assert_int_equal(meta__ws_count(ws), 4);
    *h = (struct meta_ws_header){.request_id = 42, .shard_id = 3, .range_epoch = 9,
                                 .timestamp_ms = 1764600000000};
    meta__ws_encode(ws, h, out);
    meta__ws_destroy(ws);
}

static void test_roundtrip(void **state)
{
    (void)state;
    struct mg_buf e;
    mg_buf_init(&e);
    struct meta_ws_header h, d;
    build(&e, &h);
    assert_int_equal(meta__ws_decode(e.base, e.len, &d), 0);
    assert_int_equal(d.request_id, 42);
    assert_int_equal(d.shard_id, 3);
    assert_int_equal(d.range_epoch, 9);
    assert_int_equal(d.timestamp_ms, 1764600000000);
    assert_int_equal(d.nrecords, 6);
    size_t pos = 0;
    struct meta_ws_record r;
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 1);
    assert_int_equal(r.type, META_WS_PUT);
    assert_memory_equal(r.key.base, "k1", 2);
    assert_memory_equal(r.value.base, "v1", 2);
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 1);
    assert_int_equal(r.type, META_WS_DEL);
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 1);
    assert_int_equal(r.type, META_WS_DELRANGE);
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 1);
    assert_int_equal(r.type, META_WS_RETIRE);
    assert_int_equal(r.ref.segment, 7);
    assert_int_equal(r.ref.length, 1 << 20);
    assert_int_equal(r.ref.crc32c, 0xdead);
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 1);
    assert_int_equal(r.value.len, 0);
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 1);
    assert_int_equal(r.type, META_WS_RESULT);
    assert_int_equal(r.value.len, 3);
    assert_memory_equal(r.value.base, "out", 3);
    assert_int_equal(meta__ws_next(e.base, e.len, &pos, &r), 0);
    mg_buf_close(&e);
}

static void test_corruption(void **state)
{
    (void)state;
    struct mg_buf e;
    mg_buf_init(&e);
    struct meta_ws_header h, d;
    build(&e, &h);
    char *copy = mg_malloc(e.len);
    for (size_t i = 0; i < e.len; i++) {
        memcpy(copy, e.base, e.len);
        copy[i] ^= 0x5a;
        assert_int_equal(meta__ws_decode(copy, e.len, &d), MG_ECORRUPT);
    }
    for (size_t n = 0; n < e.len; n++)
        assert_int_equal(meta__ws_decode(e.base, n, &d), MG_ECORRUPT);
    assert_int_equal(meta__ws_decode(NULL, 0, &d), MG_ECORRUPT);
    mg_free(copy);
    mg_buf_close(&e);
}

static struct meta_ws_record rec(enum meta_ws_rec t, const char *k, const char *v)
{
    struct meta_ws_record r = {.type = t, .key = {k, strlen(k)}};
    if (v != NULL)
        r.value = (struct mg_str){v, strlen(v)};
    return r;
}

static void test_overlay(void **state)
{
    (void)state;
    struct meta_overlay ov;
    meta__ov_init(&ov);
    struct mg_buf v;
    mg_buf_init(&v);
    assert_int_equal(meta__ov_get(&ov, "x", 1, &v), META_OV_MISS);
    struct meta_ws_record p1 = rec(META_WS_PUT, "x", "one");
    struct meta_ws_record p2 = rec(META_WS_PUT, "x", "two");
    meta__ov_add(&ov, &p1, 1);
    assert_int_equal(meta__ov_get(&ov, "x", 1, &v), META_OV_FOUND);
    assert_memory_equal(v.base, "one", 3);
    meta__ov_add(&ov, &p2, 2);
    /* entry 1 applied: x stays pending with entry 2's value */
    meta__ov_applied(&ov, &p1, 1);
    assert_int_equal(meta__ov_get(&ov, "x", 1, &v), META_OV_FOUND);
    assert_memory_equal(v.base, "two", 3);
    meta__ov_applied(&ov, &p2, 2);
    assert_int_equal(meta__ov_get(&ov, "x", 1, &v), META_OV_MISS);
    /* a pending delete hides the row */
    struct meta_ws_record d3 = rec(META_WS_DEL, "y", NULL);
    meta__ov_add(&ov, &d3, 3);
    assert_int_equal(meta__ov_get(&ov, "y", 1, &v), META_OV_DELETED);
    /* a pending range delete hides rows only RocksDB has, and older pending rows */
    struct meta_ws_record p4 = rec(META_WS_PUT, "m2", "old");
    meta__ov_add(&ov, &p4, 4);
    struct meta_ws_record r5 = rec(META_WS_DELRANGE, "m", "n");
    meta__ov_add(&ov, &r5, 5);
    assert_int_equal(meta__ov_get(&ov, "m1", 2, &v), META_OV_DELETED);
    assert_int_equal(meta__ov_get(&ov, "m2", 2, &v), META_OV_DELETED);
    assert_int_equal(meta__ov_get(&ov, "n", 1, &v), META_OV_MISS);
    /* a put after the range delete is visible */
    struct meta_ws_record p6 = rec(META_WS_PUT, "m3", "new");
    meta__ov_add(&ov, &p6, 6);
    assert_int_equal(meta__ov_get(&ov, "m3", 2, &v), META_OV_FOUND);
    meta__ov_applied(&ov, &r5, 5);
    assert_int_equal(meta__ov_get(&ov, "m1", 2, &v), META_OV_MISS);
    /* many rows: the table grows and keeps every one */
    char k[16];
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof(k), "g%d", i);
        struct meta_ws_record p = rec(META_WS_PUT, k, k);
        meta__ov_add(&ov, &p, 100 + (uint64_t)i);
    }
    for (int i = 0; i < 5000; i += 499) {
        snprintf(k, sizeof(k), "g%d", i);
        assert_int_equal(meta__ov_get(&ov, k, strlen(k), &v), META_OV_FOUND);
        assert_memory_equal(v.base, k, strlen(k));
    }
    meta__ov_close(&ov);
    mg_buf_close(&v);
}

int test_wset_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_overlay),
    };
    return cmocka_run_group_tests_name("wset", tests, NULL, NULL);
}
