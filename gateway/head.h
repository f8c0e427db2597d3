/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to server.c (and its unit tests and fuzz target; respond.c names
 * GW_HEAD_SECTION_MAX in RequestHeaderSectionTooLarge): the HTTP/1 request-head parser
 * of the "body before auth" check (issue 9). server.c runs it on the bytes of a connection
 * before h2o has parsed them, so it sees whatever the network sends: it never reads past
 * size, and what it reports points into the buffer it was given. It is not incremental:
 * server.c calls it again over the whole buffer after each read, and the answer over a
 * prefix never contradicts the answer over the whole (a complete head stays complete with
 * the same length, a refused one stays refused).
 */
#ifndef MG_GATEWAY_HEAD_H
#define MG_GATEWAY_HEAD_H

#include <stddef.h>

#include <h2o/memory.h>

/* h2o 2.2.5's H2O_MAX_REQLEN (h2o.h: 8192 + 4096 * H2O_MAX_HEADERS, 417,792; 0x66000 in
 * libh2o): handle_incoming_request parses at most this much and answers 400 to a longer head.
 * Every head h2o parses must be judged here, or its body is read before auth. */
#define GW_HEAD_MAX (8192 + 4096 * 100)
#define GW_HEAD_HEADERS_MAX 100 /* H2O_MAX_HEADERS */
/* AWS's bound on a request's header fields (RequestHeaderSectionTooLarge, MaxSizeAllowed
 * 8192): the field lines with their line ends, not the request line or the empty line. */
#define GW_HEAD_SECTION_MAX 8192

struct gw__head {
    h2o_iovec_t method, target;
    struct {
        h2o_iovec_t name, value; /* value without its leading and trailing blanks */
    } h[GW_HEAD_HEADERS_MAX];
    size_t n;
    size_t len;      /* bytes of the head, its empty line included */
    size_t line_len; /* bytes up to the end of the request line (0: not complete yet) */
    int too_many;    /* -1 because a field past GW_HEAD_HEADERS_MAX began (h2o answers 400) */
};

/* How a parsed head frames its body, as h2o 2.2.5 reads it (lib/http1.c). */
struct gw__head_framing {
    size_t content_length; /* the first Content-Length, SIZE_MAX without one */
    int chunked;           /* a Transfer-Encoding header, whatever its value */
    int expect;            /* an Expect header, whatever its value */
};

/* The request head at the start of buf (size bytes, at most GW_HEAD_MAX of them looked at):
 * 1 complete (out filled), 0 incomplete (read more), -1 nothing to judge here (malformed,
 * folded, over GW_HEAD_MAX or GW_HEAD_HEADERS_MAX: h2o answers it). As picohttpparser, a
 * head is over GW_HEAD_HEADERS_MAX as soon as the first byte of one more field line is there
 * (out->too_many then says so). out->line_len is set whenever the request line is complete. Lines
 * end in LF or CRLF and leading empty lines are skipped, as picohttpparser does; an empty method or
 * request-target (" / HTTP/1.1", "PUT  HTTP/1.1") is a head too, since picohttpparser 2.2.5
 * takes them and h2o reads their bodies. Non-const: gw__head_unframe writes through out's
 * pointers. */
int gw__head_parse(char *buf, size_t size, struct gw__head *out);

/* Framing of a complete head: 0, or -1 when its first Content-Length is not a number
 * h2o_strtosize accepts (h2o answers 400). */
int gw__head_framing(const struct gw__head *hd, struct gw__head_framing *out);

/* 1 when an Expect header asks for anything but 100-continue (ASCII case-insensitive, the
 * whole trimmed value, as h2o compares it): h2o would answer 417 in plain text. */
int gw__head_expect_unmet(const struct gw__head *hd);

/* Renames Content-Length, Transfer-Encoding and Expect to "x-..." in place (same length, so
 * the head parses the same and frames no body): what server.c does to a refused request. */
void gw__head_unframe(struct gw__head *hd);

/* The bytes of header field lines of the head gw__head_parse(buf, size, hd) answered rv for:
 * a complete head's without its empty line, else all that arrived after the request line; 0
 * while the request line is incomplete. What server.c compares with GW_HEAD_SECTION_MAX. */
size_t gw__head_section(const char *buf, size_t size, const struct gw__head *hd, int rv);

/* v equals lit, ASCII case-insensitively (header names). */
int gw__head_name_is(h2o_iovec_t v, const char *lit);

#endif
