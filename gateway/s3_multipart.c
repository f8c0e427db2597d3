/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Multipart uploads: Create (the final object's attributes and checksum
 * algorithm are kept with the upload), UploadPart, UploadPartCopy (a byte
 * range of an existing object, copied in GW_S3_COPY_SLICE pieces so memory
 * stays bounded), Complete (ETag "hex(md5 of the part md5s)-N"; meta checks
 * InvalidPart, InvalidPartOrder, EntityTooSmall), Abort, ListParts and
 * ListMultipartUploads.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"

static int upload_id(struct gw_request *r, struct mg_str *id)
{
    if (gw_query(r, "uploadId", id) && id->len > 0)
        return 0;
    return MG_ENOSUCHUPLOAD;
}

static int part_number(struct gw_request *r, uint32_t *n)
{
    int present;
    *n = gw__s3_query_u32(r, "partNumber", META_PART_MAX, &present);
    if (*n != 0)
        return 0;
    snprintf(r->errmsg, sizeof(r->errmsg),
             "Part number must be an integer between 1 and 10000, inclusive");
    return MG_EINVALIDARGUMENT;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* An upload's checksum type: FULL_OBJECT when created so (its template's cksum_value holds
 * MG_CKSUM_FULL_OBJECT, common/sig.h), else COMPOSITE. */
static int upload_full_object(const struct meta_object *tmpl)
{
    size_t n = sizeof(MG_CKSUM_FULL_OBJECT) - 1;
    return tmpl->cksum_value.len == n &&
           memcmp(tmpl->cksum_value.base, MG_CKSUM_FULL_OBJECT, n) == 0;
}

static struct mg_str upload_type(const struct meta_object *tmpl)
{
    return upload_full_object(tmpl) ? (struct mg_str){MG_CKSUM_FULL_OBJECT, 11}
                                    : (struct mg_str){"COMPOSITE", 9};
}

static void on_mpu_create_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    struct mg_buf x;
    (void)arg;
    if (op->status != 0) {
        gw__s3_fail(r, op->status, NULL);
        return;
    }
    if (op->in.object.cksum_algo != MG_CKSUM_NONE) {
        gw_header_addf(r, "x-amz-checksum-algorithm", "%s",
                       mg_cksum_algo_name(op->in.object.cksum_algo));
        gw_header_add(r, "x-amz-checksum-type", upload_type(&op->in.object));
    }
    mg_buf_init(&x);
    gw_xml_open(&x, "InitiateMultipartUploadResult");
    gw_xml_elem(&x, "Bucket", r->bucket);
    gw_xml_elem(&x, "Key", r->key);
    gw_xml_elem(&x, "UploadId", op->out.upload_id);
    gw_xml_close(&x, "InitiateMultipartUploadResult");
    gw__s3_respond_xml(r, &x);
}

/* x-amz-checksum-type (COMPOSITE | FULL_OBJECT): 1 for FULL_OBJECT, 0 for COMPOSITE, -1 for
 * another value (InvalidArgument), dflt when absent. */
static int parse_checksum_type(struct gw_request *r, int dflt)
{
    struct mg_str v;
    if (!gw_header(r, "x-amz-checksum-type", &v))
        return dflt;
    v = gw__s3_trim(v);
    if (v.len == 9 && strncasecmp(v.base, "COMPOSITE", 9) == 0)
        return 0;
    if (v.len == 11 && strncasecmp(v.base, MG_CKSUM_FULL_OBJECT, 11) == 0)
        return 1;
    snprintf(r->errmsg, sizeof(r->errmsg), "Value for x-amz-checksum-type header is invalid.");
    return -1;
}

/* x-amz-checksum-type of CreateMultipartUpload. COMPOSITE: the object's checksum is the
 * checksum of the parts' checksums, "-N". FULL_OBJECT: the CRC of the whole object, which meta
 * combines from the parts' CRCs at complete (meta/mpu.c); S3 allows it for the CRCs only
 * (InvalidRequest with SHA-1/SHA-256 or no algorithm, "Checking object integrity"), and
 * CRC-64/NVME is full-object only, so it is FULL_OBJECT unless told otherwise and refuses
 * COMPOSITE. A FULL_OBJECT upload is marked in the template (upload_full_object). */
