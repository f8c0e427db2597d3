/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The router and the read fences of a cluster (issue 10; DESIGN.md 6). Both
 * run on the meta thread and cost nothing on a single node (exec.c calls in
 * only when ss->cl is set).
 *
 * Routing. An op executes on the ready leader of its home shard (the bucket's
 * data shard for object, upload and lifecycle ops; shard 0 for bucket ops).
 * The route is the raft group's own leader knowledge (mraft_group_leader: the
 * leader id learnt from its heartbeats), so a stale route costs one
 * MG_ENOTLEADER answer and is corrected by the next heartbeat; there is no
 * route table to refresh and so no refresh stampede. An op this node does not
 * lead is forwarded with meta__remote_exec; a forwarded op that finds its
 * shard not ready on the callee is answered MG_ENOTLEADER before its body
 * runs (never forwarded again). The caller retries under a deadline
 * (META_ROUTE_DEADLINE_MS) with exponential backoff and jitter on
 * MG_ENOTLEADER (the op never ran), MG_ETIMEOUT / MG_EIO (outcome unknown:
 * the connection failed, or the callee's entry was appended and then its
 * leadership lost), and the peer's own backpressure. Every attempt carries
 * the same request id, and a body runs only on a ready leader, whose state
 * holds every entry that ever committed before its term's barrier (and the
 * request ids of all of them, shard.c dedup): a retry returns the first
 * result and never applies twice.
 *
 * Data ownership (a PUT's or a part's new data). The op owns it until an
 * attempt runs its body somewhere; then that node owns it (it frees it if the
 * proposal is refused before append). An op that gives up frees it here only
 * when every attempt was answered "never ran" (MG_ENOTLEADER, not sent); after
 * an unknown outcome nothing is freed (the entry may still apply; an orphan
 * is the worst case).
 *
 * Read fences (a read index, DESIGN.md 6; the leader side may answer under raft/'s
 * read lease, whose clock bound is at "Read lease" in raft/core.c). A request in
 * cluster mode first waits for a fence on shard 0 and on its bucket's shard.
 * On the ready leader of the shard, mraft_group_read (barrier-batched: one
 * barrier entry confirms every read queued before it). Elsewhere, one
 * META_RPC_READ_INDEX call per shard at a time asks the leader to confirm its
 * leadership the same way and answer its applied index; every fence that
 * arrived before the call was sent rides on it, the ones arriving meanwhile
 * wait for the next call (they need an index obtained after they began).
 * Once this node's applied index reaches the answer, the batch is released:
 * every write acknowledged before the fence began was applied on the leader
 * before its barrier, so it is applied here too. A deposed leader never
 * confirms: its barrier cannot commit without a majority of its term.
 */
#include <assert.h>
#include <string.h>

#include <raft.h>

#define MG_MODULE "meta"
#include "meta/cluster.h"
#include "meta/remote.h"

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    if (rng_state == 0)
        rng_state = uv_hrtime() | 1;
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Backoff before attempt n (1-based): min * 2^(n-1) up to max, a random 50..100% of it. */
static uint64_t backoff_ms(unsigned n)
{
    uint64_t b = META_ROUTE_BACKOFF_MIN_MS;
    for (unsigned i = 1; i < n && b < META_ROUTE_BACKOFF_MAX_MS; i++)
        b *= 2;
    if (b > META_ROUTE_BACKOFF_MAX_MS)
        b = META_ROUTE_BACKOFF_MAX_MS;
    return b / 2 + rng_next() % (b / 2 + 1);
}

/* ------------------------------------------------------------------ homes */

static int is_remote_origin(struct meta__rt *rt, const struct meta_op *op)
{
    /* meta__remote_listen submits forwarded ops through a client on the meta loop itself. */
    return op->priv->client != NULL && op->priv->client->loop == &rt->loop;
}

