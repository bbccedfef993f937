/* net_host.c - the backend of a net whose bytes the host moves (shmcoll__net_open_host,
 * net.h): each transfer of a posted call goes to the host's start, then to its test or wait,
 * by slot (2 * peer + direction, the index of its op). No frame travels, so only the
 * payload is handed over; the header net.c encoded for a send stays unused. Every function
 * of the host runs on the thread that posts, tests or waits, which the transport's one
 * owner at a time (net.h) makes a single thread per call. */
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include "lib/net/net_impl.h"
#include "shm/wait.h"

static int slot(const struct net_op *op)
{
	return 2 * op->peer + op->dir;
}

/* After a failure: every transfer still in the host's hands is abandoned, so none can touch
 * a caller's buffer once the call returns. */
static void cancel_rest(struct shmcoll_net *n, int nops)
{
	int i;

	for (i = 0; i < nops; i++) {
		struct net_op *op = n->live[i];

		if (op->busy && !op->complete)
			n->host.cancel(n->host.ctx, slot(op));
		op->busy = 0;
	}
}

static int failed(struct shmcoll_net *n, int nops, const struct net_op *op, const char *what,
                  int rc, char *err, size_t errlen)
{
	cancel_rest(n, nops);
	shmcoll__net_say(err, errlen, "the host's %s of %zu bytes %s node %d failed: %s", what,
	                 op->x->len, op->dir == XFER_SEND ? "to" : "from", op->peer,
	                 rc == -EPROTO ? "a message of another length" : "its error");
	return rc;
}

/* A receive is complete: no header came to check, so it carries the call it expected. */
static void completed(struct net_op *op)
{
	op->complete = 1;
	op->busy = 0;
	if (op->dir == XFER_RECV)
		op->x->got = op->x->call;
}

static int host_post(struct shmcoll_net *n, int nops, int64_t deadline, char *err, size_t errlen)
{
	int i, rc;

	(void)deadline;
	for (i = 0; i < nops; i++) {
		struct net_op *op = n->live[i];

		rc = n->host.start(n->host.ctx, slot(op), op->peer, op->dir == XFER_SEND,
		                   op->x->buf, op->x->len);
		if (rc < 0)
			return failed(n, nops, op, "start", rc, err, errlen);
		op->busy = 1;
	}
	return 0;
}

static int host_test(struct shmcoll_net *n, int nops, int *done, char *err, size_t errlen)
{
	int i, rc, left = 0;

	*done = 0;
	if (n->broken) {
		cancel_rest(n, nops);
		*done = 1;
		return -ECANCELED;
	}
	for (i = 0; i < nops; i++) {
		struct net_op *op = n->live[i];

		if (op->complete)
			continue;
		rc = n->host.test(n->host.ctx, slot(op));
		if (rc < 0) {
			*done = 1;
			return failed(n, nops, op, "transfer", rc, err, errlen);
		}
		if (rc > 0)
			completed(op);
		else
			left++;
	}
	*done = !left;
	if (left && n->deadline >= 0 && shmcoll__now_ns() >= n->deadline) {
		for (i = 0; i < nops && n->live[i]->complete; i++)
			;
		cancel_rest(n, nops);
		*done = 1;
		return shmcoll__net_op_timeout(n, n->live[i], err, errlen);
	}
	return 0;
}

/* Without a deadline the host's own wait, which may sleep in the host's progress; with one,
 * tests until done or the deadline, yielding the CPU between rounds. */
static int host_wait(struct shmcoll_net *n, int nops, char *err, size_t errlen)
{
	int i, rc, done = 0;

	if (n->deadline < 0 && !n->broken) {
		for (i = 0; i < nops; i++) {
			struct net_op *op = n->live[i];

			if (op->complete)
				continue;
			rc = n->host.wait(n->host.ctx, slot(op));
			if (rc < 0)
				return failed(n, nops, op, "transfer", rc, err, errlen);
			completed(op);
		}
		return 0;
	}
	for (;;) {
		rc = host_test(n, nops, &done, err, errlen);
		if (rc < 0 || done)
			return rc;
		sched_yield();
	}
}

const struct net_backend shmcoll__net_host = {
    .name = "host",
    .post = host_post,
    .wait = host_wait,
    .test = host_test,
};
