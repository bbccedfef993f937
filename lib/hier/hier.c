/* hier.c - the calls of a multi-node communicator, run one at a time in the order they were
 * started, and the two kinds of stage its collectives (colls.c) are made of: node
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
		if (t->blocking) {
			rc = shmcoll__node_enter(h->local, t->node.fn);
			if (rc == 0)
				rc = shmcoll__task_run(h->local, &t->node);
			return shmcoll__hier_node_rc(h, rc);
		}
		/* Queued, the task enters when it reaches the head of the node's queue. */
		t->node_on = 1;
		shmcoll__task_start(h->local, &t->node);
	}
	if (t->blocking) {
		rc = shmcoll__task_wait(h->local, &t->node);
	} else {
		shmcoll__task_test(h->local, &t->node, &done);
		if (!done)
			return SHMCOLL_PENDING;
		rc = t->node.rc;
	}
	t->node_on = 0;
	return shmcoll__hier_node_rc(h, rc);
}

int hier__await_lead(struct shmcoll_hier *h, struct hier_task *t)
{
	return hier__lead_advance(h, &t->lead, t->blocking);
}

static void finish(struct shmcoll_hier *h, struct hier_task *t, int rc)
{
	t->rc = rc;
	t->done = 1;
	h->tasks.head = t->next;
	if (!h->tasks.head)
		h->tasks.tail = NULL;
	h->tasks.outstanding--;
}

/* Advances the head call once; one that reaches the head after an earlier call broke the
 * communicator fails as a call entering it does. */
static int advance_head(struct shmcoll_hier *h, int blocking)
{
	struct hier_task *t = h->tasks.head;
	int rc;

	t->blocking = blocking;
	rc = t->at == 0 ? shmcoll__hier_enter(h, t->fn) : 0;
	if (rc == 0)
		rc = t->advance(h, t);
	if (rc != SHMCOLL_PENDING)
		finish(h, t, rc);
	return rc;
}

static void enqueue(struct shmcoll_hier *h, struct hier_task *t)
{
	t->next = NULL;
	t->at = t->done = t->node_on = t->lead_on = 0;
	if (h->tasks.tail)
		h->tasks.tail->next = t;
	else
		h->tasks.head = t;
	h->tasks.tail = t;
	h->tasks.outstanding++;
}

int shmcoll__hier_wait(struct shmcoll_hier *h, struct hier_task *t)
{
	/* The calls before t first, each to its end: their stages come before t's on every
	 * rank of every node. */
	while (!t->done)
		advance_head(h, 1);
	return t->rc;
}

int hier__task_run(struct shmcoll_hier *h, struct hier_task *t)
{
	if (!h->tasks.head) {
		t->next = NULL;
		t->at = t->done = t->node_on = t->lead_on = 0;
		t->blocking = 1;
		return t->advance(h, t);
	}
	enqueue(h, t);
	return shmcoll__hier_wait(h, t);
}

void shmcoll__hier_start(struct shmcoll_hier *h, struct hier_task *t)
{
	enqueue(h, t);
	while (h->tasks.head && advance_head(h, 0) != SHMCOLL_PENDING)
		;
}

int shmcoll__hier_progress(struct shmcoll_hier *h)
{
	while (h->tasks.head && advance_head(h, 0) != SHMCOLL_PENDING)
		;
	return h->tasks.head != NULL;
}

void shmcoll__hier_test(struct shmcoll_hier *h, struct hier_task *t, int *done)
{
	while (h->tasks.head && advance_head(h, 0) != SHMCOLL_PENDING)
		;
	*done = t->done;
}

int shmcoll__hier_result(const struct hier_task *t)
{
	return t->rc;
}

int shmcoll__hier_done(const struct hier_task *t)
{
	return t->done;
}

void shmcoll__hier_call_free(struct hier_task *t)
{
	if (t) {
		free(t->sub);
		free(t->vbuf);
	}
	free(t);
}
