/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for engine/rados.c against a real Ceph (deploy/ceph-up; tests/run.sh starts one
 * and passes it in MG_TEST_RADOS_CONF, MG_TEST_RADOS_POOL, MG_TEST_RADOS_USER; without
 * MG_TEST_RADOS_CONF every test is skipped). Small stripes (64 KiB) make multi-stripe blobs
 * cheap. Covered: round trips across sizes, hints and append patterns, ranges and cursor
 * pieces across stripe and chunk edges; a byte flipped in a stripe object, a damaged
 * checksum table, a missing stripe and a ref that disagrees with the header are caught by
 * every read touching them and by verify, while other ranges read fine; free and abort
 * remove every stripe and free is idempotent; foreach reports finished blobs exactly,
 * leftovers of a crashed writer with a ref that frees them all, and skips blobs still being
 * written; pins hold retired blobs; concurrent writers; writer ids never repeat; the 4 MiB
 * default stripes; open errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <rados/librados.h>

#include "engine/rados.h"
#include "tests/unit/engine/helpers.h"

#define STRIPE (64u << 10)

struct fix {
    struct eng_rados *r; /* store under test (64 KiB stripes) */
    rados_t cl;          /* the test's own handle, to damage objects behind the store */
    rados_ioctx_t io;
};

static struct eng_rados_opts opts_env(uint32_t stripe)
{
    const char *pool = getenv("MG_TEST_RADOS_POOL"), *user = getenv("MG_TEST_RADOS_USER");
    return (struct eng_rados_opts){.conf = getenv("MG_TEST_RADOS_CONF"),
                                   .pool = pool ? pool : "metagate",
                                   .user = user ? user : "metagate",
                                   .stripe_bytes = stripe,
                                   .inflight_max = 2};
}

static int setup(void **state)
{
    if (getenv("MG_TEST_RADOS_CONF") == NULL) {
        *state = NULL;
        return 0;
    }
    struct fix *f = calloc(1, sizeof(*f));
    struct eng_rados_opts o = opts_env(STRIPE);
    char errmsg[256];
    char name[128];
    if (eng_rados_open(&o, &f->r, errmsg) != 0) {
        fprintf(stderr, "eng_rados_open: %s\n", errmsg);
        return -1;
    }
    snprintf(name, sizeof(name), "client.%s", o.user);
    if (rados_create2(&f->cl, "ceph", name, 0) < 0 || rados_conf_read_file(f->cl, o.conf) < 0 ||
        rados_connect(f->cl) < 0 || rados_ioctx_create(f->cl, o.pool, &f->io) < 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;
    if (f == NULL)
        return 0;
    eng_rados_close(f->r);
    rados_ioctx_destroy(f->io);
    rados_shutdown(f->cl);
    free(f);
    return 0;
}

#define NEED_CEPH(f)                                                                               \
    do {                                                                                           \
        if ((f) == NULL)                                                                           \
            skip();                                                                                \
    } while (0)

/* Write n bytes of seed's pattern in pieces of step (0: at once) with hint; returns the ref. */
static struct eng_blob_ref put(struct eng_rados *r, size_t n, uint64_t seed, size_t step,
                               uint64_t hint)
{
    char *p = malloc(n + 1);
    test_fill(p, n, seed);
    struct eng_rados_writer *w;
    assert_int_equal(eng_rados_writer_create(r, hint, &w), 0);
    size_t done = 0;
    while (done < n) {
        size_t k = step == 0 || n - done < step ? n - done : step;
        assert_int_equal(eng_rados_writer_append(w, p + done, k), 0);
        done += k;
    }
    struct eng_blob_ref ref;
    assert_int_equal(eng_rados_writer_finish(w, &ref), 0);
    assert_int_equal(ref.length, n);
    assert_true(eng_rados_ref_is(&ref));
    free(p);
    return ref;
}

static void check_bytes(struct eng_rados *r, const struct eng_blob_ref *ref, uint64_t seed)
{
    size_t n = (size_t)ref->length;
    char *want = malloc(n + 1), *got = malloc(n + 1);
    test_fill(want, n, seed);
    assert_int_equal(eng_rados_read(r, ref, 0, got, n), 0);
    assert_memory_equal(got, want, n);
    /* ranges across chunk and stripe edges */
    const uint64_t offs[] = {0, 1, 65535, 65536, 65537, 131071, 200000};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        if (offs[i] >= n)
            continue;
        size_t len = n - offs[i] < 70000 ? n - offs[i] : 70000;
        memset(got, 0, len);
        assert_int_equal(eng_rados_read(r, ref, offs[i], got, len), 0);
        assert_memory_equal(got, want + offs[i], len);
    }
    struct eng_blob_cursor c = {0};
    for (size_t at = 0; at < n;) {
        size_t k = n - at < 40000 ? n - at : 40000;
        assert_int_equal(eng_rados_cursor_read(r, ref, &c, got + at, k), 0);
        at += k;
    }
    assert_int_equal(c.pos, n);
    assert_memory_equal(got, want, n);
    assert_int_equal(eng_rados_verify(r, ref), 0);
    free(want);
    free(got);
}

