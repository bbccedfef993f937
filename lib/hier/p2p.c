/* p2p.c - point-to-point on a multi-node communicator (hier.h): a message between two ranks
 * of one node goes through the node's engine (lib/core/p2p.h, ranks translated), one between
 * nodes over the wire (lib/net/wire.h). A receive from any source is posted on both: the
 * node's engine holds its local half, the wire a proxy that the caller's thread resolves, so
 * it takes exactly one message and MPI's order among the receives holds on both sides. The
 * wire sits below the node communicator and reaches it only through the functions this file
 * gives it (hier__wire_cfg). */
#include <errno.h>
#include <string.h>

#include "lib/core/p2p.h"
#include "lib/hier/impl.h"
#include "lib/net/wire.h"
#include "shm/atomics.h"

/* The wire matches sources and tags as the node's engine does, and this file hands it the
 * engine's wildcard and reads the wire's results against it. */
_Static_assert(WIRE_ANY == P2P_ANY, "the wire's wildcard is the node engine's");

/* The communicator's broken word, its node's, or the node's shared abort word: loads only,
 * as the wire's thread reads them without a lock. */
static int wire_broken(void *ctx)
{
	const struct shmcoll_hier *h = ctx;
	const struct shmcoll_node *n = h->local;

	return load_relaxed(&h->broken) || load_relaxed(&n->broken) ||
	       load_relaxed(&n->arena.hdr->aborted);
}

static void wire_wake(void *ctx)
{
	const struct shmcoll_hier *h = ctx;

	shmcoll__p2p_nudge(h->local);
}

/* A receive from any source's local half has matched once the node's engine moved it past
 * posted. */
static int wire_claimed(void *ctx, void *local)
{
	const struct shmcoll_p2p_op *op = local;

	(void)ctx;
	return op->state != ST_POSTED;
}

static void wire_cancel(void *ctx, void *local)
{
	struct shmcoll_hier *h = ctx;

	shmcoll__p2p_cancel(h->local, local);
}

void hier__wire_cfg(struct shmcoll_hier *h, struct shmcoll_wire_cfg *wc)
{
	*wc = (struct shmcoll_wire_cfg){.rank = h->rank,
	                                .size = h->size,
	                                .nnodes = h->nnodes,
	                                .node = h->node,
	                                .nproc = h->nproc,
	                                .nctx = P2P_CTX_COUNT,
	                                .ctx = h,
	                                .broken = wire_broken,
	                                .broke = hier__wire_broke,
	                                .wake = wire_wake,
	                                .claimed = wire_claimed,
	                                .cancel = wire_cancel};
}

static int local_rank(const struct shmcoll_hier *h, int g)
{
	return g == P2P_ANY ? P2P_ANY : g % h->nproc;
}

static int on_node(const struct shmcoll_hier *h, int g)
{
	return g / h->nproc == h->node;
}

