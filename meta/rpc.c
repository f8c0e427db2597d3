/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The internal RPC (meta/rpc.h): frames, the byte pipe both ends share
 * (struct wire: a TCP handle, the bytes read and not yet parsed, and two
 * output buffers so that frames queued while a write is in flight go out in
 * one uv_write: pipelined calls cost one syscall per batch, not per call),
 * the server (connections, calls, backpressure) and the peer (one connection
 * at a time, calls by id in a chained hash table, one deadline timer, the
 * reconnect backoff).
 *
 * Sketch (loopback, 2 cores): a small call is 24 + ~100 bytes each way; the
 * cost is the loop iteration and the handler, not the bytes, so replies and
 * requests are batched per loop turn; a 64 MiB payload bound keeps one frame
 * from taking the process's memory, and each connection's memory is its
 * unparsed input (<= one frame + one read) plus its queued output.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "meta"
#include "common/common.h"
#include "meta/rpc.h"

#define READ_CHUNK 65536
#define SERVER_CONNS_MAX 4096
#define BUF_KEEP_MAX (1u << 20) /* an idle buffer larger than this is freed */

/* ------------------------------------------------------------------ frame */

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

void mrpc_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void mrpc_put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t mrpc_get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t mrpc_get64(const unsigned char *p)
{
    return (uint64_t)mrpc_get32(p) | (uint64_t)mrpc_get32(p + 4) << 32;
}

void mrpc_hdr_encode(const struct mrpc_hdr *h, unsigned char out[MRPC_HDR_LEN])
{
    assert(h->kind == MRPC_KIND_REQUEST || h->kind == MRPC_KIND_RESPONSE);
    assert(h->len <= MRPC_PAYLOAD_MAX && h->status >= 0);
    assert(h->kind == MRPC_KIND_RESPONSE || h->status == 0);
    mrpc_put32(out, MRPC_MAGIC);
    out[4] = MRPC_VERSION;
    out[5] = h->kind;
    put16(out + 6, h->method);
    mrpc_put64(out + 8, h->call_id);
    mrpc_put32(out + 16, (uint32_t)h->status);
    mrpc_put32(out + 20, h->len);
}

int mrpc_frame_parse(const void *buf, size_t len, struct mrpc_hdr *h, size_t *frame_len)
{
    const unsigned char *p = buf;
    *frame_len = 0;
    if (len < MRPC_HDR_LEN)
        return 0;
    if (mrpc_get32(p) != MRPC_MAGIC || p[4] != MRPC_VERSION)
        return MG_ECORRUPT;
    h->kind = p[5];
    h->method = (uint16_t)(p[6] | p[7] << 8);
    h->call_id = mrpc_get64(p + 8);
    uint32_t status = mrpc_get32(p + 16);
    h->len = mrpc_get32(p + 20);
    if (h->kind != MRPC_KIND_REQUEST && h->kind != MRPC_KIND_RESPONSE)
        return MG_ECORRUPT;
    if (status > INT32_MAX || (h->kind == MRPC_KIND_REQUEST && status != 0))
        return MG_ECORRUPT;
    h->status = (int32_t)status;
    if (h->len > MRPC_PAYLOAD_MAX)
        return MG_EENTITYTOOLARGE;
    if (len - MRPC_HDR_LEN >= h->len)
        *frame_len = MRPC_HDR_LEN + (size_t)h->len;
    return 0;
}

static int parse_address(const char *address, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = address != NULL ? strrchr(address, ':') : NULL;
    if (colon == NULL || colon == address || (size_t)(colon - address) >= sizeof(host))
        return MG_ECONFIG;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || port < 0 || port > 65535)
        return MG_ECONFIG;
    return uv_ip4_addr(host, (int)port, sa) == 0 ? 0 : MG_ECONFIG;
}

/* ------------------------------------------------------------------- wire */

