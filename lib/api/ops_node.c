/* ops_node.c - the operations of a node communicator (api.h's struct api_ops): the node's
 * protocols (lib/coll), its tasks (lib/core/task.h) and its point-to-point engine
 * (lib/core/p2p.h). Each entry only unwraps the communicator: the checks are the caller's. */
#include <errno.h>

#include "lib/api/api.h"
#include "lib/coll/coll.h"
#include "lib/core/p2p.h"

/* Every call moves the point-to-point operations outstanding along. */
static int enter(shmcoll_comm *c, const char *fn)
{
	struct shmcoll_node *n = c->u.node;
	int rc = shmcoll__node_enter(n, fn);

	if (rc == 0 && n->p2p.active)
		shmcoll__node_progress(n);
	return rc;
}

static void brk(shmcoll_comm *c, int err)
{
	shmcoll__node_break(c->u.node, err);
}

static void abort_(shmcoll_comm *c)
{
	shmcoll__node_break(c->u.node, ECANCELED);
}

static int destroy(shmcoll_comm *c)
{
	return shmcoll__node_destroy(c->u.node);
}

static int advance(shmcoll_comm *c)
{
	struct shmcoll_node *n = c->u.node;

	shmcoll__node_progress(n);
	return shmcoll__queue_busy(&n->tasks) || n->p2p.active;
}

/* The entries that only unwrap the communicator and call its kind's collective. */
API_OPS_FORWARD(shmcoll__node, node)

static int run(shmcoll_comm *c, const struct shmcoll_args *a)
{
	struct shmcoll_task t;

	shmcoll__kinds[a->kind].init(c->u.node, &t, a);
	t.fn = a->fn;
	return shmcoll__node_run(c->u.node, &t);
}

static int start(shmcoll_comm *c, shmcoll_request *r, const struct shmcoll_args *a)
{
	shmcoll__kinds[a->kind].init(c->u.node, &r->u.task, a);
	r->u.task.fn = a->fn;
	shmcoll__task_start_entered(c->u.node, &r->u.task);
	return 0;
}

static int send(shmcoll_comm *c, const char *fn, const void *buf, size_t bytes, int dest, int tag,
                int sync)
{
	struct shmcoll_p2p_op op;

	if (sync) {
		shmcoll__p2p_issend(c->u.node, &op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	} else {
		if (shmcoll__p2p_send_fast(c->u.node, buf, bytes, dest, tag))
			return 0;
		shmcoll__p2p_isend(c->u.node, &op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	}
	return shmcoll__p2p_wait(c->u.node, &op);
}

static int recv(shmcoll_comm *c, const char *fn, void *buf, size_t bytes, int source, int tag,
                size_t es, shmcoll_status *status)
{
	struct shmcoll_p2p_op op;
	int rc;

	if (shmcoll__p2p_recv_fast(c->u.node, &op, buf, bytes, source, tag)) {
		api__status(status, &op, es, 0);
		return 0;
	}
	shmcoll__p2p_irecv(c->u.node, &op, fn, buf, bytes, source, tag, P2P_CTX_USER);
	rc = shmcoll__p2p_wait(c->u.node, &op);
	api__status(status, &op, es, rc);
	return rc == -EMSGSIZE ? api__cut(c, fn, &op, bytes) : rc;
}

static int sendrecv(shmcoll_comm *c, const char *fn, const void *sbuf, size_t sbytes, int dest,
                    int stag, void *rbuf, size_t rbytes, int source, int rtag, size_t es,
                    shmcoll_status *status)
{
	struct shmcoll_p2p_op s, r;
	int rc, rrc;

	/* The receive first: a message to ourselves then finds it posted. */
	shmcoll__p2p_irecv(c->u.node, &r, fn, rbuf, rbytes, source, rtag, P2P_CTX_USER);
	shmcoll__p2p_isend(c->u.node, &s, fn, sbuf, sbytes, dest, stag, P2P_CTX_USER);
	rc = shmcoll__p2p_wait(c->u.node, &s);
	if (rc < 0 && rc != -EMSGSIZE)
		shmcoll__p2p_cancel(c->u.node, &r); /* a send that failed alone (out of memory) */
	rrc = shmcoll__p2p_wait(c->u.node, &r);
	api__status(status, &r, es, rrc);
	if (rrc == -EMSGSIZE && !rc)
		api__cut(c, fn, &r, rbytes);
	return rc ? rc : rrc;
}

static void isend(shmcoll_comm *c, shmcoll_request *r, const char *fn, const void *buf,
                  size_t bytes, int dest, int tag, int sync)
{
	if (sync)
		shmcoll__p2p_issend(c->u.node, &r->u.op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	else
		shmcoll__p2p_isend(c->u.node, &r->u.op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
}

static void irecv(shmcoll_comm *c, shmcoll_request *r, const char *fn, void *buf, size_t bytes,
                  int source, int tag)
{
	shmcoll__p2p_irecv(c->u.node, &r->u.op, fn, buf, bytes, source, tag, P2P_CTX_USER);
}

static int peek(shmcoll_comm *c, int source, int tag, int *src, int *rtag, uint64_t *bytes)
{
	return shmcoll__p2p_peek(c->u.node, source, tag, P2P_CTX_USER, src, rtag, bytes);
}

static int wait_until(shmcoll_comm *c, const char *fn, int (*ready)(void *), void *arg, int source)
{
	return shmcoll__node_wait_until(c->u.node, fn, ready, arg, source);
}

const struct api_ops api__node_ops = {
    .enter = enter,
    .brk = brk,
    .abort = abort_,
    .destroy = destroy,
    .advance = advance,
    .allreduce = allreduce,
    .reduce = reduce,
    .bcast = bcast,
    .allgather = allgather,
    .reduce_scatter = reduce_scatter,
    .gather = gather,
    .scatter = scatter,
    .alltoall = alltoall,
    .barrier = barrier,
    .malloc = malloc_,
    .free = free_,
    .run = run,
    .start = start,
    .coll = REQ_NODE,
    .p2p = REQ_P2P,
    .send = send,
    .recv = recv,
    .sendrecv = sendrecv,
    .isend = isend,
    .irecv = irecv,
    .peek = peek,
    .wait_until = wait_until,
};
