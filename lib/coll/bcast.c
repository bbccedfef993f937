/* bcast.c - every rank gets the root's vector.
 *
 * Inline (at most SHMCOLL_INLINE_MAX bytes): the root publishes its message and leaves; the
 * others publish the step and copy the root's message.
 *
 * Flat protocol, for each chunk of at most slot_half bytes:
 *   1. The root copies its chunk into its staging half for this step, unless buf is in its
 *      symmetric heap (then the others read it in place), and publishes the step without
 *      waiting for anyone.
 *   2. Every other rank publishes the step, waits for the root's (checking its call word on
 *      the first chunk) and copies the root's chunk.
 *   The root waits only before it rewrites a half (the guard: every rank published the step
 *   before, i.e. read what it overwrites), so back-to-back broadcasts overlap by one call.
 *   When the root was read in place, a final step keeps it from returning while a rank still
 *   reads.
 *
 * Tree protocol (k-nomial from the root, lib/sched; topology-aware where the ranks span L3
 * domains, lib/core/topo.h), chunk i at step s + i:
 *   1. Flow control: before writing its half for step s + i, a rank waits until its children
 *      published s + i - 2 (they have read what it wrote there); for i < 2 that half may
 *      still hold what the call before this one wrote, read by anyone, and the guard waits
 *      for that.
 *   2. The root copies chunk i into its half; any other rank waits for its parent's s + i (on
 *      the first chunk checking its call word), copies the parent's chunk into buf and, if it
 *      has children, into its own half.
 *   3. It publishes s + i.
 *   At the end each rank waits until its children published the last step, so nothing it
 *   wrote in this call is still to be read when it returns. Per chunk a rank waits on its
 *   parent and children only.
 *
 * Single-copy protocol (lib/core/cma.h), from the measured block size on where every rank can
 * read its peers' memory: the root publishes the address of buf and waits, one step later,
 * for everyone; the others read buf from the root's memory straight into theirs. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/core/topo.h"
#include "lib/kernels/copy.h"
#include "lib/sched/sched.h"

enum { AT_GUARD = 1, AT_STAGE, AT_STEP, AT_PEER, AT_CHILDREN, AT_PARENT, AT_END, AT_READ };

static SHMCOLL_HOT int bcast_inline(struct shmcoll_node *n, struct shmcoll_task *t)
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
	if (n->rank == t->root) {
		shmcoll__msg_publish(n, t, t->recv, t->count * t->es);
		return 0;
	}
	shmcoll__msg_publish(n, t, NULL, 0);
peer:
	rc = shmcoll__await_msg(n, t, t->root, &m);
	if (rc)
		return shmcoll__suspend(t, AT_PEER, rc);
	shmcoll__copy_out(t->recv, m, t->count * t->es);
	shmcoll__msg_prefetch_next(n, t, t->root, 0, t->count * t->es, SHMCOLL_MSG_PREFETCH_MAX);
	shmcoll__msg_seen(n, t);
	return 0;
}

static int bcast_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t cap = shmcoll__chunk_elems(n, t->es, 1), es = t->es;
	uint8_t *b = t->recv;
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
		t->d->src_off = shmcoll__heap_off(n, b, t->count * es);
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
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), b + t->off * es,
			                 t->len * es);
		}
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, is_root ? STEP_NONE : t->root, t->off == 0,
		                         t->count * es);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (!is_root)
			shmcoll__copy_out(b + t->off * es,
			                  n->st.zc[t->root] ? n->st.zc[t->root] + t->off * es
			                                    : shmcoll__slot(n, t->root, t->step),
			                  t->len * es);
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

/* Single copy: the root publishes where buf is and waits, after a second step, until
 * everyone has read it; the others read it whole. */
static int bcast_cma(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
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
		t->d->addr = (uint64_t)(uintptr_t)t->recv;
		t->d->src_off = shmcoll__heap_off(n, t->recv, bytes);
	}
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__publish_next(n, t->d);
read:
	rc = shmcoll__await_from(n, t, is_root ? STEP_NONE : t->root, 1, bytes);
	if (rc == 0 && !is_root)
		rc = shmcoll__cma_fetch(n, t, t->root, t->recv, 0, bytes);
	if (rc)
		return shmcoll__suspend(t, AT_READ, rc);
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_from(n, t, is_root ? STEP_ALL : STEP_NONE, 0, 0);
	return shmcoll__suspend(t, AT_END, rc);
}

