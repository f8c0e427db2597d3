/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP core's contract inside gateway/ (the public header of the module
 * is gateway/gateway.h). The core is server.c, route.c, auth.c, body.c,
 * respond.c, metrics.c and async.c: listener and loops, routing,
 * authentication, body decoding, responses, metrics and the asynchronous
 * steps. The S3 handlers (s3_*.c, xml.c; their own header gateway/s3.h) sit
 * on top. Dependencies run one way, handlers -> core: a core file never
 * includes gateway/s3.h or calls a gw__s3_* / gw_s3_* / XML-building
 * function; the core reaches the handlers only through the gw_dispatch_fn
 * that gateway.c registers (gw__server_create). tests/unit/gateway checks the
 * rule (gateway_layering).
 *
 * Request flow (on the loop thread that accepted the connection):
 *   on_req -> gw__request_init (route: op, bucket, key, subresources)
 *          -> gw__auth (SigV4/SigV2 header or query, or anonymous)
 *          -> the registered dispatch (gw_s3_dispatch)
 *          -> exactly one gw_respond_* per request, either before on_req
 *             returns (reads, errors) or from a gw_op_submit / gw_work_queue
 *             callback on the same loop (writes: DESIGN.md 5a, issue 7).
 * Everything allocated for a request comes from r->req's pool or r->arena,
 * both freed with the request; a step that outlives it holds its own memory.
 */
#ifndef MG_GATEWAY_GW_H
#define MG_GATEWAY_GW_H

#include <stdint.h>

#include <h2o.h>

#include "common/common.h"
#include "meta/meta.h"

/* X(name, metric label) — every S3 operation the router can produce. */
#define GW_OP_TABLE(X)                                                                             \
    X(GW_OP_UNKNOWN, "Unknown")                                                                    \
    X(GW_OP_LIST_BUCKETS, "ListBuckets")                                                           \
    X(GW_OP_CREATE_BUCKET, "CreateBucket")                                                         \
    X(GW_OP_HEAD_BUCKET, "HeadBucket")                                                             \
    X(GW_OP_DELETE_BUCKET, "DeleteBucket")                                                         \
    X(GW_OP_GET_BUCKET_LOCATION, "GetBucketLocation")                                              \
    X(GW_OP_LIST_OBJECTS, "ListObjects")                                                           \
    X(GW_OP_LIST_OBJECTS_V2, "ListObjectsV2")                                                      \
    X(GW_OP_LIST_MULTIPART_UPLOADS, "ListMultipartUploads")                                        \
    X(GW_OP_DELETE_OBJECTS, "DeleteObjects")                                                       \
    X(GW_OP_GET_BUCKET_TAGGING, "GetBucketTagging")                                                \
    X(GW_OP_PUT_BUCKET_TAGGING, "PutBucketTagging")                                                \
    X(GW_OP_DELETE_BUCKET_TAGGING, "DeleteBucketTagging")                                          \
    X(GW_OP_GET_BUCKET_ACL, "GetBucketAcl")                                                        \
    X(GW_OP_PUT_BUCKET_ACL, "PutBucketAcl")                                                        \
    X(GW_OP_GET_BUCKET_LIFECYCLE, "GetBucketLifecycleConfiguration")                               \
    X(GW_OP_PUT_BUCKET_LIFECYCLE, "PutBucketLifecycleConfiguration")                               \
    X(GW_OP_DELETE_BUCKET_LIFECYCLE, "DeleteBucketLifecycle")                                      \
    X(GW_OP_GET_BUCKET_VERSIONING, "GetBucketVersioning")                                          \
    X(GW_OP_GET_BUCKET_POLICY, "GetBucketPolicy")                                                  \
    X(GW_OP_GET_BUCKET_CORS, "GetBucketCors")                                                      \
    X(GW_OP_PUT_OBJECT, "PutObject")                                                               \
    X(GW_OP_COPY_OBJECT, "CopyObject")                                                             \
    X(GW_OP_GET_OBJECT, "GetObject")                                                               \
    X(GW_OP_HEAD_OBJECT, "HeadObject")                                                             \
    X(GW_OP_DELETE_OBJECT, "DeleteObject")                                                         \
    X(GW_OP_GET_OBJECT_TAGGING, "GetObjectTagging")                                                \
    X(GW_OP_PUT_OBJECT_TAGGING, "PutObjectTagging")                                                \
    X(GW_OP_DELETE_OBJECT_TAGGING, "DeleteObjectTagging")                                          \
    X(GW_OP_GET_OBJECT_ACL, "GetObjectAcl")                                                        \
    X(GW_OP_PUT_OBJECT_ACL, "PutObjectAcl")                                                        \
    X(GW_OP_GET_OBJECT_ATTRIBUTES, "GetObjectAttributes")                                          \
    X(GW_OP_CREATE_MULTIPART_UPLOAD, "CreateMultipartUpload")                                      \
    X(GW_OP_UPLOAD_PART, "UploadPart")                                                             \
    X(GW_OP_UPLOAD_PART_COPY, "UploadPartCopy")                                                    \
    X(GW_OP_COMPLETE_MULTIPART_UPLOAD, "CompleteMultipartUpload")                                  \
    X(GW_OP_ABORT_MULTIPART_UPLOAD, "AbortMultipartUpload")                                        \
    X(GW_OP_LIST_PARTS, "ListParts")

