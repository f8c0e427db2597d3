/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals of a cluster (issue 10; DESIGN.md 2, 6): the node table
 * copied from meta_opts.cluster, the initial voter set every node bootstraps
 * every shard's group with, the manager's rows in shard 0 (written once by
 * the first leader), the router (router.c: ops this node does not lead are
 * forwarded to the shard leader under a deadline, always with the same request
 * id) and the read fences (router.c: a read on a node that is not the ready
 * leader first obtains a read index from the leader and waits until its own
 * applied index reaches it). Everything here runs on the meta thread. A
 * single node (meta_opts.cluster NULL) has no struct meta__cluster and none
 * of this costs it anything: the callers test ss->cl first.
 */
#ifndef MG_META_CLUSTER_H
#define MG_META_CLUSTER_H

#include "meta/shard.h"

#define META_NODES_MAX 64            /* cluster.nodes entries */
#define META_REPLICAS_MAX 3          /* voters per shard: min(3, nodes) */
#define META_ADDR_MAX 64             /* "HOST:PORT" */
#define META_ROUTE_DEADLINE_MS 10000 /* a forwarded op or a fence gives up after this */
#define META_ROUTE_BACKOFF_MIN_MS 20
#define META_ROUTE_BACKOFF_MAX_MS 500

/* Private op types (never from meta_op_create; see meta/orphan.h for the range). */
#define META_OP__FENCE ((enum meta_op_type)(META_OP__COUNT + 0x41))
#define META_OP__CLUSTER_INIT ((enum meta_op_type)(META_OP__COUNT + 0x42))

struct meta__node {
    uint64_t id;
    char s3[META_ADDR_MAX];
    char raft[META_ADDR_MAX];
    char rpc[META_ADDR_MAX];
};

struct meta__fence_q; /* router.c */

struct meta__cluster {
    uint64_t self;                                /* this node's id */
    unsigned n;                                   /* nodes */
    struct meta__node nodes[META_NODES_MAX];      /* by id, ascending */
    struct mraft_voter voters[META_REPLICAS_MAX]; /* the initial voter set (lowest ids) */
    unsigned nvoters;
    int voter;                        /* this node is in the voter set */
    int manager_rows_done;            /* shard 0's rows are known written */
    int manager_rows_inflight;        /* the init op is running */
    uint64_t next_request_id;         /* router-assigned ids: self << 48 | n, n
                                         from the wall clock (cluster.c) */
    struct meta__fence_q *fences;     /* META_SHARDS_MAX, router.c */
    uv_timer_t tick;                  /* manager rows */
    struct meta_client *client;       /* the manager-row op's, on the meta loop */
    struct meta__op_priv *retry_head; /* ops waiting for their next attempt */
    uv_timer_t retry_timer;           /* fires at the earliest of them */
    int64_t retry_timer_due_ms;
    uint64_t forwarded, forward_retries, fences_local, fences_remote, read_index_rpcs;
    uint64_t split_keys, split_bytes; /* cluster.split_keys / split_bytes (0: never) */
    struct meta__splitter *split;     /* split.c, the manager's driver (NULL: splits off) */
    int joined;                       /* members.c: this node's row is in its RocksDB */
    unsigned members_ticks;           /* members.c: ticks seen */
};

/* Copy opts (borrowed) into a new cluster. Returns 0 or MG_ECONFIG (errmsg: no such node,
 * duplicate id, an address too long or missing, too many nodes). */
int meta__cluster_create(const struct meta_cluster_opts *opts, struct meta__cluster **out,
                         char *errmsg);
/* Start the timers and the RPC listener (after the groups are open). */
int meta__cluster_start(struct meta__shards *ss, char *errmsg);
/* Stop timers; pending fences and forwarded ops fail with MG_ESHUTDOWN. */
void meta__cluster_stop(struct meta__shards *ss);
void meta__cluster_destroy(struct meta__cluster *cl);
const struct meta__node *meta__cluster_node(const struct meta__cluster *cl, uint64_t id);

