/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bucket ops: name rules, create/get/delete/list/update. A bucket is the
 * shard-0 row 0x02 'B'·name (id, owner, created, acl, tags, lifecycle) plus
 * its counters row 0x03·id·'A' in its own data range (DESIGN.md 4: the
 * _attr_ row; meta/internal.h, "key schema"). Ids come from the 0x02
 * 'S'·"bucket-id" sequence and are never reused, so rows a deleted bucket
 * left behind can never be mistaken for a new bucket's. The mutating bodies
 * run one at a time on the meta thread (docs/ops.md): create writes the
 * attribute row (data shard) and the name (shard 0) as two entries, data
 * shard first; delete waits until no entry is in flight, checks emptiness on
 * committed state and removes both the same way. Object ops check the
 * attribute row, so no object can land in a bucket being deleted.
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "meta"
#include "lifecycle/lifecycle.h"
#include "meta/expire.h"

static int ends_with(struct mg_str s, const char *suffix)
{
    size_t n = strlen(suffix);
    return s.len >= n && memcmp(s.base + s.len - n, suffix, n) == 0;
}

static int starts_with(struct mg_str s, const char *prefix)
{
    size_t n = strlen(prefix);
    return s.len >= n && memcmp(s.base, prefix, n) == 0;
}

static int is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* "Bucket names must not be formatted as an IP address (for example, 192.168.5.4)." */
static int looks_like_ipv4(struct mg_str s)
{
    int dots = 0, digits = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (s.base[i] == '.') {
            if (digits == 0 || digits > 3)
                return 0;
            dots++;
            digits = 0;
        } else if (s.base[i] >= '0' && s.base[i] <= '9') {
            digits++;
        } else {
            return 0;
        }
    }
    return dots == 3 && digits >= 1 && digits <= 3;
}

static int str_is(struct mg_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.base, lit, n) == 0;
}

/* S3 general purpose bucket naming rules (S3 User Guide, "Bucket naming rules"), and
 * MG_ERESERVEDBUCKET (InvalidBucketName) for the two names of the operational endpoints. */
int meta_bucket_name_check(struct mg_str name)
{
    static const char *bad_prefix[] = {"xn--", "sthree-", "amzn-s3-demo-"};
    static const char *bad_suffix[] = {"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"};
    if (name.len < 3 || name.len > META_BUCKET_NAME_MAX)
        return MG_EINVALIDBUCKETNAME;
    for (size_t i = 0; i < name.len; i++) {
        char c = name.base[i];
        int alnum = is_lower_alnum(c);
        if (!alnum && c != '.' && c != '-')
            return MG_EINVALIDBUCKETNAME;
        if ((i == 0 || i == name.len - 1) && !alnum)
            return MG_EINVALIDBUCKETNAME;
        /* "..", and ".-" / "-." which break virtual-host addressing */
        char prev = i > 0 ? name.base[i - 1] : 'a';
        if (!alnum && !is_lower_alnum(prev) && (c == '.' || prev == '.'))
            return MG_EINVALIDBUCKETNAME;
    }
    for (size_t i = 0; i < sizeof(bad_prefix) / sizeof(bad_prefix[0]); i++)
        if (starts_with(name, bad_prefix[i]))
            return MG_EINVALIDBUCKETNAME;
    for (size_t i = 0; i < sizeof(bad_suffix) / sizeof(bad_suffix[0]); i++)
        if (ends_with(name, bad_suffix[i]))
            return MG_EINVALIDBUCKETNAME;
    /* An intended difference from AWS (tests/conformance/intended.json): "health" and "metrics"
     * are valid S3 names, but path-style "/health" and "/metrics" are metagate's operational
     * endpoints, which deploy scripts and monitors call unsigned, so such a bucket would be
     * shadowed (issue 9 "Names", report.md M13). Refused with their own message. */
    if (str_is(name, "health") || str_is(name, "metrics"))
        return MG_ERESERVEDBUCKET;
    return looks_like_ipv4(name) ? MG_EINVALIDBUCKETNAME : 0;
}

