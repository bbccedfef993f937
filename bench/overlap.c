/* overlap.c - the overlap mode of shmcoll-bench: how much of a non-blocking collective hides
 * behind computation, as osu_iallreduce measures it, timed exactly the way
 * bench/mpi/mpi-bench.c times MPI's (osu.c), so the two CSVs join row by row. Per size:
 *  (a) pure: shmcoll_i<op> + shmcoll_wait, each call alone between barriers;
 *  (b) a compute loop calibrated, on each rank alone, to take the pure time (averaged over the
 *      ranks, so that every rank computes as long);
 *  (c) total: shmcoll_i<op>, the compute loop (calling shmcoll_test every --test-every units),
 *      shmcoll_wait; overlap = max(0, 100 (1 - (total - compute) / pure));
 * and the blocking shmcoll_<op> timed as (a), for the ratio of the two. Every time is the
 * average over the ranks of each rank's per-call average, as OSU reports it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/mem.h"
#include "bench/plot.h"
#include "bench/osu.h"
#include "bench/sweep.h"

#define DTYPE SHMCOLL_FLOAT32

struct ovl {
	shmcoll_comm *comm;
	int rank, size;
	const struct bench_osu_opts *o;
	void *sbuf, *rbuf;
	struct bench_vals vals;
	struct bench_compute comp;
};

void bench_overlap_usage(FILE *f)
{
	fprintf(f,
	        "  " PROG " overlap [OPTIONS]\n"
	        "      Overlap of a non-blocking collective with computation, as osu_iallreduce\n"
	        "      measures it (float32, sum); run it under the launcher:\n"
	        "        shmcoll-run -n P " PROG " overlap [OPTIONS]\n"
	        "      Per size, every call alone between barriers: pure = shmcoll_i<op> +\n"
	        "      shmcoll_wait; compute = a loop of arithmetic on private data, calibrated\n"
	        "      on each rank alone to take pure; total = shmcoll_i<op> + compute +\n"
	        "      shmcoll_wait; overlap = max(0, 100 (1 - (total - compute) / pure)); and\n"
	        "      blocking = shmcoll_<op> (the target: pure within 1.2x of it up to 1 KiB,\n"
	        "      summed up on stderr). Each size is checked first; iterations as OSU's:\n"
	        "      1000 (100 above 8 KiB).\n");
	bench_osu_usage(f, 1, "      ", "shmcoll",
	                "buffers from shmcoll_malloc; the arena is sized to fit");
	fprintf(f, "      Prints impl,op,ranks,bytes,pure_us,compute_us,total_us,overlap_pct,\n"
	           "      blocking_us (rank 0), each the average over the ranks.\n");
}

__attribute__((cold)) static _Noreturn void call_failed(const struct ovl *v, const char *what,
                                                        size_t bytes, int rc)
{
	fprintf(stderr, PROG ": rank %d: %s (bytes %zu) failed: %d (%s): %s\n", v->rank, what,
	        bytes, rc, shmcoll_strerror(rc), shmcoll_last_error(v->comm));
	shmcoll_comm_abort(v->comm);
	exit(EXIT_FAIL);
}

__attribute__((cold)) static _Noreturn void op_failed(const struct ovl *v, int op, int nb,
                                                      size_t bytes, int rc)
{
	char what[64];

	snprintf(what, sizeof(what), "shmcoll_%s%s", nb ? "i" : "", bench_sweep_ops[op]);
	call_failed(v, what, bytes, rc);
}

/* The blocking call of op, as coll.c makes it (rank 0 the root; ch = count / P per block). */
static inline int run_op(const struct ovl *v, int op, size_t count)
{
	size_t ch = count / (size_t)v->size;

	switch (op) {
	case OP_ALLREDUCE:
		return shmcoll_allreduce(v->sbuf, v->rbuf, count, DTYPE, SHMCOLL_SUM, v->comm);
	case OP_REDUCE:
		return shmcoll_reduce(v->sbuf, v->rbuf, count, DTYPE, SHMCOLL_SUM, 0, v->comm);
	case OP_BCAST:
		return shmcoll_bcast(v->rbuf, count, DTYPE, 0, v->comm);
	case OP_ALLGATHER:
		return shmcoll_allgather(v->sbuf, v->rbuf, ch, DTYPE, v->comm);
	case OP_REDUCE_SCATTER:
		return shmcoll_reduce_scatter(v->sbuf, v->rbuf, ch, DTYPE, SHMCOLL_SUM, v->comm);
	case OP_ALLTOALL:
		return shmcoll_alltoall(v->sbuf, v->rbuf, ch, DTYPE, v->comm);
	case OP_GATHER:
		return shmcoll_gather(v->sbuf, v->rbuf, ch, DTYPE, 0, v->comm);
	case OP_SCATTER:
		return shmcoll_scatter(v->sbuf, v->rbuf, ch, DTYPE, 0, v->comm);
	default:
		return shmcoll_barrier(v->comm);
	}
}

