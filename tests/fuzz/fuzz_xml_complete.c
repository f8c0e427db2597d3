/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the CompleteMultipartUpload body (gateway/xml.c,
 * gw_xml_parse_complete). The whole input is the body. Invariants besides
 * "no crash, no leak, no sanitizer report":
 *   - a rejection says why; an accepted list has 1..META_PART_MAX parts, each
 *     with a PartNumber >= 1 and a checksum string that is never NULL;
 *   - written back as <Part><PartNumber/><ETag>"etag"</ETag><ChecksumSHA256/>
 *     (gw_xml_elem escaping), the body parses to the same parts in the same
 *     order.
 * Seed corpus: tests/fuzz/corpus/xml_complete/ (replayed as a ctest, label fuzz).
 */
#include <stdint.h>
#include <stdio.h>

#include "tests/fuzz/fuzz_xml_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void emit(const struct meta_part *parts, size_t n, struct mg_buf *b)
{
    size_t i;
    char num[16];
    gw_xml_start(b, "CompleteMultipartUpload");
    for (i = 0; i < n; i++) {
        struct mg_buf etag;
        mg_buf_init(&etag);
        mg_buf_appendf(&etag, "\"%.*s\"", (int)parts[i].etag.len,
                       parts[i].etag.len ? parts[i].etag.base : "");
        gw_xml_start(b, "Part");
        snprintf(num, sizeof(num), "%u", parts[i].number);
        gw_xml_elem(b, "PartNumber", (struct mg_str){num, strlen(num)});
        gw_xml_elem(b, "ETag", fuzz_buf_str(&etag));
        if (parts[i].checksum.len > 0)
            gw_xml_elem(b, "ChecksumSHA256", parts[i].checksum);
        gw_xml_end(b, "Part");
        mg_buf_close(&etag);
    }
    gw_xml_end(b, "CompleteMultipartUpload");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_arena a;
    struct meta_part *parts, *back;
    size_t n, nback, i;
    char errmsg[256] = "";
    struct mg_buf b;
    int rv;

    mg_arena_init(&a);
    rv = gw_xml_parse_complete((struct mg_str){(const char *)data, size}, &a, &parts, &n, errmsg);
    fuzz_check_rejection(rv, errmsg);
    if (rv == 0) {
        if (n == 0 || n > META_PART_MAX)
            abort();
        for (i = 0; i < n; i++) {
            if (parts[i].number == 0 || parts[i].checksum.base == NULL)
                abort();
            fuzz_touch(parts[i].etag);
            fuzz_touch(parts[i].checksum);
        }
        mg_buf_init(&b);
        emit(parts, n, &b);
        if (gw_xml_parse_complete(fuzz_buf_str(&b), &a, &back, &nback, errmsg) != 0 ||
            nback != n)
            abort();
        for (i = 0; i < n; i++)
            if (back[i].number != parts[i].number || !fuzz_same(back[i].etag, parts[i].etag) ||
                !fuzz_same(back[i].checksum, parts[i].checksum))
                abort();
        mg_buf_close(&b);
    }
    mg_arena_close(&a);
    return 0;
}
