/* tune.c - shmcoll-tune: measures this machine's protocol crossovers with shmcoll-bench
 * (under shmcoll-run) and writes the tuning file the library reads at create
 * (lib/core/tuning.h; docs/API.md, "Tuning file"). Also checks a file, and shows which file a
 * communicator would read.
 *
 * Every crossover is measured the same way: the two protocols' sweeps run in turn, repeat by
 * repeat (interleaved, so a drift of the machine falls on both), and a size's time is the
 * median of its repeats. A size has a verdict only when one protocol is faster in the
 * medians by 5% and by twice the repeats' spread, and in 3 of 4 paired repeats; the threshold puts
 * the sizes with a verdict on their faster protocol (or, where the sweeps cross more than once,
 * loses least), and leaves the others where the built-in threshold puts them. The file's comments
 * show the tables and how many sizes it moves. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/tuning.h"

extern char **environ;

#define PROG      "shmcoll-tune"
#define MAX_SIZES 32
#define MAX_REPS  15

struct opts {
	int np, reps, quick, check, show;
	const char *out, *file;
	double iters_scale;
};

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: " PROG " [-n P] [-o FILE] [--repeat R] [--quick]\n"
	        "       " PROG " --check [FILE]\n"
	        "       " PROG " --show\n"
	        "\n"
	        "Measures this machine's protocol crossovers with shmcoll-bench under\n"
	        "shmcoll-run and writes the tuning file every shmcoll communicator reads at\n"
	        "create: the cross-core hop, allreduce's flat/direct crossover, the direct\n"
	        "protocol's chunk, reduce's flat/direct crossover and the single-copy\n"
	        "crossover (where ranks may read each other). Each pair of protocols is\n"
	        "timed in turn, R times, and compared by medians.\n"
	        "\n"
	        "  -n, --np P       ranks (default: the CPUs this process may use, at most 8)\n"
	        "  -o, --out FILE   where to write (default: $SHMCOLL_TUNE if set, else\n"
	        "                   " SHMCOLL_TUNE_DEFAULT_PATH "); - writes to stdout\n"
	        "  --repeat R       repeats of each sweep (default 5; 1-%d)\n"
	        "  --quick          fewer sizes and iterations, 1 repeat: a smoke test, not a\n"
	        "                   tuning\n"
	        "  --check [FILE]   parse FILE (default: the file the library would read) and\n"
	        "                   say what it sets, or the line and reason it is refused\n"
	        "  --show           which file a communicator would read, and what it sets\n"
	        "\n"
	        "shmcoll-run and shmcoll-bench are taken from $SHMCOLL_RUN and $SHMCOLL_BENCH,\n"
	        "else beside this program, else from PATH. Exit status: 0 done, 1 a failed\n"
	        "measurement or a refused file, 2 a bad command line.\n",
	        MAX_REPS);
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry '" PROG " --help'.\n");
	return 2;
}

/* ---- running the benchmark ---- */

static char run_path[PATH_MAX], bench_path[PATH_MAX];

/* name from $env, else beside this program (installed together, or the build tree's
 * lib/ and bench/), else the bare name for PATH. */
static void find_prog(char *out, const char *env, const char *name, const char *build_dir)
{
	char self[PATH_MAX / 2], *slash;
	const char *v = getenv(env);
	ssize_t len;

	if (v && *v) {
		snprintf(out, PATH_MAX, "%s", v);
		return;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len > 0) {
		self[len] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			if (snprintf(out, PATH_MAX, "%s/%.64s", self, name) < PATH_MAX &&
			    access(out, X_OK) == 0)
				return;
			if (snprintf(out, PATH_MAX, "%s/../%.16s/%.64s", self, build_dir, name) <
			        PATH_MAX &&
			    access(out, X_OK) == 0)
				return;
		}
	}
	snprintf(out, PATH_MAX, "%s", name);
}

/* Runs argv (main set SHMCOLL_TUNE=none: a file already there must not steer what is
 * measured) and returns its standard output (malloc'ed), or NULL with the reason on stderr. */
