/* test_bench.c - the memory-system modes of shmcoll-bench (stream, c2c, copy), its OSU-style
 * modes (p2p, overlap) and its variable-count mode (vcoll) from the outside, run through
 * shmcoll-run as users run them: each mode at
 * P = 1 or 2 (and 3) prints its table or CSV, writes a CSV whose every row is well formed and a
 * PNG; wrong results are caught (a fault injected into the data must fail the run with exit 3);
 * and a CPU that does not exist, a CPU outside the allowed set, more ranks than CPUs, a bad
 * command line and a missing gnuplot are clear errors. The collectives mode's --fit prints a
 * well-formed fit row per op, and its fitting function (bench/fit.c, compiled in) is checked on
 * synthetic lines. No figure is checked
 * against a speed: timings are the benchmark's business, not the tests'. Tiny sizes keep every
 * run short, even under AddressSanitizer. */
#include <criterion/criterion.h>

#include <sched.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/fit.h"

#define OUT_MAX  (1 << 20)
#define MAX_ARGS 48

/* One run of the launcher: its directory (stdout, stderr, the CSV and the PNG), exit status and
 * output. */
struct run {
	char dir[64];
	int status;
	char *out, *err;
};

static const char *env_path(const char *name)
{
	const char *p = getenv(name);

	cr_assert(p && *p, "%s is not set (meson test sets it)", name);
	return p;
}

static void path_in(char *buf, size_t len, const struct run *r, const char *name)
{
	snprintf(buf, len, "%s/%s", r->dir, name);
}

static char *slurp_path(const char *path, size_t *len)
{
	char *buf = calloc(OUT_MAX, 1);
	ssize_t n = 0;
	int fd;

	cr_assert_not_null(buf);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, buf, OUT_MAX - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	if (len)
		*len = n > 0 ? (size_t)n : 0;
	return buf;
}

/* Runs `shmcoll-run -n P shmcoll-bench ARGS...` to completion. cpu >= 0 confines the launcher
 * (and so the job) to that one CPU first; path, if set, replaces PATH. In ARGS, "@csv" and
 * "@png" stand for files in the run's directory. */
static void run_bench(struct run *r, int p, int cpu, const char *path, const char *const *args)
{
	char np[16], csv[128], png[128], out[128], err[128];
	char *argv[MAX_ARGS];
	int n = 0, i, fo, fe;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	strcpy(r->dir, "/tmp/shmcoll-bench-test.XXXXXX");
	cr_assert_not_null(mkdtemp(r->dir), "mkdtemp: %s", strerror(errno));
	path_in(csv, sizeof(csv), r, "out.csv");
	path_in(png, sizeof(png), r, "out.png");
	path_in(out, sizeof(out), r, "stdout");
	path_in(err, sizeof(err), r, "stderr");
	snprintf(np, sizeof(np), "%d", p);
	argv[n++] = (char *)env_path("SHMCOLL_RUN");
	argv[n++] = "-n";
	argv[n++] = np;
	argv[n++] = "--";
	argv[n++] = (char *)env_path("SHMCOLL_BENCH");
	for (i = 0; args[i]; i++) {
		cr_assert(n < MAX_ARGS - 1);
		argv[n++] = !strcmp(args[i], "@csv")   ? csv
		            : !strcmp(args[i], "@png") ? png
		                                       : (char *)args[i];
	}
	argv[n] = NULL;
	fo = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
	fe = open(err, O_WRONLY | O_CREAT | O_APPEND, 0600);
	cr_assert(fo >= 0 && fe >= 0, "open output files: %s", strerror(errno));
	pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* Plain C only in the child: no cr_* after fork. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(fo, STDOUT_FILENO) < 0 || dup2(fe, STDERR_FILENO) < 0)
			_exit(126);
		if (cpu >= 0) {
			cpu_set_t one;

			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			if (sched_setaffinity(0, sizeof(one), &one) < 0)
				_exit(125);
		}
		if (path)
			setenv("PATH", path, 1);
		execv(argv[0], argv);
		_exit(126);
	}
	close(fo);
	close(fe);
	/* A hang is caught by meson's timeout for the suite. */
	while (waitpid(pid, &r->status, 0) < 0)
		cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
	r->out = slurp_path(out, NULL);
	r->err = slurp_path(err, NULL);
}

static int exit_code(const struct run *r)
{
	cr_assert(WIFEXITED(r->status), "the launcher was killed by signal %d; stderr:\n%s",
	          WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0, r->err);
	return WEXITSTATUS(r->status);
}

static void cleanup(struct run *r)
{
	const char *names[] = {"stdout", "stderr", "out.csv", "out.png"};
	char path[128];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_in(path, sizeof(path), r, names[i]);
		unlink(path);
	}
	rmdir(r->dir);
	free(r->out);
	free(r->err);
}

/* The CPUs this test may use, in order; returns how many. */
static int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int i, n = 0;

	cr_assert(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return n;
}

