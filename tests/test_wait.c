/* test_wait.c - the wait primitive: wrap-safe arrival, timeout, abort, futex
 * sleep and wake, and an invariant held over many ping-pong rounds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/atomics.h"
#include "shm/wait.h"

static _Atomic uint32_t no_abort;

static struct shmcoll_waiter waiter(int64_t timeout_ns, int oversubscribed)
{
	struct shmcoll_waiter w = {
	    .timeout_ns = timeout_ns, .abort_word = &no_abort, .oversubscribed = oversubscribed};
	return w;
}

Test(wait, seq_reached_is_wrap_safe)
{
	cr_assert(seq_reached(5, 5));
	cr_assert(seq_reached(6, 5));
	cr_assert_not(seq_reached(4, 5));
	cr_assert(seq_reached(2, UINT32_MAX - 1), "wrapped past the top");
	cr_assert_not(seq_reached(UINT32_MAX - 1, 2));
	cr_assert(seq_reached(0x80000000u + 4, 5));
}

Test(wait, returns_at_once_when_reached)
{
	_Atomic uint32_t word = 10, sleepers = 0;
	struct shmcoll_waiter w = waiter(0, 0);

	/* A zero timeout would fail any wait that reached its slow path. */
	cr_assert_eq(shmcoll__wait_geq(&w, &word, &sleepers, 10), 0);
	cr_assert_eq(shmcoll__wait_geq(&w, &word, &sleepers, 3), 0);
	store_relaxed(&word, 1u);
	cr_assert_eq(shmcoll__wait_geq(&w, &word, &sleepers, UINT32_MAX), 0,
	             "1 is two steps after UINT32_MAX");
}

Test(wait, times_out)
{
	for (int over = 0; over < 2; over++) {
		_Atomic uint32_t word = 0, sleepers = 0;
		struct shmcoll_waiter w = waiter(30 * 1000000, over);
		int64_t t0 = shmcoll__now_ns();

		cr_assert_eq(shmcoll__wait_geq(&w, &word, &sleepers, 1), -ETIMEDOUT);
		cr_assert_geq(shmcoll__now_ns() - t0, 30 * 1000000, "not before the timeout");
		cr_assert_eq(load_relaxed(&sleepers), 0, "a sleeper that left unregistered");
	}
}

Test(wait, abort_word_cancels)
{
	_Atomic uint32_t word = 0, sleepers = 0, abort_word = 1;
	struct shmcoll_waiter w = {.timeout_ns = -1, .abort_word = &abort_word};

	cr_assert_eq(shmcoll__wait_geq(&w, &word, &sleepers, 1), -ECANCELED);
}

struct sleeper_arg {
	_Atomic uint32_t word, sleepers, abort_word;
	int rc;
	int64_t timeout_ns;
};

static void *sleeper(void *p)
{
	struct sleeper_arg *a = p;
	struct shmcoll_waiter w = {
	    .timeout_ns = a->timeout_ns, .abort_word = &a->abort_word, .oversubscribed = 1};

	a->rc = shmcoll__wait_geq(&w, &a->word, &a->sleepers, 1);
	return NULL;
}

Test(wait, publish_wakes_a_futex_sleeper, .timeout = 30)
{
	struct sleeper_arg a = {.timeout_ns = 20ll * 1000000000};
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, sleeper, &a), 0);
	/* Wait until it sleeps on the futex (it registers first), however long
	 * that takes: no timing assumption. */
	while (load_seqcst(&a.sleepers) == 0)
		usleep(1000);
	shmcoll__publish(&a.word, &a.sleepers, 1);
	pthread_join(t, NULL);
	cr_assert_eq(a.rc, 0);
	cr_assert_eq(load_relaxed(&a.sleepers), 0);
}

Test(wait, abort_wakes_a_futex_sleeper, .timeout = 30)
{
	struct sleeper_arg a = {.timeout_ns = -1};
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, sleeper, &a), 0);
	while (load_seqcst(&a.sleepers) == 0)
		usleep(1000);
	store_seqcst(&a.abort_word, 1u);
	shmcoll__wake_all(&a.word);
	pthread_join(t, NULL);
	cr_assert_eq(a.rc, -ECANCELED);
}

/* Two processes hand a token back and forth through two shared words; each
 * round the payload written before publishing must be the one read after
 * waiting: the release/acquire pairing, held over many rounds. */
struct pingpong {
	_Atomic uint32_t seq[2], sleepers[2];
	uint64_t payload[2];
};

