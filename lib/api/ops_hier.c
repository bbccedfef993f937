/* ops_hier.c - the operations of a communicator over several nodes (api.h's struct
 * api_ops): lib/hier's compositions, its calls' queue and its point-to-point. Each entry only
 * unwraps the communicator: the checks are the caller's. */
#include <errno.h>

#include "lib/api/api.h"
#include "lib/core/p2p.h"
#include "lib/hier/hier.h"

static int enter(shmcoll_comm *c, const char *fn)
{
	return shmcoll__hier_enter(c->u.hier, fn);
}

static void brk(shmcoll_comm *c, int err)
{
	shmcoll__hier_break(c->u.hier, err);
}

static void abort_(shmcoll_comm *c)
{
	shmcoll__hier_abort(c->u.hier);
}

static int destroy(shmcoll_comm *c)
{
	return shmcoll__hier_destroy(c->u.hier);
}

/* Its own calls, then its node's: the node communicator is where their stages and the
 * point-to-point operations of this node wait. */
static int advance(shmcoll_comm *c)
{
	struct shmcoll_node *n = c->local;
	int more = shmcoll__hier_progress(c->u.hier);

	shmcoll__node_progress(n);
	return more || shmcoll__queue_busy(&n->tasks) || n->p2p.active;
}

/* The entries that only unwrap the communicator and call its kind's collective. */
API_OPS_FORWARD(shmcoll__hier, hier)

/* A call of a on the heap (it outlives the start): the fixed-count kinds and the
 * variable-count ones are made by different parts of lib/hier. NULL when out of memory. */
static struct hier_task *call_new(shmcoll_comm *c, const struct shmcoll_args *a)
{
	if (a->kind <= KIND_ALLTOALL)
		return shmcoll__hier_call_new(c->u.hier, a->kind, a->send, a->recv, a->count, a->dt,
		                              a->op, a->root);
	return shmcoll__hier_vcall_new(c->u.hier, a->kind, a->send, a->scount, a->sc, a->sd,
	                               a->recv, a->rc, a->rd, a->count, a->dt, a->op, a->root);
}

static int run(shmcoll_comm *c, const struct shmcoll_args *a)
{
	struct hier_task *t = call_new(c, a);

	if (!t)
		return api__fail(c, -ENOMEM, "%s: out of memory", a->fn);
	return shmcoll__hier_vrun(c->u.hier, t);
}

static int start(shmcoll_comm *c, shmcoll_request *r, const struct shmcoll_args *a)
{
	struct hier_task *t = call_new(c, a);

	if (!t)
		return -ENOMEM;
	r->u.hier = t;
	shmcoll__hier_start(c->u.hier, t);
	return 0;
}

static int send(shmcoll_comm *c, const char *fn, const void *buf, size_t bytes, int dest, int tag,
                int sync)
{
	struct hier_p2p_op op;

	(void)sync;
	shmcoll__hier_isend(c->u.hier, &op, fn, buf, bytes, dest, tag);
	return shmcoll__hier_p2p_wait(c->u.hier, &op);
}

static int recv(shmcoll_comm *c, const char *fn, void *buf, size_t bytes, int source, int tag,
                size_t es, shmcoll_status *status)
{
	struct hier_p2p_op op;
	int rc;

	shmcoll__hier_irecv(c->u.hier, &op, fn, buf, bytes, source, tag);
	rc = shmcoll__hier_p2p_wait(c->u.hier, &op);
	api__status(status, &op.node, es, rc);
	return rc == -EMSGSIZE ? api__cut(c, fn, &op.node, bytes) : rc;
}

static int sendrecv(shmcoll_comm *c, const char *fn, const void *sbuf, size_t sbytes, int dest,
                    int stag, void *rbuf, size_t rbytes, int source, int rtag, size_t es,
                    shmcoll_status *status)
{
	struct hier_p2p_op s, r;
	int rc, rrc;

	shmcoll__hier_irecv(c->u.hier, &r, fn, rbuf, rbytes, source, rtag);
	shmcoll__hier_isend(c->u.hier, &s, fn, sbuf, sbytes, dest, stag);
	rc = shmcoll__hier_p2p_wait(c->u.hier, &s);
	/* A send fails only with the communicator broken: the receive then fails too. */
	rrc = shmcoll__hier_p2p_wait(c->u.hier, &r);
	api__status(status, &r.node, es, rrc);
	if (rrc == -EMSGSIZE && !rc)
		api__cut(c, fn, &r.node, rbytes);
	return rc ? rc : rrc;
}

static void isend(shmcoll_comm *c, shmcoll_request *r, const char *fn, const void *buf,
                  size_t bytes, int dest, int tag, int sync)
{
	(void)sync;
	shmcoll__hier_isend(c->u.hier, &r->u.hop, fn, buf, bytes, dest, tag);
}

