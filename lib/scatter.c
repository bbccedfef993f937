/* scatter.c - rank r gets block r of the root's sendbuf.
 *
 * Protocol, for each chunk of n elements of a block, n at most
 * slot_half / (size * elemsize):
 *   1. The root copies chunk k of every block q to position q of its staging
 *      half for this step, unless sendbuf is in its symmetric heap (then the
 *      others read it in place).
 *   2. Every rank publishes the step and waits for every peer's; the first
 *      chunk checks the peers' descriptors.
 *   3. Each other rank copies its position (or block) into recvbuf; the root
 *      copies its own block from sendbuf unless in place (an addition to the
 *      contract: recvbuf == sendbuf + root * recvcount * elemsize).
 *   Halves are reused two steps later as in allreduce.c; a final step when
 *   the root was read in place.
 *
 * Single-copy protocol (cma.c), for blocks from SHMCOLL_CMA_MIN bytes where
 * every rank can read its peers' memory: the root publishes where sendbuf is;
 * each other rank reads its block from the root's memory into recvbuf; a
 * second step holds the root until all have. */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Single copy (cma.c): the root publishes where sendbuf is and waits, after
 * a second step, until every rank has read its block from there. */
static int scatter_cma(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d, const uint8_t *send,
                       uint8_t *recv, size_t bytes, int root)
{
	const uint8_t *own = send + (size_t)root * bytes;
	int rc, is_root = c->rank == root;

	shmcoll__call(c)->algo = ALGO_CMA;
	if (is_root)
		d->addr = (uint64_t)(uintptr_t)send;
	rc = shmcoll__step_from(c, fn, d, 1, bytes * (size_t)c->size, is_root ? STEP_NONE : root);
	if (rc < 0)
		return rc;
	if (!is_root)
		rc = shmcoll__cma_fetch(c, fn, d, root, recv, (size_t)c->rank * bytes, bytes);
	else if (recv != own)
		memcpy(recv, own, bytes);
	if (rc < 0)
		return rc;
	return shmcoll__step_from(c, fn, d, 0, 0, is_root ? STEP_ALL : STEP_NONE);
}

int shmcoll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, shmcoll_dtype dtype,
                    int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_scatter";
	const uint8_t *send = sendbuf, *own = NULL;
	uint8_t *recv = recvbuf;
	struct shmcoll_desc *d;
	size_t bytes, total, es, cap, done, n;
	int rc, is_root;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, recvcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = shmcoll__check_root(c, fn, root);
	is_root = c->rank == root;
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc && is_root) {
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, total);
		own = send ? send + (size_t)root * bytes : NULL;
		if (!rc)
			rc = shmcoll__check_overlap(c, fn, recvbuf, bytes, sendbuf, total, own);
	}
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !recvcount)
		return rc;
	if (c->hier)
		return shmcoll__hier_scatter(c, send, recv, recvcount, dtype, root);

	es = shmcoll_dtype_size(dtype);
	cap = shmcoll__chunk_elems(c, es, (size_t)c->size);
	/* Tiny: the whole sendbuf travels in the root's message line. */
	if (shmcoll__inline(c, ALGO_FLAT, total)) {
		const uint8_t *m;

		rc = shmcoll__begin_msg(c, fn, KIND_SCATTER, dtype, SHMCOLL_SUM, root, recvcount,
		                        &d);
		if (rc < 0)
			return rc;
		if (is_root) {
			shmcoll__msg_publish(c, d, send, total);
			if (recv != own)
				memcpy(recv, own, bytes);
			return 0;
		}
		shmcoll__msg_publish(c, d, NULL, 0);
		m = shmcoll__msg_wait(c, fn, d, root, &rc);
		if (!m)
			return rc;
		memcpy(recv, m + (size_t)c->rank * bytes, bytes);
		shmcoll__msg_seen(c, d);
		return 0;
	}
	rc = shmcoll__begin(c, fn, KIND_SCATTER, dtype, SHMCOLL_SUM, root, recvcount, &d);
	if (rc < 0)
		return rc;
	if (is_root)
		d->src_off = shmcoll__heap_off(c, send, total);
	if (shmcoll__cma_pick(c, KIND_SCATTER, bytes))
		return scatter_cma(c, fn, d, send, recv, bytes, root);
	for (done = 0; done < recvcount; done += n) {
		uint32_t step = c->seq + 1;
		uint8_t *slot = shmcoll__slot(c, c->rank, step);

		n = min_size(cap, recvcount - done);
		if (is_root && d->src_off == NO_OFF) {
			if ((rc = shmcoll__guard(c, fn)) < 0)
				return rc;
			shmcoll__stage_split(slot, send, (size_t)c->size, bytes, done * es, n * es);
		}
		rc = shmcoll__step_from(c, fn, d, done == 0, total, is_root ? STEP_NONE : root);
		if (rc < 0)
			return rc;
		if (is_root) {
			if (recv != own)
				memcpy(recv + done * es, own + done * es, n * es);
		} else {
			memcpy(recv + done * es,
			       c->zc[root]
			           ? c->zc[root] + (size_t)c->rank * bytes + done * es
			           : shmcoll__slot(c, root, step) + (size_t)c->rank * n * es,
			       n * es);
		}
	}
	/* Every rank knows whether the root was read in place: the root from
	 * its own descriptor, the others from its call word. */
	if (is_root ? d->src_off != NO_OFF : c->zc[root] != NULL)
		return shmcoll__step(c, fn);
	return 0;
}
