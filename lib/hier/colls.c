/* colls.c - the collectives of a communicator over several nodes (comm.c makes the
 * communicator, hier.c runs its calls and their stages, lead.c has the leaders' algorithms,
 * wide.c the wide reductions).
 *
 * Global ranks are node-major: rank = node * P + local, P ranks per node.
 * Every collective is three stages, run by every rank in the same order, so
 * the node communicator's own checks (call words, liveness, timeouts) cover
 * the first and the last:
 *   1. shared memory gathers what the node has to the leader (a reduce, a
 *      gather, or nothing);
 *   2. the leaders exchange it (every frame carries the call's word, so a
 *      mismatch between nodes is -EPROTO, never misread data);
 *   3. shared memory hands the result out (a bcast or a scatter).
 * The stages per collective:
 *   allreduce       reduce to the leader; leaders allreduce (recursive
 *                   doubling up to LEAD_RING_MIN bytes, ring beyond); bcast
 *   reduce          reduce to each leader; the other leaders send theirs to
 *                   the root's node, whose leader folds them into its own
 *                   contribution to a node reduce to the root
 *   bcast           bcast on the root's node; its leader sends to the others,
 *                   whose leaders bcast it on their node
 *   allgather       gather each node's block to its leader (in place in
 *                   recvbuf); leaders ring-allgather the blocks; bcast
 *   reduce_scatter  reduce the whole vector to the leader; leaders ring
 *                   reduce-scatter node blocks; scatter the node's block
 *   gather, scatter gather/scatter on every node through the leader, which
 *                   sends/receives node blocks to/from the root's node;
 *                   there, a root that is not the leader trades the other
 *                   nodes' blocks with it through a node bcast (local_move)
 *   alltoall        gather every rank's sendbuf to the leader; leaders swap
 *                   per-node blocks; the leader reorders; scatter
 *   barrier         node barrier; leaders' dissemination barrier; node barrier
 * Reductions whose partial results would round or overflow differently than
 * one fold over every rank are carried wide: float16/bfloat16 sums, products
 * and averages as float32, rounded once at the end; integer averages as
 * (quotient, remainder) pairs of the division by the job's size, exact for
 * any values. Large vectors go in chunks of CHUNK_BYTES.
 *
 * A failure anywhere breaks the whole communicator: the leader shuts its
 * connections (the other nodes' leaders fail at once and break their nodes)
 * and breaks its node communicator (its node's ranks wake and fail). */
#include <stdlib.h>
#include <string.h>

#include "lib/coll/coll.h"
#include "lib/core/engine.h"
#include "lib/hier/impl.h"

#define CHUNK_BYTES SHMCOLL_HIER_CHUNK_BYTES
/* local_move's chunks: the bystanders' scratch. */
#define MOVE_BYTES (1u << 20)

/* Resume points of the compositions; 0 is the start. */
enum {
	AT_NODE1 = 1, /* the first node stage */
	AT_NODE2,     /* the second */
	AT_NODE3,     /* the third */
	AT_LEAD1,     /* the first leaders' stage */
	AT_LEAD2,     /* the second */
	AT_FINISH,    /* a leaders' stage left in flight, finished */
	AT_MOVE1,     /* a hand-off inside the node */
	AT_MOVE2,
};

static void task_init(struct hier_task *t, const char *fn,
                      int (*advance)(struct shmcoll_hier *, struct hier_task *), const void *send,
                      void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op, int root)
{
	t->advance = advance;
	t->fn = fn;
	t->send = send;
	t->recv = recv;
	t->count = count;
	t->dt = dt;
	t->es = shmcoll__dtype_size(dt);
	t->op = op;
	t->root = root;
}

/* Elements per chunk of a reduction of w. */
static size_t reduce_chunk(const struct wide *w)
{
	return CHUNK_BYTES / (w->es * w->mult);
}

/* Starts t's leaders' stage without blocking (it posts its first exchange): the pipelines
 * leave it in flight while the node works, and finish it later (AT_FINISH). */
static int lead_post(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc;

	t->lead.head.blocking = 0;
	rc = hier__lead_advance(h, &t->lead);

	t->lead_on = rc == SHMCOLL_PENDING;
	return rc == SHMCOLL_PENDING ? 0 : rc;
}

/* Finishes the leaders' stage in flight, if any. */
static int lead_finish(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc;

	if (!t->lead_on)
		return 0;
	rc = hier__await_lead(h, t);
	if (rc != SHMCOLL_PENDING)
		t->lead_on = 0;
	return rc;
}

/* The hand-off set up in t->mv_*: bytes from local rank mv_from (mv_src) to local rank
 * mv_to (mv_dst) through node bcasts, every rank of the node taking part, the others into
 * scratch. */
