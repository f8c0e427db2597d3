/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `mgbench expiry` (see expiry.h and README.md, "Lifecycle expiry").
 *
 * Key layout of one run (N = --objects, a quarter of them survive):
 *   logs/<yesterday>T<hh:mm:ss.uuuuuu>-<seq>   the oldest 75 % (ids 0 .. 3N/4-1)
 *   logs/<today>T<hh:mm:ss.uuuuuu>-<seq>       the newest 25 %
 *   keep/<today>T<hh:mm:ss.uuuuuu>-<seq>       the untouched prefix (--keep-objects)
 * Timestamps grow with seq inside a day, so keys sort in write order, and the one rule
 * prefix "logs/<yesterday>" covers exactly the oldest 75 %. The LIST loops run
 * ListObjectsV2 max-keys=1000 on prefix "logs/" (before expiry: 1,000 of the old keys;
 * during: the first 1,000 not yet expired, after all tombstones of the expired ones;
 * after: 1,000 of the survivors) and on "keep/".
 *
 * Timeline per configuration (t = 0 when the rule is PUT): load (untimed, the run
 * engine's prepare phase), "before" (--before s of LIST loops without a rule), rule
 * set, "during" (until the expired count reaches 3N/4, the LIST shows no old key, the
 * count stalls for --stall s, or --wait s), "after" (--after s). Expiry is observed from
 * /metrics (metagate_lifecycle_expired_total) when the server has it, else from the
 * LIST loop on logs/ (the first key changes; no old key is left).
 *
 * --delete-objects (issue 8 done-when 6): no rule; at t = 0 one client deletes the same
 * oldest 75 % itself with DeleteObjects, --delete-batch keys a request (1,000, as a client
 * would), in key order on one connection, and "during" lasts until its last request is
 * answered. Everything else is the same, plus a third loop: a 1-key LIST of logs/ (the
 * issue's "a 1-key LIST takes 520 ms"), and the seconds until LIST is under 5 ms.
 */
#include "tests/bench/expiry.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "common/sig.h"
#include "tests/bench/run.h"

#define LIST_CAP (2u << 20)    /* response bytes kept of one LIST (1,000 keys: ~300 KiB) */
#define METRICS_CAP (1u << 20)
#define PROGRESS_S 3.0         /* a progress line every PROGRESS_S seconds */
#define RECOVER_WINDOW_S 1.0   /* recover_s: median over 1 s windows */
#define UNDER_MS 5.0           /* under_5ms_s: the absolute target of issue 8 done-when 6 */
#define DEL_BATCH_MAX 1000     /* DeleteObjects: at most 1,000 keys a request (S3 API) */
#define DEF_AK "AKIAIOSFODNN7EXAMPLE"
#define DEF_SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

/* ------------------------------------------------------ pure computations */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double mgb_exp_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    if (q >= 1.0)
        return v[n - 1];
    double r = ceil(q * (double)n);
    size_t rank = r < 1 ? 1 : (size_t)r;
    return v[rank - 1];
}

double mgb_exp_recover_s(const struct mgb_exp_sample *s, size_t n, double t_end,
                         double target_ms, double window_s)
{
    size_t i = 0;
    while (i < n && s[i].t_s < t_end)
        i++;
    double *w = NULL;
    size_t wcap = 0;
    double found = -1;
    for (; i < n && found < 0; i++) {
        double until = s[i].t_s + window_s;
        if (s[n - 1].t_s < until)
            break; /* this window (and every later one) is not wholly observed */
        size_t k = i;
        while (k < n && s[k].t_s < until)
            k++;
        if (k - i > wcap) {
            wcap = k - i;
            w = mg_realloc(w, wcap * sizeof(*w));
        }
        for (size_t j = i; j < k; j++)
            w[j - i] = s[j].ms;
        if (mgb_exp_quantile(w, k - i, 0.5) <= target_ms)
            found = s[i].t_s - t_end;
    }
    mg_free(w);
    return found;
}

int mgb_exp_metric(const char *text, const char *name, double *out)
{
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nl) != 0 || (p[nl] != ' ' && p[nl] != '\t'))
            continue;
        char *end;
        double v = strtod(p + nl, &end);
        if (end == p + nl)
            return -1;
        *out = v;
        return 0;
    }
    return -1;
}

/* ------------------------------------------------------------- state */

/* PFX_LOGS1 (a 1-key LIST of logs/) runs in --delete-objects mode only. */
enum { PFX_LOGS, PFX_KEEP, PFX_LOGS1, PFX_COUNT };
static const char *const pfx_name[PFX_COUNT] = {"logs/", "keep/", "logs/1"};

enum { PH_BEFORE, PH_DURING, PH_AFTER, PH_COUNT };
static const char *const ph_name[PH_COUNT] = {"before", "during", "after"};

struct xopts {
    uint64_t objects, keep;
    const char *configs, *json, *plot, *size, *endpoint, *metrics_url, *metagate, *name;
    const char *access_key, *secret_key, *bucket, *region;
    double day_s, before_s, after_s, wait_s, stall_s, poll_s, tolerance;
    uint64_t concurrency, threads, del_batch;
    int keep_data;
    int del_mode; /* --delete-objects: DeleteObjects instead of a rule */
};

/* The LIST loops a run has: logs/ and keep/, plus the 1-key one when deleting. */
static int pfx_count(const struct xopts *o)
{
    return o->del_mode ? PFX_COUNT : PFX_LOGS1;
}

/* The key space of one run (see the file comment). */
struct keyspace {
    uint64_t n_old, n_new, n_keep;
    char old_day[16], new_day[16];
    int64_t old_midnight, new_midnight; /* unix s */
    uint64_t step_old_us, step_new_us;
    char rule_prefix[32];               /* "logs/<old_day>" */
};

struct series {
    struct mgb_exp_sample *v;
    size_t n, cap;
};

struct ctx;

/* One LIST loop (its own thread and connection). */
struct lister {
    struct ctx *x;
    int which;                     /* PFX_* */
    pthread_t tid;
    struct series s;               /* owned by the thread until joined */
    _Atomic int stop;
    _Atomic uint64_t count;
    _Atomic uint64_t last_us;      /* latency of the last LIST */
    _Atomic uint64_t errors;
    /* logs/ only: what the first key says about expiry (scenario clock, ns; 0: not yet) */
    /* Whether a LIST still returns the same keys as the last one before the rule (any
     * deletion order: RGW's is not key order). */
    _Atomic uint64_t t_unchanged;  /* send time of the last LIST after the rule, same keys */
    _Atomic uint64_t t_changed;    /* the first LIST after the rule with other keys */
    _Atomic uint64_t t_gone;       /* first LIST showing no key under the rule prefix */
    _Atomic uint64_t head_seq;     /* seq of the first key listed: about how many expired */
    char first_error[200];
};

/* Per configuration: what the report needs. Times in s on the scenario clock. */
struct xres {
    char name[40];
    uint64_t objects;
    int ran, keys;                  /* keys: KEYS_* the server accepted */
    double load_s, load_rate;
    uint64_t load_errors;
    double t_rule, t_end, t_stop;   /* t_end < 0: no expiry observed */
    double t_done;                  /* when the during phase was declared over */
    int complete;                   /* all old keys observed expired */
    double expired_per_s;           /* NAN: not observed */
    double expired;                 /* NAN: no metric */
    double peak_tombstones;         /* NAN: no metric */
    double lsm_written;             /* NAN: no metric */
    double peak_backlog;            /* NAN: no metric */
    double recover_s;               /* NAN: not recovered / not applicable */
    double under_s[PFX_COUNT];      /* s after the end until LIST < UNDER_MS (NAN: never) */
    double before_p50;
    struct series s[PFX_COUNT];
    uint64_t list_errors;
};

struct ctx {
    const struct xopts *o;
    struct mgb_config cfg;          /* endpoint, bucket, region, load settings */
    struct keyspace ks;
    uint64_t t0_ns;                 /* scenario clock origin */
    _Atomic uint64_t rule_ns;       /* mgb_now_ns() just before the rule is PUT; 0 before */
};

static double clock_s(const struct ctx *x)
{
    return (double)(mgb_now_ns() - x->t0_ns) / 1e9;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void series_add(struct series *s, double t, double ms)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = mg_realloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = (struct mgb_exp_sample){t, ms};
}

