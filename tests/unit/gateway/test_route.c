/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for gateway/route.c: the routing table over request shapes the
 * S3 API reference lists and the ones real clients send (every request line
 * of fixtures/clients/index.tsv, including `/b/?lifecycle=`, `x-id=PutObject`
 * and virtual-host Host headers), key decoding, and the errors for unknown
 * or unsupported requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/core.h"

#define S(lit) ((struct mg_str){(lit), sizeof(lit) - 1})

static int route(const char *method, const char *host, const char *target, const char *domain,
                 int copy, struct mg_arena *a, struct gw__route_out *out)
{
    struct gw__route_in in = {
        .method = {method, strlen(method)},
        .authority = {host, strlen(host)},
        .target = {target, strlen(target)},
        .domain = {domain, strlen(domain)},
        .has_copy_source = copy,
    };
    return gw__route_parse(&in, a, out);
}

static void expect_op(const char *method, const char *target, int copy, enum gw_op op)
{
    struct mg_arena a;
    mg_arena_init(&a);
    struct gw__route_out out;
    int rv = route(method, "127.0.0.1:9000", target, "", copy, &a, &out);
    if (rv != 0 || out.op != op)
        fail_msg("%s %s: rv=%d op=%s, want %s", method, target, rv, gw_op_label(out.op),
                 gw_op_label(op));
    mg_arena_close(&a);
}

static void expect_err(const char *method, const char *target, int want)
{
    struct mg_arena a;
    mg_arena_init(&a);
    struct gw__route_out out;
    int rv = route(method, "127.0.0.1:9000", target, "", 0, &a, &out);
    if (rv != want)
        fail_msg("%s %s: rv=%s, want %s", method, target, mg_err_name(rv), mg_err_name(want));
    mg_arena_close(&a);
}

static void test_service_and_bucket(void **state)
{
    (void)state;
    expect_op("GET", "/", 0, GW_OP_LIST_BUCKETS);
    expect_op("PUT", "/b", 0, GW_OP_CREATE_BUCKET);
    expect_op("PUT", "/b/", 0, GW_OP_CREATE_BUCKET);
    expect_op("HEAD", "/b", 0, GW_OP_HEAD_BUCKET);
    expect_op("DELETE", "/b", 0, GW_OP_DELETE_BUCKET);
    expect_op("GET", "/b", 0, GW_OP_LIST_OBJECTS);
    expect_op("GET", "/b?prefix=a&delimiter=%2F", 0, GW_OP_LIST_OBJECTS);
    expect_op("GET", "/b?list-type=2", 0, GW_OP_LIST_OBJECTS_V2);
    expect_op("GET", "/b/?list-type=2&encoding-type=url&fetch-owner=true", 0,
              GW_OP_LIST_OBJECTS_V2);
    expect_op("GET", "/b?list-type=1", 0, GW_OP_LIST_OBJECTS);
    expect_op("GET", "/b?location", 0, GW_OP_GET_BUCKET_LOCATION);
    expect_op("GET", "/b?uploads", 0, GW_OP_LIST_MULTIPART_UPLOADS);
    expect_op("POST", "/b?delete", 0, GW_OP_DELETE_OBJECTS);
    expect_op("POST", "/b/?delete=", 0, GW_OP_DELETE_OBJECTS);
    expect_op("GET", "/b?tagging", 0, GW_OP_GET_BUCKET_TAGGING);
    expect_op("PUT", "/b?tagging", 0, GW_OP_PUT_BUCKET_TAGGING);
    expect_op("DELETE", "/b?tagging", 0, GW_OP_DELETE_BUCKET_TAGGING);
    expect_op("GET", "/b?acl", 0, GW_OP_GET_BUCKET_ACL);
    expect_op("PUT", "/b?acl", 0, GW_OP_PUT_BUCKET_ACL);
    expect_op("GET", "/b?lifecycle", 0, GW_OP_GET_BUCKET_LIFECYCLE);
    expect_op("GET", "/b/?lifecycle=", 0, GW_OP_GET_BUCKET_LIFECYCLE);
    expect_op("PUT", "/b/?lifecycle", 0, GW_OP_PUT_BUCKET_LIFECYCLE);
    expect_op("DELETE", "/b?lifecycle", 0, GW_OP_DELETE_BUCKET_LIFECYCLE);
    expect_op("GET", "/b?versioning", 0, GW_OP_GET_BUCKET_VERSIONING);
    expect_op("GET", "/b?policy", 0, GW_OP_GET_BUCKET_POLICY);
    expect_op("GET", "/b?cors", 0, GW_OP_GET_BUCKET_CORS);
}

