/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 handlers' entry point and what they share: gw_s3_dispatch, access
 * checks (buckets belong to their creator; canned ACLs open listing and writes
 * on a bucket, object ACLs open reads, issue 2), object header parsing and emission, copy sources and
 * the body-to-blob-store path. The pure HTTP pieces live in s3_http.c.
 */
#include <assert.h>
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"

/* ----------------------------------------------------------- request helpers */

void gw__s3_respond_empty(struct gw_request *r, int status)
{
    gw_respond(r, status, NULL, (struct mg_str){"", 0});
}

void gw__s3_done(struct gw_request *r, int rv, int status)
{
    if (rv != 0)
        gw__s3_fail(r, rv, NULL);
    else
        gw__s3_respond_empty(r, status);
}

void gw__s3_respond_xml(struct gw_request *r, struct mg_buf *x)
{
    gw_respond_xml(r, 200, x);
    mg_buf_close(x);
}

void gw__s3_respond_copy(struct gw_request *r, const char *root, int64_t mtime_ms,
                         struct mg_str etag, enum mg_cksum_algo algo, struct mg_str cksum)
{
    struct mg_buf x;
    char date[25];
    mg_buf_init(&x);
    gw_xml_open(&x, root);
    gw_iso8601(mtime_ms, date);
    gw_xml_elem(&x, "LastModified", (struct mg_str){date, strlen(date)});
    gw_xml_elem_etag(&x, "ETag", etag);
    gw__s3_checksum_elem(&x, algo, cksum);
    gw_xml_close(&x, root);
    gw__s3_respond_xml(r, &x);
}

void gw__s3_fail(struct gw_request *r, int rv, const char *fmt, ...)
{
    va_list ap;
    if (fmt != NULL) {
        va_start(ap, fmt);
        vsnprintf(r->errmsg, sizeof(r->errmsg), fmt, ap);
        va_end(ap);
    }
    gw_respond_error(r, rv);
}

struct mg_str gw__s3_requester(const struct gw_request *r)
{
    return r->user ? r->user->name : (struct mg_str){"", 0};
}

int gw__s3_is_owner(const struct gw_request *r, struct mg_str owner)
{
    return r->user != NULL && gw__s3_str_eq(r->user->name, owner);
}

int gw__s3_acl_allows(const struct gw_request *r, enum meta_acl acl, enum gw_perm need)
{
    switch (need) {
    case GW_PERM_READ:
        return acl == META_ACL_PUBLIC_READ || acl == META_ACL_PUBLIC_READ_WRITE ||
               (acl == META_ACL_AUTHENTICATED_READ && r->user != NULL);
    case GW_PERM_WRITE:
        return acl == META_ACL_PUBLIC_READ_WRITE;
    case GW_PERM_OWNER:
        break;
    }
    return 0;
}

int gw__s3_bucket_load(struct gw_request *r, enum gw_perm need, struct meta_bucket *b)
{
    assert(r->bucket.len > 0); /* the router only routes bucket operations with a bucket */
    int rv = meta_bucket_get(r->ms, r->bucket, &r->arena, b);
    if (rv != 0)
        return rv;
    if (gw__s3_is_owner(r, b->owner) || gw__s3_acl_allows(r, b->acl, need))
        return 0;
    return MG_EACCESSDENIED;
}

