/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the gateway's HTTP core (server.c, route.c, auth.c, body.c,
 * respond.c, metrics.c, async.c): the server object and its loops, the
 * routing parser in a form that needs no h2o request (unit tests and the fuzz
 * target call it directly), the auth entry point with an explicit clock, and
 * the per-loop metrics shard. The S3 handlers use gw.h only; gateway.c uses
 * gw__server_create to register them.
 */
#ifndef MG_GATEWAY_CORE_H
#define MG_GATEWAY_CORE_H

#include <stdatomic.h>
#include <time.h>

#include <uv.h>

#include "common/config.h"
#include "gateway/gateway.h"
#include "gateway/gw.h"

/* ---- routing (route.c) */

struct gw__qparam {
    struct mg_str name;  /* decoded */
    struct mg_str value; /* decoded ('+' is a space, as S3 decodes query strings) */
};

/* What routing needs to know about a request. */
struct gw__route_in {
    struct mg_str method;    /* "GET" */
    struct mg_str authority; /* Host header value, may carry ":port" */
    struct mg_str target;    /* raw request-target: path plus optional "?query" */
    struct mg_str domain;    /* virtual-host suffix, empty when not configured */
    int has_copy_source;     /* x-amz-copy-source header present */
};

struct gw__route_out {
    enum gw_op op;
    struct mg_str bucket;
    struct mg_str key;   /* decoded */
    struct mg_str path;  /* raw path, no query */
    struct mg_str query; /* raw query, no '?' */
    struct gw__qparam *params;
    size_t nparams;
    int vhost; /* bucket came from the Host header */
};

/* Parse a request line into an S3 operation. Everything allocated from a. Returns 0,
 * MG_EINVALIDARGUMENT (bad percent-encoding or a NUL in the key; S3 says InvalidURI),
 * MG_EKEYTOOLONG, MG_EINVALIDBUCKETNAME (bucket over 255 bytes or not a name),
 * MG_EMETHODNOTALLOWED, MG_ENOTIMPLEMENTED (a known but unsupported subresource).
 * out->op is set even on error when known (for metrics). */
int gw__route_parse(const struct gw__route_in *in, struct mg_arena *a, struct gw__route_out *out);
/* Set up r (in req's lifetime; the caller allocated it) for req on srv and route it: op,
 * bucket, key, query parameters. Returns gw__route_parse's result. */
int gw__request_init(struct gw_request *r, h2o_req_t *req, struct gw_server *srv);
/* Find a decoded parameter; 1 if present. */
int gw__qparam_get(const struct gw__qparam *p, size_t n, const char *name, struct mg_str *out);

/* ---- authentication (auth.c) */

/* Authenticate r at wall-clock time now (seconds): SigV4 header or presigned query, SigV2
 * header or query, or anonymous (r->user stays NULL). Sets r->user, r->presigned and
 * r->core's payload mode. Returns 0, MG_EACCESSDENIED, MG_ESIGNATURE, MG_EINVALIDACCESSKEY,
 * MG_ESKEWED, MG_EEXPIRED, MG_EAUTHHEADER, MG_EAUTHQUERY, MG_EINVALIDARGUMENT,
 * MG_EINVALIDREQUEST, MG_EMISSINGSECHDR; r->errmsg says why. */
int gw__auth(struct gw_request *r, time_t now);

/* ---- metrics (metrics.c) */

#define GW_LAT_BUCKETS 15
#define GW_LAG_BUCKETS 14   /* loop lag: 0.1 .. 100 ms and +Inf (metrics.c) */
#define GW_SUBMIT_BATCH_MAX 256 /* ops a loop hands to meta per iteration, at most (async.c) */
#define GW_LAG_PERIOD_MS 20 /* loop-lag probe period: 50 samples/s per loop (server.c) */

/* Loop-lag samples (metrics.c). */
struct gw__lag_hist {
    uint64_t bucket[GW_LAG_BUCKETS]; /* non-cumulative */
    uint64_t sum_us;
    uint64_t max_us;
};

/* Per-loop counters: written by one loop thread only (relaxed atomics), summed on scrape. */
struct gw__metrics {
    _Alignas(64) uint64_t requests[GW_OP__COUNT];
    uint64_t errors_4xx[GW_OP__COUNT];
    uint64_t errors_5xx[GW_OP__COUNT];
    uint64_t lat_bucket[GW_OP__COUNT][GW_LAT_BUCKETS]; /* non-cumulative */
    uint64_t lat_sum_us[GW_OP__COUNT];
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t slowdown; /* 503 SlowDown answered because a bounded queue was full */
    struct gw__lag_hist lag;      /* how late the probe fired */
    struct gw__lag_hist lag_self; /* the same minus the loop thread's run-queue wait */
};

