/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of mgbench's own parts: the log-linear histogram (bucket
 * bounds, percentiles, merge), the incremental HTTP response parser (every
 * framing, fed whole and byte by byte), the workload table parser, and the
 * samplers (Pareto statistics, weighted choice), and the expiry scenario's
 * figures (nearest-rank percentiles, recover_s, /metrics lines), and endpoint lists (a
 * cluster's nodes). Signing is tested by
 * tests/unit/common against the client fixtures, not here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "tests/bench/expiry.h"
#include "tests/bench/hist.h"
#include "tests/bench/http.h"
#include "tests/bench/rng.h"
#include "tests/bench/run.h"

#include "tests/bench/workload.h"

/* ------------------------------------------------------------ histogram */

static void test_hist_buckets(void **state)
{
    (void)state;
    uint64_t prev_hi = 0;
    for (unsigned i = 0; i < MGB_HIST_BUCKETS; i++) {
        uint64_t lo, hi;
        mgb_hist_bounds(i, &lo, &hi);
        assert_true(lo <= hi);
        if (i)
            assert_int_equal(lo, prev_hi + 1); /* contiguous, no gaps */
        assert_int_equal(mgb_hist_index(lo), i);
        assert_int_equal(mgb_hist_index(hi), i);
        if (lo >= 128)
            assert_true((double)(hi - lo + 1) / (double)lo <= 1.0 / 64 + 1e-12);
        prev_hi = hi;
    }
    assert_int_equal(mgb_hist_index(UINT64_MAX), MGB_HIST_BUCKETS - 1);
}

static void test_hist_quantiles(void **state)
{
    (void)state;
    struct mgb_hist *h = malloc(sizeof(*h));
    mgb_hist_init(h);
    assert_int_equal(mgb_hist_quantile(h, 0.5), 0);
    for (uint64_t v = 1; v <= 100000; v++)
        mgb_hist_record(h, v * 1000); /* 1 us .. 100 ms */
    assert_int_equal(h->count, 100000);
    assert_int_equal(h->min, 1000);
    assert_int_equal(h->max, 100000000);
    double qs[] = {0.5, 0.9, 0.99, 0.999};
    for (int i = 0; i < 4; i++) {
        double want = qs[i] * 100000 * 1000;
        double got = (double)mgb_hist_quantile(h, qs[i]);
        assert_true(fabs(got - want) / want < 0.01);
    }
    assert_int_equal(mgb_hist_quantile(h, 1.0), 100000000);
    assert_true(mgb_hist_quantile(h, 0.0) >= 1000 && mgb_hist_quantile(h, 0.0) <= 1016);
    assert_true(fabs(mgb_hist_mean(h) - 50000.5 * 1000) < 1);
    free(h);
}

static void test_hist_merge(void **state)
{
    (void)state;
    struct mgb_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *all = malloc(sizeof(*all));
    mgb_hist_init(a);
    mgb_hist_init(b);
    mgb_hist_init(all);
    struct mgb_rng r;
    mgb_rng_seed(&r, 42);
    for (int i = 0; i < 50000; i++) {
        uint64_t v = mgb_rng_below(&r, 50000000);
        mgb_hist_record(i % 2 ? a : b, v);
        mgb_hist_record(all, v);
    }
    mgb_hist_merge(a, b);
    assert_memory_equal(a, all, sizeof(*a));
    struct mgb_hist *empty = malloc(sizeof(*empty));
    mgb_hist_init(empty);
    mgb_hist_merge(a, empty);
    assert_memory_equal(a, all, sizeof(*a));
    free(a);
    free(b);
    free(all);
    free(empty);
}

/* ----------------------------------------------------------------- HTTP */

static char cap[256];

/* Feed the whole string, then byte by byte; both must agree. Returns the final state. */
static void parse_both(const char *text, int head, struct mgb_resp *out)
{
    size_t n = strlen(text);
    struct mgb_resp r;
    mgb_resp_init(&r, head, cap, sizeof(cap));
    ssize_t used = mgb_resp_feed(&r, text, n);
    *out = r;
    mgb_resp_init(&r, head, cap, sizeof(cap));
    size_t total = 0;
    for (size_t i = 0; i < n && r.state != MGB_RESP_DONE && r.state != MGB_RESP_ERROR; i++) {
        ssize_t k = mgb_resp_feed(&r, text + i, 1);
        if (k < 0)
            break;
        total += (size_t)k;
    }
    assert_int_equal(r.state, out->state);
    assert_int_equal(r.status, out->status);
    assert_int_equal(r.body_bytes, out->body_bytes);
    if (used >= 0)
        assert_int_equal(total, (size_t)used);
}

static void test_http_content_length(void **state)
{
    (void)state;
    struct mgb_resp r;
    parse_both("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\nhello", 0, &r);
    assert_int_equal(r.state, MGB_RESP_DONE);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_bytes, 5);
    assert_int_equal(r.close, 0);
    parse_both("HTTP/1.1 404 Not Found\r\ncontent-length: 52\r\nConnection: close\r\n\r\n"
               "<Error><Code>NoSuchKey</Code><Message>x</Message></Error>",
               0, &r);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.close, 1);
}

