/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Responses: headers, S3 XML error bodies, and streamed object data. Every
 * response carries x-amz-request-id and x-amz-id-2 (S3 API reference,
 * "Common Response Headers") and h2o adds Date and Server. Object data is
 * streamed through an h2o generator whose proceed callback reads the next
 * slice (<= 1 MiB) only after h2o has written the previous one, so a GET of
 * any size costs one slice buffer (DESIGN.md 5a, issue 2 item 5).
 * Also the HTTP date helpers of gw.h.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "gateway"
#include "gateway/core.h"
#include "gateway/head.h"

#define SLICE_MAX_BYTES (1u << 20)   /* bounded memory per streaming GET */
#define SMALL_BODY_BYTES (64u << 10) /* below this, one read and one send */
#define SLOW_REQUEST_MS 1000

static const char *reason_of(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 416:
        return "Requested Range Not Satisfiable";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 507:
        return "Insufficient Storage";
    default:
        return status < 400 ? "OK" : "Error";
    }
}

static int is_head(const struct gw_request *r)
{
    return r->req->method.len == 4 && memcmp(r->req->method.base, "HEAD", 4) == 0;
}

static void add_ids(struct gw_request *r)
{
    h2o_mem_pool_t *pool = &r->req->pool;
    h2o_add_header_by_str(pool, &r->req->res.headers, H2O_STRLIT("x-amz-request-id"), 0, NULL,
                          r->request_id, strlen(r->request_id));
    h2o_add_header_by_str(pool, &r->req->res.headers, H2O_STRLIT("x-amz-id-2"), 0, NULL,
                          r->request_id, strlen(r->request_id));
}

void gw__request_done(struct gw_request *r)
{
    uint64_t lat_us = (gw__now_ns() - r->core.start_ns) / 1000;
    struct gw__loop *l = gw__current_loop();
    if (l != NULL && !r->core.internal)
        gw__metrics_record(&l->metrics, r->op, r->core.status, lat_us, r->bytes_in,
                           r->core.bytes_out);
    if (lat_us >= (uint64_t)SLOW_REQUEST_MS * 1000)
        mg_log(MG_LOG_WARN, "event=slow_request op=%s status=%d ms=%" PRIu64 " id=%s",
               gw_op_label(r->op), r->core.status, lat_us / 1000, r->request_id);
    mg_log(MG_LOG_TRACE,
           "event=request op=%s status=%d us=%" PRIu64 " in=%" PRIu64 " out=%" PRIu64 " id=%s",
           gw_op_label(r->op), r->core.status, lat_us, r->bytes_in, r->core.bytes_out,
           r->request_id);
}

void gw_header_add(struct gw_request *r, const char *name, struct mg_str value)
{
    assert(r->core.status == 0 && "headers after the response started");
    h2o_mem_pool_t *pool = &r->req->pool;
    size_t n = strlen(name);
    if (n == 14 && strcasecmp(name, "content-length") == 0) {
        /* h2o writes Content-Length from res.content_length; a handler's value is only used
         * as the length a HEAD response advertises. */
        uint64_t v = 0;
        for (size_t i = 0; i < value.len && value.base[i] >= '0' && value.base[i] <= '9'; i++)
            v = v * 10 + (uint64_t)(value.base[i] - '0');
        r->core.head_length = v;
        r->core.has_head_length = 1;
        return;
    }
    char *lname = h2o_mem_alloc_pool(pool, n);
    for (size_t i = 0; i < n; i++)
        lname[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    h2o_iovec_t v = h2o_strdup(pool, value.base, value.len);
    h2o_add_header_by_str(pool, &r->req->res.headers, lname, n, 1, NULL, v.base, v.len);
}

void gw_header_addf(struct gw_request *r, const char *name, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(buf))
        n = sizeof(buf) - 1;
    gw_header_add(r, name, (struct mg_str){buf, (size_t)n});
}

/* Status line, content type, ids; the body (if any) is sent by the caller. */
static void start(struct gw_request *r, int status, const char *content_type)
{
    assert(r->core.status == 0 && "exactly one gw_respond_* per request");
    r->core.status = status;
    r->req->res.status = status;
    r->req->res.reason = reason_of(status);
    if (content_type != NULL)
        h2o_add_header(&r->req->pool, &r->req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                       content_type, strlen(content_type));
    add_ids(r);
}

static h2o_generator_t plain_generator = {NULL, NULL};

