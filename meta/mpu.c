/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Multipart uploads. An upload is the row 0x03·bucket-id·'U'·0·esc(key)·00 01·id
 * (the final object's template) and its parts are that key + part number
 * (4B BE), so every upload of a key, and every part of an upload, sits in the
 * bucket's key range next to the others: complete is a one-shard op
 * (DESIGN.md 4; meta/internal.h, "key schema").
 * Parts are separate blobs; complete validates the client's list, builds an
 * object whose extents are the parts' extents in order (no byte is copied),
 * keeps the part list for GetObjectAttributes and GET ?partNumber, and frees
 * the parts it did not list. The mutating bodies run one at a time on the
 * meta thread (docs/ops.md); complete and abort read the part list from
 * committed state, so they wait until no entry is in flight.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/rand.h>

#define MG_MODULE "meta"
#include "meta/data.h"
#include "meta/expire.h"

/* One op's target. */
struct mpu_ctx {
    struct meta_store *ms;
    struct mg_str bucket;
    struct mg_str key;
    struct mg_str upload_id;
    uint64_t bucket_id;
};

static int upload_id_valid(struct mg_str id)
{
    if (id.len != META_UPLOAD_ID_LEN)
        return 0;
    for (size_t i = 0; i < id.len; i++) {
        char c = id.base[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

/* Resolve the bucket id of a mutating op (its body runs alone on the meta thread). */
static int ctx_lock(struct mpu_ctx *c)
{
    int rv = meta__key_check(c->key);
    if (rv != 0)
        return rv;
    rv = meta__bucket_id(c->ms, c->bucket, &c->bucket_id);
    if (rv == 0 && !upload_id_valid(c->upload_id))
        rv = MG_ENOSUCHUPLOAD;
    return rv;
}

/* The upload's template; MG_ENOSUCHUPLOAD if absent. */
static int read_upload(struct mpu_ctx *c, struct mg_arena *a, struct meta_object *tmpl)
{
    struct mg_buf k, v;
    int found = 0;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_upload(&k, c->bucket_id, c->key, c->upload_id);
    int rv = meta__get(c->ms, ENG_CF_META, &k, &v, &found);
    if (rv == 0 && !found)
        rv = MG_ENOSUCHUPLOAD;
    if (rv == 0)
        rv = meta__object_decode(v.base, v.len, META_REC_UPLOAD, a, tmpl);
    if (rv == 0)
        tmpl->key = (struct mg_str){mg_arena_dup(a, c->key.base, c->key.len), c->key.len};
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

/* Part number of the upload; *found = 0 if absent. */
static int read_part(struct mpu_ctx *c, uint32_t number, struct mg_arena *a, struct meta_part *p,
                     int *found)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_part(&k, c->bucket_id, c->key, c->upload_id, number);
    int rv = meta__get(c->ms, ENG_CF_META, &k, &v, found);
    if (rv == 0 && *found)
        rv = meta__part_decode(v.base, v.len, a, p);
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

/* Parts with number > marker, up to max (0: all), ascending. *truncated (may be NULL) tells
 * whether more follow. Bounded by META_PART_MAX rows. */
static int read_parts(struct mpu_ctx *c, uint32_t marker, uint32_t max, struct mg_arena *a,
                      struct meta_part **out, size_t *n, int *truncated)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_part_range(c->bucket_id, c->key, c->upload_id, marker, &lo, &hi);
    struct eng_iter *it = eng_iter_create(c->ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    size_t cap = 16, cnt = 0;
    struct meta_part *v = mg_malloc(cap * sizeof(*v));
    int rv = 0;
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        if (max > 0 && cnt == max)
            break;
        size_t vl;
        const char *val = eng_iter_value(it, &vl);
        if (cnt == cap)
            v = mg_realloc(v, (cap *= 2) * sizeof(*v));
        if ((rv = meta__part_decode(val, vl, a, &v[cnt])) != 0)
            break;
        cnt++;
    }
    if (truncated != NULL)
        *truncated = rv == 0 && eng_iter_valid(it);
    if (rv == 0)
        rv = eng_iter_status(it);
    eng_iter_destroy(it);
    *out = mg_arena_alloc(a, cnt * sizeof(**out));
    if (cnt > 0)
        memcpy(*out, v, cnt * sizeof(*v));
    *n = cnt;
    mg_free(v);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return rv;
}

static void put_part_rows(struct meta_ws *b, struct mpu_ctx *c, const struct meta_part *p)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_part(&k, c->bucket_id, c->key, c->upload_id, p->number);
    meta__part_encode(p, &v);
    meta__ws_put(b, k.base, k.len, v.base, v.len);
    meta__blob_index_put(b, c->bucket_id, c->key, &p->data);
    mg_buf_close(&k);
    mg_buf_close(&v);
}

static void delete_part_rows(struct meta_ws *b, struct mpu_ctx *c, const struct meta_part *p,
                             int keep_blob_index)
{
    struct mg_buf k;
    mg_buf_init(&k);
    meta__key_part(&k, c->bucket_id, c->key, c->upload_id, p->number);
    meta__ws_delete(b, k.base, k.len);
    if (!keep_blob_index)
        meta__blob_index_delete(b, c->bucket_id, &p->data);
    mg_buf_close(&k);
}

static void delete_upload_row(struct meta_ws *b, struct mpu_ctx *c)
{
    struct mg_buf k;
    mg_buf_init(&k);
    meta__key_upload(&k, c->bucket_id, c->key, c->upload_id);
    meta__ws_delete(b, k.base, k.len);
    mg_buf_close(&k);
}

static void new_upload_id(char out[META_UPLOAD_ID_LEN + 1])
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t r[24];
    if (RAND_bytes(r, sizeof(r)) != 1)
        abort(); /* no entropy: cannot mint unguessable ids */
    for (size_t i = 0, o = 0; i < sizeof(r); i += 3) {
        uint32_t v = ((uint32_t)r[i] << 16) | ((uint32_t)r[i + 1] << 8) | r[i + 2];
        out[o++] = b64url[(v >> 18) & 63];
        out[o++] = b64url[(v >> 12) & 63];
        out[o++] = b64url[(v >> 6) & 63];
        out[o++] = b64url[v & 63];
    }
    out[META_UPLOAD_ID_LEN] = '\0';
}

int meta__do_mpu_create(struct meta_store *ms, struct mg_str bucket, const struct meta_object *tmpl,
                        struct mg_arena *a, struct mg_str *upload_id)
{
    char id[META_UPLOAD_ID_LEN + 1];
    new_upload_id(id);
    struct mpu_ctx c = {
        .ms = ms, .bucket = bucket, .key = tmpl->key, .upload_id = {id, META_UPLOAD_ID_LEN}};
    int rv = ctx_lock(&c);
    if (rv != 0)
        return rv;
    struct meta_object t = *tmpl;
    memset(&t.data, 0, sizeof(t.data));
    t.size = 0;
    t.etag = (struct mg_str){"", 0};
    t.parts = NULL;
    t.nparts = 0;
    t.mtime_ms = meta__now_ms();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_upload(&k, c.bucket_id, c.key, c.upload_id);
    meta__object_encode(&t, META_REC_UPLOAD, &v);
    rv = meta__apply_put(ms, &k, &v);
    if (rv == 0)
        *upload_id = (struct mg_str){mg_arena_dup(a, id, META_UPLOAD_ID_LEN), META_UPLOAD_ID_LEN};
    return rv;
}

/* Store p, replacing a same-numbered part (returned in *old). */
static int put_part_locked(struct mpu_ctx *c, const struct meta_part *p, struct mg_arena *a,
                           struct meta_part *old, int *had_old)
{
    struct meta_object tmpl;
    int rv = read_upload(c, a, &tmpl);
    if (rv == 0)
        rv = read_part(c, p->number, a, old, had_old); /* a point read: it sees the overlay */
    if (rv != 0)
        return rv;
    struct meta_ws *b = meta__ws_create();
    if (*had_old)
        meta__blob_index_delete(b, c->bucket_id, &old->data);
    put_part_rows(b, c, p);
    rv = meta__shard_apply(&c->ms->shard, b);
    meta__ws_destroy(b);
    if (rv != 0)
        *had_old = 0;
    return rv;
}

int meta__do_mpu_put_part(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                          struct mg_str upload_id, const struct meta_part *part)
{
    struct mpu_ctx c = {.ms = ms, .bucket = bucket, .key = key, .upload_id = upload_id};
    struct meta_part p = *part, old;
    int had_old = 0;
    struct mg_arena a;
    mg_arena_init(&a);
    p.size = p.data.size;
    p.mtime_ms = meta__now_ms();
    int rv = part->number < 1 || part->number > META_PART_MAX ? MG_EINVALIDARGUMENT : 0;
    if (rv == 0)
        rv = ctx_lock(&c);
    if (rv == 0)
        rv = put_part_locked(&c, &p, &a, &old, &had_old);
    if (rv != 0)
        meta_data_release(ms, &part->data);
    else if (had_old)
        meta__data_retire(ms, &old.data);
    mg_arena_close(&a);
    return rv;
}

int meta_mpu_put_part_copy(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           struct mg_str upload_id, uint32_t number, struct mg_str src_bucket,
                           struct mg_str src_key, uint64_t range_off, uint64_t range_len,
                           struct mg_arena *a, struct meta_part *out)
{
    if (number < 1 || number > META_PART_MAX)
        return MG_EINVALIDARGUMENT;
    struct meta_object src;
    char md5_hex[33];
    memset(out, 0, sizeof(*out));
    int rv = meta__source_range(ms, src_bucket, src_key, range_off, range_len, a, &src, &out->data,
                                md5_hex);
    if (rv != 0)
        return rv;
    out->number = number;
    out->size = out->data.size;
    out->etag = (struct mg_str){mg_arena_dup(a, md5_hex, 32), 32};
    rv = meta_mpu_put_part(ms, bucket, key, upload_id, out);
    out->mtime_ms = meta__now_ms();
    return rv;
}

/* -------------------------------------------------------------- complete */

/* The listed parts, matched against the stored ones (both ascending by number). */
static int match_parts(const struct meta_part *want, size_t nwant, const struct meta_part *have,
                       size_t nhave, const struct meta_part **matched)
{
    assert(nwant >= 1 && nwant <= META_PART_MAX);
    for (size_t i = 1; i < nwant; i++)
        if (want[i].number <= want[i - 1].number)
            return MG_EINVALIDPARTORDER;
    size_t j = 0;
    for (size_t i = 0; i < nwant; i++) {
        while (j < nhave && have[j].number < want[i].number)
            j++;
        if (j == nhave || have[j].number != want[i].number)
            return MG_EINVALIDPART;
        struct mg_str we = meta__unquote(want[i].etag), he = have[j].etag;
        if (we.len != he.len || strncasecmp(we.base, he.base, we.len) != 0)
            return MG_EINVALIDPART;
        if (want[i].checksum.len > 0 &&
            (want[i].checksum.len != have[j].checksum.len ||
             memcmp(want[i].checksum.base, have[j].checksum.base, want[i].checksum.len) != 0))
            return MG_EINVALIDPART;
        /* "Each part must be at least 5 MB in size, except the last part." */
        if (i + 1 < nwant && have[j].size < META_PART_MIN_BYTES)
            return MG_EENTITYTOOSMALL;
        matched[i] = &have[j];
    }
    return 0;
}

/* "md5-of-md5s": hex(md5(concat of the parts' binary md5s)) + "-N". */
static struct mg_str multipart_etag(const struct meta_part *const *parts, size_t n,
                                    struct mg_arena *a)
{
    struct mg_cksum md5;
    mg_cksum_init(&md5, MG_CKSUM_MD5);
    for (size_t i = 0; i < n; i++) {
        struct mg_str e = parts[i]->etag;
        uint8_t bin[16];
        int ok = e.len == 32;
        for (size_t k = 0; ok && k < 16; k++) {
            int hi = mg_hex_value(e.base[2 * k]), lo = mg_hex_value(e.base[2 * k + 1]);
            ok = hi >= 0 && lo >= 0;
            bin[k] = (uint8_t)(hi << 4 | lo);
        }
        if (ok)
            mg_cksum_update(&md5, bin, 16);
        else
            mg_cksum_update(&md5, e.base, e.len); /* not an md5: hash what the part has */
    }
    uint8_t digest[32];
    mg_cksum_final(&md5, digest);
    mg_cksum_close(&md5);
    char *out = mg_arena_alloc(a, 32 + 1 + 6);
    mg_hex_encode(digest, 16, out);
    int m = snprintf(out + 32, 7, "-%zu", n);
    return (struct mg_str){out, 32 + (size_t)m};
}

/* Composite "checksum of checksums": base64(algo(concat of the parts' binary checksums)) +
 * "-N" (S3 User Guide, "Checking object integrity", composite checksums of multipart
 * uploads). Empty when a part has none or the algorithm has no composite form (CRC64NVME is
 * full-object only). */
static struct mg_str composite_checksum(enum mg_cksum_algo algo,
                                        const struct meta_part *const *parts, size_t n,
                                        struct mg_arena *a)
{
    if (algo == MG_CKSUM_NONE || algo == MG_CKSUM_CRC64NVME || algo == MG_CKSUM_MD5)
        return (struct mg_str){"", 0};
    struct mg_cksum c;
    mg_cksum_init(&c, algo);
    for (size_t i = 0; i < n; i++) {
        uint8_t raw[32];
        long m = mg_base64_decode(parts[i]->checksum, raw, sizeof(raw));
        if (m <= 0) {
            mg_cksum_close(&c);
            return (struct mg_str){"", 0};
        }
        mg_cksum_update(&c, raw, (size_t)m);
    }
    uint8_t d[32];
    size_t dl = mg_cksum_final(&c, d);
    mg_cksum_close(&c);
    char *out = mg_arena_alloc(a, 4 * ((dl + 2) / 3) + 1 + 7);
    size_t bl = mg_base64_encode(d, dl, out);
    int m = snprintf(out + bl, 8, "-%zu", n);
    return (struct mg_str){out, bl + (size_t)m};
}

/* An upload created with x-amz-checksum-type FULL_OBJECT (common/sig.h MG_CKSUM_FULL_OBJECT). */
static int full_object_upload(const struct meta_object *tmpl)
{
    size_t n = sizeof(MG_CKSUM_FULL_OBJECT) - 1;
    return tmpl->cksum_value.len == n &&
           memcmp(tmpl->cksum_value.base, MG_CKSUM_FULL_OBJECT, n) == 0;
}

/* Its checksum: the CRC of the whole object, combined from the parts' CRCs and sizes
 * (mg_crc_concat) without reading them, no "-N" (S3 User Guide, "Checking object integrity",
 * full object checksums). Empty when a part has none. */
static struct mg_str full_object_checksum(enum mg_cksum_algo algo,
                                          const struct meta_part *const *parts, size_t n,
                                          struct mg_arena *a)
{
    struct mg_crc_concat c;
    char b64[16];
    mg_crc_concat_init(&c, algo);
    for (size_t i = 0; i < n; i++)
        mg_crc_concat_add(&c, parts[i]->checksum, parts[i]->size);
    size_t len = mg_crc_concat_final(&c, b64);
    return (struct mg_str){mg_arena_dup(a, b64, len), len};
}

/* Small parts live inline in their rows; an object's data is a list of extents, so give each
 * inline part a blob of its own. New refs go into fresh (appended to `made`). */
static int materialize_inline(struct meta_store *ms, struct meta_part *p, struct mg_arena *a)
{
    if (p->data.nextents > 0 || p->data.size == 0)
        return 0;
    struct meta__blob_writer *w;
    int rv = meta__blob_writer_create(ms, p->data.size, &w);
    if (rv != 0)
        return rv;
    rv = meta__blob_writer_append(w, p->data.inline_data.base, p->data.inline_data.len);
    if (rv != 0) {
        meta__blob_writer_abort(w);
        return rv;
    }
    struct meta_extent *e = mg_arena_alloc(a, sizeof(*e));
    if ((rv = meta__blob_writer_finish(w, &e->ref)) != 0)
        return rv;
    p->data.extents = e;
    p->data.nextents = 1;
    p->data.inline_data = (struct mg_str){"", 0};
    return 0;
}

/* The object the upload becomes. Each listed part is copied into parts[] (materialized). */
static int build_object(struct mpu_ctx *c, const struct meta_object *tmpl,
                        const struct meta_part *const *matched, size_t n, struct mg_arena *a,
                        struct meta_object *o, struct meta_part *mparts)
{
    assert(n >= 1 && matched != NULL);
    *o = *tmpl;
    o->key = tmpl->key;
    o->upload_id = c->upload_id;
    o->parts = mg_arena_alloc(a, n * sizeof(*o->parts));
    o->nparts = n;
    o->size = 0;
    size_t next = 0;
    int rv = 0;
    for (size_t i = 0; i < n && rv == 0; i++) {
        mparts[i] = *matched[i];
        rv = materialize_inline(c->ms, &mparts[i], a);
        o->size += mparts[i].size;
        next += mparts[i].data.nextents;
        o->parts[i] = (struct meta_part_info){mparts[i].number, mparts[i].size, mparts[i].checksum};
    }
    memset(&o->data, 0, sizeof(o->data));
    o->data.size = o->size;
    o->data.extents = mg_arena_alloc(a, next * sizeof(*o->data.extents));
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < mparts[i].data.nextents; k++)
            o->data.extents[o->data.nextents++] = mparts[i].data.extents[k];
    if (next == 0)
        o->data.inline_data = (struct mg_str){"", 0};
    o->etag = multipart_etag(matched, n, a);
    o->cksum_value = full_object_upload(tmpl)
                         ? full_object_checksum(tmpl->cksum_algo, matched, n, a)
                         : composite_checksum(tmpl->cksum_algo, matched, n, a);
    o->mtime_ms = meta__now_ms();
    return rv;
}

/* Release blobs materialize_inline made for a complete that then failed. */
static void release_materialized(struct meta_store *ms, const struct meta_part *const *matched,
                                 const struct meta_part *mparts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (matched[i]->data.nextents == 0 && mparts[i].data.nextents > 0)
            meta_data_release(ms, &mparts[i].data);
}

struct complete_state {
    struct meta_part *have; /* every stored part */
    size_t nhave;
    const struct meta_part **matched; /* listed, pointing into have */
    struct meta_part *mparts;         /* listed, inline ones materialized */
    struct meta_object old;           /* the object replaced */
    int had_old;
};

static int complete_batch(struct meta_ws *b, struct mpu_ctx *c, struct complete_state *s,
                          const struct meta_object *o, size_t n)
{
    delete_upload_row(b, c);
    for (size_t i = 0, j = 0; i < s->nhave; i++) {
        int listed = j < n && s->matched[j] == &s->have[i];
        delete_part_rows(b, c, &s->have[i], listed);
        j += listed;
    }
    if (s->had_old)
        meta__index_delete(b, c->bucket_id, c->key, &s->old);
    meta__index_put(b, c->bucket_id, c->key, o);
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_object(&k, c->bucket_id, c->key);
    meta__object_encode(o, META_REC_OBJECT, &v);
    meta__ws_put(b, k.base, k.len, v.base, v.len);
    mg_buf_close(&k);
    mg_buf_close(&v);
    return meta__lc_due_rows(c->ms, b, c->bucket_id, c->key, &s->old, s->had_old, o, NULL);
}

static int complete_locked(struct mpu_ctx *c, const struct meta_part *parts, size_t n,
                           struct mg_arena *a, struct meta_object *o, struct complete_state *s)
{
    struct meta_object tmpl;
    int found = 0;
    int rv = read_upload(c, a, &tmpl);
    if (rv == 0)
        rv = read_parts(c, 0, 0, a, &s->have, &s->nhave, NULL);
    if (rv != 0)
        return rv;
    s->matched = mg_arena_alloc(a, n * sizeof(*s->matched));
    s->mparts = mg_arena_alloc(a, n * sizeof(*s->mparts));
    if ((rv = match_parts(parts, n, s->have, s->nhave, s->matched)) != 0)
        return rv;
    rv = meta__object_read(c->ms, c->bucket_id, c->key, a, &s->old, &found);
    if (rv == MG_ECORRUPT) {
        memset(&s->old, 0, sizeof(s->old)); /* replaced; its data leaks to fsck */
        found = 1;
        rv = 0;
    }
    if (rv == 0)
        rv = build_object(c, &tmpl, s->matched, n, a, o, s->mparts);
    if (rv == 0)
        rv = meta__lc_due(c->ms, c->bucket_id, c->bucket, o);
    if (rv == 0) {
        struct meta_ws *b = meta__ws_create();
        s->had_old = found;
        rv = complete_batch(b, c, s, o, n);
        if (rv == 0)
            rv = meta__shard_apply(&c->ms->shard, b);
        meta__ws_destroy(b);
    }
    if (rv != 0) {
        release_materialized(c->ms, s->matched, s->mparts, n);
        s->had_old = 0;
    }
    return rv;
}

/* The object at the key is the one this upload completed (same upload id): the upload row is
 * gone because an earlier Complete of it succeeded. */
static int completed_before(struct mpu_ctx *c, struct mg_arena *a, struct meta_object *out)
{
    int found = 0;
    if (meta__object_read(c->ms, c->bucket_id, c->key, a, out, &found) != 0 || !found)
        return 0;
    return out->upload_id.len == c->upload_id.len &&
           memcmp(out->upload_id.base, c->upload_id.base, c->upload_id.len) == 0;
}

int meta__do_mpu_complete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                          struct mg_str upload_id, const struct meta_part *parts, size_t nparts,
                          struct mg_arena *a, struct meta_object *out)
{
    struct mpu_ctx c = {.ms = ms, .bucket = bucket, .key = key, .upload_id = upload_id};
    struct complete_state s = {0};
    if (nparts == 0)
        return MG_EMALFORMEDXML; /* S3: a CompleteMultipartUpload needs at least one Part */
    if (nparts > META_PART_MAX)
        return MG_EINVALIDPART;
    int rv = ctx_lock(&c);
    if (rv != 0)
        return rv;
    rv = complete_locked(&c, parts, nparts, a, out, &s);
    if (rv == MG_ENOSUCHUPLOAD && completed_before(&c, a, out))
        return 0; /* a retry of a Complete that succeeded: its first result (as AWS answers) */
    if (rv != 0)
        return rv;
    /* Retired in the same entry: freed when it applies and nothing pins them. */
    for (size_t i = 0, j = 0; i < s.nhave; i++) {
        int listed = j < nparts && s.matched[j] == &s.have[i];
        if (!listed)
            meta__data_retire(ms, &s.have[i].data);
        j += listed;
    }
    if (s.had_old)
        meta__data_retire(ms, &s.old.data);
    mg_log(MG_LOG_DEBUG, "event=mpu_complete parts=%zu size=%llu", nparts,
           (unsigned long long)out->size);
    return 0;
}