static void move_init(struct hier_task *t, int from, int to, const uint8_t *src, uint8_t *dst,
                      size_t bytes)
{
	t->mv_from = from;
	t->mv_to = to;
	t->mv_src = src;
	t->mv_dst = dst;
	t->mv_bytes = from == to ? 0 : bytes;
	t->mv_off = 0;
}

static int await_move(struct shmcoll_hier *h, struct hier_task *t)
{
	uint8_t *p;
	size_t n;
	int rc;

	if (t->node_on)
		goto node;
	for (; t->mv_off < t->mv_bytes; t->mv_off += MOVE_BYTES) {
		n = min_size(t->mv_bytes - t->mv_off, MOVE_BYTES);
		if (h->lrank == t->mv_from) {
			/* bcast reads the root's buffer only. */
			p = (uint8_t *)t->mv_src + t->mv_off;
		} else if (h->lrank == t->mv_to) {
			p = t->mv_dst + t->mv_off;
		} else {
			/* The first chunk is the largest. */
			p = hier__scratch(h, SCR_MOVE, n);
			if (!p)
				return hier__oom(h, t->fn, n);
		}
		shmcoll__bcast_init(h->local, &t->node, p, n, SHMCOLL_UINT8, t->mv_from);
	node:
		rc = hier__await_node(h, t);
		if (rc)
			return rc;
	}
	return 0;
}

/* barrier: node barrier; leaders' dissemination barrier; node barrier. */
static int barrier_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc, to, from;

	switch (t->head.at) {
	case AT_NODE1:
		goto node1;
	case AT_LEAD1:
		goto lead1;
	case AT_NODE2:
		goto node2;
	}
	shmcoll__barrier_init(h->local, &t->node);
node1:
	rc = hier__await_node(h, t);
	if (rc)
		return hier__suspend(t, AT_NODE1, rc);
	/* Dissemination: after round r every node has heard, directly or not, from the
	 * 2^(r+1) - 1 nodes before it. */
	for (t->k = 0; h->lrank == 0 && t->k < (size_t)shmcoll__dissem_rounds(h->nnodes); t->k++) {
		shmcoll__dissem_peers(h->node, h->nnodes, (int)t->k, &to, &from);
		h->px[0] = (struct shmcoll_xfer){to, XFER_SEND, NULL, 0, t->call, 0};
		h->px[1] = (struct shmcoll_xfer){from, XFER_RECV, NULL, 0, t->call, 0};
		hier__lead_xfer(&t->lead, t->fn, h->px, 2);
	lead1:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD1, rc);
	}
	shmcoll__barrier_init(h->local, &t->node);
node2:
	rc = hier__await_node(h, t);
	return hier__suspend(t, AT_NODE2, rc);
}

/* allreduce, pipelined: the leader leaves chunk k's exchange among the leaders in flight
 * while the node reduces chunk k+1, finishes it, and starts chunk k+1's before the node
 * bcasts chunk k, so each chunk's network time overlaps the node's work on its neighbours.
 * Every rank of a node runs the node stages in the same order: reduce 0, reduce 1, bcast 0,
 * reduce 2, bcast 1, ... */
static int allreduce_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	const struct wide *w = &t->w;
	size_t cap = reduce_chunk(w), es = t->es, lo, n, m, wa;
	uint64_t S = (uint64_t)h->size;
	uint8_t *win;
	int rc, lead = h->lrank == 0, b;

	switch (t->head.at) {
	case AT_NODE1:
		goto reduce;
	case AT_FINISH:
		goto finish;
	case AT_NODE2:
		goto bcast;
	}
	t->K = shmcoll__nchunks(t->count, cap);
	wa = hier__align16(min_size(cap, t->count) * w->mult * w->es);
	if (lead && t->K) {
		t->wres[0] = hier__scratch(h, SCR_RES, 2 * wa);
		if (!t->wres[0])
			return hier__oom(h, t->fn, 2 * wa);
		t->wres[1] = t->wres[0] + wa;
	}
	for (t->k = 0; t->k <= t->K; t->k++) {
		lo = t->k * cap;
		n = t->k < t->K ? min_size(cap, t->count - lo) : 0;
		m = n * w->mult;
		b = (int)(t->k & 1);
		if (t->k < t->K) {
			win = (uint8_t *)t->send + lo * es;
			if (w->mode != W_NATIVE) {
				win = hier__scratch(h, SCR_IN, m * w->es);
				if (!win)
					return hier__oom(h, t->fn, m * w->es);
				hier__wide_in(w, win, t->send + lo * es, n, t->dt, S);
			}
			shmcoll__reduce_init(h->local, &t->node, win, t->wres[b], m, w->dt, w->op,
			                     0);
		reduce:
			rc = hier__await_node(h, t);
			if (rc)
				return hier__suspend(t, AT_NODE1, rc);
		}
		/* The previous chunk (k >= 1): the one this round finishes. */
		if (lead && t->k >= 1) {
		finish:
			rc = lead_finish(h, t);
			if (rc)
				return hier__suspend(t, AT_FINISH, rc);
			lo = (t->k - 1) * cap;
			n = min_size(cap, t->count - lo);
			hier__wide_out(w, t->recv + lo * es, t->lead.res, n, t->dt, t->op, S);
		}
		if (lead && t->k < t->K) {
			lo = t->k * cap;
			n = min_size(cap, t->count - lo);
			b = (int)(t->k & 1);
			hier__lead_allreduce(&t->lead, t->fn, w, t->call, t->wres[b], n * w->mult,
			                     w->mode == W_NATIVE ? t->recv + lo * es : NULL);
			rc = lead_post(h, t);
			if (rc < 0)
				return rc;
		}
		if (t->k >= 1) {
			lo = (t->k - 1) * cap;
			shmcoll__bcast_init(h->local, &t->node, t->recv + lo * es,
			                    min_size(cap, t->count - lo), t->dt, 0);
		bcast:
			rc = hier__await_node(h, t);
			if (rc)
				return hier__suspend(t, AT_NODE2, rc);
		}
	}
	return 0;
}

