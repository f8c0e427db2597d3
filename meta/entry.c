/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Binary entry codec: object entries, upload templates, parts, bucket records
 * and counter rows. A value is kind (1 byte), version (1 byte), then TLV
 * items: tag (1 byte), length (LEB128, at most 5 bytes, < 2^32), value.
 * Integers are fixed-width big-endian. Unknown tags are skipped so a newer
 * writer's rows stay readable; everything read from disk is validated
 * (lengths, enum ranges, size == sum of extents) and a bad value is
 * MG_ECORRUPT — never an assertion (STYLE.md 3, 7a). Decoded strings point
 * into one arena copy of the value.
 */
#include <assert.h>
#include <stddef.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/internal.h"

enum {
    T_SIZE = 1,  /* u64 */
    T_MTIME = 2, /* u64 (ms) */
    T_ETAG = 3,
    T_CTYPE = 4,
    T_CENC = 5,
    T_CACHE = 6,
    T_CDISP = 7,
    T_CLANG = 8,
    T_EXPIRES = 9,
    T_UMETA = 10, /* kv: LEB128 klen, k, v */
    T_TAG = 11,   /* kv */
    T_ACL = 12,   /* u32 */
    T_OWNER = 13,
    T_CKALGO = 14, /* u32 */
    T_CKVAL = 15,
    T_PARTINFO = 16, /* u32 number, u64 size, checksum */
    T_INLINE = 17,   /* the bytes */
    T_EXTENT = 18,   /* u64 segment, u64 offset, u64 length, u32 crc32c, u32 flags */
    T_PARTNUM = 19,  /* u32 (parts) */
    T_LC_DUE = 20,   /* u64 (ms): the entry's lifecycle due row; absent: none (issue 8) */
    T_LC_GEN = 21,   /* u64: the rules generation T_LC_DUE came from */
    T_UPLOAD_ID = 22, /* the upload a multipart object completed (issue 7: retried Complete) */
};
enum {
    TB_ID = 1,
    TB_OWNER = 2,
    TB_CREATED = 3,
    TB_ACL = 4,
    TB_TAG = 5,
    TB_LIFECYCLE = 6,
    TB_LC_BIN = 7, /* the compiled rules (lifecycle/lifecycle.h); absent in older records */
    TB_LC_GEN = 8, /* u64 rules generation; absent: 0 */
};
enum { TC_OBJECTS = 1, TC_BYTES = 2 };

/* The string fields of an object entry, by tag. */
static const struct {
    unsigned tag;
    size_t offset;
} str_fields[] = {
    {T_ETAG, offsetof(struct meta_object, etag)},
    {T_CTYPE, offsetof(struct meta_object, content_type)},
    {T_CENC, offsetof(struct meta_object, content_encoding)},
    {T_CACHE, offsetof(struct meta_object, cache_control)},
    {T_CDISP, offsetof(struct meta_object, content_disposition)},
    {T_CLANG, offsetof(struct meta_object, content_language)},
    {T_EXPIRES, offsetof(struct meta_object, expires)},
    {T_OWNER, offsetof(struct meta_object, owner)},
    {T_CKVAL, offsetof(struct meta_object, cksum_value)},
    {T_UPLOAD_ID, offsetof(struct meta_object, upload_id)},
};

#define EXTENT_BYTES 32
#define TLV_LEN_MAX 0xFFFFFFFFu

/* ---------------------------------------------------------------- writer */

static void put_leb(struct mg_buf *o, uint64_t n)
{
    uint8_t b[10];
    size_t i = 0;
    do {
        b[i] = (uint8_t)(n & 0x7F);
        n >>= 7;
        if (n)
            b[i] |= 0x80;
        i++;
    } while (n);
    mg_buf_append(o, b, i);
}

static void w_hdr(struct mg_buf *o, unsigned tag, size_t n)
{
    assert(tag < 256 && n <= TLV_LEN_MAX);
    uint8_t t = (uint8_t)tag;
    mg_buf_append(o, &t, 1);
    put_leb(o, n);
}

static void w_bytes(struct mg_buf *o, unsigned tag, const void *v, size_t n)
{
    w_hdr(o, tag, n);
    mg_buf_append(o, v, n);
}

static void w_str(struct mg_buf *o, unsigned tag, struct mg_str s)
{
    if (s.len > 0)
        w_bytes(o, tag, s.base, s.len);
}

