/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LifecycleConfiguration XML: the PutBucketLifecycleConfiguration parser and
 * the GetBucketLifecycleConfiguration writer. expat builds a small element
 * tree in the caller's arena; a document type or entity declaration, or an
 * external entity reference, stops the parse (DESIGN.md 12: "expat: reject
 * DOCTYPE (no entity expansion)"), as gateway/xml.c does for the other
 * bodies. The tree is bounded (LC_XML_NODES_MAX elements, LC_XML_DEPTH_MAX
 * levels; the body itself is bounded by the gateway). The parse runs in
 * passes, so the first fault reported is the one S3 reports first: the
 * schema (MalformedXML) over the whole document, then the rule count and the
 * IDs, then each rule's values and contradictions, and last what the store
 * cannot honour (NotImplemented).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <expat.h>

#define MG_MODULE "lifecycle"
#include "lifecycle/internal.h"

#define LC_XML_NODES_MAX 100000 /* 1,001 rules of ~40 elements fit: the count is ours to answer */
#define LC_XML_DEPTH_MAX 16
#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define MALFORMED_MSG                                                                              \
    "The XML you provided was not well-formed or did not validate against our published schema"

/* ------------------------------------------------------------------- tree */

struct node {
    struct mg_str name; /* local name (any "ns:" prefix dropped) */
    struct mg_str text; /* character data of a leaf ("" for containers) */
    struct node *up;
    struct node *kid;  /* first child */
    struct node *tail; /* last child: O(1) append */
    struct node *next; /* next sibling */
};

struct tree {
    XML_Parser p;
    struct mg_arena *a;
    struct node *root;
    struct node *open; /* innermost element not yet closed */
    struct mg_buf chars;
    size_t count;
    size_t depth;
    const char *stop_why;
};

static void halt(struct tree *t, const char *why)
{
    if (t->stop_why == NULL)
        t->stop_why = why;
    XML_StopParser(t->p, XML_FALSE);
}

static void XMLCALL on_open(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct tree *t = ud;
    const char *colon = strchr(name, ':');
    struct node *n;
    (void)attrs;
    if (t->stop_why != NULL)
        return;
    if (t->open == NULL && t->root != NULL) {
        halt(t, "more than one root element");
        return;
    }
    if (++t->count > LC_XML_NODES_MAX || ++t->depth > LC_XML_DEPTH_MAX) {
        halt(t, "document too large or too deep");
        return;
    }
    n = mg_arena_alloc(t->a, sizeof(*n));
    memset(n, 0, sizeof(*n));
    name = colon != NULL ? colon + 1 : name;
    n->name = (struct mg_str){mg_arena_dup(t->a, name, strlen(name)), strlen(name)};
    n->text = (struct mg_str){"", 0};
    n->up = t->open;
    if (t->open == NULL) {
        t->root = n;
    } else {
        if (t->open->tail != NULL)
            t->open->tail->next = n;
        else
            t->open->kid = n;
        t->open->tail = n;
    }
    t->open = n;
    t->chars.len = 0;
}

static void XMLCALL on_close(void *ud, const XML_Char *name)
{
    struct tree *t = ud;
    struct node *n = t->open;
    (void)name;
    if (t->stop_why != NULL || n == NULL)
        return;
    if (n->kid == NULL)
        n->text = (struct mg_str){mg_arena_dup(t->a, t->chars.base ? t->chars.base : "",
                                               t->chars.len), t->chars.len};
    t->chars.len = 0;
    t->open = n->up;
    assert(t->depth > 0);
    t->depth--;
}

static void XMLCALL on_chars(void *ud, const XML_Char *s, int len)
{
    struct tree *t = ud;
    if (t->stop_why == NULL && t->open != NULL && len > 0)
        mg_buf_append(&t->chars, s, (size_t)len);
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
                               const XML_Char *pubid, int internal)
{
    (void)name, (void)sysid, (void)pubid, (void)internal;
    halt(ud, "DOCTYPE is not allowed");
}

static void XMLCALL on_entity(void *ud, const XML_Char *name, int param, const XML_Char *value,
                              int vlen, const XML_Char *base, const XML_Char *sysid,
                              const XML_Char *pubid, const XML_Char *notation)
{
    (void)name, (void)param, (void)value, (void)vlen, (void)base, (void)sysid, (void)pubid;
    (void)notation;
    halt(ud, "entity declarations are not allowed");
}

static int XMLCALL on_external(XML_Parser p, const XML_Char *ctx, const XML_Char *base,
                               const XML_Char *sysid, const XML_Char *pubid)
{
    (void)p, (void)ctx, (void)base, (void)sysid, (void)pubid;
    return XML_STATUS_ERROR; /* nothing is ever fetched */
}

static int tree_build(struct mg_str xml, struct mg_arena *a, struct node **root, char *errmsg)
{
    struct tree t = {.a = a};
    int rv = 0;
    if (xml.len > (size_t)INT32_MAX)
        return lc__fail(MG_EMALFORMEDXML, errmsg, "document too large");
    t.p = XML_ParserCreate("UTF-8");
    if (t.p == NULL)
        return lc__fail(MG_ENOMEM, errmsg, "out of memory");
    mg_buf_init(&t.chars);
    XML_SetUserData(t.p, &t);
    XML_SetElementHandler(t.p, on_open, on_close);
    XML_SetCharacterDataHandler(t.p, on_chars);
    XML_SetStartDoctypeDeclHandler(t.p, on_doctype);
    XML_SetEntityDeclHandler(t.p, on_entity);
    XML_SetExternalEntityRefHandler(t.p, on_external);
    XML_SetParamEntityParsing(t.p, XML_PARAM_ENTITY_PARSING_NEVER);
    if (XML_Parse(t.p, xml.base ? xml.base : "", (int)xml.len, XML_TRUE) != XML_STATUS_OK ||
        t.stop_why != NULL)
        rv = lc__fail(MG_EMALFORMEDXML, errmsg, "%s",
                      t.stop_why ? t.stop_why : XML_ErrorString(XML_GetErrorCode(t.p)));
    else if (t.root == NULL)
        rv = lc__fail(MG_EMALFORMEDXML, errmsg, "no root element");
    *root = t.root;
    XML_ParserFree(t.p);
    mg_buf_close(&t.chars);
    return rv;
}

static int is(const struct node *n, const char *name)
{
    return lc__str_eq(n->name, (struct mg_str){name, strlen(name)});
}

/* ----------------------------------------------------------------- values */

static struct mg_str trimmed(struct mg_str s)
{
    while (s.len > 0 && strchr(" \t\r\n", s.base[0]) != NULL)
        s.base++, s.len--;
    while (s.len > 0 && strchr(" \t\r\n", s.base[s.len - 1]) != NULL)
        s.len--;
    return s;
}

/* An xsd Long: optional sign, 1..19 digits, no overflow. */
static int parse_long(struct mg_str s, int64_t *v)
{
    size_t i = 0;
    int neg = 0;
    uint64_t x = 0;
    s = trimmed(s);
    if (s.len > 0 && (s.base[0] == '-' || s.base[0] == '+'))
        neg = s.base[0] == '-', i = 1;
    if (i == s.len || s.len - i > 19)
        return -1;
    for (; i < s.len; i++) {
        if (s.base[i] < '0' || s.base[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(s.base[i] - '0');
    }
    if (x > (uint64_t)INT64_MAX)
        return -1;
    *v = neg ? -(int64_t)x : (int64_t)x;
    return 0;
}

static int digits(const char *p, size_t n, int *v)
{
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        *v = *v * 10 + (p[i] - '0');
    }
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int y, int m, int d)
{
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* ISO 8601: YYYY-MM-DD, optionally THH:MM:SS[.fff...] and Z or +HH:MM / -HH:MM (no zone =
 * UTC). Years 1970..9999. Returns 0 with *ms, or -1. */
static int parse_date(struct mg_str s, int64_t *ms)
{
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h = 0, mi = 0, sec = 0, zh = 0, zm = 0, sign = 0, frac_ms = 0;
    const char *p;
    size_t n;
    s = trimmed(s);
    p = s.base, n = s.len;
    if (n < 10 || digits(p, 4, &y) || p[4] != '-' || digits(p + 5, 2, &mo) || p[7] != '-' ||
        digits(p + 8, 2, &d))
        return -1;
    p += 10, n -= 10;
    if (n > 0) {
        if (n < 9 || p[0] != 'T' || digits(p + 1, 2, &h) || p[3] != ':' ||
            digits(p + 4, 2, &mi) || p[6] != ':' || digits(p + 7, 2, &sec))
            return -1;
        p += 9, n -= 9;
        if (n > 0 && p[0] == '.') {
            size_t k = 1;
            for (; k < n && p[k] >= '0' && p[k] <= '9'; k++)
                if (k <= 3)
                    frac_ms = frac_ms * 10 + (p[k] - '0');
            if (k == 1)
                return -1;
            for (size_t z = k; z <= 3; z++)
                frac_ms *= 10;
            p += k, n -= k;
        }
        if (n == 1 && p[0] == 'Z') {
            n = 0;
        } else if (n == 6 && (p[0] == '+' || p[0] == '-') && p[3] == ':') {
            sign = p[0] == '+' ? 1 : -1;
            if (digits(p + 1, 2, &zh) || digits(p + 4, 2, &zm) || zh > 23 || zm > 59)
                return -1;
            n = 0;
        }
        if (n != 0)
            return -1;
    }
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 ||
        sec > 59 || (mo == 2 && d == 29 && (y % 4 != 0 || (y % 100 == 0 && y % 400 != 0))))
        return -1;
    *ms = ((days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec) -
           sign * (zh * 3600 + zm * 60)) * 1000 + frac_ms;
    return 0;
}

/* ------------------------------------------------------------------ rules */

/* What a rule gave, before its values are checked (pass 1 fills it; pass 2 judges it). */
struct given {
    int has_id;
    int has_days, has_date, has_marker, marker, has_abort;
    int64_t days, date_ms, abort_days, size_gt, size_lt;
    int unsupported; /* Transition, NoncurrentVersion* */
};

static int malformed(char *errmsg, const char *why)
{
    return lc__fail(MG_EMALFORMEDXML, errmsg, "%s", why ? why : MALFORMED_MSG);
}

/* Set *slot to n unless it was set already (every element here occurs at most once). */
static int once(const struct node **slot, const struct node *n, char *errmsg)
{
    if (*slot != NULL)
        return malformed(errmsg, NULL);
    *slot = n;
    return 0;
}

static int parse_tag(const struct node *t, struct lc_tag *out, char *errmsg)
{
    const struct node *k = NULL, *v = NULL;
    for (const struct node *c = t->kid; c != NULL; c = c->next) {
        if (!(is(c, "Key") || is(c, "Value")) || once(is(c, "Key") ? &k : &v, c, errmsg))
            return malformed(errmsg, NULL);
    }
    if (k == NULL || v == NULL || k->kid != NULL || v->kid != NULL)
        return malformed(errmsg, NULL);
    out->key = k->text;
    out->value = v->text;
    return 0;
}

static int parse_size(const struct node *n, int *has, int64_t *v, char *errmsg)
{
    if (*has || n->kid != NULL || parse_long(n->text, v) != 0)
        return malformed(errmsg, NULL);
    *has = 1;
    return 0;
}

/* Prefix, Tag*, ObjectSizeGreaterThan, ObjectSizeLessThan under f (a Filter, or its And when
 * in_and). A Filter holds at most one of them, or a lone And; an And holds any number of Tag
 * and at most one of each other predicate. */
static int parse_preds(const struct node *f, int in_and, struct lc_filter *out, struct given *g,
                       struct mg_arena *a, char *errmsg)
{
    const struct node *prefix = NULL;
    size_t ntags = 0, npreds = 0;
    int has_gt = 0, has_lt = 0;
    for (const struct node *c = f->kid; c != NULL; c = c->next)
        ntags += is(c, "Tag");
    out->tags = ntags ? mg_arena_alloc(a, ntags * sizeof(*out->tags)) : NULL;
    for (const struct node *c = f->kid; c != NULL; c = c->next, npreds++) {
        int rv = 0;
        if (is(c, "Prefix"))
            rv = once(&prefix, c, errmsg) != 0 || c->kid != NULL ? malformed(errmsg, NULL) : 0;
        else if (is(c, "Tag"))
            rv = parse_tag(c, &out->tags[out->ntags++], errmsg);
        else if (is(c, "ObjectSizeGreaterThan"))
            rv = parse_size(c, &has_gt, &g->size_gt, errmsg);
        else if (is(c, "ObjectSizeLessThan"))
            rv = parse_size(c, &has_lt, &g->size_lt, errmsg);
        else if (is(c, "And") && !in_and)
            rv = npreds > 0 || c->next != NULL ? malformed(errmsg, NULL)
                                                : parse_preds(c, 1, out, g, a, errmsg);
        else
            rv = malformed(errmsg, NULL);
        if (rv != 0)
            return rv;
    }
    if (!in_and && npreds > 1)
        return malformed(errmsg, "A Filter holds exactly one of Prefix, Tag, "
                                 "ObjectSizeGreaterThan, ObjectSizeLessThan and And");
    if (prefix != NULL)
        out->prefix = prefix->text;
    out->has_size_gt |= has_gt;
    out->has_size_lt |= has_lt;
    return 0;
}

static int parse_filter(const struct node *f, struct lc_rule *r, struct given *g,
                        struct mg_arena *a, char *errmsg)
{
    const struct node *k = f->kid;
    int rv = parse_preds(f, 0, &r->filter, g, a, errmsg);
    if (rv != 0)
        return rv;
    if (k == NULL)
        r->filter.form = LC_FORM_EMPTY;
    else if (is(k, "Prefix"))
        r->filter.form = LC_FORM_FILTER_PREFIX;
    else if (is(k, "Tag"))
        r->filter.form = LC_FORM_TAG;
    else if (is(k, "ObjectSizeGreaterThan"))
        r->filter.form = LC_FORM_SIZE_GT;
    else if (is(k, "ObjectSizeLessThan"))
        r->filter.form = LC_FORM_SIZE_LT;
    else
        r->filter.form = LC_FORM_AND;
    if (r->filter.form == LC_FORM_AND && r->filter.prefix.len == 0 && r->filter.ntags == 0 &&
        !r->filter.has_size_gt && !r->filter.has_size_lt)
        return malformed(errmsg, "And needs at least one predicate");
    return 0;
}

static int parse_expiration(const struct node *e, struct given *g, char *errmsg)
{
    const struct node *days = NULL, *date = NULL, *marker = NULL;
    for (const struct node *c = e->kid; c != NULL; c = c->next) {
        const struct node **slot = is(c, "Days") ? &days : is(c, "Date") ? &date
                                 : is(c, "ExpiredObjectDeleteMarker") ? &marker : NULL;
        if (slot == NULL || c->kid != NULL || once(slot, c, errmsg) != 0)
            return malformed(errmsg, NULL);
    }
    if ((days == NULL && date == NULL && marker == NULL) || (days != NULL && date != NULL))
        return malformed(errmsg, "Expiration needs exactly one of Days and Date, or "
                                 "ExpiredObjectDeleteMarker");
    if (days != NULL && (parse_long(days->text, &g->days) != 0 || g->days > INT32_MAX))
        return malformed(errmsg, "'Days' is not an integer");
    if (date != NULL && parse_date(date->text, &g->date_ms) != 0)
        return malformed(errmsg, "'Date' is not an ISO 8601 date");
    if (marker != NULL) {
        struct mg_str m = trimmed(marker->text);
        g->marker = lc__str_eq(m, (struct mg_str){"true", 4}) || lc__str_eq(m, (struct mg_str){"1", 1});
        if (!g->marker && !lc__str_eq(m, (struct mg_str){"false", 5}) &&
            !lc__str_eq(m, (struct mg_str){"0", 1}))
            return malformed(errmsg, "ExpiredObjectDeleteMarker must be true or false");
    }
    g->has_days = days != NULL, g->has_date = date != NULL, g->has_marker = marker != NULL;
    return 0;
}

static int parse_abort(const struct node *n, struct given *g, char *errmsg)
{
    const struct node *d = NULL;
    for (const struct node *c = n->kid; c != NULL; c = c->next)
        if (!is(c, "DaysAfterInitiation") || c->kid != NULL || once(&d, c, errmsg) != 0)
            return malformed(errmsg, NULL);
    if (d == NULL || parse_long(d->text, &g->abort_days) != 0 || g->abort_days > INT32_MAX)
        return malformed(errmsg, "AbortIncompleteMultipartUpload needs DaysAfterInitiation");
    g->has_abort = 1;
    return 0;
}

static int parse_status(const struct node *s, struct lc_rule *r, char *errmsg)
{
    struct mg_str v = trimmed(s->text);
    if (s->kid != NULL)
        return malformed(errmsg, NULL);
    if (lc__str_eq(v, (struct mg_str){"Enabled", 7}))
        r->enabled = 1;
    else if (!lc__str_eq(v, (struct mg_str){"Disabled", 8}))
        return malformed(errmsg, "Status must be Enabled or Disabled");
    return 0;
}

/* Pass 1 for one Rule: the schema. */
static int parse_rule(const struct node *rn, struct lc_rule *r, struct given *g,
                      struct mg_arena *a, char *errmsg)
{
    const struct node *id = NULL, *prefix = NULL, *status = NULL, *filter = NULL, *exp = NULL;
    const struct node *abort = NULL;
    int rv = 0;
    for (const struct node *c = rn->kid; rv == 0 && c != NULL; c = c->next) {
        if (is(c, "ID"))
            rv = c->kid ? malformed(errmsg, NULL) : once(&id, c, errmsg);
        else if (is(c, "Prefix"))
            rv = c->kid ? malformed(errmsg, NULL) : once(&prefix, c, errmsg);
        else if (is(c, "Status"))
            rv = once(&status, c, errmsg) || parse_status(c, r, errmsg);
        else if (is(c, "Filter"))
            rv = once(&filter, c, errmsg) || parse_filter(c, r, g, a, errmsg);
        else if (is(c, "Expiration"))
            rv = once(&exp, c, errmsg) || parse_expiration(c, g, errmsg);
        else if (is(c, "AbortIncompleteMultipartUpload"))
            rv = once(&abort, c, errmsg) || parse_abort(c, g, errmsg);
        else if (is(c, "Transition") || is(c, "NoncurrentVersionExpiration") ||
                 is(c, "NoncurrentVersionTransition"))
            g->unsupported = 1;
        else
            rv = malformed(errmsg, NULL);
    }
    if (rv != 0)
        return MG_EMALFORMEDXML; /* once() || parse_*() collapse to 1 */
    if (status == NULL)
        return malformed(errmsg, "Rule needs a Status");
    if ((prefix == NULL) == (filter == NULL))
        return malformed(errmsg, "Rule needs exactly one of Filter and Prefix");
    if (prefix != NULL) {
        r->filter.form = LC_FORM_PREFIX;
        r->filter.prefix = prefix->text;
    }
    if (id != NULL && id->text.len > 0)
        r->id = id->text, g->has_id = 1;
    return 0;
}

/* Pass 2 for one rule: values, then the invariants shared with the decoder. */
static int judge_rule(struct lc_rule *r, const struct given *g, char *errmsg)
{
    int tags = r->filter.ntags > 0, sizes = r->filter.has_size_gt || r->filter.has_size_lt;
    if (g->has_days && g->days <= 0)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg,
                        "'Days' for Expiration action must be a positive integer");
    if (g->has_date && g->date_ms % 86400000 != 0)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg, "'Date' must be at midnight GMT");
    if (g->has_marker && (g->has_days || g->has_date))
        return lc__fail(MG_EINVALIDARGUMENT, errmsg, "ExpiredObjectDeleteMarker cannot be "
                        "specified with Days or Date in a Lifecycle Expiration Policy");
    if (g->has_marker && g->marker && (tags || sizes))
        return lc__fail(MG_EINVALIDREQUEST, errmsg, "ExpiredObjectDeleteMarker cannot be "
                        "specified with %s.", tags ? "Tags" : "Object Size");
    if (g->has_abort && g->abort_days <= 0)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg, "'DaysAfterInitiation' for "
                        "AbortIncompleteMultipartUpload action must be a positive integer");
    if (r->filter.has_size_gt && g->size_gt < 0)
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "'ObjectSizeGreaterThan' should be between 0 and %lld", (long long)INT64_MAX);
    if (r->filter.has_size_lt && g->size_lt < 1)
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "'ObjectSizeLessThan' should be between 1 and %lld", (long long)INT64_MAX);
    r->filter.size_gt = r->filter.has_size_gt ? (uint64_t)g->size_gt : 0;
    r->filter.size_lt = r->filter.has_size_lt ? (uint64_t)g->size_lt : 0;
    r->exp_kind = g->has_days ? LC_EXP_DAYS : g->has_date ? LC_EXP_DATE
                : g->has_marker ? LC_EXP_MARKER_FALSE : LC_EXP_NONE;
    r->exp_days = g->has_days ? (uint32_t)g->days : 0;
    r->exp_date_ms = g->has_date ? g->date_ms : 0;
    r->abort_days = g->has_abort ? (uint32_t)g->abort_days : 0;
    /* A rule whose only actions are refused as NotImplemented below is not a rule with "no
     * action": a no-op expiration stands in for them while the rest is validated. */
    if (r->exp_kind == LC_EXP_NONE && !g->has_abort && g->unsupported)
        r->exp_kind = LC_EXP_MARKER_FALSE;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return lc__str_cmp(*(const struct mg_str *)a, *(const struct mg_str *)b);
}

