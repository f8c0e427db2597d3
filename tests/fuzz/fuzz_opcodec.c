/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the op codec (meta/opcodec.c): a shard leader decodes
 * every op a peer forwards (META_RPC_OP), and the forwarding node decodes the
 * results it gets back, so any byte string must decode or be MG_ECORRUPT,
 * never crash, assert or allocate out of proportion. A value that decodes must
 * re-encode to exactly the same bytes (the encoding is canonical).
 *
 * Input: byte 0 selects the mode (bit 0: an "out" value, else "in"; bit 1: the
 * crc32c trailer is computed here and appended, so that mutations get past it
 * to the field validators); for "out", byte 1 is the key count of the op the
 * results are decoded for; the rest is the value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta/opcodec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
    if (!cond)
        abort();
}

static void same(const struct mg_buf *b, const uint8_t *v, size_t n)
{
    check(b->len == n && memcmp(b->base, v, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int out = data[0] & 1, fix = data[0] & 2;
    unsigned nkeys = data[1];
    struct mg_buf v, re;
    mg_buf_init(&v);
    mg_buf_init(&re);
    mg_buf_append(&v, data + 2, size - 2);
    if (fix) {
        struct mg_cksum c;
        uint8_t d[32];
        mg_cksum_init(&c, MG_CKSUM_CRC32C);
        mg_cksum_update(&c, v.base, v.len);
        mg_cksum_final(&c, d);
        mg_cksum_close(&c);
        mg_buf_append(&v, d, 4);
    }
    if (!out) {
        struct meta_op *op = NULL;
        if (meta__opcodec_decode_in(v.base, v.len, &op) == 0) {
            check(op->type < META_OP__COUNT);
            meta__opcodec_encode_in(op, &re);
            same(&re, (const uint8_t *)v.base, v.len);
            meta_op_destroy(op);
        }
    } else if (v.len >= 3 && (uint8_t)v.base[2] < META_OP__COUNT) {
        /* the caller's op: its type (byte 2 of the value) and nkeys keys */
        struct meta_op *op = meta_op_create((enum meta_op_type)(uint8_t)v.base[2]);
        struct mg_str *keys = mg_arena_alloc(&op->priv->arena, (nkeys + 1) * sizeof(*keys));
        for (unsigned i = 0; i < nkeys; i++)
            keys[i] = (struct mg_str){"k", 1};
        op->in.keys = keys;
        op->in.nkeys = nkeys;
        int st = -1;
        if (meta__opcodec_decode_out(v.base, v.len, op, &st) == 0) {
            check(st >= 0 && st < MG_ERR__COUNT);
            check(op->type != META_OP_OBJECT_DELETE_MANY || op->out.existed_many != NULL);
            meta__opcodec_encode_out(op, st, &re);
            same(&re, (const uint8_t *)v.base, v.len);
        }
        meta_op_destroy(op);
    }
    mg_buf_close(&v);
    mg_buf_close(&re);
    return 0;
}
