/* mpi-bench.c - the MPI side of every comparison: MPI's collectives timed exactly the way
 * shmcoll-bench's coll mode (bench/coll.c) times shmcoll's, so that the two CSVs join row by
 * row. Built once per MPI found (meson.build here): mpi-bench-ompi, mpi-bench-mpich. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

/* Only the exact test values (values.c) are shmcoll-bench's; no part of the library is linked,
 * so what is timed is the MPI, or the interposer when it is preloaded. */
#include "bench/bench.h"
#include "bench/sweep.h"

#ifndef MPI_BENCH_PROG
#define MPI_BENCH_PROG "mpi-bench"
#endif
#define ME MPI_BENCH_PROG

/* The first CSV column when --impl is not given: the MPI this binary was built for. */
#if defined(OPEN_MPI)
#define DEFAULT_IMPL "ompi"
#elif defined(MPICH)
#define DEFAULT_IMPL "mpich"
#else
#define DEFAULT_IMPL "mpi"
#endif

/* The CSV's convention, fixed: float32 elements, and sum for the reducing ops. */
#define DTYPE     SHMCOLL_FLOAT32
#define MPI_DTYPE MPI_FLOAT
#define ESIZE     sizeof(float)

/* The ops, their order and their names are coll.c's, so that --op all prints the rows in the
 * same order. */

static const char *const mpi_names[OP_COUNT] = {
    "MPI_Allreduce", "MPI_Reduce", "MPI_Bcast",   "MPI_Allgather", "MPI_Reduce_scatter_block",
    "MPI_Alltoall",  "MPI_Gather", "MPI_Scatter", "MPI_Barrier",
};

struct opts {
	int sel; /* one op, or -1 for all */
	int sync;
	int header;
	size_t minb, maxb;
	double iscale;
	const char *impl;
};

struct coll {
	int rank, size;
	void *sbuf, *rbuf;
	struct bench_vals vals; /* the inputs and results of the reducing ops */
};

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: " ME " [OPTIONS]\n"
	        "Time MPI's collectives on MPI_COMM_WORLD the way shmcoll-bench times shmcoll's\n"
	        "(same sizes, iteration counts, validation, timing and CSV); run it under the MPI\n"
	        "it was built for, e.g.\n"
	        "  mpirun.openmpi -np P --bind-to core mpi-bench-ompi [OPTIONS]\n"
	        "  mpiexec.mpich -launcher fork -np P -bind-to core mpi-bench-mpich [OPTIONS]\n"
	        "\n"
	        "  --op NAME|all     allreduce reduce bcast allgather reduce_scatter alltoall\n"
	        "                    gather scatter barrier (default all)\n"
	        "  --min-bytes N     smallest size; K, M, G suffixes (default 4)\n"
	        "  --max-bytes N     largest size (default 64M); sizes double from the smallest\n"
	        "  --sync            a barrier after every call, only the call timed (OSU style);\n"
	        "                    default: back-to-back calls after one barrier (nccl-tests)\n"
	        "  --impl LABEL      first CSV column (default " DEFAULT_IMPL ")\n"
	        "  --iters-scale F   scale the iteration counts (default 1)\n"
	        "  --no-header       leave out the CSV header\n"
	        "  -h, --help        show this help and exit\n"
	        "\n"
	        "Prints impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps (rank 0): float32, sum;\n"
	        "lat_us the largest over the ranks of the per-call average. Sizes take K, M and G\n"
	        "suffixes (powers of 1024). Exit status: 0 done, 1 a failed MPI call or resource,\n"
	        "2 a bad command line, 3 a wrong result.\n");
}

/* Prints "<program>: <message>" and a hint (when print is set); returns EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) static int usage_error(int print, const char *fmt, ...)
{
	va_list ap;

	if (!print)
		return EXIT_USAGE;
	fprintf(stderr, ME ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" ME " --help'.\n");
	return EXIT_USAGE;
}

/* After MPI_Init, on every rank alike; print is set on rank 0 only. 0: run; -1: help was
 * printed; EXIT_USAGE: a bad command line. */
