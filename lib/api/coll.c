/* coll.c - the public collectives: each checks its arguments once (check.c), enters the
 * communicator and hands the call to its table of operations (api.h's struct api_ops: the
 * node's protocols or the multi-node composition). A call with nothing to move returns after
 * the checks, on every rank, without a step. */
#include <errno.h>
#include <stdint.h>

#include "lib/api/api.h"

/* Each collective's checks (and the entry), shared by its blocking and non-blocking forms: 0,
 * or the error with a message naming fn. */

static int allreduce_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                           size_t count, shmcoll_dtype dtype, shmcoll_op op)
{
	size_t bytes;
	int rc = api__check_type(c, fn, dtype, count, 1, &bytes);

	if (!rc)
		rc = api__check_op(c, fn, dtype, op);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, bytes, recvbuf, bytes, recvbuf);
	return rc ? rc : api__enter(c, fn);
}

static int reduce_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                        size_t count, shmcoll_dtype dtype, shmcoll_op op, int root)
{
	size_t bytes;
	int rc = api__check_type(c, fn, dtype, count, 1, &bytes), is_root;

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
	return rc ? rc : api__enter(c, fn);
}

static int bcast_check(shmcoll_comm *c, const char *fn, void *buf, size_t count,
                       shmcoll_dtype dtype, int root)
{
	size_t bytes;
	int rc = api__check_type(c, fn, dtype, count, 1, &bytes);

	if (!rc)
		rc = api__check_root(c, fn, root);
	if (!rc)
		rc = api__check_buf(c, fn, "buf", buf, bytes);
	return rc ? rc : api__enter(c, fn);
}

static int allgather_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                           size_t sendcount, shmcoll_dtype dtype)
{
	const uint8_t *own;
	size_t bytes, total;
	int rc = api__check_type(c, fn, dtype, sendcount, (size_t)c->size, &total);

	/* One block's bytes, multiplied: dividing the total by the size would cost a 64-bit
	 * division (~10 ns of a small call). */
	bytes = rc ? 0 : sendcount * shmcoll__dtype_size(dtype);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, bytes);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, total);
	own = recvbuf ? (const uint8_t *)recvbuf + (size_t)c->rank * bytes : NULL;
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, bytes, recvbuf, total, own);
	return rc ? rc : api__enter(c, fn);
}

static int reduce_scatter_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                                size_t recvcount, shmcoll_dtype dtype, shmcoll_op op)
{
	const uint8_t *send = sendbuf;
	size_t bytes, total;
	int rc = api__check_type(c, fn, dtype, recvcount, (size_t)c->size, &total);

	bytes = rc ? 0 : recvcount * shmcoll__dtype_size(dtype);
	if (!rc)
		rc = api__check_op(c, fn, dtype, op);
	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, total);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, bytes);
	if (!rc)
		rc = api__check_overlap(c, fn, recvbuf, bytes, sendbuf, total,
		                        send ? send + (size_t)c->rank * bytes : NULL);
	return rc ? rc : api__enter(c, fn);
}

static int gather_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                        size_t sendcount, shmcoll_dtype dtype, int root)
{
	size_t bytes, total;
	int rc = api__check_type(c, fn, dtype, sendcount, (size_t)c->size, &total);

	bytes = rc ? 0 : sendcount * shmcoll__dtype_size(dtype);
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
	return rc ? rc : api__enter(c, fn);
}

static int scatter_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                         size_t recvcount, shmcoll_dtype dtype, int root)
{
	const uint8_t *send = sendbuf;
	size_t bytes, total;
	int rc = api__check_type(c, fn, dtype, recvcount, (size_t)c->size, &total);

	bytes = rc ? 0 : recvcount * shmcoll__dtype_size(dtype);
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
	return rc ? rc : api__enter(c, fn);
}

static int alltoall_check(shmcoll_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                          size_t count, shmcoll_dtype dtype)
{
	size_t total;
	int rc = api__check_type(c, fn, dtype, count, (size_t)c->size, &total);

	if (!rc)
		rc = api__check_buf(c, fn, "sendbuf", sendbuf, total);
	if (!rc)
		rc = api__check_buf(c, fn, "recvbuf", recvbuf, total);
	if (!rc)
		rc = api__check_overlap(c, fn, sendbuf, total, recvbuf, total, recvbuf);
	return rc ? rc : api__enter(c, fn);
}

