/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RADOS blob backend (data.backend "rados", issue 10; DESIGN.md 2, 8): object bytes in a
 * Ceph pool through librados, with the contract of the local blob store of engine/engine.h
 * (streaming writer with bounded memory, finish = durable, every read verified per 64 KiB
 * chunk, cursor reads, verify, free, retire after reader pins, foreach for the orphan
 * collector, stats). librados' negative errno values are translated to enum mg_err here and
 * nowhere else. All functions are thread-safe unless noted; every one that talks to RADOS
 * blocks for a network round trip (~0.3-1 ms here) or more: call them off the loop.
 *
 * Refs. A blob is named by the unchanged struct eng_blob_ref, stored verbatim by meta/:
 *   segment = the writer id: a 64-bit number unique to one open of one store in the pool
 *             (cluster-wide: taken from the counter object "mg.instances" of the pool with a
 *             compare-and-set at open, never reused);
 *   offset  = the blob's sequence number within that open (1, 2, ...);
 *   length, crc32c = data bytes and the crc32c of all of them, as for the local store;
 *   flags   = ENG_RADOS_REF_FLAG | log2 of the stripe size (the local store keeps its epoch,
 *             a small counter, there: the top bit tells the two kinds apart).
 *
 * Layout. A blob of L bytes is max(1, ceil(L / stripe)) RADOS objects of at most 4 MiB,
 * "mg.<segment %016x>.<offset %016x>.<stripe index %08x>", written whole (write_full). Each
 * stripe object carries its chunk CRCs in the xattr "mg.c" (one crc32c u32 little-endian
 * per 64 KiB of that stripe, the last chunk may be short: 256 bytes for a 4 MiB stripe),
 * written in the same atomic write op as its data, so a stripe and its checksums can never
 * disagree but by corruption. Stripe 0 also carries the blob header in the xattr "mg.h"
 * (56 bytes: magic "MGR1", its own crc32c, version, stripe shift, length, data crc32c,
 * chunk shift, segment, offset, wall-clock ms of the write), written last: in the write op of
 * a one-stripe blob, else after every other stripe completed. A blob without a valid header
 * is unfinished (a crashed or aborted writer): never readable, found by foreach, freed by
 * the orphan collector.
 */
#ifndef MG_ENGINE_RADOS_H
#define MG_ENGINE_RADOS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

#define ENG_RADOS_REF_FLAG 0x80000000u        /* eng_blob_ref.flags of a RADOS blob */
#define ENG_RADOS_STRIPE_BYTES_MAX (4u << 20) /* and the default */
#define ENG_RADOS_STRIPE_BYTES_MIN (64u << 10)
#define ENG_RADOS_INFLIGHT_DEFAULT 4u /* stripe writes in flight per writer */
#define ENG_RADOS_INFLIGHT_MAX 16u

/* 1 if ref names a RADOS blob (else a local blob store one). */
static inline int eng_rados_ref_is(const struct eng_blob_ref *ref)
{
    return (ref->flags & ENG_RADOS_REF_FLAG) != 0;
}

struct eng_rados_opts {
    const char *conf;      /* ceph.conf path (mon host, keyring) */
    const char *pool;      /* pool name */
    const char *user;      /* client name without "client." (NULL: "admin") */
    const char *nspace;    /* RADOS namespace of every object (NULL or "": the default one).
                              Stores that share a pool must not share a namespace unless they
                              are one store (a cluster): foreach sees the whole namespace */
    uint32_t stripe_bytes; /* power of two in [MIN, MAX]; 0: MAX. Tests make it small */
    uint32_t inflight_max; /* stripe writes in flight per writer, <= ENG_RADOS_INFLIGHT_MAX;
                              0: ENG_RADOS_INFLIGHT_DEFAULT */
};

struct eng_rados;

/* Connect (rados_create2, conf read, rados_connect with a 30 s mon timeout unless the conf
 * says otherwise), open an ioctx on the pool, take a fresh writer id and start the reaper
 * thread. errmsg (>= 256 bytes) gets the reason. Returns 0, MG_ECONFIG (bad opts, unreadable
 * conf, no such pool), MG_EIO (cannot reach the cluster, or the counter update failed). */
int eng_rados_open(const struct eng_rados_opts *opts, struct eng_rados **out, char *errmsg);
/* As eng_blob_close: writers finished or aborted, pins dropped; drains the retire queue
 * (blocks until every retired blob is removed), then disconnects. */
void eng_rados_close(struct eng_rados *r);
/* The writer id of this open (the segment of every ref it writes). */
uint64_t eng_rados_writer_id(const struct eng_rados *r);

/* Streaming writer, as eng_blob_writer_*. Memory: one stripe buffer (grown up to the stripe
 * size; size_hint sizes it at once) plus at most inflight_max stripes that librados holds
 * copies of while their writes are in flight: <= (1 + 4) x 4 MiB = 20 MiB for a large blob,
 * the blob's own size for a small one. One thread at a time per writer.
 * Returns 0 (create has no failure mode but allocation). */
struct eng_rados_writer;
int eng_rados_writer_create(struct eng_rados *r, uint64_t size_hint, struct eng_rados_writer **out);
/* Returns 0, MG_EIO, MG_ENOSPC (a stripe write failed: the pool is full, or another error;
 * the writer is then poisoned: only abort is allowed). Blocks when inflight_max stripe
 * writes are in flight, until the oldest completes. */
