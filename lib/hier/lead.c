/* lead.c - the leaders' algorithms: recursive doubling and the ring (lib/sched has their
 * plans), each a sequence of exchanges (hier__sendrecv) with folds between them. Every one
 * can be posted and resumed (impl.h: X_POST, X_RESUME): before its first exchange it only
 * sizes scratch and picks peers. */
#include <string.h>

#include "lib/hier/impl.h"
#include "lib/sched/sched.h"

/* Leaders: recursive doubling below, ring from here on. */
#define LEAD_RING_MIN (64u << 10)

/* buf = fold(a, b) over m wide elements, a first; tmp holds m of them. */
static void fold2(const struct wide *w, void *buf, const void *a, const void *b, void *tmp,
                  size_t m)
{
	const void *srcs[2] = {a, b};

	w->fold(tmp, srcs, 2, m);
	memcpy(buf, tmp, m * w->es);
}

/* Recursive doubling. Each round folds into the other of buf and a scratch vector, so
 * nothing is copied; the last fold goes to final instead if given (distinct from buf). */
static int lead_rd(struct shmcoll_hier *h, const char *fn, const struct wide *w, uint64_t call,
                   uint8_t *buf, size_t m, uint8_t *final, uint8_t **res)
{
	struct shmcoll_rd rd;
	size_t bytes = m * w->es;
	uint8_t *in = hier__scratch(h, SCR_NET, 2 * bytes), *cur = buf, *other;
	const void *srcs[2];
	int r, peer, rc;

	if (!in)
		return hier__oom(h, fn, 2 * bytes);
	other = in + bytes;
	shmcoll__rd_plan(h->node, h->nnodes, &rd);
	/* The nodes past the largest power of two fold into a partner first and get the
	 * result from it last. */
	if (rd.is_extra) {
		*res = final ? final : buf;
		rc = hier__sendrecv(h, fn, call, rd.extra, buf, bytes, -1, NULL, 0);
		return rc ? rc : hier__sendrecv(h, fn, call, -1, NULL, 0, rd.extra, *res, bytes);
	}
	if (rd.extra >= 0) {
		rc = hier__sendrecv(h, fn, call, -1, NULL, 0, rd.extra, in, bytes);
		if (rc)
			return rc;
		srcs[0] = cur;
		srcs[1] = in;
		w->fold(other, srcs, 2, m);
		cur = other;
		other = buf;
	}
	for (r = 0; r < rd.rounds; r++) {
		uint8_t *dst = r == rd.rounds - 1 && final ? final : other;

		peer = shmcoll__rd_peer(h->node, r);
		rc = hier__sendrecv(h, fn, call, peer, cur, bytes, peer, in, bytes);
		if (rc)
			return rc;
		/* The lower node's partial first, on both sides: the same bits. */
		srcs[h->node < peer ? 0 : 1] = cur;
		srcs[h->node < peer ? 1 : 0] = in;
		w->fold(dst, srcs, 2, m);
		other = cur;
		cur = dst;
	}
	*res = cur;
	if (rd.extra >= 0)
		return hier__sendrecv(h, fn, call, rd.extra, cur, bytes, -1, NULL, 0);
	return 0;
}

/* Block k's elements: [k * seg, +seg) if seg, else the even segment k of m. */
static void block(size_t m, int N, int k, size_t seg, size_t *lo, size_t *len)
{
	if (seg) {
		*lo = (size_t)k * seg;
		*len = seg;
	} else {
		shmcoll__segment(m, N, k, lo, len);
	}
}

int hier__lead_ring_rs(struct shmcoll_hier *h, const char *fn, const struct wide *w, uint64_t call,
                       uint8_t *buf, size_t m, size_t seg)
{
	int N = h->nnodes, s, rc;
	size_t most = seg ? seg : m / (size_t)N + 1, slo, slen, rlo, rlen;
	uint8_t *in = hier__scratch(h, SCR_NET, 2 * most * w->es), *tmp;
	struct shmcoll_ring_step st;

	if (!in)
		return hier__oom(h, fn, 2 * most * w->es);
	tmp = in + most * w->es;
	for (s = 0; s < N - 1; s++) {
		shmcoll__ring_rs(h->node, N, s, &st);
		block(m, N, st.send, seg, &slo, &slen);
		block(m, N, st.recv, seg, &rlo, &rlen);
		rc = hier__sendrecv(h, fn, call, st.to, buf + slo * w->es, slen * w->es, st.from,
		                    in, rlen * w->es);
		if (rc)
			return rc;
		fold2(w, buf + rlo * w->es, in, buf + rlo * w->es, tmp, rlen);
	}
	return 0;
}

int hier__lead_ring_ag(struct shmcoll_hier *h, const char *fn, uint64_t call, uint8_t *buf,
                       size_t m, size_t es, size_t seg)
{
	int N = h->nnodes, s, rc;
	size_t slo, slen, rlo, rlen;
	struct shmcoll_ring_step st;

	for (s = 0; s < N - 1; s++) {
		shmcoll__ring_ag(h->node, N, s, &st);
		block(m, N, st.send, seg, &slo, &slen);
		block(m, N, st.recv, seg, &rlo, &rlen);
		rc = hier__sendrecv(h, fn, call, st.to, buf + slo * es, slen * es, st.from,
		                    buf + rlo * es, rlen * es);
		if (rc)
			return rc;
	}
	return 0;
}

/* Recursive doubling for small vectors, a ring (reduce-scatter, allgather) for large ones -
 * even for two nodes, where both move the same bytes: two exchanges of half the vector
 * measured faster than one of all of it (2 x 2 ranks, 1-16 MiB: 1.2-1.5x). */
int hier__lead_allreduce(struct shmcoll_hier *h, const char *fn, const struct wide *w,
                         uint64_t call, uint8_t *buf, size_t m, uint8_t *final, uint8_t **res)
{
	size_t lo, len;
	int rc;

	if (m * w->es < LEAD_RING_MIN || m < (size_t)h->nnodes)
		return lead_rd(h, fn, w, call, buf, m, final, res);
	rc = hier__lead_ring_rs(h, fn, w, call, buf, m, 0);
	if (rc)
		return rc;
	/* The allgather fills final straight from the wire: only this node's own segment is
	 * copied there. */
	*res = final ? final : buf;
	if (final) {
		shmcoll__segment(m, h->nnodes, h->node, &lo, &len);
		memcpy(final + lo * w->es, buf + lo * w->es, len * w->es);
	}
	return hier__lead_ring_ag(h, fn, call, *res, m, w->es, 0);
}
