/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/: local storage under one data directory. Two parts:
 *  - the KV store: one RocksDB instance (C API) with column families per
 *    table family (DESIGN.md 4, 8), ordered byte keys, atomic write batches;
 *  - the blob store: object bytes in append-only segment files with a
 *    checksummed record header, fsync group-commit before a write is
 *    acknowledged, space reclaimed after delete (hole punching, and whole
 *    segments unlinked once empty).
 * RocksDB errptr strings and errno are translated to enum mg_err here and
 * nowhere else. All functions are thread-safe unless noted.
 */
#ifndef MG_ENGINE_H
#define MG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* ------------------------------------------------------------- KV store */

enum eng_cf {
    ENG_CF_DEFAULT, /* unused by meta; RocksDB requires it */
    ENG_CF_META,    /* B· buckets, M· entries, U· multipart uploads */
    ENG_CF_INDEX,   /* I· secondary indexes (time index, blob index) */
    ENG_CF__COUNT
};

/* How deleted rows get compacted away (the engine.compaction ablation switch, DESIGN.md 10). */
enum eng_compaction {
    ENG_COMPACTION_LOCALITY,          /* default: the delete tracker, no collector */
    ENG_COMPACTION_ROCKSDB,           /* stock level compaction only */
    ENG_COMPACTION_ROCKSDB_COLLECTOR, /* stock + CompactOnDeletionCollector on the meta CF */
};

/* The config spelling of engine.compaction: "locality", "rocksdb", "rocksdb+collector".
 * eng_compaction_parse returns 0 or MG_EINVALIDARGUMENT (out untouched). */
int eng_compaction_parse(const char *s, size_t len, enum eng_compaction *out);
const char *eng_compaction_name(enum eng_compaction c);

/* How many leading bytes of key (of column family cf) name the delete tracker's range for it;
 * more than 48 counts as 48. The layout owner (meta/key.c) knows which bytes cluster: for
 * 0x03 · bucket · 'M' · parent · name, the 18-byte prefix plus a few name bytes; for due rows
 * 0x03 · bucket · 'D' · due-ms · key, the 10-byte prefix plus the top bytes of due-ms. Called on
 * the committing thread under the tracker's lock, once per delete: pure and fast, no engine
 * calls. */
typedef size_t (*eng_tracker_range_cb)(enum eng_cf cf, const void *key, size_t len, void *arg);

/* The delete tracker's knobs (ENG_COMPACTION_LOCALITY; engine/tracker.c has the design). A
 * range is the set of keys of one CF sharing their first range_len() (or prefix_len) bytes.
 * Every field left 0 takes its default. */
struct eng_tracker_opts {
    uint32_t prefix_len;          /* key bytes naming a range (default 22, at most 48) */
    eng_tracker_range_cb range_len; /* per-key range length instead of prefix_len, or NULL */
    void *range_arg;                /* passed to range_len */
    uint32_t ranges_max;          /* ranges tracked at once (default 1024) */
    uint32_t window_ms;           /* sliding window for the count trigger (default 10000) */
    uint32_t trigger_deletes;     /* deletes in the window that trigger (default 4096) */
    uint32_t age_ms;              /* oldest uncompacted delete this old triggers... (5000) */
    uint32_t age_min_deletes;     /* ...with at least this many behind it (default 256) */
    uint32_t range_delete_weight; /* one delete_range counts as this many deletes (256) */
    uint32_t compactions_per_sec_max; /* tracker compactions started per second (default 4) */
    uint64_t bytes_per_sec_max; /* SST bytes they may write per second (default 64 MiB) */
};

struct eng_db_opts {
    int wal;                  /* 1: RocksDB WAL on (until Raft is the WAL) */
    size_t block_cache_bytes; /* 0: default */
    enum eng_compaction compaction; /* default (0): ENG_COMPACTION_LOCALITY */
    struct eng_tracker_opts tracker; /* used with ENG_COMPACTION_LOCALITY */
};

