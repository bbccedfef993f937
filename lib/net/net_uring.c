/* net_uring.c - the io_uring backend of the transport: one ring per net,
 * one SQE in flight per transfer, each linked to a timeout that ends at the
 * call's deadline, and zero-copy sends for large payloads where the kernel
 * has them.
 *
 * A transfer's life: submit (op + linked timeout) -> CQE -> account the
 * bytes (a receive's header is checked when it is complete, before its
 * payload is asked for) -> submit the rest, until done. MSG_WAITALL lets the
 * kernel finish a chunk in one CQE instead of one per segment. A linked
 * timeout that fires cancels its op (-ECANCELED): the deadline passed.
 * After a failure every socket is shut down and every op in flight
 * cancelled, and the call returns only once their CQEs are reaped, so no
 * kernel write into a caller's buffer can follow the return. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/net/net_impl.h"
#include "shm/atomics.h"
#include "shm/wait.h"

#ifndef SHMCOLL_HAVE_URING
/* Built without liburing: net_open refuses multi-node jobs before this could
 * be called. */
static int uring_init(struct shmcoll_net *n, char *err, size_t errlen)
{
	(void)n;
	shmcoll__net_say(err, errlen, "built without liburing");
	return -ENOTSUP;
}

const struct net_backend shmcoll__net_uring = {
    .name = "io_uring",
    .init = uring_init,
};

unsigned shmcoll__net_uring_stray(struct shmcoll_net *n)
{
	(void)n;
	return 0;
}
#else
#include <liburing.h>

/* The ring, and the bookkeeping of the call in flight: a posted call's state
 * lives here between uring_post and uring_wait. */
struct net_uring {
	struct io_uring ring;
	int zc;           /* IORING_OP_SEND_ZC and SENDMSG_ZC are supported */
	int64_t deadline; /* the call's, or < 0: none */
	int left;         /* its ops not complete */
	int inflight;     /* CQEs owed: ops, their timeouts, cancels */
	int notifs;       /* zero-copy notifications owed */
};

enum { TAG_OP, TAG_TIMEOUT, TAG_CANCEL };
#define UD(idx, tag)   ((uint64_t)(idx) << 2 | (uint64_t)(tag))

/* After a failure, how long to wait for zero-copy notifications still owed:
 * the buffer is only read (its pages are pinned by the kernel), so a
 * notification that never comes (a dead peer's unacked data) may not hold
 * up the error. */
#define NOTIF_GRACE_NS 1000000000ll

/* Payloads of at least this many bytes are sent with IORING_OP_SENDMSG_ZC
 * (SHMCOLL_NET_ZC_MIN overrides). Measured with bench/net-bench: 2 nodes on
 * 127.0.0.1, one send and one receive each way per call, median of 7 runs;
 * kernel 6.18, 2 CPUs shared with other work (absolute figures moved by up to
 * 2x between sessions, the order never did). GB/s per direction, plain / ZC:
 *              64 KiB        1 MiB         4 MiB         16 MiB
 *   quiet    2.13 / 1.69   3.47 / 0.71   1.98 / 1.43   2.01 / 0.78
 *   loaded   1.58 / 1.09   1.73 / 0.53   1.93 / 0.51   1.62 / 0.68
 * (8 B: 24 / 42 us per call.) Zero-copy lost at every size in every run: a
 * zero-copy skb delivered to a local socket is copied anyway, and the
 * notification CQE comes on top. It can only pay off through a real NIC with
 * large messages, so it is off by default and SHMCOLL_NET_ZC_MIN=<bytes>
 * turns it on where that was measured to help. */
#define ZC_MIN_DEFAULT SIZE_MAX

