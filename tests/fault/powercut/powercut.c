/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mg_powercut: a FUSE file system (libfuse3, high-level API, one thread) that
 * loses what was not synced, for the power-cut suite (issue 9, "Power loss,
 * not just process death"; the idea is Jepsen's LazyFS). It passes through
 * to a backing directory, but the backing directory only ever holds the
 * *durable* state; everything newer lives in this process:
 *
 * - File data is a redo overlay. Per inode: the logical size, the lowest size
 *   it was truncated to since its last sync ("floor": backing bytes at or past
 *   it are dead and read as zeros), and the 4 KiB pages written since then
 *   (a page is its whole current content, or a zero marker after a punched
 *   hole). Reads merge pages over the backing file. fsync and fdatasync (the
 *   same here: both make data and size durable), and every write through an
 *   O_DSYNC/O_SYNC descriptor or with RWF_DSYNC (the kernel sends those as
 *   O_DSYNC in the FUSE write's flags), write the inode's pages through:
 *   truncate to floor, pwrite each page, punch each zero page, truncate to
 *   size. Nothing is fsynced on the backing file system: its page cache is
 *   the "disk" here, the machine does not lose power.
 * - Names follow the strict POSIX model: a create, link, mkdir, unlink, rmdir
 *   or rename is durable only once its directory is fsynced (FSYNCDIR; a file
 *   fsync does not make its name durable). They are applied to the backing
 *   directory at once, with an undo record; unlinked files and removed
 *   directories are parked in BACKING/.powercut-stash/ until durable, so an
 *   undo can bring them back. One exception, as ext4 behaves (its journal
 *   commits a new directory's creation with the directory's first fsync):
 *   fsyncing a new directory also makes its mkdir, and its new ancestors'
 *   mkdirs, durable. --strict-mkdir turns that off; then metagate loses its
 *   whole data directory (nobody fsyncs DATA after mkdir db, blobs, raft,
 *   tmp, nor raft/ after mkdir g<N>). Renames across directories are refused with
 *   EXDEV (none of RocksDB, libraft or the blob store does one), so each
 *   directory's records are independent and undo in reverse order is exact.
 * - Power cut: writing "cut" to the control file MOUNT/.powercut drops every
 *   unsynced page, undoes every name record not yet durable (newest first) and
 *   from then on fails every call with EIO until unmounted; the backing
 *   directory is then exactly the durable state. Reading the control file
 *   (also after the cut) gives counters. A clean unmount without a cut syncs
 *   everything, as umount does.
 * - Not modelled: metadata (mode, owner, times: passed through, durable at
 *   once), xattrs (not implemented: ENOTSUP), RENAME_EXCHANGE, mknod (EPERM),
 *   fallocate modes other than 0, KEEP_SIZE and PUNCH_HOLE|KEEP_SIZE
 *   (EOPNOTSUPP). sync_file_range never reaches FUSE (no page cache with
 *   direct_io): it is a writeback hint, not a durability point, and RocksDB
 *   does not rely on it.
 * - direct_io on every file: every read and write reaches this process, so the
 *   kernel page cache never holds data this model does not know about, and a
 *   writable shared mmap is refused by the kernel (ENODEV) instead of being
 *   written back behind our back. Attribute and entry caching are off, since
 *   the logical size differs from the backing one.
 * - Bounds: dirty page memory is capped (--max-dirty-mib, default 512); a
 *   write, truncate or punch that would need more fails with EIO (counted,
 *   logged once), it never grows without end. Pending name records are capped
 *   at 1,000,000 (EIO past that).
 *
 * usage: mg_powercut BACKING MOUNTPOINT [--max-dirty-mib N] [--strict-mkdir] [-d]
 *   Runs in the foreground; unmount with fusermount3 -u MOUNTPOINT.
 */
#define FUSE_USE_VERSION 31
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define PC_PAGE 4096u
#define PC_PAGE_BUCKETS (1u << 18)
#define PC_NODE_BUCKETS (1u << 12)
#define PC_LOG_MAX 1000000u
#define PC_STASH ".powercut-stash"
#define PC_CTL "/.powercut"

struct pc_node;

/* One dirty page: data is its whole current content, NULL for a punched (zero) page. */
struct pc_page {
    struct pc_node *node;
    uint64_t idx;
    unsigned char *data;
    struct pc_page *hnext;       /* global hash chain */
    struct pc_page *prev, *next; /* the node's page list */
};

/* One backing inode with state not yet durable (or an open handle). */
struct pc_node {
    ino_t ino;
    int fd;         /* our own O_RDWR descriptor of the backing file */
    uint64_t size;  /* logical size */
    uint64_t floor; /* backing bytes at or past it are dead (truncated since the last sync) */
    uint64_t npages;
    int refs; /* open handles */
    struct pc_page *pages;
    struct pc_node *hnext;
};

enum pc_kind { PC_CREATE, PC_MKDIR, PC_UNLINK, PC_RMDIR, PC_RENAME };

/* One name change not yet durable; undone by kind, newest first. */
struct pc_rec {
    enum pc_kind kind;
    ino_t dir;      /* the directory whose fsync makes it durable */
    int dirfd;      /* O_PATH descriptor of that directory */
    char *name;     /* the name created or removed; RENAME: the new name */
    char *from;     /* RENAME: the old name */
    uint64_t stash; /* UNLINK/RMDIR: the parked entry's number */
    ino_t child;    /* MKDIR: the new directory */
};

#define PC_CTL_TEXT 1024

struct pc_handle {
    int fd;
    int ctl; /* the control file; text: the counters when it was opened (reads agree) */
    char text[PC_CTL_TEXT];
    int text_len;
    int dir;   /* 1: a directory, 2: the root (its listing hides the stash) */
    int dsync; /* opened O_DSYNC or O_SYNC: every write is synced before it returns */
    struct pc_node *node;
};

static struct {
    int root; /* backing directory */
    int stashfd;
    int cut;
    int strict_mkdir; /* --strict-mkdir: a new directory's fsync does not make its name durable */
    uint64_t max_dirty_bytes;
    uint64_t dirty_bytes;
    uint64_t stash_seq;
    struct pc_page *page_hash[PC_PAGE_BUCKETS];
    struct pc_node *node_hash[PC_NODE_BUCKETS];
    struct pc_rec *log;
    size_t log_len, log_cap;
    uint64_t n_writes, n_syncs, n_dirsyncs, n_refused, n_dsync_writes, n_unsupported;
    uint64_t cut_pages, cut_bytes, cut_records;
} g;

__attribute__((format(printf, 1, 2))) static void pc_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mg_powercut: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void refuse(const char *what)
{
    if (g.n_refused++ == 0)
        pc_log("refusing %s with EIO: dirty bytes %" PRIu64 " at the bound %" PRIu64, what,
               g.dirty_bytes, g.max_dirty_bytes);
}

/* A call this model does not implement: refused explicitly, counted, logged each time. */
static int unsupported(const char *what, int err)
{
    g.n_unsupported++;
    pc_log("unsupported: %s (answered %s)", what, strerror(err));
    return -err;
}

static const char *rel(const char *path)
{
    return path[1] != '\0' ? path + 1 : ".";
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL) {
        pc_log("out of memory");
        abort();
    }
    return p;
}

/* ------------------------------------------------------------------ nodes and pages */

static unsigned page_bucket(const struct pc_node *n, uint64_t idx)
{
    uint64_t h =
        ((uint64_t)(uintptr_t)n >> 4) * 0x9e3779b97f4a7c15ull ^ idx * 0xff51afd7ed558ccdull;
    return (unsigned)(h >> 40) & (PC_PAGE_BUCKETS - 1);
}

static struct pc_page *page_find(struct pc_node *n, uint64_t idx)
{
    for (struct pc_page *p = g.page_hash[page_bucket(n, idx)]; p != NULL; p = p->hnext)
        if (p->node == n && p->idx == idx)
            return p;
    return NULL;
}

static void page_drop(struct pc_page *p)
{
    struct pc_page **pp = &g.page_hash[page_bucket(p->node, p->idx)];
    while (*pp != p)
        pp = &(*pp)->hnext;
    *pp = p->hnext;
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        p->node->pages = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    if (p->data != NULL)
        g.dirty_bytes -= PC_PAGE;
    p->node->npages--;
    free(p->data);
    free(p);
}

static struct pc_page *page_add(struct pc_node *n, uint64_t idx)
{
    struct pc_page *p = xmalloc(sizeof *p);
    *p = (struct pc_page){.node = n, .idx = idx};
    unsigned b = page_bucket(n, idx);
    p->hnext = g.page_hash[b];
    g.page_hash[b] = p;
    p->next = n->pages;
    if (n->pages != NULL)
        n->pages->prev = p;
    n->pages = p;
    n->npages++;
    return p;
}

static struct pc_node **node_slot(ino_t ino)
{
    struct pc_node **pp = &g.node_hash[(uint64_t)ino % PC_NODE_BUCKETS];
    while (*pp != NULL && (*pp)->ino != ino)
        pp = &(*pp)->hnext;
    return pp;
}

/* The node of the backing file open as fd (created clean from its size). */
static struct pc_node *node_get(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return NULL;
    struct pc_node **pp = node_slot(st.st_ino);
    if (*pp != NULL)
        return *pp;
    int own = dup(fd);
    if (own < 0)
        return NULL;
    struct pc_node *n = xmalloc(sizeof *n);
    *n = (struct pc_node){
        .ino = st.st_ino, .fd = own, .size = (uint64_t)st.st_size, .floor = (uint64_t)st.st_size};
    *pp = n;
    return n;
}

/* Frees a node with no handle and nothing unsynced. */
static void node_maybe_free(struct pc_node *n)
{
    struct stat st;
    if (n->refs > 0 || n->pages != NULL || n->floor != n->size)
        return;
    if (fstat(n->fd, &st) != 0 || (uint64_t)st.st_size != n->size)
        return;
    *node_slot(n->ino) = n->hnext;
    close(n->fd);
    free(n);
}

/* Copies the current content of [off, off+len) of n (len within one page) into buf. */
static int node_read_base(struct pc_node *n, unsigned char *buf, uint64_t off, size_t len)
{
    memset(buf, 0, len);
    if (off >= n->floor)
        return 0;
    size_t want = off + len > n->floor ? (size_t)(n->floor - off) : len;
    ssize_t r = pread(n->fd, buf, want, (off_t)off);
    return r < 0 ? -errno : 0;
}

static int node_read(struct pc_node *n, char *buf, size_t len, uint64_t off)
{
    if (off >= n->size)
        return 0;
    if (off + len > n->size)
        len = (size_t)(n->size - off);
    size_t done = 0;
    while (done < len) {
        uint64_t o = off + done, idx = o / PC_PAGE, in = o % PC_PAGE;
        size_t k = PC_PAGE - in < len - done ? PC_PAGE - in : len - done;
        struct pc_page *p = page_find(n, idx);
        if (p != NULL) {
            if (p->data != NULL)
                memcpy(buf + done, p->data + in, k);
            else
                memset(buf + done, 0, k);
        } else {
            int e = node_read_base(n, (unsigned char *)buf + done, o, k);
            if (e != 0)
                return e;
        }
        done += k;
    }
    return (int)len;
}

/* The page idx of n with its data materialized (current content), or NULL past the bound. */
static struct pc_page *page_materialize(struct pc_node *n, uint64_t idx, int *err)
{
    struct pc_page *p = page_find(n, idx);
    if (p != NULL && p->data != NULL)
        return p;
    if (g.dirty_bytes + PC_PAGE > g.max_dirty_bytes) {
        *err = -EIO;
        return NULL;
    }
    unsigned char *d = xmalloc(PC_PAGE);
    if (p != NULL) {
        memset(d, 0, PC_PAGE);
    } else {
        int e = node_read_base(n, d, idx * PC_PAGE, PC_PAGE);
        if (e != 0) {
            free(d);
            *err = e;
            return NULL;
        }
        /* Bytes past the logical size read as zeros (they may be dead backing bytes). */
        if (idx * PC_PAGE + PC_PAGE > n->size) {
            uint64_t keep = n->size > idx * PC_PAGE ? n->size - idx * PC_PAGE : 0;
            memset(d + keep, 0, PC_PAGE - keep);
        }
        p = page_add(n, idx);
    }
    p->data = d;
    g.dirty_bytes += PC_PAGE;
    return p;
}

static int node_write(struct pc_node *n, const char *buf, size_t len, uint64_t off)
{
    uint64_t need = 0;
    for (uint64_t i = off / PC_PAGE; len > 0 && i <= (off + len - 1) / PC_PAGE; i++) {
        struct pc_page *p = page_find(n, i);
        if (p == NULL || p->data == NULL)
            need += PC_PAGE;
    }
    if (g.dirty_bytes + need > g.max_dirty_bytes) {
        refuse("a write");
        return -EIO;
    }
    size_t done = 0;
    while (done < len) {
        uint64_t o = off + done, idx = o / PC_PAGE, in = o % PC_PAGE;
        size_t k = PC_PAGE - in < len - done ? PC_PAGE - in : len - done;
        int e = 0;
        struct pc_page *p = page_materialize(n, idx, &e);
        if (p == NULL)
            return e;
        memcpy(p->data + in, buf + done, k);
        done += k;
    }
    if (off + len > n->size)
        n->size = off + len;
    g.n_writes++;
    return (int)len;
}

/* Logical truncate: pages past the new size go, the last page's tail is zeroed. */
static int node_truncate(struct pc_node *n, uint64_t size)
{
    if (size < n->size) {
        if (size % PC_PAGE != 0) {
            struct pc_page *p = page_find(n, size / PC_PAGE);
            if (p != NULL && p->data != NULL)
                memset(p->data + size % PC_PAGE, 0, PC_PAGE - size % PC_PAGE);
        }
        for (struct pc_page *p = n->pages, *nx; p != NULL; p = nx) {
            nx = p->next;
            if (p->idx * PC_PAGE >= size)
                page_drop(p);
        }
        if (size < n->floor)
            n->floor = size;
    }
    n->size = size;
    return 0;
}

/* Punch [off, off+len) within the logical size: whole pages become zero markers. */
static int node_punch(struct pc_node *n, uint64_t off, uint64_t len)
{
    uint64_t end = off + len > n->size ? n->size : off + len;
    for (uint64_t o = off; o < end;) {
        uint64_t idx = o / PC_PAGE, in = o % PC_PAGE;
        uint64_t k = PC_PAGE - in < end - o ? PC_PAGE - in : end - o;
        struct pc_page *p = page_find(n, idx);
        if (k == PC_PAGE) {
            if (p == NULL)
                p = page_add(n, idx);
            if (p->data != NULL) {
                free(p->data);
                p->data = NULL;
                g.dirty_bytes -= PC_PAGE;
            }
        } else {
            int e = 0;
            p = page_materialize(n, idx, &e);
            if (p == NULL) {
                refuse("a punch");
                return e;
            }
            memset(p->data + in, 0, (size_t)k);
        }
        o += k;
    }
    return 0;
}

/* fsync/fdatasync: the inode's pages and size through to the backing file. */
static int node_sync(struct pc_node *n)
{
    struct stat st;
    if (fstat(n->fd, &st) != 0)
        return -errno;
    if (n->floor < (uint64_t)st.st_size && ftruncate(n->fd, (off_t)n->floor) != 0)
        return -errno;
    while (n->pages != NULL) {
        struct pc_page *p = n->pages;
        uint64_t o = p->idx * PC_PAGE;
        size_t k = o + PC_PAGE > n->size ? (size_t)(n->size - o) : PC_PAGE;
        if (p->data != NULL) {
            if (pwrite(n->fd, p->data, k, (off_t)o) != (ssize_t)k)
                return errno != 0 ? -errno : -EIO;
        } else if (fallocate(n->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)o,
                             (off_t)PC_PAGE) != 0) {
            return -errno;
        }
        page_drop(p);
    }
    if (ftruncate(n->fd, (off_t)n->size) != 0)
        return -errno;
    n->floor = n->size;
    g.n_syncs++;
    return 0;
}

