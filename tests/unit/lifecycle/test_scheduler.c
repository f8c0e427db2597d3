/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lifecycle/scheduler.c on a real store (RocksDB + raft in a temp dir) with
 * lifecycle.day_seconds = 1: a due object is expired and an object no rule
 * matches stays, a stale incomplete upload is aborted, the figures move, and
 * after the store is closed and reopened, or killed with SIGKILL mid-expiry,
 * a new scheduler carries on (its progress lives in meta).
 */
extern char **environ;
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "meta/meta.h"
#include "tests/unit/lifecycle/test_lifecycle.h"

#define XML                                                                                   \
    "<LifecycleConfiguration><Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter>"    \
    "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"                  \
    "<Rule><ID>uploads</ID><Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status>"     \
    "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"            \
    "</AbortIncompleteMultipartUpload></Rule></LifecycleConfiguration>"

#define STR(lit) ((struct mg_str){(lit), sizeof(lit) - 1})

struct sx {
    char dir[64];
    struct meta_store *ms;
    struct lc_scheduler *sched;
    struct mg_arena a;
};

static void sx_open_rate(struct sx *x, uint64_t per_second)
{
    struct meta_opts o = {.data_dir = x->dir, .inline_max_bytes = 64, .lc_day_seconds = 1};
    char errmsg[256];
    int rv = meta_store_open(&o, &x->ms, errmsg);
    if (rv != 0)
        fail_msg("meta_store_open: %s %s", mg_err_name(rv), errmsg);
    struct lc_scheduler_opts so = {
        .day_seconds = 1, .idle_ms = 50, .max_per_second = per_second, .batch_max = 10};
    assert_int_equal(lc_scheduler_create(x->ms, &so, &x->sched), 0);
}

static void sx_open(struct sx *x)
{
    sx_open_rate(x, 0);
}

static void sx_close(struct sx *x)
{
    lc_scheduler_destroy(x->sched);
    x->sched = NULL;
    meta_store_close(x->ms);
    x->ms = NULL;
}

static int on_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void put(struct sx *x, const char *key)
{
    struct meta_data_writer *w;
    struct meta_object o = {.key = {key, strlen(key)}, .etag = STR("0123"), .owner = STR("a")};
    assert_int_equal(meta_data_writer_create(x->ms, 0, &w), 0);
    assert_int_equal(meta_data_writer_append(w, "data", 4), 0);
    assert_int_equal(meta_data_writer_finish(w, &x->a, &o.data), 0);
    o.size = o.data.size;
    assert_int_equal(meta_object_put(x->ms, STR("lc-bucket"), &o, NULL), 0);
}

static int exists(struct sx *x, const char *key)
{
    struct meta_object o;
    int rv = meta_object_get(x->ms, STR("lc-bucket"), (struct mg_str){key, strlen(key)}, &x->a, &o);
    assert_true(rv == 0 || rv == MG_ENOSUCHKEY);
    return rv == 0;
}

/* Run passes until key is gone (at most ~10 s: due after 1-2 s with day_seconds = 1). */
static void wait_gone(struct sx *x, const char *key)
{
    for (int i = 0; i < 100 && exists(x, key); i++) {
        usleep(100 * 1000);
        lc_scheduler_run_pass(x->sched);
    }
    assert_false(exists(x, key));
}

