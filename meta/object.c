/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object op bodies: put (with S3 conditional writes), delete, delete-many and
 * update (tags, acl), run on the meta thread (docs/ops.md), plus the reads
 * (get) and copy, which run on the caller's thread. A body reads the current
 * entry (the pending-write overlay first), builds one write set — the entry
 * row plus its blob-index and due rows, all in the bucket's own key range
 * (0x03·id·'M'/'X'/'D', meta/internal.h), so they ride in the same Raft entry
 * on the same shard — and hands it to the shard. Data a write replaced is
 * retired in that entry (freed when it applies and no reader pins it); data of
 * a failed write is freed before returning: never a half-visible object.
 * Copy reads and copies the source bytes on the caller's thread, then submits
 * a put and waits.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MG_MODULE "meta"
#include "meta/expire.h"

/* Read the entry at (bucket_id, key) into a. *found = 0 if absent. A corrupt entry is
 * reported as MG_ECORRUPT (and logged). */
int meta__object_read(struct meta_store *ms, uint64_t bucket_id, struct mg_str key,
                      struct mg_arena *a, struct meta_object *o, int *found)
{
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_object(&k, bucket_id, key);
    int rv = meta__get(ms, ENG_CF_META, &k, &v, found);
    if (rv == 0 && *found) {
        rv = meta__object_decode(v.base, v.len, META_REC_OBJECT, a, o);
        if (rv != 0)
            mg_log(MG_LOG_ERROR, "event=corrupt_entry bucket_id=%llu key_len=%zu",
                   (unsigned long long)bucket_id, key.len);
        else
            o->key = (struct mg_str){mg_arena_dup(a, key.base, key.len), key.len};
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

struct mg_str meta__unquote(struct mg_str s)
{
    if (s.len >= 2 && s.base[0] == '"' && s.base[s.len - 1] == '"')
        return (struct mg_str){s.base + 1, s.len - 2};
    return s;
}

/* S3 conditional writes: "If-None-Match: *" fails when the key exists; If-Match fails when
 * the etag differs, and answers NoSuchKey when the key does not exist. */
static int check_cond(const struct meta_put_cond *cond, int found, const struct meta_object *old)
{
    if (cond == NULL)
        return 0;
    if (cond->if_none_match_any && found)
        return MG_EPRECONDITION;
    if (cond->if_match.len == 0)
        return 0;
    if (!found)
        return MG_ENOSUCHKEY;
    struct mg_str want = meta__unquote(cond->if_match);
    if (want.len == 1 && want.base[0] == '*')
        return 0;
    if (want.len != old->etag.len || strncasecmp(want.base, old->etag.base, want.len) != 0)
        return MG_EPRECONDITION;
    return 0;
}

/* Build and apply the write set of a put. *old / *had_old: what it replaced. */
static int put_locked(struct meta_store *ms, struct mg_str bucket, uint64_t bucket_id,
                      struct meta_object *obj, const struct meta_put_cond *cond,
                      struct mg_arena *a, struct meta_object *old, int *had_old)
{
    assert(meta__key_check(obj->key) == 0 && obj->size == obj->data.size);
    assert(obj->data.nextents > 0 || obj->data.inline_data.len == obj->size);
    int found = 0;
    int rv = meta__object_read(ms, bucket_id, obj->key, a, old, &found);
    if (rv == MG_ECORRUPT) {
        /* Overwrite a corrupt entry (its data cannot be located, so it leaks to fsck). */
        memset(old, 0, sizeof(*old));
        found = 1;
        rv = 0;
    }
    if (rv == 0)
        rv = check_cond(cond, found, old);
    /* Versions of one key get strictly increasing mtimes, even two writes in one millisecond:
     * expire-batch tells the indexed version from a later one by its mtime (and S3 shows
     * Last-Modified in seconds, so the extra millisecond is invisible). */
    if (rv == 0 && found && obj->mtime_ms <= old->mtime_ms)
        obj->mtime_ms = old->mtime_ms + 1;
    if (rv == 0)
        rv = meta__lc_due(ms, bucket_id, bucket, obj);
    if (rv != 0)
        return rv;
    struct meta_ws *b = meta__ws_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    if (found)
        meta__index_delete(b, bucket_id, obj->key, old);
    meta__index_put(b, bucket_id, obj->key, obj);
    meta__key_object(&k, bucket_id, obj->key);
    meta__object_encode(obj, META_REC_OBJECT, &v);
    meta__ws_put(b, k.base, k.len, v.base, v.len);
    rv = meta__lc_due_rows(ms, b, bucket_id, obj->key, old, found, obj, NULL);
    if (rv == 0)
        rv = meta__shard_apply(&ms->shard, b);
    meta__ws_destroy(b);
    mg_buf_close(&k);
    mg_buf_close(&v);
    *had_old = rv == 0 && found;
    return rv;
}

/* meta_object_put with the committed mtime returned (copy and complete report it). */
static int put_object(struct meta_store *ms, struct mg_str bucket, const struct meta_object *in,
                      const struct meta_put_cond *cond, int64_t *mtime_ms)
{
    assert(in != NULL);
    struct meta_object obj = *in;
    obj.size = obj.data.size;
    obj.mtime_ms = meta__now_ms();
    uint64_t bucket_id = 0;
    int had_old = 0;
    struct meta_object old;
    struct mg_arena a;
    mg_arena_init(&a);
    int rv = meta__key_check(obj.key);
    if (rv == 0)
        rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv == 0)
        rv = put_locked(ms, bucket, bucket_id, &obj, cond, &a, &old, &had_old);
    if (rv != 0)
        meta_data_release(ms, &in->data);
    else if (had_old)
        meta__data_retire(ms, &old.data);
    if (mtime_ms != NULL)
        *mtime_ms = obj.mtime_ms;
    mg_arena_close(&a);
    return rv;
}

int meta__do_object_put(struct meta_store *ms, struct mg_str bucket, const struct meta_object *obj,
                        const struct meta_put_cond *cond, struct meta_object *out)
{
    int64_t mtime = 0;
    int rv = put_object(ms, bucket, obj, cond, &mtime);
    if (out != NULL)
        out->mtime_ms = mtime;
    return rv;
}

int meta_object_get(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                    struct mg_arena *a, struct meta_object *out)
{
    uint64_t bucket_id;
    int found = 0;
    int rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv == 0 && meta__key_check(key) != 0)
        return MG_ENOSUCHKEY;
    if (rv == 0)
        rv = meta__object_read(ms, bucket_id, key, a, out, &found);
    if (rv == 0 && !found)
        rv = MG_ENOSUCHKEY;
    return rv;
}

