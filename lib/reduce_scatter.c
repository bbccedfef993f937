/* reduce_scatter.c - rank r gets op over every rank's block r.
 *
 * Protocol, for each chunk of n elements of a block, n at most
 * slot_half / (size * elemsize):
 *   1. Each rank copies chunk k of every block q != r of sendbuf to position q
 *      of its staging half for this step, unless sendbuf is in its symmetric
 *      heap and not in place (then peers read its blocks in place). Its own
 *      block it reads straight from sendbuf - except in place, where it is
 *      staged too, since recvbuf (the same memory) receives the result.
 *   2. Every rank publishes the step and waits for every peer's; the first
 *      chunk checks the peers' descriptors.
 *   3. Rank r reduces position r (or block r in place) of every rank, in rank
 *      order, into its recvbuf. In place (recvbuf == sendbuf + r * recvcount
 *      * elemsize) the chunk was staged before recvbuf overwrites it.
 *   Halves are reused two steps later as in allreduce.c; a final step when
 *   anyone was read in place.
 *
 * A sendbuf of at most 512 B travels inline instead (engine.c, message
 * ring): every rank publishes it in its message and folds its block of all. */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Inline only up to this total: every rank publishes its whole sendbuf and
 * reads one block of each peer's, and from 1 KiB on that measured slower
 * than staging (docs/BENCHMARKS.md: 0.21 against 0.17 us at 1 KiB, P=2). */
#define INLINE_MAX_BYTES 512

/* Inline (a whole sendbuf of at most SHMCOLL_INLINE_MAX bytes): every rank
 * puts its sendbuf in its message, then folds block r of every message, its
 * own included (so recvbuf may be its own block: in place needs no copy). */
static int reduce_scatter_inline(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype,
                                 shmcoll_op op, const uint8_t *send, uint8_t *recv, size_t count,
                                 size_t bytes, shmcoll__reduce_fn reduce)
{
	size_t mine = (size_t)c->rank * bytes;
	struct shmcoll_desc *d;
	const uint8_t *m;
	int p, rc;

	rc = shmcoll__begin_msg(c, fn, KIND_REDUCE_SCATTER, dtype, op, -1, count, &d);
	if (rc < 0)
		return rc;
	shmcoll__msg_publish(c, d, send, (size_t)c->size * bytes);
	for (p = 0; p < c->size; p++) {
		m = p == c->rank ? shmcoll__msg(c, p, d->step)->data
		                 : shmcoll__msg_wait(c, fn, d, p, &rc);
		if (!m)
			return rc;
		c->srcs[p] = m + mine;
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	c->clean = c->seq - 1;
	reduce(recv, c->srcs, c->size, count);
	return 0;
}

int shmcoll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                           shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *c)
{
	const char *fn = "shmcoll_reduce_scatter";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf;
	struct shmcoll_desc *d;
	size_t bytes, total, es, cap, done, n;
	shmcoll__reduce_fn reduce;
	int p, rc, inplace;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, recvcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = shmcoll__check_op(c, fn, dtype, op);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, total);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc)
		rc = shmcoll__check_overlap(c, fn, recvbuf, bytes, sendbuf, total,
		                            send ? send + (size_t)c->rank * bytes : NULL);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !recvcount)
		return rc;
	if (c->hier)
		return shmcoll__hier_reduce_scatter(c, send, recv, recvcount, dtype, op);

	reduce = shmcoll__reduce_lookup(dtype, op);
	if (total <= INLINE_MAX_BYTES && shmcoll__inline(c, ALGO_FLAT, total))
		return reduce_scatter_inline(c, fn, dtype, op, send, recv, recvcount, bytes,
		                             reduce);
	es = shmcoll_dtype_size(dtype);
	cap = shmcoll__chunk_elems(c, es, (size_t)c->size);
	rc = shmcoll__begin(c, fn, KIND_REDUCE_SCATTER, dtype, op, -1, recvcount, &d);
	if (rc < 0)
		return rc;
	inplace = recv == send + (size_t)c->rank * bytes;
	if (!inplace)
		d->src_off = shmcoll__heap_off(c, send, total);
	for (done = 0; done < recvcount; done += n) {
		uint32_t step = c->seq + 1;
		uint8_t *slot = shmcoll__slot(c, c->rank, step);

		n = min_size(cap, recvcount - done);
		if (d->src_off == NO_OFF)
			for (p = 0; p < c->size; p++)
				if (p != c->rank || inplace)
					memcpy(slot + (size_t)p * n * es,
					       send + (size_t)p * bytes + done * es, n * es);
		rc = shmcoll__chunk_step(c, fn, d, done == 0, total);
		if (rc < 0)
			return rc;
		for (p = 0; p < c->size; p++)
			c->srcs[p] = c->zc[p] ? c->zc[p] + (size_t)c->rank * bytes + done * es
			             : p == c->rank && !inplace
			                 ? send + (size_t)c->rank * bytes + done * es
			                 : shmcoll__slot(c, p, step) + (size_t)c->rank * n * es;
		reduce(recv + done * es, c->srcs, c->size, n);
	}
	return shmcoll__zc_release(c, fn, -1);
}
