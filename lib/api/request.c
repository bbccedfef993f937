/* request.c - the public requests of non-blocking operations: made when an operation starts,
 * tested, waited for, released. A request is a point-to-point operation of a node
 * communicator, a collective task of one (lib/core/task.h), or a call of a communicator over
 * several nodes (lib/hier); the memory of released ones is kept by their communicator for the
 * next (up to KEEP_REQS), so a start and a wait cost no allocation. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/api.h"
#include "lib/coll/coll.h"
#include "lib/core/p2p.h"
#include "lib/hier/hier.h"

/* Released requests a communicator keeps for reuse: the outstanding ones of a window of
 * 64 isends, and more. */
#define KEEP_REQS 256

shmcoll_request *api__req_new(shmcoll_comm *c, const char *fn, enum req_kind kind)
{
	struct shmcoll_link *kept = shmcoll__list_pop(&c->free_req);
	shmcoll_request *r;

	if (kept) {
		r = shmcoll__entry(kept, shmcoll_request, link);
		c->nfree--;
	} else {
		r = malloc(sizeof(*r));
		if (!r) {
			api__fail(c, -ENOMEM, "%s: out of memory for a request", fn);
			return NULL;
		}
	}
	r->comm = c;
	r->kind = kind;
	r->recv = 0;
	r->rc = 0;
	r->es = 1;
	c->outstanding++;
	return r;
}

static void req_release(shmcoll_request *r)
{
	shmcoll_comm *c = r->comm;

	if (r->kind == REQ_HIER)
		shmcoll__hier_call_free(r->u.hier);
	c->outstanding--;
	if (c->nfree >= KEEP_REQS) {
		free(r);
		return;
	}
	shmcoll__list_push_front(&c->free_req, &r->link);
	c->nfree++;
}

void api__req_drain(shmcoll_comm *c)
{
	struct shmcoll_link *kept;

	while ((kept = shmcoll__list_pop(&c->free_req)) != NULL)
		free(shmcoll__entry(kept, shmcoll_request, link));
	c->nfree = 0;
}

int api__cut(shmcoll_comm *c, const char *fn, const struct shmcoll_p2p_op *op, size_t bytes)
{
	return api__fail(c, -EMSGSIZE,
	                 "%s: a message of %llu bytes from rank %d (tag %d) was cut to %zu", fn,
	                 (unsigned long long)op->total, op->src, op->rtag, bytes);
}

void api__status(shmcoll_status *st, const struct shmcoll_p2p_op *op, size_t es, int rc)
{
	if (!st)
		return;
	st->source = op->src;
	st->tag = op->rtag;
	st->bytes = op->got;
	st->count = shmcoll__elems(op->got, es);
	st->total = op->total;
	st->error = rc;
}

int api__istart(shmcoll_comm *c, const struct shmcoll_args *a, int none, shmcoll_request **req)
{
	shmcoll_request *r = api__req_new(c, a->fn, none ? REQ_DONE : c->ops->coll);
	int rc;

	if (!r)
		return -ENOMEM;
	if (r->kind != REQ_DONE && (rc = c->ops->start(c, r, a)) < 0) {
		r->kind = REQ_DONE;
		req_release(r);
		/* A table that refuses the call (-ENOTSUP) has said why. */
		return rc == -ENOMEM ? api__fail(c, rc, "%s: out of memory for the call", a->fn)
		                     : rc;
	}
	*req = r;
	return 0;
}

/* Whether r is complete already, as a node communicator's request can be when its start or
 * an earlier pass finished it (then r->rc is its result): such a wait has nothing to move, and
 * skips the request's advance. */
static inline int req_settled(shmcoll_request *r)
{
	const struct shmcoll_task_head *h;

	switch (r->kind) {
	case REQ_DONE:
		return 1;
	case REQ_NODE:
		h = &r->u.task.head;
		break;
	case REQ_P2P:
		h = &r->u.op.head;
		break;
	default:
		return 0;
	}
	if (h->done)
		r->rc = h->rc;
	return h->done;
}

/* How far req_advance moves a request. */
enum req_how {
	LOOK, /* not at all: whether it is complete, as far as its last advance left it */
	PASS, /* one pass over its communicator that never waits */
	WAIT, /* until it is complete, in the wait of its kind */
};

/* Moves r as how says, holding its communicator (unless it is held, the one the caller
 * holds); whether it is complete, and then r->rc is its result. A WAIT is the engine's bounded wait
 * of its kind, which on its slow path moves every other communicator of the process too. The one
 * place that knows what each kind of request is. */
