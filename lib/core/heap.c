/* heap.c - shmcoll_malloc and shmcoll_free: first fit over this rank's partition of the
 * symmetric heap. Every rank runs the same deterministic allocator on the same sequence of
 * calls, so a buffer has the same offset in every partition; one step per call checks that
 * the ranks agree. The bookkeeping is private memory: nothing in the segment points
 * anywhere. */
#include "lib/core/heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/engine.h"

/* Buffers start on their own cache lines so two never share one. */
#define HEAP_ALIGN SHMCOLL_LINE

uint8_t *shmcoll__heap_of(const struct shmcoll_node *n, int p)
{
	const struct shmcoll_layout *l = &n->arena.lay;

	return n->arena.base + l->heap_off + (uint64_t)p * l->heap_stride;
}

void shmcoll__heap_init(struct shmcoll_node *n)
{
	n->heap.base = shmcoll__heap_of(n, n->rank);
	n->heap.bytes = n->arena.lay.heap_stride;
	n->heap.blocks = NULL;
	n->heap.nblocks = n->heap.cap = 0;
}

void shmcoll__heap_fini(struct shmcoll_node *n)
{
	free(n->heap.blocks);
	n->heap.blocks = NULL;
	n->heap.nblocks = n->heap.cap = 0;
}

uint64_t shmcoll__heap_off(const struct shmcoll_node *n, const void *buf, size_t bytes)
{
	uintptr_t b = (uintptr_t)buf, h = (uintptr_t)n->heap.base;
	uint64_t len = n->heap.bytes;

	if (!buf || !bytes || b < h || b - h > len || bytes > len - (b - h))
		return NO_OFF;
	return (uint64_t)(b - h);
}

/* First fit: the lowest gap that holds len. NO_OFF when none does. */
static uint64_t heap_alloc(struct shmcoll_heap *h, uint64_t len)
{
	uint64_t start = 0;
	size_t i;

	for (i = 0; i <= h->nblocks; i++) {
		uint64_t gap_end = i < h->nblocks ? h->blocks[i].off : h->bytes;

		if (gap_end - start >= len)
			break;
		if (i < h->nblocks)
			start = h->blocks[i].off + h->blocks[i].len;
	}
	if (i > h->nblocks)
		return NO_OFF;
	if (h->nblocks == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 16;
		struct heap_block *b = realloc(h->blocks, cap * sizeof(*b));

		if (!b)
			return NO_OFF;
		h->blocks = b;
		h->cap = cap;
	}
	memmove(&h->blocks[i + 1], &h->blocks[i], (h->nblocks - i) * sizeof(*h->blocks));
	h->blocks[i] = (struct heap_block){.off = start, .len = len};
	h->nblocks++;
	return start;
}

static long heap_find(const struct shmcoll_heap *h, uint64_t off)
{
	size_t i;

	for (i = 0; i < h->nblocks; i++)
		if (h->blocks[i].off == off)
			return (long)i;
	return -1;
}

static void heap_remove(struct shmcoll_heap *h, size_t i)
{
	memmove(&h->blocks[i], &h->blocks[i + 1], (h->nblocks - i - 1) * sizeof(*h->blocks));
	h->nblocks--;
}

enum { AT_GUARD = 1, AT_STEP };

/* One step in which every rank shows (kind, bytes, offset t->aux). Completes with 0 if all
 * agree, t->p set when some rank had no room (showed NO_OFF). */
static int agree_advance(struct shmcoll_node *n, struct shmcoll_task *t)
{
	const struct shmcoll_desc *pd;
	int p, rc;

	switch (t->at) {
	case AT_GUARD:
		goto guard;
	case AT_STEP:
		goto step;
	}
	shmcoll__describe(n, t);
guard:
	rc = shmcoll__await_guard(n, t);
	if (rc)
		return shmcoll__suspend(t, AT_GUARD, rc);
	t->d->aux = t->aux;
	shmcoll__publish_next(n, t->d);
step:
	rc = shmcoll__await_from(n, t, STEP_ALL, 1, 0);
	if (rc)
		return shmcoll__suspend(t, AT_STEP, rc);
	t->p = 0;
	for (p = 0; p < n->size; p++) {
		pd = &shmcoll__ctrl(&n->arena, (uint32_t)p)->desc[t->d->step & 1];
		if (pd->aux == NO_OFF) {
			t->p = 1;
		} else if (pd->aux != t->aux && t->aux != NO_OFF) {
			shmcoll__node_break(n, EPROTO);
			return shmcoll__node_fail(
			    n, -EPROTO,
			    "%s: ranks disagree on the heap (rank %d at offset "
			    "%llu, rank %d at %llu): calls were not made in the "
			    "same order",
			    t->fn, n->rank, (unsigned long long)t->aux, p,
			    (unsigned long long)pd->aux);
		}
	}
	return 0;
}

static void agree_init(struct shmcoll_task *t, const char *fn, uint32_t kind, uint64_t bytes,
                       uint64_t off)
{
	shmcoll__task_init(t, fn, agree_advance);
	t->kind = kind;
	t->algo = ALGO_FLAT;
	t->dtype = SHMCOLL_UINT8;
	t->op = SHMCOLL_SUM;
	t->root = -1;
	t->count = bytes;
	t->aux = off;
}

void *shmcoll__node_malloc(struct shmcoll_node *n, size_t bytes)
{
	const char *fn = "shmcoll_malloc";
	struct shmcoll_task t;
	uint64_t len, off;
	int rc;

	if (bytes > n->heap.bytes) {
		shmcoll__node_fail(n, -ENOMEM,
		                   "%s: %zu bytes exceed the %llu-byte heap of a rank (raise "
		                   "arena_bytes or SHMCOLL_ARENA_BYTES)",
		                   fn, bytes, (unsigned long long)n->heap.bytes);
		return NULL;
	}
	len = (bytes + HEAP_ALIGN - 1) / HEAP_ALIGN * HEAP_ALIGN;
	off = heap_alloc(&n->heap, len);
	agree_init(&t, fn, KIND_MALLOC, bytes, off);
	rc = shmcoll__task_run(n, &t);
	if (rc < 0 || t.p) {
		if (off != NO_OFF)
			heap_remove(&n->heap, (size_t)heap_find(&n->heap, off));
		if (rc == 0)
			shmcoll__node_fail(n, -ENOMEM,
			                   "%s: %zu bytes do not fit in the symmetric heap of some "
			                   "rank (%llu bytes each)",
			                   fn, bytes, (unsigned long long)n->heap.bytes);
		return NULL;
	}
	return n->heap.base + off;
}

int shmcoll__node_free(struct shmcoll_node *n, void *ptr)
{
	const char *fn = "shmcoll_free";
	struct shmcoll_task t;
	uint64_t off = (uint64_t)((uintptr_t)ptr - (uintptr_t)n->heap.base);
	long i = (uintptr_t)ptr < (uintptr_t)n->heap.base ? -1 : heap_find(&n->heap, off);
	int rc;

	if (i < 0)
		return shmcoll__node_fail(n, -EINVAL,
		                          "%s: ptr %p did not come from shmcoll_malloc on this "
		                          "communicator",
		                          fn, ptr);
	agree_init(&t, fn, KIND_FREE, 0, off);
	rc = shmcoll__task_run(n, &t);
	if (rc < 0)
		return rc;
	heap_remove(&n->heap, (size_t)i);
	return 0;
}