void gw_respond(struct gw_request *r, int status, const char *content_type, struct mg_str body)
{
    start(r, status, content_type);
    h2o_req_t *req = r->req;
    if (is_head(r)) {
        req->res.content_length = r->core.has_head_length ? r->core.head_length : body.len;
        gw__request_done(r);
        h2o_start_response(req, &plain_generator);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return;
    }
    if (status == 204) {
        /* No Content-Length on 204 (RFC 9110 8.6); h2o adds no chunked framing for it. */
        req->res.content_length = SIZE_MAX;
        body.len = 0;
    } else {
        req->res.content_length = body.len;
    }
    h2o_iovec_t v = h2o_strdup(&req->pool, body.base, body.len);
    r->core.bytes_out += body.len;
    gw__request_done(r);
    h2o_start_response(req, &plain_generator);
    h2o_send(req, &v, body.len ? 1 : 0, H2O_SEND_STATE_FINAL);
}

void gw_respond_xml(struct gw_request *r, int status, const struct mg_buf *xml)
{
    gw_respond(r, status, "application/xml", (struct mg_str){xml->base, xml->len});
}

/* What a client may read for an internal cause (STYLE.md 3: logs keep the cause). */
static const char *client_message(int rv, const char *errmsg)
{
    if (rv > MG_EINTERNAL) {
        int status = mg_err_status(rv);
        if (status == 404)
            return mg_err_message(MG_ENOSUCHKEY);
        if (status == 503)
            return "Please reduce your request rate.";
        if (status == 507)
            return "Insufficient storage to complete the request.";
        return mg_err_message(MG_EINTERNAL);
    }
    return errmsg[0] != '\0' ? errmsg : mg_err_message(rv);
}

void gw_respond_error(struct gw_request *r, int rv)
{
    assert(rv != 0);
    int status = mg_err_status(rv);
    const char *code = mg_err_s3code(rv);
    struct gw__loop *l = gw__current_loop();
    if (rv == MG_ESLOWDOWN && l != NULL) /* only this loop's thread writes its shard */
        __atomic_store_n(&l->metrics.slowdown, l->metrics.slowdown + 1, __ATOMIC_RELAXED);
    if (status >= 500)
        mg_log(MG_LOG_ERROR,
               "event=request_error op=%s status=%d code=%s cause=%s msg=\"%s\" id=%s",
               gw_op_label(r->op), status, code, mg_err_name(rv), r->errmsg, r->request_id);
    else
        mg_log(MG_LOG_DEBUG, "event=request_error op=%s status=%d code=%s msg=\"%s\" id=%s",
               gw_op_label(r->op), status, code, r->errmsg, r->request_id);
    h2o_req_t *req = r->req;
    if (rv == MG_ENOTMODIFIED) {
        /* Keep validators the handler added (ETag, Last-Modified); RFC 7232 4.1. */
        start(r, 304, NULL);
        req->res.content_length = SIZE_MAX;
        gw__request_done(r);
        h2o_start_response(req, &plain_generator);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return;
    }
    /* A 416 keeps the handler's "Content-Range: bytes * /size" (RFC 7233 4.4); every other
     * error drops the headers of the response it replaces. */
    ssize_t cr = rv == MG_EINVALIDRANGE
                     ? h2o_find_header(&req->res.headers, H2O_TOKEN_CONTENT_RANGE, -1)
                     : -1;
    h2o_iovec_t content_range = cr >= 0 ? req->res.headers.entries[cr].value : h2o_iovec_init("", 0);
    req->res.headers = (h2o_headers_t){NULL, 0, 0};
    if (cr >= 0)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_RANGE, NULL,
                       content_range.base, content_range.len);
    r->core.has_head_length = 0;
    if (is_head(r)) {
        gw_respond(r, status, NULL, (struct mg_str){"", 0});
        return;
    }
    struct mg_buf b;
    mg_buf_init(&b);
    mg_buf_append(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>", 52);
    mg_buf_append(&b, code, strlen(code));
    mg_buf_append(&b, "</Code><Message>", 16);
    const char *msg = client_message(rv, r->errmsg);
    gw_xml_escape(&b, (struct mg_str){msg, strlen(msg)});
    mg_buf_append(&b, "</Message>", 10);
    if (r->bucket.len > 0 && (rv == MG_ENOSUCHBUCKET || rv == MG_EBUCKETEXISTS ||
                              rv == MG_EBUCKETOWNED || rv == MG_EBUCKETNOTEMPTY)) {
        mg_buf_append(&b, "<BucketName>", 12);
        gw_xml_escape(&b, r->bucket); /* control bytes as &#x..; */
        mg_buf_append(&b, "</BucketName>", 13);
    }
    if (r->key.len > 0 && rv == MG_ENOSUCHKEY) {
        mg_buf_append(&b, "<Key>", 5);
        gw_xml_escape(&b, r->key);
        mg_buf_append(&b, "</Key>", 6);
    }
    if (rv == MG_EHEADERSTOOLARGE) /* AWS names its bound (conformance report M10) */
        mg_buf_appendf(&b, "<MaxSizeAllowed>%d</MaxSizeAllowed>", GW_HEAD_SECTION_MAX);
    if (rv == MG_EWRONGREGION) { /* AWS names the region to sign for (report.md M15) */
        mg_buf_append(&b, "<Region>", 8);
        gw_xml_escape(&b, r->srv->region);
        mg_buf_append(&b, "</Region>", 9);
    }
    mg_buf_append(&b, "<Resource>", 10);
    gw_xml_escape(&b, r->core.path);
    mg_buf_append(&b, "</Resource><RequestId>", 22);
    mg_buf_append(&b, r->request_id, strlen(r->request_id));
    mg_buf_append(&b, "</RequestId><HostId>", 20);
    mg_buf_append(&b, r->request_id, strlen(r->request_id));
    mg_buf_append(&b, "</HostId></Error>", 17);
    gw_respond(r, status, "application/xml", (struct mg_str){b.base, b.len});
    mg_buf_close(&b);
}

