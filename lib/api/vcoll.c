/* vcoll.c - the public variable-count collectives and prefix reductions: each checks its
 * arguments once (counts and displacements against overflow, receive blocks against each
 * other, buffers against each other), enters the communicator and hands the call (struct
 * shmcoll_args, lib/coll/coll.h) to its table of operations (api.h's struct api_ops). The
 * blocking forms run it to the end; the non-blocking ones hand it out as a request. A
 * mismatch this rank sees in its own arguments (a sendcount that is not recvcounts[rank])
 * is -EPROTO and breaks the communicator, as a mismatch found in a wait does. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/api.h"

struct span {
	size_t lo, hi; /* element offsets, [lo, hi) */
};

static int by_lo(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Blocks out of rank order (check_blocks): no two non-empty ones overlap (-EINVAL). */
static int check_disjoint(shmcoll_comm *c, const char *fn, const char *what, const size_t *counts,
                          const size_t *displs)
{
	struct span *s;
	size_t n = 0, i;
	int p, rc = 0;

	if (c->size <= 32) {
		/* Few blocks: every pair, without memory. */
		for (p = 0; p < c->size; p++)
			for (int q = p + 1; q < c->size; q++)
				if (counts[p] && counts[q] && displs[p] < displs[q] + counts[q] &&
				    displs[q] < displs[p] + counts[p])
					return api__fail(c, -EINVAL,
					                 "%s: %s blocks %d and %d overlap", fn,
					                 what, p, q);
		return 0;
	}
	s = malloc((size_t)c->size * sizeof(*s));
	if (!s)
		return api__fail(c, -ENOMEM, "%s: out of memory", fn);
	for (p = 0; p < c->size; p++)
		if (counts[p])
			s[n++] = (struct span){displs[p], displs[p] + counts[p]};
	qsort(s, n, sizeof(*s), by_lo);
	for (i = 1; i < n; i++)
		if (s[i].lo < s[i - 1].hi) {
			rc = api__fail(c, -EINVAL,
			               "%s: %s blocks overlap (elements %zu..%zu and %zu..%zu)", fn,
			               what, s[i - 1].lo, s[i - 1].hi - 1, s[i].lo, s[i].hi - 1);
			break;
		}
	free(s);
	return rc;
}

/* Inlined where called: on a small call the checks are most of the entry's cost. */
#define CHECK_INLINE __attribute__((always_inline)) inline

/* The blocks (counts[p] elements at displs[p]) of one buffer: each fits size_t bytes
 * (-EINVAL), and, if disjoint is set, no two non-empty ones overlap (-EINVAL). *end is the
 * end of the last element of any block (0 when all are empty). One pass settles the usual
 * layout, blocks in rank order; only others go to check_disjoint. */
static CHECK_INLINE int check_blocks(shmcoll_comm *c, const char *fn, const char *what,
                                     const size_t *counts, const size_t *displs, size_t es,
                                     int disjoint, size_t *end)
{
	size_t last, bytes, prev = 0;
	int p, ordered = 1;

	*end = 0;
	if (!counts || !displs)
		return api__fail(c, -EINVAL, "%s: the %s %s array is NULL", fn, what,
		                 !counts ? "counts" : "displacements");
	for (p = 0; p < c->size; p++) {
		if (!counts[p])
			continue;
		if (__builtin_add_overflow(displs[p], counts[p], &last) ||
		    __builtin_mul_overflow(last, es, &bytes))
			return api__fail(
			    c, -EINVAL,
			    "%s: %s block %d (%zu elements at %zu) overflows size_t bytes", fn,
			    what, p, counts[p], displs[p]);
		ordered &= displs[p] >= prev;
		prev = last;
		if (bytes > *end)
			*end = bytes;
	}
	if (!disjoint || ordered)
		return 0;
	return check_disjoint(c, fn, what, counts, displs);
}

/* buf [b, b+nb) against the blocks of the other buffer (every block, at displs in elements
 * of es bytes, ending by end bytes from base): overlapping any is -EINVAL, except the one
 * in-place block at inplace. */
static CHECK_INLINE int check_apart(shmcoll_comm *c, const char *fn, const void *b, size_t nb,
                                    const uint8_t *base, size_t end, const size_t *counts,
                                    const size_t *displs, size_t es, const void *inplace)
{
	uintptr_t x = (uintptr_t)b, y;
	int p;

	/* Disjoint from the blocks' whole span (separate buffers): no block to look at. */
	if (!nb || !base || b == inplace || x >= (uintptr_t)base + end || x + nb <= (uintptr_t)base)
		return 0;
	for (p = 0; p < c->size; p++) {
		if (!counts[p])
			continue;
		y = (uintptr_t)(base + displs[p] * es);
		if (x < y + counts[p] * es && y < x + nb)
			return api__fail(
			    c, -EINVAL,
			    "%s: sendbuf and recvbuf overlap without being the in-place "
			    "form",
			    fn);
	}
	return 0;
}

/* A count mismatch this rank sees in its own arguments: the communicator breaks. */
static int own_mismatch(shmcoll_comm *c, const char *fn, const char *mine, size_t a,
                        const char *theirs, size_t b)
{
	c->ops->brk(c, EPROTO);
	return api__fail(c, -EPROTO, "%s: mismatched counts: %s is %zu but %s is %zu", fn, mine, a,
	                 theirs, b);
}

/* The checks of each call. 0 (and *none set when no rank moves anything, so the call
 * returns without a step), or the error with a message. */
static CHECK_INLINE int check(shmcoll_comm *c, const struct shmcoll_args *a, int *none)
{
	const char *fn = a->fn;
	size_t es = shmcoll__dtype_size(a->dt), bytes, end, send_end, total = 0;
	int me = c->rank, p, rc, root = a->root == me;

	*none = 0;
	if (!es)
		return api__bad_type(c, fn, a->dt, 1, 1);
	if ((a->kind == KIND_GATHERV || a->kind == KIND_SCATTERV) &&
	    (rc = api__check_root(c, fn, a->root)) != 0)
		return rc;
	switch (a->kind) {
	case KIND_ALLGATHERV:
	case KIND_GATHERV:
		rc = api__check_type(c, fn, a->dt, a->scount, 1, &bytes);
		if (!rc)
			rc = api__check_buf(c, fn, "sendbuf", a->send, bytes);
		if (rc || (a->kind == KIND_GATHERV && !root))
			return rc;
		rc = check_blocks(c, fn, "recv", a->rc, a->rd, es, 1, &end);
		if (!rc)
			rc = api__check_buf(c, fn, "recvbuf", a->recv, end);
		if (!rc)
			rc = check_apart(c, fn, a->send, bytes, a->recv, end, a->rc, a->rd, es,
			                 (const uint8_t *)a->recv + a->rd[me] * es);
		if (rc)
			return rc;
		if (a->scount != a->rc[me])
			return own_mismatch(c, fn, "sendcount", a->scount, "recvcounts[rank]",
			                    a->rc[me]);
		*none = a->kind == KIND_ALLGATHERV && !end;
		return 0;
	case KIND_SCATTERV:
		rc = api__check_type(c, fn, a->dt, a->scount, 1, &bytes);
		if (!rc)
			rc = api__check_buf(c, fn, "recvbuf", a->recv, bytes);
		if (rc || !root)
			return rc;
		rc = check_blocks(c, fn, "send", a->sc, a->sd, es, 0, &end);
		if (!rc)
			rc = api__check_buf(c, fn, "sendbuf", a->send, end);
		if (!rc)
			rc = check_apart(c, fn, a->recv, bytes, a->send, end, a->sc, a->sd, es,
			                 (const uint8_t *)a->send + a->sd[me] * es);
		if (rc)
			return rc;
		if (a->scount != a->sc[me])
			return own_mismatch(c, fn, "recvcount", a->scount, "sendcounts[root]",
			                    a->sc[me]);
		return 0;
	case KIND_ALLTOALLV:
		rc = check_blocks(c, fn, "send", a->sc, a->sd, es, 0, &send_end);
		if (!rc)
			rc = check_blocks(c, fn, "recv", a->rc, a->rd, es, 1, &end);
		if (!rc)
			rc = api__check_buf(c, fn, "sendbuf", a->send, send_end);
		if (!rc)
			rc = api__check_buf(c, fn, "recvbuf", a->recv, end);
		if (!rc)
			rc = check_apart(c, fn, a->send, send_end, a->recv, end, a->rc, a->rd, es,
			                 NULL);
		if (rc)
			return rc;
		if (a->sc[me] != a->rc[me])
			return own_mismatch(c, fn, "sendcounts[rank]", a->sc[me],
			                    "recvcounts[rank]", a->rc[me]);
		return 0;
	case KIND_REDUCE_SCATTERV:
		rc = api__check_op(c, fn, a->dt, a->op);
		if (rc)
			return rc;
		if (!a->rc)
			return api__fail(c, -EINVAL, "%s: recvcounts is NULL", fn);
		for (p = 0; p < c->size; p++) {
			if (__builtin_add_overflow(total, a->rc[p], &total) ||
			    __builtin_mul_overflow(total, es, &bytes))
				return api__fail(c, -EINVAL,
				                 "%s: the sum of recvcounts overflows size_t bytes",
				                 fn);
		}
		rc = api__check_buf(c, fn, "sendbuf", a->send, total * es);
		if (!rc)
			rc = api__check_buf(c, fn, "recvbuf", a->recv, a->rc[me] * es);
		if (!rc) {
			size_t before = 0;

			for (p = 0; p < me; p++)
				before += a->rc[p];
			rc = api__check_overlap(c, fn, a->recv, a->rc[me] * es, a->send, total * es,
			                        a->send ? (const uint8_t *)a->send + before * es
			                                : NULL);
		}
		*none = !total;
		return rc;
	default: /* scan, exscan */
		rc = api__check_type(c, fn, a->dt, a->count, 1, &bytes);
		if (!rc)
			rc = api__check_op(c, fn, a->dt, a->op);
		if (!rc && a->op == SHMCOLL_AVG)
			rc = api__fail(c, -EINVAL, "%s: SHMCOLL_AVG has no prefix form", fn);
		if (!rc)
			rc = api__check_buf(c, fn, "sendbuf", a->send, bytes);
		if (!rc)
			rc = api__check_buf(c, fn, "recvbuf", a->recv, bytes);
		if (!rc)
			rc = api__check_overlap(c, fn, a->send, bytes, a->recv, bytes, a->recv);
		*none = !a->count;
		return rc;
	}
}

/* Checks, enters, runs (req NULL) or starts (*req set) the call. */
static CHECK_INLINE int vcall(shmcoll_comm *c, const struct shmcoll_args *a, shmcoll_request **req)
{
	int rc, none;

	if (req)
		*req = NULL;
	if (!c)
		return -EINVAL;
	if (req)
		api__arm(c);
	API_HOLD(c);
	rc = check(c, a, &none);
	if (!rc)
		rc = api__enter(c, a->fn);
	if (rc)
		return rc;
	if (!req)
		return none ? 0 : c->ops->run(c, a);
	rc = api__istart(c, a, none, req);
	if (!rc)
		api__kick(c);
	return rc;
}

#define VARGS(...) (&(const struct shmcoll_args){__VA_ARGS__})

int shmcoll_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                       const size_t *recvcounts, const size_t *displs, shmcoll_dtype dtype,
                       shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_ALLGATHERV, .fn = "shmcoll_allgatherv", .send = sendbuf,
	                   .recv = recvbuf, .scount = sendcount, .rc = recvcounts, .rd = displs,
	                   .dt = dtype, .root = -1, .sc = NULL, .sd = NULL, .count = 0,
	                   .op = SHMCOLL_SUM),
	             NULL);
}

