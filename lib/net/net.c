/* net.c - the leaders' transport (net.h): the mesh and its handshake, and
 * net_post/wait/test over the backend net_open chose (net_uring.c or
 * net_poll.c, through their tables in net_impl.h), or net_host.c's for a net
 * net_open_host made over a host's transport. What the socket backends share
 * is below them, in net_op.c.
 *
 * Mesh: node i first connects to every lower node (which answer once they
 * reach their accept phase: node 0 is there at once, node 1 once node 0
 * answered it, ...: no cycle, so no deadlock), then serves its listener until
 * every higher node is in. The acceptor reads hellos from all accepted
 * sockets at once, each with its own bound, so a silent or slow client delays
 * no one. After the handshake the sockets are blocking; the poll backend
 * passes MSG_DONTWAIT per call and io_uring arms its own polls. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/net/net.h"
#include "lib/net/net_impl.h"
#include "lib/net/sock.h"
#include "shm/arena.h"
#include "shm/atomics.h"
#include "shm/wait.h"

#define NS_PER_MS 1000000ll

/* How long an accepted client may take to send its whole hello (capped by
 * the open's own timeout): a port scanner or a stuck client is dropped after
 * this, and never holds up the real peers, whose hellos are read alongside. */
#define HELLO_WAIT_NS (5000 * NS_PER_MS)

/* Accepted sockets whose hello is still being read. More waiting clients
 * than this and the listener is left alone until one is done. */
#define PENDING_MAX 16

/* Retrying a refused connect: the lower node's listener may not exist yet. */
#define BACKOFF_MIN_NS (10 * NS_PER_MS)
#define BACKOFF_MAX_NS (200 * NS_PER_MS)

