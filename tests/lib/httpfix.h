/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raw HTTP request fixtures (fixtures/clients/README.md "File format"): one
 * file holds one HTTP/1.1 request as read from the socket. httpfix splits
 * the request line, the headers (order and case as sent) and the body,
 * removes the capture's truncation marker (bodies >= 64 KiB keep their first
 * 4096 and last 1024 bytes) and undoes HTTP chunked transfer-encoding when
 * the body is complete. Test-only code: aborts on I/O errors.
 */
#ifndef MG_TESTS_LIB_HTTPFIX_H
#define MG_TESTS_LIB_HTTPFIX_H

#include <stddef.h>
#include <stdint.h>

#include "common/sig.h"

#define HTTPFIX_MAX_HEADERS 64

struct httpfix {
    char *raw; /* file contents (owned) */
    size_t raw_len;
    struct mg_str method; /* "PUT" */
    struct mg_str target; /* request-target as sent */
    struct mg_str path;   /* target up to '?' */
    struct mg_str query;  /* after '?' (empty if none) */
    struct mg_http_hdr headers[HTTPFIX_MAX_HEADERS];
    size_t nheaders;
    struct mg_str wire_body;  /* body bytes as in the file (marker removed when truncated) */
    int truncated;            /* 1: the body in the file is a head and a tail */
    uint64_t wire_len;        /* truncated: body length as received (the marker's figure) */
    struct mg_str head, tail; /* truncated: the first 4096 and last 1024 wire bytes */
    int http_chunked;         /* Transfer-Encoding: chunked */
    char *body;               /* body with HTTP chunking undone (owned; complete bodies) */
    size_t body_len;
};

/* Load and split path; returns 0, or -1 with a message in err (malformed file). */
int httpfix_load(const char *path, struct httpfix *f, char *err, size_t errlen);
void httpfix_close(struct httpfix *f);
/* First header value by name (case-insensitive); {NULL,0} if absent. */
struct mg_str httpfix_header(const struct httpfix *f, const char *name);
/* The request as a struct mg_sig_req (pointing into f). */
struct mg_sig_req httpfix_sig_req(const struct httpfix *f);
/* Undo HTTP chunked framing of in into out (room for in.len); returns length or -1. */
long httpfix_unchunk(struct mg_str in, char *out);

#endif
