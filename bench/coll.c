/* coll.c - the collectives mode of shmcoll-bench: every collective timed exactly the way
 * bench/mpi/mpi-bench.c times MPI (sizes, iteration counts, warm-up, validation, timing modes,
 * reported figures and CSV), so a shmcoll CSV and an MPI CSV join row by row. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/busy.h"
#include "bench/fit.h"
#include "bench/sweep.h"
#include "shm/arena.h"

struct opts {
	int sel; /* one op, or -1 for all */
	int sync;
	int dirty;
	int header;
	int symmetric;
	int fit;
	size_t minb, maxb;
	double iscale;
	const char *impl;
	const char *csv;
	const char *algo;
	const char *chunk;
	shmcoll_dtype dtype;
	shmcoll_op rop;
	struct bench_busy busy;
};

struct coll {
	shmcoll_comm *comm;
	int rank, size;
	shmcoll_dtype dtype;
	shmcoll_op rop;
	void *sbuf, *rbuf;
	struct bench_vals vals; /* the inputs and results of the reducing ops */
};

void bench_coll_usage(FILE *f)
{
	fprintf(
	    f,
	    "  " PROG " [coll] [OPTIONS]\n"
	    "      Time the collectives; run it under the launcher:\n"
	    "        shmcoll-run -n P " PROG " [OPTIONS]\n"
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
	    "      --impl LABEL      first CSV column (default shmcoll)\n"
	    "      --iters-scale F   scale the iteration counts (default 1)\n"
	    "      --no-header       leave out the CSV header\n"
	    "      --dtype NAME      element type (default float32): int8 uint8 int32 uint32\n"
	    "                        int64 uint64 float16 bfloat16 float32 float64\n"
	    "      --reduce-op NAME  operation of allreduce, reduce and reduce_scatter\n"
	    "                        (default sum): sum prod min max avg band bor bxor\n"
	    "      --algo NAME       set SHMCOLL_ALGO=NAME for the library (e.g. ring,\n"
	    "                        \"allreduce:direct,bcast:tree\")\n"
	    "      --chunk BYTES     set SHMCOLL_CHUNK_BYTES=BYTES for the library\n"
	    "      --symmetric       buffers from shmcoll_malloc; the arena is sized to fit\n"
	    "      --csv FILE        also write the CSV to FILE\n");
	bench_busy_usage(f, "      ");
	bench_fit_usage(f, "      ");
	fprintf(f, "      Prints impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps (rank 0).\n");
}

/* 0: run; -1: help was printed; EXIT_USAGE: a bad command line. */
static int parse(int argc, char **argv, struct opts *o)
{
	const char *v;
	int i, x;

	*o = (struct opts){
	    .sel = -1,
	    .header = 1,
	    .minb = 4,
	    .maxb = (size_t)64 << 20,
	    .iscale = 1.0,
	    .impl = "shmcoll",
	    .dtype = SHMCOLL_FLOAT32,
	    .rop = SHMCOLL_SUM,
	    .busy = {.max_s = 10.0},
	};
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (bench_help(a)) {
			return -1;
		} else if (!strcmp(a, "--sync")) {
			o->sync = 1;
		} else if (!strcmp(a, "--dirty")) {
			o->dirty = 1;
		} else if (!strcmp(a, "--no-header")) {
			o->header = 0;
		} else if (!strcmp(a, "--symmetric")) {
			o->symmetric = 1;
		} else if (!strcmp(a, "--fit")) {
			o->fit = 1;
		} else if (!strcmp(a, "--op") || !strcmp(a, "--min-bytes") ||
		           !strcmp(a, "--max-bytes") || !strcmp(a, "--impl") ||
		           !strcmp(a, "--iters-scale") || !strcmp(a, "--dtype") ||
		           !strcmp(a, "--reduce-op") || !strcmp(a, "--algo") ||
		           !strcmp(a, "--chunk") || !strcmp(a, "--csv")) {
			v = bench_optarg(argc, argv, &i);
			if (!v)
				return EXIT_USAGE;
			if (!strcmp(a, "--op")) {
				o->sel = bench_sweep_op(v);
				if (o->sel < 0 && strcmp(v, "all"))
					return bench_usage_error("unknown --op '%s'", v);
			} else if (!strcmp(a, "--min-bytes")) {
				if (bench_parse_size(v, &o->minb))
					return bench_usage_error("bad --min-bytes '%s'", v);
			} else if (!strcmp(a, "--max-bytes")) {
				if (bench_parse_size(v, &o->maxb))
					return bench_usage_error("bad --max-bytes '%s'", v);
			} else if (!strcmp(a, "--impl")) {
				o->impl = v;
			} else if (!strcmp(a, "--iters-scale")) {
				if (bench_parse_positive(v, &o->iscale))
					return bench_usage_error("bad --iters-scale '%s'", v);
			} else if (!strcmp(a, "--dtype")) {
				x = bench_dtype_parse(v);
				if (x < 0)
					return bench_usage_error("unknown --dtype '%s'", v);
				o->dtype = (shmcoll_dtype)x;
			} else if (!strcmp(a, "--reduce-op")) {
				x = bench_op_parse(v);
				if (x < 0)
					return bench_usage_error("unknown --reduce-op '%s'", v);
				o->rop = (shmcoll_op)x;
			} else if (!strcmp(a, "--algo")) {
				o->algo = v;
			} else if (!strcmp(a, "--chunk")) {
				size_t chunk;

				if (bench_parse_size(v, &chunk) || chunk == 0)
					return bench_usage_error("bad --chunk '%s'", v);
				o->chunk = v;
			} else {
				o->csv = v;
			}
		} else if ((x = bench_busy_arg(&o->busy, argc, argv, &i, bench_is_rank0())) != 0) {
			if (x != 1)
				return EXIT_USAGE;
		} else {
			return bench_usage_error("unknown option '%s' in the collectives mode", a);
		}
	}
	if (o->rop >= SHMCOLL_BAND && bench_dtype_is_float(o->dtype))
		return bench_usage_error("--reduce-op %s needs an integer --dtype, not %s",
		                         bench_op_name(o->rop), bench_dtype_name(o->dtype));
	return 0;
}