static int same_extents(const struct meta_data *x, const struct meta_data *y)
{
    if (x->nextents != y->nextents)
        return 0;
    for (size_t i = 0; i < x->nextents; i++)
        if (memcmp(&x->extents[i].ref, &y->extents[i].ref, sizeof(x->extents[i].ref)) != 0)
            return 0;
    return 1;
}

/* Hazard-pointer order (engine/engine.h, eng_blob_pin): pin what the entry names, then
 * re-read the entry; if it still names the same blobs, no retire can have freed them
 * (a retire waits for pins), else unpin and start over with the new entry. Bounded: a key
 * rewritten faster than two point reads for 8 rounds answers SlowDown. */
int meta_object_get_pinned(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           struct mg_arena *a, struct meta_object *out)
{
    for (int round = 0; round < 8; round++) {
        int rv = meta_object_get(ms, bucket, key, a, out);
        if (rv != 0 || out->data.nextents == 0)
            return rv;
        if ((rv = meta_data_pin(ms, &out->data)) != 0)
            return rv;
        struct meta_object again;
        rv = meta_object_get(ms, bucket, key, a, &again);
        if (rv == 0 && same_extents(&out->data, &again.data))
            return 0;
        meta_data_unpin(ms, &out->data);
        if (rv != 0)
            return rv;
    }
    return MG_ESLOWDOWN;
}

/* One key of a delete write set. */
struct del_item {
    struct mg_str key;
    size_t idx; /* position in the caller's list */
    int found;
    int dup; /* same key as the previous item: nothing more to do */
    struct meta_object old;
};