static int checksum_type(struct gw_request *r, struct meta_object *tmpl)
{
    enum mg_cksum_algo algo = tmpl->cksum_algo;
    int full = parse_checksum_type(r, algo == MG_CKSUM_CRC64NVME);
    if (full < 0)
        return MG_EINVALIDARGUMENT;
    if (full && (algo == MG_CKSUM_NONE || algo == MG_CKSUM_SHA1 || algo == MG_CKSUM_SHA256)) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "The FULL_OBJECT checksum type needs a CRC algorithm (CRC32, CRC32C, CRC64NVME).");
        return MG_EINVALIDREQUEST;
    }
    if (!full && algo == MG_CKSUM_CRC64NVME) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "The COMPOSITE checksum type is not supported for CRC64NVME.");
        return MG_EINVALIDREQUEST;
    }
    tmpl->cksum_value = full ? (struct mg_str){MG_CKSUM_FULL_OBJECT, 11} : (struct mg_str){"", 0};
    return 0;
}

void gw__s3_mpu_create(struct gw_request *r)
{
    struct meta_bucket b;
    struct meta_object tmpl;
    struct mg_str v;
    int rv;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &b)) != 0)
        goto fail;
    if ((rv = gw__s3_object_from_headers(r, &tmpl)) != 0)
        goto fail;
    if (gw_header(r, "x-amz-checksum-algorithm", &v)) {
        tmpl.cksum_algo = mg_cksum_algo_parse(v);
        if (tmpl.cksum_algo == MG_CKSUM_NONE || tmpl.cksum_algo == MG_CKSUM_MD5) {
            snprintf(r->errmsg, sizeof(r->errmsg), "Checksum algorithm %.*s is not supported",
                     (int)v.len, v.base);
            rv = MG_EINVALIDARGUMENT;
            goto fail;
        }
    }
    if ((rv = checksum_type(r, &tmpl)) != 0)
        goto fail;
    struct meta_op *op = gw__s3_op(r, META_OP_MPU_CREATE, &b);
    op->in.object = tmpl;
    gw__s3_submit(r, op, on_mpu_create_done, NULL);
    return;
fail:
    gw__s3_fail(r, rv, NULL);
}

/* Bucket write access, upload id, part number and the upload's template. */
static int part_prologue(struct gw_request *r, struct meta_bucket *b, struct mg_str *id,
                         uint32_t *n, struct meta_object *tmpl)
{
    int rv;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, b)) != 0 || (rv = upload_id(r, id)) != 0 ||
        (rv = part_number(r, n)) != 0)
        return rv;
    return meta_mpu_get(r->ms, r->bucket, r->key, *id, &r->arena, tmpl);
}

/* UploadPart and UploadPartCopy: the part's bytes are stored (on a worker unless inline), then
 * the MPU_PUT_PART op. */
struct part_ctx {
    struct gw__s3_body body;  /* UploadPart */
    struct meta_bucket b;
    struct meta_object tmpl;  /* the upload's template */
    struct mg_str id;
    struct meta_part part;
    struct meta_object src;   /* UploadPartCopy */
    struct meta_store *ms;    /* UploadPartCopy: releases the copy if the client left */
    uint64_t off, len;        /* UploadPartCopy: the source range */
};

static void on_part_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    struct part_ctx *c = arg;
    if (op->status != 0) {
        gw__s3_fail(r, op->status, NULL);
        return;
    }
    if (r->op == GW_OP_UPLOAD_PART_COPY) {
        gw__s3_respond_copy(r, "CopyPartResult", c->part.mtime_ms, c->part.etag,
                            c->tmpl.cksum_algo, c->part.checksum);
        return;
    }
    gw_header_addf(r, "etag", "\"%.*s\"", (int)c->part.etag.len, c->part.etag.base);
    gw__s3_checksum_header(r, c->part.checksum.len ? c->body.res.cksum_algo : MG_CKSUM_NONE,
                           c->part.checksum);
    gw__s3_respond_empty(r, 200);
}

static void submit_part(struct gw_request *r, struct part_ctx *c)
{
    c->part.mtime_ms = now_ms();
    struct meta_op *op = gw__s3_op(r, META_OP_MPU_PUT_PART, &c->b);
    op->in.upload_id = c->id;
    op->in.part = c->part; /* the op owns part.data from here */
    gw__s3_submit(r, op, on_part_done, c);
}

