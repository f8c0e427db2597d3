/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public header of raft/: a multi-Raft host on libraft 0.15 (DESIGN.md 6
 * and 12). One host per process owns one libuv loop, ONE listening TCP port
 * shared by every group (a multiplexing raft_uv_transport whose connection
 * preamble names the group), and one data directory with a sub-directory per
 * group ("g<group id>"). A group's owner (later: a meta shard) supplies the
 * state machine through struct mraft_owner. Everything here runs on the host
 * loop: every function must be called from the loop thread, and every
 * callback fires on it. Nothing here is thread-safe.
 *
 * The Raft log is the write-ahead log. The owner's engine applies entries
 * without a WAL of its own and reports, through durable_index(), the highest
 * index whose effects it has flushed. libraft 0.15 takes snapshots on its own
 * schedule at last_applied; the host records in the snapshot descriptor the
 * owner's durable index D at that moment and raises the snapshot's trailing
 * count to at least (snapshot index - D), so libraft never truncates an entry
 * the engine has not flushed. After a crash the host replays (D', X] from the
 * log (D' = the engine's durable index on reopen, X = snapshot index), then
 * libraft applies the rest as commits arrive. Entries at or below the owner's
 * applied index are never handed to apply() twice.
 *
 * Snapshots are small descriptors (struct mraft_snapshot_desc): libraft 0.15
 * ships InstallSnapshot as one in-memory buffer, so the engine checkpoint
 * itself moves out of band. The out-of-band hooks are mraft_owner.fetch()
 * (optional, on a libuv worker) and mraft_owner.install() (on the loop): on a
 * follower that received a leader's descriptor they must obtain, from any
 * peer, a checkpoint covering at least desc->index (the source serves a
 * fresh checkpoint of its applied state; with RocksDB and its WAL off,
 * CreateCheckpoint flushes the memtable first, so it covers the source's
 * applied index, which is >= desc->index because the source applied through
 * its own snapshot). libraft 0.15 cannot take a failed or late restore, so
 * the host accepts every descriptor at once as the group's pending install:
 * entries committed meanwhile are deferred (copied) and handed to apply in
 * order once the install covered the snapshot, a failed fetch/install is
 * retried every 500 ms, and the group is not ready (no proposal submitted, no
 * read confirmed) while an install is pending.
 *
 * Leadership and reads. libraft 0.15 appends no no-op when a leader is elected
 * and has neither read-index nor leases. A new leader is "ready" only after a
 * RAFT_BARRIER entry of its own term commits; proposals submitted before that
 * wait in the group's bounded queue. Reads use a barrier-batched read index
 * plus a lease: mraft_group_read() queues the read, the host commits one
 * barrier for every read queued before it was appended, and the read callback
 * fires with status 0 only when that barrier has been applied while this node
 * is still leader of the same term. A barrier commits only with a majority of
 * the current term, so a deposed or partitioned leader never confirms a read
 * that way (it fails with MG_ENOTLEADER once libraft steps it down) and never
 * acks a write (acks fire only when the entry is applied after commit). A
 * committed read barrier also starts a lease of half the election timeout,
 * counted from when the barrier was appended: until it ends (and unless a
 * leadership transfer started) reads are confirmed without a barrier of their
 * own, at the next host check. Its clock bound, and why no other node can lead
 * before it ends (libraft followers refuse votes while they have a leader), is
 * written at "Read lease" in core.c.
 *
 * Errors: functions return 0 or an enum mg_err code; RAFT_* codes never leave
 * this module. A function that takes a callback and returns nonzero never runs
 * the callback; if it returns 0 the callback runs exactly once (STYLE.md 3).
 */
#ifndef MG_RAFT_RAFT_H
#define MG_RAFT_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

struct mraft_host;
struct mraft_group;

/* Snapshot descriptor: what libraft stores and ships instead of data. */
struct mraft_snapshot_desc {
    uint64_t index;          /* last Raft index the snapshot stands for */
    uint64_t term;           /* term of that index */
    uint64_t durable_index;  /* owner's durable index when it was taken (<= index) */
    uint64_t checkpoint_id;  /* owner-chosen name of the checkpoint covering durable_index */
};

/* Roles reported by mraft_group_role(). */
enum mraft_role {
    MRAFT_UNAVAILABLE,
    MRAFT_FOLLOWER,
    MRAFT_CANDIDATE,
    MRAFT_LEADER,
};

/*
 * The state machine of one group, supplied by its owner. All hooks run on the
 * host loop with the owner's data pointer. Hooks return 0 or an mg_err code.
 */
struct mraft_owner {
    /* Apply the committed command at index (strictly increasing; never an index
     * the owner already applied). (buf, len) is borrowed for the call only.
     * *result (initially NULL) is passed to the proposer's callback on the
     * leader that proposed it; elsewhere (followers, replay) it is dropped, so
     * it must not carry ownership. A nonzero return stops applying; libraft
     * retries the same entry later, except that libraft 0.15 turns a
     * follower unavailable when the failure happens on its heartbeat path
     * (README.md "Installs run off the loop"): treat it as fatal. */
    int (*apply)(void *data, uint64_t index, const void *buf, size_t len, void **result);
    /* Highest index whose effects are flushed to durable storage. Monotonic,
     * also across restarts. */
    uint64_t (*durable_index)(void *data);
    /* Name a checkpoint that covers durable_index (e.g. the id of the engine's
     * last flush or a RocksDB checkpoint). May be NULL: the id is then 0. */
    int (*snapshot)(void *data, uint64_t durable_index, uint64_t *checkpoint_id);
    /* Reopen after restart from a descriptor found on disk. Report in
     * *applied_index the index the engine's own durable state covers; the host
     * replays the log after it. May be NULL: then durable_index() is used. */
    int (*restore)(void *data, const struct mraft_snapshot_desc *desc, uint64_t *applied_index);
    /* Out-of-band install (see the file comment): replace the engine's state
     * of this group with a checkpoint covering at least desc->index fetched
     * from a peer, and report the index it covers in *applied_index. Return
     * MG_EBUSY if no peer can serve it yet: the host retries every 500 ms
     * (entries committed meanwhile wait, see the file comment). Runs on the
     * loop: with a fetch hook (below) it only swaps in what fetch staged;
     * without one it does the whole copy and blocks the loop meanwhile. May
     * be NULL only for groups that never receive InstallSnapshot (one voter). */
    int (*install)(void *data, const struct mraft_snapshot_desc *desc, uint64_t *applied_index);
    /* Optional: move the slow part of install off the loop. Runs on a libuv
     * worker thread (uv_queue_work), so it must touch only what no loop-side
     * hook touches meanwhile (e.g. a staging directory of its own): fetch
     * from a peer a checkpoint covering at least desc->index, stage it, and
     * report the index it covers in *covers. Return 0, MG_EBUSY (no peer can
     * serve it yet) or another mg_err code. When set, the host calls install
     * for an InstallSnapshot only once a fetch for it has completed with
     * *covers >= desc->index, and install then just swaps the staged
     * checkpoint in, on the loop. A failed fetch is retried every 500 ms. At
     * most one fetch runs per group; a group being destroyed waits for it.
     * At start-up (a persisted descriptor whose entries the log lacks) fetch
     * and install run inline on the loop. */
    int (*fetch)(void *data, const struct mraft_snapshot_desc *desc, uint64_t *covers);
};

/* One voter: node id (>0, the same id in every group on that node) and its
 * host address "a.b.c.d:port". */
struct mraft_voter {
    uint64_t id;         /* node id */
    const char *address; /* host listen address, copied */
};

struct mraft_host_config {
    uint64_t node_id;                /* this node's id, > 0 */
    const char *address;             /* "a.b.c.d:port" to listen on and advertise */
    const char *data_dir;            /* existing directory; one sub-dir per group */
    size_t segment_size_bytes;       /* 0: 512 KiB (libraft's default is 8 MiB) */
    unsigned election_timeout_ms;    /* 0: 1000 */
    unsigned heartbeat_timeout_ms;   /* 0: 100 */
    unsigned install_timeout_ms;     /* 0: 2000 (libraft: 30000) */
    unsigned snapshot_threshold;     /* 0: 1024 entries between snapshots */
    unsigned snapshot_trailing;      /* 0: 128 entries kept (raised to keep undurable ones) */
    unsigned tick_ms;                /* 0: 25; leader/ready polling period */
    unsigned balance_interval_ms;    /* 0: off; leader balancing period */
    unsigned max_pending;            /* 0: 1024; bound on queued proposals per group */
    /* Disk-full admission: mraft_group_propose answers MG_ENOSPC while the
     * free space of data_dir's file system (statvfs f_bavail, cached for at
     * most 100 ms or min_free_bytes / 4 admitted bytes) minus the bytes
     * admitted since it was read is below min_free_bytes + the proposal's
     * length. 0: max(4 MiB, 2 segments). The reserve leaves room for the
     * barriers of reads, elections and snapshots. */
    uint64_t min_free_bytes;
};

typedef void (*mraft_host_close_cb)(struct mraft_host *h, void *data);

/*
 * Create a host on loop: bind and listen on cfg->address, ignore SIGPIPE,
 * install libraft's abort-on-OOM heap (raft_heap_set, STYLE.md 4). Strings in
 * cfg are copied. On success *out owns the host until mraft_host_destroy.
 * Errors: MG_ECONFIG (bad address, node id 0, missing data dir),
 * MG_EIO (bind/listen failed, e.g. port in use).
 */
int mraft_host_create(uv_loop_t *loop, const struct mraft_host_config *cfg,
                      struct mraft_host **out);

/*
 * Close every group (pending proposals and reads fail with MG_ESHUTDOWN), the
 * listener and the timers; cb fires once everything is released, after which
 * h is freed. Never fails. Calling any other function on h afterwards is a
 * programmer error.
 */
void mraft_host_destroy(struct mraft_host *h, mraft_host_close_cb cb, void *data);

/* Number of open groups and, in *led, how many of them this node leads (ready). */
unsigned mraft_host_n_groups(struct mraft_host *h, unsigned *led);

/* Run one leader-balancing round now (the periodic timer calls it too):
 * while this node leads more than ceil(groups / nodes) ready groups, transfer
 * leadership of the excess (at most 8 per round) with raft_transfer to the
 * caught-up voter that leads the fewest. Returns how many transfers started. */
unsigned mraft_host_balance(struct mraft_host *h);

struct mraft_group_config {
    uint64_t group_id;                 /* > 0, unique per host */
    const struct mraft_voter *voters;  /* initial voter set; copied */
    unsigned n_voters;                 /* 0: join an existing group (no bootstrap) */
    const struct mraft_owner *owner;   /* borrowed; must outlive the group */
    void *owner_data;                  /* passed to every owner hook */
};

/*
 * Open group cfg->group_id under the host's data dir, creating "g<id>" if
 * needed. A new group with voters is bootstrapped with that voter set (every
 * initial voter must be created with the same set); an existing group keeps
 * its persisted configuration. Replays the log tail the owner has not
 * flushed before returning. *out is owned by the host until
 * mraft_group_destroy or mraft_host_destroy.
 * Errors: MG_EINVALIDARGUMENT (id 0 or already open), MG_EIO/MG_ENOSPC (disk),
 * MG_ECORRUPT (unreadable log), or an owner hook's error.
 */
int mraft_group_create(struct mraft_host *h, const struct mraft_group_config *cfg,
                       struct mraft_group **out);

typedef void (*mraft_group_close_cb)(struct mraft_group *g, void *data);

/*
 * Close the group; pending proposals and reads fail with MG_ESHUTDOWN. If
 * remove_data, its directory is deleted once closed (use after removing this
 * node from the group's configuration). cb (may be NULL) fires when closed;
 * g is freed right after cb returns.
 */
void mraft_group_destroy(struct mraft_group *g, bool remove_data, mraft_group_close_cb cb,
                         void *data);

uint64_t mraft_group_id(const struct mraft_group *g);
enum mraft_role mraft_group_role(struct mraft_group *g);
/* True when this node is leader, a barrier of its current term committed, no
 * leadership transfer runs and no out-of-band install is pending. */
bool mraft_group_ready(struct mraft_group *g);
/* Known leader id (0 if none) and its address (borrowed, may be NULL). */
uint64_t mraft_group_leader(struct mraft_group *g, const char **address);
/* Highest index handed to the owner's apply (or covered by its restore). */
uint64_t mraft_group_applied(struct mraft_group *g);
/* The raw libraft instance, for tests and diagnostics only. */
struct raft *mraft_group_raft(struct mraft_group *g);

/* Commit-latency histogram buckets: upper bounds in microseconds of buckets
 * 0 .. MRAFT_LATENCY_BUCKETS - 2; the last bucket is +inf. */
#define MRAFT_LATENCY_BUCKETS 11
extern const uint64_t mraft_latency_bounds_us[MRAFT_LATENCY_BUCKETS - 1];

/* Per-group figures for /metrics (mraft_group_stats_get). Counters count
 * since the group was opened in this process; gauges are read at the call. */
struct mraft_group_stats {
    /* proposals */
    uint64_t inflight;            /* gauge: submitted to libraft, callback not run yet */
    uint64_t queued;              /* gauge: accepted, waiting in the group's queue
                                   * (for readiness or for the in-flight wave) */
    uint64_t commits;             /* counter: proposals acknowledged with status 0 */
    uint64_t failed;              /* counter: accepted proposals whose callback got
                                   * a nonzero status (not leader, fence, shutdown) */
    uint64_t refused_nospace;     /* counter: proposals refused with MG_ENOSPC by
                                   * disk-full admission (callback not run) */
    /* commit latency, mraft_group_propose -> owner's apply (the callback runs
     * right after it), of the proposals counted in commits */
    uint64_t latency_bucket[MRAFT_LATENCY_BUCKETS]; /* counter: commits whose latency
                                   * is <= mraft_latency_bounds_us[i] and above the
                                   * previous bound (per bucket, not cumulative; the
                                   * last is above 100 ms) */
    uint64_t latency_count;       /* counter: = commits */
    uint64_t latency_sum_us;      /* counter: sum of those latencies, microseconds */
    /* indexes */
    uint64_t applied_index;       /* gauge: mraft_group_applied() */
    uint64_t durable_index;       /* gauge: the owner's durable_index() now; the
                                   * lag applied - durable is what a crash replays */
    uint64_t commit_index;        /* gauge: libraft's commit index */
    uint64_t last_index;          /* gauge: last index in the log (appended, maybe
                                   * not committed or stored yet) */
    uint64_t snapshot_index;      /* gauge: index of the last snapshot taken */
    /* disk */
    uint64_t log_bytes;           /* gauge: bytes allocated on disk by the group's
                                   * directory (segments, snapshots, metadata;
                                   * st_blocks, so preallocated segments count in
                                   * full), rescanned at most once a second; 0 for
                                   * a group not on a host's data dir */
    bool installing;              /* an out-of-band install is pending (entries
                                   * committed meanwhile wait for it) */
    uint64_t installs;            /* counter: out-of-band installs completed */
    int fence_err;                /* 0, or MG_ENOSPC / MG_EIO once a failed log
                                   * append fenced the group (mraft_group_propose) */
    /* leadership */
    enum mraft_role role;         /* mraft_group_role() */
    bool ready;                   /* mraft_group_ready() */
    uint64_t term;                /* current term */
    uint64_t leader_id;           /* known leader, 0 if none */
};

/* Fill *out with g's figures. Cheap (no I/O but a directory scan at most
 * once a second); call from the host loop like everything else. */
void mraft_group_stats_get(struct mraft_group *g, struct mraft_group_stats *out);

struct mraft_propose;
/*
 * Proposal outcome: status 0 means the entry was committed and applied at
 * index, and result is what the owner's apply returned. Nonzero status:
 * MG_ENOTLEADER (leader_hint = known leader id or 0; if leadership was lost
 * after the entry was appended the outcome is unknown, so retries must carry
 * a request id, DESIGN.md 6), MG_ESHUTDOWN, MG_EIO or MG_ENOSPC (the group's
 * log write failed: the group is fenced, see mraft_group_propose; the outcome
 * is unknown too, since bytes of a failed write may be on disk and apply when
 * the group is reopened).
 */
typedef void (*mraft_propose_cb)(struct mraft_propose *req, int status, uint64_t index,
                                 uint64_t leader_hint, void *result);

/* A proposal, owned by the caller until its callback fires. */
struct mraft_propose {
    void *data;                   /* caller's */
    /* private */
    mraft_propose_cb cb;
    struct mraft_group *g;
    void *buf;                    /* raft_malloc'd copy of the payload */
    size_t len;
    struct mraft_propose *next;   /* queue link */
    uint64_t start_ns;            /* uv_hrtime() when accepted (commit latency) */
    uint64_t raft_req[16];        /* storage for struct raft_apply */
};

/*
 * Propose (buf, len) as one log entry. The payload is copied (into memory from
 * raft_malloc, handed to libraft), so the caller keeps buf. If this node is
 * leader but not ready yet, or proposals are in flight, the request waits in
 * the group's queue (bounded by max_pending): in-flight proposals are
 * submitted in waves, each wave only after the previous one committed, which
 * also sidesteps libraft 0.15 computing commit only at the leader's
 * last_stored (README.md "gaps"). The next wave is submitted as soon as the
 * last entry of the previous one is applied (from that entry's apply path,
 * after its callback), not at the next tick.
 * Errors (callback not run, nothing appended): MG_ENOTLEADER (*leader_hint set
 * when non-NULL), MG_EBUSY (queue full), MG_ENOSPC (free space of the data
 * dir below the host's min_free_bytes: refused before the log append; the
 * caller answers 507 and may retry once space is freed), MG_ESHUTDOWN,
 * MG_EINVALIDARGUMENT (len 0, or not a multiple of 8: libraft 0.15's segment
 * reader assumes 8-byte padded entry data and its writer does not pad, so an
 * odd length would make the log unreadable at the next start), or the fence
 * code below.
 *
 * A failed log append (ENOSPC preallocating a segment, a short write, EIO)
 * never aborts the process: it fences the group. The failed proposals and
 * every pending proposal and read fail with MG_ENOSPC (no space) or MG_EIO
 * (any other I/O error); the host then closes the group's libraft instance
 * (role MRAFT_UNAVAILABLE; in a multi-voter group the other voters elect a
 * leader as if this node had crashed), and every later proposal or read on it
 * fails at once with the same code. Committed state is untouched. To resume,
 * the owner calls mraft_group_destroy (remove_data false) and then
 * mraft_group_create, which reloads the log from disk and replays what the
 * engine has not flushed, as after a restart.
 */
int mraft_group_propose(struct mraft_group *g, struct mraft_propose *req, const void *buf,
                        size_t len, mraft_propose_cb cb, uint64_t *leader_hint);

/*
 * mraft_group_propose for an entry that frees space (deletes): admitted until the
 * free space falls below a quarter of min_free_bytes, so a full disk can still be
 * emptied. Same contract and errors otherwise.
 */
int mraft_group_propose_reserve(struct mraft_group *g, struct mraft_propose *req,
                                const void *buf, size_t len, mraft_propose_cb cb,
                                uint64_t *leader_hint);

struct mraft_read;
/* Read permission: status 0 means the owner's applied state now reflects every
 * write acknowledged before mraft_group_read was called; serve the read
 * synchronously inside the callback. Else MG_ENOTLEADER / MG_ESHUTDOWN, or
 * the fence code (MG_EIO / MG_ENOSPC, see mraft_group_propose). */
typedef void (*mraft_read_cb)(struct mraft_read *req, int status);
struct mraft_read {
    void *data;              /* caller's */
    /* private */
    mraft_read_cb cb;
    struct mraft_read *next;
};

/*
 * Linearizable read gate (barrier-batched read index, see file comment).
 * Errors (callback not run): MG_ENOTLEADER (*leader_hint set when non-NULL),
 * MG_EBUSY (too many queued reads), MG_ESHUTDOWN, the fence code. Reads are
 * not refused by disk-full admission (their barrier entries are tiny and
 * come out of the min_free_bytes reserve).
 */
int mraft_group_read(struct mraft_group *g, struct mraft_read *req, mraft_read_cb cb,
                     uint64_t *leader_hint);

typedef void (*mraft_change_cb)(void *data, int status);

/*
 * Membership: add_voter adds id as a spare and promotes it to voter once the
 * first change committed (the joining node creates the group with
 * n_voters = 0 first); remove_voter removes it. Leader only; one change at a
 * time. cb gets 0, MG_ENOTLEADER, MG_EBUSY (change in progress),
 * MG_EINVALIDARGUMENT (bad id) or MG_ESHUTDOWN.
 * Errors (callback not run): as for cb.
 */
int mraft_group_add_voter(struct mraft_group *g, uint64_t id, const char *address,
                          mraft_change_cb cb, void *data);
int mraft_group_remove_voter(struct mraft_group *g, uint64_t id, mraft_change_cb cb,
                             void *data);

/* A member of a group's current configuration (libraft's roles). A standby replicates the
 * log (and installs snapshots) but does not vote; a spare gets nothing. */
enum mraft_member_role {
    MRAFT_MEMBER_VOTER,
    MRAFT_MEMBER_STANDBY,
    MRAFT_MEMBER_SPARE,
};
struct mraft_member {
    uint64_t id;
    enum mraft_member_role role;
};

/* The group's configuration as this node knows it (the leader's: the latest appended,
 * maybe not committed yet): up to max members into out; returns how many. */
unsigned mraft_group_members(struct mraft_group *g, struct mraft_member *out, unsigned max);

/*
 * Give id the role: a node not in the configuration is added (a spare, at address) and
 * then assigned the role once that change committed (libraft catches a new voter up
 * first). Leader only; one change at a time (add_voter / remove_voter included). cb as
 * for add_voter. Errors (callback not run): MG_ENOTLEADER, MG_EBUSY, MG_ESHUTDOWN,
 * MG_EINVALIDARGUMENT (already that role; a new id without an address), or libraft
 * refusing the change (an uncommitted configuration: MG_EBUSY-like codes).
 */
int mraft_group_assign(struct mraft_group *g, uint64_t id, const char *address,
                       enum mraft_member_role role, mraft_change_cb cb, void *data);

/*
 * Ask libraft to hand leadership to voter id (0: any up-to-date voter).
 * Completion is observed through mraft_group_leader(). Errors: MG_ENOTLEADER,
 * MG_EBUSY (a transfer is running), MG_EINVALIDARGUMENT (not a voter).
 */
int mraft_group_transfer(struct mraft_group *g, uint64_t id);

#endif