static void w_u64(struct mg_buf *o, unsigned tag, uint64_t v)
{
    w_hdr(o, tag, 8);
    meta__put_u64(o, v);
}

static void w_u32(struct mg_buf *o, unsigned tag, uint32_t v)
{
    w_hdr(o, tag, 4);
    meta__put_u32(o, v);
}

static void w_kvs(struct mg_buf *o, unsigned tag, const struct meta_kv *kv, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct mg_buf tmp;
        mg_buf_init(&tmp);
        put_leb(&tmp, kv[i].k.len);
        mg_buf_append(&tmp, kv[i].k.base, kv[i].k.len);
        mg_buf_append(&tmp, kv[i].v.base, kv[i].v.len);
        w_bytes(o, tag, tmp.base, tmp.len);
        mg_buf_close(&tmp);
    }
}

static void w_begin(struct mg_buf *o, enum meta_rec_kind kind)
{
    uint8_t h[2] = {(uint8_t)kind, META_REC_VERSION};
    mg_buf_append(o, h, 2);
}

static void w_data(struct mg_buf *o, const struct meta_data *d)
{
    w_u64(o, T_SIZE, d->size);
    if (d->nextents == 0) {
        assert(d->inline_data.len == d->size);
        w_str(o, T_INLINE, d->inline_data);
        return;
    }
    for (size_t i = 0; i < d->nextents; i++) {
        const struct eng_blob_ref *r = &d->extents[i].ref;
        w_hdr(o, T_EXTENT, EXTENT_BYTES);
        meta__put_u64(o, r->segment);
        meta__put_u64(o, r->offset);
        meta__put_u64(o, r->length);
        meta__put_u32(o, r->crc32c);
        meta__put_u32(o, r->flags);
    }
}

void meta__object_encode(const struct meta_object *o, enum meta_rec_kind kind, struct mg_buf *out)
{
    assert(kind == META_REC_OBJECT || kind == META_REC_UPLOAD);
    w_begin(out, kind);
    w_data(out, &o->data);
    w_u64(out, T_MTIME, (uint64_t)o->mtime_ms);
    for (size_t i = 0; i < sizeof(str_fields) / sizeof(str_fields[0]); i++)
        w_str(out, str_fields[i].tag,
              *(const struct mg_str *)((const char *)o + str_fields[i].offset));
    w_kvs(out, T_UMETA, o->user_meta, o->nuser_meta);
    w_kvs(out, T_TAG, o->tags, o->ntags);
    w_u32(out, T_ACL, (uint32_t)o->acl);
    w_u32(out, T_CKALGO, (uint32_t)o->cksum_algo);
    for (size_t i = 0; i < o->nparts; i++) {
        const struct meta_part_info *p = &o->parts[i];
        w_hdr(out, T_PARTINFO, 12 + p->checksum.len);
        meta__put_u32(out, p->number);
        meta__put_u64(out, p->size);
        mg_buf_append(out, p->checksum.base, p->checksum.len);
    }
    /* Objects no rule matches cost nothing; upload templates never carry a due time (a
     * caller's stray value in the template it passed is not stored). */
    if (kind == META_REC_OBJECT && o->lc_due_ms > 0) {
        w_u64(out, T_LC_DUE, (uint64_t)o->lc_due_ms);
        w_u64(out, T_LC_GEN, o->lc_gen);
    }
}

void meta__part_encode(const struct meta_part *p, struct mg_buf *out)
{
    w_begin(out, META_REC_PART);
    w_u32(out, T_PARTNUM, p->number);
    w_data(out, &p->data);
    w_u64(out, T_MTIME, (uint64_t)p->mtime_ms);
    w_str(out, T_ETAG, p->etag);
    w_str(out, T_CKVAL, p->checksum);
}

void meta__bucket_encode(const struct meta_bucket *b, struct mg_buf *out)
{
    w_begin(out, META_REC_BUCKET);
    w_u64(out, TB_ID, b->id);
    w_str(out, TB_OWNER, b->owner);
    w_u64(out, TB_CREATED, (uint64_t)b->created_ms);
    w_u32(out, TB_ACL, (uint32_t)b->acl);
    w_kvs(out, TB_TAG, b->tags, b->ntags);
    w_str(out, TB_LIFECYCLE, b->lifecycle);
    w_str(out, TB_LC_BIN, b->lifecycle_bin);
    if (b->lc_gen != 0)
        w_u64(out, TB_LC_GEN, b->lc_gen);
}