/* A failed shmcoll call: say which, on which rank, why; stop the peers; exit. */
__attribute__((cold)) static _Noreturn void call_failed(const struct coll *c, const char *what,
                                                        size_t bytes, int rc)
{
	fprintf(stderr, PROG ": rank %d: %s (bytes %zu) failed: %d (%s): %s\n", c->rank, what,
	        bytes, rc, shmcoll_strerror(rc), shmcoll_last_error(c->comm));
	shmcoll_comm_abort(c->comm);
	exit(EXIT_FAIL);
}

__attribute__((cold)) static _Noreturn void op_failed(const struct coll *c, int op, size_t bytes,
                                                      int rc)
{
	char what[64];

	snprintf(what, sizeof(what), "shmcoll_%s", bench_sweep_ops[op]);
	call_failed(c, what, bytes, rc);
}

/* count = elements in the "bytes" buffer; ch = count / P for the divided ops. The MPI calls
 * they stand for: MPI_Reduce_scatter_block -> shmcoll_reduce_scatter (recvcount = ch), the
 * (sendcount, recvcount) pairs of the gathers and scatters -> one count. */
static inline int run_op(const struct coll *c, int op, size_t count)
{
	size_t ch = count / (size_t)c->size;

	switch (op) {
	case OP_ALLREDUCE:
		return shmcoll_allreduce(c->sbuf, c->rbuf, count, c->dtype, c->rop, c->comm);
	case OP_REDUCE:
		return shmcoll_reduce(c->sbuf, c->rbuf, count, c->dtype, c->rop, 0, c->comm);
	case OP_BCAST:
		return shmcoll_bcast(c->rbuf, count, c->dtype, 0, c->comm);
	case OP_ALLGATHER:
		return shmcoll_allgather(c->sbuf, c->rbuf, ch, c->dtype, c->comm);
	case OP_REDUCE_SCATTER:
		return shmcoll_reduce_scatter(c->sbuf, c->rbuf, ch, c->dtype, c->rop, c->comm);
	case OP_ALLTOALL:
		return shmcoll_alltoall(c->sbuf, c->rbuf, ch, c->dtype, c->comm);
	case OP_GATHER:
		return shmcoll_gather(c->sbuf, c->rbuf, ch, c->dtype, 0, c->comm);
	case OP_SCATTER:
		return shmcoll_scatter(c->sbuf, c->rbuf, ch, c->dtype, 0, c->comm);
	default:
		return shmcoll_barrier(c->comm);
	}
}

