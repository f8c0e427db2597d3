/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RADOS backend of a build without librados (librados-dev absent when CMake ran:
 * engine/CMakeLists.txt picks this file instead of rados.c). eng_rados_open refuses with
 * MG_ECONFIG, so no other function can ever get a store; they only keep the link whole.
 */
#define MG_MODULE "engine"

#include <assert.h>
#include <stdio.h>

#include "engine/rados.h"

int eng_rados_open(const struct eng_rados_opts *opts, struct eng_rados **out, char *errmsg)
{
    (void)opts;
    (void)out;
    snprintf(errmsg, 256,
             "data.backend \"rados\": this metagate was built without librados "
             "(install librados-dev, deploy/deps.sh MG_CLUSTER_PKGS, and rebuild)");
    return MG_ECONFIG;
}

/* Nothing below is reachable: there is never a struct eng_rados. */
#define UNREACHABLE(r) assert((r) == NULL && "no eng_rados without librados")

void eng_rados_close(struct eng_rados *r)
{
    (void)r;
}
uint64_t eng_rados_writer_id(const struct eng_rados *r)
{
    UNREACHABLE(r);
    return 0;
}
int eng_rados_writer_create(struct eng_rados *r, uint64_t h, struct eng_rados_writer **o)
{
    (void)h;
    (void)o;
    UNREACHABLE(r);
    return MG_EIO;
}
int eng_rados_writer_append(struct eng_rados_writer *w, const void *d, size_t l)
{
    (void)w;
    (void)d;
    (void)l;
    return MG_EIO;
}
int eng_rados_writer_finish(struct eng_rados_writer *w, struct eng_blob_ref *ref)
{
    (void)w;
    (void)ref;
    return MG_EIO;
}
void eng_rados_writer_abort(struct eng_rados_writer *w)
{
    (void)w;
}
int eng_rados_read(struct eng_rados *r, const struct eng_blob_ref *ref, uint64_t o, void *b,
                   size_t l)
{
    (void)ref;
    (void)o;
    (void)b;
    (void)l;
    UNREACHABLE(r);
    return MG_EIO;
}
int eng_rados_cursor_read(struct eng_rados *r, const struct eng_blob_ref *ref,
                          struct eng_blob_cursor *c, void *b, size_t l)
{
    (void)ref;
    (void)c;
    (void)b;
    (void)l;
    UNREACHABLE(r);
    return MG_EIO;
}
int eng_rados_verify(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    (void)ref;
    UNREACHABLE(r);
    return MG_EIO;
}
void eng_rados_free(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    (void)ref;
    UNREACHABLE(r);
}
int eng_rados_pin(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    (void)ref;
    UNREACHABLE(r);
    return MG_EIO;
}
void eng_rados_unpin(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    (void)ref;
    UNREACHABLE(r);
}
void eng_rados_retire(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    (void)ref;
    UNREACHABLE(r);
}
size_t eng_rados_retire_backlog(struct eng_rados *r)
{
    UNREACHABLE(r);
    return 0;
}
int eng_rados_foreach(struct eng_rados *r, eng_blob_foreach_cb cb, void *ctx)
{
    (void)cb;
    (void)ctx;
    UNREACHABLE(r);
    return MG_EIO;
}
void eng_rados_stats_get(struct eng_rados *r, struct eng_rados_stats *out)
{
    UNREACHABLE(r);
    *out = (struct eng_rados_stats){0};
}
