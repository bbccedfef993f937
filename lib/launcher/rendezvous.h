/* rendezvous.h - how the launchers of a multi-node job meet (shmcoll-run only):
 * node 0 serves the root address, every other node's launcher registers there
 * with a hello, node 0 answers with its own and, once all have, sends each the
 * table of every node's leader address. The connections stay open afterwards as
 * the job's control connections (each node's exit status, then the job's).
 *
 * The table frame's `call` word carries what every node must agree on for
 * torchrun's variables: bits 0-15 the MASTER_PORT node 0 chose (0: none), bits
 * 16-63 the run id (TORCHELASTIC_RUN_ID). Launchers that predate it send 0 and
 * ignore it, so either side may be the older one. */
#ifndef SHMCOLL_RENDEZVOUS_H
#define SHMCOLL_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/net/frame.h"

#define SHMCOLL_HELLO_SILENCE_MS 5000 /* node 0 drops a client silent this long */

struct shmcoll_rdv_cfg {
	int nnodes;            /* >= 2 */
	int node;              /* this launcher's node, 0..nnodes-1 */
	int nproc;             /* ranks per node */
	const char *token;     /* the job's secret (shmcoll__token_valid) */
	const char *root;      /* node 0's "host:port" */
	const char *node_addr; /* the host this node's leader listens on; NULL: default */
	int timeout_ms;        /* the deadline of the whole rendezvous, from the call */
	uint16_t master_port;  /* node 0: the MASTER_PORT to hand out (0: none) */
	uint64_t run_id;       /* node 0: the run id to hand out (its low 48 bits) */
};

struct shmcoll_rdv {
	int leader_fd;                   /* the leader's listening socket (close-on-exec) */
	char (*addrs)[SHMCOLL_ADDR_MAX]; /* nnodes leader addresses, in node order */
	int *ctl;             /* nnodes entries: node 0 holds ctl[j] to node j (ctl[0] = -1);
	                         node i > 0 holds ctl[0] to node 0, the rest -1. Non-blocking,
	                         close-on-exec. */
	uint16_t master_port; /* what node 0 handed out (0: none, an older node 0) */
	uint64_t run_id;      /* 48 bits */
};

/* Runs the rendezvous of cfg->node: node 0 serves cfg->root until every other
 * node has registered (refusing and logging, one line each on stderr, every
 * connection with a bad hello, and going on serving), node i > 0 connects to
 * it (retrying refused connects) and waits for the table. Returns 0 with r
 * filled, or a negative errno with a message in err (-ETIMEDOUT: the deadline
 * passed; -EPROTO: node 0 answered with a bad hello or table). */
int shmcoll__rdv_run(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, char *err,
                     size_t errlen);

/* Closes whatever of r is still open and frees it. */
void shmcoll__rdv_close(struct shmcoll_rdv *r, int nnodes);

/* Writes a whole frame (header and len bytes of payload) to the non-blocking
 * socket fd, waiting at most timeout_ms for room. Returns 0 or a negative errno. */
int shmcoll__rdv_send_frame(int fd, const struct shmcoll_frame *f, const void *payload,
                            int timeout_ms);

/* Generates a token of 32 hex digits into buf (>= 33 bytes). Returns 0 or -errno. */
int shmcoll__rdv_make_token(char *buf, size_t len);

#endif
