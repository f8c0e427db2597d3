/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metagate admin fsck (meta/fsck.h has the contract).
 *
 * Design: the blob store's view (every live record header) is read into one
 * sorted array of refs, 40 B per blob; the metadata walk then looks each
 * extent up by (segment, offset) with a binary search and marks it, so the
 * check costs O(blobs log blobs) plus one verify read of every referenced
 * byte, and what is left unmarked is the orphan list. Orphans are computed
 * before any repair runs, and repairs of dangling entries only retire blobs
 * the walk found referenced, so a repair never frees a blob an entry still
 * uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MG_MODULE "fsck"
#include "meta/data.h"
#include "meta/fsck.h"
#include "meta/internal.h"
#include "meta/scrub.h"

#define READY_TIMEOUT_MS 30000
#define PROBLEMS_SHOWN_MAX 1000 /* rows of the table (and the JSON list); counts are exact */

enum problem_kind { P_ORPHAN, P_DANGLING, P_CHECKSUM };
static const char *const kind_name[] = {"orphan", "dangling", "checksum"};

struct problem {
    enum problem_kind kind;
    char *bucket, *key, *upload_id; /* NULL for an orphan */
    uint32_t part;
    struct eng_blob_ref ref;
    int err;
    int repaired;
};

struct live {
    struct eng_blob_ref ref;
    int referenced;
};

struct fsck {
    struct meta_store *ms;
    struct live *live;
    size_t nlive, cap;
    struct problem *p;
    size_t np, pcap;
    uint64_t counts[3], bytes[3];
    uint64_t entries, refs, bytes_verified, corrupt_rows;
};

static int live_add(void *ctx, const struct eng_blob_ref *ref)
{
    struct fsck *f = ctx;
    if (f->nlive == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 1024;
        f->live = mg_realloc(f->live, f->cap * sizeof(*f->live));
    }
    f->live[f->nlive++] = (struct live){*ref, 0};
    return 0;
}

static int live_cmp(const void *a, const void *b)
{
    const struct eng_blob_ref *x = &((const struct live *)a)->ref;
    const struct eng_blob_ref *y = &((const struct live *)b)->ref;
    if (x->segment != y->segment)
        return x->segment < y->segment ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static struct live *live_find(struct fsck *f, const struct eng_blob_ref *ref)
{
    struct live key = {*ref, 0};
    return bsearch(&key, f->live, f->nlive, sizeof(*f->live), live_cmp);
}

static char *dup_str(struct mg_str s)
{
    return s.len > 0 ? mg_strndup(s.base, s.len) : mg_strndup("", 0); /* base may be NULL */
}

static void problem_add(struct fsck *f, enum problem_kind kind, const struct meta_scrub_item *it,
                        const struct eng_blob_ref *ref, int err)
{
    f->counts[kind]++;
    f->bytes[kind] += ref->length;
    if (f->np == f->pcap) {
        f->pcap = f->pcap ? f->pcap * 2 : 64;
        f->p = mg_realloc(f->p, f->pcap * sizeof(*f->p));
    }
    struct problem *p = &f->p[f->np++];
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->ref = *ref;
    p->err = err;
    if (it != NULL) {
        p->bucket = dup_str(it->bucket);
        p->key = dup_str(it->key);
        p->upload_id = dup_str(it->upload_id);
        p->part = it->part;
    }
}

static int check_item(void *ctx, const struct meta_scrub_item *it)
{
    struct fsck *f = ctx;
    f->entries++;
    for (size_t i = 0; i < it->data->nextents; i++) {
        const struct eng_blob_ref *ref = &it->data->extents[i].ref;
        f->refs++;
        struct live *l = live_find(f, ref);
        if (l == NULL || l->ref.length != ref->length || l->ref.crc32c != ref->crc32c ||
            l->ref.flags != ref->flags) {
            problem_add(f, P_DANGLING, it, ref, MG_ENOTFOUND);
            continue;
        }
        l->referenced = 1;
        int rv = meta__blob_verify(f->ms, ref);
        if (rv != 0)
            problem_add(f, P_CHECKSUM, it, ref, rv);
        else
            f->bytes_verified += ref->length;
    }
    return 0;
}

/* The directory must exist, hold blobs/ and db/, and not be locked by a server. */
static int check_stopped(const char *dir)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/db", dir);
    int have_db = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(path, sizeof(path), "%s/blobs/LOCK", dir);
    int fd = open(path, O_RDWR | O_CLOEXEC), rv, e;
    if (fd < 0 && have_db) { /* data.backend rados: no blobs/, RocksDB's fcntl lock tells */
        snprintf(path, sizeof(path), "%s/db/LOCK", dir);
        if ((fd = open(path, O_RDWR | O_CLOEXEC)) >= 0) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            rv = fcntl(fd, F_GETLK, &fl);
            e = rv != 0 ? errno : EWOULDBLOCK;
            rv = rv != 0 || fl.l_type != F_UNLCK ? -1 : 0;
            goto probed;
        }
    }
    if (!have_db || fd < 0) {
        fprintf(stderr, "metagate: %s is not a metagate data directory (no db/ or blobs/LOCK)\n",
                dir);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rv = flock(fd, LOCK_EX | LOCK_NB);
    e = errno;
probed:
    close(fd); /* releases the probe's lock */
    if (rv != 0) {
        fprintf(stderr,
                "metagate: %s is in use (%s: %s): stop the server first; fsck checks a stopped "
                "data directory\n",
                dir, path, e == EWOULDBLOCK ? "locked by another process" : strerror(e));
        return -1;
    }
    return 0;
}

