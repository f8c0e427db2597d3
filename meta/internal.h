/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals shared by the op files (bucket.c, object.c, list.c, mpu.c,
 * data.c), the codecs (key.c, entry.c) and the unit tests: the store and its
 * one shard, the shard apply seam where a Raft proposal will slot in
 * (DESIGN.md 5, 6), the striped lock tables, key encoding (DESIGN.md 4) and
 * the versioned TLV entry codec. Nothing here is part of the public contract.
 */
#ifndef MG_META_INTERNAL_H
#define MG_META_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "meta/meta.h"
#include "meta/wset.h"

/* ------------------------------------------------------------ key schema
 *
 * One ordered keyspace in ENG_CF_META (ENG_CF_INDEX is no longer used). key.c builds every
 * key and every range bound; no other file writes key bytes. Integers are fixed-width
 * big-endian, so byte order is numeric order. The first byte says who owns the row:
 *
 *   0x01 · ...   node-local system rows, in no shard (never replicated):
 *     0x01 'V'                 -> metadata format version (u32, META_FORMAT_VERSION)
 *     0x01 'A' · shard-id u32  -> applied Raft index of that shard (u64)
 *     0x01 'N'                 -> number of data shards, fixed at creation (u32)
 *   0x02 · ...   shard 0, the manager:
 *     0x02 'B' · bucket-name   -> bucket record (META_REC_BUCKET)
 *     0x02 'S' · seq-name      -> last allocated value (u64); "bucket-id" = bucket ids
 *   0x03 · bucket-id u64 · table · ...   bucket data: one contiguous range per bucket, so a
 *   range shard holds whole buckets and a split cuts at 0x03 · id (DESIGN.md 4, 5):
 *     'A'                                       -> counters (META_REC_COUNTERS): the row
 *                                                  bucket create writes, the bucket's header
 *     'D' · due-ms u64 · key                    -> "" (lifecycle due-time index)
 *     'M' · parent-id u64 · name                -> object entry (parent 0: flat namespace)
 *     'T' · created-ms u64 · name               -> "" (time index)
 *     'U' · parent-id u64 · esc(name) · 00 01 · upload-id [· part u32]
 *                                               -> upload template / part
 *     'X' · segment u64 · offset u64            -> name (blob index: who owns an extent)
 *
 * Tables sort A < D < M < T < U < X inside a bucket; a bucket's rows sort before the next
 * id's. Range bounds are half-open [lo, hi).
 */

#define META_FORMAT_VERSION 2 /* 1: the pre-issue-7 layout (B·/M·/U·/S· and I· rows) */

#define META_K_SYS 0x01    /* node-local system rows */
#define META_K_SHARD0 0x02 /* the manager's rows */
#define META_K_DATA 0x03   /* bucket data */

#define META_SYS_VERSION 'V'
#define META_SYS_APPLIED 'A'
#define META_SYS_SHARDS 'N'
#define META_S0_BUCKET 'B'
#define META_S0_SEQ 'S'
#define META_SEQ_BUCKET_ID "bucket-id"

#define META_TBL_ATTR 'A'
#define META_TBL_DUE 'D'
#define META_TBL_META 'M'
#define META_TBL_TIME 'T'
#define META_TBL_UPLOAD 'U'
#define META_TBL_BLOB 'X'

#define META_BUCKET_KEY_LEN 9  /* 0x03 + bucket-id */
#define META_TABLE_KEY_LEN 10  /* 0x03 + bucket-id + table */
#define META_OBJ_PREFIX_LEN 18 /* 0x03 + bucket-id + 'M' + parent-id */
#define META_UPLOAD_ID_LEN 32  /* base64url of 24 random bytes */

/* Order-preserving escape of a variable-length component followed by another:
 * 0x00 -> 0x00 0xFF, then the terminator 0x00 0x01. */
void meta__esc_append(struct mg_buf *k, struct mg_str s);
/* The escaped bytes without the terminator: a byte prefix of the escape of every string that
 * starts with s (LIST of uploads by prefix). */
void meta__esc_append_open(struct mg_buf *k, struct mg_str s);
/* Decode an escaped component at p (up to len bytes) into out (appended). *used gets the
 * bytes consumed including the terminator. Returns 0 or MG_ECORRUPT. */
