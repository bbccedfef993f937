/* c2c.c - the c2c mode of shmcoll-bench: core-to-core latency, one cache line ping-ponged
 * between every pair of CPUs by two processes of the job (or two threads of a job of one),
 * one-way nanoseconds printed as a matrix, written as CSV and drawn as a heatmap. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mem.h"
#include "bench/plot.h"

/*
 * The protocol (the "1 shared line" ping-pong of the core-to-core-latency tool):
 * 1. One 64-byte line holds a counter that only grows. Side A (rank 0, or the main thread)
 *    writes 2k+1 and waits for 2k+2; side B (rank 1, or a second thread) waits for 2k+1 and
 *    writes 2k+2. A round trip moves the line A -> B -> A: two one-way hops.
 * 2. For each pair of CPUs (i, j), i before j in the list, A pins itself to i and B to j, and
 *    the sides meet: an allreduce (MAX) of an exit code, which every rank of the job joins, for
 *    processes; a handshake of two sequence words for threads.
 * 3. Then, batches times: WARMUP untimed round trips (the first warm up the pair, the later
 *    ones take up the wake-up from the meeting, which would otherwise be timed), `rounds`
 *    round trips timed by A, A's check of the counter, and a meeting that carries A's verdict.
 *    A meeting per batch keeps every wait short: idle ranks wait in it one batch at most, far
 *    inside the library's wait bound, however many pairs there are.
 * 4. The counter goes on across pairs, so A knows where each batch must end: batch b of pair p
 *    ends at 2 * (p * batches + b + 1) * (WARMUP + rounds).
 */

#define WARMUP      1000
#define MAX_ROUNDS  100000000L
#define MAX_BATCHES 1000
/* Up to this many CPUs one matrix shows "min (median)" per cell; beyond, two matrices. */
#define BOTH_CPUS 6
/* Up to this many CPUs the cells of the heatmap carry their values. */
#define LABEL_CPUS 16

struct opts {
	long rounds;
	int batches;
	const char *cpus, *csv, *plot;
};

/* The ping-pong counter, alone on its line: written by A (odd values) and B (even), by turns. */
struct line {
	_Alignas(64) _Atomic uint64_t count;
	char pad[64 - sizeof(_Atomic uint64_t)];
};
static_assert(sizeof(struct line) == 64, "one counter per cache line");

/* A thread's meeting word: 4 * n + code at its n-th meeting (code: an exit code, 0 ok).
 * Written by its own side only; the partner reads it. */
struct hand {
	_Alignas(64) _Atomic uint64_t seq;
	char pad[64 - sizeof(_Atomic uint64_t)];
};
static_assert(sizeof(struct hand) == 64, "one meeting word per cache line");

/* Threads mode: the line and the two meeting words, in ordinary memory. */
struct duo {
	struct line line;
	struct hand hand[2]; /* [0] written by side A, [1] by side B */
};

enum role { SIDE_A, SIDE_B, IDLE };

/* What the sides share, read-only while they run (A alone writes the results). */
struct job {
	const struct opts *o;
	const struct bench_cpus *cpus;
	shmcoll_comm *comm; /* processes: the meetings are allreduces over it */
	struct line *line;
	struct hand *hand;       /* threads: the two meeting words; NULL for processes */
	double *min_ns, *med_ns; /* side A: per pair, at [i * n + j] and [j * n + i] */
	double *batch_ns;        /* side A: the batches of the current pair */
};

/* One side (or an idle rank). */
struct side {
	const struct job *job;
	enum role role;
	uint64_t meetings; /* threads: meetings so far */
	uint64_t v;        /* the counter as this side last saw it */
	int broken;        /* a wait gave up: the partner is gone, no more collectives */
	int status;        /* the partner thread's exit code */
};

