/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals: checkpoint transfer for a replica that needs a snapshot (install.c has
 * the design and the wire format of META_RPC_CHECKPOINT). On the meta thread.
 */
#ifndef MG_META_INSTALL_H
#define MG_META_INSTALL_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "raft/raft.h"

struct meta__shard;
struct meta__shards;

/* A META_RPC_CHECKPOINT reply, parsed (rows borrowed from the payload). */
struct meta__install_chunk {
    uint64_t session;
    uint64_t applied; /* the index the source's copy stands for */
    uint32_t seq;
    int last;
    uint32_t epoch;
    uint64_t lo, hi;
    const unsigned char *rows;
    size_t rows_len;
    size_t nrows;
};

/* Parse a reply payload (network input): 0, or MG_ECORRUPT (short header, a bad flag or
 * reserved field, a row with an empty key or running past the end). Never asserts. */
int meta__install_chunk_parse(const void *buf, size_t len, struct meta__install_chunk *c);
/* The row at *pos of a parsed chunk: 1 and advances, 0 at the end. */
int meta__install_chunk_next(const struct meta__install_chunk *c, size_t *pos, struct mg_str *k,
                             struct mg_str *v);

/* Serve META_RPC_CHECKPOINT (cluster start). Returns 0 or MG_EINVALIDARGUMENT. */
int meta__install_listen(struct meta__shards *ss);
/* The shard's install hook (mraft_owner.install): MG_EBUSY while the copy runs (it starts
 * one from the group's leader if none runs), 0 with *applied once it covers desc->index. */
int meta__install_step(struct meta__shard *s, const struct mraft_snapshot_desc *desc,
                       uint64_t *applied);
/* Free the transfers and sessions (after the peers and the RPC server are gone). */
void meta__install_close(struct meta__shards *ss);

#endif
