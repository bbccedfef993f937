/* alltoall.c - rank r gets block r of every rank's sendbuf, in rank order.
 *
 * Inline (the blocks for the peers, at most the layout's msg_max bytes): every rank publishes
 * them in its message, in rank order without its own, then copies its block of every peer's
 * message into its block p; its own block stays (in place) or is copied. The message is
 * written before recvbuf, so in place works.
 *
 * Flat protocol, for each chunk of n elements of a block, n at most
 * slot_half / ((size - 1) * elemsize):
 *   1. Each rank copies chunk k of every peer's block q of sendbuf to position q (q - 1 past
 *      its own) of its staging half for this step, unless sendbuf is in its symmetric heap and
 *      not in place (then peers read its blocks in place).
 *   2. Every rank publishes the step and waits for every peer's; the first chunk checks the
 *      peers' descriptors.
 *   3. Rank r copies its position (or block r) of every peer p into block p of its recvbuf,
 *      and its own block from sendbuf. In place (sendbuf == recvbuf) works because the chunk
 *      of every block was staged in step 1 before step 3 overwrites it, and its own block is
 *      where it belongs.
 *   Halves are reused two steps later as in allreduce.c; a final step when anyone was read
 *   in place.
 *
 * Single-copy protocol (lib/core/cma.h), for blocks from the measured size on where every rank
 * can read its peers' memory: every rank publishes where sendbuf is (in place: a private copy
 * of it), reads its block of every peer's from the peer's memory, and waits at a second step
 * until all have read its. */
#include <errno.h>

#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_STEP, AT_READ, AT_END };

static SHMCOLL_HOT int alltoall_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es, mine = (size_t)n->rank * bytes;
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
	/* Every block but its own, in rank order: rank p finds its block at p, or p - 1 past
	 * this rank. */
	shmcoll__msg_publish2(n, t, t->send, mine, t->send + mine + bytes,
	                      (size_t)(n->size - 1 - n->rank) * bytes);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank) {
			if (t->send != t->recv)
				shmcoll__copy_out(t->recv + mine, t->send + mine, bytes);
			continue;
		}
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
		shmcoll__copy_out(t->recv + (size_t)t->p * bytes,
		                  m + shmcoll__pos_without(n->rank, t->p) * bytes, bytes);
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	return 0;
}

/* In place, a rank would overwrite blocks its peers have still to read: it publishes a
 * private copy instead (kept in t->send). */
static int alltoall_cma(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es, mine = (size_t)n->rank * bytes;
	size_t total = bytes * (size_t)n->size;
	uint8_t *copy;
	int q, rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_READ:
		goto read;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	if (t->send == t->recv) {
		copy = shmcoll__node_work(n, total);
		if (!copy) {
			shmcoll__node_break(n, ENOMEM);
			return shmcoll__node_fail(
			    n, -ENOMEM,
			    "%s: no memory for a %zu-byte copy of the in-place "
			    "buffer",
			    t->fn, total);
		}
		memcpy(copy, t->send, total);
		t->send = copy;
	} else {
		t->d->src_off = shmcoll__heap_off(n, t->send, total);
	}
	t->d->addr = (uint64_t)(uintptr_t)t->send;
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__publish_next(n, t->d);
read:
	rc = shmcoll__await_from(n, t, STEP_ALL, 1, total);
	if (rc)
		return shmcoll__suspend(t, AT_READ, rc);
	for (t->p = 0; t->p < n->size; t->p++) {
		q = (n->rank + t->p) % n->size; /* not everyone at rank 0 first */
		if (q == n->rank) {
			shmcoll__copy_out(t->recv + mine, t->send + mine, bytes);
			continue;
		}
		rc = shmcoll__cma_fetch(n, t, q, t->recv + (size_t)q * bytes, mine, bytes);
		if (rc < 0)
			return rc;
	}
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_END, rc);
}

static int alltoall_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, bytes = t->count * es, total = bytes * (size_t)n->size;
	size_t cap = shmcoll__chunk_elems(n, es, shmcoll__peer_parts(n));
	size_t mine = (size_t)n->rank * bytes;
	int p, rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	case AT_END:
		goto end;
	}
	shmcoll__describe(n, t);
	if (t->send != t->recv)
		t->d->src_off = shmcoll__heap_off(n, t->send, total);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	for (t->off = 0; t->off < t->count; t->off += t->len) {
		t->step = n->st.seq + 1;
		t->len = min_size(cap, t->count - t->off);
		if (t->d->src_off == NO_OFF)
			shmcoll__stage_others(shmcoll__slot(n, n->rank, t->step), t->send,
			                      (size_t)n->size, (size_t)n->rank, bytes, t->off * es,
			                      t->len * es);
		shmcoll__publish_next(n, t->off == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->off == 0, total);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		for (p = 0; p < n->size; p++) {
			if (p == n->rank) { /* in place it is there already */
				if (t->send != t->recv)
					shmcoll__copy_out(t->recv + mine + t->off * es,
					                  t->send + mine + t->off * es,
					                  t->len * es);
				continue;
			}
			shmcoll__copy_out(t->recv + (size_t)p * bytes + t->off * es,
			                  n->st.zc[p]
			                      ? n->st.zc[p] + mine + t->off * es
			                      : shmcoll__slot(n, p, t->step) +
			                            shmcoll__pos_without(n->rank, p) * t->len * es,
			                  t->len * es);
		}
	}
	if (!shmcoll__zc_any(n, -1))
		return 0;
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_END, rc);
}

void shmcoll__alltoall_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                            void *recv, size_t count, shmcoll_dtype dt)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_alltoall", KIND_ALLTOALL, dt, SHMCOLL_SUM, -1, send,
	                         recv, count))
		return;
	bytes = count * t->es;
	/* Single copies first, where chosen: with 32 KiB blocks an inline call (at P=2) tied with
	 * them when buffers were rewritten between calls, and was 0.69x with unchanged ones. */
	if (shmcoll__cma_pick(n, KIND_ALLTOALL, bytes)) {
		t->algo = ALGO_CMA;
		t->advance = alltoall_cma;
	} else if (shmcoll__algo_inline(n, ALGO_FLAT, bytes * (size_t)(n->size - 1))) {
		t->advance = alltoall_inline;
	} else {
		t->advance = alltoall_flat;
	}
}

int shmcoll__node_alltoall(struct shmcoll_node *n, const void *send, void *recv, size_t count,
                           shmcoll_dtype dt)
{
	struct shmcoll_task t;

	shmcoll__alltoall_init(n, &t, send, recv, count, dt);
	return shmcoll__task_run_likely(n, &t, alltoall_inline);
}
