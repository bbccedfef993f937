/* heap.h - the symmetric heap: shmcoll_malloc's buffers, at the same offset in every rank's
 * partition, so a peer finds a rank's buffer without being told where. The heap is the
 * arena's own partitions (part 0) and, once those are full, heap segments (shm/arena.h)
 * that shmcoll_malloc makes on demand (parts 1 ..). */
#ifndef SHMCOLL_CORE_HEAP_H
#define SHMCOLL_CORE_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/state.h"

/* A heap offset's part, and its offset in the part. */
static inline uint64_t heap_part_of(uint64_t off)
{
	return off >> HEAP_PART_SHIFT;
}

static inline uint64_t heap_in_part(uint64_t off)
{
	return off & (((uint64_t)1 << HEAP_PART_SHIFT) - 1);
}

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

/* Forgets part i of h and its blocks, unmapping a segment's (parts 1 ..). */
void shmcoll__heap_drop(struct shmcoll_heap *h, int i);

#endif
