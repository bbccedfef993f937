/* test_symmetric.c - shmcoll_malloc/shmcoll_free: the same offsets on every
 * rank, reuse after free, clear failures, and buffers that peers read in
 * place (a collective on them sees every rank's data). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/api/probe.h"
#include "shm/atomics.h"
#include "tests/harness.h"

static th_opts opts = {.arena_bytes = 1 << 20, .timeout_ms = 60000, .wall_ms = 120000};

static int heap_body(shmcoll_comm *c, int rank, void *arg)
{
	uint8_t *a, *b, *d, *big;
	int32_t *x, *y;
	int P = shmcoll_comm_size(c);
	size_t heap = shmcoll__probe_heap_bytes(c);

	(void)arg;
	a = shmcoll_malloc(c, 1000);
	b = shmcoll_malloc(c, 64);
	if (!a || !b)
		return 1;
	/* Offsets agree across ranks: allgather them and compare. */
	uint64_t off[2] = {shmcoll__probe_heap_off(c, a), shmcoll__probe_heap_off(c, b)},
	         all[2 * 64];
	if (shmcoll_allgather(off, all, 2, SHMCOLL_UINT64, c))
		return 2;
	for (int p = 0; p < shmcoll_comm_size(c); p++)
		if (all[2 * p] != off[0] || all[2 * p + 1] != off[1])
			return 3;
	if ((uintptr_t)a % SHMCOLL_LINE || (uintptr_t)b % SHMCOLL_LINE || b < a + 1000)
		return 4;
	/* Free and reallocate: first fit reuses the lowest gap. */
	if (shmcoll_free(c, a))
		return 5;
	d = shmcoll_malloc(c, 500);
	if (d != a)
		return 6;
	/* Too big for the heap: NULL, a message, and the communicator lives. */
	big = shmcoll_malloc(c, heap + 1);
	if (big || !strstr(shmcoll_last_error(c), "heap"))
		return 7;
	big = shmcoll_malloc(c, heap - 256);
	if (big)
		return 8; /* the two live buffers leave less than that */
	if (shmcoll_malloc(c, 0) || !strstr(shmcoll_last_error(c), "bytes"))
		return 9;
	if (shmcoll_free(c, (uint8_t *)d + 1) != -EINVAL)
		return 10;
	if (shmcoll_free(c, &off) != -EINVAL)
		return 11;
	/* Zero-copy collectives on symmetric buffers. */
	x = shmcoll_malloc(c, 4096 * sizeof(int32_t));
	y = shmcoll_malloc(c, 4096 * sizeof(int32_t));
	if (!x || !y)
		return 12;
	for (int i = 0; i < 4096; i++)
		x[i] = rank * 3 + i;
	if (shmcoll_allreduce(x, y, 4096, SHMCOLL_INT32, SHMCOLL_SUM, c))
		return 13;
	for (int i = 0; i < 4096; i++)
		if (y[i] != 3 * P * (P - 1) / 2 + P * i)
			return 14;
	/* The sources were read in place and are untouched. */
	for (int i = 0; i < 4096; i++)
		if (x[i] != rank * 3 + i)
			return 15;
	if (shmcoll_free(c, x) || shmcoll_free(c, y) || shmcoll_free(c, b) || shmcoll_free(c, d))
		return 16;
	if (shmcoll__probe_heap_blocks(c) != 0)
		return 17;
	return 0;
}

Test(symmetric, malloc_free_and_zero_copy, .timeout = 180)
{
	for (int n = 1; n <= 4; n++) {
		th_result res;

		th_run_ranks(n, heap_body, NULL, &opts, &res);
		cr_assert(res.ok, "P=%d: %s", n, res.summary);
	}
}

static int mismatch_body(shmcoll_comm *c, int rank, void *arg)
{
	(void)arg;
	/* Different sizes on different ranks is a mismatched collective. */
	void *p = shmcoll_malloc(c, rank == 0 ? 256 : 512);

	if (p)
		return 1;
	if (!strstr(shmcoll_last_error(c), "mismatch"))
		return 2;
	return shmcoll_barrier(c) == -ECANCELED ? 0 : 3;
}

Test(symmetric, mismatched_sizes_fail_everywhere, .timeout = 120)
{
	th_result res;

	th_run_ranks(3, mismatch_body, NULL, &opts, &res);
	cr_assert(res.ok, "%s", res.summary);
}
