/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal contract inside gateway/ between the HTTP core (server, routing,
 * authentication, body decoding, responses, metrics: server.c, route.c,
 * auth.c, body.c, respond.c, metrics.c) and the S3 operation handlers
 * (s3_*.c, xml.c). The public header of the module is gateway/gateway.h.
 *
 * Request flow (all on the loop thread that accepted the connection):
 *   on_req -> gw_route (op, bucket, key, subresources)
 *          -> gw_auth (SigV4/SigV2 header or query, or anonymous)
 *          -> gw_s3_dispatch(r)   [handlers, s3_*.c]
 *          -> exactly one gw_respond_* call per request.
 * Handlers run synchronously on the loop (DESIGN.md 5a deviation noted in
 * server.c). Everything allocated for a request comes from r->pool
 * (h2o's request pool) or r->arena, both freed with the request.
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
 * added before. Bounded memory: reads slices while h2o asks for more (proceed). For HEAD only
 * the headers go out, with Content-Length: len (use it for HeadObject). */
void gw_respond_data(struct gw_request *r, int status, const struct meta_data *d,
                     uint64_t offset, uint64_t len);

/* ---- XML (xml.c): emission helpers and expat parsing with DOCTYPE rejected */

void gw_xml_open(struct mg_buf *b, const char *root); /* <?xml ...?><root xmlns="..."> */
void gw_xml_elem(struct mg_buf *b, const char *name, struct mg_str text); /* escaped */
void gw_xml_elemf(struct mg_buf *b, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gw_xml_close(struct mg_buf *b, const char *root);

/* ---- handlers (s3_*.c) */

/* Runs the S3 operation r->op for an authenticated (or anonymous) request: checks bucket
 * ownership / ACLs, calls meta/, answers with one gw_respond_*. */
void gw_s3_dispatch(struct gw_request *r);

/* Time helpers. */
void gw_http_date(int64_t ms, char out[30]);     /* "Mon, 30 Nov 2026 16:00:00 GMT" */
void gw_iso8601(int64_t ms, char out[25]);       /* "2026-11-30T16:00:00.000Z" */
/* Parse an HTTP date (RFC 1123, RFC 850, asctime); -1 if invalid. */
int64_t gw_http_date_parse(struct mg_str s);


/* ==== Additions for the S3 handlers (xml.c, s3_*.c). Pure functions: no server needed, unit
 * tested in tests/unit/gateway/test_xml.c and test_s3_*.c. ==== */

/* ---- XML emission beyond the four helpers above */
void gw_xml_start(struct mg_buf *b, const char *name);        /* <name> */
void gw_xml_end(struct mg_buf *b, const char *name);          /* </name> */
void gw_xml_escape(struct mg_buf *b, struct mg_str text);      /* & < > " ' and controls */
/* <name>text</name> with text percent-encoded (encoding-type=url, '/' kept) when url is set. */
void gw_xml_elem_enc(struct mg_buf *b, const char *name, struct mg_str text, int url);
/* Printf-free elements for the hot LIST/ListParts paths: a decimal, "true"/"false", an escaped
 * C string, and an entity tag in quotes (<ETag>&quot;hex&quot;</ETag>, as S3 sends it). */
void gw_xml_elem_u64(struct mg_buf *b, const char *name, uint64_t v);
void gw_xml_elem_bool(struct mg_buf *b, const char *name, int v);
void gw_xml_elem_cstr(struct mg_buf *b, const char *name, const char *text);
void gw_xml_elem_etag(struct mg_buf *b, const char *name, struct mg_str etag);

/* ---- XML parsing (expat; DOCTYPE, entity declarations and external entities rejected).
 * Every parser returns 0 or MG_EMALFORMEDXML (r->errmsg-sized errmsg, may be NULL, gets why);
 * results come from arena. */
struct gw_xml_node {
    struct mg_str name;          /* local name: any "prefix:" removed */
    struct mg_str text;          /* character data of a leaf element, NUL-terminated */
    struct gw_xml_node *parent;
    struct gw_xml_node *child;   /* first child element */
    struct gw_xml_node *next;    /* next sibling element */
};
#define GW_XML_NODES_MAX 200000 /* elements per document */
#define GW_XML_DEPTH_MAX 32
int gw_xml_parse(struct mg_str body, struct mg_arena *a, struct gw_xml_node **root,
                 char *errmsg);
/* First child element named name, or NULL. */
const struct gw_xml_node *gw_xml_child(const struct gw_xml_node *n, const char *name);
/* Well-formed with the given root element (lifecycle bodies are stored as sent). */
int gw_xml_check(struct mg_str body, const char *root, struct mg_arena *a, char *errmsg);

/* CompleteMultipartUpload: Part{PartNumber, ETag (quotes removed), Checksum*}; number, etag
 * and checksum are set in each meta_part, in document order. Empty list, more than
 * META_PART_MAX parts or a non-numeric PartNumber -> MG_EMALFORMEDXML. */
int gw_xml_parse_complete(struct mg_str body, struct mg_arena *a, struct meta_part **parts,
                          size_t *n, char *errmsg);

#define GW_DELETE_KEYS_MAX 1000
struct gw_delete_req {
    int quiet;
    struct mg_str *keys;
    size_t nkeys; /* 1..GW_DELETE_KEYS_MAX */
};
int gw_xml_parse_delete(struct mg_str body, struct mg_arena *a, struct gw_delete_req *out,
                        char *errmsg);

#define GW_OBJECT_TAGS_MAX 10
#define GW_BUCKET_TAGS_MAX 50
#define GW_TAG_KEY_MAX 128   /* Unicode characters */
#define GW_TAG_VALUE_MAX 256
/* Limits: count <= max (MG_EINVALIDTAG... S3 says BadRequest; we use InvalidTag), key 1..128,
 * value <= 256 characters, no duplicate keys. Returns 0 or MG_EINVALIDTAG. */
int gw_tags_validate(const struct meta_kv *tags, size_t n, size_t max, char *errmsg);
/* Tagging{TagSet{Tag{Key,Value}}}: MG_EMALFORMEDXML, or gw_tags_validate's MG_EINVALIDTAG. */
int gw_xml_parse_tagging(struct mg_str body, size_t max, struct mg_arena *a,
                         struct meta_kv **tags, size_t *n, char *errmsg);
/* x-amz-tagging: "k1=v1&k2=v2" (url-encoded, '+' is a space). MG_EINVALIDARGUMENT if it does
 * not decode, MG_EINVALIDTAG per gw_tags_validate. */
int gw_tagging_query_parse(struct mg_str q, size_t max, struct mg_arena *a,
                           struct meta_kv **tags, size_t *n, char *errmsg);

/* AccessControlPolicy -> the canned ACL it is equivalent to. owner_id is the owner's ID as we
 * emit it (the user name). Grants beyond the canned sets -> MG_ENOTIMPLEMENTED. */
int gw_xml_parse_acl(struct mg_str body, struct mg_str owner_id, struct mg_arena *a,
                     enum meta_acl *out, char *errmsg);
/* x-amz-acl value. Objects also accept bucket-owner-read/-full-control (private here).
 * Returns 0, MG_ENOTIMPLEMENTED (aws-exec-read, log-delivery-write), MG_EINVALIDARGUMENT. */
int gw_canned_acl_parse(struct mg_str v, int object, enum meta_acl *out);
const char *gw_canned_acl_name(enum meta_acl acl);

/* CreateBucketConfiguration{LocationConstraint}; loc empty if absent. */
int gw_xml_parse_location(struct mg_str body, struct mg_arena *a, struct mg_str *loc,
                          char *errmsg);

/* ---- Range and conditional headers (s3_common.c) */

/* Range header against an object of size bytes. Returns 0 when the whole object is to be sent
 * (no header, malformed, or several ranges: S3 ignores them), 1 with [*off, *off+*len) set,
 * MG_EINVALIDRANGE when unsatisfiable (start beyond the end, suffix of 0, empty object). */
int gw_range_parse(struct mg_str hdr, uint64_t size, uint64_t *off, uint64_t *len);

/* Conditional request headers, S3 precedence (GetObject docs): If-Match true makes
 * If-Unmodified-Since irrelevant; If-None-Match false (it matched) wins over If-Modified-Since.
 * Dates in ms, -1 if absent or unparseable (ignored). */
struct gw_cond {
    struct mg_str if_match;        /* empty: absent */
    struct mg_str if_none_match;
    int64_t if_modified_since_ms;
    int64_t if_unmodified_since_ms;
};
/* Returns 0, MG_EPRECONDITION or MG_ENOTMODIFIED (the caller maps that to 412 for copy
 * sources). Times compare at one-second resolution (Last-Modified's). */
int gw_cond_eval(const struct gw_cond *c, struct mg_str etag, int64_t mtime_ms);
/* 1 if an entity-tag list ("*", "\"a\", W/\"b\"", unquoted) matches etag (unquoted). */
int gw_etag_list_match(struct mg_str list, struct mg_str etag);

/* ListObjectsV2 continuation tokens: opaque base64 of the next marker. decode returns 0 or
 * MG_EINVALIDARGUMENT. */
void gw_token_encode(struct mg_str marker, struct mg_arena *a, struct mg_str *out);
int gw_token_decode(struct mg_str token, struct mg_arena *a, struct mg_str *out);

/* max-keys / max-parts / max-uploads: absent -> dflt; capped at cap; negative or not a number
 * -> MG_EINVALIDARGUMENT. */
int gw_parse_max(struct mg_str v, int present, uint32_t dflt, uint32_t cap, uint32_t *out);

#endif
