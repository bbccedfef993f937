/* test_faults.c - what survivors see when a rank dies: SIGKILL before, during
 * and after each collective, with small messages and with large pipelined
 * ones. Every survivor's first call that needs the dead rank returns
 * -EOWNERDEAD naming it; calls that did not need it return their correct
 * result; later calls return -ECANCELED quoting the cause; nothing hangs and
 * no segment is left. Also: a stopped (not dead) rank gives -ETIMEDOUT, and
 * shmcoll_comm_abort from a signal handler or another thread wakes everyone.
 * Point-to-point too: a rank blocked in shmcoll_recv (or with receives, a send and an
 * iallreduce outstanding) when its peer dies, leaves, times out or is aborted.
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

/* ---- point-to-point ---- */

/* How the victim goes: SIGKILL, or _exit without shmcoll_comm_destroy, once the survivors
 * are about to wait for it; or SIGKILL right after announcing a rendezvous message (its
 * request to send is in the ring, its data never comes). */
enum p2p_how { P2P_KILL, P2P_EXIT, P2P_RDV_KILL };

struct p2p_fault {
	int how;
	int reqs;                 /* survivors wait in requests, not in one shmcoll_recv */
	_Atomic int waiting;      /* survivors about to wait */
	_Atomic int finished;     /* survivors done */
	_Atomic int64_t death_ns; /* when the victim died */
	_Atomic int64_t worst_ns; /* the slowest survivor's detection time */
};

#define P2P_BYTES (1024 * 1024)

/* Survivors leave together: a rank that destroyed its communicator and exited is taken
 * for a dead one by a peer still waiting in point-to-point for another rank (a library
 * bug: tests/test_p2p.c, bug_finished_peer_seen_as_dead), which would blame the wrong
 * rank here. Returns rc. */
static int p2p_leave_together(_Atomic int *finished, int n, int rc)
{
	atomic_fetch_add(finished, 1);
	while (atomic_load(finished) < n)
		sched_yield();
	return rc;
}

static int p2p_err_ok(int rc)
{
	return rc == -EOWNERDEAD || rc == -ECANCELED;
}

/* Every request of a survivor completes with -EOWNERDEAD or -ECANCELED: rank 0 waits for
 * them all with shmcoll_waitall, rank 1 polls each with shmcoll_test (a test that finds
 * its request pending looks for dead peers too). Returns 0 or a code. */
static int p2p_fault_reqs(shmcoll_comm *c, int rank, unsigned char *buf, unsigned char *big)
{
	enum { NREQ = 5 };
	shmcoll_request *reqs[NREQ];
	shmcoll_status sts[NREQ];
	int32_t x = 1, y = 0;
	int i, rc, done, left;

	if (shmcoll_irecv(buf, 64, SHMCOLL_UINT8, VICTIM, 1, c, &reqs[0]) ||
	    shmcoll_irecv(buf + 64, 64, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, c,
	                  &reqs[1]) ||
	    shmcoll_irecv(buf + 128, 64, SHMCOLL_UINT8, 1 - rank, 2, c, &reqs[2]) ||
	    shmcoll_iallreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_SUM, c, &reqs[3]) ||
	    shmcoll_isend(big, P2P_BYTES, SHMCOLL_UINT8, VICTIM, 3, c, &reqs[4]))
		return 30;
	if (rank == 0) {
		for (i = 0; i < NREQ; i++)
			sts[i].error = 12345;
		rc = shmcoll_waitall(NREQ, reqs, sts);
		if (!p2p_err_ok(rc))
			return 31;
		for (i = 0; i < NREQ; i++)
			if (reqs[i] || !p2p_err_ok(sts[i].error))
				return 32 + i;
		return 0;
	}
	for (left = NREQ; left;) {
		for (i = 0; i < NREQ; i++) {
			if (!reqs[i])
				continue;
			rc = shmcoll_test(&reqs[i], &done, NULL);
			if (!done)
				continue;
			if (!p2p_err_ok(rc))
				return 40 + i;
			left--;
		}
		sched_yield();
	}
	return 0;
}

static int p2p_fault_survive(shmcoll_comm *c, int rank, struct p2p_fault *f);

static int p2p_fault_body(shmcoll_comm *c, int rank, void *arg)
{
	struct p2p_fault *f = arg;
	unsigned char *big;
	shmcoll_request *r;

	if (rank != VICTIM)
		return p2p_leave_together(&f->finished, P - 1, p2p_fault_survive(c, rank, f));
	big = calloc(1, P2P_BYTES);
	if (!big)
		return 1;
	/* Streamed (an ordinary buffer, no single copies): it moves only while the victim
	 * lives. */
	if (f->how == P2P_RDV_KILL &&
	    shmcoll_isend(big, P2P_BYTES, SHMCOLL_UINT8, 0, 5, c, &r) != 0)
		return 90;
	while (atomic_load(&f->waiting) < P - 1)
		sched_yield();
	atomic_store(&f->death_ns, now_ns());
	if (f->how == P2P_EXIT)
		_exit(42);
	raise(SIGKILL);
	return 91;
}

