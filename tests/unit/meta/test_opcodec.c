/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/opcodec.c unit tests: every op type's arguments and results round-trip
 * field by field and re-encode to the same bytes; every truncation and every
 * flipped byte is refused (the crc32c trailer); with the trailer fixed up,
 * every byte set to a handful of values either is refused or decodes to a
 * value that re-encodes to exactly those bytes (the validators, run under
 * ASan+UBSan); forged counts, enums, flags, overlong varints, trailing bytes,
 * another op type and an unknown status are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "meta/opcodec.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})

/* --------------------------------------------------------------- fixtures */

static void *zalloc(struct mg_arena *a, size_t n)
{
    void *p = mg_arena_alloc(a, n);
    memset(p, 0, n);
    return p;
}

static struct mg_str fmt(struct mg_arena *a, const char *f, ...) __attribute__((format(printf, 2, 3)));
static struct mg_str fmt(struct mg_arena *a, const char *f, ...)
{
    char b[64];
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(b, sizeof(b), f, ap);
    va_end(ap);
    return (struct mg_str){mg_arena_dup(a, b, (size_t)n), (size_t)n};
}

static struct meta_kv *kvs(struct mg_arena *a, size_t n, const char *tag)
{
    struct meta_kv *kv = zalloc(a, n * sizeof(*kv));
    for (size_t i = 0; i < n; i++) {
        kv[i].k = fmt(a, "%s-%u", tag, (unsigned)i);
        kv[i].v = i == 1 ? (struct mg_str){"", 0} : fmt(a, "v%u\x01\xff", (unsigned)i);
    }
    return kv;
}

static void fill_data(struct mg_arena *a, struct meta_data *d, unsigned seed, int inline_only)
{
    if (inline_only) {
        static const char bytes[] = "inline bytes \x00 with a NUL";
        d->inline_data = (struct mg_str){mg_arena_dup(a, bytes, sizeof(bytes) - seed % 7),
                                         sizeof(bytes) - seed % 7};
        d->size = d->inline_data.len;
        return;
    }
    d->nextents = 2 + seed % 3;
    d->extents = zalloc(a, d->nextents * sizeof(*d->extents));
    d->size = 0;
    for (size_t i = 0; i < d->nextents; i++) {
        struct eng_blob_ref *r = &d->extents[i].ref;
        r->segment = 0x1122334455667788ULL + i + seed;
        r->offset = UINT64_MAX - i;
        r->length = 5u << 20;
        r->crc32c = 0xdeadbeef ^ (uint32_t)i;
        r->flags = 0x80000001u;
        d->size += r->length;
    }
}

static void fill_object(struct mg_arena *a, struct meta_object *o, unsigned seed)
{
    o->key = fmt(a, "dir/key-%u/\xe2\x82\xac", seed);
    o->mtime_ms = -1234567 - (int64_t)seed; /* negative: i64 survives */
    o->etag = fmt(a, "0123456789abcdef0123456789abcd-%u", seed);
    o->content_type = S("application/octet-stream");
    o->content_encoding = S("gzip");
    o->cache_control = S("no-cache");
    o->content_disposition = S("attachment; filename=\"x\"");
    o->content_language = S("en");
    o->expires = S("Thu, 01 Dec 1994 16:00:00 GMT");
    o->nuser_meta = 3;
    o->user_meta = kvs(a, 3, "meta");
    o->ntags = 2;
    o->tags = kvs(a, 2, "tag");
    o->acl = META_ACL_AUTHENTICATED_READ;
    o->owner = S("alice");
    o->cksum_algo = MG_CKSUM_MD5;
    o->cksum_value = S("q83vEQ==-3");
    o->nparts = 3;
    o->parts = zalloc(a, 3 * sizeof(*o->parts));
    for (unsigned i = 0; i < 3; i++)
        o->parts[i] = (struct meta_part_info){
            .number = i + 1, .size = 5u << 20, .checksum = i == 2 ? S("") : S("AAAA")};
    fill_data(a, &o->data, seed, seed % 2);
    o->size = o->data.size;
    o->lc_due_ms = 1700000000000LL;
    o->lc_gen = 42;
    o->upload_id = S("upload-id-0123456789abcdefghijkl");
}

static void fill_part(struct mg_arena *a, struct meta_part *p, unsigned seed)
{
    p->number = 10000 - seed;
    p->mtime_ms = 99 + seed;
    p->etag = fmt(a, "etag-%u", seed);
    p->checksum = seed % 2 ? S("") : S("crc==");
    fill_data(a, &p->data, seed, seed % 2 == 0);
    p->size = p->data.size;
}