void meta__counters_encode(uint64_t objects, uint64_t bytes, struct mg_buf *out)
{
    w_begin(out, META_REC_COUNTERS);
    w_u64(out, TC_OBJECTS, objects);
    w_u64(out, TC_BYTES, bytes);
}

/* ---------------------------------------------------------------- reader */

struct tlv {
    const uint8_t *p;
    const uint8_t *end;
};

/* LEB128 of at most 5 bytes, value < 2^32. Returns 0 or -1. */
static int get_leb(struct tlv *t, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        if (t->p == t->end || shift > 28)
            return -1;
        uint8_t b = *t->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
    }
    if (v > TLV_LEN_MAX)
        return -1;
    *out = v;
    return 0;
}

/* 1: an item; 0: end; -1: malformed. */
static int tlv_next(struct tlv *t, unsigned *tag, const uint8_t **v, size_t *n)
{
    if (t->p == t->end)
        return 0;
    *tag = *t->p++;
    uint64_t len = 0;
    if (get_leb(t, &len) != 0 || len > (size_t)(t->end - t->p))
        return -1;
    *v = t->p;
    *n = (size_t)len;
    t->p += len;
    return 1;
}

/* Copy the value into the arena and position t after the header. */
static int tlv_open(struct tlv *t, const void *v, size_t len, enum meta_rec_kind kind,
                    struct mg_arena *a)
{
    if (len < 2)
        return MG_ECORRUPT;
    const uint8_t *c = (const uint8_t *)mg_arena_dup(a, v, len);
    if (c[0] != kind || c[1] == 0 || c[1] > META_REC_VERSION)
        return MG_ECORRUPT;
    t->p = c + 2;
    t->end = c + len;
    return 0;
}

static struct mg_str s_of(const uint8_t *v, size_t n)
{
    return (struct mg_str){(const char *)v, n};
}

static int r_kv(const uint8_t *v, size_t n, struct meta_kv *kv)
{
    struct tlv t = {v, v + n};
    uint64_t klen = 0;
    if (get_leb(&t, &klen) != 0 || klen > (size_t)(t.end - t.p))
        return MG_ECORRUPT;
    kv->k = s_of(t.p, (size_t)klen);
    kv->v = s_of(t.p + klen, (size_t)(t.end - t.p - klen));
    return 0;
}

/* Counts of repeated items, from a first pass that also validates the framing. */
struct counts {
    size_t umeta, tags, parts, extents;
};

static int count_items(struct tlv t, int bucket, struct counts *c)
{
    unsigned tag;
    const uint8_t *v;
    size_t n;
    int r;
    memset(c, 0, sizeof(*c));
    while ((r = tlv_next(&t, &tag, &v, &n)) == 1) {
        if (bucket) {
            c->tags += tag == TB_TAG;
            continue;
        }
        c->umeta += tag == T_UMETA;
        c->tags += tag == T_TAG;
        c->parts += tag == T_PARTINFO;
        c->extents += tag == T_EXTENT;
    }
    if (r < 0 || c->parts > META_PART_MAX || c->extents > META_PART_MAX)
        return MG_ECORRUPT;
    return 0;
}

static int r_fixed(size_t n, size_t want)
{
    return n == want ? 0 : MG_ECORRUPT;
}

/* Fields shared by objects, uploads and parts. Sets *data_size / *inline. */
struct obj_scan {
    struct meta_object *o;
    uint32_t partnum;
    int have_size;
    int have_inline;
};

