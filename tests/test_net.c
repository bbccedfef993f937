/* test_net.c - the leaders' transport (lib/net.c, lib/net_uring.c): the mesh
 * and its handshake, byte-exact exchanges of every size, the header checks,
 * dead, stopped and lying peers, refused clients, the io_uring -> poll
 * fallback under seccomp, and the resume arithmetic alone. Every multi-node
 * test runs once per backend (_uring, _poll).
 *
 * Nodes are forked children on 127.0.0.1; the parent makes every listener on
 * port 0 before the fork, so tests never race for ports. A child exits with
 * a code that names the check that failed (see each body); it never calls
 * cr_*. Timing is asserted only as a hang bound. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/net/net.h"
#include "lib/net/net_impl.h"
#include "shm/wait.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() __lsan_do_recoverable_leak_check()
#else
#define LEAK_CHECK() 0
#endif

#define MAXN    4
#define NPROC   2
#define TOKEN   "test-token_0123"
#define ERRLEN  256
#define SEC     1000000000ll
#define MS      1000000ll
#define BIG     ((size_t)64 << 20)
#define REAP_NS (120 * SEC) /* a hang bound for one child, not a timing claim */

/* ---- the forked nodes ---- */

static struct {
	int nnodes;
	int kind;
	int64_t timeout_ns;
	int lfd[MAXN];
	char addrs[MAXN][SHMCOLL_ADDR_MAX];
} M;

static void mesh_init(int nnodes, int kind, int64_t timeout_ns)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int i;

	M.nnodes = nnodes;
	M.kind = kind;
	M.timeout_ns = timeout_ns;
	for (i = 0; i < nnodes; i++) {
		M.lfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert_geq(M.lfd[i], 0);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sa.sin_port = 0;
		cr_assert_eq(bind(M.lfd[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
		cr_assert_eq(listen(M.lfd[i], 16), 0);
		sl = sizeof(sa);
		cr_assert_eq(getsockname(M.lfd[i], (struct sockaddr *)&sa, &sl), 0);
		snprintf(M.addrs[i], sizeof(M.addrs[i]), "127.0.0.1:%u", ntohs(sa.sin_port));
	}
}

static void mesh_done(void)
{
	for (int i = 0; i < M.nnodes; i++)
		close(M.lfd[i]);
}

typedef int (*node_fn)(int node, void *arg);

/* Forks node running fn; its stderr goes to *errpipe if errpipe. */
static pid_t spawn(int node, node_fn fn, void *arg, int *errpipe)
{
	int p[2] = {-1, -1};
	pid_t pid;

	if (errpipe)
		cr_assert_eq(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (errpipe) {
			dup2(p[1], 2);
			close(p[0]);
			close(p[1]);
		}
		int code = fn(node, arg);

		/* _exit skips LeakSanitizer's exit-time check: run it here,
		 * so a leak in the transport fails the test (code 250). */
		if (code == 0 && LEAK_CHECK())
			code = 250;
		_exit(code);
	}
	if (errpipe) {
		close(p[1]);
		*errpipe = p[0];
	}
	return pid;
}

/* The child's exit code, 128 + signal if one ended it, or 255 if it
 * outlived the bound (and was killed). */
static int reap(pid_t pid, int64_t bound_ns)
{
	int64_t until = shmcoll__now_ns() + bound_ns;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (shmcoll__now_ns() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 255;
		}
		usleep(5000);
	}
}

/* Runs every node with its own fn and asserts each exited 0. */
static void run_nodes(node_fn *fns, void *arg)
{
	pid_t pid[MAXN];
	int i, code;

	for (i = 0; i < M.nnodes; i++)
		pid[i] = spawn(i, fns[i], arg, NULL);
	for (i = 0; i < M.nnodes; i++) {
		code = reap(pid[i], REAP_NS);
		cr_expect_eq(code, 0, "node %d exited with %d", i, code);
	}
	mesh_done();
}

static void run_all(node_fn fn, void *arg)
{
	node_fn fns[MAXN] = {fn, fn, fn, fn};

	run_nodes(fns, arg);
}

static int open_node(int node, int log, struct shmcoll_net **n)
{
	struct shmcoll_net_cfg cfg = {.nnodes = M.nnodes,
	                              .node = node,
	                              .nproc = NPROC,
	                              .token = TOKEN,
	                              .addrs = (const char(*)[SHMCOLL_ADDR_MAX])M.addrs,
	                              .listen_fd = M.lfd[node],
	                              .timeout_ns = M.timeout_ns,
	                              .kind = M.kind,
	                              .log = log};
	char err[ERRLEN] = "";
	int rc;

	for (int i = 0; i < M.nnodes; i++)
		if (i != node)
			close(M.lfd[i]);
	rc = shmcoll__net_open(&cfg, n, err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "node %d: net_open: %d %s\n", node, rc, err);
	return rc;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int k = 0;

	if (!d)
		return -1;
	while (readdir(d))
		k++;
	closedir(d);
	return k;
}

/* The byte sender writes at i to receiver in call. */
static uint8_t pat(int sender, int receiver, uint64_t call, size_t i)
{
	return (uint8_t)(i * 131 + (i >> 12) + (size_t)sender * 17 + (size_t)receiver * 5 +
	                 call * 29);
}

static void fill(uint8_t *b, int sender, int receiver, uint64_t call, size_t len)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pat(sender, receiver, call, i);
}

static int verify(const uint8_t *b, int sender, int receiver, uint64_t call, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != pat(sender, receiver, call, i)) {
			fprintf(stderr, "byte %zu of %zu from node %d: %u, want %u\n", i, len,
			        sender, b[i], pat(sender, receiver, call, i));
			return -1;
		}
	return 0;
}

static int run(struct shmcoll_net *n, struct shmcoll_xfer *x, int nx, int quiet)
{
	char err[ERRLEN] = "";
	int rc = shmcoll__net_run(n, x, nx, err, sizeof(err));

	if (rc < 0 && !quiet)
		fprintf(stderr, "net_run: %d %s\n", rc, err);
	return rc;
}

/* One ring step: send to node+1, receive from node-1 (with 2 nodes: both
 * with the other, at once). 0, or 20 run failed, 21 bytes, 22 call word. */
static int ring_step(struct shmcoll_net *n, int node, size_t len, uint64_t call, uint8_t *sb,
                     uint8_t *rb)
{
	int to = (node + 1) % M.nnodes, from = (node + M.nnodes - 1) % M.nnodes;
	struct shmcoll_xfer x[2] = {
	    {.peer = to, .dir = XFER_SEND, .buf = sb, .len = len, .call = call},
	    {.peer = from, .dir = XFER_RECV, .buf = rb, .len = len, .call = call}};

	if (len) {
		fill(sb, node, to, call, len);
		memset(rb, 0xee, len);
	}
	if (run(n, x, 2, 0) < 0)
		return 20;
	if (verify(rb, from, node, call, len) < 0)
		return 21;
	return x[1].got == call ? 0 : 22;
}

/* After a failed call nothing of it may still be in flight: every CQE that
 * could write into a caller's buffer was reaped before the call returned.
 * 1 if something arrived later (io_uring only; poll has nothing in flight). */
static int late_cqes(struct shmcoll_net *n)
{
	if (n->kind != NET_URING)
		return 0;
	usleep(50000);
	return shmcoll__net_uring_stray(n) != 0;
}

/* ---- 1. the mesh forms and moves bytes exactly ---- */

static const size_t sizes[] = {0, 1, 4095, (1 << 20) + 3, BIG};

