/* hier.h - communicators over several nodes: shared memory inside a node (a node
 * communicator of its own, lib/core), the leaders' transport (lib/net) between nodes. The
 * entry layer (lib/api) checks a call's arguments against the global rank and size, enters
 * the communicator and hands the call here. */
#ifndef SHMCOLL_HIER_H
#define SHMCOLL_HIER_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"
#include "lib/core/p2p.h"
#include "lib/net/wire.h"

struct shmcoll_hier;
struct shmcoll_node;

/* Wide bytes per chunk of a reduction, and bytes per chunk of a bcast: a chunk's exchange
 * among the leaders overlaps the node's work on the next (and the tests size their
 * multi-chunk cases by it). */
#define SHMCOLL_HIER_CHUNK_BYTES ((size_t)1 << 20)

struct shmcoll_hier_cfg {
	int nnodes, node;  /* SHMCOLL_NNODES, SHMCOLL_NODE_RANK */
	int nproc, lrank;  /* SHMCOLL_LOCAL_SIZE, SHMCOLL_LOCAL_RANK */
	const char *job;   /* this node's job name: its arena */
	const char *token; /* SHMCOLL_TOKEN */
	const char *nodes; /* SHMCOLL_NODES: every leader's "host:port", comma-separated */
	int listen_fd;     /* SHMCOLL_NET_FD on the leader, else -1 */
	int64_t
	    timeout_ns; /* the bound of every wait, the node's and the transport's (< 0: none) */
	int log;        /* the transport logs refused connections */
};

/* Creates this rank's communicator over every node: its node's, then (the leader) the
 * connections to the other leaders; every rank of the node fails alike if its leader cannot
 * connect. Returns 0 or a negative errno with a message in err. */
int shmcoll__hier_create(const struct shmcoll_hier_cfg *cfg, struct shmcoll_hier **out, char *err,
                         size_t errlen);
/* Creates this rank's communicator over nnodes nodes from local, its node's communicator
 * (borrowed: it outlives the new one, which breaks it on failure as its own), node being
 * this node's index, the leaders' exchanges going through t (net.h's shmcoll__net_open_host)
 * and no wire: point-to-point with other nodes is not to be called on it. Collective over
 * every rank of every node; every node must have as many ranks (-EINVAL on every rank).
 * Returns 0 or a negative errno with a message in err. */
int shmcoll__hier_create_hosted(struct shmcoll_node *local, int nnodes, int node,
                                const shmcoll_transport *t, struct shmcoll_hier **out, char *err,
                                size_t errlen);
/* Local, as shmcoll__node_destroy: -EBUSY (and nothing changes) with calls outstanding. */
int shmcoll__hier_destroy(struct shmcoll_hier *h);
/* Async-signal-safe. */
void shmcoll__hier_abort(struct shmcoll_hier *h);
/* Breaks h for every rank, for why (an errno: EPROTO for a mismatch this rank found before
 * any wait), as abort does for ECANCELED. Async-signal-safe. */
void shmcoll__hier_break(struct shmcoll_hier *h, int why);

/* As shmcoll__node_enter: 0 with the last message cleared, or the error that broke the
 * communicator (here or on this node). */
int shmcoll__hier_enter(struct shmcoll_hier *h, const char *fn);

/* The buffer of this rank's last message (shmcoll_last_error), SHMCOLL_ERR_LEN bytes. */
char *shmcoll__hier_err(struct shmcoll_hier *h);

/* This rank's global rank, the global size. */
int shmcoll__hier_rank(const struct shmcoll_hier *h);
int shmcoll__hier_size(const struct shmcoll_hier *h);
/* This rank's node communicator, and the ranks per node. */
struct shmcoll_node *shmcoll__hier_local(const struct shmcoll_hier *h);
int shmcoll__hier_nproc(const struct shmcoll_hier *h);
/* "io_uring" or "poll" on a leader, NULL elsewhere. */
const char *shmcoll__hier_transport(const struct shmcoll_hier *h);

/* The collectives, arguments checked, count > 0, communicator entered. Buffers, counts and
 * roots are global, as in include/shmcoll.h. */
int shmcoll__hier_barrier(struct shmcoll_hier *h);
int shmcoll__hier_allreduce(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv,
                            size_t count, shmcoll_dtype dt, shmcoll_op op);
int shmcoll__hier_reduce(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root);
int shmcoll__hier_bcast(struct shmcoll_hier *h, uint8_t *buf, size_t count, shmcoll_dtype dt,
                        int root);
int shmcoll__hier_allgather(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t sc,
                            shmcoll_dtype dt);
int shmcoll__hier_reduce_scatter(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv,
                                 size_t rcount, shmcoll_dtype dt, shmcoll_op op);