struct eng_db;

/* Open (create if missing) the RocksDB at dir. errmsg (>= 256 bytes) gets the reason.
 * Returns 0, MG_EIO, MG_ENOSPC, MG_ECORRUPT. */
int eng_db_open(const char *dir, const struct eng_db_opts *opts, struct eng_db **out,
                char *errmsg);
void eng_db_close(struct eng_db *db);

/* Point read: value copied into val (appended; caller owns val). Returns 0, MG_ENOTFOUND,
 * MG_EIO. */
int eng_get(struct eng_db *db, enum eng_cf cf, const void *key, size_t klen, struct mg_buf *val);

/* Atomic write batch, built by one thread, then committed. */
struct eng_batch;
struct eng_batch *eng_batch_create(void);
void eng_batch_destroy(struct eng_batch *b);
void eng_batch_put(struct eng_batch *b, enum eng_cf cf, const void *k, size_t kl, const void *v,
                   size_t vl);
void eng_batch_delete(struct eng_batch *b, enum eng_cf cf, const void *k, size_t kl);
void eng_batch_delete_range(struct eng_batch *b, enum eng_cf cf, const void *start, size_t sl,
                            const void *end, size_t el);
size_t eng_batch_count(const struct eng_batch *b);
/* Commit; sync=1 waits for the WAL fsync (concurrent committers share one fsync: RocksDB
 * group commit). With the WAL off (opts.wal == 0) sync is ignored: see eng_db_flush.
 * Returns 0, MG_EIO, MG_ENOSPC. The batch is unchanged (caller destroys; it may be committed
 * again, to any open DB). */
int eng_batch_commit(struct eng_db *db, struct eng_batch *b, int sync);

/* Ordered iterator over [lower, upper) of one column family (upper may be NULL = unbounded).
 * Bounds are copied. A consistent snapshot for the iterator's lifetime. The new iterator is
 * positioned at the first key >= lower (check eng_iter_valid). One thread at a time. */
struct eng_iter;
struct eng_iter *eng_iter_create(struct eng_db *db, enum eng_cf cf, const void *lower, size_t ll,
                                 const void *upper, size_t ul);
void eng_iter_destroy(struct eng_iter *it);
void eng_iter_seek(struct eng_iter *it, const void *k, size_t kl); /* first key >= k */
void eng_iter_seek_to_last(struct eng_iter *it); /* last key < upper */
void eng_iter_next(struct eng_iter *it); /* requires eng_iter_valid */
void eng_iter_prev(struct eng_iter *it); /* requires eng_iter_valid */
int eng_iter_valid(const struct eng_iter *it);
const char *eng_iter_key(const struct eng_iter *it, size_t *len);   /* valid until next move */
const char *eng_iter_value(const struct eng_iter *it, size_t *len); /* valid until next move */
/* 0 or MG_EIO if the iteration stopped on an error. */
int eng_iter_status(const struct eng_iter *it);

/* Compact [start, end) of cf (the delete tracker's target); a NULL start or end is unbounded.
 * Blocks until done (call it off the loop). Returns 0 (RocksDB's C API reports no status). */
int eng_compact_range(struct eng_db *db, enum eng_cf cf, const void *start, size_t sl,
                      const void *end, size_t el);

/* Flush every CF's memtable to SSTs and wait (with the WAL off, this is what makes writes
 * durable: DESIGN.md 6, Raft log truncation waits for it). Returns 0, MG_EIO, MG_ENOSPC. */
int eng_db_flush(struct eng_db *db);

/* Integer RocksDB property ("rocksdb.estimate-num-keys", ...) summed over cfs; 0 if absent. */
uint64_t eng_db_property_int(struct eng_db *db, const char *name);

/* Counters for /metrics. Tombstones are point deletes not yet compacted away: in memtables
 * ("rocksdb.num-deletes-active-mem-table" + "-imm-mem-tables") and in SSTs (the num_deletions
 * table property of each live file, rocksdb_livefiles_deletions); range tombstones are not
 * counted. The tracker_* fields stay 0 unless the mode is ENG_COMPACTION_LOCALITY. */