/* The blocking collectives: checks, then the communicator's operation. A call with nothing
 * to move returns after the checks. */

int shmcoll_allreduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                      shmcoll_op op, shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = allreduce_check(c, "shmcoll_allreduce", sendbuf, recvbuf, count, dtype, op);
	if (rc || !count)
		return rc;
	return c->ops->allreduce(c, sendbuf, recvbuf, count, dtype, op);
}

int shmcoll_reduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                   shmcoll_op op, int root, shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = reduce_check(c, "shmcoll_reduce", sendbuf, recvbuf, count, dtype, op, root);
	if (rc || !count)
		return rc;
	return c->ops->reduce(c, sendbuf, recvbuf, count, dtype, op, root);
}

int shmcoll_bcast(void *buf, size_t count, shmcoll_dtype dtype, int root, shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = bcast_check(c, "shmcoll_bcast", buf, count, dtype, root);
	if (rc || !count)
		return rc;
	return c->ops->bcast(c, buf, count, dtype, root);
}

int shmcoll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                      shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = allgather_check(c, "shmcoll_allgather", sendbuf, recvbuf, sendcount, dtype);
	if (rc || !sendcount)
		return rc;
	return c->ops->allgather(c, sendbuf, recvbuf, sendcount, dtype);
}

int shmcoll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                           shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = reduce_scatter_check(c, "shmcoll_reduce_scatter", sendbuf, recvbuf, recvcount, dtype,
	                          op);
	if (rc || !recvcount)
		return rc;
	return c->ops->reduce_scatter(c, sendbuf, recvbuf, recvcount, dtype, op);
}

int shmcoll_gather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                   int root, shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = gather_check(c, "shmcoll_gather", sendbuf, recvbuf, sendcount, dtype, root);
	if (rc || !sendcount)
		return rc;
	return c->ops->gather(c, sendbuf, recvbuf, sendcount, dtype, root);
}

int shmcoll_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, shmcoll_dtype dtype,
                    int root, shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = scatter_check(c, "shmcoll_scatter", sendbuf, recvbuf, recvcount, dtype, root);
	if (rc || !recvcount)
		return rc;
	return c->ops->scatter(c, sendbuf, recvbuf, recvcount, dtype, root);
}

int shmcoll_alltoall(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                     shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = alltoall_check(c, "shmcoll_alltoall", sendbuf, recvbuf, count, dtype);
	if (rc || !count)
		return rc;
	return c->ops->alltoall(c, sendbuf, recvbuf, count, dtype);
}

int shmcoll_barrier(shmcoll_comm *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = api__enter(c, "shmcoll_barrier");
	if (rc < 0)
		return rc;
	return c->ops->barrier(c);
}

/* The non-blocking collectives: the same checks, then a request (request.c). */

#define ISTART(check_call, fn_, kind_, send_, recv_, count_, dt_, op_, root_)                      \
	do {                                                                                       \
		int rc_;                                                                           \
		if (req)                                                                           \
			*req = NULL;                                                               \
		if (!c)                                                                            \
			return -EINVAL;                                                            \
		if (!req)                                                                          \
			return api__fail(c, -EINVAL, "%s: req (the out pointer) is NULL", (fn_));  \
		api__arm(c);                                                                       \
		API_HOLD(c);                                                                       \
		rc_ = (check_call);                                                                \
		if (!rc_)                                                                          \
			rc_ = api__istart(c,                                                       \
			                  &(const struct shmcoll_args){.kind = (kind_),            \
			                                               .fn = (fn_),                \
			                                               .send = (send_),            \
			                                               .recv = (recv_),            \
			                                               .count = (count_),          \
			                                               .dt = (dt_),                \
			                                               .op = (op_),                \
			                                               .root = (root_),            \
			                                               .scount = 0,                \
			                                               .sc = NULL,                 \
			                                               .sd = NULL,                 \
			                                               .rc = NULL,                 \
			                                               .rd = NULL},                \
			                  !(count_) && (kind_) != KIND_BARRIER, req);              \
		if (!rc_)                                                                          \
			api__kick(c);                                                              \
		return rc_;                                                                        \
	} while (0)

