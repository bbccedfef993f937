/* allreduce.c - every rank gets op over all ranks' vectors.
 *
 * Two protocols. Both fold the ranks' values in rank order, so they give the
 * same bits, and a call's choice is the same on every rank (algo.c).
 *
 * Flat all-read (small vectors), for each chunk of at most slot_half bytes:
 *   1. Each rank copies its chunk of sendbuf into its own staging half for
 *      this step (half = step & 1) - unless its sendbuf lies in its symmetric
 *      heap and is not also its recvbuf: then peers read it in place.
 *   2. It publishes the step (release) and waits for every peer's (acquire).
 *      On the first chunk it checks every peer's call word (same call).
 *   3. It reduces all ranks' chunks, in rank order, into its recvbuf.
 *   A staging half is rewritten two steps later, which the writer reaches
 *   only after every peer published the step in between, i.e. finished
 *   reading. If any rank was read in place, one more step at the end keeps
 *   it from returning while a peer still reads its buffer.
 *
 * Direct reduce-scatter + allgather (large vectors): direct.c.
 */
#include <errno.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Vectors from this size on run the direct protocol (measured crossover,
 * docs/BENCHMARKS.md). */
#define DIRECT_MIN_BYTES (4u * 1024)

/* Flat with the payload inline (struct shmcoll_msg): every rank publishes its
 * vector in its message line and folds everyone's, one transfer per peer. */
static int allreduce_inline(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                            const uint8_t *send, uint8_t *recv, size_t count, size_t es,
                            shmcoll__reduce_fn reduce)
{
	int p, rc;

	shmcoll__msg_publish(c, d, send, count * es);
	for (p = 0; p < c->size; p++) {
		c->srcs[p] = p == c->rank ? shmcoll__msg(c, p, d->step)->data
		                          : shmcoll__msg_wait(c, fn, d, p, &rc);
		if (!c->srcs[p])
			return rc;
	}
	/* Every peer has begun this call: it has read all we wrote before. */
	c->clean = c->seq - 1;
	reduce(recv, c->srcs, c->size, count);
	return 0;
}

static int allreduce_flat(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                          const uint8_t *send, uint8_t *recv, size_t count, size_t es,
                          shmcoll__reduce_fn reduce)
{
	size_t cap = shmcoll__chunk_elems(c, es, 1), done, n;
	int p, rc;

	for (done = 0; done < count; done += n) {
		uint32_t step = c->seq + 1;

		n = min_size(cap, count - done);
		if (d->src_off == NO_OFF)
			memcpy(shmcoll__slot(c, c->rank, step), send + done * es, n * es);
		rc = shmcoll__chunk_step(c, fn, d, done == 0, count * es);
		if (rc < 0)
			return rc;
		for (p = 0; p < c->size; p++)
			c->srcs[p] = c->zc[p] ? c->zc[p] + done * es : shmcoll__slot(c, p, step);
		reduce(recv + done * es, c->srcs, c->size, n);
	}
	return shmcoll__zc_release(c, fn, -1);
}

int shmcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                      shmcoll_op op, shmcoll_comm *c)
{
	const char *fn = "shmcoll_allreduce";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf;
	struct shmcoll_desc *d;
	size_t bytes, es;
	int rc, algo;

	if (!c)
		return -EINVAL;
	rc = shmcoll__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = shmcoll__check_op(c, fn, dtype, op);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc)
		rc = shmcoll__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc)
		rc = shmcoll__check_overlap(c, fn, sendbuf, bytes, recvbuf, bytes, recvbuf);
	if (!rc)
		rc = shmcoll__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->hier)
		return shmcoll__hier_allreduce(c, send, recv, count, dtype, op);

	es = shmcoll_dtype_size(dtype);
	algo = shmcoll__algo_reduction(c, KIND_ALLREDUCE, bytes, es, DIRECT_MIN_BYTES);

	if (shmcoll__inline(c, algo, bytes)) {
		rc = shmcoll__begin_msg(c, fn, KIND_ALLREDUCE, dtype, op, -1, count, &d);
		return rc < 0 ? rc
		              : allreduce_inline(c, fn, d, send, recv, count, es,
		                                 shmcoll__reduce_lookup(dtype, op));
	}
	rc = shmcoll__begin(c, fn, KIND_ALLREDUCE, dtype, op, -1, count, &d);
	if (rc < 0)
		return rc;
	shmcoll__call(c)->algo = (uint8_t)algo;
	if (send != recv)
		d->src_off = shmcoll__heap_off(c, send, bytes);
	if (algo == ALGO_DIRECT)
		return shmcoll__reduce_direct(c, fn, d, send, recv, count, es,
		                              shmcoll__reduce_lookup(dtype, op), -1);
	return allreduce_flat(c, fn, d, send, recv, count, es, shmcoll__reduce_lookup(dtype, op));
}