/* A survivor: waits for the victim, in shmcoll_recv or in requests. */
static int p2p_fault_survive(shmcoll_comm *c, int rank, struct p2p_fault *f)
{
	unsigned char *buf = calloc(1, P2P_BYTES), *big = calloc(1, P2P_BYTES);
	shmcoll_status st;
	char want[32];
	int64_t took;
	int rc;

	if (!buf || !big)
		return 1;
	atomic_fetch_add(&f->waiting, 1);
	if (f->reqs) {
		rc = p2p_fault_reqs(c, rank, buf, big);
		if (rc)
			return rc;
	} else if (rank == 0) {
		/* From the victim itself: its message (or the rest of it) never comes. */
		rc = shmcoll_recv(buf, P2P_BYTES, SHMCOLL_UINT8, VICTIM, 5, c, &st);
		if (rc != -EOWNERDEAD)
			return 10;
	} else {
		/* From anyone: the victim is one who could send. */
		rc = shmcoll_recv(buf, 64, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, c,
		                  &st);
		if (rc != -EOWNERDEAD)
			return 11;
	}
	took = now_ns() - atomic_load(&f->death_ns);
	for (int64_t cur = atomic_load(&f->worst_ns); took > cur;)
		if (atomic_compare_exchange_weak(&f->worst_ns, &cur, took))
			break;
	if (took > DETECT_BOUND_NS)
		return 15;
	snprintf(want, sizeof(want), "rank %d", VICTIM);
	if (!strstr(shmcoll_last_error(c), want) || !strstr(shmcoll_last_error(c), "died")) {
		fprintf(stderr, "p2p fault, rank %d: the message does not name the dead rank: %s\n",
		        rank, shmcoll_last_error(c));
		return 16;
	}
	/* Broken from now on, for point-to-point too, and it says why. */
	if (shmcoll_recv(buf, 64, SHMCOLL_UINT8, 1 - rank, 0, c, &st) != -ECANCELED ||
	    shmcoll_barrier(c) != -ECANCELED || !strstr(shmcoll_last_error(c), "died"))
		return 17;
	free(buf);
	free(big);
	return 0;
}

/* No arena of job is left in /dev/shm. */
static void p2p_no_arena_left(const char *name, const char *job)
{
	char path[256];

	cr_assert(shmcoll__arena_name(path, sizeof(path), job) == 0);
	memmove(path + 8, path, strlen(path) + 1);
	memcpy(path, "/dev/shm", 8);
	cr_assert(access(path, F_OK) != 0, "%s: %s left behind", name, path);
}

static void run_p2p_fault(enum p2p_how how, int reqs, const char *name)
{
	struct p2p_fault *f =
	    mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.timeout_ms = 60000, .wall_ms = 100000, .grace_ms = 60000};
	th_result res;

	cr_assert(f != MAP_FAILED);
	memset(f, 0, sizeof(*f));
	f->how = how;
	f->reqs = reqs;
	th_run_ranks(P, p2p_fault_body, f, &o, &res);
	cr_assert(!res.timed_out, "%s: hung: %s", name, res.summary);
	if (how == P2P_EXIT)
		cr_assert(res.rank[VICTIM].code == 42, "%s: the victim did not exit: %s", name,
		          res.summary);
	else
		cr_assert(res.rank[VICTIM].signo == SIGKILL,
		          "%s: the victim did not die as planned: %s", name, res.summary);
	for (int r = 0; r < P; r++)
		if (r != VICTIM)
			cr_assert(res.rank[r].code == 0 && res.rank[r].signo == 0,
			          "%s: survivor %d failed (code %d): %s", name, r, res.rank[r].code,
			          res.summary);
	p2p_no_arena_left(name, res.job);
	printf("faults: %-36s detected in %6.1f ms\n", name,
	       (double)atomic_load(&f->worst_ns) / 1e6);
	fflush(stdout);
	munmap(f, sizeof(*f));
}

Test(faults, p2p_recv_from_killed_rank, .timeout = 200)
{
	run_p2p_fault(P2P_KILL, 0, "p2p recv, sender killed");
}

Test(faults, p2p_recv_from_rank_that_exited, .timeout = 200)
{
	run_p2p_fault(P2P_EXIT, 0, "p2p recv, sender exited");
}

Test(faults, p2p_recv_of_rendezvous_sender_killed, .timeout = 200)
{
	run_p2p_fault(P2P_RDV_KILL, 0, "p2p recv, rendezvous, sender killed");
}

