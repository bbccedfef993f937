/* test_launcher.c - shmcoll-run from the outside: usage, the environment it
 * gives the ranks, exit status rules, stopping a failed job, signal forwarding,
 * that no rank process, no process a rank started and no arena outlives a job,
 * --cleanup, and multi-node jobs (rendezvous, refusals, failures on any node). Times are measured
 * and printed, and bounded only to catch a hang: no test depends on how fast a loaded machine is.
 */
#include <criterion/criterion.h>

#include <sched.h>

#include "lib/net/frame.h"
#include "shm/arena.h"
#include "shm/name.h"
#include "tests/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_CAP_S 20.0 /* a run taking longer than this is a hang */
/* The launcher stops a job within about a second (SIGTERM, SIGKILL 0.5 s
 * later); on a loaded machine it may take longer, so only this much is a
 * failure. */
#define STOP_CAP_S 10.0
#define OUT_MAX    65536

/* One launcher run: its output and status, and what its ranks recorded. */
struct run {
	char dir[64]; /* temp dir: stdout, stderr and the ranks' pidfiles */
	pid_t pid;    /* the launcher */
	double start;
	int status;  /* raw wait status */
	double secs; /* wall time of the run */
	char out[OUT_MAX];
	char err[OUT_MAX];
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Measured times go to stderr, into the test log: information, not checks. */
__attribute__((format(printf, 1, 2))) static void measured(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "test_launcher: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static const char *env_path(const char *name)
{
	const char *p = getenv(name);

	if (!p || !*p)
		cr_skip_test("%s is not set: run this suite through meson test", name);
	return p;
}

static const char *launcher(void)
{
	return env_path("SHMCOLL_RUN");
}

static const char *rankprog(void)
{
	return env_path("SHMCOLL_RANKPROG");
}

static void path_in(char *buf, size_t len, const struct run *r, const char *name)
{
	snprintf(buf, len, "%s/%s", r->dir, name);
}

/* Starts the launcher with argv (argv[0] is its path) and stdout/stderr in
 * files. The child runs plain C only: no cr_* call after fork. */
static void spawn(struct run *r, char *const argv[])
{
	char out[128], err[128];
	int fo, fe;

	memset(r, 0, sizeof(*r));
	strcpy(r->dir, "/tmp/shmcoll-launcher.XXXXXX");
	cr_assert_not_null(mkdtemp(r->dir), "mkdtemp: %s", strerror(errno));
	path_in(out, sizeof(out), r, "stdout");
	path_in(err, sizeof(err), r, "stderr");
	/* O_APPEND: every rank shares these files; no line may overwrite another. */
	fo = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
	fe = open(err, O_WRONLY | O_CREAT | O_APPEND, 0600);
	cr_assert(fo >= 0 && fe >= 0, "open output files: %s", strerror(errno));
	r->start = now_s();
	r->pid = fork();
	cr_assert(r->pid >= 0, "fork: %s", strerror(errno));
	if (r->pid == 0) {
		sigset_t none;

		/* The launcher dies with the test, and its ranks with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		if (dup2(fo, STDOUT_FILENO) < 0 || dup2(fe, STDERR_FILENO) < 0)
			_exit(126);
		setenv("SHMCOLL_TEST_PIDDIR", r->dir, 1);
		execv(argv[0], argv);
		_exit(126);
	}
	close(fo);
	close(fe);
}

static void slurp(const struct run *r, const char *name, char *buf)
{
	char path[128];
	ssize_t n = 0;
	int fd;

	path_in(path, sizeof(path), r, name);
	buf[0] = '\0';
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, buf, OUT_MAX - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
}

/* Reads rank's pidfile: 1 if present, 0 if not (yet). */
static int read_pidfile(const struct run *r, int rank, pid_t *pid, pid_t *pgid, char *job,
                        size_t joblen)
{
	char path[128], name[32], line[256], fmt[32];
	long p, g;
	FILE *f;
	int ok;

	snprintf(name, sizeof(name), "rank.%d", rank);
	path_in(path, sizeof(path), r, name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	ok = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	snprintf(fmt, sizeof(fmt), "%%ld %%ld %%%zus", joblen - 1);
	if (!ok || sscanf(line, fmt, &p, &g, job) != 3)
		return 0;
	*pid = (pid_t)p;
	*pgid = (pid_t)g;
	return 1;
}

/* Waits up to the cap for the launcher to exit. On a hang, kills the launcher
 * (its ranks die with it) and fails the test. */
static void finish(struct run *r)
{
	pid_t got;

	for (;;) {
		got = waitpid(r->pid, &r->status, WNOHANG);
		if (got == r->pid)
			break;
		cr_assert(got == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
		if (now_s() - r->start > RUN_CAP_S) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &r->status, 0);
			slurp(r, "stderr", r->err);
			cr_assert_fail("the launcher did not exit within %.0f s; stderr:\n%s",
			               RUN_CAP_S, r->err);
		}
		sleep_ms(5);
	}
	r->secs = now_s() - r->start;
	slurp(r, "stdout", r->out);
	slurp(r, "stderr", r->err);
}

static void cleanup(struct run *r)
{
	DIR *d = opendir(r->dir);
	struct dirent *e;
	char path[512];

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", r->dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(r->dir);
}

/* Runs the launcher to completion. */
static void run_argv(struct run *r, char *const argv[])
{
	spawn(r, argv);
	finish(r);
}

static int exit_code(const struct run *r)
{
	cr_assert(WIFEXITED(r->status), "the launcher was killed by signal %d; stderr:\n%s",
	          WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0, r->err);
	return WEXITSTATUS(r->status);
}

/* A process is gone once it no longer exists or is a zombie nobody reaped yet
 * (the launcher reaps its ranks; grandchildren are reparented). */
static int proc_state(pid_t pid, char *state, pid_t *pgrp)
{
	char path[64], buf[512], *p;
	long g;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	p = ok ? strrchr(buf, ')') : NULL;
	if (!p || sscanf(p + 1, " %c %*d %ld", state, &g) != 2)
		return 0;
	*pgrp = (pid_t)g;
	return 1;
}

static int proc_alive(pid_t pid)
{
	pid_t g;
	char st;

	return proc_state(pid, &st, &g) && st != 'Z';
}

/* Live (non-zombie) members of process group pgid. */
static int group_members(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d, "opendir /proc: %s", strerror(errno));
	while ((e = readdir(d)) != NULL) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		pid_t g;
		char st;

		if (*end || pid <= 0)
			continue;
		if (proc_state((pid_t)pid, &st, &g) && g == pgid && st != 'Z')
			n++;
	}
	closedir(d);
	return n;
}

/* /dev/shm entries of this user that belong to job. */
static int arenas_of(const char *job)
{
	char prefix[SHMCOLL_NAME_MAX], name[SHMCOLL_NAME_MAX];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d, "opendir /dev/shm: %s", strerror(errno));
	cr_assert_eq(shmcoll__arena_prefix(prefix, sizeof(prefix)), 0);
	cr_assert_eq(shmcoll__arena_name(name, sizeof(name), job), 0);
	while ((e = readdir(d)) != NULL) {
		if (!strncmp(e->d_name, prefix, strlen(prefix)) &&
		    (strstr(e->d_name, job) || !strcmp(e->d_name, name + 1)))
			n++;
	}
	closedir(d);
	return n;
}

/* After a run of p ranks: ranks 0..need-1 recorded themselves (the others
 * may have been stopped before they could), all that did share one job, no
 * rank process and no arena of that job is left. Returns the job in job. */
static void check_gone_n(const struct run *r, int p, int need, char *job, size_t joblen)
{
	char other[128];
	pid_t pid, pgid, pgid0 = 0;
	int i;

	for (i = 0; i < p; i++) {
		if (!read_pidfile(r, i, &pid, &pgid, i ? other : job, i ? sizeof(other) : joblen)) {
			cr_assert(i >= need && i > 0, "rank %d left no pidfile; stderr:\n%s", i,
			          r->err);
			continue;
		}
		if (i == 0)
			pgid0 = pgid;
		cr_assert_eq(pgid, pgid0, "rank %d is in group %ld, rank 0 in %ld", i, (long)pgid,
		             (long)pgid0);
		cr_assert(i == 0 || !strcmp(other, job), "rank %d has job %s, rank 0 %s", i, other,
		          job);
		cr_assert(!proc_alive(pid), "rank %d (pid %ld) outlived the launcher", i,
		          (long)pid);
	}
	cr_assert_eq(group_members(pgid0), 0, "the ranks' process group %ld still has live members",
	             (long)pgid0);
	cr_assert_eq(arenas_of(job), 0, "an arena of job %s is left in /dev/shm", job);
}

static void check_gone(const struct run *r, int p, char *job, size_t joblen)
{
	check_gone_n(r, p, p, job, joblen);
}

/* Waits (bounded) until all p ranks have written their pidfiles. */
static void wait_started(struct run *r, int p, pid_t *pgid, char *job, size_t joblen)
{
	char other[128];
	pid_t pid;
	int i;

	for (i = 0; i < p;) {
		if (read_pidfile(r, i, &pid, pgid, other, sizeof(other))) {
			i++;
			continue;
		}
		if (now_s() - r->start > RUN_CAP_S) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &r->status, 0);
			cr_assert_fail("rank %d did not start within %.0f s", i, RUN_CAP_S);
		}
		sleep_ms(5);
	}
	cr_assert(read_pidfile(r, 0, &pid, pgid, job, joblen));
}

/* "j<pid>-<16 hex digits>" */
static int is_job_id(const char *s)
{
	size_t digits, hex;

	if (*s++ != 'j')
		return 0;
	digits = strspn(s, "0123456789");
	if (!digits || s[digits] != '-')
		return 0;
	s += digits + 1;
	hex = strspn(s, "0123456789abcdef");
	return hex == 16 && !s[hex];
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

TestSuite(launcher, .timeout = 60);

Test(launcher, help)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "--help", NULL};

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0);
	cr_assert(strstr(r.out, "-n") && strstr(r.out, "SHMCOLL_RANK") &&
	              strstr(r.out, "--cleanup"),
	          "--help does not explain -n, SHMCOLL_RANK and --cleanup:\n%s", r.out);
	cr_assert(strstr(r.out, "--nnodes") && strstr(r.out, "--node-rank") &&
	              strstr(r.out, "--nproc-per-node") && strstr(r.out, "--root") &&
	              strstr(r.out, "--node-addr") && strstr(r.out, "--connect-timeout-ms") &&
	              strstr(r.out, "SHMCOLL_NET_FD") && strstr(r.out, "SHMCOLL_NODES") &&
	              strstr(r.out, "SHMCOLL_TOKEN") && strstr(r.out, "job token"),
	          "--help does not explain the multi-node options, variables and token:\n%s",
	          r.out);
	cr_assert(strstr(r.out, "--tag-output") && strstr(r.out, "--log-dir") &&
	              strstr(r.out, "--log-only") && strstr(r.out, "MASTER_PORT") &&
	              strstr(r.out, "MASTER_ADDR") && strstr(r.out, "LOCAL_WORLD_SIZE") &&
	              strstr(r.out, "GROUP_RANK") && strstr(r.out, "TORCHELASTIC_RUN_ID") &&
	              strstr(r.out, "whole lines"),
	          "--help does not explain the output options, the output and torchrun's "
	          "variables:\n%s",
	          r.out);
	cleanup(&r);
}

Test(launcher, version)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "--version", NULL};

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0);
	cr_assert_str_eq(r.out, "shmcoll-run 0.1.0\n");
	cleanup(&r);
}

