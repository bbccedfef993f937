/* vcolls.c - the variable-count collectives and prefix reductions of a communicator over
 * several nodes, composed of its equal-count collectives (colls.c): each pads every block to
 * the largest, runs the equal-count call on the padded blocks, and takes its blocks out.
 * Where a rank cannot know the largest block, a first call agrees on it; where a receiver
 * cannot check what it gets, each padded block starts with its count (8 bytes), so count
 * mismatches are always found here (-EPROTO).
 *
 *   allgatherv       allgather of blocks of max(recvcounts)
 *   reduce_scatterv  reduce_scatter of blocks of max(recvcounts), zero-padded
 *   alltoallv        allreduce(MAX) of every rank's largest sendcount; alltoall of counted
 *                    blocks
 *   gatherv          allreduce(MAX) of the sendcounts; gather of counted blocks
 *   scatterv         bcast of the root's largest sendcount; scatter of counted blocks
 *   scan, exscan     allgather of every vector; each rank folds ranks 0 .. r (r-1) in rank
 *                    order, as a node's scan does
 * The padding costs up to a factor of the imbalance in traffic; what is built for speed is
 * the node's protocols (lib/coll). A call is a task of the multi-node communicator, and its
 * stages are calls of that communicator advanced in place, so it resumes like any other. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/coll/coll.h"
#include "lib/hier/impl.h"
#include "lib/kernels/kernels.h"

#define HDR 8 /* the count in front of a counted block */

enum { AT_AGREE = 1, AT_MOVE };

static const char *const names[KIND_COUNT] = {
    [KIND_ALLGATHERV] = "shmcoll_allgatherv",
    [KIND_GATHERV] = "shmcoll_gatherv",
    [KIND_SCATTERV] = "shmcoll_scatterv",
    [KIND_ALLTOALLV] = "shmcoll_alltoallv",
    [KIND_REDUCE_SCATTERV] = "shmcoll_reduce_scatterv",
    [KIND_SCAN] = "shmcoll_scan",
    [KIND_EXSCAN] = "shmcoll_exscan",
};

/* Starts stage call kind in t->sub (a fresh call). */
static void sub_init(struct hier_task *t, uint32_t kind, const void *send, void *recv, size_t count,
                     shmcoll_dtype dt, shmcoll_op op, int root)
{
	memset(t->sub, 0, sizeof(*t->sub));
	hier__call_init(t->sub, kind, send, recv, count, dt, op, root);
}

/* Advances t->sub in t's mode: 0 once done, SHMCOLL_PENDING, or its error. */
static int sub_run(struct shmcoll_hier *h, struct hier_task *t)
{
	t->sub->head.blocking = t->head.blocking;
	return t->sub->advance(h, t->sub);
}

static int padded(struct shmcoll_hier *h, struct hier_task *t, size_t bytes)
{
	free(t->vbuf);
	t->vbuf = malloc(bytes ? bytes : 1);
	return t->vbuf ? 0 : hier__oom(h, t->fn, bytes);
}

static int mismatch(struct shmcoll_hier *h, struct hier_task *t, int p, uint64_t got, size_t want)
{
	hier__fail(h, -EPROTO,
	           "%s: mismatched counts: rank %d sent %llu elements, rank %d expected %zu", t->fn,
	           p, (unsigned long long)got, h->rank, want);
	return hier__broken(h, -EPROTO);
}

/* memcpy and memmove for blocks that may be empty, where a buffer with nothing to move may
 * be NULL (the contract allows it, the C library does not). */
static void copy(void *to, const void *from, size_t n)
{
	if (n)
		memcpy(to, from, n);
}

static void move(void *to, const void *from, size_t n)
{
	if (n)
		memmove(to, from, n);
}

/* Where scan's array of source pointers goes after blocks of bytes: aligned for pointers. */
static size_t srcs_at(size_t bytes)
{
	return (bytes + sizeof(void *) - 1) & ~(sizeof(void *) - 1);
}

static size_t max_of(const size_t *c, int n)
{
	size_t m = 0;
	int i;

	for (i = 0; i < n; i++)
		if (c[i] > m)
			m = c[i];
	return m;
}

/* Block q of a counted layout of blocks of b bytes: [count][data]. */
static void put_counted(uint8_t *blk, size_t count, const void *data, size_t bytes)
{
	uint64_t c = count;

	memcpy(blk, &c, HDR);
	if (bytes)
		memcpy(blk + HDR, data, bytes);
}

static uint64_t counted(const uint8_t *blk)
{
	uint64_t c;

	memcpy(&c, blk, HDR);
	return c;
}