/* 1 open, 2 alloc, 20-22 ring_step, 30 all-to-all, 40 fd leak */
static int ring_body(int node, void *arg)
{
	size_t max = *(size_t *)arg;
	struct shmcoll_net *n;
	uint8_t *sb, *rb;
	int fds = count_fds(), rc = 0;
	uint64_t call = 1;

	if (open_node(node, 0, &n) < 0)
		return 1;
	sb = malloc(max + 1);
	rb = malloc(max + 1);
	if (!sb || !rb)
		return 2;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && !rc; k++)
		if (sizes[k] <= max)
			rc = ring_step(n, node, sizes[k], call++, sb, rb);
	/* Every other node at once, both ways. */
	if (!rc && M.nnodes > 2) {
		struct shmcoll_xfer x[2 * MAXN];
		size_t len = 100003;
		int k = 0;

		for (int p = 0; p < M.nnodes; p++) {
			if (p == node)
				continue;
			x[k++] = (struct shmcoll_xfer){.peer = p,
			                               .dir = XFER_RECV,
			                               .buf = rb + (size_t)p * len,
			                               .len = len,
			                               .call = call};
			x[k] = (struct shmcoll_xfer){.peer = p,
			                             .dir = XFER_SEND,
			                             .buf = sb + (size_t)p * len,
			                             .len = len,
			                             .call = call};
			fill(x[k++].buf, node, p, call, len);
		}
		if (run(n, x, k, 0) < 0)
			rc = 30;
		for (int p = 0; p < M.nnodes && !rc; p++)
			if (p != node && verify(rb + (size_t)p * len, p, node, call, len) < 0)
				rc = 31;
	}
	shmcoll__net_close(n);
	free(sb);
	free(rb);
	/* open_node closed the other nodes' listeners. */
	if (!rc && count_fds() != fds - (M.nnodes - 1))
		rc = 40;
	return rc;
}

#define BOTH(name, ...)                                                                            \
	static void name##_body(int kind);                                                         \
	Test(net, name##_uring, __VA_ARGS__)                                                       \
	{                                                                                          \
		name##_body(NET_URING);                                                            \
	}                                                                                          \
	Test(net, name##_poll, __VA_ARGS__)                                                        \
	{                                                                                          \
		name##_body(NET_POLL);                                                             \
	}                                                                                          \
	static void name##_body(int kind)

BOTH(ring2_every_size, .timeout = 300)
{
	size_t max = BIG;

	mesh_init(2, kind, 60 * SEC);
	run_all(ring_body, &max);
}

/* io_uring with zero-copy sends from 4 KiB: the notifications are awaited,
 * the bytes still exact. */
Test(net, ring2_every_size_zero_copy_uring, .timeout = 300)
{
	size_t max = BIG;

	setenv("SHMCOLL_NET_ZC_MIN", "4096", 1);
	mesh_init(2, NET_URING, 60 * SEC);
	run_all(ring_body, &max);
	unsetenv("SHMCOLL_NET_ZC_MIN");
}

BOTH(ring3_and_all_to_all, .timeout = 300)
{
	size_t max = (1 << 20) + 3;

	mesh_init(3, kind, 60 * SEC);
	run_all(ring_body, &max);
}

/* Many calls in a row, alternating sizes, each with its own call word: the
 * seq of every frame must follow on. 1 open, 20-22 ring_step. */
static int many_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t sb[3000], rb[3000];
	int rc = 0;

	if (open_node(node, 0, &n) < 0)
		return 1;
	for (int k = 0; k < 500 && !rc; k++)
		rc = ring_step(n, node, (size_t)(k * 37) % sizeof(sb), 0x1000u + (uint64_t)k, sb,
		               rb);
	shmcoll__net_close(n);
	return rc;
}

BOTH(many_calls_in_sequence, .timeout = 120)
{
	mesh_init(3, kind, 60 * SEC);
	run_all(many_body, NULL);
}

/* The backend asked for is the one used. 1 open, 2 wrong backend. */
static int kind_body(int node, void *arg)
{
	struct shmcoll_net *n;
	const char *want = M.kind == NET_URING ? "io_uring" : "poll";
	uint8_t b[128];
	int rc = 0;

	if (open_node(node, 0, &n) < 0)
		return 1;
	if (strcmp(shmcoll__net_kind_name(n), want))
		rc = 2;
	if (!rc)
		rc = ring_step(n, node, 64, 5, b, b + 64) ? 3 : 0;
	shmcoll__net_close(n);
	return rc;
}

BOTH(uses_the_backend_asked_for, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(kind_body, NULL);
}

/* ---- 2. the header is checked before the payload ---- */

enum lie { LIE_LEN, LIE_CALL };

/* Node 0 sends 100 bytes with call 7; node 1 posts 50 bytes (LIE_LEN) or
 * 100 with call 8 (LIE_CALL). Node 1: 10 not -EPROTO, 11 buffer touched,
 * 12 got != 7, 13 later call not -ECANCELED. Node 0: 20 send failed, 21 its
 * next receive is not -EOWNERDEAD (node 1's shutdown tells it at once). */
static int lie_body(int node, void *arg)
{
	enum lie lie = *(enum lie *)arg;
	struct shmcoll_net *n;
	uint8_t buf[100], canary[100];
	struct shmcoll_xfer x = {.peer = !node, .buf = buf};
	int rc = 0, r;

	if (open_node(node, 0, &n) < 0)
		return 1;
	if (node == 0) {
		x.dir = XFER_SEND;
		x.len = 100;
		x.call = 7;
		memset(buf, 1, sizeof(buf));
		if (run(n, &x, 1, 0) < 0)
			rc = 20;
		x.dir = XFER_RECV;
		if (!rc && run(n, &x, 1, 1) != -EOWNERDEAD)
			rc = 21;
	} else {
		x.dir = XFER_RECV;
		x.len = lie == LIE_LEN ? 50 : 100;
		x.call = lie == LIE_LEN ? 7 : 8;
		memset(buf, 0x5a, sizeof(buf));
		memcpy(canary, buf, sizeof(buf));
		r = run(n, &x, 1, 1);
		if (r != -EPROTO)
			rc = 10;
		else if (memcmp(buf, canary, sizeof(buf)))
			rc = 11;
		else if (x.got != 7)
			rc = 12;
		else if (run(n, &x, 1, 1) != -ECANCELED)
			rc = 13;
		else if (late_cqes(n))
			rc = 14;
	}
	shmcoll__net_close(n);
	return rc;
}

BOTH(length_mismatch_is_eproto_before_payload, .timeout = 60)
{
	enum lie lie = LIE_LEN;

	mesh_init(2, kind, 30 * SEC);
	run_all(lie_body, &lie);
}

BOTH(call_mismatch_is_eproto_before_payload, .timeout = 60)
{
	enum lie lie = LIE_CALL;

	mesh_init(2, kind, 30 * SEC);
	run_all(lie_body, &lie);
}

/* The message names the peer and the lengths, and later calls quote it.
 * 1 open, 10 rc, 11 message, 12 -ECANCELED message. */
static int message_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t buf[16] = {0};
	struct shmcoll_xfer x = {.peer = !node, .buf = buf, .call = 3};
	char err[ERRLEN];
	int rc = 0;

	if (open_node(node, 0, &n) < 0)
		return 1;
	x.dir = node == 0 ? XFER_SEND : XFER_RECV;
	x.len = node == 0 ? 16 : 8;
	if (node == 1) {
		if (shmcoll__net_run(n, &x, 1, err, sizeof(err)) != -EPROTO)
			rc = 10;
		else if (!strstr(err, "node 0 announced 16 bytes where 8 were posted"))
			rc = 11;
		else if (shmcoll__net_run(n, &x, 1, err, sizeof(err)) != -ECANCELED ||
		         !strstr(err, "broken earlier: node 0 announced 16"))
			rc = 12;
		if (rc)
			fprintf(stderr, "message: %s\n", err);
	} else {
		run(n, &x, 1, 0);
	}
	shmcoll__net_close(n);
	return rc;
}

BOTH(error_names_peer_and_later_calls_quote_it, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(message_body, NULL);
}

/* ---- 3. dead and stopped peers ---- */

