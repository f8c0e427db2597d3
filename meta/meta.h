/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/: the metadata service. Clients of this layer issue typed operations
 * (DESIGN.md 5), never generic reads and writes. Each op reads the shard's
 * current state, produces a write set (one engine batch) and hands it to the
 * shard, which applies it: today a local apply with the RocksDB WAL on
 * (issue 2); next, a Raft proposal (raft/, DESIGN.md 6) whose commit applies
 * the same write set — so ops and engine stay unchanged when Raft slots in.
 * Key schema: DESIGN.md 4 (flat buckets: parent-id 0, name = whole key).
 *
 * Object bytes: the gateway streams them into a struct meta_data_writer (the
 * blob store, or inline in the entry under the configured threshold) and
 * passes the resulting struct meta_data to the put op; the op commits the
 * metadata only after the data is durable, and frees the data of whatever it
 * replaced. A failed op frees the new data: never a half-visible object.
 *
 * Results are allocated from the caller's arena (struct mg_arena) and die
 * with it. All functions are thread-safe (read-modify-write ops serialize on
 * a per-key lock inside the shard). Errors are enum mg_err values.
 * Every write op blocks until its write set is durable (WAL fsync, group
 * committed across threads; about 2-4 ms here) and data writers fsync in
 * finish: call them off an event loop (DESIGN.md 5a). Reads do not block on
 * fsync.
 */
#ifndef MG_META_H
#define MG_META_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "engine/engine.h"

#include <uv.h>

#define META_KEY_MAX 1024       /* S3 key length limit, bytes */
#define META_BUCKET_NAME_MAX 63
#define META_PART_MAX 10000
#define META_PART_MIN_BYTES (5u << 20) /* every part but the last (EntityTooSmall) */
#define META_LIST_MAX 1000      /* larger max_keys / max uploads / max parts are clamped to it */

enum meta_acl {
    META_ACL_PRIVATE,
    META_ACL_PUBLIC_READ,
    META_ACL_PUBLIC_READ_WRITE,
    META_ACL_AUTHENTICATED_READ,
};

/* data.backend "rados" (issue 10; engine/rados.h): object bytes above inline_max_bytes go to
 * a Ceph RADOS pool instead of the local blob store. */
struct meta_rados_opts {
    const char *conf; /* ceph.conf path */
    const char *pool; /* pool name */
    const char *user; /* client name without "client." */
    const char *nspace; /* RADOS namespace of every object (NULL: the pool's default). The
                           orphan collector and fsck walk the whole namespace: one store (or
                           one cluster) per namespace */
};

/* A cluster (issue 10): every node of it, this one included, with its addresses
 * ("HOST:PORT"). The same list on every node. */
struct meta_cluster_node {
    uint64_t id;      /* > 0, unique; the node's raft id in every group */
    const char *s3;   /* S3 listen address */
    const char *raft; /* raft host address */
    const char *rpc;  /* internal RPC address (meta/rpc.h) */
};
struct meta_cluster_opts {
    uint64_t node_id;                      /* this node */
    const struct meta_cluster_node *nodes; /* n entries */
    unsigned n;
    uint64_t split_keys, split_bytes;      /* a data shard past either splits (0: never) */
};

struct meta_opts {
    const char *data_dir;       /* engine lives in data_dir/db and data_dir/blobs */
    int wal;                    /* ignored: the Raft log is the WAL, RocksDB's is off */
    uint32_t inline_max_bytes;  /* objects up to this size live inside their entry */
    uint32_t free_grace_ms;     /* ignored but for 0/nonzero, a name left from the 30 s clock that
                                   reader pins replaced: replaced or deleted blobs are retired
                                   and freed by the blob store once no reader pins them (tests
                                   set ms->free_grace_ms = 0 to free at once outside op bodies) */
    const char *raft_listen;    /* "a.b.c.d:port" of the raft host (one port for every shard's
                                   group); NULL: 127.0.0.1 on a free port */
    unsigned initial_shards;    /* data shards of a new store (0: 1); the bucket id space is
                                   split into equal ranges, buckets spread over them */
    enum eng_compaction compaction; /* engine.compaction ablation switch (default: locality) */
    uint32_t lc_day_seconds;    /* lifecycle.day_seconds: one lifecycle "day" (0: 86400) */
    int lc_delete_point;        /* lifecycle.delete = point (1): expire-batch never uses a range
                                   tombstone (ablation); 0: range where the guard allows */
    int flusher_hold;           /* test switch: never flush RocksDB while running (flusher held,
                                   delete tracker off: its CompactRange flushes the memtable),
                                   so every acknowledged write replays from the Raft log after
                                   kill -9 */
    const struct meta_orphan_opts *orphan; /* the orphan collector (meta/orphan.h); NULL: the
                                   MG_ORPHAN_PERIOD_MS / MG_ORPHAN_GRACE_MS environment (test
                                   knobs), else its defaults */
    const struct meta_rados_opts *rados; /* NULL: data.backend "local" (data_dir/blobs) */
    const struct meta_cluster_opts *cluster; /* NULL: one node (every group has one voter);
                                   else a cluster member (needs rados). Borrowed until
                                   meta_store_open returns (copy what outlives it) */
};

