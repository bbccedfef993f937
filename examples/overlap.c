/* overlap.c - data-parallel training's gradient all-reduce overlapped with compute: a
 * simulated backward pass produces gradient buckets one after another, starts a
 * shmcoll_iallreduce on each as soon as it is ready, and goes on computing the next; the
 * optimizer step waits for all of them. Run it as
 *     shmcoll-run -n 2 build/examples/overlap [BUCKETS] [ELEMENTS_PER_BUCKET]
 *
 * Progress: an outstanding operation moves whenever its rank is inside a shmcoll call, so
 * the compute loop calls shmcoll_test on the newest request every few thousand elements
 * (SHMCOLL_PROGRESS_THREAD=1 moves them in the background instead, on machines with a CPU
 * to spare). The same step with blocking shmcoll_allreduce after each bucket is timed for
 * comparison. Gradients are small integers held in float32, so every sum is exact: each
 * result is checked element by element, and any difference ends the job with status 1. */
#include <shmcoll.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int rank, size;
static shmcoll_comm *comm;
static volatile double keep; /* the compute's result, so it is not optimised away */

static void check(int rc, const char *what)
{
	if (rc == 0)
		return;
	fprintf(stderr, "overlap: rank %d: %s: %s (%s)\n", rank, what, shmcoll_strerror(rc),
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

/* The backward pass of one bucket: some arithmetic per element (the "layer"), then the
 * gradient itself. Every poll elements it lets outstanding work move (pending may be NULL). */
static double backward(float *grad, size_t n, int bucket, shmcoll_request **pending, size_t poll)
{
	double acc = 0.0;
	int done;

	for (size_t i = 0; i < n; i++) {
		double x = (double)(i % 977) * 1e-3;

		for (int k = 0; k < 16; k++)
			x = x * 0.999 + 1e-4;
		acc += x;
		grad[i] = (float)((rank + 1) * (int)((i + (size_t)bucket) % 1000));
		if (pending && *pending && poll && i % poll == 0)
			check(shmcoll_test(pending, &done, NULL), "shmcoll_test");
	}
	return acc;
}

static size_t verify(float *const *out, int buckets, size_t n)
{
	size_t bad = 0;

	for (int b = 0; b < buckets; b++)
		for (size_t i = 0; i < n; i++) {
			float want = (float)(size * (size + 1) / 2 * (int)((i + (size_t)b) % 1000));

			if (out[b][i] != want && !bad++)
				fprintf(stderr,
				        "overlap: rank %d: bucket %d element %zu is %g, want %g\n",
				        rank, b, i, (double)out[b][i], (double)want);
		}
	return bad;
}

int main(int argc, char **argv)
{
	int buckets = argc > 1 ? atoi(argv[1]) : 8, b;
	size_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 262144;
	float **grad, **out;
	shmcoll_request **reqs;
	double t0, t_overlap, t_blocking, t_compute, sink = 0.0, tmax[3], t[3];
	uint64_t bad, all_bad;

	check(shmcoll_init(&comm), "shmcoll_init");
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	if (buckets < 1 || buckets > 1024 || !n) {
		fprintf(stderr,
		        "overlap: usage: overlap [BUCKETS 1..1024] [ELEMENTS_PER_BUCKET]\n");
		return 2;
	}
	grad = calloc((size_t)buckets, sizeof(*grad));
	out = calloc((size_t)buckets, sizeof(*out));
	reqs = calloc((size_t)buckets, sizeof(*reqs));
	for (b = 0; grad && out && b < buckets; b++) {
		grad[b] = malloc(n * sizeof(float));
		out[b] = malloc(n * sizeof(float));
		if (!grad[b] || !out[b])
			break;
	}
	if (!grad || !out || !reqs || b < buckets) {
		fprintf(stderr, "overlap: rank %d: out of memory\n", rank);
		return 1;
	}

	/* Compute alone, for reference. */
	check(shmcoll_barrier(comm), "barrier");
	t0 = now();
	for (b = buckets - 1; b >= 0; b--)
		sink += backward(grad[b], n, b, NULL, 0);
	t_compute = now() - t0;

	/* Overlapped: each bucket's all-reduce starts as soon as its gradient is ready. */
	check(shmcoll_barrier(comm), "barrier");
	t0 = now();
	for (b = buckets - 1; b >= 0; b--) {
		sink += backward(grad[b], n, b, b + 1 < buckets ? &reqs[b + 1] : NULL, 4096);
		check(shmcoll_iallreduce(grad[b], out[b], n, SHMCOLL_FLOAT32, SHMCOLL_SUM, comm,
		                         &reqs[b]),
		      "shmcoll_iallreduce");
	}
	check(shmcoll_waitall((size_t)buckets, reqs, NULL), "shmcoll_waitall");
	t_overlap = now() - t0;
	bad = verify(out, buckets, n);

	/* Blocking: compute a bucket, then all-reduce it before going on. */
	check(shmcoll_barrier(comm), "barrier");
	t0 = now();
	for (b = buckets - 1; b >= 0; b--) {
		sink += backward(grad[b], n, b, NULL, 0);
		check(shmcoll_allreduce(grad[b], out[b], n, SHMCOLL_FLOAT32, SHMCOLL_SUM, comm),
		      "shmcoll_allreduce");
	}
	t_blocking = now() - t0;
	bad += verify(out, buckets, n);

	all_bad = bad;
	check(shmcoll_allreduce(&bad, &all_bad, 1, SHMCOLL_UINT64, SHMCOLL_SUM, comm), "verdict");
	t[0] = t_compute;
	t[1] = t_overlap;
	t[2] = t_blocking;
	check(shmcoll_reduce(t, tmax, 3, SHMCOLL_FLOAT64, SHMCOLL_MAX, 0, comm), "timings");
	if (rank == 0)
		printf(
		    "overlap: %d ranks, %d buckets of %zu floats: compute alone %.2f ms, "
		    "overlapped step %.2f ms, blocking step %.2f ms (slowest rank); results %s\n",
		    size, buckets, n, tmax[0] * 1e3, tmax[1] * 1e3, tmax[2] * 1e3,
		    all_bad ? "WRONG" : "exact");
	keep = sink;
	for (b = 0; b < buckets; b++) {
		free(grad[b]);
		free(out[b]);
	}
	free(grad);
	free(out);
	free(reqs);
	check(shmcoll_comm_destroy(comm), "shmcoll_comm_destroy");
	return all_bad ? 1 : 0;
}