/* Its non-blocking form. */
static inline int start_op(const struct ovl *v, int op, size_t count, shmcoll_request **req)
{
	size_t ch = count / (size_t)v->size;

	switch (op) {
	case OP_ALLREDUCE:
		return shmcoll_iallreduce(v->sbuf, v->rbuf, count, DTYPE, SHMCOLL_SUM, v->comm,
		                          req);
	case OP_REDUCE:
		return shmcoll_ireduce(v->sbuf, v->rbuf, count, DTYPE, SHMCOLL_SUM, 0, v->comm,
		                       req);
	case OP_BCAST:
		return shmcoll_ibcast(v->rbuf, count, DTYPE, 0, v->comm, req);
	case OP_ALLGATHER:
		return shmcoll_iallgather(v->sbuf, v->rbuf, ch, DTYPE, v->comm, req);
	case OP_REDUCE_SCATTER:
		return shmcoll_ireduce_scatter(v->sbuf, v->rbuf, ch, DTYPE, SHMCOLL_SUM, v->comm,
		                               req);
	case OP_ALLTOALL:
		return shmcoll_ialltoall(v->sbuf, v->rbuf, ch, DTYPE, v->comm, req);
	case OP_GATHER:
		return shmcoll_igather(v->sbuf, v->rbuf, ch, DTYPE, 0, v->comm, req);
	case OP_SCATTER:
		return shmcoll_iscatter(v->sbuf, v->rbuf, ch, DTYPE, 0, v->comm, req);
	default:
		return shmcoll_ibarrier(v->comm, req);
	}
}

static void barrier(const struct ovl *v, size_t bytes)
{
	int rc = shmcoll_barrier(v->comm);

	if (rc != 0)
		call_failed(v, "shmcoll_barrier", bytes, rc);
}

static void wait_op(const struct ovl *v, int op, size_t bytes, shmcoll_request **req)
{
	int rc = shmcoll_wait(req, NULL);

	if (rc != 0)
		op_failed(v, op, 1, bytes, rc);
}

/* One non-blocking call with known inputs, every output element checked on every rank that
 * gets one, as the collectives mode checks the blocking call; then the ranks agree, so that all
 * stop together (with exit status 3) when any found a wrong element. Returns that. */
static int validate(const struct ovl *v, int op, size_t count, size_t bytes)
{
	shmcoll_request *req = NULL;
	char got_s[64], want_s[64];
	int64_t want;
	size_t idx;
	int rc;
	int32_t bad = 0, any = 0;

	bench_sweep_fill(op, DTYPE, &v->vals, v->sbuf, v->rbuf, count, v->rank, v->size);
	rc = start_op(v, op, count, &req);
	if (rc != 0)
		op_failed(v, op, 1, bytes, rc);
	wait_op(v, op, bytes, &req);
	if (count && bench_osu_fault("overlap") && v->rank == v->size - 1)
		bench_elem_store(v->rbuf, 0, DTYPE, 12345);
	if (bench_sweep_check(op, DTYPE, &v->vals, v->rbuf, count, v->rank, v->size, &idx, &want)) {
		bench_elem_format(v->rbuf, idx, DTYPE, got_s, sizeof(got_s));
		bench_value_format(DTYPE, want, want_s, sizeof(want_s));
		fprintf(stderr,
		        "VALIDATION FAILED rank %d op i%s (float32 sum) bytes %zu idx %zu got %s "
		        "want %s\n",
		        v->rank, bench_sweep_ops[op], bytes, idx, got_s, want_s);
		bad = 1;
	}
	rc = shmcoll_allreduce(&bad, &any, 1, SHMCOLL_INT32, SHMCOLL_MAX, v->comm);
	if (rc != 0)
		call_failed(v, "shmcoll_allreduce of the checks", bytes, rc);
	return any;
}

