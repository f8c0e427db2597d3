/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway in-process: a real gw_server (h2o loops, metadata store in a
 * temporary directory) on a free 127.0.0.1 port, driven over loopback TCP
 * with SigV4-signed requests (common/sig's signer). Covers what only a live
 * server shows: /health and /metrics, request ids on every response, S3 XML
 * error bodies, HEAD without a body, 204 without Content-Length, a GET
 * streamed in several slices, body verification errors, and a graceful stop.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"
#include "gateway/core.h"

#define AK "AKIDTESTSERVER"
#define SK "test-secret-key-0123456789"
#define AK2 "AKIDTESTOTHER"
#define SK2 "other-secret-key-0123456789"

static const char *sign_ak = AK, *sign_sk = SK; /* who http() signs as */

static char dir[64];
static struct mg_config cfg;
static struct gw_server *srv;
static pthread_t runner;

struct resp {
    int status;
    char head[8192]; /* status line and headers, NUL-terminated */
    char *body;      /* malloc'd, NUL-terminated */
    size_t body_len;
};

static void resp_close(struct resp *r)
{
    free(r->body);
    r->body = NULL;
}

/* Header value (case-insensitive name) into out; 1 if present. */
static int resp_header(const struct resp *r, const char *name, char *out, size_t cap)
{
    char pat[128];
    snprintf(pat, sizeof(pat), "\r\n%s:", name);
    const char *p = strcasestr(r->head, pat);
    if (p == NULL)
        return 0;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    const char *e = strstr(p, "\r\n");
    size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

static void amz_now(char out[17])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* One request on a fresh connection (Connection: close); signed unless sign == 0. */
static void http(const char *method, const char *target, const char *extra, const void *body,
                 size_t blen, int sign, struct resp *out)
{
    char host[32], date[17], sha[65];
    snprintf(host, sizeof(host), "127.0.0.1:%u", gw_server_port(srv));
    amz_now(date);
    uint8_t d[32];
    mg_sha256(body, blen, d);
    mg_hex_encode(d, 32, sha);
    struct mg_buf req;
    mg_buf_init(&req);
    mg_buf_appendf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target,
                   host);
    if (sign) {
        const char *q = strchr(target, '?');
        struct mg_http_hdr h[8] = {
            {{"host", 4}, {host, strlen(host)}},
            {{"x-amz-content-sha256", 20}, {sha, 64}},
            {{"x-amz-date", 10}, {date, 16}},
        };
        size_t nh = 3;
        /* x-amz-* lines of extra ("name: value\r\n", lower-case names that sort after
         * x-amz-date are not used) are signed too: the server refuses unsigned ones. */
        char sh[256] = "host";
        for (const char *l = extra; l != NULL && strncmp(l, "x-amz-", 6) == 0 && nh < 8;) {
            const char *colon = strchr(l, ':'), *eol = strstr(l, "\r\n");
            h[nh].name = (struct mg_str){l, (size_t)(colon - l)};
            h[nh].value = (struct mg_str){colon + 2, (size_t)(eol - colon - 2)};
            snprintf(sh + strlen(sh), sizeof(sh) - strlen(sh), ";%.*s", (int)h[nh].name.len,
                     h[nh].name.base);
            nh++;
            l = eol + 2;
        }
        snprintf(sh + strlen(sh), sizeof(sh) - strlen(sh), ";x-amz-content-sha256;x-amz-date");
        struct mg_sig_req sr = {
            .method = {method, strlen(method)},
            .path = {target, q != NULL ? (size_t)(q - target) : strlen(target)},
            .query = {q != NULL ? q + 1 : "", q != NULL ? strlen(q + 1) : 0},
            .headers = h,
            .nheaders = nh,
        };
        struct mg_buf auth;
        mg_buf_init(&auth);
        mg_sigv4_sign_header(&sr, (struct mg_str){sign_ak, strlen(sign_ak)},
                             (struct mg_str){sign_sk, strlen(sign_sk)},
                             (struct mg_str){"us-east-1", 9},
                             (struct mg_str){date, 16}, (struct mg_str){sh, strlen(sh)},
                             (struct mg_str){sha, 64}, &auth);
        mg_buf_appendf(&req,
                       "x-amz-date: %s\r\nx-amz-content-sha256: %s\r\nAuthorization: %.*s\r\n",
                       date, sha, (int)auth.len, auth.base);
        mg_buf_close(&auth);
    }
    if (extra != NULL)
        mg_buf_appendf(&req, "%s", extra);
    if (body != NULL)
        mg_buf_appendf(&req, "Content-Length: %zu\r\n", blen);
    mg_buf_append(&req, "\r\n", 2);
    if (body != NULL)
        mg_buf_append(&req, body, blen);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(gw_server_port(srv))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    for (size_t off = 0; off < req.len;) {
        ssize_t w = write(fd, req.base + off, req.len - off);
        assert_true(w > 0);
        off += (size_t)w;
    }
    mg_buf_close(&req);
    struct mg_buf in;
    mg_buf_init(&in);
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        mg_buf_append(&in, buf, (size_t)n);
    close(fd);
    mg_buf_append(&in, "", 1);
    const char *hend = strstr(in.base, "\r\n\r\n");
    assert_non_null(hend);
    size_t hl = (size_t)(hend - in.base) + 2;
    assert_true(hl < sizeof(out->head));
    memcpy(out->head, in.base, hl);
    out->head[hl] = '\0';
    out->status = atoi(in.base + 9);
    out->body_len = in.len - 1 - hl - 2;
    out->body = malloc(out->body_len + 1);
    memcpy(out->body, hend + 4, out->body_len);
    out->body[out->body_len] = '\0';
    mg_buf_close(&in);
}

static void *run_server(void *arg)
{
    gw_server_run(arg);
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mg_test_server_XXXXXX");
    if (mkdtemp(dir) == NULL)
        return -1;
    char errmsg[MG_CONFIG_ERRMSG_LEN], data[128];
    snprintf(data, sizeof(data), "%s/data", dir);
    mg_config_init(&cfg);
    static const char json[] = "{\"listen\": \"127.0.0.1:0\", \"threads\": 2, \"log_level\": "
                               "\"error\", \"users\": [{\"name\": \"main\", \"access_key\": \"" AK
                               "\", \"secret_key\": \"" SK "\"}, {\"name\": \"other\", "
                               "\"access_key\": \"" AK2 "\", \"secret_key\": \"" SK2 "\"}]}";
    mg_config_set_data_dir(&cfg, data);
    if (mg_config_parse(&cfg, json, sizeof(json) - 1, errmsg) != 0 ||
        mg_config_finish(&cfg, errmsg) != 0 || mg_log_set_level(cfg.log_level) != 0 ||
        gw_server_create(&cfg, &srv, errmsg) != 0) {
        fprintf(stderr, "setup: %s\n", errmsg);
        return -1;
    }
    pthread_create(&runner, NULL, run_server, srv);
    for (int i = 0; i < 200 && !atomic_load(&srv->serving); i++)
        usleep(10000);
    return atomic_load(&srv->serving) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    gw_server_stop(srv);
    pthread_join(runner, NULL);
    gw_server_destroy(srv);
    mg_config_close(&cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void assert_ids(const struct resp *r)
{
    char id[64], id2[64], server[64];
    assert_true(resp_header(r, "x-amz-request-id", id, sizeof(id)));
    assert_int_equal(strlen(id), 16);
    assert_true(resp_header(r, "x-amz-id-2", id2, sizeof(id2)));
    assert_true(resp_header(r, "server", server, sizeof(server)));
    assert_string_equal(server, "metagate");
}

static void assert_error(const struct resp *r, int status, const char *code)
{
    char want[128], id[64], rid[128];
    if (r->status != status)
        fail_msg("status %d, want %d: %s", r->status, status, r->body);
    snprintf(want, sizeof(want), "<Code>%s</Code>", code);
    assert_non_null(strstr(r->body, want));
    assert_true(resp_header(r, "x-amz-request-id", id, sizeof(id)));
    snprintf(rid, sizeof(rid), "<RequestId>%s</RequestId>", id);
    assert_non_null(strstr(r->body, rid));
    assert_non_null(strstr(r->body, "<Resource>"));
    assert_ids(r);
}

static void test_health_metrics(void **state)
{
    (void)state;
    struct resp r;
    http("GET", "/health", NULL, NULL, 0, 0, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    assert_ids(&r);
    resp_close(&r);
    http("GET", "/metrics", NULL, NULL, 0, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "metagate_s3_requests_total{op=\"GetObject\"}"));
    assert_non_null(strstr(r.body, "metagate_blob_segments"));
    resp_close(&r);
}

static void test_errors(void **state)
{
    (void)state;
    struct resp r;
    http("GET", "/", NULL, NULL, 0, 0, &r); /* anonymous ListBuckets */
    assert_error(&r, 403, "AccessDenied");
    resp_close(&r);
    http("PATCH", "/bucket/key", NULL, NULL, 0, 1, &r);
    assert_error(&r, 405, "MethodNotAllowed");
    resp_close(&r);
    http("GET", "/some-bucket?website", NULL, NULL, 0, 1, &r);
    assert_error(&r, 501, "NotImplemented");
    resp_close(&r);
    http("GET", "/no-such-bucket-here/k", NULL, NULL, 0, 1, &r);
    assert_error(&r, 404, "NoSuchBucket");
    resp_close(&r);
    /* A decoded control byte in the bucket name is a character reference in the error body,
     * never a raw byte (a raw NUL or ESC makes the whole document ill-formed XML). */
    http("GET", "/no%01such%00/k", NULL, NULL, 0, 1, &r);
    assert_error(&r, 404, "NoSuchBucket");
    assert_non_null(strstr(r.body, "<BucketName>no&#x1;such&#x0;</BucketName>"));
    assert_int_equal(strlen(r.body), r.body_len);
    resp_close(&r);
    http("GET", "/",
         "Authorization: AWS4-HMAC-SHA256 Credential=NOPE/20261130/us-east-1/s3/"
         "aws4_request, SignedHeaders=host, Signature=00\r\n",
         NULL, 0, 0, &r);
    assert_true(r.status == 400 || r.status == 403);
    resp_close(&r);
}

static void test_object_round_trip(void **state)
{
    (void)state;
    struct resp r;
    http("PUT", "/srv-bucket", NULL, "", 0, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);

    /* 3.5 MiB: streamed back in four slices. */
    size_t n = (7u << 20) / 2;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + (i * 7 + i / 4096) % 26);
    http("PUT", "/srv-bucket/dir/big%20one", NULL, data, n, 1, &r);
    assert_int_equal(r.status, 200);
    char etag[64];
    assert_true(resp_header(&r, "etag", etag, sizeof(etag)));
    resp_close(&r);

    http("GET", "/srv-bucket/dir/big%20one", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, n);
    assert_memory_equal(r.body, data, n);
    assert_ids(&r);
    resp_close(&r);

    char cl[32];
    http("HEAD", "/srv-bucket/dir/big%20one", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 200);
    assert_true(resp_header(&r, "content-length", cl, sizeof(cl)));
    assert_int_equal(strtoull(cl, NULL, 10), n);
    assert_int_equal(r.body_len, 0);
    resp_close(&r);

    http("HEAD", "/srv-bucket/missing", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.body_len, 0);
    assert_ids(&r);
    resp_close(&r);

    http("GET", "/srv-bucket/missing", NULL, NULL, 0, 1, &r);
    assert_error(&r, 404, "NoSuchKey");
    resp_close(&r);

    /* Object data needs a length (or chunked framing). */
    http("PUT", "/srv-bucket/nolength", NULL, NULL, 0, 1, &r);
    assert_error(&r, 411, "MissingContentLength");
    resp_close(&r);

    /* A wrong Content-MD5 stores nothing. */
    http("PUT", "/srv-bucket/bad", "Content-MD5: XUFAKrxLKna5cZ2REBfFkg==\r\n", "hellO", 5, 1, &r);
    assert_error(&r, 400, "BadDigest");
    resp_close(&r);
    http("HEAD", "/srv-bucket/bad", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 404);
    resp_close(&r);

    http("DELETE", "/srv-bucket/dir/big%20one", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 204);
    assert_false(resp_header(&r, "content-length", cl, sizeof(cl)));
    resp_close(&r);
    http("DELETE", "/srv-bucket", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 204);
    resp_close(&r);
    free(data);

    http("GET", "/metrics", NULL, NULL, 0, 0, &r);
    assert_non_null(strstr(r.body, "metagate_s3_request_duration_seconds_count{op=\"PutObject\"}"));
    assert_null(strstr(r.body, "metagate_s3_requests_total{op=\"PutObject\"} 0\n"));
    resp_close(&r);
}

/* Issue 7: every loop's lag probe feeds /metrics (a histogram per loop, a p99 and a max), the
 * 503-from-full-queue counter is exported, and so are the meta queue and per-group raft figures. */
static void test_loop_lag_metrics(void **state)
{
    (void)state;
    struct resp r;
    usleep(200 * 1000); /* ~10 probe periods */
    http("GET", "/metrics", NULL, NULL, 0, 0, &r);
    assert_int_equal(r.status, 200);
    for (int loop = 0; loop < 2; loop++) {
        char want[128];
        snprintf(want, sizeof(want), "metagate_loop_lag_seconds_count{loop=\"%d\"} ", loop);
        const char *p = strstr(r.body, want);
        if (p == NULL)
            fail_msg("no %s in /metrics", want);
        assert_true(strtoull(p + strlen(want), NULL, 10) > 0);
        snprintf(want, sizeof(want), "metagate_loop_lag_seconds_bucket{loop=\"%d\",le=\"0.005\"}",
                 loop);
        assert_non_null(strstr(r.body, want));
        snprintf(want, sizeof(want), "metagate_loop_lag_p99_seconds{loop=\"%d\"}", loop);
        assert_non_null(strstr(r.body, want));
        snprintf(want, sizeof(want), "metagate_loop_lag_self_seconds_count{loop=\"%d\"} ", loop);
        p = strstr(r.body, want);
        if (p == NULL)
            fail_msg("no %s in /metrics", want);
        assert_true(strtoull(p + strlen(want), NULL, 10) > 0);
    }
    assert_non_null(strstr(r.body, "\nmetagate_slowdown_total 0\n"));
    /* Per-group raft figures (meta_op_stats_get, sampled every 500 ms). */
    assert_non_null(strstr(r.body, "metagate_raft_leader{shard=\"0\"} "));
    assert_non_null(strstr(r.body, "metagate_raft_commit_latency_seconds_count{shard=\"0\"}"));
    assert_non_null(strstr(r.body, "metagate_raft_durable_index{shard=\"1\"}"));
    assert_non_null(strstr(r.body, "\nmetagate_meta_queue_depth "));
    resp_close(&r);
}

/* A client that sends a large PUT (its body goes to a worker, then an op to the meta thread)
 * and hangs up before the answer: the steps finish without their request, and the server goes
 * on serving (under ASan: without touching the disposed request). */
static void test_disconnect_mid_put(void **state)
{
    (void)state;
    struct resp r;
    http("PUT", "/srv-gone", "x-amz-acl: public-read-write\r\n", "", 0, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    size_t n = 2u << 20;
    char *body = calloc(1, n);
    for (int i = 0; i < 8; i++) {
        char head[256];
        int hl = snprintf(head, sizeof(head),
                          "PUT /srv-gone/k%d HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Length: %zu\r\n\r\n", i, n);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(gw_server_port(srv))};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(write(fd, head, (size_t)hl), hl);
        for (size_t off = 0; off < n;) {
            ssize_t w = write(fd, body + off, n - off);
            assert_true(w > 0);
            off += (size_t)w;
        }
        close(fd); /* nobody reads the answer */
    }
    free(body);
    usleep(100 * 1000);
    http("GET", "/health", NULL, NULL, 0, 0, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    /* The PUTs were stored (or not) whole: any key present reads back in full. A PUT whose
     * client left may still be on its way (worker, then op): retry until the bucket empties
     * (bounded: 10 s). */
    int status = 0;
    for (int round = 0; round < 100 && status != 204; round++) {
        for (int i = 0; i < 8; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/srv-gone/k%d", i);
            http("GET", path, NULL, NULL, 0, 1, &r);
            assert_true(r.status == 200 || r.status == 404);
            if (r.status == 200)
                assert_int_equal(r.body_len, n);
            resp_close(&r);
            http("DELETE", path, NULL, NULL, 0, 1, &r);
            assert_int_equal(r.status, 204);
            resp_close(&r);
        }
        http("DELETE", "/srv-gone", NULL, NULL, 0, 1, &r);
        status = r.status;
        assert_true(status == 204 || status == 409); /* 409: a late PUT landed */
        resp_close(&r);
        if (status != 204)
            usleep(100 * 1000);
    }
    assert_int_equal(status, 204);
}

/* UploadPart declaring a checksum algorithm other than the upload's is refused (S3: "Checksum
 * Type mismatch"), and nothing is stored: before, a SHA-256 was kept and listed as the part's
 * ChecksumCRC32, poisoning the composite checksum of the completed object. */
static void test_part_checksum_mismatch(void **state)
{
    (void)state;
    struct resp r;
    char uid[128], target[256];
    http("PUT", "/ck-bucket", NULL, "", 0, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    http("POST", "/ck-bucket/o?uploads", "x-amz-checksum-algorithm: CRC32\r\n", "", 0, 1, &r);
    assert_int_equal(r.status, 200);
    const char *id = strstr(r.body, "<UploadId>");
    assert_non_null(id);
    id += strlen("<UploadId>");
    snprintf(uid, sizeof(uid), "%.*s", (int)(strstr(id, "</UploadId>") - id), id);
    resp_close(&r);
    /* SHA-256 of "hello" in base64. */
    snprintf(target, sizeof(target), "/ck-bucket/o?partNumber=1&uploadId=%s", uid);
    http("PUT", target, "x-amz-checksum-sha256: LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=\r\n",
         "hello", 5, 1, &r);
    assert_error(&r, 400, "InvalidRequest");
    resp_close(&r);
    snprintf(target, sizeof(target), "/ck-bucket/o?uploadId=%s", uid);
    http("GET", target, NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "<Part>"));
    resp_close(&r);
    /* The upload's own algorithm (CRC32 of "hello") is accepted. */
    snprintf(target, sizeof(target), "/ck-bucket/o?partNumber=1&uploadId=%s", uid);
    http("PUT", target, "x-amz-checksum-crc32: NhCmhg==\r\n", "hello", 5, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
}

/* A second server on a data directory in use fails cleanly: the store's lock refuses it and
 * the h2o configuration built before is disposed (LeakSanitizer flagged it in Asan builds). */
static void test_create_fails_on_locked_dir(void **state)
{
    (void)state;
    struct gw_server *second = NULL;
    char errmsg[MG_CONFIG_ERRMSG_LEN] = "";
    assert_int_not_equal(gw_server_create(&cfg, &second, errmsg), 0);
    assert_null(second);
    assert_true(errmsg[0] != '\0');
}

/* A second server with another data dir on the same port must refuse to start: with
 * SO_REUSEPORT the kernel would otherwise split connections between the two processes
 * (seen: half of the HeadBucket calls of one client got 404 from the other store). */
static void test_create_fails_on_port_in_use(void **state)
{
    (void)state;
    char data[160], errmsg[MG_CONFIG_ERRMSG_LEN] = "";
    snprintf(data, sizeof(data), "%s/data2", dir);
    struct mg_config c2;
    mg_config_init(&c2);
    char json[256];
    int n = snprintf(json, sizeof(json),
                     "{\"listen\": \"127.0.0.1:%u\", \"users\": [{\"name\": \"main\", "
                     "\"access_key\": \"" AK "\", \"secret_key\": \"" SK "\"}]}",
                     (unsigned)gw_server_port(srv));
    mg_config_set_data_dir(&c2, data);
    assert_int_equal(mg_config_parse(&c2, json, (size_t)n, errmsg), 0);
    assert_int_equal(mg_config_finish(&c2, errmsg), 0);
    struct gw_server *second = NULL;
    assert_int_not_equal(gw_server_create(&c2, &second, errmsg), 0);
    assert_null(second);
    assert_non_null(strstr(errmsg, "another process listens there"));
    mg_config_close(&c2);
}

/* Object tagging is the bucket owner's and the object owner's: another user may read a
 * public-read object and write into a public-read-write bucket, but neither grant covers
 * Get/Put/DeleteObjectTagging (before, both were let through). */
static void test_tagging_owner_only(void **state)
{
    (void)state;
    struct resp r;
    http("PUT", "/tag-bucket", "x-amz-acl: public-read-write\r\n", "", 0, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    http("PUT", "/tag-bucket/o", "x-amz-acl: public-read\r\nx-amz-tagging: secret=1\r\n", "x",
         1, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    static const char tags[] = "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag>"
                               "</TagSet></Tagging>";
    sign_ak = AK2, sign_sk = SK2;
    http("GET", "/tag-bucket/o", NULL, NULL, 0, 1, &r); /* READ: granted */
    assert_int_equal(r.status, 200);
    resp_close(&r);
    http("GET", "/tag-bucket/o?tagging", NULL, NULL, 0, 1, &r);
    assert_error(&r, 403, "AccessDenied");
    resp_close(&r);
    http("PUT", "/tag-bucket/o?tagging", NULL, tags, sizeof(tags) - 1, 1, &r);
    assert_error(&r, 403, "AccessDenied");
    resp_close(&r);
    http("DELETE", "/tag-bucket/o?tagging", NULL, NULL, 0, 1, &r);
    assert_error(&r, 403, "AccessDenied");
    resp_close(&r);
    http("GET", "/tag-bucket/o?tagging", NULL, NULL, 0, 0, &r); /* anonymous */
    assert_error(&r, 403, "AccessDenied");
    resp_close(&r);
    /* Their own object in the same bucket is theirs to tag. */
    http("PUT", "/tag-bucket/mine", NULL, "y", 1, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    http("PUT", "/tag-bucket/mine?tagging", NULL, tags, sizeof(tags) - 1, 1, &r);
    assert_int_equal(r.status, 200);
    resp_close(&r);
    sign_ak = AK, sign_sk = SK;
    http("GET", "/tag-bucket/o?tagging", NULL, NULL, 0, 1, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "<Key>secret</Key>"));
    resp_close(&r);
    http("PUT", "/tag-bucket/mine?tagging", NULL, tags, sizeof(tags) - 1, 1, &r);
    assert_int_equal(r.status, 200); /* the bucket owner too */
    resp_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_metrics),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_object_round_trip),
        cmocka_unit_test(test_part_checksum_mismatch),
        cmocka_unit_test(test_loop_lag_metrics),
        cmocka_unit_test(test_disconnect_mid_put),
        cmocka_unit_test(test_create_fails_on_locked_dir),
        cmocka_unit_test(test_create_fails_on_port_in_use),
        cmocka_unit_test(test_tagging_owner_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
