/* test_init_env.c - shmcoll_init under the environments of torchrun, Open MPI, MPICH (Hydra)
 * and Slurm, faked: forked ranks with one launcher's variables set (shmcoll-run's unset) each
 * call shmcoll_init, check their rank and size, allreduce and destroy. Two jobs at once must
 * get arenas of their own; bad values fail with -EINVAL (a job over several nodes with
 * -ENOTSUP) and a message naming the variable; shmcoll-run's variables win over the others,
 * and the launchers rank torchrun, Open MPI, MPICH, Slurm. No arena of these launchers'
 * kinds may outlive a test.
 *
 * Nothing here waits on a clock: the ranks and the test meet through pipes, and the test
 * learns that a job's arena exists from inotify on /dev/shm. A rank that cannot meet its
 * peers (two ranks deriving different job names) fails after SHMCOLL_TIMEOUT_MS, set low for
 * the ranks so that such a bug fails a test instead of hanging it. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/name.h"
#include "shmcoll.h"

#define MAX_JOBS 4
/* The bound on a rank's wait for its peers: only reached by a bug. */
#define RANK_TIMEOUT_MS "30000"

/* Every variable shmcoll_init reads to find a launcher, cleared before each test. */
static const char *const launcher_vars[] = {"SHMCOLL_RANK",
                                            "SHMCOLL_SIZE",
                                            "SHMCOLL_JOB",
                                            "SHMCOLL_NNODES",
                                            "RANK",
                                            "WORLD_SIZE",
                                            "LOCAL_RANK",
                                            "LOCAL_WORLD_SIZE",
                                            "MASTER_ADDR",
                                            "MASTER_PORT",
                                            "TORCHELASTIC_RUN_ID",
                                            "TORCHELASTIC_RESTART_COUNT",
                                            "OMPI_COMM_WORLD_RANK",
                                            "OMPI_COMM_WORLD_SIZE",
                                            "OMPI_COMM_WORLD_LOCAL_RANK",
                                            "OMPI_COMM_WORLD_LOCAL_SIZE",
                                            "OMPI_MCA_ess_base_jobid",
                                            "PMIX_NAMESPACE",
                                            "OMPI_MCA_orte_precondition_transports",
                                            "OMPI_MCA_orte_hnp_uri",
                                            "PMI_RANK",
                                            "PMI_SIZE",
                                            "PMI_FD",
                                            "PMI_PORT",
                                            "PMI_JOBID",
                                            "MPI_LOCALRANKID",
                                            "MPI_LOCALNRANKS",
                                            "SLURM_PROCID",
                                            "SLURM_NTASKS",
                                            "SLURM_LOCALID",
                                            "SLURM_JOB_ID",
                                            "SLURM_STEP_ID",
                                            "SLURM_STEP_NUM_NODES"};

/* The job names' prefixes (launcher_env.c), as they show in the arenas' names. */
static const char *const tags[] = {"torchrun-", "ompi-", "mpich-", "slurm-"};

enum kind { TORCHRUN, OMPI, MPICH, SLURM };

/* One fake job. */
struct job {
	enum kind kind;
	int size;
	long long mult;  /* rank r contributes mult * (r + 1) */
	const char *id;  /* the launcher's job id (MPICH has none) */
	int step;        /* torchrun: the restart count; Slurm: the step */
	int no_local;    /* leave the local rank and size unset */
	int proxy;       /* MPICH: the ranks' parent is named hydra_pmi_proxy */
	int wrap;        /* each rank runs under a wrapper process of its own */
	const char *set; /* one more "NAME=value" for every rank, or NULL */
};

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
		unsetenv(launcher_vars[i]);
}

static void set_num(const char *name, long long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", v);
	setenv(name, buf, 1);
}

/* A job id unique to this process and k, so neither a concurrent run of this suite nor a
 * stale arena of an earlier one can meet it. */
static const char *unique_id(int k)
{
	static char ids[8][32];

	snprintf(ids[k], sizeof(ids[k]), "%ld%d", (long)getpid(), k);
	return ids[k];
}

