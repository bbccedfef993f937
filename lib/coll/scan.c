/* scan.c - prefix reductions: rank r gets op over the sendbufs of ranks 0 .. r (scan) or
 * 0 .. r-1 (exscan, where rank 0's recvbuf is left alone), folded in rank order, so every
 * rank's result has the bits a reduction of those ranks in that order has.
 *
 * Inline (a vector of at most SHMCOLL_INLINE_MAX bytes): every rank publishes its vector in
 * its message, waits for the messages of the ranks below it and folds them, its own last
 * (scan), from its own message (so sendbuf may be recvbuf).
 *
 * Flat protocol, for each chunk of at most slot_half bytes:
 *   1. Each rank copies its chunk into its staging half for this step.
 *   2. It publishes the step and waits for the ranks below it (rank 0 for nobody); the first
 *      chunk checks their call words.
 *   3. It folds chunk k of those ranks' halves, and for scan its own (staged, so in place
 *      works), into recvbuf.
 *   Only higher ranks read a rank's half; the guard keeps the reuse rule of allreduce.c. A
 *   rank runs ahead of the ranks above it by one step at most (inline: by the message
 *   ring). */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_STEP };

/* Ranks folded into rank r's result: r + 1 for scan, r for exscan. */
static int folded(const struct shmcoll_node *n, const struct shmcoll_task *t)
{
	return n->rank + (t->kind == KIND_SCAN);
}

static int scan_inline(struct shmcoll_node *n, struct shmcoll_task *t)
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
	for (t->p = 0; t->p < folded(n, t); t->p++) {
		if (t->p == n->rank) {
			m = shmcoll__msg_mine(n, t, t->count * t->es);
		} else {
		peer:
			rc = shmcoll__await_msg(n, t, t->p, &m);
			if (rc)
				return shmcoll__suspend(t, AT_PEER, rc);
		}
		n->st.srcs[t->p] = m;
	}
	if (n->rank == n->size - 1) /* it read every peer: all began this call */
		n->st.clean = n->st.seq - 1;
	if (folded(n, t))
		t->reduce(t->recv, n->st.srcs, folded(n, t), t->count);
	return 0;
}

static int scan_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, cap = shmcoll__chunk_elems(n, es, 1);
	int p, rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
	guard:
		rc = shmcoll__await_guard(n, t);
		if (rc)
			return shmcoll__suspend(t, AT_GUARD, rc);
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), t->send + t->off * es,
		                 t->len * es);
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
		for (t->p = 0; t->p < n->rank; t->p++) {
		step:
			rc = shmcoll__await_rank(n, t, t->p, t->step);
			if (rc == 0 && t->off == 0)
				rc = shmcoll__check_rank(n, t, t->p, 0);
			if (rc)
				return shmcoll__suspend(t, AT_STEP, rc);
		}
		if (!folded(n, t))
			continue;
		for (p = 0; p < folded(n, t); p++)
			n->st.srcs[p] = p == n->rank && t->send != t->recv
			                    ? t->send + t->off * es
			                    : shmcoll__slot(n, p, t->step);
		t->reduce(t->recv + t->off * es, n->st.srcs, folded(n, t), t->len);
	}
	return 0;
}

void shmcoll__scan_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                        void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op, int exclusive)
{
	shmcoll__coll_task(t, exclusive ? "shmcoll_exscan" : "shmcoll_scan", shmcoll__nothing,
	                   exclusive ? KIND_EXSCAN : KIND_SCAN, dt, op, -1, send, recv, count);
	shmcoll__vtask(t, NULL, NULL, NULL, NULL, 0);
	if (shmcoll__alone(n, t))
		return;
	if (!count)
		return;
	t->reduce = shmcoll__reduce_lookup(dt, op);
	if (shmcoll__algo_inline_all(n, ALGO_FLAT, count * t->es))
		t->advance = scan_inline;
	else
		t->advance = scan_flat;
}
