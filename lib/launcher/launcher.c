/* launcher.c - shmcoll-run: starts the P ranks of one job on this node with the
 * environment shmcoll_init() reads (and torchrun's), passes their output on in
 * whole lines, forwards signals to them, stops the job when a rank fails, and
 * removes the job's arena once every rank and every process they left is gone;
 * --cleanup removes the arenas of dead jobs. With --nnodes, one launcher per
 * node: they meet (rendezvous.c), then each supervises its node's ranks and tells
 * node 0 how they ended, and node 0 tells all how the job ended. */
#include "shmcoll.h"
#include "lib/launcher/rendezvous.h"
#include "lib/net/frame.h"
#include "shm/arena.h"
#include "shm/name.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG                  "shmcoll-run"
#define MAX_RANKS             4096
#define KILL_GRACE_MS         500 /* SIGTERM -> SIGKILL: the others are gone within a second */
#define KILL_AGAIN_MS         100 /* then SIGKILL again for whatever appeared meanwhile */
#define EXIT_FAILURE_LAUNCHER 1
#define EXIT_USAGE            2
#define EXIT_EXEC             127
#define CONNECT_TIMEOUT_MS    60000 /* default deadline of the rendezvous */
#define CTL_SEND_MS           2000  /* a 36-byte control frame: a socket buffer takes it */
#define LINGER_MS             2000  /* node 0 after FINAL: waits this long for peers to close */
#define FINAL_LEN             4     /* FINAL's payload: the node whose failure decided */
#define STATUS_MAX            255
#define LINE_CAP              65536          /* a rank's line longer than this goes out in pieces */
#define STAGE_CAP             (2 * LINE_CAP) /* one stream's lines as written, tags added */
#define TAG_MAX               40             /* "[4095]<stderr>: " */
#define DRAIN_MS              200 /* after the job's last process: pipes held by others */
#define RUN_ID_BITS           48  /* TORCHELASTIC_RUN_ID: 12 hex digits */

/* One control connection (to node 0, or node 0's to node j) in the wait loop. */
struct peer {
	int fd;        /* -1 once closed */
	uint32_t sent; /* frames sent (the seq of the last) */
	uint32_t rcvd; /* frames received */
	size_t got;    /* bytes of the frame being received */
	uint8_t in[SHMCOLL_FRAME_BYTES + FINAL_LEN];
	int status; /* node 0: the node's STATUS, -1 before it came */
};

/* A multi-node job's supervision (see the protocol in wait_job()). */
struct cluster {
	int nnodes;
	int node;
	struct peer *peers; /* peers[j]: the connection to node j (node 0: j >= 1; else j = 0) */
	int statuses;       /* node 0: statuses recorded, its own included */
	int final;          /* the job's status once known, else -1 */
	int linger;         /* node 0: FINAL sent, waiting (bounded) for the peers to close */
	struct timespec linger_at;
};

/* One rank's stdout or stderr as the launcher reads it, or the launcher's own
 * messages (see "The ranks' output" below). */
struct stream {
	int fd;       /* the pipe's read end (non-blocking); -1 at its end, or never opened */
	int rank;     /* the global rank; -1: the launcher's messages */
	int out;      /* 0: its lines go to the launcher's stdout, 1: to its stderr */
	int log;      /* --log-dir: the rank's file, -1 if none */
	size_t len;   /* bytes in buf */
	size_t ready; /* buf[0..ready) may go out: whole lines, a piece of a long one, a last one */
	char *buf;    /* LINE_CAP bytes while it holds any, else NULL */
};

/* One of the launcher's own outputs: it writes one stream's lines at a time. */
struct output {
	int fd;          /* STDOUT_FILENO or STDERR_FILENO */
	int dead;        /* a write failed (EPIPE, EIO...): what comes for it is dropped */
	size_t chunk;    /* the most one write may take after POLLOUT without blocking */
	size_t len, off; /* stage[off..len) is still to be written */
	int next;        /* round robin: the stream looked at first */
	char stage[STAGE_CAP];
};

/* What wait_job() polls: pf[k] is of kind who[k].kind, index who[k].idx. */
enum { POLL_SIGNALS, POLL_PEER, POLL_STREAM, POLL_OUTPUT };
struct polled {
	int kind;
	int idx;
};

struct io {
	int nstreams;         /* 2 per rank (stdout, stderr), then the launcher's messages */
	struct stream *s;     /* s[2i], s[2i+1]: local rank i's stdout and stderr */
	struct output out[2]; /* the launcher's stdout and stderr */
	int tag;              /* --tag-output */
	int terminal;         /* the ranks' lines go to the launcher's outputs (not --log-only) */
	int logging;          /* --log-dir: the pipes are read to the end, whatever else fails */
	int shared;           /* stdout and stderr are one file (2>&1, a terminal): one stage at a
	                         time over both, or a line of one could be cut by the other's */
	int draining; /* the job is gone; pipes someone else holds are read until drain_at */
	struct timespec drain_at;
	int abandon;       /* SIGINT/SIGTERM once the job had ended: drop what is left */
	struct pollfd *pf; /* 1 + nnodes + nstreams + 2 */
	struct polled *who;
};

struct job {
	int size;
	pid_t *pids; /* pids[i] is rank i until it is reaped, then 0 */
	int started; /* ranks forked */
	int alive;   /* ranks forked and not yet reaped */
	pid_t pgid;  /* the ranks' process group (rank 0's pid), 0 before it */
	pid_t launcher;
	char id[64];      /* SHMCOLL_JOB */
	char **argv;      /* PROGRAM and its arguments */
	int status;       /* exit status of the first failure, -1 while none */
	int stopping;     /* the launcher has begun stopping the ranks (and what they left) */
	int got_sig;      /* SIGINT or SIGTERM the launcher received, 0 if none */
	int kill_pending; /* SIGKILL is due at kill_at */
	struct timespec kill_at;
	int bind;  /* pin rank i to cpus[(cpu0 + i) % ncpus] */
	int *cpus; /* the launcher's allowed CPUs, in order */
	int ncpus, cpu0;
	int rank0;           /* global rank of this node's rank 0 (node * size) */
	int leader_fd;       /* multi-node: the leader's listener until rank 0 is forked, else -1 */
	int gone;            /* no child left: the local job has ended */
	struct cluster *cl;  /* NULL: a single-node job */
	struct io *io;       /* the ranks' output, once set up */
	struct rlimit files; /* RLIMIT_NOFILE as the launcher found it: the ranks get it back */
	struct sigaction pipe_sa; /* SIGPIPE's disposition as found: the ranks get it back */
};

enum { BIND_AUTO, BIND_CORE, BIND_NONE };

/* cpus[0..n) as a list such as "0-3,8" (cpus increasing), for SHMCOLL_CPUS. */
static void format_cpus(const int *cpus, int n, char *s, size_t len)
{
	size_t used = 0;
	int i = 0, j;

	s[0] = 0;
	while (i < n && used < len) {
		for (j = i; j + 1 < n && cpus[j + 1] == cpus[j] + 1; j++)
			;
		if (j > i)
			used += (size_t)snprintf(s + used, len - used, "%s%d-%d", i ? "," : "",
			                         cpus[i], cpus[j]);
		else
			used +=
			    (size_t)snprintf(s + used, len - used, "%s%d", i ? "," : "", cpus[i]);
		i = j + 1;
	}
}

