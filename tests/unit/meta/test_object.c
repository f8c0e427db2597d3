/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/object.c and meta/data.c: put/get (inline and blob), overwrite frees the
 * replaced blob, conditional puts, idempotent delete, key limits, tag/acl update, copy with
 * a byte range, reads across extents. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/unit/meta/test_meta.h"

static uint64_t freed_bytes(struct fx *f)
{
    struct meta_stats st;
    meta_stats_get(f->ms, &st);
    return st.blobs.bytes_freed;
}

static void test_put_get(void **state)
{
    struct fx *f = *state;
    char big[5000];
    fx_fill(big, sizeof(big), 1);
    assert_int_equal(fx_put(f, BKT, S("empty"), "", 0, NULL), 0);
    assert_int_equal(fx_put(f, BKT, S("inline"), big, FX_INLINE_MAX, NULL), 0);
    assert_int_equal(fx_put(f, BKT, S("blob"), big, sizeof(big), NULL), 0);

    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("inline"), &f->a, &o), 0);
    assert_int_equal(o.data.nextents, 0);
    assert_int_equal(o.size, FX_INLINE_MAX);
    assert_int_equal(meta_object_get(f->ms, BKT, S("blob"), &f->a, &o), 0);
    assert_int_equal(o.data.nextents, 1);
    assert_int_equal(o.size, sizeof(big));
    assert_int_equal(o.etag.len, 32);
    assert_memory_equal(o.key.base, "blob", 4);
    assert_memory_equal(o.content_type.base, "application/octet-stream", 24);
    assert_true(o.mtime_ms > 0);
    char part[100];
    assert_int_equal(meta_data_read(f->ms, &o.data, 4000, part, 100), 0);
    assert_memory_equal(part, big + 4000, 100);
    assert_int_equal(meta_data_read(f->ms, &o.data, 4950, part, 100), MG_EINVALIDRANGE);
    assert_int_equal(meta_object_get(f->ms, BKT, S("empty"), &f->a, &o), 0);
    assert_int_equal(o.size, 0);

    assert_int_equal(meta_object_get(f->ms, BKT, S("nope"), &f->a, &o), MG_ENOSUCHKEY);
    assert_int_equal(meta_object_get(f->ms, S("nobucket"), S("k"), &f->a, &o), MG_ENOSUCHBUCKET);
    assert_int_equal(fx_put(f, S("nobucket"), S("k"), "x", 1, NULL), MG_ENOSUCHBUCKET);

    /* keys: arbitrary bytes up to 1024 */
    char key[1025];
    memset(key, 'k', sizeof(key));
    key[3] = 0;
    key[4] = (char)0xFF;
    assert_int_equal(fx_put(f, BKT, str_of(key, 1024), "x", 1, NULL), 0);
    assert_int_equal(meta_object_get(f->ms, BKT, str_of(key, 1024), &f->a, &o), 0);
    assert_int_equal(fx_put(f, BKT, str_of(key, 1025), "x", 1, NULL), MG_EKEYTOOLONG);
}

static void test_overwrite_frees(void **state)
{
    struct fx *f = *state;
    char a[3000], b[2000];
    fx_fill(a, sizeof(a), 2);
    fx_fill(b, sizeof(b), 3);
    assert_int_equal(fx_put(f, BKT, S("k"), a, sizeof(a), NULL), 0);
    uint64_t before = freed_bytes(f);
    assert_int_equal(fx_put(f, BKT, S("k"), b, sizeof(b), NULL), 0);
    assert_int_equal(freed_bytes(f) - before, sizeof(a));
    size_t len;
    int rv;
    char *got = fx_get(f, BKT, S("k"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_int_equal(len, sizeof(b));
    assert_memory_equal(got, b, sizeof(b));
    mg_free(got);
    /* overwrite with inline: the blob goes */
    before = freed_bytes(f);
    assert_int_equal(fx_put(f, BKT, S("k"), "tiny", 4, NULL), 0);
    assert_int_equal(freed_bytes(f) - before, sizeof(b));
    /* delete: idempotent, frees */
    assert_int_equal(fx_put(f, BKT, S("k"), a, sizeof(a), NULL), 0);
    before = freed_bytes(f);
    int existed = 0;
    assert_int_equal(meta_object_delete(f->ms, BKT, S("k"), &existed), 0);
    assert_true(existed);
    assert_int_equal(freed_bytes(f) - before, sizeof(a));
    assert_int_equal(meta_object_delete(f->ms, BKT, S("k"), &existed), 0);
    assert_false(existed);
    assert_int_equal(meta_object_delete(f->ms, BKT, S("k"), NULL), 0);
    assert_int_equal(meta_object_delete(f->ms, S("nobucket"), S("k"), NULL), MG_ENOSUCHBUCKET);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("k"), &f->a, &o), MG_ENOSUCHKEY);
}

