/* proto.h - what the protocol files of lib/coll share: the direct reduce-scatter + allgather
 * protocol (direct.c) that allreduce and reduce run, and the setting up of a task. */
#ifndef SHMCOLL_COLL_PROTO_H
#define SHMCOLL_COLL_PROTO_H

#include "lib/core/algo.h"
#include "lib/core/engine.h"
#include "lib/coll/coll.h"

/* Fills the arguments every collective's task has; es from dtype. */
static inline void shmcoll__coll_task(struct shmcoll_task *t, const char *fn,
                                      shmcoll__advance_fn advance, uint32_t kind, shmcoll_dtype dt,
                                      shmcoll_op op, int root, const void *send, void *recv,
                                      size_t count)
{
	shmcoll__task_init(t, fn, advance);
	t->kind = kind;
	t->algo = ALGO_FLAT; /* the init functions choose */
	t->dtype = dt;
	t->op = op;
	t->root = root;
	t->send = send;
	t->recv = recv;
	t->count = count;
	t->es = shmcoll__dtype_size(dt);
}

/* The start of every fixed-count collective's init: t filled as shmcoll__coll_task does,
 * advancing by shmcoll__nothing; whether a protocol is still to be chosen (not when this
 * rank is alone, shmcoll__alone having set t up, nor for a count of 0). */
static inline int shmcoll__coll_begin(struct shmcoll_node *n, struct shmcoll_task *t,
                                      const char *fn, uint32_t kind, shmcoll_dtype dt,
                                      shmcoll_op op, int root, const void *send, void *recv,
                                      size_t count)
{
	shmcoll__coll_task(t, fn, shmcoll__nothing, kind, dt, op, root, send, recv, count);
	return !shmcoll__alone(n, t) && count;
}

/* The blocking run of t (node.h's shmcoll__task_run) with likely, the protocol most small
 * calls take, called directly: the compiler inlines it where the call is run, and the
 * blocking API's shortest path has no indirect call. */
static inline int shmcoll__task_run_likely(struct shmcoll_node *n, struct shmcoll_task *t,
                                           shmcoll__advance_fn likely)
{
	if (!shmcoll__queue_busy(&n->tasks) && t->advance == likely) {
		t->head.blocking = 1;
		return likely(n, t);
	}
	return shmcoll__task_run(n, t);
}

/* On the inline protocols (the small calls): inlined into the blocking call that runs them
 * (shmcoll__task_run_likely), saving a call and its frame on the shortest path; the advance
 * pointer still gets an out-of-line copy. Measured: 4-5 ns of a 57 ns barrier at P=2. */
#define SHMCOLL_HOT __attribute__((always_inline)) inline

/* The arguments of a variable-count collective (NULL where the call has none). */
static inline void shmcoll__vtask(struct shmcoll_task *t, const size_t *scounts,
                                  const size_t *sdispls, const size_t *rcounts,
                                  const size_t *rdispls, size_t scount)
{
	t->scounts = scounts;
	t->sdispls = sdispls;
	t->rcounts = rcounts;
	t->rdispls = rdispls;
	t->scount = scount;
	t->ops = NULL;
}

/* The protocols on point-to-point messages (gatherv.c, scatterv.c, vops.c): nops
 * operations for the task (0, or -ENOMEM with the communicator broken); then, until they
 * are all done (SHMCOLL_PENDING without blocking: the caller suspends at its own resume
 * point), their end: expect[i] (elements, or NULL) is what receive i must have got, else
 * -EPROTO (a count mismatch: the communicator broken). The operations are freed once the
 * task ends, whatever its result. */
int shmcoll__vops_new(struct shmcoll_node *n, struct shmcoll_task *t, int nops);
int shmcoll__vops_finish(struct shmcoll_node *n, struct shmcoll_task *t, int nops,
                         const size_t *expect);

/* Even inline messages (scatterv's root, alltoallv). An inline message of those calls
 * carries a table of each block's offset and count before the blocks. When every peer's
 * block has the same count, the message is the blocks alone, back to back in rank order
 * without the writer's, and its committed length says so with SHMCOLL_MSG_EVEN. A reader
 * finds its block at its place among the writer's peers and checks its own count against
 * the length (count x peers), so a mismatch still shows. A 32-byte block at P=2 then stays in
 * the line the reader polls, as the equal-count call's does; behind a table it took a
 * second line (1.45-1.5x the equal call's time, docs/BENCHMARKS.md). */
#define SHMCOLL_MSG_EVEN (1u << 31)

/* Whether every rank but skip (size >= 2) has the same count *c in counts, their blocks
 * together fitting a message. */
static inline int shmcoll__even_blocks(const struct shmcoll_node *n, const size_t *counts, int skip,
                                       size_t es, size_t *c)
{
	size_t first = counts[skip == 0];
	int q;

	for (q = 0; q < n->size; q++)
		if (q != skip && counts[q] != first)
			return 0;
	*c = first;
	return first * es <= SHMCOLL_INLINE_MAX &&
	       first * es * (size_t)(n->size - 1) <= SHMCOLL_INLINE_MAX;
}

/* Packs the even blocks (c elements each, at displs of send) of every rank but skip into
 * data: the length to commit, SHMCOLL_MSG_EVEN set. */
static inline size_t shmcoll__even_pack(const struct shmcoll_node *n, uint8_t *data,
                                        const uint8_t *send, const size_t *displs, int skip,
                                        size_t c, size_t es)
{
	size_t off = 0;
	int q;

	for (q = 0; q < n->size && c; q++) { /* no blocks: sendbuf may be NULL */
		if (q == skip)
			continue;
		shmcoll__memcpy_call(data + off, send + displs[q] * es, c * es);
		off += c * es;
	}
	return off | SHMCOLL_MSG_EVEN;
}

/* This rank's block in writer p's even message m of length len (SHMCOLL_MSG_EVEN set),
 * where it expects want bytes: the block's offset in the data, its lines on their way (as
 * msg_prefetch), or SIZE_MAX when the length is not want bytes for every peer of p (a
 * mismatch). */
static inline size_t shmcoll__even_offset(const struct shmcoll_node *n, const uint8_t *m, int p,
                                          uint32_t len, size_t want)
{
	size_t off = shmcoll__pos_without(n->rank, p) * want;

	shmcoll__msg_prefetch(m, off, want);
	if (want > SHMCOLL_INLINE_MAX ||
	    want * (size_t)(n->size - 1) != (len & ~(uint32_t)SHMCOLL_MSG_EVEN))
		return SIZE_MAX;
	return off;
}

/* The elements of es bytes each block of an even message of length len holds (for the
 * message of a mismatch). */
static inline size_t shmcoll__even_count(const struct shmcoll_node *n, size_t len, size_t es)
{
	return (len & ~(size_t)SHMCOLL_MSG_EVEN) / es / (size_t)(n->size - 1);
}

/* The direct protocol for the task's call (direct.c): the result goes to recv on every rank
 * (root < 0: allreduce) or on root (reduce). t->reduce is the kernel. */
int shmcoll__direct_advance(struct shmcoll_node *n, struct shmcoll_task *t);

#endif