/* The CPUs the launcher may run on, in increasing order; returns how many. */
static int allowed_cpus(int **out)
{
	cpu_set_t set;
	int i, n = 0;

	*out = NULL;
	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 0;
	*out = calloc((size_t)CPU_COUNT(&set) + 1, sizeof(int));
	if (!*out)
		return 0;
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			(*out)[n++] = i;
	return n;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "Usage: " PROG " -n P [OPTIONS] [--] PROGRAM [ARGS...]\n"
	        "       " PROG " --nnodes N --node-rank I --nproc-per-node P --root HOST:PORT\n"
	        "                   [OPTIONS] [--] PROGRAM [ARGS...]\n"
	        "\n"
	        "Start P ranks of PROGRAM on this node as one shmcoll job. Every rank gets the\n"
	        "environment shmcoll_init() reads, signals sent to the launcher are passed on\n"
	        "to the ranks, and when one rank fails the others are stopped. With --nnodes,\n"
	        "the job spans N nodes: start one launcher on each, with the same N, P, --root\n"
	        "and SHMCOLL_TOKEN; they meet at node 0's --root address, and a failure on any\n"
	        "node stops the ranks of every node.\n"
	        "\n"
	        "Options:\n"
	        "  -n, --np P          number of ranks, 1 to %d (required, or --nproc-per-node)\n"
	        "      --timeout-ms N  export SHMCOLL_TIMEOUT_MS=N, the ranks' default wait\n"
	        "                      timeout in milliseconds\n"
	        "      --bind WHAT     core: pin rank i to the i-th CPU the launcher may use\n"
	        "                      (fails if there are fewer CPUs than ranks); none: do\n"
	        "                      not pin; auto (default): core when the ranks fit the\n"
	        "                      CPUs, else none. Pinned ranks spin-wait far better\n"
	        "                      than ones the scheduler moves (mpirun --bind-to core)\n"
	        "      --tag-output    begin every line of a rank's output with \"[R]<stdout>: \"\n"
	        "                      or \"[R]<stderr>: \" (R: its rank), as mpirun --tag-output\n"
	        "      --log-dir DIR   also write each rank's stdout and stderr, byte for byte,\n"
	        "                      to DIR/rank.R.stdout and DIR/rank.R.stderr (R: its rank;\n"
	        "                      DIR is made if missing, an earlier run's files replaced)\n"
	        "      --log-only      with --log-dir: the ranks' output goes to the files only\n"
	        "      --cleanup       run no job: remove this user's arenas that dead jobs\n"
	        "                      left in /dev/shm (those whose creating process is gone,\n"
	        "                      and those that never got a header and are over a minute\n"
	        "                      old), print one line per arena seen, and exit 0\n"
	        "  -h, --help          show this help and exit\n"
	        "      --version       show the version and exit\n"
	        "  --                  end of options; PROGRAM follows\n",
	        MAX_RANKS);
	fprintf(f,
	        "\n"
	        "Multi-node options (--nnodes 1, or --nproc-per-node alone, is the same as -n):\n"
	        "      --nnodes N            nodes in the job, 1 to %d\n"
	        "      --node-rank I         this node, 0 to N-1; node 0 is the root\n"
	        "      --nproc-per-node P    ranks on each node, 1 to %d (-n P is the same)\n"
	        "      --root HOST:PORT      where node 0's launcher listens for the others\n"
	        "                            (node 0 binds it; the others connect to it)\n"
	        "      --node-addr ADDR      the address this node's leader rank listens on\n"
	        "                            (also SHMCOLL_NODE_ADDR). Default: node 0, the HOST\n"
	        "                            of --root; the others, the address they reach\n"
	        "                            node 0 from\n"
	        "      --connect-timeout-ms N  how long the nodes may take to meet, from each\n"
	        "                            launcher's start (also SHMCOLL_CONNECT_TIMEOUT_MS;\n"
	        "                            default %d); node I > 0 retries refused connects\n"
	        "                            until then\n"
	        "\n"
	        "The job token: every launcher of a multi-node job must be given the same secret\n"
	        "in SHMCOLL_TOKEN (1 to %d of [0-9A-Za-z_-]); node 0 refuses, and logs, every\n"
	        "connection that does not present it, and goes on waiting for the right ones.\n"
	        "If SHMCOLL_TOKEN is unset, node 0 makes a random one and prints it on stderr\n"
	        "(\"" PROG ": job token T; start the other nodes with SHMCOLL_TOKEN=T\"); the\n"
	        "other nodes cannot start without it.\n",
	        SHMCOLL_NODES_MAX, SHMCOLL_MAX_RANKS, CONNECT_TIMEOUT_MS, SHMCOLL_TOKEN_MAX);
	fprintf(
	    f,
	    "\n"
	    "Environment of local rank i on node I:\n"
	    "  SHMCOLL_RANK=I*P+i                       rank in the job\n"
	    "  SHMCOLL_SIZE=N*P                         ranks in the job (N = 1: P)\n"
	    "  SHMCOLL_LOCAL_RANK=i                     rank on this node, 0 to P-1\n"
	    "  SHMCOLL_LOCAL_SIZE=P                     ranks on this node\n"
	    "  SHMCOLL_JOB=j<pid>-<16 hex digits>       job id, unique to this launcher\n"
	    "  SHMCOLL_TIMEOUT_MS=N                     only with --timeout-ms\n"
	    "  SHMCOLL_CPUS=LIST                        the CPUs the launcher may use, such\n"
	    "                                           as 0-3,8 (before it pins rank i to\n"
	    "                                           the i-th of them)\n"
	    "and only in a job of N > 1 nodes:\n"
	    "  SHMCOLL_NNODES=N, SHMCOLL_NODE_RANK=I    the nodes, and this one\n"
	    "  SHMCOLL_TOKEN=T                          the job token\n"
	    "  SHMCOLL_NODES=A0,A1,...                  every node's leader address\n"
	    "                                           (ip:port), in node order\n"
	    "  SHMCOLL_NET_FD=F                         local rank 0 only: the inherited\n"
	    "                                           socket listening on A<I>\n"
	    "and torchrun's, so torch.distributed programs (env://) run unchanged:\n"
	    "  RANK, LOCAL_RANK                         SHMCOLL_RANK, SHMCOLL_LOCAL_RANK\n"
	    "  WORLD_SIZE, LOCAL_WORLD_SIZE             SHMCOLL_SIZE, SHMCOLL_LOCAL_SIZE\n"
	    "  GROUP_RANK=I, GROUP_WORLD_SIZE=N         this node, and the nodes (1 node: 0, 1)\n"
	    "  MASTER_ADDR, MASTER_PORT                 where rank 0 listens for torch's\n"
	    "                                           store: 127.0.0.1 and a TCP port free\n"
	    "                                           when the launcher looked; with N > 1,\n"
	    "                                           the HOST of --root and a port node 0\n"
	    "                                           chose, the same on every node\n"
	    "  TORCHELASTIC_RUN_ID=H                    12 hex digits, new for every job, the\n"
	    "                                           same on every node\n"
	    "  TORCHELASTIC_RESTART_COUNT=0             (TORCHELASTIC_USE_AGENT_STORE unset)\n"
	    "shmcoll_init() reads SHMCOLL_* first: these never change the job it joins.\n");
	fprintf(f,
	        "\n"
	        "Output: each rank's stdout and stderr are pipes that the launcher reads, and\n"
	        "it writes to its own stdout and stderr whole lines only, so no line is ever\n"
	        "split by another rank's output. A line longer than %d KiB goes out in pieces\n"
	        "of that size, each ended with a newline, as is a last line without one.\n"
	        "Since the ranks' stdout is a pipe, C stdio and Python buffer it in blocks: use\n"
	        "fflush or setvbuf, or python3 -u (PYTHONUNBUFFERED=1), to see lines at once.\n"
	        "The ranks share the launcher's stdin.\n"
	        "\n"
	        "The ranks run in a process group of their own (so they should not read from\n"
	        "a terminal) and are killed if the launcher dies. SIGHUP and SIGQUIT are\n"
	        "forwarded to them. SIGINT and SIGTERM are forwarded too, and the ranks still\n"
	        "running %d ms later get SIGKILL; a second SIGINT or SIGTERM sends SIGKILL at\n"
	        "once. When a rank exits non-zero or is killed by a signal, the launcher names\n"
	        "it and the cause on stderr, sends SIGTERM to the other ranks and SIGKILL %d ms\n"
	        "later. Processes the ranks started are the job's too: the launcher waits for\n"
	        "them, and stops those still running once every rank is gone (SIGTERM, then\n"
	        "SIGKILL). Then it removes the job's shared-memory arena if one is left.\n"
	        "In a multi-node job the launchers stay connected to node 0 until the end: when\n"
	        "a node's job fails, or its launcher is lost, every node stops its ranks the\n"
	        "same way and every launcher exits with the job's status.\n"
	        "\n"
	        "Exit status (of a multi-node job: the same on every node):\n"
	        "  0        every rank exited 0\n"
	        "  N        the first failing rank exited N (127: PROGRAM could not be run)\n"
	        "  128+S    the first failing rank was killed by signal S, or the launcher\n"
	        "           received SIGINT/SIGTERM S and stopped the job\n"
	        "  1        the launcher itself failed, or lost its connection to another\n"
	        "           node's launcher\n"
	        "  2        bad usage\n"
	        "\n"
	        "Examples:\n"
	        "  " PROG " -n 4 --timeout-ms 10000 build/examples/demo\n"
	        "  node0$ " PROG " --nnodes 2 --node-rank 0 --nproc-per-node 4 \\\n"
	        "             --root 10.0.0.1:29500 build/examples/demo\n"
	        "  node1$ SHMCOLL_TOKEN=<printed by node 0> " PROG " --nnodes 2 --node-rank 1 \\\n"
	        "             --nproc-per-node 4 --root 10.0.0.1:29500 build/examples/demo\n",
	        LINE_CAP / 1024, KILL_GRACE_MS, KILL_GRACE_MS);
}

/* Prints the problem and a pointer to --help; returns the usage exit status. */
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '" PROG " --help' for more information.\n");
	return EXIT_USAGE;
}

/* Parses a whole decimal int in [lo, hi]; returns 0 or -EINVAL. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static int random_u64(uint64_t *r)
{
	unsigned char *p = (unsigned char *)r;
	size_t got = 0;

	while (got < sizeof(*r)) {
		ssize_t n = getrandom(p + got, sizeof(*r) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	return 0;
}

/* "j<launcher pid>-<64 random bits>": unique per run and not guessable, so no
 * other user's job can pre-create or attach to this job's arena by name. */
static int make_job_id(struct job *job)
{
	uint64_t r;
	int err = random_u64(&r);

	if (err < 0)
		return err;
	snprintf(job->id, sizeof(job->id), "j%ld-%016" PRIx64, (long)job->launcher, r);
	return 0;
}

/* A TCP port that was free on every address of this machine a moment ago, for
 * MASTER_PORT: bound with port 0 on the IPv6 wildcard, which covers IPv4 too
 * (else on the IPv4 one), read back, closed. Returns it, or 0. torchrun finds
 * its port the same way; the port can be taken before rank 0 listens on it, as
 * there. */
static unsigned free_port(void)
{
	struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
	struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	unsigned port = 0;
	int off = 0, fd;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) < 0 ||
	                bind(fd, (struct sockaddr *)&s6, sizeof(s6)) < 0)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&s4, sizeof(s4)) < 0) {
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
		                                      : ((struct sockaddr_in *)&ss)->sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* torchrun's variables that are alike on every rank of this node (RANK and
 * LOCAL_RANK are set per rank by exec_rank()), so programs written for it run
 * unchanged; shmcoll_init() reads SHMCOLL_* first, so they never change the job
 * it joins. MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RUN_ID need a port (0:
 * none, and they are unset). Returns 0 or -1 (errno set). */
