/* heap.c - the symmetric heap's parts: the arena's own partitions (part 0) and the heap
 * segments shmcoll_malloc makes (alloc.c), and where a heap offset is in a rank's mapping. */
#include "lib/core/heap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/state.h"

uint8_t *shmcoll__heap_of(const struct shmcoll_node *n, int p)
{
	const struct shmcoll_layout *l = &n->arena.lay;

	return n->arena.base + l->heap_off + (uint64_t)p * l->heap_stride;
}

int shmcoll__heap_init(struct shmcoll_node *n)
{
	struct shmcoll_heap *h = &n->heap;

	memset(h, 0, sizeof(*h));
	h->part = calloc(HEAP_PARTS, sizeof(*h->part));
	if (!h->part)
		return -ENOMEM;
	h->base = shmcoll__heap_of(n, n->rank);
	h->bytes = n->arena.lay.heap_stride;
	h->part[0].base = h->base;
	h->part[0].bytes = h->bytes;
	h->nparts = 1;
	return 0;
}

void shmcoll__heap_drop(struct shmcoll_heap *h, int i)
{
	struct heap_part *pt = &h->part[i];

	h->nblocks -= pt->nblocks;
	free(pt->blocks);
	if (i > 0)
		shmcoll__segment_release(&pt->seg);
	memset(pt, 0, sizeof(*pt));
	while (h->nparts > 1 && !h->part[h->nparts - 1].base)
		h->nparts--;
}

void shmcoll__heap_fini(struct shmcoll_node *n)
{
	int i;

	if (!n->heap.part)
		return;
	for (i = n->heap.nparts - 1; i >= 0; i--)
		if (n->heap.part[i].base || i == 0)
			shmcoll__heap_drop(&n->heap, i);
	free(n->heap.part);
	n->heap.part = NULL;
}

uint64_t shmcoll__heap_off(const struct shmcoll_node *n, const void *buf, size_t bytes)
{
	const struct shmcoll_heap *h = &n->heap;
	uintptr_t b = (uintptr_t)buf, base;
	int i;

	if (!buf || !bytes)
		return NO_OFF;
	for (i = 0; i < h->nparts; i++) {
		base = (uintptr_t)h->part[i].base;
		if (!base || b < base || b - base > h->part[i].bytes ||
		    bytes > h->part[i].bytes - (b - base))
			continue;
		return (uint64_t)i << HEAP_PART_SHIFT | (uint64_t)(b - base);
	}
	return NO_OFF;
}

uint8_t *shmcoll__heap_peer(const struct shmcoll_node *n, int p, uint64_t off, uint64_t bytes)
{
	const struct heap_part *pt;
	uint64_t i = heap_part_of(off), o = heap_in_part(off);

	if (i >= HEAP_PARTS || p < 0 || p >= n->size || !n->heap.part)
		return NULL;
	pt = &n->heap.part[i];
	if (!pt->base || o > pt->bytes || bytes > pt->bytes - o)
		return NULL;
	if (i == 0)
		return shmcoll__heap_of(n, p) + o;
	return shmcoll__segment_part(&pt->seg, (uint32_t)p) + o;
}