static void test_object(void **state)
{
    (void)state;
    expect_op("PUT", "/b/k", 0, GW_OP_PUT_OBJECT);
    expect_op("PUT", "/b/k?x-id=PutObject", 0, GW_OP_PUT_OBJECT);
    expect_op("PUT", "/b/k", 1, GW_OP_COPY_OBJECT);
    expect_op("PUT", "/b/k?x-id=CopyObject", 1, GW_OP_COPY_OBJECT);
    expect_op("GET", "/b/k", 0, GW_OP_GET_OBJECT);
    expect_op("GET", "/b/k?partNumber=1", 0, GW_OP_GET_OBJECT);
    expect_op("GET", "/b/k?response-content-type=text%2Fplain", 0, GW_OP_GET_OBJECT);
    expect_op("HEAD", "/b/k", 0, GW_OP_HEAD_OBJECT);
    expect_op("DELETE", "/b/k", 0, GW_OP_DELETE_OBJECT);
    expect_op("GET", "/b/k?tagging", 0, GW_OP_GET_OBJECT_TAGGING);
    expect_op("PUT", "/b/k?tagging", 0, GW_OP_PUT_OBJECT_TAGGING);
    expect_op("DELETE", "/b/k?tagging", 0, GW_OP_DELETE_OBJECT_TAGGING);
    expect_op("GET", "/b/k?acl", 0, GW_OP_GET_OBJECT_ACL);
    expect_op("PUT", "/b/k?acl", 0, GW_OP_PUT_OBJECT_ACL);
    expect_op("GET", "/b/k?attributes", 0, GW_OP_GET_OBJECT_ATTRIBUTES);
    expect_op("POST", "/b/k?uploads", 0, GW_OP_CREATE_MULTIPART_UPLOAD);
    expect_op("POST", "/b/k?uploads=", 0, GW_OP_CREATE_MULTIPART_UPLOAD);
    expect_op("PUT", "/b/k?partNumber=1&uploadId=u", 0, GW_OP_UPLOAD_PART);
    expect_op("PUT", "/b/k?uploadId=u&partNumber=3", 0, GW_OP_UPLOAD_PART);
    expect_op("PUT", "/b/k?partNumber=1&uploadId=u", 1, GW_OP_UPLOAD_PART_COPY);
    expect_op("POST", "/b/k?uploadId=u", 0, GW_OP_COMPLETE_MULTIPART_UPLOAD);
    expect_op("DELETE", "/b/k?uploadId=u", 0, GW_OP_ABORT_MULTIPART_UPLOAD);
    expect_op("GET", "/b/k?uploadId=u&max-parts=2", 0, GW_OP_LIST_PARTS);
    expect_op("GET", "/b/dir/", 0, GW_OP_GET_OBJECT);
}

