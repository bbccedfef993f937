/* allgather.c - every rank gets every rank's block, in rank order.
 *
 * Protocol, for each chunk of at most slot_half bytes of the block:
 *   1. Each rank copies its chunk into its staging half for this step, unless
 *      sendbuf is in its symmetric heap (then peers read it in place; that
 *      holds in place too, since nobody writes a rank's own block).
 *   2. Every rank publishes the step and waits for every peer's; the first
 *      chunk checks the peers' descriptors.
 *   3. Each rank copies every peer's chunk into that peer's block of recvbuf,
 *      and its own from sendbuf unless in place
 *      (sendbuf == recvbuf + rank * sendcount * elemsize).
 *   Halves are reused two steps later as in allreduce.c; a final step when
 *   anyone was read in place.
 *
 * Blocks of at most 1 KiB travel inline instead (engine.c, message ring):
 * every rank publishes its block in its message and copies the others'.
 *
 * Single-copy protocol (cma.c), for blocks from SHMCOLL_CMA_MIN bytes where
 * every rank can read its peers' memory: every rank publishes where its
 * block is (in place: inside recvbuf, which nobody else writes), reads every
 * peer's from the peer's memory, and waits at a second step until everyone
 * has read its own. */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Inline (blocks of at most SHMCOLL_INLINE_MAX bytes): every rank puts its
 * block in its message and copies every peer's message into its block, its
 * own from sendbuf unless in place. */
static int allgather_inline(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype,
                            const uint8_t *send, uint8_t *recv, size_t count, size_t bytes)
{
	struct shmcoll_desc *d;
	int rc;

	rc = shmcoll__begin_msg(c, fn, KIND_ALLGATHER, dtype, SHMCOLL_SUM, -1, count, &d);
	if (rc < 0)
		return rc;
	shmcoll__msg_publish(c, d, send, bytes);
	return shmcoll__msg_gather(c, fn, d, send, recv, bytes);
}

/* Single copy (cma.c): every rank publishes where its block is and reads
 * every peer's from its memory; a second step holds it until all have read
 * its own. */
static int allgather_cma(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                         const uint8_t *send, uint8_t *recv, size_t bytes)
{
	uint8_t *own = recv + (size_t)c->rank * bytes;
	int p, rc;

	shmcoll__call(c)->algo = ALGO_CMA;
	d->addr = (uint64_t)(uintptr_t)send;
	d->src_off = shmcoll__heap_off(c, send, bytes);
	rc = shmcoll__chunk_step(c, fn, d, 1, bytes);
	for (p = 1; !rc && p < c->size; p++) {
		int q = (c->rank + p) % c->size; /* not everyone at rank 0 first */

		rc = shmcoll__cma_fetch(c, fn, d, q, recv + (size_t)q * bytes, 0, bytes);
	}
	if (rc < 0)
		return rc;
	if (send != own)
		memcpy(own, send, bytes);
	return shmcoll__step(c, fn);
}

int shmcoll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                      shmcoll_comm *c)
{
	const char *fn = "shmcoll_allgather";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf, *own;
	struct shmcoll_desc *d;
	size_t bytes, total, es, cap, done, n;
	int p, rc;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, sendcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, total);
	own = recv ? recv + (size_t)c->rank * bytes : NULL;
	if (!rc)
		rc = shmcoll__check_overlap(c, fn, sendbuf, bytes, recvbuf, total, own);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !sendcount)
		return rc;
	if (c->hier)
		return shmcoll__hier_allgather(c, send, recv, sendcount, dtype);

	if (shmcoll__inline(c, ALGO_FLAT, bytes))
		return allgather_inline(c, fn, dtype, send, recv, sendcount, bytes);
	es = shmcoll_dtype_size(dtype);
	cap = shmcoll__chunk_elems(c, es, 1);
	rc = shmcoll__begin(c, fn, KIND_ALLGATHER, dtype, SHMCOLL_SUM, -1, sendcount, &d);
	if (rc < 0)
		return rc;
	if (shmcoll__cma_pick(c, KIND_ALLGATHER, bytes))
		return allgather_cma(c, fn, d, send, recv, bytes);
	d->src_off = shmcoll__heap_off(c, send, bytes);
	for (done = 0; done < sendcount; done += n) {
		uint32_t step = c->seq + 1;

		n = min_size(cap, sendcount - done);
		if (d->src_off == NO_OFF)
			memcpy(shmcoll__slot(c, c->rank, step), send + done * es, n * es);
		rc = shmcoll__chunk_step(c, fn, d, done == 0, bytes);
		if (rc < 0)
			return rc;
		for (p = 0; p < c->size; p++) {
			const uint8_t *src;

			if (p == c->rank)
				src = send == own ? NULL : send + done * es;
			else
				src = c->zc[p] ? c->zc[p] + done * es : shmcoll__slot(c, p, step);
			if (src)
				memcpy(recv + (size_t)p * bytes + done * es, src, n * es);
		}
	}
	return shmcoll__zc_release(c, fn, -1);
}