static int slot_matches(const struct meta_bucket_cache_slot *s, struct mg_str name)
{
    return s->valid && s->name_len == name.len && memcmp(s->name, name.base, name.len) == 0;
}

/* The bucket record row into v, from the cache or the engine. *found = 0 if absent. */
static int read_bucket_row(struct meta_store *ms, struct mg_str name, struct mg_buf *v, int *found)
{
    if (meta__exec_active()) {
        /* An op body: the overlay may hold a pending change the cache cannot know of, so
         * read through meta__get and leave the cache alone (apply invalidates it). */
        struct mg_buf k;
        mg_buf_init(&k);
        meta__key_bucket(&k, name);
        int rv = meta__get(ms, ENG_CF_META, &k, v, found);
        mg_buf_close(&k);
        return rv;
    }
    struct meta_bucket_cache_slot *s = meta__bucket_slot(ms, name);
    pthread_mutex_lock(&s->lock);
    *found = slot_matches(s, name);
    if (*found)
        mg_buf_append(v, s->value.base, s->value.len);
    pthread_mutex_unlock(&s->lock);
    if (*found || name.len > META_BUCKET_NAME_MAX) /* no such name passes create */
        return 0;
    uint64_t gen = atomic_load(&ms->buckets.gen);
    struct mg_buf k;
    mg_buf_init(&k);
    meta__key_bucket(&k, name);
    int rv = meta__get(ms, ENG_CF_META, &k, v, found);
    mg_buf_close(&k);
    if (rv != 0 || !*found)
        return rv;
    pthread_mutex_lock(&s->lock);
    if (atomic_load(&ms->buckets.gen) == gen) {
        s->valid = 1;
        s->name_len = name.len;
        memcpy(s->name, name.base, name.len);
        s->value.len = 0;
        mg_buf_append(&s->value, v->base, v->len);
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int meta_bucket_get(struct meta_store *ms, struct mg_str name, struct mg_arena *a,
                    struct meta_bucket *out)
{
    struct mg_buf v;
    int found;
    mg_buf_init(&v);
    int rv = read_bucket_row(ms, name, &v, &found);
    if (rv == 0 && !found)
        rv = MG_ENOSUCHBUCKET;
    if (rv == 0)
        rv = meta__bucket_decode(v.base, v.len, a, out);
    if (rv == 0)
        out->name = (struct mg_str){mg_arena_dup(a, name.base, name.len), name.len};
    if (rv == MG_ECORRUPT)
        mg_log(MG_LOG_ERROR, "event=corrupt_bucket_record bucket=%.*s", (int)name.len, name.base);
    mg_buf_close(&v);
    return rv;
}

/* Next bucket id: the "bucket-id" sequence counts the buckets ever created (n), and the
 * n-th gets an id in data shard n mod shards (meta__shards_bucket_id), so buckets spread
 * over the data shards; ids are never reused. The new count is written by the caller's
 * write set; op bodies run one at a time on the meta thread and see pending counts in the
 * overlay, so no two creates get the same id. */
static int next_bucket_id(struct meta_store *ms, struct meta_ws *b, uint64_t *id)
{
    struct mg_buf k, v;
    int found;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_seq(&k, (struct mg_str){META_SEQ_BUCKET_ID, sizeof(META_SEQ_BUCKET_ID) - 1});
    int rv = meta__get(ms, ENG_CF_META, &k, &v, &found);
    if (rv == 0 && found && v.len != 8)
        rv = MG_ECORRUPT;
    if (rv == 0) {
        uint64_t n = found ? meta__get_u64(v.base) : 0;
        *id = meta__shards_bucket_id(ms->rt->shards, n);
        v.len = 0;
        meta__put_u64(&v, n + 1);
        meta__ws_put(b, k.base, k.len, v.base, v.len);
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

static int create_locked(struct meta_store *ms, struct mg_str name, struct mg_str owner,
                         enum meta_acl acl)
{
    struct mg_arena a;
    struct meta_bucket old;
    mg_arena_init(&a);
    int rv = meta_bucket_get(ms, name, &a, &old);
    if (rv == 0) {
        int same = old.owner.len == owner.len && memcmp(old.owner.base, owner.base, owner.len) == 0;
        mg_arena_close(&a);
        return same ? MG_EBUCKETOWNED : MG_EBUCKETEXISTS;
    }
    mg_arena_close(&a);
    if (rv != MG_ENOSUCHBUCKET)
        return rv;

    struct meta_ws *b = meta__ws_create();
    struct meta_bucket rec = {.name = name, .owner = owner, .acl = acl};
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    rv = next_bucket_id(ms, b, &rec.id);
    if (rv == 0) {
        rec.created_ms = meta__now_ms();
        meta__key_bucket(&k, name);
        meta__bucket_encode(&rec, &v);
        meta__ws_put(b, k.base, k.len, v.base, v.len);
        k.len = v.len = 0;
        meta__key_bucket_attr(&k, rec.id);
        meta__counters_encode(0, 0, &v);
        meta__ws_put(b, k.base, k.len, v.base, v.len);
        rv = meta__shard_apply(&ms->shard, b);
    }
    if (rv == 0)
        mg_log(MG_LOG_INFO, "event=bucket_create bucket=%.*s id=%llu", (int)name.len, name.base,
               (unsigned long long)rec.id);
    mg_buf_close(&k);
    mg_buf_close(&v);
    meta__ws_destroy(b);
    return rv;
}

int meta__do_bucket_create(struct meta_store *ms, struct mg_str name, struct mg_str owner,
                           enum meta_acl acl)
{
    int rv = meta_bucket_name_check(name);
    if (rv != 0)
        return rv;
    return create_locked(ms, name, owner, acl);
}

/* Any row in bucket id's table? Bounded: reads at most 1. */
static int table_has_rows(struct meta_store *ms, uint64_t id, char table, int *any)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_table_range(id, table, &lo, &hi);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    *any = eng_iter_valid(it);
    int rv = eng_iter_status(it);
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    return rv;
}

/* "BucketNotEmpty: The bucket you tried to delete is not empty": objects (any parent) or
 * in-progress multipart uploads. */
static int bucket_is_empty(struct meta_store *ms, uint64_t id, int *empty)
{
    int any = 0;
    int rv = table_has_rows(ms, id, META_TBL_META, &any);
    if (rv == 0 && !any)
        rv = table_has_rows(ms, id, META_TBL_UPLOAD, &any);
    *empty = !any;
    return rv;
}

static int delete_locked(struct meta_store *ms, struct mg_str name)
{
    uint64_t id;
    int empty = 0;
    int rv = meta__bucket_id(ms, name, &id);
    if (rv == 0)
        rv = bucket_is_empty(ms, id, &empty);
    if (rv != 0)
        return rv;
    if (!empty)
        return MG_EBUCKETNOTEMPTY;
    struct meta_ws *b = meta__ws_create();
    struct mg_buf k;
    mg_buf_init(&k);
    meta__key_bucket(&k, name);
    meta__ws_delete(b, k.base, k.len);
    k.len = 0;
    meta__key_bucket_attr(&k, id);
    meta__ws_delete(b, k.base, k.len);
    rv = meta__shard_apply(&ms->shard, b);
    if (rv == 0)
        mg_log(MG_LOG_INFO, "event=bucket_delete bucket=%.*s id=%llu", (int)name.len, name.base,
               (unsigned long long)id);
    mg_buf_close(&k);
    meta__ws_destroy(b);
    return rv;
}

int meta__do_bucket_delete(struct meta_store *ms, struct mg_str name)
{
    return delete_locked(ms, name);
}

int meta_bucket_list(struct meta_store *ms, struct mg_str owner, struct mg_arena *a,
                     struct meta_bucket **out, size_t *n)
{
    size_t cap = 16, cnt = 0;
    struct meta_bucket *v = mg_malloc(cap * sizeof(*v));
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_buckets_range(&lo, &hi);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    int rv = 0;
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl, vl;
        const char *key = eng_iter_key(it, &kl);
        const char *val = eng_iter_value(it, &vl);
        struct meta_bucket bk;
        struct mg_str name;
        if (meta__key_bucket_decode(key, kl, &name) != 0 ||
            meta__bucket_decode(val, vl, a, &bk) != 0) {
            mg_log(MG_LOG_ERROR, "event=corrupt_bucket_record key_len=%zu", kl);
            continue; /* one bad row must not hide every other bucket */
        }
        if (owner.len &&
            (bk.owner.len != owner.len || memcmp(bk.owner.base, owner.base, owner.len) != 0))
            continue;
        bk.name = (struct mg_str){mg_arena_dup(a, name.base, name.len), name.len};
        if (cnt == cap)
            v = mg_realloc(v, (cap *= 2) * sizeof(*v));
        v[cnt++] = bk;
    }
    rv = eng_iter_status(it);
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    *out = mg_arena_alloc(a, cnt * sizeof(**out));
    if (cnt)
        memcpy(*out, v, cnt * sizeof(*v));
    *n = rv == 0 ? cnt : 0;
    mg_free(v);
    return rv;
}

/* SET_LIFECYCLE: the XML and its compiled rules, compiled here from the XML (a caller's
 * lifecycle_bin is not used: the async path does not copy it at submit, and the bytes must
 * be the ones this XML gives), and a new rules generation (existing objects are re-indexed
 * against it in the background: lifecycle/scheduler.c). */
static int set_lifecycle(struct meta_bucket *cur, const struct meta_bucket *values,
                         struct mg_arena *a)
{
    cur->lifecycle = values->lifecycle;
    cur->lifecycle_bin = (struct mg_str){NULL, 0};
    cur->lc_gen++;
    if (values->lifecycle.len == 0)
        return 0;
    struct lc_config cfg;
    struct mg_buf bin;
    char errmsg[LC_ERRMSG_LEN];
    int rv = lc_config_parse(values->lifecycle, a, &cfg, errmsg);
    if (rv != 0) {
        /* The gateway validates before it stores (S3's errors are its to give); a caller that
         * stores XML no parser accepts gets it kept as is, with no rules enforced. */
        mg_log(MG_LOG_WARN, "event=lifecycle_not_compiled err=%s msg=\"%s\"", mg_err_name(rv),
               errmsg);
        return 0;
    }
    mg_buf_init(&bin);
    lc_config_compile(&cfg, &bin);
    cur->lifecycle_bin = (struct mg_str){mg_arena_dup(a, bin.base, bin.len), bin.len};
    mg_buf_close(&bin);
    return 0;
}

static int update_locked(struct meta_store *ms, struct mg_str name, unsigned mask,
                         const struct meta_bucket *values)
{
    struct mg_arena a;
    struct meta_bucket cur;
    mg_arena_init(&a);
    int rv = meta_bucket_get(ms, name, &a, &cur);
    if (rv != 0) {
        mg_arena_close(&a);
        return rv;
    }
    if (mask & META_BUCKET_SET_ACL)
        cur.acl = values->acl;
    if (mask & META_BUCKET_SET_TAGS) {
        cur.tags = values->tags;
        cur.ntags = values->ntags;
    }
    if ((mask & META_BUCKET_SET_LIFECYCLE) && (rv = set_lifecycle(&cur, values, &a)) != 0) {
        mg_arena_close(&a);
        return rv;
    }
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_bucket(&k, name);
    meta__bucket_encode(&cur, &v);
    rv = meta__apply_put(ms, &k, &v);
    if (rv == 0 && (mask & META_BUCKET_SET_LIFECYCLE))
        meta__lc_rules_changed(cur.id);
    mg_arena_close(&a);
    return rv;
}

int meta__do_bucket_update(struct meta_store *ms, struct mg_str name, unsigned mask,
                           const struct meta_bucket *values)
{
    assert(values != NULL || mask == 0);
    return update_locked(ms, name, mask, values);
}
