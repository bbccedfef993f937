/* vcoll.c - the vcoll mode of shmcoll-bench: each variable-count collective against its
 * equal-count form at the same total bytes (allgatherv / allgather, gatherv / gather, scatterv /
 * scatter, alltoallv / alltoall, reduce_scatterv / reduce_scatter, and scan and exscan / allreduce
 * as a reference point), for the target "v-variants within 1.2x of the equal-count form". Timed
 * exactly the way bench/mpi/mpi-bench.c times MPI's (vsweep.c: options, counts, checks, CSV,
 * plot), so the two CSVs join row by row. Per size: both calls checked once, then, --reps times,
 * the v-call and the equal-count call each timed as the collectives mode times a call (warm-up,
 * a barrier, back-to-back calls, the largest over the ranks of the per-call average); the medians
 * of those repeats are reported. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/sweep.h"
#include "bench/vsweep.h"

struct vc {
	shmcoll_comm *comm;
	int rank, size;
	const struct bench_vsweep_opts *o;
	void *sbuf, *rbuf;
	struct bench_vals vals;
	struct bench_vsweep_call call;
};

void bench_vcoll_usage(FILE *f)
{
	fprintf(
	    f,
	    "  " PROG " vcoll [OPTIONS]\n"
	    "      The variable-count collectives against their equal-count forms at the same\n"
	    "      total bytes (the target: within 1.2x); run it under the launcher:\n"
	    "        shmcoll-run -n P " PROG " vcoll [OPTIONS]\n"
	    "      allgatherv/allgather gatherv/gather scatterv/scatter alltoallv/alltoall\n"
	    "      reduce_scatterv/reduce_scatter (sum), and scan and exscan against allreduce\n"
	    "      of the same count, a reference point (one count on every rank: --counts and\n"
	    "      --gaps do not change them; nor --gaps reduce_scatterv, which has no\n"
	    "      displacements). Rank 0 is the root. Per size, both calls are checked once\n"
	    "      (every rank checks its output, gaps and the %d bytes past the last block\n"
	    "      unwritten), then timed in turn, --reps times, as the collectives mode times\n"
	    "      a call (back to back after a barrier, the largest per-call average over the\n"
	    "      ranks); the medians are reported.\n",
	    VSWEEP_TAIL_BYTES);
	bench_vsweep_usage(f, "      ", "shmcoll", 0);
	fprintf(
	    f, "      Prints impl,op,ranks,bytes,counts,lat_us,equal_us,ratio (rank 0): op the\n"
	       "      v-call, bytes the equal-count call's size, counts even, skew, even+gaps or\n"
	       "      skew+gaps, lat_us the v-call's time, equal_us the equal-count call's, ratio\n"
	       "      lat_us / equal_us; the sizes above 1.2x are summed up on stderr.\n");
}

__attribute__((cold)) static _Noreturn void call_failed(const struct vc *v, const char *what,
                                                        size_t bytes, int rc)
{
	fprintf(stderr, PROG ": rank %d: %s (bytes %zu) failed: %d (%s): %s\n", v->rank, what,
	        bytes, rc, shmcoll_strerror(rc), shmcoll_last_error(v->comm));
	shmcoll_comm_abort(v->comm);
	exit(EXIT_FAIL);
}

__attribute__((cold)) static _Noreturn void form_failed(const struct vc *v, int form, size_t bytes,
                                                        int rc)
{
	char what[64];

	snprintf(what, sizeof(what), "shmcoll_%s",
	         form ? bench_sweep_ops[bench_vsweep_equal(v->call.op)]
	              : bench_vsweep_ops[v->call.op]);
	call_failed(v, what, bytes, rc);
}

/* The v-call (form 0) or its equal-count form (1), as coll.c makes the latter (rank 0 the root,
 * ch = count / P per block). */