static char *run(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fds[2], st, rc;
	ssize_t got;
	pid_t pid;

	if (pipe(fds) != 0) {
		perror(PROG ": pipe");
		return NULL;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	posix_spawn_file_actions_addclose(&fa, fds[1]);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		fprintf(stderr, PROG ": cannot run %s: %s\n", argv[0], strerror(rc));
		close(fds[0]);
		return NULL;
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);

			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		got = read(fds[0], buf + len, cap - len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!buf || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, PROG ": %s %s failed (%s %d)\n", argv[0], argv[1] ? argv[1] : "",
		        WIFEXITED(st) ? "exit status" : "signal",
		        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/* One sweep's times: lat_us of each size of a shmcoll-bench CSV (no header). */
struct sweep {
	size_t n, bytes[MAX_SIZES];
	double us[MAX_SIZES];
};

static int parse_sweep(const char *csv, struct sweep *s)
{
	const char *line = csv;

	s->n = 0;
	for (; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
		unsigned long long bytes;
		double us;

		if (sscanf(line, "%*[^,],%*[^,],%*d,%llu,%lf", &bytes, &us) != 2)
			continue;
		if (s->n == MAX_SIZES)
			return -1;
		s->bytes[s->n] = (size_t)bytes;
		s->us[s->n++] = us;
	}
	return s->n ? 0 : -1;
}

/* Times op at sizes [minb, maxb] with the extra settings (an --algo, a --chunk). */
static int bench_sweep(const struct opts *o, const char *op, size_t minb, size_t maxb,
                       const char *opt, const char *val, struct sweep *s)
{
	char np[16], mn[32], mx[32], scale[32];
	char *argv[20], *out;
	int a = 0, rc;

	snprintf(np, sizeof(np), "%d", o->np);
	snprintf(mn, sizeof(mn), "%zu", minb);
	snprintf(mx, sizeof(mx), "%zu", maxb);
	snprintf(scale, sizeof(scale), "%g", o->iters_scale);
	argv[a++] = run_path;
	argv[a++] = "-n";
	argv[a++] = np;
	argv[a++] = bench_path;
	argv[a++] = "--op";
	argv[a++] = (char *)op;
	argv[a++] = "--min-bytes";
	argv[a++] = mn;
	argv[a++] = "--max-bytes";
	argv[a++] = mx;
	argv[a++] = "--iters-scale";
	argv[a++] = scale;
	argv[a++] = "--no-header";
	if (opt) {
		argv[a++] = (char *)opt;
		argv[a++] = (char *)val;
	}
	argv[a] = NULL;
	out = run(argv);
	if (!out)
		return -1;
	rc = parse_sweep(out, s);
	if (rc < 0)
		fprintf(stderr, PROG ": no table from shmcoll-bench --op %s\n", op);
	free(out);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The medians of nvar settings of one op, their sweeps interleaved repeat by repeat. */
struct versus {
	size_t n, bytes[MAX_SIZES];
	double us[4][MAX_SIZES];            /* medians */
	double raw[4][MAX_SIZES][MAX_REPS]; /* each repeat's, for the paired comparison */
	int reps;
};

static int measure(const struct opts *o, const char *op, size_t minb, size_t maxb, const char *opt,
                   const char *const *vals, int nvar, struct versus *v)
{
	double sorted[MAX_REPS];
	struct sweep s;
	int r, k;
	size_t i;

	for (r = 0; r < o->reps; r++) {
		for (k = 0; k < nvar; k++) {
			if (bench_sweep(o, op, minb, maxb, opt, vals[k], &s) < 0)
				return -1;
			if (r == 0 && k == 0) {
				v->n = s.n;
				memcpy(v->bytes, s.bytes, sizeof(s.bytes));
			}
			if (s.n != v->n)
				return -1;
			for (i = 0; i < s.n; i++)
				v->raw[k][i][r] = s.us[i];
		}
		fprintf(stderr, PROG ": %s: repeat %d of %d\n", op, r + 1, o->reps);
	}
	v->reps = o->reps;
	for (k = 0; k < nvar; k++)
		for (i = 0; i < v->n; i++) {
			memcpy(sorted, v->raw[k][i], sizeof(sorted));
			v->us[k][i] = median(sorted, o->reps);
		}
	return 0;
}

/* The spread of setting k's repeats at size i: their median absolute deviation over their
 * median. */
static double spread(const struct versus *v, int k, size_t i)
{
	double dev[MAX_REPS];
	int r;

	for (r = 0; r < v->reps; r++) {
		double d = v->raw[k][i][r] - v->us[k][i];

		dev[r] = d < 0 ? -d : d;
	}
	return median(dev, v->reps) / v->us[k][i];
}

/* A size's verdict between settings 0 and 1: the faster one (0 or 1), or -1 when the
 * measurements do not say. The faster median must lead by VERDICT_MARGIN and by twice the
 * larger spread of the two, and be faster in 3 of 4 paired repeats (the two ran in turn, so
 * a repeat's pair saw the same machine). Settings a and b of v; the verdict is a, b or -1.
 * Four ranks on two CPUs flip between speeds from one
 * launch to the next (a 16 MiB reduce measured 17% faster one way and 26% slower in the
 * next run), and a threshold must not follow that. */
#define VERDICT_MARGIN 1.05
static int verdict_of(const struct versus *v, size_t i, int a, int b)
{
	double sa = spread(v, a, i), sb = spread(v, b, i);
	double need = 1 + 2 * (sa > sb ? sa : sb);
	int r, wins = 0;

	if (need < VERDICT_MARGIN)
		need = VERDICT_MARGIN;
	for (r = 0; r < v->reps; r++)
		wins += v->raw[b][i][r] < v->raw[a][i][r];
	if (v->us[a][i] > v->us[b][i] * need && wins * 4 >= v->reps * 3)
		return b;
	if (v->us[b][i] > v->us[a][i] * need && (v->reps - wins) * 4 >= v->reps * 3)
		return a;
	return -1;
}

static int verdict(const struct versus *v, size_t i)
{
	return verdict_of(v, i, 0, 1);
}

/* Where setting 1 should take over from setting 0: the index j of the first size it runs
 * (v->n: none). Its cost is the product, over the sizes with a verdict, of chosen time /
 * faster time; the least wins, and among equals the one nearest the built-in threshold
 * (builtin bytes, per as in write_crossover; 0: setting 1 never), so sizes without a verdict
 * keep the built-in choice. With one clear crossing that is the crossing. *slower counts the
 * sizes with a verdict it leaves on their slower setting, *moved the sizes whose setting
 * differs from the built-in one. */
static size_t crossover(const struct versus *v, size_t builtin, size_t per, int *slower, int *moved)
{
	double cost, best_cost = 0;
	size_t j, i, best = v->n, jb = v->n;

	for (i = 0; builtin && i < v->n; i++)
		if (v->bytes[i] / per >= builtin) {
			jb = i;
			break;
		}
	for (j = 0; j <= v->n; j++) {
		for (cost = 1, i = 0; i < v->n; i++) {
			int won = verdict(v, i);

			if (won >= 0)
				cost *= v->us[i >= j][i] / v->us[won][i];
		}
		if (j == 0 || cost < best_cost * (1 - 1e-9) ||
		    (cost <= best_cost * (1 + 1e-9) &&
		     (j > jb ? j - jb : jb - j) < (best > jb ? best - jb : jb - best))) {
			best_cost = cost;
			best = j;
		}
	}
	*slower = *moved = 0;
	for (i = 0; i < v->n; i++) {
		int won = verdict(v, i);

		*slower += won >= 0 && won != (i >= best);
		*moved += (i >= best) != (i >= jb);
	}
	return best;
}

static void print_bytes(FILE *f, size_t b);

/* Writes key = the size from which setting 1 runs, as bytes / per (allgather's blocks are
 * its size / P), against the built-in threshold builtin (0: none), with what the choice
 * changes. From none of the sizes: key is the size past the largest measured when beyond is
 * set (setting 1 is what runs there anyway: the built-in default), else not set. */
static void write_crossover(FILE *f, const char *key, const struct versus *v, size_t builtin,
                            size_t per, int beyond)
{
	int slower, moved;
	size_t j = crossover(v, builtin, per, &slower, &moved);

	fprintf(f, "# %d size(s) on another protocol than the built-in threshold's", moved);
	if (slower)
		fprintf(f, "; %d on the slower one (the sweeps cross more than once)", slower);
	fprintf(f, ".\n");
	if (j == v->n && !beyond) {
		fprintf(f,
		        "# %s: not set: the first was faster, or not clearly slower, at every "
		        "size measured\n\n",
		        key);
		return;
	}
	fprintf(f, "%s = ", key);
	print_bytes(f, (j == v->n ? 2 * v->bytes[v->n - 1] : v->bytes[j]) / per);
	fprintf(f, "\n\n");
}

static void print_bytes(FILE *f, size_t b)
{
	if (b >= (1u << 20) && b % (1u << 20) == 0)
		fprintf(f, "%zuM", b >> 20);
	else if (b >= 1024 && b % 1024 == 0)
		fprintf(f, "%zuK", b >> 10);
	else
		fprintf(f, "%zu", b);
}

static void comment_table(FILE *f, const struct versus *v, const char *const *names, int nvar)
{
	size_t i;
	int k;

	fprintf(f, "#   bytes");
	for (k = 0; k < nvar; k++)
		fprintf(f, " %10s", names[k]);
	fprintf(f, "   (median us of the repeats)\n");
	for (i = 0; i < v->n; i++) {
		fprintf(f, "#   %-7zu", v->bytes[i]);
		for (k = 0; k < nvar; k++)
			fprintf(f, " %10.3f", v->us[k][i]);
		fprintf(f, "\n");
	}
}

/* The hop from shmcoll-bench c2c: "... median of the pair medians X ns ...". 0: unknown. */
static double measure_hop(void)
{
	char *argv[] = {run_path, "-n", "2", bench_path, "c2c", NULL};
	char *out = run(argv), *at;
	double ns = 0;

	if (!out)
		return 0;
	at = strstr(out, "median of the pair medians ");
	if (at)
		ns = strtod(at + strlen("median of the pair medians "), NULL);
	free(out);
	return ns;
}

/* Whether sibling processes may read each other's memory, as single copies need. */
static int cma_possible(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	int scope = 0;

	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 0;
		fclose(f);
	}
	return scope == 0;
}

/* The directory of path, made if missing (the default's <sysconfdir>/shmcoll). */
static void make_parent(const char *path)
{
	char dir[PATH_MAX], *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		mkdir(dir, 0755);
	}
}

/* Writes the file's text into f from the measurements: returns 0, or -1 when a measurement
 * failed (the reason is on stderr). */
static int tune(const struct opts *o, FILE *f)
{
	static const char *const algos[] = {"flat", "direct"};
	static const char *const staged_cma[] = {"flat", "cma"};
	char chunk_names[4][16];
	const char *chunks[4];
	struct versus v;
	size_t best;
	double hop = 0;
	time_t now = time(NULL);
	char date[64];
	int k;

	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	fprintf(f, "# shmcoll tuning file, written by " PROG " on %s at P=%d, %d repeat(s)%s.\n",
	        date, o->np, o->reps, o->quick ? " (--quick: a smoke test, not a tuning)" : "");
	fprintf(f, "# Read by every communicator at create (SHMCOLL_TUNE names another file,\n"
	           "# \"none\" none); the environment's settings win over it.\n");
	fprintf(f, "version = %d\n\n", SHMCOLL_TUNEFILE_VERSION);

	if (o->np >= 2)
		hop = measure_hop();
	if (hop > 0)
		fprintf(f,
		        "# The cross-core hop (shmcoll-bench c2c, median of the pairs' medians).\n"
		        "hop_ns = %.1f\n\n",
		        hop);
	else
		fprintf(f, "# hop_ns: not measured (one rank, or shmcoll-bench c2c failed)\n\n");

	if (o->np < 2) {
		fprintf(f,
		        "# One rank: nothing to choose between; the built-in thresholds stay.\n");
		return 0;
	}

	/* allreduce: flat against direct around the built-in crossover. */
	if (measure(o, "allreduce", o->quick ? 1024 : 256, o->quick ? 16384 : 1u << 20, "--algo",
	            algos, 2, &v) < 0)
		return -1;
	fprintf(f, "# allreduce, flat against direct:\n");
	comment_table(f, &v, algos, 2);
	/* Two ranks run flat at every size unless the file says otherwise; the key holds for
	 * every number of ranks, so a pair's sweep sets it only where direct clearly won. */
	if (o->np == 2)
		write_crossover(f, "allreduce.direct_min_bytes", &v,
		                SHMCOLL_ALLREDUCE_DIRECT_MIN_PAIR, 1, 0);
	else
		write_crossover(f, "allreduce.direct_min_bytes", &v, SHMCOLL_ALLREDUCE_DIRECT_MIN,
		                1, 1);

	/* allreduce with more ranks than CPUs: every step may wait for a turn of a CPU. */
	if (!o->quick) {
		struct opts over = *o;
		cpu_set_t set;
		int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;

		over.np = 2 * (o->np > cpus ? o->np : cpus);
		if (over.np > 16)
			over.np = 16;
		if (measure(&over, "allreduce", 256, 1u << 20, "--algo", algos, 2, &v) < 0)
			return -1;
		fprintf(f,
		        "# allreduce at P=%d, more ranks than the %d CPUs, flat against direct:\n",
		        over.np, cpus);
		comment_table(f, &v, algos, 2);
		write_crossover(f, "allreduce.direct_min_bytes.oversubscribed", &v,
		                SHMCOLL_ALLREDUCE_DIRECT_MIN_OVER, 1, 1);
	}

	/* The direct protocol's chunk, at a size where it runs many chunks. */
	for (k = 0; k < 4; k++) {
		snprintf(chunk_names[k], sizeof(chunk_names[k]), "%u", 16384u << k);
		chunks[k] = chunk_names[k];
	}
	if (measure(o, "allreduce", o->quick ? 1u << 20 : 4u << 20, o->quick ? 1u << 20 : 4u << 20,
	            "--chunk", chunks, 4, &v) < 0)
		return -1;
	fprintf(f, "# The direct protocol's chunk (allreduce, --chunk BYTES):\n");
	comment_table(f, &v, chunks, 4);
	/* Another chunk than the default (a staging half, the last) only on a verdict against it.
	 */
	best = 3;
	for (k = 0; k < 3; k++)
		if (verdict_of(&v, 0, 3, k) == k && v.us[k][0] < v.us[best][0])
			best = (size_t)k;
	if (best == 3)
		fprintf(f, "# chunk_bytes: not set: no smaller chunk was clearly faster than a "
		           "staging half\n\n");
	else
		fprintf(f, "chunk_bytes = %s\n\n", chunks[best]);

	/* reduce: flat against direct, where the direct protocol may start to pay. */
	if (!o->quick) {
		if (measure(o, "reduce", 1u << 20, 64u << 20, "--algo", algos, 2, &v) < 0)
			return -1;
		fprintf(f, "# reduce, flat against direct:\n");
		comment_table(f, &v, algos, 2);
		write_crossover(f, "reduce.direct_min_bytes", &v, SHMCOLL_REDUCE_DIRECT_MIN, 1, 1);
	}

	/* Single copies against staging, for allgather's blocks. Where ranks may not read each
	 * other (Yama's ptrace_scope >= 1), a forced single copy stages: nothing to compare. */
	if (!cma_possible()) {
		fprintf(f, "# cma_min_bytes: not measured: ranks may not read each other's memory "
		           "here\n# (kernel.yama.ptrace_scope >= 1)\n\n");
	} else if (measure(o, "allgather", o->quick ? 65536 : 4096, o->quick ? 1u << 20 : 16u << 20,
	                   "--algo", staged_cma, 2, &v) < 0) {
		fprintf(f, "# cma_min_bytes: not set: single copies could not run here (ranks "
		           "may not read each other's memory)\n\n");
	} else {
		fprintf(f, "# allgather, staged against single copies (total bytes per rank):\n");
		comment_table(f, &v, staged_cma, 2);
		write_crossover(f, "cma_min_bytes", &v, 0, (size_t)o->np, 0);
	}

	fprintf(f,
	        "# barrier.tree_min_ranks, bcast.tree_min_ranks: not measured: the trees "
	        "pay from %d ranks,\n# and this tuning ran %d.\n",
	        SHMCOLL_TREE_MIN_RANKS, o->np);
	return 0;
}

/* ---- checking a file ---- */

static void describe(const struct shmcoll_tunefile *t)
{
	static const struct {
		const char *name;
		int kind, which; /* 0: direct_min, 1: tree_min, 2: direct_min_over */
		size_t builtin;
	} per_kind[] = {
	    {"allreduce.direct_min_bytes", KIND_ALLREDUCE, 0, SHMCOLL_ALLREDUCE_DIRECT_MIN},
	    {"allreduce.direct_min_bytes.oversubscribed", KIND_ALLREDUCE, 2,
	     SHMCOLL_ALLREDUCE_DIRECT_MIN_OVER},
	    {"reduce.direct_min_bytes", KIND_REDUCE, 0, SHMCOLL_REDUCE_DIRECT_MIN},
	    {"barrier.tree_min_ranks", KIND_BARRIER, 1, SHMCOLL_TREE_MIN_RANKS},
	    {"bcast.tree_min_ranks", KIND_BCAST, 1, SHMCOLL_TREE_MIN_RANKS},
	};
	size_t i;

	for (i = 0; i < sizeof(per_kind) / sizeof(per_kind[0]); i++) {
		int k = per_kind[i].kind;
		uint64_t v = per_kind[i].which == 1   ? t->tree_min[k]
		             : per_kind[i].which == 2 ? t->direct_min_over[k]
		                                      : t->direct_min[k];

		printf("  %-41s %llu%s\n", per_kind[i].name,
		       (unsigned long long)shmcoll__tuned(v, per_kind[i].builtin),
		       v ? ""
		       : per_kind[i].kind == KIND_ALLREDUCE && per_kind[i].which == 0
		           ? " (built-in; two ranks: flat at every size)"
		           : " (built-in)");
	}
	if (t->chunk_bytes)
		printf("  %-41s %llu\n", "chunk_bytes", (unsigned long long)t->chunk_bytes);
	else
		printf("  %-41s a staging half (built-in)\n", "chunk_bytes");
	if (t->cma_min)
		printf("  %-41s %llu\n", "cma_min_bytes", (unsigned long long)t->cma_min);
	else
		printf("  %-41s none: staging (built-in)\n", "cma_min_bytes");
	if (t->hop_ns > 0)
		printf("  %-41s %.1f (as measured; informative)\n", "hop_ns", t->hop_ns);
}

static int check(const char *path, int show)
{
	struct shmcoll_tunefile t;
	char why[512];
	int rc;

	if (!path) {
		printf("no tuning file: SHMCOLL_TUNE=none; the built-in thresholds:\n");
		memset(&t, 0, sizeof(t));
		describe(&t);
		return 0;
	}
	rc = shmcoll__tunefile_load(path, &t, why, sizeof(why));
	if (rc == -ENOENT && show && !getenv("SHMCOLL_TUNE")) {
		printf("no tuning file at %s; the built-in thresholds:\n", path);
		memset(&t, 0, sizeof(t));
		describe(&t);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, PROG ": %s: refused: %s\n", path, why);
		if (show)
			printf("%s is refused, so communicators use the built-in thresholds\n",
			       path);
		return 1;
	}
	printf("%s: valid; a communicator whose rank 0 reads it uses:\n", path);
	describe(&t);
	return 0;
}