static int torch_env(int size, int nnodes, int node, const char *addr, unsigned port, uint64_t run)
{
	const char *names[] = {
	    "WORLD_SIZE",  "LOCAL_WORLD_SIZE", "GROUP_RANK",          "GROUP_WORLD_SIZE",
	    "MASTER_ADDR", "MASTER_PORT",      "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"};
	char vals[8][64];
	int i;

	snprintf(vals[0], sizeof(vals[0]), "%ld", (long)size * nnodes);
	snprintf(vals[1], sizeof(vals[1]), "%d", size);
	snprintf(vals[2], sizeof(vals[2]), "%d", node);
	snprintf(vals[3], sizeof(vals[3]), "%d", nnodes);
	snprintf(vals[4], sizeof(vals[4]), "%s", addr);
	snprintf(vals[5], sizeof(vals[5]), "%u", port);
	snprintf(vals[6], sizeof(vals[6]), "%012" PRIx64, run & ((UINT64_C(1) << RUN_ID_BITS) - 1));
	snprintf(vals[7], sizeof(vals[7]), "0");
	/* An enclosing torchrun's: its agent's store is not this job's. */
	if (unsetenv("TORCHELASTIC_USE_AGENT_STORE") < 0)
		return -1;
	for (i = 0; i < 8; i++) {
		if (i >= 4 && i <= 6 && !port) {
			if (unsetenv(names[i]) < 0)
				return -1;
		} else if (setenv(names[i], vals[i], 1) < 0) {
			return -1;
		}
	}
	return 0;
}

static void now(struct timespec *ts)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
}

/* The ranks' output. Each rank's stdout and stderr is a pipe the launcher reads
 * in wait_job()'s loop; it writes to its own stdout and stderr whole lines only,
 * and one stream's lines at a time, so no line is split by another rank's output:
 *  1. A read appends to the stream's buffer (LINE_CAP) and, with --log-dir, to the
 *     rank's file as it is. The bytes up to the last newline are ready; so is a
 *     full buffer without one (a piece of a longer line), and what is left at the
 *     pipe's end (a last line without a newline).
 *  2. An output with nothing in hand takes the ready lines of the next stream
 *     that has some (round robin; the launcher's own messages last, so a rank's
 *     last lines come before the launcher's word on how it ended) into its
 *     stage, each tagged with --tag-output and ending in a newline (one is added
 *     to a piece or a last line), and writes the stage out.
 *  3. Nothing blocks the loop: an output is written only after POLLOUT, one
 *     write of at most PIPE_BUF bytes (which a pipe with room takes whole) where
 *     a write could block, and a full buffer is not read until its lines are
 *     out, so a rank writing faster than the launcher's reader blocks in its own
 *     write(), as it would on a slow terminal.
 *  4. An output whose write fails (its reader gone: EPIPE) takes nothing more;
 *     without --log-dir the launcher closes the pipes that fed it, so the ranks
 *     see EPIPE (SIGPIPE) on their next write, as they did writing to it
 *     themselves.
 *  5. Once the job's last process is gone, pipes still open (held by a process
 *     outside the job) are read for DRAIN_MS more, then closed; the launcher
 *     exits once everything read is written (or at SIGINT/SIGTERM, dropping it). */

/* A message of the launcher's own: queued behind the ranks' lines while the
 * output is passed on, else written to stderr at once. */
__attribute__((format(printf, 2, 3))) static void note(struct job *job, const char *fmt, ...)
{
	struct stream *s = job->io ? &job->io->s[job->io->nstreams - 1] : NULL;
	char line[1024];
	va_list ap;
	size_t n;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (len <= 0)
		return;
	/* Whole lines only: a message cut short still ends one. */
	n = (size_t)len < sizeof(line) - 1 ? (size_t)len : sizeof(line) - 2;
	if (line[n - 1] != '\n')
		line[n++] = '\n';
	if (s && job->io->out[1].dead)
		return;
	if (s && !s->buf)
		s->buf = malloc(LINE_CAP);
	if (!s || !s->buf || s->len + n > LINE_CAP) {
		/* Not passing output on, or 64 KiB of messages not yet out. */
		fwrite(line, 1, n, stderr);
		return;
	}
	memcpy(s->buf + s->len, line, n);
	s->len += n;
	s->ready = s->len;
}

static void stream_close(struct stream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->ready = s->len;
}

static void stream_drop(struct stream *s)
{
	free(s->buf);
	s->buf = NULL;
	s->len = s->ready = 0;
}

/* --log-dir: the bytes as the rank wrote them. A failed write (a full disk)
 * ends the file's log, once said. */
static void log_write(struct job *job, struct stream *s, const char *p, size_t n)
{
	while (n > 0 && s->log >= 0) {
		ssize_t w = write(s->log, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			note(job,
			     PROG ": cannot write rank %d's %s to its log: %s; the rest is not "
			          "logged\n",
			     s->rank, s->out ? "stderr" : "stdout",
			     w < 0 ? strerror(errno) : "no room");
			close(s->log);
			s->log = -1;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Reads what s's pipe holds, as far as its buffer goes (step 1). */
static void stream_read(struct job *job, struct stream *s)
{
	static char scratch[LINE_CAP];
	struct io *io = job->io;
	int keep = io->terminal && !io->out[s->out].dead;
	char *nl;

	while (s->fd >= 0) {
		char *at = scratch;
		size_t room = sizeof(scratch);
		ssize_t n;

		if (!keep && !io->logging) {
			/* Nobody takes it any more: the rank sees EPIPE (step 4). */
			stream_close(s);
			break;
		}
		if (keep && !s->buf)
			s->buf = malloc(LINE_CAP);
		if (keep && !s->buf) {
			/* No memory for its lines: they are dropped (never spin on it). */
			keep = 0;
			continue;
		}
		if (keep) {
			if (s->len == LINE_CAP)
				break;
			at = s->buf + s->len;
			room = LINE_CAP - s->len;
		}
		n = read(s->fd, at, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			stream_close(s);
			break;
		}
		log_write(job, s, at, (size_t)n);
		if (keep)
			s->len += (size_t)n;
	}
	if (!s->buf || s->len == s->ready)
		return;
	nl = memrchr(s->buf + s->ready, '\n', s->len - s->ready);
	if (nl)
		s->ready = (size_t)(nl - s->buf) + 1;
	if (s->fd < 0 || (s->ready == 0 && s->len == LINE_CAP))
		s->ready = s->len;
}

/* Moves s's ready lines, as many as fit, into o's stage (step 2). The first
 * always fits: a line is at most LINE_CAP bytes. */
static void take(const struct io *io, struct stream *s, struct output *o)
{
	size_t at = 0;

	o->len = o->off = 0;
	while (at < s->ready) {
		char *nl = memchr(s->buf + at, '\n', s->ready - at), tag[TAG_MAX];
		size_t end = nl ? (size_t)(nl - s->buf) + 1 : s->ready, tl = 0;

		if (io->tag && s->rank >= 0)
			tl = (size_t)snprintf(tag, sizeof(tag), "[%d]<%s>: ", s->rank,
			                      s->out ? "stderr" : "stdout");
		if (o->len + tl + (end - at) + 1 > STAGE_CAP)
			break;
		memcpy(o->stage + o->len, tag, tl);
		memcpy(o->stage + o->len + tl, s->buf + at, end - at);
		o->len += tl + (end - at);
		if (!nl)
			o->stage[o->len++] = '\n';
		at = end;
	}
	memmove(s->buf, s->buf + at, s->len - at);
	s->len -= at;
	s->ready -= at;
	if (s->len == 0)
		stream_drop(s);
}

/* Fills output `which`'s stage from the next stream with ready lines for it;
 * returns 0 if there is none. */
static int output_fill(struct io *io, int which)
{
	struct output *o = &io->out[which];
	int n = io->nstreams - 1, k;

	for (k = 0; k <= n; k++) {
		int i = k < n ? (o->next + k) % n : n;
		struct stream *s = &io->s[i];

		if (s->out == which && s->ready > 0) {
			take(io, s, o);
			if (i < n)
				o->next = (i + 1) % n;
			return 1;
		}
	}
	return 0;
}

/* A write to output `which` failed: nothing more goes to it (step 4). */
static void output_dead(struct io *io, int which)
{
	int i;

	io->out[which].dead = 1;
	io->out[which].len = io->out[which].off = 0;
	for (i = 0; i < io->nstreams; i++) {
		struct stream *s = &io->s[i];

		if (s->out != which)
			continue;
		stream_drop(s);
		if (!io->logging)
			stream_close(s);
	}
}

/* Whether output `which` must wait for the other to finish its stage. */
static int output_held(const struct io *io, int which)
{
	return io->shared && io->out[!which].off < io->out[!which].len;
}

/* Output `which` may take a write (POLLOUT): one where a write could block,
 * as many as there are lines for a regular file (step 3). */
static void output_write(struct io *io, int which)
{
	struct output *o = &io->out[which];

	if (output_held(io, which))
		return;
	for (;;) {
		size_t want;
		ssize_t n;

		if (o->off == o->len && !output_fill(io, which))
			return;
		want = o->len - o->off < o->chunk ? o->len - o->off : o->chunk;
		n = write(o->fd, o->stage + o->off, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			output_dead(io, which);
			return;
		}
		o->off += (size_t)n;
		if (o->chunk != SIZE_MAX)
			return;
	}
}

/* Whether output `which` has anything to write (it may be held). */
static int output_pending(const struct io *io, int which)
{
	int i;

	if (io->out[which].dead)
		return 0;
	if (io->out[which].off < io->out[which].len)
		return 1;
	for (i = 0; i < io->nstreams; i++)
		if (io->s[i].out == which && io->s[i].ready > 0)
			return 1;
	return 0;
}

/* Everything read has been written, and every pipe is closed (or the rest was
 * given up). */
static int io_done(const struct io *io)
{
	int i;

	if (io->abandon)
		return 1;
	for (i = 0; i < io->nstreams; i++)
		if (io->s[i].fd >= 0)
			return 0;
	return !output_pending(io, 0) && !output_pending(io, 1);
}

/* mkdir -p */
static int make_dirs(const char *dir)
{
	char path[PATH_MAX], *p;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0777) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0777) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Sets up the passing on of the ranks' output: the streams, the outputs, the
 * log files (opened now, so a bad --log-dir fails before anything starts) and
 * the poll array for nnodes control connections. Returns 0, or -1 with a
 * message printed. */
static int io_open(struct job *job, int nnodes, int tag, const char *log_dir, int log_only)
{
	struct io *io = calloc(1, sizeof(*io));
	struct stat st[2] = {0};
	int i, k, n = 2 * job->size + 1, err;

	if (!io || !(io->s = calloc((size_t)n, sizeof(*io->s))) ||
	    !(io->pf = calloc((size_t)(1 + nnodes + n + 2), sizeof(*io->pf))) ||
	    !(io->who = calloc((size_t)(1 + nnodes + n + 2), sizeof(*io->who)))) {
		fprintf(stderr, PROG ": out of memory\n");
		goto err;
	}
	job->io = io;
	io->nstreams = n;
	io->tag = tag;
	io->terminal = !log_only;
	for (i = 0; i < n; i++) {
		io->s[i].fd = io->s[i].log = -1;
		io->s[i].rank = i < n - 1 ? job->rank0 + i / 2 : -1;
		io->s[i].out = i < n - 1 ? i % 2 : 1;
	}
	for (k = 0; k < 2; k++) {
		io->out[k].fd = k ? STDERR_FILENO : STDOUT_FILENO;
		io->out[k].chunk = fstat(io->out[k].fd, &st[k]) == 0 && S_ISREG(st[k].st_mode)
		                       ? SIZE_MAX
		                       : PIPE_BUF;
	}
	io->shared = st[0].st_dev == st[1].st_dev && st[0].st_ino == st[1].st_ino;
	if (!log_dir)
		return 0;
	io->logging = 1;
	err = make_dirs(log_dir);
	if (err < 0) {
		fprintf(stderr, PROG ": --log-dir %s: %s\n", log_dir, strerror(-err));
		goto err;
	}
	for (i = 0; i < n - 1; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/rank.%d.%s", log_dir, io->s[i].rank,
		         i % 2 ? "stderr" : "stdout");
		io->s[i].log = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (io->s[i].log < 0) {
			fprintf(stderr, PROG ": cannot open %s: %s\n", path, strerror(errno));
			goto err;
		}
	}
	return 0;
err:
	if (io && io->s)
		for (i = 0; i < n; i++)
			if (io->s[i].log >= 0)
				close(io->s[i].log);
	if (io) {
		free(io->s);
		free(io->pf);
		free(io->who);
	}
	free(io);
	job->io = NULL;
	return -1;
}

/* Writes what is left of the launcher's own messages (none once wait_job()
 * has run to its end) and frees it all. */
static void io_close(struct job *job)
{
	struct io *io = job->io;
	struct stream *s;
	int i;

	if (!io)
		return;
	s = &io->s[io->nstreams - 1];
	job->io = NULL;
	if (s->len && !io->out[1].dead && !io->abandon)
		fwrite(s->buf, 1, s->len, stderr);
	for (i = 0; i < io->nstreams; i++) {
		stream_close(&io->s[i]);
		stream_drop(&io->s[i]);
		if (io->s[i].log >= 0)
			close(io->s[i].log);
	}
	free(io->s);
	free(io->pf);
	free(io->who);
	free(io);
}

/* Rank i's two pipes: the read ends go to its streams, the write ends (its
 * stdout and stderr to be) to w. Returns 0 or -errno. */
static int rank_pipes(struct job *job, int i, int w[2])
{
	int k, p[2], err;

	for (k = 0; k < 2; k++) {
		if (pipe2(p, O_CLOEXEC) < 0)
			goto err;
		job->io->s[2 * i + k].fd = p[0];
		w[k] = p[1];
		if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
			k++;
			goto err;
		}
	}
	return 0;
err:
	err = -errno;
	while (k-- > 0) {
		stream_close(&job->io->s[2 * i + k]);
		close(w[k]);
	}
	return err;
}

