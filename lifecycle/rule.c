/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rule model's semantics: the validity of a rule and of a configuration
 * (shared by the parser and the decoder), filter matching, due times with S3's
 * rounding to the next (scaled) midnight, and the x-amz-expiration value.
 * Error codes and messages follow what S3 answers for each fault: schema
 * faults are MalformedXML, bad values InvalidArgument, contradictions between
 * parts of a rule InvalidRequest. S3's error table (ErrorResponses,
 * InvalidRequest) names "At least one action must be specified in a lifecycle
 * rule.", "At least one lifecycle rule must be specified." and "The number of
 * lifecycle rules must not exceed the allowed limit of 1000 rules."; the
 * other messages are those S3 and s3-tests use. Ceph RGW 16.2 (the peer,
 * probed with the same 42 bodies on 2026-12-01) agrees on Status, Days and
 * DaysAfterInitiation <= 0, ID length, duplicate IDs, a missing Days/Date and
 * AbortIncompleteMultipartUpload with tags, but answers MalformedXML where the
 * error table says InvalidRequest and accepts what S3's schema refuses (two
 * predicates in one Filter, Filter beside Prefix, duplicate tag keys,
 * ObjectSizeGreaterThan >= ObjectSizeLessThan, a DOCTYPE, transitions), so
 * it is not followed there.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "lifecycle"
#include "lifecycle/internal.h"

#define DAY_MS 86400000LL
#define DATE_MS_END 253402300800000LL /* 10000-01-01T00:00:00Z: dates have 4 year digits */

/* ------------------------------------------------------------------ helpers */

long lc__utf8_len(struct mg_str s)
{
    long n = 0;
    for (size_t i = 0; i < s.len; n++) {
        unsigned char c = (unsigned char)s.base[i];
        uint32_t cp, min;
        size_t more;
        if (c < 0x80)
            cp = c, more = 0, min = 0;
        else if ((c & 0xe0) == 0xc0)
            cp = c & 0x1fu, more = 1, min = 0x80;
        else if ((c & 0xf0) == 0xe0)
            cp = c & 0x0fu, more = 2, min = 0x800;
        else if ((c & 0xf8) == 0xf0)
            cp = c & 0x07u, more = 3, min = 0x10000;
        else
            return -1;
        if (s.len - i <= more)
            return -1;
        for (size_t k = 1; k <= more; k++) {
            unsigned char d = (unsigned char)s.base[i + k];
            if ((d & 0xc0) != 0x80)
                return -1;
            cp = cp << 6 | (d & 0x3fu);
        }
        /* XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF] */
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe ||
            cp == 0xffff || (cp < 0x20 && cp != 0x9 && cp != 0xa && cp != 0xd))
            return -1;
        i += more + 1;
    }
    return n;
}

int lc__str_eq(struct mg_str a, struct mg_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.base, b.base, a.len) == 0);
}

int lc__fail(int rv, char *errmsg, const char *fmt, ...)
{
    va_list ap;
    assert(rv != 0);
    if (errmsg != NULL) {
        va_start(ap, fmt);
        vsnprintf(errmsg, LC_ERRMSG_LEN, fmt, ap);
        va_end(ap);
    }
    return rv;
}

/* ---------------------------------------------------------------- validity */

