/* launcher.c - shmcoll-run: starts the P ranks of one job on this node with the
 * environment shmcoll_init() reads, forwards signals to them, stops the job when a
 * rank fails, and removes the job's arena once every rank and every process they
 * left is gone; --cleanup removes the arenas of dead jobs. */
#include "shm/arena.h"
#include "shm/name.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG                  "shmcoll-run"
#define VERSION               "0.1.0"
#define MAX_RANKS             4096
#define KILL_GRACE_MS         500 /* SIGTERM -> SIGKILL: the others are gone within a second */
#define KILL_AGAIN_MS         100 /* then SIGKILL again for whatever appeared meanwhile */
#define EXIT_FAILURE_LAUNCHER 1
#define EXIT_USAGE            2
#define EXIT_EXEC             127

struct job {
	int size;
	pid_t *pids; /* pids[i] is rank i until it is reaped, then 0 */
	int started; /* ranks forked */
	int alive;   /* ranks forked and not yet reaped */
	pid_t pgid;  /* the ranks' process group (rank 0's pid), 0 before it */
	pid_t launcher;
	char id[64];      /* SHMCOLL_JOB */
	char **argv;      /* PROGRAM and its arguments */
	int status;       /* exit status of the first failure, -1 while none */
	int stopping;     /* the launcher has begun stopping the ranks (and what they left) */
	int got_sig;      /* SIGINT or SIGTERM the launcher received, 0 if none */
	int kill_pending; /* SIGKILL is due at kill_at */
	struct timespec kill_at;
	int bind;  /* pin rank i to cpus[i] */
	int *cpus; /* the launcher's allowed CPUs, in order */
};

enum { BIND_AUTO, BIND_CORE, BIND_NONE };

/* The CPUs the launcher may run on, in increasing order; returns how many. */
static int allowed_cpus(int **out)
{
	cpu_set_t set;
	int i, n = 0;

	*out = NULL;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 0;
	*out = calloc((size_t)CPU_COUNT(&set) + 1, sizeof(int));
	if (!*out)
		return 0;
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			(*out)[n++] = i;
	return n;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: " PROG " -n P [OPTIONS] [--] PROGRAM [ARGS...]\n"
	        "\n"
	        "Start P ranks of PROGRAM on this node as one shmcoll job. Every rank gets the\n"
	        "environment shmcoll_init() reads, signals sent to the launcher are passed on\n"
	        "to the ranks, and when one rank fails the others are stopped.\n"
	        "\n"
	        "Options:\n"
	        "  -n, --np P          number of ranks, 1 to %d (required)\n"
	        "      --timeout-ms N  export SHMCOLL_TIMEOUT_MS=N, the ranks' default wait\n"
	        "                      timeout in milliseconds\n"
	        "      --bind WHAT     core: pin rank i to the i-th CPU the launcher may use\n"
	        "                      (fails if there are fewer CPUs than ranks); none: do\n"
	        "                      not pin; auto (default): core when the ranks fit the\n"
	        "                      CPUs, else none. Pinned ranks spin-wait far better\n"
	        "                      than ones the scheduler moves (mpirun --bind-to core)\n"
	        "      --cleanup       run no job: remove this user's arenas that dead jobs\n"
	        "                      left in /dev/shm (those whose creating process is gone,\n"
	        "                      and those that never got a header and are over a minute\n"
	        "                      old), print one line per arena seen, and exit 0\n"
	        "  -h, --help          show this help and exit\n"
	        "      --version       show the version and exit\n"
	        "  --                  end of options; PROGRAM follows\n"
	        "\n"
	        "Environment of rank i:\n"
	        "  SHMCOLL_RANK=i, SHMCOLL_LOCAL_RANK=i     rank in the job, 0 to P-1\n"
	        "  SHMCOLL_SIZE=P, SHMCOLL_LOCAL_SIZE=P     number of ranks\n"
	        "  SHMCOLL_JOB=j<pid>-<16 hex digits>       job id, unique to this run\n"
	        "  SHMCOLL_TIMEOUT_MS=N                     only with --timeout-ms\n"
	        "\n"
	        "The ranks run in a process group of their own (so they should not read from\n"
	        "a terminal) and are killed if the launcher dies. SIGHUP and SIGQUIT are\n"
	        "forwarded to them. SIGINT and SIGTERM are forwarded too, and the ranks still\n"
	        "running %d ms later get SIGKILL; a second SIGINT or SIGTERM sends SIGKILL at\n"
	        "once. When a rank exits non-zero or is killed by a signal, the launcher names\n"
	        "it and the cause on stderr, sends SIGTERM to the other ranks and SIGKILL %d ms\n"
	        "later. Processes the ranks started are the job's too: the launcher waits for\n"
	        "them, and stops those still running once every rank is gone (SIGTERM, then\n"
	        "SIGKILL). Then it removes the job's shared-memory arena if one is left.\n"
	        "\n"
	        "Exit status:\n"
	        "  0        every rank exited 0\n"
	        "  N        the first failing rank exited N (127: PROGRAM could not be run)\n"
	        "  128+S    the first failing rank was killed by signal S, or the launcher\n"
	        "           received SIGINT/SIGTERM S and stopped the job\n"
	        "  1        the launcher itself failed\n"
	        "  2        bad usage\n"
	        "\n"
	        "Example:\n"
	        "  " PROG " -n 4 --timeout-ms 10000 build/examples/demo\n",
	        MAX_RANKS, KILL_GRACE_MS, KILL_GRACE_MS);
}

