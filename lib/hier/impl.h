/* impl.h - what the files of lib/hier share: the multi-node communicator's state, its
 * failure handling, the node stages, the leaders' exchanges and the wide reductions. Private
 * to lib/hier. */
#ifndef SHMCOLL_HIER_IMPL_H
#define SHMCOLL_HIER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/node.h"
#include "lib/core/task.h"
#include "lib/hier/hier.h"
#include "lib/kernels/kernels.h"
#include "lib/net/net.h"
#include "lib/sched/sched.h"

struct hier_task;

/* Working memory of the compositions, grown on demand and kept. */
enum { SCR_IN, SCR_RES, SCR_TMP, SCR_NET, SCR_MOVE, SCR_COUNT };

struct shmcoll_hier {
	int rank, size; /* global: node-major, rank = node * nproc + lrank */
	int nnodes, node, nproc, lrank;
	struct shmcoll_node *local; /* this node's ranks */
	int borrowed;               /* local is the caller's (hosted): not destroyed with this */
	struct shmcoll_net *net;    /* the leader's connections, else NULL */
	struct shmcoll_wire *wire;  /* point-to-point with other nodes' ranks (lib/net/wire.h) */
	_Atomic int broken;         /* non-zero once broken: later calls fail */
	void *scr[SCR_COUNT];
	size_t cap[SCR_COUNT];
	struct shmcoll_queue tasks; /* the calls outstanding (hier.c) */
	struct shmcoll_xfer px[2];  /* the exchange in flight of a leaders' algorithm */
	char err[SHMCOLL_ERR_LEN];
	char cause[SHMCOLL_ERR_LEN];
};

