/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the request-signing fuzz targets: cut a fuzz input into a
 * request (line 1: the auth value, line 2: path, line 3: query, further lines
 * "name:value" headers). Static inline: each target is one translation unit.
 */
#ifndef MG_FUZZ_SPLIT_H
#define MG_FUZZ_SPLIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/sig.h"

#define FUZZ_MAX_HEADERS 32
#define FUZZ_AK "AKIAIOSFODNN7EXAMPLE"
#define FUZZ_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

static inline struct mg_str fuzz_str(const char *s)
{
    struct mg_str r = {s, strlen(s)};
    return r;
}

struct fuzz_req {
    struct mg_str auth; /* line 1 */
    struct mg_sig_req req;
    struct mg_http_hdr headers[FUZZ_MAX_HEADERS];
};

static inline struct mg_str fuzz_next_line(const char **p, const char *end)
{
    struct mg_str s = {*p, 0};
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    s.len = (size_t)((nl != NULL ? nl : end) - *p);
    *p = nl != NULL ? nl + 1 : end;
    return s;
}

static inline void fuzz_split(const uint8_t *data, size_t size, struct fuzz_req *r)
{
    const char *p = (const char *)data, *end = p + size;
    memset(r, 0, sizeof(*r));
    r->auth = fuzz_next_line(&p, end);
    r->req.method.base = "PUT";
    r->req.method.len = 3;
    r->req.path = fuzz_next_line(&p, end);
    r->req.query = fuzz_next_line(&p, end);
    r->req.headers = r->headers;
    while (p < end && r->req.nheaders < FUZZ_MAX_HEADERS) {
        struct mg_str l = fuzz_next_line(&p, end);
        const char *colon = memchr(l.base, ':', l.len);
        if (colon == NULL)
            continue;
        struct mg_http_hdr *h = &r->headers[r->req.nheaders++];
        h->name.base = l.base;
        h->name.len = (size_t)(colon - l.base);
        h->value.base = colon + 1;
        h->value.len = l.len - h->name.len - 1;
    }
}

#endif