static void on_part_stored(struct gw_request *r, struct gw__s3_body *body, int rv)
{
    struct part_ctx *c = body->arg;
    struct gw_body_result *res = &body->res;
    if (rv == 0 && c->tmpl.cksum_algo != MG_CKSUM_NONE && res->cksum_algo != c->tmpl.cksum_algo) {
        /* A part declaring another algorithm would be stored under the upload's (a SHA-256
         * listed as ChecksumCRC32) and poison the composite checksum; S3 refuses it. */
        meta_data_release(r->ms, &body->data);
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum "
                 "Type: %s",
                 mg_cksum_algo_name(c->tmpl.cksum_algo), mg_cksum_algo_name(res->cksum_algo));
        rv = MG_EINVALIDREQUEST;
    }
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    c->part.data = body->data;
    c->part.size = res->size;
    c->part.etag = gw__s3_hex_md5(r, res->md5);
    c->part.checksum = res->cksum_value;
    submit_part(r, c);
}

void gw__s3_mpu_upload_part(struct gw_request *r)
{
    struct part_ctx *c = mg_arena_alloc(&r->arena, sizeof(*c));
    int rv;
    memset(c, 0, sizeof(*c));
    if ((rv = part_prologue(r, &c->b, &c->id, &c->part.number, &c->tmpl)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    c->body.res.cksum_algo = c->tmpl.cksum_algo;
    c->body.then = on_part_stored;
    c->body.arg = c;
    gw__s3_store_body_async(r, &c->body);
}

/* x-amz-copy-source-range: "bytes=first-last" inside the source, else whole source. */
static int copy_range(struct gw_request *r, uint64_t size, uint64_t *off, uint64_t *len)
{
    struct mg_str v;
    unsigned long long a, b;
    char tail;
    char buf[64];
    *off = 0;
    *len = size;
    if (!gw_header(r, "x-amz-copy-source-range", &v))
        return 0;
    if (v.len >= sizeof(buf))
        goto invalid;
    memcpy(buf, v.base, v.len);
    buf[v.len] = '\0';
    if (sscanf(buf, "bytes=%llu-%llu%c", &a, &b, &tail) != 2 || a > b || b >= size)
        goto invalid;
    *off = a;
    *len = b - a + 1;
    return 0;
invalid:
    snprintf(r->errmsg, sizeof(r->errmsg),
             "Range specified is not valid for source object of size: %llu",
             (unsigned long long)size);
    return MG_EINVALIDARGUMENT;
}

/* Copy [off, off+len) of src into a new part: MD5 for the ETag and the upload's checksum
 * computed on the way. */
static int copy_bytes(struct gw_request *r, const struct meta_object *src, uint64_t off,
                      uint64_t len, enum mg_cksum_algo algo, struct meta_part *part)
{
    struct meta_data_writer *w;
    struct mg_cksum md5, ck;
    uint8_t digest[32];
    char *slice;
    uint64_t done = 0;
    size_t dl;
    int rv = meta_data_writer_create(r->ms, len, &w);
    if (rv != 0)
        return rv;
    slice = mg_malloc(GW_S3_COPY_SLICE);
    mg_cksum_init(&md5, MG_CKSUM_MD5);
    mg_cksum_init(&ck, algo == MG_CKSUM_MD5 ? MG_CKSUM_NONE : algo);
    /* Bounded: one GW_S3_COPY_SLICE buffer however large the part (<= 5 GiB). */
    while (rv == 0 && done < len) {
        size_t n = len - done < GW_S3_COPY_SLICE ? (size_t)(len - done) : GW_S3_COPY_SLICE;
        rv = meta_data_read(r->ms, &src->data, off + done, slice, n);
        if (rv == 0)
            rv = meta_data_writer_append(w, slice, n);
        if (rv == 0) {
            mg_cksum_update(&md5, slice, n);
            if (ck.algo != MG_CKSUM_NONE)
                mg_cksum_update(&ck, slice, n);
        }
        done += n;
    }
    mg_free(slice);
    assert(rv != 0 || done == len);
    mg_cksum_final(&md5, digest);
    mg_cksum_close(&md5);
    part->etag = gw__s3_hex_md5(r, digest);
    part->checksum = (struct mg_str){"", 0};
    if (ck.algo != MG_CKSUM_NONE) {
        char *b64 = mg_arena_alloc(&r->arena, 48);
        dl = mg_cksum_final(&ck, digest);
        part->checksum = (struct mg_str){b64, mg_base64_encode(digest, dl, b64)};
    }
    mg_cksum_close(&ck);
    if (rv != 0) {
        meta_data_writer_abort(w);
        return rv;
    }
    part->size = len;
    return meta_data_writer_finish(w, &r->arena, &part->data);
}

static int on_part_copy_work(struct gw_request *r, void *arg)
{
    struct part_ctx *c = arg;
    int rv = copy_bytes(r, &c->src, c->off, c->len, c->tmpl.cksum_algo, &c->part);
    meta_data_unpin(c->ms, &c->src.data); /* the source is read: its pin is done */
    return rv;
}

static void on_part_copy_after(struct gw_request *r, void *arg, int rv)
{
    struct part_ctx *c = arg;
    if (r == NULL) {
        if (rv == 0)
            meta_data_release(c->ms, &c->part.data);
        return;
    }
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    submit_part(r, c);
}

/* UploadPartCopy: checks on the loop; the byte copy (reads, blob writes, fsync) on a worker;
 * then the MPU_PUT_PART op. */
void gw__s3_mpu_upload_part_copy(struct gw_request *r)
{
    struct meta_bucket sb;
    struct mg_str sbucket, skey;
    struct part_ctx *c = mg_arena_alloc(&r->arena, sizeof(*c));
    int rv;
    memset(c, 0, sizeof(*c));
    c->ms = r->ms;
    if ((rv = gw__s3_copy_source(r, &sbucket, &skey)) != 0 ||
        (rv = part_prologue(r, &c->b, &c->id, &c->part.number, &c->tmpl)) != 0 ||
        (rv = gw__s3_object_load_pinned(r, sbucket, skey, &sb, &c->src)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    /* The source stays pinned until the worker has read it (on_part_copy_work). */
    if ((rv = gw__s3_copy_source_cond(r, &c->src)) != 0 ||
        (rv = copy_range(r, c->src.size, &c->off, &c->len)) != 0 ||
        (rv = gw_work_queue(r, on_part_copy_work, on_part_copy_after, c, 0)) != 0) {
        meta_data_unpin(r->ms, &c->src.data);
        gw__s3_fail(r, rv, NULL);
    }
}

static void object_location(struct gw_request *r, struct mg_buf *loc)
{
    const char *scheme = "http";
    if (r->req->scheme != NULL && r->req->scheme->name.len == 5)
        scheme = "https";
    mg_buf_appendf(loc, "%s://%.*s/", scheme, (int)r->req->authority.len,
                   r->req->authority.base);
    mg_uri_encode(r->bucket, 0, loc);
    mg_buf_append(loc, "/", 1);
    mg_uri_encode(r->key, 1, loc);
}

/* If-None-Match: * and If-Match on CompleteMultipartUpload (conditional writes, which
 * boto3 >= 1.36 sends): the key must not exist, or must hold an object with that ETag
 * (NoSuchKey when it does not exist). A key that holds what this upload completed is a
 * retried complete, which meta answers 200. Evaluated against the current entry before the
 * op is submitted, so it is not atomic with the commit: a PUT that lands between the two is
 * overwritten (meta_mpu_complete takes no meta_put_cond yet). The upload stays in place. */
static int complete_cond(struct gw_request *r, const struct meta_put_cond *cond,
                         struct mg_str id)
{
    struct meta_object cur;
    int rv;
    if (!cond->if_none_match_any && cond->if_match.len == 0)
        return 0;
    rv = meta_object_get(r->ms, r->bucket, r->key, &r->arena, &cur);
    if (rv == MG_ENOSUCHKEY)
        return cond->if_match.len > 0 ? MG_ENOSUCHKEY : 0;
    if (rv != 0)
        return rv;
    if (gw__s3_str_eq(cur.upload_id, id))
        return 0;
    if (cond->if_none_match_any || !gw__s3_str_eq(cur.etag, cond->if_match))
        return MG_EPRECONDITION;
    return 0;
}

static void on_complete_done(struct gw_request *r, struct meta_op *op, void *arg);

static int part_by_number(const void *k, const void *e)
{
    uint32_t n = *(const uint32_t *)k, m = ((const struct meta_part *)e)->number;
    return n < m ? -1 : n > m;
}

/* The stored parts of an upload, ascending (meta_mpu_list_parts pages of 1000). */
static int all_parts(struct gw_request *r, struct mg_str id, struct meta_part **out, size_t *n)
{
    uint32_t marker = 0;
    int truncated = 1, rv = 0;
    *out = mg_arena_alloc(&r->arena, META_PART_MAX * sizeof(**out));
    *n = 0;
    while (truncated && rv == 0) {
        struct meta_part *page;
        size_t np;
        rv = meta_mpu_list_parts(r->ms, r->bucket, r->key, id, marker, 1000, &r->arena, &page,
                                 &np, &truncated);
        if (rv == 0 && (np == 0 || *n + np > META_PART_MAX))
            break;
        if (rv == 0) {
            memcpy(*out + *n, page, np * sizeof(*page));
            *n += np;
            marker = page[np - 1].number;
        }
    }
    return rv;
}

/* CompleteMultipartUpload's checksum headers. x-amz-checksum-type, when sent, must name the
 * upload's type (InvalidRequest, as S3). For a FULL_OBJECT upload, x-amz-checksum-<algo> is the
 * CRC of the whole object: it is compared (BadDigest) with the CRCs of the listed parts
 * combined, before the op is submitted, so a wrong one leaves the upload in place. Only listed
 * parts found stored with the listed ETag are combined; any other list is the op's to refuse
 * (InvalidPart, InvalidPartOrder), and what it then commits is those same parts (an ETag names
 * a part's bytes). No upload (or a retried complete): the op answers. */
static int complete_checksum(struct gw_request *r, struct mg_str id, const struct meta_part *want,
                             size_t nwant)
{
    struct meta_object tmpl;
    struct meta_part *have;
    size_t nhave;
    struct mg_str v;
    if (meta_mpu_get(r->ms, r->bucket, r->key, id, &r->arena, &tmpl) != 0)
        return 0;
    int full = upload_full_object(&tmpl);
    int asked = parse_checksum_type(r, full);
    if (asked < 0)
        return MG_EINVALIDARGUMENT;
    if (tmpl.cksum_algo != MG_CKSUM_NONE && asked != full) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "The upload was created using the %.*s checksum mode. The complete request must "
                 "use the same checksum mode.",
                 (int)upload_type(&tmpl).len, upload_type(&tmpl).base);
        return MG_EINVALIDREQUEST;
    }
    if (!full || !gw_header(r, mg_cksum_header_name(tmpl.cksum_algo), &v) ||
        all_parts(r, id, &have, &nhave) != 0)
        return 0;
    struct mg_crc_concat c;
    mg_crc_concat_init(&c, tmpl.cksum_algo);
    for (size_t i = 0; i < nwant; i++) {
        const struct meta_part *p = bsearch(&want[i].number, have, nhave, sizeof(*have),
                                            part_by_number);
        struct mg_str e = want[i].etag;
        if (e.len >= 2 && e.base[0] == '"' && e.base[e.len - 1] == '"')
            e = (struct mg_str){e.base + 1, e.len - 2};
        if (p == NULL || !(e.len == p->etag.len && strncasecmp(e.base, p->etag.base, e.len) == 0) ||
            (i > 0 && want[i].number <= want[i - 1].number))
            return 0;
        mg_crc_concat_add(&c, p->checksum, p->size);
    }
    char b64[16];
    size_t len = mg_crc_concat_final(&c, b64);
    v = gw__s3_trim(v);
    if (len > 0 && (v.len != len || memcmp(v.base, b64, len) != 0)) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "The %s you specified did not match the calculated checksum.",
                 mg_cksum_header_name(tmpl.cksum_algo));
        return MG_EBADDIGEST;
    }
    return 0;
}

