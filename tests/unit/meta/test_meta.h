/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fixture for the meta/ unit tests: a real store (RocksDB + blob store) in a
 * fresh temp directory per test, with a small inline threshold so tests
 * exercise both inline and blob-backed objects, and a bucket "bkt" owned by
 * "alice". Helpers put and read whole objects.
 */
#ifndef MG_TEST_META_H
#define MG_TEST_META_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "meta/internal.h"

#define FX_INLINE_MAX 64

struct fx {
    char dir[64];
    struct meta_store *ms;
    struct mg_arena a;
};

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})
#define BKT S("bkt")

static inline struct mg_str str_of(const char *p, size_t n)
{
    return (struct mg_str){p, n};
}

int fx_setup(void **state);
int fx_teardown(void **state);
/* Close and reopen the store in the same directory. */
void fx_reopen(struct fx *f);

/* Write bytes through a data writer into d (from f->a). */
void fx_data(struct fx *f, const void *bytes, size_t len, struct meta_data *d);
/* Put (bucket, key) = bytes with etag = md5; returns the op's rv. */
int fx_put(struct fx *f, struct mg_str bucket, struct mg_str key, const void *bytes, size_t len,
           const struct meta_put_cond *cond);
/* Read the whole object into a malloc'd buffer (*len); NULL when get fails (rv in *rv). */
char *fx_get(struct fx *f, struct mg_str bucket, struct mg_str key, size_t *len, int *rv);
void fx_md5_hex(const void *bytes, size_t len, char out[33]);
/* Deterministic pseudo-random fill. */
void fx_fill(void *buf, size_t len, uint32_t seed);

int test_key_run(void);
int test_bucket_run(void);
int test_object_run(void);
int test_list_run(void);
int test_mpu_run(void);
int test_store_run(void);
int test_wset_run(void);
int test_expire_run(void);
int test_shard_run(void);
int test_shard_fixture_run(void);
int test_scrub_run(void);
/* The kill -9 writer (test_store.c), run as "test_meta --kill9-child DIR". */
int test_store_kill9_child(const char *dir);

#endif
