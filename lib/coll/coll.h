/* coll.h - the collectives of a node communicator, for the entry layer (lib/api) and the
 * multi-node compositions (lib/hier): arguments checked, the communicator entered. Each
 * collective has an init function, which makes a task of the call (lib/core/task.h: start,
 * test, wait) and picks its protocol, and a blocking form, which runs that task to the end.
 * Buffers, counts and roots mean what they mean in include/shmcoll.h; counts may be 0. */
#ifndef SHMCOLL_COLL_H
#define SHMCOLL_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "lib/core/node.h"

void shmcoll__allreduce_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op);
void shmcoll__reduce_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                          void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op, int root);
void shmcoll__bcast_init(struct shmcoll_node *n, struct shmcoll_task *t, void *buf, size_t count,
                         shmcoll_dtype dt, int root);
void shmcoll__allgather_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             void *recv, size_t sendcount, shmcoll_dtype dt);
void shmcoll__reduce_scatter_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                                  void *recv, size_t recvcount, shmcoll_dtype dt, shmcoll_op op);
void shmcoll__gather_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                          void *recv, size_t sendcount, shmcoll_dtype dt, int root);
void shmcoll__scatter_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                           void *recv, size_t recvcount, shmcoll_dtype dt, int root);
void shmcoll__alltoall_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                            void *recv, size_t count, shmcoll_dtype dt);
void shmcoll__barrier_init(struct shmcoll_node *n, struct shmcoll_task *t);

/* A collective call, as a non-blocking start, a variable-count call or a probe gives it:
 * every argument any kind takes (root where the kind has one, op where it reduces; bcast's
 * buffer is recv), the arrays read while its task runs. */
struct shmcoll_args {
	const char *fn; /* the public call's name, for its messages */
	const void *send;
	void *recv;
	size_t scount; /* allgatherv, gatherv: sendcount; scatterv: recvcount */
	const size_t *sc, *sd, *rc, *rd;
	size_t count; /* the fixed-count collectives, scan, exscan */
	shmcoll_dtype dt;
	shmcoll_op op;
	int root;
	uint32_t kind; /* lib/core/tuning.h's KIND_*, any but KIND_MALLOC and KIND_FREE */
	/* No padding, and the non-blocking starts name every field: the block is stored field
	 * by field, where a zeroed block cost a `rep stos` of most of a start's time. */
};

/* The non-blocking kinds (kinds.c), indexed by KIND_*: how each kind of call becomes its
 * resumable operation, read by both kinds of communicator. fn is the blocking call's name,
 * reduces whether op means anything, init makes the node communicator's task of a call (its
 * fn left to the caller); a multi-node communicator has its own advance per kind
 * (lib/hier/colls.c) and takes fn and reduces from here. KIND_MALLOC and KIND_FREE have no
 * row: they are no calls of the API's non-blocking form. */
struct shmcoll_start {
	const char *fn;
	int reduces;
	void (*init)(struct shmcoll_node *n, struct shmcoll_task *t, const struct shmcoll_args *a);
};
extern const struct shmcoll_start shmcoll__kinds[KIND_COUNT];

/* The call word's count of a collective whose counts every rank passes alike: a hash of
 * them (FNV-1a 64), so ranks that pass different ones fail the call-word check (and, across
 * nodes, the agreement lib/hier/vcolls.c makes of it). */
static inline uint64_t shmcoll__counts_word(const size_t *counts, int n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	int i;

	for (i = 0; i < n; i++) {
		h ^= (uint64_t)counts[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The variable-count collectives and the prefix reductions (include/shmcoll.h), arguments
 * checked: the arrays are read while the task runs. exclusive: exscan. Run them with
 * shmcoll__node_run (blocking) or shmcoll__task_start. */
void shmcoll__allgatherv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                              size_t sendcount, void *recv, const size_t *recvcounts,
                              const size_t *displs, shmcoll_dtype dt);
void shmcoll__gatherv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                           size_t sendcount, void *recv, const size_t *recvcounts,
                           const size_t *displs, shmcoll_dtype dt, int root);
void shmcoll__scatterv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                            const size_t *sendcounts, const size_t *displs, void *recv,
                            size_t recvcount, shmcoll_dtype dt, int root);
void shmcoll__alltoallv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                             const size_t *sendcounts, const size_t *sdispls, void *recv,
                             const size_t *recvcounts, const size_t *rdispls, shmcoll_dtype dt);
void shmcoll__reduce_scatterv_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                                   void *recv, const size_t *recvcounts, shmcoll_dtype dt,
                                   shmcoll_op op);
void shmcoll__scan_init(struct shmcoll_node *n, struct shmcoll_task *t, const void *send,
                        void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op, int exclusive);

/* With one rank (n->size 1): makes t a copy of the caller's block to where it goes (solo.c)
 * and returns 1; every init function above asks first. Else 0. */
int shmcoll__alone(const struct shmcoll_node *n, struct shmcoll_task *t);

/* Runs t (made by an init function above) to its end, blocking: its result. */
int shmcoll__node_run(struct shmcoll_node *n, struct shmcoll_task *t);

int shmcoll__node_allreduce(struct shmcoll_node *n, const void *send, void *recv, size_t count,
                            shmcoll_dtype dt, shmcoll_op op);
int shmcoll__node_reduce(struct shmcoll_node *n, const void *send, void *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root);
int shmcoll__node_bcast(struct shmcoll_node *n, void *buf, size_t count, shmcoll_dtype dt,
                        int root);
int shmcoll__node_allgather(struct shmcoll_node *n, const void *send, void *recv, size_t sendcount,
                            shmcoll_dtype dt);
int shmcoll__node_reduce_scatter(struct shmcoll_node *n, const void *send, void *recv,
                                 size_t recvcount, shmcoll_dtype dt, shmcoll_op op);
int shmcoll__node_gather(struct shmcoll_node *n, const void *send, void *recv, size_t sendcount,
                         shmcoll_dtype dt, int root);
int shmcoll__node_scatter(struct shmcoll_node *n, const void *send, void *recv, size_t recvcount,
                          shmcoll_dtype dt, int root);
int shmcoll__node_alltoall(struct shmcoll_node *n, const void *send, void *recv, size_t count,
                           shmcoll_dtype dt);
int shmcoll__node_barrier(struct shmcoll_node *n);

#endif
