/* comm.c - communicators: from the launcher's environment (shmcoll-run's, one node or several
 * through lib/hier; another launcher's through launcher_env.c), from a config, destroyed,
 * aborted; the accessors; the error texts. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/api/api.h"
#include "lib/api/launcher_env.h"
#include "lib/core/env.h"
#include "lib/core/errors.h"
#include "lib/core/node.h"
#include "lib/hier/hier.h"
#include "lib/kernels/kernels.h"
#include "lib/net/frame.h"

const char *shmcoll_strerror(int err)
{
	return shmcoll__strerror(err);
}

size_t shmcoll_dtype_size(shmcoll_dtype dtype)
{
	return shmcoll__dtype_size(dtype);
}

int shmcoll_comm_rank(const shmcoll_comm *c)
{
	return c ? c->rank : -EINVAL;
}

int shmcoll_comm_size(const shmcoll_comm *c)
{
	return c ? c->size : -EINVAL;
}

int api__create(const shmcoll_config *cfg, shmcoll_comm **out)
{
	const char *fn = "shmcoll_comm_create";
	struct shmcoll_node_cfg nc = {0};
	char err[SHMCOLL_ERR_LEN - 64];
	struct shmcoll_node *n;
	int rc;

	if (!out)
		return api__create_fail(-EINVAL, "%s: comm (the out pointer) is NULL", fn);
	*out = NULL;
	if (!cfg)
		return api__create_fail(-EINVAL, "%s: cfg is NULL", fn);
	if (cfg->size < 1 || cfg->size > SHMCOLL_MAX_RANKS)
		return api__create_fail(-EINVAL, "%s: size %d out of range 1..%d", fn, cfg->size,
		                        SHMCOLL_MAX_RANKS);
	if (cfg->rank < 0 || cfg->rank >= cfg->size)
		return api__create_fail(-EINVAL, "%s: rank %d out of range 0..%d", fn, cfg->rank,
		                        cfg->size - 1);
	if (!cfg->job || !cfg->job[0])
		return api__create_fail(-EINVAL, "%s: job is NULL or empty", fn);
	nc.rank = cfg->rank;
	nc.size = cfg->size;
	nc.job = cfg->job;
	nc.arena_bytes = cfg->arena_bytes;
	nc.timeout_ns = shmcoll__timeout_ns(cfg->timeout_ms);
	rc = shmcoll__node_create(&nc, &n, err, sizeof(err));
	if (rc < 0)
		return api__create_fail(rc, "%s: %s", fn, err);
	*out = api__wrap_node(n);
	if (!*out) {
		shmcoll__node_destroy(n);
		return api__create_fail(-ENOMEM, "%s: out of memory", fn);
	}
	return 0;
}

int shmcoll_comm_create(const shmcoll_config *cfg, shmcoll_comm **out)
{
	api__create_fail(0, "%s", "");
	return api__create(cfg, out);
}

/* shmcoll_init of a rank of a multi-node job (SHMCOLL_NNODES > 1): the launcher's variables
 * must agree with each other. */