int shmcoll__hier_gather(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t sc,
                         shmcoll_dtype dt, int root);
int shmcoll__hier_scatter(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t rcount,
                          shmcoll_dtype dt, int root);
int shmcoll__hier_alltoall(struct shmcoll_hier *h, const uint8_t *send, uint8_t *recv, size_t count,
                           shmcoll_dtype dt);
void *shmcoll__hier_malloc(struct shmcoll_hier *h, size_t bytes);
int shmcoll__hier_free(struct shmcoll_hier *h, void *ptr);

/* The collectives as calls that resume (lib/core/task.h has the model; colls.c the calls):
 * made by shmcoll__hier_call_new for collective kind (lib/core/algo.h's KIND_*, arguments as
 * above, count > 0), started behind the calls outstanding and advanced without blocking;
 * test says whether one is done, wait blocks until it is and returns its result. A call
 * belongs to the communicator from start until test said done or wait returned; then
 * shmcoll__hier_call_free releases it. NULL when out of memory. */
struct hier_task;
struct hier_task *shmcoll__hier_call_new(struct shmcoll_hier *h, uint32_t kind, const void *send,
                                         void *recv, size_t count, shmcoll_dtype dt, shmcoll_op op,
                                         int root);
void shmcoll__hier_call_free(struct hier_task *t);
void shmcoll__hier_start(struct shmcoll_hier *h, struct hier_task *t);
void shmcoll__hier_test(struct shmcoll_hier *h, struct hier_task *t, int *done);
int shmcoll__hier_wait(struct shmcoll_hier *h, struct hier_task *t);
/* Advances every outstanding call without blocking; whether any is still outstanding. */
int shmcoll__hier_progress(struct shmcoll_hier *h);
/* The result of a call test said done. */
int shmcoll__hier_result(const struct hier_task *t);
/* Whether t is done, as the last test or wait left it (nothing moved). */
int shmcoll__hier_done(const struct hier_task *t);

/* The variable-count collectives and prefix reductions (include/shmcoll.h) as calls of the
 * same life cycle (vcolls.c): kind is KIND_ALLGATHERV ... KIND_EXSCAN; arguments checked,
 * the arrays read while the call runs; count is scan's and exscan's, scount the sendcount of
 * allgatherv and gatherv and the recvcount of scatterv. NULL when out of memory. The
 * blocking form runs one to its end and frees it. */
struct hier_task *shmcoll__hier_vcall_new(struct shmcoll_hier *h, uint32_t kind, const void *send,
                                          size_t scount, const size_t *sendcounts,
                                          const size_t *sdispls, void *recv,
                                          const size_t *recvcounts, const size_t *rdispls,
                                          size_t count, shmcoll_dtype dt, shmcoll_op op, int root);
int shmcoll__hier_vrun(struct shmcoll_hier *h, struct hier_task *t);

/* A wait on the node communicator ended with rc: negative, the node's message is taken as
 * this communicator's and everything breaks (the other nodes learn). Returns rc. */
int shmcoll__hier_node_rc(struct shmcoll_hier *h, int rc);

/* Point-to-point (p2p.c): an operation to or from a rank of this node goes through the
 * node's engine, one to or from another node over the wire (lib/net/wire.h), a receive from any
 * source through both. Ranks are global; arguments checked, communicator entered. */
enum { HP_LOCAL, HP_WIRE, HP_ANY };
struct hier_p2p_op {
	struct shmcoll_task_head head; /* done, and then rc its result (lib/core/queue.h) */
	int where;
	struct shmcoll_p2p_op node; /* the local half; once done, the results (src global) */
	struct wire_op wire;
};
void shmcoll__hier_isend(struct shmcoll_hier *h, struct hier_p2p_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag);
void shmcoll__hier_irecv(struct shmcoll_hier *h, struct hier_p2p_op *op, const char *fn, void *buf,
                         size_t bytes, int source, int tag);
/* Moves op along without blocking: *done, and once done its result. A failure that broke
 * the communicator is recorded as this rank's message and breaks it everywhere. */
int shmcoll__hier_p2p_test(struct shmcoll_hier *h, struct hier_p2p_op *op, int *done);
/* Waits for op (bounded as every wait): its result, as test's. */
int shmcoll__hier_p2p_wait(struct shmcoll_hier *h, struct hier_p2p_op *op);
/* The earliest arrived message a receive of (source, tag) would take: 1 with its global
 * source, tag and bytes, else 0. */
int shmcoll__hier_p2p_peek(struct shmcoll_hier *h, int source, int tag, int *src, int *rtag,
                           uint64_t *bytes);

#endif
