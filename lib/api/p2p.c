/* p2p.c - the public point-to-point calls: each checks its arguments once, enters the
 * communicator and hands the operation to its table (api.h's struct api_ops: the node's
 * engine, lib/core/p2p.h, or lib/hier's point-to-point); the blocking forms wait for it, the
 * non-blocking ones hand it out as a request (request.c). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/api/api.h"

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

/* check_side, then entering c for fn: what every call of one side does first. */
static int side_enter(shmcoll_comm *c, const char *fn, const void *buf, size_t count,
                      shmcoll_dtype dtype, int peer, int tag, int recv, size_t *bytes)
{
	int rc = check_side(c, fn, buf, count, dtype, peer, tag, recv, bytes);

	return rc ? rc : api__enter(c, fn);
}

/* A blocking send, standard or synchronous (sync: it returns once a receive has matched
 * it; across nodes it is the standard send). */
static int send(const char *fn, const void *buf, size_t count, shmcoll_dtype dtype, int dest,
                int tag, shmcoll_comm *c, int sync)
{
	size_t bytes;
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = side_enter(c, fn, buf, count, dtype, dest, tag, 0, &bytes);
	if (rc)
		return rc;
	return c->ops->send(c, fn, buf, bytes, dest, tag, sync);
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
	size_t bytes;
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = side_enter(c, fn, buf, count, dtype, source, tag, 1, &bytes);
	if (rc)
		return rc;
	return c->ops->recv(c, fn, buf, bytes, source, tag, shmcoll__dtype_size(dtype), status);
}

int shmcoll_sendrecv(const void *sendbuf, size_t sendcount, shmcoll_dtype sendtype, int dest,
                     int sendtag, void *recvbuf, size_t recvcount, shmcoll_dtype recvtype,
                     int source, int recvtag, shmcoll_comm *c, shmcoll_status *status)
{
	const char *fn = "shmcoll_sendrecv";
	size_t sbytes, rbytes;
	int rc;

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
	return c->ops->sendrecv(c, fn, sendbuf, sbytes, dest, sendtag, recvbuf, rbytes, source,
	                        recvtag, shmcoll__dtype_size(recvtype), status);
}

/* A non-blocking send (standard, or synchronous: sync) or receive (recv), handed out as a
 * request. A receive's buf is the writable one shmcoll_irecv was given. */
static int istart(const char *fn, const void *buf, size_t count, shmcoll_dtype dtype, int peer,
                  int tag, shmcoll_comm *c, shmcoll_request **req, int recv, int sync)
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
	rc = side_enter(c, fn, buf, count, dtype, peer, tag, recv, &bytes);
	if (rc)
		return rc;
	r = api__req_new(c, fn, c->ops->p2p);
	if (!r)
		return -ENOMEM;
	if (recv) {
		r->recv = 1;
		r->es = shmcoll__dtype_size(dtype);
		c->ops->irecv(c, r, fn, (void *)(uintptr_t)buf, bytes, peer, tag);
	} else {
		c->ops->isend(c, r, fn, buf, bytes, peer, tag, sync);
	}
	*req = r;
	api__kick(c);
	return 0;
}

int shmcoll_isend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                  shmcoll_comm *c, shmcoll_request **req)
{
	return istart("shmcoll_isend", buf, count, dtype, dest, tag, c, req, 0, 0);
}

int shmcoll_issend(const void *buf, size_t count, shmcoll_dtype dtype, int dest, int tag,
                   shmcoll_comm *c, shmcoll_request **req)
{
	return istart("shmcoll_issend", buf, count, dtype, dest, tag, c, req, 0, 1);
}

int shmcoll_irecv(void *buf, size_t count, shmcoll_dtype dtype, int source, int tag,
                  shmcoll_comm *c, shmcoll_request **req)
{
	return istart("shmcoll_irecv", buf, count, dtype, source, tag, c, req, 1, 0);
}

struct probe {
	shmcoll_comm *c;
	int source, tag, src, rtag;
	uint64_t bytes;
};

static int probe_found(void *arg)
{
	struct probe *p = arg;

	return p->c->ops->peek(p->c, p->source, p->tag, &p->src, &p->rtag, &p->bytes);
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
	int rc = side_enter(c, fn, NULL, 0, dtype, source, tag, 1, &bytes);

	if (rc)
		return rc;
	memset(p, 0, sizeof(*p));
	p->c = c;
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
	shmcoll__node_progress(c->local);
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
	if (!rc)
		rc = c->ops->wait_until(c, fn, probe_found, &p, source);
	if (!rc)
		probe_status(status, &p, shmcoll__dtype_size(dtype));
	return rc;
}