/* Node 1 does one exchange and SIGKILLs itself; node 0's second (64 MiB
 * both ways) must fail with -EOWNERDEAD well inside the bound. Node 0:
 * 10 first exchange, 11 not -EOWNERDEAD, 12 too slow, 13 later call. */
static int killed_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t *sb = malloc(BIG), *rb = malloc(BIG);
	struct shmcoll_xfer x[2] = {{.peer = !node, .dir = XFER_SEND, .buf = sb, .len = BIG},
	                            {.peer = !node, .dir = XFER_RECV, .buf = rb, .len = BIG}};
	int64_t t0;
	int rc = 0, r;

	if (!sb || !rb || open_node(node, 0, &n) < 0)
		return 1;
	if (ring_step(n, node, 4096, 1, sb, rb))
		return 10;
	if (node == 1)
		raise(SIGKILL);
	t0 = shmcoll__now_ns();
	r = run(n, x, 2, 1);
	if (r != -EOWNERDEAD)
		rc = 11;
	else if (shmcoll__now_ns() - t0 > 10 * SEC)
		rc = 12;
	else if (run(n, x, 2, 1) != -ECANCELED)
		rc = 13;
	else if (late_cqes(n))
		rc = 14;
	shmcoll__net_close(n);
	free(sb);
	free(rb);
	return rc;
}

static void killed(int kind)
{
	pid_t p0, p1;
	int c0, c1;

	mesh_init(2, kind, 60 * SEC);
	p0 = spawn(0, killed_body, NULL, NULL);
	p1 = spawn(1, killed_body, NULL, NULL);
	c0 = reap(p0, REAP_NS);
	c1 = reap(p1, REAP_NS);
	mesh_done();
	cr_assert_eq(c0, 0, "node 0 exited with %d", c0);
	cr_assert_eq(c1, 128 + SIGKILL, "node 1 exited with %d", c1);
}

BOTH(killed_peer_is_eownerdead, .timeout = 120)
{
	killed(kind);
}

Test(net, killed_peer_is_eownerdead_zero_copy_uring, .timeout = 120)
{
	setenv("SHMCOLL_NET_ZC_MIN", "4096", 1);
	killed(NET_URING);
	unsetenv("SHMCOLL_NET_ZC_MIN");
}

/* Node 1 stops itself (SIGSTOP) after the mesh forms; node 0, with a 300 ms
 * timeout, receives (arg 0) or sends and receives 64 MiB (arg 1): both must
 * end in -ETIMEDOUT, not before 300 ms, and within the hang bound. The
 * open itself had a generous timeout: only the calls' is short.
 * Node 0: 10 not -ETIMEDOUT, 11 early, 12 too slow, 13 later call. */
static int stopped_body(int node, void *arg)
{
	int big = *(int *)arg;
	struct shmcoll_net *n;
	size_t len = big ? BIG : 64;
	uint8_t *sb = malloc(len), *rb = malloc(len);
	struct shmcoll_xfer x[2] = {{.peer = !node, .dir = XFER_RECV, .buf = rb, .len = len},
	                            {.peer = !node, .dir = XFER_SEND, .buf = sb, .len = len}};
	int64_t t0, dt;
	int rc = 0;

	if (!sb || !rb || open_node(node, 0, &n) < 0)
		return 1;
	if (node == 1) {
		raise(SIGSTOP);
		pause();
	}
	memset(sb, 3, len);
	n->timeout_ns = 300 * MS;
	t0 = shmcoll__now_ns();
	if (run(n, x, big ? 2 : 1, 1) != -ETIMEDOUT)
		rc = 10;
	dt = shmcoll__now_ns() - t0;
	if (!rc && dt < 300 * MS)
		rc = 11;
	if (!rc && dt > 10 * SEC)
		rc = 12;
	if (!rc && run(n, x, 1, 1) != -ECANCELED)
		rc = 13;
	if (!rc && late_cqes(n))
		rc = 14;
	shmcoll__net_close(n);
	free(sb);
	free(rb);
	return rc;
}

static void stopped(int kind, int big)
{
	pid_t p0, p1;
	int code;

	mesh_init(2, kind, 60 * SEC);
	p0 = spawn(0, stopped_body, &big, NULL);
	p1 = spawn(1, stopped_body, &big, NULL);
	code = reap(p0, REAP_NS);
	kill(p1, SIGKILL);
	reap(p1, REAP_NS);
	mesh_done();
	cr_assert_eq(code, 0, "node 0 exited with %d", code);
}

BOTH(stopped_peer_times_out_receiving, .timeout = 60)
{
	stopped(kind, 0);
}

BOTH(stopped_peer_times_out_sending_big, .timeout = 60)
{
	stopped(kind, 1);
}

/* ---- raw clients: a fake node that speaks the wire format by hand ---- */

static int raw_connect(int node)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char host[SHMCOLL_ADDR_MAX];
	uint16_t port;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || shmcoll__addr_split(M.addrs[node], host, sizeof(host), &port) < 0)
		return -1;
	inet_pton(AF_INET, host, &sa.sin_addr);
	sa.sin_port = htons(port);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void hello_of(uint8_t *buf, int node, const char *token)
{
	struct shmcoll_hello h = {.version = SHMCOLL_WIRE_VERSION,
	                          .role = ROLE_LEADER,
	                          .nnodes = (uint32_t)M.nnodes,
	                          .node = (uint32_t)node,
	                          .nproc = NPROC,
	                          .rank = (uint32_t)node * NPROC};

	snprintf(h.token, sizeof(h.token), "%s", token);
	if (shmcoll__hello_encode(buf, &h) < 0)
		abort();
}

static int write_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len) {
		ssize_t r = send(fd, b, len, MSG_NOSIGNAL);

		if (r <= 0)
			return -1;
		b += r;
		len -= (size_t)r;
	}
	return 0;
}

/* Whether the other end closes fd within ms (data before the EOF is read
 * and dropped). */
static int closed_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	uint8_t b[512];

	while (poll(&p, 1, ms) > 0) {
		ssize_t r = recv(fd, b, sizeof(b), 0);

		if (r <= 0)
			return 1;
	}
	return 0;
}

/* Connects to node 0 as node `node` and trades valid hellos. */
static int raw_handshake(int node)
{
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	struct shmcoll_hello h;
	struct pollfd p;
	size_t got = 0;
	int fd = raw_connect(0);

	if (fd < 0)
		return -1;
	hello_of(buf, node, TOKEN);
	if (write_all(fd, buf, sizeof(buf)) < 0)
		goto err;
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	while (got < sizeof(buf)) {
		ssize_t r;

		if (poll(&p, 1, 30000) <= 0)
			goto err;
		r = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (r <= 0)
			goto err;
		got += (size_t)r;
	}
	if (shmcoll__hello_decode(buf, &h, NULL, 0) < 0 || h.node != 0)
		goto err;
	return fd;
err:
	close(fd);
	return -1;
}

static void frame_of(uint8_t *out, uint16_t type, uint16_t node, uint32_t seq, uint64_t call,
                     uint64_t len)
{
	struct shmcoll_frame f = {.type = type, .node = node, .seq = seq, .call = call, .len = len};

	shmcoll__frame_encode(out, &f);
}

/* ---- 4. refused clients ---- */

/* Node 0 logs to a pipe the parent reads. 1 open, 10-12 ring. */
static int logged_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t b[8192];
	int rc;

	if (open_node(node, 1, &n) < 0)
		return 1;
	rc = ring_step(n, node, 4096, 9, b, b + 4096);
	shmcoll__net_close(n);
	return rc ? rc - 10 : 0;
}