static int expired(int64_t deadline)
{
	return deadline >= 0 && shmcoll__now_ns() >= deadline;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int set_blocking(int fd, int blocking)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

/* ---- net_post, net_wait, net_run ---- */

void shmcoll__net_shutdown(struct shmcoll_net *n)
{
	if (n)
		shmcoll__net_break(n);
}

const char *shmcoll__net_kind_name(const struct shmcoll_net *n)
{
	return n->be->name;
}

void shmcoll__net_set_spin(struct shmcoll_net *n, int64_t ns)
{
	n->spin_ns = ns > 0 ? ns : 0;
}

/* The end of a call: its ops are free again. */
static void unpost(struct shmcoll_net *n)
{
	int i;

	for (i = 0; i < n->posted; i++)
		n->live[i]->x = NULL;
	n->posted = -1;
}

int shmcoll__net_post(struct shmcoll_net *n, struct shmcoll_xfer *x, int nx, char *err,
                      size_t errlen)
{
	int i, rc;

	if (n->posted >= 0) {
		shmcoll__net_say(err, errlen, "a call is posted already");
		return -EBUSY;
	}
	if (n->broken) {
		shmcoll__net_say(err, errlen,
		                 "the connection to the other nodes was broken earlier: %s",
		                 n->cause);
		return -ECANCELED;
	}
	if (nx < 0 || nx > 2 * (n->nnodes - 1) || (nx && !x)) {
		shmcoll__net_say(err, errlen, "%d transfers for %d peers", nx, n->nnodes - 1);
		return -EINVAL;
	}
	for (i = 0; i < nx; i++) {
		struct net_op *op;

		if (x[i].peer < 0 || x[i].peer >= n->nnodes || x[i].peer == n->node ||
		    (x[i].dir != XFER_SEND && x[i].dir != XFER_RECV) || (x[i].len && !x[i].buf) ||
		    x[i].len > SHMCOLL_FRAME_MAX_LEN) {
			shmcoll__net_say(
			    err, errlen,
			    "transfer %d (peer %d, direction %d, %zu bytes) is invalid", i,
			    x[i].peer, x[i].dir, x[i].len);
			goto invalid;
		}
		op = &n->ops[2 * x[i].peer + x[i].dir];
		if (op->x) {
			shmcoll__net_say(err, errlen, "two %ss with node %d in one call",
			                 x[i].dir == XFER_SEND ? "send" : "receive", x[i].peer);
			goto invalid;
		}
		op->x = &x[i];
		n->live[i] = op;
	}
	/* Validated: only now does anything reach the wire. */
	n->posted = nx;
	n->deadline = n->timeout_ns >= 0 ? shmcoll__now_ns() + n->timeout_ns : -1;
	for (i = 0; i < nx; i++)
		shmcoll__net_op_start(n, n->live[i], n->live[i]->x);
	rc = n->be->post(n, nx, n->deadline, err, errlen);
	if (rc < 0) {
		unpost(n);
		return shmcoll__net_fail(n, rc, err);
	}
	return 0;

invalid:
	for (i = 0; i < 2 * n->nnodes; i++)
		n->ops[i].x = NULL;
	return -EINVAL;
}

/* The posted call is over with rc (a wait's, or a test's once done): unposted, and on
 * failure n broken with the message (a call cancelled by an earlier break says so). */
static int ended(struct shmcoll_net *n, int rc, char *err, size_t errlen)
{
	unpost(n);
	if (rc == 0)
		return 0;
	if (rc == -ECANCELED && n->broken)
		shmcoll__net_say(err, errlen, "the connection to the other nodes was broken: %s",
		                 n->cause);
	return shmcoll__net_fail(n, rc, err);
}

int shmcoll__net_wait(struct shmcoll_net *n, char *err, size_t errlen)
{
	int rc;

	if (n->posted < 0)
		return 0;
	rc = n->be->wait(n, n->posted, err, errlen);
	return ended(n, rc, err, errlen);
}

int shmcoll__net_test(struct shmcoll_net *n, int *done, char *err, size_t errlen)
{
	int rc;

	*done = 1;
	if (n->posted < 0)
		return 0;
	rc = n->be->test(n, n->posted, done, err, errlen);
	if (rc == 0 && !*done)
		return 0;
	*done = 1;
	return ended(n, rc, err, errlen);
}

int shmcoll__net_run(struct shmcoll_net *n, struct shmcoll_xfer *x, int nx, char *err,
                     size_t errlen)
{
	int rc = shmcoll__net_post(n, x, nx, err, errlen);

	return rc < 0 ? rc : shmcoll__net_wait(n, err, errlen);
}

/* ---- the handshake ---- */

/* "a.b.c.d:port" of a connected socket's peer, for the log. */
static void peer_name(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
			port = ntohs(s4->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
			port = ntohs(s6->sin6_port);
			snprintf(out, outlen, "[%s]:%u", host, port);
			return;
		}
	}
	snprintf(out, outlen, "%s:%u", host, port);
}

static void my_hello(const struct shmcoll_net *n, const char *token, struct shmcoll_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->version = SHMCOLL_WIRE_VERSION;
	h->role = ROLE_LEADER;
	h->nnodes = (uint32_t)n->nnodes;
	h->node = (uint32_t)n->node;
	h->nproc = (uint32_t)n->nproc;
	h->rank = (uint32_t)n->node * (uint32_t)n->nproc;
	snprintf(h->token, sizeof(h->token), "%s", token);
}

/* Checks a peer's hello (both sides): why says what is wrong. want_node < 0:
 * any node above ours not yet connected (the acceptor). */
static int check_hello(const struct shmcoll_net *n, const uint8_t *buf, const char *token,
                       int want_node, int *node, char *why, size_t whylen)
{
	struct shmcoll_hello h;

	if (shmcoll__hello_decode(buf, &h, why, whylen) < 0)
		return -EPROTO;
	if (h.role != ROLE_LEADER) {
		shmcoll__net_say(why, whylen, "role %u, not a leader", h.role);
		return -EPROTO;
	}
	if (!shmcoll__token_equal(h.token, token)) {
		shmcoll__net_say(why, whylen, "wrong job token");
		return -EPROTO;
	}
	if (h.nnodes != (uint32_t)n->nnodes || h.nproc != (uint32_t)n->nproc) {
		shmcoll__net_say(why, whylen,
		                 "a job of %u nodes of %u ranks, this one has %d of %d", h.nnodes,
		                 h.nproc, n->nnodes, n->nproc);
		return -EPROTO;
	}
	if (want_node >= 0 && h.node != (uint32_t)want_node) {
		shmcoll__net_say(why, whylen, "node %u answered where node %d was dialled", h.node,
		                 want_node);
		return -EPROTO;
	}
	if (want_node < 0 && h.node <= (uint32_t)n->node) {
		shmcoll__net_say(why, whylen,
		                 "node %u connects to lower nodes only, not to node %d", h.node,
		                 n->node);
		return -EPROTO;
	}
	if (want_node < 0 && n->fd[h.node] >= 0) {
		shmcoll__net_say(why, whylen, "node %u is already connected", h.node);
		return -EPROTO;
	}
	if (h.rank != h.node * h.nproc) {
		shmcoll__net_say(why, whylen, "node %u claims rank %u, not its first rank %u",
		                 h.node, h.rank, h.node * h.nproc);
		return -EPROTO;
	}
	*node = (int)h.node;
	return 0;
}

