/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The built-in workload table and its parser (see workload.h).
 *
 * Defaults follow warp (minio/warp cli flags) for the mixes and batch sizes,
 * with small objects and short runs so a benchmark of the metadata path fits
 * in a CI minute: warp uses 10 MiB objects for get/put/mixed and 5 minute
 * runs; we use 10 KiB and --duration 10 s. The Spotify mix is the λFS paper's
 * industrial trace mix (percent of operations).
 */
#include "tests/bench/workload.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/mem.h"

const char mgb_workload_builtin[] =
    "# name   fields (see workload.h)\n"
    "get      mix=GET:100 size=10KiB objects=2500 desc=\"GET random objects of a prepared set (warp get)\"\n"
    "put      mix=PUT:100 size=10KiB objects=0 desc=\"PUT new objects (warp put)\"\n"
    "stat     mix=HEAD:100 size=1KiB objects=2500 desc=\"HEAD random objects of a prepared set (warp stat)\"\n"
    "list     mix=LIST:100 size=1KiB objects=2500 list_max=100 desc=\"ListObjectsV2 max-keys 100 from a random key (warp list)\"\n"
    "delete   mix=DELETEMULTI:100 size=1KiB objects=10000 batch=100 desc=\"DeleteObjects of 100 prepared objects until none are left (warp delete)\"\n"
    "mixed    mix=GET:45,HEAD:30,PUT:15,DELETE:10 size=10KiB objects=2500 desc=\"GET 45 / STAT 30 / PUT 15 / DELETE 10 (warp mixed)\"\n"
    "create   mix=PUT:100 size=0 objects=0 desc=\"mdtest create: empty objects, over --prefixes prefixes\"\n"
    "md-stat  mix=HEAD:100 size=0 objects=2500 desc=\"mdtest stat: HEAD empty objects over --prefixes prefixes\"\n"
    "remove   mix=DELETE:100 size=0 objects=2500 desc=\"mdtest remove: DeleteObject each prepared empty object once\"\n"
    "spotify  mix=GET:71.84,HEAD:13.54,LISTDIR:8.17,STATDIR:3.77,PUT:1.09,LISTFILE:0.68,RENAME:0.55,DELETE:0.34,MKDIR:0.02"
    " size=4KiB objects=2000 prefixes=20 list_max=100 rate=pareto alpha=2 window_s=15 tick_ms=10"
    " desc=\"λFS Spotify mix, open loop: Pareto(alpha 2, location --rate) ops/s redrawn every 15 s\"\n"
    "hello    mix=HELLO:100 size=0 objects=0 bucket=no desc=\"GET --path, no auth: mgbench's own overhead (compare with wrk)\"\n";

#define X(name, doc) #name,
static const char *const lop_names[] = {MGB_LOP_TABLE(X)};
#undef X
#define X(name, doc) doc,
static const char *const lop_docs[] = {MGB_LOP_TABLE(X)};
#undef X
#define X(name) #name,
static const char *const op_names[] = {MGB_OP_TABLE(X)};
#undef X

const char *mgb_lop_name(enum mgb_lop op)
{
    return op < MGB_LOP_COUNT ? lop_names[op] : "?";
}

const char *mgb_lop_doc(enum mgb_lop op)
{
    return op < MGB_LOP_COUNT ? lop_docs[op] : "?";
}

const char *mgb_op_name(enum mgb_op op)
{
    return op < MGB_OP_COUNT ? op_names[op] : "?";
}

int mgb_lop_needs_key(enum mgb_lop op)
{
    return op == MGB_LOP_GET || op == MGB_LOP_HEAD || op == MGB_LOP_DELETE ||
           op == MGB_LOP_DELETEMULTI || op == MGB_LOP_LIST || op == MGB_LOP_LISTFILE ||
           op == MGB_LOP_RENAME;
}

int mgb_lop_consumes_key(enum mgb_lop op)
{
    return op == MGB_LOP_DELETE || op == MGB_LOP_DELETEMULTI || op == MGB_LOP_RENAME;
}