/* ------------------------------------------------------------- keys */

static void ts_fmt(int64_t midnight, uint64_t us, char *out, size_t cap)
{
    time_t sec = (time_t)(midnight + (int64_t)(us / 1000000u));
    struct tm tm;
    char hms[16];
    gmtime_r(&sec, &tm);
    strftime(hms, sizeof(hms), "%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%06u", hms, (unsigned)(us % 1000000u));
}

static int key_name(const void *arg, uint64_t id, char *out, size_t cap)
{
    const struct keyspace *ks = arg;
    char ts[32];
    if (id < ks->n_old) {
        ts_fmt(ks->old_midnight, id * ks->step_old_us, ts, sizeof(ts));
        return snprintf(out, cap, "logs/%sT%s-%010" PRIu64, ks->old_day, ts, id);
    }
    const char *top = id < ks->n_old + ks->n_new ? "logs" : "keep";
    uint64_t rel = id < ks->n_old + ks->n_new ? id - ks->n_old : id - ks->n_old - ks->n_new;
    ts_fmt(ks->new_midnight, rel * ks->step_new_us, ts, sizeof(ts));
    return snprintf(out, cap, "%s/%sT%s-%010" PRIu64, top, ks->new_day, ts, id);
}

static void keyspace_init(struct keyspace *ks, uint64_t objects, uint64_t keep)
{
    memset(ks, 0, sizeof(*ks));
    ks->n_old = objects * 3 / 4;
    ks->n_new = objects - ks->n_old;
    ks->n_keep = keep;
    time_t now = time(NULL);
    ks->new_midnight = (int64_t)now - (int64_t)now % 86400;
    ks->old_midnight = ks->new_midnight - 86400;
    struct tm tm;
    time_t t = (time_t)ks->old_midnight;
    gmtime_r(&t, &tm);
    strftime(ks->old_day, sizeof(ks->old_day), "%Y-%m-%d", &tm);
    t = (time_t)ks->new_midnight;
    gmtime_r(&t, &tm);
    strftime(ks->new_day, sizeof(ks->new_day), "%Y-%m-%d", &tm);
    uint64_t most = ks->n_new > ks->n_keep ? ks->n_new : ks->n_keep;
    ks->step_old_us = ks->n_old ? 86400000000ULL / ks->n_old : 1;
    ks->step_new_us = most ? 86400000000ULL / most : 1;
    if (ks->step_old_us == 0)
        ks->step_old_us = 1;
    if (ks->step_new_us == 0)
        ks->step_new_us = 1;
    snprintf(ks->rule_prefix, sizeof(ks->rule_prefix), "logs/%s", ks->old_day);
}

/* ------------------------------------------------------------- LIST loops */

static const char *first_key(const char *body, size_t *len)
{
    const char *p = strstr(body, "<Key>");
    if (!p)
        return NULL;
    p += 5;
    const char *q = strstr(p, "</Key>");
    if (!q)
        return NULL;
    *len = (size_t)(q - p);
    return p;
}

/* FNV-1a over the <Key> values of a ListObjectsV2 body: which keys it returned. */
static uint64_t keys_hash(const char *body)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = strstr(body, "<Key>"); p; p = strstr(p, "<Key>")) {
        p += 5;
        const char *q = strstr(p, "</Key>");
        if (!q)
            break;
        for (; p < q; p++)
            h = (h ^ (uint8_t)*p) * 1099511628211ULL;
        h = (h ^ 0xff) * 1099511628211ULL;
    }
    return h;
}

static void *lister_main(void *arg)
{
    struct lister *l = arg;
    struct ctx *x = l->x;
    char path[96], query[160];
    snprintf(path, sizeof(path), "/%s", x->cfg.bucket);
    snprintf(query, sizeof(query), "list-type=2&max-keys=%d&prefix=%s%%2F",
             l->which == PFX_LOGS1 ? 1 : 1000, l->which == PFX_KEEP ? "keep" : "logs");
    size_t rplen = strlen(x->ks.rule_prefix);
    uint64_t ref = 0;
    char *buf = mg_malloc(LIST_CAP);
    int fd = -1;
    struct mgb_req rq = {.method = "GET", .path = path, .query = query};
    while (!atomic_load(&l->stop)) {
        uint64_t a = mgb_now_ns();
        size_t len = 0;
        int st = mgb_request(&x->cfg, &x->cfg.ep[0], &fd, &rq, buf, LIST_CAP, &len);
        uint64_t b = mgb_now_ns();
        if (st != 200) {
            if (!l->first_error[0])
                snprintf(l->first_error, sizeof(l->first_error), "HTTP %d %.150s", st,
                         st < 0 ? "transport error" : buf);
            atomic_fetch_add(&l->errors, 1);
            sleep_s(0.1);
            continue;
        }
        series_add(&l->s, (double)(a - x->t0_ns) / 1e9, (double)(b - a) / 1e6);
        atomic_store(&l->count, atomic_load(&l->count) + 1);
        atomic_store(&l->last_us, (b - a) / 1000u);
        if (l->which != PFX_LOGS)
            continue;
        size_t fl = 0;
        const char *fk = first_key(buf, &fl);
        uint64_t ta = a - x->t0_ns;
        if (fk && fl > 11 && fk[fl - 11] == '-')
            atomic_store(&l->head_seq, strtoull(fk + fl - 10, NULL, 10));
        uint64_t rule = atomic_load(&x->rule_ns), h = keys_hash(buf);
        if (!rule || a < rule)
            ref = h;
        else if (h == ref)
            atomic_store(&l->t_unchanged, ta);
        else if (!atomic_load(&l->t_changed))
            atomic_store(&l->t_changed, ta);
        if ((!fk || fl < rplen || memcmp(fk, x->ks.rule_prefix, rplen) != 0) &&
            !atomic_load(&l->t_gone))
            atomic_store(&l->t_gone, ta);
    }
    if (fd >= 0)
        close(fd);
    mg_free(buf);
    return NULL;
}

/* Keys left under the rule prefix (paged ListObjectsV2), or -1 on an error: how many an
 * unfinished expiry got through, on a server without the metric. */
static double count_left(struct ctx *x)
{
    char path[96], *buf = mg_malloc(LIST_CAP), token[1024] = "";
    struct mg_buf q, enc;
    mg_buf_init(&q);
    mg_buf_init(&enc);
    snprintf(path, sizeof(path), "/%s", x->cfg.bucket);
    double n = 0;
    int fd = -1;
    for (;;) {
        q.len = 0;
        if (token[0]) {
            enc.len = 0;
            mg_uri_encode((struct mg_str){token, strlen(token)}, 0, &enc);
            mg_buf_appendf(&q, "continuation-token=%.*s&", (int)enc.len, enc.base);
        }
        mg_buf_appendf(&q, "list-type=2&max-keys=1000&prefix=");
        enc.len = 0;
        mg_uri_encode((struct mg_str){x->ks.rule_prefix, strlen(x->ks.rule_prefix)}, 0, &enc);
        mg_buf_append(&q, enc.base, enc.len);
        mg_buf_append(&q, "", 1);
        struct mgb_req rq = {.method = "GET", .path = path, .query = q.base};
        if (mgb_request(&x->cfg, &x->cfg.ep[0], &fd, &rq, buf, LIST_CAP, NULL) != 200) {
            n = -1;
            break;
        }
        for (const char *p = strstr(buf, "<Key>"); p; p = strstr(p + 5, "<Key>"))
            n++;
        const char *t = strstr(buf, "<NextContinuationToken>");
        const char *e = t ? strstr(t, "</NextContinuationToken>") : NULL;
        if (!strstr(buf, "<IsTruncated>true</IsTruncated>") || !t || !e)
            break;
        t += strlen("<NextContinuationToken>");
        snprintf(token, sizeof(token), "%.*s", (int)(e - t), t);
    }
    if (fd >= 0)
        close(fd);
    mg_buf_close(&q);
    mg_buf_close(&enc);
    mg_free(buf);
    return n;
}

/* ------------------------------------------------------------- DeleteObjects */

/* --delete-objects: one client removing the oldest 75 % itself, in key order. */
struct deleter {
    struct ctx *x;
    pthread_t tid;
    _Atomic uint64_t deleted;      /* keys in requests answered 200 */
    _Atomic uint64_t t_start, t_end; /* scenario clock, ns: first request sent, last answered */
    _Atomic int done;
    uint64_t errors;               /* requests not answered 200 (owned by the thread) */
    char first_error[200];
};