/* IDs for rules given none: "rule-N", the lowest N >= 1 not given to any rule. */
static void name_rules(struct lc_config *cfg, struct mg_arena *a)
{
    struct mg_str *taken = mg_malloc((cfg->nrules + 1) * sizeof(*taken));
    size_t nt = 0, next = 1;
    for (size_t i = 0; i < cfg->nrules; i++)
        if (cfg->rules[i].id.len > 0)
            taken[nt++] = cfg->rules[i].id;
    qsort(taken, nt, sizeof(*taken), cmp_str);
    for (size_t i = 0; i < cfg->nrules; i++) {
        char id[32];
        struct mg_str s;
        if (cfg->rules[i].id.len > 0)
            continue;
        do {
            s.len = (size_t)snprintf(id, sizeof(id), "rule-%zu", next++);
            s.base = id;
        } while (bsearch(&s, taken, nt, sizeof(*taken), cmp_str) != NULL);
        cfg->rules[i].id = (struct mg_str){mg_arena_dup(a, id, s.len), s.len};
    }
    mg_free(taken);
}

/* Passes 2 and 3: the rule count and IDs, each rule's values and invariants in order, then
 * what the store cannot honour. */
static int judge(struct lc_config *cfg, const struct given *gs, struct mg_arena *a,
                 char *errmsg)
{
    int rv;
    if ((rv = lc__config_check_head(cfg, errmsg)) != 0)
        return rv;
    name_rules(cfg, a);
    for (size_t i = 0; i < cfg->nrules; i++)
        if ((rv = judge_rule(&cfg->rules[i], &gs[i], errmsg)) != 0 ||
            (rv = lc__rule_check(&cfg->rules[i], errmsg)) != 0)
            return rv;
    if ((rv = lc__config_check_overlap(cfg, errmsg)) != 0)
        return rv;
    for (size_t i = 0; i < cfg->nrules; i++) {
        if (gs[i].unsupported)
            return lc__fail(MG_ENOTIMPLEMENTED, errmsg, "Transitions and noncurrent-version "
                            "actions are not implemented (versioning is not supported)");
        if (gs[i].has_marker && gs[i].marker)
            return lc__fail(MG_ENOTIMPLEMENTED, errmsg, "ExpiredObjectDeleteMarker is not "
                            "implemented (versioning is not supported)");
    }
    return 0;
}

