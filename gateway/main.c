/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metagate binary (DESIGN.md 13): `metagate serve --config FILE
 * [--listen HOST:PORT] [--data DIR]` runs every role in one process. It loads
 * and checks the configuration (common/config.h), prints the endpoint and
 * credentials, and runs the gateway until SIGINT or SIGTERM asks for a
 * graceful stop. `metagate admin lifecycle status --endpoint URL` reads a
 * running server's /metrics and prints its lifecycle figures (issue 8).
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define MG_MODULE "main"
#include "common/common.h"
#include "common/config.h"
#include "gateway/gateway.h"
#include "meta/fsck.h"

/* SIGINT and SIGTERM are blocked in every thread (the mask is inherited by the loop and
 * RocksDB threads) and taken by one thread with sigwait, which asks for a graceful stop:
 * no async-signal-safety questions, no signal lost to a thread that cannot act on it. */
static sigset_t stop_signals;

static void *signal_main(void *arg)
{
    struct gw_server *srv = arg;
    int sig = 0;
    if (sigwait(&stop_signals, &sig) == 0) {
        mg_log(MG_LOG_INFO, "event=signal sig=%d action=stop", sig);
        gw_server_stop(srv);
    }
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: metagate serve [--config FILE] [--listen HOST:PORT] [--data DIR]\n"
               "       metagate admin lifecycle status --endpoint http://HOST:PORT\n"
               "       metagate admin fsck --data DIR [--repair] [--rados-conf PATH --rados-pool "
               "NAME\n"
               "                           [--rados-user NAME] [--rados-namespace NAME]]\n"
               "       metagate admin shards|nodes --endpoint http://HOST:PORT\n"
               "       metagate --help\n"
               "\n"
               "serve      run the S3 gateway and the embedded metadata and blob store\n"
               "--config   JSON configuration: listen, data_dir, region, users, tls, domain,\n"
               "           threads, inline_max_bytes, log_level, meta, lifecycle, engine,\n"
               "           scrub, data, cluster (README: Configuration)\n"
               "--listen   override \"listen\" (e.g. 127.0.0.1:9000)\n"
               "--data     override \"data_dir\"\n"
               "admin lifecycle status  print a running server's lifecycle figures (/metrics)\n"
               "admin shards|nodes      print a cluster's shard map or node table (/metrics)\n"
               "admin fsck              check a stopped data directory (with data.backend rados:\n"
               "                        the store's data.rados as --rados-* flags)\n");
}

static void print_banner(const struct mg_config *cfg, const struct gw_server *srv)
{
    const char *scheme = cfg->tls_cert_file != NULL ? "https" : "http";
    int v6 = strchr(cfg->listen_host, ':') != NULL;
    printf("metagate: serving S3 at %s://%s%s%s:%u (region %s, data %s)\n", scheme, v6 ? "[" : "",
           cfg->listen_host, v6 ? "]" : "", gw_server_port(srv), cfg->region, cfg->data_dir);
    if (cfg->users_generated) {
        printf("metagate: generated credentials (stored in %s/credentials.json):\n"
               "  AWS_ACCESS_KEY_ID=%s\n  AWS_SECRET_ACCESS_KEY=%s\n",
               cfg->data_dir, cfg->users[0].access_key, cfg->users[0].secret_key);
    } else {
        printf("metagate: %zu user(s) from the configuration\n", cfg->nusers);
    }
    printf("metagate: try: aws --endpoint-url %s://%s%s%s:%u s3 ls\n", scheme, v6 ? "[" : "",
           cfg->listen_host, v6 ? "]" : "", gw_server_port(srv));
    fflush(stdout);
}

/* Process start-up (issue 9, "Hostile and careless clients"). umask 077: every file and
 * directory this process creates — RocksDB, raft segments, blob segments, credentials.json —
 * is 0600 / 0700 whatever the caller's umask; object data is nobody else's to read.
 * RLIMIT_NOFILE: the soft limit (often 1024) is raised to the hard one, so the connection
 * limit is the administrator's, not the login shell's. */