struct wire;
struct wire_ops {
    /* A whole frame; payload borrowed for the call. */
    void (*frame)(struct wire *w, const struct mrpc_hdr *h, const void *payload);
    /* Read error, EOF, a refused frame, a failed write: the owner closes the wire. */
    void (*fail)(struct wire *w, int err);
    /* A write completed (output buffers shrank). May be NULL. */
    void (*written)(struct wire *w);
};

struct wire {
    uv_tcp_t tcp;
    const struct wire_ops *ops;
    struct mg_buf in;   /* bytes read, from in_off on not parsed yet */
    size_t in_off;
    struct mg_buf out;  /* frames queued behind the write in flight */
    struct mg_buf wbuf; /* the write in flight */
    uv_write_t wreq;
    int open;           /* connected: writes may start */
    int writing;        /* wreq in flight */
    int paused;         /* the owner holds parsing (backpressure) */
    int parsing;        /* inside wire_parse */
    int failed;         /* ops->fail ran: nothing more is parsed or written */
};

static void wire_init(struct wire *w, const struct wire_ops *ops)
{
    memset(w, 0, sizeof(*w));
    w->ops = ops;
    mg_buf_init(&w->in);
    mg_buf_init(&w->out);
    mg_buf_init(&w->wbuf);
}

static void wire_free_bufs(struct wire *w)
{
    mg_buf_close(&w->in);
    mg_buf_close(&w->out);
    mg_buf_close(&w->wbuf);
}

static void wire_fail(struct wire *w, int err)
{
    if (w->failed)
        return;
    w->failed = 1;
    w->ops->fail(w, err);
}

static size_t wire_queued(const struct wire *w)
{
    return w->out.len + w->wbuf.len;
}

static void wire_flush(struct wire *w);

static void on_wire_written(uv_write_t *req, int status)
{
    struct wire *w = req->data;
    w->writing = 0;
    w->wbuf.len = 0;
    if (w->wbuf.cap > BUF_KEEP_MAX)
        mg_buf_close(&w->wbuf);
    if (status != 0) {
        wire_fail(w, MG_EIO);
        return;
    }
    if (w->failed)
        return;
    wire_flush(w);
    if (w->ops->written != NULL)
        w->ops->written(w);
}

/* Start writing what is queued, if nothing is in flight. */
static void wire_flush(struct wire *w)
{
    if (!w->open || w->writing || w->failed || w->out.len == 0)
        return;
    struct mg_buf t = w->wbuf;
    w->wbuf = w->out;
    w->out = t;
    uv_buf_t b = {.base = w->wbuf.base, .len = w->wbuf.len}; /* uv_buf_init takes an unsigned */
    w->wreq.data = w;
    int rv = uv_write(&w->wreq, (uv_stream_t *)&w->tcp, &b, 1, on_wire_written);
    if (rv != 0) {
        w->wbuf.len = 0;
        wire_fail(w, MG_EIO);
        return;
    }
    w->writing = 1;
}

/* Queue one frame (and write it when possible). */
static void wire_send(struct wire *w, const struct mrpc_hdr *h, const void *payload)
{
    unsigned char hb[MRPC_HDR_LEN];
    mrpc_hdr_encode(h, hb);
    mg_buf_reserve(&w->out, MRPC_HDR_LEN + h->len);
    mg_buf_append(&w->out, hb, sizeof(hb));
    mg_buf_append(&w->out, payload, h->len);
    wire_flush(w);
}

/* Hand every whole frame buffered to the owner, until it pauses or the wire fails. */
static void wire_parse(struct wire *w)
{
    if (w->parsing)
        return; /* the outer loop goes on */
    w->parsing = 1;
    while (!w->paused && !w->failed) {
        struct mrpc_hdr h;
        size_t flen;
        int rv = mrpc_frame_parse(w->in.base + w->in_off, w->in.len - w->in_off, &h, &flen);
        if (rv != 0) {
            mg_log(MG_LOG_WARN, "event=rpc_bad_frame err=%s", mg_err_name(rv));
            wire_fail(w, rv);
            break;
        }
        if (flen == 0)
            break;
        const char *payload = w->in.base + w->in_off + MRPC_HDR_LEN;
        w->in_off += flen;
        w->ops->frame(w, &h, payload);
    }
    w->parsing = 0;
    if (w->in_off == w->in.len) {
        w->in.len = w->in_off = 0;
        if (w->in.cap > BUF_KEEP_MAX)
            mg_buf_close(&w->in);
    }
}

