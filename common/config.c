/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration loading (common/config.h): the JSON file is parsed with
 * yajl's tree API and walked key by key, so every key is either understood or
 * rejected by name. Generated credentials live in <data_dir>/credentials.json
 * (0600), written once with O_EXCL and read back on every restart.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>
#include <yajl/yajl_tree.h>

#define MG_MODULE "common"
#include "common/config.h"
#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"

#define CONFIG_FILE_MAX (1u << 20)

static char *dup_str(const char *s)
{
    return s != NULL ? mg_strndup(s, strlen(s)) : NULL;
}

static void set_str(char **slot, const char *s)
{
    mg_free(*slot);
    *slot = dup_str(s);
}

uint64_t mg_env_u64(const char *name, uint64_t dflt)
{
    const char *e = getenv(name);
    if (e == NULL || *e == '\0')
        return dflt;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(e, &end, 10);
    if (errno != 0 || *end != '\0' || *e == '-') {
        mg_log(MG_LOG_WARN, "event=bad_env name=%s value=\"%s\" default=%" PRIu64, name, e, dflt);
        return dflt;
    }
    return (uint64_t)v;
}

void mg_config_init(struct mg_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen_host = dup_str("127.0.0.1");
    cfg->listen_port = 9000;
    cfg->data_dir = dup_str("./data");
    cfg->region = dup_str("us-east-1");
    cfg->inline_max_bytes = 4096;
    cfg->log_level = dup_str("info");
    cfg->lc_day_seconds = 86400;
    cfg->meta_orphan_period_s = 300;
    cfg->meta_orphan_grace_s = 600;
    cfg->scrub_enabled = 1;
    cfg->scrub_delay_s = 300;
    cfg->scrub_period_s = 86400;
    cfg->engine_compaction = dup_str("locality");
    cfg->cluster_split_keys = 10000000;
    cfg->cluster_split_bytes = 4ull << 30;
}

static void users_free(struct mg_config *cfg)
{
    for (size_t i = 0; i < cfg->nusers; i++) {
        mg_free(cfg->users[i].name);
        mg_free(cfg->users[i].access_key);
        if (cfg->users[i].secret_key != NULL)
            memset(cfg->users[i].secret_key, 0, strlen(cfg->users[i].secret_key));
        mg_free(cfg->users[i].secret_key);
    }
    mg_free(cfg->users);
    cfg->users = NULL;
    cfg->nusers = 0;
}

static void cluster_nodes_free(struct mg_config *cfg)
{
    for (size_t i = 0; i < cfg->ncluster_nodes; i++) {
        mg_free(cfg->cluster_nodes[i].s3);
        mg_free(cfg->cluster_nodes[i].raft);
        mg_free(cfg->cluster_nodes[i].rpc);
    }
    mg_free(cfg->cluster_nodes);
    cfg->cluster_nodes = NULL;
    cfg->ncluster_nodes = 0;
}

void mg_config_close(struct mg_config *cfg)
{
    users_free(cfg);
    mg_free(cfg->listen_host);
    mg_free(cfg->data_dir);
    mg_free(cfg->region);
    mg_free(cfg->tls_cert_file);
    mg_free(cfg->tls_key_file);
    mg_free(cfg->domain);
    mg_free(cfg->log_level);
    mg_free(cfg->meta_raft_listen);
    mg_free(cfg->engine_compaction);
    mg_free(cfg->rados_conf);
    mg_free(cfg->rados_pool);
    mg_free(cfg->rados_user);
    mg_free(cfg->rados_namespace);
    cluster_nodes_free(cfg);
    memset(cfg, 0, sizeof(*cfg));
}

static int fail(char *errmsg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char *errmsg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, MG_CONFIG_ERRMSG_LEN, fmt, ap);
    va_end(ap);
    return MG_ECONFIG;
}

