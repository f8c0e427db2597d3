/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A cluster member's membership (issue 10; DESIGN.md 2, 6): the node table
 * copied from meta_opts.cluster, the initial voter set, the manager's rows and
 * the leadership placement rule.
 *
 * Bootstrap. Every node creates every shard's group with the same voter set,
 * the min(3, N) lowest node ids (raft/raft.h: "every initial voter must be
 * created with the same set"), so no node has to join or be added to start a
 * cluster, and a restarted node reopens its groups from disk. The first ready
 * leader of shard 0 writes the manager's rows (0x02 'N' node rows and 0x02 'H'
 * shard rows: addresses, state, range, epoch, replicas) with one idempotent
 * op (absent rows only); live figures (leader, applied index, keys) are
 * answered from the groups themselves (admin shards).
 *
 * Placement of leaders. libraft's leader balancing runs (mraft_host_balance every 2 s: a
 * node leading more than ceil(groups / nodes) ready groups hands the excess to the voter
 * leading the fewest), so shard 0 and the data shards are led by different nodes. Bucket
 * create and delete write both shard 0 (the name) and the bucket's data shard (its
 * attribute row): the op runs on its home shard's leader (create: shard 0, which it reads;
 * delete: the data shard, whose emptiness it checks) and the other entry is proposed
 * through that shard's leader (router.c, META_RPC_ENTRY).
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "meta/cluster.h"
#include "meta/install.h"
#include "meta/remote.h"
#include "meta/split.h"

#define TICK_MS 200 /* the manager-row check */