/* reduce, pipelined like allreduce: a node away from the root's sends chunk k while it
 * reduces chunk k+1; the root's node's leader receives chunk k+1 while its node reduces
 * chunk k, folding every node's partial of a chunk, in node order, into its own
 * contribution to the node reduce to the root. */
static int reduce_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	const struct wide *w = &t->w;
	size_t cap = reduce_chunk(w), es = t->es, lo, n, m, wb;
	size_t wa = hier__align16(min_size(cap, t->count) * w->mult * w->es);
	uint64_t S = (uint64_t)h->size;
	int rc, lead = h->lrank == 0, nr = t->root / h->nproc, lr = t->root % h->nproc;
	int N = h->nnodes, q, nx, home = h->node == nr, b;
	uint8_t *win, *wres, *part, *fold;

	switch (t->head.at) {
	case AT_NODE1:
		goto reduce_away;
	case AT_FINISH:
		goto sent;
	case AT_LEAD1:
		goto first;
	case AT_LEAD2:
		goto partials;
	case AT_NODE2:
		goto reduce_home;
	case AT_NODE3:
		goto end;
	}
	t->K = shmcoll__nchunks(t->count, cap);
	if (lead && t->K) {
		/* Two chunks' worth: the partial in flight and the next one, or (at home) every
		 * node's partials of two chunks; then the fold, the transfers and the fold's
		 * sources. */
		size_t parts = home ? (size_t)N : 1;
		size_t bytes =
		    2 * parts * wa + wa + sizeof(*t->x) * (size_t)N + sizeof(*t->srcs) * (size_t)N;

		t->bufs = hier__scratch(h, SCR_RES, bytes);
		if (!t->bufs)
			return hier__oom(h, t->fn, bytes);
		t->x = (struct shmcoll_xfer *)(t->bufs + 2 * parts * wa + wa);
		t->srcs = (const void **)(t->x + N);
	}
	for (t->k = 0; t->k < t->K; t->k++) {
		lo = t->k * cap;
		n = min_size(cap, t->count - lo);
		m = n * w->mult;
		wb = m * w->es;
		b = (int)(t->k & 1);
		win = (uint8_t *)t->send + lo * es;
		if (w->mode != W_NATIVE) {
			win = hier__scratch(h, SCR_IN, wb);
			if (!win)
				return hier__oom(h, t->fn, wb);
			hier__wide_in(w, win, t->send + lo * es, n, t->dt, S);
		}
		if (!home) {
			wres = lead ? t->bufs + (size_t)b * wa : NULL;
			shmcoll__reduce_init(h->local, &t->node, win, wres, m, w->dt, w->op, 0);
		reduce_away:
			rc = hier__await_node(h, t);
			if (rc)
				return hier__suspend(t, AT_NODE1, rc);
			if (!lead)
				continue;
		sent:
			rc = lead_finish(h, t);
			if (rc)
				return hier__suspend(t, AT_FINISH, rc);
			lo = t->k * cap;
			wb = min_size(cap, t->count - lo) * w->mult * w->es;
			t->x[0] = (struct shmcoll_xfer){nr, XFER_SEND, t->bufs + (t->k & 1) * wa,
			                                wb, t->call,   0};
			hier__lead_xfer(&t->lead, t->fn, t->x, 1);
			rc = lead_post(h, t);
			if (rc < 0)
				return rc;
			continue;
		}
		/* The root's node: the leader's contribution is its own folded with every other
		 * node's partial, in node order. */
		if (lead) {
			part = t->bufs + (size_t)b * (size_t)N * wa;
			/* Chunk k's partials: received now (chunk 0), or posted the round
			 * before. */
			if (t->k == 0) {
				for (q = 0, nx = 0; q < N; q++)
					if (q != nr)
						t->x[nx++] = (struct shmcoll_xfer){
						    q,  XFER_RECV, part + (size_t)q * wa,
						    wb, t->call,   0};
				hier__lead_xfer(&t->lead, t->fn, t->x, nx);
			first:
				rc = hier__await_lead(h, t);
				if (rc)
					return hier__suspend(t, AT_LEAD1, rc);
			} else {
			partials:
				rc = lead_finish(h, t);
				if (rc)
					return hier__suspend(t, AT_LEAD2, rc);
			}
			lo = t->k * cap;
			n = min_size(cap, t->count - lo);
			m = n * w->mult;
			b = (int)(t->k & 1);
			part = t->bufs + (size_t)b * (size_t)N * wa;
			fold = t->bufs + 2 * (size_t)N * wa;
			if (t->k + 1 < t->K) {
				size_t n1 = min_size(cap, t->count - lo - cap) * w->mult * w->es;
				uint8_t *next = t->bufs + (size_t)!b * (size_t)N * wa;

				for (q = 0, nx = 0; q < N; q++)
					if (q != nr)
						t->x[nx++] = (struct shmcoll_xfer){
						    q,  XFER_RECV, next + (size_t)q * wa,
						    n1, t->call,   0};
				hier__lead_xfer(&t->lead, t->fn, t->x, nx);
				rc = lead_post(h, t);
				if (rc < 0)
					return rc;
			}
			win = w->mode != W_NATIVE ? h->scr[SCR_IN] : (uint8_t *)t->send + lo * es;
			for (q = 0; q < N; q++)
				t->srcs[q] = q == nr ? (const void *)win : part + (size_t)q * wa;
			w->fold(fold, t->srcs, N, m);
			win = fold;
		}
		t->out = NULL;
		if (h->lrank == lr) {
			t->out = w->mode == W_NATIVE ? t->recv + lo * es
			                             : hier__scratch(h, SCR_TMP, m * w->es);
			if (!t->out)
				return hier__oom(h, t->fn, m * w->es);
		}
		shmcoll__reduce_init(h->local, &t->node, win, t->out, m, w->dt, w->op, lr);
	reduce_home:
		rc = hier__await_node(h, t);
		if (rc)
			return hier__suspend(t, AT_NODE2, rc);
		if (h->lrank == lr) {
			lo = t->k * cap;
			hier__wide_out(w, t->recv + lo * es, t->out, min_size(cap, t->count - lo),
			               t->dt, t->op, S);
		}
	}