static int errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int mgb_size_parse(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0)
        return -1;
    uint64_t mul = 1;
    if (*end == 0 || strcmp(end, "B") == 0)
        mul = 1;
    else if (strcmp(end, "KiB") == 0 || strcasecmp(end, "k") == 0 || strcasecmp(end, "KB") == 0)
        mul = 1024;
    else if (strcmp(end, "MiB") == 0 || strcasecmp(end, "m") == 0 || strcasecmp(end, "MB") == 0)
        mul = 1024 * 1024;
    else if (strcmp(end, "GiB") == 0 || strcasecmp(end, "g") == 0 || strcasecmp(end, "GB") == 0)
        mul = 1024ULL * 1024 * 1024;
    else
        return -1;
    *out = (uint64_t)(v * (double)mul + 0.5);
    return 0;
}

static void defaults(struct mgb_workload *w)
{
    memset(w, 0, sizeof(*w));
    w->size_bytes = 10 * 1024;
    w->prefixes = 1;
    w->batch = 100;
    w->list_max = 100;
    w->alpha = 2.0;
    w->window_s = 15;
    w->tick_ms = 10;
    w->bucket = 1;
}

static int parse_u32(const char *v, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (end == v || *end || errno || x > UINT32_MAX)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

static int parse_mix(const char *v, struct mgb_workload *w, char *err, size_t errlen)
{
    memset(w->weight, 0, sizeof(w->weight));
    while (*v) {
        const char *colon = strchr(v, ':');
        if (!colon)
            return errf(err, errlen, "mix: expected OP:weight at \"%s\"", v);
        size_t nl = (size_t)(colon - v);
        int found = -1;
        for (int i = 0; i < MGB_LOP_COUNT; i++)
            if (strlen(lop_names[i]) == nl && strncasecmp(v, lop_names[i], nl) == 0)
                found = i;
        if (found < 0)
            return errf(err, errlen, "mix: unknown operation \"%.*s\"", (int)nl, v);
        char *end;
        double wt = strtod(colon + 1, &end);
        if (end == colon + 1 || wt < 0)
            return errf(err, errlen, "mix: bad weight for %s", lop_names[found]);
        w->weight[found] += wt;
        v = end;
        if (*v == ',')
            v++;
        else if (*v)
            return errf(err, errlen, "mix: expected ',' at \"%s\"", v);
    }
    return 0;
}

int mgb_workload_set(struct mgb_workload *w, const char *k, const char *v, char *err,
                     size_t errlen)
{
    if (strcmp(k, "mix") == 0)
        return parse_mix(v, w, err, errlen);
    if (strcmp(k, "size") == 0)
        return mgb_size_parse(v, &w->size_bytes) ? errf(err, errlen, "bad size \"%s\"", v) : 0;
    if (strcmp(k, "objects") == 0) {
        char *end;
        w->objects = strtoull(v, &end, 10);
        return (end == v || *end) ? errf(err, errlen, "bad objects \"%s\"", v) : 0;
    }
    uint32_t *u = strcmp(k, "prefixes") == 0   ? &w->prefixes
                  : strcmp(k, "batch") == 0    ? &w->batch
                  : strcmp(k, "list_max") == 0 ? &w->list_max
                  : strcmp(k, "window_s") == 0 ? &w->window_s
                  : strcmp(k, "tick_ms") == 0  ? &w->tick_ms
                                               : NULL;
    if (u)
        return parse_u32(v, u) ? errf(err, errlen, "bad %s \"%s\"", k, v) : 0;
    if (strcmp(k, "alpha") == 0) {
        char *end;
        w->alpha = strtod(v, &end);
        return (end == v || *end || w->alpha <= 1.0)
                   ? errf(err, errlen, "alpha must be a number > 1, got \"%s\"", v)
                   : 0;
    }
    if (strcmp(k, "rate") == 0) {
        if (strcmp(v, "closed") && strcmp(v, "pareto"))
            return errf(err, errlen, "rate must be closed or pareto, got \"%s\"", v);
        w->open_loop = strcmp(v, "pareto") == 0;
        return 0;
    }
    if (strcmp(k, "keys") == 0) {
        if (strcmp(v, "plain") && strcmp(v, "time"))
            return errf(err, errlen, "keys must be plain or time, got \"%s\"", v);
        w->keys_time = strcmp(v, "time") == 0;
        return 0;
    }
    if (strcmp(k, "bucket") == 0) {
        if (strcmp(v, "yes") && strcmp(v, "no"))
            return errf(err, errlen, "bucket must be yes or no, got \"%s\"", v);
        w->bucket = strcmp(v, "yes") == 0;
        return 0;
    }
    if (strcmp(k, "desc") == 0) {
        snprintf(w->desc, sizeof(w->desc), "%s", v);
        return 0;
    }
    return errf(err, errlen, "unknown field \"%s\"", k);
}

/* Next whitespace-separated token of *p into tok (a quoted value keeps its spaces). */
static int next_token(const char **p, char *tok, size_t cap)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == 0 || *s == '#' || *s == '\n' || *s == '\r')
        return 0;
    size_t n = 0;
    int quoted = 0;
    for (; *s && *s != '\n' && *s != '\r'; s++) {
        if (*s == '"') {
            quoted = !quoted;
            continue;
        }
        if (!quoted && (*s == ' ' || *s == '\t'))
            break;
        if (n + 1 < cap)
            tok[n++] = *s;
    }
    tok[n] = 0;
    *p = s;
    return quoted ? -1 : 1;
}