struct meta_store;
struct meta_orphan_opts;

/* Open the embedded single-shard store. errmsg (>= 256 bytes). Returns 0, MG_EIO, MG_ECORRUPT. */
int meta_store_open(const struct meta_opts *opts, struct meta_store **out, char *errmsg);
void meta_store_close(struct meta_store *ms);

/* Name/value pair (user metadata x-amz-meta-*, tags). */
struct meta_kv {
    struct mg_str k;
    struct mg_str v;
};

/* ------------------------------------------------------------------ buckets */

struct meta_bucket {
    struct mg_str name;
    uint64_t id;
    struct mg_str owner;     /* user name */
    int64_t created_ms;
    enum meta_acl acl;
    struct meta_kv *tags;
    size_t ntags;
    struct mg_str lifecycle; /* lifecycle configuration XML as stored, empty if none */
    struct mg_str lifecycle_bin; /* its compiled form (lifecycle/lifecycle.h lc_config_compile),
                                    empty if none */
    uint64_t lc_gen;         /* rules generation: bumped by every SET_LIFECYCLE (read only) */
};

/* S3 bucket naming rules (3-63 chars, lower case, digits, '.', '-', no IP form, ...).
 * Returns 0 or MG_EINVALIDBUCKETNAME. */
int meta_bucket_name_check(struct mg_str name);

/* Returns 0, MG_EBUCKETOWNED (same owner: the gateway answers 200 as us-east-1 does),
 * MG_EBUCKETEXISTS, MG_EINVALIDBUCKETNAME, MG_EIO. */
int meta_bucket_create(struct meta_store *ms, struct mg_str name, struct mg_str owner,
                       enum meta_acl acl);
/* Returns 0, MG_ENOSUCHBUCKET, MG_EIO. */
int meta_bucket_get(struct meta_store *ms, struct mg_str name, struct mg_arena *a,
                    struct meta_bucket *out);
/* Returns 0, MG_ENOSUCHBUCKET, MG_EBUCKETNOTEMPTY (objects or in-progress uploads), MG_EIO. */
int meta_bucket_delete(struct meta_store *ms, struct mg_str name);
/* Buckets owned by owner (all when owner.len == 0), by name. */
int meta_bucket_list(struct meta_store *ms, struct mg_str owner, struct mg_arena *a,
                     struct meta_bucket **out, size_t *n);

/* Field updates; which fields by mask. Returns 0, MG_ENOSUCHBUCKET, MG_EIO.
 * META_BUCKET_SET_LIFECYCLE sets lifecycle (empty: delete) and lifecycle_bin, which the op
 * compiles from it (values->lifecycle_bin is ignored), and bumps lc_gen. XML lc_config_parse
 * refuses is kept with no rules: validating is the gateway's job. */
enum { META_BUCKET_SET_ACL = 1, META_BUCKET_SET_TAGS = 2, META_BUCKET_SET_LIFECYCLE = 4 };
int meta_bucket_update(struct meta_store *ms, struct mg_str name, unsigned mask,
                       const struct meta_bucket *values);

/* ------------------------------------------------------------ object data */

/* One contiguous piece of an object's bytes. */
struct meta_extent {
    struct eng_blob_ref ref;
};

/* The bytes of an object (or part): inline, or a list of extents (one per part after a
 * multipart complete). */
struct meta_data {
    uint64_t size;
    struct mg_str inline_data;   /* when non-empty or size == 0: the bytes themselves */
    struct meta_extent *extents; /* else: in order */
    size_t nextents;
};

struct meta_data_writer;
/* Start writing an object's bytes; size_hint 0 = unknown. */
int meta_data_writer_create(struct meta_store *ms, uint64_t size_hint,
                            struct meta_data_writer **out);
/* Returns 0, MG_EIO, MG_ENOSPC (poisoned: only abort). Bounded memory (inline threshold). */
int meta_data_writer_append(struct meta_data_writer *w, const void *data, size_t len);
/* Durable (fsync) before return; fills out from arena; frees w. Returns 0, MG_EIO, MG_ENOSPC. */
int meta_data_writer_finish(struct meta_data_writer *w, struct mg_arena *a, struct meta_data *out);
void meta_data_writer_abort(struct meta_data_writer *w);
/* Free data that no op took ownership of (e.g. the request failed after finish). */
void meta_data_release(struct meta_store *ms, const struct meta_data *d);