__attribute__((cold)) static _Noreturn void wrong(const struct coll *c, int op, size_t bytes,
                                                  size_t idx, int64_t want)
{
	char got_s[64], want_s[64];

	bench_elem_format(c->rbuf, idx, c->dtype, got_s, sizeof(got_s));
	bench_value_format(c->dtype, want, want_s, sizeof(want_s));
	fprintf(stderr,
	        "VALIDATION FAILED rank %d op %s (%s %s) bytes %zu idx %zu got %s want %s\n",
	        c->rank, bench_sweep_ops[op], bench_dtype_name(c->dtype), bench_op_name(c->rop),
	        bytes, idx, got_s, want_s);
	shmcoll_comm_abort(c->comm);
	exit(EXIT_INVALID);
}

/* One call with known inputs, every output element checked on every rank that gets one, as
 * mpi-bench does (reduce and gather: the root only). */
static void validate(const struct coll *c, int op, size_t count, size_t bytes)
{
	int64_t want;
	size_t idx;
	int rc;

	bench_sweep_fill(op, c->dtype, &c->vals, c->sbuf, c->rbuf, count, c->rank, c->size);
	rc = run_op(c, op, count);
	if (rc != 0)
		op_failed(c, op, bytes, rc);
	if (bench_sweep_check(op, c->dtype, &c->vals, c->rbuf, count, c->rank, c->size, &idx,
	                      &want))
		wrong(c, op, bytes, idx, want);
}

/* One call of --dist (bench_dist_time's call and agree). */
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
	int rc = shmcoll_allreduce(&elapsed, &most, 1, SHMCOLL_FLOAT64, SHMCOLL_MAX, d->c->comm);

	if (rc != 0)
		call_failed(d->c, "shmcoll_allreduce of the elapsed time", 0, rc);
	return most;
}

/* --dist: the calls timed one by one after one barrier; rank 0 prints the largest mean, median
 * and 99th percentile over the ranks, and returns that mean (what --fit fits; 0 elsewhere). */
static double time_dist(const struct coll *c, const struct opts *o, struct bench_out *out, int op,
                        size_t bytes, size_t count, long iters)
{
	struct dist_call dc = {c, op, count};
	struct bench_dist d;
	double mine[3], most[3] = {0}, alg;
	int rc = bench_dist_time(iters, o->busy.max_s, dist_call, dist_agree, &dc, &d);

	if (rc == -ENOMEM)
		call_failed(c, "allocating the per-call times", bytes, 0);
	if (rc != 0)
		op_failed(c, op, bytes, rc);
	mine[0] = d.mean * 1e6;
	mine[1] = d.p50 * 1e6;
	mine[2] = d.p99 * 1e6;
	rc = shmcoll_reduce(mine, most, 3, SHMCOLL_FLOAT64, SHMCOLL_MAX, 0, c->comm);
	if (rc != 0)
		call_failed(c, "shmcoll_reduce of the timings", bytes, rc);
	if (c->rank == 0) {
		alg = op == OP_BARRIER ? 0.0 : (double)bytes / (most[0] * 1e-6) / 1e9;
		bench_out_line(out, "%s,%s,%d,%zu,%.3f,%.4f,%.4f,%.3f,%.3f,%ld,%d\n", o->impl,
		               bench_sweep_ops[op], c->size, bytes, most[0], alg,
		               alg * bench_sweep_busbw(op, c->size), most[1], most[2], d.calls,
		               o->busy.hogs);
	}
	return most[0];
}

/* Warm up, then time iters calls: back to back after one barrier, or (--sync) each call alone
 * with a barrier after it, outside the timed span. Rank 0 prints the largest per-call average
 * and returns it in microseconds (0 on the other ranks). */
