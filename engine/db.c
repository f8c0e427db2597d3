/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The KV half of engine/: one RocksDB instance (C API, 7.8.3) shared by every
 * thread, with the column families default/meta/index (DESIGN.md 4, 8). One
 * rocksdb_t is opened per data directory so that concurrent sync committers
 * share a WAL fsync through RocksDB's write-group leader (group commit). This
 * file is the only place where RocksDB errptr strings become enum mg_err. The
 * compaction mode (enum eng_compaction) decides whether deletes are handed to
 * the delete tracker (tracker.c) or left to RocksDB, with or without its
 * CompactOnDeletionCollector.
 */
#define MG_MODULE "engine"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "engine/engine.h"
#include "engine/internal.h"

/* Defaults, each a stated bound (STYLE.md 7a). */
#define DB_BLOCK_CACHE_BYTES_DEFAULT (32u << 20) /* shared by all CFs */
#define DB_WRITE_BUFFER_BYTES (32u << 20)        /* memtable per CF */
#define DB_BLOOM_BITS_PER_KEY 10.0               /* ~1% false positives */
#define DB_BACKGROUND_JOBS 4                     /* flushes + compactions */
/* ENG_COMPACTION_ROCKSDB_COLLECTOR: compact-on-deletion for the meta CF: an SST in which any
 * window of 32k consecutive entries holds >= 16k tombstones is marked for compaction. It only
 * sees SSTs as they are written, never tombstones still in the memtable (issue 8). */
#define DB_DEL_WINDOW 32768
#define DB_DEL_TRIGGER 16384

static const char *const cf_names[ENG_CF__COUNT] = {"default", "meta", "index"};
static const char *const compaction_names[] = {"locality", "rocksdb", "rocksdb+collector"};

int eng_compaction_parse(const char *s, size_t len, enum eng_compaction *out)
{
    assert(s != NULL && out != NULL);
    for (int c = ENG_COMPACTION_LOCALITY; c <= ENG_COMPACTION_ROCKSDB_COLLECTOR; c++) {
        if (strlen(compaction_names[c]) == len && memcmp(compaction_names[c], s, len) == 0) {
            *out = (enum eng_compaction)c;
            return 0;
        }
    }
    return MG_EINVALIDARGUMENT;
}

const char *eng_compaction_name(enum eng_compaction c)
{
    assert(c <= ENG_COMPACTION_ROCKSDB_COLLECTOR);
    return compaction_names[c];
}

struct eng_db {
    rocksdb_t *db;                                   /* shared by all threads */
    rocksdb_options_t *opts;                         /* DB-wide options */
    rocksdb_options_t *cf_opts[ENG_CF__COUNT];       /* per-CF options */
    rocksdb_column_family_handle_t *cf[ENG_CF__COUNT]; /* CF handles */
    rocksdb_block_based_table_options_t *table;      /* shared table options */
    rocksdb_cache_t *cache;                          /* block cache */
    rocksdb_writeoptions_t *wo_sync;                 /* WAL fsync per commit */
    rocksdb_writeoptions_t *wo_nosync;               /* no fsync */
    rocksdb_readoptions_t *ro;                       /* point reads */
    int wal;                                         /* 1: WAL on */
    enum eng_compaction compaction;                  /* mode opened with */
    struct eng__tracker *tracker;                    /* ENG_COMPACTION_LOCALITY, else NULL */
};

/* A batch is built before it meets a DB (eng_batch_create takes none), and RocksDB batches
 * name column families by handle, which belongs to one open DB. So a batch records its ops in
 * a flat buffer of (struct batch_op, a bytes, b bytes) and is replayed into a RocksDB batch at
 * commit: one extra copy of small metadata rows, and batches stay valid across reopen. */
enum batch_opcode { BATCH_PUT, BATCH_DELETE, BATCH_DELETE_RANGE };