static int object_load(struct gw_request *r, struct mg_str bucket, struct mg_str key,
                       struct meta_bucket *b, struct meta_object *o, int pin)
{
    int rv = meta_bucket_get(r->ms, bucket, &r->arena, b);
    if (rv != 0)
        return rv;
    rv = pin ? meta_object_get_pinned(r->ms, bucket, key, &r->arena, o)
             : meta_object_get(r->ms, bucket, key, &r->arena, o);
    if (gw__s3_is_owner(r, b->owner))
        return rv;
    /* As in S3, the object's ACL governs GetObject; the bucket's READ grant only lists. */
    if (rv == 0 && (gw__s3_is_owner(r, o->owner) || gw__s3_acl_allows(r, o->acl, GW_PERM_READ)))
        return 0;
    if (rv == 0 && pin)
        meta_data_unpin(r->ms, &o->data);
    /* "If you have the s3:ListBucket permission on the bucket, Amazon S3 returns 404 ... If
     * you don't, it returns 403" (GetObject). */
    if (rv == MG_ENOSUCHKEY && gw__s3_acl_allows(r, b->acl, GW_PERM_READ))
        return rv;
    return rv == MG_EIO || rv == MG_ESLOWDOWN ? rv : MG_EACCESSDENIED;
}

int gw__s3_object_load(struct gw_request *r, struct mg_str bucket, struct mg_str key,
                       struct meta_bucket *b, struct meta_object *o)
{
    return object_load(r, bucket, key, b, o, 0);
}

int gw__s3_object_load_pinned(struct gw_request *r, struct mg_str bucket, struct mg_str key,
                              struct meta_bucket *b, struct meta_object *o)
{
    return object_load(r, bucket, key, b, o, 1);
}

void gw__s3_xml_owner(struct mg_buf *b, const char *elem, struct mg_str owner)
{
    gw_xml_start(b, elem);
    gw_xml_elem(b, "ID", owner);
    gw_xml_elem(b, "DisplayName", owner);
    gw_xml_end(b, elem);
}

uint32_t gw__s3_query_u32(struct gw_request *r, const char *name, uint32_t max, int *present)
{
    struct mg_str v;
    int64_t n;
    *present = gw_query(r, name, &v);
    if (!*present)
        return 0;
    n = gw__s3_parse_dec(gw__s3_trim(v));
    return n <= 0 || n > (int64_t)max ? 0 : (uint32_t)n;
}

/* ------------------------------------------------------------ object headers */

static const struct {
    const char *header;
    const char *override; /* response-* query parameter */
    size_t field;         /* offset in struct meta_object */
} std_headers[] = {
    {"content-type", "response-content-type", offsetof(struct meta_object, content_type)},
    {"content-encoding", "response-content-encoding",
     offsetof(struct meta_object, content_encoding)},
    {"cache-control", "response-cache-control", offsetof(struct meta_object, cache_control)},
    {"content-disposition", "response-content-disposition",
     offsetof(struct meta_object, content_disposition)},
    {"content-language", "response-content-language",
     offsetof(struct meta_object, content_language)},
    {"expires", "response-expires", offsetof(struct meta_object, expires)},
};
#define N_STD_HEADERS (sizeof(std_headers) / sizeof(std_headers[0]))

static struct mg_str *obj_field(struct meta_object *o, size_t i)
{
    return (struct mg_str *)(void *)((char *)o + std_headers[i].field);
}

/* Content-Encoding without the aws-chunked token (it only frames the upload). The rest is kept
 * byte for byte, as S3 stores it: each kept token keeps the separator written before it, and
 * a value without aws-chunked is returned unchanged ("gzip, br" stays "gzip, br"). */
static struct mg_str strip_aws_chunked(struct gw_request *r, struct mg_str v)
{
    char *out = mg_arena_alloc(&r->arena, v.len + 1);
    size_t i, start = 0, n = 0, prev_end = 0;
    int removed = 0;
    for (i = 0; i <= v.len; i++) {
        struct mg_str t;
        if (i < v.len && v.base[i] != ',')
            continue;
        t = gw__s3_trim((struct mg_str){v.base + start, i - start});
        start = i + 1;
        if (t.len == 11 && strncasecmp(t.base, "aws-chunked", 11) == 0) {
            removed = 1;
            prev_end = (size_t)(t.base - v.base) + t.len;
            continue;
        }
        if (t.len == 0)
            continue;
        if (n > 0) { /* the separator as written between this token and the one before it */
            memcpy(out + n, v.base + prev_end, (size_t)(t.base - v.base) - prev_end);
            n += (size_t)(t.base - v.base) - prev_end;
        }
        memcpy(out + n, t.base, t.len);
        n += t.len;
        prev_end = (size_t)(t.base - v.base) + t.len;
    }
    if (!removed)
        return v;
    out[n] = '\0';
    return (struct mg_str){out, n};
}