size_t mgb_exp_delete_body(struct mg_buf *out, const char *const *keys, size_t n)
{
    out->len = 0;
    mg_buf_appendf(out, "<Delete><Quiet>true</Quiet>");
    for (size_t i = 0; i < n; i++)
        mg_buf_appendf(out, "<Object><Key>%s</Key></Object>", keys[i]); /* no XML specials */
    mg_buf_appendf(out, "</Delete>");
    return out->len;
}

static void *deleter_main(void *arg)
{
    struct deleter *d = arg;
    struct ctx *x = d->x;
    uint64_t batch = x->o->del_batch;
    char path[96], *resp = mg_malloc(LIST_CAP);
    char (*names)[128] = mg_malloc(batch * sizeof(*names));
    const char **keys = mg_malloc(batch * sizeof(*keys));
    struct mg_buf body;
    mg_buf_init(&body);
    snprintf(path, sizeof(path), "/%s", x->cfg.bucket);
    int fd = -1;
    atomic_store(&d->t_start, mgb_now_ns() - x->t0_ns);
    for (uint64_t id = 0; id < x->ks.n_old;) {
        size_t n = 0;
        for (; n < batch && id < x->ks.n_old; n++, id++) {
            key_name(&x->ks, id, names[n], sizeof(names[n]));
            keys[n] = names[n];
        }
        mgb_exp_delete_body(&body, keys, n);
        struct mgb_req rq = {.method = "POST", .path = path, .query = "delete",
                             .body = body.base, .body_len = body.len, .content_md5 = 1};
        int st = mgb_request(&x->cfg, &x->cfg.ep[0], &fd, &rq, resp, LIST_CAP, NULL);
        /* Quiet: a 200 lists only the keys that failed */
        if (st != 200 || strstr(resp, "<Error>") != NULL) {
            if (!d->first_error[0])
                snprintf(d->first_error, sizeof(d->first_error), "HTTP %d %.150s", st,
                         st < 0 ? "transport error" : resp);
            d->errors++;
            continue;
        }
        atomic_fetch_add(&d->deleted, n);
    }
    atomic_store(&d->t_end, mgb_now_ns() - x->t0_ns);
    atomic_store(&d->done, 1);
    if (fd >= 0)
        close(fd);
    mg_buf_close(&body);
    mg_free(keys);
    mg_free(names);
    mg_free(resp);
    return NULL;
}

/* ------------------------------------------------------------- metrics */

struct metrics {
    int fd;
    int absent;          /* the endpoint has no metagate /metrics: stop asking */
    struct mgb_endpoint ep;
    char path[128];
    char *buf;
    double expired, tombstones, lsm, backlog; /* NAN when missing */
};

static void metrics_poll(struct ctx *x, struct metrics *m)
{
    m->expired = m->tombstones = m->lsm = m->backlog = NAN;
    if (m->absent)
        return;
    struct mgb_req rq = {.method = "GET", .path = m->path, .query = "", .no_auth = 1};
    int st = mgb_request(&x->cfg, &m->ep, &m->fd, &rq, m->buf, METRICS_CAP, NULL);
    if (st != 200 || !strstr(m->buf, "metagate_")) {
        if (st >= 0) /* an answer that is not metagate's /metrics: do not ask again */
            m->absent = 1;
        return;
    }
    double v;
    if (mgb_exp_metric(m->buf, "metagate_lifecycle_expired_total", &v) == 0)
        m->expired = v;
    if (mgb_exp_metric(m->buf, "metagate_rocksdb_tombstones{cf=\"meta\"}", &v) == 0)
        m->tombstones = v;
    if (mgb_exp_metric(m->buf, "metagate_rocksdb_lsm_bytes_written", &v) == 0)
        m->lsm = v;
    if (mgb_exp_metric(m->buf, "metagate_lifecycle_due_backlog", &v) == 0)
        m->backlog = v;
}

static int metrics_init(struct metrics *m, const char *url, char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    m->fd = -1;
    m->buf = mg_malloc(METRICS_CAP);
    m->buf[0] = 0;
    const char *h = url + (strncmp(url, "http://", 7) == 0 ? 7 : 0);
    const char *slash = strchr(h, '/');
    char base[300];
    snprintf(base, sizeof(base), "%.*s", (int)(slash ? (size_t)(slash - url) : strlen(url)), url);
    snprintf(m->path, sizeof(m->path), "%s", slash ? slash : "/metrics");
    return mgb_endpoint_parse(&m->ep, base, err, errlen);
}

static void metrics_close(struct metrics *m)
{
    if (m->fd >= 0)
        close(m->fd);
    mg_free(m->buf);
}

static double nanmax(double a, double b)
{
    return isnan(a) ? b : isnan(b) ? a : (a > b ? a : b);
}

/* ------------------------------------------------------------- server */

struct server {
    pid_t pid;
    char dir[64];
    char url[64];
};

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static void config_keys(const char *name, const char **del, const char **comp)
{
    *del = strncmp(name, "range", 5) == 0 ? "range" : "point";
    const char *plus = strchr(name, '+');
    const char *c = plus ? plus + 1 : "locality";
    *comp = strcmp(c, "collector") == 0 ? "rocksdb+collector" : c;
}

static int config_known(const char *name)
{
    static const char *const known[] = {"point+rocksdb", "point+collector", "point+locality",
                                        "range+locality"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(name, known[i]) == 0)
            return 1;
    return 0;
}

/* How much of the configuration's keys a server accepts: all of them, lifecycle only (no
 * "engine"), lifecycle.day_seconds only, none (a build without lifecycle). */
enum { KEYS_NONE, KEYS_DAY, KEYS_DELETE, KEYS_ALL };
static const char *const keys_dropped[] = {
    "lifecycle and engine keys refused: server defaults",
    "lifecycle.delete and engine.compaction refused",
    "engine.compaction refused", ""};

static int write_config(const struct server *sv, int port, int raft_port, const struct xopts *o,
                        const char *ak, const char *sk, const char *name, int keys)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/metagate.json", sv->dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"listen\": \"127.0.0.1:%d\", \"data_dir\": \"%s/data\",\n"
               " \"users\": [{\"name\": \"main\", \"access_key\": \"%s\", \"secret_key\": \"%s\"}],\n"
               " \"meta\": {\"raft_listen\": \"127.0.0.1:%d\"}",
            port, sv->dir, ak, sk, raft_port);
    const char *del, *comp;
    config_keys(name, &del, &comp);
    if (keys >= KEYS_DAY)
        fprintf(f, ",\n \"lifecycle\": {\"day_seconds\": %.0f", o->day_s);
    if (keys >= KEYS_DELETE)
        fprintf(f, ", \"delete\": \"%s\"", del);
    if (keys >= KEYS_DAY)
        fprintf(f, "}");
    if (keys >= KEYS_ALL)
        fprintf(f, ",\n \"engine\": {\"compaction\": \"%s\"}", comp);
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : -1;
}