static int gnuplot_present(void)
{
	return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

/* Splits a CSV line in place into at most max fields; returns how many. */
static int split_csv(char *line, char **f, int max)
{
	int n = 0;
	char *save = NULL, *tok;

	for (tok = strtok_r(line, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
		f[n++] = tok;
	return n;
}

static double num(const char *s, const char *what, int line)
{
	char *end;
	double v = strtod(s, &end);

	cr_assert(end != s && *end == '\0', "CSV line %d: %s '%s' is not a number", line, what, s);
	return v;
}

/* Checks the CSV of a run: its header is exactly header, and every row has as many fields, with
 * the given columns positive numbers. Returns the number of rows. check(row fields) may assert
 * more. */
static int check_csv(const struct run *r, const char *header, const int *positive, int npos,
                     void (*check)(char **f, int line, void *ctx), void *ctx)
{
	char path[128], *text, *line, *save = NULL, *f[32], hdr[512];
	int ncol, rows = 0, i;

	path_in(path, sizeof(path), r, "out.csv");
	text = slurp_path(path, NULL);
	line = strtok_r(text, "\n", &save);
	cr_assert_not_null(line, "empty CSV; stdout:\n%s\nstderr:\n%s", r->out, r->err);
	cr_assert_str_eq(line, header, "CSV header");
	snprintf(hdr, sizeof(hdr), "%s", header);
	ncol = split_csv(hdr, f, 32);
	for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		rows++;
		cr_assert_eq(split_csv(line, f, 32), ncol, "CSV row %d: want %d fields", rows,
		             ncol);
		for (i = 0; i < npos; i++)
			cr_assert(num(f[positive[i]], "value", rows) > 0,
			          "CSV row %d: column %d is not positive", rows, positive[i]);
		if (check)
			check(f, rows, ctx);
	}
	free(text);
	return rows;
}

static void check_png(const struct run *r)
{
	char path[128], *data;
	size_t len;

	path_in(path, sizeof(path), r, "out.png");
	data = slurp_path(path, &len);
	cr_assert(len > 1000 && !memcmp(data, "\x89PNG\r\n\x1a\n", 8),
	          "no PNG written (%zu bytes); stderr:\n%s", len, r->err);
	free(data);
}

/* The plot argument pair for a run: "--plot @png" when gnuplot is here, else nothing (its
 * absence has a test of its own). */
static const char *plot_opt(void)
{
	return gnuplot_present() ? "--plot" : NULL;
}

static void need_cpus(int n)
{
	int cpus[8];

	if (allowed_cpus(cpus, 8) < n)
		cr_skip_test("needs %d CPUs to pin partners apart; this test may use %d", n,
		             allowed_cpus(cpus, 8));
}

/* ---- usage and refusals ---- */

Test(bench, help_lists_the_memory_modes)
{
	static const char *const args[] = {"--help", NULL};
	struct run r;

	run_bench(&r, 1, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	cr_assert(strstr(r.out, "shmcoll-bench stream") && strstr(r.out, "shmcoll-bench c2c") &&
	              strstr(r.out, "shmcoll-bench copy"),
	          "--help does not list stream, c2c and copy:\n%s", r.out);
	cleanup(&r);
}

/* A bad option at P = 3, in every mode: exit 2 and the reason, however the ranks race (rank 0
 * prints it, and no rank may exit before it has). */
Test(bench, bad_option_is_reported_at_p3)
{
	static const char *const modes[] = {"coll", "kernels", "stream", "c2c", "copy",
	                                    "p2p",  "overlap", "vcoll",  "nbc"};
	size_t i;

	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		const char *args[] = {modes[i], "--no-such-option", NULL};
		char want[96];
		struct run r;

		snprintf(want, sizeof(want), "unknown option '--no-such-option'");
		run_bench(&r, 3, -1, NULL, args);
		cr_assert_eq(exit_code(&r), 2, "%s: exit %d; stderr:\n%s", modes[i], exit_code(&r),
		             r.err);
		cr_assert(strstr(r.err, want), "%s: want \"%s\" in stderr:\n%s", modes[i], want,
		          r.err);
		cleanup(&r);
	}
}

/* A CPU beyond the machine's is named as such, by every mode. */
Test(bench, cpu_that_does_not_exist)
{
	static const char *const modes[] = {"stream", "c2c", "copy"};
	char cpu[24], want[96]; /* "0," and any long */
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	size_t i;

	cr_assert(ncpus > 0);
	snprintf(cpu, sizeof(cpu), "0,%ld", ncpus);
	snprintf(want, sizeof(want), "CPU %ld does not exist", ncpus);
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		const char *args[] = {modes[i], "--cpus", cpu, NULL};
		struct run r;

		run_bench(&r, 1, -1, NULL, args);
		cr_assert_eq(exit_code(&r), 2, "%s --cpus %s: exit %d; stderr:\n%s", modes[i], cpu,
		             exit_code(&r), r.err);
		cr_assert(strstr(r.err, want), "%s: want '%s' in stderr:\n%s", modes[i], want,
		          r.err);
		cleanup(&r);
	}
}

/* A job confined to one CPU may not pin to another, and says which CPUs it may use. */
Test(bench, cpu_outside_the_allowed_set)
{
	int cpus[8];
	char list[32], want[128];
	const char *args[] = {"c2c", "--cpus", list, NULL};
	struct run r;

	need_cpus(2);
	allowed_cpus(cpus, 8);
	snprintf(list, sizeof(list), "%d,%d", cpus[0], cpus[1]);
	snprintf(want, sizeof(want), "CPU %d is outside the CPUs this job may use (%d)", cpus[1],
	         cpus[0]);
	run_bench(&r, 1, cpus[0], NULL, args);
	cr_assert_eq(exit_code(&r), 2, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, want), "want '%s' in stderr:\n%s", want, r.err);
	cleanup(&r);
}

/* More ranks (or partners) than CPUs: a memory benchmark whose ranks share a CPU measures the
 * scheduler, so every mode refuses, on every rank, before measuring anything. */
Test(bench, more_ranks_than_cpus)
{
	static const struct {
		const char *mode;
		int p;
	} cases[] = {{"stream", 2}, {"copy", 2}, {"copy", 1}, {"c2c", 1}, {"c2c", 3}};
	int cpus[8];
	size_t i;

	allowed_cpus(cpus, 8);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *args[] = {cases[i].mode, NULL};
		struct run r;

		run_bench(&r, cases[i].p, cpus[0], NULL, args);
		cr_assert_eq(exit_code(&r), 2, "%s at P=%d on one CPU: exit %d; stderr:\n%s",
		             cases[i].mode, cases[i].p, exit_code(&r), r.err);
		cr_assert(strstr(r.err, "need 2 CPUs") || strstr(r.err, "need 3 CPUs") ||
		              strstr(r.err, "needs 2 CPUs"),
		          "%s at P=%d: no 'need N CPUs' in stderr:\n%s", cases[i].mode, cases[i].p,
		          r.err);
		cr_assert(strstr(r.err, "may use only 1"),
		          "%s at P=%d: stderr does not say only 1 CPU may be used:\n%s",
		          cases[i].mode, cases[i].p, r.err);
		cleanup(&r);
	}
}

/* ---- each mode at P = 1 and 2: a table, a CSV, a PNG ---- */

/* Runs mode with its options (NULL-terminated) plus --csv and, where gnuplot is, --plot; checks
 * that it succeeded and drew its picture. */
static void run_mode(struct run *r, int p, const char *const *opts)
{
	const char *args[MAX_ARGS];
	int n = 0, i;

	for (i = 0; opts[i]; i++)
		args[n++] = opts[i];
	args[n++] = "--csv";
	args[n++] = "@csv";
	if (plot_opt()) {
		args[n++] = plot_opt();
		args[n++] = "@png";
	}
	args[n] = NULL;
	run_bench(r, p, -1, NULL, args);
	cr_assert_eq(exit_code(r), 0, "%s at P=%d: exit %d; stdout:\n%s\nstderr:\n%s", opts[0], p,
	             exit_code(r), r->out, r->err);
	if (plot_opt())
		check_png(r);
}

struct c2c_want {
	const char *partner;
	int a, b;
};

static void c2c_row(char **f, int line, void *ctx)
{
	const struct c2c_want *w = ctx;

	cr_assert_str_eq(f[0], "c2c", "row %d", line);
	cr_assert_str_eq(f[1], w->partner, "row %d: partner", line);
	cr_assert(atoi(f[2]) == w->a && atoi(f[3]) == w->b, "row %d: CPUs %s,%s, want %d,%d", line,
	          f[2], f[3], w->a, w->b);
	cr_assert(!strcmp(f[4], "2000") && !strcmp(f[5], "3"), "row %d: rounds %s batches %s", line,
	          f[4], f[5]);
	cr_assert(num(f[6], "min_ns", line) <= num(f[7], "median_ns", line),
	          "row %d: min %s above median %s", line, f[6], f[7]);
}

static void c2c_at(int p)
{
	static const int positive[] = {6, 7};
	int cpus[8];
	char list[32], title[64];
	const char *opts[] = {"c2c", "--rounds", "2000", "--batches", "3", "--cpus", list, NULL};
	struct c2c_want w;
	struct run r;

	need_cpus(2);
	allowed_cpus(cpus, 8);
	snprintf(list, sizeof(list), "%d,%d", cpus[0], cpus[1]);
	w = (struct c2c_want){p == 1 ? "threads" : "processes", cpus[0], cpus[1]};
	run_mode(&r, p, opts);
	snprintf(title, sizeof(title), "core-to-core latency between %s", w.partner);
	cr_assert(strstr(r.out, title), "no '%s' in the table:\n%s", title, r.out);
	cr_assert_eq(check_csv(&r, "mode,partner,cpu_a,cpu_b,rounds,batches,min_ns,median_ns",
	                       positive, 2, c2c_row, &w),
	             1, "want one row: one pair");
	cleanup(&r);
}

