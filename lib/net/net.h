/* net.h - the transport between the leaders of a multi-node job: one TCP
 * connection per pair of nodes, driven by io_uring (liburing) or, where
 * io_uring is unavailable or SHMCOLL_NET=poll, by poll(). Messages travel as
 * frames (frame.h): a fixed header, checked against what the receiver posted
 * before a byte of payload is read, then the payload.
 *
 * A struct shmcoll_net belongs to one thread at a time. Every operation has a
 * deadline; after any failure the net is broken: every socket is shut down
 * (the peers' pending operations fail at once instead of timing out) and every
 * later operation returns -ECANCELED. */
#ifndef SHMCOLL_NET_H
#define SHMCOLL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "lib/net/frame.h"
#include "lib/net/xfer.h"
#include "shmcoll.h"

enum shmcoll_net_kind {
	NET_AUTO,  /* io_uring, else poll where io_uring_setup fails (EPERM, ENOSYS) */
	NET_URING, /* io_uring or fail */
	NET_POLL,  /* poll() */
	NET_HOST,  /* the host's transport (shmcoll__net_open_host): never from a cfg */
};

struct shmcoll_net_cfg {
	int nnodes;                            /* nodes in the job, >= 2 */
	int node;                              /* this node, 0..nnodes-1 */
	int nproc;                             /* ranks per node (checked in every hello) */
	const char *token;                     /* the job's secret (shmcoll__token_valid) */
	const char (*addrs)[SHMCOLL_ADDR_MAX]; /* nnodes entries: every leader's listener */
	int listen_fd;      /* this node's listening socket (inherited), or -1: bind addrs[node] */
	int64_t timeout_ns; /* the deadline of every operation, connecting included; < 0: none */
	int kind;           /* enum shmcoll_net_kind; NET_AUTO also reads SHMCOLL_NET */
	int log;            /* write one line to stderr per refused connection */
};

struct shmcoll_net;

/* Connects the full mesh: this node accepts the hellos of every higher node
 * on its listener (refusing, logging if cfg->log, and going on serving after
 * a wrong token, version, job shape or malformed hello) and connects to
 * every lower node (retrying refused connects until the deadline), each
 * connection opening with a hello both ways. Returns 0, or -ETIMEDOUT,
 * -ENOMEM, -EPROTO (a lower node answered with a bad hello), -ENOTSUP (built
 * without liburing: multi-node jobs need it), or another negative errno of
 * the socket calls, with a message in err. */
int shmcoll__net_open(const struct shmcoll_net_cfg *cfg, struct shmcoll_net **out, char *err,
                      size_t errlen);

/* A net over a transport the host supplies (shmcoll_transport, include/shmcoll.h; the
 * backend is net_host.c) instead of sockets: nothing to connect, every transfer handed to
 * t's functions, which run on the thread of the post, test or wait that calls them. No
 * frame travels: the host's messages are reliable and ordered per pair already, so the
 * sequence checks have nothing to find, and the call word is not carried (a receive's got
 * is its own call: a host's program is held to matching calls by the host's rules). A wait
 * with timeout_ns >= 0 tests until the deadline instead of calling t's wait, which has
 * none. Returns 0, -EINVAL (a NULL function, nnodes or node out of range) or -ENOMEM, with
 * a message in err. */
int shmcoll__net_open_host(int nnodes, int node, const shmcoll_transport *t, int64_t timeout_ns,
                           struct shmcoll_net **out, char *err, size_t errlen);

/* Closes every socket and frees n (NULL: nothing). */
void shmcoll__net_close(struct shmcoll_net *n);

/* Breaks n: shuts every socket down so the peers learn at once. */
void shmcoll__net_shutdown(struct shmcoll_net *n);

/* "io_uring" or "poll": what moves n's bytes. */
const char *shmcoll__net_kind_name(const struct shmcoll_net *n);

/* Moves every transfer of x to completion, concurrently (at most one send
 * and one receive per peer in x), each within cfg->timeout_ns of the start.
 * Returns 0, or breaks n and returns:
 *   -ETIMEDOUT   a transfer did not complete by the deadline
 *   -EOWNERDEAD  a peer closed or reset its connection (it died or aborted)
 *   -EPROTO      a peer sent a malformed frame, one out of sequence, one
 *                whose length is not the posted one, or a different call
 *                word (x[i].got says which) -- checked before its payload
 *   -ECANCELED   n was broken before
 * with a message naming the peer in err. */
int shmcoll__net_run(struct shmcoll_net *n, struct shmcoll_xfer *x, int nx, char *err,
                     size_t errlen);

/* shmcoll__net_run in two halves, so the transfers move while the caller does
 * other work: post validates and starts them (io_uring: submitted to the
 * kernel; poll: moved as far as the sockets take without blocking), wait
 * moves them to completion. Between the two, x and every buffer it names
 * belong to the net, and no other call may be made but shmcoll__net_shutdown;
 * a posted call must be waited for, even after a failure elsewhere (wait then
 * reaps it and returns the failure). Both return as net_run; post also
 * -EBUSY when a call is posted already. Waiting with none posted returns 0. */
int shmcoll__net_post(struct shmcoll_net *n, struct shmcoll_xfer *x, int nx, char *err,
                      size_t errlen);
int shmcoll__net_wait(struct shmcoll_net *n, char *err, size_t errlen);

/* net_wait without blocking: moves the posted transfers as far as they go now and sets
 * *done to whether they are complete (then the call is over, as after net_wait). Returns
 * 0, or fails as net_wait does (the deadline counts from the post); with none posted, 0
 * and *done = 1. */
int shmcoll__net_test(struct shmcoll_net *n, int *done, char *err, size_t errlen);

/* How long a wait spins (retrying, without sleeping) before it sleeps: 0
 * (the default) where CPUs are shared with other ranks, a few tens of
 * microseconds where the leader has a CPU to itself -- waking from a sleep
 * costs about that much on an idle vCPU. */
void shmcoll__net_set_spin(struct shmcoll_net *n, int64_t ns);

#endif
