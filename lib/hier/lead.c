/* lead.c - the leaders' algorithms: plain transfers, recursive doubling and the ring
 * (lib/sched has their plans), each a sequence of exchanges with folds between them, kept in
 * a struct lead so it can stop at an exchange in flight and resume there (impl.h). */
#include <sched.h>
#include <string.h>

#include "lib/core/progress.h"
#include "lib/hier/impl.h"

/* Leaders: recursive doubling below, ring from here on. */
#define LEAD_RING_MIN (64u << 10)

/* Resume points; 0 is the start. A plain transfer needs none: xchg knows from posted. */
enum { AT_EXTRA_SEND = 1, AT_EXTRA_RECV, AT_FOLD_EXTRA, AT_ROUND, AT_ANSWER, AT_RS, AT_AG };

void hier__lead_xfer(struct lead *l, const char *fn, struct shmcoll_xfer *x, int nx)
{
	l->kind = LEAD_XFER;
	l->head.at = 0;
	l->posted = 0;
	l->fn = fn;
	l->x = x;
	l->nx = nx;
}

static void lead_init(struct lead *l, int kind, const char *fn, const struct wide *w, uint64_t call,
                      uint8_t *buf, size_t m)
{
	l->kind = kind;
	l->head.at = 0;
	l->posted = 0;
	l->fn = fn;
	l->w = *w;
	l->call = call;
	l->buf = buf;
	l->m = m;
	l->seg = 0;
	l->final = NULL;
	l->res = buf;
}

void hier__lead_allreduce(struct lead *l, const char *fn, const struct wide *w, uint64_t call,
                          uint8_t *buf, size_t m, uint8_t *final)
{
	lead_init(l, LEAD_ALLREDUCE, fn, w, call, buf, m);
	l->final = final;
}

void hier__lead_rs(struct lead *l, const char *fn, const struct wide *w, uint64_t call,
                   uint8_t *buf, size_t m, size_t seg)
{
	lead_init(l, LEAD_RS, fn, w, call, buf, m);
	l->seg = seg;
}

void hier__lead_ag(struct lead *l, const char *fn, uint64_t call, uint8_t *buf, size_t m, size_t es,
                   size_t seg)
{
	struct wide bytes = {.mode = W_NATIVE, .dt = SHMCOLL_UINT8, .es = es, .mult = 1};

	lead_init(l, LEAD_AG, fn, &bytes, call, buf, m);
	l->seg = seg;
}

/* Moves x[0..nx): posts them the first time, then completes them (blocking) or sees how far
 * they got. */
static int xchg(struct shmcoll_hier *h, struct lead *l, struct shmcoll_xfer *x, int nx)
{
	char err[SHMCOLL_ERR_LEN - 64];
	int rc = 0, done = 1;

	if (!l->posted) {
		rc = shmcoll__net_post(h->net, x, nx, err, sizeof(err));
		l->posted = rc == 0;
	}
	/* MPI's progress rule: while other communicators of the process have work, a blocking
	 * exchange is tested between passes over them (yielding), and slept on only once they
	 * have none (lib/core/progress.h). */
	if (rc == 0 && l->head.blocking) {
		while (shmcoll__progress_all()) {
			rc = shmcoll__net_test(h->net, &done, err, sizeof(err));
			if (rc || done)
				break;
			sched_yield();
		}
		/* (After a test that completed them, the wait returns at once.) */
		if (rc == 0)
			rc = shmcoll__net_wait(h->net, err, sizeof(err));
		done = 1;
	} else if (rc == 0) {
		rc = shmcoll__net_test(h->net, &done, err, sizeof(err));
	}
	if (rc == 0 && !done)
		return SHMCOLL_PENDING;
	l->posted = 0;
	if (rc == 0)
		return 0;
	hier__fail(h, rc, "%s: node %d's leader: %s", l->fn, h->node, err);
	return hier__broken(h, rc);
}

/* Describes in h->px one send of slen bytes to node `to` and one receive of rlen from node
 * `from` (either -1: none), in that order. */
