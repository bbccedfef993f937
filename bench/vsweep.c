/* vsweep.c - what the vcoll modes of both harnesses share (vsweep.h). */
#include "bench/vsweep.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/osu.h"
#include "bench/plot.h"
#include "bench/sweep.h"

const char *const bench_vsweep_ops[V_COUNT] = {
    "allgatherv", "gatherv", "scatterv", "alltoallv", "reduce_scatterv", "scan", "exscan",
};

int bench_vsweep_equal(int op)
{
	static const int equal[V_COUNT] = {
	    [V_ALLGATHERV] = OP_ALLGATHER,
	    [V_GATHERV] = OP_GATHER,
	    [V_SCATTERV] = OP_SCATTER,
	    [V_ALLTOALLV] = OP_ALLTOALL,
	    [V_REDUCE_SCATTERV] = OP_REDUCE_SCATTER,
	    [V_SCAN] = OP_ALLREDUCE,
	    [V_EXSCAN] = OP_ALLREDUCE,
	};

	return equal[op];
}

/* ---- options ---- */

/* The dtypes as the options spell them (common.c has the same table, but it is the library's
 * side, which the MPI harness does not link). */
static const struct {
	const char *name;
	size_t size;
} dtypes[SHMCOLL_DTYPE_COUNT] = {
    [SHMCOLL_INT8] = {"int8", 1},       [SHMCOLL_UINT8] = {"uint8", 1},
    [SHMCOLL_INT32] = {"int32", 4},     [SHMCOLL_UINT32] = {"uint32", 4},
    [SHMCOLL_INT64] = {"int64", 8},     [SHMCOLL_UINT64] = {"uint64", 8},
    [SHMCOLL_FLOAT16] = {"float16", 2}, [SHMCOLL_BFLOAT16] = {"bfloat16", 2},
    [SHMCOLL_FLOAT32] = {"float32", 4}, [SHMCOLL_FLOAT64] = {"float64", 8},
};

