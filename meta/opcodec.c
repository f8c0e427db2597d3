/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The op codec (meta/opcodec.h): a writer that appends fields to an mg_buf and
 * a reader with a sticky error flag, so the field lists read as straight-line
 * code and are checked once at the end. The field order is the format: the
 * writer and reader functions of each struct sit side by side and list the
 * same fields in the same order.
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/opcodec.h"

#define TAG_IN 'I'
#define TAG_OUT 'O'
#define CRC_LEN 4

/* crc32c (ISA-L, common/cksum.c) of (p, n): the trailer of every value. TCP's 16-bit sum
 * lets rare corruptions through; an op carries blob references that must arrive exactly. */
static void crc_of(const void *p, size_t n, uint8_t out[CRC_LEN])
{
    struct mg_cksum c;
    uint8_t d[32];
    mg_cksum_init(&c, MG_CKSUM_CRC32C);
    mg_cksum_update(&c, p, n);
    size_t dl = mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    assert(dl == CRC_LEN);
    memcpy(out, d, CRC_LEN);
}

/* Append the trailer over out's bytes from start on. */
static void w_end(struct mg_buf *b, size_t start)
{
    uint8_t c[CRC_LEN];
    crc_of(b->base + start, b->len - start, c);
    mg_buf_append(b, c, CRC_LEN);
}

/* The value without its trailer, or -1 when the trailer does not match. */
static int r_unwrap(const void *buf, size_t *len)
{
    uint8_t c[CRC_LEN];
    if (*len < CRC_LEN)
        return -1;
    *len -= CRC_LEN;
    crc_of(buf, *len, c);
    return memcmp(c, (const uint8_t *)buf + *len, CRC_LEN) == 0 ? 0 : -1;
}

/* ----------------------------------------------------------------- writer */

static void w_u8(struct mg_buf *b, unsigned v)
{
    assert(v <= 0xff);
    uint8_t c = (uint8_t)v;
    mg_buf_append(b, &c, 1);
}

static void w_u32(struct mg_buf *b, uint32_t v)
{
    uint8_t c[4];
    for (int i = 0; i < 4; i++)
        c[i] = (uint8_t)(v >> (8 * i));
    mg_buf_append(b, c, 4);
}

static void w_u64(struct mg_buf *b, uint64_t v)
{
    uint8_t c[8];
    for (int i = 0; i < 8; i++)
        c[i] = (uint8_t)(v >> (8 * i));
    mg_buf_append(b, c, 8);
}

static void w_var(struct mg_buf *b, uint64_t v)
{
    uint8_t c[10];
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
        c[n++] = (uint8_t)(v | 0x80);
    c[n++] = (uint8_t)v;
    mg_buf_append(b, c, n);
}

static void w_str(struct mg_buf *b, struct mg_str s)
{
    w_var(b, s.len);
    mg_buf_append(b, s.base, s.len);
}

static void w_kvs(struct mg_buf *b, const struct meta_kv *kv, size_t n)
{
    assert(kv != NULL || n == 0);
    w_var(b, n);
    for (size_t i = 0; i < n; i++) {
        w_str(b, kv[i].k);
        w_str(b, kv[i].v);
    }
}

static void w_data(struct mg_buf *b, const struct meta_data *d)
{
    assert(d->extents != NULL || d->nextents == 0);
    w_u64(b, d->size);
    w_str(b, d->inline_data);
    w_var(b, d->nextents);
    for (size_t i = 0; i < d->nextents; i++) {
        const struct eng_blob_ref *r = &d->extents[i].ref;
        w_u64(b, r->segment);
        w_u64(b, r->offset);
        w_u64(b, r->length);
        w_u32(b, r->crc32c);
        w_u32(b, r->flags);
    }
}