int shmcoll_iallreduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                       shmcoll_op op, shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(allreduce_check(c, "shmcoll_iallreduce", sendbuf, recvbuf, count, dtype, op),
	       "shmcoll_iallreduce", KIND_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, -1);
}

int shmcoll_ireduce(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                    shmcoll_op op, int root, shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(reduce_check(c, "shmcoll_ireduce", sendbuf, recvbuf, count, dtype, op, root),
	       "shmcoll_ireduce", KIND_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
}

int shmcoll_ibcast(void *buf, size_t count, shmcoll_dtype dtype, int root, shmcoll_comm *c,
                   shmcoll_request **req)
{
	ISTART(bcast_check(c, "shmcoll_ibcast", buf, count, dtype, root), "shmcoll_ibcast",
	       KIND_BCAST, buf, buf, count, dtype, SHMCOLL_SUM, root);
}

int shmcoll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                       shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(allgather_check(c, "shmcoll_iallgather", sendbuf, recvbuf, sendcount, dtype),
	       "shmcoll_iallgather", KIND_ALLGATHER, sendbuf, recvbuf, sendcount, dtype,
	       SHMCOLL_SUM, -1);
}

int shmcoll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                            shmcoll_dtype dtype, shmcoll_op op, shmcoll_comm *c,
                            shmcoll_request **req)
{
	ISTART(reduce_scatter_check(c, "shmcoll_ireduce_scatter", sendbuf, recvbuf, recvcount,
	                            dtype, op),
	       "shmcoll_ireduce_scatter", KIND_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype,
	       op, -1);
}

int shmcoll_igather(const void *sendbuf, void *recvbuf, size_t sendcount, shmcoll_dtype dtype,
                    int root, shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(gather_check(c, "shmcoll_igather", sendbuf, recvbuf, sendcount, dtype, root),
	       "shmcoll_igather", KIND_GATHER, sendbuf, recvbuf, sendcount, dtype, SHMCOLL_SUM,
	       root);
}

int shmcoll_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, shmcoll_dtype dtype,
                     int root, shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(scatter_check(c, "shmcoll_iscatter", sendbuf, recvbuf, recvcount, dtype, root),
	       "shmcoll_iscatter", KIND_SCATTER, sendbuf, recvbuf, recvcount, dtype, SHMCOLL_SUM,
	       root);
}

int shmcoll_ialltoall(const void *sendbuf, void *recvbuf, size_t count, shmcoll_dtype dtype,
                      shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(alltoall_check(c, "shmcoll_ialltoall", sendbuf, recvbuf, count, dtype),
	       "shmcoll_ialltoall", KIND_ALLTOALL, sendbuf, recvbuf, count, dtype, SHMCOLL_SUM, -1);
}

int shmcoll_ibarrier(shmcoll_comm *c, shmcoll_request **req)
{
	ISTART(api__enter(c, "shmcoll_ibarrier"), "shmcoll_ibarrier", KIND_BARRIER, NULL, NULL, 0,
	       SHMCOLL_UINT8, SHMCOLL_SUM, -1);
}

void *shmcoll_malloc(shmcoll_comm *c, size_t bytes)
{
	const char *fn = "shmcoll_malloc";
	API_HOLD(c);

	if (!c || api__enter(c, fn) < 0)
		return NULL;
	if (bytes == 0) {
		api__fail(c, -EINVAL, "%s: bytes is 0", fn);
		return NULL;
	}
	return c->ops->malloc(c, bytes);
}

int shmcoll_free(shmcoll_comm *c, void *ptr)
{
	const char *fn = "shmcoll_free";
	int rc;

	if (!c)
		return -EINVAL;
	API_HOLD(c);
	rc = api__enter(c, fn);
	if (rc < 0 || !ptr)
		return rc;
	return c->ops->free(c, ptr);
}
