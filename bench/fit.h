/* fit.h - the alpha-beta model of a collective's sweep, t(n) = alpha + beta*n, fitted to the
 * sizes measured (--fit): what shmcoll-bench's collectives mode (coll.c) and the MPI harness
 * (mpi/mpi-bench.c) share, so that both print the same row for the same sweep. Plain C and
 * libm only: no part of the library, and no harness symbol (the unit test compiles it alone). */
#ifndef SHMCOLL_BENCH_FIT_H
#define SHMCOLL_BENCH_FIT_H

#include <stddef.h>
#include <stdio.h>

/* Sizes double from --min-bytes, so even 1 byte to SIZE_MAX makes fewer points than this. */
#define BENCH_FIT_MAX 64

/* The sizes of one op's sweep and their latencies, as the rows print them. */
struct bench_fit_pts {
	int n;
	double bytes[BENCH_FIT_MAX];
	double lat_us[BENCH_FIT_MAX];
};

/* Appends a point (beyond BENCH_FIT_MAX points it is dropped: no sweep gets there). */
void bench_fit_add(struct bench_fit_pts *p, size_t bytes, double lat_us);

struct bench_fit {
	double alpha_us;         /* the latency: the line at 0 bytes */
	double beta_us_per_byte; /* the time per byte as sizes grow */
	double r2;               /* coefficient of determination on the relative scale, [0, 1] */
	double max_rel_err;      /* max |t_i - fit(n_i)| / t_i over the points */
	double min_bytes, max_bytes;
	int sizes; /* points fitted */
};

/* Fits the k points (bytes[i], lat_us[i]) by least squares in relative error (fit.c says
 * why). 0 and *f filled; -1 when there is no line to fit: fewer than 2 points, fewer than 2
 * distinct sizes, a latency that is not a positive finite number, or a size that is not a
 * non-negative finite one. */
int bench_fit_line(const double *bytes, const double *lat_us, int k, struct bench_fit *f);

/* How many sizes a sweep from minb to maxb makes, doubling (the harnesses' loop); 0 for minb 0
 * or minb > maxb. */
int bench_fit_sizes(size_t minb, size_t maxb);

/* The header of the fit rows, with its newline: a comment to CSV readers, so that the data
 * rows' header stays the CSV's only one. */
extern const char bench_fit_header[];

/* The fit row of an op into buf (with its newline): "fit,impl,op,ranks,..." in the columns
 * of bench_fit_header. snprintf's return. */
int bench_fit_row(char *buf, size_t len, const char *impl, const char *op, int ranks,
                  const struct bench_fit *f);

/* --fit's help, indented by indent. */
void bench_fit_usage(FILE *f, const char *indent);

#endif
