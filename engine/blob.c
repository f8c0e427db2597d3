/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The blob store: object bytes in append-only files under data_dir/blobs
 * (DESIGN.md 5a, 8). It owns the on-disk record format, how concurrent writers
 * share files without interleaving, the fsync group commit that makes a PUT
 * durable before it is acknowledged, the per-chunk checksums every read
 * verifies, reader pins and the background reaper that frees retired blobs,
 * and the never-reused segment numbers. errno is translated to enum mg_err at
 * each syscall site here.
 *
 * Files. `%016x.seg` is a shared segment: many small blobs, packed back to
 * back. `%016x.blob` is a blob's own file (blobs >= own_file_bytes, or of
 * unknown size past the in-memory spill limit), unlinked when it is freed.
 * `*.tmp` is an own file still being written; it is renamed into place before
 * the write is acknowledged, so at open every *.tmp is garbage and removed.
 * `LOCK` holds an flock so that one process owns the directory. `STATE` holds
 * the store's epoch and segment-number high-water mark (below). `SEGMENTS` is
 * the live-bytes manifest a clean close leaves (below).
 *
 * Format 2 (this file). A directory with segment files but no STATE is format
 * 1 (no chunk checksums) and is refused at open, as the metadata format bump
 * refuses old data directories. All integers little-endian.
 *   Segment header, 64 bytes at offset 0 of every .seg and .blob:
 *     0 magic "MGSG" u32   4 crc32c of bytes 8..63 u32   8 version u32 (2)
 *    12 kind u32 (0 shared, 1 own)   16 segment number u64   24 epoch u64
 *    32 chunk bytes u32   36..63 zero
 *   Record (records follow the segment header back to back; an own file has one):
 *     48-byte header, data, chunk-CRC table, slack
 *     0 magic u32 ("MGB2" live, "MGBF" freed, "MGBR" reserved)
 *     4 crc32c of bytes 8..47 u32   8 data length u64   16 crc32c of the data u32
 *    20 chunk shift u32 (16)   24 segment number u64   32 epoch u64
 *    40 region bytes u64 (header to the next record: what a walk skips)
 *   The table holds one crc32c u32 per BLOB_CHUNK_BYTES of data (the last chunk
 *   may be short), right after the data.
 * A shared region gets a "reserved" header the moment it is reserved (under
 * the lock, in offset order, so any later record made durable by fdatasync
 * makes it durable too): a walk (eng_blob_foreach) can always skip a region,
 * finished, freed, abandoned or in flight. The live header is written last,
 * just before the fsync, so a record whose write failed or crashed is never
 * live. A ref points at the data; its flags carry the epoch (low 32 bits).
 *
 * Chunk size: 64 KiB. Every read verifies exactly the chunks it touches, so a
 * range read costs up to one chunk of extra I/O at each edge: at 64 KiB that
 * is <= 128 KiB extra (~30 us at page-cache speed; the GET path reads 1 MiB
 * slices, chunk-aligned, with none). The table costs 4 bytes per 64 KiB
 * (0.006%, 320 KiB for a 5 GiB blob, read in the same I/O for the chunks read).
 * ISA-L crc32_iscsi runs at >10 GB/s per core, so verifying a chunk is ~5 us
 * and fixed per-call costs (the syscall, the table read) dominate below ~16
 * KiB; larger chunks (1 MiB) would make a 1-byte range read 1 MiB of I/O.
 *
 * Concurrent writers never interleave bytes: a writer that knows its size
 * (size_hint) reserves its record bytes in the active segment with one
 * locked offset bump, then pwrites into its region with no lock held; a
 * writer of unknown size buffers up to BLOB_SPILL_BYTES in memory and
 * reserves its exact size at finish (or spills to an own file). Slack left by
 * a writer that wrote less than its hint is punched out.
 *
 * Reclaim. Freeing marks the header freed (which makes free idempotent) and
 * punches the data and table out with FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE
 * (only the whole 4 KiB blocks inside the record, so neighbours are never
 * touched). Live bytes per segment are tracked in memory; a sealed segment
 * whose live bytes reach zero is unlinked. Segments found at open have unknown
 * live bytes unless the previous run closed cleanly (then the SEGMENTS
 * manifest carries them over); after a crash, the metadata layer's orphan
 * collector (eng_blob_foreach) frees what no entry references. The metadata
 * layer retires blobs (eng_blob_retire); readers pin what they stream
 * (eng_blob_pin); one reaper thread frees retired, unpinned blobs in bounded
 * batches (see "Pins and the reaper" below). Every segment in use keeps an fd
 * (opened lazily on first use): with 64 MiB segments and 8 MiB own files that
 * is ~16k-128k fds per TiB stored, above common RLIMIT_NOFILE soft limits; an
 * fd cache with LRU close is TODO(#2).
 *
 * Segment numbers are never reused: STATE persists a high-water mark (numbers
 * are handed out in blocks of BLOB_SEGNO_BLOCK; the mark moves, fsynced, before
 * a number past it is used), and an epoch bumped at every open. The epoch is
 * in every segment header, record header and ref; a free checks both before it
 * marks or punches anything, so a stale ref can never free a newer segment's
 * data even if a directory were restored from a backup.
 */
#define MG_MODULE "engine"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <isa-l.h>

#include "engine/engine.h"
#include "engine/fault.h"

#define BLOB_FORMAT_VERSION 2u
#define BLOB_SEGHDR_BYTES 64
#define BLOB_HDR_BYTES 48
#define BLOB_CHUNK_SHIFT 16u
#define BLOB_CHUNK_BYTES (1u << BLOB_CHUNK_SHIFT) /* 64 KiB: see the file comment */
#define BLOB_SEG_MAGIC 0x4753474du   /* "MGSG" */
#define BLOB_MAGIC_LIVE 0x3242474du  /* "MGB2" */
#define BLOB_MAGIC_FREED 0x4642474du /* "MGBF" */
#define BLOB_MAGIC_RSVD 0x5242474du  /* "MGBR" */
#define BLOB_SEGMENT_BYTES_DEFAULT (64ull << 20)
#define BLOB_OWN_FILE_BYTES_DEFAULT (8ull << 20)
#define BLOB_STAGE_BYTES (256u << 10) /* staging buffer of a streaming writer */
#define BLOB_SPILL_BYTES (1u << 20)   /* unknown-size blobs buffered up to this */
#define BLOB_PUNCH_ALIGN 4096u        /* holes cover whole blocks only */
#define BLOB_NAME_MAX 64
#define BLOB_SEGNO_BLOCK 1024u        /* segment numbers reserved per STATE write */
#define BLOB_VERIFY_BYTES (16u * BLOB_CHUNK_BYTES) /* eng_blob_verify reads 1 MiB at a time */
#define PIN_BUCKETS 4096u             /* pin table buckets (power of two) */
#define REAP_BATCH 128u               /* frees per reaper tick */
#define REAP_TICK_US 1000u            /* pause between ticks while a backlog remains */

/* ------------------------------------------------------------ group commit */

/* One fsync stream per file (DESIGN.md 5a). A finisher needs a sync that *started* after its
 * bytes were written: it asks for generation started+1. If no sync runs it becomes the leader
 * and runs that sync; otherwise it waits, and when the running sync ends one waiter leads the
 * next, covering everyone who arrived meanwhile.
 *
 * Back of the envelope: the disk fsyncs in ~0.2 ms (DESIGN.md 12); a 1 KiB PUT costs ~10 us of
 * CPU in the gateway. With N writers finishing on one segment, each waits at most two syncs
 * (the one running plus the next), so latency <= ~0.4 ms and the segment sees about
 * 1 / 0.2 ms = 5k fsyncs/s whatever N is: at 50k PUT/s that is ~10 blobs per fsync. A failed
 * sync is sticky (the page cache state is unknown after a failed fsync, so retrying could
 * acknowledge lost data): the file is sealed and every later sync on it fails. */
struct gsync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t started; /* generation of the newest sync started */
    uint64_t done;    /* generation of the newest sync finished */
    int running;      /* a sync is in flight */
    int sticky;       /* 1: the first failure fails every later sync (files) */
    int err;          /* mg_err of the newest failed sync, 0 if none */
    uint64_t err_gen; /* its generation */
};

struct seg {
    uint64_t no;          /* segment number (file name) */
    uint64_t epoch;       /* from its segment header (valid once fd >= 0) */
    int fd;               /* -1 until first use */
    int own;              /* a blob's own file (.blob) */
    int sealed;           /* takes no new reservations */
    int live_known;       /* live_bytes is exact (created since open, or the manifest) */
    int dead;             /* out of the table, unlinked; destroyed at refs == 0 */
    uint64_t end;         /* next free offset (reservations; this run's segments) */
    uint64_t live_bytes;  /* reserved + live record bytes (when live_known) */
    unsigned refs;        /* writers, readers and freers using fd */
    pthread_mutex_t free_mu; /* serializes header marking on free */
    struct gsync sync;    /* fdatasync group commit on fd */
    struct seg *next;     /* hash chain */
};

/* A pinned blob (see "Pins and the reaper"). */
struct pin {
    struct eng_blob_ref ref; /* as pinned (segment, offset identify the blob) */
    uint32_t pins;           /* readers holding it, > 0 */
    uint32_t retired;        /* retired while pinned: queued at the last unpin */
    struct pin *next;        /* hash chain */
};

struct eng_blobstore {
    char *dir;                 /* blobs directory */
    int dirfd;                 /* for *at() calls and directory fsyncs */
    int lockfd;                /* LOCK, flock'ed */
    uint64_t segment_bytes;    /* roll past this */
    uint64_t own_file_bytes;   /* own file at or above this */
    uint64_t epoch;            /* this run's epoch (STATE) */
    pthread_mutex_t mu;        /* table, active, next_no, segno_limit, segment accounting */
    struct seg **tab;          /* hash table of segments by number */
    size_t tab_cap;            /* buckets (power of two) */
    size_t nsegs;              /* segments in the table */
    struct seg *active;        /* shared segment taking reservations, or NULL */
    uint64_t next_no;          /* next segment number */
    uint64_t segno_limit;      /* STATE's high-water mark: numbers below it may be used */
    struct gsync dirsync;      /* directory fsyncs (new files) */
    atomic_uint_fast64_t bytes_written; /* data bytes, since open */
    atomic_uint_fast64_t bytes_freed;   /* data bytes, since open */
    atomic_uint_fast64_t fsyncs;        /* fsync + fdatasync calls, since open */
    atomic_uint_fast64_t corrupt;       /* reads that failed verification, since open */
    atomic_int writers;        /* writers not yet finished or aborted */

    pthread_mutex_t space_mu;  /* the free-space estimate below (space_admit) */
    uint64_t min_free_bytes;   /* floor blob bytes never cut into */
    uint64_t space_free;       /* f_bavail * f_frsize at space_at_ms */
    uint64_t space_spent;      /* bytes admitted since */
    uint64_t space_at_ms;      /* when space_free was read (CLOCK_MONOTONIC) */
    int space_valid;           /* space_free holds a reading */

