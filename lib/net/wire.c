/* wire.c - point-to-point across nodes (wire.h): the connections, the thread that moves their
 * bytes, and the matching of what arrives.
 *
 * Everything below is guarded by the wire's mutex, taken by the caller's thread for a start,
 * a test or the caller's half of matching, and by the wire thread for everything it does but
 * its poll(). Sockets are non-blocking: no one holds the mutex while waiting on one. The
 * communicator above is reached only through the cfg's functions (wire.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/net/wire.h"
#include "lib/net/sock.h"
#include "shm/atomics.h"
#include "shm/wait.h"

/* The most payload one system call moves (as the leaders' transport). */
#define WIRE_CHUNK ((size_t)1 << 30)
/* Bytes a cut-short receive reads and drops at a time. */
#define SINK_BYTES ((size_t)64 << 10)
/* How long the thread sleeps in poll() at most: it looks at the communicator's broken words
 * between sleeps (a break by another rank of the node writes no eventfd of ours). */
#define POLL_MS 50
/* How long the last frame may take to be written at close. */
#define BYE_NS 1000000000LL

/* A message that arrived before a receive took it. */
struct wire_msg {
	struct shmcoll_link link; /* on the wire's uq */
	int src, tag, ctx;
	uint64_t len;
	uint8_t data[];
};

enum { IN_HELLO, IN_HDR, IN_BODY, IN_BYE };

/* A connection another node's rank opened to this one: the messages it sends us. */
struct wire_in {
	int fd;
	int rank; /* the sender's global rank, once its hello passed; else -1 */
	int state;
	uint32_t seq; /* frames read */
	size_t have;  /* bytes of the hello, header or payload read */
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	struct shmcoll_frame f;
	size_t keep;          /* IN_BODY into op: the payload bytes that fit its buffer */
	struct wire_op *op;   /* IN_BODY: the receive it goes to, or */
	struct wire_msg *msg; /* the buffer of an unexpected message */
};

enum { OUT_CLOSED, OUT_CONNECTING, OUT_READY };

/* The thread's poll set: entries other than connections. */
enum { WHO_EFD = INT_MIN, WHO_LISTENER };

/* The connection this rank opened to one other node's rank: our messages to it, in order. */
struct wire_out {
	int fd;
	int state;
	uint32_t seq;
	size_t hello_off; /* bytes of the hello written */
	uint8_t hello[SHMCOLL_HELLO_BYTES];
	struct shmcoll_list ops; /* the sends, in order */
};

struct shmcoll_wire {
	struct shmcoll_wire_cfg job;     /* the communicator it serves */
	int lfd;                         /* this rank's listener */
	int efd;                         /* wakes the thread */
	char (*addrs)[SHMCOLL_ADDR_MAX]; /* every rank's listener */
	char token[SHMCOLL_TOKEN_MAX + 1];
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	struct wire_out *out; /* per global rank (unused for this node's) */
	struct wire_in **in;  /* accepted connections */
	int nin, capin;
	struct pollfd *pfd;         /* the thread's: 2 + size + capin entries */
	int *pfd_who;               /* what each is: WHO_*, an out's rank (>= 0), else ~in index */
	struct shmcoll_list posted; /* receives, in the order they were posted */
	struct shmcoll_list uq;     /* messages arrived unmatched (wire_msg), in arrival order */
	unsigned active;
	int failed;                 /* once non-zero: every operation completes with it */
	char cause[WIRE_CAUSE_MAX]; /* why, for the caller's thread to report */
	int stop;
	uint8_t *sink;
};

static void lock(struct shmcoll_wire *w)
{
	pthread_mutex_lock(&w->mu);
}

static void unlock(struct shmcoll_wire *w)
{
	pthread_mutex_unlock(&w->mu);
}

static void wake_thread(struct shmcoll_wire *w)
{
	uint64_t one = 1;

	if (w->efd >= 0 && write(w->efd, &one, sizeof(one)) < 0) {
		/* The counter is full: the thread has wakes enough to come. */
	}
}

/* Wakes the caller's thread if it sleeps in a wait on the node's bell. */
static void nudge(struct shmcoll_wire *w)
{
	w->job.wake(w->job.ctx);
}

static void complete(struct shmcoll_wire *w, struct wire_op *op, int rc)
{
	op->rc = rc;
	w->active--;
	store_release(&op->done, 1);
	nudge(w);
}

