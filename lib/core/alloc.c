/* alloc.c - shmcoll_malloc and shmcoll_free: first fit over this rank's parts of the symmetric
 * heap. Every rank runs the same deterministic allocator on the same sequence of calls, so a
 * buffer has the same offset in every partition; one step per call checks that the ranks
 * agree. The bookkeeping is private memory: nothing in the segment points anywhere.
 *
 * Growing. When no part has room, the call makes a heap segment (shm/arena.h) - every rank
 * decides so alike, from the same bookkeeping - of max(the request, 4 MiB, the heap so far)
 * per rank, so the heap at least doubles:
 *   1. every rank shows its offset (NO_OFF: it grows): the step every malloc takes;
 *   2. rank 0 creates the segment (the room of /dev/shm and the memory cgroup checked first)
 *      and shows the result; the others wait for it;
 *   3. every other rank attaches and shows its result; rank 0 unlinks the name once all
 *      have shown (the segment then exists as mappings only, as the arena does);
 *   4. with every result good each rank takes the block in the new part; else every rank
 *      drops the segment and returns NULL with the reason, and the communicator stays
 *      usable.
 * A segment whose last block is freed is dropped by every rank alike (free is collective). */
#include "lib/core/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/engine.h"
#include "lib/core/heap.h"
#include "lib/core/task.h"

/* Buffers start on their own cache lines so two never share one. */
#define HEAP_ALIGN SHMCOLL_LINE
/* The least a segment holds per rank, and the page its parts are counted in. */
#define SEGMENT_MIN ((uint64_t)4 << 20)
#define PAGE_BYTES  4096u
/* The largest request: one whose part would not fit the offset's bits. */
#define REQUEST_MAX ((uint64_t)1 << (HEAP_PART_SHIFT - 1))

/* First fit in part pt: the lowest gap that holds len, as an offset in the part, or
 * NO_OFF. take: record the block. */
static uint64_t part_fit(struct heap_part *pt, uint64_t len, int take)
{
	uint64_t start = 0, gap_end;
	size_t i;

	for (i = 0; i <= pt->nblocks; i++) {
		gap_end = i < pt->nblocks ? pt->blocks[i].off : pt->bytes;
		if (gap_end >= start && gap_end - start >= len)
			break;
		if (i < pt->nblocks)
			start = pt->blocks[i].off + pt->blocks[i].len;
	}
	if (i > pt->nblocks || !take)
		return i > pt->nblocks ? NO_OFF : start;
	if (pt->nblocks == pt->cap) {
		size_t cap = pt->cap ? 2 * pt->cap : 16;
		struct heap_block *b = realloc(pt->blocks, cap * sizeof(*b));

		if (!b)
			return NO_OFF;
		pt->blocks = b;
		pt->cap = cap;
	}
	memmove(&pt->blocks[i + 1], &pt->blocks[i], (pt->nblocks - i) * sizeof(*pt->blocks));
	pt->blocks[i] = (struct heap_block){.off = start, .len = len};
	pt->nblocks++;
	return start;
}

/* The first part with room for len, its block taken: a heap offset, or NO_OFF. */
static uint64_t heap_alloc(struct shmcoll_heap *h, uint64_t len)
{
	uint64_t off;
	int i;

	for (i = 0; i < h->nparts; i++) {
		if (!h->part[i].base)
			continue;
		off = part_fit(&h->part[i], len, 1);
		if (off != NO_OFF) {
			h->nblocks++;
			return (uint64_t)i << HEAP_PART_SHIFT | off;
		}
	}
	return NO_OFF;
}

/* The block at heap offset off: its part in *part and its index, or -1. */
static long heap_find(const struct shmcoll_heap *h, uint64_t off, int *part)
{
	uint64_t i = heap_part_of(off), o = heap_in_part(off);
	size_t k;

	if (i >= HEAP_PARTS || !h->part[i].base)
		return -1;
	for (k = 0; k < h->part[i].nblocks; k++)
		if (h->part[i].blocks[k].off == o) {
			*part = (int)i;
			return (long)k;
		}
	return -1;
}

static void heap_remove(struct shmcoll_heap *h, int part, size_t k)
{
	struct heap_part *pt = &h->part[part];

	memmove(&pt->blocks[k], &pt->blocks[k + 1], (pt->nblocks - k - 1) * sizeof(*pt->blocks));
	pt->nblocks--;
	h->nblocks--;
}