int lc_config_parse(struct mg_str xml, struct mg_arena *a, struct lc_config *out, char *errmsg)
{
    struct node *root = NULL;
    struct given *gs = NULL;
    size_t n = 0, i = 0;
    int rv;
    assert(a != NULL && out != NULL);
    memset(out, 0, sizeof(*out));
    if ((rv = tree_build(xml, a, &root, errmsg)) != 0)
        return rv;
    if (!is(root, "LifecycleConfiguration"))
        return malformed(errmsg, "expected root element LifecycleConfiguration");
    for (const struct node *c = root->kid; c != NULL; c = c->next, n++)
        if (!is(c, "Rule"))
            return malformed(errmsg, NULL);
    out->rules = mg_arena_alloc(a, (n ? n : 1) * sizeof(*out->rules));
    memset(out->rules, 0, (n ? n : 1) * sizeof(*out->rules));
    gs = mg_calloc(n ? n : 1, sizeof(*gs));
    for (const struct node *c = root->kid; c != NULL; c = c->next, i++)
        if ((rv = parse_rule(c, &out->rules[i], &gs[i], a, errmsg)) != 0)
            goto out;
    out->nrules = n;
    rv = judge(out, gs, a, errmsg);
out:
    mg_free(gs);
    if (rv != 0)
        memset(out, 0, sizeof(*out));
    return rv;
}