Test(bench, c2c_p1)
{
	c2c_at(1);
}

Test(bench, c2c_p2)
{
	c2c_at(2);
}

/* Ranks beyond the two sides follow along and finish. */
Test(bench, c2c_p3)
{
	c2c_at(3);
}

struct stream_want {
	int p;
	int seen[3][4][9]; /* size, kernel, rank + 1 (0: all) */
};

static void stream_row(char **f, int line, void *ctx)
{
	static const char *const kernels[] = {"copy", "scale", "add", "triad"};
	struct stream_want *w = ctx;
	long array = atol(f[4]);
	int k, size, who;

	cr_assert_str_eq(f[0], "stream", "row %d", line);
	cr_assert_eq(atoi(f[1]), w->p, "row %d: ranks %s", line, f[1]);
	who = !strcmp(f[2], "all") ? 0 : 1 + atoi(f[2]);
	cr_assert(who >= 0 && who <= w->p && (who == 0 || f[2][0] != 'a'), "row %d: rank %s", line,
	          f[2]);
	for (k = 0; k < 4 && strcmp(f[3], kernels[k]); k++)
		;
	cr_assert(k < 4, "row %d: kernel %s", line, f[3]);
	size = array == 8192 ? 0 : array == 16384 ? 1 : array == 32768 ? 2 : -1;
	cr_assert(size >= 0, "row %d: array of %ld bytes, want 8K, 16K or 32K", line, array);
	cr_assert_eq(atol(f[5]), 3 * array, "row %d: working set %s", line, f[5]);
	cr_assert_str_eq(f[6], "2", "row %d: reps", line);
	cr_assert(atol(f[7]) >= 1, "row %d: inner %s", line, f[7]);
	cr_assert(num(f[8], "best", line) >= num(f[9], "median", line),
	          "row %d: best %s below median %s", line, f[8], f[9]);
	cr_assert(!w->seen[size][k][who], "row %d: a second row for the same cell", line);
	w->seen[size][k][who] = 1;
}

static void stream_at(int p)
{
	static const char *const opts[] = {"stream", "--min-bytes", "8K", "--max-bytes",
	                                   "32K",    "--reps",      "2",  NULL};
	static const int positive[] = {8, 9};
	struct stream_want w = {.p = p};
	struct run r;

	if (p > 1)
		need_cpus(p);
	run_mode(&r, p, opts);
	cr_assert(strstr(r.out, "STREAM kernels") && strstr(r.out, "Triad"),
	          "no table on stdout:\n%s", r.out);
	cr_assert_eq(check_csv(&r,
	                       "mode,ranks,rank,kernel,array_bytes,working_set_bytes,reps,inner,"
	                       "best_GBps,median_GBps",
	                       positive, 2, stream_row, &w),
	             3 * 4 * (p + 1), "want a row per size, kernel and rank (and all ranks)");
	cleanup(&r);
}

Test(bench, stream_p1)
{
	stream_at(1);
}

Test(bench, stream_p2)
{
	stream_at(2);
}

/* One wrong element on the last rank fails the run, on every rank, with exit 3. */
Test(bench, stream_catches_a_wrong_result)
{
	static const char *const args[] = {"stream", "--max-bytes", "16K", "--reps", "2", NULL};
	struct run r;
	int p = allowed_cpus((int[8]){0}, 8) >= 2 ? 2 : 1;

	setenv("SHMCOLL_BENCH_FAULT", "stream", 1);
	run_bench(&r, p, -1, NULL, args);
	unsetenv("SHMCOLL_BENCH_FAULT");
	cr_assert_eq(exit_code(&r), 3, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "WRONG RESULT"), "stderr:\n%s", r.err);
	cleanup(&r);
}

/* Without gnuplot, --plot is a clear error after the table and the CSV are out. */
Test(bench, plot_without_gnuplot)
{
	static const char *const args[] = {"stream", "--max-bytes", "16K",    "--reps", "1",
	                                   "--csv",  "@csv",        "--plot", "@png",   NULL};
	static const int positive[] = {8, 9};
	struct run r;

	run_bench(&r, 1, -1, "/nonexistent", args);
	cr_assert_eq(exit_code(&r), 1, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "needs gnuplot"), "stderr:\n%s", r.err);
	cr_assert(strstr(r.out, "Triad"), "no table on stdout:\n%s", r.out);
	cr_assert_gt(check_csv(&r,
	                       "mode,ranks,rank,kernel,array_bytes,working_set_bytes,reps,inner,"
	                       "best_GBps,median_GBps",
	                       positive, 2, NULL, NULL),
	             0);
	cleanup(&r);
}

struct copy_want {
	const char *partner;
	int seen[3][2][2]; /* size, stores, pair + 1 (0: all) */
};

static void copy_row(char **f, int line, void *ctx)
{
	struct copy_want *w = ctx;
	long bytes = atol(f[8]);
	int size, st, who;

	cr_assert_str_eq(f[0], "copy", "row %d", line);
	cr_assert_str_eq(f[1], w->partner, "row %d: partner", line);
	who = !strcmp(f[2], "all") ? 0 : !strcmp(f[2], "0") ? 1 : -1;
	cr_assert(who >= 0, "row %d: pair %s, want all or 0", line, f[2]);
	st = !strcmp(f[5], "normal") ? 0 : !strcmp(f[5], "nt") ? 1 : -1;
	cr_assert(st >= 0, "row %d: stores %s", line, f[5]);
	cr_assert(!strcmp(f[6], "8192") && !strcmp(f[7], "8"), "row %d: chunk %s slots %s", line,
	          f[6], f[7]);
	size = bytes == 4096 ? 0 : bytes == 8192 ? 1 : bytes == 16384 ? 2 : -1;
	cr_assert(size >= 0, "row %d: a message of %ld bytes, want 4K, 8K or 16K", line, bytes);
	cr_assert(atol(f[9]) >= 3, "row %d: iters %s", line, f[9]);
	cr_assert_str_eq(f[10], "2", "row %d: reps", line);
	cr_assert(num(f[11], "best", line) >= num(f[12], "median", line),
	          "row %d: best %s below median %s", line, f[11], f[12]);
	cr_assert(!w->seen[size][st][who], "row %d: a second row for the same cell", line);
	w->seen[size][st][who] = 1;
}

static void copy_at(int p)
{
	static const char *const opts[] = {"copy",      "--min-bytes", "4K", "--max-bytes",
	                                   "16K",       "--chunk",     "8K", "--stores",
	                                   "normal,nt", "--reps",      "2",  NULL};
	static const int positive[] = {11, 12};
	struct copy_want w = {.partner = p == 1 ? "threads" : "processes"};
	struct run r;

	need_cpus(2);
	run_mode(&r, p, opts);
	cr_assert(strstr(r.out, "one-way copy") && strstr(r.out, w.partner),
	          "no table on stdout:\n%s", r.out);
	cr_assert_eq(check_csv(&r,
	                       "mode,partner,pair,sender_cpu,receiver_cpu,stores,chunk_bytes,slots,"
	                       "bytes,iters,reps,best_GBps,median_GBps",
	                       positive, 2, copy_row, &w),
	             3 * 2 * 2, "want a row per size and stores, for the pair and for all");
	cleanup(&r);
}

