/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the split decoders (meta/split.c): the layout row (read from
 * RocksDB at every start) and the split command (a record of an entry every replica and
 * every replay applies). Any byte string must decode or be MG_ECORRUPT, never crash. A
 * layout that decodes re-encodes to the same bytes; the input's tail as a split command
 * applied to it either changes nothing (-1, 1) or keeps the layout valid (ids ascending,
 * ranges sane, the parent shrunk to end at the split point).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta/split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct meta__split_cmd c;
    size_t cl = size >= 29 ? 29 : size;
    int have_cmd = meta__split_cmd_decode(data + size - cl, cl, &c) == 0;
    struct meta__layout l, d;
    int rv = meta__layout_decode(data, size, &l);
    if (rv != 0) {
        check(rv == MG_ECORRUPT);
        if (!have_cmd || size < 29)
            return 0;
        rv = meta__layout_decode(data, size - 29, &l); /* layout | command */
        if (rv != 0)
            return 0;
    } else {
        struct mg_buf out;
        mg_buf_init(&out);
        meta__layout_encode(&l, &out);
        check(out.len == size && memcmp(out.base, data, size) == 0);
        mg_buf_close(&out);
    }
    if (!have_cmd)
        return 0;
    d = l;
    int how = meta__layout_split(&d, &c);
    if (how != 0) {
        check(memcmp(&d, &l, sizeof(d)) == 0);
        return 0;
    }
    check(d.n == l.n + 1);
    struct mg_buf out;
    mg_buf_init(&out);
    meta__layout_encode(&d, &out);
    check(meta__layout_decode(out.base, out.len, &l) == 0); /* still a valid layout */
    mg_buf_close(&out);
    check(meta__layout_split(&d, &c) == 1); /* the same command again: a no-op */
    return 0;
}