static int req_advance(shmcoll_request *r, enum req_how how, shmcoll_comm *held)
{
	shmcoll_comm *c = r->comm;
	int done = 1;
	API_HOLD(c == held ? NULL : c);

	switch (r->kind) {
	case REQ_DONE:
		break;
	case REQ_P2P:
		if (how == WAIT) {
			r->rc = shmcoll__p2p_wait(c->u.node, &r->u.op);
			break;
		}
		if (how == PASS && !r->u.op.head.done)
			shmcoll__p2p_test(c->u.node, &r->u.op, &done);
		done = r->u.op.head.done;
		r->rc = r->u.op.head.rc;
		break;
	case REQ_NODE:
		if (how == WAIT) {
			r->rc = shmcoll__task_wait(c->u.node, &r->u.task);
			break;
		}
		if (how == PASS && !r->u.task.head.done)
			shmcoll__task_test(c->u.node, &r->u.task, &done);
		done = r->u.task.head.done;
		r->rc = r->u.task.head.rc;
		break;
	case REQ_HIER:
		if (how == WAIT)
			shmcoll__hier_wait(c->u.hier, r->u.hier);
		else if (how == PASS)
			shmcoll__hier_test(c->u.hier, r->u.hier, &done);
		else
			done = shmcoll__hier_done(r->u.hier);
		r->rc = shmcoll__hier_result(r->u.hier);
		break;
	case REQ_HP2P:
		/* Its test settles its result: a look is a pass. */
		if (how == WAIT)
			r->rc = shmcoll__hier_p2p_wait(c->u.hier, &r->u.hop);
		else
			r->rc = shmcoll__hier_p2p_test(c->u.hier, &r->u.hop, &done);
		break;
	}
	return done;
}

/* One step of a pass over an array of requests: r's communicator is moved unless the step
 * before (*moved) moved the same one just now. */
static int req_step(shmcoll_request *r, shmcoll_comm **moved, shmcoll_comm *held)
{
	enum req_how how = r->comm == *moved ? LOOK : PASS;

	if (r->kind != REQ_DONE)
		*moved = r->comm;
	return req_advance(r, how, held);
}

/* Takes *slot, complete, out of the caller's hands: its status filled (st may be NULL),
 * released, *slot = NULL. Its result. */
static inline __attribute__((always_inline)) int req_take(shmcoll_request **slot,
                                                          shmcoll_status *st, shmcoll_comm *held)
{
	shmcoll_request *r = *slot;
	shmcoll_comm *c = r->comm;
	int rc = r->rc;
	API_HOLD(c == held ? NULL : c);

	*slot = NULL;
	if (r->recv) {
		const struct shmcoll_p2p_op *op = r->kind == REQ_HP2P ? &r->u.hop.node : &r->u.op;

		api__status(st, op, r->es, rc);
		if (rc == -EMSGSIZE)
			rc = api__cut(c, "shmcoll_wait (a receive)", op, op->bytes);
	}
	req_release(r);
	return rc;
}

/* The requests of a wait over an array: the live ones are reqs[lo .. n-1] that are not
 * NULL (every entry before lo was taken). */
struct reqs {
	size_t lo, n;
	shmcoll_request **reqs;
	shmcoll_comm *held; /* the communicator the wait holds, if any */
};

/* The communicator of the first live request, or NULL. */
static shmcoll_comm *reqs_comm(const struct reqs *a)
{
	size_t i;

	for (i = a->lo; i < a->n; i++)
		if (a->reqs[i])
			return a->reqs[i]->comm;
	return NULL;
}

/* Whether every live request is of one communicator. */
static int reqs_one_comm(const struct reqs *a)
{
	shmcoll_comm *c = reqs_comm(a);
	size_t i;

	for (i = a->lo; i < a->n; i++)
		if (a->reqs[i] && a->reqs[i]->comm != c)
			return 0;
	return 1;
}

/* ready() of the node wait: whether any live request is complete, each moved once. */
static int reqs_any(void *arg)
{
	const struct reqs *a = arg;
	shmcoll_comm *moved = NULL;
	size_t i;

	for (i = a->lo; i < a->n; i++)
		if (a->reqs[i] && req_step(a->reqs[i], &moved, a->held))
			return 1;
	return 0;
}

/* One pass over the live requests, holding the first one's communicator throughout (the
 * holds of its requests nest: no atomic operation each): each moved (req_step), and with
 * take each complete one taken (statuses as waitall fills them, *first its first error) -
 * else the index of the first complete is returned. Returns n when none is, and sets a->lo
 * past the taken ones and *live to how many are left. */
