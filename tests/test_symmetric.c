/* test_symmetric.c - shmcoll_malloc/shmcoll_free: the same offsets on every
 * rank, reuse after free, clear failures, and buffers that peers read in
 * place (a collective on them sees every rank's data). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "shm/atomics.h"
#include "tests/harness.h"

static th_opts opts = {.arena_bytes = 1 << 20, .timeout_ms = 60000, .wall_ms = 120000};

/* Whether /dev/shm lists a heap segment of this user (a name ending in ".h<digits>"). */
static int segments_named(void)
{
	char prefix[64];
	struct dirent *e;
	const char *h;
	int found = 0;
	DIR *d = opendir("/dev/shm");

	snprintf(prefix, sizeof(prefix), "shmcoll.%u.", (unsigned)geteuid());
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		h = strrchr(e->d_name, '.');
		if (!strncmp(e->d_name, prefix, strlen(prefix)) && h && h[1] == 'h' &&
		    h[2] >= '0' && h[2] <= '9')
			found = 1;
	}
	closedir(d);
	return found;
}

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
	/* More than the arena's heap: the heap grows by a segment, at the same offset on
	 * every rank, and the segment's name is gone once every rank has it. */
	big = shmcoll_malloc(c, heap + 1);
	if (!big)
		return 7;
	off[0] = shmcoll__probe_heap_off(c, big);
	if (shmcoll_allgather(off, all, 1, SHMCOLL_UINT64, c))
		return 2;
	for (int p = 0; p < P; p++)
		if (all[p] != off[0])
			return 3;
	if (segments_named())
		return 8;
	memset(big, rank, heap + 1);
	if (shmcoll_free(c, big))
		return 16;
	/* Beyond what the machine has room for: NULL, a message, and the communicator
	 * lives. */
	if (shmcoll_malloc(c, (size_t)1 << 46) || !strstr(shmcoll_last_error(c), "room"))
		return 9;
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

/* A heap that grows: buffers far beyond the arena's heap, in several segments, each read in
 * place by a collective (every rank's data seen), freed in any order and made again. */
static int grow_body(shmcoll_comm *c, int rank, void *arg)
{
	static const size_t sizes[] = {25u << 20, 3u << 20, 9u << 20, 1u << 20};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	int32_t *buf[N], *out;
	int P = shmcoll_comm_size(c);
	size_t k, i, n;

	(void)arg;
	for (k = 0; k < N; k++) {
		buf[k] = shmcoll_malloc(c, sizes[k]);
		if (!buf[k])
			return 1;
		n = sizes[k] / sizeof(int32_t);
		for (i = 0; i < n; i++)
			buf[k][i] = rank + (int32_t)(i % 1000);
	}
	out = malloc(sizes[0]);
	if (!out)
		return 2;
	for (k = 0; k < N; k++) {
		n = sizes[k] / sizeof(int32_t);
		if (shmcoll_allreduce(buf[k], out, n, SHMCOLL_INT32, SHMCOLL_SUM, c))
			return 3;
		for (i = 0; i < n; i++)
			if (out[i] != P * (P - 1) / 2 + P * (int32_t)(i % 1000))
				return 4;
		/* The root's buffer read in place by the others. */
		if (shmcoll_bcast(buf[k], n, SHMCOLL_INT32, P - 1, c))
			return 5;
		for (i = 0; i < n; i++)
			if (buf[k][i] != P - 1 + (int32_t)(i % 1000))
				return 6;
	}
	free(out);
	if (segments_named())
		return 7;
	/* Free in another order than made; a segment is dropped with its last block. */
	if (shmcoll_free(c, buf[1]) || shmcoll_free(c, buf[3]) || shmcoll_free(c, buf[0]))
		return 8;
	buf[0] = shmcoll_malloc(c, 30u << 20);
	if (!buf[0])
		return 9;
	memset(buf[0], 1, 30u << 20);
	if (shmcoll_free(c, buf[0]) || shmcoll_free(c, buf[2]))
		return 10;
	return shmcoll__probe_heap_blocks(c) == 0 ? 0 : 11;
}

Test(symmetric, heap_grows_beyond_the_arena, .timeout = 300)
{
	th_result res;
	int n;

	for (n = 1; n <= 4; n++) {
		th_run_ranks(n, grow_body, NULL, &opts, &res);
		cr_assert(res.ok, "P=%d: %s", n, res.summary);
	}
	th_run_threads(2, grow_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads, P=2: %s", res.summary);
}