void bench_c2c_usage(FILE *f)
{
	fprintf(
	    f,
	    "  " PROG " c2c [OPTIONS]\n"
	    "      Core-to-core latency: one 64-byte cache line ping-ponged between two\n"
	    "      CPUs, for every pair of the CPUs; one-way ns = round trip / 2, min and\n"
	    "      median over batches, printed as a matrix. Under shmcoll-run -n P with\n"
	    "      P >= 2, ranks 0 and 1 are the two sides (processes, the line in the\n"
	    "      arena) and ranks 2.. idle; at P = 1 the partner is a thread.\n"
	    "      --cpus LIST       CPUs of the matrix, such as 0-3,8 (default: every CPU\n"
	    "                        the job may use; at least 2)\n"
	    "      --rounds N        timed round trips per batch, 1..%ld (default 20000)\n"
	    "      --batches N       batches per pair, 1..%d (default 15); each follows\n"
	    "                        %d untimed round trips\n"
	    "      --csv FILE        mode,partner,cpu_a,cpu_b,rounds,batches,min_ns,median_ns,\n"
	    "                        a row per pair\n"
	    "      --plot FILE.png   a heatmap of the median one-way ns (gnuplot)\n",
	    MAX_ROUNDS, MAX_BATCHES, WARMUP);
}

/* A whole number in 1..max, or -1. */
static long whole(const char *s, long max)
{
	double x;

	if (bench_parse_positive(s, &x) || x != (double)(long)x || x > (double)max)
		return -1;
	return (long)x;
}

static int parse(int argc, char **argv, struct opts *o)
{
	const char *a, *v;
	long x;
	int i;

	*o = (struct opts){.rounds = 20000, .batches = 15};
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (bench_help(a))
			return -1;
		if (strcmp(a, "--rounds") && strcmp(a, "--batches") && strcmp(a, "--cpus") &&
		    strcmp(a, "--csv") && strcmp(a, "--plot"))
			return bench_usage_error("unknown option '%s' in the c2c mode", a);
		v = bench_optarg(argc, argv, &i);
		if (!v)
			return EXIT_USAGE;
		if (!strcmp(a, "--rounds")) {
			x = whole(v, MAX_ROUNDS);
			if (x < 0)
				return bench_usage_error("c2c: bad --rounds '%s' (a whole number, "
				                         "1..%ld)",
				                         v, MAX_ROUNDS);
			o->rounds = x;
		} else if (!strcmp(a, "--batches")) {
			x = whole(v, MAX_BATCHES);
			if (x < 0)
				return bench_usage_error("c2c: bad --batches '%s' (a whole number, "
				                         "1..%d)",
				                         v, MAX_BATCHES);
			o->batches = (int)x;
		} else if (!strcmp(a, "--cpus")) {
			o->cpus = v;
		} else if (!strcmp(a, "--csv")) {
			o->csv = v;
		} else {
			o->plot = v;
		}
	}
	return 0;
}

static const char *side_name(const struct side *s)
{
	if (s->job->hand)
		return s->role == SIDE_A ? "side A (main thread)" : "side B (partner thread)";
	return s->role == SIDE_A ? "side A (rank 0)" : "side B (rank 1)";
}

/* All sides (and idle ranks) meet and agree on the largest exit code any of them brings.
 * Returns it, or -1 (printed) when the meeting itself failed. */
static int meet(struct side *s, int code)
{
	const struct job *j = s->job;
	struct hand *me, *other;
	int32_t mine = code, all = 0;
	uint64_t n, v;
	int rc, theirs;

	if (!j->hand) {
		rc = shmcoll_allreduce(&mine, &all, 1, SHMCOLL_INT32, SHMCOLL_MAX, j->comm);
		if (rc < 0) {
			fprintf(stderr, PROG ": c2c: rank %d: the ranks' meeting failed: %s: %s\n",
			        shmcoll_comm_rank(j->comm), shmcoll_strerror(rc),
			        shmcoll_last_error(j->comm));
			return -1;
		}
		return all;
	}
	me = &j->hand[s->role];
	other = &j->hand[s->role == SIDE_A ? SIDE_B : SIDE_A];
	n = ++s->meetings;
	/* Pairs with the acquire in the partner's bench_wait_ge below. */
	atomic_store_explicit(&me->seq, 4 * n + (uint64_t)code, memory_order_release);
	/* Acquire: pairs with the partner's release store above. */
	if (bench_wait_ge(&other->seq, 4 * n) < 0) {
		fprintf(stderr,
		        PROG ": c2c: %s waited %d s for its partner at a meeting: it is "
		             "stuck or cannot run\n",
		        side_name(s), BENCH_WAIT_S);
		return -1;
	}
	v = atomic_load_explicit(&other->seq, memory_order_relaxed);
	/* A partner already at a later meeting left this one with nothing to say. */
	theirs = v / 4 == n ? (int)(v % 4) : 0;
	return code > theirs ? code : theirs;
}