static void test_scheduler_expires_and_resumes(void **state)
{
    (void)state;
    struct sx x = {0};
    snprintf(x.dir, sizeof(x.dir), "/tmp/test_lc_sched.XXXXXX");
    assert_non_null(mkdtemp(x.dir));
    mg_arena_init(&x.a);
    sx_open(&x);
    assert_int_equal(meta_bucket_create(x.ms, STR("lc-bucket"), STR("a"), META_ACL_PRIVATE), 0);
    struct meta_bucket v = {.lifecycle = STR(XML)};
    assert_int_equal(meta_bucket_update(x.ms, STR("lc-bucket"), META_BUCKET_SET_LIFECYCLE, &v), 0);
    put(&x, "logs/a");
    put(&x, "keep/b");
    struct meta_object tmpl = {.key = STR("up/x"), .owner = STR("a")};
    struct mg_str uid;
    assert_int_equal(meta_mpu_create(x.ms, STR("lc-bucket"), &tmpl, &x.a, &uid), 0);

    wait_gone(&x, "logs/a");
    assert_true(exists(&x, "keep/b"));
    struct meta_object t;
    int rv = 0;
    for (int i = 0; i < 100; i++) {
        rv = meta_mpu_get(x.ms, STR("lc-bucket"), STR("up/x"), uid, &x.a, &t);
        if (rv == MG_ENOSUCHUPLOAD)
            break;
        usleep(100 * 1000);
        lc_scheduler_run_pass(x.sched);
    }
    assert_int_equal(rv, MG_ENOSUCHUPLOAD);
    struct meta_lifecycle_stats st;
    meta_lifecycle_stats_get(x.ms, &st);
    assert_true(st.expired >= 1);
    assert_int_equal(st.due_backlog, 0);

    /* a new scheduler on the reopened store (as after kill -9: nothing but meta's rows) */
    put(&x, "logs/c");
    sx_close(&x);
    sx_open(&x);
    wait_gone(&x, "logs/c");
    assert_true(exists(&x, "keep/b"));
    sx_close(&x);
    mg_arena_close(&x.a);
    nftw(x.dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Rules put after the objects: the scheduler's re-index gives them due rows, then expires. */
static void test_scheduler_reindex(void **state)
{
    (void)state;
    struct sx x = {0};
    snprintf(x.dir, sizeof(x.dir), "/tmp/test_lc_sched.XXXXXX");
    assert_non_null(mkdtemp(x.dir));
    mg_arena_init(&x.a);
    sx_open(&x);
    assert_int_equal(meta_bucket_create(x.ms, STR("lc-bucket"), STR("a"), META_ACL_PRIVATE), 0);
    put(&x, "logs/early");
    struct meta_bucket v = {.lifecycle = STR(XML)};
    assert_int_equal(meta_bucket_update(x.ms, STR("lc-bucket"), META_BUCKET_SET_LIFECYCLE, &v), 0);
    wait_gone(&x, "logs/early");
    sx_close(&x);
    mg_arena_close(&x.a);
    nftw(x.dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
}

#define KILL9_OBJECTS 60

static size_t count_prefix(struct sx *x, const char *prefix)
{
    struct meta_list_req req = {.prefix = {prefix, strlen(prefix)}, .max_keys = 1000};
    struct meta_list_result r;
    assert_int_equal(meta_object_list(x->ms, STR("lc-bucket"), &req, &x->a, &r), 0);
    return r.nobjects;
}

/* The child: objects due after ~1 s, a scheduler at 20 objects/s; "ready" once all are put,
 * then it runs until killed. */
int test_scheduler_kill9_child(const char *dir)
{
    struct sx x = {0};
    snprintf(x.dir, sizeof(x.dir), "%s", dir);
    mg_arena_init(&x.a);
    sx_open_rate(&x, 20);
    assert_int_equal(meta_bucket_create(x.ms, STR("lc-bucket"), STR("a"), META_ACL_PRIVATE), 0);
    struct meta_bucket v = {.lifecycle = STR(XML)};
    assert_int_equal(meta_bucket_update(x.ms, STR("lc-bucket"), META_BUCKET_SET_LIFECYCLE, &v), 0);
    put(&x, "keep/x");
    for (int i = 0; i < KILL9_OBJECTS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "logs/%03d", i);
        put(&x, key);
    }
    char path[128];
    snprintf(path, sizeof(path), "%s/ready", dir);
    close(open(path, O_CREAT | O_WRONLY, 0600));
    for (;;)
        pause();
}

/* kill -9 mid-expiry: after the restart nothing live is lost, expiry resumes and finishes. */
static void test_scheduler_kill9(void **state)
{
    (void)state;
    struct sx x = {0};
    snprintf(x.dir, sizeof(x.dir), "/tmp/test_lc_sched.XXXXXX");
    assert_non_null(mkdtemp(x.dir));
    mg_arena_init(&x.a);
    char *argv[] = {"test_lifecycle", "--kill9-child", x.dir, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/ready", x.dir);
    for (int i = 0; i < 300 && access(path, F_OK) != 0; i++)
        usleep(50 * 1000);
    assert_int_equal(access(path, F_OK), 0);
    usleep(3000 * 1000); /* due after 1-2 s; at 20/s the child is mid-way */
    kill(pid, SIGKILL);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);

    struct meta_opts o = {.data_dir = x.dir, .inline_max_bytes = 64, .lc_day_seconds = 1};
    char errmsg[256];
    assert_int_equal(meta_store_open(&o, &x.ms, errmsg), 0);
    size_t left = count_prefix(&x, "logs/");
    printf("kill9: %zu of %d due objects left at the restart\n", left, KILL9_OBJECTS);
    assert_true(left < KILL9_OBJECTS); /* the child expired some... */
    assert_true(exists(&x, "keep/x"));
    struct lc_scheduler_opts so = {.day_seconds = 1, .idle_ms = 50};
    assert_int_equal(lc_scheduler_create(x.ms, &so, &x.sched), 0);
    for (int i = 0; i < 100 && count_prefix(&x, "logs/") > 0; i++) {
        usleep(100 * 1000);
        lc_scheduler_run_pass(x.sched);
    }
    assert_int_equal(count_prefix(&x, "logs/"), 0); /* ...the new scheduler the rest */
    assert_true(exists(&x, "keep/x"));
    sx_close(&x);
    mg_arena_close(&x.a);
    nftw(x.dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int test_scheduler_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheduler_expires_and_resumes),
        cmocka_unit_test(test_scheduler_reindex),
        cmocka_unit_test(test_scheduler_kill9),
    };
    return cmocka_run_group_tests_name("lifecycle_scheduler", tests, NULL, NULL);
}
