/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The load engine (see run.h): per-thread epoll loops over keep-alive
 * connections, request building and signing, key pools, and the per-phase
 * accounting that report.c turns into tables.
 *
 * Back-of-the-envelope for the hot path (DESIGN.md-style sketch): at 100k
 * req/s on two cores a request may cost the client about 5 us of CPU in total
 * if the server is to keep the rest. The kernel's write+read+epoll share is
 * about 2-3 us, so mgbench's own work must stay well under 1 us: no
 * allocation per request, the request head is built once per (op, key, date
 * minute) and copied from a per-thread cache (a SigV4 signature costs about
 * 2-4 us: two SHA-256 over a few hundred bytes plus the cached-key HMAC), one
 * writev per request, one read per response, response headers scanned with
 * memchr, two clock reads (vDSO, ~20 ns each), one histogram increment.
 */
#define MG_MODULE "mgbench"
#include "tests/bench/run.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/sig.h"
#include "tests/bench/http.h"
#include "tests/bench/rng.h"

#define CAP_BYTES (16 * 1024)     /* captured response body (errors, DeleteObjects) */
#define CACHE_SLOTS 4096          /* signed request heads per thread (power of two) */
#define RBUF_BYTES (256 * 1024)   /* read buffer per thread */
#define MAX_EVENTS 256
#define CONNECT_FAILS_MAX 50      /* consecutive failed connects before a thread gives up */

enum conn_state { C_CLOSED, C_IDLE, C_SEND, C_RECV };

struct thr;

struct conn {
    int fd;                    /* -1 when closed */
    enum conn_state state;
    int want_out;              /* EPOLLOUT registered */
    struct thr *t;
    struct mgb_resp resp;
    struct mg_buf wbuf;        /* request head */
    struct mg_buf xbody;       /* owned request body (DeleteObjects XML) */
    const char *body;          /* body to send (shared object data or xbody) */
    size_t body_len;
    size_t sent;               /* bytes of head + body written */
    uint64_t t_start;          /* ns, when the request was sent */
    uint64_t t_origin;         /* ns, latency start: t_start, or the release tick (open loop) */
    enum mgb_lop lop;          /* logical op being run */
    enum mgb_op op;            /* S3 request in flight */
    uint64_t id;               /* key id (RENAME: source) */
    uint64_t id2;              /* RENAME: destination; MKDIR: marker id */
    unsigned nobjs;            /* DeleteObjects: keys in batch */
    uint64_t *batch;           /* DeleteObjects: ids */
    char *cap;                 /* CAP_BYTES capture buffer */
    int retry;                 /* wants work at the next scan (after a transport error) */
    int listed;                /* in the open-loop idle list */
};

struct cache_slot {
    uint32_t kind;             /* request kind (0: empty) */
    uint32_t gen;              /* date generation the head was signed for */
    uint64_t id;               /* key id */
    char *buf;                 /* signed request head */
    size_t len;
};

/* Requests released by one open-loop tick and not yet sent. */
struct release {
    uint64_t t;                /* tick time (ns) */
    uint64_t n;                /* requests left */
};

struct thr {
    struct mgb_run *run;
    unsigned idx;              /* 0..nthreads-1 */
    pthread_t tid;
    struct mgb_rng rng;
    int epfd;
    struct conn *conns;
    unsigned nconns;
    uint64_t *pool;            /* ids of existing objects this thread owns */
    size_t pool_len, pool_cap;
    uint64_t next_id;          /* next fresh id (stride nthreads) */
    uint64_t prep_next;        /* prepare: next id to create */
    enum mgb_phase phase;
    struct mgb_result res;     /* accumulators of the current phase */
    uint64_t t0, deadline, t_end;
    uint64_t t_last;           /* run phase: time of the last completion */
    unsigned inflight;
    unsigned connect_fails;
    int failed;                /* gave up: no connection */
    unsigned nretry;           /* connections with retry set */
    _Atomic uint64_t live_ops;
    _Atomic uint64_t live_errors;
    _Atomic int done;
    char amz_date[17];         /* yyyymmddThhmmssZ, refreshed every minute */
    int64_t date_min;
    uint32_t date_gen;
    struct cache_slot *cache;
    struct mg_buf scratch;
    char *rbuf;
    /* open loop */
    double tokens;             /* fractional requests not yet released */
    uint64_t backlog;          /* released, waiting for a connection */
    struct release *ring;      /* backlog as (tick time, count), oldest at ring_head */
    unsigned ring_cap, ring_head, ring_len;
    uint64_t next_tick;
    struct conn **idle;
    unsigned nidle;
};

struct mgb_run {
    const struct mgb_config *cfg;
    const struct mgb_endpoint *ep;
    char prefix[160];
    unsigned round;
    unsigned nthreads;
    struct thr *thr;
    char *body;                /* object data shared by all PUTs */
    size_t body_len;
    char body_sha[MG_SHA256_HEX_LEN + 1];
    int64_t key_epoch_s;       /* base time of time-shaped keys */
    uint64_t objects;          /* objects the prepare phase creates */
    pthread_barrier_t barrier;
};

uint64_t mgb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------- results */

void mgb_result_init(struct mgb_result *r)
{
    memset(r, 0, sizeof(*r));
    for (int i = 0; i < MGB_OP_COUNT; i++)
        mgb_hist_init(&r->hist[i]);
}

void mgb_result_close(struct mgb_result *r)
{
    mg_free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
}

void mgb_result_merge(struct mgb_result *dst, const struct mgb_result *src)
{
    for (int i = 0; i < MGB_OP_COUNT; i++) {
        mgb_hist_merge(&dst->hist[i], &src->hist[i]);
        dst->ops[i] += src->ops[i];
        dst->errors[i] += src->errors[i];
        dst->bytes[i] += src->bytes[i];
        dst->objects[i] += src->objects[i];
        if (!dst->first_error[i][0] && src->first_error[i][0])
            memcpy(dst->first_error[i], src->first_error[i], sizeof(dst->first_error[i]));
    }
    dst->elapsed_s += src->elapsed_s;
    dst->dropped += src->dropped;
    if (src->nsegs) {
        dst->segs = mg_realloc(dst->segs, (dst->nsegs + src->nsegs) * sizeof(*dst->segs));
        memcpy(dst->segs + dst->nsegs, src->segs, src->nsegs * sizeof(*src->segs));
        dst->nsegs += src->nsegs;
    }
}

uint64_t mgb_result_total_ops(const struct mgb_result *r)
{
    uint64_t n = 0;
    for (int i = 0; i < MGB_OP_COUNT; i++)
        n += r->ops[i];
    return n;
}

uint64_t mgb_result_total_errors(const struct mgb_result *r)
{
    uint64_t n = 0;
    for (int i = 0; i < MGB_OP_COUNT; i++)
        n += r->errors[i];
    return n;
}

/* ----------------------------------------------------------- endpoints */

