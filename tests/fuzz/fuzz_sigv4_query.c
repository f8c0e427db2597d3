/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: presigned SigV4 query parsing (X-Amz-* parameters,
 * percent-decoding into the arena) and verification (input layout in
 * fuzz_split.h; line 3 is the query). Invariant: presigning any query that
 * holds no X-Amz- parameter of its own yields one that parses and verifies.
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
    struct mg_arena arena;
    uint8_t key[32];
    fuzz_split(data, size, &r);
    mg_arena_init(&arena);
    if (mg_sigv4_parse_query(r.req.query, &arena, &a) == 0) {
        if (a.expires_s < 0 || a.expires_s > 604800 || !a.presigned)
            abort();
        mg_sigv4_verify(&r.req, &a, fuzz_str(FUZZ_SECRET), fuzz_str("UNSIGNED-PAYLOAD"), key);
        mg_sigv4_check_time(&a, 1796054400);
    }
    if (mg_sig_req_header(&r.req, "host").base != NULL &&
        memmem(r.req.query.base, r.req.query.len, "X-Amz-", 6) == NULL) {
        struct mg_buf q;
        mg_buf_init(&q);
        mg_sigv4_presign(&r.req, fuzz_str(FUZZ_AK), fuzz_str(FUZZ_SECRET), fuzz_str("us-east-1"),
                         fuzz_str("20261130T160000Z"), 3600, &q);
        struct mg_sig_req signed_req = r.req;
        signed_req.query = (struct mg_str){q.base, q.len};
        if (mg_sigv4_parse_query(signed_req.query, &arena, &a) != 0)
            abort();
        if (mg_sigv4_verify(&signed_req, &a, fuzz_str(FUZZ_SECRET), fuzz_str("UNSIGNED-PAYLOAD"),
                            key) != expected_rv(&signed_req))
            abort();
        if (mg_sigv4_check_time(&a, 1796054400 + 3600) != 0)
            abort();
        mg_buf_close(&q);
    }
    mg_arena_close(&arena);
    return 0;
}
