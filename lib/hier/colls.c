/* colls.c - the collectives of a communicator over several nodes (hier.c has the
 * communicator, lead.c the leaders' algorithms, wide.c the wide reductions).
 *
 * Global ranks are node-major: rank = node * P + local, P ranks per node.
 * Every collective is three stages, run by every rank in the same order, so
 * the node communicator's own checks (call words, liveness, timeouts) cover
 * the first and the last:
 *   1. shared memory gathers what the node has to the leader (a reduce, a
 *      gather, or nothing);
 *   2. the leaders exchange it (every frame carries the call's word, so a
 *      mismatch between nodes is -EPROTO, never misread data);
 *   3. shared memory hands the result out (a bcast or a scatter).
 * The stages per collective:
 *   allreduce       reduce to the leader; leaders allreduce (recursive
 *                   doubling up to LEAD_RING_MIN bytes, ring beyond); bcast
 *   reduce          reduce to each leader; the other leaders send theirs to
 *                   the root's node, whose leader folds them into its own
 *                   contribution to a node reduce to the root
 *   bcast           bcast on the root's node; its leader sends to the others,
 *                   whose leaders bcast it on their node
 *   allgather       gather each node's block to its leader (in place in
 *                   recvbuf); leaders ring-allgather the blocks; bcast
 *   reduce_scatter  reduce the whole vector to the leader; leaders ring
 *                   reduce-scatter node blocks; scatter the node's block
 *   gather, scatter gather/scatter on every node through the leader, which
 *                   sends/receives node blocks to/from the root's node;
 *                   there, a root that is not the leader trades the other
 *                   nodes' blocks with it through a node bcast (local_move)
 *   alltoall        gather every rank's sendbuf to the leader; leaders swap
 *                   per-node blocks; the leader reorders; scatter
 *   barrier         node barrier; leaders' dissemination barrier; node barrier
 * Reductions whose partial results would round or overflow differently than
 * one fold over every rank are carried wide: float16/bfloat16 sums, products
 * and averages as float32, rounded once at the end; integer averages as
 * (quotient, remainder) pairs of the division by the job's size, exact for
 * any values. Large vectors go in chunks of CHUNK_BYTES.
 *
 * A failure anywhere breaks the whole communicator: the leader shuts its
 * connections (the other nodes' leaders fail at once and break their nodes)
 * and breaks its node communicator (its node's ranks wake and fail). */
#include <string.h>

#include "lib/hier/impl.h"
#include "lib/sched/sched.h"

#define CHUNK_BYTES SHMCOLL_HIER_CHUNK_BYTES
/* local_move's chunks: the bystanders' scratch. */
#define MOVE_BYTES (1u << 20)

/* Moves bytes from local rank `from` (src) to local rank `to` (dst) through
 * node bcasts: every rank of the node takes part, the others into scratch. */
