/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The load engine of mgbench: worker threads, each running its own epoll loop
 * over its share of --concurrency keep-alive HTTP/1.1 connections, one request
 * outstanding per connection (as wrk and warp do). A round on one endpoint
 * runs up to three phases over the same key set: prepare (untimed PUT of the
 * workload's objects), run (the timed mix), clean (DeleteObjects of what is
 * left). Results are per S3 operation, merged across threads after the phase.
 */
#ifndef MGB_RUN_H
#define MGB_RUN_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "tests/bench/hist.h"
#include "tests/bench/workload.h"

#define MGB_EP_ADDRS_MAX 16

/* One endpoint: a server, or a cluster given as several comma-separated URLs whose nodes all
 * serve the same store. Connections are spread over the nodes round-robin; every request
 * carries (and signs) the first URL's Host, which path-style S3 accepts on any node. */
struct mgb_endpoint {
    char url[1024];               /* as given: http://host:port[,http://host:port...] */
    char host[160];               /* Host header value: the first URL's host[:port] */
    struct sockaddr_storage addr; /* = addrs[0] */
    socklen_t addr_len;
    struct sockaddr_storage addrs[MGB_EP_ADDRS_MAX]; /* every URL's address, resolved once */
    socklen_t addr_lens[MGB_EP_ADDRS_MAX];
    unsigned naddrs;
    char access_key[128];
    char secret_key[128];
    char label[8];                /* "A" / "B" */
    uint64_t objects;             /* objects to prepare here; 0: the workload's */
};

struct mgb_config {
    struct mgb_workload w;        /* the workload after flag overrides */
    struct mgb_endpoint ep[2];    /* ep[1] only with --vs */
    unsigned nep;
    char bucket[64];
    char region[32];
    char path[256];               /* hello: request path */
    double duration_s;            /* run phase length per round */
    unsigned concurrency;         /* connections in total */
    unsigned threads;             /* worker threads */
    unsigned rounds;              /* rounds per endpoint */
    double rate;                  /* open loop: Pareto location (ops/s) */
    double rate_cap;              /* open loop: offered rate <= rate * rate_cap */
    double timeout_s;             /* per request */
    int clean;                    /* delete what is left after each round */
    int progress;                 /* live line on stderr */
    uint64_t seed;
    double *offered;              /* open loop: ops/s per window (main draws them) */
    unsigned noffered;
    int progress_lines;           /* progress as a plain line every 3 s instead of the live one */
    /* When set, names the key of id (the whole key, no run prefix): the expiry scenario's
     * timestamp-prefixed layout. Called from the worker threads; must be reentrant. */
    int (*key_name)(const void *arg, uint64_t id, char *out, size_t cap);
    const void *key_arg;
};

/* Per one-second segment of the run phase. */
struct mgb_seg {
    uint64_t ops[MGB_OP_COUNT];
    uint64_t bytes[MGB_OP_COUNT];
    uint64_t errors[MGB_OP_COUNT];
    double offered;               /* open loop: offered ops/s in this second */
    uint64_t released;            /* open loop: requests released */
};

/* The result of one phase on one endpoint (or a merge of several). */
struct mgb_result {
    struct mgb_hist hist[MGB_OP_COUNT];
    uint64_t ops[MGB_OP_COUNT];      /* successful requests */
    uint64_t errors[MGB_OP_COUNT];   /* failed requests (or failed keys of DeleteObjects) */
    uint64_t bytes[MGB_OP_COUNT];    /* payload bytes moved (GET body, PUT body) */
    uint64_t objects[MGB_OP_COUNT];  /* objects affected (DeleteObjects counts its keys) */
    double elapsed_s;                /* length of the measured window */
    struct mgb_seg *segs;            /* per second */
    unsigned nsegs;
    uint64_t dropped;                /* open loop: released but never sent (backlog full) */
    char first_error[MGB_OP_COUNT][200];
};

enum mgb_phase { MGB_PHASE_PREPARE, MGB_PHASE_RUN, MGB_PHASE_CLEAN };

struct mgb_run; /* one endpoint, one round: threads, key pools, signing state */

/* Create the run state for endpoint ep; prefix names this round's keys. */
struct mgb_run *mgb_run_create(const struct mgb_config *cfg, const struct mgb_endpoint *ep,
                               const char *prefix, unsigned round);
/* Run one phase to its end (prepare/clean: all keys done; run: --duration or no work left)
 * and fill res (mgb_result_init first; the caller closes it). Returns 0, or -1 when no
 * connection could be opened. */
int mgb_run_phase(struct mgb_run *run, enum mgb_phase phase, struct mgb_result *res);
void mgb_run_destroy(struct mgb_run *run);
/* Objects the prepare phase of this run creates (the endpoint's override or the workload's). */
uint64_t mgb_run_objects(const struct mgb_run *run);
/* Objects known to exist (created and not deleted) after the last phase. */
size_t mgb_run_pool_size(const struct mgb_run *run);

void mgb_result_init(struct mgb_result *r);
void mgb_result_close(struct mgb_result *r);
/* dst += src (segments are appended in time order for rounds, so plots show each round). */
void mgb_result_merge(struct mgb_result *dst, const struct mgb_result *src);
uint64_t mgb_result_total_ops(const struct mgb_result *r);
uint64_t mgb_result_total_errors(const struct mgb_result *r);

/* Resolve url ("http://host[:port]", or several of them separated by commas: the nodes of a
 * cluster) into ep. Returns 0 or -1 with a message in err. */
int mgb_endpoint_parse(struct mgb_endpoint *ep, const char *url, char *err, size_t errlen);

/* Blocking one-shot signed request (bucket creation). Returns the HTTP status, or -1 on a
 * transport error; the first bytes of the body go to body (NUL-terminated). */
int mgb_request_once(const struct mgb_config *cfg, const struct mgb_endpoint *ep,
                     const char *method, const char *path, char *body, size_t body_cap);

/* One blocking request on a kept-alive connection (the expiry scenario's LIST loops,
 * lifecycle configuration and /metrics polls). */
struct mgb_req {
    const char *method;
    const char *path;             /* "/bucket" (already URI-encoded) */
    const char *query;            /* canonical query string (sorted, encoded) or "" */
    const char *body;             /* request body or NULL */
    size_t body_len;
    int content_md5;              /* send Content-MD5 of the body (PutBucketLifecycle needs it) */
    int no_auth;                  /* unsigned (GET /metrics) */
};

/* Send rq on *fd (-1: connect first; a kept connection the server closed is reopened once)
 * and read the whole response; the first cap - 1 body bytes go to resp, NUL-terminated,
 * their count to *resp_len (may be NULL). Returns the HTTP status, or -1 on a transport
 * error (then *fd is closed and set to -1). The caller closes *fd when done. */
int mgb_request(const struct mgb_config *cfg, const struct mgb_endpoint *ep, int *fd,
                const struct mgb_req *rq, char *resp, size_t cap, size_t *resp_len);

/* Content-MD5 header value (base64 of the MD5) of body. out: 32 bytes. */
void mgb_content_md5(const char *body, size_t len, char out[32]);

/* Ensure cfg->bucket exists on ep (PUT bucket; 200 and BucketAlreadyOwnedByYou are fine).
 * Returns 0 or -1 with a message printed. */
int mgb_bucket_ensure(const struct mgb_config *cfg, const struct mgb_endpoint *ep);

uint64_t mgb_now_ns(void);

#endif