/* Records a message (state.c). */
int hier__fail(struct shmcoll_hier *h, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Breaks everything after a failure whose message is recorded: the node communicator (its
 * ranks wake), the leader's connections (the other nodes learn), this one. Returns rc. */
int hier__broken(struct shmcoll_hier *h, int rc);
/* The wire's break (struct shmcoll_wire_cfg): breaks everything but the wire, which has
 * done its part. Async-signal-safe. */
void hier__wire_broke(void *h, int why);
/* What the wire of h is given of it at open (p2p.c): its shape, and h's parts it may reach. */
void hier__wire_cfg(struct shmcoll_hier *h, struct shmcoll_wire_cfg *wc);
/* Records that bytes of working memory were not to be had, and breaks everything. */
int hier__oom(struct shmcoll_hier *h, const char *fn, size_t bytes);
/* Working memory i of at least bytes, or NULL. */
void *hier__scratch(struct shmcoll_hier *h, int i, size_t bytes);
/* bytes rounded up so that what follows them in one scratch is aligned. */
static inline size_t hier__align16(size_t bytes)
{
	return (bytes + 15) & ~(size_t)15;
}

/* The word every frame of a call carries: both leaders must agree on it. */
uint64_t hier__call_word(uint32_t kind, shmcoll_dtype dt, shmcoll_op op, int root, size_t count);

/* How a reduction travels between its stages (wide.c): float16/bfloat16 sums, products and
 * averages as float32, rounded once at the end; integer averages as (quotient, remainder)
 * pairs of the division by the job's size, exact for any values; float averages as sums
 * divided at the end. */
enum { W_NATIVE, W_F32, W_QR };
struct wide {
	int mode;
	shmcoll_dtype dt; /* the type stages 1 and 2 reduce */
	shmcoll_op op;
	size_t es;   /* its element size */
	size_t mult; /* wide elements per element */
	shmcoll__reduce_fn fold;
};

struct wide hier__widen(shmcoll_dtype dt, shmcoll_op op);
/* The wide form of n elements of src (dtype dt) into dst, for a job of S ranks. */
void hier__wide_in(const struct wide *w, void *dst, const void *src, size_t n, shmcoll_dtype dt,
                   uint64_t S);
/* The final n elements (dtype dt, op) from the wide result src. dst may be src for
 * W_NATIVE. */
void hier__wide_out(const struct wide *w, void *dst, const void *src, size_t n, shmcoll_dtype dt,
                    shmcoll_op op, uint64_t S);

/* A leaders' algorithm in progress (lead.c), a task of the engine (lib/core/queue.h) that a
 * call runs as one of its stages, never queued itself: one set
 * of transfers, recursive doubling, the ring's reduce-scatter or allgather, or an allreduce
 * (recursive doubling for small vectors, the ring for large ones). Its first advance posts
 * its first exchange, so a composition can leave it in flight while the node works and
 * finish it later (the pipelines of colls.c). Over m elements of w.es bytes (wide elements
 * of a reduction, or bytes). */
enum { LEAD_XFER, LEAD_RS, LEAD_AG, LEAD_ALLREDUCE };
struct lead {
	struct shmcoll_task_head head; /* where it resumes, whether it blocks (its call has the
	                                * result: a stage is never waited for alone) */
	int kind;
	int posted; /* its exchange is in flight */
	const char *fn;
	uint64_t call;
	struct wide w;
	uint8_t *buf;   /* the vector (RD, RS, AG, ALLREDUCE) */
	size_t m, seg;  /* its elements; RS, AG: elements per block (0: even segments) */
	uint8_t *final; /* RD, ALLREDUCE: where the result may go instead of buf (or NULL) */
	uint8_t *res;   /* out, RD, ALLREDUCE: where the result is */
	struct shmcoll_xfer *x; /* XFER: the transfers, kept until it completes */
	int nx;
	/* its place */
	struct shmcoll_rd rd;
	int r, s, ring;
	uint8_t *in, *cur, *other;
};

void hier__lead_xfer(struct lead *l, const char *fn, struct shmcoll_xfer *x, int nx);
void hier__lead_allreduce(struct lead *l, const char *fn, const struct wide *w, uint64_t call,
                          uint8_t *buf, size_t m, uint8_t *final);
void hier__lead_rs(struct lead *l, const char *fn, const struct wide *w, uint64_t call,
                   uint8_t *buf, size_t m, size_t seg);
void hier__lead_ag(struct lead *l, const char *fn, uint64_t call, uint8_t *buf, size_t m, size_t es,
                   size_t seg);

/* Advances l, blocking as l->head.blocking says: 0 once complete, SHMCOLL_PENDING with its
 * exchange in flight (not blocking), or a negative errno (everything broken). */
int hier__lead_advance(struct shmcoll_hier *h, struct lead *l);

/* A call of a multi-node communicator (colls.c), a task of the engine (lib/core/queue.h) on
 * the communicator's queue: blocking, or not (then it returns SHMCOLL_PENDING where a stage
 * is not done yet). Its stages are node collectives (a task of the node communicator's
 * queue) and leaders' algorithms (struct lead). */
struct hier_task {
	struct shmcoll_task_head head;
	int (*advance)(struct shmcoll_hier *h, struct hier_task *t);
	const char *fn;
	/* the call */
	const uint8_t *send;
	uint8_t *recv;
	size_t count, es;
	shmcoll_dtype dt;
	shmcoll_op op;
	int root;
	struct wide w;
	uint64_t call;
	/* its place */
	size_t k, K;
	int node_on, lead_on;
	struct shmcoll_task node; /* the node stage in progress */
	struct lead lead;         /* the leaders' algorithm in progress */
	uint8_t *wres[2], *bufs, *out;
	struct shmcoll_xfer *x;
	const void **srcs;
	/* a hand-off between two ranks of the node (local_move): chunks of node bcasts */
	int mv_from, mv_to;
	const uint8_t *mv_src;
	uint8_t *mv_dst;
	size_t mv_bytes, mv_off;
	/* a composition of other calls (vcolls.c): the variable-count call's arguments, the call
	 * it runs now, and its padded blocks */
	uint32_t vkind;
	const size_t *vsc, *vsd, *vrc, *vrd;
	size_t vscount;
	uint64_t vmax;
	uint64_t
	    vhash[2]; /* allgatherv, reduce_scatterv: the recvcounts' hash and its complement */
	uint8_t *vbuf;
	struct hier_task *sub;
};

/* Fills t as a call of collective kind (colls.c: what shmcoll__hier_call_new does). */
void hier__call_init(struct hier_task *t, uint32_t kind, const void *send, void *recv, size_t count,
                     shmcoll_dtype dt, shmcoll_op op, int root);

/* Runs t to the end, blocking, behind the calls outstanding (hier.c); its result. */
int hier__task_run(struct shmcoll_hier *h, struct hier_task *t);

/* The stages of a call (hier.c). await_node: the node collective t->node, made by its init
 * function, entered and run (not blocking: started, then tested); await_lead: t->lead
 * advanced. Both return 0, SHMCOLL_PENDING or an error with everything broken (a node error
 * with the node's message as ours). */
int hier__await_node(struct shmcoll_hier *h, struct hier_task *t);
int hier__await_lead(struct shmcoll_hier *h, struct hier_task *t);

/* After an await returned rc != 0 at resume point at (queue.h's shmcoll__suspend_at). */
static inline int hier__suspend(struct hier_task *t, int at, int rc)
{
	return shmcoll__suspend_at(&t->head, at, rc);
}

/* Makes h's queue: its tasks are calls of h (at create). */
void hier__queue_init(struct shmcoll_hier *h);

#endif
