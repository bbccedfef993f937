/* mpi-bench.c - the MPI side of every comparison: MPI timed exactly the way shmcoll-bench
 * times shmcoll, mode for mode, so that the two CSVs join row by row: the collectives (coll,
 * the default: bench/coll.c), point-to-point in OSU's conventions (p2p: bench/p2p.c), the
 * overlap of a non-blocking collective with computation (overlap: bench/overlap.c) and the
 * variable-count collectives against their equal-count forms (vcoll: bench/vcoll.c). Built
 * once per MPI found (meson.build here): mpi-bench-ompi, mpi-bench-mpich. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

/* Only shmcoll-bench's exact test values, checks, options and output (values.c, sweep.c, osu.c,
 * vsweep.c); no part of the library is linked, so what is timed is the MPI, or the interposer when
 * it is preloaded. */
#include "bench/bench.h"
#include "bench/busy.h"
#include "bench/fit.h"
#include "bench/osu.h"
#include "bench/sweep.h"
#include "bench/vsweep.h"

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
	int dirty;
	int header;
	int fit;
	size_t minb, maxb;
	double iscale;
	const char *impl;
	struct bench_busy busy;
};

struct coll {
	int rank, size;
	void *sbuf, *rbuf;
	struct bench_vals vals; /* the inputs and results of the reducing ops */
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: " ME " [MODE] [OPTIONS]\n"
	    "       " ME " --help\n"
	    "Time MPI on MPI_COMM_WORLD the way shmcoll-bench times shmcoll, mode for mode\n"
	    "(same sizes, iteration counts, validation, timing and CSV); run it under the MPI\n"
	    "it was built for, e.g.\n"
	    "  mpirun.openmpi -np P --bind-to core " ME " [MODE] [OPTIONS]\n"
	    "  mpiexec.mpich -launcher fork -np P -bind-to core " ME " [MODE] [OPTIONS]\n"
	    "\n"
	    "Modes (the first argument; coll when left out):\n"
	    "\n"
	    "  " ME " [coll] [OPTIONS]\n"
	    "      The collectives (shmcoll-bench's coll mode).\n"
	    "      --op NAME|all     allreduce reduce bcast allgather reduce_scatter alltoall\n"
	    "                        gather scatter barrier (default all)\n"
	    "      --min-bytes N     smallest size; K, M, G suffixes (default 4)\n"
	    "      --max-bytes N     largest size (default 64M); sizes double from the smallest\n"
	    "      --sync            a barrier after every call, only the call timed (OSU style);\n"
	    "                        default: back-to-back calls after one barrier (nccl-tests)\n"
	    "      --dirty           before every timed call each rank rewrites the buffer it\n"
	    "                        gives (one store a line, outside the timed span), as an\n"
	    "                        application does: a buffer a peer read stays no copy of\n"
	    "                        its cache (default: the same buffer, unchanged)\n"
	    "      --impl LABEL      first CSV column (default " DEFAULT_IMPL ")\n"
	    "      --iters-scale F   scale the iteration counts (default 1)\n"
	    "      --no-header       leave out the CSV header\n");
	bench_busy_usage(f, "      ");
	bench_fit_usage(f, "      ");
	fprintf(
	    f,
	    "      Prints impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps (rank 0): float32,\n"
	    "      sum; lat_us the largest over the ranks of the per-call average.\n"
	    "\n"
	    "  " ME " p2p [OPTIONS]\n"
	    "      Point-to-point between ranks 0 and 1 (the others wait), as osu_latency\n"
	    "      (MPI_Send/MPI_Recv ping-pong, half the round trip), osu_bw (rank 0 posts %d\n"
	    "      MPI_Isend, rank 1 %d MPI_Irecv, MPI_Waitall, a %d-byte ack) and osu_bibw\n"
	    "      (both post %d MPI_Irecv and %d MPI_Isend, MPI_Waitall); shmcoll-bench's p2p.\n",
	    OSU_WINDOW, OSU_WINDOW, OSU_ACK_BYTES, OSU_WINDOW, OSU_WINDOW);
	bench_osu_usage(f, 0, "      ", DEFAULT_IMPL, "buffers from MPI_Alloc_mem");
	fprintf(
	    f,
	    "      Prints impl,test,ranks,bytes,lat_us,bw_GBps (rank 0).\n"
	    "\n"
	    "  " ME " overlap [OPTIONS]\n"
	    "      Overlap of MPI_I<op> with computation, as osu_iallreduce: pure = MPI_I<op> +\n"
	    "      MPI_Wait, compute calibrated to it, total = MPI_I<op> + compute (MPI_Test\n"
	    "      every --test-every units) + MPI_Wait, and the blocking MPI_<op>; shmcoll-\n"
	    "      bench's overlap.\n");
	bench_osu_usage(f, 1, "      ", DEFAULT_IMPL, "buffers from MPI_Alloc_mem");
	fprintf(f,
	        "      Prints impl,op,ranks,bytes,pure_us,compute_us,total_us,overlap_pct,\n"
	        "      blocking_us (rank 0), each the average over the ranks.\n"
	        "\n"
	        "  " ME " vcoll [OPTIONS]\n"
	        "      The variable-count collectives against their equal-count forms at the same\n"
	        "      total bytes (shmcoll-bench's vcoll): MPI_Allgatherv/MPI_Allgather,\n"
	        "      MPI_Gatherv/MPI_Gather, MPI_Scatterv/MPI_Scatter, MPI_Alltoallv/\n"
	        "      MPI_Alltoall, MPI_Reduce_scatter/MPI_Reduce_scatter_block (sum), and\n"
	        "      MPI_Scan and MPI_Exscan against MPI_Allreduce, a reference point. Per size\n"
	        "      both calls are checked, then timed in turn --reps times as the collectives\n"
	        "      mode times a call; the medians are reported.\n");
	bench_vsweep_usage(f, "      ", DEFAULT_IMPL, 1);
	fprintf(f,
	        "      Prints impl,op,ranks,bytes,counts,lat_us,equal_us,ratio (rank 0).\n"
	        "\n"
	        "  -h, --help        show this help and exit\n"
	        "Sizes take K, M and G suffixes (powers of 1024). Exit status: 0 done, 1 a failed\n"
	        "MPI call or resource, 2 a bad command line, 3 a wrong result.\n");
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
	int i, x;

	*o = (struct opts){
	    .sel = -1,
	    .header = 1,
	    .minb = 4,
	    .maxb = (size_t)64 << 20,
	    .iscale = 1.0,
	    .impl = DEFAULT_IMPL,
	    .busy = {.max_s = 10.0},
	};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			if (print)
				usage(stdout);
			return -1;
		} else if (!strcmp(a, "--sync")) {
			o->sync = 1;
		} else if (!strcmp(a, "--dirty")) {
			o->dirty = 1;
		} else if (!strcmp(a, "--no-header")) {
			o->header = 0;
		} else if (!strcmp(a, "--fit")) {
			o->fit = 1;
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
		} else if ((x = bench_busy_arg(&o->busy, argc, argv, &i, print)) != 0) {
			if (x != 1)
				return EXIT_USAGE;
		} else {
			return usage_error(print, "unknown option '%s' in the collectives mode", a);
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
__attribute__((cold)) static _Noreturn void call_failed(int rank, const char *what, size_t bytes,
                                                        int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "no description");
	fprintf(stderr, ME ": rank %d: %s (bytes %zu) failed: %d (%s)\n", rank, what, bytes, rc,
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
		call_failed(c->rank, mpi_names[op], bytes, rc);
	if (bench_sweep_check(op, DTYPE, &c->vals, c->rbuf, count, c->rank, c->size, &idx, &want))
		wrong(c, op, bytes, idx, want);
}

/* coll.c's --dist, call for call. */
struct dist_call {
	const struct coll *c;
	int op;
	size_t count;
};

static int dist_call(void *ctx)
{
	const struct dist_call *d = ctx;

	return run_op(d->c, d->op, d->count);
}

static double dist_agree(void *ctx, double elapsed)
{
	const struct dist_call *d = ctx;
	double most = elapsed;
	int rc = MPI_Allreduce(&elapsed, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

	if (rc != MPI_SUCCESS)
		call_failed(d->c->rank, "MPI_Allreduce of the elapsed time", 0, rc);
	return most;
}

/* Returns rank 0's row's mean latency (what --fit fits; 0 elsewhere). */
static double time_dist(const struct coll *c, const struct opts *o, int op, size_t bytes,
                        size_t count, long iters)
{
	struct dist_call dc = {c, op, count};
	struct bench_dist d;
	double mine[3], most[3] = {0}, alg;
	int rc = bench_dist_time(iters, o->busy.max_s, dist_call, dist_agree, &dc, &d);

	if (rc == -ENOMEM) {
		fprintf(stderr, ME ": rank %d: out of memory for the per-call times\n", c->rank);
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	}
	if (rc != 0)
		call_failed(c->rank, mpi_names[op], bytes, rc);
	mine[0] = d.mean * 1e6;
	mine[1] = d.p50 * 1e6;
	mine[2] = d.p99 * 1e6;
	rc = MPI_Reduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(c->rank, "MPI_Reduce of the timings", bytes, rc);
	if (c->rank == 0) {
		alg = op == OP_BARRIER ? 0.0 : (double)bytes / (most[0] * 1e-6) / 1e9;
		printf("%s,%s,%d,%zu,%.3f,%.4f,%.4f,%.3f,%.3f,%ld,%d\n", o->impl,
		       bench_sweep_ops[op], c->size, bytes, most[0], alg,
		       alg * bench_sweep_busbw(op, c->size), most[1], most[2], d.calls,
		       o->busy.hogs);
		fflush(stdout);
	}
	return most[0];
}

/* coll.c's time_size, call for call: warm up, then time iters calls, back to back after one
 * barrier, or (--sync) each call alone with a barrier after it, outside the timed span. Rank 0
 * prints the largest per-call average and returns it in microseconds (0 on the other ranks). */
static double time_size(const struct coll *c, const struct opts *o, int op, size_t bytes,
                        size_t count)
{
	long warm, iters = bench_sweep_iters(bytes, o->iscale, &warm), i;
	double t = 0.0, t0, lat, maxlat = 0.0, alg, spent = 0.0;
	int in_rbuf = 0;
	size_t src_len =
	    o->dirty ? bench_sweep_src(op, count, ESIZE, c->rank, c->size, &in_rbuf) : 0;
	void *src = in_rbuf ? c->rbuf : c->sbuf;
	int rc;

	for (i = 0; i < warm; i++) {
		rc = run_op(c, op, count);
		if (rc != MPI_SUCCESS)
			call_failed(c->rank, mpi_names[op], bytes, rc);
	}
	rc = MPI_Barrier(MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(c->rank, "MPI_Barrier", bytes, rc);
	if (o->busy.dist)
		return time_dist(c, o, op, bytes, count, iters);
	if (!o->sync) {
		t0 = bench_now();
		for (i = 0; i < iters; i++) {
			if (src_len)
				spent += bench_sweep_dirty(src, src_len);
			rc = run_op(c, op, count);
			if (rc != MPI_SUCCESS)
				call_failed(c->rank, mpi_names[op], bytes, rc);
		}
		t = bench_now() - t0 - spent;
	} else {
		for (i = 0; i < iters; i++) {
			if (src_len)
				bench_sweep_dirty(src, src_len);
			t0 = bench_now();
			rc = run_op(c, op, count);
			t += bench_now() - t0;
			if (rc != MPI_SUCCESS)
				call_failed(c->rank, mpi_names[op], bytes, rc);
			rc = MPI_Barrier(MPI_COMM_WORLD);
			if (rc != MPI_SUCCESS)
				call_failed(c->rank, "MPI_Barrier", bytes, rc);
		}
	}
	lat = t / (double)iters * 1e6;
	rc = MPI_Reduce(&lat, &maxlat, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(c->rank, "MPI_Reduce of the timings", bytes, rc);
	if (c->rank == 0) {
		alg = op == OP_BARRIER ? 0.0 : (double)bytes / (maxlat * 1e-6) / 1e9;
		printf("%s,%s,%d,%zu,%.3f,%.4f,%.4f\n", o->impl, bench_sweep_ops[op], c->size,
		       bytes, maxlat, alg, alg * bench_sweep_busbw(op, c->size));
		fflush(stdout);
	}
	return maxlat;
}

/* coll.c's print_fit: after an op's sweep (rank 0), its fit row or why there is none. */
static void print_fit(const struct coll *c, const struct opts *o, int op,
                      const struct bench_fit_pts *p)
{
	struct bench_fit f;
	char row[256];

	if (bench_fit_line(p->bytes, p->lat_us, p->n, &f) != 0) {
		fprintf(stderr, ME ": --fit: no fit for %s at P=%d: %d size%s measured\n",
		        bench_sweep_ops[op], c->size, p->n, p->n == 1 ? "" : "s");
		return;
	}
	bench_fit_row(row, sizeof(row), o->impl, bench_sweep_ops[op], c->size, &f);
	fputs(row, stdout);
	fflush(stdout);
}

/* The modes: after MPI_Init, with the command line from the mode on (argv[0]). Each returns the
 * exit status; a command line that every rank found wrong (or --help) returns at once on every
 * rank, and main's barrier keeps the others from exiting before rank 0 has said why: the
 * launcher stops the job when the first rank exits with an error. */
static int coll_main(int argc, char **argv, int rank, int size)
{
	struct coll c = {.rank = rank, .size = size};
	struct bench_fit_pts pts;
	struct opts o;
	size_t cap, bytes, count;
	int op, rc;
	double lat;

	rc = parse(argc, argv, &o, c.rank == 0);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (o.minb < ESIZE) /* as coll.c: at least one element */
		o.minb = ESIZE;
	if (o.dirty && o.busy.dist)
		return usage_error(c.rank == 0, "--dirty rewrites buffers between timed spans, "
		                                "which --dist leaves none");
	/* coll.c's refusals of --fit, before anything is timed. */
	if (o.fit && o.sel == OP_BARRIER)
		return usage_error(c.rank == 0, "--fit needs an op with a size; barrier has none");
	if (o.fit && bench_fit_sizes(o.minb, o.maxb) < 2)
		return usage_error(
		    c.rank == 0,
		    "--fit needs at least 2 sizes, and --min-bytes %zu --max-bytes %zu make %d",
		    o.minb, o.maxb, bench_fit_sizes(o.minb, o.maxb));
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

	if (c.rank == 0 && o.busy.hogs && bench_busy_start(&o.busy) < 0) {
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
		return EXIT_FAIL;
	}
	if (o.header && c.rank == 0)
		printf("impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps%s\n%s",
		       o.busy.dist ? ",p50_us,p99_us,calls,hogs" : "",
		       o.fit ? bench_fit_header : "");
	for (op = 0; op < OP_COUNT; op++) {
		if (o.sel >= 0 && op != o.sel)
			continue;
		pts.n = 0;
		for (bytes = op == OP_BARRIER ? 0 : o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(op, bytes, ESIZE, c.size, &count))
				continue;
			if (op != OP_BARRIER)
				validate(&c, op, count, bytes);
			lat = time_size(&c, &o, op, bytes, count);
			if (op == OP_BARRIER)
				break;
			bench_fit_add(&pts, bytes, lat);
		}
		if (o.fit && op != OP_BARRIER && c.rank == 0)
			print_fit(&c, &o, op, &pts);
	}

	bench_busy_stop(&o.busy);
	free(c.sbuf);
	free(c.rbuf);
	return 0;
}

/* ---- p2p: shmcoll-bench's p2p mode (bench/p2p.c), call for call ---- */

struct p2p {
	int rank, size, peer;
	const struct bench_osu_opts *o;
	uint8_t *sbuf, *rbuf;
	uint8_t ack[64], sync_s[64], sync_r[64];
	MPI_Request req[2 * OSU_WINDOW];
	MPI_Status st[2 * OSU_WINDOW];
};

/* A wrong message: said here, by its receiver; the pair then stops together (pair_sync).
 * Returns 1. */
__attribute__((cold)) static int p2p_wrong(const struct p2p *p, int test, size_t bytes,
                                           const char *what)
{
	fprintf(stderr, "VALIDATION FAILED rank %d p2p %s bytes %zu: %s\n", p->rank,
	        bench_osu_tests[test], bytes, what);
	return 1;
}

/* The receiver's checks: the status of a receive, and the data that arrived in rbuf. */
static int p2p_check_status(const struct p2p *p, int test, size_t bytes, MPI_Status *st)
{
	char msg[160];
	int n = -1;

	MPI_Get_count(st, MPI_CHAR, &n);
	if (st->MPI_SOURCE != p->peer || st->MPI_TAG != OSU_TAG_DATA || n != (int)bytes) {
		snprintf(msg, sizeof(msg), "status says source %d tag %d, %d bytes", st->MPI_SOURCE,
		         st->MPI_TAG, n);
		return p2p_wrong(p, test, bytes, msg);
	}
	return 0;
}

static int p2p_check_data(const struct p2p *p, int test, size_t bytes)
{
	unsigned got, want;
	size_t idx;
	char msg[160];

	if (bytes && bench_osu_fault("p2p"))
		p->rbuf[bytes / 2] ^= 0x40;
	if (bench_osu_check(p->rbuf, bytes, p->peer, &idx, &got, &want)) {
		snprintf(msg, sizeof(msg), "byte %zu is 0x%02x, want 0x%02x", idx, got, want);
		return p2p_wrong(p, test, bytes, msg);
	}
	return 0;
}

/* Ranks 0 and 1 meet (the others are not involved: OSU's barrier before each size), each
 * bringing a flag; returns whether either raised it. */
static int pair_sync(struct p2p *p, size_t bytes, int flag)
{
	int rc;

	p->sync_s[0] = (uint8_t)flag;
	rc = MPI_Sendrecv(p->sync_s, 1, MPI_CHAR, p->peer, OSU_TAG_SYNC, p->sync_r, 1, MPI_CHAR,
	                  p->peer, OSU_TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		call_failed(p->rank, "MPI_Sendrecv (the pair's sync)", bytes, rc);
	return flag || p->sync_r[0];
}

static inline void ping_pong(struct p2p *p, size_t bytes, MPI_Status *st)
{
	int n = (int)bytes, rc;

	if (p->rank == 0) {
		rc = MPI_Send(p->sbuf, n, MPI_CHAR, 1, OSU_TAG_DATA, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, "MPI_Send", bytes, rc);
		rc = MPI_Recv(p->rbuf, n, MPI_CHAR, 1, OSU_TAG_DATA, MPI_COMM_WORLD, st);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, "MPI_Recv", bytes, rc);
	} else {
		rc = MPI_Recv(p->rbuf, n, MPI_CHAR, 0, OSU_TAG_DATA, MPI_COMM_WORLD, st);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, "MPI_Recv", bytes, rc);
		rc = MPI_Send(p->sbuf, n, MPI_CHAR, 0, OSU_TAG_DATA, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, "MPI_Send", bytes, rc);
	}
}

static inline void bw_window(struct p2p *p, size_t bytes)
{
	int n = (int)bytes, j, rc;

	for (j = 0; j < OSU_WINDOW; j++) {
		if (p->rank == 0)
			rc = MPI_Isend(p->sbuf, n, MPI_CHAR, 1, OSU_TAG_DATA, MPI_COMM_WORLD,
			               &p->req[j]);
		else
			rc = MPI_Irecv(p->rbuf, n, MPI_CHAR, 0, OSU_TAG_DATA, MPI_COMM_WORLD,
			               &p->req[j]);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, p->rank == 0 ? "MPI_Isend" : "MPI_Irecv", bytes, rc);
	}
	rc = MPI_Waitall(OSU_WINDOW, p->req, p->st);
	if (rc != MPI_SUCCESS)
		call_failed(p->rank, "MPI_Waitall", bytes, rc);
	if (p->rank == 0)
		rc = MPI_Recv(p->ack, OSU_ACK_BYTES, MPI_CHAR, 1, OSU_TAG_ACK, MPI_COMM_WORLD,
		              MPI_STATUS_IGNORE);
	else
		rc = MPI_Send(p->ack, OSU_ACK_BYTES, MPI_CHAR, 0, OSU_TAG_ACK, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(p->rank, p->rank == 0 ? "MPI_Recv of the ack" : "MPI_Send of the ack",
		            bytes, rc);
}

static inline void bibw_window(struct p2p *p, size_t bytes)
{
	int n = (int)bytes, j, rc;

	for (j = 0; j < OSU_WINDOW; j++) {
		rc = MPI_Irecv(p->rbuf, n, MPI_CHAR, p->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
		               &p->req[j]);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, "MPI_Irecv", bytes, rc);
	}
	for (j = 0; j < OSU_WINDOW; j++) {
		rc = MPI_Isend(p->sbuf, n, MPI_CHAR, p->peer, OSU_TAG_DATA, MPI_COMM_WORLD,
		               &p->req[OSU_WINDOW + j]);
		if (rc != MPI_SUCCESS)
			call_failed(p->rank, "MPI_Isend", bytes, rc);
	}
	rc = MPI_Waitall(2 * OSU_WINDOW, p->req, p->st);
	if (rc != MPI_SUCCESS)
		call_failed(p->rank, "MPI_Waitall", bytes, rc);
}

/* p2p.c's validate: 1 if anything was wrong (said on stderr). */
static int p2p_validate(struct p2p *p, int test, size_t bytes)
{
	MPI_Status st;
	int j, rc, bad = 0;

	bench_osu_fill(p->sbuf, bytes, p->rank);
	bench_osu_spoil(p->rbuf, bytes, p->peer);
	switch (test) {
	case OSU_LATENCY:
		if (p->rank == 0) {
			ping_pong(p, bytes, &st);
			bad =
			    p2p_check_status(p, test, bytes, &st) || p2p_check_data(p, test, bytes);
		} else {
			rc = MPI_Recv(p->rbuf, (int)bytes, MPI_CHAR, 0, OSU_TAG_DATA,
			              MPI_COMM_WORLD, &st);
			if (rc != MPI_SUCCESS)
				call_failed(p->rank, "MPI_Recv", bytes, rc);
			bad =
			    p2p_check_status(p, test, bytes, &st) || p2p_check_data(p, test, bytes);
			rc = MPI_Send(p->sbuf, (int)bytes, MPI_CHAR, 0, OSU_TAG_DATA,
			              MPI_COMM_WORLD);
			if (rc != MPI_SUCCESS)
				call_failed(p->rank, "MPI_Send", bytes, rc);
		}
		break;
	case OSU_BW:
		bw_window(p, bytes);
		for (j = 0; p->rank == 1 && j < OSU_WINDOW && !bad; j++)
			bad = p2p_check_status(p, test, bytes, &p->st[j]);
		if (p->rank == 1 && !bad)
			bad = p2p_check_data(p, test, bytes);
		break;
	default:
		bibw_window(p, bytes);
		for (j = 0; j < OSU_WINDOW && !bad; j++)
			bad = p2p_check_status(p, test, bytes, &p->st[j]);
		if (!bad)
			bad = p2p_check_data(p, test, bytes);
		break;
	}
	return bad;
}

static double p2p_time(struct p2p *p, int test, size_t bytes, long *iters)
{
	long warm, i;
	double t0 = 0.0;

	*iters = bench_osu_iters(test, bytes, p->o->iscale, &warm);
	for (i = 0; i < warm + *iters; i++) {
		if (i == warm)
			t0 = bench_now();
		if (test == OSU_LATENCY)
			ping_pong(p, bytes, MPI_STATUS_IGNORE);
		else if (test == OSU_BW)
			bw_window(p, bytes);
		else
			bibw_window(p, bytes);
	}
	return bench_now() - t0;
}

/* Both buffers of a mode, page-aligned (MPI_Alloc_mem's alignment with --symmetric) and
 * touched before any timing. */
static int alloc_two(int rank, int symmetric, size_t bytes, void **a, void **b)
{
	*a = *b = NULL;
	if (symmetric) {
		if (MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, a) != MPI_SUCCESS ||
		    MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, b) != MPI_SUCCESS) {
			fprintf(stderr, ME ": rank %d: MPI_Alloc_mem(%zu) failed\n", rank, bytes);
			return -1;
		}
	} else if (posix_memalign(a, 4096, bytes) != 0 || posix_memalign(b, 4096, bytes) != 0) {
		fprintf(stderr, ME ": rank %d: out of memory for two %zu-byte buffers\n", rank,
		        bytes);
		return -1;
	}
	memset(*a, 0, bytes);
	memset(*b, 0, bytes);
	return 0;
}

