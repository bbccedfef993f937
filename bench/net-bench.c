/* net-bench.c - loopback throughput of the leaders' transport (lib/net.c):
 * two forked nodes on 127.0.0.1 exchange one message each way per call (the
 * 2-node ring step), for several sizes. Reports, per size, the median over
 * RUNS runs of ITERS calls: microseconds per call and GB/s per direction
 * (payload bytes one node sent / time). Asserts nothing.
 *
 * usage: net-bench [uring|poll] [zc-min-bytes|off] [runs] [spin-us]
 *   zc-min: sets SHMCOLL_NET_ZC_MIN (io_uring only); "off" leaves the default.
 *   spin-us: how long a wait spins before it sleeps (shmcoll__net_set_spin);
 *   0, the default, sleeps at once. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/net/net.h"
#include "shm/wait.h"

#define RUNS_MAX 31

static const size_t sizes[] = {8, 64 << 10, 1 << 20, 4 << 20, 16 << 20};

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int node_main(int node, int kind, int lfd, char (*addrs)[SHMCOLL_ADDR_MAX], int runs,
                     long spin_us)
{
	struct shmcoll_net_cfg cfg = {.nnodes = 2,
	                              .node = node,
	                              .nproc = 1,
	                              .token = "bench",
	                              .addrs = (const char(*)[SHMCOLL_ADDR_MAX])addrs,
	                              .listen_fd = lfd,
	                              .timeout_ns = 60ll * 1000000000,
	                              .kind = kind};
	struct shmcoll_net *n;
	char err[256];
	size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
	uint8_t *sb = malloc(max), *rb = malloc(max);
	int rc;

	if (!sb || !rb)
		return 1;
	memset(sb, node + 1, max);
	memset(rb, 0, max);
	rc = shmcoll__net_open(&cfg, &n, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "node %d: %s\n", node, err);
		return 1;
	}
	shmcoll__net_set_spin(n, spin_us * 1000);
	if (node == 0)
		printf("# backend %s, SHMCOLL_NET_ZC_MIN=%s, spin %ld us, median of %d runs\n"
		       "# %10s %8s %12s %10s\n",
		       shmcoll__net_kind_name(n),
		       getenv("SHMCOLL_NET_ZC_MIN") ? getenv("SHMCOLL_NET_ZC_MIN") : "(default)",
		       spin_us, runs, "bytes", "calls", "us/call", "GB/s/dir");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t len = sizes[s];
		long iters = (long)((512ul << 20) / len);
		double t[RUNS_MAX];
		struct shmcoll_xfer x[2] = {
		    {.peer = !node, .dir = XFER_SEND, .buf = sb, .len = len, .call = len},
		    {.peer = !node, .dir = XFER_RECV, .buf = rb, .len = len, .call = len}};

		if (iters > 20000)
			iters = 20000;
		if (iters < 20)
			iters = 20;
		for (int r = -1; r < runs; r++) { /* run -1 warms up */
			int64_t t0 = shmcoll__now_ns();

			for (long i = 0; i < iters; i++) {
				rc = shmcoll__net_run(n, x, 2, err, sizeof(err));
				if (rc < 0) {
					fprintf(stderr, "node %d: %s\n", node, err);
					return 1;
				}
			}
			if (r >= 0)
				t[r] = (double)(shmcoll__now_ns() - t0) / (double)iters;
		}
		qsort(t, (size_t)runs, sizeof(t[0]), cmp);
		if (node == 0)
			printf("  %10zu %8ld %12.2f %10.3f\n", len, iters, t[runs / 2] / 1e3,
			       (double)len / t[runs / 2]);
		fflush(stdout); /* the node leaves with _exit */
	}
	shmcoll__net_close(n);
	free(sb);
	free(rb);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char addrs[2][SHMCOLL_ADDR_MAX];
	int lfd[2], kind = NET_URING, runs = 7, st, bad = 0;
	long spin_us = 0;
	pid_t pid[2];

	if (argc > 1)
		kind = !strcmp(argv[1], "poll") ? NET_POLL : NET_URING;
	if (argc > 2 && strcmp(argv[2], "off"))
		setenv("SHMCOLL_NET_ZC_MIN", argv[2], 1);
	if (argc > 3)
		runs = atoi(argv[3]);
	if (runs < 1 || runs > RUNS_MAX)
		runs = 7;
	if (argc > 4)
		spin_us = atol(argv[4]);
	for (int i = 0; i < 2; i++) {
		socklen_t sl = sizeof(sa);

		lfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sa.sin_port = 0;
		if (lfd[i] < 0 || bind(lfd[i], (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    listen(lfd[i], 4) < 0 || getsockname(lfd[i], (struct sockaddr *)&sa, &sl) < 0) {
			perror("net-bench: listener");
			return 1;
		}
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%u", ntohs(sa.sin_port));
	}
	fflush(NULL);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(lfd[!i]);
			_exit(node_main(i, kind, lfd[i], addrs, runs, spin_us));
		}
	}
	for (int i = 0; i < 2; i++)
		if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	return bad;
}