/* Resolve one "http://host[:port]" (len bytes of url) into *addr; host gets host[:port]. */
static int endpoint_parse_one(const char *url, size_t len, char *host, size_t host_cap,
                              struct sockaddr_storage *addr, socklen_t *addr_len, char *err,
                              size_t errlen)
{
    if (len < 7 || strncmp(url, "http://", 7) != 0) {
        snprintf(err, errlen, "endpoint must be http://host[:port] (no TLS): %.*s", (int)len,
                 url);
        return -1;
    }
    const char *h = url + 7;
    size_t hl = strcspn(h, "/,");
    if (hl == 0 || hl >= host_cap || hl > len - 7) {
        snprintf(err, errlen, "bad endpoint host: %.*s", (int)len, url);
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    char name[160], port[16] = "80";
    snprintf(name, sizeof(name), "%s", host);
    char *colon = strrchr(name, ':');
    if (colon && !strchr(colon, ']')) {
        snprintf(port, sizeof(port), "%s", colon + 1);
        *colon = 0;
    }
    if (name[0] == '[') { /* [v6]:port */
        memmove(name, name + 1, strlen(name));
        name[strcspn(name, "]")] = 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rv = getaddrinfo(name, port, &hints, &ai);
    if (rv != 0 || !ai) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(rv));
        return -1;
    }
    memcpy(addr, ai->ai_addr, ai->ai_addrlen);
    *addr_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

int mgb_endpoint_parse(struct mgb_endpoint *ep, const char *url, char *err, size_t errlen)
{
    if (strlen(url) >= sizeof(ep->url)) {
        snprintf(err, errlen, "endpoint list too long");
        return -1;
    }
    snprintf(ep->url, sizeof(ep->url), "%s", url);
    ep->naddrs = 0;
    for (const char *p = url;;) {
        size_t len = strcspn(p, ",");
        if (ep->naddrs == MGB_EP_ADDRS_MAX) {
            snprintf(err, errlen, "at most %d endpoint URLs", MGB_EP_ADDRS_MAX);
            return -1;
        }
        char host[160];
        unsigned i = ep->naddrs;
        if (endpoint_parse_one(p, len, host, sizeof(host), &ep->addrs[i], &ep->addr_lens[i], err,
                               errlen) != 0)
            return -1;
        if (i == 0)
            snprintf(ep->host, sizeof(ep->host), "%s", host);
        ep->naddrs++;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    ep->addr = ep->addrs[0];
    ep->addr_len = ep->addr_lens[0];
    return 0;
}

/* ------------------------------------------------------------- signing */

static void amz_date_now(char out[17])
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static void str_app(struct mg_buf *b, const char *s)
{
    mg_buf_append(b, s, strlen(s));
}

/* Decimal digits of v into out (no NUL); returns their count. */
static size_t u64_dec(uint64_t v, char out[24])
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* One signed request head: request line, Host, x-amz-date, x-amz-content-sha256, the extra
 * headers, Authorization, Content-Length (when content_length >= 0) and the blank line.
 * extra headers must be given lower case; signed_headers lists all signed names sorted. */
static void build_signed(const struct mgb_config *cfg, const struct mgb_endpoint *ep,
                         const char *amz_date, const char *method, const char *path,
                         const char *query, const struct mg_http_hdr *extra, size_t nextra,
                         const char *signed_headers, const char *payload_hash,
                         int64_t content_length, struct mg_buf *scratch, struct mg_buf *out)
{
    struct mg_http_hdr hdrs[8];
    size_t n = 0;
    assert(nextra <= 5);
#define S(x) ((struct mg_str){(x), strlen(x)})
    hdrs[n++] = (struct mg_http_hdr){S("host"), S(ep->host)};
    hdrs[n++] = (struct mg_http_hdr){S("x-amz-content-sha256"), S(payload_hash)};
    hdrs[n++] = (struct mg_http_hdr){S("x-amz-date"), S(amz_date)};
    for (size_t i = 0; i < nextra; i++)
        hdrs[n++] = extra[i];
    struct mg_sig_req req = {.method = S(method), .path = S(path), .query = S(query),
                             .headers = hdrs, .nheaders = n};
    scratch->len = 0;
    mg_sigv4_sign_header(&req, S(ep->access_key), S(ep->secret_key), S(cfg->region),
                         S(amz_date), S(signed_headers), S(payload_hash), scratch);
#undef S
    /* Appends, not printf: this runs once per unsigned-cacheable request (PUT, DELETE). */
    out->len = 0;
    str_app(out, method);
    mg_buf_append(out, " ", 1);
    str_app(out, path);
    if (query[0]) {
        mg_buf_append(out, "?", 1);
        str_app(out, query);
    }
    mg_buf_append(out, " HTTP/1.1\r\nHost: ", 17);
    str_app(out, ep->host);
    mg_buf_append(out, "\r\nx-amz-date: ", 14);
    str_app(out, amz_date);
    mg_buf_append(out, "\r\nx-amz-content-sha256: ", 24);
    str_app(out, payload_hash);
    mg_buf_append(out, "\r\n", 2);
    for (size_t i = 0; i < nextra; i++) {
        mg_buf_append(out, extra[i].name.base, extra[i].name.len);
        mg_buf_append(out, ": ", 2);
        mg_buf_append(out, extra[i].value.base, extra[i].value.len);
        mg_buf_append(out, "\r\n", 2);
    }
    mg_buf_append(out, "Authorization: ", 15);
    mg_buf_append(out, scratch->base, scratch->len);
    if (content_length >= 0) {
        char num[24];
        mg_buf_append(out, "\r\nContent-Length: ", 18);
        mg_buf_append(out, num, u64_dec((uint64_t)content_length, num));
    }
    mg_buf_append(out, "\r\n\r\n", 4);
}

/* ---------------------------------------------------------- one-shot */

/* Connect to the endpoint's node n % naddrs (one-shot requests use node 0). */
static int connect_blocking(const struct mgb_endpoint *ep, unsigned n)
{
    unsigned i = ep->naddrs > 1 ? n % ep->naddrs : 0;
    const struct sockaddr_storage *a = ep->naddrs > 1 ? &ep->addrs[i] : &ep->addr;
    socklen_t al = ep->naddrs > 1 ? ep->addr_lens[i] : ep->addr_len;
    int fd = socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)a, al) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

void mgb_content_md5(const char *body, size_t len, char out[32])
{
    uint8_t digest[32];
    struct mg_cksum ck;
    mg_cksum_init(&ck, MG_CKSUM_MD5);
    mg_cksum_update(&ck, body, len);
    size_t dl = mg_cksum_final(&ck, digest);
    mg_cksum_close(&ck);
    mg_base64_encode(digest, dl, out);
}

static void head_build(const struct mgb_config *cfg, const struct mgb_endpoint *ep,
                       const struct mgb_req *rq, struct mg_buf *scratch, struct mg_buf *head)
{
    char amz_date[17], md5_b64[32], sha_hex[MG_SHA256_HEX_LEN + 1];
    int has_body = rq->body && rq->body_len;
    int64_t cl = has_body || strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0
                     ? (int64_t)rq->body_len
                     : -1;
    if (rq->no_auth) {
        head->len = 0;
        mg_buf_appendf(head, "%s %s%s%s HTTP/1.1\r\nHost: %s\r\n", rq->method, rq->path,
                       rq->query[0] ? "?" : "", rq->query, ep->host);
        if (cl >= 0)
            mg_buf_appendf(head, "Content-Length: %" PRId64 "\r\n", cl);
        mg_buf_append(head, "\r\n", 2);
        return;
    }
    amz_date_now(amz_date);
    if (has_body) {
        uint8_t digest[32];
        mg_sha256(rq->body, rq->body_len, digest);
        mg_hex_encode(digest, 32, sha_hex);
    } else {
        snprintf(sha_hex, sizeof(sha_hex), "%s", MG_EMPTY_SHA256);
    }
    struct mg_http_hdr h;
    size_t nh = 0;
    if (rq->content_md5) {
        mgb_content_md5(rq->body ? rq->body : "", rq->body_len, md5_b64);
        h = (struct mg_http_hdr){{"content-md5", 11}, {md5_b64, strlen(md5_b64)}};
        nh = 1;
    }
    build_signed(cfg, ep, amz_date, rq->method, rq->path, rq->query, nh ? &h : NULL, nh,
                 nh ? "content-md5;host;x-amz-content-sha256;x-amz-date"
                    : "host;x-amz-content-sha256;x-amz-date",
                 sha_hex, cl, scratch, head);
}

/* Write head + body and read one response on fd. Returns the status, -1 on a transport
 * error, -2 when the connection was closed before any response byte (a stale keep-alive). */
static int exchange(int fd, const struct mg_buf *head, const struct mgb_req *rq, char *resp,
                    size_t cap, size_t *resp_len, int *closed)
{
    struct iovec iov[2] = {{head->base, head->len}, {(void *)rq->body, rq->body_len}};
    size_t total = head->len + (rq->body ? rq->body_len : 0), sent = 0;
    while (sent < total) {
        struct iovec v[2];
        int n = 0;
        if (sent < head->len) {
            v[n++] = (struct iovec){(char *)iov[0].iov_base + sent, head->len - sent};
            if (rq->body && rq->body_len)
                v[n++] = iov[1];
        } else {
            v[n++] = (struct iovec){(char *)rq->body + (sent - head->len), total - sent};
        }
        ssize_t w = writev(fd, v, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return sent == 0 ? -2 : -1;
        sent += (size_t)w;
    }
    struct mgb_resp r;
    mgb_resp_init(&r, strcmp(rq->method, "HEAD") == 0, resp, cap ? cap - 1 : 0);
    char buf[16384];
    int any = 0;
    while (r.state != MGB_RESP_DONE) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 && mgb_resp_eof(&r) == 0)
                break;
            return any || n < 0 ? -1 : -2;
        }
        any = 1;
        if (mgb_resp_feed(&r, buf, (size_t)n) < 0)
            return -1;
    }
    if (cap)
        resp[r.cap_len] = 0;
    if (resp_len)
        *resp_len = r.cap_len;
    *closed = r.close;
    return r.status;
}

