/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: SigV2 header ("AWS AKID:sig") and query (AWSAccessKeyId,
 * Signature, Expires) parsing, the string to sign (sub-resources, x-amz-*
 * headers) and verification (input layout in fuzz_split.h). Invariant: what
 * mg_sigv2_sign produces verifies.
 */
#include "common/sig_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "tests/fuzz/fuzz_split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_req r;
    struct mg_sigv2_auth a;
    struct mg_arena arena;
    fuzz_split(data, size, &r);
    if (size & 1)
        r.req.v2_bucket = fuzz_str("example-bucket");
    mg_arena_init(&arena);
    if (mg_sigv2_parse_header(r.auth, &a) == 0) {
        mg_sigv2_verify(&r.req, &a, fuzz_str(FUZZ_SECRET));
        mg_sigv2_check_time(&r.req, &a, 1796054400);
    }
    if (mg_sigv2_parse_query(r.req.query, &arena, &a) == 0) {
        mg_sigv2_verify(&r.req, &a, fuzz_str(FUZZ_SECRET));
        mg_sigv2_check_time(&r.req, &a, 1796054400);
    }
    mg_arena_close(&arena);

    /* header form round trip: the Date line is empty when x-amz-date is sent */
    struct mg_str date = fuzz_str("");
    if (mg_sig_req_header(&r.req, "x-amz-date").base == NULL)
        date = mg__trim(mg_sig_req_header(&r.req, "date"));
    char sig[64];
    mg_sigv2_sign(&r.req, fuzz_str(FUZZ_SECRET), date, sig);
    struct mg_sigv2_auth mine = {fuzz_str(FUZZ_AK), fuzz_str(sig), -1, 0};
    if (mg_sigv2_verify(&r.req, &mine, fuzz_str(FUZZ_SECRET)) != 0)
        abort();
    return 0;
}