struct batch_op {
    uint8_t op;    /* enum batch_opcode */
    uint8_t cf;    /* enum eng_cf */
    uint32_t alen; /* key, or range start, length */
    uint32_t blen; /* value, or range end, length (0 for delete) */
};

struct eng_batch {
    struct mg_buf ops; /* encoded ops, in order */
    size_t n;          /* ops recorded */
    size_t ndel;       /* of which deletes and range deletes (the tracker's input) */
};

struct eng_iter {
    rocksdb_iterator_t *it;   /* RocksDB iterator (implicit snapshot) */
    rocksdb_readoptions_t *ro; /* holds pointers into lower/upper */
    char *lower;              /* copied lower bound (or NULL) */
    char *upper;              /* copied upper bound (or NULL) */
};

/* Translate a RocksDB errptr (a malloc'ed "Code: detail" string, e.g. "IO error: No space left
 * on device") into enum mg_err, log it, copy it into errmsg (if any) and free it. */
static int err_from_rocksdb(char *err, const char *what, char *errmsg)
{
    int rv = MG_EIO;
    assert(err != NULL);
    if (strstr(err, "No space left") != NULL || strstr(err, "Disk quota") != NULL)
        rv = MG_ENOSPC;
    else if (strncmp(err, "Corruption", 10) == 0)
        rv = MG_ECORRUPT;
    mg_log(MG_LOG_ERROR, "op=%s err=%s rocksdb=\"%s\"", what, mg_err_name(rv), err);
    if (errmsg != NULL)
        snprintf(errmsg, 256, "%s: %s", what, err);
    rocksdb_free(err);
    return rv;
}

