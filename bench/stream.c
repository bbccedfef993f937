/* stream.c - the stream mode of shmcoll-bench: McCalpin's STREAM kernels (Copy, Scale, Add,
 * Triad) on arrays each rank owns, from L1-resident sizes to 4x the last-level cache, per rank
 * and summed over the ranks, each size checked against the expected final array values. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench/mem.h"
#include "bench/plot.h"

#define SCALAR    3.0 /* as McCalpin's */
#define NKERNELS  4
#define MAX_REPS  100
#define MIN_BYTES ((size_t)1024)
/* The relative error STREAM accepts. Each element goes through the same double operations as
 * the scalar recurrence, so they agree exactly unless a compiler contracts b + s*c into an FMA
 * in one and not the other. */
#define TOLERANCE 1e-13
/* Huge pages for arrays from this size on (THP is "madvise" on the reference VM). */
#define HUGE_BYTES ((size_t)2 << 20)
/* Where the arrays start (array_alloc()). */
#define ARRAY_ALIGN   ((size_t)1 << 28)
#define ARRAY_STAGGER ((size_t)1 << 20)

/* One timing repeats its kernel until about this many bytes moved (about 1 ms at 200 GB/s), so
 * that L1-resident arrays are not timed on a few hundred nanoseconds. Under a sanitizer the
 * figures mean nothing and tests want the run short. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifdef SANITIZED
#define TIMING_BYTES ((size_t)1 << 22)
#else
#define TIMING_BYTES ((size_t)1 << 28)
#endif

/* The kernels: plain C loops, each timed call a real call (noinline) that the compiler may not
 * merge with the next (the memory clobber in time_kernel()). gcc at -O2/-O3 vectorises them for
 * SSE2 only; target_clones adds AVX2 and AVX-512 versions chosen at load time. Measured at P=1
 * on the Zen 4 VM of 2026-11-25, SSE2 -> clones, GB/s: 8 KiB arrays (L1) Copy 112 -> 229, Scale 58
 * -> 235, Add 169 -> 282, Triad 86 -> 318; 64 KiB to 1 MiB (L2) Copy and Add the same (~115, ~97
 * past L2), Scale 58 -> 115, Triad 87 -> 117. clang 14 and sanitized builds get the plain loops.
 * Both compilers would turn copy() into a call of memcpy, which for large sizes uses non-temporal
 * stores: not what STREAM measures, so it is kept a loop. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(SANITIZED)
#define KERNEL      __attribute__((noinline, target_clones("avx512f", "avx2", "default")))
#define KERNEL_COPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#elif defined(__clang__)
#define KERNEL      __attribute__((noinline))
#define KERNEL_COPY __attribute__((no_builtin("memcpy")))
#elif defined(__GNUC__)
#define KERNEL      __attribute__((noinline))
#define KERNEL_COPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define KERNEL
#define KERNEL_COPY
#endif

enum { COPY, SCALE, ADD, TRIAD };

static const char *const kernel_name[NKERNELS] = {"copy", "scale", "add", "triad"};
static const char *const kernel_title[NKERNELS] = {"Copy", "Scale", "Add", "Triad"};
/* Arrays each kernel reads or writes per element, as STREAM counts bytes (no write-allocate). */
static const int kernel_arrays[NKERNELS] = {2, 2, 3, 3};

struct opts {
	int reps;
	size_t minb, maxb; /* 0: the default */
	const char *cpus, *csv, *plot;
};

/* A rank's arrays, each in an allocation of its own (raw) placed as array_alloc() says. */
struct arrays {
	double *a, *b, *c;
	void *raw[3];
};

/* Best and median GB/s of each kernel, for a rank or the aggregate, at one size. */
struct cell {
	double best[NKERNELS], median[NKERNELS];
};

/* What the whole run needs; results (rank 0 only) as cells[size * (P + 1) + who], who 0 for all
 * ranks and 1 + p for rank p. */
