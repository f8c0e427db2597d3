/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The op over the wire (meta/remote.h): one struct meta__remote per runtime,
 * created on first use, holding the RPC server, the method table, the node id
 * -> peer map and a meta_client on the meta loop itself, through which
 * forwarded ops are submitted exactly as a local client's (same bounded
 * queue, parking, dedup, proposal) and complete back on the meta loop, where
 * their results are encoded and the call answered.
 *
 * struct meta__rt has no slot for this state, so a small registry keyed by
 * the runtime holds it (looked up under a mutex: a runtime's calls all come
 * from its meta thread, but several stores may live in one process). The
 * registry costs one lock per call, nothing next to a Raft commit.
 *
 * Closing (meta__remote_close): the server and peers go at once (calls not
 * answered are dropped, outstanding client calls fail with MG_ESHUTDOWN);
 * read fences still queued in a raft group are detached (their callback only
 * frees them); forwarded ops still executing are waited for, because they
 * complete through this state's meta_client.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "meta"
#include "meta/opcodec.h"
#include "meta/remote.h"
#include "meta/shard.h"

struct node_peer {
    uint64_t id;
    char addr[64];
    struct mrpc_peer *peer; /* NULL until the first call */
};

struct read_req;

struct meta__remote {
    struct meta__rt *rt;
    struct mrpc_server *server;
    struct meta_client *client;  /* on rt's loop: forwarded ops complete here */
    struct {
        meta__remote_handler_fn fn;
        void *data;
    } methods[META_RPC__MAX];
    struct node_peer *nodes;
    size_t nnodes, capnodes;
    unsigned timeout_ms;
    uint64_t id_prefix;          /* high 16 bits of the request ids assigned here: 0x8000 | this
                                    node's id (the router's are id << 48), or random */
    uint64_t next_request_id;
    uint64_t ops_inflight;       /* forwarded ops submitted, not completed */
    struct read_req *reads;      /* read fences queued in a raft group */
    unsigned closes;             /* handles still closing */
    int closing;
    void (*close_cb)(struct meta__rt *rt);
    struct meta__remote *next;   /* registry */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct meta__remote *g_remotes;

static void on_op_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                          const void *payload, size_t len);
static void on_read_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                            const void *payload, size_t len);

