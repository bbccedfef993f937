/* state.c - how a node communicator fails: messages, the abort word, and entering a call;
 * and what any part may ask of the communicator's state (working memory, CPUs, a peer's
 * pid). A leaf: it calls no other file of lib/core. */
#include "lib/core/state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int shmcoll__node_fail(struct shmcoll_node *n, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(n->err, sizeof(n->err), fmt, ap);
	va_end(ap);
	if (load_relaxed(&n->broken) && !n->cause[0])
		memcpy(n->cause, n->err, sizeof(n->cause));
	return rc;
}

void shmcoll__node_break(struct shmcoll_node *n, int why)
{
	shmcoll__node_break_by(n, why, n->rank);
}

void shmcoll__node_break_by(struct shmcoll_node *n, int why, int who)
{
	uint32_t none = 0;
	int p;

	atomic_store(&n->broken, why);
	/* The first cause wins: (rank + 1) << 8 | errno, so a rank woken by it can report what
	 * happened and who: the rank that saw it, or for EOWNERDEAD the rank that died.
	 * seq_cst: a waiter re-checks the word after each futex sleep, which is woken or times
	 * out of its slice (wait.c). Async-signal-safe: atomics and futex calls only. */
	atomic_compare_exchange_strong(&n->arena.hdr->aborted, &none,
	                               ((uint32_t)(who + 1) << 8) | ((uint32_t)why & 0xff));
	for (p = 0; p < n->size; p++) {
		shmcoll__wake_all(&shmcoll__ctrl(&n->arena, (uint32_t)p)->seq);
		shmcoll__wake_all(shmcoll__p2p_bell(&n->arena, (uint32_t)p));
	}
	shmcoll__wake_all(&n->arena.hdr->attached);
}

void shmcoll__node_aborted(const struct shmcoll_node *n, int *why, int *who)
{
	uint32_t word = load_relaxed(&n->arena.hdr->aborted);

	*why = (int)(word & 0xff);
	*who = (int)(word >> 8) - 1;
}

int shmcoll__node_enter_broken(struct shmcoll_node *n, const char *fn)
{
	int why, by;

	if (!load_relaxed(&n->broken)) {
		shmcoll__node_aborted(n, &why, &by);
		/* A peer found the call this rank is entering mismatched before this rank entered
		 * it (rooted and inline calls check a peer as soon as it arrives): this rank is
		 * party to that mismatch, so it reports it, once, as a failed wait would. A rank
		 * arriving after its peers timed out waiting for it just finds the communicator
		 * aborted. */
		atomic_store(&n->broken, why ? why : ECANCELED);
		if (why == EPROTO)
			return shmcoll__node_fail(n, -EPROTO,
			                          "%s: rank %d detected mismatched calls", fn, by);
		/* A peer died while this rank was between calls: this call is the one it would
		 * have waited in. */
		if (why == EOWNERDEAD)
			return shmcoll__node_fail(n, -EOWNERDEAD, "%s: rank %d (pid %d) died", fn,
			                          by, shmcoll__peer_pid(n, by));
	}
	return shmcoll__node_fail(n, -ECANCELED, "%s: the communicator was aborted earlier%s%s", fn,
	                          n->cause[0] ? ": " : " (by a peer or shmcoll_comm_abort)",
	                          n->cause);
}

void *shmcoll__node_work(struct shmcoll_node *n, size_t bytes)
{
	uint8_t *w;

	if (bytes <= n->work_bytes)
		return n->work;
	w = realloc(n->work, bytes);
	if (!w)
		return NULL;
	n->work = w;
	n->work_bytes = bytes;
	return w;
}

static int popcount_cpus(const struct shmcoll_arena_hdr *h);

int shmcoll__node_cpus(const struct shmcoll_node *n)
{
	return popcount_cpus(n->arena.hdr);
}

static int popcount_cpus(const struct shmcoll_arena_hdr *h)
{
	int w, k = 0;

	for (w = 0; w < SHMCOLL_CPU_WORDS; w++)
		k += __builtin_popcountll(load_relaxed(&h->cpus[w]));
	return k;
}

int shmcoll__peer_pid(const struct shmcoll_node *n, int p)
{
	return n->live.peers && p >= 0 && p < n->size ? (int)n->live.peers[p].id.pid : 0;
}
