/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/key.c and meta/entry.c: order properties of the key schema (system rows,
 * then shard 0, then bucket data; a bucket's rows one contiguous range with its tables in
 * order; the escape order-preserving), range bounds, successor keys, decoders, and the
 * entry codec (round trips, and corrupt values rejected). */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/meta/test_meta.h"

struct named {
    struct mg_str name;
    struct mg_str uid;
    struct mg_buf key;
};

static int cmp_str(struct mg_str a, struct mg_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.base, b.base, n) : 0;
    if (c != 0)
        return c;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int cmp_key(const void *x, const void *y)
{
    const struct named *a = x, *b = y;
    return cmp_str((struct mg_str){a->key.base, a->key.len},
                   (struct mg_str){b->key.base, b->key.len});
}

/* Composite keys sort by their first (escaped) component, then by the upload id. */
static void test_escape_order(void **state)
{
    (void)state;
    static const char *names[] = {"",   "a",    "a\0", "a\0\0", "a\0\x01",  "a\x01", "a\xff",
                                  "ab", "a\0b", "b",   "\xff",  "\xff\xff", "\0",    "\0\xff"};
    static const size_t lens[] = {0, 1, 2, 3, 3, 2, 2, 2, 3, 1, 1, 2, 1, 2};
    static const char *uids[] = {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                                 "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"};
    size_t nn = sizeof(names) / sizeof(names[0]);
    struct named v[2 * sizeof(names) / sizeof(names[0])];
    for (size_t i = 0; i < nn; i++) {
        for (size_t u = 0; u < 2; u++) {
            struct named *e = &v[2 * i + u];
            e->name = str_of(names[i], lens[i]);
            e->uid = str_of(uids[u], 32);
            mg_buf_init(&e->key);
            meta__key_upload(&e->key, 7, e->name, e->uid);
        }
    }
    qsort(v, 2 * nn, sizeof(v[0]), cmp_key);
    for (size_t i = 1; i < 2 * nn; i++) {
        int c = cmp_str(v[i - 1].name, v[i].name);
        assert_true(c < 0 || (c == 0 && cmp_str(v[i - 1].uid, v[i].uid) < 0));
    }
    for (size_t i = 0; i < 2 * nn; i++) {
        uint64_t bid;
        uint32_t part = 99;
        struct mg_buf name;
        struct mg_str uid;
        mg_buf_init(&name);
        assert_int_equal(
            meta__key_upload_decode(v[i].key.base, v[i].key.len, &bid, &name, &uid, &part), 0);
        assert_int_equal(bid, 7);
        assert_int_equal(part, 0);
        assert_int_equal(cmp_str((struct mg_str){name.base, name.len}, v[i].name), 0);
        assert_int_equal(cmp_str(uid, v[i].uid), 0);
        mg_buf_close(&name);
        mg_buf_close(&v[i].key);
    }
}

