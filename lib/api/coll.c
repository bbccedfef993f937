/* coll.c - the public collectives: each checks its arguments once (check.c), enters the
 * communicator and hands the call to the node's protocols (lib/coll) or to the multi-node
 * composition (lib/hier). A call with nothing to move returns after the checks, on every
 * rank, without a step. */
#include <errno.h>
#include <stdint.h>

#include "lib/api/api.h"
#include "lib/coll/coll.h"
#include "lib/hier/hier.h"

int api__allgather(shmcoll_comm *c, const void *send, void *recv, size_t sendcount,
                   shmcoll_dtype dt)
{
	if (c->kind == COMM_HIER)
		return shmcoll__hier_allgather(c->u.hier, send, recv, sendcount, dt);
	return shmcoll__node_allgather(c->u.node, send, recv, sendcount, dt);
}

int shmcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                      shmcoll_op op, shmcoll_comm *c)
{
	const char *fn = "shmcoll_allreduce";
	size_t bytes;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = api__check_op(c, fn, dtype, op);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, bytes, recvbuf, bytes, recvbuf);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_allreduce(c->u.hier, sendbuf, recvbuf, count, dtype, op);
	return shmcoll__node_allreduce(c->u.node, sendbuf, recvbuf, count, dtype, op);
}

int shmcoll_reduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                   shmcoll_op op, int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_reduce";
	size_t bytes;
	int rc, is_root;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = api__check_op(c, fn, dtype, op);
	if (!rc)
		rc = api__check_root(c, fn, root);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	is_root = c->rank == root;
	if (!rc && is_root)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc && is_root)
		rc = api__check_overlap(c, fn, sendbuf, bytes, recvbuf, bytes, recvbuf);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_reduce(c->u.hier, sendbuf, recvbuf, count, dtype, op, root);
	return shmcoll__node_reduce(c->u.node, sendbuf, recvbuf, count, dtype, op, root);
}

int shmcoll_bcast(void *buf, size_t count, shmcoll_dtype dtype, int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_bcast";
	size_t bytes;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, count, 1, &bytes);
	if (!rc)
		rc = api__check_root(c, fn, root);
	if (!rc)
		rc = api__check_buf(c, fn, "buf", buf, bytes);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_bcast(c->u.hier, buf, count, dtype, root);
	return shmcoll__node_bcast(c->u.node, buf, count, dtype, root);
}

int shmcoll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                      shmcoll_comm *c)
{
	const char *fn = "shmcoll_allgather";
	const uint8_t *own;
	size_t bytes, total;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, sendcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, total);
	own = recvbuf ? (const uint8_t *)recvbuf + (size_t)c->rank * bytes : NULL;
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, bytes, recvbuf, total, own);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !sendcount)
		return rc;
	return api__allgather(c, sendbuf, recvbuf, sendcount, dtype);
}

int shmcoll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                           shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *c)
{
	const char *fn = "shmcoll_reduce_scatter";
	const uint8_t *send = sendbuf;
	size_t bytes, total;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, recvcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = api__check_op(c, fn, dtype, op);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, total);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc)
		rc = api__check_overlap(c, fn, recvbuf, bytes, sendbuf, total,
		                        send ? send + (size_t)c->rank * bytes : NULL);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !recvcount)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_reduce_scatter(c->u.hier, sendbuf, recvbuf, recvcount, dtype,
		                                    op);
	return shmcoll__node_reduce_scatter(c->u.node, sendbuf, recvbuf, recvcount, dtype, op);
}

int shmcoll_gather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                   int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_gather";
	size_t bytes, total;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, sendcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = api__check_root(c, fn, root);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc && c->rank == root) {
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, total);
		if (!rc)
			rc = api__check_overlap(c, fn, sendbuf, bytes, recvbuf, total,
			                        (const uint8_t *)recvbuf + (size_t)root * bytes);
	}
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !sendcount)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_gather(c->u.hier, sendbuf, recvbuf, sendcount, dtype, root);
	return shmcoll__node_gather(c->u.node, sendbuf, recvbuf, sendcount, dtype, root);
}

int shmcoll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, shmcoll_dtype dtype,
                    int root, shmcoll_comm *c)
{
	const char *fn = "shmcoll_scatter";
	const uint8_t *send = sendbuf;
	size_t bytes, total;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, recvcount, (size_t)c->size, &total);
	bytes = total / (size_t)c->size;
	if (!rc)
		rc = api__check_root(c, fn, root);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc && c->rank == root) {
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, total);
		if (!rc)
			rc = api__check_overlap(c, fn, recvbuf, bytes, sendbuf, total,
			                        send ? send + (size_t)root * bytes : NULL);
	}
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !recvcount)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_scatter(c->u.hier, sendbuf, recvbuf, recvcount, dtype, root);
	return shmcoll__node_scatter(c->u.node, sendbuf, recvbuf, recvcount, dtype, root);
}

int shmcoll_alltoall(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                     shmcoll_comm *c)
{
	const char *fn = "shmcoll_alltoall";
	size_t total;
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__check_type(c, fn, dtype, count, (size_t)c->size, &total);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, total);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, total);
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, total, recvbuf, total, recvbuf);
	if (!rc)
		rc = api__enter(c, fn);
	if (rc || !count)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_alltoall(c->u.hier, sendbuf, recvbuf, count, dtype);
	return shmcoll__node_alltoall(c->u.node, sendbuf, recvbuf, count, dtype);
}

int shmcoll_barrier(shmcoll_comm *c)
{
	const char *fn = "shmcoll_barrier";
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__enter(c, fn);
	if (rc < 0)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_barrier(c->u.hier);
	return shmcoll__node_barrier(c->u.node);
}

void *shmcoll_malloc(shmcoll_comm *c, size_t bytes)
{
	const char *fn = "shmcoll_malloc";

	if (!c || api__enter(c, fn) < 0)
		return NULL;
	if (bytes == 0) {
		api__fail(c, -EINVAL, "%s: bytes is 0", fn);
		return NULL;
	}
	if (c->kind == COMM_HIER)
		return shmcoll__hier_malloc(c->u.hier, bytes);
	return shmcoll__node_malloc(c->u.node, bytes);
}

int shmcoll_free(shmcoll_comm *c, void *ptr)
{
	const char *fn = "shmcoll_free";
	int rc;

	if (!c)
		return -EINVAL;
	rc = api__enter(c, fn);
	if (rc < 0 || !ptr)
		return rc;
	if (c->kind == COMM_HIER)
		return shmcoll__hier_free(c->u.hier, ptr);
	return shmcoll__node_free(c->u.node, ptr);
}