static int r_object_item(struct obj_scan *s, unsigned tag, const uint8_t *v, size_t n)
{
    struct meta_object *o = s->o;
    for (size_t i = 0; i < sizeof(str_fields) / sizeof(str_fields[0]); i++) {
        if (str_fields[i].tag == tag) {
            *(struct mg_str *)((char *)o + str_fields[i].offset) = s_of(v, n);
            return 0;
        }
    }
    switch (tag) {
    case T_SIZE:
        s->have_size = 1;
        o->size = o->data.size = n == 8 ? meta__get_u64(v) : 0;
        return r_fixed(n, 8);
    case T_MTIME:
        o->mtime_ms = n == 8 ? (int64_t)meta__get_u64(v) : 0;
        return r_fixed(n, 8);
    case T_UMETA:
        return r_kv(v, n, &o->user_meta[o->nuser_meta++]);
    case T_TAG:
        return r_kv(v, n, &o->tags[o->ntags++]);
    case T_ACL:
        if (n != 4 || meta__get_u32(v) > META_ACL_AUTHENTICATED_READ)
            return MG_ECORRUPT;
        o->acl = (enum meta_acl)meta__get_u32(v);
        return 0;
    case T_CKALGO:
        if (n != 4 || meta__get_u32(v) > MG_CKSUM_MD5)
            return MG_ECORRUPT;
        o->cksum_algo = (enum mg_cksum_algo)meta__get_u32(v);
        return 0;
    case T_PARTNUM:
        s->partnum = n == 4 ? meta__get_u32(v) : 0;
        return r_fixed(n, 4);
    case T_LC_DUE:
        o->lc_due_ms = n == 8 ? (int64_t)meta__get_u64(v) : 0;
        return n == 8 && o->lc_due_ms > 0 ? 0 : MG_ECORRUPT;
    case T_LC_GEN:
        o->lc_gen = n == 8 ? meta__get_u64(v) : 0;
        return r_fixed(n, 8);
    case T_INLINE:
        s->have_inline = 1;
        o->data.inline_data = s_of(v, n);
        return 0;
    case T_PARTINFO: {
        if (n < 12)
            return MG_ECORRUPT;
        struct meta_part_info *p = &o->parts[o->nparts++];
        p->number = meta__get_u32(v);
        p->size = meta__get_u64(v + 4);
        p->checksum = s_of(v + 12, n - 12);
        return 0;
    }
    case T_EXTENT: {
        if (n != EXTENT_BYTES)
            return MG_ECORRUPT;
        struct eng_blob_ref *r = &o->data.extents[o->data.nextents++].ref;
        r->segment = meta__get_u64(v);
        r->offset = meta__get_u64(v + 8);
        r->length = meta__get_u64(v + 16);
        r->crc32c = meta__get_u32(v + 24);
        r->flags = meta__get_u32(v + 28);
        return 0;
    }
    default:
        return 0; /* unknown: a newer writer's field */
    }
}

/* size == the bytes it claims: the inline bytes, or the sum of the extents. */
static int check_data(const struct obj_scan *s)
{
    const struct meta_data *d = &s->o->data;
    if (!s->have_size)
        return MG_ECORRUPT;
    if (d->nextents == 0)
        return d->inline_data.len == d->size ? 0 : MG_ECORRUPT;
    if (s->have_inline)
        return MG_ECORRUPT;
    uint64_t sum = 0;
    for (size_t i = 0; i < d->nextents; i++) {
        if (d->extents[i].ref.length > UINT64_MAX - sum)
            return MG_ECORRUPT;
        sum += d->extents[i].ref.length;
    }
    return sum == d->size ? 0 : MG_ECORRUPT;
}

static int decode_object(const void *v, size_t len, enum meta_rec_kind kind, struct mg_arena *a,
                         struct meta_object *o, uint32_t *partnum)
{
    struct tlv t;
    struct counts c;
    memset(o, 0, sizeof(*o));
    int rv = tlv_open(&t, v, len, kind, a);
    if (rv == 0)
        rv = count_items(t, 0, &c);
    if (rv != 0)
        return rv;
    o->user_meta = mg_arena_alloc(a, c.umeta * sizeof(*o->user_meta));
    o->tags = mg_arena_alloc(a, c.tags * sizeof(*o->tags));
    o->parts = mg_arena_alloc(a, c.parts * sizeof(*o->parts));
    o->data.extents = mg_arena_alloc(a, c.extents * sizeof(*o->data.extents));
    struct obj_scan s = {.o = o};
    unsigned tag;
    const uint8_t *iv;
    size_t n;
    while (tlv_next(&t, &tag, &iv, &n) == 1) {
        if ((rv = r_object_item(&s, tag, iv, n)) != 0)
            return rv;
    }
    if ((rv = check_data(&s)) != 0)
        return rv;
    *partnum = s.partnum;
    return 0;
}

int meta__object_decode(const void *v, size_t len, enum meta_rec_kind kind, struct mg_arena *a,
                        struct meta_object *o)
{
    uint32_t partnum;
    if (kind != META_REC_OBJECT && kind != META_REC_UPLOAD)
        return MG_ECORRUPT;
    return decode_object(v, len, kind, a, o, &partnum);
}

/* LIST needs a few fields of each entry: read them in place (no copy of the value, no
 * arrays), validating the framing and the fixed-width fields it reads. */