/* Side A: `rounds` round trips on from *v. 0, or -1 with *v the value it waited for. */
static int serve(struct line *l, uint64_t *v, long rounds)
{
	uint64_t x = *v;
	long k;

	for (k = 0; k < rounds; k++) {
		/* Pairs with the acquire in answer()'s bench_wait_eq. */
		atomic_store_explicit(&l->count, x + 1, memory_order_release);
		x += 2;
		/* Acquire: pairs with the release in answer(). */
		if (bench_wait_eq(&l->count, x) < 0) {
			*v = x;
			return -1;
		}
	}
	*v = x;
	return 0;
}

/* Side B: the other half of `rounds` round trips. 0, or -1 as serve(). */
static int answer(struct line *l, uint64_t *v, long rounds)
{
	uint64_t x = *v;
	long k;

	for (k = 0; k < rounds; k++) {
		/* Acquire: pairs with the release in serve(). */
		if (bench_wait_eq(&l->count, x + 1) < 0) {
			*v = x + 1;
			return -1;
		}
		x += 2;
		/* Pairs with the acquire in serve()'s bench_wait_eq. */
		atomic_store_explicit(&l->count, x, memory_order_release);
	}
	*v = x;
	return 0;
}

static int stuck(struct side *s, int ca, int cb)
{
	uint64_t now = atomic_load_explicit(&s->job->line->count, memory_order_relaxed);

	fprintf(stderr,
	        PROG ": c2c: CPU %d <-> CPU %d: %s waited %d s for the shared counter to reach "
	             "%llu, but it stays at %llu: the partner is gone or cannot run\n",
	        ca, cb, side_name(s), BENCH_WAIT_S, (unsigned long long)s->v,
	        (unsigned long long)now);
	return -1;
}

/* Side A, after batch b of pair p: the counter must stand where the protocol says. */
static int check(const struct side *s, int ca, int cb, uint64_t p, int b)
{
	const struct opts *o = s->job->o;
	uint64_t per = 2 * (uint64_t)(WARMUP + o->rounds);
	uint64_t want = ((uint64_t)p * (uint64_t)o->batches + (uint64_t)b + 1) * per;
	uint64_t now = atomic_load_explicit(&s->job->line->count, memory_order_relaxed);

	if (now == want && s->v == want)
		return 0;
	fprintf(stderr,
	        PROG ": c2c: VALIDATION FAILED: CPU %d <-> CPU %d, batch %d: the shared counter "
	             "is %llu, expected %llu (2 x (%d + %ld) per batch)\n",
	        ca, cb, b + 1, (unsigned long long)now, (unsigned long long)want, WARMUP,
	        o->rounds);
	return EXIT_INVALID;
}

/* Pair p: CPUs a and b (indices into the list). 0, the agreed exit code, or -1 when a wait
 * gave up (printed). */