void gw__s3_mpu_complete(struct gw_request *r)
{
    struct meta_bucket *b = mg_arena_alloc(&r->arena, sizeof(*b));
    struct meta_put_cond cond;
    struct meta_part *parts;
    struct mg_str id, body;
    size_t n;
    int rv;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, b)) != 0 || (rv = upload_id(r, &id)) != 0 ||
        (rv = gw__s3_put_cond(r, &cond)) != 0 ||
        (rv = gw_body_read_all(r, GW_S3_XML_LARGE_MAX, &body)) != 0 ||
        (rv = gw_xml_parse_complete(body, &r->arena, &parts, &n, r->errmsg)) != 0 ||
        (rv = complete_cond(r, &cond, id)) != 0 ||
        (rv = complete_checksum(r, id, parts, n)) != 0)
        goto fail;
    struct meta_op *op = gw__s3_op(r, META_OP_MPU_COMPLETE, b);
    op->in.upload_id = id;
    op->in.parts = parts;
    op->in.nparts = n;
    gw__s3_submit(r, op, on_complete_done, b);
    return;
fail:
    gw__s3_fail(r, rv, NULL);
}

static void on_complete_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    const struct meta_object *out = &op->out.object;
    const struct meta_bucket *b = arg;
    struct mg_buf x, loc;
    if (op->status != 0) {
        gw__s3_fail(r, op->status, NULL);
        return;
    }
    gw__s3_expiration_header(r, b, out, out->mtime_ms);
    mg_buf_init(&loc);
    object_location(r, &loc);
    mg_buf_init(&x);
    gw_xml_open(&x, "CompleteMultipartUploadResult");
    gw_xml_elem(&x, "Location", (struct mg_str){loc.base, loc.len});
    gw_xml_elem(&x, "Bucket", r->bucket);
    gw_xml_elem(&x, "Key", r->key);
    gw_xml_elem_etag(&x, "ETag", out->etag);
    gw__s3_checksum_elem(&x, out->cksum_algo, out->cksum_value);
    if (out->cksum_algo != MG_CKSUM_NONE && out->cksum_value.len > 0) /* "-N": COMPOSITE */
        gw_xml_elem(&x, "ChecksumType", gw__s3_checksum_type(out->cksum_value));
    gw_xml_close(&x, "CompleteMultipartUploadResult");
    gw__s3_respond_xml(r, &x);
    mg_buf_close(&loc);
}

