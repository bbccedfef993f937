/* shmcoll-bench.c - the benchmark's entry point: the first argument names the mode (the
 * collectives when it is left out), and each mode parses the rest of the command line. */
#include <string.h>

#include "bench/bench.h"
#include "bench/busy.h"

/* To add a mode: write its main and usage in a file of its own, and add a row here. */
static const struct mode {
	const char *name;
	int (*main)(int argc, char **argv);
	void (*usage)(FILE *f);
} modes[] = {
    {"coll", bench_coll_main, bench_coll_usage},
    {"kernels", bench_kernels_main, bench_kernels_usage},
    {"stream", bench_stream_main, bench_stream_usage},
    {"c2c", bench_c2c_main, bench_c2c_usage},
    {"copy", bench_copy_main, bench_copy_usage},
    {"p2p", bench_p2p_main, bench_p2p_usage},
    {"overlap", bench_overlap_main, bench_overlap_usage},
    {"nbc", bench_nbc_main, bench_nbc_usage},
    {"vcoll", bench_vcoll_main, bench_vcoll_usage},
};

#define NMODES (sizeof(modes) / sizeof(modes[0]))

void bench_usage(FILE *f)
{
	size_t i;

	fprintf(f, "Usage: " PROG " [MODE] [OPTIONS]\n"
	           "       " PROG " --help\n"
	           "\n"
	           "Modes (the first argument; coll when left out):\n");
	for (i = 0; i < NMODES; i++) {
		fprintf(f, "\n");
		modes[i].usage(f);
	}
	fprintf(f, "\n"
	           "Sizes take K, M and G suffixes (powers of 1024). Exit status: 0 done, 1 a\n"
	           "failed call or resource, 2 a bad command line, 3 a wrong result.\n");
}

int main(int argc, char **argv)
{
	size_t i;

	/* Line by line even into a pipe or file: when one rank fails, the launcher stops the
	 * others, and a table still in a buffer would be lost with them. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	bench_busy_child(argc, argv);
	if (argc > 1 && argv[1][0] != '-') {
		for (i = 0; i < NMODES; i++)
			if (!strcmp(argv[1], modes[i].name))
				return modes[i].main(argc - 1, argv + 1);
		return bench_usage_error("unknown mode '%s'", argv[1]);
	}
	return modes[0].main(argc, argv);
}
