/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LIST (V1 and V2): one range scan over the bucket's entries whose name
 * starts with the prefix, 0x03·id·'M'·0·prefix… (DESIGN.md 4, flat namespace;
 * key.c builds every bound). With a delimiter (any byte string), a key that contains it
 * after the prefix rolls up into the common prefix prefix+…+delimiter, and the
 * scan then seeks once to the successor of that common prefix instead of
 * reading the keys under it (issue 2: "LIST with a delimiter must not scan
 * every key under a common prefix"). Keys and prefixes are arbitrary bytes:
 * the successor drops trailing 0xFF bytes and increments the last, which is
 * correct for UTF-8 and for 0xFF alike. IsTruncated is exact: the iterator is
 * already positioned on the next candidate when max_keys is reached.
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/internal.h"

/* memcmp that accepts (NULL, 0) strings. */
static int cmp_n(const char *a, const char *b, size_t n)
{
    return n == 0 ? 0 : memcmp(a, b, n);
}

static int has_prefix(struct mg_str s, struct mg_str p)
{
    return s.len >= p.len && cmp_n(s.base, p.base, p.len) == 0;
}

/* Position of the first delimiter in name at or after from, or -1. */
static long find_delim(struct mg_str name, size_t from, struct mg_str delim)
{
    if (delim.len == 0 || name.len < from + delim.len)
        return -1;
    const char *hit = memmem(name.base + from, name.len - from, delim.base, delim.len);
    return hit == NULL ? -1 : (long)(hit - name.base);
}

/* Common prefix of name (prefix + ... + delimiter) or len 0 if none. */
static struct mg_str common_prefix(struct mg_str name, const struct meta_list_req *req)
{
    long at = find_delim(name, req->prefix.len, req->delimiter);
    if (at < 0)
        return (struct mg_str){NULL, 0};
    return (struct mg_str){name.base, (size_t)at + req->delimiter.len};
}

/* Seek to the first key after every key starting with (bucket, cp). */
static void seek_past(struct meta_store *ms, struct eng_iter *it, uint64_t bucket_id,
                      struct mg_str cp, struct mg_buf *tmp)
{
    tmp->len = 0;
    meta__key_object_past_prefix(tmp, bucket_id, cp);
    eng_iter_seek(it, tmp->base, tmp->len);
    atomic_fetch_add(&ms->list_steps, 1);
}

/* Where the scan starts: max(prefix, the smallest key > start_after); past the whole common
 * prefix when start_after itself rolls up (a V2 token that was a CommonPrefix). */
static void seek_start(struct meta_store *ms, struct eng_iter *it, uint64_t bucket_id,
                       const struct meta_list_req *req, struct mg_buf *tmp)
{
    struct mg_str sa = req->start_after, p = req->prefix;
    struct mg_str cp = has_prefix(sa, p) ? common_prefix(sa, req) : (struct mg_str){NULL, 0};
    if (cp.len > 0) {
        seek_past(ms, it, bucket_id, cp, tmp);
        return;
    }
    /* start_after + 0x00 > prefix? */
    int c = cmp_n(sa.base, p.base, sa.len < p.len ? sa.len : p.len);
    int after = sa.len > 0 && (c > 0 || (c == 0 && sa.len >= p.len));
    tmp->len = 0;
    if (after)
        meta__key_object_after(tmp, bucket_id, sa);
    else
        meta__key_object(tmp, bucket_id, p);
    eng_iter_seek(it, tmp->base, tmp->len);
    atomic_fetch_add(&ms->list_steps, 1);
}

struct list_acc {
    struct meta_object *objects;
    size_t nobjects, cap_objects;
    struct mg_str *prefixes;
    size_t nprefixes, cap_prefixes;
};

static void emit_prefix(struct list_acc *acc, struct mg_arena *a, struct mg_str cp)
{
    assert(cp.len > 0);
    if (acc->nprefixes == acc->cap_prefixes) {
        acc->cap_prefixes = acc->cap_prefixes ? acc->cap_prefixes * 2 : 16;
        acc->prefixes = mg_realloc(acc->prefixes, acc->cap_prefixes * sizeof(*acc->prefixes));
    }
    acc->prefixes[acc->nprefixes++] = (struct mg_str){mg_arena_dup(a, cp.base, cp.len), cp.len};
}

/* Append the entry; a corrupt one is logged and left out (one bad row must not make every
 * LIST of the bucket fail). */
static void emit_object(struct list_acc *acc, struct mg_arena *a, struct mg_str name,
                        const char *val, size_t vl, struct mg_str *last)
{
    struct meta_object o;
    if (meta__object_decode_summary(val, vl, a, &o) != 0) {
        mg_log(MG_LOG_ERROR, "event=corrupt_entry op=list key_len=%zu", name.len);
        return;
    }
    o.key = (struct mg_str){mg_arena_dup(a, name.base, name.len), name.len};
    if (acc->nobjects == acc->cap_objects) {
        acc->cap_objects = acc->cap_objects ? acc->cap_objects * 2 : 16;
        acc->objects = mg_realloc(acc->objects, acc->cap_objects * sizeof(*acc->objects));
    }
    acc->objects[acc->nobjects++] = o;
    *last = o.key;
}

/* Budget: at most max_keys (<= 1000) emitted items, each costing one next or one seek,
 * plus one start seek: O(max_keys) iterator steps whatever the number
 * of keys under the common prefixes. */
static void scan(struct meta_store *ms, struct eng_iter *it, uint64_t bucket_id,
                 const struct meta_list_req *req, struct mg_arena *a, struct list_acc *acc,
                 struct mg_str *last)
{
    struct mg_buf tmp;
    mg_buf_init(&tmp);
    seek_start(ms, it, bucket_id, req, &tmp);
    while (eng_iter_valid(it) && acc->nobjects + acc->nprefixes < req->max_keys) {
        size_t kl, vl;
        const char *key = eng_iter_key(it, &kl);
        uint64_t bid, parent;
        struct mg_str name = {NULL, 0};
        if (meta__key_object_decode(key, kl, &bid, &parent, &name) != 0)
            name.len = 0; /* over-long: skipped (logged by fsck) */
        struct mg_str cp = common_prefix(name, req);
        if (cp.len > 0) {
            emit_prefix(acc, a, cp);
            *last = acc->prefixes[acc->nprefixes - 1];
            seek_past(ms, it, bucket_id, cp, &tmp);
            continue;
        }
        if (name.len > 0) {
            const char *val = eng_iter_value(it, &vl);
            emit_object(acc, a, name, val, vl, last);
        }
        eng_iter_next(it);
        atomic_fetch_add(&ms->list_steps, 1);
    }
    mg_buf_close(&tmp);
}

int meta_object_list(struct meta_store *ms, struct mg_str bucket,
                     const struct meta_list_req *req_in, struct mg_arena *a,
                     struct meta_list_result *out)
{
    assert(req_in != NULL && out != NULL);
    struct meta_list_req clamped = *req_in, *req = &clamped;
    if (req->max_keys > META_LIST_MAX)
        req->max_keys = META_LIST_MAX;
    memset(out, 0, sizeof(*out));
    uint64_t bucket_id;
    int rv = meta__bucket_id(ms, bucket, &bucket_id);
    if (rv != 0)
        return rv;
    if (req->max_keys == 0)
        return 0;
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_object_range(bucket_id, req->prefix, &lo, &hi);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    struct list_acc acc = {0};
    struct mg_str last = {"", 0};
    scan(ms, it, bucket_id, req, a, &acc, &last);
    out->truncated = eng_iter_valid(it);
    rv = eng_iter_status(it);
    eng_iter_destroy(it);
    if (rv == 0) {
        out->objects = mg_arena_alloc(a, acc.nobjects * sizeof(*out->objects));
        if (acc.nobjects > 0)
            memcpy(out->objects, acc.objects, acc.nobjects * sizeof(*out->objects));
        out->nobjects = acc.nobjects;
        out->prefixes = mg_arena_alloc(a, acc.nprefixes * sizeof(*out->prefixes));
        if (acc.nprefixes > 0)
            memcpy(out->prefixes, acc.prefixes, acc.nprefixes * sizeof(*out->prefixes));
        out->nprefixes = acc.nprefixes;
        out->next_marker = last;
    } else {
        out->truncated = 0;
    }
    mg_free(acc.objects);
    mg_free(acc.prefixes);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return rv;
}