static void sendrecv(struct shmcoll_hier *h, const struct lead *l, int to, const void *sbuf,
                     size_t slen, int from, void *rbuf, size_t rlen)
{
	int nx = 0;

	if (to >= 0)
		h->px[nx++] = (struct shmcoll_xfer){to, XFER_SEND, (void *)sbuf, slen, l->call, 0};
	if (from >= 0)
		h->px[nx++] = (struct shmcoll_xfer){from, XFER_RECV, rbuf, rlen, l->call, 0};
}

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
static int lead_rd(struct shmcoll_hier *h, struct lead *l)
{
	const struct wide *w = &l->w;
	size_t bytes = l->m * w->es;
	const void *srcs[2];
	uint8_t *dst;
	int peer, rc;

	switch (l->head.at) {
	case AT_EXTRA_SEND:
		goto extra_send;
	case AT_EXTRA_RECV:
		goto extra_recv;
	case AT_FOLD_EXTRA:
		goto fold_extra;
	case AT_ROUND:
		goto round;
	case AT_ANSWER:
		goto answer;
	}
	l->in = hier__scratch(h, SCR_NET, 2 * bytes);
	if (!l->in)
		return hier__oom(h, l->fn, 2 * bytes);
	l->other = l->in + bytes;
	l->cur = l->buf;
	shmcoll__rd_plan(h->node, h->nnodes, &l->rd);
	/* The nodes past the largest power of two fold into a partner first and get the
	 * result from it last. */
	if (l->rd.is_extra) {
		l->res = l->final ? l->final : l->buf;
		sendrecv(h, l, l->rd.extra, l->buf, bytes, -1, NULL, 0);
	extra_send:
		rc = xchg(h, l, h->px, 1);
		if (rc)
			return shmcoll__suspend_at(&l->head, AT_EXTRA_SEND, rc);
		sendrecv(h, l, -1, NULL, 0, l->rd.extra, l->res, bytes);
	extra_recv:
		rc = xchg(h, l, h->px, 1);
		return shmcoll__suspend_at(&l->head, AT_EXTRA_RECV, rc);
	}
	if (l->rd.extra >= 0) {
		sendrecv(h, l, -1, NULL, 0, l->rd.extra, l->in, bytes);
	fold_extra:
		rc = xchg(h, l, h->px, 1);
		if (rc)
			return shmcoll__suspend_at(&l->head, AT_FOLD_EXTRA, rc);
		srcs[0] = l->cur;
		srcs[1] = l->in;
		w->fold(l->other, srcs, 2, l->m);
		l->cur = l->other;
		l->other = l->buf;
	}
	for (l->r = 0; l->r < l->rd.rounds; l->r++) {
		peer = shmcoll__rd_peer(h->node, l->r);
		sendrecv(h, l, peer, l->cur, bytes, peer, l->in, bytes);
	round:
		rc = xchg(h, l, h->px, 2);
		if (rc)
			return shmcoll__suspend_at(&l->head, AT_ROUND, rc);
		peer = shmcoll__rd_peer(h->node, l->r);
		dst = l->r == l->rd.rounds - 1 && l->final ? l->final : l->other;
		/* The lower node's partial first, on both sides: the same bits. */
		srcs[h->node < peer ? 0 : 1] = l->cur;
		srcs[h->node < peer ? 1 : 0] = l->in;
		w->fold(dst, srcs, 2, l->m);
		l->other = l->cur;
		l->cur = dst;
	}
	l->res = l->cur;
	if (l->rd.extra < 0)
		return 0;
	sendrecv(h, l, l->rd.extra, l->cur, bytes, -1, NULL, 0);
answer:
	rc = xchg(h, l, h->px, 1);
	return shmcoll__suspend_at(&l->head, AT_ANSWER, rc);
}

/* Block k's elements: [k * seg, +seg) if seg, else the even segment k of m. */
static void block(const struct lead *l, int N, int k, size_t *lo, size_t *len)
{
	if (l->seg) {
		*lo = (size_t)k * l->seg;
		*len = l->seg;
	} else {
		shmcoll__segment(l->m, N, k, lo, len);
	}
}

