/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The blocking mutation API of meta.h: each function submits the matching op
 * (meta/op.h) to the meta thread and waits for its outcome. For threads that
 * may block (worker threads, tests, tools); an event loop uses meta_op_submit.
 */
#include <string.h>

#define MG_MODULE "meta"
#include "meta/op.h"

/* Submit and wait. An op refused before its body ran still owns its new data (a PUT's
 * blob): the blocking contract says it is released on failure, so release it here. */
static int run(struct meta_store *ms, struct meta_op *op)
{
    int rv = meta__op_run_sync(ms, op);
    if (rv == MG_ESHUTDOWN && !op->priv->finished) {
        if (op->type == META_OP_OBJECT_PUT)
            meta_data_release(ms, &op->in.object.data);
        else if (op->type == META_OP_MPU_PUT_PART)
            meta_data_release(ms, &op->in.part.data);
    }
    return rv;
}

int meta_bucket_create(struct meta_store *ms, struct mg_str name, struct mg_str owner,
                       enum meta_acl acl)
{
    struct meta_op *op = meta_op_create(META_OP_BUCKET_CREATE);
    op->in.bucket = name;
    op->in.owner = owner;
    op->in.acl = acl;
    int rv = run(ms, op);
    meta_op_destroy(op);
    return rv;
}

int meta_bucket_delete(struct meta_store *ms, struct mg_str name)
{
    struct meta_op *op = meta_op_create(META_OP_BUCKET_DELETE);
    op->in.bucket = name;
    int rv = run(ms, op);
    meta_op_destroy(op);
    return rv;
}

int meta_bucket_update(struct meta_store *ms, struct mg_str name, unsigned mask,
                       const struct meta_bucket *values)
{
    struct meta_op *op = meta_op_create(META_OP_BUCKET_UPDATE);
    op->in.bucket = name;
    op->in.mask = mask;
    op->in.bucket_values = *values;
    int rv = run(ms, op);
    meta_op_destroy(op);
    return rv;
}

int meta_object_put(struct meta_store *ms, struct mg_str bucket, const struct meta_object *obj,
                    const struct meta_put_cond *cond)
{
    return meta__object_put_mtime(ms, bucket, obj, cond, NULL);
}

int meta__object_put_mtime(struct meta_store *ms, struct mg_str bucket,
                           const struct meta_object *obj, const struct meta_put_cond *cond,
                           int64_t *mtime_ms)
{
    struct meta_op *op = meta_op_create(META_OP_OBJECT_PUT);
    op->in.bucket = bucket;
    op->in.object = *obj;
    if (cond != NULL) {
        op->in.has_cond = 1;
        op->in.cond = *cond;
    }
    int rv = run(ms, op);
    if (mtime_ms != NULL)
        *mtime_ms = op->out.object.mtime_ms;
    meta_op_destroy(op);
    return rv;
}

int meta_object_delete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       int *existed)
{
    struct meta_op *op = meta_op_create(META_OP_OBJECT_DELETE);
    op->in.bucket = bucket;
    op->in.key = key;
    int rv = run(ms, op);
    if (existed != NULL)
        *existed = op->out.existed;
    meta_op_destroy(op);
    return rv;
}

int meta_object_delete_many(struct meta_store *ms, struct mg_str bucket, const struct mg_str *keys,
                            size_t n, int *existed)
{
    struct meta_op *op = meta_op_create(META_OP_OBJECT_DELETE_MANY);
    op->in.bucket = bucket;
    op->in.keys = keys;
    op->in.nkeys = n;
    int rv = run(ms, op);
    if (existed != NULL && op->out.existed_many != NULL)
        memcpy(existed, op->out.existed_many, n * sizeof(int));
    meta_op_destroy(op);
    return rv;
}

int meta_object_update(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                       unsigned mask, const struct meta_object *values)
{
    struct meta_op *op = meta_op_create(META_OP_OBJECT_UPDATE);
    op->in.bucket = bucket;
    op->in.key = key;
    op->in.mask = mask;
    op->in.object = *values;
    int rv = run(ms, op);
    meta_op_destroy(op);
    return rv;
}

int meta_mpu_create(struct meta_store *ms, struct mg_str bucket, const struct meta_object *tmpl,
                    struct mg_arena *a, struct mg_str *upload_id)
{
    struct meta_op *op = meta_op_create(META_OP_MPU_CREATE);
    op->in.bucket = bucket;
    op->in.object = *tmpl;
    int rv = run(ms, op);
    if (rv == 0)
        *upload_id = (struct mg_str){mg_arena_dup(a, op->out.upload_id.base, op->out.upload_id.len),
                                     op->out.upload_id.len};
    meta_op_destroy(op);
    return rv;
}

int meta_mpu_put_part(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                      struct mg_str upload_id, const struct meta_part *part)
{
    struct meta_op *op = meta_op_create(META_OP_MPU_PUT_PART);
    op->in.bucket = bucket;
    op->in.key = key;
    op->in.upload_id = upload_id;
    op->in.part = *part;
    int rv = run(ms, op);
    meta_op_destroy(op);
    return rv;
}

int meta_mpu_complete(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                      struct mg_str upload_id, const struct meta_part *parts, size_t nparts,
                      struct mg_arena *a, struct meta_object *out)
{
    struct meta_op *op = meta_op_create(META_OP_MPU_COMPLETE);
    op->in.bucket = bucket;
    op->in.key = key;
    op->in.upload_id = upload_id;
    op->in.parts = parts;
    op->in.nparts = nparts;
    int rv = run(ms, op);
    if (rv == 0) {
        *out = op->out.object;
        meta__object_dup(a, out);
    }
    meta_op_destroy(op);
    return rv;
}

int meta_mpu_abort(struct meta_store *ms, struct mg_str bucket, struct mg_str key,
                   struct mg_str upload_id)
{
    struct meta_op *op = meta_op_create(META_OP_MPU_ABORT);
    op->in.bucket = bucket;
    op->in.key = key;
    op->in.upload_id = upload_id;
    int rv = run(ms, op);
    meta_op_destroy(op);
    return rv;
}