/* ----------------------------------------------------------------- writer */

/* Escape text for element content: markup characters, and every control byte as a character
 * reference so a prefix holding CR survives the parser's line-end normalization. */
static void put_text(struct mg_buf *b, struct mg_str s)
{
    size_t from = 0;
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.base[i];
        const char *ent = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : NULL;
        if (ent == NULL && c >= 0x20)
            continue;
        mg_buf_append(b, s.base + from, i - from);
        if (ent != NULL)
            mg_buf_append(b, ent, strlen(ent));
        else
            mg_buf_appendf(b, "&#%u;", c);
        from = i + 1;
    }
    mg_buf_append(b, s.base + from, s.len - from);
}

static void put_elem(struct mg_buf *b, const char *name, struct mg_str text)
{
    mg_buf_appendf(b, "<%s>", name);
    put_text(b, text);
    mg_buf_appendf(b, "</%s>", name);
}

static void put_tag(struct mg_buf *b, const struct lc_tag *t)
{
    mg_buf_append(b, "<Tag>", 5);
    put_elem(b, "Key", t->key);
    put_elem(b, "Value", t->value);
    mg_buf_append(b, "</Tag>", 6);
}

static void put_filter(struct mg_buf *b, const struct lc_filter *f)
{
    if (f->form == LC_FORM_PREFIX) {
        put_elem(b, "Prefix", f->prefix);
        return;
    }
    mg_buf_append(b, "<Filter>", 8);
    if (f->form == LC_FORM_AND)
        mg_buf_append(b, "<And>", 5);
    if (f->form == LC_FORM_FILTER_PREFIX || (f->form == LC_FORM_AND && f->prefix.len > 0))
        put_elem(b, "Prefix", f->prefix);
    for (size_t i = 0; i < f->ntags; i++)
        put_tag(b, &f->tags[i]);
    if (f->has_size_gt)
        mg_buf_appendf(b, "<ObjectSizeGreaterThan>%llu</ObjectSizeGreaterThan>",
                       (unsigned long long)f->size_gt);
    if (f->has_size_lt)
        mg_buf_appendf(b, "<ObjectSizeLessThan>%llu</ObjectSizeLessThan>",
                       (unsigned long long)f->size_lt);
    if (f->form == LC_FORM_AND)
        mg_buf_append(b, "</And>", 6);
    mg_buf_append(b, "</Filter>", 9);
}

