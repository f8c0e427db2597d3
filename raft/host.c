/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host: one per process, on the caller's libuv loop. It owns the shared
 * listener (transport.c), the data directory with one "g<id>" sub-directory
 * per group, the polling tick that drives each group's ready barrier and
 * queues (libraft 0.15 has no state callback), and leader balancing with
 * raft_transfer (DESIGN.md 12: "Leaders pile onto one node"). It also installs
 * process-wide policy once: SIGPIPE ignored (followers die on a killed peer
 * otherwise, DESIGN.md 12) and libraft's heap aborting on out-of-memory
 * (STYLE.md 4).
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MG_MODULE "raft"
#include "common/common.h"
#include "common/fs.h"
#include "raft/internal.h"

#define BALANCE_MAX_MOVES 16 /* transfers started per balancing round */
#define BALANCE_MAX_NODES 16 /* distinct voter ids considered */
#define FREE_REFRESH_MS 100  /* free-space cache lifetime */
#define REAP_DELAY_MS 250    /* io kept after libraft's close callback (core.c) */
#define FREE_MIN_DEFAULT (4u << 20) /* min_free_bytes default floor: 4 MiB */

struct mraft_host {
    uv_loop_t *loop;                  /* everything runs here */
    uint64_t node_id;                 /* our server id in every group */
    char address[MRAFT__ADDR_MAX];    /* listen and advertised address */
    char data_dir[PATH_MAX];          /* parent of the group dirs */
    size_t segment_size_bytes;        /* raft_uv_set_segment_size */
    unsigned election_timeout_ms;     /* raft_set_election_timeout */
    unsigned heartbeat_timeout_ms;    /* raft_set_heartbeat_timeout */
    unsigned install_timeout_ms;      /* raft_set_install_snapshot_timeout */
    unsigned tick_ms;                 /* group polling period */
    unsigned balance_interval_ms;     /* 0: no balancing timer */
    struct mraft__tuning tuning;      /* per-group knobs */
    /* disk-full admission (mraft__host_admit) */
    uint64_t min_free_bytes;          /* refuse proposals below this much free space */
    uint64_t free_bytes;              /* data dir's free space at free_at */
    uint64_t free_at;                 /* uv_now of that figure; valid if free_valid */
    bool free_valid;                  /* free_bytes was read */
    uint64_t free_spent;              /* bytes admitted since then */
    mraft__free_space_fn free_fn;     /* statvfs or a test's fake */
    struct mraft__net net;            /* shared listener */
    uv_timer_t tick_timer;            /* polling */
    uv_timer_t balance_timer;         /* leader balancing */
    uv_check_t check;                 /* ticks kicked groups after each poll */
    unsigned n_kicked;                /* groups with kicked set */
    struct mraft_group *groups;       /* open and closing groups */
    unsigned n_groups;                /* open (not closing) groups */
    bool closing;                     /* destroy called */
    unsigned pending;                 /* handles and groups still closing */
    mraft_host_close_cb close_cb;     /* user callback */
    void *close_data;                 /* its argument */
};

/* ---- process-wide policy ---------------------------------------------------- */

static void oom(size_t n)
{
    mg_log(MG_LOG_FATAL, "event=oom where=libraft bytes=%zu", n);
    abort();
}

static void *heap_malloc(void *data, size_t n)
{
    void *p = malloc(n);
    if (p == NULL && n != 0)
        oom(n);
    return p;
}

static void heap_free(void *data, void *p)
{
    free(p);
}

static void *heap_calloc(void *data, size_t count, size_t n)
{
    void *p = calloc(count, n);
    if (p == NULL && count != 0 && n != 0)
        oom(count * n);
    return p;
}

static void *heap_realloc(void *data, void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL && n != 0)
        oom(n);
    return q;
}

static void *heap_aligned_alloc(void *data, size_t alignment, size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, alignment, n) != 0)
        oom(n);
    return p;
}

static void heap_aligned_free(void *data, size_t alignment, void *p)
{
    free(p);
}

static struct raft_heap abort_heap = {
    .malloc = heap_malloc,
    .free = heap_free,
    .calloc = heap_calloc,
    .realloc = heap_realloc,
    .aligned_alloc = heap_aligned_alloc,
    .aligned_free = heap_aligned_free,
};

static void install_process_policy(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    signal(SIGPIPE, SIG_IGN);
    raft_heap_set(&abort_heap);
    mraft__aio_defer_init();
}

