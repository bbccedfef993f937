/* barrier.c - no rank leaves before every rank has entered.
 *
 * Flat protocol: one inline step (lib/core/engine.h, the message ring). Each rank writes its
 * message - no data, just the call word - publishes the step, and waits until every peer's
 * message for it is there, i.e. every peer entered the barrier; the call words are checked so
 * a barrier matched with another collective fails with -EPROTO. Spinning on the peers'
 * message lines rather than their seq lines leaves seq to its owner on the fast path, so its
 * publish does not wait for a line a peer is polling (measured 0.127 -> 0.076 us at P=2,
 * docs/BENCHMARKS.md).
 *
 * Tree protocol (k-nomial, root 0, lib/sched; topology-aware where the ranks span L3 domains,
 * lib/core/topo.h), two steps s and s + 1:
 *   1. Arrive: wait until each child has published s (its whole subtree has arrived) and
 *      check its call word, then publish s.
 *   2. Release: the root publishes s + 1 at once; every other rank waits for its parent's
 *      s + 1, then publishes s + 1 for its own children.
 *   A child's call word cannot change while its parent checks it: the child is waiting for
 *   the release. Nobody is released before the root heard from every subtree, so a mismatch
 *   anywhere stops everyone. No staging half is touched. Each rank polls at most its
 *   children and its parent instead of all P - 1 peers. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/core/topo.h"
#include "lib/sched/sched.h"

enum { AT_GUARD = 1, AT_PEER, AT_CHILD, AT_PARENT, AT_STEP };

static SHMCOLL_HOT int barrier_inline(struct shmcoll_node *n, struct shmcoll_task *t)
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
	shmcoll__msg_publish(n, t, NULL, 0);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank)
			continue;
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	return 0;
}

static int barrier_tree(struct shmcoll_node *n, struct shmcoll_task *t)
{
	int rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_CHILD:
		goto child;
	case AT_PARENT:
		goto parent;
	}
	shmcoll__describe(n, t);
	shmcoll__node_tree(n, 0, t->algo == ALGO_TOPO, &t->tree);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	t->step = n->st.seq + 1; /* arrive */
	for (t->p = 0; t->p < t->tree.nchildren; t->p++) {
	child:
		rc = shmcoll__await_rank(n, t, t->tree.children[t->p], t->step);
		if (rc == 0)
			rc = shmcoll__check_rank(n, t, t->tree.children[t->p], 0);
		if (rc)
			return shmcoll__suspend(t, AT_CHILD, rc);
	}
	shmcoll__publish_next(n, t->d);
	if (t->tree.parent >= 0) {
	parent:
		rc = shmcoll__await_rank(n, t, t->tree.parent, t->step + 1);
		if (rc)
			return shmcoll__suspend(t, AT_PARENT, rc);
	}
	shmcoll__publish_next(n, NULL);
	/* Our only shared write, the call word, was checked by the parent before it arrived,
	 * and every rank arrived: all readers are done. */
	n->st.clean = n->st.seq;
	return 0;
}

/* The flat protocol's staged form (SHMCOLL_ALGO=barrier:flat at one rank, where nothing
 * travels inline): one step with every call word checked. */
static int barrier_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	int rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__publish_next(n, t->d);
step:
	rc = shmcoll__await_from(n, t, STEP_ALL, 1, 0);
	return shmcoll__suspend(t, AT_STEP, rc);
}

void shmcoll__barrier_init(struct shmcoll_node *n, struct shmcoll_task *t)
{
	/* What describing the call reads, no more: a barrier moves nothing. */
	shmcoll__task_init(t, "shmcoll_barrier", barrier_flat);
	t->kind = KIND_BARRIER;
	t->dtype = SHMCOLL_UINT8;
	t->op = SHMCOLL_SUM;
	t->root = -1;
	t->count = 0;
	if (shmcoll__alone(n, t))
		return;
	t->algo = shmcoll__algo_tree(n, KIND_BARRIER, SHMCOLL_TREE_MIN_RANKS);
	if (shmcoll__algo_inline(n, t->algo, 0))
		t->advance = barrier_inline;
	else if (t->algo == ALGO_TREE || t->algo == ALGO_TOPO)
		t->advance = barrier_tree;
}

int shmcoll__node_barrier(struct shmcoll_node *n)
{
	struct shmcoll_task t;

	shmcoll__barrier_init(n, &t);
	return shmcoll__task_run_likely(n, &t, barrier_inline);
}