end:
	rc = lead_finish(h, t);
	return hier__suspend(t, AT_NODE3, rc);
}

/* bcast, pipelined: the root's node's leader sends chunk k while its node bcasts chunk k+1;
 * another node's leader receives chunk k+1 while its node bcasts chunk k. */
static int bcast_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t es = t->es, cap = CHUNK_BYTES / es, lo, n;
	int rc, nr = t->root / h->nproc, q, nx, lead = h->lrank == 0;

	switch (t->head.at) {
	case AT_LEAD1:
		goto first;
	case AT_NODE1:
		goto bcast_home;
	case AT_FINISH:
		goto sent;
	case AT_LEAD2:
		goto received;
	case AT_NODE2:
		goto bcast_away;
	case AT_NODE3:
		goto end;
	}
	t->K = shmcoll__nchunks(t->count, cap);
	if (lead) {
		t->x = hier__scratch(h, SCR_TMP, sizeof(*t->x) * (size_t)h->nnodes);
		if (!t->x)
			return hier__oom(h, t->fn, sizeof(*t->x) * (size_t)h->nnodes);
	}
	if (lead && h->node != nr && t->K) {
		t->x[0] = (struct shmcoll_xfer){
		    nr, XFER_RECV, t->recv, min_size(cap, t->count) * es, t->call, 0};
		hier__lead_xfer(&t->lead, t->fn, t->x, 1);
	first:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD1, rc);
	}
	for (t->k = 0; t->k < t->K; t->k++) {
		lo = t->k * cap;
		n = min_size(cap, t->count - lo);
		if (h->node == nr) {
			shmcoll__bcast_init(h->local, &t->node, t->recv + lo * es, n, t->dt,
			                    t->root % h->nproc);
		bcast_home:
			rc = hier__await_node(h, t);
			if (rc)
				return hier__suspend(t, AT_NODE1, rc);
			if (!lead)
				continue;
		sent:
			rc = lead_finish(h, t);
			if (rc)
				return hier__suspend(t, AT_FINISH, rc);
			lo = t->k * cap;
			n = min_size(cap, t->count - lo);
			for (q = 0, nx = 0; q < h->nnodes; q++)
				if (q != nr)
					t->x[nx++] = (struct shmcoll_xfer){
					    q, XFER_SEND, t->recv + lo * es, n * es, t->call, 0};
			hier__lead_xfer(&t->lead, t->fn, t->x, nx);
			rc = lead_post(h, t);
			if (rc < 0)
				return rc;
			continue;
		}
		/* Chunk k is in (received before the loop, or finished here); chunk k+1 comes
		 * while the node bcasts k. */
		if (lead && t->k > 0) {
		received:
			rc = lead_finish(h, t);
			if (rc)
				return hier__suspend(t, AT_LEAD2, rc);
		}
		lo = t->k * cap;
		n = min_size(cap, t->count - lo);
		if (lead && t->k + 1 < t->K) {
			t->x[0] = (struct shmcoll_xfer){nr,
			                                XFER_RECV,
			                                t->recv + (lo + cap) * es,
			                                min_size(cap, t->count - lo - cap) * es,
			                                t->call,
			                                0};
			hier__lead_xfer(&t->lead, t->fn, t->x, 1);
			rc = lead_post(h, t);
			if (rc < 0)
				return rc;
		}
		shmcoll__bcast_init(h->local, &t->node, t->recv + lo * es, n, t->dt, 0);
	bcast_away:
		rc = hier__await_node(h, t);
		if (rc)
			return hier__suspend(t, AT_NODE2, rc);
	}