struct run {
	struct opts o;
	shmcoll_comm *comm;
	int rank, size, passes;
	struct bench_cpus cpus; /* the first size entries are the ranks' CPUs */
	struct bench_caches caches;
	size_t nsizes;
	struct arrays x;
	double *times;     /* this rank's seconds per kernel call, [pass][kernel] */
	double *all_times; /* rank 0: every rank's times, [rank][pass][kernel] */
	double *scratch;   /* rank 0: one kernel's times over the reps */
	struct cell *cells;
	FILE *csv; /* rank 0: opened before the run, so a bad path fails at once */
};

void bench_stream_usage(FILE *f)
{
	fprintf(f,
	        "  " PROG " stream [OPTIONS]   (under shmcoll-run -n P)\n"
	        "      STREAM's kernels on arrays of doubles each rank owns (first-touched on its\n"
	        "      CPU): Copy c=a, Scale b=3c, Add c=a+b, Triad a=b+3c, per rank and summed\n"
	        "      over all ranks (their bytes / the slowest rank's time). Each size is timed\n"
	        "      N times after a warm-up pass, all ranks starting each kernel together, and\n"
	        "      the final arrays are checked against the expected values.\n"
	        "      --reps N              timed repetitions per size, 1..%d (default 10)\n"
	        "      --min-bytes N         smallest array (default: the largest power of two of\n"
	        "                            which 3 arrays fit in L1d; at least 1K)\n"
	        "      --max-bytes N         largest array (default: 4 x the last-level cache,\n"
	        "                            rounded up to a power of two); sizes double from\n"
	        "                            the smallest\n"
	        "      --cpus LIST           CPUs for ranks 0, 1, ... (default: the job's CPUs)\n"
	        "      --csv FILE            write mode,ranks,rank,kernel,array_bytes,\n"
	        "                            working_set_bytes,reps,inner,best_GBps,median_GBps\n"
	        "                            (rank: all or 0, 1, ...)\n"
	        "      --plot FILE.png       draw best GB/s against the working set (gnuplot)\n"
	        "      GB/s = 1e9 bytes per second, bytes as STREAM counts them: Copy and Scale\n"
	        "      16 per element, Add and Triad 24; working set = 3 arrays.\n",
	        MAX_REPS);
}

static int parse(int argc, char **argv, struct opts *o)
{
	const char *a, *v;
	double n;
	size_t *sz;
	int i;

	*o = (struct opts){.reps = 10};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (bench_help(a))
			return -1;
		if (strcmp(a, "--reps") && strcmp(a, "--min-bytes") && strcmp(a, "--max-bytes") &&
		    strcmp(a, "--cpus") && strcmp(a, "--csv") && strcmp(a, "--plot"))
			return bench_usage_error("unknown option '%s' in the stream mode", a);
		v = bench_optarg(argc, argv, &i);
		if (!v)
			return EXIT_USAGE;
		if (!strcmp(a, "--reps")) {
			if (bench_parse_positive(v, &n) || n != (int)n || n > MAX_REPS)
				return bench_usage_error("bad --reps '%s' (1..%d)", v, MAX_REPS);
			o->reps = (int)n;
		} else if (!strcmp(a, "--min-bytes") || !strcmp(a, "--max-bytes")) {
			sz = !strcmp(a, "--min-bytes") ? &o->minb : &o->maxb;
			if (bench_parse_size(v, sz))
				return bench_usage_error("bad %s '%s'", a, v);
			if (*sz < MIN_BYTES)
				return bench_usage_error(
				    "%s %s is under 1 KiB: arrays that small are "
				    "timed mostly on the call",
				    a, v);
			if (*sz % sizeof(double))
				return bench_usage_error(
				    "%s %s is not a whole number of doubles (8 "
				    "bytes)",
				    a, v);
		} else if (!strcmp(a, "--cpus")) {
			o->cpus = v;
		} else if (!strcmp(a, "--csv")) {
			o->csv = v;
		} else {
			o->plot = v;
		}
	}
	return 0;
}

static size_t pow2_floor(size_t x)
{
	size_t p = 1;

	while (p <= x / 2)
		p *= 2;
	return p;
}

/* The sizes: the defaults from the caches, clamped so that every rank's three arrays fit in
 * three quarters of the machine's memory (an explicit size beyond that is refused). Every rank
 * computes the same. 0 or EXIT_USAGE. */
