/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public header of common/: what every module needs. Like h2o.h, it is an
 * umbrella over the module's parts: the error table, logging, memory, and
 * (when present) time, config and the SigV4/SigV2 signing shared by the
 * gateway (verify) and mgbench (sign).
 */
#ifndef MG_COMMON_H
#define MG_COMMON_H

#include "common/err.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/sig.h"

#endif