static int init_nodes(long long rank, long long size, long long nnodes, const char *job,
                      shmcoll_comm **out)
{
	struct shmcoll_hier_cfg hc = {0};
	char err[SHMCOLL_ERR_LEN - 64];
	long long node, lrank, lsize, fd = -1;
	const char *debug = getenv("SHMCOLL_DEBUG");
	struct shmcoll_hier *h;
	int rc;

	if (shmcoll__env_long("SHMCOLL_NODE_RANK", 0, nnodes - 1, &node) != 1 ||
	    shmcoll__env_long("SHMCOLL_LOCAL_SIZE", 1, SHMCOLL_MAX_RANKS, &lsize) != 1 ||
	    shmcoll__env_long("SHMCOLL_LOCAL_RANK", 0, lsize - 1, &lrank) != 1 ||
	    size != nnodes * lsize || rank != node * lsize + lrank)
		return api__create_fail(
		    -EINVAL,
		    "shmcoll_init: SHMCOLL_NODE_RANK, SHMCOLL_LOCAL_RANK and "
		    "SHMCOLL_LOCAL_SIZE are missing or disagree with "
		    "SHMCOLL_RANK=%lld, SHMCOLL_SIZE=%lld and SHMCOLL_NNODES=%lld",
		    rank, size, nnodes);
	hc.token = getenv("SHMCOLL_TOKEN");
	hc.nodes = getenv("SHMCOLL_NODES");
	if (!hc.token || !hc.nodes)
		return api__create_fail(-EINVAL,
		                        "shmcoll_init: a multi-node job needs SHMCOLL_TOKEN "
		                        "and SHMCOLL_NODES (shmcoll-run --nnodes sets them)");
	if (lrank == 0 && shmcoll__env_long("SHMCOLL_NET_FD", 0, INT_MAX, &fd) < 0)
		return api__create_fail(-EINVAL,
		                        "shmcoll_init: SHMCOLL_NET_FD is not a descriptor");
	hc.nnodes = (int)nnodes;
	hc.node = (int)node;
	hc.nproc = (int)lsize;
	hc.lrank = (int)lrank;
	hc.job = job;
	hc.listen_fd = lrank == 0 ? (int)fd : -1;
	hc.timeout_ns = shmcoll__timeout_ns(0);
	hc.log = debug && *debug && strcmp(debug, "0") != 0;
	rc = shmcoll__hier_create(&hc, &h, err, sizeof(err));
	if (rc < 0)
		return api__create_fail(rc, "shmcoll_init: %s", err);
	*out = api__wrap_hier(h);
	if (!*out) {
		shmcoll__hier_destroy(h);
		return api__create_fail(-ENOMEM, "shmcoll_init: out of memory");
	}
	return 0;
}

int shmcoll_comm_create_hosted(shmcoll_comm *node, int nnodes, int node_index,
                               const shmcoll_transport *t, shmcoll_comm **out)
{
	const char *fn = "shmcoll_comm_create_hosted";
	char err[SHMCOLL_ERR_LEN - 64];
	struct shmcoll_hier *h;
	int rc;

	api__create_fail(0, "%s", "");
	if (!out)
		return api__create_fail(-EINVAL, "%s: newcomm (the out pointer) is NULL", fn);
	*out = NULL;
	if (!node || !t || !t->start || !t->test || !t->wait || !t->cancel)
		return api__create_fail(-EINVAL, "%s: node, t or one of t's functions is NULL", fn);
	if (node->ops != &api__node_ops)
		return api__create_fail(-EINVAL, "%s: node is not a communicator of one node", fn);
	if (nnodes < 2 || nnodes > SHMCOLL_NODES_MAX)
		return api__create_fail(-EINVAL, "%s: nnodes %d out of range 2..%d", fn, nnodes,
		                        SHMCOLL_NODES_MAX);
	if (node_index < 0 || node_index >= nnodes)
		return api__create_fail(-EINVAL, "%s: node_index %d out of range 0..%d", fn,
		                        node_index, nnodes - 1);
	API_HOLD(node);
	rc = api__enter(node, fn);
	if (rc < 0)
		return api__create_fail(rc, "%s: %s", fn, node->err);
	rc = shmcoll__hier_create_hosted(node->u.node, nnodes, node_index, t, &h, err, sizeof(err));
	if (rc < 0)
		return api__create_fail(rc, "%s: %s", fn, err);
	*out = api__wrap_hosted(h);
	if (!*out) {
		shmcoll__hier_destroy(h);
		return api__create_fail(-ENOMEM, "%s: out of memory", fn);
	}
	return 0;
}

