/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mgbench: the S3 load generator of metagate (issue 3). This file owns the
 * command line, the workload lookup and overrides, the Pareto schedule of the
 * open-loop workloads, and the round structure: for each round, each
 * endpoint in turn (A B A B ... with --vs) gets prepare, run and clean
 * phases under a fresh key prefix, so a comparison sees the same noise.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/mem.h"
#include "tests/bench/expiry.h"
#include "tests/bench/report.h"
#include "tests/bench/rng.h"
#include "tests/bench/run.h"
#include "tests/bench/workload.h"

struct opts {
    const char *endpoint, *access_key, *secret_key;
    const char *vs, *vs_access_key, *vs_secret_key, *vs_objects;
    const char *json, *csv, *plot, *md, *workload_file;
    const char *size, *objects, *prefixes, *batch, *list_max;
    int list_workloads;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mgbench --endpoint URL [--access-key K --secret-key S] WORKLOAD [options]\n"
            "       mgbench expiry --objects N [...]   lifecycle expiry (mgbench expiry --help)\n"
            "\n"
            "S3 load generator (SigV4, path-style). Each round creates the workload's objects\n"
            "(untimed prepare), runs the timed mix, then deletes what is left (clean).\n"
            "\n"
            "connection:\n"
            "  --endpoint URL         http://host:port (env MGB_ENDPOINT); a cluster: its nodes'\n"
            "                         URLs joined by commas (connections round-robin)\n"
            "  --access-key K         (env AWS_ACCESS_KEY_ID)\n"
            "  --secret-key S         (env AWS_SECRET_ACCESS_KEY)\n"
            "  --region R             signing region (us-east-1)\n"
            "  --bucket B             bucket, created if missing (mgbench)\n"
            "  --vs URL2              also run against URL2, rounds alternate A B A B, print A/B\n"
            "  --vs-access-key K, --vs-secret-key S   credentials of URL2 (default: A's)\n"
            "  --vs-objects N         objects to prepare on URL2 (default: --objects); for\n"
            "                         consumer workloads (delete) on servers of unequal speed\n"
            "load:\n"
            "  --duration S           timed run per round, seconds (10; warp: 5 min)\n"
            "  --concurrency N        connections in total, one request in flight each (20)\n"
            "  --threads N            worker threads, each with its own epoll loop (cores)\n"
            "  --rounds N             rounds per endpoint (1; 2 with --vs)\n"
            "  --objects N            objects created by prepare (per workload, see below)\n"
            "  --size BYTES           object size, e.g. 1KiB, 4MiB (per workload)\n"
            "  --prefixes N           spread keys over N prefixes (mdtest-style; 1)\n"
            "  --batch N              keys per DeleteObjects (100)\n"
            "  --list-max N           max-keys of LIST (100)\n"
            "  --rate R               open loop: Pareto location, ops/s (200)\n"
            "  --rate-cap X           open loop: offered rate capped at X * rate (20)\n"
            "  --timeout S            per request (60)\n"
            "  --path P               hello: request path (/)\n"
            "  --no-clean             keep the objects after each round\n"
            "  --seed N               random seed (fixed default: runs are repeatable)\n"
            "  --workload-file F      more workloads, same syntax as the built-in table\n"
            "output:\n"
            "  --json F  --csv F  --plot F.png (gnuplot)  --md F (append markdown rows)\n"
            "  --no-progress          no live line on stderr\n"
            "  --list-workloads       print the workload table and exit\n"
            "\n"
            "workloads (defaults: size, objects):\n");
    struct mgb_workload *ws = NULL;
    size_t n = 0;
    char err[200];
    if (mgb_workload_parse_table(mgb_workload_builtin, &ws, &n, err, sizeof(err)) == 0)
        for (size_t i = 0; i < n; i++)
            fprintf(f, "  %-9s %-8" PRIu64 " %-6" PRIu64 " %s\n", ws[i].name, ws[i].size_bytes,
                    ws[i].objects, ws[i].desc);
    mg_free(ws);
}

