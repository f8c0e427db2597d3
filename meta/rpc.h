/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meta/ internals: the internal RPC between nodes (issue 10 "Internal RPC").
 * A binary, framed, pipelined request/response protocol on libuv TCP: the
 * cluster's router forwards ops to a shard's leader with it (meta/remote.h)
 * and asks for read fences and route refreshes. One TCP connection per peer,
 * many calls in flight on it, replies in any order (matched by call id).
 *
 * Frame (little endian, MRPC_HDR_LEN = 24 bytes, then the payload):
 *   u32 magic "MRPC" | u8 version (1) | u8 kind (1 request, 2 response) |
 *   u16 method | u64 call id | i32 status (requests: 0; responses: enum mg_err) |
 *   u32 payload length (<= MRPC_PAYLOAD_MAX)
 * A frame the decoder refuses (bad magic, version, kind, a request with a
 * status, a length over the bound) closes that connection only; nothing here
 * asserts on input.
 *
 * Bounds (STYLE.md 7a): a server connection holds at most max_inflight calls
 * its handler has not answered and MRPC_OUT_MAX bytes of replies not yet
 * written; past either it stops reading the socket (TCP backpressure reaches
 * the sender) and resumes when calls finish. A peer holds at most
 * max_inflight outstanding calls; past it mrpc_call answers MG_ESLOWDOWN.
 *
 * Threading: every object lives on the libuv loop that created it; every
 * function is called on that loop's thread and every callback fires on it.
 * Nothing here is thread-safe. Errors are enum mg_err values (common/err.h).
 */
#ifndef MG_META_RPC_H
#define MG_META_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define MRPC_MAGIC 0x4350524du /* "MRPC" read as a little-endian u32 */
#define MRPC_VERSION 1
#define MRPC_HDR_LEN 24
#define MRPC_PAYLOAD_MAX (64u << 20) /* larger payloads are refused: MG_EENTITYTOOLARGE */
#define MRPC_OUT_MAX (8u << 20)      /* server: unwritten reply bytes before reads stop */
#define MRPC_SERVER_INFLIGHT_MAX 256 /* default unanswered calls per server connection */
#define MRPC_PEER_INFLIGHT_MAX 1024  /* default outstanding calls per peer */
#define MRPC_CONNECT_TIMEOUT_MS 1000 /* default */
#define MRPC_BACKOFF_MIN_MS 20       /* reconnect backoff after a failed connect: doubles */
#define MRPC_BACKOFF_MAX_MS 2000     /* up to this, with jitter (a random 50..100% of it) */

enum mrpc_kind {
    MRPC_KIND_REQUEST = 1,
    MRPC_KIND_RESPONSE = 2,
};

/* ------------------------------------------------------------ the frame */

struct mrpc_hdr {
    uint8_t kind;     /* enum mrpc_kind */
    uint16_t method;  /* the caller's method number (meta/remote.h META_RPC_*) */
    uint64_t call_id; /* chosen by the caller, echoed in the response */
    int32_t status;   /* responses: 0 or an mg_err; requests: 0 */
    uint32_t len;     /* payload bytes after the header */
};

/* Little-endian integers at p (the frame's and the methods' payloads). */
void mrpc_put32(unsigned char *p, uint32_t v);
void mrpc_put64(unsigned char *p, uint64_t v);
uint32_t mrpc_get32(const unsigned char *p);
uint64_t mrpc_get64(const unsigned char *p);

/* Write h (magic and version added) into out. h must be valid (asserted). */
void mrpc_hdr_encode(const struct mrpc_hdr *h, unsigned char out[MRPC_HDR_LEN]);

/* Parse the frame at the start of (buf, len), bytes off the wire. Returns 0 with *frame_len
 * 0 when more bytes are needed (len < header, or the payload is incomplete), or 0 with
 * *frame_len = MRPC_HDR_LEN + h->len when the whole frame is there (the payload is at
 * buf + MRPC_HDR_LEN). Errors: MG_ECORRUPT (magic, version, kind, a request carrying a
 * status, a negative status), MG_EENTITYTOOLARGE (length over MRPC_PAYLOAD_MAX; known from
 * the header alone). Never asserts on buf's bytes. */
int mrpc_frame_parse(const void *buf, size_t len, struct mrpc_hdr *h, size_t *frame_len);

/* ---------------------------------------------------------------- server */

struct mrpc_server;
struct mrpc_call;

/* A request arrived. payload is borrowed for this call only (copy what outlives it). The
 * handler answers with mrpc_reply exactly once, now or later on the same loop. */
