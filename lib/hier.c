/* hier.c - one communicator over the ranks of several nodes: shared memory
 * inside each node (a node communicator of its own), and one leader per node
 * (its local rank 0) that talks to the other nodes' leaders over net.c.
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
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include "lib/hier.h"
#include "lib/internal.h"
#include "lib/net.h"

#define CHUNK_BYTES SHMCOLL_HIER_CHUNK_BYTES
/* Leaders' allreduce: recursive doubling below, ring from here on. */
#define LEAD_RING_MIN (64u << 10)
/* How long a leader with a CPU of its own spins on its sockets before it
 * sleeps: a few times the 14-25 us a sleeper on an idle vCPU takes to wake,
 * which is more than a small exchange over loopback costs in all. */
#define NET_SPIN_NS 50000
/* local_move's chunks: the bystanders' scratch. */
#define MOVE_BYTES (1u << 20)

enum { SCR_IN, SCR_RES, SCR_TMP, SCR_NET, SCR_MOVE, SCR_COUNT };

struct shmcoll_hier {
	shmcoll_comm *local;     /* this node's ranks */
	struct shmcoll_net *net; /* the leader's connections, else NULL */
	int nnodes, node, nproc, lrank;
	void *scr[SCR_COUNT]; /* working memory, grown on demand, kept */
	size_t cap[SCR_COUNT];
	int xmode; /* how the next leaders' exchange runs: X_RUN, ... */
	struct shmcoll_xfer px[2 * SHMCOLL_NODES_MAX]; /* a posted exchange's transfers */
};

/* How a leaders' exchange (sendrecv, lead_post) runs. An algorithm of the
 * leaders is a sequence of exchanges with local work between them; to overlap
 * its network time with the node's next stage, it runs twice:
 *   X_POST    it stops at its first exchange, which stays in flight (the
 *             exchange returns POSTED, which every algorithm passes up as it
 *             does an error);
 *   X_RESUME  it runs from the start again, and its first exchange waits
 *             for the one in flight instead of starting it.
 * So whatever an algorithm does before its first exchange must give the same
 * result twice (it only sizes scratch and picks peers). */
enum { X_RUN, X_POST, X_RESUME };
#define POSTED 1

/* How a reduction travels between its stages. */
enum { W_NATIVE, W_F32, W_QR };
struct wide {
	int mode;
	shmcoll_dtype dt; /* the type stages 1 and 2 reduce */
	shmcoll_op op;
	size_t es;   /* its element size */
	size_t mult; /* wide elements per element */
	shmcoll__reduce_fn fold;
};

static struct wide widen(shmcoll_dtype dt, shmcoll_op op)
{
	struct wide w = {W_NATIVE, dt, op == SHMCOLL_AVG ? SHMCOLL_SUM : op, 0, 1, NULL};

	if ((dt == SHMCOLL_FLOAT16 || dt == SHMCOLL_BFLOAT16) &&
	    (op == SHMCOLL_SUM || op == SHMCOLL_PROD || op == SHMCOLL_AVG)) {
		w.mode = W_F32;
		w.dt = SHMCOLL_FLOAT32;
	} else if (op == SHMCOLL_AVG && dt != SHMCOLL_FLOAT32 && dt != SHMCOLL_FLOAT64) {
		w.mode = W_QR;
		w.dt = dt == SHMCOLL_UINT64 ? SHMCOLL_UINT64 : SHMCOLL_INT64;
		w.mult = 2;
	}
	w.es = shmcoll_dtype_size(w.dt);
	w.fold = shmcoll__reduce_lookup(w.dt, w.op);
	return w;
}

/* Callers' buffers may sit at any address (the contract asks no alignment),
 * so their elements are read and written through memcpy. */
static uint16_t u16_at(const void *v, size_t i)
{
	uint16_t x;

	memcpy(&x, (const uint8_t *)v + 2 * i, 2);
	return x;
}

/* Loads element i of a vector of integer type dt as int64 (uint64 as is). */
static int64_t int_at(const void *v, shmcoll_dtype dt, size_t i)
{
	const uint8_t *p = (const uint8_t *)v + i * shmcoll_dtype_size(dt);
	int32_t i32;
	uint32_t u32;
	int64_t i64;

	switch (dt) {
	case SHMCOLL_INT8:
		return (int8_t)*p;
	case SHMCOLL_UINT8:
		return *p;
	case SHMCOLL_INT32:
		memcpy(&i32, p, 4);
		return i32;
	case SHMCOLL_UINT32:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&i64, p, 8);
		return i64;
	}
}

static void int_put(void *v, shmcoll_dtype dt, size_t i, int64_t x)
{
	uint8_t *p = (uint8_t *)v + i * shmcoll_dtype_size(dt);
	int32_t i32 = (int32_t)x;

	switch (dt) {
	case SHMCOLL_INT8:
	case SHMCOLL_UINT8:
		*p = (uint8_t)x;
		break;
	case SHMCOLL_INT32:
	case SHMCOLL_UINT32:
		memcpy(p, &i32, 4);
		break;
	default:
		memcpy(p, &x, 8);
		break;
	}
}

/* The wide form of n elements of src (dtype dt) into dst. W_QR: each x as
 * the pair (q, r) with x = q * S + r and 0 <= r < S, interleaved, so a sum
 * of pairs holds the exact sum of the xs as (sum q) * S + (sum r). */
static void wide_in(const struct wide *w, void *dst, const void *src, size_t n, shmcoll_dtype dt,
                    uint64_t S)
{
	size_t i;

	if (w->mode == W_F32) {
		float (*cvt)(uint16_t) =
		    dt == SHMCOLL_FLOAT16 ? shmcoll__f16_to_f32 : shmcoll__bf16_to_f32;

		for (i = 0; i < n; i++)
			((float *)dst)[i] = cvt(u16_at(src, i));
		return;
	}
	if (dt == SHMCOLL_UINT64) {
		for (i = 0; i < n; i++) {
			uint64_t x = (uint64_t)int_at(src, dt, i);

			((uint64_t *)dst)[2 * i] = x / S;
			((uint64_t *)dst)[2 * i + 1] = x % S;
		}
		return;
	}
	for (i = 0; i < n; i++) {
		int64_t x = int_at(src, dt, i), q = x / (int64_t)S, r = x % (int64_t)S;

		if (r < 0) {
			r += (int64_t)S;
			q--;
		}
		((int64_t *)dst)[2 * i] = q;
		((int64_t *)dst)[2 * i + 1] = r;
	}
}

