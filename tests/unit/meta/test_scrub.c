/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/scrub.c and meta/fsck.c on a real store: the scrubber's figures on a
 * clean store, a byte flipped in a blob's segment file (found through the
 * entry's ref) reported once with its bucket/key and dropped from the
 * failing list once the object is overwritten; its rate bound; a stop in the
 * middle of a slow pass; fsck's orphans, dangling refs and checksum failures,
 * its refusal of a directory in use, and what --repair changes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "meta/fsck.h"
#include "meta/scrub.h"
#include "tests/unit/meta/test_meta.h"

#define KIB 1024u

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_filled(struct fx *f, const char *key, size_t len, uint32_t seed)
{
    char *b = mg_malloc(len);
    fx_fill(b, len, seed);
    assert_int_equal(fx_put(f, BKT, str_of(key, strlen(key)), b, len, NULL), 0);
    mg_free(b);
}

static struct eng_blob_ref ref_of(struct fx *f, const char *key)
{
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, str_of(key, strlen(key)), &f->a, &o), 0);
    assert_int_equal(o.data.nextents, 1);
    return o.data.extents[0].ref;
}

/* Flip the byte at data offset off of ref in its segment file. */
static void flip(struct fx *f, const struct eng_blob_ref *ref, uint64_t off)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/blobs/%016llx.seg", f->dir, (unsigned long long)ref->segment);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, (off_t)(ref->offset + off)), 1);
    c ^= 0x20;
    assert_int_equal(pwrite(fd, &c, 1, (off_t)(ref->offset + off)), 1);
    close(fd);
}

/* Wait until the scrubber completed n passes (10 s at most). */
static void wait_passes(struct fx *f, uint64_t n, struct meta_scrub_stats *st)
{
    int64_t deadline = mono_ms() + 10000;
    for (;;) {
        assert_int_equal(meta_scrub_stats_get(f->ms, st), 0);
        if (st->passes >= n && !st->running)
            return;
        assert_true(mono_ms() < deadline);
        usleep(10000);
    }
}

static void test_scrub_reports_and_clears(void **state)
{
    struct fx *f = *state;
    struct meta_scrub_stats *st = mg_malloc(sizeof(*st));
    put_filled(f, "a", 200 * KIB, 1);
    put_filled(f, "b", 10, 2); /* inline: visited, no blob */
    struct meta_object tmpl = {.key = S("up"), .owner = S("alice")};
    struct mg_str upload_id;
    assert_int_equal(meta_mpu_create(f->ms, BKT, &tmpl, &f->a, &upload_id), 0);
    struct meta_part part = {.number = 1, .etag = S("00000000000000000000000000000000")};
    char *pb = mg_malloc(70 * KIB);
    fx_fill(pb, 70 * KIB, 3);
    fx_data(f, pb, 70 * KIB, &part.data);
    part.size = 70 * KIB;
    mg_free(pb);
    assert_int_equal(meta_mpu_put_part(f->ms, BKT, S("up"), upload_id, &part), 0);

    assert_int_equal(meta_scrub_trigger(f->ms), MG_ENOTFOUND);
    struct meta_scrub_opts o = {.bytes_per_sec = 64u << 20, .delay_ms = UINT64_MAX,
                                .period_ms = UINT64_MAX};
    meta_scrub_start(f->ms, &o);
    assert_int_equal(meta_scrub_trigger(f->ms), 0);
    wait_passes(f, 1, st);
    assert_int_equal(st->objects_scanned, 3);
    assert_int_equal(st->blobs_scanned, 2);
    assert_int_equal(st->bytes_scanned, 270 * KIB);
    assert_int_equal(st->checksum_failures, 0);
    assert_int_equal(st->failing_total, 0);
    assert_true(st->last_pass_end_ms > 0);

    struct eng_blob_ref ra = ref_of(f, "a");
    flip(f, &ra, 130 * KIB); /* chunk 2 */
    assert_int_equal(meta_scrub_trigger(f->ms), 0);
    wait_passes(f, 2, st);
    assert_int_equal(st->checksum_failures, 1);
    assert_int_equal(st->failing_total, 1);
    assert_int_equal(st->nfailing, 1);
    assert_string_equal(st->failing[0].bucket, "bkt");
    assert_string_equal(st->failing[0].key, "a");
    assert_int_equal(st->failing[0].segment, ra.segment);
    assert_int_equal(st->failing[0].offset, ra.offset);
    assert_int_equal(st->failing[0].err, MG_ECORRUPT);

    /* Still failing on the next pass (counted again), gone once the object is rewritten. */
    assert_int_equal(meta_scrub_trigger(f->ms), 0);
    wait_passes(f, 3, st);
    assert_int_equal(st->checksum_failures, 2);
    assert_int_equal(st->failing_total, 1);
    put_filled(f, "a", 200 * KIB, 4);
    assert_int_equal(meta_scrub_trigger(f->ms), 0);
    wait_passes(f, 4, st);
    assert_int_equal(st->checksum_failures, 2);
    assert_int_equal(st->failing_total, 0);
    assert_int_equal(st->nfailing, 0);
    meta_scrub_stop(f->ms);
    assert_int_equal(meta_scrub_stats_get(f->ms, st), MG_ENOTFOUND);
    mg_free(st);
}

