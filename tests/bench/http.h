/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Incremental HTTP/1.1 response parser for mgbench's client. It is fed the
 * bytes of one response as they arrive, in pieces of any size, and keeps only
 * what a load generator needs: the status, the framing (Content-Length,
 * chunked, or read-until-close), Connection: close, and the first cap_max
 * bytes of the body (S3 error codes, DeleteObjects results). The rest of the
 * body is counted and dropped, so a 1 GiB GET costs no memory.
 * One parser per connection; not thread-safe.
 */
#ifndef MGB_HTTP_H
#define MGB_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum mgb_resp_state {
    MGB_RESP_STATUS,      /* reading the status line */
    MGB_RESP_HEADERS,     /* reading header lines */
    MGB_RESP_BODY,        /* Content-Length body */
    MGB_RESP_CHUNK_SIZE,  /* chunked: size line */
    MGB_RESP_CHUNK_DATA,  /* chunked: data */
    MGB_RESP_CHUNK_CRLF,  /* chunked: CRLF after data */
    MGB_RESP_TRAILERS,    /* chunked: trailer lines until the empty one */
    MGB_RESP_UNTIL_CLOSE, /* no framing: body ends at EOF */
    MGB_RESP_DONE,        /* complete */
    MGB_RESP_ERROR,       /* malformed */
};

#define MGB_RESP_LINE_MAX 1024 /* a longer header line is truncated (we never need its tail) */

struct mgb_resp {
    enum mgb_resp_state state;
    int head;                   /* request was HEAD: no body whatever the headers say */
    int status;                 /* HTTP status, 0 until parsed */
    int close;                  /* server sent Connection: close (or HTTP/1.0 without keep-alive) */
    int chunked;                /* Transfer-Encoding: chunked */
    int64_t content_length;     /* -1 if absent */
    uint64_t left;              /* bytes left in the body or current chunk */
    uint64_t body_bytes;        /* body bytes seen (decoded) */
    size_t line_len;            /* bytes held in line */
    char line[MGB_RESP_LINE_MAX]; /* partial line carried across feeds */
    char *cap;                  /* body capture buffer (may be NULL) */
    size_t cap_len;             /* bytes captured */
    size_t cap_max;             /* capacity of cap */
};

/* Prepare r for one response. head: the request was HEAD. cap/cap_max: where to keep the
 * first body bytes (cap may be NULL). */
void mgb_resp_init(struct mgb_resp *r, int head, char *cap, size_t cap_max);
/* Feed n bytes. Returns the number consumed (< n only when the response completed inside
 * the input: the rest belongs to the next response), or -1 when the response is malformed
 * (state MGB_RESP_ERROR). Check r->state == MGB_RESP_DONE after each call. */
ssize_t mgb_resp_feed(struct mgb_resp *r, const char *p, size_t n);
/* The peer closed the connection: completes a read-until-close body. Returns 0 when the
 * response is now complete, -1 when it was cut short. */
int mgb_resp_eof(struct mgb_resp *r);

#endif