static inline int run(const struct vc *v, int form)
{
	const struct bench_vsweep_call *c = &v->call;
	const shmcoll_dtype dt = c->dtype;
	size_t ch = c->count / (size_t)v->size;

	if (form) {
		switch (bench_vsweep_equal(c->op)) {
		case OP_ALLGATHER:
			return shmcoll_allgather(v->sbuf, v->rbuf, ch, dt, v->comm);
		case OP_GATHER:
			return shmcoll_gather(v->sbuf, v->rbuf, ch, dt, 0, v->comm);
		case OP_SCATTER:
			return shmcoll_scatter(v->sbuf, v->rbuf, ch, dt, 0, v->comm);
		case OP_ALLTOALL:
			return shmcoll_alltoall(v->sbuf, v->rbuf, ch, dt, v->comm);
		case OP_REDUCE_SCATTER:
			return shmcoll_reduce_scatter(v->sbuf, v->rbuf, ch, dt, SHMCOLL_SUM,
			                              v->comm);
		default:
			return shmcoll_allreduce(v->sbuf, v->rbuf, c->count, dt, SHMCOLL_SUM,
			                         v->comm);
		}
	}
	switch (c->op) {
	case V_ALLGATHERV:
		return shmcoll_allgatherv(v->sbuf, c->cnt[v->rank], v->rbuf, c->cnt, c->dsp, dt,
		                          v->comm);
	case V_GATHERV:
		return shmcoll_gatherv(v->sbuf, c->cnt[v->rank], v->rbuf, c->cnt, c->dsp, dt, 0,
		                       v->comm);
	case V_SCATTERV:
		return shmcoll_scatterv(v->sbuf, c->cnt, c->dsp, v->rbuf, c->cnt[v->rank], dt, 0,
		                        v->comm);
	case V_ALLTOALLV:
		return shmcoll_alltoallv(v->sbuf, c->scnt, c->sdsp, v->rbuf, c->rcnt, c->rdsp, dt,
		                         v->comm);
	case V_REDUCE_SCATTERV:
		return shmcoll_reduce_scatterv(v->sbuf, v->rbuf, c->cnt, dt, SHMCOLL_SUM, v->comm);
	case V_SCAN:
		return shmcoll_scan(v->sbuf, v->rbuf, c->count, dt, SHMCOLL_SUM, v->comm);
	default:
		return shmcoll_exscan(v->sbuf, v->rbuf, c->count, dt, SHMCOLL_SUM, v->comm);
	}
}

/* Both calls once with known inputs, every output element checked on every rank that gets one;
 * then the ranks agree, so that all stop together (exit status 3) when any found a wrong
 * element. Returns that. */