/* An op of type t with every argument set, whether t uses it or not. */
static struct meta_op *full_in(enum meta_op_type t)
{
    struct meta_op *op = meta_op_create(t);
    struct mg_arena *a = &op->priv->arena;
    __typeof__(op->in) *in = &op->in;
    in->bucket = S("my-bucket.1");
    in->bucket_id = 0x0807060504030201ULL;
    in->key = S("a/b/c\x00d");
    in->owner = S("bob");
    in->acl = META_ACL_PUBLIC_READ_WRITE;
    in->mask = META_BUCKET_SET_ACL | META_BUCKET_SET_LIFECYCLE;
    struct meta_bucket *b = &in->bucket_values;
    b->name = S("other-bucket");
    b->id = 7;
    b->owner = S("carol");
    b->created_ms = 1600000000000LL;
    b->acl = META_ACL_PUBLIC_READ;
    b->ntags = 2;
    b->tags = kvs(a, 2, "btag");
    b->lifecycle = S("<LifecycleConfiguration/>");
    b->lifecycle_bin = S("\x01\x02\x00\x03");
    b->lc_gen = 3;
    fill_object(a, &in->object, (unsigned)t);
    in->has_cond = 1;
    in->cond.if_none_match_any = 1;
    in->cond.if_match = S("abc");
    in->nkeys = 4;
    struct mg_str *keys = zalloc(a, 4 * sizeof(*keys));
    for (unsigned i = 0; i < 4; i++)
        keys[i] = i == 2 ? S("") : fmt(a, "k%u", i);
    in->keys = keys;
    in->upload_id = S("UPLOADID");
    fill_part(a, &in->part, 1);
    in->nparts = 3;
    struct meta_part *parts = zalloc(a, 3 * sizeof(*parts));
    for (unsigned i = 0; i < 3; i++)
        fill_part(a, &parts[i], i + 2);
    in->parts = parts;
    in->request_id = 0xfedcba9876543210ULL;
    if (t == META_OP_LC_REINDEX) {
        in->nexpire = 500; /* a count, no items */
    } else {
        in->nexpire = 3;
        struct meta_expire_item *e = zalloc(a, 3 * sizeof(*e));
        for (unsigned i = 0; i < 3; i++)
            e[i] = (struct meta_expire_item){fmt(a, "exp-%u", i), -5 + (int64_t)i, 77};
        in->expire = e;
    }
    in->now_ms = INT64_MIN;
    in->lc_epoch = UINT64_MAX;
    return op;
}

static void fill_out(struct meta_op *op)
{
    struct mg_arena *a = &op->priv->arena;
    op->out.existed = 1;
    if (op->in.nkeys > 0) {
        op->out.existed_many = zalloc(a, op->in.nkeys * sizeof(int));
        for (size_t i = 0; i < op->in.nkeys; i++)
            op->out.existed_many[i] = (int)(i % 2);
    }
    op->out.upload_id = S("NEW-UPLOAD");
    fill_object(a, &op->out.object, 3);
    op->out.expire = (struct meta_expire_result){1, 2, 3, 4, 5, 6, 1, 0};
}

/* ------------------------------------------------------------ comparison */

static void eq_str(struct mg_str a, struct mg_str b)
{
    assert_int_equal(a.len, b.len);
    assert_non_null(b.base);
    if (a.len > 0)
        assert_memory_equal(a.base, b.base, a.len);
}

static void eq_kvs(const struct meta_kv *a, size_t na, const struct meta_kv *b, size_t nb)
{
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        eq_str(a[i].k, b[i].k);
        eq_str(a[i].v, b[i].v);
    }
}

static void eq_data(const struct meta_data *a, const struct meta_data *b)
{
    assert_true(a->size == b->size);
    eq_str(a->inline_data, b->inline_data);
    assert_int_equal(a->nextents, b->nextents);
    for (size_t i = 0; i < a->nextents; i++)
        assert_memory_equal(&a->extents[i].ref, &b->extents[i].ref, sizeof(struct eng_blob_ref));
}

