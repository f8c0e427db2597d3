/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the metadata key codec (meta/key.c, meta/internal.h's key
 * schema). Every row key a replica or a restart reads back goes through these decoders,
 * so any byte string must decode or be MG_ECORRUPT (STYLE.md 3). Checked on every input:
 *
 *   - decode: the whole input as a key through each decoder (bucket, object, upload/part,
 *     due, blob index, bucket_of, esc); a key that decodes re-encodes with the builders to
 *     exactly the same bytes (one encoding per row); a key in the retire-intent range is an
 *     intent key (0x01 'R' segment offset) exactly when it has that length, and then
 *     meta__key_retire_intent of its (segment, offset) gives it back; a writer-id key
 *     (0x01 'W' id, meta/orphan.h) that decodes re-encodes to the same bytes;
 *   - encode: values taken from the input (bucket id, due time, part number, an object
 *     name and a prefix, a 32-byte upload id, a blob's segment and offset) build each key,
 *     which decodes back to them; blob index and retire-intent keys sort as their
 *     (segment, offset), the first within its bucket's range, the second within the
 *     intents range and no other row kind's (the collector walks both in order); writer-id
 *     keys sort as their ids and lie outside the intents range;
 *   - order: keys sort as their names (bytewise, shorter first), escaped upload names too;
 *     a range [lo, hi) from meta__key_object_range / upload_range / part_range / bucket_range
 *     holds a key exactly when its name has the prefix (part number is above `after`, id
 *     is the bucket's); object_after is the next key after name's; past_prefix is above
 *     every name with the prefix and not above a larger name without it.
 *
 * Input layout for the encode half: u64 bucket id, u64 due, u32 part, u8 name length, then
 * the name and the rest as the prefix; the blob refs are (due, id) and (id, due). Seed corpus:
 * tests/fuzz/corpus/key/ (replayed as a plain ctest, label fuzz).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "meta/internal.h"
#include "meta/orphan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

/* RocksDB's bytewise order: memcmp, then the shorter first. */
static int cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return c < 0 ? -1 : 1;
    return alen < blen ? -1 : alen > blen;
}

static int bcmp_buf(const struct mg_buf *a, const struct mg_buf *b)
{
    return cmp(a->base, a->len, b->base, b->len);
}

static int same(const struct mg_buf *k, const void *p, size_t len)
{
    return k->len == len && (len == 0 || memcmp(k->base, p, len) == 0);
}

static int starts_with(struct mg_str s, struct mg_str prefix)
{
    return s.len >= prefix.len && (prefix.len == 0 || memcmp(s.base, prefix.base, prefix.len) == 0);
}

/* lo <= k < hi */
static int in_range(const struct mg_buf *k, const struct mg_buf *lo, const struct mg_buf *hi)
{
    return bcmp_buf(lo, k) <= 0 && bcmp_buf(k, hi) < 0;
}

/* The whole input as a key: each decoder that accepts it must give back its bytes. */
static void decode_all(const uint8_t *key, size_t len)
{
    struct mg_buf k, name;
    struct mg_str s, uid;
    uint64_t id, parent;
    int64_t due;
    uint32_t part;
    size_t used = 0;

    mg_buf_init(&k);
    mg_buf_init(&name);
    if (meta__key_bucket_decode(key, len, &s) == 0) {
        meta__key_bucket(&k, s);
        check(same(&k, key, len));
    }
    k.len = 0;
    if (meta__key_object_decode(key, len, &id, &parent, &s) == 0) {
        check(s.len <= META_KEY_MAX);
        meta__key_meta_prefix(&k, id, parent);
        mg_buf_append(&k, s.base, s.len);
        check(same(&k, key, len));
    }
    k.len = 0;
    if (meta__key_upload_decode(key, len, &id, &name, &uid, &part) == 0) {
        struct mg_str n = {name.base ? name.base : "", name.len};
        check(uid.len == META_UPLOAD_ID_LEN && part <= META_PART_MAX);
        if (part == 0)
            meta__key_upload(&k, id, n, uid);
        else
            meta__key_part(&k, id, n, uid, part);
        check(same(&k, key, len));
    }
    k.len = 0;
    if (meta__key_due_decode(key, len, &id, &due, &s) == 0) {
        check(due >= 0 && s.len >= 1 && s.len <= META_KEY_MAX);
        meta__key_due(&k, id, due, s);
        check(same(&k, key, len));
    }
    k.len = 0;
    uint64_t seg, off;
    if (meta__key_blob_index_decode(key, len, &id, &seg, &off) == 0) {
        meta__key_blob_index(&k, id, &(struct eng_blob_ref){.segment = seg, .offset = off});
        check(same(&k, key, len));
        check(meta__key_object_decode(key, len, &id, &parent, &s) != 0);
        check(meta__key_due_decode(key, len, &id, &due, &s) != 0);
    }
    k.len = 0;
    struct mg_buf lo, hi;
    mg_buf_init(&lo), mg_buf_init(&hi);
    meta__key_retire_intents_range(&lo, &hi);
    if (cmp(lo.base, lo.len, key, len) <= 0 && cmp(key, len, hi.base, hi.len) < 0) {
        check(len >= 2 && key[0] == META_K_SYS && key[1] == META_SYS_RETIRE);
        check(meta__key_bucket_of(key, len, &id) != 0);
        if (len == 18) {
            struct eng_blob_ref ref = {.segment = meta__get_u64(key + 2),
                                       .offset = meta__get_u64(key + 10)};
            meta__key_retire_intent(&k, &ref);
            check(same(&k, key, len));
        }
    }
    mg_buf_close(&lo), mg_buf_close(&hi);
    uint8_t wk[META_ORPHAN_WRITER_KEY_LEN];
    if (meta__orphan_writer_decode(key, len, &id) == 0) { /* 0x01 'W' · writer id */
        meta__orphan_writer_key(wk, id);
        check(len == sizeof wk && memcmp(wk, key, len) == 0);
    }
    if (meta__key_bucket_of(key, len, &id) == 0)
        check(len >= META_BUCKET_KEY_LEN && key[0] == META_K_DATA && id == meta__get_u64(key + 1));
    k.len = name.len = 0;
    if (meta__esc_decode((const char *)key, len, &name, &used) == 0) {
        check(used >= 2 && used <= len);
        meta__esc_append(&k, (struct mg_str){name.base ? name.base : "", name.len});
        check(same(&k, key, used));
    }
    mg_buf_close(&k);
    mg_buf_close(&name);
}

/* Object keys: round trip, order against another name, the prefix range, after, past. */
static void objects(uint64_t id, struct mg_str name, struct mg_str prefix)
{
    struct mg_buf a, b, lo, hi, next;
    uint64_t got_id, parent;
    struct mg_str got;
    int c;

    mg_buf_init(&a), mg_buf_init(&b), mg_buf_init(&lo), mg_buf_init(&hi), mg_buf_init(&next);
    meta__key_object(&a, id, name);
    check(meta__key_object_decode(a.base, a.len, &got_id, &parent, &got) == 0);
    check(got_id == id && parent == 0 && got.len == name.len &&
          (name.len == 0 || memcmp(got.base, name.base, name.len) == 0));
    check(meta__key_bucket_of(a.base, a.len, &got_id) == 0 && got_id == id);

    meta__key_object(&b, id, prefix);
    c = cmp(name.base, name.len, prefix.base, prefix.len);
    check(bcmp_buf(&a, &b) == c);

    meta__key_object_range(id, prefix, &lo, &hi);
    check(in_range(&a, &lo, &hi) == starts_with(name, prefix));

    /* object_after(name) is name . 0x00: above name's key, nothing in between. */
    meta__key_object_after(&next, id, name);
    check(bcmp_buf(&a, &next) < 0 && next.len == a.len + 1 && next.base[a.len] == 0);

    /* past_prefix (= hi) is above every name with the prefix, and not above a greater one
     * without it. */
    if (starts_with(name, prefix))
        check(bcmp_buf(&a, &hi) < 0);
    else if (c > 0)
        check(bcmp_buf(&a, &hi) >= 0);

    /* The bucket's range holds its keys; the next bucket's keys are above it. */
    lo.len = hi.len = 0;
    meta__key_bucket_range(id, &lo, &hi);
    check(in_range(&a, &lo, &hi));
    if (id < UINT64_MAX) {
        b.len = 0;
        meta__key_object(&b, id + 1, name);
        check(!in_range(&b, &lo, &hi) && bcmp_buf(&b, &hi) >= 0);
    }
    mg_buf_close(&a), mg_buf_close(&b), mg_buf_close(&lo), mg_buf_close(&hi), mg_buf_close(&next);
}

/* Upload and part keys: round trip through the escape, order, the prefix and part ranges. */
static void uploads(uint64_t id, struct mg_str name, struct mg_str prefix, struct mg_str uid,
                    uint32_t number)
{
    struct mg_buf a, b, p, lo, hi, got;
    uint64_t got_id;
    struct mg_str got_uid;
    uint32_t got_part;
    int c;

    mg_buf_init(&a), mg_buf_init(&b), mg_buf_init(&p), mg_buf_init(&lo), mg_buf_init(&hi);
    mg_buf_init(&got);
    meta__key_upload(&a, id, name, uid);
    check(meta__key_upload_decode(a.base, a.len, &got_id, &got, &got_uid, &got_part) == 0);
    check(got_id == id && got_part == 0 && same(&got, name.base, name.len) &&
          memcmp(got_uid.base, uid.base, uid.len) == 0);
    meta__key_part(&p, id, name, uid, number);
    got.len = 0;
    check(meta__key_upload_decode(p.base, p.len, &got_id, &got, &got_uid, &got_part) == 0);
    check(got_id == id && got_part == number && same(&got, name.base, name.len));
    check(bcmp_buf(&a, &p) < 0); /* an upload row sorts before its parts */

    /* The escape keeps the order of the names, whatever the upload ids. */
    meta__key_upload(&b, id, prefix, uid);
    c = cmp(name.base, name.len, prefix.base, prefix.len);
    check(bcmp_buf(&a, &b) == c);

    meta__key_upload_range(id, prefix, &lo, &hi);
    check(in_range(&a, &lo, &hi) == starts_with(name, prefix));
    check(in_range(&p, &lo, &hi) == starts_with(name, prefix));

    /* Parts after `after`: part `number` is in the range exactly when number > after. */
    for (uint32_t after = number > 1 ? number - 1 : 0; after <= number; after++) {
        lo.len = hi.len = 0;
        meta__key_part_range(id, name, uid, after, &lo, &hi);
        check(in_range(&p, &lo, &hi) == (number > after));
        check(!in_range(&a, &lo, &hi));
    }
    /* upload_after(name, uid) is past the upload and its parts; with no uid, past every
     * upload of name but not past a greater name's. */
    lo.len = 0;
    meta__key_upload_after(&lo, id, name, uid);
    check(bcmp_buf(&p, &lo) < 0);
    lo.len = 0;
    meta__key_upload_after(&lo, id, name, (struct mg_str){"", 0});
    check(bcmp_buf(&p, &lo) < 0);
    if (c < 0)
        check(bcmp_buf(&lo, &b) < 0);
    mg_buf_close(&a), mg_buf_close(&b), mg_buf_close(&p), mg_buf_close(&lo), mg_buf_close(&hi);
    mg_buf_close(&got);
}

static void dues(uint64_t id, uint64_t due, struct mg_str name)
{
    struct mg_buf k;
    uint64_t got_id;
    int64_t got_due;
    struct mg_str got;

    if (name.len == 0)
        return; /* a due row always names an object */
    mg_buf_init(&k);
    meta__key_due(&k, id, (int64_t)(due & INT64_MAX), name);
    check(meta__key_due_decode(k.base, k.len, &got_id, &got_due, &got) == 0);
    check(got_id == id && got_due == (int64_t)(due & INT64_MAX) && got.len == name.len &&
          memcmp(got.base, name.base, name.len) == 0);
    mg_buf_close(&k);
}

static int ref_cmp(const struct eng_blob_ref *a, const struct eng_blob_ref *b)
{
    if (a->segment != b->segment)
        return a->segment < b->segment ? -1 : 1;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* Blob index rows (0x03 id 'X' seg off) and retire intents (0x01 'R' seg off), for two refs. */
static void blobs(uint64_t id, const struct eng_blob_ref *a, const struct eng_blob_ref *b,
                  struct mg_str name)
{
    struct mg_buf ka, kb, ra, rb, lo, hi, other;
    uint64_t got_id, seg, off;

    mg_buf_init(&ka), mg_buf_init(&kb), mg_buf_init(&ra), mg_buf_init(&rb);
    mg_buf_init(&lo), mg_buf_init(&hi), mg_buf_init(&other);
    meta__key_blob_index(&ka, id, a);
    meta__key_blob_index(&kb, id, b);
    check(meta__key_blob_index_decode(ka.base, ka.len, &got_id, &seg, &off) == 0);
    check(got_id == id && seg == a->segment && off == a->offset);
    check(meta__key_bucket_of(ka.base, ka.len, &got_id) == 0 && got_id == id);
    check(bcmp_buf(&ka, &kb) == ref_cmp(a, b));
    meta__key_bucket_range(id, &lo, &hi);
    check(in_range(&ka, &lo, &hi));
    /* a truncated or extended row is not a blob index row */
    check(meta__key_blob_index_decode(ka.base, ka.len - 1, &got_id, &seg, &off) != 0);
    mg_buf_append(&ka, "", 1);
    check(meta__key_blob_index_decode(ka.base, ka.len, &got_id, &seg, &off) != 0);

    meta__key_retire_intent(&ra, a);
    meta__key_retire_intent(&rb, b);
    check(ra.len == 18 && meta__get_u64(ra.base + 2) == a->segment &&
          meta__get_u64(ra.base + 10) == a->offset);
    check(bcmp_buf(&ra, &rb) == ref_cmp(a, b));
    check(meta__key_bucket_of(ra.base, ra.len, &got_id) != 0);
    check(meta__key_blob_index_decode(ra.base, ra.len, &got_id, &seg, &off) != 0);
    lo.len = hi.len = 0;
    meta__key_retire_intents_range(&lo, &hi);
    check(in_range(&ra, &lo, &hi));
    /* no other row kind falls in the intents range */
    check(!in_range(&ka, &lo, &hi));
    meta__key_bucket(&other, name);
    check(!in_range(&other, &lo, &hi));
    other.len = 0;
    meta__key_sys_version(&other);
    check(!in_range(&other, &lo, &hi));
    other.len = 0;
    meta__key_applied(&other, (uint32_t)id);
    check(!in_range(&other, &lo, &hi));
    other.len = 0;
    meta__key_sys_shards(&other);
    check(!in_range(&other, &lo, &hi));
    other.len = 0;
    meta__key_object(&other, id, name);
    check(!in_range(&other, &lo, &hi));
    /* writer-id rows (a cluster's collector): sort as their ids, outside the intents */
    uint8_t wa[META_ORPHAN_WRITER_KEY_LEN], wb[META_ORPHAN_WRITER_KEY_LEN];
    meta__orphan_writer_key(wa, a->segment);
    meta__orphan_writer_key(wb, b->segment);
    check(meta__orphan_writer_decode(wa, sizeof wa, &seg) == 0 && seg == a->segment);
    check(cmp(wa, sizeof wa, wb, sizeof wb) ==
          (a->segment < b->segment ? -1 : a->segment > b->segment));
    check(cmp(wa, sizeof wa, lo.base, lo.len) < 0 || cmp(wa, sizeof wa, hi.base, hi.len) >= 0);
    check(meta__orphan_writer_decode(ra.base, ra.len, &seg) != 0);
    check(meta__orphan_writer_decode(wa, sizeof wa - 1, &seg) != 0);
    mg_buf_close(&ka), mg_buf_close(&kb), mg_buf_close(&ra), mg_buf_close(&rb);
    mg_buf_close(&lo), mg_buf_close(&hi), mg_buf_close(&other);
}

static void buckets(struct mg_str name)
{
    struct mg_buf k, lo, hi;
    struct mg_str got;

    mg_buf_init(&k), mg_buf_init(&lo), mg_buf_init(&hi);
    meta__key_bucket(&k, name);
    if (name.len <= META_BUCKET_NAME_MAX) {
        check(meta__key_bucket_decode(k.base, k.len, &got) == 0);
        check(got.len == name.len && (name.len == 0 || memcmp(got.base, name.base, name.len) == 0));
    }
    meta__key_buckets_range(&lo, &hi);
    check(in_range(&k, &lo, &hi));
    lo.len = hi.len = 0;
    meta__key_shard0_range(&lo, &hi);
    check(in_range(&k, &lo, &hi));
    /* The successor of a key is above every key that starts with it. */
    lo.len = 0;
    mg_buf_append(&lo, k.base, k.len);
    check(meta__key_successor(&lo) == 0);
    mg_buf_append(&k, "\xff\xff\xff\xff", 4);
    check(bcmp_buf(&k, &lo) < 0);
    mg_buf_close(&k), mg_buf_close(&lo), mg_buf_close(&hi);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode_all(data, size);
    if (size < 21)
        return 0;
    uint64_t id = meta__get_u64(data);
    uint64_t due = meta__get_u64(data + 8);
    uint32_t number = meta__get_u32(data + 16) % META_PART_MAX + 1;
    size_t rest = size - 21;
    size_t nlen = data[20] <= rest ? data[20] : rest;
    struct mg_str name = {(const char *)data + 21, nlen};
    struct mg_str prefix = {(const char *)data + 21 + nlen, rest - nlen};
    char uid_bytes[META_UPLOAD_ID_LEN];
    for (size_t i = 0; i < sizeof(uid_bytes); i++)
        uid_bytes[i] = (char)data[i % 21];
    struct mg_str uid = {uid_bytes, sizeof(uid_bytes)};

    if (name.len <= META_KEY_MAX && prefix.len <= META_KEY_MAX) {
        objects(id, name, prefix);
        uploads(id, name, prefix, uid, number);
        dues(id, due, name);
        blobs(id, &(struct eng_blob_ref){.segment = due, .offset = id},
              &(struct eng_blob_ref){.segment = id, .offset = due}, name);
    }
    buckets(name);
    return 0;
}
