/* plot.h - drawing a benchmark's table with gnuplot, for every harness: shmcoll-bench's modes
 * and the MPI harness (bench/mpi/mpi-bench.c), which links nothing of the library. */
#ifndef SHMCOLL_BENCH_PLOT_H
#define SHMCOLL_BENCH_PLOT_H

#include <stdio.h>

/* Runs gnuplot on script (which must `set output` itself). 0, or -1 with the reason printed to
 * stderr (gnuplot missing, or it failed), named by bench_prog. */
int bench_gnuplot(const char *script);

/* s in single quotes for gnuplot, which doubles a quote inside them. */
void bench_gp_quote(FILE *script, const char *s);

#endif