void gw__s3_mpu_abort(struct gw_request *r)
{
    struct meta_bucket b;
    struct mg_str id;
    int rv;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &b)) != 0 || (rv = upload_id(r, &id)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    struct meta_op *op = gw__s3_op(r, META_OP_MPU_ABORT, &b);
    op->in.upload_id = id;
    gw__s3_submit_empty(r, op, 204);
}

/* A numeric query parameter through gw_parse_max; InvalidArgument names it. */
static int query_max(struct gw_request *r, const char *name, uint32_t dflt, uint32_t cap,
                     uint32_t *out)
{
    struct mg_str v;
    int present = gw_query(r, name, &v);
    int rv = gw_parse_max(present ? v : (struct mg_str){"", 0}, present, dflt, cap, out);
    if (rv != 0)
        snprintf(r->errmsg, sizeof(r->errmsg), "Provided %s not an integer or within integer "
                                               "range", name);
    return rv;
}

static void emit_parts(struct mg_buf *x, const struct meta_part *parts, size_t n,
                       enum mg_cksum_algo algo)
{
    char date[25];
    size_t i;
    for (i = 0; i < n; i++) {
        gw_xml_start(x, "Part");
        gw_xml_elem_u64(x, "PartNumber", parts[i].number);
        gw_iso8601(parts[i].mtime_ms, date);
        gw_xml_elem(x, "LastModified", (struct mg_str){date, strlen(date)});
        gw_xml_elem_etag(x, "ETag", parts[i].etag);
        gw_xml_elem_u64(x, "Size", parts[i].size);
        gw__s3_checksum_elem(x, algo, parts[i].checksum);
        gw_xml_end(x, "Part");
    }
}