    pthread_mutex_t pin_mu;    /* pins, the retire queue, reaper state */
    pthread_cond_t reap_cv;    /* wakes the reaper */
    struct pin **pin_tab;      /* PIN_BUCKETS chains */
    size_t npins;              /* distinct pinned blobs (<= ENG_BLOB_PINS_MAX) */
    size_t pinned_retired;     /* of them, retired */
    struct eng_blob_ref *q;    /* retire queue: ring of unpinned retired refs */
    size_t q_head, q_len, q_cap; /* ring state (q_cap a power of two, or 0) */
    uint64_t retired;          /* eng_blob_retire calls, since open */
    uint64_t reaped;           /* frees the reaper ran, since open */
    uint64_t retire_over;      /* retires accepted at or past ENG_BLOB_RETIRE_BACKLOG_MAX */
    size_t reap_inflight;      /* refs the reaper took off the ring and is freeing */
    int reap_stop;             /* close: drain and exit */
    int reap_started;          /* the thread exists */
    pthread_t reaper;          /* the reaper thread */
};

enum wmode {
    W_BUFFER, /* size unknown: bytes in buf, no file yet */
    W_SHARED, /* region [region_off, +region_len) reserved in seg */
    W_OWN,    /* own file own_no, open as own_fd (still *.tmp) */
    W_DONE,   /* released (poisoned or finished): only free remains */
};

struct eng_blob_writer {
    struct eng_blobstore *bs; /* store */
    enum wmode mode;          /* where the bytes go */
    int rv;                   /* sticky error: poisoned when != 0 */
    uint64_t hint;            /* expected data bytes (W_SHARED: reserved) */
    uint64_t admitted;        /* data bytes space_admit has let in for this writer */
    uint64_t len;             /* data bytes appended */
    uint64_t flushed;         /* data bytes written to the file */
    uint32_t crc;             /* running crc32c (ISA-L raw state) */
    uint32_t chunk_crc;       /* running crc32c of the current chunk (raw state) */
    uint32_t chunk_fill;      /* bytes in the current chunk */
    uint32_t *ctab;           /* crc32c of each complete chunk */
    size_t ctab_len;          /* entries */
    size_t ctab_alloc;        /* allocated entries */
    char *buf;                /* staging buffer */
    size_t buf_len;           /* bytes in buf */
    size_t buf_alloc;         /* allocated */
    size_t cap;               /* flush (or spill) when buf_len reaches this */
    struct seg *seg;          /* W_SHARED: segment (a ref held) */
    uint64_t region_off;      /* W_SHARED: offset of the record header */
    uint64_t region_len;      /* W_SHARED: reserved bytes incl. header */
    uint64_t region_live;     /* W_SHARED: of them, still counted in the segment's live bytes */
    int hdr_written;          /* the live header is on disk (release must undo it) */
    int own_fd;               /* W_OWN: fd, -1 otherwise */
    uint64_t own_no;          /* W_OWN: number */
    int own_named;            /* W_OWN: renamed to its final name */
};

/* ------------------------------------------------------------ helpers */

static uint32_t crc_update(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        crc = crc32_iscsi((unsigned char *)c, chunk, crc);
        c += chunk;
        n -= (size_t)chunk;
    }
    return crc;
}

static uint32_t crc32c(const void *p, size_t n)
{
    return ~crc_update(0xFFFFFFFFu, p, n);
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t chunks_of(uint64_t len)
{
    return (len + BLOB_CHUNK_BYTES - 1) >> BLOB_CHUNK_SHIFT;
}

/* Header + data + chunk table: a record's bytes (its region may be larger). */
static uint64_t rec_bytes(uint64_t len)
{
    return BLOB_HDR_BYTES + len + 4 * chunks_of(len);
}

static void hdr_encode(unsigned char *h, uint32_t magic, uint64_t segno, uint64_t epoch,
                       uint64_t len, uint32_t data_crc, uint64_t region)
{
    memset(h, 0, BLOB_HDR_BYTES);
    put_le32(h, magic);
    put_le64(h + 8, len);
    put_le32(h + 16, data_crc);
    put_le32(h + 20, BLOB_CHUNK_SHIFT);
    put_le64(h + 24, segno);
    put_le64(h + 32, epoch);
    put_le64(h + 40, region);
    put_le32(h + 4, crc32c(h + 8, BLOB_HDR_BYTES - 8));
    assert(get_le64(h + 8) == len && get_le64(h + 40) == region);
}

/* 1 if h is an intact header (any magic) of segment segno. */
static int hdr_valid(const unsigned char *h, uint64_t segno)
{
    uint32_t m = get_le32(h);
    return (m == BLOB_MAGIC_LIVE || m == BLOB_MAGIC_FREED || m == BLOB_MAGIC_RSVD)
           && get_le32(h + 4) == crc32c(h + 8, BLOB_HDR_BYTES - 8)
           && get_le32(h + 20) == BLOB_CHUNK_SHIFT && get_le64(h + 24) == segno
           && get_le64(h + 40) >= BLOB_HDR_BYTES
           && (m == BLOB_MAGIC_RSVD || get_le64(h + 40) >= rec_bytes(get_le64(h + 8)));
}

/* 1 if h is a live header for exactly this ref. */
static int hdr_matches(const unsigned char *h, const struct eng_blob_ref *ref)
{
    return get_le32(h) == BLOB_MAGIC_LIVE && hdr_valid(h, ref->segment)
           && get_le64(h + 8) == ref->length && get_le32(h + 16) == ref->crc32c
           && (uint32_t)get_le64(h + 32) == ref->flags;
}

static void seghdr_encode(unsigned char *h, uint64_t no, int own, uint64_t epoch)
{
    memset(h, 0, BLOB_SEGHDR_BYTES);
    put_le32(h, BLOB_SEG_MAGIC);
    put_le32(h + 8, BLOB_FORMAT_VERSION);
    put_le32(h + 12, own ? 1 : 0);
    put_le64(h + 16, no);
    put_le64(h + 24, epoch);
    put_le32(h + 32, BLOB_CHUNK_BYTES);
    put_le32(h + 4, crc32c(h + 8, BLOB_SEGHDR_BYTES - 8));
}

/* 1 if h is the segment header of segment no of this kind. */
static int seghdr_valid(const unsigned char *h, uint64_t no, int own)
{
    return get_le32(h) == BLOB_SEG_MAGIC && get_le32(h + 4) == crc32c(h + 8, BLOB_SEGHDR_BYTES - 8)
           && get_le32(h + 8) == BLOB_FORMAT_VERSION && get_le32(h + 12) == (own ? 1u : 0u)
           && get_le64(h + 16) == no && get_le32(h + 32) == BLOB_CHUNK_BYTES;
}

static void seg_name(char *out, uint64_t no, int own, int tmp)
{
    snprintf(out, BLOB_NAME_MAX, "%016" PRIx64 "%s%s", no, own ? ".blob" : ".seg",
             tmp ? ".tmp" : "");
}

/* ------------------------------------------------------------ syscalls */

/* Each returns 0 or an errno value (-1 for an unexpected end of file); the fault points of
 * engine/fault.h sit here. */

/* Advance (iov, cnt) past n transferred bytes; with n == 0 it skips empty entries. */
static void iov_advance(struct iovec **iov, int *cnt, size_t n)
{
    while (*cnt > 0 && n >= (*iov)->iov_len) {
        n -= (*iov)->iov_len;
        (*iov)++;
        (*cnt)--;
    }
    if (*cnt > 0 && n > 0) {
        (*iov)->iov_base = (char *)(*iov)->iov_base + n;
        (*iov)->iov_len -= n;
    }
}

/* All of iov at off, through short transfers and EINTR. */
static int io_rw_full(int fd, struct iovec *iov, int cnt, uint64_t off, int write)
{
    iov_advance(&iov, &cnt, 0);
    while (cnt > 0) {
        int e = write ? eng__fault_tick(ENG_FAULT_WRITE) : 0;
        if (e != 0)
            return e;
        ssize_t n = write ? pwritev(fd, iov, cnt, (off_t)off) : preadv(fd, iov, cnt, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return -1; /* reading past the end of the file */
        off += (uint64_t)n;
        iov_advance(&iov, &cnt, (size_t)n);
    }
    return 0;
}

static int io_pwritev_full(int fd, struct iovec *iov, int cnt, uint64_t off)
{
    return io_rw_full(fd, iov, cnt, off, 1);
}

static int io_preadv_full(int fd, struct iovec *iov, int cnt, uint64_t off)
{
    return io_rw_full(fd, iov, cnt, off, 0);
}

static int io_pwrite_full(int fd, const void *p, size_t n, uint64_t off)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
    return io_pwritev_full(fd, &iov, 1, off);
}

static int io_pread_full(int fd, void *p, size_t n, uint64_t off)
{
    struct iovec iov = {.iov_base = p, .iov_len = n};
    return io_preadv_full(fd, &iov, 1, off);
}

static int io_sync(struct eng_blobstore *bs, int fd, int full)
{
    int e = eng__fault_tick(ENG_FAULT_SYNC);
    atomic_fetch_add(&bs->fsyncs, 1);
    if (e != 0)
        return e;
    if ((full ? fsync(fd) : fdatasync(fd)) != 0)
        return errno;
    return 0;
}

static int io_create(struct eng_blobstore *bs, const char *name)
{
    int e = eng__fault_tick(ENG_FAULT_CREATE);
    if (e != 0) {
        errno = e;
        return -1;
    }
    return openat(bs->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
}

/* Deallocate the whole blocks inside [off, off+len); the bytes around them stay (unreferenced
 * garbage), so a hole never reaches into a neighbouring record. */
static void io_punch(int fd, uint64_t off, uint64_t len, uint64_t segno)
{
    uint64_t a = (off + BLOB_PUNCH_ALIGN - 1) / BLOB_PUNCH_ALIGN * BLOB_PUNCH_ALIGN;
    uint64_t b = (off + len) / BLOB_PUNCH_ALIGN * BLOB_PUNCH_ALIGN;
    if (b <= a)
        return;
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a, (off_t)(b - a)) != 0)
        mg_log(MG_LOG_WARN, "op=punch seg=%" PRIx64 " off=%" PRIu64 " len=%" PRIu64 " errno=%d",
               segno, a, b - a, errno);
}

static int err_at(int e, const char *op, uint64_t segno)
{
    int rv = e < 0 ? MG_ECORRUPT : mg_err_from_errno(e);
    mg_log(MG_LOG_ERROR, "op=%s seg=%" PRIx64 " err=%s errno=%d", op, segno, mg_err_name(rv),
           e < 0 ? 0 : e);
    return rv;
}

static void gsync_init(struct gsync *g, int sticky)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->started = g->done = 0;
    g->running = 0;
    g->sticky = sticky;
    g->err = 0;
    g->err_gen = 0;
}