static int run_pair(struct side *s, int a, int b, uint64_t p)
{
	const struct job *j = s->job;
	const struct opts *o = j->o;
	int n = j->cpus->n, ca = j->cpus->cpu[a], cb = j->cpus->cpu[b];
	char err[256];
	double t0;
	int code = 0, bt;

	if (s->role != IDLE && bench_pin(s->role == SIDE_A ? ca : cb, err, sizeof(err)) < 0) {
		fprintf(stderr, PROG ": c2c: %s: %s\n", side_name(s), err);
		code = EXIT_FAIL;
	}
	code = meet(s, code);
	if (code != 0)
		return code;
	for (bt = 0; bt < o->batches; bt++) {
		if (s->role == SIDE_A) {
			if (serve(j->line, &s->v, WARMUP) < 0)
				return stuck(s, ca, cb);
			t0 = bench_now();
			if (serve(j->line, &s->v, o->rounds) < 0)
				return stuck(s, ca, cb);
			j->batch_ns[bt] = (bench_now() - t0) * 1e9 / (2.0 * (double)o->rounds);
			code = check(s, ca, cb, p, bt);
		} else if (s->role == SIDE_B) {
			if (answer(j->line, &s->v, WARMUP + o->rounds) < 0)
				return stuck(s, ca, cb);
		}
		code = meet(s, code);
		if (code != 0)
			return code;
	}
	if (s->role == SIDE_A) {
		j->min_ns[a * n + b] = j->min_ns[b * n + a] = bench_min(j->batch_ns, o->batches);
		j->med_ns[a * n + b] = j->med_ns[b * n + a] = bench_median(j->batch_ns, o->batches);
	}
	return 0;
}

/* Every pair, in the same order on every side. 0 or an exit code. */
static int run(struct side *s)
{
	int n = s->job->cpus->n, a, b, rc;
	uint64_t p = 0;

	for (a = 0; a < n; a++)
		for (b = a + 1; b < n; b++, p++) {
			rc = run_pair(s, a, b, p);
			if (rc < 0) {
				s->broken = 1;
				return EXIT_FAIL;
			}
			if (rc)
				return rc;
		}
	return 0;
}

static void *partner_thread(void *arg)
{
	struct side *s = arg;

	s->status = run(s);
	return NULL;
}

/* An idle rank leaves the CPU the launcher pinned it to, which may be one a side measures on:
 * unpinned, the scheduler keeps its short wake-ups at each meeting out of the sides' way.
 * Best effort: pinned, it still only sleeps in the meetings. */