static int tune(int fd)
{
	int one = 1;

	/* Frames are written whole; Nagle would hold back every small one
	 * for the peer's delayed ACK. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

static int resolve(const char *addr, int passive, struct addrinfo **res, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)};
	char host[SHMCOLL_ADDR_MAX], port[8];
	uint16_t p;
	int rc;

	if (shmcoll__addr_split(addr, host, sizeof(host), &p) < 0) {
		shmcoll__net_say(err, errlen, "\"%s\" is not host:port", addr);
		return -EINVAL;
	}
	snprintf(port, sizeof(port), "%u", p);
	rc = getaddrinfo(host, port, &hints, res);
	if (rc == EAI_AGAIN)
		return -EAGAIN;
	if (rc) {
		shmcoll__net_say(err, errlen, "cannot resolve %s: %s", addr,
		                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return rc == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
	}
	return 0;
}

/* Whether a failed connect may succeed later: the lower node's listener or
 * the route to it may not be up yet. */
static int retryable(int e)
{
	return e == ECONNREFUSED || e == ENETUNREACH || e == EHOSTUNREACH || e == ETIMEDOUT ||
	       e == ECONNRESET || e == EAGAIN || e == ECONNABORTED || e == EADDRNOTAVAIL;
}

/* One connect attempt to ai by deadline: a non-blocking socket, or -errno. */
static int connect_once(const struct addrinfo *ai, int64_t deadline)
{
	struct pollfd p = {.events = POLLOUT};
	socklen_t sl = sizeof(int);
	int fd, e = 0;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			e = errno;
			goto err;
		}
		p.fd = fd;
		for (;;) {
			int r = poll(&p, 1, shmcoll__poll_ms(deadline));

			if (r > 0)
				break;
			if (r < 0 && errno != EINTR) {
				e = errno;
				goto err;
			}
			if (expired(deadline)) {
				e = ETIMEDOUT;
				goto err;
			}
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
			e = errno;
		if (e)
			goto err;
	}
	return fd;
err:
	close(fd);
	return -e;
}