/* Prints the problem and a pointer to --help; returns the usage exit status. */
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" PROG " --help' for more information.\n");
	return EXIT_USAGE;
}

/* Parses a whole decimal int in [lo, hi]; returns 0 or -EINVAL. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* "j<launcher pid>-<64 random bits>": unique per run and not guessable, so no
 * other user's job can pre-create or attach to this job's arena by name. */
static int make_job_id(struct job *job)
{
	uint64_t r;
	unsigned char *p = (unsigned char *)&r;
	size_t got = 0;

	while (got < sizeof(r)) {
		ssize_t n = getrandom(p + got, sizeof(r) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	snprintf(job->id, sizeof(job->id), "j%ld-%016" PRIx64, (long)job->launcher, r);
	return 0;
}

static void now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

/* The launcher's children: the ranks, and the processes they started that
 * were adopted when their parent died (the launcher is a child subreaper).
 * Fills pids and their process groups; returns how many (at most max). */
static int children(const struct job *job, pid_t *pids, pid_t *pgrps, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while (n < max && (e = readdir(d)) != NULL) {
		char path[64], buf[512], *p, *end;
		long pid = strtol(e->d_name, &end, 10), ppid, pgrp;
		FILE *f;
		int ok;

		if (*end || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		ok = fgets(buf, sizeof(buf), f) != NULL;
		fclose(f);
		/* The command name may hold anything: parse after its last ')'. */
		p = ok ? strrchr(buf, ')') : NULL;
		if (!p || sscanf(p + 1, " %*c %ld %ld", &ppid, &pgrp) != 2 || ppid != job->launcher)
			continue;
		pids[n] = (pid_t)pid;
		pgrps[n++] = (pid_t)pgrp;
	}
	closedir(d);
	return n;
}

/* Signals the job: the ranks' group, and every child of the launcher outside
 * it. The group only while one of its members is a child not yet reaped: that
 * pid keeps the group id from being reused, so the signal cannot reach
 * strangers; a child is signalled by its pid, which cannot be reused before
 * the launcher reaps it. */
static void signal_job(const struct job *job, int sig)
{
	enum { MAX_SCAN = 4096 };
	static pid_t pids[MAX_SCAN], pgrps[MAX_SCAN];
	int i, n = children(job, pids, pgrps, MAX_SCAN), grouped = job->alive > 0;

	for (i = 0; i < n; i++)
		grouped = grouped || (job->pgid > 0 && pgrps[i] == job->pgid);
	if (job->pgid > 0 && grouped)
		kill(-job->pgid, sig);
	for (i = 0; i < n; i++)
		if (!grouped || pgrps[i] != job->pgid)
			kill(pids[i], sig);
}

static void arm_kill(struct job *job, long ms)
{
	now(&job->kill_at);
	job->kill_at.tv_nsec += ms * 1000000L;
	job->kill_at.tv_sec += job->kill_at.tv_nsec / 1000000000L;
	job->kill_at.tv_nsec %= 1000000000L;
	job->kill_pending = 1;
}

/* SIGTERM now, SIGKILL KILL_GRACE_MS later for whatever ignored it. */
static void stop_job(struct job *job)
{
	if (job->stopping)
		return;
	job->stopping = 1;
	signal_job(job, SIGTERM);
	arm_kill(job, KILL_GRACE_MS);
}

/* Runs in the child: joins the ranks' group, ties its life to the launcher and
 * execs PROGRAM. Only rank-local state is touched; never returns. */
static void exec_rank(const struct job *job, int rank, const sigset_t *origmask)
{
	char buf[16];
	int err;

	if (setpgid(0, rank == 0 ? 0 : job->pgid) < 0) {
		dprintf(STDERR_FILENO, PROG ": rank %d cannot join the job's process group: %s\n",
		        rank, strerror(errno));
		_exit(EXIT_EXEC);
	}
	/* Die with the launcher; if it is already gone, the signal was never armed. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != job->launcher)
		_exit(EXIT_EXEC);
	snprintf(buf, sizeof(buf), "%d", rank);
	if (setenv("SHMCOLL_RANK", buf, 1) < 0 || setenv("SHMCOLL_LOCAL_RANK", buf, 1) < 0) {
		dprintf(STDERR_FILENO, PROG ": rank %d: cannot set its environment: %s\n", rank,
		        strerror(errno));
		_exit(EXIT_EXEC);
	}
	if (job->bind) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(job->cpus[rank], &one);
		if (sched_setaffinity(0, sizeof(one), &one) < 0) {
			dprintf(STDERR_FILENO, PROG ": rank %d cannot bind to CPU %d: %s\n", rank,
			        job->cpus[rank], strerror(errno));
			_exit(EXIT_EXEC);
		}
	}
	sigprocmask(SIG_SETMASK, origmask, NULL);
	execvp(job->argv[0], job->argv);
	err = errno;
	dprintf(STDERR_FILENO, PROG ": cannot run %s: %s\n", job->argv[0], strerror(err));
	_exit(EXIT_EXEC);
}

static int start_ranks(struct job *job, const sigset_t *origmask)
{
	int i;

	for (i = 0; i < job->size; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, PROG ": cannot start rank %d: %s\n", i, strerror(errno));
			return -1;
		}
		if (pid == 0)
			exec_rank(job, i, origmask);
		/* Also set here, so the group exists before the next rank joins it and
		 * before any signal is forwarded. EACCES: the child has exec'd, and it
		 * joined the group itself first. */
		if (i == 0)
			job->pgid = pid;
		setpgid(pid, job->pgid);
		job->pids[i] = pid;
		job->started++;
		job->alive++;
	}
	return 0;
}

/* Accounts for a child that ended: a rank (a failure is reported and stops
 * the job) or a process a rank started (not reported). */
static void reap(struct job *job, pid_t pid, int ws)
{
	const char *abbrev;
	int rank, code, sig;

	for (rank = 0; rank < job->started; rank++)
		if (job->pids[rank] == pid)
			break;
	if (rank == job->started)
		return;
	job->pids[rank] = 0;
	job->alive--;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return;
	/* Once the launcher is stopping the job, or has passed on SIGINT/SIGTERM,
	 * whatever dies was stopped by it: not a failure of its own. */
	if (job->stopping || job->got_sig) {
		stop_job(job);
		return;
	}
	if (WIFEXITED(ws)) {
		code = WEXITSTATUS(ws);
		fprintf(stderr, PROG ": rank %d (pid %ld) exited with status %d\n", rank, (long)pid,
		        code);
	} else {
		sig = WTERMSIG(ws);
		code = 128 + sig;
		abbrev = sigabbrev_np(sig);
		fprintf(stderr, PROG ": rank %d (pid %ld) killed by signal %d (%s%s: %s)%s\n", rank,
		        (long)pid, sig, abbrev ? "SIG" : "", abbrev ? abbrev : "unnamed",
		        strsignal(sig), WCOREDUMP(ws) ? ", core dumped" : "");
	}
	job->status = code;
	stop_job(job);
}

/* Waits synchronously for SIGCHLD, the forwarded signals and the SIGKILL
 * deadline (with every one of them blocked there are no handlers at all),
 * until the launcher has no child left: no rank, and nothing a rank started. */
static void wait_job(struct job *job, const sigset_t *waitset)
{
	for (;;) {
		struct timespec t, left, *timeout = NULL;
		siginfo_t si;
		pid_t pid;
		int ws, sig;

		do {
			pid = waitpid(-1, &ws, WNOHANG);
			if (pid > 0)
				reap(job, pid, ws);
		} while (pid > 0 || (pid < 0 && errno == EINTR));
		if (pid < 0) {
			/* ECHILD: all gone (or reaped behind our back). */
			job->alive = 0;
			break;
		}
		/* Every rank is gone but something they started is not: the
		 * job is over, and so is that. */
		if (job->alive == 0)
			stop_job(job);
		if (job->kill_pending) {
			now(&t);
			left.tv_sec = job->kill_at.tv_sec - t.tv_sec;
			left.tv_nsec = job->kill_at.tv_nsec - t.tv_nsec;
			if (left.tv_nsec < 0) {
				left.tv_sec--;
				left.tv_nsec += 1000000000L;
			}
			if (left.tv_sec < 0) {
				/* Again until nothing is left: a process may have
				 * been started, or adopted, since the last round. */
				signal_job(job, SIGKILL);
				arm_kill(job, KILL_AGAIN_MS);
				continue;
			}
			timeout = &left;
		}
		sig = sigtimedwait(waitset, &si, timeout);
		if (sig < 0 || sig == SIGCHLD)
			continue;
		signal_job(job, sig);
		if (sig != SIGINT && sig != SIGTERM)
			continue;
		if (job->got_sig) {
			signal_job(job, SIGKILL);
			arm_kill(job, KILL_AGAIN_MS);
		} else {
			/* Forwarded: the ranks' own chance to stop; SIGKILL
			 * follows for those that do not, as after a failure. */
			job->got_sig = sig;
			job->stopping = 1;
			arm_kill(job, KILL_GRACE_MS);
		}
	}
}

/* A job whose ranks were all SIGKILLed never ran shmcoll_comm_destroy(). */
static void remove_arena(const struct job *job)
{
	char name[SHMCOLL_NAME_MAX];

	if (shmcoll__arena_name(name, sizeof(name), job->id) < 0)
		return;
	if (shm_unlink(name) < 0 && errno != ENOENT)
		fprintf(stderr, PROG ": cannot remove %s: %s\n", name, strerror(errno));
}

static void print_line(void *arg, const char *line)
{
	(void)arg;
	printf(PROG ": %s\n", line);
}

/* --cleanup: one line per arena of this user looked at, then a count. */
static int sweep(void)
{
	int n = shmcoll__arena_sweep(print_line, NULL);

	if (n < 0) {
		fprintf(stderr, PROG ": cannot sweep /dev/shm: %s\n", strerror(-n));
		return EXIT_FAILURE_LAUNCHER;
	}
	printf(PROG ": removed %d stale arena%s\n", n, n == 1 ? "" : "s");
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"np", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"timeout-ms", required_argument, NULL, 'T'},
	    {"bind", required_argument, NULL, 'B'},
	    {"cleanup", no_argument, NULL, 'C'},
	    {NULL, 0, NULL, 0},
	};
	struct job job = {.status = -1};
	const char *timeout_ms = NULL;
	sigset_t waitset, origmask;
	struct sigaction sa = {.sa_handler = SIG_DFL};
	char buf[32];
	int opt, tmo, err, bind = BIND_AUTO, ncpus, cleanup = 0;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:hn:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			if (parse_int(optarg, 1, MAX_RANKS, &job.size) < 0)
				return usage_error(
				    "-n wants a number of ranks from 1 to %d, not '%s'", MAX_RANKS,
				    optarg);
			break;
		case 'T':
			if (parse_int(optarg, INT_MIN, INT_MAX, &tmo) < 0)
				return usage_error("--timeout-ms wants an integer, not '%s'",
				                   optarg);
			timeout_ms = optarg;
			break;
		case 'B':
			if (!strcmp(optarg, "core"))
				bind = BIND_CORE;
			else if (!strcmp(optarg, "none"))
				bind = BIND_NONE;
			else if (!strcmp(optarg, "auto"))
				bind = BIND_AUTO;
			else
				return usage_error("--bind wants core, none or auto, not '%s'",
				                   optarg);
			break;
		case 'C':
			cleanup = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf(PROG " " VERSION "\n");
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (cleanup) {
		if (job.size || timeout_ms || optind < argc)
			return usage_error("--cleanup runs no job: it takes no -n and no PROGRAM");
		return sweep();
	}
	if (job.size == 0)
		return usage_error("the number of ranks is missing (-n P)");
	if (optind >= argc)
		return usage_error("no PROGRAM to run");
	job.argv = argv + optind;
	job.launcher = getpid();
	ncpus = allowed_cpus(&job.cpus);
	if (bind == BIND_CORE && ncpus < job.size) {
		fprintf(stderr, PROG ": --bind core: %d ranks but only %d CPUs allowed\n", job.size,
		        ncpus);
		return EXIT_USAGE;
	}
	job.bind = bind != BIND_NONE && ncpus >= job.size;

	err = make_job_id(&job);
	if (err < 0) {
		fprintf(stderr, PROG ": cannot make a job id: %s\n", strerror(-err));
		return EXIT_FAILURE_LAUNCHER;
	}
	snprintf(buf, sizeof(buf), "%d", job.size);
	if (setenv("SHMCOLL_SIZE", buf, 1) < 0 || setenv("SHMCOLL_LOCAL_SIZE", buf, 1) < 0 ||
	    setenv("SHMCOLL_JOB", job.id, 1) < 0 ||
	    (timeout_ms && setenv("SHMCOLL_TIMEOUT_MS", timeout_ms, 1) < 0)) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		return EXIT_FAILURE_LAUNCHER;
	}
	job.pids = calloc((size_t)job.size, sizeof(*job.pids));
	if (!job.pids) {
		fprintf(stderr, PROG ": out of memory\n");
		return EXIT_FAILURE_LAUNCHER;
	}

	/* An inherited SIG_IGN for SIGCHLD would reap the ranks behind our back. */
	sigaction(SIGCHLD, &sa, NULL);
	/* Processes the ranks start and leave behind become our children, so
	 * none outlives the job (best effort: the ranks' group is signalled
	 * anyway while one of them lives). */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Blocked before the first fork, so no signal is lost while ranks start;
	 * each rank restores origmask before exec. */
	sigemptyset(&waitset);
	sigaddset(&waitset, SIGCHLD);
	sigaddset(&waitset, SIGINT);
	sigaddset(&waitset, SIGTERM);
	sigaddset(&waitset, SIGHUP);
	sigaddset(&waitset, SIGQUIT);
	sigprocmask(SIG_BLOCK, &waitset, &origmask);

	if (start_ranks(&job, &origmask) < 0) {
		job.status = EXIT_FAILURE_LAUNCHER;
		stop_job(&job);
	}
	wait_job(&job, &waitset);
	remove_arena(&job);
	free(job.pids);
	free(job.cpus);

	if (job.got_sig)
		return 128 + job.got_sig;
	return job.status < 0 ? 0 : job.status;
}