Test(launcher, bad_usage)
{
	static const char *cases[][5] = {
	    {NULL},
	    {"-n", NULL},
	    {"-n", "2", NULL},
	    {"-n", "0", "true", NULL},
	    {"-n", "4097", "true", NULL},
	    {"-n", "-3", "true", NULL},
	    {"-n", "abc", "true", NULL},
	    {"-n", "2x", "true", NULL},
	    {"--np", "", "true", NULL},
	    {"true", NULL},
	    {"-n", "2", "--bogus", "true", NULL},
	    {"-n", "2", "--timeout-ms", "soon", "true"},
	    {"-n", "2", "--bind", "socket", "true"},
	    {"-n", "4097", "--bind", "core", "true"},
	    {"--cleanup", "-n", "2", "true", NULL},
	    {"--cleanup", "true", NULL},
	    {"--cleanup", "--tag-output", NULL},
	    {"-n", "2", "--log-only", "true", NULL},
	    {"-n", "2", "--log-dir", "", "true"},
	    {"-n", "2", "--log-dir", NULL},
	};
	static struct run r;
	size_t c, i;

	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *argv[8] = {(char *)launcher()};

		for (i = 0; i < 5 && cases[c][i]; i++)
			argv[i + 1] = (char *)cases[c][i];
		run_argv(&r, argv);
		cr_assert_eq(exit_code(&r), 2, "case %zu (%s %s ...): exit %d, want 2", c,
		             argv[1] ? argv[1] : "", argv[1] && argv[2] ? argv[2] : "",
		             exit_code(&r));
		cr_assert(strstr(r.err, "shmcoll-run: "), "case %zu: no message on stderr", c);
		cr_assert_str_empty(r.out, "case %zu: usage error printed to stdout", c);
		cleanup(&r);
	}
}

/* Runs `env` mode with 4 ranks; returns the job all of them saw. */
static void run_env(char *job, size_t joblen)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "4", (char *)rankprog(), "env", NULL};
	char seen[4] = {0}, jobs[4][128], recorded[128], *line, *save = NULL;
	int i, n = 0, rank, size;

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	cr_assert_eq(count_lines(r.out), 4, "want 4 lines, got:\n%s", r.out);
	for (line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		cr_assert_eq(sscanf(line, "%d %d %127s", &rank, &size, jobs[n]), 3, "line '%s'",
		             line);
		cr_assert(rank >= 0 && rank < 4 && !seen[rank], "rank %d twice or out of range",
		          rank);
		seen[rank] = 1;
		cr_assert_eq(size, 4);
		cr_assert_str_eq(jobs[n], jobs[0], "ranks saw different jobs");
		n++;
	}
	for (i = 0; i < 4; i++)
		cr_assert(seen[i], "rank %d missing", i);
	cr_assert(is_job_id(jobs[0]), "job '%s' is not j<pid>-<16 hex>", jobs[0]);
	snprintf(job, joblen, "%s", jobs[0]);
	check_gone(&r, 4, recorded, sizeof(recorded));
	cr_assert_str_eq(recorded, jobs[0]);
	cleanup(&r);
}

Test(launcher, env)
{
	char job1[128], job2[128];

	run_env(job1, sizeof(job1));
	run_env(job2, sizeof(job2));
	cr_assert_str_neq(job1, job2, "two runs got the same job %s", job1);
}

/* Extra variables, `--` and the program's own arguments reach every rank. */
Test(launcher, env_extra)
{
	static struct run r;
	char *argv[] = {(char *)launcher(),
	                "--np",
	                "2",
	                "--timeout-ms",
	                "1234",
	                "--",
	                "/bin/sh",
	                "-c",
	                "echo \"$SHMCOLL_TIMEOUT_MS $SHMCOLL_LOCAL_RANK $SHMCOLL_LOCAL_SIZE $1\"",
	                "sh",
	                "-n",
	                NULL};

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	cr_assert(!strcmp(r.out, "1234 0 2 -n\n1234 1 2 -n\n") ||
	              !strcmp(r.out, "1234 1 2 -n\n1234 0 2 -n\n"),
	          "unexpected output:\n%s", r.out);
	cleanup(&r);
}

/* The CPUs rank i may run on, as sched_getaffinity reports them, for P ranks
 * started with the given --bind. */
static void run_bind(const char *bind, int p, char *out, size_t len)
{
	static struct run r;
	char np[16];
	char *argv[] = {(char *)launcher(),
	                "-n",
	                np,
	                "--bind",
	                (char *)bind,
	                "--",
	                "/bin/sh",
	                "-c",
	                "echo \"$SHMCOLL_RANK $(grep Cpus_allowed_list /proc/self/status | "
	                "cut -f2)\"",
	                NULL};

	snprintf(np, sizeof(np), "%d", p);
	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "--bind %s: stderr:\n%s", bind, r.err);
	cr_assert(strlen(r.out) < len, "output too long:\n%s", r.out);
	memcpy(out, r.out, strlen(r.out) + 1);
	cleanup(&r);
}

/* This process's Cpus_allowed_list, as the ranks print theirs. */
static void own_cpu_list(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[512];

	buf[0] = '\0';
	cr_assert(f, "cannot read /proc/self/status");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Cpus_allowed_list: %63s", buf) == 1)
			break;
	fclose(f);
	cr_assert(buf[0] && len > strlen(buf), "no Cpus_allowed_list");
}

/* --bind core pins rank i to the i-th allowed CPU; --bind none leaves every
 * rank the launcher's CPUs; more ranks than CPUs under --bind core is a usage
 * error (bad_usage), under auto it runs unpinned. */
Test(launcher, bind)
{
	cpu_set_t set;
	int cpus[CPU_SETSIZE], n = 0, i;
	char out[4096], want[128], list[64];

	cr_assert(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	run_bind("core", n, out, sizeof(out));
	for (i = 0; i < n; i++) {
		snprintf(want, sizeof(want), "%d %d\n", i, cpus[i]);
		cr_assert(strstr(out, want), "no '%d %d' (rank, its only CPU) in:\n%s", i, cpus[i],
		          out);
	}
	own_cpu_list(list, sizeof(list));
	run_bind("none", 2, out, sizeof(out));
	for (i = 0; i < 2; i++) {
		snprintf(want, sizeof(want), "%d %s\n", i, list);
		cr_assert(strstr(out, want), "--bind none: want '%d %s' in:\n%s", i, list, out);
	}
	run_bind("auto", n + 1, out, sizeof(out));
	cr_assert_eq(count_lines(out), n + 1, "auto with %d ranks on %d CPUs:\n%s", n + 1, n, out);
}

/* SHMCOLL_CPUS is the launcher's own CPU list, the same for every rank however
 * it binds them: what a benchmark may re-pin to. */
Test(launcher, cpus_env)
{
	static struct run r;
	char *argv[] = {(char *)launcher(),       "-n", "2", "--", "/bin/sh", "-c",
	                "echo \"$SHMCOLL_CPUS\"", NULL};
	char list[64], want[160];

	own_cpu_list(list, sizeof(list));
	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	snprintf(want, sizeof(want), "%s\n%s\n", list, list);
	cr_assert_str_eq(r.out, want, "want SHMCOLL_CPUS=%s on both ranks", list);
	cleanup(&r);
}

static void run_ok(int p)
{
	static struct run r;
	char np[16], line[64], job[128];
	char *argv[] = {(char *)launcher(), "-n", np, (char *)rankprog(), "ok", NULL};
	int i;

	snprintf(np, sizeof(np), "%d", p);
	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "-n %d ok: exit %d; stderr:\n%s", p, exit_code(&r), r.err);
	cr_assert_eq(count_lines(r.out), p, "want %d lines, got:\n%s", p, r.out);
	for (i = 0; i < p; i++) {
		snprintf(line, sizeof(line), "rank %d of %d ok\n", i, p);
		cr_assert(strstr(r.out, line), "no '%.*s' in:\n%s", (int)strlen(line) - 1, line,
		          r.out);
	}
	check_gone(&r, p, job, sizeof(job));
	cleanup(&r);
}

Test(launcher, ok_1)
{
	run_ok(1);
}

Test(launcher, ok_2)
{
	run_ok(2);
}

Test(launcher, ok_3)
{
	run_ok(3);
}

Test(launcher, ok_8)
{
	run_ok(8);
}

/* Rank 1 exits 7 after shmcoll_init; the others block in a barrier until the
 * launcher stops them. */
Test(launcher, rank_fails)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "3", (char *)rankprog(), "fail", "1", "7", NULL};
	char job[128];

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 7, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	measured("the failed job took %.3f s from start to the launcher's exit", r.secs);
	cr_assert_lt(r.secs, STOP_CAP_S, "the job took %.1f s to stop", r.secs);
	cr_assert(strstr(r.err, "rank 1 (pid") && strstr(r.err, "exited with status 7"),
	          "stderr does not name rank 1 and status 7:\n%s", r.err);
	check_gone(&r, 3, job, sizeof(job));
	cleanup(&r);
}

Test(launcher, rank_killed)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "3", (char *)rankprog(), "kill", "2", NULL};
	char job[128];

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 137, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	measured("the failed job took %.3f s from start to the launcher's exit", r.secs);
	cr_assert_lt(r.secs, STOP_CAP_S, "the job took %.1f s to stop", r.secs);
	cr_assert(strstr(r.err, "rank 2 (pid") && strstr(r.err, "killed by signal 9"),
	          "stderr does not name rank 2 and signal 9:\n%s", r.err);
	check_gone(&r, 3, job, sizeof(job));
	cleanup(&r);
}

/* The failure path without the library: rank 0 ignores SIGTERM, then rank 1
 * exits 5, so only the SIGKILL that follows the SIGTERM can stop rank 0. */
Test(launcher, sigterm_ignored)
{
	static struct run r;
	char *argv[] = {(char *)launcher(),
	                "-n",
	                "2",
	                "/bin/sh",
	                "-c",
	                "ready=\"$SHMCOLL_TEST_PIDDIR/ready\"; "
	                "if [ \"$SHMCOLL_RANK\" = 0 ]; then trap '' TERM; : > \"$ready\"; "
	                "exec sleep 60; fi; "
	                "while [ ! -e \"$ready\" ]; do sleep 0.01; done; exit 5",
	                NULL};

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 5, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	measured("the failed job took %.3f s from start to the launcher's exit", r.secs);
	cr_assert_lt(r.secs, STOP_CAP_S, "the job took %.1f s to stop", r.secs);
	cr_assert(strstr(r.err, "rank 1 (pid") && strstr(r.err, "exited with status 5"),
	          "stderr:\n%s", r.err);
	cr_assert_null(strstr(r.err, "rank 0 (pid"), "a rank the launcher stopped is reported:\n%s",
	               r.err);
	cleanup(&r);
}

Test(launcher, exec_fails)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "2", "/nonexistent/shmcoll-prog", NULL};

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 127, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "cannot run /nonexistent/shmcoll-prog"), "stderr:\n%s", r.err);
	cleanup(&r);
}

/* sig to the launcher while its ranks sleep: forwarded, and the launcher
 * exits 128 + sig soon after, leaving nothing behind. */
static void forward(int sig)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "2", (char *)rankprog(), "sleep", NULL};
	char job[128];
	pid_t pgid;
	double t0;

	spawn(&r, argv);
	wait_started(&r, 2, &pgid, job, sizeof(job));
	t0 = now_s();
	cr_assert_eq(kill(r.pid, sig), 0);
	finish(&r);
	cr_assert_eq(exit_code(&r), 128 + sig, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	measured("the launcher exited %.3f s after signal %d", now_s() - t0, sig);
	cr_assert_lt(now_s() - t0, STOP_CAP_S, "the launcher took %.1f s to exit", now_s() - t0);
	cr_assert_null(strstr(r.err, "rank "), "ranks stopped by a signal are reported:\n%s",
	               r.err);
	check_gone(&r, 2, job, sizeof(job));
	cleanup(&r);
}