/* ---- lists ---- */

/* The operations and messages on the lists of shm/list.h. */
static struct wire_op *op_at(struct shmcoll_link *e)
{
	return e ? shmcoll__entry(e, struct wire_op, link) : NULL;
}

static struct wire_msg *msg_at(struct shmcoll_link *e)
{
	return e ? shmcoll__entry(e, struct wire_msg, link) : NULL;
}

static void posted_remove(struct shmcoll_wire *w, struct wire_op *op)
{
	shmcoll__list_remove(&w->posted, &op->link);
}

static void posted_append(struct shmcoll_wire *w, struct wire_op *op)
{
	shmcoll__list_push(&w->posted, &op->link);
}

static int matches(const struct wire_op *op, int src, int tag, int ctx)
{
	return op->ctx == ctx && (op->peer == WIRE_ANY || op->peer == src) &&
	       (op->tag == WIRE_ANY || op->tag == tag);
}

/* ---- failure ---- */

static void fail_locked(struct shmcoll_wire *w, int rc)
{
	struct wire_op *op;
	int r;

	if (!w->failed)
		w->failed = rc;
	while ((op = op_at(shmcoll__list_pop(&w->posted))) != NULL)
		complete(w, op, rc);
	for (r = 0; w->out && r < w->job.size; r++) {
		struct wire_out *o = &w->out[r];

		while ((op = op_at(shmcoll__list_pop(&o->ops))) != NULL)
			complete(w, op, rc);
	}
	/* Receives reading a payload now are the connection's: it fails them. */
	for (r = 0; r < w->nin; r++) {
		struct wire_in *in = w->in[r];

		if (in->state == IN_BODY && in->op) {
			complete(w, in->op, rc);
			in->op = NULL;
		}
	}
}

/* Shuts every connection down, so every peer learns at once. */
static void shut_all(struct shmcoll_wire *w)
{
	int r;

	for (r = 0; w->out && r < w->job.size; r++)
		if (w->out[r].fd >= 0)
			shutdown(w->out[r].fd, SHUT_RDWR);
	for (r = 0; r < w->nin; r++)
		if (w->in[r]->fd >= 0)
			shutdown(w->in[r]->fd, SHUT_RDWR);
}

/* A failure the wire found (the thread or a start): the message, the communicator broken
 * for everyone (its node's ranks wake; the leaders' connections go down), every operation
 * failed. */
