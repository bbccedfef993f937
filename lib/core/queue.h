/* queue.h - the task engine: what every resumable operation of the library is, and the one
 * queue that runs them. A task embeds a struct shmcoll_task_head and has an advance function
 * that runs its steps from where it last stopped, in one of two modes:
 *   blocking      it waits wherever it waits and returns only when it is complete;
 *   non-blocking  at the first wait not satisfied yet it records where it stopped (`at`) and
 *                 returns SHMCOLL_PENDING, having done nothing that must not be redone.
 * Its users: a node communicator's collectives (task.h), a multi-node communicator's calls
 * and the stages they are made of (lib/hier), a leaders' exchange (lib/hier/lead.c); a
 * point-to-point operation (p2p.h) embeds the head for its list, its completion and its
 * result, but is moved by the frames that arrive, not by resuming a function (p2p.c).
 *
 * A queue runs the tasks of one communicator one at a time, in the order they were started
 * (every rank starts them in the same order, and each task's steps follow the ones before
 * it), any number outstanding. Its class says what the tasks are: how one is entered before
 * its first step (a communicator broken by the tasks before it fails the task there, as a
 * call entering it would) and how it is advanced (its kind's own typed advance function,
 * found from the head). docs/ARCHITECTURE.md ("Tasks") has the life cycle. */
#ifndef SHMCOLL_CORE_QUEUE_H
#define SHMCOLL_CORE_QUEUE_H

#include "shm/list.h"

/* What an advance returns when it stopped at an unsatisfied wait (not an errno). */
#define SHMCOLL_PENDING 1

struct shmcoll_task_head {
	struct shmcoll_link link; /* the queue it is on (or the list of its kind) */
	int blocking;             /* waits block (else they return SHMCOLL_PENDING) */
	int at;                   /* where advance resumes: 0 at the start */
	int done;                 /* complete: rc is the result */
	int rc;
};

struct shmcoll_queue;

struct shmcoll_queue_class {
	/* Before t's first step: 0, or the error it fails with (not advanced). */
	int (*enter)(struct shmcoll_queue *q, struct shmcoll_task_head *t);
	/* One advance of t: 0, SHMCOLL_PENDING or the error it ends with. */
	int (*advance)(struct shmcoll_queue *q, struct shmcoll_task_head *t);
};

struct shmcoll_queue {
	struct shmcoll_list tasks; /* head: the one running */
	unsigned outstanding;
	int running; /* inside the head's advance: a wait there must not advance the queue */
	const struct shmcoll_queue_class *cls;
};

/* After an await returned rc != 0 at resume point at: the value to return from advance,
 * having recorded where to resume if the await is pending. */
static inline int shmcoll__suspend_at(struct shmcoll_task_head *t, int at, int rc)
{
	if (rc == SHMCOLL_PENDING)
		t->at = at;
	return rc;
}

/* Whether the queue has tasks outstanding. */
static inline int shmcoll__queue_busy(const struct shmcoll_queue *q)
{
	return q->tasks.head != NULL;
}

/* Starts t behind the tasks outstanding and advances the queue without blocking. t belongs
 * to the queue until shmcoll__queue_test says it is done or shmcoll__queue_wait returns. */
void shmcoll__queue_start(struct shmcoll_queue *q, struct shmcoll_task_head *t);

/* As shmcoll__queue_start, for a caller that has just entered the communicator itself (a
 * public non-blocking start): a task starting on an idle queue is not entered again, and
 * joins the queue only if its first advance stops at a wait. */
void shmcoll__queue_start_entered(struct shmcoll_queue *q, struct shmcoll_task_head *t);
/* Advances every outstanding task as far as it goes without blocking (nothing from inside
 * a task's advance). Whether tasks are left outstanding. */
int shmcoll__queue_progress(struct shmcoll_queue *q);

/* Advances the queue without blocking; whether t is complete. */
int shmcoll__queue_test(struct shmcoll_queue *q, struct shmcoll_task_head *t);

/* Advances the queue, blocking, until t is complete; returns its result. */
int shmcoll__queue_wait(struct shmcoll_queue *q, struct shmcoll_task_head *t);

/* Runs t to completion behind the tasks outstanding, blocking; its result. */
int shmcoll__queue_run(struct shmcoll_queue *q, struct shmcoll_task_head *t);

#endif
