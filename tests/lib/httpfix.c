/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Raw HTTP request fixture reader for the unit tests (see httpfix.h). It is
 * deliberately small and strict: a fixture that does not parse is a test
 * failure, not something to work around.
 */
#include "tests/lib/httpfix.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char MARKER[] = "\n#### CAPTURE TRUNCATED:";

static int failf(char *err, size_t errlen, const char *msg)
{
    snprintf(err, errlen, "%s", msg);
    return -1;
}

long httpfix_unchunk(struct mg_str in, char *out)
{
    size_t i = 0, o = 0;
    for (;;) {
        char hex[17];
        size_t digits = 0;
        while (i < in.len && digits < 16 && isxdigit((unsigned char)in.base[i]))
            hex[digits++] = in.base[i++];
        if (digits == 0 || digits == 16)
            return -1;
        hex[digits] = '\0';
        uint64_t size = strtoull(hex, NULL, 16);
        while (i < in.len && in.base[i] != '\r') /* chunk extensions */
            i++;
        if (i + 1 >= in.len || in.base[i + 1] != '\n')
            return -1;
        i += 2;
        if (size == 0)
            break;
        if (size > in.len - i || in.len - i - size < 2)
            return -1;
        memcpy(out + o, in.base + i, size);
        o += size;
        i += size;
        if (in.base[i] != '\r' || in.base[i + 1] != '\n')
            return -1;
        i += 2;
    }
    /* trailer fields, then the empty line */
    for (;;) {
        const char *nl = memchr(in.base + i, '\n', in.len - i);
        if (nl == NULL || nl == in.base + i || nl[-1] != '\r')
            return -1;
        size_t n = (size_t)(nl - (in.base + i)) + 1;
        i += n;
        if (n == 2)
            break;
    }
    return i == in.len ? (long)o : -1;
}

static int read_file(const char *path, struct httpfix *f)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL)
        return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->raw = malloc((size_t)n + 1);
    if (f->raw == NULL || fread(f->raw, 1, (size_t)n, fp) != (size_t)n) {
        fclose(fp);
        return -1;
    }
    fclose(fp);
    f->raw[n] = '\0';
    f->raw_len = (size_t)n;
    return 0;
}

static int split_head(struct httpfix *f, const char *end, char *err, size_t errlen)
{
    const char *p = f->raw;
    const char *eol = strstr(p, "\r\n");
    const char *sp1 = memchr(p, ' ', (size_t)(eol - p));
    if (sp1 == NULL)
        return failf(err, errlen, "bad request line");
    const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
    if (sp2 == NULL)
        return failf(err, errlen, "bad request line");
    f->method = (struct mg_str){p, (size_t)(sp1 - p)};
    f->target = (struct mg_str){sp1 + 1, (size_t)(sp2 - sp1 - 1)};
    const char *q = memchr(f->target.base, '?', f->target.len);
    f->path = f->target;
    f->query = (struct mg_str){f->target.base + f->target.len, 0};
    if (q != NULL) {
        f->path.len = (size_t)(q - f->target.base);
        f->query = (struct mg_str){q + 1, f->target.len - f->path.len - 1};
    }
    p = eol + 2;
    while (p < end) {
        eol = strstr(p, "\r\n");
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL || f->nheaders == HTTPFIX_MAX_HEADERS)
            return failf(err, errlen, "bad header line");
        struct mg_http_hdr *h = &f->headers[f->nheaders++];
        h->name = (struct mg_str){p, (size_t)(colon - p)};
        const char *v = colon + 1;
        while (v < eol && (*v == ' ' || *v == '\t'))
            v++;
        h->value = (struct mg_str){v, (size_t)(eol - v)};
        p = eol + 2;
    }
    return 0;
}

/* Body of a truncated capture: 4096 bytes, the marker line, 1024 bytes. */
static int split_truncated(struct httpfix *f, const char *body, size_t len, char *err,
                           size_t errlen)
{
    const char *m = body + 4096;
    const char *nl = memchr(m + 1, '\n', len - 4096 - 1);
    if (nl == NULL || (size_t)(body + len - (nl + 1)) != 1024)
        return failf(err, errlen, "bad truncation marker");
    const char *fig = strstr(m, "is ");
    if (fig == NULL || fig > nl)
        return failf(err, errlen, "no length in truncation marker");
    f->truncated = 1;
    f->wire_len = strtoull(fig + 3, NULL, 10);
    f->head = (struct mg_str){body, 4096};
    f->tail = (struct mg_str){nl + 1, 1024};
    f->wire_body = (struct mg_str){body, len};
    return 0;
}

int httpfix_load(const char *path, struct httpfix *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    if (read_file(path, f) != 0)
        return failf(err, errlen, "cannot read file");
    const char *hend = strstr(f->raw, "\r\n\r\n");
    if (hend == NULL)
        return failf(err, errlen, "no end of headers");
    if (split_head(f, hend + 2, err, errlen) != 0)
        return -1;
    const char *body = hend + 4;
    size_t len = f->raw_len - (size_t)(body - f->raw);
    struct mg_str te = httpfix_header(f, "transfer-encoding");
    f->http_chunked = te.base != NULL && te.len == 7 && strncasecmp(te.base, "chunked", 7) == 0;
    if (len > 4096 + sizeof(MARKER) && memcmp(body + 4096, MARKER, sizeof(MARKER) - 1) == 0)
        return split_truncated(f, body, len, err, errlen);
    f->wire_body = (struct mg_str){body, len};
    f->body = malloc(len + 1);
    if (f->body == NULL)
        return failf(err, errlen, "out of memory");
    if (!f->http_chunked) {
        memcpy(f->body, body, len);
        f->body_len = len;
        return 0;
    }
    long n = httpfix_unchunk(f->wire_body, f->body);
    if (n < 0)
        return failf(err, errlen, "bad HTTP chunked framing");
    f->body_len = (size_t)n;
    return 0;
}

void httpfix_close(struct httpfix *f)
{
    free(f->raw);
    free(f->body);
    memset(f, 0, sizeof(*f));
}

struct mg_str httpfix_header(const struct httpfix *f, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < f->nheaders; i++)
        if (f->headers[i].name.len == n && strncasecmp(f->headers[i].name.base, name, n) == 0)
            return f->headers[i].value;
    return (struct mg_str){NULL, 0};
}

struct mg_sig_req httpfix_sig_req(const struct httpfix *f)
{
    struct mg_sig_req r;
    memset(&r, 0, sizeof(r));
    r.method = f->method;
    r.path = f->path;
    r.query = f->query;
    r.headers = f->headers;
    r.nheaders = f->nheaders;
    return r;
}
