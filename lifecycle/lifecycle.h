/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public header of lifecycle/ (issue 8). Two libraries, so layering stays one-way
 * (STYLE.md 1, 8): mg_lcrules is the pure rule model below (everything up to "scheduler");
 * meta/ links it to compute due times inside its ops. mg_lifecycle is the scheduler at the
 * end of this header; it links mg_meta (and mg_lcrules) and calls meta's lifecycle ops:
 * lifecycle (scheduler) -> meta -> lifecycle (rules) -> common.
 *
 * The rule model (issue 8).
 * A PutBucketLifecycleConfiguration body is parsed and validated into a
 * struct lc_config (lc_config_parse), compiled into a versioned, endian-fixed,
 * checksummed binary form that the bucket record stores (lc_config_compile /
 * lc_config_load), rendered back as GetBucketLifecycleConfiguration's body
 * (lc_config_to_xml), and evaluated: which enabled rule expires an object, and
 * when (lc_config_expiry, lc_config_abort_due, lc_expiration_header). A token
 * bucket (struct lc_rate) paces the scheduler that will walk the due index.
 *
 * Only what the store can honour is accepted: Expiration (Days, Date) and
 * AbortIncompleteMultipartUpload, with any Filter. Transitions and the
 * noncurrent-version actions (versioning is not supported) are refused with
 * MG_ENOTIMPLEMENTED, never silently kept (issue 8, "API").
 *
 * All functions are pure (no I/O, no globals) and callable from any thread;
 * a struct lc_config is read-only once built and may be shared by readers.
 */
#ifndef MG_LIFECYCLE_H
#define MG_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* "An Amazon S3 Lifecycle configuration can have up to 1,000 rules." (S3 User Guide) */
#define LC_RULES_MAX 1000
/* "ID ... The value cannot be longer than 255 characters." (API LifecycleRule) */
#define LC_ID_MAX 255
/* Tags one filter may name: an object carries at most 10, so more could match nothing. */
#define LC_FILTER_TAGS_MAX 10
#define LC_TAG_KEY_MAX 128   /* characters, as in object tagging */
#define LC_TAG_VALUE_MAX 256 /* characters */
#define LC_PREFIX_MAX 1024   /* bytes: the longest key */
#define LC_ERRMSG_LEN 256    /* size of every errmsg buffer below */
#define LC_DAY_SECONDS 86400 /* lifecycle.day_seconds default */
#define LC_RATE_MAX 1000000000u /* objects/s accepted by lc_rate_init */
/* Entries one re-index step (META_OP_LC_REINDEX) visits at most: a step writes only due rows
 * (~60 bytes each), so steps are larger than expire batches (fewer Raft entries per entry). */
#define LC_REINDEX_STEP_MAX 4096

/* How a rule names its objects, kept so GET returns the form that was PUT. */
enum lc_filter_form {
    LC_FORM_PREFIX,        /* legacy <Rule><Prefix> (no Filter) */
    LC_FORM_EMPTY,         /* <Filter/>: every object */
    LC_FORM_FILTER_PREFIX, /* <Filter><Prefix> */
    LC_FORM_TAG,           /* <Filter><Tag> */
    LC_FORM_SIZE_GT,       /* <Filter><ObjectSizeGreaterThan> */
    LC_FORM_SIZE_LT,       /* <Filter><ObjectSizeLessThan> */
    LC_FORM_AND,           /* <Filter><And> */
    LC_FORM__COUNT
};

struct lc_tag {
    struct mg_str key;   /* 1..LC_TAG_KEY_MAX characters */
    struct mg_str value; /* 0..LC_TAG_VALUE_MAX characters */
};

/* An object matches when every present predicate holds. */
struct lc_filter {
    enum lc_filter_form form;
    struct mg_str prefix; /* key begins with it ("" matches every key) */
    struct lc_tag *tags;  /* each must be on the object with exactly this value */
    size_t ntags;         /* 0..LC_FILTER_TAGS_MAX, keys distinct */
    int has_size_gt;      /* size_gt applies */
    int has_size_lt;      /* size_lt applies */
    uint64_t size_gt;     /* object size > size_gt (strict); 0 when !has_size_gt */
    uint64_t size_lt;     /* object size < size_lt (strict); 0 when !has_size_lt */
};

enum lc_exp_kind {
    LC_EXP_NONE,         /* no Expiration */
    LC_EXP_DAYS,         /* Expiration/Days */
    LC_EXP_DATE,         /* Expiration/Date */
    LC_EXP_MARKER_FALSE, /* Expiration/ExpiredObjectDeleteMarker false: kept, no action */
    LC_EXP__COUNT
};

