/* api.h - what the files of the entry layer share: the public communicator, the table of
 * operations each kind of communicator answers with, and the argument checks every public
 * function runs once, before anything else. Private to lib/api. */
#ifndef SHMCOLL_API_H
#define SHMCOLL_API_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "lib/coll/coll.h"
#include "lib/core/node.h"
#include "lib/core/progress.h"
#include "lib/hier/hier.h"
#include "lib/kernels/kernels.h"
#include "shm/list.h"

enum shmcoll_comm_kind {
	COMM_NODE, /* the ranks of one node: lib/core, lib/coll */
	COMM_HIER, /* ranks on several nodes: lib/hier */
};

struct api_ops;

struct shmcoll_comm {
	int rank, size;
	int nproc; /* ranks per node: size on a node communicator */
	/* What each call does on this kind of communicator (ops_node.c, ops_hier.c), set when
	 * it is made: the entry layer checks the arguments and calls through it. */
	const struct api_ops *ops;
	enum shmcoll_comm_kind kind; /* for tests' probes (probe.c) only */
	union {
		struct shmcoll_node *node;
		struct shmcoll_hier *hier;
	} u;
	/* This rank's node communicator: the communicator itself, or its node's under one
	 * over several nodes. What every wait of the process's bounded kind waits on. */
	struct shmcoll_node *local;
	char *err;            /* this rank's last message: the node's or the hier's buffer */
	uint32_t splits;      /* shmcoll_comm_split/dup calls so far: names their jobs */
	unsigned outstanding; /* requests not yet returned by wait or test */
	struct shmcoll_list free_req; /* requests kept for reuse (request.c), last released first */
	unsigned nfree;
	/* Its place in the process's progress (lib/core/progress.h): listed while requests are
	 * outstanding, so that every wait of the process moves it, and the hold that keeps the
	 * caller and other threads' passes (the progress thread's, other rank threads' waits)
	 * apart. */
	struct shmcoll_prog prog;
	int armed;      /* a non-blocking operation was started: the thread decided */
	unsigned idle;  /* outermost calls ending with nothing outstanding since the last start */
	int thread_ref; /* it holds a reference to the progress thread */
};

/* The hold (lib/core/progress.h): every public call on a listed communicator holds it for
 * its whole length, so other threads pass over it only between calls; the API_KEEP_LISTED-th
 * call in a row that leaves nothing outstanding unlists it (api__unlist, progress.c), and
 * destroy at once. Unlisted, nobody else touches it and the hold costs a branch. */
void api__unlist(shmcoll_comm *c);
/* How many calls in a row that leave nothing outstanding a listed communicator stays listed
 * for: a loop of non-blocking starts and waits lists it once, not once per operation (the
 * registry's mutex twice a call cost iallreduce + wait 11-16 ns of 0.10-0.13 us), and a
 * program that goes back to blocking calls pays the hold for 64 calls only. */
#define API_KEEP_LISTED 64
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
	if (!c->outstanding && shmcoll__prog_outermost(&c->prog) && ++c->idle >= API_KEEP_LISTED)
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
	if (!c)
		return;
	c->idle = 0;
	if (!c->prog.listed)
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
	int recv;                 /* a receive: fills a status */
	int rc;                   /* REQ_DONE: the result */
	size_t es;                /* a receive's element size */
	struct shmcoll_link link; /* on the communicator's free list */
	union {
		struct shmcoll_p2p_op op;
		struct shmcoll_task task;
		struct hier_task *hier;
		struct hier_p2p_op hop;
	} u;
};

/* A communicator's operations: one const table per kind of communicator, chosen when it is
 * made (api__wrap_node, api__wrap_hier), so that no public function asks which kind it has.
 * Every entry is called with the arguments checked and c entered (but enter itself); counts
 * may not be 0 unless said. Each returns what the public call returns. */
struct api_ops {
	/* Enters c for a call of fn: 0, or the error that broke it (with a message). */
	int (*enter)(shmcoll_comm *c, const char *fn);
	/* Breaks c with err (a mismatch the caller saw in its own arguments). */
	void (*brk)(shmcoll_comm *c, int err);
	void (*abort)(shmcoll_comm *c);
	/* Destroys what c wraps, nothing outstanding: 0 or its error (c kept). */
	int (*destroy)(shmcoll_comm *c);
	/* One pass of the process's progress over c: whether anything is left outstanding. */
	int (*advance)(shmcoll_comm *c);

