/* check.c - the entry layer's part of every call: argument checks, messages, entering a
 * communicator of either kind. Every argument is checked before any rank waits on another,
 * so a bad call on one rank never strands its peers in the middle of a protocol. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/api/api.h"
#include "lib/core/node.h"
#include "lib/hier/hier.h"
#include "lib/kernels/kernels.h"

/* The message of the calling thread's last failed create: there is no communicator to hold
 * it. */
static _Thread_local char create_err[SHMCOLL_ERR_LEN];

int api__create_fail(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(create_err, sizeof(create_err), fmt, ap);
	va_end(ap);
	return rc;
}

const char *shmcoll_last_error(const shmcoll_comm *c)
{
	return c ? c->err : create_err;
}

const char *shmcoll_comm_tuning(const shmcoll_comm *c)
{
	return c && c->local ? c->local->tune_source : "no communicator";
}

/* The one place that knows which kind a communicator is: its table of operations is chosen
 * here, and nothing after asks. */
static shmcoll_comm *wrap(int rank, int size, enum shmcoll_comm_kind kind,
                          const struct api_ops *ops, struct shmcoll_node *local, int nproc,
                          char *err)
{
	shmcoll_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rank = rank;
	c->size = size;
	c->kind = kind;
	c->ops = ops;
	c->local = local;
	c->nproc = nproc;
	c->err = err;
	return c;
}

shmcoll_comm *api__wrap_node(struct shmcoll_node *n)
{
	shmcoll_comm *c = wrap(n->rank, n->size, COMM_NODE, &api__node_ops, n, n->size, n->err);

	if (c)
		c->u.node = n;
	return c;
}

shmcoll_comm *api__wrap_hier(struct shmcoll_hier *h)
{
	shmcoll_comm *c =
	    wrap(shmcoll__hier_rank(h), shmcoll__hier_size(h), COMM_HIER, &api__hier_ops,
	         shmcoll__hier_local(h), shmcoll__hier_nproc(h), shmcoll__hier_err(h));

	if (c)
		c->u.hier = h;
	return c;
}

shmcoll_comm *api__wrap_hosted(struct shmcoll_hier *h)
{
	shmcoll_comm *c = api__wrap_hier(h);

	if (c)
		c->ops = &api__hosted_ops;
	return c;
}

int api__fail(shmcoll_comm *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, SHMCOLL_ERR_LEN, fmt, ap);
	va_end(ap);
	return rc;
}

int api__bad_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, size_t count, size_t mult)
{
	if (!shmcoll__dtype_size(dtype))
		return api__fail(c, -EINVAL, "%s: unknown dtype %d", fn, (int)dtype);
	return api__fail(c, -EINVAL, "%s: count %zu of %s (x%zu) overflows size_t bytes", fn, count,
	                 shmcoll__dtype_name(dtype), mult);
}

int api__bad_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op)
{
	if ((unsigned)op >= SHMCOLL_OP_COUNT)
		return api__fail(c, -EINVAL, "%s: unknown op %d", fn, (int)op);
	return api__fail(c, -EINVAL, "%s: op %s is not defined on dtype %s", fn,
	                 shmcoll__op_name(op), shmcoll__dtype_name(dtype));
}