/* ---- XML escaping (error bodies here; the handlers' XML bodies too) */

/* 1 for the bytes gw_xml_escape rewrites: markup characters and C0 controls / DEL. */
static int needs_escape(unsigned char c)
{
    return c < 0x20 || c == 0x7f || c == '&' || c == '<' || c == '>' || c == '"' || c == '\'';
}

void gw_xml_escape(struct mg_buf *b, struct mg_str text)
{
    size_t i, run = 0;
    mg_buf_reserve(b, text.len);
    for (i = 0; i < text.len; i++) {
        unsigned char c = (unsigned char)text.base[i];
        const char *rep;
        char num[8];
        if (!needs_escape(c))
            continue;
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            /* Keys may hold control bytes; S3 emits them as character references. */
            snprintf(num, sizeof(num), "&#x%X;", c);
            rep = num;
        }
        mg_buf_append(b, text.base + run, i - run);
        mg_buf_append(b, rep, strlen(rep));
        run = i + 1;
    }
    mg_buf_append(b, text.base + run, text.len - run);
}

/* ---- streamed object data */

/* Slices of blob-backed data are read on a worker (gw_work_queue): a cold pread of 1 MiB can
 * take milliseconds, which would stall every connection on the loop. A read of at most
 * SMALL_BODY_BYTES (a whole small object) of a local blob stays on the loop: it is usually in
 * the page cache and a thread handoff (~20 us) would cost more than the copy. A RADOS blob
 * (meta_data_remote) is a network round trip, up to the OSD op timeout: always a worker. The stream is h2o-shared memory
 * in the request pool; a worker read holds a reference, so a client that disconnects while
 * the read runs leaves the stream (and its malloc'd buffer) alive until the read is back. */
struct data_stream {
    h2o_generator_t super;
    struct gw_request *r;
    struct meta_store *ms;
    struct meta_data d; /* by value: the caller's may live on its stack */
    uint64_t offset;    /* next byte to read */
    uint64_t left;      /* bytes still to send */
    char *buf;          /* mg_malloc: a worker may write it after the pool is gone */
    size_t cap;
    size_t n;           /* bytes of the slice being read */
    int done;           /* accounted in metrics */
    int stopped;        /* h2o stopped the generator (client went away) */
    int pinned;         /* d's blobs are pinned: unpinned at dispose, after the last read */
    int remote;         /* meta_data_remote(&d): no read on the loop */
};

static void stream_finish(struct data_stream *s)
{
    if (!s->done) {
        s->done = 1;
        gw__request_done(s->r);
    }
}

