/* alltoallv.c - rank r sends sendcounts[q] elements from sdispls[q] of its sendbuf to rank
 * q, which receives them at rdispls[r] of its recvbuf. A rank knows only its own counts, so
 * the number of steps is agreed at the first one, where every rank waits for every peer
 * anyway: each publishes how many chunks its longest block needs (its descriptor's aux),
 * and all take the largest.
 *
 * Flat protocol, for chunk k of every block, a chunk of at most w elements, w =
 * slot_half / (size * elemsize):
 *   1. Each rank copies chunk k of every block q != r that has one to position q of its
 *      staging half for this step.
 *   2. Every rank publishes the step and waits for every peer's; the first step checks the
 *      peers' call words and learns the number of steps.
 *   3. Rank r copies position r of every peer p whose block to r (recvcounts[p]) has a
 *      chunk k into recvbuf at rdispls[p]. Its own block it copies once, from sendbuf.
 *   Halves are reused two steps later as in allreduce.c.
 *
 * With SHMCOLL_CHECK=1 a first step shows every rank's sendcounts (in its staging half),
 * and each rank compares what its peers send it with its recvcounts: -EPROTO on a
 * difference. Without it a mismatch is not detected (the receiver reads as much as its own
 * counts say, never outside the staging halves). */
#include <errno.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

enum { AT_CGUARD = 1, AT_CSTEP, AT_GUARD, AT_STEP };

/* Chunks of w elements this rank's longest block to a peer needs. */
static size_t send_chunks(const struct shmcoll_node *n, const struct shmcoll_task *t, size_t w)
{
	size_t longest = 0;
	int q;

	for (q = 0; q < n->size; q++)
		if (q != n->rank && t->scounts[q] > longest)
			longest = t->scounts[q];
	return (longest + w - 1) / w;
}

/* SHMCOLL_CHECK: the counts every peer sends this rank against recvcounts. */
static int check_counts(struct shmcoll_node *n, struct shmcoll_task *t)
{
	const size_t *theirs;
	int p;

	for (p = 0; p < n->size; p++) {
		if (p == n->rank)
			continue;
		theirs = (const size_t *)shmcoll__slot(n, p, t->step);
		if (theirs[n->rank] != t->rcounts[p]) {
			shmcoll__node_break(n, EPROTO);
			return shmcoll__node_fail(
			    n, -EPROTO,
			    "%s: mismatched counts: rank %d sends %zu elements to rank %d, which "
			    "expects %zu (recvcounts[%d])",
			    t->fn, p, theirs[n->rank], n->rank, t->rcounts[p], p);
		}
	}
	return 0;
}

/* After the call's first step (every peer waited for): the number of steps, the largest
 * need any rank published with it. Read before this rank publishes another step, so no peer
 * can have begun a call that rewrites those descriptors. */
static void learn_steps(struct shmcoll_node *n, struct shmcoll_task *t)
{
	uint64_t need;
	int p;

	for (p = 0; p < n->size; p++) {
		need = shmcoll__ctrl(&n->arena, (uint32_t)p)->desc[t->d->step & 1].aux;
		if (need > t->nchunks)
			t->nchunks = (size_t)need;
	}
}

static int alltoallv_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, w = shmcoll__chunk_elems(n, es, (size_t)n->size), len;
	uint8_t *slot;
	int p, rc;

	switch (t->at) {
	case AT_CGUARD:
		goto cguard;
	case AT_CSTEP:
		goto cstep;
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
	t->d->aux = send_chunks(n, t, w);
	t->nchunks = 1;
	if (n->tune.check) {
	cguard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_CGUARD, rc);
		t->step = n->st.seq + 1;
		memcpy(shmcoll__slot(n, n->rank, t->step), t->scounts,
		       (size_t)n->size * sizeof(size_t));
		shmcoll__publish_next(n, t->d);
	cstep:
		rc = shmcoll__await_from(n, t, STEP_ALL, 1, 0);
		if (rc)
			return shmcoll__suspend(t, AT_CSTEP, rc);
		rc = check_counts(n, t);
		if (rc)
			return rc;
		learn_steps(n, t);
	}
	if (t->scounts[n->rank])
		memcpy(t->recv + t->rdispls[n->rank] * es, t->send + t->sdispls[n->rank] * es,
		       t->scounts[n->rank] * es);
	for (t->i = 0; t->i < t->nchunks; t->i++) {
	guard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_GUARD, rc);
		t->step = n->st.seq + 1;
		slot = shmcoll__slot(n, n->rank, t->step);
		for (p = 0; p < n->size; p++) {
			if (p == n->rank || t->scounts[p] <= t->i * w)
				continue;
			len = min_size(w, t->scounts[p] - t->i * w);
			memcpy(slot + (size_t)p * w * es, t->send + (t->sdispls[p] + t->i * w) * es,
			       len * es);
		}
		shmcoll__publish_next(n, t->i == 0 && !n->tune.check ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->i == 0 && !n->tune.check, 0);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (t->i == 0 && !n->tune.check)
			learn_steps(n, t);
		for (p = 0; p < n->size; p++) {
			if (p == n->rank || t->rcounts[p] <= t->i * w)
				continue;
			len = min_size(w, t->rcounts[p] - t->i * w);
			memcpy(t->recv + (t->rdispls[p] + t->i * w) * es,
			       shmcoll__slot(n, p, t->step) + (size_t)n->rank * w * es, len * es);
		}
	}
	return 0;
}

void shmcoll__alltoallv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             const size_t *sendcounts, const size_t *sdispls, void *recv,
                             const size_t *recvcounts, const size_t *rdispls, shmcoll_dtype dt)
{
	shmcoll__coll_task(t, "shmcoll_alltoallv", alltoallv_flat, KIND_ALLTOALLV, dt, SHMCOLL_SUM,
	                   -1, send, recv, 0);
	shmcoll__vtask(t, sendcounts, sdispls, recvcounts, rdispls, 0);
}
