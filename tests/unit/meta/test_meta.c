/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_meta: the meta/ unit test binary. Holds the fixture (a real store in a
 * temp dir) and runs every group; the exit code is the number of failures.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "tests/unit/meta/test_meta.h"

static int on_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void fx_open(struct fx *f)
{
    struct meta_opts o = {.data_dir = f->dir, .wal = 1, .inline_max_bytes = FX_INLINE_MAX};
    char errmsg[256];
    int rv = meta_store_open(&o, &f->ms, errmsg);
    if (rv != 0)
        fail_msg("meta_store_open: %s %s", mg_err_name(rv), errmsg);
    f->ms->free_grace_ms = 0; /* frees at once: tests assert on bytes_freed */
}

int fx_setup(void **state)
{
    struct fx *f = mg_calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/test_meta.XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        return -1;
    fx_open(f);
    mg_arena_init(&f->a);
    assert_int_equal(meta_bucket_create(f->ms, BKT, S("alice"), META_ACL_PRIVATE), 0);
    *state = f;
    return 0;
}

int fx_teardown(void **state)
{
    struct fx *f = *state;
    if (f->ms != NULL)
        meta_store_close(f->ms);
    mg_arena_close(&f->a);
    nftw(f->dir, on_rm, 16, FTW_DEPTH | FTW_PHYS);
    mg_free(f);
    return 0;
}

void fx_reopen(struct fx *f)
{
    meta_store_close(f->ms);
    fx_open(f);
}

void fx_md5_hex(const void *bytes, size_t len, char out[33])
{
    uint8_t d[16];
    unsigned n = 0;
    EVP_Digest(bytes, len, d, &n, EVP_md5(), NULL);
    mg_hex_encode(d, 16, out);
}

void fx_fill(void *buf, size_t len, uint32_t seed)
{
    uint8_t *p = buf;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

void fx_data(struct fx *f, const void *bytes, size_t len, struct meta_data *d)
{
    struct meta_data_writer *w;
    assert_int_equal(meta_data_writer_create(f->ms, 0, &w), 0);
    /* odd-sized appends cross the inline threshold mid-call */
    const char *p = bytes;
    size_t done = 0;
    while (done < len) {
        size_t n = len - done < 37 ? len - done : 37;
        if (len > 4096)
            n = len - done;
        assert_int_equal(meta_data_writer_append(w, p + done, n), 0);
        done += n;
    }
    assert_int_equal(meta_data_writer_finish(w, &f->a, d), 0);
    assert_int_equal(d->size, len);
}

int fx_put(struct fx *f, struct mg_str bucket, struct mg_str key, const void *bytes, size_t len,
           const struct meta_put_cond *cond)
{
    struct meta_object o = {0};
    char *etag = mg_arena_alloc(&f->a, 33);
    fx_md5_hex(bytes, len, etag);
    o.key = key;
    o.etag = str_of(etag, 32);
    o.owner = S("alice");
    o.content_type = S("application/octet-stream");
    fx_data(f, bytes, len, &o.data);
    return meta_object_put(f->ms, bucket, &o, cond);
}

char *fx_get(struct fx *f, struct mg_str bucket, struct mg_str key, size_t *len, int *rv)
{
    struct meta_object o;
    *rv = meta_object_get(f->ms, bucket, key, &f->a, &o);
    if (*rv != 0)
        return NULL;
    char *buf = mg_malloc(o.size + 1);
    *rv = meta_data_read(f->ms, &o.data, 0, buf, o.size);
    if (*rv != 0) {
        mg_free(buf);
        return NULL;
    }
    *len = o.size;
    return buf;
}

int main(int argc, char **argv)
{
    mg_log_set_level("warn");
    if (argc == 3 && strcmp(argv[1], "--kill9-child") == 0)
        return test_store_kill9_child(argv[2]);
    int failed = 0;
    failed += test_key_run();
    failed += test_bucket_run();
    failed += test_object_run();
    failed += test_list_run();
    failed += test_mpu_run();
    failed += test_store_run();
    failed += test_wset_run();
    failed += test_expire_run();
    failed += test_shard_run();
    failed += test_shard_fixture_run();
    failed += test_scrub_run();
    return failed;
}
