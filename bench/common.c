/* common.c - the parts of shmcoll-bench every mode uses: option values, datatype and operation
 * names, usage errors and the arena's size (the clock and the parsers are in sweep.c, the CSV
 * output in osu.c: the MPI harness shares those). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "shm/arena.h"

static const char *const dtype_names[SHMCOLL_DTYPE_COUNT] = {
    [SHMCOLL_INT8] = "int8",       [SHMCOLL_UINT8] = "uint8",       [SHMCOLL_INT32] = "int32",
    [SHMCOLL_UINT32] = "uint32",   [SHMCOLL_INT64] = "int64",       [SHMCOLL_UINT64] = "uint64",
    [SHMCOLL_FLOAT16] = "float16", [SHMCOLL_BFLOAT16] = "bfloat16", [SHMCOLL_FLOAT32] = "float32",
    [SHMCOLL_FLOAT64] = "float64",
};

static const char *const op_names[SHMCOLL_OP_COUNT] = {
    [SHMCOLL_SUM] = "sum", [SHMCOLL_PROD] = "prod", [SHMCOLL_MIN] = "min", [SHMCOLL_MAX] = "max",
    [SHMCOLL_AVG] = "avg", [SHMCOLL_BAND] = "band", [SHMCOLL_BOR] = "bor", [SHMCOLL_BXOR] = "bxor",
};

int bench_is_rank0(void)
{
	const char *r = getenv("SHMCOLL_RANK");

	return !r || !*r || atoi(r) == 0;
}

int bench_help(const char *arg)
{
	if (strcmp(arg, "--help") && strcmp(arg, "-h"))
		return 0;
	if (bench_is_rank0())
		bench_usage(stdout);
	return 1;
}

int bench_usage_error(const char *fmt, ...)
{
	va_list ap;

	if (!bench_is_rank0())
		return EXIT_USAGE;
	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" PROG " --help'.\n");
	return EXIT_USAGE;
}

int bench_usage_exit(int rc)
{
	const char *size = getenv("SHMCOLL_SIZE");
	shmcoll_comm *comm;

	if (!size || atoi(size) <= 1 || shmcoll_init(&comm) != 0)
		return rc;
	shmcoll_barrier(comm);
	shmcoll_comm_destroy(comm);
	return rc;
}

const char *bench_optarg(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		bench_usage_error("option %s needs a value", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

int bench_dtype_parse(const char *s)
{
	int i;

	for (i = 0; i < SHMCOLL_DTYPE_COUNT; i++)
		if (!strcmp(s, dtype_names[i]))
			return i;
	return -1;
}

const char *bench_dtype_name(shmcoll_dtype dtype)
{
	return (unsigned)dtype < SHMCOLL_DTYPE_COUNT ? dtype_names[dtype] : "unknown";
}

int bench_op_parse(const char *s)
{
	int i;

	for (i = 0; i < SHMCOLL_OP_COUNT; i++)
		if (!strcmp(s, op_names[i]))
			return i;
	return -1;
}

const char *bench_op_name(shmcoll_op op)
{
	return (unsigned)op < SHMCOLL_OP_COUNT ? op_names[op] : "unknown";
}

/* The symmetric heap follows from the arena size (shmcoll__arena_layout in shm/arena.c): what
 * the header, the control blocks and P staging slots (two halves of at most 128 KiB) leave,
 * split P ways, rounded down to a cache line. With the default halves that is
 *     arena = default arena - P * default heap + P * need,
 * which the library's own layout function then confirms (a few tries, each adding what was
 * still missing). */
int bench_fit_arena(const char *what, size_t need)
{
	const char *env = getenv("SHMCOLL_ARENA_BYTES"), *size = getenv("SHMCOLL_SIZE");
	long P = size && *size ? strtol(size, NULL, 10) : 1;
	struct shmcoll_layout lay;
	uint64_t arena;
	char err[160], num[32], *end;
	int tries;

	if (P < 1 || P > SHMCOLL_MAX_RANKS)
		return 0; /* shmcoll_init will say what is wrong */
	if (need > SIZE_MAX / 4 / (size_t)P) {
		if (bench_is_rank0())
			fprintf(stderr, PROG ": %s: %zu bytes of heap per rank fit no arena\n",
			        what, need);
		return -1;
	}
	need = (need + 4095) / 4096 * 4096;
	if (env && *env) {
		errno = 0;
		arena = strtoull(env, &end, 10);
		if (errno || *end ||
		    shmcoll__arena_layout((uint32_t)P, arena, &lay, err, sizeof(err)) < 0)
			return 0; /* shmcoll_init rejects it with its own message */
		if (lay.heap_stride >= need)
			return 0;
		if (bench_is_rank0())
			fprintf(stderr,
			        PROG
			        ": %s: SHMCOLL_ARENA_BYTES=%s leaves a %llu-byte symmetric heap "
			        "per rank, but %zu bytes are needed; unset it (the benchmark then "
			        "sizes the arena) or raise it\n",
			        what, env, (unsigned long long)lay.heap_stride, need);
		return -1;
	}
	if (shmcoll__arena_layout((uint32_t)P, 0, &lay, err, sizeof(err)) < 0 ||
	    lay.heap_stride >= need)
		return 0;
	arena = lay.total_bytes - (uint64_t)P * lay.heap_stride + (uint64_t)P * need;
	for (tries = 0;; tries++) {
		lay.heap_stride = 0;
		if (shmcoll__arena_layout((uint32_t)P, arena, &lay, err, sizeof(err)) == 0 &&
		    lay.heap_stride >= need)
			break;
		if (tries == 8) {
			if (bench_is_rank0())
				fprintf(stderr,
				        PROG
				        ": %s: found no arena size whose heap holds %zu bytes per "
				        "rank (last try %llu: %s)\n",
				        what, need, (unsigned long long)arena, err);
			return -1;
		}
		arena +=
		    (uint64_t)P * (need - (lay.heap_stride < need ? lay.heap_stride : 0) + 4096);
	}
	snprintf(num, sizeof(num), "%llu", (unsigned long long)arena);
	if (setenv("SHMCOLL_ARENA_BYTES", num, 1) != 0) {
		fprintf(stderr, PROG ": setenv: %s\n", strerror(errno));
		return -1;
	}
	if (bench_is_rank0())
		fprintf(stderr,
		        PROG
		        ": %s: SHMCOLL_ARENA_BYTES=%s for %ld ranks (a %llu-byte heap per rank)\n",
		        what, num, P, (unsigned long long)lay.heap_stride);
	return 0;
}
