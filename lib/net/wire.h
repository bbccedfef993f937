/* wire.h - point-to-point messages between ranks on different nodes of a multi-node
 * communicator: one TCP connection per ordered pair of ranks, opened by the sender with its
 * first message and used by it alone. Messages on the wire are frames (frame.h): a FRAME_P2P
 * header, then the payload; a FRAME_BYE ends a connection cleanly. Matching follows MPI's
 * rules, with the node's own engine (lib/core/p2p.h) taking the messages of the node's ranks:
 * lib/hier/p2p.c joins the two. docs/ARCHITECTURE.md ("Point-to-point across nodes") has the
 * protocol, and ("The transport") why the wire has a thread where the leaders' mesh has none.
 *
 * Threads. Two kinds of thread touch a wire, and one mutex guards all of its state; nobody
 * holds it while blocked (every socket is non-blocking; the wire thread lets it go around its
 * poll()):
 *
 *   the caller: the thread inside the communicator (every call below but break is the
 *     caller's; the progress thread never calls them). At a send it opens the connection if
 *     there is none and writes the frame while the socket takes it, so a small message costs
 *     no wake-up; in done it writes more of its own send, or reads its own receive's peer,
 *     and alone resolves receives from WIRE_ANY (their local halves are the node engine's,
 *     which only the caller may touch: claimed and cancel).
 *   the wire thread: one per rank, started by its first call that crosses nodes (a probe
 *     included), all signals blocked, sleeping in poll() on the listener, its connections
 *     and an eventfd. It accepts, finishes connects, writes what a send's first try left,
 *     reads every connection: a header is matched against the posted receives and its
 *     payload read into the receive's buffer, or into one of the wire's own (an unexpected
 *     message); it never gives a message to a receive from WIRE_ANY nor to one posted after
 *     it. So a send completes once the kernel holds its bytes, whatever its size and whether
 *     the receiver calls in or not, and a peer's death is seen when its connection ends.
 *
 * Either thread that completes an operation or queues a message calls cfg.wake; either that
 * finds a failure fails every operation, shuts every connection and calls cfg.broke, the
 * mutex held. break is for any thread and signal handlers: it writes the eventfd only; the
 * thread also reads cfg.broken every POLL_MS (wire.c), which is how a break nobody told it of
 * reaches it (another rank of the node aborting it, through the node's shared word). open,
 * setup and close are the creating and the destroying thread's, with nothing outstanding and
 * no other caller. */
#ifndef SHMCOLL_NET_WIRE_H
#define SHMCOLL_NET_WIRE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/list.h"
#include "lib/net/frame.h"

struct shmcoll_wire;

/* A receive's source that any rank matches, and a tag that any tag matches (lib/core/p2p.h's
 * P2P_ANY, which lib/hier/p2p.c checks is the same). */
#define WIRE_ANY (-1)

enum wire_kind { WIRE_SEND = 1, WIRE_RECV };

/* The longest text shmcoll__wire_cause gives, with its NUL: room for the caller's prefix in
 * a communicator's message. */
#define WIRE_CAUSE_MAX 256

/* What the wire knows of the communicator it serves, given at open: the job's shape and
 * functions of the layers above it, called with ctx. The wire sits in lib/net, below the node
 * communicator and lib/hier, so it reaches them only through these:
 *
 * broken: whether the communicator broke or was aborted (its own word, its node's, the node's
 *   shared abort word); only loads, so the wire thread may look every POLL_MS without a lock,
 *   which is how a break by another rank of the node reaches it.
 * broke: called once when the wire fails (from its thread or a caller's, with the wire's
 *   mutex held) after failing its own operations and shutting its connections; why: a
 *   positive errno.
 * wake: rings the bell the caller's thread sleeps on in its waits (from either thread, the
 *   mutex held): after an operation completes or a message is queued.
 * claimed, cancel: a receive from WIRE_ANY has a local half (irecv's local) posted on the
 *   node's engine. claimed: whether that half has matched a message of the node (the wire's
 *   proxy is then withdrawn); cancel: takes the half back, not matched, when the wire gives
 *   the receive a message of another node. Both from the caller's thread only. */
struct shmcoll_wire_cfg {
	int rank, size; /* global */
	int nnodes, node, nproc;
	int nctx; /* a message's context is below it */
	void *ctx;
	int (*broken)(void *ctx);
	void (*broke)(void *ctx, int why);
	void (*wake)(void *ctx);
	int (*claimed)(void *ctx, void *local);
	void (*cancel)(void *ctx, void *local);
};

