/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RADOS blob backend (engine/rados.h has the layout and the ref mapping). It owns the
 * stripe objects of every blob it writes, their checksums, the writer id counter, reader
 * pins and the reaper that removes retired blobs. librados errors (negative errno) become
 * enum mg_err in rados_err(), the one place.
 *
 * Writes. A writer fills one stripe buffer; when a full stripe is followed by more data it
 * is sent as one atomic write op (write_full + the "mg.c" xattr of its chunk CRCs) through
 * rados_aio_write_op_operate, with at most inflight_max ops in flight per writer (the
 * writer waits for the oldest when the window is full). librados copies the data into its
 * own buffer when the op is built, so the stripe buffer is reused at once. finish sends the
 * last stripe, waits for the window to drain and then makes the blob visible by writing the
 * header xattr "mg.h" on stripe 0 (for a one-stripe blob, in the same op as its data).
 *
 * Back of the envelope (one OSD on loopback, this 2-core machine): a write op costs one
 * round trip (~0.5-1 ms with memstore, more with BlueStore's fsync) plus the copy of the
 * data (~0.3 ms per 4 MiB). A 1 MiB PUT is then one op; a 64 MiB PUT is 16 stripes with 4
 * in flight plus one header op, so its latency is ~4 round trips of 4 MiB plus one small
 * one, and memory stays <= 5 stripes whatever the blob size.
 *
 * Reads. Each stripe touched costs one read op that returns the chunk-aligned data range
 * and the stripe's xattrs together (rados_read_op_read + rados_read_op_getxattrs): every
 * chunk is checked against "mg.c" and, when the range covers chunk 0 of stripe 0, the
 * header against the ref. A missing stripe, a short read, a table of the wrong size or a
 * mismatch is MG_ECORRUPT: a damaged byte is never returned.
 *
 * Timeouts: rados_osd_op_timeout and rados_mon_op_timeout are 30 s (unless the conf sets
 * them), so an unreachable cluster fails an op with MG_EIO instead of parking a worker
 * thread forever. A full pool answers ENOSPC (LIBRADOS_OPERATION_FULL_TRY) instead of
 * blocking; removes pass LIBRADOS_OPERATION_FULL_FORCE so deletes still work when full.
 */
#define MG_MODULE "engine"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <isa-l.h>
#include <rados/librados.h>

#include "engine/rados.h"
#include "engine/rados_internal.h"

#define CHUNK_SHIFT 16u
#define CHUNK_BYTES (1u << CHUNK_SHIFT) /* 64 KiB, as the local store (engine/blob.c) */
#define HDR_BYTES ENG__RADOS_HDR_BYTES
#define HDR_MAGIC 0x3152474du /* "MGR1" */
#define HDR_VERSION 1u
#define NAME_MAX_BYTES ENG__RADOS_NAME_MAX
#define COUNTER_OBJ "mg.instances"
#define COUNTER_XATTR "n"
#define XATTR_CRCS "mg.c"
#define XATTR_HDR "mg.h"
#define PIN_BUCKETS 4096u
#define REAP_BATCH 64u
#define OP_TIMEOUT "30"

struct flight {
    rados_completion_t c;
    rados_write_op_t op;
    uint32_t len; /* data bytes of the stripe */
};

struct eng_rados_writer {
    struct eng_rados *r;
    uint64_t seq;                             /* ref offset */
    char *buf;                                /* the stripe being filled */
    size_t len, cap;                          /* bytes in buf, allocated */
    uint32_t idx;                             /* stripe index of buf */
    uint64_t total;                           /* bytes appended */
    uint32_t crc;                             /* running crc32c (not yet inverted) */
    struct flight fl[ENG_RADOS_INFLIGHT_MAX]; /* ring of ops in flight */
    unsigned fl_head, fl_n;                   /* oldest, count */
    int rv;                                   /* sticky error: poisoned */
    struct eng_rados_writer *prev, *next;     /* r->writers (foreach skips these) */
};

struct rpin {
    struct eng_blob_ref ref; /* as pinned or retired */
    uint32_t pins;           /* readers holding it */
    int retired;             /* retired while pinned: queued at the last unpin */
    struct rpin *next;       /* bucket chain */
};

struct eng_rados {
    rados_t cluster;
    rados_ioctx_t io;
    uint64_t id;                      /* writer id: the segment of every ref of this open */
    uint32_t shift;                   /* log2 stripe bytes */
    uint32_t inflight_max;            /* per writer */
    pthread_mutex_t mu;               /* seq, writers, stats */
    uint64_t seq;                     /* last sequence handed out */
    struct eng_rados_writer *writers; /* unfinished writers */
    struct eng_rados_stats st;        /* counters (pin ones are filled from the pin state) */
    pthread_mutex_t pin_mu;           /* everything below */
    pthread_cond_t reap_cv;
    struct rpin *pins[PIN_BUCKETS];
    size_t npins, pinned_retired;
    struct eng_blob_ref *q; /* retire ring */
    size_t q_head, q_len, q_cap;
    size_t reap_inflight;
    uint64_t retired, reaped, retire_over; /* counters for stats */
    int reap_stop;
    pthread_t reaper;
};

/* ------------------------------------------------------------------ helpers */

static int rados_err(int rv)
{
    assert(rv < 0);
    switch (-rv) {
    case ENOSPC:
    case EDQUOT:
        return MG_ENOSPC;
    default:
        return MG_EIO;
    }
}

static uint32_t crc_update(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        int part = n > (1u << 30) ? (1 << 30) : (int)n;
        crc = crc32_iscsi((unsigned char *)c, part, crc);
        c += part;
        n -= (size_t)part;
    }
    return crc;
}

static uint32_t crc32c(const void *p, size_t n)
{
    return ~crc_update(0xFFFFFFFFu, p, n);
}