struct startup {
    rlim_t nofile_soft_before; /* soft limit as inherited */
    rlim_t nofile_soft;        /* soft limit now */
    rlim_t nofile_hard;        /* hard limit */
    int nofile_errno;          /* errno of a failed getrlimit/setrlimit, else 0 */
};

static void startup_limits(struct startup *st)
{
    umask(077);
    struct rlimit rl;
    memset(st, 0, sizeof(*st));
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        st->nofile_errno = errno;
        return;
    }
    st->nofile_soft_before = st->nofile_soft = rl.rlim_cur;
    st->nofile_hard = rl.rlim_max;
    if (rl.rlim_cur == rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        st->nofile_errno = errno;
    else
        st->nofile_soft = rl.rlim_cur;
}

static void startup_log(const struct startup *st)
{
    mg_log(MG_LOG_INFO, "event=fd_limit soft_before=%llu soft=%llu hard=%llu errno=%d",
           (unsigned long long)st->nofile_soft_before, (unsigned long long)st->nofile_soft,
           (unsigned long long)st->nofile_hard, st->nofile_errno);
}

static int serve(int argc, char **argv)
{
    struct startup st;
    startup_limits(&st);
    const char *config = NULL, *listen = NULL, *data = NULL;
    for (int i = 0; i < argc; i++) {
        const char **slot = strcmp(argv[i], "--config") == 0   ? &config
                            : strcmp(argv[i], "--listen") == 0 ? &listen
                            : strcmp(argv[i], "--data") == 0   ? &data
                                                               : NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (slot == NULL || i + 1 >= argc) {
            fprintf(stderr, "metagate: unknown or incomplete option \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
        *slot = argv[++i];
    }
    struct mg_config cfg;
    char errmsg[MG_CONFIG_ERRMSG_LEN] = "";
    mg_config_init(&cfg);
    int rv = 0;
    if (config != NULL)
        rv = mg_config_load(&cfg, config, errmsg);
    if (rv == 0 && listen != NULL)
        rv = mg_config_set_listen(&cfg, listen, errmsg);
    if (rv == 0 && data != NULL)
        mg_config_set_data_dir(&cfg, data);
    if (rv == 0)
        rv = mg_config_finish(&cfg, errmsg);
    if (rv == 0 && mg_log_set_level(cfg.log_level) != 0)
        rv = MG_ECONFIG;
    if (rv == 0)
        startup_log(&st);
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    struct gw_server *srv = NULL;
    if (rv == 0)
        rv = gw_server_create(&cfg, &srv, errmsg);
    if (rv != 0) {
        fprintf(stderr, "metagate: %s\n", errmsg[0] ? errmsg : mg_err_message(rv));
        mg_config_close(&cfg);
        return 1;
    }
    print_banner(&cfg, srv);
    pthread_t sig_thread;
    pthread_create(&sig_thread, NULL, signal_main, srv);
    gw_server_run(srv);
    /* Stopped by a signal (the thread has returned) or not: wake it with SIGTERM. */
    pthread_kill(sig_thread, SIGTERM);
    pthread_join(sig_thread, NULL);
    gw_server_destroy(srv);
    mg_config_close(&cfg);
    return 0;
}

/* ---- admin: plain-HTTP GET of /metrics (no TLS: point it at the plain listener). */

#define ADMIN_TIMEOUT_S 10
#define ADMIN_RESPONSE_MAX (16u << 20)

/* "http://host:port[/...]" into host and port. Returns 0 or -1. */
static int endpoint_parse(const char *url, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *p = strncmp(url, "http://", 7) == 0 ? url + 7 : NULL;
    if (p == NULL)
        return -1;
    const char *end = p + strcspn(p, "/");
    const char *colon = NULL;
    if (*p == '[') { /* [v6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (rb == NULL)
            return -1;
        snprintf(host, hostlen, "%.*s", (int)(rb - p - 1), p + 1);
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        snprintf(host, hostlen, "%.*s", (int)((colon != NULL ? colon : end) - p), p);
    }
    if (colon != NULL)
        snprintf(port, portlen, "%.*s", (int)(end - colon - 1), colon + 1);
    else
        snprintf(port, portlen, "80");
    return host[0] != '\0' && port[0] != '\0' ? 0 : -1;
}

/* The body of GET /metrics into out (NUL-terminated). Returns 0 or -1 (message on stderr). */
static int fetch_metrics(const char *url, struct mg_buf *out)
{
    char host[256], port[16];
    if (endpoint_parse(url, host, sizeof(host), port, sizeof(port)) != 0) {
        fprintf(stderr, "metagate: --endpoint must be http://HOST:PORT, got %s\n", url);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int e = getaddrinfo(host, port, &hints, &res);
    if (e != 0) {
        fprintf(stderr, "metagate: %s: %s\n", host, gai_strerror(e));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = ADMIN_TIMEOUT_S};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        fprintf(stderr, "metagate: cannot connect to %s:%s\n", host, port);
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    char req[400];
    int n = snprintf(req, sizeof(req), "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", host);
    int rv = write(fd, req, (size_t)n) == n ? 0 : -1;
    char buf[16384];
    ssize_t got;
    while (rv == 0 && (got = read(fd, buf, sizeof(buf))) > 0 && out->len < ADMIN_RESPONSE_MAX)
        mg_buf_append(out, buf, (size_t)got);
    close(fd);
    mg_buf_append(out, "", 1);
    out->len--;
    char *body = strstr(out->base, "\r\n\r\n");
    if (rv != 0 || strncmp(out->base, "HTTP/1.", 7) != 0 || strncmp(out->base + 8, " 200", 4) != 0 ||
        body == NULL) {
        fprintf(stderr, "metagate: GET %s/metrics failed\n", url);
        return -1;
    }
    body += 4;
    size_t blen = out->len - (size_t)(body - out->base);
    memmove(out->base, body, blen + 1);
    out->len = blen;
    return 0;
}

/* The value of the sample line "name value" (name may carry labels); NULL when absent. */
static const char *metric_find(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return p + n + 1;
    return NULL;
}

/* The --endpoint URL of an admin command (its only option); NULL (message printed) if absent
 * or with anything else. */
static const char *admin_endpoint(const char *what, int argc, char **argv)
{
    const char *endpoint = NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--endpoint") == 0 && i + 1 < argc) {
            endpoint = argv[++i];
        } else {
            fprintf(stderr, "metagate: unknown or incomplete option \"%s\"\n", argv[i]);
            return NULL;
        }
    }
    if (endpoint == NULL)
        fprintf(stderr, "metagate: admin %s needs --endpoint http://HOST:PORT\n", what);
    return endpoint;
}

/* admin_endpoint, then its /metrics into *m (initialized here; the caller closes it on 0).
 * Returns 0, or the exit code: 2 (usage), 1 (fetch failed). */
static int admin_metrics(const char *what, int argc, char **argv, const char **endpoint,
                         struct mg_buf *m)
{
    *endpoint = admin_endpoint(what, argc, argv);
    if (*endpoint == NULL)
        return 2;
    mg_buf_init(m);
    if (fetch_metrics(*endpoint, m) != 0) {
        mg_buf_close(m);
        return 1;
    }
    return 0;
}

static int admin_lifecycle_status(int argc, char **argv)
{
    static const struct {
        const char *label, *metric;
    } rows[] = {
        {"objects expired", "metagate_lifecycle_expired_total"},
        {"range deletes", "metagate_lifecycle_range_deletes_total"},
        {"point deletes", "metagate_lifecycle_point_deletes_total"},
        {"stale due rows", "metagate_lifecycle_stale_total"},
        {"due backlog", "metagate_lifecycle_due_backlog"},
        {"oldest due row age (s)", "metagate_lifecycle_due_oldest_age_seconds"},
        {"entries re-indexed", "metagate_lifecycle_reindexed_total"},
        {"buckets re-indexing", "metagate_lifecycle_reindex_pending_buckets"},
        {"tombstones (meta cf)", "metagate_rocksdb_tombstones{cf=\"meta\"}"},
        {"tombstones (index cf)", "metagate_rocksdb_tombstones{cf=\"index\"}"},
        {"tracker compactions", "metagate_tracker_compactions_total"},
        {"tracker bytes written", "metagate_rocksdb_lsm_bytes_written"},
    };
    const char *endpoint = NULL;
    struct mg_buf m;
    int rv = admin_metrics("lifecycle status", argc, argv, &endpoint, &m);
    if (rv != 0)
        return rv;
    printf("%-26s %s\n", "lifecycle", endpoint);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *v = metric_find(m.base, rows[i].metric);
        printf("%-26s %.*s\n", rows[i].label, v != NULL ? (int)strcspn(v, "\n") : 1,
               v != NULL ? v : "-");
    }
    mg_buf_close(&m);
    return 0;
}

/* The value of label name in a sample line's label set (up to '}'), into out. */
static void label_get(const char *line, const char *name, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "%s=\"", name);
    const char *end = line + strcspn(line, "}\n");
    const char *p = strstr(line, pat);
    out[0] = '\0';
    if (p == NULL || p > end)
        return;
    p += strlen(pat);
    size_t len = strcspn(p, "\"");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

/* admin shards|nodes: the cluster map a node's /metrics carries (meta_cluster_render). */
static int admin_cluster(const char *what, int argc, char **argv)
{
    const char *endpoint = NULL;
    struct mg_buf m;
    int rv = admin_metrics(what, argc, argv, &endpoint, &m);
    if (rv != 0)
        return rv;
    int shards = strcmp(what, "shards") == 0, rows = 0;
    const char *sample = shards ? "metagate_shard_info{" : "metagate_cluster_node{";
    if (shards)
        printf("%-6s %-22s %-22s %-6s %-9s %-7s %-10s %-12s %s\n", "shard", "lo", "hi", "epoch",
               "replicas", "leader", "keys", "bytes", "applied");
    else
        printf("%-5s %-22s %-22s %-22s %s\n", "node", "s3", "raft", "rpc", "row");
    for (const char *p = m.base; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        if (strncmp(p, sample, strlen(sample)) != 0)
            continue;
        char a[64], b[64], c[64], d[64], e[64], f[64], g[64], h[64], k[64];
        rows++;
        if (shards) {
            label_get(p, "shard", a, sizeof(a));
            label_get(p, "lo", b, sizeof(b));
            label_get(p, "hi", c, sizeof(c));
            label_get(p, "epoch", d, sizeof(d));
            label_get(p, "replicas", e, sizeof(e));
            label_get(p, "leader", f, sizeof(f));
            label_get(p, "keys", g, sizeof(g));
            label_get(p, "bytes", h, sizeof(h));
            label_get(p, "applied", k, sizeof(k));
            printf("%-6s %-22s %-22s %-6s %-9s %-7s %-10s %-12s %s\n", a, b, c, d, e, f, g, h, k);
        } else {
            label_get(p, "node", a, sizeof(a));
            label_get(p, "s3", b, sizeof(b));
            label_get(p, "raft", c, sizeof(c));
            label_get(p, "rpc", d, sizeof(d));
            char want[128];
            snprintf(want, sizeof(want), "metagate_cluster_node_row{row=\"id=%s ", a);
            const char *row = strstr(m.base, want);
            printf("%-5s %-22s %-22s %-22s %s\n", a, b, c, d,
                   row == NULL ? "(no manager row yet)" : "written");
        }
    }
    mg_buf_close(&m);
    if (rows == 0) {
        fprintf(stderr, "metagate: %s serves no cluster map (a single node?)\n", endpoint);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return serve(argc - 2, argv + 2);
    if (argc >= 4 && strcmp(argv[1], "admin") == 0 && strcmp(argv[2], "lifecycle") == 0 &&
        strcmp(argv[3], "status") == 0)
        return admin_lifecycle_status(argc - 4, argv + 4);
    if (argc >= 3 && strcmp(argv[1], "admin") == 0 &&
        (strcmp(argv[2], "shards") == 0 || strcmp(argv[2], "nodes") == 0))
        return admin_cluster(argv[2], argc - 3, argv + 3);
    if (argc >= 3 && strcmp(argv[1], "admin") == 0 && strcmp(argv[2], "fsck") == 0)
        return meta_fsck_main(argc - 3, argv + 3);
    usage(stderr);
    return 2;
}
