/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/list.c: prefix, delimiter (single byte, multi-byte, 0xFF, UTF-8), exact
 * IsTruncated, pagination with start_after covering every key exactly once, and the bounded
 * skip over common prefixes (iterator steps counted). */
#include <stdio.h>
#include <string.h>

#include "tests/unit/meta/test_meta.h"

/* Insert rows directly as one batch (the scan is under test, not the put path). */
static void bulk_insert(struct fx *f, const struct mg_str *keys, size_t n)
{
    uint64_t bid;
    assert_int_equal(meta__bucket_id(f->ms, BKT, &bid), 0);
    struct eng_batch *b = eng_batch_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    for (size_t i = 0; i < n; i++) {
        struct meta_object o = {.key = keys[i],
                                .etag = S("e"),
                                .mtime_ms = 1,
                                .size = 1,
                                .data = {.size = 1, .inline_data = S("x")}};
        k.len = v.len = 0;
        meta__key_object(&k, bid, keys[i]);
        meta__object_encode(&o, META_REC_OBJECT, &v);
        eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
    }
    assert_int_equal(eng_batch_commit(f->ms->db, b, 0), 0); /* rows written under the op path, straight to RocksDB */
    eng_batch_destroy(b);
    mg_buf_close(&k);
    mg_buf_close(&v);
}

static int eq(struct mg_str a, const char *b, size_t blen)
{
    return a.len == blen && memcmp(a.base, b, blen) == 0;
}
#define EQ(s, lit) eq((s), (lit), sizeof(lit) - 1)

static void list(struct fx *f, const char *prefix, size_t plen, const char *delim, size_t dlen,
                 const char *after, size_t alen, uint32_t max, struct meta_list_result *res)
{
    struct meta_list_req req = {.prefix = str_of(prefix, plen),
                                .delimiter = str_of(delim, dlen),
                                .start_after = str_of(after, alen),
                                .max_keys = max};
    assert_int_equal(meta_object_list(f->ms, BKT, &req, &f->a, res), 0);
}