/* Runs once, when the pool is cleared and no worker read holds the stream any more. */
static void on_stream_dispose(void *p)
{
    struct data_stream *s = p;
    if (s->pinned)
        meta_data_unpin(s->ms, &s->d);
    mg_free(s->buf);
}

/* Hand the slice just read (rv its result) to h2o; h2o calls on_proceed once it is written. */
static void stream_send(struct data_stream *s, int rv)
{
    struct gw_request *r = s->r;
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=stream_error op=%s cause=%s offset=%" PRIu64 " id=%s",
               gw_op_label(r->op), mg_err_name(rv), s->offset, r->request_id);
        stream_finish(s);
        h2o_send(r->req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    size_t n = s->n;
    s->offset += n;
    s->left -= n;
    r->core.bytes_out += n;
    h2o_iovec_t v = {s->buf, n};
    h2o_send_state_t st = s->left == 0 ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS;
    if (st == H2O_SEND_STATE_FINAL)
        stream_finish(s);
    h2o_send(r->req, &v, 1, st);
}

static int on_slice_work(struct gw_request *r, void *arg)
{
    struct data_stream *s = arg;
    (void)r;
    return meta_data_read(s->ms, &s->d, s->offset, s->buf, s->n);
}

static void on_slice_after(struct gw_request *r, void *arg, int rv)
{
    struct data_stream *s = arg;
    if (r != NULL && !s->stopped)
        stream_send(s, rv);
    h2o_mem_release_shared(s);
}

static void stream_read_next(struct data_stream *s)
{
    s->n = s->left < s->cap ? (size_t)s->left : s->cap;
    if (s->n <= SMALL_BODY_BYTES && !s->remote) {
        stream_send(s, meta_data_read(s->ms, &s->d, s->offset, s->buf, s->n));
        return;
    }
    h2o_mem_addref_shared(s);
    int rv = gw_work_queue(s->r, on_slice_work, on_slice_after, s, 0);
    if (rv != 0) {
        h2o_mem_release_shared(s);
        stream_send(s, rv);
    }
}

static void on_proceed(h2o_generator_t *g, h2o_req_t *req)
{
    (void)req;
    stream_read_next((struct data_stream *)g);
}

static void on_stop(h2o_generator_t *g, h2o_req_t *req)
{
    struct data_stream *s = (struct data_stream *)g;
    (void)req;
    s->stopped = 1;
    stream_finish(s); /* client went away */
}

void gw_respond_data(struct gw_request *r, int status, const struct meta_data *d, uint64_t offset,
                     uint64_t len, int pinned)
{
    assert(offset + len <= d->size);
    start(r, status, NULL);
    h2o_req_t *req = r->req;
    req->res.content_length = len;
    if (pinned && (is_head(r) || len == 0 || d->inline_data.len > 0)) {
        meta_data_unpin(r->ms, d); /* nothing of the blobs will be read */
        pinned = 0;
    }
    if (is_head(r) || len == 0) {
        gw__request_done(r);
        h2o_start_response(req, &plain_generator);
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
        return;
    }
    if (d->inline_data.len > 0) {
        /* Inline bytes live in the request arena until the request is disposed. */
        h2o_iovec_t v = {(char *)d->inline_data.base + offset, (size_t)len};
        r->core.bytes_out += len;
        gw__request_done(r);
        h2o_start_response(req, &plain_generator);
        h2o_send(req, &v, 1, H2O_SEND_STATE_FINAL);
        return;
    }
    struct data_stream *s = h2o_mem_alloc_shared(&req->pool, sizeof(*s), on_stream_dispose);
    memset(s, 0, sizeof(*s));
    s->super.proceed = on_proceed;
    s->super.stop = on_stop;
    s->r = r;
    s->ms = r->ms;
    s->d = *d;
    s->offset = offset;
    s->left = len;
    s->cap = len < SLICE_MAX_BYTES ? (size_t)len : SLICE_MAX_BYTES;
    s->buf = mg_malloc(s->cap);
    s->pinned = pinned;
    s->remote = meta_data_remote(d);
    h2o_start_response(req, &s->super);
    stream_read_next(s);
}

/* ---- time helpers */

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static void split_ms(int64_t ms, struct tm *tm, int *msec)
{
    int64_t s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    *msec = (int)(ms - s * 1000);
    time_t t = (time_t)s;
    gmtime_r(&t, tm);
}