/* Drop the parsed bytes (only between parses: payloads point into in). */
static void wire_compact(struct wire *w)
{
    if (w->in_off == 0)
        return;
    memmove(w->in.base, w->in.base + w->in_off, w->in.len - w->in_off);
    w->in.len -= w->in_off;
    w->in_off = 0;
}

static void on_wire_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct wire *w = hd->data;
    wire_compact(w);
    mg_buf_reserve(&w->in, READ_CHUNK);
    buf->base = w->in.base + w->in.len;
    buf->len = w->in.cap - w->in.len - 1; /* mg_buf keeps a byte for its NUL */
}

static void on_wire_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    struct wire *w = s->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        wire_fail(w, MG_EIO);
        return;
    }
    if (w->failed)
        return;
    w->in.len += (size_t)nread;
    wire_parse(w);
}

static int wire_read_start(struct wire *w)
{
    return uv_read_start((uv_stream_t *)&w->tcp, on_wire_alloc, on_wire_read);
}

/* ----------------------------------------------------------------- server */

struct sconn {
    struct wire w;              /* first: a wire pointer is a connection pointer */
    struct mrpc_server *s;
    struct mrpc_call *calls;    /* unanswered, newest first */
    unsigned inflight;
    unsigned max_inflight;
    int reading;                /* uv_read_start in force */
    int closing;
    struct sconn *prev, *next;  /* s->conns */
};

struct mrpc_call {
    struct sconn *c;            /* NULL once the connection is gone */
    uint64_t id;
    uint16_t method;
    struct mrpc_call *prev, *next;
};

struct mrpc_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    mrpc_handler_fn handler;
    void *data;
    unsigned max_inflight;
    int port;
    struct sconn *conns;
    unsigned nconns;
    int destroying;
    int listener_open;
    void (*destroy_cb)(void *data);
    void *destroy_data;
};

static void server_maybe_freed(struct mrpc_server *s)
{
    if (!s->destroying || s->listener_open || s->conns != NULL)
        return;
    void (*cb)(void *) = s->destroy_cb;
    void *data = s->destroy_data;
    mg_free(s);
    if (cb != NULL)
        cb(data);
}

static void on_sconn_closed(uv_handle_t *hd)
{
    struct sconn *c = hd->data;
    struct mrpc_server *s = c->s;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->nconns--;
    wire_free_bufs(&c->w);
    mg_free(c);
    server_maybe_freed(s);
}

static void sconn_close(struct sconn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->w.failed = 1;
    for (struct mrpc_call *k = c->calls; k != NULL; k = k->next)
        k->c = NULL; /* their replies are dropped */
    c->calls = NULL;
    uv_close((uv_handle_t *)&c->w.tcp, on_sconn_closed);
}

/* Backpressure: read (and parse) only while the connection is under its bounds. */
static void sconn_throttle(struct sconn *c)
{
    if (c->closing)
        return;
    if (c->inflight >= c->max_inflight || wire_queued(&c->w) > MRPC_OUT_MAX) {
        if (c->reading)
            uv_read_stop((uv_stream_t *)&c->w.tcp);
        c->reading = 0;
        c->w.paused = 1;
        return;
    }
    if (!c->w.paused)
        return;
    c->w.paused = 0;
    wire_parse(&c->w); /* frames buffered before the pause (a no-op when nested in it) */
    if (c->closing || c->w.paused || c->reading)
        return;
    if (wire_read_start(&c->w) != 0) {
        sconn_close(c);
        return;
    }
    c->reading = 1;
}

