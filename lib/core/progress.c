/* progress.c - the progress of the whole process (progress.h): the registry of the
 * communicators with operations outstanding, the pass that advances every one no thread
 * holds, and the one background progress thread.
 *
 * Process-wide state, on purpose: MPI's progress rule is about a process, not a
 * communicator (rank 0 blocked on communicator A must move its part of a call on B that rank
 * 1 waits for), so something must know every communicator of the process. It is one
 * registry behind one mutex, as the arena's mappings are (shm/arena.c), and nothing else.
 *
 * The list. An intrusive doubly linked list under `m`. A pass holds `m` only to step from
 * one communicator to the next, never while it advances one: it takes the communicator's
 * hold (compare-and-swap 0 -> 2; a held one is skipped, and a private one unless this is
 * its owner's thread outside its calls: progress.h), lets go of `m`, advances it, takes
 * `m` again to read its successor and gives the hold back. A communicator it holds stays
 * listed meanwhile (its owner unlists it only holding it), so the successor read then is
 * current; the next one cannot leave the list while `m` is held. Any number of threads may
 * pass at once: each skips what another holds. Neither the list nor the thread is touched
 * by shmcoll_comm_abort, which stays async-signal-safe (atomics and futex wakes only).
 *
 * fork(). The child of a process with communicators gets copies of them that must never
 * move (their arenas are shared with the parent's ranks): at a fork the registry begins a
 * new epoch, empty, without a thread, and an entry of an older epoch is only forgotten. */
#include "lib/core/progress.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "shm/atomics.h"

/* Passes between naps of the thread while everything with work is held by its owner: that
 * owner is likely in a long blocking call, which moves its communicator itself. */
#define BUSY_NAP_AFTER 64

static struct {
	/* The list. */
	pthread_mutex_t m;
	struct shmcoll_list list;
	_Atomic unsigned n; /* listed: the look of progress_all without the mutex */
	unsigned epoch;
	const void *lister; /* the first thread that listed a communicator */
	/* The thread: its life (get, put) under `life`, its sleep under `tm`. */
	pthread_mutex_t life, tm;
	pthread_cond_t cv;
	pthread_t thread;
	unsigned refs;
	unsigned gen, done; /* starts signalled, starts handled: it sleeps while equal */
	int stop;
	_Atomic int stop_hint; /* read between passes without tm */
} reg = {
    .m = PTHREAD_MUTEX_INITIALIZER,
    .life = PTHREAD_MUTEX_INITIALIZER,
    .tm = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

/* fork() copies the registry with its locks held by the forking thread (in the order every
 * path takes them: life, tm, m), so the copy is consistent. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&reg.life);
	pthread_mutex_lock(&reg.tm);
	pthread_mutex_lock(&reg.m);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&reg.m);
	pthread_mutex_unlock(&reg.tm);
	pthread_mutex_unlock(&reg.life);
}

static struct shmcoll_prog *prog_at(struct shmcoll_link *e)
{
	return e ? shmcoll__entry(e, struct shmcoll_prog, link) : NULL;
}

static void fork_child(void)
{
	struct shmcoll_prog *p;

	/* A pass of another thread may have held one: in the child that thread is gone. */
	for (p = prog_at(reg.list.head); p; p = prog_at(p->link.next))
		atomic_store(&p->hold, 0);
	reg.list = (struct shmcoll_list){NULL, NULL};
	atomic_store(&reg.n, 0);
	reg.epoch++;
	reg.lister = NULL;
	atomic_store(&shmcoll__prog_shared, 0);
	reg.refs = 0;
	reg.gen = reg.done = 0;
	reg.stop = 0;
	atomic_store(&shmcoll__progress_on, 0);
	atomic_store(&reg.stop_hint, 0);
	pthread_cond_init(&reg.cv, NULL); /* the parent's thread may have slept on it */
	pthread_mutex_unlock(&reg.m);
	pthread_mutex_unlock(&reg.tm);
	pthread_mutex_unlock(&reg.life);
}

static void reg_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

_Thread_local char shmcoll__prog_me;
_Atomic int shmcoll__prog_shared;
_Atomic int shmcoll__progress_on;
#define ME SHMCOLL_PROG_ME

void shmcoll__prog_hold_slow(struct shmcoll_prog *p)
{
	uint32_t free_ = 0;
	unsigned spins = 0;

	if (!load_relaxed(&p->shared)) {
		/* Private (progress.h): nobody but this thread passes over p, never inside its
		 * calls (depth). */
		if (p->owner == ME && !load_relaxed(&shmcoll__prog_shared))
			return;
		/* From now on other threads may pass over p. Release: pairs with the acquire
		 * load of shared in pass(), so a pass that takes the hold before this call does
		 * sees what this thread's earlier, private calls did. */
		store_release(&p->shared, 1);
	}
	/* Acquire: pairs with the release that ends a pass in pass(). */
	while (!atomic_compare_exchange_weak_explicit(&p->hold, &free_, 1, memory_order_acquire,
	                                              memory_order_relaxed)) {
		free_ = 0;
		if (++spins % 256 == 0)
			sched_yield();
		else
			cpu_relax();
	}
}

