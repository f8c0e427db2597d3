/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Write sets and their versioned, endian-fixed Raft entry encoding (layout in
 * meta/wset.h). Builders are written by one op on the meta thread; entries are
 * decoded on every replica and during log replay, so the decoder validates
 * every length against the buffer and never asserts on input (STYLE.md 3).
 */
#include <assert.h>
#include <string.h>

#include <isa-l/crc.h>

#define MG_MODULE "meta"
#include "meta/wset.h"

static void put_u32(struct mg_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    mg_buf_append(b, x, 4);
}

static void put_u64(struct mg_buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)(v >> 32));
    put_u32(b, (uint32_t)v);
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

struct meta_ws *meta__ws_create(void)
{
    struct meta_ws *ws = mg_calloc(1, sizeof(*ws));
    mg_buf_init(&ws->recs);
    return ws;
}

void meta__ws_destroy(struct meta_ws *ws)
{
    if (ws == NULL)
        return;
    mg_buf_close(&ws->recs);
    mg_free(ws);
}

static void put_bytes(struct mg_buf *b, const void *p, size_t n)
{
    put_u32(b, (uint32_t)n);
    mg_buf_append(b, p, n);
}

void meta__ws_put(struct meta_ws *ws, const void *k, size_t kl, const void *v, size_t vl)
{
    assert(kl > 0 && kl <= META_WS_KEY_MAX && vl <= META_WS_VALUE_MAX);
    uint8_t t = META_WS_PUT;
    mg_buf_append(&ws->recs, &t, 1);
    put_bytes(&ws->recs, k, kl);
    put_bytes(&ws->recs, v, vl);
    ws->n++;
}

void meta__ws_delete(struct meta_ws *ws, const void *k, size_t kl)
{
    assert(kl > 0 && kl <= META_WS_KEY_MAX);
    uint8_t t = META_WS_DEL;
    mg_buf_append(&ws->recs, &t, 1);
    put_bytes(&ws->recs, k, kl);
    ws->n++;
}

void meta__ws_delete_range(struct meta_ws *ws, const void *start, size_t sl, const void *end,
                           size_t el)
{
    assert(sl > 0 && sl <= META_WS_KEY_MAX && el > 0 && el <= META_WS_KEY_MAX);
    uint8_t t = META_WS_DELRANGE;
    mg_buf_append(&ws->recs, &t, 1);
    put_bytes(&ws->recs, start, sl);
    put_bytes(&ws->recs, end, el);
    ws->n++;
}

void meta__ws_retire(struct meta_ws *ws, const struct eng_blob_ref *ref)
{
    uint8_t t = META_WS_RETIRE;
    mg_buf_append(&ws->recs, &t, 1);
    put_u64(&ws->recs, ref->segment);
    put_u64(&ws->recs, ref->offset);
    put_u64(&ws->recs, ref->length);
    put_u32(&ws->recs, ref->crc32c);
    put_u32(&ws->recs, ref->flags);
    ws->n++;
}

void meta__ws_result(struct meta_ws *ws, const void *v, size_t vl)
{
    assert(vl <= META_WS_VALUE_MAX);
    uint8_t t = META_WS_RESULT;
    mg_buf_append(&ws->recs, &t, 1);
    put_bytes(&ws->recs, v, vl);
    ws->n++;
}

size_t meta__ws_count(const struct meta_ws *ws)
{
    size_t pos = 0, rows = 0;
    struct meta_ws_record r;
    while (meta__ws_next_builder(ws, &pos, &r) == 1)
        rows += r.type != META_WS_RETIRE && r.type != META_WS_RESULT;
    return rows;
}

void meta__ws_add(struct meta_ws *ws, const struct meta_ws_record *r)
{
    switch (r->type) {
    case META_WS_PUT:
        meta__ws_put(ws, r->key.base, r->key.len, r->value.base, r->value.len);
        break;
    case META_WS_DEL:
        meta__ws_delete(ws, r->key.base, r->key.len);
        break;
    case META_WS_DELRANGE:
        meta__ws_delete_range(ws, r->key.base, r->key.len, r->value.base, r->value.len);
        break;
    case META_WS_RETIRE:
        meta__ws_retire(ws, &r->ref);
        break;
    case META_WS_RESULT:
        meta__ws_result(ws, r->value.base, r->value.len);
        break;
    }
}

void meta__ws_encode(const struct meta_ws *ws, const struct meta_ws_header *h,
                     struct mg_buf *out)
{
    meta__ws_encode_result(ws, h, NULL, 0, out);
}

void meta__ws_encode_result(const struct meta_ws *ws, const struct meta_ws_header *h,
                            const void *result, size_t rlen, struct mg_buf *out)
{
    assert(rlen <= META_WS_VALUE_MAX);
    size_t extra = result != NULL ? 1 + 4 + rlen : 0;
    size_t start = out->len;
    mg_buf_reserve(out, META_WS_HEADER_BYTES + ws->recs.len + extra + 4);
    mg_buf_append(out, "MGWS", 4);
    const uint8_t vf[4] = {META_WS_VERSION, 0, 0, 0};
    mg_buf_append(out, vf, 4);
    put_u64(out, h->request_id);
    put_u32(out, h->shard_id);
    put_u32(out, h->range_epoch);
    put_u64(out, (uint64_t)h->timestamp_ms);
    put_u32(out, ws->n + (result != NULL));
    put_u32(out, (uint32_t)(ws->recs.len + extra));
    assert(out->len - start == META_WS_HEADER_BYTES);
    mg_buf_append(out, ws->recs.base, ws->recs.len);
    if (result != NULL) {
        uint8_t t = META_WS_RESULT;
        mg_buf_append(out, &t, 1);
        put_bytes(out, result, rlen);
    }
    /* libraft 0.15's segment reader expects every entry's data padded to 8 bytes (its
     * writer does not pad): zeros up to a multiple of 8 including the CRC. */
    static const uint8_t zeros[8];
    size_t pad = (8 - (out->len - start + 4) % 8) % 8;
    mg_buf_append(out, zeros, pad);
    uint32_t crc = crc32_iscsi((unsigned char *)out->base + start, out->len - start, 0);
    put_u32(out, crc);
}

