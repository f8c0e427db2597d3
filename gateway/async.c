/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The asynchronous steps of a request (DESIGN.md 5a, issue 7): handing a
 * struct meta_op to the meta thread through the loop's struct meta_client and
 * running blocking work (body decoding into the blob store, fsync, copies,
 * large reads) on libuv's worker pool, each followed by a callback on the
 * request's own loop. The response is sent from that callback.
 *
 * Request lifetime. h2o disposes a request (and clears its pool) when its
 * connection closes; a callback that arrives later must not touch it. Each
 * step keeps a struct pending (mg_malloc: outlives the pool) and a small
 * watcher allocated with h2o_mem_alloc_shared from req->pool whose dispose
 * clears pending->r; the callback runs the handler's continuation only while
 * pending->r is set. A worker step also takes a reference on the shared
 * struct gw_request (h2o_mem_addref_shared), so r, r->arena and r->errmsg,
 * which the worker uses, stay valid until the step ends even if the pool is
 * cleared under it. The entity bytes and headers the worker reads belong to
 * the connection: h2o 2.2.5's HTTP/1 stops reading the socket from on_req
 * until the response is generated (lib/http1.c, on_entity_read_complete), so
 * nothing closes the connection while a step of its request is outstanding;
 * HTTP/2 is not offered.
 *
 * Batching. Ops submitted while a loop iteration runs are handed to meta
 * together from a uv_check callback at the end of the iteration (after
 * libuv's poll phase), not one by one: every meta_op_submit wakes the meta
 * thread (an eventfd write), and on a small box the woken thread preempts the
 * loop in the middle of its iteration, once per op (perf sched on the 2-core
 * box: ~450 preemptions/s per loop at 4k PUT/s). One hand-off per iteration
 * lets the loop finish its batch of requests first, and meta take the ops in
 * one go. The batch is bounded (GW_SUBMIT_BATCH_MAX); a full batch is handed
 * over at once.
 *
 * Everything here runs on the loop thread except the work function.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "gateway"
#include "gateway/core.h"

struct watch;

struct pending {
    struct gw_request *r; /* NULL once the request was disposed */
    struct watch *watch;  /* in r's pool while r is set */
    struct gw__loop *loop;
    gw_op_done_cb op_done;
    void *op_arg;
    gw_work_fn work;
    gw_after_fn after;
    void *arg;
    struct gw_request *held; /* worker steps: the reference taken on r */
    int waits_on_meta;       /* counted in srv->work_meta_inflight */
    int work_rv;
    uv_work_t w;
};

struct watch {
    struct pending *p; /* NULL once the step finished */
};

static void on_watch_dispose(void *v)
{
    struct watch *w = v;
    if (w->p != NULL)
        w->p->r = NULL;
}

static struct pending *pending_start(struct gw_request *r)
{
    struct gw__loop *l = gw__current_loop();
    assert(l != NULL && "asynchronous steps start on a loop thread");
    struct pending *p = mg_calloc(1, sizeof(*p));
    p->r = r;
    p->loop = l;
    p->watch = h2o_mem_alloc_shared(&r->req->pool, sizeof(*p->watch), on_watch_dispose);
    p->watch->p = p;
    l->async_inflight++;
    r->core.steps++;
    return p;
}

/* Detach from the request (its pool may outlive the step) and free. Returns the request, or
 * NULL when it is gone. */
static struct gw_request *pending_end(struct pending *p)
{
    struct gw_request *r = p->r;
    if (r != NULL) {
        p->watch->p = NULL;
        assert(r->core.steps > 0);
        r->core.steps--;
    }
    assert(p->loop->async_inflight > 0);
    p->loop->async_inflight--;
    mg_free(p);
    return r;
}

/* After a continuation: a request with no response and no further step would hang. */
static void check_answered(struct gw_request *r)
{
    if (r->core.status != 0 || r->core.steps > 0)
        return;
    mg_log(MG_LOG_ERROR, "event=no_response op=%s id=%s", gw_op_label(r->op), r->request_id);
    snprintf(r->errmsg, sizeof(r->errmsg), "The handler produced no response.");
    gw_respond_error(r, MG_EINTERNAL);
}

/* ---- meta ops */

static void on_op_done(struct meta_op *op)
{
    struct pending *p = op->data;
    gw_op_done_cb done = p->op_done;
    void *arg = p->op_arg;
    struct gw_request *r = pending_end(p);
    if (r != NULL) {
        done(r, op, arg);
        check_answered(r);
    } else
        mg_log(MG_LOG_DEBUG, "event=op_done_after_disconnect type=%d status=%d", (int)op->type,
               op->status);
    meta_op_destroy(op);
}

/* Hand the iteration's ops to meta. A refused one (MG_ESLOWDOWN, MG_ESHUTDOWN) completes at
 * once with that status; its data (PUT, PUT_PART) is released here, as meta_op_submit's caller
 * must. */
static void flush_deferred(struct gw__loop *l)
{
    struct meta_op *batch[GW_SUBMIT_BATCH_MAX]; /* a done below may submit again */
    int n = l->ndeferred;
    memcpy(batch, l->deferred, (size_t)n * sizeof(batch[0]));
    l->ndeferred = 0;
    for (int i = 0; i < n; i++) {
        struct meta_op *op = batch[i];
        int rv = meta_op_submit(l->mc, op, on_op_done);
        if (rv == 0)
            continue;
        if (op->type == META_OP_OBJECT_PUT)
            meta_data_release(l->srv->ms, &op->in.object.data);
        else if (op->type == META_OP_MPU_PUT_PART)
            meta_data_release(l->srv->ms, &op->in.part.data);
        op->status = rv;
        on_op_done(op);
    }
}

static void on_submit_check(uv_check_t *h)
{
    struct gw__loop *l = h->data;
    /* Bounded: an op refused here completes at once and its done may submit one follow-up op
     * (CreateBucket's ACL update); chains are at most two ops long. */
    while (l->ndeferred > 0)
        flush_deferred(l);
}

void gw__async_loop_init(struct gw__loop *l)
{
    uv_check_init(&l->loop, &l->submit_check);
    l->submit_check.data = l;
    uv_check_start(&l->submit_check, on_submit_check);
    uv_unref((uv_handle_t *)&l->submit_check); /* never keeps the loop alive by itself */
}

void gw__async_loop_close(struct gw__loop *l)
{
    assert(l->ndeferred == 0);
    uv_close((uv_handle_t *)&l->submit_check, NULL);
}

int gw_op_submit(struct gw_request *r, struct meta_op *op, gw_op_done_cb done, void *arg)
{
    assert(r != NULL && op != NULL && done != NULL);
    struct pending *p = pending_start(r);
    p->op_done = done;
    p->op_arg = arg;
    op->data = p;
    struct gw__loop *l = p->loop;
    if (l->ndeferred == GW_SUBMIT_BATCH_MAX)
        flush_deferred(l);
    l->deferred[l->ndeferred++] = op;
    return 0;
}

/* ---- worker steps */

static void on_work(uv_work_t *w)
{
    struct pending *p = w->data;
    p->work_rv = p->work(p->held, p->arg);
}

static void on_after_work(uv_work_t *w, int status)
{
    struct pending *p = w->data;
    (void)status; /* uv_cancel is never called */
    gw_after_fn after = p->after;
    void *arg = p->arg;
    int rv = p->work_rv;
    struct gw_request *held = p->held;
    if (p->waits_on_meta)
        atomic_fetch_sub(&p->loop->srv->work_meta_inflight, 1);
    struct gw_request *r = pending_end(p);
    after(r, arg, rv);
    if (r != NULL)
        check_answered(r);
    h2o_mem_release_shared(held); /* may dispose r (arena) now: after has returned */
}

int gw_work_queue(struct gw_request *r, gw_work_fn work, gw_after_fn after, void *arg,
                  int waits_on_meta)
{
    assert(r != NULL && work != NULL && after != NULL);
    struct gw__loop *l = gw__current_loop();
    assert(l != NULL);
    if (waits_on_meta) {
        /* A blocking meta call waits for a commit that may itself need a pool thread (libraft's
         * segment preparation runs on uv_queue_work): never let such calls fill the pool. */
        int n = atomic_fetch_add(&l->srv->work_meta_inflight, 1);
        if (n >= l->srv->work_meta_max) {
            atomic_fetch_sub(&l->srv->work_meta_inflight, 1);
            snprintf(r->errmsg, sizeof(r->errmsg), "Too many copies in progress.");
            return MG_ESLOWDOWN;
        }
    }
    struct pending *p = pending_start(r);
    p->work = work;
    p->after = after;
    p->arg = arg;
    p->waits_on_meta = waits_on_meta;
    p->held = r;
    h2o_mem_addref_shared(r);
    p->w.data = p;
    int e = uv_queue_work(&l->loop, &p->w, on_work, on_after_work);
    assert(e == 0); /* fails only for a NULL work callback */
    (void)e;
    return 0;
}