int meta__object_decode_summary(const void *v, size_t len, struct mg_arena *a,
                                struct meta_object *o)
{
    const uint8_t *c = v;
    memset(o, 0, sizeof(*o));
    if (len < 2 || c[0] != META_REC_OBJECT || c[1] == 0 || c[1] > META_REC_VERSION)
        return MG_ECORRUPT;
    struct tlv t = {c + 2, c + len};
    unsigned tag;
    const uint8_t *iv;
    size_t n;
    int r, have_size = 0;
    while ((r = tlv_next(&t, &tag, &iv, &n)) == 1) {
        if ((tag == T_SIZE || tag == T_MTIME || tag == T_LC_DUE) && n != 8)
            return MG_ECORRUPT;
        if (tag == T_CKALGO && (n != 4 || meta__get_u32(iv) > MG_CKSUM_MD5))
            return MG_ECORRUPT;
        if (tag == T_SIZE) {
            have_size = 1;
            o->size = o->data.size = meta__get_u64(iv);
        } else if (tag == T_MTIME) {
            o->mtime_ms = (int64_t)meta__get_u64(iv);
        } else if (tag == T_LC_DUE) { /* the lifecycle re-index's (meta/expire.c) */
            o->lc_due_ms = (int64_t)meta__get_u64(iv);
            if (o->lc_due_ms <= 0)
                return MG_ECORRUPT;
        } else if (tag == T_ETAG) {
            o->etag = (struct mg_str){mg_arena_dup(a, iv, n), n};
        } else if (tag == T_OWNER) {
            o->owner = (struct mg_str){mg_arena_dup(a, iv, n), n};
        } else if (tag == T_CKALGO) {
            o->cksum_algo = (enum mg_cksum_algo)meta__get_u32(iv);
        }
    }
    return r < 0 || !have_size ? MG_ECORRUPT : 0;
}

int meta__part_decode(const void *v, size_t len, struct mg_arena *a, struct meta_part *p)
{
    struct meta_object o;
    uint32_t num = 0;
    int rv = decode_object(v, len, META_REC_PART, a, &o, &num);
    if (rv != 0)
        return rv;
    if (num < 1 || num > META_PART_MAX)
        return MG_ECORRUPT;
    memset(p, 0, sizeof(*p));
    p->number = num;
    p->size = o.size;
    p->mtime_ms = o.mtime_ms;
    p->etag = o.etag;
    p->checksum = o.cksum_value;
    p->data = o.data;
    return 0;
}

static int r_bucket_item(struct meta_bucket *b, unsigned tag, const uint8_t *v, size_t n,
                         int *have_id)
{
    switch (tag) {
    case TB_ID:
        *have_id = 1;
        b->id = n == 8 ? meta__get_u64(v) : 0;
        return r_fixed(n, 8);
    case TB_OWNER:
        b->owner = s_of(v, n);
        return 0;
    case TB_CREATED:
        b->created_ms = n == 8 ? (int64_t)meta__get_u64(v) : 0;
        return r_fixed(n, 8);
    case TB_ACL:
        if (n != 4 || meta__get_u32(v) > META_ACL_AUTHENTICATED_READ)
            return MG_ECORRUPT;
        b->acl = (enum meta_acl)meta__get_u32(v);
        return 0;
    case TB_TAG:
        return r_kv(v, n, &b->tags[b->ntags++]);
    case TB_LIFECYCLE:
        b->lifecycle = s_of(v, n);
        return 0;
    case TB_LC_BIN:
        b->lifecycle_bin = s_of(v, n);
        return 0;
    case TB_LC_GEN:
        b->lc_gen = n == 8 ? meta__get_u64(v) : 0;
        return r_fixed(n, 8);
    default:
        return 0;
    }
}

int meta__bucket_decode(const void *v, size_t len, struct mg_arena *a, struct meta_bucket *b)
{
    struct tlv t;
    struct counts c;
    memset(b, 0, sizeof(*b));
    int rv = tlv_open(&t, v, len, META_REC_BUCKET, a);
    if (rv == 0)
        rv = count_items(t, 1, &c);
    if (rv != 0)
        return rv;
    b->tags = mg_arena_alloc(a, c.tags * sizeof(*b->tags));
    int have_id = 0;
    unsigned tag;
    const uint8_t *iv;
    size_t n;
    while (tlv_next(&t, &tag, &iv, &n) == 1) {
        if ((rv = r_bucket_item(b, tag, iv, n, &have_id)) != 0)
            return rv;
    }
    return have_id && b->id != 0 ? 0 : MG_ECORRUPT;
}
