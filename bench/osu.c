/* osu.c - what the point-to-point and overlap modes of both harnesses share (osu.h), and the CSV
 * output of bench.h, which needs no part of the library either. */
#include "bench/osu.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/plot.h"
#include "bench/sweep.h"

const char *bench_prog = PROG;

const char *const bench_osu_tests[OSU_NTESTS] = {"latency", "bw", "bibw"};

/* ---- the CSV (bench.h) ---- */

int bench_out_open(struct bench_out *o, const char *path, int print)
{
	o->print = print;
	o->file = NULL;
	if (!path || !print)
		return 0;
	o->file = fopen(path, "w");
	if (!o->file) {
		fprintf(stderr, "%s: cannot write %s: %s\n", bench_prog, path, strerror(errno));
		return -1;
	}
	return 0;
}

void bench_out_line(struct bench_out *o, const char *fmt, ...)
{
	va_list ap;

	if (!o->print)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (o->file) {
		va_start(ap, fmt);
		vfprintf(o->file, fmt, ap);
		va_end(ap);
		fflush(o->file);
	}
}

int bench_out_close(struct bench_out *o)
{
	int rc = 0;

	if (o->file && fclose(o->file) != 0) {
		fprintf(stderr, "%s: writing the CSV file failed: %s\n", bench_prog,
		        strerror(errno));
		rc = -1;
	}
	o->file = NULL;
	return rc;
}

/* ---- options ---- */

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

static int test_parse(const char *s)
{
	int i;

	for (i = 0; i < OSU_NTESTS; i++)
		if (!strcmp(s, bench_osu_tests[i]))
			return i;
	return -1;
}

int bench_osu_parse(int overlap, int argc, char **argv, const char *impl, struct bench_osu_opts *o,
                    char *err, size_t errlen)
{
	const char *mode = overlap ? "overlap" : "p2p", *a, *v;
	double x;
	int i;

	*o = (struct bench_osu_opts){
	    .overlap = overlap,
	    .test = -1,
	    .op = OP_ALLREDUCE,
	    .header = 1,
	    .minb = overlap ? 4 : 1,
	    .maxb = (size_t)16 << 20,
	    .iscale = 1.0,
	    .impl = impl,
	};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return -1;
		if (!strcmp(a, "--no-header")) {
			o->header = 0;
			continue;
		}
		if (!strcmp(a, "--symmetric")) {
			o->symmetric = 1;
			continue;
		}
		if (strcmp(a, "--min-bytes") && strcmp(a, "--max-bytes") && strcmp(a, "--impl") &&
		    strcmp(a, "--iters-scale") && strcmp(a, "--csv") && strcmp(a, "--plot") &&
		    (overlap || strcmp(a, "--test")) &&
		    (!overlap || (strcmp(a, "--op") && strcmp(a, "--test-every"))))
			return fail(err, errlen, "unknown option '%s' in the %s mode", a, mode);
		if (i + 1 >= argc)
			return fail(err, errlen, "option %s needs a value", a);
		v = argv[++i];
		if (!strcmp(a, "--test")) {
			o->test = test_parse(v);
			if (o->test < 0 && strcmp(v, "all"))
				return fail(err, errlen,
				            "unknown --test '%s' (latency, bw, bibw or all)", v);
		} else if (!strcmp(a, "--op")) {
			o->op = bench_sweep_op(v);
			if (o->op < 0 && strcmp(v, "all"))
				return fail(err, errlen, "unknown --op '%s'", v);
		} else if (!strcmp(a, "--test-every")) {
			char *end;

			errno = 0;
			o->test_every = strtol(v, &end, 10);
			if (errno || end == v || *end || o->test_every < 0)
				return fail(err, errlen, "bad --test-every '%s' (0 or more)", v);
		} else if (!strcmp(a, "--min-bytes")) {
			if (bench_parse_size(v, &o->minb))
				return fail(err, errlen, "bad --min-bytes '%s'", v);
		} else if (!strcmp(a, "--max-bytes")) {
			if (bench_parse_size(v, &o->maxb))
				return fail(err, errlen, "bad --max-bytes '%s'", v);
		} else if (!strcmp(a, "--iters-scale")) {
			if (bench_parse_positive(v, &x))
				return fail(err, errlen, "bad --iters-scale '%s'", v);
			o->iscale = x;
		} else if (!strcmp(a, "--impl")) {
			if (!*v || strchr(v, ','))
				return fail(err, errlen, "bad --impl '%s' (a CSV field: no comma)",
				            v);
			o->impl = v;
		} else if (!strcmp(a, "--csv")) {
			o->csv = v;
		} else {
			o->plot = v;
		}
	}
	if (o->maxb > OSU_MAX_BYTES)
		return fail(err, errlen, "--max-bytes %zu is above the largest allowed, 64M",
		            o->maxb);
	if (overlap && o->minb < 4) /* one float32 at least, as the collectives mode */
		o->minb = 4;
	if (o->minb > o->maxb)
		return fail(err, errlen, "--min-bytes %zu is above --max-bytes %zu", o->minb,
		            o->maxb);
	return 0;
}

