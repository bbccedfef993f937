/* busy.h - what shmcoll-bench's collectives mode (coll.c) and the MPI harness (mpi/mpi-bench.c)
 * share to time a busy machine: busy processes started beside the job (--hog N, --hog-pin),
 * and calls timed one by one for their distribution (--dist: median and 99th percentile),
 * within a time budget per size (--max-seconds) that the ranks agree on. No part of the
 * library is used. */
#ifndef SHMCOLL_BENCH_BUSY_H
#define SHMCOLL_BENCH_BUSY_H

#include <stdio.h>
#include <sys/types.h>

#define BENCH_HOGS_MAX 256

struct bench_busy {
	int hogs;     /* busy processes beside the job (started by rank 0) */
	int hog_pin;  /* hog i on CPU i mod CPUs (else free to run anywhere) */
	int dist;     /* calls timed one by one: p50, p99 */
	double max_s; /* --dist: stop a size's timing after this many seconds (0: never) */
	pid_t pid[BENCH_HOGS_MAX];
	int started;
};

/* The options' help, indented by indent. */
void bench_busy_usage(FILE *f, const char *indent);

/* argv[*i] if it is one of the options above: 1 (taken, *i advanced past its value), or
 * EXIT_USAGE with the reason printed when print is set; 0 if it is not one of them. */
int bench_busy_arg(struct bench_busy *b, int argc, char **argv, int *i, int print);

/* First thing in main: if this process was started as a hog (argv[1] is the hidden
 * --hog-child), it spins until its parent is gone and never returns. */
void bench_busy_child(int argc, char **argv);

/* Starts b->hogs busy processes (a copy of this program, posix_spawn'd: nothing of the job
 * is inherited, no fork of an MPI process), each killed when this process dies. 0, or -1
 * with the reason printed. */
int bench_busy_start(struct bench_busy *b);
/* Kills and reaps them. */
void bench_busy_stop(struct bench_busy *b);

/* What --dist measured of one size on one rank, in seconds. */
struct bench_dist {
	long calls;
	double mean, p50, p99, max;
};

/* Times up to iters calls of call(ctx) one by one, in rounds of BENCH_DIST_ROUND calls; after
 * each round agree(ctx, elapsed) returns the largest elapsed time over the ranks (a collective
 * outside the timed calls), and the timing stops once that passes max_s (0: never) or iters
 * calls were made. Every rank makes the same number of calls. The first non-zero return of
 * call is returned (the timing stops there); else 0 and *d filled. */
#define BENCH_DIST_ROUND 16
int bench_dist_time(long iters, double max_s, int (*call)(void *ctx),
                    double (*agree)(void *ctx, double elapsed), void *ctx, struct bench_dist *d);

#endif