/* Reader pins (engine/engine.h eng_blob_pin): a GET that streams d's blobs pins them first,
 * then re-reads the entry to check it still references them (else unpin and retry), and
 * unpins when done: a pinned blob is never freed, however long the read takes. Returns 0 or
 * MG_ESLOWDOWN (too many pins). Inline data needs no pin. Thread-safe. */
int meta_data_pin(struct meta_store *ms, const struct meta_data *d);
void meta_data_unpin(struct meta_store *ms, const struct meta_data *d);
/* 1 when reading d's bytes may wait on the network (a blob of data.backend rados): such reads
 * never run on an event loop, however small. 0 for inline data and local blobs. */
int meta_data_remote(const struct meta_data *d);
/* Read len bytes at offset of the object's bytes into buf. Returns 0, MG_EIO, MG_ECORRUPT. */
int meta_data_read(struct meta_store *ms, const struct meta_data *d, uint64_t offset, void *buf,
                   size_t len);

/* ------------------------------------------------------------------ objects */

struct meta_part_info { /* for GetObjectAttributes ObjectParts and GET ?partNumber */
    uint32_t number;
    uint64_t size;
    struct mg_str checksum; /* base64, may be empty */
};

struct meta_object {
    struct mg_str key;
    uint64_t size;
    int64_t mtime_ms;
    struct mg_str etag;               /* without quotes: hex md5, or hex-N for multipart */
    struct mg_str content_type;       /* empty: not set */
    struct mg_str content_encoding;
    struct mg_str cache_control;
    struct mg_str content_disposition;
    struct mg_str content_language;
    struct mg_str expires;
    struct meta_kv *user_meta;        /* x-amz-meta-* with the prefix removed, lower-case names */
    size_t nuser_meta;
    struct meta_kv *tags;
    size_t ntags;
    enum meta_acl acl;
    struct mg_str owner;
    enum mg_cksum_algo cksum_algo;    /* MG_CKSUM_NONE if none */
    struct mg_str cksum_value;        /* base64 ("...-N" composite form for multipart) */
    struct meta_part_info *parts;     /* multipart only */
    size_t nparts;
    struct meta_data data;
    int64_t lc_due_ms;                /* set by meta: the object's lifecycle due row (0: none) */
    uint64_t lc_gen;                  /* set by meta: rules generation lc_due_ms came from */
    struct mg_str upload_id;          /* set by meta: the multipart upload this object completed
                                         (a retried CompleteMultipartUpload answers 200) */
};

/* Preconditions on the destination of a write (conditional PUT). */
struct meta_put_cond {
    int if_none_match_any;      /* If-None-Match: * -> MG_EPRECONDITION if the key exists */
    struct mg_str if_match;     /* non-empty: etag must equal (unquoted) or MG_EPRECONDITION
                                   (MG_ENOSUCHKEY if absent) */
};

/* Store obj at (bucket, obj->key), replacing any existing object (whose data is then freed).
 * Takes ownership of obj->data in all cases (released on failure). mtime is set by the op.
 * Returns 0, MG_ENOSUCHBUCKET, MG_EKEYTOOLONG, MG_EPRECONDITION, MG_ENOSUCHKEY, MG_EIO,
 * MG_ENOSPC. */
int meta_object_put(struct meta_store *ms, struct mg_str bucket, const struct meta_object *obj,
                    const struct meta_put_cond *cond);
/* Returns 0, MG_ENOSUCHBUCKET, MG_ENOSUCHKEY, MG_EIO, MG_ECORRUPT (entry failed validation;
 * LIST leaves such an entry out, delete and put replace it). */
int meta_object_get(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                    struct mg_arena *a, struct meta_object *out);
/* meta_object_get with the object's blobs pinned (the pin-then-recheck above); the caller
 * unpins with meta_data_unpin(ms, &out->data) when its read is done. Errors as
 * meta_object_get, plus MG_ESLOWDOWN. */
int meta_object_get_pinned(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           struct mg_arena *a, struct meta_object *out);

/* Idempotent: 0 whether or not the key existed. Returns 0, MG_ENOSUCHBUCKET, MG_EIO.
 * existed (may be NULL) tells which. */
int meta_object_delete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       int *existed);

/* DeleteObjects: delete up to META_DELETE_MANY_MAX keys in ONE write set (one fsync instead of
 * one per key). Idempotent per key; duplicates and impossible keys (empty, too long) are
 * fine. existed (may be NULL; n entries) tells which existed. Returns 0, MG_ENOSUCHBUCKET,
 * MG_EINVALIDARGUMENT (n > META_DELETE_MANY_MAX), MG_EIO, MG_ENOSPC (nothing deleted). */
#define META_DELETE_MANY_MAX 1000
int meta_object_delete_many(struct meta_store *ms, struct mg_str bucket, const struct mg_str *keys,
                            size_t n, int *existed);

