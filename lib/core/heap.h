/* heap.h - the symmetric heap: shmcoll_malloc's buffers, at the same offset in every rank's
 * partition of the arena, so a peer finds a rank's buffer without being told where. */
#ifndef SHMCOLL_CORE_HEAP_H
#define SHMCOLL_CORE_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct shmcoll_node;

#define NO_OFF UINT64_MAX

struct heap_block {
	uint64_t off, len;
};

/* Owned by heap.c: this rank's partition and its private bookkeeping (the used blocks,
 * sorted by offset; the gaps are free). Nothing in the segment points anywhere. */
struct shmcoll_heap {
	uint8_t *base; /* this rank's partition, in this mapping */
	uint64_t bytes;
	struct heap_block *blocks;
	size_t nblocks, cap;
};

void shmcoll__heap_init(struct shmcoll_node *n);
void shmcoll__heap_fini(struct shmcoll_node *n);

/* Offset of [buf, buf+bytes) in this rank's heap, or NO_OFF if it is not entirely inside it
 * (then it is an ordinary buffer and gets staged). */
uint64_t shmcoll__heap_off(const struct shmcoll_node *n, const void *buf, size_t bytes);

/* Rank p's heap partition in this rank's mapping. */
uint8_t *shmcoll__heap_of(const struct shmcoll_node *n, int p);

/* The collectives of the heap, for a node communicator entered by the caller. malloc:
 * bytes > 0; returns NULL with a message (-ENOMEM: some rank's heap had no room, the
 * communicator stays usable; or the error of the step) when it fails. free: ptr not NULL;
 * 0, -EINVAL (not from malloc) or the error of the step. */
void *shmcoll__node_malloc(struct shmcoll_node *n, size_t bytes);
int shmcoll__node_free(struct shmcoll_node *n, void *ptr);

#endif