static void unpin(void)
{
	struct bench_cpus all;
	char err[256];
	cpu_set_t set;
	int i;

	if (bench_cpus_allowed(&all, err, sizeof(err)) < 0)
		return;
	CPU_ZERO(&set);
	for (i = 0; i < all.n; i++)
		if (all.cpu[i] < CPU_SETSIZE)
			CPU_SET(all.cpu[i], &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

enum cell { CELL_BOTH, CELL_MEDIAN, CELL_MIN };

static void cell_text(const struct job *j, enum cell kind, int a, int b, char *s, size_t len)
{
	int n = j->cpus->n, k = a * n + b, dec = n <= LABEL_CPUS ? 1 : 0;

	if (a == b)
		snprintf(s, len, "-");
	else if (kind == CELL_BOTH)
		snprintf(s, len, "%.1f (%.1f)", j->min_ns[k], j->med_ns[k]);
	else
		snprintf(s, len, "%.*f", dec, kind == CELL_MIN ? j->min_ns[k] : j->med_ns[k]);
}

static void print_matrix(const struct job *j, enum cell kind)
{
	const struct bench_cpus *c = j->cpus;
	char s[64];
	int a, b, w = 1, hw = 3;

	for (a = 0; a < c->n; a++) {
		snprintf(s, sizeof(s), "%d", c->cpu[a]);
		if ((int)strlen(s) > hw)
			hw = (int)strlen(s);
		if ((int)strlen(s) > w)
			w = (int)strlen(s);
		for (b = 0; b < c->n; b++) {
			cell_text(j, kind, a, b, s, sizeof(s));
			if ((int)strlen(s) > w)
				w = (int)strlen(s);
		}
	}
	printf("  %*s", hw, "CPU");
	for (b = 0; b < c->n; b++)
		printf("  %*d", w, c->cpu[b]);
	printf("\n");
	for (a = 0; a < c->n; a++) {
		printf("  %*d", hw, c->cpu[a]);
		for (b = 0; b < c->n; b++) {
			cell_text(j, kind, a, b, s, sizeof(s));
			printf("  %*s", w, s);
		}
		printf("\n");
	}
}

static void print_table(const struct job *j, const char *partner_desc, const char *partner)
{
	const struct bench_cpus *c = j->cpus;
	const struct opts *o = j->o;
	int n = c->n, a, b, k = 0, lo_a = 0, lo_b = 1, hi_a = 0, hi_b = 1, pairs = n * (n - 1) / 2;
	double *meds = malloc((size_t)pairs * sizeof(*meds)), mid = 0;
	char set[1024];

	printf("c2c: core-to-core latency between %s (%s), CPUs %s, %d pair%s, %ld round trips "
	       "x %d batches per pair\n",
	       partner, partner_desc, bench_cpus_format(c, set, sizeof(set)), pairs,
	       pairs == 1 ? "" : "s", o->rounds, o->batches);
	printf("one cache line ping-ponged, one-way ns = round trip / 2, over the batches: "
	       "min (median)\n");
	if (n <= BOTH_CPUS) {
		print_matrix(j, CELL_BOTH);
	} else {
		printf("median:\n");
		print_matrix(j, CELL_MEDIAN);
		printf("min:\n");
		print_matrix(j, CELL_MIN);
	}
	for (a = 0; a < n; a++)
		for (b = a + 1; b < n; b++) {
			if (j->min_ns[a * n + b] < j->min_ns[lo_a * n + lo_b]) {
				lo_a = a;
				lo_b = b;
			}
			if (j->med_ns[a * n + b] > j->med_ns[hi_a * n + hi_b]) {
				hi_a = a;
				hi_b = b;
			}
			if (meds)
				meds[k++] = j->med_ns[a * n + b];
		}
	if (meds)
		mid = bench_median(meds, pairs);
	printf("lowest min %.1f ns (CPU %d <-> %d), median of the pair medians %.1f ns, highest "
	       "pair median %.1f ns (CPU %d <-> %d)\n",
	       j->min_ns[lo_a * n + lo_b], c->cpu[lo_a], c->cpu[lo_b], mid,
	       j->med_ns[hi_a * n + hi_b], c->cpu[hi_a], c->cpu[hi_b]);
	fflush(stdout);
	free(meds);
}

static int write_csv(const struct job *j, FILE *f, const char *partner)
{
	const struct bench_cpus *c = j->cpus;
	int n = c->n, a, b;

	fprintf(f, "mode,partner,cpu_a,cpu_b,rounds,batches,min_ns,median_ns\n");
	for (a = 0; a < n; a++)
		for (b = a + 1; b < n; b++)
			fprintf(f, "c2c,%s,%d,%d,%ld,%d,%.2f,%.2f\n", partner, c->cpu[a], c->cpu[b],
			        j->o->rounds, j->o->batches, j->min_ns[a * n + b],
			        j->med_ns[a * n + b]);
	if (fclose(f) != 0) {
		fprintf(stderr, PROG ": c2c: writing %s failed: %s\n", j->o->csv, strerror(errno));
		return EXIT_FAIL;
	}
	return 0;
}

/* s as a gnuplot double-quoted string. */
static void gp_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static int plot(const struct job *j, const char *partner)
{
	const struct bench_cpus *c = j->cpus;
	int n = c->n, a, b, step = n <= 16 ? 1 : (n + 15) / 16,
	    font = n <= 4   ? 14
	           : n <= 8 ? 11
	                    : 8;
	double lo = j->med_ns[1], hi = lo, span, v;
	char model[256], title[1024], set[512], *script = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&script, &len);
	int rc;

	if (!f) {
		fprintf(stderr, PROG ": c2c: --plot: out of memory\n");
		return EXIT_FAIL;
	}
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++) {
			if (a == b)
				continue;
			v = j->med_ns[a * n + b];
			if (v < lo)
				lo = v;
			if (v > hi)
				hi = v;
		}
	/* A single pair (or equal pairs) would leave gnuplot an empty colour range. */
	span = hi - lo;
	if (span < 0.1 * hi) {
		lo -= (0.1 * hi - span) / 2;
		hi += (0.1 * hi - span) / 2;
	}
	if (lo < 0)
		lo = 0;
	bench_cpu_model(model, sizeof(model));
	snprintf(title, sizeof(title),
	         "Core-to-core latency%s%s: one cache line ping-ponged between %s, CPUs %s\n"
	         "median one-way ns of %d batches x %ld round trips per pair",
	         model[0] ? " on " : "", model, partner, bench_cpus_format(c, set, sizeof(set)),
	         j->o->batches, j->o->rounds);

	fprintf(f, "set terminal pngcairo noenhanced size 900,800 font ',11'\nset output ");
	gp_str(f, j->o->plot);
	fprintf(f, "\nset title ");
	gp_str(f, title);
	fprintf(f,
	        "\nset xlabel 'CPU'\nset ylabel 'CPU'\nset cblabel 'one-way latency (ns)'\n"
	        "set size ratio -1\nset tics out nomirror\nset key off\n"
	        "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\nset cbrange [%g:%g]\n"
	        "set palette defined (0 '#fff7bc', 0.5 '#fec44f', 1 '#d95f0e')\n",
	        n - 1, n - 1, lo, hi);
	fprintf(f, "set xtics (");
	for (a = 0; a < n; a += step)
		fprintf(f, "%s\"%d\" %d", a ? ", " : "", c->cpu[a], a);
	fprintf(f, ")\nset ytics (");
	for (a = 0; a < n; a += step)
		fprintf(f, "%s\"%d\" %d", a ? ", " : "", c->cpu[a], a);
	fprintf(f, ")\n");
	if (n <= LABEL_CPUS)
		for (a = 0; a < n; a++)
			for (b = 0; b < n; b++)
				if (a != b)
					fprintf(
					    f,
					    "set label '%.1f' at %d,%d center front font ',%d'\n",
					    j->med_ns[a * n + b], b, a, font);
	/* A cell per pair at x = column, y = row, as the matrix is printed; the diagonal stays
	 * blank. Boxes, not an image: an image with a NaN diagonal makes gnuplot warn. */
	fprintf(f, "$d << EOD\n");
	for (a = 0; a < n; a++)
		for (b = 0; b < n; b++)
			if (a != b)
				fprintf(f, "%d %d %.3f\n", b, a, j->med_ns[a * n + b]);
	/* Half-widths a little over 0.5: neighbours overlap, so no seams show between cells. */
	fprintf(f, "EOD\nplot $d using 1:2:(0.505):(0.505):3 with boxxyerror fs solid 1.0 "
	           "noborder lc palette\n");
	if (fclose(f) != 0) {
		free(script);
		fprintf(stderr, PROG ": c2c: --plot: out of memory\n");
		return EXIT_FAIL;
	}
	rc = bench_gnuplot(script);
	free(script);
	return rc < 0 ? EXIT_FAIL : 0;
}

