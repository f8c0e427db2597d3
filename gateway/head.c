/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/1 request-head parser of server.c's "body before auth" check (head.h): the
 * request line and header fields of a head that h2o has not parsed yet, and the body framing
 * they announce. Pure: no h2o state, no allocation, only the bytes it is given (the fuzz
 * target fuzz_head checks it stays within them).
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <h2o/string_.h>

#include "gateway/head.h"

int gw__head_name_is(h2o_iovec_t v, const char *lit)
{
    size_t n = strlen(lit);
    return v.len == n && strncasecmp(v.base, lit, n) == 0;
}

int gw__head_parse(char *buf, size_t size, struct gw__head *out)
{
    char *p = buf, *end = buf + (size < GW_HEAD_MAX ? size : GW_HEAD_MAX);
    while (p < end && (*p == '\r' || *p == '\n')) /* as picohttpparser: leading empty lines */
        p++;
    out->n = 0;
    out->line_len = 0;
    out->too_many = 0;
    for (int first = 1;; first = 0) {
        if (!first && out->n == GW_HEAD_HEADERS_MAX && p < end && *p != '\r' && *p != '\n') {
            out->too_many = 1; /* picohttpparser refuses here, before the line is complete */
            return -1;
        }
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            return size >= GW_HEAD_MAX ? -1 : 0;
        size_t ll = (size_t)(nl - p) - (nl > p && nl[-1] == '\r');
        char *line = p;
        p = nl + 1;
        if (first) {
            char *sp1 = memchr(line, ' ', ll);
            char *sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', (size_t)(line + ll - sp1 - 1)) : NULL;
            if (sp2 == NULL) /* an empty method or target is h2o's too (head.h) */
                return -1;
            out->method = h2o_iovec_init(line, (size_t)(sp1 - line));
            out->target = h2o_iovec_init(sp1 + 1, (size_t)(sp2 - sp1 - 1));
            out->line_len = (size_t)(p - buf);
            continue;
        }
        if (ll == 0) {
            out->len = (size_t)(p - buf);
            return 1;
        }
        char *colon = memchr(line, ':', ll);
        if (line[0] == ' ' || line[0] == '\t' || colon == NULL || colon == line ||
            out->n == GW_HEAD_HEADERS_MAX || memchr(line, ' ', (size_t)(colon - line)) != NULL)
            return -1;
        char *v = colon + 1, *ve = line + ll;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        out->h[out->n].name = h2o_iovec_init(line, (size_t)(colon - line));
        out->h[out->n].value = h2o_iovec_init(v, (size_t)(ve - v));
        out->n++;
    }
}

size_t gw__head_section(const char *buf, size_t size, const struct gw__head *hd, int rv)
{
    if (hd->line_len == 0 || hd->line_len > size)
        return 0;
    if (rv != 1)
        return (size < GW_HEAD_MAX ? size : GW_HEAD_MAX) - hd->line_len;
    size_t empty = hd->len >= 2 && buf[hd->len - 2] == '\r' ? 2 : 1; /* CRLF or a bare LF */
    return hd->len - hd->line_len - empty;
}

int gw__head_framing(const struct gw__head *hd, struct gw__head_framing *out)
{
    out->content_length = SIZE_MAX;
    out->chunked = out->expect = 0;
    int have_length = 0;
    for (size_t i = 0; i < hd->n; i++) {
        h2o_iovec_t name = hd->h[i].name;
        if (gw__head_name_is(name, "content-length") && !have_length) { /* h2o: the first */
            have_length = 1;
            out->content_length = h2o_strtosize(hd->h[i].value.base, hd->h[i].value.len);
            if (out->content_length == SIZE_MAX)
                return -1;
        } else if (gw__head_name_is(name, "transfer-encoding")) {
            out->chunked = 1;
        } else if (gw__head_name_is(name, "expect")) {
            out->expect = 1;
        }
    }
    return 0;
}

int gw__head_expect_unmet(const struct gw__head *hd)
{
    for (size_t i = 0; i < hd->n; i++)
        if (gw__head_name_is(hd->h[i].name, "expect") &&
            !gw__head_name_is(hd->h[i].value, "100-continue"))
            return 1;
    return 0;
}

void gw__head_unframe(struct gw__head *hd)
{
    for (size_t i = 0; i < hd->n; i++) {
        h2o_iovec_t name = hd->h[i].name;
        if (gw__head_name_is(name, "content-length") ||
            gw__head_name_is(name, "transfer-encoding") || gw__head_name_is(name, "expect")) {
            name.base[0] = 'x';
            name.base[1] = '-';
        }
    }
}
