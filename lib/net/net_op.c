/* net_op.c - what both backends of the transport share below net.c: a transfer's frame
 * bookkeeping (its header encoded or checked, which bytes move next, how many moved), the
 * messages of its failures, and breaking the net. The backends (net_poll.c, net_uring.c) call
 * only this and frame.c, and net.c calls them through their tables (net_impl.h), so the files
 * of lib/net read in one order: net.c, the backends, this, frame.c and sock.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/net/net_impl.h"

#define NS_PER_MS 1000000ll

void shmcoll__net_say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void shmcoll__net_op_start(struct shmcoll_net *n, struct net_op *op, struct shmcoll_xfer *x)
{
	op->x = x;
	op->complete = 0;
	op->checked = 0;
	op->done = 0;
	op->busy = 0;
	op->notifs = 0;
	op->zc = 0;
	if (op->dir == XFER_SEND) {
		struct shmcoll_frame f = {.type = FRAME_DATA,
		                          .node = (uint16_t)n->node,
		                          .seq = ++n->tx_seq[op->peer],
		                          .call = x->call,
		                          .len = x->len};

		shmcoll__frame_encode(op->hdr, &f);
	}
}

int shmcoll__net_op_iov(const struct net_op *op, struct iovec *iov)
{
	size_t len = op->x->len, body;
	int cnt = 0;

	if (shmcoll__net_op_small(op)) {
		iov[0].iov_base = (uint8_t *)op->hdr + op->done;
		iov[0].iov_len = SHMCOLL_FRAME_BYTES + len - op->done;
		return 1;
	}
	if (op->done < SHMCOLL_FRAME_BYTES) {
		iov[cnt].iov_base = (uint8_t *)op->hdr + op->done;
		iov[cnt++].iov_len = SHMCOLL_FRAME_BYTES - op->done;
		/* A send takes the payload along in the same call; a receive
		 * must not read a byte of it before the header is checked. */
		if (op->dir == XFER_RECV || len == 0)
			return cnt;
		body = 0;
	} else {
		body = op->done - SHMCOLL_FRAME_BYTES;
	}
	iov[cnt].iov_base = (uint8_t *)op->x->buf + body;
	iov[cnt++].iov_len = len - body < NET_CHUNK ? len - body : NET_CHUNK;
	return cnt;
}

/* The receive's header is in: check it against what was posted. */
static int check_header(struct shmcoll_net *n, struct net_op *op, char *err, size_t errlen)
{
	struct shmcoll_xfer *x = op->x;
	struct shmcoll_frame f;
	uint32_t want = n->rx_seq[op->peer] + 1;
	char why[120];

	if (shmcoll__frame_decode(op->hdr, &f, why, sizeof(why)) < 0) {
		shmcoll__net_say(err, errlen, "node %d sent a malformed frame header: %s", op->peer,
		                 why);
		return -EPROTO;
	}
	x->got = f.call;
	if (f.type != FRAME_DATA) {
		shmcoll__net_say(err, errlen,
		                 "node %d sent a frame of type %u where data was expected",
		                 op->peer, f.type);
		return -EPROTO;
	}
	if (f.node != op->peer) {
		shmcoll__net_say(err, errlen, "node %d sent a frame marked as node %u's", op->peer,
		                 f.node);
		return -EPROTO;
	}
	if (f.seq != want) {
		shmcoll__net_say(err, errlen, "node %d sent frame %u where frame %u was due",
		                 op->peer, f.seq, want);
		return -EPROTO;
	}
	if (f.len != x->len) {
		shmcoll__net_say(err, errlen, "node %d announced %llu bytes where %zu were posted",
		                 op->peer, (unsigned long long)f.len, x->len);
		return -EPROTO;
	}
	if (f.call != x->call) {
		shmcoll__net_say(
		    err, errlen,
		    "node %d sent call word %#llx where %#llx was posted: the nodes called "
		    "different collectives or counts",
		    op->peer, (unsigned long long)f.call, (unsigned long long)x->call);
		return -EPROTO;
	}
	n->rx_seq[op->peer] = want;
	return 0;
}

int shmcoll__net_op_advance(struct shmcoll_net *n, struct net_op *op, size_t k, char *err,
                            size_t errlen)
{
	int rc;

	op->done += k;
	if (op->dir == XFER_RECV && !op->checked && op->done >= SHMCOLL_FRAME_BYTES) {
		rc = check_header(n, op, err, errlen);
		if (rc < 0)
			return rc;
		op->checked = 1;
	}
	op->complete = op->done == SHMCOLL_FRAME_BYTES + op->x->len;
	if (op->complete && shmcoll__net_op_small(op) && op->x->len)
		memcpy(op->x->buf, op->hdr + SHMCOLL_FRAME_BYTES, op->x->len);
	return 0;
}

int shmcoll__net_op_failed(const struct net_op *op, int res, char *err, size_t errlen)
{
	const char *what = op->dir == XFER_SEND ? "send to" : "receive from";

	if (res == 0 || res == -ECONNRESET || res == -EPIPE || res == -ESHUTDOWN) {
		/* A leader closes its connections when it dies, and shuts
		 * them down when its node failed: a rank there died or
		 * aborted, or timed out. */
		shmcoll__net_say(
		    err, errlen,
		    "node %d closed its connection: its leader died, or a rank there failed",
		    op->peer);
		return -EOWNERDEAD;
	}
	shmcoll__net_say(err, errlen, "%s node %d failed: %s", what, op->peer, strerror(-res));
	return res;
}

int shmcoll__net_op_timeout(const struct shmcoll_net *n, const struct net_op *op, char *err,
                            size_t errlen)
{
	size_t total = SHMCOLL_FRAME_BYTES + op->x->len;

	shmcoll__net_say(
	    err, errlen,
	    "%s node %d did not complete within %lld ms (%zu of %zu bytes moved): is it stuck?",
	    op->dir == XFER_SEND ? "a send to" : "a receive from", op->peer,
	    (long long)(n->timeout_ns / NS_PER_MS), op->done, total);
	return -ETIMEDOUT;
}

int shmcoll__net_fail(struct shmcoll_net *n, int rc, const char *err)
{
	if (!n->broken)
		snprintf(n->cause, sizeof(n->cause), "%s", err ? err : "");
	shmcoll__net_break(n);
	return rc;
}

#define SHUT_DOWN "the transport was shut down"
_Static_assert(sizeof(SHUT_DOWN) <= sizeof(((struct shmcoll_net *)0)->cause), "it fits");

void shmcoll__net_break(struct shmcoll_net *n)
{
	int i;

	/* memcpy, not snprintf: shmcoll_comm_abort comes here from signal handlers. */
	if (!n->broken && !n->cause[0])
		memcpy(n->cause, SHUT_DOWN, sizeof(SHUT_DOWN));
	n->broken = 1;
	/* shutdown, not close: the fds stay valid (no reuse under an SQE in
	 * flight) while every pending operation on them, ours and the
	 * peer's, completes at once. Repeating it is harmless. */
	for (i = 0; i < n->nnodes; i++)
		if (n->fd[i] >= 0)
			shutdown(n->fd[i], SHUT_RDWR);
}