int shmcoll_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                        const size_t *recvcounts, const size_t *displs, shmcoll_dtype dtype,
                        shmcoll_comm *comm, shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_ALLGATHERV, .fn = "shmcoll_iallgatherv", .send = sendbuf,
	                   .recv = recvbuf, .scount = sendcount, .rc = recvcounts, .rd = displs,
	                   .dt = dtype, .root = -1, .sc = NULL, .sd = NULL, .count = 0,
	                   .op = SHMCOLL_SUM),
	             req);
}

int shmcoll_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                    const size_t *displs, shmcoll_dtype dtype, int root, shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_GATHERV, .fn = "shmcoll_gatherv", .send = sendbuf,
	                   .recv = recvbuf, .scount = sendcount, .rc = recvcounts, .rd = displs,
	                   .dt = dtype, .root = root, .sc = NULL, .sd = NULL, .count = 0,
	                   .op = SHMCOLL_SUM),
	             NULL);
}

int shmcoll_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
                     const size_t *displs, shmcoll_dtype dtype, int root, shmcoll_comm *comm,
                     shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_GATHERV, .fn = "shmcoll_igatherv", .send = sendbuf,
	                   .recv = recvbuf, .scount = sendcount, .rc = recvcounts, .rd = displs,
	                   .dt = dtype, .root = root, .sc = NULL, .sd = NULL, .count = 0,
	                   .op = SHMCOLL_SUM),
	             req);
}

