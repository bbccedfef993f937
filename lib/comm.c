/* comm.c - communicators: create from a config or from the launcher's
 * environment, destroy, abort, and the accessors. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "lib/frame.h"
#include "lib/hier.h"
#include "lib/internal.h"

#define DEFAULT_TIMEOUT_MS 300000

/* The message of the calling thread's last failed create: there is no
 * communicator to hold it. */
static _Thread_local char create_err[SHMCOLL_ERR_LEN];

int shmcoll__create_fail(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(create_err, sizeof(create_err), fmt, ap);
	va_end(ap);
	return rc;
}

const char *shmcoll_last_error(const shmcoll_comm *c)
{
	return c ? c->err : create_err;
}

int shmcoll_comm_rank(const shmcoll_comm *c)
{
	return c ? c->rank : -EINVAL;
}

int shmcoll_comm_size(const shmcoll_comm *c)
{
	return c ? c->size : -EINVAL;
}

/* Parses a whole decimal number from the environment. 1: set and valid,
 * 0: not set, -1: set but not a number in [lo, hi]. */
static int env_long(const char *name, long long lo, long long hi, long long *out)
{
	const char *s = getenv(name);
	char *end;
	long long v;

	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 1;
}

/* The wait bound: the config's, else SHMCOLL_TIMEOUT_MS, else 5 minutes.
 * Negative means forever. */
static int64_t timeout_ns(const shmcoll_config *cfg)
{
	long long ms = DEFAULT_TIMEOUT_MS;

	if (cfg->timeout_ms != 0)
		ms = cfg->timeout_ms;
	else if (env_long("SHMCOLL_TIMEOUT_MS", LLONG_MIN, INT_MAX, &ms) != 1 || ms == 0)
		ms = DEFAULT_TIMEOUT_MS;
	return ms < 0 ? -1 : (int64_t)ms * 1000000;
}

static int popcount_cpus(const struct shmcoll_arena_hdr *h)
{
	int w, n = 0;

	for (w = 0; w < SHMCOLL_CPU_WORDS; w++)
		n += __builtin_popcountll(load_relaxed(&h->cpus[w]));
	return n;
}

