/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pending-write overlay (DESIGN.md 5; docs/ops.md): rows that ops on the
 * meta thread proposed but that have not been applied yet. An op executing
 * on the meta thread reads a row here first, then in RocksDB, so a second op
 * on the same key sees the first one's write and pipelines behind it instead
 * of waiting for its commit. Each row remembers the sequence number of the
 * entry that wrote it last; when an entry is applied its rows are dropped
 * unless a later entry overwrote them (RocksDB then holds the same value).
 * Range deletes are kept as a short list and consulted on every lookup.
 * Only the meta thread touches it: no lock.
 *
 * Bounds: at most one row per row key written by an entry in flight, and
 * entries in flight are bounded by the raft groups' max_pending (1024 each).
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/expire.h"

struct ov_row {
    struct ov_row *next;
    uint64_t hash;
    uint64_t seq;
    int tomb;
    struct mg_buf key;
    struct mg_buf value;
};

struct ov_range {
    struct ov_range *next;
    uint64_t seq;
    struct mg_buf start, end;
};

static uint64_t hash_key(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

void meta__ov_init(struct meta_overlay *ov)
{
    memset(ov, 0, sizeof(*ov));
    ov->nslots = 1024;
    ov->slots = mg_calloc(ov->nslots, sizeof(*ov->slots));
}

static void row_free(struct ov_row *r)
{
    mg_buf_close(&r->key);
    mg_buf_close(&r->value);
    mg_free(r);
}

void meta__ov_clear(struct meta_overlay *ov)
{
    for (size_t i = 0; i < ov->nslots; i++) {
        struct ov_row *r = ov->slots[i];
        while (r != NULL) {
            struct ov_row *next = r->next;
            row_free(r);
            r = next;
        }
        ov->slots[i] = NULL;
    }
    struct ov_range *g = ov->ranges;
    while (g != NULL) {
        struct ov_range *next = g->next;
        mg_buf_close(&g->start);
        mg_buf_close(&g->end);
        mg_free(g);
        g = next;
    }
    ov->ranges = NULL;
    ov->nrows = 0;
}

void meta__ov_close(struct meta_overlay *ov)
{
    meta__ov_clear(ov);
    mg_free(ov->slots);
    ov->slots = NULL;
}

static int keycmp(const void *a, size_t al, const void *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    int c = memcmp(a, b, n);
    return c != 0 ? c : (al < bl ? -1 : al > bl);
}

static struct ov_row **find(struct meta_overlay *ov, const void *k, size_t kl, uint64_t h)
{
    struct ov_row **pp = &ov->slots[h & (ov->nslots - 1)];
    while (*pp != NULL && !((*pp)->hash == h && (*pp)->key.len == kl &&
                            memcmp((*pp)->key.base, k, kl) == 0))
        pp = &(*pp)->next;
    return pp;
}

static void grow(struct meta_overlay *ov)
{
    size_t n = ov->nslots * 2;
    struct ov_row **slots = mg_calloc(n, sizeof(*slots));
    for (size_t i = 0; i < ov->nslots; i++) {
        struct ov_row *r = ov->slots[i];
        while (r != NULL) {
            struct ov_row *next = r->next;
            r->next = slots[r->hash & (n - 1)];
            slots[r->hash & (n - 1)] = r;
            r = next;
        }
    }
    mg_free(ov->slots);
    ov->slots = slots;
    ov->nslots = n;
}

static void set_row(struct meta_overlay *ov, const struct mg_str *k, const struct mg_str *v,
                    uint64_t seq)
{
    uint64_t h = hash_key(k->base, k->len);
    struct ov_row **pp = find(ov, k->base, k->len, h);
    struct ov_row *r = *pp;
    if (r == NULL) {
        if (ov->nrows >= ov->nslots)
            grow(ov), pp = find(ov, k->base, k->len, h);
        r = mg_calloc(1, sizeof(*r));
        r->hash = h;
        mg_buf_init(&r->key);
        mg_buf_init(&r->value);
        mg_buf_append(&r->key, k->base, k->len);
        *pp = r;
        ov->nrows++;
    }
    r->seq = seq;
    r->tomb = v == NULL;
    r->value.len = 0;
    if (v != NULL)
        mg_buf_append(&r->value, v->base, v->len);
}

void meta__ov_add(struct meta_overlay *ov, const struct meta_ws_record *rec, uint64_t seq)
{
    switch (rec->type) {
    case META_WS_PUT:
        set_row(ov, &rec->key, &rec->value, seq);
        break;
    case META_WS_DEL:
        set_row(ov, &rec->key, NULL, seq);
        break;
    case META_WS_DELRANGE: {
        struct ov_range *g = mg_calloc(1, sizeof(*g));
        g->seq = seq;
        mg_buf_init(&g->start);
        mg_buf_init(&g->end);
        mg_buf_append(&g->start, rec->key.base, rec->key.len);
        mg_buf_append(&g->end, rec->value.base, rec->value.len);
        g->next = ov->ranges;
        ov->ranges = g;
        break;
    }
    case META_WS_RETIRE:
    case META_WS_RESULT:
        break;
    }
}

void meta__ov_applied(struct meta_overlay *ov, const struct meta_ws_record *rec, uint64_t seq)
{
    if (rec->type == META_WS_PUT || rec->type == META_WS_DEL) {
        uint64_t h = hash_key(rec->key.base, rec->key.len);
        struct ov_row **pp = find(ov, rec->key.base, rec->key.len, h);
        if (*pp != NULL && (*pp)->seq == seq) {
            struct ov_row *r = *pp;
            *pp = r->next;
            row_free(r);
            ov->nrows--;
        }
    } else if (rec->type == META_WS_DELRANGE) {
        for (struct ov_range **pp = &ov->ranges; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->seq == seq) {
                struct ov_range *g = *pp;
                *pp = g->next;
                mg_buf_close(&g->start);
                mg_buf_close(&g->end);
                mg_free(g);
                break;
            }
        }
    }
}

int meta__ov_get(const struct meta_overlay *ov, const void *k, size_t kl, struct mg_buf *val)
{
    uint64_t h = hash_key(k, kl);
    struct ov_row *const *pp = find((struct meta_overlay *)ov, k, kl, h);
    uint64_t row_seq = *pp != NULL ? (*pp)->seq : 0;
    /* A pending range delete newer than the row (or over a row only RocksDB has) wins. */
    for (const struct ov_range *g = ov->ranges; g != NULL; g = g->next)
        if (g->seq > row_seq && keycmp(k, kl, g->start.base, g->start.len) >= 0 &&
            keycmp(k, kl, g->end.base, g->end.len) < 0)
            return META_OV_DELETED;
    if (*pp == NULL)
        return META_OV_MISS;
    if ((*pp)->tomb)
        return META_OV_DELETED;
    val->len = 0;
    mg_buf_append(val, (*pp)->value.base, (*pp)->value.len);
    return META_OV_FOUND;
}

int meta__ov_any_in_range(const struct meta_overlay *ov, const void *lo, size_t lol,
                          const void *hi, size_t hil)
{
    assert(keycmp(lo, lol, hi, hil) <= 0);
    for (size_t i = 0; i < ov->nslots; i++)
        for (const struct ov_row *r = ov->slots[i]; r != NULL; r = r->next)
            if (keycmp(r->key.base, r->key.len, lo, lol) >= 0 &&
                keycmp(r->key.base, r->key.len, hi, hil) < 0)
                return 1;
    return 0;
}
