/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Executing an op on the meta thread (docs/ops.md). The op body (bucket.c,
 * object.c, mpu.c: meta__do_*) runs inside an execution context: its reads
 * go to the pending-write overlay first, then RocksDB (meta__get), its
 * meta__shard_apply calls append rows to the context's write set instead of
 * committing, and meta__data_retire appends retire intents (applied, on every
 * replica, when the entry applies). When the body returns 0 the write set is
 * proposed (shard.c) and the op completes when it commits; a proposal refused
 * before anything was appended releases the op's new data, so a rejected op
 * leaves no trace.
 *
 * Ops that scan a key range while deciding (bucket delete: is it empty;
 * complete and abort: the upload's parts) read committed state only, so they
 * wait until no entry is in flight; every op submitted after one of them waits
 * behind it, which keeps submission order.
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/cluster.h"
#include "meta/expire.h"
#include "meta/orphan.h"
#include "meta/split.h"

struct exec_ctx {
    struct meta_ws *ws;
    struct mg_str bucket;  /* the op's bucket name and the id the caller looked up (0: none) */
    uint64_t bucket_id;
};

static __thread struct exec_ctx *tl_exec;

int meta__exec_active(void)
{
    return tl_exec != NULL;
}

uint64_t meta__exec_bucket_hint(struct mg_str name)
{
    struct exec_ctx *x = tl_exec;
    if (x == NULL || x->bucket_id == 0 || x->bucket.len != name.len ||
        memcmp(x->bucket.base, name.base, name.len) != 0)
        return 0;
    return x->bucket_id;
}

int meta__shard_apply(struct meta_shard *s, struct meta_ws *b)
{
    (void)s;
    assert(tl_exec != NULL && b != NULL);
    size_t pos = 0;
    struct meta_ws_record r;
    while (meta__ws_next_builder(b, &pos, &r) == 1)
        meta__ws_add(tl_exec->ws, &r);
    return 0;
}

void meta__exec_retire(const struct meta_data *d)
{
    assert(tl_exec != NULL);
    for (size_t i = 0; i < d->nextents; i++)
        meta__ws_retire(tl_exec->ws, &d->extents[i].ref);
}

int meta__exec_get(struct meta_store *ms, const void *k, size_t kl, struct mg_buf *val,
                   int *found)
{
    struct meta__rt *rt = ms->rt;
    if (tl_exec == NULL || rt == NULL || rt->shards == NULL)
        return -1;
    switch (meta__ov_get(&rt->shards->ov, k, kl, val)) {
    case META_OV_FOUND:
        *found = 1;
        return 0;
    case META_OV_DELETED:
        val->len = 0;
        *found = 0;
        return 0;
    default:
        return -1;
    }
}

static int needs_quiesce(enum meta_op_type t)
{
    return t == META_OP_BUCKET_DELETE || t == META_OP_MPU_COMPLETE || t == META_OP_MPU_ABORT ||
           t == META_OP__ORPHAN; /* the collector's BEGIN/DECIDE: see meta/orphan.c */
}

static int run_body(struct meta_store *ms, struct meta_op *op)
{
    struct mg_arena *a = &op->priv->arena;
    if (op->type == META_OP__ORPHAN)
        return meta__orphan_do(ms, op);
    if (op->type == META_OP__CLUSTER_INIT)
        return meta__cluster_init_do(ms, op);
    if (op->type == META_OP__SPLIT)
        return meta__split_do(ms, op);
    switch (op->type) {
    case META_OP_BUCKET_CREATE:
        return meta__do_bucket_create(ms, op->in.bucket, op->in.owner, op->in.acl);
    case META_OP_BUCKET_DELETE:
        return meta__do_bucket_delete(ms, op->in.bucket);
    case META_OP_BUCKET_UPDATE:
        return meta__do_bucket_update(ms, op->in.bucket, op->in.mask, &op->in.bucket_values);
    case META_OP_OBJECT_PUT:
        return meta__do_object_put(ms, op->in.bucket, &op->in.object,
                                   op->in.has_cond ? &op->in.cond : NULL, &op->out.object);
    case META_OP_OBJECT_DELETE:
        return meta__do_object_delete(ms, op->in.bucket, op->in.key, &op->out.existed);
    case META_OP_OBJECT_DELETE_MANY:
        op->out.existed_many = mg_arena_alloc(a, (op->in.nkeys + 1) * sizeof(int));
        return meta__do_object_delete_many(ms, op->in.bucket, op->in.keys, op->in.nkeys,
                                           op->out.existed_many);
    case META_OP_OBJECT_UPDATE:
        return meta__do_object_update(ms, op->in.bucket, op->in.key, op->in.mask,
                                      &op->in.object);
    case META_OP_MPU_CREATE:
        return meta__do_mpu_create(ms, op->in.bucket, &op->in.object, a, &op->out.upload_id);
    case META_OP_MPU_PUT_PART:
        return meta__do_mpu_put_part(ms, op->in.bucket, op->in.key, op->in.upload_id,
                                     &op->in.part);
    case META_OP_MPU_COMPLETE:
        return meta__do_mpu_complete(ms, op->in.bucket, op->in.key, op->in.upload_id,
                                     op->in.parts, op->in.nparts, a, &op->out.object);
    case META_OP_MPU_ABORT:
        return meta__do_mpu_abort(ms, op->in.bucket, op->in.key, op->in.upload_id);
    case META_OP_EXPIRE_BATCH:
    case META_OP_LC_REINDEX:
        return meta__do_lifecycle(ms, op);
    default:
        return MG_EINVALIDARGUMENT;
    }
}


/* New data an op brought (it owns it); freed when its proposal is refused. */
static void release_new_data(struct meta_store *ms, struct meta_op *op)
{
    if (op->type == META_OP_OBJECT_PUT)
        meta_data_release(ms, &op->in.object.data);
    else if (op->type == META_OP_MPU_PUT_PART)
        meta_data_release(ms, &op->in.part.data);
}

void meta__op_exec(struct meta__rt *rt, struct meta_op *op)
{
    struct meta__shards *ss = rt->shards;
    assert(ss != NULL && tl_exec == NULL);
    if (ss->cl != NULL) { /* a cluster: fences, and ops this node does not lead (router.c) */
        if (op->type == META_OP__FENCE) {
            meta__fence_begin(rt, op);
            return;
        }
        if (meta__router_take(rt, op))
            return;
    }
    if (ss->parked_head != NULL || (needs_quiesce(op->type) && ss->inflight > 0)) {
        meta__shards_park(ss, op);
        return;
    }
    meta__op_exec_now(rt, op);
}

int meta__op_exec_parked_ready(struct meta__rt *rt, const struct meta_op *op)
{
    return !needs_quiesce(op->type) || rt->shards->inflight == 0;
}

void meta__op_exec_now(struct meta__rt *rt, struct meta_op *op)
{
    struct meta__shards *ss = rt->shards;
    if (ss->closing) {
        release_new_data(rt->ms, op);
        meta__op_complete(op, MG_ESHUTDOWN);
        return;
    }
    int first = 0, dup = meta__dedup_begin(ss, op, &first);
    if (dup != 0) {
        /* A retry: answered with (or queued behind) its first attempt's outcome. Its own
         * copy of the data is never stored. In a cluster the retry is the router's, carrying
         * the very data of the first attempt: it is not ours to free. */
        if (ss->cl == NULL)
            release_new_data(rt->ms, op);
        if (dup == 1)
            meta__op_complete(op, first);
        return;
    }
    struct exec_ctx x = {
        .ws = meta__ws_create(), .bucket = op->in.bucket, .bucket_id = op->in.bucket_id};
    meta__orphan_fault_pause(op); /* test switch: blob written, metadata not yet */
    tl_exec = &x;
    /* A PUT whose blob the orphan collector took (it waited past the grace) fails here. */
    int rv = meta__orphan_claim(rt->ms, op);
    if (rv == 0)
        rv = run_body(rt->ms, op);
    tl_exec = NULL;
    if (rv != 0) {
        meta__ws_destroy(x.ws); /* the body released what it had to */
        meta__dedup_finish(ss, op, rv, 1); /* decided: a retry gets the same answer */
        meta__op_complete(op, rv);
        return;
    }
    rv = meta__shards_propose(ss, op, x.ws);
    if (rv != 0) {
        mg_log(MG_LOG_DEBUG, "event=proposal_refused op=%d err=%s", (int)op->type,
               mg_err_name(rv));
        if (rv != MG_ENOTLEADER) /* a cluster's router retries that one with the data */
            release_new_data(rt->ms, op);
        meta__dedup_finish(ss, op, rv, 0);
        meta__op_complete(op, rv);
    }
}