/* Connects to lower node j, retrying until the deadline, and trades hellos. */
static int dial(struct shmcoll_net *n, const struct shmcoll_net_cfg *cfg, int j, int64_t deadline,
                char *err, size_t errlen)
{
	struct addrinfo *res = NULL, *ai;
	struct shmcoll_hello h;
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	int64_t backoff = BACKOFF_MIN_NS;
	char why[120];
	int fd = -1, rc, last = 0, node;

	for (;;) {
		rc = resolve(cfg->addrs[j], 0, &res, err, errlen);
		if (rc < 0 && rc != -EAGAIN)
			return rc;
		for (ai = rc < 0 ? NULL : res; ai && fd < 0; ai = ai->ai_next) {
			fd = connect_once(ai, deadline);
			if (fd < 0)
				last = -fd;
			if (fd < 0 && !retryable(last))
				break;
		}
		if (res)
			freeaddrinfo(res);
		res = NULL;
		if (rc == -EAGAIN)
			last = EAGAIN;
		if (fd >= 0)
			break;
		if (!retryable(last)) {
			shmcoll__net_say(err, errlen, "node %d cannot connect to node %d at %s: %s",
			                 n->node, j, cfg->addrs[j], strerror(last));
			return -last;
		}
		if (expired(deadline)) {
			shmcoll__net_say(
			    err, errlen,
			    "node %d could not connect to node %d at %s within %lld ms (last: %s)",
			    n->node, j, cfg->addrs[j], (long long)(cfg->timeout_ns / NS_PER_MS),
			    strerror(last));
			return -ETIMEDOUT;
		}
		/* Sleep, not spin: the listener comes up on its own time. */
		if (deadline >= 0 && deadline - shmcoll__now_ns() < backoff)
			backoff = deadline - shmcoll__now_ns();
		if (backoff > 0)
			sleep_ns(backoff);
		backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
	}

	rc = tune(fd);
	if (rc < 0)
		goto err_sys;
	my_hello(n, cfg->token, &h);
	rc = shmcoll__hello_encode(buf, &h);
	if (rc < 0)
		goto err_sys;
	rc = shmcoll__send_all(fd, buf, sizeof(buf), deadline);
	if (rc == 0)
		rc = shmcoll__recv_all(fd, buf, sizeof(buf), deadline);
	if (rc == -ECONNRESET || rc == -EPIPE) {
		shmcoll__net_say(
		    err, errlen,
		    "node %d at %s closed the connection instead of answering node %d's hello: it "
		    "refused it (another job's token, wire version or shape; its log says which)",
		    j, cfg->addrs[j], n->node);
		rc = -ECONNREFUSED;
		goto err;
	}
	if (rc == -ETIMEDOUT) {
		shmcoll__net_say(err, errlen,
		                 "node %d at %s did not answer node %d's hello within %lld ms", j,
		                 cfg->addrs[j], n->node, (long long)(cfg->timeout_ns / NS_PER_MS));
		goto err;
	}
	if (rc < 0)
		goto err_sys;
	rc = check_hello(n, buf, cfg->token, j, &node, why, sizeof(why));
	if (rc < 0) {
		shmcoll__net_say(err, errlen, "node %d at %s answered with a bad hello: %s", j,
		                 cfg->addrs[j], why);
		goto err;
	}
	rc = set_blocking(fd, 1);
	if (rc < 0)
		goto err_sys;
	n->fd[j] = fd;
	return 0;

err_sys:
	shmcoll__net_say(err, errlen, "node %d, connecting to node %d at %s: %s", n->node, j,
	                 cfg->addrs[j], strerror(-rc));
err:
	close(fd);
	return rc;
}

struct pending {
	int fd;
	size_t got;
	int64_t until;
	uint8_t buf[SHMCOLL_HELLO_BYTES];
};

static void refuse(const struct shmcoll_net *n, const struct shmcoll_net_cfg *cfg,
                   struct pending *p, const char *why)
{
	char name[INET6_ADDRSTRLEN + 8];

	if (cfg->log) {
		peer_name(p->fd, name, sizeof(name));
		fprintf(stderr, "shmcoll: node %d refused a connection from %s: %s\n", n->node,
		        name, why);
	}
	close(p->fd);
	p->fd = -1;
}

/* Reads more of p's hello; once whole, checks it and answers. Returns 0, or
 * a negative code that ends the open (our own socket calls failing). */
static int serve(struct shmcoll_net *n, const struct shmcoll_net_cfg *cfg, struct pending *p,
                 int64_t deadline, int *joined)
{
	struct shmcoll_hello h;
	uint8_t out[SHMCOLL_HELLO_BYTES];
	char why[160];
	ssize_t r;
	int node, rc;

	r = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, MSG_DONTWAIT);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (r <= 0) {
		snprintf(why, sizeof(why), "%s after %zu bytes of its hello",
		         r == 0 ? "it closed the connection" : strerror(errno), p->got);
		refuse(n, cfg, p, why);
		return 0;
	}
	p->got += (size_t)r;
	if (p->got < sizeof(p->buf))
		return 0;
	if (check_hello(n, p->buf, cfg->token, -1, &node, why, sizeof(why)) < 0) {
		refuse(n, cfg, p, why);
		return 0;
	}
	my_hello(n, cfg->token, &h);
	rc = shmcoll__hello_encode(out, &h);
	if (rc < 0)
		return rc;
	rc = shmcoll__send_all(p->fd, out, sizeof(out), deadline);
	if (rc == 0)
		rc = tune(p->fd);
	if (rc == 0)
		rc = set_blocking(p->fd, 1);
	if (rc < 0) {
		snprintf(why, sizeof(why), "answering its hello: %s", strerror(-rc));
		refuse(n, cfg, p, why);
		return 0;
	}
	n->fd[node] = p->fd;
	p->fd = -1;
	++*joined;
	return 0;
}