static int uring_init(struct shmcoll_net *n, char *err, size_t errlen)
{
	const char *env = getenv("SHMCOLL_NET_ZC_MIN");
	struct io_uring_probe *probe;
	struct net_uring *ur;
	unsigned entries = 8;
	char *end;
	int rc;

	n->zc_min = ZC_MIN_DEFAULT;
	if (env && *env) {
		errno = 0;
		n->zc_min = strtoull(env, &end, 10);
		if (errno || *end || *env == '-') {
			shmcoll__net_say(err, errlen,
			                 "SHMCOLL_NET_ZC_MIN=%s: expected a byte count", env);
			return -EINVAL;
		}
	}
	ur = calloc(1, sizeof(*ur));
	if (!ur)
		return -ENOMEM;
	/* A call of k transfers needs 2k SQEs (each op and its timeout), a
	 * failure k more (cancels); fewer only costs extra submits. */
	while (entries < 6u * (unsigned)n->nnodes && entries < 4096)
		entries *= 2;
	rc = io_uring_queue_init(entries, &ur->ring, 0);
	if (rc < 0) {
		free(ur);
		shmcoll__net_say(err, errlen,
		                 "io_uring is not available (io_uring_setup: %s); SHMCOLL_NET=poll "
		                 "moves the bytes with poll() instead",
		                 strerror(-rc));
		return rc;
	}
	probe = io_uring_get_probe_ring(&ur->ring);
	ur->zc = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC) &&
	         io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
	if (probe)
		io_uring_free_probe(probe);
	n->ur = ur;
	return 0;
}

static void uring_exit(struct shmcoll_net *n)
{
	if (!n->ur)
		return;
	io_uring_queue_exit(&n->ur->ring);
	free(n->ur);
	n->ur = NULL;
}

unsigned shmcoll__net_uring_stray(struct shmcoll_net *n)
{
	if (!n->ur)
		return 0;
	io_uring_submit(&n->ur->ring);
	return io_uring_cq_ready(&n->ur->ring);
}

/* Room for an op and its linked timeout in one submission: a link cut by
 * the end of a batch would leave the op without its deadline. */
static int sq_room(struct shmcoll_net *n, unsigned want)
{
	int rc;

	if (io_uring_sq_space_left(&n->ur->ring) >= want)
		return 0;
	rc = io_uring_submit(&n->ur->ring);
	if (rc < 0)
		return rc;
	return io_uring_sq_space_left(&n->ur->ring) >= want ? 0 : -EBUSY;
}

/* Submits the next piece of live op idx, linked to a timeout at the
 * deadline. */
static int submit_op(struct shmcoll_net *n, int idx, char *err, size_t errlen)
{
	struct net_uring *u = n->ur;
	struct net_op *op = n->live[idx];
	struct io_uring_sqe *sqe;
	int64_t left = 0;
	int cnt, rc;

	if (u->deadline >= 0) {
		left = u->deadline - shmcoll__now_ns();
		if (left <= 0)
			return shmcoll__net_op_timeout(n, op, err, errlen);
	}
	rc = sq_room(n, 2);
	if (rc < 0) {
		snprintf(err, errlen, "io_uring_submit: %s", strerror(-rc));
		return rc;
	}
	sqe = io_uring_get_sqe(&n->ur->ring);
	cnt = shmcoll__net_op_iov(op, op->iov);
	if (op->dir == XFER_SEND) {
		memset(&op->msg, 0, sizeof(op->msg));
		op->msg.msg_iov = op->iov;
		op->msg.msg_iovlen = (size_t)cnt;
		if (op->zc)
			io_uring_prep_sendmsg_zc(sqe, op->fd, &op->msg, MSG_NOSIGNAL | MSG_WAITALL);
		else
			io_uring_prep_sendmsg(sqe, op->fd, &op->msg, MSG_NOSIGNAL | MSG_WAITALL);
	} else {
		/* Not MSG_WAITALL for a small one: a shorter frame than
		 * posted must fail its check now, not at the deadline. */
		io_uring_prep_recv(sqe, op->fd, op->iov[0].iov_base, op->iov[0].iov_len,
		                   shmcoll__net_op_small(op) ? 0 : MSG_WAITALL);
	}
	io_uring_sqe_set_data64(sqe, UD(idx, TAG_OP));
	op->busy = 1;
	u->inflight++;
	if (u->deadline < 0)
		return 0;
	sqe->flags |= IOSQE_IO_LINK;
	op->ts.tv_sec = left / 1000000000;
	op->ts.tv_nsec = left % 1000000000;
	sqe = io_uring_get_sqe(&n->ur->ring);
	io_uring_prep_link_timeout(sqe, &op->ts, 0);
	io_uring_sqe_set_data64(sqe, UD(idx, TAG_TIMEOUT));
	u->inflight++;
	return 0;
}