static void eq_object(const struct meta_object *a, const struct meta_object *b)
{
    eq_str(a->key, b->key);
    assert_true(a->size == b->size && a->mtime_ms == b->mtime_ms);
    eq_str(a->etag, b->etag);
    eq_str(a->content_type, b->content_type);
    eq_str(a->content_encoding, b->content_encoding);
    eq_str(a->cache_control, b->cache_control);
    eq_str(a->content_disposition, b->content_disposition);
    eq_str(a->content_language, b->content_language);
    eq_str(a->expires, b->expires);
    eq_kvs(a->user_meta, a->nuser_meta, b->user_meta, b->nuser_meta);
    eq_kvs(a->tags, a->ntags, b->tags, b->ntags);
    assert_int_equal(a->acl, b->acl);
    eq_str(a->owner, b->owner);
    assert_int_equal(a->cksum_algo, b->cksum_algo);
    eq_str(a->cksum_value, b->cksum_value);
    assert_int_equal(a->nparts, b->nparts);
    for (size_t i = 0; i < a->nparts; i++) {
        assert_int_equal(a->parts[i].number, b->parts[i].number);
        assert_true(a->parts[i].size == b->parts[i].size);
        eq_str(a->parts[i].checksum, b->parts[i].checksum);
    }
    eq_data(&a->data, &b->data);
    assert_true(a->lc_due_ms == b->lc_due_ms && a->lc_gen == b->lc_gen);
    eq_str(a->upload_id, b->upload_id);
}

static void eq_part(const struct meta_part *a, const struct meta_part *b)
{
    assert_int_equal(a->number, b->number);
    assert_true(a->size == b->size && a->mtime_ms == b->mtime_ms);
    eq_str(a->etag, b->etag);
    eq_str(a->checksum, b->checksum);
    eq_data(&a->data, &b->data);
}

static void eq_in(const struct meta_op *x, const struct meta_op *y)
{
    assert_int_equal(x->type, y->type);
    eq_str(x->in.bucket, y->in.bucket);
    assert_true(x->in.bucket_id == y->in.bucket_id);
    eq_str(x->in.key, y->in.key);
    eq_str(x->in.owner, y->in.owner);
    assert_int_equal(x->in.acl, y->in.acl);
    assert_int_equal(x->in.mask, y->in.mask);
    const struct meta_bucket *a = &x->in.bucket_values, *b = &y->in.bucket_values;
    eq_str(a->name, b->name);
    assert_true(a->id == b->id && a->created_ms == b->created_ms && a->lc_gen == b->lc_gen);
    eq_str(a->owner, b->owner);
    assert_int_equal(a->acl, b->acl);
    eq_kvs(a->tags, a->ntags, b->tags, b->ntags);
    eq_str(a->lifecycle, b->lifecycle);
    eq_str(a->lifecycle_bin, b->lifecycle_bin);
    eq_object(&x->in.object, &y->in.object);
    assert_int_equal(x->in.has_cond, y->in.has_cond);
    assert_int_equal(x->in.cond.if_none_match_any, y->in.cond.if_none_match_any);
    eq_str(x->in.cond.if_match, y->in.cond.if_match);
    assert_int_equal(x->in.nkeys, y->in.nkeys);
    for (size_t i = 0; i < x->in.nkeys; i++)
        eq_str(x->in.keys[i], y->in.keys[i]);
    eq_str(x->in.upload_id, y->in.upload_id);
    eq_part(&x->in.part, &y->in.part);
    assert_int_equal(x->in.nparts, y->in.nparts);
    for (size_t i = 0; i < x->in.nparts; i++)
        eq_part(&x->in.parts[i], &y->in.parts[i]);
    assert_true(x->in.request_id == y->in.request_id);
    assert_int_equal(x->in.nexpire, y->in.nexpire);
    assert_int_equal(x->in.expire == NULL, y->in.expire == NULL);
    for (size_t i = 0; x->in.expire != NULL && i < x->in.nexpire; i++) {
        eq_str(x->in.expire[i].key, y->in.expire[i].key);
        assert_true(x->in.expire[i].due_ms == y->in.expire[i].due_ms);
        assert_true(x->in.expire[i].mtime_ms == y->in.expire[i].mtime_ms);
    }
    assert_true(x->in.now_ms == y->in.now_ms && x->in.lc_epoch == y->in.lc_epoch);
}