/* Serves lfd until every higher node is in or the deadline passes. */
static int accept_all(struct shmcoll_net *n, const struct shmcoll_net_cfg *cfg, int lfd,
                      int64_t deadline, char *err, size_t errlen)
{
	struct pending pend[PENDING_MAX];
	struct pollfd pfd[PENDING_MAX + 1];
	int64_t hello_ns = HELLO_WAIT_NS, now, wake;
	int joined = 0, want = n->nnodes - 1 - n->node, np, i, k, rc = 0, fd;

	if (cfg->timeout_ns >= 0 && cfg->timeout_ns < hello_ns)
		hello_ns = cfg->timeout_ns;
	for (i = 0; i < PENDING_MAX; i++)
		pend[i].fd = -1;
	while (joined < want) {
		now = shmcoll__now_ns();
		if (deadline >= 0 && now >= deadline) {
			for (k = n->node + 1; n->fd[k] >= 0; k++)
				;
			shmcoll__net_say(
			    err, errlen,
			    "node %d: node %d and %d more did not connect within %lld ms", n->node,
			    k, want - joined - 1, (long long)(cfg->timeout_ns / NS_PER_MS));
			rc = -ETIMEDOUT;
			goto out;
		}
		wake = deadline;
		np = 0;
		for (i = 0; i < PENDING_MAX; i++) {
			if (pend[i].fd < 0)
				continue;
			if (now >= pend[i].until) {
				char why[80];

				snprintf(why, sizeof(why), "no complete hello within %lld ms",
				         (long long)(hello_ns / NS_PER_MS));
				refuse(n, cfg, &pend[i], why);
				continue;
			}
			if (wake < 0 || pend[i].until < wake)
				wake = pend[i].until;
			pfd[np].fd = pend[i].fd;
			pfd[np].events = POLLIN;
			np++;
		}
		/* Full: leave new clients in the backlog until a slot frees. */
		pfd[np].fd = np < PENDING_MAX ? lfd : -1;
		pfd[np].events = POLLIN;
		if (poll(pfd, (nfds_t)np + 1, shmcoll__poll_ms(wake)) < 0 && errno != EINTR) {
			rc = -errno;
			shmcoll__net_say(err, errlen, "node %d: poll: %s", n->node,
			                 strerror(errno));
			goto out;
		}
		for (i = 0; i < PENDING_MAX && joined < want; i++) {
			if (pend[i].fd < 0)
				continue;
			rc = serve(n, cfg, &pend[i], deadline, &joined);
			if (rc < 0) {
				shmcoll__net_say(err, errlen, "node %d: answering a hello: %s",
				                 n->node, strerror(-rc));
				goto out;
			}
		}
		if (!(pfd[np].revents & POLLIN) || joined == want)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			/* A client gone before we took it, or a signal: serve on.
			 * Out of fds or memory: no peer could be taken either. */
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED ||
			    errno == EINTR || errno == EPROTO || errno == EPERM)
				continue;
			rc = -errno;
			shmcoll__net_say(err, errlen, "node %d: accept: %s", n->node,
			                 strerror(errno));
			goto out;
		}
		for (i = 0; pend[i].fd >= 0; i++)
			;
		pend[i].fd = fd;
		pend[i].got = 0;
		pend[i].until = shmcoll__now_ns() + hello_ns;
	}
out:
	for (i = 0; i < PENDING_MAX; i++)
		if (pend[i].fd >= 0)
			refuse(n, cfg, &pend[i], "the mesh is complete");
	return rc;
}

