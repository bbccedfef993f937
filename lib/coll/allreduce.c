/* allreduce.c - every rank gets op over all ranks' vectors.
 *
 * Three protocols. All fold the ranks' values in rank order, so they give the same bits, and
 * a call's choice is the same on every rank (lib/core/algo.c).
 *
 * Inline (vectors of at most SHMCOLL_INLINE_MAX bytes, the flat protocol's small form): every
 * rank publishes its vector in its message and folds everyone's, one transfer per peer.
 *
 * Flat all-read (small vectors), for each chunk of at most slot_half bytes:
 *   1. Each rank copies its chunk of sendbuf into its own staging half for this step (half =
 *      step & 1) - unless its sendbuf lies in its symmetric heap and is not also its
 *      recvbuf: then peers read it in place.
 *   2. It publishes the step (release) and waits for every peer's (acquire). On the first
 *      chunk it checks every peer's call word (same call).
 *   3. It reduces all ranks' chunks, in rank order, into its recvbuf.
 *   A staging half is rewritten two steps later, which the writer reaches only after every
 *   peer published the step in between, i.e. finished reading. If any rank was read in
 *   place, one more step at the end keeps it from returning while a peer still reads its
 *   buffer.
 *
 * Direct reduce-scatter + allgather (large vectors): direct.c. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_STEP, AT_RELEASE };

static SHMCOLL_HOT int allreduce_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
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
	shmcoll__msg_publish(n, t, t->send, t->count * t->es);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank) {
			n->st.srcs[t->p] = t->send != t->recv
			                       ? t->send
			                       : shmcoll__msg_mine(n, t, t->count * t->es);
			continue;
		}
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
		n->st.srcs[t->p] = m;
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	t->reduce(t->recv, n->st.srcs, n->size, t->count);
	return 0;
}

static int allreduce_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t cap = shmcoll__chunk_elems(n, t->es, 1), es = t->es;
	int p, rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	case AT_RELEASE:
		goto release;
	}
	shmcoll__describe(n, t);
	if (t->send != t->recv)
		t->d->src_off = shmcoll__heap_off(n, t->send, t->count * es);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		if (t->d->src_off == NO_OFF)
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), t->send + t->off * es,
			                 t->len * es);
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->off == 0, t->count * es);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		for (p = 0; p < n->size; p++)
			n->st.srcs[p] = n->st.zc[p] ? n->st.zc[p] + t->off * es
			                : p == n->rank && t->send != t->recv
			                    ? t->send + t->off * es
			                    : shmcoll__slot(n, p, t->step);
		t->reduce(t->recv + t->off * es, n->st.srcs, n->size, t->len);
	}
	if (!shmcoll__zc_any(n, -1))
		return 0;
	shmcoll__publish_next(n, NULL);
release:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_RELEASE, rc);
}

void shmcoll__allreduce_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_allreduce", KIND_ALLREDUCE, dt, op, -1, send, recv,
	                         count))
		return;
	bytes = count * t->es;
	t->reduce = shmcoll__reduce_lookup(dt, op);
	t->algo = shmcoll__algo_reduction(n, KIND_ALLREDUCE, bytes, t->es);
	if (shmcoll__algo_inline_all(n, t->algo, bytes))
		t->advance = allreduce_inline;
	else if (t->algo == ALGO_DIRECT)
		t->advance = shmcoll__direct_advance;
	else
		t->advance = allreduce_flat;
}

int shmcoll__node_allreduce(struct shmcoll_node *n, const void *send, void *recv, size_t count,
                            shmcoll_dtype dt, shmcoll_op op)
{
	struct shmcoll_task t;

	shmcoll__allreduce_init(n, &t, send, recv, count, dt, op);
	return shmcoll__task_run_likely(n, &t, allreduce_inline);
}
