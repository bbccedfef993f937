/* reduce_scatter.c - rank r gets op over every rank's block r.
 *
 * Inline (a whole sendbuf of at most INLINE_MAX_BYTES): every rank publishes it in its
 * message and folds block r of every message, its own included (so recvbuf may be its own
 * block: in place needs no copy).
 *
 * Flat protocol, for each chunk of n elements of a block, n at most
 * slot_half / (size * elemsize):
 *   1. Each rank copies chunk k of every block q != r of sendbuf to position q of its staging
 *      half for this step, unless sendbuf is in its symmetric heap and not in place (then
 *      peers read its blocks in place). Its own block it reads straight from sendbuf -
 *      except in place, where it is staged too, since recvbuf (the same memory) receives the
 *      result.
 *   2. Every rank publishes the step and waits for every peer's; the first chunk checks the
 *      peers' descriptors.
 *   3. Rank r reduces position r (or block r in place) of every rank, in rank order, into its
 *      recvbuf. In place (recvbuf == sendbuf + r * recvcount * elemsize) the chunk was staged
 *      before recvbuf overwrites it.
 *   Halves are reused two steps later as in allreduce.c; a final step when anyone was read
 *   in place. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"

/* Inline only up to this total: every rank publishes its whole sendbuf and reads one block
 * of each peer's, and from 1 KiB on that measured slower than staging (docs/BENCHMARKS.md:
 * 0.21 against 0.17 us at 1 KiB, P=2). */
#define INLINE_MAX_BYTES 512

enum { AT_GUARD = 1, AT_PEER, AT_STEP, AT_END };

static SHMCOLL_HOT int reduce_scatter_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t mine = (size_t)n->rank * t->count * t->es;
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
	shmcoll__msg_publish(n, t, t->send, (size_t)n->size * t->count * t->es);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank) {
			m = shmcoll__msg_mine(n, t, (size_t)n->size * t->count * t->es);
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
	t->reduce(t->recv, n->st.srcs, n->size, t->count);
	return 0;
}

static int reduce_scatter_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, bytes = t->count * es, total = bytes * (size_t)n->size;
	size_t cap = shmcoll__chunk_elems(n, es, (size_t)n->size), mine = (size_t)n->rank * bytes;
	int p, rc, inplace = t->recv == t->send + mine;
	uint8_t *slot;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	if (!inplace)
		t->d->src_off = shmcoll__heap_off(n, t->send, total);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		slot = shmcoll__slot(n, n->rank, t->step);
		if (t->d->src_off == NO_OFF)
			for (p = 0; p < n->size; p++)
				if (p != n->rank || inplace)
					memcpy(slot + (size_t)p * t->len * es,
					       t->send + (size_t)p * bytes + t->off * es,
					       t->len * es);
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->off == 0, total);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		for (p = 0; p < n->size; p++)
			n->st.srcs[p] =
			    n->st.zc[p] ? n->st.zc[p] + mine + t->off * es
			    : p == n->rank && !inplace
			        ? t->send + mine + t->off * es
			        : shmcoll__slot(n, p, t->step) + (size_t)n->rank * t->len * es;
		t->reduce(t->recv + t->off * es, n->st.srcs, n->size, t->len);
	}
	if (!shmcoll__zc_any(n, -1))
		return 0;
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_END, rc);
}

void shmcoll__reduce_scatter_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                                  void *recv, size_t recvcount, shmcoll_dtype dt, shmcoll_op op)
{
	size_t total;

	if (!shmcoll__coll_begin(n, t, "shmcoll_reduce_scatter", KIND_REDUCE_SCATTER, dt, op, -1,
	                         send, recv, recvcount))
		return;
	total = recvcount * t->es * (size_t)n->size;
	t->reduce = shmcoll__reduce_lookup(dt, op);
	if (total <= INLINE_MAX_BYTES && shmcoll__algo_inline(n, ALGO_FLAT, total))
		t->advance = reduce_scatter_inline;
	else
		t->advance = reduce_scatter_flat;
}

int shmcoll__node_reduce_scatter(struct shmcoll_node *n, const void *send, void *recv,
                                 size_t recvcount, shmcoll_dtype dt, shmcoll_op op)
{
	struct shmcoll_task t;

	shmcoll__reduce_scatter_init(n, &t, send, recv, recvcount, dt, op);
	return shmcoll__task_run_likely(n, &t, reduce_scatter_inline);
}
