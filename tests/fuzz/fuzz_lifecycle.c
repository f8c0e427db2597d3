/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for lifecycle/: the PutBucketLifecycleConfiguration parser
 * and the binary form's decoder. The first input byte picks the path:
 *   even: the rest is an XML body. It parses or fails with one of the
 *         documented codes; a configuration that parses compiles, loads back
 *         (MG_OK) and re-compiles to the same bytes, and its Get XML parses
 *         back to the same bytes too.
 *   odd:  the rest is a binary form whose CRC32C trailer is fixed up first, so
 *         the fuzzer reaches the content checks behind the checksum. It loads
 *         or is MG_ECORRUPT; a form that loads re-compiles to exactly the input,
 *         and its Get XML parses back to the same configuration.
 * Every configuration is also evaluated on one object and one upload.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle/lifecycle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static void compile_eq(const struct lc_config *c, const void *bytes, size_t len)
{
    struct mg_buf b;
    mg_buf_init(&b);
    lc_config_compile(c, &b);
    check(b.len == len && memcmp(b.base, bytes, len) == 0);
    mg_buf_close(&b);
}

/* Get's XML of c parses back to a configuration with the binary form bytes. */
static void xml_roundtrip(const struct lc_config *c, const struct mg_buf *bytes,
                          struct mg_arena *a)
{
    struct mg_buf x;
    struct lc_config d;
    mg_buf_init(&x);
    lc_config_to_xml(c, &x);
    check(lc_config_parse((struct mg_str){x.base, x.len}, a, &d, NULL) == 0);
    compile_eq(&d, bytes->base, bytes->len);
    mg_buf_close(&x);
}

static void evaluate(const struct lc_config *c)
{
    struct lc_tag tags[] = {{{"k", 1}, {"v", 1}}, {{"a", 1}, {"1", 1}}};
    struct lc_object o = {{"logs/a", 6}, 100, tags, 2, 1389781800000LL};
    const struct lc_rule *r;
    int64_t due;
    struct mg_buf h;
    mg_buf_init(&h);
    if (lc_config_expiry(c, &o, 5, &due, &r))
        check(lc_expiration_header(due, r->id, &h) == 0 || due < 0 || due > 253402300799999LL);
    if (lc_config_abort_due(c, o.key, o.mtime_ms, LC_DAY_SECONDS, &due, &r))
        check(due >= o.mtime_ms);
    mg_buf_close(&h);
}

static void fuzz_xml(const uint8_t *p, size_t n, struct mg_arena *a)
{
    struct lc_config c, d;
    struct mg_buf b;
    char errmsg[LC_ERRMSG_LEN];
    int rv = lc_config_parse((struct mg_str){(const char *)p, n}, a, &c, errmsg);
    if (rv != 0) {
        check(rv == MG_EMALFORMEDXML || rv == MG_EINVALIDARGUMENT || rv == MG_EINVALIDREQUEST ||
              rv == MG_EINVALIDTAG || rv == MG_ENOTIMPLEMENTED);
        check(c.nrules == 0);
        return;
    }
    check(c.nrules >= 1 && c.nrules <= LC_RULES_MAX);
    mg_buf_init(&b);
    lc_config_compile(&c, &b);
    check(lc_config_load(b.base, b.len, a, &d) == 0);
    compile_eq(&d, b.base, b.len);
    xml_roundtrip(&c, &b, a);
    evaluate(&c);
    mg_buf_close(&b);
}

static void fuzz_binary(const uint8_t *p, size_t n, struct mg_arena *a)
{
    struct lc_config c;
    struct mg_buf b;
    struct mg_cksum k;
    uint8_t d[32];
    int rv;
    mg_buf_init(&b);
    mg_buf_append(&b, p, n);
    if (n >= 4) {
        mg_cksum_init(&k, MG_CKSUM_CRC32C);
        mg_cksum_update(&k, b.base, n - 4);
        mg_cksum_final(&k, d);
        mg_cksum_close(&k);
        for (int i = 0; i < 4; i++) /* the CRC's value, little-endian */
            b.base[n - 4 + i] = (char)d[3 - i];
    }
    rv = lc_config_load(b.base, b.len, a, &c);
    check(rv == 0 || rv == MG_ECORRUPT);
    if (rv == 0) {
        compile_eq(&c, b.base, b.len);
        xml_roundtrip(&c, &b, a);
        evaluate(&c);
    } else {
        check(c.nrules == 0);
    }
    mg_buf_close(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_arena a;
    if (size < 1)
        return 0;
    mg_arena_init(&a);
    if ((data[0] & 1) == 0)
        fuzz_xml(data + 1, size - 1, &a);
    else
        fuzz_binary(data + 1, size - 1, &a);
    mg_arena_close(&a);
    return 0;
}
