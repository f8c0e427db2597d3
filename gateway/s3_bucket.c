/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bucket-level S3 operations: ListBuckets, CreateBucket (name rules, canned
 * ACL, re-create by the owner answered 200 as us-east-1 does), HeadBucket,
 * DeleteBucket, GetBucketLocation, bucket tagging, canned ACLs, lifecycle
 * configuration (validated and compiled by lifecycle/ lc_config_parse; meta indexes and
 * enforces it), and the read-only stubs clients probe (versioning, policy,
 * CORS: s3cmd info reads them). Configuration is the owner's alone.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"
#include "lifecycle/lifecycle.h"

void gw__s3_list_buckets(struct gw_request *r)
{
    struct meta_bucket *bs;
    struct mg_buf b;
    size_t n, i;
    char date[25];
    int rv;
    if (r->user == NULL) {
        gw__s3_fail(r, MG_EACCESSDENIED, NULL);
        return;
    }
    rv = meta_bucket_list(r->ms, r->user->name, &r->arena, &bs, &n);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    mg_buf_init(&b);
    gw_xml_open(&b, "ListAllMyBucketsResult");
    gw__s3_xml_owner(&b, "Owner", r->user->name);
    gw_xml_start(&b, "Buckets");
    for (i = 0; i < n; i++) {
        gw_xml_start(&b, "Bucket");
        gw_xml_elem(&b, "Name", bs[i].name);
        gw_iso8601(bs[i].created_ms, date);
        gw_xml_elem(&b, "CreationDate", (struct mg_str){date, strlen(date)});
        gw_xml_end(&b, "Bucket");
    }
    gw_xml_end(&b, "Buckets");
    gw_xml_close(&b, "ListAllMyBucketsResult");
    gw__s3_respond_xml(r, &b);
}

/* Optional CreateBucketConfiguration: the LocationConstraint must name our region (empty and
 * us-east-1 are the default region's spellings). */
static int check_location(struct gw_request *r)
{
    struct mg_str body, loc;
    const char *region = gw_region(r);
    int rv = gw_body_read_all(r, GW_S3_XML_SMALL_MAX, &body);
    if (rv != 0 || body.len == 0)
        return rv;
    rv = gw_xml_parse_location(body, &r->arena, &loc, r->errmsg);
    if (rv != 0)
        return rv;
    if (loc.len == 0 || (loc.len == strlen(region) && memcmp(loc.base, region, loc.len) == 0) ||
        (loc.len == 9 && memcmp(loc.base, "us-east-1", 9) == 0))
        return 0;
    /* S3: InvalidLocationConstraint (400); no row in common/err.h yet. */
    snprintf(r->errmsg, sizeof(r->errmsg),
             "The specified location-constraint is not valid: %.*s (this endpoint serves %s)",
             (int)loc.len, loc.base, region);
    return MG_EINVALIDARGUMENT;
}

/* CreateBucket's answer: Location and 200, or the error. */
static void create_bucket_respond(struct gw_request *r, int rv)
{
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    gw_header_addf(r, "location", "/%.*s", (int)r->bucket.len, r->bucket.base);
    gw__s3_respond_empty(r, 200);
}

static void on_create_bucket_acl_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    (void)arg;
    create_bucket_respond(r, op->status);
}

static void on_create_bucket_done(struct gw_request *r, struct meta_op *op, void *arg)
{
    const enum meta_acl *given_acl = arg;
    if (op->status != MG_EBUCKETOWNED) {
        create_bucket_respond(r, op->status);
        return;
    }
    /* us-east-1 answers 200 to its owner (rclone re-creates before every upload); an explicit
     * ACL is applied as a fresh create would. */
    if (given_acl == NULL) {
        create_bucket_respond(r, 0);
        return;
    }
    struct meta_op *upd = gw__s3_op(r, META_OP_BUCKET_UPDATE, NULL);
    upd->in.mask = META_BUCKET_SET_ACL;
    upd->in.bucket_values.acl = *given_acl;
    gw__s3_submit(r, upd, on_create_bucket_acl_done, NULL);
}

