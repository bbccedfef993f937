/* vsweep.h - what shmcoll-bench's vcoll mode (vcoll.c) and the MPI harness's (mpi/mpi-bench.c)
 * share, so that the two time and check alike and their CSVs join row by row: each variable-count
 * collective against its equal-count form at the same total bytes. The options and their help,
 * the counts and displacements of every call (even or skewed blocks, packed or with gaps), the
 * known inputs and the check of every output (gaps and the bytes past the last block included),
 * the CSV rows, the summary against the target and the plot. No part of the library is used. */
#ifndef SHMCOLL_BENCH_VSWEEP_H
#define SHMCOLL_BENCH_VSWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/bench.h"

/* The v-calls, in the order --op all runs them. Each is timed against an equal-count form
 * (bench_vsweep_equal: an OP_* of sweep.h) at the same total bytes; scan and exscan against
 * allreduce of the same count, as a reference point (not a v-variant). */
enum {
	V_ALLGATHERV,
	V_GATHERV,
	V_SCATTERV,
	V_ALLTOALLV,
	V_REDUCE_SCATTERV,
	V_SCAN,
	V_EXSCAN,
	V_COUNT
};

extern const char *const bench_vsweep_ops[V_COUNT];

/* The OP_* of sweep.h that op is timed against. */
int bench_vsweep_equal(int op);

#define VSWEEP_GAP_BYTES  64                /* --gaps: bytes between two blocks */
#define VSWEEP_TAIL_BYTES 64                /* checked, unwritten, past the last block */
#define VSWEEP_MAX_BYTES  ((size_t)1 << 30) /* the largest --max-bytes */
#define VSWEEP_MAX_REPS   99                /* the largest --reps */

/* The command line of the vcoll mode, in both harnesses. */
struct bench_vsweep_opts {
	int op;     /* a V_*, or -1 for all */
	int skew;   /* --counts skew */
	int gaps;   /* --gaps */
	int header; /* print the CSV header */
	int reps;   /* timed repeats of each form per size (the median is reported) */
	size_t minb, maxb;
	double iscale;
	shmcoll_dtype dtype;
	const char *impl, *csv, *plot;
};

/* Parses argv[1 ..] (argv[0] is the mode); impl is the default --impl; mpi refuses the dtypes
 * MPI has no type for (float16, bfloat16). 0: run; -1: --help or -h was given (the caller
 * prints its usage); EXIT_USAGE: a bad command line, with the reason in err. */
int bench_vsweep_parse(int argc, char **argv, const char *impl, int mpi,
                       struct bench_vsweep_opts *o, char *err, size_t errlen);

/* The option lines of the mode's help, each prefixed with indent; impl is the default --impl. */
void bench_vsweep_usage(FILE *f, const char *indent, const char *impl, int mpi);

/* Bytes of an element of dtype (what shmcoll_dtype_size says) and its name as --dtype spells
 * it (bench_dtype_name's), without the library. */
size_t bench_vsweep_esize(shmcoll_dtype dtype);
const char *bench_vsweep_dtype_name(shmcoll_dtype dtype);

/* The "counts" CSV column of a run: even, skew, even+gaps or skew+gaps. */
const char *bench_vsweep_counts_name(const struct bench_vsweep_opts *o);

/* Bytes each of the two buffers needs for every call of a run at P ranks. */
size_t bench_vsweep_cap(const struct bench_vsweep_opts *o, int P);

/* One rank's view of the calls of a size: the counts and displacements (in elements) it passes.
 * Blocks are in rank order, packed, or (gaps) with gap elements between two blocks. */