static int settle_sizes(struct run *r)
{
	struct opts *o = &r->o;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	size_t mem = pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : SIZE_MAX;
	size_t limit = mem / 4 * 3 / (size_t)r->size / 3, llc = bench_llc(&r->caches), b;
	char s1[32], s2[32], s3[32], s4[32];

	if (o->maxb > limit)
		return bench_usage_error(
		    "stream: --max-bytes %s: %d rank%s with 3 arrays of %s each need %s, more than "
		    "3/4 "
		    "of this machine's %s of memory (at most %s per array)",
		    bench_bytes_str(o->maxb, s1, sizeof(s1)), r->size, r->size == 1 ? "" : "s", s1,
		    bench_bytes_str(o->maxb / 1024 * 3 * (size_t)r->size * 1024, s2, sizeof(s2)),
		    bench_bytes_str(mem, s3, sizeof(s3)), bench_bytes_str(limit, s4, sizeof(s4)));
	if (o->minb && o->maxb && o->minb > o->maxb)
		return bench_usage_error("stream: --min-bytes %s is larger than --max-bytes %s",
		                         bench_bytes_str(o->minb, s1, sizeof(s1)),
		                         bench_bytes_str(o->maxb, s2, sizeof(s2)));
	if (!o->minb) {
		o->minb =
		    r->caches.l1d / 3 >= MIN_BYTES ? pow2_floor(r->caches.l1d / 3) : MIN_BYTES;
		if (o->maxb && o->minb > o->maxb)
			o->minb = o->maxb;
	}
	if (!o->maxb) {
		o->maxb = pow2_floor(llc);
		if (o->maxb < llc)
			o->maxb *= 2;
		o->maxb *= 4;
		while (o->maxb > limit && o->maxb / 2 >= o->minb)
			o->maxb /= 2;
		if (o->maxb < o->minb)
			o->maxb = o->minb;
		if (o->maxb > limit)
			return bench_usage_error(
			    "stream: --min-bytes %s: 3 arrays per rank do not fit "
			    "in this machine's memory",
			    bench_bytes_str(o->minb, s1, sizeof(s1)));
	}
	r->nsizes = 0;
	for (b = o->minb; b <= o->maxb; b *= 2)
		r->nsizes++;
	return 0;
}

/* An array of bytes, offset bytes past a 2^28 B boundary, in an allocation of its own (where
 * a sanitizer sees its bounds), advised for transparent huge pages where large enough.
 *
 * Where the arrays sit matters at L1-resident sizes. Each array 2 MiB-aligned, with ASLR
 * choosing the address bits above 21, Copy and Add on 8-16 KiB arrays ran at L2 speed (~115
 * GB/s instead of ~230 and ~280) in 5 of 16 runs on the Zen 4 VM of 2026-11-25, and with all
 * three 256 MiB-aligned, in every run (~80 GB/s): presumably L1's way predictor, which tells
 * the lines of one set apart by a hash of address bits 12-27, so two lines whose hashes agree
 * evict each other. Fixing bits 0-27 of every address (the 2^28 alignment) and starting b 1 MiB
 * and c 2 MiB further in than a (more than any L1 holds, so lines of two L1-resident arrays
 * never agree in those bits) gave the full speed in 16 of 16 runs, interleaved with the runs
 * above. The unused alignment costs address space only.
 *
 * Huge pages, measured at P=1 (THP is "madvise" on that VM): Copy on 128 MiB arrays
 * 28-31 GB/s with them, 23-27 without; 8 MiB arrays gain a little, smaller ones nothing. */
static double *array_alloc(void **raw, size_t bytes, size_t offset)
{
	size_t len = offset + bytes;
	int rc = posix_memalign(raw, ARRAY_ALIGN, len);

	if (rc) {
		*raw = NULL;
		errno = rc;
		return NULL;
	}
#ifdef MADV_HUGEPAGE
	/* Only advice: without THP the arrays simply get small pages. */
	if (len >= HUGE_BYTES)
		madvise(*raw, len / HUGE_BYTES * HUGE_BYTES, MADV_HUGEPAGE);
#endif
	return (double *)((char *)*raw + offset);
}

