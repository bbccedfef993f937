/* reduce_scatterv.c - rank r gets op over every rank's block r, where block q of a sendbuf
 * is recvcounts[q] elements and the blocks follow each other in rank order. recvcounts is
 * the same on every rank, so every rank chooses the same protocol and steps; the call word
 * carries a hash of it (-EPROTO when ranks pass different ones).
 *
 * Inline (a whole sendbuf of at most INLINE_MAX_BYTES): every rank publishes it in its
 * message and folds block r of every message, its own included (so in place needs no copy).
 *
 * Flat protocol, for chunk k of every block, a chunk of at most w elements, w =
 * slot_half / (size * elemsize), as many steps as the longest block has chunks:
 *   1. Each rank copies chunk k of every block q != r that has one to position q of its
 *      staging half for this step (in place, its own block r too: recvbuf, the same memory,
 *      receives the result).
 *   2. Every rank publishes the step and waits for every peer's; the first step checks the
 *      peers' call words.
 *   3. If block r has a chunk k, rank r folds position r of every rank (its own from
 *      sendbuf, or staged in place), in rank order, into its recvbuf.
 *   Halves are reused two steps later as in allreduce.c. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

/* As reduce_scatter.c's: inline only up to this total. */
#define INLINE_MAX_BYTES 512

enum { AT_GUARD = 1, AT_PEER, AT_STEP };

/* Elements before block q. */
static size_t block_off(const size_t *counts, int q)
{
	size_t off = 0;
	int j;

	for (j = 0; j < q; j++)
		off += counts[j];
	return off;
}

static int reduce_scatterv_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t mine = block_off(t->rcounts, n->rank) * t->es, total = t->off * t->es;
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
	shmcoll__msg_publish(n, t, t->send, total);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank) {
			m = shmcoll__msg_mine(n, t, total);
		} else {
		peer:
			rc = shmcoll__await_msg(n, t, t->p, &m);
			if (rc)
				return shmcoll__suspend(t, AT_PEER, rc);
		}
		n->st.srcs[t->p] = m + mine;
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	if (t->rcounts[n->rank])
		t->reduce(t->recv, n->st.srcs, n->size, t->rcounts[n->rank]);
	return 0;
}

static int reduce_scatterv_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, w = shmcoll__chunk_elems(n, es, (size_t)n->size), mine, base, len;
	const uint8_t *own;
	uint8_t *slot;
	int p, rc, inplace;

	mine = block_off(t->rcounts, n->rank);
	own = t->send + mine * es;
	inplace = t->recv == own;
	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
	for (t->i = 0; t->i < t->nchunks; t->i++) {
	guard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_GUARD, rc);
		t->step = n->st.seq + 1;
		slot = shmcoll__slot(n, n->rank, t->step);
		for (p = 0, base = 0; p < n->size; base += t->rcounts[p], p++) {
			if (t->rcounts[p] <= t->i * w || (p == n->rank && !inplace))
				continue;
			len = min_size(w, t->rcounts[p] - t->i * w);
			memcpy(slot + (size_t)p * w * es, t->send + (base + t->i * w) * es,
			       len * es);
		}
		shmcoll__publish_next(n, t->i == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->i == 0, 0);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		if (t->rcounts[n->rank] <= t->i * w)
			continue;
		len = min_size(w, t->rcounts[n->rank] - t->i * w);
		for (p = 0; p < n->size; p++)
			n->st.srcs[p] = p == n->rank && !inplace ? own + t->i * w * es
			                                         : shmcoll__slot(n, p, t->step) +
			                                               (size_t)n->rank * w * es;
		t->reduce(t->recv + t->i * w * es, n->st.srcs, n->size, len);
	}
	return 0;
}

void shmcoll__reduce_scatterv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                                   void *recv, const size_t *recvcounts, shmcoll_dtype dt,
                                   shmcoll_op op)
{
	size_t longest = 0, total = 0, w;
	int p;

	shmcoll__coll_task(t, "shmcoll_reduce_scatterv", shmcoll__nothing, KIND_REDUCE_SCATTERV, dt,
	                   op, -1, send, recv, shmcoll__counts_word(recvcounts, n->size));
	shmcoll__vtask(t, NULL, NULL, recvcounts, NULL, 0);
	if (shmcoll__alone(n, t))
		return;
	for (p = 0; p < n->size; p++) {
		total += recvcounts[p];
		if (recvcounts[p] > longest)
			longest = recvcounts[p];
	}
	if (!longest)
		return;
	t->reduce = shmcoll__reduce_lookup(dt, op);
	t->off = total; /* the inline protocol publishes the whole sendbuf */
	if (total * t->es <= INLINE_MAX_BYTES &&
	    shmcoll__algo_inline(n, ALGO_FLAT, total * t->es)) {
		t->advance = reduce_scatterv_inline;
		return;
	}
	w = shmcoll__chunk_elems(n, t->es, (size_t)n->size);
	t->nchunks = (longest + w - 1) / w;
	t->advance = reduce_scatterv_flat;
}
