/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object S3 operations: PutObject (body streamed into the blob store, ETag =
 * hex MD5, checksums stored and echoed, conditional PUT), GetObject and
 * HeadObject (Range, partNumber, conditional headers, response-* overrides,
 * checksum mode), DeleteObject (idempotent), DeleteObjects, CopyObject
 * (COPY/REPLACE directives, copy-source conditions), object tagging and
 * canned ACLs, and GetObjectAttributes. Semantics follow the S3 API
 * reference; where it is silent, Ceph RGW's answers.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"
#include "lifecycle/lifecycle.h"

static int str_ieq(struct mg_str a, const char *lit)
{
    size_t l = strlen(lit);
    return a.len == l && strncasecmp(a.base, lit, l) == 0;
}

/* -------------------------------------------------------- x-amz-expiration */

/* lifecycle.day_seconds of the server (gateway/server.c). Declared here until gateway/gw.h
 * carries it next to gw_inline_max_bytes. */
uint32_t gw_lc_day_seconds(const struct gw_request *r);

/* Loaded configurations, keyed by bucket id and rules generation (every SET_LIFECYCLE bumps
 * it, so a hit is never stale), so HEAD and GET decode a bucket's binary rules once rather
 * than per request. Bounded: LC_CACHE_SLOTS entries, the least recently used one evicted.
 * Shared by every loop under one mutex, held only for the lookup and lc_config_expiry (a walk
 * of the rules, no I/O). The arenas live as long as the process. */
#define LC_CACHE_SLOTS 16

static struct lc_cache_slot {
    uint64_t bucket_id; /* 0: free */
    uint64_t gen;
    uint64_t used;      /* last use (cache clock) */
    struct mg_arena arena;
    struct lc_config cfg;
} lc_cache[LC_CACHE_SLOTS];
static uint64_t lc_cache_clock;
static pthread_mutex_t lc_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot holding b's rules, loading them into the least recently used slot on a miss; NULL
 * when the stored form does not load (MG_ECORRUPT: no header, the store's problem). Called
 * with lc_cache_lock held. */
static struct lc_cache_slot *lc_cache_get(const struct meta_bucket *b)
{
    struct lc_cache_slot *victim = &lc_cache[0];
    for (size_t i = 0; i < LC_CACHE_SLOTS; i++) {
        struct lc_cache_slot *c = &lc_cache[i];
        if (c->bucket_id == b->id && c->gen == b->lc_gen) {
            c->used = ++lc_cache_clock;
            return c;
        }
        if (c->used < victim->used)
            victim = c;
    }
    if (victim->bucket_id != 0)
        mg_arena_close(&victim->arena);
    victim->bucket_id = 0;
    victim->used = 0;
    mg_arena_init(&victim->arena);
    if (lc_config_load(b->lifecycle_bin.base, b->lifecycle_bin.len, &victim->arena,
                       &victim->cfg) != 0) {
        mg_arena_close(&victim->arena);
        mg_log(MG_LOG_WARN, "event=lifecycle_load_failed bucket_id=%llu gen=%llu",
               (unsigned long long)b->id, (unsigned long long)b->lc_gen);
        return NULL;
    }
    victim->bucket_id = b->id;
    victim->gen = b->lc_gen;
    victim->used = ++lc_cache_clock;
    return victim;
}

/* s3.h. "expiry-date=..., rule-id=..." (PutObject, HeadObject; the date is rounded to the next
 * midnight UTC, lifecycle/lifecycle.h lc_expiration_header). */
void gw__s3_expiration_header(struct gw_request *r, const struct meta_bucket *b,
                              const struct meta_object *o, int64_t mtime_ms)
{
    if (b->lifecycle_bin.len == 0)
        return;
    struct lc_tag *tags = mg_arena_alloc(&r->arena, (o->ntags ? o->ntags : 1) * sizeof(*tags));
    for (size_t i = 0; i < o->ntags; i++)
        tags[i] = (struct lc_tag){o->tags[i].k, o->tags[i].v};
    struct lc_object obj = {.key = r->key, .size = o->size, .tags = tags, .ntags = o->ntags,
                            .mtime_ms = mtime_ms};
    struct mg_buf h;
    mg_buf_init(&h);
    pthread_mutex_lock(&lc_cache_lock);
    struct lc_cache_slot *c = lc_cache_get(b);
    const struct lc_rule *rule;
    int64_t due_ms;
    if (c != NULL && lc_config_expiry(&c->cfg, &obj, gw_lc_day_seconds(r), &due_ms, &rule))
        lc_expiration_header(due_ms, rule->id, &h); /* rule->id lives in the slot: copy now */
    pthread_mutex_unlock(&lc_cache_lock);
    if (h.len > 0)
        gw_header_add(r, "x-amz-expiration", (struct mg_str){h.base, h.len});
    mg_buf_close(&h);
}

/* ------------------------------------------------------------------------ PUT */

/* x-amz-checksum-type next to a checksum header sent for o (boto3 >= 1.36 reads it as
 * ChecksumType). */
static void checksum_type_header(struct gw_request *r, const struct meta_object *o,
                                 struct mg_str sent)
{
    if (sent.len == 0 || o->cksum_algo == MG_CKSUM_NONE || o->cksum_algo == MG_CKSUM_MD5)
        return;
    gw_header_add(r, "x-amz-checksum-type", gw__s3_checksum_type(o->cksum_value));
}

/* PutObject in three steps: checks on the loop; the body into the blob store (on a worker
 * unless it stays inline); the OBJECT_PUT op, answered from its done callback. */
struct put_ctx {
    struct gw__s3_body body;
    struct meta_bucket b;
    struct meta_object o;
    struct meta_put_cond cond;
};

static void on_put_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    struct put_ctx *c = arg;
    if (op->status != 0) {
        gw__s3_fail(r, op->status, NULL);
        return;
    }
    gw_header_addf(r, "etag", "\"%.*s\"", (int)c->o.etag.len, c->o.etag.base);
    gw__s3_checksum_header(r, c->o.cksum_algo, c->o.cksum_value);
    checksum_type_header(r, &c->o, c->o.cksum_value);
    gw__s3_expiration_header(r, &c->b, &c->o, op->out.object.mtime_ms);
    gw__s3_respond_empty(r, 200);
}