/* Printable ASCII without spaces, quotes or backslashes, length in [min, max]. */
static int token_ok(const char *s, size_t min, size_t max)
{
    size_t n = strlen(s);
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

static int get_string(yajl_val v, const char *key, char **slot, char *errmsg)
{
    if (!YAJL_IS_STRING(v))
        return fail(errmsg, "config key \"%s\": expected a string", key);
    if (v->u.string[0] == '\0')
        return fail(errmsg, "config key \"%s\": must not be empty", key);
    set_str(slot, v->u.string);
    return 0;
}

static int get_int(yajl_val v, const char *key, long long lo, long long hi, long long *out,
                   char *errmsg)
{
    if (!YAJL_IS_INTEGER(v) || v->u.number.i < lo || v->u.number.i > hi) {
        char range[64];
        snprintf(range, sizeof(range), " in [%lld, %lld]", lo, hi);
        return fail(errmsg, "config key \"%s\": expected an integer%s", key, range);
    }
    *out = v->u.number.i;
    return 0;
}

static int parse_user(yajl_val u, size_t idx, struct mg_config_user *out, char *errmsg)
{
    char key[64];
    snprintf(key, sizeof(key), "users[%zu]", idx);
    if (!YAJL_IS_OBJECT(u))
        return fail(errmsg, "config key \"%s\": expected an object", key);
    for (size_t i = 0; i < u->u.object.len; i++) {
        const char *k = u->u.object.keys[i];
        yajl_val v = u->u.object.values[i];
        char **slot;
        snprintf(key, sizeof(key), "users[%zu].%.20s", idx, k);
        if (strcmp(k, "name") == 0)
            slot = &out->name;
        else if (strcmp(k, "access_key") == 0)
            slot = &out->access_key;
        else if (strcmp(k, "secret_key") == 0)
            slot = &out->secret_key;
        else
            return fail(errmsg, "config key \"%s\": unknown key", key);
        int rv = get_string(v, key, slot, errmsg);
        if (rv != 0)
            return rv;
    }
    static const char *const need[] = {"name", "access_key", "secret_key"};
    char *have[] = {out->name, out->access_key, out->secret_key};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "users[%zu].%s", idx, need[i]);
        if (have[i] == NULL)
            return fail(errmsg, "config key \"%s\": missing", key);
    }
    snprintf(key, sizeof(key), "users[%zu].name", idx);
    if (!token_ok(out->name, 1, 64))
        return fail(errmsg, "config key \"%s\": 1-64 printable characters, no spaces", key);
    snprintf(key, sizeof(key), "users[%zu].access_key", idx);
    if (!token_ok(out->access_key, 3, 128) || strchr(out->access_key, '/') != NULL ||
        strchr(out->access_key, ':') != NULL)
        return fail(errmsg, "config key \"%s\": 3-128 printable characters, no '/', ':'", key);
    snprintf(key, sizeof(key), "users[%zu].secret_key", idx);
    if (!token_ok(out->secret_key, 8, 128))
        return fail(errmsg, "config key \"%s\": 8-128 printable characters", key);
    return 0;
}

static int parse_users(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_ARRAY(v))
        return fail(errmsg, "config key \"%s\": expected an array", "users");
    users_free(cfg);
    size_t n = v->u.array.len;
    if (n > 1024)
        return fail(errmsg, "config key \"%s\": at most 1024 users", "users");
    cfg->users = mg_calloc(n ? n : 1, sizeof(*cfg->users));
    cfg->nusers = n;
    for (size_t i = 0; i < n; i++) {
        int rv = parse_user(v->u.array.values[i], i, &cfg->users[i], errmsg);
        if (rv != 0)
            return rv;
        for (size_t j = 0; j < i; j++) {
            char key[64];
            snprintf(key, sizeof(key), "users[%zu]", i);
            if (strcmp(cfg->users[j].access_key, cfg->users[i].access_key) == 0)
                return fail(errmsg, "config key \"%s\": duplicate access_key", key);
            if (strcmp(cfg->users[j].name, cfg->users[i].name) == 0)
                return fail(errmsg, "config key \"%s\": duplicate name", key);
        }
    }
    return 0;
}

static int parse_tls(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "tls");
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        int rv;
        if (strcmp(k, "cert_file") == 0)
            rv = get_string(x, "tls.cert_file", &cfg->tls_cert_file, errmsg);
        else if (strcmp(k, "key_file") == 0)
            rv = get_string(x, "tls.key_file", &cfg->tls_key_file, errmsg);
        else {
            char key[64];
            snprintf(key, sizeof(key), "tls.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
        if (rv != 0)
            return rv;
    }
    if (cfg->tls_cert_file == NULL)
        return fail(errmsg, "config key \"%s\": missing", "tls.cert_file");
    if (cfg->tls_key_file == NULL)
        return fail(errmsg, "config key \"%s\": missing", "tls.key_file");
    return 0;
}