static int user_meta_from_headers(struct gw_request *r, struct meta_object *o)
{
    const h2o_headers_t *h = &r->req->headers;
    size_t i, n = 0, total = 0;
    o->user_meta = mg_arena_alloc(&r->arena, (h->size ? h->size : 1) * sizeof(*o->user_meta));
    for (i = 0; i < h->size; i++) {
        const h2o_iovec_t *name = h->entries[i].name;
        char *k;
        size_t j;
        if (name->len <= 11 || strncasecmp(name->base, "x-amz-meta-", 11) != 0)
            continue;
        k = mg_arena_dup(&r->arena, name->base + 11, name->len - 11);
        for (j = 0; k[j] != '\0'; j++)
            k[j] = (char)tolower((unsigned char)k[j]);
        o->user_meta[n].k = (struct mg_str){k, name->len - 11};
        o->user_meta[n].v = gw__s3_trim((struct mg_str){h->entries[i].value.base,
                                                     h->entries[i].value.len});
        total += o->user_meta[n].k.len + o->user_meta[n].v.len;
        n++;
    }
    o->nuser_meta = n;
    if (total > GW_S3_USER_META_MAX) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "Your metadata headers exceed the maximum allowed metadata size (%zu > %u)",
                 total, GW_S3_USER_META_MAX);
        return MG_EMETATOOLARGE;
    }
    return 0;
}

int gw__s3_acl_from_headers(struct gw_request *r, int object, enum meta_acl *acl, int *given)
{
    const h2o_headers_t *h = &r->req->headers;
    struct mg_str v;
    size_t i;
    int rv;
    *acl = META_ACL_PRIVATE;
    *given = 0;
    for (i = 0; i < h->size; i++) {
        if (h->entries[i].name->len > 12 &&
            strncasecmp(h->entries[i].name->base, "x-amz-grant-", 12) == 0) {
            snprintf(r->errmsg, sizeof(r->errmsg), "x-amz-grant-* headers are not "
                                                   "implemented: use a canned ACL (x-amz-acl)");
            return MG_ENOTIMPLEMENTED;
        }
    }
    if (!gw_header(r, "x-amz-acl", &v))
        return 0;
    *given = 1;
    rv = gw_canned_acl_parse(v, object, acl);
    if (rv != 0)
        snprintf(r->errmsg, sizeof(r->errmsg), "Unsupported canned ACL %.*s", (int)v.len,
                 v.base);
    return rv;
}

int gw__s3_object_from_headers(struct gw_request *r, struct meta_object *o)
{
    struct mg_str v;
    size_t i;
    int rv, given;

    memset(o, 0, sizeof(*o));
    if (r->key.len > META_KEY_MAX)
        return MG_EKEYTOOLONG;
    o->key = r->key;
    o->owner = gw__s3_requester(r);
    o->acl = META_ACL_PRIVATE;
    o->cksum_algo = MG_CKSUM_NONE;
    for (i = 0; i < N_STD_HEADERS; i++)
        if (gw_header(r, std_headers[i].header, &v))
            *obj_field(o, i) = gw__s3_trim(v);
    if (o->content_encoding.len > 0)
        o->content_encoding = strip_aws_chunked(r, o->content_encoding);
    if (o->content_type.len == 0)
        o->content_type = (struct mg_str){"binary/octet-stream", 19};
    if ((rv = user_meta_from_headers(r, o)) != 0)
        return rv;
    if ((rv = gw__s3_acl_from_headers(r, 1, &o->acl, &given)) != 0)
        return rv;
    if (gw_header(r, "x-amz-tagging", &v)) {
        rv = gw_tagging_query_parse(v, GW_OBJECT_TAGS_MAX, &r->arena, &o->tags, &o->ntags,
                                    r->errmsg);
        if (rv != 0)
            return rv;
    }
    return 0;
}