static void on_put_stored(struct gw_request *r, struct gw__s3_body *body, int rv)
{
    struct put_ctx *c = body->arg;
    struct gw_body_result *res = &body->res;
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    c->o.data = body->data;
    c->o.size = res->size;
    c->o.etag = gw__s3_hex_md5(r, res->md5);
    c->o.cksum_algo = res->cksum_value.len > 0 ? res->cksum_algo : MG_CKSUM_NONE;
    c->o.cksum_value = res->cksum_value;
    struct meta_op *op = gw__s3_op(r, META_OP_OBJECT_PUT, &c->b);
    op->in.object = c->o; /* the op owns o.data from here, on success and failure alike */
    op->in.has_cond = 1;
    op->in.cond = c->cond;
    gw__s3_submit(r, op, on_put_done, c);
}

void gw__s3_put_object(struct gw_request *r)
{
    struct put_ctx *c = mg_arena_alloc(&r->arena, sizeof(*c));
    int rv;
    memset(c, 0, sizeof(*c));
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &c->b)) != 0 ||
        (rv = gw__s3_object_from_headers(r, &c->o)) != 0 ||
        (rv = gw__s3_put_cond(r, &c->cond)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    c->body.res.cksum_algo = MG_CKSUM_NONE;
    c->body.then = on_put_stored;
    c->body.arg = c;
    gw__s3_store_body_async(r, &c->body);
}

/* ------------------------------------------------------------------- GET/HEAD */

/* response-* overrides: only signed requests may use them ("Request specific response headers
 * cannot be used for anonymous GET requests", GetObject), and a value that would split the
 * header (control bytes after percent-decoding) is refused. */
