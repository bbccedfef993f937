/* allgatherv.c - every rank gets every rank's block, of recvcounts[p] elements, at
 * displs[p] of its recvbuf. Every rank knows every block's size (recvcounts is the same on
 * all), so every rank chooses the same protocol and the same number of steps; the call word
 * carries a hash of recvcounts, so ranks that pass different ones fail with -EPROTO.
 *
 * Inline (every block at most SHMCOLL_INLINE_MAX bytes): every rank publishes its block in
 * its message and copies every peer's into place; its own from sendbuf unless in place.
 *
 * Flat protocol, for chunk k (at most slot_half bytes) of every block, as many steps as the
 * longest block has chunks:
 *   1. Each rank whose block has a chunk k copies it into its staging half for this step.
 *   2. Every rank publishes the step and waits for every peer's; the first step checks the
 *      peers' call words.
 *   3. Each rank copies chunk k of every peer's block that has one into that block of
 *      recvbuf, and its own from sendbuf unless in place.
 *   Halves are reused two steps later as in allreduce.c. */
#include "lib/coll/coll.h"
#include "lib/coll/proto.h"
#include "lib/kernels/copy.h"

enum { AT_GUARD = 1, AT_PEER, AT_STEP };

static int allgatherv_inline(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es;
	uint8_t *own = t->recv + t->rdispls[n->rank] * es;
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
	shmcoll__msg_publish(n, t, t->send, t->scount * es);
	if (t->send != own && t->scount)
		memcpy(own, t->send, t->scount * es);
	for (t->p = 0; t->p < n->size; t->p++) {
		if (t->p == n->rank)
			continue;
	peer:
		rc = shmcoll__await_msg(n, t, t->p, &m);
		if (rc)
			return shmcoll__suspend(t, AT_PEER, rc);
		if (t->rcounts[t->p])
			shmcoll__copy_out(t->recv + t->rdispls[t->p] * es, m,
			                  t->rcounts[t->p] * es);
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	n->st.clean = n->st.seq - 1;
	return 0;
}

/* Bytes of chunk k (of chunk bytes) of a block of bytes. */
static size_t piece(size_t bytes, size_t k, size_t chunk)
{
	return bytes > k * chunk ? min_size(chunk, bytes - k * chunk) : 0;
}

static int allgatherv_flat(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t es = t->es, chunk = n->arena.lay.slot_half / es * es, mine = t->scount * es, len;
	uint8_t *own = t->recv + t->rdispls[n->rank] * es;
	int p, rc;

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
		len = piece(mine, t->i, chunk);
		if (len)
			shmcoll__copy_in(shmcoll__slot(n, n->rank, t->step), t->send + t->i * chunk,
			                 len);
		shmcoll__publish_next(n, t->i == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->i == 0, 0);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
		for (p = 0; p < n->size; p++) {
			len = piece(t->rcounts[p] * es, t->i, chunk);
			if (!len || (p == n->rank && t->send == own))
				continue;
			shmcoll__copy_out(t->recv + t->rdispls[p] * es + t->i * chunk,
			                  p == n->rank ? t->send + t->i * chunk
			                               : shmcoll__slot(n, p, t->step),
			                  len);
		}
	}
	return 0;
}

void shmcoll__allgatherv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                              size_t sendcount, void *recv, const size_t *recvcounts,
                              const size_t *displs, shmcoll_dtype dt)
{
	size_t longest = 0, chunk;
	int p;

	shmcoll__coll_task(t, "shmcoll_allgatherv", shmcoll__nothing, KIND_ALLGATHERV, dt,
	                   SHMCOLL_SUM, -1, send, recv, shmcoll__counts_word(recvcounts, n->size));
	shmcoll__vtask(t, NULL, NULL, recvcounts, displs, sendcount);
	if (shmcoll__alone(n, t))
		return;
	for (p = 0; p < n->size; p++)
		if (recvcounts[p] > longest)
			longest = recvcounts[p];
	if (!longest)
		return;
	longest *= t->es;
	if (shmcoll__algo_inline_all(n, ALGO_FLAT, longest)) {
		t->advance = allgatherv_inline;
		return;
	}
	chunk = n->arena.lay.slot_half / t->es * t->es;
	t->nchunks = (longest + chunk - 1) / chunk;
	t->advance = allgatherv_flat;
}
