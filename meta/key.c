/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key encoding (DESIGN.md 4). One ordered keyspace: integers are fixed-width
 * big-endian so byte order is numeric order; a name that ends its key is
 * stored verbatim; a name followed by another component (an object name
 * before an upload id) is escaped order-preservingly (0x00 -> 0x00 0xFF,
 * terminator 0x00 0x01), so composites sort by their first component and
 * every upload of a key sits next to the others. Decoders validate lengths
 * and escapes and answer MG_ECORRUPT on malformed keys.
 */
#include <string.h>

#define MG_MODULE "meta"
#include "meta/internal.h"

void meta__put_u64(struct mg_buf *k, uint64_t v)
{
    uint8_t b[8];
    for (int i = 7; i >= 0; i--) {
        b[i] = (uint8_t)v;
        v >>= 8;
    }
    mg_buf_append(k, b, 8);
}

void meta__put_u32(struct mg_buf *k, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    mg_buf_append(k, b, 4);
}

uint64_t meta__get_u64(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return v;
}

uint32_t meta__get_u32(const void *p)
{
    const uint8_t *b = p;
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

void meta__esc_append_open(struct mg_buf *k, struct mg_str s)
{
    static const char esc0[2] = {0x00, (char)0xFF};
    size_t start = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (s.base[i] != 0)
            continue;
        mg_buf_append(k, s.base + start, i - start);
        mg_buf_append(k, esc0, 2);
        start = i + 1;
    }
    mg_buf_append(k, s.base + start, s.len - start);
}

void meta__esc_append(struct mg_buf *k, struct mg_str s)
{
    static const char term[2] = {0x00, 0x01};
    meta__esc_append_open(k, s);
    mg_buf_append(k, term, 2);
}

int meta__esc_decode(const char *p, size_t len, struct mg_buf *out, size_t *used)
{
    size_t i = 0;
    while (i < len) {
        if (p[i] != 0) {
            mg_buf_append(out, p + i, 1);
            i++;
            continue;
        }
        if (i + 1 >= len)
            return MG_ECORRUPT;
        if ((uint8_t)p[i + 1] == 0x01) {
            *used = i + 2;
            return 0;
        }
        if ((uint8_t)p[i + 1] != 0xFF)
            return MG_ECORRUPT;
        mg_buf_append(out, p + i, 1);
        i += 2;
    }
    return MG_ECORRUPT; /* no terminator */
}

void meta__key_bucket(struct mg_buf *k, struct mg_str name)
{
    mg_buf_append(k, "B", 1);
    mg_buf_append(k, name.base, name.len);
}

void meta__key_meta_prefix(struct mg_buf *k, uint64_t bucket_id, uint64_t parent_id)
{
    mg_buf_append(k, "M", 1);
    meta__put_u64(k, bucket_id);
    meta__put_u64(k, parent_id);
}

void meta__key_object(struct mg_buf *k, uint64_t bucket_id, struct mg_str name)
{
    meta__key_meta_prefix(k, bucket_id, 0);
    mg_buf_append(k, name.base, name.len);
}

void meta__key_upload(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                      struct mg_str upload_id)
{
    mg_buf_append(k, "U", 1);
    meta__put_u64(k, bucket_id);
    meta__put_u64(k, 0);
    meta__esc_append(k, name);
    mg_buf_append(k, upload_id.base, upload_id.len);
}

void meta__key_part(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                    struct mg_str upload_id, uint32_t number)
{
    meta__key_upload(k, bucket_id, name, upload_id);
    meta__put_u32(k, number);
}

void meta__key_time_index(struct mg_buf *k, uint64_t bucket_id, int64_t created_ms,
                          struct mg_str name)
{
    const char hdr[2] = {META_T_INDEX, META_IDX_TIME};
    mg_buf_append(k, hdr, 2);
    meta__put_u64(k, bucket_id);
    meta__put_u64(k, (uint64_t)created_ms);
    mg_buf_append(k, name.base, name.len);
}

void meta__key_blob_index(struct mg_buf *k, const struct eng_blob_ref *ref)
{
    const char hdr[2] = {META_T_INDEX, META_IDX_BLOB};
    mg_buf_append(k, hdr, 2);
    meta__put_u64(k, ref->segment);
    meta__put_u64(k, ref->offset);
}

int meta__key_successor(struct mg_buf *k)
{
    while (k->len > 0 && (uint8_t)k->base[k->len - 1] == 0xFF)
        k->len--;
    if (k->len == 0)
        return -1;
    k->base[k->len - 1] = (char)((uint8_t)k->base[k->len - 1] + 1);
    return 0;
}

int meta__key_object_decode(const void *key, size_t len, uint64_t *bucket_id, uint64_t *parent_id,
                            struct mg_str *name)
{
    const char *p = key;
    if (len < META_OBJ_PREFIX_LEN || p[0] != META_T_META)
        return MG_ECORRUPT;
    *bucket_id = meta__get_u64(p + 1);
    *parent_id = meta__get_u64(p + 9);
    name->base = p + META_OBJ_PREFIX_LEN;
    name->len = len - META_OBJ_PREFIX_LEN;
    return name->len > META_KEY_MAX ? MG_ECORRUPT : 0;
}

int meta__key_upload_decode(const void *key, size_t len, uint64_t *bucket_id,
                            struct mg_buf *name_buf, struct mg_str *upload_id, uint32_t *part)
{
    const char *p = key;
    if (len < META_OBJ_PREFIX_LEN || p[0] != META_T_UPLOAD)
        return MG_ECORRUPT;
    *bucket_id = meta__get_u64(p + 1);
    if (meta__get_u64(p + 9) != 0)
        return MG_ECORRUPT; /* uploads are written with parent-id 0 (flat buckets) */
    size_t used = 0;
    size_t before = name_buf->len;
    int rv = meta__esc_decode(p + META_OBJ_PREFIX_LEN, len - META_OBJ_PREFIX_LEN, name_buf, &used);
    if (rv != 0 || name_buf->len - before > META_KEY_MAX)
        return MG_ECORRUPT;
    size_t rest = len - META_OBJ_PREFIX_LEN - used;
    if (rest != META_UPLOAD_ID_LEN && rest != META_UPLOAD_ID_LEN + 4)
        return MG_ECORRUPT;
    upload_id->base = p + META_OBJ_PREFIX_LEN + used;
    upload_id->len = META_UPLOAD_ID_LEN;
    *part = 0;
    if (rest == META_UPLOAD_ID_LEN + 4) {
        *part = meta__get_u32(upload_id->base + META_UPLOAD_ID_LEN);
        if (*part < 1 || *part > META_PART_MAX)
            return MG_ECORRUPT;
    }
    return 0;
}