/* ---- timers ------------------------------------------------------------------- */

static void on_tick(uv_timer_t *t)
{
    struct mraft_host *h = t->data;
    for (struct mraft_group *g = h->groups; g != NULL; g = g->next)
        mraft__group_tick(g);
}

static void group_stop(struct mraft_group *g);
static void group_finish(struct mraft_group *g);

static void on_check(uv_check_t *c)
{
    struct mraft_host *h = c->data;
    if (h->n_kicked == 0)
        return;
    h->n_kicked = 0;
    for (struct mraft_group *g = h->groups, *next; g != NULL; g = next) {
        next = g->next;
        if (!g->kicked)
            continue;
        g->kicked = false;
        if (g->closing && g->raft_closed && !g->fetch_busy)
            group_finish(g); /* destroyed after it had stopped */
        else if (g->closing)
            continue; /* on_reaped or fetch_done finishes it */
        else if (g->fence_err != 0 && !g->stopping && !g->closing)
            group_stop(g);
        else
            mraft__group_tick(g);
    }
}

void mraft__host_kick(struct mraft_host *h, struct mraft_group *g)
{
    g->kicked = true;
    h->n_kicked++;
}

/* ---- out-of-band install: the fetch worker ------------------------------------- */

static void fetch_work(uv_work_t *w)
{
    struct mraft_group *g = w->data;
    g->fetch_rv_covers = 0;
    g->fetch_rv = g->owner->fetch(g->owner_data, &g->fetch_desc, &g->fetch_rv_covers);
}

static void fetch_done(uv_work_t *w, int status)
{
    struct mraft_group *g = w->data;
    mraft__group_fetched(g, status == 0 ? g->fetch_rv : MG_ESHUTDOWN, g->fetch_rv_covers);
    if (g->closing && g->raft_closed)
        group_finish(g); /* its release waited for the worker */
}

void mraft__host_fetch(struct mraft_group *g)
{
    assert(!g->fetch_busy);
    g->fetch_busy = true;
    g->fetch_work.data = g;
    uv_queue_work(g->host->loop, &g->fetch_work, fetch_work, fetch_done);
}

/* ---- disk-full admission ------------------------------------------------------ */

static int statvfs_free(const char *dir, uint64_t *free_bytes)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0)
        return errno;
    *free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
    return 0;
}

void mraft__host_set_free_space(struct mraft_host *h, mraft__free_space_fn fn)
{
    h->free_fn = fn != NULL ? fn : statvfs_free;
    h->free_valid = false;
}

/*
 * Budget: one statvfs per FREE_REFRESH_MS or per min_free_bytes / 4 admitted
 * bytes, whichever comes first; between refreshes a proposal costs a
 * subtraction. The estimate subtracts what was admitted since the figure was
 * read (log bytes not yet on disk), so a burst cannot overrun the reserve
 * by more than a quarter of it. A failed statvfs admits (logged): the fence
 * in core.c still turns a real ENOSPC into MG_ENOSPC without aborting.
 */
int mraft__host_admit(struct mraft_host *h, size_t len, int reserve)
{
    uint64_t now = uv_now(h->loop);
    if (!h->free_valid || now - h->free_at >= FREE_REFRESH_MS ||
        h->free_spent >= h->min_free_bytes / 4) {
        uint64_t free_bytes = 0;
        int err = h->free_fn(h->data_dir, &free_bytes);
        h->free_at = now;
        h->free_spent = 0;
        h->free_valid = err == 0;
        if (err != 0)
            mg_log(MG_LOG_WARN, "event=statvfs_failed dir=%s errno=%d", h->data_dir, err);
        h->free_bytes = free_bytes;
    }
    if (h->free_valid) {
        uint64_t est = h->free_bytes > h->free_spent ? h->free_bytes - h->free_spent : 0;
        /* Proposals that free space (deletes) may use the reserve: all but a quarter. */
        uint64_t floor = reserve ? h->min_free_bytes / 4 : h->min_free_bytes;
        if (est < floor + len)
            return MG_ENOSPC;
    }
    h->free_spent += len;
    return 0;
}

static void on_balance(uv_timer_t *t)
{
    mraft_host_balance(t->data);
}