static void set_job_env(const struct job *j, int r)
{
	clear_env();
	setenv("SHMCOLL_TIMEOUT_MS", RANK_TIMEOUT_MS, 1);
	switch (j->kind) {
	case TORCHRUN:
		set_num("RANK", r);
		set_num("WORLD_SIZE", j->size);
		if (!j->no_local) {
			set_num("LOCAL_RANK", r);
			set_num("LOCAL_WORLD_SIZE", j->size);
		}
		setenv("MASTER_ADDR", "127.0.0.1", 1);
		setenv("MASTER_PORT", "29500", 1);
		setenv("TORCHELASTIC_RUN_ID", j->id, 1);
		set_num("TORCHELASTIC_RESTART_COUNT", j->step);
		break;
	case OMPI:
		set_num("OMPI_COMM_WORLD_RANK", r);
		set_num("OMPI_COMM_WORLD_SIZE", j->size);
		if (!j->no_local) {
			set_num("OMPI_COMM_WORLD_LOCAL_RANK", r);
			set_num("OMPI_COMM_WORLD_LOCAL_SIZE", j->size);
		}
		setenv("OMPI_MCA_ess_base_jobid", j->id, 1);
		setenv("PMIX_NAMESPACE", j->id, 1);
		break;
	case MPICH:
		set_num("PMI_RANK", r);
		set_num("PMI_SIZE", j->size);
		set_num("PMI_FD", 5 + r); /* differs per rank, as Hydra's does */
		if (!j->no_local) {
			set_num("MPI_LOCALRANKID", r);
			set_num("MPI_LOCALNRANKS", j->size);
		}
		break;
	case SLURM:
		set_num("SLURM_PROCID", r);
		set_num("SLURM_NTASKS", j->size);
		if (!j->no_local)
			set_num("SLURM_LOCALID", r);
		setenv("SLURM_JOB_ID", j->id, 1);
		set_num("SLURM_STEP_ID", j->step);
		setenv("SLURM_STEP_NUM_NODES", "1", 1);
		break;
	}
	if (j->set)
		putenv((char *)j->set);
}

/* The names in /dev/shm of this user's arenas whose job names carry a launcher's tag. */
struct arenas {
	int n;
	char name[64][256];
};

static void list_arenas(struct arenas *a)
{
	char prefix[64], want[96];
	struct dirent *e;
	DIR *d;

	a->n = 0;
	cr_assert_eq(shmcoll__arena_prefix(prefix, sizeof(prefix)), 0);
	d = opendir("/dev/shm");
	cr_assert_not_null(d, "cannot list /dev/shm");
	while ((e = readdir(d)) && a->n < 64)
		for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
			snprintf(want, sizeof(want), "%s%s", prefix, tags[i]);
			if (strncmp(e->d_name, want, strlen(want)) == 0)
				snprintf(a->name[a->n++], sizeof(a->name[0]), "%s", e->d_name);
		}
	closedir(d);
}

/* How many of them were not there before (a stale one of a crashed run may be). The suite
 * runs its tests one at a time (--jobs 1, as meson runs it), so the new ones are the test's. */
static int new_arenas(const struct arenas *before)
{
	struct arenas now;
	int n = 0, k;

	list_arenas(&now);
	for (int i = 0; i < now.n; i++) {
		for (k = 0; k < before->n && strcmp(now.name[i], before->name[k]) != 0; k++)
			;
		n += k == before->n;
	}
	return n;
}

/* Exit codes of a rank. */
enum { RK_OK, RK_INIT = 10, RK_PLACE, RK_CALL, RK_SUM, RK_DESTROY, RK_GATE };

/* Blocks until every writer of fd has closed it. */
static int wait_eof(int fd)
{
	char c;
	ssize_t n;

	while ((n = read(fd, &c, 1)) > 0 || (n < 0 && errno == EINTR))
		;
	return n == 0 ? 0 : -1;
}

/* One rank: rank 0 joins at once, the others once the test closes the gate (so that every
 * job's rank 0 has made its arena before any job is complete and its name gone); each
 * reports on ready once shmcoll_init returned, and calls the allreduce once the test
 * closes go. */