BOTH(bad_clients_are_refused_and_logged, .timeout = 120)
{
	uint8_t buf[SHMCOLL_HELLO_BYTES], junk[10];
	struct shmcoll_hello h;
	pid_t p0, p1;
	int efd, fd, silent, c0, c1;
	char log[8192];
	size_t got = 0;
	ssize_t r;

	mesh_init(2, kind, 60 * SEC);
	p0 = spawn(0, logged_body, NULL, &efd);

	/* A hello with another job's token: closed unanswered. */
	fd = raw_connect(0);
	cr_assert_geq(fd, 0);
	hello_of(buf, 1, "someone-else");
	cr_assert_eq(write_all(fd, buf, sizeof(buf)), 0);
	cr_assert(closed_within(fd, 30000), "a wrong token was answered");
	close(fd);

	/* Another wire version. */
	fd = raw_connect(0);
	hello_of(buf, 1, TOKEN);
	buf[4] = 7;
	cr_assert_eq(write_all(fd, buf, sizeof(buf)), 0);
	cr_assert(closed_within(fd, 30000), "a wrong version was answered");
	close(fd);

	/* The right token, the wrong shape (3 nodes). */
	fd = raw_connect(0);
	h = (struct shmcoll_hello){.version = 1,
	                           .role = ROLE_LEADER,
	                           .nnodes = 3,
	                           .node = 1,
	                           .nproc = NPROC,
	                           .rank = NPROC};
	strcpy(h.token, TOKEN);
	cr_assert_eq(shmcoll__hello_encode(buf, &h), 0);
	cr_assert_eq(write_all(fd, buf, sizeof(buf)), 0);
	cr_assert(closed_within(fd, 30000), "a wrong shape was answered");
	close(fd);

	/* Ten random bytes, then gone. */
	fd = raw_connect(0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(rand() | 1);
	cr_assert_eq(write_all(fd, junk, sizeof(junk)), 0);
	shutdown(fd, SHUT_WR);
	cr_assert(closed_within(fd, 30000), "a short hello was not dropped");
	close(fd);

	/* Connected, silent, and kept open past the mesh. */
	silent = raw_connect(0);
	cr_assert_geq(silent, 0);

	p1 = spawn(1, logged_body, NULL, NULL);
	c1 = reap(p1, REAP_NS);
	c0 = reap(p0, REAP_NS);
	close(silent);
	while (got < sizeof(log) - 1 && (r = read(efd, log + got, sizeof(log) - 1 - got)) > 0)
		got += (size_t)r;
	log[got] = '\0';
	close(efd);
	mesh_done();
	cr_assert_eq(c0, 0, "node 0 exited with %d; its stderr:\n%s", c0, log);
	cr_assert_eq(c1, 0, "node 1 exited with %d", c1);
	cr_expect(strstr(log, "shmcoll: node 0 refused a connection from 127.0.0.1:"),
	          "no refusal line in:\n%s", log);
	cr_expect(strstr(log, "wrong job token"), "token refusal missing:\n%s", log);
	cr_expect(strstr(log, "wire version 7"), "version refusal missing:\n%s", log);
	cr_expect(strstr(log, "a job of 3 nodes"), "shape refusal missing:\n%s", log);
	cr_expect(strstr(log, "closed the connection after 10 bytes"), "junk refusal missing:\n%s",
	          log);
	cr_expect(strstr(log, "no complete hello") || strstr(log, "the mesh is complete"),
	          "silent client not dropped:\n%s", log);
	cr_expect(!strstr(log, TOKEN), "the log shows the job token:\n%s", log);
}

/* A lower node that refuses our hello: the dialer fails at once with a clear
 * error instead of waiting out its deadline. The fake node 0 reads the hello
 * and closes. Node 1: 10 not -ECONNREFUSED, 11 message. */
static int refused_dialer_body(int node, void *arg)
{
	struct shmcoll_net_cfg cfg = {.nnodes = 2,
	                              .node = 1,
	                              .nproc = NPROC,
	                              .token = TOKEN,
	                              .addrs = (const char(*)[SHMCOLL_ADDR_MAX])M.addrs,
	                              .listen_fd = M.lfd[1],
	                              .timeout_ns = 30 * SEC,
	                              .kind = M.kind};
	struct shmcoll_net *n = NULL;
	char err[ERRLEN] = "";
	int rc = shmcoll__net_open(&cfg, &n, err, sizeof(err));

	if (rc != -ECONNREFUSED)
		return 10;
	return strstr(err, "refused it") ? 0 : 11;
}

BOTH(refused_dialer_fails_fast, .timeout = 60)
{
	uint8_t buf[SHMCOLL_HELLO_BYTES];
	size_t got = 0;
	pid_t p1;
	int fd, code;

	mesh_init(2, kind, 30 * SEC);
	p1 = spawn(1, refused_dialer_body, NULL, NULL);
	fd = accept(M.lfd[0], NULL, NULL);
	cr_assert_geq(fd, 0);
	while (got < sizeof(buf)) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);

		cr_assert_gt(r, 0);
		got += (size_t)r;
	}
	close(fd);
	code = reap(p1, REAP_NS);
	mesh_done();
	cr_assert_eq(code, 0, "node 1 exited with %d", code);
}

/* ---- 5. a lying peer: garbage frames after a good handshake ---- */

#define FLEN  4096
#define GUARD 4096

enum garbage {
	G_MAGIC,
	G_HUGE,
	G_TOOBIG,
	G_SEQ,
	G_NODE,
	G_TYPE,
	G_RESERVED,
	G_SHORT_HDR,
	G_SHORT_BODY,
	G_EXTRA_BODY,
	G_SLOW,
	G_RANDOM, /* G_RANDOM + seed */
};

/* What node 0's receive must return for each variant. */
static int expected(int g)
{
	switch (g) {
	case G_SHORT_HDR:
	case G_SHORT_BODY:
		return -EOWNERDEAD;
	case G_EXTRA_BODY:
	case G_SLOW:
		return 0;
	default:
		return -EPROTO;
	}
}

/* The fake node 1: handshake, then variant g, then waits for node 0 to
 * close (or closes first where the variant says so). */
static int liar_body(int node, void *arg)
{
	int g = *(int *)arg, fd = raw_handshake(1);
	static uint8_t body[FLEN + 1000];
	uint8_t h[SHMCOLL_FRAME_BYTES];
	unsigned seed = (unsigned)g * 2654435761u;

	if (fd < 0)
		return 1;
	for (size_t i = 0; i < FLEN + 1000; i++)
		body[i] = pat(1, 0, 42, i);
	frame_of(h, FRAME_DATA, 1, 1, 42, FLEN);
	switch (g) {
	case G_MAGIC:
		h[0] ^= 0xff;
		break;
	case G_HUGE:
		frame_of(h, FRAME_DATA, 1, 1, 42, SHMCOLL_FRAME_MAX_LEN);
		break;
	case G_TOOBIG:
		frame_of(h, FRAME_DATA, 1, 1, 42, SHMCOLL_FRAME_MAX_LEN + 1);
		break;
	case G_SEQ:
		frame_of(h, FRAME_DATA, 1, 2, 42, FLEN);
		break;
	case G_NODE:
		frame_of(h, FRAME_DATA, 0, 1, 42, FLEN);
		break;
	case G_TYPE:
		frame_of(h, FRAME_TABLE, 1, 1, 42, FLEN);
		break;
	case G_RESERVED:
		h[14] = 1;
		break;
	case G_EXTRA_BODY:
		break;
	case G_SHORT_HDR:
		write_all(fd, h, 16);
		return 0; /* the exit closes the socket */
	case G_SHORT_BODY:
		write_all(fd, h, sizeof(h));
		write_all(fd, body, FLEN / 2);
		return 0;
	case G_SLOW:
		/* The header and the payload in odd pieces: every receive
		 * resumes where the last left off. */
		for (size_t off = 0, k = 1; off < sizeof(h) + FLEN; off += k, k = k % 13 + 1) {
			uint8_t piece[16];
			size_t m = off + k > sizeof(h) + FLEN ? sizeof(h) + FLEN - off : k;

			for (size_t i = 0; i < m; i++)
				piece[i] =
				    off + i < sizeof(h) ? h[off + i] : body[off + i - sizeof(h)];
			write_all(fd, piece, m);
			if (off % 256 < 13)
				usleep(1000);
		}
		closed_within(fd, 30000);
		return 0;
	default:
		for (size_t i = 0; i < sizeof(h); i++)
			h[i] = (uint8_t)rand_r(&seed);
		if (g % 3 == 0) /* keep the magic: the deeper checks */
			frame_of(h, (uint16_t)(rand_r(&seed) % 6), (uint16_t)(rand_r(&seed) % 3),
			         (uint32_t)rand_r(&seed) % 3, 42,
			         (uint64_t)rand_r(&seed) << (rand_r(&seed) % 24));
		break;
	}
	write_all(fd, h, sizeof(h));
	write_all(fd, body, g == G_EXTRA_BODY ? FLEN + 1000 : FLEN);
	closed_within(fd, 30000);
	return 0;
}