int meta__esc_decode(const char *p, size_t len, struct mg_buf *out, size_t *used);

void meta__put_u64(struct mg_buf *k, uint64_t v); /* big-endian */
void meta__put_u32(struct mg_buf *k, uint32_t v);
uint64_t meta__get_u64(const void *p);
uint32_t meta__get_u32(const void *p);

/* Builders append one key to k (callers reset k->len first when reusing a buffer). */
void meta__key_sys_version(struct mg_buf *k);
void meta__key_applied(struct mg_buf *k, uint32_t shard_id);
void meta__key_sys_shards(struct mg_buf *k);
void meta__key_bucket(struct mg_buf *k, struct mg_str name);
void meta__key_seq(struct mg_buf *k, struct mg_str name);
void meta__key_bucket_attr(struct mg_buf *k, uint64_t bucket_id);
void meta__key_due(struct mg_buf *k, uint64_t bucket_id, int64_t due_ms, struct mg_str key);
void meta__key_meta_prefix(struct mg_buf *k, uint64_t bucket_id, uint64_t parent_id);
void meta__key_object(struct mg_buf *k, uint64_t bucket_id, struct mg_str name);
/* The smallest object key greater than name's (LIST start-after). */
void meta__key_object_after(struct mg_buf *k, uint64_t bucket_id, struct mg_str name);
/* The smallest key greater than every object key whose name starts with prefix (LIST skips
 * a common prefix with one seek there). */
void meta__key_object_past_prefix(struct mg_buf *k, uint64_t bucket_id, struct mg_str prefix);
void meta__key_upload(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                      struct mg_str upload_id);
void meta__key_part(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                    struct mg_str upload_id, uint32_t number);
/* Past every upload of name (upload_id empty), or past the upload (name, upload_id) and its
 * parts (ListMultipartUploads key-marker / upload-id-marker). */
void meta__key_upload_after(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                            struct mg_str upload_id);
void meta__key_time_index(struct mg_buf *k, uint64_t bucket_id, int64_t created_ms,
                          struct mg_str name);
void meta__key_blob_index(struct mg_buf *k, uint64_t bucket_id, const struct eng_blob_ref *ref);
/* Smallest key greater than every key that has k as a prefix, in place: drop trailing 0xFF
 * bytes and increment the last. Returns 0, or -1 when none exists (k all 0xFF). */
int meta__key_successor(struct mg_buf *k);

/* Range bounds: set lo and hi (appended; callers pass empty buffers) to [lo, hi). */
void meta__key_shard0_range(struct mg_buf *lo, struct mg_buf *hi);      /* [0x02, 0x03) */
void meta__key_buckets_range(struct mg_buf *lo, struct mg_buf *hi);     /* every 0x02 'B' row */
void meta__key_data_range(struct mg_buf *lo, struct mg_buf *hi);        /* [0x03, 0x04) */
void meta__key_bucket_range(uint64_t bucket_id, struct mg_buf *lo, struct mg_buf *hi);
void meta__key_table_range(uint64_t bucket_id, char table, struct mg_buf *lo, struct mg_buf *hi);
/* Object rows whose name starts with prefix. */
void meta__key_object_range(uint64_t bucket_id, struct mg_str prefix, struct mg_buf *lo,
                            struct mg_buf *hi);
/* Upload rows (and their parts) whose object name starts with prefix. */
void meta__key_upload_range(uint64_t bucket_id, struct mg_str prefix, struct mg_buf *lo,
                            struct mg_buf *hi);
/* Parts of one upload numbered after `after` (0: all of them). */
void meta__key_part_range(uint64_t bucket_id, struct mg_str name, struct mg_str upload_id,
                          uint32_t after, struct mg_buf *lo, struct mg_buf *hi);

/* Decoders validate lengths, prefixes and escapes; they never assert on their input. */
/* The bucket id of any 0x03 key (a row or a bound of at least 0x03 · id). Returns 0 or
 * MG_ECORRUPT. */
int meta__key_bucket_of(const void *key, size_t len, uint64_t *bucket_id);
/* Parse 0x02 'B' · name. name points into key. Returns 0 or MG_ECORRUPT. */
int meta__key_bucket_decode(const void *key, size_t len, struct mg_str *name);
/* Parse 0x03 · bucket-id · 'M' · parent-id · name. name points into key. Returns 0 or
 * MG_ECORRUPT. */