static void table_options_init(struct eng_db *db, const struct eng_db_opts *o)
{
    size_t cache = o->block_cache_bytes ? o->block_cache_bytes : DB_BLOCK_CACHE_BYTES_DEFAULT;
    db->cache = rocksdb_cache_create_lru(cache);
    db->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_cache(db->table, db->cache);
    /* Full (not block-based) bloom filters, owned by the table options from here on. */
    rocksdb_block_based_options_set_filter_policy(
        db->table, rocksdb_filterpolicy_create_bloom_full(DB_BLOOM_BITS_PER_KEY));
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(db->table, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(db->table, 1);
    rocksdb_block_based_options_set_format_version(db->table, 5);
}

/* Options shared by the DB and every CF: level compaction with dynamic level sizes. */
static rocksdb_options_t *options_create(struct eng_db *db)
{
    rocksdb_options_t *o = rocksdb_options_create();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    rocksdb_options_increase_parallelism(o, ncpu > 1 ? (int)ncpu : 2);
    rocksdb_options_optimize_level_style_compaction(o, DB_WRITE_BUFFER_BYTES * 2);
    rocksdb_options_set_write_buffer_size(o, DB_WRITE_BUFFER_BYTES);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(o, 1);
    rocksdb_options_set_max_background_jobs(o, DB_BACKGROUND_JOBS);
    rocksdb_options_set_bytes_per_sync(o, 1 << 20);
    rocksdb_options_set_compression(o, rocksdb_lz4_compression);
    rocksdb_options_set_block_based_table_factory(o, db->table);
    return o;
}

static void db_free(struct eng_db *db)
{
    /* The tracker's worker calls into db->db: stop it first; a CompactRange it is running
     * returns early (RocksDB's DisableManualCompaction) instead of holding up the close. */
    if (db->tracker != NULL) {
        eng__tracker_stop(db->tracker);
        rocksdb_disable_manual_compaction(db->db);
    }
    eng__tracker_destroy(db->tracker);
    for (int i = 0; i < ENG_CF__COUNT; i++) {
        if (db->cf[i] != NULL)
            rocksdb_column_family_handle_destroy(db->cf[i]);
        if (db->cf_opts[i] != NULL)
            rocksdb_options_destroy(db->cf_opts[i]);
    }
    if (db->db != NULL)
        rocksdb_close(db->db);
    if (db->opts != NULL)
        rocksdb_options_destroy(db->opts);
    if (db->table != NULL)
        rocksdb_block_based_options_destroy(db->table);
    if (db->cache != NULL)
        rocksdb_cache_destroy(db->cache);
    if (db->wo_sync != NULL)
        rocksdb_writeoptions_destroy(db->wo_sync);
    if (db->wo_nosync != NULL)
        rocksdb_writeoptions_destroy(db->wo_nosync);
    if (db->ro != NULL)
        rocksdb_readoptions_destroy(db->ro);
    mg_free(db);
}

int eng_db_open(const char *dir, const struct eng_db_opts *opts, struct eng_db **out,
                char *errmsg)
{
    struct eng_db *db = mg_calloc(1, sizeof *db);
    char *err = NULL;
    assert(dir != NULL && opts != NULL && out != NULL);

    assert(opts->compaction <= ENG_COMPACTION_ROCKSDB_COLLECTOR);
    db->wal = opts->wal;
    db->compaction = opts->compaction;
    table_options_init(db, opts);
    db->opts = options_create(db);
    rocksdb_options_set_create_if_missing(db->opts, 1);
    rocksdb_options_set_create_missing_column_families(db->opts, 1);
    rocksdb_options_set_keep_log_file_num(db->opts, 4);
    rocksdb_options_set_info_log_level(db->opts, 2 /* WARN */);
    /* Without a WAL a flush must cover every CF at once, or a crash could persist an entry
     * but not its index row (DESIGN.md 6: the Raft log replays what is not flushed). */
    if (!db->wal)
        rocksdb_options_set_atomic_flush(db->opts, 1);
    for (int i = 0; i < ENG_CF__COUNT; i++)
        db->cf_opts[i] = options_create(db);
    if (db->compaction == ENG_COMPACTION_ROCKSDB_COLLECTOR)
        rocksdb_options_add_compact_on_deletion_collector_factory(db->cf_opts[ENG_CF_META],
                                                                  DB_DEL_WINDOW, DB_DEL_TRIGGER);

    db->db = rocksdb_open_column_families(db->opts, dir, ENG_CF__COUNT, cf_names,
                                          (const rocksdb_options_t *const *)db->cf_opts, db->cf,
                                          &err);
    if (err != NULL) {
        int rv = err_from_rocksdb(err, "open", errmsg);
        db->db = NULL;
        db_free(db);
        return rv;
    }
    db->wo_sync = rocksdb_writeoptions_create();
    db->wo_nosync = rocksdb_writeoptions_create();
    if (db->wal) {
        rocksdb_writeoptions_set_sync(db->wo_sync, 1);
    } else {
        /* RocksDB rejects sync writes without a WAL: with the WAL off, sync is a no-op. */
        rocksdb_writeoptions_disable_WAL(db->wo_sync, 1);
        rocksdb_writeoptions_disable_WAL(db->wo_nosync, 1);
    }
    db->ro = rocksdb_readoptions_create();
    if (db->compaction == ENG_COMPACTION_LOCALITY)
        db->tracker = eng__tracker_create(db, &opts->tracker);
    mg_log(MG_LOG_INFO, "event=db_open dir=%s wal=%s compaction=%s", dir,
           db->wal ? "on" : "off", eng_compaction_name(db->compaction));
    *out = db;
    return 0;
}

void eng_db_close(struct eng_db *db)
{
    if (db == NULL)
        return;
    db_free(db);
}

int eng_get(struct eng_db *db, enum eng_cf cf, const void *key, size_t klen, struct mg_buf *val)
{
    char *err = NULL;
    size_t vlen;
    assert(cf < ENG_CF__COUNT && val != NULL);
    rocksdb_pinnableslice_t *v = rocksdb_get_pinned_cf(db->db, db->ro, db->cf[cf], key, klen,
                                                      &err);
    if (err != NULL)
        return err_from_rocksdb(err, "get", NULL);
    if (v == NULL)
        return MG_ENOTFOUND;
    const char *p = rocksdb_pinnableslice_value(v, &vlen);
    mg_buf_append(val, p, vlen);
    rocksdb_pinnableslice_destroy(v);
    return 0;
}

struct eng_batch *eng_batch_create(void)
{
    struct eng_batch *b = mg_malloc(sizeof *b);
    mg_buf_init(&b->ops);
    b->n = 0;
    b->ndel = 0;
    return b;
}

void eng_batch_destroy(struct eng_batch *b)
{
    if (b == NULL)
        return;
    mg_buf_close(&b->ops);
    mg_free(b);
}

static void batch_add(struct eng_batch *b, enum batch_opcode op, enum eng_cf cf, const void *a,
                      size_t al, const void *bb, size_t bl)
{
    struct batch_op h = {.op = (uint8_t)op, .cf = (uint8_t)cf, .alen = (uint32_t)al,
                         .blen = (uint32_t)bl};
    assert(cf < ENG_CF__COUNT);
    assert(al <= UINT32_MAX && bl <= UINT32_MAX);
    mg_buf_reserve(&b->ops, sizeof h + al + bl);
    mg_buf_append(&b->ops, &h, sizeof h);
    mg_buf_append(&b->ops, a, al);
    mg_buf_append(&b->ops, bb, bl);
    b->n++;
    b->ndel += op != BATCH_PUT;
}

void eng_batch_put(struct eng_batch *b, enum eng_cf cf, const void *k, size_t kl, const void *v,
                   size_t vl)
{
    batch_add(b, BATCH_PUT, cf, k, kl, v, vl);
}

void eng_batch_delete(struct eng_batch *b, enum eng_cf cf, const void *k, size_t kl)
{
    batch_add(b, BATCH_DELETE, cf, k, kl, NULL, 0);
}

void eng_batch_delete_range(struct eng_batch *b, enum eng_cf cf, const void *start, size_t sl,
                            const void *end, size_t el)
{
    batch_add(b, BATCH_DELETE_RANGE, cf, start, sl, end, el);
}

size_t eng_batch_count(const struct eng_batch *b)
{
    return b->n;
}

/* Decode the op at *pos into h, a (key or range start) and bb (value or range end); advance
 * *pos. 0 at the end of the batch. */
static int batch_next(const struct eng_batch *b, size_t *pos, struct batch_op *h,
                      const char **a, const char **bb)
{
    if (*pos >= b->ops.len)
        return 0;
    assert(*pos + sizeof *h <= b->ops.len);
    memcpy(h, b->ops.base + *pos, sizeof *h);
    *a = b->ops.base + *pos + sizeof *h;
    *bb = *a + h->alen;
    *pos += sizeof *h + h->alen + h->blen;
    assert(*pos <= b->ops.len);
    return 1;
}

/* Replay b's ops into a RocksDB batch bound to db's CF handles. */
static rocksdb_writebatch_t *batch_build(struct eng_db *db, const struct eng_batch *b)
{
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    size_t pos = 0;
    struct batch_op h;
    const char *a, *bb;
    while (batch_next(b, &pos, &h, &a, &bb)) {
        rocksdb_column_family_handle_t *cf = db->cf[h.cf];
        switch (h.op) {
        case BATCH_PUT:
            rocksdb_writebatch_put_cf(wb, cf, a, h.alen, bb, h.blen);
            break;
        case BATCH_DELETE:
            rocksdb_writebatch_delete_cf(wb, cf, a, h.alen);
            break;
        default:
            assert(h.op == BATCH_DELETE_RANGE);
            rocksdb_writebatch_delete_range_cf(wb, cf, a, h.alen, bb, h.blen);
            break;
        }
    }
    assert(pos == b->ops.len);
    assert((size_t)rocksdb_writebatch_count(wb) == b->n);
    return wb;
}

/* Tell the tracker about b's deletes, now that they are committed. */
static void batch_track(struct eng__tracker *t, const struct eng_batch *b)
{
    size_t pos = 0, seen = 0;
    struct batch_op h;
    const char *a, *bb;
    eng__tracker_begin(t);
    while (batch_next(b, &pos, &h, &a, &bb)) {
        if (h.op == BATCH_DELETE)
            eng__tracker_delete(t, (enum eng_cf)h.cf, a, h.alen);
        else if (h.op == BATCH_DELETE_RANGE)
            eng__tracker_delete_range(t, (enum eng_cf)h.cf, a, h.alen, bb, h.blen);
        seen += h.op != BATCH_PUT;
    }
    eng__tracker_end(t);
    assert(seen == b->ndel);
}

int eng_batch_commit(struct eng_db *db, struct eng_batch *b, int sync)
{
    char *err = NULL;
    assert(db != NULL && b != NULL);
    if (b->n == 0)
        return 0;
    rocksdb_writebatch_t *wb = batch_build(db, b);
    rocksdb_write(db->db, sync ? db->wo_sync : db->wo_nosync, wb, &err);
    rocksdb_writebatch_destroy(wb);
    if (err != NULL)
        return err_from_rocksdb(err, "commit", NULL);
    if (db->tracker != NULL && b->ndel > 0)
        batch_track(db->tracker, b);
    return 0;
}

struct eng_iter *eng_iter_create(struct eng_db *db, enum eng_cf cf, const void *lower, size_t ll,
                                 const void *upper, size_t ul)
{
    struct eng_iter *it = mg_calloc(1, sizeof *it);
    assert(cf < ENG_CF__COUNT);
    it->ro = rocksdb_readoptions_create();
    /* The read options keep pointers to the bounds: they live as long as the iterator. */
    if (lower != NULL) {
        it->lower = mg_malloc(ll ? ll : 1);
        memcpy(it->lower, lower, ll);
        rocksdb_readoptions_set_iterate_lower_bound(it->ro, it->lower, ll);
    }
    if (upper != NULL) {
        it->upper = mg_malloc(ul ? ul : 1);
        memcpy(it->upper, upper, ul);
        rocksdb_readoptions_set_iterate_upper_bound(it->ro, it->upper, ul);
    }
    it->it = rocksdb_create_iterator_cf(db->db, it->ro, db->cf[cf]);
    rocksdb_iter_seek_to_first(it->it);
    return it;
}

void eng_iter_destroy(struct eng_iter *it)
{
    if (it == NULL)
        return;
    rocksdb_iter_destroy(it->it);
    rocksdb_readoptions_destroy(it->ro);
    mg_free(it->lower);
    mg_free(it->upper);
    mg_free(it);
}

void eng_iter_seek(struct eng_iter *it, const void *k, size_t kl)
{
    rocksdb_iter_seek(it->it, k, kl);
}

void eng_iter_seek_to_last(struct eng_iter *it)
{
    rocksdb_iter_seek_to_last(it->it);
}

void eng_iter_next(struct eng_iter *it)
{
    assert(rocksdb_iter_valid(it->it));
    rocksdb_iter_next(it->it);
}

void eng_iter_prev(struct eng_iter *it)
{
    assert(rocksdb_iter_valid(it->it));
    rocksdb_iter_prev(it->it);
}

int eng_iter_valid(const struct eng_iter *it)
{
    return rocksdb_iter_valid(it->it) != 0;
}

const char *eng_iter_key(const struct eng_iter *it, size_t *len)
{
    assert(rocksdb_iter_valid(it->it));
    return rocksdb_iter_key(it->it, len);
}

const char *eng_iter_value(const struct eng_iter *it, size_t *len)
{
    assert(rocksdb_iter_valid(it->it));
    return rocksdb_iter_value(it->it, len);
}

int eng_iter_status(const struct eng_iter *it)
{
    char *err = NULL;
    rocksdb_iter_get_error(it->it, &err);
    if (err != NULL)
        return err_from_rocksdb(err, "iterate", NULL);
    return 0;
}

int eng_compact_range(struct eng_db *db, enum eng_cf cf, const void *start, size_t sl,
                      const void *end, size_t el)
{
    assert(cf < ENG_CF__COUNT);
    rocksdb_compactoptions_t *co = rocksdb_compactoptions_create();
    /* Let other compactions run beside this narrow one (the delete tracker's ranges). */
    rocksdb_compactoptions_set_exclusive_manual_compaction(co, 0);
    rocksdb_compact_range_cf_opt(db->db, db->cf[cf], co, start, start ? sl : 0, end,
                                 end ? el : 0);
    rocksdb_compactoptions_destroy(co);
    return 0; /* the C API reports no status for CompactRange */
}

int eng_db_flush(struct eng_db *db)
{
    char *err = NULL;
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    for (int i = 0; i < ENG_CF__COUNT && err == NULL; i++)
        rocksdb_flush_cf(db->db, fo, db->cf[i], &err);
    rocksdb_flushoptions_destroy(fo);
    if (err != NULL)
        return err_from_rocksdb(err, "flush", NULL);
    return 0;
}

uint64_t eng_db_property_int(struct eng_db *db, const char *name)
{
    uint64_t sum = 0;
    for (int i = 0; i < ENG_CF__COUNT; i++) {
        uint64_t v = 0;
        if (rocksdb_property_int_cf(db->db, db->cf[i], name, &v) == 0)
            sum += v;
    }
    return sum;
}

const char *eng__cf_name(enum eng_cf cf)
{
    assert(cf < ENG_CF__COUNT);
    return cf_names[cf];
}

/* Byte-string order of (a, al) and (b, bl), as RocksDB's bytewise comparator. */
static int bytes_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

/* 1 if the user keys [smallest, largest] of live file i of lf meet [lo, hi] (hi NULL: none). */
static int file_overlaps(const rocksdb_livefiles_t *lf, int i, const void *lo, size_t ll,
                         const void *hi, size_t hl)
{
    size_t sn, ln;
    const char *smallest = rocksdb_livefiles_smallestkey(lf, i, &sn);
    const char *largest = rocksdb_livefiles_largestkey(lf, i, &ln);
    return bytes_cmp(largest, ln, lo, ll) >= 0 &&
           (hi == NULL || bytes_cmp(smallest, sn, hi, hl) <= 0);
}

static int on_name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names of cf's live files in lf, sorted (caller frees the array, not the names). */
static const char **file_names(const rocksdb_livefiles_t *lf, enum eng_cf cf, size_t *n)
{
    int count = rocksdb_livefiles_count(lf);
    const char **names = mg_malloc(sizeof *names * (size_t)(count > 0 ? count : 1));
    *n = 0;
    for (int i = 0; i < count; i++)
        if (strcmp(rocksdb_livefiles_column_family_name(lf, i), cf_names[cf]) == 0)
            names[(*n)++] = rocksdb_livefiles_name(lf, i);
    qsort(names, *n, sizeof *names, on_name_cmp);
    return names;
}

static int name_in(const char *name, const char **names, size_t n)
{
    return bsearch(&name, names, n, sizeof *names, on_name_cmp) != NULL;
}

/* Bytes read: the SSTs of cf meeting [start, end) that the compaction consumed (present
 * before, gone after). Bytes written: the SSTs that are new after it and meet the key span of
 * what it consumed. A background compaction of the same keys running at the same time is
 * counted too; a trivial move (a file re-levelled, not rewritten) is not. Two live-file lists
 * per compaction, off the commit path. */
void eng__db_compact_tracked(struct eng_db *db, enum eng_cf cf, const void *start, size_t sl,
                             const void *end, size_t el, uint64_t *bytes_read,
                             uint64_t *bytes_written)
{
    size_t nb, na;
    assert(cf < ENG_CF__COUNT && start != NULL);
    const rocksdb_livefiles_t *before = rocksdb_livefiles(db->db);
    const char **names_b = file_names(before, cf, &nb);
    eng_compact_range(db, cf, start, sl, end, el);
    const rocksdb_livefiles_t *after = rocksdb_livefiles(db->db);
    const char **names_a = file_names(after, cf, &na);

    const char *lo = NULL, *hi = NULL; /* key span consumed */
    size_t ll = 0, hl = 0, sn, ln;
    *bytes_read = *bytes_written = 0;
    for (int i = 0; i < rocksdb_livefiles_count(before); i++) {
        const char *name = rocksdb_livefiles_name(before, i);
        if (strcmp(rocksdb_livefiles_column_family_name(before, i), cf_names[cf]) != 0 ||
            !file_overlaps(before, i, start, sl, end, el) ||
            name_in(name, names_a, na))
            continue;
        const char *s = rocksdb_livefiles_smallestkey(before, i, &sn);
        const char *l = rocksdb_livefiles_largestkey(before, i, &ln);
        if (lo == NULL || bytes_cmp(s, sn, lo, ll) < 0) {
            lo = s;
            ll = sn;
        }
        if (hi == NULL || bytes_cmp(l, ln, hi, hl) > 0) {
            hi = l;
            hl = ln;
        }
        *bytes_read += rocksdb_livefiles_size(before, i);
    }
    for (int i = 0; lo != NULL && i < rocksdb_livefiles_count(after); i++) {
        if (strcmp(rocksdb_livefiles_column_family_name(after, i), cf_names[cf]) == 0 &&
            !name_in(rocksdb_livefiles_name(after, i), names_b, nb) &&
            file_overlaps(after, i, lo, ll, hi, hl))
            *bytes_written += rocksdb_livefiles_size(after, i);
    }
    mg_free(names_a);
    mg_free(names_b);
    rocksdb_livefiles_destroy(after);
    rocksdb_livefiles_destroy(before);
}

void eng_db_stats_get(struct eng_db *db, struct eng_db_stats *out)
{
    assert(db != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    out->wal = db->wal;
    out->compaction = db->compaction;
    for (int i = 0; i < ENG_CF__COUNT; i++) {
        uint64_t v = 0;
        if (rocksdb_property_int_cf(db->db, db->cf[i], "rocksdb.num-deletes-active-mem-table",
                                    &v) == 0)
            out->tombstones_mem[i] += v;
        v = 0;
        if (rocksdb_property_int_cf(db->db, db->cf[i], "rocksdb.num-deletes-imm-mem-tables",
                                    &v) == 0)
            out->tombstones_mem[i] += v;
    }
    const rocksdb_livefiles_t *lf = rocksdb_livefiles(db->db);
    int n = rocksdb_livefiles_count(lf);
    for (int i = 0; i < n; i++) {
        const char *cf = rocksdb_livefiles_column_family_name(lf, i);
        for (int c = 0; c < ENG_CF__COUNT; c++)
            if (strcmp(cf, cf_names[c]) == 0)
                out->tombstones_sst[c] += rocksdb_livefiles_deletions(lf, i);
    }
    rocksdb_livefiles_destroy(lf);
    if (db->tracker != NULL)
        eng__tracker_stats(db->tracker, out);
}

void eng_perf_begin(void)
{
    rocksdb_perfcontext_t *pc = rocksdb_perfcontext_create(); /* wraps this thread's context */
    rocksdb_set_perf_level(rocksdb_enable_count);
    rocksdb_perfcontext_reset(pc);
    rocksdb_perfcontext_destroy(pc);
}

void eng_perf_end(struct eng_perf *out)
{
    rocksdb_perfcontext_t *pc = rocksdb_perfcontext_create();
    out->internal_delete_skipped =
        rocksdb_perfcontext_metric(pc, rocksdb_internal_delete_skipped_count);
    out->internal_key_skipped = rocksdb_perfcontext_metric(pc, rocksdb_internal_key_skipped_count);
    rocksdb_perfcontext_destroy(pc);
    rocksdb_set_perf_level(rocksdb_disable);
}