static int parse(int argc, char **argv, struct opts *o, int print)
{
	const char *a, *v;
	int i;

	*o = (struct opts){
	    .sel = -1,
	    .header = 1,
	    .minb = 4,
	    .maxb = (size_t)64 << 20,
	    .iscale = 1.0,
	    .impl = DEFAULT_IMPL,
	};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			if (print)
				usage(stdout);
			return -1;
		} else if (!strcmp(a, "--sync")) {
			o->sync = 1;
		} else if (!strcmp(a, "--no-header")) {
			o->header = 0;
		} else if (!strcmp(a, "--op") || !strcmp(a, "--min-bytes") ||
		           !strcmp(a, "--max-bytes") || !strcmp(a, "--impl") ||
		           !strcmp(a, "--iters-scale")) {
			if (i + 1 >= argc)
				return usage_error(print, "option %s needs a value", a);
			v = argv[++i];
			if (!strcmp(a, "--op")) {
				o->sel = bench_sweep_op(v);
				if (o->sel < 0 && strcmp(v, "all"))
					return usage_error(print, "unknown --op '%s'", v);
			} else if (!strcmp(a, "--min-bytes")) {
				if (bench_parse_size(v, &o->minb))
					return usage_error(print, "bad --min-bytes '%s'", v);
			} else if (!strcmp(a, "--max-bytes")) {
				if (bench_parse_size(v, &o->maxb))
					return usage_error(print, "bad --max-bytes '%s'", v);
			} else if (!strcmp(a, "--impl")) {
				o->impl = v;
			} else if (bench_parse_positive(v, &o->iscale)) {
				return usage_error(print, "bad --iters-scale '%s'", v);
			}
		} else {
			return usage_error(print, "unknown option '%s'", a);
		}
	}
	/* MPI counts are ints: every count of the largest size's buffers must be one. */
	if (o->maxb / ESIZE + 64 > (size_t)INT_MAX)
		return usage_error(print, "--max-bytes %zu is too large: MPI counts are ints",
		                   o->maxb);
	return 0;
}

/* A failed MPI call (the communicator returns errors rather than aborting, so that the message
 * names the op and size): say which, on which rank, why; stop the job. */
__attribute__((cold)) static _Noreturn void call_failed(const struct coll *c, const char *what,
                                                        size_t bytes, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "no description");
	fprintf(stderr, ME ": rank %d: %s (bytes %zu) failed: %d (%s)\n", c->rank, what, bytes, rc,
	        msg);
	MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	exit(EXIT_FAIL);
}

/* count = elements in the "bytes" buffer; ch = count / P for the divided ops, every rank's
 * block (parse made sure both fit an int). */
static inline int run_op(const struct coll *c, int op, size_t count)
{
	int n = (int)count, ch = (int)(count / (size_t)c->size);

	switch (op) {
	case OP_ALLREDUCE:
		return MPI_Allreduce(c->sbuf, c->rbuf, n, MPI_DTYPE, MPI_SUM, MPI_COMM_WORLD);
	case OP_REDUCE:
		return MPI_Reduce(c->sbuf, c->rbuf, n, MPI_DTYPE, MPI_SUM, 0, MPI_COMM_WORLD);
	case OP_BCAST:
		return MPI_Bcast(c->rbuf, n, MPI_DTYPE, 0, MPI_COMM_WORLD);
	case OP_ALLGATHER:
		return MPI_Allgather(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE,
		                     MPI_COMM_WORLD);
	case OP_REDUCE_SCATTER:
		return MPI_Reduce_scatter_block(c->sbuf, c->rbuf, ch, MPI_DTYPE, MPI_SUM,
		                                MPI_COMM_WORLD);
	case OP_ALLTOALL:
		return MPI_Alltoall(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE, MPI_COMM_WORLD);
	case OP_GATHER:
		return MPI_Gather(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE, 0,
		                  MPI_COMM_WORLD);
	case OP_SCATTER:
		return MPI_Scatter(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE, 0,
		                   MPI_COMM_WORLD);
	default:
		return MPI_Barrier(MPI_COMM_WORLD);
	}
}

__attribute__((cold)) static _Noreturn void wrong(const struct coll *c, int op, size_t bytes,
                                                  size_t idx, int64_t want)
{
	char got_s[64], want_s[64];

	bench_elem_format(c->rbuf, idx, DTYPE, got_s, sizeof(got_s));
	bench_value_format(DTYPE, want, want_s, sizeof(want_s));
	fprintf(stderr,
	        "VALIDATION FAILED rank %d op %s (float32 sum) bytes %zu idx %zu got %s want %s\n",
	        c->rank, bench_sweep_ops[op], bytes, idx, got_s, want_s);
	MPI_Abort(MPI_COMM_WORLD, EXIT_INVALID);
	exit(EXIT_INVALID);
}

/* One call with shmcoll-bench's inputs, every output element checked on every rank that gets
 * one (reduce and gather: the root only) against the same exact values. */
static void validate(const struct coll *c, int op, size_t count, size_t bytes)
{
	int64_t want;
	size_t idx;
	int rc;

	bench_sweep_fill(op, DTYPE, &c->vals, c->sbuf, c->rbuf, count, c->rank, c->size);
	rc = run_op(c, op, count);
	if (rc != MPI_SUCCESS)
		call_failed(c, mpi_names[op], bytes, rc);
	if (bench_sweep_check(op, DTYPE, &c->vals, c->rbuf, count, c->rank, c->size, &idx, &want))
		wrong(c, op, bytes, idx, want);
}

