/* p2p.c - the public point-to-point calls: each checks its arguments once, enters the
 * communicator and starts the operation on the node's engine (lib/core/p2p.h); the blocking
 * forms then wait for it, the non-blocking ones hand it out as a request (request.c). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/api/api.h"
#include "lib/core/p2p.h"

/* The checks of one side of a message: buf of count dtype elements (*bytes set), peer a rank
 * (a receive's source may be SHMCOLL_ANY_SOURCE), tag in 0 .. SHMCOLL_TAG_MAX (a receive's
 * may be SHMCOLL_ANY_TAG). */
static int check_side(shmcoll_comm *c, const char *fn, const void *buf, size_t count,
                      shmcoll_dtype dtype, int peer, int tag, int recv, size_t *bytes)
{
	const char *who = recv ? "source" : "dest";
	int rc = api__check_type(c, fn, dtype, count, 1, bytes);

	if (!rc)
		rc = api__check_buf(c, fn, "buf", buf, *bytes);
	if (rc)
		return rc;
	if ((peer < 0 || peer >= c->size) && !(recv && peer == SHMCOLL_ANY_SOURCE))
		return api__fail(c, -EINVAL, "%s: %s %d out of range 0..%d%s", fn, who, peer,
		                 c->size - 1, recv ? " (or SHMCOLL_ANY_SOURCE)" : "");
	if (tag < 0 && !(recv && tag == SHMCOLL_ANY_TAG))
		return api__fail(c, -EINVAL, "%s: tag %d out of range 0..%d%s", fn, tag,
		                 SHMCOLL_TAG_MAX, recv ? " (or SHMCOLL_ANY_TAG)" : "");
	return 0;
}

/* The blocking calls on a communicator over several nodes (lib/hier/p2p.c). */
static int hier_send(shmcoll_comm *c, const char *fn, const void *buf, size_t bytes, int dest,
                     int tag)
{
	struct hier_p2p_op op;

	shmcoll__hier_isend(c->u.hier, &op, fn, buf, bytes, dest, tag);
	return shmcoll__hier_p2p_wait(c->u.hier, &op);
}

static int hier_recv(shmcoll_comm *c, const char *fn, void *buf, size_t bytes, int source, int tag,
                     size_t es, shmcoll_status *status)
{
	struct hier_p2p_op op;
	int rc;

	shmcoll__hier_irecv(c->u.hier, &op, fn, buf, bytes, source, tag);
	rc = shmcoll__hier_p2p_wait(c->u.hier, &op);
	api__status(status, &op.node, es, rc);
	return rc == -EMSGSIZE ? api__cut(c, fn, &op.node, bytes) : rc;
}

static int hier_sendrecv(shmcoll_comm *c, const char *fn, const void *sbuf, size_t sbytes, int dest,
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

/* A blocking send, standard or synchronous (sync: it returns once a receive has matched
 * it; across nodes it is the standard send). */
static int send(const char *fn, const void *buf, size_t count, shmcoll_dtype dtype, int dest,
                int tag, shmcoll_comm *c, int sync)
{
	struct shmcoll_p2p_op op;
	size_t bytes;
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = check_side(c, fn, buf, count, dtype, dest, tag, 0, &bytes);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc)
		return rc;
	if (c->kind == COMM_HIER)
		return hier_send(c, fn, buf, bytes, dest, tag);
	if (sync) {
		shmcoll__p2p_issend(c->u.node, &op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	} else {
		if (shmcoll__p2p_send_fast(c->u.node, buf, bytes, dest, tag))
			return 0;
		shmcoll__p2p_isend(c->u.node, &op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	}
	return shmcoll__p2p_wait(c->u.node, &op);
}

int shmcoll_send(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                 shmcoll_comm *c)
{
	return send("shmcoll_send", buf, count, dtype, dest, tag, c, 0);
}

int shmcoll_ssend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                  shmcoll_comm *c)
{
	return send("shmcoll_ssend", buf, count, dtype, dest, tag, c, 1);
}

int shmcoll_recv(void *buf, size_t count, shmcoll_dtype dtype, int source, int tag, shmcoll_comm *c,
                 shmcoll_status *status)
{
	const char *fn = "shmcoll_recv";
	struct shmcoll_p2p_op op;
	size_t bytes;
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = check_side(c, fn, buf, count, dtype, source, tag, 1, &bytes);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc)
		return rc;
	if (c->kind == COMM_HIER)
		return hier_recv(c, fn, buf, bytes, source, tag, shmcoll__dtype_size(dtype),
		                 status);
	if (shmcoll__p2p_recv_fast(c->u.node, &op, buf, bytes, source, tag)) {
		api__status(status, &op, shmcoll__dtype_size(dtype), 0);
		return 0;
	}
	shmcoll__p2p_irecv(c->u.node, &op, fn, buf, bytes, source, tag, P2P_CTX_USER);
	rc = shmcoll__p2p_wait(c->u.node, &op);
	api__status(status, &op, shmcoll__dtype_size(dtype), rc);
	return rc == -EMSGSIZE ? api__cut(c, fn, &op, bytes) : rc;
}