struct meta__shard *meta__router_home(struct meta__shards *ss, const struct meta_op *op)
{
    switch (op->type) {
    case META_OP_BUCKET_CREATE: /* reads shard 0 (name, id sequence); its attribute row goes
                                   to the data shard's leader (meta__router_propose_remote) */
    case META_OP_BUCKET_UPDATE:
        return &ss->shards[0];
    default: /* BUCKET_DELETE reads its data shard (empty?) and sends shard 0 the name */
        break;
    }
    uint64_t id = op->in.bucket_id;
    if (id == 0 && op->in.bucket.len > 0) {
        struct mg_arena a;
        struct meta_bucket b;
        mg_arena_init(&a);
        if (meta_bucket_get(ss->ms, op->in.bucket, &a, &b) == 0)
            id = b.id;
        mg_arena_close(&a);
    }
    return id != 0 ? meta__shard_of_bucket(ss, id) : &ss->shards[0];
}

static int shard_ready(const struct meta__shard *s)
{
    return s->g != NULL && !s->reopening && mraft_group_ready(s->g);
}

/* ------------------------------------------------------------------ retries */

static void release_data(struct meta_store *ms, struct meta_op *op)
{
    if (op->type == META_OP_OBJECT_PUT)
        meta_data_release(ms, &op->in.object.data);
    else if (op->type == META_OP_MPU_PUT_PART)
        meta_data_release(ms, &op->in.part.data);
}

static void route_finish(struct meta__rt *rt, struct meta_op *op, int status)
{
    op->priv->routed = 0;
    meta__op_complete(op, status);
    (void)rt;
}

static void on_retry_tick(uv_timer_t *t);

/* Queue op for another attempt after its backoff; past the deadline it fails (503). */
static void route_later(struct meta__rt *rt, struct meta_op *op)
{
    struct meta__cluster *cl = rt->shards->cl;
    struct meta__op_priv *p = op->priv;
    int64_t now = meta__now_ms();
    if (now >= p->route_deadline_ms || rt->shards->closing) {
        mg_log(MG_LOG_WARN, "event=route_gave_up op=%d request_id=%llu attempts=%u unknown=%d",
               (int)op->type, (unsigned long long)op->in.request_id, p->route_attempts,
               p->route_unknown);
        if (!p->route_unknown)
            release_data(rt->ms, op); /* never ran anywhere: ours to free, once */
        route_finish(rt, op, rt->shards->closing ? MG_ESHUTDOWN : MG_ESLOWDOWN);
        return;
    }
    cl->forward_retries++;
    p->route_due_ms = now + (int64_t)backoff_ms(p->route_attempts);
    p->next = cl->retry_head;
    cl->retry_head = p;
    if (!uv_is_active((uv_handle_t *)&cl->retry_timer) ||
        p->route_due_ms < cl->retry_timer_due_ms) {
        cl->retry_timer_due_ms = p->route_due_ms;
        uv_timer_start(&cl->retry_timer, on_retry_tick, (uint64_t)(p->route_due_ms - now), 0);
    }
}

static void attempt(struct meta__rt *rt, struct meta_op *op);

/* Budget: one pass over the retry list (bounded by the ops in flight, <= the submit queue
 * bound) per firing; the timer is re-armed for the earliest op not yet due. */
static void on_retry_tick(uv_timer_t *t)
{
    struct meta__rt *rt = t->data;
    struct meta__cluster *cl = rt->shards->cl;
    int64_t now = meta__now_ms();
    struct meta__op_priv *due = NULL, *keep = NULL, *p = cl->retry_head;
    int64_t next_due = INT64_MAX;
    while (p != NULL) {
        struct meta__op_priv *n = p->next;
        if (p->route_due_ms <= now) {
            p->next = due;
            due = p;
        } else {
            p->next = keep;
            keep = p;
            if (p->route_due_ms < next_due)
                next_due = p->route_due_ms;
        }
        p = n;
    }
    cl->retry_head = keep;
    if (keep != NULL) {
        cl->retry_timer_due_ms = next_due;
        uv_timer_start(&cl->retry_timer, on_retry_tick, (uint64_t)(next_due - now), 0);
    }
    while (due != NULL) {
        struct meta__op_priv *n = due->next;
        due->next = NULL;
        meta__op_exec(rt, due->op); /* back through the router: local or forwarded */
        due = n;
    }
}

