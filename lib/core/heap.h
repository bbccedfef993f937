/* heap.h - the symmetric heap: shmcoll_malloc's buffers, at the same offset in every rank's
 * partition, so a peer finds a rank's buffer without being told where. The heap is the
 * arena's own partitions (part 0) and, once those are full, heap segments (shm/arena.h)
 * that shmcoll_malloc makes on demand (parts 1 ..). */
#ifndef SHMCOLL_CORE_HEAP_H
#define SHMCOLL_CORE_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "shm/arena.h"

struct shmcoll_node;

#define NO_OFF UINT64_MAX

/* Parts of a heap: the arena's and up to HEAP_PARTS - 1 segments. */
#define HEAP_PARTS 64

/* A heap offset names its part in its top bits: (part << HEAP_PART_SHIFT) | offset. */
#define HEAP_PART_SHIFT 48

struct heap_block {
	uint64_t off, len;
};

struct heap_part {
	uint8_t *base; /* this rank's partition, in this mapping; NULL: an unused slot */
	uint64_t bytes;
	struct heap_block *blocks; /* used, sorted by offset; the gaps are free */
	size_t nblocks, cap;
	struct shmcoll_segment seg; /* parts 1 ..: the segment */
};

/* Owned by heap.c: private bookkeeping only; nothing in the segment points anywhere. */
struct shmcoll_heap {
	uint8_t *base; /* part 0: the arena's heap partition of this rank */
	uint64_t bytes;
	size_t nblocks; /* blocks in use, over every part */
	uint32_t made;  /* segments made so far: names the next */
	int nparts;     /* parts in use (the arena's counts) */
	/* HEAP_PARTS entries, out of line: the communicator's fields every call touches stay
	 * close together. */
	struct heap_part *part;
};

/* 0, or -ENOMEM. */
int shmcoll__heap_init(struct shmcoll_node *n);
void shmcoll__heap_fini(struct shmcoll_node *n);

/* The heap offset of [buf, buf+bytes) if it lies entirely inside one of this rank's parts,
 * else NO_OFF (an ordinary buffer: it gets staged). */
uint64_t shmcoll__heap_off(const struct shmcoll_node *n, const void *buf, size_t bytes);

/* Where rank p's bytes at heap offset off are in this mapping, or NULL if off does not name
 * bytes bytes inside a part (an offset a peer published is checked here before use). */
uint8_t *shmcoll__heap_peer(const struct shmcoll_node *n, int p, uint64_t off, uint64_t bytes);

/* Rank p's partition of the arena's heap (part 0) in this rank's mapping. */
uint8_t *shmcoll__heap_of(const struct shmcoll_node *n, int p);

/* The collectives of the heap, for a node communicator entered by the caller. malloc:
 * bytes > 0; returns NULL with a message when it fails: no room anywhere (-ENOMEM in the
 * message; the communicator stays usable, on every rank alike), or the error of a step.
 * free: ptr not NULL; 0, -EINVAL (not from malloc) or the error of the step. */
void *shmcoll__node_malloc(struct shmcoll_node *n, size_t bytes);
int shmcoll__node_free(struct shmcoll_node *n, void *ptr);

#endif