/* Accounts one CQE. Returns 1 if an op completed, 0, or a negative code. */
static int reap(struct shmcoll_net *n, const struct io_uring_cqe *cqe, int failed, char *err,
                size_t errlen)
{
	struct net_uring *u = n->ur;
	int idx = (int)(cqe->user_data >> 2), tag = (int)(cqe->user_data & 3), res = cqe->res;
	struct net_op *op = n->live[idx];
	int rc;

	if (tag != TAG_OP) {
		u->inflight--;
		return 0;
	}
	if (cqe->flags & IORING_CQE_F_NOTIF) {
		/* The kernel is done with a zero-copy send's pages. */
		op->notifs--;
		u->notifs--;
		return 0;
	}
	u->inflight--;
	op->busy = 0;
	if (cqe->flags & IORING_CQE_F_MORE) {
		op->notifs++;
		u->notifs++;
	}
	if (failed)
		return 0;
	if (res == -ECANCELED)
		return shmcoll__net_op_timeout(n, op, err, errlen);
	if (res == -EOPNOTSUPP && op->zc) {
		/* Zero-copy refused on this socket: plain sends from now on. */
		op->zc = 0;
		n->ur->zc = 0;
		return submit_op(n, idx, err, errlen);
	}
	if (res == -EINTR || res == -EAGAIN)
		return submit_op(n, idx, err, errlen);
	if (res < 0 || (res == 0 && op->dir == XFER_RECV))
		return shmcoll__net_op_failed(op, res, err, errlen);
	rc = shmcoll__net_op_advance(n, op, (size_t)res, err, errlen);
	if (rc < 0)
		return rc;
	if (op->complete)
		return 1;
	return submit_op(n, idx, err, errlen);
}

/* Spins on the completion queue for up to n->spin_ns: a sleeper on an idle
 * vCPU takes 14-25 us to wake (measured on the reference machine: shm/wait.c),
 * longer than a small exchange over loopback. The kernel posts a socket's
 * completion from task work it runs when it interrupts this task, so a spin
 * in user space sees it. */
static int spin_cqe(struct shmcoll_net *n, struct io_uring_cqe **cqe)
{
	int64_t until = shmcoll__now_ns() + n->spin_ns;
	unsigned i;

	if (io_uring_submit(&n->ur->ring) < 0)
		return -1;
	for (i = 1;; i++) {
		if (io_uring_peek_cqe(&n->ur->ring, cqe) == 0)
			return 0;
		cpu_relax();
		if (i % 64 == 0 && shmcoll__now_ns() >= until)
			return -1;
	}
}

/* Waits for the next CQE; with only notifications owed, until limit (< 0:
 * none), else until one comes (every op in flight has its own timeout). */
static int next_cqe(struct shmcoll_net *n, struct io_uring_cqe **cqe, int64_t limit)
{
	struct net_uring *u = n->ur;
	struct __kernel_timespec ts;
	int64_t left;
	int rc;

	if (n->spin_ns > 0 && u->inflight && spin_cqe(n, cqe) == 0)
		return 0;
	for (;;) {
		if (io_uring_peek_cqe(&u->ring, cqe) == 0)
			return 0;
		if (u->inflight || limit < 0) {
			rc = io_uring_submit_and_wait(&u->ring, 1);
		} else {
			left = limit - shmcoll__now_ns();
			if (left <= 0)
				return -ETIME;
			ts.tv_sec = left / 1000000000;
			ts.tv_nsec = left % 1000000000;
			rc = io_uring_wait_cqe_timeout(&u->ring, cqe, &ts);
			if (rc == 0)
				return 0;
		}
		if (rc < 0 && rc != -EINTR && rc != -ETIME)
			return rc;
	}
}

/* After a failure: cancel what is in flight and reap it all. */
static void drain(struct shmcoll_net *n, int nops)
{
	struct net_uring *u = n->ur;
	struct io_uring_cqe *cqe;
	int64_t limit;
	int i;

	/* The sockets are shut down already, which completes most ops; the
	 * cancels catch the rest. */
	for (i = 0; i < nops; i++) {
		struct io_uring_sqe *sqe;

		if (!n->live[i]->busy || sq_room(n, 1) < 0)
			continue;
		sqe = io_uring_get_sqe(&u->ring);
		io_uring_prep_cancel64(sqe, UD(i, TAG_OP), 0);
		io_uring_sqe_set_data64(sqe, UD(i, TAG_CANCEL));
		u->inflight++;
	}
	io_uring_submit(&u->ring);
	limit = shmcoll__now_ns() + NOTIF_GRACE_NS;
	while (u->inflight || u->notifs) {
		if (next_cqe(n, &cqe, u->inflight ? -1 : limit) < 0)
			break;
		reap(n, cqe, 1, NULL, 0);
		io_uring_cqe_seen(&u->ring, cqe);
	}
}