int mgb_request(const struct mgb_config *cfg, const struct mgb_endpoint *ep, int *fd,
                const struct mgb_req *rq, char *resp, size_t cap, size_t *resp_len)
{
    struct mg_buf head, scratch;
    mg_buf_init(&head);
    mg_buf_init(&scratch);
    head_build(cfg, ep, rq, &scratch, &head);
    int status = -1;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fresh = *fd < 0;
        if (fresh) {
            *fd = connect_blocking(ep, 0);
            if (*fd < 0)
                break;
            struct timeval tv = {.tv_sec = (time_t)(cfg->timeout_s > 0 ? cfg->timeout_s : 30)};
            setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        }
        int closed = 0;
        status = exchange(*fd, &head, rq, resp, cap, resp_len, &closed);
        if (status < 0 || closed) {
            close(*fd);
            *fd = -1;
        }
        if (status != -2 || fresh)
            break; /* -2 on a kept connection: the server had closed it; reconnect once */
    }
    mg_buf_close(&head);
    mg_buf_close(&scratch);
    return status < 0 ? -1 : status;
}

int mgb_request_once(const struct mgb_config *cfg, const struct mgb_endpoint *ep,
                     const char *method, const char *path, char *body, size_t body_cap)
{
    int fd = -1;
    struct mgb_req rq = {.method = method, .path = path, .query = ""};
    int st = mgb_request(cfg, ep, &fd, &rq, body, body_cap, NULL);
    if (fd >= 0)
        close(fd);
    return st;
}

int mgb_bucket_ensure(const struct mgb_config *cfg, const struct mgb_endpoint *ep)
{
    char path[80], body[2048];
    snprintf(path, sizeof(path), "/%s", cfg->bucket);
    int st = mgb_request_once(cfg, ep, "PUT", path, body, sizeof(body));
    if (st == 200 || (st == 409 && strstr(body, "BucketAlreadyOwnedByYou")))
        return 0;
    fprintf(stderr, "mgbench: create bucket %s on %s: %s %d %.300s\n", cfg->bucket, ep->url,
            st < 0 ? "transport error" : "HTTP", st, st < 0 ? "" : body);
    return -1;
}

/* ---------------------------------------------------------- key space */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static unsigned key_dir(const struct mgb_run *run, uint64_t id)
{
    return (unsigned)(mix64(id) % run->cfg->w.prefixes);
}

static int dir_fmt(const struct mgb_run *run, unsigned dir, char *out, size_t cap)
{
    return snprintf(out, cap, "%s/d%04u/", run->prefix, dir);
}

/* The key of id (workload.h, key shapes). Time-shaped keys carry run->key_epoch_s plus
 * id milliseconds, so they sort by id inside a prefix as log keys sort by time. */
