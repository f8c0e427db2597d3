/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-group glue between libraft 0.15 and a group's owner: the FSM
 * adapter (entry index at apply time, never re-applying what the engine
 * already covers, durable-aware snapshot descriptors, restore and replay of
 * the unflushed tail), the ready barrier of a new leader, the proposal queue
 * submitted in waves, the barrier-batched read gate and membership changes.
 * It owns the translation of RAFT_* codes into enum mg_err (STYLE.md 3). It
 * works on any struct raft, so unit tests run it over libraft's raft_fixture.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "raft"
#include "common/common.h"
#include "common/config.h"
#include "raft/internal.h"

_Static_assert(sizeof(struct raft_apply) <= sizeof(((struct mraft_propose *)0)->raft_req),
               "mraft_propose.raft_req too small for struct raft_apply");

int mraft__err(int raft_rv)
{
    switch (raft_rv) {
    case 0:
        return 0;
    case RAFT_NOTLEADER:
    case RAFT_LEADERSHIPLOST:
        return MG_ENOTLEADER;
    case RAFT_SHUTDOWN:
    case RAFT_CANCELED:
        return MG_ESHUTDOWN;
    case RAFT_NOSPACE:
        return MG_ENOSPC;
    case RAFT_NOMEM:
        return MG_ENOMEM;
    case RAFT_BUSY:
    case RAFT_TOOMANY:
    case RAFT_CANTCHANGE:
        return MG_EBUSY;
    case RAFT_CORRUPT:
    case RAFT_MALFORMED:
        return MG_ECORRUPT;
    case RAFT_BADID:
    case RAFT_DUPLICATEID:
    case RAFT_DUPLICATEADDRESS:
    case RAFT_BADROLE:
    case RAFT_INVALID:
    case RAFT_NOTFOUND:
    case RAFT_NAMETOOLONG:
    case RAFT_TOOBIG:
    case RAFT_CANTBOOTSTRAP:
        return MG_EINVALIDARGUMENT;
    case RAFT_IOERR:
    case RAFT_NOCONNECTION:
    case RAFT_UNAUTHORIZED:
        return MG_EIO;
    default:
        return MG_EINTERNAL;
    }
}

/* The reverse direction, for owner hook errors handed back to libraft. */
static int to_raft(int mg_rv)
{
    switch (mg_rv) {
    case MG_EBUSY:
        return RAFT_BUSY;
    case MG_ENOSPC:
        return RAFT_NOSPACE;
    case MG_ENOMEM:
        return RAFT_NOMEM;
    case MG_ECORRUPT:
        return RAFT_CORRUPT;
    default:
        return RAFT_IOERR;
    }
}

/* Entry at index in the in-memory log, or NULL. struct raft_log is public in
 * libraft 0.15's raft.h (it became private in 0.16): a circular buffer whose
 * first slot, entries[front], holds index offset + 1. */
const struct raft_entry *mraft__log_get(const struct raft *r, raft_index index)
{
    const struct raft_log *l = &r->log;
    size_t n = l->front <= l->back ? l->back - l->front : l->size - l->front + l->back;
    if (n == 0 || index <= l->offset || index > l->offset + n)
        return NULL;
    size_t pos = (l->front + (size_t)(index - l->offset - 1)) % l->size;
    return &l->entries[pos];
}

void mraft__put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

uint64_t mraft__get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Descriptor wire format: six little-endian u64: magic, index, term,
 * durable_index, checkpoint_id, reserved (0). buf->base is from raft_malloc. */
int mraft__desc_encode(const struct mraft_snapshot_desc *d, struct raft_buffer *buf)
{
    assert(d->index > 0);
    unsigned char *p = raft_malloc(MRAFT__DESC_SIZE);
    if (p == NULL)
        return RAFT_NOMEM;
    mraft__put64(p, MRAFT__DESC_MAGIC);
    mraft__put64(p + 8, d->index);
    mraft__put64(p + 16, d->term);
    mraft__put64(p + 24, d->durable_index);
    mraft__put64(p + 32, d->checkpoint_id);
    mraft__put64(p + 40, 0);
    buf->base = p;
    buf->len = MRAFT__DESC_SIZE;
    return 0;
}

/* Never asserts: the buffer comes from disk or the network. */
int mraft__desc_decode(const struct raft_buffer *buf, struct mraft_snapshot_desc *d)
{
    const unsigned char *p = buf->base;
    if (buf->len != MRAFT__DESC_SIZE || mraft__get64(p) != MRAFT__DESC_MAGIC)
        return MG_ECORRUPT;
    d->index = mraft__get64(p + 8);
    d->term = mraft__get64(p + 16);
    d->durable_index = mraft__get64(p + 24);
    d->checkpoint_id = mraft__get64(p + 32);
    return 0;
}

/* ---- FSM adapter ---------------------------------------------------------- */

static int replay(struct mraft_group *g);
static void deferred_push(struct mraft_group *g, uint64_t index, const void *buf, size_t len);

/* libraft 0.15 calls fsm->apply(index) while r->last_applied is index - 1
 * (replicationApply advances last_applied after the call). */
static int on_fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    struct mraft_group *g = fsm->data;
    uint64_t index = g->raft->last_applied + 1;
    *result = NULL;
    if (g->replay_to > g->applied) {
        int rv = replay(g); /* the unflushed tail goes first */
        if (rv != 0)
            return to_raft(rv);
    }
    if (index <= g->applied)
        return 0; /* the engine's durable state already covers it */
    if (g->install_pending) {
        deferred_push(g, index, buf->base, buf->len); /* after the install */
        return 0;
    }
    int rv = g->owner->apply(g->owner_data, index, buf->base, buf->len, result);
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=apply_failed group=%llu index=%llu err=%s",
               (unsigned long long)g->id, (unsigned long long)index, mg_err_name(rv));
        return to_raft(rv);
    }
    g->applied = index;
    return 0;
}

/* libraft 0.15 snapshots at last_applied on its own schedule. The descriptor
 * records the owner's durable index D, and trailing is raised to X - D so the
 * log keeps every entry the engine has not flushed (DESIGN.md 6: "log
 * truncation waits until the engine has flushed everything up to the snapshot
 * index"). libraft reads r->snapshot.trailing after this hook returns, both for
 * io->snapshot_put and for the in-memory logSnapshot. */