struct lc_rule {
    struct mg_str id;         /* 1..LC_ID_MAX characters, unique in the configuration */
    int enabled;              /* Status Enabled (1) or Disabled (0) */
    struct lc_filter filter;
    enum lc_exp_kind exp_kind;
    uint32_t exp_days;        /* LC_EXP_DAYS: >= 1; else 0 */
    int64_t exp_date_ms;      /* LC_EXP_DATE: a midnight UTC, ms since the epoch; else 0 */
    uint32_t abort_days;      /* AbortIncompleteMultipartUpload DaysAfterInitiation; 0 = none */
};

struct lc_config {
    struct lc_rule *rules; /* in document order */
    size_t nrules;         /* 1..LC_RULES_MAX */
};

/* ------------------------------------------------------------------ parse */

/* Parse and validate a PutBucketLifecycleConfiguration body (len bytes, need not be
 * NUL-terminated). A DOCTYPE or entity declaration is refused (no entity expansion). Rules
 * without an ID get "rule-N", the lowest N >= 1 no rule of the document uses. Everything in
 * *out (strings included) is allocated from a and dies with it; xml may be freed at once.
 * errmsg (LC_ERRMSG_LEN bytes, may be NULL) gets S3's message. The first fault found wins.
 * Returns 0 or:
 *   MG_EMALFORMEDXML     not well-formed, wrong root, unknown or repeated element, missing
 *                        Status, Status not Enabled/Disabled, a Filter with more than one
 *                        predicate outside And, both Filter and Prefix (or neither), a
 *                        number or date that does not parse, Days and Date together;
 *   MG_EINVALIDARGUMENT  Days or DaysAfterInitiation <= 0, Date not midnight UTC, ID longer
 *                        than 255, duplicate ID, ExpiredObjectDeleteMarker with Days/Date,
 *                        prefix longer than 1024 bytes, more than 10 tags in a filter;
 *   MG_EINVALIDREQUEST   no rule or more than 1,000, a rule with no action, duplicate tag keys,
 *                        sizes out of range or ObjectSizeGreaterThan >= ObjectSizeLessThan,
 *                        AbortIncompleteMultipartUpload with a tag or size filter, legacy Prefix
 *                        and Filter mixed across rules, overlapping legacy prefixes for one kind
 *                        of action, ExpiredObjectDeleteMarker true with a tag or size filter;
 *   MG_EINVALIDTAG       a filter tag key or value too long;
 *   MG_ENOTIMPLEMENTED   Transition, NoncurrentVersionExpiration, NoncurrentVersionTransition,
 *                        ExpiredObjectDeleteMarker true (all need versioning or storage
 *                        classes), refused once the rest of the document is valid;
 *   MG_ENOMEM            expat could not allocate its parser. */
int lc_config_parse(struct mg_str xml, struct mg_arena *a, struct lc_config *out, char *errmsg);

/* Append GetBucketLifecycleConfiguration's response body for cfg to out (an XML declaration
 * and <LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">; dates as
 * 2012-12-23T00:00:00.000Z). Parsing the result gives cfg back. */
void lc_config_to_xml(const struct lc_config *cfg, struct mg_buf *out);

/* ---------------------------------------------------------- binary form */

/* Append cfg's binary form to out: magic "MGLC", version 1, little-endian fields, CRC32C
 * trailer. Deterministic: equal configurations give equal bytes. cfg must be valid (as
 * lc_config_parse or lc_config_load built it; asserted). */
void lc_config_compile(const struct lc_config *cfg, struct mg_buf *out);

/* Decode and validate a binary form (disk data: never asserted on). Strings are copied into a;
 * bytes may be freed at once. A form that loads compiles back to the same bytes.
 * Returns 0 or MG_ECORRUPT (bad magic, version, checksum, length, or a rule that
 * lc_config_parse would not have produced). */
int lc_config_load(const void *bytes, size_t len, struct mg_arena *a, struct lc_config *out);

/* ------------------------------------------------------ matching and due */

/* What a rule looks at in an object (or, for uploads, only key). */
struct lc_object {
    struct mg_str key;
    uint64_t size;
    const struct lc_tag *tags; /* the object's tag set */
    size_t ntags;
    int64_t mtime_ms; /* creation (last write) time, ms since the epoch */
};

/* 1 when r's filter selects obj (status and actions are not looked at), else 0. Prefix is a
 * byte-wise prefix, sizes are strict bounds, tags match key and value exactly. */
int lc_rule_matches(const struct lc_rule *r, const struct lc_object *obj);

