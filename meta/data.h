/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internal: the blob backend behind object data (data.backend, issue 10; DESIGN.md 2,
 * 8). meta/data.c owns the choice: with opts.rados set, every new blob goes to the RADOS
 * backend (engine/rados.h) and no local blob store is opened; without it, to the local one
 * (engine/engine.h, data_dir/blobs). Everything in meta/ that touches blobs (data.c, mpu.c,
 * scrub.c, orphan.c, fsck.c, store.c) calls these instead of eng_blob_* / eng_rados_*, so
 * the scrubber, the orphan collector and fsck work on either. A ref names its kind
 * (eng_rados_ref_is): a ref of the backend this store did not open (data written under the
 * other data.backend) reads as MG_ECORRUPT and frees as a logged no-op. Each function has the
 * contract and thread rules of its eng_blob_* counterpart in engine/engine.h.
 */
#ifndef MG_META_DATA_H
#define MG_META_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

struct meta_store;

/* meta_store_open: open the configured backend (ms->opts.rados or data_dir/blobs). errmsg
 * >= 256 bytes. Returns 0 or the backend's open error (MG_EIO, MG_ENOSPC, MG_ECORRUPT,
 * MG_ECONFIG). */
int meta__blobs_open(struct meta_store *ms, char *errmsg);
void meta__blobs_close(struct meta_store *ms);
/* The RADOS writer id of this open (the segment of every blob it writes); 0 without RADOS. */
uint64_t meta__blobs_writer_id(struct meta_store *ms);
/* The blob counters for meta_stats (a RADOS store maps its own onto them; segments,
 * disk_bytes and fsyncs, which it has no equivalent of, stay 0). */
void meta__blobs_stats(struct meta_store *ms, struct eng_blob_stats *out);

struct meta__blob_writer;
int meta__blob_writer_create(struct meta_store *ms, uint64_t size_hint,
                             struct meta__blob_writer **out);
int meta__blob_writer_append(struct meta__blob_writer *w, const void *data, size_t len);
int meta__blob_writer_finish(struct meta__blob_writer *w, struct eng_blob_ref *ref);
void meta__blob_writer_abort(struct meta__blob_writer *w);

int meta__blob_read(struct meta_store *ms, const struct eng_blob_ref *ref, uint64_t offset,
                    void *buf, size_t len);
int meta__blob_verify(struct meta_store *ms, const struct eng_blob_ref *ref);
void meta__blob_free(struct meta_store *ms, const struct eng_blob_ref *ref);
int meta__blob_pin(struct meta_store *ms, const struct eng_blob_ref *ref);
void meta__blob_unpin(struct meta_store *ms, const struct eng_blob_ref *ref);
void meta__blob_retire(struct meta_store *ms, const struct eng_blob_ref *ref);
size_t meta__blob_retire_backlog(struct meta_store *ms);
/* MG_EBUSY on a cluster of more than one node (see meta__blobs_open in data.c). */
int meta__blob_foreach(struct meta_store *ms, eng_blob_foreach_cb cb, void *ctx);
/* A cluster node's orphan collector: the RADOS blobs whose segment is one of ids[0..n)
 * (ascending), whoever wrote them. MG_EINVALIDARGUMENT without RADOS. */
int meta__blob_foreach_writers(struct meta_store *ms, const uint64_t *ids, size_t n,
                               eng_blob_foreach_cb cb, void *ctx);

#endif