static void irecv(shmcoll_comm *c, shmcoll_request *r, const char *fn, void *buf, size_t bytes,
                  int source, int tag)
{
	shmcoll__hier_irecv(c->u.hier, &r->u.hop, fn, buf, bytes, source, tag);
}

static int peek(shmcoll_comm *c, int source, int tag, int *src, int *rtag, uint64_t *bytes)
{
	return shmcoll__hier_p2p_peek(c->u.hier, source, tag, src, rtag, bytes);
}

/* The node's wait woken by a message from anywhere (one from another node arrives on the
 * wire, not from source's node slot); its failure breaks the whole communicator. */
static int wait_until(shmcoll_comm *c, const char *fn, int (*ready)(void *), void *arg, int source)
{
	int rc = shmcoll__node_wait_until(c->local, fn, ready, arg, P2P_ANY);

	(void)source;
	return rc < 0 ? shmcoll__hier_node_rc(c->u.hier, rc) : rc;
}

const struct api_ops api__hier_ops = {
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
    .coll = REQ_HIER,
    .p2p = REQ_HP2P,
    .send = send,
    .recv = recv,
    .sendrecv = sendrecv,
    .isend = isend,
    .irecv = irecv,
    .peek = peek,
    .wait_until = wait_until,
};

/* A hosted communicator's refusals: its transport is the host's, called only on the thread
 * in a call (a non-blocking call would be advanced by the progress thread or another
 * communicator's wait), and it has no wire for messages between nodes' ranks. */
static int refuse(shmcoll_comm *c, const char *fn)
{
	return api__fail(c, -ENOTSUP,
	                 "%s: not on a communicator over a host's transport "
	                 "(shmcoll_comm_create_hosted): blocking collectives only",
	                 fn);
}

static int hosted_start(shmcoll_comm *c, shmcoll_request *r, const struct shmcoll_args *a)
{
	(void)r;
	return refuse(c, a->fn);
}

static int hosted_send(shmcoll_comm *c, const char *fn, const void *buf, size_t bytes, int dest,
                       int tag, int sync)
{
	(void)buf, (void)bytes, (void)dest, (void)tag, (void)sync;
	return refuse(c, fn);
}

static int hosted_recv(shmcoll_comm *c, const char *fn, void *buf, size_t bytes, int source,
                       int tag, size_t es, shmcoll_status *status)
{
	(void)buf, (void)bytes, (void)source, (void)tag, (void)es, (void)status;
	return refuse(c, fn);
}

static int hosted_sendrecv(shmcoll_comm *c, const char *fn, const void *sbuf, size_t sbytes,
                           int dest, int stag, void *rbuf, size_t rbytes, int source, int rtag,
                           size_t es, shmcoll_status *status)
{
	(void)sbuf, (void)sbytes, (void)dest, (void)stag, (void)rbuf, (void)rbytes;
	(void)source, (void)rtag, (void)es, (void)status;
	return refuse(c, fn);
}

/* r is a request of kind REQ_DONE (the table's p2p): its wait returns the refusal. */
static void hosted_isend(shmcoll_comm *c, shmcoll_request *r, const char *fn, const void *buf,
                         size_t bytes, int dest, int tag, int sync)
{
	(void)buf, (void)bytes, (void)dest, (void)tag, (void)sync;
	r->rc = refuse(c, fn);
}

static void hosted_irecv(shmcoll_comm *c, shmcoll_request *r, const char *fn, void *buf,
                         size_t bytes, int source, int tag)
{
	(void)buf, (void)bytes, (void)source, (void)tag;
	r->rc = refuse(c, fn);
}

/* Nothing ever arrives (shmcoll_iprobe finds nothing), and shmcoll_probe is refused. */
static int hosted_peek(shmcoll_comm *c, int source, int tag, int *src, int *rtag, uint64_t *bytes)
{
	(void)c, (void)source, (void)tag, (void)src, (void)rtag, (void)bytes;
	return 0;
}

static int hosted_wait_until(shmcoll_comm *c, const char *fn, int (*ready)(void *), void *arg,
                             int source)
{
	(void)ready, (void)arg, (void)source;
	return refuse(c, fn);
}

const struct api_ops api__hosted_ops = {
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
    .start = hosted_start,
    .coll = REQ_HIER,
    .p2p = REQ_DONE,
    .send = hosted_send,
    .recv = hosted_recv,
    .sendrecv = hosted_sendrecv,
    .isend = hosted_isend,
    .irecv = hosted_irecv,
    .peek = hosted_peek,
    .wait_until = hosted_wait_until,
};