static void test_roundtrip(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    const size_t sizes[] = {0, 1, 4095, 65536, 65537, 3 * STRIPE, 3 * STRIPE + 17, 1000003};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct eng_blob_ref a = put(f->r, sizes[i], i, 0, sizes[i]);
        struct eng_blob_ref b = put(f->r, sizes[i], i + 100, 777, 0);
        assert_int_equal(a.segment, eng_rados_writer_id(f->r));
        assert_true(b.offset > a.offset);
        check_bytes(f->r, &a, i);
        check_bytes(f->r, &b, i + 100);
        char x;
        assert_int_equal(eng_rados_read(f->r, &a, sizes[i], &x, 1), MG_EINVALIDARGUMENT);
        eng_rados_free(f->r, &a);
        eng_rados_free(f->r, &b);
    }
}

static void stripe_obj(char *name, size_t cap, const struct eng_blob_ref *ref, uint32_t idx)
{
    snprintf(name, cap, "mg.%016" PRIx64 ".%016" PRIx64 ".%08" PRIx32, ref->segment, ref->offset,
             idx);
}

/* Flip one byte of stripe idx at off, behind the store's back (xattrs stay). */
static void flip(struct fix *f, const struct eng_blob_ref *ref, uint32_t idx, size_t off)
{
    char name[64], buf[STRIPE];
    stripe_obj(name, sizeof(name), ref, idx);
    int n = rados_read(f->io, name, buf, sizeof(buf), 0);
    assert_true(n > (int)off);
    buf[off] ^= 0x20;
    assert_int_equal(rados_write_full(f->io, name, buf, (size_t)n), 0);
}

static void test_corruption_detected(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    size_t n = 5 * STRIPE + 1234;
    struct eng_blob_ref ref = put(f->r, n, 7, 0, 0);
    char *buf = malloc(n);
    struct eng_rados_stats st0, st1;
    eng_rados_stats_get(f->r, &st0);
    flip(f, &ref, 2, 100); /* chunk 0 of stripe 2 */
    assert_int_equal(eng_rados_read(f->r, &ref, 2 * STRIPE + 5, buf, 1), MG_ECORRUPT);
    assert_int_equal(eng_rados_read(f->r, &ref, 0, buf, n), MG_ECORRUPT);
    assert_int_equal(eng_rados_verify(f->r, &ref), MG_ECORRUPT);
    struct eng_blob_cursor c = {.pos = 2 * STRIPE};
    assert_int_equal(eng_rados_cursor_read(f->r, &ref, &c, buf, 10), MG_ECORRUPT);
    /* untouched stripes still read */
    assert_int_equal(eng_rados_read(f->r, &ref, 0, buf, 2 * STRIPE), 0);
    assert_int_equal(eng_rados_read(f->r, &ref, 3 * STRIPE, buf, 2 * STRIPE + 1234), 0);
    eng_rados_stats_get(f->r, &st1);
    assert_true(st1.corrupt_reads >= st0.corrupt_reads + 4);

    /* a damaged checksum table */
    char name[64];
    stripe_obj(name, sizeof(name), &ref, 4);
    assert_int_equal(rados_setxattr(f->io, name, "mg.c", "abcd", 4), 0);
    assert_int_equal(eng_rados_read(f->r, &ref, 4 * STRIPE, buf, 1), MG_ECORRUPT);
    /* a missing stripe */
    stripe_obj(name, sizeof(name), &ref, 3);
    assert_int_equal(rados_remove(f->io, name), 0);
    assert_int_equal(eng_rados_read(f->r, &ref, 3 * STRIPE + 9, buf, 1), MG_ECORRUPT);
    /* a ref that disagrees with the header (chunk 0 of stripe 0 checks it) */
    struct eng_blob_ref bad = ref;
    bad.crc32c ^= 1;
    assert_int_equal(eng_rados_read(f->r, &bad, 0, buf, 10), MG_ECORRUPT);
    bad = ref;
    bad.flags = 7; /* a local store ref */
    assert_int_equal(eng_rados_read(f->r, &bad, 0, buf, 10), MG_EINVALIDARGUMENT);
    eng_rados_free(f->r, &ref);
    free(buf);
}

static int stripe_exists(struct fix *f, const struct eng_blob_ref *ref, uint32_t idx)
{
    char name[64];
    uint64_t size;
    time_t mtime;
    stripe_obj(name, sizeof(name), ref, idx);
    int rv = rados_stat(f->io, name, &size, &mtime);
    assert_true(rv == 0 || rv == -ENOENT);
    return rv == 0;
}