/* coll.c's time_size, call for call: warm up, then time iters calls, back to back after one
 * barrier, or (--sync) each call alone with a barrier after it, outside the timed span. Rank 0
 * prints the largest per-call average. */
static void time_size(const struct coll *c, const struct opts *o, int op, size_t bytes,
                      size_t count)
{
	long warm, iters = bench_sweep_iters(bytes, o->iscale, &warm), i;
	double t = 0.0, t0, lat, maxlat = 0.0, alg;
	int rc;

	for (i = 0; i < warm; i++) {
		rc = run_op(c, op, count);
		if (rc != MPI_SUCCESS)
			call_failed(c, mpi_names[op], bytes, rc);
	}
	rc = MPI_Barrier(MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(c, "MPI_Barrier", bytes, rc);
	if (!o->sync) {
		t0 = bench_now();
		for (i = 0; i < iters; i++) {
			rc = run_op(c, op, count);
			if (rc != MPI_SUCCESS)
				call_failed(c, mpi_names[op], bytes, rc);
		}
		t = bench_now() - t0;
	} else {
		for (i = 0; i < iters; i++) {
			t0 = bench_now();
			rc = run_op(c, op, count);
			t += bench_now() - t0;
			if (rc != MPI_SUCCESS)
				call_failed(c, mpi_names[op], bytes, rc);
			rc = MPI_Barrier(MPI_COMM_WORLD);
			if (rc != MPI_SUCCESS)
				call_failed(c, "MPI_Barrier", bytes, rc);
		}
	}
	lat = t / (double)iters * 1e6;
	rc = MPI_Reduce(&lat, &maxlat, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(c, "MPI_Reduce of the timings", bytes, rc);
	if (c->rank == 0) {
		alg = op == OP_BARRIER ? 0.0 : (double)bytes / (maxlat * 1e-6) / 1e9;
		printf("%s,%s,%d,%zu,%.3f,%.4f,%.4f\n", o->impl, bench_sweep_ops[op], c->size,
		       bytes, maxlat, alg, alg * bench_sweep_busbw(op, c->size));
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	struct coll c = {0};
	struct opts o;
	size_t cap, bytes, count;
	int op, rc;

	/* Line by line even into a pipe or file: when one rank fails, the launcher stops the
	 * others, and a table still in a buffer would be lost with them. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = MPI_Init(&argc, &argv);
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, ME ": MPI_Init failed: %d\n", rc);
		return EXIT_FAIL;
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c.size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

	/* Every rank finds the same command line wrong (or asking for help); rank 0 says so, and
	 * the barrier keeps the others from exiting before it has: the launcher stops the job
	 * when the first rank exits with an error. */
	rc = parse(argc, argv, &o, c.rank == 0);
	if (rc != 0) {
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Finalize();
		return rc < 0 ? 0 : rc;
	}
	if (o.minb < ESIZE) /* as coll.c: at least one element */
		o.minb = ESIZE;
	bench_vals_init(&c.vals, DTYPE, SHMCOLL_SUM, c.size);

	/* Both buffers once, big enough for every op at the largest size (64 elements more, as
	 * coll.c), page-aligned and touched before any timing. */
	cap = (o.maxb / ESIZE + 64) * ESIZE;
	if (posix_memalign(&c.sbuf, 4096, cap) != 0 || posix_memalign(&c.rbuf, 4096, cap) != 0) {
		fprintf(stderr, ME ": rank %d: out of memory for two %zu-byte buffers\n", c.rank,
		        cap);
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
		return EXIT_FAIL;
	}
	memset(c.sbuf, 0, cap);
	memset(c.rbuf, 0, cap);

	if (o.header && c.rank == 0)
		printf("impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps\n");
	for (op = 0; op < OP_COUNT; op++) {
		if (o.sel >= 0 && op != o.sel)
			continue;
		for (bytes = op == OP_BARRIER ? 0 : o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(op, bytes, ESIZE, c.size, &count))
				continue;
			if (op != OP_BARRIER)
				validate(&c, op, count, bytes);
			time_size(&c, &o, op, bytes, count);
			if (op == OP_BARRIER)
				break;
		}
	}

	free(c.sbuf);
	free(c.rbuf);
	rc = MPI_Finalize();
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, ME ": rank %d: MPI_Finalize failed: %d\n", c.rank, rc);
		return EXIT_FAIL;
	}
	return 0;
}