enum { META_OBJECT_SET_TAGS = 1, META_OBJECT_SET_ACL = 2 };
/* Update tags/acl in place (no data change, mtime unchanged). Returns 0, MG_ENOSUCHBUCKET,
 * MG_ENOSUCHKEY, MG_EIO. */
int meta_object_update(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       unsigned mask, const struct meta_object *values);

/* Copy: the destination gets a fresh copy of the source bytes (streamed in bounded chunks)
 * and the attributes in dst (key, headers, user meta, tags, acl: the caller applies the
 * COPY/REPLACE directive); dst->data, size, etag and checksum are taken from the source
 * (etag recomputed as the md5 of the bytes when the source is multipart). range_* selects a
 * byte range (UploadPartCopy); range_len = UINT64_MAX means whole object. The result
 * (etag, mtime, size) is returned in out. */
int meta_object_copy(struct meta_store *ms, struct mg_str src_bucket, struct mg_str src_key,
                     struct mg_str dst_bucket, const struct meta_object *dst, struct mg_arena *a,
                     struct meta_object *out);

/* LIST (V1 and V2 share it). Keys > start_after (and >= prefix), with prefix; when delimiter
 * is non-empty, keys containing it after the prefix roll up into common prefixes, and the
 * scan seeks past each common prefix in one step instead of reading its keys. Up to
 * max_keys entries + prefixes in total. next_marker is the last key or prefix returned
 * (for V1 NextMarker and V2 continuation tokens). */
struct meta_list_req {
    struct mg_str prefix;
    struct mg_str delimiter;
    struct mg_str start_after; /* exclusive */
    uint32_t max_keys;         /* 0..1000 */
};
struct meta_list_result {
    struct meta_object *objects; /* key, size, mtime_ms, etag, owner, checksum algo set */
    size_t nobjects;
    struct mg_str *prefixes;
    size_t nprefixes;
    int truncated;
    struct mg_str next_marker;
};
int meta_object_list(struct meta_store *ms, struct mg_str bucket, const struct meta_list_req *req,
                     struct mg_arena *a, struct meta_list_result *out);

/* Copy with an explicit byte range: [range_off, range_off + range_len) of the source
 * (range_len = UINT64_MAX: to the end). meta_object_copy is this with the whole object. A
 * partial copy gets the md5 of the copied bytes as its etag and no checksum. Returns 0,
 * MG_ENOSUCHBUCKET (either bucket), MG_ENOSUCHKEY (source), MG_EINVALIDRANGE,
 * MG_EKEYTOOLONG, MG_EIO, MG_ENOSPC, MG_ECORRUPT. */
int meta_object_copy_range(struct meta_store *ms, struct mg_str src_bucket, struct mg_str src_key,
                           uint64_t range_off, uint64_t range_len, struct mg_str dst_bucket,
                           const struct meta_object *dst, struct mg_arena *a,
                           struct meta_object *out);

/* ---------------------------------------------------------------- multipart */

/* Create an upload; tmpl carries the attributes of the final object (key, headers, user
 * meta, tags, acl, cksum_algo). upload_id (base64url-safe, NUL-terminated) from arena.
 * Returns 0, MG_ENOSUCHBUCKET, MG_EKEYTOOLONG, MG_EIO. */
int meta_mpu_create(struct meta_store *ms, struct mg_str bucket, const struct meta_object *tmpl,
                    struct mg_arena *a, struct mg_str *upload_id);

struct meta_part {
    uint32_t number;
    uint64_t size;
    int64_t mtime_ms;
    struct mg_str etag;      /* hex md5, unquoted */
    struct mg_str checksum;  /* base64 of the upload's algorithm, may be empty */
    struct meta_data data;
};

/* Store part (takes ownership of part->data; replaces and frees an earlier same-numbered
 * part). Returns 0, MG_ENOSUCHUPLOAD, MG_EINVALIDARGUMENT (number outside 1..10000), MG_EIO. */
int meta_mpu_put_part(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                      struct mg_str upload_id, const struct meta_part *part);

/* UploadPartCopy: copy [range_off, range_off + range_len) of (src_bucket, src_key)
 * (range_len = UINT64_MAX: to the end) into part `number` of the upload, streamed in bounded
 * chunks. out (from arena) is the stored part: etag = hex md5 of the copied bytes, size,
 * mtime. Returns 0, MG_ENOSUCHBUCKET, MG_ENOSUCHKEY (source), MG_EINVALIDRANGE,
 * MG_ENOSUCHUPLOAD, MG_EINVALIDARGUMENT (number), MG_EIO, MG_ENOSPC. */
int meta_mpu_put_part_copy(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           struct mg_str upload_id, uint32_t number, struct mg_str src_bucket,
                           struct mg_str src_key, uint64_t range_off, uint64_t range_len,
                           struct mg_arena *a, struct meta_part *out);

