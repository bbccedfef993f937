/* progress.c - the entry layer's part of the process's progress (lib/core/progress.h): a
 * communicator is listed while it has requests outstanding, held by every call while
 * listed, and advanced by the passes of every wait of the process and of the progress
 * thread (SHMCOLL_PROGRESS_THREAD); this file says what advancing one means, and when the
 * thread is wanted.
 *
 * The thread. 1 always, 0 never; unset (auto) only where the communicator's ranks leave a
 * CPU for it: at least two ranks, and the CPUs the ranks may run on (on a node, the union of
 * their affinity masks) at least twice the ranks. Elsewhere the thread would take a CPU a
 * rank needs, and every wait would get slower. It is asked for at a communicator's first
 * non-blocking start, so a program that makes only blocking calls never has one, and one
 * thread serves every communicator (and every rank thread) of the process. */
#include <stddef.h>

#include "lib/api/api.h"
#include "lib/core/env.h"

void api__unlist(shmcoll_comm *c)
{
	/* The end of the outermost call with nothing outstanding: nobody else needs to move
	 * c, so it leaves the list (still held: no pass is inside it). */
	shmcoll__prog_unlist(&c->prog);
}

int api__advance(struct shmcoll_prog *p)
{
	shmcoll_comm *c = (shmcoll_comm *)(void *)((char *)p - offsetof(shmcoll_comm, prog));

	return c->ops->advance(c);
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
	n = c->local;
	ranks = n->size;
	cpus = shmcoll__node_cpus(n);
	return c->size >= 2 && cpus >= 2 * ranks;
}

void api__arm_slow(shmcoll_comm *c)
{
	if (!c->armed) {
		c->armed = 1;
		/* Without a thread (not wanted, or none could be made) operations move inside
		 * the process's calls, as they always do. */
		if (wanted(c) == 1 && shmcoll__progress_thread_get() == 0)
			c->thread_ref = 1;
	}
	c->prog.advance = api__advance;
	shmcoll__prog_list(&c->prog);
}

void api__progress_stop(shmcoll_comm *c)
{
	if (c->thread_ref)
		shmcoll__progress_thread_put();
	c->thread_ref = 0;
}
