/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Crash leaks (issue 9): the orphan collector and persisted retire intents
 * (docs/ops.md, "Orphans and retire intents"; the design argument is at the
 * top of meta/orphan.c).
 *
 *  - Orphans: blobs in the blob store that no metadata references (a PUT killed
 *    between its blob write and its metadata commit, an op whose outcome became
 *    unknown). A collector thread walks the blob store (eng_blob_foreach) at
 *    start and then every period, looks every live blob up in the blob index
 *    rows of every bucket, and retires the blobs it has seen unreferenced for
 *    longer than the grace period. The final decision runs on the meta thread,
 *    so a PUT about to commit one of them can never succeed afterwards.
 *  - Retire intents: apply writes a node-local row 0x01 'R' · segment · offset
 *    for every RETIRE record, in the same RocksDB write as the entry's rows
 *    (which delete the blob index row); the collector deletes the row once the
 *    blob is gone, and replays every outstanding intent at start.
 */
#ifndef MG_META_ORPHAN_H
#define MG_META_ORPHAN_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta.h"

#define META_ORPHAN_GRACE_MS_DEFAULT (10u * 60u * 1000u) /* 10 min */
#define META_ORPHAN_PERIOD_MS_DEFAULT (5u * 60u * 1000u) /* 5 min */
#define META_ORPHAN_BATCH_MAX 4096u /* orphans retired per pass at most */

struct meta_orphan_opts {
    uint32_t period_ms; /* between passes; 0: no collector thread (passes by hand only) */
    uint32_t grace_ms;  /* a blob is retired only after this long seen unreferenced */
};

/* Figures for /metrics. Counters since open unless marked "gauge". */
struct meta_orphan_stats {
    uint64_t passes;            /* collector passes completed */
    uint64_t blobs_seen;        /* gauge: live blobs the last pass walked */
    uint64_t orphans_found;     /* gauge: blobs the last pass found unreferenced */
    uint64_t orphan_bytes;      /* gauge: their data bytes */
    uint64_t orphans_freed;     /* orphans retired (freed by the reaper once unpinned) */
    uint64_t orphan_bytes_freed; /* their data bytes */
    uint64_t puts_refused;      /* PUTs/parts refused: their blob was collected first */
    uint64_t intents_replayed;  /* retire intents re-retired at start */
    uint64_t intents_cleared;   /* intent rows deleted (blob gone) */
    uint64_t intents_pending;   /* gauge: intent rows left after the last pass */
    uint64_t last_pass_ms;      /* gauge: duration of the last pass */
};

/* From meta_store_open, after the meta thread started (the Raft log is replayed): create the
 * collector state; opts NULL: the defaults, overridden by the environment
 * (MG_ORPHAN_PERIOD_MS, MG_ORPHAN_GRACE_MS; TODO: config keys meta.orphan_*). With a period,
 * starts the collector thread, whose first pass (at once) replays the retire intents. Returns
 * 0 (no failure mode beyond allocation). */
int meta_orphan_start(struct meta_store *ms, const struct meta_orphan_opts *opts);
/* From meta_store_close, before the meta thread stops: stop and join the thread (a pass in
 * progress finishes its current step), free the state. No-op if never started. */
void meta_orphan_stop(struct meta_store *ms);
/* One pass on the calling thread (tests, tools; the thread calls it too). now_ms is the clock
 * the grace is measured on (CLOCK_MONOTONIC ms; tests pass a later time instead of sleeping).
 * The first pass of a store also replays the retire intents. Returns 0, MG_EIO,
 * MG_ESHUTDOWN, MG_EBUSY (the collector is off for this run after an unknown outcome). */
int meta_orphan_pass(struct meta_store *ms, int64_t now_ms);
void meta_orphan_stats_get(struct meta_store *ms, struct meta_orphan_stats *out);
int64_t meta_orphan_now_ms(void); /* the clock meta_orphan_pass expects */

/* ------------------------------------------------------ hooks (meta thread) */

/* A cluster member (meta/orphan.c, "In a cluster"): the collector walks only this node's
 * RADOS writer ids, fences every shard before it decides, and spares the blobs of ops this
 * node submitted and that have not completed (or failed less than a grace ago). */
