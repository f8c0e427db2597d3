/* SPDX-License-Identifier: Apache-2.0 */
/* Lookups over the error table of common/err.h. */
#include <errno.h>

#include "common/err.h"

static const struct {
    const char *name, *code, *msg;
    int status;
} rows[] = {
#define ROW(n, c, s, m) {#n, c, m, s},
    MG_ERR_TABLE(ROW)
#undef ROW
};

static int idx(int rv)
{
    return (rv >= 0 && rv < MG_ERR__COUNT) ? rv : MG_EINTERNAL;
}

const char *mg_err_s3code(int rv)
{
    return rows[idx(rv)].code;
}

int mg_err_status(int rv)
{
    return rows[idx(rv)].status;
}

const char *mg_err_message(int rv)
{
    return rows[idx(rv)].msg;
}

const char *mg_err_name(int rv)
{
    return rows[idx(rv)].name;
}

int mg_err_from_errno(int e)
{
    switch (e) {
    case 0:
        return MG_OK;
    case ENOSPC:
    case EDQUOT:
        return MG_ENOSPC;
    case ENOMEM:
        return MG_ENOMEM;
    default:
        return MG_EIO;
    }
}