/* ----------------------------------------------------------------- other */

static int abort_locked(struct mpu_ctx *c, struct mg_arena *a, struct meta_part **parts, size_t *n)
{
    struct meta_object tmpl;
    int rv = read_upload(c, a, &tmpl);
    if (rv == 0)
        rv = read_parts(c, 0, 0, a, parts, n, NULL);
    if (rv != 0)
        return rv;
    struct meta_ws *b = meta__ws_create();
    delete_upload_row(b, c);
    for (size_t i = 0; i < *n; i++)
        delete_part_rows(b, c, &(*parts)[i], 0);
    rv = meta__shard_apply(&c->ms->shard, b);
    meta__ws_destroy(b);
    return rv;
}

int meta__do_mpu_abort(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       struct mg_str upload_id)
{
    struct mpu_ctx c = {.ms = ms, .bucket = bucket, .key = key, .upload_id = upload_id};
    struct meta_part *parts = NULL;
    size_t n = 0;
    struct mg_arena a;
    mg_arena_init(&a);
    int rv = ctx_lock(&c);
    if (rv == 0)
        rv = abort_locked(&c, &a, &parts, &n);
    for (size_t i = 0; rv == 0 && i < n; i++)
        meta__data_retire(ms, &parts[i].data);
    mg_arena_close(&a);
    return rv;
}