Test(bench, copy_p1)
{
	copy_at(1);
}

Test(bench, copy_p2)
{
	copy_at(2);
}

/* One byte off in a received message fails the run, on every rank, with exit 3. */
Test(bench, copy_catches_a_wrong_byte)
{
	static const char *const args[] = {"copy",    "--min-bytes", "4K",     "--max-bytes", "8K",
	                                   "--chunk", "8K",          "--reps", "1",           NULL};
	struct run r;

	need_cpus(2);
	setenv("SHMCOLL_BENCH_FAULT", "copy", 1);
	run_bench(&r, 2, -1, NULL, args);
	unsetenv("SHMCOLL_BENCH_FAULT");
	cr_assert_eq(exit_code(&r), 3, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "VALIDATION FAILED"), "stderr:\n%s", r.err);
	cleanup(&r);
}

/* ---- the OSU-style modes: p2p and overlap ---- */

Test(bench, help_lists_p2p_and_overlap)
{
	static const char *const args[] = {"p2p", "--help", NULL};
	struct run r;

	run_bench(&r, 2, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	cr_assert(strstr(r.out, "shmcoll-bench p2p") && strstr(r.out, "shmcoll-bench overlap") &&
	              strstr(r.out, "--test NAME|all") && strstr(r.out, "--test-every N"),
	          "--help does not describe p2p and overlap:\n%s", r.out);
	cleanup(&r);
}

/* A bad option, a bad value and a bad test at P = 2: exit 2 and the reason on stderr. */
Test(bench, osu_modes_refuse_a_bad_command_line)
{
	static const struct {
		const char *args[4];
		const char *want;
	} cases[] = {
	    {{"p2p", "--no-such-option", NULL},
	     "unknown option '--no-such-option' in the p2p mode"},
	    {{"overlap", "--no-such-option", NULL},
	     "unknown option '--no-such-option' in the overlap mode"},
	    {{"p2p", "--test", "nope", NULL}, "unknown --test 'nope'"},
	    {{"p2p", "--max-bytes", "128M", NULL}, "above the largest allowed, 64M"},
	    {{"overlap", "--test-every", "-1", NULL}, "bad --test-every '-1'"},
	    {{"overlap", "--test", "bw", NULL}, "unknown option '--test' in the overlap mode"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;

		run_bench(&r, 2, -1, NULL, cases[i].args);
		cr_assert_eq(exit_code(&r), 2, "%s %s: exit %d; stderr:\n%s", cases[i].args[0],
		             cases[i].args[1], exit_code(&r), r.err);
		cr_assert(strstr(r.err, cases[i].want), "want \"%s\" in stderr:\n%s", cases[i].want,
		          r.err);
		cleanup(&r);
	}
}

/* p2p needs a partner: a job of one is a usage error, not a hang. */
Test(bench, p2p_needs_two_ranks)
{
	static const char *const args[] = {"p2p", "--max-bytes", "8", NULL};
	struct run r;

	run_bench(&r, 1, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 2, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "needs at least 2 ranks"), "stderr:\n%s", r.err);
	cleanup(&r);
}

struct p2p_want {
	const char *test; /* NULL: any of the three */
	int p;
	int seen[3][8]; /* test, size 1 .. 64 */
};

static void p2p_row(char **f, int line, void *ctx)
{
	static const char *const tests[] = {"latency", "bw", "bibw"};
	struct p2p_want *w = ctx;
	long bytes = atol(f[3]);
	int t, size;

	cr_assert_str_eq(f[0], "shmcoll", "row %d: impl", line);
	for (t = 0; t < 3 && strcmp(f[1], tests[t]); t++)
		;
	cr_assert(t < 3, "row %d: test %s", line, f[1]);
	if (w->test)
		cr_assert_str_eq(f[1], w->test, "row %d: test", line);
	cr_assert_eq(atoi(f[2]), w->p, "row %d: ranks %s", line, f[2]);
	for (size = 0; size < 8 && (1L << size) != bytes; size++)
		;
	cr_assert(size < 7, "row %d: %ld bytes, want 1 .. 64", line, bytes);
	cr_assert(num(f[4], "lat_us", line) > 0, "row %d: lat_us %s", line, f[4]);
	cr_assert(num(f[5], "bw_GBps", line) >= 0, "row %d: bw_GBps %s", line, f[5]);
	cr_assert(!w->seen[t][size], "row %d: a second row for the same cell", line);
	w->seen[t][size] = 1;
}

static void p2p_at(int p, const char *test)
{
	const char *opts[] = {"p2p", "--test",        test,   "--min-bytes", "1", "--max-bytes",
	                      "64",  "--iters-scale", "0.01", NULL};
	struct p2p_want w = {.test = strcmp(test, "all") ? test : NULL, .p = p};
	struct run r;

	run_mode(&r, p, opts);
	cr_assert(strstr(r.out, "impl,test,ranks,bytes,lat_us,bw_GBps\nshmcoll,"),
	          "no CSV on stdout:\n%s", r.out);
	cr_assert_eq(check_csv(&r, "impl,test,ranks,bytes,lat_us,bw_GBps", NULL, 0, p2p_row, &w),
	             7 * (w.test ? 1 : 3), "want a row per size (1 .. 64 bytes) and test");
	cleanup(&r);
}

Test(bench, p2p_latency_p2)
{
	p2p_at(2, "latency");
}

Test(bench, p2p_bw_p2)
{
	p2p_at(2, "bw");
}

Test(bench, p2p_bibw_p2)
{
	p2p_at(2, "bibw");
}

/* Every test at once, with a third rank that only waits for the pair. */
Test(bench, p2p_all_p3)
{
	p2p_at(3, "all");
}

/* The buffers in the arena's symmetric heap: the same rows. */
Test(bench, p2p_symmetric)
{
	static const char *const opts[] = {"p2p",  "--test",      "all", "--min-bytes",
	                                   "1",    "--max-bytes", "64",  "--iters-scale",
	                                   "0.01", "--symmetric", NULL};
	struct p2p_want w = {.p = 2};
	struct run r;

	run_mode(&r, 2, opts);
	cr_assert_eq(check_csv(&r, "impl,test,ranks,bytes,lat_us,bw_GBps", NULL, 0, p2p_row, &w),
	             21);
	cleanup(&r);
}

struct overlap_want {
	int p;
	int seen[5]; /* sizes 4 .. 64 */
};

static void overlap_row(char **f, int line, void *ctx)
{
	struct overlap_want *w = ctx;
	long bytes = atol(f[3]);
	double pct = num(f[7], "overlap_pct", line);
	int size;

	cr_assert_str_eq(f[0], "shmcoll", "row %d: impl", line);
	cr_assert_str_eq(f[1], "allreduce", "row %d: op", line);
	cr_assert_eq(atoi(f[2]), w->p, "row %d: ranks %s", line, f[2]);
	for (size = 0; size < 5 && (4L << size) != bytes; size++)
		;
	cr_assert(size < 5, "row %d: %ld bytes, want 4 .. 64", line, bytes);
	cr_assert(num(f[5], "compute_us", line) >= 0, "row %d: compute_us %s", line, f[5]);
	cr_assert(num(f[6], "total_us", line) >= num(f[5], "compute_us", line),
	          "row %d: total %s below compute %s", line, f[6], f[5]);
	cr_assert(pct >= 0 && pct <= 100, "row %d: overlap %s%%", line, f[7]);
	cr_assert(!w->seen[size], "row %d: a second row for the same size", line);
	w->seen[size] = 1;
}

static void overlap_at(int p, const char *every)
{
	static const int positive[] = {4, 6, 8}; /* pure, total, blocking */
	const char *opts[] = {
	    "overlap", "--min-bytes",  "4",   "--max-bytes", "64", "--iters-scale",
	    "0.01",    "--test-every", every, NULL};
	struct overlap_want w = {.p = p};
	struct run r;

	run_mode(&r, p, opts);
	cr_assert_eq(check_csv(&r,
	                       "impl,op,ranks,bytes,pure_us,compute_us,total_us,overlap_pct,"
	                       "blocking_us",
	                       positive, 3, overlap_row, &w),
	             5, "want a row per size (4 .. 64 bytes)");
	cr_assert(strstr(r.err, "iallreduce + wait / blocking allreduce"),
	          "no ratio summary on stderr:\n%s", r.err);
	cleanup(&r);
}

Test(bench, overlap_p2)
{
	overlap_at(2, "0");
}

/* shmcoll_test inside the compute loop, after every unit. */
Test(bench, overlap_p2_test_every)
{
	overlap_at(2, "1");
}

/* The nbc mode: a row per size, both forms timed, their ratio, and the summary. */
static void nbc_row(char **f, int line, void *ctx)
{
	int *seen = ctx, size;
	long bytes = atol(f[3]);

	cr_assert_str_eq(f[0], "shmcoll", "row %d: impl", line);
	cr_assert_str_eq(f[1], "allreduce", "row %d: op", line);
	cr_assert_eq(atoi(f[2]), 2, "row %d: ranks %s", line, f[2]);
	for (size = 0; size < 5 && (4L << size) != bytes; size++)
		;
	cr_assert(size < 5, "row %d: %ld bytes, want 4 .. 64", line, bytes);
	cr_assert(!seen[size], "row %d: a second row for the same size", line);
	seen[size] = 1;
}

Test(bench, nbc_p2)
{
	static const int positive[] = {4, 5, 6}; /* nb_us, blocking_us, ratio */
	const char *opts[] = {"nbc",    "--min-bytes", "4",       "--max-bytes", "64",
	                      "--reps", "3",           "--iters", "20",          NULL};
	int seen[5] = {0};
	struct run r;

	run_mode(&r, 2, opts);
	cr_assert_eq(check_csv(&r, "impl,op,ranks,bytes,nb_us,blocking_us,ratio", positive, 3,
	                       nbc_row, seen),
	             5, "want a row per size (4 .. 64 bytes)");
	cr_assert(strstr(r.err, "iallreduce + wait / allreduce, back to back"),
	          "no ratio summary on stderr:\n%s", r.err);
	cleanup(&r);
}

/* ---- the collectives beside busy processes (--hog, --dist) ---- */

/* Processes running as a benchmark's busy process (their command line has --hog-child). */
static int hogs_running(void)
{
	char path[300], *cmd;
	struct dirent *e;
	size_t len, k;
	int n = 0;
	DIR *d = opendir("/proc");

	cr_assert_not_null(d, "opendir /proc: %s", strerror(errno));
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		cmd = slurp_path(path, &len); /* empty if the process is gone */
		for (k = 0; k + 1 < len; k++)
			if (cmd[k] == '\0')
				cmd[k] = ' ';
		n += strstr(cmd, "--hog-child") != NULL;
		free(cmd);
	}
	closedir(d);
	return n;
}

