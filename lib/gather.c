/* gather.c - the root gets every rank's block, in rank order.
 *
 * Protocol, for each chunk of at most slot_half bytes of the block:
 *   1. Each rank other than the root copies its chunk into its staging half
 *      for this step, unless sendbuf is in its symmetric heap (then the root
 *      reads it in place).
 *   2. Every rank publishes the step and waits for every peer's; the first
 *      chunk checks the peers' descriptors.
 *   3. The root copies every peer's chunk into that peer's block of recvbuf,
 *      and its own from sendbuf unless in place (an addition to the contract,
 *      as for allgather: sendbuf == recvbuf + root * sendcount * elemsize).
 *   Halves are reused two steps later as in allreduce.c; a final step when
 *   the root read a peer in place.
 *
 * Blocks of at most 1 KiB travel inline instead (engine.c, message ring):
 * non-roots publish their block in their message and leave, the root copies
 * every message into place.
 *
 * Single-copy protocol (cma.c), for blocks from SHMCOLL_CMA_MIN bytes where
 * every rank can read its peers' memory: the others publish where sendbuf
 * is; the root reads every block from their memory into recvbuf, then
 * publishes a second step they wait for before returning. The root reads
 * rather than the others writing into it: no rank ever writes another's
 * memory. */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Below this total the non-roots do not wait for the root (docs/BENCHMARKS.md:
 * back-to-back gathers then overlap by one call). */
#define GATHER_LAGGED_MAX (64u * 1024)

/* Inline (blocks of at most SHMCOLL_INLINE_MAX bytes): every non-root puts
 * its block in its message and leaves; the root copies each peer's message
 * into its block, and its own from sendbuf unless in place. */
static int gather_inline(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, const uint8_t *send,
                         uint8_t *recv, size_t count, size_t bytes, int root)
{
	struct shmcoll_desc *d;
	int rc;

	rc = shmcoll__begin_msg(c, fn, KIND_GATHER, dtype, SHMCOLL_SUM, root, count, &d);
	if (rc < 0)
		return rc;
	if (c->rank != root) {
		shmcoll__msg_publish(c, d, send, bytes);
		return 0;
	}
	shmcoll__msg_publish(c, d, NULL, 0);
	return shmcoll__msg_gather(c, fn, d, send, recv, bytes);
}

/* Single copy (cma.c): every other rank publishes where sendbuf is; the
 * root reads each into its block of recvbuf, then a second step releases
 * them. */
static int gather_cma(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, const uint8_t *send,
                      uint8_t *recv, size_t bytes, int root)
{
	int p, rc, is_root = c->rank == root;

	shmcoll__call(c)->algo = ALGO_CMA;
	if (!is_root) {
		d->addr = (uint64_t)(uintptr_t)send;
		d->src_off = shmcoll__heap_off(c, send, bytes);
	}
	rc = shmcoll__step_from(c, fn, d, 1, bytes, is_root ? STEP_ALL : STEP_NONE);
	for (p = 0; !rc && is_root && p < c->size; p++) {
		uint8_t *to = recv + (size_t)p * bytes;

		if (p != root)
			rc = shmcoll__cma_fetch(c, fn, d, p, to, 0, bytes);
		else if (send != to)
			memcpy(to, send, bytes);
	}
	if (rc < 0)
		return rc;
	return shmcoll__step_from(c, fn, d, 0, 0, is_root ? STEP_NONE : root);
}

int shmcoll_gather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                   int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_gather";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf, *own = NULL;
	struct shmcoll_desc *d;
	size_t bytes, total, es, cap, done, n;
	int p, rc, is_root, lagged;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, sendcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = shmcoll__check_root(c, fn, root);
	is_root = c->rank == root;
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc && is_root) {
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, total);
		own = recv + (size_t)root * bytes;
		if (!rc)
			rc = shmcoll__check_overlap(c, fn, sendbuf, bytes, recvbuf, total, own);
	}
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !sendcount)
		return rc;
	if (c->hier)
		return shmcoll__hier_gather(c, send, recv, sendcount, dtype, root);

	if (shmcoll__inline(c, ALGO_FLAT, bytes))
		return gather_inline(c, fn, dtype, send, recv, sendcount, bytes, root);
	es = shmcoll_dtype_size(dtype);
	cap = shmcoll__chunk_elems(c, es, 1);
	rc = shmcoll__begin(c, fn, KIND_GATHER, dtype, SHMCOLL_SUM, root, sendcount, &d);
	if (rc < 0)
		return rc;
	if (shmcoll__cma_pick(c, KIND_GATHER, bytes))
		return gather_cma(c, fn, d, send, recv, bytes, root);
	/* Large gathers read symmetric sources in place, with every rank
	 * waiting for every peer; small ones are lagged (see above). */
	lagged = total < GATHER_LAGGED_MAX;
	if (!is_root && !lagged)
		d->src_off = shmcoll__heap_off(c, send, bytes);
	for (done = 0; done < sendcount; done += n) {
		uint32_t step = c->seq + 1;

		n = min_size(cap, sendcount - done);
		if (!is_root && d->src_off == NO_OFF) {
			if ((rc = shmcoll__guard(c, fn)) < 0)
				return rc;
			memcpy(shmcoll__slot(c, c->rank, step), send + done * es, n * es);
		}
		rc = shmcoll__step_from(c, fn, d, done == 0, bytes,
		                        is_root || !lagged ? STEP_ALL : STEP_NONE);
		if (rc < 0)
			return rc;
		if (!is_root)
			continue;
		for (p = 0; p < c->size; p++) {
			const uint8_t *src;

			if (p == root)
				src = send == own ? NULL : send + done * es;
			else
				src = c->zc[p] ? c->zc[p] + done * es : shmcoll__slot(c, p, step);
			if (src)
				memcpy(recv + (size_t)p * bytes + done * es, src, n * es);
		}
	}
	return shmcoll__zc_release(c, fn, root);
}