/* ------------------------------------------------------------------ name records */

static int dir_of(const char *path, char *name, size_t cap, ino_t *ino)
{
    const char *r = rel(path);
    const char *slash = strrchr(r, '/');
    char dir[PATH_MAX];
    if (slash == NULL) {
        strcpy(dir, ".");
    } else {
        if ((size_t)(slash - r) >= sizeof dir)
            return -ENAMETOOLONG;
        memcpy(dir, r, (size_t)(slash - r));
        dir[slash - r] = '\0';
    }
    const char *base = slash == NULL ? r : slash + 1;
    if (strlen(base) >= cap)
        return -ENAMETOOLONG;
    strcpy(name, base);
    int fd = openat(g.root, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    *ino = st.st_ino;
    return fd;
}

static int log_add(enum pc_kind kind, int dirfd, ino_t dir, const char *name, const char *from,
                   uint64_t stash)
{
    if (g.log_len == g.log_cap) {
        g.log_cap = g.log_cap ? g.log_cap * 2 : 256;
        struct pc_rec *l = realloc(g.log, g.log_cap * sizeof *l);
        if (l == NULL)
            abort();
        g.log = l;
    }
    g.log[g.log_len++] = (struct pc_rec){.kind = kind,
                                         .dir = dir,
                                         .dirfd = dup(dirfd),
                                         .name = strdup(name),
                                         .from = from ? strdup(from) : NULL,
                                         .stash = stash};
    return 0;
}

static void stash_name(char *buf, size_t cap, uint64_t no)
{
    snprintf(buf, cap, "%016" PRIx64, no);
}

/* Parks dirfd/name in the stash; returns its number or a negative errno. */
static int64_t stash_put(int dirfd, const char *name)
{
    char s[32];
    uint64_t no = ++g.stash_seq;
    stash_name(s, sizeof s, no);
    if (renameat(dirfd, name, g.stashfd, s) != 0)
        return -errno;
    return (int64_t)no;
}

static int rm_tree(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return unlinkat(parent, name, 0);
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        rm_tree(fd, e->d_name);
    }
    closedir(d);
    return unlinkat(parent, name, AT_REMOVEDIR);
}