/* The body of META_OP__CLUSTER_INIT (exec.c run_body): write the node and shard rows of
 * shard 0 unless present. */
int meta__cluster_init_do(struct meta_store *ms, struct meta_op *op);

/* The text of shard s's 'H' row: "shard=S lo=L hi=H epoch=E replicas=A,B,C". */
void meta__cluster_shard_row(const struct meta__cluster *cl, const struct meta__shard *s,
                             struct mg_buf *v);

/* The text of node n's 'N' row: "id=I s3=A raft=B rpc=C state=up". */
void meta__cluster_node_row(const struct meta__node *n, struct mg_buf *v);

/* ------------------------------------------------------------ members.c */

/* Add node id to the table (and its RPC peer) unless known: 1 added, 0 known, or
 * MG_EINVALIDARGUMENT (table full, an address too long). */
int meta__members_learn(struct meta__shards *ss, uint64_t id, const char *s3, const char *raft,
                        const char *rpc);
/* The same from a node row's text (an applied 0x02 'N' row, a META_RPC_JOIN payload). */
int meta__members_learn_row(struct meta__shards *ss, const char *v, size_t len);
/* At start (after the RPC listener): every node row in RocksDB. */
void meta__members_load(struct meta__shards *ss);
/* Serve META_RPC_JOIN. */
int meta__members_listen(struct meta__shards *ss);
/* From the cluster tick: join (a new node), and place the voters of the groups led here. */
void meta__members_tick(struct meta__shards *ss);
/* Shard s's voters (voters 1) or standbys (0) as "a,b,c" into out (n bytes). */
void meta__members_replicas(struct meta__shard *s, char *out, size_t n, int voters);

/* Keys of the manager's rows (key.c): 0x02 'N' · node-id u64 and 0x02 'H' · shard-id u32;
 * values are "key=value" text, printed as they are by admin. */
#define META_S0_NODE 'N'
#define META_S0_SHARD 'H'
void meta__key_cluster_node(struct mg_buf *k, uint64_t node_id);
void meta__key_cluster_shard(struct mg_buf *k, uint32_t shard_id);

/* ------------------------------------------------------------ router.c */

/* Before executing op (exec.c): 0 = run it here now (this node is the ready leader of its
 * home shard, or the op is node-local); 1 = the router took it (forwarded, or retried here
 * later): it completes op exactly once. */
int meta__router_take(struct meta__rt *rt, struct meta_op *op);
/* A routed op (op->priv->routed) executed here completed with status: 1 = the router retries
 * it (MG_ENOTLEADER: refused before append; MG_ETIMEOUT: outcome unknown), 0 = final. */
int meta__router_completed(struct meta_op *op, int status);
void meta__router_init(struct meta__shards *ss);
void meta__router_stop(struct meta__shards *ss);
void meta__router_destroy(struct meta__cluster *cl);
/* Propose the encoded entry (buf, len) of shard s through its leader (a cross-shard op's
 * other entry). Returns 0: cb(data, status) runs once with 0 (committed), MG_ENOTLEADER (not
 * proposed), MG_ETIMEOUT / MG_EIO (outcome unknown) or a refusal. Errors (cb never runs):
 * MG_ENOTLEADER (no leader known), MG_EBUSY (the peer's calls are all outstanding). */
int meta__router_propose_remote(struct meta__shards *ss, struct meta__shard *s, const void *buf,
                                size_t len, void (*cb)(void *data, int status), void *data);
/* Register the META_RPC_ENTRY method (before or after meta__remote_listen). */
int meta__router_listen(struct meta__shards *ss);
#define META_RPC_ENTRY 5 /* meta/remote.h method numbers: 1..4 are taken */
/* The shard an op executes on. */
struct meta__shard *meta__router_home(struct meta__shards *ss, const struct meta_op *op);
/* META_OP__FENCE: completes op once local reads reflect every acknowledged write. */
void meta__fence_begin(struct meta__rt *rt, struct meta_op *op);
/* shard.c apply: s's applied index moved; release the fences waiting for it. */
void meta__fence_applied(struct meta__shard *s);

#endif