static int on_fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    struct mraft_group *g = fsm->data;
    struct raft *r = g->raft;
    if (g->install_pending)
        return RAFT_BUSY; /* the owner's state is behind libraft's; retried later */
    struct mraft_snapshot_desc d = {
        .index = r->snapshot.pending.index,
        .term = r->snapshot.pending.term,
        .durable_index = g->owner->durable_index(g->owner_data),
    };
    if (d.durable_index > g->applied)
        d.durable_index = g->applied; /* cannot have flushed what it never saw */
    if (g->owner->snapshot != NULL) {
        int rv = g->owner->snapshot(g->owner_data, d.durable_index, &d.checkpoint_id);
        if (rv != 0)
            return RAFT_BUSY; /* libraft retries after the next apply */
    }
    unsigned trailing = g->tuning.snapshot_trailing;
    if (d.index > d.durable_index && d.index - d.durable_index > trailing)
        trailing = (unsigned)(d.index - d.durable_index);
    raft_set_snapshot_trailing(r, trailing);

    struct raft_buffer *b = raft_malloc(sizeof(*b));
    if (b == NULL)
        return RAFT_NOMEM;
    int rv = mraft__desc_encode(&d, b);
    if (rv != 0) {
        raft_free(b);
        return rv;
    }
    *bufs = b;
    *n_bufs = 1;
    mg_log(MG_LOG_DEBUG, "event=snapshot group=%llu index=%llu durable=%llu trailing=%u",
           (unsigned long long)g->id, (unsigned long long)d.index,
           (unsigned long long)d.durable_index, trailing);
    return 0;
}

/* ---- out-of-band install, off the loop -------------------------------------
 *
 * libraft 0.15 restores synchronously inside its InstallSnapshot callback and
 * cannot take a "not yet": before calling fsm->restore it has already moved
 * its in-memory log to the snapshot (replicationInstallSnapshot's
 * logRestore), so when restore fails, the leader's retry is answered "have a
 * more recent snapshot", the follower goes on appending after the snapshot
 * index, and it never applies anything again (entries at or below the
 * snapshot index are gone; replicationApply finds NULL and stops) until a
 * restart. And fsm->apply may not fail either: on the heartbeat path
 * (replicationAppend with no new entries) an apply error makes the instance
 * unavailable.
 *
 * So restore always succeeds: the descriptor becomes the group's pending
 * install, the owner's install (and its fetch hook, on a libuv worker through
 * the host) runs when it can, and every entry libraft applies meanwhile is
 * copied into a deferred queue and handed to the owner, in order, right after
 * the install covered the snapshot. While an install is pending the group is
 * never ready (no proposal is submitted, no read is confirmed, so nothing is
 * acknowledged against state the owner does not have) and takes no snapshot.
 * A failed install or fetch (MG_EBUSY: no peer can serve it yet) is retried
 * from the tick every INSTALL_RETRY_MS. A newer InstallSnapshot while one is
 * pending replaces the target. A crash while pending restarts from the
 * persisted descriptor (replay's install fallback). */

#define INSTALL_RETRY_MS 500 /* between attempts of a failed install or fetch */

struct mraft__deferred {
    struct mraft__deferred *next;
    uint64_t index;
    size_t len;
    unsigned char data[]; /* the entry's payload */
};

static void deferred_drop_through(struct mraft_group *g, uint64_t index)
{
    while (g->deferred != NULL && g->deferred->index <= index) {
        struct mraft__deferred *e = g->deferred;
        g->deferred = e->next;
        mg_free(e);
    }
    if (g->deferred == NULL)
        g->deferred_tail = NULL;
}

static void deferred_push(struct mraft_group *g, uint64_t index, const void *buf, size_t len)
{
    struct mraft__deferred *e = mg_malloc(sizeof(*e) + len);
    e->next = NULL;
    e->index = index;
    e->len = len;
    memcpy(e->data, buf, len);
    if (g->deferred_tail != NULL)
        g->deferred_tail->next = e;
    else
        g->deferred = e;
    g->deferred_tail = e;
}

/* Has a fetch covering the pending descriptor completed? If not, start one
 * unless one runs or a failed one waits for its retry time. */
static bool fetched(struct mraft_group *g)
{
    const struct mraft_snapshot_desc *d = &g->install_desc;
    if (g->fetch_ready && g->fetch_covers >= d->index)
        return true;
    if (g->fetch_busy)
        return false;
    g->fetch_ready = false;
    g->fetch_desc = *d;
    if (g->host != NULL) {
        mraft__host_fetch(g); /* mraft__group_fetched continues */
        return false;
    }
    uint64_t covers = 0; /* fixture tests: inline */
    int rv = g->owner->fetch(g->owner_data, d, &covers);
    g->fetch_ready = rv == 0;
    g->fetch_covers = covers;
    return rv == 0 && covers >= d->index;
}

/* Try to complete the pending install now, then apply what was deferred.
 * Runs on the loop: with a fetch hook, install only swaps in what the worker
 * staged. */