/* One send or receive over the wire. Between its start and its completion (done, read with
 * acquire) it belongs to the wire; then to the caller again. */
struct wire_op {
	struct shmcoll_link link; /* the list it is on: posted receives, or its peer's sends */
	const char *fn;
	int kind;           /* WIRE_SEND or WIRE_RECV */
	int peer, tag, ctx; /* send: dest; recv: source or WIRE_ANY, tag or WIRE_ANY */
	uint8_t *buf;       /* send: the message; recv: where it goes */
	size_t bytes;       /* send: the message's; recv: the capacity */
	void *any;          /* recv from WIRE_ANY: the local half, posted on the node */
	_Atomic int done;   /* complete: rc, and a receive's results, are set */
	int rc;             /* 0, -EMSGSIZE (a receive cut short) or the error */
	int src, rtag;      /* recv: the message's sender (global rank) and tag */
	uint64_t total;     /* recv: the message's bytes */
	size_t got;         /* recv: bytes written into buf */
	size_t off;         /* send: bytes of header and payload written */
	uint8_t hdr[SHMCOLL_FRAME_BYTES]; /* send: its header */
};

/* At create, after the leaders connected, in two halves around the exchange of addresses,
 * which the caller (shmcoll__hier_create) makes with the communicator's collectives: the wire
 * needs every rank's address and calls nothing above it to get them.
 *
 * open: this rank's wire for the communicator cfg describes, with a listener on host (the
 * host part of its leader's address) whose "host:port" goes into addr. 0, or -ENOMEM or the
 * listener's error (nothing is left: *out is NULL).
 *
 * setup: once every rank's open succeeded and the caller gathered their addresses (size
 * entries, in rank order, from calloc): w takes addrs, freed at close. */
int shmcoll__wire_open(const struct shmcoll_wire_cfg *cfg, const char *host, const char *token,
                       struct shmcoll_wire **out, char *addr, size_t addrlen);
void shmcoll__wire_setup(struct shmcoll_wire *w, char (*addrs)[SHMCOLL_ADDR_MAX]);

/* At destroy (nothing outstanding): ends every connection this rank opened with a
 * FRAME_BYE, stops the thread, closes everything. */
void shmcoll__wire_close(struct shmcoll_wire *w);

/* Tells the thread the communicator broke: it shuts every connection down, so the peers
 * learn at once, and fails what is outstanding. Async-signal-safe. */
void shmcoll__wire_break(struct shmcoll_wire *w);

/* Start an operation to or from a rank on another node (a receive from WIRE_ANY with local
 * its local half, posted on the node's engine with the same source and tag: see claimed and
 * cancel above). Arguments are
 * checked. An operation may be complete when these return; -ENOMEM (the thread could not be
 * started) completes it with the error. */
void shmcoll__wire_isend(struct shmcoll_wire *w, struct wire_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag, int ctx);
void shmcoll__wire_irecv(struct shmcoll_wire *w, struct wire_op *op, const char *fn, void *buf,
                         size_t bytes, int source, int tag, int ctx, void *local);

/* Whether op is complete (acquire). First does the caller's half of matching (the thread
 * leaves it every message a receive from WIRE_ANY posted earlier could take): each such
 * receive takes the earliest matching message that arrived unless its local half matched
 * first, and the receives after it take what it left; and moves op's own bytes while the
 * caller spins. Called with the communicator held, by the waits and tests. */
int shmcoll__wire_done(struct shmcoll_wire *w, struct wire_op *op);

/* Withdraws a receive from WIRE_ANY whose local half matched: it leaves the posted list
 * (nothing else happens to it). */
void shmcoll__wire_withdraw(struct shmcoll_wire *w, struct wire_op *op);

/* The earliest arrived message from a remote rank that a receive of (source, tag, ctx) would
 * take: 1 with its sender, tag and bytes, else 0. */
int shmcoll__wire_peek(struct shmcoll_wire *w, int source, int tag, int ctx, int *src, int *rtag,
                       uint64_t *bytes);

/* The error that failed the wire (0: none) and why, into buf. */
int shmcoll__wire_cause(struct shmcoll_wire *w, char *buf, size_t len);

/* Completes every outstanding operation with rc (the communicator broke). */
void shmcoll__wire_fail_all(struct shmcoll_wire *w, int rc);

/* Operations started and not complete. */
unsigned shmcoll__wire_active(struct shmcoll_wire *w);

#endif