/* Bytes (u32 length + data) at *pos of [p, p+len). */
static int take_bytes(const uint8_t *p, size_t len, size_t *pos, size_t max, struct mg_str *out)
{
    if (len - *pos < 4)
        return MG_ECORRUPT;
    uint32_t n = get_u32(p + *pos);
    *pos += 4;
    if (n > max || len - *pos < n)
        return MG_ECORRUPT;
    out->base = (const char *)p + *pos;
    out->len = n;
    *pos += n;
    return 0;
}

static int next_record(const uint8_t *p, size_t len, size_t *pos, struct meta_ws_record *r)
{
    if (*pos >= len)
        return 0;
    memset(r, 0, sizeof(*r));
    uint8_t t = p[(*pos)++];
    int rv = 0;
    switch (t) {
    case META_WS_PUT:
        rv = take_bytes(p, len, pos, META_WS_KEY_MAX, &r->key);
        if (rv == 0)
            rv = take_bytes(p, len, pos, META_WS_VALUE_MAX, &r->value);
        if (rv == 0 && r->key.len == 0)
            rv = MG_ECORRUPT;
        break;
    case META_WS_DEL:
        rv = take_bytes(p, len, pos, META_WS_KEY_MAX, &r->key);
        if (rv == 0 && r->key.len == 0)
            rv = MG_ECORRUPT;
        break;
    case META_WS_DELRANGE:
        rv = take_bytes(p, len, pos, META_WS_KEY_MAX, &r->key);
        if (rv == 0)
            rv = take_bytes(p, len, pos, META_WS_KEY_MAX, &r->value);
        if (rv == 0 && (r->key.len == 0 || r->value.len == 0))
            rv = MG_ECORRUPT;
        break;
    case META_WS_RETIRE:
        if (len - *pos < 32)
            return MG_ECORRUPT;
        r->ref.segment = get_u64(p + *pos);
        r->ref.offset = get_u64(p + *pos + 8);
        r->ref.length = get_u64(p + *pos + 16);
        r->ref.crc32c = get_u32(p + *pos + 24);
        r->ref.flags = get_u32(p + *pos + 28);
        *pos += 32;
        break;
    case META_WS_RESULT:
        rv = take_bytes(p, len, pos, META_WS_VALUE_MAX, &r->value);
        break;
    default:
        return MG_ECORRUPT;
    }
    if (rv != 0)
        return rv;
    r->type = (enum meta_ws_rec)t;
    return 1;
}

int meta__ws_decode(const void *buf, size_t len, struct meta_ws_header *h)
{
    const uint8_t *p = buf;
    if (buf == NULL || len < META_WS_HEADER_BYTES + 4 || memcmp(p, "MGWS", 4) != 0)
        return MG_ECORRUPT;
    if (p[4] != META_WS_VERSION || p[5] != 0 || p[6] != 0 || p[7] != 0)
        return MG_ECORRUPT;
    uint32_t crc = crc32_iscsi((unsigned char *)p, len - 4, 0);
    if (crc != get_u32(p + len - 4))
        return MG_ECORRUPT;
    h->request_id = get_u64(p + 8);
    h->shard_id = get_u32(p + 16);
    h->range_epoch = get_u32(p + 20);
    h->timestamp_ms = (int64_t)get_u64(p + 24);
    h->nrecords = get_u32(p + 32);
    uint32_t reclen = get_u32(p + 36);
    if (h->nrecords > META_WS_RECORDS_MAX || reclen > len - META_WS_HEADER_BYTES - 4 ||
        len % 8 != 0 || len - META_WS_HEADER_BYTES - 4 - reclen >= 8)
        return MG_ECORRUPT;
    for (size_t i = META_WS_HEADER_BYTES + reclen; i < len - 4; i++)
        if (p[i] != 0)
            return MG_ECORRUPT;
    /* Every record must parse and their count must match. */
    size_t pos = 0;
    uint32_t n = 0;
    struct meta_ws_record r;
    int rv;
    while ((rv = meta__ws_next(buf, len, &pos, &r)) == 1)
        n++;
    if (rv != 0 || n != h->nrecords)
        return MG_ECORRUPT;
    return 0;
}

int meta__ws_next(const void *buf, size_t len, size_t *pos, struct meta_ws_record *r)
{
    /* Records live between the header and the CRC. */
    if (len < META_WS_HEADER_BYTES + 4)
        return MG_ECORRUPT;
    const uint8_t *p = (const uint8_t *)buf + META_WS_HEADER_BYTES;
    uint32_t reclen = get_u32((const uint8_t *)buf + 36);
    if (reclen > len - META_WS_HEADER_BYTES - 4)
        return MG_ECORRUPT;
    return next_record(p, reclen, pos, r);
}

int meta__ws_next_builder(const struct meta_ws *ws, size_t *pos, struct meta_ws_record *r)
{
    return next_record((const uint8_t *)ws->recs.base, ws->recs.len, pos, r);
}