static void install_try(struct mraft_group *g)
{
    struct raft *r = g->raft;
    if (!g->install_pending || g->closing || g->fetch_busy)
        return;
    if (r->io->time(r->io) < g->install_retry_at)
        return;
    if (!g->install_swapped) {
        if (g->owner->fetch != NULL && !fetched(g)) {
            if (!g->fetch_busy)
                g->install_retry_at = r->io->time(r->io) + INSTALL_RETRY_MS;
            return;
        }
        uint64_t applied = 0;
        int rv = g->owner->install(g->owner_data, &g->install_desc, &applied);
        g->fetch_ready = false; /* the staged checkpoint is used up either way */
        if (rv == 0 && applied < g->install_desc.index)
            rv = MG_EBUSY; /* the checkpoint must cover the snapshot */
        if (rv != 0) {
            mg_log(MG_LOG_WARN, "event=install_deferred group=%llu index=%llu err=%s",
                   (unsigned long long)g->id, (unsigned long long)g->install_desc.index,
                   mg_err_name(rv));
            g->install_retry_at = r->io->time(r->io) + INSTALL_RETRY_MS;
            return;
        }
        g->applied = applied;
        g->install_swapped = true;
        g->installs++;
    }
    unsigned n = 0;
    while (g->deferred != NULL) {
        struct mraft__deferred *e = g->deferred;
        if (e->index > g->applied) {
            void *result = NULL;
            int rv = g->owner->apply(g->owner_data, e->index, e->data, e->len, &result);
            if (rv != 0) { /* keep it and the rest; retried from the tick */
                mg_log(MG_LOG_ERROR, "event=apply_failed group=%llu index=%llu err=%s",
                       (unsigned long long)g->id, (unsigned long long)e->index,
                       mg_err_name(rv));
                g->install_retry_at = r->io->time(r->io) + INSTALL_RETRY_MS;
                return;
            }
            g->applied = e->index;
            n++;
        }
        g->deferred = e->next;
        mg_free(e);
    }
    g->deferred_tail = NULL;
    g->install_pending = false;
    g->install_swapped = false;
    mg_log(MG_LOG_INFO, "event=installed group=%llu index=%llu applied=%llu deferred=%u",
           (unsigned long long)g->id, (unsigned long long)g->install_desc.index,
           (unsigned long long)g->applied, n);
}

void mraft__group_fetched(struct mraft_group *g, int rv, uint64_t covers)
{
    g->fetch_busy = false;
    g->fetch_ready = rv == 0;
    g->fetch_covers = covers;
    mg_log(rv == 0 ? MG_LOG_INFO : MG_LOG_WARN,
           "event=fetched group=%llu index=%llu covers=%llu err=%s", (unsigned long long)g->id,
           (unsigned long long)g->fetch_desc.index, (unsigned long long)covers,
           rv == 0 ? "none" : mg_err_name(rv));
    if (rv != 0)
        g->install_retry_at = g->raft->io->time(g->raft->io) + INSTALL_RETRY_MS;
    install_try(g);
}

/* Two cases. During raft_start (g->starting) the descriptor is our own: the
 * engine reopens its durable state and the tail (applied, index] is replayed
 * from the log in mraft__group_started. Otherwise it is an InstallSnapshot
 * from the leader: it becomes the pending install (above) and restore
 * succeeds at once. On success the buffer is ours to free (libraft's
 * snapshotRestore transfers it). */
static int on_fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    struct mraft_group *g = fsm->data;
    struct mraft_snapshot_desc d;
    uint64_t applied = 0;
    int rv = mraft__desc_decode(buf, &d);
    if (rv != 0)
        return RAFT_MALFORMED;
    if (g->starting) {
        if (g->owner->restore != NULL)
            rv = g->owner->restore(g->owner_data, &d, &applied);
        else
            applied = g->owner->durable_index(g->owner_data);
        if (rv != 0)
            return to_raft(rv);
        g->replay_to = d.index;
        g->start_desc = d;
        g->applied = applied;
    } else {
        if (g->owner->install == NULL)
            return RAFT_BUSY; /* cannot install at all (single-voter owners) */
        if (!g->install_pending || d.index > g->install_desc.index) {
            g->install_desc = d;
            g->install_swapped = false; /* a newer one replaces the target */
        }
        g->install_pending = true;
        g->install_retry_at = 0;
        deferred_drop_through(g, g->install_desc.index); /* the snapshot covers them */
        mg_log(MG_LOG_INFO, "event=install_pending group=%llu index=%llu",
               (unsigned long long)g->id, (unsigned long long)g->install_desc.index);
        install_try(g); /* without a fetch hook this installs right here */
    }
    raft_free(buf->base);
    return 0;
}

void mraft__group_init(struct mraft_group *g, uint64_t id, const struct mraft_owner *owner,
                       void *owner_data, const struct mraft__tuning *t)
{
    assert(owner != NULL && owner->apply != NULL && owner->durable_index != NULL);
    memset(g, 0, sizeof(*g));
    g->id = id;
    g->owner = owner;
    g->owner_data = owner_data;
    g->tuning = *t;
    g->fsm.version = 1;
    g->fsm.data = g;
    g->fsm.apply = on_fsm_apply;
    g->fsm.snapshot = on_fsm_snapshot;
    g->fsm.restore = on_fsm_restore;
}

struct raft_fsm *mraft__group_fsm(struct mraft_group *g)
{
    return &g->fsm;
}

void mraft__group_attach(struct mraft_group *g, struct raft *r)
{
    g->raft = r;
    /* Everything at or below the engine's durable index is already applied. */
    g->applied = g->owner->durable_index(g->owner_data);
    raft_set_snapshot_threshold(r, g->tuning.snapshot_threshold);
    raft_set_snapshot_trailing(r, g->tuning.snapshot_trailing);
}

/* Gap (c), see README.md: libraft 0.15 keeps entries in a follower's
 * in-memory log after their disk write failed (fixed upstream in 857e17e), so
 * the follower later acknowledges or builds on entries that are not on disk;
 * and its uv writer keeps the failed bytes in the open segment's buffer, so a
 * later write would put them on disk again, shifting every later entry. A
 * leader's failed append truncates its in-memory log at that index.
 *
 * The host interposes on io->append and fences the group on the first failed
 * append (ENOSPC from segment preallocation or a short write, EIO): no
 * further append reaches the writer (wrapped_append fails them at once, so
 * raft_apply and raft_barrier fail and a follower's recvAppendEntries turns
 * the instance unavailable), and the host stops the group's libraft instance
 * from its check phase (mraft__host_kick), which fails every pending request;
 * the owner reopens the group to reload the log from disk. The process never
 * aborts. A unit-test hook (io_failure) replaces the fence. */
struct wrapped_append {
    struct raft_io_append mine;  /* handed to the real io */
    struct raft_io_append *req;  /* libraft's */
    raft_io_append_cb cb;        /* libraft's */
    struct mraft_group *g;       /* whose io */
    uint64_t index;              /* first entry's index */
};

static int fence_code(int raft_status)
{
    return raft_status == RAFT_NOSPACE ? MG_ENOSPC : MG_EIO;
}