static double time_size(const struct coll *c, const struct opts *o, struct bench_out *out, int op,
                        size_t bytes, size_t count)
{
	long warm, iters = bench_sweep_iters(bytes, o->iscale, &warm), i;
	double t = 0.0, t0, lat, maxlat = 0.0, alg, spent = 0.0;
	int in_rbuf = 0;
	size_t src_len = o->dirty ? bench_sweep_src(op, count, shmcoll_dtype_size(c->dtype),
	                                            c->rank, c->size, &in_rbuf)
	                          : 0;
	void *src = in_rbuf ? c->rbuf : c->sbuf;
	int rc;

	for (i = 0; i < warm; i++) {
		rc = run_op(c, op, count);
		if (rc != 0)
			op_failed(c, op, bytes, rc);
	}
	rc = shmcoll_barrier(c->comm);
	if (rc != 0)
		call_failed(c, "shmcoll_barrier", bytes, rc);
	if (o->busy.dist)
		return time_dist(c, o, out, op, bytes, count, iters);
	if (!o->sync) {
		t0 = bench_now();
		for (i = 0; i < iters; i++) {
			if (src_len)
				spent += bench_sweep_dirty(src, src_len);
			rc = run_op(c, op, count);
			if (rc != 0)
				op_failed(c, op, bytes, rc);
		}
		t = bench_now() - t0 - spent;
	} else {
		for (i = 0; i < iters; i++) {
			if (src_len)
				bench_sweep_dirty(src, src_len);
			t0 = bench_now();
			rc = run_op(c, op, count);
			t += bench_now() - t0;
			if (rc != 0)
				op_failed(c, op, bytes, rc);
			rc = shmcoll_barrier(c->comm);
			if (rc != 0)
				call_failed(c, "shmcoll_barrier", bytes, rc);
		}
	}
	lat = t / (double)iters * 1e6;
	/* mpi-bench: MPI_Reduce(MPI_MAX) of the latencies to rank 0. */
	rc = shmcoll_reduce(&lat, &maxlat, 1, SHMCOLL_FLOAT64, SHMCOLL_MAX, 0, c->comm);
	if (rc != 0)
		call_failed(c, "shmcoll_reduce of the timings", bytes, rc);
	if (c->rank == 0) {
		alg = op == OP_BARRIER ? 0.0 : (double)bytes / (maxlat * 1e-6) / 1e9;
		bench_out_line(out, "%s,%s,%d,%zu,%.3f,%.4f,%.4f\n", o->impl, bench_sweep_ops[op],
		               c->size, bytes, maxlat, alg, alg * bench_sweep_busbw(op, c->size));
	}
	return maxlat;
}

/* --fit, after an op's sweep (rank 0): its row, or why there is none. A sweep that the ranks
 * left with fewer than 2 sizes (the divided ops skip sizes smaller than an element per rank)
 * is noted rather than fitted. */
