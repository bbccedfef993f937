/* net_impl.h - the transport's insides: the net's state, the backend table
 * net.c calls the backends (net_poll.c, net_uring.c) through, and the frame
 * bookkeeping both share (net_op.c). Private to the transport; tests of
 * internals include it to drive the resume logic alone. */
#ifndef SHMCOLL_NET_IMPL_H
#define SHMCOLL_NET_IMPL_H

#include <linux/time_types.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "lib/net/frame.h"
#include "lib/net/xfer.h"
#include "shmcoll.h"

/* The most payload one system call or SQE is given: io_uring's send and recv
 * lengths are 32 bits, and the kernel caps one transfer below 2 GiB anyway. */
#define NET_CHUNK ((size_t)1 << 30)

/* A receive of at most this many payload bytes reads its header and payload
 * in one piece into the op's own buffer, and copies the payload out once the
 * header has passed and the rest is in: one system call or CQE per small
 * message instead of two, and still no byte in the caller's buffer before
 * its header is checked. */
#define NET_SMALL ((size_t)4096 - SHMCOLL_FRAME_BYTES)

/* One transfer of a net_run in progress. A net owns two per peer (one per
 * direction), set up once in net_open, so a call allocates nothing. */
struct net_op {
	struct shmcoll_xfer *x; /* NULL: not part of this call */
	int peer;
	int dir; /* XFER_SEND or XFER_RECV */
	int fd;
	int complete;
	int checked;                                  /* a receive's header has passed */
	size_t done;                                  /* bytes of header + payload moved so far */
	uint8_t hdr[SHMCOLL_FRAME_BYTES + NET_SMALL]; /* the header; a small receive's payload */
	/* io_uring only: the msghdr of a send lives here while its SQE is in
	 * flight, as does the linked timeout's timespec. */
	int busy;   /* the op's SQE is in flight */
	int notifs; /* zero-copy notifications still to come */
	int zc;     /* this send goes zero-copy */
	struct msghdr msg;
	struct iovec iov[2];
	struct __kernel_timespec ts;
};

/* The io_uring state (net_uring.c). Behind a pointer so this layout is the
 * same with and without liburing, whoever includes this header. */
struct net_uring;

struct net_backend;

struct shmcoll_net {
	int nnodes, node, nproc;
	int kind;                     /* NET_URING or NET_POLL: what net_open chose */
	const struct net_backend *be; /* its table */
	int64_t timeout_ns;
	int *fd;              /* per node: its connection, -1 for this node */
	uint32_t *tx_seq;     /* per node: the seq of the last frame sent */
	uint32_t *rx_seq;     /* per node: the seq of the last frame received */
	struct net_op *ops;   /* 2 per node: [2 * peer + dir] */
	struct net_op **live; /* the ops of the current call */
	int broken;           /* a failure happened; cause says which */
	char cause[200];
	size_t zc_min;        /* io_uring: payloads of this many bytes or more go zero-copy */
	int64_t spin_ns;      /* how long a wait spins before it sleeps (0: not at all) */
	int posted;           /* ops of a posted call (net_post), or -1: none */
	int64_t deadline;     /* the posted call's */
	struct net_uring *ur; /* io_uring: NULL for the poll backend */

	/* The host's backend (net_host.c): what moves the bytes. */
	shmcoll_transport host;
};

/* Starts op on x: a send encodes its header (the next seq), a receive expects
 * the next one. */
void shmcoll__net_op_start(struct shmcoll_net *n, struct net_op *op, struct shmcoll_xfer *x);

/* Fills iov (2 entries) with what op moves next; returns the count (1 or 2,
 * at most NET_CHUNK payload bytes). A receive never spans the header and the
 * caller's buffer: the header is checked first (a small one reads both into
 * op->hdr). Only for an op not complete. */
int shmcoll__net_op_iov(const struct net_op *op, struct iovec *iov);

/* Whether op is a receive that goes through op->hdr whole (NET_SMALL). */
static inline int shmcoll__net_op_small(const struct net_op *op)
{
	return op->dir == XFER_RECV && op->x->len <= NET_SMALL;
}

/* Accounts k bytes moved for op. When a receive's header is in, checks it
 * against what was posted; when a small receive is complete, copies its
 * payload to the caller's buffer. Returns 0 (op->complete says whether it is done),
 * or -EPROTO with a message naming the peer. */
int shmcoll__net_op_advance(struct shmcoll_net *n, struct net_op *op, size_t k, char *err,
                            size_t errlen);

/* The code and message for a failed socket call (res < 0) or an EOF (0) on
 * op: -EOWNERDEAD for a closed or reset connection, else res. */
int shmcoll__net_op_failed(const struct net_op *op, int res, char *err, size_t errlen);

/* The message for an op that missed the deadline; returns -ETIMEDOUT. */
int shmcoll__net_op_timeout(const struct shmcoll_net *n, const struct net_op *op, char *err,
                            size_t errlen);

/* A backend: how the bytes of a posted call move. net.c has validated the
 * call and started its ops (shmcoll__net_op_start) before post, and ends it
 * (unposts, breaks n on failure) after wait, or after test once done. */
struct net_backend {
	const char *name; /* shmcoll__net_kind_name's */
	/* Sets the backend up on a new net (NULL: nothing to do). 0, or a
	 * negative errno with a message in err: net_open falls back to poll
	 * under NET_AUTO where it is -EPERM or -ENOSYS (io_uring forbidden or
	 * absent). */
	int (*init)(struct shmcoll_net *n, char *err, size_t errlen);
	/* Frees what init made, after cancelling what is in flight (NULL:
	 * nothing). */
	void (*exit)(struct shmcoll_net *n);
	/* Starts n->live[0..nops) (deadline < 0: none) without blocking. */
	int (*post)(struct shmcoll_net *n, int nops, int64_t deadline, char *err, size_t errlen);
	/* Moves them to the end, by n->deadline; -ECANCELED when n broke. */
	int (*wait)(struct shmcoll_net *n, int nops, char *err, size_t errlen);
	/* Moves them as far as they go now; *done once all are complete (and
	 * on failure). Fails at the deadline as wait does. */
	int (*test)(struct shmcoll_net *n, int nops, int *done, char *err, size_t errlen);
	/* On failure each of post, wait and test has broken n
	 * (shmcoll__net_fail) or leaves that to net.c, and has reaped
	 * everything in the kernel's hands that could touch a caller's buffer
	 * before it returns. */
};

extern const struct net_backend shmcoll__net_uring; /* net_uring.c */
extern const struct net_backend shmcoll__net_poll;  /* net_poll.c */
extern const struct net_backend shmcoll__net_host;  /* net_host.c */

/* CQEs that reached n's ring after the call that caused them returned (the
 * tests' check that a failed call left nothing in flight); 0 without a ring. */
unsigned shmcoll__net_uring_stray(struct shmcoll_net *n);

/* Formats a message into err (NULL or errlen 0: nothing). */
__attribute__((format(printf, 3, 4))) void shmcoll__net_say(char *err, size_t errlen,
                                                            const char *fmt, ...);

/* Breaks n (shmcoll__net_shutdown, net.h): marks it broken and shuts every
 * socket down. Async-signal-safe. */
void shmcoll__net_break(struct shmcoll_net *n);

/* Records the first failure of n (its message err) and breaks it. Returns
 * rc. */
int shmcoll__net_fail(struct shmcoll_net *n, int rc, const char *err);

#endif