static void on_wrapped_append(struct raft_io_append *mine, int status)
{
    struct wrapped_append *w = mine->data;
    struct mraft_group *g = w->g;
    struct raft_io_append *req = w->req;
    raft_io_append_cb cb = w->cb;
    uint64_t index = w->index;
    mg_free(w);
    if (status != 0 && status != RAFT_CANCELED && !g->closing) {
        g->n_io_failures++;
        if (g->io_failure != NULL) {
            g->io_failure(g, status);
        } else if (g->fence_err == 0) {
            g->fence_err = fence_code(status);
            mg_log(MG_LOG_ERROR, "event=append_failed group=%llu index=%llu raft=%s action=fence",
                   (unsigned long long)g->id, (unsigned long long)index,
                   raft_strerror(status));
            if (g->host != NULL)
                mraft__host_kick(g->host, g); /* stop it outside libraft's callbacks */
        }
        /* A leader's first failure truncated the in-memory log at its index;
         * handing libraft a failure for entries already gone would make it
         * truncate past the end of the log (0.15's removeSuffix underflows).
         * Its success path only releases entries that are no longer there. */
        if (index > raft_last_index(g->raft))
            status = 0;
    }
    cb(req, status);
}

static int wrapped_append(struct raft_io *io, struct raft_io_append *req,
                          const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
    struct raft *r = io->data;
    struct mraft_group *g = r->fsm->data;
    if (g->fence_err != 0)
        return to_raft(g->fence_err);
    struct wrapped_append *w = mg_malloc(sizeof(*w));
    w->req = req;
    w->cb = cb;
    w->g = g;
    /* Both libraft callers (appendLeader, replicationAppend) append the
     * entries to the in-memory log first: they are its last n. */
    w->index = raft_last_index(r) + 1 - n;
    w->mine.data = w;
    int rv = g->io_append(io, &w->mine, entries, n, on_wrapped_append);
    if (rv != 0)
        mg_free(w);
    return rv;
}

/* Gap (b) again: libraft 0.15's installSnapshotCb answers the leader through
 * follower_state.current_leader even when the follower has meanwhile moved to
 * a new term with no known leader: address NULL, and strlen(NULL) in the uv
 * send path (a crash seen in raft_chaos; upstream checks the state first,
 * 191a07e). Fail exactly that send: libraft's senders of such replies
 * (sendAppendEntriesResult) free the request on error and the leader retries.
 * Other replies carry the sender's address from the message and must pass
 * untouched: recvAppendEntries frees the entries again if its send fails. */
static int wrapped_send(struct raft_io *io, struct raft_io_send *req,
                        const struct raft_message *m, raft_io_send_cb cb)
{
    struct raft *r = io->data;
    struct mraft_group *g = r->fsm->data;
    if (m->server_address == NULL) {
        g->n_sends_dropped++;
        return RAFT_NOCONNECTION;
    }
    /* A new leader's first heartbeats pass here: have its ready barrier
     * appended in this loop iteration rather than at the next tick, so no
     * follower acknowledgement of an older-term entry can be counted first
     * (libraft 0.15 commits older-term entries by counting, 524f735). */
    if (r->state == RAFT_LEADER && g->ready_term != r->current_term &&
        g->ready_barrier_term == 0 && !g->kicked && g->host != NULL)
        mraft__host_kick(g->host, g);
    return g->io_send(io, req, m, cb);
}

/* libraft 0.15's uv backend fires its close callback from
 * uvMaybeFireCloseCb once its queues are empty, but that check does not
 * count segment writers whose handles are still closing (a segment leaves the
 * queue before its writer closes; a writer with threadpool writes in flight
 * closes only when they finish) nor peer streams being closed, and each of
 * those calls uvMaybeFireCloseCb again when it finishes, which fires the
 * callback again. Seen as a crash in raft's ioCloseCb (raft_free of a freed
 * r->address) about once in 15 runs of the unit tests. The wrapper passes the
 * first firing to libraft and swallows the others; the host keeps the io and
 * the group allocated for a while after the first (host.c, REAP_DELAY_MS). */
static void on_wrapped_close(struct raft_io *io)
{
    struct raft *r = io->data;
    struct mraft_group *g = r->fsm->data;
    if (g->io_close_fired++ > 0) {
        mg_log(MG_LOG_INFO, "event=late_close_callback group=%llu n=%u",
               (unsigned long long)g->id, g->io_close_fired);
        return;
    }
    g->io_close_cb(io);
}

static void wrapped_close(struct raft_io *io, raft_io_close_cb cb)
{
    struct raft *r = io->data;
    struct mraft_group *g = r->fsm->data;
    g->io_close_cb = cb;
    g->io_close(io, on_wrapped_close);
}

/* Call after raft_init (which sets io->data to the raft instance). */
void mraft__group_wrap_io(struct mraft_group *g)
{
    assert(g->raft->io->data == g->raft && g->raft->fsm == &g->fsm);
    g->io_append = g->raft->io->append;
    g->raft->io->append = wrapped_append;
    g->io_send = g->raft->io->send;
    g->raft->io->send = wrapped_send;
    g->io_close = g->raft->io->close;
    g->raft->io->close = wrapped_close;
}

int mraft__group_start(struct mraft_group *g)
{
    g->starting = true;
    int rv = raft_start(g->raft);
    g->starting = false;
    if (rv != 0) {
        mg_log(MG_LOG_ERROR, "event=start_failed group=%llu raft=\"%s\"",
               (unsigned long long)g->id, raft_errmsg(g->raft));
        return mraft__err(rv);
    }
    return mraft__group_started(g);
}

/* Replay (applied, replay_to] from the loaded log: these entries are covered
 * by the snapshot libraft restored, so libraft will not apply them, but the
 * engine never flushed them. If the log lacks them (an InstallSnapshot was
 * persisted but its out-of-band fetch failed before a crash), fall back to the
 * install hook. Runs at the first apply inside raft_start (libraft 0.15
 * applies entries above the snapshot there when it is the only voter), or
 * right after raft_start returns, whichever comes first. */