static void wire_failed(struct shmcoll_wire *w, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wire_failed(struct shmcoll_wire *w, int rc, const char *fmt, ...)
{
	va_list ap;

	if (w->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(w->cause, sizeof(w->cause), fmt, ap);
	va_end(ap);
	fail_locked(w, rc);
	shut_all(w);
	w->job.broke(w->job.ctx, -rc);
	wake_thread(w);
}

/* ---- the connections we open ---- */

/* Opens the connection to rank r (not connected yet when this returns, maybe). */
static int out_open(struct shmcoll_wire *w, int r)
{
	const struct shmcoll_wire_cfg *h = &w->job;
	struct wire_out *o = &w->out[r];
	struct shmcoll_hello hi = {.version = SHMCOLL_WIRE_VERSION,
	                           .role = ROLE_PEER,
	                           .nnodes = (uint32_t)h->nnodes,
	                           .node = (uint32_t)h->node,
	                           .nproc = (uint32_t)h->nproc,
	                           .rank = (uint32_t)h->rank};
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char host[SHMCOLL_ADDR_MAX], port[8];
	uint16_t p;
	int fd, one = 1, rc;

	snprintf(hi.token, sizeof(hi.token), "%s", w->token);
	if (shmcoll__hello_encode(o->hello, &hi) < 0 ||
	    shmcoll__addr_split(w->addrs[r], host, sizeof(host), &p) < 0)
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", p);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc)
		return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		return rc;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	if (rc < 0 && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return rc;
	}
	o->fd = fd;
	o->state = rc == 0 ? OUT_READY : OUT_CONNECTING;
	o->hello_off = 0;
	return 0;
}

/* Writes what o has to write while its socket takes it; completes the sends written whole.
 * 0, or a negative errno (the connection failed). */
static int out_write(struct shmcoll_wire *w, int r)
{
	struct wire_out *o = &w->out[r];
	struct wire_op *op;
	ssize_t k;

	if (o->state == OUT_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return -errno;
		if (err)
			return -err;
		/* Still connecting? A write says EAGAIN (or ENOTCONN) and we poll again. */
		o->state = OUT_READY;
	}
	while (o->hello_off < SHMCOLL_HELLO_BYTES) {
		k = send(o->fd, o->hello + o->hello_off, SHMCOLL_HELLO_BYTES - o->hello_off,
		         MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0)
			return errno == EAGAIN || errno == ENOTCONN ? 0
			       : errno == EINTR                     ? 0
			                                            : -errno;
		o->hello_off += (size_t)k;
	}
	while ((op = op_at(o->ops.head)) != NULL) {
		struct iovec iov[2];
		struct msghdr m = {.msg_iov = iov};
		size_t total = SHMCOLL_FRAME_BYTES + op->bytes, pay;

		if (op->off < SHMCOLL_FRAME_BYTES) {
			iov[0].iov_base = op->hdr + op->off;
			iov[0].iov_len = SHMCOLL_FRAME_BYTES - op->off;
			pay = op->bytes < WIRE_CHUNK ? op->bytes : WIRE_CHUNK;
			iov[1].iov_base = op->buf;
			iov[1].iov_len = pay;
			m.msg_iovlen = pay ? 2 : 1;
		} else {
			pay = total - op->off;
			iov[0].iov_base = op->buf + (op->off - SHMCOLL_FRAME_BYTES);
			iov[0].iov_len = pay < WIRE_CHUNK ? pay : WIRE_CHUNK;
			m.msg_iovlen = 1;
		}
		k = sendmsg(o->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		op->off += (size_t)k;
		if (op->off < total)
			continue;
		shmcoll__list_remove(&o->ops, &op->link);
		complete(w, op, 0);
	}
	return 0;
}

static void out_failed(struct shmcoll_wire *w, int r, int rc)
{
	const struct shmcoll_wire_cfg *h = &w->job;

	if (rc == -EPIPE || rc == -ECONNRESET || rc == -ECONNREFUSED || rc == -ECONNABORTED)
		wire_failed(w, -EOWNERDEAD,
		            "rank %d (node %d) closed or refused its connection from rank %d: it "
		            "died or aborted",
		            r, r / h->nproc, h->rank);
	else
		wire_failed(w, rc, "sending to rank %d (node %d) at %s: %s", r, r / h->nproc,
		            w->addrs[r], strerror(-rc));
}

/* ---- the connections others opened ---- */

/* A receive's share of a message of len bytes. */
static void take(struct wire_op *op, int src, int tag, uint64_t len)
{
	op->src = src;
	op->rtag = tag;
	op->total = len;
	op->got = len < op->bytes ? (size_t)len : op->bytes;
}

/* The receive posted here that a message (src, tag, ctx) goes to, taken off the list; NULL
 * when none does, or when the first that matches is a receive from WIRE_ANY: those the
 * caller's thread decides (its local half may have matched already). */
static struct wire_op *match_posted(struct shmcoll_wire *w, int src, int tag, int ctx)
{
	struct wire_op *op;

	for (op = op_at(w->posted.head); op; op = op_at(op->link.next))
		if (matches(op, src, tag, ctx)) {
			if (op->any)
				return NULL;
			posted_remove(w, op);
			return op;
		}
	return NULL;
}

/* A message read whole into its own buffer: to a receive posted meanwhile, or queued. */
static void arrived(struct shmcoll_wire *w, struct wire_msg *m)
{
	struct wire_op *op = match_posted(w, m->src, m->tag, m->ctx);

	if (op) {
		take(op, m->src, m->tag, m->len);
		memcpy(op->buf, m->data, op->got);
		complete(w, op, m->len > op->bytes ? -EMSGSIZE : 0);
		free(m);
		return;
	}
	shmcoll__list_push(&w->uq, &m->link);
	nudge(w); /* a receive from WIRE_ANY, or a probe, may want it */
}

/* The header in in->buf is in: checks it and starts its payload. 0 or a negative errno with
 * the wire failed. */
static int in_header(struct shmcoll_wire *w, struct wire_in *in)
{
	const struct shmcoll_wire_cfg *h = &w->job;
	struct shmcoll_frame *f = &in->f;
	char why[96];
	int ctx, tag, bad = shmcoll__frame_decode(in->buf, f, why, sizeof(why)) < 0;

	if (!bad && ((f->type != FRAME_P2P && f->type != FRAME_BYE) ||
	             f->node != in->rank / h->nproc || f->seq != in->seq + 1)) {
		snprintf(why, sizeof(why), "type %u, node %u, seq %u where %u was next", f->type,
		         f->node, f->seq, in->seq + 1);
		bad = 1;
	}
	if (bad) {
		wire_failed(w, -EPROTO, "rank %d sent rank %d a malformed frame (%s)", in->rank,
		            h->rank, why);
		return -EPROTO;
	}
	in->seq = f->seq;
	in->have = 0;
	if (f->type == FRAME_BYE) {
		in->state = IN_BYE;
		return 0;
	}
	if (f->call >> 32 >= (uint64_t)h->nctx || (uint32_t)f->call > INT_MAX) {
		wire_failed(w, -EPROTO, "rank %d sent rank %d a message with call word %016llx",
		            in->rank, h->rank, (unsigned long long)f->call);
		return -EPROTO;
	}
	ctx = (int)(f->call >> 32);
	tag = (int)(uint32_t)f->call;
	in->op = match_posted(w, in->rank, tag, ctx);
	in->msg = NULL;
	if (in->op) {
		take(in->op, in->rank, tag, f->len);
		in->keep = in->op->got;
	} else {
		in->msg = malloc(sizeof(*in->msg) + (size_t)f->len);
		if (!in->msg) {
			wire_failed(
			    w, -ENOMEM,
			    "rank %d: out of memory for a message of %llu bytes from rank %d",
			    h->rank, (unsigned long long)f->len, in->rank);
			return -ENOMEM;
		}
		in->msg->src = in->rank;
		in->msg->tag = tag;
		in->msg->ctx = ctx;
		in->msg->len = f->len;
		in->keep = (size_t)f->len;
	}
	in->state = IN_BODY;
	return 0;
}

/* The payload of in's frame is in. */
static void in_body_done(struct shmcoll_wire *w, struct wire_in *in)
{
	if (in->op)
		complete(w, in->op, in->f.len > in->op->bytes ? -EMSGSIZE : 0);
	else
		arrived(w, in->msg);
	in->op = NULL;
	in->msg = NULL;
	in->state = IN_HDR;
	in->have = 0;
}

/* Where the next bytes of in go, and how many at most. */
static size_t in_dest(struct shmcoll_wire *w, struct wire_in *in, uint8_t **p)
{
	size_t want;

	switch (in->state) {
	case IN_HELLO:
		*p = in->buf + in->have;
		return SHMCOLL_HELLO_BYTES - in->have;
	case IN_HDR:
		*p = in->buf + in->have;
		return SHMCOLL_FRAME_BYTES - in->have;
	case IN_BYE:
		*p = in->buf;
		return 1;
	default:
		break;
	}
	if (in->have < in->keep) {
		*p = (in->op ? in->op->buf : in->msg->data) + in->have;
		want = in->keep - in->have;
	} else {
		/* A cut-short receive: the rest of the payload is read and dropped. */
		*p = w->sink;
		want = (size_t)in->f.len - in->have;
		if (want > SINK_BYTES)
			want = SINK_BYTES;
	}
	return want < WIRE_CHUNK ? want : WIRE_CHUNK;
}

/* The hello of in is in: 0 to go on, -1 to drop the connection (not one of ours). */
static int in_hello(struct shmcoll_wire *w, struct wire_in *in)
{
	const struct shmcoll_wire_cfg *h = &w->job;
	struct shmcoll_hello hi;
	char why[96];
	int i;

	if (shmcoll__hello_decode(in->buf, &hi, why, sizeof(why)) < 0 || hi.role != ROLE_PEER ||
	    !shmcoll__token_equal(hi.token, w->token) || hi.nnodes != (uint32_t)h->nnodes ||
	    hi.nproc != (uint32_t)h->nproc || hi.node == (uint32_t)h->node ||
	    hi.rank / hi.nproc != hi.node)
		return -1;
	for (i = 0; i < w->nin; i++)
		if (w->in[i]->rank == (int)hi.rank)
			return -1; /* one connection per sender */
	in->rank = (int)hi.rank;
	in->state = IN_HDR;
	in->have = 0;
	return 0;
}

/* Reads what in has while its socket has it. 0; 1 when the connection ended (cleanly, or a
 * stranger's: drop it); a negative errno with the wire failed. */
static int in_read(struct shmcoll_wire *w, struct wire_in *in)
{
	const struct shmcoll_wire_cfg *h = &w->job;
	uint8_t *p;
	size_t want;
	ssize_t k;

	for (;;) {
		if (in->state == IN_BODY && in->have == in->f.len) {
			in_body_done(w, in);
			continue;
		}
		want = in_dest(w, in, &p);
		k = recv(in->fd, p, want, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return 0;
		if (k <= 0) {
			if ((k == 0 && in->state == IN_BYE) || in->rank < 0)
				return 1;
			wire_failed(w, -EOWNERDEAD,
			            "rank %d (node %d) closed its connection to rank %d without "
			            "destroying its communicator: it died or aborted",
			            in->rank, in->rank / h->nproc, h->rank);
			return -EOWNERDEAD;
		}
		if (in->state == IN_BYE) {
			wire_failed(w, -EPROTO, "rank %d sent rank %d bytes after its last frame",
			            in->rank, h->rank);
			return -EPROTO;
		}
		in->have += (size_t)k;
		if (in->state == IN_HELLO && in->have == SHMCOLL_HELLO_BYTES) {
			if (in_hello(w, in) < 0)
				return 1;
		} else if (in->state == IN_HDR && in->have == SHMCOLL_FRAME_BYTES) {
			int rc = in_header(w, in);

			if (rc < 0)
				return rc;
		}
	}
}

static void in_drop(struct shmcoll_wire *w, int i)
{
	struct wire_in *in = w->in[i];

	close(in->fd);
	free(in->msg);
	free(in);
	w->in[i] = w->in[--w->nin];
}

static void accept_all(struct shmcoll_wire *w)
{
	for (;;) {
		int fd = accept4(w->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct wire_in *in;

		if (fd < 0)
			return; /* EAGAIN, or a connection that failed before we took it */
		if (w->nin == w->capin) {
			int cap = w->capin ? 2 * w->capin : 8;
			struct wire_in **a = realloc(w->in, (size_t)cap * sizeof(*a));
			struct pollfd *pf =
			    realloc(w->pfd, (size_t)(2 + w->job.size + cap) * sizeof(*pf));
			int *who =
			    pf ? realloc(w->pfd_who, (size_t)(2 + w->job.size + cap) * sizeof(*who))
			       : NULL;

			if (a)
				w->in = a;
			if (pf)
				w->pfd = pf;
			if (who)
				w->pfd_who = who;
			if (!a || !pf || !who) {
				close(fd);
				wire_failed(w, -ENOMEM, "rank %d: out of memory for a connection",
				            w->job.rank);
				return;
			}
			w->capin = cap;
		}
		in = calloc(1, sizeof(*in));
		if (!in) {
			close(fd);
			wire_failed(w, -ENOMEM, "rank %d: out of memory for a connection",
			            w->job.rank);
			return;
		}
		in->fd = fd;
		in->rank = -1;
		in->state = IN_HELLO;
		w->in[w->nin++] = in;
	}
}

/* ---- the thread ---- */

static int broken(const struct shmcoll_wire *w)
{
	return w->job.broken(w->job.ctx);
}

static int build_pollset(struct shmcoll_wire *w)
{
	int n = 0, r, i;

	w->pfd[n] = (struct pollfd){.fd = w->efd, .events = POLLIN};
	w->pfd_who[n++] = WHO_EFD;
	if (w->failed)
		return n;
	w->pfd[n] = (struct pollfd){.fd = w->lfd, .events = POLLIN};
	w->pfd_who[n++] = WHO_LISTENER;
	for (r = 0; r < w->job.size; r++) {
		struct wire_out *o = &w->out[r];

		/* Only a connection with something to write: a finished one's peer may close it
		 * (and an error there means nothing to us). */
		if (o->fd >= 0 && (o->ops.head || o->state == OUT_CONNECTING ||
		                   o->hello_off < SHMCOLL_HELLO_BYTES)) {
			w->pfd[n] = (struct pollfd){.fd = o->fd, .events = POLLOUT};
			w->pfd_who[n++] = r;
		}
	}
	for (i = 0; i < w->nin; i++) {
		w->pfd[n] = (struct pollfd){.fd = w->in[i]->fd, .events = POLLIN};
		w->pfd_who[n++] = ~i;
	}
	return n;
}

static void *wire_main(void *arg)
{
	struct shmcoll_wire *w = arg;
	uint64_t ev;
	int n, i, rc;

	lock(w);
	while (!w->stop) {
		if (!w->failed && broken(w)) {
			fail_locked(w, -ECANCELED);
			shut_all(w);
		}
		n = build_pollset(w);
		unlock(w);
		poll(w->pfd, (nfds_t)n, POLL_MS);
		lock(w);
		if (w->stop)
			break;
		if (w->pfd[0].revents && read(w->efd, &ev, sizeof(ev)) < 0) {
			/* EAGAIN: another wake took it */
		}
		if (w->failed)
			continue;
		/* The ins first, from the last: a dropped one is replaced by the last. */
		for (i = n - 1; i > 0 && !w->failed; i--) {
			int who = w->pfd_who[i];

			if (!w->pfd[i].revents)
				continue;
			if (who == WHO_LISTENER) {
				accept_all(w);
			} else if (who >= 0) {
				rc = out_write(w, who);
				if (rc < 0)
					out_failed(w, who, rc);
			} else {
				rc = in_read(w, w->in[~who]);
				if (rc == 1)
					in_drop(w, ~who);
			}
		}
	}
	unlock(w);
	return NULL;
}

/* Starts the thread, the first time. 0 or a negative errno. */
static int start_thread(struct shmcoll_wire *w)
{
	sigset_t all, old;
	int rc;

	if (w->started)
		return 0;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		return -errno;
	/* Signals are the caller's threads' to take: the thread blocks them all. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->thread, NULL, wire_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(w->efd);
		w->efd = -1;
		return -rc;
	}
	w->started = 1;
	return 0;
}

/* ---- the caller's side ---- */

static void op_init(struct wire_op *op, const char *fn, int kind, const void *buf, size_t bytes,
                    int peer, int tag, int ctx)
{
	memset(op, 0, sizeof(*op));
	op->fn = fn;
	op->kind = kind;
	op->buf = (uint8_t *)(uintptr_t)buf;
	op->bytes = bytes;
	op->peer = peer;
	op->tag = tag;
	op->ctx = ctx;
	op->src = WIRE_ANY;
	op->rtag = WIRE_ANY;
}

/* A start that cannot go on: op completes with rc, the communicator breaks. */
static void start_failed(struct shmcoll_wire *w, struct wire_op *op, int rc, const char *what)
{
	w->active++;
	wire_failed(w, rc, "%s: %s: %s", op->fn, what, strerror(-rc));
	if (!atomic_load(&op->done))
		complete(w, op, rc);
}

/* A start, with the wire locked: the thread running, and for a send the connection opened;
 * op counted outstanding. 1 to go on, 0 when op is complete already (it could not start, or
 * the wire failed before). */
static int op_begin(struct shmcoll_wire *w, struct wire_op *op)
{
	int rc = start_thread(w);

	if (rc == 0 && !w->failed && op->kind == WIRE_SEND && w->out[op->peer].fd < 0)
		rc = out_open(w, op->peer);
	if (rc < 0) {
		start_failed(w, op, rc,
		             op->kind == WIRE_SEND
		                 ? "could not open a connection to another node"
		                 : "could not start the thread of messages between nodes");
		return 0;
	}
	w->active++;
	if (w->failed) {
		complete(w, op, w->failed);
		return 0;
	}
	return 1;
}

void shmcoll__wire_isend(struct shmcoll_wire *w, struct wire_op *op, const char *fn,
                         const void *buf, size_t bytes, int dest, int tag, int ctx)
{
	struct wire_out *o = &w->out[dest];
	struct shmcoll_frame f = {.type = FRAME_P2P,
	                          .node = (uint16_t)w->job.node,
	                          .call = (uint64_t)ctx << 32 | (uint32_t)tag,
	                          .len = bytes};
	int rc;

	op_init(op, fn, WIRE_SEND, buf, bytes, dest, tag, ctx);
	lock(w);
	if (!op_begin(w, op)) {
		unlock(w);
		return;
	}
	f.seq = ++o->seq;
	shmcoll__frame_encode(op->hdr, &f);
	shmcoll__list_push(&o->ops, &op->link);
	/* Written here while the socket takes it: a small message costs no wake of the
	 * thread. */
	if (o->ops.head == &op->link && o->state == OUT_READY) {
		rc = out_write(w, dest);
		if (rc < 0)
			out_failed(w, dest, rc);
	}
	if (!atomic_load_explicit(&op->done, memory_order_relaxed))
		wake_thread(w);
	unlock(w);
}

/* The earliest arrived message matching op, taken off the queue, or NULL. */
static struct wire_msg *uq_take(struct shmcoll_wire *w, const struct wire_op *op)
{
	struct wire_msg *m;

	for (m = msg_at(w->uq.head); m; m = msg_at(m->link.next))
		if (matches(op, m->src, m->tag, m->ctx)) {
			shmcoll__list_remove(&w->uq, &m->link);
			return m;
		}
	return NULL;
}

static void deliver(struct shmcoll_wire *w, struct wire_op *op, struct wire_msg *m)
{
	take(op, m->src, m->tag, m->len);
	memcpy(op->buf, m->data, op->got);
	complete(w, op, m->len > op->bytes ? -EMSGSIZE : 0);
	free(m);
}

static void resolve_locked(struct shmcoll_wire *w)
{
	struct wire_op *op, *next;
	struct wire_msg *m;

	for (op = op_at(w->posted.head); op; op = next) {
		next = op_at(op->link.next);
		if (op->any && w->job.claimed(w->job.ctx, op->any)) {
			/* Its local half matched a message of the node: the receive is that. */
			posted_remove(w, op);
			continue;
		}
		m = uq_take(w, op);
		if (!m)
			continue;
		posted_remove(w, op);
		if (op->any) {
			w->job.cancel(w->job.ctx, op->any); /* still posted: this takes it back */
			op->any = NULL;
		}
		deliver(w, op, m);
	}
}

void shmcoll__wire_irecv(struct shmcoll_wire *w, struct wire_op *op, const char *fn, void *buf,
                         size_t bytes, int source, int tag, int ctx, void *local)
{
	op_init(op, fn, WIRE_RECV, buf, bytes, source, tag, ctx);
	op->any = local;
	lock(w);
	if (!op_begin(w, op)) {
		unlock(w);
		return;
	}
	/* Behind every receive posted before it, which take what they match first. */
	posted_append(w, op);
	resolve_locked(w);
	unlock(w);
}

/* The caller's thread moves its own operation's bytes too, while it spins before it sleeps:
 * a message it waits for then costs no wake-up of the wire thread. */
static void help_locked(struct shmcoll_wire *w, struct wire_op *op)
{
	int i, rc;

	if (w->failed || op->peer < 0)
		return;
	if (op->kind == WIRE_SEND) {
		if (w->out[op->peer].state == OUT_READY && (rc = out_write(w, op->peer)) < 0)
			out_failed(w, op->peer, rc);
		return;
	}
	for (i = 0; i < w->nin; i++)
		if (w->in[i]->rank == op->peer) {
			in_read(w,
			        w->in[i]); /* an end of the connection is the thread's to handle */
			return;
		}
}

int shmcoll__wire_done(struct shmcoll_wire *w, struct wire_op *op)
{
	if (load_acquire(&op->done))
		return 1;
	lock(w);
	if (!load_relaxed(&op->done))
		help_locked(w, op);
	resolve_locked(w);
	unlock(w);
	return load_acquire(&op->done);
}

int shmcoll__wire_cause(struct shmcoll_wire *w, char *buf, size_t len)
{
	int rc;

	lock(w);
	rc = w->failed;
	snprintf(buf, len, "%s", w->cause);
	unlock(w);
	return rc;
}

void shmcoll__wire_withdraw(struct shmcoll_wire *w, struct wire_op *op)
{
	lock(w);
	if (!load_relaxed(&op->done)) {
		posted_remove(w, op);
		w->active--;
		store_release(&op->done, 1);
	}
	unlock(w);
}

int shmcoll__wire_peek(struct shmcoll_wire *w, int source, int tag, int ctx, int *src, int *rtag,
                       uint64_t *bytes)
{
	struct wire_op probe;
	struct wire_msg *m;
	int found = 0;

	op_init(&probe, NULL, WIRE_RECV, NULL, 0, source, tag, ctx);
	lock(w);
	if (!w->started)
		start_thread(w); /* a probe waits for messages as a receive does */
	resolve_locked(w);
	for (m = msg_at(w->uq.head); m && !found; m = msg_at(m->link.next))
		if (matches(&probe, m->src, m->tag, m->ctx)) {
			*src = m->src;
			*rtag = m->tag;
			*bytes = m->len;
			found = 1;
		}
	unlock(w);
	return found;
}

void shmcoll__wire_fail_all(struct shmcoll_wire *w, int rc)
{
	if (!w)
		return;
	lock(w);
	fail_locked(w, rc);
	shut_all(w);
	unlock(w);
	wake_thread(w);
}

unsigned shmcoll__wire_active(struct shmcoll_wire *w)
{
	unsigned a;

	if (!w)
		return 0;
	lock(w);
	a = w->active;
	unlock(w);
	return a;
}

void shmcoll__wire_break(struct shmcoll_wire *w)
{
	if (w)
		wake_thread(w); /* it finds the broken word and shuts everything down */
}

/* ---- set-up and the end ---- */

int shmcoll__wire_open(const struct shmcoll_wire_cfg *cfg, const char *host, const char *token,
                       struct shmcoll_wire **out, char *addr, size_t addrlen)
{
	const struct shmcoll_wire_cfg *h = cfg;
	struct shmcoll_wire *w = calloc(1, sizeof(*w));
	int rc, r;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->job = *cfg;
	w->lfd = w->efd = -1;
	pthread_mutex_init(&w->mu, NULL);
	snprintf(w->token, sizeof(w->token), "%s", token);
	w->out = calloc((size_t)h->size, sizeof(*w->out));
	w->sink = malloc(SINK_BYTES);
	w->pfd = calloc((size_t)h->size + 2, sizeof(*w->pfd));
	w->pfd_who = calloc((size_t)h->size + 2, sizeof(*w->pfd_who));
	if (!w->out || !w->sink || !w->pfd || !w->pfd_who) {
		rc = -ENOMEM;
		goto err;
	}
	for (r = 0; r < h->size; r++)
		w->out[r].fd = -1;
	rc = shmcoll__listen_any(host, addr, addrlen);
	if (rc < 0)
		goto err;
	w->lfd = rc;
	*out = w;
	return 0;

err:
	shmcoll__wire_close(w);
	return rc;
}

void shmcoll__wire_setup(struct shmcoll_wire *w, char (*addrs)[SHMCOLL_ADDR_MAX])
{
	w->addrs = addrs;
}

void shmcoll__wire_close(struct shmcoll_wire *w)
{
	int r, clean;

	if (!w)
		return;
	/* A communicator destroyed after an abort ends its connections without FRAME_BYE, so
	 * the peers learn of the abort even if the thread had not yet seen it. */
	clean = !broken(w);
	if (w->started) {
		lock(w);
		w->stop = 1;
		unlock(w);
		wake_thread(w);
		pthread_join(w->thread, NULL);
	}
	for (r = 0; w->out && r < w->job.size; r++) {
		struct wire_out *o = &w->out[r];

		if (o->fd < 0)
			continue;
		if (clean && !w->failed && o->state == OUT_READY &&
		    o->hello_off == SHMCOLL_HELLO_BYTES) {
			/* The last frame, so the peer knows we ended rather than died. */
			struct shmcoll_frame f = {
			    .type = FRAME_BYE, .node = (uint16_t)w->job.node, .seq = o->seq + 1};
			uint8_t b[SHMCOLL_FRAME_BYTES];

			shmcoll__frame_encode(b, &f);
			/* A peer that takes nothing for a second learns of the end by the close. */
			shmcoll__send_all(o->fd, b, sizeof(b), shmcoll__now_ns() + BYE_NS);
		}
		close(o->fd);
	}
	for (r = 0; r < w->nin; r++) {
		close(w->in[r]->fd);
		free(w->in[r]->msg);
		free(w->in[r]);
	}
	while (!shmcoll__list_empty(&w->uq))
		free(msg_at(shmcoll__list_pop(&w->uq)));
	if (w->lfd >= 0)
		close(w->lfd);
	if (w->efd >= 0)
		close(w->efd);
	pthread_mutex_destroy(&w->mu);
	free(w->in);
	free(w->pfd);
	free(w->pfd_who);
	free(w->out);
	free(w->addrs);
	free(w->sink);
	free(w);
}
