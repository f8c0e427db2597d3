/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Request routing: turns (method, Host, request-target, x-amz-copy-source)
 * into an S3 operation, a bucket and a decoded key. Path style always;
 * virtual-host style when a domain is configured and Host is
 * <bucket>.<domain>[:port] (the JS SDK's default). Sub-resources select the
 * operation as the S3 API reference lists them per method ("GET /b?tagging"
 * is GetBucketTagging, "PUT /b/k?partNumber&uploadId" is UploadPart, ...);
 * clients write the same request-target differently (`/b?lifecycle`,
 * `/b/?lifecycle=`, `x-id=PutObject`), so a sub-resource is matched by name
 * whatever its value and a trailing '/' after the bucket is ignored.
 * Known sub-resources we do not serve answer NotImplemented, never a wrong
 * operation. Also the request accessors of gw.h (headers, query, region).
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "gateway"
#include "gateway/core.h"

static const char *const op_labels[] = {
#define GW__OP_LABEL(n, label) label,
    GW_OP_TABLE(GW__OP_LABEL)
#undef GW__OP_LABEL
};

const char *gw_op_label(enum gw_op op)
{
    if ((unsigned)op >= GW_OP__COUNT)
        return "Unknown";
    return op_labels[op];
}

/* Percent-decode s into the arena. plus_is_space for query components. Returns 0, or -1 on a
 * bad escape (strict) — query components are decoded leniently (bad escapes kept). */
static int pct_decode(struct mg_arena *a, struct mg_str s, int plus_is_space, int strict,
                      struct mg_str *out)
{
    if (memchr(s.base, '%', s.len) == NULL &&
        (!plus_is_space || memchr(s.base, '+', s.len) == NULL)) {
        *out = s;
        return 0;
    }
    char *d = mg_arena_alloc(a, s.len + 1);
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.base[i];
        if (c == '%') {
            int hi = -1, lo = -1;
            if (i + 2 < s.len) {
                hi = mg_hex_value(s.base[i + 1]);
                lo = mg_hex_value(s.base[i + 2]);
            }
            if (hi < 0 || lo < 0) {
                if (strict)
                    return -1;
                d[n++] = c;
                continue;
            }
            d[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            d[n++] = ' ';
        } else {
            d[n++] = c;
        }
    }
    d[n] = '\0';
    out->base = d;
    out->len = n;
    return 0;
}

/* 1 if s is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF). AWS answers a key that is not 400 InvalidURI (tests/conformance/report.md M8);
 * accepting one would put bytes into listings that no UTF-8 XML document may hold. */
static int utf8_valid(struct mg_str s)
{
    const unsigned char *p = (const unsigned char *)s.base;
    size_t i = 0;
    while (i < s.len) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
        if (n == 0 || i + n >= s.len)
            return 0;
        unsigned lo = 0x80, hi = 0xbf; /* bounds of the second byte (Table 3-7 of Unicode) */
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
        else if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
        for (size_t k = 1; k <= n; k++) {
            unsigned b = p[i + k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf))
                return 0;
        }
        i += n + 1;
    }
    return 1;
}

static int str_eq(struct mg_str s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.base, lit, n) == 0;
}

int gw__qparam_get(const struct gw__qparam *p, size_t n, const char *name, struct mg_str *out)
{
    for (size_t i = 0; i < n; i++) {
        if (str_eq(p[i].name, name)) {
            if (out != NULL)
                *out = p[i].value;
            return 1;
        }
    }
    return 0;
}

/* Query parameters are bounded by the request line h2o accepts; count '&' first so one
 * allocation holds them all. */
