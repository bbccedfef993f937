/* request.c - the public requests of non-blocking operations: made when an operation starts,
 * tested, waited for, released. A request is a point-to-point operation of a node
 * communicator, a collective task of one (lib/core/task.h), or a call of a communicator over
 * several nodes (lib/hier); the memory of released ones is kept by their communicator for the
 * next (up to KEEP_REQS), so a start and a wait cost no allocation. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/api/api.h"
#include "lib/coll/coll.h"
#include "lib/core/p2p.h"
#include "lib/hier/hier.h"

/* Released requests a communicator keeps for reuse: the outstanding ones of a window of
 * 64 isends, and more. */
#define KEEP_REQS 256

shmcoll_request *api__req_new(shmcoll_comm *c, const char *fn, enum req_kind kind)
{
	shmcoll_request *r = c->free_req;

	if (r) {
		c->free_req = r->next;
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
	r->next = NULL;
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
	r->next = c->free_req;
	c->free_req = r;
	c->nfree++;
}

void api__req_drain(shmcoll_comm *c)
{
	shmcoll_request *r;

	while ((r = c->free_req) != NULL) {
		c->free_req = r->next;
		free(r);
	}
	c->nfree = 0;
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

int api__istart(shmcoll_comm *c, const char *fn, uint32_t kind, const void *send, void *recv,
                size_t count, shmcoll_dtype dt, shmcoll_op op, int root, shmcoll_request **req)
{
	shmcoll_request *r;

	r = api__req_new(c, fn,
	                 count || kind == KIND_BARRIER
	                     ? (c->kind == COMM_HIER ? REQ_HIER : REQ_NODE)
	                     : REQ_DONE);
	if (!r)
		return -ENOMEM;
	if (r->kind == REQ_HIER) {
		r->u.hier =
		    shmcoll__hier_call_new(c->u.hier, kind, send, recv, count, dt, op, root);
		if (!r->u.hier) {
			r->kind = REQ_DONE;
			req_release(r);
			return api__fail(c, -ENOMEM, "%s: out of memory for the call", fn);
		}
		shmcoll__hier_start(c->u.hier, r->u.hier);
	} else if (r->kind == REQ_NODE) {
		shmcoll__coll_init(c->u.node, &r->u.task, kind, send, recv, count, dt, op, root);
		r->u.task.fn = fn;
		shmcoll__task_start(c->u.node, &r->u.task);
	}
	*req = r;
	return 0;
}

/* Moves r along without blocking; whether it is complete. */
static int req_poll(shmcoll_request *r)
{
	shmcoll_comm *c = r->comm;
	int done = 1;
	API_HOLD(c);

	switch (r->kind) {
	case REQ_DONE:
		break;
	case REQ_P2P:
		shmcoll__p2p_test(c->u.node, &r->u.op, &done);
		break;
	case REQ_NODE:
		shmcoll__node_progress(c->u.node);
		done = r->u.task.done;
		break;
	case REQ_HIER:
		shmcoll__hier_test(c->u.hier, r->u.hier, &done);
		break;
	case REQ_HP2P:
		shmcoll__hier_p2p_test(c->u.hier, &r->u.hop, &done);
		break;
	}
	return done;
}

/* Whether r is complete, without moving anything. */
static int req_done(const shmcoll_request *r)
{
	switch (r->kind) {
	case REQ_P2P:
		return r->u.op.done;
	case REQ_NODE:
		return r->u.task.done;
	case REQ_HIER:
		return 0; /* only shmcoll__hier_test tells */
	case REQ_HP2P:
		return r->u.hop.finished;
	default:
		return 1;
	}
}

/* Waits for r and releases it; its result, its status filled. */
static int req_finish(shmcoll_request *r, shmcoll_status *status)
{
	shmcoll_comm *c = r->comm;
	int rc = 0;
	API_HOLD(c);

	switch (r->kind) {
	case REQ_DONE:
		rc = r->rc;
		break;
	case REQ_P2P:
		rc = shmcoll__p2p_wait(c->u.node, &r->u.op);
		break;
	case REQ_NODE:
		rc = shmcoll__task_wait(c->u.node, &r->u.task);
		break;
	case REQ_HIER:
		rc = shmcoll__hier_wait(c->u.hier, r->u.hier);
		break;
	case REQ_HP2P:
		rc = shmcoll__hier_p2p_wait(c->u.hier, &r->u.hop);
		break;
	}
	if (r->recv) {
		const struct shmcoll_p2p_op *op = r->kind == REQ_HP2P ? &r->u.hop.node : &r->u.op;

		api__status(status, op, r->es, rc);
		if (rc == -EMSGSIZE)
			rc = api__cut(c, "shmcoll_wait (a receive)", op, op->bytes);
	}
	req_release(r);
	return rc;
}

int shmcoll_wait(shmcoll_request **req, shmcoll_status *status)
{
	if (!req)
		return -EINVAL;
	if (!*req)
		return 0;
	shmcoll_request *r = *req;

	*req = NULL;
	return req_finish(r, status);
}

int shmcoll_test(shmcoll_request **req, int *done, shmcoll_status *status)
{
	shmcoll_request *r;

	if (!req || !done)
		return -EINVAL;
	r = *req;
	*done = 1;
	if (!r)
		return 0;
	if (!req_poll(r)) {
		*done = 0;
		return 0;
	}
	*req = NULL;
	return req_finish(r, status);
}

int shmcoll_waitall(size_t n, shmcoll_request **reqs, shmcoll_status *statuses)
{
	int rc, first = 0;
	size_t i;

	if (!reqs && n)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		shmcoll_request *r = reqs[i];

		rc = 0;
		if (r) {
			int recv = r->recv; /* r may be freed by req_finish */

			reqs[i] = NULL;
			rc = req_finish(r, statuses ? &statuses[i] : NULL);
			if (!recv && statuses)
				statuses[i].error = rc;
		} else if (statuses) {
			statuses[i].error = 0;
		}
		if (rc && !first)
			first = rc;
	}
	return first;
}

int shmcoll_testall(size_t n, shmcoll_request **reqs, int *done, shmcoll_status *statuses)
{
	size_t i;

	if ((!reqs && n) || !done)
		return -EINVAL;
	*done = 0;
	for (i = 0; i < n; i++)
		if (reqs[i] && !req_poll(reqs[i]))
			return 0;
	*done = 1;
	return shmcoll_waitall(n, reqs, statuses);
}

struct any {
	size_t n;
	shmcoll_request **reqs;
};

static int any_done(void *arg)
{
	const struct any *a = arg;
	size_t i;

	for (i = 0; i < a->n; i++)
		if (a->reqs[i] && req_done(a->reqs[i]))
			return 1;
	return 0;
}

/* The wait of waitany on one node communicator, holding it (every request's comm is it). */
static int any_wait(struct shmcoll_node *node, struct any *a, size_t n)
{
	shmcoll_comm *c = NULL;
	size_t i;

	for (i = 0; i < n && !c; i++)
		if (a->reqs[i])
			c = a->reqs[i]->comm;
	API_HOLD(c);
	return shmcoll__node_wait_until(node, "shmcoll_waitany", any_done, a, -1);
}

int shmcoll_waitany(size_t n, shmcoll_request **reqs, size_t *index, shmcoll_status *status)
{
	struct shmcoll_node *node = NULL;
	struct any a = {n, reqs};
	const struct timespec nap = {0, 50000};
	size_t i, live = 0, spins = 0;
	int one_node = 1, rc;

	if ((!reqs && n) || !index)
		return -EINVAL;
	*index = SIZE_MAX;
	for (i = 0; i < n; i++) {
		if (!reqs[i])
			continue;
		live++;
		if (reqs[i]->comm->kind != COMM_NODE || (node && node != reqs[i]->comm->u.node))
			one_node = 0;
		node = reqs[i]->comm->kind == COMM_NODE ? reqs[i]->comm->u.node : NULL;
	}
	if (!live)
		return 0;
	for (;;) {
		for (i = 0; i < n; i++)
			if (reqs[i] && req_poll(reqs[i])) {
				shmcoll_request *r = reqs[i];

				*index = i;
				reqs[i] = NULL;
				return req_finish(r, status);
			}
		if (one_node && node) {
			/* All on one node communicator: its wait (spin, yield, sleep on the
			 * bell; timeout, abort and dead peers) until one is done. */
			rc = any_wait(node, &a, n);
			if (rc < 0 && !any_done(&a)) {
				for (i = 0; i < n && !reqs[i]; i++)
					;
				*index = i;
				shmcoll_request *r = reqs[i];

				reqs[i] = NULL;
				return req_finish(r, status);
			}
			continue;
		}
		/* Several communicators: each test moves its own along; back off. */
		if (++spins < 1000)
			sched_yield();
		else
			nanosleep(&nap, NULL);
	}
}
