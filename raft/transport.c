/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The multiplexing transport: every group on a host shares ONE listening TCP
 * port (DESIGN.md 12: the stock raft_uv_tcp transport needs a port per group).
 * Each group gets its own struct raft_uv_transport whose connect() opens a TCP
 * connection to the peer host and writes a preamble naming the group; the
 * host's listener reads that preamble and hands the stream to the accept
 * callback of the named group's transport. After the preamble the stream
 * belongs to libraft, which speaks its usual RPC encoding on it.
 *
 * Preamble (little endian): u64 magic "MGRAFT01", u64 group id, u64 sender
 * server id, u64 address length (<= MRAFT__ADDR_MAX), address bytes. The
 * listener reads with buffers sized to exactly the bytes still missing, so it
 * never consumes a byte of libraft's stream.
 *
 * Memory: TCP handles come from raft_malloc because libraft frees the streams
 * it receives with its heap's free (uvRecv, uvClient in libraft 0.15).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "raft"
#include "common/common.h"
#include "raft/internal.h"

#define PREAMBLE_MAGIC 0x313054464152474dULL /* "MGRAFT01" */
#define PREAMBLE_HDR 32
#define MAX_INCOMING 4096 /* bound on connections whose preamble is unread */

struct mraft__incoming {
    struct mraft__net *net;              /* owner */
    uv_tcp_t *tcp;                       /* raft_malloc'd */
    unsigned char hdr[PREAMBLE_HDR];     /* fixed part */
    char addr[MRAFT__ADDR_MAX + 1];      /* sender address, NUL-terminated */
    size_t need;                         /* bytes of the current phase */
    size_t got;                          /* bytes of it received */
    bool in_addr;                        /* reading the address phase */
    bool closing;                        /* uv_close called */
    struct mraft__incoming *prev, *next; /* net->incoming list */
};

struct mraft__conn {
    struct mraft__transport *t;      /* owner */
    struct raft_uv_connect *req;     /* libraft's request */
    uv_tcp_t *tcp;                   /* raft_malloc'd */
    uv_connect_t connect;            /* TCP connect */
    uv_write_t write;                /* preamble write */
    unsigned char pre[PREAMBLE_HDR + MRAFT__ADDR_MAX];
    size_t pre_len;                  /* bytes of pre in use */
    int status;                      /* RAFT_* code once failed */
    bool closing;                    /* uv_close called */
    struct mraft__conn *prev, *next; /* t->connecting list */
};

int mraft__parse_address(const char *address, struct sockaddr_in *sa)
{
    char host[MRAFT__ADDR_MAX];
    const char *colon = strrchr(address, ':');
    if (colon == NULL || (size_t)(colon - address) >= sizeof(host))
        return MG_ECONFIG;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || port <= 0 || port > 65535)
        return MG_ECONFIG;
    if (uv_ip4_addr(host, (int)port, sa) != 0)
        return MG_ECONFIG;
    return 0;
}

/* ---- incoming ------------------------------------------------------------- */

static void incoming_unlink(struct mraft__incoming *in)
{
    if (in->prev != NULL)
        in->prev->next = in->next;
    else
        in->net->incoming = in->next;
    if (in->next != NULL)
        in->next->prev = in->prev;
    in->prev = in->next = NULL;
    in->net->n_incoming--;
}

static void on_incoming_closed(uv_handle_t *h)
{
    struct mraft__incoming *in = h->data;
    struct mraft__net *net = in->net;
    raft_free(in->tcp);
    incoming_unlink(in);
    mg_free(in);
    if (!net->listening && net->incoming == NULL && net->closed_cb != NULL) {
        void (*cb)(struct mraft__net *) = net->closed_cb;
        net->closed_cb = NULL;
        cb(net);
    }
}

static void incoming_close(struct mraft__incoming *in)
{
    if (in->closing)
        return;
    in->closing = true;
    uv_close((uv_handle_t *)in->tcp, on_incoming_closed);
}

static void on_incoming_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct mraft__incoming *in = h->data;
    assert(in->got < in->need);
    char *base = in->in_addr ? in->addr : (char *)in->hdr;
    buf->base = base + in->got;
    buf->len = in->need - in->got;
}

