/* test_faults.c - what survivors see when a rank dies: SIGKILL before, during
 * and after each collective, with small messages and with large pipelined
 * ones. Every survivor's first call that needs the dead rank returns
 * -EOWNERDEAD naming it; calls that did not need it return their correct
 * result; later calls return -ECANCELED quoting the cause; nothing hangs and
 * no segment is left. Also: a stopped (not dead) rank gives -ETIMEDOUT, and
 * shmcoll_comm_abort from a signal handler or another thread wakes everyone.
 *
 * No test depends on timing: the victim dies when it decides to, or when a
 * peer that holds back from the call sees it inside and kills it. How long detection
 * took is printed (docs/RELIABILITY.md quotes it), never asserted beyond a
 * hang bound. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "shm/atomics.h"
#include "shm/name.h"
#include "tests/harness.h"

#define P           3
#define VICTIM      (P - 1)
#define SMALL_COUNT 5            /* int32 elements: the inline and flat paths */
#define LARGE_COUNT (256 * 1024) /* 1 MiB of int32 per rank */
#define LARGE_CHUNK "4096"       /* so a large call takes hundreds of steps */
/* f->large: 0 small; 1 large, staged through the arena; LARGE_CMA large, read from the peers'
 * memory (SHMCOLL_CMA_MIN=1: single copies at every size, which are off by default). */
#define LARGE_CMA 2
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
/* A hang bound, not a timing assertion: detection takes ~10-60 ms. */
#define DETECT_BOUND_NS (20ll * 1000 * 1000 * 1000)

enum when { BEFORE, DURING, AFTER };
/* SIGKILL; exit without shmcoll_comm_destroy; a crash (SIGSEGV). */
enum how { DIE_KILL, DIE_EXIT, DIE_CRASH };