static int key_fmt(const struct mgb_run *run, uint64_t id, char *out, size_t cap)
{
    if (run->cfg->key_name)
        return run->cfg->key_name(run->cfg->key_arg, id, out, cap);
    if (!run->cfg->w.keys_time)
        return snprintf(out, cap, "%s/d%04u/o%010" PRIu64, run->prefix, key_dir(run, id), id);
    time_t s = (time_t)(run->key_epoch_s + id / 1000);
    struct tm tm;
    char ts[32];
    gmtime_r(&s, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    return snprintf(out, cap, "%s/d%04u/%s.%06uZ-%010" PRIu64, run->prefix, key_dir(run, id), ts,
                    (unsigned)(id % 1000) * 1000, id);
}

static void pool_add(struct thr *t, uint64_t id)
{
    if (t->pool_len == t->pool_cap) {
        t->pool_cap = t->pool_cap ? t->pool_cap * 2 : 1024;
        t->pool = mg_realloc(t->pool, t->pool_cap * sizeof(*t->pool));
    }
    t->pool[t->pool_len++] = id;
}

/* Whether a request on key id is in flight on one of this thread's connections. Keys are
 * owned by one thread, so this is exact; it costs one pass over the thread's connections. */
static int key_busy(const struct thr *t, uint64_t id)
{
    for (unsigned i = 0; i < t->nconns; i++) {
        const struct conn *c = &t->conns[i];
        if ((c->state == C_SEND || c->state == C_RECV) && c->id == id && c->nobjs == 0)
            return 1;
    }
    return 0;
}

/* A random existing key; take: remove it from the pool (DELETE, RENAME). A key that is
 * being read is not taken (a few tries), or the read would race the delete and fail with
 * a 404 that is the benchmark's fault, not the server's. */
static uint64_t pool_pick(struct thr *t, int take)
{
    assert(t->pool_len > 0);
    size_t i = (size_t)mgb_rng_below(&t->rng, t->pool_len);
    for (int tries = 0; take && tries < 8 && key_busy(t, t->pool[i]); tries++)
        i = (size_t)mgb_rng_below(&t->rng, t->pool_len);
    uint64_t id = t->pool[i];
    if (take)
        t->pool[i] = t->pool[--t->pool_len];
    return id;
}

static uint64_t fresh_id(struct thr *t)
{
    uint64_t id = t->next_id;
    t->next_id += t->run->nthreads;
    return id;
}

/* ------------------------------------------------------ request heads */

enum { K_GET = 1, K_HEAD, K_LIST, K_LISTDIR, K_STATDIR, K_LISTFILE, K_HELLO };

static void refresh_date(struct thr *t)
{
    time_t now = time(NULL);
    if (now / 60 != t->date_min) {
        t->date_min = now / 60;
        t->date_gen++;
        amz_date_now(t->amz_date);
    }
}

static struct cache_slot *cache_slot(struct thr *t, uint32_t kind, uint64_t id)
{
    return &t->cache[mix64(id * 16 + kind) & (CACHE_SLOTS - 1)];
}

static int cache_get(struct thr *t, uint32_t kind, uint64_t id, struct mg_buf *out)
{
    struct cache_slot *s = cache_slot(t, kind, id);
    if (s->kind != kind || s->id != id || s->gen != t->date_gen)
        return 0;
    out->len = 0;
    mg_buf_append(out, s->buf, s->len);
    return 1;
}

static void cache_put(struct thr *t, uint32_t kind, uint64_t id, const struct mg_buf *head)
{
    struct cache_slot *s = cache_slot(t, kind, id);
    s->buf = mg_realloc(s->buf, head->len);
    memcpy(s->buf, head->base, head->len);
    s->len = head->len;
    s->kind = kind;
    s->id = id;
    s->gen = t->date_gen;
}

/* Query-string value encoding as SigV4 canonicalizes it ('/' encoded). */
static void qenc(const char *s, struct mg_buf *out)
{
    mg_uri_encode((struct mg_str){s, strlen(s)}, 0, out);
}

/* A bodiless signed request (GET, HEAD, DELETE, LIST) for key/prefix text. */
static void head_simple(struct thr *t, struct conn *c, const char *method, const char *path,
                        const char *query)
{
    const struct mgb_run *run = t->run;
    build_signed(run->cfg, run->ep, t->amz_date, method, path, query, NULL, 0,
                 "host;x-amz-content-sha256;x-amz-date", MG_EMPTY_SHA256, -1, &t->scratch,
                 &c->wbuf);
}

static void object_path(const struct mgb_run *run, uint64_t id, char *out, size_t cap)
{
    int n = snprintf(out, cap, "/%s/", run->cfg->bucket);
    key_fmt(run, id, out + n, cap - (size_t)n);
}

/* ListObjectsV2 query, canonical order: delimiter, list-type, max-keys, prefix, start-after. */
static void list_query(struct mg_buf *q, int delim, unsigned max_keys, const char *prefix,
                       const char *start_after)
{
    q->len = 0;
    if (delim)
        mg_buf_append(q, "delimiter=%2F&", 14);
    mg_buf_appendf(q, "list-type=2&max-keys=%u&prefix=", max_keys);
    qenc(prefix, q);
    if (start_after) {
        mg_buf_append(q, "&start-after=", 13);
        qenc(start_after, q);
    }
    mg_buf_append(q, "", 1); /* NUL */
}

static void build_read(struct thr *t, struct conn *c, uint32_t kind, uint64_t id)
{
    const struct mgb_run *run = t->run;
    if (cache_get(t, kind, id, &c->wbuf))
        return;
    char path[512], key[400], dir[300];
    struct mg_buf q;
    mg_buf_init(&q);
    if (kind == K_GET || kind == K_HEAD) {
        object_path(run, id, path, sizeof(path));
        head_simple(t, c, kind == K_GET ? "GET" : "HEAD", path, "");
    } else if (kind == K_HELLO) {
        c->wbuf.len = 0;
        mg_buf_appendf(&c->wbuf, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", run->cfg->path,
                       run->ep->host);
    } else {
        snprintf(path, sizeof(path), "/%s", run->cfg->bucket);
        key_fmt(run, id, key, sizeof(key));
        dir_fmt(run, kind == K_LIST || kind == K_LISTFILE ? key_dir(run, id) : (unsigned)id, dir,
                sizeof(dir));
        if (kind == K_LIST)
            list_query(&q, 0, run->cfg->w.list_max, dir, key);
        else if (kind == K_LISTFILE)
            list_query(&q, 0, 1, key, NULL);
        else
            list_query(&q, 1, kind == K_STATDIR ? 1 : run->cfg->w.list_max, dir, NULL);
        head_simple(t, c, "GET", path, q.base);
    }
    mg_buf_close(&q);
    cache_put(t, kind, id, &c->wbuf);
}

static void build_put(struct thr *t, struct conn *c, const char *key, int empty)
{
    const struct mgb_run *run = t->run;
    char path[512];
    snprintf(path, sizeof(path), "/%s/%s", run->cfg->bucket, key);
    c->body = empty ? NULL : run->body;
    c->body_len = empty ? 0 : run->body_len;
    build_signed(run->cfg, run->ep, t->amz_date, "PUT", path, "", NULL, 0,
                 "host;x-amz-content-sha256;x-amz-date", empty ? MG_EMPTY_SHA256 : run->body_sha,
                 (int64_t)c->body_len, &t->scratch, &c->wbuf);
}

static void build_copy(struct thr *t, struct conn *c, uint64_t src, uint64_t dst)
{
    const struct mgb_run *run = t->run;
    char path[512], source[512];
    object_path(run, dst, path, sizeof(path));
    object_path(run, src, source, sizeof(source));
    struct mg_http_hdr h = {{"x-amz-copy-source", 17}, {source, strlen(source)}};
    build_signed(run->cfg, run->ep, t->amz_date, "PUT", path, "", &h, 1,
                 "host;x-amz-content-sha256;x-amz-copy-source;x-amz-date", MG_EMPTY_SHA256, 0,
                 &t->scratch, &c->wbuf);
}

/* DeleteObjects (POST ?delete, Quiet): S3 requires Content-MD5 (or a checksum) on it. */
static void build_delete_multi(struct thr *t, struct conn *c)
{
    const struct mgb_run *run = t->run;
    char key[400], path[128], md5_b64[32], sha_hex[MG_SHA256_HEX_LEN + 1];
    uint8_t digest[32];
    c->xbody.len = 0;
    mg_buf_append(&c->xbody, "<Delete><Quiet>true</Quiet>", 27);
    for (unsigned i = 0; i < c->nobjs; i++) {
        key_fmt(run, c->batch[i], key, sizeof(key));
        mg_buf_appendf(&c->xbody, "<Object><Key>%s</Key></Object>", key);
    }
    mg_buf_append(&c->xbody, "</Delete>", 9);
    mgb_content_md5(c->xbody.base, c->xbody.len, md5_b64);
    mg_sha256(c->xbody.base, c->xbody.len, digest);
    mg_hex_encode(digest, 32, sha_hex);
    snprintf(path, sizeof(path), "/%s", run->cfg->bucket);
    struct mg_http_hdr h = {{"content-md5", 11}, {md5_b64, strlen(md5_b64)}};
    build_signed(run->cfg, run->ep, t->amz_date, "POST", path, "delete", &h, 1,
                 "content-md5;host;x-amz-content-sha256;x-amz-date", sha_hex,
                 (int64_t)c->xbody.len, &t->scratch, &c->wbuf);
    c->body = c->xbody.base;
    c->body_len = c->xbody.len;
}

/* ---------------------------------------------------------- connections */

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    c->want_out = 0;
    c->state = C_CLOSED;
}