#define META_ORPHAN_CLUSTER_NODES_MAX 3u /* every node replicates every shard up to here */
#define META_ORPHAN_CLUSTER_GRACE_WARN_MS 30000u /* meta/shard.c's delayed retire in a cluster */
/* client.c, a cluster node's meta thread, as op enters it and before the router forwards it:
 * MG_EIO if one of its blobs was collected (complete it with that, unrouted), else 0 (its
 * blobs of this process are in flight until meta__orphan_done). */
int meta__orphan_submit(struct meta_store *ms, const struct meta_op *op);
/* client.c meta__op_complete, a cluster node, an op's final completion with status. */
void meta__orphan_done(struct meta_store *ms, const struct meta_op *op, int status);
/* client.c: run n ops as meta__op_run_sync does, all queued at once; returns 0 or the first
 * failure (in ops order). */
int meta__op_run_sync_many(struct meta_store *ms, struct meta_op **ops, size_t n);

/* The collector's private op type (never from meta_op_create; runs as a quiesce op). */
#define META_OP__ORPHAN ((enum meta_op_type)(META_OP__COUNT + 0x40))
/* exec.c run_body: the body of META_OP__ORPHAN. */
int meta__orphan_do(struct meta_store *ms, struct meta_op *op);
/* exec.c, before the body of an op that brings new data (PUT, part): MG_EIO if one of its
 * blobs was collected (the op must fail; its data is already retired), else 0 (the blobs are
 * recorded as claimed when a pass is deciding). */
int meta__orphan_claim(struct meta_store *ms, const struct meta_op *op);
/* shard.c: an appended entry's outcome became unknown (it may still apply): the collector
 * stops for the rest of this run (its "applied before the pass began" premise fails). */
void meta__orphan_unknown_outcome(struct meta_store *ms);
/* shard.c apply: the intent row for a RETIRE record, into the entry's RocksDB batch. */
void meta__orphan_intent_put(struct eng_batch *b, const struct eng_blob_ref *ref);
/* exec.c: the MG_FAULT_PAUSE_BEFORE_COMMIT test switch. When that variable names a path, a
 * PUT whose data is in a blob (its bytes written and fsynced) stops on the meta thread
 * before its body builds the metadata write: the path is created and the thread sleeps
 * until the process is killed (tests/integration/test_orphans.py). */
void meta__orphan_fault_pause(const struct meta_op *op);

/* Tests: called by a pass between its second index walk and DECIDE (NULL: nothing). */
extern void (*meta__orphan_test_before_decide)(struct meta_store *ms);

/* ------------------------------------------------------- keys (key.c) */

#define META_SYS_RETIRE 'R' /* 0x01 'R' · segment u64 · offset u64 -> intent */
/* 0x01 'W' · writer id u64 (big-endian) -> wall ms of the open that took it (u64): every RADOS
 * writer id a process of this cluster node took, written and flushed at open (meta/data.c)
 * before the first blob of that id. */
#define META_SYS_WRITER 'W'
#define META_ORPHAN_WRITER_KEY_LEN 10
void meta__orphan_writer_key(uint8_t key[META_ORPHAN_WRITER_KEY_LEN], uint64_t id);
/* Parse a 0x01 'W' key. Returns 0 or MG_ECORRUPT. */
int meta__orphan_writer_decode(const void *key, size_t len, uint64_t *id);
/* Write and flush the row of id. Returns 0 or the engine's error (MG_EIO, MG_ENOSPC). */
int meta__orphan_writer_record(struct meta_store *ms, uint64_t id);
void meta__key_retire_intent(struct mg_buf *k, const struct eng_blob_ref *ref);
void meta__key_retire_intents_range(struct mg_buf *lo, struct mg_buf *hi);
/* Parse 0x03 · bucket-id · 'X' · segment · offset. Returns 0 or MG_ECORRUPT. */
int meta__key_blob_index_decode(const void *key, size_t len, uint64_t *bucket_id,
                                uint64_t *segment, uint64_t *offset);

#endif