int shmcoll_scatterv(const void *sendbuf, const size_t *sendcounts, const size_t *displs,
                     void *recvbuf, size_t recvcount, shmcoll_dtype dtype, int root,
                     shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_SCATTERV, .fn = "shmcoll_scatterv", .send = sendbuf,
	                   .recv = recvbuf, .scount = recvcount, .sc = sendcounts, .sd = displs,
	                   .dt = dtype, .root = root, .rc = NULL, .rd = NULL, .count = 0,
	                   .op = SHMCOLL_SUM),
	             NULL);
}

int shmcoll_iscatterv(const void *sendbuf, const size_t *sendcounts, const size_t *displs,
                      void *recvbuf, size_t recvcount, shmcoll_dtype dtype, int root,
                      shmcoll_comm *comm, shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_SCATTERV, .fn = "shmcoll_iscatterv", .send = sendbuf,
	                   .recv = recvbuf, .scount = recvcount, .sc = sendcounts, .sd = displs,
	                   .dt = dtype, .root = root, .rc = NULL, .rd = NULL, .count = 0,
	                   .op = SHMCOLL_SUM),
	             req);
}

int shmcoll_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                      void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                      shmcoll_dtype dtype, shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_ALLTOALLV, .fn = "shmcoll_alltoallv", .send = sendbuf,
	                   .recv = recvbuf, .sc = sendcounts, .sd = sdispls, .rc = recvcounts,
	                   .rd = rdispls, .dt = dtype, .root = -1, .scount = 0, .count = 0,
	                   .op = SHMCOLL_SUM),
	             NULL);
}