static size_t reqs_pass(struct reqs *a, int take, shmcoll_status *statuses, int *first,
                        size_t *live)
{
	shmcoll_comm *moved = NULL;
	size_t i, lo = a->n;
	int rc, recv;
	shmcoll_comm *held = reqs_comm(a);
	API_HOLD(held);

	*live = 0;
	for (i = a->lo; i < a->n; i++) {
		shmcoll_request **slot = &a->reqs[i];

		if (!*slot)
			continue;
		if (!req_step(*slot, &moved, held)) {
			if (lo == a->n)
				lo = i;
			++*live;
			continue;
		}
		if (!take)
			return i;
		recv = (*slot)->recv;
		rc = req_take(slot, statuses ? &statuses[i] : NULL, held);
		if (!recv && statuses)
			statuses[i].error = rc;
		if (rc && !*first)
			*first = rc;
	}
	a->lo = lo;
	return a->n;
}

/* The one wait of requests, after a pass found none of the live ones complete (live of
 * them, at least one): returns once one may be. One left, or (all: every one is needed)
 * all of one communicator, it is the first one's own wait, which moves its whole
 * communicator (and on its slow path every other of the process). Otherwise (requests of
 * several communicators, or any of one), the bounded wait of the first one's node (spin,
 * yield, then sleep on its bell in 1 ms slices; the timeout counted afresh, abort and dead
 * peers looked for), every request moved at every turn, until any of them is complete. */
static void reqs_block(struct reqs *a, size_t live, int all, const char *fn)
{
	shmcoll_request *r;
	size_t i;
	int rc;

	for (i = a->lo; !a->reqs[i]; i++)
		;
	r = a->reqs[i];
	if (live == 1 || (all && reqs_one_comm(a))) {
		req_advance(r, WAIT, NULL);
		return;
	}
	{
		shmcoll_comm *c = r->comm;
		API_HOLD(c);

		a->held = c;
		rc = shmcoll__node_wait_until(c->local, fn, reqs_any, a, P2P_ANY);
		a->held = NULL;
	}
	/* The node broke (or timed out) with none complete: r's own wait ends in its error. */
	if (rc < 0 && !reqs_any(a))
		req_advance(r, WAIT, NULL);
}

int shmcoll_wait(shmcoll_request **req, shmcoll_status *status)
{
	shmcoll_comm *c;

	if (!req)
		return -EINVAL;
	if (!*req)
		return 0;
	c = (*req)->comm;
	{
		API_HOLD(c);

		if (!req_settled(*req))
			req_advance(*req, WAIT, c);
		return req_take(req, status, c);
	}
}

int shmcoll_test(shmcoll_request **req, int *done, shmcoll_status *status)
{
	shmcoll_comm *c;

	if (!req || !done)
		return -EINVAL;
	*done = 1;
	if (!*req)
		return 0;
	c = (*req)->comm;
	{
		API_HOLD(c);

		if (req_advance(*req, PASS, c))
			return req_take(req, status, c);
	}
	/* A test moves everything too (MPI's progress rule). */
	shmcoll__progress_all();
	*done = 0;
	return 0;
}

int shmcoll_waitall(size_t n, shmcoll_request **reqs, shmcoll_status *statuses)
{
	struct reqs a = {0, n, reqs, NULL};
	size_t i, live;
	int first = 0;

	if (!reqs && n)
		return -EINVAL;
	for (i = 0; statuses && i < n; i++)
		if (!reqs[i])
			statuses[i].error = 0;
	/* Every request moved at every turn and taken as it completes: none waits for the
	 * ones before it in the array. */
	for (;;) {
		reqs_pass(&a, 1, statuses, &first, &live);
		if (!live)
			return first;
		reqs_block(&a, live, 1, "shmcoll_waitall");
	}
}

int shmcoll_testall(size_t n, shmcoll_request **reqs, int *done, shmcoll_status *statuses)
{
	struct reqs a = {0, n, reqs, NULL};
	shmcoll_comm *moved = NULL;
	size_t i;
	int all = 1;

	if ((!reqs && n) || !done)
		return -EINVAL;
	*done = 0;
	{
		shmcoll_comm *held = reqs_comm(&a);
		API_HOLD(held);

		for (i = 0; i < n; i++)
			if (reqs[i] && !req_step(reqs[i], &moved, held))
				all = 0;
	}
	if (!all) {
		shmcoll__progress_all();
		return 0;
	}
	*done = 1;
	return shmcoll_waitall(n, reqs, statuses);
}

int shmcoll_waitany(size_t n, shmcoll_request **reqs, size_t *index, shmcoll_status *status)
{
	struct reqs a = {0, n, reqs, NULL};
	size_t i, live;
	int first = 0;

	if ((!reqs && n) || !index)
		return -EINVAL;
	*index = SIZE_MAX;
	for (;;) {
		i = reqs_pass(&a, 0, NULL, &first, &live);
		if (i < n) {
			*index = i;
			return req_take(&reqs[i], status, NULL);
		}
		if (!live)
			return 0;
		reqs_block(&a, live, 0, "shmcoll_waitany");
	}
}