int shmcoll_comm_create(const shmcoll_config *cfg, shmcoll_comm **out)
{
	char err[SHMCOLL_ERR_LEN - 64];
	struct shmcoll_waiter attach_wait;
	long long env_arena, env_chunk, env_nt;
	size_t arena_bytes;
	shmcoll_comm *c;
	int rc;

	create_err[0] = '\0';
	if (!out)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_comm_create: comm (the out pointer) is NULL");
	*out = NULL;
	if (!cfg)
		return shmcoll__create_fail(-EINVAL, "shmcoll_comm_create: cfg is NULL");
	if (cfg->size < 1 || cfg->size > SHMCOLL_MAX_RANKS)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_comm_create: size %d out of range 1..%d",
		                            cfg->size, SHMCOLL_MAX_RANKS);
	if (cfg->rank < 0 || cfg->rank >= cfg->size)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_comm_create: rank %d out of range 0..%d",
		                            cfg->rank, cfg->size - 1);
	if (!cfg->job || !cfg->job[0])
		return shmcoll__create_fail(-EINVAL, "shmcoll_comm_create: job is NULL or empty");
	arena_bytes = cfg->arena_bytes;
	if (!arena_bytes) {
		rc = env_long("SHMCOLL_ARENA_BYTES", 0, LLONG_MAX, &env_arena);
		if (rc < 0)
			return shmcoll__create_fail(-EINVAL,
			                            "SHMCOLL_ARENA_BYTES is not a byte count");
		if (rc > 0)
			arena_bytes = (size_t)env_arena;
	}

	c = calloc(1, sizeof(*c));
	if (!c)
		return shmcoll__create_fail(-ENOMEM, "shmcoll_comm_create: out of memory");
	c->rank = cfg->rank;
	c->size = cfg->size;
	c->srcs = calloc((size_t)c->size, sizeof(*c->srcs));
	c->zc = calloc((size_t)c->size, sizeof(*c->zc));
	c->zr = calloc((size_t)c->size, sizeof(*c->zr));
	if (!c->srcs || !c->zc || !c->zr) {
		rc = shmcoll__create_fail(-ENOMEM, "shmcoll_comm_create: out of memory");
		goto err_free;
	}
	c->waiter.timeout_ns = timeout_ns(cfg);
	rc = shmcoll__algo_parse(c, getenv("SHMCOLL_ALGO"), err, sizeof(err));
	if (rc < 0) {
		shmcoll__create_fail(rc, "shmcoll_comm_create: %s", err);
		goto err_free;
	}
	rc = env_long("SHMCOLL_CHUNK_BYTES", 64, LLONG_MAX, &env_chunk);
	if (rc < 0) {
		rc = shmcoll__create_fail(-EINVAL,
		                          "shmcoll_comm_create: SHMCOLL_CHUNK_BYTES is not a "
		                          "byte count of at least 64");
		goto err_free;
	}
	c->chunk_bytes = rc > 0 ? (size_t)env_chunk : 0;
	rc = env_long("SHMCOLL_NT", 0, 1, &env_nt);
	if (rc < 0) {
		rc = shmcoll__create_fail(-EINVAL, "shmcoll_comm_create: SHMCOLL_NT is not 0 or 1");
		goto err_free;
	}
	/* Off by default: measured on the reference machine they did not pay
	 * (docs/BENCHMARKS.md); kept for machines where they do. */
	c->nt_stores = rc > 0 ? (int)env_nt : 0;
	rc = shmcoll__cma_offer(c);
	if (rc < 0)
		goto err_free;

	if (c->rank == 0)
		rc = shmcoll__arena_create(&c->arena, cfg->job, (uint32_t)c->size, arena_bytes, err,
		                           sizeof(err));
	else
		rc = shmcoll__arena_attach(&c->arena, cfg->job, (uint32_t)c->size,
		                           c->waiter.timeout_ns, err, sizeof(err));
	if (rc < 0) {
		shmcoll__create_fail(rc, "shmcoll_comm_create: rank %d: %s", c->rank, err);
		goto err_free;
	}
	c->waiter.abort_word = &c->arena.hdr->aborted;
	c->me = shmcoll__ctrl(&c->arena, (uint32_t)c->rank);
	c->seq = load_relaxed(&c->me->seq);
	c->clean = c->seq;
	shmcoll__cma_show(c);
	shmcoll__arena_join(&c->arena, (uint32_t)c->rank);

	/* Wait for every rank: the last one unlinked the name, and the CPU
	 * union they wrote decides how we wait from now on. */
	attach_wait = c->waiter;
	attach_wait.oversubscribed = 1;
	rc = shmcoll__wait_geq(&attach_wait, &c->arena.hdr->attached,
	                       &c->arena.hdr->attach_sleepers, (uint32_t)c->size);
	if (rc < 0) {
		shmcoll__create_fail(rc, "shmcoll_comm_create: only %u of %d ranks attached to %s",
		                     load_relaxed(&c->arena.hdr->attached), c->size, c->arena.name);
		shmcoll__arena_release(&c->arena, 1);
		goto err_free;
	}
	c->waiter.oversubscribed = c->size > popcount_cpus(c->arena.hdr);
	rc = shmcoll__cma_agree(c);
	if (rc < 0) {
		shmcoll__create_fail(rc,
		                     "shmcoll_comm_create: rank %d: not every rank of %s "
		                     "came to agree on single copies",
		                     c->rank, c->arena.name);
		shmcoll__arena_release(&c->arena, 0);
		goto err_free;
	}
	c->waiting_for = -1;
	c->dead_rank = -1;
	c->left_rank = -1;
	rc = shmcoll__live_init(c);
	if (rc < 0) {
		shmcoll__create_fail(rc, "shmcoll_comm_create: out of memory");
		shmcoll__arena_release(&c->arena, 0);
		goto err_free;
	}
	shmcoll__heap_init(c);
	*out = c;
	return 0;

err_free:
	free(c->srcs);
	free(c->zc);
	free(c->zr);
	free(c);
	return rc;
}

/* shmcoll_init of a rank of a multi-node job (SHMCOLL_NNODES > 1): the
 * launcher's variables must agree with each other. */