/* units of the compute loop, testing req every o->test_every units while it is outstanding. */
static void compute(struct ovl *v, int op, size_t bytes, long units, shmcoll_request **req)
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
			rc = shmcoll_test(req, &done, NULL);
			if (rc != 0)
				op_failed(v, op, 1, bytes, rc);
		}
	}
}

/* One size: the four averages of this rank into t[] (us): pure, compute, total, blocking. */
static void time_size(struct ovl *v, int op, size_t bytes, size_t count, double t[4])
{
	shmcoll_request *req = NULL;
	long warm, iters = bench_osu_iters(OSU_OVERLAP, bytes, v->o->iscale, &warm), i, units;
	double t0, tc, sum[4] = {0}, target = 0.0;
	int rc;

	/* (a) the pure communication */
	barrier(v, bytes);
	for (i = 0; i < warm + iters; i++) {
		t0 = bench_now();
		rc = start_op(v, op, count, &req);
		if (rc != 0)
			op_failed(v, op, 1, bytes, rc);
		wait_op(v, op, bytes, &req);
		if (i >= warm)
			sum[0] += bench_now() - t0;
		barrier(v, bytes);
	}
	/* the blocking call, timed the same way */
	for (i = 0; i < warm + iters; i++) {
		t0 = bench_now();
		rc = run_op(v, op, count);
		if (rc != 0)
			op_failed(v, op, 0, bytes, rc);
		if (i >= warm)
			sum[3] += bench_now() - t0;
		barrier(v, bytes);
	}
	/* (b) every rank computes as long: the pure time averaged over the ranks */
	t0 = sum[0] / (double)iters;
	rc = shmcoll_allreduce(&t0, &target, 1, SHMCOLL_FLOAT64, SHMCOLL_SUM, v->comm);
	if (rc != 0)
		call_failed(v, "shmcoll_allreduce of the pure times", bytes, rc);
	units = bench_compute_calibrate(&v->comp, target / (double)v->size);
	/* (c) communication and computation together */
	barrier(v, bytes);
	for (i = 0; i < warm + iters; i++) {
		t0 = bench_now();
		rc = start_op(v, op, count, &req);
		if (rc != 0)
			op_failed(v, op, 1, bytes, rc);
		tc = bench_now();
		compute(v, op, bytes, units, &req);
		tc = bench_now() - tc;
		wait_op(v, op, bytes, &req);
		if (i >= warm) {
			sum[2] += bench_now() - t0;
			sum[1] += tc;
		}
		barrier(v, bytes);
	}
	for (i = 0; i < 4; i++)
		t[i] = sum[i] / (double)iters * 1e6;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int alloc_buffers(struct ovl *v, size_t bytes)
{
	if (v->o->symmetric) {
		v->sbuf = shmcoll_malloc(v->comm, bytes);
		v->rbuf = v->sbuf ? shmcoll_malloc(v->comm, bytes) : NULL;
		if (!v->rbuf) {
			fprintf(stderr, PROG ": rank %d: shmcoll_malloc(%zu) failed: %s\n", v->rank,
			        bytes, shmcoll_last_error(v->comm));
			return -1;
		}
	} else if (posix_memalign(&v->sbuf, 4096, bytes) != 0 ||
	           posix_memalign(&v->rbuf, 4096, bytes) != 0) {
		fprintf(stderr, PROG ": rank %d: out of memory for two %zu-byte buffers\n", v->rank,
		        bytes);
		return -1;
	}
	memset(v->sbuf, 0, bytes);
	memset(v->rbuf, 0, bytes);
	return 0;
}

static int free_buffers(struct ovl *v)
{
	int rc = 0;

	if (!v->o->symmetric) {
		free(v->sbuf);
		free(v->rbuf);
	} else {
		if (v->rbuf)
			rc = shmcoll_free(v->comm, v->rbuf);
		if (rc == 0 && v->sbuf)
			rc = shmcoll_free(v->comm, v->sbuf);
		if (rc != 0)
			fprintf(stderr, PROG ": rank %d: shmcoll_free failed: %d (%s): %s\n",
			        v->rank, rc, shmcoll_strerror(rc), shmcoll_last_error(v->comm));
	}
	v->sbuf = v->rbuf = NULL;
	return rc;
}

int bench_overlap_main(int argc, char **argv)
{
	struct bench_osu_opts o;
	struct bench_osu_rows rows = {0};
	struct bench_out out;
	struct ovl v = {0};
	const size_t esize = sizeof(float);
	char err[256];
	size_t cap, bytes, count;
	double t[4], sum[4], row[5];
	int rc, op, i, status = 0;

	rc = bench_osu_parse(1, argc, argv, "shmcoll", &o, err, sizeof(err));
	if (rc < 0) {
		if (bench_is_rank0())
			bench_usage(stdout);
		return 0;
	}
	if (rc != 0)
		return bench_usage_exit(bench_usage_error("%s", err));
	/* As coll.c (and mpi-bench): every op's buffers at the largest size, 64 elements more. */
	cap = (o.maxb / esize + 64) * esize;
	if (o.symmetric && bench_fit_arena("--symmetric", 2 * round_up(cap, 4096)) < 0)
		return bench_usage_exit(EXIT_FAIL);
	if (bench_out_open(&out, o.csv, bench_is_rank0()) < 0)
		return bench_usage_exit(EXIT_FAIL);

	rc = shmcoll_init(&v.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": shmcoll_init failed: %d (%s): %s\n", rc,
		        shmcoll_strerror(rc), shmcoll_last_error(NULL));
		bench_out_close(&out);
		return EXIT_FAIL;
	}
	v.o = &o;
	v.rank = shmcoll_comm_rank(v.comm);
	v.size = shmcoll_comm_size(v.comm);
	out.print = v.rank == 0;
	bench_vals_init(&v.vals, DTYPE, SHMCOLL_SUM, v.size);
	bench_compute_init(&v.comp);
	if (alloc_buffers(&v, cap) < 0) {
		shmcoll_comm_abort(v.comm);
		exit(EXIT_FAIL);
	}

	if (o.header)
		bench_osu_header(&out, 1);
	for (op = 0; op < OP_COUNT && !status; op++) {
		if (o.op >= 0 && op != o.op)
			continue;
		for (bytes = op == OP_BARRIER ? 0 : o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(op, bytes, esize, v.size, &count))
				continue;
			if (op != OP_BARRIER && validate(&v, op, count, bytes)) {
				status = EXIT_INVALID;
				break;
			}
			time_size(&v, op, bytes, count, t);
			rc = shmcoll_reduce(t, sum, 4, SHMCOLL_FLOAT64, SHMCOLL_SUM, 0, v.comm);
			if (rc != 0)
				call_failed(&v, "shmcoll_reduce of the timings", bytes, rc);
			if (v.rank == 0) {
				for (i = 0; i < 4; i++)
					sum[i] /= (double)v.size;
				row[0] = sum[0];
				row[1] = sum[1];
				row[2] = sum[2];
				row[3] = bench_osu_overlap_pct(sum[0], sum[1], sum[2]);
				row[4] = sum[3];
				if (bench_osu_overlap_row(&out, &rows, o.impl, op, v.size, bytes,
				                          row) < 0) {
					shmcoll_comm_abort(v.comm);
					exit(EXIT_FAIL);
				}
			}
			if (op == OP_BARRIER)
				break;
		}
	}

	if (free_buffers(&v) != 0 && !status)
		status = EXIT_FAIL;
	rc = shmcoll_comm_destroy(v.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": rank %d: shmcoll_comm_destroy failed: %d (%s)\n", v.rank,
		        rc, shmcoll_strerror(rc));
		status = status ? status : EXIT_FAIL;
	}
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (v.rank == 0 && !status) {
		bench_osu_ratio_summary(&rows, o.impl);
		if (o.plot && bench_osu_plot(o.plot, 1, o.impl, v.size, &rows, o.test_every) < 0)
			status = EXIT_FAIL;
	}
	bench_osu_rows_free(&rows);
	return status;
}