struct dist_rows {
	int seen[8];
};

static void dist_row(char **f, int line, void *ctx)
{
	struct dist_rows *d = ctx;
	double p50 = num(f[7], "p50_us", line), p99 = num(f[8], "p99_us", line);
	long calls = (long)num(f[9], "calls", line), bytes = (long)num(f[3], "bytes", line);
	int k = 0;

	cr_assert_str_eq(f[1], "allreduce", "row %d: op", line);
	cr_assert_str_eq(f[10], "2", "row %d: hogs", line);
	cr_assert(p50 <= p99, "row %d: p50 %g above p99 %g", line, p50, p99);
	/* At least one round of calls; at most the size's iteration count. */
	cr_assert(calls >= 16 && calls <= 10000, "row %d: %ld calls", line, calls);
	while ((4L << k) < bytes)
		k++;
	cr_assert((4L << k) == bytes && k < 8, "row %d: size %ld", line, bytes);
	cr_assert(!d->seen[k], "row %d: a second row for %ld bytes", line, bytes);
	d->seen[k] = 1;
}

Test(bench, coll_dist_beside_busy_processes)
{
	static const int positive[] = {4, 7, 8, 9}; /* lat_us, p50_us, p99_us, calls */
	const char *args[] = {"--op", "allreduce", "--min-bytes", "4", "--max-bytes",
	                      "64",   "--dist",    "--hog",       "2", "--max-seconds",
	                      "0.05", "--csv",     "@csv",        NULL};
	struct dist_rows d = {{0}};
	struct run r;

	run_bench(&r, 2, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_eq(check_csv(&r,
	                       "impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps,p50_us,p99_us,"
	                       "calls,hogs",
	                       positive, 4, dist_row, &d),
	             5, "want a row per size (4 .. 64 bytes)");
	/* The busy processes went with the run. */
	cr_assert_eq(hogs_running(), 0, "busy processes left after the run");
	cleanup(&r);
}

/* --dirty (a store a line into every source buffer before each timed call): every op runs, its
 * calls checked as without it, a row per size, at P = 2 and 3; refused beside --dist, which
 * times every call alone. */
Test(bench, coll_dirty)
{
	const char *args[] = {"--op", "all",     "--min-bytes",   "8",    "--max-bytes",
	                      "64K",  "--dirty", "--iters-scale", "0.05", NULL};
	const char *dist[] = {"--op", "bcast", "--dirty", "--dist", NULL};
	struct run r;
	int p;

	for (p = 2; p <= 3; p++) {
		run_bench(&r, p, -1, NULL, args);
		cr_assert_eq(exit_code(&r), 0, "P=%d: exit %d; stderr:\n%s", p, exit_code(&r),
		             r.err);
		cr_assert(strstr(r.out, ",bcast,") && strstr(r.out, ",65536,"), "P=%d:\n%s", p,
		          r.out);
		cleanup(&r);
	}
	run_bench(&r, 2, -1, NULL, dist);
	cr_assert_eq(exit_code(&r), 2, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "--dirty rewrites buffers between timed spans"), "%s", r.err);
	cleanup(&r);
}

Test(bench, coll_refuses_bad_busy_options)
{
	static const struct {
		const char *opt, *val, *want;
	} bad[] = {{"--hog", "-1", "bad --hog '-1'"},
	           {"--hog", "many", "bad --hog 'many'"},
	           {"--max-seconds", "0", "bad --max-seconds '0'"}};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = {"--op", "barrier", bad[i].opt, bad[i].val, NULL};
		struct run r;

		run_bench(&r, 2, -1, NULL, args);
		cr_assert_eq(exit_code(&r), 2, "%s %s: exit %d; stderr:\n%s", bad[i].opt,
		             bad[i].val, exit_code(&r), r.err);
		cr_assert(strstr(r.err, bad[i].want), "want \"%s\" in stderr:\n%s", bad[i].want,
		          r.err);
		cleanup(&r);
	}
}