static int cmp_item(const void *x, const void *y)
{
    const struct del_item *a = x, *b = y;
    size_t n = a->key.len < b->key.len ? a->key.len : b->key.len;
    int c = memcmp(a->key.base, b->key.base, n);
    if (c == 0)
        c = a->key.len < b->key.len ? -1 : a->key.len > b->key.len;
    return c != 0 ? c : (a->idx < b->idx ? -1 : a->idx > b->idx);
}

static int delete_locked(struct meta_store *ms, uint64_t bucket_id, struct del_item *items,
                         size_t n, struct mg_arena *a)
{
    assert(n <= META_DELETE_MANY_MAX);
    struct meta_ws *b = meta__ws_create();
    struct mg_buf k;
    mg_buf_init(&k);
    int rv = 0;
    for (size_t i = 0; i < n && rv == 0; i++) {
        struct del_item *it = &items[i];
        const struct mg_str prev = i > 0 ? items[i - 1].key : (struct mg_str){NULL, 0};
        if (prev.len == it->key.len && memcmp(prev.base, it->key.base, prev.len) == 0) {
            it->dup = 1;
            it->found = items[i - 1].found;
            continue;
        }
        rv = meta__object_read(ms, bucket_id, it->key, a, &it->old, &it->found);
        if (rv == MG_ECORRUPT) {
            memset(&it->old, 0, sizeof(it->old)); /* drop the bad row; its data leaks to fsck */
            it->found = 1;
            rv = 0;
        }
        if (rv != 0 || !it->found)
            continue;
        k.len = 0;
        meta__key_object(&k, bucket_id, it->key);
        meta__ws_delete(b, k.base, k.len);
        meta__index_delete(b, bucket_id, it->key, &it->old);
        rv = meta__lc_due_rows(ms, b, bucket_id, it->key, &it->old, 1, NULL, NULL);
    }
    if (rv == 0)
        rv = meta__shard_apply(&ms->shard, b);
    meta__ws_destroy(b);
    mg_buf_close(&k);
    return rv;
}

int meta__do_object_delete_many(struct meta_store *ms, struct mg_str bucket,
                                const struct mg_str *keys, size_t n, int *existed)
{
    if (n > META_DELETE_MANY_MAX)
        return MG_EINVALIDARGUMENT;
    struct mg_arena a;
    mg_arena_init(&a);
    struct del_item *items = mg_arena_alloc(&a, n * sizeof(*items));
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (existed != NULL)
            existed[i] = 0;
        if (meta__key_check(keys[i]) == 0) /* an impossible key does not exist */
            items[m++] = (struct del_item){.key = keys[i], .idx = i};
    }
    qsort(items, m, sizeof(*items), cmp_item);
    uint64_t bucket_id;
    int rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv == 0)
        rv = delete_locked(ms, bucket_id, items, m, &a);
    for (size_t i = 0; rv == 0 && i < m; i++) {
        if (items[i].found && !items[i].dup)
            meta__data_retire(ms, &items[i].old.data);
        if (existed != NULL)
            existed[items[i].idx] = items[i].found;
    }
    mg_arena_close(&a);
    return rv;
}

int meta__do_object_delete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           int *existed)
{
    return meta__do_object_delete_many(ms, bucket, &key, 1, existed);
}