struct eng_db_stats {
    int wal;                                  /* 1: RocksDB WAL on */
    enum eng_compaction compaction;           /* mode the DB was opened with */
    uint64_t tombstones_mem[ENG_CF__COUNT];   /* point deletes in memtables, per CF */
    uint64_t tombstones_sst[ENG_CF__COUNT];   /* point deletes in live SSTs, per CF */
    uint64_t tracker_compactions;   /* CompactRange calls the tracker made since open */
    uint64_t tracker_bytes_read;    /* SST bytes those compactions consumed (live-file lists) */
    uint64_t tracker_bytes_written; /* SST bytes of the files they wrote in their place */
    uint64_t tracker_ranges;        /* ranges tracked now (<= ranges_max) */
    uint64_t tracker_deletes;       /* deletes counted since open (a range delete: its weight) */
    uint64_t tracker_deletes_pending;   /* of those, not yet compacted (or being compacted) */
    uint64_t tracker_deletes_untracked; /* not counted: the range table was full */
};
/* Fill out. Walks the live SST list (call it from a metrics scrape, not per request). */
void eng_db_stats_get(struct eng_db *db, struct eng_db_stats *out);

/* Per-thread RocksDB perf counters for a caller-driven scan (a LIST): eng_perf_begin turns
 * counting on for the calling thread and zeroes the counters; every RocksDB call this thread
 * makes until eng_perf_end is counted (iterators and gets alike); eng_perf_end fills out and
 * turns counting off. Cheap (thread-local counters, no timing). */
struct eng_perf {
    uint64_t internal_delete_skipped; /* tombstones stepped over (perf internal_delete_skipped) */
    uint64_t internal_key_skipped;    /* hidden entries stepped over (internal_key_skipped) */
};
void eng_perf_begin(void);
void eng_perf_end(struct eng_perf *out);

/* ------------------------------------------------------------ blob store */

/* Where a blob's bytes live. Fixed size, stored verbatim in metadata entries. */
struct eng_blob_ref {
    uint64_t segment; /* segment file number (never reused) */
    uint64_t offset;  /* offset of the data (after the record header) */
    uint64_t length;  /* data bytes */
    uint32_t crc32c;  /* of the data (eng_blob_verify checks it; reads check per chunk) */
    uint32_t flags;   /* the segment's epoch (low 32 bits): checked before any free */
};

#define ENG_BLOB_MIN_FREE_DEFAULT (8u << 20) /* eng_blob_opts.min_free_bytes when 0 */

struct eng_blob_opts {
    uint64_t segment_bytes; /* roll to a new shared segment past this (default 64 MiB) */
    uint64_t own_file_bytes; /* blobs at least this large get a segment of their own, unlinked
                                on free (default 8 MiB) */
    uint64_t min_free_bytes; /* refuse blob bytes (MG_ENOSPC) that would leave the file system
                                with less free space than this (default 8 MiB): the rest is
                                the metadata's (the Raft log, RocksDB flushes), so a full disk
                                still commits the PUT whose blob got in, and deletes */
};

struct eng_blobstore;

/* Open the blob store in dir (created if missing; its parent must exist). opts may be NULL
 * (defaults). One store per directory: a second open, from any process, fails (flock on
 * dir/LOCK). Unfinished own files of a crashed run (*.tmp) are removed. Starts a new epoch and
 * the reaper thread. A directory of the previous format (segments, no STATE file: blobs
 * without chunk checksums) is refused with MG_ECORRUPT. errmsg (>= 256 bytes) gets the reason.
 * Returns 0, MG_EIO, MG_ENOSPC, MG_ECORRUPT. */
int eng_blob_open(const char *dir, const struct eng_blob_opts *opts, struct eng_blobstore **out,
                  char *errmsg);
