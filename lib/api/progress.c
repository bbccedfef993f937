/* progress.c - the background progress thread of a communicator (SHMCOLL_PROGRESS_THREAD):
 * it moves non-blocking operations along while the caller computes, so they overlap with
 * the computation instead of advancing only inside shmcoll calls.
 *
 * When. 1 always, 0 never; unset (auto) only where the communicator's ranks leave a CPU for
 * each thread: at least two ranks, and the CPUs the ranks may run on (on a node, the union
 * of their affinity masks) at least twice the ranks. Elsewhere the thread would take a CPU a
 * rank needs, and every wait would get slower. The thread is made at the communicator's
 * first non-blocking start, so a program that makes only blocking calls never has one.
 *
 * The hold. The communicator is used by one caller thread at a time, and by the progress
 * thread between the caller's calls: an atomic word says who holds it (0 nobody, 1 the
 * caller, 2 the progress thread). Every public call takes it for the caller for its whole
 * length (API_HOLD, a scope guard; nested calls count), waiting while the progress thread
 * has it - one short non-blocking pass. The progress thread takes it only when it is free,
 * runs one pass, and gives it back; a pass that finds nothing outstanding puts the thread to
 * sleep until the caller starts another operation (a generation count under a mutex, so a
 * start is never missed). While operations are outstanding it spins between passes, on the
 * CPU auto mode made sure it has. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/api/api.h"
#include "lib/core/env.h"

/* Passes between yields while the caller holds the communicator: it is likely in a long
 * blocking call, which moves everything itself. */
#define BUSY_YIELD_AFTER 64

struct api_progress {
	pthread_t thread;
	pthread_mutex_t m;
	pthread_cond_t cv;
	unsigned gen, done; /* starts signalled, starts handled: sleep while equal */
	int stop;
	_Atomic uint32_t stop_hint; /* read between passes without the mutex */
};

void api__hold_slow(shmcoll_comm *c)
{
	uint32_t free_ = 0;
	unsigned spins = 0;

	if (load_relaxed(&c->hold) == 1) {
		c->hold_depth++; /* the caller again, inside its own call */
		return;
	}
	/* Acquire: pairs with the progress thread's release in pass(). */
	while (!atomic_compare_exchange_weak_explicit(&c->hold, &free_, 1, memory_order_acquire,
	                                              memory_order_relaxed)) {
		free_ = 0;
		if (++spins % 256 == 0)
			sched_yield();
		else
			cpu_relax();
	}
	c->hold_depth = 1;
}

void api__unhold_slow(shmcoll_comm *c)
{
	/* Release: what this call did is visible to the progress thread's next pass. */
	if (--c->hold_depth == 0)
		store_release(&c->hold, 0);
}

/* Whether c has operations that need moving (not merely ones done and not yet waited). */
static int busy(shmcoll_comm *c)
{
	if (c->kind == COMM_HIER)
		return shmcoll__hier_progress(c->u.hier);
	shmcoll__node_progress(c->u.node);
	return c->u.node->tasks.head || c->u.node->p2p.active;
}

/* One pass when the communicator is free: 1 if work remains (or the caller had it). */
static int pass(shmcoll_comm *c)
{
	uint32_t free_ = 0;
	int more;

	/* Acquire: pairs with the caller's release in api__unhold_slow(). */
	if (!atomic_compare_exchange_strong_explicit(&c->hold, &free_, 2, memory_order_acquire,
	                                             memory_order_relaxed))
		return -1;
	more = busy(c);
	store_release(&c->hold, 0);
	return more;
}

static void *run(void *arg)
{
	shmcoll_comm *c = arg;
	struct api_progress *pt = c->pt;
	const struct timespec nap = {0, 50000};
	unsigned gen, held = 0;
	int more;

	for (;;) {
		pthread_mutex_lock(&pt->m);
		while (!pt->stop && pt->gen == pt->done)
			pthread_cond_wait(&pt->cv, &pt->m);
		gen = pt->gen;
		if (pt->stop) {
			pthread_mutex_unlock(&pt->m);
			return NULL;
		}
		pthread_mutex_unlock(&pt->m);
		for (;;) {
			more = pass(c);
			if (more == 0)
				break;
			if (more < 0) {
				/* The caller is in a call: let it be. */
				if (++held % BUSY_YIELD_AFTER == 0)
					nanosleep(&nap, NULL);
				else
					sched_yield();
			} else {
				held = 0;
				cpu_relax();
			}
			if (load_relaxed(&pt->stop_hint))
				break;
		}
		pthread_mutex_lock(&pt->m);
		pt->done = gen; /* later starts made gen larger: the loop goes round again */
		pthread_mutex_unlock(&pt->m);
	}
}

/* SHMCOLL_PROGRESS_THREAD for c: 1 on, 0 off, -1 bad. */
static int wanted(shmcoll_comm *c)
{
	long long v;
	int rc = shmcoll__env_long("SHMCOLL_PROGRESS_THREAD", 0, 1, &v), ranks, cpus;
	struct shmcoll_node *n;

	if (rc < 0)
		return -1;
	if (rc > 0)
		return (int)v;
	n = c->kind == COMM_HIER ? shmcoll__hier_local(c->u.hier) : c->u.node;
	ranks = n->size;
	cpus = shmcoll__node_cpus(n);
	return c->size >= 2 && cpus >= 2 * ranks;
}

void api__arm_slow(shmcoll_comm *c)
{
	struct api_progress *pt;

	c->armed = 1;
	if (wanted(c) != 1)
		return;
	pt = calloc(1, sizeof(*pt));
	if (!pt)
		return; /* no thread: operations move inside calls, as without one */
	pthread_mutex_init(&pt->m, NULL);
	pthread_cond_init(&pt->cv, NULL);
	c->pt = pt;
	if (pthread_create(&pt->thread, NULL, run, c) != 0) {
		c->pt = NULL;
		pthread_cond_destroy(&pt->cv);
		pthread_mutex_destroy(&pt->m);
		free(pt);
	}
}

void api__kick_slow(shmcoll_comm *c)
{
	struct api_progress *pt = c->pt;

	pthread_mutex_lock(&pt->m);
	pt->gen++;
	pthread_cond_signal(&pt->cv);
	pthread_mutex_unlock(&pt->m);
}

void api__progress_stop(shmcoll_comm *c)
{
	struct api_progress *pt = c->pt;

	if (!pt)
		return;
	store_relaxed(&pt->stop_hint, 1);
	pthread_mutex_lock(&pt->m);
	pt->stop = 1;
	pthread_cond_signal(&pt->cv);
	pthread_mutex_unlock(&pt->m);
	pthread_join(pt->thread, NULL);
	pthread_cond_destroy(&pt->cv);
	pthread_mutex_destroy(&pt->m);
	free(pt);
	c->pt = NULL;
}
