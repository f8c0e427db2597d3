/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway server: h2o 2.2.5 (libuv flavour) with one event loop per
 * thread, every loop accepting on its own SO_REUSEPORT listener of one port
 * (DESIGN.md 5a, 12), optional TLS (h2o_accept_ctx_t.ssl_ctx), and the
 * request entry point: route -> authenticate -> the registered dispatch
 * (the S3 handlers, gateway.c), plus GET /health and GET /metrics, and the
 * per-loop lag probe.
 *
 * Loops and threads (DESIGN.md 5a, issue 7). Handlers never block their
 * loop: a write hands a meta op to the meta thread (gw_op_submit) and answers
 * from its done callback; body decoding into the blob store, fsyncs, copies
 * and blob-backed GET slices run on libuv's worker pool (gw_work_queue).
 * Loop time per request is therefore CPU only (parse, SigV4, XML, the bucket
 * lookup), so one loop per core keeps every core busy and more loops only
 * add context switches: the default is the core count again. (Before
 * issue 7 the default was 8x cores, because every durable write held its
 * loop for a synced RocksDB commit and only many loops kept enough commits in
 * flight for group commit: 16 loops 12.9k PUT/s vs 4 loops 6.9k PUT/s on the
 * 2-core box, 2026-11-30. With commits off the loops that reason is gone.)
 *
 * Worker pool: UV_THREADPOOL_SIZE is process-wide and read at the first
 * uv_queue_work, so gw__server_create sets it (unless the environment does)
 * before anything can queue work: 8 threads per core, at least 16, at most
 * 128. Pool threads mostly wait rather than compute (a blob fsync, ~0.2 ms
 * here; a pread; a copy waiting for its commit), so the pool must be wider
 * than the cores for waits to overlap: 64 clients PUTting 64 KiB keep about
 * 64 x 0.3 ms / (1/5000 s) ~ 2 workers busy at 5k PUT/s, and a few slow
 * copies must not starve body writes. libuv's default of 4 would let four
 * copies block every PUT. Jobs that wait on a meta commit are capped at half
 * the pool (gw_work_queue), since libraft also queues work on this pool.
 *
 * Request bodies: h2o buffers the whole entity before on_req; above 32 MiB
 * the buffer is an mmapped, unlinked temp file created from
 * h2o_socket_buffer_mmap_settings, which we point at <data_dir>/tmp so the
 * spill lives on the data disk, not in /tmp (issue 2 item 5).
 */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MG_MODULE "gateway"
#include "gateway/core.h"
#include "gateway/head.h"
#include "lifecycle/lifecycle.h"
#include "meta/orphan.h"
#include "meta/scrub.h"

#define MAX_ENTITY_BYTES ((5ull << 30) + (64u << 20)) /* 5 GiB + aws-chunked framing */
#define OBJECT_MAX_BYTES (5ull << 30)                  /* S3: 5 GiB per PUT or part */
#define SPILL_THRESHOLD_BYTES (32u << 20)
#define MMAP_THRESHOLD_BYTES (1 << 20) /* glibc malloc: see gw__server_create */
#define LISTEN_BACKLOG 1024
#define STOP_TICK_MS 100
#define STOP_TICKS_MAX 20 /* graceful stop waits at most 2 s for open connections */
#define MAX_CONNS_PER_LOOP 8192
#define POOL_PER_CORE 8
#define POOL_MIN 16
#define POOL_MAX 128

/* LeakSanitizer (Asan builds) reads this at start: h2o 2.2.5 keeps per-thread recycle lists
 * of freed chunks by design and has no API to drain them when a loop thread ends. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:h2o_mem_alloc_recycle\n";
}

struct gw__handler {
    h2o_handler_t super;
    struct gw_server *srv;
};

static __thread struct gw__loop *current_loop;

struct gw__loop *gw__current_loop(void)
{
    return current_loop;
}

uint64_t gw__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t gw__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the request entry point */

static void on_request_dispose(void *p)
{
    struct gw_request *r = p;
    mg_arena_close(&r->arena);
}

/* 16 upper-case hex digits: a random per-process base, the loop index and a counter. */
static void make_request_id(struct gw_request *r, struct gw__loop *l)
{
    static const char hex[] = "0123456789ABCDEF";
    uint64_t n = l != NULL ? ++l->next_request_id : 0;
    uint64_t v = r->srv->request_id_base + (((uint64_t)(l != NULL ? l->index : 0)) << 48) + n;
    for (int i = 15; i >= 0; i--) {
        r->request_id[i] = hex[v & 15];
        v >>= 4;
    }
    r->request_id[16] = '\0';
}

static int path_is(h2o_req_t *req, const char *lit)
{
    size_t plen = req->input.query_at != SIZE_MAX ? req->input.query_at : req->input.path.len;
    size_t n = strlen(lit);
    return plen == n && memcmp(req->input.path.base, lit, n) == 0;
}

/* /health and /metrics: no auth, only when the Host is not a bucket's virtual host. */
static int serve_internal(struct gw_request *r)
{
    h2o_req_t *req = r->req;
    if (r->core.vhost || (r->op != GW_OP_LIST_OBJECTS && r->op != GW_OP_HEAD_BUCKET))
        return 0;
    if (path_is(req, "/health")) {
        r->core.internal = 1;
        if (atomic_load(&r->srv->serving))
            gw_respond(r, 200, "text/plain", (struct mg_str){"ok\n", 3});
        else
            gw_respond(r, 503, "text/plain", (struct mg_str){"starting\n", 9});
        return 1;
    }
    if (path_is(req, "/metrics")) {
        r->core.internal = 1;
        struct mg_buf b;
        mg_buf_init(&b);
        gw__metrics_render(r->srv, &b);
        gw_respond(r, 200, "text/plain; version=0.0.4", (struct mg_str){b.base, b.len});
        mg_buf_close(&b);
        return 1;
    }
    return 0;
}

static int head_refusal_answer(struct gw_request *r);

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    struct gw_server *srv = ((struct gw__handler *)self)->srv;
    struct gw_request *r = h2o_mem_alloc_shared(&req->pool, sizeof(*r), on_request_dispose);
    int rv = gw__request_init(r, req, srv);
    make_request_id(r, current_loop);
    if (head_refusal_answer(r))
        return 0;
    if (rv == 0 && serve_internal(r))
        return 0;
    if (rv == 0)
        rv = gw__auth(r, time(NULL));
    if (rv != 0) {
        gw_respond_error(r, rv);
        return 0;
    }
    r->srv->dispatch(r);
    if (r->core.status == 0 && r->core.steps == 0) {
        mg_log(MG_LOG_ERROR, "event=no_response op=%s id=%s", gw_op_label(r->op), r->request_id);
        snprintf(r->errmsg, sizeof(r->errmsg), "The handler produced no response.");
        gw_respond_error(r, MG_EINTERNAL);
    }
    return 0;
}

/* ---- loops */

/* Every accepted connection, oldest first, per loop (in the h2o context's storage), so that
 * at the descriptor share the loop can shed connections that never sent a byte (issue 9 "File
 * descriptors": idle sockets must not lock out /health). */
struct conn_list {
    h2o_linklist_t conns; /* struct conn by accept time */
    int shedding;         /* shut down, not yet closed by h2o */
    uv_timer_t sweep;     /* progress timeouts, every SWEEP_MS (conn_sweep) */
    uint64_t idle_ms;     /* no read/write progress for this long closes (IO_IDLE_MS) */
    int unjudged;         /* connections reading a small body head_check did not judge */
};

struct conn {
    uv_tcp_t tcp; /* first: the handle h2o closes (on_conn_close frees it) */
    h2o_socket_t *sock;
    h2o_linklist_t link;
    struct conn_list *list;
    uint64_t accepted_ms;
    int shed;
    uint64_t timed_out_ms; /* when conn_sweep answered RequestTimeout, else 0 */
    h2o_socket_cb h2o_read;        /* h2o's read callback, which on_conn_read wraps */
    int head_checked;              /* the current request's head went through head_check */
    int unjudged;                  /* counted in list->unjudged (a small body, not judged) */
    struct head_refusal *refusal;  /* the answer on_req gives the current request, or NULL */
    struct head_framing_hdrs *hdrs; /* its Expect and Transfer-Encoding, or NULL (head_keep) */
};