static void rec_free(struct pc_rec *r)
{
    close(r->dirfd);
    free(r->name);
    free(r->from);
}

/* The record is durable: a parked entry is really removed now. */
static void rec_durable(struct pc_rec *r)
{
    char s[32];
    if (r->kind == PC_UNLINK || r->kind == PC_RMDIR) {
        stash_name(s, sizeof s, r->stash);
        if (rm_tree(g.stashfd, s) != 0)
            pc_log("removing stash %s: %s", s, strerror(errno));
    }
    rec_free(r);
}

static void rec_undo(struct pc_rec *r)
{
    char s[32];
    int rc = 0;
    switch (r->kind) {
    case PC_CREATE:
        rc = unlinkat(r->dirfd, r->name, 0);
        break;
    case PC_MKDIR:
        rc = rm_tree(r->dirfd, r->name);
        break;
    case PC_UNLINK:
    case PC_RMDIR:
        stash_name(s, sizeof s, r->stash);
        rc = renameat(g.stashfd, s, r->dirfd, r->name);
        break;
    case PC_RENAME:
        rc = renameat(r->dirfd, r->name, r->dirfd, r->from);
        break;
    }
    static const char *const kinds[] = {"create", "mkdir", "unlink", "rmdir", "rename"};
    char dir[PATH_MAX], link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", r->dirfd);
    ssize_t dn = readlink(link, dir, sizeof dir - 1);
    dir[dn > 0 ? dn : 0] = '\0';
    pc_log("undo %s %s%s%s in %s%s%s", kinds[r->kind], r->from ? r->from : "",
           r->from ? " -> " : "", r->name, dir, rc != 0 ? ": failed: " : "",
           rc != 0 ? strerror(errno) : "");
    rec_free(r);
}

