/* SPDX-License-Identifier: Apache-2.0 */
/* Aborting allocators, the request arena and growable buffers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "common"
#include "common/log.h"
#include "common/mem.h"

static void oom(size_t n)
{
    mg_log(MG_LOG_FATAL, "event=oom bytes=%zu", n);
    abort();
}

void *mg_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *mg_calloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (p == NULL)
        oom(count * n);
    return p;
}

void *mg_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *mg_strndup(const char *s, size_t n)
{
    char *d = mg_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void mg_free(void *p)
{
    free(p);
}

struct mg_arena_chunk {
    struct mg_arena_chunk *next;
    size_t pad; /* keeps data 16-byte aligned */
    _Alignas(16) char data[];
};

void mg_arena_init(struct mg_arena *a)
{
    a->head = NULL;
    a->used = a->cap = 0;
}

void mg_arena_close(struct mg_arena *a)
{
    struct mg_arena_chunk *c = a->head;
    while (c != NULL) {
        struct mg_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    mg_arena_init(a);
}

void *mg_arena_alloc(struct mg_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->head == NULL || a->used + n > a->cap) {
        size_t cap = n > 4000 ? n : 4000;
        struct mg_arena_chunk *c = mg_malloc(sizeof(*c) + cap);
        c->next = a->head;
        a->head = c;
        a->used = 0;
        a->cap = cap;
    }
    void *p = a->head->data + a->used;
    a->used += n;
    return p;
}

char *mg_arena_dup(struct mg_arena *a, const void *p, size_t n)
{
    char *d = mg_arena_alloc(a, n + 1);
    if (n)
        memcpy(d, p, n);
    d[n] = '\0';
    return d;
}

void mg_buf_init(struct mg_buf *b)
{
    b->base = NULL;
    b->len = b->cap = 0;
}

void mg_buf_close(struct mg_buf *b)
{
    free(b->base);
    mg_buf_init(b);
}

void mg_buf_reserve(struct mg_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->base = mg_realloc(b->base, cap);
    b->cap = cap;
}

void mg_buf_append(struct mg_buf *b, const void *p, size_t n)
{
    mg_buf_reserve(b, n);
    if (n)
        memcpy(b->base + b->len, p, n);
    b->len += n;
    b->base[b->len] = '\0';
}

void mg_buf_appendf(struct mg_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    mg_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->base + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}