static int check_response_overrides(struct gw_request *r)
{
    static const char *const names[] = {"response-content-type", "response-content-language",
                                        "response-expires", "response-cache-control",
                                        "response-content-disposition",
                                        "response-content-encoding"};
    struct mg_str v;
    size_t i, j;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!gw_query(r, names[i], &v))
            continue;
        if (r->user == NULL) {
            snprintf(r->errmsg, sizeof(r->errmsg), "Request specific response headers cannot "
                                                   "be used for anonymous GET requests.");
            return MG_EINVALIDREQUEST;
        }
        for (j = 0; j < v.len; j++) {
            unsigned char c = (unsigned char)v.base[j];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                snprintf(r->errmsg, sizeof(r->errmsg), "Invalid value for %s", names[i]);
                return MG_EINVALIDARGUMENT;
            }
        }
    }
    return 0;
}

/* What a GET sends: [off, off+len) with status, and which checksum goes with it. */
struct get_plan {
    int status;
    uint64_t off;
    uint64_t len;
    int part;                  /* ?partNumber=, 0 if none */
    struct mg_str cksum_value; /* empty: no checksum header */
};

static int plan_part(struct gw_request *r, const struct meta_object *o, struct get_plan *p)
{
    size_t i;
    if (p->part == 0) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "Part number must be an integer between 1 and 10000, inclusive");
        return MG_EINVALIDARGUMENT;
    }
    if (o->nparts == 0) {
        if (p->part != 1)
            goto not_satisfiable;
        p->len = o->size;
        p->status = o->size > 0 ? 206 : 200;
        p->cksum_value = o->cksum_value;
        return 0;
    }
    if ((size_t)p->part > o->nparts)
        goto not_satisfiable;
    assert(p->part >= 1 && p->off == 0);
    for (i = 0; i + 1 < (size_t)p->part; i++)
        p->off += o->parts[i].size;
    p->len = o->parts[p->part - 1].size;
    if (p->off > o->size || p->len > o->size - p->off)
        return MG_ECORRUPT; /* stored part sizes disagree with the object: disk data, no assert */
    p->status = 206;
    p->cksum_value = o->parts[p->part - 1].checksum;
    return 0;
not_satisfiable:
    return MG_EINVALIDPARTNUMBER;
}

static int plan_get(struct gw_request *r, const struct meta_object *o, struct get_plan *p)
{
    struct mg_str range;
    int has_range = gw_header(r, "range", &range);
    int present, rv;
    memset(p, 0, sizeof(*p));
    p->status = 200;
    p->len = o->size;
    p->cksum_value = o->cksum_value;
    p->part = (int)gw__s3_query_u32(r, "partNumber", META_PART_MAX, &present);
    if (present) {
        if (has_range) {
            snprintf(r->errmsg, sizeof(r->errmsg),
                     "Cannot specify both Range header and partNumber query parameter");
            return MG_EINVALIDREQUEST;
        }
        return plan_part(r, o, p);
    }
    if (!has_range)
        return 0;
    rv = gw_range_parse(range, o->size, &p->off, &p->len);
    if (rv == MG_EINVALIDRANGE) {
        gw_header_addf(r, "content-range", "bytes */%llu", (unsigned long long)o->size);
        return rv;
    }
    if (rv == 1) {
        p->status = 206;
        p->cksum_value = (struct mg_str){"", 0}; /* S3 sends checksums for whole objects */
    }
    return 0;
}