	/* The blocking collectives (coll.c) and the symmetric heap. */
	int (*allreduce)(shmcoll_comm *c, const void *send, void *recv, size_t count,
	                 shmcoll_dtype dt, shmcoll_op op);
	int (*reduce)(shmcoll_comm *c, const void *send, void *recv, size_t count, shmcoll_dtype dt,
	              shmcoll_op op, int root);
	int (*bcast)(shmcoll_comm *c, void *buf, size_t count, shmcoll_dtype dt, int root);
	int (*allgather)(shmcoll_comm *c, const void *send, void *recv, size_t count,
	                 shmcoll_dtype dt);
	int (*reduce_scatter)(shmcoll_comm *c, const void *send, void *recv, size_t count,
	                      shmcoll_dtype dt, shmcoll_op op);
	int (*gather)(shmcoll_comm *c, const void *send, void *recv, size_t count, shmcoll_dtype dt,
	              int root);
	int (*scatter)(shmcoll_comm *c, const void *send, void *recv, size_t count,
	               shmcoll_dtype dt, int root);
	int (*alltoall)(shmcoll_comm *c, const void *send, void *recv, size_t count,
	                shmcoll_dtype dt);
	int (*barrier)(shmcoll_comm *c);
	void *(*malloc)(shmcoll_comm *c, size_t bytes);
	int (*free)(shmcoll_comm *c, void *ptr);

	/* A call of any kind (lib/coll/kinds.c) run to the end: the variable-count ones. */
	int (*run)(shmcoll_comm *c, const struct shmcoll_args *a);
	/* Starts a call of any kind as r, of kind coll (below), the caller having just entered c
	 * (api__enter): 0, or -ENOMEM with r untouched,
	 * or another negative errno with c's message set (a call the kind refuses). */
	int (*start)(shmcoll_comm *c, shmcoll_request *r, const struct shmcoll_args *a);
	enum req_kind coll, p2p; /* what its collectives' and its messages' requests are */

	/* Point-to-point (p2p.c): bytes checked, es the receive's element size. A synchronous
	 * send returns once a receive has matched it (across nodes it is the standard one). */
	int (*send)(shmcoll_comm *c, const char *fn, const void *buf, size_t bytes, int dest,
	            int tag, int sync);
	int (*recv)(shmcoll_comm *c, const char *fn, void *buf, size_t bytes, int source, int tag,
	            size_t es, shmcoll_status *status);
	int (*sendrecv)(shmcoll_comm *c, const char *fn, const void *sbuf, size_t sbytes, int dest,
	                int stag, void *rbuf, size_t rbytes, int source, int rtag, size_t es,
	                shmcoll_status *status);
	void (*isend)(shmcoll_comm *c, shmcoll_request *r, const char *fn, const void *buf,
	              size_t bytes, int dest, int tag, int sync);
	void (*irecv)(shmcoll_comm *c, shmcoll_request *r, const char *fn, void *buf, size_t bytes,
	              int source, int tag);
	/* Whether a message from source with tag has arrived (its source, tag and size set). */
	int (*peek)(shmcoll_comm *c, int source, int tag, int *src, int *rtag, uint64_t *bytes);
	/* The bounded wait of c's node until ready(arg), for a message from source. */
	int (*wait_until)(shmcoll_comm *c, const char *fn, int (*ready)(void *), void *arg,
	                  int source);
};

extern const struct api_ops api__node_ops, api__hier_ops;
/* A communicator over several nodes whose leaders use a host's transport
 * (shmcoll_comm_create_hosted): api__hier_ops but for what would have a transfer advanced
 * off the caller's thread or needs the wire: its non-blocking calls and point-to-point,
 * refused with -ENOTSUP. */
extern const struct api_ops api__hosted_ops;

/* The table entries that only unwrap the communicator (c->u.MEMBER) and call the
 * collective of its kind (PREFIX_allreduce ...): the same for both kinds but for those two
 * names, so written once; ops_node.c and ops_hier.c expand it once each. */