void shmcoll__hier_isend(struct shmcoll_hier *h, struct hier_p2p_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag)
{
	op->head.done = 0;
	op->head.rc = 0;
	if (on_node(h, dest)) {
		op->where = HP_LOCAL;
		shmcoll__p2p_isend(h->local, &op->node, fn, buf, bytes, local_rank(h, dest), tag,
		                   P2P_CTX_USER);
	} else {
		op->where = HP_WIRE;
		memset(&op->node, 0, sizeof(op->node));
		op->node.fn = fn;
		op->node.kind = P2P_SEND;
		shmcoll__wire_isend(h->wire, &op->wire, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	}
}

void shmcoll__hier_irecv(struct shmcoll_hier *h, struct hier_p2p_op *op, const char *fn, void *buf,
                         size_t bytes, int source, int tag)
{
	op->head.done = 0;
	op->head.rc = 0;
	if (source != P2P_ANY && on_node(h, source)) {
		op->where = HP_LOCAL;
		shmcoll__p2p_irecv(h->local, &op->node, fn, buf, bytes, local_rank(h, source), tag,
		                   P2P_CTX_USER);
		return;
	}
	if (source != P2P_ANY) {
		op->where = HP_WIRE;
		memset(&op->node, 0, sizeof(op->node));
		op->node.fn = fn;
		op->node.kind = P2P_RECV;
		shmcoll__wire_irecv(h->wire, &op->wire, fn, buf, bytes, source, tag, P2P_CTX_USER,
		                    NULL);
		return;
	}
	/* Both halves, the local one first: the wire's proxy points at it. */
	op->where = HP_ANY;
	shmcoll__p2p_irecv(h->local, &op->node, fn, buf, bytes, P2P_ANY, tag, P2P_CTX_USER);
	if (op->node.head.done) {
		/* Matched at once (or the communicator is broken): nothing for the wire. */
		op->where = HP_LOCAL;
		return;
	}
	shmcoll__wire_irecv(h->wire, &op->wire, fn, buf, bytes, P2P_ANY, tag, P2P_CTX_USER,
	                    &op->node);
}

/* The results of a completed op in op->node (the sender's global rank) and op->head.rc. */
static void finish_local(struct shmcoll_hier *h, struct hier_p2p_op *op)
{
	op->head.rc = op->node.head.rc;
	if (op->node.kind == P2P_RECV && op->node.src >= 0)
		op->node.src += h->node * h->nproc;
	op->head.done = 1;
}

static void finish_wire(struct hier_p2p_op *op)
{
	op->head.rc = op->wire.rc;
	op->node.src = op->wire.src;
	op->node.rtag = op->wire.rtag;
	op->node.total = op->wire.total;
	op->node.got = op->wire.got;
	op->node.head.done = 1;
	op->node.head.rc = op->head.rc;
	op->head.done = 1;
}

/* Whether op is complete (its results then set), looking without blocking. */
static int hp_done(struct shmcoll_hier *h, struct hier_p2p_op *op)
{
	if (op->head.done)
		return 1;
	switch (op->where) {
	case HP_LOCAL:
		if (!op->node.head.done)
			return 0;
		finish_local(h, op);
		return 1;
	case HP_WIRE:
		if (!shmcoll__wire_done(h->wire, &op->wire))
			return 0;
		finish_wire(op);
		return 1;
	default:
		break;
	}
	/* From any source: the wire's outcome when it has one (a remote message, which
	 * cancelled the local half, or a failure), else the local half's. */
	if (shmcoll__wire_done(h->wire, &op->wire)) {
		shmcoll__p2p_cancel(h->local, &op->node); /* a failure: the local half too */
		if (op->wire.src != P2P_ANY || op->wire.rc < 0) {
			finish_wire(op);
			return 1;
		}
	}
	if (!op->node.head.done)
		return 0;
	shmcoll__wire_withdraw(h->wire, &op->wire);
	finish_local(h, op);
	return 1;
}

/* A failure whose message is recorded: everything broken (the node, the leaders'
 * connections, the wire) and every operation outstanding on either engine failed. */
static void break_all(struct shmcoll_hier *h, int rc)
{
	hier__broken(h, rc);
	shmcoll__wire_fail_all(h->wire, rc);
	shmcoll__p2p_fail_all(h->local, rc);
}

/* After an op completed with rc: a failure that broke the communicator is recorded as this
 * rank's message and breaks everything (as the collectives do). Returns rc. */
static int settle(struct shmcoll_hier *h, struct hier_p2p_op *op)
{
	char cause[SHMCOLL_ERR_LEN - 64];
	int rc = op->head.rc;

	if (rc >= 0 || rc == -EMSGSIZE)
		return rc;
	if (op->where != HP_LOCAL && op->wire.rc == rc &&
	    shmcoll__wire_cause(h->wire, cause, sizeof(cause)))
		hier__fail(h, rc, "%s: %s", op->node.fn, cause);
	else
		hier__fail(h, rc, "%s: node %d: %s", op->node.fn, h->node, h->local->err);
	break_all(h, rc);
	return rc;
}

struct hp_wait {
	struct shmcoll_hier *h;
	struct hier_p2p_op *op;
};

static int hp_ready(void *arg)
{
	struct hp_wait *a = arg;

	return hp_done(a->h, a->op);
}

int shmcoll__hier_p2p_test(struct shmcoll_hier *h, struct hier_p2p_op *op, int *done)
{
	if (op->where == HP_LOCAL && !op->head.done) {
		shmcoll__p2p_test(h->local, &op->node, done);
	} else {
		shmcoll__node_progress(h->local);
	}
	*done = hp_done(h, op);
	return *done ? settle(h, op) : 0;
}

int shmcoll__hier_p2p_wait(struct shmcoll_hier *h, struct hier_p2p_op *op)
{
	struct hp_wait a = {h, op};
	int rc = 0;

	if (op->where == HP_LOCAL)
		rc = shmcoll__p2p_wait(h->local, &op->node);
	else if (!hp_done(h, op))
		/* The wire thread rings this rank's bell as it completes an operation or queues
		 * a message, so this sleeps as a node wait does. */
		rc = shmcoll__node_wait_until(h->local, op->node.fn, hp_ready, &a, P2P_ANY);
	if (!hp_done(h, op)) {
		/* The node wait ended without it: the communicator broke here. */
		shmcoll__p2p_cancel(h->local, &op->node);
		hier__fail(h, rc, "%s: node %d: %s", op->node.fn, h->node, h->local->err);
		break_all(h, rc);
		if (op->where != HP_LOCAL)
			shmcoll__wire_withdraw(h->wire, &op->wire);
		op->head.rc = rc;
		op->node.head.rc = rc;
		op->head.done = 1;
		return rc;
	}
	return settle(h, op);
}

int shmcoll__hier_p2p_peek(struct shmcoll_hier *h, int source, int tag, int *src, int *rtag,
                           uint64_t *bytes)
{
	if ((source == P2P_ANY || on_node(h, source)) &&
	    shmcoll__p2p_peek(h->local, local_rank(h, source), tag, P2P_CTX_USER, src, rtag,
	                      bytes)) {
		*src += h->node * h->nproc;
		return 1;
	}
	if (source != P2P_ANY && on_node(h, source))
		return 0;
	return shmcoll__wire_peek(h->wire, source, tag, P2P_CTX_USER, src, rtag, bytes);
}