/* ---- authorization from the head (issue 9 "Body before auth")
 *
 * h2o 2.2.5 has no hook between a request's head and its body. lib/http1.c
 * handle_incoming_request parses the head (phr_parse_request), sends "100 Continue" at once
 * when the client asked for it, and its entity readers (handle_content_length_entity_read,
 * handle_chunked_entity_read) append the whole body to sock->input; only
 * on_entity_read_complete -> process_request calls a handler. The request-body streaming API
 * (req->proceed_req / write_req, h2o_handler_t.supports_request_streaming) came with 2.3.
 * Before this, 16 anonymous 30 MiB PUTs to a private bucket took the server from 20 MB to
 * 876 MB, and Expect: 100-continue got 100 for them.
 *
 * What 2.2.5 does offer: every read reaches the HTTP/1 code through the socket's
 * _cb.read, which h2o_socket_read_start (lib/common/socket.c) installs; on_read_tcp /
 * on_read_ssl (lib/common/socket/uv-binding.c.h) call it after each read, with sock->input
 * holding the current request from its first byte (cleanup_connection consumes the previous
 * one). libh2o calls h2o_socket_read_start through its PLT, so this executable's definition
 * below takes its place: on our server sockets (tagged by on_close.cb) it installs
 * on_conn_read in front of h2o's callback. on_conn_read judges a head as soon as it is
 * complete, before h2o has seen it: when the request announces a body (Content-Length of
 * HEAD_CHECK_MIN_BODY or more, chunked, or Expect), it is routed and authenticated
 * (gw__request_init, gw__auth) and the bucket's owner and ACL are checked, the synchronous
 * CPU-only steps on_req takes anyway. A request that would be refused keeps its head but
 * loses its body framing: the first two bytes of Content-Length, Transfer-Encoding and Expect
 * become "x-" (same length, so h2o parses the same head), h2o sees a request without a body,
 * sends no 100 and calls on_req at once, and on_req answers the saved error with Connection:
 * close. What the server holds of a refused body is at most the reads that completed the
 * head (64 KiB each); what the client still sends is never read (h2o closes after the
 * answer; the kernel resets the rest). Bodies below HEAD_CHECK_MIN_BODY are read as before
 * (a request head is judged twice only when it carries a large body), UNJUDGED_PER_LOOP of
 * them at a time. Requests h2o finds
 * already buffered behind a previous one (pipelining) are judged when h2o restarts reading
 * (h2o_socket_read_start, before its own handle_incoming_request). The head itself is parsed
 * by head.c (gw__head_parse, gw__head_framing, gw__head_unframe; fuzz target fuzz_head).
 * What h2o would answer itself in plain text is answered here in S3 XML instead (conformance
 * report M4, M10): a header section over AWS's 8 KiB or over h2o's 100 fields
 * (head_refuse_size, as soon as the head is that large), an Expect other than 100-continue
 * (417). Expect and Transfer-Encoding, which h2o keeps out of req->headers, are put back for
 * the signature (head_keep). */

#define HEAD_CHECK_MIN_BODY (64u << 10)
/* Small bodies still on their way that a loop reads without judging their head first; past
 * this, a flood of slow small bodies is judged from the head too. With HEAD_CHECK_MIN_BODY,
 * a loop holds at most 16 MiB (plus a read each) for requests not yet authorized. */
#define UNJUDGED_PER_LOOP 256

/* Requests refused from their head, and the body bytes they announced that were never read
 * (process-wide; /metrics reads them through gw__head_refusals). */
static uint64_t head_refused_requests, head_refused_body_bytes;

void gw__head_refusals(uint64_t *requests, uint64_t *body_bytes)
{
    *requests = __atomic_load_n(&head_refused_requests, __ATOMIC_RELAXED);
    *body_bytes = __atomic_load_n(&head_refused_body_bytes, __ATOMIC_RELAXED);
}

struct head_refusal {
    int rv;
    char errmsg[256];
};

/* Expect and Transfer-Encoding as the client sent them. h2o 2.2.5 keeps both out of
 * req->headers (init_headers), so a request that signs them would fail its signature with
 * "A header listed in SignedHeaders is missing" (AWS SDKs have signed Expect; conformance
 * report M5 signs Transfer-Encoding): head_check keeps them and on_req puts them back before
 * authentication. */
#define HEAD_KEPT_MAX 128
struct head_framing_hdrs {
    char expect[HEAD_KEPT_MAX], te[HEAD_KEPT_MAX];
    size_t expect_len, te_len; /* SIZE_MAX: absent (or longer than HEAD_KEPT_MAX) */
};

static int str_is(struct mg_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.base, lit, n) == 0;
}

/* The head as h2o would hand it to on_req (lib/http1.c init_headers: names lower-cased, Host
 * in authority, the other init-special headers left out, the Content-Length as the entity's
 * length), allocated from req->pool. */
static void head_to_req(const struct gw__head *hd, size_t content_length, h2o_req_t *req)
{
    req->input.method = req->method = hd->method;
    req->input.path = req->path = hd->target;
    req->input.query_at = SIZE_MAX;
    for (size_t i = 0; i < hd->n; i++) {
        size_t len = hd->h[i].name.len;
        char *name = h2o_mem_alloc_pool(&req->pool, len);
        for (size_t k = 0; k < len; k++)
            name[k] = (char)tolower((unsigned char)hd->h[i].name.base[k]);
        h2o_iovec_t v = hd->h[i].value;
        const h2o_token_t *t = h2o_lookup_token(name, len);
        if (t == H2O_TOKEN_HOST)
            req->input.authority = req->authority = v;
        else if (t == H2O_TOKEN_EXPECT || t == H2O_TOKEN_TRANSFER_ENCODING)
            h2o_add_header(&req->pool, &req->headers, t, NULL, v.base, v.len); /* head_keep */
        else if (t != NULL && !t->is_init_header_special)
            h2o_add_header(&req->pool, &req->headers, t, NULL, v.base, v.len);
        else if (t == NULL)
            h2o_add_header_by_str(&req->pool, &req->headers, name, len, 0, NULL, v.base, v.len);
    }
    if (content_length != SIZE_MAX)
        req->entity = h2o_iovec_init("", content_length);
}

/* What on_req and the handler would answer from the head alone: 0 (read the body), or the
 * error of a request that is refused whatever its body (route, signature, a bucket that does
 * not exist, or whose owner and ACL do not let this requester write). Anything the handler
 * decides later (meta errors, objects, quotas) gives 0. */