static void eq_out(const struct meta_op *x, const struct meta_op *y)
{
    assert_int_equal(x->out.existed, y->out.existed);
    assert_int_equal(x->out.existed_many == NULL, y->out.existed_many == NULL);
    for (size_t i = 0; x->out.existed_many != NULL && i < x->in.nkeys; i++)
        assert_int_equal(x->out.existed_many[i], y->out.existed_many[i]);
    eq_str(x->out.upload_id, y->out.upload_id);
    eq_object(&x->out.object, &y->out.object);
    assert_memory_equal(&x->out.expire, &y->out.expire, sizeof(x->out.expire));
}

/* Recompute the crc32c trailer of a value edited in place. */
static void fix_crc(unsigned char *v, size_t len)
{
    struct mg_cksum c;
    uint8_t d[32];
    mg_cksum_init(&c, MG_CKSUM_CRC32C);
    mg_cksum_update(&c, v, len - 4);
    mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    memcpy(v + len - 4, d, 4);
}

/* ------------------------------------------------------------------ tests */

static void test_in_round_trip(void **state)
{
    (void)state;
    for (int t = 0; t < META_OP__COUNT; t++) {
        struct meta_op *op = full_in((enum meta_op_type)t);
        struct mg_buf b, b2;
        mg_buf_init(&b);
        mg_buf_init(&b2);
        meta__opcodec_encode_in(op, &b);
        struct meta_op *got = NULL;
        assert_int_equal(meta__opcodec_decode_in(b.base, b.len, &got), 0);
        eq_in(op, got);
        meta__opcodec_encode_in(got, &b2);
        assert_int_equal(b.len, b2.len);
        assert_memory_equal(b.base, b2.base, b.len);
        meta_op_destroy(got);
        /* a zeroed op (what meta_op_create gives) too */
        struct meta_op *z = meta_op_create((enum meta_op_type)t);
        b.len = 0;
        meta__opcodec_encode_in(z, &b);
        assert_int_equal(meta__opcodec_decode_in(b.base, b.len, &got), 0);
        eq_in(z, got);
        assert_null(got->in.keys);
        assert_null(got->in.expire);
        meta_op_destroy(got);
        meta_op_destroy(z);
        meta_op_destroy(op);
        mg_buf_close(&b);
        mg_buf_close(&b2);
    }
}

static void test_out_round_trip(void **state)
{
    (void)state;
    for (int t = 0; t < META_OP__COUNT; t++) {
        struct meta_op *op = full_in((enum meta_op_type)t);
        fill_out(op);
        int statuses[] = {0, MG_ENOSUCHKEY, MG_ETIMEOUT};
        for (int s = 0; s < 3; s++) {
            struct mg_buf b;
            mg_buf_init(&b);
            meta__opcodec_encode_out(op, statuses[s], &b);
            struct meta_op *peer = full_in((enum meta_op_type)t); /* the caller's copy */
            int st = -1;
            assert_int_equal(meta__opcodec_decode_out(b.base, b.len, peer, &st), 0);
            assert_int_equal(st, statuses[s]);
            /* results live in the op, not in the buffer */
            memset(b.base, 0xAA, b.len);
            eq_out(op, peer);
            meta_op_destroy(peer);
            mg_buf_close(&b);
        }
        meta_op_destroy(op);
    }
}

/* DELETE_MANY results without existed_many (a dedup hit answers a status only) still give
 * the caller nkeys entries. */
static void test_out_delete_many_empty(void **state)
{
    (void)state;
    struct meta_op *op = full_in(META_OP_OBJECT_DELETE_MANY);
    struct mg_buf b;
    mg_buf_init(&b);
    meta__opcodec_encode_out(op, 0, &b); /* out.existed_many NULL */
    struct meta_op *peer = full_in(META_OP_OBJECT_DELETE_MANY);
    int st;
    assert_int_equal(meta__opcodec_decode_out(b.base, b.len, peer, &st), 0);
    assert_non_null(peer->out.existed_many);
    for (size_t i = 0; i < peer->in.nkeys; i++)
        assert_int_equal(peer->out.existed_many[i], 0);
    /* a caller whose op has another key count refuses a non-empty list */
    fill_out(op);
    b.len = 0;
    meta__opcodec_encode_out(op, 0, &b);
    peer->in.nkeys = 3;
    assert_int_equal(meta__opcodec_decode_out(b.base, b.len, peer, &st), MG_ECORRUPT);
    /* and so does an op of another type */
    struct meta_op *other = full_in(META_OP_OBJECT_DELETE);
    assert_int_equal(meta__opcodec_decode_out(b.base, b.len, other, &st), MG_ECORRUPT);
    meta_op_destroy(other);
    meta_op_destroy(peer);
    meta_op_destroy(op);
    mg_buf_close(&b);
}

