/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handoff of the op path (DESIGN.md 5a, docs/ops.md): ops travel from a
 * client's event loop to the meta thread through one bounded FIFO plus a
 * uv_async_t, and back through the client's reply FIFO plus its own
 * uv_async_t, so the done callback always runs on the loop that submitted.
 * Arguments are deep-copied into the op's arena at submit (the caller's h2o
 * request may be disposed while the op is in flight). Also the meta thread
 * itself (a libuv loop that later owns the raft host) and the blocking
 * wrappers' submit-and-wait.
 *
 * Bounds: META_SUBMIT_QUEUE_MAX queued ops (past it, MG_ESLOWDOWN: 503); the
 * reply FIFO of a client holds at most its outstanding ops, so it is bounded
 * by the same number. No lock is held while an op executes or commits.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "meta/cluster.h"
#include "meta/orphan.h"

/* ------------------------------------------------------------ op objects */

struct op_alloc {
    struct meta_op op;
    struct meta__op_priv priv;
};

struct meta_op *meta_op_create(enum meta_op_type t)
{
    assert(t < META_OP__COUNT);
    struct op_alloc *o = mg_calloc(1, sizeof(*o));
    o->op.type = t;
    o->op.priv = &o->priv;
    o->priv.op = &o->op;
    mg_arena_init(&o->priv.arena);
    return &o->op;
}

void meta_op_destroy(struct meta_op *op)
{
    if (op == NULL)
        return;
    assert(!op->priv->submitted);
    mg_arena_close(&op->priv->arena);
    mg_free((struct op_alloc *)op);
}

/* ------------------------------------------------------ argument copies */

static struct mg_str dup_str(struct mg_arena *a, struct mg_str s)
{
    if (s.len == 0)
        return (struct mg_str){"", 0};
    return (struct mg_str){mg_arena_dup(a, s.base, s.len), s.len};
}

static struct meta_kv *dup_kvs(struct mg_arena *a, const struct meta_kv *kv, size_t n)
{
    if (n == 0)
        return NULL;
    struct meta_kv *out = mg_arena_alloc(a, n * sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        out[i].k = dup_str(a, kv[i].k);
        out[i].v = dup_str(a, kv[i].v);
    }
    return out;
}

static void dup_data(struct mg_arena *a, struct meta_data *d)
{
    d->inline_data = dup_str(a, d->inline_data);
    if (d->nextents > 0) {
        struct meta_extent *e = mg_arena_alloc(a, d->nextents * sizeof(*e));
        memcpy(e, d->extents, d->nextents * sizeof(*e));
        d->extents = e;
    } else {
        d->extents = NULL;
    }
}

void meta__object_dup(struct mg_arena *a, struct meta_object *o)
{
    o->key = dup_str(a, o->key);
    o->etag = dup_str(a, o->etag);
    o->content_type = dup_str(a, o->content_type);
    o->content_encoding = dup_str(a, o->content_encoding);
    o->cache_control = dup_str(a, o->cache_control);
    o->content_disposition = dup_str(a, o->content_disposition);
    o->content_language = dup_str(a, o->content_language);
    o->expires = dup_str(a, o->expires);
    o->user_meta = dup_kvs(a, o->user_meta, o->nuser_meta);
    o->tags = dup_kvs(a, o->tags, o->ntags);
    o->owner = dup_str(a, o->owner);
    o->cksum_value = dup_str(a, o->cksum_value);
    o->upload_id = dup_str(a, o->upload_id);
    if (o->nparts > 0) {
        struct meta_part_info *p = mg_arena_alloc(a, o->nparts * sizeof(*p));
        for (size_t i = 0; i < o->nparts; i++) {
            p[i] = o->parts[i];
            p[i].checksum = dup_str(a, p[i].checksum);
        }
        o->parts = p;
    } else {
        o->parts = NULL;
    }
    dup_data(a, &o->data);
}

static void dup_part(struct mg_arena *a, struct meta_part *p)
{
    p->etag = dup_str(a, p->etag);
    p->checksum = dup_str(a, p->checksum);
    dup_data(a, &p->data);
}