int bench_c2c_main(int argc, char **argv)
{
	struct opts o;
	struct bench_cpus cpus;
	shmcoll_comm *comm;
	struct job j = {0};
	struct side sa = {0}, sb = {0};
	struct duo *duo = NULL;
	struct line *mine = NULL;
	pthread_t thread;
	FILE *csv = NULL;
	char partner_desc[128];
	const char *partner;
	int rc, rank, size, code = 0, status, started = 0;
	size_t cells;

	rc = parse(argc, argv, &o);
	if (rc < 0) /* --help */
		return 0;
	if (rc == 0)
		rc = bench_cpus_for("c2c", o.cpus, 2, "the two sides of a ping-pong", &cpus);
	/* Every rank found the same; they meet so that rank 0 has said why before any exits. */
	code = bench_mem_init("c2c", &comm);
	if (code != 0)
		return rc ? rc : code;
	if (rc != 0) {
		rc = bench_stop_together(comm, rc);
		shmcoll_comm_destroy(comm);
		return rc;
	}
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	j.o = &o;
	j.cpus = &cpus;
	j.comm = comm;
	sa.job = sb.job = &j;
	sa.role = rank == 0 ? SIDE_A : rank == 1 ? SIDE_B : IDLE;
	sb.role = SIDE_B;
	partner = size == 1 ? "threads" : "processes";
	if (size == 1)
		snprintf(partner_desc, sizeof(partner_desc), "2 threads of one process");
	else if (size == 2)
		snprintf(partner_desc, sizeof(partner_desc), "rank 0 <-> rank 1");
	else if (size == 3)
		snprintf(partner_desc, sizeof(partner_desc), "rank 0 <-> rank 1; rank 2 idles");
	else
		snprintf(partner_desc, sizeof(partner_desc), "rank 0 <-> rank 1; ranks 2-%d idle",
		         size - 1);

	/* Setup; any failure is agreed at the first meeting, so all ranks stop together. */
	if (rank == 0) {
		cells = (size_t)cpus.n * (size_t)cpus.n;
		j.min_ns = calloc(cells, sizeof(double));
		j.med_ns = calloc(cells, sizeof(double));
		j.batch_ns = calloc((size_t)o.batches, sizeof(double));
		if (!j.min_ns || !j.med_ns || !j.batch_ns) {
			fprintf(stderr, PROG ": c2c: out of memory for %d CPUs\n", cpus.n);
			code = EXIT_FAIL;
		}
		if (o.csv && !code) {
			csv = fopen(o.csv, "w");
			if (!csv) {
				fprintf(stderr, PROG ": c2c: cannot write %s: %s\n", o.csv,
				        strerror(errno));
				code = EXIT_FAIL;
			}
		}
	}
	if (size == 1) {
		duo = aligned_alloc(64, sizeof(*duo));
		if (!duo) {
			fprintf(stderr, PROG ": c2c: out of memory\n");
			code = EXIT_FAIL;
		}
		if (!code) {
			memset(duo, 0, sizeof(*duo));
			j.line = &duo->line;
			j.hand = duo->hand;
			rc = pthread_create(&thread, NULL, partner_thread, &sb);
			if (rc != 0) {
				fprintf(stderr, PROG ": c2c: cannot start the partner thread: %s\n",
				        strerror(rc));
				code = EXIT_FAIL;
			}
			started = rc == 0;
		}
	} else {
		/* The line lives in rank 0's partition; rank 1 reaches it there. */
		mine = bench_shared_alloc(comm, sizeof(*mine));
		if (!mine) {
			if (rank == 0)
				fprintf(stderr, PROG ": c2c: shmcoll_malloc failed: %s\n",
				        shmcoll_last_error(comm));
			code = EXIT_FAIL;
		} else {
			j.line = rank == 1 ? bench_shared_peer(comm, mine, 0) : mine;
		}
		if (sa.role == IDLE)
			unpin();
		code = meet(&sa, code);
		if (code < 0) {
			status = EXIT_FAIL;
			goto out;
		}
	}

	status = code ? code : run(&sa);
	if (started) {
		pthread_join(thread, NULL);
		if (!status)
			status = sb.status;
	}
	if (sa.broken)
		goto out; /* a partner is gone: no collective would complete */
	if (mine)
		shmcoll_free(comm, mine);
	shmcoll_comm_destroy(comm);
	if (rank == 0 && !status) {
		print_table(&j, partner_desc, partner);
		if (csv) {
			status = write_csv(&j, csv, partner);
			csv = NULL;
		}
		if (o.plot && !status)
			status = plot(&j, partner);
	}
out:
	if (csv)
		fclose(csv);
	free(duo);
	free(j.min_ns);
	free(j.med_ns);
	free(j.batch_ns);
	return status;
}