/* The launcher's children: the ranks, and the processes they started that
 * were adopted when their parent died (the launcher is a child subreaper).
 * Fills pids and their process groups; returns how many (at most max). */
static int children(const struct job *job, pid_t *pids, pid_t *pgrps, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while (n < max && (e = readdir(d)) != NULL) {
		char path[64], buf[512], *p, *end;
		long pid = strtol(e->d_name, &end, 10), ppid, pgrp;
		FILE *f;
		int ok;

		if (*end || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		ok = fgets(buf, sizeof(buf), f) != NULL;
		fclose(f);
		/* The command name may hold anything: parse after its last ')'. */
		p = ok ? strrchr(buf, ')') : NULL;
		if (!p || sscanf(p + 1, " %*c %ld %ld", &ppid, &pgrp) != 2 || ppid != job->launcher)
			continue;
		pids[n] = (pid_t)pid;
		pgrps[n++] = (pid_t)pgrp;
	}
	closedir(d);
	return n;
}

/* Signals the job: the ranks' group, and every child of the launcher outside
 * it. The group only while one of its members is a child not yet reaped: that
 * pid keeps the group id from being reused, so the signal cannot reach
 * strangers; a child is signalled by its pid, which cannot be reused before
 * the launcher reaps it. */
static void signal_job(const struct job *job, int sig)
{
	enum { MAX_SCAN = 4096 };
	static pid_t pids[MAX_SCAN], pgrps[MAX_SCAN];
	int i, n = children(job, pids, pgrps, MAX_SCAN), grouped = job->alive > 0;

	for (i = 0; i < n; i++)
		grouped = grouped || (job->pgid > 0 && pgrps[i] == job->pgid);
	if (job->pgid > 0 && grouped)
		kill(-job->pgid, sig);
	for (i = 0; i < n; i++)
		if (!grouped || pgrps[i] != job->pgid)
			kill(pids[i], sig);
}

static void arm_kill(struct job *job, long ms)
{
	now(&job->kill_at);
	job->kill_at.tv_nsec += ms * 1000000L;
	job->kill_at.tv_sec += job->kill_at.tv_nsec / 1000000000L;
	job->kill_at.tv_nsec %= 1000000000L;
	job->kill_pending = 1;
}

/* SIGTERM now, SIGKILL KILL_GRACE_MS later for whatever ignored it. */
static void stop_job(struct job *job)
{
	if (job->stopping)
		return;
	job->stopping = 1;
	signal_job(job, SIGTERM);
	arm_kill(job, KILL_GRACE_MS);
}

/* Runs in the child: joins the ranks' group, ties its life to the launcher and
 * execs PROGRAM. rank is the local rank. Only rank-local state is touched;
 * never returns. */
static void exec_rank(const struct job *job, int rank, const int w[2], const sigset_t *origmask)
{
	char buf[16], global[16];
	int err, ok;

	/* The pipes to the launcher (dup2 clears close-on-exec on the copies; the
	 * originals, and every other rank's read ends, close at exec). */
	if (dup2(w[0], STDOUT_FILENO) < 0 || dup2(w[1], STDERR_FILENO) < 0)
		_exit(EXIT_EXEC);
	if (setpgid(0, rank == 0 ? 0 : job->pgid) < 0) {
		dprintf(STDERR_FILENO, PROG ": rank %d cannot join the job's process group: %s\n",
		        rank, strerror(errno));
		_exit(EXIT_EXEC);
	}
	/* Die with the launcher; if it is already gone, the signal was never armed. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != job->launcher)
		_exit(EXIT_EXEC);
	snprintf(buf, sizeof(buf), "%d", rank);
	snprintf(global, sizeof(global), "%d", job->rank0 + rank);
	ok = setenv("SHMCOLL_RANK", global, 1) == 0 && setenv("SHMCOLL_LOCAL_RANK", buf, 1) == 0 &&
	     setenv("RANK", global, 1) == 0 && setenv("LOCAL_RANK", buf, 1) == 0;
	/* The leader (local rank 0) alone inherits the listening socket. */
	if (ok && job->cl && rank == 0) {
		snprintf(buf, sizeof(buf), "%d", job->leader_fd);
		ok =
		    fcntl(job->leader_fd, F_SETFD, 0) == 0 && setenv("SHMCOLL_NET_FD", buf, 1) == 0;
	} else if (ok) {
		ok = unsetenv("SHMCOLL_NET_FD") == 0;
	}
	if (!ok) {
		dprintf(STDERR_FILENO, PROG ": rank %d: cannot set its environment: %s\n", rank,
		        strerror(errno));
		_exit(EXIT_EXEC);
	}
	if (job->bind) {
		cpu_set_t one;

		CPU_ZERO(&one);
		int cpu = job->cpus[(job->cpu0 + rank) % job->ncpus];

		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) < 0) {
			dprintf(STDERR_FILENO, PROG ": rank %d cannot bind to CPU %d: %s\n", rank,
			        cpu, strerror(errno));
			_exit(EXIT_EXEC);
		}
	}
	/* What the launcher changed for itself only. */
	setrlimit(RLIMIT_NOFILE, &job->files);
	sigaction(SIGPIPE, &job->pipe_sa, NULL);
	sigprocmask(SIG_SETMASK, origmask, NULL);
	execvp(job->argv[0], job->argv);
	err = errno;
	dprintf(STDERR_FILENO, PROG ": cannot run %s: %s\n", job->argv[0], strerror(err));
	_exit(EXIT_EXEC);
}

static int start_ranks(struct job *job, const sigset_t *origmask)
{
	int i, w[2], err;

	for (i = 0; i < job->size; i++) {
		pid_t pid;

		err = rank_pipes(job, i, w);
		if (err < 0) {
			note(job, PROG ": cannot make rank %d's output pipes: %s\n", job->rank0 + i,
			     strerror(-err));
			return -1;
		}
		pid = fork();
		if (pid < 0) {
			err = errno;
			close(w[0]);
			close(w[1]);
			stream_close(&job->io->s[2 * i]);
			stream_close(&job->io->s[2 * i + 1]);
			note(job, PROG ": cannot start rank %d: %s\n", job->rank0 + i,
			     strerror(err));
			return -1;
		}
		if (pid == 0)
			exec_rank(job, i, w, origmask);
		/* Only the rank holds the write ends: its exit is their end. */
		close(w[0]);
		close(w[1]);
		/* Also set here, so the group exists before the next rank joins it and
		 * before any signal is forwarded. EACCES: the child has exec'd, and it
		 * joined the group itself first. */
		if (i == 0) {
			job->pgid = pid;
			if (job->leader_fd >= 0)
				close(job->leader_fd);
			job->leader_fd = -1;
		}
		setpgid(pid, job->pgid);
		job->pids[i] = pid;
		job->started++;
		job->alive++;
	}
	return 0;
}

