/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the S3 handlers (s3_*.c): the handler entry points that
 * gw_s3_dispatch switches over, and the helpers they share (access checks on
 * bucket and object ACLs, object header parsing and emission, copy-source
 * parsing), plus the XML helpers and pure S3/HTTP functions of xml.c and
 * s3_http.c. The contract with the HTTP core is gateway/gw.h; only s3_*.c,
 * xml.c and gateway.c include this file (the core never does: gw.h).
 */
#ifndef MG_GATEWAY_S3_H
#define MG_GATEWAY_S3_H

#include "gateway/gw.h"

/* ---- XML (xml.c): emission helpers and expat parsing with DOCTYPE rejected */

void gw_xml_open(struct mg_buf *b, const char *root); /* <?xml ...?><root xmlns="..."> */
void gw_xml_elem(struct mg_buf *b, const char *name, struct mg_str text); /* escaped */
void gw_xml_elemf(struct mg_buf *b, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void gw_xml_close(struct mg_buf *b, const char *root);

/* Runs the S3 operation r->op for an authenticated (or anonymous) request: checks bucket
 * ownership / ACLs, calls meta/, answers with one gw_respond_* (now or from a later callback
 * on the same loop). Registered with the HTTP core by gw_server_create (gateway.c). */
void gw_s3_dispatch(struct gw_request *r);

/* ==== Additions for the S3 handlers (xml.c, s3_*.c). Pure functions: no server needed, unit
 * tested in tests/unit/gateway/test_xml.c and test_s3_*.c. ==== */

/* ---- XML emission beyond the four helpers above */
void gw_xml_start(struct mg_buf *b, const char *name);        /* <name> */
void gw_xml_end(struct mg_buf *b, const char *name);          /* </name> */
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


/* ==== Handler internals ==== */

#define GW_S3_XML_SMALL_MAX (64u << 10)  /* tagging, ACL, CreateBucketConfiguration */
#define GW_S3_XML_LARGE_MAX (8u << 20)   /* Delete (1000 keys of 1 KiB, escaped), Complete */
#define GW_S3_LIFECYCLE_MAX (1u << 20)
#define GW_S3_OBJECT_MAX ((uint64_t)5 << 30) /* single PUT and part limit */
#define GW_S3_USER_META_MAX 2048         /* x-amz-meta-* names + values */
#define GW_S3_COPY_SLICE (1u << 20)      /* UploadPartCopy reads this much at a time */

/* What a request needs from a bucket (DESIGN: buckets belong to their creator; canned ACLs
 * grant read/write to others). */
enum gw_perm {
    GW_PERM_READ,  /* LIST and HEAD bucket (bucket ACL); GET/HEAD object (object ACL) */
    GW_PERM_WRITE, /* PUT/DELETE object, multipart */
    GW_PERM_OWNER, /* bucket configuration */
};

/* Small string helpers shared by s3_*.c (s3_http.c). */
struct mg_str gw__s3_trim(struct mg_str s);          /* spaces and tabs at both ends */
int gw__s3_str_eq(struct mg_str a, struct mg_str b);
int64_t gw__s3_parse_dec(struct mg_str s);           /* digits only; -1 on error/overflow */
struct mg_str gw__s3_hex_md5(struct gw_request *r, const uint8_t md5[16]); /* r->arena */

/* Responses: no body; an XML body at 200 (frees x); CopyObjectResult / CopyPartResult. */
void gw__s3_respond_empty(struct gw_request *r, int status);
/* rv == 0: gw__s3_respond_empty(r, status); else gw__s3_fail(r, rv, NULL). */
void gw__s3_done(struct gw_request *r, int rv, int status);
void gw__s3_respond_xml(struct gw_request *r, struct mg_buf *x);
void gw__s3_respond_copy(struct gw_request *r, const char *root, int64_t mtime_ms,
                         struct mg_str etag, enum mg_cksum_algo algo, struct mg_str cksum);

/* Sets r->errmsg (printf) and answers with gw_respond_error(r, rv). */
void gw__s3_fail(struct gw_request *r, int rv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Loads r->bucket into b and checks need. Returns 0, MG_ENOSUCHBUCKET, MG_EACCESSDENIED,
 * MG_EIO. */
int gw__s3_bucket_load(struct gw_request *r, enum gw_perm need, struct meta_bucket *b);
/* 1 if acl grants need to this requester (anonymous when r->user is NULL). */
int gw__s3_acl_allows(const struct gw_request *r, enum meta_acl acl, enum gw_perm need);
int gw__s3_is_owner(const struct gw_request *r, struct mg_str owner);
/* Loads (bucket, key) for reading: the bucket owner, the object owner, or the object's ACL
 * (S3: a bucket's READ grant lists, it does not open the objects). A missing key is NoSuchKey
 * only to those who may list the bucket, AccessDenied to others. */
int gw__s3_object_load(struct gw_request *r, struct mg_str bucket, struct mg_str key,
                       struct meta_bucket *b, struct meta_object *o);
/* The same with o's blobs pinned (meta_object_get_pinned) when it returns 0, for a reader of
 * o->data (a streamed GET, UploadPartCopy): the caller unpins (meta_data_unpin, or
 * gw_respond_data's pinned flag) exactly once. Also MG_ESLOWDOWN (too many pins). */
int gw__s3_object_load_pinned(struct gw_request *r, struct mg_str bucket, struct mg_str key,
                              struct meta_bucket *b, struct meta_object *o);
/* Owner string of r (the user name; empty when anonymous). */
struct mg_str gw__s3_requester(const struct gw_request *r);
/* <Owner><ID/><DisplayName/></Owner> (or Initiator) for a user name. */
void gw__s3_xml_owner(struct mg_buf *b, const char *elem, struct mg_str owner);

/* Object attributes from request headers: Content-Type (default binary/octet-stream),
 * Content-Encoding minus aws-chunked, Cache-Control, Content-Disposition, Content-Language,
 * Expires, x-amz-meta-* (<= 2 KiB), x-amz-tagging, x-amz-acl; x-amz-grant-* is
 * NotImplemented. Key and owner are set from r (MG_EKEYTOOLONG past META_KEY_MAX). Returns 0
 * or an error with r->errmsg set. */
int gw__s3_object_from_headers(struct gw_request *r, struct meta_object *o);
/* If-None-Match: * and If-Match of a conditional write (PutObject, CompleteMultipartUpload);
 * other If-None-Match values are MG_ENOTIMPLEMENTED, as in S3. If-Match is kept unquoted. */
int gw__s3_put_cond(struct gw_request *r, struct meta_put_cond *cond);
/* Response headers of a GET/HEAD/PUT: Last-Modified, ETag, Content-* (with response-*
 * overrides when allowed), x-amz-meta-*, x-amz-tagging-count. */
void gw__s3_object_headers(struct gw_request *r, const struct meta_object *o);
/* x-amz-expiration on PUT, COPY, CompleteMultipartUpload, HEAD and GET when an enabled
 * Expiration rule of b selects o (its key is r->key; tags and size from o) written at
 * mtime_ms (s3_object.c). */
void gw__s3_expiration_header(struct gw_request *r, const struct meta_bucket *b,
                              const struct meta_object *o, int64_t mtime_ms);
/* x-amz-copy-source: "[/]bucket/key[?versionId=...]", url-encoded. MG_EINVALIDARGUMENT. */
int gw__s3_copy_source(struct gw_request *r, struct mg_str *bucket, struct mg_str *key);
/* x-amz-copy-source-if-* against src; any failure is MG_EPRECONDITION. */
int gw__s3_copy_source_cond(struct gw_request *r, const struct meta_object *src);
/* Read a gw_cond from the four headers with the given prefix ("if-" or
 * "x-amz-copy-source-if-"). */
void gw__s3_cond_read(struct gw_request *r, const char *prefix, struct gw_cond *c);
/* Checksum response header (x-amz-checksum-<algo>) when the object has one. */
void gw__s3_checksum_header(struct gw_request *r, enum mg_cksum_algo algo, struct mg_str value);
/* ChecksumType of a stored checksum: COMPOSITE for a checksum of the parts' checksums
 * ("...-N", multipart), FULL_OBJECT otherwise ("For PutObject uploads, the checksum type is
 * always FULL_OBJECT", PutObject). */
struct mg_str gw__s3_checksum_type(struct mg_str value);
/* <ChecksumCRC32>...</ChecksumCRC32> element for algo, nothing for NONE/MD5. */
void gw__s3_checksum_elem(struct mg_buf *b, enum mg_cksum_algo algo, struct mg_str value);
/* Query parameter as uint in 1..max; 0 when absent or invalid. */
uint32_t gw__s3_query_u32(struct gw_request *r, const char *name, uint32_t max, int *present);

/* Canned ACL from x-amz-acl (default private; *given says whether the header was there);
 * any x-amz-grant-* header is MG_ENOTIMPLEMENTED (never silently ignored, issue 2). */
int gw__s3_acl_from_headers(struct gw_request *r, int object, enum meta_acl *acl, int *given);
/* PUT ?acl: x-amz-acl, or else an AccessControlPolicy body equivalent to a canned ACL. */
int gw__s3_acl_from_request(struct gw_request *r, int object, struct mg_str owner,
                            enum meta_acl *acl);
/* GET ?acl answer for a canned ACL (owner FULL_CONTROL plus the group grants). */
void gw__s3_emit_acl(struct gw_request *r, struct mg_str owner, enum meta_acl acl);
/* Tagging bodies (GetBucketTagging / GetObjectTagging answers, Put* requests). */
void gw__s3_emit_tagging(struct gw_request *r, const struct meta_kv *tags, size_t n);
int gw__s3_read_tagging(struct gw_request *r, size_t max, struct meta_kv **tags, size_t *n);

/* Body into a meta_data_writer, md5 / checksum verified by gw_body_stream. Blocks (blob
 * write, fsync in finish): on the loop only for bodies within the inline threshold. */
int gw__s3_store_body(struct gw_request *r, struct meta_data *data, struct gw_body_result *res);

/* The asynchronous form: the body is stored on the loop when it is small enough to stay inline,
 * else on a worker; then(r, b, rv) runs on the loop (not when the client went away: the data
 * is released then). On rv == 0 the caller owns b->data (hand it to an op or release it).
 * b lives in r->arena; set res.cksum_algo (as for gw_body_stream), then and arg first. */
struct gw__s3_body;
typedef void (*gw__s3_body_cb)(struct gw_request *r, struct gw__s3_body *b, int rv);
struct gw__s3_body {
    struct meta_data data;     /* out */
    struct gw_body_result res; /* in: res.cksum_algo; out: the rest */
    gw__s3_body_cb then;
    void *arg;                 /* the handler's */
    struct meta_store *ms;     /* private */
};
void gw__s3_store_body_async(struct gw_request *r, struct gw__s3_body *b);

/* Write ops (issue 7): an op of type t on r's bucket (bucket_id from b, the handler's one
 * lookup; b may be NULL) and r's key. */
struct meta_op *gw__s3_op(struct gw_request *r, enum meta_op_type t, const struct meta_bucket *b);
/* gw_op_submit, answering a refused submit itself (503 SlowDown when the queue is full) and
 * releasing a PUT's or PUT_PART's data then. */
void gw__s3_submit(struct gw_request *r, struct meta_op *op, gw_op_done_cb done, void *arg);
/* Submit; when it finishes answer status with no body, or its error. */
void gw__s3_submit_empty(struct gw_request *r, struct meta_op *op, int status);

/* Handlers. */
void gw__s3_list_buckets(struct gw_request *r);
void gw__s3_create_bucket(struct gw_request *r);
void gw__s3_head_bucket(struct gw_request *r);
void gw__s3_delete_bucket(struct gw_request *r);
void gw__s3_bucket_location(struct gw_request *r);
void gw__s3_bucket_tagging(struct gw_request *r);
void gw__s3_bucket_acl(struct gw_request *r);
void gw__s3_bucket_lifecycle(struct gw_request *r);
void gw__s3_bucket_stub(struct gw_request *r); /* versioning, policy, cors */

void gw__s3_put_object(struct gw_request *r);
void gw__s3_copy_object(struct gw_request *r);
void gw__s3_get_object(struct gw_request *r); /* GET and HEAD */
void gw__s3_delete_object(struct gw_request *r);
void gw__s3_delete_objects(struct gw_request *r);
void gw__s3_object_tagging(struct gw_request *r);
void gw__s3_object_acl(struct gw_request *r);
void gw__s3_object_attributes(struct gw_request *r);

void gw__s3_list_objects(struct gw_request *r); /* V1 and V2 */

void gw__s3_mpu_create(struct gw_request *r);
void gw__s3_mpu_upload_part(struct gw_request *r);
void gw__s3_mpu_upload_part_copy(struct gw_request *r);
void gw__s3_mpu_complete(struct gw_request *r);
void gw__s3_mpu_abort(struct gw_request *r);
void gw__s3_mpu_list_parts(struct gw_request *r);
void gw__s3_mpu_list_uploads(struct gw_request *r);

#endif
