/* soak.c - shmcoll-soak: randomized collectives for a while at P ranks, every
 * result checked on every rank; the ranks stop together at a point they
 * agree on, and rank 0 prints what ran. Exit 0 iff nothing was wrong.
 *
 *   shmcoll-run -n P shmcoll-soak [--seconds N] [--seed S] [--max-bytes B] [--calls N]
 *
 * How it stays in step: every rank draws the same call sequence from the
 * seed (draw.c), so they agree on collective, dtype, op, count, root, buffer
 * form and when to reallocate the symmetric buffers; each rank's inputs are
 * a function of (seed, call index, rank), so each computes its exact
 * expected result alone (check.c). Every CONTROL_CALLS calls (or
 * CONTROL_BYTES of buffers) the ranks allreduce (stop votes, mismatches):
 * rank 0 votes to stop once the time is up, and any mismatch stops the run,
 * so no rank leaves while another is still in a call (and a last barrier
 * keeps them all until rank 0 has printed the summary). A call that returns an
 * error aborts the communicator (the peers' calls fail at once) and exits. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "tests/soak/soak.h"

#define CONTROL_CALLS     64
#define CONTROL_BYTES     (32ull << 20)
#define DEFAULT_SECONDS   10.0
#define DEFAULT_MAX_BYTES (8u << 20)

struct opts {
	double seconds; /* < 0: no time limit (only with --calls) */
	uint64_t seed;
	int have_seed;
	size_t max_bytes;
	uint64_t calls; /* 0: no limit */
};

struct coll_stats {
	uint64_t calls, bytes, zero, inplace, sym;
};

struct stats {
	struct coll_stats coll[TH_COLL_COUNT];
	unsigned char seen[TH_COLL_COUNT][SHMCOLL_DTYPE_COUNT][SHMCOLL_OP_COUNT];
	uint64_t calls, controls;
};

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: shmcoll-run -n P shmcoll-soak [OPTIONS]\n"
	        "Randomized collectives on every rank, every result checked.\n"
	        "  --seconds N    run about N seconds (default %g; fractions allowed)\n"
	        "  --seed S       the call sequence's seed (default: random, printed)\n"
	        "  --max-bytes B  largest send or receive buffer of a rank (default %u; K, M, G\n"
	        "                 suffixes)\n"
	        "  --calls N      stop after N calls (with no --seconds: no time limit); with\n"
	        "                 --seed, replays a failing run exactly up to its failure\n"
	        "Exit status 0 iff no result mismatched and no call failed.\n",
	        DEFAULT_SECONDS, DEFAULT_MAX_BYTES);
}

static int parse_u64(const char *s, uint64_t *out, int suffixes)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -1;
	if (suffixes && *end) {
		int shift = *end == 'K' || *end == 'k'   ? 10
		            : *end == 'M' || *end == 'm' ? 20
		            : *end == 'G' || *end == 'g' ? 30
		                                         : -1;

		if (shift < 0 || end[1] || v > (~0ull >> shift))
			return -1;
		v <<= shift;
		end++;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
	    {"seconds", required_argument, NULL, 's'},
	    {"seed", required_argument, NULL, 'S'},
	    {"max-bytes", required_argument, NULL, 'b'},
	    {"calls", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch, have_seconds = 0;
	uint64_t v;
	char *end;

	memset(o, 0, sizeof(*o));
	o->seconds = DEFAULT_SECONDS;
	o->max_bytes = DEFAULT_MAX_BYTES;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->seconds >= 0)) {
				fprintf(stderr, "shmcoll-soak: --seconds wants a number >= 0\n");
				return -1;
			}
			have_seconds = 1;
			break;
		case 'S':
			if (parse_u64(optarg, &o->seed, 0)) {
				fprintf(stderr, "shmcoll-soak: --seed wants an integer\n");
				return -1;
			}
			o->have_seed = 1;
			break;
		case 'b':
			if (parse_u64(optarg, &v, 1) || v == 0 || v > ((uint64_t)1 << 40)) {
				fprintf(stderr, "shmcoll-soak: --max-bytes wants a byte count\n");
				return -1;
			}
			o->max_bytes = (size_t)v;
			break;
		case 'c':
			if (parse_u64(optarg, &o->calls, 0) || o->calls == 0) {
				fprintf(stderr, "shmcoll-soak: --calls wants a count >= 1\n");
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "shmcoll-soak: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (o->calls && !have_seconds)
		o->seconds = -1;
	return 0;
}

