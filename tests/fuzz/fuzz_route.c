/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the gateway's request router (gateway/route.c,
 * gw__route_parse): line 1 the method, line 2 the Host header, line 3 the
 * request-target, line 4 the configured domain (may be empty); a fifth line
 * present means an x-amz-copy-source header. Checks the router's promises:
 * no crash, a decoded key within META_KEY_MAX, an operation for every
 * success, bucket-level operations without a key, object operations with one.
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/core.h"

static struct mg_str next_line(const char **p, const char *end)
{
    struct mg_str s = {*p, 0};
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    s.len = (size_t)((nl != NULL ? nl : end) - *p);
    *p = nl != NULL ? nl + 1 : end;
    return s;
}

static int is_object_op(enum gw_op op)
{
    return op >= GW_OP_PUT_OBJECT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    struct gw__route_in in;
    memset(&in, 0, sizeof(in));
    in.method = next_line(&p, end);
    in.authority = next_line(&p, end);
    in.target = next_line(&p, end);
    in.domain = next_line(&p, end);
    in.has_copy_source = p < end;
    struct mg_arena a;
    mg_arena_init(&a);
    struct gw__route_out out;
    int rv = gw__route_parse(&in, &a, &out);
    if (rv == 0) {
        assert(out.op != GW_OP_UNKNOWN && out.op < GW_OP__COUNT);
        assert(out.key.len <= META_KEY_MAX);
        assert(out.bucket.len > 0 || out.op == GW_OP_LIST_BUCKETS);
        assert((out.key.len > 0) == is_object_op(out.op));
        assert(out.path.len + (out.query.len ? out.query.len + 1 : 0) <= in.target.len);
        for (size_t i = 0; i < out.nparams; i++) {
            struct mg_str v;
            assert(out.params[i].name.len <= in.target.len);
            (void)gw__qparam_get(out.params, out.nparams, "uploadId", &v);
        }
    } else {
        assert(mg_err_status(rv) >= 400);
    }
    mg_arena_close(&a);
    return 0;
}
