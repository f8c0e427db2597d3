/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reports (see report.h). Rates are computed over the measured window only
 * (elapsed_s, summed over rounds); latencies come from the merged
 * histograms. The PNG is drawn by gnuplot run as a subprocess on a generated
 * script and data files in a temporary directory.
 */
#include "tests/bench/report.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/mem.h"

#define MIB (1024.0 * 1024.0)

static double rate(uint64_t n, const struct mgb_result *r)
{
    return r->elapsed_s > 0 ? (double)n / r->elapsed_s : 0.0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static int op_used(const struct mgb_result *r, int op)
{
    return r->ops[op] || r->errors[op];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double seg_ops(const struct mgb_seg *s)
{
    uint64_t n = 0;
    for (int o = 0; o < MGB_OP_COUNT; o++)
        n += s->ops[o];
    return (double)n;
}

static double seg_mib(const struct mgb_seg *s)
{
    uint64_t n = 0;
    for (int o = 0; o < MGB_OP_COUNT; o++)
        n += s->bytes[o];
    return (double)n / MIB;
}

int mgb_segments_summary(const struct mgb_result *r, double *fast_ops, double *med_ops,
                         double *slow_ops, double *fast_mib, double *med_mib, double *slow_mib)
{
    unsigned n = r->nsegs;
    if (n == 0)
        return 0;
    double *o = mg_malloc(n * sizeof(double)), *m = mg_malloc(n * sizeof(double));
    for (unsigned i = 0; i < n; i++) {
        o[i] = seg_ops(&r->segs[i]);
        m[i] = seg_mib(&r->segs[i]);
    }
    qsort(o, n, sizeof(double), cmp_double);
    qsort(m, n, sizeof(double), cmp_double);
    *fast_ops = o[n - 1];
    *slow_ops = o[0];
    *med_ops = n % 2 ? o[n / 2] : (o[n / 2 - 1] + o[n / 2]) / 2;
    *fast_mib = m[n - 1];
    *slow_mib = m[0];
    *med_mib = n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2;
    mg_free(o);
    mg_free(m);
    return 1;
}

static void print_offered(FILE *f, const struct mgb_report *rep, const struct mgb_result *r)
{
    unsigned win = rep->cfg->w.window_s;
    fprintf(f, "Offered vs achieved (open loop, per %u s window; %" PRIu64
               " requests dropped: backlog over 1 s of offered rate):\n",
            win, r->dropped);
    fprintf(f, "  %8s %12s %12s %8s\n", "t (s)", "offered/s", "achieved/s", "ratio");
    for (unsigned s = 0; s < r->nsegs; s += win) {
        double off = 0, ach = 0;
        unsigned k = 0;
        for (; k < win && s + k < r->nsegs; k++) {
            off += r->segs[s + k].offered;
            ach += seg_ops(&r->segs[s + k]);
        }
        fprintf(f, "  %8u %12.1f %12.1f %8.3f\n", s, off / k, ach / k, off > 0 ? ach / off : 0);
    }
}

void mgb_report_table(FILE *f, const struct mgb_report *rep, unsigned e)
{
    const struct mgb_config *cfg = rep->cfg;
    const struct mgb_result *r = rep->res[e];
    fprintf(f, "\n%s %s  workload %s  %.1f s measured (%u round%s)  concurrency %u  threads %u"
               "  size %" PRIu64 " B\n",
            cfg->ep[e].label, cfg->ep[e].url, cfg->w.name, r->elapsed_s, cfg->rounds,
            cfg->rounds == 1 ? "" : "s", cfg->concurrency, cfg->threads, cfg->w.size_bytes);
    fprintf(f, "%-7s %10s %9s %10s %8s %8s %8s %9s %9s %8s\n", "op", "ops/s", "MiB/s", "obj/s",
            "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors");
    for (int o = 0; o < MGB_OP_COUNT; o++) {
        if (!op_used(r, o))
            continue;
        const struct mgb_hist *h = &r->hist[o];
        fprintf(f, "%-7s %10.1f %9.2f %10.1f %8.3f %8.3f %8.3f %9.3f %9.3f %8" PRIu64 "\n",
                mgb_op_name((enum mgb_op)o), rate(r->ops[o], r), rate(r->bytes[o], r) / MIB,
                rate(r->objects[o], r), ms(mgb_hist_quantile(h, 0.5)),
                ms(mgb_hist_quantile(h, 0.9)), ms(mgb_hist_quantile(h, 0.99)),
                ms(mgb_hist_quantile(h, 0.999)), ms(h->max), r->errors[o]);
    }
    uint64_t bytes = 0;
    for (int o = 0; o < MGB_OP_COUNT; o++)
        bytes += r->bytes[o];
    fprintf(f, "%-7s %10.1f %9.2f %10s %8s %8s %8s %9s %9s %8" PRIu64 "\n", "total",
            rate(mgb_result_total_ops(r), r), rate(bytes, r) / MIB, "", "", "", "", "", "",
            mgb_result_total_errors(r));
    double fo, mo, so, fm, mm, sm;
    if (mgb_segments_summary(r, &fo, &mo, &so, &fm, &mm, &sm))
        fprintf(f, "per 1 s segment (%u): fastest %.1f ops/s %.2f MiB/s, median %.1f ops/s %.2f "
                   "MiB/s, slowest %.1f ops/s %.2f MiB/s\n",
                r->nsegs, fo, fm, mo, mm, so, sm);
    if (cfg->rounds > 1) {
        fprintf(f, "per round ops/s:");
        for (unsigned i = 0; i < cfg->rounds; i++)
            fprintf(f, " %.1f", rep->round_ops_per_s[e][i]);
        fprintf(f, "\n");
    }
    for (int o = 0; o < MGB_OP_COUNT; o++)
        if (r->first_error[o][0])
            fprintf(f, "first %s error: %s\n", mgb_op_name((enum mgb_op)o), r->first_error[o]);
    if (cfg->w.open_loop)
        print_offered(f, rep, r);
}

static double ratio(double a, double b)
{
    return b != 0 ? a / b : 0.0;
}

void mgb_report_vs(FILE *f, const struct mgb_report *rep)
{
    const struct mgb_result *a = rep->res[0], *b = rep->res[1];
    fprintf(f, "\nA/B  (A = %s, B = %s; rounds alternate A B A B ...)\n", rep->cfg->ep[0].url,
            rep->cfg->ep[1].url);
    fprintf(f, "%-7s %-9s %12s %12s %8s\n", "op", "metric", "A", "B", "A/B");
    for (int o = 0; o < MGB_OP_COUNT; o++) {
        if (!op_used(a, o) && !op_used(b, o))
            continue;
        const char *name = mgb_op_name((enum mgb_op)o);
        double va[6] = {rate(a->ops[o], a), rate(a->bytes[o], a) / MIB,
                        ms(mgb_hist_quantile(&a->hist[o], 0.5)),
                        ms(mgb_hist_quantile(&a->hist[o], 0.9)),
                        ms(mgb_hist_quantile(&a->hist[o], 0.99)),
                        ms(mgb_hist_quantile(&a->hist[o], 0.999))};
        double vb[6] = {rate(b->ops[o], b), rate(b->bytes[o], b) / MIB,
                        ms(mgb_hist_quantile(&b->hist[o], 0.5)),
                        ms(mgb_hist_quantile(&b->hist[o], 0.9)),
                        ms(mgb_hist_quantile(&b->hist[o], 0.99)),
                        ms(mgb_hist_quantile(&b->hist[o], 0.999))};
        static const char *const metric[6] = {"ops/s", "MiB/s", "p50 ms", "p90 ms", "p99 ms",
                                              "p99.9 ms"};
        for (int m = 0; m < 6; m++) {
            if (m == 1 && va[1] == 0 && vb[1] == 0)
                continue;
            fprintf(f, "%-7s %-9s %12.3f %12.3f %8.3f\n", m == 0 ? name : "", metric[m], va[m],
                    vb[m], ratio(va[m], vb[m]));
        }
        fprintf(f, "%-7s %-9s %12" PRIu64 " %12" PRIu64 "\n", "", "errors", a->errors[o],
                b->errors[o]);
    }
}

/* ------------------------------------------------------------------ JSON */

static FILE *open_out(const char *path, const char *mode)
{
    FILE *f = fopen(path, mode);
    if (!f)
        fprintf(stderr, "mgbench: %s: %s\n", path, strerror(errno));
    return f;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_ops(FILE *f, const struct mgb_result *r)
{
    int first = 1;
    fprintf(f, "{");
    for (int o = 0; o < MGB_OP_COUNT; o++) {
        if (!op_used(r, o))
            continue;
        const struct mgb_hist *h = &r->hist[o];
        fprintf(f, "%s\"%s\": {\"ops_per_s\": %.3f, \"mib_per_s\": %.4f, \"objects_per_s\": %.3f, "
                   "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"p999_ms\": %.4f, "
                   "\"max_ms\": %.4f, \"mean_ms\": %.4f, \"count\": %" PRIu64
                   ", \"errors\": %" PRIu64 ", \"first_error\": ",
                first ? "" : ", ", mgb_op_name((enum mgb_op)o), rate(r->ops[o], r),
                rate(r->bytes[o], r) / MIB, rate(r->objects[o], r), ms(mgb_hist_quantile(h, 0.5)),
                ms(mgb_hist_quantile(h, 0.9)), ms(mgb_hist_quantile(h, 0.99)),
                ms(mgb_hist_quantile(h, 0.999)), ms(h->max), mgb_hist_mean(h) / 1e6, r->ops[o],
                r->errors[o]);
        json_str(f, r->first_error[o]);
        fprintf(f, "}");
        first = 0;
    }
    fprintf(f, "}");
}

static void json_endpoint(FILE *f, const struct mgb_report *rep, unsigned e)
{
    const struct mgb_result *r = rep->res[e];
    fprintf(f, "\"endpoint\": ");
    json_str(f, rep->cfg->ep[e].url);
    fprintf(f, ", \"elapsed_s\": %.3f, \"ops\": ", r->elapsed_s);
    json_ops(f, r);
    uint64_t bytes = 0;
    for (int o = 0; o < MGB_OP_COUNT; o++)
        bytes += r->bytes[o];
    fprintf(f, ", \"total\": {\"ops_per_s\": %.3f, \"mib_per_s\": %.4f, \"errors\": %" PRIu64 "}",
            rate(mgb_result_total_ops(r), r), rate(bytes, r) / MIB, mgb_result_total_errors(r));
    fprintf(f, ", \"round_ops_per_s\": [");
    for (unsigned i = 0; i < rep->cfg->rounds; i++)
        fprintf(f, "%s%.3f", i ? ", " : "", rep->round_ops_per_s[e][i]);
    double fo = 0, mo = 0, so = 0, fm = 0, mm = 0, sm = 0;
    mgb_segments_summary(r, &fo, &mo, &so, &fm, &mm, &sm);
    fprintf(f, "], \"segments\": {\"fastest_ops_per_s\": %.1f, \"median_ops_per_s\": %.1f, "
               "\"slowest_ops_per_s\": %.1f, \"fastest_mib_per_s\": %.4f, \"median_mib_per_s\": "
               "%.4f, \"slowest_mib_per_s\": %.4f, \"dropped\": %" PRIu64 ", \"per_second\": [",
            fo, mo, so, fm, mm, sm, r->dropped);
    for (unsigned s = 0; s < r->nsegs; s++)
        fprintf(f, "%s{\"t\": %u, \"ops\": %.0f, \"mib\": %.4f, \"offered\": %.1f}", s ? ", " : "",
                s, seg_ops(&r->segs[s]), seg_mib(&r->segs[s]), r->segs[s].offered);
    fprintf(f, "]}");
}

int mgb_report_json(const char *path, const struct mgb_report *rep)
{
    FILE *f = open_out(path, "w");
    if (!f)
        return -1;
    const struct mgb_config *cfg = rep->cfg;
    fprintf(f, "{\"workload\": ");
    json_str(f, cfg->w.name);
    fprintf(f, ", \"duration_s\": %.3f, \"rounds\": %u, \"concurrency\": %u, \"threads\": %u, "
               "\"size_bytes\": %" PRIu64 ", \"objects\": %" PRIu64 ", \"prefixes\": %u, ",
            cfg->duration_s, cfg->rounds, cfg->concurrency, cfg->threads, cfg->w.size_bytes,
            cfg->w.objects, cfg->w.prefixes);
    if (rep->nep == 2 && cfg->ep[1].objects)
        fprintf(f, "\"vs_objects\": %" PRIu64 ", ", cfg->ep[1].objects);
    json_endpoint(f, rep, 0);
    if (rep->nep == 2) {
        fprintf(f, ", \"vs\": {");
        json_endpoint(f, rep, 1);
        fprintf(f, ", \"ratio\": {");
        int first = 1;
        for (int o = 0; o < MGB_OP_COUNT; o++) {
            const struct mgb_result *a = rep->res[0], *b = rep->res[1];
            if (!op_used(a, o) && !op_used(b, o))
                continue;
            fprintf(f, "%s\"%s\": {\"ops_per_s\": %.4f, \"p50_ms\": %.4f, \"p99_ms\": %.4f}",
                    first ? "" : ", ", mgb_op_name((enum mgb_op)o),
                    ratio(rate(a->ops[o], a), rate(b->ops[o], b)),
                    ratio((double)mgb_hist_quantile(&a->hist[o], 0.5),
                          (double)mgb_hist_quantile(&b->hist[o], 0.5)),
                    ratio((double)mgb_hist_quantile(&a->hist[o], 0.99),
                          (double)mgb_hist_quantile(&b->hist[o], 0.99)));
            first = 0;
        }
        fprintf(f, "}}");
    }
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------- CSV */

int mgb_report_csv(const char *path, const struct mgb_report *rep)
{
    FILE *f = open_out(path, "w");
    if (!f)
        return -1;
    fprintf(f, "endpoint,kind,t_s,op,ops_per_s,mib_per_s,objects_per_s,p50_ms,p90_ms,p99_ms,"
               "p999_ms,max_ms,errors,offered_ops_per_s\n");
    for (unsigned e = 0; e < rep->nep; e++) {
        const struct mgb_result *r = rep->res[e];
        const char *url = rep->cfg->ep[e].url;
        for (int o = 0; o < MGB_OP_COUNT; o++) {
            if (!op_used(r, o))
                continue;
            const struct mgb_hist *h = &r->hist[o];
            fprintf(f, "%s,summary,,%s,%.3f,%.4f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%" PRIu64 ",\n",
                    url, mgb_op_name((enum mgb_op)o), rate(r->ops[o], r),
                    rate(r->bytes[o], r) / MIB, rate(r->objects[o], r),
                    ms(mgb_hist_quantile(h, 0.5)), ms(mgb_hist_quantile(h, 0.9)),
                    ms(mgb_hist_quantile(h, 0.99)), ms(mgb_hist_quantile(h, 0.999)), ms(h->max),
                    r->errors[o]);
        }
        for (unsigned s = 0; s < r->nsegs; s++)
            for (int o = 0; o < MGB_OP_COUNT; o++) {
                if (!op_used(r, o))
                    continue;
                const struct mgb_seg *g = &r->segs[s];
                fprintf(f, "%s,segment,%u,%s,%" PRIu64 ",%.4f,,,,,,,%" PRIu64 ",%.1f\n", url, s,
                        mgb_op_name((enum mgb_op)o), g->ops[o], (double)g->bytes[o] / MIB,
                        g->errors[o], g->offered);
            }
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* -------------------------------------------------------------- markdown */

int mgb_report_md(const char *path, const struct mgb_report *rep)
{
    FILE *f = open_out(path, "a");
    if (!f)
        return -1;
    for (int o = 0; o < MGB_OP_COUNT; o++) {
        const struct mgb_result *a = rep->res[0], *b = rep->nep == 2 ? rep->res[1] : NULL;
        if (!op_used(a, o) && !(b && op_used(b, o)))
            continue;
        int del = o == MGB_OP_DELETE && a->objects[o] > a->ops[o];
        double ra = del ? rate(a->objects[o], a) : rate(a->ops[o], a);
        fprintf(f, "| %s | %s%s | %.0f | %.2f | %.2f | %" PRIu64, rep->cfg->w.name,
                mgb_op_name((enum mgb_op)o), del ? " (obj/s)" : "", ra,
                ms(mgb_hist_quantile(&a->hist[o], 0.5)), ms(mgb_hist_quantile(&a->hist[o], 0.99)),
                a->errors[o]);
        if (b) {
            double rb = del ? rate(b->objects[o], b) : rate(b->ops[o], b);
            fprintf(f, " | %.0f | %.2f | %.2f | %" PRIu64 " | %.2f", rb,
                    ms(mgb_hist_quantile(&b->hist[o], 0.5)),
                    ms(mgb_hist_quantile(&b->hist[o], 0.99)), b->errors[o], ratio(ra, rb));
        }
        fprintf(f, " |\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ plot */

static double pow10_neg(int k)
{
    return pow(10.0, -(double)k / 10.0);
}

static int write_plot_data(const char *dir, const struct mgb_report *rep, unsigned e)
{
    char p[600];
    const struct mgb_result *r = rep->res[e];
    snprintf(p, sizeof(p), "%s/ts%u.dat", dir, e);
    FILE *f = fopen(p, "w");
    if (!f)
        return -1;
    for (unsigned s = 0; s < r->nsegs; s++)
        fprintf(f, "%u %.0f %.4f %.1f\n", s, seg_ops(&r->segs[s]), seg_mib(&r->segs[s]),
                r->segs[s].offered);
    fclose(f);
    for (int o = 0; o < MGB_OP_COUNT; o++) {
        if (!r->ops[o])
            continue;
        snprintf(p, sizeof(p), "%s/lat%u_%d.dat", dir, e, o);
        f = fopen(p, "w");
        if (!f)
            return -1;
        /* HdrHistogram-style percentile distribution: x = 1 / (1 - q). */
        for (int k = 0; k <= 50; k++) {
            double q = 1.0 - pow10_neg(k);
            fprintf(f, "%.6f %.4f\n", 1.0 / (1.0 - q), ms(mgb_hist_quantile(&r->hist[o], q)));
        }
        fprintf(f, "%.6f %.4f\n", 1e5, ms(r->hist[o].max));
        fclose(f);
    }
    return 0;
}

static void plot_script(FILE *f, const char *dir, const char *png, const struct mgb_report *rep)
{
    const struct mgb_config *cfg = rep->cfg;
    fprintf(f, "set terminal pngcairo size 1200,1000 noenhanced font 'sans,10'\n"
               "set output '%s'\nset multiplot layout 2,1 title 'mgbench %s (%u conns, %u "
               "threads, %" PRIu64 " B objects)'\n",
            png, cfg->w.name, cfg->concurrency, cfg->threads, cfg->w.size_bytes);
    fprintf(f, "set title 'Throughput per 1 s segment (rounds back to back)'\nset xlabel 'measured "
               "time (s)'\nset ylabel 'ops/s'\nset grid\nset key outside right\nplot ");
    for (unsigned e = 0; e < rep->nep; e++) {
        fprintf(f, "%s'%s/ts%u.dat' using 1:2 with linespoints title '%s ops/s'", e ? ", " : "",
                dir, e, cfg->ep[e].url);
        if (cfg->w.open_loop)
            fprintf(f, ", '%s/ts%u.dat' using 1:4 with lines dashtype 2 title '%s offered'", dir, e,
                    cfg->ep[e].label);
    }
    fprintf(f, "\nset title 'Latency by percentile'\nset xlabel 'percentile'\nset ylabel 'ms'\n"
               "set logscale x\nset logscale y\nset xrange [1:100000]\n"
               "set xtics ('0%%%%' 1, '50%%%%' 2, '90%%%%' 10, '99%%%%' 100, '99.9%%%%' 1000, "
               "'99.99%%%%' 10000, 'max' 100000)\nplot ");
    int first = 1;
    for (unsigned e = 0; e < rep->nep; e++)
        for (int o = 0; o < MGB_OP_COUNT; o++) {
            if (!rep->res[e]->ops[o])
                continue;
            fprintf(f, "%s'%s/lat%u_%d.dat' using 1:2 with lines linewidth 2 title '%s %s'",
                    first ? "" : ", ", dir, e, o, cfg->ep[e].label, mgb_op_name((enum mgb_op)o));
            first = 0;
        }
    if (first)
        fprintf(f, "1 notitle");
    fprintf(f, "\nunset multiplot\n");
}

int mgb_report_plot(const char *path, const struct mgb_report *rep)
{
    char dir[] = "/tmp/mgbench-plot-XXXXXX", script[600], cmd[1400];
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mgbench: plot: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    for (unsigned e = 0; e < rep->nep; e++)
        if (write_plot_data(dir, rep, e) != 0) {
            fprintf(stderr, "mgbench: plot: cannot write data in %s\n", dir);
            return -1;
        }
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    FILE *f = fopen(script, "w");
    if (!f)
        return -1;
    plot_script(f, dir, path, rep);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "gnuplot '%s' 2>'%s/gnuplot.err'", script, dir);
    int st = system(cmd);
    struct stat sb;
    if (st != 0 || stat(path, &sb) != 0 || sb.st_size == 0) {
        fprintf(stderr, "mgbench: gnuplot failed (status %d); script and data kept in %s\n", st,
                dir);
        return -1;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "mgbench: could not remove %s\n", dir);
    return 0;
}