static int check_tags(const struct lc_filter *f, char *errmsg)
{
    if (f->ntags > LC_FILTER_TAGS_MAX)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg,
                        "A filter can name at most %d tags", LC_FILTER_TAGS_MAX);
    for (size_t i = 0; i < f->ntags; i++) {
        long kl = lc__utf8_len(f->tags[i].key), vl = lc__utf8_len(f->tags[i].value);
        if (kl <= 0 || vl < 0)
            return lc__fail(MG_EMALFORMEDXML, errmsg, "A filter tag needs a non-empty Key");
        if (kl > LC_TAG_KEY_MAX)
            return lc__fail(MG_EINVALIDTAG, errmsg, "The TagKey you have provided is too long, "
                                                    "max %d", LC_TAG_KEY_MAX);
        if (vl > LC_TAG_VALUE_MAX)
            return lc__fail(MG_EINVALIDTAG, errmsg, "The TagValue you have provided is too "
                                                    "long, max %d", LC_TAG_VALUE_MAX);
        for (size_t j = 0; j < i; j++)
            if (lc__str_eq(f->tags[i].key, f->tags[j].key))
                return lc__fail(MG_EINVALIDREQUEST, errmsg, "Duplicate Tag Keys are not allowed.");
    }
    return 0;
}

static int check_sizes(const struct lc_filter *f, char *errmsg)
{
    if ((!f->has_size_gt && f->size_gt != 0) || (!f->has_size_lt && f->size_lt != 0))
        return lc__fail(MG_EMALFORMEDXML, errmsg, "size bound set without its element");
    if (f->has_size_gt && f->size_gt > (uint64_t)INT64_MAX)
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "'ObjectSizeGreaterThan' should be between 0 and %lld", (long long)INT64_MAX);
    if (f->has_size_lt && (f->size_lt < 1 || f->size_lt > (uint64_t)INT64_MAX))
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "'ObjectSizeLessThan' should be between 1 and %lld", (long long)INT64_MAX);
    if (f->has_size_gt && f->has_size_lt && f->size_lt <= f->size_gt)
        return lc__fail(MG_EINVALIDREQUEST, errmsg, "'ObjectSizeLessThan' has to be a value "
                                                    "greater than 'ObjectSizeGreaterThan'.");
    return 0;
}

/* Which predicates each form may carry; And needs at least one. */
static int check_form(const struct lc_filter *f, char *errmsg)
{
    int has_prefix = f->prefix.len > 0, has_tags = f->ntags > 0;
    int sizes = f->has_size_gt + f->has_size_lt, ok;
    switch (f->form) {
    case LC_FORM_PREFIX:
    case LC_FORM_FILTER_PREFIX: ok = !has_tags && sizes == 0; break;
    case LC_FORM_EMPTY: ok = !has_prefix && !has_tags && sizes == 0; break;
    case LC_FORM_TAG: ok = !has_prefix && f->ntags == 1 && sizes == 0; break;
    case LC_FORM_SIZE_GT: ok = !has_prefix && !has_tags && f->has_size_gt && sizes == 1; break;
    case LC_FORM_SIZE_LT: ok = !has_prefix && !has_tags && f->has_size_lt && sizes == 1; break;
    case LC_FORM_AND: ok = has_prefix || has_tags || sizes > 0; break;
    default: ok = 0;
    }
    if (!ok)
        return lc__fail(MG_EMALFORMEDXML, errmsg, "The XML you provided was not well-formed or "
                                                  "did not validate against our published schema");
    if (f->prefix.len > LC_PREFIX_MAX || lc__utf8_len(f->prefix) < 0)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg,
                        "The prefix is longer than the longest key (%d bytes)", LC_PREFIX_MAX);
    return 0;
}

static int check_expiration(const struct lc_rule *r, char *errmsg)
{
    int ok;
    switch (r->exp_kind) {
    case LC_EXP_NONE:
    case LC_EXP_MARKER_FALSE: ok = r->exp_days == 0 && r->exp_date_ms == 0; break;
    case LC_EXP_DAYS:
        if (r->exp_days == 0 || r->exp_days > INT32_MAX)
            return lc__fail(MG_EINVALIDARGUMENT, errmsg,
                            "'Days' for Expiration action must be a positive integer");
        ok = r->exp_date_ms == 0;
        break;
    case LC_EXP_DATE:
        if (r->exp_date_ms < 0 || r->exp_date_ms >= DATE_MS_END || r->exp_date_ms % DAY_MS != 0)
            return lc__fail(MG_EINVALIDARGUMENT, errmsg, "'Date' must be at midnight GMT");
        ok = r->exp_days == 0;
        break;
    default: ok = 0;
    }
    if (!ok)
        return lc__fail(MG_EMALFORMEDXML, errmsg, "Expiration holds more than one of Days, Date "
                                                  "and ExpiredObjectDeleteMarker");
    return 0;
}