/* s3.h */
int gw__s3_put_cond(struct gw_request *r, struct meta_put_cond *cond)
{
    struct mg_str v;
    memset(cond, 0, sizeof(*cond));
    if (gw_header(r, "if-none-match", &v)) {
        if (!(v.len == 1 && v.base[0] == '*')) {
            snprintf(r->errmsg, sizeof(r->errmsg), "If-None-Match only supports *");
            return MG_ENOTIMPLEMENTED;
        }
        cond->if_none_match_any = 1;
    }
    if (gw_header(r, "if-match", &v)) {
        while (v.len > 0 && (v.base[0] == ' ' || v.base[0] == '"'))
            v.base++, v.len--;
        while (v.len > 0 && (v.base[v.len - 1] == ' ' || v.base[v.len - 1] == '"'))
            v.len--;
        cond->if_match = v;
    }
    return 0;
}

void gw__s3_object_headers(struct gw_request *r, const struct meta_object *o)
{
    char date[30];
    size_t i;
    gw_http_date(o->mtime_ms, date);
    gw_header_add(r, "last-modified", (struct mg_str){date, strlen(date)});
    gw_header_addf(r, "etag", "\"%.*s\"", (int)o->etag.len, o->etag.base);
    gw_header_add(r, "accept-ranges", (struct mg_str){"bytes", 5});
    for (i = 0; i < N_STD_HEADERS; i++) {
        struct mg_str v = *obj_field((struct meta_object *)o, i);
        struct mg_str ov;
        /* response-* overrides: only for signed requests (the handler rejects them for
         * anonymous ones, as S3 does). */
        if (r->user != NULL && gw_query(r, std_headers[i].override, &ov))
            v = ov;
        if (i == 0 && v.len == 0)
            v = (struct mg_str){"binary/octet-stream", 19};
        if (v.len > 0)
            gw_header_add(r, std_headers[i].header, v);
    }
    for (i = 0; i < o->nuser_meta; i++) {
        char *name = mg_arena_alloc(&r->arena, o->user_meta[i].k.len + 12);
        memcpy(name, "x-amz-meta-", 11);
        memcpy(name + 11, o->user_meta[i].k.base, o->user_meta[i].k.len);
        name[11 + o->user_meta[i].k.len] = '\0';
        gw_header_add(r, name, o->user_meta[i].v);
    }
    if (o->ntags > 0)
        gw_header_addf(r, "x-amz-tagging-count", "%zu", o->ntags);
}

void gw__s3_checksum_header(struct gw_request *r, enum mg_cksum_algo algo, struct mg_str value)
{
    if (algo == MG_CKSUM_NONE || algo == MG_CKSUM_MD5 || value.len == 0)
        return;
    gw_header_add(r, mg_cksum_header_name(algo), value);
}

struct mg_str gw__s3_checksum_type(struct mg_str value)
{
    if (value.len > 0 && memchr(value.base, '-', value.len) != NULL)
        return (struct mg_str){"COMPOSITE", 9};
    return (struct mg_str){"FULL_OBJECT", 11};
}

void gw__s3_checksum_elem(struct mg_buf *b, enum mg_cksum_algo algo, struct mg_str value)
{
    char name[32];
    if (algo == MG_CKSUM_NONE || algo == MG_CKSUM_MD5 || value.len == 0)
        return;
    snprintf(name, sizeof(name), "Checksum%s", mg_cksum_algo_name(algo));
    gw_xml_elem(b, name, value);
}

/* ------------------------------------------------------------- copy sources */