static void on_forwarded(struct meta_op *op, int status)
{
    struct meta__rt *rt = op->priv->route_rt;
    switch (status) {
    case MG_ENOTLEADER: /* refused before its body ran: the route was stale */
        route_later(rt, op);
        return;
    case MG_ETIMEOUT: /* outcome unknown: retried with the same request id */
    case MG_EIO:
        op->priv->route_unknown = 1;
        route_later(rt, op);
        return;
    default: /* the op ran there (its status), or never will (MG_ESLOWDOWN, ...) */
        route_finish(rt, op, status);
    }
}

static void attempt(struct meta__rt *rt, struct meta_op *op)
{
    struct meta__shards *ss = rt->shards;
    struct meta__shard *home = meta__router_home(ss, op);
    struct meta__op_priv *p = op->priv;
    p->route_attempts++;
    uint64_t leader = home->g != NULL ? mraft_group_leader(home->g, NULL) : 0;
    if (leader == 0 || leader == ss->cl->self) {
        route_later(rt, op); /* no leader known, or us but not ready yet */
        return;
    }
    p->route_rt = rt;
    ss->cl->forwarded++;
    int rv = meta__remote_exec(rt, leader, op, on_forwarded);
    if (rv == 0)
        return;
    if (rv == MG_EENTITYTOOLARGE || rv == MG_ENOTFOUND) {
        release_data(rt->ms, op); /* never sent */
        route_finish(rt, op, rv == MG_ENOTFOUND ? MG_ESLOWDOWN : rv);
        return;
    }
    route_later(rt, op); /* the peer's backpressure (nothing sent) */
}

int meta__router_take(struct meta__rt *rt, struct meta_op *op)
{
    struct meta__shards *ss = rt->shards;
    if ((unsigned)op->type >= META_OP__COUNT)
        return 0; /* node-local private ops (orphan collector, cluster init) */
    struct meta__shard *home = meta__router_home(ss, op);
    int ready = shard_ready(home);
    if (is_remote_origin(rt, op)) {
        if (ready)
            return 0;
        /* Forwarded to us but we do not lead it (any more): the caller retries elsewhere.
         * Nothing ran, so the data stays the caller's. */
        meta__op_complete(op, MG_ENOTLEADER);
        return 1;
    }
    struct meta__op_priv *p = op->priv;
    if (!p->routed) {
        p->routed = 1;
        p->route_rt = rt;
        p->route_deadline_ms = meta__now_ms() + META_ROUTE_DEADLINE_MS;
        p->route_attempts = 0;
        p->route_unknown = 0;
        if (op->in.request_id == 0)
            op->in.request_id =
                (ss->cl->self << 48) | (++ss->cl->next_request_id & 0xffffffffffffull);
    }
    if (ready) {
        p->route_attempts++;
        return 0; /* run here; meta__router_completed sees how it ended */
    }
    attempt(rt, op);
    return 1;
}

int meta__router_completed(struct meta_op *op, int status)
{
    struct meta__op_priv *p = op->priv;
    assert(p->routed);
    if (status != MG_ENOTLEADER && status != MG_ETIMEOUT) {
        p->routed = 0;
        return 0;
    }
    if (status == MG_ETIMEOUT)
        p->route_unknown = 1; /* appended, then leadership lost: it may still apply */
    route_later(p->route_rt, op);
    return 1;
}

/* ------------------------------------------------------------- remote entries */

/* A cross-shard op (bucket create and delete) executes on its home shard's leader and sends
 * the entry of its other shard to that shard's leader (META_RPC_ENTRY), which proposes it as
 * it is and answers once it committed: 0; MG_ENOTLEADER (not proposed: it is not the ready
 * leader); MG_ETIMEOUT (appended, outcome unknown); or a refusal (MG_ESLOWDOWN, MG_ENOSPC). */
