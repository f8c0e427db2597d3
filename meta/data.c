/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object bytes. A writer buffers up to opts.inline_max_bytes in memory (the
 * object then lives inside its entry: one read for GET, DESIGN.md 5a); past
 * that it switches to an engine blob writer and streams, so memory stays
 * bounded whatever the object size. finish makes the bytes durable before any
 * metadata can reference them. Reads map an offset onto the extents (one per
 * part after a multipart complete). Copies stream in 1 MiB chunks and hash as
 * they go.
 *
 * It also owns the blob backend (meta/data.h): the local blob store or RADOS
 * (data.backend, issue 10), chosen at open, and the dispatch of every blob
 * call by the kind of the ref.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "meta"
#include "engine/rados.h"
#include "meta/data.h"
#include "meta/op.h"
#include "meta/orphan.h"

#define COPY_CHUNK_BYTES (1u << 20)

struct meta_data_writer {
    struct meta_store *ms;
    uint64_t size_hint;
    char *buf; /* inline bytes, until bw exists */
    size_t len;
    size_t cap;
    struct meta__blob_writer *bw; /* once past the inline threshold */
    uint64_t total;
    int poisoned;
};

static int switch_to_blob(struct meta_data_writer *w)
{
    assert(w->bw == NULL);
    int rv = meta__blob_writer_create(w->ms, w->size_hint, &w->bw);
    if (rv != 0) {
        w->bw = NULL;
        return rv;
    }
    if (w->len > 0)
        rv = meta__blob_writer_append(w->bw, w->buf, w->len);
    mg_free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    return rv;
}

int meta_data_writer_create(struct meta_store *ms, uint64_t size_hint,
                            struct meta_data_writer **out)
{
    struct meta_data_writer *w = mg_calloc(1, sizeof(*w));
    w->ms = ms;
    w->size_hint = size_hint;
    if (size_hint > ms->opts.inline_max_bytes) {
        int rv = switch_to_blob(w);
        if (rv != 0) {
            mg_free(w);
            return rv;
        }
    }
    *out = w;
    return 0;
}

int meta_data_writer_append(struct meta_data_writer *w, const void *data, size_t len)
{
    assert(w != NULL && !w->poisoned);
    int rv = 0;
    if (w->bw == NULL && w->len + len > w->ms->opts.inline_max_bytes)
        rv = switch_to_blob(w);
    if (rv == 0 && w->bw != NULL) {
        rv = meta__blob_writer_append(w->bw, data, len);
    } else if (rv == 0 && len > 0) {
        if (w->len + len > w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 4096;
            while (cap < w->len + len)
                cap *= 2;
            if (cap > w->ms->opts.inline_max_bytes)
                cap = w->ms->opts.inline_max_bytes;
            w->buf = mg_realloc(w->buf, cap);
            w->cap = cap;
        }
        memcpy(w->buf + w->len, data, len);
        w->len += len;
    }
    if (rv != 0) {
        w->poisoned = 1;
        return rv;
    }
    w->total += len;
    return 0;
}

int meta_data_writer_finish(struct meta_data_writer *w, struct mg_arena *a, struct meta_data *out)
{
    assert(w != NULL && !w->poisoned);
    int rv = 0;
    memset(out, 0, sizeof(*out));
    out->size = w->total;
    if (w->bw != NULL) {
        out->extents = mg_arena_alloc(a, sizeof(*out->extents));
        out->nextents = 1;
        rv = meta__blob_writer_finish(w->bw, &out->extents[0].ref);
        if (rv == 0 && out->extents[0].ref.length != w->total)
            rv = MG_EIO; /* the engine broke its contract: never reference short data */
    } else {
        out->inline_data = (struct mg_str){mg_arena_dup(a, w->buf, w->len), w->len};
    }
    if (rv != 0)
        memset(out, 0, sizeof(*out));
    mg_free(w->buf);
    mg_free(w);
    return rv;
}

void meta_data_writer_abort(struct meta_data_writer *w)
{
    if (w == NULL)
        return;
    if (w->bw != NULL)
        meta__blob_writer_abort(w->bw);
    mg_free(w->buf);
    mg_free(w);
}