static int conn_open(struct thr *t, struct conn *c)
{
    assert(c->fd < 0);
    /* Connection k of the run (threads take consecutive blocks) goes to node k. */
    int fd = connect_blocking(t->run->ep, t->idx * t->nconns + (unsigned)(c - t->conns));
    if (fd < 0) {
        if (++t->connect_fails >= CONNECT_FAILS_MAX)
            t->failed = 1;
        return -1;
    }
    t->connect_fails = 0;
    int fl = fcntl(fd, F_GETFL);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->state = C_IDLE;
    return 0;
}

static void set_out(struct thr *t, struct conn *c, int on)
{
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

/* ------------------------------------------------------------ accounting */

static void note_error(struct thr *t, enum mgb_op op, const struct conn *c, const char *why)
{
    char *dst = t->res.first_error[op];
    if (dst[0])
        return;
    if (why) {
        snprintf(dst, sizeof(t->res.first_error[op]), "%s", why);
        return;
    }
    const struct mgb_resp *r = &c->resp;
    const char *code = NULL;
    int code_len = 0;
    if (r->cap_len) {
        const char *end = r->cap + r->cap_len;
        const char *p = memmem(r->cap, r->cap_len, "<Code>", 6);
        const char *q = p ? memmem(p, (size_t)(end - p), "</Code>", 7) : NULL;
        if (p && q) {
            code = p + 6;
            code_len = (int)(q - code);
        }
    }
    snprintf(dst, sizeof(t->res.first_error[op]), "HTTP %d %.*s", r->status, code_len,
             code ? code : "");
}

static unsigned count_errors(const struct mgb_resp *r)
{
    unsigned n = 0;
    const char *p = r->cap, *end = r->cap + r->cap_len;
    while (p < end && (p = memmem(p, (size_t)(end - p), "<Error>", 7)) != NULL) {
        n++;
        p += 7;
    }
    return n;
}

static void record(struct thr *t, struct conn *c, uint64_t now, int ok, uint64_t bytes,
                   uint64_t objs, uint64_t errs)
{
    struct mgb_result *r = &t->res;
    enum mgb_op op = c->op;
    if (t->phase == MGB_PHASE_RUN)
        t->t_last = now;
    if (ok) {
        r->ops[op]++;
        r->bytes[op] += bytes;
        r->objects[op] += objs;
        mgb_hist_record(&r->hist[op], now - c->t_origin);
    }
    r->errors[op] += errs;
    if (r->nsegs) {
        uint64_t sec = (now - t->t0) / 1000000000u;
        if (sec < r->nsegs) {
            r->segs[sec].ops[op] += ok ? 1 : 0;
            r->segs[sec].bytes[op] += ok ? bytes : 0;
            r->segs[sec].errors[op] += errs;
        }
    }
    atomic_store_explicit(&t->live_ops, atomic_load_explicit(&t->live_ops, memory_order_relaxed) + (ok ? 1 : 0),
                          memory_order_relaxed);
    if (errs)
        atomic_fetch_add_explicit(&t->live_errors, errs, memory_order_relaxed);
}

/* ------------------------------------------------------------- requests */

static void op_finish(struct thr *t, struct conn *c, const char *transport_err);
static void next_op(struct thr *t, struct conn *c);

static void want_retry(struct thr *t, struct conn *c)
{
    if (!c->retry) {
        c->retry = 1;
        t->nretry++;
    }
}

static void send_more(struct thr *t, struct conn *c)
{
    size_t hl = c->wbuf.len, total = hl + c->body_len;
    while (c->sent < total) {
        struct iovec iov[2];
        int n = 0;
        if (c->sent < hl) {
            iov[n++] = (struct iovec){c->wbuf.base + c->sent, hl - c->sent};
            if (c->body_len)
                iov[n++] = (struct iovec){(void *)c->body, c->body_len};
        } else {
            iov[n++] = (struct iovec){(void *)(c->body + (c->sent - hl)), total - c->sent};
        }
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                if (!c->want_out)
                    set_out(t, c, 1);
                return;
            }
            op_finish(t, c, strerror(errno));
            return;
        }
        c->sent += (size_t)w;
    }
    if (c->want_out)
        set_out(t, c, 0);
    c->state = C_RECV;
}

static int open_loop(const struct thr *t)
{
    return t->phase == MGB_PHASE_RUN && t->run->cfg->w.open_loop;
}

/* Oldest released request of the open-loop backlog (backlog > 0): its release time. */
static uint64_t backlog_pop(struct thr *t)
{
    assert(t->backlog > 0 && t->ring_len > 0);
    struct release *r = &t->ring[t->ring_head];
    uint64_t when = r->t;
    t->backlog--;
    if (--r->n == 0) {
        t->ring_head = (t->ring_head + 1) % t->ring_cap;
        t->ring_len--;
    }
    return when;
}

/* Release n requests at tick time when; keep at most cap waiting (drop the oldest). */
static void backlog_push(struct thr *t, uint64_t when, uint64_t n, uint64_t cap)
{
    if (n) {
        if (t->ring_len == t->ring_cap) { /* more ticks waiting than a second has: drop */
            t->res.dropped += t->ring[t->ring_head].n;
            t->backlog -= t->ring[t->ring_head].n;
            t->ring_head = (t->ring_head + 1) % t->ring_cap;
            t->ring_len--;
        }
        t->ring[(t->ring_head + t->ring_len) % t->ring_cap] = (struct release){when, n};
        t->ring_len++;
        t->backlog += n;
    }
    while (t->backlog > cap) {
        struct release *r = &t->ring[t->ring_head];
        uint64_t k = t->backlog - cap < r->n ? t->backlog - cap : r->n;
        r->n -= k;
        t->backlog -= k;
        t->res.dropped += k;
        if (r->n == 0) {
            t->ring_head = (t->ring_head + 1) % t->ring_cap;
            t->ring_len--;
        }
    }
}

/* Send the request prepared in c (wbuf, body, op). Returns 1 if it was started. */
static int start(struct thr *t, struct conn *c)
{
    if (c->fd < 0 && conn_open(t, c) != 0) {
        uint64_t now = mgb_now_ns();
        c->t_start = now;
        c->t_origin = now;
        record(t, c, now, 0, 0, 0, c->op == MGB_OP_DELETE && c->nobjs ? c->nobjs : 1);
        note_error(t, c->op, c, "connect failed");
        want_retry(t, c);
        return 0;
    }
    mgb_resp_init(&c->resp, c->op == MGB_OP_HEAD, c->cap, CAP_BYTES);
    c->sent = 0;
    c->state = C_SEND;
    c->t_start = mgb_now_ns();
    if (!open_loop(t))
        c->t_origin = c->t_start;
    t->inflight++;
    send_more(t, c);
    return 1;
}

/* Choose the logical op of the run phase; MGB_LOP_COUNT when there is nothing to do. */
static enum mgb_lop pick_lop(struct thr *t)
{
    const struct mgb_workload *w = &t->run->cfg->w;
    enum mgb_lop lop = (enum mgb_lop)mgb_rng_pick(&t->rng, w->cum, MGB_LOP_COUNT);
    if (mgb_lop_needs_key(lop) && t->pool_len == 0)
        lop = w->weight[MGB_LOP_PUT] > 0 ? MGB_LOP_PUT : MGB_LOP_COUNT;
    return lop;
}