static int local_move(struct shmcoll_hier *h, const char *fn, int from, int to, const uint8_t *src,
                      uint8_t *dst, size_t bytes)
{
	uint8_t *bin = NULL;
	size_t off, n;
	int rc;

	if (from == to || bytes == 0)
		return 0;
	if (h->lrank != from && h->lrank != to) {
		bin = hier__scratch(h, SCR_MOVE, min_size(bytes, MOVE_BYTES));
		if (!bin)
			return hier__oom(h, fn, min_size(bytes, MOVE_BYTES));
	}
	for (off = 0; off < bytes; off += n) {
		uint8_t *p = bin;

		n = min_size(bytes - off, MOVE_BYTES);
		if (h->lrank == from) {
			/* bcast reads the root's buffer only. */
			p = (uint8_t *)src + off;
		} else if (h->lrank == to) {
			p = dst + off;
		}
		rc = hier__local_bcast(h, p, n, SHMCOLL_UINT8, from);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll__hier_barrier(struct shmcoll_hier *h)
{
	const char *fn = "shmcoll_barrier";
	uint64_t call = hier__call_word(KIND_BARRIER, 0, 0, -1, 0);
	int rc, r, to, from;

	rc = hier__local_barrier(h);
	if (rc < 0)
		return rc;
	for (r = 0; h->lrank == 0 && r < shmcoll__dissem_rounds(h->nnodes); r++) {
		shmcoll__dissem_peers(h->node, h->nnodes, r, &to, &from);
		rc = hier__sendrecv(h, fn, call, to, NULL, 0, from, NULL, 0);
		if (rc < 0)
			return rc;
	}
	return hier__local_barrier(h);
}

/* Elements per chunk of a reduction of w. */
static size_t reduce_chunk(const struct wide *w)
{
	return CHUNK_BYTES / (w->es * w->mult);
}

/* The allreduce of a chunk of wres's among the leaders, posted (h->xmode
 * X_POST) or run or resumed: the result ends in *res (the chunk of out if
 * the types allow). Returns 0, POSTED, or an error. */
static int allreduce_lead(struct shmcoll_hier *h, const struct wide *w, uint64_t call,
                          uint8_t *wres, size_t m, uint8_t *out, uint8_t **res)
{
	return hier__lead_allreduce(h, "shmcoll_allreduce", w, call, wres, m,
	                            w->mode == W_NATIVE ? out : NULL, res);
}

/* Pipelined: the leader posts chunk k's exchange among the leaders and
 * resumes it only after the node has reduced chunk k+1, then posts chunk
 * k+1's before the node bcasts chunk k, so each chunk's network time
 * overlaps the node's work on its neighbours. Every rank of a node runs the
 * node stages in the same order: reduce 0, reduce 1, bcast 0, reduce 2,
 * bcast 1, ... */
int shmcoll__hier_allreduce(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv,
                            size_t count, shmcoll_dtype dt, shmcoll_op op)
{
	const char *fn = "shmcoll_allreduce";
	struct wide w = hier__widen(dt, op);
	size_t es = shmcoll__dtype_size(dt), cap = reduce_chunk(&w), K, k, wa;
	uint64_t call = hier__call_word(KIND_ALLREDUCE, dt, op, -1, count), S = (uint64_t)h->size;
	uint8_t *wres[2] = {NULL, NULL}, *res[2] = {NULL, NULL};
	int rc, lead = h->lrank == 0, posted[2] = {0, 0};

	K = shmcoll__nchunks(count, cap);
	wa = hier__align16(min_size(cap, count) * w.mult * w.es);
	if (lead && K) {
		wres[0] = hier__scratch(h, SCR_RES, 2 * wa);
		if (!wres[0])
			return hier__oom(h, fn, 2 * wa);
		wres[1] = wres[0] + wa;
	}
	for (k = 0; k <= K; k++) {
		size_t lo = k * cap, n = k < K ? min_size(cap, count - lo) : 0, m = n * w.mult;
		/* The previous chunk (k >= 1): the one this round finishes. */
		size_t plo = k ? (k - 1) * cap : 0, pn = k ? min_size(cap, count - plo) : 0;
		uint8_t *pout = recv + plo * es;
		int b = (int)(k & 1), pb = !b;

		if (k < K) {
			uint8_t *win = (uint8_t *)send + lo * es;

			if (w.mode != W_NATIVE) {
				win = hier__scratch(h, SCR_IN, m * w.es);
				if (!win)
					return hier__oom(h, fn, m * w.es);
				hier__wide_in(&w, win, send + lo * es, n, dt, S);
			}
			rc = hier__local_reduce(h, win, wres[b], m, w.dt, w.op, 0);
			if (rc < 0)
				return rc;
		}
		if (lead && k >= 1) {
			if (posted[pb]) {
				h->xmode = X_RESUME;
				rc = allreduce_lead(h, &w, call, wres[pb], pn * w.mult, pout,
				                    &res[pb]);
				if (rc < 0)
					return rc;
			}
			hier__wide_out(&w, pout, res[pb], pn, dt, op, S);
		}
		if (lead && k < K) {
			h->xmode = X_POST;
			rc = allreduce_lead(h, &w, call, wres[b], m, recv + lo * es, &res[b]);
			if (rc < 0)
				return rc;
			posted[b] = rc == POSTED;
		}
		if (k >= 1) {
			rc = hier__local_bcast(h, pout, pn, dt, 0);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* Pipelined like allreduce: a node away from the root's sends chunk k while
 * it reduces chunk k+1; the root's node's leader receives chunk k+1 while
 * its node reduces chunk k. */
int shmcoll__hier_reduce(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root)
{
	const char *fn = "shmcoll_reduce";
	struct wide w = hier__widen(dt, op);
	size_t es = shmcoll__dtype_size(dt), cap = reduce_chunk(&w), K, k;
	size_t wa = hier__align16(min_size(cap, count) * w.mult * w.es);
	uint64_t call = hier__call_word(KIND_REDUCE, dt, op, root, count), S = (uint64_t)h->size;
	int rc, lead = h->lrank == 0, nr = root / h->nproc, lr = root % h->nproc;
	int N = h->nnodes, q, nx = 0, home = h->node == nr;
	uint8_t *bufs = NULL;
	struct shmcoll_xfer *x = NULL;
	const void **srcs = NULL;

	K = shmcoll__nchunks(count, cap);
	if (lead && K) {
		/* Two chunks' worth: the partial in flight and the next one, or
		 * (at home) every node's partials of two chunks; then the fold,
		 * the transfers and the fold's sources. */
		size_t parts = home ? (size_t)N : 1;
		size_t bytes =
		    2 * parts * wa + wa + sizeof(*x) * (size_t)N + sizeof(*srcs) * (size_t)N;

		bufs = hier__scratch(h, SCR_RES, bytes);
		if (!bufs)
			return hier__oom(h, fn, bytes);
		x = (struct shmcoll_xfer *)(bufs + 2 * parts * wa + wa);
		srcs = (const void **)(x + N);
	}
	for (k = 0; k < K; k++) {
		size_t lo = k * cap, n = min_size(cap, count - lo), m = n * w.mult, wb = m * w.es;
		uint8_t *out = h->rank == root ? recv + lo * es : NULL,
		        *win = (uint8_t *)send + lo * es;
		uint8_t *wres = NULL;
		int b = (int)(k & 1);

		if (w.mode != W_NATIVE) {
			win = hier__scratch(h, SCR_IN, wb);
			if (!win)
				return hier__oom(h, fn, wb);
			hier__wide_in(&w, win, send + lo * es, n, dt, S);
		}
		if (!home) {
			wres = lead ? bufs + (size_t)b * wa : NULL;
			rc = hier__local_reduce(h, win, wres, m, w.dt, w.op, 0);
			if (rc == 0 && lead) {
				rc = hier__wait(h, fn);
				x[0] = (struct shmcoll_xfer){nr, XFER_SEND, wres, wb, call, 0};
				if (rc == 0)
					rc = hier__post(h, fn, x, 1);
			}
			if (rc < 0)
				return rc;
			continue;
		}
		/* The root's node: the leader's contribution is its own folded
		 * with every other node's partial, in node order. */
		if (lead) {
			uint8_t *part = bufs + (size_t)b * (size_t)N * wa;
			uint8_t *fold = bufs + 2 * (size_t)N * wa;

			if (k == 0)
				rc = 0;
			else
				rc = hier__wait(h, fn);
			/* Chunk k's partials: posted last round, or now. */
			for (q = 0, nx = 0; q < N && (rc == 0 && k == 0); q++)
				if (q != nr)
					x[nx++] = (struct shmcoll_xfer){
					    q, XFER_RECV, part + (size_t)q * wa, wb, call, 0};
			if (rc == 0 && k == 0)
				rc = hier__run(h, fn, x, nx);
			if (rc == 0 && k + 1 < K) {
				size_t n1 = min_size(cap, count - lo - cap) * w.mult * w.es;
				uint8_t *next = bufs + (size_t)!b * (size_t)N * wa;

				for (q = 0, nx = 0; q < N; q++)
					if (q != nr)
						x[nx++] = (struct shmcoll_xfer){
						    q,  XFER_RECV, next + (size_t)q * wa,
						    n1, call,      0};
				rc = hier__post(h, fn, x, nx);
			}
			if (rc < 0)
				return rc;
			for (q = 0; q < N; q++)
				srcs[q] = q == nr ? (const void *)win : part + (size_t)q * wa;
			w.fold(fold, srcs, N, m);
			win = fold;
		}
		if (h->lrank == lr) {
			wres = w.mode == W_NATIVE ? out : hier__scratch(h, SCR_TMP, wb);
			if (!wres)
				return hier__oom(h, fn, wb);
		}
		rc = hier__local_reduce(h, win, wres, m, w.dt, w.op, lr);
		if (rc < 0)
			return rc;
		if (h->lrank == lr)
			hier__wide_out(&w, out, wres, n, dt, op, S);
	}
	return lead ? hier__wait(h, fn) : 0;
}

/* Pipelined: the root's node's leader sends chunk k while its node bcasts
 * chunk k+1; another node's leader receives chunk k+1 while its node
 * bcasts chunk k. */
int shmcoll__hier_bcast(struct shmcoll_hier *h, uint8_t *buf, size_t count, shmcoll_dtype dt,
                        int root)
{
	const char *fn = "shmcoll_bcast";
	size_t es = shmcoll__dtype_size(dt), cap = CHUNK_BYTES / es, K, k;
	uint64_t call = hier__call_word(KIND_BCAST, dt, 0, root, count);
	int rc = 0, nr = root / h->nproc, q, nx, lead = h->lrank == 0;
	struct shmcoll_xfer *x = NULL;

	K = shmcoll__nchunks(count, cap);
	if (lead) {
		x = hier__scratch(h, SCR_TMP, sizeof(*x) * (size_t)h->nnodes);
		if (!x)
			return hier__oom(h, fn, sizeof(*x) * (size_t)h->nnodes);
	}
	if (lead && h->node != nr && K)
		rc = hier__sendrecv(h, fn, call, -1, NULL, 0, nr, buf, min_size(cap, count) * es);
	for (k = 0; k < K && rc == 0; k++) {
		size_t lo = k * cap, n = min_size(cap, count - lo);
		uint8_t *p = buf + lo * es;

		if (h->node == nr) {
			rc = hier__local_bcast(h, p, n, dt, root % h->nproc);
			if (rc == 0 && lead)
				rc = hier__wait(h, fn);
			for (q = 0, nx = 0; rc == 0 && lead && q < h->nnodes; q++)
				if (q != nr)
					x[nx++] =
					    (struct shmcoll_xfer){q, XFER_SEND, p, n * es, call, 0};
			if (rc == 0 && lead)
				rc = hier__post(h, fn, x, nx);
			continue;
		}
		/* Chunk k is in (received before the loop, or waited for
		 * here); chunk k+1 comes while the node bcasts k. */
		if (lead && k > 0)
			rc = hier__wait(h, fn);
		if (rc == 0 && lead && k + 1 < K) {
			x[0] = (struct shmcoll_xfer){
			    nr,   XFER_RECV, p + cap * es, min_size(cap, count - lo - cap) * es,
			    call, 0};
			rc = hier__post(h, fn, x, 1);
		}
		if (rc == 0)
			rc = hier__local_bcast(h, p, n, dt, 0);
	}
	if (rc == 0 && lead)
		rc = hier__wait(h, fn);
	return rc;
}

int shmcoll__hier_allgather(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t sc,
                            shmcoll_dtype dt)
{
	const char *fn = "shmcoll_allgather";
	size_t es = shmcoll__dtype_size(dt), block = (size_t)h->nproc * sc * es;
	uint64_t call = hier__call_word(KIND_ALLGATHER, dt, 0, -1, sc);
	int rc, lead = h->lrank == 0;

	/* The node's block lands in place in the leader's recvbuf. */
	rc = hier__local_gather(h, send, lead ? recv + (size_t)h->node * block : NULL, sc, dt, 0);
	if (rc == 0 && lead)
		rc = hier__lead_ring_ag(h, fn, call, recv, (size_t)h->nnodes, block, 1);
	if (rc == 0)
		rc = hier__local_bcast(h, recv, (size_t)h->size * sc, dt, 0);
	return rc;
}

int shmcoll__hier_reduce_scatter(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv,
                                 size_t rc_, shmcoll_dtype dt, shmcoll_op op)
{
	const char *fn = "shmcoll_reduce_scatter";
	struct wide w = hier__widen(dt, op);
	size_t es = shmcoll__dtype_size(dt), total = (size_t)h->size * rc_;
	size_t m = total * w.mult, seg = (size_t)h->nproc * rc_ * w.mult;
	uint64_t call = hier__call_word(KIND_REDUCE_SCATTER, dt, op, -1, rc_),
	         S = (uint64_t)h->size;
	uint8_t *win = (uint8_t *)send, *wres = NULL, *part = NULL;
	int rc, lead = h->lrank == 0;

	if (w.mode != W_NATIVE) {
		win = hier__scratch(h, SCR_IN, m * w.es);
		if (!win)
			return hier__oom(h, fn, m * w.es);
		hier__wide_in(&w, win, send, total, dt, S);
	}
	if (lead) {
		wres = hier__scratch(h, SCR_RES, m * w.es);
		part = hier__scratch(h, SCR_TMP, (size_t)h->nproc * rc_ * es);
		if (!wres || !part)
			return hier__oom(h, fn, m * w.es);
	}
	rc = hier__local_reduce(h, win, wres, m, w.dt, w.op, 0);
	if (rc == 0 && lead) {
		rc = hier__lead_ring_rs(h, fn, &w, call, wres, m, seg);
		if (rc == 0)
			hier__wide_out(&w, part, wres + (size_t)h->node * seg * w.es,
			               (size_t)h->nproc * rc_, dt, op, S);
	}
	if (rc == 0)
		rc = hier__local_scatter(h, part, recv, rc_, dt, 0);
	return rc;
}

int shmcoll__hier_gather(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t sc,
                         shmcoll_dtype dt, int root)
{
	const char *fn = "shmcoll_gather";
	size_t es = shmcoll__dtype_size(dt), block = (size_t)h->nproc * sc * es;
	uint64_t call = hier__call_word(KIND_GATHER, dt, 0, root, sc);
	int rc, N = h->nnodes, nr = root / h->nproc, lr = root % h->nproc, q, k;
	int lead = h->lrank == 0;
	uint8_t *far;

	if (h->node != nr) {
		uint8_t *tmp = lead ? hier__scratch(h, SCR_RES, block) : NULL;

		if (lead && !tmp)
			return hier__oom(h, fn, block);
		rc = hier__local_gather(h, send, tmp, sc, dt, 0);
		if (rc == 0 && lead)
			rc = hier__sendrecv(h, fn, call, nr, tmp, block, -1, NULL, 0);
		return rc;
	}
	/* The root's node: its block goes straight to the root. */
	rc = hier__local_gather(h, send, h->lrank == lr ? recv + (size_t)nr * block : NULL, sc, dt,
	                        lr);
	if (rc < 0)
		return rc;
	/* The other nodes' blocks, in node order, into recvbuf if the leader is
	 * the root, else into scratch to be moved to the root. */
	far = NULL;
	if (lead) {
		struct shmcoll_xfer *x = hier__scratch(h, SCR_TMP, sizeof(*x) * (size_t)N);

		far = lr == 0 ? recv : hier__scratch(h, SCR_RES, (size_t)(N - 1) * block);
		if (!x || !far)
			return hier__oom(h, fn, (size_t)N * block);
		for (q = 0, k = 0; q < N; q++) {
			uint8_t *dst = lr == 0 ? recv + (size_t)q * block
			                       : far + (size_t)(q - (q > nr)) * block;

			if (q != nr)
				x[k++] = (struct shmcoll_xfer){q, XFER_RECV, dst, block, call, 0};
		}
		rc = hier__run(h, fn, x, k);
		if (rc < 0)
			return rc;
	}
	if (lr == 0)
		return 0;
	rc = local_move(h, fn, 0, lr, far, recv, (size_t)nr * block);
	if (rc == 0)
		rc = local_move(h, fn, 0, lr, far ? far + (size_t)nr * block : NULL,
		                recv ? recv + (size_t)(nr + 1) * block : NULL,
		                (size_t)(N - 1 - nr) * block);
	return rc;
}

int shmcoll__hier_scatter(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t rcount,
                          shmcoll_dtype dt, int root)
{
	const char *fn = "shmcoll_scatter";
	size_t es = shmcoll__dtype_size(dt), block = (size_t)h->nproc * rcount * es;
	uint64_t call = hier__call_word(KIND_SCATTER, dt, 0, root, rcount);
	int rc, N = h->nnodes, nr = root / h->nproc, lr = root % h->nproc, q, k;
	int lead = h->lrank == 0;

	if (h->node != nr) {
		uint8_t *tmp = lead ? hier__scratch(h, SCR_RES, block) : NULL;

		if (lead && !tmp)
			return hier__oom(h, fn, block);
		rc = lead ? hier__sendrecv(h, fn, call, -1, NULL, 0, nr, tmp, block) : 0;
		if (rc == 0)
			rc = hier__local_scatter(h, tmp, recv, rcount, dt, 0);
		return rc;
	}
	/* The root's node: the leader sends the other nodes' blocks, taken
	 * from the root's sendbuf through the node first if it is not root. */
	rc = 0;
	if (lead) {
		struct shmcoll_xfer *x = hier__scratch(h, SCR_TMP, sizeof(*x) * (size_t)N);
		const uint8_t *far =
		    lr == 0 ? send : hier__scratch(h, SCR_RES, (size_t)(N - 1) * block);

		if (!x || !far)
			return hier__oom(h, fn, (size_t)N * block);
		if (lr != 0) {
			rc = local_move(h, fn, lr, 0, NULL, (uint8_t *)far, (size_t)nr * block);
			if (rc == 0)
				rc = local_move(h, fn, lr, 0, NULL,
				                (uint8_t *)far + (size_t)nr * block,
				                (size_t)(N - 1 - nr) * block);
			if (rc < 0)
				return rc;
		}
		for (q = 0, k = 0; q < N; q++) {
			const uint8_t *src = lr == 0 ? send + (size_t)q * block
			                             : far + (size_t)(q - (q > nr)) * block;

			if (q != nr)
				x[k++] = (struct shmcoll_xfer){q,     XFER_SEND, (void *)src,
				                               block, call,      0};
		}
		rc = hier__run(h, fn, x, k);
	} else if (lr != 0) {
		rc = local_move(h, fn, lr, 0, send, NULL, (size_t)nr * block);
		if (rc == 0)
			rc = local_move(h, fn, lr, 0, send ? send + (size_t)(nr + 1) * block : NULL,
			                NULL, (size_t)(N - 1 - nr) * block);
	}
	if (rc < 0)
		return rc;
	return hier__local_scatter(h, h->lrank == lr ? send + (size_t)nr * block : NULL, recv,
	                           rcount, dt, lr);
}

int shmcoll__hier_alltoall(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t count,
                           shmcoll_dtype dt)
{
	const char *fn = "shmcoll_alltoall";
	size_t b = count * shmcoll__dtype_size(dt), P = (size_t)h->nproc, S = (size_t)h->size;
	size_t row = S * b, nblk = P * P * b;
	uint64_t call = hier__call_word(KIND_ALLTOALL, dt, 0, -1, count);
	int rc, N = h->nnodes, lead = h->lrank == 0, m, k;
	uint8_t *G = NULL, *O = NULL, *I = NULL, *T = NULL;
	size_t i, j;

	if (lead) {
		/* G: every local rank's sendbuf; O, I: per node, [j][i] the
		 * block local i sends to (or receives from) local j; T: per
		 * local rank, its recvbuf. */
		G = hier__scratch(h, SCR_IN, P * row);
		O = hier__scratch(h, SCR_RES, (size_t)N * nblk);
		I = hier__scratch(h, SCR_NET,
		                  hier__align16((size_t)N * nblk) +
		                      sizeof(struct shmcoll_xfer) * 2 * N);
		T = hier__scratch(h, SCR_TMP, P * row);
		if (!G || !O || !I || !T)
			return hier__oom(h, fn, 2 * P * row + 2 * (size_t)N * nblk);
	}
	rc = hier__local_gather(h, send, G, S * count, dt, 0);
	if (rc < 0 || !lead)
		goto out;
	for (m = 0; m < N; m++)
		for (j = 0; j < P; j++)
			for (i = 0; i < P; i++)
				memcpy(O + (size_t)m * nblk + (j * P + i) * b,
				       G + i * row + ((size_t)m * P + j) * b, b);
	{
		struct shmcoll_xfer *x =
		    (struct shmcoll_xfer *)(I + hier__align16((size_t)N * nblk));

		for (m = 0, k = 0; m < N; m++) {
			if (m == h->node)
				continue;
			x[k++] = (struct shmcoll_xfer){m,    XFER_SEND, O + (size_t)m * nblk,
			                               nblk, call,      0};
			x[k++] = (struct shmcoll_xfer){m,    XFER_RECV, I + (size_t)m * nblk,
			                               nblk, call,      0};
		}
		memcpy(I + (size_t)h->node * nblk, O + (size_t)h->node * nblk, nblk);
		rc = hier__run(h, fn, x, k);
		if (rc < 0)
			return rc;
	}
	for (j = 0; j < P; j++)
		for (m = 0; m < N; m++)
			memcpy(T + j * row + (size_t)m * P * b, I + (size_t)m * nblk + j * P * b,
			       P * b);
out:
	if (rc == 0)
		rc = hier__local_scatter(h, T, recv, S * count, dt, 0);
	return rc;
}