static void test_delimiters(void **state)
{
    struct fx *f = *state;
    const struct mg_str keys[] = {S("a"),
                                  S("a/b"),
                                  S("a/c/d"),
                                  S("b"),
                                  S("c\xff"),
                                  S("c\xff\xffz"),
                                  S("c\xff"
                                    "1"),
                                  S("\xc3\xa9/x"),
                                  S("\xc3\xa9/y"),
                                  S("x--1"),
                                  S("x--2"),
                                  S("y"),
                                  S("z--a--b"),
                                  S("\xff\xff"),
                                  S("\xff\xff\xff/q")};
    bulk_insert(f, keys, sizeof(keys) / sizeof(keys[0]));
    struct meta_list_result r;

    list(f, "", 0, "/", 1, "", 0, 1000, &r);
    assert_int_equal(r.nobjects, 10); /* a b c\xff c\xff1 c\xff\xffz x--1 x--2 y z--a--b \xff\xff */
    assert_int_equal(r.nprefixes, 3);
    assert_true(EQ(r.prefixes[0], "a/"));
    assert_true(EQ(r.prefixes[1], "\xc3\xa9/"));
    assert_true(EQ(r.prefixes[2], "\xff\xff\xff/"));
    assert_false(r.truncated);

    list(f, "a/", 2, "/", 1, "", 0, 1000, &r);
    assert_int_equal(r.nobjects, 1);
    assert_true(EQ(r.objects[0].key, "a/b"));
    assert_int_equal(r.nprefixes, 1);
    assert_true(EQ(r.prefixes[0], "a/c/"));

    /* multi-byte delimiter */
    list(f, "", 0, "--", 2, "", 0, 1000, &r);
    assert_int_equal(r.nprefixes, 2);
    assert_true(EQ(r.prefixes[0], "x--"));
    assert_true(EQ(r.prefixes[1], "z--"));
    list(f, "z--", 3, "--", 2, "", 0, 1000, &r);
    assert_int_equal(r.nprefixes, 1);
    assert_true(EQ(r.prefixes[0], "z--a--"));

    /* 0xFF as the delimiter: the skip past "c\xff" must land on "x--1", and past "\xff" on
     * the end of the bucket */
    list(f, "", 0, "\xff", 1, "", 0, 1000, &r);
    assert_int_equal(r.nprefixes, 2);
    assert_true(EQ(r.prefixes[0], "c\xff"));
    assert_true(EQ(r.prefixes[1], "\xff"));
    assert_int_equal(r.nobjects, 10);
    assert_true(EQ(r.objects[7].key, "z--a--b"));
    assert_true(EQ(r.objects[9].key, "\xc3\xa9/y")); /* 0xC3 sorts after 'z' */

    /* prefix only; UTF-8 prefix */
    list(f, "c\xff", 2, "", 0, "", 0, 1000, &r);
    assert_int_equal(r.nobjects, 3);
    assert_true(EQ(r.objects[0].key, "c\xff"));
    assert_true(EQ(r.objects[1].key, "c\xff"
                                     "1"));
    assert_true(EQ(r.objects[2].key, "c\xff\xffz"));
    list(f, "\xc3\xa9", 2, "", 0, "", 0, 1000, &r);
    assert_int_equal(r.nobjects, 2);
    assert_int_equal(r.objects[0].size, 1);
    assert_true(EQ(r.objects[0].etag, "e"));

    /* a corrupt entry is left out, not fatal */
    uint64_t bid;
    struct mg_buf k;
    mg_buf_init(&k);
    assert_int_equal(meta__bucket_id(f->ms, BKT, &bid), 0);
    meta__key_object(&k, bid, S("bad"));
    struct eng_batch *b = eng_batch_create();
    eng_batch_put(b, ENG_CF_META, k.base, k.len, "\x01\x01\x01\x09", 4);
    assert_int_equal(eng_batch_commit(f->ms->db, b, 0), 0); /* rows written under the op path, straight to RocksDB */
    eng_batch_destroy(b);
    mg_buf_close(&k);
    list(f, "b", 1, "", 0, "", 0, 1000, &r);
    assert_int_equal(r.nobjects, 1);
    assert_true(EQ(r.objects[0].key, "b"));
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("bad"), &f->a, &o), MG_ECORRUPT);
    assert_int_equal(meta_object_delete(f->ms, BKT, S("bad"), NULL), 0);

    /* exact truncation and next_marker */
    list(f, "", 0, "/", 1, "", 0, 13, &r);
    assert_int_equal(r.nobjects + r.nprefixes, 13);
    assert_false(r.truncated);
    list(f, "", 0, "/", 1, "", 0, 12, &r);
    assert_true(r.truncated);
    assert_true(EQ(r.next_marker, "\xff\xff"));
    list(f, "", 0, "", 0, "", 0, 0, &r);
    assert_int_equal(r.nobjects, 0);

    /* start_after inside a common prefix skips the whole prefix */
    list(f, "", 0, "/", 1, "a/", 2, 1000, &r);
    assert_true(EQ(r.objects[0].key, "b"));
    list(f, "", 0, "/", 1, "a/b", 3, 1000, &r);
    assert_true(EQ(r.objects[0].key, "b"));
    /* start_after before the prefix; after everything */
    list(f, "x", 1, "", 0, "a", 1, 1000, &r);
    assert_int_equal(r.nobjects, 2);
    list(f, "", 0, "", 0, "\xff\xff\xff\xff", 4, 1000, &r);
    assert_int_equal(r.nobjects, 0);
}

/* Page through with max_keys = page, start_after = next_marker, and compare with the
 * single-call listing: same entries and prefixes, each exactly once. */