Test(launcher, sigterm)
{
	forward(SIGTERM);
}

Test(launcher, sigint)
{
	forward(SIGINT);
}

/* Ranks SIGKILLed from outside never destroy their communicator: the
 * launcher removes the arena they leave, and the name of a heap segment
 * (shm/arena.h: "<arena>.h<seq>") a growing shmcoll_malloc had not unlinked
 * yet. Both are made here, so this does not depend on the library. */
Test(launcher, arena_removed)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "2", (char *)rankprog(), "sleep", NULL};
	char job[128], name[SHMCOLL_NAME_MAX], seg[SHMCOLL_NAME_MAX + 16], path[sizeof(seg) + 16];
	struct stat st;
	pid_t pgid;
	int fd;

	spawn(&r, argv);
	wait_started(&r, 2, &pgid, job, sizeof(job));
	cr_assert_eq(shmcoll__arena_name(name, sizeof(name), job), 0);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0, "shm_open %s: %s", name, strerror(errno));
	close(fd);
	snprintf(seg, sizeof(seg), "%s.h3", name);
	fd = shm_open(seg, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0, "shm_open %s: %s", seg, strerror(errno));
	close(fd);
	cr_assert_eq(kill(-pgid, SIGKILL), 0);
	finish(&r);
	cr_assert_eq(exit_code(&r), 137, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "killed by signal 9"), "stderr:\n%s", r.err);
	check_gone(&r, 2, job, sizeof(job));
	snprintf(path, sizeof(path), "/dev/shm%s", seg);
	cr_assert(stat(path, &st) < 0 && errno == ENOENT, "%s is left behind", path);
	cleanup(&r);
}

/* Reads what.<rank>, a pid a rank recorded: 1 if present, 0 if not (yet). */
static int read_mark(const struct run *r, const char *what, int rank, pid_t *pid)
{
	char path[128], name[64];
	long p;
	FILE *f;
	int ok;

	snprintf(name, sizeof(name), "%s.%d", what, rank);
	path_in(path, sizeof(path), r, name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	ok = fscanf(f, "%ld", &p) == 1;
	fclose(f);
	if (ok)
		*pid = (pid_t)p;
	return ok;
}

/* Waits (bounded) until ranks 0..p-1 have all recorded what. */
static void wait_marks(struct run *r, const char *what, int p, pid_t *pids)
{
	int i;

	for (i = 0; i < p;) {
		if (read_mark(r, what, i, &pids[i])) {
			i++;
			continue;
		}
		if (now_s() - r->start > RUN_CAP_S) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &r->status, 0);
			slurp(r, "stderr", r->err);
			cr_assert_fail("rank %d did not record %s within %.0f s; stderr:\n%s", i,
			               what, RUN_CAP_S, r->err);
		}
		sleep_ms(5);
	}
}

/* A rank SIGKILLed from outside while the others ignore SIGTERM: the launcher
 * names the rank and the signal, SIGKILLs the others after the grace, exits
 * 137 and leaves no process and no arena. */
Test(launcher, rank_sigkilled_others_ignore_sigterm)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "3", (char *)rankprog(), "stubborn", NULL};
	char job[128];
	pid_t pids[3];
	double t0, dt;

	spawn(&r, argv);
	wait_marks(&r, "stubborn", 3, pids);
	t0 = now_s();
	cr_assert_eq(kill(pids[1], SIGKILL), 0);
	finish(&r);
	dt = now_s() - t0;
	measured("the launcher exited %.3f s after rank 1 was SIGKILLed", dt);
	cr_assert_eq(exit_code(&r), 137, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_lt(dt, STOP_CAP_S, "the launcher took %.1f s to exit", dt);
	cr_assert(strstr(r.err, "rank 1 (pid") && strstr(r.err, "killed by signal 9 (SIGKILL"),
	          "stderr does not name rank 1 and SIGKILL:\n%s", r.err);
	cr_assert(!strstr(r.err, "rank 0 (pid") && !strstr(r.err, "rank 2 (pid"),
	          "a rank the launcher stopped is reported:\n%s", r.err);
	check_gone(&r, 3, job, sizeof(job));
	cleanup(&r);
}

/* SIGINT or SIGTERM to the launcher while every rank ignores both: forwarded,
 * then SIGKILL after the grace; exit 128 + sig, nothing left. */
static void forward_ignored(int sig)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "2", (char *)rankprog(), "stubborn", NULL};
	char job[128];
	pid_t pids[2];
	double t0, dt;

	spawn(&r, argv);
	wait_marks(&r, "stubborn", 2, pids);
	t0 = now_s();
	cr_assert_eq(kill(r.pid, sig), 0);
	finish(&r);
	dt = now_s() - t0;
	measured("the launcher exited %.3f s after signal %d the ranks ignore", dt, sig);
	cr_assert_eq(exit_code(&r), 128 + sig, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_lt(dt, STOP_CAP_S, "the launcher took %.1f s to exit", dt);
	cr_assert_null(strstr(r.err, "rank "), "ranks stopped by the launcher are reported:\n%s",
	               r.err);
	check_gone(&r, 2, job, sizeof(job));
	cleanup(&r);
}

Test(launcher, sigterm_ignored_by_ranks)
{
	forward_ignored(SIGTERM);
}

Test(launcher, sigint_ignored_by_ranks)
{
	forward_ignored(SIGINT);
}

/* Rank 2 exits 3 once rank 0 has created the arena but before it attaches
 * itself, so the ranks never unlink the arena's name: the launcher does. */
Test(launcher, rank_fails_before_attaching)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "3", (char *)rankprog(), "early", "2", "3", NULL};
	char job[128];

	run_argv(&r, argv);
	measured("the job took %.3f s from start to the launcher's exit", r.secs);
	cr_assert_eq(exit_code(&r), 3, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_lt(r.secs, STOP_CAP_S, "the job took %.1f s to stop", r.secs);
	cr_assert(strstr(r.err, "rank 2 (pid") && strstr(r.err, "exited with status 3"),
	          "stderr does not name rank 2 and status 3:\n%s", r.err);
	/* Rank 0 made the arena; rank 1 may have been stopped before it began. */
	check_gone_n(&r, 3, 1, job, sizeof(job));
	cleanup(&r);
}

/* Each rank leaves a process outside the ranks' group that ignores SIGTERM,
 * then exits with code: the launcher adopts, stops and reaps them, and exits
 * with the ranks' status. */
static void run_orphans(const char *code, int want)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n",         "2", (char *)rankprog(),
	                "orphan",           (char *)code, NULL};
	pid_t orphans[2] = {0, 0};
	int i, alive = 0;

	run_argv(&r, argv);
	for (i = 0; i < 2; i++) {
		cr_assert(read_mark(&r, "orphan", i, &orphans[i]), "rank %d left no orphan mark",
		          i);
		alive += proc_alive(orphans[i]);
	}
	for (i = 0; i < 2; i++)
		if (orphans[i] > 0 && proc_alive(orphans[i]))
			kill(orphans[i], SIGKILL);
	measured("orphan %s: the launcher exited after %.3f s", code, r.secs);
	cr_assert_eq(exit_code(&r), want, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_eq(alive, 0, "%d processes the ranks left outlived the launcher", alive);
	cr_assert_lt(r.secs, STOP_CAP_S, "the job took %.1f s to stop", r.secs);
	cleanup(&r);
}

Test(launcher, orphans_stopped_after_success)
{
	run_orphans("0", 0);
}

Test(launcher, orphans_stopped_after_failure)
{
	run_orphans("4", 4);
}

static int shm_exists(const char *name)
{
	char path[SHMCOLL_NAME_MAX + 16];
	struct stat st;

	snprintf(path, sizeof(path), "/dev/shm%s", name);
	return lstat(path, &st) == 0;
}

/* --cleanup removes an arena whose creator died before every rank attached,
 * keeps one whose creator lives, and says which is which. */
Test(launcher, cleanup)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "--cleanup", NULL};
	char dead_job[64], live_job[64], err[256], want[SHMCOLL_NAME_MAX + 96];
	struct shmcoll_arena live, dead;
	pid_t pid;
	int ws;

	th_job_name(dead_job, sizeof(dead_job));
	th_job_name(live_job, sizeof(live_job));
	/* Live first: creating an arena sweeps, and would remove the dead one. */
	cr_assert_eq(shmcoll__arena_create(&live, live_job, 2, 0, err, sizeof(err)), 0, "%s", err);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		_exit(shmcoll__arena_create(&dead, dead_job, 2, 0, err, sizeof(err)) == 0 ? 0 : 1);
	cr_assert_eq(waitpid(pid, &ws, 0), pid);
	cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the child could not create its arena");
	cr_assert_eq(shmcoll__arena_name(dead.name, sizeof(dead.name), dead_job), 0);
	cr_assert(shm_exists(dead.name));

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "stderr:\n%s", r.err);
	snprintf(want, sizeof(want), "removed %s: its creator (pid %ld) is gone", dead.name + 1,
	         (long)pid);
	cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
	snprintf(want, sizeof(want), "kept %s: its creator (pid %ld) is alive", live.name + 1,
	         (long)getpid());
	cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
	cr_assert(strstr(r.out, "stale arena"), "no count in:\n%s", r.out);
	cr_assert_not(shm_exists(dead.name), "the dead job's arena is still there");
	cr_assert(shm_exists(live.name), "the live job's arena was removed");
	shmcoll__arena_release(&live, 1);
	cr_assert_not(shm_exists(live.name));
	cleanup(&r);
}

/* Multi-node jobs: one launcher per "node", every one a process of this test,
 * node i at 127.0.0.<i+1> (all of 127/8 is loopback), node 0's rendezvous at
 * 127.0.0.1:<a free port>. The ranks run rankprog's netenv and netfail modes,
 * which do not use the library, so these tests hold whatever the transport does. */

#define TOKEN    "shmcoll-test-Token_1"
#define MAX_NODE 3

/* An argv under construction, its strings kept with it. */
struct args {
	char *v[40];
	char s[16][64];
	int n;
	int ns;
};

static void arg(struct args *a, const char *s)
{
	a->v[a->n++] = (char *)s;
	a->v[a->n] = NULL;
}

__attribute__((format(printf, 2, 3))) static void argf(struct args *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->s[a->ns], sizeof(a->s[0]), fmt, ap);
	va_end(ap);
	arg(a, a->s[a->ns++]);
}

/* A port nobody listened on a moment ago (node 0 may still lose it: see
 * start_root). */
static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind: %s", strerror(errno));
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

