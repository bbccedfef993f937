/* hier.c - the calls of a multi-node communicator as tasks of the engine's queue
 * (lib/core/queue.h), and the two kinds of stage its collectives (colls.c) are made of: node
 * collectives and the leaders' exchanges (lead.c). comm.c makes and ends the communicator;
 * state.c fails it. */
#include <stdlib.h>

#include "lib/hier/impl.h"

int hier__await_node(struct shmcoll_hier *h, struct hier_task *t)
{
	int rc, done;

	/* A node stage enters the node communicator first, as a call of its own would: a rank
	 * of the node that failed meanwhile is found before anything is written. */
	if (!t->node_on) {
		if (t->head.blocking) {
			rc = shmcoll__node_enter(h->local, t->node.fn);
			if (rc == 0)
				rc = shmcoll__task_run(h->local, &t->node);
			return shmcoll__hier_node_rc(h, rc);
		}
		/* Queued, the task enters when it reaches the head of the node's queue. */
		t->node_on = 1;
		shmcoll__task_start(h->local, &t->node);
	}
	if (t->head.blocking) {
		rc = shmcoll__task_wait(h->local, &t->node);
	} else {
		shmcoll__task_test(h->local, &t->node, &done);
		if (!done)
			return SHMCOLL_PENDING;
		rc = t->node.head.rc;
	}
	t->node_on = 0;
	return shmcoll__hier_node_rc(h, rc);
}

int hier__await_lead(struct shmcoll_hier *h, struct hier_task *t)
{
	t->lead.head.blocking = t->head.blocking;
	return hier__lead_advance(h, &t->lead);
}

/* A call reaching the head of the queue after an earlier call broke the communicator fails
 * as a call entering it does. */
static int hier_enter(struct shmcoll_queue *q, struct shmcoll_task_head *t)
{
	return shmcoll__hier_enter(shmcoll__entry(q, struct shmcoll_hier, tasks),
	                           shmcoll__entry(t, struct hier_task, head)->fn);
}

static int hier_advance(struct shmcoll_queue *q, struct shmcoll_task_head *ht)
{
	struct hier_task *t = shmcoll__entry(ht, struct hier_task, head);

	return t->advance(shmcoll__entry(q, struct shmcoll_hier, tasks), t);
}

static const struct shmcoll_queue_class hier_calls = {hier_enter, hier_advance};

void hier__queue_init(struct shmcoll_hier *h)
{
	h->tasks.cls = &hier_calls;
}

/* A call joining the queue has no stage in flight. */
static struct shmcoll_task_head *fresh(struct hier_task *t)
{
	t->node_on = t->lead_on = 0;
	return &t->head;
}

int shmcoll__hier_wait(struct shmcoll_hier *h, struct hier_task *t)
{
	/* The calls before t first, each to its end: their stages come before t's on every
	 * rank of every node. */
	return shmcoll__queue_wait(&h->tasks, &t->head);
}

int hier__task_run(struct shmcoll_hier *h, struct hier_task *t)
{
	if (!shmcoll__queue_busy(&h->tasks)) {
		fresh(t)->at = 0;
		t->head.blocking = 1;
		return t->advance(h, t);
	}
	return shmcoll__queue_run(&h->tasks, fresh(t));
}

void shmcoll__hier_start(struct shmcoll_hier *h, struct hier_task *t)
{
	shmcoll__queue_start(&h->tasks, fresh(t));
}

int shmcoll__hier_progress(struct shmcoll_hier *h)
{
	return shmcoll__queue_progress(&h->tasks);
}

void shmcoll__hier_test(struct shmcoll_hier *h, struct hier_task *t, int *done)
{
	*done = shmcoll__queue_test(&h->tasks, &t->head);
}

int shmcoll__hier_result(const struct hier_task *t)
{
	return t->head.rc;
}

int shmcoll__hier_done(const struct hier_task *t)
{
	return t->head.done;
}

void shmcoll__hier_call_free(struct hier_task *t)
{
	if (t) {
		free(t->sub);
		free(t->vbuf);
	}
	free(t);
}