/* Build the request of logical op lop into c. */
static void build_op(struct thr *t, struct conn *c, enum mgb_lop lop)
{
    const struct mgb_run *run = t->run;
    char key[400];
    c->lop = lop;
    c->body = NULL;
    c->body_len = 0;
    c->nobjs = 0;
    switch (lop) {
    case MGB_LOP_GET:
    case MGB_LOP_HEAD:
        c->id = pool_pick(t, 0);
        c->op = lop == MGB_LOP_GET ? MGB_OP_GET : MGB_OP_HEAD;
        build_read(t, c, lop == MGB_LOP_GET ? K_GET : K_HEAD, c->id);
        break;
    case MGB_LOP_HELLO:
        c->op = MGB_OP_GET;
        build_read(t, c, K_HELLO, 0);
        break;
    case MGB_LOP_LIST:
    case MGB_LOP_LISTFILE:
        c->id = pool_pick(t, 0);
        c->op = MGB_OP_LIST;
        build_read(t, c, lop == MGB_LOP_LIST ? K_LIST : K_LISTFILE, c->id);
        break;
    case MGB_LOP_LISTDIR:
    case MGB_LOP_STATDIR:
        c->op = MGB_OP_LIST;
        build_read(t, c, lop == MGB_LOP_LISTDIR ? K_LISTDIR : K_STATDIR,
                   mgb_rng_below(&t->rng, run->cfg->w.prefixes));
        break;
    case MGB_LOP_PUT:
        c->op = MGB_OP_PUT;
        if (t->phase != MGB_PHASE_PREPARE)
            c->id = fresh_id(t);
        key_fmt(run, c->id, key, sizeof(key));
        build_put(t, c, key, run->body_len == 0);
        break;
    case MGB_LOP_MKDIR: {
        char dir[300];
        c->op = MGB_OP_PUT;
        c->id2 = fresh_id(t);
        dir_fmt(run, (unsigned)mgb_rng_below(&t->rng, run->cfg->w.prefixes), dir, sizeof(dir));
        snprintf(key, sizeof(key), "%sm%010" PRIu64 "/", dir, c->id2);
        build_put(t, c, key, 1);
        break;
    }
    case MGB_LOP_DELETE: {
        char path[512];
        c->op = MGB_OP_DELETE;
        c->id = pool_pick(t, 1);
        object_path(run, c->id, path, sizeof(path));
        head_simple(t, c, "DELETE", path, "");
        break;
    }
    case MGB_LOP_DELETEMULTI:
        c->op = MGB_OP_DELETE;
        while (c->nobjs < run->cfg->w.batch && t->pool_len)
            c->batch[c->nobjs++] = pool_pick(t, 1);
        build_delete_multi(t, c);
        break;
    case MGB_LOP_RENAME:
        c->op = MGB_OP_COPY;
        c->id = pool_pick(t, 1);
        c->id2 = fresh_id(t);
        build_copy(t, c, c->id, c->id2);
        break;
    case MGB_LOP_COUNT:
        assert(0);
    }
}

/* Start the next operation of the current phase on c. Returns 1 if one was started. */
static int issue(struct thr *t, struct conn *c)
{
    enum mgb_lop lop;
    if (t->failed)
        return 0;
    switch (t->phase) {
    case MGB_PHASE_PREPARE:
        if (t->prep_next >= t->run->objects)
            return 0;
        c->id = t->prep_next;
        t->prep_next += t->run->nthreads;
        lop = MGB_LOP_PUT;
        break;
    case MGB_PHASE_CLEAN:
        if (t->pool_len == 0)
            return 0;
        lop = MGB_LOP_DELETEMULTI;
        break;
    default:
        if (mgb_now_ns() >= t->deadline)
            return 0;
        lop = pick_lop(t);
        if (lop == MGB_LOP_COUNT)
            return 0;
    }
    build_op(t, c, lop);
    return start(t, c);
}

static void next_op(struct thr *t, struct conn *c)
{
    if (!open_loop(t)) {
        issue(t, c);
        return;
    }
    while (t->backlog) {
        c->t_origin = backlog_pop(t);
        if (issue(t, c))
            return;
        t->res.dropped++;
        if (c->retry)
            return; /* the scan brings it back */
    }
    if (!c->listed) {
        c->listed = 1;
        t->idle[t->nidle++] = c;
    }
}

/* Apply the result of the finished request to the key pool; returns 1 when the logical op
 * continues with a second request on c (RENAME: the DeleteObject after the copy). */
static int effects(struct thr *t, struct conn *c, int ok)
{
    if (c->lop == MGB_LOP_PUT && ok) {
        pool_add(t, c->id);
    } else if (c->lop == MGB_LOP_RENAME && c->op == MGB_OP_COPY) {
        if (!ok) {
            pool_add(t, c->id);
            return 0;
        }
        pool_add(t, c->id2);
        char path[512];
        object_path(t->run, c->id, path, sizeof(path));
        c->op = MGB_OP_DELETE;
        c->body = NULL;
        c->body_len = 0;
        head_simple(t, c, "DELETE", path, "");
        return 1;
    }
    return 0;
}

static void op_finish(struct thr *t, struct conn *c, const char *transport_err)
{
    uint64_t now = mgb_now_ns();
    const struct mgb_resp *r = &c->resp;
    int st = transport_err ? 0 : r->status, ok = 0;
    uint64_t bytes = 0, objs = 1, errs = 0;
    assert(t->inflight > 0);
    t->inflight--;
    switch (c->op) {
    case MGB_OP_GET:
        ok = c->lop == MGB_LOP_HELLO ? (st >= 200 && st < 300) : (st == 200 || st == 206);
        bytes = r->body_bytes;
        break;
    case MGB_OP_PUT:
        ok = st == 200;
        bytes = c->body_len;
        break;
    case MGB_OP_DELETE:
        if (c->nobjs) {
            ok = st == 200;
            errs = ok ? count_errors(r) : c->nobjs;
            objs = c->nobjs - errs;
        } else {
            ok = st == 204 || st == 200;
        }
        break;
    case MGB_OP_COPY:
        ok = st == 200 && count_errors(r) == 0;
        break;
    default:
        ok = st == 200;
    }
    if (!ok && !errs)
        errs = 1;
    record(t, c, now, ok, bytes, objs, errs);
    if (errs)
        note_error(t, c->op, c, transport_err);
    int busy_close = c->state == C_SEND; /* answered before the body was sent */
    if (transport_err || r->close || busy_close)
        conn_close(c);
    else
        c->state = C_IDLE;
    if (effects(t, c, ok)) {
        c->t_origin = mgb_now_ns(); /* the second request of a RENAME times itself */
        start(t, c);
        return;
    }
    if (transport_err) {
        want_retry(t, c); /* picked up by the next scan: no hot loop against a dead server */
        return;
    }
    next_op(t, c);
}

/* ------------------------------------------------------------ the loop */