static void print_fit(const struct coll *c, const struct opts *o, struct bench_out *out, int op,
                      const struct bench_fit_pts *p)
{
	struct bench_fit f;
	char row[256];

	if (bench_fit_line(p->bytes, p->lat_us, p->n, &f) != 0) {
		fprintf(stderr, PROG ": --fit: no fit for %s at P=%d: %d size%s measured\n",
		        bench_sweep_ops[op], c->size, p->n, p->n == 1 ? "" : "s");
		return;
	}
	bench_fit_row(row, sizeof(row), o->impl, bench_sweep_ops[op], c->size, &f);
	bench_out_line(out, "%s", row);
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int set_env(const char *name, const char *value)
{
	if (setenv(name, value, 1) != 0) {
		fprintf(stderr, PROG ": setenv %s: %s\n", name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Both buffers once, big enough for every op at the largest size (mpi-bench: 64
 * elements more), page-aligned and touched before any timing. */
static int alloc_buffers(struct coll *c, size_t bytes, int symmetric)
{
	if (symmetric) {
		c->sbuf = shmcoll_malloc(c->comm, bytes);
		c->rbuf = c->sbuf ? shmcoll_malloc(c->comm, bytes) : NULL;
		if (!c->rbuf) {
			fprintf(stderr, PROG ": rank %d: shmcoll_malloc(%zu) failed: %s\n", c->rank,
			        bytes, shmcoll_last_error(c->comm));
			return -1;
		}
	} else if (posix_memalign(&c->sbuf, 4096, bytes) != 0 ||
	           posix_memalign(&c->rbuf, 4096, bytes) != 0) {
		fprintf(stderr, PROG ": rank %d: out of memory for two %zu-byte buffers\n", c->rank,
		        bytes);
		return -1;
	}
	memset(c->sbuf, 0, bytes);
	memset(c->rbuf, 0, bytes);
	return 0;
}

static int free_buffers(struct coll *c, int symmetric)
{
	int rc = 0;

	if (!symmetric) {
		free(c->sbuf);
		free(c->rbuf);
	} else {
		if (c->rbuf)
			rc = shmcoll_free(c->comm, c->rbuf);
		if (rc == 0 && c->sbuf)
			rc = shmcoll_free(c->comm, c->sbuf);
		if (rc != 0)
			fprintf(stderr, PROG ": rank %d: shmcoll_free failed: %d (%s): %s\n",
			        c->rank, rc, shmcoll_strerror(rc), shmcoll_last_error(c->comm));
	}
	c->sbuf = c->rbuf = NULL;
	return rc;
}

int bench_coll_main(int argc, char **argv)
{
	struct coll c = {0};
	struct bench_out out;
	struct bench_fit_pts pts;
	struct opts o;
	size_t esize, cap, bytes, count;
	int op, rc, status = 0;
	double lat;
	char num[32];

	rc = parse(argc, argv, &o);
	if (rc != 0)
		return rc < 0 ? 0 : bench_usage_exit(rc);
	c.dtype = o.dtype;
	c.rop = o.rop;
	esize = shmcoll_dtype_size(o.dtype);
	if (o.minb < esize) /* mpi-bench: at least one float */
		o.minb = esize;
	if (o.maxb > SIZE_MAX / 2 - 64 * esize)
		return bench_usage_exit(bench_usage_error("--max-bytes %zu is too large", o.maxb));
	if (o.dirty && o.busy.dist)
		return bench_usage_exit(
		    bench_usage_error("--dirty rewrites buffers between timed spans, which --dist "
		                      "and --hog leave none"));
	/* A line through one point is any line: refuse before anything is timed. */
	if (o.fit && o.sel == OP_BARRIER)
		return bench_usage_exit(
		    bench_usage_error("--fit needs an op with a size; barrier has none"));
	if (o.fit && bench_fit_sizes(o.minb, o.maxb) < 2)
		return bench_usage_exit(bench_usage_error(
		    "--fit needs at least 2 sizes, and --min-bytes %zu --max-bytes %zu make %d",
		    o.minb, o.maxb, bench_fit_sizes(o.minb, o.maxb)));
	cap = (o.maxb / esize + 64) * esize;

	if (o.algo && set_env("SHMCOLL_ALGO", o.algo) < 0)
		return EXIT_FAIL;
	if (o.chunk) {
		size_t chunk;

		bench_parse_size(o.chunk, &chunk);
		snprintf(num, sizeof(num), "%zu", chunk);
		if (set_env("SHMCOLL_CHUNK_BYTES", num) < 0)
			return EXIT_FAIL;
	}
	/* --symmetric puts both buffers in this rank's part of the symmetric heap; the heap
	 * rounds each up to a line, so a page each is more than enough. (Beyond SIZE_MAX / 4
	 * they fit no arena, which bench_fit_arena says.) */
	if (o.symmetric &&
	    bench_fit_arena("--symmetric",
	                    cap > SIZE_MAX / 4 ? SIZE_MAX / 2 : 2 * round_up(cap, 4096)) < 0)
		return bench_usage_exit(EXIT_FAIL);
	if (bench_out_open(&out, o.csv, bench_is_rank0()) < 0)
		return EXIT_FAIL;

	rc = shmcoll_init(&c.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": shmcoll_init failed: %d (%s): %s\n", rc,
		        shmcoll_strerror(rc), shmcoll_last_error(NULL));
		bench_out_close(&out);
		return EXIT_FAIL;
	}
	c.rank = shmcoll_comm_rank(c.comm);
	c.size = shmcoll_comm_size(c.comm);
	out.print = c.rank == 0;
	bench_vals_init(&c.vals, c.dtype, c.rop, c.size);
	if (alloc_buffers(&c, cap, o.symmetric) < 0) {
		shmcoll_comm_abort(c.comm);
		exit(EXIT_FAIL);
	}

	if (c.rank == 0 && o.busy.hogs && bench_busy_start(&o.busy) < 0) {
		shmcoll_comm_abort(c.comm);
		exit(EXIT_FAIL);
	}
	if (o.header)
		bench_out_line(&out, "impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps%s\n%s",
		               o.busy.dist ? ",p50_us,p99_us,calls,hogs" : "",
		               o.fit ? bench_fit_header : "");
	for (op = 0; op < OP_COUNT; op++) {
		if (o.sel >= 0 && op != o.sel)
			continue;
		pts.n = 0;
		for (bytes = op == OP_BARRIER ? 0 : o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(op, bytes, esize, c.size, &count))
				continue;
			if (op != OP_BARRIER)
				validate(&c, op, count, bytes);
			lat = time_size(&c, &o, &out, op, bytes, count);
			if (op == OP_BARRIER)
				break;
			bench_fit_add(&pts, bytes, lat);
		}
		if (o.fit && op != OP_BARRIER && c.rank == 0)
			print_fit(&c, &o, &out, op, &pts);
	}

	bench_busy_stop(&o.busy);
	if (free_buffers(&c, o.symmetric) != 0)
		status = EXIT_FAIL;
	rc = shmcoll_comm_destroy(c.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": rank %d: shmcoll_comm_destroy failed: %d (%s)\n", c.rank,
		        rc, shmcoll_strerror(rc));
		status = EXIT_FAIL;
	}
	if (bench_out_close(&out) != 0)
		status = EXIT_FAIL;
	return status;
}
