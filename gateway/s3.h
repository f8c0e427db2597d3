/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to the S3 handlers (s3_*.c): the handler entry points that
 * gw_s3_dispatch switches over, and the helpers they share (access checks on
 * bucket and object ACLs, object header parsing and emission, copy-source
 * parsing). The contract with the HTTP core is gateway/gw.h; nothing outside
 * s3_*.c includes this file.
 */
#ifndef MG_GATEWAY_S3_H
#define MG_GATEWAY_S3_H

#include "gateway/gw.h"

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
/* Response headers of a GET/HEAD/PUT: Last-Modified, ETag, Content-* (with response-*
 * overrides when allowed), x-amz-meta-*, x-amz-tagging-count. */
void gw__s3_object_headers(struct gw_request *r, const struct meta_object *o);
/* x-amz-copy-source: "[/]bucket/key[?versionId=...]", url-encoded. MG_EINVALIDARGUMENT. */
int gw__s3_copy_source(struct gw_request *r, struct mg_str *bucket, struct mg_str *key);
/* x-amz-copy-source-if-* against src; any failure is MG_EPRECONDITION. */
int gw__s3_copy_source_cond(struct gw_request *r, const struct meta_object *src);
/* Read a gw_cond from the four headers with the given prefix ("if-" or
 * "x-amz-copy-source-if-"). */
void gw__s3_cond_read(struct gw_request *r, const char *prefix, struct gw_cond *c);
/* Checksum response header (x-amz-checksum-<algo>) when the object has one. */
void gw__s3_checksum_header(struct gw_request *r, enum mg_cksum_algo algo, struct mg_str value);
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

/* Body into a meta_data_writer, md5 / checksum verified by gw_body_stream. */
int gw__s3_store_body(struct gw_request *r, struct meta_data *data, struct gw_body_result *res);

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
