/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for engine/db.c, the RocksDB KV store: point reads and writes per
 * column family, batches with range deletes, bounded iteration in both
 * directions, persistence across reopen (WAL on, and WAL off plus flush),
 * concurrent sync committers, compaction and properties.
 */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "tests/unit/engine/helpers.h"

struct fix {
    char *dir;          /* temporary directory */
    struct eng_db *db;  /* open store */
};

static int db_reopen(struct fix *f, int wal)
{
    char errmsg[256] = "";
    struct eng_db_opts o = {.wal = wal, .block_cache_bytes = 4u << 20};
    eng_db_close(f->db);
    f->db = NULL;
    int rv = eng_db_open(f->dir, &o, &f->db, errmsg);
    if (rv != 0)
        fprintf(stderr, "eng_db_open: %s\n", errmsg);
    return rv;
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);
    f->dir = test_tmpdir();
    if (db_reopen(f, 1) != 0)
        return -1;
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

static void put1(struct eng_db *db, enum eng_cf cf, const char *k, const char *v, int sync)
{
    struct eng_batch *b = eng_batch_create();
    eng_batch_put(b, cf, k, strlen(k), v, strlen(v));
    assert_int_equal(eng_batch_commit(db, b, sync), 0);
    eng_batch_destroy(b);
}

/* 0 and the value in out (NUL-terminated), or the error. */
static int get1(struct eng_db *db, enum eng_cf cf, const char *k, char *out, size_t cap)
{
    struct mg_buf v;
    mg_buf_init(&v);
    int rv = eng_get(db, cf, k, strlen(k), &v);
    if (rv == 0) {
        assert_true(v.len < cap);
        memcpy(out, v.base, v.len);
        out[v.len] = 0;
    }
    mg_buf_close(&v);
    return rv;
}

/* Keys of [lower, upper) joined by ',' into out. */
static void scan(struct eng_db *db, const char *lower, const char *upper, char *out)
{
    struct eng_iter *it = eng_iter_create(db, ENG_CF_META, lower, lower ? strlen(lower) : 0,
                                          upper, upper ? strlen(upper) : 0);
    out[0] = 0;
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl;
        const char *k = eng_iter_key(it, &kl);
        strncat(out, k, kl);
        strcat(out, ",");
    }
    assert_int_equal(eng_iter_status(it), 0);
    eng_iter_destroy(it);
}

static void test_put_get_delete(void **state)
{
    struct fix *f = *state;
    char v[64];
    put1(f->db, ENG_CF_META, "Mkey", "value1", 1);
    assert_int_equal(get1(f->db, ENG_CF_META, "Mkey", v, sizeof v), 0);
    assert_string_equal(v, "value1");
    /* Column families are separate keyspaces. */
    assert_int_equal(get1(f->db, ENG_CF_INDEX, "Mkey", v, sizeof v), MG_ENOTFOUND);
    put1(f->db, ENG_CF_META, "Mkey", "value2", 0);
    assert_int_equal(get1(f->db, ENG_CF_META, "Mkey", v, sizeof v), 0);
    assert_string_equal(v, "value2");

    struct eng_batch *b = eng_batch_create();
    eng_batch_delete(b, ENG_CF_META, "Mkey", 4);
    eng_batch_put(b, ENG_CF_INDEX, "I1", 2, "", 0); /* empty value */
    assert_int_equal(eng_batch_count(b), 2);
    assert_int_equal(eng_batch_commit(f->db, b, 1), 0);
    eng_batch_destroy(b);
    assert_int_equal(get1(f->db, ENG_CF_META, "Mkey", v, sizeof v), MG_ENOTFOUND);
    assert_int_equal(get1(f->db, ENG_CF_INDEX, "I1", v, sizeof v), 0);
    assert_string_equal(v, "");

    /* Binary keys with NUL bytes. */
    struct eng_batch *b2 = eng_batch_create();
    eng_batch_put(b2, ENG_CF_META, "a\0b", 3, "x\0y", 3);
    assert_int_equal(eng_batch_commit(f->db, b2, 0), 0);
    eng_batch_destroy(b2);
    struct mg_buf out;
    mg_buf_init(&out);
    assert_int_equal(eng_get(f->db, ENG_CF_META, "a\0b", 3, &out), 0);
    assert_int_equal(out.len, 3);
    assert_memory_equal(out.base, "x\0y", 3);
    assert_int_equal(eng_get(f->db, ENG_CF_META, "a", 1, &out), MG_ENOTFOUND);
    mg_buf_close(&out);
    /* Empty batch commits trivially. */
    struct eng_batch *b3 = eng_batch_create();
    assert_int_equal(eng_batch_commit(f->db, b3, 1), 0);
    eng_batch_destroy(b3);
}