static void test_free_and_abort(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    struct eng_blob_ref ref = put(f->r, 4 * STRIPE, 3, 1000, 0);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(stripe_exists(f, &ref, i));
    assert_false(stripe_exists(f, &ref, 4));
    eng_rados_free(f->r, &ref);
    for (uint32_t i = 0; i < 4; i++)
        assert_false(stripe_exists(f, &ref, i));
    eng_rados_free(f->r, &ref); /* idempotent */
    char buf[8];
    assert_int_equal(eng_rados_read(f->r, &ref, 0, buf, 8), MG_ECORRUPT);

    /* abort after several stripes went out */
    struct eng_rados_writer *w;
    char *p = malloc(3 * STRIPE + 1);
    test_fill(p, 3 * STRIPE + 1, 9);
    assert_int_equal(eng_rados_writer_create(f->r, 0, &w), 0);
    /* stripes 0..2 go out; with a window of 2, sending stripe 2 waited for stripe 0 */
    assert_int_equal(eng_rados_writer_append(w, p, 3 * STRIPE + 1), 0);
    struct eng_blob_ref guess = {.segment = eng_rados_writer_id(f->r), .offset = ref.offset + 1};
    assert_true(stripe_exists(f, &guess, 0));
    eng_rados_writer_abort(w);
    for (uint32_t i = 0; i < 4; i++)
        assert_false(stripe_exists(f, &guess, i));
    free(p);
}

struct seen {
    struct eng_blob_ref refs[64];
    size_t n;
    uint64_t seg;
};

static int on_blob(void *ctx, const struct eng_blob_ref *ref)
{
    struct seen *s = ctx;
    if (ref->segment == s->seg && s->n < 64)
        s->refs[s->n++] = *ref;
    return 0;
}

static const struct eng_blob_ref *seen_find(const struct seen *s, uint64_t off)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->refs[i].offset == off)
            return &s->refs[i];
    return NULL;
}

static void test_foreach(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    struct eng_blob_ref a = put(f->r, 10, 1, 0, 0), b = put(f->r, 3 * STRIPE + 5, 2, 0, 0);
    /* a writer still writing: its stripes are skipped */
    struct eng_rados_writer *w;
    char *p = malloc(2 * STRIPE + 1);
    test_fill(p, 2 * STRIPE + 1, 5);
    assert_int_equal(eng_rados_writer_create(f->r, 0, &w), 0);
    assert_int_equal(eng_rados_writer_append(w, p, 2 * STRIPE + 1), 0);
    /* leftovers of a crashed writer: stripes 1 and 2 of a blob with no header */
    struct eng_blob_ref crashed = {.segment = eng_rados_writer_id(f->r), .offset = 1u << 30};
    char name[64];
    stripe_obj(name, sizeof(name), &crashed, 1);
    assert_int_equal(rados_write_full(f->io, name, p, 100), 0);
    stripe_obj(name, sizeof(name), &crashed, 2);
    assert_int_equal(rados_write_full(f->io, name, p, 100), 0);

    struct seen s = {.seg = eng_rados_writer_id(f->r)};
    assert_int_equal(eng_rados_foreach(f->r, on_blob, &s), 0);
    assert_int_equal(s.n, 3);
    assert_memory_equal(seen_find(&s, a.offset), &a, sizeof(a));
    assert_memory_equal(seen_find(&s, b.offset), &b, sizeof(b));
    const struct eng_blob_ref *c = seen_find(&s, crashed.offset);
    assert_non_null(c);
    assert_int_equal(c->crc32c, 0);
    assert_int_equal(c->length, 3 * STRIPE);
    char x;
    assert_int_equal(eng_rados_read(f->r, c, 0, &x, 1), MG_ECORRUPT); /* never readable */
    eng_rados_free(f->r, c);
    assert_false(stripe_exists(f, c, 1) || stripe_exists(f, c, 2));

    struct eng_blob_ref wr;
    assert_int_equal(eng_rados_writer_finish(w, &wr), 0);
    s.n = 0;
    assert_int_equal(eng_rados_foreach(f->r, on_blob, &s), 0);
    assert_int_equal(s.n, 3);
    assert_memory_equal(seen_find(&s, wr.offset), &wr, sizeof(wr));
    eng_rados_free(f->r, &a);
    eng_rados_free(f->r, &b);
    eng_rados_free(f->r, &wr);
    s.n = 0;
    assert_int_equal(eng_rados_foreach(f->r, on_blob, &s), 0);
    assert_int_equal(s.n, 0);
    free(p);
}

static void wait_backlog_zero(struct eng_rados *r)
{
    for (int i = 0; i < 500 && eng_rados_retire_backlog(r) > 0; i++)
        usleep(10000);
    assert_int_equal(eng_rados_retire_backlog(r), 0);
}

