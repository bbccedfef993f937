/* test_tune.c - the tuning file: what the parser takes and refuses (with the line and the
 * reason), and what a communicator does with it: takes rank 0's thresholds on every rank,
 * lets the environment win, keeps the built-in ones when the file is bad, and still
 * computes right with the protocols the file chose. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "lib/api/probe.h"
#include "lib/core/tuning.h"

static int parse(const char *text, struct shmcoll_tunefile *f, char *why)
{
	return shmcoll__tunefile_parse(text, f, why, 256);
}

Test(tune, parses_every_key)
{
	struct shmcoll_tunefile f;
	char why[256] = "";

	cr_assert_eq(parse("# written by shmcoll-tune\n"
	                   "version = 1\n"
	                   "\n"
	                   "allreduce.direct_min_bytes = 8K   # crossover\n"
	                   "reduce.direct_min_bytes=32M\r\n"
	                   "\tbarrier.tree_min_ranks = 8\n"
	                   "bcast.tree_min_ranks = 12\n"
	                   "chunk_bytes = 131072\n"
	                   "cma_min_bytes = 1G\n"
	                   "allreduce.direct_min_bytes.oversubscribed = 128K\n"
	                   "hop_ns = 212.5",
	                   &f, why),
	             0, "%s", why);
	cr_assert_eq(f.direct_min[KIND_ALLREDUCE], 8192);
	cr_assert_eq(f.direct_min[KIND_REDUCE], 32ull << 20);
	cr_assert_eq(f.tree_min[KIND_BARRIER], 8);
	cr_assert_eq(f.tree_min[KIND_BCAST], 12);
	cr_assert_eq(f.chunk_bytes, 131072);
	cr_assert_eq(f.cma_min, 1ull << 30);
	cr_assert_eq(f.direct_min_over[KIND_ALLREDUCE], 128 << 10);
	cr_assert_eq(f.direct_min[KIND_ALLREDUCE], 8192, "the two allreduce keys apart");
	cr_assert_float_eq(f.hop_ns, 212.5, 1e-9);
	/* Nothing set: every threshold stays the built-in one. */
	cr_assert_eq(parse("# empty\n\n", &f, why), 0);
	cr_assert_eq(f.direct_min[KIND_ALLREDUCE], 0);
	cr_assert_eq(shmcoll__tuned(f.direct_min[KIND_ALLREDUCE], 4096), 4096);
	cr_assert_eq(shmcoll__tuned(8192, 4096), 8192);
	/* cma_min_bytes = 0 asks for every size, as SHMCOLL_CMA_MIN=0 does. */
	cr_assert_eq(parse("cma_min_bytes = 0\n", &f, why), 0);
	cr_assert_eq(f.cma_min, 1);
}

struct refusal {
	const char *text;
	const char *says; /* a part of the reason */
};

Test(tune, refuses_what_it_does_not_understand)
{
	static const struct refusal cases[] = {
	    {"allreduce.direct_min = 4K\n", "line 1: unknown key 'allreduce.direct_min'"},
	    {"# a\nchunk_bytes 4096\n", "line 2: 'chunk_bytes 4096' is not 'key = value'"},
	    {"hop_ns = 30\nhop_ns = 31\n", "line 2: hop_ns is set twice"},
	    {"allreduce.direct_min_bytes = 4k\n", "wants a whole number"},
	    {"allreduce.direct_min_bytes = -1\n", "wants a whole number"},
	    {"allreduce.direct_min_bytes =\n", "wants a whole number"},
	    {"allreduce.direct_min_bytes = 0\n", "at least 1 byte"},
	    {"reduce.direct_min_bytes = 99999999999999999999\n", "wants a whole number"},
	    {"reduce.direct_min_bytes = 17179869184G\n", "wants a whole number"},
	    {"version = 2\n", "this library reads version 1"},
	    {"barrier.tree_min_ranks = 1\n", "rank count in [2, 4096]"},
	    {"bcast.tree_min_ranks = 5000\n", "rank count in [2, 4096]"},
	    {"chunk_bytes = 32\n", "at least 64"},
	    {"hop_ns = -3\n", "nanoseconds > 0"},
	    {"hop_ns = nan\n", "nanoseconds > 0"},
	    {"hop_ns = 30ns\n", "nanoseconds > 0"},
	};
	struct shmcoll_tunefile f;
	char why[256], big[400];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		cr_assert_eq(parse(cases[i].text, &f, why), -EINVAL, "took '%s'", cases[i].text);
		cr_assert(strstr(why, cases[i].says), "'%s': said '%s', not '%s'", cases[i].text,
		          why, cases[i].says);
	}
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_assert_eq(parse(big, &f, why), -EINVAL);
	cr_assert(strstr(why, "line 1: longer than"), "%s", why);
}