/* The stage before the move, where the largest block is not known to everyone. */
static void agree_init(struct shmcoll_hier *h, struct hier_task *t)
{
	switch (t->vkind) {
	case KIND_ALLGATHERV:
	case KIND_REDUCE_SCATTERV:
		/* Every rank passes recvcounts: the largest of each rank's hash and of its
		 * complement equal its own on every rank only if all hashes are equal. On one node
		 * the call word carries the hash; the padded equal-count calls across nodes do not.
		 */
		t->vhash[0] = shmcoll__counts_word(t->vrc, h->size);
		t->vhash[1] = ~t->vhash[0];
		sub_init(t, KIND_ALLREDUCE, t->vhash, t->vhash, 2, SHMCOLL_UINT64, SHMCOLL_MAX, -1);
		break;
	case KIND_ALLTOALLV:
		t->vmax = max_of(t->vsc, h->size);
		sub_init(t, KIND_ALLREDUCE, &t->vmax, &t->vmax, 1, SHMCOLL_UINT64, SHMCOLL_MAX, -1);
		break;
	case KIND_GATHERV:
		t->vmax = t->vscount;
		sub_init(t, KIND_ALLREDUCE, &t->vmax, &t->vmax, 1, SHMCOLL_UINT64, SHMCOLL_MAX, -1);
		break;
	case KIND_SCATTERV:
		t->vmax = h->rank == t->root ? max_of(t->vsc, h->size) : 0;
		sub_init(t, KIND_BCAST, &t->vmax, &t->vmax, 1, SHMCOLL_UINT64, SHMCOLL_SUM,
		         t->root);
		break;
	}
}

/* After the agreement on the counts' hash: whether every rank passed this rank's counts. */
static int same_counts(const struct shmcoll_hier *h, const struct hier_task *t)
{
	uint64_t mine = shmcoll__counts_word(t->vrc, h->size);

	return t->vhash[0] == mine && t->vhash[1] == ~mine;
}

/* The move: padded blocks in t->vbuf, the equal-count call in t->sub. */
static int move_init(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t es = t->es, P = (size_t)h->size, me = (size_t)h->rank, b, q, off;
	uint8_t *in, *out;
	int rc;

	switch (t->vkind) {
	case KIND_ALLGATHERV:
		t->vmax = max_of(t->vrc, h->size);
		b = (size_t)t->vmax * es;
		rc = padded(h, t, b * (P + 1));
		if (rc)
			return rc;
		in = t->vbuf + P * b;
		copy(in, t->send, t->vscount * es);
		sub_init(t, KIND_ALLGATHER, in, t->vbuf, (size_t)t->vmax, t->dt, SHMCOLL_SUM, -1);
		return 0;
	case KIND_REDUCE_SCATTERV:
		t->vmax = max_of(t->vrc, h->size);
		b = (size_t)t->vmax * es;
		rc = padded(h, t, b * (P + 1));
		if (rc)
			return rc;
		memset(t->vbuf, 0, b * P);
		for (q = 0, off = 0; q < P; off += t->vrc[q], q++)
			copy(t->vbuf + q * b, t->send + off * es, t->vrc[q] * es);
		sub_init(t, KIND_REDUCE_SCATTER, t->vbuf, t->vbuf + P * b, (size_t)t->vmax, t->dt,
		         t->op, -1);
		return 0;
	case KIND_ALLTOALLV:
		b = HDR + (size_t)t->vmax * es;
		rc = padded(h, t, 2 * b * P);
		if (rc)
			return rc;
		for (q = 0; q < P; q++)
			put_counted(t->vbuf + q * b, t->vsc[q], t->send + t->vsd[q] * es,
			            t->vsc[q] * es);
		sub_init(t, KIND_ALLTOALL, t->vbuf, t->vbuf + P * b, b, SHMCOLL_UINT8, SHMCOLL_SUM,
		         -1);
		return 0;
	case KIND_GATHERV:
		b = HDR + (size_t)t->vmax * es;
		rc = padded(h, t, b * (P + 1));
		if (rc)
			return rc;
		in = t->vbuf + P * b;
		put_counted(in, t->vscount, t->send, t->vscount * es);
		sub_init(t, KIND_GATHER, in, t->vbuf, b, SHMCOLL_UINT8, SHMCOLL_SUM, t->root);
		return 0;
	case KIND_SCATTERV:
		b = HDR + (size_t)t->vmax * es;
		rc = padded(h, t, b * (P + 1));
		if (rc)
			return rc;
		out = t->vbuf + P * b;
		if (me == (size_t)t->root)
			for (q = 0; q < P; q++)
				put_counted(t->vbuf + q * b, t->vsc[q], t->send + t->vsd[q] * es,
				            t->vsc[q] * es);
		sub_init(t, KIND_SCATTER, t->vbuf, out, b, SHMCOLL_UINT8, SHMCOLL_SUM, t->root);
		return 0;
	default: /* scan, exscan */
		b = t->count * es;
		rc = padded(h, t, srcs_at(b * P) + P * sizeof(void *));
		if (rc)
			return rc;
		copy(t->vbuf + me * b, t->send, b);
		sub_init(t, KIND_ALLGATHER, t->vbuf + me * b, t->vbuf, t->count, t->dt, SHMCOLL_SUM,
		         -1);
		return 0;
	}
}