Test(faults, p2p_requests_and_iallreduce_outstanding, .timeout = 200)
{
	run_p2p_fault(P2P_KILL, 1, "p2p requests + iallreduce, killed");
	run_p2p_fault(P2P_EXIT, 1, "p2p requests + iallreduce, exited");
}

/* Every rank waits in shmcoll_recv for a message nobody sends; a thread of rank 0 aborts
 * the communicator once all are about to: every one returns -ECANCELED, and so does the
 * next call. */
struct p2p_abort {
	_Atomic int waiting;
	_Atomic int finished;
	shmcoll_comm *comm; /* rank 0's, for its abort thread */
};

static void *p2p_abort_thread(void *arg)
{
	struct p2p_abort *a = arg;

	while (atomic_load(&a->waiting) < P)
		sched_yield();
	shmcoll_comm_abort(a->comm);
	return NULL;
}

static int p2p_abort_waits(shmcoll_comm *c, int rank, struct p2p_abort *a);

static int p2p_abort_body(shmcoll_comm *c, int rank, void *arg)
{
	struct p2p_abort *a = arg;

	return p2p_leave_together(&a->finished, P, p2p_abort_waits(c, rank, a));
}

static int p2p_abort_waits(shmcoll_comm *c, int rank, struct p2p_abort *a)
{
	unsigned char buf[16];
	shmcoll_status st;
	pthread_t th;
	int rc;

	if (rank == 0) {
		a->comm = c;
		if (pthread_create(&th, NULL, p2p_abort_thread, a) != 0)
			return 1;
	}
	atomic_fetch_add(&a->waiting, 1);
	rc = shmcoll_recv(buf, sizeof(buf), SHMCOLL_UINT8,
	                  rank == 2 ? SHMCOLL_ANY_SOURCE : (rank + 1) % P, 0, c, &st);
	if (rank == 0)
		pthread_join(th, NULL);
	if (rc != -ECANCELED)
		return 2;
	if (shmcoll_send(buf, 1, SHMCOLL_UINT8, (rank + 1) % P, 0, c) != -ECANCELED)
		return 3;
	return shmcoll_barrier(c) == -ECANCELED ? 0 : 4;
}

Test(faults, p2p_abort_from_another_thread_wakes_recv, .timeout = 120)
{
	struct p2p_abort *a =
	    mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.timeout_ms = -1, .wall_ms = 60000};
	th_result res;

	cr_assert(a != MAP_FAILED);
	memset(a, 0, sizeof(*a));
	th_run_ranks(P, p2p_abort_body, a, &o, &res);
	cr_assert(res.ok, "processes: %s", res.summary);
	memset(a, 0, sizeof(*a));
	th_run_threads(P, p2p_abort_body, a, &o, &res);
	cr_assert(res.ok, "threads: %s", res.summary);
	munmap(a, sizeof(*a));
}

/* Nobody sends: a receive (blocking, a waited request, or a large send nobody receives)
 * times out with -ETIMEDOUT naming the peer, then the communicator is broken. Rank 1 makes
 * no call until rank 0's has failed: it then finds the communicator broken. */
struct p2p_timeout {
	int how; /* 0: shmcoll_recv; 1: irecv + waitall; 2: a rendezvous send; 3: P = 1 */
	_Atomic int done;
};

static int p2p_timeout_body(shmcoll_comm *c, int rank, void *arg)
{
	struct p2p_timeout *t = arg;
	static unsigned char big[P2P_BYTES]; /* read only by a receive that never comes */
	unsigned char buf[16];
	shmcoll_request *r;
	int rc, peer = t->how == 3 ? 0 : 1 - rank;

	if (rank == 1) {
		while (!atomic_load(&t->done))
			sched_yield();
		return shmcoll_recv(buf, sizeof(buf), SHMCOLL_UINT8, 0, 0, c, NULL) == -ECANCELED
		           ? 0
		           : 1;
	}
	if (t->how == 1) {
		if (shmcoll_irecv(buf, sizeof(buf), SHMCOLL_UINT8, peer, 0, c, &r) != 0)
			return 2;
		rc = shmcoll_waitall(1, &r, NULL);
	} else if (t->how == 2) {
		rc = shmcoll_send(big, sizeof(big), SHMCOLL_UINT8, peer, 0, c);
	} else {
		rc = shmcoll_recv(buf, sizeof(buf), SHMCOLL_UINT8, peer, 0, c, NULL);
	}
	if (rc != -ETIMEDOUT)
		return 3;
	if (!strstr(shmcoll_last_error(c), "timed out"))
		return 4;
	rc = shmcoll_recv(buf, sizeof(buf), SHMCOLL_UINT8, peer, 0, c, NULL);
	atomic_store(&t->done, 1);
	return rc == -ECANCELED && shmcoll_barrier(c) == -ECANCELED ? 0 : 5;
}