struct bench_vsweep_call {
	shmcoll_dtype dtype;
	size_t esize;
	const struct bench_vals *vals; /* the sum's inputs and results (SHMCOLL_SUM, P) */
	int me, P;
	int strict;   /* exscan: rank 0's buffer must stay unwritten (shmcoll's contract; MPI
	               * leaves it undefined, and checks nothing there) */
	int skew;     /* uneven blocks */
	size_t gap;   /* elements between two blocks (0, or 64 bytes' worth) */
	size_t tail;  /* elements past the last block that must stay unwritten */
	int op;       /* the V_* set by bench_vsweep_layout */
	size_t count; /* elements of the equal-count call, as coll.c counts them */
	/* P entries each. cnt, dsp: block p of allgatherv, gatherv, scatterv (rank p's count and
	 * its place in the buffer of many blocks) and reduce_scatterv (cnt); scnt, sdsp, rcnt,
	 * rdsp: alltoallv's, this rank's. */
	size_t *cnt, *dsp, *scnt, *sdsp, *rcnt, *rdsp;
};

/* Allocates the arrays (P entries each): 0, or -1 out of memory (with a message). */
int bench_vsweep_call_init(struct bench_vsweep_call *c, const struct bench_vsweep_opts *o,
                           const struct bench_vals *vals, int me, int P, int strict);
void bench_vsweep_call_free(struct bench_vsweep_call *c);

/* The counts and displacements of op at count elements (the equal call's, bench_sweep_count):
 * the blocks add up to count. Even: every block count / P (scan, exscan: count on every rank).
 * Skew: block p about count (p + 1) / (P (P + 1) / 2), rounded so that they add up exactly;
 * alltoallv's matrix is the Latin square of that vector, rank r sending block (q - r) mod P of
 * it to rank q, so that every rank still sends and receives count elements. */
void bench_vsweep_layout(struct bench_vsweep_call *c, int op, size_t count);

/* form: 0 the v-call, 1 its equal-count form. fill writes this rank's known inputs into sbuf and
 * -1 into every element of rbuf the call may write or must leave alone (gaps, the tail); check
 * then finds the first element of this rank's output that is wrong: 1 with a message in msg
 * (index, where it lies, what it holds and what it must), or 0 when all are right. */
void bench_vsweep_fill(const struct bench_vsweep_call *c, int form, void *sbuf, void *rbuf);
int bench_vsweep_check(const struct bench_vsweep_call *c, int form, const void *rbuf, char *msg,
                       size_t len);

/* For the tests: when SHMCOLL_BENCH_FAULT is vcoll, one rank that gets output from the v-call
 * (the root of gatherv, else the last) flips a bit of its first element before the check. */
void bench_vsweep_fault(const struct bench_vsweep_call *c, void *rbuf);

/* The median of n values (sorts v). */
double bench_vsweep_median(double *v, int n);

/* The rows of a run, kept for the summary and the plot. */
struct bench_vsweep_row {
	int op;
	size_t bytes;
	double lat_us, equal_us;
};

struct bench_vsweep_rows {
	struct bench_vsweep_row *row;
	size_t n, cap;
};

void bench_vsweep_header(struct bench_out *out);
/* Prints a row (impl,op,ranks,bytes,counts,lat_us,equal_us,ratio) and keeps it: 0, or -1 out of
 * memory (with a message). */
int bench_vsweep_row(struct bench_out *out, struct bench_vsweep_rows *rows,
                     const struct bench_vsweep_opts *o, int ranks, int op, size_t bytes,
                     double lat_us, double equal_us);
void bench_vsweep_rows_free(struct bench_vsweep_rows *rows);

/* Rank 0, after the run: per v-call, the sizes above the target (within 1.2x of the equal-count
 * form) and the worst ratio, on stderr. */
void bench_vsweep_summary(const struct bench_vsweep_rows *rows, const struct bench_vsweep_opts *o);

/* Draws the rows with gnuplot into path (PNG): the ratio against size per v-call, and the times
 * of both forms. 0, or -1 with the reason on stderr. */
int bench_vsweep_plot(const char *path, const struct bench_vsweep_opts *o, int ranks,
                      const struct bench_vsweep_rows *rows);

#endif
