/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internals of raft/ shared by its files and by tests/unit/raft (compare
 * h2o's http2_internal.h). A struct mraft_group is one libraft instance plus
 * the glue that turns it into the contract of raft/raft.h: the FSM adapter
 * (apply index, skip-already-applied, durable-aware snapshots, descriptor
 * restore and tail replay), the ready barrier, the proposal queue, the
 * barrier-batched read gate and membership. The glue works on any struct raft:
 * the host runs it over libraft's uv I/O, the unit tests over the in-memory
 * raft_fixture (mraft__group_init / _attach / _started / _tick).
 */
#ifndef MG_RAFT_INTERNAL_H
#define MG_RAFT_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include <raft.h>
#include <raft/uv.h>

#include "raft/raft.h"

#define MRAFT__DESC_MAGIC 0x3130435344474d4dULL /* "MMGDSC01" little endian */
#define MRAFT__DESC_SIZE 48                     /* magic + 5 u64 */
#define MRAFT__MAX_READS 4096                   /* bound on queued reads per group */
#define MRAFT__ADDR_MAX 64                      /* "a.b.c.d:port" plus slack */

struct mraft__tuning {
    unsigned snapshot_threshold; /* entries between snapshots */
    unsigned snapshot_trailing;  /* minimum trailing entries kept */
    unsigned max_pending;        /* bound on queued proposals */
    bool no_install_guard;       /* tests only: disable the gap-(b) workaround */
};

struct mraft__conn;
struct mraft__deferred;
struct mraft__net;

/* One group's view of the shared listener: a struct raft_uv_transport whose
 * connect() writes our preamble and whose listen() registers with the net. */
struct mraft__transport {
    struct raft_uv_transport iface;  /* handed to raft_uv_init; iface.data is libraft's */
    struct mraft__net *net;          /* shared listener */
    uint64_t group_id;               /* named in every preamble */
    raft_id id;                      /* this node */
    char address[MRAFT__ADDR_MAX];   /* this node's address */
    raft_uv_accept_cb accept_cb;     /* set by listen(); NULL before */
    struct mraft__conn *connecting;  /* outgoing connects in progress */
    bool closing;                    /* close() called */
    raft_uv_transport_close_cb close_cb; /* fired when connecting is empty */
    uv_timer_t defer;                /* makes close_cb asynchronous */
    bool defer_open;                 /* defer handle initialized and not closed */
};

/* The shared listener. lookup maps a group id to its transport (or NULL). */
struct mraft__net {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening;
    struct mraft__incoming *incoming;  /* accepted, preamble not read yet */
    unsigned n_incoming;               /* their number (bounded) */
    struct mraft__transport *(*lookup)(struct mraft__net *net, uint64_t group_id);
    void *data;                        /* the host */
    void (*closed_cb)(struct mraft__net *net);
};

struct mraft_group {
    struct mraft_host *host;            /* NULL when attached to a fixture */
    struct mraft_group *next;           /* host's list */
    uint64_t id;                        /* group id */
    const struct mraft_owner *owner;    /* state machine hooks */
    void *owner_data;                   /* their argument */
    struct raft *raft;                  /* &raft_storage or a fixture server's */
    struct raft raft_storage;           /* used by the host */
    struct raft_io io;                  /* libraft uv I/O (host only) */
    bool io_init;                       /* io needs raft_uv_close */
    struct raft_fsm fsm;                /* adapter, fsm.data = this */
    struct mraft__transport transport;  /* host only */
    struct mraft__tuning tuning;        /* knobs */
    uint64_t applied;                   /* highest index given to/covered by owner */
    bool starting;                      /* inside raft_start */
    uint64_t replay_to;                 /* snapshot index restored at start, 0 if none */
    struct mraft_snapshot_desc start_desc; /* the descriptor restored at start */
    /* pending out-of-band install (core.c) and its fetch (host.c worker) */
    bool install_pending;               /* restored a leader's descriptor, not installed */
    struct mraft_snapshot_desc install_desc; /* what must be installed */
    bool install_swapped;               /* install done, deferred entries not all applied */
    uint64_t install_retry_at;          /* io->time of the next attempt after a failure */
    struct mraft__deferred *deferred, *deferred_tail; /* entries applied meanwhile */
    uint64_t installs;                  /* completed installs */
    uv_work_t fetch_work;               /* request storage */
    struct mraft_snapshot_desc fetch_desc; /* what the running/last fetch is for */
    bool fetch_busy;                    /* a fetch runs on a worker */
    bool fetch_ready;                   /* the last fetch succeeded, not installed yet */
    uint64_t fetch_covers;              /* index its checkpoint covers */
    int fetch_rv;                       /* worker's result, read in the after callback */
    uint64_t fetch_rv_covers;           /* worker's covers, likewise */
    /* leadership */
    raft_term ready_term;               /* term whose barrier committed, 0 if none */
    raft_term ready_barrier_term;       /* term of the in-flight ready barrier, 0 if none */
    bool kicked;                        /* new leader seen by wrapped_send: tick at check */
    struct raft_barrier ready_barrier;  /* request storage */
    /* proposals: queue waits for readiness or for the in-flight wave */
    struct mraft_propose *q_head, *q_tail;
    unsigned n_queued;
    unsigned n_inflight;
    /* reads */
    struct mraft_read *r_head, *r_tail; /* waiting for the next barrier */
    unsigned n_reads;
    struct mraft_read *r_inflight;      /* covered by read_barrier */
    bool read_barrier_busy;             /* read_barrier submitted */
    raft_term read_term;                /* term read_barrier was appended in */
    struct raft_barrier read_barrier;   /* request storage */
    raft_time read_barrier_at;          /* io time read_barrier was appended */
    /* read lease (core.c "Read lease"): reads confirmed without a barrier of their own */
    raft_term lease_term;               /* term of the lease, 0 if none */
    raft_time lease_until;              /* io time the lease ends */
    struct mraft_read *l_head, *l_tail; /* confirmed under the lease, callback not run yet */
    /* membership and transfer */
    struct raft_change change;          /* request storage */
    bool change_busy;                   /* a change is running */
    uint64_t change_promote;            /* id to promote after the add, 0 if none */
    int change_role;                    /* its role then (RAFT_VOTER / RAFT_STANDBY) */
    mraft_change_cb change_cb;          /* user callback */
    void *change_data;                  /* its argument */
    struct raft_transfer transfer;      /* request storage */
    bool transfer_busy;                 /* a transfer is running */
    /* disk failure (gap-(c) workaround and fence, core.c) */
    int fence_err;                      /* MG_ENOSPC/MG_EIO after a failed append, else 0 */
    bool stopping;                      /* fenced: raft_close called by the host */
    bool raft_closed;                   /* libraft instance closed and its io released */
    int (*io_append)(struct raft_io *, struct raft_io_append *, const struct raft_entry[],
                     unsigned, raft_io_append_cb); /* libraft io's own append */
    void (*io_failure)(struct mraft_group *g, int status); /* tests; NULL: fence */
    int (*io_send)(struct raft_io *, struct raft_io_send *, const struct raft_message *,
                   raft_io_send_cb);  /* libraft io's own send */
    void (*io_close)(struct raft_io *, raft_io_close_cb); /* libraft io's own close */
    raft_io_close_cb io_close_cb;       /* libraft's callback for it */
    unsigned io_close_fired;            /* times the io fired it (core.c: > 1 happens) */
    uv_timer_t reap;                    /* host: delays releasing the io after close */
    unsigned n_sends_dropped;           /* replies with no leader to go to */
    /* stats (struct mraft_group_stats) */
    uint64_t n_commits;                 /* proposals acked with status 0 */
    uint64_t n_failed;                  /* accepted proposals failed */
    uint64_t n_refused_nospace;         /* refused by disk-full admission */
    uint64_t lat_bucket[MRAFT_LATENCY_BUCKETS]; /* commit latency histogram */
    uint64_t lat_sum_us;                /* and its sum */
    uint64_t log_bytes;                 /* last directory scan (host.c) */
    uint64_t log_bytes_at_ms;           /* uv_now of that scan; 0: never */
    unsigned n_io_failures;             /* failed appends seen */
    /* close */
    bool closing;                       /* destroy called */
    bool remove_data;                   /* delete dir after close */
    mraft_group_close_cb close_cb;      /* user callback */
    void *close_data;                   /* its argument */
    char dir[PATH_MAX];                 /* data directory of the group */
};

/* core.c: the glue (any struct raft) */
void mraft__group_init(struct mraft_group *g, uint64_t id, const struct mraft_owner *owner,
                       void *owner_data, const struct mraft__tuning *t);
struct raft_fsm *mraft__group_fsm(struct mraft_group *g);
void mraft__group_attach(struct mraft_group *g, struct raft *r);
void mraft__group_wrap_io(struct mraft_group *g);
int mraft__group_start(struct mraft_group *g);
int mraft__group_started(struct mraft_group *g);
void mraft__group_tick(struct mraft_group *g);
void mraft__group_closing(struct mraft_group *g);
void mraft__group_fail_queued(struct mraft_group *g, int status);
int mraft__err(int raft_rv);
const struct raft_entry *mraft__log_get(const struct raft *r, raft_index index);
int mraft__desc_encode(const struct mraft_snapshot_desc *d, struct raft_buffer *buf);
int mraft__desc_decode(const struct raft_buffer *buf, struct mraft_snapshot_desc *d);
/* Little-endian u64 at p (wire formats: descriptor, preamble). */
void mraft__put64(unsigned char *p, uint64_t v);
uint64_t mraft__get64(const unsigned char *p);

/* host.c: run g's tick in this loop iteration's check phase (a fenced group
 * is stopped there, a destroyed stopped one finished) */
void mraft__host_kick(struct mraft_host *h, struct mraft_group *g);
/* host.c: disk-full admission of a proposal of len bytes: MG_ENOSPC when the
 * data dir's free space (cached, see host.c) is below min_free_bytes. */
int mraft__host_admit(struct mraft_host *h, size_t len, int reserve);
/* host.c: run owner->fetch(g->fetch_desc) on a libuv worker; sets fetch_busy
 * and calls mraft__group_fetched on the loop when done. */
void mraft__host_fetch(struct mraft_group *g);
/* core.c: a fetch finished with rv, its checkpoint covering covers. */
void mraft__group_fetched(struct mraft_group *g, int rv, uint64_t covers);
/* host.c: bytes allocated by g's directory, rescanned at most once a second. */
uint64_t mraft__host_log_bytes(struct mraft_group *g);
/* Tests: replace statvfs as the source of the data dir's free bytes (NULL:
 * statvfs again) and drop the cached figure. Returns 0 or an errno value. */
typedef int (*mraft__free_space_fn)(const char *dir, uint64_t *free_bytes);
void mraft__host_set_free_space(struct mraft_host *h, mraft__free_space_fn fn);

/* aio_defer.c: io_destroy off the loop thread (see the file comment) */
void mraft__aio_defer_init(void);

/* transport.c: the multiplexing transport */
int mraft__net_listen(struct mraft__net *net, uv_loop_t *loop, const char *address);
void mraft__net_close(struct mraft__net *net, void (*cb)(struct mraft__net *net));
void mraft__transport_init(struct mraft__transport *t, struct mraft__net *net,
                           uint64_t group_id);
int mraft__parse_address(const char *address, struct sockaddr_in *sa);

#endif
