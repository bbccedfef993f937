/* barrier.c - no rank leaves before every rank has entered.
 *
 * Flat protocol: one inline step (engine.c, message ring). Each rank writes
 * its message - no data, just the call word - publishes the step, and waits
 * until every peer's message for it is there, i.e. every peer entered the
 * barrier; the call words are checked so a barrier matched with another
 * collective fails with -EPROTO. Spinning on the peers' message lines rather
 * than their seq lines leaves seq to its owner on the fast path, so its
 * publish does not wait for a line a peer is polling (measured 0.127 ->
 * 0.076 us at P=2, docs/BENCHMARKS.md).
 *
 * Tree protocol (k-nomial, root 0), two steps s and s + 1:
 *   1. Arrive: wait until each child has published s (its whole subtree has
 *      arrived) and check its call word, then publish s.
 *   2. Release: the root publishes s + 1 at once; every other rank waits for
 *      its parent's s + 1, then publishes s + 1 for its own children.
 *   A child's call word cannot change while its parent checks it: the child
 *   is waiting for the release. Nobody is released before the root heard
 *   from every subtree, so a mismatch anywhere stops everyone.
 *   No staging half is touched. Each rank polls at most its children and
 *   its parent instead of all P - 1 peers. */
#include <errno.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* From this many ranks on the tree is the default: below it the flat step's
 * single hop beats the tree's 2 * depth (docs/BENCHMARKS.md). */
#define TREE_MIN_RANKS 16

static int barrier_tree(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d)
{
	struct shmcoll_tree t;
	uint32_t arrive = c->seq + 1;
	int i, rc;

	shmcoll__tree(c, 0, &t);
	for (i = 0; i < t.nchildren; i++) {
		rc = shmcoll__wait_rank(c, fn, t.children[i], arrive);
		if (!rc)
			rc = shmcoll__check_rank(c, fn, d, t.children[i], 0);
		if (rc < 0)
			return rc;
	}
	shmcoll__publish_next(c, d);
	if (t.parent >= 0) {
		rc = shmcoll__wait_rank(c, fn, t.parent, arrive + 1);
		if (rc < 0)
			return rc;
	}
	shmcoll__publish_next(c, NULL);
	/* Our only shared write, the call word, was checked by the parent
	 * before it arrived, and every rank arrived: all readers are done. */
	c->clean = c->seq;
	return 0;
}

/* Flat: one inline step with no data. Each rank writes its message (the
 * call word) and publishes, then waits for every peer's message. */
static int barrier_inline(shmcoll_comm *c, const char *fn)
{
	struct shmcoll_desc *d;
	int p, rc;

	rc = shmcoll__begin_msg(c, fn, KIND_BARRIER, SHMCOLL_UINT8, SHMCOLL_SUM, -1, 0, &d);
	if (rc < 0)
		return rc;
	shmcoll__msg_publish(c, d, NULL, 0);
	for (p = 0; p < c->size; p++)
		if (p != c->rank && !shmcoll__msg_wait(c, fn, d, p, &rc))
			return rc;
	/* Every peer has begun this call: it has read all we wrote before. */
	c->clean = c->seq - 1;
	return 0;
}

int shmcoll_barrier(shmcoll_comm *c)
{
	const char *fn = "shmcoll_barrier";
	struct shmcoll_desc *d;
	int rc, algo;

	if (!c)
		return -EINVAL;
	rc = shmcoll__enter(c, fn);
	if (rc < 0)
		return rc;
	if (c->hier)
		return shmcoll__hier_barrier(c);
	algo = c->algo[KIND_BARRIER];
	if (algo == ALGO_AUTO)
		algo = c->size >= TREE_MIN_RANKS ? ALGO_TREE : ALGO_FLAT;
	if (shmcoll__inline(c, algo, 0))
		return barrier_inline(c, fn);
	rc = shmcoll__begin(c, fn, KIND_BARRIER, SHMCOLL_UINT8, SHMCOLL_SUM, -1, 0, &d);
	if (rc < 0)
		return rc;
	shmcoll__call(c)->algo = (uint8_t)algo;
	if (algo == ALGO_TREE)
		return barrier_tree(c, fn, d);
	return shmcoll__chunk_step(c, fn, d, 1, 0);
}
