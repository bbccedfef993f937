/* outprog.c - a rank for the launcher's output and environment tests
 * (tests/test_launcher.c), run by shmcoll-run; it does not use the library.
 *
 *   outprog lines N MAXLEN LONG   N lines to stdout and N to stderr, alternating,
 *                                 each written in many small write()s; line i is
 *                                 "<o|e> <rank> <i> <len> " and len payload bytes
 *                                 (payload_byte()), len from 1 to MAXLEN, or LONG
 *                                 for line N/2 when LONG > 0; the last line of
 *                                 each stream has no newline
 *   outprog torchenv              prints torchrun's variables on one line; rank 0
 *                                 listens on MASTER_PORT (as torch's store does)
 *                                 and every other rank connects to it at
 *                                 MASTER_ADDR and sends its rank
 *
 * Exit codes name the failed step: 2 usage, 3 a write, 4 a variable missing,
 * 5 rank 0's listen, 6 its accept, 7 a connect. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_USAGE = 2, EXIT_WRITE, EXIT_VAR, EXIT_LISTEN, EXIT_ACCEPT, EXIT_CONNECT };

/* Byte j of line i of rank's payload; test_launcher.c has the same. */
static char payload_byte(int rank, int i, long j)
{
	return (char)('a' + (rank * 7 + i * 13 + j) % 26);
}

static uint64_t next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* Writes len bytes in pieces of 1 to 3000 bytes, yielding now and then, so
 * that the ranks' pieces meet in the launcher's pipes. */
static void write_pieces(int fd, const char *p, size_t len, uint64_t *s)
{
	while (len > 0) {
		size_t piece = 1 + (size_t)(next(s) % 3000);
		ssize_t n;

		if (piece > len)
			piece = len;
		n = write(fd, p, piece);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			exit(EXIT_WRITE);
		}
		p += n;
		len -= (size_t)n;
		if (next(s) % 4 == 0)
			sched_yield();
	}
}

static int mode_lines(int rank, int n, long maxlen, long longlen)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
	size_t cap = (size_t)(maxlen > longlen ? maxlen : longlen) + 64;
	char *line = malloc(cap);
	int i, k;

	if (!line)
		return EXIT_WRITE;
	for (i = 0; i < n; i++) {
		for (k = 0; k < 2; k++) {
			long len = i == n / 2 && longlen > 0 ? longlen
			                                     : 1 + (long)(next(&s) % maxlen),
			     j;
			int h = snprintf(line, cap, "%c %d %d %ld ", k ? 'e' : 'o', rank, i, len);

			for (j = 0; j < len; j++)
				line[h + j] = payload_byte(rank, i, j);
			line[h + len] = '\n';
			write_pieces(k ? STDERR_FILENO : STDOUT_FILENO, line,
			             (size_t)(h + len) + (i < n - 1), &s);
		}
	}
	free(line);
	return 0;
}

static const char *var(const char *name)
{
	const char *v = getenv(name);

	return v ? v : "-";
}

static int mode_torchenv(void)
{
	static const char *const names[] = {"RANK",
	                                    "WORLD_SIZE",
	                                    "LOCAL_RANK",
	                                    "LOCAL_WORLD_SIZE",
	                                    "GROUP_RANK",
	                                    "GROUP_WORLD_SIZE",
	                                    "MASTER_ADDR",
	                                    "MASTER_PORT",
	                                    "TORCHELASTIC_RUN_ID",
	                                    "TORCHELASTIC_RESTART_COUNT",
	                                    "TORCHELASTIC_USE_AGENT_STORE",
	                                    "SHMCOLL_RANK",
	                                    "SHMCOLL_SIZE",
	                                    "SHMCOLL_LOCAL_RANK",
	                                    "SHMCOLL_NODE_RANK"};
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	int i, rank, size, fd, one = 1;
	char line[2048];
	size_t at = 0;

	for (i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		at += (size_t)snprintf(line + at, sizeof(line) - at, "%s%s=%s", i ? " " : "",
		                       names[i], var(names[i]));
	printf("%s\n", line);
	fflush(stdout);
	if (!getenv("RANK") || !getenv("WORLD_SIZE") || !getenv("MASTER_ADDR") ||
	    !getenv("MASTER_PORT"))
		return EXIT_VAR;
	rank = atoi(getenv("RANK"));
	size = atoi(getenv("WORLD_SIZE"));
	if (rank == 0) {
		/* What torch's TCPStore does: listen on the port, on every address. */
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port = htons((uint16_t)atoi(getenv("MASTER_PORT"))),
		                         .sin_addr.s_addr = htonl(INADDR_ANY)};

		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)
			return EXIT_LISTEN;
		for (i = 1; i < size; i++) {
			int c = accept(fd, NULL, NULL), r = -1;

			if (c < 0 || read(c, &r, sizeof(r)) != (ssize_t)sizeof(r) || r < 1 ||
			    r >= size)
				return EXIT_ACCEPT;
			close(c);
		}
		close(fd);
		return 0;
	}
	if (getaddrinfo(getenv("MASTER_ADDR"), getenv("MASTER_PORT"), &hints, &ai) != 0)
		return EXIT_CONNECT;
	/* Rank 0 may not listen yet: retry, for at most a minute. */
	for (i = 0; i < 6000; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			if (write(fd, &rank, sizeof(rank)) != (ssize_t)sizeof(rank))
				return EXIT_CONNECT;
			close(fd);
			freeaddrinfo(ai);
			return 0;
		}
		if (fd >= 0)
			close(fd);
		nanosleep(&ts, NULL);
	}
	return EXIT_CONNECT;
}

int main(int argc, char **argv)
{
	const char *r = getenv("SHMCOLL_RANK");
	int rank = r ? atoi(r) : 0;

	if (argc == 5 && !strcmp(argv[1], "lines") && atoi(argv[2]) > 0 && atol(argv[3]) > 0)
		return mode_lines(rank, atoi(argv[2]), atol(argv[3]), atol(argv[4]));
	if (argc == 2 && !strcmp(argv[1], "torchenv"))
		return mode_torchenv();
	fprintf(stderr, "usage: outprog lines N MAXLEN LONG | outprog torchenv\n");
	return EXIT_USAGE;
}