static void test_scrub_rate_bound(void **state)
{
    struct fx *f = *state;
    struct meta_scrub_stats st;
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "r%d", i);
        put_filled(f, key, 256 * KIB, (uint32_t)i);
    }
    /* 768 KiB at 1 MiB/s: the pass cannot end before 750 ms. */
    struct meta_scrub_opts o = {.bytes_per_sec = 1u << 20, .delay_ms = 0,
                                .period_ms = UINT64_MAX};
    meta_scrub_start(f->ms, &o);
    wait_passes(f, 1, &st);
    meta_scrub_stop(f->ms);
    print_message("scrub rate: %llu bytes in %llu ms at 1 MiB/s\n",
                  (unsigned long long)st.last_pass_bytes, (unsigned long long)st.last_pass_ms);
    assert_int_equal(st.last_pass_bytes, 768 * KIB);
    assert_true(st.last_pass_ms >= 740);
    assert_true(st.last_pass_ms < 5000);
}

static void test_scrub_stop_mid_pass(void **state)
{
    struct fx *f = *state;
    struct meta_scrub_stats st;
    put_filled(f, "s1", 512 * KIB, 1);
    put_filled(f, "s2", 512 * KIB, 2);
    /* 1 MiB at 64 KiB/s would take 16 s. */
    struct meta_scrub_opts o = {.bytes_per_sec = 64 * KIB, .delay_ms = 0,
                                .period_ms = UINT64_MAX};
    meta_scrub_start(f->ms, &o);
    usleep(200000);
    assert_int_equal(meta_scrub_stats_get(f->ms, &st), 0);
    assert_int_equal(st.running, 1);
    int64_t t0 = mono_ms();
    meta_scrub_stop(f->ms);
    assert_true(mono_ms() - t0 < 1000);
}

/* Run fsck on f's directory with extra (NULL-terminated) options; its stdout into out. */
static int run_fsck(struct fx *f, const char *extra, struct mg_buf *out)
{
    char *argv[4] = {"--data", f->dir, (char *)extra, NULL};
    char tmpl[] = "/tmp/test_scrub_out.XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int rv = meta_fsck_main(extra != NULL ? 3 : 2, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    out->len = 0;
    char buf[4096];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        mg_buf_append(out, buf, (size_t)n);
    mg_buf_append(out, "", 1);
    close(fd);
    unlink(tmpl);
    print_message("fsck %s -> %d\n%s", extra ? extra : "", rv, out->base);
    return rv;
}

