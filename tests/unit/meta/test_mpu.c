/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/mpu.c: create/put part/list parts/list uploads/complete/abort, the
 * complete errors (InvalidPartOrder, InvalidPart, EntityTooSmall, NoSuchUpload), the
 * md5-of-md5s ETag, freeing of replaced and unlisted parts, UploadPartCopy with a range. */
#include <string.h>

#include <openssl/evp.h>

#include "tests/unit/meta/test_meta.h"

#define MIB5 ((size_t)5 << 20)

static uint64_t freed_bytes(struct fx *f)
{
    struct meta_stats st;
    meta_stats_get(f->ms, &st);
    return st.blobs.bytes_freed;
}

static struct mg_str create(struct fx *f, struct mg_str key)
{
    struct meta_object t = {.key = key,
                            .owner = S("alice"),
                            .content_type = S("video/mp4"),
                            .cksum_algo = MG_CKSUM_CRC32};
    struct mg_str uid;
    assert_int_equal(meta_mpu_create(f->ms, BKT, &t, &f->a, &uid), 0);
    assert_int_equal(uid.len, 32);
    return uid;
}

/* Upload part number n with bytes; returns its etag (arena). */
static struct mg_str put_part(struct fx *f, struct mg_str key, struct mg_str uid, uint32_t n,
                              const void *bytes, size_t len, int want)
{
    char *etag = mg_arena_alloc(&f->a, 33);
    fx_md5_hex(bytes, len, etag);
    struct meta_part p = {.number = n, .etag = str_of(etag, 32), .checksum = S("ck==")};
    fx_data(f, bytes, len, &p.data);
    assert_int_equal(meta_mpu_put_part(f->ms, BKT, key, uid, &p), want);
    return str_of(etag, 32);
}