static int replay(struct mraft_group *g)
{
    struct raft *r = g->raft;

    uint64_t replayed = 0;
    while (g->applied < g->replay_to) {
        uint64_t index = g->applied + 1;
        const struct raft_entry *e = mraft__log_get(r, index);
        if (e == NULL) {
            uint64_t applied = 0, covers = 0;
            int rv = g->owner->install != NULL ? 0 : MG_EIO;
            if (rv == 0 && g->owner->fetch != NULL) /* start-up: on the loop */
                rv = g->owner->fetch(g->owner_data, &g->start_desc, &covers);
            if (rv == 0)
                rv = g->owner->install(g->owner_data, &g->start_desc, &applied);
            if (rv == 0 && applied < g->replay_to)
                rv = MG_EIO;
            if (rv == MG_EBUSY) {
                /* No peer can serve a checkpoint yet (an owner whose copy runs over
                 * the network, on the loop): the descriptor becomes the pending
                 * install, as for an InstallSnapshot, and entries wait for it. */
                g->install_desc = g->start_desc;
                g->install_pending = true;
                g->install_retry_at = 0;
                mg_log(MG_LOG_WARN, "event=install_pending group=%llu index=%llu at=start",
                       (unsigned long long)g->id, (unsigned long long)g->start_desc.index);
                break;
            }
            if (rv != 0) {
                mg_log(MG_LOG_ERROR, "event=replay_gap group=%llu index=%llu err=%s",
                       (unsigned long long)g->id, (unsigned long long)index, mg_err_name(rv));
                return rv;
            }
            g->applied = applied;
            break;
        }
        if (e->type == RAFT_COMMAND) {
            void *result = NULL;
            int rv = g->owner->apply(g->owner_data, index, e->buf.base, e->buf.len, &result);
            if (rv != 0)
                return rv;
            replayed++;
        }
        g->applied = index;
    }
    if (replayed > 0)
        mg_log(MG_LOG_INFO, "event=replayed group=%llu entries=%llu through=%llu",
               (unsigned long long)g->id, (unsigned long long)replayed,
               (unsigned long long)g->applied);
    g->replay_to = 0;
    return 0;
}

int mraft__group_started(struct mraft_group *g)
{
    return replay(g);
}

/* ---- leadership and proposals --------------------------------------------- */

static bool is_ready(const struct mraft_group *g)
{
    const struct raft *r = g->raft;
    return r->state == RAFT_LEADER && r->transfer == NULL && g->ready_term == r->current_term &&
           !g->install_pending;
}

static uint64_t leader_hint(struct mraft_group *g)
{
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(g->raft, &id, &addr);
    return id;
}

static void flush(struct mraft_group *g);

/* The status a failed request reports: shutdown, the fence, or libraft's. */
static int fail_status(const struct mraft_group *g, int raft_status)
{
    if (g->closing)
        return MG_ESHUTDOWN;
    if (g->fence_err != 0)
        return g->fence_err;
    return mraft__err(raft_status);
}

/* Success runs inside libraft's replicationApply (applyCommand fires the
 * callback after fsm->apply, before last_applied moves on; nothing there uses
 * the log after the callback), so the next wave can be appended right here:
 * raft_apply only appends to the in-memory log and queues the write. Failures
 * come from appendLeaderCb before it truncates the log, where appending would
 * be undone: those wait for the tick. */
const uint64_t mraft_latency_bounds_us[MRAFT_LATENCY_BUCKETS - 1] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
};

static void count_commit(struct mraft_group *g, const struct mraft_propose *req)
{
    uint64_t us = (uv_hrtime() - req->start_ns) / 1000;
    unsigned i = 0;
    while (i < MRAFT_LATENCY_BUCKETS - 1 && us > mraft_latency_bounds_us[i])
        i++;
    g->lat_bucket[i]++;
    g->lat_sum_us += us;
    g->n_commits++;
}

static void on_applied(struct raft_apply *ar, int status, void *result)
{
    struct mraft_propose *req = ar->data;
    struct mraft_group *g = req->g;
    assert(g->n_inflight > 0);
    g->n_inflight--;
    int rv = status == 0 ? 0 : fail_status(g, status);
    if (rv == 0)
        count_commit(g, req);
    else
        g->n_failed++;
    req->cb(req, rv, ar->index, rv == 0 ? g->raft->id : leader_hint(g), result);
    if (status == 0 && g->n_inflight == 0 && !g->closing)
        flush(g); /* the wave completed: the queued proposals go out now */
}

static int submit(struct mraft_group *g, struct mraft_propose *req)
{
    struct raft_apply *ar = (struct raft_apply *)req->raft_req;
    struct raft_buffer b = {req->buf, req->len};
    memset(ar, 0, sizeof(*ar));
    ar->data = req;
    int rv = raft_apply(g->raft, ar, &b, 1, on_applied);
    if (rv != 0)
        return mraft__err(rv);
    req->buf = NULL; /* owned by libraft now */
    g->n_inflight++;
    return 0;
}

static void fail_propose(struct mraft_propose *req, int status, uint64_t hint)
{
    req->g->n_failed++;
    raft_free(req->buf);
    req->buf = NULL;
    req->cb(req, status, 0, hint, NULL);
}

/*
 * Submit the queued proposals as one wave once the previous wave committed.
 * Budget: a wave is at most max_pending entries (1024 by default, each a
 * separate raft_apply so each gets its own index and callback). Waiting for
 * the wave keeps the leader's last_stored equal to what followers are asked to
 * match, so libraft 0.15 (which computes commit only at last_stored) commits
 * the whole wave on the last acknowledgement instead of stalling while
 * proposals keep arriving.
 */
static void flush(struct mraft_group *g)
{
    while (g->q_head != NULL && g->n_inflight == 0 && is_ready(g)) {
        unsigned budget = g->tuning.max_pending;
        while (g->q_head != NULL && budget-- > 0) {
            struct mraft_propose *req = g->q_head;
            g->q_head = req->next;
            if (g->q_head == NULL)
                g->q_tail = NULL;
            g->n_queued--;
            int rv = submit(g, req);
            if (rv != 0)
                fail_propose(req, rv, leader_hint(g));
        }
    }
}

