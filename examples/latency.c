/* latency.c - how long one small collective takes, timed the way bench/mpi/mpi-bench.c
 * times MPI: back-to-back calls after a barrier, latency = the largest per-call average over
 * the ranks. A quick probe; bench/shmcoll-bench is the full benchmark. Run it as
 *     shmcoll-run -n P build/examples/latency [BYTES] [ITERS]
 * (float32 sum allreduce, default 8 bytes, 20000 iterations). */
#include <shmcoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int fail(shmcoll_comm *comm, const char *what, int rc)
{
	fprintf(stderr, "latency: %s: %s: %s\n", what, shmcoll_strerror(rc),
	        shmcoll_last_error(comm));
	return 1;
}

int main(int argc, char **argv)
{
	size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 8;
	long iters = argc > 2 ? atol(argv[2]) : 20000, i;
	size_t count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
	float *in = calloc(count, sizeof(float)), *out = calloc(count, sizeof(float));
	double t0, lat, max;
	shmcoll_comm *comm;
	int rc;

	if (!in || !out || iters < 1)
		return 1;
	rc = shmcoll_init(&comm);
	if (rc)
		return fail(NULL, "shmcoll_init", rc);
	for (i = 0; i < iters / 10 + 2; i++) {
		rc = shmcoll_allreduce(in, out, count, SHMCOLL_FLOAT32, SHMCOLL_SUM, comm);
		if (rc)
			return fail(comm, "allreduce", rc);
	}
	rc = shmcoll_barrier(comm);
	if (rc)
		return fail(comm, "barrier", rc);
	t0 = now_us();
	for (i = 0; i < iters; i++)
		shmcoll_allreduce(in, out, count, SHMCOLL_FLOAT32, SHMCOLL_SUM, comm);
	lat = (now_us() - t0) / (double)iters;
	rc = shmcoll_allreduce(&lat, &max, 1, SHMCOLL_FLOAT64, SHMCOLL_MAX, comm);
	if (rc)
		return fail(comm, "allreduce of the timings", rc);
	if (shmcoll_comm_rank(comm) == 0)
		printf("allreduce float32 sum, %zu bytes, %d ranks: %.3f us\n",
		       count * sizeof(float), shmcoll_comm_size(comm), max);
	shmcoll_comm_destroy(comm);
	free(in);
	free(out);
	return 0;
}
