/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/bucket.c: name rules, create/owned/exists, delete of non-empty buckets
 * (objects and in-progress uploads), list by owner, update, persistence across reopen. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/meta/test_meta.h"

static void test_name_rules(void **state)
{
    (void)state;
    static const char *ok[] = {"abc", "my-bucket", "my.bucket.1",    "a1b2c3",
                               "0ab", "a--b",      "xyz.example.com"};
    static const char *bad[] = {
        "ab",       "ABC",         "my_bucket",  "-abc",       "abc-",           ".abc",
        "abc.",     "a..b",        "a.-b",       "a-.b",       "192.168.5.4",    "xn--abc",
        "sthree-x", "abc-s3alias", "abc--ol-s3", "b\xc3\xa9t", "amzn-s3-demo-x", "abc.mrap",
        "a b c"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_int_equal(meta_bucket_name_check(str_of(ok[i], strlen(ok[i]))), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(meta_bucket_name_check(str_of(bad[i], strlen(bad[i]))),
                         MG_EINVALIDBUCKETNAME);
    char long_name[65];
    memset(long_name, 'a', 64);
    assert_int_equal(meta_bucket_name_check(str_of(long_name, 63)), 0);
    assert_int_equal(meta_bucket_name_check(str_of(long_name, 64)), MG_EINVALIDBUCKETNAME);
    /* a valid IPv4-like name needs exactly 4 numeric labels */
    assert_int_equal(meta_bucket_name_check(S("1.2.3")), 0);
}

static void test_create_get(void **state)
{
    struct fx *f = *state;
    struct meta_bucket b;
    assert_int_equal(meta_bucket_create(f->ms, BKT, S("alice"), META_ACL_PRIVATE), MG_EBUCKETOWNED);
    assert_int_equal(meta_bucket_create(f->ms, BKT, S("bob"), META_ACL_PRIVATE), MG_EBUCKETEXISTS);
    assert_int_equal(meta_bucket_create(f->ms, S("Bad_Name"), S("bob"), META_ACL_PRIVATE),
                     MG_EINVALIDBUCKETNAME);
    assert_int_equal(meta_bucket_create(f->ms, S("bob-1"), S("bob"), META_ACL_PUBLIC_READ), 0);
    assert_int_equal(meta_bucket_get(f->ms, S("bob-1"), &f->a, &b), 0);
    assert_int_equal(b.acl, META_ACL_PUBLIC_READ);
    assert_memory_equal(b.owner.base, "bob", 3);
    assert_memory_equal(b.name.base, "bob-1", 5);
    uint64_t id1 = b.id;
    assert_int_equal(meta_bucket_get(f->ms, BKT, &f->a, &b), 0);
    assert_true(b.id != id1 && b.id != 0);
    assert_true(b.created_ms > 0);
    assert_int_equal(meta_bucket_get(f->ms, S("nope"), &f->a, &b), MG_ENOSUCHBUCKET);

    struct meta_bucket *list;
    size_t n;
    assert_int_equal(meta_bucket_list(f->ms, S(""), &f->a, &list, &n), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(list[0].name.base, "bkt", 3); /* by name */
    assert_int_equal(meta_bucket_list(f->ms, S("bob"), &f->a, &list, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].id, id1);

    struct meta_kv tags[1] = {{S("team"), S("x")}};
    struct meta_bucket upd = {.acl = META_ACL_PUBLIC_READ_WRITE,
                              .tags = tags,
                              .ntags = 1,
                              .lifecycle = S("<LifecycleConfiguration/>")};
    assert_int_equal(meta_bucket_update(f->ms, S("bob-1"),
                                        META_BUCKET_SET_TAGS | META_BUCKET_SET_LIFECYCLE, &upd),
                     0);
    assert_int_equal(meta_bucket_get(f->ms, S("bob-1"), &f->a, &b), 0);
    assert_int_equal(b.acl, META_ACL_PUBLIC_READ); /* not in the mask */
    assert_int_equal(b.ntags, 1);
    assert_int_equal(b.lifecycle.len, strlen("<LifecycleConfiguration/>"));
    assert_int_equal(meta_bucket_update(f->ms, S("nope"), META_BUCKET_SET_ACL, &upd),
                     MG_ENOSUCHBUCKET);

    struct meta_stats st;
    meta_stats_get(f->ms, &st);
    assert_int_equal(st.buckets, 2);
}

static void test_delete_not_empty(void **state)
{
    struct fx *f = *state;
    assert_int_equal(fx_put(f, BKT, S("k"), "hello", 5, NULL), 0);
    struct meta_bucket before;
    assert_int_equal(meta_bucket_get(f->ms, BKT, &f->a, &before), 0); /* cached now */
    assert_int_equal(meta_bucket_delete(f->ms, BKT), MG_EBUCKETNOTEMPTY);
    int existed = 0;
    assert_int_equal(meta_object_delete(f->ms, BKT, S("k"), &existed), 0);
    assert_true(existed);

    /* an in-progress upload keeps the bucket non-empty too */
    struct meta_object t = {.key = S("big"), .owner = S("alice")};
    struct mg_str uid;
    assert_int_equal(meta_mpu_create(f->ms, BKT, &t, &f->a, &uid), 0);
    assert_int_equal(meta_bucket_delete(f->ms, BKT), MG_EBUCKETNOTEMPTY);
    assert_int_equal(meta_mpu_abort(f->ms, BKT, S("big"), uid), 0);

    assert_int_equal(meta_bucket_delete(f->ms, BKT), 0);
    assert_int_equal(meta_bucket_delete(f->ms, BKT), MG_ENOSUCHBUCKET);
    struct meta_bucket b;
    assert_int_equal(meta_bucket_get(f->ms, BKT, &f->a, &b), MG_ENOSUCHBUCKET);
    assert_int_equal(fx_put(f, BKT, S("k"), "x", 1, NULL), MG_ENOSUCHBUCKET);

    /* re-create: a new id (not a cached old record), empty */
    assert_int_equal(meta_bucket_create(f->ms, BKT, S("alice"), META_ACL_PRIVATE), 0);
    assert_int_equal(meta_bucket_get(f->ms, BKT, &f->a, &b), 0);
    assert_true(b.id > before.id);
    struct meta_list_req req = {.max_keys = 1000};
    struct meta_list_result res;
    assert_int_equal(meta_object_list(f->ms, BKT, &req, &f->a, &res), 0);
    assert_int_equal(res.nobjects, 0);
}

static void test_reopen(void **state)
{
    struct fx *f = *state;
    char big[1000];
    fx_fill(big, sizeof(big), 3);
    assert_int_equal(fx_put(f, BKT, S("small"), "abc", 3, NULL), 0);
    assert_int_equal(fx_put(f, BKT, S("big"), big, sizeof(big), NULL), 0);
    fx_reopen(f);
    assert_int_equal(meta_bucket_create(f->ms, S("second"), S("alice"), META_ACL_PRIVATE), 0);
    struct meta_bucket b1, b2;
    assert_int_equal(meta_bucket_get(f->ms, BKT, &f->a, &b1), 0);
    assert_int_equal(meta_bucket_get(f->ms, S("second"), &f->a, &b2), 0);
    assert_true(b2.id > b1.id); /* the id sequence survived */
    size_t len;
    int rv;
    char *got = fx_get(f, BKT, S("big"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_int_equal(len, sizeof(big));
    assert_memory_equal(got, big, sizeof(big));
    mg_free(got);
    got = fx_get(f, BKT, S("small"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_memory_equal(got, "abc", 3);
    mg_free(got);
}

static atomic_int race_stop;

/* Put then delete its own key until the bucket is gone; multipart creates too. */
static void *on_racer(void *arg)
{
    struct fx *f = arg;
    struct mg_arena a;
    mg_arena_init(&a);
    char key[16];
    snprintf(key, sizeof(key), "r%p", (void *)&a);
    while (!atomic_load(&race_stop)) {
        struct meta_object o = {.key = str_of(key, strlen(key)),
                                .etag = S("e"),
                                .data = {.size = 1, .inline_data = S("x")}};
        int rv = meta_object_put(f->ms, BKT, &o, NULL);
        if (rv == MG_ENOSUCHBUCKET)
            break;
        if (rv == 0)
            meta_object_delete(f->ms, BKT, o.key, NULL);
        struct mg_str uid;
        if (meta_mpu_create(f->ms, BKT, &o, &a, &uid) == 0)
            meta_mpu_abort(f->ms, BKT, o.key, uid);
    }
    mg_arena_close(&a);
    return NULL;
}

/* Bucket delete vs concurrent writes: once the delete succeeds, nothing is left under the
 * bucket's id (writes hold the bucket lock for reading, delete for writing). */
static void test_delete_race(void **state)
{
    struct fx *f = *state;
    uint64_t id;
    assert_int_equal(meta__bucket_id(f->ms, BKT, &id), 0);
    atomic_store(&race_stop, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, on_racer, f), 0);
    int rv, tries = 0;
    while ((rv = meta_bucket_delete(f->ms, BKT)) == MG_EBUCKETNOTEMPTY && tries < 100000)
        tries++;
    atomic_store(&race_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(rv, 0);
    /* nothing of the bucket is left: its whole key range is empty */
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_bucket_range(id, &lo, &hi);
    struct eng_iter *it = eng_iter_create(f->ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    assert_false(eng_iter_valid(it));
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
}

int test_bucket_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_rules),
        cmocka_unit_test_setup_teardown(test_create_get, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delete_not_empty, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_reopen, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delete_race, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("meta_bucket", tests, NULL, NULL);
}