/* Complete with the client's list (number + etag, checksum optional). Validates: ascending
 * numbers (MG_EINVALIDPARTORDER), each part exists with that etag (MG_EINVALIDPART), every
 * part but the last >= 5 MiB (MG_EENTITYTOOSMALL). Builds the object (ETag = hex(md5 of the
 * parts' binary md5s) + "-N"), frees unlisted parts, removes the upload. out from arena.
 * Returns 0, MG_ENOSUCHUPLOAD, the above, MG_EIO. */
int meta_mpu_complete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                      struct mg_str upload_id, const struct meta_part *parts, size_t nparts,
                      struct mg_arena *a, struct meta_object *out);
/* Frees every part. Returns 0, MG_ENOSUCHUPLOAD, MG_EIO. */
int meta_mpu_abort(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                   struct mg_str upload_id);

/* Upload's template object (for ListParts owner/storage, checksum algo). */
int meta_mpu_get(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                 struct mg_str upload_id, struct mg_arena *a, struct meta_object *tmpl);

/* Parts with number > marker, up to max. */
int meta_mpu_list_parts(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                        struct mg_str upload_id, uint32_t marker, uint32_t max,
                        struct mg_arena *a, struct meta_part **out, size_t *n, int *truncated);

struct meta_upload {
    struct mg_str key;
    struct mg_str upload_id;
    int64_t initiated_ms;
    struct mg_str owner;
};
/* In-progress uploads with key > key_marker (or == key_marker and id > upload_id_marker),
 * with prefix, up to max. */
int meta_mpu_list(struct meta_store *ms, struct mg_str bucket, struct mg_str prefix,
                  struct mg_str key_marker, struct mg_str upload_id_marker, uint32_t max,
                  struct mg_arena *a, struct meta_upload **out, size_t *n, int *truncated);


/* --------------------------------------------------------- asynchronous ops
 *
 * The op path (DESIGN.md 5, 5a; docs/ops.md). Every mutation is a struct meta_op handed
 * to the store's meta thread (the thread that owns the raft host) through a bounded
 * queue plus uv_async_t. There it executes against committed state plus the shard's
 * proposed-but-uncommitted writes (the pending-write overlay), proposes ONE Raft entry
 * with its write set, and when that entry commits the op's done callback runs on the
 * submitting client's loop (a second bounded queue plus uv_async_t). No mutex is held
 * across a commit; ops on one key pipeline.
 *
 * Arguments are deep-copied into the op at submit, so the caller's strings may die right
 * after meta_op_submit returns (an h2o request whose client went away). Results (below)
 * are allocated from the op and live until meta_op_destroy.
 *
 * The blocking functions above (meta_object_put, meta_bucket_create, ...) are thin
 * wrappers that submit an op and wait: call them from threads that may block (worker
 * threads, tests, tools), never from an event loop.
 */

/* ---------------------------------------------------------------- lifecycle
 *
 * Enforcement (issue 8; docs/ops.md "Lifecycle"): when an object is written or re-tagged and
 * an enabled Expiration rule of its bucket matches, its due row 0x03·id·'D'·due-ms·key rides
 * in the same write set and the entry records due-ms (meta_object.lc_due_ms). The scheduler
 * (lifecycle/lifecycle.h lc_scheduler_create) walks due rows up to now and submits
 * expire-batch ops; rule changes reach existing objects through re-index ops walking the
 * bucket. Both ops keep their progress in the bucket's 0x03·id·'L' row. */

#define META_EXPIRE_BATCH_MAX 4096 /* range deletes keep such a batch's Raft entry small */

/* One due row the scheduler read, and the entry it indexes. */
struct meta_expire_item {
    struct mg_str key;
    int64_t due_ms;   /* the row's due time */
    int64_t mtime_ms; /* the entry's mtime when the row was read: a later write never expires */
};

struct meta_expire_result {
    uint32_t expired;        /* entries deleted */
    uint32_t stale;          /* rows dropped: entry gone, overwritten, or no rule matches now */
    uint32_t rescheduled;    /* rows moved: a rule still matches but is not due yet */
    uint32_t range_deletes;  /* range tombstones written (each over >= 2 entries) */
    uint32_t point_deletes;  /* entries deleted one by one */
    uint32_t reindexed;      /* LC_REINDEX: entries visited */
    int reindex_done;        /* LC_REINDEX: the walk reached the end of the bucket */
    int reindex_busy;        /* LC_REINDEX: writes in flight in the step's range: retry later */
};