static int log_says(const struct server *sv, const char *needle)
{
    char p[128], buf[8192];
    snprintf(p, sizeof(p), "%s/metagate.log", sv->dir);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

static void server_stop(struct server *sv)
{
    if (sv->pid <= 0)
        return;
    kill(sv->pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        if (waitpid(sv->pid, NULL, WNOHANG) == sv->pid) {
            sv->pid = 0;
            return;
        }
        sleep_s(0.1);
    }
    fprintf(stderr, "mgbench expiry: metagate %d ignored SIGTERM for 20 s, killing it\n",
            (int)sv->pid);
    kill(sv->pid, SIGKILL);
    waitpid(sv->pid, NULL, 0);
    sv->pid = 0;
}

/* Start metagate with the configuration's keys; 0 when /health answers. */
static int server_try(struct server *sv, const struct xopts *o, const char *ak, const char *sk,
                      const char *name, int keys)
{
    int port = free_port(), raft_port = free_port();
    if (port < 0 || raft_port < 0 || port == raft_port ||
        write_config(sv, port, raft_port, o, ak, sk, name, keys) != 0)
        return -1;
    snprintf(sv->url, sizeof(sv->url), "http://127.0.0.1:%d", port);
    char cfgp[128], logp[128];
    snprintf(cfgp, sizeof(cfgp), "%s/metagate.json", sv->dir);
    snprintf(logp, sizeof(logp), "%s/metagate.log", sv->dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        FILE *lf = freopen(logp, "w", stdout);
        if (lf && dup2(fileno(stdout), 2) >= 0)
            execl(o->metagate, o->metagate, "serve", "--config", cfgp, (char *)NULL);
        _exit(127);
    }
    sv->pid = pid;
    struct mgb_endpoint ep;
    char err[200], body[256];
    struct mgb_config c;
    memset(&c, 0, sizeof(c));
    c.timeout_s = 2;
    if (mgb_endpoint_parse(&ep, sv->url, err, sizeof(err)) != 0)
        return -1;
    for (int i = 0; i < 300; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            sv->pid = 0;
            return -1;
        }
        int fd = -1;
        struct mgb_req rq = {.method = "GET", .path = "/health", .query = "", .no_auth = 1};
        int st = mgb_request(&c, &ep, &fd, &rq, body, sizeof(body), NULL);
        if (fd >= 0)
            close(fd);
        if (st == 200)
            return 0;
        sleep_s(0.1);
    }
    server_stop(sv);
    return -1;
}

/* Start the configuration's metagate with as many of its keys as the build accepts
 * (*keys: KEYS_*; a build that refuses one logs "unknown key" and is started again with
 * fewer, and the report says so). */
static int server_start(struct server *sv, const struct xopts *o, const char *ak, const char *sk,
                        const char *name, int *keys)
{
    memset(sv, 0, sizeof(*sv));
    snprintf(sv->dir, sizeof(sv->dir), "/tmp/mgb-expiry-XXXXXX");
    if (!mkdtemp(sv->dir)) {
        fprintf(stderr, "mgbench expiry: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    for (int k = KEYS_ALL, tries = 0; k >= KEYS_NONE;) {
        if (server_try(sv, o, ak, sk, name, k) == 0) {
            *keys = k;
            if (k != KEYS_ALL)
                fprintf(stderr, "mgbench expiry: WARNING: %s: %s (%s)\n", name, keys_dropped[k],
                        o->metagate);
            return 0;
        }
        if (log_says(sv, "address already in use") && ++tries < 3)
            continue; /* a free port was taken between the probe and metagate's bind */
        if (!log_says(sv, "unknown key"))
            break;
        k--;
        tries = 0;
    }
    fprintf(stderr, "mgbench expiry: metagate did not start (config and log in %s)\n", sv->dir);
    return -1;
}

static void server_cleanup(struct server *sv, int keep)
{
    server_stop(sv);
    if (keep || !sv->dir[0])
        return;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sv->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "mgbench expiry: could not remove %s\n", sv->dir);
}

/* ------------------------------------------------------------- one run */

static int load(struct ctx *x, struct xres *r)
{
    struct mgb_config *c = &x->cfg;
    char err[200];
    if (mgb_workload_parse_line("expiry-load mix=PUT:100 size=1KiB objects=0", &c->w, err,
                                sizeof(err)) != 0 ||
        (x->o->size && mgb_workload_set(&c->w, "size", x->o->size, err, sizeof(err)) != 0) ||
        mgb_workload_finish(&c->w, err, sizeof(err)) != 0) {
        fprintf(stderr, "mgbench expiry: %s\n", err);
        return -1;
    }
    c->w.objects = x->ks.n_old + x->ks.n_new + x->ks.n_keep;
    c->key_name = key_name;
    c->key_arg = &x->ks;
    if (mgb_bucket_ensure(c, &c->ep[0]) != 0)
        return -1;
    fprintf(stderr, "[%s load] %" PRIu64 " objects of %" PRIu64 " B: %" PRIu64 " under %s (expire), %" PRIu64
                    " under logs/%s, %" PRIu64 " under keep/\n",
            r->name, c->w.objects, c->w.size_bytes, x->ks.n_old, x->ks.rule_prefix, x->ks.n_new,
            x->ks.new_day, x->ks.n_keep);
    struct mgb_run *run = mgb_run_create(c, &c->ep[0], "", 0);
    struct mgb_result res;
    mgb_result_init(&res);
    uint64_t t0 = mgb_now_ns();
    int rv = mgb_run_phase(run, MGB_PHASE_PREPARE, &res);
    r->load_s = (double)(mgb_now_ns() - t0) / 1e9;
    r->load_errors = mgb_result_total_errors(&res);
    size_t made = mgb_run_pool_size(run);
    r->load_rate = (double)made / (r->load_s > 0 ? r->load_s : 1);
    fprintf(stderr, "[%s load] %zu/%" PRIu64 " objects in %.1f s (%.0f PUT/s), %" PRIu64 " errors%s%s\n",
            r->name, made, c->w.objects, r->load_s, r->load_rate, r->load_errors,
            res.first_error[MGB_OP_PUT][0] ? ": " : "", res.first_error[MGB_OP_PUT]);
    mgb_result_close(&res);
    mgb_run_destroy(run);
    if (rv == 0 && made < c->w.objects / 2) {
        fprintf(stderr, "mgbench expiry: fewer than half the objects were written\n");
        rv = -1;
    }
    return rv;
}

static int put_rule(struct ctx *x)
{
    char xml[512], path[96], resp[2048];
    snprintf(xml, sizeof(xml),
             "<LifecycleConfiguration><Rule><ID>mgbench-expiry</ID><Filter><Prefix>%s</Prefix>"
             "</Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"
             "</LifecycleConfiguration>",
             x->ks.rule_prefix);
    snprintf(path, sizeof(path), "/%s", x->cfg.bucket);
    struct mgb_req rq = {.method = "PUT", .path = path, .query = "lifecycle", .body = xml,
                         .body_len = strlen(xml), .content_md5 = 1};
    int fd = -1;
    int st = mgb_request(&x->cfg, &x->cfg.ep[0], &fd, &rq, resp, sizeof(resp), NULL);
    if (fd >= 0)
        close(fd);
    if (st != 200) {
        fprintf(stderr, "mgbench expiry: PutBucketLifecycleConfiguration: HTTP %d %.300s\n", st,
                st < 0 ? "transport error" : resp);
        return -1;
    }
    fprintf(stderr, "[rule] Expiration Days=1 on prefix %s set\n", x->ks.rule_prefix);
    return 0;
}

static double ns_s(uint64_t ns)
{
    return (double)ns / 1e9;
}

static void progress(const char *name, const char *phase, double t, const struct lister *l,
                     const struct metrics *m, const struct xres *r)
{
    char ex[32] = "-", tb[32] = "-", bl[32] = "-";
    if (!isnan(m->expired))
        snprintf(ex, sizeof(ex), "%.0f", m->expired);
    if (!isnan(m->tombstones))
        snprintf(tb, sizeof(tb), "%.0f", m->tombstones);
    if (!isnan(m->backlog))
        snprintf(bl, sizeof(bl), "%.0f", m->backlog);
    char head[48];
    if (atomic_load(&l[PFX_LOGS].t_gone))
        snprintf(head, sizeof(head), "no old key");
    else
        snprintf(head, sizeof(head), "#%" PRIu64 "%s", atomic_load(&l[PFX_LOGS].head_seq),
                 atomic_load(&l[PFX_LOGS].t_changed) ? " (keys changing)" : "");
    fprintf(stderr, "[%s %s] t=%6.1fs  expired %s/%" PRIu64 "  backlog %s  tombstones %s  logs/ "
                    "starts: %s  LIST logs/ %.2f ms keep/ %.2f ms (%" PRIu64 " + %" PRIu64
                    " LISTs)\n",
            name, phase, t, ex, (uint64_t)r->objects * 3 / 4, bl, tb, head,
            (double)atomic_load(&l[0].last_us) / 1e3, (double)atomic_load(&l[1].last_us) / 1e3,
            atomic_load(&l[0].count), atomic_load(&l[1].count));
}

/* /metrics, with the expired count taken from the deleter when there is one (its deletes are
 * not lifecycle's: metagate_lifecycle_expired_total does not count them). */
static void poll(struct ctx *x, struct metrics *m, const struct deleter *d)
{
    metrics_poll(x, m);
    if (d != NULL)
        m->expired = (double)atomic_load(&d->deleted);
}