static int head_authorize(struct gw_server *srv, const struct gw__head *hd,
                          size_t content_length, int chunked, struct head_refusal *out)
{
    h2o_req_t req;
    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
    head_to_req(hd, chunked ? SIZE_MAX : content_length, &req);
    struct gw_request *r = h2o_mem_alloc_pool(&req.pool, sizeof(*r));
    int rv = gw__request_init(r, &req, srv);
    int internal = rv == 0 && !r->core.vhost &&
                   (str_is(r->core.path, "/health") || str_is(r->core.path, "/metrics"));
    if (rv == 0 && !internal)
        rv = gw__auth(r, time(NULL));
    if (rv == MG_ESIGNATURE && chunked)
        rv = 0; /* a signed Content-Length h2o computes from the decoded body: on_req judges */
    if (rv == 0 && !chunked && content_length != SIZE_MAX) {
        /* S3 answers EntityTooLarge at once for a PUT or part over 5 GiB (issue 9, M11): the
         * object's size is x-amz-decoded-content-length for aws-chunked bodies. Anything over
         * h2o's entity bound would get h2o's plain-text 413 instead of S3 XML. */
        uint64_t size = content_length;
        struct mg_str v;
        if (gw_header(r, "x-amz-decoded-content-length", &v)) {
            char num[24];
            snprintf(num, sizeof(num), "%.*s", (int)(v.len < 23 ? v.len : 23), v.base);
            size = strtoull(num, NULL, 10);
        }
        int object = r->op == GW_OP_PUT_OBJECT || r->op == GW_OP_UPLOAD_PART;
        if ((object && size > OBJECT_MAX_BYTES) || content_length > MAX_ENTITY_BYTES)
            rv = MG_EENTITYTOOLARGE;
    }
    struct meta_bucket b;
    if (rv == 0 && !internal && r->bucket.len > 0 && r->op != GW_OP_CREATE_BUCKET) {
        /* A cluster node's local view of the bucket table may lag behind an acknowledged
         * CreateBucket or ACL change (reads wait for a fence, meta_read_fence_create): the
         * bucket is judged after the body, by the fenced handler, not from here. */
        int brv = meta_store_clustered(r->ms) ? MG_EBUSY
                                              : meta_bucket_get(r->ms, r->bucket, &r->arena, &b);
        int owner = brv == 0 && r->user != NULL && r->user->name.len == b.owner.len &&
                    memcmp(r->user->name.base, b.owner.base, b.owner.len) == 0;
        if (brv == MG_ENOSUCHBUCKET)
            rv = brv;
        else if (brv == 0 && !owner && b.acl != META_ACL_PUBLIC_READ_WRITE)
            rv = MG_EACCESSDENIED;
    } else if (rv == 0 && !internal && r->user == NULL) {
        rv = MG_EACCESSDENIED; /* anonymous CreateBucket or a body for the service */
    }
    out->rv = rv;
    snprintf(out->errmsg, sizeof(out->errmsg), "%s", rv != 0 ? r->errmsg : "");
    mg_arena_close(&r->arena);
    h2o_mem_clear_pool(&req.pool);
    return rv;
}

static void on_sock_close(void *data);

/* The connection on_conn_read serves, from h2o's request (NULL for other connections). */
static struct conn *conn_of_req(h2o_req_t *req)
{
    h2o_socket_t *(*get_socket)(h2o_conn_t *) = req->conn->callbacks->get_socket;
    h2o_socket_t *sock = get_socket != NULL ? get_socket(req->conn) : NULL;
    return sock != NULL && sock->on_close.cb == on_sock_close ? sock->on_close.data : NULL;
}

/* Keeps the answer on_req gives the request whose head is at the start of sock->input, and
 * counts it (the body bytes it announced are never read). */
static void head_refuse(struct conn *c, h2o_socket_t *sock, const struct head_refusal *f,
                        size_t head_len, uint64_t declared, int chunked, int expect)
{
    c->refusal = h2o_mem_alloc(sizeof(*c->refusal));
    *c->refusal = *f;
    size_t held = sock->input->size > head_len ? sock->input->size - head_len : 0;
    __atomic_fetch_add(&head_refused_requests, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&head_refused_body_bytes, declared > held ? declared - held : 0,
                       __ATOMIC_RELAXED);
    mg_log(MG_LOG_DEBUG,
           "event=refused_from_head code=%s content_length=%" PRIu64 " chunked=%d expect=%d "
           "buffered=%zu",
           mg_err_s3code(f->rv), declared, chunked, expect, held);
}

/* A head over AWS's header-section bound (GW_HEAD_SECTION_MAX, complete or not) or over h2o's
 * GW_HEAD_HEADERS_MAX fields (which h2o would answer with a plain-text 400, and no request can
 * get past in Debian's libh2o): 400 RequestHeaderSectionTooLarge in S3 XML (conformance report
 * M10). h2o must still parse a head to answer it, so the bytes after the request line become
 * one empty field "x:" padded with blanks and an empty line, ending where the buffer (at most
 * GW_HEAD_MAX of it) ends: never shorter, since h2o resumes parsing at the length it saw last
 * (phr_parse_request's last_len). What followed is dropped; the connection closes after the
 * answer. */
static void head_refuse_size(struct conn *c, h2o_socket_t *sock, const struct gw__head *hd,
                             size_t section)
{
    struct head_refusal f = {.rv = MG_EHEADERSTOOLARGE};
    if (section <= GW_HEAD_SECTION_MAX) /* too many fields, not too many bytes */
        snprintf(f.errmsg, sizeof(f.errmsg),
                 "Your request has more than %d header fields; this server takes no more.",
                 GW_HEAD_HEADERS_MAX);
    size_t len = sock->input->size < GW_HEAD_MAX ? sock->input->size : GW_HEAD_MAX;
    char *p = sock->input->bytes + hd->line_len;
    size_t pad = len - hd->line_len - 6; /* > 0: over 100 lines or 8 KiB follow the line */
    memcpy(p, "x:", 2);
    memset(p + 2, ' ', pad);
    memcpy(p + 2 + pad, "\r\n\r\n", 4);
    sock->input->size = len;
    c->head_checked = 1;
    head_refuse(c, sock, &f, len, 0, 0, 0);
}

/* Keeps the first Expect and Transfer-Encoding of a complete head for on_req
 * (head_framing_hdrs). */
static void head_keep(struct conn *c, const struct gw__head *hd)
{
    struct head_framing_hdrs *k = NULL;
    for (size_t i = 0; i < hd->n; i++) {
        int expect = gw__head_name_is(hd->h[i].name, "expect");
        if (!expect && !gw__head_name_is(hd->h[i].name, "transfer-encoding"))
            continue;
        if (k == NULL) {
            k = h2o_mem_alloc(sizeof(*k));
            k->expect_len = k->te_len = SIZE_MAX;
        }
        size_t *len = expect ? &k->expect_len : &k->te_len;
        h2o_iovec_t v = hd->h[i].value;
        if (*len == SIZE_MAX && v.len <= HEAD_KEPT_MAX) {
            memcpy(expect ? k->expect : k->te, v.base, v.len);
            *len = v.len;
        }
    }
    free(c->hdrs);
    c->hdrs = k;
}

/* Judges the head at the start of sock->input once it is complete (see the top of this
 * section); a refused request's body framing is renamed away and its answer kept for on_req.
 * Heads too large are refused as soon as they are (head_refuse_size). */
static void head_check(struct conn *c, h2o_socket_t *sock)
{
    struct gw__head hd;
    int rv = gw__head_parse(sock->input->bytes, sock->input->size, &hd);
    size_t section = gw__head_section(sock->input->bytes, sock->input->size, &hd, rv);
    if ((rv >= 0 || hd.too_many) && (hd.too_many || section > GW_HEAD_SECTION_MAX)) {
        head_refuse_size(c, sock, &hd, section);
        return;
    }
    if (rv == 0)
        return;
    c->head_checked = 1;
    if (rv < 0)
        return;
    struct gw__head_framing fr;
    if (gw__head_framing(&hd, &fr) != 0)
        return; /* h2o answers 400 */
    size_t content_length = fr.content_length;
    int chunked = fr.chunked, expect = fr.expect;
    if (chunked || expect)
        head_keep(c, &hd);
    struct head_refusal f = {.rv = 0};
    if (expect && gw__head_expect_unmet(&hd)) {
        /* h2o would answer 417 "unknown expectation" in plain text (report M4): the same
         * status, in S3 XML. RFC 9110 10.1.1 lets a server refuse an expectation it does not
         * know; "100-continue, x" names one. */
        f.rv = MG_EEXPECTATION;
    } else {
        if (!chunked && !expect &&
            (content_length == SIZE_MAX || content_length < HEAD_CHECK_MIN_BODY)) {
            if (content_length == SIZE_MAX || sock->input->size - hd.len >= content_length)
                return; /* no body, or all of it is here: on_req runs now */
            if (c->list->unjudged < UNJUDGED_PER_LOOP) {
                c->unjudged = 1;
                c->list->unjudged++;
                return;
            }
        }
        if (current_loop == NULL ||
            head_authorize(current_loop->srv, &hd, content_length, chunked, &f) == 0)
            return;
    }
    gw__head_unframe(&hd);
    head_refuse(c, sock, &f, hd.len, chunked || content_length == SIZE_MAX ? 0 : content_length,
                chunked, expect);
}

/* h2o's read callback for our server sockets: heads are judged before h2o reads them. */
static void on_conn_read(h2o_socket_t *sock, const char *err)
{
    struct conn *c = sock->on_close.data;
    if (err == NULL && !c->head_checked)
        head_check(c, sock);
    c->h2o_read(sock, err);
}