void gw__s3_mpu_list_parts(struct gw_request *r)
{
    struct meta_bucket b;
    struct meta_object tmpl;
    struct meta_part *parts;
    struct mg_str id;
    struct mg_buf x;
    uint32_t max, marker;
    size_t n;
    int truncated, rv;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &b)) != 0 || (rv = upload_id(r, &id)) != 0 ||
        (rv = query_max(r, "max-parts", 1000, 1000, &max)) != 0 ||
        (rv = query_max(r, "part-number-marker", 0, META_PART_MAX, &marker)) != 0 ||
        (rv = meta_mpu_get(r->ms, r->bucket, r->key, id, &r->arena, &tmpl)) != 0 ||
        (rv = meta_mpu_list_parts(r->ms, r->bucket, r->key, id, marker, max, &r->arena, &parts,
                                  &n, &truncated)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    mg_buf_init(&x);
    gw_xml_open(&x, "ListPartsResult");
    gw_xml_elem(&x, "Bucket", r->bucket);
    gw_xml_elem(&x, "Key", r->key);
    gw_xml_elem(&x, "UploadId", id);
    gw__s3_xml_owner(&x, "Initiator", tmpl.owner.len ? tmpl.owner : b.owner);
    gw__s3_xml_owner(&x, "Owner", tmpl.owner.len ? tmpl.owner : b.owner);
    gw_xml_elem(&x, "StorageClass", (struct mg_str){"STANDARD", 8});
    gw_xml_elem_u64(&x, "PartNumberMarker", marker);
    gw_xml_elem_u64(&x, "NextPartNumberMarker", n > 0 ? parts[n - 1].number : marker);
    gw_xml_elem_u64(&x, "MaxParts", max);
    gw_xml_elem_bool(&x, "IsTruncated", truncated);
    if (tmpl.cksum_algo != MG_CKSUM_NONE && tmpl.cksum_algo != MG_CKSUM_MD5) {
        gw_xml_elem_cstr(&x, "ChecksumAlgorithm", mg_cksum_algo_name(tmpl.cksum_algo));
        gw_xml_elem(&x, "ChecksumType", upload_type(&tmpl));
    }
    emit_parts(&x, parts, n, tmpl.cksum_algo);
    gw_xml_close(&x, "ListPartsResult");
    gw__s3_respond_xml(r, &x);
}

