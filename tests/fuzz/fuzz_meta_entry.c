/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for meta/'s decoders of on-disk bytes: object, upload,
 * part and bucket entries (meta/entry.c) and object, upload, due-index and
 * bucket-record keys and the bucket-of router (meta/key.c).
 * The first input byte picks the decoder, the rest is the value. Disk data is
 * never asserted on (STYLE.md 3): every input must decode or be MG_ECORRUPT,
 * a value that decodes must survive encode -> decode unchanged in shape, and
 * LIST's in-place reader must agree with the full decoder
 * (STYLE.md 7a: valid before written, valid again after read).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static void roundtrip_object(const struct meta_object *o, enum meta_rec_kind kind,
                             struct mg_arena *a)
{
    struct mg_buf v;
    struct meta_object d;
    mg_buf_init(&v);
    meta__object_encode(o, kind, &v);
    check(meta__object_decode(v.base, v.len, kind, a, &d) == 0);
    check(d.size == o->size && d.data.nextents == o->data.nextents);
    check(d.nparts == o->nparts && d.nuser_meta == o->nuser_meta && d.ntags == o->ntags);
    check(d.etag.len == o->etag.len && d.acl == o->acl && d.cksum_algo == o->cksum_algo);
    mg_buf_close(&v);
}

static void fuzz_value(unsigned which, const uint8_t *p, size_t n, struct mg_arena *a)
{
    struct meta_object o;
    struct meta_part part;
    struct meta_bucket b;
    int rv;
    switch (which) {
    case 0:
    case 1: {
        enum meta_rec_kind kind = which == 0 ? META_REC_OBJECT : META_REC_UPLOAD;
        rv = meta__object_decode(p, n, kind, a, &o);
        check(rv == 0 || rv == MG_ECORRUPT);
        if (rv == 0)
            roundtrip_object(&o, kind, a);
        if (kind == META_REC_OBJECT) { /* LIST's reader agrees with the full one */
            struct meta_object s;
            int rs = meta__object_decode_summary(p, n, a, &s);
            check(rs == 0 || rs == MG_ECORRUPT);
            check(rv != 0 || (rs == 0 && s.size == o.size && s.mtime_ms == o.mtime_ms &&
                              s.etag.len == o.etag.len && s.cksum_algo == o.cksum_algo));
        }
        break;
    }
    case 2:
        rv = meta__part_decode(p, n, a, &part);
        check(rv == 0 || rv == MG_ECORRUPT);
        if (rv == 0) {
            struct mg_buf v;
            struct meta_part d;
            mg_buf_init(&v);
            meta__part_encode(&part, &v);
            check(meta__part_decode(v.base, v.len, a, &d) == 0 && d.number == part.number &&
                  d.size == part.size);
            mg_buf_close(&v);
        }
        break;
    case 3:
        rv = meta__bucket_decode(p, n, a, &b);
        check(rv == 0 || rv == MG_ECORRUPT);
        if (rv == 0) {
            struct mg_buf v;
            struct meta_bucket d;
            mg_buf_init(&v);
            meta__bucket_encode(&b, &v);
            check(meta__bucket_decode(v.base, v.len, a, &d) == 0 && d.id == b.id &&
                  d.ntags == b.ntags);
            mg_buf_close(&v);
        }
        break;
    }
}

static void fuzz_key(unsigned which, const uint8_t *p, size_t n)
{
    uint64_t bid, parent;
    uint32_t partno;
    struct mg_str name, uid;
    struct mg_buf nb, k;
    mg_buf_init(&nb);
    mg_buf_init(&k);
    if (which == 4) {
        int rv = meta__key_object_decode(p, n, &bid, &parent, &name);
        check(rv == 0 || rv == MG_ECORRUPT);
        uint64_t of = 0;
        if (rv == 0) /* every row of a bucket routes to it */
            check(meta__key_bucket_of(p, n, &of) == 0 && of == bid);
        int64_t due;
        if (meta__key_due_decode(p, n, &bid, &due, &name) == 0) {
            meta__key_due(&k, bid, due, name);
            check(k.len == n && memcmp(k.base, p, n) == 0);
        }
        rv = meta__key_bucket_decode(p, n, &name);
        check(rv == 0 || rv == MG_ECORRUPT);
    } else {
        int rv = meta__key_upload_decode(p, n, &bid, &nb, &uid, &partno);
        check(rv == 0 || rv == MG_ECORRUPT);
        if (rv == 0) { /* the key re-encodes to the same bytes */
            struct mg_str nm = {nb.base, nb.len};
            if (partno == 0)
                meta__key_upload(&k, bid, nm, uid);
            else
                meta__key_part(&k, bid, nm, uid, partno);
            check(k.len == n && memcmp(k.base, p, n) == 0);
        }
    }
    mg_buf_close(&nb);
    mg_buf_close(&k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned which = data[0] % 6;
    struct mg_arena a;
    mg_arena_init(&a);
    if (which < 4)
        fuzz_value(which, data + 1, size - 1, &a);
    else
        fuzz_key(which, data + 1, size - 1);
    mg_arena_close(&a);
    return 0;
}