/* Wait (bounded) until the blob store freed at least want bytes more than before. */
static uint64_t wait_freed(struct fx *f, uint64_t before, uint64_t want)
{
    for (int i = 0; i < 400 && freed_bytes(f) - before < want; i++) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return freed_bytes(f) - before;
}

/* Retired blobs wait for their readers (issue 9: pins, not a clock): a reader that pinned
 * the old version keeps reading it after an overwrite and a delete, however long; once it
 * unpins, the reaper frees both versions, with no write needed to trigger it. */
static void test_retire_waits_for_pins(void **state)
{
    struct fx *f = *state;
    char a[3000], b[2000], got[3000];
    fx_fill(a, sizeof(a), 6);
    fx_fill(b, sizeof(b), 7);
    f->ms->free_grace_ms = META_FREE_GRACE_MS_DEFAULT; /* retire through pins */
    assert_int_equal(fx_put(f, BKT, S("k"), a, sizeof(a), NULL), 0);
    struct meta_object old;
    assert_int_equal(meta_object_get_pinned(f->ms, BKT, S("k"), &f->a, &old), 0);
    uint64_t before = freed_bytes(f);
    assert_int_equal(fx_put(f, BKT, S("k"), b, sizeof(b), NULL), 0);
    assert_int_equal(meta_object_delete(f->ms, BKT, S("k"), NULL), 0);
    assert_int_equal(wait_freed(f, before, sizeof(b)), sizeof(b)); /* b: nobody reads it */
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    assert_int_equal(freed_bytes(f) - before, sizeof(b)); /* a: still pinned */
    assert_int_equal(meta_data_read(f->ms, &old.data, 0, got, sizeof(a)), 0);
    assert_memory_equal(got, a, sizeof(a));
    meta_data_unpin(f->ms, &old.data);
    assert_int_equal(wait_freed(f, before, sizeof(a) + sizeof(b)), sizeof(a) + sizeof(b));
}

static void test_delete_many(void **state)
{
    struct fx *f = *state;
    char big[1000];
    fx_fill(big, sizeof(big), 8);
    assert_int_equal(fx_put(f, BKT, S("a"), big, sizeof(big), NULL), 0);
    assert_int_equal(fx_put(f, BKT, S("b"), "x", 1, NULL), 0);
    assert_int_equal(fx_put(f, BKT, S("c"), big, 500, NULL), 0);
    char longkey[1100];
    memset(longkey, 'k', sizeof(longkey));
    const struct mg_str keys[] = {S("c"), S("zz"), S("a"), S("a"), str_of(longkey, 1100), S("b")};
    int existed[6];
    uint64_t before = freed_bytes(f);
    assert_int_equal(meta_object_delete_many(f->ms, BKT, keys, 6, existed), 0);
    assert_int_equal(freed_bytes(f) - before, 1500); /* each blob once */
    int want[6] = {1, 0, 1, 1, 0, 1};
    assert_memory_equal(existed, want, sizeof(want));
    struct meta_list_req req = {.max_keys = 1000};
    struct meta_list_result res;
    assert_int_equal(meta_object_list(f->ms, BKT, &req, &f->a, &res), 0);
    assert_int_equal(res.nobjects, 0);
    assert_int_equal(meta_object_delete_many(f->ms, BKT, keys, 6, existed), 0);
    assert_int_equal(existed[0] + existed[2] + existed[5], 0);
    assert_int_equal(meta_object_delete_many(f->ms, S("nobucket"), keys, 6, NULL),
                     MG_ENOSUCHBUCKET);
    assert_int_equal(meta_object_delete_many(f->ms, BKT, keys, META_DELETE_MANY_MAX + 1, NULL),
                     MG_EINVALIDARGUMENT);
}