/* Make every argument of op its own (STYLE.md 4: nothing borrowed outlives the call). */
static void copy_args(struct meta_op *op)
{
    struct mg_arena *a = &op->priv->arena;
    op->in.bucket = dup_str(a, op->in.bucket);
    op->in.key = dup_str(a, op->in.key);
    op->in.owner = dup_str(a, op->in.owner);
    op->in.upload_id = dup_str(a, op->in.upload_id);
    op->in.cond.if_match = dup_str(a, op->in.cond.if_match);
    struct meta_bucket *b = &op->in.bucket_values;
    b->name = dup_str(a, b->name);
    b->owner = dup_str(a, b->owner);
    b->tags = dup_kvs(a, b->tags, b->ntags);
    b->lifecycle = dup_str(a, b->lifecycle);
    switch (op->type) {
    case META_OP_OBJECT_PUT:
    case META_OP_OBJECT_UPDATE:
    case META_OP_MPU_CREATE:
        meta__object_dup(a, &op->in.object);
        break;
    case META_OP_OBJECT_DELETE_MANY: {
        struct mg_str *k = mg_arena_alloc(a, (op->in.nkeys + 1) * sizeof(*k));
        for (size_t i = 0; i < op->in.nkeys; i++)
            k[i] = dup_str(a, op->in.keys[i]);
        op->in.keys = k;
        break;
    }
    case META_OP_MPU_PUT_PART:
        dup_part(a, &op->in.part);
        break;
    case META_OP_EXPIRE_BATCH:
        if (op->in.expire != NULL && op->in.nexpire > 0) {
            struct meta_expire_item *e = mg_arena_alloc(a, op->in.nexpire * sizeof(*e));
            for (size_t i = 0; i < op->in.nexpire; i++) {
                e[i] = op->in.expire[i];
                e[i].key = dup_str(a, e[i].key);
            }
            op->in.expire = e;
        }
        break;
    case META_OP_MPU_COMPLETE: {
        struct meta_part *p = mg_arena_alloc(a, (op->in.nparts + 1) * sizeof(*p));
        for (size_t i = 0; i < op->in.nparts; i++) {
            p[i] = op->in.parts[i];
            dup_part(a, &p[i]);
        }
        op->in.parts = p;
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------- meta thread */

/* MG_FAULT_ROUTE_HOLD_MS (a test switch, cluster nodes only): an op that brings new data
 * waits that long on the meta loop between its submission claim and the router, so its blob
 * stays unreferenced, in flight, across whole orphan collector passes
 * (tests/integration/test_cluster_orphans.py). Held ops keep the store from closing. */
struct held_op {
    uv_timer_t t;
    struct meta__rt *rt;
    struct meta_op *op;
};
static atomic_uint_fast64_t g_held;

static void on_held_closed(uv_handle_t *h)
{
    mg_free(h->data);
}

static void on_held(uv_timer_t *t)
{
    struct held_op *ho = t->data;
    meta__op_exec(ho->rt, ho->op);
    atomic_fetch_sub(&g_held, 1);
    uv_close((uv_handle_t *)t, on_held_closed);
}

/* 1 if op was held (it runs later), else 0. */
static int route_hold(struct meta__rt *rt, struct meta_op *op)
{
    static uint64_t hold_ms = UINT64_MAX;
    if (hold_ms == UINT64_MAX)
        hold_ms = mg_env_u64("MG_FAULT_ROUTE_HOLD_MS", 0); /* the meta thread only */
    const struct meta_data *d = op->type == META_OP_OBJECT_PUT     ? &op->in.object.data
                                : op->type == META_OP_MPU_PUT_PART ? &op->in.part.data
                                                                   : NULL;
    if (hold_ms == 0 || d == NULL || d->nextents == 0)
        return 0;
    struct held_op *ho = mg_malloc(sizeof(*ho));
    ho->rt = rt;
    ho->op = op;
    uv_timer_init(&rt->loop, &ho->t);
    ho->t.data = ho;
    atomic_fetch_add(&g_held, 1);
    uv_timer_start(&ho->t, on_held, hold_ms, 0);
    return 1;
}

static void on_stopped(struct meta__rt *rt)
{
    uv_close((uv_handle_t *)&rt->wake, NULL);
    uv_close((uv_handle_t *)&rt->stop_timer, NULL);
}

/* Stopping: every accepted op finishes first (queued, parked, in flight), then the shards
 * flush and close. Polled: shutdown is rare and 5 ms is nothing next to it. */
static void on_stop_tick(uv_timer_t *t)
{
    struct meta__rt *rt = t->data;
    struct meta__shards *ss = rt->shards;
    pthread_mutex_lock(&rt->lock);
    int queued = rt->n > 0;
    pthread_mutex_unlock(&rt->lock);
    if (queued || ss->inflight > 0 || ss->parked_head != NULL || atomic_load(&g_held) > 0)
        return;
    uv_timer_stop(t);
    meta__shards_close(ss, on_stopped);
}

static void on_wake(uv_async_t *h)
{
    struct meta__rt *rt = h->data;
    pthread_mutex_lock(&rt->lock);
    struct meta__op_priv *p = rt->head;
    int stopping = rt->stopping;
    rt->head = rt->tail = NULL;
    rt->n = 0;
    pthread_mutex_unlock(&rt->lock);
    while (p != NULL) {
        struct meta__op_priv *next = p->next;
        p->next = NULL;
        /* A cluster: the orphan collector's claim, before the router may forward the op. */
        int cluster = rt->shards != NULL && rt->shards->cl != NULL;
        if (cluster && meta__orphan_submit(rt->ms, p->op) != 0)
            meta__op_complete(p->op, MG_EIO);
        else if (!cluster || !route_hold(rt, p->op))
            meta__op_exec(rt, p->op);
        p = next;
    }
    if (stopping && !uv_is_active((uv_handle_t *)&rt->stop_timer) && rt->shards != NULL &&
        !rt->shards->closing)
        uv_timer_start(&rt->stop_timer, on_stop_tick, 0, 5);
}

static void *rt_main(void *arg)
{
    struct meta__rt *rt = arg;
    int rv = meta__shards_open(rt, rt->open_errmsg);
    pthread_mutex_lock(&rt->lock);
    rt->open_rv = rv;
    rt->opened = 1;
    pthread_cond_signal(&rt->opened_cv);
    pthread_mutex_unlock(&rt->lock);
    if (rv != 0) {
        if (rt->shards != NULL)
            meta__shards_close(rt->shards, on_stopped);
        else
            on_stopped(rt);
    }
    uv_run(&rt->loop, UV_RUN_DEFAULT);
    return NULL;
}

int meta__rt_start(struct meta_store *ms, char *errmsg)
{
    assert(ms->rt == NULL);
    struct meta__rt *rt = mg_calloc(1, sizeof(*rt));
    rt->ms = ms;
    pthread_mutex_init(&rt->lock, NULL);
    pthread_cond_init(&rt->opened_cv, NULL);
    int rv = uv_loop_init(&rt->loop);
    if (rv == 0)
        rv = uv_async_init(&rt->loop, &rt->wake, on_wake);
    if (rv != 0) {
        snprintf(errmsg, 256, "meta loop: %s", uv_strerror(rv));
        mg_free(rt);
        return MG_EIO;
    }
    rt->wake.data = rt;
    uv_timer_init(&rt->loop, &rt->stop_timer);
    rt->stop_timer.data = rt;
    ms->rt = rt; /* the open may create clients of its own (a cluster's RPC server) */
    rv = pthread_create(&rt->thread, NULL, rt_main, rt);
    if (rv != 0)
        mg_log(MG_LOG_FATAL, "event=meta_thread_failed errno=%d", rv);
    assert(rv == 0);
    pthread_mutex_lock(&rt->lock);
    while (!rt->opened)
        pthread_cond_wait(&rt->opened_cv, &rt->lock);
    rv = rt->open_rv;
    pthread_mutex_unlock(&rt->lock);
    if (rv != 0) {
        ms->rt = NULL;
        snprintf(errmsg, 256, "%s", rt->open_errmsg);
        pthread_join(rt->thread, NULL);
        uv_loop_close(&rt->loop);
        pthread_cond_destroy(&rt->opened_cv);
        pthread_mutex_destroy(&rt->lock);
        mg_free(rt);
        return rv;
    }
    return 0;
}

struct meta__rt *meta__rt_get(struct meta_store *ms)
{
    assert(ms->rt != NULL);
    return ms->rt;
}

void meta__rt_stop(struct meta_store *ms)
{
    struct meta__rt *rt = ms->rt;
    if (rt == NULL)
        return;
    pthread_mutex_lock(&rt->lock);
    rt->stopping = 1;
    pthread_mutex_unlock(&rt->lock);
    uv_async_send(&rt->wake);
    pthread_join(rt->thread, NULL);
    int rv = uv_loop_close(&rt->loop);
    if (rv != 0)
        mg_log(MG_LOG_WARN, "event=meta_loop_close err=%s", uv_err_name(rv));
    pthread_cond_destroy(&rt->opened_cv);
    pthread_mutex_destroy(&rt->lock);
    mg_free(rt);
    ms->rt = NULL;
}

static int enqueue(struct meta__rt *rt, struct meta__op_priv *p, int bounded)
{
    pthread_mutex_lock(&rt->lock);
    if (rt->stopping) {
        pthread_mutex_unlock(&rt->lock);
        return MG_ESHUTDOWN;
    }
    if (bounded && rt->n >= META_SUBMIT_QUEUE_MAX) {
        pthread_mutex_unlock(&rt->lock);
        atomic_fetch_add(&rt->slowdowns, 1);
        return MG_ESLOWDOWN;
    }
    meta__fifo_push(&rt->head, &rt->tail, p);
    rt->n++;
    pthread_mutex_unlock(&rt->lock);
    atomic_fetch_add(&rt->submitted, 1);
    uv_async_send(&rt->wake);
    return 0;
}

/* ------------------------------------------------------------------ clients */

static void on_reply(uv_async_t *h)
{
    struct meta_client *c = h->data;
    pthread_mutex_lock(&c->lock);
    struct meta__op_priv *p = c->head;
    c->head = c->tail = NULL;
    pthread_mutex_unlock(&c->lock);
    while (p != NULL) {
        struct meta__op_priv *next = p->next;
        p->next = NULL;
        p->submitted = 0;
        p->done(p->op);
        p = next;
    }
}

int meta_client_create(struct meta_store *ms, uv_loop_t *loop, struct meta_client **out)
{
    struct meta_client *c = mg_calloc(1, sizeof(*c));
    c->ms = ms;
    c->loop = loop;
    pthread_mutex_init(&c->lock, NULL);
    int rv = uv_async_init(loop, &c->async, on_reply);
    if (rv != 0) {
        pthread_mutex_destroy(&c->lock);
        mg_free(c);
        return MG_EIO;
    }
    c->async.data = c;
    meta__rt_get(ms);
    *out = c;
    return 0;
}

static void on_client_closed(uv_handle_t *h)
{
    struct meta_client *c = h->data;
    pthread_mutex_destroy(&c->lock);
    mg_free(c);
}

void meta_client_destroy(struct meta_client *c)
{
    if (c == NULL)
        return;
    assert(c->head == NULL);
    uv_close((uv_handle_t *)&c->async, on_client_closed);
}

int meta_op_submit(struct meta_client *c, struct meta_op *op, meta_op_cb done)
{
    assert(c != NULL && op != NULL && done != NULL && !op->priv->submitted);
    struct meta__op_priv *p = op->priv;
    copy_args(op);
    p->client = c;
    p->done = done;
    p->submitted = 1;
    int rv = enqueue(meta__rt_get(c->ms), p, 1);
    if (rv != 0)
        p->submitted = 0;
    return rv;
}

void meta__op_complete(struct meta_op *op, int status)
{
    struct meta__op_priv *p = op->priv;
    if (p->routed && meta__router_completed(op, status))
        return; /* a cluster's router tries it again */
    op->status = status;
    if (p->client != NULL) {
        struct meta_client *c = p->client;
        if (meta_store_clustered(c->ms))
            meta__orphan_done(c->ms, op, status);
        pthread_mutex_lock(&c->lock);
        meta__fifo_push(&c->head, &c->tail, p);
        pthread_mutex_unlock(&c->lock);
        uv_async_send(&c->async);
        return;
    }
    pthread_mutex_lock(p->mu);
    p->finished = 1;
    pthread_cond_signal(p->cv);
    pthread_mutex_unlock(p->mu);
}

int meta__op_run_sync_many(struct meta_store *ms, struct meta_op **ops, size_t n)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int first = 0;
    size_t queued = 0;
    for (; queued < n; queued++) {
        struct meta__op_priv *p = ops[queued]->priv;
        p->mu = &mu;
        p->cv = &cv;
        p->client = NULL;
        p->finished = 0;
        p->submitted = 1;
        int rv = enqueue(meta__rt_get(ms), p, 0);
        if (rv != 0) {
            p->submitted = 0;
            first = rv;
            break;
        }
    }
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < queued; i++)
        while (!ops[i]->priv->finished)
            pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < queued; i++) {
        struct meta__op_priv *p = ops[i]->priv;
        if (first == 0 && ops[i]->status != 0)
            first = ops[i]->status;
        p->submitted = 0;
        p->mu = NULL;
        p->cv = NULL;
    }
    pthread_cond_destroy(&cv);
    pthread_mutex_destroy(&mu);
    return first;
}

int meta__op_run_sync(struct meta_store *ms, struct meta_op *op)
{
    return meta__op_run_sync_many(ms, &op, 1);
}