static struct mraft_group *find_group(struct mraft_host *h, uint64_t group_id)
{
    for (struct mraft_group *g = h->groups; g != NULL; g = g->next)
        if (g->id == group_id && !g->closing)
            return g;
    return NULL;
}

static struct mraft__transport *lookup(struct mraft__net *net, uint64_t group_id)
{
    struct mraft_group *g = find_group(net->data, group_id);
    return g != NULL && !g->stopping ? &g->transport : NULL;
}

static void maybe_destroyed(struct mraft_host *h)
{
    if (!h->closing || h->pending > 0)
        return;
    if (h->close_cb != NULL)
        h->close_cb(h, h->close_data);
    mg_free(h);
}

static void on_handle_closed(uv_handle_t *handle)
{
    struct mraft_host *h = handle->data;
    h->pending--;
    maybe_destroyed(h);
}

static void on_net_closed(struct mraft__net *net)
{
    struct mraft_host *h = net->data;
    h->pending--;
    maybe_destroyed(h);
}

int mraft_host_create(uv_loop_t *loop, const struct mraft_host_config *cfg,
                      struct mraft_host **out)
{
    struct stat st;
    struct sockaddr_in sa;
    if (cfg->node_id == 0 || cfg->address == NULL || cfg->data_dir == NULL ||
        strlen(cfg->address) >= MRAFT__ADDR_MAX || strlen(cfg->data_dir) + 32 >= PATH_MAX ||
        mraft__parse_address(cfg->address, &sa) != 0)
        return MG_ECONFIG;
    if (stat(cfg->data_dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return MG_ECONFIG;
    install_process_policy();

    struct mraft_host *h = mg_calloc(1, sizeof(*h));
    h->loop = loop;
    h->node_id = cfg->node_id;
    snprintf(h->address, sizeof(h->address), "%s", cfg->address);
    snprintf(h->data_dir, sizeof(h->data_dir), "%s", cfg->data_dir);
    h->segment_size_bytes = cfg->segment_size_bytes ? cfg->segment_size_bytes : 512 * 1024;
    h->election_timeout_ms = cfg->election_timeout_ms ? cfg->election_timeout_ms : 1000;
    h->heartbeat_timeout_ms = cfg->heartbeat_timeout_ms ? cfg->heartbeat_timeout_ms : 100;
    h->install_timeout_ms = cfg->install_timeout_ms ? cfg->install_timeout_ms : 2000;
    h->tick_ms = cfg->tick_ms ? cfg->tick_ms : 25;
    h->balance_interval_ms = cfg->balance_interval_ms;
    h->tuning.snapshot_threshold = cfg->snapshot_threshold ? cfg->snapshot_threshold : 1024;
    h->tuning.snapshot_trailing = cfg->snapshot_trailing ? cfg->snapshot_trailing : 128;
    h->tuning.max_pending = cfg->max_pending ? cfg->max_pending : 1024;
    h->min_free_bytes = cfg->min_free_bytes;
    if (h->min_free_bytes == 0) {
        h->min_free_bytes = 2 * (uint64_t)h->segment_size_bytes;
        if (h->min_free_bytes < FREE_MIN_DEFAULT)
            h->min_free_bytes = FREE_MIN_DEFAULT;
    }
    h->free_fn = statvfs_free;
    h->net.data = h;
    h->net.lookup = lookup;

    int rv = mraft__net_listen(&h->net, loop, h->address);
    if (rv != 0)
        goto err_after_listener_init;

    uv_timer_init(loop, &h->tick_timer);
    h->tick_timer.data = h;
    uv_timer_start(&h->tick_timer, on_tick, h->tick_ms, h->tick_ms);
    uv_check_init(loop, &h->check);
    h->check.data = h;
    uv_check_start(&h->check, on_check);
    uv_timer_init(loop, &h->balance_timer);
    h->balance_timer.data = h;
    if (h->balance_interval_ms > 0)
        uv_timer_start(&h->balance_timer, on_balance, h->balance_interval_ms,
                       h->balance_interval_ms);
    mg_log(MG_LOG_INFO, "event=host_started node=%llu address=%s dir=%s",
           (unsigned long long)h->node_id, h->address, h->data_dir);
    *out = h;
    return 0;

err_after_listener_init:
    /* The listener handle is initialized even if bind failed: close it and
     * free the host from the close callback. */
    h->closing = true;
    h->pending = 1;
    mraft__net_close(&h->net, on_net_closed);
    assert(rv != 0);
    return rv;
}

void mraft_host_destroy(struct mraft_host *h, mraft_host_close_cb cb, void *data)
{
    assert(!h->closing);
    h->closing = true;
    h->close_cb = cb;
    h->close_data = data;
    h->pending = 4; /* two timers, the check handle and the net */
    for (struct mraft_group *g = h->groups; g != NULL; g = g->next)
        h->pending++; /* each group decrements in group_finish */
    for (struct mraft_group *g = h->groups; g != NULL;) {
        struct mraft_group *next = g->next;
        if (!g->closing)
            mraft_group_destroy(g, false, NULL, NULL);
        g = next;
    }
    uv_close((uv_handle_t *)&h->tick_timer, on_handle_closed);
    uv_close((uv_handle_t *)&h->balance_timer, on_handle_closed);
    uv_close((uv_handle_t *)&h->check, on_handle_closed);
    mraft__net_close(&h->net, on_net_closed);
}

unsigned mraft_host_n_groups(struct mraft_host *h, unsigned *led)
{
    unsigned n = 0;
    for (struct mraft_group *g = h->groups; g != NULL; g = g->next)
        if (!g->closing && mraft_group_ready(g))
            n++;
    if (led != NULL)
        *led = n;
    return h->n_groups;
}

/* ---- groups --------------------------------------------------------------------- */

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[PATH_MAX + 256];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (unlink(path) != 0)
            mg_log(MG_LOG_WARN, "event=unlink_failed path=%s errno=%d", path, errno);
    }
    closedir(d);
    if (rmdir(dir) != 0)
        mg_log(MG_LOG_WARN, "event=rmdir_failed path=%s errno=%d", dir, errno);
}

