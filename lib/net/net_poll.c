/* net_poll.c - the poll() backend of the transport: non-blocking sendmsg/recvmsg on every
 * transfer of a call in turn, sleeping in poll() when none can move. Chosen where io_uring is
 * forbidden or missing, or with SHMCOLL_NET=poll (net.c picks; net.h). A posted call moves
 * as far as the sockets take without blocking and the socket buffers carry the rest until it
 * is tested or waited for; nothing is in the kernel's hands between calls, so a failure
 * needs no reaping. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/net/net_impl.h"
#include "lib/net/sock.h"
#include "shm/atomics.h"
#include "shm/wait.h"

static int expired(int64_t deadline)
{
	return deadline >= 0 && shmcoll__now_ns() >= deadline;
}

/* One non-blocking step of op; returns 1 if bytes moved, 0 if the socket
 * would block, or a negative code (message in err). */
static int poll_step(struct shmcoll_net *n, struct net_op *op, char *err, size_t errlen)
{
	struct iovec iov[2];
	struct msghdr msg = {.msg_iov = iov};
	ssize_t r;

	msg.msg_iovlen = (size_t)shmcoll__net_op_iov(op, iov);
	do {
		if (op->dir == XFER_SEND)
			r = sendmsg(op->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			r = recvmsg(op->fd, &msg, MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (r < 0)
		return shmcoll__net_op_failed(op, -errno, err, errlen);
	if (r == 0 && op->dir == XFER_RECV)
		return shmcoll__net_op_failed(op, 0, err, errlen);
	r = shmcoll__net_op_advance(n, op, (size_t)r, err, errlen);
	return r < 0 ? (int)r : 1;
}

/* Bytes one op may move per round before the others get their turn, so a
 * fast send cannot starve the receive from the same peer. */
#define POLL_ROUND_BYTES ((size_t)4 << 20)

/* Moves n->live[0..nops): all the way (wait), or as far as the sockets take
 * without blocking (a post). */
static int poll_run(struct shmcoll_net *n, int nops, int64_t deadline, int wait, char *err,
                    size_t errlen)
{
	struct pollfd pfd[2 * SHMCOLL_NODES_MAX];
	int64_t spin_until = -1, now;
	int i, rc, moved, left;

	for (;;) {
		moved = 0;
		left = 0;
		for (i = 0; i < nops; i++) {
			struct net_op *op = n->live[i];
			size_t start = op->done;

			while (!op->complete && op->done - start < POLL_ROUND_BYTES) {
				rc = poll_step(n, op, err, errlen);
				if (rc < 0)
					return rc;
				if (rc == 0)
					break;
				moved = 1;
			}
			left += !op->complete;
		}
		if (!left || !wait)
			return 0;
		if (expired(deadline)) {
			for (i = 0; n->live[i]->complete; i++)
				;
			return shmcoll__net_op_timeout(n, n->live[i], err, errlen);
		}
		if (moved) {
			spin_until = -1;
			continue;
		}
		/* Retry for a while before sleeping in poll() (see spin_ns). */
		if (n->spin_ns > 0) {
			now = shmcoll__now_ns();
			if (spin_until < 0)
				spin_until = now + n->spin_ns;
			if (now < spin_until) {
				cpu_relax();
				continue;
			}
		}
		for (i = 0; i < nops; i++) {
			pfd[i].fd = n->live[i]->complete ? -1 : n->live[i]->fd;
			pfd[i].events = n->live[i]->dir == XFER_SEND ? POLLOUT : POLLIN;
			pfd[i].revents = 0;
		}
		/* Readiness is all poll() reports: errors and EOF show in the
		 * next step's system call. */
		if (poll(pfd, (nfds_t)nops, shmcoll__poll_ms(deadline)) < 0 && errno != EINTR) {
			rc = -errno;
			shmcoll__net_say(err, errlen, "poll: %s", strerror(errno));
			return rc;
		}
	}
}

static int poll_post(struct shmcoll_net *n, int nops, int64_t deadline, char *err, size_t errlen)
{
	return poll_run(n, nops, deadline, 0, err, errlen);
}

static int poll_wait(struct shmcoll_net *n, int nops, char *err, size_t errlen)
{
	if (n->broken)
		return -ECANCELED; /* nothing is in the kernel's hands to reap */
	return poll_run(n, nops, n->deadline, 1, err, errlen);
}

static int poll_test(struct shmcoll_net *n, int nops, int *done, char *err, size_t errlen)
{
	int i, rc;

	*done = 1;
	if (n->broken)
		return -ECANCELED;
	rc = poll_run(n, nops, n->deadline, 0, err, errlen);
	for (i = 0; rc == 0 && i < nops; i++)
		if (!n->live[i]->complete) {
			*done = 0;
			if (expired(n->deadline))
				rc = shmcoll__net_op_timeout(n, n->live[i], err, errlen);
			break;
		}
	return rc;
}

const struct net_backend shmcoll__net_poll = {
    .name = "poll",
    .post = poll_post,
    .wait = poll_wait,
    .test = poll_test,
};