static void list_workloads(void)
{
    printf("%s\nlogical operations:\n", mgb_workload_builtin);
    for (int i = 0; i < MGB_LOP_COUNT; i++)
        printf("  %-12s %s\n", mgb_lop_name((enum mgb_lop)i), mgb_lop_doc((enum mgb_lop)i));
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    struct mg_buf b;
    mg_buf_init(&b);
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        mg_buf_append(&b, tmp, n);
    mg_buf_append(&b, "", 1);
    fclose(f);
    return b.base;
}

static int parse_uint(const char *s, const char *what, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end || errno || v > 1000000000UL) {
        fprintf(stderr, "mgbench: bad %s: %s\n", what, s);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

static int parse_double(const char *s, const char *what, double *out)
{
    char *end;
    *out = strtod(s, &end);
    if (end == s || *end || *out < 0) {
        fprintf(stderr, "mgbench: bad %s: %s\n", what, s);
        return -1;
    }
    return 0;
}

enum {
    O_ENDPOINT = 256, O_AK, O_SK, O_REGION, O_BUCKET, O_VS, O_VSAK, O_VSSK, O_VSOBJ, O_DURATION, O_CONC,
    O_THREADS, O_ROUNDS, O_OBJECTS, O_SIZE, O_PREFIXES, O_BATCH, O_LISTMAX, O_RATE, O_RATECAP,
    O_TIMEOUT, O_PATH, O_NOCLEAN, O_SEED, O_WFILE, O_JSON, O_CSV, O_PLOT, O_MD, O_NOPROGRESS,
    O_LIST, O_HELP
};

static const struct option long_opts[] = {
    {"endpoint", 1, 0, O_ENDPOINT}, {"access-key", 1, 0, O_AK}, {"secret-key", 1, 0, O_SK},
    {"region", 1, 0, O_REGION}, {"bucket", 1, 0, O_BUCKET}, {"vs", 1, 0, O_VS},
    {"vs-access-key", 1, 0, O_VSAK}, {"vs-secret-key", 1, 0, O_VSSK},
    {"vs-objects", 1, 0, O_VSOBJ},
    {"duration", 1, 0, O_DURATION}, {"concurrency", 1, 0, O_CONC}, {"threads", 1, 0, O_THREADS},
    {"rounds", 1, 0, O_ROUNDS}, {"objects", 1, 0, O_OBJECTS}, {"size", 1, 0, O_SIZE},
    {"prefixes", 1, 0, O_PREFIXES}, {"batch", 1, 0, O_BATCH}, {"list-max", 1, 0, O_LISTMAX},
    {"rate", 1, 0, O_RATE}, {"rate-cap", 1, 0, O_RATECAP}, {"timeout", 1, 0, O_TIMEOUT},
    {"path", 1, 0, O_PATH}, {"no-clean", 0, 0, O_NOCLEAN}, {"seed", 1, 0, O_SEED},
    {"workload-file", 1, 0, O_WFILE}, {"json", 1, 0, O_JSON}, {"csv", 1, 0, O_CSV},
    {"plot", 1, 0, O_PLOT}, {"md", 1, 0, O_MD}, {"no-progress", 0, 0, O_NOPROGRESS},
    {"list-workloads", 0, 0, O_LIST}, {"help", 0, 0, O_HELP}, {0, 0, 0, 0},
};

static int parse_opt(int c, const char *a, struct opts *o, struct mgb_config *cfg)
{
    switch (c) {
    case O_ENDPOINT: o->endpoint = a; return 0;
    case O_AK: o->access_key = a; return 0;
    case O_SK: o->secret_key = a; return 0;
    case O_REGION: snprintf(cfg->region, sizeof(cfg->region), "%s", a); return 0;
    case O_BUCKET: snprintf(cfg->bucket, sizeof(cfg->bucket), "%s", a); return 0;
    case O_VS: o->vs = a; return 0;
    case O_VSAK: o->vs_access_key = a; return 0;
    case O_VSSK: o->vs_secret_key = a; return 0;
    case O_VSOBJ: o->vs_objects = a; return 0;
    case O_DURATION: return parse_double(a, "duration", &cfg->duration_s);
    case O_CONC: return parse_uint(a, "concurrency", &cfg->concurrency);
    case O_THREADS: return parse_uint(a, "threads", &cfg->threads);
    case O_ROUNDS: return parse_uint(a, "rounds", &cfg->rounds);
    case O_OBJECTS: o->objects = a; return 0;
    case O_SIZE: o->size = a; return 0;
    case O_PREFIXES: o->prefixes = a; return 0;
    case O_BATCH: o->batch = a; return 0;
    case O_LISTMAX: o->list_max = a; return 0;
    case O_RATE: return parse_double(a, "rate", &cfg->rate);
    case O_RATECAP: return parse_double(a, "rate-cap", &cfg->rate_cap);
    case O_TIMEOUT: return parse_double(a, "timeout", &cfg->timeout_s);
    case O_PATH: snprintf(cfg->path, sizeof(cfg->path), "%s", a); return 0;
    case O_NOCLEAN: cfg->clean = 0; return 0;
    case O_SEED: cfg->seed = strtoull(a, NULL, 0); return 0;
    case O_WFILE: o->workload_file = a; return 0;
    case O_JSON: o->json = a; return 0;
    case O_CSV: o->csv = a; return 0;
    case O_PLOT: o->plot = a; return 0;
    case O_MD: o->md = a; return 0;
    case O_NOPROGRESS: cfg->progress = 0; return 0;
    case O_LIST: o->list_workloads = 1; return 0;
    case O_HELP: usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
}

/* Apply --size/--objects/... to the chosen workload line (flags win over the table). */
static int override(struct mgb_workload *w, const struct opts *o)
{
    char err[200];
    const char *keys[] = {"size", "objects", "prefixes", "batch", "list_max"};
    const char *vals[] = {o->size, o->objects, o->prefixes, o->batch, o->list_max};
    for (int i = 0; i < 5; i++)
        if (vals[i] && mgb_workload_set(w, keys[i], vals[i], err, sizeof(err)) != 0) {
            fprintf(stderr, "mgbench: %s\n", err);
            return -1;
        }
    if (mgb_workload_finish(w, err, sizeof(err)) != 0) {
        fprintf(stderr, "mgbench: %s\n", err);
        return -1;
    }
    return 0;
}

static int load_workload(const char *name, const struct opts *o, struct mgb_workload *out)
{
    struct mgb_workload *ws = NULL;
    size_t n = 0;
    char err[300];
    int rv = mgb_workload_parse_table(mgb_workload_builtin, &ws, &n, err, sizeof(err));
    if (rv == 0 && o->workload_file) {
        char *text = slurp(o->workload_file);
        if (!text) {
            fprintf(stderr, "mgbench: %s: %s\n", o->workload_file, strerror(errno));
            mg_free(ws);
            return -1;
        }
        rv = mgb_workload_parse_table(text, &ws, &n, err, sizeof(err));
        mg_free(text);
    }
    if (rv != 0) {
        fprintf(stderr, "mgbench: workload table: %s\n", err);
        mg_free(ws);
        return -1;
    }
    rv = -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(ws[i].name, name) == 0) {
            *out = ws[i];
            rv = 0;
        }
    if (rv != 0)
        fprintf(stderr, "mgbench: unknown workload %s (see --list-workloads)\n", name);
    mg_free(ws);
    return rv == 0 ? override(out, o) : -1;
}

static int setup_endpoint(struct mgb_endpoint *ep, const char *url, const char *ak,
                          const char *sk, const char *label)
{
    char err[300];
    if (!url) {
        fprintf(stderr, "mgbench: --endpoint is required\n");
        return -1;
    }
    if (mgb_endpoint_parse(ep, url, err, sizeof(err)) != 0) {
        fprintf(stderr, "mgbench: %s\n", err);
        return -1;
    }
    snprintf(ep->access_key, sizeof(ep->access_key), "%s", ak ? ak : "");
    snprintf(ep->secret_key, sizeof(ep->secret_key), "%s", sk ? sk : "");
    snprintf(ep->label, sizeof(ep->label), "%s", label);
    return 0;
}

/* λFS: the offered rate of each window is an independent Pareto(alpha, --rate) draw. */
static void draw_offered(struct mgb_config *cfg)
{
    struct mgb_rng rng;
    mgb_rng_seed(&rng, cfg->seed ^ 0x5350u);
    cfg->noffered = (unsigned)(cfg->duration_s / cfg->w.window_s) + 1;
    cfg->offered = mg_calloc(cfg->noffered, sizeof(double));
    for (unsigned i = 0; i < cfg->noffered; i++) {
        double r = mgb_pareto(&rng, cfg->w.alpha, cfg->rate);
        cfg->offered[i] = r < cfg->rate * cfg->rate_cap ? r : cfg->rate * cfg->rate_cap;
    }
}

static int parse_args(int argc, char **argv, struct mgb_config *cfg, struct opts *o)
{
    memset(cfg, 0, sizeof(*cfg));
    memset(o, 0, sizeof(*o));
    snprintf(cfg->region, sizeof(cfg->region), "us-east-1");
    snprintf(cfg->bucket, sizeof(cfg->bucket), "mgbench");
    snprintf(cfg->path, sizeof(cfg->path), "/");
    cfg->duration_s = 10;
    cfg->concurrency = 20;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->threads = nproc > 0 ? (unsigned)nproc : 1;
    cfg->rate = 200;
    cfg->rate_cap = 20;
    cfg->timeout_s = 60;
    cfg->clean = 1;
    cfg->progress = isatty(2);
    cfg->seed = 0x6d676265u;
    o->endpoint = getenv("MGB_ENDPOINT");
    o->access_key = getenv("AWS_ACCESS_KEY_ID");
    o->secret_key = getenv("AWS_SECRET_ACCESS_KEY");
    int c;
    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (c == 'h')
            c = O_HELP;
        if (parse_opt(c, optarg, o, cfg) != 0)
            return -1;
    }
    if (o->list_workloads) {
        list_workloads();
        exit(0);
    }
    if (optind != argc - 1) {
        usage(stderr);
        return -1;
    }
    if (cfg->concurrency == 0 || cfg->threads == 0 || cfg->duration_s <= 0) {
        fprintf(stderr, "mgbench: concurrency, threads and duration must be > 0\n");
        return -1;
    }
    if (cfg->threads > cfg->concurrency)
        cfg->threads = cfg->concurrency;
    return load_workload(argv[optind], o, &cfg->w);
}

