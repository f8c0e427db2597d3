/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the checkpoint chunk parser (meta/install.c
 * meta__install_chunk_parse), which a replica runs over every META_RPC_CHECKPOINT reply
 * payload a peer sends: any byte string is parsed, accepted or refused with MG_ECORRUPT,
 * never a crash. An accepted chunk's rows walk (meta__install_chunk_next) to exactly its
 * end, each with a non-empty key inside the payload, as many as nrows; re-encoding the
 * header fields and the rows gives back the input's bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "meta/install.h"
#include "meta/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct meta__install_chunk c;
    int rv = meta__install_chunk_parse(data, size, &c);
    if (rv != 0) {
        check(rv == MG_ECORRUPT);
        return 0;
    }
    check(c.last == 0 || c.last == 1);
    check(c.rows >= data && c.rows + c.rows_len == data + size);
    unsigned char *re = malloc(size + 1);
    mrpc_put64(re, c.session);
    mrpc_put64(re + 8, c.applied);
    mrpc_put32(re + 16, c.seq);
    re[20] = (unsigned char)c.last;
    mrpc_put32(re + 21, c.epoch);
    mrpc_put64(re + 25, c.lo);
    mrpc_put64(re + 33, c.hi);
    mrpc_put32(re + 41, 0);
    size_t hdr = (size_t)(c.rows - data), out = hdr, pos = 0, n = 0;
    struct mg_str k, v;
    while (meta__install_chunk_next(&c, &pos, &k, &v) == 1) {
        check(k.len > 0 && (const uint8_t *)k.base >= c.rows &&
              (const uint8_t *)v.base + v.len <= c.rows + c.rows_len);
        check(out + 8 + k.len + v.len <= size);
        mrpc_put32(re + out, (uint32_t)k.len);
        mrpc_put32(re + out + 4, (uint32_t)v.len);
        memcpy(re + out + 8, k.base, k.len);
        memcpy(re + out + 8 + k.len, v.base, v.len);
        out += 8 + k.len + v.len;
        n++;
    }
    check(pos == c.rows_len && n == c.nrows && out == size);
    check(memcmp(re, data, size) == 0);
    free(re);
    return 0;
}