int gw__s3_copy_source(struct gw_request *r, struct mg_str *bucket, struct mg_str *key)
{
    struct mg_str v;
    struct mg_buf dec;
    const char *q, *slash;
    char *p;
    if (!gw_header(r, "x-amz-copy-source", &v))
        return MG_EINVALIDARGUMENT;
    v = gw__s3_trim(v);
    q = memchr(v.base, '?', v.len); /* ?versionId=...: we keep one version */
    if (q != NULL)
        v.len = (size_t)(q - v.base);
    mg_buf_init(&dec);
    if (mg_uri_decode(v, &dec) != 0) {
        mg_buf_close(&dec);
        return MG_EINVALIDARGUMENT;
    }
    p = mg_arena_dup(&r->arena, dec.base ? dec.base : "", dec.len);
    v = (struct mg_str){p, dec.len};
    mg_buf_close(&dec);
    if (v.len > 0 && v.base[0] == '/')
        v.base++, v.len--;
    slash = memchr(v.base, '/', v.len);
    if (slash == NULL || slash == v.base || slash + 1 == v.base + v.len) {
        snprintf(r->errmsg, sizeof(r->errmsg), "Copy Source must mention the source bucket and "
                                               "key: sourcebucket/sourcekey");
        return MG_EINVALIDARGUMENT;
    }
    *bucket = (struct mg_str){v.base, (size_t)(slash - v.base)};
    *key = (struct mg_str){slash + 1, (size_t)(v.base + v.len - slash - 1)};
    return 0;
}

void gw__s3_cond_read(struct gw_request *r, const char *prefix, struct gw_cond *c)
{
    char name[64];
    struct mg_str v;
    memset(c, 0, sizeof(*c));
    c->if_modified_since_ms = c->if_unmodified_since_ms = -1;
    snprintf(name, sizeof(name), "%smatch", prefix);
    if (gw_header(r, name, &v))
        c->if_match = gw__s3_trim(v);
    snprintf(name, sizeof(name), "%snone-match", prefix);
    if (gw_header(r, name, &v))
        c->if_none_match = gw__s3_trim(v);
    snprintf(name, sizeof(name), "%smodified-since", prefix);
    if (gw_header(r, name, &v))
        c->if_modified_since_ms = gw_http_date_parse(gw__s3_trim(v));
    snprintf(name, sizeof(name), "%sunmodified-since", prefix);
    if (gw_header(r, name, &v))
        c->if_unmodified_since_ms = gw_http_date_parse(gw__s3_trim(v));
}

int gw__s3_copy_source_cond(struct gw_request *r, const struct meta_object *src)
{
    struct gw_cond c;
    int rv;
    gw__s3_cond_read(r, "x-amz-copy-source-if-", &c);
    rv = gw_cond_eval(&c, src->etag, src->mtime_ms);
    return rv == MG_ENOTMODIFIED ? MG_EPRECONDITION : rv;
}

/* ------------------------------------------------------------------- bodies */

static int on_body_slice(void *ctx, const void *data, size_t len)
{
    return meta_data_writer_append(ctx, data, len);
}

/* Declared payload size: x-amz-decoded-content-length (aws-chunked), else Content-Length. */
static uint64_t declared_size(struct gw_request *r)
{
    struct mg_str v;
    int64_t n;
    if (gw_header(r, "x-amz-decoded-content-length", &v) && (n = gw__s3_parse_dec(gw__s3_trim(v))) >= 0)
        return (uint64_t)n;
    if (gw_header(r, "content-length", &v) && (n = gw__s3_parse_dec(gw__s3_trim(v))) >= 0)
        return (uint64_t)n;
    return r->req->entity.len;
}

