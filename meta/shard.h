/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals: shards as raft groups (docs/ops.md). shard.c owns the raft
 * host on the meta thread, one group per shard, the route table (key range
 * -> shard), the apply hook (an entry's rows plus the shard's applied index in
 * one RocksDB write, then its side effects), the flusher that makes RocksDB
 * durable up to an index (the group's durable index: libraft truncates no
 * entry above it) and the proposal of write sets. overlay.c owns the
 * pending-write overlay. Everything here runs on the meta thread.
 */
#ifndef MG_META_SHARD_H
#define MG_META_SHARD_H

#include "meta/op.h"
#include "meta/wset.h"
#include "raft/raft.h"

#define META_SHARDS_MAX 64 /* shard 0 + data shards (meta.initial_shards <= 63) */

/* --------------------------------------------------------------- overlay */

struct ov_row;
struct ov_range;
struct meta_overlay {
    struct ov_row **slots;  /* power-of-two hash table */
    size_t nslots;
    size_t nrows;
    struct ov_range *ranges; /* pending range deletes, newest first */
};

enum { META_OV_MISS = 0, META_OV_FOUND = 1, META_OV_DELETED = 2 };

void meta__ov_init(struct meta_overlay *ov);
void meta__ov_close(struct meta_overlay *ov);
/* Drop every pending row (an entry's outcome became unknown). */
void meta__ov_clear(struct meta_overlay *ov);
/* Record a proposed row of entry seq. */
void meta__ov_add(struct meta_overlay *ov, const struct meta_ws_record *rec, uint64_t seq);
/* Entry seq was applied: drop its rows unless a later entry rewrote them. */
void meta__ov_applied(struct meta_overlay *ov, const struct meta_ws_record *rec, uint64_t seq);
/* META_OV_MISS (ask RocksDB), META_OV_FOUND (value in val, replaced), META_OV_DELETED. */
int meta__ov_get(const struct meta_overlay *ov, const void *k, size_t kl, struct mg_buf *val);

/* ---------------------------------------------------------------- shards */

struct meta__shard {
    uint32_t id;                /* 0: manager; 1..n-1: data shards */
    uint64_t lo_id, hi_id;      /* data shards: bucket ids [lo_id, hi_id) */
    uint32_t epoch;             /* range epoch (bumped by splits, issue 10) */
    uint64_t since;             /* index in its log where epoch began (split.h) */
    struct mraft_group *g;
    struct meta__shards *ss;
    uint64_t applied;           /* last index applied to RocksDB */
    uint64_t durable;           /* last index RocksDB holds on disk (the flusher's) */
    uint64_t flush_at;          /* applied index when the running flush started */
    uint64_t proposals;         /* proposed entries (metrics) */
    int restored;               /* restore ran once in this process (a reopen keeps durable) */
    int reopening;              /* fenced by a failed log append: closing and reopening */
    uint64_t reopens;           /* metrics */
    uv_timer_t retry_timer;     /* a failed reopen retries after a pause */
    struct meta__install *install; /* cluster: a checkpoint transfer in progress (install.c) */
    unsigned install_waits;     /* MG_FAULT_NO_CHECKPOINT: install requests refused */
    int present;                /* in the layout (ids of a cluster's splits may leave holes
                                   for a while: a child applied before a lower id's) */
    uint64_t refused_stale;     /* entries refused at apply for their range epoch */
};

/* *result of an entry refused at apply because its range epoch is not its shard's (it was
 * encoded against a layout a split changed): it applied nothing, on any replica. */
extern const char meta__entry_stale;

/* Request ids seen (DESIGN.md 6: a retried mutation returns its first result): a bounded
 * open-addressing table, oldest evicted first. Entries come from the ops this node executes
 * and from every applied entry (so a replayed log rebuilds them). */
#define META_DEDUP_SLOTS 65536
struct meta_dedup_slot {
    uint64_t id;                    /* 0: empty */
    int done;                       /* 0: the first op is still in flight */
    int status;                     /* its outcome, once done */
    struct meta__op_priv *waiters;  /* retries that arrived while it was in flight */
    char *result;                   /* cluster: its results (opcodec "out", trimmed), from the
                                       entry's RESULT record; NULL: status only */
    uint32_t result_len;
};

struct meta__cluster; /* cluster.h */
struct meta__layout;  /* split.h */
struct delayed_retire; /* shard.c */
struct meta__install;     /* install.c */
struct meta__install_src; /* install.c */

