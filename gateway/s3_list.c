/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ListObjects (V1) and ListObjectsV2 over meta_object_list: prefix, any
 * delimiter, max-keys (default and cap 1000), start-after, opaque
 * continuation tokens (base64 of the next marker), marker/NextMarker (V1
 * sends NextMarker only with a delimiter, as S3 does), encoding-type=url and
 * fetch-owner. A marker that is itself a common prefix resumes after every key
 * under it (meta_object_list seeks past it), so a page boundary never repeats
 * a CommonPrefixes entry.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"

struct list_args {
    int v2;
    int url;         /* encoding-type=url */
    int fetch_owner; /* V2 fetch-owner=true; V1 always lists owners */
    uint32_t max_keys;
    struct mg_str prefix;
    struct mg_str delimiter;
    struct mg_str marker;      /* V1 marker */
    struct mg_str start_after; /* V2 start-after */
    struct mg_str token;       /* V2 continuation-token as sent */
    int has_token;
};

static struct mg_str query_or_empty(struct gw_request *r, const char *name)
{
    struct mg_str v;
    return gw_query(r, name, &v) ? v : (struct mg_str){"", 0};
}

static int read_args(struct gw_request *r, struct list_args *a)
{
    struct mg_str v;
    int rv;
    memset(a, 0, sizeof(*a));
    a->v2 = r->op == GW_OP_LIST_OBJECTS_V2;
    a->prefix = query_or_empty(r, "prefix");
    a->delimiter = query_or_empty(r, "delimiter");
    if (gw_query(r, "encoding-type", &v)) {
        if (!(v.len == 3 && memcmp(v.base, "url", 3) == 0)) {
            snprintf(r->errmsg, sizeof(r->errmsg), "Invalid Encoding Method specified in "
                                                   "Request");
            return MG_EINVALIDARGUMENT;
        }
        a->url = 1;
    }
    rv = gw_parse_max(query_or_empty(r, "max-keys"), gw_query(r, "max-keys", &v), 1000, 1000,
                      &a->max_keys);
    if (rv != 0) {
        snprintf(r->errmsg, sizeof(r->errmsg), "Provided max-keys not an integer or within "
                                               "integer range");
        return rv;
    }
    if (!a->v2) {
        a->marker = query_or_empty(r, "marker");
        a->fetch_owner = 1;
        return 0;
    }
    a->fetch_owner = gw_query(r, "fetch-owner", &v) && v.len == 4 && memcmp(v.base, "true", 4) == 0;
    a->start_after = query_or_empty(r, "start-after");
    a->has_token = gw_query(r, "continuation-token", &a->token);
    return 0;
}

static void emit_contents(const struct list_args *a, const struct meta_bucket *b,
                          const struct meta_object *o, struct mg_buf *x)
{
    char date[25];
    gw_xml_start(x, "Contents");
    gw_xml_elem_enc(x, "Key", o->key, a->url);
    gw_iso8601(o->mtime_ms, date);
    gw_xml_elem(x, "LastModified", (struct mg_str){date, strlen(date)});
    gw_xml_elem_etag(x, "ETag", o->etag);
    if (o->cksum_algo != MG_CKSUM_NONE && o->cksum_algo != MG_CKSUM_MD5)
        gw_xml_elem_cstr(x, "ChecksumAlgorithm", mg_cksum_algo_name(o->cksum_algo));
    gw_xml_elem_u64(x, "Size", o->size);
    if (a->fetch_owner)
        gw__s3_xml_owner(x, "Owner", o->owner.len > 0 ? o->owner : b->owner);
    gw_xml_elem(x, "StorageClass", (struct mg_str){"STANDARD", 8});
    gw_xml_end(x, "Contents");
}

static void emit_result(struct gw_request *r, const struct list_args *a,
                        const struct meta_bucket *b, const struct meta_list_result *res)
{
    struct mg_buf x;
    struct mg_str tok;
    size_t i;
    assert(res->nobjects + res->nprefixes <= a->max_keys);
    mg_buf_init(&x);
    gw_xml_open(&x, "ListBucketResult");
    gw_xml_elem(&x, "Name", b->name);
    gw_xml_elem_enc(&x, "Prefix", a->prefix, a->url);
    if (!a->v2) {
        gw_xml_elem_enc(&x, "Marker", a->marker, a->url);
        /* "This element is returned only if you have the delimiter request parameter
         * specified" (ListObjects, NextMarker). */
        if (res->truncated && a->delimiter.len > 0)
            gw_xml_elem_enc(&x, "NextMarker", res->next_marker, a->url);
    }
    if (a->delimiter.len > 0)
        gw_xml_elem_enc(&x, "Delimiter", a->delimiter, a->url);
    gw_xml_elem_u64(&x, "MaxKeys", a->max_keys);
    if (a->url)
        gw_xml_elem(&x, "EncodingType", (struct mg_str){"url", 3});
    if (a->v2) {
        gw_xml_elem_u64(&x, "KeyCount", res->nobjects + res->nprefixes);
        if (a->has_token)
            gw_xml_elem(&x, "ContinuationToken", a->token);
        if (res->truncated) {
            gw_token_encode(res->next_marker, &r->arena, &tok);
            gw_xml_elem(&x, "NextContinuationToken", tok);
        }
        if (a->start_after.len > 0)
            gw_xml_elem_enc(&x, "StartAfter", a->start_after, a->url);
    }
    gw_xml_elem_bool(&x, "IsTruncated", res->truncated);
    for (i = 0; i < res->nobjects; i++)
        emit_contents(a, b, &res->objects[i], &x);
    for (i = 0; i < res->nprefixes; i++) {
        gw_xml_start(&x, "CommonPrefixes");
        gw_xml_elem_enc(&x, "Prefix", res->prefixes[i], a->url);
        gw_xml_end(&x, "CommonPrefixes");
    }
    gw_xml_close(&x, "ListBucketResult");
    gw__s3_respond_xml(r, &x);
}

void gw__s3_list_objects(struct gw_request *r)
{
    struct meta_bucket b;
    struct list_args a;
    struct meta_list_req req;
    struct meta_list_result res;
    struct mg_str marker;
    int rv;
    if ((rv = gw__s3_bucket_load(r, GW_PERM_READ, &b)) != 0 || (rv = read_args(r, &a)) != 0)
        goto fail;
    /* With a continuation token, start-after is already behind us (the paginators resend
     * both): the token decides where to resume. */
    marker = a.v2 ? a.start_after : a.marker;
    if (a.has_token && (rv = gw_token_decode(a.token, &r->arena, &marker)) != 0) {
        snprintf(r->errmsg, sizeof(r->errmsg), "The continuation token provided is incorrect");
        goto fail;
    }
    memset(&res, 0, sizeof(res));
    if (a.max_keys > 0) {
        memset(&req, 0, sizeof(req));
        req.prefix = a.prefix;
        req.delimiter = a.delimiter;
        req.start_after = marker; /* meta seeks past it when it is a common prefix */
        req.max_keys = a.max_keys;
        if ((rv = meta_object_list(r->ms, r->bucket, &req, &r->arena, &res)) != 0)
            goto fail;
    }
    emit_result(r, &a, &b, &res);
    return;
fail:
    gw__s3_fail(r, rv, NULL);
}