static void le32_put(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void le64_put(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t le32_get(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64_get(const unsigned char *p)
{
    return (uint64_t)le32_get(p) | (uint64_t)le32_get(p + 4) << 32;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void eng__rados_name(char out[ENG__RADOS_NAME_MAX], uint64_t seg, uint64_t off, uint32_t idx)
{
    snprintf(out, NAME_MAX_BYTES, "mg.%016" PRIx64 ".%016" PRIx64 ".%08" PRIx32, seg, off, idx);
}

int eng__rados_name_parse(const char *s, uint64_t *seg, uint64_t *off, uint32_t *idx)
{
    if (strlen(s) != 3 + 16 + 1 + 16 + 1 + 8 || memcmp(s, "mg.", 3) != 0 || s[19] != '.' ||
        s[36] != '.')
        return -1;
    uint64_t v[3] = {0, 0, 0};
    const int at[3] = {3, 20, 37}, len[3] = {16, 16, 8};
    for (int f = 0; f < 3; f++) {
        for (int i = 0; i < len[f]; i++) {
            char c = s[at[f] + i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0)
                return -1;
            v[f] = v[f] << 4 | (uint64_t)d;
        }
    }
    *seg = v[0];
    *off = v[1];
    *idx = (uint32_t)v[2];
    return 0;
}

static uint32_t ref_shift(const struct eng_blob_ref *ref)
{
    return ref->flags & 0xffu;
}

/* Stripes of a blob of ref->length (at least 1: stripe 0 carries the header). */
static uint64_t ref_stripes(const struct eng_blob_ref *ref)
{
    return ref->length == 0 ? 1 : ((ref->length - 1) >> ref_shift(ref)) + 1;
}

static int ref_valid(const struct eng_blob_ref *ref)
{
    uint32_t s = ref_shift(ref);
    return eng_rados_ref_is(ref) && (ref->flags & ~(ENG_RADOS_REF_FLAG | 0xffu)) == 0 && s >= 16 &&
           s <= 22 && ref->length < (1ull << 42);
}

static uint64_t stripe_len(const struct eng_blob_ref *ref, uint64_t s)
{
    uint64_t start = s << ref_shift(ref), sz = 1ull << ref_shift(ref);
    return ref->length - start < sz ? ref->length - start : sz;
}

void eng__rados_hdr_encode(unsigned char h[ENG__RADOS_HDR_BYTES], const struct eng_blob_ref *ref,
                           int64_t ms)
{
    memset(h, 0, HDR_BYTES);
    le32_put(h, HDR_MAGIC);
    le32_put(h + 8, HDR_VERSION);
    le32_put(h + 12, ref_shift(ref));
    le64_put(h + 16, ref->length);
    le32_put(h + 24, ref->crc32c);
    le32_put(h + 28, CHUNK_SHIFT);
    le64_put(h + 32, ref->segment);
    le64_put(h + 40, ref->offset);
    le64_put(h + 48, (uint64_t)ms);
    le32_put(h + 4, crc32c(h + 8, HDR_BYTES - 8));
}

int eng__rados_hdr_decode(const unsigned char *h, size_t len, struct eng_blob_ref *ref, int64_t *ms)
{
    if (len != HDR_BYTES || le32_get(h) != HDR_MAGIC || le32_get(h + 4) != crc32c(h + 8, len - 8) ||
        le32_get(h + 8) != HDR_VERSION || le32_get(h + 28) != CHUNK_SHIFT)
        return -1;
    ref->flags = ENG_RADOS_REF_FLAG | le32_get(h + 12);
    ref->length = le64_get(h + 16);
    ref->crc32c = le32_get(h + 24);
    ref->segment = le64_get(h + 32);
    ref->offset = le64_get(h + 40);
    if (ms != NULL)
        *ms = (int64_t)le64_get(h + 48);
    return ref_valid(ref) ? 0 : -1;
}

static void count_error(struct eng_rados *r, int corrupt)
{
    pthread_mutex_lock(&r->mu);
    if (corrupt)
        r->st.corrupt_reads++;
    else
        r->st.op_errors++;
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------ open and close */

/* Take the next writer id from the pool's counter object: compare-and-set of its decimal
 * xattr (a concurrent open that wins makes ours fail with ECANCELED: read and retry). */
static int take_writer_id(struct eng_rados *r, char *errmsg)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        char cur[32], next[32];
        int n = rados_getxattr(r->io, COUNTER_OBJ, COUNTER_XATTR, cur, sizeof(cur) - 1);
        uint64_t v = 0;
        rados_write_op_t op = rados_create_write_op();
        if (n == -ENOENT || n == -ENODATA) {
            rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
        } else if (n < 0) {
            rados_release_write_op(op);
            snprintf(errmsg, 256, "rados getxattr %s: %s", COUNTER_OBJ, strerror(-n));
            return MG_EIO;
        } else {
            cur[n] = '\0';
            v = strtoull(cur, NULL, 10);
            rados_write_op_cmpxattr(op, COUNTER_XATTR, LIBRADOS_CMPXATTR_OP_EQ, cur, (size_t)n);
        }
        int m = snprintf(next, sizeof(next), "%" PRIu64, v + 1);
        rados_write_op_setxattr(op, COUNTER_XATTR, next, (size_t)m);
        int rv = rados_write_op_operate(op, r->io, COUNTER_OBJ, NULL, LIBRADOS_OPERATION_FULL_TRY);
        rados_release_write_op(op);
        if (rv == 0) {
            r->id = v + 1;
            return 0;
        }
        if (rv != -ECANCELED && rv != -EEXIST) {
            snprintf(errmsg, 256, "rados update of %s: %s", COUNTER_OBJ, strerror(-rv));
            return rados_err(rv);
        }
    }
    snprintf(errmsg, 256, "rados update of %s: too much contention", COUNTER_OBJ);
    return MG_EIO;
}

static void *on_reaper(void *arg);

static int connect_pool(struct eng_rados *r, const struct eng_rados_opts *o, char *errmsg)
{
    char name[128];
    snprintf(name, sizeof(name), "client.%.100s", o->user != NULL ? o->user : "admin");
    int rv = rados_create2(&r->cluster, "ceph", name, 0);
    if (rv < 0) {
        snprintf(errmsg, 256, "rados_create2 %.100s: %.100s", name, strerror(-rv));
        return MG_ECONFIG;
    }
    if ((rv = rados_conf_read_file(r->cluster, o->conf)) < 0) {
        snprintf(errmsg, 256, "rados conf %s: %s", o->conf, strerror(-rv));
        rados_shutdown(r->cluster);
        return MG_ECONFIG;
    }
    char v[32];
    static const char *const timeouts[] = {"rados_osd_op_timeout", "rados_mon_op_timeout",
                                           "client_mount_timeout"};
    for (size_t i = 0; i < sizeof(timeouts) / sizeof(timeouts[0]); i++)
        if (rados_conf_get(r->cluster, timeouts[i], v, sizeof(v)) == 0 && strcmp(v, "0") == 0)
            rados_conf_set(r->cluster, timeouts[i], OP_TIMEOUT);
    if ((rv = rados_connect(r->cluster)) < 0) {
        snprintf(errmsg, 256, "rados_connect (%.120s, %.60s): %.40s", o->conf, name, strerror(-rv));
        rados_shutdown(r->cluster);
        return MG_EIO;
    }
    if ((rv = rados_ioctx_create(r->cluster, o->pool, &r->io)) < 0) {
        snprintf(errmsg, 256, "rados pool %s: %s", o->pool, strerror(-rv));
        rados_shutdown(r->cluster);
        return rv == -ENOENT ? MG_ECONFIG : MG_EIO;
    }
    if (o->nspace != NULL && o->nspace[0] != '\0')
        rados_ioctx_set_namespace(r->io, o->nspace);
    return 0;
}

int eng_rados_open(const struct eng_rados_opts *o, struct eng_rados **out, char *errmsg)
{
    assert(o != NULL && out != NULL && errmsg != NULL);
    errmsg[0] = '\0';
    uint32_t sb = o->stripe_bytes ? o->stripe_bytes : ENG_RADOS_STRIPE_BYTES_MAX;
    uint32_t inflight = o->inflight_max ? o->inflight_max : ENG_RADOS_INFLIGHT_DEFAULT;
    if (o->conf == NULL || o->pool == NULL || sb < ENG_RADOS_STRIPE_BYTES_MIN ||
        sb > ENG_RADOS_STRIPE_BYTES_MAX || (sb & (sb - 1)) != 0 ||
        inflight > ENG_RADOS_INFLIGHT_MAX) {
        snprintf(errmsg, 256,
                 "rados: conf and pool are required; stripe_bytes a power of two "
                 "in [64 KiB, 4 MiB], inflight_max <= %u",
                 ENG_RADOS_INFLIGHT_MAX);
        return MG_ECONFIG;
    }
    struct eng_rados *r = mg_calloc(1, sizeof(*r));
    r->shift = (uint32_t)__builtin_ctz(sb);
    r->inflight_max = inflight;
    int rv = connect_pool(r, o, errmsg);
    if (rv != 0)
        goto err_after_alloc;
    if ((rv = take_writer_id(r, errmsg)) != 0)
        goto err_after_connect;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->pin_mu, NULL);
    pthread_cond_init(&r->reap_cv, NULL);
    if (pthread_create(&r->reaper, NULL, on_reaper, r) != 0) {
        snprintf(errmsg, 256, "rados: cannot start the reaper thread");
        rv = MG_EIO;
        goto err_after_locks;
    }
    mg_log(MG_LOG_INFO,
           "event=rados_open pool=%s namespace=%s writer_id=%" PRIu64
           " stripe_bytes=%u inflight=%u",
           o->pool, o->nspace != NULL ? o->nspace : "", r->id, sb, inflight);
    *out = r;
    return 0;

err_after_locks:
    pthread_cond_destroy(&r->reap_cv);
    pthread_mutex_destroy(&r->pin_mu);
    pthread_mutex_destroy(&r->mu);
err_after_connect:
    rados_ioctx_destroy(r->io);
    rados_shutdown(r->cluster);
err_after_alloc:
    mg_log(MG_LOG_ERROR, "event=rados_open_failed err=%s msg=\"%s\"", mg_err_name(rv), errmsg);
    mg_free(r);
    assert(rv != 0);
    return rv;
}

uint64_t eng_rados_writer_id(const struct eng_rados *r)
{
    return r->id;
}

static void pins_drop(struct eng_rados *r);

void eng_rados_close(struct eng_rados *r)
{
    if (r == NULL)
        return;
    assert(r->writers == NULL); /* every writer finished or aborted */
    pthread_mutex_lock(&r->pin_mu);
    r->reap_stop = 1;
    pthread_cond_signal(&r->reap_cv);
    pthread_mutex_unlock(&r->pin_mu);
    pthread_join(r->reaper, NULL);
    pins_drop(r);
    rados_aio_flush(r->io);
    rados_ioctx_destroy(r->io);
    rados_shutdown(r->cluster);
    mg_free(r->q);
    pthread_cond_destroy(&r->reap_cv);
    pthread_mutex_destroy(&r->pin_mu);
    pthread_mutex_destroy(&r->mu);
    mg_free(r);
}

/* ------------------------------------------------------------------ removes */

/* Remove stripes [lo, hi) of (seg, off), hi - lo <= REMOVE_WINDOW, all in flight at once.
 * ENOENT counts as done (free is idempotent). Returns the stripes removed. */
#define REMOVE_WINDOW 32u
static uint64_t remove_range(struct eng_rados *r, uint64_t seg, uint64_t off, uint64_t lo,
                             uint64_t hi)
{
    assert(lo < hi && hi - lo <= REMOVE_WINDOW);
    rados_completion_t c[REMOVE_WINDOW];
    rados_write_op_t op[REMOVE_WINDOW];
    unsigned k = 0;
    uint64_t removed = 0;
    char name[NAME_MAX_BYTES];
    for (uint64_t s = lo; s < hi; s++) {
        eng__rados_name(name, seg, off, (uint32_t)s);
        op[k] = rados_create_write_op();
        rados_write_op_remove(op[k]);
        rados_aio_create_completion2(NULL, NULL, &c[k]);
        if (rados_aio_write_op_operate(op[k], r->io, c[k], name, NULL,
                                       LIBRADOS_OPERATION_FULL_FORCE) < 0) {
            rados_aio_release(c[k]);
            rados_release_write_op(op[k]);
            count_error(r, 0);
            continue;
        }
        k++;
    }
    for (unsigned i = 0; i < k; i++) {
        rados_aio_wait_for_complete(c[i]);
        int rv = rados_aio_get_return_value(c[i]);
        if (rv == 0) {
            removed++;
        } else if (rv != -ENOENT) {
            mg_log(MG_LOG_WARN, "op=rados_remove seg=%" PRIx64 " off=%" PRIu64 " err=%s", seg, off,
                   strerror(-rv));
            count_error(r, 0);
        }
        rados_aio_release(c[i]);
        rados_release_write_op(op[i]);
    }
    return removed;
}

/* Remove stripes [0, n): the others first (REMOVE_WINDOW at a time), stripe 0 with the
 * header last, so a free cut short leaves a blob foreach still reports whole. */
static uint64_t remove_stripes(struct eng_rados *r, uint64_t seg, uint64_t off, uint64_t n)
{
    uint64_t removed = 0;
    for (uint64_t hi = n; hi > 1;) {
        uint64_t lo = hi > REMOVE_WINDOW + 1 ? hi - REMOVE_WINDOW : 1;
        removed += remove_range(r, seg, off, lo, hi);
        hi = lo;
    }
    return removed + remove_range(r, seg, off, 0, 1);
}

void eng_rados_free(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    if (!ref_valid(ref)) {
        mg_log(MG_LOG_WARN,
               "op=rados_free seg=%" PRIx64 " off=%" PRIu64 " flags=%x: not a rados ref",
               ref->segment, ref->offset, ref->flags);
        return;
    }
    uint64_t n = remove_stripes(r, ref->segment, ref->offset, ref_stripes(ref));
    pthread_mutex_lock(&r->mu);
    r->st.stripes_removed += n;
    if (n > 0)
        r->st.bytes_freed += ref->length;
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------------- writer */

int eng_rados_writer_create(struct eng_rados *r, uint64_t size_hint, struct eng_rados_writer **out)
{
    assert(r != NULL && out != NULL);
    struct eng_rados_writer *w = mg_calloc(1, sizeof(*w));
    w->r = r;
    w->crc = 0xFFFFFFFFu;
    uint64_t stripe = 1ull << r->shift;
    if (size_hint > 0) {
        w->cap = size_hint < stripe ? (size_t)size_hint : (size_t)stripe;
        w->buf = mg_malloc(w->cap);
    }
    pthread_mutex_lock(&r->mu);
    w->seq = ++r->seq;
    w->next = r->writers;
    if (r->writers != NULL)
        r->writers->prev = w;
    r->writers = w;
    pthread_mutex_unlock(&r->mu);
    *out = w;
    return 0;
}

/* Wait for the oldest write in flight; its error becomes the writer's (sticky). */
static void flight_wait_oldest(struct eng_rados_writer *w)
{
    assert(w->fl_n > 0);
    struct flight *f = &w->fl[w->fl_head];
    rados_aio_wait_for_complete(f->c);
    int rv = rados_aio_get_return_value(f->c);
    rados_aio_release(f->c);
    rados_release_write_op(f->op);
    w->fl_head = (w->fl_head + 1) % ENG_RADOS_INFLIGHT_MAX;
    w->fl_n--;
    struct eng_rados *r = w->r;
    pthread_mutex_lock(&r->mu);
    r->st.inflight--;
    if (rv == 0) {
        r->st.stripes_written++;
        r->st.bytes_written += f->len;
    } else {
        r->st.op_errors++;
    }
    pthread_mutex_unlock(&r->mu);
    if (rv < 0 && w->rv == 0) {
        mg_log(MG_LOG_ERROR, "op=rados_write seg=%" PRIx64 " off=%" PRIu64 " err=%s", r->id, w->seq,
               strerror(-rv));
        w->rv = rados_err(rv);
    }
}

/* Send the buffered stripe w->idx (with the blob header when hdr != NULL), waiting for a
 * slot in the window first. The buffer is free for reuse on return (librados copied it). */
static int stripe_send(struct eng_rados_writer *w, const unsigned char *hdr)
{
    struct eng_rados *r = w->r;
    while (w->fl_n >= r->inflight_max)
        flight_wait_oldest(w);
    if (w->rv != 0)
        return w->rv;
    unsigned char crcs[(ENG_RADOS_STRIPE_BYTES_MAX / CHUNK_BYTES) * 4];
    size_t nchunks = (w->len + CHUNK_BYTES - 1) / CHUNK_BYTES;
    for (size_t i = 0; i < nchunks; i++) {
        size_t at = i * CHUNK_BYTES, n = w->len - at < CHUNK_BYTES ? w->len - at : CHUNK_BYTES;
        le32_put(crcs + 4 * i, crc32c(w->buf + at, n));
    }
    char name[NAME_MAX_BYTES];
    eng__rados_name(name, r->id, w->seq, w->idx);
    struct flight *f = &w->fl[(w->fl_head + w->fl_n) % ENG_RADOS_INFLIGHT_MAX];
    f->op = rados_create_write_op();
    f->len = (uint32_t)w->len;
    if (w->len == 0) /* an empty blob: write_full of nothing must still create stripe 0 */
        rados_write_op_create(f->op, LIBRADOS_CREATE_IDEMPOTENT, NULL);
    rados_write_op_write_full(f->op, w->buf != NULL ? w->buf : "", w->len);
    rados_write_op_setxattr(f->op, XATTR_CRCS, (const char *)crcs, nchunks * 4);
    if (hdr != NULL)
        rados_write_op_setxattr(f->op, XATTR_HDR, (const char *)hdr, HDR_BYTES);
    rados_aio_create_completion2(NULL, NULL, &f->c);
    int rv =
        rados_aio_write_op_operate(f->op, r->io, f->c, name, NULL, LIBRADOS_OPERATION_FULL_TRY);
    if (rv < 0) {
        rados_aio_release(f->c);
        rados_release_write_op(f->op);
        count_error(r, 0);
        return w->rv = rados_err(rv);
    }
    w->fl_n++;
    pthread_mutex_lock(&r->mu);
    r->st.inflight++;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int eng_rados_writer_append(struct eng_rados_writer *w, const void *data, size_t len)
{
    assert(w != NULL && w->rv == 0);
    const char *p = data;
    size_t stripe = (size_t)1 << w->r->shift;
    w->crc = crc_update(w->crc, data, len);
    w->total += len;
    while (len > 0) {
        if (w->len == stripe) { /* a full stripe with more behind it: not the last */
            int rv = stripe_send(w, NULL);
            if (rv != 0)
                return rv;
            w->idx++;
            w->len = 0;
        }
        size_t n = stripe - w->len < len ? stripe - w->len : len;
        if (w->len + n > w->cap) {
            size_t cap = w->cap ? w->cap : 64u << 10;
            while (cap < w->len + n)
                cap *= 2;
            w->cap = cap < stripe ? cap : stripe;
            w->buf = mg_realloc(w->buf, w->cap);
        }
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        p += n;
        len -= n;
    }
    return 0;
}

static void writer_unlink(struct eng_rados_writer *w)
{
    struct eng_rados *r = w->r;
    pthread_mutex_lock(&r->mu);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        r->writers = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&r->mu);
}

/* Drain the window, remove whatever the writer sent, free it. */
static void writer_discard(struct eng_rados_writer *w)
{
    while (w->fl_n > 0)
        flight_wait_oldest(w);
    remove_stripes(w->r, w->r->id, w->seq, (uint64_t)w->idx + 1);
    writer_unlink(w);
    mg_free(w->buf);
    mg_free(w);
}

/* Make stripe 0's header visible (after every other stripe is durable). */
static int header_put(struct eng_rados *r, const struct eng_blob_ref *ref, const unsigned char *h)
{
    char name[NAME_MAX_BYTES];
    eng__rados_name(name, ref->segment, ref->offset, 0);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_assert_exists(op); /* never create a bare header over a removed stripe */
    rados_write_op_setxattr(op, XATTR_HDR, (const char *)h, HDR_BYTES);
    int rv = rados_write_op_operate(op, r->io, name, NULL, LIBRADOS_OPERATION_FULL_TRY);
    rados_release_write_op(op);
    if (rv < 0) {
        mg_log(MG_LOG_ERROR, "op=rados_header seg=%" PRIx64 " off=%" PRIu64 " err=%s", ref->segment,
               ref->offset, strerror(-rv));
        count_error(r, 0);
        return rados_err(rv);
    }
    return 0;
}

int eng_rados_writer_finish(struct eng_rados_writer *w, struct eng_blob_ref *ref)
{
    assert(w != NULL && ref != NULL);
    struct eng_rados *r = w->r;
    struct eng_blob_ref out = {.segment = r->id,
                               .offset = w->seq,
                               .length = w->total,
                               .crc32c = ~w->crc,
                               .flags = ENG_RADOS_REF_FLAG | r->shift};
    unsigned char h[HDR_BYTES];
    eng__rados_hdr_encode(h, &out, wall_ms());
    int rv = w->rv;
    if (rv == 0)
        rv = stripe_send(w, w->idx == 0 ? h : NULL);
    while (w->fl_n > 0)
        flight_wait_oldest(w);
    if (rv == 0)
        rv = w->rv;
    if (rv == 0 && w->idx > 0)
        rv = header_put(r, &out, h);
    if (rv != 0) {
        writer_discard(w);
        return rv;
    }
    assert(ref_stripes(&out) == (uint64_t)w->idx + 1);
    writer_unlink(w);
    pthread_mutex_lock(&r->mu);
    r->st.blobs_written++;
    pthread_mutex_unlock(&r->mu);
    mg_free(w->buf);
    mg_free(w);
    *ref = out;
    return 0;
}

void eng_rados_writer_abort(struct eng_rados_writer *w)
{
    if (w != NULL)
        writer_discard(w);
}

/* -------------------------------------------------------------------- reads */

/* Fetch "mg.c" (and "mg.h") from an xattr iterator into crcs / hdr; their lengths in *nc,
 * *nh (SIZE_MAX when absent or too long). */
static void xattrs_take(rados_xattrs_iter_t it, unsigned char *crcs, size_t crcs_cap, size_t *nc,
                        unsigned char hdr[HDR_BYTES], size_t *nh)
{
    *nc = *nh = SIZE_MAX;
    const char *name, *val;
    size_t len;
    while (rados_getxattrs_next(it, &name, &val, &len) == 0 && name != NULL) {
        if (strcmp(name, XATTR_CRCS) == 0 && len <= crcs_cap) {
            if (len > 0) /* an empty blob's table is empty, val may be NULL */
                memcpy(crcs, val, len);
            *nc = len;
        } else if (strcmp(name, XATTR_HDR) == 0 && len <= HDR_BYTES) {
            if (len > 0)
                memcpy(hdr, val, len);
            *nh = len;
        }
    }
}

static int corrupt(struct eng_rados *r, const struct eng_blob_ref *ref, uint64_t s, const char *why)
{
    mg_log(MG_LOG_ERROR,
           "op=rados_read seg=%" PRIx64 " off=%" PRIu64 " stripe=%" PRIu64 " corrupt=%s",
           ref->segment, ref->offset, s, why);
    count_error(r, 1);
    return MG_ECORRUPT;
}

/* Read [lo, hi) of stripe s into dst, verified (see the file comment). */
static int stripe_read(struct eng_rados *r, const struct eng_blob_ref *ref, uint64_t s, uint64_t lo,
                       uint64_t hi, char *dst)
{
    uint64_t slen = stripe_len(ref, s);
    assert(lo <= hi && hi <= slen);
    uint64_t a = lo & ~(uint64_t)(CHUNK_BYTES - 1);
    uint64_t b = (hi + CHUNK_BYTES - 1) & ~(uint64_t)(CHUNK_BYTES - 1);
    if (b > slen)
        b = slen;
    char *tmp = a == lo && b == hi ? dst : mg_malloc(b - a > 0 ? (size_t)(b - a) : 1);
    unsigned char crcs[(ENG_RADOS_STRIPE_BYTES_MAX / CHUNK_BYTES) * 4], hdr[HDR_BYTES];
    size_t nc, nh, got = 0;
    int prv = 0, xrv = 0;
    rados_xattrs_iter_t it = NULL;
    char name[NAME_MAX_BYTES];
    eng__rados_name(name, ref->segment, ref->offset, (uint32_t)s);
    rados_read_op_t op = rados_create_read_op();
    if (b > a) /* a length of 0 would read the whole object */
        rados_read_op_read(op, a, (size_t)(b - a), tmp, &got, &prv);
    rados_read_op_getxattrs(op, &it, &xrv);
    int rv = rados_read_op_operate(op, r->io, name, 0);
    rados_release_read_op(op);
    if (rv == 0 && (prv < 0 || xrv < 0))
        rv = prv < 0 ? prv : xrv;
    if (rv == 0 && it != NULL) {
        xattrs_take(it, crcs, sizeof(crcs), &nc, hdr, &nh);
        rados_getxattrs_end(it);
    } else {
        if (it != NULL)
            rados_getxattrs_end(it);
        if (tmp != dst)
            mg_free(tmp);
        if (rv == -ENOENT)
            return corrupt(r, ref, s, "missing");
        mg_log(MG_LOG_ERROR, "op=rados_read seg=%" PRIx64 " off=%" PRIu64 " err=%s", ref->segment,
               ref->offset, strerror(rv < 0 ? -rv : EIO));
        count_error(r, 0);
        return rv < 0 ? rados_err(rv) : MG_EIO;
    }
    const char *why = NULL;
    size_t want = (size_t)((slen + CHUNK_BYTES - 1) / CHUNK_BYTES) * 4;
    struct eng_blob_ref h;
    if (got != b - a)
        why = "short";
    else if (nc != want)
        why = "crc_table";
    else if (s == 0 && a == 0 &&
             (nh != HDR_BYTES || eng__rados_hdr_decode(hdr, nh, &h, NULL) != 0 ||
              h.segment != ref->segment || h.offset != ref->offset || h.length != ref->length ||
              h.crc32c != ref->crc32c || h.flags != ref->flags))
        why = "header";
    for (uint64_t at = a; why == NULL && at < b; at += CHUNK_BYTES) {
        size_t n = b - at < CHUNK_BYTES ? (size_t)(b - at) : CHUNK_BYTES;
        if (crc32c(tmp + (at - a), n) != le32_get(crcs + 4 * (at / CHUNK_BYTES)))
            why = "chunk_crc";
    }
    if (why == NULL && tmp != dst)
        memcpy(dst, tmp + (lo - a), (size_t)(hi - lo));
    if (tmp != dst)
        mg_free(tmp);
    return why == NULL ? 0 : corrupt(r, ref, s, why);
}

int eng_rados_read(struct eng_rados *r, const struct eng_blob_ref *ref, uint64_t offset, void *buf,
                   size_t len)
{
    assert(r != NULL && ref != NULL);
    if (!ref_valid(ref) || offset > ref->length || len > ref->length - offset)
        return MG_EINVALIDARGUMENT;
    char *dst = buf;
    uint32_t shift = ref_shift(ref);
    while (len > 0) {
        uint64_t s = offset >> shift, lo = offset - (s << shift);
        uint64_t n = stripe_len(ref, s) - lo < len ? stripe_len(ref, s) - lo : len;
        int rv = stripe_read(r, ref, s, lo, lo + n, dst);
        if (rv != 0)
            return rv;
        dst += n;
        offset += n;
        len -= (size_t)n;
    }
    return 0;
}

int eng_rados_cursor_read(struct eng_rados *r, const struct eng_blob_ref *ref,
                          struct eng_blob_cursor *c, void *buf, size_t len)
{
    assert(c != NULL);
    int rv = eng_rados_read(r, ref, c->pos, buf, len);
    if (rv == 0)
        c->pos += len;
    return rv;
}

int eng_rados_verify(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    if (!ref_valid(ref))
        return MG_EINVALIDARGUMENT;
    uint64_t n = ref_stripes(ref);
    char *buf = mg_malloc(ref->length < (1ull << ref_shift(ref)) ? (size_t)ref->length + 1
                                                                 : (size_t)1 << ref_shift(ref));
    uint32_t crc = 0xFFFFFFFFu;
    int rv = 0;
    for (uint64_t s = 0; s < n && rv == 0; s++) {
        uint64_t sl = stripe_len(ref, s);
        if ((rv = stripe_read(r, ref, s, 0, sl, buf)) == 0)
            crc = crc_update(crc, buf, (size_t)sl);
    }
    mg_free(buf);
    if (rv == 0 && ~crc != ref->crc32c)
        rv = corrupt(r, ref, 0, "blob_crc");
    return rv;
}

/* ------------------------------------------------------------------- pins */

/* Pins and the reaper, as the local store's (engine/engine.h: eng_blob_pin, eng_blob_retire):
 * a table of pinned blobs with their pin counts, a FIFO ring of retired blobs no one pins,
 * and one reaper thread removing up to REAP_BATCH of them per round with pin_mu dropped.
 * A blob retired while pinned waits in the table and joins the ring at its last unpin; one
 * pinned after its retire but before the reaper took it is caught by the reaper's re-check.
 * Each free is a few round trips (its stripes' removes in flight together), so the reaper
 * frees ~1,000-2,000 blobs/s on loopback. Memory: 48 B per pinned blob (<= ENG_BLOB_PINS_MAX),
 * 32 B per retired one waiting. */
static size_t pin_bucket(const struct eng_blob_ref *ref)
{
    uint64_t h = ref->segment * 0x9E3779B97F4A7C15ull ^ ref->offset * 0xC2B2AE3D27D4EB4Full;
    return (size_t)(h >> 40) & (PIN_BUCKETS - 1);
}

static struct rpin **pin_find(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    struct rpin **p = &r->pins[pin_bucket(ref)];
    while (*p != NULL && ((*p)->ref.segment != ref->segment || (*p)->ref.offset != ref->offset))
        p = &(*p)->next;
    return p;
}

static void ring_push(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    if (r->q_len == r->q_cap) {
        size_t cap = r->q_cap ? r->q_cap * 2 : 256;
        struct eng_blob_ref *q = mg_malloc(cap * sizeof(*q));
        for (size_t i = 0; i < r->q_len; i++)
            q[i] = r->q[(r->q_head + i) % r->q_cap];
        mg_free(r->q);
        r->q = q;
        r->q_head = 0;
        r->q_cap = cap;
    }
    r->q[(r->q_head + r->q_len++) % r->q_cap] = *ref;
    pthread_cond_signal(&r->reap_cv);
}

int eng_rados_pin(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    pthread_mutex_lock(&r->pin_mu);
    struct rpin **p = pin_find(r, ref);
    if (*p == NULL) {
        if (r->npins >= ENG_BLOB_PINS_MAX) {
            pthread_mutex_unlock(&r->pin_mu);
            return MG_ESLOWDOWN;
        }
        *p = mg_calloc(1, sizeof(**p));
        (*p)->ref = *ref;
        r->npins++;
    }
    (*p)->pins++;
    pthread_mutex_unlock(&r->pin_mu);
    return 0;
}

void eng_rados_unpin(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    pthread_mutex_lock(&r->pin_mu);
    struct rpin **p = pin_find(r, ref), *e = *p;
    assert(e != NULL && e->pins > 0); /* unpin without pin: programmer error */
    if (e != NULL && --e->pins == 0) {
        *p = e->next;
        r->npins--;
        if (e->retired) {
            r->pinned_retired--;
            ring_push(r, &e->ref);
        }
        mg_free(e);
    }
    pthread_mutex_unlock(&r->pin_mu);
}

static size_t backlog_locked(struct eng_rados *r)
{
    return r->q_len + r->pinned_retired + r->reap_inflight;
}

void eng_rados_retire(struct eng_rados *r, const struct eng_blob_ref *ref)
{
    pthread_mutex_lock(&r->pin_mu);
    if (backlog_locked(r) >= ENG_BLOB_RETIRE_BACKLOG_MAX)
        r->retire_over++;
    r->retired++;
    struct rpin *e = *pin_find(r, ref);
    if (e == NULL) {
        ring_push(r, ref);
    } else if (!e->retired) {
        e->retired = 1;
        e->ref = *ref;
        r->pinned_retired++;
    }
    pthread_mutex_unlock(&r->pin_mu);
}

size_t eng_rados_retire_backlog(struct eng_rados *r)
{
    pthread_mutex_lock(&r->pin_mu);
    size_t n = backlog_locked(r);
    pthread_mutex_unlock(&r->pin_mu);
    return n;
}

static void *on_reaper(void *arg)
{
    struct eng_rados *r = arg;
    struct eng_blob_ref batch[REAP_BATCH];
    pthread_mutex_lock(&r->pin_mu);
    for (;;) {
        while (r->q_len == 0 && !r->reap_stop)
            pthread_cond_wait(&r->reap_cv, &r->pin_mu);
        if (r->q_len == 0)
            break; /* stopping, drained */
        size_t n = 0;
        while (r->q_len > 0 && n < REAP_BATCH) {
            struct eng_blob_ref ref = r->q[r->q_head];
            r->q_head = (r->q_head + 1) % r->q_cap;
            r->q_len--;
            struct rpin *e = *pin_find(r, &ref);
            if (e != NULL) { /* pinned after its retire: freed at the last unpin */
                if (!e->retired) {
                    e->retired = 1;
                    e->ref = ref;
                    r->pinned_retired++;
                }
                continue;
            }
            batch[n++] = ref;
        }
        r->reap_inflight = n;
        pthread_mutex_unlock(&r->pin_mu);
        for (size_t i = 0; i < n; i++)
            eng_rados_free(r, &batch[i]);
        pthread_mutex_lock(&r->pin_mu);
        r->reaped += n;
        r->reap_inflight = 0;
    }
    pthread_mutex_unlock(&r->pin_mu);
    return NULL;
}

/* Close: what is still pinned and retired is freed too (readers are gone), logged. */
static void pins_drop(struct eng_rados *r)
{
    for (size_t i = 0; i < PIN_BUCKETS; i++) {
        while (r->pins[i] != NULL) {
            struct rpin *e = r->pins[i];
            r->pins[i] = e->next;
            mg_log(MG_LOG_WARN, "op=rados_close seg=%" PRIx64 " off=%" PRIu64 " still pinned%s",
                   e->ref.segment, e->ref.offset, e->retired ? ": freed" : "");
            if (e->retired)
                eng_rados_free(r, &e->ref);
            mg_free(e);
        }
    }
    r->npins = r->pinned_retired = 0;
}

/* ------------------------------------------------------------------ foreach */

struct stripe_id {
    uint64_t seg, off;
    uint32_t idx;
};

static int stripe_id_cmp(const void *a, const void *b)
{
    const struct stripe_id *x = a, *y = b;
    if (x->seg != y->seg)
        return x->seg < y->seg ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int eng__rados_seg_in(const uint64_t *segs, size_t nsegs, uint64_t seg)
{
    size_t lo = 0, hi = nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (segs[mid] == seg)
            return 1;
        if (segs[mid] < seg)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Every stripe object of the namespace whose segment is one of segs (sorted; NULL: all). */
static int list_stripes(struct eng_rados *r, const uint64_t *segs, size_t nsegs,
                        struct stripe_id **out, size_t *n_out)
{
    rados_list_ctx_t ctx;
    int rv = rados_nobjects_list_open(r->io, &ctx);
    if (rv < 0)
        return rados_err(rv);
    struct stripe_id *v = NULL;
    size_t n = 0, cap = 0;
    const char *name;
    while ((rv = rados_nobjects_list_next(ctx, &name, NULL, NULL)) == 0) {
        struct stripe_id id;
        if (eng__rados_name_parse(name, &id.seg, &id.off, &id.idx) != 0 ||
            (segs != NULL && !eng__rados_seg_in(segs, nsegs, id.seg)))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            v = mg_realloc(v, cap * sizeof(*v));
        }
        v[n++] = id;
    }
    rados_nobjects_list_close(ctx);
    if (rv != -ENOENT) {
        mg_free(v);
        mg_log(MG_LOG_ERROR, "op=rados_list err=%s", strerror(-rv));
        return rados_err(rv);
    }
    if (n > 1) /* qsort of NULL, 0 is undefined behaviour (UBSan) */
        qsort(v, n, sizeof(*v), stripe_id_cmp);
    *out = v;
    *n_out = n;
    return 0;
}

static int writing_now(struct eng_rados *r, uint64_t seg, uint64_t off)
{
    int yes = 0;
    pthread_mutex_lock(&r->mu);
    for (struct eng_rados_writer *w = r->writers; w != NULL && !yes; w = w->next)
        yes = seg == r->id && off == w->seq;
    pthread_mutex_unlock(&r->mu);
    return yes;
}

/* The ref foreach reports for the blob whose stripes are v[0..n) (same seg, off), given the
 * result len of fetching stripe 0's header into h (a negative errno; -ENOENT when the blob
 * has no stripe 0). Returns 0 or MG_EIO (the fetch failed otherwise). */
static int group_ref(struct eng_rados *r, const struct stripe_id *v, size_t n,
                     const unsigned char *h, int len, struct eng_blob_ref *ref)
{
    if (len < 0 && len != -ENODATA && len != -ENOENT) {
        mg_log(MG_LOG_ERROR, "op=rados_foreach seg=%" PRIx64 " off=%" PRIu64 " err=%s", v[0].seg,
               v[0].off, strerror(-len));
        return rados_err(len);
    }
    if (len > 0 && eng__rados_hdr_decode(h, (size_t)len, ref, NULL) == 0 &&
        ref->segment == v[0].seg && ref->offset == v[0].off && ref_stripes(ref) > v[n - 1].idx)
        return 0;
    /* Unfinished (or its header is damaged): a ref that frees every stripe seen. */
    *ref = (struct eng_blob_ref){.segment = v[0].seg,
                                 .offset = v[0].off,
                                 .length = ((uint64_t)v[n - 1].idx + 1) << r->shift,
                                 .crc32c = 0,
                                 .flags = ENG_RADOS_REF_FLAG | r->shift};
    return 0;
}

/* A header fetch in flight: the group v[i..j) and its stripe 0's "mg.h". */
#define HDR_WINDOW 32u
struct hdr_fetch {
    size_t i, j;
    rados_completion_t c; /* NULL: nothing issued (no stripe 0, or the issue failed) */
    int issue_rv;         /* when c is NULL: the result to report (-ENOENT, or the error) */
    unsigned char h[HDR_BYTES + 1];
};

/* Design: one header read per blob is O(blobs) round trips (~0.3 ms each here), so they go
 * HDR_WINDOW at a time through rados_aio_getxattr, and cb still sees the blobs in (segment,
 * offset) order: 100,000 blobs cost ~1 s of header reads instead of ~30 s. */
int eng_rados_foreach(struct eng_rados *r, eng_blob_foreach_cb cb, void *ctx)
{
    return eng_rados_foreach_segments(r, NULL, 0, cb, ctx);
}

int eng_rados_foreach_segments(struct eng_rados *r, const uint64_t *segs, size_t nsegs,
                               eng_blob_foreach_cb cb, void *ctx)
{
    struct stripe_id *v;
    size_t n, next = 0;
    int rv = list_stripes(r, segs, nsegs, &v, &n);
    if (rv != 0)
        return rv;
    struct hdr_fetch win[HDR_WINDOW];
    unsigned head = 0, cnt = 0;
    for (;;) {
        while (cnt < HDR_WINDOW && next < n && rv == 0) {
            size_t j = next + 1;
            while (j < n && v[j].seg == v[next].seg && v[j].off == v[next].off)
                j++;
            if (!writing_now(r, v[next].seg, v[next].off)) {
                struct hdr_fetch *f = &win[(head + cnt++) % HDR_WINDOW];
                *f = (struct hdr_fetch){.i = next, .j = j, .issue_rv = -ENOENT};
                if (v[next].idx == 0) {
                    char name[NAME_MAX_BYTES];
                    eng__rados_name(name, v[next].seg, v[next].off, 0);
                    rados_aio_create_completion2(NULL, NULL, &f->c);
                    int e = rados_aio_getxattr(r->io, name, f->c, XATTR_HDR, (char *)f->h,
                                               sizeof(f->h));
                    if (e < 0) {
                        rados_aio_release(f->c);
                        f->c = NULL;
                        f->issue_rv = e;
                    }
                }
            }
            next = j;
        }
        if (cnt == 0)
            break;
        struct hdr_fetch *f = &win[head];
        head = (head + 1) % HDR_WINDOW;
        cnt--;
        int len = f->issue_rv;
        if (f->c != NULL) {
            rados_aio_wait_for_complete(f->c);
            len = rados_aio_get_return_value(f->c);
            rados_aio_release(f->c);
        }
        struct eng_blob_ref ref;
        if (rv == 0 && (rv = group_ref(r, v + f->i, f->j - f->i, f->h, len, &ref)) == 0)
            rv = cb(ctx, &ref); /* after an error, the window drains without callbacks */
    }
    mg_free(v);
    return rv;
}

void eng_rados_stats_get(struct eng_rados *r, struct eng_rados_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&r->pin_mu);
    out->pinned = r->npins;
    out->retire_backlog = backlog_locked(r);
    out->retired = r->retired;
    out->reaped = r->reaped;
    out->retire_over_limit = r->retire_over;
    pthread_mutex_unlock(&r->pin_mu);
}