static void test_http_chunked(void **state)
{
    (void)state;
    struct mgb_resp r;
    parse_both("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nx-trailer: y\r\n\r\n",
               0, &r);
    assert_int_equal(r.state, MGB_RESP_DONE);
    assert_int_equal(r.body_bytes, 15);
    assert_memory_equal(cap, "hello0123456789", 15);
    parse_both("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, &r);
    assert_int_equal(r.state, MGB_RESP_ERROR);
}

static void test_http_no_body(void **state)
{
    (void)state;
    struct mgb_resp r;
    parse_both("HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n", 1, &r); /* HEAD */
    assert_int_equal(r.state, MGB_RESP_DONE);
    assert_int_equal(r.body_bytes, 0);
    parse_both("HTTP/1.1 204 No Content\r\n\r\n", 0, &r);
    assert_int_equal(r.state, MGB_RESP_DONE);
    parse_both("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0,
               &r);
    assert_int_equal(r.state, MGB_RESP_DONE);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_bytes, 2);
}

static void test_http_until_close_and_errors(void **state)
{
    (void)state;
    struct mgb_resp r;
    mgb_resp_init(&r, 0, NULL, 0);
    const char *t = "HTTP/1.0 200 OK\r\n\r\nabc";
    assert_int_equal(mgb_resp_feed(&r, t, strlen(t)), (ssize_t)strlen(t));
    assert_int_equal(r.state, MGB_RESP_UNTIL_CLOSE);
    assert_int_equal(mgb_resp_eof(&r), 0);
    assert_int_equal(r.state, MGB_RESP_DONE);
    assert_int_equal(r.body_bytes, 3);
    mgb_resp_init(&r, 0, NULL, 0);
    assert_int_equal(mgb_resp_feed(&r, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab", 41), 41);
    assert_int_equal(mgb_resp_eof(&r), -1); /* cut short */
    mgb_resp_init(&r, 0, NULL, 0);
    assert_int_equal(mgb_resp_feed(&r, "SSH-2.0-OpenSSH\r\n", 17), -1);
    /* Two responses in one buffer: the parser stops after the first. */
    const char *two = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nAHTTP/1.1 200 OK\r\n";
    mgb_resp_init(&r, 0, NULL, 0);
    assert_int_equal(mgb_resp_feed(&r, two, strlen(two)), 39);
    assert_int_equal(r.state, MGB_RESP_DONE);
}

/* ------------------------------------------------------------- workloads */

static void test_workload_builtin(void **state)
{
    (void)state;
    struct mgb_workload *ws = NULL;
    size_t n = 0;
    char err[200];
    assert_int_equal(mgb_workload_parse_table(mgb_workload_builtin, &ws, &n, err, sizeof(err)), 0);
    const char *names[] = {"get", "put", "stat", "list", "delete", "mixed", "create",
                           "md-stat", "remove", "spotify", "hello"};
    assert_int_equal(n, sizeof(names) / sizeof(names[0]));
    for (size_t i = 0; i < n; i++)
        assert_string_equal(ws[i].name, names[i]);
    const struct mgb_workload *mixed = &ws[5];
    assert_true(mixed->weight[MGB_LOP_GET] == 45 && mixed->weight[MGB_LOP_HEAD] == 30 &&
                mixed->weight[MGB_LOP_PUT] == 15 && mixed->weight[MGB_LOP_DELETE] == 10);
    assert_true(mixed->cum[MGB_LOP_COUNT - 1] == 100);
    assert_int_equal(ws[4].batch, 100);
    assert_int_equal(ws[3].list_max, 100);
    const struct mgb_workload *sp = &ws[9];
    assert_true(sp->open_loop && sp->alpha == 2 && sp->window_s == 15 && sp->tick_ms == 10);
    assert_true(fabs(sp->cum[MGB_LOP_COUNT - 1] - 100.0) < 1e-9);
    assert_int_equal(ws[10].bucket, 0);
    mg_free(ws);
}

static void test_workload_parse_errors(void **state)
{
    (void)state;
    struct mgb_workload w;
    char err[200];
    assert_int_equal(mgb_workload_parse_line("   # comment", &w, err, sizeof(err)), 1);
    assert_int_equal(mgb_workload_parse_line("", &w, err, sizeof(err)), 1);
    assert_int_equal(mgb_workload_parse_line("x mix=FOO:1", &w, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "FOO"));
    assert_int_equal(mgb_workload_parse_line("x mix=GET:1 objects=0", &w, err, sizeof(err)), -1);
    assert_int_equal(mgb_workload_parse_line("x size=1KiB", &w, err, sizeof(err)), -1);
    assert_int_equal(mgb_workload_parse_line("x mix=PUT:1 wat=3", &w, err, sizeof(err)), -1);
    assert_int_equal(mgb_workload_parse_line("x mix=PUT:1 desc=\"open", &w, err, sizeof(err)), -1);
    assert_int_equal(
        mgb_workload_parse_line("expiry mix=DELETEMULTI:9,list:1 size=2MiB objects=7 "
                                "prefixes=3 batch=50 desc=\"lifecycle expiry\" # tail",
                                &w, err, sizeof(err)),
        0);
    assert_string_equal(w.name, "expiry");
    assert_int_equal(w.size_bytes, 2 * 1024 * 1024);
    assert_int_equal(w.objects, 7);
    assert_int_equal(w.prefixes, 3);
    assert_int_equal(w.batch, 50);
    assert_true(w.weight[MGB_LOP_LIST] == 1 && w.weight[MGB_LOP_DELETEMULTI] == 9);
    assert_string_equal(w.desc, "lifecycle expiry");
    assert_int_equal(w.keys_time, 0);
    assert_int_equal(mgb_workload_set(&w, "keys", "time", err, sizeof(err)), 0);
    assert_int_equal(w.keys_time, 1);
    assert_int_equal(mgb_workload_set(&w, "keys", "uuid", err, sizeof(err)), -1);
    assert_int_equal(mgb_workload_set(&w, "size", "4k", err, sizeof(err)), 0);
    assert_int_equal(w.size_bytes, 4096);
    assert_int_equal(mgb_workload_set(&w, "batch", "0", err, sizeof(err)), 0);
    assert_int_equal(mgb_workload_finish(&w, err, sizeof(err)), -1);
    /* A later line with the same name replaces the earlier one. */
    struct mgb_workload *ws = NULL;
    size_t n = 0;
    assert_int_equal(mgb_workload_parse_table("a mix=PUT:1\nb mix=PUT:1\na mix=PUT:1 size=1\n",
                                              &ws, &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 2);
    assert_int_equal(ws[0].size_bytes, 1);
    assert_int_equal(mgb_workload_parse_table("ok mix=PUT:1\nbad mix=\n", &ws, &n, err,
                                              sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "line 2"));
    mg_free(ws);
}

static void test_size_parse(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(mgb_size_parse("1KiB", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(mgb_size_parse("10MiB", &v), 0);
    assert_int_equal(v, 10 * 1024 * 1024);
    assert_int_equal(mgb_size_parse("0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(mgb_size_parse("1.5k", &v), 0);
    assert_int_equal(v, 1536);
    assert_int_equal(mgb_size_parse("12parsecs", &v), -1);
    assert_int_equal(mgb_size_parse("", &v), -1);
}

/* --------------------------------------------------------------- samplers */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_pareto(void **state)
{
    (void)state;
    enum { N = 200000 };
    double *x = malloc(N * sizeof(double));
    struct mgb_rng r;
    mgb_rng_seed(&r, 7);
    const double xm = 100, alpha = 2;
    unsigned above2 = 0, above10 = 0;
    for (int i = 0; i < N; i++) {
        x[i] = mgb_pareto(&r, alpha, xm);
        assert_true(x[i] >= xm);
        above2 += x[i] > 2 * xm;
        above10 += x[i] > 10 * xm;
    }
    /* Survival function (xm/x)^alpha: P(X > 2xm) = 0.25, P(X > 10xm) = 0.01. */
    assert_true(fabs((double)above2 / N - 0.25) < 0.005);
    assert_true(fabs((double)above10 / N - 0.01) < 0.001);
    qsort(x, N, sizeof(double), cmp_d);
    assert_true(fabs(x[N / 2] - xm * sqrt(2.0)) / (xm * sqrt(2.0)) < 0.01); /* median */
    /* The mean (alpha xm / (alpha - 1) = 200) converges slowly (infinite variance): the
     * trimmed mean below the 99th percentile is 2 xm (1 - 0.1) / 0.99 = 181.8. */
    double sum = 0;
    int k = (int)(N * 0.99);
    for (int i = 0; i < k; i++)
        sum += x[i];
    assert_true(fabs(sum / k - 181.82) < 2.0);
    free(x);
}

static void test_pick_and_below(void **state)
{
    (void)state;
    struct mgb_rng r;
    mgb_rng_seed(&r, 1);
    double cum[4] = {45, 75, 90, 100};
    unsigned cnt[4] = {0};
    for (int i = 0; i < 100000; i++)
        cnt[mgb_rng_pick(&r, cum, 4)]++;
    double want[4] = {0.45, 0.30, 0.15, 0.10};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(cnt[i] / 100000.0 - want[i]) < 0.01);
    for (int i = 0; i < 10000; i++)
        assert_true(mgb_rng_below(&r, 7) < 7);
    double zero_first[3] = {0, 0, 1};
    assert_int_equal(mgb_rng_pick(&r, zero_first, 3), 2);
}

/* ------------------------------------------------------------- expiry */

/* --delete-objects' request body: Quiet, one <Object><Key> per key, in order; reset each time. */
static void test_expiry_delete_body(void **state)
{
    (void)state;
    struct mg_buf b;
    mg_buf_init(&b);
    const char *keys[2] = {"logs/2026-12-01T00:00:00.000000-0000000000", "logs/x"};
    const char *want = "<Delete><Quiet>true</Quiet>"
                       "<Object><Key>logs/2026-12-01T00:00:00.000000-0000000000</Key></Object>"
                       "<Object><Key>logs/x</Key></Object></Delete>";
    assert_int_equal(mgb_exp_delete_body(&b, keys, 2), strlen(want));
    assert_memory_equal(b.base, want, strlen(want));
    const char *one = "<Delete><Quiet>true</Quiet><Object><Key>logs/x</Key></Object></Delete>";
    assert_int_equal(mgb_exp_delete_body(&b, keys + 1, 1), strlen(one));
    assert_memory_equal(b.base, one, strlen(one));
    mg_buf_close(&b);
}

static void test_expiry_quantile(void **state)
{
    (void)state;
    double none[1];
    assert_true(isnan(mgb_exp_quantile(none, 0, 0.5)));
    double one[1] = {7};
    assert_true(mgb_exp_quantile(one, 1, 0.5) == 7 && mgb_exp_quantile(one, 1, 0.99) == 7);
    /* 100 values 100, 99, ..., 1 (unsorted input): nearest rank, p50 = 50, p99 = 99 */
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100 - i;
    assert_true(mgb_exp_quantile(v, 100, 0.5) == 50);
    assert_true(mgb_exp_quantile(v, 100, 0.99) == 99);
    assert_true(mgb_exp_quantile(v, 100, 1.0) == 100);
    assert_true(mgb_exp_quantile(v, 100, 0.0) == 1);
    assert_true(mgb_exp_quantile(v, 100, 0.501) == 51);
    /* 10 values: p99 is the largest (rank ceil(9.9) = 10), p50 the 5th */
    double w[10] = {5, 1, 9, 3, 7, 2, 8, 4, 10, 6};
    assert_true(mgb_exp_quantile(w, 10, 0.99) == 10);
    assert_true(mgb_exp_quantile(w, 10, 0.5) == 5);
}

static void test_expiry_recover(void **state)
{
    (void)state;
    /* one LIST every 0.1 s from t = 0 to 19.9: 1 ms before t = 5 (the baseline), 20 ms
     * while expiry runs (5 .. 10), then 20 ms until 12.5 and 1 ms from 12.5 on */
    struct mgb_exp_sample s[200];
    for (int i = 0; i < 200; i++) {
        double t = i * 0.1;
        s[i].t_s = t;
        s[i].ms = (t < 5 - 1e-9) ? 1.0 : (t < 12.5 - 1e-9) ? 20.0 : 1.0;
    }
    /* expiry ends at t = 10: the first 1 s window whose median is <= 1.1 ms starts at
     * 12.0 (samples 12.0 .. 12.9: five of 20 ms, five of 1 ms; the median is the 5th
     * smallest, 1 ms) */
    double r = mgb_exp_recover_s(s, 200, 10.0, 1.1, 1.0);
    assert_true(fabs(r - 2.0) < 1e-6);
    /* already fast when the expiry ends: 0 */
    assert_true(fabs(mgb_exp_recover_s(s, 200, 15.0, 1.1, 1.0)) < 1e-6);
    /* never back below the target: -1 */
    assert_true(mgb_exp_recover_s(s, 200, 10.0, 0.5, 1.0) < 0);
    /* a window that is not wholly observed does not count: recovery only in the last
     * 0.5 s of the samples */
    for (int i = 0; i < 200; i++)
        s[i].ms = s[i].t_s >= 19.5 - 1e-9 ? 1.0 : 20.0;
    assert_true(mgb_exp_recover_s(s, 200, 10.0, 1.1, 1.0) < 0);
    assert_true(mgb_exp_recover_s(s, 0, 0.0, 1.1, 1.0) < 0);
}

static void test_expiry_metric(void **state)
{
    (void)state;
    const char *text = "# HELP metagate_lifecycle_expired_total objects expired\n"
                       "# TYPE metagate_lifecycle_expired_total counter\n"
                       "metagate_lifecycle_expired_total 1500000\n"
                       "metagate_rocksdb_tombstones{cf=\"data\"} 3\n"
                       "metagate_rocksdb_tombstones{cf=\"meta\"} 2000000\n"
                       "metagate_lifecycle_expired_total_x 9\n"
                       "metagate_rocksdb_lsm_bytes_written 123456789012";
    double v = -1;
    assert_int_equal(mgb_exp_metric(text, "metagate_lifecycle_expired_total", &v), 0);
    assert_true(v == 1500000);
    assert_int_equal(mgb_exp_metric(text, "metagate_rocksdb_tombstones{cf=\"meta\"}", &v), 0);
    assert_true(v == 2000000);
    assert_int_equal(mgb_exp_metric(text, "metagate_rocksdb_lsm_bytes_written", &v), 0);
    assert_true(v == 123456789012.0);
    assert_int_equal(mgb_exp_metric(text, "metagate_lifecycle_due_backlog", &v), -1);
    assert_int_equal(mgb_exp_metric("", "metagate_lifecycle_expired_total", &v), -1);
}

/* ------------------------------------------------------------ endpoints */

static void test_endpoint_list(void **state)
{
    (void)state;
    struct mgb_endpoint ep;
    char err[200];
    assert_int_equal(mgb_endpoint_parse(&ep, "http://127.0.0.1:9000", err, sizeof(err)), 0);
    assert_int_equal(ep.naddrs, 1);
    assert_string_equal(ep.host, "127.0.0.1:9000");
    /* A cluster: every node is resolved, the Host is the first node's. */
    assert_int_equal(mgb_endpoint_parse(&ep, "http://127.0.0.1:9000,http://127.0.0.2:9010/,"
                                             "http://[::1]:9020",
                                        err, sizeof(err)),
                     0);
    assert_int_equal(ep.naddrs, 3);
    assert_string_equal(ep.host, "127.0.0.1:9000");
    const struct sockaddr_in *a1 = (const struct sockaddr_in *)&ep.addrs[1];
    assert_int_equal(ntohs(a1->sin_port), 9010);
    assert_int_equal(ntohl(a1->sin_addr.s_addr), 0x7f000002);
    const struct sockaddr_in6 *a2 = (const struct sockaddr_in6 *)&ep.addrs[2];
    assert_int_equal(a2->sin6_family, AF_INET6);
    assert_int_equal(ntohs(a2->sin6_port), 9020);
    assert_int_equal(mgb_endpoint_parse(&ep, "http://127.0.0.1:9000,", err, sizeof(err)), -1);
    assert_int_equal(mgb_endpoint_parse(&ep, "http://127.0.0.1:9000,https://h:1", err,
                                        sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "https://h:1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_buckets),
        cmocka_unit_test(test_endpoint_list),
        cmocka_unit_test(test_hist_quantiles),
        cmocka_unit_test(test_hist_merge),
        cmocka_unit_test(test_http_content_length),
        cmocka_unit_test(test_http_chunked),
        cmocka_unit_test(test_http_no_body),
        cmocka_unit_test(test_http_until_close_and_errors),
        cmocka_unit_test(test_workload_builtin),
        cmocka_unit_test(test_workload_parse_errors),
        cmocka_unit_test(test_size_parse),
        cmocka_unit_test(test_pareto),
        cmocka_unit_test(test_pick_and_below),
        cmocka_unit_test(test_expiry_quantile),
        cmocka_unit_test(test_expiry_delete_body),
        cmocka_unit_test(test_expiry_recover),
        cmocka_unit_test(test_expiry_metric),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