#define API_OPS_FORWARD(PREFIX, MEMBER)                                                            \
	static int allreduce(shmcoll_comm *c, const void *send, void *recv, size_t count,          \
	                     shmcoll_dtype dt, shmcoll_op op)                                      \
	{                                                                                          \
		return PREFIX##_allreduce(c->u.MEMBER, send, recv, count, dt, op);                 \
	}                                                                                          \
	static int reduce(shmcoll_comm *c, const void *send, void *recv, size_t count,             \
	                  shmcoll_dtype dt, shmcoll_op op, int root)                               \
	{                                                                                          \
		return PREFIX##_reduce(c->u.MEMBER, send, recv, count, dt, op, root);              \
	}                                                                                          \
	static int bcast(shmcoll_comm *c, void *buf, size_t count, shmcoll_dtype dt, int root)     \
	{                                                                                          \
		return PREFIX##_bcast(c->u.MEMBER, buf, count, dt, root);                          \
	}                                                                                          \
	static int allgather(shmcoll_comm *c, const void *send, void *recv, size_t count,          \
	                     shmcoll_dtype dt)                                                     \
	{                                                                                          \
		return PREFIX##_allgather(c->u.MEMBER, send, recv, count, dt);                     \
	}                                                                                          \
	static int reduce_scatter(shmcoll_comm *c, const void *send, void *recv, size_t count,     \
	                          shmcoll_dtype dt, shmcoll_op op)                                 \
	{                                                                                          \
		return PREFIX##_reduce_scatter(c->u.MEMBER, send, recv, count, dt, op);            \
	}                                                                                          \
	static int gather(shmcoll_comm *c, const void *send, void *recv, size_t count,             \
	                  shmcoll_dtype dt, int root)                                              \
	{                                                                                          \
		return PREFIX##_gather(c->u.MEMBER, send, recv, count, dt, root);                  \
	}                                                                                          \
	static int scatter(shmcoll_comm *c, const void *send, void *recv, size_t count,            \
	                   shmcoll_dtype dt, int root)                                             \
	{                                                                                          \
		return PREFIX##_scatter(c->u.MEMBER, send, recv, count, dt, root);                 \
	}                                                                                          \
	static int alltoall(shmcoll_comm *c, const void *send, void *recv, size_t count,           \
	                    shmcoll_dtype dt)                                                      \
	{                                                                                          \
		return PREFIX##_alltoall(c->u.MEMBER, send, recv, count, dt);                      \
	}                                                                                          \
	static int barrier(shmcoll_comm *c)                                                        \
	{                                                                                          \
		return PREFIX##_barrier(c->u.MEMBER);                                              \
	}                                                                                          \
	static void *malloc_(shmcoll_comm *c, size_t bytes)                                        \
	{                                                                                          \
		return PREFIX##_malloc(c->u.MEMBER, bytes);                                        \
	}                                                                                          \
	static int free_(shmcoll_comm *c, void *ptr)                                               \
	{                                                                                          \
		return PREFIX##_free(c->u.MEMBER, ptr);                                            \
	}

/* A new request of c of kind (kept ones first), counted outstanding; NULL with a message on
 * c when out of memory. */
shmcoll_request *api__req_new(shmcoll_comm *c, const char *fn, enum req_kind kind);
/* Starts call a as a request of c: its arguments checked and c entered by the caller; none:
 * it moves nothing (the request is complete as started). 0 with *req set, or -ENOMEM with
 * *req = NULL. */
int api__istart(shmcoll_comm *c, const struct shmcoll_args *a, int none, shmcoll_request **req);
/* Releases every request kept for reuse (comm_destroy). */
void api__req_drain(shmcoll_comm *c);

/* A receive's -EMSGSIZE, with the message that says what was cut (a capacity of bytes). */
int api__cut(shmcoll_comm *c, const char *fn, const struct shmcoll_p2p_op *op, size_t bytes);
/* Fills st (if not NULL) from a receive that ended with rc. */
void api__status(shmcoll_status *st, const struct shmcoll_p2p_op *op, size_t es, int rc);

/* Wraps a node or hier communicator in a public one. NULL when out of memory. */
shmcoll_comm *api__wrap_node(struct shmcoll_node *n);
shmcoll_comm *api__wrap_hier(struct shmcoll_hier *h);
/* One over a host's transport (shmcoll_comm_create_hosted): api__hosted_ops. */
shmcoll_comm *api__wrap_hosted(struct shmcoll_hier *h);

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
	return c->ops->enter(c, fn);
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

#endif