void bench_osu_usage(FILE *f, int overlap, const char *in, const char *impl, const char *symmetric)
{
	if (!overlap)
		fprintf(f,
		        "%s--test NAME|all   latency bw bibw (default all)\n"
		        "%s--min-bytes N     smallest message; K, M, G suffixes (default 1; 0 "
		        "allowed)\n",
		        in, in);
	else
		fprintf(
		    f,
		    "%s--op NAME|all     the collective: allreduce (default) reduce bcast\n"
		    "%s                  allgather reduce_scatter alltoall gather scatter barrier\n"
		    "%s--test-every N    test the request every N units of the compute loop (a\n"
		    "%s                  unit: a multiply and an add on each of %d private\n"
		    "%s                  doubles; default 0: never)\n"
		    "%s--min-bytes N     smallest size; K, M, G suffixes (default 4)\n",
		    in, in, in, in, BENCH_COMPUTE_N, in, in);
	fprintf(f,
	        "%s--max-bytes N     largest size (default 16M, at most 64M); sizes double\n"
	        "%s--iters-scale F   scale the iteration counts (default 1)\n"
	        "%s--impl LABEL      first CSV column (default %s)\n"
	        "%s--no-header       leave out the CSV header\n"
	        "%s--symmetric       %s\n"
	        "%s--csv FILE        also write the CSV to FILE\n"
	        "%s--plot FILE.png   draw %s against size with gnuplot\n",
	        in, in, in, impl, in, in, symmetric, in, in,
	        overlap ? "the times and the overlap" : "latency and bandwidth");
}

/* ---- sizes and iterations ---- */

size_t bench_osu_next(size_t bytes)
{
	return bytes ? 2 * bytes : 1;
}

/* Whether this process has timed a size yet: its first warms the machine up longer. A rank
 * fresh from set-up ran its first milliseconds slower here: the first size of a latency
 * sweep, whatever it was, came out 40-60% slower than the next with 100 warm-up round trips,
 * and like the rest with 20000. */
static int warmed;

long bench_osu_iters(int test, size_t bytes, double scale, long *warm)
{
	int large = bytes > OSU_LARGE;
	double per, iters, w, cap;

	switch (test) {
	case OSU_LATENCY:
		iters = large ? 1000 : 10000;
		w = large ? 10 : 100;
		per = 2.0 * (double)bytes;
		break;
	case OSU_BW:
	case OSU_BIBW:
		iters = large ? 20 : 100;
		w = large ? 2 : 10;
		per = (test == OSU_BIBW ? 2.0 : 1.0) * OSU_WINDOW * (double)bytes;
		break;
	default: /* OSU_OVERLAP: a collective moves about twice its bytes per rank */
		iters = large ? 100 : 1000;
		w = large ? 10 : 100;
		per = 2.0 * (double)bytes;
		break;
	}
	cap = per > 0 ? 8589934592.0 / per : iters;
	if (iters > cap)
		iters = cap;
	iters = floor(iters * scale + 0.5);
	w = floor(w * scale + 0.5);
	if (!warmed && !large)
		w *= 200;
	warmed = 1;
	*warm = w < 1 ? 1 : (long)w;
	return iters < 2 ? 2 : (long)iters;
}

/* ---- patterns ---- */

static uint32_t mix32(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static uint32_t seed_of(size_t bytes, int sender)
{
	return mix32((uint32_t)bytes ^ (uint32_t)(bytes >> 32) * 0x9e3779b9U) ^
	       mix32((uint32_t)sender + 0x51ed27U);
}

static unsigned byte_at(uint32_t seed, size_t i)
{
	return (mix32(seed + (uint32_t)(i >> 2)) >> ((i & 3) * 8)) & 0xff;
}

void bench_osu_fill(void *buf, size_t bytes, int sender)
{
	uint32_t seed = seed_of(bytes, sender), w;
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i + 4 <= bytes; i += 4) {
		w = mix32(seed + (uint32_t)(i >> 2));
		p[i] = (uint8_t)w;
		p[i + 1] = (uint8_t)(w >> 8);
		p[i + 2] = (uint8_t)(w >> 16);
		p[i + 3] = (uint8_t)(w >> 24);
	}
	for (; i < bytes; i++)
		p[i] = (uint8_t)byte_at(seed, i);
}