/* The bucket's lifecycle progress (its 0x03·id·'L' row), read from committed state. */
struct meta_lc_progress {
    int64_t sched_due_ms;      /* the scheduler's cursor: due rows before (due, key) are done */
    struct mg_str sched_key;
    uint64_t sched_epoch;      /* bumped when a write puts a due row behind the cursor (a Date
                                  rule in the past, a re-tag): the cursor moved back to it */
    uint64_t reindex_gen;      /* rules generation the re-index walk applies */
    int reindex_done;          /* it visited every entry */
    struct mg_str reindex_key; /* last entry it visited (exclusive start of the next step) */
};
/* Returns 0 (all zero when the row is absent), MG_EIO, MG_ECORRUPT. Any thread. */
int meta_lc_progress_get(struct meta_store *ms, uint64_t bucket_id, struct mg_arena *a,
                         struct meta_lc_progress *out);

/* Blocking: expire the items (one bucket, key order of their due rows) re-checking each
 * under the op's own serialization: the entry must still have mtime_ms, and the current
 * rules must still expire it at or before now; else its row is only dropped (or moved when a
 * rule matches later). Consecutive expiring entries are deleted with one range tombstone when
 * nothing else lives in between (committed rows and pending writes), unless
 * meta_opts.lc_delete_point. The scheduler's cursor moves past the last item unless its epoch
 * is no longer the scan's (epoch, from meta_lc_due_scan). now_ms 0: the clock. Returns 0, MG_ENOSUCHBUCKET, MG_EINVALIDARGUMENT (n > META_EXPIRE_BATCH_MAX), MG_EIO,
 * MG_ENOSPC, MG_ESHUTDOWN. Not from an event loop. */
int meta_lc_expire_batch(struct meta_store *ms, struct mg_str bucket,
                         const struct meta_expire_item *items, size_t n, int64_t now_ms,
                         uint64_t epoch, struct meta_expire_result *out);
/* Blocking: one step of the bucket's re-index walk: up to n entries after the persisted
 * position get their due row recomputed with the current rules (a new generation restarts
 * the walk). Returns as above. */
int meta_lc_reindex_step(struct meta_store *ms, struct mg_str bucket, size_t n,
                         struct meta_expire_result *out);
/* As meta_lc_reindex_step, and an entry the current rules make due at or before
 * expire_now_ms (0: none) is expired by the step itself, with expire-batch's checks and
 * guarded range deletes, instead of getting a due row, up to expire_max of them (out->expired,
 * range_deletes, point_deletes count them): a rule set on a bucket full of old objects then
 * costs one read of each entry. The caller paces them as expiries (the scheduler does this
 * only without lifecycle.max_per_second). Returns as above. */
int meta_lc_reindex_expire_step(struct meta_store *ms, struct mg_str bucket, size_t n,
                                int64_t expire_now_ms, size_t expire_max,
                                struct meta_expire_result *out);

/* The scheduler's read: up to max due rows of bucket_id with due <= now_ms, in key order from
 * the persisted cursor (meta_lc_progress.sched_*), each with its entry's mtime (0 when the
 * entry is gone), from committed state. items (max entries) and keys from a. *oldest_due_ms
 * gets the first row's due time (0 when none is due); *epoch the cursor's epoch (pass it to
 * meta_lc_expire_batch). Returns 0, MG_EIO, MG_ECORRUPT. Any
 * thread that may block. */
int meta_lc_due_scan(struct meta_store *ms, uint64_t bucket_id, int64_t now_ms, size_t max,
                     struct mg_arena *a, struct meta_expire_item *items, size_t *n,
                     int64_t *oldest_due_ms, uint64_t *epoch);

/* Back-pressure for background work: ops queued for the meta thread plus entries in flight.
 * Cheap (one lock, racy read of the in-flight count); any thread. */
uint64_t meta_lc_load(struct meta_store *ms);

struct meta_lifecycle_stats {
    uint64_t expired;          /* entries expired since open */
    uint64_t range_deletes;    /* range tombstones written */
    uint64_t point_deletes;    /* entries expired by point deletes */
    uint64_t stale;            /* due rows dropped or moved without a delete */
    uint64_t reindexed;        /* entries re-indexed since open */
    uint64_t due_backlog;      /* due rows <= now at the scheduler's last pass */
    int64_t due_oldest_age_ms; /* now - the oldest due row's time then; 0 when none was due */
    uint64_t reindex_pending;  /* buckets whose re-index walk is not done */
};
/* Counters since meta_store_open. Any thread. */
void meta_lifecycle_stats_get(struct meta_store *ms, struct meta_lifecycle_stats *out);
/* The scheduler reports its backlog figures (lifecycle/scheduler.c). Any thread. */
void meta_lifecycle_stats_backlog(struct meta_store *ms, uint64_t due_backlog,
                                  int64_t due_oldest_age_ms, uint64_t reindex_pending);