struct uploads_args {
    struct mg_str prefix, delimiter, key_marker, id_marker;
    uint32_t max;
    int url;
};

/* One ListMultipartUploads page: uploads and common prefixes, at most max in total. */
struct uploads_page {
    struct meta_upload *u;
    size_t nu;
    struct mg_str *cps;
    size_t ncp;
    int truncated;
    struct mg_str next_key, next_id; /* last key (or prefix) and upload id returned */
};

/* The common prefix key rolls up into (prefix .. first delimiter after it), or empty. */
static struct mg_str rollup(const struct uploads_args *a, struct mg_str key)
{
    const char *hit;
    if (a->delimiter.len == 0 || key.len <= a->prefix.len)
        return (struct mg_str){"", 0};
    hit = memmem(key.base + a->prefix.len, key.len - a->prefix.len, a->delimiter.base,
                 a->delimiter.len);
    if (hit == NULL)
        return (struct mg_str){"", 0};
    return (struct mg_str){key.base, (size_t)(hit - key.base) + a->delimiter.len};
}

/* A key marker past every key under cp: cp + 0xFF up to META_KEY_MAX + 1 bytes sorts after
 * any key of at most META_KEY_MAX bytes that starts with cp, and before every later key. */
static struct mg_str past_prefix(struct gw_request *r, struct mg_str cp)
{
    char *p = mg_arena_alloc(&r->arena, META_KEY_MAX + 2);
    memcpy(p, cp.base, cp.len);
    memset(p + cp.len, 0xFF, META_KEY_MAX + 1 - cp.len);
    p[META_KEY_MAX + 1] = '\0';
    return (struct mg_str){p, META_KEY_MAX + 1};
}

/* Budget: every meta_mpu_list call either returns an item or ends the scan, and the page
 * holds at most a->max (<= 1000) items, so at most a->max + 2 calls; a common prefix costs
 * one call (a seek past it), never a read of the uploads under it. */
static int collect_uploads(struct gw_request *r, const struct uploads_args *a,
                           struct uploads_page *pg)
{
    struct mg_str km = a->key_marker, im = a->id_marker, cp;
    struct meta_upload *u;
    size_t n, i, total = 0;
    int more, rv;
    memset(pg, 0, sizeof(*pg));
    pg->u = mg_arena_alloc(&r->arena, a->max * sizeof(*pg->u));
    pg->cps = mg_arena_alloc(&r->arena, a->max * sizeof(*pg->cps));
    if (km.len > 0 && km.len <= META_KEY_MAX && rollup(a, km).len == km.len) {
        km = past_prefix(r, km); /* resuming after a CommonPrefixes entry */
        im = (struct mg_str){"", 0};
    }
    while (total < a->max) {
        rv = meta_mpu_list(r->ms, r->bucket, a->prefix, km, im, a->max - (uint32_t)total,
                           &r->arena, &u, &n, &more);
        if (rv != 0)
            return rv;
        for (i = 0; i < n && total < a->max; i++) {
            if ((cp = rollup(a, u[i].key)).len > 0) {
                pg->cps[pg->ncp++] = pg->next_key = cp;
                pg->next_id = (struct mg_str){"", 0};
                km = past_prefix(r, cp);
                im = pg->next_id;
                total++;
                break; /* seek past the prefix */
            }
            pg->u[pg->nu++] = u[i];
            pg->next_key = km = u[i].key;
            pg->next_id = im = u[i].upload_id;
            total++;
        }
        if (i == n && !more)
            return 0; /* the scan is exhausted */
    }
    rv = meta_mpu_list(r->ms, r->bucket, a->prefix, km, im, 1, &r->arena, &u, &n, &more);
    pg->truncated = rv == 0 && n > 0;
    return rv;
}

