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

static shmcoll_comm *wrap(int rank, int size, enum shmcoll_comm_kind kind, char *err)
{
	shmcoll_comm *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->rank = rank;
	c->size = size;
	c->kind = kind;
	c->err = err;
	return c;
}

shmcoll_comm *api__wrap_node(struct shmcoll_node *n)
{
	shmcoll_comm *c = wrap(n->rank, n->size, COMM_NODE, n->err);

	if (c)
		c->u.node = n;
	return c;
}

shmcoll_comm *api__wrap_hier(struct shmcoll_hier *h)
{
	shmcoll_comm *c =
	    wrap(shmcoll__hier_rank(h), shmcoll__hier_size(h), COMM_HIER, shmcoll__hier_err(h));

	if (c)
		c->u.hier = h;
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

int api__enter(shmcoll_comm *c, const char *fn)
{
	if (c->kind == COMM_HIER)
		return shmcoll__hier_enter(c->u.hier, fn);
	return shmcoll__node_enter(c->u.node, fn);
}

int api__check_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, size_t count, size_t mult,
                    size_t *bytes)
{
	size_t es = shmcoll__dtype_size(dtype);

	if (!es)
		return api__fail(c, -EINVAL, "%s: unknown dtype %d", fn, (int)dtype);
	if (count > SIZE_MAX / es / mult)
		return api__fail(c, -EINVAL, "%s: count %zu of %s (x%zu) overflows size_t bytes",
		                 fn, count, shmcoll__dtype_name(dtype), mult);
	*bytes = count * es * mult;
	return 0;
}

int api__check_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op)
{
	if ((unsigned)op >= SHMCOLL_OP_COUNT)
		return api__fail(c, -EINVAL, "%s: unknown op %d", fn, (int)op);
	if (!shmcoll__reduce_lookup(dtype, op))
		return api__fail(c, -EINVAL, "%s: op %s is not defined on dtype %s", fn,
		                 shmcoll__op_name(op), shmcoll__dtype_name(dtype));
	return 0;
}

int api__check_root(shmcoll_comm *c, const char *fn, int root)
{
	if (root < 0 || root >= c->size)
		return api__fail(c, -EINVAL, "%s: root %d out of range 0..%d", fn, root,
		                 c->size - 1);
	return 0;
}

int api__check_buf(shmcoll_comm *c, const char *fn, const char *name, const void *buf, size_t bytes)
{
	if (!buf && bytes)
		return api__fail(c, -EINVAL, "%s: %s is NULL with %zu bytes to move", fn, name,
		                 bytes);
	return 0;
}

int api__check_overlap(shmcoll_comm *c, const char *fn, const void *a, size_t na, const void *b,
                       size_t nb, const void *inplace_a)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	if (!na || !nb || a == inplace_a)
		return 0;
	if (x < y + nb && y < x + na)
		return api__fail(c, -EINVAL,
		                 "%s: sendbuf and recvbuf overlap without being the in-place form",
		                 fn);
	return 0;
}
