/* alltoall.c - rank r gets block r of every rank's sendbuf, in rank order.
 *
 * Protocol, for each chunk of n elements of a block, n at most
 * slot_half / (size * elemsize):
 *   1. Each rank copies chunk k of every block q of sendbuf to position q of
 *      its staging half for this step, unless sendbuf is in its symmetric
 *      heap and not in place (then peers read its blocks in place).
 *   2. Every rank publishes the step and waits for every peer's; the first
 *      chunk checks the peers' descriptors.
 *   3. Rank r copies position r (or block r) of every rank p into block p of
 *      its recvbuf. In place (sendbuf == recvbuf) works because the chunk
 *      of every block was staged in step 1 before step 3 overwrites it.
 *   Halves are reused two steps later as in allreduce.c; a final step when
 *   anyone was read in place.
 *
 * A sendbuf of at most 1 KiB travels inline instead (engine.c, message
 * ring): every rank publishes it in its message and copies its block of the
 * others'.
 *
 * Single-copy protocol (cma.c), for blocks from SHMCOLL_CMA_MIN bytes where
 * every rank can read its peers' memory: every rank publishes where sendbuf
 * is (in place: a private copy of it), reads its block of every peer's from
 * the peer's memory, and waits at a second step until all have read its. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Inline (a whole sendbuf of at most SHMCOLL_INLINE_MAX bytes): every rank
 * puts its sendbuf in its message, then copies block r of every peer's
 * message into its block p; its own block stays (in place) or is copied. The
 * message is written before recvbuf, so in place works. */
static int alltoall_inline(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype,
                           const uint8_t *send, uint8_t *recv, size_t count, size_t bytes)
{
	size_t mine = (size_t)c->rank * bytes;
	struct shmcoll_desc *d;
	const uint8_t *m;
	int p, rc;

	rc = shmcoll__begin_msg(c, fn, KIND_ALLTOALL, dtype, SHMCOLL_SUM, -1, count, &d);
	if (rc < 0)
		return rc;
	shmcoll__msg_publish(c, d, send, (size_t)c->size * bytes);
	for (p = 0; p < c->size; p++) {
		if (p == c->rank) {
			if (send != recv)
				memcpy(recv + mine, send + mine, bytes);
			continue;
		}
		m = shmcoll__msg_wait(c, fn, d, p, &rc);
		if (!m)
			return rc;
		memcpy(recv + (size_t)p * bytes, m + mine, bytes);
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	c->clean = c->seq - 1;
	return 0;
}

/* Single copy (cma.c): every rank publishes where sendbuf is and reads its
 * block of every peer's from the peer's memory; a second step holds it until
 * all have read theirs. In place, a rank would overwrite blocks its peers
 * have still to read: it publishes a private copy instead. */
static int alltoall_cma(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                        const uint8_t *send, uint8_t *recv, size_t bytes)
{
	size_t mine = (size_t)c->rank * bytes, total = bytes * (size_t)c->size;
	int p, rc;

	shmcoll__call(c)->algo = ALGO_CMA;
	if (send == recv) {
		if (c->scratch_bytes < total) {
			uint8_t *s = realloc(c->scratch, total);

			if (!s) {
				shmcoll__break(c, ENOMEM);
				return shmcoll__fail(c, -ENOMEM,
				                     "%s: no memory for a %zu-byte "
				                     "copy of the in-place buffer",
				                     fn, total);
			}
			c->scratch = s;
			c->scratch_bytes = total;
		}
		memcpy(c->scratch, send, total);
		send = c->scratch;
	} else {
		d->src_off = shmcoll__heap_off(c, send, total);
	}
	d->addr = (uint64_t)(uintptr_t)send;
	rc = shmcoll__chunk_step(c, fn, d, 1, total);
	for (p = 0; !rc && p < c->size; p++) {
		int q = (c->rank + p) % c->size; /* not everyone at rank 0 first */

		if (q == c->rank)
			memcpy(recv + mine, send + mine, bytes);
		else
			rc = shmcoll__cma_fetch(c, fn, d, q, recv + (size_t)q * bytes, mine, bytes);
	}
	if (rc < 0)
		return rc;
	return shmcoll__step(c, fn);
}

int shmcoll_alltoall(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                     shmcoll_comm *c)
{
	const char *fn = "shmcoll_alltoall";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf;
	struct shmcoll_desc *d;
	size_t bytes, total, es, cap, done, n;
	int p, rc;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, count, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, total);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, total);
	if (!rc)
		rc = shmcoll__check_overlap(c, fn, sendbuf, total, recvbuf, total, recvbuf);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->hier)
		return shmcoll__hier_alltoall(c, send, recv, count, dtype);

	if (shmcoll__inline(c, ALGO_FLAT, total))
		return alltoall_inline(c, fn, dtype, send, recv, count, bytes);
	es = shmcoll_dtype_size(dtype);
	cap = shmcoll__chunk_elems(c, es, (size_t)c->size);
	rc = shmcoll__begin(c, fn, KIND_ALLTOALL, dtype, SHMCOLL_SUM, -1, count, &d);
	if (rc < 0)
		return rc;
	if (shmcoll__cma_pick(c, KIND_ALLTOALL, bytes))
		return alltoall_cma(c, fn, d, send, recv, bytes);
	if (send != recv)
		d->src_off = shmcoll__heap_off(c, send, total);
	for (done = 0; done < count; done += n) {
		uint32_t step = c->seq + 1;
		uint8_t *slot = shmcoll__slot(c, c->rank, step);

		n = min_size(cap, count - done);
		if (d->src_off == NO_OFF)
			shmcoll__stage_split(slot, send, (size_t)c->size, bytes, done * es, n * es);
		rc = shmcoll__chunk_step(c, fn, d, done == 0, total);
		if (rc < 0)
			return rc;
		for (p = 0; p < c->size; p++)
			memcpy(recv + (size_t)p * bytes + done * es,
			       c->zc[p] ? c->zc[p] + (size_t)c->rank * bytes + done * es
			                : shmcoll__slot(c, p, step) + (size_t)c->rank * n * es,
			       n * es);
	}
	return shmcoll__zc_release(c, fn, -1);
}