static void test_pins_hold_retired(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    struct eng_blob_ref ref = put(f->r, 2 * STRIPE, 4, 0, 0), other = put(f->r, 100, 5, 0, 0);
    assert_int_equal(eng_rados_pin(f->r, &ref), 0);
    assert_int_equal(eng_rados_pin(f->r, &ref), 0);
    eng_rados_retire(f->r, &ref);
    eng_rados_retire(f->r, &other);
    usleep(200000);
    assert_false(stripe_exists(f, &other, 0)); /* unpinned: reaped */
    assert_int_equal(eng_rados_retire_backlog(f->r), 1);
    eng_rados_unpin(f->r, &ref);
    usleep(100000);
    check_bytes(f->r, &ref, 4); /* one pin left: whole */
    struct eng_rados_stats st;
    eng_rados_stats_get(f->r, &st);
    assert_int_equal(st.pinned, 1);
    eng_rados_unpin(f->r, &ref);
    wait_backlog_zero(f->r);
    assert_false(stripe_exists(f, &ref, 0) || stripe_exists(f, &ref, 1));
}

struct worker {
    struct eng_rados *r;
    unsigned id;
    int failures;
};

static void *on_worker(void *arg)
{
    struct worker *w = arg;
    for (unsigned i = 0; i < 12; i++) {
        uint64_t seed = w->id * 1000 + i;
        size_t n = (size_t)(seed * 7919 % (3 * STRIPE));
        char *p = malloc(n + 1), *q = malloc(n + 1);
        test_fill(p, n, seed);
        struct eng_rados_writer *wr;
        struct eng_blob_ref ref;
        if (eng_rados_writer_create(w->r, 0, &wr) != 0 || eng_rados_writer_append(wr, p, n) != 0 ||
            eng_rados_writer_finish(wr, &ref) != 0 || eng_rados_read(w->r, &ref, 0, q, n) != 0 ||
            memcmp(p, q, n) != 0)
            w->failures++;
        else
            eng_rados_retire(w->r, &ref);
        free(p);
        free(q);
    }
    return NULL;
}

static void test_concurrent_writers(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    pthread_t t[4];
    struct worker w[4];
    for (unsigned i = 0; i < 4; i++) {
        w[i] = (struct worker){.r = f->r, .id = i + 1};
        pthread_create(&t[i], NULL, on_worker, &w[i]);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    wait_backlog_zero(f->r);
}

static void test_writer_ids_and_big_stripes(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    struct eng_rados_opts o = opts_env(0);
    char errmsg[256];
    struct eng_rados *r2;
    assert_int_equal(eng_rados_open(&o, &r2, errmsg), 0);
    assert_true(eng_rados_writer_id(r2) > eng_rados_writer_id(f->r));
    size_t n = 9u << 20; /* three 4 MiB stripes, the last short */
    struct eng_blob_ref ref = put(r2, n, 11, 300000, n);
    assert_int_equal(ref.flags, ENG_RADOS_REF_FLAG | 22);
    char *want = malloc(n), *got = malloc(2u << 20);
    test_fill(want, n, 11);
    assert_int_equal(eng_rados_read(r2, &ref, (4u << 20) - 1000, got, 2u << 20), 0);
    assert_memory_equal(got, want + (4u << 20) - 1000, 2u << 20);
    assert_int_equal(eng_rados_verify(r2, &ref), 0);
    /* the other open reads it too (any node reads any blob) */
    assert_int_equal(eng_rados_read(f->r, &ref, n - 10, got, 10), 0);
    assert_memory_equal(got, want + n - 10, 10);
    eng_rados_retire(r2, &ref);
    eng_rados_close(r2); /* drains the retire queue */
    assert_false(stripe_exists(f, &ref, 0));
    free(want);
    free(got);
}

static void test_open_errors(void **state)
{
    struct fix *f = *state;
    NEED_CEPH(f);
    char errmsg[256];
    struct eng_rados *r2;
    struct eng_rados_opts o = opts_env(STRIPE);
    o.pool = "no-such-pool";
    assert_int_equal(eng_rados_open(&o, &r2, errmsg), MG_ECONFIG);
    assert_non_null(strstr(errmsg, "no-such-pool"));
    o = opts_env(3u << 20); /* not a power of two */
    assert_int_equal(eng_rados_open(&o, &r2, errmsg), MG_ECONFIG);
    o = opts_env(STRIPE);
    o.conf = "/nonexistent/ceph.conf";
    assert_int_equal(eng_rados_open(&o, &r2, errmsg), MG_ECONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corruption_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_and_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreach, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pins_hold_retired, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_ids_and_big_stripes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
    };
    return cmocka_run_group_tests_name("rados", tests, NULL, NULL);
}