/* ---- The nbc mode: shmcoll_i<op> + shmcoll_wait against shmcoll_<op>, back to back ----
 *
 * The overlap mode times each call alone between barriers, as OSU does, which is what the
 * overlap needs and is noisy for a ratio of two ~100 ns calls. This mode times the way the
 * collectives mode does, calls back to back, in blocks of --iters calls of one form, the two
 * forms' blocks alternating (and which goes first alternating) --reps times; a block's time
 * is the slowest rank's per-call average, and each size reports the medians of the two forms'
 * blocks and of their per-repeat ratios. */

#define NBC_MAX_REPS 99

struct nbc_opts {
	int op;
	size_t minb, maxb;
	int reps;
	long iters;
	const char *csv, *impl, *plot;
};

void bench_nbc_usage(FILE *f)
{
	fprintf(f,
	        "  " PROG " nbc [OPTIONS]\n"
	        "      A non-blocking collective and wait against its blocking form, back to\n"
	        "      back (float32, sum): per size, blocks of calls of each form alternate;\n"
	        "      run it under the launcher: shmcoll-run -n P " PROG " nbc [OPTIONS]\n"
	        "      --op NAME         allreduce (default), reduce, bcast, allgather,\n"
	        "                        reduce_scatter, alltoall, gather, scatter, barrier\n"
	        "      --min-bytes N     smallest size, as the collectives mode counts it; K, M,\n"
	        "                        G suffixes (default 4)\n"
	        "      --max-bytes N     largest size (default 1K; at most 64M)\n"
	        "      --reps N          blocks of each form per size, alternating; medians are\n"
	        "                        reported (default 15, at most %d)\n"
	        "      --iters N         calls per block (default 2000; a tenth above 8 KiB)\n"
	        "      --impl NAME       the impl column (default shmcoll)\n"
	        "      --csv FILE        also write the rows to FILE\n"
	        "      --plot FILE.png   draw both forms' times and their ratio against size\n"
	        "                        with gnuplot\n"
	        "      Prints impl,op,ranks,bytes,nb_us,blocking_us,ratio (rank 0): the medians\n"
	        "      of the non-blocking and blocking blocks and of their ratios; the sizes up\n"
	        "      to 1 KiB whose ratio is above 1.2 (the target) are summed up on stderr.\n",
	        NBC_MAX_REPS);
}