/* Start the expiry: the rule, or the DeleteObjects client (d). 0 when it started. */
static int expiry_start(struct ctx *x, struct deleter *d)
{
    if (!x->o->del_mode)
        return put_rule(x);
    d->x = x;
    if (pthread_create(&d->tid, NULL, deleter_main, d) != 0)
        return -1;
    fprintf(stderr, "[delete] DeleteObjects of the %" PRIu64 " keys under %s, %" PRIu64
                    " a request, started\n",
            x->ks.n_old, x->ks.rule_prefix, x->o->del_batch);
    return 0;
}

/* The deleter's own figures replace what the metric would say: its end and rate. */
static void deleter_finish(struct ctx *x, struct deleter *d, struct xres *r)
{
    pthread_join(d->tid, NULL);
    double a = ns_s(atomic_load(&d->t_start)), b = ns_s(atomic_load(&d->t_end));
    uint64_t n = atomic_load(&d->deleted);
    r->expired = (double)n;
    r->complete = n >= x->ks.n_old;
    r->t_end = b;
    r->expired_per_s = b > a ? (double)n / (b - a) : NAN;
    fprintf(stderr, "[%s] DeleteObjects: %" PRIu64 " keys deleted in %.2f s, %" PRIu64
                    " failed requests%s%s\n",
            r->name, n, b - a, d->errors, d->first_error[0] ? ", first: " : "", d->first_error);
}

/* Before, during, after: see the file comment. Returns -1 when the rule was refused. */
static int measure(struct ctx *x, struct xres *r, const char *metrics_url)
{
    const struct xopts *o = x->o;
    struct lister l[PFX_COUNT];
    struct metrics m;
    struct deleter del, *dp = o->del_mode ? &del : NULL;
    char err[200];
    memset(l, 0, sizeof(l));
    memset(&del, 0, sizeof(del));
    if (metrics_init(&m, metrics_url, err, sizeof(err)) != 0) {
        fprintf(stderr, "mgbench expiry: metrics: %s\n", err);
        m.absent = 1;
    }
    x->t0_ns = mgb_now_ns();
    int npfx = pfx_count(o);
    for (int i = 0; i < npfx; i++) {
        l[i].x = x;
        l[i].which = i;
        pthread_create(&l[i].tid, NULL, lister_main, &l[i]);
    }
    double last_prog = 0, t;
    while ((t = clock_s(x)) < o->before_s) {
        poll(x, &m, dp);
        if (t - last_prog >= PROGRESS_S) {
            progress(r->name, "before", t - o->before_s, l, &m, r);
            last_prog = t;
        }
        sleep_s(o->poll_s);
    }
    poll(x, &m, dp);
    double exp0 = m.expired, lsm0 = m.lsm;
    r->peak_tombstones = m.tombstones;
    r->peak_backlog = m.backlog;
    atomic_store(&x->rule_ns, mgb_now_ns());
    r->t_rule = clock_s(x);
    int rule_ok = expiry_start(x, dp) == 0;
    /* expiry as the metric shows it */
    double c_first = NAN, c_last = NAN, t_first = -1, t_last = -1, c_prev = exp0;
    double t_done = -1;
    uint64_t n_old = x->ks.n_old;
    const char *phase = "during";
    for (;;) {
        sleep_s(o->poll_s);
        t = clock_s(x);
        poll(x, &m, dp);
        r->peak_tombstones = nanmax(r->peak_tombstones, m.tombstones);
        r->peak_backlog = nanmax(r->peak_backlog, m.backlog);
        /* counted while "during" only: what grows later does not move the end of expiry */
        if (t_done < 0 && !isnan(m.expired) && !isnan(c_prev) && m.expired > c_prev) {
            if (t_first < 0) {
                t_first = t;
                c_first = m.expired;
            }
            t_last = t;
            c_last = m.expired;
        }
        if (!isnan(m.expired))
            c_prev = m.expired;
        if (t - last_prog >= PROGRESS_S) {
            progress(r->name, phase, t - r->t_rule, l, &m, r);
            last_prog = t;
        }
        if (t_done < 0) {
            int by_metric = !isnan(m.expired) && !isnan(exp0) && m.expired - exp0 >= (double)n_old;
            if (dp != NULL && rule_ok) /* the client's requests are all answered */
                by_metric = atomic_load(&del.done);
            int by_list = atomic_load(&l[PFX_LOGS].t_gone) != 0;
            int stalled = t_last >= 0 && t - t_last >= o->stall_s;
            if (by_metric || by_list || stalled || !rule_ok || t - r->t_rule >= o->wait_s) {
                t_done = t;
                r->t_done = t;
                r->complete = by_metric || by_list;
                phase = "after";
                if (!r->complete)
                    fprintf(stderr, "[%s] expiry %s after %.1f s\n", r->name,
                            !rule_ok ? "not started (no rule)"
                            : stalled ? "stalled" : "not complete",
                            t - r->t_rule);
                else
                    fprintf(stderr, "[%s] all %" PRIu64 " objects under %s expired (seen by %s) at "
                                    "t=%.1fs\n",
                            r->name, n_old, x->ks.rule_prefix,
                            by_metric ? (dp != NULL ? "DeleteObjects" : "/metrics") : "LIST",
                            t - r->t_rule);
            }
        } else if (t - t_done >= o->after_s) {
            break;
        }
    }
    for (int i = 0; i < npfx; i++)
        atomic_store(&l[i].stop, 1);
    for (int i = 0; i < npfx; i++) {
        pthread_join(l[i].tid, NULL);
        r->s[i] = l[i].s;
        r->list_errors += atomic_load(&l[i].errors);
        if (l[i].first_error[0])
            fprintf(stderr, "[%s] LIST %s: %" PRIu64 " errors, first: %s\n", r->name, pfx_name[i],
                    atomic_load(&l[i].errors), l[i].first_error);
    }
    poll(x, &m, dp);
    r->peak_tombstones = nanmax(r->peak_tombstones, m.tombstones);
    r->t_stop = clock_s(x);
    r->lsm_written = !isnan(m.lsm) && !isnan(lsm0) ? m.lsm - lsm0 : NAN;
    r->expired = !isnan(c_prev) && !isnan(exp0) ? c_prev - exp0 : NAN;
    /* the rate, from first to last expiry observed */
    r->expired_per_s = NAN;
    r->t_end = -1;
    uint64_t gone_ns = atomic_load(&l[PFX_LOGS].t_gone);
    if (t_last >= 0) {
        /* the LIST can see the end before the metric's next poll does */
        r->t_end = gone_ns && ns_s(gone_ns) < t_last ? ns_s(gone_ns) : t_last;
        if (t_last > t_first && c_last > c_first)
            r->expired_per_s = (c_last - c_first) / (t_last - t_first);
        else
            r->expired_per_s = (c_last - exp0) / (t_last - r->t_rule);
    } else if (!gone_ns && atomic_load(&l[PFX_LOGS].t_changed) && isnan(exp0)) {
        /* unfinished, no metric: count what is left, the rate up to when we gave up */
        double left = count_left(x), from = ns_s(atomic_load(&l[PFX_LOGS].t_unchanged));
        if (from < r->t_rule)
            from = r->t_rule;
        if (left >= 0 && left < (double)n_old && r->t_done > from) {
            r->expired = (double)n_old - left;
            r->expired_per_s = r->expired / (r->t_done - from);
            fprintf(stderr, "[%s] %.0f objects left under %s: %.0f expired in %.1f s\n",
                    r->name, left, x->ks.rule_prefix, r->expired, r->t_done - from);
        }
    } else if (gone_ns) {
        double gone = ns_s(gone_ns);
        double from = atomic_load(&l[PFX_LOGS].t_unchanged) ? ns_s(atomic_load(&l[PFX_LOGS].t_unchanged))
                                                           : r->t_rule;
        if (from < r->t_rule)
            from = r->t_rule;
        r->t_end = gone;
        r->expired_per_s = gone > from ? (double)n_old / (gone - from) : NAN;
    }
    if (dp != NULL && rule_ok)
        deleter_finish(x, &del, r);
    metrics_close(&m);
    return rule_ok ? 0 : -1;
}

