/* busy.c - busy processes beside a benchmark, and calls timed one by one (busy.h). */
#include "bench/busy.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

extern char **environ;

#define CHILD_FLAG "--hog-child"

void bench_busy_usage(FILE *f, const char *in)
{
	fprintf(f,
	        "%s--hog N           N busy processes beside the job for the whole run, started\n"
	        "%s                  by rank 0, free to run on any CPU (a shared machine)\n"
	        "%s--hog-pin         pin busy process i to CPU i mod CPUs instead\n"
	        "%s--dist            time the calls one by one (still back to back) and add\n"
	        "%s                  p50_us, p99_us (the largest over the ranks), calls and hogs\n"
	        "%s                  to each row; lat_us is then their mean\n"
	        "%s--max-seconds S   with --dist: end a size's timing after about S seconds\n"
	        "%s                  (the ranks agree every %d calls; default 10)\n",
	        in, in, in, in, in, in, in, in, BENCH_DIST_ROUND);
}

int bench_busy_arg(struct bench_busy *b, int argc, char **argv, int *i, int print)
{
	const char *a = argv[*i], *v;
	char *end;
	long n;

	if (!strcmp(a, "--hog-pin")) {
		b->hog_pin = 1;
		return 1;
	}
	if (!strcmp(a, "--dist")) {
		b->dist = 1;
		return 1;
	}
	if (strcmp(a, "--hog") && strcmp(a, "--max-seconds"))
		return 0;
	if (*i + 1 >= argc) {
		if (print)
			fprintf(stderr, "%s: option %s needs a value\n", bench_prog, a);
		return EXIT_USAGE;
	}
	v = argv[++*i];
	if (!strcmp(a, "--hog")) {
		errno = 0;
		n = strtol(v, &end, 10);
		if (errno || end == v || *end || n < 0 || n > BENCH_HOGS_MAX) {
			if (print)
				fprintf(stderr, "%s: bad --hog '%s' (0 to %d)\n", bench_prog, v,
				        BENCH_HOGS_MAX);
			return EXIT_USAGE;
		}
		b->hogs = (int)n;
	} else if (bench_parse_positive(v, &b->max_s)) {
		if (print)
			fprintf(stderr, "%s: bad --max-seconds '%s'\n", bench_prog, v);
		return EXIT_USAGE;
	}
	return 1;
}

void bench_busy_child(int argc, char **argv)
{
	volatile unsigned long spin = 0;
	cpu_set_t set;
	int cpu, n, k;

	if (argc < 4 || strcmp(argv[1], CHILD_FLAG))
		return;
	/* Gone with the rank that started it, however that ends; a parent that died before
	 * the request was made is seen by the check after it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != (pid_t)atol(argv[2]))
		_exit(0);
	cpu = atoi(argv[3]);
	n = get_nprocs_conf();
	CPU_ZERO(&set);
	for (k = 0; k < n && k < CPU_SETSIZE; k++)
		if (cpu < 0 || k == cpu % n)
			CPU_SET(k, &set);
	/* The launcher's binding of the rank is not the hog's: it runs where it is told to, or
	 * anywhere. */
	sched_setaffinity(0, sizeof(set), &set);
	for (;;)
		spin++;
}

int bench_busy_start(struct bench_busy *b)
{
	char ppid[32], cpu[32], *args[5];
	int k, rc;

	for (k = 0; k < b->hogs; k++) {
		snprintf(ppid, sizeof(ppid), "%ld", (long)getpid());
		snprintf(cpu, sizeof(cpu), "%d", b->hog_pin ? k : -1);
		args[0] = (char *)bench_prog;
		args[1] = (char *)CHILD_FLAG;
		args[2] = ppid;
		args[3] = cpu;
		args[4] = NULL;
		rc = posix_spawn(&b->pid[k], "/proc/self/exe", NULL, NULL, args, environ);
		if (rc != 0) {
			fprintf(stderr, "%s: starting busy process %d of %d failed: %s\n",
			        bench_prog, k + 1, b->hogs, strerror(rc));
			bench_busy_stop(b);
			return -1;
		}
		b->started = k + 1;
	}
	return 0;
}

void bench_busy_stop(struct bench_busy *b)
{
	int k;

	for (k = 0; k < b->started; k++)
		kill(b->pid[k], SIGKILL);
	for (k = 0; k < b->started; k++)
		while (waitpid(b->pid[k], NULL, 0) < 0 && errno == EINTR)
			;
	b->started = 0;
}

static int by_value(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* The q-quantile of sorted v[0..n-1], nearest rank. */
static double quantile(const double *v, long n, double q)
{
	long k = (long)(q * (double)n + 0.999999);

	if (k < 1)
		k = 1;
	return v[(k > n ? n : k) - 1];
}

int bench_dist_time(long iters, double max_s, int (*call)(void *ctx),
                    double (*agree)(void *ctx, double elapsed), void *ctx, struct bench_dist *d)
{
	double *t = malloc(sizeof(*t) * (size_t)(iters > 0 ? iters : 1)), start, t0, sum = 0.0;
	long n = 0, end;
	int rc = 0;

	if (!t)
		return -ENOMEM;
	start = bench_now();
	while (n < iters) {
		end = n + BENCH_DIST_ROUND < iters ? n + BENCH_DIST_ROUND : iters;
		for (; n < end; n++) {
			t0 = bench_now();
			rc = call(ctx);
			t[n] = bench_now() - t0;
			if (rc != 0)
				goto out;
			sum += t[n];
		}
		if (n < iters && max_s > 0 && agree(ctx, bench_now() - start) >= max_s)
			break;
	}
	qsort(t, (size_t)n, sizeof(*t), by_value);
	d->calls = n;
	d->mean = sum / (double)n;
	d->p50 = quantile(t, n, 0.50);
	d->p99 = quantile(t, n, 0.99);
	d->max = t[n - 1];
out:
	free(t);
	return rc;
}