/* Node 0: receives FLEN into the middle of a guarded buffer. 1 open,
 * 10 wrong code, 11 guard written, 12 payload touched although the header
 * was refused, 13 payload wrong although accepted. */
static int victim_body(int node, void *arg)
{
	int g = *(int *)arg, want = expected(g), rc = 0, r;
	uint8_t *mem = malloc(FLEN + 2 * GUARD), *buf = mem + GUARD;
	struct shmcoll_net *n;
	struct shmcoll_xfer x = {.peer = 1, .dir = XFER_RECV, .buf = buf, .len = FLEN, .call = 42};

	if (!mem || open_node(node, 0, &n) < 0)
		return 1;
	memset(mem, 0xc3, FLEN + 2 * GUARD);
	r = run(n, &x, 1, 1);
	if (g >= G_RANDOM && r == 0)
		want = 0; /* a random header that happens to be right */
	if (g >= G_RANDOM ? (r != want && r != -EPROTO && r != -EOWNERDEAD) : r != want)
		rc = 10;
	for (size_t i = 0; i < GUARD && !rc; i++)
		if (mem[i] != 0xc3 || mem[GUARD + FLEN + i] != 0xc3)
			rc = 11;
	if (!rc && r == -EPROTO)
		for (size_t i = 0; i < FLEN && !rc; i++)
			if (buf[i] != 0xc3)
				rc = 12;
	if (!rc && r == 0 && verify(buf, 1, 0, 42, FLEN) < 0)
		rc = 13;
	if (rc)
		fprintf(stderr, "variant %d: got %d, want %d\n", g, r, want);
	shmcoll__net_close(n);
	free(mem);
	return rc;
}

BOTH(garbage_frames_fail_cleanly, .timeout = 300)
{
	node_fn fns[2] = {victim_body, liar_body};

	for (int g = 0; g < G_RANDOM + 24; g++) {
		mesh_init(2, kind, 30 * SEC);
		run_nodes(fns, &g);
	}
}

/* ---- 6. choosing the backend ---- */

#if defined(__x86_64__)
#define THIS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* Makes io_uring_setup fail with EPERM in this process, as a container's
 * seccomp profile does. */
static int forbid_io_uring(void)
{
#ifdef THIS_AUDIT_ARCH
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_AUDIT_ARCH, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
	return -1;
#endif
}

/* Node 0 forbids io_uring, opens with NET_AUTO, must get poll and move
 * bytes with node 1 (io_uring). 1 open, 2 not poll, 3 seccomp, 4 node 1 not
 * io_uring, 10-12 ring. */
static int fallback_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t b[2 << 20];
	int rc;

	if (node == 0 && forbid_io_uring() < 0)
		return 3;
	unsetenv("SHMCOLL_NET");
	if (open_node(node, 0, &n) < 0)
		return 1;
	if (strcmp(shmcoll__net_kind_name(n), node == 0 ? "poll" : "io_uring")) {
		shmcoll__net_close(n);
		return node == 0 ? 2 : 4;
	}
	rc = ring_step(n, node, 1 << 20, 77, b, b + (1 << 20));
	shmcoll__net_close(n);
	return rc ? rc - 10 : 0;
}

Test(net, auto_falls_back_to_poll_when_io_uring_is_forbidden, .timeout = 60)
{
	mesh_init(2, NET_AUTO, 30 * SEC);
	run_all(fallback_body, NULL);
}

/* Under the same filter, io_uring asked for explicitly fails with a message
 * that says what to do. arg: 0 NET_URING, 1 SHMCOLL_NET=uring with NET_AUTO.
 * 3 seccomp, 10 not -EPERM, 11 message, 12 a net came back. */
static int forced_uring_body(int node, void *arg)
{
	struct shmcoll_net_cfg cfg = {.nnodes = 2,
	                              .node = 0,
	                              .nproc = NPROC,
	                              .token = TOKEN,
	                              .addrs = (const char(*)[SHMCOLL_ADDR_MAX])M.addrs,
	                              .listen_fd = M.lfd[0],
	                              .timeout_ns = SEC,
	                              .kind = *(int *)arg ? NET_AUTO : NET_URING};
	struct shmcoll_net *n = (void *)1;
	char err[ERRLEN] = "";
	int rc;

	if (forbid_io_uring() < 0)
		return 3;
	if (*(int *)arg)
		setenv("SHMCOLL_NET", "uring", 1);
	rc = shmcoll__net_open(&cfg, &n, err, sizeof(err));
	if (rc != -EPERM)
		return 10;
	if (!strstr(err, "io_uring is not available") || !strstr(err, "SHMCOLL_NET=poll"))
		return 11;
	return n ? 12 : 0;
}

Test(net, forced_io_uring_fails_clearly_when_forbidden, .timeout = 60)
{
	for (int how = 0; how < 2; how++) {
		pid_t p;
		int code;

		mesh_init(2, NET_URING, SEC);
		p = spawn(0, forced_uring_body, &how, NULL);
		code = reap(p, REAP_NS);
		mesh_done();
		cr_expect_eq(code, 0, "how %d: exited with %d", how, code);
	}
}

/* SHMCOLL_NET=poll forces poll under NET_AUTO. 1 open, 2 not poll, 10-12 ring. */
static int env_poll_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t b[200];
	int rc;

	setenv("SHMCOLL_NET", "poll", 1);
	if (open_node(node, 0, &n) < 0)
		return 1;
	rc = strcmp(shmcoll__net_kind_name(n), "poll") ? 2 : 0;
	if (!rc && ring_step(n, node, 100, 1, b, b + 100))
		rc = 10;
	shmcoll__net_close(n);
	return rc;
}

Test(net, env_poll_forces_poll, .timeout = 60)
{
	mesh_init(2, NET_AUTO, 30 * SEC);
	run_all(env_poll_body, NULL);
}

Test(net, env_bogus_is_einval)
{
	char addrs[2][SHMCOLL_ADDR_MAX] = {"127.0.0.1:1", "127.0.0.1:2"};
	struct shmcoll_net_cfg cfg = {.nnodes = 2,
	                              .node = 1,
	                              .nproc = 1,
	                              .token = TOKEN,
	                              .addrs = (const char(*)[SHMCOLL_ADDR_MAX])addrs,
	                              .listen_fd = -1,
	                              .timeout_ns = SEC,
	                              .kind = NET_AUTO};
	struct shmcoll_net *n = (void *)1;
	char err[ERRLEN] = "";

	setenv("SHMCOLL_NET", "bogus", 1);
	cr_assert_eq(shmcoll__net_open(&cfg, &n, err, sizeof(err)), -EINVAL);
	cr_assert_null(n);
	cr_assert(strstr(err, "SHMCOLL_NET=bogus"), "%s", err);
	setenv("SHMCOLL_NET", "poll", 1);
	setenv("SHMCOLL_NET_ZC_MIN", "12k", 1);
	cfg.kind = NET_URING;
	cr_assert_eq(shmcoll__net_open(&cfg, &n, err, sizeof(err)), -EINVAL, "%s", err);
	cr_assert(strstr(err, "SHMCOLL_NET_ZC_MIN=12k"), "%s", err);
	unsetenv("SHMCOLL_NET");
	unsetenv("SHMCOLL_NET_ZC_MIN");
}