/* Every writer must be finished or aborted and every pin dropped first. Drains the retire
 * queue (blocks until every retired blob is freed; a blob still pinned is freed too, logged). */
void eng_blob_close(struct eng_blobstore *bs);

/* Streaming writer: bounded memory whatever the blob size. size_hint (0 = unknown) lets large
 * blobs go to their own segment. Writers on different threads proceed concurrently; one writer
 * is used by one thread at a time. size_hint is a hint: a blob of hint bytes or fewer (and
 * below own_file_bytes) is written in place into a shared segment; one that outgrows it moves
 * to its own file; with no hint, up to 1 MiB is buffered in memory. A crc32c per 64 KiB chunk
 * is stored with the blob. Returns 0, MG_EIO, MG_ENOSPC (creating a segment or own file
 * failed, or size_hint bytes would cut into min_free_bytes; nothing to clean up). */
struct eng_blob_writer;
int eng_blob_writer_create(struct eng_blobstore *bs, uint64_t size_hint,
                           struct eng_blob_writer **out);
/* Returns 0, MG_EIO, MG_ENOSPC (the disk refused, or bytes past size_hint would cut into
 * min_free_bytes; the writer is then poisoned: only abort is allowed). */
int eng_blob_writer_append(struct eng_blob_writer *w, const void *data, size_t len);
/* Make the blob durable (fsync, group-committed with concurrent writers) and fill ref.
 * Frees w whatever the result. Returns 0, MG_EIO, MG_ENOSPC; on error nothing is visible
 * and the space is released. Blocks for an fdatasync (~0.2 ms): call it off the loop thread. */
int eng_blob_writer_finish(struct eng_blob_writer *w, struct eng_blob_ref *ref);
/* Discard an unfinished blob; frees w. */
void eng_blob_writer_abort(struct eng_blob_writer *w);

/* Read len bytes at offset (relative to the blob's data) into buf, verified: every 64 KiB
 * chunk the range touches is read whole and checked against its stored crc32c (and the record
 * header against the ref when the range touches the first chunk), so a range costs at most
 * 64 KiB of extra I/O at each edge. Returns 0, MG_EIO, MG_ECORRUPT (a chunk or the header did
 * not match, or the segment is missing or short: logged and counted in corrupt_reads; buf's
 * contents are then unspecified), MG_EINVALIDARGUMENT if out of range. Thread-safe. */
int eng_blob_read(struct eng_blobstore *bs, const struct eng_blob_ref *ref, uint64_t offset,
                  void *buf, size_t len);
/* A blob read in pieces, in order (a streamed GET). Every piece is verified as eng_blob_read
 * verifies (a piece's bytes are never handed out unchecked; on MG_ECORRUPT the caller must
 * abort its response: earlier pieces were sent). Zero-initialise; owned by the caller, one
 * thread at a time. */
struct eng_blob_cursor {
    uint64_t pos; /* data bytes read so far */
};
/* Read the next len bytes (pos + len <= ref->length). Returns 0, MG_EIO, MG_ECORRUPT,
 * MG_EINVALIDARGUMENT. */
int eng_blob_cursor_read(struct eng_blobstore *bs, const struct eng_blob_ref *ref,
                         struct eng_blob_cursor *c, void *buf, size_t len);
/* Re-read the whole blob and check its header, every chunk and its whole crc32c (the
 * scrubber; fsck). Reads 1 MiB at a time (memory 1 MiB). Blocks for the blob's read: call it
 * off the loop, at a bounded rate. Returns 0, MG_EIO, MG_ECORRUPT (counted in corrupt_reads),
 * MG_EINVALIDARGUMENT (a malformed ref). */
int eng_blob_verify(struct eng_blobstore *bs, const struct eng_blob_ref *ref);