static void on_sconn_frame(struct wire *w, const struct mrpc_hdr *h, const void *payload)
{
    struct sconn *c = (struct sconn *)w;
    if (h->kind != MRPC_KIND_REQUEST) {
        mg_log(MG_LOG_WARN, "event=rpc_bad_frame err=response_to_server");
        wire_fail(w, MG_ECORRUPT);
        return;
    }
    struct mrpc_call *k = mg_calloc(1, sizeof(*k));
    k->c = c;
    k->id = h->call_id;
    k->method = h->method;
    k->next = c->calls;
    if (c->calls != NULL)
        c->calls->prev = k;
    c->calls = k;
    c->inflight++;
    struct mrpc_server *s = c->s;
    s->handler(s->data, k, h->method, payload, h->len);
    sconn_throttle(c); /* c stays allocated until its close callback, which runs later */
}

static void on_sconn_fail(struct wire *w, int err)
{
    struct sconn *c = (struct sconn *)w;
    if (err != MG_EIO)
        mg_log(MG_LOG_WARN, "event=rpc_conn_closed err=%s", mg_err_name(err));
    sconn_close(c);
}

static void on_sconn_written(struct wire *w)
{
    sconn_throttle((struct sconn *)w);
}

static const struct wire_ops sconn_ops = {
    .frame = on_sconn_frame, .fail = on_sconn_fail, .written = on_sconn_written};

void mrpc_reply(struct mrpc_call *k, int status, const void *payload, size_t len)
{
    assert(k != NULL && status >= 0);
    struct sconn *c = k->c;
    if (c == NULL) {
        mg_free(k);
        return;
    }
    if (k->prev != NULL)
        k->prev->next = k->next;
    else
        c->calls = k->next;
    if (k->next != NULL)
        k->next->prev = k->prev;
    c->inflight--;
    if (len > MRPC_PAYLOAD_MAX) {
        mg_log(MG_LOG_ERROR, "event=rpc_reply_too_large method=%u bytes=%zu", k->method, len);
        status = MG_EINTERNAL;
        len = 0;
    }
    struct mrpc_hdr h = {.kind = MRPC_KIND_RESPONSE,
                         .method = k->method,
                         .call_id = k->id,
                         .status = status,
                         .len = (uint32_t)len};
    mg_free(k);
    if (!c->w.failed)
        wire_send(&c->w, &h, payload);
    sconn_throttle(c);
}

static void on_server_connection(uv_stream_t *listener, int status)
{
    struct mrpc_server *s = listener->data;
    if (status != 0) {
        mg_log(MG_LOG_WARN, "event=rpc_accept_failed err=%s", uv_strerror(status));
        return;
    }
    struct sconn *c = mg_calloc(1, sizeof(*c));
    wire_init(&c->w, &sconn_ops);
    c->s = s;
    c->max_inflight = s->max_inflight;
    uv_tcp_init(s->loop, &c->w.tcp);
    c->w.tcp.data = c;
    c->w.open = 1;
    c->next = s->conns;
    if (s->conns != NULL)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    if (uv_accept(listener, (uv_stream_t *)&c->w.tcp) != 0 || s->nconns > SERVER_CONNS_MAX) {
        sconn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->w.tcp, 1);
    if (wire_read_start(&c->w) != 0) {
        sconn_close(c);
        return;
    }
    c->reading = 1;
}

