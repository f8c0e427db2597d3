/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/store.c: acknowledged writes survive kill -9 (WAL fsynced on apply, blobs
 * fsynced before the entry commits), the metadata format version check at open. The writer is this binary re-executed as a child
 * ("--kill9-child DIR"), so no RocksDB state crosses a fork. */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/meta/test_meta.h"

extern char **environ;

/* Size of object i: inline, a small blob, or a 100 KiB blob. */
static size_t kill9_size(unsigned i)
{
    return i % 3 == 0 ? 10 : i % 3 == 1 ? 3000 : 100000;
}

int test_store_kill9_child(const char *dir)
{
    struct meta_opts o = {.data_dir = dir, .wal = 1, .inline_max_bytes = FX_INLINE_MAX};
    struct meta_store *ms;
    char errmsg[256];
    if (meta_store_open(&o, &ms, errmsg) != 0)
        return 2;
    static char buf[100000];
    for (unsigned i = 0;; i++) {
        struct mg_arena a;
        struct meta_data_writer *w;
        char key[16];
        int kl = snprintf(key, sizeof(key), "k%06u", i);
        struct meta_object obj = {.key = str_of(key, (size_t)kl), .etag = S("e")};
        mg_arena_init(&a);
        fx_fill(buf, kill9_size(i), i);
        if (meta_data_writer_create(ms, kill9_size(i), &w) != 0 ||
            meta_data_writer_append(w, buf, kill9_size(i)) != 0 ||
            meta_data_writer_finish(w, &a, &obj.data) != 0 ||
            meta_object_put(ms, BKT, &obj, NULL) != 0)
            return 3;
        mg_arena_close(&a);
        /* acknowledged: the put returned */
        if (write(STDOUT_FILENO, &i, sizeof(i)) != (ssize_t)sizeof(i))
            return 4;
    }
}

static void test_kill9(void **state)
{
    struct fx *f = *state;
    meta_store_close(f->ms);
    f->ms = NULL;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    char *argv[] = {"test_meta", "--kill9-child", f->dir, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    unsigned last = 0, acked = 0;
    while (acked < 150 && read(pfd[0], &last, sizeof(last)) == (ssize_t)sizeof(last))
        acked++;
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    close(pfd[0]);
    assert_int_equal(acked, 150);
    assert_true(WIFSIGNALED(status));

    fx_reopen(f);
    static char want[100000];
    for (unsigned i = 0; i <= last; i++) {
        char key[16];
        int kl = snprintf(key, sizeof(key), "k%06u", i);
        size_t len;
        int rv;
        char *got = fx_get(f, BKT, str_of(key, (size_t)kl), &len, &rv);
        assert_int_equal(rv, 0);
        assert_int_equal(len, kill9_size(i));
        fx_fill(want, len, i);
        assert_memory_equal(got, want, len);
        mg_free(got);
    }
    /* the store is writable after recovery */
    assert_int_equal(fx_put(f, BKT, S("after"), "x", 1, NULL), 0);
}

/* Set (version != 0) or delete (version 0) the format row of the closed store in dir. */
static void set_format_row(const char *dir, uint32_t version)
{
    char path[128], errmsg[256];
    snprintf(path, sizeof(path), "%s/db", dir);
    struct eng_db_opts dbo = {.wal = 1};
    struct eng_db *db;
    assert_int_equal(eng_db_open(path, &dbo, &db, errmsg), 0);
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_sys_version(&k);
    meta__put_u32(&v, version);
    struct eng_batch *b = eng_batch_create();
    if (version != 0)
        eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
    else
        eng_batch_delete(b, ENG_CF_META, k.base, k.len);
    assert_int_equal(eng_batch_commit(db, b, 1), 0);
    eng_batch_destroy(b);
    eng_db_close(db);
    mg_buf_close(&k);
    mg_buf_close(&v);
}

static int open_dir(const char *dir, struct meta_store **ms, char errmsg[256])
{
    struct meta_opts o = {.data_dir = dir, .wal = 1, .inline_max_bytes = FX_INLINE_MAX};
    return meta_store_open(&o, ms, errmsg);
}

/* A fresh store records format 2; a DB without the row (format 1) or with another version
 * is refused with MG_ECORRUPT and a message naming both formats, and nothing is changed. */
static void test_format_version(void **state)
{
    struct fx *f = *state;
    struct mg_buf k, v;
    int found = 0;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_sys_version(&k);
    assert_int_equal(meta__get(f->ms, ENG_CF_META, &k, &v, &found), 0);
    assert_true(found && v.len == 4);
    assert_int_equal(meta__get_u32(v.base), 2);
    mg_buf_close(&k);
    mg_buf_close(&v);
    meta_store_close(f->ms);
    f->ms = NULL;

    char errmsg[256], want[192];
    struct meta_store *ms = NULL;
    set_format_row(f->dir, 0); /* rows (the bucket) but no version: format 1 */
    for (int round = 0; round < 2; round++) { /* a refused open writes nothing */
        assert_int_equal(open_dir(f->dir, &ms, errmsg), MG_ECORRUPT);
        snprintf(want, sizeof(want), "data directory %s holds metadata format 1; this metagate "
                 "needs format 2 (start with an empty data_dir)", f->dir);
        assert_string_equal(errmsg, want);
    }
    set_format_row(f->dir, 1);
    assert_int_equal(open_dir(f->dir, &ms, errmsg), MG_ECORRUPT);
    assert_string_equal(errmsg, want);
    set_format_row(f->dir, 3);
    assert_int_equal(open_dir(f->dir, &ms, errmsg), MG_ECORRUPT);
    assert_non_null(strstr(errmsg, "holds metadata format 3; this metagate needs format 2"));

    set_format_row(f->dir, 2);
    assert_int_equal(open_dir(f->dir, &ms, errmsg), 0);
    f->ms = ms;
    f->ms->free_grace_ms = 0;
    struct meta_bucket b;
    assert_int_equal(meta_bucket_get(f->ms, BKT, &f->a, &b), 0);
}

int test_store_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill9, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_format_version, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("meta_store", tests, NULL, NULL);
}