/* SHMCOLL_SOAK_CORRUPT=K[:R[:guard]]: see struct soak_corrupt. */
static int parse_corrupt(struct soak_corrupt *k)
{
	const char *s = getenv("SHMCOLL_SOAK_CORRUPT");
	char *end;

	memset(k, 0, sizeof(*k));
	k->rank = -1;
	if (!s || !*s)
		return 0;
	errno = 0;
	k->at = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	if (*end == ':') {
		s = end + 1;
		k->rank = (int)strtol(s, &end, 0);
		if (end == s)
			return -1;
	}
	if (*end == ':') {
		if (strcmp(end + 1, "guard"))
			return -1;
		k->guard = 1;
		end += strlen(end);
	}
	if (*end)
		return -1;
	k->armed = 1;
	return 0;
}

/* Counters every rank can see, for the barrier's ordering check: a small
 * POSIX shared-memory object named after the job (as tests/progs/contract.c
 * does), removed by rank 0 once all have mapped it (after setup's
 * allreduce). NULL when it cannot be had; *name receives the name. */
static _Atomic uint32_t *barrier_counters(int size, char *name, size_t len)
{
	size_t bytes = (size_t)size * SOAK_BAR_STRIDE * sizeof(uint32_t);
	const char *job = getenv("SHMCOLL_JOB");
	void *p;
	size_t i;
	int fd;

	name[0] = '\0';
	if (!job || !*job || size < 2)
		return calloc(1, bytes);
	snprintf(name, len, "/shmcoll-soak.%u.%s", (unsigned)getuid(), job);
	for (i = 1; name[i]; i++)
		if (name[i] == '/')
			name[i] = '_';
	fd = shm_open(name, O_CREAT | O_RDWR, 0600);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)bytes) < 0) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static void fmt_bytes(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ull << 30))
		snprintf(buf, len, "%.2f GiB", (double)b / (double)(1ull << 30));
	else if (b >= (1ull << 20))
		snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
	else if (b >= 1024)
		snprintf(buf, len, "%.1f KiB", (double)b / 1024.0);
	else
		snprintf(buf, len, "%llu B", (unsigned long long)b);
}

static void count_call(struct stats *s, const struct soak_call *c, int size, size_t symcap)
{
	struct coll_stats *cs = &s->coll[c->coll];
	size_t region = th_coll_region_elems(c->coll, c->count, size) * th_dtype_size(c->dtype);

	s->calls++;
	cs->calls++;
	cs->bytes += soak_result_bytes(c, size);
	cs->zero += c->count == 0 && c->coll != TH_BARRIER;
	cs->inplace += (c->flags & SOAK_IN_PLACE) && c->coll != TH_BCAST;
	cs->sym += c->sym != TH_SYM_NONE && region <= symcap && c->coll != TH_BARRIER;
	if (c->count)
		s->seen[c->coll][c->dtype][c->op] = 1;
}

static void print_summary(const struct stats *s, const struct opts *o, const struct soak_state *st,
                          double elapsed, uint64_t mismatches, int errors)
{
	static const char *const env_vars[] = {"SHMCOLL_ALGO", "SHMCOLL_ARENA_BYTES",
	                                       "SHMCOLL_CHUNK_BYTES", "SHMCOLL_NT", "SHMCOLL_ISA"};
	unsigned red = 0, red_all = 0, data = 0, data_all = 0;
	size_t i;
	uint64_t total_bytes = 0;
	char b[32];
	int c, dt, op;

	printf("shmcoll-soak: %-15s %9s %12s %8s %9s %10s\n", "collective", "calls", "results",
	       "count=0", "in-place", "symmetric");
	for (c = 0; c < TH_COLL_COUNT; c++) {
		const struct coll_stats *cs = &s->coll[c];

		fmt_bytes(cs->bytes, b, sizeof(b));
		total_bytes += cs->bytes;
		printf("shmcoll-soak:   %-13s %9llu %12s %8llu %9llu %10llu\n", th_coll_name(c),
		       (unsigned long long)cs->calls, b, (unsigned long long)cs->zero,
		       (unsigned long long)cs->inplace, (unsigned long long)cs->sym);
		for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++) {
			if (c == TH_BARRIER)
				break;
			if (!th_coll_reduces(c)) {
				data_all++;
				data += s->seen[c][dt][SHMCOLL_SUM];
				continue;
			}
			for (op = 0; op < SHMCOLL_OP_COUNT; op++) {
				if (!th_op_valid(dt, op))
					continue;
				red_all++;
				red += s->seen[c][dt][op];
			}
		}
	}
	fmt_bytes(total_bytes, b, sizeof(b));
	printf("shmcoll-soak: covered %u/%u (reduction, dtype, op) and %u/%u (data collective, "
	       "dtype) with count > 0; %llu symmetric reallocations (%llu shrunk to fit); %llu "
	       "control allreduces\n",
	       red, red_all, data, data_all, (unsigned long long)st->sym_reallocs,
	       (unsigned long long)st->sym_shrinks, (unsigned long long)s->controls);
	printf("shmcoll-soak: summary P=%d calls=%llu seconds=%.2f calls/s=%.1f results=%s "
	       "mismatches=%llu errors=%d seed=0x%016llx SHMCOLL_ALGO=%s max-bytes=%zu: %s\n",
	       st->size, (unsigned long long)s->calls, elapsed,
	       elapsed > 0 ? (double)s->calls / elapsed : 0.0, b, (unsigned long long)mismatches,
	       errors, (unsigned long long)st->seed,
	       getenv("SHMCOLL_ALGO") ? getenv("SHMCOLL_ALGO") : "(unset)", o->max_bytes,
	       mismatches || errors ? "FAIL" : "PASS");
	if (mismatches || errors) {
		/* The sequence depends on the seed, P and max-bytes only; the
		 * environment picks the protocols and the arena. */
		printf("shmcoll-soak: reproduce with:");
		for (i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
			if (getenv(env_vars[i]))
				printf(" %s=%s", env_vars[i], getenv(env_vars[i]));
		printf(" shmcoll-run -n %d shmcoll-soak --seed 0x%016llx --max-bytes %zu --calls "
		       "%llu\n",
		       st->size, (unsigned long long)st->seed, o->max_bytes,
		       (unsigned long long)s->calls);
	}
	fflush(stdout);
}