/* The state of rt, created when create is set (else NULL if none). */
static struct meta__remote *remote_of(struct meta__rt *rt, int create)
{
    pthread_mutex_lock(&g_lock);
    struct meta__remote *r = g_remotes;
    while (r != NULL && r->rt != rt)
        r = r->next;
    if (r == NULL && create) {
        r = mg_calloc(1, sizeof(*r));
        r->rt = rt;
        r->timeout_ms = META_REMOTE_TIMEOUT_MS;
        r->methods[META_RPC_OP].fn = on_op_request;
        r->methods[META_RPC_READ_INDEX].fn = on_read_request;
        /* As the router's (meta/cluster.c): ids never repeat across restarts, so the counter
         * starts at the wall clock in microseconds (uv_hrtime restarts near 0 at boot and its
         * low 32 bits wrap every 4.3 s, so a restarted node could reuse an id the replicas'
         * dedup tables answer "done" without applying). */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r->next_request_id =
            ((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u) & 0xffffffffffffull;
        r->id_prefix = 0x8000 | ((uv_hrtime() ^ (uintptr_t)r) & 0x7fff);
        r->next = g_remotes;
        g_remotes = r;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static void remote_unregister(struct meta__remote *r)
{
    pthread_mutex_lock(&g_lock);
    struct meta__remote **pp = &g_remotes;
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
    pthread_mutex_unlock(&g_lock);
}

static void put_u64le(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ------------------------------------------------------------------ server */

static void on_request(void *data, struct mrpc_call *call, uint16_t method, const void *payload,
                       size_t len)
{
    struct meta__remote *r = data;
    if (method >= META_RPC__MAX || r->methods[method].fn == NULL) {
        mrpc_reply(call, MG_ENOTIMPLEMENTED, NULL, 0);
        return;
    }
    r->methods[method].fn(r->rt, r->methods[method].data, call, payload, len);
}

struct op_req {
    struct meta__remote *r;
    struct mrpc_call *call;
};

static void remote_maybe_closed(struct meta__remote *r);

static void on_op_done(struct meta_op *op)
{
    struct op_req *q = op->data;
    struct meta__remote *r = q->r;
    struct mg_buf b;
    mg_buf_init(&b);
    meta__opcodec_encode_out(op, op->status, &b);
    mrpc_reply(q->call, 0, b.base, b.len);
    mg_buf_close(&b);
    meta_op_destroy(op);
    assert(r->ops_inflight > 0);
    r->ops_inflight--;
    if (r->closing)
        remote_maybe_closed(r);
}

/* META_RPC_OP: decode, submit like a local client, answer when it completed. */
static void on_op_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                          const void *payload, size_t len)
{
    (void)data;
    struct meta__remote *r = remote_of(rt, 0);
    struct meta_op *op = NULL;
    if (r == NULL || r->closing || r->client == NULL) {
        mrpc_reply(call, MG_ESHUTDOWN, NULL, 0);
        return;
    }
    if (meta__opcodec_decode_in(payload, len, &op) != 0) {
        mg_log(MG_LOG_WARN, "event=remote_op_undecodable bytes=%zu", len);
        mrpc_reply(call, MG_EBADREQUEST, NULL, 0);
        return;
    }
    struct op_req *q = mg_arena_alloc(&op->priv->arena, sizeof(*q));
    q->r = r;
    q->call = call;
    op->data = q;
    /* The strings of op borrow payload until this copies them (client.c copy_args). */
    int rv = meta_op_submit(r->client, op, on_op_done);
    if (rv != 0) {
        /* Never ran: the caller keeps its data and may retry. */
        meta_op_destroy(op);
        mrpc_reply(call, rv, NULL, 0);
        return;
    }
    r->ops_inflight++;
}

struct read_req {
    struct mraft_read req;       /* first */
    struct meta__remote *r;      /* NULL once detached by close */
    struct mrpc_call *call;
    struct mraft_group *g;
    struct read_req *prev, *next; /* r->reads */
};

static void read_unlink(struct read_req *q)
{
    if (q->r == NULL)
        return;
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        q->r->reads = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
}

static void reply_u64(struct mrpc_call *call, int status, uint64_t v)
{
    uint8_t b[8];
    put_u64le(b, v);
    mrpc_reply(call, status, b, sizeof(b));
}

static void on_read_confirmed(struct mraft_read *req, int status)
{
    struct read_req *q = (struct read_req *)req;
    read_unlink(q);
    if (status == 0)
        reply_u64(q->call, 0, mraft_group_applied(q->g));
    else if (status == MG_ENOTLEADER)
        reply_u64(q->call, MG_ENOTLEADER, mraft_group_leader(q->g, NULL));
    else
        mrpc_reply(q->call, status, NULL, 0);
    mg_free(q);
}

/* The group of shard id on this node, or NULL. */
static struct meta__shard *shard_by_id(struct meta__rt *rt, uint32_t id)
{
    struct meta__shards *ss = rt->shards;
    for (unsigned i = 0; ss != NULL && i < ss->n; i++)
        if (ss->shards[i].id == id)
            return &ss->shards[i];
    return NULL;
}

/* META_RPC_READ_INDEX: a barrier of this leader's term, then its applied index. */
static void on_read_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                            const void *payload, size_t len)
{
    (void)data;
    if (len != 4) {
        mrpc_reply(call, MG_EBADREQUEST, NULL, 0);
        return;
    }
    const uint8_t *p = payload;
    uint32_t id = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                  (uint32_t)p[3] << 24;
    struct meta__shards *ss = rt->shards;
    struct meta__shard *s = shard_by_id(rt, id);
    if (s == NULL) {
        mrpc_reply(call, ss == NULL || ss->closing ? MG_ESHUTDOWN : MG_ENOTFOUND, NULL, 0);
        return;
    }
    if (s->g == NULL || s->reopening || ss->closing) {
        reply_u64(call, MG_ENOTLEADER, 0);
        return;
    }
    struct meta__remote *r = remote_of(rt, 0);
    struct read_req *q = mg_calloc(1, sizeof(*q));
    q->call = call;
    q->g = s->g;
    uint64_t hint = 0;
    int rv = mraft_group_read(s->g, &q->req, on_read_confirmed, &hint);
    if (rv != 0) {
        mg_free(q);
        if (rv == MG_ENOTLEADER)
            reply_u64(call, rv, hint);
        else
            mrpc_reply(call, rv, NULL, 0);
        return;
    }
    q->r = r;
    if (r != NULL) {
        q->next = r->reads;
        if (r->reads != NULL)
            r->reads->prev = q;
        r->reads = q;
    }
}

int meta__remote_listen(struct meta__rt *rt, const char *address)
{
    struct meta__remote *r = remote_of(rt, 1);
    if (r->server != NULL || r->closing)
        return MG_EINVALIDARGUMENT;
    const struct meta_cluster_opts *cl = rt->ms->opts.cluster;
    if (cl != NULL) {
        r->id_prefix = 0x8000 | (cl->node_id & 0x7fff);
        for (unsigned i = 0; i < cl->n; i++)
            if (cl->nodes[i].rpc != NULL && cl->nodes[i].id != cl->node_id)
                meta__remote_set_node(rt, cl->nodes[i].id, cl->nodes[i].rpc);
    }
    int rv = mrpc_server_create(&rt->loop, address, on_request, r, &r->server);
    if (rv != 0)
        return rv;
    if (r->client == NULL && meta_client_create(rt->ms, &rt->loop, &r->client) != 0) {
        r->client = NULL;
        mrpc_server_destroy(r->server, NULL, NULL);
        r->server = NULL;
        return MG_EIO;
    }
    mg_log(MG_LOG_INFO, "event=remote_listen address=%s port=%d", address,
           mrpc_server_port(r->server));
    return 0;
}

int meta__remote_port(struct meta__rt *rt)
{
    struct meta__remote *r = remote_of(rt, 0);
    return r != NULL && r->server != NULL ? mrpc_server_port(r->server) : 0;
}

int meta__remote_handle(struct meta__rt *rt, uint16_t method, meta__remote_handler_fn fn,
                        void *data)
{
    if (method >= META_RPC__MAX || fn == NULL)
        return MG_EINVALIDARGUMENT;
    struct meta__remote *r = remote_of(rt, 1);
    r->methods[method].fn = fn;
    r->methods[method].data = data;
    return 0;
}

void meta__remote_set_timeout(struct meta__rt *rt, unsigned timeout_ms)
{
    remote_of(rt, 1)->timeout_ms = timeout_ms;
}

/* ------------------------------------------------------------------ client */

/* A server or peer of r finished closing. */
static void on_peer_closed(void *data)
{
    struct meta__remote *r = data;
    assert(r->closes > 0);
    r->closes--;
    if (r->closing)
        remote_maybe_closed(r);
}

static struct node_peer *node_find(struct meta__remote *r, uint64_t id)
{
    for (size_t i = 0; i < r->nnodes; i++)
        if (r->nodes[i].id == id)
            return &r->nodes[i];
    return NULL;
}

void meta__remote_set_node(struct meta__rt *rt, uint64_t node_id, const char *rpc_address)
{
    struct meta__remote *r = remote_of(rt, 1);
    assert(rpc_address != NULL && !r->closing);
    struct node_peer *n = node_find(r, node_id);
    if (n == NULL) {
        if (r->nnodes == r->capnodes) {
            r->capnodes = r->capnodes ? 2 * r->capnodes : 8;
            r->nodes = mg_realloc(r->nodes, r->capnodes * sizeof(*r->nodes));
        }
        n = &r->nodes[r->nnodes++];
        memset(n, 0, sizeof(*n));
        n->id = node_id;
    } else if (n->peer != NULL) {
        if (strcmp(n->addr, rpc_address) == 0)
            return;
        r->closes++;
        mrpc_peer_destroy(n->peer, on_peer_closed, r);
        n->peer = NULL;
    }
    snprintf(n->addr, sizeof(n->addr), "%s", rpc_address);
}

/* node_id's peer, created on first use. */
static int peer_of(struct meta__rt *rt, uint64_t node_id, struct meta__remote **rr,
                   struct mrpc_peer **out)
{
    struct meta__remote *r = remote_of(rt, 1);
    *rr = r;
    if (r->closing)
        return MG_ESHUTDOWN;
    struct node_peer *n = node_find(r, node_id);
    if (n == NULL)
        return MG_ENOTFOUND;
    if (n->peer == NULL) {
        int rv = mrpc_peer_create(&rt->loop, n->addr, NULL, &n->peer);
        if (rv != 0) {
            mg_log(MG_LOG_ERROR, "event=remote_bad_address node=%llu address=%s",
                   (unsigned long long)node_id, n->addr);
            n->peer = NULL;
            return MG_ENOTFOUND;
        }
    }
    *out = n->peer;
    return 0;
}

int meta__remote_call(struct meta__rt *rt, uint64_t node_id, uint16_t method,
                      const void *payload, size_t len, unsigned timeout_ms, mrpc_cb cb,
                      void *data)
{
    struct meta__remote *r;
    struct mrpc_peer *p;
    int rv = peer_of(rt, node_id, &r, &p);
    if (rv != 0)
        return rv;
    return mrpc_call(p, method, payload, len, timeout_ms, cb, data);
}

struct exec_req {
    struct meta_op *op;
    void (*done)(struct meta_op *op, int status);
};

static void on_exec_reply(void *data, int status, const void *payload, size_t len)
{
    struct exec_req *q = data;
    struct meta_op *op = q->op;
    void (*done)(struct meta_op *, int) = q->done;
    mg_free(q);
    if (status == 0) {
        int st = 0;
        if (meta__opcodec_decode_out(payload, len, op, &st) != 0) {
            mg_log(MG_LOG_ERROR, "event=remote_reply_undecodable op=%d bytes=%zu",
                   (int)op->type, len);
            st = MG_ECORRUPT;
        }
        status = st;
    }
    done(op, status);
}

int meta__remote_exec(struct meta__rt *rt, uint64_t node_id, struct meta_op *op,
                      void (*done)(struct meta_op *op, int status))
{
    assert(op != NULL && done != NULL && (unsigned)op->type < META_OP__COUNT);
    struct meta__remote *r;
    struct mrpc_peer *p;
    int rv = peer_of(rt, node_id, &r, &p);
    if (rv != 0)
        return rv;
    if (op->in.request_id == 0) /* every public op is a mutation: make its retries dedup */
        op->in.request_id = r->id_prefix << 48 | (++r->next_request_id & 0xffffffffffffULL);
    struct mg_buf b;
    mg_buf_init(&b);
    meta__opcodec_encode_in(op, &b);
    struct exec_req *q = mg_malloc(sizeof(*q));
    q->op = op;
    q->done = done;
    rv = mrpc_call(p, META_RPC_OP, b.base, b.len, r->timeout_ms, on_exec_reply, q);
    mg_buf_close(&b);
    if (rv != 0)
        mg_free(q);
    return rv;
}

struct read_call {
    meta__remote_read_cb cb;
    void *data;
};

static void on_read_reply(void *data, int status, const void *payload, size_t len)
{
    struct read_call *q = data;
    meta__remote_read_cb cb = q->cb;
    void *cbdata = q->data;
    mg_free(q);
    uint64_t v = len == 8 ? get_u64le(payload) : 0;
    if ((status == 0 || status == MG_ENOTLEADER) && len != 8)
        status = status == 0 ? MG_ECORRUPT : status; /* a leader hint is optional */
    if (status == 0)
        cb(cbdata, 0, v, 0);
    else
        cb(cbdata, status, 0, status == MG_ENOTLEADER ? v : 0);
}

int meta__remote_read_index(struct meta__rt *rt, uint64_t node_id, uint32_t shard_id,
                            unsigned timeout_ms, meta__remote_read_cb cb, void *data)
{
    assert(cb != NULL);
    uint8_t b[4] = {(uint8_t)shard_id, (uint8_t)(shard_id >> 8), (uint8_t)(shard_id >> 16),
                    (uint8_t)(shard_id >> 24)};
    struct read_call *q = mg_malloc(sizeof(*q));
    q->cb = cb;
    q->data = data;
    int rv = meta__remote_call(rt, node_id, META_RPC_READ_INDEX, b, sizeof(b), timeout_ms,
                               on_read_reply, q);
    if (rv != 0)
        mg_free(q);
    return rv;
}

/* ------------------------------------------------------------------- close */

static void remote_maybe_closed(struct meta__remote *r)
{
    if (r->ops_inflight > 0 || r->closes > 0)
        return;
    struct meta__rt *rt = r->rt;
    void (*cb)(struct meta__rt *) = r->close_cb;
    if (r->client != NULL)
        meta_client_destroy(r->client); /* no op of it is outstanding */
    remote_unregister(r);
    mg_free(r->nodes);
    mg_free(r);
    if (cb != NULL)
        cb(rt);
}

void meta__remote_close(struct meta__rt *rt, void (*cb)(struct meta__rt *rt))
{
    struct meta__remote *r = remote_of(rt, 0);
    if (r == NULL) {
        if (cb != NULL)
            cb(rt);
        return;
    }
    assert(!r->closing);
    r->closing = 1;
    r->close_cb = cb;
    if (r->server != NULL) {
        r->closes++;
        mrpc_server_destroy(r->server, on_peer_closed, r);
        r->server = NULL;
    }
    for (size_t i = 0; i < r->nnodes; i++) {
        if (r->nodes[i].peer == NULL)
            continue;
        r->closes++;
        mrpc_peer_destroy(r->nodes[i].peer, on_peer_closed, r);
        r->nodes[i].peer = NULL;
    }
    for (struct read_req *q = r->reads; q != NULL; q = q->next)
        q->r = NULL; /* their callbacks still answer (dropped) and free them */
    r->reads = NULL;
    remote_maybe_closed(r);
}