static int domain_ok(const char *d)
{
    size_t n = strlen(d);
    if (n == 0 || n > 253 || d[0] == '.' || d[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = d[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* "HOST:PORT" with a port in 0..65535 (the host is checked when it is bound). */
static int hostport_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    char *end = NULL;
    long port = colon != NULL ? strtol(colon + 1, &end, 10) : -1;
    return colon != NULL && colon != s && end != colon + 1 && *end == '\0' && port >= 0 &&
           port <= 65535;
}

/* "meta": {"raft_listen": "HOST:PORT", "initial_shards": N, "flusher": "on"|"hold",
 *          "orphan_period_seconds": N, "orphan_grace_seconds": N} */
static int parse_meta(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "meta");
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        long long n;
        int rv;
        if (strcmp(k, "raft_listen") == 0) {
            if ((rv = get_string(x, "meta.raft_listen", &cfg->meta_raft_listen, errmsg)) != 0)
                return rv;
            if (!hostport_ok(cfg->meta_raft_listen))
                return fail(errmsg, "config key \"%s\": expected \"HOST:PORT\"",
                            "meta.raft_listen");
        } else if (strcmp(k, "initial_shards") == 0) {
            if ((rv = get_int(x, "meta.initial_shards", 1, 63, &n, errmsg)) != 0)
                return rv;
            cfg->meta_initial_shards = (unsigned)n;
        } else if (strcmp(k, "flusher") == 0) {
            char *mode = NULL;
            if ((rv = get_string(x, "meta.flusher", &mode, errmsg)) != 0)
                return rv;
            int ok = strcmp(mode, "on") == 0 || strcmp(mode, "hold") == 0;
            cfg->meta_flusher_hold = strcmp(mode, "hold") == 0;
            mg_free(mode);
            if (!ok)
                return fail(errmsg, "config key \"%s\": expected \"on\" or \"hold\"",
                            "meta.flusher");
        } else if (strcmp(k, "orphan_period_seconds") == 0) {
            if ((rv = get_int(x, "meta.orphan_period_seconds", 0, 7 * 86400, &n, errmsg)) != 0)
                return rv;
            cfg->meta_orphan_period_s = (uint32_t)n;
            cfg->meta_orphan_set = 1;
        } else if (strcmp(k, "orphan_grace_seconds") == 0) {
            if ((rv = get_int(x, "meta.orphan_grace_seconds", 0, 7 * 86400, &n, errmsg)) != 0)
                return rv;
            cfg->meta_orphan_grace_s = (uint32_t)n;
            cfg->meta_orphan_set = 1;
        } else {
            char key[64];
            snprintf(key, sizeof(key), "meta.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
    }
    return 0;
}

/* "lifecycle": {"day_seconds": N, "max_per_second": N, "reindex_per_second": N,
 *  "delete": "range"|"point"} */
static int parse_lifecycle(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "lifecycle");
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        long long n;
        int rv;
        if (strcmp(k, "day_seconds") == 0) {
            if ((rv = get_int(x, "lifecycle.day_seconds", 1, 86400LL * 366, &n, errmsg)) != 0)
                return rv;
            cfg->lc_day_seconds = (uint32_t)n;
        } else if (strcmp(k, "max_per_second") == 0) {
            if ((rv = get_int(x, "lifecycle.max_per_second", 0, 1000000000LL, &n, errmsg)) != 0)
                return rv;
            cfg->lc_max_per_second = (uint64_t)n;
        } else if (strcmp(k, "reindex_per_second") == 0) {
            if ((rv = get_int(x, "lifecycle.reindex_per_second", 0, 1000000LL, &n, errmsg)) != 0)
                return rv;
            cfg->lc_reindex_per_second = (uint32_t)n;
        } else if (strcmp(k, "delete") == 0) {
            char *mode = NULL;
            if ((rv = get_string(x, "lifecycle.delete", &mode, errmsg)) != 0)
                return rv;
            int ok = strcmp(mode, "range") == 0 || strcmp(mode, "point") == 0;
            cfg->lc_delete_point = strcmp(mode, "point") == 0;
            mg_free(mode);
            if (!ok)
                return fail(errmsg, "config key \"%s\": expected \"range\" or \"point\"",
                            "lifecycle.delete");
        } else {
            char key[64];
            snprintf(key, sizeof(key), "lifecycle.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
    }
    return 0;
}

/* "scrub": {"enabled": BOOL, "bytes_per_second": N, "delay_seconds": N, "period_seconds": N}
 * (meta/scrub.h) */
static int parse_scrub(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "scrub");
    cfg->scrub_set = 1;
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        long long n;
        int rv;
        if (strcmp(k, "enabled") == 0) {
            if (!YAJL_IS_TRUE(x) && !YAJL_IS_FALSE(x))
                return fail(errmsg, "config key \"%s\": expected true or false",
                            "scrub.enabled");
            cfg->scrub_enabled = YAJL_IS_TRUE(x);
        } else if (strcmp(k, "bytes_per_second") == 0) {
            if ((rv = get_int(x, "scrub.bytes_per_second", 1, 1LL << 40, &n, errmsg)) != 0)
                return rv;
            cfg->scrub_bytes_per_second = (uint64_t)n;
        } else if (strcmp(k, "delay_seconds") == 0) {
            if ((rv = get_int(x, "scrub.delay_seconds", 0, 86400LL * 366, &n, errmsg)) != 0)
                return rv;
            cfg->scrub_delay_s = (uint64_t)n;
        } else if (strcmp(k, "period_seconds") == 0) {
            if ((rv = get_int(x, "scrub.period_seconds", 1, 86400LL * 366, &n, errmsg)) != 0)
                return rv;
            cfg->scrub_period_s = (uint64_t)n;
        } else {
            char key[64];
            snprintf(key, sizeof(key), "scrub.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
    }
    return 0;
}

/* "engine": {"compaction": "locality"|"rocksdb"|"rocksdb+collector"} (the spellings of
 * engine/engine.h eng_compaction_parse, which common/ cannot call: it sits below engine/). */
static int parse_engine(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    static const char *modes[] = {"locality", "rocksdb", "rocksdb+collector"};
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "engine");
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        int rv;
        if (strcmp(k, "compaction") != 0) {
            char key[64];
            snprintf(key, sizeof(key), "engine.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
        if ((rv = get_string(v->u.object.values[i], "engine.compaction",
                             &cfg->engine_compaction, errmsg)) != 0)
            return rv;
        int ok = 0;
        for (size_t j = 0; j < sizeof(modes) / sizeof(modes[0]); j++)
            ok |= strcmp(cfg->engine_compaction, modes[j]) == 0;
        if (!ok)
            return fail(errmsg,
                        "config key \"%s\": expected \"locality\", \"rocksdb\" or "
                        "\"rocksdb+collector\"",
                        "engine.compaction");
    }
    return 0;
}

/* "data": {"backend": "local"|"rados", "rados": {"conf": PATH, "pool": NAME, "user": NAME,
 *                                                 "namespace": NAME}} */
static int parse_data(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "data");
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        int rv;
        if (strcmp(k, "backend") == 0) {
            char *b = NULL;
            if ((rv = get_string(x, "data.backend", &b, errmsg)) != 0)
                return rv;
            int ok = strcmp(b, "local") == 0 || strcmp(b, "rados") == 0;
            cfg->data_rados = strcmp(b, "rados") == 0;
            mg_free(b);
            if (!ok)
                return fail(errmsg, "config key \"%s\": expected \"local\" or \"rados\"",
                            "data.backend");
        } else if (strcmp(k, "rados") == 0) {
            if (!YAJL_IS_OBJECT(x))
                return fail(errmsg, "config key \"%s\": expected an object", "data.rados");
            for (size_t j = 0; j < x->u.object.len; j++) {
                const char *rk = x->u.object.keys[j];
                yajl_val rx = x->u.object.values[j];
                char key[64];
                snprintf(key, sizeof(key), "data.rados.%.40s", rk);
                char **slot;
                if (strcmp(rk, "conf") == 0)
                    slot = &cfg->rados_conf;
                else if (strcmp(rk, "pool") == 0)
                    slot = &cfg->rados_pool;
                else if (strcmp(rk, "user") == 0)
                    slot = &cfg->rados_user;
                else if (strcmp(rk, "namespace") == 0)
                    slot = &cfg->rados_namespace;
                else
                    return fail(errmsg, "config key \"%s\": unknown key", key);
                if ((rv = get_string(rx, key, slot, errmsg)) != 0)
                    return rv;
                if (slot != &cfg->rados_conf && !token_ok(*slot, 1, 128))
                    return fail(errmsg, "config key \"%s\": 1-128 printable characters", key);
            }
        } else {
            char key[64];
            snprintf(key, sizeof(key), "data.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
    }
    return 0;
}

/* cluster.nodes[idx]: {"id": N, "s3": "HOST:PORT", "raft": "HOST:PORT", "rpc": "HOST:PORT"} */
static int parse_node(yajl_val u, size_t idx, struct mg_config_node *out, char *errmsg)
{
    char key[64];
    snprintf(key, sizeof(key), "cluster.nodes[%zu]", idx);
    if (!YAJL_IS_OBJECT(u))
        return fail(errmsg, "config key \"%s\": expected an object", key);
    for (size_t i = 0; i < u->u.object.len; i++) {
        const char *k = u->u.object.keys[i];
        yajl_val v = u->u.object.values[i];
        char **slot;
        int rv;
        snprintf(key, sizeof(key), "cluster.nodes[%zu].%.20s", idx, k);
        if (strcmp(k, "id") == 0) {
            long long n;
            if ((rv = get_int(v, key, 1, 1000000, &n, errmsg)) != 0)
                return rv;
            out->id = (uint64_t)n;
            continue;
        }
        if (strcmp(k, "s3") == 0)
            slot = &out->s3;
        else if (strcmp(k, "raft") == 0)
            slot = &out->raft;
        else if (strcmp(k, "rpc") == 0)
            slot = &out->rpc;
        else
            return fail(errmsg, "config key \"%s\": unknown key", key);
        if ((rv = get_string(v, key, slot, errmsg)) != 0)
            return rv;
        if (!hostport_ok(*slot))
            return fail(errmsg, "config key \"%s\": expected \"HOST:PORT\"", key);
    }
    static const char *const need[] = {"s3", "raft", "rpc"};
    char *have[] = {out->s3, out->raft, out->rpc};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "cluster.nodes[%zu].%s", idx, need[i]);
        if (have[i] == NULL)
            return fail(errmsg, "config key \"%s\": missing", key);
    }
    if (out->id == 0)
        return fail(errmsg, "config key \"cluster.nodes[%zu].id\": missing", idx);
    return 0;
}

/* "cluster": {"node_id": N, "nodes": [NODE, ...]} */
static int parse_cluster(struct mg_config *cfg, yajl_val v, char *errmsg)
{
    if (!YAJL_IS_OBJECT(v))
        return fail(errmsg, "config key \"%s\": expected an object", "cluster");
    for (size_t i = 0; i < v->u.object.len; i++) {
        const char *k = v->u.object.keys[i];
        yajl_val x = v->u.object.values[i];
        int rv;
        if (strcmp(k, "node_id") == 0) {
            long long n;
            if ((rv = get_int(x, "cluster.node_id", 1, 1000000, &n, errmsg)) != 0)
                return rv;
            cfg->cluster_node_id = (uint64_t)n;
        } else if (strcmp(k, "nodes") == 0) {
            if (!YAJL_IS_ARRAY(x))
                return fail(errmsg, "config key \"%s\": expected an array", "cluster.nodes");
            cluster_nodes_free(cfg);
            size_t n = x->u.array.len;
            if (n == 0 || n > 64)
                return fail(errmsg, "config key \"%s\": 1 to 64 nodes", "cluster.nodes");
            cfg->cluster_nodes = mg_calloc(n, sizeof(*cfg->cluster_nodes));
            cfg->ncluster_nodes = n;
            for (size_t j = 0; j < n; j++) {
                if ((rv = parse_node(x->u.array.values[j], j, &cfg->cluster_nodes[j], errmsg)) !=
                    0)
                    return rv;
                for (size_t m = 0; m < j; m++)
                    if (cfg->cluster_nodes[m].id == cfg->cluster_nodes[j].id)
                        return fail(errmsg, "config key \"cluster.nodes[%zu].id\": duplicate", j);
            }
        } else if (strcmp(k, "split_keys") == 0 || strcmp(k, "split_bytes") == 0) {
            long long n;
            int keys = k[6] == 'k';
            if ((rv = get_int(x, keys ? "cluster.split_keys" : "cluster.split_bytes", 0,
                              1LL << 50, &n, errmsg)) != 0)
                return rv;
            *(keys ? &cfg->cluster_split_keys : &cfg->cluster_split_bytes) = (uint64_t)n;
        } else {
            char key[64];
            snprintf(key, sizeof(key), "cluster.%.40s", k);
            return fail(errmsg, "config key \"%s\": unknown key", key);
        }
    }
    return 0;
}

static int parse_key(struct mg_config *cfg, const char *k, yajl_val v, char *errmsg)
{
    long long n;
    int rv;
    if (strcmp(k, "listen") == 0) {
        if (!YAJL_IS_STRING(v))
            return fail(errmsg, "config key \"%s\": expected a string \"HOST:PORT\"", k);
        return mg_config_set_listen(cfg, v->u.string, errmsg);
    }
    if (strcmp(k, "data_dir") == 0)
        return get_string(v, k, &cfg->data_dir, errmsg);
    if (strcmp(k, "region") == 0) {
        if ((rv = get_string(v, k, &cfg->region, errmsg)) != 0)
            return rv;
        if (!token_ok(cfg->region, 1, 64) || strchr(cfg->region, '/') != NULL)
            return fail(errmsg, "config key \"%s\": not a region name", k);
        return 0;
    }
    if (strcmp(k, "users") == 0)
        return parse_users(cfg, v, errmsg);
    if (strcmp(k, "tls") == 0)
        return parse_tls(cfg, v, errmsg);
    if (strcmp(k, "meta") == 0)
        return parse_meta(cfg, v, errmsg);
    if (strcmp(k, "lifecycle") == 0)
        return parse_lifecycle(cfg, v, errmsg);
    if (strcmp(k, "engine") == 0)
        return parse_engine(cfg, v, errmsg);
    if (strcmp(k, "scrub") == 0)
        return parse_scrub(cfg, v, errmsg);
    if (strcmp(k, "data") == 0)
        return parse_data(cfg, v, errmsg);
    if (strcmp(k, "cluster") == 0)
        return parse_cluster(cfg, v, errmsg);
    if (strcmp(k, "domain") == 0) {
        if ((rv = get_string(v, k, &cfg->domain, errmsg)) != 0)
            return rv;
        if (!domain_ok(cfg->domain))
            return fail(errmsg, "config key \"%s\": expected a lower-case DNS name", k);
        return 0;
    }
    if (strcmp(k, "threads") == 0) {
        if ((rv = get_int(v, k, 0, 256, &n, errmsg)) != 0)
            return rv;
        cfg->threads = (int)n;
        return 0;
    }
    if (strcmp(k, "inline_max_bytes") == 0) {
        if ((rv = get_int(v, k, 0, 1 << 20, &n, errmsg)) != 0)
            return rv;
        cfg->inline_max_bytes = (uint32_t)n;
        return 0;
    }
    if (strcmp(k, "log_level") == 0) {
        static const char *const levels[] = {"trace", "debug", "info", "warn", "error"};
        if ((rv = get_string(v, k, &cfg->log_level, errmsg)) != 0)
            return rv;
        for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
            if (strcmp(cfg->log_level, levels[i]) == 0)
                return 0;
        return fail(errmsg, "config key \"%s\": expected trace, debug, info, warn or error", k);
    }
    char key[64];
    snprintf(key, sizeof(key), "%.60s", k);
    return fail(errmsg, "config key \"%s\": unknown key", key);
}

int mg_config_parse(struct mg_config *cfg, const char *json, size_t len, char *errmsg)
{
    char *text = mg_strndup(json, len);
    char perr[200];
    perr[0] = '\0';
    yajl_val root = yajl_tree_parse(text, perr, sizeof(perr));
    mg_free(text);
    if (root == NULL) {
        for (char *p = perr; *p; p++)
            if (*p == '\n')
                *p = ' ';
        fail(errmsg, "config: invalid JSON: %s", perr);
        return MG_ECONFIG;
    }
    int rv = 0;
    if (!YAJL_IS_OBJECT(root)) {
        fail(errmsg, "config: the top level must be a JSON object");
        rv = MG_ECONFIG;
    }
    for (size_t i = 0; rv == 0 && i < root->u.object.len; i++)
        rv = parse_key(cfg, root->u.object.keys[i], root->u.object.values[i], errmsg);
    yajl_tree_free(root);
    return rv;
}

int mg_config_load(struct mg_config *cfg, const char *path, char *errmsg)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail(errmsg, "config: cannot open %s: %s", path, strerror(errno));
        return MG_ECONFIG;
    }
    char *buf = mg_malloc(CONFIG_FILE_MAX);
    size_t n = fread(buf, 1, CONFIG_FILE_MAX, f);
    int rerr = ferror(f);
    fclose(f);
    int rv;
    if (rerr || n == CONFIG_FILE_MAX) {
        fail(errmsg, "config: cannot read %s (error or over 1 MiB)", path);
        rv = MG_ECONFIG;
    } else {
        rv = mg_config_parse(cfg, buf, n, errmsg);
    }
    mg_free(buf);
    return rv;
}