/* One byte off in a received message, or one element off in a result, fails the run on every
 * rank with exit 3. */
Test(bench, osu_modes_catch_a_wrong_result)
{
	static const struct {
		const char *fault;
		const char *args[8];
	} cases[] = {
	    {"p2p",
	     {"p2p", "--test", "latency", "--max-bytes", "16", "--iters-scale", "0.01", NULL}},
	    {"p2p", {"p2p", "--test", "bw", "--max-bytes", "16", "--iters-scale", "0.01", NULL}},
	    {"p2p", {"p2p", "--test", "bibw", "--max-bytes", "16", "--iters-scale", "0.01", NULL}},
	    {"overlap", {"overlap", "--max-bytes", "16", "--iters-scale", "0.01", NULL}},
	    {"overlap", {"nbc", "--max-bytes", "16", "--iters", "10", "--reps", "1", NULL}},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;

		setenv("SHMCOLL_BENCH_FAULT", cases[i].fault, 1);
		run_bench(&r, 2, -1, NULL, cases[i].args);
		unsetenv("SHMCOLL_BENCH_FAULT");
		cr_assert_eq(exit_code(&r), 3, "%s %s: exit %d; stderr:\n%s", cases[i].args[0],
		             cases[i].args[2], exit_code(&r), r.err);
		cr_assert(strstr(r.err, "VALIDATION FAILED"), "stderr:\n%s", r.err);
		cleanup(&r);
	}
}

/* ---- vcoll: the variable-count collectives against their equal-count forms ---- */

static const char *const vcoll_ops[] = {"allgatherv",      "gatherv", "scatterv", "alltoallv",
                                        "reduce_scatterv", "scan",    "exscan"};
#define VCOLL_NOPS   7
#define VCOLL_HEADER "impl,op,ranks,bytes,counts,lat_us,equal_us,ratio"

