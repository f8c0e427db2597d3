/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One node process of the raft_chaos fault test (issue 4, done-when 2): a
 * raft/ host with G groups on one port, each group backed by a toy engine
 * (an append-only file of (index, value) records flushed every second, so
 * durable_index lags and a crash leaves an unflushed tail for the log to
 * replay). While running it proposes continuously to every group it leads and
 * appends each acknowledged proposal to acks.log as "g index value t_ms".
 * Signals (handled on the loop): SIGUSR1 stops proposing, SIGUSR2 writes the
 * applied state to state.txt (atomically), SIGTERM exits cleanly. The
 * out-of-band snapshot install copies a peer's flushed state file (all nodes
 * share the machine), standing in for fetching a RocksDB checkpoint: the copy
 * runs in the fetch hook on a libuv worker (issue 7), the install hook only
 * renames the staged file into place and swaps the memory.
 *
 * usage: raft_node --id N --dir DIR --peers 1=ADDR,2=ADDR,3=ADDR
 *                  --peer-dirs DIR1,DIR2,DIR3 [--groups 256] [--inflight 2]
 *                  [--election-ms 500]  (heartbeat = election / 5) [--segment-kib 512]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#define MG_MODULE "raft_node"
#include "common/common.h"
#include "raft/raft.h"

#define MAX_NODES 3

struct node;

struct toy {
    struct node *node;
    uint64_t gid;
    struct mraft_group *g;
    uint64_t *index; /* applied entries */
    uint64_t *val;
    size_t n, cap;
    uint64_t last;       /* last applied index */
    uint64_t durable;    /* last index flushed to the state file */
    size_t n_flushed;    /* entries already in the file */
    unsigned inflight;   /* our proposals in flight */
    struct toy *staged;  /* fetch: a peer's state copied to the staged file */
};

struct prop {
    struct mraft_propose req;
    struct toy *t;
    uint64_t val; /* proposed value */
};

struct node {
    uv_loop_t loop;
    uint64_t id;
    const char *dir;
    char *peer_dirs[MAX_NODES];
    unsigned n_peer_dirs;
    struct mraft_voter voters[MAX_NODES];
    unsigned n_voters;
    unsigned n_groups;
    unsigned inflight_max;
    unsigned election_ms;
    unsigned segment_kib;
    struct toy *toys;
    struct mraft_host *host;
    uv_timer_t propose_timer, flush_timer;
    uv_signal_t sig_usr1, sig_usr2, sig_term;
    bool proposing;
    uint64_t seq;
    uint64_t incarnation;
    int acks_fd;
    struct mg_buf acks;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void toy_push(struct toy *t, uint64_t index, uint64_t val)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->index = mg_realloc(t->index, t->cap * sizeof(uint64_t));
        t->val = mg_realloc(t->val, t->cap * sizeof(uint64_t));
    }
    t->index[t->n] = index;
    t->val[t->n] = val;
    t->n++;
}

static void state_path(char *out, size_t len, const char *dir, uint64_t gid)
{
    snprintf(out, len, "%s/toy-%llu.bin", dir, (unsigned long long)gid);
}

/* Load a state file: 16-byte records (index, value). */
static int load_file(const char *path, struct toy *t)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? 0 : -1;
    uint64_t rec[2];
    while (fread(rec, sizeof(rec), 1, f) == 1) {
        if (rec[0] <= t->last)
            break; /* corrupt ordering: stop */
        toy_push(t, rec[0], rec[1]);
        t->last = rec[0];
    }
    fclose(f);
    return 0;
}

/* Flush: append the new records. No fsync: this test kills processes, not the
 * machine, and the page cache survives SIGKILL. */
static void toy_flush(struct toy *t)
{
    if (t->n == t->n_flushed)
        return;
    char path[512];
    state_path(path, sizeof(path), t->node->dir, t->gid);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return;
    size_t n = t->n - t->n_flushed;
    uint64_t *buf = mg_malloc(n * 16);
    for (size_t i = 0; i < n; i++) {
        buf[2 * i] = t->index[t->n_flushed + i];
        buf[2 * i + 1] = t->val[t->n_flushed + i];
    }
    ssize_t w = write(fd, buf, n * 16);
    close(fd);
    mg_free(buf);
    if (w == (ssize_t)(n * 16)) {
        t->n_flushed = t->n;
        t->durable = t->index[t->n - 1];
    }
}

