/* direct.c - the direct reduce-scatter + allgather protocol, shared by
 * allreduce (every rank copies the result out) and reduce (only the root
 * does).
 *
 * Each chunk is split in P slices and rank r owns slice r. Iteration i (one
 * step) does three things for three chunks, so copying in, reducing and
 * copying out overlap:
 *   a. stage chunk i: copy the slices peers own (not slice r) into this
 *      step's half at position q (skipped when peers read sendbuf in place);
 *   b. reduce chunk i-1: fold slice r of every rank, in rank order - its own
 *      straight from sendbuf, the peers' from their halves of the previous
 *      step - into position r of this step's half, and copy it to recvbuf;
 *   c. copy out chunk i-2: slice q from position q of rank q's previous half
 *      (every rank for allreduce, the root for reduce).
 *   then publish and wait for every peer. Everything read in iteration i was
 *   published in the step before it, and a half is rewritten two steps after
 *   it was written, once every peer has published the step in which it read
 *   it. nchunks + 2 steps; the last also guarantees that no peer still reads
 *   this rank's sendbuf in place when the call returns.
 * In place (sendbuf == recvbuf) works because slice r of chunk i is read
 * (b, iteration i+1) before recvbuf's slice r is written (just after), and
 * the other slices of chunk i are staged (a, iteration i) before they are
 * copied out over (c, iteration i+2).
 * Each rank copies (P-1)/P of the vector in and out and reads 1/P of every
 * peer's; the flat protocol reads all of every peer's.
 * Zero copy: a sendbuf in the symmetric heap is read in place (no staging);
 * a recvbuf there (not in place) receives the rank's reduced slice straight
 * from the kernel, and peers copy it from there (c). Peers read only slice r
 * of a rank's recvbuf, which the rank writes once, while it writes only the
 * other slices; the last step keeps it from returning while a peer reads. */
#include <string.h>

#include "lib/internal.h"

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

static void *nt_copy(void *dst, const void *src, size_t n)
{
	shmcoll__copy_nt(dst, src, n);
	return dst;
}

/* Elements per slice: a chunk (SHMCOLL_CHUNK_BYTES or a staging half) cut
 * in P slices of whole elements. */
static size_t slice_elems(const shmcoll_comm *c, size_t es)
{
	size_t chunk = c->chunk_bytes ? min_size(c->chunk_bytes, c->arena.lay.slot_half)
	                              : c->arena.lay.slot_half;

	return chunk / ((size_t)c->size * es);
}

int shmcoll__direct_fits(const shmcoll_comm *c, size_t es)
{
	return c->size > 1 && slice_elems(c, es) > 0;
}

int shmcoll__reduce_direct(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                           const uint8_t *send, uint8_t *recv, size_t count, size_t es,
                           shmcoll__reduce_fn reduce, int root)
{
	size_t P = (size_t)c->size, r = (size_t)c->rank, se = slice_elems(c, es), S = se * es;
	size_t cn = se * P, nchunks = (count + cn - 1) / cn, i, q, off, len;
	void *(*copy_out)(void *, const void *, size_t) = memcpy;
	int p, rc, out = root < 0 || root == c->rank, direct_out;

	if (count * es >= SHMCOLL_NT_MIN_BYTES && c->nt_stores)
		copy_out = nt_copy;
	/* A result buffer in the symmetric heap (and not the source) takes the
	 * reduced slice straight from the kernel, and peers copy it from there:
	 * no write into the staging half and no copy back out of it. */
	if (out && recv != send)
		d->res_off = shmcoll__heap_off(c, recv, count * es);
	direct_out = d->res_off != NO_OFF;
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
			if (len && direct_out) {
				reduce(recv + off * es, c->srcs, c->size, len);
			} else if (len) {
				reduce(mine + r * S, c->srcs, c->size, len);
				if (out)
					copy_out(recv + off * es, mine + r * S, len * es);
			}
		}
		if (i >= 2 && out)
			for (q = 0; q < P; q++) {
				slice_of(count, cn, P, i - 2, q, &off, &len);
				if (q != r)
					copy_out(recv + off * es,
					         c->zr[q]
					             ? c->zr[q] + off * es
					             : shmcoll__slot(c, (int)q, step - 1) + q * S,
					         len * es);
			}
		rc = shmcoll__chunk_step(c, fn, d, i == 0, count * es);
		if (rc < 0)
			return rc;
	}
	return 0;
}
