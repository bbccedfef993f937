/* kernels.c - the kernels mode of shmcoll-bench: the reduction kernels of lib/kernels.h at every
 * ISA level this CPU offers, each checked against the exact result, timed next to memcpy, in
 * one process. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "lib/kernels/kernels.h"

#define MAX_NSRC 1024

struct opts {
	int all_dtypes, all_ops;
	shmcoll_dtype dtype;
	shmcoll_op op;
	int nsrc;
	size_t minb, maxb;
	double iscale;
	int header;
	const char *impl;
	const char *csv;
};

struct bufs {
	void *srcs[MAX_NSRC];
	void *dst;
	void *ref; /* the exact result for the current (dtype, op) at the largest size */
	size_t bytes;
};

void bench_kernels_usage(FILE *f)
{
	fprintf(
	    f,
	    "  " PROG " kernels [OPTIONS]\n"
	    "      Time the reduction kernels (dst = op(src0, ..., srcN-1)) at every ISA level\n"
	    "      this CPU offers, next to memcpy, in one process (no launcher needed; under\n"
	    "      one, rank 0 runs and the others exit). Each result is checked first.\n"
	    "      --dtype NAME|all      element type (default float32)\n"
	    "      --reduce-op NAME|all  operation (default sum); bitwise ops on floating\n"
	    "                            types do not exist and are skipped\n"
	    "      --nsrc N              sources per call, 1..%d (default 2, as at P=2)\n"
	    "      --min-bytes N         smallest size of one source (default 4)\n"
	    "      --max-bytes N         largest size of one source (default 64M)\n"
	    "      --impl LABEL, --iters-scale F, --no-header, --csv FILE  as above\n"
	    "      Prints impl,mode,isa,dtype,op,nsrc,bytes,ns_per_call,GBps,memcpy_GBps:\n"
	    "      bytes = one source; GBps = (nsrc+1)*bytes per call time (bytes read and\n"
	    "      written); memcpy_GBps = 2*bytes per memcpy of bytes, for comparison;\n"
	    "      isa avx512=avx2: that level hands out the lower level's kernel.\n",
	    MAX_NSRC);
}

static int parse(int argc, char **argv, struct opts *o)
{
	const char *a, *v;
	double n;
	int i, x;

	*o = (struct opts){
	    .dtype = SHMCOLL_FLOAT32,
	    .op = SHMCOLL_SUM,
	    .nsrc = 2,
	    .minb = 4,
	    .maxb = (size_t)64 << 20,
	    .iscale = 1.0,
	    .header = 1,
	    .impl = "shmcoll",
	};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (bench_help(a))
			return -1;
		if (!strcmp(a, "--no-header")) {
			o->header = 0;
			continue;
		}
		if (strcmp(a, "--dtype") && strcmp(a, "--reduce-op") && strcmp(a, "--nsrc") &&
		    strcmp(a, "--min-bytes") && strcmp(a, "--max-bytes") && strcmp(a, "--impl") &&
		    strcmp(a, "--iters-scale") && strcmp(a, "--csv"))
			return bench_usage_error("unknown option '%s' in the kernels mode", a);
		v = bench_optarg(argc, argv, &i);
		if (!v)
			return EXIT_USAGE;
		if (!strcmp(a, "--dtype")) {
			o->all_dtypes = !strcmp(v, "all");
			x = bench_dtype_parse(v);
			if (x < 0 && !o->all_dtypes)
				return bench_usage_error("unknown --dtype '%s'", v);
			o->dtype = x < 0 ? SHMCOLL_FLOAT32 : (shmcoll_dtype)x;
		} else if (!strcmp(a, "--reduce-op")) {
			o->all_ops = !strcmp(v, "all");
			x = bench_op_parse(v);
			if (x < 0 && !o->all_ops)
				return bench_usage_error("unknown --reduce-op '%s'", v);
			o->op = x < 0 ? SHMCOLL_SUM : (shmcoll_op)x;
		} else if (!strcmp(a, "--nsrc")) {
			if (bench_parse_positive(v, &n) || n != (int)n || n > MAX_NSRC)
				return bench_usage_error("bad --nsrc '%s' (1..%d)", v, MAX_NSRC);
			o->nsrc = (int)n;
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
		} else {
			o->csv = v;
		}
	}
	if (!o->all_dtypes && !o->all_ops &&
	    !shmcoll__reduce_lookup_isa(SHMCOLL_ISA_SCALAR, o->dtype, o->op))
		return bench_usage_error("there is no %s kernel for %s", bench_op_name(o->op),
		                         bench_dtype_name(o->dtype));
	if (o->minb < 1)
		o->minb = 1;
	if (o->maxb > SIZE_MAX / 4)
		return bench_usage_error("--max-bytes %zu is too large", o->maxb);
	return 0;
}

