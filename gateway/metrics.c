/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /metrics: Prometheus text exposition (format 0.0.4). Each loop thread
 * owns one struct gw__metrics and is its only writer (relaxed atomic loads and
 * stores, no lock prefix on the hot path); a scrape sums the loops' shards, so
 * a scrape may see a request's count before its latency, never a torn value.
 * Store figures (RocksDB, blob segments) come from meta_stats_get.
 */
#include <inttypes.h>
#include <string.h>

#define MG_MODULE "gateway"
#include "gateway/core.h"

/* Upper bounds in microseconds; the last bucket is +Inf. */
static const uint64_t lat_le_us[GW_LAT_BUCKETS - 1] = {250,    500,     1000,    2500,    5000,
                                                       10000,  25000,   50000,   100000,  250000,
                                                       500000, 1000000, 2500000, 10000000};

static void bump(uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, __atomic_load_n(p, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

static uint64_t rd(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

void gw__metrics_record(struct gw__metrics *m, enum gw_op op, int status, uint64_t latency_us,
                        uint64_t bytes_in, uint64_t bytes_out)
{
    if ((unsigned)op >= GW_OP__COUNT)
        op = GW_OP_UNKNOWN;
    bump(&m->requests[op], 1);
    if (status >= 500)
        bump(&m->errors_5xx[op], 1);
    else if (status >= 400)
        bump(&m->errors_4xx[op], 1);
    int b = 0;
    while (b < GW_LAT_BUCKETS - 1 && latency_us > lat_le_us[b])
        b++;
    bump(&m->lat_bucket[op][b], 1);
    bump(&m->lat_sum_us[op], latency_us);
    if (bytes_in)
        bump(&m->bytes_in, bytes_in);
    if (bytes_out)
        bump(&m->bytes_out, bytes_out);
}

static void sum_loops(struct gw_server *srv, struct gw__metrics *t)
{
    memset(t, 0, sizeof(*t));
    for (int i = 0; i < srv->nloops; i++) {
        const struct gw__metrics *m = &srv->loops[i].metrics;
        for (int op = 0; op < GW_OP__COUNT; op++) {
            t->requests[op] += rd(&m->requests[op]);
            t->errors_4xx[op] += rd(&m->errors_4xx[op]);
            t->errors_5xx[op] += rd(&m->errors_5xx[op]);
            t->lat_sum_us[op] += rd(&m->lat_sum_us[op]);
            for (int b = 0; b < GW_LAT_BUCKETS; b++)
                t->lat_bucket[op][b] += rd(&m->lat_bucket[op][b]);
        }
        t->bytes_in += rd(&m->bytes_in);
        t->bytes_out += rd(&m->bytes_out);
    }
}

static void gauge(struct mg_buf *o, const char *name, const char *type, const char *help,
                  uint64_t v)
{
    mg_buf_appendf(o, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name,
                   v);
}

static void render_requests(struct mg_buf *o, const struct gw__metrics *t)
{
    mg_buf_appendf(o, "# HELP metagate_s3_requests_total S3 requests answered, by operation.\n"
                      "# TYPE metagate_s3_requests_total counter\n");
    for (int op = 0; op < GW_OP__COUNT; op++)
        mg_buf_appendf(o, "metagate_s3_requests_total{op=\"%s\"} %" PRIu64 "\n",
                       gw_op_label((enum gw_op)op), t->requests[op]);
    mg_buf_appendf(o, "# HELP metagate_s3_errors_total S3 error responses, by operation and "
                      "status class.\n# TYPE metagate_s3_errors_total counter\n");
    for (int op = 0; op < GW_OP__COUNT; op++) {
        if (t->requests[op] == 0)
            continue;
        const char *label = gw_op_label((enum gw_op)op);
        mg_buf_appendf(o, "metagate_s3_errors_total{op=\"%s\",class=\"4xx\"} %" PRIu64 "\n", label,
                       t->errors_4xx[op]);
        mg_buf_appendf(o, "metagate_s3_errors_total{op=\"%s\",class=\"5xx\"} %" PRIu64 "\n", label,
                       t->errors_5xx[op]);
    }
}

static void render_latency(struct mg_buf *o, const struct gw__metrics *t)
{
    mg_buf_appendf(o, "# HELP metagate_s3_request_duration_seconds Time from request to "
                      "response start (streamed bodies: to the last byte), by operation.\n"
                      "# TYPE metagate_s3_request_duration_seconds histogram\n");
    for (int op = 0; op < GW_OP__COUNT; op++) {
        if (t->requests[op] == 0)
            continue;
        const char *label = gw_op_label((enum gw_op)op);
        uint64_t cum = 0;
        for (int b = 0; b < GW_LAT_BUCKETS; b++) {
            cum += t->lat_bucket[op][b];
            if (b < GW_LAT_BUCKETS - 1)
                mg_buf_appendf(o,
                               "metagate_s3_request_duration_seconds_bucket{op=\"%s\",le=\"%g\"} "
                               "%" PRIu64 "\n",
                               label, (double)lat_le_us[b] / 1e6, cum);
            else
                mg_buf_appendf(o,
                               "metagate_s3_request_duration_seconds_bucket{op=\"%s\","
                               "le=\"+Inf\"} %" PRIu64 "\n",
                               label, cum);
        }
        mg_buf_appendf(o, "metagate_s3_request_duration_seconds_sum{op=\"%s\"} %.6f\n", label,
                       (double)t->lat_sum_us[op] / 1e6);
        mg_buf_appendf(o, "metagate_s3_request_duration_seconds_count{op=\"%s\"} %" PRIu64 "\n",
                       label, cum);
    }
}

void gw__metrics_render(struct gw_server *srv, struct mg_buf *o)
{
    struct gw__metrics *t = mg_malloc(sizeof(*t));
    sum_loops(srv, t);
    render_requests(o, t);
    render_latency(o, t);
    gauge(o, "metagate_http_received_bytes_total", "counter",
          "Decoded request payload bytes consumed by S3 operations.", t->bytes_in);
    gauge(o, "metagate_http_sent_bytes_total", "counter", "Response body bytes sent.",
          t->bytes_out);
    mg_free(t);
    struct meta_stats st;
    memset(&st, 0, sizeof(st));
    meta_stats_get(srv->ms, &st);
    gauge(o, "metagate_buckets", "gauge", "Buckets.", st.buckets);
    gauge(o, "metagate_rocksdb_estimate_keys", "gauge", "RocksDB estimate-num-keys.",
          st.rocksdb_estimate_keys);
    gauge(o, "metagate_rocksdb_sst_bytes", "gauge", "RocksDB total SST file size.",
          st.rocksdb_sst_bytes);
    gauge(o, "metagate_rocksdb_memtable_bytes", "gauge", "RocksDB memtable size.",
          st.rocksdb_memtable_bytes);
    gauge(o, "metagate_blob_segments", "gauge", "Blob store segment files.", st.blobs.segments);
    gauge(o, "metagate_blob_written_bytes_total", "counter", "Blob bytes written since start.",
          st.blobs.bytes_written);
    gauge(o, "metagate_blob_freed_bytes_total", "counter", "Blob bytes freed since start.",
          st.blobs.bytes_freed);
    gauge(o, "metagate_blob_fsyncs_total", "counter", "Blob store fsyncs since start.",
          st.blobs.fsyncs);
    gauge(o, "metagate_blob_disk_bytes", "gauge", "Blob store bytes allocated on disk.",
          st.blobs.disk_bytes);
    gauge(o, "metagate_loops", "gauge", "Event loops (threads) serving HTTP.",
          (uint64_t)srv->nloops);
    uint64_t conns = 0, refused = 0;
    for (int i = 0; i < srv->nloops; i++) {
        int n = __atomic_load_n(&srv->loops[i].nconns, __ATOMIC_RELAXED);
        conns += n > 0 ? (uint64_t)n : 0;
        refused += __atomic_load_n(&srv->loops[i].nconns_refused, __ATOMIC_RELAXED);
    }
    gauge(o, "metagate_http_connections", "gauge", "Open client connections.", conns);
    gauge(o, "metagate_http_connections_refused_total", "counter",
          "Connections closed at accept because their loop was at its bound.", refused);
    int64_t up_ms = gw__now_ms() - srv->started_ms;
    gauge(o, "metagate_uptime_seconds", "gauge", "Seconds since the server started.",
          (uint64_t)(up_ms > 0 ? up_ms / 1000 : 0));
}
