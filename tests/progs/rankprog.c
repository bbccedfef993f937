/* rankprog.c - the rank program test_launcher runs under shmcoll-run: one mode
 * per behaviour the launcher must handle (success, a rank that exits non-zero,
 * a rank killed by a signal, signal forwarding, the environment it sets, ranks
 * that ignore SIGTERM, a rank that dies before attaching, processes a rank
 * leaves behind), and for multi-node jobs, without the library: the
 * environment and the leader's socket (netenv), and a rank that fails on cue
 * (netfail). */
#include <shmcoll.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Exit codes: which check failed. */
#define EXIT_USAGE   2
#define EXIT_WRONG   3 /* allreduce gave a wrong result */
#define EXIT_CALL    4 /* a shmcoll call failed */
#define EXIT_BARRIER 5 /* a barrier completed although a rank never arrived */
#define EXIT_NETENV  6 /* netenv: the environment or the inherited sockets are wrong */
#define COUNT        16

static int env_int(const char *name, int dflt)
{
	const char *s = getenv(name);

	return s ? atoi(s) : dflt;
}

/* With SHMCOLL_TEST_PIDDIR set, records "<pid> <pgid> <job>" in
 * $SHMCOLL_TEST_PIDDIR/rank.<rank>, so the test can check that every rank is
 * gone and no arena is left. Written under a temporary name and renamed, so a
 * reader never sees half a file. */
static void write_pidfile(void)
{
	const char *dir = getenv("SHMCOLL_TEST_PIDDIR");
	const char *job = getenv("SHMCOLL_JOB");
	char tmp[4096], path[4096], line[256];
	int fd, n, rank = env_int("SHMCOLL_RANK", 0);

	if (!dir)
		return;
	n = snprintf(line, sizeof(line), "%ld %ld %s\n", (long)getpid(), (long)getpgrp(),
	             job ? job : "-");
	snprintf(tmp, sizeof(tmp), "%s/.rank.%d.tmp", dir, rank);
	snprintf(path, sizeof(path), "%s/rank.%d", dir, rank);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd) < 0 || rename(tmp, path) < 0) {
		fprintf(stderr, "rankprog: cannot write %s: %s\n", path, strerror(errno));
		exit(EXIT_USAGE);
	}
}

/* With SHMCOLL_TEST_PIDDIR set, writes "<pid>\n" to $SHMCOLL_TEST_PIDDIR/<what>.<rank>
 * (atomically, like the pidfile): tells the test this rank got that far. */
static void write_mark(const char *what, pid_t pid)
{
	const char *dir = getenv("SHMCOLL_TEST_PIDDIR");
	char tmp[4096], path[4096], line[32];
	int fd, n, rank = env_int("SHMCOLL_RANK", 0);

	if (!dir)
		return;
	n = snprintf(line, sizeof(line), "%ld\n", (long)pid);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.%ld.tmp", dir, what, rank, (long)getpid());
	snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, line, (size_t)n) != n || close(fd) < 0 || rename(tmp, path) < 0) {
		fprintf(stderr, "rankprog: cannot write %s: %s\n", path, strerror(errno));
		_exit(EXIT_USAGE);
	}
}

static void call_failed(const char *what, int err, const shmcoll_comm *comm)
{
	fprintf(stderr, "rankprog: rank %d: %s: %s (%s)\n", env_int("SHMCOLL_RANK", -1), what,
	        shmcoll_strerror(err), shmcoll_last_error(comm));
	exit(EXIT_CALL);
}

static shmcoll_comm *init(void)
{
	shmcoll_comm *comm = NULL;
	int err = shmcoll_init(&comm);

	if (err < 0)
		call_failed("shmcoll_init", err, NULL);
	return comm;
}