static int cmp_node(const void *a, const void *b)
{
    const struct meta__node *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int copy_addr(char *dst, const char *src)
{
    if (src == NULL || src[0] == '\0' || strlen(src) >= META_ADDR_MAX)
        return -1;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

int meta__cluster_create(const struct meta_cluster_opts *o, struct meta__cluster **out,
                         char *errmsg)
{
    if (o->n == 0 || o->n > META_NODES_MAX) {
        snprintf(errmsg, 256, "cluster: %u nodes (1..%u)", o->n, META_NODES_MAX);
        return MG_ECONFIG;
    }
    struct meta__cluster *cl = mg_calloc(1, sizeof(*cl));
    cl->self = o->node_id;
    cl->n = o->n;
    for (unsigned i = 0; i < o->n; i++) {
        struct meta__node *n = &cl->nodes[i];
        n->id = o->nodes[i].id;
        if (n->id == 0 || copy_addr(n->s3, o->nodes[i].s3) != 0 ||
            copy_addr(n->raft, o->nodes[i].raft) != 0 || copy_addr(n->rpc, o->nodes[i].rpc) != 0) {
            snprintf(errmsg, 256, "cluster.nodes[%u]: id 0 or an address missing or too long", i);
            mg_free(cl);
            return MG_ECONFIG;
        }
    }
    qsort(cl->nodes, cl->n, sizeof(cl->nodes[0]), cmp_node);
    for (unsigned i = 1; i < cl->n; i++)
        if (cl->nodes[i].id == cl->nodes[i - 1].id) {
            snprintf(errmsg, 256, "cluster.nodes: id %llu twice",
                     (unsigned long long)cl->nodes[i].id);
            mg_free(cl);
            return MG_ECONFIG;
        }
    if (meta__cluster_node(cl, cl->self) == NULL) {
        snprintf(errmsg, 256, "cluster.node_id %llu is not among cluster.nodes",
                 (unsigned long long)cl->self);
        mg_free(cl);
        return MG_ECONFIG;
    }
    /* Request ids must never repeat across restarts of this node: every replica's dedup table
     * holds the ids of applied entries, and a reused id would be answered "done" without
     * being applied. The counter starts at the wall clock in microseconds (2^48 us is 8.9
     * years) and counts one per op, far slower than the clock, so a restarted node starts
     * past every id it gave out before. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    cl->next_request_id =
        ((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u) & 0xffffffffffffull;
    /* MG_SPLIT_KEYS / MG_SPLIT_BYTES: test switches over the config keys (deploy/cluster-up
     * writes each node's cluster section itself; test_cluster_split sets them). */
    cl->split_keys = mg_env_u64("MG_SPLIT_KEYS", o->split_keys);
    cl->split_bytes = mg_env_u64("MG_SPLIT_BYTES", o->split_bytes);
    cl->nvoters = cl->n < META_REPLICAS_MAX ? cl->n : META_REPLICAS_MAX;
    for (unsigned i = 0; i < cl->nvoters; i++) {
        cl->voters[i].id = cl->nodes[i].id;
        cl->voters[i].address = cl->nodes[i].raft;
        if (cl->nodes[i].id == cl->self)
            cl->voter = 1;
    }
    *out = cl;
    return 0;
}

const struct meta__node *meta__cluster_node(const struct meta__cluster *cl, uint64_t id)
{
    for (unsigned i = 0; i < cl->n; i++)
        if (cl->nodes[i].id == id)
            return &cl->nodes[i];
    return NULL;
}

void meta__cluster_destroy(struct meta__cluster *cl)
{
    if (cl == NULL)
        return;
    meta__router_destroy(cl);
    mg_free(cl);
}

/* ------------------------------------------------------------ manager rows */

void meta__cluster_node_row(const struct meta__node *n, struct mg_buf *v)
{
    char s[256];
    int len = snprintf(s, sizeof(s), "id=%llu s3=%s raft=%s rpc=%s state=up",
                       (unsigned long long)n->id, n->s3, n->raft, n->rpc);
    mg_buf_append(v, s, (size_t)len);
}

void meta__cluster_shard_row(const struct meta__cluster *cl, const struct meta__shard *s,
                             struct mg_buf *v)
{
    char s_[256];
    int len = snprintf(s_, sizeof(s_), "shard=%u lo=%llu hi=%llu epoch=%u replicas=", s->id,
                       (unsigned long long)s->lo_id, (unsigned long long)s->hi_id, s->epoch);
    for (unsigned i = 0; i < cl->nvoters && len < 200; i++)
        len += snprintf(s_ + len, sizeof(s_) - (size_t)len, "%s%llu", i ? "," : "",
                        (unsigned long long)cl->voters[i].id);
    mg_buf_append(v, s_, (size_t)len);
}

/* Put (k, v) into ws unless the row exists (overlay first). Returns 0 or MG_EIO. */
static int put_absent(struct meta_store *ms, struct meta_ws *ws, struct mg_buf *k, struct mg_buf *v)
{
    struct mg_buf cur;
    int found = 0;
    mg_buf_init(&cur);
    int rv = meta__get(ms, ENG_CF_META, k, &cur, &found);
    mg_buf_close(&cur);
    if (rv == 0 && !found)
        meta__ws_put(ws, k->base, k->len, v->base, v->len);
    return rv;
}

int meta__cluster_init_do(struct meta_store *ms, struct meta_op *op)
{
    (void)op;
    struct meta__shards *ss = ms->rt->shards;
    struct meta__cluster *cl = ss->cl;
    struct meta_ws *ws = meta__ws_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    int rv = 0;
    for (unsigned i = 0; i < cl->n && rv == 0; i++) {
        k.len = v.len = 0;
        meta__key_cluster_node(&k, cl->nodes[i].id);
        meta__cluster_node_row(&cl->nodes[i], &v);
        rv = put_absent(ms, ws, &k, &v);
    }
    for (unsigned i = 0; i < ss->n && rv == 0; i++) {
        if (!ss->shards[i].present)
            continue;
        k.len = v.len = 0;
        meta__key_cluster_shard(&k, ss->shards[i].id);
        meta__cluster_shard_row(cl, &ss->shards[i], &v);
        rv = put_absent(ms, ws, &k, &v);
    }
    if (rv == 0)
        rv = meta__shard_apply(&ms->shard, ws);
    mg_buf_close(&k);
    mg_buf_close(&v);
    meta__ws_destroy(ws);
    return rv;
}

static void on_init_done(struct meta_op *op)
{
    struct meta__cluster *cl = op->data;
    cl->manager_rows_inflight = 0;
    if (op->status == 0) {
        cl->manager_rows_done = 1;
        mg_log(MG_LOG_INFO, "event=manager_rows_written node=%llu", (unsigned long long)cl->self);
    }
    meta_op_destroy(op);
}

/* On the ready leader of shard 0: write the manager's rows once (the op writes only the
 * rows that are absent, so two leaders in a row write them once between them). */
static void maybe_write_manager_rows(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    if (cl->manager_rows_done || cl->manager_rows_inflight || ss->closing)
        return;
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_cluster_shard(&k, ss->shards[ss->n - 1].id);
    int have = eng_get(ss->ms->db, ENG_CF_META, k.base, k.len, &v) == 0;
    for (unsigned i = 0; i < cl->n && have; i++) { /* and a row for every node (members.c) */
        k.len = v.len = 0;
        meta__key_cluster_node(&k, cl->nodes[i].id);
        have = eng_get(ss->ms->db, ENG_CF_META, k.base, k.len, &v) == 0;
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
    if (have) {
        cl->manager_rows_done = 1;
        return;
    }
    struct meta__shard *s0 = &ss->shards[0];
    if (s0->g == NULL || !mraft_group_ready(s0->g))
        return;
    if (cl->client == NULL && meta_client_create(ss->ms, &ss->rt->loop, &cl->client) != 0)
        return;
    struct meta_op *op = meta_op_create(META_OP_BUCKET_UPDATE);
    op->type = META_OP__CLUSTER_INIT;
    op->data = cl;
    cl->manager_rows_inflight = 1;
    if (meta_op_submit(cl->client, op, on_init_done) != 0) {
        cl->manager_rows_inflight = 0;
        meta_op_destroy(op);
    }
}

/* ------------------------------------------------------------ timers */

static int cl_rows_done(const struct meta__shards *ss)
{
    return ss->cl->manager_rows_done; /* splits name their shards after the initial rows */
}

static void on_tick(uv_timer_t *t)
{
    struct meta__shards *ss = t->data;
    if (ss->closing)
        return;
    maybe_write_manager_rows(ss);
    if (cl_rows_done(ss))
        meta__split_tick(ss);
    meta__members_tick(ss);
}

int meta__cluster_start(struct meta__shards *ss, char *errmsg)
{
    struct meta__cluster *cl = ss->cl;
    const struct meta__node *me = meta__cluster_node(cl, cl->self);
    int rv = meta__router_listen(ss);
    if (rv == 0)
        rv = meta__install_listen(ss);
    if (rv == 0)
        rv = meta__members_listen(ss);
    if (rv == 0)
        rv = meta__remote_listen(ss->rt, me->rpc);
    if (rv != 0) {
        snprintf(errmsg, 256, "internal RPC on %s: %s (cluster.nodes rpc)", me->rpc,
                 mg_err_name(rv));
        return rv;
    }
    meta__members_load(ss); /* nodes that joined after this node's config was written */
    uv_timer_init(&ss->rt->loop, &cl->tick);
    cl->tick.data = ss;
    uv_timer_start(&cl->tick, on_tick, TICK_MS, TICK_MS);
    mg_log(MG_LOG_INFO, "event=cluster_start node=%llu nodes=%u voters=%u voter=%d rpc=%s",
           (unsigned long long)cl->self, cl->n, cl->nvoters, cl->voter, me->rpc);
    return 0;
}

void meta__cluster_stop(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    if (cl->tick.loop != NULL)
        uv_close((uv_handle_t *)&cl->tick, NULL);
    meta__split_stop(ss);
    if (cl->fences != NULL)
        meta__router_stop(ss);
    if (cl->client != NULL) {
        meta_client_destroy(cl->client);
        cl->client = NULL;
    }
}

/* ------------------------------------------------------------ admin figures */

#define ADMIN_KEYS_MAX 1000000 /* rows counted per shard and scrape (then "at least") */

/* Rows and their bytes in a shard's range (shard 0: id 0), counted on the calling thread
 * (RocksDB iterators are thread-safe). Budget: at most ADMIN_KEYS_MAX rows per shard;
 * *capped says it stopped. */
static void range_figures(struct meta_store *ms, uint32_t id, uint64_t lo_id, uint64_t hi_id,
                          uint64_t *keys, uint64_t *bytes, int *capped)
{
    struct mg_buf lo, hi, x;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    mg_buf_init(&x);
    if (id == 0) {
        meta__key_shard0_range(&lo, &hi);
    } else {
        meta__key_bucket_range(lo_id, &lo, &x);
        x.len = 0;
        if (hi_id != 0)
            meta__key_bucket_range(hi_id, &hi, &x);
        else
            meta__key_data_range(&x, &hi);
    }
    *keys = *bytes = 0;
    *capped = 0;
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t kl, vl;
        eng_iter_key(it, &kl);
        eng_iter_value(it, &vl);
        *bytes += kl + vl;
        if (++*keys >= ADMIN_KEYS_MAX) {
            *capped = 1;
            break;
        }
    }
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
    mg_buf_close(&x);
}

/* The manager's node rows as this node has applied them (0x02 'N' ·). */
static void render_node_rows(struct meta_store *ms, struct mg_buf *o)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_cluster_node(&lo, 0);
    meta__key_cluster_node(&hi, UINT64_MAX);
    struct eng_iter *it = eng_iter_create(ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t vl;
        const char *v = eng_iter_value(it, &vl);
        mg_buf_appendf(o, "metagate_cluster_node_row{row=\"");
        for (size_t i = 0; i < vl && i < 512; i++) /* label-safe: the row is our own text */
            mg_buf_appendf(o, "%c", v[i] == '"' || v[i] == '\\' || v[i] == '\n' ? '_' : v[i]);
        mg_buf_appendf(o, "\"} 1\n");
    }
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
}

void meta_cluster_render(struct meta_store *ms, struct mg_buf *o)
{
    if (ms->rt == NULL || ms->rt->shards == NULL || ms->rt->shards->cl == NULL)
        return;
    struct meta__shards *ss = ms->rt->shards;
    const struct meta__cluster *cl = ss->cl;
    struct meta_op_stats *st = mg_malloc(sizeof(*st));
    meta_op_stats_get(ms, st);
    char replicas[128];
    int rl = 0;
    for (unsigned i = 0; i < cl->nvoters; i++)
        rl += snprintf(replicas + rl, sizeof(replicas) - (size_t)rl, "%s%llu", i ? "," : "",
                       (unsigned long long)cl->voters[i].id);
    mg_buf_appendf(o,
                   "# HELP metagate_cluster_self This node's id.\n"
                   "# TYPE metagate_cluster_self gauge\nmetagate_cluster_self %llu\n",
                   (unsigned long long)cl->self);
    mg_buf_appendf(o, "# HELP metagate_cluster_node A node of the cluster (config).\n"
                      "# TYPE metagate_cluster_node gauge\n");
    pthread_mutex_lock(&ss->stats_lock); /* nodes join on the meta thread (members.c) */
    for (unsigned i = 0; i < cl->n; i++)
        mg_buf_appendf(o,
                       "metagate_cluster_node{node=\"%llu\",s3=\"%s\",raft=\"%s\",rpc=\"%s\"} 1\n",
                       (unsigned long long)cl->nodes[i].id, cl->nodes[i].s3, cl->nodes[i].raft,
                       cl->nodes[i].rpc);
    pthread_mutex_unlock(&ss->stats_lock);
    mg_buf_appendf(o, "# HELP metagate_cluster_node_row The manager's node rows (shard 0).\n"
                      "# TYPE metagate_cluster_node_row gauge\n");
    render_node_rows(ms, o);
    mg_buf_appendf(o, "# HELP metagate_shard_info A shard: bucket-id range [lo, hi) (hi 0: "
                      "the end), range epoch, replicas, known leader (0: none).\n"
                      "# TYPE metagate_shard_info gauge\n");
    /* The layout as applied here (a copy: splits change it on the meta thread), shard 0
     * first; the live figures are the last stats sample's, found by shard id. */
    struct meta__layout *l = mg_malloc(sizeof(*l));
    meta__shards_layout_get(ss, l);
    for (unsigned i = 0; i <= l->n; i++) {
        struct meta__layout_shard s = i == 0 ? (struct meta__layout_shard){.id = 0, .epoch = 1}
                                             : l->s[i - 1];
        const struct meta_shard_stats *sh = NULL;
        for (unsigned j = 0; j < st->nshards; j++)
            if (st->shards[j].shard_id == s.id)
                sh = &st->shards[j];
        uint64_t keys, bytes;
        int capped;
        range_figures(ms, s.id, s.lo, s.hi, &keys, &bytes, &capped);
        mg_buf_appendf(o,
                       "metagate_shard_info{shard=\"%u\",lo=\"%llu\",hi=\"%llu\",epoch=\"%u\","
                       "replicas=\"%s\",leader=\"%llu\",keys=\"%s%llu\",bytes=\"%llu\","
                       "applied=\"%llu\",standby=\"%s\"} 1\n",
                       s.id, (unsigned long long)s.lo, (unsigned long long)s.hi, s.epoch,
                       sh != NULL && sh->voters[0] != '\0' ? sh->voters : replicas,
                       (unsigned long long)(sh != NULL ? sh->leader_id : 0), capped ? ">=" : "",
                       (unsigned long long)keys, (unsigned long long)bytes,
                       (unsigned long long)(sh != NULL ? sh->applied_index : 0),
                       sh != NULL ? sh->standbys : "");
    }
    mg_free(l);
    mg_buf_appendf(o,
                   "# HELP metagate_cluster_forwarded_total Ops forwarded to a leader.\n"
                   "# TYPE metagate_cluster_forwarded_total counter\n"
                   "metagate_cluster_forwarded_total %llu\n"
                   "# HELP metagate_cluster_forward_retries_total Attempts retried.\n"
                   "# TYPE metagate_cluster_forward_retries_total counter\n"
                   "metagate_cluster_forward_retries_total %llu\n"
                   "# HELP metagate_cluster_read_index_calls_total READ_INDEX calls sent.\n"
                   "# TYPE metagate_cluster_read_index_calls_total counter\n"
                   "metagate_cluster_read_index_calls_total %llu\n",
                   (unsigned long long)cl->forwarded, (unsigned long long)cl->forward_retries,
                   (unsigned long long)cl->read_index_rpcs);
    mg_free(st);
}