struct meta__shards {
    struct meta__rt *rt;
    struct meta__cluster *cl;   /* NULL: a single node (meta_opts.cluster unset) */
    struct meta_store *ms;
    struct mraft_host *host;
    char address[64];           /* the raft host's "a.b.c.d:port" */
    struct meta__shard shards[META_SHARDS_MAX]; /* by id: shards[i].id == i */
    unsigned n;                 /* 1 + the highest shard id present */
    uint32_t initial;           /* data shards of the store when created (bucket ids) */
    struct meta__layout *pub;   /* the data shards' layout for other threads (stats_lock) */
    uv_timer_t open_timer;      /* opens the groups of shards a split created */
    struct meta_overlay ov;
    uint64_t seq;               /* last entry sequence number handed out */
    uint64_t inflight;          /* entries proposed, callback not yet run */
    struct meta__op_priv *parked_head, *parked_tail; /* ops waiting for inflight == 0 */
    uv_timer_t flush_timer;
    uv_work_t flush_work;
    int flushing;
    int flush_rv;
    int64_t last_flush_ms;
    int closing;
    atomic_uint_fast64_t applied_entries; /* metrics */
    struct delayed_retire *retire_head, *retire_tail; /* cluster: blobs retired later */
    size_t retire_n;
    uv_timer_t retire_timer;
    struct meta__install_src *install_src; /* cluster: checkpoint sessions served (install.c) */
    uint64_t installs_done;         /* checkpoint installs completed (metrics) */
    struct meta_dedup_slot *dedup;  /* META_DEDUP_SLOTS */
    uint64_t dedup_hits;            /* retries answered with the first result */
    uint64_t flushes;               /* RocksDB flushes the flusher completed */
    uv_timer_t stats_timer;         /* samples the figures below */
    pthread_mutex_t stats_lock;     /* guards sample (read by any thread) */
    struct meta_op_stats sample;
};

/* Request-id check before an op body runs: 0 = run it (now registered as in flight); 1 = a
 * retry of a finished op, *status = its first outcome (the caller completes op); 2 = queued
 * behind its first attempt, completed with its outcome later. */
int meta__dedup_begin(struct meta__shards *ss, struct meta_op *op, int *status);
/* The op with a request id has its outcome: record it (refused before append: forget it, a
 * retry may run) and answer the retries waiting for it. */
void meta__dedup_finish(struct meta__shards *ss, struct meta_op *op, int status, int appended);

/* The state machine of every shard's group (owner_data: its struct meta__shard): apply an
 * entry's rows + the applied index in one RocksDB write, then its side effects; durable
 * index from the flusher; restore from the applied-index row. Exposed for the shard tests,
 * which drive it over libraft's raft_fixture. */
extern const struct mraft_owner meta__shard_owner;

/* Open the host and every group (replaying the log above RocksDB's applied indexes).
 * On the meta thread, before it serves. Returns 0, MG_ECONFIG, MG_EIO, MG_ECORRUPT. */
int meta__shards_open(struct meta__rt *rt, char *errmsg);
/* Flush RocksDB, close the groups and the host; on_closed runs when all is released. */
void meta__shards_close(struct meta__shards *ss, void (*on_closed)(struct meta__rt *rt));

/* The shard owning a row key; NULL for node-local rows. */
struct meta__shard *meta__shard_of_key(struct meta__shards *ss, const void *k, size_t kl);
/* The shard a bucket id lives in. */
struct meta__shard *meta__shard_of_bucket(struct meta__shards *ss, uint64_t bucket_id);
/* Bucket id for the n-th bucket ever created (n >= 0): spread over the data shards of the
 * initial layout (meta__bucket_id_initial), whatever splits happened since. */
uint64_t meta__shards_bucket_id(struct meta__shards *ss, uint64_t n);

/* Propose op's write set: one entry per shard touched, data shards first, shard 0 last,
 * each after the previous committed. Returns 0: meta__op_complete(op, ...) runs once the
 * last entry committed (or with an error if one failed after it was appended: the outcome
 * is then unknown, nothing is freed). Errors before anything was appended (nothing to
 * undo but the op's new data): MG_ESLOWDOWN (queues full), MG_ENOSPC, MG_ESHUTDOWN. Takes
 * ws. */
int meta__shards_propose(struct meta__shards *ss, struct meta_op *op, struct meta_ws *ws);
/* Hold op until no entry is in flight, then execute it (ops that scan ranges). */
void meta__shards_park(struct meta__shards *ss, struct meta_op *op);
/* Copy of the data shards' layout as this node has applied it, for any thread. */
void meta__shards_layout_get(struct meta__shards *ss, struct meta__layout *out);

#endif