static int mode_ok(void)
{
	shmcoll_comm *comm = init();
	int rank = shmcoll_comm_rank(comm), size = shmcoll_comm_size(comm);
	int32_t send[COUNT], recv[COUNT];
	int32_t want = (int32_t)(size * (size + 1) / 2);
	int i, err;

	for (i = 0; i < COUNT; i++) {
		send[i] = rank + 1;
		recv[i] = -1;
	}
	err = shmcoll_allreduce(send, recv, COUNT, SHMCOLL_INT32, SHMCOLL_SUM, comm);
	if (err < 0)
		call_failed("shmcoll_allreduce", err, comm);
	for (i = 0; i < COUNT; i++) {
		if (recv[i] != want) {
			fprintf(stderr, "rankprog: rank %d: element %d is %d, want %d\n", rank, i,
			        (int)recv[i], (int)want);
			return EXIT_WRONG;
		}
	}
	err = shmcoll_barrier(comm);
	if (err < 0)
		call_failed("shmcoll_barrier", err, comm);
	err = shmcoll_comm_destroy(comm);
	if (err < 0)
		call_failed("shmcoll_comm_destroy", err, NULL);
	printf("rank %d of %d ok\n", rank, size);
	return 0;
}

/* The ranks that stay behind when one fails: the barrier cannot complete. If
 * the library notices the dead peer and fails the barrier, they still wait to
 * be stopped by the launcher, so the failing rank is the job's only failure. */
static int wait_in_barrier(shmcoll_comm *comm, int missing)
{
	int err = shmcoll_barrier(comm);

	if (err == 0) {
		fprintf(stderr, "rankprog: rank %d: barrier completed without rank %d\n",
		        shmcoll_comm_rank(comm), missing);
		return EXIT_BARRIER;
	}
	fprintf(stderr, "rankprog: rank %d: barrier: %s; waiting to be stopped\n",
	        shmcoll_comm_rank(comm), shmcoll_strerror(err));
	for (;;)
		pause();
}

static int mode_fail(int victim, int code)
{
	shmcoll_comm *comm = init();

	if (shmcoll_comm_rank(comm) == victim)
		exit(code);
	return wait_in_barrier(comm, victim);
}

static int mode_kill(int victim)
{
	shmcoll_comm *comm = init();

	if (shmcoll_comm_rank(comm) == victim)
		raise(SIGKILL);
	return wait_in_barrier(comm, victim);
}

static void forever(void)
{
	for (;;)
		pause();
}

/* Every rank attaches, then ignores SIGTERM and SIGINT and waits to be
 * killed: only the launcher's SIGKILL can end the job. */
static int mode_stubborn(void)
{
	init();
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	write_mark("stubborn", getpid());
	forever();
	return 0;
}

/* Waits (at most 60 s) until /dev/shm holds an arena of this job: a name
 * starting "shmcoll.<uid>.<job>." (launcher job ids are not changed by the
 * name's sanitising). */
static void wait_for_arena(void)
{
	const char *job = getenv("SHMCOLL_JOB");
	struct timespec ms = {.tv_nsec = 1000000};
	char prefix[256];
	struct dirent *e;
	int i, found = 0;
	DIR *d;

	snprintf(prefix, sizeof(prefix), "shmcoll.%u.%s.", (unsigned)getuid(), job ? job : "");
	for (i = 0; i < 60000 && !found; i++) {
		d = opendir("/dev/shm");
		while (d && !found && (e = readdir(d)) != NULL)
			found = !strncmp(e->d_name, prefix, strlen(prefix));
		if (d)
			closedir(d);
		if (!found)
			nanosleep(&ms, NULL);
	}
}

/* The victim exits with code before it attaches, once rank 0 has created the
 * arena; the others attach (rank 0
 * creates the arena) and wait, so the arena's name is never unlinked by the
 * ranks: the launcher must remove it. */
static int mode_early(int victim, int code)
{
	shmcoll_comm *comm;

	if (env_int("SHMCOLL_RANK", -1) == victim) {
		wait_for_arena();
		exit(code);
	}
	comm = init();
	return wait_in_barrier(comm, victim);
}

/* Each rank starts a process that leaves the ranks' process group (setsid),
 * ignores SIGTERM and sleeps, records its pid as orphan.<rank>; once every
 * rank's is recorded (a barrier), the rank exits with code: the launcher must
 * still stop and reap them. */