/* ------------------------------------------------------------------ the cut */

static void power_cut(void)
{
    for (unsigned b = 0; b < PC_NODE_BUCKETS; b++)
        for (struct pc_node *n = g.node_hash[b]; n != NULL; n = n->hnext) {
            g.cut_pages += n->npages;
            if (n->pages != NULL || n->floor != n->size)
                g.cut_bytes += n->size;
            while (n->pages != NULL)
                page_drop(n->pages);
        }
    g.cut_records = g.log_len;
    while (g.log_len > 0)
        rec_undo(&g.log[--g.log_len]);
    g.cut = 1;
    pc_log("power cut: dropped %" PRIu64 " unsynced pages, undid %" PRIu64
           " name changes; every call fails with EIO from now on",
           g.cut_pages, g.cut_records);
}

static int ctl_text(char *buf, size_t cap)
{
    return snprintf(buf, cap,
                    "cut %d\ndirty_bytes %" PRIu64 "\nmax_dirty_bytes %" PRIu64
                    "\npending_names %zu\nwrites %" PRIu64 "\ndsync_writes %" PRIu64
                    "\nsyncs %" PRIu64 "\ndirsyncs %" PRIu64 "\nrefused %" PRIu64
                    "\nunsupported %" PRIu64 "\ncut_pages %" PRIu64 "\ncut_records %" PRIu64 "\n",
                    g.cut, g.dirty_bytes, g.max_dirty_bytes, g.log_len, g.n_writes,
                    g.n_dsync_writes, g.n_syncs, g.n_dirsyncs, g.n_refused, g.n_unsupported,
                    g.cut_pages, g.cut_records);
}

