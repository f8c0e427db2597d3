/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Incremental HTTP/1.1 response parser (see http.h). Lines (status, headers,
 * chunk sizes, trailers) are found with memchr in the fed buffer; only a line
 * split across two feeds is copied into r->line. Body bytes are never copied
 * except into the capture buffer. RFC 9112 section 6.3 decides the framing:
 * HEAD, 1xx, 204 and 304 have no body; chunked wins over Content-Length;
 * otherwise the body runs until the connection closes.
 */
#include "tests/bench/http.h"

#include <assert.h>
#include <string.h>
#include <strings.h>

void mgb_resp_init(struct mgb_resp *r, int head, char *cap, size_t cap_max)
{
    r->state = MGB_RESP_STATUS;
    r->head = head;
    r->status = 0;
    r->close = 0;
    r->chunked = 0;
    r->content_length = -1;
    r->left = 0;
    r->body_bytes = 0;
    r->line_len = 0;
    r->cap = cap;
    r->cap_len = 0;
    r->cap_max = cap ? cap_max : 0;
}

static void capture(struct mgb_resp *r, const char *p, size_t n)
{
    r->body_bytes += n;
    if (r->cap_len < r->cap_max) {
        size_t k = r->cap_max - r->cap_len;
        if (k > n)
            k = n;
        memcpy(r->cap + r->cap_len, p, k);
        r->cap_len += k;
    }
}

static int fail(struct mgb_resp *r)
{
    r->state = MGB_RESP_ERROR;
    return -1;
}

static int parse_status(struct mgb_resp *r, const char *s, size_t n)
{
    /* "HTTP/1.1 200 OK" */
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[8] != ' ')
        return fail(r);
    int st = 0;
    for (int i = 9; i < 12; i++) {
        if (s[i] < '0' || s[i] > '9')
            return fail(r);
        st = st * 10 + (s[i] - '0');
    }
    r->status = st;
    if (s[7] == '0')
        r->close = 1; /* HTTP/1.0: close unless keep-alive is announced */
    r->state = MGB_RESP_HEADERS;
    return 0;
}

static int value_is(const char *v, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= n; i++)
        if (strncasecmp(v + i, word, wl) == 0)
            return 1;
    return 0;
}

static void parse_header(struct mgb_resp *r, const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    if (!colon)
        return;
    size_t nl = (size_t)(colon - s);
    const char *v = colon + 1;
    size_t vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    if (nl == 14 && strncasecmp(s, "content-length", 14) == 0) {
        int64_t cl = 0;
        for (size_t i = 0; i < vl && v[i] >= '0' && v[i] <= '9'; i++)
            cl = cl * 10 + (v[i] - '0');
        r->content_length = cl;
    } else if (nl == 17 && strncasecmp(s, "transfer-encoding", 17) == 0) {
        if (value_is(v, vl, "chunked"))
            r->chunked = 1;
    } else if (nl == 10 && strncasecmp(s, "connection", 10) == 0) {
        if (value_is(v, vl, "close"))
            r->close = 1;
        else if (value_is(v, vl, "keep-alive"))
            r->close = 0;
    }
}

static void headers_done(struct mgb_resp *r)
{
    int st = r->status;
    if (r->head || (st >= 100 && st < 200) || st == 204 || st == 304) {
        r->state = (st >= 100 && st < 200) ? MGB_RESP_STATUS : MGB_RESP_DONE;
        return;
    }
    if (r->chunked) {
        r->state = MGB_RESP_CHUNK_SIZE;
    } else if (r->content_length >= 0) {
        r->left = (uint64_t)r->content_length;
        r->state = r->left ? MGB_RESP_BODY : MGB_RESP_DONE;
    } else {
        r->state = MGB_RESP_UNTIL_CLOSE;
    }
}

static int parse_chunk_size(struct mgb_resp *r, const char *s, size_t n)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0)
            break;
        if (v >> 59)
            return fail(r);
        v = v * 16 + (uint64_t)d;
    }
    if (i == 0)
        return fail(r);
    r->left = v;
    r->state = v ? MGB_RESP_CHUNK_DATA : MGB_RESP_TRAILERS;
    return 0;
}

/* One complete line (without CR LF) in the current line-oriented state. */
static int on_line(struct mgb_resp *r, const char *s, size_t n)
{
    if (n && s[n - 1] == '\r')
        n--;
    switch (r->state) {
    case MGB_RESP_STATUS:
        if (n == 0)
            return 0; /* tolerate a stray CRLF before the status line */
        return parse_status(r, s, n);
    case MGB_RESP_HEADERS:
        if (n == 0)
            headers_done(r);
        else
            parse_header(r, s, n);
        return 0;
    case MGB_RESP_CHUNK_SIZE:
        return parse_chunk_size(r, s, n);
    case MGB_RESP_CHUNK_CRLF:
        if (n != 0)
            return fail(r);
        r->state = MGB_RESP_CHUNK_SIZE;
        return 0;
    case MGB_RESP_TRAILERS:
        if (n == 0)
            r->state = MGB_RESP_DONE;
        return 0;
    default:
        assert(0);
        return fail(r);
    }
}

static int line_state(enum mgb_resp_state s)
{
    return s == MGB_RESP_STATUS || s == MGB_RESP_HEADERS || s == MGB_RESP_CHUNK_SIZE ||
           s == MGB_RESP_CHUNK_CRLF || s == MGB_RESP_TRAILERS;
}

/* Consume bytes of a line-oriented state; returns bytes used or -1. */
static ssize_t feed_line(struct mgb_resp *r, const char *p, size_t n)
{
    const char *nl = memchr(p, '\n', n);
    if (!nl) {
        size_t k = MGB_RESP_LINE_MAX - r->line_len;
        if (k > n)
            k = n;
        memcpy(r->line + r->line_len, p, k);
        r->line_len += k;
        return (ssize_t)n;
    }
    size_t used = (size_t)(nl - p) + 1;
    int rv;
    if (r->line_len == 0) {
        rv = on_line(r, p, used - 1);
    } else {
        size_t k = MGB_RESP_LINE_MAX - r->line_len;
        if (k > used - 1)
            k = used - 1;
        memcpy(r->line + r->line_len, p, k);
        rv = on_line(r, r->line, r->line_len + k);
        r->line_len = 0;
    }
    return rv ? -1 : (ssize_t)used;
}

ssize_t mgb_resp_feed(struct mgb_resp *r, const char *p, size_t n)
{
    size_t off = 0;
    while (off < n && r->state != MGB_RESP_DONE) {
        if (r->state == MGB_RESP_ERROR)
            return -1;
        if (line_state(r->state)) {
            ssize_t used = feed_line(r, p + off, n - off);
            if (used < 0)
                return -1;
            off += (size_t)used;
            continue;
        }
        size_t k = n - off;
        if (r->state == MGB_RESP_UNTIL_CLOSE) {
            capture(r, p + off, k);
            off += k;
            continue;
        }
        if (k > r->left)
            k = (size_t)r->left;
        capture(r, p + off, k);
        off += k;
        r->left -= k;
        if (r->left == 0)
            r->state = r->state == MGB_RESP_BODY ? MGB_RESP_DONE : MGB_RESP_CHUNK_CRLF;
    }
    return r->state == MGB_RESP_ERROR ? -1 : (ssize_t)off;
}

int mgb_resp_eof(struct mgb_resp *r)
{
    if (r->state == MGB_RESP_UNTIL_CLOSE) {
        r->state = MGB_RESP_DONE;
        r->close = 1;
        return 0;
    }
    return r->state == MGB_RESP_DONE ? 0 : -1;
}