static void parse_query(struct mg_arena *a, struct mg_str q, struct gw__route_out *out)
{
    out->params = NULL;
    out->nparams = 0;
    if (q.len == 0)
        return;
    size_t cap = 1;
    for (size_t i = 0; i < q.len; i++)
        cap += q.base[i] == '&';
    out->params = mg_arena_alloc(a, cap * sizeof(*out->params));
    size_t start = 0;
    while (start <= q.len) {
        const char *amp = memchr(q.base + start, '&', q.len - start);
        size_t end = amp != NULL ? (size_t)(amp - q.base) : q.len;
        if (end > start) {
            struct mg_str item = {q.base + start, end - start};
            const char *eq = memchr(item.base, '=', item.len);
            struct mg_str name = item, value = {"", 0};
            if (eq != NULL) {
                name.len = (size_t)(eq - item.base);
                value.base = eq + 1;
                value.len = item.len - name.len - 1;
            }
            struct gw__qparam *p = &out->params[out->nparams++];
            /* Names stay as sent: SigV2 signs only the sub-resources it finds by their raw
             * name, so a decoded "%74agging" would turn a presigned GET into GetObjectTagging
             * (or add response-* overrides) without touching the signature. S3 clients never
             * escape these names (they are unreserved characters). */
            p->name = name;
            pct_decode(a, value, 1, 0, &p->value);
        }
        start = end + 1;
    }
}

/* Sub-resources and the parameters that select operations. */
enum {
    Q_LOCATION = 1u << 0,
    Q_TAGGING = 1u << 1,
    Q_ACL = 1u << 2,
    Q_LIFECYCLE = 1u << 3,
    Q_VERSIONING = 1u << 4,
    Q_POLICY = 1u << 5,
    Q_CORS = 1u << 6,
    Q_UPLOADS = 1u << 7,
    Q_UPLOADID = 1u << 8,
    Q_PARTNUMBER = 1u << 9,
    Q_DELETE = 1u << 10,
    Q_ATTRIBUTES = 1u << 11,
    Q_LISTV2 = 1u << 12,
    Q_UNSUPPORTED = 1u << 13,
};

#define Q(lit, flag)                                                                               \
    {                                                                                              \
        lit, sizeof(lit) - 1, flag                                                                 \
    }
static const struct {
    const char *name;
    size_t len;
    unsigned flag;
} qnames[] = {
    Q("location", Q_LOCATION),
    Q("tagging", Q_TAGGING),
    Q("acl", Q_ACL),
    Q("lifecycle", Q_LIFECYCLE),
    Q("versioning", Q_VERSIONING),
    Q("policy", Q_POLICY),
    Q("cors", Q_CORS),
    Q("uploads", Q_UPLOADS),
    Q("uploadId", Q_UPLOADID),
    Q("partNumber", Q_PARTNUMBER),
    Q("delete", Q_DELETE),
    Q("attributes", Q_ATTRIBUTES),
    /* Known S3 sub-resources we do not implement (S3 API reference, "Actions"). */
    Q("accelerate", Q_UNSUPPORTED),
    Q("analytics", Q_UNSUPPORTED),
    Q("encryption", Q_UNSUPPORTED),
    Q("intelligent-tiering", Q_UNSUPPORTED),
    Q("inventory", Q_UNSUPPORTED),
    Q("legal-hold", Q_UNSUPPORTED),
    Q("logging", Q_UNSUPPORTED),
    Q("metrics", Q_UNSUPPORTED),
    Q("notification", Q_UNSUPPORTED),
    Q("object-lock", Q_UNSUPPORTED),
    Q("ownershipControls", Q_UNSUPPORTED),
    Q("policyStatus", Q_UNSUPPORTED),
    Q("publicAccessBlock", Q_UNSUPPORTED),
    Q("replication", Q_UNSUPPORTED),
    Q("requestPayment", Q_UNSUPPORTED),
    Q("restore", Q_UNSUPPORTED),
    Q("retention", Q_UNSUPPORTED),
    Q("select", Q_UNSUPPORTED),
    Q("torrent", Q_UNSUPPORTED),
    Q("versions", Q_UNSUPPORTED),
    Q("website", Q_UNSUPPORTED),
};
#undef Q

static unsigned query_flags(const struct gw__route_out *out)
{
    unsigned f = 0;
    for (size_t i = 0; i < out->nparams; i++) {
        const struct gw__qparam *p = &out->params[i];
        if (str_eq(p->name, "list-type")) {
            if (str_eq(p->value, "2"))
                f |= Q_LISTV2;
            continue;
        }
        for (size_t j = 0; j < sizeof(qnames) / sizeof(qnames[0]); j++) {
            if (p->name.len == qnames[j].len &&
                memcmp(p->name.base, qnames[j].name, qnames[j].len) == 0) {
                f |= qnames[j].flag;
                break;
            }
        }
    }
    return f;
}

