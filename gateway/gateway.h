/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gateway/: the S3 HTTP front door (DESIGN.md 2, 3, 5a). One h2o context per
 * event loop, one loop per thread, all listening on one SO_REUSEPORT port;
 * each request is routed, authenticated and handed to the S3 handlers on the
 * loop thread that accepted it. Also serves GET /health and GET /metrics.
 *
 * Lifecycle: gw_server_create (binds, opens the metadata store) ->
 * gw_server_run (blocks until stopped) -> gw_server_destroy. gw_server_stop
 * may be called from any thread or a signal handler.
 */
#ifndef MG_GATEWAY_GATEWAY_H
#define MG_GATEWAY_GATEWAY_H

#include <stdint.h>

#include "common/config.h"

struct gw_server;

/* Open the metadata store under cfg->data_dir, set up h2o (TLS when configured) and bind one
 * listener per loop on cfg->listen_host:listen_port. cfg must be finished (mg_config_finish)
 * and outlive the server. errmsg receives MG_CONFIG_ERRMSG_LEN bytes on failure.
 * Returns 0, MG_ECONFIG (bad TLS files, address), MG_EIO (bind, store open), MG_ECORRUPT. */
int gw_server_create(const struct mg_config *cfg, struct gw_server **out, char *errmsg);

/* The port actually bound (useful when the configured port is 0). */
uint16_t gw_server_port(const struct gw_server *srv);

/* Run every loop (one thread each, the caller's thread joins them) until gw_server_stop.
 * Returns 0. */
int gw_server_run(struct gw_server *srv);

/* Graceful stop: close listeners, let in-flight responses finish (bounded: 2 s), return from
 * gw_server_run. Async-signal-safe and thread-safe; idempotent. */
void gw_server_stop(struct gw_server *srv);

/* Close the store and free everything. Only after gw_server_run returned (or never ran). */
void gw_server_destroy(struct gw_server *srv);

#endif