/* Account one finished request (called on the request's loop thread). */
void gw__metrics_record(struct gw__metrics *m, enum gw_op op, int status, uint64_t latency_us,
                        uint64_t bytes_in, uint64_t bytes_out);
/* One loop-lag sample (loop thread): lag_us, how late the loop's probe timer fired, and
 * self_us, that lag minus the time the loop thread spent runnable but waiting for a CPU
 * meanwhile (what other threads and processes cost it, not its own work or blocking). */
void gw__metrics_record_lag(struct gw__metrics *m, uint64_t lag_us, uint64_t self_us);
/* Requests answered from their head, before h2o read their body, and the body bytes they
 * announced (process-wide; server.c, issue 9 "Body before auth"). */
void gw__head_refusals(uint64_t *requests, uint64_t *body_bytes);
/* Prometheus text exposition of all loops plus meta_stats_get into out. */
void gw__metrics_render(struct gw_server *srv, struct mg_buf *out);

/* ---- server (server.c) */

struct gw__loop {
    struct gw_server *srv;
    int index;
    uv_loop_t loop;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    uv_tcp_t listener;
    uv_async_t stop_async;
    uv_timer_t stop_timer;
    int stop_ticks;
    int stopping;
    int disposed; /* context disposed and loop closed after the stop */
    int nconns;   /* open connections (bounded by MAX_CONNS_PER_LOOP) */
    uint64_t nconns_refused;
    uint64_t accept_pauses;  /* episodes of paused accepting (fd share, EMFILE), for /metrics */
    uint64_t conns_shed;     /* idle connections shut down at the descriptor share */
    uint64_t timeouts_request; /* requests answered RequestTimeout (no body progress) */
    uint64_t timeouts_io;    /* connections closed for no read/write progress otherwise */
    uv_thread_t thread;
    uint64_t next_request_id;
    struct meta_client *mc; /* this loop's reply endpoint for meta ops (loop_main) */
    uv_check_t submit_check; /* hands the iteration's ops to meta in one batch (async.c) */
    struct meta_op *deferred[GW_SUBMIT_BATCH_MAX]; /* ops submitted this iteration */
    int ndeferred;
    int async_inflight;     /* steps of async.c not finished yet (ops and worker jobs) */
    uv_timer_t lag_timer;   /* loop-lag probe (server.c) */
    uint64_t lag_due_ns;    /* when lag_timer should fire */
    int schedstat_fd;       /* /proc/thread-self/schedstat of the loop thread, or -1 */
    uint64_t lag_rq_ns;     /* the thread's run-queue wait when lag_timer was armed */
    struct gw__metrics metrics;
};

struct gw_server {
    const struct mg_config *cfg;
    struct meta_store *ms;
    struct gw_user *users;
    size_t nusers;
    struct mg_str region;
    struct mg_str domain;
    h2o_globalconf_t globalconf;
    h2o_hostconf_t *hostconf;
    SSL_CTX *ssl_ctx;
    struct gw__loop *loops;
    int nloops;
    uint16_t port;      /* bound port (the configured one, or the one picked for 0) */
    atomic_int serving; /* /health answers 200 once every loop runs */
    atomic_int running_loops;
    int64_t started_ms;
    uint64_t request_id_base; /* per-process random prefix of request ids */
    gw_dispatch_fn dispatch;  /* the S3 handlers (registered by gateway.c) */
    int threadpool_size;      /* libuv worker threads (UV_THREADPOOL_SIZE, server.c) */
    int work_meta_max;        /* worker jobs that may wait on a meta commit at once */
    atomic_int work_meta_inflight;
};

/* Start and stop the per-iteration op batching of loop l (async.c; loop thread). */
void gw__async_loop_init(struct gw__loop *l);
void gw__async_loop_close(struct gw__loop *l);

/* gw_server_create with the handlers to dispatch to (gateway.c passes gw_s3_dispatch). */
int gw__server_create(const struct mg_config *cfg, gw_dispatch_fn dispatch,
                      struct gw_server **out, char *errmsg);

/* Monotonic clock in ns. */
uint64_t gw__now_ns(void);
/* Wall clock in ms. */
int64_t gw__now_ms(void);

/* The loop (and its metrics) running the current thread, NULL outside loop threads. */
struct gw__loop *gw__current_loop(void);

/* Finish accounting of a request once its response has been handed to h2o (respond.c). */
void gw__request_done(struct gw_request *r);

#endif
