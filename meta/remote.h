/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals: an op over the wire (issue 10), both ends, on the meta
 * thread's loop (struct meta__rt's loop, where ops execute). The server end
 * (meta__remote_listen) answers the methods below on an internal RPC port
 * (meta/rpc.h): META_RPC_OP decodes an op (meta/opcodec.h) and submits it to
 * this node's meta thread exactly as a local client would (meta_op_submit:
 * the same bounded queue, parking, dedup by request id, Raft proposal), and
 * replies with its status and results once it completed; META_RPC_READ_INDEX
 * is the read fence: leadership of a shard confirmed by mraft_group_read,
 * answered with the applied index. Other methods (the router's route refresh,
 * checkpoint streaming) are registered with meta__remote_handle. The client
 * end keeps one struct mrpc_peer per node id, created on first use, the node
 * id -> RPC address map coming from meta_opts.cluster (and
 * meta__remote_set_node for nodes that joined later).
 *
 * Payloads of the two built-in methods (little endian):
 *   META_RPC_OP          request: opcodec "in"; reply (rpc status 0): opcodec "out"
 *                        (the op's status + results). An rpc status != 0 means the op
 *                        never ran: MG_EBADREQUEST (undecodable), MG_ESLOWDOWN (the meta
 *                        thread's queue is full), MG_ESHUTDOWN (store closing).
 *   META_RPC_READ_INDEX  request: u32 shard id; reply: u64 applied index (status 0), or
 *                        status MG_ENOTLEADER with u64 leader id (0: unknown), or
 *                        MG_ENOTFOUND (no such shard here), MG_ESHUTDOWN, MG_EIO, ...
 *
 * Everything here runs on rt's loop (the meta thread): call every function from it and
 * every callback fires on it.
 */
#ifndef MG_META_REMOTE_H
#define MG_META_REMOTE_H

#include "meta/op.h"
#include "meta/rpc.h"

enum {
    META_RPC_OP = 1,         /* forward an op to the node that leads its shard */
    META_RPC_READ_INDEX = 2, /* read fence on a shard's leader */
    META_RPC_ROUTE = 3,      /* reserved: route refresh (the router registers it) */
    META_RPC_CHECKPOINT = 4, /* reserved: a shard checkpoint for a replica (issue 10) */
    META_RPC__MAX = 32,      /* method numbers are < this */
};

#define META_REMOTE_TIMEOUT_MS 5000 /* default per-call timeout of meta__remote_exec */

/* Handler of a registered method: as mrpc_handler_fn, on rt's loop; answer call with
 * mrpc_reply exactly once. payload is borrowed for the call only. */
typedef void (*meta__remote_handler_fn)(struct meta__rt *rt, void *data, struct mrpc_call *call,
                                        const void *payload, size_t len);

/* Serve the methods on address ("a.b.c.d:port"; port 0: a free one, see
 * meta__remote_port). Nodes of rt->ms->opts.cluster (when set) are registered as peers.
 * Errors: MG_ECONFIG (bad address), MG_EIO (bind/listen), MG_EINVALIDARGUMENT (already
 * listening). */
int meta__remote_listen(struct meta__rt *rt, const char *address);
/* The port meta__remote_listen bound, or 0. */
int meta__remote_port(struct meta__rt *rt);

/* Register fn for method (< META_RPC__MAX; META_RPC_OP and META_RPC_READ_INDEX are built
 * in, re-registering one replaces it). Before or after listen. Unregistered methods are
 * answered MG_ENOTIMPLEMENTED. Returns 0 or MG_EINVALIDARGUMENT. */
int meta__remote_handle(struct meta__rt *rt, uint16_t method, meta__remote_handler_fn fn,
                        void *data);

/* Map node_id to its RPC address (copied), replacing an earlier mapping (its peer is
 * destroyed: outstanding calls to it fail with MG_ESHUTDOWN). */
void meta__remote_set_node(struct meta__rt *rt, uint64_t node_id, const char *rpc_address);

/* Per-call timeout of meta__remote_exec (default META_REMOTE_TIMEOUT_MS). */
void meta__remote_set_timeout(struct meta__rt *rt, unsigned timeout_ms);

/* Execute op on node node_id: encode op->in (a mutation with request_id 0 first gets a
 * fresh one, written into op->in.request_id, so that a retry of the same op dedups),
 * call META_RPC_OP, and on the reply decode the results into op->out (allocated from the
 * op, like a local op's). op->status is left alone (meta__op_complete sets it). Returns 0:
 * done(op, status) runs exactly once, later, with the op's status on the remote node, or
 *   MG_ETIMEOUT / MG_EIO   the outcome is UNKNOWN (retry with the same op: same id);
 *   MG_ESLOWDOWN / MG_ESHUTDOWN / MG_EBADREQUEST   the op never ran there;
 *   MG_ECORRUPT            the reply did not decode (it did run).
 * Data ownership (PUT, PUT_PART) is as for meta_op_submit: the op's data travels by
 * reference (extents verbatim) and the remote node owns it once the op ran there.
 * Errors (done never runs): MG_ENOTFOUND (no address for node_id), MG_ESLOWDOWN (the
 * peer's max_inflight calls are outstanding), MG_EENTITYTOOLARGE (op over
 * MRPC_PAYLOAD_MAX), MG_ESHUTDOWN. */
int meta__remote_exec(struct meta__rt *rt, uint64_t node_id, struct meta_op *op,
                      void (*done)(struct meta_op *op, int status));

/* META_RPC_READ_INDEX on node_id for shard_id. cb gets 0 and the callee's applied index,
 * or MG_ENOTLEADER and its leader hint (0: unknown), or an error as meta__remote_exec's.
 * Errors (cb never runs): as mrpc_call, plus MG_ENOTFOUND. */
typedef void (*meta__remote_read_cb)(void *data, int status, uint64_t applied_index,
                                     uint64_t leader_hint);
int meta__remote_read_index(struct meta__rt *rt, uint64_t node_id, uint32_t shard_id,
                            unsigned timeout_ms, meta__remote_read_cb cb, void *data);

/* Any method on node_id (route refresh and the like): mrpc_call on its peer. Errors: as
 * mrpc_call, plus MG_ENOTFOUND (no address for node_id). */
int meta__remote_call(struct meta__rt *rt, uint64_t node_id, uint16_t method,
                      const void *payload, size_t len, unsigned timeout_ms, mrpc_cb cb,
                      void *data);

/* Stop serving (calls not answered yet are dropped when they finish), destroy every peer
 * (outstanding calls fail with MG_ESHUTDOWN), wait for the ops in flight to complete, and
 * release everything; cb (may be NULL) then runs. Must run before the meta loop stops (the
 * handles keep it alive). No-op (cb runs at once) when nothing was created. */
void meta__remote_close(struct meta__rt *rt, void (*cb)(struct meta__rt *rt));

#endif
