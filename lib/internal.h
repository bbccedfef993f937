/* internal.h - the communicator and the step engine shared by every
 * collective file. Nothing here is exported. */
#ifndef SHMCOLL_INTERNAL_H
#define SHMCOLL_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shmcoll.h"
#include "shm/arena.h"
#include "shm/wait.h"
#include "lib/kernels.h"

#define SHMCOLL_ERR_LEN 320
#define NO_OFF          UINT64_MAX

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

/* The protocols a collective can run (docs/ARCHITECTURE.md describes each).
 * Every rank must run the same one: it is part of the call word. */
enum shmcoll_algo {
	ALGO_AUTO,   /* chosen per call from measured crossovers */
	ALGO_FLAT,   /* one step per chunk: everyone stages, everyone reads all */
	ALGO_DIRECT, /* pipelined reduce-scatter + allgather: each rank owns 1/P */
	ALGO_TREE,   /* k-nomial tree: gather up, release down */
	ALGO_CMA,    /* single copy: read peers' buffers with process_vm_readv (cma.c) */
	ALGO_COUNT
};

/* Radix of the k-nomial tree (tree.c): depth log4(P), at most 3 children per
 * level, so a parent waits on few ranks and the release reaches 64 ranks in
 * three hops. */
#define SHMCOLL_TREE_RADIX        4
#define SHMCOLL_TREE_MAX_CHILDREN ((SHMCOLL_TREE_RADIX - 1) * 6) /* P <= 4^5 */

struct shmcoll_tree {
	int parent; /* -1 at the root */
	int nchildren;
	int children[SHMCOLL_TREE_MAX_CHILDREN];
};

struct heap_block {
	uint64_t off, len;
	int used;
};

struct shmcoll_hier;

struct shmcoll_comm {
	int rank, size;
	struct shmcoll_hier *hier; /* set: a communicator over several nodes (hier.c);
	                            * then only rank, size, broken, err and cause
	                            * below mean anything */
	struct shmcoll_arena arena;
	struct shmcoll_waiter waiter;
	struct shmcoll_ctrl *me; /* this rank's control block */
	uint32_t seq;            /* the last step this rank published */
	_Atomic int broken;      /* non-zero once aborted: later calls fail */
	uint8_t *heap;           /* this rank's heap partition, in this mapping */
	struct heap_block *blocks;
	size_t nblocks, cap_blocks;
	const void **srcs;        /* size entries: kernel sources of one chunk */
	const uint8_t **zc;       /* size entries: each rank's zero-copy source or NULL */
	const uint8_t **zr;       /* size entries: each rank's result, readable in place, or NULL */
	uint8_t algo[KIND_COUNT]; /* SHMCOLL_ALGO: forced protocol per kind, or ALGO_AUTO */
	size_t chunk_bytes;       /* SHMCOLL_CHUNK_BYTES, or 0: chosen per call */
	int nt_stores;            /* SHMCOLL_NT (default 0): streaming stores for huge results */
	struct shmcoll_call call; /* the current call's word, published by its first step */
	struct shmcoll_desc desc; /* the rest of its description, published alike */
	uint32_t clean;           /* every reader of what we wrote up to this step is done */
	uint32_t splits;          /* shmcoll_comm_split/dup calls so far: names their jobs */
	int cma;                  /* every rank can read every peer's memory (cma.c) */
	size_t cma_min;           /* SHMCOLL_CMA_MIN: single copies from this block size on;
	                           * 0: the measured defaults (cma.c) */
	uint64_t cma_nonce;       /* what peers read here to prove they can (cma.c) */
	uint8_t *scratch;         /* private copy of an in-place alltoall's buffer */
	size_t scratch_bytes;
	struct shmcoll_peer *peers;  /* liveness of each rank (live.c) */
	int waiting_for;             /* the rank the current wait is for, or -1 */
	uint32_t waiting_step;       /* and the step it waits for */
	int left_rank;               /* set by shmcoll__live_check before -EPROTO */
	int live_next;               /* the next rank the liveness check looks at */
	int dead_rank;               /* set by shmcoll__live_check before -EOWNERDEAD */
	char err[SHMCOLL_ERR_LEN];   /* shmcoll_last_error() */
	char cause[SHMCOLL_ERR_LEN]; /* the failure that broke the communicator */
};