enum { AT_GUARD = 1, AT_STEP };

/* One step in which every rank shows (kind, bytes, t->aux). In agree mode (t->root == -1)
 * it completes with 0 if all show the same offset, t->i the number of ranks that had no
 * room (showed NO_OFF); in show mode (t->root == -2) it only waits for everyone, and the caller
 * reads what each showed (shown()) before its next step. */
static int show_advance(struct shmcoll_node *n, struct shmcoll_task *t)
{
	const struct shmcoll_desc *pd;
	int p, rc;

	switch (t->head.at) {
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
	t->i = 0;
	if (t->root != -1)
		return 0;
	for (p = 0; p < n->size; p++) {
		pd = &shmcoll__ctrl(&n->arena, (uint32_t)p)->desc[t->d->step & 1];
		if (pd->aux == NO_OFF) {
			t->i++;
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

/* Runs one step showing value (kind, bytes as the call word's count); agree: its mode. */
static int show(struct shmcoll_node *n, struct shmcoll_task *t, const char *fn, uint32_t kind,
                uint64_t bytes, uint64_t value, int agree)
{
	shmcoll__task_init(t, fn, show_advance);
	t->kind = kind;
	t->algo = ALGO_FLAT;
	t->dtype = SHMCOLL_UINT8;
	t->op = SHMCOLL_SUM;
	t->root = agree ? -1 : -2;
	t->count = bytes;
	t->aux = value;
	return shmcoll__task_run(n, t);
}

/* What rank p showed at the step t just ran. */
static uint64_t shown(const struct shmcoll_node *n, const struct shmcoll_task *t, int p)
{
	return shmcoll__ctrl(&n->arena, (uint32_t)p)->desc[t->d->step & 1].aux;
}

/* Steps 2-4 of growing (the comment at the top): a new part i of part bytes per rank, then
 * len bytes in it. The block's heap offset, or NO_OFF with a message (the communicator
 * usable), or *rc set to the error of a step. */
static uint64_t grow(struct shmcoll_node *n, const char *fn, int i, uint64_t part, uint64_t len,
                     int *rc)
{
	struct shmcoll_heap *h = &n->heap;
	struct heap_part *pt = &h->part[i];
	struct shmcoll_task t;
	char err[SHMCOLL_ERR_LEN - 96];
	uint64_t mine = 0, total = part * (uint64_t)n->size;
	int e = 0, p, bad = -1;

	err[0] = '\0';
	pt->blocks = malloc(16 * sizeof(*pt->blocks));
	pt->cap = pt->blocks ? 16 : 0;
	if (!pt->blocks)
		snprintf(err, sizeof(err), "out of memory");
	if (n->rank == 0)
		e = pt->blocks ? shmcoll__segment_create(&pt->seg, &n->arena, h->made, part, err,
		                                         sizeof(err))
		               : -ENOMEM;
	mine = (uint64_t)(uint32_t)-e;
	*rc = show(n, &t, fn, KIND_MALLOC, len, mine, 0);
	if (*rc < 0)
		goto drop;
	e = (int)shown(n, &t, 0);
	if (e) {
		shmcoll__node_fail(n, -ENOMEM,
		                   "%s: no room to grow the symmetric heap by %llu bytes (%llu per "
		                   "rank) for %llu bytes: %s",
		                   fn, (unsigned long long)total, (unsigned long long)part,
		                   (unsigned long long)len, n->rank == 0 ? err : strerror(e));
		h->made++;
		goto drop;
	}
	if (n->rank != 0)
		e = !pt->blocks ? -ENOMEM
		                : shmcoll__segment_attach(&pt->seg, &n->arena, h->made, part,
		                                          &shmcoll__ctrl(&n->arena, 0)->proc, err,
		                                          sizeof(err));
	mine = (uint64_t)(uint32_t)-e;
	*rc = show(n, &t, fn, KIND_MALLOC, len, mine, 0);
	if (n->rank == 0)
		shmcoll__segment_unlink(&pt->seg);
	h->made++;
	if (*rc < 0)
		goto drop;
	for (p = 0; p < n->size && bad < 0; p++)
		if (shown(n, &t, p))
			bad = p;
	if (bad >= 0) {
		shmcoll__segment_release(&pt->seg);
		shmcoll__node_fail(n, -ENOMEM, "%s: rank %d could not map the new heap segment: %s",
		                   fn, bad,
		                   bad == n->rank ? err : strerror((int)shown(n, &t, bad)));
		goto drop;
	}
	pt->base = shmcoll__segment_part(&pt->seg, (uint32_t)n->rank);
	pt->bytes = part;
	if (i >= h->nparts)
		h->nparts = i + 1;
	h->nblocks++;
	return (uint64_t)i << HEAP_PART_SHIFT | part_fit(pt, len, 1);
drop:
	if (n->rank == 0 && pt->seg.base)
		shmcoll__segment_unlink(&pt->seg); /* a step failed before the others had it */
	shmcoll__segment_release(&pt->seg);
	free(pt->blocks);
	memset(pt, 0, sizeof(*pt));
	return NO_OFF;
}

void *shmcoll__node_malloc(struct shmcoll_node *n, size_t bytes)
{
	const char *fn = "shmcoll_malloc";
	struct shmcoll_heap *h = &n->heap;
	struct shmcoll_task t;
	uint64_t len, off, part = 0, have = 0;
	int rc, i, slot = -1;

	if ((uint64_t)bytes > REQUEST_MAX) {
		shmcoll__node_fail(n, -ENOMEM, "%s: %zu bytes are more than a heap can hold", fn,
		                   bytes);
		return NULL;
	}
	len = ((uint64_t)bytes + HEAP_ALIGN - 1) / HEAP_ALIGN * HEAP_ALIGN;
	off = heap_alloc(h, len);
	if (off == NO_OFF) {
		/* Every rank plans the same segment: the first free slot, the heap doubled. */
		for (i = 0; i < HEAP_PARTS; i++) {
			have += h->part[i].bytes;
			if (slot < 0 && i > 0 && !h->part[i].base)
				slot = i;
		}
		part = (len + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
		if (part < SEGMENT_MIN)
			part = SEGMENT_MIN;
		if (part < have)
			part = (have + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES;
	}
	rc = show(n, &t, fn, KIND_MALLOC, bytes, off, 1);
	if (rc < 0 || (t.i && (off != NO_OFF || t.i < (size_t)n->size))) {
		/* A step failed, or ranks differ on whether there is room (only memory for the
		 * bookkeeping runs out on one rank alone): nobody grows, everyone fails. */
		if (rc == 0)
			shmcoll__node_fail(
			    n, -ENOMEM, "%s: some rank had no memory to note %zu bytes", fn, bytes);
		if (off != NO_OFF) {
			int pi;
			long k = heap_find(h, off, &pi);

			if (k >= 0)
				heap_remove(h, pi, (size_t)k);
		}
		return NULL;
	}
	if (off != NO_OFF)
		return shmcoll__heap_peer(n, n->rank, off, len);
	if (slot < 0) {
		shmcoll__node_fail(
		    n, -ENOMEM, "%s: %zu bytes fit in none of the %d parts of the symmetric heap",
		    fn, bytes, HEAP_PARTS);
		return NULL;
	}
	off = grow(n, fn, slot, part, len, &rc);
	return off == NO_OFF ? NULL : shmcoll__heap_peer(n, n->rank, off, len);
}

int shmcoll__node_free(struct shmcoll_node *n, void *ptr)
{
	const char *fn = "shmcoll_free";
	struct shmcoll_heap *h = &n->heap;
	struct shmcoll_task t;
	uint64_t off = shmcoll__heap_off(n, ptr, 1);
	int rc, part = 0;
	long k = off == NO_OFF ? -1 : heap_find(h, off, &part);

	if (k < 0)
		return shmcoll__node_fail(n, -EINVAL,
		                          "%s: ptr %p did not come from shmcoll_malloc on this "
		                          "communicator",
		                          fn, ptr);
	rc = show(n, &t, fn, KIND_FREE, 0, off, 1);
	if (rc < 0)
		return rc;
	heap_remove(h, part, (size_t)k);
	if (part > 0 && !h->part[part].nblocks)
		shmcoll__heap_drop(h, part);
	return 0;
}