int mg_config_set_listen(struct mg_config *cfg, const char *hostport, char *errmsg)
{
    const char *colon = strrchr(hostport, ':');
    const char *host = hostport;
    size_t hlen;
    if (colon == NULL || colon[1] == '\0')
        return fail(errmsg, "config key \"%s\": expected \"HOST:PORT\", got \"%.100s\"", "listen",
                    hostport);
    if (host[0] == '[') {
        if (colon == host || colon[-1] != ']')
            return fail(errmsg, "config key \"%s\": bad IPv6 form \"%.100s\"", "listen", hostport);
        host++;
        hlen = (size_t)(colon - 1 - host);
    } else {
        hlen = (size_t)(colon - host);
        if (memchr(host, ':', hlen) != NULL)
            return fail(errmsg, "config key \"%s\": write IPv6 as [ADDR]:PORT, got \"%.100s\"",
                        "listen", hostport);
    }
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || errno != 0 || port < 0 || port > 65535 || hlen == 0)
        return fail(errmsg, "config key \"%s\": bad host or port in \"%.100s\"", "listen",
                    hostport);
    mg_free(cfg->listen_host);
    cfg->listen_host = mg_strndup(host, hlen);
    cfg->listen_port = (uint16_t)port;
    return 0;
}

void mg_config_set_data_dir(struct mg_config *cfg, const char *dir)
{
    set_str(&cfg->data_dir, dir);
}