static int rank_main(const struct job *j, int r, int gate, int ready, int go)
{
	long long in = j->mult * (r + 1), out = 0, want = j->mult * j->size * (j->size + 1) / 2;
	shmcoll_comm *c = NULL;
	int rc;

	if (r > 0 && wait_eof(gate) < 0)
		return RK_GATE;
	rc = shmcoll_init(&c);
	if (write(ready, "x", 1) != 1 || rc < 0) {
		fprintf(stderr, "rank %d of %s-like job %s: shmcoll_init: %d: %s\n", r,
		        tags[j->kind], j->id ? j->id : "-", rc, shmcoll_last_error(NULL));
		return RK_INIT;
	}
	if (shmcoll_comm_rank(c) != r || shmcoll_comm_size(c) != j->size)
		return RK_PLACE;
	if (wait_eof(go) < 0)
		return RK_GATE;
	if (shmcoll_allreduce(&in, &out, 1, SHMCOLL_INT64, SHMCOLL_SUM, c) < 0)
		return RK_CALL;
	if (out != want) {
		fprintf(stderr, "rank %d: allreduce gave %lld, not %lld\n", r, out, want);
		return RK_SUM;
	}
	return shmcoll_comm_destroy(c) < 0 ? RK_DESTROY : RK_OK;
}

/* The exit code a process's wait status means here: 100 + signal for a signal. */
static int code_of(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static int wait_code(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return 99;
	return code_of(status);
}

/* The pipes every process of a run shares: [0] read, [1] write. zero's write end is held by
 * the ranks 0 alone: its end of file tells the test that every rank 0 is gone. */
struct pipes {
	int gate[2], ready[2], go[2], zero[2];
};

/* In a launcher: keeps only the ends a rank (or its wrapper) uses. */
static void keep_rank_ends(const struct pipes *p)
{
	close(p->gate[1]);
	close(p->ready[0]);
	close(p->go[1]);
	close(p->zero[0]);
}

/* In a launcher or a wrapper once its children are forked: none of the ends. */
static void drop_rank_ends(const struct pipes *p)
{
	close(p->gate[0]);
	close(p->ready[1]);
	close(p->go[0]);
	close(p->zero[1]);
}

/* Rank r in a process of its own (under a wrapper process with j->wrap). */
static pid_t start_rank(const struct job *j, int r, const struct pipes *p)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	/* Not the launcher's name, which fork passed on. */
	prctl(PR_SET_NAME, j->wrap ? "sh" : "rank");
	set_job_env(j, r);
	if (r > 0)
		close(p->zero[1]);
	if (j->wrap) {
		pid_t inner = fork();

		if (inner == 0) {
			prctl(PR_SET_NAME, "rank");
			_exit(rank_main(j, r, p->gate[0], p->ready[1], p->go[0]));
		}
		drop_rank_ends(p);
		_exit(inner < 0 ? 98 : wait_code(inner));
	}
	_exit(rank_main(j, r, p->gate[0], p->ready[1], p->go[0]));
}

/* A job's launcher: a process that forks the ranks and exits with the first non-zero code
 * of theirs (0 when every rank exited 0). */
static pid_t start_job(const struct job *j, const struct pipes *p)
{
	pid_t pid = fork(), ranks[8];
	int code = 0, c;

	if (pid != 0)
		return pid;
	keep_rank_ends(p);
	if (j->proxy)
		prctl(PR_SET_NAME, "hydra_pmi_proxy");
	for (int r = 0; r < j->size; r++)
		ranks[r] = start_rank(j, r, p);
	drop_rank_ends(p);
	for (int r = 0; r < j->size; r++) {
		c = ranks[r] < 0 ? 97 : wait_code(ranks[r]);
		if (c && !code)
			code = c;
	}
	_exit(code);
}

/* Waits until n more tagged arenas than before exist, or a rank has reported or every
 * rank 0 is gone (which before the gate opens means a rank 0 failed). 0, or -1 for that. */