enum gw_op {
#define GW__OP_ENUM(n, label) n,
    GW_OP_TABLE(GW__OP_ENUM)
#undef GW__OP_ENUM
        GW_OP__COUNT
};

const char *gw_op_label(enum gw_op op);

struct gw_server; /* process-wide: config, users, meta store, metrics (server.c) */
struct gw__qparam; /* decoded query parameter (route.c) */

struct gw_user {
    struct mg_str name;
    struct mg_str access_key;
    struct mg_str secret_key;
};

/* Payload mode of a request, from x-amz-content-sha256 (auth.c); read by body.c. */
enum gw_payload {
    GW_PAYLOAD_NONE,            /* anonymous, SigV2, presigned or UNSIGNED-PAYLOAD: not hashed */
    GW_PAYLOAD_SHA256,          /* literal hex SHA-256 of the body, verified while streaming */
    GW_PAYLOAD_CHUNKED_SIGNED,  /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
    GW_PAYLOAD_CHUNKED_SIGNED_TRAILER,   /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
    GW_PAYLOAD_CHUNKED_UNSIGNED_TRAILER, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

/* HTTP-core private part of a request; handlers never touch it. */
struct gw__core {
    enum gw_payload payload;   /* how body.c decodes and verifies the entity */
    char content_sha256[65];   /* GW_PAYLOAD_SHA256: expected hex digest */
    uint8_t signing_key[32];   /* chunked signed modes: SigV4 signing key */
    struct mg_sigv4_auth v4;   /* chunked signed modes: the verified credentials (seed) */
    int vhost;                 /* bucket came from the Host header */
    struct mg_str path;        /* raw request-target path (no query) */
    struct mg_str query;       /* raw query string (no '?'), may be empty */
    struct gw__qparam *params; /* decoded query parameters (route.c), r->arena */
    size_t nparams;
    uint64_t start_ns;         /* monotonic clock at on_req */
    uint64_t bytes_out;        /* response body bytes handed to h2o */
    int status;                /* response status, 0 until responded */
    int body_consumed;         /* gw_body_* ran once (the entity is read once) */
    struct mg_str trailer_value; /* aws-chunked trailer checksum as sent (body.c) */
    int internal;              /* /health, /metrics: not counted as S3 requests */
    int has_head_length;       /* a handler set Content-Length (HEAD advertises it) */
    uint64_t head_length;
    int steps;                 /* asynchronous steps outstanding (async.c) */
};

/* One S3 request. Lives in the h2o request pool. */
struct gw_request {
    h2o_req_t *req;
    struct gw_server *srv;
    struct meta_store *ms;     /* the metadata service */
    struct mg_arena arena;     /* freed with the request */
    enum gw_op op;
    struct mg_str bucket;      /* empty for service-level requests */
    struct mg_str key;         /* percent-decoded object key; empty for bucket-level */
    const struct gw_user *user; /* authenticated user; NULL when anonymous */
    int presigned;             /* authenticated by query parameters */
    char request_id[17];       /* also sent as x-amz-request-id */
    char errmsg[256];          /* context for the error <Message> and log line */
    uint64_t bytes_in;         /* decoded payload bytes consumed (metrics) */
    struct gw__core core;      /* HTTP-core private state (server/auth/body/respond.c) */
};

/* ---- request accessors (route.c) */

/* Header value by lower-case name; returns 1 and sets *out if present. */
int gw_header(const struct gw_request *r, const char *lname, struct mg_str *out);
/* Decoded query parameter; returns 1 if present (value may be empty). From r->arena. */
int gw_query(struct gw_request *r, const char *name, struct mg_str *out);
const char *gw_region(const struct gw_request *r);
/* The user owning a name (for bucket owner display); NULL if unknown. */
const struct gw_user *gw_user_by_name(const struct gw_server *srv, struct mg_str name);

/* ---- request body (body.c) */

/* Stream the decoded payload through cb in bounded slices (<= 1 MiB), undoing aws-chunked and
 * verifying, as the request demands: the literal x-amz-content-sha256, chunk signatures, the
 * trailer checksum, Content-MD5 and any x-amz-checksum-* header. If md5_out is non-NULL it
 * receives the MD5 of the payload (raw 16 bytes) and cksum_out (if non-NULL, with its algo
 * preset by the caller or MG_CKSUM_NONE for "whatever the request carries") the base64
 * checksum value the request declared/verified (empty if none) and its algorithm.
 * Verification failures return MG_EBADDIGEST, MG_ECONTENTSHA, MG_ESIGNATURE,
 * MG_EINCOMPLETEBODY, MG_EINVALIDDIGEST; cb's nonzero return aborts and is returned. Also
 * MG_EENTITYTOOLARGE (over 5 GiB decoded), MG_EMISSINGLENGTH (PutObject/UploadPart sent with
 * neither Content-Length nor chunked framing), MG_EINVALIDREQUEST (a trailer checksum that
 * x-amz-trailer did not declare). cb may see data before a chunk signature or checksum is
 * verified: the data counts only if the call returns 0. */
typedef int (*gw_body_cb)(void *ctx, const void *data, size_t len);
struct gw_body_result {
    uint8_t md5[16];
    uint64_t size;
    enum mg_cksum_algo cksum_algo; /* declared by header/trailer/x-amz-sdk-checksum-algorithm */
    struct mg_str cksum_value;     /* base64, from r->arena; empty if none */
};
int gw_body_stream(struct gw_request *r, gw_body_cb cb, void *ctx, struct gw_body_result *res);
/* Whole decoded body into r->arena (XML bodies); MG_EENTITYTOOLARGE above max. Verified as
 * above. */
int gw_body_read_all(struct gw_request *r, size_t max, struct mg_str *out);

/* ---- responses (respond.c): exactly one of gw_respond_* per request */

void gw_header_add(struct gw_request *r, const char *name, struct mg_str value);
void gw_header_addf(struct gw_request *r, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Status + optional body (copied) with content-type (NULL for none). */
void gw_respond(struct gw_request *r, int status, const char *content_type, struct mg_str body);
/* XML body (built with the gw_xml_* helpers into an mg_buf; copied). */
void gw_respond_xml(struct gw_request *r, int status, const struct mg_buf *xml);
/* S3 XML error body (Code, Message = r->errmsg if set else the table's, Resource, RequestId)
 * with the status of rv; logs one line. MG_ENOTMODIFIED -> 304 without body; HEAD requests
 * get no body. */
void gw_respond_error(struct gw_request *r, int rv);
/* Stream [offset, offset+len) of an object's data (GET) with status (200/206); headers must be
 * added before. Bounded memory: reads slices while h2o asks for more (proceed), on a worker
 * above 64 KiB. For HEAD only the headers go out, with Content-Length: len (use it for
 * HeadObject). pinned: d's blobs were pinned (meta_object_get_pinned); ownership of the pin
 * passes here, and it is released (meta_data_unpin) exactly once, after the last read (when the
 * request is disposed, whether the stream finished or the client went away). */
void gw_respond_data(struct gw_request *r, int status, const struct meta_data *d,
                     uint64_t offset, uint64_t len, int pinned);

/* Time helpers. */
void gw_http_date(int64_t ms, char out[30]);     /* "Mon, 30 Nov 2026 16:00:00 GMT" */
void gw_iso8601(int64_t ms, char out[25]);       /* "2026-11-30T16:00:00.000Z" */
/* Parse an HTTP date (RFC 1123, RFC 850, asctime); -1 if invalid. */
int64_t gw_http_date_parse(struct mg_str s);

/* XML character escaping (& < > " ' and control bytes as character references): error bodies
 * here, every XML body in the handlers. */
void gw_xml_escape(struct mg_buf *b, struct mg_str text);

/* Objects up to this many bytes live inline in their metadata entry (config inline_max_bytes):
 * a body this small is decoded on the loop, a larger one on a worker. */
uint32_t gw_inline_max_bytes(const struct gw_request *r);

/* ---- asynchronous steps (async.c; DESIGN.md 5a: nothing blocks a loop)
 *
 * A handler that cannot answer at once starts one step and returns; the step's callback runs
 * later on the request's loop and either answers or starts the next step. When the client went
 * away meanwhile (h2o disposed the request), a meta op's callback is skipped and a worker
 * step's `after` gets r == NULL so it can release what arg owns. All on the loop thread. */

/* Called with the finished op (op->status, op->out valid) while r is alive; op is destroyed
 * after it returns. arg is the submitter's (in r->arena, it dies with r). */
typedef void (*gw_op_done_cb)(struct gw_request *r, struct meta_op *op, void *arg);
/* Hand op (ownership passes, with a PUT's or PUT_PART's data) to the meta thread through this
 * loop's meta client, batched with the loop iteration's other ops (async.c). Returns 0: done
 * runs exactly once later unless the request is disposed first; the op is destroyed either
 * way. A refusal by meta arrives in done as op->status: MG_ESLOWDOWN (queue full: 503
 * SlowDown, counted) or MG_ESHUTDOWN, the op's data already released. A nonzero return (none
 * today) would mean done never runs and the caller still owns the data. */
int gw_op_submit(struct gw_request *r, struct meta_op *op, gw_op_done_cb done, void *arg);

/* Runs on a worker thread: may block (fsync, pread, blocking meta calls when waits_on_meta).
 * r, r->arena, r->errmsg and the request's headers and entity may be used; nothing else of
 * h2o (no pool allocation, no response). Returns 0 or an mg_err. */
typedef int (*gw_work_fn)(struct gw_request *r, void *arg);
/* Back on the loop with work's result; r is NULL when the request is gone. */
typedef void (*gw_after_fn)(struct gw_request *r, void *arg, int rv);
/* Queue work on libuv's pool (sized in server.c), then after on r's loop. waits_on_meta: work
 * calls a blocking meta function (it waits for a commit); at most half the pool may do that at
 * once, beyond which this returns MG_ESLOWDOWN (after never runs). Else returns 0. */
int gw_work_queue(struct gw_request *r, gw_work_fn work, gw_after_fn after, void *arg,
                  int waits_on_meta);

/* ---- registration (server.c): the core calls up into the handlers only through this */

/* Answers one routed, authenticated request (exactly one gw_respond_*, now or later). */
typedef void (*gw_dispatch_fn)(struct gw_request *r);

#endif