/* Liveness of peers (live.c). init opens what the checks need once every
 * rank has attached and installs shmcoll__live_check as the waiter's slow-path
 * check: -EOWNERDEAD, with dead_rank set, once a peer process has exited;
 * -EPROTO, with left_rank set, when the rank waited for destroyed its
 * communicator without publishing the step (it made fewer calls). */
struct shmcoll_peer;
int shmcoll__live_init(shmcoll_comm *c);
void shmcoll__live_fini(shmcoll_comm *c);
int shmcoll__live_check(void *ctx);
int shmcoll__peer_pid(const shmcoll_comm *c, int p);

/* Records the message of a failed create for shmcoll_last_error(NULL) (the
 * calling thread's) and returns rc. */
int shmcoll__create_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records a message for shmcoll_last_error() and returns rc. */
int shmcoll__fail(shmcoll_comm *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *shmcoll__kind_name(uint32_t kind);
const char *shmcoll__dtype_name(uint32_t dtype);
const char *shmcoll__op_name(uint32_t op);
const char *shmcoll__algo_name(uint32_t algo);

/* Parses SHMCOLL_ALGO ("direct", or "allreduce:direct,reduce_scatter:flat")
 * into c->algo. Returns 0 or -EINVAL with a message in err. */
int shmcoll__algo_parse(shmcoll_comm *c, const char *spec, char *err, size_t errlen);

/* Argument checks, each returning 0 or -EINVAL with a message naming the
 * argument. They run before any rank waits on another. */
int shmcoll__check_comm(shmcoll_comm *c, const char *fn);
int shmcoll__check_type(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, size_t count,
                        size_t mult, size_t *bytes);
int shmcoll__check_op(shmcoll_comm *c, const char *fn, shmcoll_dtype dtype, shmcoll_op op);
int shmcoll__check_root(shmcoll_comm *c, const char *fn, int root);
int shmcoll__check_buf(shmcoll_comm *c, const char *fn, const char *name, const void *buf,
                       size_t bytes);
/* Fails unless [a, a+na) and [b, b+nb) are disjoint or a == inplace_a. */
int shmcoll__check_overlap(shmcoll_comm *c, const char *fn, const void *a, size_t na, const void *b,
                           size_t nb, const void *inplace_a);

/* Returns -ECANCELED (with a message) if the communicator was aborted. */
int shmcoll__enter(shmcoll_comm *c, const char *fn);

/* Begins a call whose first step is the next one: builds its call word and
 * descriptor (private until that step publishes them; the caller fills in
 * src_off or aux) and guards the step (shmcoll__guard). Returns 0 or the
 * error of a failed wait. */
int shmcoll__begin(shmcoll_comm *c, const char *fn, uint32_t kind, shmcoll_dtype dtype,
                   shmcoll_op op, int root, uint64_t count, struct shmcoll_desc **d);

/* Before writing anything shared for step s = seq + 1 (a staging half, a call
 * word): makes sure every rank that may read what this rank wrote at s - 2
 * has finished, waiting for every peer to publish s - 1 unless c->clean
 * already says so. Every staging is preceded by it; it costs a comparison
 * when the previous step waited for everyone. */
int shmcoll__guard(shmcoll_comm *c, const char *fn);

/* The call word of the call being begun (shmcoll__desc_begin), private until
 * its first step: a protocol other than the flat one sets its algo there. */
struct shmcoll_call *shmcoll__call(shmcoll_comm *c);

/* Publishes the next step and waits until every peer has published it.
 * Returns 0, or breaks the communicator and returns -ETIMEDOUT/-ECANCELED. */
int shmcoll__step(shmcoll_comm *c, const char *fn);

/* Publishes step seq + 1 without waiting; with first (the call's
 * descriptor) it is the call's first step and publishes the call word too. */
void shmcoll__publish_next(shmcoll_comm *c, const struct shmcoll_desc *first);

/* Waits until rank p has published step want. Returns 0, or breaks the
 * communicator and returns -ETIMEDOUT/-ECANCELED (or the cause another rank
 * broke it with). */
int shmcoll__wait_rank(shmcoll_comm *c, const char *fn, int p, uint32_t want);

/* shmcoll__check_peers for rank p alone: for protocols that wait on some
 * ranks only, each checking the ones it waited for at the call's first
 * step, while those cannot yet have begun another call. */
int shmcoll__check_rank(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *mine, int p,
                        uint64_t src_bytes);

/* The inline path of single-step calls whose contribution fits
 * SHMCOLL_INLINE_MAX bytes (struct shmcoll_msg). Such a call begins with
 * shmcoll__begin_msg, which guards the message slot instead of the staging
 * half and call words (an inline call writes neither). shmcoll__msg_publish
 * writes this rank's message for the call d began (len 0 for a rank with
 * nothing to give, which still describes its call) and publishes the step.
 * shmcoll__msg_wait returns rank p's data for that step once it is there,
 * having checked its call word, or NULL with *rc set (-EPROTO for a
 * mismatch, or the error of the wait). */
#define SHMCOLL_MSG_SPINS 4096
int shmcoll__begin_msg(shmcoll_comm *c, const char *fn, uint32_t kind, shmcoll_dtype dtype,
                       shmcoll_op op, int root, uint64_t count, struct shmcoll_desc **d);
void shmcoll__msg_publish(shmcoll_comm *c, const struct shmcoll_desc *d, const void *data,
                          size_t len);
const uint8_t *shmcoll__msg_wait(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d,
                                 int p, int *rc);

/* After publishing its message for the call d began: puts every rank's block
 * of bytes bytes, in rank order, into recv - this rank's from send unless it
 * is there already (in place), every peer's from its message. Returns 0 or
 * the error of shmcoll__msg_wait. (gather's root, allgather.) */
int shmcoll__msg_gather(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d,
                        const uint8_t *send, uint8_t *recv, size_t bytes);

/* Rank's message slot for step. */
static inline struct shmcoll_msg *shmcoll__msg(const shmcoll_comm *c, int rank, uint32_t step)
{
	return &shmcoll__ctrl(&c->arena, (uint32_t)rank)->msg[step & (SHMCOLL_MSG_RING - 1)];
}

/* After this rank read the message of the call d began from every peer it
 * has: each of them has begun that call, so has read all this rank wrote
 * before it. Said only where that is one peer (P = 2), which spares the next
 * inline call's guard a look at it; the collectives that read every peer's
 * message say it themselves. */
static inline void shmcoll__msg_seen(shmcoll_comm *c, const struct shmcoll_desc *d)
{
	if (c->size == 2)
		c->clean = d->step - 1;
}

/* Whether a call of bytes bytes running protocol algo travels inline: the
 * same on every rank that makes the same call. */
static inline int shmcoll__inline(const shmcoll_comm *c, int algo, size_t bytes)
{
	return algo == ALGO_FLAT && bytes <= SHMCOLL_INLINE_MAX && c->size > 1;
}

/* After the first step of a call: checks every peer's call word matches
 * ours (-EPROTO, communicator broken) and fills c->zc[p] with each rank's
 * zero-copy source (NULL where it staged), each checked to lie inside its
 * heap for src_bytes bytes. */
int shmcoll__check_peers(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *mine,
                         uint64_t src_bytes);

/* One step of a call, waiting for every peer. The first one (first != 0)
 * also publishes the call word and then checks the peers' (see
 * shmcoll__check_peers). */
int shmcoll__chunk_step(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d, int first,
                        uint64_t src_bytes);

/* shmcoll__chunk_step, waiting for rank from only (checking its call word on
 * the first step), for every peer (STEP_ALL), or for nobody (STEP_NONE): the
 * rooted protocols, where a rank waits only for the ranks it reads. */
#define STEP_ALL  (-1)
#define STEP_NONE (-2)
int shmcoll__step_from(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d, int first,
                       uint64_t src_bytes, int from);

/* After the last chunk: if any rank other than skip (-1: none) let peers read
 * its buffer in place, one more step so nobody returns (and lets its caller
 * reuse the buffer) while a peer still reads it. */
int shmcoll__zc_release(shmcoll_comm *c, const char *fn, int skip);

/* Stages chunk [off, off+len) of each of the parts blocks of src (block q
 * starts at q * block) at position q * len of slot: the layout of the
 * collectives that split every chunk per peer. */
static inline void shmcoll__stage_split(uint8_t *slot, const uint8_t *src, size_t parts,
                                        size_t block, size_t off, size_t len)
{
	for (size_t q = 0; q < parts; q++)
		memcpy(slot + q * len, src + q * block + off, len);
}

static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Breaks the communicator for everyone: sets the shared abort word and wakes
 * every sleeper. Async-signal-safe. */
void shmcoll__break(shmcoll_comm *c, int why);
/* The same, naming who instead of this rank (the dead rank for EOWNERDEAD). */
void shmcoll__break_by(shmcoll_comm *c, int why, int who);

/* Staging half of rank for step. */
static inline uint8_t *shmcoll__slot(const shmcoll_comm *c, int rank, uint32_t step)
{
	const struct shmcoll_layout *l = &c->arena.lay;

	return c->arena.base + l->slot_off + (uint64_t)rank * l->slot_stride +
	       (step & 1) * l->slot_half;
}

/* Offset of [buf, buf+bytes) in this rank's heap, or NO_OFF if it is not
 * entirely inside it (then it is an ordinary buffer and gets staged). */
uint64_t shmcoll__heap_off(const shmcoll_comm *c, const void *buf, size_t bytes);

/* Elements of es bytes per staging chunk when each chunk is split into
 * parts pieces (1 for whole-vector collectives, size for per-peer ones). */
static inline size_t shmcoll__chunk_elems(const shmcoll_comm *c, size_t es, size_t parts)
{
	return (size_t)(c->arena.lay.slot_half / (es * parts));
}

/* The protocol of an allreduce or reduce (kind) of bytes bytes of es-byte
 * elements: SHMCOLL_ALGO's, else direct from direct_min bytes on; flat where
 * the direct protocol cannot run. */
int shmcoll__algo_reduction(const shmcoll_comm *c, uint32_t kind, size_t bytes, size_t es,
                            size_t direct_min);

/* Whether the direct protocol can run: more than one rank, and a staging
 * half that holds one element per rank. The same on every rank. */
int shmcoll__direct_fits(const shmcoll_comm *c, size_t es);

/* The direct reduce-scatter + allgather protocol (direct.c) for the call d
 * began: the result goes to recvbuf on every rank (root < 0) or on root. */
int shmcoll__reduce_direct(shmcoll_comm *c, const char *fn, struct shmcoll_desc *d,
                           const uint8_t *send, uint8_t *recv, size_t count, size_t es,
                           shmcoll__reduce_fn reduce, int root);

/* memcpy with non-temporal stores (copy.c): for results far larger than the
 * caches, which would otherwise be read before being overwritten. */
void shmcoll__copy_nt(void *dst, const void *src, size_t n);

/* Results from this size on are written with shmcoll__copy_nt. */
#define SHMCOLL_NT_MIN_BYTES (16u * 1024 * 1024)

/* This rank's place in the k-nomial tree rooted at root. */
void shmcoll__tree(const shmcoll_comm *c, int root, struct shmcoll_tree *t);

/* The single-copy protocol (cma.c). offer, before the arena: reads
 * SHMCOLL_CMA and SHMCOLL_CMA_MIN (-EINVAL for a bad one, with the create
 * message) and draws the nonce. show, before the rank counts itself
 * attached: writes the nonce and its address into its control block. agree,
 * once all are attached: probes every peer and waits for every rank's
 * verdict, then sets c->cma alike on every rank (or returns the error of the
 * wait). */
int shmcoll__cma_offer(shmcoll_comm *c);
void shmcoll__cma_show(shmcoll_comm *c);
int shmcoll__cma_agree(shmcoll_comm *c);
/* Whether a call of kind whose blocks are block_bytes runs the single-copy
 * protocol: the same on every rank that makes the same call. */
int shmcoll__cma_pick(const shmcoll_comm *c, uint32_t kind, size_t block_bytes);
/* Copies n bytes at address addr of rank p's (a peer's) memory into dst. Returns 0, or
 * breaks the communicator and returns -EOWNERDEAD (p is gone) or -EIO. */
int shmcoll__cma_read(shmcoll_comm *c, const char *fn, int p, void *dst, uint64_t addr, size_t n);
/* Copies bytes [off, off+n) of the buffer rank p published for the call d
 * began (its desc addr, or in place from its heap when it lies there) into
 * dst. Only after a step that waited for p. */
static inline int shmcoll__cma_fetch(shmcoll_comm *c, const char *fn, const struct shmcoll_desc *d,
                                     int p, void *dst, size_t off, size_t n)
{
	if (c->zc[p]) {
		memcpy(dst, c->zc[p] + off, n);
		return 0;
	}
	return shmcoll__cma_read(
	    c, fn, p, dst, shmcoll__ctrl(&c->arena, (uint32_t)p)->desc[d->step & 1].addr + off, n);
}

void shmcoll__heap_init(shmcoll_comm *c);
void shmcoll__heap_fini(shmcoll_comm *c);

#endif