static void on_readable(struct thr *t, struct conn *c)
{
    for (;;) {
        if (c->fd < 0)
            return;
        ssize_t n = read(c->fd, t->rbuf, RBUF_BYTES);
        int busy = c->state == C_RECV || c->state == C_SEND;
        if (n > 0) {
            if (!busy) {
                conn_close(c); /* unsolicited bytes: drop the connection */
                return;
            }
            if (mgb_resp_feed(&c->resp, t->rbuf, (size_t)n) < 0) {
                op_finish(t, c, "malformed HTTP response");
                return;
            }
            if (c->resp.state == MGB_RESP_DONE) {
                op_finish(t, c, NULL);
                return;
            }
            if ((size_t)n < RBUF_BYTES)
                return;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (!busy)
            conn_close(c); /* the server closed an idle keep-alive connection */
        else if (n == 0 && mgb_resp_eof(&c->resp) == 0)
            op_finish(t, c, NULL);
        else
            op_finish(t, c, n == 0 ? "connection closed by server" : strerror(errno));
        return;
    }
}

/* Every 100 ms: time out stuck requests, give retrying connections work again. */
static void scan(struct thr *t, uint64_t now)
{
    uint64_t tmo = (uint64_t)(t->run->cfg->timeout_s * 1e9);
    for (unsigned i = 0; i < t->nconns; i++) {
        struct conn *c = &t->conns[i];
        /* t_start may be after now: tick() starts requests after the loop read the clock */
        if ((c->state == C_SEND || c->state == C_RECV) && now > c->t_start &&
            now - c->t_start > tmo) {
            op_finish(t, c, "timeout");
        } else if (c->retry && c->state != C_SEND && c->state != C_RECV) {
            c->retry = 0;
            t->nretry--;
            next_op(t, c);
        }
    }
}

/* Open loop: release the requests of every 10 ms tick that has passed (λFS: the offered
 * rate is redrawn every window_s seconds). The backlog is bounded by one second of the
 * offered rate; what does not fit is dropped and reported. */
static void tick(struct thr *t, uint64_t now)
{
    const struct mgb_config *cfg = t->run->cfg;
    uint64_t tick_ns = (uint64_t)cfg->w.tick_ms * 1000000u;
    while (now >= t->next_tick) {
        uint64_t sec = (t->next_tick - t->t0) / 1000000000u;
        unsigned win = (unsigned)(sec / cfg->w.window_s);
        double rate = cfg->offered[win < cfg->noffered ? win : cfg->noffered - 1];
        double per_thr = rate / t->run->nthreads;
        t->tokens += per_thr * (double)cfg->w.tick_ms / 1000.0;
        uint64_t rel = (uint64_t)t->tokens;
        t->tokens -= (double)rel;
        if (sec < t->res.nsegs)
            t->res.segs[sec].released += rel;
        backlog_push(t, t->next_tick, rel, per_thr > 1 ? (uint64_t)per_thr : 1);
        t->next_tick += tick_ns;
    }
    while (t->backlog && t->nidle) {
        struct conn *c = t->idle[--t->nidle];
        c->listed = 0;
        next_op(t, c);
    }
}

/* The run phase ends at the deadline: no new request starts, the ones in flight finish
 * (up to --timeout) and count, and the measured window ends at the last completion. Cutting
 * them off instead, as warp does, undercounts a server in proportion to its latency (20
 * DeleteObjects of 3 s each in a 10 s window lose a quarter of their work). */
static void loop(struct thr *t)
{
    struct epoll_event evs[MAX_EVENTS];
    uint64_t last_scan = t->t0, drain_end = 0;
    int open = open_loop(t), draining = 0;
    for (;;) {
        uint64_t now = mgb_now_ns();
        if (t->failed)
            break;
        if (now >= t->deadline) {
            if (!draining) {
                draining = 1;
                drain_end = now + (uint64_t)(t->run->cfg->timeout_s * 1e9);
                t->backlog = 0; /* released but never sent: not offered any more */
                t->ring_len = 0;
            }
            if (t->inflight == 0 || now >= drain_end)
                break;
        } else if (open) {
            tick(t, now);
        }
        if (now - last_scan >= 100000000u) {
            last_scan = now;
            refresh_date(t);
            scan(t, now);
        }
        if (!open && t->inflight == 0 && t->nretry == 0)
            break; /* no work left in this phase */
        int timeout_ms = open && !draining
                             ? (int)((t->next_tick > now ? t->next_tick - now : 0) / 1000000u)
                             : 100;
        if (!draining && t->deadline != UINT64_MAX &&
            t->deadline - now < (uint64_t)timeout_ms * 1000000u)
            timeout_ms = (int)((t->deadline - now) / 1000000u) + 1;
        int n = epoll_wait(t->epfd, evs, MAX_EVENTS, timeout_ms);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if ((evs[i].events & EPOLLOUT) && c->state == C_SEND && c->fd >= 0)
                send_more(t, c);
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(t, c);
        }
    }
}

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    for (unsigned i = 0; i < t->nconns; i++)
        if (t->conns[i].fd < 0 && conn_open(t, &t->conns[i]) != 0)
            want_retry(t, &t->conns[i]);
    pthread_barrier_wait(&t->run->barrier);
    t->t0 = mgb_now_ns();
    t->deadline = t->phase == MGB_PHASE_RUN
                      ? t->t0 + (uint64_t)(t->run->cfg->duration_s * 1e9)
                      : UINT64_MAX;
    t->next_tick = t->t0;
    t->t_last = 0;
    refresh_date(t);
    for (unsigned i = 0; i < t->nconns; i++)
        if (!t->conns[i].retry)
            next_op(t, &t->conns[i]);
    loop(t);
    uint64_t now = mgb_now_ns();
    if (now < t->deadline)
        t->t_end = now; /* ran out of work early */
    else
        t->t_end = t->t_last > t->deadline ? t->t_last : t->deadline;
    for (unsigned i = 0; i < t->nconns; i++) {
        conn_close(&t->conns[i]); /* abandons only requests past the drain timeout */
        t->conns[i].retry = 0;
        t->conns[i].listed = 0;
    }
    t->nretry = 0;
    t->inflight = 0;
    t->nidle = 0;
    atomic_store(&t->done, 1);
    return NULL;
}

/* ------------------------------------------------------------- phases */

struct mgb_run *mgb_run_create(const struct mgb_config *cfg, const struct mgb_endpoint *ep,
                               const char *prefix, unsigned round)
{
    struct mgb_run *run = mg_calloc(1, sizeof(*run));
    run->cfg = cfg;
    run->ep = ep;
    run->round = round;
    snprintf(run->prefix, sizeof(run->prefix), "%s", prefix);
    run->key_epoch_s = (int64_t)time(NULL);
    run->objects = ep->objects ? ep->objects : cfg->w.objects;
    run->nthreads = cfg->threads < cfg->concurrency ? cfg->threads : cfg->concurrency;
    assert(run->nthreads > 0);
    struct mgb_rng rng;
    mgb_rng_seed(&rng, cfg->seed ^ 0x6d67626eULL);
    run->body_len = cfg->w.size_bytes;
    run->body = mg_malloc(run->body_len ? run->body_len : 1);
    for (size_t i = 0; i < run->body_len; i += 8) {
        uint64_t x = mgb_rng_next(&rng);
        memcpy(run->body + i, &x, run->body_len - i < 8 ? run->body_len - i : 8);
    }
    uint8_t digest[32];
    mg_sha256(run->body, run->body_len, digest);
    mg_hex_encode(digest, 32, run->body_sha);
    run->thr = mg_calloc(run->nthreads, sizeof(*run->thr));
    for (unsigned i = 0; i < run->nthreads; i++) {
        struct thr *t = &run->thr[i];
        t->run = run;
        t->idx = i;
        mgb_rng_seed(&t->rng, cfg->seed + 7919u * (round + 1) + 104729u * (i + 1) +
                                  (uint64_t)ep->label[0] * 1299709u);
        t->epfd = epoll_create1(EPOLL_CLOEXEC);
        t->nconns = cfg->concurrency / run->nthreads + (i < cfg->concurrency % run->nthreads);
        t->conns = mg_calloc(t->nconns, sizeof(*t->conns));
        t->idle = mg_calloc(t->nconns, sizeof(*t->idle));
        for (unsigned k = 0; k < t->nconns; k++) {
            struct conn *c = &t->conns[k];
            c->fd = -1;
            c->t = t;
            mg_buf_init(&c->wbuf);
            mg_buf_init(&c->xbody);
            c->cap = mg_malloc(CAP_BYTES);
            c->batch = mg_malloc(cfg->w.batch * sizeof(*c->batch));
        }
        t->next_id = run->objects + i;
        t->prep_next = i;
        t->date_min = -1;
        t->cache = mg_calloc(CACHE_SLOTS, sizeof(*t->cache));
        mg_buf_init(&t->scratch);
        t->rbuf = mg_malloc(RBUF_BYTES);
        t->ring_cap = 1000 / (cfg->w.tick_ms ? cfg->w.tick_ms : 10) + 4; /* > 1 s of ticks */
        t->ring = mg_calloc(t->ring_cap, sizeof(*t->ring));
    }
    return run;
}