/* Each of the tree's children has published want; t->k counts those seen. */
static int await_children(struct shmcoll_node *n, struct shmcoll_task *t, uint32_t want)
{
	int rc;

	for (; t->k < t->tree.nchildren; t->k++) {
		rc = shmcoll__await_rank(n, t, t->tree.children[t->k], want);
		if (rc)
			return rc;
	}
	t->k = 0;
	return 0;
}

static int bcast_tree(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t cap = shmcoll__chunk_elems(n, t->es, 1), es = t->es;
	uint8_t *b = t->recv;
	int rc;

	switch (t->head.at) {
	case AT_CHILDREN:
		goto children;
	case AT_GUARD:
		goto guard;
	case AT_PARENT:
		goto parent;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	shmcoll__node_tree(n, t->root, t->algo == ALGO_TOPO, &t->tree);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		/* The first two halves may hold what the call before wrote, read by anyone: the
		 * guard. Later ones only this call's chunks, read by the children only. Steps
		 * wrap: their distance, not their order. */
		if (t->step - t->d->step >= 2) {
		children:
			rc = await_children(n, t, t->step - 2);
			if (rc)
				return shmcoll__suspend(t, AT_CHILDREN, rc);
			n->st.clean = t->step - 2;
		} else {
		guard:
			rc = shmcoll__await_guard(n, t);
			if (rc)
				return shmcoll__suspend(t, AT_GUARD, rc);
		}
		if (t->tree.parent < 0) {
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), b + t->off * es,
			                 t->len * es);
		} else {
		parent:
			rc = shmcoll__await_rank(n, t, t->tree.parent, t->step);
			if (rc == 0 && t->step == t->d->step)
				rc = shmcoll__check_rank(n, t, t->tree.parent, 0);
			if (rc)
				return shmcoll__suspend(t, AT_PARENT, rc);
			shmcoll__copy_out(b + t->off * es,
			                  shmcoll__slot(n, t->tree.parent, t->step), t->len * es);
			if (t->tree.nchildren)
				shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step),
				                 b + t->off * es, t->len * es);
		}
		shmcoll__publish_next(n, t->step == t->d->step ? t->d : NULL);
	}
	/* Children publish a step after reading it: once they published the last one, nothing
	 * this rank wrote in this call is still to be read. What it wrote at first - 1 (the
	 * call before) is known read only if the guard of a second chunk waited for it; else
	 * clean stays below. */
end:
	rc = await_children(n, t, n->st.seq);
	if (rc)
		return shmcoll__suspend(t, AT_END, rc);
	if (n->st.seq != t->d->step)
		n->st.clean = n->st.seq;
	return 0;
}

void shmcoll__bcast_init(struct shmcoll_node *n, struct shmcoll_task *t, void *buf, size_t count,
                         shmcoll_dtype dt, int root)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_bcast", KIND_BCAST, dt, SHMCOLL_SUM, root, buf, buf,
	                         count))
		return;
	bytes = count * t->es;
	if (shmcoll__cma_pick(n, KIND_BCAST, bytes)) {
		t->algo = ALGO_CMA;
		t->advance = bcast_cma;
		return;
	}
	t->algo = shmcoll__algo_tree(n, KIND_BCAST, SHMCOLL_TREE_MIN_RANKS);
	if (shmcoll__algo_inline(n, t->algo, bytes))
		t->advance = bcast_inline;
	else if (t->algo == ALGO_TREE || t->algo == ALGO_TOPO)
		t->advance = bcast_tree;
	else
		t->advance = bcast_flat;
}

int shmcoll__node_bcast(struct shmcoll_node *n, void *buf, size_t count, shmcoll_dtype dt, int root)
{
	struct shmcoll_task t;

	shmcoll__bcast_init(n, &t, buf, count, dt, root);
	return shmcoll__task_run_likely(n, &t, bcast_inline);
}