/* Every prefix and every single flipped byte is refused. */
static void check_refused_edits(const unsigned char *v, size_t len, int out, enum meta_op_type t)
{
    unsigned char *c = malloc(len);
    struct meta_op *peer = full_in(t);
    for (size_t n = 0; n < len; n++) {
        struct meta_op *got = NULL;
        int st;
        if (out)
            assert_int_equal(meta__opcodec_decode_out(v, n, peer, &st), MG_ECORRUPT);
        else
            assert_int_equal(meta__opcodec_decode_in(v, n, &got), MG_ECORRUPT);
    }
    for (size_t i = 0; i < len; i++) {
        for (int m = 0; m < 2; m++) {
            memcpy(c, v, len);
            c[i] ^= m == 0 ? 0x01 : 0xff;
            struct meta_op *got = NULL;
            int st;
            if (out)
                assert_int_equal(meta__opcodec_decode_out(c, len, peer, &st), MG_ECORRUPT);
            else
                assert_int_equal(meta__opcodec_decode_in(c, len, &got), MG_ECORRUPT);
        }
    }
    meta_op_destroy(peer);
    free(c);
}

static void test_truncation_and_corruption(void **state)
{
    (void)state;
    for (int t = 0; t < META_OP__COUNT; t++) {
        struct meta_op *op = full_in((enum meta_op_type)t);
        fill_out(op);
        struct mg_buf b;
        mg_buf_init(&b);
        meta__opcodec_encode_in(op, &b);
        check_refused_edits((unsigned char *)b.base, b.len, 0, (enum meta_op_type)t);
        b.len = 0;
        meta__opcodec_encode_out(op, MG_EPRECONDITION, &b);
        check_refused_edits((unsigned char *)b.base, b.len, 1, (enum meta_op_type)t);
        mg_buf_close(&b);
        meta_op_destroy(op);
    }
}

/* With the trailer recomputed, the validators alone judge: every byte set to each of a few
 * values is refused or decodes to a value that re-encodes to exactly the same bytes. */
static void test_validators(void **state)
{
    (void)state;
    static const unsigned char vals[] = {0x00, 0x01, 0x02, 0x7f, 0x80, 0xff};
    size_t refused = 0, accepted = 0;
    for (int t = 0; t < META_OP__COUNT; t++) {
        struct meta_op *op = full_in((enum meta_op_type)t);
        fill_out(op);
        struct mg_buf b, re;
        mg_buf_init(&b);
        mg_buf_init(&re);
        for (int out = 0; out < 2; out++) {
            b.len = 0;
            if (out)
                meta__opcodec_encode_out(op, MG_EIO, &b);
            else
                meta__opcodec_encode_in(op, &b);
            unsigned char *c = malloc(b.len);
            for (size_t i = 0; i + 4 < b.len; i++) {
                for (size_t k = 0; k < sizeof(vals); k++) {
                    memcpy(c, b.base, b.len);
                    if (c[i] == vals[k])
                        continue;
                    c[i] = vals[k];
                    fix_crc(c, b.len);
                    re.len = 0;
                    int rv, st = 0;
                    if (out) {
                        struct meta_op *peer = full_in((enum meta_op_type)t);
                        rv = meta__opcodec_decode_out(c, b.len, peer, &st);
                        if (rv == 0)
                            meta__opcodec_encode_out(peer, st, &re);
                        meta_op_destroy(peer);
                    } else {
                        struct meta_op *got = NULL;
                        rv = meta__opcodec_decode_in(c, b.len, &got);
                        if (rv == 0) {
                            meta__opcodec_encode_in(got, &re);
                            meta_op_destroy(got);
                        }
                    }
                    if (rv != 0) {
                        assert_int_equal(rv, MG_ECORRUPT);
                        refused++;
                        continue;
                    }
                    accepted++;
                    assert_int_equal(re.len, b.len);
                    assert_memory_equal(re.base, c, b.len);
                }
            }
            free(c);
        }
        mg_buf_close(&b);
        mg_buf_close(&re);
        meta_op_destroy(op);
    }
    assert_true(refused > 0 && accepted > 0);
}

