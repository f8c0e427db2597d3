/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation policy and the arena (STYLE.md 4). mg_malloc and friends abort
 * on out-of-memory, so callers never check for NULL. struct mg_arena is the
 * request-lifetime pool for meta/ and engine/, which cannot use h2o's pool:
 * everything allocated from it dies in mg_arena_close. Not thread-safe; an
 * arena belongs to one request.
 */
#ifndef MG_COMMON_MEM_H
#define MG_COMMON_MEM_H

#include <stddef.h>
#include <stdint.h>

void *mg_malloc(size_t n);
void *mg_calloc(size_t count, size_t n);
void *mg_realloc(void *p, size_t n);
char *mg_strndup(const char *s, size_t n);
void mg_free(void *p);

struct mg_arena_chunk;
struct mg_arena {
    struct mg_arena_chunk *head; /* newest chunk first */
    size_t used;                 /* bytes used in head */
    size_t cap;                  /* capacity of head */
};

void mg_arena_init(struct mg_arena *a);
/* Frees every allocation made from a. */
void mg_arena_close(struct mg_arena *a);
/* 16-byte aligned; never NULL. */
void *mg_arena_alloc(struct mg_arena *a, size_t n);
/* Copy of (p, n) plus a NUL terminator. */
char *mg_arena_dup(struct mg_arena *a, const void *p, size_t n);

/* A growable byte buffer owned by its user (mg_buf_close frees it). */
struct mg_buf {
    char *base;  /* bytes */
    size_t len;  /* used */
    size_t cap;  /* allocated */
};

void mg_buf_init(struct mg_buf *b);
void mg_buf_close(struct mg_buf *b);
void mg_buf_reserve(struct mg_buf *b, size_t extra);
void mg_buf_append(struct mg_buf *b, const void *p, size_t n);
void mg_buf_appendf(struct mg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