void gw__s3_get_object(struct gw_request *r)
{
    struct meta_bucket b;
    struct meta_object o;
    struct gw_cond cond;
    struct get_plan plan;
    struct mg_str v;
    char date[30];
    /* A GET streams o.data: pin its blobs so an overwrite or delete meanwhile cannot free them
     * under the reader (meta.h, reader pins). HEAD reads nothing. */
    int pin = r->op == GW_OP_GET_OBJECT;
    int rv = pin ? gw__s3_object_load_pinned(r, r->bucket, r->key, &b, &o)
                 : gw__s3_object_load(r, r->bucket, r->key, &b, &o);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    if ((rv = check_response_overrides(r)) != 0)
        goto fail;
    gw__s3_cond_read(r, "if-", &cond);
    if ((rv = gw_cond_eval(&cond, o.etag, o.mtime_ms)) != 0) {
        if (rv == MG_ENOTMODIFIED) { /* a 304 still names the representation */
            gw_http_date(o.mtime_ms, date);
            gw_header_add(r, "last-modified", (struct mg_str){date, strlen(date)});
            gw_header_addf(r, "etag", "\"%.*s\"", (int)o.etag.len, o.etag.base);
        }
        goto fail;
    }
    if ((rv = plan_get(r, &o, &plan)) != 0)
        goto fail;
    gw__s3_object_headers(r, &o);
    gw__s3_expiration_header(r, &b, &o, o.mtime_ms);
    if (plan.status == 206 && plan.len > 0)
        gw_header_addf(r, "content-range", "bytes %llu-%llu/%llu",
                       (unsigned long long)plan.off,
                       (unsigned long long)(plan.off + plan.len - 1), (unsigned long long)o.size);
    if (plan.part > 0 && o.nparts > 0)
        gw_header_addf(r, "x-amz-mp-parts-count", "%zu", o.nparts);
    if (gw_header(r, "x-amz-checksum-mode", &v) && str_ieq(v, "ENABLED")) {
        gw__s3_checksum_header(r, o.cksum_algo, plan.cksum_value);
        checksum_type_header(r, &o, plan.cksum_value);
    }
    gw_respond_data(r, plan.status, &o.data, plan.off, plan.len, pin);
    return;
fail:
    if (pin)
        meta_data_unpin(r->ms, &o.data);
    gw__s3_fail(r, rv, NULL);
}

/* --------------------------------------------------------------------- DELETE */

void gw__s3_delete_object(struct gw_request *r)
{
    struct meta_bucket b;
    int rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &b);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    gw__s3_submit_empty(r, gw__s3_op(r, META_OP_OBJECT_DELETE, &b), 204);
}

/* DeleteResult for every requested key: rv_many is the one write set's result for the keys
 * meta could take; impossible keys get their own Error entry. */
static void respond_delete_result(struct gw_request *r, const struct gw_delete_req *req,
                                  int rv_many)
{
    struct mg_buf x;
    size_t i;
    int rv;
    mg_buf_init(&x);
    gw_xml_open(&x, "DeleteResult");
    for (i = 0; i < req->nkeys; i++) {
        if (req->keys[i].len > META_KEY_MAX)
            rv = MG_EKEYTOOLONG;
        else if (req->keys[i].len == 0)
            rv = MG_EINVALIDARGUMENT;
        else
            rv = rv_many;
        if (rv == 0) {
            if (req->quiet)
                continue;
            gw_xml_start(&x, "Deleted");
            gw_xml_elem(&x, "Key", req->keys[i]);
            gw_xml_end(&x, "Deleted");
            continue;
        }
        gw_xml_start(&x, "Error");
        gw_xml_elem(&x, "Key", req->keys[i]);
        gw_xml_elem_cstr(&x, "Code", mg_err_s3code(rv));
        gw_xml_elem_cstr(&x, "Message", mg_err_message(rv));
        gw_xml_end(&x, "Error");
    }
    gw_xml_close(&x, "DeleteResult");
    gw__s3_respond_xml(r, &x);
}

static void on_delete_many_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    const struct gw_delete_req *req = arg;
    if (op->status != 0)
        mg_log(MG_LOG_WARN, "event=delete_objects_failed req=%s keys=%zu err=%s", r->request_id,
               op->in.nkeys, mg_err_name(op->status));
    respond_delete_result(r, req, op->status);
}