/* Hand-built values: the header, the end, forged counts. */
static void test_forged(void **state)
{
    (void)state;
    struct meta_op *z = meta_op_create(META_OP_OBJECT_PUT);
    struct mg_buf b;
    mg_buf_init(&b);
    meta__opcodec_encode_in(z, &b);
    unsigned char *c = malloc(b.len + 16);
    struct meta_op *got = NULL;
    int st;
    /* version, tag, type */
    size_t at[] = {0, 1, 2};
    unsigned char bad[] = {META_OPCODEC_VERSION + 1, 'O', META_OP__COUNT};
    for (int i = 0; i < 3; i++) {
        memcpy(c, b.base, b.len);
        c[at[i]] = bad[i];
        fix_crc(c, b.len);
        assert_int_equal(meta__opcodec_decode_in(c, b.len, &got), MG_ECORRUPT);
    }
    /* a trailing byte after the last field (the crc over it) */
    memcpy(c, b.base, b.len - 4);
    c[b.len - 4] = 0;
    fix_crc(c, b.len + 1);
    assert_int_equal(meta__opcodec_decode_in(c, b.len + 1, &got), MG_ECORRUPT);
    /* the bucket name's length (offset 19: after version, tag, type and two u64) forged to
     * 2^63 as a 10-byte varint, and as an overlong zero */
    size_t off = 3 + 16;
    static const unsigned char big[10] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    memcpy(c, b.base, off);
    memcpy(c + off, big, 10);
    memcpy(c + off + 10, b.base + off + 1, b.len - off - 1);
    fix_crc(c, b.len + 9);
    assert_int_equal(meta__opcodec_decode_in(c, b.len + 9, &got), MG_ECORRUPT);
    memcpy(c, b.base, off);
    c[off] = 0x80;
    c[off + 1] = 0x00;
    memcpy(c + off + 2, b.base + off + 1, b.len - off - 1);
    fix_crc(c, b.len + 1);
    assert_int_equal(meta__opcodec_decode_in(c, b.len + 1, &got), MG_ECORRUPT);
    /* an out with an unknown status */
    b.len = 0;
    meta__opcodec_encode_out(z, 0, &b);
    memcpy(c, b.base, b.len);
    c[3] = MG_ERR__COUNT;
    fix_crc(c, b.len);
    assert_int_equal(meta__opcodec_decode_out(c, b.len, z, &st), MG_ECORRUPT);
    c[3] = MG_ERR__COUNT - 1;
    fix_crc(c, b.len);
    assert_int_equal(meta__opcodec_decode_out(c, b.len, z, &st), 0);
    assert_int_equal(st, MG_ERR__COUNT - 1);
    free(c);
    mg_buf_close(&b);
    meta_op_destroy(z);
}

/* test_opcodec --write-seeds DIR: the seed corpus of tests/fuzz/fuzz_opcodec.c (its input is
 * mode byte, key count byte, value): every op type's in and out, with its trailer and without
 * (mode bit 1: the target appends it), full and zeroed. */
static int write_seeds(const char *dir)
{
    unsigned n = 0;
    for (int t = 0; t < META_OP__COUNT; t++) {
        for (int full = 0; full < 2; full++) {
            struct meta_op *op = full ? full_in((enum meta_op_type)t)
                                      : meta_op_create((enum meta_op_type)t);
            if (full)
                fill_out(op);
            for (int mode = 0; mode < 4; mode++) {
                struct mg_buf b;
                mg_buf_init(&b);
                uint8_t hdr[2] = {(uint8_t)mode, (uint8_t)op->in.nkeys};
                mg_buf_append(&b, hdr, 2);
                if (mode & 1)
                    meta__opcodec_encode_out(op, full ? MG_ENOSUCHKEY : 0, &b);
                else
                    meta__opcodec_encode_in(op, &b);
                if (mode & 2)
                    b.len -= 4; /* the target computes the trailer */
                char path[512];
                snprintf(path, sizeof(path), "%s/seed%03u", dir, n++);
                FILE *fp = fopen(path, "wb");
                if (fp == NULL || fwrite(b.base, 1, b.len, fp) != b.len)
                    return 1;
                fclose(fp);
                mg_buf_close(&b);
            }
            meta_op_destroy(op);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_round_trip),
        cmocka_unit_test(test_out_round_trip),
        cmocka_unit_test(test_out_delete_many_empty),
        cmocka_unit_test(test_truncation_and_corruption),
        cmocka_unit_test(test_validators),
        cmocka_unit_test(test_forged),
    };
    return cmocka_run_group_tests_name("opcodec", tests, NULL, NULL);
}