/* Whether something listens on 127.0.0.1:port (/proc/net/tcp, state 0A). */
static int listening(int port)
{
	char line[512], want[32];
	FILE *f = fopen("/proc/net/tcp", "r");
	int found = 0;

	cr_assert_not_null(f, "cannot read /proc/net/tcp");
	snprintf(want, sizeof(want), "0100007F:%04X 00000000:0000 0A", port);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

/* Starts node `node`'s launcher of an nnodes x ppn job with token (NULL:
 * SHMCOLL_TOKEN unset), extra options (NULL-terminated, may be NULL), and
 * rankprog with prog's arguments. */
static void start_node_path(struct run *r, int nnodes, int node, int ppn, int port,
                            const char *token, const char *const *extra, const char *path,
                            const char *const *prog)
{
	struct args a = {.n = 0};

	arg(&a, launcher());
	arg(&a, "--nnodes");
	argf(&a, "%d", nnodes);
	arg(&a, "--node-rank");
	argf(&a, "%d", node);
	arg(&a, "--nproc-per-node");
	argf(&a, "%d", ppn);
	arg(&a, "--root");
	argf(&a, "127.0.0.1:%d", port);
	arg(&a, "--node-addr");
	argf(&a, "127.0.0.%d", node + 1);
	for (; extra && *extra; extra++)
		arg(&a, *extra);
	arg(&a, "--");
	arg(&a, path);
	for (; *prog; prog++)
		arg(&a, *prog);
	if (token)
		setenv("SHMCOLL_TOKEN", token, 1);
	else
		unsetenv("SHMCOLL_TOKEN");
	spawn(r, a.v);
	unsetenv("SHMCOLL_TOKEN");
}

static void start_node(struct run *r, int nnodes, int node, int ppn, int port, const char *token,
                       const char *const *extra, const char *const *prog)
{
	start_node_path(r, nnodes, node, ppn, port, token, extra, rankprog(), prog);
}

/* Starts node 0 and waits until it listens; picks another port if the one
 * it was given was taken meanwhile. Returns the port. */
static int start_root_path(struct run *r, int nnodes, int ppn, const char *token,
                           const char *const *extra, const char *path, const char *const *prog)
{
	int attempt, port;

	for (attempt = 0; attempt < 5; attempt++) {
		port = free_port();
		start_node_path(r, nnodes, 0, ppn, port, token, extra, path, prog);
		while (!listening(port) && waitpid(r->pid, &r->status, WNOHANG) == 0) {
			if (now_s() - r->start > RUN_CAP_S) {
				kill(r->pid, SIGKILL);
				waitpid(r->pid, &r->status, 0);
				cr_assert_fail("node 0 did not listen within %.0f s", RUN_CAP_S);
			}
			sleep_ms(2);
		}
		if (listening(port))
			return port;
		slurp(r, "stderr", r->err);
		cr_assert(strstr(r->err, "Address already in use"),
		          "node 0 exited before it listened; stderr:\n%s", r->err);
		cleanup(r);
	}
	cr_assert_fail("no free port for node 0 in %d attempts", attempt);
	return -1;
}

static int start_root(struct run *r, int nnodes, int ppn, const char *token,
                      const char *const *extra, const char *const *prog)
{
	return start_root_path(r, nnodes, ppn, token, extra, rankprog(), prog);
}

/* Waits (bounded) until ranks first..first+n-1 of r have written pidfiles;
 * returns the job they share. */
static void wait_ranks(struct run *r, int first, int n, char *job, size_t joblen)
{
	pid_t pid, pgid;
	int i;

	for (i = first; i < first + n;) {
		if (read_pidfile(r, i, &pid, &pgid, job, joblen)) {
			i++;
			continue;
		}
		cr_assert(now_s() - r->start < RUN_CAP_S, "rank %d did not start within %.0f s", i,
		          RUN_CAP_S);
		sleep_ms(5);
	}
}

/* An arena for job, made here the way rank 0 would, so that removing it is
 * the launcher's job. */
static void make_arena(const char *job)
{
	char name[SHMCOLL_NAME_MAX];
	int fd;

	cr_assert_eq(shmcoll__arena_name(name, sizeof(name), job), 0);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0, "shm_open %s: %s", name, strerror(errno));
	close(fd);
}

/* Ranks first..first+n-1 of r recorded themselves and no longer run (waits a
 * bounded time: ranks of a SIGKILLed launcher die asynchronously), their
 * group is empty, and, if arena, their job's arena is gone. */
static void check_node_gone(const struct run *r, int first, int n, int arena)
{
	char job[128];
	pid_t pid, pgid;
	double t0 = now_s();
	int i;

	for (i = first; i < first + n; i++) {
		cr_assert(read_pidfile(r, i, &pid, &pgid, job, sizeof(job)),
		          "rank %d left no pidfile; stderr:\n%s", i, r->err);
		while ((proc_alive(pid) || group_members(pgid)) && now_s() - t0 < STOP_CAP_S)
			sleep_ms(10);
		cr_assert(!proc_alive(pid), "rank %d (pid %ld) outlived its launcher", i,
		          (long)pid);
		cr_assert_eq(group_members(pgid), 0, "rank %d's group %ld has live members", i,
		             (long)pgid);
	}
	if (arena)
		cr_assert_eq(arenas_of(job), 0, "an arena of job %s is left in /dev/shm", job);
}

/* The value of NAME= in a netenv line, into buf. */
static const char *field(const char *line, const char *name, char *buf, size_t len)
{
	char key[64];
	const char *p;
	size_t n;

	snprintf(key, sizeof(key), " %s=", name);
	p = strstr(line, key);
	if (!p && !strncmp(line, key + 1, strlen(key) - 1))
		p = line - 1;
	cr_assert_not_null(p, "no %s in '%s'", name, line);
	p += strlen(key);
	n = strcspn(p, " \n");
	cr_assert_lt(n, len);
	memcpy(buf, p, n);
	buf[n] = '\0';
	return buf;
}

static int ifield(const char *line, const char *name)
{
	char buf[64];

	return atoi(field(line, name, buf, sizeof(buf)));
}

/* Checks node `node`'s netenv lines: one per rank, each what an nnodes x ppn
 * job gives it, with the same SHMCOLL_NODES as every node (nodes_seen, "" at
 * first) and a job unlike the other nodes'. */
static void check_netenv(struct run *r, int nnodes, int node, int ppn, char *nodes_seen,
                         char jobs[][128])
{
	char *line, *save = NULL, buf[4096], host[64];
	int seen[8] = {0}, n = 0, j, cpus[CPU_SETSIZE], ncpus = 0;
	cpu_set_t set;

	cr_assert(sched_getaffinity(0, sizeof(set), &set) == 0);
	for (j = 0; j < CPU_SETSIZE; j++)
		if (CPU_ISSET(j, &set))
			cpus[ncpus++] = j;

	cr_assert_eq(exit_code(r), 0, "node %d: exit %d; stderr:\n%s", node, exit_code(r), r->err);
	cr_assert_eq(count_lines(r->out), ppn, "node %d: want %d lines:\n%s", node, ppn, r->out);
	for (line = strtok_r(r->out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int rank = ifield(line, "SHMCOLL_RANK"), local = ifield(line, "SHMCOLL_LOCAL_RANK");

		cr_assert(local >= 0 && local < ppn && !seen[local], "node %d: '%s'", node, line);
		seen[local] = 1;
		cr_assert_eq(rank, node * ppn + local, "node %d: '%s'", node, line);
		cr_assert_eq(ifield(line, "SHMCOLL_SIZE"), nnodes * ppn, "'%s'", line);
		cr_assert_eq(ifield(line, "SHMCOLL_LOCAL_SIZE"), ppn, "'%s'", line);
		cr_assert_eq(ifield(line, "SHMCOLL_NNODES"), nnodes, "'%s'", line);
		cr_assert_eq(ifield(line, "SHMCOLL_NODE_RANK"), node, "'%s'", line);
		cr_assert_str_eq(field(line, "SHMCOLL_TOKEN", buf, sizeof(buf)), TOKEN);
		field(line, "SHMCOLL_NET_FD", buf, sizeof(buf));
		cr_assert(local == 0 ? strcmp(buf, "-") != 0 : strcmp(buf, "-") == 0,
		          "SHMCOLL_NET_FD for local rank %d: '%s'", local, line);
		field(line, "SHMCOLL_JOB", buf, sizeof(buf));
		cr_assert(is_job_id(buf), "job '%s'", buf);
		if (n++ == 0)
			strcpy(jobs[node], buf);
		cr_assert_str_eq(buf, jobs[node], "node %d's ranks saw different jobs", node);
		/* The launchers bind node i's ranks from CPU i * P on, so
		 * nodes that share this machine spread over its CPUs. */
		if (ppn <= ncpus) {
			char want[16];

			snprintf(want, sizeof(want), "%d", cpus[rank % ncpus]);
			cr_assert_str_eq(field(line, "CPUS", buf, sizeof(buf)), want,
			                 "rank %d is not bound where it should be: '%s'", rank,
			                 line);
		}
		field(line, "SHMCOLL_NODES", buf, sizeof(buf));
		if (!*nodes_seen)
			strcpy(nodes_seen, buf);
		cr_assert_str_eq(buf, nodes_seen, "node %d saw other nodes", node);
	}
	for (j = 0; j < node; j++)
		cr_assert_str_neq(jobs[j], jobs[node], "nodes %d and %d share job %s", j, node,
		                  jobs[j]);
	/* Entry j is node j's leader: an address of 127.0.0.<j+1>, some port. */
	for (j = 0, line = nodes_seen; j < nnodes; j++) {
		snprintf(host, sizeof(host), "127.0.0.%d:", j + 1);
		cr_assert(!strncmp(line, host, strlen(host)), "entry %d of %s is not at %s", j,
		          nodes_seen, host);
		line = strchr(line, ',');
		cr_assert(j == nnodes - 1 ? line == NULL : line != NULL, "SHMCOLL_NODES=%s",
		          nodes_seen);
		line = line ? line + 1 : NULL;
	}
}

static struct run nodes[MAX_NODE];

/* An nnodes x ppn job of netenv ranks; node `first` is started before node 0,
 * so it has to retry its connect (-1: none). */
static void run_netenv(int nnodes, int ppn, int first)
{
	static const char *const prog[] = {"netenv", NULL};
	char nodes_seen[4096] = "", jobs[MAX_NODE][128];
	int i, port;

	if (first > 0) {
		port = free_port();
		start_node(&nodes[first], nnodes, first, ppn, port, TOKEN, NULL, prog);
		sleep_ms(50);
		start_node(&nodes[0], nnodes, 0, ppn, port, TOKEN, NULL, prog);
	} else {
		port = start_root(&nodes[0], nnodes, ppn, TOKEN, NULL, prog);
	}
	for (i = 1; i < nnodes; i++)
		if (i != first)
			start_node(&nodes[i], nnodes, i, ppn, port, TOKEN, NULL, prog);
	for (i = 0; i < nnodes; i++)
		finish(&nodes[i]);
	for (i = 0; i < nnodes; i++) {
		measured("node %d of %dx%d: exited after %.3f s", i, nnodes, ppn, nodes[i].secs);
		check_netenv(&nodes[i], nnodes, i, ppn, nodes_seen, jobs);
		check_node_gone(&nodes[i], i * ppn, ppn, 1);
	}
	for (i = 0; i < nnodes; i++)
		cleanup(&nodes[i]);
}

Test(launcher, nodes_2x2_env)
{
	run_netenv(2, 2, -1);
}

Test(launcher, nodes_3x1_env)
{
	run_netenv(3, 1, 2);
}

/* Without SHMCOLL_TOKEN node 0 makes one and prints it; node 1 joins with it. */
Test(launcher, nodes_token_generated)
{
	static const char *const prog[] = {"netenv", NULL};
	char token[128] = "", buf[256], *p;
	double t0 = now_s();
	int port, i;

	port = start_root(&nodes[0], 2, 1, NULL, NULL, prog);
	while (!*token) {
		slurp(&nodes[0], "stderr", nodes[0].err);
		p = strstr(nodes[0].err, "shmcoll-run: job token ");
		if (p && strchr(p, '\n'))
			cr_assert_eq(sscanf(p,
			                    "shmcoll-run: job token %127[^;]; start the other "
			                    "nodes with SHMCOLL_TOKEN=%255s",
			                    token, buf),
			             2, "token line: %s", p);
		cr_assert(now_s() - t0 < RUN_CAP_S, "no token line; stderr:\n%s", nodes[0].err);
		sleep_ms(5);
	}
	cr_assert_str_eq(token, buf, "the line names two tokens: %s", p);
	cr_assert_eq(strlen(token), 32, "token '%s' is not 32 hex digits", token);
	cr_assert_eq(strspn(token, "0123456789abcdef"), 32, "token '%s' is not 32 hex digits",
	             token);
	start_node(&nodes[1], 2, 1, 1, port, token, NULL, prog);
	for (i = 0; i < 2; i++) {
		finish(&nodes[i]);
		cr_assert_eq(exit_code(&nodes[i]), 0, "node %d: exit %d; stderr:\n%s", i,
		             exit_code(&nodes[i]), nodes[i].err);
		snprintf(buf, sizeof(buf), "SHMCOLL_TOKEN=%s ", token);
		cr_assert(strstr(nodes[i].out, buf), "node %d's rank did not get the token:\n%s", i,
		          nodes[i].out);
		cleanup(&nodes[i]);
	}
}

/* A raw client of node 0's rendezvous: connects, sends len bytes of what. */
static int raw_client(int port, const void *what, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
	             strerror(errno));
	if (len)
		cr_assert_eq(send(fd, what, len, MSG_NOSIGNAL), (ssize_t)len);
	return fd;
}

