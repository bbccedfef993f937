/* scatter.c - rank r gets block r of the root's sendbuf.
 *
 * Inline (the blocks of the other ranks, at most the layout's msg_max bytes): they travel in
 * the root's message, in rank order without the root's own, which the root copies itself;
 * each other rank copies its block from there.
 *
 * Flat protocol, for each chunk of n elements of a block, n at most
 * slot_half / ((size - 1) * elemsize):
 *   1. The root copies chunk k of every other rank's block q to position q (q - 1 past the
 *      root) of its staging half for this step, unless sendbuf is in its symmetric heap (then
 *      the others read it in place).
 *   2. Every rank publishes the step; the others wait for the root's; the first chunk checks
 *      its descriptor.
 *   3. Each other rank copies its position (or block) into recvbuf; the root copies its own
 *      block from sendbuf unless in place (an addition to the contract:
 *      recvbuf == sendbuf + root * recvcount * elemsize).
 *   Halves are reused two steps later as in allreduce.c; a final step when the root was read
 *   in place.
 *
 * Single-copy protocol (lib/core/cma.h), for blocks from the measured size on where every rank
 * can read its peers' memory: the root publishes where sendbuf is; each other rank reads its
 * block from the root's memory into recvbuf; a second step holds the root until all have. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_STAGE, AT_STEP, AT_READ, AT_END };

static SHMCOLL_HOT int scatter_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
	const uint8_t *own = n->rank == t->root ? t->send + (size_t)t->root * bytes : NULL;
	const uint8_t *m;
	int rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_PEER:
		goto peer;
	}
	shmcoll__describe_inline(n, t);
guard:
	rc = shmcoll__await_msg_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	if (n->rank == t->root) {
		/* Every block but the root's own, in rank order. */
		shmcoll__msg_publish2(n, t, t->send, (size_t)t->root * bytes, own + bytes,
		                      (size_t)(n->size - 1 - t->root) * bytes);
		if (t->recv != own)
			shmcoll__copy_out(t->recv, own, bytes);
		return 0;
	}
	shmcoll__msg_publish(n, t, NULL, 0);
peer:
	rc = shmcoll__await_msg(n, t, t->root, &m);
	if (rc)
		return shmcoll__suspend(t, AT_PEER, rc);
	shmcoll__copy_out(t->recv, m + shmcoll__pos_without(n->rank, t->root) * bytes, bytes);
	shmcoll__msg_prefetch_next(n, t, t->root, shmcoll__pos_without(n->rank, t->root) * bytes,
	                           bytes, SHMCOLL_MSG_PREFETCH_MAX);
	shmcoll__msg_seen(n, t);
	return 0;
}

static int scatter_cma(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
	const uint8_t *own = n->rank == t->root ? t->send + (size_t)t->root * bytes : NULL;
	int rc, is_root = n->rank == t->root;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_READ:
		goto read;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	if (is_root) {
		t->d->src_off = shmcoll__heap_off(n, t->send, bytes * (size_t)n->size);
		t->d->addr = (uint64_t)(uintptr_t)t->send;
	}
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__publish_next(n, t->d);
read:
	rc = shmcoll__await_from(n, t, is_root ? STEP_NONE : t->root, 1, bytes * (size_t)n->size);
	if (rc)
		return shmcoll__suspend(t, AT_READ, rc);
	if (!is_root)
		rc = shmcoll__cma_fetch(n, t, t->root, t->recv, (size_t)n->rank * bytes, bytes);
	else if (t->recv != own)
		shmcoll__copy_out(t->recv, own, bytes);
	if (rc < 0)
		return rc;
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_from(n, t, is_root ? STEP_ALL : STEP_NONE, 0, 0);
	return shmcoll__suspend(t, AT_END, rc);
}

static int scatter_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, bytes = t->count * es, total = bytes * (size_t)n->size;
	size_t cap = shmcoll__chunk_elems(n, es, shmcoll__peer_parts(n));
	const uint8_t *own = n->rank == t->root ? t->send + (size_t)t->root * bytes : NULL;
	int rc, is_root = n->rank == t->root;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STAGE:
		goto stage;
	case AT_STEP:
		goto step;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	if (is_root)
		t->d->src_off = shmcoll__heap_off(n, t->send, total);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		if (is_root && t->d->src_off == NO_OFF) {
		stage:
			rc = shmcoll__await_guard(n, t);
			if (rc)
				return shmcoll__suspend(t, AT_STAGE, rc);
			shmcoll__stage_others(shmcoll__slot(n, n->rank, t->step), t->send,
			                      (size_t)n->size, (size_t)t->root, bytes, t->off * es,
			                      t->len * es);
		}
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, is_root ? STEP_NONE : t->root, t->off == 0, total);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (is_root) {
			if (t->recv != own)
				shmcoll__copy_out(t->recv + t->off * es, own + t->off * es,
				                  t->len * es);
		} else {
			shmcoll__copy_out(
			    t->recv + t->off * es,
			    n->st.zc[t->root]
			        ? n->st.zc[t->root] + (size_t)n->rank * bytes + t->off * es
			        : shmcoll__slot(n, t->root, t->step) +
			              shmcoll__pos_without(n->rank, t->root) * t->len * es,
			    t->len * es);
		}
	}
	/* Every rank knows whether the root was read in place: the root from its own
	 * descriptor, the others from its call word. */
	if (is_root ? t->d->src_off == NO_OFF : n->st.zc[t->root] == NULL)
		return 0;
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_END, rc);
}

void shmcoll__scatter_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                           void *recv, size_t recvcount, shmcoll_dtype dt, int root)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_scatter", KIND_SCATTER, dt, SHMCOLL_SUM, root, send,
	                         recv, recvcount))
		return;
	bytes = recvcount * t->es;
	if (shmcoll__algo_inline(n, ALGO_FLAT, bytes * (size_t)(n->size - 1))) {
		t->advance = scatter_inline;
	} else if (shmcoll__cma_pick(n, KIND_SCATTER, bytes)) {
		t->algo = ALGO_CMA;
		t->advance = scatter_cma;
	} else {
		t->advance = scatter_flat;
	}
}

int shmcoll__node_scatter(struct shmcoll_node *n, const void *send, void *recv, size_t recvcount,
                          shmcoll_dtype dt, int root)
{
	struct shmcoll_task t;

	shmcoll__scatter_init(n, &t, send, recv, recvcount, dt, root);
	return shmcoll__task_run_likely(n, &t, scatter_inline);
}