/* ---- the command line ---- */

static int parse(int argc, char **argv, struct opts *o)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return -1;
		} else if (!strcmp(a, "--quick")) {
			o->quick = 1;
		} else if (!strcmp(a, "--show")) {
			o->show = 1;
		} else if (!strcmp(a, "--check")) {
			o->check = 1;
			if (i + 1 < argc && argv[i + 1][0] != '-')
				o->file = argv[++i];
		} else if (!strcmp(a, "-n") || !strcmp(a, "--np") || !strcmp(a, "-o") ||
		           !strcmp(a, "--out") || !strcmp(a, "--repeat")) {
			char *end;
			long v;

			if (i + 1 == argc)
				return usage_error("%s needs a value", a);
			if (a[1] == 'o' || !strcmp(a, "--out")) {
				o->out = argv[++i];
				continue;
			}
			errno = 0;
			v = strtol(argv[++i], &end, 10);
			if (errno || *end || end == argv[i])
				return usage_error("not a number: '%s'", argv[i]);
			if (!strcmp(a, "--repeat")) {
				if (v < 1 || v > MAX_REPS)
					return usage_error("--repeat wants 1-15, not '%s'",
					                   argv[i]);
				o->reps = (int)v;
			} else {
				if (v < 1 || v > 1024)
					return usage_error("-n wants 1-1024 ranks, not '%s'",
					                   argv[i]);
				o->np = (int)v;
			}
		} else {
			return usage_error("unknown option '%s'", a);
		}
	}
	if (o->check + o->show > 1 || ((o->check || o->show) && (o->out || o->quick)))
		return usage_error("%s goes alone", o->check ? "--check" : "--show");
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.np = 0, .reps = 5, .iters_scale = 1};
	const char *out;
	char tmp[PATH_MAX], target[PATH_MAX - 64];
	FILE *f;
	int rc;

	rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (o.check)
		return check(o.file ? o.file : shmcoll__tunefile_path(), 0);
	if (o.show)
		return check(shmcoll__tunefile_path(), 1);
	if (!o.np) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		o.np = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
	}
	if (o.quick) {
		o.reps = 1;
		o.iters_scale = 0.05;
	}
	out = o.out                    ? o.out
	      : getenv("SHMCOLL_TUNE") ? getenv("SHMCOLL_TUNE")
	                               : SHMCOLL_TUNE_DEFAULT_PATH;
	if (!*out || !strcmp(out, "none"))
		return usage_error("SHMCOLL_TUNE=%s: say where to write with -o", out);
	/* Copied: the setenv below may free the environment's string. */
	if (snprintf(target, sizeof(target), "%s", out) >= (int)sizeof(target))
		return usage_error("path too long: %s", out);
	out = target;
	setenv("SHMCOLL_TUNE", "none", 1);
	find_prog(run_path, "SHMCOLL_RUN", "shmcoll-run", "lib");
	find_prog(bench_path, "SHMCOLL_BENCH", "shmcoll-bench", "bench");
	if (!strcmp(out, "-"))
		return tune(&o, stdout) < 0 ? 1 : 0;
	/* Written beside the file and renamed over it: a communicator made meanwhile reads the
	 * old file or the new one, never half of one. */
	snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", out, (long)getpid());
	make_parent(out);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, PROG ": cannot write %s: %s\n", tmp, strerror(errno));
		return 1;
	}
	rc = tune(&o, f);
	if (fclose(f) != 0 && rc == 0) {
		fprintf(stderr, PROG ": cannot write %s: %s\n", tmp, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && rename(tmp, out) != 0) {
		fprintf(stderr, PROG ": cannot rename %s to %s: %s\n", tmp, out, strerror(errno));
		rc = -1;
	}
	if (rc < 0) {
		unlink(tmp);
		return 1;
	}
	fprintf(stderr, PROG ": wrote %s\n", out);
	return check(out, 0);
}