/* Whether node 0 closed fd without sending a byte (waits at most ms). */
static int closed_silently(int fd, int ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	char c;
	ssize_t n;

	if (poll(&pf, 1, ms) != 1)
		return 0;
	n = recv(fd, &c, 1, 0);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void launcher_hello(uint8_t *out, const char *token, int version, int node)
{
	struct shmcoll_hello h = {
	    .version = (uint16_t)version,
	    .role = ROLE_LAUNCHER,
	    .nnodes = 2,
	    .node = (uint32_t)node,
	    .nproc = 1,
	    .rank = (uint32_t)node,
	};

	snprintf(h.token, sizeof(h.token), "%s", token);
	snprintf(h.addr, sizeof(h.addr), "127.0.0.9:4242");
	cr_assert_eq(shmcoll__hello_encode(out, &h), 0);
}

/* Node 0 refuses, logs and survives a wrong token (from a raw client and from
 * a launcher), another wire version, garbage, a second node 0, and a client
 * that sends part of a hello and stays connected; then the right node 1 joins
 * and the job succeeds. */
Test(launcher, nodes_refused_clients, .timeout = 90)
{
	static const char *const prog[] = {"netenv", NULL};
	static const char *const wrong_node[] = {"--connect-timeout-ms", "10000", NULL};
	uint8_t hello[SHMCOLL_HELLO_BYTES], junk[SHMCOLL_HELLO_BYTES];
	static struct run wrong;
	int port, fd, silent, i;

	port = start_root(&nodes[0], 2, 1, TOKEN, NULL, prog);
	/* Part of a hello, then nothing: node 0 must never wait on it alone. */
	silent = raw_client(port, "HLLO", 4);

	launcher_hello(hello, "not-the-token", SHMCOLL_WIRE_VERSION, 1);
	fd = raw_client(port, hello, sizeof(hello));
	cr_assert(closed_silently(fd, 10000), "a hello with a wrong token was not refused");
	close(fd);

	launcher_hello(hello, TOKEN, SHMCOLL_WIRE_VERSION + 1, 1);
	fd = raw_client(port, hello, sizeof(hello));
	cr_assert(closed_silently(fd, 10000), "a hello of another wire version was not refused");
	close(fd);

	for (i = 0; i < (int)sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	fd = raw_client(port, junk, sizeof(junk));
	cr_assert(closed_silently(fd, 10000), "garbage was not refused");
	close(fd);

	launcher_hello(hello, TOKEN, SHMCOLL_WIRE_VERSION, 0);
	fd = raw_client(port, hello, sizeof(hello));
	cr_assert(closed_silently(fd, 10000), "a second node 0 was not refused");
	close(fd);

	start_node(&wrong, 2, 1, 1, port, "wrong-token", wrong_node, prog);
	finish(&wrong);
	cr_assert_eq(exit_code(&wrong), 1, "a node with a wrong token: exit %d; stderr:\n%s",
	             exit_code(&wrong), wrong.err);
	cr_assert(strstr(wrong.err, "refused this node"), "stderr:\n%s", wrong.err);
	cr_assert_eq(count_lines(wrong.out), 0, "a refused node ran ranks:\n%s", wrong.out);
	cleanup(&wrong);

	/* The silent client is still connected: it must not hold anyone up. */
	start_node(&nodes[1], 2, 1, 1, port, TOKEN, NULL, prog);
	for (i = 0; i < 2; i++)
		finish(&nodes[i]);
	close(silent);
	for (i = 0; i < 2; i++)
		cr_assert_eq(exit_code(&nodes[i]), 0, "node %d: exit %d; stderr:\n%s", i,
		             exit_code(&nodes[i]), nodes[i].err);
	cr_assert_eq(count_lines(nodes[1].out), 1, "node 1:\n%s", nodes[1].out);
	{
		static const char *const want[] = {
		    "wrong token\n",
		    "wire version 2, this side speaks 1\n",
		    "not a shmcoll hello",
		    "it claims to be node 0\n",
		};
		const char *p = nodes[0].err;
		size_t w;
		int refused = 0;

		while ((p = strstr(p, "shmcoll-run: refused a connection from 127.0.0.")) != NULL) {
			refused++;
			p++;
		}
		cr_assert_eq(refused, 5,
		             "want 5 refusals (2 tokens, version, garbage, node 0):\n%s",
		             nodes[0].err);
		for (w = 0; w < sizeof(want) / sizeof(want[0]); w++)
			cr_assert(strstr(nodes[0].err, want[w]), "no '%s' in node 0's log:\n%s",
			          want[w], nodes[0].err);
	}
	for (i = 0; i < 2; i++)
		cleanup(&nodes[i]);
}

/* A client that connects and says nothing is dropped after the silence limit
 * (with a log line), and node 0 goes on serving. */
Test(launcher, nodes_silent_client_dropped, .timeout = 90)
{
	static const char *const prog[] = {"netenv", NULL};
	int port, fd, i;
	double t0;

	port = start_root(&nodes[0], 2, 1, TOKEN, NULL, prog);
	fd = raw_client(port, "abc", 3);
	t0 = now_s();
	cr_assert(closed_silently(fd, 30000), "a silent client was not dropped within 30 s");
	measured("node 0 dropped a silent client after %.3f s", now_s() - t0);
	close(fd);
	slurp(&nodes[0], "stderr", nodes[0].err);
	cr_assert(strstr(nodes[0].err, "refused a connection from 127.0.0.1:") &&
	              strstr(nodes[0].err, "no hello within"),
	          "node 0's log:\n%s", nodes[0].err);
	start_node(&nodes[1], 2, 1, 1, port, TOKEN, NULL, prog);
	for (i = 0; i < 2; i++) {
		finish(&nodes[i]);
		cr_assert_eq(exit_code(&nodes[i]), 0, "node %d: exit %d; stderr:\n%s", i,
		             exit_code(&nodes[i]), nodes[i].err);
		cleanup(&nodes[i]);
	}
}

/* Starts an nnodes x ppn job of netfail ranks (rank victim fails with code
 * once its node's go file exists), waits until every rank runs and gives each
 * node's job an arena. */
static int start_failing(int nnodes, int ppn, int victim, const char *code)
{
	char v[16], job[128];
	const char *prog[] = {"netfail", v, code, NULL};
	int port, i;

	snprintf(v, sizeof(v), "%d", victim);
	port = start_root(&nodes[0], nnodes, ppn, TOKEN, NULL, prog);
	for (i = 1; i < nnodes; i++)
		start_node(&nodes[i], nnodes, i, ppn, port, TOKEN, NULL, prog);
	for (i = 0; i < nnodes; i++) {
		wait_ranks(&nodes[i], i * ppn, ppn, job, sizeof(job));
		make_arena(job);
	}
	return port;
}

static void go(const struct run *r)
{
	char path[128];
	int fd;

	path_in(path, sizeof(path), r, "go");
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	cr_assert(fd >= 0);
	close(fd);
}

/* A rank of node 1 fails with code: every launcher exits with want, the others
 * say that node 1 failed, and no rank and no arena is left anywhere. */
static void node_rank_fails(int nnodes, int ppn, const char *code, int want)
{
	char msg[128];
	double t0;
	int i;

	start_failing(nnodes, ppn, ppn + 1 < 2 * ppn ? ppn + 1 : ppn, code);
	t0 = now_s();
	go(&nodes[1]);
	for (i = 0; i < nnodes; i++)
		finish(&nodes[i]);
	measured("%dx%d, a rank of node 1 failed (%s): the last launcher exited %.3f s later",
	         nnodes, ppn, code, now_s() - t0);
	snprintf(msg, sizeof(msg), "node 1 failed (status %d); stopping this node's ranks", want);
	for (i = 0; i < nnodes; i++) {
		cr_assert_eq(exit_code(&nodes[i]), want, "node %d: exit %d, want %d; stderr:\n%s",
		             i, exit_code(&nodes[i]), want, nodes[i].err);
		cr_assert(i == 1 || strstr(nodes[i].err, msg), "node %d: no '%s' in:\n%s", i, msg,
		          nodes[i].err);
		cr_assert_lt(nodes[i].secs, RUN_CAP_S);
		check_node_gone(&nodes[i], i * ppn, ppn, 1);
		cleanup(&nodes[i]);
	}
}

Test(launcher, nodes_rank_exits)
{
	node_rank_fails(3, 1, "3", 3);
}

Test(launcher, nodes_rank_sigkilled)
{
	node_rank_fails(2, 2, "kill", 137);
}

/* Node 1's launcher is SIGKILLed: its ranks die with it (PDEATHSIG), node 0
 * loses it and stops the job, every other launcher exits 1. */
Test(launcher, nodes_launcher_killed)
{
	char job[128], name[SHMCOLL_NAME_MAX];
	pid_t pid, pgid;
	int i;

	start_failing(3, 2, -1, "0");
	cr_assert(read_pidfile(&nodes[1], 2, &pid, &pgid, job, sizeof(job)));
	cr_assert_eq(kill(nodes[1].pid, SIGKILL), 0);
	for (i = 0; i < 3; i++)
		finish(&nodes[i]);
	cr_assert(WIFSIGNALED(nodes[1].status) && WTERMSIG(nodes[1].status) == SIGKILL);
	check_node_gone(&nodes[1], 2, 2, 0);
	/* Its arena is the one thing no launcher can remove. */
	cr_assert_eq(shmcoll__arena_name(name, sizeof(name), job), 0);
	shm_unlink(name);
	cr_assert(strstr(nodes[0].err, "lost the connection to node 1's launcher"), "node 0:\n%s",
	          nodes[0].err);
	cr_assert(strstr(nodes[2].err, "node 1 failed (status 1); stopping this node's ranks"),
	          "node 2:\n%s", nodes[2].err);
	for (i = 0; i < 3; i += 2) {
		cr_assert_eq(exit_code(&nodes[i]), 1, "node %d: exit %d; stderr:\n%s", i,
		             exit_code(&nodes[i]), nodes[i].err);
		check_node_gone(&nodes[i], 2 * i, 2, 1);
	}
	for (i = 0; i < 3; i++)
		cleanup(&nodes[i]);
}

/* Node 0's launcher is SIGKILLed: the others lose it, stop their ranks, exit 1. */
Test(launcher, nodes_root_killed)
{
	char job[128], name[SHMCOLL_NAME_MAX];
	pid_t pid, pgid;
	int i;

	start_failing(2, 1, -1, "0");
	cr_assert(read_pidfile(&nodes[0], 0, &pid, &pgid, job, sizeof(job)));
	cr_assert_eq(kill(nodes[0].pid, SIGKILL), 0);
	for (i = 0; i < 2; i++)
		finish(&nodes[i]);
	check_node_gone(&nodes[0], 0, 1, 0);
	cr_assert_eq(shmcoll__arena_name(name, sizeof(name), job), 0);
	shm_unlink(name);
	cr_assert_eq(exit_code(&nodes[1]), 1, "node 1: exit %d; stderr:\n%s", exit_code(&nodes[1]),
	             nodes[1].err);
	cr_assert(strstr(nodes[1].err, "lost the connection to node 0's launcher") &&
	              strstr(nodes[1].err, "stopping this node's ranks"),
	          "node 1:\n%s", nodes[1].err);
	check_node_gone(&nodes[1], 1, 1, 1);
	for (i = 0; i < 2; i++)
		cleanup(&nodes[i]);
}

/* SIGTERM to node 1's launcher stops its ranks as on one node; the status,
 * 143, becomes the job's on every node. */
Test(launcher, nodes_sigterm_propagates)
{
	int i;

	start_failing(2, 2, -1, "0");
	cr_assert_eq(kill(nodes[1].pid, SIGTERM), 0);
	for (i = 0; i < 2; i++)
		finish(&nodes[i]);
	cr_assert(strstr(nodes[0].err, "node 1 failed (status 143); stopping this node's ranks"),
	          "node 0:\n%s", nodes[0].err);
	for (i = 0; i < 2; i++) {
		cr_assert_eq(exit_code(&nodes[i]), 143, "node %d: exit %d; stderr:\n%s", i,
		             exit_code(&nodes[i]), nodes[i].err);
		check_node_gone(&nodes[i], 2 * i, 2, 1);
		cleanup(&nodes[i]);
	}
}

/* A node whose root never appears gives up at its connect deadline, and a root
 * whose nodes never come at its own, each naming what is missing. */
Test(launcher, nodes_deadline)
{
	static const char *const prog[] = {"netenv", NULL};
	static const char *const quick[] = {"--connect-timeout-ms", "300", NULL};
	int port = free_port();

	start_node(&nodes[1], 2, 1, 1, port, TOKEN, quick, prog);
	finish(&nodes[1]);
	measured("a node without a root gave up after %.3f s", nodes[1].secs);
	cr_assert_eq(exit_code(&nodes[1]), 1, "exit %d; stderr:\n%s", exit_code(&nodes[1]),
	             nodes[1].err);
	cr_assert(strstr(nodes[1].err, "cannot reach node 0 at 127.0.0.1:") &&
	              strstr(nodes[1].err, "within 300 ms"),
	          "stderr:\n%s", nodes[1].err);
	cr_assert_str_empty(nodes[1].out);
	cleanup(&nodes[1]);

	start_root(&nodes[0], 3, 1, TOKEN, quick, prog);
	finish(&nodes[0]);
	cr_assert_eq(exit_code(&nodes[0]), 1, "exit %d; stderr:\n%s", exit_code(&nodes[0]),
	             nodes[0].err);
	cr_assert(strstr(nodes[0].err, "nodes 1, 2 of 3 did not join within 300 ms"), "stderr:\n%s",
	          nodes[0].err);
	cr_assert_str_empty(nodes[0].out);
	cleanup(&nodes[0]);
}

/* --nproc-per-node alone, or with --nnodes 1, is -n: no multi-node variable,
 * even one the launcher inherited. */
Test(launcher, nodes_single_node_forms)
{
	static const char *const forms[][4] = {
	    {"--nproc-per-node", "2", NULL},
	    {"--nnodes", "1", "--nproc-per-node", "2"},
	    {"-n", "2", "--nproc-per-node", "2"},
	};
	static struct run r;
	size_t f, i;

	setenv("SHMCOLL_NNODES", "4", 1);
	setenv("SHMCOLL_NET_FD", "3", 1);
	for (f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		struct args a = {.n = 0};

		arg(&a, launcher());
		for (i = 0; i < 4 && forms[f][i]; i++)
			arg(&a, forms[f][i]);
		arg(&a, "/bin/sh");
		arg(&a, "-c");
		arg(&a, "echo \"$SHMCOLL_RANK $SHMCOLL_SIZE $SHMCOLL_LOCAL_SIZE "
		        "${SHMCOLL_NNODES-x} ${SHMCOLL_NODE_RANK-x} ${SHMCOLL_NODES-x} "
		        "${SHMCOLL_NET_FD-x}\"");
		run_argv(&r, a.v);
		cr_assert_eq(exit_code(&r), 0, "form %zu: stderr:\n%s", f, r.err);
		cr_assert(!strcmp(r.out, "0 2 2 x x x x\n1 2 2 x x x x\n") ||
		              !strcmp(r.out, "1 2 2 x x x x\n0 2 2 x x x x\n"),
		          "form %zu:\n%s", f, r.out);
		cleanup(&r);
	}
}

Test(launcher, nodes_bad_usage)
{
	static const char *cases[][12] = {
	    {"--nnodes", "2", "-n", "1", "true", NULL},
	    {"--nnodes", "2", "--node-rank", "0", "-n", "1", "true", NULL},
	    {"--nnodes", "2", "--root", "127.0.0.1:5", "-n", "1", "true", NULL},
	    {"--nnodes", "2", "--node-rank", "2", "--root", "127.0.0.1:5", "-n", "1", "true"},
	    {"--nnodes", "0", "--node-rank", "0", "--root", "127.0.0.1:5", "-n", "1", "true"},
	    {"--nnodes", "1025", "--node-rank", "0", "--root", "127.0.0.1:5", "-n", "1", "true"},
	    {"--nnodes", "2", "--node-rank", "-1", "--root", "127.0.0.1:5", "-n", "1", "true"},
	    {"--nnodes", "2", "--node-rank", "0", "--root", "127.0.0.1", "-n", "1", "true"},
	    {"--nnodes", "2", "--node-rank", "0", "--root", "127.0.0.1:0", "-n", "1", "true"},
	    {"--nnodes", "2", "--node-rank", "0", "--root", "host:port", "-n", "1", "true"},
	    {"--nnodes", "2", "--node-rank", "0", "--root", "127.0.0.1:5", "true", NULL},
	    {"-n", "2", "--nproc-per-node", "3", "true", NULL},
	    {"--nproc-per-node", "0", "true", NULL},
	    {"--node-rank", "0", "-n", "1", "true", NULL},
	    {"--root", "127.0.0.1:5", "-n", "1", "true", NULL},
	    {"--node-addr", "127.0.0.1", "-n", "1", "true", NULL},
	    {"--connect-timeout-ms", "5", "-n", "1", "true", NULL},
	    {"--nnodes", "2", "--node-rank", "0", "--root", "127.0.0.1:5", "-n", "1",
	     "--connect-timeout-ms", "0", "true"},
	    {"--nnodes", "2", "--node-rank", "0", "--root", "127.0.0.1:5", "-n", "1025", "true"},
	    /* Node 1 without the token (the suite runs with SHMCOLL_TOKEN unset). */
	    {"--nnodes", "2", "--node-rank", "1", "--root", "127.0.0.1:5", "-n", "1", "true"},
	    {"--cleanup", "--nnodes", "2", NULL},
	};
	static struct run r;
	size_t c, i;

	unsetenv("SHMCOLL_TOKEN");
	for (c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *argv[16] = {(char *)launcher()};

		for (i = 0; i < 12 && cases[c][i]; i++)
			argv[i + 1] = (char *)cases[c][i];
		run_argv(&r, argv);
		cr_assert_eq(exit_code(&r), 2, "case %zu: exit %d, want 2; stderr:\n%s", c,
		             exit_code(&r), r.err);
		cr_assert(strstr(r.err, "shmcoll-run: "), "case %zu: no message on stderr", c);
		cr_assert_str_empty(r.out, "case %zu: usage error printed to stdout", c);
		cleanup(&r);
	}
	/* A token outside the alphabet. */
	{
		char *argv[] = {(char *)launcher(), "--nnodes", "2", "--node-rank", "0", "--root",
		                "127.0.0.1:5",      "-n",       "1", "true",        NULL};

		setenv("SHMCOLL_TOKEN", "not a token!", 1);
		run_argv(&r, argv);
		unsetenv("SHMCOLL_TOKEN");
		cr_assert_eq(exit_code(&r), 2, "a bad token: exit %d; stderr:\n%s", exit_code(&r),
		             r.err);
		cr_assert(strstr(r.err, "SHMCOLL_TOKEN"), "stderr:\n%s", r.err);
		cleanup(&r);
	}
}

/* A listener of this test, standing in for node 0 at 127.0.0.1:<port>. */
static int fake_root(int *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 8), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Accepts node 1's launcher, reads its hello and checks what it says. */
static int accept_node1(int lfd, struct shmcoll_hello *h)
{
	struct pollfd pf = {.fd = lfd, .events = POLLIN};
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	char why[192], host[64];
	size_t got = 0;
	uint16_t port;
	int fd;

	cr_assert_eq(poll(&pf, 1, (int)(RUN_CAP_S * 1000)), 1, "node 1 did not connect");
	fd = accept(lfd, NULL, NULL);
	cr_assert(fd >= 0);
	while (got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);

		cr_assert_gt(n, 0, "node 1 sent %zu bytes of its hello", got);
		got += (size_t)n;
	}
	cr_assert_eq(shmcoll__hello_decode(buf, h, why, sizeof(why)), 0, "%s", why);
	cr_assert(h->role == ROLE_LAUNCHER && h->nnodes == 2 && h->node == 1 && h->nproc == 2 &&
	              h->rank == 2 && !strcmp(h->token, TOKEN),
	          "node 1's hello: role %u, %u nodes, node %u, %u ranks, rank %u, token %s",
	          h->role, h->nnodes, h->node, h->nproc, h->rank, h->token);
	cr_assert_eq(shmcoll__addr_split(h->addr, host, sizeof(host), &port), 0, "addr %s",
	             h->addr);
	cr_assert(!strcmp(host, "127.0.0.2") && port != 0, "node 1's leader address: %s", h->addr);
	return fd;
}

/* Node 1 checks node 0 as node 0 checks it: an answer with another token, a
 * garbage answer, and a node table of the wrong size each make it exit 1,
 * saying why, without starting a rank. */
Test(launcher, nodes_bad_root)
{
	static const char *const prog[] = {"netenv", NULL};
	static const char *const want[] = {
	    "answered with a bad hello: wrong token",
	    "answered with a bad hello: not a shmcoll hello",
	    "sent a bad node table",
	};
	struct shmcoll_hello h, mine = {
	                            .version = SHMCOLL_WIRE_VERSION,
	                            .role = ROLE_LAUNCHER,
	                            .nnodes = 2,
	                            .nproc = 2,
	                            .addr = "127.0.0.1:4242",
	                        };
	uint8_t answer[SHMCOLL_HELLO_BYTES], hdr[SHMCOLL_FRAME_BYTES], table[2 * SHMCOLL_ADDR_MAX];
	struct shmcoll_frame f = {.type = FRAME_TABLE, .seq = 1, .len = sizeof(table) - 1};
	int c, lfd, fd, port;

	for (c = 0; c < 3; c++) {
		lfd = fake_root(&port);
		start_node(&nodes[1], 2, 1, 2, port, TOKEN, NULL, prog);
		fd = accept_node1(lfd, &h);
		snprintf(mine.token, sizeof(mine.token), "%s", c == 0 ? "other-token" : TOKEN);
		cr_assert_eq(shmcoll__hello_encode(answer, &mine), 0);
		if (c == 1)
			memset(answer, 0x5a, sizeof(answer));
		cr_assert_eq(send(fd, answer, sizeof(answer), MSG_NOSIGNAL),
		             (ssize_t)sizeof(answer));
		if (c == 2) {
			memset(table, 0, sizeof(table));
			strcpy((char *)table, mine.addr);
			strcpy((char *)table + SHMCOLL_ADDR_MAX, h.addr);
			shmcoll__frame_encode(hdr, &f);
			cr_assert_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL),
			             (ssize_t)sizeof(hdr));
			cr_assert_eq(send(fd, table, (size_t)f.len, MSG_NOSIGNAL), (ssize_t)f.len);
		}
		finish(&nodes[1]);
		close(fd);
		close(lfd);
		cr_assert_eq(exit_code(&nodes[1]), 1, "case %d: exit %d; stderr:\n%s", c,
		             exit_code(&nodes[1]), nodes[1].err);
		cr_assert(strstr(nodes[1].err, want[c]), "case %d: no '%s' in:\n%s", c, want[c],
		          nodes[1].err);
		cr_assert_str_empty(nodes[1].out, "case %d: ranks ran", c);
		cleanup(&nodes[1]);
	}
}