static int init_nodes(long long rank, long long size, long long nnodes, const char *job,
                      shmcoll_comm **out)
{
	struct shmcoll_hier_cfg hc = {0};
	shmcoll_config cfg = {0};
	char err[SHMCOLL_ERR_LEN - 64];
	long long node, lrank, lsize, fd = -1;
	const char *debug = getenv("SHMCOLL_DEBUG");
	int rc;

	if (env_long("SHMCOLL_NODE_RANK", 0, nnodes - 1, &node) != 1 ||
	    env_long("SHMCOLL_LOCAL_SIZE", 1, SHMCOLL_MAX_RANKS, &lsize) != 1 ||
	    env_long("SHMCOLL_LOCAL_RANK", 0, lsize - 1, &lrank) != 1 || size != nnodes * lsize ||
	    rank != node * lsize + lrank)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_init: SHMCOLL_NODE_RANK, SHMCOLL_LOCAL_RANK "
		                            "and SHMCOLL_LOCAL_SIZE are missing or disagree with "
		                            "SHMCOLL_RANK=%lld, SHMCOLL_SIZE=%lld and "
		                            "SHMCOLL_NNODES=%lld",
		                            rank, size, nnodes);
	hc.token = getenv("SHMCOLL_TOKEN");
	hc.nodes = getenv("SHMCOLL_NODES");
	if (!hc.token || !hc.nodes)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_init: a multi-node job needs SHMCOLL_TOKEN "
		                            "and SHMCOLL_NODES (shmcoll-run --nnodes sets them)");
	if (lrank == 0 && env_long("SHMCOLL_NET_FD", 0, INT_MAX, &fd) < 0)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_init: SHMCOLL_NET_FD is not a descriptor");
	hc.nnodes = (int)nnodes;
	hc.node = (int)node;
	hc.nproc = (int)lsize;
	hc.lrank = (int)lrank;
	hc.job = job;
	hc.listen_fd = lrank == 0 ? (int)fd : -1;
	hc.timeout_ns = timeout_ns(&cfg);
	hc.log = debug && *debug && strcmp(debug, "0") != 0;
	rc = shmcoll__hier_create(&hc, out, err, sizeof(err));
	if (rc < 0)
		return shmcoll__create_fail(rc, "shmcoll_init: %s", err);
	return 0;
}

int shmcoll_init(shmcoll_comm **out)
{
	long long rank, size, nnodes;
	char solo[64];
	uint64_t nonce = 0;
	shmcoll_config cfg = {0};
	int r, s, n;

	create_err[0] = '\0';
	if (!out)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_init: comm (the out pointer) is NULL");
	*out = NULL;
	r = env_long("SHMCOLL_RANK", 0, SHMCOLL_MAX_RANKS - 1, &rank);
	s = env_long("SHMCOLL_SIZE", 1, SHMCOLL_MAX_RANKS, &size);
	cfg.job = getenv("SHMCOLL_JOB");
	if (r < 0 || s < 0)
		return shmcoll__create_fail(-EINVAL, "shmcoll_init: SHMCOLL_RANK or SHMCOLL_SIZE "
		                                     "is not a valid number");
	if (r == 0 && s == 0 && (!cfg.job || !*cfg.job)) {
		/* Started without a launcher: a job of one rank. */
		if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
			nonce = (uint64_t)shmcoll__now_ns();
		snprintf(solo, sizeof(solo), "solo%d-%016llx", (int)getpid(),
		         (unsigned long long)nonce);
		cfg.job = solo;
		rank = 0;
		size = 1;
	} else if (r == 0 || s == 0 || !cfg.job || !*cfg.job) {
		return shmcoll__create_fail(-EINVAL, "shmcoll_init: SHMCOLL_RANK, SHMCOLL_SIZE and "
		                                     "SHMCOLL_JOB must be set together");
	}
	n = env_long("SHMCOLL_NNODES", 1, SHMCOLL_NODES_MAX, &nnodes);
	if (n < 0)
		return shmcoll__create_fail(-EINVAL,
		                            "shmcoll_init: SHMCOLL_NNODES is not a number of "
		                            "nodes from 1 to %d",
		                            SHMCOLL_NODES_MAX);
	if (n > 0 && nnodes > 1)
		return init_nodes(rank, size, nnodes, cfg.job, out);
	cfg.rank = (int)rank;
	cfg.size = (int)size;
	return shmcoll_comm_create(&cfg, out);
}

int shmcoll_comm_abort(shmcoll_comm *c)
{
	if (!c)
		return -EINVAL;
	if (c->hier)
		shmcoll__hier_abort(c);
	else
		shmcoll__break(c, ECANCELED);
	return 0;
}

int shmcoll_comm_destroy(shmcoll_comm *c)
{
	if (!c)
		return -EINVAL;
	if (c->hier) {
		shmcoll__hier_destroy(c);
		free(c);
		return 0;
	}
	/* Local: the segment's name is gone since every rank attached, and
	 * unmapping our view leaves the peers' views intact, so no step is
	 * needed. Every collective already waited for readers of our data. */
	/* After our last publish: a peer still waiting for a step from us
	 * learns it will never come (lib/live.c). */
	store_release(&c->me->left, 1);
	shmcoll__heap_fini(c);
	shmcoll__live_fini(c);
	shmcoll__arena_release(&c->arena, 0);
	free(c->srcs);
	free(c->zc);
	free(c->zr);
	free(c->scratch);
	free(c);
	return 0;
}