static void test_conditional(void **state)
{
    struct fx *f = *state;
    char big[500];
    fx_fill(big, sizeof(big), 4);
    struct meta_put_cond none_match = {.if_none_match_any = 1};
    assert_int_equal(fx_put(f, BKT, S("k"), "v1", 2, &none_match), 0);
    uint64_t before = freed_bytes(f);
    /* a failed conditional put frees the new data */
    assert_int_equal(fx_put(f, BKT, S("k"), big, sizeof(big), &none_match), MG_EPRECONDITION);
    assert_int_equal(freed_bytes(f) - before, sizeof(big));

    char etag[33];
    fx_md5_hex("v1", 2, etag);
    struct meta_put_cond match = {.if_match = str_of(etag, 32)};
    assert_int_equal(fx_put(f, BKT, S("k"), "v2", 2, &match), 0);
    assert_int_equal(fx_put(f, BKT, S("k"), "v3", 2, &match), MG_EPRECONDITION);
    char quoted[35];
    fx_md5_hex("v2", 2, quoted + 1);
    quoted[0] = quoted[33] = '"';
    match.if_match = str_of(quoted, 34);
    assert_int_equal(fx_put(f, BKT, S("k"), "v3", 2, &match), 0);
    assert_int_equal(fx_put(f, BKT, S("absent"), "v", 1, &match), MG_ENOSUCHKEY);
    size_t len;
    int rv;
    char *got = fx_get(f, BKT, S("k"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_memory_equal(got, "v3", 2);
    mg_free(got);
}

static void test_update(void **state)
{
    struct fx *f = *state;
    assert_int_equal(fx_put(f, BKT, S("k"), "v", 1, NULL), 0);
    struct meta_object o1, o2;
    assert_int_equal(meta_object_get(f->ms, BKT, S("k"), &f->a, &o1), 0);
    struct meta_kv tags[2] = {{S("a"), S("1")}, {S("b"), S("")}};
    struct meta_object upd = {.tags = tags, .ntags = 2, .acl = META_ACL_PUBLIC_READ};
    assert_int_equal(meta_object_update(f->ms, BKT, S("k"), META_OBJECT_SET_TAGS, &upd), 0);
    assert_int_equal(meta_object_get(f->ms, BKT, S("k"), &f->a, &o2), 0);
    assert_int_equal(o2.ntags, 2);
    assert_int_equal(o2.acl, META_ACL_PRIVATE);
    assert_int_equal(o2.mtime_ms, o1.mtime_ms);
    assert_int_equal(meta_object_update(f->ms, BKT, S("k"), META_OBJECT_SET_ACL, &upd), 0);
    assert_int_equal(meta_object_get(f->ms, BKT, S("k"), &f->a, &o2), 0);
    assert_int_equal(o2.acl, META_ACL_PUBLIC_READ);
    assert_int_equal(o2.ntags, 2);
    assert_int_equal(meta_object_update(f->ms, BKT, S("nope"), META_OBJECT_SET_ACL, &upd),
                     MG_ENOSUCHKEY);
}

static void test_copy(void **state)
{
    struct fx *f = *state;
    static char big[3u << 20]; /* crosses the 1 MiB copy chunk */
    fx_fill(big, sizeof(big), 5);
    assert_int_equal(fx_put(f, BKT, S("src"), big, sizeof(big), NULL), 0);
    assert_int_equal(meta_bucket_create(f->ms, S("other"), S("alice"), META_ACL_PRIVATE), 0);
    struct meta_object dst = {.key = S("dst"), .content_type = S("text/x")}, out, src;
    assert_int_equal(meta_object_copy(f->ms, BKT, S("src"), S("other"), &dst, &f->a, &out), 0);
    assert_int_equal(meta_object_get(f->ms, BKT, S("src"), &f->a, &src), 0);
    assert_int_equal(out.size, sizeof(big));
    assert_int_equal(out.etag.len, 32);
    assert_memory_equal(out.etag.base, src.etag.base, 32);
    size_t len;
    int rv;
    char *got = fx_get(f, S("other"), S("dst"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_int_equal(len, sizeof(big));
    assert_memory_equal(got, big, sizeof(big));
    mg_free(got);
    struct meta_object d;
    assert_int_equal(meta_object_get(f->ms, S("other"), S("dst"), &f->a, &d), 0);
    assert_memory_equal(d.content_type.base, "text/x", 6);

    /* a range: etag = md5 of those bytes; small enough to be inline */
    char md5[33];
    fx_md5_hex(big + 1000, 50, md5);
    dst.key = S("range");
    assert_int_equal(meta_object_copy_range(f->ms, BKT, S("src"), 1000, 50, BKT, &dst, &f->a, &out),
                     0);
    assert_int_equal(out.size, 50);
    assert_memory_equal(out.etag.base, md5, 32);
    got = fx_get(f, BKT, S("range"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_memory_equal(got, big + 1000, 50);
    mg_free(got);
    assert_int_equal(
        meta_object_copy_range(f->ms, BKT, S("src"), sizeof(big) - 10, 11, BKT, &dst, &f->a, &out),
        MG_EINVALIDRANGE);
    assert_int_equal(meta_object_copy(f->ms, BKT, S("nope"), BKT, &dst, &f->a, &out),
                     MG_ENOSUCHKEY);
    assert_int_equal(meta_object_copy(f->ms, BKT, S("src"), S("nobucket"), &dst, &f->a, &out),
                     MG_ENOSUCHBUCKET);
    /* copy onto itself (metadata REPLACE): new bytes, old freed */
    dst.key = S("src");
    assert_int_equal(meta_object_copy(f->ms, BKT, S("src"), BKT, &dst, &f->a, &out), 0);
    got = fx_get(f, BKT, S("src"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_memory_equal(got, big, sizeof(big));
    mg_free(got);
}

struct worker {
    struct fx *f;
    uint32_t seed;
};

/* Puts, overwrites and deletes on 4 hot keys from several threads. */
static void *on_worker(void *arg)
{
    struct worker *w = arg;
    struct mg_arena a;
    char buf[2000];
    uint32_t x = w->seed;
    mg_arena_init(&a);
    for (int i = 0; i < 60; i++) {
        x = x * 1103515245u + 12345u;
        char key[4] = {'c', (char)('0' + (x >> 16) % 4), 0, 0};
        size_t len = FX_INLINE_MAX + 1 + (x >> 8) % 1900;
        if (i % 10 == 9) {
            if (meta_object_delete(w->f->ms, BKT, str_of(key, 2), NULL) != 0)
                return "delete failed";
            continue;
        }
        fx_fill(buf, len, x);
        struct meta_data_writer *dw;
        struct meta_object o = {.key = str_of(key, 2), .etag = S("e")};
        if (meta_data_writer_create(w->f->ms, len, &dw) != 0 ||
            meta_data_writer_append(dw, buf, len) != 0 ||
            meta_data_writer_finish(dw, &a, &o.data) != 0)
            return "write failed";
        if (meta_object_put(w->f->ms, BKT, &o, NULL) != 0)
            return "put failed";
    }
    mg_arena_close(&a);
    return NULL;
}

static void test_concurrent(void **state)
{
    struct fx *f = *state;
    pthread_t t[8];
    struct worker w[8];
    for (uint32_t i = 0; i < 8; i++) {
        w[i] = (struct worker){f, i + 1};
        assert_int_equal(pthread_create(&t[i], NULL, on_worker, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        void *res;
        assert_int_equal(pthread_join(t[i], &res), 0);
        assert_null(res);
    }
    for (int i = 0; i < 4; i++) {
        char key[2] = {'c', (char)('0' + i)};
        assert_int_equal(meta_object_delete(f->ms, BKT, str_of(key, 2), NULL), 0);
    }
    /* every blob written was freed exactly once: no leak, no double free */
    struct meta_stats st;
    meta_stats_get(f->ms, &st);
    assert_true(st.blobs.bytes_written > 0);
    assert_int_equal(st.blobs.bytes_freed, st.blobs.bytes_written);
    assert_int_equal(meta_bucket_delete(f->ms, BKT), 0);
}

int test_object_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_overwrite_frees, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_retire_waits_for_pins, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delete_many, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_conditional, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_update, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_copy, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("meta_object", tests, NULL, NULL);
}
