/* reduce.c - the root gets op over all ranks' vectors.
 *
 * Inline (vectors of at most the layout's msg_max bytes): non-roots publish their message and
 * leave; the root folds every message (its own vector straight from sendbuf, or when in place
 * from a copy in its own message's unused data space).
 *
 * Flat protocol, for each chunk of at most slot_half bytes:
 *   1. Each rank other than the root copies its chunk into its staging half for this step
 *      and publishes it without waiting for anyone. The root reads its own sendbuf directly,
 *      staging it only when in place (sendbuf == recvbuf).
 *   2. The root publishes the step, waits for every peer's (checking their call words on the
 *      first chunk) and reduces all ranks' chunks in rank order into recvbuf.
 *   A rank waits only before it rewrites a half (the guard), so back-to-back reductions
 *   overlap by one call. Small vectors only: the root is read from staging, never in place,
 *   so no rank needs to learn whether another was read in place.
 *
 * The direct protocol (direct.c) is also available: every rank reduces 1/P of the vector and
 * the root gathers the slices, so the reduction work is spread over all ranks instead of
 * falling on the root. It only pays from 64 MiB (SHMCOLL_REDUCE_DIRECT_MIN). */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_STAGE, AT_STEP };

static SHMCOLL_HOT int reduce_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	const uint8_t *m;
	uint8_t *tmp;
	int p, rc;

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
	if (n->rank != t->root) {
		shmcoll__msg_publish(n, t, t->send, t->count * t->es);
		return 0;
	}
	shmcoll__msg_publish(n, t, NULL, 0);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == t->root) {
			n->st.srcs[t->p] = t->send;
			continue;
		}
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
		n->st.srcs[t->p] = m;
	}
	n->st.clean = n->st.seq - 1;
	if (t->send == t->recv) {
		/* In place: the kernel's dst may not be one of its sources. */
		tmp = shmcoll__msg_scratch(n, t, t->count * t->es);
		memcpy(tmp, t->send, t->count * t->es);
		n->st.srcs[t->root] = tmp;
	}
	t->reduce(t->recv, n->st.srcs, n->size, t->count);
	for (p = 0; p < n->size; p++)
		if (p != t->root)
			shmcoll__msg_prefetch_next(n, t, p, 0, t->count * t->es,
			                           SHMCOLL_MSG_PREFETCH_MAX);
	return 0;
}

static int reduce_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t cap = shmcoll__chunk_elems(n, t->es, 1), es = t->es;
	int p, rc, is_root = n->rank == t->root, inplace = is_root && t->send == t->recv;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STAGE:
		goto stage;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		if (!is_root || inplace) {
		stage:
			rc = shmcoll__await_guard(n, t);
			if (rc)
				return shmcoll__suspend(t, AT_STAGE, rc);
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), t->send + t->off * es,
			                 t->len * es);
		}
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, is_root ? STEP_ALL : STEP_NONE, t->off == 0,
		                         t->count * es);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (!is_root)
			continue;
		for (p = 0; p < n->size; p++)
			n->st.srcs[p] = shmcoll__slot(n, p, t->step);
		if (!inplace)
			n->st.srcs[t->root] = t->send + t->off * es;
		t->reduce(t->recv + t->off * es, n->st.srcs, n->size, t->len);
	}
	return 0;
}

void shmcoll__reduce_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                          void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op, int root)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_reduce", KIND_REDUCE, dt, op, root, send, recv,
	                         count))
		return;
	bytes = count * t->es;
	t->reduce = shmcoll__reduce_lookup(dt, op);
	t->algo = shmcoll__algo_reduction(n, KIND_REDUCE, bytes, t->es);
	if (shmcoll__algo_inline(n, t->algo, bytes))
		t->advance = reduce_inline;
	else if (t->algo == ALGO_DIRECT)
		t->advance = shmcoll__direct_advance;
	else
		t->advance = reduce_flat;
}

int shmcoll__node_reduce(struct shmcoll_node *n, const void *send, void *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root)
{
	struct shmcoll_task t;

	shmcoll__reduce_init(n, &t, send, recv, count, dt, op, root);
	return shmcoll__task_run_likely(n, &t, reduce_inline);
}