static int propose(struct mraft_group *g, struct mraft_propose *req, const void *buf,
                   size_t len, mraft_propose_cb cb, uint64_t *hint, int reserve);

int mraft_group_propose(struct mraft_group *g, struct mraft_propose *req, const void *buf,
                        size_t len, mraft_propose_cb cb, uint64_t *hint)
{
    return propose(g, req, buf, len, cb, hint, 0);
}

int mraft_group_propose_reserve(struct mraft_group *g, struct mraft_propose *req,
                                const void *buf, size_t len, mraft_propose_cb cb, uint64_t *hint)
{
    return propose(g, req, buf, len, cb, hint, 1);
}

static int propose(struct mraft_group *g, struct mraft_propose *req, const void *buf,
                   size_t len, mraft_propose_cb cb, uint64_t *hint, int reserve)
{
    assert(req != NULL && cb != NULL);
    if (g->closing)
        return MG_ESHUTDOWN;
    /* libraft 0.15's uv writer stores entry data unpadded but its segment reader assumes
     * every entry's data is padded to 8 bytes: an odd length reads back as a short read and
     * the group cannot restart. Refuse it rather than write an unreadable log. */
    if (len == 0 || len % 8 != 0)
        return MG_EINVALIDARGUMENT;
    if (g->fence_err != 0)
        return g->fence_err;
    if (g->raft->state != RAFT_LEADER || g->raft->transfer != NULL) {
        if (hint != NULL)
            *hint = leader_hint(g);
        return MG_ENOTLEADER;
    }
    if (g->n_queued >= g->tuning.max_pending)
        return MG_EBUSY;
    if (g->host != NULL && mraft__host_admit(g->host, len, reserve) != 0) {
        g->n_refused_nospace++;
        return MG_ENOSPC;
    }
    req->cb = cb;
    req->g = g;
    req->len = len;
    req->start_ns = uv_hrtime();
    req->next = NULL;
    req->buf = raft_malloc(len);
    memcpy(req->buf, buf, len);
    if (g->q_head == NULL && g->n_inflight == 0 && is_ready(g)) {
        int rv = submit(g, req);
        if (rv != 0) {
            raft_free(req->buf);
            req->buf = NULL;
        }
        return rv;
    }
    if (g->q_tail != NULL)
        g->q_tail->next = req;
    else
        g->q_head = req;
    g->q_tail = req;
    g->n_queued++;
    return 0;
}

/* ---- reads ----------------------------------------------------------------- */

/*
 * Read lease. Every committed read barrier proves that a majority of the
 * voters received an AppendEntries of this leader's term sent after the
 * barrier was appended (at io time read_barrier_at). libraft 0.15 makes a
 * follower that has heard from a leader refuse RequestVote (recv_request_vote.c,
 * has_leader, Raft thesis 4.2.3) until its own election timer, reset by every
 * AppendEntries and at least election_timeout long, expires; the only
 * exception is a leadership transfer (disrupt_leader), which this leader
 * starts itself. So no other node can win an election of a later term before
 * read_barrier_at + election_timeout by the clocks of that majority, and this
 * leader, still leader of the same term with no transfer running, may confirm
 * reads on its own until then. The clock bound: the lease is half the election
 * timeout (MRAFT__LEASE_DIVISOR), which covers io time lagging real time by a
 * loop iteration (libuv's cached uv_now: a blocked loop makes "now" older, so
 * the lease looks longer than it is), and a rate difference between the
 * nodes' monotonic clocks of up to 50% (real clocks differ by ~1e-4).
 * A lease read is confirmed at once and its callback runs at the next tick or
 * host check (never inside mraft_group_read). A read that finds less than half
 * the lease left also starts a renewing barrier. MG_RAFT_LEASE_MS (a test knob:
 * 0 disables the lease, reads wait for a barrier as without it) overrides the
 * length; it exists to show the deposed-leader test fails with a lease longer
 * than the election timeout.
 */
#define MRAFT__LEASE_DIVISOR 2

static raft_time lease_ms(const struct mraft_group *g)
{
    static int64_t knob = -2;
    if (knob == -2)
        knob = getenv("MG_RAFT_LEASE_MS") != NULL ? (int64_t)mg_env_u64("MG_RAFT_LEASE_MS", 0)
                                                  : -1;
    if (knob >= 0)
        return (raft_time)knob;
    return g->raft->election_timeout / MRAFT__LEASE_DIVISOR;
}

/* True when this leader may confirm a read now without a barrier. */
static bool lease_valid(struct mraft_group *g, raft_time now)
{
    struct raft *r = g->raft;
    return r->state == RAFT_LEADER && r->transfer == NULL && !g->transfer_busy &&
           !g->install_pending && g->lease_term != 0 && g->lease_term == r->current_term &&
           g->ready_term == r->current_term && now < g->lease_until;
}

/* Run the callbacks of the reads the lease confirmed. */
static void lease_drain(struct mraft_group *g)
{
    struct mraft_read *list = g->l_head;
    g->l_head = g->l_tail = NULL;
    while (list != NULL) {
        struct mraft_read *req = list;
        list = req->next;
        g->n_reads--;
        req->cb(req, 0);
    }
}

static void read_kick(struct mraft_group *g);

static void on_read_barrier(struct raft_barrier *b, int status)
{
    struct mraft_group *g = b->data;
    struct raft *r = g->raft;
    struct mraft_read *list = g->r_inflight;
    bool ok = status == 0 && r->state == RAFT_LEADER && r->current_term == g->read_term;
    int rv = ok ? 0 : fail_status(g, RAFT_NOTLEADER);
    g->r_inflight = NULL;
    g->read_barrier_busy = false;
    if (ok && !g->transfer_busy && r->transfer == NULL && lease_ms(g) > 0) {
        g->lease_term = g->read_term;
        g->lease_until = g->read_barrier_at + lease_ms(g);
    }
    while (list != NULL) {
        struct mraft_read *req = list;
        list = req->next;
        g->n_reads--;
        req->cb(req, rv);
    }
    if (status == 0)
        read_kick(g); /* reads queued meanwhile get their barrier now, not at the tick */
}

