/* sweep.c - what the two collective benchmarks share (sweep.h), and the parsers and clock
 * of bench.h that need no part of the library. */
#include "bench/sweep.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const bench_sweep_ops[OP_COUNT] = {
    "allreduce", "reduce", "bcast",   "allgather", "reduce_scatter",
    "alltoall",  "gather", "scatter", "barrier",
};

int bench_sweep_op(const char *s)
{
	int i;

	for (i = 0; i < OP_COUNT; i++)
		if (!strcmp(s, bench_sweep_ops[i]))
			return i;
	return -1;
}

int bench_sweep_count(int op, size_t bytes, size_t esize, int P, size_t *count)
{
	int divided = !(op == OP_ALLREDUCE || op == OP_REDUCE || op == OP_BCAST);
	size_t n = op == OP_BARRIER ? 0 : bytes / esize;

	if (divided && op != OP_BARRIER) {
		if (n / (size_t)P == 0)
			return 0;
		n = n / (size_t)P * (size_t)P;
	}
	*count = n;
	return 1;
}

void bench_sweep_fill(int op, shmcoll_dtype dt, const struct bench_vals *v, void *sbuf, void *rbuf,
                      size_t count, int me, int P)
{
	size_t ch = count / (size_t)P, i;
	int r;

	switch (op) {
	case OP_ALLREDUCE:
	case OP_REDUCE:
	case OP_REDUCE_SCATTER:
		for (i = 0; i < count; i++)
			bench_elem_store(sbuf, i, dt, bench_vals_input(v, me, i));
		break;
	case OP_BCAST:
		for (i = 0; i < count; i++)
			bench_elem_store(rbuf, i, dt, me == 0 ? bench_tag(dt, 7, i) : -1);
		break;
	case OP_ALLGATHER:
	case OP_GATHER:
		for (i = 0; i < ch; i++)
			bench_elem_store(sbuf, i, dt, bench_tag(dt, me, i));
		break;
	case OP_ALLTOALL: /* block r goes to rank r */
		for (r = 0; r < P; r++)
			for (i = 0; i < ch; i++)
				bench_elem_store(sbuf, (size_t)r * ch + i, dt,
				                 bench_tag_a2a(dt, me, r, i));
		break;
	case OP_SCATTER:
		if (me == 0)
			for (i = 0; i < count; i++)
				bench_elem_store(sbuf, i, dt, bench_tag(dt, (int)(i / ch), i % ch));
		break;
	}
	if (op != OP_BCAST)
		for (i = 0; i < count; i++)
			bench_elem_store(rbuf, i, dt, -1);
}

/* The value element idx of this rank's output must hold. */
static int64_t expected(int op, shmcoll_dtype dt, const struct bench_vals *v, size_t idx, size_t ch,
                        int me)
{
	switch (op) {
	case OP_ALLREDUCE:
	case OP_REDUCE:
		return bench_vals_result(v, idx);
	case OP_BCAST:
		return bench_tag(dt, 7, idx);
	case OP_ALLGATHER:
	case OP_GATHER:
		return bench_tag(dt, (int)(idx / ch), idx % ch);
	case OP_REDUCE_SCATTER:
		return bench_vals_result(v, (size_t)me * ch + idx);
	case OP_ALLTOALL:
		return bench_tag_a2a(dt, (int)(idx / ch), me, idx % ch);
	default: /* OP_SCATTER */
		return bench_tag(dt, me, idx);
	}
}

int bench_sweep_check(int op, shmcoll_dtype dt, const struct bench_vals *v, const void *rbuf,
                      size_t count, int me, int P, size_t *idx, int64_t *want)
{
	size_t ch = count / (size_t)P, n, i;

	switch (op) {
	case OP_REDUCE:
	case OP_GATHER:
		n = me == 0 ? (op == OP_GATHER ? ch * (size_t)P : count) : 0;
		break;
	case OP_ALLGATHER:
	case OP_ALLTOALL:
		n = ch * (size_t)P;
		break;
	case OP_REDUCE_SCATTER:
	case OP_SCATTER:
		n = ch;
		break;
	case OP_BARRIER:
		n = 0;
		break;
	default:
		n = count;
		break;
	}
	for (i = 0; i < n; i++) {
		*want = expected(op, dt, v, i, ch, me);
		if (!bench_elem_equal(rbuf, i, dt, *want)) {
			*idx = i;
			return 1;
		}
	}
	return 0;
}

long bench_sweep_iters(size_t bytes, double scale, long *warm)
{
	size_t b = bytes ? bytes : 4;
	long iters = (long)((double)((size_t)1 << 26) / (double)b * scale);
	long hi = (long)(10000 * scale), lo = 20;

	if (hi < lo)
		hi = lo;
	if (iters > hi)
		iters = hi;
	if (iters < lo)
		iters = lo;
	*warm = iters / 10 + 2;
	return iters;
}

double bench_sweep_busbw(int op, int P)
{
	switch (op) {
	case OP_ALLREDUCE:
		return 2.0 * (P - 1) / P;
	case OP_BCAST:
	case OP_REDUCE:
		return 1.0;
	default:
		return (double)(P - 1) / P;
	}
}

int bench_parse_size(const char *s, size_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		v *= 1024;
	else if (*end == 'M' || *end == 'm')
		v *= 1048576;
	else if (*end == 'G' || *end == 'g')
		v *= 1073741824.0;
	else if (*end)
		return -1;
	if (*end && end[1])
		return -1;
	if (v >= 18446744073709551616.0) /* 2^64: beyond size_t */
		return -1;
	*out = (size_t)v;
	return 0;
}

int bench_parse_positive(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0)
		return -1;
	*out = v;
	return 0;
}

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t bench_sweep_src(int op, size_t count, size_t esize, int me, int P, int *in_rbuf)
{
	*in_rbuf = op == OP_BCAST;
	switch (op) {
	case OP_ALLREDUCE:
	case OP_REDUCE:
	case OP_REDUCE_SCATTER:
	case OP_ALLTOALL:
		return count * esize;
	case OP_ALLGATHER:
	case OP_GATHER:
		return count / (size_t)P * esize;
	case OP_BCAST:
	case OP_SCATTER:
		return me == 0 ? count * esize : 0;
	default:
		return 0;
	}
}

double bench_sweep_dirty(void *buf, size_t n)
{
	volatile uint8_t *p = buf;
	double t0 = bench_now();

	for (size_t i = 0; i < n; i += 64)
		p[i] = p[i];
	return bench_now() - t0;
}