static void test_key_layout(void **state)
{
    (void)state;
    struct mg_buf a, b;
    mg_buf_init(&a);
    mg_buf_init(&b);
    /* bucket ids are big-endian: 255 < 256 bytewise too */
    meta__key_object(&a, 255, S("zzz"));
    meta__key_object(&b, 256, S("a"));
    assert_true(memcmp(a.base, b.base, a.len < b.len ? a.len : b.len) < 0);
    uint64_t bid, parent;
    struct mg_str name;
    assert_int_equal(meta__key_object_decode(b.base, b.len, &bid, &parent, &name), 0);
    assert_int_equal(bid, 256);
    assert_int_equal(parent, 0);
    assert_int_equal(cmp_str(name, S("a")), 0);
    assert_int_equal(meta__key_object_decode(b.base, 10, &bid, &parent, &name), MG_ECORRUPT);
    /* part keys follow their upload row, in part order */
    a.len = b.len = 0;
    meta__key_part(&a, 1, S("k"), S("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), 2);
    meta__key_part(&b, 1, S("k"), S("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), 10);
    assert_true(a.len == b.len && memcmp(a.base, b.base, a.len) < 0);
    struct mg_buf n;
    struct mg_str uid;
    uint32_t part;
    mg_buf_init(&n);
    assert_int_equal(meta__key_upload_decode(b.base, b.len, &bid, &n, &uid, &part), 0);
    assert_int_equal(part, 10);
    /* corrupt escapes */
    assert_int_equal(meta__key_upload_decode(b.base, 20, &bid, &n, &uid, &part), MG_ECORRUPT);
    b.base[META_OBJ_PREFIX_LEN] = 0;
    b.base[META_OBJ_PREFIX_LEN + 1] = 0x05;
    assert_int_equal(meta__key_upload_decode(b.base, b.len, &bid, &n, &uid, &part), MG_ECORRUPT);
    mg_buf_close(&n);
    mg_buf_close(&a);
    mg_buf_close(&b);
}

static int cmp_buf(const struct mg_buf *a, const struct mg_buf *b)
{
    return cmp_str((struct mg_str){a->base, a->len}, (struct mg_str){b->base, b->len});
}

/* lo <= k < hi */
static int in_range(const struct mg_buf *k, const struct mg_buf *lo, const struct mg_buf *hi)
{
    return cmp_buf(lo, k) <= 0 && cmp_buf(k, hi) < 0;
}

#define UID_A S("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
#define UID_Z S("zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz")
#define NROWS 14

/* One row of every table of bucket id, smallest and largest components, in the order the
 * schema promises (A < D < M < T < U < X); tables[i] is row i's table. */
static void bucket_rows(uint64_t id, struct mg_buf rows[NROWS], char tables[NROWS])
{
    static const struct eng_blob_ref ref_lo = {0, 0, 1, 0, 0};
    static const struct eng_blob_ref ref_hi = {UINT64_MAX, UINT64_MAX, 1, 0, 0};
    for (size_t i = 0; i < NROWS; i++)
        mg_buf_init(&rows[i]);
    size_t i = 0;
    tables[i] = META_TBL_ATTR;
    meta__key_bucket_attr(&rows[i++], id);
    tables[i] = META_TBL_DUE;
    meta__key_due(&rows[i++], id, 0, S("a"));
    tables[i] = META_TBL_DUE;
    meta__key_due(&rows[i++], id, INT64_MAX, S("\xff\xff"));
    tables[i] = META_TBL_META;
    meta__key_object(&rows[i++], id, S("\0"));
    tables[i] = META_TBL_META;
    meta__key_object(&rows[i++], id, S("\xff\xff\xff"));
    tables[i] = META_TBL_META;
    meta__key_meta_prefix(&rows[i], id, UINT64_MAX); /* a child of the last directory */
    mg_buf_append(&rows[i++], "z", 1);
    tables[i] = META_TBL_TIME;
    meta__key_time_index(&rows[i++], id, 0, S("a"));
    tables[i] = META_TBL_TIME;
    meta__key_time_index(&rows[i++], id, INT64_MAX, S("\xff"));
    tables[i] = META_TBL_UPLOAD;
    meta__key_upload(&rows[i++], id, S("\0"), UID_A);
    tables[i] = META_TBL_UPLOAD;
    meta__key_part(&rows[i++], id, S("\0"), UID_A, 1);
    tables[i] = META_TBL_UPLOAD;
    meta__key_upload(&rows[i++], id, S("\xff\xff"), UID_Z);
    tables[i] = META_TBL_UPLOAD;
    meta__key_part(&rows[i++], id, S("\xff\xff"), UID_Z, META_PART_MAX);
    tables[i] = META_TBL_BLOB;
    meta__key_blob_index(&rows[i++], id, &ref_lo);
    tables[i] = META_TBL_BLOB;
    meta__key_blob_index(&rows[i++], id, &ref_hi);
    assert_int_equal(i, NROWS);
}

/* Every row of a bucket sorts inside its bucket range and its table's range, tables in
 * order, and no row of a neighbouring bucket falls inside. */
static void test_bucket_contiguous(void **state)
{
    (void)state;
    static const uint64_t ids[] = {0, 1, 255, 256, 0x0100000000000000ull, UINT64_MAX - 1,
                                   UINT64_MAX};
    for (size_t n = 0; n < sizeof(ids) / sizeof(ids[0]); n++) {
        uint64_t id = ids[n];
        struct mg_buf rows[NROWS], lo, hi, tlo, thi;
        char tables[NROWS];
        bucket_rows(id, rows, tables);
        mg_buf_init(&lo);
        mg_buf_init(&hi);
        mg_buf_init(&tlo);
        mg_buf_init(&thi);
        meta__key_bucket_range(id, &lo, &hi);
        for (size_t i = 0; i < NROWS; i++) {
            uint64_t of = 12345;
            assert_true(in_range(&rows[i], &lo, &hi));
            assert_int_equal(meta__key_bucket_of(rows[i].base, rows[i].len, &of), 0);
            assert_true(of == id);
            tlo.len = thi.len = 0;
            meta__key_table_range(id, tables[i], &tlo, &thi);
            assert_true(in_range(&rows[i], &tlo, &thi));
            if (i > 0) /* tables ordered, rows ascending */
                assert_true(cmp_buf(&rows[i - 1], &rows[i]) < 0);
        }
        /* the bounds themselves route to the bucket; neighbours stay outside */
        uint64_t of = 0;
        assert_int_equal(meta__key_bucket_of(lo.base, lo.len, &of), 0);
        assert_true(of == id);
        for (int d = -1; d <= 1; d += 2) {
            if ((d < 0 && id == 0) || (d > 0 && id == UINT64_MAX))
                continue;
            struct mg_buf other[NROWS];
            char t2[NROWS];
            bucket_rows(id + (uint64_t)(int64_t)d, other, t2);
            for (size_t i = 0; i < NROWS; i++) {
                assert_false(in_range(&other[i], &lo, &hi));
                mg_buf_close(&other[i]);
            }
        }
        /* the bucket range sits inside the data range */
        struct mg_buf dlo, dhi;
        mg_buf_init(&dlo);
        mg_buf_init(&dhi);
        meta__key_data_range(&dlo, &dhi);
        assert_true(cmp_buf(&dlo, &lo) <= 0 && cmp_buf(&hi, &dhi) <= 0);
        if (id == UINT64_MAX)
            assert_int_equal(cmp_buf(&hi, &dhi), 0);
        mg_buf_close(&dlo);
        mg_buf_close(&dhi);
        for (size_t i = 0; i < NROWS; i++)
            mg_buf_close(&rows[i]);
        mg_buf_close(&lo);
        mg_buf_close(&hi);
        mg_buf_close(&tlo);
        mg_buf_close(&thi);
    }
}

/* System rows < shard 0 < bucket data; shard 0's ranges hold its rows only. */
static void test_owner_order(void **state)
{
    (void)state;
    struct mg_buf sys[4], s0[4], lo, hi, blo, bhi, dlo, dhi;
    for (size_t i = 0; i < 4; i++)
        mg_buf_init(&sys[i]);
    for (size_t i = 0; i < 4; i++)
        mg_buf_init(&s0[i]);
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    mg_buf_init(&blo);
    mg_buf_init(&bhi);
    mg_buf_init(&dlo);
    mg_buf_init(&dhi);
    meta__key_sys_version(&sys[0]);
    meta__key_applied(&sys[1], 0);
    meta__key_applied(&sys[2], UINT32_MAX);
    meta__key_sys_shards(&sys[3]);
    meta__key_bucket(&s0[0], S("abc"));
    meta__key_bucket(&s0[1], S("zzz.zzz"));
    meta__key_seq(&s0[2], S(META_SEQ_BUCKET_ID));
    meta__key_seq(&s0[3], S("\xff"));
    meta__key_shard0_range(&lo, &hi);
    meta__key_buckets_range(&blo, &bhi);
    meta__key_data_range(&dlo, &dhi);
    assert_int_equal(sys[1].len, 6); /* 0x01 'A' · u32 */
    assert_true(cmp_buf(&sys[1], &sys[2]) < 0);
    for (size_t i = 0; i < 4; i++) {
        assert_true(cmp_buf(&sys[i], &lo) < 0);
        uint64_t id;
        assert_int_equal(meta__key_bucket_of(sys[i].base, sys[i].len, &id), MG_ECORRUPT);
    }
    for (size_t i = 0; i < 4; i++) {
        assert_true(in_range(&s0[i], &lo, &hi));
        assert_int_equal(in_range(&s0[i], &blo, &bhi), i < 2); /* bucket rows, not seqs */
        uint64_t id;
        assert_int_equal(meta__key_bucket_of(s0[i].base, s0[i].len, &id), MG_ECORRUPT);
    }
    assert_true(cmp_buf(&hi, &dlo) <= 0);
    struct mg_str name;
    assert_int_equal(meta__key_bucket_decode(s0[1].base, s0[1].len, &name), 0);
    assert_int_equal(cmp_str(name, S("zzz.zzz")), 0);
    assert_int_equal(meta__key_bucket_decode(s0[2].base, s0[2].len, &name), MG_ECORRUPT);
    for (size_t i = 0; i < 4; i++)
        mg_buf_close(&sys[i]);
    for (size_t i = 0; i < 4; i++)
        mg_buf_close(&s0[i]);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    mg_buf_close(&blo);
    mg_buf_close(&bhi);
    mg_buf_close(&dlo);
    mg_buf_close(&dhi);
}

/* The seek targets LIST and ListMultipartUploads use land exactly where they should. */
static void test_seek_keys(void **state)
{
    (void)state;
    struct mg_buf k, a, b;
    mg_buf_init(&k);
    mg_buf_init(&a);
    mg_buf_init(&b);
    /* object_after(n): above n, at or below everything greater */
    meta__key_object_after(&k, 9, S("a/b"));
    meta__key_object(&a, 9, S("a/b"));
    meta__key_object(&b, 9, str_of("a/b\0", 4));
    assert_true(cmp_buf(&a, &k) < 0 && cmp_buf(&k, &b) <= 0);
    /* object_past_prefix(cp): above every name under cp, at or below the next name */
    k.len = a.len = b.len = 0;
    meta__key_object_past_prefix(&k, 9, S("a/\xff"));
    meta__key_object(&a, 9, S("a/\xff\xff\xff/z"));
    meta__key_object(&b, 9, S("a0"));
    assert_true(cmp_buf(&a, &k) < 0 && cmp_buf(&k, &b) <= 0);
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_object_range(9, S(""), &lo, &hi); /* the whole 'M' table's flat namespace */
    assert_true(in_range(&a, &lo, &hi) && in_range(&b, &lo, &hi));
    /* upload_after(n, uid): past that upload's parts, not past the next upload */
    k.len = a.len = b.len = 0;
    meta__key_upload_after(&k, 9, S("k"), UID_A);
    meta__key_part(&a, 9, S("k"), UID_A, META_PART_MAX);
    meta__key_upload(&b, 9, S("k"), UID_Z);
    assert_true(cmp_buf(&a, &k) < 0 && cmp_buf(&k, &b) < 0);
    /* upload_after(n, ""): past every upload of n, not past those of n + "\0" */
    k.len = a.len = b.len = 0;
    meta__key_upload_after(&k, 9, S("k"), S(""));
    meta__key_part(&a, 9, S("k"), UID_Z, META_PART_MAX);
    meta__key_upload(&b, 9, str_of("k\0", 2), UID_A);
    assert_true(cmp_buf(&a, &k) < 0 && cmp_buf(&k, &b) < 0);
    /* upload_range(prefix) holds uploads and parts under the prefix, nothing else */
    lo.len = hi.len = 0;
    meta__key_upload_range(9, str_of("k\0", 2), &lo, &hi);
    assert_true(in_range(&b, &lo, &hi));
    assert_false(in_range(&a, &lo, &hi));
    /* part_range(after): parts numbered after `after`, not the upload row */
    lo.len = hi.len = a.len = b.len = 0;
    meta__key_part_range(9, S("k"), UID_A, 2, &lo, &hi);
    meta__key_part(&a, 9, S("k"), UID_A, 3);
    meta__key_part(&b, 9, S("k"), UID_A, 2);
    assert_true(in_range(&a, &lo, &hi));
    assert_false(in_range(&b, &lo, &hi));
    b.len = 0;
    meta__key_upload(&b, 9, S("k"), UID_A);
    assert_false(in_range(&b, &lo, &hi));
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    mg_buf_close(&k);
    mg_buf_close(&a);
    mg_buf_close(&b);
}

/* Decoders take back what the builders wrote and reject other tables and short keys. */
static void test_key_decode(void **state)
{
    (void)state;
    struct mg_buf k;
    mg_buf_init(&k);
    uint64_t id;
    int64_t due;
    struct mg_str name;
    meta__key_due(&k, 42, 1764500000123, S("logs/x"));
    assert_int_equal(meta__key_due_decode(k.base, k.len, &id, &due, &name), 0);
    assert_true(id == 42 && due == 1764500000123);
    assert_int_equal(cmp_str(name, S("logs/x")), 0);
    assert_int_equal(meta__key_due_decode(k.base, META_TABLE_KEY_LEN + 8, &id, &due, &name),
                     MG_ECORRUPT); /* no key */
    assert_int_equal(meta__key_due_decode(k.base, 12, &id, &due, &name), MG_ECORRUPT);
    uint64_t parent;
    assert_int_equal(meta__key_object_decode(k.base, k.len, &id, &parent, &name), MG_ECORRUPT);
    k.len = 0;
    meta__key_object(&k, 42, S("o"));
    assert_int_equal(meta__key_due_decode(k.base, k.len, &id, &due, &name), MG_ECORRUPT);
    struct mg_buf nb;
    struct mg_str uid;
    uint32_t part;
    mg_buf_init(&nb);
    assert_int_equal(meta__key_upload_decode(k.base, k.len, &id, &nb, &uid, &part), MG_ECORRUPT);
    mg_buf_close(&nb);
    assert_int_equal(meta__key_bucket_of(k.base, META_BUCKET_KEY_LEN - 1, &id), MG_ECORRUPT);
    assert_int_equal(meta__key_bucket_of(k.base, META_BUCKET_KEY_LEN, &id), 0);
    assert_true(id == 42);
    mg_buf_close(&k);
}

static void test_successor(void **state)
{
    (void)state;
    struct mg_buf k;
    mg_buf_init(&k);
    mg_buf_append(&k, "a\xff\xff", 3);
    assert_int_equal(meta__key_successor(&k), 0);
    assert_int_equal(k.len, 1);
    assert_int_equal(k.base[0], 'b');
    k.len = 0;
    mg_buf_append(&k, "a/\xc3\xa9/", 5); /* UTF-8 common prefix "a/é/" */
    assert_int_equal(meta__key_successor(&k), 0);
    assert_memory_equal(k.base, "a/\xc3\xa9\x30", 5);
    k.len = 0;
    mg_buf_append(&k, "\xff\xff", 2);
    assert_int_equal(meta__key_successor(&k), -1);
    mg_buf_close(&k);
}

static void sample_object(struct meta_object *o, struct meta_extent ext[2], struct meta_kv kv[2],
                          struct meta_part_info parts[2])
{
    memset(o, 0, sizeof(*o));
    ext[0].ref = (struct eng_blob_ref){1, 100, 10, 0xdeadbeef, 0};
    ext[1].ref = (struct eng_blob_ref){2, 0, 5, 7, 0};
    kv[0] = (struct meta_kv){S("color"), S("blue")};
    kv[1] = (struct meta_kv){S(""), S("\0x")};
    parts[0] = (struct meta_part_info){1, 10, S("AAAA")};
    parts[1] = (struct meta_part_info){3, 5, S("")};
    o->size = 15;
    o->mtime_ms = 1764500000123;
    o->etag = S("0123456789abcdef0123456789abcdef-2");
    o->content_type = S("text/plain");
    o->cache_control = S("no-cache");
    o->expires = S("Thu, 01 Dec 1994 16:00:00 GMT");
    o->user_meta = kv;
    o->nuser_meta = 2;
    o->tags = kv;
    o->ntags = 1;
    o->acl = META_ACL_PUBLIC_READ;
    o->owner = S("alice");
    o->cksum_algo = MG_CKSUM_CRC32C;
    o->cksum_value = S("abcd==-2");
    o->parts = parts;
    o->nparts = 2;
    o->data.size = 15;
    o->data.extents = ext;
    o->data.nextents = 2;
}

static void test_entry_roundtrip(void **state)
{
    (void)state;
    struct meta_object o, d;
    struct meta_extent ext[2];
    struct meta_kv kv[2];
    struct meta_part_info parts[2];
    struct mg_arena a;
    struct mg_buf v;
    mg_arena_init(&a);
    mg_buf_init(&v);
    sample_object(&o, ext, kv, parts);
    meta__object_encode(&o, META_REC_OBJECT, &v);
    assert_int_equal(meta__object_decode(v.base, v.len, META_REC_OBJECT, &a, &d), 0);
    assert_int_equal(d.size, 15);
    assert_int_equal(d.mtime_ms, o.mtime_ms);
    assert_int_equal(cmp_str(d.etag, o.etag), 0);
    assert_int_equal(cmp_str(d.expires, o.expires), 0);
    assert_int_equal(d.nuser_meta, 2);
    assert_int_equal(cmp_str(d.user_meta[1].v, S("\0x")), 0);
    assert_int_equal(d.ntags, 1);
    assert_int_equal(d.acl, META_ACL_PUBLIC_READ);
    assert_int_equal(d.cksum_algo, MG_CKSUM_CRC32C);
    assert_int_equal(d.nparts, 2);
    assert_int_equal(d.parts[1].number, 3);
    assert_int_equal(d.data.nextents, 2);
    assert_memory_equal(&d.data.extents[0].ref, &ext[0].ref, sizeof(ext[0].ref));
    /* the kind is checked */
    assert_int_equal(meta__object_decode(v.base, v.len, META_REC_UPLOAD, &a, &d), MG_ECORRUPT);
    /* every truncation decodes cleanly or is rejected: never a crash */
    for (size_t n = 0; n < v.len; n++) {
        int rv = meta__object_decode(v.base, n, META_REC_OBJECT, &a, &d);
        assert_true(rv == 0 || rv == MG_ECORRUPT);
        if (n < 3)
            assert_int_equal(rv, MG_ECORRUPT);
    }

    struct meta_part p = {.number = 42,
                          .size = 3,
                          .mtime_ms = 5,
                          .etag = S("e"),
                          .checksum = S("c"),
                          .data = {.size = 3, .inline_data = S("xyz")}};
    struct meta_part pd;
    v.len = 0;
    meta__part_encode(&p, &v);
    assert_int_equal(meta__part_decode(v.base, v.len, &a, &pd), 0);
    assert_int_equal(pd.number, 42);
    assert_int_equal(cmp_str(pd.data.inline_data, S("xyz")), 0);
    assert_int_equal(cmp_str(pd.checksum, S("c")), 0);

    struct meta_bucket b = {.id = 9,
                            .owner = S("bob"),
                            .created_ms = 3,
                            .acl = META_ACL_PRIVATE,
                            .tags = kv,
                            .ntags = 2,
                            .lifecycle = S("<x/>")};
    struct meta_bucket bd;
    v.len = 0;
    meta__bucket_encode(&b, &v);
    assert_int_equal(meta__bucket_decode(v.base, v.len, &a, &bd), 0);
    assert_int_equal(bd.id, 9);
    assert_int_equal(bd.ntags, 2);
    assert_int_equal(cmp_str(bd.lifecycle, S("<x/>")), 0);
    mg_buf_close(&v);
    mg_arena_close(&a);
}

static void test_entry_corrupt(void **state)
{
    (void)state;
    struct mg_arena a;
    struct meta_object d;
    mg_arena_init(&a);
    /* size says 4, inline has 3 */
    static const char size_mismatch[] = {1, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 4, 17, 3, 'a', 'b', 'c'};
    assert_int_equal(
        meta__object_decode(size_mismatch, sizeof(size_mismatch), META_REC_OBJECT, &a, &d),
        MG_ECORRUPT);
    /* future version */
    static const char version[] = {1, 9, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(meta__object_decode(version, sizeof(version), META_REC_OBJECT, &a, &d),
                     MG_ECORRUPT);
    /* length runs past the end; overlong LEB128 */
    static const char past[] = {1, 1, 3, 50, 'x'};
    assert_int_equal(meta__object_decode(past, sizeof(past), META_REC_OBJECT, &a, &d), MG_ECORRUPT);
    static const char leb[] = {1,          1,          3,          (char)0x80, (char)0x80,
                               (char)0x80, (char)0x80, (char)0x80, 1};
    assert_int_equal(meta__object_decode(leb, sizeof(leb), META_REC_OBJECT, &a, &d), MG_ECORRUPT);
    /* acl out of range; extent of the wrong width */
    static const char acl[] = {1, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 12, 4, 0, 0, 0, 9};
    assert_int_equal(meta__object_decode(acl, sizeof(acl), META_REC_OBJECT, &a, &d), MG_ECORRUPT);
    static const char ext[] = {1, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 18, 2, 0, 0};
    assert_int_equal(meta__object_decode(ext, sizeof(ext), META_REC_OBJECT, &a, &d), MG_ECORRUPT);
    /* unknown tags are skipped */
    static const char unknown[] = {1, 1, 1, 8, 0, 0, 0, 0, 0, 0, 0, 0, 99, 2, 'h', 'i'};
    assert_int_equal(meta__object_decode(unknown, sizeof(unknown), META_REC_OBJECT, &a, &d), 0);
    /* a bucket record needs its id */
    static const char bucket[] = {4, 1, 2, 1, 'x'};
    struct meta_bucket b;
    assert_int_equal(meta__bucket_decode(bucket, sizeof(bucket), &a, &b), MG_ECORRUPT);
    mg_arena_close(&a);
}

int test_key_run(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_order),      cmocka_unit_test(test_key_layout),
        cmocka_unit_test(test_bucket_contiguous), cmocka_unit_test(test_owner_order),
        cmocka_unit_test(test_seek_keys),         cmocka_unit_test(test_key_decode),
        cmocka_unit_test(test_successor),         cmocka_unit_test(test_entry_roundtrip),
        cmocka_unit_test(test_entry_corrupt),
    };
    return cmocka_run_group_tests_name("meta_key", tests, NULL, NULL);
}