static int wait_arenas(int ino, const struct pipes *p, const struct arenas *before, int n)
{
	struct pollfd pf[3] = {{.fd = ino, .events = POLLIN},
	                       {.fd = p->ready[0], .events = POLLIN},
	                       {.fd = p->zero[0], .events = POLLIN}};
	char buf[4096];

	while (new_arenas(before) < n) {
		if (poll(pf, 3, -1) < 0) {
			cr_assert_eq(errno, EINTR, "poll: %s", strerror(errno));
			continue;
		}
		if (pf[1].revents || pf[2].revents)
			return -1;
		if (pf[0].revents && read(ino, buf, sizeof(buf)) < 0)
			cr_assert_eq(errno, EINTR, "inotify: %s", strerror(errno));
	}
	return 0;
}

/* Runs n jobs at once and checks that each made an arena of its own, that every rank of
 * every job passed, and that no arena is left. */
static void run_jobs(const struct job *jobs, int n)
{
	struct pipes p;
	pid_t pid[MAX_JOBS];
	struct arenas before;
	int ino, early, ranks = 0, got = 0, code;
	char c;

	ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	cr_assert_geq(ino, 0, "inotify_init1: %s", strerror(errno));
	cr_assert_geq(inotify_add_watch(ino, "/dev/shm", IN_CREATE | IN_MOVED_TO), 0,
	              "inotify on /dev/shm: %s", strerror(errno));
	cr_assert(pipe(p.gate) == 0 && pipe(p.ready) == 0 && pipe(p.go) == 0 && pipe(p.zero) == 0);
	list_arenas(&before);
	for (int k = 0; k < n; k++) {
		pid[k] = start_job(&jobs[k], &p);
		cr_assert_geq(pid[k], 0, "fork: %s", strerror(errno));
		ranks += jobs[k].size;
	}
	drop_rank_ends(&p);
	early = wait_arenas(ino, &p, &before, n);
	close(ino);
	close(p.zero[0]);
	close(p.gate[1]);
	while (got < ranks && read(p.ready[0], &c, 1) == 1)
		got++;
	close(p.go[1]);
	close(p.ready[0]);
	for (int k = 0; k < n; k++) {
		code = wait_code(pid[k]);
		cr_expect_eq(code, 0, "job %d (%s, id %s, step %d) failed: code %d", k,
		             tags[jobs[k].kind], jobs[k].id ? jobs[k].id : "-", jobs[k].step, code);
	}
	cr_expect_eq(early, 0, "a rank 0 returned before every job's arena was made");
	cr_expect_eq(got, ranks, "only %d of %d ranks returned from shmcoll_init", got, ranks);
	cr_assert_eq(new_arenas(&before), 0, "an arena was left in /dev/shm");
}

static void run_job(struct job j)
{
	run_jobs(&j, 1);
}

/* ---- one job per launcher ---- */

Test(init_env, torchrun)
{
	run_job((struct job){TORCHRUN, 3, 1, unique_id(0), 0, 0, 0, 0, NULL});
}

Test(init_env, torchrun_without_local_variables)
{
	run_job((struct job){TORCHRUN, 2, 1, unique_id(0), 0, 1, 0, 0, NULL});
}

Test(init_env, open_mpi)
{
	run_job((struct job){OMPI, 3, 1, unique_id(0), 0, 0, 0, 0, NULL});
}

Test(init_env, mpich_under_hydra_proxy)
{
	run_job((struct job){MPICH, 3, 1, NULL, 0, 0, 1, 0, NULL});
}

/* A rank started through a wrapper script: its parent is the wrapper, its grandparent the
 * proxy, which every rank of the job shares. */
Test(init_env, mpich_ranks_under_wrappers)
{
	run_job((struct job){MPICH, 2, 1, NULL, 0, 0, 1, 1, NULL});
}

/* No process named hydra_pmi_proxy above the ranks: their parent names the job. */
Test(init_env, mpich_without_proxy)
{
	run_job((struct job){MPICH, 2, 1, NULL, 0, 1, 0, 0, NULL});
}

Test(init_env, slurm)
{
	run_job((struct job){SLURM, 3, 1, unique_id(0), 0, 0, 0, 0, NULL});
}

/* ---- two jobs at once ---- */