enum { M_GET, M_HEAD, M_PUT, M_POST, M_DELETE, M_OTHER };

static int method_of(struct mg_str m)
{
    if (str_eq(m, "GET"))
        return M_GET;
    if (str_eq(m, "HEAD"))
        return M_HEAD;
    if (str_eq(m, "PUT"))
        return M_PUT;
    if (str_eq(m, "POST"))
        return M_POST;
    if (str_eq(m, "DELETE"))
        return M_DELETE;
    return M_OTHER;
}

static int route_bucket(int m, unsigned f, enum gw_op *op)
{
    if (m == M_HEAD) {
        *op = GW_OP_HEAD_BUCKET;
        return 0;
    }
    if (m == M_GET) {
        *op = f & Q_LOCATION     ? GW_OP_GET_BUCKET_LOCATION
              : f & Q_TAGGING    ? GW_OP_GET_BUCKET_TAGGING
              : f & Q_ACL        ? GW_OP_GET_BUCKET_ACL
              : f & Q_LIFECYCLE  ? GW_OP_GET_BUCKET_LIFECYCLE
              : f & Q_VERSIONING ? GW_OP_GET_BUCKET_VERSIONING
              : f & Q_POLICY     ? GW_OP_GET_BUCKET_POLICY
              : f & Q_CORS       ? GW_OP_GET_BUCKET_CORS
              : f & Q_UPLOADS    ? GW_OP_LIST_MULTIPART_UPLOADS
              : f & Q_LISTV2     ? GW_OP_LIST_OBJECTS_V2
                                 : GW_OP_LIST_OBJECTS;
        if (*op == GW_OP_LIST_OBJECTS && (f & Q_UNSUPPORTED))
            return MG_ENOTIMPLEMENTED;
        return 0;
    }
    if (m == M_PUT) {
        if (f & (Q_VERSIONING | Q_POLICY | Q_CORS | Q_UNSUPPORTED))
            return MG_ENOTIMPLEMENTED;
        *op = f & Q_TAGGING     ? GW_OP_PUT_BUCKET_TAGGING
              : f & Q_ACL       ? GW_OP_PUT_BUCKET_ACL
              : f & Q_LIFECYCLE ? GW_OP_PUT_BUCKET_LIFECYCLE
                                : GW_OP_CREATE_BUCKET;
        return 0;
    }
    if (m == M_DELETE) {
        if (f & (Q_POLICY | Q_CORS | Q_UNSUPPORTED))
            return MG_ENOTIMPLEMENTED;
        *op = f & Q_TAGGING     ? GW_OP_DELETE_BUCKET_TAGGING
              : f & Q_LIFECYCLE ? GW_OP_DELETE_BUCKET_LIFECYCLE
                                : GW_OP_DELETE_BUCKET;
        return 0;
    }
    if (m == M_POST) {
        if (f & Q_DELETE) {
            *op = GW_OP_DELETE_OBJECTS;
            return 0;
        }
        /* Browser-form POST uploads are not served. */
        return MG_ENOTIMPLEMENTED;
    }
    return MG_EMETHODNOTALLOWED;
}