struct entry_call {
    void (*cb)(void *data, int status);
    void *data;
};

static void on_entry_reply(void *data, int status, const void *payload, size_t len)
{
    (void)payload, (void)len;
    struct entry_call *c = data;
    c->cb(c->data, status);
    mg_free(c);
}

int meta__router_propose_remote(struct meta__shards *ss, struct meta__shard *s, const void *buf,
                                size_t len, void (*cb)(void *data, int status), void *data)
{
    uint64_t leader = s->g != NULL ? mraft_group_leader(s->g, NULL) : 0;
    if (leader == 0 || leader == ss->cl->self)
        return MG_ENOTLEADER; /* nobody to send it to yet: the router retries the op */
    struct entry_call *c = mg_malloc(sizeof(*c));
    c->cb = cb;
    c->data = data;
    int rv = meta__remote_call(ss->rt, leader, META_RPC_ENTRY, buf, len, META_REMOTE_TIMEOUT_MS,
                               on_entry_reply, c);
    if (rv != 0) {
        mg_free(c);
        return rv == MG_ESLOWDOWN ? MG_EBUSY : MG_ENOTLEADER; /* not sent */
    }
    return 0;
}

struct entry_req {
    struct mraft_propose req;
    struct mrpc_call *call;
};

static void on_entry_committed(struct mraft_propose *req, int status, uint64_t index, uint64_t hint,
                               void *result)
{
    (void)index, (void)hint;
    struct entry_req *e = req->data;
    /* Refused at apply for its range epoch (a split moved its range): nothing applied. */
    if (status == 0 && result == &meta__entry_stale)
        status = MG_ENOTLEADER;
    else if (status != 0)
        status = MG_ETIMEOUT;
    mrpc_reply(e->call, status, NULL, 0);
    mg_free(e);
}

/* META_RPC_ENTRY served here: payload is one encoded entry (meta/wset.h), checked whole by
 * meta__ws_decode before it is proposed. */
static void on_entry_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                             const void *payload, size_t len)
{
    (void)data;
    struct meta__shards *ss = rt->shards;
    struct meta_ws_header h;
    if (ss == NULL || ss->closing) {
        mrpc_reply(call, MG_ESHUTDOWN, NULL, 0);
        return;
    }
    if (meta__ws_decode(payload, len, &h) != 0 || h.shard_id >= ss->n) {
        mrpc_reply(call, MG_EBADREQUEST, NULL, 0);
        return;
    }
    struct meta__shard *s = &ss->shards[h.shard_id];
    if (!shard_ready(s)) {
        mrpc_reply(call, MG_ENOTLEADER, NULL, 0);
        return;
    }
    struct entry_req *e = mg_calloc(1, sizeof(*e));
    e->call = call;
    e->req.data = e;
    int rv = mraft_group_propose(s->g, &e->req, payload, len, on_entry_committed, NULL);
    if (rv != 0) {
        mg_free(e);
        mrpc_reply(call, rv == MG_EBUSY ? MG_ESLOWDOWN : rv, NULL, 0);
    }
}

int meta__router_listen(struct meta__shards *ss)
{
    return meta__remote_handle(ss->rt, META_RPC_ENTRY, on_entry_request, ss);
}

/* ------------------------------------------------------------------ fences */

struct fence_wait {
    struct meta_op *op;
    struct meta__shard *s;
    uint32_t epoch;         /* s's range epoch when the fence began */
    uint64_t index;         /* released once this node applied through index */
    int64_t deadline_ms;    /* or failed (503) after this */
    struct mraft_read read; /* the local path */
    struct fence_wait *next;
};

struct meta__fence_q {
    struct fence_wait *pending; /* waiting for the next READ_INDEX call */
    struct fence_wait *sent;    /* riding on the call in flight */
    struct fence_wait *waiting; /* index known, applied not there yet */
    int inflight;               /* a call is out */
    unsigned attempts;          /* of the current batch */
    int64_t deadline_ms;        /* of the current batch's oldest fence */
    uv_timer_t retry;
    uv_timer_t poll; /* FENCE_POLL_MS while fences wait */
    struct meta__shards *ss;
    struct meta__shard *s;
};