/* ---- torchrun's variables and the ranks' output ---- */

static const char *outprog(void)
{
	return env_path("SHMCOLL_OUTPROG");
}

/* A file of r's directory, whole (the output tests write megabytes); *len its
 * size. Freed by the caller. */
static char *slurp_path(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd;

	fd = open(path, O_RDONLY);
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	cr_assert_not_null(buf);
	*len = 0;
	while (*len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + *len, (size_t)st.st_size - *len);

		cr_assert_gt(n, 0, "read %s", path);
		*len += (size_t)n;
	}
	buf[*len] = '\0';
	close(fd);
	return buf;
}

static char *slurp_all(const struct run *r, const char *name, size_t *len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", r->dir, name);
	return slurp_path(path, len);
}

/* Byte j of line i of rank's payload: tests/progs/outprog.c has the same. */
static char payload_byte(int rank, int i, long j)
{
	return (char)('a' + (rank * 7 + i * 13 + j) % 26);
}

#define LINE_CAP 65536 /* the launcher's: a longer line comes out in pieces */
#define MAX_P    8

/* Checks buf (len bytes: the launcher's stdout or stderr, or a rank's log)
 * for outprog's lines of stream c ('o' or 'e') from p ranks (only rank `only`
 * if it is not -1), n lines each: every line is one rank's line, whole, every
 * rank's lines are all there and in order. Lines longer than LINE_CAP come in
 * pieces of at most LINE_CAP bytes, which tagged output (tag: "stdout" or
 * "stderr") lets us attribute. */