/* The preamble is complete: hand the stream to the named group, if any. */
static void incoming_done(struct mraft__incoming *in)
{
    struct mraft__net *net = in->net;
    uint64_t group_id = mraft__get64(in->hdr + 8);
    uint64_t id = mraft__get64(in->hdr + 16);
    struct mraft__transport *t = net->lookup(net, group_id);
    uv_read_stop((uv_stream_t *)in->tcp);
    if (t == NULL || t->accept_cb == NULL || t->closing || id == 0) {
        mg_log(MG_LOG_DEBUG, "event=preamble_rejected group=%llu from=%llu",
               (unsigned long long)group_id, (unsigned long long)id);
        incoming_close(in);
        return;
    }
    uv_tcp_t *tcp = in->tcp;
    char addr[MRAFT__ADDR_MAX + 1];
    memcpy(addr, in->addr, sizeof(addr));
    incoming_unlink(in);
    mg_free(in);
    tcp->data = NULL;
    t->accept_cb(&t->iface, id, addr, (uv_stream_t *)tcp);
}

static void on_incoming_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct mraft__incoming *in = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        incoming_close(in);
        return;
    }
    in->got += (size_t)nread;
    if (in->got < in->need)
        return;
    if (in->in_addr) {
        in->addr[in->need] = '\0';
        incoming_done(in);
        return;
    }
    uint64_t addr_len = mraft__get64(in->hdr + 24);
    if (mraft__get64(in->hdr) != PREAMBLE_MAGIC || addr_len == 0 || addr_len > MRAFT__ADDR_MAX) {
        mg_log(MG_LOG_WARN, "event=bad_preamble");
        incoming_close(in);
        return;
    }
    in->in_addr = true;
    in->need = (size_t)addr_len;
    in->got = 0;
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct mraft__net *net = listener->data;
    if (status != 0) {
        mg_log(MG_LOG_WARN, "event=accept_failed err=%s", uv_strerror(status));
        return;
    }
    struct mraft__incoming *in = mg_calloc(1, sizeof(*in));
    in->net = net;
    in->tcp = raft_malloc(sizeof(*in->tcp));
    in->need = PREAMBLE_HDR;
    uv_tcp_init(net->loop, in->tcp);
    in->tcp->data = in;
    in->next = net->incoming;
    if (net->incoming != NULL)
        net->incoming->prev = in;
    net->incoming = in;
    net->n_incoming++;
    if (uv_accept(listener, (uv_stream_t *)in->tcp) != 0 || net->n_incoming > MAX_INCOMING) {
        incoming_close(in);
        return;
    }
    uv_tcp_nodelay(in->tcp, 1);
    if (uv_read_start((uv_stream_t *)in->tcp, on_incoming_alloc, on_incoming_read) != 0)
        incoming_close(in);
}

int mraft__net_listen(struct mraft__net *net, uv_loop_t *loop, const char *address)
{
    struct sockaddr_in sa;
    int rv = mraft__parse_address(address, &sa);
    if (rv != 0)
        return rv;
    net->loop = loop;
    uv_tcp_init(loop, &net->listener);
    net->listener.data = net;
    net->listening = true;
    rv = uv_tcp_bind(&net->listener, (const struct sockaddr *)&sa, 0);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)&net->listener, 1024, on_connection);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=listen_failed address=%s err=%s", address, uv_strerror(rv));
        return MG_EIO;
    }
    return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
    struct mraft__net *net = h->data;
    net->listening = false;
    if (net->incoming == NULL && net->closed_cb != NULL) {
        void (*cb)(struct mraft__net *) = net->closed_cb;
        net->closed_cb = NULL;
        cb(net);
    }
}

/* Close the listener (which must have been initialized by net_listen, even if
 * bind failed) and every half-open incoming connection. */
void mraft__net_close(struct mraft__net *net, void (*cb)(struct mraft__net *net))
{
    net->closed_cb = cb;
    for (struct mraft__incoming *in = net->incoming; in != NULL; in = in->next)
        incoming_close(in);
    uv_close((uv_handle_t *)&net->listener, on_listener_closed);
}

/* ---- outgoing --------------------------------------------------------------- */

static void maybe_closed(struct mraft__transport *t)
{
    if (t->closing && !t->defer_open && t->connecting == NULL && t->close_cb != NULL) {
        raft_uv_transport_close_cb cb = t->close_cb;
        t->close_cb = NULL;
        cb(&t->iface);
    }
}

static void conn_unlink(struct mraft__conn *c)
{
    struct mraft__transport *t = c->t;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        t->connecting = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct mraft__conn *c = h->data;
    struct mraft__transport *t = c->t;
    struct raft_uv_connect *req = c->req;
    int status = c->status;
    assert(status != 0);
    raft_free(c->tcp);
    conn_unlink(c);
    mg_free(c);
    req->cb(req, NULL, status);
    maybe_closed(t);
}