static void fence_part_done(struct meta_op *op, int status);

static void fence_queue(struct meta__shards *ss, struct fence_wait *w, struct meta__shard *s);
static struct meta__shard *fence_data_shard(struct meta__shards *ss, const struct meta_op *op);

/* A data shard whose range epoch moved while the fence waited was split: the bucket may
 * live in the child now, whose writes the parent's read index does not cover, so the fence
 * starts again on the bucket's shard as this node now knows it (split.c). */
static void fence_release(struct fence_wait *w, int status)
{
    struct meta_op *op = w->op;
    struct meta__shards *ss = w->s->ss;
    if (status == 0 && w->s->id != 0 && w->epoch != w->s->epoch && !ss->closing) {
        struct meta__shard *s = fence_data_shard(ss, op);
        if (s != NULL) {
            fence_queue(ss, w, s);
            return;
        }
    }
    fence_part_done(op, status);
}

static void fence_kick(struct meta__fence_q *q);

/* A local read that failed with MG_ENOTLEADER (deposed meanwhile) asks the new leader. */
static void on_local_read(struct mraft_read *req, int status)
{
    struct fence_wait *w = req->data;
    struct meta__fence_q *q = &w->s->ss->cl->fences[w->s->id];
    w->s->ss->cl->fences_local++;
    if (status == MG_ENOTLEADER && !q->ss->closing) {
        w->next = q->pending;
        q->pending = w;
        fence_kick(q);
        return;
    }
    fence_release(w, status == 0 ? 0 : MG_ESLOWDOWN);
}

static void on_fence_retry(uv_timer_t *t)
{
    fence_kick(t->data);
}

static void fence_fail_all(struct fence_wait *w, int status)
{
    while (w != NULL) {
        struct fence_wait *n = w->next;
        fence_release(w, status);
        w = n;
    }
}

static void fence_retry_later(struct meta__fence_q *q)
{
    if (meta__now_ms() >= q->deadline_ms || q->ss->closing) {
        struct fence_wait *all = q->sent;
        q->sent = NULL;
        fence_fail_all(all, q->ss->closing ? MG_ESHUTDOWN : MG_ESLOWDOWN);
        q->attempts = 0;
        if (q->pending != NULL)
            fence_kick(q);
        return;
    }
    uv_timer_start(&q->retry, on_fence_retry, backoff_ms(q->attempts), 0);
}

/* Has this node applied every command through index? The leader answers its applied index,
 * which after its own start-up replay may be a barrier's (replay counts every entry), and
 * barriers never reach our apply hook: so also when libraft's last applied index (every
 * entry type, raft_last_applied) passed it and no install defers entries. Not libraft's
 * commit index: a follower learns it before the entries are stored and applied (a node
 * restarted after kill -9 served a stale LIST that way under ASan). */
static int applied_through(struct meta__shard *s, uint64_t index)
{
    if (s->applied >= index)
        return 1;
    if (s->g == NULL || s->reopening || mraft_group_raft(s->g) == NULL)
        return 0;
    struct mraft_group_stats st;
    mraft_group_stats_get(s->g, &st);
    return !st.installing && raft_last_applied(mraft_group_raft(s->g)) >= index;
}

#define FENCE_POLL_MS 20 /* waiting fences whose index is a barrier's are polled */

static void on_fence_poll(uv_timer_t *t);

/* Release the waiting fences whose index this node has applied; fail those past their
 * deadline. Budget: one pass over the waiting list (bounded by the fences in flight). */
static void fence_check(struct meta__fence_q *q)
{
    struct fence_wait **pp = &q->waiting;
    int64_t now = meta__now_ms();
    while (*pp != NULL) {
        struct fence_wait *w = *pp;
        int late = now >= w->deadline_ms;
        if (late || applied_through(q->s, w->index)) {
            *pp = w->next;
            fence_release(w, late ? MG_ESLOWDOWN : 0);
        } else {
            pp = &w->next;
        }
    }
    if (q->waiting != NULL && !uv_is_active((uv_handle_t *)&q->poll) && !q->ss->closing)
        uv_timer_start(&q->poll, on_fence_poll, FENCE_POLL_MS, 0);
}