/* Fill the derived figures of r (percentiles are computed when printed). */
static void recover(struct xres *r, double tolerance)
{
    const struct series *s = &r->s[PFX_LOGS];
    double *v = mg_malloc((s->n ? s->n : 1) * sizeof(double));
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].t_s < r->t_rule)
            v[n++] = s->v[i].ms;
    r->before_p50 = mgb_exp_quantile(v, n, 0.5);
    mg_free(v);
    r->recover_s = NAN;
    if (r->t_end >= 0 && !isnan(r->before_p50)) {
        double rs = mgb_exp_recover_s(s->v, s->n, r->t_end, r->before_p50 * tolerance,
                                      RECOVER_WINDOW_S);
        if (rs >= 0)
            r->recover_s = rs;
    }
    for (int p = 0; p < PFX_COUNT; p++) {
        r->under_s[p] = NAN;
        double us = r->t_end >= 0 ? mgb_exp_recover_s(r->s[p].v, r->s[p].n, r->t_end, UNDER_MS,
                                                      RECOVER_WINDOW_S)
                                  : -1;
        if (us >= 0)
            r->under_s[p] = us;
    }
}

/* Latencies of prefix p in phase ph; returns the count, fills p50/p99/max (NAN if none). */
static size_t phase_stats(const struct xres *r, int p, int ph, double out[3])
{
    const struct series *s = &r->s[p];
    double *v = mg_malloc((s->n ? s->n : 1) * sizeof(double));
    size_t n = 0;
    double end = r->t_end >= 0 ? r->t_end : r->t_done; /* no expiry seen: until given up */
    for (size_t i = 0; i < s->n; i++) {
        double t = s->v[i].t_s;
        int in = ph == PH_BEFORE   ? t < r->t_rule
                 : ph == PH_DURING ? t >= r->t_rule && t <= end
                                   : t > end;
        if (in)
            v[n++] = s->v[i].ms;
    }
    out[0] = mgb_exp_quantile(v, n, 0.5);
    out[1] = mgb_exp_quantile(v, n, 0.99);
    out[2] = mgb_exp_quantile(v, n, 1.0);
    mg_free(v);
    return n;
}

static int run_one(const struct xopts *o, const char *name, struct xres *r)
{
    struct ctx x;
    memset(&x, 0, sizeof(x));
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%.39s", name);
    r->objects = o->objects;
    r->keys = KEYS_ALL;
    r->t_end = -1;
    r->expired_per_s = r->expired = r->peak_tombstones = r->lsm_written = r->peak_backlog = NAN;
    r->recover_s = r->before_p50 = NAN;
    x.o = o;
    keyspace_init(&x.ks, o->objects, o->keep);
    struct mgb_config *c = &x.cfg;
    snprintf(c->region, sizeof(c->region), "%s", o->region);
    snprintf(c->bucket, sizeof(c->bucket), "%s", o->bucket);
    c->concurrency = (unsigned)o->concurrency;
    c->threads = (unsigned)(o->threads < o->concurrency ? o->threads : o->concurrency);
    c->rounds = 1;
    c->timeout_s = 60;
    c->clean = 0;
    c->progress = 0;
    c->progress_lines = 1;
    c->seed = 0x6d676265u;
    c->nep = 1;
    struct server sv;
    memset(&sv, 0, sizeof(sv));
    const char *url = o->endpoint;
    const char *ak = o->access_key ? o->access_key : DEF_AK;
    const char *sk = o->secret_key ? o->secret_key : DEF_SK;
    if (!o->endpoint) {
        if (server_start(&sv, o, ak, sk, name, &r->keys) != 0) {
            server_cleanup(&sv, 1);
            return -1;
        }
        url = sv.url;
        fprintf(stderr, "[%s] metagate pid %d on %s, data in %s\n", name, (int)sv.pid, url, sv.dir);
    }
    char err[300], murl[300];
    int rv = mgb_endpoint_parse(&c->ep[0], url, err, sizeof(err));
    if (rv != 0)
        fprintf(stderr, "mgbench expiry: %s\n", err);
    snprintf(c->ep[0].access_key, sizeof(c->ep[0].access_key), "%s", ak);
    snprintf(c->ep[0].secret_key, sizeof(c->ep[0].secret_key), "%s", sk);
    snprintf(c->ep[0].label, sizeof(c->ep[0].label), "%s", "A");
    snprintf(murl, sizeof(murl), "%s/metrics", url);
    if (rv == 0)
        rv = load(&x, r);
    if (rv == 0) {
        rv = measure(&x, r, o->metrics_url ? o->metrics_url : murl);
        recover(r, o->tolerance);
        r->ran = 1;
    }
    if (!o->endpoint)
        server_cleanup(&sv, o->keep_data);
    else
        fprintf(stderr, "[%s] bucket %s left on %s\n", name, c->bucket, url);
    return rv;
}

/* ------------------------------------------------------------- output */

static void fmt_num(char *out, size_t cap, double v, int prec)
{
    if (isnan(v))
        snprintf(out, cap, "-");
    else
        snprintf(out, cap, "%.*f", prec, v);
}

/* The per-configuration figures of the table and of --json, in the JSON's order (NAN:
 * null). LIST figures are the logs/ loop while expiry runs. */
enum { HEADLINE_COUNT = 9 };
static const char *const headline_key[HEADLINE_COUNT] = {
    "expired_per_s", "list_p50_ms", "list_p99_ms", "list_max_ms",
    "recover_s", "peak_tombstones", "lsm_bytes_written", "under_5ms_s", "list1_under_5ms_s"};
static const int headline_prec[HEADLINE_COUNT] = {1, 3, 3, 3, 3, 0, 0, 3, 3};

static void headline(const struct xres *r, double v[HEADLINE_COUNT])
{
    double s[3];
    phase_stats(r, PFX_LOGS, PH_DURING, s);
    v[0] = r->expired_per_s;
    v[1] = s[0];
    v[2] = s[1];
    v[3] = s[2];
    v[4] = r->recover_s;
    v[5] = r->peak_tombstones;
    v[6] = r->lsm_written;
    v[7] = r->under_s[PFX_LOGS];   /* 1,000-key LIST of logs/ under 5 ms (1 s median) */
    v[8] = r->under_s[PFX_LOGS1];  /* 1-key LIST (--delete-objects only) */
}

static void print_report(FILE *f, const struct xres *rs, size_t n, const struct xopts *o)
{
    fprintf(f, "\nmgbench expiry: %" PRIu64 " objects (%" PRIu64 " expiring), %" PRIu64
               " untouched, LIST max-keys 1000; day_seconds %.0f; t = 0 when the rule is set\n",
            o->objects, o->objects * 3 / 4, o->keep, o->day_s);
    for (size_t i = 0; i < n; i++) {
        const struct xres *r = &rs[i];
        if (!r->ran) {
            fprintf(f, "\n%s: did not run\n", r->name);
            continue;
        }
        char a[32], b[32], c[32], d[32], e[32], g[32];
        fmt_num(g, sizeof(g), r->peak_backlog, 0);
        fmt_num(a, sizeof(a), r->expired_per_s, 0);
        fmt_num(b, sizeof(b), r->recover_s, 2);
        fmt_num(c, sizeof(c), r->peak_tombstones, 0);
        fmt_num(d, sizeof(d), r->lsm_written, 0);
        fmt_num(e, sizeof(e), r->expired, 0);
        fprintf(f, "\n%s%s%s%s: load %.1f s (%.0f PUT/s); expired %s, %s; %s objects/s; "
                   "recover %s s; peak tombstones %s; LSM bytes written %s; peak due backlog %s\n",
                r->name, r->keys != KEYS_ALL ? " (" : "", keys_dropped[r->keys],
                r->keys != KEYS_ALL ? ")" : "",
                r->load_s, r->load_rate, e,
                r->complete ? "complete" : "NOT complete", a, b, c, d, g);
        if (r->t_end >= 0)
            fprintf(f, "  expiry observed until t=%.1f s\n", r->t_end - r->t_rule);
        fprintf(f, "  %-8s %-6s %7s %9s %9s %9s\n", "phase", "prefix", "LISTs", "p50 ms",
                "p99 ms", "max ms");
        for (int ph = 0; ph < PH_COUNT; ph++)
            for (int p = 0; p < pfx_count(o); p++) {
                double s[3];
                size_t k = phase_stats(r, p, ph, s);
                char x[3][32];
                for (int j = 0; j < 3; j++)
                    fmt_num(x[j], sizeof(x[j]), s[j], 2);
                fprintf(f, "  %-8s %-6s %7zu %9s %9s %9s\n", ph_name[ph], pfx_name[p], k, x[0],
                        x[1], x[2]);
            }
    }
    fprintf(f, "\n| config | objects | %s/s | LIST p50 ms | p99 ms | max ms | recover s | "
               "peak tombstones | LSM bytes written | under 5 ms s | 1-key under 5 ms s |\n"
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            o->del_mode ? "deleted" : "expired");
    for (size_t i = 0; i < n; i++) {
        if (!rs[i].ran)
            continue;
        double v[HEADLINE_COUNT];
        headline(&rs[i], v);
        fprintf(f, "| %s | %" PRIu64, rs[i].name, rs[i].objects);
        for (int k = 0; k < HEADLINE_COUNT; k++) {
            char t[32];
            fmt_num(t, sizeof(t), v[k], headline_prec[k]);
            fprintf(f, " | %s", t);
        }
        fprintf(f, " |\n");
    }
    fprintf(f, "(LIST figures: prefix logs/ while %s runs; under 5 ms: s after its end until a "
               "1 s median < 5 ms)\n",
            o->del_mode ? "DeleteObjects" : "expiry");
}

