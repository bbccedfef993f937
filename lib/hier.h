/* hier.h - communicators over several nodes (hier.c): shared memory inside a
 * node, the leaders' transport (net.h) between nodes. A communicator with
 * c->hier set is one of these; every public function hands it here after
 * checking its arguments against the global rank and size. */
#ifndef SHMCOLL_HIER_H
#define SHMCOLL_HIER_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

/* Wide bytes per chunk of a reduction, and bytes per chunk of a bcast: a
 * chunk's exchange among the leaders overlaps the node's work on the next
 * (and the tests size their multi-chunk cases by it). */
#define SHMCOLL_HIER_CHUNK_BYTES ((size_t)1 << 20)

struct shmcoll_hier_cfg {
	int nnodes, node;   /* SHMCOLL_NNODES, SHMCOLL_NODE_RANK */
	int nproc, lrank;   /* SHMCOLL_LOCAL_SIZE, SHMCOLL_LOCAL_RANK */
	const char *job;    /* this node's job name: its arena */
	const char *token;  /* SHMCOLL_TOKEN */
	const char *nodes;  /* SHMCOLL_NODES: every leader's "host:port", comma-separated */
	int listen_fd;      /* SHMCOLL_NET_FD on the leader, else -1 */
	int timeout_ms;     /* the node communicator's (0: its default) */
	int64_t timeout_ns; /* the transport's deadline per operation (< 0: none) */
	int log;            /* the transport logs refused connections */
};

/* Creates this rank's communicator over every node: its node's, then (the
 * leader) the connections to the other leaders; every rank of the node
 * fails alike if its leader cannot connect. Returns 0 or a negative errno
 * with a message in err. */
int shmcoll__hier_create(const struct shmcoll_hier_cfg *cfg, shmcoll_comm **out, char *err,
                         size_t errlen);
void shmcoll__hier_destroy(shmcoll_comm *c);
void shmcoll__hier_abort(shmcoll_comm *c);
int shmcoll__hier_enter(shmcoll_comm *c, const char *fn);
/* This rank's node communicator, and the ranks per node. */
const shmcoll_comm *shmcoll__hier_local(const shmcoll_comm *c);
int shmcoll__hier_nproc(const shmcoll_comm *c);
/* "io_uring" or "poll" on a leader, NULL elsewhere. */
const char *shmcoll__hier_transport(const shmcoll_comm *c);

/* The collectives, arguments already checked, count > 0. */
int shmcoll__hier_barrier(shmcoll_comm *c);
int shmcoll__hier_allreduce(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t count,
                            shmcoll_dtype dt, shmcoll_op op);
int shmcoll__hier_reduce(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t count,
                         shmcoll_dtype dt, shmcoll_op op, int root);
int shmcoll__hier_bcast(shmcoll_comm *c, uint8_t *buf, size_t count, shmcoll_dtype dt, int root);
int shmcoll__hier_allgather(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t sc,
                            shmcoll_dtype dt);
int shmcoll__hier_reduce_scatter(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t rcount,
                                 shmcoll_dtype dt, shmcoll_op op);
int shmcoll__hier_gather(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t sc,
                         shmcoll_dtype dt, int root);
int shmcoll__hier_scatter(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t rcount,
                          shmcoll_dtype dt, int root);
int shmcoll__hier_alltoall(shmcoll_comm *c, const uint8_t *send, uint8_t *recv, size_t count,
                           shmcoll_dtype dt);
void *shmcoll__hier_malloc(shmcoll_comm *c, size_t bytes);
int shmcoll__hier_free(shmcoll_comm *c, void *ptr);

#endif
