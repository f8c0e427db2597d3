/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what engine/rados.c decodes from RADOS (engine/rados_internal.h):
 * byte 0 picks the decoder, the rest is its input.
 *  - 'H' (or any even byte): the blob header xattr "mg.h". Any bytes must decode or be
 *    refused, never crash; a header that decodes names a valid RADOS ref (flag set, stripe
 *    shift 16..22) and re-encodes to exactly the same bytes.
 *  - odd byte: an object name from a pool listing, as a C string. A name that parses is
 *    the canonical "mg.<16 hex>.<16 hex>.<8 hex>" of what it parsed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/rados.h"
#include "engine/rados_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static void header(const uint8_t *p, size_t n)
{
    struct eng_blob_ref ref;
    int64_t ms;
    if (eng__rados_hdr_decode(p, n, &ref, &ms) != 0)
        return;
    check(n == ENG__RADOS_HDR_BYTES && eng_rados_ref_is(&ref));
    uint32_t shift = ref.flags & 0xffu;
    check(shift >= 16 && shift <= 22 && (ref.flags & ~(ENG_RADOS_REF_FLAG | 0xffu)) == 0);
    unsigned char again[ENG__RADOS_HDR_BYTES];
    eng__rados_hdr_encode(again, &ref, ms);
    check(memcmp(again, p, n) == 0);
}

static void name(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = '\0';
    uint64_t seg, off;
    uint32_t idx;
    if (eng__rados_name_parse(s, &seg, &off, &idx) == 0) {
        char again[ENG__RADOS_NAME_MAX];
        eng__rados_name(again, seg, off, idx);
        check(strcmp(again, s) == 0);
    }
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if ((data[0] & 1) == 0)
        header(data + 1, size - 1);
    else
        name(data + 1, size - 1);
    return 0;
}
