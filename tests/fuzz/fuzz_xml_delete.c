/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the DeleteObjects body (gateway/xml.c,
 * gw_xml_parse_delete). The whole input is the body. Invariants besides
 * "no crash, no leak, no sanitizer report":
 *   - a rejection says why; an accepted request has 1..GW_DELETE_KEYS_MAX
 *     keys and quiet is 0 or 1;
 *   - written back as <Delete><Quiet/><Object><Key/></Object>... (gw_xml_elem
 *     escaping), the body parses to the same keys, byte for byte (keys are
 *     taken verbatim, spaces included), and the same quiet flag.
 * Seed corpus: tests/fuzz/corpus/xml_delete/ (replayed as a ctest, label fuzz).
 */
#include <stdint.h>

#include "tests/fuzz/fuzz_xml_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void emit(const struct gw_delete_req *d, struct mg_buf *b)
{
    size_t i;
    gw_xml_start(b, "Delete");
    gw_xml_elem(b, "Quiet", d->quiet ? (struct mg_str){"true", 4} : (struct mg_str){"false", 5});
    for (i = 0; i < d->nkeys; i++) {
        gw_xml_start(b, "Object");
        gw_xml_elem(b, "Key", d->keys[i]);
        gw_xml_end(b, "Object");
    }
    gw_xml_end(b, "Delete");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_arena a;
    struct gw_delete_req del, back;
    char errmsg[256] = "";
    struct mg_buf b;
    size_t i;
    int rv;

    mg_arena_init(&a);
    rv = gw_xml_parse_delete((struct mg_str){(const char *)data, size}, &a, &del, errmsg);
    fuzz_check_rejection(rv, errmsg);
    if (rv == 0) {
        if (del.nkeys == 0 || del.nkeys > GW_DELETE_KEYS_MAX || (del.quiet != 0 && del.quiet != 1))
            abort();
        for (i = 0; i < del.nkeys; i++)
            fuzz_touch(del.keys[i]);
        mg_buf_init(&b);
        emit(&del, &b);
        if (gw_xml_parse_delete(fuzz_buf_str(&b), &a, &back, errmsg) != 0 ||
            back.nkeys != del.nkeys || back.quiet != del.quiet)
            abort();
        for (i = 0; i < del.nkeys; i++)
            if (!fuzz_same(back.keys[i], del.keys[i]))
                abort();
        mg_buf_close(&b);
    }
    mg_arena_close(&a);
    return 0;
}