/* ------------------------------------------------------------------ FUSE operations */

#define CUT_GUARD()                                                                                \
    do {                                                                                           \
        if (g.cut)                                                                                 \
            return -EIO;                                                                           \
    } while (0)

static struct pc_handle *H(struct fuse_file_info *fi)
{
    return (struct pc_handle *)(uintptr_t)fi->fh;
}

static void *pc_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    (void)conn;
    cfg->use_ino = 1;
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    cfg->attr_timeout = 0;
    cfg->entry_timeout = 0;
    cfg->negative_timeout = 0;
    cfg->hard_remove = 1;
    cfg->nullpath_ok = 1;
    return NULL;
}

static int pc_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    if (path != NULL && strcmp(path, PC_CTL) == 0) {
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = 4096;
        return 0;
    }
    CUT_GUARD();
    int rc =
        fi != NULL ? fstat(H(fi)->fd, st) : fstatat(g.root, rel(path), st, AT_SYMLINK_NOFOLLOW);
    if (rc != 0)
        return -errno;
    if (S_ISREG(st->st_mode)) {
        struct pc_node *n = *node_slot(st->st_ino);
        if (n != NULL) {
            st->st_size = (off_t)n->size;
            st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
        }
    }
    return 0;
}

static int open_common(const char *path, struct fuse_file_info *fi, int create, mode_t mode)
{
    struct pc_handle *h = xmalloc(sizeof *h);
    *h = (struct pc_handle){.fd = -1};
    if (strcmp(path, PC_CTL) == 0) {
        h->ctl = 1;
        h->text_len = ctl_text(h->text, sizeof h->text);
        fi->fh = (uint64_t)(uintptr_t)h;
        fi->direct_io = 1;
        return 0;
    }
    if (g.cut) {
        free(h);
        return -EIO;
    }
    int flags = (fi->flags & ~(O_ACCMODE | O_DIRECT | O_SYNC | O_DSYNC | O_TRUNC | O_APPEND |
                               O_CREAT | O_EXCL | O_NOCTTY)) |
                O_RDWR | O_CLOEXEC;
    int existed = 1;
    char name[NAME_MAX + 1];
    ino_t dino = 0;
    int dirfd = -1;
    if (create) {
        struct stat st;
        existed = fstatat(g.root, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (existed && (fi->flags & O_EXCL)) {
            free(h);
            return -EEXIST;
        }
        if (!existed) {
            if (g.log_len >= PC_LOG_MAX) {
                free(h);
                refuse("a create (name records)");
                return -EIO;
            }
            dirfd = dir_of(path, name, sizeof name, &dino);
            if (dirfd < 0) {
                free(h);
                return dirfd;
            }
            flags |= O_CREAT | O_EXCL;
        }
    }
    int fd = openat(g.root, rel(path), flags, mode);
    if (fd < 0) {
        int e = -errno;
        if (dirfd >= 0)
            close(dirfd);
        free(h);
        return e;
    }
    if (!existed) {
        log_add(PC_CREATE, dirfd, dino, name, NULL, 0);
        close(dirfd);
    }
    h->fd = fd;
    h->node = node_get(fd);
    if (h->node == NULL) {
        int e = -errno;
        close(fd);
        free(h);
        return e;
    }
    h->node->refs++;
    h->dsync = (fi->flags & O_DSYNC) != 0;
    if (fi->flags & O_TRUNC)
        node_truncate(h->node, 0);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    return 0;
}

static int pc_open(const char *path, struct fuse_file_info *fi)
{
    return open_common(path, fi, 0, 0);
}

static int pc_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    return open_common(path, fi, 1, mode);
}