Test(net, bad_config_is_einval)
{
	char addrs[2][SHMCOLL_ADDR_MAX] = {"127.0.0.1:1", "127.0.0.1:2"};
	struct shmcoll_net_cfg good = {.nnodes = 2,
	                               .node = 1,
	                               .nproc = 1,
	                               .token = TOKEN,
	                               .addrs = (const char(*)[SHMCOLL_ADDR_MAX])addrs,
	                               .listen_fd = -1,
	                               .timeout_ns = SEC,
	                               .kind = NET_POLL};
	struct shmcoll_net_cfg bad[6];
	struct shmcoll_net *n;
	char err[ERRLEN];

	for (int i = 0; i < 6; i++)
		bad[i] = good;
	bad[0].nnodes = 1;
	bad[1].node = 2;
	bad[2].token = "has space";
	bad[3].nproc = 0;
	bad[4].kind = 9;
	bad[5].addrs = NULL;
	for (int i = 0; i < 6; i++)
		cr_expect_eq(shmcoll__net_open(&bad[i], &n, err, sizeof(err)), -EINVAL, "case %d",
		             i);
}

/* Nobody listens at node 0's address: the dialer retries (sleeping) until
 * its deadline and says so. */
Test(net, unreachable_lower_node_times_out, .timeout = 60)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	char addrs[2][SHMCOLL_ADDR_MAX];
	int fd = socket(AF_INET, SOCK_STREAM, 0), fds = count_fds();
	struct shmcoll_net_cfg cfg = {.nnodes = 2,
	                              .node = 1,
	                              .nproc = 1,
	                              .token = TOKEN,
	                              .addrs = (const char(*)[SHMCOLL_ADDR_MAX])addrs,
	                              .listen_fd = -1,
	                              .timeout_ns = 400 * MS,
	                              .kind = NET_POLL};
	struct shmcoll_net *n;
	char err[ERRLEN];
	int64_t t0;

	/* A port that was free a moment ago and has no listener now. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	snprintf(addrs[0], sizeof(addrs[0]), "127.0.0.1:%u", ntohs(sa.sin_port));
	snprintf(addrs[1], sizeof(addrs[1]), "127.0.0.1:0");
	t0 = shmcoll__now_ns();
	cr_assert_eq(shmcoll__net_open(&cfg, &n, err, sizeof(err)), -ETIMEDOUT, "%s", err);
	cr_assert_geq(shmcoll__now_ns() - t0, 400 * MS);
	cr_assert_lt(shmcoll__now_ns() - t0, 10 * SEC);
	cr_assert(strstr(err, "could not connect to node 0"), "%s", err);
	cr_assert_eq(count_fds(), fds, "an fd leaked");
	close(fd);
}

/* ---- 7. the resume arithmetic alone ---- */

Test(net, resume_arithmetic)
{
	uint32_t tx[2] = {0}, rx[2] = {0};
	struct shmcoll_net n = {.nnodes = 2, .node = 0, .tx_seq = tx, .rx_seq = rx};
	struct net_op op = {.peer = 1};
	struct shmcoll_xfer x = {.peer = 1, .len = 3 * NET_CHUNK + 5, .call = 9};
	uint8_t hdr[SHMCOLL_FRAME_BYTES];
	struct iovec iov[2];
	size_t total = SHMCOLL_FRAME_BYTES + x.len, moved;
	char err[ERRLEN];
	int cnt;

	/* The buffer is never touched here: only its addresses are computed. */
	x.buf = (void *)(uintptr_t)0x100000;

	/* A send: header and payload in one iovec, resumed mid-header. */
	op.dir = x.dir = XFER_SEND;
	shmcoll__net_op_start(&n, &op, &x);
	cr_assert_eq(tx[1], 1);
	cnt = shmcoll__net_op_iov(&op, iov);
	cr_assert_eq(cnt, 2);
	cr_assert_eq(iov[0].iov_len, SHMCOLL_FRAME_BYTES);
	cr_assert_eq(iov[1].iov_len, NET_CHUNK, "a piece is capped at NET_CHUNK");
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, 5, err, sizeof(err)), 0);
	cnt = shmcoll__net_op_iov(&op, iov);
	cr_assert_eq(cnt, 2);
	cr_assert_eq((uint8_t *)iov[0].iov_base, op.hdr + 5);
	cr_assert_eq(iov[0].iov_len, SHMCOLL_FRAME_BYTES - 5);
	cr_assert_eq(
	    shmcoll__net_op_advance(&n, &op, SHMCOLL_FRAME_BYTES - 5 + 7, err, sizeof(err)), 0);
	for (moved = SHMCOLL_FRAME_BYTES + 7; !op.complete; moved += iov[0].iov_len) {
		cnt = shmcoll__net_op_iov(&op, iov);
		cr_assert_eq(cnt, 1);
		cr_assert_eq((uintptr_t)iov[0].iov_base, 0x100000 + moved - SHMCOLL_FRAME_BYTES);
		cr_assert_leq(iov[0].iov_len, NET_CHUNK);
		cr_assert_eq(shmcoll__net_op_advance(&n, &op, iov[0].iov_len, err, sizeof(err)), 0);
	}
	cr_assert_eq(moved, total);
	memcpy(hdr, op.hdr, sizeof(hdr));

	/* A receive of that very frame: the header alone, in pieces, checked
	 * when whole; only then the payload. */
	n.node = 1;
	op.peer = 0;
	op.dir = x.dir = XFER_RECV;
	x.peer = 0;
	shmcoll__net_op_start(&n, &op, &x);
	for (size_t k = 0; k < SHMCOLL_FRAME_BYTES; k += 3) {
		size_t m = k + 3 > SHMCOLL_FRAME_BYTES ? SHMCOLL_FRAME_BYTES - k : 3;

		cnt = shmcoll__net_op_iov(&op, iov);
		cr_assert_eq(cnt, 1, "a receive never reaches into the payload early");
		cr_assert_eq(iov[0].iov_len, SHMCOLL_FRAME_BYTES - k);
		memcpy(iov[0].iov_base, hdr + k, m);
		cr_assert_eq(shmcoll__net_op_advance(&n, &op, m, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(rx[0], 1, "the header was accepted");
	cnt = shmcoll__net_op_iov(&op, iov);
	cr_assert_eq((uintptr_t)iov[0].iov_base, 0x100000);
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, x.len - 1, err, sizeof(err)), 0);
	cr_assert_not(op.complete);
	cnt = shmcoll__net_op_iov(&op, iov);
	cr_assert_eq(iov[0].iov_len, 1);
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, 1, err, sizeof(err)), 0);
	cr_assert(op.complete);

	/* The same header again is out of sequence. */
	shmcoll__net_op_start(&n, &op, &x);
	memcpy(op.hdr, hdr, sizeof(hdr));
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, SHMCOLL_FRAME_BYTES, err, sizeof(err)),
	             -EPROTO);
	cr_assert(strstr(err, "node 0 sent frame 1 where frame 2 was due"), "%s", err);
}

/* A zero-length transfer is a header alone, and a call of none is fine. */
static int zero_body(int node, void *arg)
{
	struct shmcoll_net *n;
	int rc = 0;

	if (open_node(node, 0, &n) < 0)
		return 1;
	if (run(n, NULL, 0, 0) < 0)
		rc = 2;
	for (int k = 0; k < 20 && !rc; k++)
		rc = ring_step(n, node, 0, (uint64_t)k, NULL, NULL);
	shmcoll__net_close(n);
	return rc;
}

