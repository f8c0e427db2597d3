/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/ internal: what db.c and tracker.c share. The delete tracker
 * (tracker.c) is told about every delete eng_batch_commit makes durable and
 * calls back into db.c to compact a range, so the RocksDB handles stay in
 * db.c. Nothing here is visible outside engine/ (and its unit tests).
 */
#ifndef MG_ENGINE_INTERNAL_H
#define MG_ENGINE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

struct eng__tracker;

/* Start the tracker and its one worker thread for db (opts: zero fields take defaults). The
 * tracker must be destroyed before db's RocksDB handle is closed. */
struct eng__tracker *eng__tracker_create(struct eng_db *db, const struct eng_tracker_opts *opts);
/* Tell the worker to start no further compaction (returns at once). */
void eng__tracker_stop(struct eng__tracker *t);
/* Stop the worker, wait for it (and the compaction it runs) to end, and free the tracker. */
void eng__tracker_destroy(struct eng__tracker *t);

/* Note one committed batch's deletes: begin (takes the tracker's lock), any number of
 * delete / delete_range, end (releases it, wakes the worker if a range crossed a threshold).
 * Called by eng_batch_commit after RocksDB accepted the batch; never allocates. */
void eng__tracker_begin(struct eng__tracker *t);
void eng__tracker_delete(struct eng__tracker *t, enum eng_cf cf, const void *key, size_t klen);
void eng__tracker_delete_range(struct eng__tracker *t, enum eng_cf cf, const void *start, size_t sl,
                               const void *end, size_t el);
void eng__tracker_end(struct eng__tracker *t);

/* The tracker_* fields of out. */
void eng__tracker_stats(struct eng__tracker *t, struct eng_db_stats *out);

#define ENG__TRACKER_BOUND_MAX 64 /* bytes of a range's min and max deleted key kept */

/* What one tracker compaction covers: [lo, hi) of cf, or [lo, end of cf) if hi_unbounded. lo is
 * <= every deleted key counted in the range, hi > every one (a key longer than the bound
 * kept is truncated: lo stays below it, hi becomes the truncation's successor). */
struct eng__tracker_span {
    enum eng_cf cf;                         /* column family */
    uint8_t lo[ENG__TRACKER_BOUND_MAX];     /* start (inclusive) */
    size_t lo_len;                          /* bytes in lo */
    uint8_t hi[ENG__TRACKER_BOUND_MAX + 1]; /* end (exclusive) */
    size_t hi_len;                          /* bytes in hi */
    int hi_unbounded;                       /* 1: no end */
    uint64_t deletes;                       /* pending deletes it covers */
    uint64_t age_ms;                        /* age of the oldest of them */
};

/* The span the tracker would compact now for the range holding key (for tests). Returns 0, or
 * MG_ENOTFOUND when that range is not tracked or has no pending deletes. */
int eng__tracker_span_get(struct eng__tracker *t, enum eng_cf cf, const void *key, size_t klen,
                          struct eng__tracker_span *out);

/* In db.c: CompactRange over [start, end) of cf for the tracker. bytes_read gets the size of
 * the live SSTs of cf overlapping the range before, bytes_written the size of the files
 * overlapping it afterwards that did not exist before (rocksdb_livefiles). Blocks. */
void eng__db_compact_tracked(struct eng_db *db, enum eng_cf cf, const void *start, size_t sl,
                             const void *end, size_t el, uint64_t *bytes_read,
                             uint64_t *bytes_written);

/* The name of cf ("meta", ...), for log lines. */
const char *eng__cf_name(enum eng_cf cf);

#endif
