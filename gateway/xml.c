/* SPDX-License-Identifier: Apache-2.0 */
/*
 * XML for the S3 handlers: emission helpers that escape every text node, and
 * the request-body parsers (CompleteMultipartUpload, Delete, Tagging,
 * AccessControlPolicy, CreateBucketConfiguration, lifecycle well-formedness).
 * Parsing goes through expat into a small element tree in the request arena;
 * a document type declaration, an entity declaration or an external entity
 * reference aborts the parse (DESIGN.md 12: "expat: reject DOCTYPE (no
 * entity expansion)"), so neither billion-laughs nor XXE reach us. The tree is
 * bounded: GW_XML_NODES_MAX elements, GW_XML_DEPTH_MAX levels, and the body
 * itself was bounded by gw_body_read_all.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#define MG_MODULE "gateway"
#include "gateway/s3.h"

#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

/* ------------------------------------------------------------------ emission */

void gw_xml_open(struct mg_buf *b, const char *root)
{
    mg_buf_appendf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<%s xmlns=\"%s\">", root,
                   S3_XMLNS);
}

void gw_xml_close(struct mg_buf *b, const char *root)
{
    gw_xml_end(b, root);
}

void gw_xml_start(struct mg_buf *b, const char *name)
{
    size_t n = strlen(name);
    mg_buf_reserve(b, n + 2);
    b->base[b->len++] = '<';
    memcpy(b->base + b->len, name, n);
    b->len += n;
    b->base[b->len++] = '>';
}

void gw_xml_end(struct mg_buf *b, const char *name)
{
    size_t n = strlen(name);
    mg_buf_reserve(b, n + 3);
    b->base[b->len++] = '<';
    b->base[b->len++] = '/';
    memcpy(b->base + b->len, name, n);
    b->len += n;
    b->base[b->len++] = '>';
}

void gw_xml_elem(struct mg_buf *b, const char *name, struct mg_str text)
{
    gw_xml_start(b, name);
    gw_xml_escape(b, text);
    gw_xml_end(b, name);
}

void gw_xml_elem_enc(struct mg_buf *b, const char *name, struct mg_str text, int url)
{
    if (!url) {
        gw_xml_elem(b, name, text);
        return;
    }
    /* Percent-encoded text is [A-Za-z0-9-_.~/%] only: nothing left to escape for XML. */
    gw_xml_start(b, name);
    mg_uri_encode(text, 1, b);
    gw_xml_end(b, name);
}

