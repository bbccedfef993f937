/* api.h - what the files of the entry layer share: the public communicator, a tagged union
 * of the two kinds a communicator can be, and the argument checks every public function
 * runs once, before anything else. Private to lib/api. */
#ifndef SHMCOLL_API_H
#define SHMCOLL_API_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "lib/core/node.h"
#include "lib/core/progress.h"
#include "lib/hier/hier.h"
#include "lib/kernels/kernels.h"

enum shmcoll_comm_kind {
	COMM_NODE, /* the ranks of one node: lib/core, lib/coll */
	COMM_HIER, /* ranks on several nodes: lib/hier */
};

struct shmcoll_comm {
	int rank, size;
	enum shmcoll_comm_kind kind;
	union {
		struct shmcoll_node *node;
		struct shmcoll_hier *hier;
	} u;
	char *err;            /* this rank's last message: the node's or the hier's buffer */
	uint32_t splits;      /* shmcoll_comm_split/dup calls so far: names their jobs */
	unsigned outstanding; /* requests not yet returned by wait or test */
	struct shmcoll_request *free_req; /* requests kept for reuse (request.c) */
	unsigned nfree;
	/* Its place in the process's progress (lib/core/progress.h): listed while requests are
	 * outstanding, so that every wait of the process moves it, and the hold that keeps the
	 * caller and other threads' passes (the progress thread's, other rank threads' waits)
	 * apart. */
	struct shmcoll_prog prog;
	int armed;      /* a non-blocking operation was started: the thread decided */
	int thread_ref; /* it holds a reference to the progress thread */
};

/* The hold (lib/core/progress.h): every public call on a listed communicator holds it for
 * its whole length, so other threads pass over it only between calls; the call that leaves
 * nothing outstanding unlists it (api__unlist, progress.c). Unlisted, nobody else touches it
 * and the hold costs a branch. */
void api__unlist(shmcoll_comm *c);
/* c if it took the hold (for api__unhold), else NULL. */
static inline shmcoll_comm *api__hold(shmcoll_comm *c)
{
	if (c && c->prog.listed) {
		shmcoll__prog_hold(&c->prog);
		return c;
	}
	return NULL;
}
static inline void api__unhold(shmcoll_comm **cp)
{
	shmcoll_comm *c = *cp;

	if (!c)
		return;
	if (!c->outstanding && shmcoll__prog_outermost(&c->prog))
		api__unlist(c);
	shmcoll__prog_unhold(&c->prog);
}
/* Holds c until the end of the enclosing scope. */
#define API_HOLD(c)                                                                                \
	shmcoll_comm *api_held_ __attribute__((cleanup(api__unhold), unused)) = api__hold(c)

/* Before a non-blocking start (and before its API_HOLD): lists c (an operation may be
 * outstanding after the call), taking a reference to the progress thread the first time if
 * SHMCOLL_PROGRESS_THREAD wants one; after it: wakes the thread. */
void api__arm_slow(shmcoll_comm *c);
static inline void api__arm(shmcoll_comm *c)
{
	if (c && !c->prog.listed)
		api__arm_slow(c);
}
static inline void api__kick(shmcoll_comm *c)
{
	(void)c;
	shmcoll__progress_kick();
}
/* The advance of c that the process's passes run (progress.h's shmcoll__prog_fn). */
int api__advance(struct shmcoll_prog *p);
/* Drops c's reference to the progress thread (destroy). */
void api__progress_stop(shmcoll_comm *c);

/* What a request is (request.c). */
enum req_kind {
	REQ_DONE, /* complete when started (a call with nothing to move): rc */
	REQ_P2P,  /* a point-to-point operation of a node communicator: u.op */
	REQ_NODE, /* a collective of a node communicator: u.task */
	REQ_HIER, /* a collective of a communicator over several nodes: u.hier */
	REQ_HP2P, /* a point-to-point operation of a communicator over several nodes: u.hop */
};

struct shmcoll_request {
	shmcoll_comm *comm;
	enum req_kind kind;
	int recv;                     /* a receive: fills a status */
	int rc;                       /* REQ_DONE: the result */
	size_t es;                    /* a receive's element size */
	struct shmcoll_request *next; /* on the communicator's free list */
	union {
		struct shmcoll_p2p_op op;
		struct shmcoll_task task;
		struct hier_task *hier;
		struct hier_p2p_op hop;
	} u;
};

/* A new request of c of kind (kept ones first), counted outstanding; NULL with a message on
 * c when out of memory. */