int gw__s3_store_body(struct gw_request *r, struct meta_data *data, struct gw_body_result *res)
{
    struct meta_data_writer *w;
    uint64_t hint = declared_size(r);
    int rv;
    assert(data != NULL && res != NULL);
    if (hint > GW_S3_OBJECT_MAX)
        return MG_EENTITYTOOLARGE;
    rv = meta_data_writer_create(r->ms, hint, &w);
    if (rv != 0)
        return rv;
    rv = gw_body_stream(r, on_body_slice, w, res);
    if (rv == 0 && res->size > GW_S3_OBJECT_MAX)
        rv = MG_EENTITYTOOLARGE;
    if (rv != 0) {
        meta_data_writer_abort(w);
        return rv;
    }
    return meta_data_writer_finish(w, &r->arena, data);
}

/* Entities up to the inline threshold are decoded on the loop: h2o already holds them in
 * memory, the writer keeps them in memory (no blob write, no fsync), and a thread handoff
 * would cost more than the MD5. Larger ones stream into the blob store on a worker. */
static int body_fits_loop(struct gw_request *r)
{
    size_t raw = r->req->entity.base != NULL ? r->req->entity.len : 0;
    return raw <= gw_inline_max_bytes(r) && declared_size(r) <= gw_inline_max_bytes(r);
}

static int on_store_work(struct gw_request *r, void *arg)
{
    struct gw__s3_body *b = arg;
    return gw__s3_store_body(r, &b->data, &b->res);
}

static void on_store_after(struct gw_request *r, void *arg, int rv)
{
    struct gw__s3_body *b = arg;
    if (r == NULL) { /* the client went away: nobody takes the data */
        if (rv == 0)
            meta_data_release(b->ms, &b->data);
        return;
    }
    b->then(r, b, rv);
}

void gw__s3_store_body_async(struct gw_request *r, struct gw__s3_body *b)
{
    assert(b != NULL && b->then != NULL);
    b->ms = r->ms;
    if (body_fits_loop(r)) {
        b->then(r, b, gw__s3_store_body(r, &b->data, &b->res));
        return;
    }
    int rv = gw_work_queue(r, on_store_work, on_store_after, b, 0);
    if (rv != 0)
        b->then(r, b, rv);
}

/* ------------------------------------------------------------- meta ops */

struct meta_op *gw__s3_op(struct gw_request *r, enum meta_op_type t, const struct meta_bucket *b)
{
    struct meta_op *op = meta_op_create(t);
    op->in.bucket = r->bucket;
    op->in.bucket_id = b != NULL ? b->id : 0; /* looked up once, by the handler */
    op->in.key = r->key;
    return op;
}

void gw__s3_submit(struct gw_request *r, struct meta_op *op, gw_op_done_cb done, void *arg)
{
    struct meta_data data;
    int owns_data = op->type == META_OP_OBJECT_PUT || op->type == META_OP_MPU_PUT_PART;
    memset(&data, 0, sizeof(data));
    if (owns_data)
        data = op->type == META_OP_OBJECT_PUT ? op->in.object.data : op->in.part.data;
    int rv = gw_op_submit(r, op, done, arg);
    if (rv == 0)
        return;
    if (owns_data) /* refused before meta took it: it owns nothing of ours */
        meta_data_release(r->ms, &data);
    gw__s3_fail(r, rv, NULL);
}

static void on_done_empty(struct gw_request *r, struct meta_op *op, void *arg)
{
    gw__s3_done(r, op->status, (int)(intptr_t)arg);
}

void gw__s3_submit_empty(struct gw_request *r, struct meta_op *op, int status)
{
    gw__s3_submit(r, op, on_done_empty, (void *)(intptr_t)status);
}

/* ----------------------------------------------------------------- dispatch */

static void dispatch_now(struct gw_request *r);

static void on_fenced(struct gw_request *r, struct meta_op *op, void *arg)
{
    (void)arg;
    if (op->status != 0)
        gw__s3_fail(r, op->status, "No leader confirmed this node's view of the metadata.");
    else
        dispatch_now(r);
}

/* In a cluster every request first waits for a read fence (meta_read_fence_create): the
 * handlers read the bucket and objects from this node's committed state. A single node has
 * no fence (NULL) and dispatches at once. */