static void test_complete(void **state)
{
    struct fx *f = *state;
    char *big = mg_malloc(3 * MIB5 + 10);
    fx_fill(big, 3 * MIB5 + 10, 9);
    struct mg_str uid = create(f, S("obj"));
    /* minio-js numbers parts from 2 */
    struct meta_part want[4] = {0};
    want[0] = (struct meta_part){.number = 2};
    want[0].etag = put_part(f, S("obj"), uid, 2, big, MIB5, 0);
    want[1].number = 3;
    want[1].etag = put_part(f, S("obj"), uid, 3, big + MIB5, MIB5, 0);
    /* part 4 uploaded twice: the first copy is freed */
    put_part(f, S("obj"), uid, 4, big, 100, 0);
    uint64_t before = freed_bytes(f);
    want[2].number = 4;
    want[2].etag = put_part(f, S("obj"), uid, 4, big + 2 * MIB5, MIB5, 0);
    assert_int_equal(freed_bytes(f) - before, 100);
    /* the last part is tiny: it lives inline until complete */
    want[3].number = 6;
    want[3].etag = put_part(f, S("obj"), uid, 6, big + 3 * MIB5, 10, 0);
    /* part 9: uploaded, never listed */
    put_part(f, S("obj"), uid, 9, big, 1000, 0);
    put_part(f, S("obj"), uid, 0, big, 1, MG_EINVALIDARGUMENT);
    put_part(f, S("obj"), uid, 10001, big, 1, MG_EINVALIDARGUMENT);
    put_part(f, S("obj"), S("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), 1, big, 1, MG_ENOSUCHUPLOAD);
    put_part(f, S("obj"), S("bad"), 1, big, 1, MG_ENOSUCHUPLOAD);

    /* list parts: paging by marker */
    struct meta_part *parts;
    size_t n;
    int trunc;
    assert_int_equal(
        meta_mpu_list_parts(f->ms, BKT, S("obj"), uid, 0, 2, &f->a, &parts, &n, &trunc), 0);
    assert_int_equal(n, 2);
    assert_true(trunc);
    assert_int_equal(parts[0].number, 2);
    assert_int_equal(parts[0].size, MIB5);
    assert_memory_equal(parts[0].etag.base, want[0].etag.base, 32);
    assert_int_equal(
        meta_mpu_list_parts(f->ms, BKT, S("obj"), uid, 3, 10, &f->a, &parts, &n, &trunc), 0);
    assert_int_equal(n, 3);
    assert_false(trunc);
    assert_int_equal(parts[2].number, 9);

    /* errors */
    struct meta_object o;
    struct meta_part bad[2] = {want[1], want[0]};
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, bad, 2, &f->a, &o),
                     MG_EINVALIDPARTORDER);
    bad[0] = want[0];
    bad[1] = want[0];
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, bad, 2, &f->a, &o),
                     MG_EINVALIDPARTORDER);
    bad[1] = (struct meta_part){.number = 7, .etag = want[0].etag};
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, bad, 2, &f->a, &o),
                     MG_EINVALIDPART);
    bad[1] = (struct meta_part){.number = 3, .etag = want[0].etag};
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, bad, 2, &f->a, &o),
                     MG_EINVALIDPART);
    bad[0] = want[3];
    bad[0].number = 6;
    bad[1] = (struct meta_part){.number = 9, .etag = put_part(f, S("obj"), uid, 9, big, 1000, 0)};
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, bad, 2, &f->a, &o),
                     MG_EENTITYTOOSMALL);
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), S("CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"),
                                       want, 4, &f->a, &o),
                     MG_ENOSUCHUPLOAD);

    /* success: quoted etags are accepted */
    char q[35];
    q[0] = q[33] = '"';
    memcpy(q + 1, want[0].etag.base, 32);
    want[0].etag = str_of(q, 34);
    before = freed_bytes(f);
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, want, 4, &f->a, &o), 0);
    assert_int_equal(freed_bytes(f) - before, 1000); /* part 9 */
    assert_int_equal(o.size, 3 * MIB5 + 10);
    assert_int_equal(o.nparts, 4);
    assert_int_equal(o.parts[3].number, 6);
    assert_int_equal(o.parts[3].size, 10);
    assert_memory_equal(o.parts[0].checksum.base, "ck==", 4);
    /* composite CRC32 over the parts' binary checksums ("ck==" is the byte 'r') */
    struct mg_cksum ck;
    uint8_t raw[32];
    char b64[16];
    mg_cksum_init(&ck, MG_CKSUM_CRC32);
    mg_cksum_update(&ck, "rrrr", 4);
    size_t rl = mg_cksum_final(&ck, raw);
    mg_cksum_close(&ck);
    size_t bl = mg_base64_encode(raw, rl, b64);
    assert_int_equal(o.cksum_algo, MG_CKSUM_CRC32);
    assert_int_equal(o.cksum_value.len, bl + 2);
    assert_memory_equal(o.cksum_value.base, b64, bl);
    assert_memory_equal(o.cksum_value.base + bl, "-4", 2);

    /* ETag = hex(md5(md5(p2) || md5(p3) || md5(p4) || md5(p6))) + "-4" */
    uint8_t cat[64], d[16];
    unsigned dl;
    EVP_Digest(big, MIB5, cat, &dl, EVP_md5(), NULL);
    EVP_Digest(big + MIB5, MIB5, cat + 16, &dl, EVP_md5(), NULL);
    EVP_Digest(big + 2 * MIB5, MIB5, cat + 32, &dl, EVP_md5(), NULL);
    EVP_Digest(big + 3 * MIB5, 10, cat + 48, &dl, EVP_md5(), NULL);
    EVP_Digest(cat, 64, d, &dl, EVP_md5(), NULL);
    char etag[40];
    mg_hex_encode(d, 16, etag);
    memcpy(etag + 32, "-4", 3);
    assert_int_equal(o.etag.len, 34);
    assert_memory_equal(o.etag.base, etag, 34);

    size_t len;
    int rv;
    char *got = fx_get(f, BKT, S("obj"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_int_equal(len, 3 * MIB5 + 10);
    assert_memory_equal(got, big, len);
    mg_free(got);
    struct meta_object g;
    assert_int_equal(meta_object_get(f->ms, BKT, S("obj"), &f->a, &g), 0);
    assert_int_equal(g.nparts, 4);
    assert_memory_equal(g.content_type.base, "video/mp4", 9);
    assert_int_equal(g.data.nextents, 4);
    /* a read spanning extents */
    char span[20];
    assert_int_equal(meta_data_read(f->ms, &g.data, MIB5 - 10, span, 20), 0);
    assert_memory_equal(span, big + MIB5 - 10, 20);

    /* the upload is gone; retrying its Complete answers the first result (issue 7, as AWS) */
    struct meta_object again;
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("obj"), uid, want, 4, &f->a, &again), 0);
    assert_int_equal(again.etag.len, g.etag.len);
    assert_memory_equal(again.etag.base, g.etag.base, g.etag.len);
    assert_int_equal(meta_mpu_get(f->ms, BKT, S("obj"), uid, &f->a, &o), MG_ENOSUCHUPLOAD);
    assert_int_equal(meta_bucket_delete(f->ms, BKT), MG_EBUCKETNOTEMPTY);

    /* copying a multipart object: one new blob, etag = md5 of the bytes */
    struct meta_object dst = {.key = S("copy")}, out;
    assert_int_equal(meta_object_copy(f->ms, BKT, S("obj"), BKT, &dst, &f->a, &out), 0);
    char md5[33];
    fx_md5_hex(big, 3 * MIB5 + 10, md5);
    assert_int_equal(out.etag.len, 32);
    assert_memory_equal(out.etag.base, md5, 32);
    mg_free(big);
}