int mrpc_server_create(uv_loop_t *loop, const char *address, mrpc_handler_fn handler, void *data,
                       struct mrpc_server **out)
{
    assert(loop != NULL && handler != NULL && out != NULL);
    struct sockaddr_in sa;
    int rv = parse_address(address, &sa);
    if (rv != 0)
        return rv;
    struct mrpc_server *s = mg_calloc(1, sizeof(*s));
    s->loop = loop;
    s->handler = handler;
    s->data = data;
    s->max_inflight = MRPC_SERVER_INFLIGHT_MAX;
    uv_tcp_init(loop, &s->listener);
    s->listener.data = s;
    s->listener_open = 1;
    rv = uv_tcp_bind(&s->listener, (const struct sockaddr *)&sa, 0);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)&s->listener, 1024, on_server_connection);
    struct sockaddr_in bound;
    int blen = sizeof(bound);
    if (rv == 0)
        rv = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &blen);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=rpc_listen_failed address=%s err=%s", address,
               uv_strerror(rv));
        mrpc_server_destroy(s, NULL, NULL);
        return MG_EIO;
    }
    s->port = ntohs(bound.sin_port);
    *out = s;
    return 0;
}

void mrpc_server_set_max_inflight(struct mrpc_server *s, unsigned max_inflight)
{
    assert(max_inflight >= 1);
    s->max_inflight = max_inflight;
}

int mrpc_server_port(const struct mrpc_server *s)
{
    return s->port;
}

static void on_listener_closed(uv_handle_t *hd)
{
    struct mrpc_server *s = hd->data;
    s->listener_open = 0;
    server_maybe_freed(s);
}

void mrpc_server_destroy(struct mrpc_server *s, void (*cb)(void *data), void *data)
{
    assert(!s->destroying);
    s->destroying = 1;
    s->destroy_cb = cb;
    s->destroy_data = data;
    for (struct sconn *c = s->conns; c != NULL; c = c->next)
        sconn_close(c);
    uv_close((uv_handle_t *)&s->listener, on_listener_closed);
}

/* ------------------------------------------------------------------- peer */

struct pconn;

struct pcall {
    uint64_t id;
    mrpc_cb cb;
    void *data;
    uint64_t deadline_ms;    /* loop time; 0: none */
    struct pconn *conn;      /* the connection it was queued on */
    struct pcall *hnext;     /* hash chain */
    struct pcall *prev, *next; /* p->calls */
};

enum pconn_state { PC_WAIT, PC_CONNECTING, PC_OPEN };

struct pconn {
    struct wire w;           /* first */
    struct mrpc_peer *p;
    enum pconn_state state;
    uv_timer_t timer;        /* PC_WAIT: the backoff; PC_CONNECTING: the connect timeout */
    uv_connect_t creq;
    int tcp_init;            /* w.tcp initialized (needs a close) */
    int closes;              /* handles still to close */
    int dead;                /* failing: no new call goes to it */
    int was_open;
};

struct mrpc_peer {
    uv_loop_t *loop;
    struct sockaddr_in sa;
    struct mrpc_peer_opts opts;
    struct pconn *conn;      /* the current connection (any state), or NULL */
    unsigned dying_conns;    /* connections still closing */
    struct pcall *calls;     /* outstanding */
    unsigned ncalls;
    struct pcall **table;    /* by id & mask */
    size_t mask;
    uint64_t next_id;
    uv_timer_t deadline;     /* the earliest call deadline */
    uint64_t deadline_due;   /* loop ms it is armed for (0: not armed) */
    unsigned failures;       /* consecutive failed connects */
    uint64_t next_attempt_ms; /* no connect before this loop time */
    uint64_t rng;
    int destroying;
    int timer_closed;
    void (*destroy_cb)(void *data);
    void *destroy_data;
};

static uint64_t peer_rand(struct mrpc_peer *p)
{
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return p->rng;
}

static void call_unlink(struct mrpc_peer *p, struct pcall *k)
{
    struct pcall **pp = &p->table[k->id & p->mask];
    while (*pp != k)
        pp = &(*pp)->hnext;
    *pp = k->hnext;
    if (k->prev != NULL)
        k->prev->next = k->next;
    else
        p->calls = k->next;
    if (k->next != NULL)
        k->next->prev = k->prev;
    p->ncalls--;
}

static struct pcall *call_find(struct mrpc_peer *p, uint64_t id)
{
    struct pcall *k = p->table[id & p->mask];
    while (k != NULL && k->id != id)
        k = k->hnext;
    return k;
}