static void conn_fail(struct mraft__conn *c, int status)
{
    if (c->closing)
        return;
    c->closing = true;
    c->status = status;
    uv_close((uv_handle_t *)c->tcp, on_conn_closed);
}

static void on_preamble_written(uv_write_t *w, int status)
{
    struct mraft__conn *c = w->data;
    if (c->closing)
        return; /* on_conn_closed finishes */
    if (status != 0) {
        conn_fail(c, RAFT_NOCONNECTION);
        return;
    }
    struct mraft__transport *t = c->t;
    struct raft_uv_connect *req = c->req;
    uv_tcp_t *tcp = c->tcp;
    conn_unlink(c);
    mg_free(c);
    tcp->data = NULL;
    req->cb(req, (uv_stream_t *)tcp, 0);
    maybe_closed(t);
}

static void on_connected(uv_connect_t *cr, int status)
{
    struct mraft__conn *c = cr->data;
    if (c->closing)
        return;
    if (status != 0) {
        conn_fail(c, RAFT_NOCONNECTION);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)c->pre, (unsigned)c->pre_len);
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)c->tcp, &b, 1, on_preamble_written) != 0)
        conn_fail(c, RAFT_NOCONNECTION);
}

static int transport_connect(struct raft_uv_transport *iface, struct raft_uv_connect *req,
                             raft_id id, const char *address, raft_uv_connect_cb cb)
{
    struct mraft__transport *t = iface->impl;
    struct sockaddr_in sa;
    size_t alen = strlen(t->address);
    if (t->closing)
        return RAFT_CANCELED;
    if (mraft__parse_address(address, &sa) != 0)
        return RAFT_NOCONNECTION;
    struct mraft__conn *c = mg_calloc(1, sizeof(*c));
    c->t = t;
    c->req = req;
    req->cb = cb;
    mraft__put64(c->pre, PREAMBLE_MAGIC);
    mraft__put64(c->pre + 8, t->group_id);
    mraft__put64(c->pre + 16, t->id);
    mraft__put64(c->pre + 24, alen);
    memcpy(c->pre + PREAMBLE_HDR, t->address, alen);
    c->pre_len = PREAMBLE_HDR + alen;
    c->tcp = raft_malloc(sizeof(*c->tcp));
    uv_tcp_init(t->net->loop, c->tcp);
    c->tcp->data = c;
    c->connect.data = c;
    c->next = t->connecting;
    if (t->connecting != NULL)
        t->connecting->prev = c;
    t->connecting = c;
    uv_tcp_nodelay(c->tcp, 1);
    if (uv_tcp_connect(&c->connect, c->tcp, (const struct sockaddr *)&sa, on_connected) != 0)
        conn_fail(c, RAFT_NOCONNECTION); /* cb fires from on_conn_closed */
    return 0;
}

static int transport_init(struct raft_uv_transport *iface, raft_id id, const char *address)
{
    struct mraft__transport *t = iface->impl;
    if (strlen(address) > MRAFT__ADDR_MAX - 1)
        return RAFT_NAMETOOLONG;
    t->id = id;
    snprintf(t->address, sizeof(t->address), "%s", address);
    return 0;
}

static int transport_listen(struct raft_uv_transport *iface, raft_uv_accept_cb cb)
{
    struct mraft__transport *t = iface->impl;
    t->accept_cb = cb;
    return 0;
}

static void on_defer_closed(uv_handle_t *h)
{
    struct mraft__transport *t = h->data;
    t->defer_open = false;
    maybe_closed(t);
}

/* Stop accepting for this group, cancel connects in progress, and fire cb
 * asynchronously once none is left (raft/uv.h contract of close()). */
static void transport_close(struct raft_uv_transport *iface, raft_uv_transport_close_cb cb)
{
    struct mraft__transport *t = iface->impl;
    assert(!t->closing);
    t->closing = true;
    t->accept_cb = NULL;
    t->close_cb = cb;
    for (struct mraft__conn *c = t->connecting; c != NULL; c = c->next)
        conn_fail(c, RAFT_CANCELED);
    uv_timer_init(t->net->loop, &t->defer);
    t->defer.data = t;
    t->defer_open = true;
    uv_close((uv_handle_t *)&t->defer, on_defer_closed);
}

void mraft__transport_init(struct mraft__transport *t, struct mraft__net *net, uint64_t group_id)
{
    memset(t, 0, sizeof(*t));
    t->net = net;
    t->group_id = group_id;
    t->iface.impl = t;
    t->iface.init = transport_init;
    t->iface.listen = transport_listen;
    t->iface.connect = transport_connect;
    t->iface.close = transport_close;
}