void gw__s3_create_bucket(struct gw_request *r)
{
    struct mg_str v;
    enum meta_acl *acl = mg_arena_alloc(&r->arena, sizeof(*acl));
    int given, rv;
    if (r->user == NULL) {
        gw__s3_fail(r, MG_EACCESSDENIED, NULL);
        return;
    }
    if ((rv = meta_bucket_name_check(r->bucket)) != 0 ||
        (rv = gw__s3_acl_from_headers(r, 0, acl, &given)) != 0 || (rv = check_location(r)) != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    if (gw_header(r, "x-amz-bucket-object-lock-enabled", &v) && v.len == 4 &&
        strncasecmp(v.base, "true", 4) == 0) {
        gw__s3_fail(r, MG_ENOTIMPLEMENTED, "Object Lock is not implemented");
        return;
    }
    struct meta_op *op = gw__s3_op(r, META_OP_BUCKET_CREATE, NULL);
    op->in.owner = r->user->name;
    op->in.acl = *acl;
    gw__s3_submit(r, op, on_create_bucket_done, given ? acl : NULL);
}

void gw__s3_head_bucket(struct gw_request *r)
{
    struct meta_bucket b;
    int rv = gw__s3_bucket_load(r, GW_PERM_READ, &b);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    gw_header_addf(r, "x-amz-bucket-region", "%s", gw_region(r));
    gw__s3_respond_empty(r, 200);
}

void gw__s3_delete_bucket(struct gw_request *r)
{
    struct meta_bucket b;
    int rv = gw__s3_bucket_load(r, GW_PERM_OWNER, &b);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    gw__s3_submit_empty(r, gw__s3_op(r, META_OP_BUCKET_DELETE, &b), 204);
}

void gw__s3_bucket_location(struct gw_request *r)
{
    struct meta_bucket b;
    struct mg_buf x;
    const char *region = gw_region(r);
    int rv = gw__s3_bucket_load(r, GW_PERM_OWNER, &b);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    mg_buf_init(&x);
    /* "Buckets in Region us-east-1 have a LocationConstraint of null" (GetBucketLocation). */
    if (strcmp(region, "us-east-1") == 0) {
        mg_buf_appendf(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
                           "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"/>");
    } else {
        gw_xml_open(&x, "LocationConstraint");
        gw_xml_escape(&x, (struct mg_str){region, strlen(region)});
        gw_xml_close(&x, "LocationConstraint");
    }
    gw__s3_respond_xml(r, &x);
}

/* Tagging{TagSet{Tag...}} for GetBucketTagging and GetObjectTagging. */
void gw__s3_emit_tagging(struct gw_request *r, const struct meta_kv *tags, size_t n)
{
    struct mg_buf x;
    size_t i;
    mg_buf_init(&x);
    gw_xml_open(&x, "Tagging");
    gw_xml_start(&x, "TagSet");
    for (i = 0; i < n; i++) {
        gw_xml_start(&x, "Tag");
        gw_xml_elem(&x, "Key", tags[i].k);
        gw_xml_elem(&x, "Value", tags[i].v);
        gw_xml_end(&x, "Tag");
    }
    gw_xml_end(&x, "TagSet");
    gw_xml_close(&x, "Tagging");
    gw__s3_respond_xml(r, &x);
}

int gw__s3_read_tagging(struct gw_request *r, size_t max, struct meta_kv **tags, size_t *n)
{
    struct mg_str body;
    int rv = gw_body_read_all(r, GW_S3_XML_SMALL_MAX, &body);
    if (rv != 0)
        return rv;
    return gw_xml_parse_tagging(body, max, &r->arena, tags, n, r->errmsg);
}

/* After the checks (rv) of a bucket configuration write: the BUCKET_UPDATE op of the fields in
 * mask, answered with status. */
static void submit_bucket_update(struct gw_request *r, int rv, const struct meta_bucket *b,
                                 unsigned mask, const struct meta_bucket *values, int status)
{
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    struct meta_op *op = gw__s3_op(r, META_OP_BUCKET_UPDATE, b);
    op->in.mask = mask;
    op->in.bucket_values = *values;
    gw__s3_submit_empty(r, op, status);
}

void gw__s3_bucket_tagging(struct gw_request *r)
{
    struct meta_bucket b, upd;
    int rv = gw__s3_bucket_load(r, GW_PERM_OWNER, &b);
    if (rv == 0 && r->op == GW_OP_GET_BUCKET_TAGGING) {
        if (b.ntags == 0)
            gw__s3_fail(r, MG_ENOSUCHTAGSET, NULL);
        else
            gw__s3_emit_tagging(r, b.tags, b.ntags);
        return;
    }
    memset(&upd, 0, sizeof(upd)); /* DeleteBucketTagging: an empty set */
    if (rv == 0 && r->op == GW_OP_PUT_BUCKET_TAGGING)
        rv = gw__s3_read_tagging(r, GW_BUCKET_TAGS_MAX, &upd.tags, &upd.ntags);
    submit_bucket_update(r, rv, &b, META_BUCKET_SET_TAGS, &upd, 204);
}

/* AccessControlPolicy for a canned ACL, as S3 renders each (owner FULL_CONTROL plus the
 * group grants). */
void gw__s3_emit_acl(struct gw_request *r, struct mg_str owner, enum meta_acl acl)
{
    static const char grantee_group[] =
        "<Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:type=\"Group\">";
    struct mg_buf x;
    mg_buf_init(&x);
    gw_xml_open(&x, "AccessControlPolicy");
    gw__s3_xml_owner(&x, "Owner", owner);
    gw_xml_start(&x, "AccessControlList");
    mg_buf_appendf(&x, "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                       "xsi:type=\"CanonicalUser\">");
    gw_xml_elem(&x, "ID", owner);
    gw_xml_elem(&x, "DisplayName", owner);
    mg_buf_appendf(&x, "</Grantee><Permission>FULL_CONTROL</Permission></Grant>");
    if (acl == META_ACL_PUBLIC_READ || acl == META_ACL_PUBLIC_READ_WRITE)
        mg_buf_appendf(&x, "<Grant>%s<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI>"
                           "</Grantee><Permission>READ</Permission></Grant>",
                       grantee_group);
    if (acl == META_ACL_PUBLIC_READ_WRITE)
        mg_buf_appendf(&x, "<Grant>%s<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI>"
                           "</Grantee><Permission>WRITE</Permission></Grant>",
                       grantee_group);
    if (acl == META_ACL_AUTHENTICATED_READ)
        mg_buf_appendf(&x,
                       "<Grant>%s<URI>http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
                       "</URI></Grantee><Permission>READ</Permission></Grant>",
                       grantee_group);
    gw_xml_end(&x, "AccessControlList");
    gw_xml_close(&x, "AccessControlPolicy");
    gw__s3_respond_xml(r, &x);
}

/* PUT ?acl: the x-amz-acl header, or else an AccessControlPolicy body equivalent to a canned
 * ACL. */
int gw__s3_acl_from_request(struct gw_request *r, int object, struct mg_str owner,
                            enum meta_acl *acl)
{
    struct mg_str body;
    int given, rv = gw__s3_acl_from_headers(r, object, acl, &given);
    if (rv != 0 || given)
        return rv;
    rv = gw_body_read_all(r, GW_S3_XML_SMALL_MAX, &body);
    if (rv != 0)
        return rv;
    if (body.len == 0) {
        snprintf(r->errmsg, sizeof(r->errmsg), "PUT ?acl needs x-amz-acl or an "
                                               "AccessControlPolicy body");
        return MG_EMALFORMEDXML;
    }
    return gw_xml_parse_acl(body, owner, &r->arena, acl, r->errmsg);
}

void gw__s3_bucket_acl(struct gw_request *r)
{
    struct meta_bucket b, upd;
    int rv = gw__s3_bucket_load(r, GW_PERM_OWNER, &b);
    if (rv == 0 && r->op == GW_OP_GET_BUCKET_ACL) {
        gw__s3_emit_acl(r, b.owner, b.acl);
        return;
    }
    memset(&upd, 0, sizeof(upd));
    if (rv == 0)
        rv = gw__s3_acl_from_request(r, 0, b.owner, &upd.acl);
    submit_bucket_update(r, rv, &b, META_BUCKET_SET_ACL, &upd, 200);
}

/* GetBucketLifecycleConfiguration renders the stored rules (lc_config_to_xml), so rules PUT
 * without an ID come back with the one they were given, as S3 does. A configuration stored
 * before rules were compiled (lifecycle_bin empty) is returned as it was sent. */
static void lifecycle_get(struct gw_request *r, const struct meta_bucket *b)
{
    struct lc_config cfg;
    struct mg_buf x;
    if (b->lifecycle.len == 0) {
        gw__s3_fail(r, MG_ENOSUCHLIFECYCLE, NULL);
        return;
    }
    if (b->lifecycle_bin.len == 0 ||
        lc_config_load(b->lifecycle_bin.base, b->lifecycle_bin.len, &r->arena, &cfg) != 0) {
        gw_respond(r, 200, "application/xml", b->lifecycle);
        return;
    }
    mg_buf_init(&x);
    lc_config_to_xml(&cfg, &x);
    gw__s3_respond_xml(r, &x);
}

/* PutBucketLifecycleConfiguration: parsed and validated here, once (lc_config_parse; its
 * error code and message become the S3 error and <Message>), and handed to the
 * SET_LIFECYCLE op already compiled, so the meta thread does not parse it again. */
static int lifecycle_compile(struct gw_request *r, struct meta_bucket *upd)
{
    struct mg_str body;
    struct lc_config cfg;
    struct mg_buf bin;
    int rv = gw_body_read_all(r, GW_S3_LIFECYCLE_MAX, &body);
    if (rv != 0)
        return rv;
    if (body.len == 0) {
        snprintf(r->errmsg, sizeof(r->errmsg), "A lifecycle configuration body is required");
        return MG_EMALFORMEDXML;
    }
    r->errmsg[0] = '\0';
    if ((rv = lc_config_parse(body, &r->arena, &cfg, r->errmsg)) != 0)
        return rv;
    mg_buf_init(&bin);
    lc_config_compile(&cfg, &bin);
    upd->lifecycle = body;
    upd->lifecycle_bin = (struct mg_str){mg_arena_dup(&r->arena, bin.base, bin.len), bin.len};
    mg_buf_close(&bin);
    return 0;
}

void gw__s3_bucket_lifecycle(struct gw_request *r)
{
    struct meta_bucket b, upd;
    int rv = gw__s3_bucket_load(r, GW_PERM_OWNER, &b);
    if (rv == 0 && r->op == GW_OP_GET_BUCKET_LIFECYCLE) {
        lifecycle_get(r, &b);
        return;
    }
    memset(&upd, 0, sizeof(upd)); /* DeleteBucketLifecycle: empty configuration */
    if (rv == 0 && r->op == GW_OP_PUT_BUCKET_LIFECYCLE)
        rv = lifecycle_compile(r, &upd);
    submit_bucket_update(r, rv, &b, META_BUCKET_SET_LIFECYCLE, &upd,
                         r->op == GW_OP_PUT_BUCKET_LIFECYCLE ? 200 : 204);
}

void gw__s3_bucket_stub(struct gw_request *r)
{
    struct meta_bucket b;
    struct mg_buf x;
    int rv = gw__s3_bucket_load(r, GW_PERM_OWNER, &b);
    if (rv != 0) {
        gw__s3_fail(r, rv, NULL);
        return;
    }
    switch (r->op) {
    case GW_OP_GET_BUCKET_VERSIONING:
        /* Never-versioned buckets have no Status element (GetBucketVersioning). */
        mg_buf_init(&x);
        gw_xml_open(&x, "VersioningConfiguration");
        gw_xml_close(&x, "VersioningConfiguration");
        gw__s3_respond_xml(r, &x);
        return;
    case GW_OP_GET_BUCKET_POLICY: gw__s3_fail(r, MG_ENOSUCHPOLICY, NULL); return;
    default: gw__s3_fail(r, MG_ENOSUCHCORS, NULL); return;
    }
}