/* Resolve the bucket id for a read-only op (no locks: reads see a consistent snapshot). */
static int ctx_resolve(struct mpu_ctx *c)
{
    int rv = meta__bucket_id(c->ms, c->bucket, &c->bucket_id);
    if (rv == 0 && (meta__key_check(c->key) != 0 || !upload_id_valid(c->upload_id)))
        rv = MG_ENOSUCHUPLOAD;
    return rv;
}

int meta_mpu_get(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                 struct mg_str upload_id, struct mg_arena *a, struct meta_object *tmpl)
{
    struct mpu_ctx c = {.ms = ms, .bucket = bucket, .key = key, .upload_id = upload_id};
    int rv = ctx_resolve(&c);
    return rv != 0 ? rv : read_upload(&c, a, tmpl);
}

int meta_mpu_list_parts(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                        struct mg_str upload_id, uint32_t marker, uint32_t max, struct mg_arena *a,
                        struct meta_part **out, size_t *n, int *truncated)
{
    struct mpu_ctx c = {.ms = ms, .bucket = bucket, .key = key, .upload_id = upload_id};
    struct meta_object tmpl;
    *out = NULL;
    *n = 0;
    *truncated = 0;
    int rv = ctx_resolve(&c);
    if (rv == 0)
        rv = read_upload(&c, a, &tmpl);
    if (rv != 0 || max == 0)
        return rv;
    if (marker >= META_PART_MAX)
        return 0;
    if (max > META_LIST_MAX)
        max = META_LIST_MAX;
    return read_parts(&c, marker, max, a, out, n, truncated);
}