/* on_close.cb of our server sockets: the tag conn_of_req and h2o_socket_read_start look
 * for (h2o calls it from h2o_socket_close; the struct conn lives until on_conn_close). */
static void on_sock_close(void *data)
{
    (void)data;
}

typedef void (*read_start_fn)(h2o_socket_t *sock, h2o_socket_cb cb);
static read_start_fn real_read_start;
static pthread_once_t read_start_once = PTHREAD_ONCE_INIT;

static void read_start_resolve(void)
{
    real_read_start = (read_start_fn)(uintptr_t)dlsym(RTLD_NEXT, "h2o_socket_read_start");
    if (real_read_start == NULL)
        abort();
}

/* Takes the place of libh2o's (see the top of this section); other sockets (h2o's clients,
 * the in-process loopback) are left as they are. */
void h2o_socket_read_start(h2o_socket_t *sock, h2o_socket_cb cb)
{
    pthread_once(&read_start_once, read_start_resolve);
    if (sock->on_close.cb == on_sock_close && cb != on_conn_read) {
        struct conn *c = sock->on_close.data;
        c->h2o_read = cb;
        cb = on_conn_read;
        if (!c->head_checked && sock->input->size != 0)
            head_check(c, sock); /* pipelined: h2o parses it right after this */
    }
    real_read_start(sock, cb);
}

/* on_req, first: the request head_check refused gets its answer, and the connection is
 * closed after it (the body it announced is still on its way). Every request starts the next
 * head's check. */
static int head_refusal_answer(struct gw_request *r)
{
    struct conn *c = conn_of_req(r->req);
    if (c == NULL)
        return 0;
    c->head_checked = 0;
    c->list->unjudged -= c->unjudged;
    c->unjudged = 0;
    struct head_framing_hdrs *k = c->hdrs;
    c->hdrs = NULL;
    if (k != NULL) { /* put back what h2o kept out of req->headers, for the signature */
        h2o_req_t *req = r->req;
        if (k->expect_len != SIZE_MAX)
            h2o_add_header(&req->pool, &req->headers, H2O_TOKEN_EXPECT, NULL,
                           h2o_strdup(&req->pool, k->expect, k->expect_len).base, k->expect_len);
        if (k->te_len != SIZE_MAX)
            h2o_add_header(&req->pool, &req->headers, H2O_TOKEN_TRANSFER_ENCODING, NULL,
                           h2o_strdup(&req->pool, k->te, k->te_len).base, k->te_len);
        free(k);
    }
    struct head_refusal *f = c->refusal;
    if (f == NULL)
        return 0;
    c->refusal = NULL;
    r->req->http1_is_persistent = 0;
    snprintf(r->errmsg, sizeof(r->errmsg), "%s", f->errmsg);
    gw_respond_error(r, f->rv);
    free(f);
    return 1;
}

#define SHED_MIN_AGE_MS 1000 /* a connection this old that sent nothing may be shed */
#define SHED_MAX_PER_TURN 8

/* Progress timeouts (issue 9 "Timeouts"). h2o 2.2.5's http1.req_timeout is one deadline for
 * a request's head and body (reqread_start arms it once; reading does not re-arm it), so a PUT
 * that keeps sending is cut at 60 s, and it never covers writes. The deadline is therefore
 * REQ_DEADLINE_MS, and this sweep closes a connection on which nothing moved for IO_IDLE_MS:
 * reading a request that stalled (bytes came in after the last byte went out) gets 400
 * RequestTimeout, an idle keep-alive is closed quietly, and a response the client does not
 * read (h2o writing, bytes_written not moving) is closed. MG_IO_IDLE_TIMEOUT_MS overrides
 * IO_IDLE_MS (tests). Cost: one pass over the loop's connections (<= its share) a second. */
#define IO_IDLE_MS 60000
#define REQ_DEADLINE_MS (3600 * 1000) /* 5 GiB at 1.5 MB/s */
#define SWEEP_MS 1000

static const char request_timeout_response[] =
    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/xml\r\nConnection: close\r\n"
    "Content-Length: 195\r\n\r\n"
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>RequestTimeout</Code><Message>Your "
    "socket connection to the server was not read from or written to within the timeout "
    "period.</Message></Error>";

/* Progress comes from the kernel (TCP_INFO: ms since data last arrived / left), not from
 * h2o_socket_t's bytes_read/bytes_written, which h2o 2.2.5's libuv binding sets to the size of
 * the last read (on_read_tcp: "bytes_read = nread"), so a steady upload looks stalled. */