size_t bench_vsweep_esize(shmcoll_dtype dtype)
{
	return (unsigned)dtype < SHMCOLL_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *bench_vsweep_dtype_name(shmcoll_dtype dtype)
{
	return (unsigned)dtype < SHMCOLL_DTYPE_COUNT ? dtypes[dtype].name : "unknown";
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

static int op_parse(const char *s)
{
	int i;

	for (i = 0; i < V_COUNT; i++)
		if (!strcmp(s, bench_vsweep_ops[i]))
			return i;
	return -1;
}

int bench_vsweep_parse(int argc, char **argv, const char *impl, int mpi,
                       struct bench_vsweep_opts *o, char *err, size_t errlen)
{
	const char *a, *v;
	char *end;
	double x;
	long n;
	int i, d;

	*o = (struct bench_vsweep_opts){
	    .op = -1,
	    .header = 1,
	    .reps = 5,
	    .minb = 4,
	    .maxb = (size_t)16 << 20,
	    .iscale = 1.0,
	    .dtype = SHMCOLL_FLOAT32,
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
		if (!strcmp(a, "--gaps")) {
			o->gaps = 1;
			continue;
		}
		if (strcmp(a, "--op") && strcmp(a, "--counts") && strcmp(a, "--reps") &&
		    strcmp(a, "--min-bytes") && strcmp(a, "--max-bytes") && strcmp(a, "--impl") &&
		    strcmp(a, "--iters-scale") && strcmp(a, "--dtype") && strcmp(a, "--csv") &&
		    strcmp(a, "--plot"))
			return fail(err, errlen, "unknown option '%s' in the vcoll mode", a);
		if (i + 1 >= argc)
			return fail(err, errlen, "option %s needs a value", a);
		v = argv[++i];
		if (!strcmp(a, "--op")) {
			o->op = op_parse(v);
			if (o->op < 0 && strcmp(v, "all"))
				return fail(
				    err, errlen,
				    "unknown --op '%s' (allgatherv gatherv scatterv alltoallv "
				    "reduce_scatterv scan exscan or all)",
				    v);
		} else if (!strcmp(a, "--counts")) {
			if (!strcmp(v, "even"))
				o->skew = 0;
			else if (!strcmp(v, "skew"))
				o->skew = 1;
			else
				return fail(err, errlen, "unknown --counts '%s' (even or skew)", v);
		} else if (!strcmp(a, "--reps")) {
			errno = 0;
			n = strtol(v, &end, 10);
			if (errno || end == v || *end || n < 1 || n > VSWEEP_MAX_REPS)
				return fail(err, errlen, "bad --reps '%s' (1 to %d)", v,
				            VSWEEP_MAX_REPS);
			o->reps = (int)n;
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
		} else if (!strcmp(a, "--dtype")) {
			for (d = 0; d < SHMCOLL_DTYPE_COUNT && strcmp(v, dtypes[d].name); d++)
				;
			if (d == SHMCOLL_DTYPE_COUNT)
				return fail(err, errlen, "unknown --dtype '%s'", v);
			if (mpi && (d == SHMCOLL_FLOAT16 || d == SHMCOLL_BFLOAT16))
				return fail(err, errlen, "--dtype %s has no MPI datatype", v);
			o->dtype = (shmcoll_dtype)d;
		} else if (!strcmp(a, "--csv")) {
			o->csv = v;
		} else {
			o->plot = v;
		}
	}
	if (o->maxb > VSWEEP_MAX_BYTES)
		return fail(err, errlen, "--max-bytes %zu is above the largest allowed, 1G",
		            o->maxb);
	if (o->minb < bench_vsweep_esize(o->dtype)) /* one element at least, as coll.c */
		o->minb = bench_vsweep_esize(o->dtype);
	if (o->minb > o->maxb)
		return fail(err, errlen, "--min-bytes %zu is above --max-bytes %zu", o->minb,
		            o->maxb);
	return 0;
}

void bench_vsweep_usage(FILE *f, const char *in, const char *impl, int mpi)
{
	char more[96] = "";

	if (!mpi) /* the 16-bit floats, which MPI has no type for */
		snprintf(more, sizeof(more), "\n%s                  float16 bfloat16", in);
	fprintf(f,
	        "%s--op NAME|all     allgatherv gatherv scatterv alltoallv reduce_scatterv\n"
	        "%s                  scan exscan (default all)\n"
	        "%s--counts MODE     even (default): every block as the equal-count call's, so\n"
	        "%s                  the v-call's machinery is the only difference; skew: block\n"
	        "%s                  p about (p + 1) / (P (P + 1) / 2) of the total, the same\n"
	        "%s                  total (alltoallv: each rank sends block (q - r) mod P of\n"
	        "%s                  that vector to rank q)\n"
	        "%s--gaps            leave %d bytes between two blocks (displacements not packed)\n"
	        "%s--reps N          timed repeats of each form per size, interleaved; the\n"
	        "%s                  median is reported (default 5)\n"
	        "%s--min-bytes N     smallest size of the equal-count call, as the collectives\n"
	        "%s                  mode counts it; K, M, G suffixes (default 4)\n"
	        "%s--max-bytes N     largest size (default 16M, at most 1G); sizes double\n"
	        "%s--dtype NAME      element type (default float32; sum for the reductions):\n"
	        "%s                  int8 uint8 int32 uint32 int64 uint64 float32 float64%s\n"
	        "%s--iters-scale F   scale the iteration counts (default 1)\n"
	        "%s--impl LABEL      first CSV column (default %s)\n"
	        "%s--no-header       leave out the CSV header\n"
	        "%s--csv FILE        also write the CSV to FILE\n"
	        "%s--plot FILE.png   draw the ratio (and both times) against size with gnuplot\n",
	        in, in, in, in, in, in, in, in, VSWEEP_GAP_BYTES, in, in, in, in, in, in, in, more,
	        in, in, impl, in, in, in);
}

const char *bench_vsweep_counts_name(const struct bench_vsweep_opts *o)
{
	static const char *const names[2][2] = {{"even", "even+gaps"}, {"skew", "skew+gaps"}};

	return names[o->skew ? 1 : 0][o->gaps ? 1 : 0];
}

size_t bench_vsweep_cap(const struct bench_vsweep_opts *o, int P)
{
	size_t es = bench_vsweep_esize(o->dtype);

	/* The largest count, 64 elements more (as coll.c), the gaps between P blocks and the
	 * tail past them. */
	return (o->maxb / es + 64 + (size_t)(P + 1) * (VSWEEP_GAP_BYTES / es) +
	        VSWEEP_TAIL_BYTES / es) *
	       es;
}

/* ---- counts and displacements ---- */

int bench_vsweep_call_init(struct bench_vsweep_call *c, const struct bench_vsweep_opts *o,
                           const struct bench_vals *vals, int me, int P, int strict)
{
	size_t *a = calloc(6 * (size_t)P, sizeof(*a));

	if (!a) {
		fprintf(stderr, "%s: rank %d: out of memory for the counts of %d ranks\n",
		        bench_prog, me, P);
		return -1;
	}
	*c = (struct bench_vsweep_call){
	    .dtype = o->dtype,
	    .esize = bench_vsweep_esize(o->dtype),
	    .vals = vals,
	    .me = me,
	    .P = P,
	    .strict = strict,
	    .skew = o->skew,
	    .cnt = a,
	    .dsp = a + P,
	    .scnt = a + 2 * (size_t)P,
	    .sdsp = a + 3 * (size_t)P,
	    .rcnt = a + 4 * (size_t)P,
	    .rdsp = a + 5 * (size_t)P,
	};
	c->gap = o->gaps ? VSWEEP_GAP_BYTES / c->esize : 0;
	c->tail = VSWEEP_TAIL_BYTES / c->esize;
	return 0;
}

void bench_vsweep_call_free(struct bench_vsweep_call *c)
{
	free(c->cnt);
	c->cnt = c->dsp = c->scnt = c->sdsp = c->rcnt = c->rdsp = NULL;
}

/* Rank order: block p at the sum of the blocks before it, plus gap elements after each. */
static void place(size_t *dsp, const size_t *cnt, int P, size_t gap)
{
	size_t at = 0;
	int p;

	for (p = 0; p < P; p++) {
		dsp[p] = at;
		at += cnt[p] + gap;
	}
}

void bench_vsweep_layout(struct bench_vsweep_call *c, int op, size_t count)
{
	const int P = c->P, me = c->me;
	const size_t T = (size_t)P * (size_t)(P + 1) / 2;
	size_t prev = 0, b, S;
	int p;

	c->op = op;
	c->count = count;
	/* The vector of blocks: count / P each, or block p the rounded share of p + 1 in T,
	 * boundaries rounded to the nearest element (the last one is count). */
	for (p = 0; p < P; p++) {
		if (!c->skew) {
			c->cnt[p] = count / (size_t)P;
			continue;
		}
		S = (size_t)(p + 1) * (size_t)(p + 2) / 2;
		b = (count * 2 * S + T) / (2 * T);
		c->cnt[p] = b - prev;
		prev = b;
	}
	place(c->dsp, c->cnt, P, op == V_REDUCE_SCATTERV ? 0 : c->gap);
	for (p = 0; p < P; p++) {
		c->scnt[p] = c->cnt[(p - me + P) % P];
		c->rcnt[p] = c->cnt[(me - p + P) % P];
	}
	place(c->sdsp, c->scnt, P, c->gap);
	place(c->rdsp, c->rcnt, P, c->gap);
}

/* ---- inputs and checks ---- */

#define MSG_LEN 384 /* the message of a wrong element, before check adds the op */

/* The result of the sum over the first n ranks (scan: me + 1, exscan: me). The sum's inputs do
 * not depend on the number of contributors (values.c), so the partial sums are exact too. */
static int64_t prefix(const struct bench_vsweep_call *c, int n, size_t i)
{
	struct bench_vals part = *c->vals;

	part.n = n;
	return bench_vals_result(&part, i);
}

static void store_range(void *buf, size_t from, size_t to, shmcoll_dtype dt, int64_t v)
{
	for (; from < to; from++)
		bench_elem_store(buf, from, dt, v);
}

/* Elements of a buffer of blocks in rank order: up to the end of the last, and the tail. */
static size_t extent(const size_t *cnt, const size_t *dsp, int P)
{
	return dsp[P - 1] + cnt[P - 1];
}

void bench_vsweep_fill(const struct bench_vsweep_call *c, int form, void *sbuf, void *rbuf)
{
	const shmcoll_dtype dt = c->dtype;
	const int me = c->me, P = c->P;
	size_t i, n;
	int p;

	if (form) {
		bench_sweep_fill(bench_vsweep_equal(c->op), dt, c->vals, sbuf, rbuf, c->count, me,
		                 P);
		return;
	}
	switch (c->op) {
	case V_ALLGATHERV:
	case V_GATHERV:
		for (i = 0; i < c->cnt[me]; i++)
			bench_elem_store(sbuf, i, dt, bench_tag(dt, me, i));
		n = extent(c->cnt, c->dsp, P);
		break;
	case V_SCATTERV:
		if (me == 0) {
			store_range(sbuf, 0, extent(c->cnt, c->dsp, P), dt, -1);
			for (p = 0; p < P; p++)
				for (i = 0; i < c->cnt[p]; i++)
					bench_elem_store(sbuf, c->dsp[p] + i, dt,
					                 bench_tag(dt, p, i));
		}
		n = c->cnt[me];
		break;
	case V_ALLTOALLV: /* the block at sdsp[q] goes to rank q */
		store_range(sbuf, 0, extent(c->scnt, c->sdsp, P), dt, -1);
		for (p = 0; p < P; p++)
			for (i = 0; i < c->scnt[p]; i++)
				bench_elem_store(sbuf, c->sdsp[p] + i, dt,
				                 bench_tag_a2a(dt, me, p, i));
		n = extent(c->rcnt, c->rdsp, P);
		break;
	case V_REDUCE_SCATTERV:
		for (i = 0; i < c->count; i++)
			bench_elem_store(sbuf, i, dt, bench_vals_input(c->vals, me, i));
		n = c->cnt[me];
		break;
	default: /* V_SCAN, V_EXSCAN */
		for (i = 0; i < c->count; i++)
			bench_elem_store(sbuf, i, dt, bench_vals_input(c->vals, me, i));
		n = c->count;
		break;
	}
	store_range(rbuf, 0, n + c->tail, dt, -1);
}

/* What element i of block b of this rank's output must hold. */
static int64_t want_at(const struct bench_vsweep_call *c, int b, size_t i)
{
	const shmcoll_dtype dt = c->dtype;
	size_t off = 0;
	int p;

	switch (c->op) {
	case V_ALLGATHERV:
	case V_GATHERV:
		return bench_tag(dt, b, i);
	case V_SCATTERV:
		return bench_tag(dt, c->me, i);
	case V_ALLTOALLV:
		return bench_tag_a2a(dt, b, c->me, i);
	case V_REDUCE_SCATTERV:
		for (p = 0; p < c->me; p++)
			off += c->cnt[p];
		return bench_vals_result(c->vals, off + i);
	case V_SCAN:
		return prefix(c, c->me + 1, i);
	default:
		return prefix(c, c->me, i);
	}
}

__attribute__((format(printf, 6, 7))) static int bad(const struct bench_vsweep_call *c,
                                                     const void *rbuf, size_t idx, int64_t want,
                                                     char *msg, const char *fmt, ...)
{
	char got_s[64], want_s[64], where[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(where, sizeof(where), fmt, ap);
	va_end(ap);
	bench_elem_format(rbuf, idx, c->dtype, got_s, sizeof(got_s));
	bench_value_format(c->dtype, want, want_s, sizeof(want_s));
	snprintf(msg, MSG_LEN, "idx %zu (%s) got %s want %s", idx, where, got_s, want_s);
	return 1;
}

/* nb blocks of cnt[b] elements at dsp[b] in rank order, the elements between them -1, and the
 * tail after the last -1 too. from: the rank (or sender) of block 0. msg: MSG_LEN bytes. */
static int check_blocks(const struct bench_vsweep_call *c, const void *rbuf, int nb,
                        const size_t *cnt, const size_t *dsp, int from, char *msg)
{
	const shmcoll_dtype dt = c->dtype;
	const char *whose = c->op == V_ALLTOALLV ? "from" : "of";
	size_t pos = 0, i, end;
	int64_t w;
	int b;

	for (b = 0; b < nb; b++) {
		for (; pos < dsp[b]; pos++)
			if (!bench_elem_equal(rbuf, pos, dt, -1))
				return bad(
				    c, rbuf, pos, -1, msg,
				    "the gap before the block %s rank %d: must stay unwritten",
				    whose, from + b);
		for (i = 0; i < cnt[b]; i++) {
			w = want_at(c, from + b, i);
			if (!bench_elem_equal(rbuf, dsp[b] + i, dt, w))
				return bad(c, rbuf, dsp[b] + i, w, msg,
				           "element %zu of the block %s rank %d", i, whose,
				           from + b);
		}
		pos = dsp[b] + cnt[b];
	}
	for (end = pos + c->tail; pos < end; pos++)
		if (!bench_elem_equal(rbuf, pos, dt, -1))
			return bad(c, rbuf, pos, -1, msg,
			           "past the last block: must stay unwritten");
	return 0;
}

int bench_vsweep_check(const struct bench_vsweep_call *c, int form, const void *rbuf, char *msg,
                       size_t len)
{
	const int me = c->me, P = c->P, eq = bench_vsweep_equal(c->op);
	const size_t zero = 0;
	char m[MSG_LEN], got_s[64], want_s[64];
	int64_t want;
	size_t idx, i;
	int rc = 0;

	m[0] = '\0';
	if (form) {
		if (bench_sweep_check(eq, c->dtype, c->vals, rbuf, c->count, me, P, &idx, &want)) {
			bench_elem_format(rbuf, idx, c->dtype, got_s, sizeof(got_s));
			bench_value_format(c->dtype, want, want_s, sizeof(want_s));
			snprintf(msg, len,
			         "op %s (the equal-count form of %s) idx %zu got %s want %s",
			         bench_sweep_ops[eq], bench_vsweep_ops[c->op], idx, got_s, want_s);
			return 1;
		}
		return 0;
	}
	switch (c->op) {
	case V_ALLGATHERV:
		rc = check_blocks(c, rbuf, P, c->cnt, c->dsp, 0, m);
		break;
	case V_GATHERV:
		if (me == 0)
			rc = check_blocks(c, rbuf, P, c->cnt, c->dsp, 0, m);
		break;
	case V_SCATTERV:
	case V_REDUCE_SCATTERV:
		rc = check_blocks(c, rbuf, 1, &c->cnt[me], &zero, me, m);
		break;
	case V_ALLTOALLV:
		rc = check_blocks(c, rbuf, P, c->rcnt, c->rdsp, 0, m);
		break;
	case V_SCAN:
		rc = check_blocks(c, rbuf, 1, &c->count, &zero, me, m);
		break;
	default: /* V_EXSCAN: rank 0 gets nothing */
		if (me > 0) {
			rc = check_blocks(c, rbuf, 1, &c->count, &zero, me, m);
			break;
		}
		for (i = c->strict ? 0 : c->count; i < c->count + c->tail && !rc; i++)
			if (!bench_elem_equal(rbuf, i, c->dtype, -1))
				rc = bad(c, rbuf, i, -1, m,
				         i < c->count ? "rank 0's buffer: must stay unwritten"
				                      : "past the buffer: must stay unwritten");
		break;
	}
	if (rc)
		snprintf(msg, len, "op %s %s", bench_vsweep_ops[c->op], m);
	return rc;
}

void bench_vsweep_fault(const struct bench_vsweep_call *c, void *rbuf)
{
	if (!bench_osu_fault("vcoll") || c->me != (c->op == V_GATHERV ? 0 : c->P - 1))
		return;
	((unsigned char *)rbuf)[0] ^= 0x40;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_vsweep_median(double *v, int n)
{
	if (n <= 0)
		return 0.0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* ---- rows, the CSV and the summary ---- */

void bench_vsweep_header(struct bench_out *out)
{
	bench_out_line(out, "impl,op,ranks,bytes,counts,lat_us,equal_us,ratio\n");
}

int bench_vsweep_row(struct bench_out *out, struct bench_vsweep_rows *rows,
                     const struct bench_vsweep_opts *o, int ranks, int op, size_t bytes,
                     double lat_us, double equal_us)
{
	struct bench_vsweep_row *r;
	double ratio = equal_us > 0 ? lat_us / equal_us : 0.0;

	bench_out_line(out, "%s,%s,%d,%zu,%s,%.3f,%.3f,%.4f\n", o->impl, bench_vsweep_ops[op],
	               ranks, bytes, bench_vsweep_counts_name(o), lat_us, equal_us, ratio);
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
	rows->row[rows->n++] = (struct bench_vsweep_row){
	    .op = op, .bytes = bytes, .lat_us = lat_us, .equal_us = equal_us};
	return 0;
}

void bench_vsweep_rows_free(struct bench_vsweep_rows *rows)
{
	free(rows->row);
	rows->row = NULL;
	rows->n = rows->cap = 0;
}

static double ratio_of(const struct bench_vsweep_row *r)
{
	return r->equal_us > 0 ? r->lat_us / r->equal_us : 0.0;
}

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

void bench_vsweep_summary(const struct bench_vsweep_rows *rows, const struct bench_vsweep_opts *o)
{
	size_t i, n, over, all = 0, all_over = 0, worst_at;
	double worst, x;
	char s[32];
	int op;

	for (op = 0; op < V_COUNT; op++) {
		n = over = worst_at = 0;
		worst = 0.0;
		for (i = 0; i < rows->n; i++) {
			if (rows->row[i].op != op)
				continue;
			x = ratio_of(&rows->row[i]);
			n++;
			over += x > 1.2;
			if (x > worst) {
				worst = x;
				worst_at = rows->row[i].bytes;
			}
		}
		if (!n)
			continue;
		fprintf(stderr,
		        "%s: %s: %s / %s (%s): %zu of %zu sizes above 1.2x, worst %.2fx at %s%s\n",
		        bench_prog, o->impl, bench_vsweep_ops[op],
		        bench_sweep_ops[bench_vsweep_equal(op)], bench_vsweep_counts_name(o), over,
		        n, worst, size_str(worst_at, s, sizeof(s)),
		        op >= V_SCAN ? " (a reference point, not a v-variant)" : "");
		if (op < V_SCAN) {
			all += n;
			all_over += over;
		}
	}
	if (all)
		fprintf(stderr,
		        "%s: %s: the v-variants (target: within 1.2x of the equal-count form): %zu "
		        "of %zu sizes above 1.2x\n",
		        bench_prog, o->impl, all_over, all);
}

/* ---- the plot ---- */

static void xaxis(FILE *f, const struct bench_vsweep_rows *rows)
{
	size_t i, lo = SIZE_MAX, hi = 0, b;
	char s[32];
	int first = 1;

	for (i = 0; i < rows->n; i++) {
		b = rows->row[i].bytes;
		lo = b < lo ? b : lo;
		hi = b > hi ? b : hi;
	}
	if (hi == 0)
		lo = hi = 1;
	fprintf(f, "set logscale x 2\nset xrange [%g:%g]\nset xtics rotate by -45 (",
	        (double)lo / 1.3, (double)hi * 1.3);
	for (b = lo; b <= hi && b; b *= (hi / lo > 4096 ? 4 : 2)) {
		fprintf(f, "%s\"%s\" %zu", first ? "" : ", ", size_str(b, s, sizeof(s)), b);
		first = 0;
	}
	fprintf(f, ")\nset xlabel 'bytes of the equal-count call'\nset grid\n");
}

int bench_vsweep_plot(const char *path, const struct bench_vsweep_opts *o, int ranks,
                      const struct bench_vsweep_rows *rows)
{
	char *script = NULL;
	size_t len = 0, i;
	int have[V_COUNT] = {0}, op, first, rc;
	FILE *f;

	f = open_memstream(&script, &len);
	if (!f) {
		fprintf(stderr, "%s: --plot: %s\n", bench_prog, strerror(errno));
		return -1;
	}
	/* One data block per v-call: bytes, its time, the equal-count form's, the ratio. */
	for (op = 0; op < V_COUNT; op++) {
		fprintf(f, "$v%d << EOD\n", op);
		for (i = 0; i < rows->n; i++) {
			const struct bench_vsweep_row *r = &rows->row[i];

			if (r->op != op || !(r->lat_us > 0) || !(r->equal_us > 0))
				continue;
			fprintf(f, "%zu %.6g %.6g %.6g\n", r->bytes, r->lat_us, r->equal_us,
			        ratio_of(r));
			have[op] = 1;
		}
		fprintf(f, "EOD\n");
	}
	fprintf(f, "set terminal pngcairo size 1280,600 enhanced font ',10'\nset output ");
	bench_gp_quote(f, path);
	fprintf(f,
	        "\nset key top left noenhanced\nset multiplot layout 1,2 title \"%s vcoll, %s, %d "
	        "ranks, %s, counts %s, median of %d repeats\" noenhanced\n",
	        bench_prog, o->impl, ranks, bench_vsweep_dtype_name(o->dtype),
	        bench_vsweep_counts_name(o), o->reps);
	xaxis(f, rows);

	/* The ratio, with the target. */
	fprintf(f, "set logscale y 2\nset yrange [*:*]\nset title 'v-call / equal-count form, "
	           "same total bytes'\nset ylabel 'ratio (log scale)'\n");
	fprintf(f, "plot 1.2 with lines dt 2 lw 2 lc rgb 'red' title 'target 1.2x', 1 with lines "
	           "lc rgb 'gray' notitle");
	for (op = 0; op < V_COUNT; op++) {
		if (!have[op])
			continue;
		fprintf(f, ", $v%d using 1:4 with linespoints lw 2 lc %d title ", op, op + 1);
		bench_gp_quote(f, bench_vsweep_ops[op]);
	}
	fprintf(f, "\n");

	/* Both times. */
	fprintf(f, "set logscale y\nset yrange [*:*]\nset title 'time per call (solid: the "
	           "v-call, dashed: its equal-count form)'\nset ylabel 'us'\n");
	first = 1;
	for (op = 0; op < V_COUNT; op++) {
		char title[64];

		if (!have[op])
			continue;
		fprintf(f, "%s $v%d using 1:2 with linespoints lw 2 lc %d title ",
		        first ? "plot" : ",", op, op + 1);
		bench_gp_quote(f, bench_vsweep_ops[op]);
		snprintf(title, sizeof(title), "%s (vs %s)",
		         bench_sweep_ops[bench_vsweep_equal(op)], bench_vsweep_ops[op]);
		fprintf(f, ", $v%d using 1:3 with linespoints lw 1 dt 2 lc %d title ", op, op + 1);
		bench_gp_quote(f, title);
		first = 0;
	}
	if (first) /* nothing to draw: an empty frame, not a gnuplot error */
		fprintf(f, "plot [1:2] [1:2] NaN notitle");
	fprintf(f, "\nunset multiplot\n");
	if (fclose(f) != 0) {
		free(script);
		fprintf(stderr, "%s: --plot: out of memory\n", bench_prog);
		return -1;
	}
	rc = bench_gnuplot(script);
	free(script);
	return rc;
}