static int route_object(int m, unsigned f, int copy_source, enum gw_op *op)
{
    switch (m) {
    case M_HEAD:
        *op = GW_OP_HEAD_OBJECT;
        return 0;
    case M_GET:
        if (f & Q_UNSUPPORTED)
            return MG_ENOTIMPLEMENTED;
        *op = f & Q_TAGGING      ? GW_OP_GET_OBJECT_TAGGING
              : f & Q_ACL        ? GW_OP_GET_OBJECT_ACL
              : f & Q_ATTRIBUTES ? GW_OP_GET_OBJECT_ATTRIBUTES
              : f & Q_UPLOADID   ? GW_OP_LIST_PARTS
                                 : GW_OP_GET_OBJECT;
        return 0;
    case M_PUT:
        if (f & Q_UNSUPPORTED)
            return MG_ENOTIMPLEMENTED;
        if (f & Q_TAGGING)
            *op = GW_OP_PUT_OBJECT_TAGGING;
        else if (f & Q_ACL)
            *op = GW_OP_PUT_OBJECT_ACL;
        else if ((f & Q_UPLOADID) && (f & Q_PARTNUMBER))
            *op = copy_source ? GW_OP_UPLOAD_PART_COPY : GW_OP_UPLOAD_PART;
        else if (f & (Q_UPLOADID | Q_PARTNUMBER))
            return MG_EINVALIDARGUMENT; /* one without the other */
        else
            *op = copy_source ? GW_OP_COPY_OBJECT : GW_OP_PUT_OBJECT;
        return 0;
    case M_DELETE:
        if (f & Q_UNSUPPORTED)
            return MG_ENOTIMPLEMENTED;
        *op = f & Q_TAGGING    ? GW_OP_DELETE_OBJECT_TAGGING
              : f & Q_UPLOADID ? GW_OP_ABORT_MULTIPART_UPLOAD
                               : GW_OP_DELETE_OBJECT;
        return 0;
    case M_POST:
        if (f & Q_UPLOADS) {
            *op = GW_OP_CREATE_MULTIPART_UPLOAD;
            return 0;
        }
        if (f & Q_UPLOADID) {
            *op = GW_OP_COMPLETE_MULTIPART_UPLOAD;
            return 0;
        }
        return f & Q_UNSUPPORTED ? MG_ENOTIMPLEMENTED : MG_EMETHODNOTALLOWED;
    default:
        return MG_EMETHODNOTALLOWED;
    }
}

/* Host without ":port" (IPv6 literals keep their brackets). */
static struct mg_str host_only(struct mg_str a)
{
    if (a.len > 0 && a.base[0] == '[') {
        const char *rb = memchr(a.base, ']', a.len);
        if (rb != NULL)
            a.len = (size_t)(rb - a.base) + 1;
        return a;
    }
    const char *colon = memchr(a.base, ':', a.len);
    if (colon != NULL)
        a.len = (size_t)(colon - a.base);
    return a;
}

/* "<bucket>.<domain>" -> bucket (case-insensitive suffix match, as DNS is). */
static int vhost_bucket(struct mg_str host, struct mg_str domain, struct mg_str *bucket)
{
    if (domain.len == 0 || host.len <= domain.len + 1)
        return 0;
    const char *suffix = host.base + host.len - domain.len;
    if (suffix[-1] != '.' || strncasecmp(suffix, domain.base, domain.len) != 0)
        return 0;
    bucket->base = host.base;
    bucket->len = host.len - domain.len - 1;
    return 1;
}

int gw__route_parse(const struct gw__route_in *in, struct mg_arena *a, struct gw__route_out *out)
{
    memset(out, 0, sizeof(*out));
    out->op = GW_OP_UNKNOWN;
    struct mg_str t = in->target;
    const char *qm = memchr(t.base, '?', t.len);
    out->path.base = t.base;
    out->path.len = qm != NULL ? (size_t)(qm - t.base) : t.len;
    if (qm != NULL) {
        out->query.base = qm + 1;
        out->query.len = t.len - out->path.len - 1;
    } else {
        out->query.base = "";
    }
    parse_query(a, out->query, out);
    if (out->path.len == 0 || out->path.base[0] != '/')
        return MG_EINVALIDARGUMENT;

    struct mg_str rest = {out->path.base + 1, out->path.len - 1};
    struct mg_str bucket_raw = {"", 0}, key_raw = {"", 0};
    struct mg_str host = host_only(in->authority);
    if (vhost_bucket(host, in->domain, &bucket_raw)) {
        out->vhost = 1;
        key_raw = rest;
    } else {
        const char *slash = memchr(rest.base, '/', rest.len);
        bucket_raw.base = rest.base;
        bucket_raw.len = slash != NULL ? (size_t)(slash - rest.base) : rest.len;
        if (slash != NULL) {
            key_raw.base = slash + 1;
            key_raw.len = rest.len - bucket_raw.len - 1;
        }
    }
    if (pct_decode(a, bucket_raw, 0, 1, &out->bucket) != 0 ||
        pct_decode(a, key_raw, 0, 1, &out->key) != 0)
        return MG_EINVALIDARGUMENT;
    if (out->bucket.len > 255 || memchr(out->bucket.base, '/', out->bucket.len) != NULL)
        return MG_EINVALIDBUCKETNAME;
    if (out->key.len > META_KEY_MAX)
        return MG_EKEYTOOLONG;
    if (memchr(out->key.base, '\0', out->key.len) != NULL)
        return MG_EINVALIDARGUMENT;
    if (!utf8_valid(out->key))
        return MG_EINVALIDURI;

    int m = method_of(in->method);
    unsigned f = query_flags(out);
    if (out->bucket.len == 0) {
        if (out->key.len != 0)
            return MG_EINVALIDBUCKETNAME; /* "//key" */
        if (m == M_GET) {
            out->op = GW_OP_LIST_BUCKETS;
            return 0;
        }
        return MG_EMETHODNOTALLOWED;
    }
    if (out->key.len == 0)
        return route_bucket(m, f, &out->op);
    return route_object(m, f, in->has_copy_source, &out->op);
}

