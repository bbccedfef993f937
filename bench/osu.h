/* osu.h - what shmcoll-bench's point-to-point and overlap modes (p2p.c, overlap.c) and the MPI
 * harness's (mpi/mpi-bench.c) share, so that the two time and check alike, in the conventions of
 * the OSU micro-benchmarks (osu_latency, osu_bw, osu_bibw, osu_iallreduce), and their CSVs join
 * row by row: the options and their help, the sizes and iteration counts, the message patterns
 * and their check, the compute loop of the overlap test, the CSV rows and the plots. No part of
 * the library is used. */
#ifndef SHMCOLL_BENCH_OSU_H
#define SHMCOLL_BENCH_OSU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/bench.h"

/* The p2p tests, in the order --test all runs them; OSU_OVERLAP names the overlap mode where an
 * iteration count is asked for. */
enum { OSU_LATENCY, OSU_BW, OSU_BIBW, OSU_NTESTS, OSU_OVERLAP = OSU_NTESTS };

extern const char *const bench_osu_tests[OSU_NTESTS];

#define OSU_WINDOW    64                 /* messages in flight per direction (bw, bibw) */
#define OSU_LARGE     8192               /* above it, OSU's "large" iteration counts */
#define OSU_MAX_BYTES ((size_t)64 << 20) /* the largest --max-bytes */
#define OSU_TAG_DATA  1                  /* the timed messages */
#define OSU_TAG_ACK   2                  /* bw: the receiver's ack of a window */
#define OSU_TAG_SYNC  3                  /* ranks 0 and 1 meeting before a size */
#define OSU_ACK_BYTES 4                  /* as osu_bw */

/* The command line of both modes. */
struct bench_osu_opts {
	int overlap;   /* the mode: 0 p2p, 1 overlap */
	int test;      /* p2p: OSU_LATENCY .. OSU_BIBW, or -1 for all */
	int op;        /* overlap: an OP_* of sweep.h, or -1 for all */
	int header;    /* print the CSV header */
	int symmetric; /* buffers from shmcoll_malloc (MPI_Alloc_mem in mpi-bench) */
	size_t minb, maxb;
	double iscale;
	long test_every; /* overlap: test every N units of compute, 0 never */
	const char *impl, *csv, *plot;
};

/* Parses argv[1 ..] (argv[0] is the mode) for the p2p (overlap = 0) or the overlap mode; impl is
 * the default --impl. 0: run; -1: --help or -h was given (the caller prints its usage);
 * EXIT_USAGE: a bad command line, with the reason in err. */
int bench_osu_parse(int overlap, int argc, char **argv, const char *impl, struct bench_osu_opts *o,
                    char *err, size_t errlen);

/* The option lines of a mode's help, each prefixed with indent; impl is the default --impl and
 * symmetric what --symmetric does in this harness. */
void bench_osu_usage(FILE *f, int overlap, const char *indent, const char *impl,
                     const char *symmetric);

/* The size after bytes: 0 -> 1, else twice it. */
size_t bench_osu_next(size_t bytes);

/* OSU's iteration counts of test (OSU_LATENCY .. OSU_OVERLAP) at a size of bytes, and its
 * warm-up in *warm: latency 10000 (100) up to 8 KiB and 1000 (10) above, bw and bibw 100 (10)
 * and 20 (2) windows, overlap 1000 (100) and 100 (10); capped so that one size moves at most
 * 8 GiB; then times scale, at least 2 (warm-up at least 1). The first call of a process, at
 * 8 KiB or less, warms up 200 times as long (osu.c says why). */
long bench_osu_iters(int test, size_t bytes, double scale, long *warm);

/* The bytes of a message of `bytes` bytes from rank sender: a pattern of its own for every size
 * and sender. fill writes it, spoil writes its complement (every byte differs from what a
 * message must bring), check finds the first byte that differs: 1 with *idx, *got and *want,
 * or 0 when all are right. */
void bench_osu_fill(void *buf, size_t bytes, int sender);
void bench_osu_spoil(void *buf, size_t bytes, int sender);
int bench_osu_check(const void *buf, size_t bytes, int sender, size_t *idx, unsigned *got,
                    unsigned *want);

/* For the tests: non-zero when SHMCOLL_BENCH_FAULT names mode; the receiver then corrupts one
 * byte it is about to check, to prove that the check catches it. */
int bench_osu_fault(const char *mode);

/* The overlap test's computation: arithmetic on private data (a few cache lines of doubles) in
 * units of a few nanoseconds, which the compiler cannot drop (the data lives behind a pointer
 * into another file, and the results are kept). */
#define BENCH_COMPUTE_N 32

struct bench_compute {
	double x[BENCH_COMPUTE_N];
	double sink;
};

void bench_compute_init(struct bench_compute *c);
void bench_compute_run(struct bench_compute *c, long units);
/* Units of bench_compute_run that take `seconds` on this CPU now (at least 1), measured here
 * alone: no communication. */
long bench_compute_calibrate(struct bench_compute *c, double seconds);

/* OSU's overlap: max(0, 100 * (1 - (total - compute) / pure)); 0 when pure is 0. */
double bench_osu_overlap_pct(double pure_us, double compute_us, double total_us);

/* A row of results, kept for the plot: test is the p2p test or the overlap op; v[] holds lat_us
 * and bw_GBps (p2p), or pure_us, compute_us, total_us, overlap_pct and blocking_us (overlap). */
struct bench_osu_row {
	int test;
	size_t bytes;
	double v[5];
};

struct bench_osu_rows {
	struct bench_osu_row *row;
	size_t n, cap;
};

/* Appends a row (and prints it as CSV through out): 0, or -1 out of memory (with a message). */
int bench_osu_p2p_row(struct bench_out *out, struct bench_osu_rows *rows, const char *impl,
                      int test, int ranks, size_t bytes, double lat_us, double bw_gbps);
int bench_osu_overlap_row(struct bench_out *out, struct bench_osu_rows *rows, const char *impl,
                          int op, int ranks, size_t bytes, const double v[5]);
void bench_osu_header(struct bench_out *out, int overlap);
void bench_osu_rows_free(struct bench_osu_rows *rows);

/* Rank 0, after the run: the ratio of iallreduce + wait to the blocking call per size, on
 * stderr, against the target (within 1.2x up to 1 KiB). */
void bench_osu_ratio_summary(const struct bench_osu_rows *rows, const char *impl);

/* Draws the rows with gnuplot into path (PNG): p2p, latency and bandwidth against size; overlap,
 * the times and the overlap against size. 0, or -1 with the reason on stderr. */
int bench_osu_plot(const char *path, int overlap, const char *impl, int ranks,
                   const struct bench_osu_rows *rows, long test_every);

#endif