/* The final n elements (dtype dt, op) from the wide result src: AVG divided
 * by S (integers truncated toward zero), 16-bit floats rounded once. dst may
 * be src for W_NATIVE. */
static void wide_out(const struct wide *w, void *dst, const void *src, size_t n, shmcoll_dtype dt,
                     shmcoll_op op, uint64_t S)
{
	size_t i;

	if (w->mode == W_F32) {
		uint16_t (*cvt)(float) =
		    dt == SHMCOLL_FLOAT16 ? shmcoll__f32_to_f16 : shmcoll__f32_to_bf16;

		for (i = 0; i < n; i++) {
			float x = ((const float *)src)[i];
			uint16_t h = cvt(op == SHMCOLL_AVG ? x / (float)S : x);

			memcpy((uint8_t *)dst + 2 * i, &h, 2);
		}
		return;
	}
	if (w->mode == W_NATIVE) {
		if (dst != src)
			memcpy(dst, src, n * w->es);
		if (op != SHMCOLL_AVG)
			return;
		for (i = 0; i < n; i++) {
			uint8_t *p = (uint8_t *)dst + i * w->es;

			if (dt == SHMCOLL_FLOAT32) {
				float f;

				memcpy(&f, p, 4);
				f /= (float)S;
				memcpy(p, &f, 4);
			} else {
				double d;

				memcpy(&d, p, 8);
				d /= (double)S;
				memcpy(p, &d, 8);
			}
		}
		return;
	}
	if (dt == SHMCOLL_UINT64) {
		for (i = 0; i < n; i++) {
			const uint64_t *p = (const uint64_t *)src + 2 * i;

			int_put(dst, dt, i, (int64_t)(p[0] + p[1] / S));
		}
		return;
	}
	for (i = 0; i < n; i++) {
		const int64_t *p = (const int64_t *)src + 2 * i;
		/* sum = S * q + r with 0 <= r: floor(sum / S) = q + r / S, and
		 * truncation toward zero is one more when that is negative and
		 * inexact. The sum of the qs may have wrapped (each q rounds
		 * down, so for values near the type's minimum it can fall below
		 * it) but floor(sum / S) fits: added modulo 2^64, it is exact. */
		int64_t f = (int64_t)((uint64_t)p[0] + (uint64_t)(p[1] / (int64_t)S));
		int64_t rem = p[1] % (int64_t)S;

		int_put(dst, dt, i, f + (f < 0 && rem != 0));
	}
}

/* bytes rounded up so that what follows them in one scratch is aligned. */
static size_t align16(size_t bytes)
{
	return (bytes + 15) & ~(size_t)15;
}

/* Working memory i of at least bytes, or NULL. */
static void *scratch(struct shmcoll_hier *h, int i, size_t bytes)
{
	void *p;

	if (bytes <= h->cap[i])
		return h->scr[i];
	p = realloc(h->scr[i], bytes);
	if (!p)
		return NULL;
	h->scr[i] = p;
	h->cap[i] = bytes;
	return p;
}

/* The word every frame of a call carries: both leaders must agree on it. */
static uint64_t call_word(uint32_t kind, shmcoll_dtype dt, shmcoll_op op, int root, size_t count)
{
	return (uint64_t)kind | (uint64_t)dt << 8 | (uint64_t)op << 16 |
	       (uint64_t)((uint32_t)(root + 1) & 0xffffff) << 24 | (uint64_t)(count & 0xffff) << 48;
}

/* Records a failure and breaks everything: the node communicator (its ranks
 * wake), the leader's connections (the other nodes learn), this one. */
static int fail(shmcoll_comm *c, int rc)
{
	struct shmcoll_hier *h = c->hier;
	int why = rc == -ENOMEM ? ECANCELED : -rc;

	char err[64];

	atomic_store(&c->broken, why);
	h->xmode = X_RUN;
	if (h->net) {
		shmcoll__net_shutdown(h->net);
		/* An exchange in flight writes into working memory: reap it. */
		shmcoll__net_wait(h->net, err, sizeof(err));
	}
	shmcoll__break(h->local, why);
	if (!c->cause[0])
		snprintf(c->cause, sizeof(c->cause), "%s", c->err);
	return rc;
}

/* Whether a node broken for a dead peer was broken by its leader, alive: then
 * it was the other nodes that failed (the leader breaks its node when its
 * connections do; a rank of the node that dies is named instead), and the
 * node's own message ("rank 0 died") would mislead. */