shmcoll_request *api__req_new(shmcoll_comm *c, const char *fn, enum req_kind kind);
/* Starts collective kind (lib/core/tuning.h's KIND_*) as a request of c: its arguments
 * checked and c entered by the caller. 0 with *req set, or -ENOMEM with *req = NULL. */
int api__istart(shmcoll_comm *c, const char *fn, uint32_t kind, const void *send, void *recv,
                size_t count, shmcoll_dtype dt, shmcoll_op op, int root, shmcoll_request **req);
/* Releases every request kept for reuse (comm_destroy). */
void api__req_drain(shmcoll_comm *c);

/* A receive's -EMSGSIZE, with the message that says what was cut (a capacity of bytes). */
int api__cut(shmcoll_comm *c, const char *fn, const struct shmcoll_p2p_op *op, size_t bytes);
/* Fills st (if not NULL) from a receive that ended with rc. */
void api__status(shmcoll_status *st, const struct shmcoll_p2p_op *op, size_t es, int rc);

/* Wraps a node or hier communicator in a public one. NULL when out of memory. */
shmcoll_comm *api__wrap_node(struct shmcoll_node *n);
shmcoll_comm *api__wrap_hier(struct shmcoll_hier *h);

/* shmcoll_comm_create without clearing the calling thread's create message first. */
int api__create(const shmcoll_config *cfg, shmcoll_comm **out);

/* Records the message of a failed create for shmcoll_last_error(NULL) (the calling thread's)
 * and returns rc. */
int api__create_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a message for shmcoll_last_error(c) and returns rc. */
int api__fail(shmcoll_comm *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Enters c for a call of fn: 0, or the error that broke it (with a message). Every call
 * moves the point-to-point operations outstanding along. */
static inline int api__enter(shmcoll_comm *c, const char *fn)
{
	int rc;

	if (c->kind == COMM_HIER)
		return shmcoll__hier_enter(c->u.hier, fn);
	rc = shmcoll__node_enter(c->u.node, fn);
	if (rc == 0 && c->u.node->p2p.active)
		shmcoll__node_progress(c->u.node);
	return rc;
}

/* The argument checks, each 0 or -EINVAL with a message naming the argument (inline: every
 * call runs several). type: a known dtype whose count * mult elements fit size_t bytes
 * (*bytes set). */
int api__bad_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, size_t count, size_t mult);
static inline int api__check_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype,
                                  size_t count, size_t mult, size_t *bytes)
{
	size_t es = shmcoll__dtype_size(dtype), b;

	/* Overflow by the multiplications' carry, not by dividing SIZE_MAX: a 64-bit division
	 * costs ~10 ns, a seventh of a small call. */
	*bytes = 0;
	if (!es || __builtin_mul_overflow(count, es, &b) || __builtin_mul_overflow(b, mult, &b))
		return api__bad_type(c, fn, dtype, count, mult);
	*bytes = b;
	return 0;
}

int api__bad_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op);
static inline int api__check_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op)
{
	return shmcoll__op_valid(dtype, op) ? 0 : api__bad_op(c, fn, dtype, op);
}

static inline int api__check_root(shmcoll_comm *c, const char *fn, int root)
{
	if (root < 0 || root >= c->size)
		return api__fail(c, -EINVAL, "%s: root %d out of range 0..%d", fn, root,
		                 c->size - 1);
	return 0;
}

static inline int api__check_buf(shmcoll_comm *c, const char *fn, const char *name, const void *buf,
                                 size_t bytes)
{
	if (!buf && bytes)
		return api__fail(c, -EINVAL, "%s: %s is NULL with %zu bytes to move", fn, name,
		                 bytes);
	return 0;
}

/* Fails unless [a, a+na) and [b, b+nb) are disjoint or a == inplace_a. */
static inline int api__check_overlap(shmcoll_comm *c, const char *fn, const void *a, size_t na,
                                     const void *b, size_t nb, const void *inplace_a)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;

	if (!na || !nb || a == inplace_a || x >= y + nb || y >= x + na)
		return 0;
	return api__fail(c, -EINVAL,
	                 "%s: sendbuf and recvbuf overlap without being the in-place form", fn);
}

/* The collectives of c after their checks, for the entry layer's own use (split's
 * allgather): node or hier as c is. */
int api__allgather(shmcoll_comm *c, const void *send, void *recv, size_t sendcount,
                   shmcoll_dtype dt);

#endif