static void put_letters(struct eng_db *db)
{
    struct eng_batch *b = eng_batch_create();
    for (char c = 'a'; c <= 'j'; c++) {
        char k[2] = {c, 0};
        eng_batch_put(b, ENG_CF_META, k, 1, k, 1);
    }
    assert_int_equal(eng_batch_commit(db, b, 0), 0);
    eng_batch_destroy(b);
}

static void test_iterate_bounds(void **state)
{
    struct fix *f = *state;
    char out[256];
    put_letters(f->db);
    scan(f->db, "c", "g", out);
    assert_string_equal(out, "c,d,e,f,");
    scan(f->db, "h", NULL, out);
    assert_string_equal(out, "h,i,j,");
    scan(f->db, NULL, "b", out);
    assert_string_equal(out, "a,");
    scan(f->db, "cc", "d", out);
    assert_string_equal(out, "");

    struct eng_iter *it = eng_iter_create(f->db, ENG_CF_META, "c", 1, "g", 1);
    eng_iter_seek(it, "e", 1);
    assert_true(eng_iter_valid(it));
    size_t kl, vl;
    assert_memory_equal(eng_iter_key(it, &kl), "e", 1);
    assert_memory_equal(eng_iter_value(it, &vl), "e", 1);
    eng_iter_seek(it, "a", 1); /* below lower: clamps to lower */
    assert_memory_equal(eng_iter_key(it, &kl), "c", 1);
    eng_iter_seek_to_last(it);
    assert_memory_equal(eng_iter_key(it, &kl), "f", 1);
    eng_iter_prev(it);
    assert_memory_equal(eng_iter_key(it, &kl), "e", 1);
    eng_iter_seek(it, "z", 1);
    assert_false(eng_iter_valid(it));
    assert_int_equal(eng_iter_status(it), 0);

    /* A snapshot: writes after creation are invisible to the iterator. */
    put1(f->db, ENG_CF_META, "d5", "new", 0);
    eng_iter_seek(it, "d", 1);
    eng_iter_next(it);
    assert_memory_equal(eng_iter_key(it, &kl), "e", 1);
    eng_iter_destroy(it);
    scan(f->db, "d", "e", out);
    assert_string_equal(out, "d,d5,");
}

static void test_delete_range(void **state)
{
    struct fix *f = *state;
    char out[256];
    put_letters(f->db);
    struct eng_batch *b = eng_batch_create();
    eng_batch_delete_range(b, ENG_CF_META, "b", 1, "e", 1);
    eng_batch_delete_range(b, ENG_CF_META, "i", 1, "z", 1);
    assert_int_equal(eng_batch_commit(f->db, b, 1), 0);
    /* The batch is unchanged and can be committed again (idempotent here). */
    assert_int_equal(eng_batch_count(b), 2);
    assert_int_equal(eng_batch_commit(f->db, b, 1), 0);
    eng_batch_destroy(b);
    scan(f->db, NULL, NULL, out);
    assert_string_equal(out, "a,e,f,g,h,");
}

static void test_reopen_wal(void **state)
{
    struct fix *f = *state;
    char v[64];
    put1(f->db, ENG_CF_META, "persist", "yes", 1);
    put1(f->db, ENG_CF_INDEX, "idx", "1", 1);
    assert_int_equal(db_reopen(f, 1), 0);
    assert_int_equal(get1(f->db, ENG_CF_META, "persist", v, sizeof v), 0);
    assert_string_equal(v, "yes");
    assert_int_equal(get1(f->db, ENG_CF_INDEX, "idx", v, sizeof v), 0);

    /* WAL off: sync is ignored; a flush makes the writes durable. */
    assert_int_equal(db_reopen(f, 0), 0);
    put1(f->db, ENG_CF_META, "nowal", "flushed", 1);
    assert_int_equal(eng_db_flush(f->db), 0);
    assert_int_equal(db_reopen(f, 0), 0);
    assert_int_equal(get1(f->db, ENG_CF_META, "nowal", v, sizeof v), 0);
    assert_string_equal(v, "flushed");
    assert_int_equal(get1(f->db, ENG_CF_META, "persist", v, sizeof v), 0);
}

static void test_open_error(void **state)
{
    (void)state;
    char errmsg[256] = "";
    struct eng_db *db = NULL;
    struct eng_db_opts o = {.wal = 1};
    int rv = eng_db_open("/proc/definitely/not/here", &o, &db, errmsg);
    assert_int_not_equal(rv, 0);
    assert_null(db);
    assert_true(strlen(errmsg) > 0);
}

#define SYNC_THREADS 8
#define SYNC_COMMITS 50

struct committer {
    struct eng_db *db; /* shared */
    int id;            /* thread number */
};

