/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Assembles the public gateway (gateway/gateway.h): the HTTP core with the
 * S3 handlers registered as its dispatch. This file is the only one that
 * sees both layers; the core itself never names a handler (gateway/gw.h).
 */
#include "gateway/core.h"
#include "gateway/s3.h"

int gw_server_create(const struct mg_config *cfg, struct gw_server **out, char *errmsg)
{
    return gw__server_create(cfg, gw_s3_dispatch, out, errmsg);
}