static void arrays_free(struct arrays *x)
{
	int i;

	for (i = 0; i < 3; i++)
		free(x->raw[i]);
	memset(x, 0, sizeof(*x));
}

/* Not touched here: each size's initialisation first-touches what it uses, on this rank's CPU. */
static int arrays_alloc(struct arrays *x, size_t bytes)
{
	x->a = array_alloc(&x->raw[0], bytes, 0);
	x->b = x->a ? array_alloc(&x->raw[1], bytes, ARRAY_STAGGER) : NULL;
	x->c = x->b ? array_alloc(&x->raw[2], bytes, 2 * ARRAY_STAGGER) : NULL;
	if (!x->c) {
		arrays_free(x);
		return -1;
	}
	return 0;
}

KERNEL KERNEL_COPY static void copy(double *restrict c, const double *restrict a, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		c[i] = a[i];
}

KERNEL static void scale(double *restrict b, const double *restrict c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = SCALAR * c[i];
}

KERNEL static void add(double *restrict c, const double *restrict a, const double *restrict b,
                       size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		c[i] = a[i] + b[i];
}

KERNEL static void triad(double *restrict a, const double *restrict b, const double *restrict c,
                         size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		a[i] = b[i] + SCALAR * c[i];
}

/* Calls kernel k inner times back to back: each kernel's inputs are not its output, so the
 * arrays end as after one call. Seconds per call. */
static double time_kernel(int k, const struct arrays *x, size_t n, long inner)
{
	double t0 = bench_now();
	long i;

	for (i = 0; i < inner; i++) {
		switch (k) {
		case COPY:
			copy(x->c, x->a, n);
			break;
		case SCALE:
			scale(x->b, x->c, n);
			break;
		case ADD:
			add(x->c, x->a, x->b, n);
			break;
		default:
			triad(x->a, x->b, x->c, n);
			break;
		}
		/* The calls are not independent to the compiler: no merging, no hoisting. */
		__asm__ __volatile__("" ::: "memory");
	}
	return (bench_now() - t0) / (double)inner;
}

static size_t kernel_bytes(int k, size_t array_bytes)
{
	return (size_t)kernel_arrays[k] * array_bytes;
}

static long inner_calls(int k, size_t array_bytes)
{
	size_t moved = kernel_bytes(k, array_bytes);

	return moved >= TIMING_BYTES ? 1 : (long)(TIMING_BYTES / moved);
}

static void arrays_init(const struct arrays *x, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		x->a[i] = 1.0;
		x->b[i] = 2.0;
		x->c[i] = 0.0;
	}
}

/* Checks one array against its expected value; prints the first wrong element. 0 or -1. */
static int check_array(const struct run *r, const char *name, const double *v, size_t n,
                       double want, size_t bytes)
{
	size_t i, bad = 0, first = 0;
	char s[32];

	for (i = 0; i < n; i++)
		/* Written so that a NaN fails too. */
		if (!(fabs(v[i] - want) <= TOLERANCE * fabs(want))) {
			if (!bad)
				first = i;
			bad++;
		}
	if (!bad)
		return 0;
	fprintf(stderr,
	        PROG ": stream: WRONG RESULT, rank %d (CPU %d), arrays of %s after %d passes "
	             "(a warm-up and %d reps): %zu of %zu elements of %s wrong; %s[%zu] = %.17g, "
	             "expected %.17g\n",
	        r->rank, r->cpus.cpu[r->rank], bench_bytes_str(bytes, s, sizeof(s)), r->passes,
	        r->o.reps, bad, n, name, name, first, v[first], want);
	return -1;
}

/* The final values of a, b and c after the passes, from the same recurrence on scalars. */
static int verify(const struct run *r, size_t n, size_t bytes)
{
	double a = 1.0, b = 2.0, c = 0.0;
	int p, bad = 0;

	for (p = 0; p < r->passes; p++) {
		c = a;
		b = SCALAR * c;
		c = a + b;
		a = b + SCALAR * c;
	}
	/* The tests' proof that this check can fail: the last rank's b is off in one place. */
	if (bench_fault("stream") && r->rank == r->size - 1)
		r->x.b[n / 2] += 1.0;
	bad |= check_array(r, "a", r->x.a, n, a, bytes);
	bad |= check_array(r, "b", r->x.b, n, b, bytes);
	bad |= check_array(r, "c", r->x.c, n, c, bytes);
	return bad ? -1 : 0;
}

