/* task.c - a node communicator's queue (queue.h) of collectives (task.h). */
#include "lib/core/task.h"

static int node_enter(struct shmcoll_queue *q, struct shmcoll_task_head *h)
{
	struct shmcoll_node *n = shmcoll__entry(q, struct shmcoll_node, tasks);

	return shmcoll__node_enter(n, shmcoll__entry(h, struct shmcoll_task, head)->fn);
}

static int node_advance(struct shmcoll_queue *q, struct shmcoll_task_head *h)
{
	struct shmcoll_task *t = shmcoll__entry(h, struct shmcoll_task, head);

	return t->advance(shmcoll__entry(q, struct shmcoll_node, tasks), t);
}

static const struct shmcoll_queue_class node_tasks = {node_enter, node_advance};

void shmcoll__task_queue_init(struct shmcoll_node *n)
{
	n->tasks.cls = &node_tasks;
}

int shmcoll__task_run_queued(struct shmcoll_node *n, struct shmcoll_task *t)
{
	t->wait_since = 0;
	return shmcoll__queue_run(&n->tasks, &t->head);
}

void shmcoll__progress(struct shmcoll_node *n)
{
	shmcoll__queue_progress(&n->tasks);
}

void shmcoll__task_start(struct shmcoll_node *n, struct shmcoll_task *t)
{
	t->wait_since = 0;
	shmcoll__queue_start(&n->tasks, &t->head);
}

void shmcoll__task_test(struct shmcoll_node *n, struct shmcoll_task *t, int *done)
{
	*done = shmcoll__queue_test(&n->tasks, &t->head);
}

int shmcoll__task_wait(struct shmcoll_node *n, struct shmcoll_task *t)
{
	return shmcoll__queue_wait(&n->tasks, &t->head);
}

int shmcoll__nothing(struct shmcoll_node *n, struct shmcoll_task *t)
{
	(void)n;
	(void)t;
	return 0;
}