static int pc_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    struct pc_handle *h = H(fi);
    if (h->node != NULL) {
        h->node->refs--;
        if (!g.cut)
            node_maybe_free(h->node);
    }
    if (h->fd >= 0)
        close(h->fd);
    free(h);
    return 0;
}

static int pc_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    struct pc_handle *h = H(fi);
    if (h->ctl) {
        int n = h->text_len;
        if (off >= n)
            return 0;
        size_t k = (size_t)(n - off) < size ? (size_t)(n - off) : size;
        memcpy(buf, h->text + off, k);
        return (int)k;
    }
    CUT_GUARD();
    return node_read(h->node, buf, size, (uint64_t)off);
}

static int pc_write(const char *path, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)path;
    struct pc_handle *h = H(fi);
    if (h->ctl) {
        if (size >= 3 && memcmp(buf, "cut", 3) == 0 && !g.cut)
            power_cut();
        return (int)size;
    }
    CUT_GUARD();
    int rv = node_write(h->node, buf, size, (uint64_t)off);
    if (rv >= 0 && (h->dsync || (fi->flags & O_DSYNC))) {
        /* An O_DSYNC/O_SYNC descriptor (libraft's segments), or a write with RWF_DSYNC,
         * which the kernel passes as O_DSYNC in the FUSE write's flags. */
        g.n_dsync_writes++;
        int e = node_sync(h->node);
        if (e != 0)
            return e;
    }
    return rv;
}

static int pc_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    (void)datasync;
    CUT_GUARD();
    if (H(fi)->ctl)
        return 0;
    return node_sync(H(fi)->node);
}

static int pc_flush(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    if (H(fi)->ctl)
        return 0;
    CUT_GUARD();
    return 0;
}

/* A node for a path-only call (truncate without a handle). */
static struct pc_node *node_by_path(const char *path, int *err)
{
    int fd = openat(g.root, rel(path), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        *err = -errno;
        return NULL;
    }
    struct pc_node *n = node_get(fd);
    *err = n == NULL ? -errno : 0;
    close(fd);
    return n;
}

static int pc_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    CUT_GUARD();
    int e = 0;
    struct pc_node *n = fi != NULL ? H(fi)->node : node_by_path(path, &e);
    if (n == NULL)
        return e;
    return node_truncate(n, (uint64_t)size);
}

static int pc_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
    (void)path;
    CUT_GUARD();
    struct pc_node *n = H(fi)->node;
    if (mode == 0) {
        if ((uint64_t)(off + len) > n->size)
            n->size = (uint64_t)(off + len);
        return 0;
    }
    if (mode == FALLOC_FL_KEEP_SIZE)
        return 0; /* preallocation only: nothing a reader or a crash can see */
    if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
        return node_punch(n, (uint64_t)off, (uint64_t)len);
    return unsupported("fallocate mode", EOPNOTSUPP);
}

static int pc_mkdir(const char *path, mode_t mode)
{
    CUT_GUARD();
    char name[NAME_MAX + 1];
    ino_t dino;
    int dirfd = dir_of(path, name, sizeof name, &dino);
    if (dirfd < 0)
        return dirfd;
    int rc = mkdirat(dirfd, name, mode) == 0 ? 0 : -errno;
    struct stat st;
    if (rc == 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        log_add(PC_MKDIR, dirfd, dino, name, NULL, 0);
        g.log[g.log_len - 1].child = st.st_ino;
    }
    close(dirfd);
    return rc;
}