/* Budget: one readdir + fstatat per file of the group's directory (a few
 * segments, snapshots and metadata files), at most once a second per group,
 * and only when stats are read. */
uint64_t mraft__host_log_bytes(struct mraft_group *g)
{
    uint64_t now = uv_now(g->host->loop);
    if (g->log_bytes_at_ms != 0 && now - g->log_bytes_at_ms < 1000)
        return g->log_bytes;
    g->log_bytes_at_ms = now != 0 ? now : 1;
    uint64_t total = 0;
    DIR *d = opendir(g->dir);
    if (d != NULL) {
        struct dirent *e;
        struct stat st;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                total += (uint64_t)st.st_blocks * 512;
        }
        closedir(d);
    }
    g->log_bytes = total;
    return total;
}

static void unlink_group(struct mraft_host *h, struct mraft_group *g)
{
    for (struct mraft_group **p = &h->groups; *p != NULL; p = &(*p)->next) {
        if (*p == g) {
            *p = g->next;
            return;
        }
    }
}

/* The end of a destroy: the libraft instance and its io are closed. */
static void group_finish(struct mraft_group *g)
{
    struct mraft_host *h = g->host;
    if (g->remove_data)
        remove_dir(g->dir);
    unlink_group(h, g);
    if (g->close_cb != NULL)
        g->close_cb(g, g->close_data);
    mg_log(MG_LOG_DEBUG, "event=group_closed group=%llu", (unsigned long long)g->id);
    mg_free(g);
    if (h->closing) {
        h->pending--;
        maybe_destroyed(h);
    }
}

static void on_reaped(uv_handle_t *handle)
{
    struct mraft_group *g = handle->data;
    raft_uv_close(&g->io);
    g->raft_closed = true;
    if (g->closing && !g->fetch_busy)
        group_finish(g); /* else fetch_done finishes it */
    /* else stopped after a fence: mraft_group_destroy finishes it */
}

static void on_reap(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, on_reaped);
}

/* libraft's close callback can fire before its uv backend is done with the
 * io (core.c, on_wrapped_close): release the io and the group only after
 * REAP_DELAY_MS more, which covers the handle closes and threadpool writes
 * that finish late. A heuristic bound, not a guarantee; the late firings are
 * logged (event=late_close_callback, info). */
static void on_raft_closed(struct raft *r)
{
    struct mraft_group *g = r->data;
    uv_timer_init(g->host->loop, &g->reap);
    g->reap.data = g;
    uv_timer_start(&g->reap, on_reap, REAP_DELAY_MS, 0);
}