end:
	rc = lead_finish(h, t);
	return hier__suspend(t, AT_NODE3, rc);
}

/* allgather: gather each node's block to its leader, in place in its recvbuf; the leaders
 * ring-allgather the blocks; bcast. */
static int allgather_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t block = (size_t)h->nproc * t->count * t->es;
	int rc, lead = h->lrank == 0;

	switch (t->head.at) {
	case AT_NODE1:
		goto gather;
	case AT_LEAD1:
		goto ring;
	case AT_NODE2:
		goto bcast;
	}
	shmcoll__gather_init(h->local, &t->node, t->send,
	                     lead ? t->recv + (size_t)h->node * block : NULL, t->count, t->dt, 0);
gather:
	rc = hier__await_node(h, t);
	if (rc)
		return hier__suspend(t, AT_NODE1, rc);
	if (lead) {
		hier__lead_ag(&t->lead, t->fn, t->call, t->recv, (size_t)h->nnodes, block, 1);
	ring:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD1, rc);
	}
	shmcoll__bcast_init(h->local, &t->node, t->recv, (size_t)h->size * t->count, t->dt, 0);
bcast:
	rc = hier__await_node(h, t);
	return hier__suspend(t, AT_NODE2, rc);
}

/* reduce_scatter: reduce the whole vector to the leader; the leaders ring reduce-scatter
 * node blocks; scatter the node's block. */
static int reduce_scatter_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	const struct wide *w = &t->w;
	size_t total = (size_t)h->size * t->count, m = total * w->mult;
	size_t seg = (size_t)h->nproc * t->count * w->mult;
	uint64_t S = (uint64_t)h->size;
	uint8_t *win = (uint8_t *)t->send;
	int rc, lead = h->lrank == 0;

	switch (t->head.at) {
	case AT_NODE1:
		goto reduce;
	case AT_LEAD1:
		goto ring;
	case AT_NODE2:
		goto scatter;
	}
	if (w->mode != W_NATIVE) {
		win = hier__scratch(h, SCR_IN, m * w->es);
		if (!win)
			return hier__oom(h, t->fn, m * w->es);
		hier__wide_in(w, win, t->send, total, t->dt, S);
	}
	t->wres[0] = t->out = NULL;
	if (lead) {
		t->wres[0] = hier__scratch(h, SCR_RES, m * w->es);
		t->out = hier__scratch(h, SCR_TMP, (size_t)h->nproc * t->count * t->es);
		if (!t->wres[0] || !t->out)
			return hier__oom(h, t->fn, m * w->es);
	}
	shmcoll__reduce_init(h->local, &t->node, win, t->wres[0], m, w->dt, w->op, 0);
reduce:
	rc = hier__await_node(h, t);
	if (rc)
		return hier__suspend(t, AT_NODE1, rc);
	if (lead) {
		hier__lead_rs(&t->lead, t->fn, w, t->call, t->wres[0], m, seg);
	ring:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD1, rc);
		hier__wide_out(w, t->out, t->wres[0] + (size_t)h->node * seg * w->es,
		               (size_t)h->nproc * t->count, t->dt, t->op, S);
	}
	shmcoll__scatter_init(h->local, &t->node, t->out, t->recv, t->count, t->dt, 0);
scatter:
	rc = hier__await_node(h, t);
	return hier__suspend(t, AT_NODE2, rc);
}

/* gather: gather on every node to its leader (to the root on the root's node), whose
 * leader receives the other nodes' blocks; a root there that is not the leader gets them
 * from it through the node (local_move). */