static int nbc_parse(int argc, char **argv, struct nbc_opts *o)
{
	const char *v;
	char *end;
	long n;
	int i;

	*o = (struct nbc_opts){.op = OP_ALLREDUCE,
	                       .minb = 4,
	                       .maxb = 1024,
	                       .reps = 15,
	                       .iters = 2000,
	                       .csv = NULL,
	                       .impl = "shmcoll",
	                       .plot = NULL};
	static const char *const known[] = {"--op",    "--min-bytes", "--max-bytes", "--reps",
	                                    "--iters", "--impl",      "--csv",       "--plot"};
	size_t k;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
		for (k = 0; k < sizeof(known) / sizeof(known[0]) && strcmp(argv[i], known[k]); k++)
			;
		if (k == sizeof(known) / sizeof(known[0]))
			return bench_usage_error("unknown option '%s' in the nbc mode", argv[i]),
			       -1;
		if (!(v = bench_optarg(argc, argv, &i)))
			return -1;
		if (!strcmp(argv[i - 1], "--op")) {
			if ((o->op = bench_sweep_op(v)) < 0)
				return bench_usage_error("unknown --op '%s'", v), -1;
		} else if (!strcmp(argv[i - 1], "--min-bytes")) {
			if (bench_parse_size(v, &o->minb) < 0)
				return bench_usage_error("bad --min-bytes '%s'", v), -1;
		} else if (!strcmp(argv[i - 1], "--max-bytes")) {
			if (bench_parse_size(v, &o->maxb) < 0 || o->maxb > ((size_t)64 << 20))
				return bench_usage_error("bad --max-bytes '%s' (at most 64M)", v),
				       -1;
		} else if (!strcmp(argv[i - 1], "--reps") || !strcmp(argv[i - 1], "--iters")) {
			n = strtol(v, &end, 10);
			if (end == v || *end || n < 1 ||
			    (argv[i - 1][2] == 'r' ? n > NBC_MAX_REPS : n > 100000000))
				return bench_usage_error("bad %s '%s'", argv[i - 1], v), -1;
			if (argv[i - 1][2] == 'r')
				o->reps = (int)n;
			else
				o->iters = n;
		} else if (!strcmp(argv[i - 1], "--impl")) {
			o->impl = v;
		} else if (!strcmp(argv[i - 1], "--csv")) {
			o->csv = v;
		} else {
			o->plot = v;
		}
	}
	if (o->minb == 0)
		o->minb = 4;
	if (o->minb > o->maxb)
		return bench_usage_error("--min-bytes %zu is above --max-bytes %zu", o->minb,
		                         o->maxb),
		       -1;
	return 0;
}

