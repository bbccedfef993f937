/* sweep.h - what shmcoll-bench's collectives mode (coll.c) and the MPI harness
 * (mpi/mpi-bench.c) share, so that the two time and check the same way and their CSVs join
 * row by row: the ops and their names, each op's known inputs and expected outputs, the
 * iteration counts and the bus-bandwidth factors. No part of the library is used. */
#ifndef SHMCOLL_BENCH_SWEEP_H
#define SHMCOLL_BENCH_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "bench/bench.h"

/* In the order --op all runs them. */
enum {
	OP_ALLREDUCE,
	OP_REDUCE,
	OP_BCAST,
	OP_ALLGATHER,
	OP_REDUCE_SCATTER,
	OP_ALLTOALL,
	OP_GATHER,
	OP_SCATTER,
	OP_BARRIER,
	OP_COUNT
};

extern const char *const bench_sweep_ops[OP_COUNT];

/* The op named s, or -1. */
int bench_sweep_op(const char *s);

/* One call of op with count elements (per rank as the benchmarks count them; ch = count / P
 * per block) of dtype: fills this rank's send buffer (bcast: the root's receive buffer,
 * everyone else's with -1) with known inputs, and every receive element with -1. Rank 0 is
 * the root. v: the exact values of the reducing ops (bench_vals_init). */
void bench_sweep_fill(int op, shmcoll_dtype dt, const struct bench_vals *v, void *sbuf, void *rbuf,
                      size_t count, int me, int P);

/* After that call: the first element of this rank's output that is not what the call must
 * give, its index in *idx and the value in *want (1), or 0 when all are right. Ranks that
 * get no output (the non-roots of reduce and gather) check nothing. */
int bench_sweep_check(int op, shmcoll_dtype dt, const struct bench_vals *v, const void *rbuf,
                      size_t count, int me, int P, size_t *idx, int64_t *want);

/* The element count of op at a size of bytes (esize-byte elements) into *count: bytes / esize,
 * for the ops that divide their data among the ranks rounded down to a multiple of P. 0 when
 * that leaves a rank no element (the size is skipped), else 1. The barrier's size is 0. */
int bench_sweep_count(int op, size_t bytes, size_t esize, int P, size_t *count);

/* Timed calls of a size of bytes (0 counts as 4): clamp(2^26 / bytes, 20, 10000) x scale,
 * and the warm-up calls before them (a tenth, plus 2). */
long bench_sweep_iters(size_t bytes, double scale, long *warm);

/* --dirty: the buffer a rank gives in a call of op with count elements of esize bytes, as
 * its length in bytes (0: it gives none: the non-roots of bcast and scatter, barrier), and in
 * *in_rbuf whether that is its receive buffer (bcast's root) rather than its send buffer. */
size_t bench_sweep_src(int op, size_t count, size_t esize, int me, int P, int *in_rbuf);

/* --dirty: makes the n bytes at buf this rank's own again, as an application's writes before a
 * call do: one store per 64-byte line, the value already there (the inputs stay what the
 * checks expect). A peer that read them in the call before - a single copy out of this
 * buffer - holds copies those stores take back. Returns the seconds it took, which the
 * benchmarks take off the calls' time. */
double bench_sweep_dirty(void *buf, size_t n);

/* nccl-tests' bus bandwidth factor of op at P ranks. */
double bench_sweep_busbw(int op, int P);

#endif