static int uring_fail(struct shmcoll_net *n, int nops, int rc, const char *err)
{
	shmcoll__net_fail(n, rc, err);
	drain(n, nops);
	return rc;
}

static int uring_post(struct shmcoll_net *n, int nops, int64_t deadline, char *err, size_t errlen)
{
	struct net_uring *u = n->ur;
	int i, rc;

	u->deadline = deadline;
	u->left = nops;
	u->inflight = 0;
	u->notifs = 0;
	for (i = 0; i < nops; i++) {
		struct net_op *op = n->live[i];

		op->zc = u->zc && op->dir == XFER_SEND && op->x->len >= n->zc_min;
		rc = submit_op(n, i, err, errlen);
		if (rc < 0)
			return uring_fail(n, nops, rc, err);
	}
	/* Into the kernel now: a posted call moves while its caller works. */
	rc = io_uring_submit(&u->ring);
	if (rc < 0) {
		snprintf(err, errlen, "io_uring_submit: %s", strerror(-rc));
		return uring_fail(n, nops, rc, err);
	}
	return 0;
}

static int uring_wait(struct shmcoll_net *n, int nops, char *err, size_t errlen)
{
	struct net_uring *u = n->ur;
	struct io_uring_cqe *cqe;
	int i, rc = 0;

	while (u->left || u->inflight || u->notifs) {
		rc = next_cqe(n, &cqe, u->left || u->inflight ? -1 : u->deadline);
		if (rc == -ETIME) {
			for (i = 0; !n->live[i]->notifs; i++)
				;
			snprintf(err, errlen,
			         "node %d did not acknowledge a zero-copy send within %lld ms",
			         n->live[i]->peer, (long long)(n->timeout_ns / 1000000));
			return uring_fail(n, nops, -ETIMEDOUT, err);
		}
		if (rc < 0) {
			snprintf(err, errlen, "io_uring_wait_cqe: %s", strerror(-rc));
			return uring_fail(n, nops, rc, err);
		}
		rc = reap(n, cqe, 0, err, errlen);
		io_uring_cqe_seen(&u->ring, cqe);
		if (rc < 0)
			return uring_fail(n, nops, rc, err);
		u->left -= rc;
	}
	return 0;
}
static int uring_test(struct shmcoll_net *n, int nops, int *done, char *err, size_t errlen)
{
	struct net_uring *u = n->ur;
	struct io_uring_cqe *cqe;
	int i, rc;

	while ((u->left || u->inflight || u->notifs) && io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		rc = reap(n, cqe, 0, err, errlen);
		io_uring_cqe_seen(&u->ring, cqe);
		if (rc < 0)
			return uring_fail(n, nops, rc, err);
		u->left -= rc;
	}
	/* What reaping queued (the rest of a partial transfer, a retry) goes to the kernel now,
	 * to move while the caller works; with nothing queued this makes no system call. */
	rc = io_uring_submit(&u->ring);
	if (rc < 0) {
		snprintf(err, errlen, "io_uring_submit: %s", strerror(-rc));
		return uring_fail(n, nops, rc, err);
	}
	/* Only zero-copy notifications owed: bounded as uring_wait bounds them. */
	if (!u->left && !u->inflight && u->notifs && shmcoll__now_ns() >= u->deadline) {
		for (i = 0; !n->live[i]->notifs; i++)
			;
		snprintf(err, errlen, "node %d did not acknowledge a zero-copy send within %lld ms",
		         n->live[i]->peer, (long long)(n->timeout_ns / 1000000));
		return uring_fail(n, nops, -ETIMEDOUT, err);
	}
	*done = !u->left && !u->inflight && !u->notifs;
	return 0;
}

const struct net_backend shmcoll__net_uring = {
    .name = "io_uring",
    .init = uring_init,
    .exit = uring_exit,
    .post = uring_post,
    .wait = uring_wait,
    .test = uring_test,
};
#endif