BOTH(zero_length_and_empty_calls, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(zero_body, NULL);
}

/* Bad transfers are the caller's error: -EINVAL, and the net is not broken.
 * 1 open, 10-14 the cases, 15 the good call after them. */
static int invalid_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t b[64];
	struct shmcoll_xfer two[2] = {{.peer = !node, .dir = XFER_SEND, .buf = b, .len = 1},
	                              {.peer = !node, .dir = XFER_SEND, .buf = b, .len = 1}};
	struct shmcoll_xfer self = {.peer = node, .dir = XFER_SEND, .buf = b, .len = 1};
	struct shmcoll_xfer nobuf = {.peer = !node, .dir = XFER_RECV, .len = 1};
	struct shmcoll_xfer dir = {.peer = !node, .dir = 7, .buf = b, .len = 1};
	int rc = 0;

	if (open_node(node, 0, &n) < 0)
		return 1;
	if (run(n, two, 2, 1) != -EINVAL)
		rc = 10;
	else if (run(n, &self, 1, 1) != -EINVAL)
		rc = 11;
	else if (run(n, &nobuf, 1, 1) != -EINVAL)
		rc = 12;
	else if (run(n, &dir, 1, 1) != -EINVAL)
		rc = 13;
	else if (run(n, two, -1, 1) != -EINVAL)
		rc = 14;
	else if (ring_step(n, node, 32, 1, b, b + 32))
		rc = 15;
	shmcoll__net_close(n);
	return rc;
}

BOTH(invalid_transfers_are_einval_and_harmless, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(invalid_body, NULL);
}

/* net_shutdown from the owner, any number of times: later calls are
 * -ECANCELED, the peer's pending receive fails at once. Node 0 shuts down;
 * node 1 receives. 1 open, 10 not -ECANCELED, 11 message, 20 node 1 not
 * -EOWNERDEAD. */
static int shutdown_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t b[8];
	struct shmcoll_xfer x = {.peer = !node, .dir = XFER_RECV, .buf = b, .len = 8};
	char err[ERRLEN];
	int rc = 0;

	if (open_node(node, 0, &n) < 0)
		return 1;
	if (node == 0) {
		shmcoll__net_shutdown(n);
		shmcoll__net_shutdown(n);
		if (shmcoll__net_run(n, &x, 1, err, sizeof(err)) != -ECANCELED)
			rc = 10;
		else if (!strstr(err, "broken earlier"))
			rc = 11;
	} else if (run(n, &x, 1, 1) != -EOWNERDEAD) {
		rc = 20;
	}
	shmcoll__net_close(n);
	return rc;
}

BOTH(shutdown_is_idempotent_and_tells_the_peer, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(shutdown_body, NULL);
}

/* ---- 8. posted calls: net_post, other work, net_wait ---- */

/* Each node posts a ring step, works on something else, then waits: the
 * bytes are exact at every size, small (through the op's own buffer) and
 * large. A second post while one is posted is -EBUSY and harms neither; a
 * wait with nothing posted is 0. 1 open, 2 alloc, 10 post, 11 not -EBUSY,
 * 12 wait, 13 bytes, 14 call word, 15 idle wait. */
static int posted_body(int node, void *arg)
{
	static const size_t lens[] = {0, 8, NET_SMALL, NET_SMALL + 1, (1 << 20) + 3};
	int to = !node, from = !node, rc = 0;
	size_t max = (1 << 20) + 3;
	struct shmcoll_net *n;
	uint8_t *sb, *rb, *busy;
	char err[ERRLEN] = "";

	(void)arg;
	if (open_node(node, 0, &n) < 0)
		return 1;
	sb = malloc(max);
	rb = malloc(max);
	busy = malloc(max);
	if (!sb || !rb || !busy)
		return 2;
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]) && !rc; k++) {
		size_t len = lens[k];
		uint64_t call = 100 + k;
		struct shmcoll_xfer x[2] = {
		    {.peer = to, .dir = XFER_SEND, .buf = sb, .len = len, .call = call},
		    {.peer = from, .dir = XFER_RECV, .buf = rb, .len = len, .call = call}};
		struct shmcoll_xfer extra = {.peer = to, .dir = XFER_SEND, .buf = sb, .len = 1};

		fill(sb, node, to, call, len);
		memset(rb, 0xee, max);
		if (shmcoll__net_post(n, x, 2, err, sizeof(err)) < 0) {
			fprintf(stderr, "net_post: %s\n", err);
			rc = 10;
		} else if (shmcoll__net_post(n, &extra, 1, err, sizeof(err)) != -EBUSY) {
			rc = 11;
		}
		memset(busy, (int)k, max); /* the other work */
		if (!rc && shmcoll__net_wait(n, err, sizeof(err)) < 0) {
			fprintf(stderr, "net_wait: %s\n", err);
			rc = 12;
		}
		if (!rc &&
		    (verify(rb, from, node, call, len) < 0 || (len < max && rb[len] != 0xee)))
			rc = 13;
		if (!rc && x[1].got != call)
			rc = 14;
	}
	if (!rc && shmcoll__net_wait(n, err, sizeof(err)) != 0)
		rc = 15;
	shmcoll__net_close(n);
	free(sb);
	free(rb);
	free(busy);
	return rc;
}

BOTH(posted_calls_move_exact_bytes, .timeout = 120)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(posted_body, NULL);
}

/* Posted calls finished by polling net_test instead of waiting, as a task advanced without
 * blocking does: the same exact bytes, a test with nothing posted is done at once, and a
 * test of a call whose peer never answers ends in -ETIMEDOUT at the deadline instead of
 * polling forever. 1 open, 2 alloc, 10 post, 11 test failed, 12 bytes, 13 call word, 14
 * idle test, 20 no timeout. */
static int tested_body(int node, void *arg)
{
	static const size_t lens[] = {0, 8, NET_SMALL + 1, (1 << 20) + 3, BIG};
	int to = !node, from = !node, rc = 0, done = 0;
	size_t max = BIG;
	struct shmcoll_net *n;
	uint8_t *sb, *rb;
	char err[ERRLEN] = "";

	(void)arg;
	if (open_node(node, 0, &n) < 0)
		return 1;
	sb = malloc(max);
	rb = malloc(max);
	if (!sb || !rb)
		return 2;
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]) && !rc; k++) {
		size_t len = lens[k];
		uint64_t call = 200 + k;
		struct shmcoll_xfer x[2] = {
		    {.peer = to, .dir = XFER_SEND, .buf = sb, .len = len, .call = call},
		    {.peer = from, .dir = XFER_RECV, .buf = rb, .len = len, .call = call}};

		fill(sb, node, to, call, len);
		memset(rb, 0xee, max);
		if (shmcoll__net_post(n, x, 2, err, sizeof(err)) < 0) {
			fprintf(stderr, "net_post: %s\n", err);
			rc = 10;
		}
		for (done = 0; !rc && !done;) {
			if (shmcoll__net_test(n, &done, err, sizeof(err)) < 0) {
				fprintf(stderr, "net_test: %s\n", err);
				rc = 11;
			}
			if (!done)
				sched_yield();
		}
		if (!rc &&
		    (verify(rb, from, node, call, len) < 0 || (len < max && rb[len] != 0xee)))
			rc = 12;
		if (!rc && x[1].got != call)
			rc = 13;
	}
	if (!rc && (shmcoll__net_test(n, &done, err, sizeof(err)) != 0 || !done))
		rc = 14;
	/* A receive nobody answers: node 1 posts it and polls; node 0 sends nothing and
	 * waits for node 1 to be done before it goes. */
	if (!rc && node == 1) {
		struct shmcoll_xfer x = {
		    .peer = 0, .dir = XFER_RECV, .buf = rb, .len = 8, .call = 9};
		int got = 0;

		if (shmcoll__net_post(n, &x, 1, err, sizeof(err)) < 0)
			rc = 10;
		for (done = 0; !rc && !done;) {
			got = shmcoll__net_test(n, &done, err, sizeof(err));
			if (!done)
				usleep(1000);
		}
		if (!rc && got != -ETIMEDOUT) {
			fprintf(stderr, "net_test of an unanswered receive: %d %s\n", got, err);
			rc = 20;
		}
	}
	if (node == 0)
		usleep(1500000);
	shmcoll__net_close(n);
	free(sb);
	free(rb);
	return rc;
}