void gw_s3_dispatch(struct gw_request *r)
{
    assert(r != NULL && r->req != NULL && r->ms != NULL);
    struct meta_op *fence = meta_read_fence_create(r->ms, r->bucket);
    if (fence == NULL)
        dispatch_now(r);
    else if (gw_op_submit(r, fence, on_fenced, NULL) != 0) {
        meta_op_destroy(fence);
        gw__s3_fail(r, MG_ESLOWDOWN, NULL);
    }
}

static void dispatch_now(struct gw_request *r)
{
    switch (r->op) {
    case GW_OP_LIST_BUCKETS: gw__s3_list_buckets(r); return;
    case GW_OP_CREATE_BUCKET: gw__s3_create_bucket(r); return;
    case GW_OP_HEAD_BUCKET: gw__s3_head_bucket(r); return;
    case GW_OP_DELETE_BUCKET: gw__s3_delete_bucket(r); return;
    case GW_OP_GET_BUCKET_LOCATION: gw__s3_bucket_location(r); return;
    case GW_OP_LIST_OBJECTS:
    case GW_OP_LIST_OBJECTS_V2: gw__s3_list_objects(r); return;
    case GW_OP_LIST_MULTIPART_UPLOADS: gw__s3_mpu_list_uploads(r); return;
    case GW_OP_DELETE_OBJECTS: gw__s3_delete_objects(r); return;
    case GW_OP_GET_BUCKET_TAGGING:
    case GW_OP_PUT_BUCKET_TAGGING:
    case GW_OP_DELETE_BUCKET_TAGGING: gw__s3_bucket_tagging(r); return;
    case GW_OP_GET_BUCKET_ACL:
    case GW_OP_PUT_BUCKET_ACL: gw__s3_bucket_acl(r); return;
    case GW_OP_GET_BUCKET_LIFECYCLE:
    case GW_OP_PUT_BUCKET_LIFECYCLE:
    case GW_OP_DELETE_BUCKET_LIFECYCLE: gw__s3_bucket_lifecycle(r); return;
    case GW_OP_GET_BUCKET_VERSIONING:
    case GW_OP_GET_BUCKET_POLICY:
    case GW_OP_GET_BUCKET_CORS: gw__s3_bucket_stub(r); return;
    case GW_OP_PUT_OBJECT: gw__s3_put_object(r); return;
    case GW_OP_COPY_OBJECT: gw__s3_copy_object(r); return;
    case GW_OP_GET_OBJECT:
    case GW_OP_HEAD_OBJECT: gw__s3_get_object(r); return;
    case GW_OP_DELETE_OBJECT: gw__s3_delete_object(r); return;
    case GW_OP_GET_OBJECT_TAGGING:
    case GW_OP_PUT_OBJECT_TAGGING:
    case GW_OP_DELETE_OBJECT_TAGGING: gw__s3_object_tagging(r); return;
    case GW_OP_GET_OBJECT_ACL:
    case GW_OP_PUT_OBJECT_ACL: gw__s3_object_acl(r); return;
    case GW_OP_GET_OBJECT_ATTRIBUTES: gw__s3_object_attributes(r); return;
    case GW_OP_CREATE_MULTIPART_UPLOAD: gw__s3_mpu_create(r); return;
    case GW_OP_UPLOAD_PART: gw__s3_mpu_upload_part(r); return;
    case GW_OP_UPLOAD_PART_COPY: gw__s3_mpu_upload_part_copy(r); return;
    case GW_OP_COMPLETE_MULTIPART_UPLOAD: gw__s3_mpu_complete(r); return;
    case GW_OP_ABORT_MULTIPART_UPLOAD: gw__s3_mpu_abort(r); return;
    case GW_OP_LIST_PARTS: gw__s3_mpu_list_parts(r); return;
    case GW_OP_UNKNOWN:
    case GW_OP__COUNT: break;
    }
    gw__s3_fail(r, MG_ENOTIMPLEMENTED, "This operation is not implemented");
}