int mgb_workload_parse_line(const char *line, struct mgb_workload *w, char *err, size_t errlen)
{
    char tok[512];
    defaults(w);
    int rv = next_token(&line, tok, sizeof(tok));
    if (rv == 0)
        return 1;
    if (rv < 0 || strchr(tok, '='))
        return errf(err, errlen, "expected a workload name first");
    if (strlen(tok) >= sizeof(w->name))
        return errf(err, errlen, "name too long");
    memcpy(w->name, tok, strlen(tok) + 1);
    while ((rv = next_token(&line, tok, sizeof(tok))) > 0) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return errf(err, errlen, "expected key=value, got \"%s\"", tok);
        *eq = 0;
        if (mgb_workload_set(w, tok, eq + 1, err, errlen))
            return -1;
    }
    if (rv < 0)
        return errf(err, errlen, "unterminated quote");
    return mgb_workload_finish(w, err, errlen);
}

int mgb_workload_finish(struct mgb_workload *w, char *err, size_t errlen)
{
    double sum = 0;
    for (int i = 0; i < MGB_LOP_COUNT; i++) {
        sum += w->weight[i];
        w->cum[i] = sum;
    }
    if (sum <= 0)
        return errf(err, errlen, "workload %s: empty mix", w->name);
    if (w->prefixes == 0 || w->batch == 0 || w->batch > 1000 || w->list_max == 0 ||
        w->list_max > 1000)
        return errf(err, errlen, "workload %s: prefixes >= 1, batch and list_max in 1..1000",
                    w->name);
    if (w->open_loop && (w->window_s == 0 || w->tick_ms == 0))
        return errf(err, errlen, "workload %s: window_s and tick_ms must be > 0", w->name);
    int needs = 0, makes = 0;
    for (int i = 0; i < MGB_LOP_COUNT; i++) {
        if (w->weight[i] > 0 && mgb_lop_needs_key((enum mgb_lop)i))
            needs = 1;
        if (w->weight[i] > 0 && (i == MGB_LOP_PUT))
            makes = 1;
    }
    if (needs && !makes && w->objects == 0)
        return errf(err, errlen, "workload %s: its mix needs objects but objects=0", w->name);
    return 0;
}

int mgb_workload_parse_table(const char *text, struct mgb_workload **ws, size_t *n, char *err,
                             size_t errlen)
{
    int lineno = 0;
    while (*text) {
        const char *eol = strchr(text, '\n');
        size_t len = eol ? (size_t)(eol - text) : strlen(text);
        char *line = mg_strndup(text, len);
        struct mgb_workload w;
        char e[200];
        lineno++;
        int rv = mgb_workload_parse_line(line, &w, e, sizeof(e));
        mg_free(line);
        if (rv < 0)
            return errf(err, errlen, "line %d: %s", lineno, e);
        if (rv == 0) {
            size_t i = 0;
            while (i < *n && strcmp((*ws)[i].name, w.name) != 0)
                i++;
            if (i == *n) {
                *ws = mg_realloc(*ws, (*n + 1) * sizeof(**ws));
                (*n)++;
            }
            (*ws)[i] = w;
        }
        text += len + (eol ? 1 : 0);
    }
    return 0;
}