static void conn_sweep_one(struct gw__loop *l, struct conn_list *cl, struct conn *c, uint64_t now)
{
    h2o_socket_t *sock = c->sock;
    if (c->shed)
        return;
    int fd = h2o_socket_get_fd(sock);
    if (c->timed_out_ms != 0) { /* the answer had a second to leave: now close */
        if (now - c->timed_out_ms >= SWEEP_MS) {
            shutdown(fd, SHUT_RDWR);
            c->shed = 1;
            cl->shedding++;
        }
        return;
    }
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return;
    uint64_t recv_idle = ti.tcpi_last_data_recv, sent_idle = ti.tcpi_last_data_sent;
    uint64_t idle = recv_idle < sent_idle ? recv_idle : sent_idle;
    if (idle < cl->idle_ms || now - c->accepted_ms < cl->idle_ms)
        return;
    int writing = h2o_socket_is_writing(sock), reading = h2o_socket_is_reading(sock);
    if (!writing && !reading)
        return; /* the handler has the request (meta op, worker): not the client's doing */
    /* Bytes came in after the last went out (bytes_written: 0 until the first response). */
    int mid_request = reading && !writing &&
                      (sock->bytes_written == 0 ? sock->bytes_read != 0 : recv_idle < sent_idle);
    mg_log(mid_request ? MG_LOG_WARN : MG_LOG_DEBUG,
           "event=io_timeout loop=%d writing=%d mid_request=%d idle_ms=%" PRIu64, l->index,
           writing, mid_request, idle);
    if (mid_request && sock->ssl == NULL &&
        send(fd, request_timeout_response, sizeof(request_timeout_response) - 1,
             MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
        shutdown(fd, SHUT_WR);
        c->timed_out_ms = now;
        __atomic_store_n(&l->timeouts_request, l->timeouts_request + 1, __ATOMIC_RELAXED);
        return;
    }
    shutdown(fd, SHUT_RDWR);
    c->shed = 1;
    cl->shedding++;
    __atomic_store_n(&l->timeouts_io, l->timeouts_io + 1, __ATOMIC_RELAXED);
}

static void on_conn_sweep(uv_timer_t *t)
{
    struct conn_list *cl = t->data;
    struct gw__loop *l = t->loop->data;
    uint64_t now = (uint64_t)gw__now_ms();
    for (h2o_linklist_t *p = cl->conns.next; p != &cl->conns; p = p->next)
        conn_sweep_one(l, cl, H2O_STRUCT_FROM_MEMBER(struct conn, link, p), now);
}

static size_t conn_list_key;

/* The loop's list, created with its sweep timer at the first connection. It lives until
 * loop_dispose closes the timer (its close callback frees it): connections that close during
 * a graceful stop still unlink from it. */
static struct conn_list *conn_list_of(struct gw__loop *l)
{
    void **slot = h2o_context_get_storage(&l->ctx, &conn_list_key, NULL);
    if (*slot == NULL) {
        struct conn_list *cl = h2o_mem_alloc(sizeof(*cl));
        h2o_linklist_init_anchor(&cl->conns);
        cl->shedding = 0;
        cl->unjudged = 0;
        uint64_t idle = mg_env_u64("MG_IO_IDLE_TIMEOUT_MS", 0);
        cl->idle_ms = idle > 0 ? idle : IO_IDLE_MS;
        uv_timer_init(&l->loop, &cl->sweep);
        cl->sweep.data = cl;
        uv_timer_start(&cl->sweep, on_conn_sweep, SWEEP_MS, SWEEP_MS);
        *slot = cl;
    }
    return *slot;
}

static void on_conn_list_close(uv_handle_t *h)
{
    free(h->data);
}

/* stop: no more sweeps; dispose: close the timer, which frees the list. */
static void conn_list_stop(struct gw__loop *l, int dispose)
{
    void **slot = h2o_context_get_storage(&l->ctx, &conn_list_key, NULL);
    struct conn_list *cl = *slot;
    if (cl == NULL)
        return;
    uv_timer_stop(&cl->sweep);
    if (dispose) {
        uv_close((uv_handle_t *)&cl->sweep, on_conn_list_close);
        *slot = NULL;
    }
}

static void on_accept_pause_tick(uv_timer_t *t);

static void on_conn_close(uv_handle_t *h)
{
    struct gw__loop *l = h->loop->data;
    struct conn *c = (struct conn *)h;
    __atomic_store_n(&l->nconns, l->nconns - 1, __ATOMIC_RELAXED); /* read by /metrics */
    if (h2o_linklist_is_linked(&c->link))
        h2o_linklist_unlink(&c->link);
    c->list->shedding -= c->shed;
    c->list->unjudged -= c->unjudged;
    free(c->refusal);
    free(c->hdrs);
    free(c);
    if (!l->stopping && uv_is_active((uv_handle_t *)&l->stop_timer))
        uv_timer_start(&l->stop_timer, on_accept_pause_tick, 0, 0); /* paused: a slot is free */
}

/* Shut down (h2o then reads EOF and closes) up to max connections that have read nothing in
 * SHED_MIN_AGE_MS, oldest first. Returns how many. Bounded by the loop's connection share. */
static int shed_idle(struct gw__loop *l, struct conn_list *cl, int max)
{
    uint64_t now = (uint64_t)gw__now_ms();
    int n = 0;
    for (h2o_linklist_t *p = cl->conns.next; p != &cl->conns && n < max; p = p->next) {
        struct conn *c = H2O_STRUCT_FROM_MEMBER(struct conn, link, p);
        if (now - c->accepted_ms < SHED_MIN_AGE_MS)
            break; /* the rest are younger */
        if (c->shed || c->sock->bytes_read != 0)
            continue;
        shutdown(h2o_socket_get_fd(c->sock), SHUT_RDWR);
        c->shed = 1;
        cl->shedding++;
        n++;
    }
    __atomic_store_n(&l->conns_shed, l->conns_shed + (uint64_t)n, __ATOMIC_RELAXED);
    if (n > 0)
        mg_log(MG_LOG_DEBUG, "event=conn_shed loop=%d n=%d", l->index, n);
    return n;
}

/* Descriptors kept free of client connections for RocksDB, raft, blob segments and spill files
 * (issue 9 "File descriptors"): a quarter of the soft limit, at least 64. */
#define FD_RESERVE_MIN 64
#define ACCEPT_PAUSE_MS 50

/* This loop's share of the descriptors left after the reserve (RLIMIT_NOFILE as main raised
 * it), and never more than MAX_CONNS_PER_LOOP. */
static int conns_fd_max(const struct gw__loop *l)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return MAX_CONNS_PER_LOOP;
    rlim_t reserve = rl.rlim_cur / 4 > FD_RESERVE_MIN ? rl.rlim_cur / 4 : FD_RESERVE_MIN;
    rlim_t share = rl.rlim_cur > reserve ? (rl.rlim_cur - reserve) / (rlim_t)l->srv->nloops : 1;
    return share < MAX_CONNS_PER_LOOP ? (share > 0 ? (int)share : 1) : MAX_CONNS_PER_LOOP;
}

static void accept_one(struct gw__loop *l, uv_stream_t *listener, int resumed);

/* Accepting is paused (the kernel backlog holds new connections): retry every
 * ACCEPT_PAUSE_MS. stop_timer is idle until a stop, which re-arms it with on_stop_tick. */
static void on_accept_pause_tick(uv_timer_t *t)
{
    struct gw__loop *l = t->data;
    if (!l->stopping)
        accept_one(l, (uv_stream_t *)&l->listener, 1);
}

/* Stop accepting instead of spinning on EMFILE/ENFILE or at the descriptor share: libuv stops
 * watching a listener whose pending connection was not taken (uv_accept restarts it). Logged
 * once per episode (the pause timer stays armed for as long as the episode lasts). */
static void accept_pause(struct gw__loop *l, const char *why, int resumed)
{
    if (!resumed && !uv_is_active((uv_handle_t *)&l->stop_timer)) {
        mg_log(MG_LOG_WARN, "event=accept_paused loop=%d open=%d max=%d reason=%s", l->index,
               l->nconns, conns_fd_max(l), why);
        __atomic_store_n(&l->accept_pauses, l->accept_pauses + 1, __ATOMIC_RELAXED);
    }
    uv_timer_start(&l->stop_timer, on_accept_pause_tick, ACCEPT_PAUSE_MS, 0);
}

/* Connections per loop are bounded (STYLE.md 7a): past MAX_CONNS_PER_LOOP a new connection is
 * accepted and closed at once, so the backlog drains instead of growing; at the descriptor
 * share (conns_fd_max) accepting pauses, so the process does not reach EMFILE. */
static void on_accept(uv_stream_t *listener, int status)
{
    struct gw__loop *l = listener->data;
    if (status == UV_EMFILE || status == UV_ENFILE)
        accept_pause(l, uv_err_name(status), 0);
    else if (status == 0)
        accept_one(l, listener, 0);
}

static void accept_one(struct gw__loop *l, uv_stream_t *listener, int resumed)
{
    struct conn_list *cl = conn_list_of(l);
    if (l->nconns >= conns_fd_max(l) && l->nconns < MAX_CONNS_PER_LOOP) {
        /* Shed connections close on a later turn (on_conn_close resumes accepting then), so the
         * share is never exceeded, not even for a moment. */
        if (cl->shedding == 0)
            shed_idle(l, cl, SHED_MAX_PER_TURN);
        accept_pause(l, "fd_share", resumed);
        return;
    }
    if (resumed)
        mg_log(MG_LOG_INFO, "event=accept_resumed loop=%d open=%d", l->index, l->nconns);
    struct conn *c = h2o_mem_alloc(sizeof(*c));
    uv_tcp_t *conn = &c->tcp;
    uv_tcp_init(listener->loop, conn);
    if (uv_accept(listener, (uv_stream_t *)conn) != 0) {
        uv_close((uv_handle_t *)conn, (uv_close_cb)free);
        return;
    }
    if (l->nconns >= MAX_CONNS_PER_LOOP) {
        uint64_t refused = l->nconns_refused;
        __atomic_store_n(&l->nconns_refused, refused + 1, __ATOMIC_RELAXED);
        if (refused % 1000 == 0)
            mg_log(MG_LOG_WARN, "event=connection_limit loop=%d open=%d refused=%" PRIu64, l->index,
                   l->nconns, l->nconns_refused);
        uv_close((uv_handle_t *)conn, (uv_close_cb)free);
        return;
    }
    __atomic_store_n(&l->nconns, l->nconns + 1, __ATOMIC_RELAXED);
    uv_tcp_nodelay(conn, 1);
    h2o_socket_t *sock = h2o_uv_socket_create((uv_stream_t *)conn, on_conn_close);
    c->sock = sock;
    c->list = cl;
    c->accepted_ms = (uint64_t)gw__now_ms();
    c->shed = 0;
    c->timed_out_ms = 0;
    c->link = (h2o_linklist_t){NULL, NULL};
    c->h2o_read = NULL;
    c->head_checked = 0;
    c->unjudged = 0;
    c->refusal = NULL;
    c->hdrs = NULL;
    h2o_linklist_insert(&cl->conns, &c->link);
    sock->on_close.cb = on_sock_close; /* before h2o_accept starts reading: head_check */
    sock->on_close.data = c;
    h2o_accept(&l->accept_ctx, sock);
}

static void on_stop_tick(uv_timer_t *t)
{
    struct gw__loop *l = t->data;
    if (h2o_linklist_is_empty(&l->ctx.http1._conns) || ++l->stop_ticks >= STOP_TICKS_MAX)
        uv_stop(&l->loop);
}