void gw__s3_delete_objects(struct gw_request *r)
{
    struct meta_bucket b;
    struct gw_delete_req *req = mg_arena_alloc(&r->arena, sizeof(*req));
    struct mg_str body;
    size_t i;
    int rv;
    /* The XML (<= 8 MiB, 1,000 keys) is parsed on the loop: CPU only, about a millisecond. */
    if ((rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &b)) != 0 ||
        (rv = gw_body_read_all(r, GW_S3_XML_LARGE_MAX, &body)) != 0 ||
        (rv = gw_xml_parse_delete(body, &r->arena, req, r->errmsg)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    /* One write set for every valid key (one op, one Raft entry: 1,000 keys cost one commit
     * instead of 1,000). */
    struct mg_str *valid = mg_arena_alloc(&r->arena, (req->nkeys + 1) * sizeof(*valid));
    size_t nvalid = 0;
    for (i = 0; i < req->nkeys; i++)
        if (req->keys[i].len > 0 && req->keys[i].len <= META_KEY_MAX)
            valid[nvalid++] = req->keys[i];
    if (nvalid == 0) {
        respond_delete_result(r, req, 0);
        return;
    }
    struct meta_op *op = gw__s3_op(r, META_OP_OBJECT_DELETE_MANY, &b);
    op->in.keys = valid;
    op->in.nkeys = nvalid;
    gw__s3_submit(r, op, on_delete_many_done, req);
}

/* ----------------------------------------------------------------------- COPY */

/* x-amz-{metadata,tagging}-directive: 0 COPY (default), 1 REPLACE, -1 invalid. */
static int directive(struct gw_request *r, const char *header)
{
    struct mg_str v;
    if (!gw_header(r, header, &v) || str_ieq(v, "COPY"))
        return 0;
    return str_ieq(v, "REPLACE") ? 1 : -1;
}

static int copy_dest(struct gw_request *r, const struct meta_object *src, int self,
                     struct meta_object *dst)
{
    int meta_dir = directive(r, "x-amz-metadata-directive");
    int tag_dir = directive(r, "x-amz-tagging-directive");
    int rv;
    if (meta_dir < 0 || tag_dir < 0) {
        snprintf(r->errmsg, sizeof(r->errmsg), "Unknown %s directive.",
                 meta_dir < 0 ? "metadata" : "tagging");
        return MG_EINVALIDARGUMENT;
    }
    if (self && meta_dir == 0) {
        snprintf(r->errmsg, sizeof(r->errmsg),
                 "This copy request is illegal because it is trying to copy an object to itself "
                 "without changing the object's metadata, storage class, website redirect "
                 "location or encryption attributes.");
        return MG_EINVALIDREQUEST;
    }
    if ((rv = gw__s3_object_from_headers(r, dst)) != 0)
        return rv;
    if (meta_dir == 0) {
        dst->content_type = src->content_type;
        dst->content_encoding = src->content_encoding;
        dst->cache_control = src->cache_control;
        dst->content_disposition = src->content_disposition;
        dst->content_language = src->content_language;
        dst->expires = src->expires;
        dst->user_meta = src->user_meta;
        dst->nuser_meta = src->nuser_meta;
    }
    if (tag_dir == 0) {
        dst->tags = src->tags;
        dst->ntags = src->ntags;
    }
    return 0;
}

/* CopyObject: checks on the loop, then meta_object_copy (bulk data I/O and a blocking commit)
 * on a worker. */
struct copy_ctx {
    struct mg_str sbucket, skey;
    struct meta_bucket b; /* the destination's: its lifecycle rules name x-amz-expiration */
    struct meta_object dst, out;
};

static int on_copy_work(struct gw_request *r, void *arg)
{
    struct copy_ctx *c = arg;
    return meta_object_copy(r->ms, c->sbucket, c->skey, r->bucket, &c->dst, &r->arena, &c->out);
}

static void on_copy_after(struct gw_request *r, void *arg, int rv)
{
    struct copy_ctx *c = arg;
    if (r == NULL)
        return; /* the copy committed or failed in meta: nothing of ours to release */
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    /* The copy is a new object: the rules see its key, tags and size at its mtime. */
    c->dst.size = c->out.size;
    gw__s3_expiration_header(r, &c->b, &c->dst, c->out.mtime_ms);
    gw__s3_respond_copy(r, "CopyObjectResult", c->out.mtime_ms, c->out.etag, c->out.cksum_algo,
                        c->out.cksum_value);
}

void gw__s3_copy_object(struct gw_request *r)
{
    struct meta_bucket sb;
    struct meta_object src;
    struct copy_ctx *c = mg_arena_alloc(&r->arena, sizeof(*c));
    int rv;
    memset(c, 0, sizeof(*c));
    if ((rv = gw__s3_copy_source(r, &c->sbucket, &c->skey)) != 0 ||
        (rv = gw__s3_bucket_load(r, GW_PERM_WRITE, &c->b)) != 0 ||
        (rv = gw__s3_object_load(r, c->sbucket, c->skey, &sb, &src)) != 0 ||
        (rv = gw__s3_copy_source_cond(r, &src)) != 0)
        goto fail;
    int self = gw__s3_str_eq(c->sbucket, r->bucket) && gw__s3_str_eq(c->skey, r->key);
    if ((rv = copy_dest(r, &src, self, &c->dst)) != 0)
        goto fail;
    if ((rv = gw_work_queue(r, on_copy_work, on_copy_after, c, 1)) != 0)
        goto fail;
    return;
fail:
    gw__s3_fail(r, rv, NULL);
}

/* ---------------------------------------------------------------- tagging, ACL */

void gw__s3_object_tagging(struct gw_request *r)
{
    struct meta_bucket b;
    struct meta_object o, upd;
    int rv = gw__s3_object_load(r, r->bucket, r->key, &b, &o);
    /* No canned ACL grants s3:{Get,Put,Delete}ObjectTagging (S3 User Guide, "Mapping of ACL
     * permissions and access policy permissions"): the bucket owner and the object owner only.
     * A public-read object's READ or a public-read-write bucket's WRITE is not enough. */
    if (rv == 0 && !gw__s3_is_owner(r, b.owner) && !gw__s3_is_owner(r, o.owner))
        rv = MG_EACCESSDENIED;
    if (rv == 0 && r->op == GW_OP_GET_OBJECT_TAGGING) {
        gw__s3_emit_tagging(r, o.tags, o.ntags);
        return;
    }
    memset(&upd, 0, sizeof(upd)); /* DeleteObjectTagging: an empty set */
    if (rv == 0 && r->op == GW_OP_PUT_OBJECT_TAGGING)
        rv = gw__s3_read_tagging(r, GW_OBJECT_TAGS_MAX, &upd.tags, &upd.ntags);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    struct meta_op *op = gw__s3_op(r, META_OP_OBJECT_UPDATE, &b);
    op->in.mask = META_OBJECT_SET_TAGS;
    op->in.object = upd;
    gw__s3_submit_empty(r, op, r->op == GW_OP_PUT_OBJECT_TAGGING ? 200 : 204);
}

void gw__s3_object_acl(struct gw_request *r)
{
    struct meta_bucket b;
    struct meta_object o, upd;
    struct mg_str owner = {"", 0};
    int rv = gw__s3_object_load(r, r->bucket, r->key, &b, &o);
    /* READ_ACP / WRITE_ACP: the bucket owner and the object owner. */
    if (rv == 0 && !gw__s3_is_owner(r, b.owner) && !gw__s3_is_owner(r, o.owner))
        rv = MG_EACCESSDENIED;
    if (rv == 0)
        owner = o.owner.len > 0 ? o.owner : b.owner;
    if (rv == 0 && r->op == GW_OP_GET_OBJECT_ACL) {
        gw__s3_emit_acl(r, owner, o.acl);
        return;
    }
    memset(&upd, 0, sizeof(upd));
    if (rv == 0)
        rv = gw__s3_acl_from_request(r, 1, owner, &upd.acl);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    struct meta_op *op = gw__s3_op(r, META_OP_OBJECT_UPDATE, &b);
    op->in.mask = META_OBJECT_SET_ACL;
    op->in.object = upd;
    gw__s3_submit_empty(r, op, 200);
}

/* -------------------------------------------------------- GetObjectAttributes */

enum {
    ATTR_ETAG = 1,
    ATTR_CHECKSUM = 2,
    ATTR_PARTS = 4,
    ATTR_STORAGE = 8,
    ATTR_SIZE = 16,
};

static int parse_attributes(struct gw_request *r, unsigned *mask)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"ETag", ATTR_ETAG},
                 {"Checksum", ATTR_CHECKSUM},
                 {"ObjectParts", ATTR_PARTS},
                 {"StorageClass", ATTR_STORAGE},
                 {"ObjectSize", ATTR_SIZE}};
    struct mg_str v;
    size_t i, j, start = 0;
    *mask = 0;
    if (!gw_header(r, "x-amz-object-attributes", &v) || v.len == 0)
        goto invalid;
    for (i = 0; i <= v.len; i++) {
        struct mg_str t;
        if (i < v.len && v.base[i] != ',')
            continue;
        t = (struct mg_str){v.base + start, i - start};
        start = i + 1;
        while (t.len > 0 && t.base[0] == ' ')
            t.base++, t.len--;
        while (t.len > 0 && t.base[t.len - 1] == ' ')
            t.len--;
        for (j = 0; j < sizeof(names) / sizeof(names[0]); j++)
            if (t.len == strlen(names[j].name) && memcmp(t.base, names[j].name, t.len) == 0)
                break;
        if (j == sizeof(names) / sizeof(names[0]))
            goto invalid;
        *mask |= names[j].bit;
    }
    return 0;
