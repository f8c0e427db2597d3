/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key encoding (DESIGN.md 4; the layout is drawn in meta/internal.h, "key
 * schema"). This file owns every key and every range bound of meta/: no other
 * file writes key bytes. One ordered keyspace in ENG_CF_META whose first byte
 * names the owner: 0x01 node-local system rows (format version, shard count,
 * applied indexes), 0x02 shard 0 (bucket records, sequences), 0x03 · bucket-id ·
 * table · ... bucket data, so every row of a bucket (counters, entries,
 * uploads and parts, its due/time/blob index rows) is one contiguous range:
 * an op touches one shard, and a range shard can be cut at a bucket boundary
 * (meta__key_bucket_of routes a key). Integers are fixed-width big-endian so
 * byte order is numeric order; a name that ends its key is stored verbatim; a
 * name followed by another component (an object name before an upload id) is
 * escaped order-preservingly (0x00 -> 0x00 0xFF, terminator 0x00 0x01), so
 * composites sort by their first component and every upload of a key sits
 * next to the others. Decoders validate lengths, prefixes and escapes and
 * answer MG_ECORRUPT on malformed keys.
 */
#include <assert.h>
#include <string.h>

#define MG_MODULE "meta"
#include "meta/split.h"
#include "meta/internal.h"
#include "meta/expire.h"
#include "meta/orphan.h"
#include "meta/cluster.h"

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
    if (s.len == 0)
        return; /* s.base may be NULL: no pointer arithmetic on it (UBSan, fuzz_meta_entry) */
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

/* meta__key_successor of the key that starts at k->base + start. */
static int successor_at(struct mg_buf *k, size_t start)
{
    while (k->len > start && (uint8_t)k->base[k->len - 1] == 0xFF)
        k->len--;
    if (k->len == start)
        return -1;
    k->base[k->len - 1] = (char)((uint8_t)k->base[k->len - 1] + 1);
    return 0;
}

int meta__key_successor(struct mg_buf *k)
{
    return successor_at(k, 0);
}

/* ------------------------------------------------------------- builders */

static void put_hdr(struct mg_buf *k, uint8_t owner, char tag)
{
    const char hdr[2] = {(char)owner, tag};
    mg_buf_append(k, hdr, 2);
}

/* 0x03 · bucket-id · table */
static void put_table(struct mg_buf *k, uint64_t bucket_id, char table)
{
    const char owner = META_K_DATA;
    mg_buf_append(k, &owner, 1);
    meta__put_u64(k, bucket_id);
    mg_buf_append(k, &table, 1);
}

void meta__key_sys_version(struct mg_buf *k)
{
    put_hdr(k, META_K_SYS, META_SYS_VERSION);
}

void meta__key_applied(struct mg_buf *k, uint32_t shard_id)
{
    put_hdr(k, META_K_SYS, META_SYS_APPLIED);
    meta__put_u32(k, shard_id);
}

void meta__key_sys_shards(struct mg_buf *k)
{
    put_hdr(k, META_K_SYS, META_SYS_SHARDS);
}

/* Split layout and split command keys (meta/split.h). */
void meta__key_sys_layout(struct mg_buf *k)
{
    put_hdr(k, META_K_SYS, META_SYS_LAYOUT);
}

void meta__key_sys_split(struct mg_buf *k)
{
    put_hdr(k, META_K_SYS, META_SYS_SPLIT);
}

void meta__key_bucket(struct mg_buf *k, struct mg_str name)
{
    put_hdr(k, META_K_SHARD0, META_S0_BUCKET);
    mg_buf_append(k, name.base, name.len);
}

void meta__key_seq(struct mg_buf *k, struct mg_str name)
{
    put_hdr(k, META_K_SHARD0, META_S0_SEQ);
    mg_buf_append(k, name.base, name.len);
}

/* The cluster map's rows (meta/cluster.h). */
void meta__key_cluster_node(struct mg_buf *k, uint64_t node_id)
{
    put_hdr(k, META_K_SHARD0, 'N');
    meta__put_u64(k, node_id);
}

void meta__key_cluster_shard(struct mg_buf *k, uint32_t shard_id)
{
    put_hdr(k, META_K_SHARD0, 'H');
    meta__put_u32(k, shard_id);
}

void meta__key_bucket_attr(struct mg_buf *k, uint64_t bucket_id)
{
    put_table(k, bucket_id, META_TBL_ATTR);
}

void meta__key_due(struct mg_buf *k, uint64_t bucket_id, int64_t due_ms, struct mg_str key)
{
    put_table(k, bucket_id, META_TBL_DUE);
    meta__put_u64(k, (uint64_t)due_ms);
    mg_buf_append(k, key.base, key.len);
}

void meta__key_lc_progress(struct mg_buf *k, uint64_t bucket_id)
{
    put_table(k, bucket_id, META_TBL_LC_PROGRESS);
}

void meta__key_meta_prefix(struct mg_buf *k, uint64_t bucket_id, uint64_t parent_id)
{
    put_table(k, bucket_id, META_TBL_META);
    meta__put_u64(k, parent_id);
}

void meta__key_object(struct mg_buf *k, uint64_t bucket_id, struct mg_str name)
{
    meta__key_meta_prefix(k, bucket_id, 0);
    mg_buf_append(k, name.base, name.len);
}

void meta__key_object_after(struct mg_buf *k, uint64_t bucket_id, struct mg_str name)
{
    meta__key_object(k, bucket_id, name);
    mg_buf_append(k, "", 1); /* name · 0x00: nothing sorts between */
}

void meta__key_object_past_prefix(struct mg_buf *k, uint64_t bucket_id, struct mg_str prefix)
{
    size_t start = k->len;
    meta__key_object(k, bucket_id, prefix);
    int none = successor_at(k, start);
    assert(none == 0); /* the key starts with 0x03: a successor always exists */
    (void)none;
}

/* 0x03 · bucket-id · 'U' · parent-id 0 (uploads live in the flat namespace) */
static void put_upload_prefix(struct mg_buf *k, uint64_t bucket_id)
{
    put_table(k, bucket_id, META_TBL_UPLOAD);
    meta__put_u64(k, 0);
}

void meta__key_upload(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                      struct mg_str upload_id)
{
    put_upload_prefix(k, bucket_id);
    meta__esc_append(k, name);
    mg_buf_append(k, upload_id.base, upload_id.len);
}

void meta__key_part(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                    struct mg_str upload_id, uint32_t number)
{
    meta__key_upload(k, bucket_id, name, upload_id);
    meta__put_u32(k, number);
}

void meta__key_upload_after(struct mg_buf *k, uint64_t bucket_id, struct mg_str name,
                            struct mg_str upload_id)
{
    meta__key_upload(k, bucket_id, name, upload_id);
    if (upload_id.len > 0)
        mg_buf_append(k, "\xff", 1); /* past that upload's parts (they start 0x00) */
    else
        k->base[k->len - 1] = 0x02; /* the terminator 00 01 -> 00 02: past every upload */
}

void meta__key_time_index(struct mg_buf *k, uint64_t bucket_id, int64_t created_ms,
                          struct mg_str name)
{
    put_table(k, bucket_id, META_TBL_TIME);
    meta__put_u64(k, (uint64_t)created_ms);
    mg_buf_append(k, name.base, name.len);
}

void meta__key_blob_index(struct mg_buf *k, uint64_t bucket_id, const struct eng_blob_ref *ref)
{
    put_table(k, bucket_id, META_TBL_BLOB);
    meta__put_u64(k, ref->segment);
    meta__put_u64(k, ref->offset);
}

/* The retire intent of a blob (meta/orphan.c): node-local, like the applied index, since the
 * blob store is the node's own. */
void meta__key_retire_intent(struct mg_buf *k, const struct eng_blob_ref *ref)
{
    put_hdr(k, META_K_SYS, META_SYS_RETIRE);
    meta__put_u64(k, ref->segment);
    meta__put_u64(k, ref->offset);
}

/* --------------------------------------------------------------- bounds */

void meta__key_retire_intents_range(struct mg_buf *lo, struct mg_buf *hi)
{
    put_hdr(lo, META_K_SYS, META_SYS_RETIRE);
    put_hdr(hi, META_K_SYS, META_SYS_RETIRE + 1);
}

static void owner_range(uint8_t owner, struct mg_buf *lo, struct mg_buf *hi)
{
    const char l = (char)owner, h = (char)(owner + 1);
    mg_buf_append(lo, &l, 1);
    mg_buf_append(hi, &h, 1);
}

void meta__key_shard0_range(struct mg_buf *lo, struct mg_buf *hi)
{
    owner_range(META_K_SHARD0, lo, hi);
}

void meta__key_buckets_range(struct mg_buf *lo, struct mg_buf *hi)
{
    put_hdr(lo, META_K_SHARD0, META_S0_BUCKET);
    put_hdr(hi, META_K_SHARD0, META_S0_BUCKET + 1);
}

void meta__key_data_range(struct mg_buf *lo, struct mg_buf *hi)
{
    owner_range(META_K_DATA, lo, hi);
}

void meta__key_bucket_range(uint64_t bucket_id, struct mg_buf *lo, struct mg_buf *hi)
{
    const char owner = META_K_DATA;
    mg_buf_append(lo, &owner, 1);
    meta__put_u64(lo, bucket_id);
    if (bucket_id == UINT64_MAX) { /* the last bucket ends where the data range does */
        const char end = META_K_DATA + 1;
        mg_buf_append(hi, &end, 1);
        return;
    }
    mg_buf_append(hi, &owner, 1);
    meta__put_u64(hi, bucket_id + 1);
}

void meta__key_table_range(uint64_t bucket_id, char table, struct mg_buf *lo, struct mg_buf *hi)
{
    assert((uint8_t)table < 0xFF);
    put_table(lo, bucket_id, table);
    put_table(hi, bucket_id, (char)(table + 1));
}

void meta__key_object_range(uint64_t bucket_id, struct mg_str prefix, struct mg_buf *lo,
                            struct mg_buf *hi)
{
    meta__key_object(lo, bucket_id, prefix);
    meta__key_object_past_prefix(hi, bucket_id, prefix);
}

void meta__key_upload_range(uint64_t bucket_id, struct mg_str prefix, struct mg_buf *lo,
                            struct mg_buf *hi)
{
    size_t lo_start = lo->len, hi_start = hi->len;
    put_upload_prefix(lo, bucket_id);
    meta__esc_append_open(lo, prefix);
    mg_buf_append(hi, lo->base + lo_start, lo->len - lo_start);
    int none = successor_at(hi, hi_start);
    assert(none == 0); /* starts with 0x03 */
    (void)none;
}

void meta__key_part_range(uint64_t bucket_id, struct mg_str name, struct mg_str upload_id,
                          uint32_t after, struct mg_buf *lo, struct mg_buf *hi)
{
    assert(after < UINT32_MAX);
    meta__key_part(lo, bucket_id, name, upload_id, after + 1);
    meta__key_upload_after(hi, bucket_id, name, upload_id);
}

/* ------------------------------------------------------------- decoders */

int meta__key_bucket_of(const void *key, size_t len, uint64_t *bucket_id)
{
    const uint8_t *p = key;
    if (len < META_BUCKET_KEY_LEN || p[0] != META_K_DATA)
        return MG_ECORRUPT;
    *bucket_id = meta__get_u64(p + 1);
    return 0;
}

int meta__key_bucket_decode(const void *key, size_t len, struct mg_str *name)
{
    const char *p = key;
    if (len < 2 || p[0] != META_K_SHARD0 || p[1] != META_S0_BUCKET ||
        len - 2 > META_BUCKET_NAME_MAX)
        return MG_ECORRUPT;
    name->base = p + 2;
    name->len = len - 2;
    return 0;
}

/* The bucket id of a row of table, at least min bytes long. */
static int table_row(const char *p, size_t len, char table, size_t min, uint64_t *bucket_id)
{
    if (len < min || min < META_TABLE_KEY_LEN || p[0] != META_K_DATA ||
        p[META_BUCKET_KEY_LEN] != table)
        return MG_ECORRUPT;
    *bucket_id = meta__get_u64(p + 1);
    return 0;
}

int meta__key_object_decode(const void *key, size_t len, uint64_t *bucket_id, uint64_t *parent_id,
                            struct mg_str *name)
{
    const char *p = key;
    if (table_row(p, len, META_TBL_META, META_OBJ_PREFIX_LEN, bucket_id) != 0)
        return MG_ECORRUPT;
    *parent_id = meta__get_u64(p + META_TABLE_KEY_LEN);
    name->base = p + META_OBJ_PREFIX_LEN;
    name->len = len - META_OBJ_PREFIX_LEN;
    return name->len > META_KEY_MAX ? MG_ECORRUPT : 0;
}

int meta__key_upload_decode(const void *key, size_t len, uint64_t *bucket_id,
                            struct mg_buf *name_buf, struct mg_str *upload_id, uint32_t *part)
{
    const char *p = key;
    if (table_row(p, len, META_TBL_UPLOAD, META_OBJ_PREFIX_LEN, bucket_id) != 0)
        return MG_ECORRUPT;
    if (meta__get_u64(p + META_TABLE_KEY_LEN) != 0)
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

int meta__key_due_decode(const void *key, size_t len, uint64_t *bucket_id, int64_t *due_ms,
                         struct mg_str *key_out)
{
    const char *p = key;
    if (table_row(p, len, META_TBL_DUE, META_TABLE_KEY_LEN + 8, bucket_id) != 0)
        return MG_ECORRUPT;
    uint64_t due = meta__get_u64(p + META_TABLE_KEY_LEN);
    if (due > INT64_MAX)
        return MG_ECORRUPT;
    *due_ms = (int64_t)due;
    key_out->base = p + META_TABLE_KEY_LEN + 8;
    key_out->len = len - META_TABLE_KEY_LEN - 8;
    return key_out->len == 0 || key_out->len > META_KEY_MAX ? MG_ECORRUPT : 0;
}

/* The orphan collector asks "which live blobs does any bucket's index name" for all blobs at
 * once, walking every 'X' table in order: it needs the (segment, offset) of each row. */
int meta__key_blob_index_decode(const void *key, size_t len, uint64_t *bucket_id,
                                uint64_t *segment, uint64_t *offset)
{
    const char *p = key;
    if (table_row(p, len, META_TBL_BLOB, META_TABLE_KEY_LEN + 16, bucket_id) != 0 ||
        len != META_TABLE_KEY_LEN + 16)
        return MG_ECORRUPT;
    *segment = meta__get_u64(p + META_TABLE_KEY_LEN);
    *offset = meta__get_u64(p + META_TABLE_KEY_LEN + 8);
    return 0;
}
