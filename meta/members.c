/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adding a node to a running cluster (issue 10; docs/cluster.md "Membership"). Model: every
 * node replicates every shard's group, as a voter or as a libraft standby (it receives the
 * log and installs snapshots but does not vote), because a node serves every S3 read from
 * its own RocksDB after a fence (router.c). Each group has 3 voters (min(3, N)), placed by
 * a fixed rule over the node ids sorted: shard i's voters are nodes (i + j) mod N,
 * j = 0..2, so with more than 3 nodes the groups' voters spread over all of them.
 *
 * How a node joins: it is started with a node list that names it (the running nodes' lists
 * need not). Until its node row (0x02 'N' · id) is in its own RocksDB, it sends
 * META_RPC_JOIN (its row's text) to every node it knows, every second. A receiver learns
 * the node (its table, its RPC peer); the ready leader of shard 0 also writes the row
 * (the manager rows op writes absent rows), so every replica learns it when it applies the
 * row, and a restarted node reads the rows back at start. The ready leader of every group
 * then, one change at a time (each second): adds every known node missing from the group's
 * configuration as a standby; promotes a node the rule wants as voter (libraft catches it up
 * first; a node behind the truncated log installs a checkpoint, install.c); and then
 * demotes a voter the rule does not want to standby, handing leadership away first when
 * that voter is itself. So a group always keeps >= 3 voters.
 *
 * The node table changes on the meta thread only; the gateway's /metrics rendering reads
 * it under ss->stats_lock, which the changes take.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "meta/cluster.h"
#include "meta/remote.h"
#include "meta/shard.h"

#define META_RPC_JOIN 6 /* meta/remote.h method numbers: 1..5 are taken */
#define MEMBERS_EVERY_TICKS 5 /* the driver runs every 5 cluster ticks (1 s) */

static int cmp_id(const void *a, const void *b)
{
    const struct meta__node *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

int meta__members_learn(struct meta__shards *ss, uint64_t id, const char *s3, const char *raft,
                        const char *rpc)
{
    struct meta__cluster *cl = ss->cl;
    if (id == 0 || meta__cluster_node(cl, id) != NULL)
        return 0;
    if (cl->n >= META_NODES_MAX || strlen(s3) >= META_ADDR_MAX ||
        strlen(raft) >= META_ADDR_MAX || strlen(rpc) >= META_ADDR_MAX)
        return MG_EINVALIDARGUMENT;
    pthread_mutex_lock(&ss->stats_lock);
    struct meta__node *n = &cl->nodes[cl->n];
    memset(n, 0, sizeof(*n));
    n->id = id;
    memcpy(n->s3, s3, strlen(s3) + 1);
    memcpy(n->raft, raft, strlen(raft) + 1);
    memcpy(n->rpc, rpc, strlen(rpc) + 1);
    cl->n++;
    qsort(cl->nodes, cl->n, sizeof(cl->nodes[0]), cmp_id);
    pthread_mutex_unlock(&ss->stats_lock);
    /* cl->voters points into cl->nodes (bootstrap set: the lowest ids, which a node with a
     * higher id never displaces; re-point them after the sort all the same) */
    for (unsigned i = 0; i < cl->nvoters; i++)
        cl->voters[i].address = meta__cluster_node(cl, cl->voters[i].id)->raft;
    meta__remote_set_node(ss->rt, id, rpc);
    cl->manager_rows_done = 0; /* the manager writes the new node's row */
    mg_log(MG_LOG_INFO, "event=node_learned node=%llu raft=%s rpc=%s nodes=%u",
           (unsigned long long)id, raft, rpc, cl->n);
    return 1;
}

int meta__members_learn_row(struct meta__shards *ss, const char *v, size_t len)
{
    char text[512], s3[META_ADDR_MAX], raft[META_ADDR_MAX], rpc[META_ADDR_MAX];
    unsigned long long id = 0;
    if (len >= sizeof(text))
        return MG_EINVALIDARGUMENT;
    memcpy(text, v, len);
    text[len] = '\0';
    if (sscanf(text, "id=%llu s3=%63s raft=%63s rpc=%63s", &id, s3, raft, rpc) != 4)
        return MG_EINVALIDARGUMENT;
    return meta__members_learn(ss, id, s3, raft, rpc);
}

void meta__members_load(struct meta__shards *ss)
{
    struct mg_buf lo, hi;
    mg_buf_init(&lo);
    mg_buf_init(&hi);
    meta__key_cluster_node(&lo, 0);
    meta__key_cluster_node(&hi, UINT64_MAX);
    struct eng_iter *it =
        eng_iter_create(ss->ms->db, ENG_CF_META, lo.base, lo.len, hi.base, hi.len);
    for (; eng_iter_valid(it); eng_iter_next(it)) {
        size_t vl;
        const char *v = eng_iter_value(it, &vl);
        meta__members_learn_row(ss, v, vl);
    }
    eng_iter_destroy(it);
    mg_buf_close(&lo);
    mg_buf_close(&hi);
}

static void on_join_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                            const void *payload, size_t len)
{
    (void)rt;
    struct meta__shards *ss = data;
    int rv = meta__members_learn_row(ss, payload, len);
    mrpc_reply(call, rv < 0 ? MG_EBADREQUEST : 0, NULL, 0);
}

int meta__members_listen(struct meta__shards *ss)
{
    return meta__remote_handle(ss->rt, META_RPC_JOIN, on_join_request, ss);
}

static void on_join_reply(void *data, int status, const void *payload, size_t len)
{
    (void)data, (void)status, (void)payload, (void)len;
}

/* A joining node: its row is not in its own RocksDB yet. */
static void maybe_join(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    if (cl->joined)
        return;
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_cluster_node(&k, cl->self);
    cl->joined = eng_get(ss->ms->db, ENG_CF_META, k.base, k.len, &v) == 0;
    if (!cl->joined) {
        v.len = 0;
        meta__cluster_node_row(meta__cluster_node(cl, cl->self), &v);
        for (unsigned i = 0; i < cl->n; i++)
            if (cl->nodes[i].id != cl->self)
                meta__remote_call(ss->rt, cl->nodes[i].id, META_RPC_JOIN, v.base, v.len,
                                  META_REMOTE_TIMEOUT_MS, on_join_reply, NULL);
    }
    mg_buf_close(&k);
    mg_buf_close(&v);
}

/* Does the rule put node index k (in cl->nodes) among shard's voters? */
static int wanted(const struct meta__cluster *cl, uint32_t shard, unsigned k)
{
    if (cl->n <= META_REPLICAS_MAX)
        return 1;
    unsigned start = shard % cl->n;
    return (k + cl->n - start) % cl->n < META_REPLICAS_MAX;
}

static void on_change_done(void *data, int status)
{
    struct meta__shard *s = data;
    if (status != 0)
        mg_log(MG_LOG_WARN, "event=member_change_failed shard=%u err=%s", s->id,
               mg_err_name(status));
}

static int role_of(const struct mraft_member *m, unsigned n, uint64_t id)
{
    for (unsigned i = 0; i < n; i++)
        if (m[i].id == id)
            return (int)m[i].role;
    return -1;
}

/* One change at most on a group this node leads (see the file comment). */
static void place(struct meta__shards *ss, struct meta__shard *s)
{
    struct meta__cluster *cl = ss->cl;
    struct mraft_member m[META_NODES_MAX];
    unsigned n = mraft_group_members(s->g, m, META_NODES_MAX);
    const struct meta__node *pick = NULL;
    enum mraft_member_role role = MRAFT_MEMBER_STANDBY;
    const char *why = NULL;
    for (unsigned k = 0; k < cl->n && pick == NULL; k++)
        if (role_of(m, n, cl->nodes[k].id) < 0) {
            pick = &cl->nodes[k];
            why = "add";
        }
    for (unsigned k = 0; k < cl->n && pick == NULL; k++)
        if (wanted(cl, s->id, k) && role_of(m, n, cl->nodes[k].id) != MRAFT_MEMBER_VOTER) {
            pick = &cl->nodes[k];
            role = MRAFT_MEMBER_VOTER;
            why = "promote";
        }
    for (unsigned k = 0; k < cl->n && pick == NULL; k++)
        if (!wanted(cl, s->id, k) && role_of(m, n, cl->nodes[k].id) == MRAFT_MEMBER_VOTER) {
            if (cl->nodes[k].id == cl->self) { /* hand leadership to a wanted voter first */
                for (unsigned j = 0; j < cl->n; j++)
                    if (wanted(cl, s->id, j) && cl->nodes[j].id != cl->self &&
                        mraft_group_transfer(s->g, cl->nodes[j].id) == 0) {
                        mg_log(MG_LOG_INFO, "event=member_transfer shard=%u to=%llu", s->id,
                               (unsigned long long)cl->nodes[j].id);
                        break;
                    }
                return;
            }
            pick = &cl->nodes[k];
            why = "demote";
        }
    if (pick == NULL)
        return;
    int rv = mraft_group_assign(s->g, pick->id, pick->raft, role, on_change_done, s);
    mg_log(rv == 0 ? MG_LOG_INFO : MG_LOG_WARN, "event=member_change shard=%u node=%llu op=%s "
           "err=%s", s->id, (unsigned long long)pick->id, why, rv == 0 ? "none" : mg_err_name(rv));
}

void meta__members_tick(struct meta__shards *ss)
{
    struct meta__cluster *cl = ss->cl;
    if (++cl->members_ticks % MEMBERS_EVERY_TICKS != 0 || ss->closing)
        return;
    if (mg_env_u64("MG_FAULT_NO_MEMBERS", 0))
        return; /* fault switch (test_cluster_join shows it fails): nobody joins or moves */
    maybe_join(ss);
    for (unsigned i = 0; i < ss->n; i++) {
        struct meta__shard *s = &ss->shards[i];
        if (s->present && s->g != NULL && !s->reopening && mraft_group_ready(s->g))
            place(ss, s);
    }
}

void meta__members_replicas(struct meta__shard *s, char *out, size_t n, int voters)
{
    struct mraft_member m[META_NODES_MAX];
    unsigned k = s->g != NULL && !s->reopening ? mraft_group_members(s->g, m, META_NODES_MAX)
                                                : 0;
    size_t len = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < k; i++) {
        if ((m[i].role == MRAFT_MEMBER_VOTER) != (voters != 0) || len + 24 >= n)
            continue;
        len += (size_t)snprintf(out + len, n - len, "%s%llu", len ? "," : "",
                                (unsigned long long)m[i].id);
    }
}