Test(init_env, torchrun_two_jobs)
{
	struct job j[] = {{TORCHRUN, 2, 1, unique_id(0), 0, 0, 0, 0, NULL},
	                  {TORCHRUN, 2, 10, unique_id(1), 0, 0, 0, 0, NULL}};

	run_jobs(j, 2);
}

/* An agent's restart, while the ranks of the one before still hold their arena. */
Test(init_env, torchrun_two_restarts)
{
	struct job j[] = {{TORCHRUN, 2, 1, unique_id(0), 0, 0, 0, 0, NULL},
	                  {TORCHRUN, 2, 10, unique_id(0), 1, 0, 0, 0, NULL}};

	run_jobs(j, 2);
}

Test(init_env, open_mpi_two_jobs)
{
	struct job j[] = {{OMPI, 2, 1, unique_id(0), 0, 0, 0, 0, NULL},
	                  {OMPI, 2, 10, unique_id(1), 0, 0, 0, 0, NULL}};

	run_jobs(j, 2);
}

Test(init_env, mpich_two_jobs)
{
	struct job j[] = {{MPICH, 2, 1, NULL, 0, 0, 1, 0, NULL},
	                  {MPICH, 2, 10, NULL, 0, 0, 1, 1, NULL}};

	run_jobs(j, 2);
}

Test(init_env, slurm_two_steps_and_two_jobs)
{
	struct job j[] = {{SLURM, 2, 1, unique_id(0), 0, 0, 0, 0, NULL},
	                  {SLURM, 2, 10, unique_id(0), 1, 0, 0, 0, NULL},
	                  {SLURM, 2, 100, unique_id(1), 0, 0, 0, 0, NULL}};

	run_jobs(j, 3);
}

/* One job of each launcher at once, all with the same id. */
Test(init_env, four_launchers_at_once)
{
	struct job j[] = {{TORCHRUN, 2, 1, unique_id(0), 0, 0, 0, 0, NULL},
	                  {OMPI, 2, 10, unique_id(0), 0, 0, 0, 0, NULL},
	                  {MPICH, 2, 100, NULL, 0, 0, 1, 0, NULL},
	                  {SLURM, 2, 1000, unique_id(0), 0, 0, 0, 0, NULL}};

	run_jobs(j, 4);
}

/* ---- precedence ---- */

/* A torchrun job whose ranks also carry junk of every lower launcher: torchrun's wins. */
Test(init_env, torchrun_before_the_others)
{
	run_job((struct job){TORCHRUN, 2, 1, unique_id(0), 0, 0, 0, 0, "OMPI_COMM_WORLD_RANK=x"});
}

Test(init_env, open_mpi_before_mpich)
{
	run_job((struct job){OMPI, 2, 1, unique_id(0), 0, 0, 0, 0, "PMI_RANK=x"});
}

Test(init_env, mpich_before_slurm)
{
	run_job((struct job){MPICH, 2, 1, NULL, 0, 0, 1, 0, "SLURM_PROCID=x"});
}

/* shmcoll_init in this process, expecting it to fail with rc and a message holding each of
 * the words; no arena may be made. */
static void expect_fail(int rc, const char *word1, const char *word2)
{
	shmcoll_comm *c = (shmcoll_comm *)&c;
	struct arenas before;
	const char *msg;
	int got;

	list_arenas(&before);
	got = shmcoll_init(&c);
	msg = shmcoll_last_error(NULL);

	cr_assert_eq(got, rc, "shmcoll_init gave %d (%s), not %d", got, msg, rc);
	cr_assert_null(c);
	cr_assert(strstr(msg, "shmcoll_init") && strstr(msg, word1) &&
	              (!word2 || strstr(msg, word2)),
	          "the message \"%s\" does not name %s%s%s", msg, word1, word2 ? " and " : "",
	          word2 ? word2 : "");
	cr_assert_eq(new_arenas(&before), 0);
}