/* Accounts for a child that ended: a rank (a failure is reported and stops
 * the job) or a process a rank started (not reported). */
static void reap(struct job *job, pid_t pid, int ws)
{
	const char *abbrev;
	int rank, code, sig;

	for (rank = 0; rank < job->started; rank++)
		if (job->pids[rank] == pid)
			break;
	if (rank == job->started)
		return;
	job->pids[rank] = 0;
	job->alive--;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return;
	/* Once the launcher is stopping the job, or has passed on SIGINT/SIGTERM,
	 * whatever dies was stopped by it: not a failure of its own. */
	if (job->stopping || job->got_sig) {
		stop_job(job);
		return;
	}
	/* What the rank wrote last goes out before the word on how it ended. */
	stream_read(job, &job->io->s[2 * rank]);
	stream_read(job, &job->io->s[2 * rank + 1]);
	if (WIFEXITED(ws)) {
		code = WEXITSTATUS(ws);
		note(job, PROG ": rank %d (pid %ld) exited with status %d\n", job->rank0 + rank,
		     (long)pid, code);
	} else {
		sig = WTERMSIG(ws);
		code = 128 + sig;
		abbrev = sigabbrev_np(sig);
		note(job, PROG ": rank %d (pid %ld) killed by signal %d (%s%s: %s)%s\n",
		     job->rank0 + rank, (long)pid, sig, abbrev ? "SIG" : "",
		     abbrev ? abbrev : "unnamed", strsignal(sig),
		     WCOREDUMP(ws) ? ", core dumped" : "");
	}
	job->status = code;
	stop_job(job);
}

/* A job whose ranks were all SIGKILLed never ran shmcoll_comm_destroy(): its arena's name,
 * and the names of heap segments (shm/arena.h: "<arena>.h<seq>") a growing shmcoll_malloc
 * had made but not yet unlinked when its ranks died. */
static void remove_arena(struct job *job)
{
	char name[SHMCOLL_NAME_MAX], path[sizeof(((struct dirent *)0)->d_name) + 2];
	struct dirent *e;
	size_t len;
	DIR *d;

	if (shmcoll__arena_name(name, sizeof(name), job->id) < 0)
		return;
	if (shm_unlink(name) < 0 && errno != ENOENT)
		note(job, PROG ": cannot remove %s: %s\n", name, strerror(errno));
	d = opendir("/dev/shm");
	if (!d)
		return;
	len = strlen(name + 1);
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, name + 1, len) || strncmp(e->d_name + len, ".h", 2))
			continue;
		snprintf(path, sizeof(path), "/%s", e->d_name);
		if (shm_unlink(path) < 0 && errno != ENOENT)
			note(job, PROG ": cannot remove %s: %s\n", path, strerror(errno));
	}
	closedir(d);
}

/* The supervision of a multi-node job, over the control connections the
 * rendezvous left open (every frame as in frame.h, seq counted per direction
 * from 1, the table having been node 0's first):
 *  1. When a node's ranks (and whatever they started) are gone, its launcher
 *     sends node 0 STATUS (call: the status a single-node launcher would exit
 *     with, len 0); node 0 records its own the same way.
 *  2. Node 0 decides the job's status: the first non-zero status recorded; 1
 *     for a node whose connection closes, fails or carries a bad frame before
 *     its STATUS; 0 once all N statuses are in and 0. It sends every node still
 *     connected FINAL (call: that status; payload: the deciding node, u32 LE),
 *     shuts its side down and waits at most LINGER_MS for them to close.
 *  3. A node receiving FINAL closes the connection; if the status is non-zero
 *     and its ranks still run, it stops them as after a local failure.
 *  4. A node that loses node 0 before FINAL stops its ranks; its status is 1.
 *  5. Every launcher exits with the job's status once its own ranks are gone.
 * Every wait is bounded or ends with a peer's connection, so no launcher hangs
 * on a dead node, and the kernel's keepalive catches a vanished machine. */

