/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the S3 request-body XML parsers (gateway/xml.c):
 * CompleteMultipartUpload, Delete, Tagging, AccessControlPolicy,
 * CreateBucketConfiguration and the lifecycle well-formedness check. The first
 * input byte picks the parser, the rest is the body. Every parser must return
 * 0 or an mg_err code without crashing, leaking or reading out of bounds;
 * results are walked so a half-initialised field would show under ASan/UBSan.
 * Seed corpus: tests/fuzz/corpus/xml/ (replayed as a plain ctest, label fuzz).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t touch(struct mg_str s)
{
    size_t i, h = 0;
    for (i = 0; i < s.len; i++)
        h += (unsigned char)s.base[i];
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_arena a;
    struct mg_str body, loc;
    struct meta_part *parts;
    struct gw_delete_req del;
    struct meta_kv *tags;
    enum meta_acl acl;
    char errmsg[256];
    size_t n, i;
    volatile size_t sink = 0;

    if (size == 0)
        return 0;
    body = (struct mg_str){(const char *)data + 1, size - 1};
    mg_arena_init(&a);
    errmsg[0] = '\0';
    switch (data[0] % 7) {
    case 0:
        if (gw_xml_parse_complete(body, &a, &parts, &n, errmsg) == 0)
            for (i = 0; i < n; i++)
                sink += parts[i].number + touch(parts[i].etag) + touch(parts[i].checksum);
        break;
    case 1:
        if (gw_xml_parse_delete(body, &a, &del, errmsg) == 0)
            for (i = 0; i < del.nkeys; i++)
                sink += touch(del.keys[i]) + (size_t)del.quiet;
        break;
    case 2:
        if (gw_xml_parse_tagging(body, GW_BUCKET_TAGS_MAX, &a, &tags, &n, errmsg) == 0)
            for (i = 0; i < n; i++)
                sink += touch(tags[i].k) + touch(tags[i].v);
        break;
    case 3:
        if (gw_xml_parse_acl(body, (struct mg_str){"owner", 5}, &a, &acl, errmsg) == 0)
            sink += (size_t)acl;
        break;
    case 4:
        if (gw_xml_parse_location(body, &a, &loc, errmsg) == 0)
            sink += touch(loc);
        break;
    case 5:
        sink += (size_t)gw_xml_check(body, "LifecycleConfiguration", &a, errmsg);
        break;
    default:
        if (gw_tagging_query_parse(body, GW_OBJECT_TAGS_MAX, &a, &tags, &n, errmsg) == 0)
            for (i = 0; i < n; i++)
                sink += touch(tags[i].k) + touch(tags[i].v);
        break;
    }
    sink += strlen(errmsg);
    (void)sink;
    mg_arena_close(&a);
    return 0;
}