static int validate(const struct vc *v, size_t bytes)
{
	char msg[512];
	int form, rc;
	int32_t bad = 0, any = 0;

	for (form = 0; form < 2; form++) { /* both on every rank: the calls must match */
		bench_vsweep_fill(&v->call, form, v->sbuf, v->rbuf);
		rc = run(v, form);
		if (rc != 0)
			form_failed(v, form, bytes, rc);
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
	rc = shmcoll_allreduce(&bad, &any, 1, SHMCOLL_INT32, SHMCOLL_MAX, v->comm);
	if (rc != 0)
		call_failed(v, "shmcoll_allreduce of the checks", bytes, rc);
	return any;
}

/* One timed run of a form, as coll.c's time_size: warm-up, a barrier, iters calls back to back.
 * This rank's per-call average, in us. */
static double time_form(const struct vc *v, int form, size_t bytes)
{
	long warm, iters = bench_sweep_iters(bytes, v->o->iscale, &warm), i;
	double t0;
	int rc;

	for (i = 0; i < warm; i++) {
		rc = run(v, form);
		if (rc != 0)
			form_failed(v, form, bytes, rc);
	}
	rc = shmcoll_barrier(v->comm);
	if (rc != 0)
		call_failed(v, "shmcoll_barrier", bytes, rc);
	t0 = bench_now();
	for (i = 0; i < iters; i++) {
		rc = run(v, form);
		if (rc != 0)
			form_failed(v, form, bytes, rc);
	}
	return (bench_now() - t0) / (double)iters * 1e6;
}

/* One size: the forms in turn, reps times; rank 0 gets the medians over the repeats of the
 * largest per-call averages. */
static void time_size(const struct vc *v, size_t bytes, double *lat_us, double *equal_us)
{
	double t[2 * VSWEEP_MAX_REPS], mx[2 * VSWEEP_MAX_REPS], a[VSWEEP_MAX_REPS],
	    b[VSWEEP_MAX_REPS];
	int reps = v->o->reps, k, rc;

	for (k = 0; k < reps; k++) {
		t[2 * k] = time_form(v, 0, bytes);
		t[2 * k + 1] = time_form(v, 1, bytes);
	}
	/* mpi-bench: MPI_Reduce(MPI_MAX) of the latencies to rank 0. */
	rc = shmcoll_reduce(t, mx, 2 * (size_t)reps, SHMCOLL_FLOAT64, SHMCOLL_MAX, 0, v->comm);
	if (rc != 0)
		call_failed(v, "shmcoll_reduce of the timings", bytes, rc);
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

int bench_vcoll_main(int argc, char **argv)
{
	struct bench_vsweep_opts o;
	struct bench_vsweep_rows rows = {0};
	struct bench_out out;
	struct vc v = {0};
	char err[256];
	size_t cap, esize, bytes, count;
	double lat, equal;
	int rc, op, status = 0;

	rc = bench_vsweep_parse(argc, argv, "shmcoll", 0, &o, err, sizeof(err));
	if (rc < 0) {
		if (bench_is_rank0())
			bench_usage(stdout);
		return 0;
	}
	if (rc != 0)
		return bench_usage_exit(bench_usage_error("%s", err));
	esize = bench_vsweep_esize(o.dtype);
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
	cap = bench_vsweep_cap(&o, v.size);
	bench_vals_init(&v.vals, o.dtype, SHMCOLL_SUM, v.size);
	/* Both buffers once, big enough for every call at the largest size, page-aligned and
	 * touched before any timing. */
	if (bench_vsweep_call_init(&v.call, &o, &v.vals, v.rank, v.size, 1) < 0 ||
	    posix_memalign(&v.sbuf, 4096, cap) != 0 || posix_memalign(&v.rbuf, 4096, cap) != 0) {
		fprintf(stderr, PROG ": rank %d: out of memory for two %zu-byte buffers\n", v.rank,
		        cap);
		shmcoll_comm_abort(v.comm);
		exit(EXIT_FAIL);
	}
	memset(v.sbuf, 0, cap);
	memset(v.rbuf, 0, cap);

	if (o.header)
		bench_vsweep_header(&out);
	for (op = 0; op < V_COUNT && !status; op++) {
		if (o.op >= 0 && op != o.op)
			continue;
		for (bytes = o.minb; bytes <= o.maxb; bytes *= 2) {
			if (!bench_sweep_count(bench_vsweep_equal(op), bytes, esize, v.size,
			                       &count))
				continue;
			bench_vsweep_layout(&v.call, op, count);
			if (validate(&v, bytes)) {
				status = EXIT_INVALID;
				break;
			}
			time_size(&v, bytes, &lat, &equal);
			if (v.rank == 0 &&
			    bench_vsweep_row(&out, &rows, &o, v.size, op, bytes, lat, equal) < 0) {
				shmcoll_comm_abort(v.comm);
				exit(EXIT_FAIL);
			}
		}
	}

	free(v.sbuf);
	free(v.rbuf);
	bench_vsweep_call_free(&v.call);
	rc = shmcoll_comm_destroy(v.comm);
	if (rc != 0) {
		fprintf(stderr, PROG ": rank %d: shmcoll_comm_destroy failed: %d (%s)\n", v.rank,
		        rc, shmcoll_strerror(rc));
		status = status ? status : EXIT_FAIL;
	}
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	if (v.rank == 0 && !status) {
		bench_vsweep_summary(&rows, &o);
		if (o.plot && bench_vsweep_plot(o.plot, &o, v.size, &rows) < 0)
			status = EXIT_FAIL;
	}
	bench_vsweep_rows_free(&rows);
	return status;
}
