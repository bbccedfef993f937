/* allgather.c - every rank gets every rank's block, in rank order.
 *
 * Inline (blocks of at most SHMCOLL_INLINE_MAX bytes, lib/core/engine.h's message ring):
 * every rank publishes its block in its message and copies the others'.
 *
 * Flat protocol, for each chunk of at most slot_half bytes of the block:
 *   1. Each rank copies its chunk into its staging half for this step, unless sendbuf is in
 *      its symmetric heap (then peers read it in place; that holds in place too, since
 *      nobody writes a rank's own block).
 *   2. Every rank publishes the step and waits for every peer's; the first chunk checks the
 *      peers' descriptors.
 *   3. Each rank copies every peer's chunk into that peer's block of recvbuf, and its own
 *      from sendbuf unless in place (sendbuf == recvbuf + rank * sendcount * elemsize).
 *   Halves are reused two steps later as in allreduce.c; a final step when anyone was read
 *   in place.
 *
 * Single-copy protocol (lib/core/cma.h), for blocks from the measured size on where every
 * rank can read its peers' memory: every rank publishes where its block is (in place: inside
 * recvbuf, which nobody else writes), reads every peer's from the peer's memory, and waits
 * at a second step until everyone has read its own. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_GATHER, AT_STEP, AT_READ, AT_END };

static SHMCOLL_HOT int allgather_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
	int rc;

	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_GATHER:
		goto gather;
	}
	shmcoll__describe_inline(n, t);
guard:
	rc = shmcoll__await_msg_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__msg_publish(n, t, t->send, bytes);
gather:
	rc = shmcoll__await_msg_gather(n, t, t->send, t->recv, bytes);
	return shmcoll__suspend(t, AT_GATHER, rc);
}

static int allgather_cma(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t bytes = t->count * t->es;
	uint8_t *own = t->recv + (size_t)n->rank * bytes;
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
	t->d->addr = (uint64_t)(uintptr_t)t->send;
	t->d->src_off = shmcoll__heap_off(n, t->send, bytes);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	shmcoll__publish_next(n, t->d);
read:
	rc = shmcoll__await_from(n, t, STEP_ALL, 1, bytes);
	if (rc)
		return shmcoll__suspend(t, AT_READ, rc);
	for (t->p = 1; t->p < n->size; t->p++) {
		q = (n->rank + t->p) % n->size; /* not everyone at rank 0 first */
		rc = shmcoll__cma_fetch(n, t, q, t->recv + (size_t)q * bytes, 0, bytes);
		if (rc < 0)
			return rc;
	}
	if (t->send != own)
		memcpy(own, t->send, bytes);
	shmcoll__publish_next(n, NULL);
end:
	rc = shmcoll__await_all(n, t);
	return shmcoll__suspend(t, AT_END, rc);
}

static int allgather_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, cap = shmcoll__chunk_elems(n, es, 1), bytes = t->count * es;
	const uint8_t *own = t->recv + (size_t)n->rank * bytes, *src;
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
	t->d->src_off = shmcoll__heap_off(n, t->send, bytes);
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
		rc = shmcoll__await_from(n, t, STEP_ALL, t->off == 0, bytes);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		for (p = 0; p < n->size; p++) {
			if (p == n->rank)
				src = t->send == own ? NULL : t->send + t->off * es;
			else
				src = n->st.zc[p] ? n->st.zc[p] + t->off * es
				                  : shmcoll__slot(n, p, t->step);
			if (src)
				shmcoll__copy_out(t->recv + (size_t)p * bytes + t->off * es, src,
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

void shmcoll__allgather_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             void *recv, size_t sendcount, shmcoll_dtype dt)
{
	size_t bytes;

	if (!shmcoll__coll_begin(n, t, "shmcoll_allgather", KIND_ALLGATHER, dt, SHMCOLL_SUM, -1,
	                         send, recv, sendcount))
		return;
	bytes = sendcount * t->es;
	if (shmcoll__algo_inline_all(n, ALGO_FLAT, bytes)) {
		t->advance = allgather_inline;
	} else if (shmcoll__cma_pick(n, KIND_ALLGATHER, bytes)) {
		t->algo = ALGO_CMA;
		t->advance = allgather_cma;
	} else {
		t->advance = allgather_flat;
	}
}

int shmcoll__node_allgather(struct shmcoll_node *n, const void *send, void *recv, size_t sendcount,
                            shmcoll_dtype dt)
{
	struct shmcoll_task t;

	shmcoll__allgather_init(n, &t, send, recv, sendcount, dt);
	return shmcoll__task_run_likely(n, &t, allgather_inline);
}