static void check_lines(const char *buf, size_t len, int p, int only, int n, char c,
                        const char *tag, const char *what)
{
	int next[MAX_P] = {0}, lines = 0;
	long want[MAX_P] = {0}, off[MAX_P] = {0};
	const char *line = buf, *end = buf + len;

	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line)), *body;
		int rank = -1, i, h = 0, sc;
		long L, j, blen;

		cr_assert_not_null(nl, "%s: the output ends in a line without a newline", what);
		lines++;
		if (tag) {
			char want_tag[64], t[16];

			cr_assert_eq(sscanf(line, "[%d]<%15[a-z]>: %n", &rank, t, &h), 2,
			             "%s: line %d has no tag: '%.60s'", what, lines, line);
			cr_assert(rank >= 0 && rank < p, "%s: line %d: rank %d", what, lines, rank);
			snprintf(want_tag, sizeof(want_tag), "[%d]<%s>: ", rank, tag);
			cr_assert(!strncmp(line, want_tag, strlen(want_tag)),
			          "%s: line %d: tag '%.20s', want '%s'", what, lines, line,
			          want_tag);
			line += h;
		}
		if (rank >= 0 && want[rank] > 0) {
			/* The next piece of rank's long line. */
			blen = nl - line;
			cr_assert(blen <= want[rank] && blen <= LINE_CAP,
			          "%s: line %d: a piece of %ld bytes of rank %d's line, %ld left",
			          what, lines, blen, rank, want[rank]);
			for (j = 0; j < blen; j++)
				cr_assert_eq(line[j], payload_byte(rank, next[rank], off[rank] + j),
				             "%s: line %d: rank %d's long line, byte %ld", what,
				             lines, rank, off[rank] + j);
			off[rank] += blen;
			want[rank] -= blen;
			if (want[rank] == 0)
				next[rank]++;
			line = nl + 1;
			continue;
		}
		h = 0;
		cr_assert_eq(sscanf(line, "%c %d %d %ld %n", (char *)&sc, &rank, &i, &L, &h), 4,
		             "%s: line %d is no rank's line: '%.60s'", what, lines, line);
		cr_assert(h > 0 && (char)sc == c && rank >= 0 && rank < p,
		          "%s: line %d is no rank's line: '%.60s'", what, lines, line);
		cr_assert_eq(i, next[rank], "%s: line %d: rank %d's line %d, want its line %d",
		             what, lines, rank, i, next[rank]);
		body = line + h;
		blen = nl - body;
		if (blen < L) {
			/* A first piece: only tagged output may have one. */
			cr_assert(tag && nl - (line - 0) <= LINE_CAP,
			          "%s: line %d: rank %d's line %d has %ld of %ld bytes", what,
			          lines, rank, i, blen, L);
			want[rank] = L - blen;
			off[rank] = blen;
		} else {
			cr_assert_eq(blen, L,
			             "%s: line %d: rank %d's line %d has %ld bytes, not %ld", what,
			             lines, rank, i, blen, L);
			next[rank]++;
		}
		for (j = 0; j < blen; j++)
			cr_assert_eq(
			    body[j], payload_byte(rank, i, j),
			    "%s: line %d: rank %d's line %d is mixed with another at byte %ld",
			    what, lines, rank, i, j);
		line = nl + 1;
	}
	for (int r = 0; r < p; r++)
		cr_assert_eq(next[r], only < 0 || r == only ? n : 0, "%s: %d lines of rank %d",
		             what, next[r], r);
}

/* P ranks each write N lines of up to MAXLEN bytes to stdout and to stderr,
 * in small pieces at once (line N/2 LONG bytes when LONG > 0): the launcher's
 * stdout and stderr hold every line, whole, in each rank's order. */
static void run_lines(int p, int n, long maxlen, long longlen, int tagged)
{
	static struct run r;
	struct args a = {.n = 0};
	size_t olen, elen;
	char *out, *err;

	arg(&a, launcher());
	arg(&a, "-n");
	argf(&a, "%d", p);
	if (tagged)
		arg(&a, "--tag-output");
	arg(&a, outprog());
	arg(&a, "lines");
	argf(&a, "%d", n);
	argf(&a, "%ld", maxlen);
	argf(&a, "%ld", longlen);
	run_argv(&r, a.v);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%.2000s", exit_code(&r), r.err);
	out = slurp_all(&r, "stdout", &olen);
	err = slurp_all(&r, "stderr", &elen);
	measured("%d ranks x %d lines: %zu + %zu bytes passed on in %.3f s", p, 2 * n, olen, elen,
	         r.secs);
	check_lines(out, olen, p, -1, n, 'o', tagged ? "stdout" : NULL, "stdout");
	check_lines(err, elen, p, -1, n, 'e', tagged ? "stderr" : NULL, "stderr");
	free(out);
	free(err);
	cleanup(&r);
}

Test(launcher, lines_whole_4, .timeout = 120)
{
	run_lines(4, 300, 9000, 0, 0);
}

Test(launcher, lines_whole_8, .timeout = 120)
{
	run_lines(8, 150, 20000, 0, 0);
}

/* Tagged, with a line of 150000 bytes per stream: pieces of at most 64 KiB. */
Test(launcher, lines_tagged_long, .timeout = 120)
{
	run_lines(4, 100, 5000, 150000, 1);
}

/* Checks the torchenv lines of one node's ranks of an nnodes x ppn job; the
 * port and run id must be those of the other nodes (port, run: "" at first). */
static void check_torchenv(struct run *r, int nnodes, int node, int ppn, char *port, char *run)
{
	char *line, *save = NULL, buf[128];
	int seen[MAX_P] = {0}, n = 0;

	cr_assert_eq(exit_code(r), 0, "node %d: exit %d; stderr:\n%s", node, exit_code(r), r->err);
	cr_assert_eq(count_lines(r->out), ppn, "node %d: want %d lines:\n%s", node, ppn, r->out);
	for (line = strtok_r(r->out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		int local = ifield(line, "LOCAL_RANK"), p;

		cr_assert(local >= 0 && local < ppn && !seen[local], "node %d: '%s'", node, line);
		seen[local] = 1;
		cr_assert_eq(ifield(line, "RANK"), node * ppn + local, "'%s'", line);
		cr_assert_eq(ifield(line, "RANK"), ifield(line, "SHMCOLL_RANK"), "'%s'", line);
		cr_assert_eq(ifield(line, "LOCAL_RANK"), ifield(line, "SHMCOLL_LOCAL_RANK"), "'%s'",
		             line);
		cr_assert_eq(ifield(line, "WORLD_SIZE"), nnodes * ppn, "'%s'", line);
		cr_assert_eq(ifield(line, "WORLD_SIZE"), ifield(line, "SHMCOLL_SIZE"), "'%s'",
		             line);
		cr_assert_eq(ifield(line, "LOCAL_WORLD_SIZE"), ppn, "'%s'", line);
		cr_assert_eq(ifield(line, "GROUP_RANK"), node, "'%s'", line);
		cr_assert_eq(ifield(line, "GROUP_WORLD_SIZE"), nnodes, "'%s'", line);
		cr_assert_str_eq(field(line, "MASTER_ADDR", buf, sizeof(buf)), "127.0.0.1", "'%s'",
		                 line);
		cr_assert_str_eq(field(line, "TORCHELASTIC_RESTART_COUNT", buf, sizeof(buf)), "0");
		cr_assert_str_eq(field(line, "TORCHELASTIC_USE_AGENT_STORE", buf, sizeof(buf)), "-",
		                 "an enclosing torchrun's agent store reached the ranks: '%s'",
		                 line);
		p = ifield(line, "MASTER_PORT");
		cr_assert(p > 0 && p < 65536, "'%s'", line);
		field(line, "MASTER_PORT", buf, sizeof(buf));
		if (!*port)
			strcpy(port, buf);
		cr_assert_str_eq(buf, port, "ranks got different ports: '%s'", line);
		field(line, "TORCHELASTIC_RUN_ID", buf, sizeof(buf));
		cr_assert(strlen(buf) == 12 && strspn(buf, "0123456789abcdef") == 12,
		          "run id '%s' is not 12 hex digits", buf);
		if (!*run)
			strcpy(run, buf);
		cr_assert_str_eq(buf, run, "ranks got different run ids: '%s'", line);
	}
}

/* One job of 4 ranks: torchrun's variables on every rank, and a MASTER_PORT
 * rank 0 can listen on and the others reach at MASTER_ADDR (outprog torchenv
 * does what torch's store does). Variables an enclosing torchrun left are
 * replaced. A second job gets another run id. */
Test(launcher, torch_env, .timeout = 120)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "4", (char *)outprog(), "torchenv", NULL};
	char port[2][16] = {"", ""}, run[2][16] = {"", ""};
	int k;

	setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
	setenv("MASTER_PORT", "1", 1);
	setenv("WORLD_SIZE", "99", 1);
	setenv("GROUP_RANK", "7", 1);
	for (k = 0; k < 2; k++) {
		run_argv(&r, argv);
		check_torchenv(&r, 1, 0, 4, port[k], run[k]);
		cleanup(&r);
	}
	unsetenv("TORCHELASTIC_USE_AGENT_STORE");
	unsetenv("MASTER_PORT");
	unsetenv("WORLD_SIZE");
	unsetenv("GROUP_RANK");
	cr_assert_str_neq(run[0], run[1], "two jobs got the same run id %s", run[0]);
}