Test(bench, help_lists_vcoll)
{
	static const char *const args[] = {"vcoll", "--help", NULL};
	struct run r;

	run_bench(&r, 2, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	cr_assert(strstr(r.out, "shmcoll-bench vcoll") && strstr(r.out, "--counts MODE") &&
	              strstr(r.out, "--gaps") && strstr(r.out, "--reps N"),
	          "--help does not describe vcoll:\n%s", r.out);
	cleanup(&r);
}

/* A bad option or value at P = 2: exit 2 and the reason on stderr. */
Test(bench, vcoll_refuses_a_bad_command_line)
{
	static const struct {
		const char *args[4];
		const char *want;
	} cases[] = {
	    {{"vcoll", "--no-such-option", NULL},
	     "unknown option '--no-such-option' in the vcoll mode"},
	    {{"vcoll", "--counts", "lumpy", NULL}, "unknown --counts 'lumpy' (even or skew)"},
	    {{"vcoll", "--op", "allgather", NULL}, "unknown --op 'allgather'"},
	    {{"vcoll", "--reps", "0", NULL}, "bad --reps '0'"},
	    {{"vcoll", "--dtype", "float128", NULL}, "unknown --dtype 'float128'"},
	    {{"vcoll", "--max-bytes", "2G", NULL}, "above the largest allowed, 1G"},
	    {{"vcoll", "--reps", NULL}, "option --reps needs a value"},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;

		run_bench(&r, 2, -1, NULL, cases[i].args);
		cr_assert_eq(exit_code(&r), 2, "%s %s: exit %d; stderr:\n%s", cases[i].args[0],
		             cases[i].args[1], exit_code(&r), r.err);
		cr_assert(strstr(r.err, cases[i].want), "want \"%s\" in stderr:\n%s", cases[i].want,
		          r.err);
		cleanup(&r);
	}
}

struct vcoll_want {
	int p;
	const char *counts;
	int seen[VCOLL_NOPS][5]; /* op, size 4 .. 64 */
};

/* The rows a run of 4 .. 64 bytes must print at P ranks: every size of scan and exscan (one
 * count on every rank), the sizes that leave every rank an element for the others. */
static int vcoll_rows(int p)
{
	int op, b, n = 0;

	for (op = 0; op < VCOLL_NOPS; op++)
		for (b = 4; b <= 64; b *= 2)
			n += op >= 5 || b / 4 / p >= 1;
	return n;
}

static void vcoll_row(char **f, int line, void *ctx)
{
	struct vcoll_want *w = ctx;
	long bytes = atol(f[3]);
	double lat = num(f[5], "lat_us", line), eq = num(f[6], "equal_us", line),
	       ratio = num(f[7], "ratio", line);
	int op, size;

	cr_assert_str_eq(f[0], "shmcoll", "row %d: impl", line);
	for (op = 0; op < VCOLL_NOPS && strcmp(f[1], vcoll_ops[op]); op++)
		;
	cr_assert(op < VCOLL_NOPS, "row %d: op %s", line, f[1]);
	cr_assert_eq(atoi(f[2]), w->p, "row %d: ranks %s", line, f[2]);
	for (size = 0; size < 5 && (4L << size) != bytes; size++)
		;
	cr_assert(size < 5, "row %d: %ld bytes, want 4 .. 64", line, bytes);
	cr_assert(op >= 5 || bytes / 4 / w->p >= 1, "row %d: %s at %ld bytes leaves a rank nothing",
	          line, f[1], bytes);
	cr_assert_str_eq(f[4], w->counts, "row %d: counts", line);
	/* lat_us and equal_us are printed to 1 ns: the ratio of the printed values is within a
	 * few percent of the ratio of the measured ones. */
	cr_assert(ratio > 0 && (lat / eq) / ratio > 0.95 && (lat / eq) / ratio < 1.05,
	          "row %d: ratio %s is not lat_us / equal_us (%s / %s)", line, f[7], f[5], f[6]);
	cr_assert(!w->seen[op][size], "row %d: a second row for the same cell", line);
	w->seen[op][size] = 1;
}

static void vcoll_at(int p, const char *counts, int gaps)
{
	static const int positive[] = {5, 6, 7}; /* lat_us, equal_us, ratio */
	const char *opts[] = {"vcoll", "--counts",      counts, "--min-bytes",
	                      "4",     "--max-bytes",   "64",   "--reps",
	                      "3",     "--iters-scale", "0.01", gaps ? "--gaps" : NULL,
	                      NULL};
	struct vcoll_want w = {.p = p};
	char label[32];
	struct run r;

	snprintf(label, sizeof(label), "%s%s", counts, gaps ? "+gaps" : "");
	w.counts = label;
	run_mode(&r, p, opts);
	cr_assert(strstr(r.out, VCOLL_HEADER "\nshmcoll,allgatherv,"), "no CSV on stdout:\n%s",
	          r.out);
	cr_assert_eq(check_csv(&r, VCOLL_HEADER, positive, 3, vcoll_row, &w), vcoll_rows(p),
	             "want a row per op and size");
	cr_assert(strstr(r.err, "the v-variants (target: within 1.2x of the equal-count form)"),
	          "no summary on stderr:\n%s", r.err);
	cleanup(&r);
}

Test(bench, vcoll_p2_even)
{
	vcoll_at(2, "even", 0);
}

Test(bench, vcoll_p2_skew)
{
	vcoll_at(2, "skew", 0);
}

Test(bench, vcoll_p3_even)
{
	vcoll_at(3, "even", 0);
}

/* Uneven blocks with 64 bytes between them: the gaps must stay unwritten. */
Test(bench, vcoll_p3_skew_gaps)
{
	vcoll_at(3, "skew", 1);
}

/* One element off in the output of a v-call fails the run on every rank with exit 3: the last
 * rank's (allgatherv, the first op; exscan), or the root's (gatherv). */
Test(bench, vcoll_catches_a_wrong_result)
{
	static const struct {
		int p;
		const char *args[10];
	} cases[] = {
	    {2, {"vcoll", "--max-bytes", "16", "--iters-scale", "0.01", "--reps", "1", NULL}},
	    {3,
	     {"vcoll", "--op", "gatherv", "--counts", "skew", "--max-bytes", "64", "--reps", "1",
	      NULL}},
	    {3, {"vcoll", "--op", "exscan", "--gaps", "--max-bytes", "16", "--reps", "1", NULL}},
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run r;

		setenv("SHMCOLL_BENCH_FAULT", "vcoll", 1);
		run_bench(&r, cases[i].p, -1, NULL, cases[i].args);
		unsetenv("SHMCOLL_BENCH_FAULT");
		cr_assert_eq(exit_code(&r), 3, "case %zu: exit %d; stderr:\n%s", i, exit_code(&r),
		             r.err);
		cr_assert(strstr(r.err, "VALIDATION FAILED"), "case %zu: stderr:\n%s", i, r.err);
		cleanup(&r);
	}
}

/* ---- the alpha-beta fit (--fit; bench/fit.c, compiled into this suite) ---- */

/* The points of t = alpha + beta * n at sizes 8 .. 16 MiB, doubling; each latency times
 * (1 + noise * s) with s a fixed pattern in [-1, 1], so the test never depends on a clock. */
static int fit_points(double *n, double *t, double alpha, double beta, double noise)
{
	static const double s[] = {0.3, -1.0, 0.7, -0.2, 1.0, -0.6, 0.1, -0.9, 0.5, -0.4, 0.8};
	int k;

	for (k = 0; k < 22; k++) {
		n[k] = (double)(8L << k);
		t[k] = (alpha + beta * n[k]) * (1.0 + noise * s[k % 11]);
	}
	return k;
}

Test(bench, fit_of_an_exact_line_is_exact)
{
	double n[BENCH_FIT_MAX], t[BENCH_FIT_MAX];
	/* 0.5 us, and 25 ns per KiB (40 GB/s), in us per byte. */
	double beta = 25e-3 / 1024;
	struct bench_fit f;
	int k = fit_points(n, t, 0.5, beta, 0);

	cr_assert_eq(bench_fit_line(n, t, k, &f), 0);
	cr_assert_float_eq(f.alpha_us, 0.5, 1e-9, "alpha %.12g", f.alpha_us);
	cr_assert_float_eq(f.beta_us_per_byte / beta, 1.0, 1e-9, "beta %.12g", f.beta_us_per_byte);
	cr_assert_float_eq(f.r2, 1.0, 1e-12, "r2 %.15g", f.r2);
	cr_assert(f.max_rel_err < 1e-9, "max_rel_err %g", f.max_rel_err);
	cr_assert(f.min_bytes == 8 && f.max_bytes == (double)(8L << 21) && f.sizes == k);
}

/* +-5% on every size: the relative fit still finds the small-size latency (an absolute fit
 * would let the 16 MiB point's 5%, 20 us, swamp a 0.5 us alpha) and the slope. */
Test(bench, fit_of_a_noisy_line_is_close)
{
	double n[BENCH_FIT_MAX], t[BENCH_FIT_MAX], beta = 25e-3 / 1024;
	struct bench_fit f;
	int k = fit_points(n, t, 0.5, beta, 0.05);

	cr_assert_eq(bench_fit_line(n, t, k, &f), 0);
	cr_assert(fabs(f.alpha_us / 0.5 - 1) < 0.1, "alpha %g, want 0.5 +-10%%", f.alpha_us);
	cr_assert(fabs(f.beta_us_per_byte / beta - 1) < 0.1, "beta %g, want %g +-10%%",
	          f.beta_us_per_byte, beta);
	cr_assert(f.r2 > 0.95 && f.r2 < 1, "r2 %g", f.r2);
	/* No point is further than its own 5% plus what the line's own miss adds. */
	cr_assert(f.max_rel_err > 0.01 && f.max_rel_err < 0.12, "max_rel_err %g", f.max_rel_err);

	/* Flat latencies: a slope of about nothing, all explained by alpha; r2 stays in [0, 1]. */
	for (k = 0; k < 22; k++)
		t[k] = 2.0 * (1 + (k % 2 ? 0.01 : -0.01));
	cr_assert_eq(bench_fit_line(n, t, k, &f), 0);
	cr_assert(fabs(f.alpha_us - 2.0) < 0.05 && f.r2 >= 0 && f.r2 <= 1, "alpha %g r2 %g",
	          f.alpha_us, f.r2);
}

Test(bench, fit_refuses_what_is_no_line)
{
	double n[4] = {8, 16, 32, 64}, t[4] = {1, 1.1, 1.2, 1.4}, same[4] = {8, 8, 8, 8};
	struct bench_fit f;

	cr_assert_eq(bench_fit_line(n, t, 1, &f), -1, "one point");
	cr_assert_eq(bench_fit_line(n, t, 0, &f), -1, "no point");
	cr_assert_eq(bench_fit_line(same, t, 4, &f), -1, "one size");
	t[2] = 0;
	cr_assert_eq(bench_fit_line(n, t, 4, &f), -1, "a zero latency");
	t[2] = -1;
	cr_assert_eq(bench_fit_line(n, t, 4, &f), -1, "a negative latency");
	t[2] = NAN;
	cr_assert_eq(bench_fit_line(n, t, 4, &f), -1, "a NaN latency");
	t[2] = 1.2;
	n[1] = INFINITY;
	cr_assert_eq(bench_fit_line(n, t, 4, &f), -1, "an infinite size");
	n[1] = 16;
	cr_assert_eq(bench_fit_line(n, t, 2, &f), 0, "two points");

	/* The harnesses' sweep: sizes doubling from minb up to maxb, without overflow. */
	cr_assert_eq(bench_fit_sizes(4, 4), 1);
	cr_assert_eq(bench_fit_sizes(4, 8), 2);
	cr_assert_eq(bench_fit_sizes(4, 7), 1);
	cr_assert_eq(bench_fit_sizes(4, (size_t)64 << 20), 25);
	cr_assert_eq(bench_fit_sizes(8, 4), 0);
	cr_assert_eq(bench_fit_sizes(0, 4), 0);
	cr_assert_eq(bench_fit_sizes(1, SIZE_MAX), 64);
}

Test(bench, fit_row_columns)
{
	struct bench_fit f = {.alpha_us = 0.5,
	                      .beta_us_per_byte = 1e-3, /* 1 ns per byte: 1 GB/s */
	                      .r2 = 0.99,
	                      .max_rel_err = 0.125,
	                      .min_bytes = 8,
	                      .max_bytes = 1024,
	                      .sizes = 8};
	char row[256], hdr[256], *fr[16], *fh[16];

	bench_fit_row(row, sizeof(row), "shmcoll", "allreduce", 2, &f);
	cr_assert_str_eq(row,
	                 "fit,shmcoll,allreduce,2,0.500,1024.000,1.000,0.9900,0.1250,8,1024,8\n");
	snprintf(hdr, sizeof(hdr), "%s", bench_fit_header + 2); /* past "# " */
	cr_assert_eq(split_csv(row, fr, 16), split_csv(hdr, fh, 16), "row and header columns");
	f.beta_us_per_byte = -1e-6;
	bench_fit_row(row, sizeof(row), "ompi", "bcast", 4, &f);
	cr_assert(strstr(row, ",nan,"), "no bandwidth for a negative slope: %s", row);
}

/* Classifies the lines of a --fit run's output: data rows (want_fields fields) and fit rows,
 * each fit row checked and after its own op's data rows. Returns the number of fit rows. */
static int check_fit_output(const char *text, int want_fields, int header, int p, int sizes,
                            int *data_rows)
{
	char *copy = strdup(text), *line, *save = NULL, *f[32], last_op[32] = "";
	int fits = 0, nf, line_no = 0, saw_header = 0, saw_fit_header = 0;
	double alpha, beta, r2, rel;

	cr_assert_not_null(copy);
	*data_rows = 0;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		line_no++;
		if (!strncmp(line, "impl,", 5)) {
			saw_header = 1;
			continue;
		}
		if (!strncmp(line, "# fit,", 6)) {
			cr_assert_str_eq(line, "# fit,impl,op,ranks,alpha_us,beta_ns_per_KiB,"
			                       "asymptotic_GBps,r2,max_rel_err,min_bytes,max_bytes,"
			                       "sizes");
			saw_fit_header = 1;
			continue;
		}
		nf = split_csv(line, f, 32);
		if (strcmp(f[0], "fit")) {
			cr_assert_eq(nf, want_fields, "line %d: %d fields", line_no, nf);
			snprintf(last_op, sizeof(last_op), "%s", f[1]);
			(*data_rows)++;
			continue;
		}
		fits++;
		cr_assert_eq(nf, 12, "fit line %d: %d fields", line_no, nf);
		cr_assert_str_eq(f[1], "shmcoll");
		cr_assert_str_eq(f[2], last_op, "fit line %d: not after the rows of its op",
		                 line_no);
		cr_assert_neq(strcmp(f[2], "barrier"), 0, "barrier has no size to fit");
		cr_assert_eq((int)num(f[3], "ranks", line_no), p);
		alpha = num(f[4], "alpha_us", line_no);
		beta = num(f[5], "beta_ns_per_KiB", line_no);
		r2 = num(f[7], "r2", line_no);
		rel = num(f[8], "max_rel_err", line_no);
		cr_assert(isfinite(alpha) && alpha > 0, "fit line %d: alpha %g", line_no, alpha);
		cr_assert(isfinite(beta) && beta > 0, "fit line %d: beta %g", line_no, beta);
		cr_assert(num(f[6], "asymptotic_GBps", line_no) > 0, "fit line %d", line_no);
		cr_assert(r2 >= 0 && r2 <= 1, "fit line %d: r2 %g", line_no, r2);
		cr_assert(isfinite(rel) && rel >= 0, "fit line %d: max_rel_err %g", line_no, rel);
		cr_assert_eq((int)num(f[11], "sizes", line_no), sizes, "fit line %d", line_no);
	}
	cr_assert_eq(saw_header, header, "the CSV header %s", header ? "is missing" : "is there");
	cr_assert_eq(saw_fit_header, header, "the fit header %s",
	             header ? "is missing" : "is there");
	free(copy);
	return fits;
}