static int gather_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t block = (size_t)h->nproc * t->count * t->es;
	int rc, N = h->nnodes, nr = t->root / h->nproc, lr = t->root % h->nproc, q, k;
	int lead = h->lrank == 0;
	uint8_t *dst;

	switch (t->head.at) {
	case AT_NODE1:
		goto gather_away;
	case AT_LEAD1:
		goto send;
	case AT_NODE2:
		goto gather_home;
	case AT_LEAD2:
		goto receive;
	case AT_MOVE1:
		goto move1;
	case AT_MOVE2:
		goto move2;
	}
	if (h->node != nr) {
		t->bufs = lead ? hier__scratch(h, SCR_RES, block) : NULL;
		if (lead && !t->bufs)
			return hier__oom(h, t->fn, block);
		shmcoll__gather_init(h->local, &t->node, t->send, t->bufs, t->count, t->dt, 0);
	gather_away:
		rc = hier__await_node(h, t);
		if (rc || !lead)
			return hier__suspend(t, AT_NODE1, rc);
		h->px[0] = (struct shmcoll_xfer){nr, XFER_SEND, t->bufs, block, t->call, 0};
		hier__lead_xfer(&t->lead, t->fn, h->px, 1);
	send:
		rc = hier__await_lead(h, t);
		return hier__suspend(t, AT_LEAD1, rc);
	}
	/* The root's node: its block goes straight to the root. */
	shmcoll__gather_init(h->local, &t->node, t->send,
	                     h->lrank == lr ? t->recv + (size_t)nr * block : NULL, t->count, t->dt,
	                     lr);
gather_home:
	rc = hier__await_node(h, t);
	if (rc)
		return hier__suspend(t, AT_NODE2, rc);
	/* The other nodes' blocks, in node order, into recvbuf if the leader is the root, else
	 * into scratch to be moved to the root. */
	t->bufs = NULL;
	if (lead) {
		t->x = hier__scratch(h, SCR_TMP, sizeof(*t->x) * (size_t)N);
		t->bufs = lr == 0 ? t->recv : hier__scratch(h, SCR_RES, (size_t)(N - 1) * block);
		if (!t->x || !t->bufs)
			return hier__oom(h, t->fn, (size_t)N * block);
		for (q = 0, k = 0; q < N; q++) {
			dst = lr == 0 ? t->recv + (size_t)q * block
			              : t->bufs + shmcoll__pos_without(q, nr) * block;
			if (q != nr)
				t->x[k++] =
				    (struct shmcoll_xfer){q, XFER_RECV, dst, block, t->call, 0};
		}
		hier__lead_xfer(&t->lead, t->fn, t->x, k);
	receive:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD2, rc);
	}
	if (lr == 0)
		return 0;
	move_init(t, 0, lr, t->bufs, t->recv, (size_t)nr * block);
move1:
	rc = await_move(h, t);
	if (rc)
		return hier__suspend(t, AT_MOVE1, rc);
	move_init(t, 0, lr, t->bufs ? t->bufs + (size_t)nr * block : NULL,
	          t->recv ? t->recv + (size_t)(nr + 1) * block : NULL,
	          (size_t)(N - 1 - nr) * block);
move2:
	rc = await_move(h, t);
	return hier__suspend(t, AT_MOVE2, rc);
}

/* scatter: the root's node's leader sends the other nodes' blocks, taken from the root's
 * sendbuf through the node first if it is not the root (local_move); every leader scatters
 * its node's block (the root on its own node). */
static int scatter_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t block = (size_t)h->nproc * t->count * t->es;
	int rc, N = h->nnodes, nr = t->root / h->nproc, lr = t->root % h->nproc, q, k;
	int lead = h->lrank == 0;
	const uint8_t *src;

	switch (t->head.at) {
	case AT_LEAD1:
		goto receive;
	case AT_NODE1:
		goto scatter_away;
	case AT_MOVE1:
		goto move1;
	case AT_MOVE2:
		goto move2;
	case AT_LEAD2:
		goto send;
	case AT_NODE2:
		goto scatter_home;
	}
	if (h->node != nr) {
		t->bufs = lead ? hier__scratch(h, SCR_RES, block) : NULL;
		if (lead && !t->bufs)
			return hier__oom(h, t->fn, block);
		if (lead) {
			h->px[0] = (struct shmcoll_xfer){nr, XFER_RECV, t->bufs, block, t->call, 0};
			hier__lead_xfer(&t->lead, t->fn, h->px, 1);
		receive:
			rc = hier__await_lead(h, t);
			if (rc)
				return hier__suspend(t, AT_LEAD1, rc);
		}
		shmcoll__scatter_init(h->local, &t->node, t->bufs, t->recv, t->count, t->dt, 0);
	scatter_away:
		rc = hier__await_node(h, t);
		return hier__suspend(t, AT_NODE1, rc);
	}
	/* The root's node: the other nodes' blocks reach the leader first if it is not the
	 * root: in node order, nr's own left out. */
	t->bufs = NULL;
	if (lead) {
		t->x = hier__scratch(h, SCR_TMP, sizeof(*t->x) * (size_t)N);
		t->bufs = lr == 0 ? (uint8_t *)t->send
		                  : hier__scratch(h, SCR_RES, (size_t)(N - 1) * block);
		if (!t->x || !t->bufs)
			return hier__oom(h, t->fn, (size_t)N * block);
	}
	if (lead)
		move_init(t, lr, 0, NULL, t->bufs, (size_t)nr * block);
	else
		move_init(t, lr, 0, t->send, NULL, (size_t)nr * block);