/* 2 nodes x 2 ranks: every rank has the job's torchrun variables, MASTER_ADDR
 * is --root's host, and node 0's port and run id reached node 1 (rank 0 listens,
 * the other three connect). */
Test(launcher, nodes_torch_env, .timeout = 120)
{
	static const char *const prog[] = {"torchenv", NULL};
	char port[16] = "", run[16] = "";
	int i, p;

	p = start_root_path(&nodes[0], 2, 2, TOKEN, NULL, outprog(), prog);
	start_node_path(&nodes[1], 2, 1, 2, p, TOKEN, NULL, outprog(), prog);
	for (i = 0; i < 2; i++)
		finish(&nodes[i]);
	for (i = 0; i < 2; i++) {
		check_torchenv(&nodes[i], 2, i, 2, port, run);
		cleanup(&nodes[i]);
	}
}

/* --log-dir: each rank's stdout and stderr byte for byte in DIR/rank.R.*
 * (DIR made, with its parents), the same lines on the launcher's outputs;
 * --log-only: the files alone. */
static void run_log_dir(int only)
{
	static struct run r;
	char dir[64] = "/tmp/shmcoll-logs.XXXXXX", sub[128], name[192];
	struct args a = {.n = 0};
	size_t olen, elen, len;
	char *out, *err, *f;
	int rank, k;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(sub, sizeof(sub), "%s/a/b", dir);
	arg(&a, launcher());
	arg(&a, "-n");
	arg(&a, "3");
	arg(&a, "--log-dir");
	arg(&a, sub);
	if (only)
		arg(&a, "--log-only");
	arg(&a, outprog());
	arg(&a, "lines");
	arg(&a, "40");
	arg(&a, "3000");
	arg(&a, "0");
	run_argv(&r, a.v);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%.2000s", exit_code(&r), r.err);
	out = slurp_all(&r, "stdout", &olen);
	err = slurp_all(&r, "stderr", &elen);
	if (only) {
		cr_assert_eq(olen + elen, 0,
		             "--log-only, yet the ranks' output reached the "
		             "launcher's:\n%.300s\n%.300s",
		             out, err);
	} else {
		check_lines(out, olen, 3, -1, 40, 'o', NULL, "stdout");
		check_lines(err, elen, 3, -1, 40, 'e', NULL, "stderr");
	}
	free(out);
	free(err);
	for (rank = 0; rank < 3; rank++) {
		for (k = 0; k < 2; k++) {
			snprintf(name, sizeof(name), "%s/rank.%d.%s", sub, rank,
			         k ? "stderr" : "stdout");
			f = slurp_path(name, &len);
			/* Byte for byte: the last line has no newline, and gets none. */
			cr_assert(len > 0 && f[len - 1] != '\n', "%s ends in a newline", name);
			f = realloc(f, len + 2);
			f[len++] = '\n';
			check_lines(f, len, 3, rank, 40, k ? 'e' : 'o', NULL, name);
			free(f);
			unlink(name);
		}
	}
	snprintf(name, sizeof(name), "%s/a", dir);
	cr_assert_eq(rmdir(sub), 0, "%s holds more than the ranks' logs", sub);
	rmdir(name);
	rmdir(dir);
	cleanup(&r);
}

Test(launcher, log_dir, .timeout = 60)
{
	run_log_dir(0);
}

Test(launcher, log_only, .timeout = 60)
{
	run_log_dir(1);
}

/* A rank that leaves a process behind which holds its stdout (keep) or has
 * closed it: the grandchild's line is passed on, the launcher stops it once
 * the ranks are gone, and exits 0. */
static void run_grandchild(int keep)
{
	static struct run r;
	char *argv[] = {
	    (char *)launcher(),
	    "-n",
	    "2",
	    "/bin/sh",
	    "-c",
	    keep ? "m=\"$SHMCOLL_TEST_PIDDIR/gc.$SHMCOLL_RANK\"; "
	           "sh -c 'echo \"grandchild $SHMCOLL_RANK\"; echo $$ > \"$1.tmp\"; "
	           "mv \"$1.tmp\" \"$1\"; exec sleep 1000' sh \"$m\" & "
	           "while [ ! -e \"$m\" ]; do sleep 0.01; done; echo \"rank $SHMCOLL_RANK\""
	         : "m=\"$SHMCOLL_TEST_PIDDIR/gc.$SHMCOLL_RANK\"; "
	           "sh -c 'echo \"grandchild $SHMCOLL_RANK\"; exec >&- 2>&-; "
	           "echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; exec sleep 1000' sh "
	           "\"$m\" & "
	           "while [ ! -e \"$m\" ]; do sleep 0.01; done; echo \"rank $SHMCOLL_RANK\"",
	    NULL};
	pid_t gc[2];
	int i;

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	for (i = 0; i < 2; i++) {
		char want[32];

		cr_assert(read_mark(&r, "gc", i, &gc[i]), "rank %d's grandchild left no mark", i);
		cr_assert(!proc_alive(gc[i]), "rank %d's grandchild (pid %ld) outlived the job", i,
		          (long)gc[i]);
		snprintf(want, sizeof(want), "grandchild %d\n", i);
		cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
		snprintf(want, sizeof(want), "rank %d\n", i);
		cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
	}
	cr_assert_eq(count_lines(r.out), 4, "stdout:\n%s", r.out);
	measured("a grandchild that %s its stdout: the launcher exited after %.3f s",
	         keep ? "keeps" : "closed", r.secs);
	cleanup(&r);
}

Test(launcher, grandchild_keeps_pipe, .timeout = 60)
{
	run_grandchild(1);
}

Test(launcher, grandchild_closes_pipe, .timeout = 60)
{
	run_grandchild(0);
}

/* A process outside the job (this test) holds a rank's stdout pipe: once the
 * job is over the launcher stops reading it after a bounded drain, passes on
 * all that was written before (a last line without newline gets one) and
 * exits. */
Test(launcher, pipe_held_outside, .timeout = 60)
{
	static struct run r;
	char *argv[] = {(char *)launcher(),
	                "-n",
	                "2",
	                "/bin/sh",
	                "-c",
	                "echo $$ > \"$SHMCOLL_TEST_PIDDIR/holder.$SHMCOLL_RANK\"; "
	                "while [ ! -e \"$SHMCOLL_TEST_PIDDIR/go\" ]; do sleep 0.01; done; "
	                "echo \"rank $SHMCOLL_RANK ends\"; printf 'no newline %s' $SHMCOLL_RANK",
	                NULL};
	char path[64], go_path[128];
	pid_t pid[2];
	int fd[2], i;

	spawn(&r, argv);
	wait_marks(&r, "holder", 2, pid);
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%ld/fd/1", (long)pid[i]);
		fd[i] = open(path, O_WRONLY | O_CLOEXEC);
		cr_assert(fd[i] >= 0, "open %s: %s", path, strerror(errno));
		dprintf(fd[i], "from outside %d\n", i);
	}
	path_in(go_path, sizeof(go_path), &r, "go");
	close(open(go_path, O_WRONLY | O_CREAT, 0600));
	finish(&r);
	for (i = 0; i < 2; i++)
		close(fd[i]);
	measured("ranks' pipes held outside the job: the launcher exited after %.3f s", r.secs);
	cr_assert_eq(exit_code(&r), 0, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert_eq(count_lines(r.out), 6, "stdout:\n%s", r.out);
	for (i = 0; i < 2; i++) {
		char want[64];

		snprintf(want, sizeof(want), "from outside %d\n", i);
		cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
		snprintf(want, sizeof(want), "rank %d ends\n", i);
		cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
		snprintf(want, sizeof(want), "no newline %d\n", i);
		cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
	}
	cleanup(&r);
}

/* Ranks 0 and 2 write a line and wait; once they have, rank 1 writes a line
 * and part of one to stderr and kills itself. Everything written comes out,
 * rank 1's last words before the launcher's report of its death. */
Test(launcher, output_of_killed_rank, .timeout = 60)
{
	static struct run r;
	char *argv[] = {
	    (char *)launcher(),
	    "--tag-output",
	    "-n",
	    "3",
	    "/bin/sh",
	    "-c",
	    "d=\"$SHMCOLL_TEST_PIDDIR\"; echo \"hello from $SHMCOLL_RANK\"; "
	    "if [ \"$SHMCOLL_RANK\" != 1 ]; then : > \"$d/said.$SHMCOLL_RANK\"; "
	    "exec sleep 1000; fi; "
	    "while [ ! -e \"$d/said.0\" ] || [ ! -e \"$d/said.2\" ]; do sleep 0.01; done; "
	    "echo 'last words' >&2; printf 'cut sho' >&2; kill -9 $$",
	    NULL};
	const char *words, *cut, *report;
	int i;

	run_argv(&r, argv);
	cr_assert_eq(exit_code(&r), 137, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	for (i = 0; i < 3; i++) {
		char want[64];

		snprintf(want, sizeof(want), "[%d]<stdout>: hello from %d\n", i, i);
		cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
	}
	words = strstr(r.err, "[1]<stderr>: last words\n");
	cut = strstr(r.err, "[1]<stderr>: cut sho\n");
	report = strstr(r.err, "shmcoll-run: rank 1 (pid");
	cr_assert(words && cut && report, "stderr:\n%s", r.err);
	cr_assert(words < cut && cut < report, "rank 1's last words come after its death:\n%s",
	          r.err);
	cleanup(&r);
}

/* The launcher's stdout is a pipe nobody reads any more: the ranks writing to
 * it see EPIPE (SIGPIPE) as they would writing to it themselves, and the
 * launcher reports and exits; it is not killed by SIGPIPE. */
Test(launcher, stdout_reader_gone, .timeout = 60)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "2", "/bin/sh", "-c", "exec yes", NULL};
	char errpath[128];
	int p[2], fe, ws;

	memset(&r, 0, sizeof(r));
	strcpy(r.dir, "/tmp/shmcoll-launcher.XXXXXX");
	cr_assert_not_null(mkdtemp(r.dir));
	path_in(errpath, sizeof(errpath), &r, "stderr");
	fe = open(errpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
	cr_assert(fe >= 0 && pipe(p) == 0);
	r.start = now_s();
	r.pid = fork();
	cr_assert(r.pid >= 0);
	if (r.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(p[1], STDOUT_FILENO) < 0 || dup2(fe, STDERR_FILENO) < 0)
			_exit(126);
		close(p[0]);
		execv(argv[0], argv);
		_exit(126);
	}
	close(p[1]);
	close(fe);
	/* Read some of it, then go. */
	{
		char buf[4096];

		cr_assert_gt(read(p[0], buf, sizeof(buf)), 0);
	}
	close(p[0]);
	finish(&r);
	ws = r.status;
	cr_assert(WIFEXITED(ws), "the launcher was killed by signal %d",
	          WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	cr_assert_eq(WEXITSTATUS(ws), 128 + SIGPIPE, "exit %d; stderr:\n%s", WEXITSTATUS(ws),
	             r.err);
	cr_assert(strstr(r.err, "killed by signal 13 (SIGPIPE"), "stderr:\n%s", r.err);
	cleanup(&r);
}