static void test_abort_and_list(void **state)
{
    struct fx *f = *state;
    char buf[300];
    fx_fill(buf, sizeof(buf), 4);
    struct mg_str u1 = create(f, S("a\0b"));
    struct mg_str u2 = create(f, S("a"));
    struct mg_str u3 = create(f, S("a"));
    struct mg_str u4 = create(f, S("b/c"));
    put_part(f, S("a"), u2, 1, buf, sizeof(buf), 0);
    put_part(f, S("a"), u2, 2, buf, 100, 0);

    struct meta_upload *ups;
    size_t n;
    int trunc;
    assert_int_equal(meta_mpu_list(f->ms, BKT, S(""), S(""), S(""), 1000, &f->a, &ups, &n, &trunc),
                     0);
    assert_int_equal(n, 4);
    assert_false(trunc);
    /* by key, then upload id */
    assert_int_equal(ups[0].key.len, 1);
    assert_int_equal(ups[1].key.len, 1);
    assert_true(memcmp(ups[0].upload_id.base, ups[1].upload_id.base, 32) < 0);
    assert_int_equal(ups[2].key.len, 3);
    assert_memory_equal(ups[2].key.base, "a\0b", 3);
    assert_memory_equal(ups[2].upload_id.base, u1.base, 32);
    assert_memory_equal(ups[3].upload_id.base, u4.base, 32);
    assert_memory_equal(ups[0].owner.base, "alice", 5);
    assert_true(ups[0].initiated_ms > 0);
    struct mg_str first = ups[0].upload_id;
    assert_true((memcmp(first.base, u2.base, 32) == 0) || (memcmp(first.base, u3.base, 32) == 0));

    assert_int_equal(
        meta_mpu_list(f->ms, BKT, S("b/"), S(""), S(""), 1000, &f->a, &ups, &n, &trunc), 0);
    assert_int_equal(n, 1);
    assert_int_equal(meta_mpu_list(f->ms, BKT, S(""), S(""), S(""), 2, &f->a, &ups, &n, &trunc), 0);
    assert_int_equal(n, 2);
    assert_true(trunc);
    /* key marker alone: keys after "a"; with an upload id marker: later uploads of "a" too */
    assert_int_equal(meta_mpu_list(f->ms, BKT, S(""), S("a"), S(""), 1000, &f->a, &ups, &n, &trunc),
                     0);
    assert_int_equal(n, 2);
    assert_int_equal(meta_mpu_list(f->ms, BKT, S(""), S("a"), first, 1000, &f->a, &ups, &n, &trunc),
                     0);
    assert_int_equal(n, 3);

    uint64_t before = freed_bytes(f);
    assert_int_equal(meta_mpu_abort(f->ms, BKT, S("a"), u2), 0);
    assert_int_equal(freed_bytes(f) - before, sizeof(buf) + 100);
    assert_int_equal(meta_mpu_abort(f->ms, BKT, S("a"), u2), MG_ENOSUCHUPLOAD);
    struct meta_part *parts;
    assert_int_equal(meta_mpu_list_parts(f->ms, BKT, S("a"), u2, 0, 10, &f->a, &parts, &n, &trunc),
                     MG_ENOSUCHUPLOAD);
    struct meta_object t;
    assert_int_equal(meta_mpu_get(f->ms, BKT, S("a"), u3, &f->a, &t), 0);
    assert_int_equal(t.cksum_algo, MG_CKSUM_CRC32);
    assert_memory_equal(t.content_type.base, "video/mp4", 9);
    assert_int_equal(meta_mpu_abort(f->ms, BKT, S("a"), u3), 0);
    assert_int_equal(meta_mpu_abort(f->ms, BKT, S("a\0b"), u1), 0);
    assert_int_equal(meta_mpu_abort(f->ms, BKT, S("b/c"), u4), 0);
    assert_int_equal(meta_mpu_list(f->ms, BKT, S(""), S(""), S(""), 1000, &f->a, &ups, &n, &trunc),
                     0);
    assert_int_equal(n, 0);
    assert_int_equal(meta_bucket_delete(f->ms, BKT), 0);
}

