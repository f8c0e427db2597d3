/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The write set of an op and its Raft entry encoding (docs/ops.md "Entries").
 * An op builds a struct meta_ws (puts, deletes, range deletes of rows, and
 * retire intents for blobs the op stopped referencing); the meta thread cuts
 * it into one entry per shard touched. Entry layout, all integers big-endian:
 *
 *   "MGWS" | version u8 (1) | flags u8 (0) | reserved u16 (0)
 *   request id u64 | shard id u32 | range epoch u32 | timestamp ms u64 | records u32
 *   | record bytes u32
 *   records: type u8, then
 *     PUT        klen u32, key, vlen u32, value
 *     DEL        klen u32, key
 *     DELRANGE   klen u32, start, elen u32, end        ([start, end))
 *     RETIRE     a blob ref: segment u64, offset u64, length u64, crc32c u32, flags u32
 *     RESULT     vlen u32, the op's outcome as meta__opcodec_encode_out writes it (a
 *                cluster's last entry of an op with a request id: every replica's dedup
 *                table answers a retry with it, shard.c)
 *   zero padding so the entry is a multiple of 8 bytes (libraft 0.15's segment reader
 *   assumes padded entry data) | crc32c u32 of every byte before it
 *
 * The decoder (meta__ws_decode) checks everything before the caller applies
 * anything: magic, version, bounds, record count, CRC; it never asserts on
 * input (fuzzed by tests/fuzz/fuzz_meta_wset.c).
 */
#ifndef MG_META_WSET_H
#define MG_META_WSET_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "engine/engine.h"

#define META_WS_VERSION 1
#define META_WS_HEADER_BYTES 40
#define META_WS_KEY_MAX (64u << 10)    /* row keys are ~1 KiB; anything larger is corrupt */
#define META_WS_VALUE_MAX (64u << 20)  /* a 10,000-part object entry is ~1 MiB */
#define META_WS_RECORDS_MAX 1000000u

enum meta_ws_rec {
    META_WS_PUT = 1,
    META_WS_DEL = 2,
    META_WS_DELRANGE = 3,
    META_WS_RETIRE = 4,
    META_WS_RESULT = 5,
};

struct meta_ws_header {
    uint64_t request_id;
    uint32_t shard_id;
    uint32_t range_epoch;
    int64_t timestamp_ms;
    uint32_t nrecords;
};

/* One decoded record; key/value point into the entry. */
struct meta_ws_record {
    enum meta_ws_rec type;
    struct mg_str key;   /* PUT, DEL; DELRANGE: start */
    struct mg_str value; /* PUT; DELRANGE: end; RESULT: the encoded outcome */
    struct eng_blob_ref ref; /* RETIRE */
};

/* A write set under construction: records only (no header), in order. */
struct meta_ws {
    struct mg_buf recs;
    uint32_t n;
};

struct meta_ws *meta__ws_create(void);
void meta__ws_destroy(struct meta_ws *ws);
void meta__ws_put(struct meta_ws *ws, const void *k, size_t kl, const void *v, size_t vl);
void meta__ws_delete(struct meta_ws *ws, const void *k, size_t kl);
void meta__ws_delete_range(struct meta_ws *ws, const void *start, size_t sl, const void *end,
                           size_t el);
void meta__ws_retire(struct meta_ws *ws, const struct eng_blob_ref *ref);
void meta__ws_result(struct meta_ws *ws, const void *v, size_t vl);
/* Rows (not retires or results) in ws: 0 means nothing to propose. */
size_t meta__ws_count(const struct meta_ws *ws);

/* Append one record (as decoded) to ws. */
void meta__ws_add(struct meta_ws *ws, const struct meta_ws_record *r);

/* Encode header + the records of ws into out (appended). */
void meta__ws_encode(const struct meta_ws *ws, const struct meta_ws_header *h,
                     struct mg_buf *out);
/* The same with one RESULT record (result, rlen) after the records of ws; result NULL: none. */
void meta__ws_encode_result(const struct meta_ws *ws, const struct meta_ws_header *h,
                            const void *result, size_t rlen, struct mg_buf *out);

/* Validate an entry; on success *h is its header. Returns 0 or MG_ECORRUPT. */
int meta__ws_decode(const void *buf, size_t len, struct meta_ws_header *h);

/* Walk the records of a validated entry (or of a builder's records with hdr_bytes 0 and
 * no CRC: meta__ws_walk_builder). *pos starts at 0. Returns 1 with *r set, 0 at the end,
 * MG_ECORRUPT on malformed input. */
int meta__ws_next(const void *buf, size_t len, size_t *pos, struct meta_ws_record *r);
int meta__ws_next_builder(const struct meta_ws *ws, size_t *pos, struct meta_ws_record *r);

#endif