struct fault {
	th_coll coll;
	enum when when;
	int large;
	int root;
	int how; /* how the victim dies: DIE_KILL, DIE_EXIT, DIE_CRASH */
	/* Shared by the forked ranks (MAP_SHARED before the fork). */
	_Atomic int64_t death_ns; /* when the victim died (or was killed) */
	_Atomic int64_t worst_ns; /* the slowest survivor's detection time */
	_Atomic int outcome[P];   /* 1: the call itself failed, 2: it completed first */
	_Atomic int staged;       /* LARGE_CMA, but the communicator has no single copies */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int32_t val(int rank, size_t i)
{
	return (int32_t)(i * 7 + (size_t)rank * 13 + 1);
}

/* Buffers and expected results for one call on this rank (int32, sum). */
struct bufs {
	int32_t *send, *recv;
	size_t nsend, nrecv;
};

static void bufs_fill(const struct fault *f, int rank, size_t n, struct bufs *b)
{
	size_t i;

	b->nsend = n;
	b->nrecv = n;
	switch (f->coll) {
	case TH_ALLGATHER:
	case TH_GATHER:
		b->nrecv = n * P;
		break;
	case TH_REDUCE_SCATTER:
	case TH_ALLTOALL:
	case TH_SCATTER:
		b->nsend = n * P;
		b->nrecv = f->coll == TH_ALLTOALL ? n * P : n;
		break;
	default:
		break;
	}
	b->send = calloc(b->nsend, sizeof(int32_t));
	b->recv = calloc(b->nrecv, sizeof(int32_t));
	cr_assert(b->send && b->recv);
	for (i = 0; i < b->nsend; i++)
		b->send[i] = val(rank, i);
	if (f->coll == TH_BCAST && rank != f->root)
		memset(b->send, 0, b->nsend * sizeof(int32_t));
}

static int call(const struct fault *f, shmcoll_comm *c, struct bufs *b, size_t n)
{
	switch (f->coll) {
	case TH_ALLREDUCE:
		return shmcoll_allreduce(b->send, b->recv, n, SHMCOLL_INT32, SHMCOLL_SUM, c);
	case TH_REDUCE:
		return shmcoll_reduce(b->send, b->recv, n, SHMCOLL_INT32, SHMCOLL_SUM, f->root, c);
	case TH_BCAST:
		return shmcoll_bcast(b->send, n, SHMCOLL_INT32, f->root, c);
	case TH_ALLGATHER:
		return shmcoll_allgather(b->send, b->recv, n, SHMCOLL_INT32, c);
	case TH_REDUCE_SCATTER:
		return shmcoll_reduce_scatter(b->send, b->recv, n, SHMCOLL_INT32, SHMCOLL_SUM, c);
	case TH_GATHER:
		return shmcoll_gather(b->send, b->recv, n, SHMCOLL_INT32, f->root, c);
	case TH_SCATTER:
		return shmcoll_scatter(b->send, b->recv, n, SHMCOLL_INT32, f->root, c);
	case TH_ALLTOALL:
		return shmcoll_alltoall(b->send, b->recv, n, SHMCOLL_INT32, c);
	default:
		return shmcoll_barrier(c);
	}
}

/* Checks a completed call's result on rank; returns the first bad index + 1
 * or 0. */
static size_t check(const struct fault *f, int rank, const struct bufs *b, size_t n)
{
	size_t i;
	int r;

	for (i = 0; i < n; i++) {
		int64_t want = 0;

		switch (f->coll) {
		case TH_ALLREDUCE:
		case TH_REDUCE:
			if (f->coll == TH_REDUCE && rank != f->root)
				return 0;
			for (r = 0; r < P; r++)
				want += val(r, i);
			if (b->recv[i] != (int32_t)want)
				return i + 1;
			break;
		case TH_BCAST:
			if (b->send[i] != val(f->root, i))
				return i + 1;
			break;
		case TH_ALLGATHER:
		case TH_GATHER:
			if (f->coll == TH_GATHER && rank != f->root)
				return 0;
			for (r = 0; r < P; r++)
				if (b->recv[(size_t)r * n + i] != val(r, i))
					return (size_t)r * n + i + 1;
			break;
		case TH_REDUCE_SCATTER:
			for (r = 0; r < P; r++)
				want += val(r, (size_t)rank * n + i);
			if (b->recv[i] != (int32_t)want)
				return i + 1;
			break;
		case TH_SCATTER:
			if (b->recv[i] != val(f->root, (size_t)rank * n + i))
				return i + 1;
			break;
		case TH_ALLTOALL:
			for (r = 0; r < P; r++)
				if (b->recv[(size_t)r * n + i] != val(r, (size_t)rank * n + i))
					return (size_t)r * n + i + 1;
			break;
		default:
			return 0;
		}
	}
	return 0;
}

/* True for the collectives in which every rank needs every other rank's
 * data: there the call that the victim misses must itself fail. In rooted
 * calls a rank may finish without the victim; then its next call fails. */
static int needs_all(th_coll coll)
{
	return coll == TH_ALLREDUCE || coll == TH_ALLGATHER || coll == TH_REDUCE_SCATTER ||
	       coll == TH_ALLTOALL || coll == TH_BARRIER;
}

/* Rank 1 holds back from the call until the victim is inside it (it has
 * published the call's first step and waits for rank 1), kills it, waits
 * until it is gone, and only then joins the call. So the victim dies in the
 * middle of the call whatever the scheduler does, and in the collectives
 * where it needs rank 1 it cannot have finished. */
static int kill_inside(shmcoll_comm *c, struct fault *f)
{
	struct pollfd pfd = {.events = POLLIN};
	pid_t pid = shmcoll__probe_pid(c, VICTIM);

	while (!seq_reached(shmcoll__probe_step(c, VICTIM), shmcoll__probe_my_step(c) + 1))
		sched_yield();
	pfd.fd = (int)syscall(SYS_pidfd_open, pid, 0u);
	if (pfd.fd < 0)
		return -1;
	atomic_store(&f->death_ns, now_ns());
	kill(pid, SIGKILL);
	while (poll(&pfd, 1, -1) != 1)
		;
	close(pfd.fd);
	return 0;
}

static void die(struct fault *f)
{
	atomic_store(&f->death_ns, now_ns());
	if (f->how == DIE_EXIT)
		_exit(42);
	if (f->how == DIE_CRASH) {
		struct rlimit none = {0, 0};

		setrlimit(RLIMIT_CORE, &none); /* no core file from a planned crash */
		signal(SIGSEGV, SIG_DFL);
		raise(SIGSEGV);
	}
	raise(SIGKILL);
}

static int fault_body(shmcoll_comm *c, int rank, void *arg)
{
	struct fault *f = arg;
	size_t n = f->large ? LARGE_COUNT : SMALL_COUNT, bad;
	struct bufs b;
	int64_t took;
	int rc, rc2;

	bufs_fill(f, rank, n, &b);
	if (f->large == LARGE_CMA && !shmcoll__probe_cma(c))
		atomic_store(&f->staged, 1);
	if (rank == VICTIM && f->when == BEFORE)
		die(f);
	if (rank == 1 && f->when == DURING && kill_inside(c, f) < 0)
		return 90;
	rc = call(f, c, &b, n);
	if (rank == VICTIM) {
		if (f->when == AFTER && rc == 0)
			die(f);
		if (f->when == DURING)
			for (;;)
				pause(); /* it published the call's first step: SIGKILL is coming */
		return 91;
	}
	/* A survivor. */
	if (rc == 0) {
		bad = check(f, rank, &b, n);
		if (bad)
			return 10;
		/* Finished without a rank whose data it needs? Not for a small
		 * call killed "during": its one step, published before the kill,
		 * holds all the victim had to give. */
		if (f->when != AFTER && needs_all(f->coll) && !(f->when == DURING && !f->large))
			return 11;
		atomic_store(&f->outcome[rank], 2);
		rc2 = shmcoll_barrier(c);
		if (rc2 != -EOWNERDEAD)
			return 12;
	} else {
		if (rc != -EOWNERDEAD)
			return 13;
		if (f->when == AFTER)
			return 14; /* the victim completed this call: nothing was missing */
		atomic_store(&f->outcome[rank], 1);
	}
	took = now_ns() - atomic_load(&f->death_ns);
	for (int64_t cur = atomic_load(&f->worst_ns); took > cur;)
		if (atomic_compare_exchange_weak(&f->worst_ns, &cur, took))
			break;
	if (took > DETECT_BOUND_NS)
		return 15;
	{
		char want[32];

		snprintf(want, sizeof(want), "rank %d", VICTIM);
		if (!strstr(shmcoll_last_error(c), want) || !strstr(shmcoll_last_error(c), "died"))
			return 16;
	}
	/* From now on the communicator is broken, and says why. */
	if (shmcoll_barrier(c) != -ECANCELED || !strstr(shmcoll_last_error(c), "died"))
		return 17;
	free(b.send);
	free(b.recv);
	return 0;
}

static const char *const when_names[] = {"before", "during", "after"};
static const char *const size_names[] = {"small", "large", "large single-copy"};

static void run_fault_how(th_coll coll, enum when when, int large, int root, enum how how)
{
	struct fault *f =
	    mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.timeout_ms = 60000, .wall_ms = 100000, .grace_ms = 60000};
	char name[128];
	th_result res;
	int r;