static int mkdir_p(const char *path, char *errmsg)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp))
        return fail(errmsg, "config key \"%s\": bad path", "data_dir");
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];
            tmp[i] = '\0';
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
                fail(errmsg, "config key \"data_dir\": mkdir %s: %s", tmp, strerror(errno));
                return MG_ECONFIG;
            }
            tmp[i] = c;
        }
    }
    return 0;
}

/* Generated credentials: access key "MG" + 18 upper-case alphanumerics, secret 40 characters
 * from the base64url alphabet, as AWS keys look (20 / 40 characters). */
static void gen_token(char *out, size_t len, const char *alphabet, size_t alen)
{
    uint8_t rnd[64];
    if (RAND_bytes(rnd, (int)len) != 1)
        abort();
    for (size_t i = 0; i < len; i++)
        out[i] = alphabet[rnd[i] % alen];
    out[len] = '\0';
}

static int creds_read(struct mg_config *cfg, const char *path, char *errmsg)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? 1 : fail(errmsg, "config: cannot read %s", path);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    yajl_val root = yajl_tree_parse(buf, NULL, 0);
    int rv = fail(errmsg, "config: %s is damaged; remove it to generate new credentials", path);
    if (root != NULL && YAJL_IS_OBJECT(root)) {
        cfg->users = mg_calloc(1, sizeof(*cfg->users));
        cfg->nusers = 1;
        if (parse_user(root, 0, &cfg->users[0], errmsg) == 0)
            rv = 0;
        else
            users_free(cfg);
    }
    yajl_tree_free(root);
    return rv;
}