int lc__rule_check(const struct lc_rule *r, char *errmsg)
{
    const struct lc_filter *f = &r->filter;
    long idl = lc__utf8_len(r->id);
    int rv;
    assert(r != NULL);
    if (idl < 1 || idl > LC_ID_MAX)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg,
                        "ID length should not exceed allowed limit of %d", LC_ID_MAX);
    if (r->enabled != 0 && r->enabled != 1)
        return lc__fail(MG_EMALFORMEDXML, errmsg, "Status must be Enabled or Disabled");
    if ((rv = check_form(f, errmsg)) != 0 || (rv = check_tags(f, errmsg)) != 0 ||
        (rv = check_sizes(f, errmsg)) != 0 || (rv = check_expiration(r, errmsg)) != 0)
        return rv;
    if (r->exp_kind == LC_EXP_NONE && r->abort_days == 0)
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "At least one action must be specified in a lifecycle rule.");
    if (r->abort_days > INT32_MAX)
        return lc__fail(MG_EINVALIDARGUMENT, errmsg, "'DaysAfterInitiation' for "
                        "AbortIncompleteMultipartUpload action must be a positive integer");
    if (r->abort_days > 0 && f->ntags > 0)
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "AbortIncompleteMultipartUpload cannot be specified with Tags.");
    if (r->abort_days > 0 && (f->has_size_gt || f->has_size_lt))
        return lc__fail(MG_EINVALIDREQUEST, errmsg,
                        "AbortIncompleteMultipartUpload cannot be specified with Object Size.");
    return 0;
}

int lc__str_cmp(struct mg_str a, struct mg_str b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.base, b.base, n) : 0;
    return c != 0 ? c : (a.len > b.len) - (a.len < b.len);
}

/* qsort order of an array of struct mg_str pointers. */
static int cmp_strp(const void *a, const void *b)
{
    return lc__str_cmp(**(const struct mg_str *const *)a, **(const struct mg_str *const *)b);
}

/* Sorted, so a duplicate is a neighbour: O(n log n) for 1,000 rules. */
static int check_ids(const struct lc_config *cfg, char *errmsg)
{
    const struct mg_str **ids = mg_malloc(cfg->nrules * sizeof(*ids));
    int rv = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        long n = lc__utf8_len(cfg->rules[i].id);
        if (n > LC_ID_MAX || n < 0)
            rv = rv ? rv : lc__fail(MG_EINVALIDARGUMENT, errmsg,
                                    "ID length should not exceed allowed limit of %d", LC_ID_MAX);
        ids[i] = &cfg->rules[i].id;
    }
    qsort(ids, cfg->nrules, sizeof(*ids), cmp_strp);
    for (size_t i = 1; rv == 0 && i < cfg->nrules; i++)
        if (ids[i]->len > 0 && lc__str_eq(*ids[i], *ids[i - 1]))
            rv = lc__fail(MG_EINVALIDARGUMENT, errmsg,
                          "Rule ID must be unique. Found same ID for more than one rule");
    mg_free(ids);
    return rv;
}

static int starts_with(struct mg_str s, struct mg_str p)
{
    return s.len >= p.len && (p.len == 0 || memcmp(s.base, p.base, p.len) == 0);
}

/* Before "Lifecycle V2" (rules with their own Prefix), no two rules taking the same kind of
 * action may have overlapping prefixes: S3 answers "Found overlapping prefixes 'a' and 'ab'
 * for same action type 'Expiration'". Sorted, a prefix that begins a later one begins its
 * successor, so comparing neighbours finds every overlap there is. */
