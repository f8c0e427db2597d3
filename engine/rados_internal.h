/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine/ internal: the decoders of what engine/rados.c reads back from RADOS (object names
 * from a pool listing, the blob header xattr "mg.h"), exposed for the unit tests and the
 * fuzz target tests/fuzz/fuzz_rados_hdr.c. Layouts are in engine/rados.h. Pure functions.
 */
#ifndef MG_ENGINE_RADOS_INTERNAL_H
#define MG_ENGINE_RADOS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

#define ENG__RADOS_HDR_BYTES 56
#define ENG__RADOS_NAME_MAX 64

/* "mg.<seg %016x>.<off %016x>.<idx %08x>" into out (NUL-terminated, 45 characters). */
void eng__rados_name(char out[ENG__RADOS_NAME_MAX], uint64_t seg, uint64_t off, uint32_t idx);
/* Parse such a name (lower-case hex, exact length); 0, or -1 for any other string. */
int eng__rados_name_parse(const char *s, uint64_t *seg, uint64_t *off, uint32_t *idx);
/* The header of the blob ref names (ref must be a valid RADOS ref), written at wall ms. */
void eng__rados_hdr_encode(unsigned char h[ENG__RADOS_HDR_BYTES], const struct eng_blob_ref *ref,
                           int64_t ms);
/* Decode len bytes of header into ref (and *ms unless NULL): 0, or -1 when it is not a valid
 * header of a valid ref (size, magic, its crc32c, version, chunk shift, stripe shift, length).
 * A header that decodes re-encodes to the same bytes. */
int eng__rados_hdr_decode(const unsigned char *h, size_t len, struct eng_blob_ref *ref,
                          int64_t *ms);

#endif
