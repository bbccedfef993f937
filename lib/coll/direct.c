/* direct.c - the direct reduce-scatter + allgather protocol, shared by allreduce (every rank
 * copies the result out) and reduce (only the root does).
 *
 * Each chunk is split in P slices (lib/sched: shmcoll__slice) and rank r owns slice r.
 * Iteration i (one step) does three things for three chunks, so copying in, reducing and
 * copying out overlap:
 *   a. stage chunk i: copy the slices peers own (not slice r) into this step's half at
 *      position q (skipped when peers read sendbuf in place);
 *   b. reduce chunk i-1: fold slice r of every rank, in rank order - its own straight from
 *      sendbuf, the peers' from their halves of the previous step - into position r of this
 *      step's half, and copy it to recvbuf;
 *   c. copy out chunk i-2: slice q from position q of rank q's previous half (every rank for
 *      allreduce, the root for reduce).
 *   then publish and wait for every peer. Everything read in iteration i was published in the
 *   step before it, and a half is rewritten two steps after it was written, once every peer
 *   has published the step in which it read it. nchunks + 2 steps; the last also guarantees
 *   that no peer still reads this rank's sendbuf in place when the call returns.
 * In place (sendbuf == recvbuf) works because slice r of chunk i is read (b, iteration i+1)
 * before recvbuf's slice r is written (just after), and the other slices of chunk i are
 * staged (a, iteration i) before they are copied out over (c, iteration i+2).
 * Each rank copies (P-1)/P of the vector in and out and reads 1/P of every peer's; the flat
 * protocol reads all of every peer's.
 * Zero copy: a sendbuf in the symmetric heap is read in place (no staging); a recvbuf there
 * (not in place) receives the rank's reduced slice straight from the kernel, and peers copy
 * it from there (c). Peers read only slice r of a rank's recvbuf, which the rank writes once,
 * while it writes only the other slices; the last step keeps it from returning while a peer
 * reads. */
#include "lib/coll/proto.h"
#include "lib/core/heap.h"
#include "lib/kernels/copy.h"
#include "lib/sched/sched.h"

enum { AT_GUARD = 1, AT_STEP };

static void *nt_copy(void *dst, const void *src, size_t n)
{
	shmcoll__copy_nt(dst, src, n);
	return dst;
}

int shmcoll__direct_advance(struct shmcoll_node *n, struct shmcoll_task *t)
{
	size_t P = (size_t)n->size, r = (size_t)n->rank, es = t->es;
	size_t se = shmcoll__direct_slice_elems(n, es), S = se * es, cn = se * P, q, off, len;
	void *(*copy_out)(void *, const void *, size_t) = shmcoll__copy_out;
	int p, rc, out = t->root < 0 || t->root == n->rank;

	if (t->count * es >= SHMCOLL_NT_MIN_BYTES && n->tune.nt_stores)
		copy_out = nt_copy;
	switch (t->head.at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
	/* Peers read this rank's sendbuf in place unless it receives the result into it; a
	 * non-root rank of a reduce never touches its recvbuf. A result buffer in the symmetric
	 * heap (and not the source) takes the reduced slice straight from the kernel, and peers
	 * copy it from there: no write into the staging half and no copy back out of it. */
	if (!out || t->send != t->recv)
		t->d->src_off = shmcoll__heap_off(n, t->send, t->count * es);
	if (out && t->recv != t->send)
		t->d->res_off = shmcoll__heap_off(n, t->recv, t->count * es);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	t->nchunks = shmcoll__nchunks(t->count, cn);
	for (t->i = 0; t->i < t->nchunks + 2; t->i++) {
		uint32_t step = n->st.seq + 1;
		uint8_t *mine = shmcoll__slot(n, n->rank, step);
		size_t i = t->i;

		if (i < t->nchunks && t->d->src_off == NO_OFF)
			for (q = 0; q < P; q++) {
				shmcoll__slice(t->count, cn, P, i, q, &off, &len);
				if (q != r)
					memcpy(mine + q * S, t->send + off * es, len * es);
			}
		if (i >= 1 && i - 1 < t->nchunks) {
			shmcoll__slice(t->count, cn, P, i - 1, r, &off, &len);
			for (p = 0; p < n->size; p++)
				n->st.srcs[p] = (size_t)p == r ? t->send + off * es
				                : n->st.zc[p]
				                    ? n->st.zc[p] + off * es
				                    : shmcoll__slot(n, p, step - 1) + r * S;
			if (len && t->d->res_off != NO_OFF) {
				t->reduce(t->recv + off * es, n->st.srcs, n->size, len);
			} else if (len) {
				t->reduce(mine + r * S, n->st.srcs, n->size, len);
				if (out)
					copy_out(t->recv + off * es, mine + r * S, len * es);
			}
		}
		if (i >= 2 && out)
			for (q = 0; q < P; q++) {
				shmcoll__slice(t->count, cn, P, i - 2, q, &off, &len);
				if (q != r)
					copy_out(t->recv + off * es,
					         n->st.zr[q]
					             ? n->st.zr[q] + off * es
					             : shmcoll__slot(n, (int)q, step - 1) + q * S,
					         len * es);
			}
		shmcoll__publish_next(n, i == 0 ? t->d : NULL);
	step:
		rc = shmcoll__await_from(n, t, STEP_ALL, t->i == 0, t->count * es);
		if (rc)
			return shmcoll__suspend(t, AT_STEP, rc);
	}
	return 0;
}