int shmcoll_sendrecv(const void *sendbuf, size_t sendcount, shmcoll_dtype sendtype, int dest,
                     int sendtag, void *recvbuf, size_t recvcount, shmcoll_dtype recvtype,
                     int source, int recvtag, shmcoll_comm *c, shmcoll_status *status)
{
	const char *fn = "shmcoll_sendrecv";
	struct shmcoll_p2p_op s, r;
	size_t sbytes, rbytes;
	int rc, rrc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = check_side(c, fn, sendbuf, sendcount, sendtype, dest, sendtag, 0, &sbytes);
	if (!rc)
		rc = check_side(c, fn, recvbuf, recvcount, recvtype, source, recvtag, 1, &rbytes);
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, sbytes, recvbuf, rbytes, NULL);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc)
		return rc;
	if (c->kind == COMM_HIER)
		return hier_sendrecv(c, fn, sendbuf, sbytes, dest, sendtag, recvbuf, rbytes, source,
		                     recvtag, shmcoll__dtype_size(recvtype), status);
	/* The receive first: a message to ourselves then finds it posted. */
	shmcoll__p2p_irecv(c->u.node, &r, fn, recvbuf, rbytes, source, recvtag, P2P_CTX_USER);
	shmcoll__p2p_isend(c->u.node, &s, fn, sendbuf, sbytes, dest, sendtag, P2P_CTX_USER);
	rc = shmcoll__p2p_wait(c->u.node, &s);
	if (rc < 0 && rc != -EMSGSIZE)
		shmcoll__p2p_cancel(c->u.node, &r); /* a send that failed alone (out of memory) */
	rrc = shmcoll__p2p_wait(c->u.node, &r);
	api__status(status, &r, shmcoll__dtype_size(recvtype), rrc);
	if (rrc == -EMSGSIZE && !rc)
		api__cut(c, fn, &r, rbytes);
	return rc ? rc : rrc;
}

static int isend(const char *fn, const void *buf, size_t count, shmcoll_dtype dtype, int dest,
                 int tag, shmcoll_comm *c, shmcoll_request **req, int sync)
{
	shmcoll_request *r;
	size_t bytes;
	int rc;

	if (req)
		*req = NULL;
	if (!c)
		return -EINVAL;
	if (!req)
		return api__fail(c, -EINVAL, "%s: req (the out pointer) is NULL", fn);
	api__arm(c);
	API_HOLD(c);
	rc = check_side(c, fn, buf, count, dtype, dest, tag, 0, &bytes);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc)
		return rc;
	r = api__req_new(c, fn, c->kind == COMM_HIER ? REQ_HP2P : REQ_P2P);
	if (!r)
		return -ENOMEM;
	if (c->kind == COMM_HIER)
		shmcoll__hier_isend(c->u.hier, &r->u.hop, fn, buf, bytes, dest, tag);
	else if (sync)
		shmcoll__p2p_issend(c->u.node, &r->u.op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	else
		shmcoll__p2p_isend(c->u.node, &r->u.op, fn, buf, bytes, dest, tag, P2P_CTX_USER);
	*req = r;
	api__kick(c);
	return 0;
}

int shmcoll_isend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                  shmcoll_comm *c, shmcoll_request **req)
{
	return isend("shmcoll_isend", buf, count, dtype, dest, tag, c, req, 0);
}

int shmcoll_issend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                   shmcoll_comm *c, shmcoll_request **req)
{
	return isend("shmcoll_issend", buf, count, dtype, dest, tag, c, req, 1);
}

