/* mem.h - what the memory-system modes of shmcoll-bench (stream, c2c, copy) share: the CPUs a
 * job may use and pinning to them, the cache sizes, statistics over repetitions, waiting on a
 * shared word, memory a partner can see, and rendering a picture with gnuplot. */
#ifndef SHMCOLL_BENCH_MEM_H
#define SHMCOLL_BENCH_MEM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/bench.h"

/* A list of CPUs, in the order given (bench_cpus_allowed: increasing). */
#define BENCH_MAX_CPUS 1024

struct bench_cpus {
	int n;
	int cpu[BENCH_MAX_CPUS];
};

/* The CPUs this job may use: SHMCOLL_CPUS, which shmcoll-run sets to the CPUs it was allowed
 * before it pinned each rank to one of them, or else this process's affinity mask. 0 or -1
 * (with a message in err). */
int bench_cpus_allowed(struct bench_cpus *out, char *err, size_t errlen);

/* Parses a list such as "0-3,8,10-11" into out, in the order written, and checks every CPU:
 * it must exist on this machine and be in allowed. 0, or -1 with a message in err naming the
 * CPU and what is wrong with it (no such CPU, outside the allowed set, listed twice). */
int bench_cpus_parse(const char *spec, const struct bench_cpus *allowed, struct bench_cpus *out,
                     char *err, size_t errlen);

/* Formats a list compactly ("0-3,8"), in its order. Returns s. */
char *bench_cpus_format(const struct bench_cpus *c, char *s, size_t len);

/* The CPUs of a mode whose ranks (or threads) each need a CPU of their own: the --cpus list
 * when spec is set, else the allowed CPUs, of which there must be at least need. 0, or
 * EXIT_USAGE with the reason printed by rank 0 ("stream: 3 ranks need 3 CPUs, but this job may
 * use only 2 (0-1)"). Every rank computes the same answer, so all of them stop together. */
int bench_cpus_for(const char *mode, const char *spec, int need, const char *what,
                   struct bench_cpus *out);

/* Pins the calling thread to cpu. 0, or -1 with a message in err. */
int bench_pin(int cpu, char *err, size_t errlen);

/* The data and unified cache sizes of CPU 0 in bytes, from sysfs (glibc's sysconf reads cpuid,
 * which some hypervisors fill with nonsense: 320 MiB of L3 on the Zen 4 VM of 2026-11-25), 0 where
 * a level is missing. l2 and l3 are per instance; l3_shared is how many CPUs share one L3. */
struct bench_caches {
	size_t l1d, l2, l3;
	int l3_shared;
};

void bench_caches(struct bench_caches *c);
/* The last level present (l3, else l2, else l1d, else 32 MiB). */
size_t bench_llc(const struct bench_caches *c);

/* Best (smallest) and median of n values (x is sorted in place). */
double bench_min(double *x, int n);
double bench_median(double *x, int n);

/* Spins (with pause) until *w == want, yielding the CPU every so often so that a partner that
 * shares it still runs. Returns 0 once it holds (ordered as an acquire: what the partner wrote
 * before its release of *w is visible), or -1 if BENCH_WAIT_S seconds pass without it (a
 * partner that died or never came). */
#define BENCH_WAIT_S 60
int bench_wait_eq(const _Atomic uint64_t *w, uint64_t want);
/* As above, until *w >= want. */
int bench_wait_ge(const _Atomic uint64_t *w, uint64_t want);

/* Memory in the job's arena that a partner rank can reach: every rank calls bench_shared_alloc
 * with the same size (it is shmcoll_malloc, a collective), and bench_shared_peer gives rank p's
 * buffer of the same allocation, in this process's mapping. Zeroed, cache-line aligned. */
void *bench_shared_alloc(shmcoll_comm *comm, size_t bytes);
void *bench_shared_peer(shmcoll_comm *comm, void *mine, int p);

/* A failure every rank found alike (a bad command line, too few CPUs): rank 0 has printed
 * why; all ranks meet before they exit, or the launcher, seeing one rank fail, could stop rank 0
 * before it said anything. Returns rc. */
int bench_stop_together(shmcoll_comm *comm, int rc);

/* The CPU's model name from /proc/cpuinfo ("AMD EPYC"), or "" where there is none. */
void bench_cpu_model(char *s, size_t len);

/* Appends to a gnuplot script vertical dashed lines at the cache sizes, labelled "L1d 32 KiB"
 * and so on, for a plot whose x axis is bytes on a log scale. */
void bench_plot_cache_marks(FILE *script, const struct bench_caches *c);

/* For the tests: non-zero when SHMCOLL_BENCH_FAULT names mode, and the mode should then
 * corrupt one value it is about to check, to prove that its check catches a wrong result. */
int bench_fault(const char *mode);

/* Formats a byte count as "32 KiB", "1 MiB", "1.5 GiB". Returns s. */
char *bench_bytes_str(size_t bytes, char *s, size_t len);

/* The job, for the modes that need partners: a communicator (NULL at P=1 without a launcher
 * is never the case: shmcoll_init works on its own as a job of one). */
int bench_mem_init(const char *mode, shmcoll_comm **comm);

#endif
