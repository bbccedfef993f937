/* bcast.c - every rank gets the root's vector.
 *
 * Flat protocol, for each chunk of at most slot_half bytes:
 *   1. The root copies its chunk into its staging half for this step, unless
 *      buf is in its symmetric heap (then the others read it in place), and
 *      publishes the step without waiting for anyone.
 *   2. Every other rank publishes the step, waits for the root's (checking
 *      its call word on the first chunk) and copies the root's chunk.
 *   The root waits only before it rewrites a half (shmcoll__guard: every
 *   rank published the step before, i.e. read what it overwrites), so
 *   back-to-back broadcasts overlap by one call. When the root was read in
 *   place, a final step keeps it from returning while a rank still reads.
 *
 * Tree protocol (k-nomial from the root, tree.c), chunk i at step s + i:
 *   1. Flow control: before writing its half for step s + i, a rank waits
 *      until its children published s + i - 2 (they have read what it wrote
 *      there); for i < 2 that half may still hold what the call before this
 *      one wrote, read by anyone, and shmcoll__guard waits for that.
 *   2. The root copies chunk i into its half; any other rank waits for its
 *      parent's s + i (on the first chunk checking its call word), copies the
 *      parent's chunk into buf and, if it has children, into its own half.
 *   3. It publishes s + i.
 *   At the end each rank waits until its children published the last step,
 *   so nothing it wrote in this call is still to be read when it returns.
 *   Per chunk a rank waits on its parent and children only.
 *
 * Single-copy protocol (cma.c), from SHMCOLL_CMA_MIN bytes where every rank
 * can read its peers' memory: the root publishes the address of buf and
 * waits, one step later, for everyone; the others read buf from the root's
 * memory straight into theirs. */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* From this many ranks on the tree is the default (docs/BENCHMARKS.md). */
#define TREE_MIN_RANKS 16

static int bcast_flat(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, uint8_t *b,
                      size_t count, size_t es, int root)
{
	size_t cap = shmcoll__chunk_elems(c, es, 1), done, n;
	int rc, is_root = c->rank == root;

	if (is_root)
		d->src_off = shmcoll__heap_off(c, b, count * es);
	for (done = 0; done < count; done += n) {
		uint32_t step = c->seq + 1;

		n = min_size(cap, count - done);
		if (is_root && d->src_off == NO_OFF) {
			if ((rc = shmcoll__guard(c, fn)) < 0)
				return rc;
			memcpy(shmcoll__slot(c, c->rank, step), b + done * es, n * es);
		}
		rc =
		    shmcoll__step_from(c, fn, d, done == 0, count * es, is_root ? STEP_NONE : root);
		if (rc < 0)
			return rc;
		if (!is_root)
			memcpy(b + done * es,
			       c->zc[root] ? c->zc[root] + done * es : shmcoll__slot(c, root, step),
			       n * es);
	}
	/* Every rank knows whether the root was read in place: the root from
	 * its own descriptor, the others from its call word. */
	if (is_root ? d->src_off != NO_OFF : c->zc[root] != NULL)
		return shmcoll__step(c, fn);
	return 0;
}

/* Single copy (cma.c): the root publishes where buf is and waits, after
 * a second step, until everyone has read it; the others read it whole. */
static int bcast_cma(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, uint8_t *b,
                     size_t bytes, int root)
{
	int rc, is_root = c->rank == root;

	if (is_root) {
		d->addr = (uint64_t)(uintptr_t)b;
		d->src_off = shmcoll__heap_off(c, b, bytes);
	}
	rc = shmcoll__step_from(c, fn, d, 1, bytes, is_root ? STEP_NONE : root);
	if (!rc && !is_root)
		rc = shmcoll__cma_fetch(c, fn, d, root, b, 0, bytes);
	if (rc < 0)
		return rc;
	return shmcoll__step_from(c, fn, d, 0, 0, is_root ? STEP_ALL : STEP_NONE);
}

/* Flat with the payload inline: the root publishes its message and leaves;
 * the others publish the step and copy the root's message. */