static void w_object(struct mg_buf *b, const struct meta_object *o)
{
    assert(o->parts != NULL || o->nparts == 0);
    w_str(b, o->key);
    w_u64(b, o->size);
    w_u64(b, (uint64_t)o->mtime_ms);
    w_str(b, o->etag);
    w_str(b, o->content_type);
    w_str(b, o->content_encoding);
    w_str(b, o->cache_control);
    w_str(b, o->content_disposition);
    w_str(b, o->content_language);
    w_str(b, o->expires);
    w_kvs(b, o->user_meta, o->nuser_meta);
    w_kvs(b, o->tags, o->ntags);
    w_u8(b, (unsigned)o->acl);
    w_str(b, o->owner);
    w_u8(b, (unsigned)o->cksum_algo);
    w_str(b, o->cksum_value);
    w_var(b, o->nparts);
    for (size_t i = 0; i < o->nparts; i++) {
        w_u32(b, o->parts[i].number);
        w_u64(b, o->parts[i].size);
        w_str(b, o->parts[i].checksum);
    }
    w_data(b, &o->data);
    w_u64(b, (uint64_t)o->lc_due_ms);
    w_u64(b, o->lc_gen);
    w_str(b, o->upload_id);
}

static void w_bucket(struct mg_buf *b, const struct meta_bucket *v)
{
    w_str(b, v->name);
    w_u64(b, v->id);
    w_str(b, v->owner);
    w_u64(b, (uint64_t)v->created_ms);
    w_u8(b, (unsigned)v->acl);
    w_kvs(b, v->tags, v->ntags);
    w_str(b, v->lifecycle);
    w_str(b, v->lifecycle_bin);
    w_u64(b, v->lc_gen);
}

static void w_part(struct mg_buf *b, const struct meta_part *p)
{
    w_u32(b, p->number);
    w_u64(b, p->size);
    w_u64(b, (uint64_t)p->mtime_ms);
    w_str(b, p->etag);
    w_str(b, p->checksum);
    w_data(b, &p->data);
}

static void w_begin(struct mg_buf *b, int tag, enum meta_op_type type)
{
    assert(type < META_OP__COUNT);
    w_u8(b, META_OPCODEC_VERSION);
    w_u8(b, (unsigned)tag);
    w_u8(b, (unsigned)type);
}

void meta__opcodec_encode_in(const struct meta_op *op, struct mg_buf *b)
{
    const __typeof__(op->in) *in = &op->in;
    assert(in->keys != NULL || in->nkeys == 0);
    assert(in->parts != NULL || in->nparts == 0);
    size_t start = b->len;
    w_begin(b, TAG_IN, op->type);
    w_u64(b, in->request_id);
    w_u64(b, in->bucket_id);
    w_str(b, in->bucket);
    w_str(b, in->key);
    w_str(b, in->owner);
    w_u8(b, (unsigned)in->acl);
    w_var(b, in->mask);
    w_bucket(b, &in->bucket_values);
    w_object(b, &in->object);
    w_u8(b, in->has_cond != 0);
    w_u8(b, in->cond.if_none_match_any != 0);
    w_str(b, in->cond.if_match);
    w_var(b, in->nkeys);
    for (size_t i = 0; i < in->nkeys; i++)
        w_str(b, in->keys[i]);
    w_str(b, in->upload_id);
    w_part(b, &in->part);
    w_var(b, in->nparts);
    for (size_t i = 0; i < in->nparts; i++)
        w_part(b, &in->parts[i]);
    /* LC_REINDEX uses nexpire as a count without items */
    w_var(b, in->nexpire);
    int items = in->expire != NULL && in->nexpire > 0;
    w_u8(b, (unsigned)items);
    for (size_t i = 0; items && i < in->nexpire; i++) {
        w_str(b, in->expire[i].key);
        w_u64(b, (uint64_t)in->expire[i].due_ms);
        w_u64(b, (uint64_t)in->expire[i].mtime_ms);
    }
    w_u64(b, (uint64_t)in->now_ms);
    w_u64(b, in->lc_epoch);
    w_end(b, start);
}