/* shmcoll_init in this process, expecting a job of one rank, checked with an allreduce. */
static void expect_solo(void)
{
	shmcoll_comm *c = NULL;
	long long in = 7, out = 0;
	int rc = shmcoll_init(&c);

	cr_assert_eq(rc, 0, "shmcoll_init: %d: %s", rc, shmcoll_last_error(NULL));
	cr_assert_eq(shmcoll_comm_rank(c), 0);
	cr_assert_eq(shmcoll_comm_size(c), 1);
	cr_assert_eq(shmcoll_allreduce(&in, &out, 1, SHMCOLL_INT64, SHMCOLL_SUM, c), 0);
	cr_assert_eq(out, 7);
	cr_assert_eq(shmcoll_comm_destroy(c), 0);
}

/* shmcoll-run's variables win over a torchrun environment that would fail. */
Test(init_env, shmcoll_run_before_torchrun)
{
	char job[64];
	struct arenas before;

	list_arenas(&before);
	clear_env();
	snprintf(job, sizeof(job), "init-env-%ld", (long)getpid());
	setenv("SHMCOLL_RANK", "0", 1);
	setenv("SHMCOLL_SIZE", "1", 1);
	setenv("SHMCOLL_JOB", job, 1);
	setenv("RANK", "5", 1);
	setenv("WORLD_SIZE", "2", 1);
	expect_solo();
	unsetenv("SHMCOLL_JOB");
	expect_fail(-EINVAL, "SHMCOLL_JOB", NULL);
	cr_assert_eq(new_arenas(&before), 0);
}

Test(init_env, plain_run_is_one_rank)
{
	clear_env();
	expect_solo();
	/* An allocation's shell (salloc, sbatch) without a task of a step. */
	setenv("SLURM_NTASKS", "4", 1);
	setenv("SLURM_JOB_ID", "12", 1);
	expect_solo();
	/* A batch script's own process: a rank, but no step. */
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_LOCALID", "0", 1);
	expect_solo();
}

/* Each launcher's variables as its rank 0 of 2 on one node gets them, valid. */
static void torchrun_env(void)
{
	clear_env();
	setenv("RANK", "0", 1);
	setenv("WORLD_SIZE", "2", 1);
	setenv("LOCAL_RANK", "0", 1);
	setenv("LOCAL_WORLD_SIZE", "2", 1);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	setenv("MASTER_PORT", "29500", 1);
}

