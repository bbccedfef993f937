/* rendezvous.c - the launchers' rendezvous (rendezvous.h): listening sockets,
 * node 0's server, which polls every client at once so no stranger can stall or
 * end it, and a node's join. Every byte on these connections is a hello or a
 * frame (frame.h). */
#include "lib/launcher/rendezvous.h"
#include "lib/net/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROG            "shmcoll-run"
#define MAX_PENDING     64 /* clients connected whose hello is not complete yet */
#define BACKOFF_MIN_MS  10 /* first pause after a refused connect, doubled each time */
#define BACKOFF_MAX_MS  500
#define ANSWER_GRACE_MS 5000 /* a node waits this long for node 0's answer at least */
#define TABLE_SEND_MS   10000
#define HOST_MAX        256
#define RUN_ID_SHIFT    16 /* the table's call: MASTER_PORT below, the run id above */

struct client {
	int fd; /* -1: free slot */
	int64_t since;
	size_t got;
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	char peer[SHMCOLL_ADDR_MAX + 16];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A deadline in now_ms() terms as shmcoll__now_ns() counts it (the same
 * clock). */
static int64_t ms_to_ns(int64_t ms)
{
	return ms * 1000000;
}

static int left_ms(int64_t deadline)
{
	int64_t left = deadline - now_ms();

	return left < 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

__attribute__((format(printf, 3, 4))) static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* "ip:port", "[ip6]:port" for IPv6. */
static void fmt_addr(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(s->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", ss->ss_family);
	}
}

/* Resolves host (an address or a name, "[v6]" too) with port. */
static int resolve(const char *host, uint16_t port, struct addrinfo **out, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	char h[HOST_MAX], p[8];
	size_t n = strlen(host);
	int rc;

	if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
		snprintf(h, sizeof(h), "%.*s", (int)(n - 2), host + 1);
	else
		snprintf(h, sizeof(h), "%s", host);
	snprintf(p, sizeof(p), "%u", port);
	rc = getaddrinfo(h, p, &hints, out);
	if (rc) {
		say(err, errlen, "cannot resolve %s: %s", host,
		    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

static int unspecified(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	return ss->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* A listening socket bound to sa; close-on-exec, non-blocking if asked. Its
 * "ip:port" goes to addr (SHMCOLL_ADDR_MAX). Returns the fd or -errno. */
static int listen_sa(const struct sockaddr *sa, socklen_t salen, int reuse, int nonblock,
                     char *addr)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, one = 1, rc;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -errno;
	if (reuse && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto err;
	if (bind(fd, sa, salen) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		goto err;
	if (addr) {
		char buf[SHMCOLL_ADDR_MAX + 16];

		fmt_addr(&ss, buf, sizeof(buf));
		if (strlen(buf) >= SHMCOLL_ADDR_MAX) {
			close(fd);
			return -ENAMETOOLONG;
		}
		strcpy(addr, buf);
	}
	return fd;
err:
	rc = -errno;
	close(fd);
	return rc;
}

/* Listens on host:port (the first of its addresses that works). Returns the
 * fd or a negative errno with a message in err. */
static int listen_host(const char *host, uint16_t port, int reuse, int nonblock, char *addr,
                       char *err, size_t errlen)
{
	struct addrinfo *ai, *list;
	int fd = -EADDRNOTAVAIL;

	if (resolve(host, port, &list, err, errlen) < 0)
		return -EHOSTUNREACH;
	for (ai = list; ai; ai = ai->ai_next) {
		fd = listen_sa(ai->ai_addr, ai->ai_addrlen, reuse, nonblock, addr);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(list);
	if (fd < 0)
		say(err, errlen, "cannot listen on %s:%u: %s", host, port, strerror(-fd));
	return fd;
}

/* The leader's listener must have an address the other nodes can reach. */
static int leader_reachable(int fd, const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && unspecified(&ss)) {
		say(err, errlen,
		    "the leader would listen on %s, which no other node can reach: give "
		    "--node-addr",
		    addr);
		return -EADDRNOTAVAIL;
	}
	return 0;
}

/* Control connections carry a few small frames and must notice a vanished
 * machine, not only a dead process: no Nagle, and keepalive (about 25 s). */
static void ctl_options(int fd)
{
	int one = 1, idle = 10, intvl = 5, cnt = 3;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

int shmcoll__rdv_send_frame(int fd, const struct shmcoll_frame *f, const void *payload,
                            int timeout_ms)
{
	uint8_t hdr[SHMCOLL_FRAME_BYTES];
	int64_t deadline = now_ms() + timeout_ms;
	int rc;

	shmcoll__frame_encode(hdr, f);
	rc = shmcoll__send_all(fd, hdr, sizeof(hdr), ms_to_ns(deadline));
	if (rc == 0 && f->len > 0)
		rc = shmcoll__send_all(fd, payload, (size_t)f->len, ms_to_ns(deadline));
	return rc;
}

int shmcoll__rdv_make_token(char *buf, size_t len)
{
	unsigned char r[16];
	size_t got = 0, i;

	if (len < 2 * sizeof(r) + 1)
		return -EINVAL;
	while (got < sizeof(r)) {
		ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	for (i = 0; i < sizeof(r); i++)
		snprintf(buf + 2 * i, 3, "%02x", r[i]);
	return 0;
}

static void own_hello(const struct shmcoll_rdv_cfg *cfg, const char *addr, uint8_t *out)
{
	struct shmcoll_hello h = {
	    .version = SHMCOLL_WIRE_VERSION,
	    .role = ROLE_LAUNCHER,
	    .nnodes = (uint32_t)cfg->nnodes,
	    .node = (uint32_t)cfg->node,
	    .nproc = (uint32_t)cfg->nproc,
	    .rank = (uint32_t)cfg->node * (uint32_t)cfg->nproc,
	};

	snprintf(h.token, sizeof(h.token), "%s", cfg->token);
	snprintf(h.addr, sizeof(h.addr), "%s", addr);
	/* The caller checked the token, the shape and the address: cannot fail. */
	if (shmcoll__hello_encode(out, &h) < 0)
		memset(out, 0, SHMCOLL_HELLO_BYTES);
}

/* Whether addr is a "host:port" a leader can connect to. */
static int addr_ok(const char *addr)
{
	char host[SHMCOLL_ADDR_MAX];
	uint16_t port;

	return shmcoll__addr_split(addr, host, sizeof(host), &port) == 0 && port != 0;
}

/* Whether the launcher hello h (decoded) may join node 0's job; if not, why.
 * The token first: a stranger learns nothing about the job. */
static int hello_fits(const struct shmcoll_rdv_cfg *cfg, const struct shmcoll_hello *h,
                      const int *ctl, char *why, size_t whylen)
{
	if (h->role != ROLE_LAUNCHER) {
		say(why, whylen, "not a launcher (role %u)", h->role);
		return 0;
	}
	if (!shmcoll__token_equal(h->token, cfg->token)) {
		say(why, whylen, "wrong token");
		return 0;
	}
	if (h->nnodes != (uint32_t)cfg->nnodes || h->nproc != (uint32_t)cfg->nproc) {
		say(why, whylen, "a job of %u nodes x %u ranks, this one is %d x %d", h->nnodes,
		    h->nproc, cfg->nnodes, cfg->nproc);
		return 0;
	}
	if (h->node == 0) {
		say(why, whylen, "it claims to be node 0");
		return 0;
	}
	if (h->rank != h->node * h->nproc) {
		say(why, whylen, "rank %u is not the first of node %u", h->rank, h->node);
		return 0;
	}
	if (ctl[h->node] >= 0) {
		say(why, whylen, "node %u has joined already", h->node);
		return 0;
	}
	if (!addr_ok(h->addr)) {
		say(why, whylen, "leader address '%s' is not host:port", h->addr);
		return 0;
	}
	return 1;
}

__attribute__((format(printf, 2, 3))) static void refuse(struct client *c, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": refused a connection from %s: %s\n", c->peer, why);
	close(c->fd);
	c->fd = -1;
}

/* The client's hello is complete: register its node or refuse it. */
static void client_hello(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, struct client *c,
                         const uint8_t *mine, int *joined)
{
	struct shmcoll_hello h;
	char why[192];

	if (shmcoll__hello_decode(c->buf, &h, why, sizeof(why)) < 0 ||
	    !hello_fits(cfg, &h, r->ctl, why, sizeof(why))) {
		refuse(c, "%s", why);
		return;
	}
	/* 160 bytes into a fresh connection's empty send buffer: never waits. */
	if (send(c->fd, mine, SHMCOLL_HELLO_BYTES, MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    SHMCOLL_HELLO_BYTES) {
		refuse(c, "cannot answer it: %s", strerror(errno));
		return;
	}
	ctl_options(c->fd);
	r->ctl[h.node] = c->fd;
	strcpy(r->addrs[h.node], h.addr);
	c->fd = -1;
	(*joined)++;
}

static void client_readable(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r,
                            struct client *c, const uint8_t *mine, int *joined)
{
	ssize_t n = recv(c->fd, c->buf + c->got, sizeof(c->buf) - c->got, 0);

	if (n == 0) {
		if (c->got)
			refuse(c, "it closed the connection after %zu bytes of its hello", c->got);
		else
			refuse(c, "it closed the connection without a hello");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			refuse(c, "%s", strerror(errno));
		return;
	}
	c->got += (size_t)n;
	if (c->got == sizeof(c->buf))
		client_hello(cfg, r, c, mine, joined);
}

/* A registered node's connection is readable before the table was sent: it
 * left (it may join again) or broke the protocol. */
static void member_readable(struct shmcoll_rdv *r, int node, int *joined)
{
	char c;
	ssize_t n = recv(r->ctl[node], &c, 1, 0);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	fprintf(stderr,
	        PROG ": node %d's launcher %s before the job started; waiting for it again\n", node,
	        n > 0 ? "sent bytes out of turn" : "left");
	close(r->ctl[node]);
	r->ctl[node] = -1;
	r->addrs[node][0] = '\0';
	(*joined)--;
}

static void accept_clients(int lfd, struct client *cl)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd, i, slot = -1, oldest = 0;

		fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of descriptors: make room by the oldest client. */
				for (i = 1; i < MAX_PENDING; i++)
					if (cl[i].since < cl[oldest].since)
						oldest = i;
				if (cl[oldest].fd >= 0) {
					refuse(&cl[oldest], "too many connections at once");
					continue;
				}
			}
			return;
		}
		for (i = 0; i < MAX_PENDING; i++) {
			if (cl[i].fd < 0) {
				slot = i;
				break;
			}
			if (cl[i].since < cl[oldest].since)
				oldest = i;
		}
		if (slot < 0) {
			refuse(&cl[oldest], "too many connections waiting for their hello");
			slot = oldest;
		}
		cl[slot].fd = fd;
		cl[slot].since = now_ms();
		cl[slot].got = 0;
		fmt_addr(&ss, cl[slot].peer, sizeof(cl[slot].peer));
	}
}

/* "nodes 1, 3 of 4 did not join" */
static void missing_nodes(const struct shmcoll_rdv_cfg *cfg, const struct shmcoll_rdv *r, char *err,
                          size_t errlen)
{
	size_t used;
	int j, n = 0;

	for (j = 1; j < cfg->nnodes; j++)
		n += r->ctl[j] < 0;
	say(err, errlen, "node%s", n > 1 ? "s" : "");
	for (j = 1, n = 0; j < cfg->nnodes; j++) {
		used = strlen(err);
		if (r->ctl[j] >= 0)
			continue;
		if (used + 16 >= errlen) {
			say(err + used, errlen - used, ", ...");
			break;
		}
		say(err + used, errlen - used, "%s %d", n++ ? "," : "", j);
	}
	used = strlen(err);
	say(err + used, errlen - used, " of %d did not join within %d ms", cfg->nnodes,
	    cfg->timeout_ms);
}

static int send_table(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, char *err,
                      size_t errlen)
{
	struct shmcoll_frame f = {
	    .type = FRAME_TABLE,
	    .node = 0,
	    .seq = 1,
	    .call = cfg->master_port | cfg->run_id << RUN_ID_SHIFT,
	    .len = (uint64_t)cfg->nnodes * SHMCOLL_ADDR_MAX,
	};
	int j, rc;

	r->master_port = cfg->master_port;
	r->run_id = cfg->run_id & (UINT64_MAX >> RUN_ID_SHIFT);
	/* addrs is calloc'd and every entry NUL-padded: the payload as it is. */
	for (j = 1; j < cfg->nnodes; j++) {
		rc = shmcoll__rdv_send_frame(r->ctl[j], &f, r->addrs, TABLE_SEND_MS);
		if (rc < 0) {
			say(err, errlen, "cannot send the node table to node %d: %s", j,
			    strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* Node 0: serves cfg->root until every other node has registered. */
static int serve(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, int64_t deadline,
                 char *err, size_t errlen)
{
	char host[SHMCOLL_ADDR_MAX];
	uint8_t mine[SHMCOLL_HELLO_BYTES];
	struct client cl[MAX_PENDING];
	struct pollfd *pf = NULL;
	int *who = NULL;
	int lfd = -1, joined = 0, rc, i, j, n;
	uint16_t port;

	for (i = 0; i < MAX_PENDING; i++)
		cl[i].fd = -1;
	if (shmcoll__addr_split(cfg->root, host, sizeof(host), &port) < 0) {
		say(err, errlen, "bad root address %s", cfg->root);
		return -EINVAL;
	}
	pf = calloc((size_t)(1 + MAX_PENDING + cfg->nnodes), sizeof(*pf));
	who = calloc((size_t)(1 + MAX_PENDING + cfg->nnodes), sizeof(*who));
	if (!pf || !who) {
		say(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	rc = lfd = listen_host(host, port, 1, 1, NULL, err, errlen);
	if (lfd < 0)
		goto out;
	rc = r->leader_fd =
	    listen_host(cfg->node_addr ? cfg->node_addr : host, 0, 0, 0, r->addrs[0], err, errlen);
	if (rc >= 0)
		rc = leader_reachable(r->leader_fd, r->addrs[0], err, errlen);
	if (rc < 0)
		goto out;
	own_hello(cfg, r->addrs[0], mine);

	while (joined < cfg->nnodes - 1) {
		int64_t t = now_ms(), wake = deadline;

		if (t >= deadline) {
			missing_nodes(cfg, r, err, errlen);
			rc = -ETIMEDOUT;
			goto out;
		}
		n = 0;
		pf[n++] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (i = 0; i < MAX_PENDING; i++) {
			if (cl[i].fd < 0)
				continue;
			if (t - cl[i].since >= SHMCOLL_HELLO_SILENCE_MS) {
				refuse(&cl[i], "no hello within %d ms", SHMCOLL_HELLO_SILENCE_MS);
				continue;
			}
			if (cl[i].since + SHMCOLL_HELLO_SILENCE_MS < wake)
				wake = cl[i].since + SHMCOLL_HELLO_SILENCE_MS;
			who[n] = i;
			pf[n++] = (struct pollfd){.fd = cl[i].fd, .events = POLLIN};
		}
		for (j = 1; j < cfg->nnodes; j++) {
			if (r->ctl[j] < 0)
				continue;
			who[n] = MAX_PENDING + j;
			pf[n++] = (struct pollfd){.fd = r->ctl[j], .events = POLLIN};
		}
		if (poll(pf, (nfds_t)n, left_ms(wake)) < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			say(err, errlen, "poll: %s", strerror(errno));
			goto out;
		}
		for (i = 1; i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (who[i] < MAX_PENDING)
				client_readable(cfg, r, &cl[who[i]], mine, &joined);
			else
				member_readable(r, who[i] - MAX_PENDING, &joined);
		}
		if (pf[0].revents)
			accept_clients(lfd, cl);
	}
	rc = send_table(cfg, r, err, errlen);
out:
	for (i = 0; i < MAX_PENDING; i++)
		if (cl[i].fd >= 0)
			close(cl[i].fd);
	if (lfd >= 0)
		close(lfd);
	free(who);
	free(pf);
	return rc < 0 ? rc : 0;
}

/* Connects to host:port (retrying refused and unreachable connects until the
 * deadline), from bind_host if given. Returns the fd or -errno with err. */
static int connect_root(const char *root, const char *host, uint16_t port, const char *bind_host,
                        int64_t deadline, int timeout_ms, char *err, size_t errlen)
{
	struct addrinfo *src = NULL, *list, *ai;
	int backoff = BACKOFF_MIN_MS, fd, rc;
	char why[256] = "no address";

	if (bind_host && resolve(bind_host, 0, &src, err, errlen) < 0)
		return -EHOSTUNREACH;
	for (;;) {
		fd = -1;
		if (resolve(host, port, &list, why, sizeof(why)) == 0) {
			for (ai = list; ai && fd < 0; ai = ai->ai_next) {
				struct pollfd pf = {.events = POLLOUT};
				socklen_t sl = sizeof(rc);

				fd = socket(ai->ai_family,
				            SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
				if (fd < 0) {
					say(why, sizeof(why), "%s", strerror(errno));
					continue;
				}
				if (src && src->ai_family == ai->ai_family &&
				    bind(fd, src->ai_addr, src->ai_addrlen) < 0) {
					rc = -errno;
					say(err, errlen, "cannot connect from %s: %s", bind_host,
					    strerror(-rc));
					close(fd);
					freeaddrinfo(list);
					freeaddrinfo(src);
					return rc;
				}
				rc = connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 ? errno : 0;
				if (rc == EINPROGRESS) {
					pf.fd = fd;
					while (poll(&pf, 1, left_ms(deadline)) < 0 &&
					       errno == EINTR)
						;
					rc = ETIMEDOUT;
					if (pf.revents)
						getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &sl);
				}
				if (rc) {
					say(why, sizeof(why), "%s", strerror(rc));
					close(fd);
					fd = -1;
				}
			}
			freeaddrinfo(list);
		}
		if (fd >= 0)
			break;
		if (left_ms(deadline) == 0) {
			say(err, errlen, "cannot reach node 0 at %s within %d ms: %s", root,
			    timeout_ms, why);
			freeaddrinfo(src);
			return -ETIMEDOUT;
		}
		sleep_ms(backoff < left_ms(deadline) ? backoff : left_ms(deadline));
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	if (src)
		freeaddrinfo(src);
	ctl_options(fd);
	return fd;
}

/* Node 0's answer to this node's hello: node 0 of the same job, with our token. */
static int check_answer(const struct shmcoll_rdv_cfg *cfg, const uint8_t *buf, char *why,
                        size_t whylen)
{
	struct shmcoll_hello h;

	if (shmcoll__hello_decode(buf, &h, why, whylen) < 0)
		return 0;
	if (h.role != ROLE_LAUNCHER)
		say(why, whylen, "not a launcher (role %u)", h.role);
	else if (!shmcoll__token_equal(h.token, cfg->token))
		say(why, whylen, "wrong token");
	else if (h.node != 0)
		say(why, whylen, "it says it is node %u", h.node);
	else if (h.nnodes != (uint32_t)cfg->nnodes || h.nproc != (uint32_t)cfg->nproc)
		say(why, whylen, "a job of %u nodes x %u ranks, this one is %d x %d", h.nnodes,
		    h.nproc, cfg->nnodes, cfg->nproc);
	else
		return 1;
	return 0;
}

/* Reads and checks the table frame: N entries of SHMCOLL_ADDR_MAX bytes, each
 * a NUL-terminated host:port, ours our leader's. */
static int recv_table(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, int fd,
                      int64_t deadline, char *err, size_t errlen)
{
	uint8_t hdr[SHMCOLL_FRAME_BYTES];
	struct shmcoll_frame f;
	char why[192], mine[SHMCOLL_ADDR_MAX];
	int rc, j;

	strcpy(mine, r->addrs[cfg->node]);
	rc = shmcoll__recv_all(fd, hdr, sizeof(hdr), ms_to_ns(deadline));
	if (rc == -EPIPE) {
		say(err, errlen,
		    "node 0 at %s closed the connection before sending the node table "
		    "(see its log: it failed, or timed out waiting for the other nodes)",
		    cfg->root);
		return rc;
	}
	if (rc < 0) {
		say(err, errlen, "no node table from node 0 at %s: %s", cfg->root, strerror(-rc));
		return rc;
	}
	if (shmcoll__frame_decode(hdr, &f, why, sizeof(why)) < 0)
		goto bad;
	if (f.type != FRAME_TABLE || f.node != 0 || f.seq != 1 ||
	    f.len != (uint64_t)cfg->nnodes * SHMCOLL_ADDR_MAX) {
		say(why, sizeof(why), "frame of type %u, node %u, seq %u, %llu bytes", f.type,
		    f.node, f.seq, (unsigned long long)f.len);
		goto bad;
	}
	r->master_port = (uint16_t)(f.call & 0xffff);
	r->run_id = f.call >> RUN_ID_SHIFT;
	rc = shmcoll__recv_all(fd, r->addrs, (size_t)f.len, ms_to_ns(deadline));
	if (rc < 0) {
		say(err, errlen, "node 0 at %s: the node table: %s", cfg->root,
		    rc == -EPIPE ? "connection closed" : strerror(-rc));
		return rc;
	}
	for (j = 0; j < cfg->nnodes; j++) {
		if (memchr(r->addrs[j], '\0', SHMCOLL_ADDR_MAX) == NULL) {
			say(why, sizeof(why), "entry %d is not NUL-terminated", j);
			goto bad;
		}
		if (!addr_ok(r->addrs[j])) {
			say(why, sizeof(why), "entry %d, '%s', is not host:port", j, r->addrs[j]);
			goto bad;
		}
	}
	if (strcmp(r->addrs[cfg->node], mine)) {
		say(why, sizeof(why), "this node's entry is %s, its leader listens on %s",
		    r->addrs[cfg->node], mine);
		goto bad;
	}
	return 0;
bad:
	say(err, errlen, "node 0 at %s sent a bad node table: %s", cfg->root, why);
	return -EPROTO;
}

/* Node i > 0: registers with node 0 and receives the table. */
static int join(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, int64_t deadline,
                char *err, size_t errlen)
{
	char host[SHMCOLL_ADDR_MAX], why[192];
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	int64_t answer_by;
	uint16_t port;
	int fd, rc;

	if (shmcoll__addr_split(cfg->root, host, sizeof(host), &port) < 0) {
		say(err, errlen, "bad root address %s", cfg->root);
		return -EINVAL;
	}
	fd = connect_root(cfg->root, host, port, cfg->node_addr, deadline, cfg->timeout_ms, err,
	                  errlen);
	if (fd < 0)
		return fd;
	r->ctl[0] = fd;
	if (cfg->node_addr) {
		rc = listen_host(cfg->node_addr, 0, 0, 0, r->addrs[cfg->node], err, errlen);
	} else {
		/* Default: the address this node reaches node 0 from. */
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		rc = getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ? -errno : 0;
		if (rc == 0) {
			if (ss.ss_family == AF_INET)
				((struct sockaddr_in *)&ss)->sin_port = 0;
			else
				((struct sockaddr_in6 *)&ss)->sin6_port = 0;
			rc = listen_sa((struct sockaddr *)&ss, sl, 0, 0, r->addrs[cfg->node]);
		}
		if (rc < 0)
			say(err, errlen, "cannot listen for the leader: %s", strerror(-rc));
	}
	if (rc < 0)
		return rc;
	r->leader_fd = rc;
	rc = leader_reachable(r->leader_fd, r->addrs[cfg->node], err, errlen);
	if (rc < 0)
		return rc;

	own_hello(cfg, r->addrs[cfg->node], buf);
	answer_by = now_ms() + ANSWER_GRACE_MS;
	if (answer_by < deadline)
		answer_by = deadline;
	rc = shmcoll__send_all(fd, buf, sizeof(buf), ms_to_ns(answer_by));
	if (rc == 0)
		rc = shmcoll__recv_all(fd, buf, sizeof(buf), ms_to_ns(answer_by));
	if (rc == -EPIPE || rc == -ECONNRESET) {
		say(err, errlen,
		    "node 0 at %s refused this node (see its log; are SHMCOLL_TOKEN, --nnodes, "
		    "--nproc-per-node and --node-rank right?)",
		    cfg->root);
		return -EPROTO;
	}
	if (rc < 0) {
		say(err, errlen, "no answer from node 0 at %s: %s", cfg->root, strerror(-rc));
		return rc;
	}
	if (!check_answer(cfg, buf, why, sizeof(why))) {
		say(err, errlen, "node 0 at %s answered with a bad hello: %s", cfg->root, why);
		return -EPROTO;
	}
	/* Node 0 sends the table once every node has joined, by its own deadline,
	 * which is within one timeout from now. */
	return recv_table(cfg, r, fd, now_ms() + cfg->timeout_ms + ANSWER_GRACE_MS, err, errlen);
}

int shmcoll__rdv_run(const struct shmcoll_rdv_cfg *cfg, struct shmcoll_rdv *r, char *err,
                     size_t errlen)
{
	int64_t deadline = now_ms() + cfg->timeout_ms;
	int j, rc;

	r->leader_fd = -1;
	r->master_port = 0;
	r->run_id = 0;
	r->addrs = calloc((size_t)cfg->nnodes, sizeof(*r->addrs));
	r->ctl = malloc((size_t)cfg->nnodes * sizeof(*r->ctl));
	if (!r->addrs || !r->ctl) {
		free(r->addrs);
		free(r->ctl);
		r->addrs = NULL;
		r->ctl = NULL;
		say(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (j = 0; j < cfg->nnodes; j++)
		r->ctl[j] = -1;
	rc = cfg->node == 0 ? serve(cfg, r, deadline, err, errlen)
	                    : join(cfg, r, deadline, err, errlen);
	if (rc < 0)
		shmcoll__rdv_close(r, cfg->nnodes);
	return rc;
}

void shmcoll__rdv_close(struct shmcoll_rdv *r, int nnodes)
{
	int j;

	if (r->leader_fd >= 0)
		close(r->leader_fd);
	r->leader_fd = -1;
	for (j = 0; r->ctl && j < nnodes; j++)
		if (r->ctl[j] >= 0)
			close(r->ctl[j]);
	free(r->ctl);
	free(r->addrs);
	r->ctl = NULL;
	r->addrs = NULL;
}
