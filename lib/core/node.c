/* node.c - node communicators: made from a config (every rank of the job meets in one
 * arena) and destroyed. How they fail is state.c's. */
#include "lib/core/node.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/cma.h"
#include "lib/core/env.h"
#include "lib/core/topo.h"

#define DEFAULT_TIMEOUT_MS 300000

int64_t shmcoll__timeout_ns(int timeout_ms)
{
	long long ms = DEFAULT_TIMEOUT_MS;

	if (timeout_ms != 0)
		ms = timeout_ms;
	else if (shmcoll__env_long("SHMCOLL_TIMEOUT_MS", LLONG_MIN, INT_MAX, &ms) != 1 || ms == 0)
		ms = DEFAULT_TIMEOUT_MS;
	return ms < 0 ? -1 : (int64_t)ms * 1000000;
}

_Static_assert(sizeof(struct shmcoll_tunefile) <= SHMCOLL_TUNED_BYTES,
               "a tuning file's values fit the arena header's room");

/* Rank 0: reads the tuning file, if there is one, and says where the thresholds come from.
 * A file that is there but wrong is not an error of the create: its thresholds are not
 * taken, and the source says why (shmcoll-tune --check says it on a terminal). */
static void tune_load(struct shmcoll_tunefile *f, char *source, size_t len)
{
	const char *path = shmcoll__tunefile_path();
	char why[SHMCOLL_TUNED_SOURCE - 96];
	int rc;

	memset(f, 0, sizeof(*f));
	if (!path) {
		snprintf(source, len, "built-in (SHMCOLL_TUNE=none)");
		return;
	}
	rc = shmcoll__tunefile_load(path, f, why, sizeof(why));
	if (rc == 0) {
		snprintf(source, len, "tuning file %s", path);
		return;
	}
	memset(f, 0, sizeof(*f));
	if (rc == -ENOENT && !getenv("SHMCOLL_TUNE"))
		snprintf(source, len, "built-in (no tuning file at %s)", path);
	else
		snprintf(source, len, "built-in: tuning file %s rejected: %s", path, why);
}

/* Every rank, once all are attached: rank 0's file, under what this rank's environment
 * sets (SHMCOLL_CHUNK_BYTES, SHMCOLL_CMA_MIN win). */
static void tune_take(struct shmcoll_node *n)
{
	const struct shmcoll_arena_hdr *h = n->arena.hdr;

	memcpy(&n->tune.file, h->tuned, sizeof(n->tune.file));
	memcpy(n->tune_source, h->tuned_source, sizeof(n->tune_source));
	n->tune_source[sizeof(n->tune_source) - 1] = '\0';
	if (!n->tune.chunk_bytes)
		n->tune.chunk_bytes = (size_t)n->tune.file.chunk_bytes;
	if (!n->cma.min)
		n->cma.min = (size_t)n->tune.file.cma_min;
}

static void free_node(struct shmcoll_node *n)
{
	free(n->st.srcs);
	free(n->st.zc);
	free(n->st.zr);
	free(n->work);
	free(n);
}