void meta__opcodec_encode_out(const struct meta_op *op, int status, struct mg_buf *b)
{
    const __typeof__(op->out) *out = &op->out;
    assert(status >= 0 && status < MG_ERR__COUNT);
    size_t start = b->len;
    w_begin(b, TAG_OUT, op->type);
    w_u32(b, (uint32_t)status);
    w_u8(b, out->existed != 0);
    /* DELETE_MANY always answers nkeys flags (none set when the op never ran its body: a
     * dedup hit); other types only when they have them. */
    int many = out->existed_many != NULL || op->type == META_OP_OBJECT_DELETE_MANY;
    size_t n = many ? op->in.nkeys : 0;
    w_var(b, n);
    for (size_t i = 0; i < n; i++)
        w_u8(b, out->existed_many != NULL && out->existed_many[i] != 0);
    w_str(b, out->upload_id);
    w_object(b, &out->object);
    const struct meta_expire_result *e = &out->expire;
    w_u32(b, e->expired);
    w_u32(b, e->stale);
    w_u32(b, e->rescheduled);
    w_u32(b, e->range_deletes);
    w_u32(b, e->point_deletes);
    w_u32(b, e->reindexed);
    w_u8(b, e->reindex_done != 0);
    w_u8(b, e->reindex_busy != 0);
    w_end(b, start);
}

/* ----------------------------------------------------------------- reader */

struct rd {
    const uint8_t *p, *end;
    struct mg_arena *a; /* arrays */
    int bad;            /* sticky: some field was malformed */
};

static size_t r_left(const struct rd *r)
{
    return (size_t)(r->end - r->p);
}

static int r_take(struct rd *r, size_t n, const uint8_t **at)
{
    if (r->bad || r_left(r) < n) {
        r->bad = 1;
        return -1;
    }
    *at = r->p;
    r->p += n;
    return 0;
}

static uint8_t r_u8(struct rd *r)
{
    const uint8_t *c;
    return r_take(r, 1, &c) == 0 ? c[0] : 0;
}

static uint32_t r_u32(struct rd *r)
{
    const uint8_t *c;
    if (r_take(r, 4, &c) != 0)
        return 0;
    return (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
}

static uint64_t r_u64(struct rd *r)
{
    uint64_t lo = r_u32(r);
    return lo | (uint64_t)r_u32(r) << 32;
}

static int64_t r_i64(struct rd *r)
{
    uint64_t u = r_u64(r);
    int64_t v;
    memcpy(&v, &u, sizeof(v)); /* two's complement, without an out-of-range conversion */
    return v;
}

/* A varint in its shortest form (so that a decoded value re-encodes to the same bytes). */
static uint64_t r_var(struct rd *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        uint8_t c = r_u8(r);
        if (r->bad)
            return 0;
        if (shift == 63 && c > 1)
            break; /* past 64 bits */
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            if (c == 0 && shift > 0)
                break; /* overlong */
            return v;
        }
    }
    r->bad = 1;
    return 0;
}

static int r_flag(struct rd *r)
{
    uint8_t c = r_u8(r);
    if (c > 1)
        r->bad = 1;
    return c;
}

static unsigned r_enum(struct rd *r, unsigned max)
{
    uint8_t c = r_u8(r);
    if (c > max)
        r->bad = 1;
    return r->bad ? 0 : c;
}

static struct mg_str r_str(struct rd *r)
{
    uint64_t n = r_var(r);
    const uint8_t *c;
    if (n > r_left(r) || r_take(r, (size_t)n, &c) != 0) {
        r->bad = 1;
        return (struct mg_str){"", 0};
    }
    return (struct mg_str){n > 0 ? (const char *)c : "", (size_t)n};
}

/* A count of items of at least min_bytes each, at most max: bounded by the bytes left, so
 * a forged count never allocates more than a small multiple of the input. */
static size_t r_count(struct rd *r, size_t max, size_t min_bytes)
{
    uint64_t n = r_var(r);
    if (r->bad || n > max || n > r_left(r) / min_bytes) {
        r->bad = 1;
        return 0;
    }
    return (size_t)n;
}

static void *r_array(struct rd *r, size_t n, size_t size)
{
    return n > 0 ? mg_arena_alloc(r->a, n * size) : NULL;
}

static void r_kvs(struct rd *r, struct meta_kv **out, size_t *n)
{
    *n = r_count(r, META_OPCODEC_KV_MAX, 2);
    *out = r_array(r, *n, sizeof(**out));
    for (size_t i = 0; i < *n && !r->bad; i++) {
        (*out)[i].k = r_str(r);
        (*out)[i].v = r_str(r);
    }
}