void meta_data_release(struct meta_store *ms, const struct meta_data *d)
{
    for (size_t i = 0; i < d->nextents; i++)
        meta__blob_free(ms, &d->extents[i].ref);
}

/* Design: an overwrite or delete of an object being streamed by a GET must not punch holes
 * under the reader (it would send zeros with a 200). Inside an op body the retire becomes a
 * RETIRE record of the op's entry (docs/ops.md); when the entry applies, on every replica,
 * each blob goes to the blob store's retire queue, which frees it once no reader pins it
 * (engine/engine.h: eng_blob_pin), on its reaper thread, never early and never on a loop. */
void meta__data_retire(struct meta_store *ms, const struct meta_data *d)
{
    assert(ms != NULL && d != NULL);
    if (meta__exec_active()) {
        meta__exec_retire(d);
        return;
    }
    if (ms->free_grace_ms == 0) { /* tests: at once, so they can assert on bytes_freed */
        meta_data_release(ms, d);
        return;
    }
    for (size_t i = 0; i < d->nextents; i++)
        meta__blob_retire(ms, &d->extents[i].ref);
}

int meta_data_pin(struct meta_store *ms, const struct meta_data *d)
{
    for (size_t i = 0; i < d->nextents; i++) {
        int rv = meta__blob_pin(ms, &d->extents[i].ref);
        if (rv != 0) {
            while (i-- > 0)
                meta__blob_unpin(ms, &d->extents[i].ref);
            return rv;
        }
    }
    return 0;
}

void meta_data_unpin(struct meta_store *ms, const struct meta_data *d)
{
    for (size_t i = 0; i < d->nextents; i++)
        meta__blob_unpin(ms, &d->extents[i].ref);
}

int meta_data_remote(const struct meta_data *d)
{
    for (size_t i = 0; i < d->nextents; i++)
        if (eng_rados_ref_is(&d->extents[i].ref))
            return 1;
    return 0;
}

int meta_data_read(struct meta_store *ms, const struct meta_data *d, uint64_t offset, void *buf,
                   size_t len)
{
    if (offset > d->size || len > d->size - offset)
        return MG_EINVALIDRANGE;
    if (d->nextents == 0) {
        if (d->inline_data.len != d->size)
            return MG_ECORRUPT;
        if (len > 0)
            memcpy(buf, d->inline_data.base + offset, len);
        return 0;
    }
    char *dst = buf;
    for (size_t i = 0; i < d->nextents && len > 0; i++) {
        const struct eng_blob_ref *r = &d->extents[i].ref;
        if (offset >= r->length) {
            offset -= r->length;
            continue;
        }
        size_t n = r->length - offset < len ? (size_t)(r->length - offset) : len;
        int rv = meta__blob_read(ms, r, offset, dst, n);
        if (rv != 0)
            return rv == MG_EINVALIDARGUMENT ? MG_ECORRUPT : rv;
        dst += n;
        len -= n;
        offset = 0;
    }
    return len == 0 ? 0 : MG_ECORRUPT;
}

/* Design: a copy of N bytes costs N/1 MiB read+append rounds with one 1 MiB buffer, then one
 * fsync in finish; memory is bounded by the chunk whatever N (DESIGN.md 5a). */
int meta__data_copy(struct meta_store *ms, const struct meta_data *src, uint64_t offset,
                    uint64_t len, struct mg_arena *a, struct meta_data *out, char md5_hex[33])
{
    struct meta_data_writer *w;
    int rv = meta_data_writer_create(ms, len, &w);
    if (rv != 0)
        return rv;
    struct mg_cksum md5;
    mg_cksum_init(&md5, MG_CKSUM_MD5);
    size_t chunk = len < COPY_CHUNK_BYTES ? (size_t)len : COPY_CHUNK_BYTES;
    char *buf = mg_malloc(chunk);
    for (uint64_t done = 0; done < len && rv == 0;) {
        size_t n = len - done < chunk ? (size_t)(len - done) : chunk;
        rv = meta_data_read(ms, src, offset + done, buf, n);
        if (rv == 0)
            rv = meta_data_writer_append(w, buf, n);
        mg_cksum_update(&md5, buf, n);
        done += n;
    }
    mg_free(buf);
    uint8_t digest[32];
    mg_cksum_final(&md5, digest);
    mg_cksum_close(&md5);
    mg_hex_encode(digest, 16, md5_hex);
    if (rv != 0) {
        meta_data_writer_abort(w);
        return rv;
    }
    return meta_data_writer_finish(w, a, out);
}