/* The keys, plus the two under-5-ms figures in --delete-objects mode. */
static int write_json(const char *path, const struct xres *rs, size_t n, const struct xopts *o)
{
    int nkeys = o->del_mode ? HEADLINE_COUNT : HEADLINE_COUNT - 2;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "mgbench expiry: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\"configs\": [");
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        if (!rs[i].ran)
            continue;
        double v[HEADLINE_COUNT];
        headline(&rs[i], v);
        fprintf(f, "%s{\"config\": \"%s\", \"objects\": %" PRIu64, first ? "" : ", ",
                rs[i].name, rs[i].objects);
        for (int k = 0; k < nkeys; k++) {
            fprintf(f, ", \"%s\": ", headline_key[k]);
            if (isnan(v[k]))
                fprintf(f, "null");
            else
                fprintf(f, "%.*f", headline_prec[k], v[k]);
        }
        fprintf(f, "}");
        first = 0;
    }
    fprintf(f, "]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

static int write_plot(const char *png, const struct xres *rs, size_t n, const struct xopts *o)
{
    char dir[] = "/tmp/mgbench-expiry-plot-XXXXXX", p[700], cmd[1600];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mgbench expiry: plot: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    int npfx = pfx_count(o);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < npfx; k++) {
            snprintf(p, sizeof(p), "%s/c%zu_%d.dat", dir, i, k);
            FILE *f = fopen(p, "w");
            if (!f)
                return -1;
            const struct series *s = &rs[i].s[k];
            for (size_t j = 0; j < s->n; j++)
                fprintf(f, "%.4f %.4f\n", s->v[j].t_s - rs[i].t_rule, s->v[j].ms);
            if (s->n == 0)
                fprintf(f, "0 NaN\n");
            fclose(f);
        }
    snprintf(p, sizeof(p), "%s/plot.gp", dir);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    const char *what = o->del_mode ? "DeleteObjects" : "rule set";
    fprintf(f, "set terminal pngcairo size 1200,%d noenhanced font 'sans,10'\nset output '%s'\n"
               "set multiplot layout %d,1 title 'mgbench expiry: %" PRIu64 " objects (%" PRIu64
               " %s), LIST max-keys 1000; t = 0: %s; dotted: %s over'\n"
               "set grid\nset key outside right\nset logscale y\nset xlabel 's since t = 0 (%s)'\n"
               "set ylabel 'LIST latency (ms)'\nset arrow 1 from 0, graph 0 to 0, graph 1 nohead dashtype 2\n",
            500 * npfx, png, npfx, o->objects, o->objects * 3 / 4,
            o->del_mode ? "deleted" : "expiring", what, o->del_mode ? "deletes" : "expiry", what);
    /* the end of each configuration's expiry, in its line's colour */
    for (size_t i = 0, lt = 1; i < n; i++) {
        if (!rs[i].ran)
            continue;
        if (rs[i].t_end >= 0)
            fprintf(f, "set arrow %zu from %.3f, graph 0 to %.3f, graph 1 nohead lt %zu dashtype 3\n",
                    i + 2, rs[i].t_end - rs[i].t_rule, rs[i].t_end - rs[i].t_rule, lt);
        lt++;
    }
    for (int k = 0; k < npfx; k++) {
        fprintf(f, "set title 'LIST prefix %s%s'\nplot ", k == PFX_LOGS1 ? "logs/" : pfx_name[k],
                k == PFX_LOGS    ? " (the oldest 75 % go)"
                : k == PFX_LOGS1 ? ", max-keys 1 (the oldest 75 % go)"
                                 : " (untouched)");
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            if (!rs[i].ran)
                continue;
            fprintf(f, "%s'%s/c%zu_%d.dat' using 1:2 with lines title '%s'", first ? "" : ", ", dir,
                    i, k, rs[i].name);
            first = 0;
        }
        if (first)
            fprintf(f, "1 notitle");
        fprintf(f, "\n");
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);
    snprintf(cmd, sizeof(cmd), "gnuplot '%s' 2>'%s/gnuplot.err'", p, dir);
    int st = system(cmd);
    struct stat sb;
    if (st != 0 || stat(png, &sb) != 0 || sb.st_size == 0) {
        fprintf(stderr, "mgbench expiry: gnuplot failed (status %d); script and data kept in %s\n",
                st, dir);
        return -1;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "mgbench expiry: could not remove %s\n", dir);
    return 0;
}

/* ------------------------------------------------------------- command line */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mgbench expiry --objects N [--configs LIST] [--json FILE] [--plot FILE.png]\n"
            "                      [--size 1KiB] [--endpoint URL] [options]\n"
            "\n"
            "Lifecycle expiry at scale: load N timestamp-prefixed objects, expire the oldest 75 %%\n"
            "with an S3 lifecycle rule, LIST 1,000 keys in a loop on the expiring and an\n"
            "untouched prefix while it runs. Without --endpoint, each configuration runs on its\n"
            "own metagate (free port, temporary data dir), started and stopped here.\n"
            "\n"
            "  --objects N          objects under logs/ (100000); 3/4 of them expire\n"
            "  --keep-objects N     objects under the untouched prefix keep/ (N/4, 1000..10000)\n"
            "  --configs LIST       comma-separated: point+rocksdb, point+collector,\n"
            "                       point+locality, range+locality (default: all four)\n"
            "  --size BYTES         object size (1KiB; 64KiB: the blob-backed variant)\n"
            "  --day-seconds S      the servers' lifecycle.day_seconds (1)\n"
            "  --before S           LIST loops before the rule is set (5)\n"
            "  --after S            LIST loops after the expiry is over (15)\n"
            "  --wait S             give up waiting for the expiry after S (600)\n"
            "  --stall S            end the expiry when the expired count is still for S (30)\n"
            "  --poll S             /metrics poll interval (0.25)\n"
            "  --tolerance X        recovered: 1 s median <= X * the pre-expiry p50 (1.10)\n"
            "  --concurrency N      load connections (32); --threads N (cores)\n"
            "  --metagate PATH      server binary (env METAGATE; default: next to mgbench)\n"
            "  --keep-data          keep the servers' data dirs\n"
            "  --delete-objects     no rule: delete the oldest 75 %% with DeleteObjects (one client,\n"
            "                       key order), and LIST 1 key of logs/ in a third loop too\n"
            "  --delete-batch N     keys a DeleteObjects request (1000, at most 1000)\n"
            "  --endpoint URL       run once against this S3 server, start nothing\n"
            "  --name NAME          the configuration name of an --endpoint run (endpoint)\n"
            "  --metrics URL        /metrics to poll (default: ENDPOINT/metrics; missing: null)\n"
            "  --access-key K --secret-key S   (env AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)\n"
            "  --bucket B           (metagate: mgbexp; --endpoint: mgbexp-<unix time>)\n"
            "  --region R           (us-east-1)\n"
            "  --json FILE          {\"configs\": [{\"config\", \"objects\", \"expired_per_s\",\n"
            "                       \"list_p50_ms\", \"list_p99_ms\", \"list_max_ms\", \"recover_s\",\n"
            "                       \"peak_tombstones\", \"lsm_bytes_written\"}, ...]}\n"
            "  --plot FILE.png      LIST latency over time, all configurations (gnuplot)\n");
}

