/* heap.c - shmcoll_malloc and shmcoll_free: first fit over this rank's
 * partition of the symmetric heap. Every rank runs the same deterministic
 * allocator on the same sequence of calls, so a buffer has the same offset
 * in every partition; one step per call checks that the ranks agree. The
 * bookkeeping is private memory: nothing in the segment points anywhere. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hier.h"
#include "lib/internal.h"

/* Buffers start on their own cache lines so two never share one. */
#define HEAP_ALIGN SHMCOLL_LINE

void shmcoll__heap_init(shmcoll_comm *c)
{
	const struct shmcoll_layout *l = &c->arena.lay;

	c->heap = c->arena.base + l->heap_off + (uint64_t)c->rank * l->heap_stride;
	c->blocks = NULL;
	c->nblocks = c->cap_blocks = 0;
}

void shmcoll__heap_fini(shmcoll_comm *c)
{
	free(c->blocks);
	c->blocks = NULL;
	c->nblocks = c->cap_blocks = 0;
}

/* The allocator keeps only the used blocks, sorted by offset; the gaps are
 * free. First fit: the lowest gap that holds len. NO_OFF when none does. */
static uint64_t heap_alloc(shmcoll_comm *c, uint64_t len)
{
	uint64_t start = 0, end = c->arena.lay.heap_stride;
	size_t i;

	for (i = 0; i <= c->nblocks; i++) {
		uint64_t gap_end = i < c->nblocks ? c->blocks[i].off : end;

		if (gap_end - start >= len)
			break;
		if (i < c->nblocks)
			start = c->blocks[i].off + c->blocks[i].len;
	}
	if (i > c->nblocks)
		return NO_OFF;
	if (c->nblocks == c->cap_blocks) {
		size_t cap = c->cap_blocks ? 2 * c->cap_blocks : 16;
		struct heap_block *b = realloc(c->blocks, cap * sizeof(*b));

		if (!b)
			return NO_OFF;
		c->blocks = b;
		c->cap_blocks = cap;
	}
	memmove(&c->blocks[i + 1], &c->blocks[i], (c->nblocks - i) * sizeof(*c->blocks));
	c->blocks[i] = (struct heap_block){.off = start, .len = len, .used = 1};
	c->nblocks++;
	return start;
}

static long heap_find(const shmcoll_comm *c, uint64_t off)
{
	size_t i;

	for (i = 0; i < c->nblocks; i++)
		if (c->blocks[i].off == off)
			return (long)i;
	return -1;
}

static void heap_remove(shmcoll_comm *c, size_t i)
{
	memmove(&c->blocks[i], &c->blocks[i + 1], (c->nblocks - i - 1) * sizeof(*c->blocks));
	c->nblocks--;
}

/* One step in which every rank shows (kind, bytes, offset); 0 if all agree. */
static int agree(shmcoll_comm *c, const char *fn, uint32_t kind, uint64_t bytes, uint64_t off,
                 int *someone_failed)
{
	struct shmcoll_desc *d;
	int p, rc;

	rc = shmcoll__begin(c, fn, kind, SHMCOLL_UINT8, SHMCOLL_SUM, -1, bytes, &d);
	if (rc < 0)
		return rc;
	d->aux = off;
	rc = shmcoll__chunk_step(c, fn, d, 1, 0);
	if (rc < 0)
		return rc;
	*someone_failed = 0;
	for (p = 0; p < c->size; p++) {
		const struct shmcoll_desc *pd =
		    &shmcoll__ctrl(&c->arena, (uint32_t)p)->desc[d->step & 1];

		if (pd->aux == NO_OFF)
			*someone_failed = 1;
		else if (pd->aux != off && off != NO_OFF) {
			shmcoll__break(c, EPROTO);
			return shmcoll__fail(c, -EPROTO,
			                     "%s: ranks disagree on the heap (rank %d at offset "
			                     "%llu, rank %d at %llu): calls were not made in the "
			                     "same order",
			                     fn, c->rank, (unsigned long long)off, p,
			                     (unsigned long long)pd->aux);
		}
	}
	return 0;
}

void *shmcoll_malloc(shmcoll_comm *c, size_t bytes)
{
	const char *fn = "shmcoll_malloc";
	uint64_t len, off;
	int failed, rc;

	if (!c)
		return NULL;
	if (shmcoll__enter(c, fn) < 0)
		return NULL;
	if (c->hier)
		return shmcoll__hier_malloc(c, bytes);
	if (bytes == 0) {
		shmcoll__fail(c, -EINVAL, "%s: bytes is 0", fn);
		return NULL;
	}
	if (bytes > c->arena.lay.heap_stride) {
		shmcoll__fail(c, -ENOMEM,
		              "%s: %zu bytes exceed the %llu-byte heap of a rank "
		              "(raise arena_bytes or SHMCOLL_ARENA_BYTES)",
		              fn, bytes, (unsigned long long)c->arena.lay.heap_stride);
		return NULL;
	}
	len = (bytes + HEAP_ALIGN - 1) / HEAP_ALIGN * HEAP_ALIGN;
	off = heap_alloc(c, len);
	rc = agree(c, fn, KIND_MALLOC, bytes, off, &failed);
	if (rc < 0 || failed) {
		if (off != NO_OFF)
			heap_remove(c, (size_t)heap_find(c, off));
		if (rc == 0)
			shmcoll__fail(c, -ENOMEM,
			              "%s: %zu bytes do not fit in the symmetric heap "
			              "of some rank (%llu bytes each)",
			              fn, bytes, (unsigned long long)c->arena.lay.heap_stride);
		return NULL;
	}
	return c->heap + off;
}

int shmcoll_free(shmcoll_comm *c, void *ptr)
{
	const char *fn = "shmcoll_free";
	uint64_t off;
	long i;
	int failed, rc;

	if (!c)
		return -EINVAL;
	rc = shmcoll__enter(c, fn);
	if (rc < 0)
		return rc;
	if (!ptr)
		return 0;
	if (c->hier)
		return shmcoll__hier_free(c, ptr);
	off = (uint64_t)((uintptr_t)ptr - (uintptr_t)c->heap);
	i = (uintptr_t)ptr < (uintptr_t)c->heap ? -1 : heap_find(c, off);
	if (i < 0)
		return shmcoll__fail(c, -EINVAL,
		                     "%s: ptr %p did not come from shmcoll_malloc "
		                     "on this communicator",
		                     fn, ptr);
	rc = agree(c, fn, KIND_FREE, 0, off, &failed);
	if (rc < 0)
		return rc;
	heap_remove(c, (size_t)i);
	return 0;
}