static int broken_by_live_leader(const struct shmcoll_hier *h)
{
	uint32_t word = load_relaxed(&h->local->arena.hdr->aborted);
	pid_t pid;

	if (h->lrank == 0 || (word >> 8) != 1)
		return 0;
	pid = shmcoll__peer_pid(h->local, 0);
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* A node-stage result: rc, with the node communicator's message as ours. */
static int local_rc(shmcoll_comm *c, int rc)
{
	struct shmcoll_hier *h = c->hier;

	if (rc >= 0)
		return rc;
	if (rc == -EOWNERDEAD && broken_by_live_leader(h))
		shmcoll__fail(c, rc,
		              "node %d: its leader (rank %d) lost its connection to another node: "
		              "a rank or the leader there died or aborted",
		              h->node, h->node * h->nproc);
	else
		shmcoll__fail(c, rc, "node %d: %s", h->node, shmcoll_last_error(h->local));
	return fail(c, rc);
}

static int oom(shmcoll_comm *c, const char *fn, size_t bytes)
{
	shmcoll__fail(c, -ENOMEM, "%s: out of memory for %zu bytes of working memory", fn, bytes);
	return fail(c, -ENOMEM);
}

/* Runs nx transfers among the leaders (h->px), as h->xmode says: at once,
 * posted (returns POSTED), or as the wait for the posted ones. */
static int net_xchg(shmcoll_comm *c, const char *fn, int nx)
{
	struct shmcoll_hier *h = c->hier;
	char err[SHMCOLL_ERR_LEN - 64];
	int mode = h->xmode, rc;

	h->xmode = X_RUN;
	if (mode == X_RESUME)
		rc = shmcoll__net_wait(h->net, err, sizeof(err));
	else if (mode == X_POST)
		rc = shmcoll__net_post(h->net, h->px, nx, err, sizeof(err));
	else
		rc = shmcoll__net_run(h->net, h->px, nx, err, sizeof(err));
	if (rc >= 0)
		return mode == X_POST ? POSTED : 0;
	shmcoll__fail(c, rc, "%s: node %d's leader: %s", fn, h->node, err);
	return fail(c, rc);
}

/* Runs nx transfers among the leaders at once. */
static int net_run(shmcoll_comm *c, const char *fn, struct shmcoll_xfer *x, int nx)
{
	memcpy(c->hier->px, x, sizeof(*x) * (size_t)nx);
	return net_xchg(c, fn, nx);
}

/* Sends slen bytes to node `to` and receives rlen from node `from` (either
 * -1: none), at once; or posts or resumes that (h->xmode). */
static int sendrecv(shmcoll_comm *c, const char *fn, uint64_t call, int to, const void *sbuf,
                    size_t slen, int from, void *rbuf, size_t rlen)
{
	struct shmcoll_xfer *x = c->hier->px;
	int nx = 0;

	if (to >= 0)
		x[nx++] = (struct shmcoll_xfer){to, XFER_SEND, (void *)sbuf, slen, call, 0};
	if (from >= 0)
		x[nx++] = (struct shmcoll_xfer){from, XFER_RECV, rbuf, rlen, call, 0};
	return net_xchg(c, fn, nx);
}

/* buf = fold(a, b) over m wide elements, a first; tmp holds m of them. */
static void fold2(const struct wide *w, void *buf, const void *a, const void *b, void *tmp,
                  size_t m)
{
	const void *srcs[2] = {a, b};

	w->fold(tmp, srcs, 2, m);
	memcpy(buf, tmp, m * w->es);
}

/* Leaders: the fold over every node's buf (m wide elements), the same bits
 * on every node, by recursive doubling. Each round folds into the other of
 * buf and a scratch vector, so nothing is copied; the last fold goes to
 * `final` instead if given (distinct from buf). *res says where the result
 * is: final, buf, or scratch. */
static int lead_allreduce_rd(shmcoll_comm *c, const char *fn, const struct wide *w, uint64_t call,
                             uint8_t *buf, size_t m, uint8_t *final, uint8_t **res)
{
	struct shmcoll_hier *h = c->hier;
	int N = h->nnodes, n = h->node, p2 = 1, mask, rc;
	size_t bytes = m * w->es;
	uint8_t *in = scratch(h, SCR_NET, 2 * bytes), *cur = buf, *other;
	const void *srcs[2];

	if (!in)
		return oom(c, fn, 2 * bytes);
	other = in + bytes;
	while (p2 * 2 <= N)
		p2 *= 2;
	/* The nodes past the largest power of two fold into a partner first
	 * and get the result from it last. */
	if (n >= p2) {
		*res = final ? final : buf;
		rc = sendrecv(c, fn, call, n - p2, buf, bytes, -1, NULL, 0);
		return rc ? rc : sendrecv(c, fn, call, -1, NULL, 0, n - p2, *res, bytes);
	}
	if (n + p2 < N) {
		rc = sendrecv(c, fn, call, -1, NULL, 0, n + p2, in, bytes);
		if (rc)
			return rc;
		srcs[0] = cur;
		srcs[1] = in;
		w->fold(other, srcs, 2, m);
		cur = other;
		other = buf;
	}
	for (mask = 1; mask < p2; mask <<= 1) {
		int peer = n ^ mask;
		uint8_t *dst = mask * 2 == p2 && final ? final : other;

		rc = sendrecv(c, fn, call, peer, cur, bytes, peer, in, bytes);
		if (rc)
			return rc;
		/* The lower node's partial first, on both sides: the same bits. */
		srcs[n < peer ? 0 : 1] = cur;
		srcs[n < peer ? 1 : 0] = in;
		w->fold(dst, srcs, 2, m);
		other = cur;
		cur = dst;
	}
	*res = cur;
	if (n + p2 < N)
		return sendrecv(c, fn, call, n + p2, cur, bytes, -1, NULL, 0);
	return 0;
}

/* Segment k of N over m elements: [*lo, *lo + *len). */
static void segment(size_t m, int N, int k, size_t *lo, size_t *len)
{
	*lo = m * (size_t)k / (size_t)N;
	*len = m * (size_t)(k + 1) / (size_t)N - *lo;
}

/* Ring reduce-scatter: node n ends holding the fold of segment n of every
 * node's buf (segments of `seg` elements each if seg, else split evenly). */
static int lead_ring_rs(shmcoll_comm *c, const char *fn, const struct wide *w, uint64_t call,
                        uint8_t *buf, size_t m, size_t seg)
{
	struct shmcoll_hier *h = c->hier;
	int N = h->nnodes, n = h->node, s, rc;
	int next = (n + 1) % N, prev = (n + N - 1) % N;
	size_t most = seg ? seg : m / (size_t)N + 1;
	uint8_t *in = scratch(h, SCR_NET, 2 * most * w->es), *tmp;

	if (!in)
		return oom(c, fn, 2 * most * w->es);
	tmp = in + most * w->es;
	for (s = 0; s < N - 1; s++) {
		int ks = (n - s - 1 + 2 * N) % N, kr = (n - s - 2 + 2 * N) % N;
		size_t slo, slen, rlo, rlen;

		if (seg) {
			slo = (size_t)ks * seg, slen = seg;
			rlo = (size_t)kr * seg, rlen = seg;
		} else {
			segment(m, N, ks, &slo, &slen);
			segment(m, N, kr, &rlo, &rlen);
		}
		rc = sendrecv(c, fn, call, next, buf + slo * w->es, slen * w->es, prev, in,
		              rlen * w->es);
		if (rc)
			return rc;
		fold2(w, buf + rlo * w->es, in, buf + rlo * w->es, tmp, rlen);
	}
	return 0;
}

/* Ring allgather of byte blocks: node n has block n (at blk(n)) and ends with
 * all of them. */
static int lead_ring_ag(shmcoll_comm *c, const char *fn, uint64_t call, uint8_t *buf, size_t m,
                        size_t es, size_t seg)
{
	struct shmcoll_hier *h = c->hier;
	int N = h->nnodes, n = h->node, s, rc;
	int next = (n + 1) % N, prev = (n + N - 1) % N;

	for (s = 0; s < N - 1; s++) {
		int ks = (n - s + N) % N, kr = (n - s - 1 + N) % N;
		size_t slo, slen, rlo, rlen;

		if (seg) {
			slo = (size_t)ks * seg, slen = seg;
			rlo = (size_t)kr * seg, rlen = seg;
		} else {
			segment(m, N, ks, &slo, &slen);
			segment(m, N, kr, &rlo, &rlen);
		}
		rc = sendrecv(c, fn, call, next, buf + slo * es, slen * es, prev, buf + rlo * es,
		              rlen * es);
		if (rc)
			return rc;
	}
	return 0;
}

/* Leaders: the fold over every node's buf (m wide elements), recursive
 * doubling for small vectors, a ring (reduce-scatter, allgather) for large
 * ones -- even for two nodes, where both move the same bytes: two exchanges
 * of half the vector measured faster than one of all of it (2 x 2 ranks,
 * 1-16 MiB: 1.2-1.5x). *res says where the result is: final if given and
 * used, buf, or scratch. */
static int lead_allreduce(shmcoll_comm *c, const char *fn, const struct wide *w, uint64_t call,
                          uint8_t *buf, size_t m, uint8_t *final, uint8_t **res)
{
	int N = c->hier->nnodes, rc;

	if (m * w->es < LEAD_RING_MIN || m < (size_t)N)
		return lead_allreduce_rd(c, fn, w, call, buf, m, final, res);
	rc = lead_ring_rs(c, fn, w, call, buf, m, 0);
	if (rc)
		return rc;
	/* The allgather fills final straight from the wire: only this node's
	 * own segment is copied there. */
	*res = final ? final : buf;
	if (final) {
		size_t lo, len;

		segment(m, N, c->hier->node, &lo, &len);
		memcpy(final + lo * w->es, buf + lo * w->es, len * w->es);
	}
	return lead_ring_ag(c, fn, call, *res, m, w->es, 0);
}

/* Moves bytes from local rank `from` (src) to local rank `to` (dst) through
 * node bcasts: every rank of the node takes part, the others into scratch. */
static int local_move(shmcoll_comm *c, const char *fn, int from, int to, const uint8_t *src,
                      uint8_t *dst, size_t bytes)
{
	struct shmcoll_hier *h = c->hier;
	uint8_t *bin = NULL;
	size_t off, n;
	int rc;

	if (from == to || bytes == 0)
		return 0;
	if (h->lrank != from && h->lrank != to) {
		bin = scratch(h, SCR_MOVE, min_size(bytes, MOVE_BYTES));
		if (!bin)
			return oom(c, fn, min_size(bytes, MOVE_BYTES));
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
		rc = local_rc(c, shmcoll_bcast(p, n, SHMCOLL_UINT8, from, h->local));
		if (rc < 0)
			return rc;
	}
	return 0;
}

int shmcoll__hier_barrier(shmcoll_comm *c)
{
	const char *fn = "shmcoll_barrier";
	struct shmcoll_hier *h = c->hier;
	uint64_t call = call_word(KIND_BARRIER, 0, 0, -1, 0);
	int rc, k;

	rc = local_rc(c, shmcoll_barrier(h->local));
	if (rc < 0)
		return rc;
	if (h->lrank == 0) {
		/* Dissemination: after round k every node has heard, directly or
		 * not, from the 2^(k+1) - 1 nodes before it. */
		for (k = 1; k < h->nnodes; k <<= 1) {
			rc = sendrecv(c, fn, call, (h->node + k) % h->nnodes, NULL, 0,
			              (h->node - k + h->nnodes) % h->nnodes, NULL, 0);
			if (rc < 0)
				return rc;
		}
	}
	return local_rc(c, shmcoll_barrier(h->local));
}

/* Elements per chunk of a reduction of w. */
static size_t reduce_chunk(const struct wide *w)
{
	return CHUNK_BYTES / (w->es * w->mult);
}

/* The allreduce of a chunk of wres's among the leaders, posted (h->xmode
 * X_POST) or run or resumed: the result ends in *res (the chunk of out if
 * the types allow). Returns 0, POSTED, or an error. */
static int allreduce_lead(shmcoll_comm *c, const struct wide *w, uint64_t call, uint8_t *wres,
                          size_t m, uint8_t *out, uint8_t **res)
{
	return lead_allreduce(c, "shmcoll_allreduce", w, call, wres, m,
	                      w->mode == W_NATIVE ? out : NULL, res);
}

/* Pipelined: the leader posts chunk k's exchange among the leaders and
 * resumes it only after the node has reduced chunk k+1, then posts chunk
 * k+1's before the node bcasts chunk k, so each chunk's network time
 * overlaps the node's work on its neighbours. Every rank of a node runs the
 * node stages in the same order: reduce 0, reduce 1, bcast 0, reduce 2,
 * bcast 1, ... */
int shmcoll__hier_allreduce(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t count,
                            shmcoll_dtype dt, shmcoll_op op)
{
	const char *fn = "shmcoll_allreduce";
	struct shmcoll_hier *h = c->hier;
	struct wide w = widen(dt, op);
	size_t es = shmcoll_dtype_size(dt), cap = reduce_chunk(&w), K, k, wa;
	uint64_t call = call_word(KIND_ALLREDUCE, dt, op, -1, count), S = (uint64_t)c->size;
	uint8_t *wres[2] = {NULL, NULL}, *res[2] = {NULL, NULL};
	int rc, lead = h->lrank == 0, posted[2] = {0, 0};

	K = (count + cap - 1) / cap;
	wa = align16(min_size(cap, count) * w.mult * w.es);
	if (lead && K) {
		wres[0] = scratch(h, SCR_RES, 2 * wa);
		if (!wres[0])
			return oom(c, fn, 2 * wa);
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
				win = scratch(h, SCR_IN, m * w.es);
				if (!win)
					return oom(c, fn, m * w.es);
				wide_in(&w, win, send + lo * es, n, dt, S);
			}
			rc = local_rc(c, shmcoll_reduce(win, wres[b], m, w.dt, w.op, 0, h->local));
			if (rc < 0)
				return rc;
		}
		if (lead && k >= 1) {
			if (posted[pb]) {
				h->xmode = X_RESUME;
				rc = allreduce_lead(c, &w, call, wres[pb], pn * w.mult, pout,
				                    &res[pb]);
				if (rc < 0)
					return rc;
			}
			wide_out(&w, pout, res[pb], pn, dt, op, S);
		}
		if (lead && k < K) {
			h->xmode = X_POST;
			rc = allreduce_lead(c, &w, call, wres[b], m, recv + lo * es, &res[b]);
			if (rc < 0)
				return rc;
			posted[b] = rc == POSTED;
		}
		if (k >= 1) {
			rc = local_rc(c, shmcoll_bcast(pout, pn, dt, 0, h->local));
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* Posts nx transfers among the leaders; lead_wait completes them. */
static int lead_post(shmcoll_comm *c, const char *fn, struct shmcoll_xfer *x, int nx)
{
	int rc;

	c->hier->xmode = X_POST;
	rc = net_run(c, fn, x, nx);
	return rc == POSTED ? 0 : rc;
}

/* Completes the posted transfers, if any. */
static int lead_wait(shmcoll_comm *c, const char *fn)
{
	c->hier->xmode = X_RESUME;
	return net_xchg(c, fn, 0);
}

/* Pipelined like allreduce: a node away from the root's sends chunk k while
 * it reduces chunk k+1; the root's node's leader receives chunk k+1 while
 * its node reduces chunk k. */
int shmcoll__hier_reduce(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root)
{
	const char *fn = "shmcoll_reduce";
	struct shmcoll_hier *h = c->hier;
	struct wide w = widen(dt, op);
	size_t es = shmcoll_dtype_size(dt), cap = reduce_chunk(&w), K, k;
	size_t wa = align16(min_size(cap, count) * w.mult * w.es);
	uint64_t call = call_word(KIND_REDUCE, dt, op, root, count), S = (uint64_t)c->size;
	int rc, lead = h->lrank == 0, nr = root / h->nproc, lr = root % h->nproc;
	int N = h->nnodes, q, nx = 0, home = h->node == nr;
	uint8_t *bufs = NULL;
	struct shmcoll_xfer *x = NULL;
	const void **srcs = NULL;

	K = (count + cap - 1) / cap;
	if (lead && K) {
		/* Two chunks' worth: the partial in flight and the next one, or
		 * (at home) every node's partials of two chunks; then the fold,
		 * the transfers and the fold's sources. */
		size_t parts = home ? (size_t)N : 1;
		size_t bytes =
		    2 * parts * wa + wa + sizeof(*x) * (size_t)N + sizeof(*srcs) * (size_t)N;

		bufs = scratch(h, SCR_RES, bytes);
		if (!bufs)
			return oom(c, fn, bytes);
		x = (struct shmcoll_xfer *)(bufs + 2 * parts * wa + wa);
		srcs = (const void **)(x + N);
	}
	for (k = 0; k < K; k++) {
		size_t lo = k * cap, n = min_size(cap, count - lo), m = n * w.mult, wb = m * w.es;
		uint8_t *out = c->rank == root ? recv + lo * es : NULL,
		        *win = (uint8_t *)send + lo * es;
		uint8_t *wres = NULL;
		int b = (int)(k & 1);

		if (w.mode != W_NATIVE) {
			win = scratch(h, SCR_IN, wb);
			if (!win)
				return oom(c, fn, wb);
			wide_in(&w, win, send + lo * es, n, dt, S);
		}
		if (!home) {
			wres = lead ? bufs + (size_t)b * wa : NULL;
			rc = local_rc(c, shmcoll_reduce(win, wres, m, w.dt, w.op, 0, h->local));
			if (rc == 0 && lead) {
				rc = lead_wait(c, fn);
				x[0] = (struct shmcoll_xfer){nr, XFER_SEND, wres, wb, call, 0};
				if (rc == 0)
					rc = lead_post(c, fn, x, 1);
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
				rc = lead_wait(c, fn);
			/* Chunk k's partials: posted last round, or now. */
			for (q = 0, nx = 0; q < N && (rc == 0 && k == 0); q++)
				if (q != nr)
					x[nx++] = (struct shmcoll_xfer){
					    q, XFER_RECV, part + (size_t)q * wa, wb, call, 0};
			if (rc == 0 && k == 0)
				rc = net_run(c, fn, x, nx);
			if (rc == 0 && k + 1 < K) {
				size_t n1 = min_size(cap, count - lo - cap) * w.mult * w.es;
				uint8_t *next = bufs + (size_t)!b * (size_t)N * wa;

				for (q = 0, nx = 0; q < N; q++)
					if (q != nr)
						x[nx++] = (struct shmcoll_xfer){
						    q,  XFER_RECV, next + (size_t)q * wa,
						    n1, call,      0};
				rc = lead_post(c, fn, x, nx);
			}
			if (rc < 0)
				return rc;
			for (q = 0; q < N; q++)
				srcs[q] = q == nr ? (const void *)win : part + (size_t)q * wa;
			w.fold(fold, srcs, N, m);
			win = fold;
		}
		if (h->lrank == lr) {
			wres = w.mode == W_NATIVE ? out : scratch(h, SCR_TMP, wb);
			if (!wres)
				return oom(c, fn, wb);
		}
		rc = local_rc(c, shmcoll_reduce(win, wres, m, w.dt, w.op, lr, h->local));
		if (rc < 0)
			return rc;
		if (h->lrank == lr)
			wide_out(&w, out, wres, n, dt, op, S);
	}
	return lead ? lead_wait(c, fn) : 0;
}

/* Pipelined: the root's node's leader sends chunk k while its node bcasts
 * chunk k+1; another node's leader receives chunk k+1 while its node
 * bcasts chunk k. */
int shmcoll__hier_bcast(shmcoll_comm *c, uint8_t *buf, size_t count, shmcoll_dtype dt, int root)
{
	const char *fn = "shmcoll_bcast";
	struct shmcoll_hier *h = c->hier;
	size_t es = shmcoll_dtype_size(dt), cap = CHUNK_BYTES / es, K, k;
	uint64_t call = call_word(KIND_BCAST, dt, 0, root, count);
	int rc = 0, nr = root / h->nproc, q, nx, lead = h->lrank == 0;
	struct shmcoll_xfer *x = NULL;

	K = (count + cap - 1) / cap;
	if (lead) {
		x = scratch(h, SCR_TMP, sizeof(*x) * (size_t)h->nnodes);
		if (!x)
			return oom(c, fn, sizeof(*x) * (size_t)h->nnodes);
	}
	if (lead && h->node != nr && K)
		rc = sendrecv(c, fn, call, -1, NULL, 0, nr, buf, min_size(cap, count) * es);
	for (k = 0; k < K && rc == 0; k++) {
		size_t lo = k * cap, n = min_size(cap, count - lo);
		uint8_t *p = buf + lo * es;

		if (h->node == nr) {
			rc = local_rc(c, shmcoll_bcast(p, n, dt, root % h->nproc, h->local));
			if (rc == 0 && lead)
				rc = lead_wait(c, fn);
			for (q = 0, nx = 0; rc == 0 && lead && q < h->nnodes; q++)
				if (q != nr)
					x[nx++] =
					    (struct shmcoll_xfer){q, XFER_SEND, p, n * es, call, 0};
			if (rc == 0 && lead)
				rc = lead_post(c, fn, x, nx);
			continue;
		}
		/* Chunk k is in (received before the loop, or waited for
		 * here); chunk k+1 comes while the node bcasts k. */
		if (lead && k > 0)
			rc = lead_wait(c, fn);
		if (rc == 0 && lead && k + 1 < K) {
			x[0] = (struct shmcoll_xfer){
			    nr,   XFER_RECV, p + cap * es, min_size(cap, count - lo - cap) * es,
			    call, 0};
			rc = lead_post(c, fn, x, 1);
		}
		if (rc == 0)
			rc = local_rc(c, shmcoll_bcast(p, n, dt, 0, h->local));
	}
	if (rc == 0 && lead)
		rc = lead_wait(c, fn);
	return rc;
}

int shmcoll__hier_allgather(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t sc,
                            shmcoll_dtype dt)
{
	const char *fn = "shmcoll_allgather";
	struct shmcoll_hier *h = c->hier;
	size_t es = shmcoll_dtype_size(dt), block = (size_t)h->nproc * sc * es;
	uint64_t call = call_word(KIND_ALLGATHER, dt, 0, -1, sc);
	int rc, lead = h->lrank == 0;

	/* The node's block lands in place in the leader's recvbuf. */
	rc = local_rc(c, shmcoll_gather(send, lead ? recv + (size_t)h->node * block : NULL, sc, dt,
	                                0, h->local));
	if (rc == 0 && lead)
		rc = lead_ring_ag(c, fn, call, recv, (size_t)h->nnodes, block, 1);
	if (rc == 0)
		rc = local_rc(c, shmcoll_bcast(recv, (size_t)c->size * sc, dt, 0, h->local));
	return rc;
}

int shmcoll__hier_reduce_scatter(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t rc_,
                                 shmcoll_dtype dt, shmcoll_op op)
{
	const char *fn = "shmcoll_reduce_scatter";
	struct shmcoll_hier *h = c->hier;
	struct wide w = widen(dt, op);
	size_t es = shmcoll_dtype_size(dt), total = (size_t)c->size * rc_;
	size_t m = total * w.mult, seg = (size_t)h->nproc * rc_ * w.mult;
	uint64_t call = call_word(KIND_REDUCE_SCATTER, dt, op, -1, rc_), S = (uint64_t)c->size;
	uint8_t *win = (uint8_t *)send, *wres = NULL, *part = NULL;
	int rc, lead = h->lrank == 0;

	if (w.mode != W_NATIVE) {
		win = scratch(h, SCR_IN, m * w.es);
		if (!win)
			return oom(c, fn, m * w.es);
		wide_in(&w, win, send, total, dt, S);
	}
	if (lead) {
		wres = scratch(h, SCR_RES, m * w.es);
		part = scratch(h, SCR_TMP, (size_t)h->nproc * rc_ * es);
		if (!wres || !part)
			return oom(c, fn, m * w.es);
	}
	rc = local_rc(c, shmcoll_reduce(win, wres, m, w.dt, w.op, 0, h->local));
	if (rc == 0 && lead) {
		rc = lead_ring_rs(c, fn, &w, call, wres, m, seg);
		if (rc == 0)
			wide_out(&w, part, wres + (size_t)h->node * seg * w.es,
			         (size_t)h->nproc * rc_, dt, op, S);
	}
	if (rc == 0)
		rc = local_rc(c, shmcoll_scatter(part, recv, rc_, dt, 0, h->local));
	return rc;
}

int shmcoll__hier_gather(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t sc,
                         shmcoll_dtype dt, int root)
{
	const char *fn = "shmcoll_gather";
	struct shmcoll_hier *h = c->hier;
	size_t es = shmcoll_dtype_size(dt), block = (size_t)h->nproc * sc * es;
	uint64_t call = call_word(KIND_GATHER, dt, 0, root, sc);
	int rc, N = h->nnodes, nr = root / h->nproc, lr = root % h->nproc, q, k;
	int lead = h->lrank == 0;
	uint8_t *far;

	if (h->node != nr) {
		uint8_t *tmp = lead ? scratch(h, SCR_RES, block) : NULL;

		if (lead && !tmp)
			return oom(c, fn, block);
		rc = local_rc(c, shmcoll_gather(send, tmp, sc, dt, 0, h->local));
		if (rc == 0 && lead)
			rc = sendrecv(c, fn, call, nr, tmp, block, -1, NULL, 0);
		return rc;
	}
	/* The root's node: its block goes straight to the root. */
	rc = local_rc(c, shmcoll_gather(send, h->lrank == lr ? recv + (size_t)nr * block : NULL, sc,
	                                dt, lr, h->local));
	if (rc < 0)
		return rc;
	/* The other nodes' blocks, in node order, into recvbuf if the leader is
	 * the root, else into scratch to be moved to the root. */
	far = NULL;
	if (lead) {
		struct shmcoll_xfer *x = scratch(h, SCR_TMP, sizeof(*x) * (size_t)N);

		far = lr == 0 ? recv : scratch(h, SCR_RES, (size_t)(N - 1) * block);
		if (!x || !far)
			return oom(c, fn, (size_t)N * block);
		for (q = 0, k = 0; q < N; q++) {
			uint8_t *dst = lr == 0 ? recv + (size_t)q * block
			                       : far + (size_t)(q - (q > nr)) * block;

			if (q != nr)
				x[k++] = (struct shmcoll_xfer){q, XFER_RECV, dst, block, call, 0};
		}
		rc = net_run(c, fn, x, k);
		if (rc < 0)
			return rc;
	}
	if (lr == 0)
		return 0;
	rc = local_move(c, fn, 0, lr, far, recv, (size_t)nr * block);
	if (rc == 0)
		rc = local_move(c, fn, 0, lr, far ? far + (size_t)nr * block : NULL,
		                recv ? recv + (size_t)(nr + 1) * block : NULL,
		                (size_t)(N - 1 - nr) * block);
	return rc;
}

int shmcoll__hier_scatter(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t rcount,
                          shmcoll_dtype dt, int root)
{
	const char *fn = "shmcoll_scatter";
	struct shmcoll_hier *h = c->hier;
	size_t es = shmcoll_dtype_size(dt), block = (size_t)h->nproc * rcount * es;
	uint64_t call = call_word(KIND_SCATTER, dt, 0, root, rcount);
	int rc, N = h->nnodes, nr = root / h->nproc, lr = root % h->nproc, q, k;
	int lead = h->lrank == 0;

	if (h->node != nr) {
		uint8_t *tmp = lead ? scratch(h, SCR_RES, block) : NULL;

		if (lead && !tmp)
			return oom(c, fn, block);
		rc = lead ? sendrecv(c, fn, call, -1, NULL, 0, nr, tmp, block) : 0;
		if (rc == 0)
			rc = local_rc(c, shmcoll_scatter(tmp, recv, rcount, dt, 0, h->local));
		return rc;
	}
	/* The root's node: the leader sends the other nodes' blocks, taken
	 * from the root's sendbuf through the node first if it is not root. */
	rc = 0;
	if (lead) {
		struct shmcoll_xfer *x = scratch(h, SCR_TMP, sizeof(*x) * (size_t)N);
		const uint8_t *far = lr == 0 ? send : scratch(h, SCR_RES, (size_t)(N - 1) * block);

		if (!x || !far)
			return oom(c, fn, (size_t)N * block);
		if (lr != 0) {
			rc = local_move(c, fn, lr, 0, NULL, (uint8_t *)far, (size_t)nr * block);
			if (rc == 0)
				rc = local_move(c, fn, lr, 0, NULL,
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
		rc = net_run(c, fn, x, k);
	} else if (lr != 0) {
		rc = local_move(c, fn, lr, 0, send, NULL, (size_t)nr * block);
		if (rc == 0)
			rc = local_move(c, fn, lr, 0, send ? send + (size_t)(nr + 1) * block : NULL,
			                NULL, (size_t)(N - 1 - nr) * block);
	}
	if (rc < 0)
		return rc;
	return local_rc(c, shmcoll_scatter(h->lrank == lr ? send + (size_t)nr * block : NULL, recv,
	                                   rcount, dt, lr, h->local));
}

int shmcoll__hier_alltoall(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t count,
                           shmcoll_dtype dt)
{
	const char *fn = "shmcoll_alltoall";
	struct shmcoll_hier *h = c->hier;
	size_t b = count * shmcoll_dtype_size(dt), P = (size_t)h->nproc, S = (size_t)c->size;
	size_t row = S * b, nblk = P * P * b;
	uint64_t call = call_word(KIND_ALLTOALL, dt, 0, -1, count);
	int rc, N = h->nnodes, lead = h->lrank == 0, m, k;
	uint8_t *G = NULL, *O = NULL, *I = NULL, *T = NULL;
	size_t i, j;

	if (lead) {
		/* G: every local rank's sendbuf; O, I: per node, [j][i] the
		 * block local i sends to (or receives from) local j; T: per
		 * local rank, its recvbuf. */
		G = scratch(h, SCR_IN, P * row);
		O = scratch(h, SCR_RES, (size_t)N * nblk);
		I = scratch(h, SCR_NET,
		            align16((size_t)N * nblk) + sizeof(struct shmcoll_xfer) * 2 * N);
		T = scratch(h, SCR_TMP, P * row);
		if (!G || !O || !I || !T)
			return oom(c, fn, 2 * P * row + 2 * (size_t)N * nblk);
	}
	rc = local_rc(c, shmcoll_gather(send, G, S * count, dt, 0, h->local));
	if (rc < 0 || !lead)
		goto out;
	for (m = 0; m < N; m++)
		for (j = 0; j < P; j++)
			for (i = 0; i < P; i++)
				memcpy(O + (size_t)m * nblk + (j * P + i) * b,
				       G + i * row + ((size_t)m * P + j) * b, b);
	{
		struct shmcoll_xfer *x = (struct shmcoll_xfer *)(I + align16((size_t)N * nblk));

		for (m = 0, k = 0; m < N; m++) {
			if (m == h->node)
				continue;
			x[k++] = (struct shmcoll_xfer){m,    XFER_SEND, O + (size_t)m * nblk,
			                               nblk, call,      0};
			x[k++] = (struct shmcoll_xfer){m,    XFER_RECV, I + (size_t)m * nblk,
			                               nblk, call,      0};
		}
		memcpy(I + (size_t)h->node * nblk, O + (size_t)h->node * nblk, nblk);
		rc = net_run(c, fn, x, k);
		if (rc < 0)
			return rc;
	}
	for (j = 0; j < P; j++)
		for (m = 0; m < N; m++)
			memcpy(T + j * row + (size_t)m * P * b, I + (size_t)m * nblk + j * P * b,
			       P * b);
out:
	if (rc == 0)
		rc = local_rc(c, shmcoll_scatter(T, recv, S * count, dt, 0, h->local));
	return rc;
}

void *shmcoll__hier_malloc(shmcoll_comm *c, size_t bytes)
{
	void *p = shmcoll_malloc(c->hier->local, bytes);

	if (!p)
		local_rc(c, -ENOMEM);
	return p;
}

int shmcoll__hier_free(shmcoll_comm *c, void *ptr)
{
	return local_rc(c, shmcoll_free(c->hier->local, ptr));
}

int shmcoll__hier_enter(shmcoll_comm *c, const char *fn)
{
	int rc;

	if (load_relaxed(&c->broken))
		return shmcoll__fail(c, -ECANCELED, "%s: the communicator was aborted earlier%s%s",
		                     fn, c->cause[0] ? ": " : " (by a peer or shmcoll_comm_abort)",
		                     c->cause);
	/* A rank of this node failed between calls. */
	rc = shmcoll__enter(c->hier->local, fn);
	if (rc < 0)
		return local_rc(c, rc);
	c->err[0] = '\0';
	return 0;
}

void shmcoll__hier_abort(shmcoll_comm *c)
{
	atomic_store(&c->broken, ECANCELED);
	if (c->hier->net)
		shmcoll__net_shutdown(c->hier->net);
	shmcoll__break(c->hier->local, ECANCELED);
}

void shmcoll__hier_destroy(shmcoll_comm *c)
{
	struct shmcoll_hier *h = c->hier;
	int i;

	shmcoll__net_close(h->net);
	shmcoll_comm_destroy(h->local);
	for (i = 0; i < SCR_COUNT; i++)
		free(h->scr[i]);
	free(h);
}

/* The node's ranks may spin while they wait only if nothing else needs their
 * CPUs. On a machine of its own a node knows (the node communicator counts
 * its ranks against their CPUs); but several nodes of one job may share a
 * machine (tests, benchmarks, a node carved in two), and then a rank spinning
 * on its leader takes the CPU another node's rank needs: at 2 nodes x 2 ranks
 * on 2 CPUs, 396 us per small allreduce instead of 29.5. So the leaders
 * compare machines (the kernel's boot id) and count the ranks of the job on
 * this one. Returns 1 if they outnumber this node's CPUs, 0 if not, or the
 * error of the exchange. */
static int colocated_oversubscribed(shmcoll_comm *c, int ncpus)
{
	struct shmcoll_hier *h = c->hier;
	char id[40] = "", *all;
	size_t idn = sizeof(id);
	int fd, n, same = 0, rc;

	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, id, sizeof(id) - 1) < 0)
			id[0] = '\0';
		close(fd);
	}
	if (!id[0])
		return 0; /* cannot tell: assume machines of their own */
	all = scratch(h, SCR_NET, idn * (size_t)h->nnodes);
	if (!all)
		return oom(c, "shmcoll_init", idn * (size_t)h->nnodes);
	memcpy(all + idn * (size_t)h->node, id, idn);
	rc = lead_ring_ag(c, "shmcoll_init", call_word(KIND_BARRIER, 0, 0, -1, 0), (uint8_t *)all,
	                  (size_t)h->nnodes, idn, 1);
	if (rc < 0)
		return rc;
	for (n = 0; n < h->nnodes; n++)
		same += !memcmp(all + idn * (size_t)n, id, idn);
	return (long)same * h->nproc > ncpus;
}

/* The machine's CPUs: not this process's affinity, which the launcher may have
 * narrowed to one CPU per rank. */
static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

/* Parses the leaders' addresses "h:p,h:p,..." into n entries. */
static int parse_nodes(const char *s, int n, char (*addrs)[SHMCOLL_ADDR_MAX])
{
	char host[SHMCOLL_ADDR_MAX];
	uint16_t port;
	int i;

	for (i = 0; i < n; i++) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (len == 0 || len >= SHMCOLL_ADDR_MAX || (i == n - 1) != !end)
			return -EINVAL;
		memcpy(addrs[i], s, len);
		addrs[i][len] = '\0';
		if (shmcoll__addr_split(addrs[i], host, sizeof(host), &port) < 0 || port == 0)
			return -EINVAL;
		s = end ? end + 1 : s + len;
	}
	return 0;
}

int shmcoll__hier_create(const struct shmcoll_hier_cfg *cfg, shmcoll_comm **out, char *err,
                         size_t errlen)
{
	char nerr[SHMCOLL_ERR_LEN - 64];
	char(*addrs)[SHMCOLL_ADDR_MAX] = NULL;
	shmcoll_config lc = {0};
	struct shmcoll_hier *h;
	shmcoll_comm *c;
	int rc, status;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	h = calloc(1, sizeof(*h));
	addrs = calloc((size_t)cfg->nnodes, sizeof(*addrs));
	if (!c || !h || !addrs) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto err_free;
	}
	if (parse_nodes(cfg->nodes, cfg->nnodes, addrs) < 0) {
		snprintf(err, errlen, "SHMCOLL_NODES is not %d comma-separated host:port addresses",
		         cfg->nnodes);
		rc = -EINVAL;
		goto err_free;
	}
	c->rank = cfg->node * cfg->nproc + cfg->lrank;
	c->size = cfg->nnodes * cfg->nproc;
	c->hier = h;
	h->nnodes = cfg->nnodes;
	h->node = cfg->node;
	h->nproc = cfg->nproc;
	h->lrank = cfg->lrank;

	lc.rank = cfg->lrank;
	lc.size = cfg->nproc;
	lc.job = cfg->job;
	lc.timeout_ms = cfg->timeout_ms;
	rc = shmcoll_comm_create(&lc, &h->local);
	if (rc < 0) {
		snprintf(err, errlen, "node %d: %s", cfg->node, shmcoll_last_error(NULL));
		goto err_free;
	}
	status = 0;
	if (h->lrank == 0) {
		struct shmcoll_net_cfg nc = {
		    .nnodes = cfg->nnodes,
		    .node = cfg->node,
		    .nproc = cfg->nproc,
		    .token = cfg->token,
		    .addrs = (const char(*)[SHMCOLL_ADDR_MAX])addrs,
		    .listen_fd = cfg->listen_fd,
		    .timeout_ns = cfg->timeout_ns,
		    .kind = NET_AUTO,
		    .log = cfg->log,
		};

		status = shmcoll__net_open(&nc, &h->net, nerr, sizeof(nerr));
		if (status < 0)
			snprintf(err, errlen, "node %d's leader (rank %d): %s", cfg->node, c->rank,
			         nerr);
		if (status == 0) {
			status = colocated_oversubscribed(c, online_cpus());
			if (status < 0)
				snprintf(err, errlen, "node %d's leader (rank %d): %s", cfg->node,
				         c->rank, c->err);
		}
	}
	/* Every rank of the node learns whether its leader got through, and
	 * whether to wait as an oversubscribed node does. */
	rc = shmcoll_bcast(&status, 1, SHMCOLL_INT32, 0, h->local);
	if (rc < 0) {
		snprintf(err, errlen, "node %d: %s", cfg->node, shmcoll_last_error(h->local));
		goto err_local;
	}
	if (status < 0) {
		if (h->lrank != 0)
			snprintf(err, errlen,
			         "node %d's leader could not reach the other nodes (%s)", cfg->node,
			         shmcoll_strerror(status));
		rc = status;
		goto err_local;
	}
	if (status > 0)
		h->local->waiter.oversubscribed = 1;
	/* A leader with a CPU of its own spins on its sockets before it sleeps. */
	if (h->net && !h->local->waiter.oversubscribed)
		shmcoll__net_set_spin(h->net, NET_SPIN_NS);
	free(addrs);
	*out = c;
	return 0;

err_local:
	shmcoll__net_close(h->net);
	shmcoll_comm_destroy(h->local);
err_free:
	free(addrs);
	free(h);
	free(c);
	return rc;
}

const shmcoll_comm *shmcoll__hier_local(const shmcoll_comm *c)
{
	return c->hier->local;
}

int shmcoll__hier_nproc(const shmcoll_comm *c)
{
	return c->hier->nproc;
}

const char *shmcoll__hier_transport(const shmcoll_comm *c)
{
	return c->hier && c->hier->net ? shmcoll__net_kind_name(c->hier->net) : NULL;
}