static int creds_write(struct mg_config *cfg, const char *path, char *errmsg)
{
    static const char upper[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char ak[21], sk[41];
    ak[0] = 'M';
    ak[1] = 'G';
    gen_token(ak + 2, 18, upper, sizeof(upper) - 1);
    gen_token(sk, 40, b64, sizeof(b64) - 1);
    char json[256];
    int len =
        snprintf(json, sizeof(json),
                 "{\"name\": \"admin\", \"access_key\": \"%s\", \"secret_key\": \"%s\"}\n", ak, sk);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail(errmsg, "config: cannot create %s: %s", path, strerror(errno));
        return MG_EIO;
    }
    ssize_t w = write(fd, json, (size_t)len);
    int ok = w == len && fsync(fd) == 0;
    close(fd);
    if (!ok) {
        unlink(path);
        fail(errmsg, "config: cannot write %s", path);
        return MG_EIO;
    }
    cfg->users = mg_calloc(1, sizeof(*cfg->users));
    cfg->nusers = 1;
    cfg->users[0].name = dup_str("admin");
    cfg->users[0].access_key = dup_str(ak);
    cfg->users[0].secret_key = dup_str(sk);
    memset(sk, 0, sizeof(sk));
    memset(json, 0, sizeof(json));
    return 0;
}