static void emit_upload(struct mg_buf *x, const struct uploads_args *a,
                        const struct meta_bucket *b, const struct meta_upload *u)
{
    char date[25];
    gw_xml_start(x, "Upload");
    gw_xml_elem_enc(x, "Key", u->key, a->url);
    gw_xml_elem(x, "UploadId", u->upload_id);
    gw__s3_xml_owner(x, "Initiator", u->owner.len ? u->owner : b->owner);
    gw__s3_xml_owner(x, "Owner", u->owner.len ? u->owner : b->owner);
    gw_xml_elem(x, "StorageClass", (struct mg_str){"STANDARD", 8});
    gw_iso8601(u->initiated_ms, date);
    gw_xml_elem(x, "Initiated", (struct mg_str){date, strlen(date)});
    gw_xml_end(x, "Upload");
}

static void emit_uploads(struct gw_request *r, const struct uploads_args *a,
                         const struct meta_bucket *b, const struct uploads_page *pg)
{
    struct mg_buf x;
    size_t i;
    mg_buf_init(&x);
    gw_xml_open(&x, "ListMultipartUploadsResult");
    gw_xml_elem(&x, "Bucket", b->name);
    gw_xml_elem_enc(&x, "KeyMarker", a->key_marker, a->url);
    gw_xml_elem(&x, "UploadIdMarker", a->id_marker);
    if (pg->truncated) {
        gw_xml_elem_enc(&x, "NextKeyMarker", pg->next_key, a->url);
        gw_xml_elem(&x, "NextUploadIdMarker", pg->next_id);
    }
    if (a->prefix.len > 0)
        gw_xml_elem_enc(&x, "Prefix", a->prefix, a->url);
    if (a->delimiter.len > 0)
        gw_xml_elem_enc(&x, "Delimiter", a->delimiter, a->url);
    if (a->url)
        gw_xml_elem(&x, "EncodingType", (struct mg_str){"url", 3});
    gw_xml_elem_u64(&x, "MaxUploads", a->max);
    gw_xml_elem_bool(&x, "IsTruncated", pg->truncated);
    for (i = 0; i < pg->nu; i++)
        emit_upload(&x, a, b, &pg->u[i]);
    for (i = 0; i < pg->ncp; i++) {
        gw_xml_start(&x, "CommonPrefixes");
        gw_xml_elem_enc(&x, "Prefix", pg->cps[i], a->url);
        gw_xml_end(&x, "CommonPrefixes");
    }
    gw_xml_close(&x, "ListMultipartUploadsResult");
    gw__s3_respond_xml(r, &x);
}

static struct mg_str query_or_empty(struct gw_request *r, const char *name)
{
    struct mg_str v;
    return gw_query(r, name, &v) ? v : (struct mg_str){"", 0};
}

void gw__s3_mpu_list_uploads(struct gw_request *r)
{
    struct meta_bucket b;
    struct uploads_args a;
    struct uploads_page pg;
    struct mg_str v;
    int rv;
    memset(&a, 0, sizeof(a));
    memset(&pg, 0, sizeof(pg));
    a.prefix = query_or_empty(r, "prefix");
    a.delimiter = query_or_empty(r, "delimiter");
    a.key_marker = query_or_empty(r, "key-marker");
    a.id_marker = query_or_empty(r, "upload-id-marker");
    a.url = gw_query(r, "encoding-type", &v) && v.len == 3 && memcmp(v.base, "url", 3) == 0;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &b)) != 0 ||
        (rv = query_max(r, "max-uploads", 1000, 1000, &a.max)) != 0 ||
        (a.max > 0 && (rv = collect_uploads(r, &a, &pg)) != 0)) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    emit_uploads(r, &a, &b, &pg);
}