Test(faults, p2p_recv_times_out, .timeout = 120)
{
	static const char *const names[] = {"recv", "irecv + waitall", "rendezvous send",
	                                    "recv from self, P = 1"};
	struct p2p_timeout *t =
	    mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.timeout_ms = 300, .wall_ms = 60000};
	th_result res;

	cr_assert(t != MAP_FAILED);
	for (int how = 0; how < 4; how++) {
		memset(t, 0, sizeof(*t));
		t->how = how;
		th_run_ranks(how == 3 ? 1 : 2, p2p_timeout_body, t, &o, &res);
		cr_assert(res.ok, "%s: %s", names[how], res.summary);
		p2p_no_arena_left(names[how], res.job);
	}
	munmap(t, sizeof(*t));
}

/* A rank returns at once (the harness destroys its communicator) while the others wait in
 * shmcoll_recv for its message: they learn it left (-EPROTO; as processes, its exit may be
 * seen first: -EOWNERDEAD) instead of waiting for the timeout. */
struct p2p_left {
	int processes;
	_Atomic int finished; /* survivors done */
};

static int p2p_left_waits(shmcoll_comm *c, int processes);

static int p2p_left_body(shmcoll_comm *c, int rank, void *arg)
{
	struct p2p_left *l = arg;

	if (rank == VICTIM)
		return 0;
	return p2p_leave_together(&l->finished, P - 1, p2p_left_waits(c, l->processes));
}

static int p2p_left_waits(shmcoll_comm *c, int processes)
{
	unsigned char buf[16];
	int rc;

	rc = shmcoll_recv(buf, sizeof(buf), SHMCOLL_UINT8, VICTIM, 0, c, NULL);
	if (processes && rc == -EOWNERDEAD)
		return strstr(shmcoll_last_error(c), "rank 2 (pid") ? 0 : 4;
	if (rc != -EPROTO)
		return 1;
	if (!strstr(shmcoll_last_error(c), "rank 2 destroyed its communicator") &&
	    !strstr(shmcoll_last_error(c), "detected mismatched calls"))
		return 2; /* the other survivor may see it first and break it */
	return shmcoll_barrier(c) == -ECANCELED ? 0 : 3;
}

Test(faults, p2p_recv_from_rank_that_left, .timeout = 120)
{
	struct p2p_left *l =
	    mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.timeout_ms = 60000, .wall_ms = 90000};
	th_result res;

	cr_assert(l != MAP_FAILED);
	memset(l, 0, sizeof(*l));
	th_run_threads(P, p2p_left_body, l, &o, &res);
	cr_assert(res.ok, "threads: %s", res.summary);
	memset(l, 0, sizeof(*l));
	l->processes = 1;
	th_run_ranks(P, p2p_left_body, l, &o, &res);
	cr_assert(res.ok, "processes: %s", res.summary);
	munmap(l, sizeof(*l));
}

/* A rank that finished a collective and left - destroyed its communicator, then exited - is
 * not dead to a root still waiting in that collective for a late rank: only a rank that
 * exits without destroying its communicator is (the liveness check once took any exited
 * process for dead, and failed the root with "rank 1 died"). Rank 2 joins the gather only
 * once rank 1's process is gone and the root has had time to check on it (the sleep gives
 * the check its chance; a correct library passes whatever the timing). */
static int finished_gather_body(shmcoll_comm *c, int rank, void *arg)
{
	/* The root checks one rank per check, a check per sleep slice of up to 50 ms. */
	const struct timespec look = {0, 400 * 1000 * 1000};
	struct pollfd pfd = {.events = POLLIN};
	int32_t v = rank * 7, all[3] = {-1, -1, -1};
	int rc;

	(void)arg;
	if (rank == 2) {
		/* ESRCH: rank 1 is gone already (a slow start here, under a sanitizer, lets the
		 * harness reap it first), which is what this waits for. */
		pfd.fd = (int)syscall(SYS_pidfd_open, shmcoll__probe_pid(c, 1), 0u);
		if (pfd.fd < 0 && errno != ESRCH)
			return 10;
		if (pfd.fd >= 0) {
			while (poll(&pfd, 1, -1) != 1)
				;
			close(pfd.fd);
		}
		nanosleep(&look, NULL);
	}
	rc = shmcoll_gather(&v, all, 1, SHMCOLL_INT32, 0, c);
	if (rc)
		return 1;
	if (rank == 0 && (all[0] != 0 || all[1] != 7 || all[2] != 14))
		return 2;
	return 0;
}

Test(faults, finished_rank_is_not_dead, .timeout = 120)
{
	th_opts o = {.timeout_ms = 60000, .wall_ms = 60000};
	th_result res;

	th_run_ranks(3, finished_gather_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}