void gw_xml_elem_u64(struct mg_buf *b, const char *name, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do {
        digits[sizeof(digits) - ++n] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    gw_xml_start(b, name);
    mg_buf_append(b, digits + sizeof(digits) - n, n);
    gw_xml_end(b, name);
}

void gw_xml_elem_bool(struct mg_buf *b, const char *name, int v)
{
    gw_xml_elem_cstr(b, name, v ? "true" : "false");
}

void gw_xml_elem_cstr(struct mg_buf *b, const char *name, const char *text)
{
    gw_xml_elem(b, name, (struct mg_str){text, strlen(text)});
}

void gw_xml_elem_etag(struct mg_buf *b, const char *name, struct mg_str etag)
{
    gw_xml_start(b, name);
    mg_buf_append(b, "&quot;", 6);
    gw_xml_escape(b, etag);
    mg_buf_append(b, "&quot;", 6);
    gw_xml_end(b, name);
}

void gw_xml_elemf(struct mg_buf *b, const char *name, const char *fmt, ...)
{
    char small[256];
    char *p = small;
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(small)) {
        p = mg_malloc((size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(p, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    gw_xml_elem(b, name, (struct mg_str){p, (size_t)n});
    if (p != small)
        mg_free(p);
}

/* ------------------------------------------------------------------- parsing */

struct xml_ctx {
    XML_Parser p;
    struct mg_arena *a;
    struct gw_xml_node *root;
    struct gw_xml_node *cur; /* innermost open element */
    struct gw_xml_node *last[GW_XML_DEPTH_MAX + 1]; /* last child of the open element at depth i */
    struct mg_buf text;      /* character data of cur since its last child */
    size_t nodes;
    size_t depth;
    const char *why; /* set when we stopped the parser */
};

static void stop(struct xml_ctx *x, const char *why)
{
    if (x->why == NULL)
        x->why = why;
    XML_StopParser(x->p, XML_FALSE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct xml_ctx *x = ud;
    struct gw_xml_node *n;
    const char *local = strrchr(name, ':');
    (void)attrs;
    if (x->why != NULL)
        return;
    if (++x->nodes > GW_XML_NODES_MAX || ++x->depth > GW_XML_DEPTH_MAX) {
        stop(x, "document too large or too deep");
        return;
    }
    if (x->cur == NULL && x->root != NULL) {
        stop(x, "more than one root element");
        return;
    }
    local = local ? local + 1 : name;
    n = mg_arena_alloc(x->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    n->name.len = strlen(local);
    n->name.base = mg_arena_dup(x->a, local, n->name.len);
    n->text.base = "";
    n->parent = x->cur;
    /* Append in O(1): a walk to the tail made 200,000 siblings cost 2e10 steps on the loop. */
    if (x->cur == NULL)
        x->root = n;
    else if (x->cur->child == NULL)
        x->cur->child = n;
    else
        x->last[x->depth - 1]->next = n;
    x->last[x->depth - 1] = n;
    x->cur = n;
    x->text.len = 0;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
    struct xml_ctx *x = ud;
    (void)name;
    if (x->why != NULL || x->cur == NULL)
        return;
    if (x->cur->child == NULL) {
        x->cur->text.len = x->text.len;
        x->cur->text.base = mg_arena_dup(x->a, x->text.base ? x->text.base : "", x->text.len);
    }
    x->text.len = 0;
    x->cur = x->cur->parent;
    assert(x->depth > 0);
    x->depth--;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
    struct xml_ctx *x = ud;
    if (x->why == NULL && x->cur != NULL && len > 0)
        mg_buf_append(&x->text, s, (size_t)len);
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int has_internal_subset)
{
    (void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
    stop(ud, "DOCTYPE is not allowed");
}

static void XMLCALL on_entity_decl(void *ud, const XML_Char *name, int is_param,
                                   const XML_Char *value, int value_len, const XML_Char *base,
                                   const XML_Char *sysid, const XML_Char *pubid,
                                   const XML_Char *notation)
{
    (void)name, (void)is_param, (void)value, (void)value_len, (void)base, (void)sysid;
    (void)pubid, (void)notation;
    stop(ud, "entity declarations are not allowed");
}

static int XMLCALL on_external_entity(XML_Parser p, const XML_Char *context, const XML_Char *base,
                                      const XML_Char *sysid, const XML_Char *pubid)
{
    (void)p, (void)context, (void)base, (void)sysid, (void)pubid;
    return XML_STATUS_ERROR; /* never fetch anything */
}

static int malformed(char *errmsg, const char *why)
{
    if (errmsg != NULL && why != NULL)
        snprintf(errmsg, 256, "%s", why);
    return MG_EMALFORMEDXML;
}

int gw_xml_parse(struct mg_str body, struct mg_arena *a, struct gw_xml_node **root, char *errmsg)
{
    struct xml_ctx x;
    enum XML_Status st;
    int rv = 0;

    assert(a != NULL && root != NULL);
    memset(&x, 0, sizeof(x));
    x.a = a;
    mg_buf_init(&x.text);
    x.p = XML_ParserCreate("UTF-8");
    if (x.p == NULL)
        return MG_ENOMEM;
    XML_SetUserData(x.p, &x);
    XML_SetElementHandler(x.p, on_start, on_end);
    XML_SetCharacterDataHandler(x.p, on_text);
    XML_SetStartDoctypeDeclHandler(x.p, on_doctype);
    XML_SetEntityDeclHandler(x.p, on_entity_decl);
    XML_SetExternalEntityRefHandler(x.p, on_external_entity);
    XML_SetParamEntityParsing(x.p, XML_PARAM_ENTITY_PARSING_NEVER);

    if (body.len > (size_t)INT32_MAX) {
        rv = malformed(errmsg, "document too large");
        goto out;
    }
    st = XML_Parse(x.p, body.base ? body.base : "", (int)body.len, XML_TRUE);
    if (x.why != NULL) {
        rv = malformed(errmsg, x.why);
    } else if (st != XML_STATUS_OK) {
        if (errmsg != NULL)
            snprintf(errmsg, 256, "%s at line %lu",
                     XML_ErrorString(XML_GetErrorCode(x.p)),
                     (unsigned long)XML_GetCurrentLineNumber(x.p));
        rv = MG_EMALFORMEDXML;
    } else if (x.root == NULL) {
        rv = malformed(errmsg, "no root element");
    } else {
        *root = x.root;
    }
out:
    XML_ParserFree(x.p);
    mg_buf_close(&x.text);
    return rv;
}

static int name_is(const struct gw_xml_node *n, const char *name)
{
    size_t l = strlen(name);
    return n->name.len == l && memcmp(n->name.base, name, l) == 0;
}

const struct gw_xml_node *gw_xml_child(const struct gw_xml_node *n, const char *name)
{
    const struct gw_xml_node *c;
    for (c = n->child; c != NULL; c = c->next)
        if (name_is(c, name))
            return c;
    return NULL;
}

/* Parse and require root element `root`. */
static int parse_root(struct mg_str body, const char *root, struct mg_arena *a,
                      struct gw_xml_node **out, char *errmsg)
{
    int rv = gw_xml_parse(body, a, out, errmsg);
    if (rv != 0)
        return rv;
    if (!name_is(*out, root)) {
        if (errmsg != NULL)
            snprintf(errmsg, 256, "expected root element %s", root);
        return MG_EMALFORMEDXML;
    }
    return 0;
}

int gw_xml_check(struct mg_str body, const char *root, struct mg_arena *a, char *errmsg)
{
    struct gw_xml_node *n;
    return parse_root(body, root, a, &n, errmsg);
}

static struct mg_str trim(struct mg_str s)
{
    while (s.len > 0 && (s.base[0] == ' ' || s.base[0] == '\t' || s.base[0] == '\n' ||
                         s.base[0] == '\r'))
        s.base++, s.len--;
    while (s.len > 0 && (s.base[s.len - 1] == ' ' || s.base[s.len - 1] == '\t' ||
                         s.base[s.len - 1] == '\n' || s.base[s.len - 1] == '\r'))
        s.len--;
    return s;
}

static size_t count_children(const struct gw_xml_node *n, const char *name)
{
    const struct gw_xml_node *c;
    size_t k = 0;
    for (c = n->child; c != NULL; c = c->next)
        k += name_is(c, name);
    return k;
}

/* Decimal 1..max with nothing else around it (whitespace trimmed); 0 on error. */
static uint32_t parse_u32(struct mg_str s, uint32_t max)
{
    uint64_t v = 0;
    size_t i;
    s = trim(s);
    if (s.len == 0 || s.len > 10)
        return 0;
    for (i = 0; i < s.len; i++) {
        if (s.base[i] < '0' || s.base[i] > '9')
            return 0;
        v = v * 10 + (uint64_t)(s.base[i] - '0');
    }
    return v > max ? 0 : (uint32_t)v;
}

static struct mg_str unquote(struct mg_str s)
{
    s = trim(s);
    if (s.len >= 2 && s.base[0] == '"' && s.base[s.len - 1] == '"')
        s.base++, s.len -= 2;
    return s;
}

int gw_xml_parse_complete(struct mg_str body, struct mg_arena *a, struct meta_part **parts,
                          size_t *n, char *errmsg)
{
    static const char *const cks[] = {"ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME",
                                      "ChecksumSHA1", "ChecksumSHA256"};
    struct gw_xml_node *root;
    const struct gw_xml_node *c, *f;
    struct meta_part *out;
    size_t k = 0, np, i;
    int rv = parse_root(body, "CompleteMultipartUpload", a, &root, errmsg);
    if (rv != 0)
        return rv;
    np = count_children(root, "Part");
    if (np == 0)
        return malformed(errmsg, "The XML you provided was not well-formed or did not validate "
                                 "against our published schema.");
    if (np > META_PART_MAX)
        return malformed(errmsg, "too many parts");
    out = mg_arena_alloc(a, np * sizeof(*out));
    memset(out, 0, np * sizeof(*out));
    for (c = root->child; c != NULL; c = c->next) {
        if (!name_is(c, "Part"))
            continue;
        f = gw_xml_child(c, "PartNumber");
        if (f == NULL || (out[k].number = parse_u32(f->text, UINT32_MAX)) == 0)
            return malformed(errmsg, "Part without a valid PartNumber");
        f = gw_xml_child(c, "ETag");
        if (f == NULL)
            return malformed(errmsg, "Part without ETag");
        out[k].etag = unquote(f->text);
        for (i = 0; i < sizeof(cks) / sizeof(cks[0]); i++) {
            f = gw_xml_child(c, cks[i]);
            if (f != NULL)
                out[k].checksum = trim(f->text);
        }
        out[k].checksum.base = out[k].checksum.base ? out[k].checksum.base : "";
        k++;
    }
    *parts = out;
    *n = k;
    return 0;
}

int gw_xml_parse_delete(struct mg_str body, struct mg_arena *a, struct gw_delete_req *out,
                        char *errmsg)
{
    struct gw_xml_node *root;
    const struct gw_xml_node *c, *f;
    size_t nk, k = 0;
    struct mg_str q;
    int rv = parse_root(body, "Delete", a, &root, errmsg);
    if (rv != 0)
        return rv;
    memset(out, 0, sizeof(*out));
    f = gw_xml_child(root, "Quiet");
    if (f != NULL) {
        q = trim(f->text);
        if (q.len == 4 && strncasecmp(q.base, "true", 4) == 0)
            out->quiet = 1;
        else if (!(q.len == 5 && strncasecmp(q.base, "false", 5) == 0))
            return malformed(errmsg, "Quiet must be true or false");
    }
    nk = count_children(root, "Object");
    if (nk == 0)
        return malformed(errmsg, "The XML you provided was not well-formed or did not validate "
                                 "against our published schema.");
    if (nk > GW_DELETE_KEYS_MAX)
        return malformed(errmsg, "The request must contain no more than 1000 keys.");
    out->keys = mg_arena_alloc(a, nk * sizeof(*out->keys));
    for (c = root->child; c != NULL; c = c->next) {
        if (!name_is(c, "Object"))
            continue;
        f = gw_xml_child(c, "Key");
        if (f == NULL)
            return malformed(errmsg, "Object without Key");
        out->keys[k++] = f->text; /* keys are taken verbatim: spaces are significant */
    }
    out->nkeys = k;
    return 0;
}

/* Unicode characters in a UTF-8 string (continuation bytes not counted). */
static size_t utf8_chars(struct mg_str s)
{
    size_t i, n = 0;
    for (i = 0; i < s.len; i++)
        n += ((unsigned char)s.base[i] & 0xC0) != 0x80;
    return n;
}

int gw_tags_validate(const struct meta_kv *tags, size_t n, size_t max, char *errmsg)
{
    size_t i, j;
    if (n > max) {
        if (errmsg != NULL)
            snprintf(errmsg, 256, "%s tags cannot be greater than %zu",
                     max == GW_OBJECT_TAGS_MAX ? "Object" : "Bucket", max);
        /* AWS: 400 BadRequest for an object's tags, InvalidTag for a bucket's. */
        return max == GW_OBJECT_TAGS_MAX ? MG_EBADREQUEST : MG_EINVALIDTAG;
    }
    for (i = 0; i < n; i++) {
        if (tags[i].k.len == 0 || utf8_chars(tags[i].k) > GW_TAG_KEY_MAX) {
            if (errmsg != NULL)
                snprintf(errmsg, 256, "The TagKey you have provided is invalid");
            return MG_EINVALIDTAG;
        }
        if (utf8_chars(tags[i].v) > GW_TAG_VALUE_MAX) {
            if (errmsg != NULL)
                snprintf(errmsg, 256, "The TagValue you have provided is invalid");
            return MG_EINVALIDTAG;
        }
        for (j = 0; j < i; j++) {
            if (tags[j].k.len == tags[i].k.len &&
                memcmp(tags[j].k.base, tags[i].k.base, tags[i].k.len) == 0) {
                if (errmsg != NULL)
                    snprintf(errmsg, 256, "Cannot provide multiple Tags with the same key");
                return MG_EINVALIDTAG;
            }
        }
    }
    return 0;
}

int gw_xml_parse_tagging(struct mg_str body, size_t max, struct mg_arena *a,
                         struct meta_kv **tags, size_t *n, char *errmsg)
{
    struct gw_xml_node *root;
    const struct gw_xml_node *set, *c, *k, *v;
    struct meta_kv *out;
    size_t nt, i = 0;
    int rv = parse_root(body, "Tagging", a, &root, errmsg);
    if (rv != 0)
        return rv;
    set = gw_xml_child(root, "TagSet");
    if (set == NULL)
        return malformed(errmsg, "Tagging without TagSet");
    nt = count_children(set, "Tag");
    if (nt > GW_XML_NODES_MAX)
        return malformed(errmsg, "too many tags");
    out = mg_arena_alloc(a, (nt ? nt : 1) * sizeof(*out));
    for (c = set->child; c != NULL; c = c->next) {
        if (!name_is(c, "Tag"))
            continue;
        k = gw_xml_child(c, "Key");
        v = gw_xml_child(c, "Value");
        if (k == NULL || v == NULL)
            return malformed(errmsg, "Tag needs Key and Value");
        out[i].k = k->text;
        out[i].v = v->text;
        i++;
    }
    rv = gw_tags_validate(out, i, max, errmsg);
    if (rv != 0)
        return rv;
    *tags = out;
    *n = i;
    return 0;
}

/* Form-decode (percent escapes, '+' = space) into the arena. '+' becomes a space before the
 * escapes are undone, so an encoded plus ("%2B", how SDKs send a literal '+') stays a '+'. */
static int form_decode(struct mg_str in, struct mg_arena *a, struct mg_str *out)
{
    struct mg_buf b;
    char *plus = mg_arena_dup(a, in.base ? in.base : "", in.len);
    size_t i;
    int rv;
    for (i = 0; i < in.len; i++)
        if (plus[i] == '+')
            plus[i] = ' ';
    mg_buf_init(&b);
    rv = mg_uri_decode((struct mg_str){plus, in.len}, &b);
    if (rv == 0) {
        out->base = mg_arena_dup(a, b.base ? b.base : "", b.len);
        out->len = b.len;
    }
    mg_buf_close(&b);
    return rv;
}

int gw_tagging_query_parse(struct mg_str q, size_t max, struct mg_arena *a,
                           struct meta_kv **tags, size_t *n, char *errmsg)
{
    struct meta_kv *out;
    size_t cap = 1, i, k = 0, start = 0;
    for (i = 0; i < q.len; i++)
        cap += q.base[i] == '&';
    out = mg_arena_alloc(a, cap * sizeof(*out));
    for (i = 0; i <= q.len; i++) {
        struct mg_str item, name, value = {"", 0};
        const char *eq;
        if (i < q.len && q.base[i] != '&')
            continue;
        item = (struct mg_str){q.base + start, i - start};
        start = i + 1;
        if (item.len == 0)
            continue;
        eq = memchr(item.base, '=', item.len);
        name = (struct mg_str){item.base, eq ? (size_t)(eq - item.base) : item.len};
        if (eq != NULL)
            value = (struct mg_str){eq + 1, item.len - name.len - 1};
        if (form_decode(name, a, &out[k].k) != 0 || form_decode(value, a, &out[k].v) != 0) {
            if (errmsg != NULL)
                snprintf(errmsg, 256, "The header 'x-amz-tagging' shall be encoded as UTF-8 "
                                      "then URLEncoded URL query parameters without tag name "
                                      "duplicates.");
            return MG_EINVALIDARGUMENT;
        }
        k++;
    }
    int rv = gw_tags_validate(out, k, max, errmsg);
    if (rv != 0)
        return rv;
    *tags = out;
    *n = k;
    return 0;
}

/* ----------------------------------------------------------------------- ACL */

static const struct {
    const char *name;
    enum meta_acl acl;
    int object_only;
    int unsupported;
} canned[] = {
    {"private", META_ACL_PRIVATE, 0, 0},
    {"public-read", META_ACL_PUBLIC_READ, 0, 0},
    {"public-read-write", META_ACL_PUBLIC_READ_WRITE, 0, 0},
    {"authenticated-read", META_ACL_AUTHENTICATED_READ, 0, 0},
    /* The writer is the bucket owner here, so both leave the object private. */
    {"bucket-owner-read", META_ACL_PRIVATE, 1, 0},
    {"bucket-owner-full-control", META_ACL_PRIVATE, 1, 0},
    {"aws-exec-read", META_ACL_PRIVATE, 0, 1},
    {"log-delivery-write", META_ACL_PRIVATE, 0, 1},
};

int gw_canned_acl_parse(struct mg_str v, int object, enum meta_acl *out)
{
    size_t i;
    v = trim(v);
    for (i = 0; i < sizeof(canned) / sizeof(canned[0]); i++) {
        if (strlen(canned[i].name) != v.len || memcmp(canned[i].name, v.base, v.len) != 0)
            continue;
        if (canned[i].unsupported)
            return MG_ENOTIMPLEMENTED;
        if (canned[i].object_only && !object)
            return MG_EINVALIDARGUMENT;
        *out = canned[i].acl;
        return 0;
    }
    return MG_EINVALIDARGUMENT;
}

const char *gw_canned_acl_name(enum meta_acl acl)
{
    switch (acl) {
    case META_ACL_PUBLIC_READ: return "public-read";
    case META_ACL_PUBLIC_READ_WRITE: return "public-read-write";
    case META_ACL_AUTHENTICATED_READ: return "authenticated-read";
    case META_ACL_PRIVATE: break;
    }
    return "private";
}

#define GROUP_ALL "http://acs.amazonaws.com/groups/global/AllUsers"
#define GROUP_AUTH "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"

static int str_is(struct mg_str s, const char *lit)
{
    size_t l = strlen(lit);
    return s.len == l && memcmp(s.base, lit, l) == 0;
}

static int not_impl(char *errmsg, const char *why)
{
    if (errmsg != NULL)
        snprintf(errmsg, 256, "%s", why);
    return MG_ENOTIMPLEMENTED;
}

int gw_xml_parse_acl(struct mg_str body, struct mg_str owner_id, struct mg_arena *a,
                     enum meta_acl *out, char *errmsg)
{
    struct gw_xml_node *root;
    const struct gw_xml_node *list, *g, *who, *f;
    int all_read = 0, all_write = 0, auth_read = 0;
    int rv = parse_root(body, "AccessControlPolicy", a, &root, errmsg);
    if (rv != 0)
        return rv;
    list = gw_xml_child(root, "AccessControlList");
    if (list == NULL)
        return malformed(errmsg, "AccessControlPolicy without AccessControlList");
    for (g = list->child; g != NULL; g = g->next) {
        struct mg_str perm;
        if (!name_is(g, "Grant"))
            continue;
        who = gw_xml_child(g, "Grantee");
        f = gw_xml_child(g, "Permission");
        if (who == NULL || f == NULL)
            return malformed(errmsg, "Grant needs Grantee and Permission");
        perm = trim(f->text);
        if ((f = gw_xml_child(who, "ID")) != NULL) {
            if (str_is(perm, "FULL_CONTROL") && trim(f->text).len == owner_id.len &&
                memcmp(trim(f->text).base, owner_id.base, owner_id.len) == 0)
                continue; /* the owner's own grant: part of every canned ACL */
            return not_impl(errmsg, "Only canned ACLs are supported: grants to other users are "
                                    "not implemented");
        }
        if ((f = gw_xml_child(who, "URI")) == NULL)
            return not_impl(errmsg, "Only canned ACLs are supported: grants by e-mail address "
                                    "are not implemented");
        if (str_is(trim(f->text), GROUP_ALL) && str_is(perm, "READ"))
            all_read = 1;
        else if (str_is(trim(f->text), GROUP_ALL) && str_is(perm, "WRITE"))
            all_write = 1;
        else if (str_is(trim(f->text), GROUP_AUTH) && str_is(perm, "READ"))
            auth_read = 1;
        else
            return not_impl(errmsg, "Only canned ACLs are supported: this group grant is not "
                                    "implemented");
    }
    if (!all_read && !all_write && !auth_read)
        *out = META_ACL_PRIVATE;
    else if (all_read && !all_write && !auth_read)
        *out = META_ACL_PUBLIC_READ;
    else if (all_read && all_write && !auth_read)
        *out = META_ACL_PUBLIC_READ_WRITE;
    else if (!all_read && !all_write && auth_read)
        *out = META_ACL_AUTHENTICATED_READ;
    else
        return not_impl(errmsg, "Only canned ACLs are supported: this combination of grants is "
                                "not implemented");
    return 0;
}

int gw_xml_parse_location(struct mg_str body, struct mg_arena *a, struct mg_str *loc,
                          char *errmsg)
{
    struct gw_xml_node *root;
    const struct gw_xml_node *f;
    int rv = parse_root(body, "CreateBucketConfiguration", a, &root, errmsg);
    if (rv != 0)
        return rv;
    f = gw_xml_child(root, "LocationConstraint");
    *loc = f ? trim(f->text) : (struct mg_str){"", 0};
    return 0;
}
