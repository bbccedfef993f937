/* algo.h - what a call is (its kind) and which protocol it runs: the measured default for
 * (collective, bytes, ranks), or the one SHMCOLL_ALGO forces. Every rank decides from the
 * same arguments, so all decide alike; the call word carries the choice, and a rank that
 * decided otherwise (another SHMCOLL_ALGO) gets -EPROTO. */
#ifndef SHMCOLL_CORE_ALGO_H
#define SHMCOLL_CORE_ALGO_H

#include <stddef.h>
#include <stdint.h>

struct shmcoll_node;

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
	ALGO_COUNT
};

/* The tuning a node communicator reads from the environment at create (algo.c owns it). */
struct shmcoll_tuning {
	uint8_t algo[KIND_COUNT]; /* SHMCOLL_ALGO: forced protocol per kind, or ALGO_AUTO */
	size_t chunk_bytes;       /* SHMCOLL_CHUNK_BYTES, or 0: a staging half */
	int nt_stores;            /* SHMCOLL_NT (default 0): streaming stores for huge results */
};

/* Reads SHMCOLL_ALGO, SHMCOLL_CHUNK_BYTES and SHMCOLL_NT. Returns 0 or -EINVAL with a message
 * naming the variable in err. */
int shmcoll__tuning_read(struct shmcoll_tuning *t, char *err, size_t errlen);

/* Parses an SHMCOLL_ALGO value ("direct", or "allreduce:direct,reduce_scatter:flat") into
 * algo[KIND_COUNT]. Returns 0 or -EINVAL with a message in err. */
int shmcoll__algo_parse(uint8_t *algo, const char *spec, char *err, size_t errlen);

const char *shmcoll__kind_name(uint32_t kind);
const char *shmcoll__algo_name(uint32_t algo);

/* The protocol of an allreduce or reduce (kind) of bytes bytes of es-byte elements:
 * SHMCOLL_ALGO's, else direct from direct_min bytes on; flat where the direct protocol
 * cannot run. */
int shmcoll__algo_reduction(const struct shmcoll_node *n, uint32_t kind, size_t bytes, size_t es,
                            size_t direct_min);

/* The protocol of a barrier or bcast: SHMCOLL_ALGO's, else the tree from tree_min ranks on,
 * flat below; a forced single copy that cannot run (cma.h) is flat. */
int shmcoll__algo_tree(const struct shmcoll_node *n, uint32_t kind, int tree_min);

/* Whether a call of bytes bytes running protocol algo travels inline (engine.h, the message
 * ring): the same on every rank that makes the same call. */
int shmcoll__algo_inline(const struct shmcoll_node *n, int algo, size_t bytes);

/* Elements per slice of the direct protocol: a chunk (SHMCOLL_CHUNK_BYTES or a staging
 * half) cut in size slices of whole elements of es bytes; 0 where it cannot run. */
size_t shmcoll__direct_slice_elems(const struct shmcoll_node *n, size_t es);

#endif