void bench_osu_spoil(void *buf, size_t bytes, int sender)
{
	uint8_t *p = buf;
	size_t i;

	bench_osu_fill(buf, bytes, sender);
	for (i = 0; i < bytes; i++)
		p[i] = (uint8_t)~p[i];
}

int bench_osu_check(const void *buf, size_t bytes, int sender, size_t *idx, unsigned *got,
                    unsigned *want)
{
	uint32_t seed = seed_of(bytes, sender);
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < bytes; i++) {
		unsigned w = byte_at(seed, i);

		if (p[i] != w) {
			*idx = i;
			*got = p[i];
			*want = w;
			return 1;
		}
	}
	return 0;
}

int bench_osu_fault(const char *mode)
{
	const char *f = getenv("SHMCOLL_BENCH_FAULT");

	return f && !strcmp(f, mode);
}

/* ---- the compute loop ---- */

void bench_compute_init(struct bench_compute *c)
{
	int j;

	for (j = 0; j < BENCH_COMPUTE_N; j++)
		c->x[j] = 1.0 + (double)j / 64.0;
	c->sink = 0.0;
}

/* Each unit: a multiply and an add on every element, each element depending on its value of
 * the unit before; the values settle toward 1, far from denormals and overflow. */
__attribute__((noinline)) void bench_compute_run(struct bench_compute *c, long units)
{
	long u;
	int j;

	for (u = 0; u < units; u++)
		for (j = 0; j < BENCH_COMPUTE_N; j++)
			c->x[j] = c->x[j] * 0.9990234375 + 0.0009765625;
	c->sink += c->x[units & (BENCH_COMPUTE_N - 1)];
}

long bench_compute_calibrate(struct bench_compute *c, double seconds)
{
	double t0, t, per;
	long n = 16, units;
	int k;

	/* A batch long enough to time (1 ms), then the fastest of three at that length. */
	for (;;) {
		t0 = bench_now();
		bench_compute_run(c, n);
		t = bench_now() - t0;
		if (t >= 1e-3 || n >= (1L << 40))
			break;
		n *= 2;
	}
	per = t / (double)n;
	for (k = 0; k < 2; k++) {
		t0 = bench_now();
		bench_compute_run(c, n);
		t = bench_now() - t0;
		if (t / (double)n < per)
			per = t / (double)n;
	}
	if (!(per > 0))
		per = 1e-9;
	units = (long)(seconds / per + 0.5);
	return units < 1 ? 1 : units;
}

double bench_osu_overlap_pct(double pure_us, double compute_us, double total_us)
{
	double v;

	if (!(pure_us > 0))
		return 0.0;
	v = 100.0 * (1.0 - (total_us - compute_us) / pure_us);
	return v > 0 ? v : 0.0;
}

/* ---- rows and the CSV ---- */

static int rows_add(struct bench_osu_rows *rows, int test, size_t bytes, const double *v, int n)
{
	struct bench_osu_row *r;

	if (rows->n == rows->cap) {
		size_t cap = rows->cap ? 2 * rows->cap : 64;

		r = realloc(rows->row, cap * sizeof(*r));
		if (!r) {
			fprintf(stderr, "%s: out of memory for the results\n", bench_prog);
			return -1;
		}
		rows->row = r;
		rows->cap = cap;
	}
	r = &rows->row[rows->n++];
	memset(r, 0, sizeof(*r));
	r->test = test;
	r->bytes = bytes;
	memcpy(r->v, v, (size_t)n * sizeof(*v));
	return 0;
}

void bench_osu_header(struct bench_out *out, int overlap)
{
	bench_out_line(out, overlap ? "impl,op,ranks,bytes,pure_us,compute_us,total_us,"
	                              "overlap_pct,blocking_us\n"
	                            : "impl,test,ranks,bytes,lat_us,bw_GBps\n");
}

int bench_osu_p2p_row(struct bench_out *out, struct bench_osu_rows *rows, const char *impl,
                      int test, int ranks, size_t bytes, double lat_us, double bw_gbps)
{
	double v[2] = {lat_us, bw_gbps};

	bench_out_line(out, "%s,%s,%d,%zu,%.3f,%.4f\n", impl, bench_osu_tests[test], ranks, bytes,
	               lat_us, bw_gbps);
	return rows_add(rows, test, bytes, v, 2);
}