static void test_errors(void **state)
{
    (void)state;
    expect_err("PATCH", "/b/k", MG_EMETHODNOTALLOWED);
    expect_err("OPTIONS", "/b", MG_EMETHODNOTALLOWED);
    expect_err("PUT", "/", MG_EMETHODNOTALLOWED);
    expect_err("DELETE", "/", MG_EMETHODNOTALLOWED);
    expect_err("POST", "/b/k", MG_EMETHODNOTALLOWED);
    expect_err("POST", "/b", MG_ENOTIMPLEMENTED);
    expect_err("GET", "/b?website", MG_ENOTIMPLEMENTED);
    expect_err("GET", "/b?versions", MG_ENOTIMPLEMENTED);
    expect_err("PUT", "/b?versioning", MG_ENOTIMPLEMENTED);
    expect_err("PUT", "/b?policy", MG_ENOTIMPLEMENTED);
    expect_err("DELETE", "/b?cors", MG_ENOTIMPLEMENTED);
    expect_err("GET", "/b/k?torrent", MG_ENOTIMPLEMENTED);
    expect_err("PUT", "/b/k?retention", MG_ENOTIMPLEMENTED);
    expect_err("POST", "/b/k?restore", MG_ENOTIMPLEMENTED);
    expect_err("PUT", "/b/k?partNumber=1", MG_EINVALIDARGUMENT);
    expect_err("GET", "/b/k%zz", MG_EINVALIDARGUMENT);
    expect_err("GET", "/b/k%0", MG_EINVALIDARGUMENT);
    expect_err("GET", "/b/k%00x", MG_EINVALIDARGUMENT);
    expect_err("GET", "b/k", MG_EINVALIDARGUMENT);
    expect_err("GET", "", MG_EINVALIDARGUMENT);
    expect_err("GET", "//k", MG_EINVALIDBUCKETNAME);
    char big[1200];
    strcpy(big, "/b/");
    memset(big + 3, 'k', 1025);
    big[3 + 1025] = '\0';
    expect_err("GET", big, MG_EKEYTOOLONG);
    big[3 + 1024] = '\0';
    expect_op("GET", big, 0, GW_OP_GET_OBJECT);
}

static void test_decode(void **state)
{
    (void)state;
    struct mg_arena a;
    mg_arena_init(&a);
    struct gw__route_out o;
    assert_int_equal(
        route("PUT", "h", "/example-bucket/dir/hello%20world%2B%26%3D%C3%A9~.txt", "", 0, &a, &o),
        0);
    assert_int_equal(o.bucket.len, 14);
    assert_memory_equal(o.bucket.base, "example-bucket", 14);
    const char *want = "dir/hello world+&=\xc3\xa9~.txt";
    assert_int_equal(o.key.len, strlen(want));
    assert_memory_equal(o.key.base, want, o.key.len);
    /* '+' in a path is a plus; in a query value it is a space. */
    assert_int_equal(route("GET", "h", "/b/a+b?prefix=x+y%2Bz&marker", "", 0, &a, &o), 0);
    assert_int_equal(o.key.len, 3);
    assert_memory_equal(o.key.base, "a+b", 3);
    struct mg_str v;
    assert_true(gw__qparam_get(o.params, o.nparams, "prefix", &v));
    assert_int_equal(v.len, 5);
    assert_memory_equal(v.base, "x y+z", 5);
    assert_true(gw__qparam_get(o.params, o.nparams, "marker", &v));
    assert_int_equal(v.len, 0);
    assert_false(gw__qparam_get(o.params, o.nparams, "nope", &v));
    assert_int_equal(o.query.len, strlen("prefix=x+y%2Bz&marker"));
    assert_int_equal(o.path.len, 6);
    /* Parameter names are not decoded: SigV2 signs sub-resources by their raw name, so an
     * escaped "tagging" or "response-content-type" must select nothing. */
    assert_int_equal(route("GET", "h", "/b/k?%74agging&%72esponse-content-type=x", "", 0, &a, &o),
                     0);
    assert_int_equal(o.op, GW_OP_GET_OBJECT);
    assert_false(gw__qparam_get(o.params, o.nparams, "response-content-type", &v));
    assert_int_equal(route("GET", "h", "/b?%61cl", "", 0, &a, &o), 0);
    assert_int_equal(o.op, GW_OP_LIST_OBJECTS);
    /* Keys keep slashes, empty segments and trailing slashes. */
    assert_int_equal(route("PUT", "h", "/b//a//b/", "", 0, &a, &o), 0);
    assert_int_equal(o.key.len, 6);
    assert_memory_equal(o.key.base, "/a//b/", 6);
    mg_arena_close(&a);
}

