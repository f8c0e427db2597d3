/* SPDX-License-Identifier: Apache-2.0 */
/* Tests for meta/key.c and meta/entry.c: order preservation of the key schema, the escape,
 * successor keys, and the entry codec (round trips, and corrupt values rejected). */
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
    b.base[17] = 0;
    b.base[18] = 0x05;
    assert_int_equal(meta__key_upload_decode(b.base, b.len, &bid, &n, &uid, &part), MG_ECORRUPT);
    mg_buf_close(&n);
    mg_buf_close(&a);
    mg_buf_close(&b);
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
        cmocka_unit_test(test_escape_order),  cmocka_unit_test(test_key_layout),
        cmocka_unit_test(test_successor),     cmocka_unit_test(test_entry_roundtrip),
        cmocka_unit_test(test_entry_corrupt),
    };
    return cmocka_run_group_tests_name("meta_key", tests, NULL, NULL);
}