static void *on_commit_thread(void *arg)
{
    struct committer *c = arg;
    for (int i = 0; i < SYNC_COMMITS; i++) {
        char k[32];
        snprintf(k, sizeof k, "t%02d-%04d", c->id, i);
        struct eng_batch *b = eng_batch_create();
        eng_batch_put(b, ENG_CF_META, k, strlen(k), k, strlen(k));
        if (eng_batch_commit(c->db, b, 1) != 0)
            return (void *)1;
        eng_batch_destroy(b);
    }
    return NULL;
}

/* Sync committers on several threads share one rocksdb_t (and its group commit). */
static void test_concurrent_sync_commits(void **state)
{
    struct fix *f = *state;
    pthread_t th[SYNC_THREADS];
    struct committer c[SYNC_THREADS];
    for (int i = 0; i < SYNC_THREADS; i++) {
        c[i] = (struct committer){f->db, i};
        assert_int_equal(pthread_create(&th[i], NULL, on_commit_thread, &c[i]), 0);
    }
    for (int i = 0; i < SYNC_THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        assert_null(r);
    }
    assert_int_equal(db_reopen(f, 1), 0);
    struct eng_iter *it = eng_iter_create(f->db, ENG_CF_META, "t", 1, "u", 1);
    int n = 0;
    for (; eng_iter_valid(it); eng_iter_next(it))
        n++;
    eng_iter_destroy(it);
    assert_int_equal(n, SYNC_THREADS * SYNC_COMMITS);
}

static void test_compact_and_properties(void **state)
{
    struct fix *f = *state;
    char out[64];
    struct eng_batch *b = eng_batch_create();
    for (int i = 0; i < 2000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%05d", i);
        eng_batch_put(b, ENG_CF_META, k, strlen(k), "v", 1);
    }
    assert_int_equal(eng_batch_commit(f->db, b, 0), 0);
    eng_batch_destroy(b);
    assert_int_equal(eng_db_flush(f->db), 0);
    assert_true(eng_db_property_int(f->db, "rocksdb.estimate-num-keys") >= 1000);
    assert_int_equal(eng_db_property_int(f->db, "rocksdb.no-such-property"), 0);

    b = eng_batch_create();
    for (int i = 0; i < 2000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%05d", i);
        eng_batch_delete(b, ENG_CF_META, k, strlen(k));
    }
    assert_int_equal(eng_batch_commit(f->db, b, 0), 0);
    eng_batch_destroy(b);
    assert_int_equal(eng_db_flush(f->db), 0);
    assert_int_equal(eng_compact_range(f->db, ENG_CF_META, "k", 1, "l", 1), 0);
    assert_int_equal(eng_compact_range(f->db, ENG_CF_META, NULL, 0, NULL, 0), 0);
    scan(f->db, "k", "l", out);
    assert_string_equal(out, "");
    assert_int_equal(eng_db_property_int(f->db, "rocksdb.estimate-num-keys"), 0);
}

/* kill -9 (STYLE.md 7): a child acknowledges sync commits through a pipe; it is killed
 * mid-stream; every acknowledged key must be there after reopen (the WAL replays it). */
static void test_kill9(void **state)
{
    struct fix *f = *state;
    int p[2];
    uint32_t i, acked = 0;
    eng_db_close(f->db); /* the child owns the directory now */
    f->db = NULL;
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        if (db_reopen(f, 1) != 0)
            _exit(1);
        for (i = 0;; i++) {
            char k[16];
            snprintf(k, sizeof k, "kill%08u", i);
            put1(f->db, ENG_CF_META, k, k, 1);
            if (write(p[1], &i, sizeof i) != (ssize_t)sizeof i)
                _exit(3);
        }
    }
    close(p[1]);
    while (read(p[0], &i, sizeof i) == (ssize_t)sizeof i) {
        acked = i + 1;
        if (acked == 200)
            kill(pid, SIGKILL);
    }
    close(p[0]);
    waitpid(pid, NULL, 0);
    assert_true(acked >= 200);
    assert_int_equal(db_reopen(f, 1), 0);
    for (i = 0; i < acked; i++) {
        char k[16], v[16];
        snprintf(k, sizeof k, "kill%08u", i);
        assert_int_equal(get1(f->db, ENG_CF_META, k, v, sizeof v), 0);
        assert_string_equal(v, k);
    }
}

int test_db_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_put_get_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_iterate_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_wal, setup, teardown),
        cmocka_unit_test(test_open_error),
        cmocka_unit_test_setup_teardown(test_concurrent_sync_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compact_and_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9, setup, teardown),
    };
    return cmocka_run_group_tests_name("engine/db", tests, NULL, NULL);
}