int shmcoll_ialltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                       void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                       shmcoll_dtype dtype, shmcoll_comm *comm, shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_ALLTOALLV, .fn = "shmcoll_ialltoallv", .send = sendbuf,
	                   .recv = recvbuf, .sc = sendcounts, .sd = sdispls, .rc = recvcounts,
	                   .rd = rdispls, .dt = dtype, .root = -1, .scount = 0, .count = 0,
	                   .op = SHMCOLL_SUM),
	             req);
}

int shmcoll_reduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                            shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_REDUCE_SCATTERV, .fn = "shmcoll_reduce_scatterv",
	                   .send = sendbuf, .recv = recvbuf, .rc = recvcounts, .dt = dtype,
	                   .op = op, .root = -1, .scount = 0, .sc = NULL, .sd = NULL, .rd = NULL,
	                   .count = 0),
	             NULL);
}

int shmcoll_ireduce_scatterv(const void *sendbuf, void *recvbuf, const size_t *recvcounts,
                             shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *comm,
                             shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_REDUCE_SCATTERV, .fn = "shmcoll_ireduce_scatterv",
	                   .send = sendbuf, .recv = recvbuf, .rc = recvcounts, .dt = dtype,
	                   .op = op, .root = -1, .scount = 0, .sc = NULL, .sd = NULL, .rd = NULL,
	                   .count = 0),
	             req);
}

int shmcoll_scan(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                 shmcoll_op op, shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_SCAN, .fn = "shmcoll_scan", .send = sendbuf,
	                   .recv = recvbuf, .count = count, .dt = dtype, .op = op, .root = -1,
	                   .scount = 0, .sc = NULL, .sd = NULL, .rc = NULL, .rd = NULL),
	             NULL);
}

int shmcoll_iscan(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                  shmcoll_op op, shmcoll_comm *comm, shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_SCAN, .fn = "shmcoll_iscan", .send = sendbuf,
	                   .recv = recvbuf, .count = count, .dt = dtype, .op = op, .root = -1,
	                   .scount = 0, .sc = NULL, .sd = NULL, .rc = NULL, .rd = NULL),
	             req);
}

int shmcoll_exscan(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                   shmcoll_op op, shmcoll_comm *comm)
{
	return vcall(comm,
	             VARGS(.kind = KIND_EXSCAN, .fn = "shmcoll_exscan", .send = sendbuf,
	                   .recv = recvbuf, .count = count, .dt = dtype, .op = op, .root = -1,
	                   .scount = 0, .sc = NULL, .sd = NULL, .rc = NULL, .rd = NULL),
	             NULL);
}

int shmcoll_iexscan(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                    shmcoll_op op, shmcoll_comm *comm, shmcoll_request **req)
{
	if (!req)
		return comm
		           ? api__fail(comm, -EINVAL, "%s: req (the out pointer) is NULL", __func__)
		           : -EINVAL;
	return vcall(comm,
	             VARGS(.kind = KIND_EXSCAN, .fn = "shmcoll_iexscan", .send = sendbuf,
	                   .recv = recvbuf, .count = count, .dt = dtype, .op = op, .root = -1,
	                   .scount = 0, .sc = NULL, .sd = NULL, .rc = NULL, .rd = NULL),
	             req);
}
