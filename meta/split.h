/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals: data shards split at bucket boundaries (issue 10; docs/cluster.md
 * "Splits"). The layout (every data shard's id, bucket-id range and range epoch) is a
 * node-local row written in the same RocksDB write as the parent shard's applied index; a
 * split is one entry on the parent's log (a PUT of the split key whose value is the
 * command), applied by every replica; the manager (the node leading shard 0) decides when
 * and where, allocates the child's id through shard 0's 'H' rows and drives the split to
 * its end (re-driven after a failover). Pure codecs and rules first (unit-tested), then
 * the driver. Everything runs on the meta thread but the size check (a libuv worker).
 */
#ifndef MG_META_SPLIT_H
#define MG_META_SPLIT_H

#include "meta/shard.h"

/* Node-local rows (key.c): 0x01 'L' the layout; 0x01 'X' the key of a split entry's one
 * record (never written as a row). */
#define META_SYS_LAYOUT 'L'
#define META_SYS_SPLIT 'X'
void meta__key_sys_layout(struct mg_buf *k);
void meta__key_sys_split(struct mg_buf *k);

/* Private op of the manager (never from meta_op_create): op->in.mask says which step. */
#define META_OP__SPLIT ((enum meta_op_type)(META_OP__COUNT + 0x43))
#define META_SPLIT_STEP_MARK 1   /* allocate the child id: its 'H' row, state=splitting */
#define META_SPLIT_STEP_FINISH 2 /* the parent's and the child's 'H' rows as applied */
#define META_SPLIT_STEP_ABANDON 3 /* the child's 'H' row goes: its split can never apply */

struct meta__layout_shard {
    uint32_t id;    /* 1..META_SHARDS_MAX-1 */
    uint32_t epoch; /* >= 1, bumped on both sides by a split */
    uint64_t lo, hi; /* bucket ids [lo, hi); hi 0: to the end of the id space */
    uint64_t since;  /* index in this shard's own log of the split entry that set epoch (0:
                        from its start): entries at or below it were applied, or refused,
                        before the layout row was written, and a replay skips them */
};

/* The data shards (shard 0 is implicit), by id ascending. */
struct meta__layout {
    uint32_t initial; /* meta.initial_shards of the store: bucket ids come from it */
    unsigned n;
    struct meta__layout_shard s[META_SHARDS_MAX - 1];
};

/* Row value: "MGLY" | version u8 (1) | initial u32 | n u32 | n x (id u32, epoch u32, lo
 * u64, hi u64, since u64), big-endian. decode checks everything (ids ascending in 1..63, epochs >= 1,
 * lo < hi unless hi is 0, initial 1..63): 0 or MG_ECORRUPT. */
void meta__layout_encode(const struct meta__layout *l, struct mg_buf *out);
int meta__layout_decode(const void *buf, size_t len, struct meta__layout *l);
/* The equal ranges of a new store with `initial` data shards (ids 1..initial). */
void meta__layout_initial(struct meta__layout *l, uint32_t initial);
/* The data shard holding bucket_id (index into l->s), or -1. */
int meta__layout_find(const struct meta__layout *l, uint64_t bucket_id);

/* The command of a split entry: parent [lo, hi) at epoch parent_epoch becomes [lo, at) and
 * the child [at, hi) (both at parent_epoch + 1). Value: version u8 (1) | parent u32 |
 * parent_epoch u32 | child u32 | at u64 | hi u64 (29 bytes). */
struct meta__split_cmd {
    uint32_t parent, parent_epoch, child;
    uint64_t at, hi;
};
void meta__split_cmd_encode(const struct meta__split_cmd *c, struct mg_buf *out);
int meta__split_cmd_decode(const void *buf, size_t len, struct meta__split_cmd *c);
/* A validated entry (meta__ws_decode) that is a split: 1 with *c, else 0. */
int meta__split_entry(const void *buf, size_t len, struct meta__split_cmd *c);
/* Encode the split entry for c into out (appended): header shard c->parent, range epoch
 * c->parent_epoch, no request id. */
void meta__split_entry_encode(const struct meta__split_cmd *c, struct mg_buf *out);

/* Apply c to l, the same on every replica: 0 = split (l changed: the caller sets the
 * parent's since to the entry's index; the child's is 0); 1 = already applied (the
 * child exists with exactly that range: a no-op); -1 = refused (the parent is not at
 * parent_epoch, at is not strictly inside its range, hi is not its end, or the child id is
 * taken or out of 1..63): l unchanged. */
int meta__layout_split(struct meta__layout *l, const struct meta__split_cmd *c);

/* The split point of a shard whose rows, walked in key order, fall into buckets ids[0..n)
 * (ascending) with counts[i] rows each: the first bucket id of the upper half, choosing the
 * bucket boundary that best halves the rows. 0 with *at, or -1 when there is no boundary
 * (fewer than two buckets). Never inside a bucket. */
int meta__split_choose(const uint64_t *ids, const uint64_t *counts, size_t n, uint64_t *at);

/* Bucket id of the n-th bucket ever created in a store of `initial` data shards: spread
 * over the INITIAL ranges only, so ids never depend on (or collide across) later splits. */
uint64_t meta__bucket_id_initial(uint32_t initial, uint64_t n);

struct meta__splitter; /* split.c: the manager's driver */

/* Every cluster tick on the meta thread: on the ready leader of shard 0, check the data
 * shards' sizes (on a worker, paced), split one at a time, re-drive a split left half-done
 * by a previous manager. */
void meta__split_tick(struct meta__shards *ss);
/* The body of META_OP__SPLIT (exec.c run_body). */
int meta__split_do(struct meta_store *ms, struct meta_op *op);
/* Closing: no new step starts; a running check finishes on its worker (freed after). */
void meta__split_stop(struct meta__shards *ss);

#endif