int gw__request_init(struct gw_request *r, h2o_req_t *req, struct gw_server *srv)
{
    memset(r, 0, sizeof(*r));
    r->req = req;
    r->srv = srv;
    r->ms = srv->ms;
    mg_arena_init(&r->arena);
    r->core.start_ns = gw__now_ns();
    struct gw__route_in in = {
        .method = {req->input.method.base, req->input.method.len},
        .authority = {req->input.authority.base, req->input.authority.len},
        .target = {req->input.path.base, req->input.path.len},
        .domain = srv->domain,
        .has_copy_source =
            h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-amz-copy-source"), -1) != -1,
    };
    if (in.authority.base == NULL)
        in.authority = (struct mg_str){"", 0};
    struct gw__route_out route;
    int rv = gw__route_parse(&in, &r->arena, &route);
    r->op = route.op;
    r->bucket = route.bucket;
    r->key = route.key;
    r->core.path = route.path;
    r->core.query = route.query;
    r->core.params = route.params;
    r->core.nparams = route.nparams;
    r->core.vhost = route.vhost;
    return rv;
}

/* ---- accessors (gw.h) */

int gw_header(const struct gw_request *r, const char *lname, struct mg_str *out)
{
    assert(r != NULL && lname != NULL);
    size_t n = strlen(lname);
    const h2o_headers_t *hs = &r->req->headers;
    for (size_t i = 0; i < hs->size; i++) {
        const h2o_iovec_t *name = hs->entries[i].name;
        if (name->len == n && memcmp(name->base, lname, n) == 0) {
            out->base = hs->entries[i].value.base;
            out->len = hs->entries[i].value.len;
            return 1;
        }
    }
    /* h2o keeps these out of req->headers. */
    if (n == 4 && memcmp(lname, "host", 4) == 0 && r->req->authority.base != NULL) {
        out->base = r->req->authority.base;
        out->len = r->req->authority.len;
        return 1;
    }
    if (n == 14 && memcmp(lname, "content-length", 14) == 0 && r->req->entity.base != NULL) {
        char *s = h2o_mem_alloc_pool(&r->req->pool, 24);
        out->len = (size_t)snprintf(s, 24, "%zu", r->req->entity.len);
        out->base = s;
        return 1;
    }
    return 0;
}

int gw_query(struct gw_request *r, const char *name, struct mg_str *out)
{
    struct mg_str dummy;
    return gw__qparam_get(r->core.params, r->core.nparams, name, out != NULL ? out : &dummy);
}

const char *gw_region(const struct gw_request *r)
{
    return r->srv->region.base;
}

const struct gw_user *gw_user_by_name(const struct gw_server *srv, struct mg_str name)
{
    for (size_t i = 0; i < srv->nusers; i++)
        if (srv->users[i].name.len == name.len &&
            memcmp(srv->users[i].name.base, name.base, name.len) == 0)
            return &srv->users[i];
    return NULL;
}