static int update_locked(struct meta_store *ms, struct mg_str bucket, uint64_t bucket_id,
                         struct mg_str key, unsigned mask, const struct meta_object *values)
{
    struct mg_arena a;
    struct meta_object cur;
    int found = 0;
    mg_arena_init(&a);
    int rv = meta__object_read(ms, bucket_id, key, &a, &cur, &found);
    if (rv == 0 && !found)
        rv = MG_ENOSUCHKEY;
    if (rv != 0) {
        mg_arena_close(&a);
        return rv;
    }
    struct meta_object old = cur;
    if (mask & META_OBJECT_SET_TAGS) {
        cur.tags = values->tags;
        cur.ntags = values->ntags;
        /* Tags select rules: the due row follows them (mtime, the clock's origin, stays). */
        rv = meta__lc_due(ms, bucket_id, bucket, &cur);
    }
    if (mask & META_OBJECT_SET_ACL)
        cur.acl = values->acl;
    if (rv != 0) {
        mg_arena_close(&a);
        return rv;
    }
    struct meta_ws *b = meta__ws_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_object(&k, bucket_id, key);
    meta__object_encode(&cur, META_REC_OBJECT, &v);
    meta__ws_put(b, k.base, k.len, v.base, v.len);
    rv = meta__lc_due_rows(ms, b, bucket_id, key, &old, 1, &cur, NULL);
    if (rv == 0)
        rv = meta__shard_apply(&ms->shard, b);
    meta__ws_destroy(b);
    mg_buf_close(&k);
    mg_buf_close(&v);
    mg_arena_close(&a);
    return rv;
}

int meta__do_object_update(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           unsigned mask, const struct meta_object *values)
{
    assert(values != NULL || mask == 0);
    uint64_t bucket_id;
    int rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv == 0 && meta__key_check(key) != 0)
        rv = MG_ENOSUCHKEY;
    if (rv == 0)
        rv = update_locked(ms, bucket, bucket_id, key, mask, values);
    return rv;
}

int meta__source_range(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       uint64_t range_off, uint64_t range_len, struct mg_arena *a,
                       struct meta_object *src, struct meta_data *copy, char md5_hex[33])
{
    int rv = meta_object_get(ms, bucket, key, a, src);
    if (rv != 0)
        return rv;
    if (range_len == UINT64_MAX) {
        if (range_off > src->size)
            return MG_EINVALIDRANGE;
        range_len = src->size - range_off;
    }
    if (range_off > src->size || range_len > src->size - range_off)
        return MG_EINVALIDRANGE;
    return meta__data_copy(ms, &src->data, range_off, range_len, a, copy, md5_hex);
}

int meta_object_copy_range(struct meta_store *ms, struct mg_str src_bucket, struct mg_str src_key,
                           uint64_t range_off, uint64_t range_len, struct mg_str dst_bucket,
                           const struct meta_object *dst, struct mg_arena *a,
                           struct meta_object *out)
{
    struct meta_object src;
    struct meta_data copy;
    char md5_hex[33];
    int rv = meta__key_check(dst->key);
    if (rv != 0)
        return rv;
    /* Fail early (before copying bytes) when the destination bucket is missing. */
    uint64_t dst_id;
    if ((rv = meta__bucket_id(ms, dst_bucket, &dst_id)) != 0)
        return rv;
    rv = meta__source_range(ms, src_bucket, src_key, range_off, range_len, a, &src, &copy, md5_hex);
    if (rv != 0)
        return rv;
    int whole = copy.size == src.size && src.nparts == 0;
    struct meta_object obj = *dst;
    obj.data = copy;
    obj.upload_id = (struct mg_str){"", 0}; /* a copy completed no upload */
    obj.parts = NULL;
    obj.nparts = 0;
    obj.etag = whole && src.etag.len ? src.etag : (struct mg_str){mg_arena_dup(a, md5_hex, 32), 32};
    obj.cksum_algo = whole ? src.cksum_algo : MG_CKSUM_NONE;
    obj.cksum_value = whole ? src.cksum_value : (struct mg_str){"", 0};
    int64_t mtime = 0;
    rv = meta__object_put_mtime(ms, dst_bucket, &obj, NULL, &mtime); /* submits and waits */
    if (rv != 0)
        return rv;
    *out = obj;
    out->size = copy.size;
    out->mtime_ms = mtime;
    out->key = (struct mg_str){mg_arena_dup(a, dst->key.base, dst->key.len), dst->key.len};
    return 0;
}

int meta_object_copy(struct meta_store *ms, struct mg_str src_bucket, struct mg_str src_key,
                     struct mg_str dst_bucket, const struct meta_object *dst, struct mg_arena *a,
                     struct meta_object *out)
{
    return meta_object_copy_range(ms, src_bucket, src_key, 0, UINT64_MAX, dst_bucket, dst, a, out);
}