typedef void (*mrpc_handler_fn)(void *data, struct mrpc_call *call, uint16_t method,
                                const void *payload, size_t len);

/* Listen on address ("a.b.c.d:port"; port 0: a free one, see mrpc_server_port) and call
 * handler for every request. Errors: MG_ECONFIG (bad address), MG_EIO (bind/listen failed,
 * e.g. port in use). On success *out owns the server until mrpc_server_destroy. */
int mrpc_server_create(uv_loop_t *loop, const char *address, mrpc_handler_fn handler, void *data,
                       struct mrpc_server **out);

/* Per-connection bound on unanswered calls for connections accepted from now on (default
 * MRPC_SERVER_INFLIGHT_MAX; >= 1). */
void mrpc_server_set_max_inflight(struct mrpc_server *s, unsigned max_inflight);

/* The bound port (host order). */
int mrpc_server_port(const struct mrpc_server *s);

/* Answer call with status (0 or an mg_err) and payload (copied; may be NULL when len is 0).
 * Exactly once per call; call is freed by it. If the connection died (or the server was
 * destroyed) meanwhile, the reply is dropped and call freed all the same. A payload over
 * MRPC_PAYLOAD_MAX is replaced by status MG_EINTERNAL and no payload (logged). */
void mrpc_reply(struct mrpc_call *call, int status, const void *payload, size_t len);

/* Stop listening and close every connection; calls not answered yet stay valid until their
 * handler replies (the reply is dropped). cb (may be NULL) fires once every handle is
 * closed, then s is freed. */
void mrpc_server_destroy(struct mrpc_server *s, void (*cb)(void *data), void *data);

/* ---------------------------------------------------------------- client */

struct mrpc_peer;

struct mrpc_peer_opts {
    unsigned max_inflight;       /* outstanding calls (0: MRPC_PEER_INFLIGHT_MAX) */
    unsigned connect_timeout_ms; /* 0: MRPC_CONNECT_TIMEOUT_MS */
    unsigned backoff_min_ms;     /* 0: MRPC_BACKOFF_MIN_MS */
    unsigned backoff_max_ms;     /* 0: MRPC_BACKOFF_MAX_MS */
};

/* A call's outcome: status is the server's reply status (0 or an mg_err, with its payload,
 * borrowed for the callback only), or one of
 *   MG_ETIMEOUT   no reply within timeout_ms (the request may have executed);
 *   MG_EIO        the connection failed (connect refused or timed out, reset, a garbage
 *                 frame): the outcome is UNKNOWN, so a mutation is retried with the same
 *                 request id (DESIGN.md 6);
 *   MG_ESHUTDOWN  the peer was destroyed first.
 * A reply whose status is no mg_err this build knows arrives as MG_EINTERNAL. */
typedef void (*mrpc_cb)(void *data, int status, const void *payload, size_t len);

/* A client of the server at address ("a.b.c.d:port"). Nothing is connected until the first
 * call; a lost connection is re-opened by the next call, and a failed connect is retried
 * after an exponential backoff with jitter (MRPC_BACKOFF_*). Calls made while connecting or
 * backing off wait (up to their timeout) for the connection. opts may be NULL (defaults).
 * Errors: MG_ECONFIG (bad address). */
int mrpc_peer_create(uv_loop_t *loop, const char *address, const struct mrpc_peer_opts *opts,
                     struct mrpc_peer **out);

/* Send a request (payload copied; NULL when len is 0). timeout_ms 0: no timeout. Returns 0:
 * cb(data, ...) runs exactly once, later (never inside this call). Errors (cb never runs):
 * MG_ESLOWDOWN (max_inflight calls outstanding), MG_EENTITYTOOLARGE (len over
 * MRPC_PAYLOAD_MAX), MG_ESHUTDOWN (the peer is being destroyed). */
int mrpc_call(struct mrpc_peer *p, uint16_t method, const void *payload, size_t len,
              unsigned timeout_ms, mrpc_cb cb, void *data);

/* Outstanding calls (sent or waiting for the connection). */
unsigned mrpc_peer_inflight(const struct mrpc_peer *p);

/* Fail every outstanding call with MG_ESHUTDOWN (their callbacks run inside this call),
 * close the connection; cb (may be NULL) fires once every handle is closed, then p is
 * freed. Calling mrpc_call afterwards is a programmer error. */
void mrpc_peer_destroy(struct mrpc_peer *p, void (*cb)(void *data), void *data);

#endif