int eng_rados_writer_append(struct eng_rados_writer *w, const void *data, size_t len);
/* Write what is buffered, wait for every stripe write and then the header: the blob is
 * durable (RADOS acknowledges a write once it is on every replica's disk) and ref is filled.
 * Frees w whatever the result. Returns 0, MG_EIO, MG_ENOSPC; on error the stripes written
 * are removed (best effort; what is left is an unfinished blob for the orphan collector). */
int eng_rados_writer_finish(struct eng_rados_writer *w, struct eng_blob_ref *ref);
/* Discard an unfinished blob (removes what it wrote, best effort); frees w. */
void eng_rados_writer_abort(struct eng_rados_writer *w);

/* As eng_blob_read: len bytes at offset, every 64 KiB chunk touched read whole and checked
 * against its stored crc32c, and the header against ref when the range touches the first
 * chunk. One read op (data + xattrs) per stripe touched. Returns 0, MG_EIO, MG_ECORRUPT (a
 * chunk, the checksum table or the header did not match, or a stripe is missing or short:
 * logged and counted in corrupt_reads), MG_EINVALIDARGUMENT (out of range, not a RADOS ref). */
int eng_rados_read(struct eng_rados *r, const struct eng_blob_ref *ref, uint64_t offset, void *buf,
                   size_t len);
/* As eng_blob_cursor_read (struct eng_blob_cursor of engine.h). */
int eng_rados_cursor_read(struct eng_rados *r, const struct eng_blob_ref *ref,
                          struct eng_blob_cursor *c, void *buf, size_t len);
/* As eng_blob_verify: the whole blob re-read a stripe at a time (memory: one stripe), every
 * chunk, the header and the whole crc32c checked, and no stripe past the last may exist.
 * Returns 0, MG_EIO, MG_ECORRUPT (counted), MG_EINVALIDARGUMENT (malformed ref). */
int eng_rados_verify(struct eng_rados *r, const struct eng_blob_ref *ref);

/* As eng_blob_free: remove every stripe now, ignoring pins (stripe 0, with the header, last).
 * Idempotent: missing stripes are a no-op. Errors are logged (the orphan collector finds what
 * is left). Blocks for the removes (issued together). */
void eng_rados_free(struct eng_rados *r, const struct eng_blob_ref *ref);

/* Reader pins and retire, as eng_blob_pin / eng_blob_unpin / eng_blob_retire /
 * eng_blob_retire_backlog (same limits: ENG_BLOB_PINS_MAX, ENG_BLOB_RETIRE_BACKLOG_MAX).
 * Pins are per process: a blob retired here is never removed while this process pins it. */
int eng_rados_pin(struct eng_rados *r, const struct eng_blob_ref *ref);
void eng_rados_unpin(struct eng_rados *r, const struct eng_blob_ref *ref);
void eng_rados_retire(struct eng_rados *r, const struct eng_blob_ref *ref);
size_t eng_rados_retire_backlog(struct eng_rados *r);

/* As eng_blob_foreach, over every blob of the namespace (this open's and others'): lists it
 * (O(objects) names), groups stripes by blob, reads each stripe 0's header (one small op per
 * blob). A finished blob is reported with its ref; an unfinished one (no valid header) with
 * crc32c 0 and a length covering every stripe seen, so that eng_rados_free removes them all,
 * unless this open is still writing it (then it is skipped). cb runs on the calling thread
 * with no lock held. Memory: 24 B per stripe object. Returns 0, MG_EIO, or cb's value. */
int eng_rados_foreach(struct eng_rados *r, eng_blob_foreach_cb cb, void *ctx);
/* As eng_rados_foreach, but only the blobs whose segment (writer id) is one of segs[0..nsegs)
 * (ascending; NULL: every segment). The others are skipped while listing: no header read and
 * no memory for them. A cluster node's orphan collector walks its own writer ids this way
 * (meta/orphan.c). */
int eng_rados_foreach_segments(struct eng_rados *r, const uint64_t *segs, size_t nsegs,
                               eng_blob_foreach_cb cb, void *ctx);
/* 1 if seg is in segs[0..nsegs) (ascending), else 0 (tests; the filter above). */
int eng__rados_seg_in(const uint64_t *segs, size_t nsegs, uint64_t seg);

struct eng_rados_stats {
    uint64_t stripes_written;   /* stripe write ops completed, since open */
    uint64_t bytes_written;     /* data bytes in them */
    uint64_t blobs_written;     /* finished blobs */
    uint64_t bytes_freed;       /* data bytes of blobs freed */
    uint64_t stripes_removed;   /* stripe objects removed */
    uint64_t corrupt_reads;     /* reads and verifies that failed a check */
    uint64_t op_errors;         /* RADOS ops that failed (any kind) */
    uint64_t inflight;          /* stripe writes in flight now */
    uint64_t pinned;            /* distinct blobs pinned now */
    uint64_t retire_backlog;    /* retired, not yet freed, now */
    uint64_t retired;           /* eng_rados_retire calls */
    uint64_t reaped;            /* frees the reaper made */
    uint64_t retire_over_limit; /* retires accepted past ENG_BLOB_RETIRE_BACKLOG_MAX */
};
void eng_rados_stats_get(struct eng_rados *r, struct eng_rados_stats *out);

#endif