/* One block: n calls of one form back to back; the slowest rank's per-call average (us). */
static double nbc_block(const struct ovl *v, int op, int nb, size_t count, size_t bytes, long n)
{
	shmcoll_request *req = NULL;
	double t0, mine, slowest = 0.0;
	long i;
	int rc;

	barrier(v, bytes);
	t0 = bench_now();
	for (i = 0; i < n; i++) {
		if (nb) {
			rc = start_op(v, op, count, &req);
			if (rc != 0)
				op_failed(v, op, 1, bytes, rc);
			wait_op(v, op, bytes, &req);
		} else if ((rc = run_op(v, op, count)) != 0) {
			op_failed(v, op, 0, bytes, rc);
		}
	}
	mine = (bench_now() - t0) / (double)n * 1e6;
	rc = shmcoll_allreduce(&mine, &slowest, 1, SHMCOLL_FLOAT64, SHMCOLL_MAX, v->comm);
	if (rc != 0)
		call_failed(v, "shmcoll_allreduce of the timings", bytes, rc);
	return slowest;
}

/* Rows of the nbc mode, for --plot. */
struct nbc_row {
	size_t bytes;
	double nb, blocking, ratio;
};

static int nbc_plot(const struct nbc_opts *o, int ranks, const struct nbc_row *row, int n)
{
	char *script = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&script, &len);
	int i, k, rc;

	if (!f) {
		fprintf(stderr, PROG ": --plot: out of memory\n");
		return -1;
	}
	fprintf(f, "set terminal pngcairo size 1280,600 enhanced font ',10'\nset output ");
	bench_gp_quote(f, o->plot);
	fprintf(f,
	        "\nset multiplot layout 1,2 title \"" PROG
	        " nbc, %s, %d ranks, back to back: i%s + wait against %s\" noenhanced\n"
	        "set logscale x 2\nset xlabel 'bytes'\nset grid\nset key top left noenhanced\n",
	        o->impl, ranks, bench_sweep_ops[o->op], bench_sweep_ops[o->op]);
	fprintf(f,
	        "set title 'time per call (medians)'\nset ylabel 'us'\n"
	        "plot '-' using 1:2 with linespoints title 'i%s + wait', "
	        "'-' using 1:2 with linespoints title '%s'\n",
	        bench_sweep_ops[o->op], bench_sweep_ops[o->op]);
	for (k = 0; k < 2; k++) {
		for (i = 0; i < n; i++)
			fprintf(f, "%zu %g\n", row[i].bytes ? row[i].bytes : 1,
			        k ? row[i].blocking : row[i].nb);
		fprintf(f, "e\n");
	}
	fprintf(f, "set title 'non-blocking / blocking (median of the ratios)'\n"
	           "set ylabel 'ratio'\nset yrange [0:*]\n"
	           "plot '-' using 1:2 with linespoints title 'ratio', 1.2 with lines dt 2 "
	           "title 'target 1.2'\n");
	for (i = 0; i < n; i++)
		fprintf(f, "%zu %g\n", row[i].bytes ? row[i].bytes : 1, row[i].ratio);
	fprintf(f, "e\nunset multiplot\n");
	if (fclose(f) != 0) {
		free(script);
		fprintf(stderr, PROG ": --plot: out of memory\n");
		return -1;
	}
	rc = bench_gnuplot(script);
	free(script);
	return rc;
}