/* Best and median GB/s of who (0 all ranks, 1 + p rank p) from the gathered times. The
 * aggregate of one pass is every rank's bytes over the slowest rank's time. */
static void cell_stats(struct run *r, struct cell *cell, int who, size_t bytes)
{
	int passes = r->passes, reps = r->o.reps, k, p, q;
	double *t = r->scratch, moved;

	for (k = 0; k < NKERNELS; k++) {
		for (p = 1; p < passes; p++) { /* pass 0 is the warm-up */
			double worst = 0;

			for (q = 0; q < r->size; q++) {
				double tq = r->all_times[((size_t)q * (size_t)passes + (size_t)p) *
				                             NKERNELS +
				                         (size_t)k];

				if ((who == 0 || who == q + 1) && tq > worst)
					worst = tq;
			}
			t[p - 1] = worst;
		}
		moved = (double)kernel_bytes(k, bytes) * (who ? 1 : r->size);
		cell->best[k] = moved / bench_min(t, reps) / 1e9;
		cell->median[k] = moved / bench_median(t, reps) / 1e9;
	}
}

static void print_title(const struct run *r)
{
	char set[256], l1[32], l2[32], l3[32];
	struct bench_cpus used = r->cpus;

	used.n = r->size;
	bench_cpus_format(&used, set, sizeof(set));
	if (r->size == 1)
		printf("stream: STREAM kernels, 1 rank on CPU %s, on first-touched arrays of its "
		       "own\n",
		       set);
	else
		printf("stream: STREAM kernels, %d ranks on CPUs %s (rank i on the i-th), each on "
		       "first-touched arrays of its own\n",
		       r->size, set);
	printf("caches: L1d %s, L2 %s, L3 %s", bench_bytes_str(r->caches.l1d, l1, sizeof(l1)),
	       bench_bytes_str(r->caches.l2, l2, sizeof(l2)),
	       bench_bytes_str(r->caches.l3, l3, sizeof(l3)));
	if (r->caches.l3_shared > 1)
		printf(" (shared by %d CPUs)", r->caches.l3_shared);
	printf("; %d rep%s per size after a warm-up pass; best / median\n", r->o.reps,
	       r->o.reps == 1 ? "" : "s");
	printf(
	    "GB/s = 1e9 bytes, STREAM byte counts (Copy, Scale 16 B per element; Add, Triad 24 B); "
	    "working set = 3 arrays per rank\n");
}

static void print_head(const char *what)
{
	int k;

	printf("\n%s\n%10s %11s", what, "array", "working set");
	for (k = 0; k < NKERNELS; k++)
		printf(" | %15s", kernel_title[k]);
	printf("\n%10s %11s", "", "");
	for (k = 0; k < NKERNELS; k++)
		printf(" | %7s %7s", "best", "median");
	printf("\n");
}

static void print_row(size_t bytes, const struct cell *c)
{
	char s1[32], s2[32];
	int k;

	printf("%10s %11s", bench_bytes_str(bytes, s1, sizeof(s1)),
	       bench_bytes_str(3 * bytes, s2, sizeof(s2)));
	for (k = 0; k < NKERNELS; k++)
		printf(" | %7.1f %7.1f", c->best[k], c->median[k]);
	printf("\n");
	fflush(stdout);
}

