/* wait.c - spin, yield, futex sleep; bounded by a timeout and an abort word.
 *
 * Measured on the reference machine (the 2-vCPU VM of docs/BENCHMARKS.md): a
 * spinning hand-off across cores takes ~30 ns, a sched_yield hand-off ~1.2 us,
 * a futex wake of a sleeper on an idle vCPU 14-25 us. So with a core per rank
 * we spin for a while first; with more ranks than cores any spin only delays
 * the peer we wait for (it cannot run), so we yield at once, and sleep after
 * ~1 ms. */
#include "shm/wait.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm/atomics.h"

/* Spins before the first yield when every rank has a core: ~20-60 us. */
#define SPIN_ITERS 4096
/* Time spent yielding before sleeping on the futex. */
#define YIELD_NS 1000000
/* Longest single futex sleep: a wake that races with the abort check, or a
 * peer's death (nobody wakes us for it), costs at most this much delay. */
#define SLEEP_SLICE_NS 50000000
/* How long a store may sit in a publisher's store buffer before other CPUs see
 * it, as far as a sleeper relies on it (see futex_sleep): store buffers drain
 * in well under a microsecond, and an interrupt or a context switch drains
 * them. A sleeper's first sleep is this long; futex timer slack (50 us by
 * default) makes it longer, never shorter. */
#define DRAIN_NS 20000

int64_t shmcoll__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Shared (not FUTEX_PRIVATE) operations: peers are other processes. */
void shmcoll__futex_wait(_Atomic uint32_t *word, uint32_t val, int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};

	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void shmcoll__wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shmcoll__publish(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t val)
{
	/* A release store and a plain load, no fence between them: a
	 * sequentially consistent store (xchg on x86) waits until this CPU owns
	 * word's line, which the peers polling it keep taking; at P=2 that wait
	 * was a third of a small rooted call (8 B bcast 0.038 against 0.024 us,
	 * docs/BENCHMARKS.md). So the load may see no sleeper while val still
	 * sits in the store buffer, and a sleeper that registered meanwhile may
	 * read the old value and sleep; futex_sleep() bounds that sleep by
	 * DRAIN_NS and then reads word again. */
	store_release(word, val);
	if (load_relaxed(sleepers) != 0)
		shmcoll__wake_all(word);
}

void shmcoll__publish_fenced(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t val)
{
	/* The same pairing with futex_sleep(); the store waits for word's line. */
	store_seqcst(word, val);
	if (load_seqcst(sleepers) != 0)
		shmcoll__wake_all(word);
}

static void futex_sleep(_Atomic uint32_t *word, _Atomic uint32_t *sleepers, uint32_t want,
                        int64_t ns)
{
	uint32_t cur;

	/* The fetch-add is visible to every CPU once it returns: a publisher
	 * whose load of sleepers comes later wakes us. One whose load came
	 * earlier may have its store still buffered when we read word below, so
	 * the first sleep lasts at most DRAIN_NS; by then that store is visible
	 * and the second read sees it. A wake-up lost that way costs DRAIN_NS
	 * (plus timer slack) once; a publisher whose store has not happened yet
	 * sees the count and wakes us. */
	fetch_add_seqcst(sleepers, 1);
	cur = load_relaxed(word);
	if (!seq_reached(cur, want)) {
		shmcoll__futex_wait(word, cur, ns < DRAIN_NS ? ns : DRAIN_NS);
		cur = load_relaxed(word);
		if (ns > DRAIN_NS && !seq_reached(cur, want))
			shmcoll__futex_wait(word, cur, ns - DRAIN_NS);
	}
	fetch_sub_seqcst(sleepers, 1);
}

/* The process's slow yields in the current window of SLOW_WINDOW_NS (when it
 * began, how many), and until when its CPU counts as contended
 * (CLOCK_MONOTONIC ns). Process-wide, read and written on slow paths only; a
 * lost update between threads is harmless. A lone slow yield (a timer tick, a
 * peer's long copy: 1-3 in 4,000 at P=4 on 2 CPUs, over seconds) never makes
 * a CPU contended; a busy machine's do: under EEVDF one yield in three gives
 * a busy process its whole slice (4 ms here), the next two return at once. */
#define SLOW_WINDOW_NS 50000000
static _Atomic int64_t slow_since;
static _Atomic unsigned slow_yields;
static _Atomic int64_t contended_until;
/* The most ranks of one job this process shares a node with (0: none yet). */
static _Atomic unsigned job_ranks;

void shmcoll__pace_job(unsigned ranks)
{
	unsigned had = load_relaxed(&job_ranks);

	while (had < ranks && !cas_weak_relaxed(&job_ranks, &had, ranks))
		;
}