enum meta_op_type {
    META_OP_BUCKET_CREATE,     /* bucket, owner, acl */
    META_OP_BUCKET_DELETE,     /* bucket */
    META_OP_BUCKET_UPDATE,     /* bucket, mask, bucket_values */
    META_OP_OBJECT_PUT,        /* bucket, object (+data: ownership passes to the op), cond */
    META_OP_OBJECT_DELETE,     /* bucket, key -> existed */
    META_OP_OBJECT_DELETE_MANY,/* bucket, keys/nkeys -> existed_many */
    META_OP_OBJECT_UPDATE,     /* bucket, key, mask, object (tags / acl) */
    META_OP_MPU_CREATE,        /* bucket, object (template) -> upload_id */
    META_OP_MPU_PUT_PART,      /* bucket, key, upload_id, part (+data: ownership passes) */
    META_OP_MPU_COMPLETE,      /* bucket, key, upload_id, parts/nparts -> object */
    META_OP_MPU_ABORT,         /* bucket, key, upload_id */
    META_OP_EXPIRE_BATCH,      /* bucket, expire/nexpire, now_ms -> expire (lifecycle) */
    META_OP_LC_REINDEX,        /* bucket, nexpire (entries to visit) -> expire (lifecycle) */
    META_OP__COUNT
};

struct meta_op;
struct meta_client;
typedef void (*meta_op_cb)(struct meta_op *op);

struct meta_op {
    enum meta_op_type type;
    void *data;     /* caller's */
    int status;     /* in done: 0 or an mg_err (as the blocking function returns) */

    /* Arguments (set before submit; borrowed until submit returns, then copied). */
    struct {
        struct mg_str bucket;               /* name */
        uint64_t bucket_id;                 /* 0: look the name up (the gateway passes the id
                                               it authorized with: one lookup per request) */
        struct mg_str key;
        struct mg_str owner;                /* BUCKET_CREATE */
        enum meta_acl acl;                  /* BUCKET_CREATE */
        unsigned mask;                      /* BUCKET_UPDATE, OBJECT_UPDATE */
        struct meta_bucket bucket_values;   /* BUCKET_UPDATE */
        struct meta_object object;          /* OBJECT_PUT, OBJECT_UPDATE, MPU_CREATE */
        int has_cond;
        struct meta_put_cond cond;          /* OBJECT_PUT (has_cond) */
        const struct mg_str *keys;          /* OBJECT_DELETE_MANY */
        size_t nkeys;
        struct mg_str upload_id;            /* MPU_* */
        struct meta_part part;              /* MPU_PUT_PART */
        const struct meta_part *parts;      /* MPU_COMPLETE */
        size_t nparts;
        uint64_t request_id;                /* 0: a fresh one; a retry of the same id returns
                                               the first result (DESIGN.md 6) */
        const struct meta_expire_item *expire; /* EXPIRE_BATCH (copied at submit) */
        size_t nexpire;                     /* EXPIRE_BATCH: <= META_EXPIRE_BATCH_MAX items;
                                               LC_REINDEX: entries to visit (<= the same) */
        int64_t now_ms;                     /* EXPIRE_BATCH: "now" for the re-check (0: clock);
                                               LC_REINDEX: expire what is due by then (0: no) */
        uint64_t lc_epoch;                  /* EXPIRE_BATCH: the cursor epoch of the scan;
                                               LC_REINDEX: at most this many expired */
    } in;

    /* Results (valid in done, until meta_op_destroy). */
    struct {
        int existed;                 /* OBJECT_DELETE */
        int *existed_many;           /* OBJECT_DELETE_MANY: nkeys entries */
        struct mg_str upload_id;     /* MPU_CREATE */
        struct meta_object object;   /* MPU_COMPLETE: the object; OBJECT_PUT: mtime, etag */
        struct meta_expire_result expire; /* EXPIRE_BATCH, LC_REINDEX */
    } out;

    /* private */
    struct meta__op_priv *priv;
};

/* Allocate a zeroed op of type t (aborts on OOM). */
struct meta_op *meta_op_create(enum meta_op_type t);
/* Free an op and its results. Not while it is submitted (between submit returning 0 and
 * its done callback). */
void meta_op_destroy(struct meta_op *op);

/* A reply endpoint on one libuv loop: ops submitted through it have done called on that
 * loop's thread. Create and destroy on the loop thread. Destroy only when none of its
 * ops is outstanding (their done already ran); it closes a uv handle, so the loop must run
 * once more before it is freed. */
int meta_client_create(struct meta_store *ms, uv_loop_t *loop, struct meta_client **out);
void meta_client_destroy(struct meta_client *c);

/* Hand op to the meta thread. Returns 0: done(op) runs exactly once, later, on c's loop
 * (never inside this call). Errors (done never runs): MG_ESLOWDOWN (the bounded queue is
 * full: answer 503 SlowDown), MG_ESHUTDOWN (store closing). On an error the op still owns
 * nothing of the caller's: for PUT/PUT_PART the caller releases the data itself
 * (meta_data_release). Callable from any thread holding c's loop (the loop thread). */
