/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Workloads as data (issue 3): a workload is one line of a table naming an
 * operation mix, an object size, how many objects the untimed prepare phase
 * creates, the key shape (how many prefixes the keys spread over) and the
 * pacing (closed loop, or an open-loop Pareto offered rate). The engine in
 * run.c only knows the logical operations below; adding a scenario (say the
 * lifecycle-expiry one) is adding a line to the built-in table in workload.c
 * or passing --workload-file. Command-line flags override a line's fields.
 *
 * Line syntax (one workload per line, '#' starts a comment):
 *   NAME key=value ...   keys: mix=OP:weight[,OP:weight...] size=BYTES[KiB|MiB|GiB|k|M]
 *                        objects=N prefixes=N batch=N list_max=N rate=closed|pareto
 *                        alpha=X window_s=N tick_ms=N bucket=yes|no keys=plain|time
 *                        desc="text"
 * Key shapes: plain  <run>/dNNNN/oNNNNNNNNNN
 *             time   <run>/dNNNN/YYYY-MM-DDTHH:MM:SS.uuuuuuZ-NNNNNNNNNN (timestamp-prefixed,
 *                    sorting in creation order: the log-shipper / lifecycle-expiry shape)
 */
#ifndef MGB_WORKLOAD_H
#define MGB_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

/* Logical operations a mix is made of; each maps onto one or two S3 requests. */
#define MGB_LOP_TABLE(X)                                                                           \
    X(GET, "GET object from the prepared/created set")                                           \
    X(HEAD, "HEAD object (stat file)")                                                           \
    X(PUT, "PUT a new object of --size bytes (create)")                                          \
    X(DELETE, "DeleteObject on an existing object (removes it from the set)")                    \
    X(DELETEMULTI, "DeleteObjects of --batch existing objects")                                  \
    X(LIST, "ListObjectsV2 max-keys=list_max from a random existing key (start-after)")          \
    X(LISTDIR, "ListObjectsV2 delimiter=/ of one prefix (ls dir)")                               \
    X(STATDIR, "ListObjectsV2 delimiter=/ max-keys=1 of one prefix (stat dir)")                  \
    X(LISTFILE, "ListObjectsV2 prefix=<existing key> max-keys=1 (ls file)")                      \
    X(RENAME, "CopyObject to a new key, then DeleteObject of the old one")                       \
    X(MKDIR, "PUT of an empty \"prefix/\" marker object")                                        \
    X(HELLO, "GET --path without auth (overhead check against wrk)")

#define X(name, doc) MGB_LOP_##name,
enum mgb_lop { MGB_LOP_TABLE(X) MGB_LOP_COUNT };
#undef X

/* S3 operations as reported (one histogram and one JSON entry each). */
#define MGB_OP_TABLE(X) X(GET) X(HEAD) X(PUT) X(LIST) X(DELETE) X(COPY)
#define X(name) MGB_OP_##name,
enum mgb_op { MGB_OP_TABLE(X) MGB_OP_COUNT };
#undef X

struct mgb_workload {
    char name[32];                 /* "get" */
    char desc[128];                /* one line for --help */
    double weight[MGB_LOP_COUNT];  /* mix weights (any scale) */
    double cum[MGB_LOP_COUNT];     /* cumulative weights, filled by mgb_workload_finish */
    uint64_t size_bytes;           /* object size for PUT and prepare */
    uint64_t objects;              /* objects created by the prepare phase */
    uint32_t prefixes;             /* keys spread over this many prefixes ("directories") */
    uint32_t batch;                /* keys per DeleteObjects */
    uint32_t list_max;             /* max-keys of LIST and LISTDIR */
    int open_loop;                 /* 1: offered rate from a Pareto draw (rate=pareto) */
    double alpha;                  /* Pareto shape */
    uint32_t window_s;             /* the offered rate is redrawn every window_s seconds */
    uint32_t tick_ms;              /* requests are released every tick_ms */
    int bucket;                    /* 0: no bucket, no auth (hello) */
    int keys_time;                 /* 1: timestamp-prefixed key names (keys=time) */
};

/* The built-in table (text in the syntax above). */
extern const char mgb_workload_builtin[];

const char *mgb_lop_name(enum mgb_lop op);
const char *mgb_lop_doc(enum mgb_lop op);
const char *mgb_op_name(enum mgb_op op);

/* "10KiB" / "1M" / "4096" -> bytes (KiB = k = 1024). Returns 0 or -1. */
int mgb_size_parse(const char *s, uint64_t *out);

/* Parse one table line into w (defaults first). Returns 0 for a workload, 1 for a blank or
 * comment line, -1 with a message in err on a syntax error. */
int mgb_workload_parse_line(const char *line, struct mgb_workload *w, char *err, size_t errlen);

/* Parse a whole table; appends to *ws (realloc'd, caller frees), a later line with the same
 * name replaces an earlier one. Returns 0 or -1 with "line N: ..." in err. */
int mgb_workload_parse_table(const char *text, struct mgb_workload **ws, size_t *n, char *err,
                             size_t errlen);

/* Set one field (key as in the table syntax). Returns 0 or -1 with a message. */
int mgb_workload_set(struct mgb_workload *w, const char *key, const char *value, char *err,
                     size_t errlen);

/* Validate and fill cum[]. Returns 0 or -1 with a message. */
int mgb_workload_finish(struct mgb_workload *w, char *err, size_t errlen);

/* Whether the logical op needs an existing object (and whether it consumes it). */
int mgb_lop_needs_key(enum mgb_lop op);
int mgb_lop_consumes_key(enum mgb_lop op);

#endif