static char tmpdir[64];

static const char *write_file(const char *name, const char *text, size_t len)
{
	static char path[128];
	FILE *fp;

	if (!tmpdir[0]) {
		strcpy(tmpdir, "/tmp/shmcoll-tune-XXXXXX");
		cr_assert(mkdtemp(tmpdir));
	}
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fp = fopen(path, "w");
	cr_assert(fp);
	cr_assert_eq(fwrite(text, 1, len, fp), len);
	fclose(fp);
	return path;
}

static void remove_files(void)
{
	char cmd[128];

	if (tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		cr_assert_eq(system(cmd), 0);
	}
}

Test(tune, load_refuses_what_is_not_a_tuning_file, .fini = remove_files)
{
	struct shmcoll_tunefile f;
	char why[256], *big;
	const char *path;

	cr_assert_eq(shmcoll__tunefile_load("/nonexistent/shmcoll/tune", &f, why, sizeof(why)),
	             -ENOENT);
	cr_assert(strstr(why, "cannot open it"), "%s", why);
	path = write_file("nul", "hop_ns = 3\0\n", 12);
	cr_assert_eq(shmcoll__tunefile_load(path, &f, why, sizeof(why)), -EINVAL);
	cr_assert(strstr(why, "NUL"), "%s", why);
	big = malloc(70000);
	cr_assert(big);
	memset(big, '#', 70000);
	path = write_file("big", big, 70000);
	free(big);
	cr_assert_eq(shmcoll__tunefile_load(path, &f, why, sizeof(why)), -EINVAL);
	cr_assert(strstr(why, "larger than"), "%s", why);
	path = write_file("good", "allreduce.direct_min_bytes = 64\n", 32);
	cr_assert_eq(shmcoll__tunefile_load(path, &f, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(f.direct_min[KIND_ALLREDUCE], 64);
}

/* What a rank reports: where its thresholds came from and what it chose. */
struct seen {
	char source[320];
	char allreduce_64[16], allreduce_32[16], reduce_1k[16], barrier[16], bcast[16];
	char allreduce_16k[16], allreduce_64k[16];
	size_t chunk, cma_min;
};

/* Ranks as processes, each with its own SHMCOLL_TUNE (NULL: unset): what rank 0's file gives
 * every rank. Each rank reports what it saw through a pipe, after checking that an
 * allreduce, reduce, bcast and barrier at the sizes the file concerns still compute right. */
static int check_calls(shmcoll_comm *c, int rank, int size)
{
	static const size_t counts[] = {1, 4, 8, 128, 1024};
	double send[1024], recv[1024];
	size_t i, k;

	for (k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t n = counts[k];

		for (i = 0; i < n; i++)
			send[i] = (double)(rank + 1) * (double)(i + 1);
		if (shmcoll_allreduce(send, recv, n, SHMCOLL_FLOAT64, SHMCOLL_SUM, c) != 0)
			return 10;
		for (i = 0; i < n; i++)
			if (recv[i] != (double)(size * (size + 1) / 2) * (double)(i + 1))
				return 11;
		memset(recv, 0, sizeof(recv));
		if (shmcoll_reduce(send, recv, n, SHMCOLL_FLOAT64, SHMCOLL_SUM, 0, c) != 0)
			return 12;
		for (i = 0; rank == 0 && i < n; i++)
			if (recv[i] != (double)(size * (size + 1) / 2) * (double)(i + 1))
				return 13;
		for (i = 0; i < n; i++)
			recv[i] = rank == 1 ? (double)i * 3 : -1;
		if (shmcoll_bcast(recv, n, SHMCOLL_FLOAT64, 1, c) != 0)
			return 14;
		for (i = 0; i < n; i++)
			if (recv[i] != (double)i * 3)
				return 15;
		if (shmcoll_barrier(c) != 0)
			return 16;
	}
	return 0;
}

/* 1 + the CPU every rank is confined to, so that the ranks outnumber their CPUs; 0: none. */
static int one_cpu;

static void run_ranks(int size, const char *const *tune, const char *chunk_env, struct seen *seen)
{
	shmcoll_config cfg = {.size = size, .timeout_ms = 60000};
	char job[64];
	int fds[8][2], r, st;
	pid_t pid[8];

	th_job_name(job, sizeof(job));
	cfg.job = job;
	for (r = 0; r < size; r++) {
		cr_assert_eq(pipe(fds[r]), 0);
		pid[r] = fork();
		cr_assert(pid[r] >= 0);
		if (pid[r] == 0) {
			struct seen s = {0};
			shmcoll_comm *c;
			int rc;

			close(fds[r][0]);
			if (tune[r])
				setenv("SHMCOLL_TUNE", tune[r], 1);
			else
				unsetenv("SHMCOLL_TUNE");
			if (chunk_env)
				setenv("SHMCOLL_CHUNK_BYTES", chunk_env, 1);
			if (one_cpu) {
				cpu_set_t one;

				CPU_ZERO(&one);
				CPU_SET(one_cpu - 1, &one);
				if (sched_setaffinity(0, sizeof(one), &one) != 0)
					_exit(103);
			}
			cfg.rank = r;
			if (shmcoll_comm_create(&cfg, &c) != 0)
				_exit(100);
			snprintf(s.source, sizeof(s.source), "%s", shmcoll_comm_tuning(c));
			snprintf(s.allreduce_64, 16, "%s",
			         shmcoll__probe_choice(c, "allreduce", 64));
			snprintf(s.allreduce_32, 16, "%s",
			         shmcoll__probe_choice(c, "allreduce", 32));
			snprintf(s.reduce_1k, 16, "%s", shmcoll__probe_choice(c, "reduce", 1024));
			snprintf(s.allreduce_16k, 16, "%s",
			         shmcoll__probe_choice(c, "allreduce", 16384));
			snprintf(s.allreduce_64k, 16, "%s",
			         shmcoll__probe_choice(c, "allreduce", 65536));
			snprintf(s.barrier, 16, "%s", shmcoll__probe_choice(c, "barrier", 0));
			snprintf(s.bcast, 16, "%s", shmcoll__probe_choice(c, "bcast", 0));
			s.chunk = shmcoll__probe_chunk_bytes(c);
			s.cma_min = shmcoll__probe_cma_min(c);
			rc = check_calls(c, r, size);
			if (shmcoll_comm_destroy(c) != 0 && rc == 0)
				rc = 101;
			if (write(fds[r][1], &s, sizeof(s)) != (ssize_t)sizeof(s) && rc == 0)
				rc = 102;
			_exit(rc);
		}
		close(fds[r][1]);
	}
	for (r = 0; r < size; r++) {
		cr_assert_eq(read(fds[r][0], &seen[r], sizeof(seen[r])), (ssize_t)sizeof(seen[r]),
		             "rank %d reported nothing", r);
		close(fds[r][0]);
		cr_assert_eq(waitpid(pid[r], &st, 0), pid[r]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d ended with %d", r,
		          WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
	}
}

#define TUNED_TEXT                                                                                 \
	"version = 1\nallreduce.direct_min_bytes = 64\nreduce.direct_min_bytes = 1K\n"             \
	"allreduce.direct_min_bytes.oversubscribed = 64\n"                                         \
	"barrier.tree_min_ranks = 2\nbcast.tree_min_ranks = 2\nchunk_bytes = 8K\n"                 \
	"cma_min_bytes = 1M\nhop_ns = 40\n"

Test(tune, a_file_changes_the_choices_on_every_rank, .fini = remove_files, .timeout = 120)
{
	const char *path = write_file("tuned", TUNED_TEXT, strlen(TUNED_TEXT));
	const char *tune[3] = {path, path, path};
	struct seen seen[3];
	char want[256];
	int r;

	TH_PROCESSES_ONLY();
	snprintf(want, sizeof(want), "tuning file %s", path);
	run_ranks(3, tune, NULL, seen);
	for (r = 0; r < 3; r++) {
		cr_assert_str_eq(seen[r].source, want, "rank %d", r);
		cr_assert_str_eq(seen[r].allreduce_64, "direct", "rank %d", r);
		cr_assert_str_eq(seen[r].allreduce_32, "flat", "rank %d", r);
		cr_assert_str_eq(seen[r].reduce_1k, "direct", "rank %d", r);
		cr_assert_str_eq(seen[r].barrier, "tree", "rank %d", r);
		cr_assert_str_eq(seen[r].bcast, "tree", "rank %d", r);
		cr_assert_eq(seen[r].chunk, 8192, "rank %d", r);
		cr_assert_eq(seen[r].cma_min, 1 << 20, "rank %d", r);
	}
}

Test(tune, without_a_file_the_builtin_thresholds, .timeout = 120)
{
	const char *tune[2] = {"none", "none"};
	struct seen seen[2];
	int r;

	TH_PROCESSES_ONLY();
	run_ranks(2, tune, NULL, seen);
	for (r = 0; r < 2; r++) {
		cr_assert_str_eq(seen[r].source, "built-in (SHMCOLL_TUNE=none)", "rank %d", r);
		cr_assert_str_eq(seen[r].allreduce_64, "flat");
		cr_assert_str_eq(seen[r].reduce_1k, "flat");
		cr_assert_str_eq(seen[r].barrier, "flat");
		cr_assert_eq(seen[r].chunk, 0);
		cr_assert_eq(seen[r].cma_min, 0);
	}
}

/* Rank 0's file decides for all: the thresholds choose protocols, which every rank must
 * choose alike, so a rank whose environment names another file (or none) takes rank 0's. */
Test(tune, every_rank_takes_rank_0s_file, .fini = remove_files, .timeout = 120)
{
	const char *path = write_file("tuned", TUNED_TEXT, strlen(TUNED_TEXT));
	const char *tune0[2] = {"none", path}, *tune1[2] = {path, "none"};
	struct seen seen[2];
	int r;

	TH_PROCESSES_ONLY();
	run_ranks(2, tune0, NULL, seen);
	for (r = 0; r < 2; r++) {
		cr_assert_str_eq(seen[r].source, "built-in (SHMCOLL_TUNE=none)", "rank %d", r);
		cr_assert_str_eq(seen[r].allreduce_64, "flat", "rank %d", r);
	}
	run_ranks(2, tune1, NULL, seen);
	for (r = 0; r < 2; r++)
		cr_assert_str_eq(seen[r].allreduce_64, "direct", "rank %d", r);
}

/* A bad file does not fail the create: its thresholds are not taken, and the communicator
 * says why; a missing file named by SHMCOLL_TUNE is reported the same way. */
Test(tune, a_bad_file_is_reported_and_the_builtin_thresholds_kept, .fini = remove_files,
     .timeout = 120)
{
	static const char bad[] = "allreduce.direct_min_bytes = 64\nbcast.tree = 2\n";
	const char *path = write_file("bad", bad, strlen(bad));
	const char *tune[2] = {path, path},
	           *missing[2] = {"/nonexistent/tune", "/nonexistent/tune"};
	struct seen seen[2];
	int r;

	TH_PROCESSES_ONLY();
	run_ranks(2, tune, NULL, seen);
	for (r = 0; r < 2; r++) {
		cr_assert(strstr(seen[r].source, "built-in: tuning file ") &&
		              strstr(seen[r].source, "rejected: line 2: unknown key 'bcast.tree'"),
		          "rank %d: %s", r, seen[r].source);
		cr_assert_str_eq(seen[r].allreduce_64, "flat", "the file's first line taken alone");
	}
	run_ranks(2, missing, NULL, seen);
	cr_assert(strstr(seen[1].source,
	                 "built-in: tuning file /nonexistent/tune rejected: cannot open it"),
	          "%s", seen[1].source);
}

/* Without a file's or the environment's word on single copies, ranks 0 and 1 race a staged
 * 256 KiB copy against a single one at create (lib/core/cma.c, the copy probe): every rank takes
 * rank 0's verdict, says it in its tuning source, and single copies start at 32 KiB exactly when
 * the verdict says so. Which way it goes depends on the machine; that every rank agrees with
 * what it says does not. With the ranks outnumbering their CPUs there is no race to time, and no
 * probe runs; with SHMCOLL_TUNE=none neither (the suites' setting: without_a_file_...). */
Test(tune, the_copy_probe_decides_alike_on_every_rank, .timeout = 120)
{
	const char *tune[2] = {"/nonexistent/probe", "/nonexistent/probe"};
	struct seen seen[2];
	const char *at;
	int r, single;
	FILE *f;

	TH_PROCESSES_ONLY();
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	if (f) {
		int scope = 0;

		if (fscanf(f, "%d", &scope) == 1 && scope >= 1) {
			fclose(f);
			cr_skip_test("Yama ptrace_scope %d: no single copies here, so no probe",
			             scope);
		}
		fclose(f);
	}
	run_ranks(2, tune, NULL, seen);
	at = strstr(seen[0].source, "; 256 KiB across cores at create: staged ");
	cr_assert(at, "no probe on a CPU each: %s", seen[0].source);
	single = strstr(at, ": single copies: alltoall from 32 KiB blocks, allgather from 2 MiB") !=
	         NULL;
	cr_assert(single || strstr(at, ": staging"), "%s", seen[0].source);
	for (r = 0; r < 2; r++) {
		cr_assert_str_eq(seen[r].source, seen[0].source, "rank %d", r);
		cr_assert_eq(seen[r].cma_min, single ? 32768u : 0u, "rank %d: %s", r,
		             seen[r].source);
	}
	one_cpu = 1;
	run_ranks(2, tune, NULL, seen);
	one_cpu = 0;
	for (r = 0; r < 2; r++) {
		cr_assert_null(strstr(seen[r].source, "across cores"), "rank %d: %s", r,
		               seen[r].source);
		cr_assert_eq(seen[r].cma_min, 0);
	}
}

/* The environment wins over the file, rank by rank, as for any other setting. */
Test(tune, the_environment_wins_over_the_file, .fini = remove_files, .timeout = 120)
{
	const char *path = write_file("tuned", TUNED_TEXT, strlen(TUNED_TEXT));
	const char *tune[2] = {path, path};
	struct seen seen[2];

	TH_PROCESSES_ONLY();
	run_ranks(2, tune, "4096", seen);
	cr_assert_eq(seen[0].chunk, 4096);
	cr_assert_eq(seen[1].chunk, 4096);
	cr_assert_str_eq(seen[1].allreduce_64, "direct");
}

/* ---- shmcoll-tune ---- */

struct tool_run {
	int code; /* exit status, or -signal */
	char out[16384], err[4096];
};

static void slurp_fd(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t got;

	while (len + 1 < cap && (got = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)got;
	buf[len] = '\0';
}

/* Runs shmcoll-tune (SHMCOLL_TUNE_BIN, set by meson test) with args, SHMCOLL_TUNE set to
 * tune (NULL: unset), output captured through files (the tool may write much). */
static void run_tool(struct tool_run *r, const char *tune, const char *const *args)
{
	const char *bin = getenv("SHMCOLL_TUNE_BIN");
	char out[] = "/tmp/shmcoll-tune-out.XXXXXX", err[] = "/tmp/shmcoll-tune-err.XXXXXX";
	char *argv[16];
	int fo, fe, st, n = 0;
	pid_t pid;

	cr_assert(bin && *bin, "SHMCOLL_TUNE_BIN is not set (meson test sets it)");
	fo = mkstemp(out);
	fe = mkstemp(err);
	cr_assert(fo >= 0 && fe >= 0);
	argv[n++] = (char *)bin;
	while (*args && n < 15)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		if (dup2(fo, STDOUT_FILENO) < 0 || dup2(fe, STDERR_FILENO) < 0)
			_exit(126);
		if (tune)
			setenv("SHMCOLL_TUNE", tune, 1);
		else
			unsetenv("SHMCOLL_TUNE");
		execv(argv[0], argv);
		_exit(127);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	r->code = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
	lseek(fo, 0, SEEK_SET);
	lseek(fe, 0, SEEK_SET);
	slurp_fd(fo, r->out, sizeof(r->out));
	slurp_fd(fe, r->err, sizeof(r->err));
	close(fo);
	close(fe);
	unlink(out);
	unlink(err);
}

/* The number after "  key " on a line of the tool's report, or -1. */
static long long value_of(const char *out, const char *key)
{
	char pat[96];
	const char *at = out;
	size_t len;

	len = (size_t)snprintf(pat, sizeof(pat), "  %s ", key);
	while ((at = strstr(at, pat))) {
		if (at == out || at[-1] == '\n')
			return strtoll(at + len, NULL, 10);
		at += len;
	}
	return -1;
}

Test(tune, tool_checks_a_file, .fini = remove_files)
{
	static const char bad[] = "version = 1\nallreduce.direct_min_bytes = 8K\nfoo = 1\n";
	const char *good = write_file("good", TUNED_TEXT, strlen(TUNED_TEXT));
	char goodpath[128];
	struct tool_run r;

	snprintf(goodpath, sizeof(goodpath), "%s", good);
	run_tool(&r, NULL, (const char *[]){"--check", goodpath, NULL});
	cr_assert_eq(r.code, 0, "%s", r.err);
	cr_assert(strstr(r.out, "valid"), "%s", r.out);
	cr_assert_eq(value_of(r.out, "allreduce.direct_min_bytes"), 64, "%s", r.out);
	cr_assert_eq(value_of(r.out, "cma_min_bytes"), 1 << 20, "%s", r.out);
	cr_assert_eq(value_of(r.out, "allreduce.direct_min_bytes.oversubscribed"), 64, "%s", r.out);
	/* Without a path: the file the library would read, SHMCOLL_TUNE's. */
	run_tool(&r, goodpath, (const char *[]){"--check", NULL});
	cr_assert_eq(r.code, 0, "%s", r.err);
	run_tool(&r, NULL, (const char *[]){"--check", write_file("bad", bad, strlen(bad)), NULL});
	cr_assert_eq(r.code, 1);
	cr_assert(strstr(r.err, "refused: line 3: unknown key 'foo'"), "%s", r.err);
	/* --show tells what a communicator would do with it: the built-in thresholds. */
	run_tool(&r, write_file("bad", bad, strlen(bad)), (const char *[]){"--show", NULL});
	cr_assert_eq(r.code, 1);
	cr_assert(strstr(r.out, "built-in thresholds"), "%s", r.out);
	run_tool(&r, "none", (const char *[]){"--show", NULL});
	cr_assert_eq(r.code, 0);
	cr_assert_eq(value_of(r.out, "allreduce.direct_min_bytes"), 4096, "%s", r.out);
	cr_assert(strstr(r.out, "4096 (built-in; two ranks: flat at every size)"), "%s", r.out);
}

Test(tune, tool_refuses_a_bad_command_line)
{
	static const char *const bad[][4] = {
	    {"--repeat", "0", NULL},
	    {"-n", "x", NULL},
	    {"--bogus", NULL},
	    {"-o", NULL},
	    {"--check", "--quick", NULL},
	    {"--show", "-o", "/tmp/x", NULL},
	};
	struct tool_run r;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_tool(&r, "none", bad[i]);
		cr_assert_eq(r.code, 2, "%s: exit %d", bad[i][0], r.code);
		cr_assert(strstr(r.err, "shmcoll-tune: "), "%s", r.err);
	}
	run_tool(&r, "none", (const char *[]){NULL});
	cr_assert_eq(r.code, 2, "SHMCOLL_TUNE=none and no -o: nowhere to write");
}

/* A real (short) tuning: it writes a file the library takes, with the hop and every key it
 * could measure; the values are whatever this machine gave and are not checked. */
Test(tune, tool_writes_a_file_the_library_takes, .fini = remove_files, .timeout = 600)
{
	struct shmcoll_tunefile f;
	struct tool_run r;
	char path[128], why[256], text[16384];
	FILE *fp;
	size_t len;

	TH_PROCESSES_ONLY();
	snprintf(path, sizeof(path), "%s", write_file("written", "", 0));
	run_tool(&r, "none", (const char *[]){"--quick", "-n", "2", "-o", path, NULL});
	cr_assert_eq(r.code, 0, "stderr:\n%s", r.err);
	cr_assert(strstr(r.out, "valid"), "%s", r.out);
	cr_assert_eq(shmcoll__tunefile_load(path, &f, why, sizeof(why)), 0, "%s", why);
	cr_assert(f.hop_ns > 0, "no hop measured");
	fp = fopen(path, "r");
	cr_assert(fp);
	len = fread(text, 1, sizeof(text) - 1, fp);
	fclose(fp);
	text[len] = '\0';
	cr_assert(strstr(text, "version = 1\n"), "%s", text);
	cr_assert(strstr(text, "allreduce.direct_min_bytes = ") ||
	              strstr(text, "# allreduce.direct_min_bytes: not set"),
	          "%s", text);
	cr_assert(strstr(text, "chunk_bytes = ") || strstr(text, "# chunk_bytes: not set"), "%s",
	          text);
	/* Nothing left beside it: the temporary file was renamed over it. */
	cr_assert_eq(system("ls /tmp/shmcoll-tune-*/written.*.tmp >/dev/null 2>&1"), 512,
	             "a temporary file was left");
}

/* More ranks than CPUs: allreduce keeps the flat protocol to 32 KiB (each of the direct
 * protocol's extra steps may wait for a turn of the CPU), unless the file says otherwise for
 * that case; a file's threshold for ranks with a CPU each does not apply. Two ranks with a
 * CPU each run flat at every size unless the file's threshold says otherwise. */
Test(tune, oversubscribed_jobs_have_their_own_threshold, .fini = remove_files, .timeout = 120)
{
	static const char text[] = "allreduce.direct_min_bytes = 64\n";
	static const char over[] = "allreduce.direct_min_bytes.oversubscribed = 16K\n";
	const char *none[2] = {"none", "none"};
	struct seen seen[2];
	char path[128];
	const char *tune[2] = {path, path};

	TH_PROCESSES_ONLY();
	one_cpu = 1 + (sched_getcpu() < 0 ? 0 : sched_getcpu());
	run_ranks(2, none, NULL, seen);
	cr_assert_str_eq(seen[1].allreduce_16k, "flat");
	cr_assert_str_eq(seen[1].allreduce_64k, "direct");
	snprintf(path, sizeof(path), "%s", write_file("cpu", text, strlen(text)));
	run_ranks(2, tune, NULL, seen);
	cr_assert_str_eq(seen[1].allreduce_16k, "flat", "the file's threshold is for a CPU each");
	snprintf(path, sizeof(path), "%s", write_file("over", over, strlen(over)));
	run_ranks(2, tune, NULL, seen);
	cr_assert_str_eq(seen[0].allreduce_16k, "direct");
	cr_assert_str_eq(seen[1].allreduce_16k, "direct");
	one_cpu = 0;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	/* A CPU each: two ranks run flat at every size, unless a file says otherwise. */
	run_ranks(2, none, NULL, seen);
	cr_assert_str_eq(seen[1].allreduce_16k, "flat");
	cr_assert_str_eq(seen[1].allreduce_64k, "flat");
	snprintf(path, sizeof(path), "%s", write_file("cpu", text, strlen(text)));
	run_ranks(2, tune, NULL, seen);
	cr_assert_str_eq(seen[0].allreduce_16k, "direct");
	cr_assert_str_eq(seen[1].allreduce_64k, "direct");
}