	cr_assert(f != MAP_FAILED);
	memset(f, 0, sizeof(*f));
	f->coll = coll;
	f->when = when;
	f->large = large;
	f->root = root;
	f->how = how;
	if (large)
		cr_assert(setenv("SHMCOLL_CHUNK_BYTES", LARGE_CHUNK, 1) == 0);
	else
		cr_assert(unsetenv("SHMCOLL_CHUNK_BYTES") == 0);
	if (large == LARGE_CMA) {
		if (!th_siblings_can_read())
			cr_skip_test(
			    "process_vm_readv between sibling processes is not allowed here "
			    "(Yama ptrace_scope, seccomp): no single copies to kill a rank in");
		cr_assert(setenv("SHMCOLL_CMA_MIN", "1", 1) == 0);
	}
	th_run_ranks(P, fault_body, f, &o, &res);
	unsetenv("SHMCOLL_CHUNK_BYTES");
	unsetenv("SHMCOLL_CMA_MIN");
	snprintf(name, sizeof(name), "%s %s %s, root %d", th_coll_name(coll), when_names[when],
	         size_names[large], root);
	cr_assert(!atomic_load(&f->staged),
	          "%s: siblings may read each other here, but the library staged instead", name);
	cr_assert(!res.timed_out, "%s: hung: %s", name, res.summary);
	if (how == DIE_EXIT)
		cr_assert(res.rank[VICTIM].code == 42, "%s: the victim did not exit: %s", name,
		          res.summary);
	else
		cr_assert(res.rank[VICTIM].signo == (how == DIE_CRASH ? SIGSEGV : SIGKILL),
		          "%s: the victim did not die as planned: %s", name, res.summary);
	for (r = 0; r < P; r++)
		if (r != VICTIM)
			cr_assert(res.rank[r].code == 0 && res.rank[r].signo == 0,
			          "%s: survivor %d failed (code %d): %s", name, r, res.rank[r].code,
			          res.summary);
	/* The last rank to attach unlinked the name: nothing can be left. */
	{
		char path[256];

		cr_assert(shmcoll__arena_name(path, sizeof(path), res.job) == 0);
		memmove(path + 8, path, strlen(path) + 1);
		memcpy(path, "/dev/shm", 8);
		cr_assert(access(path, F_OK) != 0, "%s: %s left behind", name, path);
	}
	printf("faults: %-36s detected in %6.1f ms (outcomes %d %d)\n", name,
	       (double)atomic_load(&f->worst_ns) / 1e6, atomic_load(&f->outcome[0]),
	       atomic_load(&f->outcome[1]));
	fflush(stdout);
	munmap(f, sizeof(*f));
}