/* Release the blob's space now, ignoring pins (after the metadata no longer references it and
 * no reader can be streaming it; readers' blobs go through eng_blob_retire). Idempotent: a ref
 * already freed, naming a segment that no longer exists, or of another epoch than its segment
 * is a logged no-op. Not made durable by itself (a crash may leave the space allocated, never
 * the blob readable again through a live entry). */
void eng_blob_free(struct eng_blobstore *bs, const struct eng_blob_ref *ref);

/* Reader pins. A reader that streams a blob pins it first and unpins it when done; a retired
 * blob is not freed (punched, reused or unlinked) while any pin on it is held, however long.
 * Order for the caller (hazard-pointer style): pin, then check the metadata still references
 * the ref (re-read the entry); if it does not, unpin and retry with the new entry. A pin taken
 * that way can never see its blob freed. Pins count: pin twice, unpin twice. Cheap (one
 * mutex, a hash lookup, no I/O), thread-safe. eng_blob_pin returns 0 or MG_ESLOWDOWN when
 * ENG_BLOB_PINS_MAX distinct blobs are pinned (nothing pinned: answer 503). Unpinning a blob
 * that is not pinned is a programmer error. */
#define ENG_BLOB_PINS_MAX 65536u
int eng_blob_pin(struct eng_blobstore *bs, const struct eng_blob_ref *ref);
void eng_blob_unpin(struct eng_blobstore *bs, const struct eng_blob_ref *ref);

/* Free ref once no reader pins it: the reaper thread frees it in a bounded batch, never on the
 * caller's thread and never early. Call it after the metadata that referenced ref is
 * committed away (retire intents must be persisted by the caller to survive a crash). Never
 * fails; idempotent (a second retire frees nothing more). Backpressure: the store accepts
 * every retire, so the caller must refuse new deletes and overwrites (503 SlowDown) while
 * eng_blob_retire_backlog() >= ENG_BLOB_RETIRE_BACKLOG_MAX; retires past it are counted in
 * retire_over_limit. Memory: 32 B per retired blob waiting (8 MiB at the limit). */
#define ENG_BLOB_RETIRE_BACKLOG_MAX 262144u
void eng_blob_retire(struct eng_blobstore *bs, const struct eng_blob_ref *ref);
/* Retired blobs not yet freed (pinned ones included). Thread-safe, O(1). */
size_t eng_blob_retire_backlog(struct eng_blobstore *bs);

/* Enumerate the live blobs (finished, not yet freed; retired but unfreed ones included): cb
 * gets each ref, on the calling thread, with no engine lock held (it may read, verify, free or
 * retire). A nonzero return from cb stops the walk and is returned. For the orphan collector
 * and fsck: blobs finished while the walk runs may or may not be seen, and a record header
 * torn by a crash ends the walk of its segment (logged). Reads every record header: O(blobs)
 * small preads, call it off the loop. Returns 0, MG_EIO, or cb's value. */
typedef int (*eng_blob_foreach_cb)(void *ctx, const struct eng_blob_ref *ref);
int eng_blob_foreach(struct eng_blobstore *bs, eng_blob_foreach_cb cb, void *ctx);

struct eng_blob_stats {
    uint64_t segments;          /* files */
    uint64_t bytes_written;     /* since open */
    uint64_t bytes_freed;       /* since open */
    uint64_t fsyncs;            /* fsync + fdatasync calls since open (files and directory) */
    uint64_t disk_bytes;        /* allocated on disk now (st_blocks * 512) */
    uint64_t corrupt_reads;     /* reads and verifies that failed a checksum, since open */
    uint64_t pinned;            /* distinct blobs pinned now */
    uint64_t retire_backlog;    /* retired, not yet freed, now */
    uint64_t retired;           /* eng_blob_retire calls since open */
    uint64_t reaped;            /* frees the reaper made since open */
    uint64_t retire_over_limit; /* retires accepted past ENG_BLOB_RETIRE_BACKLOG_MAX */
};
void eng_blob_stats_get(struct eng_blobstore *bs, struct eng_blob_stats *out);

#endif