static int toy_apply(void *data, uint64_t index, const void *buf, size_t len, void **result)
{
    struct toy *t = data;
    uint64_t val;
    if (len != 8 || index <= t->last)
        return MG_ECORRUPT;
    memcpy(&val, buf, 8);
    toy_push(t, index, val);
    t->last = index;
    return 0;
}

static uint64_t toy_durable(void *data)
{
    return ((struct toy *)data)->durable;
}

static int toy_restore(void *data, const struct mraft_snapshot_desc *d, uint64_t *applied)
{
    *applied = ((struct toy *)data)->durable;
    return 0;
}

static void toy_free_arrays(struct toy *t)
{
    mg_free(t->index);
    mg_free(t->val);
}

/* Fetch, on a libuv worker: copy the flushed state of any peer that covers
 * the descriptor into our staged file and t->staged. Touches only
 * t->staged, the staged file and the peers' files (the loop touches none of
 * them while a fetch runs). */
static int toy_fetch(void *data, const struct mraft_snapshot_desc *d, uint64_t *covers)
{
    struct toy *t = data;
    struct node *n = t->node;
    if (t->staged != NULL) {
        toy_free_arrays(t->staged);
        mg_free(t->staged);
        t->staged = NULL;
    }
    for (unsigned i = 0; i < n->n_peer_dirs; i++) {
        if (strcmp(n->peer_dirs[i], n->dir) == 0)
            continue;
        char path[512];
        struct toy *peer = mg_calloc(1, sizeof(*peer));
        peer->node = n;
        peer->gid = t->gid;
        state_path(path, sizeof(path), n->peer_dirs[i], t->gid);
        if (load_file(path, peer) != 0 || peer->last < d->index) {
            toy_free_arrays(peer);
            mg_free(peer);
            continue;
        }
        char staged[530];
        state_path(path, sizeof(path), n->dir, t->gid);
        snprintf(staged, sizeof(staged), "%s.staged", path);
        FILE *f = fopen(staged, "wb");
        for (size_t k = 0; f != NULL && k < peer->n; k++) {
            uint64_t rec[2] = {peer->index[k], peer->val[k]};
            fwrite(rec, sizeof(rec), 1, f);
        }
        if (f == NULL || fclose(f) != 0) {
            toy_free_arrays(peer);
            mg_free(peer);
            return MG_EIO;
        }
        t->staged = peer;
        *covers = peer->last;
        return 0;
    }
    return MG_EBUSY;
}

/* Install, on the loop: make the staged state ours (file and memory). */
static int toy_install(void *data, const struct mraft_snapshot_desc *d, uint64_t *applied)
{
    struct toy *t = data;
    struct toy *peer = t->staged;
    if (peer == NULL || peer->last < d->index)
        return MG_EBUSY;
    char mine[512], staged[530];
    state_path(mine, sizeof(mine), t->node->dir, t->gid);
    snprintf(staged, sizeof(staged), "%s.staged", mine);
    if (rename(staged, mine) != 0)
        return MG_EIO;
    toy_free_arrays(t);
    t->index = peer->index;
    t->val = peer->val;
    t->n = t->n_flushed = peer->n;
    t->cap = peer->cap;
    t->last = t->durable = peer->last;
    mg_free(peer);
    t->staged = NULL;
    *applied = t->last;
    mg_log(MG_LOG_INFO, "event=toy_install group=%llu index=%llu", (unsigned long long)t->gid,
           (unsigned long long)t->last);
    return 0;
}

static const struct mraft_owner toy_owner = {
    .apply = toy_apply,
    .durable_index = toy_durable,
    .restore = toy_restore,
    .install = toy_install,
    .fetch = toy_fetch,
};

static void flush_acks(struct node *n)
{
    if (n->acks.len == 0)
        return;
    ssize_t w = write(n->acks_fd, n->acks.base, n->acks.len);
    (void)w;
    n->acks.len = 0;
}