int shmcoll__node_create(const struct shmcoll_node_cfg *cfg, struct shmcoll_node **out, char *err,
                         size_t errlen)
{
	char why[SHMCOLL_ERR_LEN - 64];
	struct shmcoll_waiter attach_wait;
	long long env_arena;
	size_t arena_bytes = cfg->arena_bytes;
	struct shmcoll_node *n;
	int rc;

	*out = NULL;
	if (!arena_bytes) {
		rc = shmcoll__env_long("SHMCOLL_ARENA_BYTES", 0, LLONG_MAX, &env_arena);
		if (rc < 0) {
			snprintf(err, errlen, "SHMCOLL_ARENA_BYTES is not a byte count");
			return -EINVAL;
		}
		if (rc > 0)
			arena_bytes = (size_t)env_arena;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n->rank = cfg->rank;
	n->size = cfg->size;
	shmcoll__task_queue_init(n);
	n->st.srcs = calloc((size_t)n->size, sizeof(*n->st.srcs));
	n->st.zc = calloc((size_t)n->size, sizeof(*n->st.zc));
	n->st.zr = calloc((size_t)n->size, sizeof(*n->st.zr));
	if (!n->st.srcs || !n->st.zc || !n->st.zr) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto err_free;
	}
	n->waiter.timeout_ns = cfg->timeout_ns;
	rc = shmcoll__tuning_read(&n->tune, err, errlen);
	if (rc == 0)
		rc = shmcoll__cma_offer(&n->cma, err, errlen);
	if (rc == 0)
		rc = shmcoll__topo_read(n, err, errlen);
	if (rc < 0)
		goto err_free;

	if (n->rank == 0)
		rc = shmcoll__arena_create(&n->arena, cfg->job, (uint32_t)n->size, arena_bytes, why,
		                           sizeof(why));
	else
		rc = shmcoll__arena_attach(&n->arena, cfg->job, (uint32_t)n->size,
		                           n->waiter.timeout_ns, why, sizeof(why));
	if (rc < 0) {
		snprintf(err, errlen, "rank %d: %s", n->rank, why);
		goto err_free;
	}
	n->waiter.abort_word = &n->arena.hdr->aborted;
	n->st.me = shmcoll__ctrl(&n->arena, (uint32_t)n->rank);
	n->st.seq = load_relaxed(&n->st.me->seq);
	n->st.clean = n->st.seq;
	shmcoll__cma_show(n);
	shmcoll__topo_publish(n);
	if (n->rank == 0) {
		struct shmcoll_tunefile f;

		tune_load(&f, n->arena.hdr->tuned_source, sizeof(n->arena.hdr->tuned_source));
		memcpy(n->arena.hdr->tuned, &f, sizeof(f));
		/* The copy probe where neither this environment nor a file chose single copies,
		 * and SHMCOLL_TUNE did not ask for the built-in thresholds alone. */
		n->arena.hdr->copy_probe =
		    shmcoll__tunefile_path() && !f.cma_min && shmcoll__cma_probe_wanted(n);
	}
	shmcoll__arena_join(&n->arena, (uint32_t)n->rank);

	/* Wait for every rank: the last one unlinked the name, and the CPU union they wrote
	 * decides how we wait from now on. */
	attach_wait = n->waiter;
	attach_wait.oversubscribed = 1;
	rc = shmcoll__wait_geq(&attach_wait, &n->arena.hdr->attached,
	                       &n->arena.hdr->attach_sleepers, (uint32_t)n->size);
	if (rc < 0) {
		snprintf(err, errlen, "only %u of %d ranks attached to %s",
		         load_relaxed(&n->arena.hdr->attached), n->size, n->arena.name);
		shmcoll__arena_release(&n->arena, 1);
		goto err_free;
	}
	n->waiter.oversubscribed = n->size > shmcoll__node_cpus(n);
	shmcoll__pace_job((unsigned)n->size);
	tune_take(n);
	rc = shmcoll__cma_agree(n);
	if (rc < 0) {
		snprintf(err, errlen,
		         "rank %d: not every rank of %s came to agree on single copies", n->rank,
		         n->arena.name);
		shmcoll__arena_release(&n->arena, 0);
		goto err_free;
	}
	rc = shmcoll__live_init(n);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		shmcoll__arena_release(&n->arena, 0);
		goto err_free;
	}
	rc = shmcoll__p2p_init(n, err, errlen);
	if (rc == 0 && shmcoll__heap_init(n) < 0) {
		shmcoll__p2p_fini(n);
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	if (rc < 0) {
		shmcoll__live_fini(n);
		shmcoll__arena_release(&n->arena, 0);
		goto err_free;
	}
	*out = n;
	return 0;

err_free:
	free_node(n);
	return rc;
}

int shmcoll__node_destroy(struct shmcoll_node *n)
{
	if (shmcoll__queue_busy(&n->tasks) || n->p2p.active)
		return shmcoll__node_fail(n, -EBUSY,
		                          "shmcoll_comm_destroy: %u operation(s) still outstanding",
		                          n->tasks.outstanding + n->p2p.active);
	/* Local: the segment's name is gone since every rank attached, and unmapping our view
	 * leaves the peers' views intact, so no step is needed. Every collective already waited
	 * for readers of our data. After our last publish: a peer still waiting for a step from
	 * us learns it will never come (live.c). */
	store_release(&n->st.me->left, 1);
	shmcoll__heap_fini(n);
	shmcoll__p2p_fini(n);
	shmcoll__live_fini(n);
	shmcoll__arena_release(&n->arena, 0);
	free_node(n);
	return 0;
}