move1:
	rc = await_move(h, t);
	if (rc)
		return hier__suspend(t, AT_MOVE1, rc);
	if (lead)
		move_init(t, lr, 0, NULL, t->bufs + (size_t)nr * block,
		          (size_t)(N - 1 - nr) * block);
	else
		move_init(t, lr, 0, t->send ? t->send + (size_t)(nr + 1) * block : NULL, NULL,
		          (size_t)(N - 1 - nr) * block);
move2:
	rc = await_move(h, t);
	if (rc)
		return hier__suspend(t, AT_MOVE2, rc);
	if (lead) {
		for (q = 0, k = 0; q < N; q++) {
			src = lr == 0 ? t->send + (size_t)q * block
			              : t->bufs + shmcoll__pos_without(q, nr) * block;
			if (q != nr)
				t->x[k++] = (struct shmcoll_xfer){q,     XFER_SEND, (void *)src,
				                                  block, t->call,   0};
		}
		hier__lead_xfer(&t->lead, t->fn, t->x, k);
	send:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD2, rc);
	}
	shmcoll__scatter_init(h->local, &t->node,
	                      h->lrank == lr ? t->send + (size_t)nr * block : NULL, t->recv,
	                      t->count, t->dt, lr);
scatter_home:
	rc = hier__await_node(h, t);
	return hier__suspend(t, AT_NODE2, rc);
}

/* alltoall: gather every rank's sendbuf to the leader; the leaders swap per-node blocks;
 * the leader reorders; scatter. Scratch of the leader: G every local rank's sendbuf; O, I
 * per node, [j][i] the block local i sends to (or receives from) local j; T per local rank,
 * its recvbuf. */
static int alltoall_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t b = t->count * t->es, P = (size_t)h->nproc, S = (size_t)h->size;
	size_t row = S * b, nblk = P * P * b, i, j;
	int rc, N = h->nnodes, lead = h->lrank == 0, m, k;
	uint8_t *G = h->scr[SCR_IN], *O = h->scr[SCR_RES], *I = h->scr[SCR_NET];

	switch (t->head.at) {
	case AT_NODE1:
		goto gather;
	case AT_LEAD1:
		goto swap;
	case AT_NODE2:
		goto scatter;
	}
	t->out = NULL;
	G = NULL;
	if (lead) {
		G = hier__scratch(h, SCR_IN, P * row);
		O = hier__scratch(h, SCR_RES, (size_t)N * nblk);
		I = hier__scratch(h, SCR_NET,
		                  hier__align16((size_t)N * nblk) + sizeof(*t->x) * 2 * (size_t)N);
		t->out = hier__scratch(h, SCR_TMP, P * row);
		if (!G || !O || !I || !t->out)
			return hier__oom(h, t->fn, 2 * P * row + 2 * (size_t)N * nblk);
	}
	shmcoll__gather_init(h->local, &t->node, t->send, G, S * t->count, t->dt, 0);
gather:
	rc = hier__await_node(h, t);
	if (rc)
		return hier__suspend(t, AT_NODE1, rc);
	if (lead) {
		for (m = 0; m < N; m++)
			for (j = 0; j < P; j++)
				for (i = 0; i < P; i++)
					memcpy(O + (size_t)m * nblk + (j * P + i) * b,
					       G + i * row + ((size_t)m * P + j) * b, b);
		t->x = (struct shmcoll_xfer *)(I + hier__align16((size_t)N * nblk));
		for (m = 0, k = 0; m < N; m++) {
			if (m == h->node)
				continue;
			t->x[k++] = (struct shmcoll_xfer){m,    XFER_SEND, O + (size_t)m * nblk,
			                                  nblk, t->call,   0};
			t->x[k++] = (struct shmcoll_xfer){m,    XFER_RECV, I + (size_t)m * nblk,
			                                  nblk, t->call,   0};
		}
		memcpy(I + (size_t)h->node * nblk, O + (size_t)h->node * nblk, nblk);
		hier__lead_xfer(&t->lead, t->fn, t->x, k);
	swap:
		rc = hier__await_lead(h, t);
		if (rc)
			return hier__suspend(t, AT_LEAD1, rc);
		for (j = 0; j < P; j++)
			for (m = 0; m < N; m++)
				memcpy(t->out + j * row + (size_t)m * P * b,
				       I + (size_t)m * nblk + j * P * b, P * b);
	}
	shmcoll__scatter_init(h->local, &t->node, t->out, t->recv, S * t->count, t->dt, 0);