static void on_stop_async(uv_async_t *a)
{
    struct gw__loop *l = a->data;
    if (l->stopping)
        return;
    l->stopping = 1;
    if (!uv_is_closing((uv_handle_t *)&l->listener))
        uv_close((uv_handle_t *)&l->listener, NULL);
    uv_timer_stop(&l->lag_timer);
    conn_list_stop(l, 0);
    h2o_context_request_shutdown(&l->ctx);
    uv_timer_start(&l->stop_timer, on_stop_tick, 0, STOP_TICK_MS);
}

/* After a graceful stop: close our handles, dispose h2o's context and close the loop, unless
 * connections outlived the grace period (then everything dies with the process; h2o 2.2.5
 * cannot dispose a context with live connections). Bounded: a few non-blocking turns. */
static void loop_dispose(struct gw__loop *l)
{
    if (!h2o_linklist_is_empty(&l->ctx.http1._conns)) {
        mg_log(MG_LOG_WARN, "event=stop_with_open_connections loop=%d", l->index);
        return;
    }
    if (l->async_inflight > 0) {
        /* A meta op or worker job still holds this loop's client or a uv_work_t. */
        mg_log(MG_LOG_WARN, "event=stop_with_async_steps loop=%d steps=%d", l->index,
               l->async_inflight);
        return;
    }
    /* h2o_context_request_shutdown arms HTTP/2's graceful-shutdown entry even without HTTP/2
     * connections; it has nothing left to do. */
    h2o_timeout_unlink(&l->ctx.http2._graceful_shutdown_timeout);
    h2o_timeout_t *const tos[] = {&l->ctx.zero_timeout,
                                  &l->ctx.one_sec_timeout,
                                  &l->ctx.hundred_ms_timeout,
                                  &l->ctx.handshake_timeout,
                                  &l->ctx.http1.req_timeout,
                                  &l->ctx.http2.idle_timeout,
                                  &l->ctx.http2.graceful_shutdown_timeout,
                                  &l->ctx.proxy.io_timeout};
    for (size_t i = 0; i < sizeof(tos) / sizeof(tos[0]); i++) {
        if (!h2o_linklist_is_empty(&tos[i]->_entries)) {
            mg_log(MG_LOG_WARN, "event=stop_with_pending_timers loop=%d timeout=%zu", l->index, i);
            return;
        }
    }
    if (!uv_is_closing((uv_handle_t *)&l->listener))
        uv_close((uv_handle_t *)&l->listener, NULL);
    uv_close((uv_handle_t *)&l->stop_async, NULL);
    uv_close((uv_handle_t *)&l->stop_timer, NULL);
    uv_close((uv_handle_t *)&l->lag_timer, NULL);
    conn_list_stop(l, 1);
    gw__async_loop_close(l);
    meta_client_destroy(l->mc);
    l->mc = NULL;
    h2o_context_dispose(&l->ctx);
    for (int i = 0; i < 16 && uv_run(&l->loop, UV_RUN_NOWAIT) != 0; i++)
        ;
    l->disposed = uv_loop_close(&l->loop) == 0;
}

/* ---- loop lag: a timer re-armed every GW_LAG_PERIOD_MS; how late it fires is how long the
 * loop was busy (or blocked) past its due time. */

static void on_lag_timer(uv_timer_t *t);

/* The loop thread's run-queue wait so far (ns), from the second field of
 * /proc/thread-self/schedstat ("cpu-time run-delay timeslices"); 0 if unavailable. */
static uint64_t run_delay_ns(struct gw__loop *l)
{
    char buf[96];
    if (l->schedstat_fd < 0)
        return 0;
    ssize_t n = pread(l->schedstat_fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = strchr(buf, ' ');
    return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

static void lag_arm(struct gw__loop *l)
{
    uv_update_time(&l->loop);
    l->lag_due_ns = gw__now_ns() + (uint64_t)GW_LAG_PERIOD_MS * 1000000u;
    l->lag_rq_ns = run_delay_ns(l);
    uv_timer_start(&l->lag_timer, on_lag_timer, GW_LAG_PERIOD_MS, 0);
}

static void on_lag_timer(uv_timer_t *t)
{
    struct gw__loop *l = t->data;
    uint64_t now = gw__now_ns();
    /* libuv's timer clock has 1 ms granularity and may fire up to 1 ms early: clamp at 0. */
    uint64_t lag_ns = now > l->lag_due_ns ? now - l->lag_due_ns : 0;
    /* Run-queue wait since arming, counted against the lag (it can only have delayed it). */
    uint64_t rq = run_delay_ns(l) - l->lag_rq_ns;
    uint64_t self_ns = lag_ns > rq ? lag_ns - rq : 0;
    gw__metrics_record_lag(&l->metrics, lag_ns / 1000, self_ns / 1000);
    if (!l->stopping)
        lag_arm(l);
}

static void loop_main(void *arg)
{
    struct gw__loop *l = arg;
    struct gw_server *srv = l->srv;
    current_loop = l;
    int e = meta_client_create(srv->ms, &l->loop, &l->mc);
    if (e != 0) {
        /* Only on resource exhaustion; writes on this loop would have nowhere to go. */
        mg_log(MG_LOG_FATAL, "event=meta_client_create_failed loop=%d err=%s", l->index,
               mg_err_name(e));
        abort();
    }
    gw__async_loop_init(l);
    l->schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    lag_arm(l);
    if (atomic_fetch_add(&srv->running_loops, 1) + 1 == srv->nloops) {
        atomic_store(&srv->serving, 1);
        mg_log(MG_LOG_INFO, "event=serving loops=%d port=%u", srv->nloops, srv->port);
    }
    uv_run(&l->loop, UV_RUN_DEFAULT);
    atomic_store(&srv->serving, 0);
    loop_dispose(l);
    if (l->schedstat_fd >= 0)
        close(l->schedstat_fd);
    current_loop = NULL;
}

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, char *errmsg)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ports[8];
    snprintf(ports, sizeof(ports), "%u", port);
    int e = getaddrinfo(host, ports, &hints, &res);
    if (e != 0 || res == NULL) {
        snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "config key \"listen\": cannot resolve %s: %s", host,
                 gai_strerror(e));
        return MG_ECONFIG;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* SO_REUSEPORT lets a second metagate (same uid, other data dir) bind the same port, and the
 * kernel then splits connections between the two processes: clients would see buckets come
 * and go. Before the loops bind, a plain socket (SO_REUSEADDR only, so TIME_WAIT from a
 * previous run does not count) must be able to bind the address; Linux refuses that while
 * anything listens there. Port 0 always gets a fresh port. */
static int port_unclaimed(const struct sockaddr_storage *ss, char *errmsg)
{
    uint16_t port = ntohs(((const struct sockaddr_in *)ss)->sin_port);
    if (port == 0)
        return 0;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1, e = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (const struct sockaddr *)ss,
             ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) != 0)
        e = errno;
    if (fd >= 0)
        close(fd);
    if (e == 0)
        return 0;
    snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "listen on port %u: %s%s", port, strerror(e),
             e == EADDRINUSE ? " (another process listens there)" : "");
    return MG_EIO;
}

static int listen_on(struct gw__loop *l, struct sockaddr_storage *ss, char *errmsg)
{
    int e = uv_tcp_init_ex(&l->loop, &l->listener, ss->ss_family);
    uv_os_fd_t fd;
    int one = 1;
    if (e == 0)
        e = uv_fileno((uv_handle_t *)&l->listener, &fd);
    if (e == 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
        e = -errno;
    if (e == 0)
        e = uv_tcp_bind(&l->listener, (const struct sockaddr *)ss, 0);
    if (e == 0)
        e = uv_listen((uv_stream_t *)&l->listener, LISTEN_BACKLOG, on_accept);
    if (e != 0) {
        snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "listen on port %u: %s",
                 ntohs(((struct sockaddr_in *)ss)->sin_port), uv_strerror(e));
        return MG_EIO;
    }
    l->listener.data = l;
    if (((struct sockaddr_in *)ss)->sin_port == 0) {
        /* Port 0: the first listener picks it, the others share it. */
        struct sockaddr_storage got;
        int len = sizeof(got);
        uv_tcp_getsockname(&l->listener, (struct sockaddr *)&got, &len);
        ((struct sockaddr_in *)ss)->sin_port = ((struct sockaddr_in *)&got)->sin_port;
    }
    return 0;
}