int bench_nbc_main(int argc, char **argv)
{
	static const struct bench_osu_opts plain = {0}; /* buffers from malloc */
	double t[2][NBC_MAX_REPS], ratio[NBC_MAX_REPS], med[3], worst = 0.0;
	struct nbc_row row[64];
	struct nbc_opts o;
	struct bench_out out;
	struct ovl v = {0};
	size_t cap, bytes, count, worst_at = 0;
	int rc, k, f, status = 0, over = 0, small = 0, nrows = 0;
	long n;

	rc = nbc_parse(argc, argv, &o);
	if (rc > 0) {
		if (bench_is_rank0())
			bench_usage(stdout);
		return 0;
	}
	if (rc < 0)
		return bench_usage_exit(EXIT_USAGE);
	if (bench_out_open(&out, o.csv, bench_is_rank0()) < 0)
		return bench_usage_exit(EXIT_FAIL);
	rc = shmcoll_init(&v.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": shmcoll_init failed: %d (%s): %s\n", rc,
		        shmcoll_strerror(rc), shmcoll_last_error(NULL));
		bench_out_close(&out);
		return EXIT_FAIL;
	}
	v.o = &plain;
	v.rank = shmcoll_comm_rank(v.comm);
	v.size = shmcoll_comm_size(v.comm);
	out.print = v.rank == 0;
	bench_vals_init(&v.vals, DTYPE, SHMCOLL_SUM, v.size);
	cap = (o.maxb / sizeof(float) + 64) * sizeof(float);
	if (alloc_buffers(&v, cap) < 0) {
		shmcoll_comm_abort(v.comm);
		exit(EXIT_FAIL);
	}
	bench_out_line(&out, "impl,op,ranks,bytes,nb_us,blocking_us,ratio\n");
	for (bytes = o.op == OP_BARRIER ? 0 : o.minb; bytes <= o.maxb; bytes *= 2) {
		if (!bench_sweep_count(o.op, bytes, sizeof(float), v.size, &count))
			continue;
		if (o.op != OP_BARRIER && validate(&v, o.op, count, bytes)) {
			status = EXIT_INVALID;
			break;
		}
		n = bytes > 8192 ? (o.iters + 9) / 10 : o.iters;
		nbc_block(&v, o.op, 0, count, bytes, n / 4 + 1);
		nbc_block(&v, o.op, 1, count, bytes, n / 4 + 1);
		for (k = 0; k < o.reps; k++)
			for (f = 0; f < 2; f++)
				t[f ^ (k & 1)][k] =
				    nbc_block(&v, o.op, f ^ (k & 1), count, bytes, n);
		for (k = 0; k < o.reps; k++)
			ratio[k] = t[1][k] / t[0][k];
		med[0] = bench_median(t[1], o.reps);
		med[1] = bench_median(t[0], o.reps);
		med[2] = bench_median(ratio, o.reps);
		bench_out_line(&out, "%s,%s,%d,%zu,%.3f,%.3f,%.4f\n", o.impl, bench_sweep_ops[o.op],
		               v.size, bytes, med[0], med[1], med[2]);
		if (nrows < (int)(sizeof(row) / sizeof(row[0])))
			row[nrows++] = (struct nbc_row){bytes, med[0], med[1], med[2]};
		if (bytes <= 1024) {
			small++;
			over += med[2] > 1.2;
			if (med[2] > worst) {
				worst = med[2];
				worst_at = bytes;
			}
		}
		if (o.op == OP_BARRIER)
			break;
	}
	if (free_buffers(&v) != 0 && !status)
		status = EXIT_FAIL;
	rc = shmcoll_comm_destroy(v.comm);
	if (rc != 0 && !status)
		status = EXIT_FAIL;
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (v.rank == 0 && !status && small)
		fprintf(stderr,
		        PROG ": %s: i%s + wait / %s, back to back (target: within 1.2x up to 1 "
		             "KiB): %d of %d sizes above 1.2x, worst %.2fx at %zu B\n",
		        o.impl, bench_sweep_ops[o.op], bench_sweep_ops[o.op], over, small, worst,
		        worst_at);
	if (v.rank == 0 && !status && o.plot && nbc_plot(&o, v.size, row, nrows) < 0)
		status = EXIT_FAIL;
	return status;
}