static int write_csv(struct run *r)
{
	FILE *f = r->csv;
	size_t s, bytes;
	int who, k;

	r->csv = NULL;
	fprintf(f, "mode,ranks,rank,kernel,array_bytes,working_set_bytes,reps,inner,best_GBps,"
	           "median_GBps\n");
	for (who = 0; who <= r->size; who++)
		for (s = 0, bytes = r->o.minb; s < r->nsizes; s++, bytes *= 2)
			for (k = 0; k < NKERNELS; k++) {
				const struct cell *c =
				    &r->cells[s * (size_t)(r->size + 1) + (size_t)who];

				if (who)
					fprintf(f, "stream,%d,%d,", r->size, who - 1);
				else
					fprintf(f, "stream,%d,all,", r->size);
				fprintf(f, "%s,%zu,%zu,%d,%ld,%.3f,%.3f\n", kernel_name[k], bytes,
				        3 * bytes, r->o.reps, inner_calls(k, bytes), c->best[k],
				        c->median[k]);
			}
	if (fclose(f) != 0) {
		fprintf(stderr, PROG ": stream: writing %s failed: %s\n", r->o.csv,
		        strerror(errno));
		return -1;
	}
	return 0;
}

static int plot(const struct run *r)
{
	static const char *const color[NKERNELS] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};
	char *script = NULL, host[128] = "", model[160], set[256], title[640], lab[32];
	size_t len = 0, s, bytes, t, every = r->nsizes > 10 ? 2 : 1;
	struct bench_cpus used = r->cpus;
	int who, k, ranks_drawn = r->size > 1 && r->size <= 8, rc;
	FILE *f = open_memstream(&script, &len);

	if (!f) {
		fprintf(stderr, PROG ": stream: --plot: %s\n", strerror(errno));
		return -1;
	}
	gethostname(host, sizeof(host) - 1);
	bench_cpu_model(model, sizeof(model));
	used.n = r->size;
	bench_cpus_format(&used, set, sizeof(set));
	snprintf(title, sizeof(title),
	         "STREAM kernels on %d rank%s (CPU%s %s) of %s%s%s\\n%s, best of %d reps%s",
	         r->size, r->size == 1 ? "" : "s", r->size == 1 ? "" : "s", set, host,
	         model[0] ? ", " : "", model,
	         r->size > 1 ? "GB/s summed over the ranks (thick) and per rank (thin)" : "GB/s",
	         r->o.reps, r->size > 8 ? "; more than 8 ranks: the sum only" : "");
	fprintf(f, "set terminal pngcairo noenhanced size 1000,640 font ',10'\nset output ");
	bench_gp_quote(f, r->o.plot);
	/* The title goes double-quoted so that \n breaks the line; host and CPU names carry no
	 * double quotes or backslashes worth keeping. */
	fprintf(f, "\nset title \"");
	for (t = 0; title[t]; t++)
		if (title[t] != '"' && !(title[t] == '\\' && title[t + 1] != 'n'))
			fputc(title[t], f);
	fprintf(f,
	        "\"\nset xlabel 'working set per rank (3 arrays)'\n"
	        "set ylabel 'GB/s (1e9 bytes/s, STREAM byte counts)'\n"
	        "set logscale x 2\nset xrange [%zu:%zu]\nset yrange [0:*]\n"
	        "set grid ytics\nset key below horizontal height 1\nset xtics (",
	        3 * r->o.minb * 3 / 4, 3 * r->o.maxb * 4 / 3);
	/* Ticks at the working sets measured (every other one when they would crowd), as the
	 * table's second column names them. */
	for (s = 0, bytes = r->o.minb; s < r->nsizes; s++, bytes *= 2)
		if (s % every == 0)
			fprintf(f, "%s'%s' %zu", s ? ", " : "",
			        bench_bytes_str(3 * bytes, lab, sizeof(lab)), 3 * bytes);
	fprintf(f, ")\n");
	bench_plot_cache_marks(f, &r->caches);
	for (who = 0; who <= (ranks_drawn ? r->size : 0); who++) {
		fprintf(f, "$r%d << EOD\n", who);
		for (s = 0, bytes = r->o.minb; s < r->nsizes; s++, bytes *= 2) {
			const struct cell *c = &r->cells[s * (size_t)(r->size + 1) + (size_t)who];

			fprintf(f, "%zu", 3 * bytes);
			for (k = 0; k < NKERNELS; k++)
				fprintf(f, " %.3f", c->best[k]);
			fprintf(f, "\n");
		}
		fprintf(f, "EOD\n");
	}
	fprintf(f, "plot ");
	for (k = 0; k < NKERNELS; k++)
		fprintf(
		    f,
		    "%s$r0 using 1:%d with linespoints lw 2 pt 7 ps 0.8 lc rgb '%s' title '%s%s'",
		    k ? ", " : "", k + 2, color[k], kernel_title[k],
		    r->size > 1 ? ", all ranks" : "");
	if (ranks_drawn)
		for (who = 1; who <= r->size; who++) {
			for (k = 0; k < NKERNELS; k++)
				fprintf(
				    f,
				    ", $r%d using 1:%d with lines lw 1 dt %d lc rgb '%s' notitle",
				    who, k + 2, 1 + who, color[k]);
			fprintf(
			    f,
			    ", NaN with lines lw 1 dt %d lc rgb '#444444' title 'rank %d (CPU %d)'",
			    1 + who, who - 1, r->cpus.cpu[who - 1]);
		}
	fprintf(f, "\n");
	if (fclose(f) != 0 || !script) {
		free(script);
		fprintf(stderr, PROG ": stream: --plot: out of memory\n");
		return -1;
	}
	rc = bench_gnuplot(script);
	free(script);
	return rc;
}