static void call_finish(struct pcall *k, int status, const void *payload, size_t len)
{
    mrpc_cb cb = k->cb;
    void *data = k->data;
    mg_free(k);
    cb(data, status, payload, len);
}

/* Fail the calls matching conn (NULL: all) with status; callbacks may make new calls. */
static void calls_fail(struct mrpc_peer *p, struct pconn *conn, int status)
{
    struct pcall *list = NULL;
    for (struct pcall *k = p->calls, *next; k != NULL; k = next) {
        next = k->next;
        if (conn != NULL && k->conn != conn)
            continue;
        call_unlink(p, k);
        k->next = list;
        list = k;
    }
    while (list != NULL) {
        struct pcall *next = list->next;
        call_finish(list, status, NULL, 0);
        list = next;
    }
}

static void peer_maybe_freed(struct mrpc_peer *p)
{
    if (!p->destroying || p->conn != NULL || p->dying_conns > 0 || !p->timer_closed)
        return;
    void (*cb)(void *) = p->destroy_cb;
    void *data = p->destroy_data;
    mg_free(p->table);
    mg_free(p);
    if (cb != NULL)
        cb(data);
}

static void on_pconn_handle_closed(uv_handle_t *hd)
{
    struct pconn *c = hd->data;
    if (--c->closes > 0)
        return;
    struct mrpc_peer *p = c->p;
    /* The calls of a failed connection fail here, always after the call that queued them
     * returned (mrpc_call never runs a callback itself). New calls go to a new connection. */
    calls_fail(p, c, MG_EIO);
    wire_free_bufs(&c->w);
    mg_free(c);
    p->dying_conns--;
    peer_maybe_freed(p);
}

/* Take c out of service: its calls fail with MG_EIO once its handles are closed. */
static void pconn_fail(struct pconn *c, const char *why)
{
    if (c->dead)
        return;
    struct mrpc_peer *p = c->p;
    c->dead = 1;
    c->w.failed = 1;
    if (p->conn == c)
        p->conn = NULL;
    p->dying_conns++;
    if (c->was_open) {
        p->failures = 0; /* a lost connection is re-opened by the next call at once */
        p->next_attempt_ms = 0;
    } else {
        p->failures++;
        unsigned lo = p->opts.backoff_min_ms, hi = p->opts.backoff_max_ms;
        uint64_t b = lo;
        for (unsigned i = 1; i < p->failures && b < hi; i++)
            b *= 2;
        if (b > hi)
            b = hi;
        b = b / 2 + peer_rand(p) % (b / 2 + 1); /* jitter: 50..100% */
        p->next_attempt_ms = uv_now(p->loop) + b;
    }
    mg_log(MG_LOG_DEBUG, "event=rpc_conn_failed why=%s failures=%u", why, p->failures);
    c->closes = 1 + c->tcp_init;
    uv_close((uv_handle_t *)&c->timer, on_pconn_handle_closed);
    if (c->tcp_init)
        uv_close((uv_handle_t *)&c->w.tcp, on_pconn_handle_closed);
}

static void on_pconn_frame(struct wire *w, const struct mrpc_hdr *h, const void *payload)
{
    struct pconn *c = (struct pconn *)w;
    struct mrpc_peer *p = c->p;
    if (h->kind != MRPC_KIND_RESPONSE) {
        mg_log(MG_LOG_WARN, "event=rpc_bad_frame err=request_to_client");
        wire_fail(w, MG_ECORRUPT);
        return;
    }
    struct pcall *k = call_find(p, h->call_id);
    if (k == NULL || k->conn != c)
        return; /* timed out meanwhile */
    call_unlink(p, k);
    int status = h->status < MG_ERR__COUNT ? h->status : MG_EINTERNAL;
    call_finish(k, status, payload, h->len);
}

static void on_pconn_fail(struct wire *w, int err)
{
    pconn_fail((struct pconn *)w, mg_err_name(err));
}