void gw_http_date(int64_t ms, char out[30])
{
    struct tm tm;
    int msec;
    split_ms(ms, &tm, &msec);
    char buf[64];
    snprintf(buf, sizeof(buf), "%s, %02d %s %04d %02d:%02d:%02d GMT", wdays[tm.tm_wday % 7],
             tm.tm_mday, months[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
    memcpy(out, buf, 29);
    out[29] = '\0';
}

/* Writes n decimal digits of v at p (v < 10^n). */
static void put_digits(char *p, int v, int n)
{
    for (int i = n - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
}

/* Hand-formatted: a 1,000-key LIST formats 1,000 of these, and snprintf was 13% of its CPU. */
void gw_iso8601(int64_t ms, char out[25])
{
    struct tm tm;
    int msec;
    split_ms(ms, &tm, &msec);
    memcpy(out, "0000-00-00T00:00:00.000Z", 25);
    put_digits(out, (tm.tm_year + 1900) % 10000, 4);
    put_digits(out + 5, tm.tm_mon + 1, 2);
    put_digits(out + 8, tm.tm_mday, 2);
    put_digits(out + 11, tm.tm_hour, 2);
    put_digits(out + 14, tm.tm_min, 2);
    put_digits(out + 17, tm.tm_sec, 2);
    put_digits(out + 20, msec % 1000, 3);
}

static int month_of(const char *s)
{
    for (int i = 0; i < 12; i++)
        if (strncasecmp(s, months[i], 3) == 0)
            return i;
    return -1;
}

/* Parse "HH:MM:SS" at p. */
static int parse_hms(const char *p, struct tm *tm)
{
    for (int i = 0; i < 8; i++) {
        if (i == 2 || i == 5) {
            if (p[i] != ':')
                return -1;
        } else if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
    }
    tm->tm_hour = (p[0] - '0') * 10 + (p[1] - '0');
    tm->tm_min = (p[3] - '0') * 10 + (p[4] - '0');
    tm->tm_sec = (p[6] - '0') * 10 + (p[7] - '0');
    return tm->tm_hour < 24 && tm->tm_min < 60 && tm->tm_sec <= 60 ? 0 : -1;
}

static int parse_uint(const char **p, int maxdigits, int *out)
{
    int v = 0, n = 0;
    while (n < maxdigits && **p >= '0' && **p <= '9') {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    *out = v;
    return n;
}

int64_t gw_http_date_parse(struct mg_str s)
{
    char buf[64];
    if (s.len == 0 || s.len >= sizeof(buf))
        return -1;
    memcpy(buf, s.base, s.len);
    buf[s.len] = '\0';
    const char *p = buf;
    while (*p == ' ')
        p++;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *comma = strchr(p, ',');
    int day, year, n;
    if (comma != NULL) {
        /* RFC 1123 "Sun, 06 Nov 1994 08:49:37 GMT" or RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT" */
        p = comma + 1;
        while (*p == ' ')
            p++;
        if (parse_uint(&p, 2, &day) == 0 || (*p != ' ' && *p != '-'))
            return -1;
        char sep = *p++;
        if ((tm.tm_mon = month_of(p)) < 0)
            return -1;
        p += 3;
        if (*p++ != sep)
            return -1;
        n = parse_uint(&p, 4, &year);
        if (n == 2)
            year += year < 70 ? 2000 : 1900;
        else if (n != 4)
            return -1;
        if (*p++ != ' ' || parse_hms(p, &tm) != 0)
            return -1;
        p += 8;
        while (*p == ' ')
            p++;
        if (strcmp(p, "GMT") != 0 && strcmp(p, "UTC") != 0 && strcmp(p, "+0000") != 0)
            return -1;
    } else {
        /* asctime "Sun Nov  6 08:49:37 1994" */
        if (strlen(p) < 24 || p[3] != ' ' || (tm.tm_mon = month_of(p + 4)) < 0 || p[7] != ' ')
            return -1;
        p += 8;
        if (*p == ' ')
            p++;
        if (parse_uint(&p, 2, &day) == 0 || *p++ != ' ' || parse_hms(p, &tm) != 0)
            return -1;
        p += 8;
        if (*p++ != ' ' || parse_uint(&p, 4, &year) != 4 || *p != '\0')
            return -1;
    }
    if (day < 1 || day > 31)
        return -1;
    tm.tm_mday = day;
    tm.tm_year = year - 1900;
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_mday != day)
        return -1;
    return (int64_t)t * 1000;
}