/* First key of the scan: the range's start lo, or past key_marker (and upload_id_marker)
 * when that is later. */
static void uploads_start(struct mg_buf *k, uint64_t bucket_id, const struct mg_buf *lo,
                          struct mg_str key_marker, struct mg_str upload_id_marker)
{
    if (key_marker.len > 0)
        meta__key_upload_after(k, bucket_id, key_marker, upload_id_marker);
    size_t n = k->len < lo->len ? k->len : lo->len;
    int c = n > 0 ? memcmp(k->base, lo->base, n) : 0;
    if (c < 0 || (c == 0 && k->len < lo->len)) {
        k->len = 0;
        mg_buf_append(k, lo->base, lo->len);
    }
}

static int upload_entry(struct eng_iter *it, struct mg_arena *a, struct meta_upload *u,
                        struct mg_buf *name)
{
    size_t kl, vl;
    const char *key = eng_iter_key(it, &kl);
    const char *val = eng_iter_value(it, &vl);
    uint64_t bid;
    uint32_t part;
    struct meta_object tmpl;
    name->len = 0;
    int rv = meta__key_upload_decode(key, kl, &bid, name, &u->upload_id, &part);
    if (rv == 0 && part != 0)
        rv = MG_ECORRUPT; /* the scan seeks past parts */
    if (rv == 0)
        rv = meta__object_decode(val, vl, META_REC_UPLOAD, a, &tmpl);
    if (rv != 0)
        return rv;
    u->key = (struct mg_str){mg_arena_dup(a, name->base, name->len), name->len};
    u->upload_id =
        (struct mg_str){mg_arena_dup(a, u->upload_id.base, u->upload_id.len), u->upload_id.len};
    u->initiated_ms = tmpl.mtime_ms;
    u->owner = tmpl.owner;
    return 0;
}