static void on_fence_poll(uv_timer_t *t)
{
    fence_check(t->data);
}

static void on_read_index(void *data, int status, uint64_t index, uint64_t hint)
{
    (void)hint;
    struct meta__fence_q *q = data;
    q->inflight = 0;
    if (status != 0) {
        fence_retry_later(q); /* not the leader any more, or unreachable: ask again */
        return;
    }
    q->ss->cl->fences_remote++;
    struct fence_wait *w = q->sent;
    q->sent = NULL;
    q->attempts = 0;
    while (w != NULL) {
        struct fence_wait *n = w->next;
        w->index = index;
        w->deadline_ms = q->deadline_ms;
        w->next = q->waiting;
        q->waiting = w;
        w = n;
    }
    fence_check(q);
    if (q->pending != NULL)
        fence_kick(q);
}

/* Start the next step of q: local reads when we lead the shard, else one READ_INDEX call for
 * the whole batch. */
static void fence_kick(struct meta__fence_q *q)
{
    if (q->inflight || uv_is_active((uv_handle_t *)&q->retry))
        return;
    if (q->sent == NULL) {
        q->sent = q->pending;
        q->pending = NULL;
        q->attempts = 0;
        q->deadline_ms = meta__now_ms() + META_ROUTE_DEADLINE_MS;
    }
    if (q->sent == NULL)
        return;
    struct meta__shard *s = q->s;
    if (shard_ready(s)) {
        struct fence_wait *w = q->sent;
        q->sent = NULL;
        while (w != NULL) {
            struct fence_wait *n = w->next;
            w->read.data = w;
            if (mraft_group_read(s->g, &w->read, on_local_read, NULL) != 0)
                fence_release(w, MG_ESLOWDOWN);
            w = n;
        }
        if (q->pending != NULL)
            fence_kick(q);
        return;
    }
    q->attempts++;
    uint64_t leader = s->g != NULL ? mraft_group_leader(s->g, NULL) : 0;
    if (leader == 0 || leader == q->ss->cl->self) {
        fence_retry_later(q);
        return;
    }
    q->ss->cl->read_index_rpcs++;
    if (meta__remote_read_index(q->ss->rt, leader, s->id, META_REMOTE_TIMEOUT_MS, on_read_index,
                                q) != 0) {
        fence_retry_later(q);
        return;
    }
    q->inflight = 1;
}

static void fence_queue(struct meta__shards *ss, struct fence_wait *w, struct meta__shard *s)
{
    struct meta__fence_q *q = &ss->cl->fences[s->id];
    struct meta_op *op = w->op;
    memset(w, 0, sizeof(*w));
    w->op = op;
    w->s = s;
    w->epoch = s->epoch;
    w->next = q->pending;
    q->pending = w;
    fence_kick(q);
}

static void fence_shard(struct meta__shards *ss, struct meta_op *op, struct meta__shard *s)
{
    struct fence_wait *w = mg_arena_alloc(&op->priv->arena, sizeof(*w));
    w->op = op;
    op->priv->step++;
    fence_queue(ss, w, s);
}

static struct meta__shard *fence_data_shard(struct meta__shards *ss, const struct meta_op *op)
{
    if (op->in.bucket.len == 0)
        return NULL;
    struct meta__shard *s = meta__router_home(ss, op); /* a local lookup of the bucket */
    return s->id == 0 ? NULL : s;
}

/* One shard's fence of op is over. When the last is, op completes; a bucket this node did
 * not know before shard 0's fence gets its data shard fenced after it. */