int bench_osu_overlap_row(struct bench_out *out, struct bench_osu_rows *rows, const char *impl,
                          int op, int ranks, size_t bytes, const double v[5])
{
	bench_out_line(out, "%s,%s,%d,%zu,%.3f,%.3f,%.3f,%.2f,%.3f\n", impl, bench_sweep_ops[op],
	               ranks, bytes, v[0], v[1], v[2], v[3], v[4]);
	return rows_add(rows, op, bytes, v, 5);
}

void bench_osu_rows_free(struct bench_osu_rows *rows)
{
	free(rows->row);
	rows->row = NULL;
	rows->n = rows->cap = 0;
}

void bench_osu_ratio_summary(const struct bench_osu_rows *rows, const char *impl)
{
	size_t i, over = 0, small = 0;

	for (i = 0; i < rows->n; i++) {
		const struct bench_osu_row *r = &rows->row[i];
		double ratio = r->v[4] > 0 ? r->v[0] / r->v[4] : 0.0;

		if (i == 0 || rows->row[i - 1].test != r->test)
			fprintf(stderr,
			        "%s: %s: i%s + wait / blocking %s (target: within 1.2x up to "
			        "1 KiB):\n",
			        bench_prog, impl, bench_sweep_ops[r->test],
			        bench_sweep_ops[r->test]);
		fprintf(stderr, "  %9zu B  %9.3f / %9.3f us = %.2fx%s\n", r->bytes, r->v[0],
		        r->v[4], ratio, r->bytes <= 1024 && ratio > 1.2 ? "  above 1.2x" : "");
		if (r->bytes <= 1024) {
			small++;
			over += ratio > 1.2;
		}
	}
	if (small)
		fprintf(stderr, "%s: %s: %zu of %zu sizes up to 1 KiB above 1.2x\n", bench_prog,
		        impl, over, small);
}

/* ---- the plot ---- */

static const char *size_str(size_t bytes, char *s, size_t len)
{
	if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0)
		snprintf(s, len, "%zuM", bytes >> 20);
	else if (bytes >= 1024 && bytes % 1024 == 0)
		snprintf(s, len, "%zuK", bytes >> 10);
	else
		snprintf(s, len, "%zu", bytes);
	return s;
}

/* One line of a plot: column col of v[] of the rows of test, against size. */
struct series {
	int test, col;
	char title[96];
};

/* Writes the data block $s<k> of a series (sizes > 0, values > 0 on a log axis). Returns how
 * many points it has. */
static int block(FILE *f, int k, const struct series *s, const struct bench_osu_rows *rows,
                 int positive)
{
	size_t i;
	int n = 0;

	fprintf(f, "$s%d << EOD\n", k);
	for (i = 0; i < rows->n; i++) {
		const struct bench_osu_row *r = &rows->row[i];

		if (r->test != s->test || r->bytes == 0 || (positive && !(r->v[s->col] > 0)))
			continue;
		fprintf(f, "%zu %.6g\n", r->bytes, r->v[s->col]);
		n++;
	}
	fprintf(f, "EOD\n");
	return n;
}

/* One panel: its settings, then the series that have points. */
static void panel(FILE *f, const char *settings, const struct series *s, int ns,
                  const struct bench_osu_rows *rows, int logy, int *k)
{
	int i, first = 1, n[40];

	for (i = 0; i < ns; i++)
		n[i] = block(f, *k + i, &s[i], rows, logy);
	fprintf(f, "%s%s", logy ? "set logscale y\nset yrange [*:*]\n" : "unset logscale y\n",
	        settings);
	for (i = 0; i < ns; i++) {
		if (!n[i])
			continue;
		fprintf(f, "%s $s%d using 1:2 with linespoints lw 2 title ", first ? "plot" : ",",
		        *k + i);
		bench_gp_quote(f, s[i].title);
		first = 0;
	}
	if (first) /* nothing to draw: an empty frame, not a gnuplot error */
		fprintf(f, "plot [1:2] [0:1] NaN notitle");
	fprintf(f, "\n");
	*k += ns;
}