static void on_ack(struct mraft_propose *req, int status, uint64_t index, uint64_t hint,
                   void *result)
{
    struct prop *p = req->data;
    struct toy *t = p->t;
    t->inflight--;
    if (status == 0)
        mg_buf_appendf(&t->node->acks, "%llu %llu %llu %llu\n", (unsigned long long)t->gid,
                       (unsigned long long)index, (unsigned long long)p->val,
                       (unsigned long long)now_ms());
    mg_free(p);
}

static void on_propose_tick(uv_timer_t *timer)
{
    struct node *n = timer->data;
    flush_acks(n);
    if (!n->proposing)
        return;
    for (unsigned i = 0; i < n->n_groups; i++) {
        struct toy *t = &n->toys[i];
        while (t->inflight < n->inflight_max && mraft_group_ready(t->g)) {
            struct prop *p = mg_calloc(1, sizeof(*p));
            p->t = t;
            p->req.data = p;
            p->val = (n->id << 56) | (n->incarnation << 40) | ++n->seq;
            if (mraft_group_propose(t->g, &p->req, &p->val, sizeof(p->val), on_ack, NULL) != 0) {
                mg_free(p);
                break;
            }
            t->inflight++;
        }
    }
}

static void on_flush_tick(uv_timer_t *timer)
{
    struct node *n = timer->data;
    for (unsigned i = 0; i < n->n_groups; i++)
        toy_flush(&n->toys[i]);
}