static const struct wire_ops pconn_ops = {.frame = on_pconn_frame, .fail = on_pconn_fail};

static void on_pconn_connected(uv_connect_t *req, int status)
{
    struct pconn *c = req->data;
    if (c->dead)
        return;
    if (status != 0) {
        pconn_fail(c, uv_err_name(status));
        return;
    }
    uv_timer_stop(&c->timer);
    c->state = PC_OPEN;
    c->was_open = 1;
    c->w.open = 1;
    c->p->failures = 0;
    uv_tcp_nodelay(&c->w.tcp, 1);
    if (wire_read_start(&c->w) != 0) {
        pconn_fail(c, "read_start");
        return;
    }
    wire_flush(&c->w);
}

static void on_pconn_timer(uv_timer_t *t);

static void pconn_connect(struct pconn *c)
{
    struct mrpc_peer *p = c->p;
    c->state = PC_CONNECTING;
    uv_tcp_init(p->loop, &c->w.tcp);
    c->w.tcp.data = c;
    c->tcp_init = 1;
    c->creq.data = c;
    uv_timer_start(&c->timer, on_pconn_timer, p->opts.connect_timeout_ms, 0);
    if (uv_tcp_connect(&c->creq, &c->w.tcp, (const struct sockaddr *)&p->sa,
                       on_pconn_connected) != 0)
        pconn_fail(c, "connect");
}

static void on_pconn_timer(uv_timer_t *t)
{
    struct pconn *c = t->data;
    if (c->state == PC_WAIT)
        pconn_connect(c);
    else
        pconn_fail(c, "connect_timeout");
}

/* The connection new calls go to, created (connecting, or waiting out the backoff) if
 * there is none. */
static struct pconn *peer_conn(struct mrpc_peer *p)
{
    if (p->conn != NULL)
        return p->conn;
    struct pconn *c = mg_calloc(1, sizeof(*c));
    wire_init(&c->w, &pconn_ops);
    c->p = p;
    uv_timer_init(p->loop, &c->timer);
    c->timer.data = c;
    p->conn = c;
    uint64_t now = uv_now(p->loop);
    if (p->next_attempt_ms > now) {
        c->state = PC_WAIT;
        uv_timer_start(&c->timer, on_pconn_timer, p->next_attempt_ms - now, 0);
    } else {
        pconn_connect(c);
    }
    return c;
}

static void deadline_arm(struct mrpc_peer *p);

static void on_deadline(uv_timer_t *t)
{
    struct mrpc_peer *p = t->data;
    uint64_t now = uv_now(p->loop);
    p->deadline_due = 0;
    struct pcall *list = NULL;
    for (struct pcall *k = p->calls, *next; k != NULL; k = next) {
        next = k->next;
        if (k->deadline_ms == 0 || k->deadline_ms > now)
            continue;
        call_unlink(p, k);
        k->next = list;
        list = k;
    }
    deadline_arm(p);
    while (list != NULL) {
        struct pcall *next = list->next;
        call_finish(list, MG_ETIMEOUT, NULL, 0);
        list = next;
    }
}

/* Arm the deadline timer for the earliest outstanding deadline. */
static void deadline_arm(struct mrpc_peer *p)
{
    uint64_t min = 0;
    for (struct pcall *k = p->calls; k != NULL; k = k->next)
        if (k->deadline_ms != 0 && (min == 0 || k->deadline_ms < min))
            min = k->deadline_ms;
    if (min == 0) {
        uv_timer_stop(&p->deadline);
        p->deadline_due = 0;
        return;
    }
    uint64_t now = uv_now(p->loop);
    uv_timer_start(&p->deadline, on_deadline, min > now ? min - now : 0, 0);
    p->deadline_due = min;
}