int meta__key_object_decode(const void *key, size_t len, uint64_t *bucket_id, uint64_t *parent_id,
                            struct mg_str *name);
/* Parse 0x03 · bucket-id · 'U' · parent-id · esc(name) · 00 01 · upload-id [· part]. name is
 * appended to name_buf; *part = 0 for the upload row. Returns 0 or MG_ECORRUPT. */
int meta__key_upload_decode(const void *key, size_t len, uint64_t *bucket_id,
                            struct mg_buf *name_buf, struct mg_str *upload_id, uint32_t *part);
/* Parse 0x03 · bucket-id · 'D' · due-ms · key. key_out points into key. Returns 0 or
 * MG_ECORRUPT. */
int meta__key_due_decode(const void *key, size_t len, uint64_t *bucket_id, int64_t *due_ms,
                         struct mg_str *key_out);

/* ----------------------------------------------------------- entry codec */

/* Every value starts with kind, version; then TLV items (tag u8, len LEB128 <= 2^32-1,
 * value). Unknown tags are skipped (forward compatibility); a malformed value is
 * MG_ECORRUPT, never an assertion. */
enum meta_rec_kind {
    META_REC_OBJECT = 1,
    META_REC_UPLOAD = 2, /* the final object's template; mtime = initiated */
    META_REC_PART = 3,
    META_REC_BUCKET = 4,
    META_REC_COUNTERS = 5,
};
#define META_REC_VERSION 1

void meta__object_encode(const struct meta_object *o, enum meta_rec_kind kind, struct mg_buf *out);
/* Decode an object/upload entry; strings and arrays point into a from arena a. key is left
 * empty (it lives in the row key). Returns 0 or MG_ECORRUPT. */
int meta__object_decode(const void *v, size_t len, enum meta_rec_kind kind, struct mg_arena *a,
                        struct meta_object *o);
/* Only key-independent LIST fields: size, mtime, etag, owner, cksum_algo (data left empty);
 * and lc_due_ms for the lifecycle re-index.
 * Returns 0 or MG_ECORRUPT. */
int meta__object_decode_summary(const void *v, size_t len, struct mg_arena *a,
                                struct meta_object *o);
void meta__part_encode(const struct meta_part *p, struct mg_buf *out);
int meta__part_decode(const void *v, size_t len, struct mg_arena *a, struct meta_part *p);
void meta__bucket_encode(const struct meta_bucket *b, struct mg_buf *out);
int meta__bucket_decode(const void *v, size_t len, struct mg_arena *a, struct meta_bucket *b);
void meta__counters_encode(uint64_t objects, uint64_t bytes, struct mg_buf *out);

/* ----------------------------------------------------------------- store */


/* One shard: today the whole store on one engine with a local apply; with Raft, the group
 * whose commit applies the write set. */
struct meta_shard {
    struct eng_db *db;
    int sync; /* fsync the WAL on apply */
};

#define META_FREE_GRACE_MS_DEFAULT 30000 /* nonzero: retire through reader pins; 0 (tests): free at once */

#define META_BUCKET_CACHE_SLOTS 256

/* Bucket records by name, direct-mapped: every object op and the gateway's authorization
 * read B·name, so a hit saves a RocksDB point read per lookup. Coherence: a change bumps gen
 * and clears the slot (under the slot lock, after its apply); a miss fills the slot only if
 * gen did not move since before its read, so a record read before a change is never cached
 * after it. */
struct meta_bucket_cache {
    atomic_uint_fast64_t gen;
    struct meta_bucket_cache_slot {
        pthread_mutex_t lock;
        int valid;
        size_t name_len;
        char name[META_BUCKET_NAME_MAX];
        struct mg_buf value; /* the B·name row */
    } slots[META_BUCKET_CACHE_SLOTS];
};

