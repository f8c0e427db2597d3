/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals: the wire form of a struct meta_op (issue 10), what
 * META_RPC_OP carries (meta/remote.h): its arguments ("in") from the node a
 * client submitted it on to the shard leader, and its status and results
 * ("out") back. Object data travels by reference: inline bytes as they are,
 * extents (struct eng_blob_ref) verbatim.
 *
 * Format (version META_OPCODEC_VERSION): u8 version, u8 'I' or 'O', u8 op
 * type, then every field of in (or out) in a fixed order, whatever the type
 * (an unused field costs a byte or two). Integers: fixed-width little endian
 * (u32, u64; i64 as its two's complement); lengths and counts: LEB128 varints
 * in their shortest form; strings: varint length + bytes; booleans and enums:
 * one byte, in range; last, a crc32c of all the bytes before it (u32, as
 * mg_cksum_final gives it), so that a corrupted value is refused rather than
 * decoded into another valid op. The decoders take nothing on trust: every length and
 * count is checked against the bytes left and a bound below, every enum and
 * flag against its range, the op type against META_OP__COUNT, and the value
 * must end exactly where its last field does. Anything else is MG_ECORRUPT,
 * never an assertion. An accepted value re-encodes to the same bytes.
 */
#ifndef MG_META_OPCODEC_H
#define MG_META_OPCODEC_H

#include "meta/op.h"

#define META_OPCODEC_VERSION 1
#define META_OPCODEC_KV_MAX 4096        /* user metadata / tag pairs per list */
#define META_OPCODEC_ARRAY_MAX 65536    /* keys, extents, expire items */

/* Append the encoding of op->type and op->in to out. op->in must be as meta_op_submit
 * accepts it (arrays non-NULL when their count is, asserted). */
void meta__opcodec_encode_in(const struct meta_op *op, struct mg_buf *out);

/* Decode an "in" value into a new op (*out, from meta_op_create; the caller destroys it).
 * Its arrays are allocated from the op; its strings BORROW buf, which must outlive every use
 * until meta_op_submit copies them into the op (client.c copy_args: the one deep copy of an
 * op's arguments). Returns 0 or MG_ECORRUPT (*out untouched). */
int meta__opcodec_decode_in(const void *buf, size_t len, struct meta_op **out);

/* Append the encoding of op's outcome: status (an mg_err) and op->out. */
void meta__opcodec_encode_out(const struct meta_op *op, int status, struct mg_buf *out);

/* Decode an "out" value for op (whose type and in are the ones sent): op->out gets the
 * results, their strings and arrays allocated from the op (valid until meta_op_destroy),
 * *status the op's status. existed_many has op->in.nkeys entries for OBJECT_DELETE_MANY
 * (all 0 when the remote op answered without running its body), and is NULL or has nkeys
 * entries otherwise. Returns 0 or MG_ECORRUPT (op->out untouched; also for another op type,
 * an unknown status, or an existed_many count other than those). */
int meta__opcodec_decode_out(const void *buf, size_t len, struct meta_op *op, int *status);

#endif
