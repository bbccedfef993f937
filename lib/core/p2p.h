/* p2p.h - point-to-point messages between the ranks of a node communicator: per-pair rings in
 * the arena (shm/arena.h), MPI's matching rules, eager and rendezvous protocols, and the
 * progress and waiting every outstanding operation shares. docs/ARCHITECTURE.md
 * ("Point-to-point") has the protocols.
 *
 * An operation (struct shmcoll_p2p_op) is started, then completes as the communicator
 * progresses: any call into the communicator progresses every outstanding operation, the
 * waits here do it while they wait, and so do the collectives' waits once point-to-point has
 * been used (the waiter's poll hook). An operation belongs to the communicator from its start
 * until it is done; then it is the caller's again (nothing keeps a pointer to it). */
#ifndef SHMCOLL_CORE_P2P_H
#define SHMCOLL_CORE_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/state.h"

/* Wildcards of a receive (the public SHMCOLL_ANY_SOURCE and SHMCOLL_ANY_TAG). */
#define P2P_ANY (-1)

/* Contexts keep streams apart: the user's messages, and those of algorithms built on
 * point-to-point, which never match each other. */
enum { P2P_CTX_USER, P2P_CTX_COLL, P2P_CTX_COUNT };

enum p2p_kind { P2P_SEND = 1, P2P_RECV };

/* Where an operation is (p2p.c owns the transitions). */
enum p2p_state {
	ST_NEW,
	ST_QUEUED, /* send: waiting for room in the ring to write its first frame */
	ST_RDV,    /* send: its request to send is out; awaits a clear-to-send or a finish */
	ST_STREAM, /* send: writing its data frames; recv: reading them */
	ST_POSTED, /* recv: waiting for a matching message */
	ST_FIN,    /* recv: its data is in; owes the sender a finish frame */
	ST_DONE,
};

struct shmcoll_p2p_op {
	/* The engine's head (lib/core/queue.h): its link is the list the operation is on, by
	 * state; once done, rc is 0, -EMSGSIZE (a truncated receive) or the error. It is never
	 * on a queue and has no resume point: the frames that arrive move it, state says how
	 * far. */
	struct shmcoll_task_head head;
	const char *fn; /* the public function, for messages */
	int kind, state;
	uint16_t ctx;
	int peer, tag; /* send: dest and tag; recv: source and tag, or P2P_ANY */
	uint8_t *buf;
	size_t bytes;   /* send: the message; recv: the capacity */
	uint64_t id;    /* send: the message's id; recv: the id of the message it matched */
	uint64_t total; /* recv: the matched message's bytes */
	uint64_t off;   /* data streamed so far */
	uint64_t limit; /* bytes the stream moves: min(message, capacity) */
	int src, rtag;  /* recv: the matched message's source and tag */
	size_t got;     /* recv: bytes written into buf */
	int sync;       /* send: synchronous (complete once a receive matched it) */
};

/* At create, once the arena is attached: reads SHMCOLL_P2P_EAGER and SHMCOLL_P2P_CMA_MIN
 * (-EINVAL with a message in err for a bad value), -ENOMEM. fini frees what is left
 * (unmatched messages). */
int shmcoll__p2p_init(struct shmcoll_node *n, char *err, size_t errlen);
void shmcoll__p2p_fini(struct shmcoll_node *n);

/* Start an operation on a communicator the caller entered. Arguments are checked: dest or
 * source in range (source may be P2P_ANY), tag >= 0 (P2P_ANY for a receive), buf NULL only
 * with 0 bytes. An operation may be done when these return. */
void shmcoll__p2p_isend(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                        const void *buf, size_t bytes, int dest, int tag, int ctx);
void shmcoll__p2p_irecv(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                        void *buf, size_t bytes, int source, int tag, int ctx);
/* A synchronous send (MPI_Issend): it completes only once a receive has matched it, however
 * small: it goes as a rendezvous (RTS, then FIN or CTS), and to this rank it waits, kept,
 * for the receive that takes it. */
void shmcoll__p2p_issend(struct shmcoll_node *n, struct shmcoll_p2p_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag, int ctx);

/* Progresses every outstanding operation and collective task without blocking. */
void shmcoll__node_progress(struct shmcoll_node *n);

/* Progresses without blocking; *done = op->done. A test that finds op pending looks for
 * dead peers every SHMCOLL_CHECK_NS, as a wait does. */
void shmcoll__p2p_test(struct shmcoll_node *n, struct shmcoll_p2p_op *op, int *done);

/* Waits, progressing everything of n (and, after its spin, every other communicator of the
 * process: lib/core/progress.h), until ready(arg) holds: spin, yield, then sleep on this
 * rank's bell; bounded by the communicator's timeout, ended by an abort or a dead peer (peer:
 * the rank waited for, or P2P_ANY). 0, or the error that broke the communicator (every
 * outstanding operation then completes with it). */
int shmcoll__node_wait_until(struct shmcoll_node *n, const char *fn, int (*ready)(void *),
                             void *arg, int peer);

/* Waits for op; its result. */
int shmcoll__p2p_wait(struct shmcoll_node *n, struct shmcoll_p2p_op *op);

/* Short cuts of a blocking send and receive on a communicator the caller entered, for user
 * messages (context P2P_CTX_USER) only: 1 when done, 0 when the call must take the general
 * path (nothing started). send_fast writes an eager message whose ring has room and no
 * sends queued before it; recv_fast, for a specific source other than this rank and with
 * nothing else outstanding or arrived unmatched, polls that source's ring a little while
 * and takes the next message if it is the one, whole (op's src, rtag, total and got set,
 * the rest of op untouched). */
int shmcoll__p2p_send_fast(struct shmcoll_node *n, const void *buf, size_t bytes, int dest,
                           int tag);
int shmcoll__p2p_recv_fast(struct shmcoll_node *n, struct shmcoll_p2p_op *op, void *buf,
                           size_t bytes, int source, int tag);

/* The earliest arrived message a receive of (source, tag, ctx) would take, looked for
 * without progressing: 1 with its source, tag and bytes set, else 0. */
int shmcoll__p2p_peek(struct shmcoll_node *n, int source, int tag, int ctx, int *src, int *rtag,
                      uint64_t *bytes);

/* Takes back a receive that no message has matched yet: it completes with -ECANCELED. A
 * no-op once it matched (it then completes as it goes). */
void shmcoll__p2p_cancel(struct shmcoll_node *n, struct shmcoll_p2p_op *op);

/* The tag of the next collective built on point-to-point messages (gatherv, scatterv):
 * every rank counts every such call, in the order collectives are called. */
int shmcoll__p2p_coll_tag(struct shmcoll_node *n);

/* Wakes this rank if it sleeps in a wait on its bell: for a thread that changed what the
 * wait's ready() looks at (lib/net/wire.c). Thread-safe; atomics and a futex only. */
void shmcoll__p2p_nudge(struct shmcoll_node *n);

/* Completes every outstanding operation with rc (the communicator broke). */
void shmcoll__p2p_fail_all(struct shmcoll_node *n, int rc);

#endif