static int loop_init(struct gw_server *srv, struct gw__loop *l, int index,
                     struct sockaddr_storage *ss, char *errmsg)
{
    l->srv = srv;
    l->index = index;
    uv_loop_init(&l->loop);
    l->loop.data = l;
    h2o_context_init(&l->ctx, &l->loop, &srv->globalconf);
    l->accept_ctx.ctx = &l->ctx;
    l->accept_ctx.hosts = srv->globalconf.hosts;
    l->accept_ctx.ssl_ctx = srv->ssl_ctx;
    uv_async_init(&l->loop, &l->stop_async, on_stop_async);
    l->stop_async.data = l;
    uv_timer_init(&l->loop, &l->stop_timer);
    l->stop_timer.data = l;
    uv_timer_init(&l->loop, &l->lag_timer);
    l->lag_timer.data = l;
    return listen_on(l, ss, errmsg);
}

/* ---- TLS */

static int tls_init(struct gw_server *srv, const struct mg_config *cfg, char *errmsg)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    const char *bad = NULL;
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1)
        bad = "tls.cert_file";
    else if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1 ||
             SSL_CTX_check_private_key(ctx) != 1)
        bad = "tls.key_file";
    if (bad != NULL) {
        char e[160];
        ERR_error_string_n(ERR_get_error(), e, sizeof(e));
        snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "config key \"%s\": %s", bad, e);
        SSL_CTX_free(ctx);
        return MG_ECONFIG;
    }
    /* No ALPN registration: HTTP/1.1 only, as S3 clients speak it. */
    srv->ssl_ctx = ctx;
    mg_log(MG_LOG_INFO, "event=tls cert=%s", cfg->tls_cert_file);
    return 0;
}

/* ---- lifecycle */

static int cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

/* One loop per core: see the top of this file. */
static int default_loops(void)
{
    return cores();
}

/* UV_THREADPOOL_SIZE before the first uv_queue_work of the process (see the top of this file);
 * an explicit environment value wins. Returns the size in effect. */
static int threadpool_setup(void)
{
    const char *env = getenv("UV_THREADPOOL_SIZE");
    int n = env != NULL ? atoi(env) : 0;
    if (n <= 0) {
        n = cores() * POOL_PER_CORE;
        n = n < POOL_MIN ? POOL_MIN : n > POOL_MAX ? POOL_MAX : n;
        char v[16];
        snprintf(v, sizeof(v), "%d", n);
        setenv("UV_THREADPOOL_SIZE", v, 1);
    }
    return n > 1024 ? 1024 : n; /* libuv's own cap */
}

uint32_t gw_inline_max_bytes(const struct gw_request *r)
{
    return r->srv->cfg->inline_max_bytes;
}

/* ---- lifecycle enforcement (issue 8): the engine and expiry switches of the config, and the
 * node's one lc_scheduler, started after the store opens and destroyed before it closes.
 * struct gw_server (core.h) has no slot for the scheduler, so servers map to theirs here; a
 * process runs one server (tests a few), hence the small fixed table. */

#define LC_SERVERS_MAX 16

static struct {
    const struct gw_server *srv;
    struct lc_scheduler *sched;
} lc_servers[LC_SERVERS_MAX];
static pthread_mutex_t lc_servers_lock = PTHREAD_MUTEX_INITIALIZER;

/* engine.compaction as meta wants it. The config already refused other spellings
 * (common/config.c); this is the one translation into the engine's enum. */
static int lc_store_opts(const struct mg_config *cfg, struct meta_opts *mo, char *errmsg)
{
    const char *c = cfg->engine_compaction != NULL ? cfg->engine_compaction : "locality";
    if (eng_compaction_parse(c, strlen(c), &mo->compaction) == 0)
        return 0;
    snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "config key \"engine.compaction\": unknown mode %s", c);
    return MG_ECONFIG;
}

static int lc_start(struct gw_server *srv, const struct mg_config *cfg, char *errmsg)
{
    struct lc_scheduler_opts o = {.day_seconds = cfg->lc_day_seconds,
                                  .max_per_second = cfg->lc_max_per_second,
                                  .reindex_per_second = cfg->lc_reindex_per_second};
    struct lc_scheduler *s;
    int rv = lc_scheduler_create(srv->ms, &o, &s);
    if (rv != 0) {
        snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "lifecycle scheduler: %s", mg_err_name(rv));
        return rv;
    }
    pthread_mutex_lock(&lc_servers_lock);
    size_t i = 0;
    while (i < LC_SERVERS_MAX && lc_servers[i].srv != NULL)
        i++;
    if (i < LC_SERVERS_MAX)
        lc_servers[i].srv = srv, lc_servers[i].sched = s;
    pthread_mutex_unlock(&lc_servers_lock);
    if (i == LC_SERVERS_MAX) {
        lc_scheduler_destroy(s);
        snprintf(errmsg, MG_CONFIG_ERRMSG_LEN, "more than %d servers in one process",
                 LC_SERVERS_MAX);
        return MG_EIO;
    }
    mg_log(MG_LOG_INFO, "event=lifecycle_scheduler day_seconds=%u max_per_second=%" PRIu64
           " delete=%s compaction=%s", cfg->lc_day_seconds, cfg->lc_max_per_second,
           cfg->lc_delete_point ? "point" : "range", cfg->engine_compaction);
    return 0;
}

/* Destroys srv's scheduler (if it has one); the store stays open. */
static void lc_stop(struct gw_server *srv)
{
    struct lc_scheduler *s = NULL;
    pthread_mutex_lock(&lc_servers_lock);
    for (size_t i = 0; i < LC_SERVERS_MAX; i++) {
        if (lc_servers[i].srv == srv) {
            s = lc_servers[i].sched;
            lc_servers[i].srv = NULL;
            lc_servers[i].sched = NULL;
        }
    }
    pthread_mutex_unlock(&lc_servers_lock);
    lc_scheduler_destroy(s);
}

uint32_t gw_lc_day_seconds(const struct gw_request *r)
{
    return r->srv->cfg->lc_day_seconds != 0 ? r->srv->cfg->lc_day_seconds : LC_DAY_SECONDS;
}

static void users_init(struct gw_server *srv, const struct mg_config *cfg)
{
    srv->nusers = cfg->nusers;
    srv->users = mg_calloc(cfg->nusers ? cfg->nusers : 1, sizeof(*srv->users));
    for (size_t i = 0; i < cfg->nusers; i++) {
        const struct mg_config_user *u = &cfg->users[i];
        srv->users[i].name = (struct mg_str){u->name, strlen(u->name)};
        srv->users[i].access_key = (struct mg_str){u->access_key, strlen(u->access_key)};
        srv->users[i].secret_key = (struct mg_str){u->secret_key, strlen(u->secret_key)};
    }
}

