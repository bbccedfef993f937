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
 * Direct reduce-scatter + allgather (large vectors): each chunk is split in
 * P slices and rank r owns slice r. Iteration i (one step) does three things
 * for three chunks, so copying in, reducing and copying out overlap:
 *   a. stage chunk i: copy the slices peers own (not slice r) into this
 *      step's half at position q (skipped when peers read sendbuf in place);
 *   b. reduce chunk i-1: fold slice r of every rank - its own straight from
 *      sendbuf, the peers' from their halves of the previous step - into
 *      position r of this step's half, then copy it to recvbuf;
 *   c. copy out chunk i-2: slice q from position q of rank q's previous half.
 *   then publish and wait. Everything read in iteration i was published in
 *   the step before it, and a half is rewritten two steps after it was
 *   written, once every peer has published the step in which it read it.
 *   nchunks + 2 steps; the last one also guarantees no peer still reads this
 *   rank's sendbuf in place when the call returns. Each rank copies in and
 *   out (P-1)/P of the vector and reads 1/P of every peer's, instead of
 *   reading all of every peer's as the flat protocol does. */
#include <errno.h>
#include <string.h>

#include "lib/internal.h"

/* Vectors from this size on run the direct protocol (measured crossover,
 * docs/BENCHMARKS.md). */
#define DIRECT_MIN_BYTES (32u * 1024)

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

/* The elements [*off, *off + *len) of slice q of chunk i, for chunks of cn
 * elements cut into P slices. The last slices of a short chunk may be empty. */
static void slice_of(size_t count, size_t cn, size_t P, size_t i, size_t q, size_t *off,
		     size_t *len)
{
	size_t base = i * cn, n = min_size(cn, count - base), se = (n + P - 1) / P;
	size_t lo = min_size(q * se, n);

	*off = base + lo;
	*len = min_size(lo + se, n) - lo;
}

static int allreduce_direct(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
			    const uint8_t *send, uint8_t *recv, size_t count, size_t es,
			    size_t slice_elems, shmcoll__reduce_fn reduce)
{
	size_t P = (size_t)c->size, r = (size_t)c->rank, S = slice_elems * es;
	size_t cn = slice_elems * P, nchunks = (count + cn - 1) / cn, i, q, off, len;
	int p, rc;

	for (i = 0; i < nchunks + 2; i++) {
		uint32_t step = c->seq + 1;
		uint8_t *mine = shmcoll__slot(c, c->rank, step);

		if (i < nchunks && d->src_off == NO_OFF)
			for (q = 0; q < P; q++) {
				slice_of(count, cn, P, i, q, &off, &len);
				if (q != r)
					memcpy(mine + q * S, send + off * es, len * es);
			}
		if (i >= 1 && i - 1 < nchunks) {
			slice_of(count, cn, P, i - 1, r, &off, &len);
			for (p = 0; p < c->size; p++)
				c->srcs[p] = (size_t)p == r ? send + off * es
					     : c->zc[p]     ? c->zc[p] + off * es
							    : shmcoll__slot(c, p, step - 1) + r * S;
			if (len) {
				reduce(mine + r * S, c->srcs, c->size, len);
				memcpy(recv + off * es, mine + r * S, len * es);
			}
		}
		if (i >= 2)
			for (q = 0; q < P; q++) {
				slice_of(count, cn, P, i - 2, q, &off, &len);
				if (q != r)
					memcpy(recv + off * es,
					       shmcoll__slot(c, (int)q, step - 1) + q * S, len * es);
			}
		rc = shmcoll__chunk_step(c, fn, d, i == 0, count * es);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
		      shmcoll_op op, shmcoll_comm *c)
{
	const char *fn = "shmcoll_allreduce";
	const uint8_t *send = sendbuf;
	uint8_t *recv = recvbuf;
	struct shmcoll_desc *d;
	size_t bytes, es, chunk, slice_elems;
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

	es = shmcoll_dtype_size(dtype);
	chunk = c->chunk_bytes ? min_size(c->chunk_bytes, c->arena.lay.slot_half)
			       : c->arena.lay.slot_half;
	slice_elems = chunk / ((size_t)c->size * es);
	algo = c->algo[KIND_ALLREDUCE];
	if (algo == ALGO_AUTO)
		algo = bytes >= DIRECT_MIN_BYTES ? ALGO_DIRECT : ALGO_FLAT;
	/* One rank has nobody to split with; a tiny arena may not hold a slice
	 * per rank. Both depend only on what every rank shares. */
	if (c->size == 1 || !slice_elems)
		algo = ALGO_FLAT;

	d = shmcoll__desc_begin(c, KIND_ALLREDUCE, dtype, op, -1, count);
	shmcoll__call(c)->algo = (uint8_t)algo;
	if (send != recv)
		d->src_off = shmcoll__heap_off(c, send, bytes);
	if (algo == ALGO_DIRECT)
		return allreduce_direct(c, fn, d, send, recv, count, es, slice_elems,
					shmcoll__reduce_lookup(dtype, op));
	return allreduce_flat(c, fn, d, send, recv, count, es, shmcoll__reduce_lookup(dtype, op));
}