/* Budget: one seek per upload listed (past its parts), at most max + 1 rows read. */
int meta_mpu_list(struct meta_store *ms, struct mg_str bucket, struct mg_str prefix,
                  struct mg_str key_marker, struct mg_str upload_id_marker, uint32_t max,
                  struct mg_arena *a, struct meta_upload **out, size_t *n, int *truncated)
{
    uint64_t bucket_id;
    *out = NULL;
    *n = 0;
    *truncated = 0;
    int rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv != 0 || max == 0)
        return rv;
    if (max > META_LIST_MAX)
        max = META_LIST_MAX;
    struct mg_buf lo, hi, start, name;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    mg_buf_init(&start);
    mg_buf_init(&name);
    meta__key_upload_range(bucket_id, prefix, &lo, &hi);
    uploads_start(&start, bucket_id, &lo, key_marker, upload_id_marker);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    struct meta_upload *v = mg_arena_alloc(a, max * sizeof(*v));
    size_t cnt = 0;
    eng_iter_seek(it, start.base, start.len);
    while (rv == 0 && eng_iter_valid(it) && cnt < max) {
        if ((rv = upload_entry(it, a, &v[cnt], &name)) != 0)
            break;
        start.len = 0; /* past this upload's parts */
        meta__key_upload_after(&start, bucket_id, v[cnt].key, v[cnt].upload_id);
        cnt++;
        eng_iter_seek(it, start.base, start.len);
    }
    if (rv == 0) {
        *truncated = eng_iter_valid(it);
        rv = eng_iter_status(it);
    }
    eng_iter_destroy(it);
    *out = v;
    *n = rv == 0 ? cnt : 0;
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    mg_buf_close(&start);
    mg_buf_close(&name);
    return rv;
}
