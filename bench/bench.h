/* bench.h - what the modes of shmcoll-bench share: option values (sizes, datatype and
 * operation names), the exact test values of values.c, the clock and the CSV output. */
#ifndef SHMCOLL_BENCH_H
#define SHMCOLL_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <shmcoll.h>

#define PROG "shmcoll-bench"

/* Exit codes: 1 a failed shmcoll call or a resource, 2 a bad command line, 3 a wrong result. */
#define EXIT_FAIL    1
#define EXIT_USAGE   2
#define EXIT_INVALID 3

/* The modes, chosen by the first argument (shmcoll-bench.c). argv[0] is the mode name (or the
 * program for the default mode); the options start at argv[1]. Each returns an exit code. */
int bench_coll_main(int argc, char **argv);
int bench_kernels_main(int argc, char **argv);
int bench_stream_main(int argc, char **argv);
int bench_c2c_main(int argc, char **argv);
int bench_copy_main(int argc, char **argv);
int bench_p2p_main(int argc, char **argv);
int bench_overlap_main(int argc, char **argv);
int bench_nbc_main(int argc, char **argv);
int bench_vcoll_main(int argc, char **argv);
void bench_coll_usage(FILE *f);
void bench_kernels_usage(FILE *f);
void bench_stream_usage(FILE *f);
void bench_c2c_usage(FILE *f);
void bench_copy_usage(FILE *f);
void bench_p2p_usage(FILE *f);
void bench_overlap_usage(FILE *f);
void bench_nbc_usage(FILE *f);
void bench_vcoll_usage(FILE *f);
void bench_usage(FILE *f);

/* Non-zero when arg asks for help (--help, -h); the usage is then printed (rank 0 only) and
 * the mode returns -1 from its parse, which ends the run with status 0. */
int bench_help(const char *arg);

/* Non-zero when this process should print: rank 0 of a launched job, or a process on its own.
 * Read from SHMCOLL_RANK, so it works before shmcoll_init. */
int bench_is_rank0(void);

/* Prints "shmcoll-bench: <message>" and a hint to stderr (rank 0 only); returns EXIT_USAGE. */
int bench_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The end of a run whose command line (or setup) every rank found wrong alike, before
 * shmcoll_init: rank 0 has printed why; the ranks meet in a barrier of a communicator made for
 * it, so that none exits before that message is out (the launcher stops the job when the
 * first rank fails). Returns rc. */
int bench_usage_exit(int rc);

/* Before shmcoll_init: makes each rank's symmetric heap hold need bytes. A size already in
 * SHMCOLL_ARENA_BYTES is kept and checked; else, if the default heap is too small, it is set
 * to an arena that is large enough (every rank computes the same from SHMCOLL_SIZE), with a
 * note on stderr. what prefixes the messages. 0, or -1 with the reason printed by rank 0. */
int bench_fit_arena(const char *what, size_t need);

/* A byte count with an optional K, M or G suffix (powers of 1024; fractions allowed, as in
 * mpi-bench). 0 or -1 for garbage. */
int bench_parse_size(const char *s, size_t *out);
/* A positive finite number. 0 or -1. */
int bench_parse_positive(const char *s, double *out);
/* The value of an option at argv[*i + 1], advancing *i; NULL (and an error printed) if missing. */
const char *bench_optarg(int argc, char **argv, int *i);

/* Names as the options spell them: int8 ... float64, sum ... bxor. -1 for an unknown name. */
int bench_dtype_parse(const char *s);
const char *bench_dtype_name(shmcoll_dtype dtype);
int bench_op_parse(const char *s);
const char *bench_op_name(shmcoll_op op);
int bench_dtype_is_float(shmcoll_dtype dtype);

/* Exact test values for a reduction of n contributions (ranks, or kernel sources). Every value,
 * every partial result in any order and the result are integers exactly representable in the
 * dtype (integer sums and products wrap, as the library specifies), so results compare bit for
 * bit. Which pattern is used depends on the dtype, op and n (values.c). */
struct bench_vals {
	shmcoll_dtype dtype;
	shmcoll_op op;
	int n;
	int gen;   /* the pattern */
	int64_t m; /* its modulus */
};

void bench_vals_init(struct bench_vals *v, shmcoll_dtype dtype, shmcoll_op op, int n);
/* What contributor r puts at index i, and what the reduction must give there. */
int64_t bench_vals_input(const struct bench_vals *v, int r, size_t i);
int64_t bench_vals_result(const struct bench_vals *v, size_t i);

/* Values for the collectives that only move data, as mpi-bench makes them on floats
 * (r*1000 + i%97, and src*1000 + dst*10 + i%7 for alltoall); scrambled bits on integers. */
int64_t bench_tag(shmcoll_dtype dtype, int r, size_t i);
int64_t bench_tag_a2a(shmcoll_dtype dtype, int src, int dst, size_t i);

/* Element i of buf as dtype: store the integer v (wrapping on integer dtypes, rounding to
 * nearest even on float16/bfloat16), compare it bit for bit with v stored the same way, and
 * format it for a message. */
void bench_elem_store(void *buf, size_t i, shmcoll_dtype dtype, int64_t v);
int bench_elem_equal(const void *buf, size_t i, shmcoll_dtype dtype, int64_t v);
void bench_elem_format(const void *buf, size_t i, shmcoll_dtype dtype, char *s, size_t len);
void bench_value_format(shmcoll_dtype dtype, int64_t v, char *s, size_t len);

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);

/* The program that prints the messages of the code both harnesses share (osu.c, sweep.c,
 * vsweep.c): PROG, or the MPI harness's name, which it sets before anything else. */
extern const char *bench_prog;

/* The CSV: stdout when print is set (rank 0 only), and the --csv file if one was named
 * (osu.c). */
struct bench_out {
	FILE *file;
	int print;
};

int bench_out_open(struct bench_out *o, const char *path, int print);
void bench_out_line(struct bench_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int bench_out_close(struct bench_out *o);

#endif