/* The data and cluster keys together: rados needs conf and pool; a cluster needs rados, and
 * its node_id among its nodes. */
static int check_data_cluster(struct mg_config *cfg, char *errmsg)
{
    if (cfg->data_rados) {
        if (cfg->rados_conf == NULL)
            return fail(errmsg, "config key \"%s\": missing (data.backend is \"rados\")",
                        "data.rados.conf");
        if (cfg->rados_pool == NULL)
            return fail(errmsg, "config key \"%s\": missing (data.backend is \"rados\")",
                        "data.rados.pool");
        if (access(cfg->rados_conf, R_OK) != 0)
            return fail(errmsg, "config key \"%s\": cannot read %s", "data.rados.conf",
                        cfg->rados_conf);
        if (cfg->rados_user == NULL)
            cfg->rados_user = dup_str("admin");
    } else if (cfg->rados_conf != NULL || cfg->rados_pool != NULL || cfg->rados_user != NULL ||
               cfg->rados_namespace != NULL) {
        return fail(errmsg, "config key \"%s\": set, but data.backend is \"local\"",
                    "data.rados");
    }
    if (cfg->cluster_node_id == 0 && cfg->ncluster_nodes == 0)
        return 0;
    if (cfg->cluster_node_id == 0)
        return fail(errmsg, "config key \"%s\": missing", "cluster.node_id");
    if (cfg->ncluster_nodes == 0)
        return fail(errmsg, "config key \"%s\": missing", "cluster.nodes");
    size_t self = cfg->ncluster_nodes;
    for (size_t i = 0; i < cfg->ncluster_nodes; i++)
        if (cfg->cluster_nodes[i].id == cfg->cluster_node_id)
            self = i;
    if (self == cfg->ncluster_nodes)
        return fail(errmsg, "config key \"%s\": %llu is not in cluster.nodes", "cluster.node_id",
                    (unsigned long long)cfg->cluster_node_id);
    /* Object bytes of a cluster must be readable from every node (issue 10). */
    if (!cfg->data_rados)
        return fail(errmsg,
                    "config key \"%s\": a cluster needs data.backend \"rados\" (\"local\" "
                    "keeps object bytes on one node)",
                    "data.backend");
    /* This node's raft address is its raft host's; an explicit meta.raft_listen must agree. */
    const struct mg_config_node *me = &cfg->cluster_nodes[self];
    if (cfg->meta_raft_listen != NULL && strcmp(cfg->meta_raft_listen, me->raft) != 0)
        return fail(errmsg, "config key \"%s\": differs from cluster.nodes[%zu].raft",
                    "meta.raft_listen", self);
    if (cfg->meta_raft_listen == NULL)
        cfg->meta_raft_listen = dup_str(me->raft);
    return 0;
}

