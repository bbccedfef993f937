/* ring_allreduce.c - the classic exercise: an all-reduce written with point-to-point
 * messages, each rank talking only to its neighbours on a ring, then checked against
 * shmcoll_allreduce. Run it as
 *     shmcoll-run -n 4 build/examples/ring_allreduce [ELEMENTS]
 *
 * The vector is cut into P segments (of unequal length when P does not divide it).
 *   1. Reduce-scatter: in step s (0 .. P-2) rank r sends segment (r - s) mod P to rank r+1
 *      and receives segment (r - s - 1) mod P from rank r-1, which it adds to its own.
 *      After P-1 steps rank r holds the full sum of segment (r + 1) mod P.
 *   2. Allgather: in step s rank r sends segment (r + 1 - s) mod P, complete, to rank r+1
 *      and receives segment (r - s) mod P, complete, from rank r-1.
 * Each step is one shmcoll_sendrecv, which never deadlocks however large the segments are.
 * Every rank moves 2 (P-1)/P of the vector, as a ring in MPI does.
 *
 * Integers give the same bits however they are summed, so the int64 result must equal
 * shmcoll_allreduce's exactly; float sums depend on their order (the ring adds rank r+1's
 * contribution to rank r's, shmcoll folds in rank order), so the float32 result is checked
 * to a relative error of 1e-5. Any difference ends the job with status 1. */
#include <shmcoll.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size;
static shmcoll_comm *comm;

static void check(int rc, const char *what)
{
	if (rc == 0)
		return;
	fprintf(stderr, "ring_allreduce: rank %d: %s: %s (%s)\n", rank, what, shmcoll_strerror(rc),
	        shmcoll_last_error(comm));
	shmcoll_comm_abort(comm);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Segment k of n elements cut in size pieces: its first element and its length. */
static size_t seg_start(size_t n, int k)
{
	return n / (size_t)size * (size_t)k +
	       (n % (size_t)size < (size_t)k ? n % (size_t)size : (size_t)k);
}

static size_t seg_len(size_t n, int k)
{
	return seg_start(n, k + 1) - seg_start(n, k);
}

static int mod(int a)
{
	return ((a % size) + size) % size;
}

/* The ring all-reduce of v (n elements of dtype, es bytes each), summing with add(dst, src,
 * count); tmp holds a segment. */
static void ring_allreduce(void *v, size_t n, shmcoll_dtype dtype, size_t es, void *tmp,
                           void (*add)(void *dst, const void *src, size_t count))
{
	uint8_t *b = v;
	int right = mod(rank + 1), left = mod(rank - 1), s, out, in;

	for (s = 0; s < size - 1; s++) {
		out = mod(rank - s);
		in = mod(rank - s - 1);
		check(shmcoll_sendrecv(b + seg_start(n, out) * es, seg_len(n, out), dtype, right, s,
		                       tmp, seg_len(n, in), dtype, left, s, comm, NULL),
		      "reduce-scatter step");
		add(b + seg_start(n, in) * es, tmp, seg_len(n, in));
	}
	for (s = 0; s < size - 1; s++) {
		out = mod(rank + 1 - s);
		in = mod(rank - s);
		check(shmcoll_sendrecv(b + seg_start(n, out) * es, seg_len(n, out), dtype, right,
		                       size + s, b + seg_start(n, in) * es, seg_len(n, in), dtype,
		                       left, size + s, comm, NULL),
		      "allgather step");
	}
}

static void add_i64(void *dst, const void *src, size_t count)
{
	int64_t *d = dst;
	const int64_t *s = src;

	for (size_t i = 0; i < count; i++)
		d[i] += s[i];
}

static void add_f32(void *dst, const void *src, size_t count)
{
	float *d = dst;
	const float *s = src;

	for (size_t i = 0; i < count; i++)
		d[i] += s[i];
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000003, i;
	uint64_t bad = 0, all_bad = 0;
	int64_t *a, *want;
	float *f, *fwant;
	void *tmp;
	double t0, t_ring, t_lib;

	check(shmcoll_init(&comm), "shmcoll_init");
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	a = malloc(n * sizeof(*a));
	want = malloc(n * sizeof(*want));
	f = malloc(n * sizeof(*f));
	fwant = malloc(n * sizeof(*fwant));
	tmp = malloc((n / (size_t)size + 1) * sizeof(int64_t));
	if (!a || !want || !f || !fwant || !tmp) {
		fprintf(stderr, "ring_allreduce: rank %d: out of memory\n", rank);
		return 1;
	}
	for (i = 0; i < n; i++) {
		a[i] = (int64_t)(i * 2654435761u % 1000003) * (rank + 1) - (int64_t)i;
		f[i] = (float)((i % 1000) + 1) * 0.001f * (float)(rank + 1);
	}

	/* int64: exactly shmcoll_allreduce's result. */
	check(shmcoll_allreduce(a, want, n, SHMCOLL_INT64, SHMCOLL_SUM, comm), "shmcoll_allreduce");
	check(shmcoll_barrier(comm), "barrier");
	t0 = now();
	ring_allreduce(a, n, SHMCOLL_INT64, sizeof(*a), tmp, add_i64);
	t_ring = now() - t0;
	for (i = 0; i < n; i++)
		if (a[i] != want[i] && !bad++)
			fprintf(stderr,
			        "ring_allreduce: rank %d: int64 element %zu is %lld, want %lld\n",
			        rank, i, (long long)a[i], (long long)want[i]);

	/* float32: within rounding of shmcoll_allreduce's. */
	check(shmcoll_allreduce(f, fwant, n, SHMCOLL_FLOAT32, SHMCOLL_SUM, comm), "allreduce");
	ring_allreduce(f, n, SHMCOLL_FLOAT32, sizeof(*f), tmp, add_f32);
	for (i = 0; i < n; i++)
		if (fabsf(f[i] - fwant[i]) > 1e-5f * fabsf(fwant[i]) && !bad++)
			fprintf(stderr,
			        "ring_allreduce: rank %d: float32 element %zu is %g, want %g\n",
			        rank, i, (double)f[i], (double)fwant[i]);

	/* For comparison: the library's own allreduce of the same int64 vector. */
	check(shmcoll_barrier(comm), "barrier");
	t0 = now();
	check(shmcoll_allreduce(want, a, n, SHMCOLL_INT64, SHMCOLL_SUM, comm), "shmcoll_allreduce");
	t_lib = now() - t0;

	/* Every rank's verdict, then rank 0 reports. */
	check(shmcoll_allreduce(&bad, &all_bad, 1, SHMCOLL_UINT64, SHMCOLL_SUM, comm), "verdict");
	if (rank == 0)
		printf(
		    "ring_allreduce: %d ranks, %zu int64 elements: %s (ring of sendrecv %.3f ms, "
		    "shmcoll_allreduce %.3f ms); float32 within 1e-5: %s\n",
		    size, n, all_bad ? "MISMATCH" : "equal to shmcoll_allreduce", t_ring * 1e3,
		    t_lib * 1e3, all_bad ? "no" : "yes");
	free(a);
	free(want);
	free(f);
	free(fwant);
	free(tmp);
	check(shmcoll_comm_destroy(comm), "shmcoll_comm_destroy");
	return all_bad ? 1 : 0;
}
