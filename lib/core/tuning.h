/* tuning.h - what a call is (its kind), the protocols there are, and the tuning a node
 * communicator reads from the environment (SHMCOLL_ALGO, SHMCOLL_CHUNK_BYTES, SHMCOLL_NT)
 * and from the machine's tuning file (shmcoll-tune's). algo.h chooses from them. */
#ifndef SHMCOLL_CORE_TUNING_H
#define SHMCOLL_CORE_TUNING_H

#include <stddef.h>
#include <stdint.h>

/* What a descriptor's kind field says; also the names in messages. */
enum shmcoll_kind {
	KIND_BARRIER = 1,
	KIND_BCAST,
	KIND_REDUCE,
	KIND_ALLREDUCE,
	KIND_ALLGATHER,
	KIND_REDUCE_SCATTER,
	KIND_GATHER,
	KIND_SCATTER,
	KIND_ALLTOALL,
	KIND_MALLOC,
	KIND_FREE,
	KIND_ALLGATHERV,
	KIND_GATHERV,
	KIND_SCATTERV,
	KIND_ALLTOALLV,
	KIND_REDUCE_SCATTERV,
	KIND_SCAN,
	KIND_EXSCAN,
	KIND_COUNT
};

/* The protocols a collective can run (docs/ARCHITECTURE.md describes each). Every rank must
 * run the same one: it is part of the call word. */
enum shmcoll_algo {
	ALGO_AUTO,   /* chosen per call from measured crossovers */
	ALGO_FLAT,   /* one step per chunk: everyone stages, everyone reads all */
	ALGO_DIRECT, /* pipelined reduce-scatter + allgather: each rank owns 1/P */
	ALGO_TREE,   /* k-nomial tree: gather up, release down */
	ALGO_CMA,    /* single copy: read peers' buffers with process_vm_readv (cma.c) */
	ALGO_TOPO,   /* the tree by package and L3 domain (topo.c): only when asked for */
	ALGO_COUNT
};

/* The built-in thresholds of the protocol choice (algo.h); a tuning file may set others
 * (shmcoll-tune).
 * allreduce: vectors from this size on run the direct protocol (measured crossover,
 * docs/BENCHMARKS.md). */
#define SHMCOLL_ALLREDUCE_DIRECT_MIN ((size_t)4 << 10)
/* allreduce of two ranks with a CPU each: flat at every size. At P = 2 both protocols read the
 * peer's whole vector once, and flat does it in fewer dependent steps: measured 1.2-2x faster
 * at 4 KiB-256 KiB and no slower to 64 MiB with a 27 ns hop, 1.5-1.9x faster at 4 KiB-64 MiB
 * with a 180 ns one (docs/BENCHMARKS.md, "Allreduce: flat or direct"). 0: never direct. */
#define SHMCOLL_ALLREDUCE_DIRECT_MIN_PAIR 0
/* allreduce when ranks outnumber CPUs: every step is a hand-off that may wait for a turn of
 * the CPU, and the direct protocol's extra steps cost more than its split saves up to 32 KiB
 * (shmcoll-tune at P = 3, 4 and 8 on 2 CPUs: flat 1.5-2.2x faster at 4-16 KiB). */
#define SHMCOLL_ALLREDUCE_DIRECT_MIN_OVER ((size_t)64 << 10)
/* reduce: the direct protocol from this size on. Measured at P = 2-4 (docs/BENCHMARKS.md), the
 * flat one wins at every size up to 32 MiB: its non-roots stage and leave, so their copies
 * overlap the root's reduction, while the direct protocol adds a copy per slice. */
#define SHMCOLL_REDUCE_DIRECT_MIN ((size_t)64 << 20)
/* barrier and bcast: the tree from this many ranks on; below it the flat step's single hop
 * beats the tree's 2 * depth (docs/BENCHMARKS.md). */
#define SHMCOLL_TREE_MIN_RANKS 16

/* What a tuning file says (tunefile.c); 0 in a field: the file does not set it. Written by
 * shmcoll-tune; the format is in docs/API.md, "Tuning file". */
#define SHMCOLL_TUNEFILE_VERSION 1
#define SHMCOLL_TUNE_MAX_RANKS   4096
struct shmcoll_tunefile {
	uint64_t direct_min[KIND_COUNT]; /* <kind>.direct_min_bytes: direct from this size on */
	uint64_t direct_min_over[KIND_COUNT]; /* <kind>.direct_min_bytes.oversubscribed: the
	                                         same when ranks outnumber CPUs */
	uint32_t tree_min[KIND_COUNT]; /* <kind>.tree_min_ranks: the tree from this many ranks */
	uint64_t chunk_bytes;          /* chunk_bytes: as SHMCOLL_CHUNK_BYTES */
	uint64_t cma_min;              /* cma_min_bytes: as SHMCOLL_CMA_MIN */
	double hop_ns;                 /* hop_ns: the cross-core hop it was measured with */
};

/* The tuning a node communicator reads at create (algo.c): the environment's on every rank,
 * the tuning file's from rank 0 (every rank takes the same: the thresholds decide
 * protocols, which must match). The environment wins over the file. */
struct shmcoll_tuning {
	uint8_t algo[KIND_COUNT]; /* SHMCOLL_ALGO: forced protocol per kind, or ALGO_AUTO */
	size_t chunk_bytes;       /* SHMCOLL_CHUNK_BYTES or the file's, or 0: a staging half */
	int nt_stores;            /* SHMCOLL_NT (default 0): streaming stores for huge results */
	int check;                /* SHMCOLL_CHECK (default 0): detect every count mismatch */
	struct shmcoll_tunefile file; /* rank 0's tuning file; all 0 without one */
};

/* Where the tuning file is: SHMCOLL_TUNE (empty or "none": no file), else the installed
 * default (SHMCOLL_TUNE_DEFAULT_PATH, <sysconfdir>/shmcoll/tune). NULL: no file. */
const char *shmcoll__tunefile_path(void);
/* Parses a tuning file's text. 0, or -EINVAL with "line N: why" in why; *f is then
 * partly filled and must not be used. */
int shmcoll__tunefile_parse(const char *text, struct shmcoll_tunefile *f, char *why, size_t whylen);
/* Reads and parses the file at path: 0, or a negative errno with why (-ENOENT: no file). */
int shmcoll__tunefile_load(const char *path, struct shmcoll_tunefile *f, char *why, size_t whylen);
/* A built-in threshold, or the tuning file's when it sets one (not 0). */
static inline uint64_t shmcoll__tuned(uint64_t file, uint64_t builtin)
{
	return file ? file : builtin;
}

/* Reads SHMCOLL_ALGO, SHMCOLL_CHUNK_BYTES, SHMCOLL_NT and SHMCOLL_CHECK. Returns 0 or -EINVAL with
 * a message naming the variable in err. */
int shmcoll__tuning_read(struct shmcoll_tuning *t, char *err, size_t errlen);

/* Parses an SHMCOLL_ALGO value ("direct", or "allreduce:direct,reduce_scatter:flat") into
 * algo[KIND_COUNT]. Returns 0 or -EINVAL with a message in err. */
int shmcoll__algo_parse(uint8_t *algo, const char *spec, char *err, size_t errlen);

const char *shmcoll__kind_name(uint32_t kind);
/* The kind named by the len bytes at name ("allreduce", ...), or -1. */
int shmcoll__kind_lookup(const char *name, size_t len);
const char *shmcoll__algo_name(uint32_t algo);

#endif