static int pingpong_side(struct pingpong *pp, int me, uint32_t rounds, int over)
{
	struct shmcoll_waiter w = waiter(60ll * 1000000000, over);
	uint32_t r;

	for (r = 1; r <= rounds; r++) {
		if (me == 1 || r > 1) {
			if (shmcoll__wait_geq(&w, &pp->seq[!me], &pp->sleepers[!me],
			                      me == 0 ? r - 1 : r) != 0)
				return 2;
			if (pp->payload[!me] != (uint64_t)(me == 0 ? r - 1 : r) * 3 + !me)
				return 3;
		}
		pp->payload[me] = (uint64_t)r * 3 + (uint64_t)me;
		shmcoll__publish(&pp->seq[me], &pp->sleepers[me], r);
	}
	return 0;
}

static void run_pingpong(int over, uint32_t rounds)
{
	struct pingpong *pp =
	    mmap(NULL, sizeof(*pp), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int st0, st1;
	pid_t a, b;

	cr_assert_neq(pp, MAP_FAILED);
	a = fork();
	if (a == 0)
		_exit(pingpong_side(pp, 0, rounds, over));
	b = fork();
	if (b == 0)
		_exit(pingpong_side(pp, 1, rounds, over));
	waitpid(a, &st0, 0);
	waitpid(b, &st1, 0);
	cr_assert(WIFEXITED(st0) && WEXITSTATUS(st0) == 0, "side 0 status %#x", st0);
	cr_assert(WIFEXITED(st1) && WEXITSTATUS(st1) == 0, "side 1 status %#x", st1);
	munmap(pp, sizeof(*pp));
}

Test(wait, pingpong_spinning, .timeout = 120)
{
	run_pingpong(0, 200000);
}

Test(wait, pingpong_yielding, .timeout = 120)
{
	run_pingpong(1, 50000);
}

/* ---- pace: where the peer runs, and whether yielding pays (shm/wait.h) ---- */

/* Pins the caller to the first CPU it may use; returns it. */
static int pin_first_cpu(void)
{
	cpu_set_t set, one;
	int c;

	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	for (c = 0; c < CPU_SETSIZE && !CPU_ISSET(c, &set); c++)
		;
	cr_assert(c < CPU_SETSIZE);
	CPU_ZERO(&one);
	CPU_SET(c, &one);
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	return c;
}

Test(wait, pace_stops_spinning_for_a_peer_on_this_cpu)
{
	_Atomic int32_t mine = 0, theirs = 0;
	const struct shmcoll_cpus cpus = {&mine, &theirs};
	int c = pin_first_cpu();

	/* Unknown: spin. */
	cr_assert(!shmcoll__pace_peer_here(&cpus));
	cr_assert_eq(load_relaxed(&mine), c + 1, "the waiter says where it runs");
	/* Elsewhere: spin. */
	store_relaxed(&theirs, c + 2);
	cr_assert(!shmcoll__pace_peer_here(&cpus));
	/* Here: the peer cannot run while we spin. */
	store_relaxed(&theirs, c + 1);
	cr_assert(shmcoll__pace_peer_here(&cpus));
}

/* A wait looks at its first spin while the last look found the peer here, and at
 * SHMCOLL_PACE_LOOK again once one finds it elsewhere. */
Test(wait, pace_looks_at_once_while_the_peer_was_here)
{
	_Atomic int32_t mine = 0, theirs = 0;
	const struct shmcoll_cpus cpus = {&mine, &theirs};
	int c = pin_first_cpu();

	store_relaxed(&theirs, c + 2);
	cr_assert(!shmcoll__pace_peer_here(&cpus));
	cr_assert_eq(shmcoll__pace_look(), SHMCOLL_PACE_LOOK);
	store_relaxed(&theirs, c + 1);
	cr_assert(shmcoll__pace_peer_here(&cpus));
	cr_assert_eq(shmcoll__pace_look(), 0, "a peer found here is looked for at once");
	cr_assert(shmcoll__pace_peer_here(&cpus));
	cr_assert_eq(shmcoll__pace_look(), 0);
	store_relaxed(&theirs, c + 2);
	cr_assert(!shmcoll__pace_peer_here(&cpus));
	cr_assert_eq(shmcoll__pace_look(), SHMCOLL_PACE_LOOK, "elsewhere: spin first again");
}

Test(wait, pace_yields_only_at_first)
{
	/* Past the yielding time a turn sleeps, without yielding. */
	cr_assert_eq(shmcoll__pace_yield(2000000000, shmcoll__now_ns()), 0);
	cr_assert(!shmcoll__pace_contended(shmcoll__now_ns()));
}

static pid_t start_busy_process(void)
{
	pid_t hog = fork();

	cr_assert(hog >= 0);
	if (hog == 0) {
		volatile unsigned long x = 0;

		for (;;)
			x++;
	}
	return hog;
}

static void stop_busy_process(pid_t hog)
{
	int st;

	kill(hog, SIGKILL);
	waitpid(hog, &st, 0);
}

/* A busy process on the caller's CPU, outside a job of one rank, takes a time slice at every
 * yield: after a few the CPU counts as contended, and a turn sleeps instead of yielding. */
Test(wait, pace_finds_a_busy_cpu, .timeout = 60)
{
	int i;
	pid_t hog;

	pin_first_cpu();
	shmcoll__pace_job(1);
	hog = start_busy_process();
	for (i = 0; i < 200 && !shmcoll__pace_contended(shmcoll__now_ns()); i++)
		cr_assert_eq(shmcoll__pace_yield(0, shmcoll__now_ns()), 1);
	stop_busy_process(hog);
	cr_assert(shmcoll__pace_contended(shmcoll__now_ns()),
	          "200 yields beside a busy process on one CPU and none was slow");
	cr_assert(i >= 2, "contended after %d yield(s): a lone slow yield must not do it", i);
	cr_assert_eq(shmcoll__pace_yield(0, shmcoll__now_ns()), 0, "contended: sleep, not yield");
}

/* The same slow yields, with the job as large as anything the machine runs: the slices went to
 * the job's own ranks (four ranks on two CPUs take turns of a millisecond), so the CPU is not
 * marked contended and the waits keep yielding. */
Test(wait, pace_leaves_turns_among_its_own_ranks, .timeout = 60)
{
	int i, slow = 0;
	int64_t before, after;
	pid_t hog;

	if (access("/proc/loadavg", R_OK) != 0)
		cr_skip_test("no /proc/loadavg: without a runnable count every slow yield is "
		             "taken as a busy machine");
	pin_first_cpu();
	shmcoll__pace_job(1u << 20);
	hog = start_busy_process();
	for (i = 0; i < 200 && slow < 4; i++) {
		before = shmcoll__now_ns();
		cr_assert_eq(shmcoll__pace_yield(0, before), 1);
		after = shmcoll__now_ns();
		slow += after - before > SHMCOLL_PACE_SLOW_YIELD_NS;
		cr_assert(!shmcoll__pace_contended(after), "contended after %d slow yield(s)",
		          slow);
	}
	stop_busy_process(hog);
	cr_assert(slow >= 2, "only %d of 200 yields beside a busy process were slow", slow);
}

/* Both sides of the ping-pong on one CPU, not counted as oversubscribed, each saying where it
 * runs: the waits stop spinning for a peer on their own CPU and still pass every round. */
struct pingpong_cpus {
	struct pingpong pp;
	_Atomic int32_t cpu[2];
};

static int pingpong_cpu_side(struct pingpong_cpus *pc, int me, uint32_t rounds)
{
	struct shmcoll_waiter w = waiter(60ll * 1000000000, 0);
	const struct shmcoll_cpus cpus = {&pc->cpu[me], &pc->cpu[!me]};
	struct pingpong *pp = &pc->pp;
	uint32_t r;

	for (r = 1; r <= rounds; r++) {
		if (me == 1 || r > 1) {
			if (shmcoll__wait_geq_on(&w, &pp->seq[!me], &pp->sleepers[!me],
			                         me == 0 ? r - 1 : r, &cpus) != 0)
				return 2;
			if (pp->payload[!me] != (uint64_t)(me == 0 ? r - 1 : r) * 3 + !me)
				return 3;
		}
		pp->payload[me] = (uint64_t)r * 3 + (uint64_t)me;
		shmcoll__publish(&pp->seq[me], &pp->sleepers[me], r);
	}
	/* Each side saw the other on its CPU at least once (it spun past the look). */
	return load_relaxed(&pc->cpu[!me]) == load_relaxed(&pc->cpu[me]) ? 0 : 4;
}

Test(wait, pingpong_on_one_cpu, .timeout = 120)
{
	struct pingpong_cpus *pc =
	    mmap(NULL, sizeof(*pc), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int st0, st1;
	pid_t a, b;

	cr_assert_neq(pc, MAP_FAILED);
	pin_first_cpu();
	a = fork();
	if (a == 0)
		_exit(pingpong_cpu_side(pc, 0, 20000));
	b = fork();
	if (b == 0)
		_exit(pingpong_cpu_side(pc, 1, 20000));
	waitpid(a, &st0, 0);
	waitpid(b, &st1, 0);
	cr_assert(WIFEXITED(st0) && WEXITSTATUS(st0) == 0, "side 0 status %#x", st0);
	cr_assert(WIFEXITED(st1) && WEXITSTATUS(st1) == 0, "side 1 status %#x", st1);
	munmap(pc, sizeof(*pc));
}