static int remove_common(const char *path, int isdir)
{
    CUT_GUARD();
    char name[NAME_MAX + 1];
    ino_t dino;
    struct stat st;
    if (fstatat(g.root, rel(path), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return -errno;
    if (isdir != !!S_ISDIR(st.st_mode))
        return isdir ? -ENOTDIR : -EISDIR;
    int dirfd = dir_of(path, name, sizeof name, &dino);
    if (dirfd < 0)
        return dirfd;
    if (isdir) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        int nonempty = 0;
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                nonempty = 1;
        if (d != NULL)
            closedir(d);
        if (nonempty) {
            close(dirfd);
            return -ENOTEMPTY;
        }
    }
    int64_t no = stash_put(dirfd, name);
    if (no > 0)
        log_add(isdir ? PC_RMDIR : PC_UNLINK, dirfd, dino, name, NULL, (uint64_t)no);
    close(dirfd);
    return no < 0 ? (int)no : 0;
}

static int pc_unlink(const char *path)
{
    return remove_common(path, 0);
}

static int pc_rmdir(const char *path)
{
    return remove_common(path, 1);
}

static int pc_rename(const char *from, const char *to, unsigned int flags)
{
    CUT_GUARD();
    if (flags & ~RENAME_NOREPLACE)
        return unsupported("rename flags", EINVAL); /* RENAME_EXCHANGE, RENAME_WHITEOUT */
    char fname[NAME_MAX + 1], tname[NAME_MAX + 1];
    ino_t fdino, tdino;
    int ffd = dir_of(from, fname, sizeof fname, &fdino);
    if (ffd < 0)
        return ffd;
    int tfd = dir_of(to, tname, sizeof tname, &tdino);
    if (tfd < 0) {
        close(ffd);
        return tfd;
    }
    int rc = 0;
    struct stat st;
    if (fdino != tdino) {
        rc = unsupported("rename across directories", EXDEV); /* two directories' durability */
    } else if (fstatat(ffd, fname, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        rc = -errno;
    } else if (fstatat(tfd, tname, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (flags & RENAME_NOREPLACE) {
            rc = -EEXIST;
        } else {
            int64_t no = stash_put(tfd, tname);
            if (no < 0)
                rc = (int)no;
            else
                log_add(S_ISDIR(st.st_mode) ? PC_RMDIR : PC_UNLINK, tfd, tdino, tname, NULL,
                        (uint64_t)no);
        }
    }
    if (rc == 0) {
        if (renameat(ffd, fname, tfd, tname) != 0)
            rc = -errno;
        else
            log_add(PC_RENAME, tfd, tdino, tname, fname, 0);
    }
    close(ffd);
    close(tfd);
    return rc;
}

/* A new name for an existing inode (link) or a symlink: its undo is an unlink. */
static int name_create(const char *src, const char *path, int hard)
{
    CUT_GUARD();
    char name[NAME_MAX + 1];
    ino_t dino;
    int dirfd = dir_of(path, name, sizeof name, &dino);
    if (dirfd < 0)
        return dirfd;
    int rc = hard ? linkat(g.root, rel(src), dirfd, name, 0) : symlinkat(src, dirfd, name);
    rc = rc == 0 ? 0 : -errno;
    if (rc == 0)
        log_add(PC_CREATE, dirfd, dino, name, NULL, 0);
    close(dirfd);
    return rc;
}

static int pc_link(const char *from, const char *to)
{
    return name_create(from, to, 1);
}

static int pc_symlink(const char *target, const char *path)
{
    return name_create(target, path, 0);
}

static int pc_readlink(const char *path, char *buf, size_t size)
{
    CUT_GUARD();
    ssize_t n = readlinkat(g.root, rel(path), buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

static int pc_mknod(const char *path, mode_t mode, dev_t dev)
{
    (void)path;
    (void)mode;
    (void)dev;
    return unsupported("mknod", EPERM);
}

static int pc_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    CUT_GUARD();
    int rc = fi != NULL ? fchmod(H(fi)->fd, mode) : fchmodat(g.root, rel(path), mode, 0);
    return rc == 0 ? 0 : -errno;
}

static int pc_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
    CUT_GUARD();
    int rc = fi != NULL ? fchown(H(fi)->fd, uid, gid)
                        : fchownat(g.root, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
    return rc == 0 ? 0 : -errno;
}

static int pc_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
    CUT_GUARD();
    int rc = fi != NULL ? futimens(H(fi)->fd, tv)
                        : utimensat(g.root, rel(path), tv, AT_SYMLINK_NOFOLLOW);
    return rc == 0 ? 0 : -errno;
}

static int pc_statfs(const char *path, struct statvfs *st)
{
    (void)path;
    CUT_GUARD();
    return fstatvfs(g.root, st) == 0 ? 0 : -errno;
}

static int pc_access(const char *path, int mask)
{
    CUT_GUARD();
    return faccessat(g.root, rel(path), mask, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

static int pc_opendir(const char *path, struct fuse_file_info *fi)
{
    CUT_GUARD();
    struct pc_handle *h = xmalloc(sizeof *h);
    *h = (struct pc_handle){.dir = strcmp(path, "/") == 0 ? 2 : 1};
    h->fd = openat(g.root, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (h->fd < 0) {
        int e = -errno;
        free(h);
        return e;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    return 0;
}

static int pc_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)path;
    (void)off;
    (void)flags;
    CUT_GUARD();
    int fd = dup(H(fi)->fd);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return -errno;
    }
    rewinddir(d);
    int top = H(fi)->dir == 2;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (top && strcmp(e->d_name, PC_STASH) == 0)
            continue;
        if (fill(buf, e->d_name, NULL, 0, 0) != 0)
            break;
    }
    closedir(d);
    return 0;
}

static int pc_releasedir(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close(H(fi)->fd);
    free(H(fi));
    return 0;
}

/* Directory fsync: every name record of this directory becomes durable. */
static int pc_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    (void)datasync;
    CUT_GUARD();
    struct stat st;
    if (fstat(H(fi)->fd, &st) != 0)
        return -errno;
    ino_t dir = st.st_ino, self = st.st_ino;
    while (dir != 0) {
        size_t keep = 0;
        ino_t parent = 0;
        for (size_t i = 0; i < g.log_len; i++) {
            struct pc_rec *r = &g.log[i];
            if (!g.strict_mkdir && r->kind == PC_MKDIR && r->child == dir && dir != 0)
                parent = r->dir;
            if (r->dir == self || (!g.strict_mkdir && r->kind == PC_MKDIR && r->child == dir))
                rec_durable(r);
            else
                g.log[keep++] = *r;
        }
        g.log_len = keep;
        /* ext4 (jbd2) commits the transaction holding a new directory's creation when
         * that directory is fsynced; follow the unsynced mkdirs up to the root. */
        dir = parent;
    }
    g.n_dirsyncs++;
    return 0;
}

/* Clean unmount without a cut: everything becomes durable, as umount does. */
static void pc_destroy(void *data)
{
    (void)data;
    if (g.cut)
        return;
    for (unsigned b = 0; b < PC_NODE_BUCKETS; b++)
        for (struct pc_node *n = g.node_hash[b]; n != NULL; n = n->hnext)
            if (node_sync(n) != 0)
                pc_log("sync at unmount failed: %s", strerror(errno));
    for (size_t i = 0; i < g.log_len; i++)
        rec_durable(&g.log[i]);
    g.log_len = 0;
    pc_log("clean unmount: everything synced");
}

static const struct fuse_operations pc_ops = {
    .init = pc_init,
    .destroy = pc_destroy,
    .getattr = pc_getattr,
    .open = pc_open,
    .create = pc_create,
    .release = pc_release,
    .read = pc_read,
    .write = pc_write,
    .fsync = pc_fsync,
    .flush = pc_flush,
    .truncate = pc_truncate,
    .fallocate = pc_fallocate,
    .mkdir = pc_mkdir,
    .unlink = pc_unlink,
    .rmdir = pc_rmdir,
    .rename = pc_rename,
    .link = pc_link,
    .symlink = pc_symlink,
    .readlink = pc_readlink,
    .mknod = pc_mknod,
    .chmod = pc_chmod,
    .chown = pc_chown,
    .utimens = pc_utimens,
    .statfs = pc_statfs,
    .access = pc_access,
    .opendir = pc_opendir,
    .readdir = pc_readdir,
    .releasedir = pc_releasedir,
    .fsyncdir = pc_fsyncdir,
};

static int usage(void)
{
    fprintf(stderr,
            "usage: mg_powercut BACKING MOUNTPOINT [--max-dirty-mib N] [--strict-mkdir] [-d]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    uint64_t mib = 512;
    int debug = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--max-dirty-mib") == 0 && i + 1 < argc)
            mib = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--strict-mkdir") == 0)
            g.strict_mkdir = 1;
        else if (strcmp(argv[i], "-d") == 0)
            debug = 1;
        else
            return usage();
    }
    g.max_dirty_bytes = mib << 20;
    g.root = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g.root < 0) {
        pc_log("open %s: %s", argv[1], strerror(errno));
        return 1;
    }
    /* Leftovers of an earlier run that died without a cut were unlinked: drop them. */
    rm_tree(g.root, PC_STASH);
    if (mkdirat(g.root, PC_STASH, 0700) != 0) {
        pc_log("mkdir %s/%s: %s", argv[1], PC_STASH, strerror(errno));
        return 1;
    }
    g.stashfd = openat(g.root, PC_STASH, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (g.stashfd < 0)
        return 1;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char *fargv[] = {
        argv[0], "-f", "-s", "-o", "fsname=mg_powercut,subtype=powercut", debug ? "-d" : "-f",
        argv[2], NULL};
    pc_log("backing %s mounted at %s, dirty bound %" PRIu64 " MiB", argv[1], argv[2], mib);
    return fuse_main(7, fargv, &pc_ops, NULL);
}