void mgb_run_destroy(struct mgb_run *run)
{
    if (!run)
        return;
    for (unsigned i = 0; i < run->nthreads; i++) {
        struct thr *t = &run->thr[i];
        for (unsigned k = 0; k < t->nconns; k++) {
            struct conn *c = &t->conns[k];
            conn_close(c);
            mg_buf_close(&c->wbuf);
            mg_buf_close(&c->xbody);
            mg_free(c->cap);
            mg_free(c->batch);
        }
        for (unsigned k = 0; k < CACHE_SLOTS; k++)
            mg_free(t->cache[k].buf);
        mg_free(t->cache);
        mg_free(t->conns);
        mg_free(t->idle);
        mg_free(t->pool);
        mg_free(t->rbuf);
        mg_free(t->ring);
        mg_buf_close(&t->scratch);
        mgb_result_close(&t->res);
        close(t->epfd);
    }
    mg_free(run->thr);
    mg_free(run->body);
    mg_free(run);
}

static const char *phase_name(enum mgb_phase p)
{
    return p == MGB_PHASE_PREPARE ? "prepare" : p == MGB_PHASE_RUN ? "run" : "clean";
}

/* Live line on stderr once a second while the phase runs. */
static void progress_wait(struct mgb_run *run, enum mgb_phase phase)
{
    uint64_t t0 = mgb_now_ns(), last_t = t0, last_ops = 0;
    for (;;) {
        unsigned done = 0;
        for (unsigned i = 0; i < run->nthreads; i++)
            done += (unsigned)atomic_load(&run->thr[i].done);
        if (done == run->nthreads)
            break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        uint64_t now = mgb_now_ns();
        int lines = run->cfg->progress_lines;
        if ((!run->cfg->progress && !lines) || now - last_t < (lines ? 3000000000u : 1000000000u))
            continue;
        uint64_t ops = 0, errs = 0;
        for (unsigned i = 0; i < run->nthreads; i++) {
            ops += atomic_load_explicit(&run->thr[i].live_ops, memory_order_relaxed);
            errs += atomic_load_explicit(&run->thr[i].live_errors, memory_order_relaxed);
        }
        fprintf(stderr, "%s[%s %s r%u] %5.1fs  %9.0f ops/s  %8" PRIu64 " ops  %" PRIu64
                        " errors%s",
                lines ? "" : "\r\033[K", run->ep->label, phase_name(phase), run->round + 1, (double)(now - t0) / 1e9,
                (double)(ops - last_ops) * 1e9 / (double)(now - last_t), ops, errs,
                lines ? "\n" : "");
        last_t = now;
        last_ops = ops;
    }
    if (run->cfg->progress && !run->cfg->progress_lines)
        fprintf(stderr, "\r\033[K");
}

static void collect(struct mgb_run *run, enum mgb_phase phase, struct mgb_result *res)
{
    const struct mgb_config *cfg = run->cfg;
    uint64_t elapsed_ns = 0;
    unsigned nsegs = run->thr[0].res.nsegs;
    res->segs = nsegs ? mg_calloc(nsegs, sizeof(*res->segs)) : NULL;
    for (unsigned i = 0; i < run->nthreads; i++) {
        struct thr *t = &run->thr[i];
        struct mgb_seg *segs = t->res.segs;
        unsigned n = t->res.nsegs;
        t->res.segs = NULL;
        t->res.nsegs = 0;
        mgb_result_merge(res, &t->res);
        for (unsigned s = 0; s < n; s++) {
            for (int o = 0; o < MGB_OP_COUNT; o++) {
                res->segs[s].ops[o] += segs[s].ops[o];
                res->segs[s].bytes[o] += segs[s].bytes[o];
                res->segs[s].errors[o] += segs[s].errors[o];
            }
            res->segs[s].released += segs[s].released;
        }
        mg_free(segs);
        if (t->t_end - t->t0 > elapsed_ns)
            elapsed_ns = t->t_end - t->t0;
    }
    res->elapsed_s = (double)elapsed_ns / 1e9;
    /* Only whole seconds make a segment (a 10 s run has 10). */
    unsigned whole = (unsigned)(res->elapsed_s + 1e-3);
    res->nsegs = nsegs < whole ? nsegs : (whole ? whole : (nsegs ? 1 : 0));
    if (phase == MGB_PHASE_RUN && cfg->w.open_loop)
        for (unsigned s = 0; s < res->nsegs; s++) {
            unsigned win = s / cfg->w.window_s;
            res->segs[s].offered = cfg->offered[win < cfg->noffered ? win : cfg->noffered - 1];
        }
}

int mgb_run_phase(struct mgb_run *run, enum mgb_phase phase, struct mgb_result *res)
{
    const struct mgb_config *cfg = run->cfg;
    unsigned nsegs = phase == MGB_PHASE_RUN ? (unsigned)cfg->duration_s + 2 : 0;
    for (unsigned i = 0; i < run->nthreads; i++) {
        struct thr *t = &run->thr[i];
        mgb_result_close(&t->res);
        mgb_result_init(&t->res);
        t->res.nsegs = nsegs;
        t->res.segs = nsegs ? mg_calloc(nsegs, sizeof(*t->res.segs)) : NULL;
        t->phase = phase;
        t->failed = 0;
        t->connect_fails = 0;
        t->tokens = 0;
        t->backlog = 0;
        t->ring_head = 0;
        t->ring_len = 0;
        atomic_store(&t->done, 0);
        atomic_store(&t->live_ops, 0);
        atomic_store(&t->live_errors, 0);
    }
    pthread_barrier_init(&run->barrier, NULL, run->nthreads + 1);
    for (unsigned i = 0; i < run->nthreads; i++)
        pthread_create(&run->thr[i].tid, NULL, thr_main, &run->thr[i]);
    pthread_barrier_wait(&run->barrier);
    progress_wait(run, phase);
    int failed = 0;
    for (unsigned i = 0; i < run->nthreads; i++) {
        pthread_join(run->thr[i].tid, NULL);
        failed += run->thr[i].failed;
    }
    pthread_barrier_destroy(&run->barrier);
    collect(run, phase, res);
    if (failed == (int)run->nthreads) {
        fprintf(stderr, "mgbench: %s: cannot connect to %s\n", phase_name(phase), run->ep->url);
        return -1;
    }
    return 0;
}

uint64_t mgb_run_objects(const struct mgb_run *run)
{
    return run->objects;
}

size_t mgb_run_pool_size(const struct mgb_run *run)
{
    size_t n = 0;
    for (unsigned i = 0; i < run->nthreads; i++)
        n += run->thr[i].pool_len;
    return n;
}