static void dump_state(struct node *n)
{
    char path[512], tmp[530];
    snprintf(path, sizeof(path), "%s/state.txt", n->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return;
    unsigned led = 0;
    mraft_host_n_groups(n->host, &led);
    fprintf(f, "led %u\n", led);
    for (unsigned i = 0; i < n->n_groups; i++) {
        struct toy *t = &n->toys[i];
        fprintf(f, "g %llu %llu %zu\n", (unsigned long long)t->gid, (unsigned long long)t->last,
                t->n);
        for (size_t k = 0; k < t->n; k++)
            fprintf(f, "%llu %llu\n", (unsigned long long)t->index[k],
                    (unsigned long long)t->val[k]);
    }
    fclose(f);
    rename(tmp, path);
}

static void on_host_closed(struct mraft_host *h, void *data)
{
    struct node *n = data;
    n->host = NULL;
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct node *n = s->data;
    if (signum == SIGUSR1) {
        n->proposing = false;
        flush_acks(n);
    } else if (signum == SIGUSR2) {
        dump_state(n);
    } else {
        flush_acks(n);
        uv_timer_stop(&n->propose_timer);
        uv_timer_stop(&n->flush_timer);
        uv_close((uv_handle_t *)&n->propose_timer, NULL);
        uv_close((uv_handle_t *)&n->flush_timer, NULL);
        uv_close((uv_handle_t *)&n->sig_usr1, NULL);
        uv_close((uv_handle_t *)&n->sig_usr2, NULL);
        uv_close((uv_handle_t *)&n->sig_term, NULL);
        mraft_host_destroy(n->host, on_host_closed, n);
    }
}

static int parse_peers(struct node *n, char *peers)
{
    for (char *tok = strtok(peers, ","); tok != NULL; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (eq == NULL || n->n_voters == MAX_NODES)
            return -1;
        *eq = '\0';
        n->voters[n->n_voters].id = strtoull(tok, NULL, 10);
        n->voters[n->n_voters].address = eq + 1;
        n->n_voters++;
    }
    return 0;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    static struct node n;
    char *peers = NULL, *peer_dirs = NULL;
    n.n_groups = 256;
    n.inflight_max = 2;
    n.election_ms = 500;
    n.segment_kib = 512;
    static const struct option opts[] = {
        {"id", required_argument, NULL, 'i'},     {"dir", required_argument, NULL, 'd'},
        {"peers", required_argument, NULL, 'p'},  {"peer-dirs", required_argument, NULL, 'D'},
        {"groups", required_argument, NULL, 'g'}, {"inflight", required_argument, NULL, 'f'},
        {"election-ms", required_argument, NULL, 'e'},
        {"segment-kib", required_argument, NULL, 's'},    {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'i': n.id = strtoull(optarg, NULL, 10); break;
        case 'd': n.dir = optarg; break;
        case 'p': peers = optarg; break;
        case 'D': peer_dirs = optarg; break;
        case 'g': n.n_groups = (unsigned)atoi(optarg); break;
        case 'f': n.inflight_max = (unsigned)atoi(optarg); break;
        case 'e': n.election_ms = (unsigned)atoi(optarg); break;
        case 's': n.segment_kib = (unsigned)atoi(optarg); break;
        default: return 2;
        }
    }
    if (n.id == 0 || n.dir == NULL || peers == NULL || parse_peers(&n, peers) != 0) {
        fprintf(stderr, "usage: raft_node --id N --dir DIR --peers 1=A,2=B,3=C "
                        "--peer-dirs D1,D2,D3 [--groups G] [--inflight K]\n");
        return 2;
    }
    for (char *tok = peer_dirs ? strtok(peer_dirs, ",") : NULL; tok != NULL && n.n_peer_dirs < MAX_NODES;
         tok = strtok(NULL, ","))
        n.peer_dirs[n.n_peer_dirs++] = tok;
    raise_fd_limit();
    const char *addr = NULL;
    for (unsigned i = 0; i < n.n_voters; i++)
        if (n.voters[i].id == n.id)
            addr = n.voters[i].address;
    if (addr == NULL)
        return 2;

    /* Incarnation: count of starts, so values stay unique across restarts. */
    char path[512];
    snprintf(path, sizeof(path), "%s/incarnation", n.dir);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%llu", (unsigned long long *)&n.incarnation) != 1)
            n.incarnation = 0;
        fclose(f);
    }
    n.incarnation++;
    f = fopen(path, "w");
    if (f != NULL) {
        fprintf(f, "%llu\n", (unsigned long long)n.incarnation);
        fclose(f);
    }
    snprintf(path, sizeof(path), "%s/acks.log", n.dir);
    n.acks_fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    mg_buf_init(&n.acks);

    uv_loop_init(&n.loop);
    struct mraft_host_config hc = {.node_id = n.id, .address = addr, .data_dir = n.dir,
                                   .snapshot_threshold = 256, .snapshot_trailing = 64,
                                   .segment_size_bytes = (size_t)n.segment_kib * 1024,
                                   .election_timeout_ms = n.election_ms,
                                   .heartbeat_timeout_ms = n.election_ms / 5,
                                   .balance_interval_ms = 500};
    int rv = mraft_host_create(&n.loop, &hc, &n.host);
    if (rv != 0) {
        fprintf(stderr, "host: %s\n", mg_err_name(rv));
        return 1;
    }
    n.toys = mg_calloc(n.n_groups, sizeof(*n.toys));
    for (unsigned i = 0; i < n.n_groups; i++) {
        struct toy *t = &n.toys[i];
        t->node = &n;
        t->gid = i + 1;
        state_path(path, sizeof(path), n.dir, t->gid);
        load_file(path, t);
        t->n_flushed = t->n;
        t->durable = t->last;
        struct mraft_group_config gc = {.group_id = t->gid, .voters = n.voters,
                                        .n_voters = n.n_voters, .owner = &toy_owner,
                                        .owner_data = t};
        rv = mraft_group_create(n.host, &gc, &t->g);
        if (rv != 0) {
            fprintf(stderr, "group %u: %s\n", i + 1, mg_err_name(rv));
            return 1;
        }
    }
    n.proposing = true;
    uv_timer_init(&n.loop, &n.propose_timer);
    n.propose_timer.data = &n;
    uv_timer_start(&n.propose_timer, on_propose_tick, 10, 10);
    uv_timer_init(&n.loop, &n.flush_timer);
    n.flush_timer.data = &n;
    uv_timer_start(&n.flush_timer, on_flush_tick, 1000, 1000);
    uv_signal_t *sigs[] = {&n.sig_usr1, &n.sig_usr2, &n.sig_term};
    int nums[] = {SIGUSR1, SIGUSR2, SIGTERM};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&n.loop, sigs[i]);
        sigs[i]->data = &n;
        uv_signal_start(sigs[i], on_signal, nums[i]);
    }
    fprintf(stderr, "node %llu ready incarnation %llu\n", (unsigned long long)n.id,
            (unsigned long long)n.incarnation);
    uv_run(&n.loop, UV_RUN_DEFAULT);
    flush_acks(&n);
    close(n.acks_fd);
    mg_buf_close(&n.acks);
    uv_loop_close(&n.loop);
    return 0;
}