/* Ring reduce-scatter: node n ends holding the fold of block n of every node's buf. */
static int lead_rs(struct shmcoll_hier *h, struct lead *l)
{
	const struct wide *w = &l->w;
	int N = h->nnodes, rc;
	size_t most = l->seg ? l->seg : l->m / (size_t)N + 1, slo, slen, rlo, rlen;
	struct shmcoll_ring_step st;

	if (l->head.at == AT_RS)
		goto step;
	l->in = hier__scratch(h, SCR_NET, 2 * most * w->es);
	if (!l->in)
		return hier__oom(h, l->fn, 2 * most * w->es);
	for (l->s = 0; l->s < N - 1; l->s++) {
		shmcoll__ring_rs(h->node, N, l->s, &st);
		block(l, N, st.send, &slo, &slen);
		block(l, N, st.recv, &rlo, &rlen);
		sendrecv(h, l, st.to, l->buf + slo * w->es, slen * w->es, st.from, l->in,
		         rlen * w->es);
	step:
		rc = xchg(h, l, h->px, 2);
		if (rc)
			return shmcoll__suspend_at(&l->head, AT_RS, rc);
		shmcoll__ring_rs(h->node, N, l->s, &st);
		block(l, N, st.recv, &rlo, &rlen);
		fold2(w, l->buf + rlo * w->es, l->in, l->buf + rlo * w->es, l->in + most * w->es,
		      rlen);
	}
	return 0;
}

/* Ring allgather: node n has block n and ends with all of them. */
static int lead_ag(struct shmcoll_hier *h, struct lead *l)
{
	size_t es = l->w.es, slo, slen, rlo, rlen;
	int N = h->nnodes, rc;
	struct shmcoll_ring_step st;

	if (l->head.at == AT_AG)
		goto step;
	for (l->s = 0; l->s < N - 1; l->s++) {
		shmcoll__ring_ag(h->node, N, l->s, &st);
		block(l, N, st.send, &slo, &slen);
		block(l, N, st.recv, &rlo, &rlen);
		sendrecv(h, l, st.to, l->buf + slo * es, slen * es, st.from, l->buf + rlo * es,
		         rlen * es);
	step:
		rc = xchg(h, l, h->px, 2);
		if (rc)
			return shmcoll__suspend_at(&l->head, AT_AG, rc);
	}
	return 0;
}

/* Recursive doubling for small vectors, a ring (reduce-scatter, allgather) for large ones -
 * even for two nodes, where both move the same bytes: two exchanges of half the vector
 * measured faster than one of all of it (2 x 2 ranks, 1-16 MiB: 1.2-1.5x). The allgather
 * fills final straight from the wire: only this node's own segment is copied there. */
static int lead_allreduce(struct shmcoll_hier *h, struct lead *l)
{
	size_t lo, len;
	int rc;

	if (l->head.at == 0)
		l->ring = l->m * l->w.es >= LEAD_RING_MIN && l->m >= (size_t)h->nnodes;
	if (!l->ring)
		return lead_rd(h, l);
	if (l->head.at != AT_AG) {
		rc = lead_rs(h, l);
		if (rc)
			return rc;
		l->head.at = 0;
		l->res = l->final ? l->final : l->buf;
		if (l->final) {
			shmcoll__segment(l->m, h->nnodes, h->node, &lo, &len);
			memcpy(l->final + lo * l->w.es, l->buf + lo * l->w.es, len * l->w.es);
		}
		l->buf = l->res;
	}
	return lead_ag(h, l);
}

int hier__lead_advance(struct shmcoll_hier *h, struct lead *l)
{
	switch (l->kind) {
	case LEAD_XFER:
		return xchg(h, l, l->x, l->nx);
	case LEAD_RS:
		return lead_rs(h, l);
	case LEAD_AG:
		return lead_ag(h, l);
	default:
		return lead_allreduce(h, l);
	}
}
