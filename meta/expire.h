/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals of lifecycle enforcement (issue 8; docs/ops.md "Lifecycle"),
 * shared by the op bodies that write objects (object.c, mpu.c), the bucket
 * update (bucket.c) and the lifecycle ops (expire.c): the per-bucket cache of
 * loaded rules on the meta thread, the due-row helpers, the 'L' progress row
 * and the overlay's range probe. Everything here runs inside an op body on the
 * meta thread unless it says otherwise.
 */
#ifndef MG_META_EXPIRE_H
#define MG_META_EXPIRE_H

#include "meta/shard.h"

/* Set o->lc_due_ms / o->lc_gen from the current rules of bucket (bucket_id): the earliest due
 * time over its enabled Expiration rules that select o (key, size, tags, mtime_ms), or 0 when
 * none does. Rules come from the meta thread's cache (loaded once per bucket and generation).
 * Returns 0, MG_EIO, MG_ECORRUPT (a bucket record whose rules do not load: logged, treated as
 * no rules, so writes never fail on it: 0 is returned then). */
int meta__lc_due(struct meta_store *ms, uint64_t bucket_id, struct mg_str bucket,
                 struct meta_object *o);

/* Due rows of a write: delete old's row (when had_old and it has one) and put new's (when it
 * has one); o may be NULL (a delete); nothing when both are the same row. A new row due
 * already (<= now) may sit behind the scheduler's cursor: the cursor moves back to it, in p
 * when the caller holds the bucket's progress (it writes it), else in the 'L' row (read and
 * written here). key must outlive p. Returns 0, MG_EIO, MG_ECORRUPT. */
int meta__lc_due_rows(struct meta_store *ms, struct meta_ws *b, uint64_t bucket_id,
                      struct mg_str key, const struct meta_object *old, int had_old,
                      const struct meta_object *o, struct meta_lc_progress *p);

/* The bucket's rules changed (bucket.c, after building its write set): drop its cache slot,
 * so the next op reloads them through the overlay. */
void meta__lc_rules_changed(uint64_t bucket_id);

/* Op bodies (expire.c): META_OP_EXPIRE_BATCH and META_OP_LC_REINDEX. */
int meta__do_lifecycle(struct meta_store *ms, struct meta_op *op);
int meta__do_expire_batch(struct meta_store *ms, struct mg_str bucket,
                          const struct meta_expire_item *items, size_t n, int64_t now_ms,
                          uint64_t epoch, struct meta_expire_result *out);
/* expire_now_ms != 0: entries due at or before it are expired by the step, up to expire_max
 * (meta_lc_reindex_expire_step). */
int meta__do_lc_reindex(struct meta_store *ms, struct mg_str bucket, size_t n,
                        int64_t expire_now_ms, size_t expire_max, struct meta_expire_result *out);

/* The delete tracker's range length for a key (eng_tracker_range_cb; meta/store.c sets it):
 * due and time index rows by the top 5 bytes of their time, other keys 22 bytes. */
size_t meta__lc_tracker_range_len(enum eng_cf cf, const void *key, size_t len, void *arg);

/* Test hook: 1 skips expire-batch's range guard (tests/unit/meta/test_expire.c shows what it
 * prevents). */
extern int meta__lc_test_no_guard;

/* 0x03 · bucket-id · 'L' -> the bucket's lifecycle progress (struct meta_lc_progress). */
#define META_TBL_LC_PROGRESS 'L'
void meta__key_lc_progress(struct mg_buf *k, uint64_t bucket_id);

/* 1 when a pending row (put or delete) of the overlay falls in [lo, hi). A linear pass:
 * pending rows are bounded by the entries in flight (overlay.c). */
int meta__ov_any_in_range(const struct meta_overlay *ov, const void *lo, size_t lol,
                          const void *hi, size_t hil);

#endif
