/* impl.h - what the files of lib/hier share: the multi-node communicator's state, its
 * failure handling, the node stages, the leaders' exchanges and the wide reductions. Private
 * to lib/hier. */
#ifndef SHMCOLL_HIER_IMPL_H
#define SHMCOLL_HIER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/core/node.h"
#include "lib/hier/hier.h"
#include "lib/kernels/kernels.h"
#include "lib/net/net.h"

/* Working memory of the compositions, grown on demand and kept. */
enum { SCR_IN, SCR_RES, SCR_TMP, SCR_NET, SCR_MOVE, SCR_COUNT };

struct shmcoll_hier {
	int rank, size; /* global: node-major, rank = node * nproc + lrank */
	int nnodes, node, nproc, lrank;
	struct shmcoll_node *local; /* this node's ranks */
	struct shmcoll_net *net;    /* the leader's connections, else NULL */
	_Atomic int broken;         /* non-zero once broken: later calls fail */
	void *scr[SCR_COUNT];
	size_t cap[SCR_COUNT];
	int xmode; /* how the next leaders' exchange runs: X_RUN, ... */
	struct shmcoll_xfer px[2 * SHMCOLL_NODES_MAX]; /* a posted exchange's transfers */
	char err[SHMCOLL_ERR_LEN];
	char cause[SHMCOLL_ERR_LEN];
};

/* How a leaders' exchange (hier__sendrecv, hier__post) runs. An algorithm of the leaders is
 * a sequence of exchanges with local work between them; to overlap its network time with the
 * node's next stage, it runs twice:
 *   X_POST    it stops at its first exchange, which stays in flight (the exchange returns
 *             POSTED, which every algorithm passes up as it does an error);
 *   X_RESUME  it runs from the start again, and its first exchange waits for the one in
 *             flight instead of starting it.
 * So whatever an algorithm does before its first exchange must give the same result twice
 * (it only sizes scratch and picks peers). */
enum { X_RUN, X_POST, X_RESUME };
#define POSTED 1

/* Records a message (hier.c). */
int hier__fail(struct shmcoll_hier *h, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Breaks everything after a failure whose message is recorded: the node communicator (its
 * ranks wake), the leader's connections (the other nodes learn), this one. Returns rc. */
int hier__broken(struct shmcoll_hier *h, int rc);
/* Records that bytes of working memory were not to be had, and breaks everything. */
int hier__oom(struct shmcoll_hier *h, const char *fn, size_t bytes);
/* Working memory i of at least bytes, or NULL. */
void *hier__scratch(struct shmcoll_hier *h, int i, size_t bytes);
static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* bytes rounded up so that what follows them in one scratch is aligned. */
static inline size_t hier__align16(size_t bytes)
{
	return (bytes + 15) & ~(size_t)15;
}

/* The word every frame of a call carries: both leaders must agree on it. */
uint64_t hier__call_word(uint32_t kind, shmcoll_dtype dt, shmcoll_op op, int root, size_t count);

/* The node stages: the node communicator entered and the collective run; an error comes
 * back with the node's message as ours, everything broken. */
int hier__local_reduce(struct shmcoll_hier *h, const void *send, void *recv, size_t count,
                       shmcoll_dtype dt, shmcoll_op op, int root);
int hier__local_bcast(struct shmcoll_hier *h, void *buf, size_t count, shmcoll_dtype dt, int root);
int hier__local_gather(struct shmcoll_hier *h, const void *send, void *recv, size_t count,
                       shmcoll_dtype dt, int root);
int hier__local_scatter(struct shmcoll_hier *h, const void *send, void *recv, size_t count,
                        shmcoll_dtype dt, int root);
int hier__local_barrier(struct shmcoll_hier *h);

/* The leaders' exchanges (hier.c). run: nx transfers at once; sendrecv: one send to node `to`
 * and one receive from node `from` (either -1: none), at once, or posted or resumed as
 * h->xmode says; post/wait: transfers left in flight while the node works, and their end. */
int hier__run(struct shmcoll_hier *h, const char *fn, struct shmcoll_xfer *x, int nx);
int hier__sendrecv(struct shmcoll_hier *h, const char *fn, uint64_t call, int to, const void *sbuf,
                   size_t slen, int from, void *rbuf, size_t rlen);
int hier__post(struct shmcoll_hier *h, const char *fn, struct shmcoll_xfer *x, int nx);
int hier__wait(struct shmcoll_hier *h, const char *fn);

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

/* The leaders' algorithms (lead.c), over m wide elements of w (or bytes, es = 1). */
/* The fold over every node's buf, the same bits on every node; *res says where the result
 * is: final if given and used, buf, or scratch. */
int hier__lead_allreduce(struct shmcoll_hier *h, const char *fn, const struct wide *w,
                         uint64_t call, uint8_t *buf, size_t m, uint8_t *final, uint8_t **res);
/* Ring reduce-scatter: node n ends holding the fold of block n of every node's buf (blocks
 * of seg elements each if seg, else lib/sched's even segments). */
int hier__lead_ring_rs(struct shmcoll_hier *h, const char *fn, const struct wide *w, uint64_t call,
                       uint8_t *buf, size_t m, size_t seg);
/* Ring allgather of blocks of es-byte elements: node n has block n and ends with all. */
int hier__lead_ring_ag(struct shmcoll_hier *h, const char *fn, uint64_t call, uint8_t *buf,
                       size_t m, size_t es, size_t seg);

#endif