int mg_config_finish(struct mg_config *cfg, char *errmsg)
{
    int rv = check_data_cluster(cfg, errmsg);
    if (rv != 0)
        return rv;
    rv = mkdir_p(cfg->data_dir, errmsg);
    if (rv != 0)
        return rv;
    char path[4200];
    snprintf(path, sizeof(path), "%s/tmp", cfg->data_dir);
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return fail(errmsg, "config key \"%s\": cannot create %s", "data_dir", path);
    if ((cfg->tls_cert_file == NULL) != (cfg->tls_key_file == NULL))
        return fail(errmsg, "config key \"%s\": needs both cert_file and key_file", "tls");
    if (cfg->tls_cert_file != NULL && access(cfg->tls_cert_file, R_OK) != 0)
        return fail(errmsg, "config key \"%s\": cannot read %s", "tls.cert_file",
                    cfg->tls_cert_file);
    if (cfg->tls_key_file != NULL && access(cfg->tls_key_file, R_OK) != 0)
        return fail(errmsg, "config key \"%s\": cannot read %s", "tls.key_file", cfg->tls_key_file);
    if (cfg->nusers > 0)
        return 0;
    snprintf(path, sizeof(path), "%s/credentials.json", cfg->data_dir);
    rv = creds_read(cfg, path, errmsg);
    if (rv == 1)
        rv = creds_write(cfg, path, errmsg);
    if (rv == 0)
        cfg->users_generated = 1;
    return rv;
}