/* A fenced group (core.c, failed append) stops: closing its libraft instance
 * fails every pending request (reported with the fence code) and cancels its
 * writes; the group stays until its owner destroys (and maybe reopens) it. */
static void group_stop(struct mraft_group *g)
{
    mg_log(MG_LOG_ERROR, "event=group_stopped group=%llu err=%s", (unsigned long long)g->id,
           mg_err_name(g->fence_err));
    g->stopping = true;
    mraft__group_fail_queued(g, g->fence_err);
    raft_close(g->raft, on_raft_closed);
}

void mraft_group_destroy(struct mraft_group *g, bool remove_data, mraft_group_close_cb cb,
                         void *data)
{
    assert(g->host != NULL && !g->closing);
    mraft__group_closing(g);
    g->host->n_groups--;
    g->remove_data = remove_data;
    g->close_cb = cb;
    g->close_data = data;
    if (g->raft_closed && !g->fetch_busy && g->host->closing)
        group_finish(g); /* stopped; the host's own close callback comes later */
    else if (g->raft_closed && !g->fetch_busy)
        mraft__host_kick(g->host, g); /* stopped: finish from the check phase */
    else if (!g->stopping && !g->raft_closed)
        raft_close(g->raft, on_raft_closed);
    /* else on_reaped (stop still closing) or fetch_done finishes it */
}

static int bootstrap(struct mraft_group *g, const struct mraft_group_config *cfg)
{
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    int rv = 0;
    for (unsigned i = 0; i < cfg->n_voters && rv == 0; i++)
        rv = raft_configuration_add(&conf, cfg->voters[i].id, cfg->voters[i].address,
                                    RAFT_VOTER);
    if (rv == 0) {
        rv = raft_bootstrap(g->raft, &conf);
        if (rv == RAFT_CANTBOOTSTRAP)
            rv = 0; /* already has state: reopen */
    }
    raft_configuration_close(&conf);
    return mraft__err(rv);
}

static void configure(struct mraft_host *h, struct mraft_group *g)
{
    struct raft *r = g->raft;
    raft_uv_set_segment_size(&g->io, h->segment_size_bytes);
    raft_uv_set_snapshot_compression(&g->io, false); /* 48-byte descriptors */
    raft_uv_set_connect_retry_delay(&g->io, 200);
    raft_set_election_timeout(r, h->election_timeout_ms);
    raft_set_heartbeat_timeout(r, h->heartbeat_timeout_ms);
    raft_set_install_snapshot_timeout(r, h->install_timeout_ms);
    /* Pre-vote: a restarted or partitioned node must not bump the term and
     * depose a healthy leader (thesis 9.6). */
    raft_set_pre_vote(r, true);
}

int mraft_group_create(struct mraft_host *h, const struct mraft_group_config *cfg,
                       struct mraft_group **out)
{
    assert(!h->closing && cfg->owner != NULL);
    if (cfg->group_id == 0 || find_group(h, cfg->group_id) != NULL)
        return MG_EINVALIDARGUMENT;
    struct mraft_group *g = mg_malloc(sizeof(*g));
    mraft__group_init(g, cfg->group_id, cfg->owner, cfg->owner_data, &h->tuning);
    g->host = h;
    int rv = 0;
    int n = snprintf(g->dir, sizeof(g->dir), "%s/g%llu", h->data_dir, (unsigned long long)g->id);
    if (n < 0 || (size_t)n >= sizeof(g->dir)) {
        rv = MG_ECONFIG;
        goto err_after_alloc;
    }
    if (mkdir(g->dir, 0700) == 0) {
        /* the new g<id> entry is durable only once the host's directory is fsynced */
        if ((rv = mg_fsync_dir(h->data_dir)) != 0)
            goto err_after_alloc;
    } else if (errno != EEXIST) {
        rv = mg_err_from_errno(errno);
        goto err_after_alloc;
    }
    mraft__transport_init(&g->transport, &h->net, g->id);
    rv = raft_uv_init(&g->io, h->loop, g->dir, &g->transport.iface);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=uv_init_failed group=%llu raft=\"%s\"",
               (unsigned long long)g->id, g->io.errmsg);
        rv = mraft__err(rv);
        goto err_after_alloc;
    }
    rv = raft_init(&g->raft_storage, &g->io, &g->fsm, h->node_id, h->address);
    if (rv != 0) {
        rv = mraft__err(rv);
        goto err_after_uv_init;
    }
    g->raft_storage.data = g;
    mraft__group_attach(g, &g->raft_storage);
    mraft__group_wrap_io(g);
    configure(h, g);
    g->next = h->groups;
    h->groups = g;
    h->n_groups++;
    rv = bootstrap(g, cfg);
    if (rv == 0)
        rv = mraft__group_start(g);
    if (rv != 0)
        goto err_after_raft_init;
    *out = g;
    return 0;