static int check_overlap(const struct lc_config *cfg, int abort_kind, char *errmsg)
{
    const struct mg_str **ps = mg_malloc(cfg->nrules * sizeof(*ps));
    size_t n = 0;
    int rv = 0;
    for (size_t i = 0; i < cfg->nrules; i++)
        if (abort_kind ? cfg->rules[i].abort_days > 0 : cfg->rules[i].exp_kind != LC_EXP_NONE)
            ps[n++] = &cfg->rules[i].filter.prefix;
    qsort(ps, n, sizeof(*ps), cmp_strp);
    for (size_t i = 1; rv == 0 && i < n; i++)
        if (starts_with(*ps[i], *ps[i - 1]))
            rv = lc__fail(MG_EINVALIDREQUEST, errmsg, "Found overlapping prefixes '%.*s' and "
                          "'%.*s' for same action type '%s'", (int)ps[i - 1]->len, ps[i - 1]->base,
                          (int)ps[i]->len, ps[i]->base,
                          abort_kind ? "AbortIncompleteMultipartUpload" : "Expiration");
    mg_free(ps);
    return rv;
}

int lc__config_check_head(const struct lc_config *cfg, char *errmsg)
{
    int rv;
    if (cfg->nrules == 0)
        return lc__fail(MG_EINVALIDREQUEST, errmsg, "At least one lifecycle rule must be "
                                                    "specified.");
    if (cfg->nrules > LC_RULES_MAX)
        return lc__fail(MG_EINVALIDREQUEST, errmsg, "The number of lifecycle rules must not "
                        "exceed the allowed limit of %d rules.", LC_RULES_MAX);
    if ((rv = check_ids(cfg, errmsg)) != 0)
        return rv;
    /* S3 calls a configuration whose rules use Filter "Lifecycle V2": one kind per document. */
    for (size_t i = 1; i < cfg->nrules; i++)
        if ((cfg->rules[i].filter.form == LC_FORM_PREFIX) !=
            (cfg->rules[0].filter.form == LC_FORM_PREFIX))
            return lc__fail(MG_EINVALIDREQUEST, errmsg,
                            cfg->rules[0].filter.form == LC_FORM_PREFIX
                                ? "Filter element can only be used in Lifecycle V2."
                                : "Base level prefix cannot be used in Lifecycle V2, prefixes "
                                  "are only supported in the Filter.");
    return 0;
}

int lc__config_check_overlap(const struct lc_config *cfg, char *errmsg)
{
    int rv;
    if (cfg->nrules == 0 || cfg->rules[0].filter.form != LC_FORM_PREFIX)
        return 0;
    if ((rv = check_overlap(cfg, 0, errmsg)) != 0)
        return rv;
    return check_overlap(cfg, 1, errmsg);
}

int lc__config_check(const struct lc_config *cfg, char *errmsg)
{
    int rv = lc__config_check_head(cfg, errmsg);
    if (rv != 0)
        return rv;
    for (size_t i = 0; i < cfg->nrules; i++)
        if ((rv = lc__rule_check(&cfg->rules[i], errmsg)) != 0)
            return rv;
    return lc__config_check_overlap(cfg, errmsg);
}

/* ---------------------------------------------------------------- matching */

static int has_tag(const struct lc_object *obj, const struct lc_tag *t)
{
    for (size_t i = 0; i < obj->ntags; i++)
        if (lc__str_eq(obj->tags[i].key, t->key) && lc__str_eq(obj->tags[i].value, t->value))
            return 1;
    return 0;
}

