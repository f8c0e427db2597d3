/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checkpoint transfer for a replica that needs a snapshot (issue 10; raft/raft.h "out-of-band
 * install"; docs/cluster.md "Snapshots and installs"). A follower that fell behind its
 * leader's truncated log gets InstallSnapshot: a descriptor (index D), no data. Its shard's
 * install hook (shard.c on_install -> meta__install_step) then copies the shard's key range
 * from a peer over the internal RPC (META_RPC_CHECKPOINT), chunk by chunk, and reports the
 * index the copy covers.
 *
 * Source (any node whose shard is not installing and has applied >= D; the replica asks
 * the group's leader, whose applied index is >= its own snapshot's): the first request opens
 * a session: a RocksDB iterator over the shard's range, created on the meta thread, where
 * apply runs, so its implicit snapshot holds exactly the shard's state at A = s->applied
 * (>= D). Every request answers the next rows from that iterator, up to CHUNK_BYTES, with
 * A and the shard's layout row. At most SESSIONS_MAX sessions; one idle for SESSION_IDLE_MS
 * is dropped (its replica starts again).
 *
 * Replica: each chunk is committed to RocksDB as it arrives (the first one with a range
 * delete of the whole shard range before its rows), so memory is one chunk whatever the
 * shard's size, and the next chunk is asked only then (backpressure: one call in flight).
 * The shard's applied-index row is NOT written until the last chunk is in: meanwhile the
 * group is "installing" (raft/raft.h: not ready, no read fence passes, entries committed
 * meanwhile are deferred), and a crash leaves the applied row at its old value below the
 * persisted descriptor, so the restart installs again (core.c replay's install fallback).
 * When every chunk is in, the host's next install attempt (every 500 ms) writes the applied
 * row = A, sets s->applied, and hands back A; the host applies the deferred entries above A.
 *
 * Only the shard's own range moves: 0x02 (shard 0) or 0x03 · id in [lo, hi) (a data shard),
 * never node-local 0x01 rows, and only ENG_CF_META (apply writes nothing else). The
 * source's layout row for the shard must match the replica's (range and epoch): a split in
 * the skipped log is not handled yet (the replica keeps waiting, logged; docs/cluster.md
 * "Not done yet").
 *
 * Wire (little endian). Request: u32 shard | u64 min index D | u64 session (0: open one) |
 * u32 seq (chunk number, from 0). Reply (status 0): u64 session | u64 A | u32 seq |
 * u8 last | u32 epoch | u64 lo | u64 hi | u32 reserved (0) | rows { u32 klen | u32 vlen | key | value }.
 * Errors: MG_EBUSY (cannot serve now: applied < D, installing, too many sessions),
 * MG_ENOTFOUND (no such shard or session, or a seq out of order), MG_EBADREQUEST.
 *
 * Everything runs on the meta thread (the raft host's loop). Budget: one chunk (<= 1 MiB of
 * rows plus one row) read or written per call on the loop.
 */
#include <stdlib.h>
#include <string.h>

#define MG_MODULE "meta"
#include "common/config.h"
#include "meta/cluster.h"
#include "meta/install.h"
#include "meta/remote.h"
#include "meta/shard.h"

#define CHUNK_BYTES (1u << 20)
#define SESSIONS_MAX 4
#define SESSION_IDLE_MS 30000
#define CALL_TIMEOUT_MS 10000
#define REQ_LEN 24
#define HDR_LEN 45

struct ckpt_session {
    uint64_t id; /* 0: free slot */
    uint32_t shard;
    uint32_t seq; /* next chunk expected */
    uint64_t applied;
    struct eng_iter *it;
    int64_t used_ms;
};

struct meta__install_src {
    struct ckpt_session s[SESSIONS_MAX];
    uint64_t next_id;
};

struct meta__install {
    struct meta__shard *s;
    uint64_t want;      /* the descriptor's index D */
    uint64_t source;    /* node asked */
    uint64_t session;
    uint32_t seq;
    uint64_t covers;    /* the source's A */
    uint64_t rows, bytes;
    int64_t start_ms;
    int busy;           /* a call is in flight */
    int done;           /* every chunk is in RocksDB */
    int failed;         /* start again at the next attempt */
};

/* [lo, hi) of s's rows in ENG_CF_META. */
static void shard_range(const struct meta__shard *s, unsigned char lo[9], size_t *ll,
                        unsigned char hi[9], size_t *hl)
{
    if (s->id == 0) {
        lo[0] = META_K_SHARD0;
        hi[0] = META_K_SHARD0 + 1;
        *ll = *hl = 1;
        return;
    }
    lo[0] = META_K_DATA;
    for (int i = 0; i < 8; i++)
        lo[1 + i] = (unsigned char)(s->lo_id >> (56 - 8 * i));
    *ll = 9;
    if (s->hi_id == 0) {
        hi[0] = META_K_DATA + 1;
        *hl = 1;
        return;
    }
    hi[0] = META_K_DATA;
    for (int i = 0; i < 8; i++)
        hi[1 + i] = (unsigned char)(s->hi_id >> (56 - 8 * i));
    *hl = 9;
}

int meta__install_chunk_parse(const void *buf, size_t len, struct meta__install_chunk *c)
{
    const unsigned char *p = buf;
    if (len < HDR_LEN)
        return MG_ECORRUPT;
    c->session = mrpc_get64(p);
    c->applied = mrpc_get64(p + 8);
    c->seq = mrpc_get32(p + 16);
    c->last = p[20];
    c->epoch = mrpc_get32(p + 21);
    c->lo = mrpc_get64(p + 25);
    c->hi = mrpc_get64(p + 33);
    c->nrows = 0;
    if (c->last > 1 || mrpc_get32(p + 41) != 0)
        return MG_ECORRUPT;
    c->rows = p + HDR_LEN;
    c->rows_len = len - HDR_LEN;
    size_t pos = 0;
    while (pos < c->rows_len) {
        if (c->rows_len - pos < 8)
            return MG_ECORRUPT;
        uint64_t kl = mrpc_get32(c->rows + pos), vl = mrpc_get32(c->rows + pos + 4);
        if (kl == 0 || kl + vl > c->rows_len - pos - 8)
            return MG_ECORRUPT;
        pos += 8 + kl + vl;
        c->nrows++;
    }
    return 0;
}

int meta__install_chunk_next(const struct meta__install_chunk *c, size_t *pos, struct mg_str *k,
                             struct mg_str *v)
{
    if (*pos >= c->rows_len)
        return 0;
    const unsigned char *p = c->rows + *pos;
    size_t kl = mrpc_get32(p), vl = mrpc_get32(p + 4);
    k->base = (const char *)p + 8;
    k->len = kl;
    v->base = (const char *)p + 8 + kl;
    v->len = vl;
    *pos += 8 + kl + vl;
    return 1;
}

/* ------------------------------------------------------------------ source */

static void session_free(struct ckpt_session *x)
{
    if (x->it != NULL)
        eng_iter_destroy(x->it);
    memset(x, 0, sizeof(*x));
}

static struct ckpt_session *session_open(struct meta__shards *ss, struct meta__shard *s)
{
    struct meta__install_src *src = ss->install_src;
    int64_t now = meta__now_ms();
    struct ckpt_session *x = NULL;
    for (unsigned i = 0; i < SESSIONS_MAX && x == NULL; i++)
        if (src->s[i].id == 0)
            x = &src->s[i];
    for (unsigned i = 0; i < SESSIONS_MAX && x == NULL; i++)
        if (now - src->s[i].used_ms >= SESSION_IDLE_MS) {
            session_free(&src->s[i]);
            x = &src->s[i];
        }
    if (x == NULL)
        return NULL;
    unsigned char lo[9], hi[9];
    size_t ll, hl;
    shard_range(s, lo, &ll, hi, &hl);
    x->id = ++src->next_id;
    x->shard = s->id;
    x->seq = 0;
    x->applied = s->applied; /* the iterator's snapshot is this state: apply runs here */
    x->it = eng_iter_create(ss->ms->db, ENG_CF_META, lo, ll, hi, hl);
    x->used_ms = now;
    return x;
}

static void on_checkpoint_request(struct meta__rt *rt, void *data, struct mrpc_call *call,
                                  const void *payload, size_t len)
{
    (void)rt;
    struct meta__shards *ss = data;
    const unsigned char *p = payload;
    if (len != REQ_LEN) {
        mrpc_reply(call, MG_EBADREQUEST, NULL, 0);
        return;
    }
    uint32_t shard = mrpc_get32(p), seq = mrpc_get32(p + 20);
    uint64_t want = mrpc_get64(p + 4), sid = mrpc_get64(p + 12);
    if (ss->closing) {
        mrpc_reply(call, MG_ESHUTDOWN, NULL, 0);
        return;
    }
    if (shard >= ss->n || !ss->shards[shard].present || ss->shards[shard].g == NULL) {
        mrpc_reply(call, MG_ENOTFOUND, NULL, 0);
        return;
    }
    struct meta__shard *s = &ss->shards[shard];
    struct ckpt_session *x = NULL;
    if (sid == 0) {
        struct mraft_group_stats st;
        mraft_group_stats_get(s->g, &st);
        if (st.installing || s->reopening || s->applied < want ||
            (x = session_open(ss, s)) == NULL) {
            mrpc_reply(call, MG_EBUSY, NULL, 0);
            return;
        }
        mg_log(MG_LOG_INFO, "event=checkpoint_serve shard=%u session=%llu applied=%llu want=%llu",
               s->id, (unsigned long long)x->id, (unsigned long long)x->applied,
               (unsigned long long)want);
    } else {
        for (unsigned i = 0; i < SESSIONS_MAX && x == NULL; i++)
            if (ss->install_src->s[i].id == sid)
                x = &ss->install_src->s[i];
        if (x == NULL || x->shard != shard || x->seq != seq) {
            mrpc_reply(call, MG_ENOTFOUND, NULL, 0);
            return;
        }
    }
    struct mg_buf out;
    mg_buf_init(&out);
    unsigned char h[HDR_LEN];
    memset(h, 0, sizeof(h));
    mg_buf_append(&out, h, sizeof(h));
    while (eng_iter_valid(x->it) && out.len < CHUNK_BYTES) {
        size_t kl, vl;
        const char *k = eng_iter_key(x->it, &kl);
        const char *v = eng_iter_value(x->it, &vl);
        unsigned char rh[8];
        mrpc_put32(rh, (uint32_t)kl);
        mrpc_put32(rh + 4, (uint32_t)vl);
        mg_buf_append(&out, rh, 8);
        mg_buf_append(&out, k, kl);
        mg_buf_append(&out, v, vl);
        eng_iter_next(x->it);
    }
    int rv = eng_iter_status(x->it);
    int last = !eng_iter_valid(x->it);
    unsigned char *o = (unsigned char *)out.base;
    mrpc_put64(o, x->id);
    mrpc_put64(o + 8, x->applied);
    mrpc_put32(o + 16, x->seq);
    o[20] = (unsigned char)last;
    mrpc_put32(o + 21, s->epoch);
    mrpc_put64(o + 25, s->lo_id);
    mrpc_put64(o + 33, s->hi_id);
    x->seq++;
    x->used_ms = meta__now_ms();
    if (rv != 0)
        mrpc_reply(call, rv, NULL, 0);
    else
        mrpc_reply(call, 0, out.base, out.len);
    if (rv != 0 || last)
        session_free(x);
    mg_buf_close(&out);
}

int meta__install_listen(struct meta__shards *ss)
{
    ss->install_src = mg_calloc(1, sizeof(*ss->install_src));
    return meta__remote_handle(ss->rt, META_RPC_CHECKPOINT, on_checkpoint_request, ss);
}

/* ----------------------------------------------------------------- replica */

static void ask(struct meta__install *in);

static void fail(struct meta__install *in, const char *why, int err)
{
    mg_log(MG_LOG_WARN, "event=install_retry shard=%u source=%llu chunk=%u why=%s err=%s",
           in->s->id, (unsigned long long)in->source, in->seq, why, mg_err_name(err));
    in->busy = 0;
    in->failed = 1;
}

static void on_chunk(void *data, int status, const void *payload, size_t len)
{
    struct meta__install *in = data;
    struct meta__shard *s = in->s;
    if (s->ss->closing || s->install != in) { /* abandoned (close, or a newer descriptor) */
        if (s->install != in)
            mg_free(in);
        return;
    }
    if (status != 0) {
        fail(in, "rpc", status);
        return;
    }
    struct meta__install_chunk c;
    int rv = meta__install_chunk_parse(payload, len, &c);
    if (rv != 0 || c.seq != in->seq || (in->seq > 0 && c.session != in->session) ||
        c.applied < in->want) {
        fail(in, "reply", rv != 0 ? rv : MG_ECORRUPT);
        return;
    }
    if (c.epoch != s->epoch || c.lo != s->lo_id || c.hi != s->hi_id) {
        /* A split in the log this replica skipped: not handled yet (docs/cluster.md). */
        mg_log(MG_LOG_ERROR, "event=install_layout_mismatch shard=%u epoch=%u source_epoch=%u "
               "action=wait", s->id, s->epoch, c.epoch);
        fail(in, "layout", MG_ENOTIMPLEMENTED);
        return;
    }
    struct eng_batch *b = eng_batch_create();
    if (in->seq == 0) {
        unsigned char lo[9], hi[9];
        size_t ll, hl;
        shard_range(s, lo, &ll, hi, &hl);
        eng_batch_delete_range(b, ENG_CF_META, lo, ll, hi, hl);
    }
    size_t pos = 0;
    struct mg_str k, v;
    while (meta__install_chunk_next(&c, &pos, &k, &v) == 1) {
        if (meta__shard_of_key(s->ss, k.base, k.len) != s) {
            eng_batch_destroy(b);
            fail(in, "foreign_row", MG_ECORRUPT);
            return;
        }
        eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
    }
    rv = eng_batch_commit(s->ss->ms->db, b, 0);
    eng_batch_destroy(b);
    if (rv != 0) {
        fail(in, "write", rv);
        return;
    }
    in->session = c.session;
    in->covers = c.applied;
    in->rows += c.nrows;
    in->bytes += len;
    in->seq++;
    in->busy = 0;
    if (c.last)
        in->done = 1;
    else
        ask(in);
}

static void ask(struct meta__install *in)
{
    unsigned char req[REQ_LEN];
    mrpc_put32(req, in->s->id);
    mrpc_put64(req + 4, in->want);
    mrpc_put64(req + 12, in->seq == 0 ? 0 : in->session);
    mrpc_put32(req + 20, in->seq);
    int rv = meta__remote_call(in->s->ss->rt, in->source, META_RPC_CHECKPOINT, req, sizeof(req),
                               CALL_TIMEOUT_MS, on_chunk, in);
    if (rv != 0)
        fail(in, "call", rv);
    else
        in->busy = 1;
}

/* Every shard 0 row may have changed: no bucket cache slot may outlive it. */
static void invalidate_bucket_cache(struct meta_store *ms)
{
    for (size_t i = 0; i < META_BUCKET_CACHE_SLOTS; i++) {
        struct meta_bucket_cache_slot *slot = &ms->buckets.slots[i];
        pthread_mutex_lock(&slot->lock);
        atomic_fetch_add(&ms->buckets.gen, 1);
        slot->valid = 0;
        pthread_mutex_unlock(&slot->lock);
    }
}

/* The copy is in: the applied row = A, in one write. */
static int finish(struct meta__install *in, uint64_t *applied)
{
    struct meta__shard *s = in->s;
    struct eng_batch *b = eng_batch_create();
    struct mg_buf k, v;
    mg_buf_init(&k);
    mg_buf_init(&v);
    meta__key_applied(&k, s->id);
    meta__put_u64(&v, in->covers);
    eng_batch_put(b, ENG_CF_META, k.base, k.len, v.base, v.len);
    int rv = eng_batch_commit(s->ss->ms->db, b, 0);
    eng_batch_destroy(b);
    mg_buf_close(&k);
    mg_buf_close(&v);
    if (rv != 0)
        return rv;
    s->applied = in->covers;
    *applied = in->covers;
    s->ss->installs_done++;
    if (s->id == 0) {
        invalidate_bucket_cache(s->ss->ms);
        meta__members_load(s->ss); /* node rows it skipped: nodes that joined meanwhile */
    }
    mg_log(MG_LOG_INFO, "event=install_done shard=%u snapshot=%llu covers=%llu source=%llu "
           "rows=%llu bytes=%llu chunks=%u ms=%lld", s->id, (unsigned long long)in->want,
           (unsigned long long)in->covers, (unsigned long long)in->source,
           (unsigned long long)in->rows, (unsigned long long)in->bytes, in->seq,
           (long long)(meta__now_ms() - in->start_ms));
    meta__fence_applied(s);
    return 0;
}

int meta__install_step(struct meta__shard *s, const struct mraft_snapshot_desc *desc,
                       uint64_t *applied)
{
    struct meta__shards *ss = s->ss;
    struct meta__install *in = s->install;
    if (ss->cl == NULL || ss->closing)
        return MG_EBUSY;
    if (in != NULL && in->busy && in->want >= desc->index)
        return MG_EBUSY;
    if (in != NULL && in->done && in->covers >= desc->index) {
        int rv = finish(in, applied);
        if (rv != 0)
            return rv;
        s->install = NULL;
        mg_free(in);
        return 0;
    }
    if (in != NULL) { /* failed, or a newer descriptor: start again */
        s->install = NULL;
        if (!in->busy)
            mg_free(in); /* else on_chunk frees it */
    }
    uint64_t leader = s->g != NULL ? mraft_group_leader(s->g, NULL) : 0;
    if (leader == 0 || leader == ss->cl->self)
        return MG_EBUSY; /* no source known yet: the host retries */
    in = mg_calloc(1, sizeof(*in));
    in->s = s;
    in->want = desc->index;
    in->source = leader;
    in->start_ms = meta__now_ms();
    s->install = in;
    mg_log(MG_LOG_INFO, "event=install_start shard=%u snapshot=%llu applied=%llu source=%llu",
           s->id, (unsigned long long)desc->index, (unsigned long long)s->applied,
           (unsigned long long)leader);
    ask(in);
    return MG_EBUSY;
}

void meta__install_close(struct meta__shards *ss)
{
    for (unsigned i = 0; i < META_SHARDS_MAX; i++)
        if (ss->shards[i].install != NULL) {
            /* no call is in flight any more: the peers were destroyed first */
            mg_free(ss->shards[i].install);
            ss->shards[i].install = NULL;
        }
    if (ss->install_src != NULL)
        for (unsigned i = 0; i < SESSIONS_MAX; i++)
            session_free(&ss->install_src->s[i]);
    mg_free(ss->install_src);
    ss->install_src = NULL;
}