/* Agrees on a failure: every rank passes its own flag, all get the largest. A failed collective
 * counts as a failure (the launcher takes the job down if a peer is gone). */
static int agree(struct run *r, int bad)
{
	int32_t mine = bad, any = 0;
	int rc = shmcoll_allreduce(&mine, &any, 1, SHMCOLL_INT32, SHMCOLL_MAX, r->comm);

	if (rc < 0) {
		fprintf(stderr, PROG ": stream: rank %d: shmcoll_allreduce failed: %s: %s\n",
		        r->rank, shmcoll_strerror(rc), shmcoll_last_error(r->comm));
		return EXIT_FAIL;
	}
	return any;
}

/* One size on every rank: the passes, the check, and on rank 0 the statistics. 0, EXIT_INVALID
 * or EXIT_FAIL, the same on every rank. */
static int measure(struct run *r, size_t s, size_t bytes)
{
	size_t n = bytes / sizeof(double);
	int p, k, rc;

	arrays_init(&r->x, n);
	for (p = 0; p < r->passes; p++)
		for (k = 0; k < NKERNELS; k++) {
			/* Every rank starts each kernel together; the barrier is outside the time.
			 */
			rc = shmcoll_barrier(r->comm);
			if (rc < 0) {
				fprintf(stderr,
				        PROG ": stream: rank %d: shmcoll_barrier failed: %s: %s\n",
				        r->rank, shmcoll_strerror(rc), shmcoll_last_error(r->comm));
				return EXIT_FAIL;
			}
			r->times[p * NKERNELS + k] =
			    time_kernel(k, &r->x, n, inner_calls(k, bytes));
		}
	rc = agree(r, verify(r, n, bytes) < 0 ? EXIT_INVALID : 0);
	if (rc)
		return rc;
	rc = shmcoll_gather(r->times, r->all_times, (size_t)r->passes * NKERNELS, SHMCOLL_FLOAT64,
	                    0, r->comm);
	if (rc < 0) {
		fprintf(stderr, PROG ": stream: rank %d: shmcoll_gather failed: %s: %s\n", r->rank,
		        shmcoll_strerror(rc), shmcoll_last_error(r->comm));
		return EXIT_FAIL;
	}
	if (r->rank == 0)
		for (p = 0; p <= r->size; p++)
			cell_stats(r, &r->cells[s * (size_t)(r->size + 1) + (size_t)p], p, bytes);
	return 0;
}

