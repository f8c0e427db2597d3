/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the Raft entry decoder (meta/wset.c): every replica and
 * every log replay decodes entries, so any byte string must decode or be
 * MG_ECORRUPT, never crash or assert (STYLE.md 3). An entry that decodes must
 * walk to exactly its record count, and re-encoding its records with its
 * header must give back the same bytes (the encoding is canonical).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta/wset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct meta_ws_header h;
    if (meta__ws_decode(data, size, &h) != 0)
        return 0;
    struct meta_ws *ws = meta__ws_create();
    size_t pos = 0;
    struct meta_ws_record r;
    uint32_t n = 0;
    int rv;
    while ((rv = meta__ws_next(data, size, &pos, &r)) == 1) {
        meta__ws_add(ws, &r);
        n++;
    }
    check(rv == 0 && n == h.nrecords);
    struct mg_buf out;
    mg_buf_init(&out);
    meta__ws_encode(ws, &h, &out);
    check(out.len == size && memcmp(out.base, data, size) == 0);
    mg_buf_close(&out);
    meta__ws_destroy(ws);
    return 0;
}
