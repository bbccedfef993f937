/* test_launcher.c - shmcoll-run from the outside: usage, the environment it
 * gives the ranks, exit status rules, stopping a failed job, signal forwarding,
 * that no rank process, no process a rank started and no arena outlives a job,
 * and --cleanup. Times are measured and printed, and bounded only to catch a
 * hang: no test depends on how fast a loaded machine is. */
#include <criterion/criterion.h>

#include <sched.h>

#include "shm/arena.h"
#include "shm/name.h"
#include "tests/harness.h"

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
 * launcher removes the arena they leave. The arena is made here, so this
 * does not depend on the library. */
Test(launcher, arena_removed)
{
	static struct run r;
	char *argv[] = {(char *)launcher(), "-n", "2", (char *)rankprog(), "sleep", NULL};
	char job[128], name[SHMCOLL_NAME_MAX];
	pid_t pgid;
	int fd;

	spawn(&r, argv);
	wait_started(&r, 2, &pgid, job, sizeof(job));
	cr_assert_eq(shmcoll__arena_name(name, sizeof(name), job), 0);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0, "shm_open %s: %s", name, strerror(errno));
	close(fd);
	cr_assert_eq(arenas_of(job), 1);
	cr_assert_eq(kill(-pgid, SIGKILL), 0);
	finish(&r);
	cr_assert_eq(exit_code(&r), 137, "exit %d; stderr:\n%s", exit_code(&r), r.err);
	cr_assert(strstr(r.err, "killed by signal 9"), "stderr:\n%s", r.err);
	check_gone(&r, 2, job, sizeof(job));
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