/* One round on one endpoint: prepare, run (into res), clean. */
static int one_round(const struct mgb_config *cfg, unsigned e, unsigned round, const char *base,
                     struct mgb_result *res)
{
    const struct mgb_endpoint *ep = &cfg->ep[e];
    char prefix[160];
    snprintf(prefix, sizeof(prefix), "%s-r%u%s", base, round + 1, ep->label);
    struct mgb_run *run = mgb_run_create(cfg, ep, prefix, round);
    struct mgb_result prep;
    int rv = 0;
    mgb_result_init(&prep);
    if (mgb_run_objects(run)) {
        uint64_t t0 = mgb_now_ns();
        rv = mgb_run_phase(run, MGB_PHASE_PREPARE, &prep);
        fprintf(stderr, "%s prepare: %zu/%" PRIu64 " objects in %.1f s, %" PRIu64 " errors%s%s\n",
                ep->label, mgb_run_pool_size(run), mgb_run_objects(run),
                (double)(mgb_now_ns() - t0) / 1e9, mgb_result_total_errors(&prep),
                prep.first_error[MGB_OP_PUT][0] ? ": " : "", prep.first_error[MGB_OP_PUT]);
    }
    if (rv == 0)
        rv = mgb_run_phase(run, MGB_PHASE_RUN, res);
    if (rv == 0)
        fprintf(stderr, "%s round %u: %.1f ops/s, %" PRIu64 " errors (%.1f s)\n", ep->label,
                round + 1, (double)mgb_result_total_ops(res) / (res->elapsed_s ? res->elapsed_s : 1),
                mgb_result_total_errors(res), res->elapsed_s);
    if (rv == 0 && cfg->clean && cfg->w.bucket && mgb_run_pool_size(run)) {
        struct mgb_result cl;
        mgb_result_init(&cl);
        mgb_run_phase(run, MGB_PHASE_CLEAN, &cl);
        if (mgb_result_total_errors(&cl))
            fprintf(stderr, "%s clean: %" PRIu64 " errors: %s\n", ep->label,
                    mgb_result_total_errors(&cl), cl.first_error[MGB_OP_DELETE]);
        mgb_result_close(&cl);
    }
    mgb_result_close(&prep);
    mgb_run_destroy(run);
    return rv;
}