static void xaxis(FILE *f, const struct bench_osu_rows *rows)
{
	size_t i, lo = SIZE_MAX, hi = 0, b;
	char s[32];
	int first = 1;

	for (i = 0; i < rows->n; i++) {
		b = rows->row[i].bytes;
		if (b == 0)
			continue;
		lo = b < lo ? b : lo;
		hi = b > hi ? b : hi;
	}
	if (hi == 0)
		lo = hi = 1;
	fprintf(f, "set logscale x 2\nset xrange [%g:%g]\nset xtics rotate by -45 (",
	        (double)lo / 1.3, (double)hi * 1.3);
	/* About a dozen labels at most: every size, or every other one as the range grows. */
	for (b = lo; b <= hi && b; b *= (hi / lo > 4096 ? 4 : 2)) {
		fprintf(f, "%s\"%s\" %zu", first ? "" : ", ", size_str(b, s, sizeof(s)), b);
		first = 0;
	}
	fprintf(f, ")\nset xlabel 'bytes'\nset grid\n");
}

int bench_osu_plot(const char *path, int overlap, const char *impl, int ranks,
                   const struct bench_osu_rows *rows, long test_every)
{
	struct series s[40];
	char *script = NULL;
	size_t len = 0, i;
	int have[OP_COUNT] = {0}, t, panels, ns, k = 0, rc;
	FILE *f;

	for (i = 0; i < rows->n; i++)
		have[rows->row[i].test] = 1;
	f = open_memstream(&script, &len);
	if (!f) {
		fprintf(stderr, "%s: --plot: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	if (!overlap)
		panels = (have[OSU_LATENCY] ? 1 : 0) + (have[OSU_BW] || have[OSU_BIBW] ? 1 : 0);
	else
		panels = 2;
	if (panels == 0)
		panels = 1;
	fprintf(f, "set terminal pngcairo size %d,600 enhanced font ',10'\nset output ",
	        panels * 640);
	bench_gp_quote(f, path);
	fprintf(f, "\nset key top left noenhanced\nset multiplot layout 1,%d title ", panels);
	if (!overlap) {
		fprintf(f, "\"%s p2p, %s, ranks 0 and 1 of %d (OSU conventions, window %d)\"\n",
		        bench_prog, impl, ranks, OSU_WINDOW);
	} else {
		char every[64];

		if (test_every)
			snprintf(every, sizeof(every), "a test every %ld units of compute",
			         test_every);
		else
			snprintf(every, sizeof(every), "no test during the compute");
		fprintf(f,
		        "\"%s overlap, %s, %d ranks, compute calibrated to the communication "
		        "time, %s\"\n",
		        bench_prog, impl, ranks, every);
	}
	xaxis(f, rows);
	if (!overlap) {
		if (have[OSU_LATENCY] || !(have[OSU_BW] || have[OSU_BIBW])) {
			s[0] = (struct series){.test = OSU_LATENCY, .col = 0, .title = "latency"};
			panel(f, "set title 'latency (half the round trip)'\nset ylabel 'us'\n", s,
			      1, rows, 1, &k);
		}
		if (have[OSU_BW] || have[OSU_BIBW]) {
			s[0] = (struct series){.test = OSU_BW, .col = 1, .title = "bw (one way)"};
			s[1] = (struct series){
			    .test = OSU_BIBW, .col = 1, .title = "bibw (both ways)"};
			panel(f,
			      "set title 'bandwidth (window of 64)'\nset ylabel 'GB/s (1e9 "
			      "bytes/s)'\nset yrange [0:*]\n",
			      s, 2, rows, 0, &k);
		}
	} else {
		static const char *const what[5] = {"i%s + wait (pure)", "compute",
		                                    "i%s + compute + wait", "overlap",
		                                    "%s (blocking)"};
		static const int cols[4] = {0, 1, 2, 4};
		int c;

		ns = 0;
		for (t = 0; t < OP_COUNT; t++)
			for (c = 0; c < 4 && have[t] && ns < 40; c++) {
				s[ns] = (struct series){.test = t, .col = cols[c]};
				snprintf(s[ns].title, sizeof(s[ns].title), what[cols[c]],
				         bench_sweep_ops[t]);
				ns++;
			}
		panel(f, "set title 'time per call'\nset ylabel 'us'\n", s, ns, rows, 1, &k);
		ns = 0;
		for (t = 0; t < OP_COUNT && ns < 40; t++)
			if (have[t]) {
				s[ns] = (struct series){.test = t, .col = 3};
				snprintf(s[ns].title, sizeof(s[ns].title), "i%s",
				         bench_sweep_ops[t]);
				ns++;
			}
		panel(f, "set title 'overlap'\nset ylabel 'overlap %'\nset yrange [0:105]\n", s, ns,
		      rows, 0, &k);
	}
	fprintf(f, "unset multiplot\n");
	if (fclose(f) != 0) {
		free(script);
		fprintf(stderr, "%s: --plot: out of memory\n", bench_prog);
		return -1;
	}
	rc = bench_gnuplot(script);
	free(script);
	return rc;
}