invalid:
    snprintf(r->errmsg, sizeof(r->errmsg), "Invalid attribute name specified.");
    return MG_EINVALIDARGUMENT;
}

static void emit_object_parts(struct gw_request *r, const struct meta_object *o,
                              struct mg_buf *x)
{
    struct mg_str v;
    uint32_t max = 1000, marker = 0;
    size_t i, shown = 0, last = 0;
    if (gw_header(r, "x-amz-max-parts", &v))
        (void)gw_parse_max(v, 1, 1000, 1000, &max);
    if (gw_header(r, "x-amz-part-number-marker", &v))
        (void)gw_parse_max(v, 1, 0, META_PART_MAX, &marker);
    gw_xml_start(x, "ObjectParts");
    gw_xml_elem_u64(x, "PartsCount", o->nparts); /* TotalPartsCount on the wire */
    gw_xml_elem_u64(x, "PartNumberMarker", marker);
    gw_xml_elem_u64(x, "MaxParts", max);
    for (i = 0; i < o->nparts; i++) {
        if (o->parts[i].number <= marker)
            continue;
        if (shown == max)
            break;
        gw_xml_start(x, "Part");
        gw__s3_checksum_elem(x, o->cksum_algo, o->parts[i].checksum);
        gw_xml_elem_u64(x, "PartNumber", o->parts[i].number);
        gw_xml_elem_u64(x, "Size", o->parts[i].size);
        gw_xml_end(x, "Part");
        last = o->parts[i].number;
        shown++;
    }
    gw_xml_elem_bool(x, "IsTruncated", i < o->nparts);
    if (i < o->nparts)
        gw_xml_elem_u64(x, "NextPartNumberMarker", last);
    gw_xml_end(x, "ObjectParts");
}