/* Pins this rank, allocates its arrays and the result space. 0 or EXIT_FAIL, on every rank. */
static int setup(struct run *r)
{
	size_t per_rank = (size_t)r->passes * NKERNELS;
	char err[256], s[32];
	int bad = 0;

	if (bench_pin(r->cpus.cpu[r->rank], err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": stream: rank %d: %s\n", r->rank, err);
		bad = EXIT_FAIL;
	} else if (arrays_alloc(&r->x, r->o.maxb) < 0) {
		/* After pinning, so the pages come from this CPU's node when first touched. */
		fprintf(stderr, PROG ": stream: rank %d: cannot allocate 3 arrays of %s: %s\n",
		        r->rank, bench_bytes_str(r->o.maxb, s, sizeof(s)), strerror(errno));
		bad = EXIT_FAIL;
	} else {
		r->times = calloc(per_rank, sizeof(double));
		if (r->rank == 0) {
			r->all_times = calloc(per_rank * (size_t)r->size, sizeof(double));
			r->scratch = calloc((size_t)r->o.reps, sizeof(double));
			r->cells = calloc(r->nsizes * (size_t)(r->size + 1), sizeof(struct cell));
		}
		if (!r->times || (r->rank == 0 && (!r->all_times || !r->scratch || !r->cells))) {
			fprintf(stderr, PROG ": stream: rank %d: out of memory\n", r->rank);
			bad = EXIT_FAIL;
		} else if (r->rank == 0 && r->o.csv) {
			r->csv = fopen(r->o.csv, "w");
			if (!r->csv) {
				fprintf(stderr, PROG ": stream: cannot write %s: %s\n", r->o.csv,
				        strerror(errno));
				bad = EXIT_FAIL;
			}
		}
	}
	return agree(r, bad);
}

int bench_stream_main(int argc, char **argv)
{
	struct run *r = calloc(1, sizeof(*r));
	char what[32], head[160];
	size_t s, bytes;
	int rc, init, p;

	if (!r) {
		fprintf(stderr, PROG ": stream: out of memory\n");
		return EXIT_FAIL;
	}
	rc = parse(argc, argv, &r->o);
	if (rc < 0) { /* --help */
		free(r);
		return 0;
	}
	init = bench_mem_init("stream", &r->comm);
	if (init) {
		free(r);
		return rc ? rc : init;
	}
	if (rc) {
		rc = bench_stop_together(r->comm, rc);
		goto out;
	}
	r->rank = shmcoll_comm_rank(r->comm);
	r->size = shmcoll_comm_size(r->comm);
	r->passes = r->o.reps + 1;
	bench_caches(&r->caches);
	snprintf(what, sizeof(what), "%d rank%s", r->size, r->size == 1 ? "" : "s");
	/* Decided alike on every rank before anything runs, so all stop together. */
	rc = bench_cpus_for("stream", r->o.cpus, r->size, what, &r->cpus);
	if (!rc)
		rc = settle_sizes(r);
	if (rc) {
		rc = bench_stop_together(r->comm, rc);
		goto out;
	}
	rc = setup(r);
	if (rc)
		goto out;

	if (r->rank == 0) {
		print_title(r);
		if (r->size == 1)
			snprintf(head, sizeof(head), "rank 0 (CPU %d)", r->cpus.cpu[0]);
		else
			snprintf(head, sizeof(head),
			         "all %d ranks: the sum of their bytes / the "
			         "slowest one's time",
			         r->size);
		print_head(head);
	}
	for (s = 0, bytes = r->o.minb; s < r->nsizes; s++, bytes *= 2) {
		rc = measure(r, s, bytes);
		if (rc)
			goto out;
		if (r->rank == 0)
			print_row(bytes, &r->cells[s * (size_t)(r->size + 1)]);
	}
	if (r->rank == 0 && r->size > 1)
		for (p = 0; p < r->size; p++) {
			snprintf(head, sizeof(head),
			         "rank %d (CPU %d): its own bytes / its own time", p,
			         r->cpus.cpu[p]);
			print_head(head);
			for (s = 0, bytes = r->o.minb; s < r->nsizes; s++, bytes *= 2)
				print_row(bytes,
				          &r->cells[s * (size_t)(r->size + 1) + 1 + (size_t)p]);
		}
	if (r->csv && write_csv(r) < 0)
		rc = EXIT_FAIL;
	if (r->rank == 0 && r->o.plot && plot(r) < 0)
		rc = EXIT_FAIL;
out:
	if (r->csv)
		fclose(r->csv);
	arrays_free(&r->x);
	free(r->times);
	free(r->all_times);
	free(r->scratch);
	free(r->cells);
	shmcoll_comm_destroy(r->comm);
	free(r);
	return rc;
}