enum {
    X_OBJECTS = 300, X_KEEP, X_CONFIGS, X_SIZE, X_DAY, X_BEFORE, X_AFTER, X_WAIT, X_STALL,
    X_POLL, X_TOL, X_CONC, X_THREADS, X_METAGATE, X_KEEPDATA, X_ENDPOINT, X_NAME, X_METRICS,
    X_AK, X_SK, X_BUCKET, X_REGION, X_JSON, X_PLOT, X_DELETE, X_DELBATCH, X_HELP
};

static const struct option xlong[] = {
    {"objects", 1, 0, X_OBJECTS}, {"keep-objects", 1, 0, X_KEEP}, {"configs", 1, 0, X_CONFIGS},
    {"size", 1, 0, X_SIZE}, {"day-seconds", 1, 0, X_DAY}, {"before", 1, 0, X_BEFORE},
    {"after", 1, 0, X_AFTER}, {"wait", 1, 0, X_WAIT}, {"stall", 1, 0, X_STALL},
    {"poll", 1, 0, X_POLL}, {"tolerance", 1, 0, X_TOL}, {"concurrency", 1, 0, X_CONC},
    {"threads", 1, 0, X_THREADS}, {"metagate", 1, 0, X_METAGATE}, {"keep-data", 0, 0, X_KEEPDATA},
    {"endpoint", 1, 0, X_ENDPOINT}, {"name", 1, 0, X_NAME}, {"metrics", 1, 0, X_METRICS},
    {"access-key", 1, 0, X_AK}, {"secret-key", 1, 0, X_SK}, {"bucket", 1, 0, X_BUCKET},
    {"region", 1, 0, X_REGION}, {"json", 1, 0, X_JSON}, {"plot", 1, 0, X_PLOT},
    {"delete-objects", 0, 0, X_DELETE}, {"delete-batch", 1, 0, X_DELBATCH},
    {"help", 0, 0, X_HELP}, {0, 0, 0, 0},
};

static int num(const char *a, const char *what, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(a, &end);
    if (end == a || *end || errno || v < lo) {
        fprintf(stderr, "mgbench expiry: bad %s: %s\n", what, a);
        return -1;
    }
    *out = v;
    return 0;
}

static int unum(const char *a, const char *what, double lo, uint64_t *out)
{
    double v;
    if (num(a, what, lo, &v) != 0)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int xparse(int c, const char *a, struct xopts *o, int *keep_set)
{
    switch (c) {
    case X_OBJECTS: return unum(a, "objects", 4, &o->objects);
    case X_KEEP: *keep_set = 1; return unum(a, "keep-objects", 1, &o->keep);
    case X_CONFIGS: o->configs = a; return 0;
    case X_SIZE: o->size = a; return 0;
    case X_DAY: return num(a, "day-seconds", 1, &o->day_s);
    case X_BEFORE: return num(a, "before", 0.5, &o->before_s);
    case X_AFTER: return num(a, "after", 0.5, &o->after_s);
    case X_WAIT: return num(a, "wait", 1, &o->wait_s);
    case X_STALL: return num(a, "stall", 1, &o->stall_s);
    case X_POLL: return num(a, "poll", 0.01, &o->poll_s);
    case X_TOL: return num(a, "tolerance", 1, &o->tolerance);
    case X_CONC: return unum(a, "concurrency", 1, &o->concurrency);
    case X_THREADS: return unum(a, "threads", 1, &o->threads);
    case X_METAGATE: o->metagate = a; return 0;
    case X_KEEPDATA: o->keep_data = 1; return 0;
    case X_ENDPOINT: o->endpoint = a; return 0;
    case X_NAME: o->name = a; return 0;
    case X_METRICS: o->metrics_url = a; return 0;
    case X_AK: o->access_key = a; return 0;
    case X_SK: o->secret_key = a; return 0;
    case X_BUCKET: o->bucket = a; return 0;
    case X_REGION: o->region = a; return 0;
    case X_JSON: o->json = a; return 0;
    case X_PLOT: o->plot = a; return 0;
    case X_DELETE: o->del_mode = 1; return 0;
    case X_DELBATCH:
        if (unum(a, "delete-batch", 1, &o->del_batch) != 0)
            return -1;
        if (o->del_batch <= DEL_BATCH_MAX)
            return 0;
        fprintf(stderr, "mgbench expiry: --delete-batch: at most %d\n", DEL_BATCH_MAX);
        return -1;
    case X_HELP: usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
}

/* The metagate binary next to argv0 (build/mgbench -> build/metagate). */
static char *default_metagate(const char *argv0)
{
    static char path[4200];
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        snprintf(self, sizeof(self), "%s", argv0);
        n = (ssize_t)strlen(self);
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
        slash[1] = 0;
    else
        snprintf(self, sizeof(self), "./");
    snprintf(path, sizeof(path), "%.4095smetagate", self);
    return path;
}

int mgb_expiry_main(int argc, char **argv)
{
    struct xopts o;
    memset(&o, 0, sizeof(o));
    o.objects = 100000;
    o.day_s = 1;
    o.before_s = 5;
    o.after_s = 15;
    o.wait_s = 600;
    o.stall_s = 30;
    o.poll_s = 0.25;
    o.tolerance = 1.10;
    o.del_batch = DEL_BATCH_MAX;
    o.concurrency = 32;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = nproc > 0 ? (unsigned)nproc : 1;
    o.region = "us-east-1";
    o.name = "endpoint";
    o.access_key = getenv("AWS_ACCESS_KEY_ID");
    o.secret_key = getenv("AWS_SECRET_ACCESS_KEY");
    o.metagate = getenv("METAGATE");
    int keep_set = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", xlong, NULL)) != -1)
        if (xparse(c == 'h' ? X_HELP : c, optarg, &o, &keep_set) != 0)
            return 2;
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (!keep_set) {
        o.keep = o.objects / 4;
        o.keep = o.keep < 1000 ? 1000 : o.keep > 10000 ? 10000 : o.keep;
    }
    if (!o.metagate)
        o.metagate = default_metagate(argv[0]);
    static char bucket[64];
    if (!o.bucket) {
        if (o.endpoint)
            snprintf(bucket, sizeof(bucket), "mgbexp-%ld", (long)time(NULL));
        else
            snprintf(bucket, sizeof(bucket), "mgbexp");
        o.bucket = bucket;
    }
    if (!o.endpoint && access(o.metagate, X_OK) != 0) {
        fprintf(stderr, "mgbench expiry: %s is not executable (--metagate PATH or env METAGATE)\n",
                o.metagate);
        return 2;
    }
    /* the configurations */
    char names[8][40];
    size_t n = 0;
    if (o.endpoint) {
        snprintf(names[n++], sizeof(names[0]), "%s", o.name);
    } else {
        const char *list = o.configs ? o.configs : "point+rocksdb,point+collector,point+locality,range+locality";
        while (*list && n < 8) {
            size_t l = strcspn(list, ",");
            snprintf(names[n], sizeof(names[0]), "%.*s", (int)(l < 39 ? l : 39), list);
            if (!config_known(names[n])) {
                fprintf(stderr, "mgbench expiry: unknown configuration \"%s\" (point+rocksdb, "
                                "point+collector, point+locality, range+locality)\n",
                        names[n]);
                return 2;
            }
            n++;
            list += l + (list[l] == ',');
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct xres *rs = mg_calloc(n, sizeof(*rs));
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, "=== %s (%zu/%zu)\n", names[i], i + 1, n);
        if (run_one(&o, names[i], &rs[i]) == 0)
            ok++;
    }
    print_report(stdout, rs, n, &o);
    fflush(stdout);
    int rv = ok == (int)n ? 0 : 1;
    if (ok && o.json && write_json(o.json, rs, n, &o) != 0)
        rv = 1;
    if (ok && o.plot && write_plot(o.plot, rs, n, &o) != 0)
        rv = 1;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < PFX_COUNT; k++)
            mg_free(rs[i].s[k].v);
    mg_free(rs);
    return rv;
}
