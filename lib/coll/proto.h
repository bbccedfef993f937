/* proto.h - what the protocol files of lib/coll share: the direct reduce-scatter + allgather
 * protocol (direct.c) that allreduce and reduce run, and the setting up of a task. */
#ifndef SHMCOLL_COLL_PROTO_H
#define SHMCOLL_COLL_PROTO_H

#include "lib/core/algo.h"
#include "lib/core/engine.h"

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

/* The blocking run of t (node.h's shmcoll__task_run) with likely, the protocol most small
 * calls take, called directly: the compiler inlines it where the call is run, and the
 * blocking API's shortest path has no indirect call. */
static inline int shmcoll__task_run_likely(struct shmcoll_node *n, struct shmcoll_task *t,
                                           shmcoll__advance_fn likely)
{
	if (!n->tasks.head && t->advance == likely) {
		t->blocking = 1;
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

/* The direct protocol for the task's call (direct.c): the result goes to recv on every rank
 * (root < 0: allreduce) or on root (reduce). t->reduce is the kernel. */
int shmcoll__direct_advance(struct shmcoll_node *n, struct shmcoll_task *t);

#endif