struct meta_store {
    struct meta_opts opts;
    char *data_dir;
    struct eng_db *db;
    struct eng_blobstore *bs;        /* data.backend local (meta/data.h), else NULL */
    struct eng_rados *rados;         /* data.backend rados (engine/rados.h), else NULL */
    int blobs_shared;                /* a cluster's shared namespace: no foreach (meta/data.h) */
    struct meta_shard shard;
    atomic_uint_fast64_t list_steps; /* iterator seeks + nexts by LIST (tests assert bounds) */
    uint32_t free_grace_ms;          /* see meta_opts; tests set 0 for immediate frees */
    struct meta_bucket_cache buckets;
    struct meta__rt *rt;             /* the meta thread and its queues (meta/op.h), lazily */
};

/* Stop the meta thread (ops in flight finish first); no-op if it never started. */
void meta__rt_stop(struct meta_store *ms);

/* Inside an op body (meta/exec.c): add the rows of b to the op's write set, which the meta
 * thread proposes as one Raft entry per shard when the body returns 0 (docs/ops.md). Returns
 * 0. b is unchanged; the caller destroys it. */
int meta__shard_apply(struct meta_shard *s, struct meta_ws *b);

/* A write set of one row: put (k, v) into ENG_CF_META and apply. Closes k and v. Returns as
 * meta__shard_apply. */
int meta__apply_put(struct meta_store *ms, struct mg_buf *k, struct mg_buf *v);

struct meta_bucket_cache_slot *meta__bucket_slot(struct meta_store *ms, struct mg_str bucket);

int64_t meta__now_ms(void);
/* 0 for 1..META_KEY_MAX bytes, MG_EKEYTOOLONG above, MG_EINVALIDARGUMENT when empty. */
int meta__key_check(struct mg_str key);
/* Look up a bucket's id. Returns 0, MG_ENOSUCHBUCKET, MG_EIO, MG_ECORRUPT. */
int meta__bucket_id(struct meta_store *ms, struct mg_str name, uint64_t *id);

/* Read a row; *found = 0 if absent. Returns 0, MG_EIO. */
int meta__get(struct meta_store *ms, enum eng_cf cf, const struct mg_buf *key, struct mg_buf *val,
              int *found);

/* Index rows for an object's data (blob index; the time index is no longer written, store.c). */
void meta__index_put(struct meta_ws *b, uint64_t bucket_id, struct mg_str name,
                     const struct meta_object *o);
void meta__index_delete(struct meta_ws *b, uint64_t bucket_id, struct mg_str name,
                        const struct meta_object *o);
void meta__blob_index_put(struct meta_ws *b, uint64_t bucket_id, struct mg_str name,
                          const struct meta_data *d);
void meta__blob_index_delete(struct meta_ws *b, uint64_t bucket_id, const struct meta_data *d);

/* Free d's blobs after the grace period: data a committed op replaced or deleted, which a
 * reader may still be streaming. (meta_data_release frees at once: data never visible.) */
void meta__data_retire(struct meta_store *ms, const struct meta_data *d);

/* Copy [offset, offset + len) of d into a new data (blob or inline) streamed in bounded
 * chunks; md5_hex (33 bytes) gets the md5 of the copied bytes. Returns 0, MG_EIO, MG_ENOSPC,
 * MG_ECORRUPT. */
int meta__data_copy(struct meta_store *ms, const struct meta_data *src, uint64_t offset,
                    uint64_t len, struct mg_arena *a, struct meta_data *out, char md5_hex[33]);

/* Read the object entry at (bucket_id, key) into a; *found = 0 if absent. Returns 0, MG_EIO,
 * MG_ECORRUPT. */
int meta__object_read(struct meta_store *ms, uint64_t bucket_id, struct mg_str key,
                      struct mg_arena *a, struct meta_object *o, int *found);
/* Fetch (bucket, key) into src and copy its bytes [range_off, +range_len) (UINT64_MAX: to the
 * end) into copy. Returns 0, MG_ENOSUCHBUCKET, MG_ENOSUCHKEY, MG_EINVALIDRANGE, MG_EIO,
 * MG_ENOSPC, MG_ECORRUPT. */
int meta__source_range(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       uint64_t range_off, uint64_t range_len, struct mg_arena *a,
                       struct meta_object *src, struct meta_data *copy, char md5_hex[33]);
/* Strip one pair of surrounding double quotes. */
struct mg_str meta__unquote(struct mg_str s);

#endif
