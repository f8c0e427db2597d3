/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals of the op path (docs/ops.md): the runtime (the meta thread,
 * its submission queue and the reply queues of the clients), the per-op
 * private state, and the execution context an op runs in on the meta thread.
 * client.c owns the queues and the copying of arguments; exec.c runs an op
 * and turns its write set into Raft proposals; shard.c owns the raft groups,
 * apply, the pending-write overlay and the flusher.
 */
#ifndef MG_META_OP_H
#define MG_META_OP_H

#include <pthread.h>
#include <stdatomic.h>

#include "meta/internal.h"

#define META_SUBMIT_QUEUE_MAX 8192 /* ops waiting for the meta thread; past it: 503 SlowDown */

/* Private part of a struct meta_op (allocated with it). */
struct meta__op_priv {
    struct meta_op *op;
    struct mg_arena arena;       /* copied arguments and results */
    struct meta_client *client;  /* reply endpoint; NULL for a blocking caller */
    meta_op_cb done;
    struct meta__op_priv *next;  /* queue link (submission, then reply) */
    int submitted;
    int step;                    /* multi-entry ops: entries still to propose */
    /* cluster (router.c): routing state of an op from this node's clients */
    int routed;                  /* the router owns its retries until it completes */
    int route_unknown;           /* an attempt's outcome is unknown: never free its data */
    unsigned route_attempts;
    int64_t route_deadline_ms;   /* meta__now_ms() after which it fails (503) */
    int64_t route_due_ms;        /* next attempt */
    struct meta__rt *route_rt;
    int fence_status;            /* META_OP__FENCE: first failure of a shard's fence */
    int fence_data_done;         /* META_OP__FENCE: the bucket's shard is (being) fenced */
    /* blocking callers */
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int finished;
};

/* Append p to the FIFO (head, tail). */
static inline void meta__fifo_push(struct meta__op_priv **head, struct meta__op_priv **tail,
                                   struct meta__op_priv *p)
{
    p->next = NULL;
    if (*tail != NULL)
        (*tail)->next = p;
    else
        *head = p;
    *tail = p;
}

struct meta_client {
    struct meta_store *ms;
    uv_loop_t *loop;
    uv_async_t async;
    pthread_mutex_t lock;
    struct meta__op_priv *head, *tail; /* finished ops, in completion order */
};

struct meta__shards; /* shard.c */

struct meta__rt {
    struct meta_store *ms;
    pthread_t thread;
    uv_loop_t loop;
    uv_async_t wake;              /* new submissions, or stop */
    pthread_mutex_t lock;         /* guards the submission queue and stopping */
    struct meta__op_priv *head, *tail;
    size_t n;                     /* queued, bounded by META_SUBMIT_QUEUE_MAX for clients */
    int stopping;
    atomic_uint_fast64_t slowdowns;  /* submissions refused: queue full */
    atomic_uint_fast64_t submitted;
    struct meta__shards *shards;  /* raft groups, overlay, flusher (shard.c) */
    uv_timer_t stop_timer;        /* polls for in-flight ops to finish when stopping */
    pthread_cond_t opened_cv;     /* the opener waits for the shards to open */
    int opened, open_rv;
    char open_errmsg[256];
};

/* Start the meta thread and open the shards on it (replaying the Raft log). From
 * meta_store_open. Returns 0 or the shards' open error (errmsg set). */
int meta__rt_start(struct meta_store *ms, char *errmsg);

/* The running runtime of ms (started by meta_store_open). */
struct meta__rt *meta__rt_get(struct meta_store *ms);

/* Submit from a thread that may block and wait for the outcome; returns op->status. Never
 * refused for a full queue (blocking callers are bounded by their thread count). */
int meta__op_run_sync(struct meta_store *ms, struct meta_op *op);

/* On the meta thread: the op's outcome is final; hand it to its client or waiter. */
void meta__op_complete(struct meta_op *op, int status);

/* On the meta thread: execute op (exec.c). Calls meta__op_complete exactly once, now or
 * when its entries commit. */
void meta__op_exec(struct meta__rt *rt, struct meta_op *op);
/* Parked ops (shard.c): may op run now, and run it (no parking check). */
int meta__op_exec_parked_ready(struct meta__rt *rt, const struct meta_op *op);
void meta__op_exec_now(struct meta__rt *rt, struct meta_op *op);

/* ------------------------------------------------ execution context (exec.c) */

struct meta_ws;
/* 1 while an op body runs on the meta thread. */
int meta__exec_active(void);
/* Inside an op body: the overlay's view of a row. Returns 0 with *found set when the overlay
 * decides, -1 when the caller must read RocksDB. */
int meta__exec_get(struct meta_store *ms, const void *k, size_t kl, struct mg_buf *val,
                   int *found);
/* Inside an op body for bucket name: the bucket id its caller looked up, or 0. */
uint64_t meta__exec_bucket_hint(struct mg_str name);
/* Inside an op body: retire d's blobs when the op's entry applies (on every replica). */
void meta__exec_retire(const struct meta_data *d);

/* Op bodies (run on the meta thread inside an execution context; same contracts as the
 * public blocking functions of meta.h, which submit them). */
int meta__do_bucket_create(struct meta_store *ms, struct mg_str name, struct mg_str owner,
                           enum meta_acl acl);
int meta__do_bucket_delete(struct meta_store *ms, struct mg_str name);
int meta__do_bucket_update(struct meta_store *ms, struct mg_str name, unsigned mask,
                           const struct meta_bucket *values);
/* out (may be NULL) gets mtime_ms of the stored object. */
int meta__do_object_put(struct meta_store *ms, struct mg_str bucket, const struct meta_object *obj,
                        const struct meta_put_cond *cond, struct meta_object *out);
int meta__do_object_delete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           int *existed);
int meta__do_object_delete_many(struct meta_store *ms, struct mg_str bucket,
                                const struct mg_str *keys, size_t n, int *existed);
int meta__do_object_update(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                           unsigned mask, const struct meta_object *values);
int meta__do_mpu_create(struct meta_store *ms, struct mg_str bucket, const struct meta_object *tmpl,
                        struct mg_arena *a, struct mg_str *upload_id);
int meta__do_mpu_put_part(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                          struct mg_str upload_id, const struct meta_part *part);
int meta__do_mpu_complete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                          struct mg_str upload_id, const struct meta_part *parts, size_t nparts,
                          struct mg_arena *a, struct meta_object *out);
int meta__do_mpu_abort(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       struct mg_str upload_id);

/* meta_object_put that also reports the stored mtime (copy: submits and waits). */
int meta__object_put_mtime(struct meta_store *ms, struct mg_str bucket,
                           const struct meta_object *obj, const struct meta_put_cond *cond,
                           int64_t *mtime_ms);

/* Deep copy of o's strings and arrays into a (client.c). */
void meta__object_dup(struct mg_arena *a, struct meta_object *o);

#endif