/* This node's own listener when the launcher gave none. */
static int listen_on(const struct shmcoll_net_cfg *cfg, char *err, size_t errlen)
{
	struct addrinfo *res = NULL, *ai;
	int fd = -1, one = 1, rc;

	rc = resolve(cfg->addrs[cfg->node], 1, &res, err, errlen);
	if (rc == -EAGAIN)
		shmcoll__net_say(err, errlen, "cannot resolve %s now", cfg->addrs[cfg->node]);
	if (rc < 0)
		return rc;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
		    bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		shmcoll__net_say(err, errlen, "node %d cannot listen on %s: %s", cfg->node,
		                 cfg->addrs[cfg->node], strerror(-rc));
	return fd < 0 ? rc : fd;
}

static int mesh(struct shmcoll_net *n, const struct shmcoll_net_cfg *cfg, char *err, size_t errlen)
{
	int64_t deadline = cfg->timeout_ns < 0 ? -1 : shmcoll__now_ns() + cfg->timeout_ns;
	int lfd = cfg->listen_fd, own = 0, fl = -1, rc = 0, j;

	if (n->node < n->nnodes - 1 && lfd < 0) {
		lfd = listen_on(cfg, err, errlen);
		if (lfd < 0)
			return lfd;
		own = 1;
	}
	for (j = 0; j < n->node; j++) {
		rc = dial(n, cfg, j, deadline, err, errlen);
		if (rc < 0)
			goto out;
	}
	if (n->node == n->nnodes - 1)
		goto out;
	/* An inherited listener may be blocking: a client that vanishes
	 * between poll and accept must not hang us. Its flags are shared
	 * with the launcher's copy, so they are put back after. */
	fl = fcntl(lfd, F_GETFL);
	if (fl < 0 || fcntl(lfd, F_SETFL, fl | O_NONBLOCK) < 0) {
		rc = -errno;
		shmcoll__net_say(err, errlen, "node %d: listener fd %d: %s", n->node, lfd,
		                 strerror(errno));
		goto out;
	}
	rc = accept_all(n, cfg, lfd, deadline, err, errlen);
	fcntl(lfd, F_SETFL, fl);
out:
	if (own)
		close(lfd);
	return rc;
}

/* ---- open and close ---- */

/* The backend SHMCOLL_NET asks for, if kind is NET_AUTO. */
static int pick_kind(int kind, char *err, size_t errlen)
{
	const char *env = getenv("SHMCOLL_NET");

	if (kind != NET_AUTO || !env || !*env || !strcmp(env, "auto"))
		return kind;
	if (!strcmp(env, "uring") || !strcmp(env, "io_uring"))
		return NET_URING;
	if (!strcmp(env, "poll"))
		return NET_POLL;
	shmcoll__net_say(err, errlen, "SHMCOLL_NET=%s: expected uring, poll or auto", env);
	return -EINVAL;
}

/* Starts the backend: io_uring for NET_URING and NET_AUTO, poll for NET_POLL
 * and for NET_AUTO where io_uring_setup is forbidden or missing. */
static int backend(struct shmcoll_net *n, int kind, char *err, size_t errlen)
{
	int rc;

	if (kind != NET_POLL) {
		rc = shmcoll__net_uring.init(n, err, errlen);
		if (rc == 0) {
			n->be = &shmcoll__net_uring;
			n->kind = NET_URING;
			return 0;
		}
		if (kind != NET_AUTO || (rc != -EPERM && rc != -ENOSYS))
			return rc;
	}
	n->be = &shmcoll__net_poll;
	n->kind = NET_POLL;
	return 0;
}

/* A net of nnodes with no connection yet (every fd -1) and no backend, or NULL when out of
 * memory. */
static struct shmcoll_net *net_new(int nnodes, int node, int64_t timeout_ns)
{
	struct shmcoll_net *n = calloc(1, sizeof(*n));
	int i;

	if (!n)
		return NULL;
	n->nnodes = nnodes;
	n->node = node;
	n->timeout_ns = timeout_ns;
	n->posted = -1;
	n->fd = malloc(sizeof(*n->fd) * (size_t)n->nnodes);
	n->tx_seq = calloc((size_t)n->nnodes, sizeof(*n->tx_seq));
	n->rx_seq = calloc((size_t)n->nnodes, sizeof(*n->rx_seq));
	n->ops = calloc(2 * (size_t)n->nnodes, sizeof(*n->ops));
	n->live = calloc(2 * (size_t)n->nnodes, sizeof(*n->live));
	if (!n->fd || !n->tx_seq || !n->rx_seq || !n->ops || !n->live) {
		shmcoll__net_close(n);
		return NULL;
	}
	for (i = 0; i < n->nnodes; i++)
		n->fd[i] = -1;
	for (i = 0; i < 2 * n->nnodes; i++) {
		n->ops[i].peer = i / 2;
		n->ops[i].dir = i % 2;
		n->ops[i].fd = -1;
	}
	return n;
}