/* About 2^28 bytes moved per measurement (a few milliseconds at tens of GB/s), at least 20 and
 * at most a million calls, scaled by --iters-scale; a tenth more first as warm-up. */
static long iterations(size_t traffic, double scale)
{
	double it = (double)((size_t)1 << 28) / (double)traffic;

	if (it > 1e6)
		it = 1e6;
	if (it < 20)
		it = 20;
	it *= scale;
	return it < 1 ? 1 : (long)it;
}

static double time_memcpy(const struct bufs *b, size_t bytes, double scale)
{
	long iters = iterations(2 * bytes, scale), i;
	double t0;

	for (i = 0; i < iters / 10 + 2; i++)
		memcpy(b->dst, b->srcs[0], bytes);
	t0 = bench_now();
	for (i = 0; i < iters; i++)
		memcpy(b->dst, b->srcs[0], bytes);
	return (bench_now() - t0) / (double)iters;
}

static double time_kernel(shmcoll__reduce_fn fn, const struct bufs *b, int nsrc, size_t count,
                          size_t traffic, double scale)
{
	long iters = iterations(traffic, scale), i;
	const void *const *srcs = (const void *const *)b->srcs;
	double t0;

	for (i = 0; i < iters / 10 + 2; i++)
		fn(b->dst, srcs, nsrc, count);
	t0 = bench_now();
	for (i = 0; i < iters; i++)
		fn(b->dst, srcs, nsrc, count);
	return (bench_now() - t0) / (double)iters;
}

/* Sources and the exact result for (dtype, op) over the largest size; every size uses a prefix.
 * The values are small integers (values.c), so no kernel meets a subnormal or a NaN. */
static void fill(struct bufs *b, shmcoll_dtype dtype, shmcoll_op op, int nsrc)
{
	size_t count = b->bytes / shmcoll_dtype_size(dtype), i;
	struct bench_vals vals;
	int s;

	bench_vals_init(&vals, dtype, op, nsrc);
	for (s = 0; s < nsrc; s++)
		for (i = 0; i < count; i++)
			bench_elem_store(b->srcs[s], i, dtype, bench_vals_input(&vals, s, i));
	for (i = 0; i < count; i++)
		bench_elem_store(b->ref, i, dtype, bench_vals_result(&vals, i));
}

static int check(const struct bufs *b, int isa, shmcoll_dtype dtype, shmcoll_op op, int nsrc,
                 size_t count)
{
	size_t esize = shmcoll_dtype_size(dtype), i;
	char got[64], want[64];

	if (memcmp(b->dst, b->ref, count * esize) == 0)
		return 0;
	for (i = 0;
	     i < count && !memcmp((char *)b->dst + i * esize, (char *)b->ref + i * esize, esize);
	     i++)
		;
	bench_elem_format(b->dst, i, dtype, got, sizeof(got));
	bench_elem_format(b->ref, i, dtype, want, sizeof(want));
	fprintf(stderr,
	        "VALIDATION FAILED kernel %s %s %s nsrc %d count %zu idx %zu got %s want %s\n",
	        shmcoll__isa_name(isa), bench_dtype_name(dtype), bench_op_name(op), nsrc, count, i,
	        got, want);
	return -1;
}

/* The ISA column: the level's name, or "avx512=avx2" when the level hands out a lower level's
 * kernel for this pair (lib/kernels.h allows it), so the row does not pass for its own. */
static const char *isa_label(int isa, shmcoll_dtype dtype, shmcoll_op op, char *buf, size_t len)
{
	shmcoll__reduce_fn fn = shmcoll__reduce_lookup_isa(isa, dtype, op);
	int lower;

	for (lower = 0; lower < isa; lower++)
		if (shmcoll__reduce_lookup_isa(lower, dtype, op) == fn) {
			snprintf(buf, len, "%s=%s", shmcoll__isa_name(isa),
			         shmcoll__isa_name(lower));
			return buf;
		}
	return shmcoll__isa_name(isa);
}

static int alloc_bufs(struct bufs *b, size_t bytes, int nsrc)
{
	int s;

	memset(b, 0, sizeof(*b));
	b->bytes = bytes;
	bytes += 64;
	for (s = 0; s < nsrc; s++)
		if (posix_memalign(&b->srcs[s], 4096, bytes) != 0)
			return -1;
	if (posix_memalign(&b->dst, 4096, bytes) != 0 || posix_memalign(&b->ref, 4096, bytes))
		return -1;
	/* Touch everything once, so no timing pays for page faults. */
	for (s = 0; s < nsrc; s++)
		memset(b->srcs[s], 0, bytes);
	memset(b->dst, 0, bytes);
	return 0;
}