static int mode_orphan(int code)
{
	shmcoll_comm *comm = init();
	int fds[2], err;
	char c;
	pid_t pid;

	if (pipe(fds) < 0)
		return EXIT_USAGE;
	pid = fork();
	if (pid < 0)
		return EXIT_USAGE;
	if (pid == 0) {
		close(fds[0]);
		setsid();
		signal(SIGTERM, SIG_IGN);
		write_mark("orphan", getpid());
		close(fds[1]);
		forever();
	}
	close(fds[1]);
	/* The orphan has recorded itself once the pipe reads end of file. */
	while (read(fds[0], &c, 1) < 0 && errno == EINTR)
		;
	err = shmcoll_barrier(comm);
	if (err < 0)
		call_failed("shmcoll_barrier", err, comm);
	if (code == 0)
		shmcoll_comm_destroy(comm);
	return code;
}

static int mode_sleep(void)
{
	struct timespec left = {.tv_sec = 60};

	while (nanosleep(&left, &left) < 0 && errno == EINTR)
		;
	return 0;
}

static int mode_env(void)
{
	const char *rank = getenv("SHMCOLL_RANK");
	const char *size = getenv("SHMCOLL_SIZE");
	const char *job = getenv("SHMCOLL_JOB");

	if (!rank || !size || !job) {
		fprintf(stderr, "rankprog: SHMCOLL_RANK, SHMCOLL_SIZE or SHMCOLL_JOB is unset\n");
		return EXIT_USAGE;
	}
	printf("%s %s %s\n", rank, size, job);
	return 0;
}

/* The "ip:port" a TCP socket is bound to; 0 if fd is no IPv4/IPv6 socket. */
static int sock_addr(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return 0;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(s->sin_port));
		return 1;
	}
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s->sin6_port));
		return 1;
	}
	return 0;
}

/* Entry i (0-based) of the comma-separated list s, into buf. */
static int list_item(const char *s, int i, char *buf, size_t len)
{
	size_t n;

	for (; i > 0 && s; i--) {
		s = strchr(s, ',');
		s = s ? s + 1 : NULL;
	}
	if (!s)
		return 0;
	n = strcspn(s, ",");
	if (n >= len)
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 1;
}

/* Prints one line of the multi-node environment and checks the sockets this
 * rank inherited: the leader (local rank 0) exactly one TCP socket, listening,
 * at its entry of SHMCOLL_NODES and numbered SHMCOLL_NET_FD; the others none. */
/* This process's Cpus_allowed_list from /proc/self/status, or "-". */
static const char *cpus_allowed(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[256];

	snprintf(buf, len, "-");
	while (f && fgets(l, sizeof(l), f))
		if (!strncmp(l, "Cpus_allowed_list:", 18)) {
			snprintf(buf, len, "%s", l + 18 + strspn(l + 18, " \t"));
			buf[strcspn(buf, "\n")] = '\0';
		}
	if (f)
		fclose(f);
	return buf;
}