static void test_part_copy(void **state)
{
    struct fx *f = *state;
    char *big = mg_malloc(MIB5 + 1000);
    fx_fill(big, MIB5 + 1000, 11);
    assert_int_equal(fx_put(f, BKT, S("src"), big, MIB5 + 1000, NULL), 0);
    struct mg_str uid = create(f, S("dst"));
    struct meta_part p1, p2;
    assert_int_equal(
        meta_mpu_put_part_copy(f->ms, BKT, S("dst"), uid, 1, BKT, S("src"), 0, MIB5, &f->a, &p1),
        0);
    assert_int_equal(meta_mpu_put_part_copy(f->ms, BKT, S("dst"), uid, 2, BKT, S("src"), MIB5,
                                            UINT64_MAX, &f->a, &p2),
                     0);
    char md5[33];
    fx_md5_hex(big + MIB5, 1000, md5);
    assert_int_equal(p2.size, 1000);
    assert_memory_equal(p2.etag.base, md5, 32);
    struct meta_part p3;
    assert_int_equal(
        meta_mpu_put_part_copy(f->ms, BKT, S("dst"), uid, 3, BKT, S("src"), MIB5, 1001, &f->a, &p3),
        MG_EINVALIDRANGE);
    struct meta_part want[2] = {p1, p2};
    struct meta_object o;
    assert_int_equal(meta_mpu_complete(f->ms, BKT, S("dst"), uid, want, 2, &f->a, &o), 0);
    size_t len;
    int rv;
    char *got = fx_get(f, BKT, S("dst"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_int_equal(len, MIB5 + 1000);
    assert_memory_equal(got, big, len);
    mg_free(got);
    /* reopen: the completed object persists */
    fx_reopen(f);
    got = fx_get(f, BKT, S("dst"), &len, &rv);
    assert_int_equal(rv, 0);
    assert_memory_equal(got, big, len);
    mg_free(got);
    mg_free(big);
}

int test_mpu_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_complete, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_abort_and_list, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_part_copy, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests_name("meta_mpu", tests, NULL, NULL);
}