static void free_two(int symmetric, void *a, void *b)
{
	if (symmetric) {
		MPI_Free_mem(a);
		MPI_Free_mem(b);
	} else {
		free(a);
		free(b);
	}
}

/* Parses a mode of osu.c; prints the help or the error on rank 0. 0 to run, else the status. */
static int osu_parse(int overlap, int argc, char **argv, struct bench_osu_opts *o, int rank)
{
	char err[256];
	int rc = bench_osu_parse(overlap, argc, argv, DEFAULT_IMPL, o, err, sizeof(err));

	if (rc < 0) {
		if (rank == 0)
			usage(stdout);
		return -1;
	}
	if (rc != 0)
		return usage_error(rank == 0, "%s", err);
	return 0;
}

static int p2p_main(int argc, char **argv, int rank, int size)
{
	struct bench_osu_opts o;
	struct bench_osu_rows rows = {0};
	struct bench_out out = {.print = rank == 0};
	struct p2p p = {.rank = rank, .size = size, .peer = rank == 0 ? 1 : 0, .o = &o};
	void *sb, *rb;
	size_t cap, bytes;
	long iters;
	double t, lat, bw;
	int rc, test, status = 0;

	rc = osu_parse(0, argc, argv, &o, rank);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (size < 2)
		return usage_error(rank == 0,
		                   "p2p: needs at least 2 ranks (mpirun -np 2 " ME " p2p ...)");
	if (bench_out_open(&out, o.csv, rank == 0) < 0)
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	cap = (o.maxb + 4095) / 4096 * 4096;
	if (cap == 0)
		cap = 4096;
	if (alloc_two(rank, o.symmetric, cap, &sb, &rb) < 0)
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	p.sbuf = sb;
	p.rbuf = rb;

	if (o.header)
		bench_osu_header(&out, 0);
	for (test = 0; rank < 2 && test < OSU_NTESTS && !status; test++) {
		if (o.test >= 0 && o.test != test)
			continue;
		for (bytes = o.minb; bytes <= o.maxb; bytes = bench_osu_next(bytes)) {
			if (pair_sync(&p, bytes, p2p_validate(&p, test, bytes))) {
				status = EXIT_INVALID;
				break;
			}
			t = p2p_time(&p, test, bytes, &iters);
			if (rank != 0)
				continue;
			if (test == OSU_LATENCY) {
				lat = t * 1e6 / (2.0 * (double)iters);
				bw = lat > 0 ? (double)bytes / (lat * 1e-6) / 1e9 : 0.0;
			} else {
				lat = t * 1e6 / ((double)iters * OSU_WINDOW);
				bw = (double)bytes * (test == OSU_BIBW ? 2.0 : 1.0) * OSU_WINDOW *
				     (double)iters / t / 1e9;
			}
			if (bench_osu_p2p_row(&out, &rows, o.impl, test, size, bytes, lat, bw) < 0)
				MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
		}
	}
	rc = MPI_Barrier(MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(rank, "MPI_Barrier at the end", 0, rc);
	free_two(o.symmetric, p.sbuf, p.rbuf);
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (rank == 0 && o.plot && !status && bench_osu_plot(o.plot, 0, o.impl, size, &rows, 0) < 0)
		status = EXIT_FAIL;
	bench_osu_rows_free(&rows);
	return status;
}

/* ---- overlap: shmcoll-bench's overlap mode (bench/overlap.c), call for call ---- */

static const char *const mpi_inames[OP_COUNT] = {
    "MPI_Iallreduce", "MPI_Ireduce", "MPI_Ibcast",   "MPI_Iallgather", "MPI_Ireduce_scatter_block",
    "MPI_Ialltoall",  "MPI_Igather", "MPI_Iscatter", "MPI_Ibarrier",
};

struct ovl {
	struct coll c; /* the buffers, values and run_op of the collectives mode */
	const struct bench_osu_opts *o;
	struct bench_compute comp;
};

static inline int start_op(const struct coll *c, int op, size_t count, MPI_Request *req)
{
	int n = (int)count, ch = (int)(count / (size_t)c->size);

	switch (op) {
	case OP_ALLREDUCE:
		return MPI_Iallreduce(c->sbuf, c->rbuf, n, MPI_DTYPE, MPI_SUM, MPI_COMM_WORLD, req);
	case OP_REDUCE:
		return MPI_Ireduce(c->sbuf, c->rbuf, n, MPI_DTYPE, MPI_SUM, 0, MPI_COMM_WORLD, req);
	case OP_BCAST:
		return MPI_Ibcast(c->rbuf, n, MPI_DTYPE, 0, MPI_COMM_WORLD, req);
	case OP_ALLGATHER:
		return MPI_Iallgather(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE,
		                      MPI_COMM_WORLD, req);
	case OP_REDUCE_SCATTER:
		return MPI_Ireduce_scatter_block(c->sbuf, c->rbuf, ch, MPI_DTYPE, MPI_SUM,
		                                 MPI_COMM_WORLD, req);
	case OP_ALLTOALL:
		return MPI_Ialltoall(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE, MPI_COMM_WORLD,
		                     req);
	case OP_GATHER:
		return MPI_Igather(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE, 0,
		                   MPI_COMM_WORLD, req);
	case OP_SCATTER:
		return MPI_Iscatter(c->sbuf, ch, MPI_DTYPE, c->rbuf, ch, MPI_DTYPE, 0,
		                    MPI_COMM_WORLD, req);
	default:
		return MPI_Ibarrier(MPI_COMM_WORLD, req);
	}
}

static void ovl_barrier(const struct ovl *v, size_t bytes)
{
	int rc = MPI_Barrier(MPI_COMM_WORLD);

	if (rc != MPI_SUCCESS)
		call_failed(v->c.rank, "MPI_Barrier", bytes, rc);
}

static void ovl_start(const struct ovl *v, int op, size_t count, size_t bytes, MPI_Request *req)
{
	int rc = start_op(&v->c, op, count, req);

	if (rc != MPI_SUCCESS)
		call_failed(v->c.rank, mpi_inames[op], bytes, rc);
}

static void ovl_wait(const struct ovl *v, size_t bytes, MPI_Request *req)
{
	int rc = MPI_Wait(req, MPI_STATUS_IGNORE);

	if (rc != MPI_SUCCESS)
		call_failed(v->c.rank, "MPI_Wait", bytes, rc);
}

/* overlap.c's validate: every rank checks its output, then they agree; 1 if any was wrong. */
static int ovl_validate(const struct ovl *v, int op, size_t count, size_t bytes)
{
	const struct coll *c = &v->c;
	MPI_Request req;
	char got_s[64], want_s[64];
	int64_t want;
	size_t idx;
	int bad = 0, any = 0, rc;

	bench_sweep_fill(op, DTYPE, &c->vals, c->sbuf, c->rbuf, count, c->rank, c->size);
	ovl_start(v, op, count, bytes, &req);
	ovl_wait(v, bytes, &req);
	if (count && bench_osu_fault("overlap") && c->rank == c->size - 1)
		bench_elem_store(c->rbuf, 0, DTYPE, 12345);
	if (bench_sweep_check(op, DTYPE, &c->vals, c->rbuf, count, c->rank, c->size, &idx, &want)) {
		bench_elem_format(c->rbuf, idx, DTYPE, got_s, sizeof(got_s));
		bench_value_format(DTYPE, want, want_s, sizeof(want_s));
		fprintf(stderr,
		        "VALIDATION FAILED rank %d op i%s (float32 sum) bytes %zu idx %zu got %s "
		        "want %s\n",
		        c->rank, bench_sweep_ops[op], bytes, idx, got_s, want_s);
		bad = 1;
	}
	rc = MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(c->rank, "MPI_Allreduce of the checks", bytes, rc);
	return any;
}

static void ovl_compute(struct ovl *v, size_t bytes, long units, MPI_Request *req)
{
	long every = v->o->test_every, k, n;
	int done = 0, rc;

	if (every <= 0) {
		bench_compute_run(&v->comp, units);
		return;
	}
	for (k = 0; k < units; k += n) {
		n = units - k < every ? units - k : every;
		bench_compute_run(&v->comp, n);
		if (!done) {
			rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
			if (rc != MPI_SUCCESS)
				call_failed(v->c.rank, "MPI_Test", bytes, rc);
		}
	}
}

/* overlap.c's time_size: this rank's averages (us) of pure, compute, total and blocking. */
static void ovl_time(struct ovl *v, int op, size_t bytes, size_t count, double t[4])
{
	MPI_Request req;
	long warm, iters = bench_osu_iters(OSU_OVERLAP, bytes, v->o->iscale, &warm), i, units;
	double t0, tc, sum[4] = {0}, target = 0.0;
	int rc;

	ovl_barrier(v, bytes);
	for (i = 0; i < warm + iters; i++) {
		t0 = bench_now();
		ovl_start(v, op, count, bytes, &req);
		ovl_wait(v, bytes, &req);
		if (i >= warm)
			sum[0] += bench_now() - t0;
		ovl_barrier(v, bytes);
	}
	for (i = 0; i < warm + iters; i++) {
		t0 = bench_now();
		rc = run_op(&v->c, op, count);
		if (rc != MPI_SUCCESS)
			call_failed(v->c.rank, mpi_names[op], bytes, rc);
		if (i >= warm)
			sum[3] += bench_now() - t0;
		ovl_barrier(v, bytes);
	}
	t0 = sum[0] / (double)iters;
	rc = MPI_Allreduce(&t0, &target, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(v->c.rank, "MPI_Allreduce of the pure times", bytes, rc);
	units = bench_compute_calibrate(&v->comp, target / (double)v->c.size);
	ovl_barrier(v, bytes);
	for (i = 0; i < warm + iters; i++) {
		t0 = bench_now();
		ovl_start(v, op, count, bytes, &req);
		tc = bench_now();
		ovl_compute(v, bytes, units, &req);
		tc = bench_now() - tc;
		ovl_wait(v, bytes, &req);
		if (i >= warm) {
			sum[2] += bench_now() - t0;
			sum[1] += tc;
		}
		ovl_barrier(v, bytes);
	}
	for (i = 0; i < 4; i++)
		t[i] = sum[i] / (double)iters * 1e6;
}

static int overlap_main(int argc, char **argv, int rank, int size)
{
	struct bench_osu_opts o;
	struct bench_osu_rows rows = {0};
	struct bench_out out = {.print = rank == 0};
	struct ovl v = {.c = {.rank = rank, .size = size}, .o = &o};
	size_t cap, bytes, count;
	double t[4], sum[4], row[5];
	int rc, op, i, status = 0;

	rc = osu_parse(1, argc, argv, &o, rank);
	if (rc != 0)
		return rc < 0 ? 0 : rc;
	if (bench_out_open(&out, o.csv, rank == 0) < 0)
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	bench_vals_init(&v.c.vals, DTYPE, SHMCOLL_SUM, size);
	bench_compute_init(&v.comp);
	cap = (o.maxb / ESIZE + 64) * ESIZE;
	if (alloc_two(rank, o.symmetric, cap, &v.c.sbuf, &v.c.rbuf) < 0)
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);

	if (o.header)
		bench_osu_header(&out, 1);
	for (op = 0; op < OP_COUNT && !status; op++) {
		if (o.op >= 0 && op != o.op)
			continue;
		for (bytes = op == OP_BARRIER ? 0 : o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(op, bytes, ESIZE, size, &count))
				continue;
			if (op != OP_BARRIER && ovl_validate(&v, op, count, bytes)) {
				status = EXIT_INVALID;
				break;
			}
			ovl_time(&v, op, bytes, count, t);
			rc = MPI_Reduce(t, sum, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
			if (rc != MPI_SUCCESS)
				call_failed(rank, "MPI_Reduce of the timings", bytes, rc);
			if (rank == 0) {
				for (i = 0; i < 4; i++)
					sum[i] /= (double)size;
				row[0] = sum[0];
				row[1] = sum[1];
				row[2] = sum[2];
				row[3] = bench_osu_overlap_pct(sum[0], sum[1], sum[2]);
				row[4] = sum[3];
				if (bench_osu_overlap_row(&out, &rows, o.impl, op, size, bytes,
				                          row) < 0)
					MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
			}
			if (op == OP_BARRIER)
				break;
		}
	}
	free_two(o.symmetric, v.c.sbuf, v.c.rbuf);
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (rank == 0 && !status) {
		bench_osu_ratio_summary(&rows, o.impl);
		if (o.plot && bench_osu_plot(o.plot, 1, o.impl, size, &rows, o.test_every) < 0)
			status = EXIT_FAIL;
	}
	bench_osu_rows_free(&rows);
	return status;
}

/* ---- vcoll: shmcoll-bench's vcoll mode (bench/vcoll.c), call for call ---- */

static const char *const mpi_vnames[V_COUNT] = {
    "MPI_Allgatherv",     "MPI_Gatherv", "MPI_Scatterv", "MPI_Alltoallv",
    "MPI_Reduce_scatter", "MPI_Scan",    "MPI_Exscan",
};

struct vmpi {
	int rank, size;
	const struct bench_vsweep_opts *o;
	void *sbuf, *rbuf;
	MPI_Datatype type;
	struct bench_vals vals;
	struct bench_vsweep_call call;
	/* The call's counts and displacements as MPI's ints (P entries each; parse made sure
	 * that every one fits). */
	int *cnt, *dsp, *scnt, *sdsp, *rcnt, *rdsp;
};

/* The MPI datatype of dtype (float16 and bfloat16 were refused by the parse). */
static MPI_Datatype mpi_type(shmcoll_dtype dt)
{
	switch (dt) {
	case SHMCOLL_INT8:
		return MPI_INT8_T;
	case SHMCOLL_UINT8:
		return MPI_UINT8_T;
	case SHMCOLL_INT32:
		return MPI_INT32_T;
	case SHMCOLL_UINT32:
		return MPI_UINT32_T;
	case SHMCOLL_INT64:
		return MPI_INT64_T;
	case SHMCOLL_UINT64:
		return MPI_UINT64_T;
	case SHMCOLL_FLOAT64:
		return MPI_DOUBLE;
	default:
		return MPI_FLOAT;
	}
}

static void to_ints(int *dst, const size_t *src, int n)
{
	int i;

	for (i = 0; i < n; i++)
		dst[i] = (int)src[i];
}

static void vmpi_layout(struct vmpi *v, int op, size_t count)
{
	bench_vsweep_layout(&v->call, op, count);
	to_ints(v->cnt, v->call.cnt, v->size);
	to_ints(v->dsp, v->call.dsp, v->size);
	to_ints(v->scnt, v->call.scnt, v->size);
	to_ints(v->sdsp, v->call.sdsp, v->size);
	to_ints(v->rcnt, v->call.rcnt, v->size);
	to_ints(v->rdsp, v->call.rdsp, v->size);
}

static const char *vmpi_name(const struct vmpi *v, int form)
{
	return form ? mpi_names[bench_vsweep_equal(v->call.op)] : mpi_vnames[v->call.op];
}

/* vcoll.c's run: the v-call (form 0) or its equal-count form (1), rank 0 the root. The
 * equal-count forms are the collectives mode's calls (MPI_Reduce_scatter_block for
 * reduce_scatter). */
static inline int vmpi_run(const struct vmpi *v, int form)
{
	const struct bench_vsweep_call *c = &v->call;
	const MPI_Datatype t = v->type;
	const int n = (int)c->count, ch = (int)(c->count / (size_t)v->size), me = v->rank;

	if (form) {
		switch (bench_vsweep_equal(c->op)) {
		case OP_ALLGATHER:
			return MPI_Allgather(v->sbuf, ch, t, v->rbuf, ch, t, MPI_COMM_WORLD);
		case OP_GATHER:
			return MPI_Gather(v->sbuf, ch, t, v->rbuf, ch, t, 0, MPI_COMM_WORLD);
		case OP_SCATTER:
			return MPI_Scatter(v->sbuf, ch, t, v->rbuf, ch, t, 0, MPI_COMM_WORLD);
		case OP_ALLTOALL:
			return MPI_Alltoall(v->sbuf, ch, t, v->rbuf, ch, t, MPI_COMM_WORLD);
		case OP_REDUCE_SCATTER:
			return MPI_Reduce_scatter_block(v->sbuf, v->rbuf, ch, t, MPI_SUM,
			                                MPI_COMM_WORLD);
		default:
			return MPI_Allreduce(v->sbuf, v->rbuf, n, t, MPI_SUM, MPI_COMM_WORLD);
		}
	}
	switch (c->op) {
	case V_ALLGATHERV:
		return MPI_Allgatherv(v->sbuf, v->cnt[me], t, v->rbuf, v->cnt, v->dsp, t,
		                      MPI_COMM_WORLD);
	case V_GATHERV:
		return MPI_Gatherv(v->sbuf, v->cnt[me], t, v->rbuf, v->cnt, v->dsp, t, 0,
		                   MPI_COMM_WORLD);
	case V_SCATTERV:
		return MPI_Scatterv(v->sbuf, v->cnt, v->dsp, t, v->rbuf, v->cnt[me], t, 0,
		                    MPI_COMM_WORLD);
	case V_ALLTOALLV:
		return MPI_Alltoallv(v->sbuf, v->scnt, v->sdsp, t, v->rbuf, v->rcnt, v->rdsp, t,
		                     MPI_COMM_WORLD);
	case V_REDUCE_SCATTERV:
		return MPI_Reduce_scatter(v->sbuf, v->rbuf, v->cnt, t, MPI_SUM, MPI_COMM_WORLD);
	case V_SCAN:
		return MPI_Scan(v->sbuf, v->rbuf, n, t, MPI_SUM, MPI_COMM_WORLD);
	default:
		return MPI_Exscan(v->sbuf, v->rbuf, n, t, MPI_SUM, MPI_COMM_WORLD);
	}
}

/* vcoll.c's validate: both calls on every rank, every output checked (MPI leaves rank 0's
 * buffer of MPI_Exscan undefined: only the elements past it are), then the ranks agree; 1 if
 * any was wrong. */
static int vmpi_validate(const struct vmpi *v, size_t bytes)
{
	char msg[512];
	int form, rc, bad = 0, any = 0;

	for (form = 0; form < 2; form++) {
		bench_vsweep_fill(&v->call, form, v->sbuf, v->rbuf);
		rc = vmpi_run(v, form);
		if (rc != MPI_SUCCESS)
			call_failed(v->rank, vmpi_name(v, form), bytes, rc);
		if (!form)
			bench_vsweep_fault(&v->call, v->rbuf);
		if (!bad && bench_vsweep_check(&v->call, form, v->rbuf, msg, sizeof(msg))) {
			fprintf(
			    stderr,
			    "VALIDATION FAILED rank %d vcoll (%s sum, counts %s) bytes %zu: %s\n",
			    v->rank, bench_vsweep_dtype_name(v->call.dtype),
			    bench_vsweep_counts_name(v->o), bytes, msg);
			bad = 1;
		}
	}
	rc = MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(v->rank, "MPI_Allreduce of the checks", bytes, rc);
	return any;
}

/* vcoll.c's time_form: warm-up, a barrier, iters calls back to back; the per-call average. */
static double vmpi_time_form(const struct vmpi *v, int form, size_t bytes)
{
	long warm, iters = bench_sweep_iters(bytes, v->o->iscale, &warm), i;
	double t0;
	int rc;

	for (i = 0; i < warm; i++) {
		rc = vmpi_run(v, form);
		if (rc != MPI_SUCCESS)
			call_failed(v->rank, vmpi_name(v, form), bytes, rc);
	}
	rc = MPI_Barrier(MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(v->rank, "MPI_Barrier", bytes, rc);
	t0 = bench_now();
	for (i = 0; i < iters; i++) {
		rc = vmpi_run(v, form);
		if (rc != MPI_SUCCESS)
			call_failed(v->rank, vmpi_name(v, form), bytes, rc);
	}
	return (bench_now() - t0) / (double)iters * 1e6;
}

/* vcoll.c's time_size: the forms in turn, reps times; the medians of the largest averages. */
static void vmpi_time_size(const struct vmpi *v, size_t bytes, double *lat_us, double *equal_us)
{
	double t[2 * VSWEEP_MAX_REPS], mx[2 * VSWEEP_MAX_REPS], a[VSWEEP_MAX_REPS],
	    b[VSWEEP_MAX_REPS];
	int reps = v->o->reps, k, rc;

	for (k = 0; k < reps; k++) {
		t[2 * k] = vmpi_time_form(v, 0, bytes);
		t[2 * k + 1] = vmpi_time_form(v, 1, bytes);
	}
	rc = MPI_Reduce(t, mx, 2 * reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rc != MPI_SUCCESS)
		call_failed(v->rank, "MPI_Reduce of the timings", bytes, rc);
	*lat_us = *equal_us = 0.0;
	if (v->rank != 0) /* mx is rank 0's alone */
		return;
	for (k = 0; k < reps; k++) {
		a[k] = mx[2 * k];
		b[k] = mx[2 * k + 1];
	}
	*lat_us = bench_vsweep_median(a, reps);
	*equal_us = bench_vsweep_median(b, reps);
}

static int vcoll_main(int argc, char **argv, int rank, int size)
{
	struct bench_vsweep_opts o;
	struct bench_vsweep_rows rows = {0};
	struct bench_out out = {.print = rank == 0};
	struct vmpi v = {.rank = rank, .size = size, .o = &o};
	char err[256];
	size_t cap, esize, bytes, count;
	double lat, equal;
	int *ints, rc, op, status = 0;

	rc = bench_vsweep_parse(argc, argv, DEFAULT_IMPL, 1, &o, err, sizeof(err));
	if (rc < 0) {
		if (rank == 0)
			usage(stdout);
		return 0;
	}
	if (rc != 0)
		return usage_error(rank == 0, "%s", err);
	if (bench_out_open(&out, o.csv, rank == 0) < 0)
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	esize = bench_vsweep_esize(o.dtype);
	cap = bench_vsweep_cap(&o, size);
	v.type = mpi_type(o.dtype);
	bench_vals_init(&v.vals, o.dtype, SHMCOLL_SUM, size);
	ints = calloc(6 * (size_t)size, sizeof(*ints));
	if (!ints || bench_vsweep_call_init(&v.call, &o, &v.vals, rank, size, 0) < 0 ||
	    alloc_two(rank, 0, cap, &v.sbuf, &v.rbuf) < 0)
		MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
	v.cnt = ints;
	v.dsp = ints + size;
	v.scnt = ints + 2 * size;
	v.sdsp = ints + 3 * size;
	v.rcnt = ints + 4 * size;
	v.rdsp = ints + 5 * size;

	if (o.header)
		bench_vsweep_header(&out);
	for (op = 0; op < V_COUNT && !status; op++) {
		if (o.op >= 0 && op != o.op)
			continue;
		for (bytes = o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(bench_vsweep_equal(op), bytes, esize, size, &count))
				continue;
			vmpi_layout(&v, op, count);
			if (vmpi_validate(&v, bytes)) {
				status = EXIT_INVALID;
				break;
			}
			vmpi_time_size(&v, bytes, &lat, &equal);
			if (rank == 0 &&
			    bench_vsweep_row(&out, &rows, &o, size, op, bytes, lat, equal) < 0)
				MPI_Abort(MPI_COMM_WORLD, EXIT_FAIL);
		}
	}
	free_two(0, v.sbuf, v.rbuf);
	bench_vsweep_call_free(&v.call);
	free(ints);
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (rank == 0 && !status) {
		bench_vsweep_summary(&rows, &o);
		if (o.plot && bench_vsweep_plot(o.plot, &o, size, &rows) < 0)
			status = EXIT_FAIL;
	}
	bench_vsweep_rows_free(&rows);
	return status;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*main)(int argc, char **argv, int rank, int size);
	} modes[] = {{"coll", coll_main},
	             {"p2p", p2p_main},
	             {"overlap", overlap_main},
	             {"vcoll", vcoll_main}};
	size_t m;
	int rank, size, rc;

	/* Line by line even into a pipe or file: when one rank fails, the launcher stops the
	 * others, and a table still in a buffer would be lost with them. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_prog = ME;
	bench_busy_child(argc, argv);
	rc = MPI_Init(&argc, &argv);
	if (rc != MPI_SUCCESS) {
		fprintf(stderr, ME ": MPI_Init failed: %d\n", rc);
		return EXIT_FAIL;
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

	/* The first argument names the mode (coll when it is an option or left out), as in
	 * shmcoll-bench. */
	if (argc > 1 && argv[1][0] != '-') {
		for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
			if (!strcmp(argv[1], modes[m].name))
				break;
		if (m == sizeof(modes) / sizeof(modes[0]))
			rc = usage_error(rank == 0, "unknown mode '%s'", argv[1]);
		else
			rc = modes[m].main(argc - 1, argv + 1, rank, size);
	} else {
		rc = coll_main(argc, argv, rank, size);
	}
	/* Every rank that returns here meets the others first: a command line every rank found
	 * wrong is printed by rank 0 before any rank exits with an error (the launcher stops the
	 * job when the first one does). */
	MPI_Barrier(MPI_COMM_WORLD);
	if (MPI_Finalize() != MPI_SUCCESS) {
		fprintf(stderr, ME ": rank %d: MPI_Finalize failed\n", rank);
		return EXIT_FAIL;
	}
	return rc;
}