static void test_fsck(void **state)
{
    struct fx *f = *state;
    struct mg_buf out;
    mg_buf_init(&out);
    put_filled(f, "a", 200 * KIB, 1);
    put_filled(f, "c", 150 * KIB, 2);
    put_filled(f, "d", 100 * KIB, 3);
    /* An orphan: a finished blob no entry references (a crash before its metadata commit). */
    struct meta_data orphan;
    char *b = mg_malloc(90 * KIB);
    fx_fill(b, 90 * KIB, 9);
    fx_data(f, b, 90 * KIB, &orphan);
    mg_free(b);
    /* A dangling entry: d's blob freed under it; a dangling part: the same for part 1 of an
     * upload. A checksum failure: a byte of a flipped. */
    struct eng_blob_ref rd = ref_of(f, "d"), ra = ref_of(f, "a");
    eng_blob_free(f->ms->bs, &rd);
    flip(f, &ra, 5);
    struct meta_object tmpl = {.key = S("up"), .owner = S("alice")};
    struct mg_str upload_id;
    assert_int_equal(meta_mpu_create(f->ms, BKT, &tmpl, &f->a, &upload_id), 0);
    struct meta_part part = {.number = 1, .size = 80 * KIB,
                             .etag = S("00000000000000000000000000000000")};
    b = mg_malloc(80 * KIB);
    fx_fill(b, 80 * KIB, 8);
    fx_data(f, b, 80 * KIB, &part.data);
    mg_free(b);
    struct eng_blob_ref rp = part.data.extents[0].ref;
    assert_int_equal(meta_mpu_put_part(f->ms, BKT, S("up"), upload_id, &part), 0);
    eng_blob_free(f->ms->bs, &rp);

    assert_int_equal(run_fsck(f, NULL, &out), 1); /* the store is open: refused */
    meta_store_close(f->ms);
    f->ms = NULL;
    assert_int_equal(run_fsck(f, NULL, &out), 3);
    assert_non_null(strstr(out.base, "\"orphans\":1,\"orphan_bytes\":92160,"));
    assert_non_null(strstr(out.base, "\"dangling\":2,\"checksum_failures\":1,"));
    assert_non_null(strstr(out.base, "{\"kind\":\"dangling\",\"bucket\":\"bkt\",\"key\":\"d\""));
    assert_non_null(strstr(out.base, "{\"kind\":\"checksum\",\"bucket\":\"bkt\",\"key\":\"a\""));
    assert_non_null(strstr(out.base, "\"key\":\"up\",\"upload_id\":"));
    assert_non_null(strstr(out.base, "\"entries\":4,\"blobs\":3,\"refs\":4,"));

    assert_int_equal(run_fsck(f, "--repair", &out), 3); /* the checksum failure stays */
    assert_non_null(strstr(out.base, "\"orphans_freed\":1,\"dangling_deleted\":1,"
                                     "\"uploads_aborted\":1,"));
    assert_int_equal(run_fsck(f, NULL, &out), 3);
    assert_non_null(strstr(out.base, "\"orphans\":0,"));
    assert_non_null(strstr(out.base, "\"dangling\":0,\"checksum_failures\":1,"));

    /* d is gone; c reads back; rewriting a leaves a clean directory. */
    fx_reopen(f);
    struct meta_object o;
    assert_int_equal(meta_object_get(f->ms, BKT, S("d"), &f->a, &o), MG_ENOSUCHKEY);
    assert_int_equal(meta_mpu_get(f->ms, BKT, S("up"), upload_id, &f->a, &o), MG_ENOSUCHUPLOAD);
    size_t len = 0;
    int rv;
    char *c = fx_get(f, BKT, S("c"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_int_equal(len, 150 * KIB);
    mg_free(c);
    put_filled(f, "a", 200 * KIB, 4);
    meta_store_close(f->ms);
    f->ms = NULL;
    assert_int_equal(run_fsck(f, NULL, &out), 0);
    assert_non_null(strstr(out.base, "\"orphans\":0,\"orphan_bytes\":0,\"dangling\":0,"
                                     "\"checksum_failures\":0,"));
    mg_buf_close(&out);
}

/* A test that failed mid-way left its scrubber running: stop it before the store closes. */
static int scrub_teardown(void **state)
{
    struct fx *f = *state;
    if (f->ms != NULL)
        meta_scrub_stop(f->ms);
    return fx_teardown(state);
}

int test_scrub_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_scrub_reports_and_clears, fx_setup, scrub_teardown),
        cmocka_unit_test_setup_teardown(test_scrub_rate_bound, fx_setup, scrub_teardown),
        cmocka_unit_test_setup_teardown(test_scrub_stop_mid_pass, fx_setup, scrub_teardown),
        cmocka_unit_test_setup_teardown(test_fsck, fx_setup, scrub_teardown),
    };
    return cmocka_run_group_tests_name("meta_scrub", tests, NULL, NULL);
}