/* Start one barrier for every read queued so far (the batch); renew (also with no read
 * queued) when renew is set. */
static void read_kick_renew(struct mraft_group *g, bool renew)
{
    struct raft *r = g->raft;
    if (g->read_barrier_busy || (g->r_head == NULL && !renew) || g->closing ||
        g->install_pending)
        return;
    if (r->state != RAFT_LEADER || r->transfer != NULL)
        return;
    memset(&g->read_barrier, 0, sizeof(g->read_barrier));
    g->read_barrier.data = g;
    if (raft_barrier(r, &g->read_barrier, on_read_barrier) != 0)
        return; /* retried by the next tick */
    g->read_barrier_busy = true;
    g->read_term = r->current_term;
    g->read_barrier_at = r->io->time(r->io);
    g->r_inflight = g->r_head;
    g->r_head = g->r_tail = NULL;
}

static void read_kick(struct mraft_group *g)
{
    read_kick_renew(g, false);
}

int mraft_group_read(struct mraft_group *g, struct mraft_read *req, mraft_read_cb cb,
                     uint64_t *hint)
{
    assert(req != NULL && cb != NULL);
    if (g->closing)
        return MG_ESHUTDOWN;
    if (g->fence_err != 0)
        return g->fence_err;
    if (g->raft->state != RAFT_LEADER || g->raft->transfer != NULL) {
        if (hint != NULL)
            *hint = leader_hint(g);
        return MG_ENOTLEADER;
    }
    if (g->n_reads >= MRAFT__MAX_READS)
        return MG_EBUSY;
    req->cb = cb;
    req->next = NULL;
    raft_time now = g->raft->io->time(g->raft->io);
    if (lease_valid(g, now)) {
        if (g->l_tail != NULL)
            g->l_tail->next = req;
        else
            g->l_head = req;
        g->l_tail = req;
        g->n_reads++;
        if (g->host != NULL && !g->kicked)
            mraft__host_kick(g->host, g); /* callbacks at this iteration's check */
        if (g->lease_until - now < lease_ms(g) / 2)
            read_kick_renew(g, true);
        return 0;
    }
    if (g->r_tail != NULL)
        g->r_tail->next = req;
    else
        g->r_head = req;
    g->r_tail = req;
    g->n_reads++;
    read_kick(g);
    return 0;
}

/* ---- ready barrier and the tick -------------------------------------------- */

static void on_ready_barrier(struct raft_barrier *b, int status)
{
    struct mraft_group *g = b->data;
    struct raft *r = g->raft;
    raft_term term = g->ready_barrier_term;
    g->ready_barrier_term = 0;
    if (status == 0 && r->state == RAFT_LEADER && r->current_term == term) {
        g->ready_term = term;
        mg_log(MG_LOG_DEBUG, "event=leader_ready group=%llu term=%llu",
               (unsigned long long)g->id, (unsigned long long)term);
        flush(g);
    }
}

/* Fail what waits in our own queues (not yet handed to libraft). */
void mraft__group_fail_queued(struct mraft_group *g, int status)
{
    uint64_t hint = status == MG_ENOTLEADER ? leader_hint(g) : 0;
    while (g->q_head != NULL) {
        struct mraft_propose *req = g->q_head;
        g->q_head = req->next;
        g->n_queued--;
        fail_propose(req, status, hint);
    }
    g->q_tail = NULL;
    while (g->r_head != NULL) {
        struct mraft_read *req = g->r_head;
        g->r_head = req->next;
        g->n_reads--;
        req->cb(req, status);
    }
    g->r_tail = NULL;
    /* Confirmed under the lease before this: their answer stands (see "Read lease"). */
    lease_drain(g);
}

/* libraft 0.15 has no state-change callback: poll. Called every tick_ms by
 * the host and after every fixture step by the unit tests. */
void mraft__group_tick(struct mraft_group *g)
{
    struct raft *r = g->raft;
    if (g->closing || r->state == RAFT_UNAVAILABLE)
        return;
    install_try(g);
    lease_drain(g);
    if (r->state != RAFT_LEADER) {
        if (g->q_head != NULL || g->r_head != NULL)
            mraft__group_fail_queued(g, g->fence_err != 0 ? g->fence_err : MG_ENOTLEADER);
        /* Gap (b), see README.md: libraft 0.15 lets a follower become a
         * candidate while it installs a snapshot (fixed upstream in 4fbd3c0
         * by resetting the election timer). Do the same from the tick. */
        if (r->state == RAFT_FOLLOWER && r->snapshot.put.data != NULL &&
            !g->tuning.no_install_guard)
            r->election_timer_start = r->io->time(r->io);
        return;
    }
    if (g->ready_term != r->current_term && g->ready_barrier_term == 0 && r->transfer == NULL) {
        memset(&g->ready_barrier, 0, sizeof(g->ready_barrier));
        g->ready_barrier.data = g;
        if (raft_barrier(r, &g->ready_barrier, on_ready_barrier) == 0)
            g->ready_barrier_term = r->current_term;
    }
    flush(g);
    read_kick(g);
}

void mraft__group_closing(struct mraft_group *g)
{
    g->closing = true;
    mraft__group_fail_queued(g, MG_ESHUTDOWN);
    deferred_drop_through(g, UINT64_MAX);
}

/* ---- queries ---------------------------------------------------------------- */

uint64_t mraft_group_id(const struct mraft_group *g)
{
    return g->id;
}

enum mraft_role mraft_group_role(struct mraft_group *g)
{
    switch (raft_state(g->raft)) {
    case RAFT_FOLLOWER:
        return MRAFT_FOLLOWER;
    case RAFT_CANDIDATE:
        return MRAFT_CANDIDATE;
    case RAFT_LEADER:
        return MRAFT_LEADER;
    default:
        return MRAFT_UNAVAILABLE;
    }
}

bool mraft_group_ready(struct mraft_group *g)
{
    return !g->closing && is_ready(g);
}

uint64_t mraft_group_leader(struct mraft_group *g, const char **address)
{
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader(g->raft, &id, &addr);
    if (address != NULL)
        *address = addr;
    return id;
}

