/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the internal RPC's frame parser (meta/rpc.c
 * mrpc_frame_parse), which every connection runs over the bytes it reads:
 * any byte string is walked frame by frame as a connection would, each step
 * must end in a whole frame, "need more" or a refusal (MG_ECORRUPT,
 * MG_EENTITYTOOLARGE), never a crash. A whole frame is exactly header +
 * length and inside the input, its header re-encodes to the same bytes; no
 * prefix of the bytes contradicts the answer over all of them (a connection
 * reads in pieces); a refusal is decided by the header alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "meta/rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

/* One step at p (n bytes); returns the frame length, 0 for more, or -1 for a refusal. */
static long step(const uint8_t *p, size_t n)
{
    struct mrpc_hdr h;
    size_t flen = 7;
    int rv = mrpc_frame_parse(p, n, &h, &flen);
    if (rv != 0) {
        check(rv == MG_ECORRUPT || rv == MG_EENTITYTOOLARGE);
        check(n >= MRPC_HDR_LEN);
        /* decided by the header: every longer input, and the header alone, agree */
        struct mrpc_hdr g;
        size_t f2;
        check(mrpc_frame_parse(p, MRPC_HDR_LEN, &g, &f2) == rv);
        return -1;
    }
    if (flen == 0) {
        check(n < MRPC_HDR_LEN || n < MRPC_HDR_LEN + (size_t)h.len);
        return 0;
    }
    check(flen == MRPC_HDR_LEN + (size_t)h.len && flen <= n);
    check(h.len <= MRPC_PAYLOAD_MAX);
    check(h.kind == MRPC_KIND_REQUEST || h.kind == MRPC_KIND_RESPONSE);
    check(h.status >= 0 && (h.kind == MRPC_KIND_RESPONSE || h.status == 0));
    unsigned char hb[MRPC_HDR_LEN];
    mrpc_hdr_encode(&h, hb);
    check(memcmp(hb, p, MRPC_HDR_LEN) == 0);
    /* every shorter read waits for more */
    size_t cuts[] = {0, 1, MRPC_HDR_LEN - 1, MRPC_HDR_LEN, flen - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        if (cuts[i] >= flen)
            continue;
        struct mrpc_hdr g;
        size_t f2 = 7;
        check(mrpc_frame_parse(p, cuts[i], &g, &f2) == 0 && f2 == 0);
    }
    return (long)flen;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        long n = step(data + off, size - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    return 0;
}
