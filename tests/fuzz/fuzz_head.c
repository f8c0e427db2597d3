/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the request-head parser of the "body before auth" check
 * (gateway/head.c: gw__head_parse, gw__head_framing, gw__head_unframe), which server.c runs on
 * bytes straight from the network. The input is the connection's buffer. Each call gets its
 * own heap copy of exactly the bytes it may read, so ASan catches a read past them. Checks:
 * a complete head's length is within the input (and GW_HEAD_MAX) and ends with an empty line
 * (CRLFCRLF when the input has no bare LF); method, target, header names and values point
 * inside the head, names without ':' or blanks, values without outer blanks; a refusal or an
 * incomplete head only where the parser says so; the answer over any prefix (what an earlier
 * read saw) never contradicts the answer over the whole; a pipelined second request parses
 * from where the first head ends; unframing leaves a head of the same shape with no body; the
 * header-section size server.c refuses on (gw__head_section) stays inside what arrived.
 * And against h2o's own parser (picohttpparser's phr_parse_request, exported by libh2o, on
 * the bytes lib/http1.c gives it): every head h2o would accept and serve is judged, with the
 * same length, headers and body framing; otherwise its body would be read before auth.
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <h2o.h>
#include <h2o/string_.h>

#include "gateway/head.h"

/* picohttpparser as libh2o 2.2.5 exports it (its header is not installed). */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len,
                      const char **path, size_t *path_len, int *minor_version,
                      struct phr_header *headers, size_t *num_headers, size_t last_len);

static int parse_copy(const uint8_t *data, size_t size, char **buf, struct gw__head *hd)
{
    *buf = malloc(size != 0 ? size : 1);
    assert(*buf != NULL);
    if (size != 0)
        memcpy(*buf, data, size);
    return gw__head_parse(*buf, size, hd);
}

static int within(h2o_iovec_t v, const char *lo, const char *hi)
{
    return v.base >= lo && v.base + v.len <= hi;
}

static int blank(char c)
{
    return c == ' ' || c == '\t';
}

static void check_head(const char *buf, size_t size, const struct gw__head *hd)
{
    assert(hd->len >= 2 && hd->len <= size && hd->len <= GW_HEAD_MAX);
    const char *end = buf + hd->len;
    assert(end[-1] == '\n');
    assert(end[-2] == '\n' || (hd->len >= 3 && end[-2] == '\r' && end[-3] == '\n'));
    int bare_lf = 0;
    for (size_t i = 0; i < hd->len; i++)
        bare_lf |= buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r');
    if (!bare_lf)
        assert(hd->len >= 4 && memcmp(end - 4, "\r\n\r\n", 4) == 0);
    assert(within(hd->method, buf, end)); /* may be empty, as the target (head.h) */
    assert(within(hd->target, buf, end) && hd->target.base == hd->method.base + hd->method.len + 1);
    assert(memchr(hd->method.base, ' ', hd->method.len) == NULL);
    assert(memchr(hd->target.base, ' ', hd->target.len) == NULL);
    assert(hd->n <= GW_HEAD_HEADERS_MAX);
    for (size_t i = 0; i < hd->n; i++) {
        h2o_iovec_t name = hd->h[i].name, value = hd->h[i].value;
        assert(within(name, buf, end) && name.len > 0);
        assert(within(value, buf, end));
        assert(name.base >= hd->target.base + hd->target.len && value.base > name.base);
        assert(memchr(name.base, ':', name.len) == NULL);
        assert(memchr(name.base, ' ', name.len) == NULL && !blank(name.base[0]));
        assert(memchr(value.base, '\n', value.len) == NULL);
        assert(value.len == 0 || (!blank(value.base[0]) && !blank(value.base[value.len - 1])));
    }
}

static int same_head(const struct gw__head *a, const char *abuf, const struct gw__head *b,
                     const char *bbuf)
{
#define SAME(x, y) ((x).len == (y).len && (x).base - abuf == (y).base - bbuf)
    if (a->len != b->len || a->n != b->n || !SAME(a->method, b->method) ||
        !SAME(a->target, b->target))
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (!SAME(a->h[i].name, b->h[i].name) || !SAME(a->h[i].value, b->h[i].value))
            return 0;
    return 1;
#undef SAME
}

/* What a read that stopped after k bytes saw agrees with the whole. */
static void check_prefix(const uint8_t *data, size_t k, int rv, const char *buf,
                         const struct gw__head *hd)
{
    static struct gw__head ph;
    char *pbuf;
    int prv = parse_copy(data, k, &pbuf, &ph);
    assert(prv >= -1 && prv <= 1);
    if (prv == 1) {
        assert(rv == 1 && same_head(&ph, pbuf, hd, buf));
    } else if (prv == -1) {
        assert(rv == -1);
    } else {
        assert(k < GW_HEAD_MAX);
        if (rv == 1)
            assert(k < hd->len);
    }
    free(pbuf);
}