int meta_op_submit(struct meta_client *c, struct meta_op *op, meta_op_cb done);

/* Cluster read fence (issue 10): NULL on a single node (its reads need none). In a cluster, a
 * private op to submit like any other (meta_op_submit; destroy it after done): when done
 * runs with status 0, reads of committed state on this node (meta_bucket_get,
 * meta_object_get, LIST, ...) of shard 0 and of bucket's shard (bucket.len 0: shard 0
 * only) reflect every write acknowledged anywhere before this call; else MG_ESLOWDOWN (no
 * leader confirmed within the router's deadline) or MG_ESHUTDOWN. */
struct meta_op *meta_read_fence_create(struct meta_store *ms, struct mg_str bucket);
/* 1 when ms is a cluster member (its local reads need a fence first), else 0. Any thread. */
int meta_store_clustered(const struct meta_store *ms);

/* Per-queue and per-group figures for /metrics (see meta_stats). */

/* ------------------------------------------------------------------- stats */

struct meta_stats {
    uint64_t buckets;
    uint64_t rocksdb_estimate_keys;
    uint64_t rocksdb_sst_bytes;
    uint64_t rocksdb_memtable_bytes;
    struct eng_blob_stats blobs;
    struct eng_db_stats db; /* tombstones per column family, the delete tracker's work */
};
/* Fill out. Walks the bucket rows and the live SST list: for a metrics scrape, not per
 * request. Any thread. */
void meta_stats_get(struct meta_store *ms, struct meta_stats *out);

/* The op path's figures for /metrics (docs/ops.md): the handoff queue and, per shard, its
 * raft group. Sampled on the meta thread every META_OP_STATS_PERIOD_MS; meta_op_stats_get
 * copies the last sample (any thread). Counters count since the store opened. */
#define META_OP_STATS_PERIOD_MS 500
#define META_OP_STATS_SHARDS_MAX 64
#define META_LATENCY_BUCKETS 11
/* Upper bounds (microseconds) of the commit-latency buckets; the last bucket is above them. */
extern const uint64_t meta_latency_bounds_us[META_LATENCY_BUCKETS - 1];

struct meta_shard_stats {
    uint32_t shard_id;           /* 0: the manager; data shards 1.. */
    int leader;                  /* this node leads the shard's group and it is ready */
    uint64_t proposals;          /* counter: entries proposed */
    uint64_t inflight;           /* gauge: entries submitted to libraft, not yet applied */
    uint64_t queued;             /* gauge: entries waiting for the in-flight wave */
    uint64_t commits;            /* counter: entries committed and applied */
    uint64_t refused_nospace;    /* counter: refused by disk-full admission (507) */
    uint64_t latency_bucket[META_LATENCY_BUCKETS]; /* counter per bucket (not cumulative):
                                    propose -> apply of committed entries */
    uint64_t latency_count;
    uint64_t latency_sum_us;
    uint64_t applied_index;      /* gauge */
    uint64_t durable_index;      /* gauge: flushed to RocksDB; applied - durable replays */
    uint64_t last_index;         /* gauge: last index in the log */
    uint64_t log_bytes;          /* gauge: the group's log on disk */
    uint64_t leader_id;          /* gauge: the leader this node knows of (0: none) */
    char voters[64];             /* cluster: the group's voters "a,b,c" ("": unknown) */
    char standbys[64];           /* cluster: its standbys (non-voting replicas) */
};

struct meta_op_stats {
    uint64_t submitted;          /* counter: ops handed to the meta thread */
    uint64_t slowdowns;          /* counter: submissions refused, queue full (503 SlowDown) */
    uint64_t queue_depth;        /* gauge: ops waiting for the meta thread */
    uint64_t parked;             /* gauge: ops waiting for nothing to be in flight */
    uint64_t overlay_rows;       /* gauge: pending-write overlay rows */
    uint64_t dedup_hits;         /* counter: retried request ids answered with the first result */
    uint64_t flushes;            /* counter: RocksDB flushes by the flusher */
    uint64_t installs;           /* counter: shard checkpoints installed from a peer */
    unsigned nshards;
    struct meta_shard_stats shards[META_OP_STATS_SHARDS_MAX];
};
void meta_op_stats_get(struct meta_store *ms, struct meta_op_stats *out);

/* A cluster's map for /metrics (issue 10; `metagate admin shards|nodes` reads it): every
 * node, the manager's node rows, and per shard its bucket-id range, epoch, replicas, known
 * leader, rows and bytes (counted now, at most 1,000,000 rows per shard). Appends nothing on
 * a single node. Any thread; costs a range walk per shard, for a scrape, not per request. */
void meta_cluster_render(struct meta_store *ms, struct mg_buf *out);

#endif
