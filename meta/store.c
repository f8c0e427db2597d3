/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The embedded single-shard store: opens the engine (RocksDB in data_dir/db,
 * blobs in data_dir/blobs), owns the bounded lock tables that serialize
 * read-modify-write ops, and the shard apply seam. Every op reads current
 * state, builds ONE engine batch and calls meta__shard_apply; today that is a
 * local commit with the RocksDB WAL fsynced (issue 2), later a Raft proposal
 * whose commit applies the same batch (DESIGN.md 5, 6). Also the index-row
 * helpers every writing op shares, and meta_stats_get.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MG_MODULE "meta"
#include "common/fs.h"
#include "meta/data.h"
#include "meta/expire.h"
#include "meta/op.h"
#include "meta/orphan.h"

int meta__apply_put(struct meta_store *ms, struct mg_buf *k, struct mg_buf *v)
{
    struct meta_ws *b = meta__ws_create();
    meta__ws_put(b, k->base, k->len, v->base, v->len);
    int rv = meta__shard_apply(&ms->shard, b);
    meta__ws_destroy(b);
    mg_buf_close(k);
    mg_buf_close(v);
    return rv;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

struct meta_bucket_cache_slot *meta__bucket_slot(struct meta_store *ms, struct mg_str bucket)
{
    uint64_t h = fnv1a(14695981039346656037ull, bucket.base, bucket.len);
    return &ms->buckets.slots[(h >> 8) % META_BUCKET_CACHE_SLOTS];
}

int64_t meta__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int meta__key_check(struct mg_str key)
{
    if (key.len == 0)
        return MG_EINVALIDARGUMENT;
    return key.len > META_KEY_MAX ? MG_EKEYTOOLONG : 0;
}

int meta__get(struct meta_store *ms, enum eng_cf cf, const struct mg_buf *key, struct mg_buf *val,
              int *found)
{
    /* An op body on the meta thread sees the pending-write overlay first (docs/ops.md). */
    if (meta__exec_get(ms, key->base, key->len, val, found) == 0)
        return 0;
    val->len = 0;
    int rv = eng_get(ms->db, cf, key->base, key->len, val);
    *found = rv == 0;
    return rv == MG_ENOTFOUND ? 0 : rv;
}

/* Inside an op body: the bucket is alive while its attribute row exists (overlay first):
 * DeleteBucket removes that row in its first entry, before the name goes. */
static int attr_alive(struct meta_store *ms, uint64_t id)
{
    struct mg_buf k, v;
    int found = 0;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_bucket_attr(&k, id);
    int rv = meta__get(ms, ENG_CF_META, &k, &v, &found);
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv != 0 ? rv : found ? 0 : MG_ENOSUCHBUCKET;
}

int meta__bucket_id(struct meta_store *ms, struct mg_str name, uint64_t *id)
{
    /* An op body with the id its gateway already looked up (one lookup per request). */
    uint64_t hint = meta__exec_bucket_hint(name);
    if (hint != 0) {
        int rv = attr_alive(ms, hint);
        if (rv == 0)
            *id = hint;
        return rv;
    }
    struct mg_arena a;
    struct meta_bucket b;
    mg_arena_init(&a);
    int rv = meta_bucket_get(ms, name, &a, &b);
    if (rv == 0 && meta__exec_active())
        rv = attr_alive(ms, b.id);
    if (rv == 0)
        *id = b.id;
    mg_arena_close(&a);
    return rv;
}

/* ------------------------------------------------------------ index rows */

void meta__blob_index_put(struct meta_ws *b, uint64_t bucket_id, struct mg_str name,
                          const struct meta_data *d)
{
    struct mg_buf k;
    mg_buf_init(&k);
    for (size_t i = 0; i < d->nextents; i++) {
        k.len = 0;
        meta__key_blob_index(&k, bucket_id, &d->extents[i].ref);
        meta__ws_put(b, k.base, k.len, name.base, name.len);
    }
    mg_buf_close(&k);
}

void meta__blob_index_delete(struct meta_ws *b, uint64_t bucket_id, const struct meta_data *d)
{
    struct mg_buf k;
    mg_buf_init(&k);
    for (size_t i = 0; i < d->nextents; i++) {
        k.len = 0;
        meta__key_blob_index(&k, bucket_id, &d->extents[i].ref);
        meta__ws_delete(b, k.base, k.len);
    }
    mg_buf_close(&k);
}

/* The time index (0x03·id·'T'·mtime·key) is no longer written: nothing read it (lifecycle
 * uses the due index, expire.c), and each row cost every PUT a write and every delete or
 * expiry a tombstone. Rows an older binary wrote are inert: nothing reads or deletes them. */
void meta__index_put(struct meta_ws *b, uint64_t bucket_id, struct mg_str name,
                     const struct meta_object *o)
{
    meta__blob_index_put(b, bucket_id, name, &o->data);
}

void meta__index_delete(struct meta_ws *b, uint64_t bucket_id, struct mg_str name,
                        const struct meta_object *o)
{
    (void)name;
    meta__blob_index_delete(b, bucket_id, &o->data);
}

/* ------------------------------------------------------------ open/close */

/* Any row at all in ENG_CF_META? */
static int db_has_rows(struct eng_db *db, int *any)
{
    struct eng_iter *it = eng_iter_create(db, ENG_CF_META, NULL, 0, NULL, 0);
    *any = eng_iter_valid(it);
    int rv = eng_iter_status(it);
    eng_iter_destroy(it);
    return rv;
}

/* The metadata format (the 0x01 'V' row): written on a fresh DB; a DB with rows but no
 * version row (format 1 predates it) or another version is refused, since this binary
 * would misread its keys. Returns 0, MG_EIO, MG_ENOSPC, MG_ECORRUPT (errmsg set). */
static int format_check(struct meta_store *ms, char *errmsg)
{
    struct mg_buf k, v;
    int found = 0, any = 0;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_sys_version(&k);
    int rv = meta__get(ms, ENG_CF_META, &k, &v, &found);
    if (rv == 0 && !found)
        rv = db_has_rows(ms->db, &any);
    if (rv != 0) {
        snprintf(errmsg, 256, "data directory %s: reading the metadata format: %s", ms->data_dir,
                 mg_err_name(rv));
    } else if (found && (v.len != 4 || meta__get_u32(v.base) != META_FORMAT_VERSION)) {
        rv = MG_ECORRUPT;
        if (v.len == 4)
            snprintf(errmsg, 256,
                     "data directory %s holds metadata format %u; this metagate needs format %u "
                     "(start with an empty data_dir)",
                     ms->data_dir, meta__get_u32(v.base), META_FORMAT_VERSION);
        else
            snprintf(errmsg, 256, "data directory %s: corrupt metadata format row (%zu bytes)",
                     ms->data_dir, v.len);
    } else if (!found && any) {
        rv = MG_ECORRUPT;
        snprintf(errmsg, 256,
                 "data directory %s holds metadata format 1; this metagate needs format %u "
                 "(start with an empty data_dir)",
                 ms->data_dir, META_FORMAT_VERSION);
    } else if (!found) {
        /* A node-local row, written before any raft group exists: committed and flushed
         * directly (the WAL is off). */
        v.len = 0;
        meta__put_u32(&v, META_FORMAT_VERSION);
        struct eng_batch *b = eng_batch_create();
        eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
        rv = eng_batch_commit(ms->db, b, 0);
        eng_batch_destroy(b);
        if (rv == 0)
            rv = eng_db_flush(ms->db);
        if (rv != 0)
            snprintf(errmsg, 256, "data directory %s: writing the metadata format: %s",
                     ms->data_dir, mg_err_name(rv));
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
    return rv;
}

static int mkdir_p1(const char *dir, char *errmsg)
{
    if (mkdir(dir, 0755) == 0 || errno == EEXIST)
        return 0;
    int rv = mg_err_from_errno(errno);
    snprintf(errmsg, 256, "mkdir %s: %s", dir, strerror(errno));
    return rv;
}

static void locks_init(struct meta_store *ms)
{
    atomic_init(&ms->buckets.gen, 0);
    for (size_t i = 0; i < META_BUCKET_CACHE_SLOTS; i++) {
        pthread_mutex_init(&ms->buckets.slots[i].lock, NULL);
        mg_buf_init(&ms->buckets.slots[i].value);
    }
}

static void locks_destroy(struct meta_store *ms)
{
    for (size_t i = 0; i < META_BUCKET_CACHE_SLOTS; i++) {
        pthread_mutex_destroy(&ms->buckets.slots[i].lock);
        mg_buf_close(&ms->buckets.slots[i].value);
    }
}

int meta_store_open(const struct meta_opts *opts, struct meta_store **out, char *errmsg)
{
    assert(opts != NULL && opts->data_dir != NULL && out != NULL && errmsg != NULL);
    errmsg[0] = '\0';
    struct meta_store *ms = mg_calloc(1, sizeof(*ms));
    ms->opts = *opts;
    ms->data_dir = mg_strndup(opts->data_dir, strlen(opts->data_dir));
    ms->opts.data_dir = ms->data_dir;
    char path[4096];
    int rv = mkdir_p1(ms->data_dir, errmsg);
    if (rv != 0)
        goto err_after_alloc;
    snprintf(path, sizeof(path), "%s/db", ms->data_dir);
    /* The Raft log is the WAL (DESIGN.md 6): RocksDB's own is off, and the flusher reports
     * what RocksDB holds on disk as each group's durable index (meta/shard.c). */
    struct eng_db_opts dbo = {.wal = 0, .block_cache_bytes = 0, .compaction = opts->compaction};
    dbo.tracker.range_len = meta__lc_tracker_range_len; /* due/time index rows (expire.c) */
    /* The flusher-hold test switch means no RocksDB flush at all while running; the delete
     * tracker's CompactRange would flush the memtable it overlaps, so it is off too. */
    if (opts->flusher_hold)
        dbo.compaction = ENG_COMPACTION_ROCKSDB;
    if ((rv = eng_db_open(path, &dbo, &ms->db, errmsg)) != 0)
        goto err_after_alloc;
    ms->shard.db = ms->db;
    ms->shard.sync = 0;
    if ((rv = format_check(ms, errmsg)) != 0)
        goto err_after_db;
    if ((rv = meta__blobs_open(ms, errmsg)) != 0) /* data.backend (meta/data.h) */
        goto err_after_db;
    locks_init(ms);
    atomic_init(&ms->list_steps, 0);
    ms->free_grace_ms = opts->free_grace_ms ? opts->free_grace_ms : META_FREE_GRACE_MS_DEFAULT;
    /* db/ and blobs/ (and data_dir itself) are new directory entries: durable only once their
     * parents are fsynced (common/fs.h). */
    if ((rv = mg_fsync_dir(ms->data_dir)) != 0 || (rv = mg_fsync_parent(ms->data_dir)) != 0) {
        snprintf(errmsg, 256, "fsync of %s: %s", ms->data_dir, mg_err_name(rv));
        goto err_after_blobs;
    }
    if ((rv = meta__rt_start(ms, errmsg)) != 0)
        goto err_after_blobs;
    meta_orphan_start(ms, opts->orphan); /* after the log replay: intents and index are complete */
    mg_log(MG_LOG_INFO, "event=meta_open dir=%s rocksdb_wal=off inline_max=%u", ms->data_dir,
           opts->inline_max_bytes);
    *out = ms;
    return 0;

err_after_blobs:
    locks_destroy(ms);
    meta__blobs_close(ms);
err_after_db:
    eng_db_close(ms->db);
err_after_alloc:
    mg_log(MG_LOG_ERROR, "event=meta_open_failed dir=%s err=%s msg=\"%s\"", opts->data_dir,
           mg_err_name(rv), errmsg);
    mg_free(ms->data_dir);
    mg_free(ms);
    assert(rv != 0);
    return rv;
}

void meta_store_close(struct meta_store *ms)
{
    if (ms == NULL)
        return;
    meta_orphan_stop(ms);
    meta__rt_stop(ms);
    meta__blobs_close(ms);
    eng_db_close(ms->db);
    locks_destroy(ms);
    mg_free(ms->data_dir);
    mg_free(ms);
}

void meta_stats_get(struct meta_store *ms, struct meta_stats *out)
{
    memset(out, 0, sizeof(*out));
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_buckets_range(&lo, &hi);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it))
        out->buckets++;
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    out->rocksdb_estimate_keys = eng_db_property_int(ms->db, "rocksdb.estimate-num-keys");
    out->rocksdb_sst_bytes = eng_db_property_int(ms->db, "rocksdb.total-sst-files-size");
    out->rocksdb_memtable_bytes = eng_db_property_int(ms->db, "rocksdb.cur-size-all-mem-tables");
    meta__blobs_stats(ms, &out->blobs);
    eng_db_stats_get(ms->db, &out->db);
}