void shmcoll__prog_list(struct shmcoll_prog *p)
{
	pthread_once(&reg_once, reg_init);
	pthread_mutex_lock(&reg.m);
	shmcoll__list_push_front(&reg.list, &p->link);
	p->epoch = reg.epoch;
	p->owner = ME;
	/* A second thread with communicators: from now on every thread's may be passed over
	 * by another's waits (each becomes shared at its owner's next call). */
	if (!reg.lister)
		reg.lister = ME;
	else if (reg.lister != ME)
		atomic_store(&shmcoll__prog_shared, 1);
	atomic_fetch_add_explicit(&reg.n, 1, memory_order_relaxed);
	pthread_mutex_unlock(&reg.m);
	p->listed = 1;
}

void shmcoll__prog_unlist(struct shmcoll_prog *p)
{
	pthread_mutex_lock(&reg.m);
	if (p->epoch == reg.epoch) {
		shmcoll__list_remove(&reg.list, &p->link);
		atomic_fetch_sub_explicit(&reg.n, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&reg.m);
	p->link.prev = p->link.next = NULL;
	p->listed = 0;
}

/* One pass over the list: every communicator no thread holds advanced once. Whether any
 * still has work; *held: some were skipped, held. */
static int pass(int *held)
{
	struct shmcoll_prog *p, *next;
	uint32_t free_;
	int more = 0;

	pthread_mutex_lock(&reg.m);
	for (p = prog_at(reg.list.head); p; p = next) {
		free_ = 0;
		/* A private one: only its owner's thread, outside its calls (acquire: pairs
		 * with the release that makes it shared in shmcoll__prog_hold()). Then the
		 * hold, as for a shared one (a thread it moved to may be entering it). Acquire:
		 * pairs with the release of a caller in shmcoll__prog_unhold(), or of another
		 * pass below. */
		if ((!load_acquire(&p->shared) &&
		     (p->owner != ME || load_relaxed(&p->depth) != 0)) ||
		    !atomic_compare_exchange_strong_explicit(
		        &p->hold, &free_, 2, memory_order_acquire, memory_order_relaxed)) {
			*held = 1;
			next = prog_at(p->link.next);
			continue;
		}
		pthread_mutex_unlock(&reg.m);
		more |= p->advance(p) != 0;
		pthread_mutex_lock(&reg.m);
		next = prog_at(
		    p->link.next); /* p is still listed: its owner unlists it only holding it */
		/* Release: what the pass did is visible to the owner's next hold. */
		store_release(&p->hold, 0);
	}
	pthread_mutex_unlock(&reg.m);
	return more;
}

int shmcoll__progress_all(void)
{
	int held = 0;

	if (!load_relaxed(&reg.n))
		return 0;
	return pass(&held);
}

static void *run(void *arg)
{
	const struct timespec nap = {0, 50000};
	unsigned gen, idle = 0;
	int more, held;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&reg.tm);
		while (!reg.stop && reg.gen == reg.done)
			pthread_cond_wait(&reg.cv, &reg.tm);
		gen = reg.gen;
		if (reg.stop) {
			pthread_mutex_unlock(&reg.tm);
			return NULL;
		}
		pthread_mutex_unlock(&reg.tm);
		for (;;) {
			held = 0;
			more = pass(&held);
			if (!more && !held)
				break;
			if (more) {
				/* Work to move, on the CPU auto mode made sure it has. */
				idle = 0;
				cpu_relax();
			} else if (++idle % BUSY_NAP_AFTER == 0) {
				nanosleep(&nap, NULL);
			} else {
				sched_yield();
			}
			if (load_relaxed(&reg.stop_hint))
				break;
		}
		pthread_mutex_lock(&reg.tm);
		reg.done = gen; /* later starts made gen larger: the loop goes round again */
		pthread_mutex_unlock(&reg.tm);
	}
}

int shmcoll__progress_thread_get(void)
{
	int rc = 0;

	pthread_once(&reg_once, reg_init);
	/* Its passes are another thread's: communicators become shared. */
	atomic_store(&shmcoll__prog_shared, 1);
	pthread_mutex_lock(&reg.life);
	if (reg.refs == 0) {
		pthread_mutex_lock(&reg.tm);
		reg.stop = 0;
		pthread_mutex_unlock(&reg.tm);
		atomic_store(&reg.stop_hint, 0);
		rc = -pthread_create(&reg.thread, NULL, run, NULL);
		if (rc == 0)
			atomic_store(&shmcoll__progress_on, 1);
	}
	if (rc == 0)
		reg.refs++;
	pthread_mutex_unlock(&reg.life);
	return rc;
}

void shmcoll__progress_thread_put(void)
{
	pthread_mutex_lock(&reg.life);
	if (reg.refs > 0 && --reg.refs == 0) {
		atomic_store(&shmcoll__progress_on, 0);
		atomic_store(&reg.stop_hint, 1);
		pthread_mutex_lock(&reg.tm);
		reg.stop = 1;
		pthread_cond_signal(&reg.cv);
		pthread_mutex_unlock(&reg.tm);
		pthread_join(reg.thread, NULL);
	}
	pthread_mutex_unlock(&reg.life);
}

void shmcoll__progress_kick_slow(void)
{
	pthread_mutex_lock(&reg.tm);
	reg.gen++;
	pthread_cond_signal(&reg.cv);
	pthread_mutex_unlock(&reg.tm);
}
