/* live.c - finding dead peers. A rank that dies (SIGKILL, a crash, exit
 * without shmcoll_comm_destroy) publishes nothing more, so its peers would
 * wait for it until the timeout. Instead, a wait that has gone on for a while
 * (the slow path of shmcoll__wait_geq, every SHMCOLL_CHECK_NS) asks here
 * whether the rank it waits for, and one other peer in turn, still lives.
 *
 * Each peer is checked through a pidfd (pidfd_open, Linux 5.3): it polls
 * readable once the process has exited, zombie or not, and it cannot be
 * fooled by pid reuse. Where pidfds are unavailable (old kernels, seccomp)
 * or would take too many descriptors, /proc/PID/stat is read instead, and
 * the start time recorded at attach tells a reused pid from the peer. Peers
 * in this very process (ranks as threads) are not checked: they cannot die
 * alone. Peers in another pid namespace cannot be checked: their waits end
 * by the timeout. The fast path never comes here.
 *
 * The same check also finds a rank that left: one that destroyed its
 * communicator (and perhaps lives on) while we wait for a step it never
 * published; ranks as threads are found this way too. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/core/live.h"

/* Beyond this many peers, /proc instead of a descriptor each: a job of 1024
 * ranks must not exhaust the default limit of 1024 open files. */
#define MAX_PIDFDS 128

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

enum how { HOW_NONE, HOW_PIDFD, HOW_PROC };

static int peer_dead(struct shmcoll_peer *p)
{
	struct pollfd pfd;

	switch (p->how) {
	case HOW_PIDFD:
		pfd.fd = p->fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP | POLLERR));
	case HOW_PROC:
		return shmcoll__proc_state(&p->id) == SHMCOLL_PROC_DEAD;
	default:
		return 0;
	}
}

int shmcoll__live_init(struct shmcoll_node *n)
{
	struct shmcoll_proc_id self;
	int p, fd, npidfds = 0;

	n->live.waiting_for = -1;
	n->live.dead_rank = -1;
	n->live.left_rank = -1;
	n->live.peers = calloc((size_t)n->size, sizeof(*n->live.peers));
	if (!n->live.peers)
		return -ENOMEM;
	shmcoll__proc_self(&self);
	for (p = 0; p < n->size; p++) {
		struct shmcoll_peer *q = &n->live.peers[p];

		q->fd = -1;
		/* Written before the peer counted itself attached; we waited for
		 * that count with a seq_cst load. */
		q->id = shmcoll__ctrl(&n->arena, (uint32_t)p)->proc;
		if (p == n->rank || q->id.pid <= 0 ||
		    (q->id.pid == self.pid && q->id.pidns == self.pidns))
			continue;
		if (!q->id.start || q->id.pidns != self.pidns)
			continue; /* cannot be told from another process: timeout only */
		q->how = HOW_PROC;
		if (npidfds >= MAX_PIDFDS || n->size - 1 > MAX_PIDFDS)
			continue;
		fd = (int)syscall(SYS_pidfd_open, (pid_t)q->id.pid, 0u);
		if (fd < 0)
			continue; /* ESRCH: already gone, /proc says so; else no pidfds */
		/* The pidfd names whatever process has the pid now: make sure it
		 * is the one that attached (same start time, still running). */
		if (shmcoll__proc_state(&q->id) != SHMCOLL_PROC_ALIVE) {
			close(fd);
			continue;
		}
		q->fd = fd;
		q->how = HOW_PIDFD;
		npidfds++;
	}
	n->waiter.check = shmcoll__live_check;
	n->waiter.check_ctx = n;
	return 0;
}

void shmcoll__live_fini(struct shmcoll_node *n)
{
	int p;

	if (!n->live.peers)
		return;
	for (p = 0; p < n->size; p++)
		if (n->live.peers[p].fd >= 0)
			close(n->live.peers[p].fd);
	free(n->live.peers);
	n->live.peers = NULL;
}

/* Whether rank p's process is gone without having left: a rank that destroyed its
 * communicator (and then perhaps exited) did nothing wrong, and is not dead to its peers.
 * Acquire: pairs with the release of left in shmcoll__node_destroy(). */
static int died(struct shmcoll_node *n, int p)
{
	return peer_dead(&n->live.peers[p]) &&
	       !load_acquire(&shmcoll__ctrl(&n->arena, (uint32_t)p)->left);
}

int shmcoll__live_check(void *ctx)
{
	struct shmcoll_node *n = ctx;
	int p = n->live.waiting_for;

	if (n->size < 2)
		return 0;
	/* A rank that destroyed its communicator publishes nothing more: if
	 * the step we wait for is not there after its leaving (acquire: it
	 * left after its last publish), it made fewer calls than we did. Only
	 * the rank waited for counts: others may leave while we finish. */
	if (p >= 0 && p < n->size && p != n->rank) {
		struct shmcoll_ctrl *pc = shmcoll__ctrl(&n->arena, (uint32_t)p);

		if (load_acquire(&pc->left) &&
		    !seq_reached(load_relaxed(&pc->seq), n->live.waiting_step)) {
			/* Unless it broke the communicator before leaving (its own timeout or
			 * fault): then it left because of that, and the caller, which looked
			 * at the abort word before this check, finds the break on its next
			 * look and reports its cause. The acquire of left orders the break
			 * before this load. */
			if (load_relaxed(&n->arena.hdr->aborted))
				return 0;
			n->live.left_rank = p;
			return -EPROTO;
		}
	}
	/* The rank we wait for first; then one other per check, so a death
	 * anywhere is found even while the rank we wait for waits too. */
	if (p < 0 || p >= n->size || !died(n, p)) {
		p = n->live.next;
		n->live.next = (n->live.next + 1) % n->size;
		if (!died(n, p))
			return 0;
	}
	n->live.dead_rank = p;
	return -EOWNERDEAD;
}

int shmcoll__live_dead(struct shmcoll_node *n, int p)
{
	return n->live.peers && p >= 0 && p < n->size && p != n->rank && died(n, p);
}