static void ompi_env(void)
{
	clear_env();
	setenv("OMPI_COMM_WORLD_RANK", "0", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
	setenv("OMPI_MCA_ess_base_jobid", "1234", 1);
}

static void mpich_env(void)
{
	clear_env();
	setenv("PMI_RANK", "0", 1);
	setenv("PMI_SIZE", "2", 1);
}

static void slurm_env(void)
{
	clear_env();
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_NTASKS", "2", 1);
	setenv("SLURM_LOCALID", "0", 1);
	setenv("SLURM_JOB_ID", "12", 1);
	setenv("SLURM_STEP_ID", "0", 1);
}

/* ---- bad values ---- */

Test(init_env, torchrun_bad_values)
{
	static const char *const bad[][3] = {
	    /* variable, value, a word of the message besides the variable */
	    {"RANK", "2", "WORLD_SIZE=2"},
	    {"RANK", "abc", "\"abc\""},
	    {"RANK", "1x", "\"1x\""},
	    {"RANK", "-1", "\"-1\""},
	    {"WORLD_SIZE", "0", "\"0\""},
	    {"WORLD_SIZE", "2 ", "\"2 \""},
	    {"MASTER_PORT", "70000", "70000"},
	    {"MASTER_PORT", "p", "\"p\""},
	    {"TORCHELASTIC_RESTART_COUNT", "x", "\"x\""},
	    {"LOCAL_RANK", "2", "LOCAL_WORLD_SIZE=2"},
	    {"LOCAL_RANK", "1", "RANK=0"},
	    {"LOCAL_WORLD_SIZE", "3", "WORLD_SIZE=2"},
	    {"LOCAL_RANK", "y", "\"y\""},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		torchrun_env();
		setenv(bad[i][0], bad[i][1], 1);
		snprintf(want, sizeof(want), "%s=", bad[i][0]);
		expect_fail(-EINVAL, want, bad[i][2]);
	}
}

Test(init_env, torchrun_missing_partners)
{
	static const char *const gone[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		torchrun_env();
		unsetenv(gone[i]);
		expect_fail(-EINVAL, gone[i], "not set");
	}
	torchrun_env();
	setenv("WORLD_SIZE", "2000", 1);
	setenv("LOCAL_WORLD_SIZE", "2000", 1);
	expect_fail(-EINVAL, "WORLD_SIZE=2000", "1024");
}

Test(init_env, open_mpi_bad_values)
{
	ompi_env();
	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	expect_fail(-EINVAL, "OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2");
	ompi_env();
	setenv("OMPI_COMM_WORLD_SIZE", "two", 1);
	expect_fail(-EINVAL, "OMPI_COMM_WORLD_SIZE=\"two\"", NULL);
	ompi_env();
	unsetenv("OMPI_COMM_WORLD_RANK");
	expect_fail(-EINVAL, "OMPI_COMM_WORLD_RANK", "not set");
	ompi_env();
	unsetenv("OMPI_MCA_ess_base_jobid");
	expect_fail(-EINVAL, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE");
}

Test(init_env, mpich_bad_values)
{
	mpich_env();
	setenv("PMI_RANK", "2", 1);
	expect_fail(-EINVAL, "PMI_RANK=2", "PMI_SIZE=2");
	mpich_env();
	setenv("PMI_SIZE", "", 1);
	expect_fail(-EINVAL, "PMI_SIZE", "not set");
	mpich_env();
	unsetenv("PMI_RANK");
	expect_fail(-EINVAL, "PMI_RANK", "not set");
	mpich_env();
	setenv("MPI_LOCALNRANKS", "2", 1);
	setenv("MPI_LOCALRANKID", "5", 1);
	expect_fail(-EINVAL, "MPI_LOCALRANKID=5", "MPI_LOCALNRANKS=2");
}

Test(init_env, slurm_bad_values)
{
	static const char *const gone[] = {"SLURM_NTASKS", "SLURM_JOB_ID"};

	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		slurm_env();
		unsetenv(gone[i]);
		expect_fail(-EINVAL, gone[i], "not set");
	}
	slurm_env();
	setenv("SLURM_JOB_ID", "12a", 1);
	expect_fail(-EINVAL, "SLURM_JOB_ID=\"12a\"", NULL);
	slurm_env();
	setenv("SLURM_STEP_ID", "batch", 1);
	expect_fail(-EINVAL, "SLURM_STEP_ID=\"batch\"", NULL);
	slurm_env();
	setenv("SLURM_PROCID", "3", 1);
	expect_fail(-EINVAL, "SLURM_PROCID=3", "SLURM_NTASKS=2");
}

/* ---- jobs over several nodes ---- */

Test(init_env, several_nodes_are_not_supported)
{
	torchrun_env();
	setenv("WORLD_SIZE", "4", 1);
	expect_fail(-ENOTSUP, "LOCAL_WORLD_SIZE=2", "shmcoll-run --nnodes");
	torchrun_env();
	unsetenv("LOCAL_WORLD_SIZE");
	setenv("RANK", "1", 1);
	expect_fail(-ENOTSUP, "LOCAL_RANK=0", "shmcoll-run --nnodes");
	ompi_env();
	setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1", 1);
	expect_fail(-ENOTSUP, "OMPI_COMM_WORLD_LOCAL_SIZE=1", "shmcoll-run --nnodes");
	mpich_env();
	setenv("MPI_LOCALNRANKS", "1", 1);
	setenv("MPI_LOCALRANKID", "0", 1);
	expect_fail(-ENOTSUP, "MPI_LOCALNRANKS=1", "shmcoll-run --nnodes");
	slurm_env();
	setenv("SLURM_STEP_NUM_NODES", "2", 1);
	expect_fail(-ENOTSUP, "SLURM_STEP_NUM_NODES=2", "shmcoll-run --nnodes");
	slurm_env();
	setenv("SLURM_PROCID", "1", 1);
	expect_fail(-ENOTSUP, "SLURM_LOCALID=0", "shmcoll-run --nnodes");
}
