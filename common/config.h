/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process configuration: one JSON file (yajl tree API) plus command-line
 * overrides (DESIGN.md 13, issue 2). Every key is checked at start: an unknown
 * key or a bad value is rejected with a message naming the key, so a typo
 * never silently falls back to a default. With no users configured, a key
 * pair is generated once, stored in <data_dir>/credentials.json (mode 0600)
 * and reused on every restart.
 *
 * Keys: listen ("HOST:PORT"), data_dir, region, users[{name, access_key,
 * secret_key}], tls{cert_file, key_file}, domain, threads, inline_max_bytes,
 * log_level, meta{raft_listen, initial_shards, flusher}, lifecycle{day_seconds,
 * max_per_second, delete}, engine{compaction}, data{backend, rados{conf, pool, user, namespace}},
 * cluster{node_id, nodes[{id, s3, raft, rpc}], split_keys, split_bytes} (issue 10: a cluster needs data.backend
 * "rados"). Not thread-safe; loaded once by main before
 * threads start.
 */
#ifndef MG_COMMON_CONFIG_H
#define MG_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define MG_CONFIG_ERRMSG_LEN 256

struct mg_config_user {
    char *name;       /* owner name shown in listings */
    char *access_key; /* 3..128 printable chars */
    char *secret_key; /* 8..128 printable chars; never logged */
};

/* One node of a cluster (cluster.nodes[i]): its id and "HOST:PORT" addresses. */
struct mg_config_node {
    uint64_t id; /* > 0, unique */
    char *s3;    /* S3 listen address (the node's "listen") */
    char *raft;  /* raft host address (the node's meta.raft_listen) */
    char *rpc;   /* internal RPC address (meta/rpc.h) */
};

struct mg_config {
    char *listen_host;    /* "127.0.0.1" (IPv4 or IPv6 literal, or "localhost") */
    uint16_t listen_port; /* 0 = any free port (tests) */
    char *data_dir;       /* everything persistent lives here */
    char *region;         /* "us-east-1" */
    struct mg_config_user *users;
    size_t nusers;
    int users_generated; /* 1 when users[0] came from <data_dir>/credentials.json */
    char *tls_cert_file; /* NULL: plain HTTP */
    char *tls_key_file;
    char *domain;              /* virtual-host suffix ("s3.local"), NULL if none */
    int threads;               /* event loops; 0 = default (see gateway/server.c) */
    uint32_t inline_max_bytes; /* objects up to this size live inside their metadata entry */
    char *log_level;           /* "trace", "debug", "info", "warn", "error" */
    char *meta_raft_listen;    /* meta.raft_listen "HOST:PORT"; NULL: listen port + 1 */
    unsigned meta_initial_shards; /* meta.initial_shards: data shards of a new store (1..63) */
    int meta_flusher_hold;     /* meta.flusher "hold": test switch, RocksDB never flushed */
    uint32_t lc_day_seconds;   /* lifecycle.day_seconds: one lifecycle "day" (1..86400*366;
                                  default 86400), tests shrink it (RGW's lc_debug_interval) */
    uint64_t lc_max_per_second; /* lifecycle.max_per_second: objects/s expired (0 = unlimited,
                                   the default; at most 1e9) */
    uint32_t lc_reindex_per_second; /* lifecycle.reindex_per_second: entries/s a re-index walk
                                       visits (0: the scheduler's default, 1,000,000) */
    int lc_delete_point;       /* lifecycle.delete "point" (1) or "range" (0, the default) */
    char *engine_compaction;   /* engine.compaction "locality" (default), "rocksdb",
                                  "rocksdb+collector": hand to eng_compaction_parse */
    int meta_orphan_set;        /* meta.orphan_period_seconds or orphan_grace_seconds given */
    uint32_t meta_orphan_period_s; /* meta.orphan_period_seconds: between orphan passes (0:
                                      no collector; default 300) */
    uint32_t meta_orphan_grace_s;  /* meta.orphan_grace_seconds: an unreferenced blob is
                                      collected after this long (default 600) */
    int scrub_set;              /* a "scrub" object was given */
    int scrub_enabled;          /* scrub.enabled (default true) */
    uint64_t scrub_bytes_per_second; /* scrub.bytes_per_second (0: 8 MiB/s) */
    uint64_t scrub_delay_s;     /* scrub.delay_seconds: first pass after start (default 300) */
    uint64_t scrub_period_s;    /* scrub.period_seconds: between pass starts (default 86400) */
    int data_rados;             /* data.backend "rados" (1) or "local" (0, the default) */
    char *rados_conf;           /* data.rados.conf: ceph.conf path (rados only, required) */
    char *rados_pool;           /* data.rados.pool: pool name (required) */
    char *rados_user;           /* data.rados.user: client name without "client." (default
                                   "admin") */
    char *rados_namespace;      /* data.rados.namespace: RADOS namespace of every object (NULL:
                                   the pool's default one); one store (or cluster) per
                                   namespace */
    uint64_t cluster_node_id;   /* cluster.node_id: this node (0: single node, no cluster) */
    struct mg_config_node *cluster_nodes; /* cluster.nodes, every node of the cluster (this
                                   one included), in config order */
    size_t ncluster_nodes;
    uint64_t cluster_split_keys;  /* cluster.split_keys: a data shard with more rows splits at
                                     a bucket boundary (0: never; default 10,000,000) */
    uint64_t cluster_split_bytes; /* cluster.split_bytes: ... or more bytes of rows (0: never;
                                     default 4 GiB) */
};

/* Defaults: listen 127.0.0.1:9000, data_dir ./data, region us-east-1, threads 0,
 * inline_max_bytes 4096, log_level info. The caller owns cfg; mg_config_close frees it. */
void mg_config_init(struct mg_config *cfg);

/* A test knob from the environment: name's value as a decimal number, or dflt when it is unset,
 * empty or not a number (the last logged). Knobs are for tests; users set config keys. */
uint64_t mg_env_u64(const char *name, uint64_t dflt);
void mg_config_close(struct mg_config *cfg);

/* Parse JSON text (len bytes, need not be NUL-terminated) over the values already in cfg.
 * Returns 0 or MG_ECONFIG with errmsg (MG_CONFIG_ERRMSG_LEN bytes) naming the key. */
int mg_config_parse(struct mg_config *cfg, const char *json, size_t len, char *errmsg);
/* Read and parse a file. Returns 0 or MG_ECONFIG (unreadable file or as above). */
int mg_config_load(struct mg_config *cfg, const char *path, char *errmsg);
/* Override "listen" with "HOST:PORT" ("[::1]:9000" for IPv6). Returns 0 or MG_ECONFIG. */
int mg_config_set_listen(struct mg_config *cfg, const char *hostport, char *errmsg);
/* Override data_dir. */
void mg_config_set_data_dir(struct mg_config *cfg, const char *dir);
/* Final checks once all overrides are applied: creates data_dir (and data_dir/tmp), checks the
 * TLS files are readable, and when no users are configured loads or generates
 * data_dir/credentials.json. Returns 0, MG_ECONFIG or MG_EIO, with errmsg. */
int mg_config_finish(struct mg_config *cfg, char *errmsg);

#endif