/* After the move: this rank's blocks out of the padded ones. */
static int unpack(struct shmcoll_hier *h, struct hier_task *t)
{
	size_t es = t->es, P = (size_t)h->size, me = (size_t)h->rank, b, p;
	const void **srcs;
	const uint8_t *blk;
	int n;

	switch (t->vkind) {
	case KIND_ALLGATHERV:
		b = (size_t)t->vmax * es;
		for (p = 0; p < P; p++)
			if (t->vrc[p])
				move(t->recv + t->vrd[p] * es, t->vbuf + p * b, t->vrc[p] * es);
		return 0;
	case KIND_REDUCE_SCATTERV:
		b = (size_t)t->vmax * es;
		copy(t->recv, t->vbuf + P * b, t->vrc[me] * es);
		return 0;
	case KIND_ALLTOALLV:
		b = HDR + (size_t)t->vmax * es;
		for (p = 0; p < P; p++) {
			blk = t->vbuf + (P + p) * b;
			if (counted(blk) != t->vrc[p])
				return mismatch(h, t, (int)p, counted(blk), t->vrc[p]);
			copy(t->recv + t->vrd[p] * es, blk + HDR, t->vrc[p] * es);
		}
		return 0;
	case KIND_GATHERV:
		if (me != (size_t)t->root)
			return 0;
		b = HDR + (size_t)t->vmax * es;
		for (p = 0; p < P; p++) {
			blk = t->vbuf + p * b;
			if (counted(blk) != t->vrc[p])
				return mismatch(h, t, (int)p, counted(blk), t->vrc[p]);
			move(t->recv + t->vrd[p] * es, blk + HDR, t->vrc[p] * es);
		}
		return 0;
	case KIND_SCATTERV:
		b = HDR + (size_t)t->vmax * es;
		blk = t->vbuf + P * b;
		if (counted(blk) != t->vscount)
			return mismatch(h, t, t->root, counted(blk), t->vscount);
		move(t->recv, blk + HDR, t->vscount * es);
		return 0;
	default: /* scan, exscan: fold ranks 0 .. r (r-1) in rank order */
		b = t->count * es;
		n = h->rank + (t->vkind == KIND_SCAN);
		if (!n)
			return 0;
		srcs = (const void **)(t->vbuf + srcs_at(P * b));
		for (p = 0; p < (size_t)n; p++)
			srcs[p] = t->vbuf + p * b;
		shmcoll__reduce_lookup(t->dt, t->op)(t->recv, srcs, n, t->count);
		return 0;
	}
}

static int vcall_advance(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc;

	switch (t->head.at) {
	case AT_AGREE:
		goto agree;
	case AT_MOVE:
		goto move;
	}
	if (t->vkind != KIND_SCAN && t->vkind != KIND_EXSCAN) {
		agree_init(h, t);
	agree:
		rc = sub_run(h, t);
		if (rc)
			return hier__suspend(t, AT_AGREE, rc);
		if ((t->vkind == KIND_ALLGATHERV || t->vkind == KIND_REDUCE_SCATTERV) &&
		    !same_counts(h, t)) {
			hier__fail(h, -EPROTO,
			           "%s: mismatched counts: ranks pass different recvcounts", t->fn);
			return hier__broken(h, -EPROTO);
		}
	}
	rc = move_init(h, t);
	if (rc)
		return rc;
move:
	rc = sub_run(h, t);
	if (rc)
		return hier__suspend(t, AT_MOVE, rc);
	return unpack(h, t);
}

struct hier_task *shmcoll__hier_vcall_new(struct shmcoll_hier *h, uint32_t kind, const void *send,
                                          size_t scount, const size_t *sendcounts,
                                          const size_t *sdispls, void *recv,
                                          const size_t *recvcounts, const size_t *rdispls,
                                          size_t count, shmcoll_dtype dt, shmcoll_op op, int root)
{
	struct hier_task *t = calloc(1, sizeof(*t));

	(void)h;
	if (!t)
		return NULL;
	t->sub = calloc(1, sizeof(*t->sub));
	if (!t->sub) {
		free(t);
		return NULL;
	}
	t->advance = vcall_advance;
	t->fn = names[kind];
	t->send = send;
	t->recv = recv;
	t->count = count;
	t->dt = dt;
	t->es = shmcoll__dtype_size(dt);
	t->op = op;
	t->root = root;
	t->vkind = kind;
	t->vsc = sendcounts;
	t->vsd = sdispls;
	t->vrc = recvcounts;
	t->vrd = rdispls;
	t->vscount = scount;
	return t;
}

int shmcoll__hier_vrun(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc = hier__task_run(h, t);

	shmcoll__hier_call_free(t);
	return rc;
}
