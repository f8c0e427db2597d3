/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: SigV4 Authorization header parsing and the canonical
 * request over arbitrary path, query and headers (input layout in
 * fuzz_split.h). Invariant: a request signed by mg_sigv4_sign_header parses
 * back and verifies, whatever its path, query and header bytes.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/err.h"
#include "common/mem.h"
#include "tests/fuzz/fuzz_split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Verification of a request the signer signed with SignedHeaders=host: 0, or
 * MG_EACCESSDENIED when it carries x-amz-* headers (unsigned). */
static int expected_rv(const struct mg_sig_req *req)
{
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].name.len > 6 &&
            strncasecmp(req->headers[i].name.base, "x-amz-", 6) == 0)
            return MG_EACCESSDENIED;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_req r;
    struct mg_sigv4_auth a;
    uint8_t key[32];
    fuzz_split(data, size, &r);

    if (mg_sigv4_parse_header(r.auth, &a) == 0) {
        a.amz_date = fuzz_str("20261130T160000Z");
        mg_sigv4_verify(&r.req, &a, fuzz_str(FUZZ_SECRET), fuzz_str(MG_EMPTY_SHA256), key);
        mg_sigv4_check_time(&a, 1796054400);
    }
    struct mg_arena arena;
    mg_arena_init(&arena);
    mg_sigv4_parse_request(&r.req, &arena, &a);
    mg_arena_close(&arena);

    if (mg_sig_req_header(&r.req, "host").base == NULL)
        return 0;
    struct mg_buf out;
    mg_buf_init(&out);
    mg_sigv4_sign_header(&r.req, fuzz_str(FUZZ_AK), fuzz_str(FUZZ_SECRET), fuzz_str("us-east-1"),
                         fuzz_str("20261130T160000Z"), fuzz_str("host"),
                         fuzz_str("UNSIGNED-PAYLOAD"), &out);
    if (mg_sigv4_parse_header((struct mg_str){out.base, out.len}, &a) != 0)
        abort();
    a.amz_date = fuzz_str("20261130T160000Z");
    if (mg_sigv4_verify(&r.req, &a, fuzz_str(FUZZ_SECRET), fuzz_str("UNSIGNED-PAYLOAD"), key) !=
        expected_rv(&r.req))
        abort();
    mg_buf_close(&out);
    return 0;
}