static void paginate(struct fx *f, const char *delim, uint32_t page)
{
    struct meta_list_result all, r;
    list(f, "", 0, delim, strlen(delim), "", 0, 1000, &all);
    assert_false(all.truncated);
    size_t oi = 0, pi = 0;
    struct mg_str after = {"", 0};
    for (int guard = 0; guard < 1000; guard++) {
        list(f, "", 0, delim, strlen(delim), after.base, after.len, page, &r);
        assert_true(r.nobjects + r.nprefixes <= page);
        for (size_t i = 0; i < r.nobjects; i++, oi++)
            assert_true(eq(r.objects[i].key, all.objects[oi].key.base, all.objects[oi].key.len));
        for (size_t i = 0; i < r.nprefixes; i++, pi++)
            assert_true(eq(r.prefixes[i], all.prefixes[pi].base, all.prefixes[pi].len));
        if (!r.truncated)
            break;
        assert_int_equal(r.nobjects + r.nprefixes, page);
        after = r.next_marker;
    }
    assert_int_equal(oi, all.nobjects);
    assert_int_equal(pi, all.nprefixes);
}

static void test_pagination(void **state)
{
    struct fx *f = *state;
    struct mg_str keys[400];
    char *buf = mg_arena_alloc(&f->a, 400 * 16);
    for (size_t i = 0; i < 400; i++) {
        char *k = buf + 16 * i;
        uint32_t x = (uint32_t)i * 2654435761u;
        /* a mix of flat keys and keys under 7 directories, some with 0xFF and UTF-8 */
        int n =
            snprintf(k, 16, "%c%s%u", "abcdefg"[x % 7], (x >> 8) % 3 == 0 ? "/" : "", (unsigned)i);
        if (i % 11 == 0)
            k[n++] = (char)0xFF;
        if (i % 13 == 0) {
            k[n++] = (char)0xC3;
            k[n++] = (char)0xA9;
        }
        keys[i] = str_of(k, (size_t)n);
    }
    bulk_insert(f, keys, 400);
    paginate(f, "", 7);
    paginate(f, "", 1);
    paginate(f, "/", 7);
    paginate(f, "/", 1);
    paginate(f, "1", 5);
    paginate(f, "\xff", 3);
}

/* 10,000 keys under 10 common prefixes: one iterator step per prefix, not per key. */
static void test_skip_bounded(void **state)
{
    struct fx *f = *state;
    static struct mg_str keys[10000];
    char *buf = mg_arena_alloc(&f->a, 10000 * 16);
    for (size_t i = 0; i < 10000; i++) {
        char *k = buf + 16 * i;
        int n = snprintf(k, 16, "p%zu/%04zu", i / 1000, i % 1000);
        keys[i] = str_of(k, (size_t)n);
    }
    bulk_insert(f, keys, 10000);
    struct meta_list_result r;
    uint64_t before = atomic_load(&f->ms->list_steps);
    list(f, "", 0, "/", 1, "", 0, 1000, &r);
    uint64_t steps = atomic_load(&f->ms->list_steps) - before;
    assert_int_equal(r.nprefixes, 10);
    assert_int_equal(r.nobjects, 0);
    assert_false(r.truncated);
    /* 1 start seek + 1 step over the counters row + 10 seeks */
    assert_true(steps <= 12);

    list(f, "", 0, "/", 1, "", 0, 9, &r);
    assert_true(r.truncated);
    assert_true(EQ(r.next_marker, "p8/"));
    list(f, "", 0, "/", 1, "p8/", 3, 9, &r);
    assert_int_equal(r.nprefixes, 1);
    assert_true(EQ(r.prefixes[0], "p9/"));
    assert_false(r.truncated);

    before = atomic_load(&f->ms->list_steps);
    list(f, "p3/", 3, "/", 1, "", 0, 1000, &r);
    steps = atomic_load(&f->ms->list_steps) - before;
    assert_int_equal(r.nobjects, 1000);
    assert_false(r.truncated);
    assert_true(steps <= 1001);
}

int test_list_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delimiters, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_pagination, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_skip_bounded, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("meta_list", tests, NULL, NULL);
}