int lc_rule_matches(const struct lc_rule *r, const struct lc_object *obj)
{
    const struct lc_filter *f = &r->filter;
    if (obj->key.len < f->prefix.len ||
        (f->prefix.len > 0 && memcmp(obj->key.base, f->prefix.base, f->prefix.len) != 0))
        return 0;
    if (f->has_size_gt && !(obj->size > f->size_gt))
        return 0;
    if (f->has_size_lt && !(obj->size < f->size_lt))
        return 0;
    for (size_t i = 0; i < f->ntags; i++)
        if (!has_tag(obj, &f->tags[i]))
            return 0;
    return 1;
}

int64_t lc_due_after(int64_t from_ms, uint32_t days, uint32_t day_seconds)
{
    int64_t day_ms = (int64_t)day_seconds * 1000, t, rem;
    assert(day_seconds >= 1);
    if (from_ms > INT64_MAX - (int64_t)days * day_ms)
        return INT64_MAX;
    t = from_ms + (int64_t)days * day_ms;
    rem = t % day_ms;
    if (rem < 0)
        rem += day_ms; /* before the epoch: % truncates toward zero */
    if (rem == 0)
        return t;
    return t - rem > INT64_MAX - day_ms ? INT64_MAX : t - rem + day_ms;
}

int lc_config_expiry(const struct lc_config *cfg, const struct lc_object *obj,
                     uint32_t day_seconds, int64_t *due_ms, const struct lc_rule **rule)
{
    const struct lc_rule *best = NULL;
    int64_t best_ms = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct lc_rule *r = &cfg->rules[i];
        int64_t at;
        if (!r->enabled || (r->exp_kind != LC_EXP_DAYS && r->exp_kind != LC_EXP_DATE) ||
            !lc_rule_matches(r, obj))
            continue;
        at = r->exp_kind == LC_EXP_DATE ? r->exp_date_ms
                                         : lc_due_after(obj->mtime_ms, r->exp_days, day_seconds);
        if (best == NULL || at < best_ms)
            best = r, best_ms = at;
    }
    if (best == NULL)
        return 0;
    *due_ms = best_ms;
    *rule = best;
    return 1;
}

int lc_config_abort_due(const struct lc_config *cfg, struct mg_str key, int64_t initiated_ms,
                        uint32_t day_seconds, int64_t *due_ms, const struct lc_rule **rule)
{
    const struct lc_rule *best = NULL;
    struct lc_object upload = {.key = key};
    int64_t best_ms = 0;
    for (size_t i = 0; i < cfg->nrules; i++) {
        const struct lc_rule *r = &cfg->rules[i];
        int64_t at;
        if (!r->enabled || r->abort_days == 0 || !lc_rule_matches(r, &upload))
            continue;
        at = lc_due_after(initiated_ms, r->abort_days, day_seconds);
        if (best == NULL || at < best_ms)
            best = r, best_ms = at;
    }
    if (best == NULL)
        return 0;
    *due_ms = best_ms;
    *rule = best;
    return 1;
}

/* ------------------------------------------------------------------ header */

static int header_plain(struct mg_str id)
{
    for (size_t i = 0; i < id.len; i++) {
        unsigned char c = (unsigned char)id.base[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

int lc_expiration_header(int64_t due_ms, struct mg_str rule_id, struct mg_buf *out)
{
    static const char wday[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t;
    struct tm tm;
    if (due_ms < 0 || due_ms >= DATE_MS_END) /* an HTTP-date has four year digits */
        return MG_EINVALIDARGUMENT;
    t = (time_t)(due_ms / 1000);
    gmtime_r(&t, &tm); /* not strftime: %a and %b follow the locale */
    mg_buf_appendf(out, "expiry-date=\"%s, %02d %s %04d %02d:%02d:%02d GMT\", rule-id=\"",
                   wday[tm.tm_wday], tm.tm_mday, mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour,
                   tm.tm_min, tm.tm_sec);
    if (header_plain(rule_id))
        mg_buf_append(out, rule_id.base, rule_id.len);
    else
        mg_uri_encode(rule_id, 1, out);
    mg_buf_append(out, "\"", 1);
    return 0;
}
