/* wire.h - point-to-point messages between ranks on different nodes of a multi-node
 * communicator: one TCP connection per ordered pair of ranks, opened by the sender with its
 * first message and used by it alone, and a thread of each rank's own that moves the bytes
 * (started by the rank's first point-to-point call that crosses nodes). Messages on the wire
 * are frames (lib/net/frame.h): a FRAME_P2P header, then the payload; a FRAME_BYE ends a
 * connection cleanly. Matching follows MPI's rules, with the node's own engine (lib/core/p2p.h)
 * taking the messages of the node's ranks: lib/hier/p2p.c joins the two.
 *
 * The thread reads a header, matches it against the receives posted here, and reads the
 * payload straight into the matching receive's buffer, or into a buffer of its own (an
 * unexpected message) when none matches. Sends are written by the caller's thread while the
 * socket takes them and by the wire thread after that, so a send completes once the kernel
 * holds its bytes. docs/ARCHITECTURE.md ("Point-to-point across nodes") has the protocol. */
#ifndef SHMCOLL_HIER_WIRE_H
#define SHMCOLL_HIER_WIRE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/net/frame.h"

struct shmcoll_node;
struct shmcoll_p2p_op;
struct shmcoll_wire;

/* What the wire knows of the communicator it serves, given at open: the job's shape, the
 * node communicator whose ranks' waits it wakes and whose failure it watches, and the
 * communicator's own broken word (also watched) and break, which the wire calls when it
 * fails (from its thread or a caller's) after failing its own operations and shutting its
 * connections. So the wire calls nothing of lib/hier: it sits below it. */
struct shmcoll_wire_cfg {
	int rank, size; /* global */
	int nnodes, node, nproc;
	struct shmcoll_node *local;
	_Atomic int *broken;
	void (*broke)(void *ctx, int why); /* why: a positive errno */
	void *ctx;
};

/* One send or receive over the wire. Between its start and its completion (done, read with
 * acquire) it belongs to the wire; then to the caller again. */
struct wire_op {
	struct wire_op *next, *prev; /* the list it is on: posted receives, or its peer's sends */
	const char *fn;
	int kind;                   /* P2P_SEND or P2P_RECV (lib/core/p2p.h) */
	int peer, tag, ctx;         /* send: dest; recv: source or P2P_ANY, tag or P2P_ANY */
	uint8_t *buf;               /* send: the message; recv: where it goes */
	size_t bytes;               /* send: the message's; recv: the capacity */
	struct shmcoll_p2p_op *any; /* recv from P2P_ANY: the local half, posted on the node */
	_Atomic int done;           /* complete: rc, and a receive's results, are set */
	int rc;                     /* 0, -EMSGSIZE (a receive cut short) or the error */
	int src, rtag;              /* recv: the message's sender (global rank) and tag */
	uint64_t total;             /* recv: the message's bytes */
	size_t got;                 /* recv: bytes written into buf */
	size_t off;                 /* send: bytes of header and payload written */
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

/* Start an operation to or from a rank on another node (a receive from P2P_ANY with local
 * its local half, posted on the node's engine with the same source and tag). Arguments are
 * checked. An operation may be complete when these return; -ENOMEM (the thread could not be
 * started) completes it with the error. */
void shmcoll__wire_isend(struct shmcoll_wire *w, struct wire_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag, int ctx);
void shmcoll__wire_irecv(struct shmcoll_wire *w, struct wire_op *op, const char *fn, void *buf,
                         size_t bytes, int source, int tag, int ctx, struct shmcoll_p2p_op *local);

/* Whether op is complete (acquire). First does the caller's half of matching (the thread
 * leaves it every message a receive from P2P_ANY posted earlier could take): each such
 * receive takes the earliest matching message that arrived unless its local half matched
 * first, and the receives after it take what it left; and moves op's own bytes while the
 * caller spins. Called with the communicator held, by the waits and tests. */
int shmcoll__wire_done(struct shmcoll_wire *w, struct wire_op *op);

/* Withdraws a receive from P2P_ANY whose local half matched: it leaves the posted list
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