err_after_raft_init:
    mg_log(MG_LOG_ERROR, "event=group_open_failed group=%llu err=%s", (unsigned long long)g->id,
           mg_err_name(rv));
    mraft_group_destroy(g, false, NULL, NULL); /* freed in group_finish */
    return rv;
err_after_uv_init:
    raft_uv_close(&g->io);
err_after_alloc:
    mg_free(g);
    assert(rv != 0);
    return rv;
}

/* ---- leader balancing ------------------------------------------------------------ */

struct tally {
    uint64_t id[BALANCE_MAX_NODES]; /* voter ids seen */
    unsigned led[BALANCE_MAX_NODES]; /* groups each leads */
    unsigned n;                      /* ids in use */
};

static unsigned *tally_slot(struct tally *t, uint64_t id)
{
    for (unsigned i = 0; i < t->n; i++)
        if (t->id[i] == id)
            return &t->led[i];
    if (t->n == BALANCE_MAX_NODES)
        return NULL;
    t->id[t->n] = id;
    t->led[t->n] = 0;
    return &t->led[t->n++];
}

/* The caught-up voter of g (not us) that leads the fewest groups, if it
 * leads fewer than target. */
static uint64_t pick_target(struct mraft_group *g, struct tally *t, unsigned target)
{
    struct raft *r = g->raft;
    uint64_t best = 0;
    unsigned best_led = target;
    for (unsigned i = 0; i < r->configuration.n; i++) {
        const struct raft_server *s = &r->configuration.servers[i];
        const struct raft_progress *p = &r->leader_state.progress[i];
        unsigned *led = tally_slot(t, s->id);
        if (s->id == r->id || s->role != RAFT_VOTER || led == NULL)
            continue;
        if (!p->recent_recv || p->match_index < r->commit_index)
            continue;
        if (*led < best_led) {
            best = s->id;
            best_led = *led;
        }
    }
    return best;
}

/*
 * One balancing round. Budget: at most BALANCE_MAX_MOVES transfers, each a
 * TimeoutNow RPC and an election of a caught-up voter (a few ms), so a round
 * costs little even with hundreds of groups; the timer repeats it until the
 * count is within ceil(groups / nodes). Every node runs the same rule on its
 * own view; only an overloaded node pushes, so two nodes never trade back
 * and forth.
 */
unsigned mraft_host_balance(struct mraft_host *h)
{
    struct tally t = {.n = 0};
    unsigned n_groups = 0;
    for (struct mraft_group *g = h->groups; g != NULL; g = g->next) {
        if (g->closing || g->raft->state == RAFT_UNAVAILABLE)
            continue;
        n_groups++;
        for (unsigned i = 0; i < g->raft->configuration.n; i++)
            if (g->raft->configuration.servers[i].role == RAFT_VOTER)
                tally_slot(&t, g->raft->configuration.servers[i].id);
        uint64_t leader = mraft_group_leader(g, NULL);
        unsigned *led = leader != 0 ? tally_slot(&t, leader) : NULL;
        if (led != NULL)
            (*led)++;
    }
    if (t.n == 0)
        return 0;
    unsigned target = (n_groups + t.n - 1) / t.n;
    unsigned *mine = tally_slot(&t, h->node_id);
    unsigned moves = 0;
    for (struct mraft_group *g = h->groups; g != NULL && mine != NULL; g = g->next) {
        if (*mine <= target || moves == BALANCE_MAX_MOVES)
            break;
        if (g->closing || !mraft_group_ready(g) || g->transfer_busy)
            continue;
        uint64_t to = pick_target(g, &t, target);
        if (to == 0 || mraft_group_transfer(g, to) != 0)
            continue;
        (*tally_slot(&t, to))++;
        (*mine)--;
        moves++;
    }
    if (moves > 0)
        mg_log(MG_LOG_INFO, "event=balance node=%llu moved=%u target=%u",
               (unsigned long long)h->node_id, moves, target);
    return moves;
}