static void fence_part_done(struct meta_op *op, int status)
{
    struct meta__op_priv *p = op->priv;
    struct meta__rt *rt = p->route_rt;
    assert(p->step > 0);
    p->step--;
    if (status != 0 && p->fence_status == 0)
        p->fence_status = status; /* the first failure */
    if (p->step > 0)
        return;
    if (p->fence_status == 0 && !p->fence_data_done) {
        p->fence_data_done = 1;
        struct meta__shard *s = fence_data_shard(rt->shards, op);
        if (s != NULL) {
            p->step++; /* the same guard */
            fence_shard(rt->shards, op, s);
            fence_part_done(op, 0);
            return;
        }
    }
    meta__op_complete(op, p->fence_status);
}

void meta__fence_begin(struct meta__rt *rt, struct meta_op *op)
{
    struct meta__shards *ss = rt->shards;
    struct meta__op_priv *p = op->priv;
    p->route_rt = rt;
    p->fence_status = 0;
    p->step = 1; /* held until both shards are queued: a part may fail at once */
    p->fence_data_done = 0;
    struct meta__shard *data = fence_data_shard(ss, op);
    if (data != NULL) {
        p->fence_data_done = 1;
        fence_shard(ss, op, data);
    }
    fence_shard(ss, op, &ss->shards[0]);
    fence_part_done(op, 0);
}

void meta__fence_applied(struct meta__shard *s)
{
    struct meta__cluster *cl = s->ss->cl;
    if (cl->fences[s->id].waiting != NULL)
        fence_check(&cl->fences[s->id]);
}

/* ------------------------------------------------------------- set-up */

void meta__router_init(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    cl->fences = mg_calloc(META_SHARDS_MAX, sizeof(*cl->fences));
    for (unsigned i = 0; i < META_SHARDS_MAX; i++) {
        struct meta__fence_q *q = &cl->fences[i];
        q->ss = ss;
        q->s = &ss->shards[i];
        uv_timer_init(&ss->rt->loop, &q->retry);
        q->retry.data = q;
        uv_timer_init(&ss->rt->loop, &q->poll);
        q->poll.data = q;
    }
    uv_timer_init(&ss->rt->loop, &cl->retry_timer);
    cl->retry_timer.data = ss->rt;
}

/* Closing: every op waiting for a retry or a fence fails now (MG_ESHUTDOWN). */
void meta__router_stop(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    struct meta__op_priv *p = cl->retry_head;
    cl->retry_head = NULL;
    while (p != NULL) {
        struct meta__op_priv *n = p->next;
        p->next = NULL;
        if (!p->route_unknown)
            release_data(ss->ms, p->op);
        route_finish(ss->rt, p->op, MG_ESHUTDOWN);
        p = n;
    }
    for (unsigned i = 0; i < META_SHARDS_MAX; i++) {
        struct meta__fence_q *q = &cl->fences[i];
        struct fence_wait *a = q->pending, *b = q->waiting, *c = q->inflight ? NULL : q->sent;
        q->pending = q->waiting = NULL;
        if (!q->inflight)
            q->sent = NULL;
        fence_fail_all(a, MG_ESHUTDOWN);
        fence_fail_all(b, MG_ESHUTDOWN);
        fence_fail_all(c, MG_ESHUTDOWN);
        uv_close((uv_handle_t *)&q->retry, NULL);
        uv_close((uv_handle_t *)&q->poll, NULL);
    }
    uv_close((uv_handle_t *)&cl->retry_timer, NULL);
}

void meta__router_destroy(struct meta__cluster *cl)
{
    mg_free(cl->fences);
}

int meta_store_clustered(const struct meta_store *ms)
{
    /* opts.cluster is borrowed by the open only; the shards' copy tells. Set once at open. */
    return ms->rt != NULL && ms->rt->shards != NULL && ms->rt->shards->cl != NULL;
}

struct meta_op *meta_read_fence_create(struct meta_store *ms, struct mg_str bucket)
{
    if (!meta_store_clustered(ms))
        return NULL;
    struct meta_op *op = meta_op_create(META_OP_BUCKET_UPDATE);
    op->type = META_OP__FENCE;
    op->in.bucket = bucket; /* copied at submit */
    return op;
}