void gw__s3_object_attributes(struct gw_request *r)
{
    struct meta_bucket b;
    struct meta_object o;
    struct mg_buf x;
    char date[30];
    unsigned mask;
    int rv;
    if ((rv = gw__s3_object_load(r, r->bucket, r->key, &b, &o)) != 0 ||
        (rv = parse_attributes(r, &mask)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    gw_http_date(o.mtime_ms, date);
    gw_header_add(r, "last-modified", (struct mg_str){date, strlen(date)});
    mg_buf_init(&x);
    gw_xml_open(&x, "GetObjectAttributesResponse");
    if (mask & ATTR_ETAG)
        gw_xml_elem(&x, "ETag", o.etag); /* unquoted here, as S3 sends it */
    if ((mask & ATTR_CHECKSUM) && o.cksum_algo != MG_CKSUM_NONE && o.cksum_value.len > 0) {
        gw_xml_start(&x, "Checksum");
        gw__s3_checksum_elem(&x, o.cksum_algo, o.cksum_value);
        gw_xml_elem(&x, "ChecksumType", gw__s3_checksum_type(o.cksum_value));
        gw_xml_end(&x, "Checksum");
    }
    if ((mask & ATTR_PARTS) && o.nparts > 0)
        emit_object_parts(r, &o, &x);
    if (mask & ATTR_STORAGE)
        gw_xml_elem(&x, "StorageClass", (struct mg_str){"STANDARD", 8});
    if (mask & ATTR_SIZE)
        gw_xml_elem_u64(&x, "ObjectSize", o.size);
    gw_xml_close(&x, "GetObjectAttributesResponse");
    gw__s3_respond_xml(r, &x);
}