/* Whether more threads are runnable on the machine than the job has ranks here:
 * then the slices that made yields slow went to work outside the job. The
 * fourth field of /proc/loadavg counts the runnable threads now, this one
 * included. Four ranks on two CPUs make slow yields among themselves (a peer's
 * 1 MiB reduction is a turn of a millisecond) and are never more than four. A
 * machine whose count is not readable (no /proc, a sandbox) is taken as busy. */
static int busy_beyond_job(void)
{
	char buf[128], *slash;
	unsigned ranks = load_relaxed(&job_ranks);
	ssize_t len;
	long running;
	int fd;

	if (ranks == 0)
		return 1;
	fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	len = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (len <= 0)
		return 1;
	buf[len] = '\0';
	slash = strchr(buf, '/');
	if (!slash)
		return 1;
	while (slash > buf && slash[-1] != ' ')
		slash--;
	running = strtol(slash, NULL, 10);
	return running <= 0 || running > (long)ranks;
}

int shmcoll__pace_contended(int64_t now)
{
	return load_relaxed(&contended_until) > now;
}

/* Whether the process's last look found the peer on its CPU (shmcoll__pace_look). */
_Atomic int shmcoll__pace_peer_was_here;

int shmcoll__pace_peer_here(const struct shmcoll_cpus *cpus)
{
	/* The rseq area's copy: ~2 ns, paid only by a wait that spun this far (or
	 * did not find its word at once, while the peer was here). */
	int cpu = sched_getcpu() + 1; /* 0: not known */
	int here;

	store_relaxed(cpus->mine, cpu);
	here = cpu > 0 && load_relaxed(cpus->theirs) == cpu;
	if (load_relaxed(&shmcoll__pace_peer_was_here) != here)
		store_relaxed(&shmcoll__pace_peer_was_here, here);
	return here;
}

int shmcoll__pace_yield(int64_t waited_ns, int64_t now)
{
	int64_t after;
	unsigned slow;

	if (waited_ns >= YIELD_NS || shmcoll__pace_contended(now))
		return 0;
	sched_yield();
	after = shmcoll__now_ns();
	/* Our own ranks' turns are short; a slow one was a time slice that went to
	 * someone else. Two in one window: a busy machine. */
	if (after - now <= SHMCOLL_PACE_SLOW_YIELD_NS)
		return 1;
	if (after - load_relaxed(&slow_since) > SLOW_WINDOW_NS) {
		store_relaxed(&slow_since, after);
		store_relaxed(&slow_yields, 0);
	}
	slow = load_relaxed(&slow_yields) + 1;
	store_relaxed(&slow_yields, slow);
	if (slow >= 2 && busy_beyond_job())
		store_relaxed(&contended_until, after + SHMCOLL_PACE_CONTENDED_NS);
	return 1;
}

int shmcoll__wait_geq_on(const struct shmcoll_waiter *w, _Atomic uint32_t *word,
                         _Atomic uint32_t *sleepers, uint32_t want, const struct shmcoll_cpus *cpus)
{
	int64_t start, now, slice, checked;
	int i, rc, polled = 0;

	/* Spin relaxed, order once: the acquire fence after the loop pairs
	 * with the release store in shmcoll__publish(). */
	if (!w->oversubscribed) {
		int look = shmcoll__pace_look();

		for (i = 0; i < SPIN_ITERS; i++) {
			if (seq_reached(load_relaxed(word), want)) {
				fence_acquire();
				return 0;
			}
			if (i == look && cpus && shmcoll__pace_peer_here(cpus))
				break;
			if (w->poll && (i + 1) % SHMCOLL_POLL_SPINS == 0)
				w->poll(w->poll_ctx, 0);
			cpu_relax();
		}
	} else if (seq_reached(load_relaxed(word), want)) {
		fence_acquire();
		return 0;
	}

	start = shmcoll__now_ns();
	checked = start;
	for (;;) {
		if (seq_reached(load_relaxed(word), want)) {
			fence_acquire();
			return 0;
		}
		if (load_relaxed(w->abort_word))
			return -ECANCELED;
		now = shmcoll__now_ns();
		if (w->check && now - checked >= SHMCOLL_CHECK_NS) {
			checked = now;
			rc = w->check(w->check_ctx);
			if (rc < 0)
				return rc;
		}
		if (w->timeout_ns >= 0 && now - start >= w->timeout_ns)
			return -ETIMEDOUT;
		if (w->poll)
			polled = w->poll(w->poll_ctx, 1);
		if (shmcoll__pace_yield(now - start, now))
			continue;
		slice = polled ? SHMCOLL_POLL_SLICE_NS : SLEEP_SLICE_NS;
		if (w->timeout_ns >= 0 && w->timeout_ns - (now - start) < slice)
			slice = w->timeout_ns - (now - start);
		futex_sleep(word, sleepers, want, slice);
	}
}
