/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metagate binary (DESIGN.md 13): `metagate serve --config FILE
 * [--listen HOST:PORT] [--data DIR]` runs every role in one process. It loads
 * and checks the configuration (common/config.h), prints the endpoint and
 * credentials, and runs the gateway until SIGINT or SIGTERM asks for a
 * graceful stop.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "main"
#include "common/common.h"
#include "common/config.h"
#include "gateway/gateway.h"

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
               "       metagate --help\n"
               "\n"
               "serve      run the S3 gateway and the embedded metadata and blob store\n"
               "--config   JSON configuration: listen, data_dir, region, users, tls, domain,\n"
               "           threads, inline_max_bytes, log_level\n"
               "--listen   override \"listen\" (e.g. 127.0.0.1:9000)\n"
               "--data     override \"data_dir\"\n");
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

static int serve(int argc, char **argv)
{
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

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)
        return serve(argc - 2, argv + 2);
    usage(stderr);
    return 2;
}