/* shmcoll_init under shmcoll-run: SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_JOB, all three. */
static int init_own(shmcoll_comm **out)
{
	long long rank, size, nnodes;
	shmcoll_config cfg = {0};
	int r, s, k;

	r = shmcoll__env_long("SHMCOLL_RANK", 0, SHMCOLL_MAX_RANKS - 1, &rank);
	s = shmcoll__env_long("SHMCOLL_SIZE", 1, SHMCOLL_MAX_RANKS, &size);
	cfg.job = getenv("SHMCOLL_JOB");
	if (r < 0 || s < 0)
		return api__create_fail(-EINVAL,
		                        "shmcoll_init: SHMCOLL_RANK or SHMCOLL_SIZE is not a "
		                        "valid number");
	if (r == 0 || s == 0 || !cfg.job || !*cfg.job)
		return api__create_fail(-EINVAL, "shmcoll_init: SHMCOLL_RANK, SHMCOLL_SIZE and "
		                                 "SHMCOLL_JOB must be set together");
	k = shmcoll__env_long("SHMCOLL_NNODES", 1, SHMCOLL_NODES_MAX, &nnodes);
	if (k < 0)
		return api__create_fail(
		    -EINVAL,
		    "shmcoll_init: SHMCOLL_NNODES is not a number of nodes from 1 "
		    "to %d",
		    SHMCOLL_NODES_MAX);
	if (k > 0 && nnodes > 1)
		return init_nodes(rank, size, nnodes, cfg.job, out);
	cfg.rank = (int)rank;
	cfg.size = (int)size;
	return api__create(&cfg, out);
}

/* shmcoll_init without shmcoll-run: another launcher's job (launcher_env.c), or else a job
 * of one rank with a name of its own. */
static int init_foreign(shmcoll_comm **out)
{
	struct api_launch l = {.launcher = NULL, .rank = 0, .size = 1};
	shmcoll_config cfg = {0};
	uint64_t nonce = 0;
	int rc = api__launcher_env(&l);

	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
			nonce = (uint64_t)shmcoll__now_ns();
		snprintf(l.job, sizeof(l.job), "solo%d-%016llx", (int)getpid(),
		         (unsigned long long)nonce);
	}
	cfg.rank = l.rank;
	cfg.size = l.size;
	cfg.job = l.job;
	return api__create(&cfg, out);
}

int shmcoll_init(shmcoll_comm **out)
{
	api__create_fail(0, "%s", "");
	if (!out)
		return api__create_fail(-EINVAL, "shmcoll_init: comm (the out pointer) is NULL");
	*out = NULL;
	/* shmcoll-run's variables first: a job it started may run under another launcher. */
	if (shmcoll__env_set("SHMCOLL_RANK") || shmcoll__env_set("SHMCOLL_SIZE") ||
	    shmcoll__env_set("SHMCOLL_JOB"))
		return init_own(out);
	return init_foreign(out);
}

int shmcoll_comm_abort(shmcoll_comm *c)
{
	if (!c)
		return -EINVAL;
	c->ops->abort(c);
	return 0;
}

int shmcoll_comm_destroy(shmcoll_comm *c)
{
	shmcoll_comm *held;
	int rc = 0;

	if (!c)
		return -EINVAL;
	/* Held by hand, not by API_HOLD: a successful destroy frees c. */
	held = api__hold(c);
	if (c->outstanding) {
		rc = api__fail(c, -EBUSY,
		               "shmcoll_comm_destroy: %u operation(s) still outstanding (not yet "
		               "returned by shmcoll_wait, shmcoll_test or shmcoll_waitall)",
		               c->outstanding);
		api__unhold(&held);
		return rc;
	}
	rc = c->ops->destroy(c);
	/* With nothing outstanding c leaves the process's list here, if it was on it, however
	 * recently it was busy: no pass can reach it after this. */
	c->idle = API_KEEP_LISTED;
	api__unhold(&held);
	if (rc < 0)
		return rc;
	api__progress_stop(c);
	api__req_drain(c);
	free(c);
	return 0;
}