static void put32le(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void peer_close(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

static int peer_send(const struct cluster *c, struct peer *p, int type, int status, int node)
{
	uint8_t payload[FINAL_LEN];
	struct shmcoll_frame f = {
	    .type = (uint16_t)type,
	    .node = (uint16_t)c->node,
	    .seq = ++p->sent,
	    .call = (uint64_t)status,
	    .len = type == FRAME_FINAL ? FINAL_LEN : 0,
	};

	put32le(payload, (uint32_t)node);
	return shmcoll__rdv_send_frame(p->fd, &f, payload, CTL_SEND_MS);
}

/* Node `node` failed with status: stop this node's ranks as after a local
 * failure, if they still run. */
static void remote_failed(struct job *job, int node, int status)
{
	if (node == job->cl->node || job->alive == 0 || job->stopping || job->got_sig)
		return;
	note(job, PROG ": node %d failed (status %d); stopping this node's ranks\n", node, status);
	stop_job(job);
}

/* Node 0: the job's status is status, decided by node; tell every node. */
static void decide(struct job *job, int status, int node)
{
	struct cluster *c = job->cl;
	int j;

	if (c->final >= 0)
		return;
	c->final = status;
	for (j = 1; j < c->nnodes; j++) {
		struct peer *p = &c->peers[j];

		if (p->fd < 0)
			continue;
		if (peer_send(c, p, FRAME_FINAL, status, node) < 0)
			peer_close(p);
		else
			shutdown(p->fd, SHUT_WR);
	}
	c->linger = 1;
	now(&c->linger_at);
	c->linger_at.tv_sec += LINGER_MS / 1000;
	c->linger_at.tv_nsec += (LINGER_MS % 1000) * 1000000L;
	if (c->linger_at.tv_nsec >= 1000000000L) {
		c->linger_at.tv_sec++;
		c->linger_at.tv_nsec -= 1000000000L;
	}
	if (status != 0)
		remote_failed(job, node, status);
}

/* Node 0: node's job ended with status. */
static void record(struct job *job, int node, int status)
{
	struct cluster *c = job->cl;

	c->peers[node].status = status;
	c->statuses++;
	if (status != 0)
		decide(job, status, node);
	else if (c->statuses == c->nnodes)
		decide(job, 0, 0);
}

/* The connection to node j closed, failed or broke the protocol. */
static void peer_lost(struct job *job, int j, const char *why)
{
	struct cluster *c = job->cl;
	int expected = c->final >= 0 || (c->node == 0 && c->peers[j].status >= 0);

	peer_close(&c->peers[j]);
	if (expected)
		return;
	note(job, PROG ": lost the connection to node %d's launcher: %s\n", j, why);
	if (c->node == 0) {
		decide(job, EXIT_FAILURE_LAUNCHER, j);
		return;
	}
	c->final = EXIT_FAILURE_LAUNCHER;
	if (job->alive > 0 && !job->stopping && !job->got_sig)
		note(job, PROG ": stopping this node's ranks\n");
	if (job->alive > 0)
		stop_job(job);
}

/* A whole frame from node j. */
static void peer_frame(struct job *job, int j, const struct shmcoll_frame *f,
                       const uint8_t *payload)
{
	struct cluster *c = job->cl;
	uint32_t node;

	c->peers[j].rcvd++;
	if (c->node == 0) {
		record(job, j, (int)f->call);
		return;
	}
	node = get32le(payload);
	if (node >= (uint32_t)c->nnodes || (f->call == 0 && !job->gone)) {
		peer_lost(job, j, "a FINAL frame that makes no sense");
		return;
	}
	c->final = (int)f->call;
	peer_close(&c->peers[j]);
	if (c->final != 0)
		remote_failed(job, (int)node, c->final);
}

/* Checks the header in p->in: the one frame type node j may send now. */
static int header_ok(const struct cluster *c, int j, struct shmcoll_frame *f, char *why,
                     size_t whylen)
{
	const struct peer *p = &c->peers[j];
	int type = c->node == 0 ? FRAME_STATUS : FRAME_FINAL;
	uint64_t len = c->node == 0 ? 0 : FINAL_LEN;

	if (shmcoll__frame_decode(p->in, f, why, whylen) < 0)
		return 0;
	if (f->type != type || f->node != j || f->seq != p->rcvd + 1 || f->len != len ||
	    f->call > STATUS_MAX || (c->node == 0 && p->status >= 0)) {
		snprintf(why, whylen,
		         "an unexpected frame (type %u, node %u, seq %u, status %llu, %llu bytes)",
		         f->type, f->node, f->seq, (unsigned long long)f->call,
		         (unsigned long long)f->len);
		return 0;
	}
	return 1;
}

/* Reads what node j sent: frames, end of file or an error. */
static void peer_readable(struct job *job, int j)
{
	struct cluster *c = job->cl;
	struct peer *p = &c->peers[j];
	struct shmcoll_frame f;
	char why[256];

	while (p->fd >= 0) {
		size_t want = SHMCOLL_FRAME_BYTES;
		ssize_t n;

		if (c->final >= 0) {
			/* Node 0 after FINAL: nothing more matters; wait for the close. */
			n = recv(p->fd, p->in, sizeof(p->in), 0);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				peer_close(p);
			if (n <= 0)
				return;
			continue;
		}
		if (p->got >= SHMCOLL_FRAME_BYTES) {
			if (!header_ok(c, j, &f, why, sizeof(why))) {
				peer_lost(job, j, why);
				return;
			}
			want += (size_t)f.len;
		}
		if (p->got == want) {
			p->got = 0;
			peer_frame(job, j, &f, p->in + SHMCOLL_FRAME_BYTES);
			continue;
		}
		n = recv(p->fd, p->in + p->got, want - p->got, 0);
		if (n > 0) {
			p->got += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		snprintf(why, sizeof(why), "%s",
		         n == 0 ? "it closed the connection" : strerror(errno));
		peer_lost(job, j, why);
	}
}

/* This node's ranks and everything they started are gone. */
static void local_done(struct job *job)
{
	struct cluster *c = job->cl;
	int status = job->got_sig ? 128 + job->got_sig : job->status < 0 ? 0 : job->status;
	int rc;

	if (c->node == 0) {
		record(job, 0, status);
		return;
	}
	if (c->final >= 0)
		return;
	rc = peer_send(c, &c->peers[0], FRAME_STATUS, status, c->node);
	if (rc < 0)
		peer_lost(job, 0, strerror(-rc));
}

/* SIGINT or SIGTERM once this node's job has ended: stop waiting for the
 * others. Node 0 first tells them (the job's status is the signal's, unless it
 * was decided already). */
static void interrupted(struct job *job, int sig)
{
	struct cluster *c = job->cl;
	int j;

	if (c->node == 0)
		decide(job, 128 + sig, 0);
	else if (c->final < 0)
		c->final = 128 + sig;
	for (j = 0; j < c->nnodes; j++)
		peer_close(&c->peers[j]);
	c->linger = 0;
}

static int cluster_done(const struct job *job)
{
	const struct cluster *c = job->cl;
	int j;

	if (c->final < 0)
		return 0;
	for (j = 0; j < c->nnodes; j++)
		if (c->peers[j].fd >= 0 && c->linger)
			return 0;
	return 1;
}

/* ts - now; tv_sec is negative once ts has passed. */
static struct timespec until(const struct timespec *ts)
{
	struct timespec t, left;

	now(&t);
	left.tv_sec = ts->tv_sec - t.tv_sec;
	left.tv_nsec = ts->tv_nsec - t.tv_nsec;
	if (left.tv_nsec < 0) {
		left.tv_sec--;
		left.tv_nsec += 1000000000L;
	}
	return left;
}

static void on_signal(struct job *job, int sig)
{
	if (sig == SIGCHLD)
		return;
	if (job->gone) {
		/* The job is over: only its output is left, and the user wants out. */
		if (sig == SIGINT || sig == SIGTERM)
			job->io->abandon = 1;
		if (job->cl && (sig == SIGINT || sig == SIGTERM))
			interrupted(job, sig);
		return;
	}
	signal_job(job, sig);
	if (sig != SIGINT && sig != SIGTERM)
		return;
	if (job->got_sig) {
		signal_job(job, SIGKILL);
		arm_kill(job, KILL_AGAIN_MS);
	} else {
		/* Forwarded: the ranks' own chance to stop; SIGKILL
		 * follows for those that do not, as after a failure. */
		job->got_sig = sig;
		job->stopping = 1;
		arm_kill(job, KILL_GRACE_MS);
	}
}

/* The local job is over: pipes still open are held by someone outside it,
 * read for DRAIN_MS more (step 5 of "The ranks' output"). */
static void drain(struct job *job)
{
	struct io *io = job->io;

	now(&io->drain_at);
	io->drain_at.tv_nsec += DRAIN_MS * 1000000L;
	io->drain_at.tv_sec += io->drain_at.tv_nsec / 1000000000L;
	io->drain_at.tv_nsec %= 1000000000L;
	io->draining = 1;
}

/* Lowers *timeout (NULL: none yet) to the time left until ts; *left holds it. */
static void sooner(struct timespec **timeout, struct timespec *left, const struct timespec *ts)
{
	struct timespec l = until(ts);

	if (l.tv_sec < 0)
		l.tv_sec = l.tv_nsec = 0;
	if (!*timeout || l.tv_sec < left->tv_sec ||
	    (l.tv_sec == left->tv_sec && l.tv_nsec < left->tv_nsec)) {
		*left = l;
		*timeout = left;
	}
}

/* Waits for SIGCHLD, the forwarded signals (every one of them blocked and
 * read from sfd: there are no handlers at all), the SIGKILL deadline, the
 * ranks' output pipes and the launcher's outputs and, in a multi-node job, the
 * control connections, until the launcher has no child left (no rank, and
 * nothing a rank started), all their output is written and, in a multi-node
 * job, the job's status is known. The arena goes as soon as the children have. */
static void wait_job(struct job *job, int sfd)
{
	struct cluster *c = job->cl;
	struct io *io = job->io;
	struct pollfd *pf = io->pf;
	struct polled *who = io->who;

	for (;;) {
		struct timespec left, *timeout = NULL;
		struct signalfd_siginfo si;
		pid_t pid;
		int ws, n = 0, k;

		while (!job->gone) {
			pid = waitpid(-1, &ws, WNOHANG);
			if (pid > 0) {
				reap(job, pid, ws);
				continue;
			}
			if (pid < 0 && errno == EINTR)
				continue;
			if (pid < 0) {
				/* ECHILD: all gone (or reaped behind our back). */
				job->alive = 0;
				job->gone = 1;
				remove_arena(job);
				drain(job);
				if (c)
					local_done(job);
			} else if (job->alive == 0) {
				/* Every rank is gone but something they started
				 * is not: the job is over, and so is that. */
				stop_job(job);
			}
			break;
		}
		if (io->draining && until(&io->drain_at).tv_sec < 0) {
			for (k = 0; k < io->nstreams; k++)
				stream_close(&io->s[k]);
			io->draining = 0;
		}
		if (job->gone && (!c || cluster_done(job)) && io_done(io))
			break;
		if (!job->gone && job->kill_pending) {
			if (until(&job->kill_at).tv_sec < 0) {
				/* Again until nothing is left: a process may have
				 * been started, or adopted, since the last round. */
				signal_job(job, SIGKILL);
				arm_kill(job, KILL_AGAIN_MS);
				continue;
			}
			sooner(&timeout, &left, &job->kill_at);
		}
		if (c && c->linger) {
			if (until(&c->linger_at).tv_sec < 0) {
				c->linger = 0;
				continue;
			}
			sooner(&timeout, &left, &c->linger_at);
		}
		if (io->draining)
			sooner(&timeout, &left, &io->drain_at);
		pf[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
		who[n++] = (struct polled){POLL_SIGNALS, 0};
		for (k = 0; c && k < c->nnodes; k++) {
			if (c->peers[k].fd < 0)
				continue;
			pf[n] = (struct pollfd){.fd = c->peers[k].fd, .events = POLLIN};
			who[n++] = (struct polled){POLL_PEER, k};
		}
		/* A stream whose buffer is full waits for its lines to go out. */
		for (k = 0; !io->abandon && k < io->nstreams; k++) {
			const struct stream *s = &io->s[k];

			if (s->fd < 0 || s->len == LINE_CAP)
				continue;
			pf[n] = (struct pollfd){.fd = s->fd, .events = POLLIN};
			who[n++] = (struct polled){POLL_STREAM, k};
		}
		for (k = 0; k < 2; k++) {
			if (io->abandon || !output_pending(io, k) || output_held(io, k))
				continue;
			pf[n] = (struct pollfd){.fd = io->out[k].fd, .events = POLLOUT};
			who[n++] = (struct polled){POLL_OUTPUT, k};
		}
		if (ppoll(pf, (nfds_t)n, timeout, NULL) < 0)
			continue;
		for (k = 0; k < n; k++) {
			if (!pf[k].revents)
				continue;
			switch (who[k].kind) {
			case POLL_SIGNALS:
				while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
					on_signal(job, (int)si.ssi_signo);
				break;
			case POLL_PEER:
				if (c->peers[who[k].idx].fd == pf[k].fd)
					peer_readable(job, who[k].idx);
				break;
			case POLL_STREAM:
				if (io->s[who[k].idx].fd == pf[k].fd)
					stream_read(job, &io->s[who[k].idx]);
				break;
			case POLL_OUTPUT:
				if (!io->abandon)
					output_write(io, who[k].idx);
				break;
			}
		}
	}
}

static void print_line(void *arg, const char *line)
{
	(void)arg;
	printf(PROG ": %s\n", line);
}

/* --cleanup: one line per arena of this user looked at, then a count. */
static int sweep(void)
{
	int n = shmcoll__arena_sweep(print_line, NULL);

	if (n < 0) {
		fprintf(stderr, PROG ": cannot sweep /dev/shm: %s\n", strerror(-n));
		return EXIT_FAILURE_LAUNCHER;
	}
	printf(PROG ": removed %d stale arena%s\n", n, n == 1 ? "" : "s");
	return 0;
}

/* What the command line and the environment ask for. */
struct opts {
	int np;                 /* -n P, 0 if not given */
	int ppn;                /* --nproc-per-node P, 0 if not given */
	int nnodes;             /* --nnodes N, 0 if not given */
	int node;               /* --node-rank I, -1 if not given */
	const char *root;       /* --root HOST:PORT */
	const char *node_addr;  /* --node-addr, else SHMCOLL_NODE_ADDR */
	const char *connect_ms; /* --connect-timeout-ms, else SHMCOLL_CONNECT_TIMEOUT_MS */
	const char *timeout_ms; /* --timeout-ms */
	int bind;
	int cleanup;
	int tag;             /* --tag-output */
	const char *log_dir; /* --log-dir */
	int log_only;        /* --log-only */
};

enum {
	OPT_VERSION = 256,
	OPT_TIMEOUT,
	OPT_BIND,
	OPT_CLEANUP,
	OPT_NNODES,
	OPT_NODE_RANK,
	OPT_PPN,
	OPT_ROOT,
	OPT_NODE_ADDR,
	OPT_CONNECT,
	OPT_TAG,
	OPT_LOG_DIR,
	OPT_LOG_ONLY,
};

/* Parses the options; returns -1 to go on, or the status to exit with. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"np", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
	    {"bind", required_argument, NULL, OPT_BIND},
	    {"cleanup", no_argument, NULL, OPT_CLEANUP},
	    {"nnodes", required_argument, NULL, OPT_NNODES},
	    {"node-rank", required_argument, NULL, OPT_NODE_RANK},
	    {"nproc-per-node", required_argument, NULL, OPT_PPN},
	    {"root", required_argument, NULL, OPT_ROOT},
	    {"node-addr", required_argument, NULL, OPT_NODE_ADDR},
	    {"connect-timeout-ms", required_argument, NULL, OPT_CONNECT},
	    {"tag-output", no_argument, NULL, OPT_TAG},
	    {"log-dir", required_argument, NULL, OPT_LOG_DIR},
	    {"log-only", no_argument, NULL, OPT_LOG_ONLY},
	    {NULL, 0, NULL, 0},
	};
	int opt, v;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:hn:", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			if (parse_int(optarg, 1, MAX_RANKS, &o->np) < 0)
				return usage_error(
				    "-n wants a number of ranks from 1 to %d, not '%s'", MAX_RANKS,
				    optarg);
			break;
		case OPT_PPN:
			if (parse_int(optarg, 1, MAX_RANKS, &o->ppn) < 0)
				return usage_error(
				    "--nproc-per-node wants a number of ranks from 1 "
				    "to %d, not '%s'",
				    MAX_RANKS, optarg);
			break;
		case OPT_NNODES:
			if (parse_int(optarg, 1, SHMCOLL_NODES_MAX, &o->nnodes) < 0)
				return usage_error("--nnodes wants a number of nodes from 1 to %d, "
				                   "not '%s'",
				                   SHMCOLL_NODES_MAX, optarg);
			break;
		case OPT_NODE_RANK:
			if (parse_int(optarg, 0, SHMCOLL_NODES_MAX - 1, &o->node) < 0)
				return usage_error(
				    "--node-rank wants a node from 0 to N-1, not '%s'", optarg);
			break;
		case OPT_ROOT:
			o->root = optarg;
			break;
		case OPT_NODE_ADDR:
			o->node_addr = optarg;
			break;
		case OPT_CONNECT:
			o->connect_ms = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_int(optarg, INT_MIN, INT_MAX, &v) < 0)
				return usage_error("--timeout-ms wants an integer, not '%s'",
				                   optarg);
			o->timeout_ms = optarg;
			break;
		case OPT_BIND:
			if (!strcmp(optarg, "core"))
				o->bind = BIND_CORE;
			else if (!strcmp(optarg, "none"))
				o->bind = BIND_NONE;
			else if (!strcmp(optarg, "auto"))
				o->bind = BIND_AUTO;
			else
				return usage_error("--bind wants core, none or auto, not '%s'",
				                   optarg);
			break;
		case OPT_CLEANUP:
			o->cleanup = 1;
			break;
		case OPT_TAG:
			o->tag = 1;
			break;
		case OPT_LOG_DIR:
			if (!*optarg)
				return usage_error("--log-dir wants a directory");
			o->log_dir = optarg;
			break;
		case OPT_LOG_ONLY:
			o->log_only = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf(PROG " %d.%d.%d\n", SHMCOLL_VERSION_MAJOR, SHMCOLL_VERSION_MINOR,
			       SHMCOLL_VERSION_PATCH);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	return -1;
}

/* Checks the multi-node options and fills the rendezvous' configuration and
 * the token; returns -1 to go on, or the status to exit with. */
static int check_nodes(struct opts *o, struct shmcoll_rdv_cfg *cfg, char *token, size_t len)
{
	const char *multi = o->node >= 0    ? "--node-rank"
	                    : o->root       ? "--root"
	                    : o->node_addr  ? "--node-addr"
	                    : o->connect_ms ? "--connect-timeout-ms"
	                                    : NULL;
	const char *env = getenv("SHMCOLL_TOKEN");
	char host[SHMCOLL_ADDR_MAX];
	uint16_t port;

	if (o->np && o->ppn && o->np != o->ppn)
		return usage_error("-n %d and --nproc-per-node %d disagree", o->np, o->ppn);
	if (o->nnodes == 0 && multi)
		return usage_error("%s is for a multi-node job: it needs --nnodes", multi);
	if (o->nnodes > 1 && (o->node < 0 || !o->root))
		return usage_error("a job of %d nodes needs --node-rank and --root", o->nnodes);
	if (o->nnodes && o->node >= o->nnodes)
		return usage_error("--node-rank %d is out of range: the nodes are 0 to %d", o->node,
		                   o->nnodes - 1);
	if (o->root && (shmcoll__addr_split(o->root, host, sizeof(host), &port) < 0 || !port))
		return usage_error("--root wants HOST:PORT (a port from 1 to 65535), not '%s'",
		                   o->root);
	/* The environment counts only where a multi-node job runs; the options always. */
	if (o->nnodes > 1 && !o->node_addr)
		o->node_addr = getenv("SHMCOLL_NODE_ADDR");
	if (o->nnodes > 1 && !o->connect_ms)
		o->connect_ms = getenv("SHMCOLL_CONNECT_TIMEOUT_MS");
	if (o->node_addr && (!*o->node_addr || strlen(o->node_addr) >= SHMCOLL_ADDR_MAX))
		return usage_error("--node-addr (or SHMCOLL_NODE_ADDR) wants a host, not '%s'",
		                   o->node_addr);
	cfg->timeout_ms = CONNECT_TIMEOUT_MS;
	if (o->connect_ms && parse_int(o->connect_ms, 1, INT_MAX, &cfg->timeout_ms) < 0)
		return usage_error("--connect-timeout-ms (or SHMCOLL_CONNECT_TIMEOUT_MS) wants a "
		                   "positive number of milliseconds, not '%s'",
		                   o->connect_ms);
	if (o->nnodes <= 1)
		return -1;
	if ((o->np ? o->np : o->ppn) > SHMCOLL_MAX_RANKS)
		return usage_error("a multi-node job has at most %d ranks per node",
		                   SHMCOLL_MAX_RANKS);
	if (env && !shmcoll__token_valid(env))
		return usage_error("SHMCOLL_TOKEN must be 1 to %d characters of [0-9A-Za-z_-]",
		                   SHMCOLL_TOKEN_MAX);
	if (!env && o->node > 0)
		return usage_error("node %d needs the job's token: set SHMCOLL_TOKEN to the one "
		                   "node 0 printed (or was given)",
		                   o->node);
	/* Empty: node 0 makes one (job_token()) once the usage is known good. */
	snprintf(token, len, "%s", env ? env : "");
	cfg->nnodes = o->nnodes;
	cfg->node = o->node;
	cfg->nproc = o->np ? o->np : o->ppn;
	cfg->token = token;
	cfg->root = o->root;
	cfg->node_addr = o->node_addr;
	return -1;
}

/* Node 0 without SHMCOLL_TOKEN: a random token, printed for the other nodes.
 * Returns 0 or -1 with a message printed. */
static int job_token(char *token, size_t len)
{
	int err;

	if (*token)
		return 0;
	err = shmcoll__rdv_make_token(token, len);
	if (err < 0) {
		fprintf(stderr, PROG ": cannot make a job token: %s\n", strerror(-err));
		return -1;
	}
	fprintf(stderr, PROG ": job token %s; start the other nodes with SHMCOLL_TOKEN=%s\n", token,
	        token);
	return 0;
}

/* Runs the rendezvous, sets the multi-node part of the ranks' environment
 * and builds job->cl. Returns 0, or -1 with a message printed. */
static int join_nodes(struct job *job, const struct shmcoll_rdv_cfg *cfg)
{
	struct shmcoll_rdv r;
	struct cluster *c;
	char err[512], buf[32], host[SHMCOLL_ADDR_MAX], *nodes;
	size_t at = 0;
	uint16_t port;
	int rc, j;

	rc = shmcoll__rdv_run(cfg, &r, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, PROG ": node %d: %s\n", cfg->node, err);
		return -1;
	}
	c = calloc(1, sizeof(*c));
	nodes = malloc((size_t)cfg->nnodes * SHMCOLL_ADDR_MAX);
	if (c)
		c->peers = calloc((size_t)cfg->nnodes, sizeof(*c->peers));
	if (!c || !nodes || !c->peers) {
		fprintf(stderr, PROG ": out of memory\n");
		goto err;
	}
	for (j = 0; j < cfg->nnodes; j++) {
		at += (size_t)sprintf(nodes + at, "%s%s", j ? "," : "", r.addrs[j]);
		c->peers[j].fd = r.ctl[j];
		c->peers[j].status = -1;
		r.ctl[j] = -1;
	}
	/* The table was node 0's first frame on each connection. */
	for (j = 0; j < cfg->nnodes; j++)
		if (cfg->node == 0)
			c->peers[j].sent = 1;
		else
			c->peers[j].rcvd = 1;
	if (!r.master_port && cfg->node > 0)
		fprintf(stderr, PROG ": node 0's launcher handed out no MASTER_PORT (it predates "
		                     "torchrun's variables): MASTER_ADDR, MASTER_PORT and "
		                     "TORCHELASTIC_RUN_ID are not set\n");
	/* Every node's ranks reach rank 0's store where they reached node 0. */
	rc = shmcoll__addr_split(cfg->root, host, sizeof(host), &port) < 0
	         ? -1
	         : torch_env(cfg->nproc, cfg->nnodes, cfg->node, host, r.master_port, r.run_id);
	if (rc < 0) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		goto err;
	}
	snprintf(buf, sizeof(buf), "%d", cfg->nnodes);
	rc = setenv("SHMCOLL_NNODES", buf, 1);
	snprintf(buf, sizeof(buf), "%d", cfg->node);
	if (rc == 0 &&
	    (setenv("SHMCOLL_NODE_RANK", buf, 1) < 0 ||
	     setenv("SHMCOLL_TOKEN", cfg->token, 1) < 0 || setenv("SHMCOLL_NODES", nodes, 1) < 0))
		rc = -1;
	if (rc < 0) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		goto err;
	}
	c->nnodes = cfg->nnodes;
	c->node = cfg->node;
	c->final = -1;
	job->cl = c;
	job->leader_fd = r.leader_fd;
	job->rank0 = cfg->node * cfg->nproc;
	r.leader_fd = -1;
	shmcoll__rdv_close(&r, cfg->nnodes);
	free(nodes);
	return 0;
err:
	if (c) {
		for (j = 0; c->peers && j < cfg->nnodes; j++)
			peer_close(&c->peers[j]);
		free(c->peers);
	}
	free(c);
	free(nodes);
	shmcoll__rdv_close(&r, cfg->nnodes);
	return -1;
}

static void free_cluster(struct cluster *c)
{
	int j;

	if (!c)
		return;
	for (j = 0; j < c->nnodes; j++)
		peer_close(&c->peers[j]);
	free(c->peers);
	free(c);
}

int main(int argc, char **argv)
{
	struct opts o = {.node = -1, .bind = BIND_AUTO};
	struct shmcoll_rdv_cfg cfg = {0};
	struct job job = {.status = -1, .leader_fd = -1};
	sigset_t waitset, origmask;
	struct sigaction sa = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
	char buf[32], token[SHMCOLL_TOKEN_MAX + 1];
	int err, ncpus, rc, sfd, fd;
	unsigned port = 0;
	uint64_t run;
	rlim_t need;

	/* The pipes and files opened below must not become stdin, stdout or stderr. */
	for (fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return EXIT_FAILURE_LAUNCHER;
	rc = parse_opts(argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (o.cleanup) {
		if (o.np || o.ppn || o.nnodes || o.node >= 0 || o.root || o.node_addr ||
		    o.connect_ms || o.timeout_ms || o.tag || o.log_dir || o.log_only ||
		    optind < argc)
			return usage_error("--cleanup runs no job: it takes no -n and no PROGRAM");
		return sweep();
	}
	if (o.log_only && !o.log_dir)
		return usage_error("--log-only needs --log-dir");
	rc = check_nodes(&o, &cfg, token, sizeof(token));
	if (rc >= 0)
		return rc;
	job.size = o.np ? o.np : o.ppn;
	if (job.size == 0)
		return usage_error("the number of ranks is missing (-n P or --nproc-per-node P)");
	if (optind >= argc)
		return usage_error("no PROGRAM to run");
	job.argv = argv + optind;
	job.launcher = getpid();
	ncpus = allowed_cpus(&job.cpus);
	if (o.bind == BIND_CORE && ncpus < job.size) {
		fprintf(stderr, PROG ": --bind core: %d ranks but only %d CPUs allowed\n", job.size,
		        ncpus);
		return EXIT_USAGE;
	}
	job.bind = o.bind != BIND_NONE && ncpus >= job.size;
	job.ncpus = ncpus;
	/* Node i starts at CPU i * P (modulo the CPUs): on machines of their
	 * own that changes nothing, but nodes that share one (tests, a machine
	 * carved in two) then spread over its CPUs instead of all piling onto
	 * the first P. */
	if (cfg.nnodes > 1 && ncpus > 0)
		job.cpu0 = (int)(((long)cfg.node * job.size) % ncpus);

	if (cfg.nnodes > 1 && job_token(token, sizeof(token)) < 0)
		return EXIT_FAILURE_LAUNCHER;
	job.rank0 = cfg.nnodes > 1 ? cfg.node * job.size : 0;
	/* The launcher holds two pipes per rank, and two files with --log-dir; the
	 * ranks get the limit back (exec_rank()). */
	need = (rlim_t)job.size * (o.log_dir ? 4 : 2) + (rlim_t)cfg.nnodes + 16;
	if (getrlimit(RLIMIT_NOFILE, &job.files) < 0)
		job.files.rlim_cur = job.files.rlim_max = RLIM_INFINITY; /* the ranks': unchanged */
	else if (job.files.rlim_cur != RLIM_INFINITY && job.files.rlim_cur < need) {
		struct rlimit more = {.rlim_cur = need, .rlim_max = job.files.rlim_max};

		if ((more.rlim_max != RLIM_INFINITY && more.rlim_max < need) ||
		    setrlimit(RLIMIT_NOFILE, &more) < 0) {
			fprintf(stderr,
			        PROG
			        ": %d ranks need %llu open files in the launcher, more than its "
			        "limit allows (ulimit -n)\n",
			        job.size, (unsigned long long)need);
			return EXIT_FAILURE_LAUNCHER;
		}
	}
	err = make_job_id(&job);
	if (err == 0)
		err = random_u64(&run);
	if (err < 0) {
		fprintf(stderr, PROG ": cannot make a job id: %s\n", strerror(-err));
		return EXIT_FAILURE_LAUNCHER;
	}
	/* A single-node job runs inside no other: drop what an enclosing
	 * multi-node job may have left in the environment. */
	if (cfg.nnodes <= 1 &&
	    (unsetenv("SHMCOLL_NNODES") < 0 || unsetenv("SHMCOLL_NODE_RANK") < 0 ||
	     unsetenv("SHMCOLL_NODES") < 0 || unsetenv("SHMCOLL_NET_FD") < 0)) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		return EXIT_FAILURE_LAUNCHER;
	}
	snprintf(buf, sizeof(buf), "%d", job.size);
	if (setenv("SHMCOLL_LOCAL_SIZE", buf, 1) < 0 || setenv("SHMCOLL_JOB", job.id, 1) < 0 ||
	    (o.timeout_ms && setenv("SHMCOLL_TIMEOUT_MS", o.timeout_ms, 1) < 0)) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		return EXIT_FAILURE_LAUNCHER;
	}
	/* What the ranks may re-pin to (a benchmark pins its own way): the
	 * launcher's own set, which binding narrows to one CPU per rank. */
	if (ncpus > 0) {
		static char cpulist[8 * CPU_SETSIZE];

		format_cpus(job.cpus, ncpus, cpulist, sizeof(cpulist));
		if (setenv("SHMCOLL_CPUS", cpulist, 1) < 0) {
			fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n",
			        strerror(errno));
			return EXIT_FAILURE_LAUNCHER;
		}
	} else if (unsetenv("SHMCOLL_CPUS") < 0) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		return EXIT_FAILURE_LAUNCHER;
	}
	snprintf(buf, sizeof(buf), "%ld", (long)job.size * (cfg.nnodes > 1 ? cfg.nnodes : 1));
	if (setenv("SHMCOLL_SIZE", buf, 1) < 0) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		return EXIT_FAILURE_LAUNCHER;
	}
	/* torchrun's: node 0 (or the one node) finds MASTER_PORT and the run id;
	 * the rendezvous hands them to the other nodes (join_nodes()). */
	if (cfg.nnodes <= 1 || cfg.node == 0) {
		port = free_port();
		if (!port)
			fprintf(stderr,
			        PROG ": found no free TCP port for MASTER_PORT: MASTER_ADDR, "
			             "MASTER_PORT and TORCHELASTIC_RUN_ID are not set\n");
		cfg.master_port = (uint16_t)port;
		cfg.run_id = run;
	}
	if (cfg.nnodes <= 1 && torch_env(job.size, 1, 0, "127.0.0.1", port, run) < 0) {
		fprintf(stderr, PROG ": cannot set the ranks' environment: %s\n", strerror(errno));
		return EXIT_FAILURE_LAUNCHER;
	}
	job.pids = calloc((size_t)job.size, sizeof(*job.pids));
	if (!job.pids) {
		fprintf(stderr, PROG ": out of memory\n");
		return EXIT_FAILURE_LAUNCHER;
	}
	if (io_open(&job, cfg.nnodes, o.tag, o.log_dir, o.log_only) < 0) {
		free(job.pids);
		free(job.cpus);
		return EXIT_FAILURE_LAUNCHER;
	}
	/* Before any signal is blocked: until the ranks start, SIGINT simply
	 * ends the launcher, and the other nodes see its connection close. */
	if (cfg.nnodes > 1 && join_nodes(&job, &cfg) < 0) {
		io_close(&job);
		free(job.pids);
		free(job.cpus);
		return EXIT_FAILURE_LAUNCHER;
	}
	/* A reader of the launcher's output that goes away is an EPIPE to handle
	 * (step 4 of "The ranks' output"), not a death; the ranks get the
	 * disposition back. */
	sigaction(SIGPIPE, &ign, &job.pipe_sa);

	/* An inherited SIG_IGN for SIGCHLD would reap the ranks behind our back. */
	sigaction(SIGCHLD, &sa, NULL);
	/* Processes the ranks start and leave behind become our children, so
	 * none outlives the job (best effort: the ranks' group is signalled
	 * anyway while one of them lives). */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Blocked before the first fork, so no signal is lost while ranks start;
	 * each rank restores origmask before exec. */
	sigemptyset(&waitset);
	sigaddset(&waitset, SIGCHLD);
	sigaddset(&waitset, SIGINT);
	sigaddset(&waitset, SIGTERM);
	sigaddset(&waitset, SIGHUP);
	sigaddset(&waitset, SIGQUIT);
	sigprocmask(SIG_BLOCK, &waitset, &origmask);
	sfd = signalfd(-1, &waitset, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		fprintf(stderr, PROG ": signalfd: %s\n", strerror(errno));
		job.status = EXIT_FAILURE_LAUNCHER;
		job.gone = 1;
		if (job.cl)
			local_done(&job);
	} else if (start_ranks(&job, &origmask) < 0) {
		job.status = EXIT_FAILURE_LAUNCHER;
		stop_job(&job);
	}
	if (job.leader_fd >= 0)
		close(job.leader_fd);
	if (sfd >= 0)
		wait_job(&job, sfd);
	if (sfd >= 0)
		close(sfd);
	io_close(&job);
	free(job.pids);
	free(job.cpus);

	if (job.cl) {
		rc = job.cl->final < 0 ? EXIT_FAILURE_LAUNCHER : job.cl->final;
		free_cluster(job.cl);
		return rc;
	}
	if (job.got_sig)
		return 128 + job.got_sig;
	return job.status < 0 ? 0 : job.status;
}