int shmcoll_irecv(void *buf, size_t count, shmcoll_dtype dtype, int source, int tag,
                  shmcoll_comm *c, shmcoll_request **req)
{
	const char *fn = "shmcoll_irecv";
	shmcoll_request *r;
	size_t bytes;
	int rc;

	if (req)
		*req = NULL;
	if (!c)
		return -EINVAL;
	if (!req)
		return api__fail(c, -EINVAL, "%s: req (the out pointer) is NULL", fn);
	api__arm(c);
	API_HOLD(c);
	rc = check_side(c, fn, buf, count, dtype, source, tag, 1, &bytes);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc)
		return rc;
	r = api__req_new(c, fn, c->kind == COMM_HIER ? REQ_HP2P : REQ_P2P);
	if (!r)
		return -ENOMEM;
	r->recv = 1;
	r->es = shmcoll__dtype_size(dtype);
	if (c->kind == COMM_HIER)
		shmcoll__hier_irecv(c->u.hier, &r->u.hop, fn, buf, bytes, source, tag);
	else
		shmcoll__p2p_irecv(c->u.node, &r->u.op, fn, buf, bytes, source, tag, P2P_CTX_USER);
	*req = r;
	api__kick(c);
	return 0;
}

struct probe {
	struct shmcoll_node *n;
	struct shmcoll_hier *h; /* a communicator over several nodes, else NULL */
	int source, tag, src, rtag;
	uint64_t bytes;
};

static int probe_found(void *arg)
{
	struct probe *p = arg;

	if (p->h)
		return shmcoll__hier_p2p_peek(p->h, p->source, p->tag, &p->src, &p->rtag,
		                              &p->bytes);
	return shmcoll__p2p_peek(p->n, p->source, p->tag, P2P_CTX_USER, &p->src, &p->rtag,
	                         &p->bytes);
}

static void probe_status(shmcoll_status *st, const struct probe *p, size_t es)
{
	if (!st)
		return;
	st->source = p->src;
	st->tag = p->rtag;
	st->bytes = (size_t)p->bytes;
	st->total = (size_t)p->bytes;
	st->count = shmcoll__elems((size_t)p->bytes, es);
	st->error = 0;
}

static int probe_start(shmcoll_comm *c, const char *fn, int source, int tag, shmcoll_dtype dtype,
                       struct probe *p)
{
	size_t bytes;
	int rc = check_side(c, fn, NULL, 0, dtype, source, tag, 1, &bytes);

	if (!rc)
		rc = api__enter(c, fn);
	if (rc)
		return rc;
	memset(p, 0, sizeof(*p));
	if (c->kind == COMM_HIER) {
		p->h = c->u.hier;
		p->n = shmcoll__hier_local(p->h);
	} else {
		p->n = c->u.node;
	}
	p->source = source;
	p->tag = tag;
	return 0;
}

int shmcoll_iprobe(int source, int tag, shmcoll_dtype dtype, shmcoll_comm *c, int *flag,
                   shmcoll_status *status)
{
	struct probe p;
	int rc;

	if (!c)
		return -EINVAL;
	if (!flag)
		return api__fail(c, -EINVAL, "shmcoll_iprobe: flag is NULL");
	API_HOLD(c);
	*flag = 0;
	rc = probe_start(c, "shmcoll_iprobe", source, tag, dtype, &p);
	if (rc)
		return rc;
	shmcoll__node_progress(p.n);
	*flag = probe_found(&p);
	if (*flag)
		probe_status(status, &p, shmcoll__dtype_size(dtype));
	return 0;
}

int shmcoll_probe(int source, int tag, shmcoll_dtype dtype, shmcoll_comm *c, shmcoll_status *status)
{
	const char *fn = "shmcoll_probe";
	struct probe p;
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = probe_start(c, fn, source, tag, dtype, &p);
	if (!rc && p.h) {
		rc = shmcoll__node_wait_until(p.n, fn, probe_found, &p, P2P_ANY);
		if (rc < 0)
			rc = shmcoll__hier_node_rc(p.h, rc);
	} else if (!rc) {
		rc = shmcoll__node_wait_until(p.n, fn, probe_found, &p, source);
	}
	if (!rc)
		probe_status(status, &p, shmcoll__dtype_size(dtype));
	return rc;
}