static void r_data(struct rd *r, struct meta_data *d)
{
    d->size = r_u64(r);
    d->inline_data = r_str(r);
    d->nextents = r_count(r, META_OPCODEC_ARRAY_MAX, 32);
    d->extents = r_array(r, d->nextents, sizeof(*d->extents));
    for (size_t i = 0; i < d->nextents && !r->bad; i++) {
        struct eng_blob_ref *e = &d->extents[i].ref;
        e->segment = r_u64(r);
        e->offset = r_u64(r);
        e->length = r_u64(r);
        e->crc32c = r_u32(r);
        e->flags = r_u32(r);
    }
}

static void r_object(struct rd *r, struct meta_object *o)
{
    o->key = r_str(r);
    o->size = r_u64(r);
    o->mtime_ms = r_i64(r);
    o->etag = r_str(r);
    o->content_type = r_str(r);
    o->content_encoding = r_str(r);
    o->cache_control = r_str(r);
    o->content_disposition = r_str(r);
    o->content_language = r_str(r);
    o->expires = r_str(r);
    r_kvs(r, &o->user_meta, &o->nuser_meta);
    r_kvs(r, &o->tags, &o->ntags);
    o->acl = (enum meta_acl)r_enum(r, META_ACL_AUTHENTICATED_READ);
    o->owner = r_str(r);
    o->cksum_algo = (enum mg_cksum_algo)r_enum(r, MG_CKSUM_MD5);
    o->cksum_value = r_str(r);
    o->nparts = r_count(r, META_PART_MAX, 13);
    o->parts = r_array(r, o->nparts, sizeof(*o->parts));
    for (size_t i = 0; i < o->nparts && !r->bad; i++) {
        o->parts[i].number = r_u32(r);
        o->parts[i].size = r_u64(r);
        o->parts[i].checksum = r_str(r);
    }
    r_data(r, &o->data);
    o->lc_due_ms = r_i64(r);
    o->lc_gen = r_u64(r);
    o->upload_id = r_str(r);
}

static void r_bucket(struct rd *r, struct meta_bucket *v)
{
    v->name = r_str(r);
    v->id = r_u64(r);
    v->owner = r_str(r);
    v->created_ms = r_i64(r);
    v->acl = (enum meta_acl)r_enum(r, META_ACL_AUTHENTICATED_READ);
    r_kvs(r, &v->tags, &v->ntags);
    v->lifecycle = r_str(r);
    v->lifecycle_bin = r_str(r);
    v->lc_gen = r_u64(r);
}

static void r_part(struct rd *r, struct meta_part *p)
{
    p->number = r_u32(r);
    p->size = r_u64(r);
    p->mtime_ms = r_i64(r);
    p->etag = r_str(r);
    p->checksum = r_str(r);
    r_data(r, &p->data);
}

/* The header; returns the op type or -1. */
static int r_begin(struct rd *r, int tag)
{
    uint8_t v = r_u8(r), t = r_u8(r), type = r_u8(r);
    if (r->bad || v != META_OPCODEC_VERSION || t != tag || type >= META_OP__COUNT)
        return -1;
    return type;
}

#define PART_MIN_BYTES (4 + 8 + 8 + 1 + 1 + 8 + 1 + 1) /* a meta_part with empty fields */