static h2o_iovec_t trimmed(const char *s, size_t len)
{
    while (len > 0 && blank(s[0]))
        s++, len--;
    while (len > 0 && blank(s[len - 1]))
        len--;
    return h2o_iovec_init(s, len);
}

/* What h2o's handle_incoming_request would parse of the same bytes: a head it serves (not a
 * 400: it refuses folded lines in init_headers) must be one gw__head_parse judges alike. */
static void check_h2o(const char *buf, size_t size, int rv, const struct gw__head *hd)
{
    const char *method, *path;
    size_t method_len, path_len, n = H2O_MAX_HEADERS;
    int minor;
    struct phr_header h[H2O_MAX_HEADERS];
    size_t reqlen = size < H2O_MAX_REQLEN ? size : H2O_MAX_REQLEN;
    int len =
        phr_parse_request(buf, reqlen, &method, &method_len, &path, &path_len, &minor, h, &n, 0);
    if (len <= 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (h[i].name_len == 0)
            return; /* h2o answers 400 */
    assert(rv == 1 && hd->len == (size_t)len && hd->n == n);
    assert(hd->method.base == method && hd->method.len == method_len);
    assert(hd->target.base == path && hd->target.len == path_len);
    size_t content_length = SIZE_MAX;
    int have_length = 0, chunked = 0, expect = 0;
    for (size_t i = 0; i < n; i++) {
        h2o_iovec_t name = h2o_iovec_init(h[i].name, h[i].name_len);
        h2o_iovec_t value = trimmed(h[i].value, h[i].value_len);
        assert(hd->h[i].name.base == name.base && hd->h[i].name.len == name.len);
        assert(hd->h[i].value.base == value.base && hd->h[i].value.len == value.len);
        if (gw__head_name_is(name, "content-length") && !have_length) {
            have_length = 1;
            content_length = h2o_strtosize(h[i].value, h[i].value_len);
        }
        chunked |= gw__head_name_is(name, "transfer-encoding");
        expect |= gw__head_name_is(name, "expect");
    }
    struct gw__head_framing fr;
    int frv = gw__head_framing(hd, &fr);
    if (content_length != SIZE_MAX)
        assert(frv == 0 && fr.content_length == content_length);
    else if (!have_length)
        assert(frv == 0 && fr.content_length == SIZE_MAX);
    if (frv == 0)
        assert(fr.chunked == chunked && fr.expect == expect);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gw__head hd, again;
    char *buf;
    int rv = parse_copy(data, size, &buf, &hd);
    assert(rv >= -1 && rv <= 1);
    if (rv == 0)
        assert(size < GW_HEAD_MAX);
    if (rv == 1)
        check_head(buf, size, &hd);
    check_h2o(buf, size, rv, &hd);
    /* What server.c refuses for size (report M10) is measured inside what arrived. */
    assert(!hd.too_many || rv == -1);
    size_t section = gw__head_section(buf, size, &hd, rv);
    if (rv >= 0 && hd.line_len > 0)
        assert(hd.line_len + section <= (rv == 1 ? hd.len : size));
    if (rv == 1)
        (void)gw__head_expect_unmet(&hd);

    /* Reads that end around a line break (where the parser's answer can change: the first 32),
     * at a spread of 8 other places, and around the head's end. */
    const uint8_t *nl = data;
    for (int i = 0; i < 32 && (nl = memchr(nl, '\n', size - (size_t)(nl - data))) != NULL; i++) {
        size_t k = (size_t)(nl - data);
        check_prefix(data, k, rv, buf, &hd);
        check_prefix(data, k + 1, rv, buf, &hd);
        nl++;
    }
    for (size_t k = 0; k < size; k += size / 8 + 1)
        check_prefix(data, k, rv, buf, &hd);
    if (rv == 1) {
        check_prefix(data, hd.len, rv, buf, &hd);
        check_prefix(data, hd.len - 1, rv, buf, &hd);
    }

    if (rv == 1) {
        struct gw__head_framing fr;
        if (gw__head_framing(&hd, &fr) == 0 && fr.content_length != SIZE_MAX) {
            size_t i = 0;
            while (!gw__head_name_is(hd.h[i].name, "content-length"))
                i++;
            assert(hd.h[i].value.len > 0);
            for (size_t k = 0; k < hd.h[i].value.len; k++)
                assert(hd.h[i].value.base[k] >= '0' && hd.h[i].value.base[k] <= '9');
        }
        /* The refused request's head: same shape, no body framing left. */
        gw__head_unframe(&hd);
        assert(gw__head_parse(buf, size, &again) == 1 && same_head(&again, buf, &hd, buf));
        assert(gw__head_framing(&again, &fr) == 0);
        assert(fr.content_length == SIZE_MAX && !fr.chunked && !fr.expect);

        /* Pipelining: the next request starts where this head ends. */
        if (hd.len < size) {
            char *next;
            int nrv = parse_copy(data + hd.len, size - hd.len, &next, &again);
            if (nrv == 1)
                check_head(next, size - hd.len, &again);
            free(next);
        }
    }
    free(buf);
    return 0;
}