/* ------------------------------------------------------------ the backend */

int meta__blobs_open(struct meta_store *ms, char *errmsg)
{
    assert(ms->bs == NULL && ms->rados == NULL);
    const struct meta_rados_opts *ro = ms->opts.rados;
    if (ro != NULL) {
        /* data.rados.namespace; without it the MG_RADOS_NAMESPACE test knob, which gives
         * each test server of one pool its own namespace (foreach, so the orphan collector
         * and fsck, see the whole namespace; a cluster's nodes share one). */
        struct eng_rados_opts o = {.conf = ro->conf,
                                   .pool = ro->pool,
                                   .user = ro->user,
                                   .nspace = ro->nspace != NULL ? ro->nspace
                                                                : getenv("MG_RADOS_NAMESPACE")};
        /* A cluster's nodes write one namespace: a node's walk of all of it would condemn
         * blobs that other nodes' ops in flight are about to commit. So foreach (fsck)
         * refuses on a cluster node (MG_EBUSY), and the orphan collector walks only this
         * node's own writer ids (meta__blob_foreach_writers, meta/orphan.c "In a
         * cluster"), which it finds in the 0x01 'W' rows written here. opts.cluster is
         * valid during open. */
        ms->blobs_shared = ms->opts.cluster != NULL && ms->opts.cluster->n > 1;
        int rv = eng_rados_open(&o, &ms->rados, errmsg);
        if (rv == 0 && ms->blobs_shared &&
            (rv = meta__orphan_writer_record(ms, eng_rados_writer_id(ms->rados))) != 0) {
            snprintf(errmsg, 256, "cannot record the RADOS writer id: %s", mg_err_name(rv));
            eng_rados_close(ms->rados);
            ms->rados = NULL;
        }
        return rv;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/blobs", ms->data_dir);
    struct eng_blob_opts bo = {0};
    return eng_blob_open(path, &bo, &ms->bs, errmsg);
}

void meta__blobs_close(struct meta_store *ms)
{
    eng_blob_close(ms->bs);
    eng_rados_close(ms->rados);
    ms->bs = NULL;
    ms->rados = NULL;
}

uint64_t meta__blobs_writer_id(struct meta_store *ms)
{
    return ms->rados != NULL ? eng_rados_writer_id(ms->rados) : 0;
}

void meta__blobs_stats(struct meta_store *ms, struct eng_blob_stats *out)
{
    if (ms->bs != NULL) {
        eng_blob_stats_get(ms->bs, out);
        return;
    }
    struct eng_rados_stats st;
    eng_rados_stats_get(ms->rados, &st);
    *out = (struct eng_blob_stats){.bytes_written = st.bytes_written,
                                   .bytes_freed = st.bytes_freed,
                                   .corrupt_reads = st.corrupt_reads,
                                   .pinned = st.pinned,
                                   .retire_backlog = st.retire_backlog,
                                   .retired = st.retired,
                                   .reaped = st.reaped,
                                   .retire_over_limit = st.retire_over_limit};
}

struct meta__blob_writer {
    struct eng_blob_writer *local;
    struct eng_rados_writer *rados;
};

int meta__blob_writer_create(struct meta_store *ms, uint64_t size_hint,
                             struct meta__blob_writer **out)
{
    struct meta__blob_writer *w = mg_calloc(1, sizeof(*w));
    int rv = ms->rados != NULL ? eng_rados_writer_create(ms->rados, size_hint, &w->rados)
                               : eng_blob_writer_create(ms->bs, size_hint, &w->local);
    if (rv != 0) {
        mg_free(w);
        return rv;
    }
    *out = w;
    return 0;
}

int meta__blob_writer_append(struct meta__blob_writer *w, const void *data, size_t len)
{
    return w->rados != NULL ? eng_rados_writer_append(w->rados, data, len)
                            : eng_blob_writer_append(w->local, data, len);
}

int meta__blob_writer_finish(struct meta__blob_writer *w, struct eng_blob_ref *ref)
{
    int rv = w->rados != NULL ? eng_rados_writer_finish(w->rados, ref)
                              : eng_blob_writer_finish(w->local, ref);
    mg_free(w);
    return rv;
}

void meta__blob_writer_abort(struct meta__blob_writer *w)
{
    if (w == NULL)
        return;
    if (w->rados != NULL)
        eng_rados_writer_abort(w->rados);
    else
        eng_blob_writer_abort(w->local);
    mg_free(w);
}

/* The backend that holds ref: 1 RADOS, 0 local, -1 neither is open for its kind (logged). */
static int ref_backend(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    int rados = eng_rados_ref_is(ref);
    if (rados ? ms->rados != NULL : ms->bs != NULL)
        return rados;
    mg_log(MG_LOG_ERROR,
           "event=blob_backend_mismatch seg=%" PRIx64 " off=%" PRIu64 " ref=%s store=%s",
           ref->segment, ref->offset, rados ? "rados" : "local", ms->rados ? "rados" : "local");
    return -1;
}

int meta__blob_read(struct meta_store *ms, const struct eng_blob_ref *ref, uint64_t offset,
                    void *buf, size_t len)
{
    switch (ref_backend(ms, ref)) {
    case 1:
        return eng_rados_read(ms->rados, ref, offset, buf, len);
    case 0:
        return eng_blob_read(ms->bs, ref, offset, buf, len);
    default:
        return MG_ECORRUPT;
    }
}

int meta__blob_verify(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    switch (ref_backend(ms, ref)) {
    case 1:
        return eng_rados_verify(ms->rados, ref);
    case 0:
        return eng_blob_verify(ms->bs, ref);
    default:
        return MG_ECORRUPT;
    }
}

void meta__blob_free(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    int b = ref_backend(ms, ref);
    if (b == 1)
        eng_rados_free(ms->rados, ref);
    else if (b == 0)
        eng_blob_free(ms->bs, ref);
}

int meta__blob_pin(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    /* A ref of the other kind pins nothing: its reads fail on their own. Unpin matches. */
    int b = ref_backend(ms, ref);
    return b == 1 ? eng_rados_pin(ms->rados, ref) : b == 0 ? eng_blob_pin(ms->bs, ref) : 0;
}

void meta__blob_unpin(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    int b = eng_rados_ref_is(ref);
    if (b && ms->rados != NULL)
        eng_rados_unpin(ms->rados, ref);
    else if (!b && ms->bs != NULL)
        eng_blob_unpin(ms->bs, ref);
}

void meta__blob_retire(struct meta_store *ms, const struct eng_blob_ref *ref)
{
    int b = ref_backend(ms, ref);
    if (b == 1)
        eng_rados_retire(ms->rados, ref);
    else if (b == 0)
        eng_blob_retire(ms->bs, ref);
}

size_t meta__blob_retire_backlog(struct meta_store *ms)
{
    return ms->rados != NULL ? eng_rados_retire_backlog(ms->rados)
                             : eng_blob_retire_backlog(ms->bs);
}

int meta__blob_foreach_writers(struct meta_store *ms, const uint64_t *ids, size_t n,
                               eng_blob_foreach_cb cb, void *ctx)
{
    if (ms->rados == NULL)
        return MG_EINVALIDARGUMENT;
    return eng_rados_foreach_segments(ms->rados, ids, n, cb, ctx);
}

int meta__blob_foreach(struct meta_store *ms, eng_blob_foreach_cb cb, void *ctx)
{
    if (ms->blobs_shared)
        return MG_EBUSY;
    return ms->rados != NULL ? eng_rados_foreach(ms->rados, cb, ctx)
                             : eng_blob_foreach(ms->bs, cb, ctx);
}