static void gsync_close(struct gsync *g)
{
    assert(!g->running);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* Wait for a sync of fd that started after this call (see struct gsync). Returns 0 or the
 * error of a sync that may have covered this caller's bytes. full: fsync (directories) rather
 * than fdatasync. A directory's gsync is not sticky: its waiters fail, and their files are
 * removed, but later creates may retry (a journal failure makes ext4 read-only anyway). */
static int gsync_wait(struct eng_blobstore *bs, struct gsync *g, int fd, int full, uint64_t no)
{
    pthread_mutex_lock(&g->mu);
    uint64_t want = g->started + 1;
    while (g->done < want && !(g->sticky && g->err != 0)) {
        if (g->running) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        uint64_t gen = ++g->started;
        g->running = 1;
        pthread_mutex_unlock(&g->mu);
        int e = io_sync(bs, fd, full);
        pthread_mutex_lock(&g->mu);
        g->running = 0;
        g->done = gen;
        if (e != 0) {
            g->err = err_at(e, full ? "fsync" : "fdatasync", no);
            g->err_gen = gen;
        }
        pthread_cond_broadcast(&g->cv);
    }
    int rv = (g->sticky || g->err_gen >= want) ? g->err : 0;
    pthread_mutex_unlock(&g->mu);
    return rv;
}

/* ------------------------------------------------------------ STATE: epoch, high-water mark */

/* STATE, 28 bytes: "MGST" u32, version u32 (2), epoch u64, segment-number high-water mark
 * u64 (every number in use is below it), crc32c of bytes 0..23 u32. Replaced atomically
 * (write STATE.tmp, fdatasync, rename, directory fsync). */
#define STATE_NAME "STATE"
#define STATE_TMP "STATE.tmp"
#define STATE_MAGIC 0x5453474du /* "MGST" */
#define STATE_BYTES 28

static int state_write(struct eng_blobstore *bs, uint64_t epoch, uint64_t limit)
{
    unsigned char b[STATE_BYTES];
    put_le32(b, STATE_MAGIC);
    put_le32(b + 4, BLOB_FORMAT_VERSION);
    put_le64(b + 8, epoch);
    put_le64(b + 16, limit);
    put_le32(b + 24, crc32c(b, 24));
    int fd = openat(bs->dirfd, STATE_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = fd < 0 ? errno : io_pwrite_full(fd, b, sizeof b, 0);
    if (e == 0)
        e = io_sync(bs, fd, 0);
    if (fd >= 0)
        close(fd);
    if (e == 0 && renameat(bs->dirfd, STATE_TMP, bs->dirfd, STATE_NAME) != 0)
        e = errno;
    if (e == 0)
        e = io_sync(bs, bs->dirfd, 1);
    if (e != 0) {
        unlinkat(bs->dirfd, STATE_TMP, 0);
        return err_at(e, "state_write", limit);
    }
    return 0;
}

/* 0 and the fields if STATE is valid, MG_ENOTFOUND if absent, MG_ECORRUPT if invalid. */
static int state_read(struct eng_blobstore *bs, uint64_t *epoch, uint64_t *limit)
{
    unsigned char b[STATE_BYTES + 1];
    int fd = openat(bs->dirfd, STATE_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? MG_ENOTFOUND : mg_err_from_errno(errno);
    ssize_t n = pread(fd, b, sizeof b, 0);
    close(fd);
    if (n != STATE_BYTES || get_le32(b) != STATE_MAGIC || get_le32(b + 24) != crc32c(b, 24))
        return MG_ECORRUPT;
    if (get_le32(b + 4) != BLOB_FORMAT_VERSION)
        return MG_ECORRUPT;
    *epoch = get_le64(b + 8);
    *limit = get_le64(b + 16);
    return 0;
}

/* The next segment number (mu held): past the high-water mark, move the mark first. */
static int segno_next_locked(struct eng_blobstore *bs, uint64_t *no)
{
    if (bs->next_no >= bs->segno_limit) {
        int rv = state_write(bs, bs->epoch, bs->next_no + BLOB_SEGNO_BLOCK);
        if (rv != 0)
            return rv;
        bs->segno_limit = bs->next_no + BLOB_SEGNO_BLOCK;
    }
    *no = bs->next_no++;
    return 0;
}

/* ------------------------------------------------------------ segment table */

static struct seg *seg_alloc(uint64_t no, int own, int fd)
{
    struct seg *s = mg_calloc(1, sizeof *s);
    s->no = no;
    s->own = own;
    s->fd = fd;
    pthread_mutex_init(&s->free_mu, NULL);
    gsync_init(&s->sync, 1);
    return s;
}

static void seg_destroy(struct seg *s)
{
    assert(s->refs == 0);
    if (s->fd >= 0)
        close(s->fd);
    gsync_close(&s->sync);
    pthread_mutex_destroy(&s->free_mu);
    mg_free(s);
}

static struct seg *table_find(struct eng_blobstore *bs, uint64_t no)
{
    struct seg *s = bs->tab[no & (bs->tab_cap - 1)];
    while (s != NULL && s->no != no)
        s = s->next;
    return s;
}

static void table_insert(struct eng_blobstore *bs, struct seg *s)
{
    assert(table_find(bs, s->no) == NULL);
    if (bs->nsegs >= bs->tab_cap) {
        size_t cap = bs->tab_cap * 2;
        struct seg **tab = mg_calloc(cap, sizeof *tab);
        for (size_t i = 0; i < bs->tab_cap; i++) {
            while (bs->tab[i] != NULL) {
                struct seg *x = bs->tab[i];
                bs->tab[i] = x->next;
                x->next = tab[x->no & (cap - 1)];
                tab[x->no & (cap - 1)] = x;
            }
        }
        mg_free(bs->tab);
        bs->tab = tab;
        bs->tab_cap = cap;
    }
    struct seg **head = &bs->tab[s->no & (bs->tab_cap - 1)];
    s->next = *head;
    *head = s;
    bs->nsegs++;
}

static void table_remove(struct eng_blobstore *bs, struct seg *s)
{
    struct seg **p = &bs->tab[s->no & (bs->tab_cap - 1)];
    while (*p != s) {
        assert(*p != NULL);
        p = &(*p)->next;
    }
    *p = s->next;
    bs->nsegs--;
}

/* Take s out of the table (mu held). The caller unlinks the file, and s is destroyed by
 * whoever drops the last ref (seg_unref), or by the caller if it holds none. */
static void seg_kill_locked(struct eng_blobstore *bs, struct seg *s)
{
    assert(!s->dead);
    table_remove(bs, s);
    s->dead = 1;
    if (bs->active == s)
        bs->active = NULL;
}

static void seg_unlink(struct eng_blobstore *bs, struct seg *s)
{
    char name[BLOB_NAME_MAX];
    seg_name(name, s->no, s->own, 0);
    if (unlinkat(bs->dirfd, name, 0) != 0 && errno != ENOENT)
        mg_log(MG_LOG_WARN, "op=unlink seg=%" PRIx64 " errno=%d", s->no, errno);
    else
        mg_log(MG_LOG_DEBUG, "event=segment_unlinked seg=%" PRIx64, s->no);
}

static void seg_unref(struct eng_blobstore *bs, struct seg *s)
{
    pthread_mutex_lock(&bs->mu);
    assert(s->refs > 0);
    int destroy = --s->refs == 0 && s->dead;
    pthread_mutex_unlock(&bs->mu);
    if (destroy)
        seg_destroy(s);
}

/* Drop nbytes of s's live bytes and a ref; unlink s if it is sealed and now empty. */
static void seg_release(struct eng_blobstore *bs, struct seg *s, uint64_t nbytes)
{
    int kill = 0;
    pthread_mutex_lock(&bs->mu);
    if (s->live_known) {
        assert(s->live_bytes >= nbytes);
        s->live_bytes -= nbytes;
        if (s->live_bytes == 0 && (s->sealed || s->own) && !s->dead) {
            seg_kill_locked(bs, s);
            kill = 1;
        }
    }
    pthread_mutex_unlock(&bs->mu);
    if (kill)
        seg_unlink(bs, s);
    seg_unref(bs, s);
}

/* Open a previous run's segment file (mu held) and check its segment header. */
static int seg_open_locked(struct eng_blobstore *bs, struct seg *s)
{
    char name[BLOB_NAME_MAX];
    unsigned char h[BLOB_SEGHDR_BYTES];
    seg_name(name, s->no, s->own, 0);
    int fd = openat(bs->dirfd, name, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return err_at(errno == ENOENT ? -1 : errno, "open", s->no);
    int e = io_pread_full(fd, h, sizeof h, 0);
    if (e != 0 || !seghdr_valid(h, s->no, s->own)) {
        close(fd);
        mg_log(MG_LOG_ERROR, "op=open seg=%" PRIx64 " err=MG_ECORRUPT bad segment header",
               s->no);
        return e > 0 ? mg_err_from_errno(e) : MG_ECORRUPT;
    }
    s->epoch = get_le64(h + 24);
    s->fd = fd;
    return 0;
}

/* Look up segment no, open its fd if needed and take a ref. NULL if it is gone (*rv =
 * MG_ENOTFOUND, not logged: a second free is legal) or cannot be opened (*rv logged). */
static struct seg *seg_get(struct eng_blobstore *bs, uint64_t no, int *rv)
{
    pthread_mutex_lock(&bs->mu);
    struct seg *s = table_find(bs, no);
    if (s == NULL) {
        pthread_mutex_unlock(&bs->mu);
        *rv = MG_ENOTFOUND;
        return NULL;
    }
    if (s->fd < 0 && (*rv = seg_open_locked(bs, s)) != 0) {
        pthread_mutex_unlock(&bs->mu);
        return NULL;
    }
    s->refs++;
    pthread_mutex_unlock(&bs->mu);
    return s;
}

/* Create file name with its segment header for number no; returns fd or -1 (*rv set). */
static int seg_create_file(struct eng_blobstore *bs, const char *name, uint64_t no, int own,
                           int *rv)
{
    unsigned char h[BLOB_SEGHDR_BYTES];
    int fd = io_create(bs, name);
    if (fd < 0) {
        *rv = err_at(errno, "create", no);
        return -1;
    }
    seghdr_encode(h, no, own, bs->epoch);
    int e = io_pwrite_full(fd, h, sizeof h, 0);
    if (e != 0) {
        *rv = err_at(e, "write", no);
        close(fd);
        unlinkat(bs->dirfd, name, 0);
        return -1;
    }
    return fd;
}

/* Create a new active shared segment (mu held). The directory is fsynced before the segment is
 * used, so a blob acknowledged in it survives a crash. This stalls other reservations for one
 * create + directory fsync every segment_bytes (64 MiB): negligible. */
static int roll_locked(struct eng_blobstore *bs)
{
    char name[BLOB_NAME_MAX];
    uint64_t no;
    int rv = segno_next_locked(bs, &no);
    if (rv != 0)
        return rv;
    seg_name(name, no, 0, 0);
    int fd = seg_create_file(bs, name, no, 0, &rv);
    if (fd < 0)
        return rv;
    rv = gsync_wait(bs, &bs->dirsync, bs->dirfd, 1, no);
    if (rv != 0) {
        unlinkat(bs->dirfd, name, 0);
        close(fd);
        return rv;
    }
    struct seg *old = bs->active;
    if (old != NULL) {
        old->sealed = 1;
        if (old->live_bytes == 0) {
            /* Empty: unlink it now (a few us under mu, once per segment). */
            seg_kill_locked(bs, old);
            seg_unlink(bs, old);
            if (old->refs == 0)
                seg_destroy(old);
        }
    }
    struct seg *s = seg_alloc(no, 0, fd);
    s->epoch = bs->epoch;
    s->live_known = 1;
    s->end = BLOB_SEGHDR_BYTES;
    table_insert(bs, s);
    bs->active = s;
    mg_log(MG_LOG_DEBUG, "event=segment_created seg=%" PRIx64, no);
    return 0;
}

/* Reserve size bytes in the active segment: one locked offset bump, and the region's reserved
 * header (one pwrite to the page cache, ~1 us, under mu so headers land in offset order: see
 * the file comment). Takes a ref on *out. */
static int reserve(struct eng_blobstore *bs, uint64_t size, struct seg **out, uint64_t *off)
{
    unsigned char h[BLOB_HDR_BYTES];
    assert(size >= BLOB_HDR_BYTES);
    pthread_mutex_lock(&bs->mu);
    struct seg *s = bs->active;
    if (s == NULL || s->sealed
        || (s->end > BLOB_SEGHDR_BYTES && s->end + size > bs->segment_bytes)) {
        int rv = roll_locked(bs);
        if (rv != 0) {
            pthread_mutex_unlock(&bs->mu);
            return rv;
        }
        s = bs->active;
    }
    hdr_encode(h, BLOB_MAGIC_RSVD, s->no, s->epoch, 0, 0, size);
    int e = io_pwrite_full(s->fd, h, sizeof h, s->end);
    if (e != 0) {
        pthread_mutex_unlock(&bs->mu);
        return err_at(e, "write", s->no);
    }
    *off = s->end;
    s->end += size;
    s->live_bytes += size;
    s->refs++;
    pthread_mutex_unlock(&bs->mu);
    *out = s;
    return 0;
}

static void seg_seal(struct eng_blobstore *bs, struct seg *s)
{
    pthread_mutex_lock(&bs->mu);
    s->sealed = 1;
    pthread_mutex_unlock(&bs->mu);
}

/* ------------------------------------------------------------ free-space floor */

#define SPACE_REFRESH_MS 100 /* statvfs at most this often, or per min_free_bytes / 4 admitted */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Blob bytes stop min_free_bytes short of a full file system; what is left is the metadata's:
 * the PUT whose blob got in still commits (the Raft host refuses proposals below its own,
 * smaller floor) and a delete can always be logged (raft/host.c). Without this floor blobs filled
 * the disk to the last block and a DELETE on a full disk got 507. Budget: one statvfs per
 * SPACE_REFRESH_MS or per min_free_bytes / 4 admitted bytes; between readings a call costs a
 * mutex and a subtraction (admitted bytes are counted against the reading, so concurrent writers
 * cannot overrun the floor by more than a quarter of it). A failed statvfs admits (logged): the
 * write itself then reports a real ENOSPC.
 */
static int space_admit(struct eng_blobstore *bs, uint64_t len)
{
    int rv = 0;
    pthread_mutex_lock(&bs->space_mu);
    uint64_t now = mono_ms();
    if (!bs->space_valid || now - bs->space_at_ms >= SPACE_REFRESH_MS
        || bs->space_spent >= bs->min_free_bytes / 4) {
        struct statvfs sv;
        bs->space_at_ms = now;
        bs->space_spent = 0;
        bs->space_valid = fstatvfs(bs->dirfd, &sv) == 0;
        if (bs->space_valid)
            bs->space_free = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
        else
            mg_log(MG_LOG_WARN, "event=statvfs_failed dir=%s errno=%d", bs->dir, errno);
    }
    if (bs->space_valid) {
        uint64_t est = bs->space_free > bs->space_spent ? bs->space_free - bs->space_spent : 0;
        if (est < bs->min_free_bytes + len)
            rv = MG_ENOSPC;
    }
    if (rv == 0)
        bs->space_spent += len;
    pthread_mutex_unlock(&bs->space_mu);
    return rv;
}

/* ------------------------------------------------------------ writers */

/* Memory bound: a writer holds at most max(BLOB_SPILL_BYTES, BLOB_STAGE_BYTES) = 1 MiB of
 * staging (usually the blob's own size when small) plus its chunk table (4 bytes per 64 KiB:
 * 320 KiB for a 5 GiB blob), so 256 concurrent PUTs cost <= 256 MiB in the worst case and ~1
 * KiB each for 1 KiB objects; a 5 GiB PUT streams through 256 KiB (or is written straight from
 * the caller's buffer when it appends in large pieces). */

static int own_create(struct eng_blobstore *bs, int *fd, uint64_t *no)
{
    char name[BLOB_NAME_MAX];
    pthread_mutex_lock(&bs->mu);
    int rv = segno_next_locked(bs, no);
    pthread_mutex_unlock(&bs->mu);
    if (rv != 0)
        return rv;
    seg_name(name, *no, 1, 1);
    *fd = seg_create_file(bs, name, *no, 1, &rv);
    return *fd < 0 ? rv : 0;
}

static void own_remove(struct eng_blobstore *bs, int fd, uint64_t no, int named)
{
    char name[BLOB_NAME_MAX];
    close(fd);
    seg_name(name, no, 1, !named);
    if (unlinkat(bs->dirfd, name, 0) != 0)
        mg_log(MG_LOG_WARN, "op=unlink seg=%" PRIx64 " errno=%d", no, errno);
}

static uint64_t writer_segno(const struct eng_blob_writer *w)
{
    return w->mode == W_SHARED ? w->seg->no : w->own_no;
}

/* File offset of the blob's first data byte. */
static uint64_t writer_data_off(const struct eng_blob_writer *w)
{
    return w->mode == W_SHARED ? w->region_off + BLOB_HDR_BYTES
                               : BLOB_SEGHDR_BYTES + BLOB_HDR_BYTES;
}

/* Undo everything w put on disk and release its space; w becomes W_DONE. A shared region
 * keeps a reserved header (so walks still skip it); its data is punched out. */
static void writer_release(struct eng_blob_writer *w)
{
    struct eng_blobstore *bs = w->bs;
    if (w->mode == W_SHARED) {
        struct seg *s = w->seg;
        if (w->hdr_written) {
            unsigned char h[BLOB_HDR_BYTES];
            hdr_encode(h, BLOB_MAGIC_RSVD, s->no, s->epoch, 0, 0, w->region_len);
            if (pwrite(s->fd, h, sizeof h, (off_t)w->region_off) != (ssize_t)sizeof h)
                mg_log(MG_LOG_WARN, "op=clear_header seg=%" PRIx64 " errno=%d", s->no, errno);
        }
        io_punch(s->fd, w->region_off + BLOB_HDR_BYTES, w->region_len - BLOB_HDR_BYTES, s->no);
        seg_release(bs, s, w->region_live);
        w->seg = NULL;
    } else if (w->mode == W_OWN) {
        own_remove(bs, w->own_fd, w->own_no, w->own_named);
        w->own_fd = -1;
    }
    w->mode = W_DONE;
}

/* Fail w for good: only finish (which returns rv) or abort remain. */
static int poison(struct eng_blob_writer *w, int rv)
{
    assert(rv != 0);
    w->rv = rv;
    writer_release(w);
    return rv;
}

/* W_SHARED -> W_OWN when the blob outgrows its hint: move the bytes written so far into an
 * own file (in-kernel copy), then give the reserved region back. */
static int shared_to_own(struct eng_blob_writer *w)
{
    struct eng_blobstore *bs = w->bs;
    int fd, e = 0;
    uint64_t no;
    int rv = own_create(bs, &fd, &no);
    if (rv != 0)
        return rv;
    loff_t src = (loff_t)(w->region_off + BLOB_HDR_BYTES);
    loff_t dst = BLOB_SEGHDR_BYTES + BLOB_HDR_BYTES;
    uint64_t left = w->flushed;
    while (left > 0 && e == 0) {
        e = eng__fault_tick(ENG_FAULT_WRITE);
        if (e != 0)
            break;
        ssize_t n = copy_file_range(w->seg->fd, &src, fd, &dst, left, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            e = n < 0 ? errno : -1;
        else
            left -= (uint64_t)n;
    }
    if (e != 0) {
        own_remove(bs, fd, no, 0);
        return err_at(e, "copy", no);
    }
    io_punch(w->seg->fd, w->region_off + BLOB_HDR_BYTES, w->region_len - BLOB_HDR_BYTES,
             w->seg->no);
    seg_release(bs, w->seg, w->region_live);
    w->seg = NULL;
    w->mode = W_OWN;
    w->own_fd = fd;
    w->own_no = no;
    w->cap = BLOB_STAGE_BYTES;
    return 0;
}

/* Write n bytes at w's file cursor. */
static int sink(struct eng_blob_writer *w, const void *p, size_t n)
{
    int e;
    if (w->mode == W_SHARED && w->flushed + n > w->hint) {
        int rv = shared_to_own(w);
        if (rv != 0)
            return rv;
    }
    assert(w->mode == W_SHARED || w->mode == W_OWN);
    int fd = w->mode == W_SHARED ? w->seg->fd : w->own_fd;
    e = io_pwrite_full(fd, p, n, writer_data_off(w) + w->flushed);
    if (e != 0)
        return err_at(e, "write", writer_segno(w));
    w->flushed += n;
    return 0;
}

/* W_BUFFER -> W_OWN once the unknown-size blob outgrows the in-memory limit. */
static int buffer_to_own(struct eng_blob_writer *w)
{
    int rv = own_create(w->bs, &w->own_fd, &w->own_no);
    if (rv != 0)
        return rv;
    w->mode = W_OWN;
    if (w->buf_len > 0) {
        rv = sink(w, w->buf, w->buf_len);
        w->buf_len = 0;
    }
    w->cap = BLOB_STAGE_BYTES;
    if (w->buf_alloc > w->cap) {
        w->buf = mg_realloc(w->buf, w->cap);
        w->buf_alloc = w->cap;
    }
    return rv;
}

static void buf_ensure(struct eng_blob_writer *w, size_t need)
{
    assert(need <= w->cap);
    if (w->buf_alloc >= need)
        return;
    size_t n = w->buf_alloc ? w->buf_alloc : 4096;
    while (n < need)
        n *= 2;
    if (n > w->cap)
        n = w->cap;
    w->buf = mg_realloc(w->buf, n);
    w->buf_alloc = n;
}

static void ctab_push(struct eng_blob_writer *w, uint32_t crc)
{
    if (w->ctab_len == w->ctab_alloc) {
        w->ctab_alloc = w->ctab_alloc ? w->ctab_alloc * 2 : 16;
        w->ctab = mg_realloc(w->ctab, w->ctab_alloc * sizeof *w->ctab);
    }
    w->ctab[w->ctab_len++] = crc;
}

/* Feed appended bytes to the per-chunk crc32c table. */
static void chunks_feed(struct eng_blob_writer *w, const char *p, size_t len)
{
    while (len > 0) {
        size_t n = BLOB_CHUNK_BYTES - w->chunk_fill;
        if (n > len)
            n = len;
        w->chunk_crc = crc_update(w->chunk_crc, p, n);
        w->chunk_fill += (uint32_t)n;
        p += n;
        len -= n;
        if (w->chunk_fill == BLOB_CHUNK_BYTES) {
            ctab_push(w, ~w->chunk_crc);
            w->chunk_crc = 0xFFFFFFFFu;
            w->chunk_fill = 0;
        }
    }
}

/* The finished chunk table, little-endian (caller frees). */
static unsigned char *ctab_encode(struct eng_blob_writer *w, size_t *n)
{
    if (w->chunk_fill > 0) {
        ctab_push(w, ~w->chunk_crc);
        w->chunk_fill = 0;
    }
    assert(w->ctab_len == chunks_of(w->len));
    *n = 4 * w->ctab_len;
    unsigned char *t = mg_malloc(*n ? *n : 1);
    for (size_t i = 0; i < w->ctab_len; i++)
        put_le32(t + 4 * i, w->ctab[i]);
    return t;
}

int eng_blob_writer_create(struct eng_blobstore *bs, uint64_t size_hint,
                           struct eng_blob_writer **out)
{
    struct eng_blob_writer *w = mg_calloc(1, sizeof *w);
    int rv = 0;
    assert(bs != NULL && out != NULL);
    w->bs = bs;
    w->own_fd = -1;
    w->crc = 0xFFFFFFFFu;
    w->chunk_crc = 0xFFFFFFFFu;
    w->hint = size_hint;
    if (size_hint > 0 && (rv = space_admit(bs, rec_bytes(size_hint))) != 0) {
        mg_free(w);
        return rv;
    }
    w->admitted = size_hint;
    if (size_hint >= bs->own_file_bytes) {
        w->mode = W_OWN;
        w->cap = BLOB_STAGE_BYTES;
        rv = own_create(bs, &w->own_fd, &w->own_no);
    } else if (size_hint > 0) {
        w->mode = W_SHARED;
        w->cap = size_hint < BLOB_STAGE_BYTES ? (size_t)size_hint : BLOB_STAGE_BYTES;
        w->region_len = w->region_live = rec_bytes(size_hint);
        rv = reserve(bs, w->region_len, &w->seg, &w->region_off);
    } else {
        w->mode = W_BUFFER;
        uint64_t lim = bs->own_file_bytes > 1 ? bs->own_file_bytes - 1 : 1;
        w->cap = lim < BLOB_SPILL_BYTES ? (size_t)lim : BLOB_SPILL_BYTES;
    }
    if (rv != 0) {
        mg_free(w);
        return rv;
    }
    atomic_fetch_add(&bs->writers, 1);
    *out = w;
    return 0;
}

int eng_blob_writer_append(struct eng_blob_writer *w, const void *data, size_t len)
{
    const char *p = data;
    if (w->rv != 0)
        return w->rv;
    assert(w->mode != W_DONE);
    if (w->len + len > w->admitted) {
        int rv = space_admit(w->bs, w->len + len - w->admitted);
        if (rv != 0)
            return poison(w, rv);
        w->admitted = w->len + len;
    }
    w->crc = crc_update(w->crc, data, len);
    chunks_feed(w, data, len);
    w->len += len;
    while (len > 0) {
        int rv = 0;
        if (w->mode == W_BUFFER && w->buf_len + len > w->cap) {
            rv = buffer_to_own(w);
        } else if (w->buf_len == w->cap) {
            rv = sink(w, w->buf, w->buf_len);
            w->buf_len = 0;
        } else if (w->buf_len == 0 && len > w->cap) {
            rv = sink(w, p, len); /* large piece: straight from the caller, no copy */
            len = 0;
        } else {
            size_t n = len < w->cap - w->buf_len ? len : w->cap - w->buf_len;
            buf_ensure(w, w->buf_len + n);
            memcpy(w->buf + w->buf_len, p, n);
            w->buf_len += n;
            p += n;
            len -= n;
        }
        if (rv != 0)
            return poison(w, rv);
    }
    return 0;
}

/* Last bytes, chunk table and header into the reserved region, slack punched out, then the
 * group-committed fdatasync of the segment. */
static int finish_shared(struct eng_blob_writer *w, struct eng_blob_ref *ref)
{
    struct eng_blobstore *bs = w->bs;
    struct seg *s = w->seg;
    unsigned char h[BLOB_HDR_BYTES];
    size_t tn;
    int e, rv = 0;
    assert(w->flushed + w->buf_len == w->len && w->len <= w->hint);
    assert(w->region_len == rec_bytes(w->hint));
    unsigned char *t = ctab_encode(w, &tn);
    hdr_encode(h, BLOB_MAGIC_LIVE, s->no, s->epoch, w->len, ~w->crc, w->region_len);
    if (w->flushed == 0) {
        struct iovec iov[3] = {{h, sizeof h}, {w->buf, w->buf_len}, {t, tn}};
        e = io_pwritev_full(s->fd, iov, 3, w->region_off);
        if (e == 0)
            w->flushed = w->buf_len;
    } else {
        rv = sink(w, w->buf, w->buf_len);
        e = rv != 0 ? 0 : io_pwrite_full(s->fd, t, tn, w->region_off + BLOB_HDR_BYTES + w->len);
        if (rv == 0 && e == 0)
            e = io_pwrite_full(s->fd, h, sizeof h, w->region_off);
    }
    mg_free(t);
    w->buf_len = 0;
    if (rv != 0)
        return rv;
    if (e != 0)
        return err_at(e, "write", s->no);
    w->hdr_written = 1;
    uint64_t rec = rec_bytes(w->len);
    if (rec < w->region_len) {
        io_punch(s->fd, w->region_off + rec, w->region_len - rec, s->no);
        pthread_mutex_lock(&bs->mu);
        assert(s->live_bytes > w->region_len - rec);
        s->live_bytes -= w->region_len - rec;
        pthread_mutex_unlock(&bs->mu);
        w->region_live = rec;
    }
#ifdef MG_FAULT_SKIP_BLOB_FSYNC
    /* Fault build only (CMake -DMG_FAULT_SKIP_BLOB_FSYNC=ON): the record is acknowledged
     * without its fdatasync, which tests/integration/test_powercut.py must catch. */
    rv = 0;
#else
    rv = gsync_wait(bs, &s->sync, s->fd, 0, s->no);
#endif
    if (rv != 0) {
        seg_seal(bs, s);
        return rv;
    }
    *ref = (struct eng_blob_ref){.segment = s->no, .offset = w->region_off + BLOB_HDR_BYTES,
                                 .length = w->len, .crc32c = ~w->crc,
                                 .flags = (uint32_t)s->epoch};
    seg_unref(bs, s); /* the record's live bytes keep the segment */
    w->seg = NULL;
    w->mode = W_DONE;
    return 0;
}

/* Last bytes, chunk table and header, fdatasync, rename into place, directory fsync
 * (group-committed with other new files), then publish the file in the table. */
static int finish_own(struct eng_blob_writer *w, struct eng_blob_ref *ref)
{
    struct eng_blobstore *bs = w->bs;
    unsigned char h[BLOB_HDR_BYTES];
    char tmp[BLOB_NAME_MAX], name[BLOB_NAME_MAX];
    size_t tn;
    int e, rv;
    if (w->buf_len > 0) {
        rv = sink(w, w->buf, w->buf_len);
        if (rv != 0)
            return rv;
        w->buf_len = 0;
    }
    assert(w->flushed == w->len);
    unsigned char *t = ctab_encode(w, &tn);
    e = io_pwrite_full(w->own_fd, t, tn, writer_data_off(w) + w->len);
    mg_free(t);
    if (e != 0)
        return err_at(e, "write", w->own_no);
    hdr_encode(h, BLOB_MAGIC_LIVE, w->own_no, bs->epoch, w->len, ~w->crc, rec_bytes(w->len));
    e = io_pwrite_full(w->own_fd, h, sizeof h, BLOB_SEGHDR_BYTES);
    if (e != 0)
        return err_at(e, "write", w->own_no);
    e = io_sync(bs, w->own_fd, 0); /* an own file has no one to share its sync with */
    if (e != 0)
        return err_at(e, "fdatasync", w->own_no);
    seg_name(tmp, w->own_no, 1, 1);
    seg_name(name, w->own_no, 1, 0);
    if (renameat(bs->dirfd, tmp, bs->dirfd, name) != 0)
        return err_at(errno, "rename", w->own_no);
    w->own_named = 1;
    rv = gsync_wait(bs, &bs->dirsync, bs->dirfd, 1, w->own_no);
    if (rv != 0)
        return rv;
    struct seg *s = seg_alloc(w->own_no, 1, w->own_fd);
    s->epoch = bs->epoch;
    s->sealed = 1;
    s->live_known = 1;
    s->live_bytes = rec_bytes(w->len);
    s->end = BLOB_SEGHDR_BYTES + s->live_bytes;
    pthread_mutex_lock(&bs->mu);
    table_insert(bs, s);
    pthread_mutex_unlock(&bs->mu);
    *ref = (struct eng_blob_ref){.segment = w->own_no, .offset = writer_data_off(w),
                                 .length = w->len, .crc32c = ~w->crc,
                                 .flags = (uint32_t)bs->epoch};
    w->own_fd = -1;
    w->mode = W_DONE;
    return 0;
}

static void writer_free(struct eng_blob_writer *w)
{
    assert(w->mode == W_DONE || w->mode == W_BUFFER);
    atomic_fetch_sub(&w->bs->writers, 1);
    mg_free(w->ctab);
    mg_free(w->buf);
    mg_free(w);
}

int eng_blob_writer_finish(struct eng_blob_writer *w, struct eng_blob_ref *ref)
{
    int rv = w->rv;
    assert(ref != NULL);
    if (rv == 0 && w->mode == W_BUFFER) {
        /* Size now known: reserve exactly the record. */
        w->hint = w->len;
        w->region_len = w->region_live = rec_bytes(w->len);
        rv = reserve(w->bs, w->region_len, &w->seg, &w->region_off);
        if (rv == 0)
            w->mode = W_SHARED;
    }
    if (rv == 0 && w->mode == W_SHARED && w->len > w->hint)
        rv = shared_to_own(w);
    if (rv == 0)
        rv = w->mode == W_SHARED ? finish_shared(w, ref) : finish_own(w, ref);
    if (rv == 0)
        atomic_fetch_add(&w->bs->bytes_written, w->len);
    else if (w->rv == 0)
        poison(w, rv);
    if (w->mode == W_BUFFER)
        w->mode = W_DONE;
    writer_free(w);
    return rv;
}

void eng_blob_writer_abort(struct eng_blob_writer *w)
{
    if (w == NULL)
        return;
    writer_release(w);
    writer_free(w);
}

/* ------------------------------------------------------------ read, verify */

static int corrupt(struct eng_blobstore *bs, const struct eng_blob_ref *ref, const char *what,
                   uint64_t chunk)
{
    atomic_fetch_add(&bs->corrupt, 1);
    mg_log(MG_LOG_ERROR,
           "op=read seg=%" PRIx64 " off=%" PRIu64 " len=%" PRIu64 " %s chunk=%" PRIu64
           " err=MG_ECORRUPT",
           ref->segment, ref->offset, ref->length, what, chunk);
    return MG_ECORRUPT;
}

/* The segment of ref with a ref taken, or NULL with *rv (a missing segment is corruption: a
 * live entry names it). */
static struct seg *seg_for_read(struct eng_blobstore *bs, const struct eng_blob_ref *ref, int *rv)
{
    struct seg *s = seg_get(bs, ref->segment, rv);
    if (s == NULL && *rv == MG_ENOTFOUND) {
        mg_log(MG_LOG_ERROR, "op=read seg=%" PRIx64 " err=MG_ECORRUPT missing segment",
               ref->segment);
        *rv = MG_ECORRUPT;
    }
    return s;
}

/* Bytes the chunk check walks: up to three pieces (head slack, the caller's buffer, tail
 * slack) that together are the chunks [c0, c1] back to back. */
struct span {
    struct iovec p[3]; /* pieces, in order */
    int n;             /* pieces used */
};

/* Check every chunk of sp against tab (its crc32c values, little-endian, from chunk c0). */
static int chunks_check(struct eng_blobstore *bs, const struct eng_blob_ref *ref,
                        struct span *sp, const unsigned char *tab, uint64_t c0, uint64_t c1)
{
    int i = 0;
    size_t at = 0; /* offset inside sp->p[i] */
    for (uint64_t c = c0; c <= c1; c++) {
        uint64_t cend = (c + 1) << BLOB_CHUNK_SHIFT;
        size_t need = (size_t)((cend < ref->length ? cend : ref->length) - (c << BLOB_CHUNK_SHIFT));
        uint32_t crc = 0xFFFFFFFFu;
        while (need > 0) {
            assert(i < sp->n);
            size_t n = sp->p[i].iov_len - at;
            if (n > need)
                n = need;
            crc = crc_update(crc, (char *)sp->p[i].iov_base + at, n);
            need -= n;
            at += n;
            if (at == sp->p[i].iov_len) {
                i++;
                at = 0;
            }
        }
        if (~crc != get_le32(tab + 4 * (c - c0)))
            return corrupt(bs, ref, "chunk_crc", c);
    }
    return 0;
}

/* Read [offset, offset+len) of the blob into buf and verify the chunks it touches (and the
 * header when chunk 0 is among them), reading whole chunks at the edges into scratch. One
 * preadv for header, data and table when they are contiguous (a whole-blob read), else two. */
static int read_verified(struct eng_blobstore *bs, const struct eng_blob_ref *ref,
                         uint64_t offset, char *buf, size_t len)
{
    if (len == 0 && ref->length > 0)
        return 0;
    uint64_t c0 = offset >> BLOB_CHUNK_SHIFT;
    uint64_t c1 = len == 0 ? 0 : (offset + len - 1) >> BLOB_CHUNK_SHIFT;
    uint64_t start = c0 << BLOB_CHUNK_SHIFT, cend = (c1 + 1) << BLOB_CHUNK_SHIFT;
    uint64_t end = cend < ref->length ? cend : ref->length;
    size_t pre = (size_t)(offset - start), post = (size_t)(end - offset - len);
    size_t ntab = ref->length == 0 ? 0 : (size_t)(c1 - c0 + 1);
    unsigned char h[BLOB_HDR_BYTES], tab_small[256];
    unsigned char *tab = 4 * ntab <= sizeof tab_small ? tab_small : mg_malloc(4 * ntab);
    char *scratch = pre + post > 0 ? mg_malloc(pre + post) : NULL;
    struct span sp = {.n = 0};
    struct iovec iov[5];
    int cnt = 0, rv = 0, with_hdr = start == 0, tab_contig = start == 0 && end == ref->length;
    if (with_hdr)
        iov[cnt++] = (struct iovec){h, sizeof h};
    if (pre > 0)
        sp.p[sp.n++] = (struct iovec){scratch, pre};
    if (len > 0)
        sp.p[sp.n++] = (struct iovec){buf, len};
    if (post > 0)
        sp.p[sp.n++] = (struct iovec){scratch + pre, post};
    for (int i = 0; i < sp.n; i++)
        iov[cnt++] = sp.p[i];
    if (tab_contig)
        iov[cnt++] = (struct iovec){tab, 4 * ntab};
    struct seg *s = seg_for_read(bs, ref, &rv);
    if (s == NULL)
        goto out;
    uint64_t foff = ref->offset + start - (with_hdr ? BLOB_HDR_BYTES : 0);
    int e = io_preadv_full(s->fd, iov, cnt, foff);
    if (e == 0 && !tab_contig)
        e = io_pread_full(s->fd, tab, 4 * ntab, ref->offset + ref->length + 4 * c0);
    seg_unref(bs, s);
    if (e != 0) {
        rv = e < 0 ? corrupt(bs, ref, "short_file", c0) : err_at(e, "read", ref->segment);
        goto out;
    }
    if (with_hdr && !hdr_matches(h, ref))
        rv = corrupt(bs, ref, "header", 0);
    else if (ntab > 0)
        rv = chunks_check(bs, ref, &sp, tab, c0, c1);
out:
    if (tab != tab_small)
        mg_free(tab);
    mg_free(scratch);
    return rv;
}

static int ref_ok(const struct eng_blob_ref *ref)
{
    return ref->offset >= BLOB_SEGHDR_BYTES + BLOB_HDR_BYTES && ref->length <= UINT64_MAX / 2;
}

int eng_blob_read(struct eng_blobstore *bs, const struct eng_blob_ref *ref, uint64_t offset,
                  void *buf, size_t len)
{
    if (!ref_ok(ref) || offset > ref->length || len > ref->length - offset)
        return MG_EINVALIDARGUMENT;
    return read_verified(bs, ref, offset, buf, len);
}

int eng_blob_cursor_read(struct eng_blobstore *bs, const struct eng_blob_ref *ref,
                         struct eng_blob_cursor *c, void *buf, size_t len)
{
    if (c->pos > ref->length || len > ref->length - c->pos)
        return MG_EINVALIDARGUMENT;
    int rv = eng_blob_read(bs, ref, c->pos, buf, len);
    if (rv == 0)
        c->pos += len;
    return rv;
}

/* Design: the scrubber calls this at a bounded rate; each call reads the blob once, 1 MiB
 * (16 chunks) at a time, so memory is 1 MiB whatever the blob size and the cost is one
 * sequential read plus ~0.1 ms of crc32c per MiB. */
int eng_blob_verify(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    if (!ref_ok(ref))
        return MG_EINVALIDARGUMENT;
    size_t piece = ref->length < BLOB_VERIFY_BYTES ? (size_t)ref->length : BLOB_VERIFY_BYTES;
    char *buf = mg_malloc(piece ? piece : 1);
    uint32_t crc = 0xFFFFFFFFu;
    int rv = 0;
    uint64_t off = 0;
    do {
        size_t n = ref->length - off < piece ? (size_t)(ref->length - off) : piece;
        rv = read_verified(bs, ref, off, buf, n);
        crc = crc_update(crc, buf, n);
        off += n;
    } while (rv == 0 && off < ref->length);
    if (rv == 0 && ~crc != ref->crc32c)
        rv = corrupt(bs, ref, "blob_crc", 0);
    mg_free(buf);
    return rv;
}

/* ------------------------------------------------------------ free */

/* 1 if the segment's own epoch (its header) is the ref's: a stale ref frees nothing. */
static int epoch_ok(const struct seg *s, const struct eng_blob_ref *ref)
{
    if ((uint32_t)s->epoch == ref->flags)
        return 1;
    mg_log(MG_LOG_WARN, "op=free seg=%" PRIx64 " ref_epoch=%" PRIu32 " seg_epoch=%" PRIu64
           " stale ref: not freed", s->no, ref->flags, s->epoch);
    return 0;
}

/* An own file goes whole; check the ref describes it (segment epoch, size, live header)
 * before unlinking anything. */
static void free_own(struct eng_blobstore *bs, struct seg *s, const struct eng_blob_ref *ref)
{
    struct stat st;
    unsigned char h[BLOB_HDR_BYTES];
    if (!epoch_ok(s, ref) || ref->offset != BLOB_SEGHDR_BYTES + BLOB_HDR_BYTES
        || fstat(s->fd, &st) != 0
        || (uint64_t)st.st_size != BLOB_SEGHDR_BYTES + rec_bytes(ref->length)
        || io_pread_full(s->fd, h, sizeof h, BLOB_SEGHDR_BYTES) != 0 || !hdr_matches(h, ref)) {
        mg_log(MG_LOG_ERROR, "op=free seg=%" PRIx64 " bad ref: not freed", s->no);
        seg_unref(bs, s);
        return;
    }
    int kill = 0;
    pthread_mutex_lock(&bs->mu);
    if (!s->dead) {
        seg_kill_locked(bs, s);
        kill = 1;
    }
    pthread_mutex_unlock(&bs->mu);
    if (kill) {
        seg_unlink(bs, s);
        atomic_fetch_add(&bs->bytes_freed, ref->length);
    }
    seg_unref(bs, s);
}

/* A record in a shared segment: mark its header freed (so a second free is a no-op and a
 * walk skips it), punch its data and table out, drop its live bytes. */
static void free_shared(struct eng_blobstore *bs, struct seg *s, const struct eng_blob_ref *ref)
{
    unsigned char h[BLOB_HDR_BYTES];
    uint64_t hoff = ref->offset - BLOB_HDR_BYTES;
    pthread_mutex_lock(&s->free_mu);
    int e = epoch_ok(s, ref) ? io_pread_full(s->fd, h, sizeof h, hoff) : -1;
    if (e != 0 || !hdr_matches(h, ref)) {
        pthread_mutex_unlock(&s->free_mu);
        mg_log(MG_LOG_DEBUG, "op=free seg=%" PRIx64 " off=%" PRIu64 " not live: no-op", s->no,
               ref->offset);
        seg_unref(bs, s);
        return;
    }
    put_le32(h, BLOB_MAGIC_FREED);
    if (pwrite(s->fd, h, 4, (off_t)hoff) != 4) {
        pthread_mutex_unlock(&s->free_mu);
        /* Leak rather than risk counting the record free twice. */
        mg_log(MG_LOG_WARN, "op=free seg=%" PRIx64 " errno=%d: space leaked", s->no, errno);
        seg_unref(bs, s);
        return;
    }
    pthread_mutex_unlock(&s->free_mu);
    io_punch(s->fd, ref->offset, rec_bytes(ref->length) - BLOB_HDR_BYTES, s->no);
    atomic_fetch_add(&bs->bytes_freed, ref->length);
    seg_release(bs, s, rec_bytes(ref->length));
}

void eng_blob_free(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    int rv = 0;
    struct seg *s = ref_ok(ref) ? seg_get(bs, ref->segment, &rv) : NULL;
    if (s == NULL) {
        mg_log(MG_LOG_DEBUG, "op=free seg=%" PRIx64 " err=%s: no-op", ref->segment,
               mg_err_name(rv ? rv : MG_EINVALIDARGUMENT));
        return;
    }
    if (s->own)
        free_own(bs, s, ref);
    else
        free_shared(bs, s, ref);
}

/* ------------------------------------------------------------ pins and the reaper */

/* Pins and the reaper. A reader pins each blob it streams; eng_blob_retire frees a blob once
 * no reader pins it. State, under pin_mu (never held across I/O, never taken by writers):
 * a hash table of pinned blobs (pin count, retired flag) and a FIFO ring of retired blobs no
 * one pins. Retire of a pinned blob sets its flag; the last unpin moves it to the ring. The
 * reaper thread takes at most REAP_BATCH refs off the ring per tick, re-checking each against
 * the pin table (a reader may have pinned it after the retire), drops pin_mu, frees them with
 * eng_blob_free, and while a backlog remains pauses REAP_TICK_US between ticks.
 *
 * Budget (the design comment STYLE.md 7a asks for above a budgeted loop): a free is a 48-byte
 * pread, a 4-byte pwrite and a fallocate, ~10-30 us; it takes bs->mu (the lock writers
 * reserve under) twice for ~1 us each and never holds it across I/O. A tick is <= 128 frees
 * (<= ~4 ms of one core, no lock held for more than a free), so a writer waits at most one
 * free (the kernel's inode lock on the segment) behind the reaper; throughput is
 * 128 / (1 ms + 128 x 20 us) ~ 35k-60k frees/s: a 100,000-retire burst drains in 2-3 s.
 *
 * Memory: the pin table holds at most ENG_BLOB_PINS_MAX entries (48 B each: ~3 MiB), the ring
 * 32 B per retired blob: 8 MiB at ENG_BLOB_RETIRE_BACKLOG_MAX (262,144). Retire never refuses
 * and never frees early (the metadata has already dropped the ref); the caller applies
 * backpressure by refusing new deletes while eng_blob_retire_backlog() is at the limit, and
 * retires accepted past it are counted (stats retire_over_limit). */

static size_t pin_bucket(const struct eng_blob_ref *ref)
{
    uint64_t x = ref->segment * 0x9E3779B97F4A7C15ull ^ ref->offset;
    x ^= x >> 29;
    return (size_t)(x * 0xBF58476D1CE4E5B9ull >> 40) & (PIN_BUCKETS - 1);
}

static struct pin **pin_find(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    struct pin **p = &bs->pin_tab[pin_bucket(ref)];
    while (*p != NULL && ((*p)->ref.segment != ref->segment || (*p)->ref.offset != ref->offset))
        p = &(*p)->next;
    return p;
}

/* Append ref to the ring (pin_mu held), growing it by doubling. */
static void q_push(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    if (bs->q_len == bs->q_cap) {
        size_t cap = bs->q_cap ? bs->q_cap * 2 : 1024;
        struct eng_blob_ref *q = mg_malloc(cap * sizeof *q);
        for (size_t i = 0; i < bs->q_len; i++)
            q[i] = bs->q[(bs->q_head + i) & (bs->q_cap - 1)];
        mg_free(bs->q);
        bs->q = q;
        bs->q_cap = cap;
        bs->q_head = 0;
    }
    bs->q[(bs->q_head + bs->q_len) & (bs->q_cap - 1)] = *ref;
    bs->q_len++;
    if (bs->q_len == 1)
        pthread_cond_signal(&bs->reap_cv);
}

static size_t backlog_locked(const struct eng_blobstore *bs)
{
    return bs->q_len + bs->pinned_retired;
}

int eng_blob_pin(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    assert(bs != NULL && ref != NULL);
    pthread_mutex_lock(&bs->pin_mu);
    struct pin **p = pin_find(bs, ref);
    if (*p == NULL) {
        if (bs->npins >= ENG_BLOB_PINS_MAX) {
            pthread_mutex_unlock(&bs->pin_mu);
            return MG_ESLOWDOWN;
        }
        *p = mg_calloc(1, sizeof **p);
        (*p)->ref = *ref;
        bs->npins++;
    }
    (*p)->pins++;
    pthread_mutex_unlock(&bs->pin_mu);
    return 0;
}

void eng_blob_unpin(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    pthread_mutex_lock(&bs->pin_mu);
    struct pin **p = pin_find(bs, ref), *e = *p;
    assert(e != NULL && e->pins > 0); /* unpin without pin: programmer error */
    if (e != NULL && --e->pins == 0) {
        *p = e->next;
        bs->npins--;
        if (e->retired) {
            bs->pinned_retired--;
            q_push(bs, &e->ref);
        }
        mg_free(e);
    }
    pthread_mutex_unlock(&bs->pin_mu);
}

void eng_blob_retire(struct eng_blobstore *bs, const struct eng_blob_ref *ref)
{
    assert(bs != NULL && ref != NULL);
    pthread_mutex_lock(&bs->pin_mu);
    if (backlog_locked(bs) >= ENG_BLOB_RETIRE_BACKLOG_MAX)
        bs->retire_over++;
    bs->retired++;
    struct pin *e = *pin_find(bs, ref);
    if (e == NULL)
        q_push(bs, ref);
    else if (!e->retired) {
        e->retired = 1;
        bs->pinned_retired++;
    } /* else retired twice while pinned: freed once (free is idempotent anyway) */
    pthread_mutex_unlock(&bs->pin_mu);
}

size_t eng_blob_retire_backlog(struct eng_blobstore *bs)
{
    pthread_mutex_lock(&bs->pin_mu);
    size_t n = backlog_locked(bs) + bs->reap_inflight;
    pthread_mutex_unlock(&bs->pin_mu);
    return n;
}

/* Take up to REAP_BATCH unpinned refs off the ring into out (pin_mu held). */
static size_t reap_take_locked(struct eng_blobstore *bs, struct eng_blob_ref *out)
{
    size_t n = 0;
    while (bs->q_len > 0 && n < REAP_BATCH) {
        struct eng_blob_ref r = bs->q[bs->q_head];
        bs->q_head = (bs->q_head + 1) & (bs->q_cap - 1);
        bs->q_len--;
        struct pin *e = *pin_find(bs, &r);
        if (e != NULL) { /* pinned after its retire: wait for the last unpin */
            if (!e->retired) {
                e->retired = 1;
                bs->pinned_retired++;
            }
            continue;
        }
        out[n++] = r;
    }
    return n;
}

static void *on_reaper(void *arg)
{
    struct eng_blobstore *bs = arg;
    struct eng_blob_ref batch[REAP_BATCH];
    pthread_mutex_lock(&bs->pin_mu);
    for (;;) {
        while (bs->q_len == 0 && !bs->reap_stop)
            pthread_cond_wait(&bs->reap_cv, &bs->pin_mu);
        if (bs->q_len == 0)
            break; /* stopping, drained */
        size_t n = reap_take_locked(bs, batch);
        bs->reap_inflight = n;
        pthread_mutex_unlock(&bs->pin_mu);
        for (size_t i = 0; i < n; i++)
            eng_blob_free(bs, &batch[i]);
        pthread_mutex_lock(&bs->pin_mu);
        bs->reaped += n;
        bs->reap_inflight = 0;
        if (bs->q_len > 0 && !bs->reap_stop) {
            pthread_mutex_unlock(&bs->pin_mu);
            struct timespec ts = {0, REAP_TICK_US * 1000L};
            nanosleep(&ts, NULL);
            pthread_mutex_lock(&bs->pin_mu);
        }
    }
    pthread_mutex_unlock(&bs->pin_mu);
    return NULL;
}

/* Stop the reaper after it drained the ring; then free what is still pinned and retired
 * (readers must be gone at close) and drop the pin table. */
static void reaper_stop(struct eng_blobstore *bs)
{
    if (bs->reap_started) {
        pthread_mutex_lock(&bs->pin_mu);
        bs->reap_stop = 1;
        pthread_cond_signal(&bs->reap_cv);
        pthread_mutex_unlock(&bs->pin_mu);
        pthread_join(bs->reaper, NULL);
        bs->reap_started = 0;
    }
    for (size_t i = 0; bs->pin_tab != NULL && i < PIN_BUCKETS; i++) {
        while (bs->pin_tab[i] != NULL) {
            struct pin *e = bs->pin_tab[i];
            bs->pin_tab[i] = e->next;
            mg_log(MG_LOG_WARN, "op=close seg=%" PRIx64 " off=%" PRIu64 " still pinned%s",
                   e->ref.segment, e->ref.offset, e->retired ? ": freed" : "");
            if (e->retired)
                eng_blob_free(bs, &e->ref);
            mg_free(e);
        }
    }
    bs->npins = bs->pinned_retired = 0;
}

/* ------------------------------------------------------------ foreach */

/* Walk one segment's records, calling cb for each live one. Shared segments are walked by
 * region bytes from the segment header on (a previous run's to its file size, this run's to
 * the reservation offset); a header that is not intact ends the walk of that segment (a torn
 * header after a crash: what follows is left for fsck, logged). */
static int walk_seg(struct eng_blobstore *bs, struct seg *s, eng_blob_foreach_cb cb, void *ctx)
{
    unsigned char h[BLOB_HDR_BYTES];
    struct stat st;
    uint64_t end;
    pthread_mutex_lock(&bs->mu);
    end = s->live_known && !s->own && s->end > 0 ? s->end : 0;
    pthread_mutex_unlock(&bs->mu);
    if (end == 0) {
        if (fstat(s->fd, &st) != 0)
            return err_at(errno, "fstat", s->no);
        end = (uint64_t)st.st_size;
    }
    for (uint64_t off = BLOB_SEGHDR_BYTES; off + BLOB_HDR_BYTES <= end;) {
        int e = io_pread_full(s->fd, h, sizeof h, off);
        if (e > 0)
            return err_at(e, "read", s->no);
        if (e != 0 || !hdr_valid(h, s->no)) {
            mg_log(MG_LOG_WARN, "op=foreach seg=%" PRIx64 " off=%" PRIu64
                   " torn header: rest of segment skipped", s->no, off);
            return 0;
        }
        if (get_le32(h) == BLOB_MAGIC_LIVE) {
            struct eng_blob_ref r = {.segment = s->no, .offset = off + BLOB_HDR_BYTES,
                                     .length = get_le64(h + 8), .crc32c = get_le32(h + 16),
                                     .flags = (uint32_t)get_le64(h + 32)};
            int rv = cb(ctx, &r);
            if (rv != 0)
                return rv;
        }
        if (s->own)
            break;
        off += get_le64(h + 40);
    }
    return 0;
}

int eng_blob_foreach(struct eng_blobstore *bs, eng_blob_foreach_cb cb, void *ctx)
{
    size_t n = 0;
    pthread_mutex_lock(&bs->mu);
    uint64_t *nos = mg_malloc((bs->nsegs ? bs->nsegs : 1) * sizeof *nos);
    for (size_t i = 0; i < bs->tab_cap; i++)
        for (struct seg *s = bs->tab[i]; s != NULL; s = s->next)
            nos[n++] = s->no;
    pthread_mutex_unlock(&bs->mu);
    int rv = 0;
    for (size_t i = 0; i < n && rv == 0; i++) {
        int grv = 0;
        struct seg *s = seg_get(bs, nos[i], &grv);
        if (s == NULL) {
            rv = grv == MG_ENOTFOUND ? 0 : grv; /* freed meanwhile */
            continue;
        }
        rv = walk_seg(bs, s, cb, ctx);
        seg_unref(bs, s);
    }
    mg_free(nos);
    return rv;
}

void eng_blob_stats_get(struct eng_blobstore *bs, struct eng_blob_stats *out)
{
    uint64_t disk = 0;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&bs->mu);
    for (size_t i = 0; i < bs->tab_cap; i++) {
        for (struct seg *s = bs->tab[i]; s != NULL; s = s->next) {
            struct stat st;
            char name[BLOB_NAME_MAX];
            seg_name(name, s->no, s->own, 0);
            int r = s->fd >= 0 ? fstat(s->fd, &st) : fstatat(bs->dirfd, name, &st, 0);
            if (r == 0)
                disk += (uint64_t)st.st_blocks * 512;
        }
    }
    out->segments = bs->nsegs;
    pthread_mutex_unlock(&bs->mu);
    out->disk_bytes = disk;
    out->bytes_written = atomic_load(&bs->bytes_written);
    out->bytes_freed = atomic_load(&bs->bytes_freed);
    out->fsyncs = atomic_load(&bs->fsyncs);
    out->corrupt_reads = atomic_load(&bs->corrupt);
    pthread_mutex_lock(&bs->pin_mu);
    out->pinned = bs->npins;
    out->retire_backlog = backlog_locked(bs) + bs->reap_inflight;
    out->retired = bs->retired;
    out->reaped = bs->reaped;
    out->retire_over_limit = bs->retire_over;
    pthread_mutex_unlock(&bs->pin_mu);
}

/* ------------------------------------------------------------ open, close */

/* Parse "%016x" + suffix. Returns 1 and sets no/kind (0 shared, 1 own, 2 temporary). */
static int parse_name(const char *name, uint64_t *no, int *kind)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint64_t)d;
    }
    const char *suf = name + 16;
    if (strcmp(suf, ".seg") == 0)
        *kind = 0;
    else if (strcmp(suf, ".blob") == 0)
        *kind = 1;
    else if (strcmp(suf, ".seg.tmp") == 0 || strcmp(suf, ".blob.tmp") == 0)
        *kind = 2;
    else
        return 0;
    *no = v;
    return 1;
}

/* Register the files of a previous run: sealed, live bytes unknown (the metadata layer's
 * orphan collector, through eng_blob_foreach, frees what no entry references). Unfinished
 * *.tmp files were never acknowledged: remove them. next_no ends past every number seen. */
static int scan(struct eng_blobstore *bs, char *errmsg)
{
    int fd = dup(bs->dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        snprintf(errmsg, 256, "opendir %s: %s", bs->dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return mg_err_from_errno(errno);
    }
    struct dirent *de;
    size_t removed = 0;
    while ((de = readdir(d)) != NULL) {
        uint64_t no;
        int kind;
        if (strlen(de->d_name) < 16 || !parse_name(de->d_name, &no, &kind))
            continue;
        if (no >= bs->next_no)
            bs->next_no = no + 1;
        if (kind == 2) {
            if (unlinkat(bs->dirfd, de->d_name, 0) == 0)
                removed++;
            continue;
        }
        struct seg *s = seg_alloc(no, kind, -1);
        s->sealed = 1;
        table_insert(bs, s);
    }
    closedir(d);
    mg_log(MG_LOG_INFO, "event=blob_open dir=%s segments=%zu tmp_removed=%zu", bs->dir,
           bs->nsegs, removed);
    return 0;
}

/* ------------------------------------------------------------ live-bytes manifest */

/* Live bytes per shared segment survive a clean close in SEGMENTS, so that segments emptied
 * after a restart are still unlinked. It is written at close once every counted segment has
 * been fdatasync'ed (the freed marks behind the counts are then durable), and read and deleted
 * (directory fsynced) at open before any free can run: after a crash there is no manifest and
 * that run's segments fall back to unknown live bytes (TODO(#2): the blob-index collector).
 * Format, little-endian: "MGSM" u32, count u32, count x (segment u64, live bytes u64), then
 * the crc32c of everything before it u32. */
#define MANIFEST_NAME "SEGMENTS"
#define MANIFEST_TMP "SEGMENTS.tmp"
#define MANIFEST_MAGIC 0x4d53474du

/* The manifest's bytes (sync'ing every counted segment first); -1 if a sync failed. */
static int manifest_encode(struct eng_blobstore *bs, struct mg_buf *b)
{
    unsigned char u[16];
    uint32_t n = 0;
    put_le32(u, MANIFEST_MAGIC);
    put_le32(u + 4, 0);
    mg_buf_append(b, u, 8);
    for (size_t i = 0; i < bs->tab_cap; i++) {
        for (struct seg *s = bs->tab[i]; s != NULL; s = s->next) {
            if (s->own || !s->live_known)
                continue;
            if (s->fd >= 0 && io_sync(bs, s->fd, 0) != 0)
                return -1;
            put_le64(u, s->no);
            put_le64(u + 8, s->live_bytes);
            mg_buf_append(b, u, 16);
            n++;
        }
    }
    put_le32((unsigned char *)b->base + 4, n);
    put_le32(u, crc32c(b->base, b->len));
    mg_buf_append(b, u, 4);
    return 0;
}

static void manifest_write(struct eng_blobstore *bs)
{
    struct mg_buf b;
    int e = 0, fd = -1;
    mg_buf_init(&b);
    if (manifest_encode(bs, &b) != 0) {
        e = EIO;
        goto out;
    }
    fd = openat(bs->dirfd, MANIFEST_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    e = fd < 0 ? errno : io_pwrite_full(fd, b.base, b.len, 0);
    if (e == 0)
        e = io_sync(bs, fd, 0);
    if (e == 0 && renameat(bs->dirfd, MANIFEST_TMP, bs->dirfd, MANIFEST_NAME) != 0)
        e = errno;
    if (e == 0)
        e = io_sync(bs, bs->dirfd, 1); /* if this fails the manifest may persist: it is true */
out:
    if (fd >= 0)
        close(fd);
    if (e != 0) {
        unlinkat(bs->dirfd, MANIFEST_TMP, 0);
        mg_log(MG_LOG_WARN, "op=manifest_write errno=%d: live bytes unknown after reopen", e);
    }
    mg_buf_close(&b);
}

/* Read and validate the manifest into b; 0 if there is a valid one. */
static int manifest_read(struct eng_blobstore *bs, struct mg_buf *b)
{
    struct stat st;
    int fd = openat(bs->dirfd, MANIFEST_NAME, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ok = fstat(fd, &st) == 0 && st.st_size >= 12
             && (uint64_t)st.st_size <= 12 + 16 * (uint64_t)bs->nsegs;
    if (ok) {
        mg_buf_reserve(b, (size_t)st.st_size);
        struct iovec iov = {b->base, (size_t)st.st_size};
        ok = io_preadv_full(fd, &iov, 1, 0) == 0;
        b->len = (size_t)st.st_size;
    }
    close(fd);
    const unsigned char *p = (const unsigned char *)b->base;
    if (!ok || get_le32(p) != MANIFEST_MAGIC || 12 + 16 * (uint64_t)get_le32(p + 4) != b->len
        || get_le32(p + b->len - 4) != crc32c(p, b->len - 4)) {
        mg_log(MG_LOG_WARN, "op=manifest_read: invalid, ignored");
        return -1;
    }
    return 0;
}

/* Apply a clean close's live bytes (see above); segments left empty are unlinked now. */
static void manifest_load(struct eng_blobstore *bs)
{
    struct mg_buf b;
    mg_buf_init(&b);
    int valid = manifest_read(bs, &b) == 0;
    /* Delete before trusting: from here on a crash must not find these counts again. */
    if (unlinkat(bs->dirfd, MANIFEST_NAME, 0) != 0 && errno != ENOENT)
        valid = 0;
    else if (valid && io_sync(bs, bs->dirfd, 1) != 0)
        valid = 0;
    size_t loaded = 0, emptied = 0;
    for (uint32_t i = 0; valid && i < get_le32((unsigned char *)b.base + 4); i++) {
        const unsigned char *e = (const unsigned char *)b.base + 8 + 16 * (size_t)i;
        struct seg *s = table_find(bs, get_le64(e));
        if (s == NULL || s->own)
            continue;
        s->live_known = 1;
        s->live_bytes = get_le64(e + 8);
        loaded++;
        if (s->live_bytes == 0) {
            seg_kill_locked(bs, s);
            seg_unlink(bs, s);
            seg_destroy(s);
            emptied++;
        }
    }
    if (valid)
        mg_log(MG_LOG_INFO, "event=manifest_loaded segments=%zu emptied=%zu", loaded, emptied);
    mg_buf_close(&b);
}

/* Read STATE (a directory with segments but no STATE is format 1: refused), start a new epoch
 * and move the high-water mark past every number seen, durably, before anything is created. */
static int state_load(struct eng_blobstore *bs, char *errmsg)
{
    uint64_t epoch = 0, limit = 0;
    int rv = state_read(bs, &epoch, &limit);
    if (rv == MG_ENOTFOUND && bs->nsegs > 0) {
        snprintf(errmsg, 256, "%s: blob store format 1 (no STATE file): refused, format %u needed",
                 bs->dir, BLOB_FORMAT_VERSION);
        return MG_ECORRUPT;
    }
    if (rv != 0 && rv != MG_ENOTFOUND) {
        snprintf(errmsg, 256, "%s/" STATE_NAME ": invalid or unreadable (%s)", bs->dir,
                 mg_err_name(rv));
        return rv;
    }
    if (limit > bs->next_no)
        bs->next_no = limit;
    bs->epoch = epoch + 1;
    bs->segno_limit = bs->next_no + BLOB_SEGNO_BLOCK;
    rv = state_write(bs, bs->epoch, bs->segno_limit);
    if (rv != 0) {
        snprintf(errmsg, 256, "%s/" STATE_NAME ": write failed (%s)", bs->dir, mg_err_name(rv));
        return rv;
    }
    mg_log(MG_LOG_INFO, "event=blob_state epoch=%" PRIu64 " next_segment=%" PRIx64, bs->epoch,
           bs->next_no);
    return 0;
}

static void bs_free(struct eng_blobstore *bs)
{
    for (size_t i = 0; i < bs->tab_cap; i++) {
        while (bs->tab[i] != NULL) {
            struct seg *s = bs->tab[i];
            bs->tab[i] = s->next;
            seg_destroy(s);
        }
    }
    mg_free(bs->tab);
    mg_free(bs->pin_tab);
    mg_free(bs->q);
    pthread_cond_destroy(&bs->reap_cv);
    pthread_mutex_destroy(&bs->pin_mu);
    if (bs->lockfd >= 0)
        close(bs->lockfd);
    if (bs->dirfd >= 0)
        close(bs->dirfd);
    gsync_close(&bs->dirsync);
    pthread_mutex_destroy(&bs->mu);
    pthread_mutex_destroy(&bs->space_mu);
    mg_free(bs->dir);
    mg_free(bs);
}

int eng_blob_open(const char *dir, const struct eng_blob_opts *opts, struct eng_blobstore **out,
                  char *errmsg)
{
    struct eng_blobstore *bs;
    int rv;
    assert(dir != NULL && out != NULL && errmsg != NULL);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(errmsg, 256, "mkdir %s: %s", dir, strerror(errno));
        return mg_err_from_errno(errno);
    }
    bs = mg_calloc(1, sizeof *bs);
    bs->dir = mg_strndup(dir, strlen(dir));
    bs->lockfd = -1;
    bs->segment_bytes = opts && opts->segment_bytes ? opts->segment_bytes
                                                    : BLOB_SEGMENT_BYTES_DEFAULT;
    bs->own_file_bytes = opts && opts->own_file_bytes ? opts->own_file_bytes
                                                      : BLOB_OWN_FILE_BYTES_DEFAULT;
    pthread_mutex_init(&bs->mu, NULL);
    pthread_mutex_init(&bs->space_mu, NULL);
    bs->min_free_bytes = opts && opts->min_free_bytes ? opts->min_free_bytes
                                                      : ENG_BLOB_MIN_FREE_DEFAULT;
    pthread_mutex_init(&bs->pin_mu, NULL);
    pthread_cond_init(&bs->reap_cv, NULL);
    bs->pin_tab = mg_calloc(PIN_BUCKETS, sizeof *bs->pin_tab);
    gsync_init(&bs->dirsync, 0);
    bs->tab_cap = 64;
    bs->tab = mg_calloc(bs->tab_cap, sizeof *bs->tab);
    bs->next_no = 1;
    bs->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bs->dirfd < 0) {
        snprintf(errmsg, 256, "open %s: %s", dir, strerror(errno));
        rv = mg_err_from_errno(errno);
        goto err_after_alloc;
    }
    bs->lockfd = openat(bs->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (bs->lockfd < 0 || flock(bs->lockfd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(errmsg, 256, "lock %s/LOCK: %s", dir, strerror(errno));
        rv = MG_EIO;
        goto err_after_alloc;
    }
    rv = scan(bs, errmsg);
    if (rv != 0)
        goto err_after_alloc;
    rv = state_load(bs, errmsg);
    if (rv != 0)
        goto err_after_alloc;
    manifest_load(bs);
    if (pthread_create(&bs->reaper, NULL, on_reaper, bs) != 0) {
        snprintf(errmsg, 256, "reaper thread: %s", strerror(errno));
        rv = MG_EIO;
        goto err_after_alloc;
    }
    bs->reap_started = 1;
    *out = bs;
    return 0;

err_after_alloc:
    bs_free(bs);
    assert(rv != 0);
    return rv;
}

void eng_blob_close(struct eng_blobstore *bs)
{
    if (bs == NULL)
        return;
    assert(atomic_load(&bs->writers) == 0);
    reaper_stop(bs);
    mg_log(MG_LOG_INFO,
           "event=blob_close segments=%zu bytes_written=%" PRIu64 " bytes_freed=%" PRIu64
           " fsyncs=%" PRIu64,
           bs->nsegs, (uint64_t)atomic_load(&bs->bytes_written),
           (uint64_t)atomic_load(&bs->bytes_freed), (uint64_t)atomic_load(&bs->fsyncs));
    manifest_write(bs);
    bs_free(bs);
}
