/* task.h - the collectives of a node communicator as tasks of the engine (queue.h): its
 * init function records the arguments and picks the protocol; its advance function runs
 * the protocol's steps from where it last stopped, blocking where its protocol waits (the
 * bounded wait of shm/wait.h; the blocking API is init + this) or not. The node's queue
 * (state.h's tasks) runs them in the order they were started: the steps of the engine are
 * one sequence per rank. docs/ARCHITECTURE.md ("Tasks") has the life cycle. */
#ifndef SHMCOLL_CORE_TASK_H
#define SHMCOLL_CORE_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "shm/arena.h"
#include "lib/kernels/kernels.h"
#include "lib/sched/sched.h"
#include "lib/core/queue.h"
#include "lib/core/state.h"

struct shmcoll_task;

typedef int (*shmcoll__advance_fn)(struct shmcoll_node *n, struct shmcoll_task *t);

struct shmcoll_task {
	/* The life cycle (queue.h): where it resumes, whether it blocks, its result. */
	struct shmcoll_task_head head;
	shmcoll__advance_fn advance;
	const char *fn; /* the public function, for messages */

	/* The call, set by its init function. */
	uint32_t kind;
	int algo;
	int root;
	shmcoll_dtype dtype;
	shmcoll_op op;
	const uint8_t *send;
	uint8_t *recv;
	size_t count; /* elements: of the vector, or of one rank's block */
	size_t es;    /* bytes per element */
	shmcoll__reduce_fn reduce;
	uint64_t aux; /* per kind: the heap offset of a malloc or free */

	/* The engine's place inside an await (engine.c). */
	struct shmcoll_desc *d; /* the call's descriptor, once begun */
	int k;                  /* peers an await has seen so far */
	uint32_t low;           /* the message guard's lowest step seen */
	int64_t wait_since;     /* not blocking: when the pending await began (0: none; 1: it
	                         * missed once, not timed yet) */
	int64_t checked;        /* and when it last looked for dead peers */

	/* The protocol's place (lib/coll): the chunk, slice or peer it is at. */
	size_t off, len, i, nchunks;
	int p;
	uint32_t step;
	struct shmcoll_tree tree;

	/* The variable-count collectives: the caller's arrays, read while the task runs (one
	 * side's may be NULL where the call ignores it). */
	const size_t *scounts, *sdispls, *rcounts, *rdispls;
	size_t scount; /* gatherv: this rank's sendcount; scatterv: its recvcount */
	/* The protocols built on point-to-point messages (gatherv, scatterv): one per peer. */
	struct shmcoll_p2p_op *ops;
};

/* After an await returned rc != 0 at resume point at: the value to return from advance,
 * having recorded where to resume if the await is pending. */
static inline int shmcoll__suspend(struct shmcoll_task *t, int at, int rc)
{
	return shmcoll__suspend_at(&t->head, at, rc);
}

/* The common part of every init: the task is new, for the public function fn. */
static inline void shmcoll__task_init(struct shmcoll_task *t, const char *fn,
                                      shmcoll__advance_fn advance)
{
	/* What the queue needs (done, rc, wait_since) it sets when the task joins it: the
	 * blocking API's tasks never do. */
	t->advance = advance;
	t->fn = fn;
	t->head.at = 0;
	t->k = 0;
}

/* Runs t to completion behind the tasks outstanding, blocking, and returns its result. With
 * none outstanding (the blocking API's usual case) it is one call of its advance
 * (shmcoll__task_run, below). */
int shmcoll__task_run_queued(struct shmcoll_node *n, struct shmcoll_task *t);

/* The blocking API's call of a task. With nothing outstanding
 * (the caller entered), one call of its advance. */
static inline int shmcoll__task_run(struct shmcoll_node *n, struct shmcoll_task *t)
{
	if (!shmcoll__queue_busy(&n->tasks)) {
		t->head.blocking = 1;
		return t->advance(n, t);
	}
	return shmcoll__task_run_queued(n, t);
}

/* The advance of a call with nothing to do (count 0): it completes at once. */
int shmcoll__nothing(struct shmcoll_node *n, struct shmcoll_task *t);

/* The node's queue (queue.h) on task t: start, test (*done), wait, and the queue's progress.
 * t belongs to the communicator from its start until a test says it is done or a wait
 * returns. */
void shmcoll__task_start(struct shmcoll_node *n, struct shmcoll_task *t);
/* The start of a caller that has just entered n (queue.h's shmcoll__queue_start_entered). */
static inline void shmcoll__task_start_entered(struct shmcoll_node *n, struct shmcoll_task *t)
{
	t->wait_since = 0;
	shmcoll__queue_start_entered(&n->tasks, &t->head);
}
void shmcoll__task_test(struct shmcoll_node *n, struct shmcoll_task *t, int *done);
int shmcoll__task_wait(struct shmcoll_node *n, struct shmcoll_task *t);
void shmcoll__progress(struct shmcoll_node *n);

/* Makes n's queue: its tasks are collectives of n (at create). */
void shmcoll__task_queue_init(struct shmcoll_node *n);

#endif
