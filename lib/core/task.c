/* task.c - the life cycle of tasks (task.h): the queue of a node communicator, and advancing
 * it with and without blocking. */
#include <errno.h>

#include "lib/core/task.h"

static void finish(struct shmcoll_node *n, struct shmcoll_task *t, int rc)
{
	t->rc = rc;
	t->done = 1;
	n->tasks.head = t->next;
	if (!n->tasks.head)
		n->tasks.tail = NULL;
	n->tasks.outstanding--;
}

static void enqueue(struct shmcoll_node *n, struct shmcoll_task *t)
{
	t->next = NULL;
	t->done = 0;
	t->rc = 0;
	t->wait_since = 0;
	if (n->tasks.tail)
		n->tasks.tail->next = t;
	else
		n->tasks.head = t;
	n->tasks.tail = t;
	n->tasks.outstanding++;
}

/* Advances the head task once. A task that reaches the head of the queue finds the
 * communicator as the tasks before it left it: if one of them broke it, it fails as a call
 * entering a broken communicator does, before touching anything shared. */
static int advance_head(struct shmcoll_node *n, int blocking)
{
	struct shmcoll_task *t = n->tasks.head;
	int rc;

	t->blocking = blocking;
	rc = t->at == 0 ? shmcoll__node_enter(n, t->fn) : 0;
	if (rc == 0) {
		n->tasks.running = 1;
		rc = t->advance(n, t);
		n->tasks.running = 0;
	}
	if (rc != SHMCOLL_PENDING)
		finish(n, t, rc);
	return rc;
}

int shmcoll__task_run_queued(struct shmcoll_node *n, struct shmcoll_task *t)
{
	enqueue(n, t);
	return shmcoll__task_wait(n, t);
}

void shmcoll__progress(struct shmcoll_node *n)
{
	if (n->tasks.running)
		return;
	while (n->tasks.head)
		if (advance_head(n, 0) == SHMCOLL_PENDING)
			return;
}

void shmcoll__task_start(struct shmcoll_node *n, struct shmcoll_task *t)
{
	enqueue(n, t);
	shmcoll__progress(n);
}

void shmcoll__task_test(struct shmcoll_node *n, struct shmcoll_task *t, int *done)
{
	shmcoll__progress(n);
	*done = t->done;
}

int shmcoll__task_wait(struct shmcoll_node *n, struct shmcoll_task *t)
{
	/* The tasks before t first, each to its end: they hold the steps before t's. */
	while (!t->done)
		advance_head(n, 1);
	return t->rc;
}

int shmcoll__nothing(struct shmcoll_node *n, struct shmcoll_task *t)
{
	(void)n;
	(void)t;
	return 0;
}