/* Wait until every shard's group leads and is ready: a leader is ready once a barrier of its
 * own term committed and applied (raft/raft.h), so every entry of the log before it, the
 * replay above RocksDB's last flush included, is applied: only then is committed state
 * complete. */
static int wait_ready(struct meta_store *ms)
{
    for (int waited = 0; waited < READY_TIMEOUT_MS; waited += 50) {
        struct meta_op_stats st;
        meta_op_stats_get(ms, &st);
        int ready = st.nshards > 0;
        for (unsigned i = 0; i < st.nshards && ready; i++)
            ready = st.shards[i].leader;
        if (ready)
            return 0;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(out, "\\u%04x", *p); /* bytes, not code points: keys are shown, not parsed */
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void print_report(const struct fsck *f, const char *dir, int repair, uint64_t freed,
                         uint64_t deleted, uint64_t aborted)
{
    printf("%-9s %-24s %-32s %-6s %10s %12s %12s %s\n", "problem", "bucket", "key", "part",
           "segment", "offset", "length", "detail");
    for (size_t i = 0; i < f->np && i < PROBLEMS_SHOWN_MAX; i++) {
        const struct problem *p = &f->p[i];
        char part[16] = "-";
        if (p->part)
            snprintf(part, sizeof(part), "%u", p->part);
        printf("%-9s %-24s %-32s %-6s %10" PRIu64 " %12" PRIu64 " %12" PRIu64 " %s%s\n",
               kind_name[p->kind], p->bucket ? p->bucket : "-", p->key ? p->key : "-", part,
               p->ref.segment, p->ref.offset, p->ref.length,
               p->kind == P_CHECKSUM ? mg_err_name(p->err)
               : p->kind == P_DANGLING ? "blob missing"
                                       : "unreferenced",
               p->repaired ? " (repaired)" : "");
    }
    if (f->np > PROBLEMS_SHOWN_MAX)
        printf("... %zu more\n", f->np - PROBLEMS_SHOWN_MAX);
    printf("fsck %s: %" PRIu64 " entries, %zu blobs, %" PRIu64 " bytes verified; %" PRIu64
           " orphans (%" PRIu64 " bytes), %" PRIu64 " dangling, %" PRIu64
           " checksum failures, %" PRIu64 " undecodable rows%s\n",
           dir, f->entries, f->nlive, f->bytes_verified, f->counts[P_ORPHAN], f->bytes[P_ORPHAN],
           f->counts[P_DANGLING], f->counts[P_CHECKSUM], f->corrupt_rows,
           repair ? "" : " (no --repair: nothing changed)");
    if (repair)
        printf("repair: %" PRIu64 " orphans freed, %" PRIu64 " dangling objects deleted, %" PRIu64
               " uploads aborted; checksum failures are not repaired\n",
               freed, deleted, aborted);
    printf("{\"fsck\":");
    json_str(stdout, dir);
    printf(",\"entries\":%" PRIu64 ",\"blobs\":%zu,\"refs\":%" PRIu64 ",\"bytes_verified\":%" PRIu64
           ",\"orphans\":%" PRIu64 ",\"orphan_bytes\":%" PRIu64 ",\"dangling\":%" PRIu64
           ",\"checksum_failures\":%" PRIu64 ",\"corrupt_rows\":%" PRIu64 ",\"repair\":%s",
           f->entries, f->nlive, f->refs, f->bytes_verified, f->counts[P_ORPHAN],
           f->bytes[P_ORPHAN], f->counts[P_DANGLING], f->counts[P_CHECKSUM], f->corrupt_rows,
           repair ? "true" : "false");
    if (repair)
        printf(",\"orphans_freed\":%" PRIu64 ",\"dangling_deleted\":%" PRIu64
               ",\"uploads_aborted\":%" PRIu64,
               freed, deleted, aborted);
    printf(",\"problems\":[");
    for (size_t i = 0; i < f->np && i < PROBLEMS_SHOWN_MAX; i++) {
        const struct problem *p = &f->p[i];
        printf("%s{\"kind\":\"%s\"", i ? "," : "", kind_name[p->kind]);
        if (p->bucket != NULL) {
            printf(",\"bucket\":");
            json_str(stdout, p->bucket);
            printf(",\"key\":");
            json_str(stdout, p->key);
            if (p->part) {
                printf(",\"upload_id\":");
                json_str(stdout, p->upload_id);
                printf(",\"part\":%u", p->part);
            }
        }
        printf(",\"segment\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"length\":%" PRIu64
               ",\"repaired\":%s}",
               p->ref.segment, p->ref.offset, p->ref.length, p->repaired ? "true" : "false");
    }
    printf("]}\n");
}

/* Same bucket, key and upload (an object or upload repaired once, whatever its extents). */
static int same_target(const struct problem *a, const struct problem *b)
{
    return a->kind == P_DANGLING && b->kind == P_DANGLING && a->part != 0 && b->part != 0
               ? strcmp(a->upload_id, b->upload_id) == 0 && strcmp(a->key, b->key) == 0 &&
                     strcmp(a->bucket, b->bucket) == 0
               : a->part == 0 && b->part == 0 && strcmp(a->key, b->key) == 0 &&
                     strcmp(a->bucket, b->bucket) == 0;
}

static void repair(struct fsck *f, uint64_t *freed, uint64_t *deleted, uint64_t *aborted)
{
    for (size_t i = 0; i < f->nlive; i++) {
        if (f->live[i].referenced)
            continue;
        meta__blob_free(f->ms, &f->live[i].ref);
        mg_log(MG_LOG_INFO, "event=fsck_orphan_freed segment=%" PRIu64 " offset=%" PRIu64
               " length=%" PRIu64, f->live[i].ref.segment, f->live[i].ref.offset,
               f->live[i].ref.length);
        (*freed)++;
    }
    for (size_t i = 0; i < f->np; i++) {
        struct problem *p = &f->p[i];
        if (p->kind == P_ORPHAN)
            p->repaired = 1;
        if (p->kind != P_DANGLING)
            continue;
        size_t j = 0;
        while (j < i && !same_target(&f->p[j], p))
            j++;
        if (j < i) { /* the first problem of this target did the repair */
            p->repaired = f->p[j].repaired;
            continue;
        }
        struct mg_str bucket = {p->bucket, strlen(p->bucket)}, key = {p->key, strlen(p->key)};
        int rv;
        if (p->part != 0) {
            rv = meta_mpu_abort(f->ms, bucket, key, (struct mg_str){p->upload_id,
                                                                    strlen(p->upload_id)});
            *aborted += rv == 0;
        } else {
            rv = meta_object_delete(f->ms, bucket, key, NULL);
            *deleted += rv == 0;
        }
        p->repaired = rv == 0;
        mg_log(rv == 0 ? MG_LOG_INFO : MG_LOG_ERROR,
               "event=fsck_dangling_repaired bucket=%s key_len=%zu part=%u action=%s err=%s",
               p->bucket, key.len, p->part, p->part ? "abort_upload" : "delete_object",
               mg_err_name(rv));
    }
}

int meta_fsck_main(int argc, char **argv)
{
    const char *dir = NULL;
    int do_repair = 0;
    struct meta_rados_opts ro = {0}; /* data.backend rados: the store's data.rados */
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--rados-conf") == 0 && i + 1 < argc) {
            ro.conf = argv[++i];
        } else if (strcmp(argv[i], "--rados-pool") == 0 && i + 1 < argc) {
            ro.pool = argv[++i];
        } else if (strcmp(argv[i], "--rados-user") == 0 && i + 1 < argc) {
            ro.user = argv[++i];
        } else if (strcmp(argv[i], "--rados-namespace") == 0 && i + 1 < argc) {
            ro.nspace = argv[++i];
        } else if (strcmp(argv[i], "--repair") == 0) {
            do_repair = 1;
        } else {
            fprintf(stderr, "metagate: unknown or incomplete option \"%s\"\n", argv[i]);
            dir = NULL;
            break;
        }
    }
    if (dir == NULL || (ro.conf == NULL) != (ro.pool == NULL)) {
        fprintf(stderr, "usage: metagate admin fsck --data DIR [--repair] "
                        "[--rados-conf PATH --rados-pool NAME [--rados-user NAME] "
                        "[--rados-namespace NAME]]\n");
        return 2;
    }
    umask(077);
    if (check_stopped(dir) != 0)
        return 1;
    mg_log_set_level("warn"); /* the store's open/close chatter would bury the report */
    /* No orphan collector in this process (meta/orphan.h): its first pass would replay retire
     * intents and free blobs, and a check without --repair changes nothing. */
    setenv("MG_ORPHAN_PERIOD_MS", "0", 1);
    struct meta_opts mo = {.data_dir = dir, .inline_max_bytes = 4096};
    if (ro.conf != NULL)
        mo.rados = &ro;
    struct fsck f = {0};
    char errmsg[256] = "";
    int rv = meta_store_open(&mo, &f.ms, errmsg);
    if (rv != 0) {
        fprintf(stderr, "metagate: cannot open %s: %s\n", dir, errmsg[0] ? errmsg : mg_err_name(rv));
        return 1;
    }
    int status = 1;
    if (wait_ready(f.ms) != 0) {
        fprintf(stderr, "metagate: %s: the metadata log did not finish replaying in %d s\n", dir,
                READY_TIMEOUT_MS / 1000);
        goto out;
    }
    if ((rv = meta__blob_foreach(f.ms, live_add, &f)) != 0) {
        fprintf(stderr, "metagate: %s: reading the blob segments: %s\n", dir, mg_err_name(rv));
        goto out;
    }
    qsort(f.live, f.nlive, sizeof(*f.live), live_cmp);
    if ((rv = meta_scrub_walk(f.ms, check_item, &f, &f.corrupt_rows)) != 0) {
        fprintf(stderr, "metagate: %s: reading the metadata: %s\n", dir, mg_err_name(rv));
        goto out;
    }
    for (size_t i = 0; i < f.nlive; i++)
        if (!f.live[i].referenced)
            problem_add(&f, P_ORPHAN, NULL, &f.live[i].ref, 0);
    uint64_t freed = 0, deleted = 0, aborted = 0;
    if (do_repair)
        repair(&f, &freed, &deleted, &aborted);
    print_report(&f, dir, do_repair, freed, deleted, aborted);
    int left = f.counts[P_CHECKSUM] > 0 || f.corrupt_rows > 0;
    for (size_t i = 0; i < f.np && !left; i++)
        left = !f.p[i].repaired;
    status = left ? 3 : 0;
out:
    meta_store_close(f.ms);
    for (size_t i = 0; i < f.np; i++) {
        mg_free(f.p[i].bucket);
        mg_free(f.p[i].key);
        mg_free(f.p[i].upload_id);
    }
    mg_free(f.p);
    mg_free(f.live);
    fflush(stdout);
    return status;
}