int shmcoll__net_open_host(int nnodes, int node, const shmcoll_transport *t, int64_t timeout_ns,
                           struct shmcoll_net **out, char *err, size_t errlen)
{
	struct shmcoll_net *n;

	*out = NULL;
	if (nnodes < 2 || nnodes > SHMCOLL_NODES_MAX || node < 0 || node >= nnodes || !t ||
	    !t->start || !t->test || !t->wait || !t->cancel) {
		shmcoll__net_say(err, errlen, "invalid host transport");
		return -EINVAL;
	}
	n = net_new(nnodes, node, timeout_ns);
	if (!n) {
		shmcoll__net_say(err, errlen, "out of memory for the transport of %d nodes",
		                 nnodes);
		return -ENOMEM;
	}
	n->host = *t;
	n->be = &shmcoll__net_host;
	n->kind = NET_HOST;
	*out = n;
	return 0;
}

int shmcoll__net_open(const struct shmcoll_net_cfg *cfg, struct shmcoll_net **out, char *err,
                      size_t errlen)
{
	struct shmcoll_net *n = NULL;
	int rc, kind, i;

	*out = NULL;
	if (!cfg || cfg->nnodes < 2 || cfg->nnodes > SHMCOLL_NODES_MAX || cfg->node < 0 ||
	    cfg->node >= cfg->nnodes || cfg->nproc < 1 || cfg->nproc > SHMCOLL_MAX_RANKS ||
	    !cfg->addrs || !shmcoll__token_valid(cfg->token) || cfg->kind < NET_AUTO ||
	    cfg->kind > NET_POLL) {
		shmcoll__net_say(err, errlen, "invalid transport configuration");
		return -EINVAL;
	}
#ifndef SHMCOLL_HAVE_URING
	/* Whatever SHMCOLL_NET says: the poll backend alone is not what a
	 * multi-node job is built and tested with. */
	shmcoll__net_say(
	    err, errlen,
	    "this shmcoll was built without liburing; multi-node jobs need it (install "
	    "liburing-dev and rebuild)");
	return -ENOTSUP;
#endif
	kind = pick_kind(cfg->kind, err, errlen);
	if (kind < 0)
		return kind;
	rc = -ENOMEM;
	n = net_new(cfg->nnodes, cfg->node, cfg->timeout_ns);
	if (!n)
		goto err_mem;
	n->nproc = cfg->nproc;
	rc = backend(n, kind, err, errlen);
	if (rc < 0)
		goto err;
	rc = mesh(n, cfg, err, errlen);
	if (rc < 0)
		goto err;
	for (i = 0; i < 2 * n->nnodes; i++)
		n->ops[i].fd = n->fd[i / 2];
	*out = n;
	return 0;

err_mem:
	shmcoll__net_say(err, errlen, "out of memory for the transport of %d nodes", cfg->nnodes);
err:
	shmcoll__net_close(n);
	return rc;
}

void shmcoll__net_close(struct shmcoll_net *n)
{
	int i;

	char err[64];

	if (!n)
		return;
	/* A posted call's buffers are its caller's: reap it before they may go. */
	if (n->posted >= 0) {
		shmcoll__net_shutdown(n);
		shmcoll__net_wait(n, err, sizeof(err));
	}
	/* The backend first: io_uring's ring cancels whatever is left in
	 * flight before the fds it refers to go. */
	if (n->be && n->be->exit)
		n->be->exit(n);
	if (n->fd)
		for (i = 0; i < n->nnodes; i++)
			if (n->fd[i] >= 0)
				close(n->fd[i]);
	free(n->fd);
	free(n->tx_seq);
	free(n->rx_seq);
	free(n->ops);
	free(n->live);
	free(n);
}