/* A call failed: say so, fail the peers' calls at once, and leave. */
static void die_call(struct soak_state *st, const struct soak_call *c, const char *what, int rc)
{
	char desc[256] = "";

	if (c)
		soak_describe(c, desc, sizeof(desc));
	fprintf(stderr,
	        "shmcoll-soak: ERROR rank %d/%d: %s%s%s returned %d (%s): %s (seed 0x%016llx)\n",
	        st->rank, st->size, what, c ? " " : "", desc, rc, shmcoll_strerror(rc),
	        shmcoll_last_error(st->comm), (unsigned long long)st->seed);
	shmcoll_comm_abort(st->comm);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct stats s;
	struct soak_state st;
	struct soak_limits lim;
	struct soak_rng rng;
	struct soak_call c;
	struct sigaction sa;
	shmcoll_comm *comm;
	uint64_t seed, since_calls = 0, since_bytes = 0, mism = 0, total_mism = 0, v[2], sum[2];
	char shm_name[300], what[64];
	double t0, elapsed;
	int rc, rank, size, stop = 0, errors = 0;

	if (parse_opts(argc, argv, &o))
		return 2;
	rc = shmcoll_init(&comm);
	if (rc) {
		fprintf(stderr, "shmcoll-soak: shmcoll_init: %s: %s\n", shmcoll_strerror(rc),
		        shmcoll_last_error(NULL));
		return 1;
	}
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);

	/* The seed: given (the same argv on every rank) or rank 0's, broadcast. */
	seed = o.seed;
	if (!o.have_seed) {
		if (rank == 0 && getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
			seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
		rc = shmcoll_bcast(&seed, 1, SHMCOLL_UINT64, 0, comm);
		if (rc) {
			fprintf(stderr, "shmcoll-soak: rank %d: bcast of the seed: %s: %s\n", rank,
			        shmcoll_strerror(rc), shmcoll_last_error(comm));
			shmcoll_comm_abort(comm);
			return 1;
		}
	}
	if (rank == 0) {
		printf(
		    "shmcoll-soak: P=%d seed=0x%016llx seconds=%g max-bytes=%zu SHMCOLL_ALGO=%s\n",
		    size, (unsigned long long)seed, o.seconds, o.max_bytes,
		    getenv("SHMCOLL_ALGO") ? getenv("SHMCOLL_ALGO") : "(unset)");
		fflush(stdout);
	}

	/* Setup, then one allreduce in which every rank says whether its setup
	 * worked: nobody starts (or waits for a rank that will not). */
	memset(&s, 0, sizeof(s));
	v[0] = soak_state_init(&st, comm, seed, o.max_bytes) != 0;
	st.bar = barrier_counters(size, shm_name, sizeof(shm_name));
	v[1] = st.bar == NULL;
	if (parse_corrupt(&st.corrupt)) {
		fprintf(stderr, "shmcoll-soak: SHMCOLL_SOAK_CORRUPT wants K[:RANK[:guard]]\n");
		v[0] = 1;
	}
	rc = shmcoll_allreduce(v, sum, 2, SHMCOLL_UINT64, SHMCOLL_SUM, comm);
	if (shm_name[0] && rank == 0)
		shm_unlink(shm_name);
	if (rc || sum[0] || sum[1]) {
		if (rc)
			die_call(&st, NULL, "setup allreduce", rc);
		fprintf(stderr, "shmcoll-soak: rank %d: setup failed on %llu rank(s)%s%s\n", rank,
		        (unsigned long long)(sum[0] + sum[1]),
		        v[0] ? ": out of memory, or a bad SHMCOLL_SOAK_CORRUPT" : "",
		        v[1] ? ": barrier counters (shm_open)" : "");
		return 1;
	}
	st.bar_shared = shm_name[0] != '\0' || size == 1;

	lim.size = size;
	lim.max_bytes = o.max_bytes;
	rng.state = seed;
	rc = soak_sym_realloc(&st, &rng, o.max_bytes);
	if (rc) {
		die_call(&st, NULL, "symmetric allocation", rc);
		return 1;
	}

	t0 = now_s();
	memset(&c, 0, sizeof(c));
	for (c.index = 0; !stop; c.index++) {
		if (o.calls && c.index >= o.calls)
			break;
		if (soak_draw_realloc(&rng)) {
			rc = soak_sym_realloc(&st, &rng, o.max_bytes);
			if (rc) {
				snprintf(what, sizeof(what),
				         "symmetric reallocation before call %llu",
				         (unsigned long long)c.index);
				die_call(&st, NULL, what, rc);
				errors = 1;
				break;
			}
		}
		soak_draw(&rng, &lim, seed, &c);
		rc = soak_run(&st, &c);
		if (rc < 0) {
			snprintf(what, sizeof(what), "call %llu", (unsigned long long)c.index);
			die_call(&st, &c, what, rc);
			errors = 1;
			break;
		}
		mism += (uint64_t)rc;
		count_call(&s, &c, size, st.symcap);
		since_bytes += th_coll_region_elems(c.coll, c.count, size) * th_dtype_size(c.dtype);
		if (++since_calls < CONTROL_CALLS && since_bytes < CONTROL_BYTES)
			continue;
		/* The control step: every rank makes it after the same call. */
		v[0] = interrupted || (rank == 0 && o.seconds >= 0 && now_s() - t0 >= o.seconds);
		v[1] = mism;
		rc = shmcoll_allreduce(v, sum, 2, SHMCOLL_UINT64, SHMCOLL_SUM, comm);
		if (rc) {
			die_call(&st, NULL, "control allreduce", rc);
			errors = 1;
			break;
		}
		s.controls++;
		total_mism += sum[1];
		mism = since_calls = since_bytes = 0;
		stop = sum[0] || sum[1];
	}
	elapsed = now_s() - t0;

	if (!errors) {
		/* The last control: mismatches since the one before. */
		v[0] = 1;
		v[1] = mism;
		rc = shmcoll_allreduce(v, sum, 2, SHMCOLL_UINT64, SHMCOLL_SUM, comm);
		if (rc) {
			die_call(&st, NULL, "final control allreduce", rc);
			errors = 1;
		} else {
			total_mism += sum[1];
			/* Every rank voted 1 here: any other sum is a wrong
			 * allreduce, which the calls checked so far missed. */
			if (sum[0] != (uint64_t)size) {
				fprintf(
				    stderr,
				    "shmcoll-soak: rank %d: final control allreduce summed %llu "
				    "votes of 1 over %d ranks\n",
				    rank, (unsigned long long)sum[0], size);
				total_mism++;
			}
		}
	}
	if (!errors) {
		rc = soak_sym_free(&st);
		if (rc) {
			die_call(&st, NULL, "shmcoll_free", rc);
			errors = 1;
		}
	}
	if (rank == 0)
		print_summary(&s, &o, &st, elapsed, total_mism, errors);
	if (!errors) {
		/* No rank exits (and makes shmcoll-run stop the others) before
		 * rank 0 has printed the summary. */
		rc = shmcoll_barrier(comm);
		if (!rc)
			rc = shmcoll_comm_destroy(comm);
		if (rc) {
			fprintf(stderr, "shmcoll-soak: rank %d: shutdown: %d (%s)\n", rank, rc,
			        shmcoll_strerror(rc));
			errors = 1;
		}
	}
	soak_state_fini(&st);
	return total_mism || errors ? 1 : 0;
}