static int outputs(const struct opts *o, const struct mgb_report *rep)
{
    int rv = 0;
    for (unsigned e = 0; e < rep->nep; e++)
        mgb_report_table(stdout, rep, e);
    if (rep->nep == 2)
        mgb_report_vs(stdout, rep);
    fflush(stdout);
    if (o->json && mgb_report_json(o->json, rep) != 0)
        rv = -1;
    if (o->csv && mgb_report_csv(o->csv, rep) != 0)
        rv = -1;
    if (o->md && mgb_report_md(o->md, rep) != 0)
        rv = -1;
    if (o->plot && mgb_report_plot(o->plot, rep) != 0)
        rv = -1;
    return rv;
}

int main(int argc, char **argv)
{
    struct mgb_config cfg;
    struct opts o;
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1 && strcmp(argv[1], "expiry") == 0)
        return mgb_expiry_main(argc - 1, argv + 1); /* its own options: mgbench expiry --help */
    if (parse_args(argc, argv, &cfg, &o) != 0)
        return 2;
    if (setup_endpoint(&cfg.ep[0], o.endpoint, o.access_key, o.secret_key, "A") != 0)
        return 2;
    cfg.nep = 1;
    if (o.vs) {
        if (setup_endpoint(&cfg.ep[1], o.vs, o.vs_access_key ? o.vs_access_key : o.access_key,
                           o.vs_secret_key ? o.vs_secret_key : o.secret_key, "B") != 0)
            return 2;
        cfg.nep = 2;
        if (o.vs_objects) {
            char *end;
            cfg.ep[1].objects = strtoull(o.vs_objects, &end, 10);
            if (end == o.vs_objects || *end) {
                fprintf(stderr, "mgbench: bad --vs-objects: %s\n", o.vs_objects);
                return 2;
            }
        }
        if (cfg.rounds == 0)
            cfg.rounds = 2;
    }
    if (cfg.rounds == 0)
        cfg.rounds = 1;
    if (cfg.w.open_loop)
        draw_offered(&cfg);
    for (unsigned e = 0; e < cfg.nep; e++)
        if (cfg.w.bucket && mgb_bucket_ensure(&cfg, &cfg.ep[e]) != 0)
            return 1;
    char base[96];
    snprintf(base, sizeof(base), "mgb-%s-%08x", cfg.w.name,
             (unsigned)((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16)));
    struct mgb_result total[2];
    double *round_rate[2] = {mg_calloc(cfg.rounds, sizeof(double)),
                             mg_calloc(cfg.rounds, sizeof(double))};
    for (unsigned e = 0; e < 2; e++)
        mgb_result_init(&total[e]);
    int rv = 0;
    for (unsigned r = 0; r < cfg.rounds && rv == 0; r++)
        for (unsigned e = 0; e < cfg.nep && rv == 0; e++) {
            struct mgb_result res;
            mgb_result_init(&res);
            rv = one_round(&cfg, e, r, base, &res);
            round_rate[e][r] = res.elapsed_s > 0 ? (double)mgb_result_total_ops(&res) / res.elapsed_s : 0;
            mgb_result_merge(&total[e], &res);
            mgb_result_close(&res);
        }
    struct mgb_report rep = {&cfg, {&total[0], &total[1]}, {round_rate[0], round_rate[1]}, cfg.nep};
    if (rv == 0 && outputs(&o, &rep) != 0)
        rv = 1;
    if (rv == 0 && mgb_result_total_ops(&total[0]) == 0)
        rv = 1; /* nothing succeeded: make scripts notice */
    for (unsigned e = 0; e < 2; e++) {
        mgb_result_close(&total[e]);
        mg_free(round_rate[e]);
    }
    mg_free(cfg.offered);
    return rv;
}