int mrpc_peer_create(uv_loop_t *loop, const char *address, const struct mrpc_peer_opts *opts,
                     struct mrpc_peer **out)
{
    struct sockaddr_in sa;
    int rv = parse_address(address, &sa);
    if (rv != 0)
        return rv;
    struct mrpc_peer *p = mg_calloc(1, sizeof(*p));
    p->loop = loop;
    p->sa = sa;
    if (opts != NULL)
        p->opts = *opts;
    if (p->opts.max_inflight == 0)
        p->opts.max_inflight = MRPC_PEER_INFLIGHT_MAX;
    if (p->opts.connect_timeout_ms == 0)
        p->opts.connect_timeout_ms = MRPC_CONNECT_TIMEOUT_MS;
    if (p->opts.backoff_min_ms == 0)
        p->opts.backoff_min_ms = MRPC_BACKOFF_MIN_MS;
    if (p->opts.backoff_max_ms == 0)
        p->opts.backoff_max_ms = MRPC_BACKOFF_MAX_MS;
    if (p->opts.backoff_max_ms < p->opts.backoff_min_ms)
        p->opts.backoff_max_ms = p->opts.backoff_min_ms;
    size_t slots = 16;
    while (slots < 2 * (size_t)p->opts.max_inflight)
        slots *= 2;
    p->table = mg_calloc(slots, sizeof(*p->table));
    p->mask = slots - 1;
    p->next_id = 1;
    p->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)p ^ 0x9e3779b97f4a7c15ULL;
    if (p->rng == 0)
        p->rng = 1;
    uv_timer_init(loop, &p->deadline);
    p->deadline.data = p;
    *out = p;
    return 0;
}

int mrpc_call(struct mrpc_peer *p, uint16_t method, const void *payload, size_t len,
              unsigned timeout_ms, mrpc_cb cb, void *data)
{
    assert(p != NULL && cb != NULL && (payload != NULL || len == 0));
    if (p->destroying)
        return MG_ESHUTDOWN;
    if (p->ncalls >= p->opts.max_inflight)
        return MG_ESLOWDOWN;
    if (len > MRPC_PAYLOAD_MAX)
        return MG_EENTITYTOOLARGE;
    struct pconn *c = peer_conn(p);
    struct pcall *k = mg_calloc(1, sizeof(*k));
    k->id = p->next_id++;
    k->cb = cb;
    k->data = data;
    k->conn = c;
    k->deadline_ms = timeout_ms != 0 ? uv_now(p->loop) + timeout_ms : 0;
    struct pcall **slot = &p->table[k->id & p->mask];
    k->hnext = *slot;
    *slot = k;
    k->next = p->calls;
    if (p->calls != NULL)
        p->calls->prev = k;
    p->calls = k;
    p->ncalls++;
    if (k->deadline_ms != 0 && (p->deadline_due == 0 || k->deadline_ms < p->deadline_due)) {
        uv_timer_start(&p->deadline, on_deadline, timeout_ms, 0);
        p->deadline_due = k->deadline_ms;
    }
    struct mrpc_hdr h = {.kind = MRPC_KIND_REQUEST,
                         .method = method,
                         .call_id = k->id,
                         .len = (uint32_t)len};
    if (!c->dead)
        wire_send(&c->w, &h, payload); /* a write error fails c: k fails when it closed */
    return 0;
}

unsigned mrpc_peer_inflight(const struct mrpc_peer *p)
{
    return p->ncalls;
}

static void on_peer_timer_closed(uv_handle_t *hd)
{
    struct mrpc_peer *p = hd->data;
    p->timer_closed = 1;
    peer_maybe_freed(p);
}

void mrpc_peer_destroy(struct mrpc_peer *p, void (*cb)(void *data), void *data)
{
    assert(!p->destroying);
    p->destroying = 1;
    p->destroy_cb = cb;
    p->destroy_data = data;
    calls_fail(p, NULL, MG_ESHUTDOWN);
    if (p->conn != NULL)
        pconn_fail(p->conn, "destroy");
    uv_close((uv_handle_t *)&p->deadline, on_peer_timer_closed);
}
