/* algo.h - which protocol a call runs: the measured default for (collective, bytes, ranks),
 * or the one SHMCOLL_ALGO forces. Every rank decides from the same arguments, so all decide
 * alike; the call word carries the choice, and a rank that decided otherwise (another
 * SHMCOLL_ALGO) gets -EPROTO. Inline: every call of the blocking API asks. */
#ifndef SHMCOLL_CORE_ALGO_H
#define SHMCOLL_CORE_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/state.h"
#include "lib/core/tuning.h"

/* Elements per slice of the direct protocol: a chunk (SHMCOLL_CHUNK_BYTES or a staging
 * half) cut in size slices of whole elements of es bytes; 0 where it cannot run. */
static inline size_t shmcoll__direct_slice_elems(const struct shmcoll_node *n, size_t es)
{
	size_t half = n->arena.lay.slot_half;
	size_t chunk =
	    n->tune.chunk_bytes && n->tune.chunk_bytes < half ? n->tune.chunk_bytes : half;

	return n->size > 1 ? chunk / ((size_t)n->size * es) : 0;
}

/* From how many bytes an allreduce or reduce (kind) runs the direct protocol (0: never): the
 * tuning file's threshold or the built-in one, for ranks with a CPU each (two of them apart)
 * or, for allreduce, ranks that outnumber the CPUs (the same on every rank: the CPU union is
 * shared). */
static inline uint64_t shmcoll__direct_min(const struct shmcoll_node *n, uint32_t kind)
{
	const struct shmcoll_tunefile *f = &n->tune.file;

	if (kind == KIND_REDUCE)
		return shmcoll__tuned(f->direct_min[kind], SHMCOLL_REDUCE_DIRECT_MIN);
	if (n->waiter.oversubscribed)
		return shmcoll__tuned(f->direct_min_over[kind], SHMCOLL_ALLREDUCE_DIRECT_MIN_OVER);
	return shmcoll__tuned(f->direct_min[kind], n->size == 2 ? SHMCOLL_ALLREDUCE_DIRECT_MIN_PAIR
	                                                        : SHMCOLL_ALLREDUCE_DIRECT_MIN);
}

/* The protocol of an allreduce or reduce (kind) of bytes bytes of es-byte elements:
 * SHMCOLL_ALGO's, else direct from shmcoll__direct_min on; flat where the direct protocol
 * cannot run (one rank has nobody to split with; a tiny arena may not hold a slice per rank:
 * both depend only on what every rank shares). */
static inline int shmcoll__algo_reduction(const struct shmcoll_node *n, uint32_t kind, size_t bytes,
                                          size_t es)
{
	int algo = n->tune.algo[kind];

	if (algo == ALGO_AUTO) {
		uint64_t min = shmcoll__direct_min(n, kind);

		algo = min && bytes >= min ? ALGO_DIRECT : ALGO_FLAT;
	}
	if (algo == ALGO_DIRECT && !shmcoll__direct_slice_elems(n, es))
		algo = ALGO_FLAT;
	return algo;
}

/* Whether a call of kind whose blocks are block_bytes runs the single-copy protocol (cma.c):
 * only where every rank can (cma.ok, the same on all) and SHMCOLL_ALGO, SHMCOLL_CMA_MIN, the
 * tuning file or the copy probe at create asks for it, so every rank that makes the same call
 * decides alike. The probe's choice (cma.probed) holds for alltoall from cma.min and for
 * allgather from SHMCOLL_CMA_AUTO_ALLGATHER_MIN only: the calls whose single copies were
 * faster than staging with the buffers rewritten between calls (P=2, 60 ns hop: alltoall
 * 1.1-1.55x from 64 KiB, allgather 1.13x from 2 MiB blocks and 0.80-0.96x below). Elsewhere the
 * benchmark's unchanged buffer flatters them: the reader keeps the lines it copied, and the
 * owner's next writes must take them back. With the buffer rewritten a line at a time,
 * scatter ran 0.53-0.70x, bcast 0.24-0.83x and gather 0.40-0.99x of staging, where a root
 * waits for its readers' copies instead of running ahead (docs/BENCHMARKS.md, "Single copy"). */
#define SHMCOLL_CMA_AUTO_ALLGATHER_MIN ((size_t)2 << 20)

static inline int shmcoll__cma_pick(const struct shmcoll_node *n, uint32_t kind, size_t block_bytes)
{
	int algo = n->tune.algo[kind];

	if (!n->cma.ok)
		return 0;
	if (algo == ALGO_CMA)
		return 1;
	if (algo != ALGO_AUTO || !n->cma.min)
		return 0;
	if (!n->cma.probed)
		return block_bytes >= n->cma.min;
	if (kind == KIND_ALLTOALL)
		return block_bytes >= n->cma.min;
	return kind == KIND_ALLGATHER && block_bytes >= SHMCOLL_CMA_AUTO_ALLGATHER_MIN;
}

/* The protocol of a barrier or bcast: SHMCOLL_ALGO's, else the tree from tree_min ranks on (or the
 * file's), flat below; a forced single copy that cannot run (shmcoll__cma_pick said no) is flat. */
static inline int shmcoll__algo_tree(const struct shmcoll_node *n, uint32_t kind, int tree_min)
{
	int algo = n->tune.algo[kind];

	if (algo == ALGO_AUTO)
		algo = (uint64_t)n->size >=
		               shmcoll__tuned(n->tune.file.tree_min[kind], (uint64_t)tree_min)
		           ? ALGO_TREE
		           : ALGO_FLAT;
	if (algo == ALGO_CMA)
		algo = ALGO_FLAT;
	return algo;
}

/* Whether a call of bytes bytes running protocol algo travels inline (engine.h, the message
 * ring): the same on every rank that makes the same call. */
static inline int shmcoll__algo_inline(const struct shmcoll_node *n, int algo, size_t bytes)
{
	return algo == ALGO_FLAT && bytes <= n->arena.lay.msg_max && n->size > 1;
}

/* Calls without a root in which every rank waits for every peer's whole message (allreduce,
 * allgather and allgatherv, scan) travel inline to 1 KiB only: from 2 KiB their staged form
 * was as fast or faster (P=2, 60 ns hop: allreduce 2 KiB 0.94x inline, allgather with 2 KiB
 * a rank 0.95x; docs/BENCHMARKS.md, "The 60 ns state"), and only a rooted call's writer
 * gains from running a whole message ring ahead of its readers. */
#define SHMCOLL_INLINE_ALL_MAX 1024u

static inline int shmcoll__algo_inline_all(const struct shmcoll_node *n, int algo, size_t bytes)
{
	return bytes <= SHMCOLL_INLINE_ALL_MAX && shmcoll__algo_inline(n, algo, bytes);
}

#endif
