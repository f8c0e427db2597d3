/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the aws-chunked decoder. Byte 0 picks the mode, byte 1
 * the feed size (0: all at once), the rest is the body. Invariants: the
 * bytes delivered equal decoded_total; the result of a body does not depend
 * on how it is split; the trailer strings stay NUL-terminated.
 */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/sig.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define SEED "72bb640645404096dd85a4374a98c9df8a6cb1eae11df599f188d52b652530d8"

static int on_data(void *ctx, const void *p, size_t n)
{
    *(uint64_t *)ctx += n;
    return 0;
}

static int run(enum mg_chunked_mode mode, const uint8_t *body, size_t len, size_t step,
               uint64_t *total)
{
    struct mg_chunked c;
    memset(&c, 0, sizeof(c));
    c.mode = mode;
    struct mg_str sec = {SECRET, sizeof(SECRET) - 1}, date = {"20261130", 8},
                  region = {"us-east-1", 9}, service = {"s3", 2};
    mg_sigv4_signing_key(sec, date, region, service, c.key);
    memcpy(c.prev_sig, SEED, 65);
    memcpy(c.amz_date, "20261130T161350Z", 17);
    strcpy(c.scope, "20261130/us-east-1/s3/aws4_request");
    c.on_data = on_data;
    c.ctx = total;
    *total = 0;
    mg_chunked_init(&c);
    int rv = 0;
    for (size_t off = 0; off < len && rv == 0; off += step)
        rv = mg_chunked_feed(&c, body + off, len - off < step ? len - off : step);
    if (rv == 0)
        rv = mg_chunked_finish(&c);
    if (c.decoded_total != *total || memchr(c.trailer_name, 0, sizeof(c.trailer_name)) == NULL ||
        memchr(c.trailer_value, 0, sizeof(c.trailer_value)) == NULL)
        abort();
    mg_chunked_close(&c);
    return rv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    enum mg_chunked_mode mode = (enum mg_chunked_mode)(data[0] % 3);
    size_t step = data[1] ? data[1] : size;
    uint64_t t1, t2;
    int rv1 = run(mode, data + 2, size - 2, step, &t1);
    int rv2 = run(mode, data + 2, size - 2, size, &t2);
    if (rv1 != rv2 || (rv1 == 0 && t1 != t2))
        abort();
    return 0;
}
