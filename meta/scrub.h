/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The background scrubber and the data walk it shares with fsck (issue 9,
 * "Served bytes are verified"; docs/ops.md "Scrubbing and fsck").
 *
 * The walk visits every blob the committed metadata references: the extents
 * of each object entry (0x03·id·'M' rows; a completed multipart object has
 * one extent per part) and of each part of an upload in progress
 * (0x03·id·'U' part rows). It reads RocksDB in batches of WALK_BATCH rows
 * with a fresh iterator per batch, so a long, rate-limited pass holds no
 * snapshot and no lock while its callback runs.
 *
 * The scrubber is one thread per store. Each pass re-reads every referenced
 * blob with eng_blob_verify (record header, every 64 KiB chunk crc32c, the
 * whole crc32c) at a bounded average rate, the blob pinned meanwhile so the
 * reaper cannot free it under the read. A failure is confirmed by re-reading
 * the entry (an object overwritten since the walk read it is not a failure),
 * then logged once per pass as
 *   event=scrub_checksum_failure bucket=B key=K upload_id=U part=N segment=S offset=O err=E
 * (key percent-encoded outside [A-Za-z0-9._~/-]) and kept in the failing
 * list until a pass no longer finds it. Figures: meta_scrub_stats_get.
 *
 * Knobs (environment, read by meta_scrub_start when opts is NULL):
 *   MG_SCRUB=0                 no scrubber
 *   MG_SCRUB_BYTES_PER_SEC=N   rate (default META_SCRUB_RATE_DEFAULT, 8 MiB/s)
 *   MG_SCRUB_DELAY_MS=N        first pass this long after start (default 5 min)
 *   MG_SCRUB_PERIOD_MS=N       a pass starts this long after the previous one started, or
 *                              at once when that one took longer (default 24 h)
 */
#ifndef MG_META_SCRUB_H
#define MG_META_SCRUB_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta.h"

/* ---------------------------------------------------------------- the walk */

/* One entry whose data lives in blobs (inline entries are visited too, nextents 0). */
struct meta_scrub_item {
    struct mg_str bucket;    /* name */
    uint64_t bucket_id;
    struct mg_str key;       /* object key */
    struct mg_str upload_id; /* empty: an object entry; else the upload of a part */
    uint32_t part;           /* 0: an object entry */
    struct mg_str row_key;   /* the RocksDB key of the row (re-read to confirm a failure) */
    const struct meta_data *data;
};

/* Called for each entry, with no iterator or lock held; strings are valid during the call. A
 * nonzero return stops the walk and is returned. */
typedef int (*meta_scrub_walk_cb)(void *ctx, const struct meta_scrub_item *it);

/* Walk every bucket's object entries and upload parts, bucket by bucket in key order, from
 * committed state. Rows that fail to decode are counted in *corrupt_rows (may be NULL) and
 * skipped. Returns 0, MG_EIO, or cb's value. Blocks: not from an event loop. */
int meta_scrub_walk(struct meta_store *ms, meta_scrub_walk_cb cb, void *ctx,
                    uint64_t *corrupt_rows);

/* 1 when the committed row row_key still references ref (an object or part entry), else 0. */
int meta_scrub_row_has_ref(struct meta_store *ms, struct mg_str row_key,
                           const struct eng_blob_ref *ref);

/* ------------------------------------------------------------ the scrubber */

#define META_SCRUB_RATE_DEFAULT (8u << 20)          /* bytes/s */
#define META_SCRUB_DELAY_MS_DEFAULT (5u * 60 * 1000) /* first pass after start */
#define META_SCRUB_PERIOD_MS_DEFAULT (24ull * 3600 * 1000)
#define META_SCRUB_FAILING_MAX 32 /* failing objects kept (the count is exact) */

struct meta_scrub_opts {
    uint64_t bytes_per_sec; /* 0: META_SCRUB_RATE_DEFAULT */
    uint64_t delay_ms;      /* first pass; UINT64_MAX: none until triggered */
    uint64_t period_ms;     /* 0: META_SCRUB_PERIOD_MS_DEFAULT */
};

/* Fill o from the MG_SCRUB_* environment (defaults where unset). Returns 0, or 1 when
 * MG_SCRUB=0 asks for no scrubber. */
int meta_scrub_opts_from_env(struct meta_scrub_opts *o);

/* Start ms's scrubber thread (opts NULL: meta_scrub_opts_from_env). One per store: a second
 * start is a logged no-op. Never fails the caller: a scrubber that cannot start is logged
 * (event=scrub_start_failed). Call after meta_store_open. */
void meta_scrub_start(struct meta_store *ms, const struct meta_scrub_opts *opts);
/* Stop and join ms's scrubber (a pass in progress stops at its next blob). No-op when none
 * runs. Call before meta_store_close. */
void meta_scrub_stop(struct meta_store *ms);
/* Start a pass now (or right after the one running). Returns 0, or MG_ENOTFOUND when ms has
 * no scrubber. */
int meta_scrub_trigger(struct meta_store *ms);

struct meta_scrub_failure {
    char bucket[META_BUCKET_NAME_MAX + 1];
    char key[META_KEY_MAX + 1];
    char upload_id[32 + 1]; /* META_UPLOAD_ID_LEN; empty for an object */
    uint32_t part;
    uint64_t segment;
    uint64_t offset;
    int err; /* MG_ECORRUPT, MG_EIO */
};

struct meta_scrub_stats {
    uint64_t passes;            /* completed passes */
    int running;                /* a pass is in progress */
    uint64_t objects_scanned;   /* entries (objects and parts) visited, all passes */
    uint64_t blobs_scanned;     /* blobs verified */
    uint64_t bytes_scanned;     /* blob bytes verified */
    uint64_t checksum_failures; /* confirmed failing blobs, each once per pass */
    uint64_t skipped;           /* blobs not verified: freed since the walk read them, or the
                                   pin table was full */
    uint64_t corrupt_rows;      /* entries that did not decode */
    int64_t last_pass_end_ms;   /* unix ms of the last completed pass; 0: none yet */
    uint64_t last_pass_ms;      /* its duration */
    uint64_t last_pass_bytes;   /* its blob bytes */
    uint64_t bytes_per_sec;     /* the configured rate */
    size_t failing_total;       /* failing objects now: last pass's, plus this pass's so far */
    size_t nfailing;            /* of those, in failing[] (at most META_SCRUB_FAILING_MAX) */
    struct meta_scrub_failure failing[META_SCRUB_FAILING_MAX];
};

/* Copy ms's figures into out. Returns 0, or MG_ENOTFOUND (out zeroed) when ms has no
 * scrubber. Any thread; takes the scrubber's lock for a copy. */
int meta_scrub_stats_get(struct meta_store *ms, struct meta_scrub_stats *out);

#endif