static int mode_netenv(void)
{
	static const char *names[] = {"SHMCOLL_RANK",       "SHMCOLL_SIZE",   "SHMCOLL_LOCAL_RANK",
	                              "SHMCOLL_LOCAL_SIZE", "SHMCOLL_NNODES", "SHMCOLL_NODE_RANK",
	                              "SHMCOLL_JOB",        "SHMCOLL_TOKEN",  "SHMCOLL_NODES",
	                              "SHMCOLL_NET_FD"};
	const char *netfd = getenv("SHMCOLL_NET_FD"), *nodes = getenv("SHMCOLL_NODES");
	char line[8192], want[64], got[64];
	int i, n = 0, tcp = 0, fd = -1, local = env_int("SHMCOLL_LOCAL_RANK", -1);
	struct dirent *e;
	DIR *d;

	for (i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
		const char *v = getenv(names[i]);

		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s%s=%s", i ? " " : "", names[i],
		              v ? v : "-");
	}
	n += snprintf(line + n, sizeof(line) - (size_t)n, " CPUS=%s",
	              cpus_allowed(got, sizeof(got)));
	printf("%s\n", line);
	fflush(stdout);
	if ((local == 0) != (netfd != NULL)) {
		fprintf(stderr, "rankprog: local rank %d, SHMCOLL_NET_FD %s\n", local,
		        netfd ? netfd : "unset");
		return EXIT_NETENV;
	}
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d)) != NULL) {
		int f = atoi(e->d_name);

		if (f > 2 && f != dirfd(d) && sock_addr(f, got, sizeof(got))) {
			tcp++;
			fd = f;
		}
	}
	if (d)
		closedir(d);
	if (!netfd) {
		if (tcp) {
			fprintf(stderr, "rankprog: rank %s inherited %d TCP sockets\n",
			        getenv("SHMCOLL_RANK"), tcp);
			return EXIT_NETENV;
		}
		return 0;
	}
	if (tcp != 1 || fd != atoi(netfd)) {
		fprintf(stderr, "rankprog: the leader has %d TCP sockets, SHMCOLL_NET_FD=%s\n", tcp,
		        netfd);
		return EXIT_NETENV;
	}
	{
		int on = 0;
		socklen_t sl = sizeof(on);

		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &sl) < 0 || !on) {
			fprintf(stderr, "rankprog: SHMCOLL_NET_FD %d is not listening\n", fd);
			return EXIT_NETENV;
		}
	}
	sock_addr(fd, got, sizeof(got));
	if (!nodes || !list_item(nodes, env_int("SHMCOLL_NODE_RANK", -1), want, sizeof(want)) ||
	    strcmp(want, got)) {
		fprintf(stderr, "rankprog: the leader listens on %s, SHMCOLL_NODES says %s\n", got,
		        nodes ? nodes : "-");
		return EXIT_NETENV;
	}
	return 0;
}

/* Every rank records itself (pidfile) and sleeps; rank victim waits until the
 * file $SHMCOLL_TEST_PIDDIR/go exists (at most 60 s), then exits with code,
 * or kills itself with SIGKILL if code is "kill". */
static int mode_netfail(int victim, const char *code)
{
	const char *dir = getenv("SHMCOLL_TEST_PIDDIR");
	struct timespec ms = {.tv_nsec = 1000000};
	char go[4096];
	struct stat st;
	int i;

	if (env_int("SHMCOLL_RANK", -1) != victim)
		return mode_sleep();
	snprintf(go, sizeof(go), "%s/go", dir ? dir : ".");
	for (i = 0; i < 60000 && stat(go, &st) < 0; i++)
		nanosleep(&ms, NULL);
	if (!strcmp(code, "kill"))
		raise(SIGKILL);
	return atoi(code);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	write_pidfile();
	if (!strcmp(mode, "ok") && argc == 2)
		return mode_ok();
	if (!strcmp(mode, "fail") && argc == 4)
		return mode_fail(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(mode, "kill") && argc == 3)
		return mode_kill(atoi(argv[2]));
	if (!strcmp(mode, "sleep") && argc == 2)
		return mode_sleep();
	if (!strcmp(mode, "env") && argc == 2)
		return mode_env();
	if (!strcmp(mode, "stubborn") && argc == 2)
		return mode_stubborn();
	if (!strcmp(mode, "early") && argc == 4)
		return mode_early(atoi(argv[2]), atoi(argv[3]));
	if (!strcmp(mode, "orphan") && argc == 3)
		return mode_orphan(atoi(argv[2]));
	if (!strcmp(mode, "netenv") && argc == 2)
		return mode_netenv();
	if (!strcmp(mode, "netfail") && argc == 4)
		return mode_netfail(atoi(argv[2]), argv[3]);
	fprintf(stderr, "usage: rankprog ok | fail RANK CODE | kill RANK | sleep | env | stubborn "
	                "| early RANK CODE | orphan CODE | netenv | netfail RANK CODE|kill\n");
	return EXIT_USAGE;
}