scatter:
	rc = hier__await_node(h, t);
	return hier__suspend(t, AT_NODE2, rc);
}

/* Sets t up for a call of kind: its arguments, its advance, the wide form of a reduction and
 * the word every frame of the call carries. */
void hier__call_init(struct hier_task *t, uint32_t kind, const void *send, void *recv, size_t count,
                     shmcoll_dtype dt, shmcoll_op op, int root)
{
	/* Each kind's advance; its name and whether it reduces are the node's row
	 * (lib/coll/kinds.c). */
	static int (*const advance[KIND_COUNT])(struct shmcoll_hier *, struct hier_task *) = {
	    [KIND_BARRIER] = barrier_advance,     [KIND_BCAST] = bcast_advance,
	    [KIND_REDUCE] = reduce_advance,       [KIND_ALLREDUCE] = allreduce_advance,
	    [KIND_ALLGATHER] = allgather_advance, [KIND_REDUCE_SCATTER] = reduce_scatter_advance,
	    [KIND_GATHER] = gather_advance,       [KIND_SCATTER] = scatter_advance,
	    [KIND_ALLTOALL] = alltoall_advance,
	};
	const struct shmcoll_start *k = &shmcoll__kinds[kind];

	if (kind == KIND_BARRIER) {
		dt = SHMCOLL_UINT8;
		count = 0;
	}
	if (!k->reduces)
		op = SHMCOLL_SUM;
	task_init(t, k->fn, advance[kind], send, recv, count, dt, op, root);
	if (k->reduces)
		t->w = hier__widen(dt, op);
	t->call =
	    hier__call_word(kind, kind == KIND_BARRIER ? 0 : dt, k->reduces ? op : 0, root, count);
}

struct hier_task *shmcoll__hier_call_new(struct shmcoll_hier *h, uint32_t kind, const void *send,
                                         void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op,
                                         int root)
{
	struct hier_task *t = calloc(1, sizeof(*t));

	(void)h;
	if (t)
		hier__call_init(t, kind, send, recv, count, dt, op, root);
	return t;
}

/* The blocking calls: a call on the stack, run to the end. */
static int run(struct shmcoll_hier *h, uint32_t kind, const void *send, void *recv, size_t count,
               shmcoll_dtype dt, shmcoll_op op, int root)
{
	struct hier_task t;

	hier__call_init(&t, kind, send, recv, count, dt, op, root);
	return hier__task_run(h, &t);
}

int shmcoll__hier_barrier(struct shmcoll_hier *h)
{
	return run(h, KIND_BARRIER, NULL, NULL, 0, SHMCOLL_UINT8, SHMCOLL_SUM, -1);
}

int shmcoll__hier_allreduce(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv,
                            size_t count, shmcoll_dtype dt, shmcoll_op op)
{
	return run(h, KIND_ALLREDUCE, send, recv, count, dt, op, -1);
}

int shmcoll__hier_reduce(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root)
{
	return run(h, KIND_REDUCE, send, recv, count, dt, op, root);
}

int shmcoll__hier_bcast(struct shmcoll_hier *h, uint8_t *buf, size_t count, shmcoll_dtype dt,
                        int root)
{
	return run(h, KIND_BCAST, buf, buf, count, dt, SHMCOLL_SUM, root);
}

int shmcoll__hier_allgather(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t sc,
                            shmcoll_dtype dt)
{
	return run(h, KIND_ALLGATHER, send, recv, sc, dt, SHMCOLL_SUM, -1);
}

int shmcoll__hier_reduce_scatter(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv,
                                 size_t rcount, shmcoll_dtype dt, shmcoll_op op)
{
	return run(h, KIND_REDUCE_SCATTER, send, recv, rcount, dt, op, -1);
}

int shmcoll__hier_gather(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t sc,
                         shmcoll_dtype dt, int root)
{
	return run(h, KIND_GATHER, send, recv, sc, dt, SHMCOLL_SUM, root);
}

int shmcoll__hier_scatter(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t rcount,
                          shmcoll_dtype dt, int root)
{
	return run(h, KIND_SCATTER, send, recv, rcount, dt, SHMCOLL_SUM, root);
}

int shmcoll__hier_alltoall(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t count,
                           shmcoll_dtype dt)
{
	return run(h, KIND_ALLTOALL, send, recv, count, dt, SHMCOLL_SUM, -1);
}