/* The ops of --op all that have a size, and so a fit: all but the barrier. */
#define OP_FITS 8

/* 64 bytes to 1 MiB: the time grows a hundredfold and more, so the slope is positive whatever
 * the machine's speed; nothing else about the figures is checked. */
Test(bench, coll_fit_prints_a_row_per_op)
{
	const char *args[] = {"--op",          "all",  "--min-bytes", "64",    "--max-bytes", "1M",
	                      "--iters-scale", "0.05", "--fit",       "--csv", "@csv",        NULL};
	char path[128], *csv;
	struct run r;
	int rows;

	run_bench(&r, 2, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	/* Every op but the barrier: 15 sizes each. */
	cr_assert_eq(check_fit_output(r.out, 7, 1, 2, 15, &rows), OP_FITS, "stdout:\n%s", r.out);
	cr_assert_eq(rows, OP_FITS * 15 + 1, "data rows");
	path_in(path, sizeof(path), &r, "out.csv");
	csv = slurp_path(path, NULL);
	cr_assert_str_eq(csv, r.out, "the CSV file is not what was printed");
	free(csv);
	cleanup(&r);
}

Test(bench, coll_fit_with_dist_and_no_header)
{
	const char *args[] = {"--op",  "allreduce",     "--min-bytes",   "64",   "--max-bytes",
	                      "64K",   "--dist",        "--max-seconds", "0.05", "--no-header",
	                      "--fit", "--iters-scale", "0.05",          NULL};
	struct run r;
	int rows;

	run_bench(&r, 2, -1, NULL, args);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_eq(check_fit_output(r.out, 11, 0, 2, 11, &rows), 1, "stdout:\n%s", r.out);
	cr_assert_eq(rows, 11, "data rows");
	cleanup(&r);
}

/* A line through one size is any line: refused before anything runs, with the reason, at P=2
 * (rank 0 says it, and no rank exits before it has). */
Test(bench, coll_fit_refuses_a_single_size)
{
	static const struct {
		const char *args[10];
		const char *want;
	} bad[] = {
	    {{"--op", "allreduce", "--min-bytes", "8", "--max-bytes", "8", "--fit", NULL},
	     "--fit needs at least 2 sizes, and --min-bytes 8 --max-bytes 8 make 1"},
	    /* Raised to one float32, 4 bytes: past --max-bytes, no size at all. */
	    {{"--min-bytes", "1", "--max-bytes", "2", "--fit", NULL},
	     "--fit needs at least 2 sizes, and --min-bytes 4 --max-bytes 2 make 0"},
	    {{"--op", "barrier", "--fit", NULL}, "--fit needs an op with a size; barrier has none"},
	};
	static const char *const help[] = {"--help", NULL};
	struct run r;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_bench(&r, 2, -1, NULL, bad[i].args);
		cr_assert_eq(exit_code(&r), 2, "case %zu: exit %d; stderr:\n%s", i, exit_code(&r),
		             r.err);
		cr_assert(strstr(r.err, bad[i].want), "want \"%s\" in stderr:\n%s", bad[i].want,
		          r.err);
		cr_assert(!strstr(r.out, "fit,"), "case %zu printed a fit:\n%s", i, r.out);
		cleanup(&r);
	}
	run_bench(&r, 1, -1, NULL, help);
	cr_assert(strstr(r.out, "--fit") && strstr(r.out, "scripts/fit-plot"),
	          "--help does not tell of --fit:\n%s", r.out);
	cleanup(&r);
}