static void put_date(struct mg_buf *b, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    mg_buf_appendf(b, "<Date>%04d-%02d-%02dT00:00:00.000Z</Date>", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday);
}

void lc_config_to_xml(const struct lc_config *cfg, struct mg_buf *out)
{
    mg_buf_appendf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                        "<LifecycleConfiguration xmlns=\"%s\">", S3_XMLNS);
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct lc_rule *r = &cfg->rules[i];
        mg_buf_append(out, "<Rule>", 6);
        put_elem(out, "ID", r->id);
        put_filter(out, &r->filter);
        mg_buf_appendf(out, "<Status>%s</Status>", r->enabled ? "Enabled" : "Disabled");
        if (r->exp_kind != LC_EXP_NONE) {
            mg_buf_append(out, "<Expiration>", 12);
            if (r->exp_kind == LC_EXP_DAYS)
                mg_buf_appendf(out, "<Days>%u</Days>", r->exp_days);
            else if (r->exp_kind == LC_EXP_DATE)
                put_date(out, r->exp_date_ms);
            else
                mg_buf_append(out, "<ExpiredObjectDeleteMarker>false</ExpiredObjectDeleteMarker>",
                              60);
            mg_buf_append(out, "</Expiration>", 13);
        }
        if (r->abort_days > 0)
            mg_buf_appendf(out, "<AbortIncompleteMultipartUpload><DaysAfterInitiation>%u"
                                "</DaysAfterInitiation></AbortIncompleteMultipartUpload>",
                           r->abort_days);
        mg_buf_append(out, "</Rule>", 7);
    }
    mg_buf_append(out, "</LifecycleConfiguration>", 25);
}