BOTH(tested_calls_move_exact_bytes_and_time_out, .timeout = 120)
{
	mesh_init(2, kind, SEC);
	run_all(tested_body, NULL);
}

/* A node posts a receive nobody answers, then shuts the net down (as a
 * failure elsewhere does): the wait fails at once, nothing is left in
 * flight, and a posted call the owner never waits for is reaped by
 * net_close. Node 1 sees the connection go. 1 open, 10 post, 11 wait not
 * failed, 12 slow, 13 stray CQE, 14 second post, 20 node 1 not -EOWNERDEAD. */
static int abandoned_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t *b = malloc(1 << 20);
	struct shmcoll_xfer x = {.peer = !node, .dir = XFER_RECV, .buf = b, .len = 1 << 20};
	char err[ERRLEN];
	int64_t t0;
	int rc = 0;

	(void)arg;
	if (!b || open_node(node, 0, &n) < 0)
		return 1;
	if (node == 0) {
		if (shmcoll__net_post(n, &x, 1, err, sizeof(err)) < 0)
			return 10;
		t0 = shmcoll__now_ns();
		shmcoll__net_shutdown(n);
		if (shmcoll__net_wait(n, err, sizeof(err)) >= 0)
			rc = 11;
		else if (shmcoll__now_ns() - t0 > 10 * SEC)
			rc = 12; /* a hang bound, far beyond any scheduling delay */
		else if (late_cqes(n))
			rc = 13;
		else if (shmcoll__net_post(n, &x, 1, err, sizeof(err)) != -ECANCELED)
			rc = 14;
	} else if (run(n, &x, 1, 1) != -EOWNERDEAD) {
		rc = 20;
	}
	shmcoll__net_close(n);
	free(b);
	return rc;
}

BOTH(posted_call_fails_at_once_when_the_net_breaks, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(abandoned_body, NULL);
}

/* net_close with a call still posted: it is reaped before the buffers may go
 * (AddressSanitizer would catch a late write into the freed buffer). Node 1
 * sends late, after node 0 has closed. 1 open, 10 post, 20 node 1. */
static int close_posted_body(int node, void *arg)
{
	struct shmcoll_net *n;
	uint8_t *b = malloc(4096);
	struct shmcoll_xfer x = {.peer = !node, .dir = XFER_RECV, .buf = b, .len = 4096};
	struct shmcoll_xfer s = {.peer = !node, .dir = XFER_SEND, .buf = b, .len = 4096};
	char err[ERRLEN];
	int rc = 0;

	(void)arg;
	if (!b || open_node(node, 0, &n) < 0)
		return 1;
	if (node == 0) {
		if (shmcoll__net_post(n, &x, 1, err, sizeof(err)) < 0)
			rc = 10;
		shmcoll__net_close(n);
		free(b);
		return rc;
	}
	usleep(100000);
	memset(b, 1, 4096);
	/* The send may or may not get through before node 0 is gone; either
	 * way it must not hang. */
	rc = run(n, &s, 1, 1);
	shmcoll__net_close(n);
	free(b);
	return rc == 0 || rc == -EOWNERDEAD ? 0 : 20;
}

BOTH(close_reaps_a_posted_call, .timeout = 60)
{
	mesh_init(2, kind, 30 * SEC);
	run_all(close_posted_body, NULL);
}

/* ---- 9. the small-receive arithmetic alone ---- */

/* A small receive reads header and payload in one piece into the op's own
 * buffer, checks the header as soon as it is in (even mid-piece), and only
 * then, whole, copies the payload to the caller's buffer. */
Test(net, small_receive_arithmetic)
{
	uint32_t tx[2] = {0}, rx[2] = {0};
	struct shmcoll_net n = {.nnodes = 2, .node = 0, .tx_seq = tx, .rx_seq = rx};
	struct net_op op = {.peer = 1};
	uint8_t payload[100], dst[100], frame[SHMCOLL_FRAME_BYTES + 100];
	struct shmcoll_xfer x = {.peer = 1, .len = sizeof(payload), .call = 7, .buf = payload};
	struct iovec iov[2];
	char err[ERRLEN];
	int cnt;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	/* Node 1 sends: its header, then the payload. */
	n.node = 1;
	op.peer = 0;
	op.dir = x.dir = XFER_SEND;
	x.peer = 0;
	shmcoll__net_op_start(&n, &op, &x);
	memcpy(frame, op.hdr, SHMCOLL_FRAME_BYTES);
	memcpy(frame + SHMCOLL_FRAME_BYTES, payload, sizeof(payload));

	/* Node 0 receives it in three pieces: 20 bytes, 40 (across the
	 * header's end), the rest. */
	n.node = 0;
	op.peer = 1;
	op.dir = x.dir = XFER_RECV;
	x.peer = 1;
	x.buf = dst;
	memset(dst, 0xee, sizeof(dst));
	shmcoll__net_op_start(&n, &op, &x);
	cnt = shmcoll__net_op_iov(&op, iov);
	cr_assert_eq(cnt, 1);
	cr_assert_eq((uint8_t *)iov[0].iov_base, op.hdr, "into the op's own buffer");
	cr_assert_eq(iov[0].iov_len, sizeof(frame), "header and payload in one piece");
	memcpy(iov[0].iov_base, frame, 20);
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, 20, err, sizeof(err)), 0);
	cr_assert_eq(rx[1], 0, "no check before the header is whole");
	cnt = shmcoll__net_op_iov(&op, iov);
	cr_assert_eq((uint8_t *)iov[0].iov_base, op.hdr + 20);
	cr_assert_eq(iov[0].iov_len, sizeof(frame) - 20);
	memcpy(iov[0].iov_base, frame + 20, 40);
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, 40, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rx[1], 1, "checked as soon as it was whole");
	cr_assert_not(op.complete);
	cr_assert_eq(dst[0], 0xee, "the caller's buffer waits for the whole payload");
	cnt = shmcoll__net_op_iov(&op, iov);
	memcpy(iov[0].iov_base, frame + 60, sizeof(frame) - 60);
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, sizeof(frame) - 60, err, sizeof(err)), 0);
	cr_assert(op.complete);
	cr_assert(memcmp(dst, payload, sizeof(payload)) == 0, "the payload arrived changed");

	/* A frame announcing another length fails its check, and the bytes
	 * that came along with its header never reach the caller. */
	x.len = 50;
	memset(dst, 0xee, sizeof(dst));
	n.node = 1;
	op.peer = 0;
	op.dir = XFER_SEND;
	x.len = sizeof(payload);
	shmcoll__net_op_start(&n, &op, &x);
	memcpy(frame, op.hdr, SHMCOLL_FRAME_BYTES);
	n.node = 0;
	op.peer = 1;
	op.dir = XFER_RECV;
	x.len = 50;
	shmcoll__net_op_start(&n, &op, &x);
	memcpy(op.hdr, frame, SHMCOLL_FRAME_BYTES + 50);
	cr_assert_eq(shmcoll__net_op_advance(&n, &op, SHMCOLL_FRAME_BYTES + 50, err, sizeof(err)),
	             -EPROTO);
	cr_assert(strstr(err, "announced 100 bytes where 50 were posted"), "%s", err);
	for (size_t i = 0; i < sizeof(dst); i++)
		cr_assert_eq(dst[i], 0xee, "byte %zu of the caller's buffer was written", i);
}
