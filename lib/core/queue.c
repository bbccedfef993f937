/* queue.c - the life cycle of tasks (queue.h): a queue advanced with and without blocking. */
#include "lib/core/queue.h"

static struct shmcoll_task_head *head_of(struct shmcoll_queue *q)
{
	return shmcoll__entry(q->tasks.head, struct shmcoll_task_head, link);
}

static void complete(struct shmcoll_task_head *t, int rc)
{
	t->rc = rc;
	t->done = 1;
}

static void finish(struct shmcoll_queue *q, struct shmcoll_task_head *t, int rc)
{
	complete(t, rc);
	shmcoll__list_remove(&q->tasks, &t->link);
	q->outstanding--;
}

/* A task about to start: at its first step, not done. */
static void fresh(struct shmcoll_task_head *t)
{
	t->at = 0;
	t->done = 0;
	t->rc = 0;
}

static void join(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	shmcoll__list_push(&q->tasks, &t->link);
	q->outstanding++;
}

static void enqueue(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	fresh(t);
	join(q, t);
}

/* One advance of t in the mode asked, the queue marked as inside it. */
static int step(struct shmcoll_queue *q, struct shmcoll_task_head *t, int blocking)
{
	int rc;

	t->blocking = blocking;
	q->running = 1;
	rc = q->cls->advance(q, t);
	q->running = 0;
	return rc;
}

/* Advances the head task once. A task that reaches the head finds the communicator as the
 * tasks before it left it: if one of them broke it, it fails as a call entering a broken
 * communicator does, before touching anything shared. */
static int advance_head(struct shmcoll_queue *q, int blocking)
{
	struct shmcoll_task_head *t = head_of(q);
	int rc = t->at == 0 ? q->cls->enter(q, t) : 0;

	if (rc == 0)
		rc = step(q, t, blocking);
	if (rc != SHMCOLL_PENDING)
		finish(q, t, rc);
	return rc;
}

int shmcoll__queue_progress(struct shmcoll_queue *q)
{
	if (q->running)
		return 1;
	while (q->tasks.head)
		if (advance_head(q, 0) == SHMCOLL_PENDING)
			return 1;
	return 0;
}

void shmcoll__queue_start(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	enqueue(q, t);
	shmcoll__queue_progress(q);
}

void shmcoll__queue_start_entered(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	int rc;

	if (q->tasks.head) {
		shmcoll__queue_start(q, t);
		return;
	}
	/* Nothing before it: the queue's enter would repeat the caller's, so the first step is
	 * taken at once, and the task joins the queue only if it stops at a wait. */
	fresh(t);
	rc = step(q, t, 0);
	if (rc == SHMCOLL_PENDING)
		join(q, t);
	else
		complete(t, rc);
}

int shmcoll__queue_test(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	shmcoll__queue_progress(q);
	return t->done;
}

int shmcoll__queue_wait(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	/* The tasks before t first, each to its end: they hold the steps before t's. */
	while (!t->done)
		advance_head(q, 1);
	return t->rc;
}

int shmcoll__queue_run(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	enqueue(q, t);
	return shmcoll__queue_wait(q, t);
}
