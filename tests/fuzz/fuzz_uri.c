/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: percent-decoding and S3 URI encoding, base64 and the
 * date parsers. Invariants: decode(encode(x)) == x; S3 canonicalization is
 * idempotent; base64 decode/encode/decode is stable.
 */
#include <stdlib.h>
#include <string.h>

#include "common/mem.h"
#include "common/sig_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mg_str in = {(const char *)data, size};
    struct mg_buf dec, enc, back;
    mg_buf_init(&dec);
    mg_buf_init(&enc);
    mg_buf_init(&back);
    if (mg_uri_decode(in, &dec) == 0) {
        for (int keep = 0; keep < 2; keep++) {
            enc.len = back.len = 0;
            mg_uri_encode((struct mg_str){dec.base, dec.len}, keep, &enc);
            if (mg_uri_decode((struct mg_str){enc.base, enc.len}, &back) != 0 ||
                back.len != dec.len || memcmp(back.base, dec.base, dec.len) != 0)
                abort();
        }
    }
    enc.len = back.len = 0;
    mg__uri_canon(in, 1, &enc);
    mg__uri_canon((struct mg_str){enc.base, enc.len}, 1, &back);
    if (back.len != enc.len || memcmp(back.base, enc.base, enc.len) != 0)
        abort();

    uint8_t raw[256], raw2[256];
    char b64[400];
    if (size <= 340) {
        long n = mg_base64_decode(in, raw, sizeof(raw));
        if (n >= 0) {
            size_t m = mg_base64_encode(raw, (size_t)n, b64);
            long n2 = mg_base64_decode((struct mg_str){b64, m}, raw2, sizeof(raw2));
            if (n2 != n || memcmp(raw, raw2, (size_t)n) != 0)
                abort();
        }
    }
    int64_t t;
    mg__time_parse_iso8601(in, &t);
    mg__time_parse_rfc1123(in, &t);
    mg_buf_close(&dec);
    mg_buf_close(&enc);
    mg_buf_close(&back);
    return 0;
}