static int bcast_inline(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, uint8_t *b,
                        size_t bytes, int root)
{
	const uint8_t *m;
	int rc;

	if (c->rank == root) {
		shmcoll__msg_publish(c, d, b, bytes);
		return 0;
	}
	shmcoll__msg_publish(c, d, NULL, 0);
	m = shmcoll__msg_wait(c, fn, d, root, &rc);
	if (!m)
		return rc;
	memcpy(b, m, bytes);
	shmcoll__msg_seen(c, d);
	return 0;
}

/* Waits until each of t's children has published want. */
static int wait_children(shmcoll_comm *c, const char *fn, const struct shmcoll_tree *t,
                         uint32_t want)
{
	int i, rc;

	for (i = 0; i < t->nchildren; i++) {
		rc = shmcoll__wait_rank(c, fn, t->children[i], want);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int bcast_tree(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, uint8_t *b,
                      size_t count, size_t es, int root)
{
	size_t cap = shmcoll__chunk_elems(c, es, 1), done, n;
	uint32_t first = c->seq + 1;
	struct shmcoll_tree t;
	int rc;

	shmcoll__tree(c, root, &t);
	for (done = 0; done < count; done += n) {
		uint32_t step = c->seq + 1;
		uint8_t *mine = shmcoll__slot(c, c->rank, step);

		n = min_size(cap, count - done);
		/* The first two halves may hold what the call before wrote, read by
		 * anyone: the guard. Later ones only this call's chunks, read by
		 * the children only. */
		if (step >= first + 2) {
			rc = wait_children(c, fn, &t, step - 2);
			c->clean = step - 2;
		} else {
			rc = shmcoll__guard(c, fn);
		}
		if (rc < 0)
			return rc;
		if (t.parent < 0) {
			memcpy(mine, b + done * es, n * es);
		} else {
			rc = shmcoll__wait_rank(c, fn, t.parent, step);
			if (!rc && step == first)
				rc = shmcoll__check_rank(c, fn, d, t.parent, 0);
			if (rc < 0)
				return rc;
			memcpy(b + done * es, shmcoll__slot(c, t.parent, step), n * es);
			if (t.nchildren)
				memcpy(mine, b + done * es, n * es);
		}
		shmcoll__publish_next(c, step == first ? d : NULL);
	}
	/* Children publish a step after reading it: once they published the
	 * last one, nothing this rank wrote in this call is still to be read.
	 * What it wrote at first - 1 (the call before) is known read only if
	 * the guard of a second chunk waited for it; else clean stays below. */
	rc = wait_children(c, fn, &t, c->seq);
	if (rc == 0 && c->seq != first)
		c->clean = c->seq;
	return rc;
}

int shmcoll_bcast(void *buf, size_t count, shmcoll_dtype dtype, int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_bcast";
	struct shmcoll_desc *d;
	size_t bytes;
	int rc, algo;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = shmcoll__check_root(c, fn, root);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "buf", buf, bytes);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->hier)
		return shmcoll__hier_bcast(c, buf, count, dtype, root);

	if (shmcoll__cma_pick(c, KIND_BCAST, bytes)) {
		rc = shmcoll__begin(c, fn, KIND_BCAST, dtype, SHMCOLL_SUM, root, count, &d);
		if (rc < 0)
			return rc;
		shmcoll__call(c)->algo = ALGO_CMA;
		return bcast_cma(c, fn, d, buf, bytes, root);
	}
	algo = c->algo[KIND_BCAST];
	if (algo == ALGO_AUTO)
		algo = c->size >= TREE_MIN_RANKS ? ALGO_TREE : ALGO_FLAT;
	if (algo == ALGO_CMA) /* forced, but some rank cannot read its peers */
		algo = ALGO_FLAT;
	if (shmcoll__inline(c, algo, bytes)) {
		rc = shmcoll__begin_msg(c, fn, KIND_BCAST, dtype, SHMCOLL_SUM, root, count, &d);
		return rc < 0 ? rc : bcast_inline(c, fn, d, buf, bytes, root);
	}
	rc = shmcoll__begin(c, fn, KIND_BCAST, dtype, SHMCOLL_SUM, root, count, &d);
	if (rc < 0)
		return rc;
	shmcoll__call(c)->algo = (uint8_t)algo;
	if (algo == ALGO_TREE)
		return bcast_tree(c, fn, d, buf, count, shmcoll_dtype_size(dtype), root);
	return bcast_flat(c, fn, d, buf, count, shmcoll_dtype_size(dtype), root);
}
