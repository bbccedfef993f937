/* gather.c - the root gets every rank's block, in rank order.
 *
 * Inline (blocks of at most SHMCOLL_INLINE_MAX bytes): non-roots publish their block in their
 * message and leave, the root copies every message into place.
 *
 * Flat protocol, for each chunk of at most slot_half bytes of the block:
 *   1. Each rank other than the root copies its chunk into its staging half for this step,
 *      unless sendbuf is in its symmetric heap (then the root reads it in place).
 *   2. Every rank publishes the step; the root waits for every peer's (and the others for
 *      every peer too from GATHER_LAGGED_MAX on); the first chunk checks the descriptors.
 *   3. The root copies every peer's chunk into that peer's block of recvbuf, and its own from
 *      sendbuf unless in place (an addition to the contract, as for allgather:
 *      sendbuf == recvbuf + root * sendcount * elemsize).
 *   Halves are reused two steps later as in allreduce.c; a final step when the root read a
 *   peer in place.
 *
 * Single-copy protocol (lib/core/cma.h), for blocks from the measured size on where every rank
 * can read its peers' memory: the others publish where sendbuf is; the root reads every block
 * from their memory into recvbuf, then publishes a second step they wait for before
 * returning. The root reads rather than the others writing into it: no rank ever writes
 * another's memory. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

/* Below this total the non-roots do not wait for the root (docs/BENCHMARKS.md:
 * back-to-back gathers then overlap by one call). */
#define GATHER_LAGGED_MAX (64u * 1024)

enum { AT_GUARD = 1, AT_GATHER, AT_STAGE, AT_STEP, AT_READ, AT_END };

static SHMCOLL_HOT int gather_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
	int rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_GATHER:
		goto gather;
	}
	shmcoll__describe_inline(n, t);
guard:
	rc = shmcoll__await_msg_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	if (n->rank != t->root) {
		shmcoll__msg_publish(n, t, t->send, bytes);
		return 0;
	}
	shmcoll__msg_publish(n, t, NULL, 0);
gather:
	rc = shmcoll__await_msg_gather(n, t, t->send, t->recv, bytes);
	return shmcoll__suspend(t, AT_GATHER, rc);
}

static int gather_cma(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
	int rc, is_root = n->rank == t->root;
	uint8_t *to;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_READ:
		goto read;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	if (!is_root) {
		t->d->addr = (uint64_t)(uintptr_t)t->send;
		t->d->src_off = shmcoll__heap_off(n, t->send, bytes);
	}
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__publish_next(n, t->d);
read:
	rc = shmcoll__await_from(n, t, is_root ? STEP_ALL : STEP_NONE, 1, bytes);
	if (rc)
		return shmcoll__suspend(t, AT_READ, rc);
	for (t->p = 0; is_root && t->p < n->size; t->p++) {
		to = t->recv + (size_t)t->p * bytes;
		if (t->p != t->root)
			rc = shmcoll__cma_fetch(n, t, t->p, to, 0, bytes);
		else if (t->send != to)
			memcpy(to, t->send, bytes);
		if (rc < 0)
			return rc;
	}
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_from(n, t, is_root ? STEP_NONE : t->root, 0, 0);
	return shmcoll__suspend(t, AT_END, rc);
}

static int gather_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, cap = shmcoll__chunk_elems(n, es, 1), bytes = t->count * es;
	int p, rc, is_root = n->rank == t->root;
	int lagged = bytes * (size_t)n->size < GATHER_LAGGED_MAX;
	const uint8_t *own = is_root ? t->recv + (size_t)t->root * bytes : NULL, *src;

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
	/* Large gathers read symmetric sources in place, with every rank waiting for every
	 * peer; small ones are lagged (see above). */
	if (!is_root && !lagged)
		t->d->src_off = shmcoll__heap_off(n, t->send, bytes);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		if (!is_root && t->d->src_off == NO_OFF) {
		stage:
			rc = shmcoll__await_guard(n, t);
			if (rc)
				return shmcoll__suspend(t, AT_STAGE, rc);
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), t->send + t->off * es,
			                 t->len * es);
		}
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, is_root || !lagged ? STEP_ALL : STEP_NONE,
		                         t->off == 0, bytes);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (!is_root)
			continue;
		for (p = 0; p < n->size; p++) {
			if (p == t->root)
				src = t->send == own ? NULL : t->send + t->off * es;
			else
				src = n->st.zc[p] ? n->st.zc[p] + t->off * es
				                  : shmcoll__slot(n, p, t->step);
			if (src)
				shmcoll__copy_out(t->recv + (size_t)p * bytes + t->off * es, src,
				                  t->len * es);
		}
	}
	if (!shmcoll__zc_any(n, t->root))
		return 0;
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_END, rc);
}

void shmcoll__gather_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                          void *recv, size_t sendcount, shmcoll_dtype dt, int root)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_gather", KIND_GATHER, dt, SHMCOLL_SUM, root, send,
	                         recv, sendcount))
		return;
	bytes = sendcount * t->es;
	if (shmcoll__algo_inline(n, ALGO_FLAT, bytes)) {
		t->advance = gather_inline;
	} else if (shmcoll__cma_pick(n, KIND_GATHER, bytes)) {
		t->algo = ALGO_CMA;
		t->advance = gather_cma;
	} else {
		t->advance = gather_flat;
	}
}

int shmcoll__node_gather(struct shmcoll_node *n, const void *send, void *recv, size_t sendcount,
                         shmcoll_dtype dt, int root)
{
	struct shmcoll_task t;

	shmcoll__gather_init(n, &t, send, recv, sendcount, dt, root);
	return shmcoll__task_run_likely(n, &t, gather_inline);
}