static void test_vhost(void **state)
{
    (void)state;
    struct mg_arena a;
    mg_arena_init(&a);
    struct gw__route_out o;
    assert_int_equal(
        route("GET", "example-bucket.s3.local:9000", "/?list-type=2", "s3.local", 0, &a, &o), 0);
    assert_int_equal(o.op, GW_OP_LIST_OBJECTS_V2);
    assert_true(o.vhost);
    assert_int_equal(o.bucket.len, 14);
    assert_int_equal(o.key.len, 0);
    assert_int_equal(route("PUT", "Example-Bucket.S3.Local", "/dir/vhost.txt?x-id=PutObject",
                           "s3.local", 0, &a, &o),
                     0);
    assert_int_equal(o.op, GW_OP_PUT_OBJECT);
    assert_memory_equal(o.bucket.base, "Example-Bucket", 14);
    assert_memory_equal(o.key.base, "dir/vhost.txt", 13);
    /* The domain itself, an IP, or no domain configured: path style. */
    assert_int_equal(route("GET", "s3.local:9000", "/b/k", "s3.local", 0, &a, &o), 0);
    assert_false(o.vhost);
    assert_int_equal(o.op, GW_OP_GET_OBJECT);
    assert_int_equal(route("GET", "b.s3.local", "/b/k", "", 0, &a, &o), 0);
    assert_false(o.vhost);
    assert_memory_equal(o.bucket.base, "b", 1);
    assert_int_equal(route("GET", "[::1]:9000", "/b", "s3.local", 0, &a, &o), 0);
    assert_false(o.vhost);
    assert_int_equal(route("GET", "xs3.local", "/b", "s3.local", 0, &a, &o), 0);
    assert_false(o.vhost);
    /* A dotted bucket name in a virtual host. */
    assert_int_equal(route("HEAD", "my.dotted.bucket.s3.local", "/", "s3.local", 0, &a, &o), 0);
    assert_int_equal(o.op, GW_OP_HEAD_BUCKET);
    assert_int_equal(o.bucket.len, strlen("my.dotted.bucket"));
    mg_arena_close(&a);
}

static const char *fixtures_dir(void)
{
    const char *d = getenv("MG_FIXTURES_DIR");
    return d != NULL ? d : MG_FIXTURES_DIR_DEFAULT;
}

/* Every request line the captured clients sent routes to the operation the capture names. */
static void test_fixture_index(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof(path), "%s/index.tsv", fixtures_dir());
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        print_message("fixtures not found at %s; skipped\n", path);
        skip();
    }
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char *col[20];
        int nc = 0;
        for (char *p = line, *tok; nc < 20 && (tok = strsep(&p, "\t\n")) != NULL;)
            col[nc++] = tok;
        if (nc < 15 || strcmp(col[0], "file") == 0)
            continue;
        const char *op = col[2], *method = col[3], *target = col[4], *host = col[14];
        struct mg_arena a;
        mg_arena_init(&a);
        struct gw__route_out o;
        int copy = strcmp(op, "CopyObject") == 0;
        int rv = route(method, host, target, "s3.local", copy, &a, &o);
        if (rv != 0 || strcmp(gw_op_label(o.op), op) != 0)
            fail_msg("%s: %s %s -> rv=%d %s, want %s", col[0], method, target, rv,
                     gw_op_label(o.op), op);
        assert_true(o.bucket.len > 0 || o.op == GW_OP_LIST_BUCKETS);
        mg_arena_close(&a);
        n++;
    }
    fclose(f);
    assert_true(n >= 296);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_service_and_bucket),
        cmocka_unit_test(test_object),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_vhost),
        cmocka_unit_test(test_fixture_index),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