static void free_bufs(struct bufs *b)
{
	int s;

	for (s = 0; s < MAX_NSRC; s++)
		free(b->srcs[s]);
	free(b->dst);
	free(b->ref);
}

int bench_kernels_main(int argc, char **argv)
{
	struct bufs b;
	struct bench_out out;
	struct opts o;
	double *copy_s = NULL, t;
	char label[64];
	size_t bytes, count, esize;
	int rc, d, op, isa, k, nsizes = 0, status = 0;
	shmcoll__reduce_fn fn;

	rc = parse(argc, argv, &o);
	/* The other ranks of a launch stand by whatever happens (below), so only rank 0's
	 * status tells, and a rank that fails first cannot cut its message off. */
	if (rc != 0)
		return rc < 0 || !bench_is_rank0() ? 0 : rc;
	if (!bench_is_rank0()) /* one process measures; the other ranks of a launch stand by */
		return 0;
	if (alloc_bufs(&b, o.maxb, o.nsrc) < 0) {
		fprintf(stderr, PROG ": out of memory for %d sources of %zu bytes\n", o.nsrc + 2,
		        o.maxb);
		free_bufs(&b);
		return EXIT_FAIL;
	}
	for (bytes = o.minb; bytes <= o.maxb; bytes *= 2)
		nsizes++;
	copy_s = calloc((size_t)nsizes + 1, sizeof(*copy_s));
	if (!copy_s || bench_out_open(&out, o.csv, 1) < 0) {
		free(copy_s);
		free_bufs(&b);
		return EXIT_FAIL;
	}
	for (k = 0, bytes = o.minb; bytes <= o.maxb; bytes *= 2, k++)
		copy_s[k] = time_memcpy(&b, bytes, o.iscale);

	if (o.header)
		bench_out_line(&out,
		               "impl,mode,isa,dtype,op,nsrc,bytes,ns_per_call,GBps,memcpy_GBps\n");
	for (d = 0; d < SHMCOLL_DTYPE_COUNT && !status; d++) {
		if (!o.all_dtypes && d != (int)o.dtype)
			continue;
		esize = shmcoll_dtype_size((shmcoll_dtype)d);
		for (op = 0; op < SHMCOLL_OP_COUNT && !status; op++) {
			if ((!o.all_ops && op != (int)o.op) ||
			    !shmcoll__reduce_lookup_isa(SHMCOLL_ISA_SCALAR, (shmcoll_dtype)d,
			                                (shmcoll_op)op))
				continue;
			fill(&b, (shmcoll_dtype)d, (shmcoll_op)op, o.nsrc);
			for (k = 0, bytes = o.minb; bytes <= o.maxb && !status; bytes *= 2, k++) {
				count = bytes / esize;
				if (count == 0)
					continue;
				for (isa = 0; isa < SHMCOLL_ISA_COUNT; isa++) {
					if (!shmcoll__isa_available(isa))
						continue;
					fn = shmcoll__reduce_lookup_isa(isa, (shmcoll_dtype)d,
					                                (shmcoll_op)op);
					if (!fn)
						continue;
					memset(b.dst, 0, count * esize);
					fn(b.dst, (const void *const *)b.srcs, o.nsrc, count);
					if (check(&b, isa, (shmcoll_dtype)d, (shmcoll_op)op, o.nsrc,
					          count) < 0) {
						status = EXIT_INVALID;
						break;
					}
					t = time_kernel(fn, &b, o.nsrc, count,
					                (size_t)(o.nsrc + 1) * count * esize,
					                o.iscale);
					bench_out_line(
					    &out, "%s,kernels,%s,%s,%s,%d,%zu,%.2f,%.3f,%.3f\n",
					    o.impl,
					    isa_label(isa, (shmcoll_dtype)d, (shmcoll_op)op, label,
					              sizeof(label)),
					    bench_dtype_name((shmcoll_dtype)d),
					    bench_op_name((shmcoll_op)op), o.nsrc, bytes, t * 1e9,
					    (double)(o.nsrc + 1) * (double)(count * esize) / t /
					        1e9,
					    2.0 * (double)bytes / copy_s[k] / 1e9);
				}
			}
		}
	}
	if (bench_out_close(&out) != 0 && !status)
		status = EXIT_FAIL;
	free(copy_s);
	free_bufs(&b);
	return status;
}