static void r_in(struct rd *r, struct meta_op *op)
{
    __typeof__(op->in) *in = &op->in;
    in->request_id = r_u64(r);
    in->bucket_id = r_u64(r);
    in->bucket = r_str(r);
    in->key = r_str(r);
    in->owner = r_str(r);
    in->acl = (enum meta_acl)r_enum(r, META_ACL_AUTHENTICATED_READ);
    uint64_t mask = r_var(r);
    if (mask > 0xffffffffu)
        r->bad = 1;
    in->mask = (unsigned)mask;
    r_bucket(r, &in->bucket_values);
    r_object(r, &in->object);
    in->has_cond = r_flag(r);
    in->cond.if_none_match_any = r_flag(r);
    in->cond.if_match = r_str(r);
    in->nkeys = r_count(r, META_OPCODEC_ARRAY_MAX, 1);
    struct mg_str *keys = r_array(r, in->nkeys, sizeof(*keys));
    for (size_t i = 0; i < in->nkeys && !r->bad; i++)
        keys[i] = r_str(r);
    in->keys = keys;
    in->upload_id = r_str(r);
    r_part(r, &in->part);
    in->nparts = r_count(r, META_PART_MAX, PART_MIN_BYTES);
    struct meta_part *parts = r_array(r, in->nparts, sizeof(*parts));
    for (size_t i = 0; i < in->nparts && !r->bad; i++)
        r_part(r, &parts[i]);
    in->parts = parts;
    uint64_t nexpire = r_var(r);
    int items = r_flag(r);
    if (nexpire > SIZE_MAX || (items && nexpire == 0))
        r->bad = 1;
    in->nexpire = (size_t)nexpire;
    if (items && !r->bad) {
        if (nexpire > META_OPCODEC_ARRAY_MAX || nexpire > r_left(r) / 17)
            r->bad = 1;
        struct meta_expire_item *e = r->bad ? NULL : r_array(r, in->nexpire, sizeof(*e));
        for (size_t i = 0; !r->bad && i < in->nexpire; i++) {
            e[i].key = r_str(r);
            e[i].due_ms = r_i64(r);
            e[i].mtime_ms = r_i64(r);
        }
        in->expire = e;
    }
    in->now_ms = r_i64(r);
    in->lc_epoch = r_u64(r);
}

int meta__opcodec_decode_in(const void *buf, size_t len, struct meta_op **out)
{
    if (r_unwrap(buf, &len) != 0)
        return MG_ECORRUPT;
    struct rd r = {.p = buf, .end = (const uint8_t *)buf + len};
    int type = r_begin(&r, TAG_IN);
    if (type < 0)
        return MG_ECORRUPT;
    struct meta_op *op = meta_op_create((enum meta_op_type)type);
    r.a = &op->priv->arena;
    r_in(&r, op);
    if (r.bad || r.p != r.end) {
        meta_op_destroy(op);
        return MG_ECORRUPT;
    }
    *out = op;
    return 0;
}

int meta__opcodec_decode_out(const void *buf, size_t len, struct meta_op *op, int *status)
{
    if (r_unwrap(buf, &len) != 0)
        return MG_ECORRUPT;
    struct mg_arena *a = &op->priv->arena;
    struct rd r = {.p = buf, .end = (const uint8_t *)buf + len, .a = a};
    if (r_begin(&r, TAG_OUT) != (int)op->type)
        return MG_ECORRUPT;
    uint32_t st = r_u32(&r);
    __typeof__(op->out) o;
    memset(&o, 0, sizeof(o));
    o.existed = r_flag(&r);
    size_t n = r_count(&r, META_OPCODEC_ARRAY_MAX, 1);
    int many = op->type == META_OP_OBJECT_DELETE_MANY;
    if (n != op->in.nkeys && (many || n != 0))
        r.bad = 1;
    if (!r.bad && (n > 0 || many)) {
        o.existed_many = mg_arena_alloc(a, (op->in.nkeys + 1) * sizeof(int));
        memset(o.existed_many, 0, (op->in.nkeys + 1) * sizeof(int));
    }
    for (size_t i = 0; i < n && !r.bad; i++)
        o.existed_many[i] = r_flag(&r);
    o.upload_id = r_str(&r);
    r_object(&r, &o.object);
    o.expire.expired = r_u32(&r);
    o.expire.stale = r_u32(&r);
    o.expire.rescheduled = r_u32(&r);
    o.expire.range_deletes = r_u32(&r);
    o.expire.point_deletes = r_u32(&r);
    o.expire.reindexed = r_u32(&r);
    o.expire.reindex_done = r_flag(&r);
    o.expire.reindex_busy = r_flag(&r);
    if (r.bad || r.p != r.end || st >= MG_ERR__COUNT)
        return MG_ECORRUPT;
    /* Results live until meta_op_destroy: copy what points into buf. */
    o.upload_id = o.upload_id.len > 0
                      ? (struct mg_str){mg_arena_dup(a, o.upload_id.base, o.upload_id.len),
                                        o.upload_id.len}
                      : (struct mg_str){"", 0};
    meta__object_dup(a, &o.object);
    op->out = o;
    *status = (int)st;
    return 0;
}