/* from_ms + days "days" of day_seconds each, rounded up to the next multiple of day_seconds
 * since the epoch ("rounding the resulting time to the next day midnight UTC", S3 User Guide;
 * a result already on a boundary stays). Saturates at INT64_MAX. day_seconds >= 1. */
int64_t lc_due_after(int64_t from_ms, uint32_t days, uint32_t day_seconds);

/* The earliest due time over the enabled Expiration rules (Days or Date) whose filter selects
 * obj; a Date rule is due at its date. Ties go to the first rule in document order. Returns 1
 * with *due_ms and *rule (pointing into cfg) set, or 0 when no rule expires obj. */
int lc_config_expiry(const struct lc_config *cfg, const struct lc_object *obj,
                     uint32_t day_seconds, int64_t *due_ms, const struct lc_rule **rule);

/* The same for an incomplete multipart upload of key initiated at initiated_ms, over the
 * enabled AbortIncompleteMultipartUpload rules (these filter by prefix only). */
int lc_config_abort_due(const struct lc_config *cfg, struct mg_str key, int64_t initiated_ms,
                        uint32_t day_seconds, int64_t *due_ms, const struct lc_rule **rule);

/* Append the x-amz-expiration value to out:
 *   expiry-date="Fri, 23 Dec 2012 00:00:00 GMT", rule-id="picture-deletion-rule"
 * An ID a quoted header value cannot carry as is (controls, non-ASCII, '"', '\') is
 * percent-encoded. Returns 0, or MG_EINVALIDARGUMENT (out untouched) when due_ms is before
 * 1970 or after 9999-12-31. */
int lc_expiration_header(int64_t due_ms, struct mg_str rule_id, struct mg_buf *out);

/* ------------------------------------------------------------ rate control */

/* A token bucket in objects/s with one second of burst, in integer arithmetic (tokens kept in
 * billionths of an object). The caller owns it; not thread-safe (one per scheduler). */
struct lc_rate {
    uint64_t per_second; /* 0 = unlimited */
    uint64_t tokens_nano; /* available, in 1e-9 objects; <= per_second * 1e9 */
    int64_t last_ns;      /* monotonic time of the last refill */
};

/* per_second 0 = unlimited, else <= LC_RATE_MAX (asserted). Starts full. now_ns: a monotonic
 * clock (CLOCK_MONOTONIC), in ns. */
void lc_rate_init(struct lc_rate *r, uint64_t per_second, int64_t now_ns);
/* Take up to want objects' worth; returns how many were granted (0..want). */
uint64_t lc_rate_take(struct lc_rate *r, uint64_t want, int64_t now_ns);
/* ns to wait from now_ns until one object can be granted (0 = now). */
int64_t lc_rate_wait_ns(const struct lc_rate *r, int64_t now_ns);

/* ---------------------------------------------------- scheduler (mg_lifecycle)
 *
 * One thread per node (off every event loop) that enforces the rules meta indexed
 * (meta/meta.h "lifecycle"): for each bucket with rules it walks the due rows up to now in key
 * order and submits expire-batch ops through meta's blocking API, runs the bucket's re-index
 * walk after a rules change, and aborts incomplete multipart uploads past
 * AbortIncompleteMultipartUpload. Progress lives in meta (the bucket's 'L' row), so after
 * kill -9 a new scheduler resumes where the old one was. */

struct meta_store;
struct lc_scheduler;

struct lc_scheduler_opts {
    uint32_t day_seconds;        /* lifecycle.day_seconds (0: LC_DAY_SECONDS): upload aborts */
    uint64_t max_per_second;     /* lifecycle.max_per_second: objects/s expired (0: unlimited) */
    uint32_t batch_max;          /* due rows per expire-batch op (0: META_EXPIRE_BATCH_MAX) */
    uint32_t reindex_per_second; /* entries/s a re-index walk visits (0: 1000000) */
    uint32_t idle_ms;            /* pause after a pass that found nothing to do (0: 1000) */
    uint64_t busy_load;          /* foreground load (meta_lc_load) at which it backs off
                                    (0: 256) */
};

/* Start the scheduler thread on ms (which must outlive it). opts may be NULL (defaults).
 * Returns 0 or MG_EIO (no thread). */
int lc_scheduler_create(struct meta_store *ms, const struct lc_scheduler_opts *opts,
                        struct lc_scheduler **out);
/* Stop the thread (an op in progress finishes first) and free s. NULL is a no-op. */
void lc_scheduler_destroy(struct lc_scheduler *s);
/* Start a pass now (not waiting out idle_ms) and wait until a pass that began after this call
 * has ended. For tests and tools. */
void lc_scheduler_run_pass(struct lc_scheduler *s);

#endif
