/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the request-body XML targets (fuzz_xml_complete.c,
 * fuzz_xml_delete.c, fuzz_xml_tagging.c): each parses its body, checks what
 * gw.h promises about the result, writes the result back as XML with the
 * gateway's own escaping (gw_xml_elem) and requires the parser to read back
 * exactly the same values (parse . emit . parse = parse).
 */
#ifndef MG_FUZZ_XML_BODY_H
#define MG_FUZZ_XML_BODY_H

#include <stdlib.h>
#include <string.h>

#include "gateway/s3.h"

/* Reads every byte of s, so a string pointing outside its allocation shows under ASan. */
static inline size_t fuzz_touch(struct mg_str s)
{
    volatile size_t h = 0;
    size_t i;
    if (s.len > 0 && s.base == NULL)
        abort();
    for (i = 0; i < s.len; i++)
        h += (unsigned char)s.base[i];
    return h;
}

static inline int fuzz_same(struct mg_str a, struct mg_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.base, b.base, a.len) == 0);
}

/* A rejection says why: errmsg non-empty. */
static inline void fuzz_check_rejection(int rv, const char *errmsg)
{
    if (rv != 0 && errmsg[0] == '\0')
        abort();
}

static inline struct mg_str fuzz_buf_str(const struct mg_buf *b)
{
    return (struct mg_str){b->base ? b->base : "", b->len};
}

#endif