static void run_fault(th_coll coll, enum when when, int large, int root)
{
	run_fault_how(coll, when, large, root, DIE_KILL);
}

/* The other ways to die, once each: they reach peers the same way. */
Test(faults, exit_without_destroy, .timeout = 200)
{
	run_fault_how(TH_ALLREDUCE, BEFORE, 0, 0, DIE_EXIT);
	run_fault_how(TH_BCAST, AFTER, 1, VICTIM, DIE_EXIT);
}

Test(faults, crash, .timeout = 200)
{
	run_fault_how(TH_ALLREDUCE, BEFORE, 1, 0, DIE_CRASH);
	run_fault_how(TH_GATHER, AFTER, 0, 0, DIE_CRASH);
}

#define FAULT_TESTS(name, coll, root)                                                              \
	Test(faults, name##_before_small, .timeout = 200)                                          \
	{                                                                                          \
		run_fault(coll, BEFORE, 0, root);                                                  \
	}                                                                                          \
	Test(faults, name##_during_small, .timeout = 200)                                          \
	{                                                                                          \
		run_fault(coll, DURING, 0, root);                                                  \
	}                                                                                          \
	Test(faults, name##_after_small, .timeout = 200)                                           \
	{                                                                                          \
		run_fault(coll, AFTER, 0, root);                                                   \
	}                                                                                          \
	Test(faults, name##_before_large, .timeout = 200)                                          \
	{                                                                                          \
		run_fault(coll, BEFORE, 1, root);                                                  \
	}                                                                                          \
	Test(faults, name##_during_large, .timeout = 200)                                          \
	{                                                                                          \
		run_fault(coll, DURING, 1, root);                                                  \
	}                                                                                          \
	Test(faults, name##_after_large, .timeout = 200)                                           \
	{                                                                                          \
		run_fault(coll, AFTER, 1, root);                                                   \
	}

FAULT_TESTS(allreduce, TH_ALLREDUCE, 0)
FAULT_TESTS(reduce, TH_REDUCE, 0)
FAULT_TESTS(reduce_root_dies, TH_REDUCE, VICTIM)
FAULT_TESTS(bcast, TH_BCAST, 0)
FAULT_TESTS(bcast_root_dies, TH_BCAST, VICTIM)
FAULT_TESTS(allgather, TH_ALLGATHER, 0)
FAULT_TESTS(reduce_scatter, TH_REDUCE_SCATTER, 0)
FAULT_TESTS(gather, TH_GATHER, 0)
FAULT_TESTS(gather_root_dies, TH_GATHER, VICTIM)
FAULT_TESTS(scatter, TH_SCATTER, 0)
FAULT_TESTS(scatter_root_dies, TH_SCATTER, VICTIM)
FAULT_TESTS(alltoall, TH_ALLTOALL, 0)

/* Single copies read a peer's memory while it dies: its pages go before it is a zombie, and a
 * read in that window fails as for a bad buffer (docs/RELIABILITY.md). */
#define FAULT_TESTS_CMA(name, coll, root)                                                          \
	Test(faults, name##_during_large_cma, .timeout = 200)                                      \
	{                                                                                          \
		run_fault(coll, DURING, LARGE_CMA, root);                                          \
	}                                                                                          \
	Test(faults, name##_after_large_cma, .timeout = 200)                                       \
	{                                                                                          \
		run_fault(coll, AFTER, LARGE_CMA, root);                                           \
	}

FAULT_TESTS_CMA(bcast, TH_BCAST, 0)
FAULT_TESTS_CMA(bcast_root_dies, TH_BCAST, VICTIM)
FAULT_TESTS_CMA(allgather, TH_ALLGATHER, 0)
FAULT_TESTS_CMA(gather, TH_GATHER, 0)
FAULT_TESTS_CMA(gather_root_dies, TH_GATHER, VICTIM)
FAULT_TESTS_CMA(scatter, TH_SCATTER, 0)
FAULT_TESTS_CMA(scatter_root_dies, TH_SCATTER, VICTIM)
FAULT_TESTS_CMA(alltoall, TH_ALLTOALL, 0)

Test(faults, barrier_before, .timeout = 200)
{
	run_fault(TH_BARRIER, BEFORE, 0, 0);
}

Test(faults, barrier_during, .timeout = 200)
{
	run_fault(TH_BARRIER, DURING, 0, 0);
}

Test(faults, barrier_after, .timeout = 200)
{
	run_fault(TH_BARRIER, AFTER, 0, 0);
}

/* ---- a stopped rank is not a dead one ---- */

struct stop {
	_Atomic int timed_out;
};

static int stop_body(shmcoll_comm *c, int rank, void *arg)
{
	struct stop *s = arg;
	int32_t x = 1, y;
	int rc;

	if (rank == VICTIM)
		raise(SIGSTOP); /* killed below; never continues */
	rc = shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_SUM, c);
	if (rc != -ETIMEDOUT)
		return 1;
	if (atomic_fetch_add(&s->timed_out, 1) + 1 == P - 1)
		kill(shmcoll__probe_pid(c, VICTIM), SIGKILL);
	return 0;
}

Test(faults, stopped_rank_times_out, .timeout = 200)
{
	struct stop *s =
	    mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.timeout_ms = 1500, .wall_ms = 100000, .grace_ms = 60000};
	th_result res;

	cr_assert(s != MAP_FAILED);
	atomic_init(&s->timed_out, 0);
	th_run_ranks(P, stop_body, s, &o, &res);
	cr_assert(!res.timed_out, "hung: %s", res.summary);
	cr_assert_eq(res.rank[0].code, 0, "%s", res.summary);
	cr_assert_eq(res.rank[1].code, 0, "%s", res.summary);
	cr_assert_eq(res.rank[VICTIM].signo, SIGKILL, "%s", res.summary);
	munmap(s, sizeof(*s));
}

/* ---- abort from a signal handler and from another thread ---- */

static shmcoll_comm *handler_comm;

static void on_usr1(int sig)
{
	(void)sig;
	shmcoll_comm_abort(handler_comm);
}

static void *abort_thread(void *arg)
{
	shmcoll_comm_abort(arg);
	return NULL;
}

static int abort_body(shmcoll_comm *c, int rank, void *arg)
{
	int how = *(int *)arg;
	pthread_t th;

	if (rank == 1) {
		/* Abort once both peers wait inside the barrier. */
		for (int p = 0; p < P; p += 2)
			while (
			    !seq_reached(shmcoll__probe_step(c, p), shmcoll__probe_my_step(c) + 1))
				sched_yield();
		if (how == 0) {
			struct sigaction sa = {.sa_handler = on_usr1};

			handler_comm = c;
			sigemptyset(&sa.sa_mask);
			if (sigaction(SIGUSR1, &sa, NULL) != 0 || raise(SIGUSR1) != 0)
				return 1;
		} else {
			if (pthread_create(&th, NULL, abort_thread, c) != 0)
				return 2;
			pthread_join(th, NULL);
		}
	}
	if (shmcoll_barrier(c) != -ECANCELED)
		return 3;
	if (shmcoll_allreduce(&how, &how, 1, SHMCOLL_INT32, SHMCOLL_SUM, c) != -ECANCELED)
		return 4;
	return 0; /* the harness then destroys the communicator */
}

Test(faults, abort_from_a_signal_handler, .timeout = 120)
{
	int how = 0;
	th_opts o = {.timeout_ms = -1, .wall_ms = 60000};
	th_result res;

	th_run_ranks(P, abort_body, &how, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

Test(faults, abort_from_another_thread, .timeout = 120)
{
	int how = 1;
	th_opts o = {.timeout_ms = -1, .wall_ms = 60000};
	th_result res;

	th_run_ranks(P, abort_body, &how, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

/* ---- a rank that left early ---- */

/* Rank 2 returns at once (the harness destroys its communicator) while the
 * others call a barrier: they learn it left, instead of waiting for the
 * timeout. Ranks as threads: no process dies, so only this tells. */
static int left_body(shmcoll_comm *c, int rank, void *arg)
{
	int processes = *(int *)arg, rc;

	if (rank == VICTIM)
		return 0;
	rc = shmcoll_barrier(c);
	/* A process that left also exits: whichever a survivor sees first. */
	if (processes && rc == -EOWNERDEAD) {
		if (!strstr(shmcoll_last_error(c), "rank 2 (pid"))
			return 4;
	} else if (rc != -EPROTO) {
		return 1;
	} else if (!strstr(shmcoll_last_error(c), "rank 2 destroyed its communicator") &&
	           !strstr(shmcoll_last_error(c), "detected mismatched calls")) {
		return 2; /* the other survivor may see it first and break it */
	}
	return shmcoll_barrier(c) == -ECANCELED ? 0 : 3;
}

Test(faults, rank_that_left_is_a_mismatch, .timeout = 120)
{
	th_opts o = {.timeout_ms = 60000, .wall_ms = 90000};
	th_result res;
	int processes = 0;

	th_run_threads(P, left_body, &processes, &o, &res);
	cr_assert(res.ok, "threads: %s", res.summary);
	processes = 1;
	th_run_ranks(P, left_body, &processes, &o, &res);
	cr_assert(res.ok, "processes: %s", res.summary);
}