static void h2o_init_conf(struct gw_server *srv, const struct mg_config *cfg)
{
    h2o_config_init(&srv->globalconf);
    srv->globalconf.server_name = h2o_iovec_init(H2O_STRLIT("metagate"));
    srv->globalconf.max_request_entity_size = (size_t)MAX_ENTITY_BYTES;
    srv->globalconf.http1.upgrade_to_http2 = 0;
    srv->globalconf.http1.req_timeout = REQ_DEADLINE_MS; /* progress: conn_sweep */
    srv->hostconf =
        h2o_config_register_host(&srv->globalconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *pc = h2o_config_register_path(srv->hostconf, "/", 0);
    struct gw__handler *h = (void *)h2o_create_handler(pc, sizeof(*h));
    h->super.on_req = on_req;
    h->srv = srv;
    /* Spill large bodies into the data directory (process-wide h2o setting). */
    h2o_socket_buffer_mmap_settings.threshold = SPILL_THRESHOLD_BYTES;
    snprintf(h2o_socket_buffer_mmap_settings.fn_template,
             sizeof(h2o_socket_buffer_mmap_settings.fn_template), "%s/tmp/h2o.b.XXXXXX",
             cfg->data_dir);
}

int gw__server_create(const struct mg_config *cfg, gw_dispatch_fn dispatch,
                      struct gw_server **out, char *errmsg)
{
    assert(cfg != NULL && dispatch != NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Request buffers go back to the kernel when the request ends (issue 9): glibc's mmap
     * threshold starts at 128 KiB and rises to the size of each mmapped chunk freed (up to
     * 32 MiB), after which h2o's body buffers (doubling up to the 32 MiB spill threshold) come
     * from the loop threads' heaps and stay there: 16 authorized 30 MiB PUTs left RssAnon at
     * 181 MB after they ended. A fixed threshold (which also fixes the trim threshold at
     * 128 KiB) maps every chunk of MMAP_THRESHOLD_BYTES or more: 5 MB after, peak 121 MB
     * instead of 227 MB. */
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    struct gw_server *srv = mg_calloc(1, sizeof(*srv));
    srv->cfg = cfg;
    srv->dispatch = dispatch;
    srv->threadpool_size = threadpool_setup();
    srv->work_meta_max = srv->threadpool_size / 2;
    srv->region = (struct mg_str){cfg->region, strlen(cfg->region)};
    srv->domain = cfg->domain != NULL ? (struct mg_str){cfg->domain, strlen(cfg->domain)}
                                      : (struct mg_str){"", 0};
    srv->started_ms = gw__now_ms();
    RAND_bytes((unsigned char *)&srv->request_id_base, sizeof(srv->request_id_base));
    srv->request_id_base &= ~(uint64_t)0 >> 8; /* room for the loop index */
    users_init(srv, cfg);
    h2o_init_conf(srv, cfg);
    int rv = 0;
    struct sockaddr_storage ss;
    if (cfg->tls_cert_file != NULL && (rv = tls_init(srv, cfg, errmsg)) != 0)
        goto err_after_conf;
    if ((rv = resolve(cfg->listen_host, cfg->listen_port, &ss, errmsg)) != 0 ||
        (rv = port_unclaimed(&ss, errmsg)) != 0)
        goto err_after_tls;
    /* The raft host (every shard's group) listens on meta.raft_listen, by default the S3
     * port + 1; with the S3 port left to the kernel (0, tests) it takes a free port too. */
    char raft_addr[300] = "";
    if (cfg->meta_raft_listen != NULL)
        snprintf(raft_addr, sizeof(raft_addr), "%s", cfg->meta_raft_listen);
    else if (cfg->listen_port != 0 && cfg->listen_port < 65535)
        snprintf(raft_addr, sizeof(raft_addr), "127.0.0.1:%u", cfg->listen_port + 1u);
    struct meta_opts mo = {.data_dir = cfg->data_dir,
                           .inline_max_bytes = cfg->inline_max_bytes,
                           .raft_listen = raft_addr[0] != '\0' ? raft_addr : NULL,
                           .initial_shards = cfg->meta_initial_shards,
                           .flusher_hold = cfg->meta_flusher_hold,
                           .lc_day_seconds = cfg->lc_day_seconds,
                           .lc_delete_point = cfg->lc_delete_point};
    /* Without the config keys, the collector and the scrubber read their MG_* test knobs. */
    struct meta_orphan_opts oo = {.period_ms = cfg->meta_orphan_period_s * 1000u,
                                  .grace_ms = cfg->meta_orphan_grace_s * 1000u};
    if (cfg->meta_orphan_set)
        mo.orphan = &oo;
    /* data.backend "rados" and the cluster's node list (issue 10), borrowed by the open. */
    struct meta_rados_opts ro = {cfg->rados_conf, cfg->rados_pool, cfg->rados_user,
                                 cfg->rados_namespace};
    if (cfg->data_rados)
        mo.rados = &ro;
    struct meta_cluster_node nodes[64];
    struct meta_cluster_opts co = {.node_id = cfg->cluster_node_id, .nodes = nodes,
                                   .split_keys = cfg->cluster_split_keys,
                                   .split_bytes = cfg->cluster_split_bytes};
    for (size_t i = 0; i < cfg->ncluster_nodes && i < 64; i++) {
        const struct mg_config_node *n = &cfg->cluster_nodes[i];
        nodes[co.n++] = (struct meta_cluster_node){n->id, n->s3, n->raft, n->rpc};
    }
    if (cfg->cluster_node_id != 0)
        mo.cluster = &co;
    if ((rv = lc_store_opts(cfg, &mo, errmsg)) != 0)
        goto err_after_tls;
    if ((rv = meta_store_open(&mo, &srv->ms, errmsg)) != 0)
        goto err_after_tls;
    if ((rv = lc_start(srv, cfg, errmsg)) != 0)
        goto err_after_meta;
    srv->nloops = cfg->threads > 0 ? cfg->threads : default_loops();
    /* struct gw__loop is cache-line aligned (its metrics shard); calloc only promises 16. */
    size_t loops_bytes = (size_t)srv->nloops * sizeof(*srv->loops);
    srv->loops = aligned_alloc(_Alignof(struct gw__loop), loops_bytes);
    if (srv->loops == NULL)
        abort();
    memset(srv->loops, 0, loops_bytes);
    for (int i = 0; i < srv->nloops; i++) {
        if ((rv = loop_init(srv, &srv->loops[i], i, &ss, errmsg)) != 0) {
            /* Loops already listening are torn down with the process (main exits). */
            goto err_after_store;
        }
    }
    srv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    mg_log(MG_LOG_INFO, "event=listen host=%s port=%u loops=%d workers=%d tls=%d data_dir=%s",
           cfg->listen_host, srv->port, srv->nloops, srv->threadpool_size, srv->ssl_ctx != NULL,
           cfg->data_dir);
    struct meta_scrub_opts so = {.bytes_per_sec = cfg->scrub_bytes_per_second,
                                 .delay_ms = cfg->scrub_delay_s * 1000u,
                                 .period_ms = cfg->scrub_period_s * 1000u};
    if (!cfg->scrub_set)
        meta_scrub_start(srv->ms, NULL);
    else if (cfg->scrub_enabled)
        meta_scrub_start(srv->ms, &so);
    *out = srv;
    return 0;

err_after_store:
    free(srv->loops);
    lc_stop(srv);
err_after_meta:
    meta_store_close(srv->ms);
err_after_tls:
    if (srv->ssl_ctx != NULL)
        SSL_CTX_free(srv->ssl_ctx);
err_after_conf:
    h2o_config_dispose(&srv->globalconf);
    mg_free(srv->users);
    mg_free(srv);
    assert(rv != 0);
    return rv;
}

uint16_t gw_server_port(const struct gw_server *srv)
{
    return srv->port;
}

int gw_server_run(struct gw_server *srv)
{
    for (int i = 0; i < srv->nloops; i++)
        uv_thread_create(&srv->loops[i].thread, loop_main, &srv->loops[i]);
    for (int i = 0; i < srv->nloops; i++)
        uv_thread_join(&srv->loops[i].thread);
    mg_log(MG_LOG_INFO, "event=stopped");
    return 0;
}

void gw_server_stop(struct gw_server *srv)
{
    for (int i = 0; i < srv->nloops; i++)
        uv_async_send(&srv->loops[i].stop_async);
}

void gw_server_destroy(struct gw_server *srv)
{
    /* Loops whose connections outlived the graceful window were not disposed: their memory
     * (and h2o's configuration, which they reference) dies with the process. */
    int all_disposed = 1;
    for (int i = 0; i < srv->nloops; i++)
        all_disposed &= srv->loops[i].disposed;
    lc_stop(srv); /* before the store it submits to closes */
    meta_scrub_stop(srv->ms);
    meta_store_close(srv->ms);
    if (!all_disposed)
        return;
    h2o_config_dispose(&srv->globalconf);
    if (srv->ssl_ctx != NULL)
        SSL_CTX_free(srv->ssl_ctx);
    free(srv->loops);
    mg_free(srv->users);
    mg_free(srv);
}
