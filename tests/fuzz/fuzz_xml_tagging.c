/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the Tagging body of PutObjectTagging and
 * PutBucketTagging (gateway/xml.c, gw_xml_parse_tagging). The whole input is
 * the body. Invariants besides "no crash, no leak, no sanitizer report":
 *   - a rejection says why; accepted tags pass gw_tags_validate again;
 *   - the object limit is the bucket limit narrowed: a body accepted with
 *     GW_OBJECT_TAGS_MAX is accepted with GW_BUCKET_TAGS_MAX, and one accepted
 *     with the bucket limit and at most 10 tags is accepted with the object one;
 *   - written back as <Tagging><TagSet><Tag><Key/><Value/></Tag>... (gw_xml_elem
 *     escaping) the body parses to the same tags, in order;
 *   - the same tags sent as an x-amz-tagging header (k=v&..., mg_uri_encode)
 *     parse to the same tags through gw_tagging_query_parse.
 * Seed corpus: tests/fuzz/corpus/xml_tagging/ (replayed as a ctest, label fuzz).
 */
#include <stdint.h>

#include "common/sig.h"
#include "tests/fuzz/fuzz_xml_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void emit_xml(const struct meta_kv *tags, size_t n, struct mg_buf *b)
{
    size_t i;
    gw_xml_start(b, "Tagging");
    gw_xml_start(b, "TagSet");
    for (i = 0; i < n; i++) {
        gw_xml_start(b, "Tag");
        gw_xml_elem(b, "Key", tags[i].k);
        gw_xml_elem(b, "Value", tags[i].v);
        gw_xml_end(b, "Tag");
    }
    gw_xml_end(b, "TagSet");
    gw_xml_end(b, "Tagging");
}

static void emit_query(const struct meta_kv *tags, size_t n, struct mg_buf *b)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (i > 0)
            mg_buf_append(b, "&", 1);
        mg_uri_encode(tags[i].k, 0, b);
        mg_buf_append(b, "=", 1);
        mg_uri_encode(tags[i].v, 0, b);
    }
}

static void same_tags(const struct meta_kv *x, size_t nx, const struct meta_kv *y, size_t ny)
{
    size_t i;
    if (nx != ny)
        abort();
    for (i = 0; i < nx; i++)
        if (!fuzz_same(x[i].k, y[i].k) || !fuzz_same(x[i].v, y[i].v))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_str body = {(const char *)data, size};
    struct mg_arena a;
    struct meta_kv *tags, *otags, *back;
    size_t n, on, nback, i;
    char errmsg[256] = "";
    struct mg_buf b;
    int rv, orv;

    mg_arena_init(&a);
    rv = gw_xml_parse_tagging(body, GW_BUCKET_TAGS_MAX, &a, &tags, &n, errmsg);
    fuzz_check_rejection(rv, errmsg);
    errmsg[0] = '\0';
    orv = gw_xml_parse_tagging(body, GW_OBJECT_TAGS_MAX, &a, &otags, &on, errmsg);
    fuzz_check_rejection(orv, errmsg);
    if (orv == 0 && (rv != 0 || on != n))
        abort();
    if (rv == 0 && n <= GW_OBJECT_TAGS_MAX && orv != 0)
        abort();
    if (rv == 0) {
        if (n > GW_BUCKET_TAGS_MAX || gw_tags_validate(tags, n, GW_BUCKET_TAGS_MAX, NULL) != 0)
            abort();
        for (i = 0; i < n; i++)
            fuzz_touch(tags[i].k), fuzz_touch(tags[i].v);
        mg_buf_init(&b);
        emit_xml(tags, n, &b);
        if (gw_xml_parse_tagging(fuzz_buf_str(&b), GW_BUCKET_TAGS_MAX, &a, &back, &nback,
                                 errmsg) != 0)
            abort();
        same_tags(tags, n, back, nback);
        b.len = 0;
        emit_query(tags, n, &b);
        if (gw_tagging_query_parse(fuzz_buf_str(&b), GW_BUCKET_TAGS_MAX, &a, &back, &nback,
                                   errmsg) != 0)
            abort();
        same_tags(tags, n, back, nback);
        mg_buf_close(&b);
    }
    mg_arena_close(&a);
    return 0;
}