uint64_t mraft_group_applied(struct mraft_group *g)
{
    return g->applied;
}

struct raft *mraft_group_raft(struct mraft_group *g)
{
    return g->raft;
}

void mraft_group_stats_get(struct mraft_group *g, struct mraft_group_stats *out)
{
    struct raft *r = g->raft;
    memset(out, 0, sizeof(*out));
    out->inflight = g->n_inflight;
    out->queued = g->n_queued;
    out->commits = g->n_commits;
    out->failed = g->n_failed;
    out->refused_nospace = g->n_refused_nospace;
    memcpy(out->latency_bucket, g->lat_bucket, sizeof(out->latency_bucket));
    out->latency_count = g->n_commits;
    out->latency_sum_us = g->lat_sum_us;
    out->applied_index = g->applied;
    out->durable_index = g->owner->durable_index(g->owner_data);
    out->commit_index = r->commit_index;
    out->last_index = raft_last_index(r);
    out->snapshot_index = r->log.snapshot.last_index;
    out->log_bytes = g->host != NULL ? mraft__host_log_bytes(g) : 0;
    out->fence_err = g->fence_err;
    out->installing = g->install_pending;
    out->installs = g->installs;
    out->role = mraft_group_role(g);
    out->ready = mraft_group_ready(g);
    out->term = r->current_term;
    out->leader_id = mraft_group_leader(g, NULL);
}

/* ---- membership and transfer ------------------------------------------------- */

static void on_change(struct raft_change *c, int status)
{
    struct mraft_group *g = c->data;
    if (status == 0 && g->change_promote != 0 && !g->closing) {
        raft_id id = g->change_promote;
        g->change_promote = 0;
        status = raft_assign(g->raft, &g->change, id, g->change_role, on_change);
        if (status == 0)
            return;
    }
    int rv = status == 0 ? 0 : fail_status(g, status);
    g->change_busy = false;
    g->change_promote = 0;
    g->change_cb(g->change_data, rv);
}

static int change_begin(struct mraft_group *g, mraft_change_cb cb, void *data)
{
    if (g->closing)
        return MG_ESHUTDOWN;
    if (g->raft->state != RAFT_LEADER)
        return MG_ENOTLEADER;
    if (g->change_busy)
        return MG_EBUSY;
    memset(&g->change, 0, sizeof(g->change));
    g->change.data = g;
    g->change_cb = cb;
    g->change_data = data;
    return 0;
}

int mraft_group_add_voter(struct mraft_group *g, uint64_t id, const char *address,
                          mraft_change_cb cb, void *data)
{
    int rv = change_begin(g, cb, data);
    if (rv != 0)
        return rv;
    rv = raft_add(g->raft, &g->change, id, address, on_change);
    if (rv != 0)
        return mraft__err(rv);
    g->change_busy = true;
    g->change_promote = id;
    g->change_role = RAFT_VOTER;
    return 0;
}

unsigned mraft_group_members(struct mraft_group *g, struct mraft_member *out, unsigned max)
{
    if (g->raft == NULL)
        return 0;
    const struct raft_configuration *c = &g->raft->configuration;
    unsigned n = 0;
    for (unsigned i = 0; i < c->n && n < max; i++) {
        out[n].id = c->servers[i].id;
        out[n].role = c->servers[i].role == RAFT_VOTER     ? MRAFT_MEMBER_VOTER
                      : c->servers[i].role == RAFT_STANDBY ? MRAFT_MEMBER_STANDBY
                                                           : MRAFT_MEMBER_SPARE;
        n++;
    }
    return n;
}

int mraft_group_assign(struct mraft_group *g, uint64_t id, const char *address,
                       enum mraft_member_role role, mraft_change_cb cb, void *data)
{
    int rv = change_begin(g, cb, data);
    if (rv != 0)
        return rv;
    int want = role == MRAFT_MEMBER_VOTER     ? RAFT_VOTER
               : role == MRAFT_MEMBER_STANDBY ? RAFT_STANDBY
                                              : RAFT_SPARE;
    const struct raft_server *srv = NULL;
    for (unsigned i = 0; i < g->raft->configuration.n; i++)
        if (g->raft->configuration.servers[i].id == id)
            srv = &g->raft->configuration.servers[i];
    if (srv != NULL && srv->role == want)
        return MG_EINVALIDARGUMENT;
    if (srv == NULL) {
        if (address == NULL)
            return MG_EINVALIDARGUMENT;
        rv = raft_add(g->raft, &g->change, id, address, on_change); /* a spare first */
        if (rv != 0)
            return mraft__err(rv);
        g->change_busy = true;
        g->change_promote = want != RAFT_SPARE ? id : 0;
        g->change_role = want;
        return 0;
    }
    rv = raft_assign(g->raft, &g->change, id, want, on_change);
    if (rv != 0)
        return mraft__err(rv);
    g->change_busy = true;
    return 0;
}

int mraft_group_remove_voter(struct mraft_group *g, uint64_t id, mraft_change_cb cb, void *data)
{
    int rv = change_begin(g, cb, data);
    if (rv != 0)
        return rv;
    rv = raft_remove(g->raft, &g->change, id, on_change);
    if (rv != 0)
        return mraft__err(rv);
    g->change_busy = true;
    return 0;
}

static void on_transfer(struct raft_transfer *t)
{
    struct mraft_group *g = t->data;
    g->transfer_busy = false;
}

int mraft_group_transfer(struct mraft_group *g, uint64_t id)
{
    if (g->closing)
        return MG_ESHUTDOWN;
    if (g->raft->state != RAFT_LEADER)
        return MG_ENOTLEADER;
    if (g->transfer_busy || g->raft->transfer != NULL)
        return MG_EBUSY;
    memset(&g->transfer, 0, sizeof(g->transfer));
    g->transfer.data = g;
    /* The target's election disrupts the followers' leader (disrupt_leader): no lease past
     * this point, whatever becomes of the transfer. */
    g->lease_term = 0;
    g->lease_until = 0;
    int rv = raft_transfer(g->raft, &g->transfer, id, on_transfer);
    if (rv != 0)
        return mraft__err(rv);
    g->transfer_busy = true;
    return 0;
}
