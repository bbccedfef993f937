/* harness.c - runs the ranks of a test job (processes or threads) and checks
 * collective calls byte for byte. Linked into every test executable: plain C,
 * libc and shmcoll only, no Criterion. */
#include "tests/harness.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_WALL_MS  120000
#define DEFAULT_GRACE_MS 15000
#define GUARD            64          /* canary bytes on each side of every buffer */
#define AREA_EXTRA       (3 * GUARD) /* guards plus up to GUARD - 1 bytes of misalignment */
#define MAX_PRINTS       8           /* failure lines per checker */

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

/* ---- running ranks ---- */

#define CRUMB_LEN 200

static _Atomic unsigned job_counter;

/* Where this rank is: the case it runs, in memory its parent can read after
 * the rank died or hung (shared mapping for processes, the run for threads). */
static _Thread_local char *crumb;

void th_breadcrumb(const char *fmt, ...)
{
	va_list ap;

	if (!crumb)
		return;
	va_start(ap, fmt);
	vsnprintf(crumb, CRUMB_LEN, fmt, ap);
	va_end(ap);
}

void th_job_name(char *buf, size_t len)
{
	unsigned n = atomic_fetch_add(&job_counter, 1);
	uint32_t r = 0;
	struct timespec ts;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (uint32_t)th_mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ n);
	}
	snprintf(buf, len, "t%d-%u-%08x", (int)getpid(), n, (unsigned)r);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	nanosleep(&ts, NULL);
}

static const char *code_name(int code)
{
	switch (code) {
	case 0:
		return "ok";
	case TH_EXIT_CREATE:
		return "comm_create failed";
	case TH_EXIT_DESTROY:
		return "comm_destroy failed";
	case TH_EXIT_ORPHAN:
		return "parent gone";
	case TH_EXIT_RANGE:
		return "body code out of range";
	case TH_EXIT_RANK:
		return "comm_rank/size wrong";
	case TH_E_CALL:
		return "collective returned an error";
	case TH_E_OUT:
		return "wrong output";
	case TH_E_GUARD:
		return "wrote outside a buffer";
	case TH_E_SEND:
		return "send data changed";
	case TH_E_UNTOUCHED:
		return "wrote a buffer it must not";
	case TH_E_NOMEM:
		return "test malloc failed";
	case TH_E_SYMALLOC:
		return "shmcoll_malloc failed";
	case TH_E_SYMFREE:
		return "shmcoll_free failed";
	case TH_E_BARRIER:
		return "barrier ordering";
	case TH_E_SETUP:
		return "case too big for the checker";
	default:
		return "body-specific check";
	}
}

static void result_init(th_result *res, int nranks, const char *job)
{
	int i;

	memset(res, 0, sizeof(*res));
	res->nranks = nranks;
	res->first_bad = -1;
	snprintf(res->job, sizeof(res->job), "%s", job);
	for (i = 0; i < TH_MAX_RANKS; i++)
		res->rank[i].code = -1;
}

static int status_bad(const th_rank_status *s)
{
	return !s->done || s->signo || s->code != 0;
}

static void result_finish(th_result *res, const char *kind, int64_t elapsed_ms, const char *crumbs)
{
	size_t len = sizeof(res->summary), off;
	int i, n;

	res->ok = !res->timed_out;
	for (i = 0; i < res->nranks; i++)
		if (status_bad(&res->rank[i]))
			res->ok = 0;
	n = snprintf(res->summary, len, "%s job %s P=%d: %s after %lld ms", kind, res->job,
	             res->nranks, res->ok ? "ok" : "FAILED", (long long)elapsed_ms);
	off = n < 0 ? 0 : (size_t)n;
	if (res->timed_out && off < len) {
		n = snprintf(res->summary + off, len - off, " (wall deadline expired)");
		off += n < 0 ? 0 : (size_t)n;
	}
	if (res->first_bad >= 0 && off < len) {
		n = snprintf(res->summary + off, len - off, "; first failed: rank %d",
		             res->first_bad);
		off += n < 0 ? 0 : (size_t)n;
	}
	for (i = 0; i < res->nranks && off < len; i++) {
		const th_rank_status *s = &res->rank[i];

		if (!s->done)
			n = snprintf(res->summary + off, len - off, "; rank %d: still running", i);
		else if (s->signo)
			n = snprintf(res->summary + off, len - off, "; rank %d: signal %d (%s)%s",
			             i, s->signo, strsignal(s->signo),
			             s->killed ? " by the harness" : "");
		else
			n = snprintf(res->summary + off, len - off, "; rank %d: %d (%s)", i,
			             s->code, code_name(s->code));
		off += n < 0 ? 0 : (size_t)n;
		if (status_bad(s) && crumbs && crumbs[i * CRUMB_LEN] && off < len) {
			n = snprintf(res->summary + off, len - off, " [last: %.*s]", CRUMB_LEN,
			             crumbs + i * CRUMB_LEN);
			off += n < 0 ? 0 : (size_t)n;
		}
	}
}

static int create_comm(int rank, int nranks, const char *job, const th_opts *o, shmcoll_comm **comm)
{
	shmcoll_config cfg = {
	    .rank = rank,
	    .size = nranks,
	    .job = job,
	    .arena_bytes = o->arena_bytes,
	    .timeout_ms = o->timeout_ms,
	};
	int rc = shmcoll_comm_create(&cfg, comm);

	if (rc) {
		fprintf(stderr, "[%s rank %d/%d] shmcoll_comm_create(arena %zu): %d (%s): %s\n",
		        job, rank, nranks, o->arena_bytes, rc, shmcoll_strerror(rc),
		        shmcoll_last_error(NULL));
		return TH_EXIT_CREATE;
	}
	if (shmcoll_comm_rank(*comm) != rank || shmcoll_comm_size(*comm) != nranks) {
		fprintf(stderr, "[%s rank %d/%d] comm_rank %d comm_size %d\n", job, rank, nranks,
		        shmcoll_comm_rank(*comm), shmcoll_comm_size(*comm));
		return TH_EXIT_RANK;
	}
	return 0;
}

/* Create, run, destroy: the life of one rank, as a process or a thread. */
static int rank_life(int rank, int nranks, const char *job, th_body_fn body, void *arg,
                     const th_opts *o)
{
	shmcoll_comm *comm = NULL;
	int code, rc;

	code = create_comm(rank, nranks, job, o, &comm);
	if (code)
		return code;
	code = body(comm, rank, arg);
	if (code < 0 || code >= TH_EXIT_CREATE)
		code = TH_EXIT_RANGE;
	rc = shmcoll_comm_destroy(comm);
	if (rc && code == 0) {
		fprintf(stderr, "[%s rank %d/%d] shmcoll_comm_destroy: %d (%s)\n", job, rank,
		        nranks, rc, shmcoll_strerror(rc));
		code = TH_EXIT_DESTROY;
	}
	return code;
}

static void opts_fill(th_opts *o, const th_opts *in)
{
	memset(o, 0, sizeof(*o));
	if (in)
		*o = *in;
	if (o->wall_ms <= 0)
		o->wall_ms = DEFAULT_WALL_MS;
	if (o->grace_ms <= 0)
		o->grace_ms = DEFAULT_GRACE_MS;
}

int th_run_ranks(int nranks, th_body_fn body, void *arg, const th_opts *opts, th_result *res)
{
	pid_t pids[TH_MAX_RANKS], parent = getpid();
	size_t crumb_bytes = (size_t)TH_MAX_RANKS * CRUMB_LEN;
	char job[64], *crumbs;
	th_opts o;
	int64_t start, deadline, fail_deadline = -1;
	int i, left, started = 0, err = 0;
	long nap = 50;

	opts_fill(&o, opts);
	th_job_name(job, sizeof(job));
	result_init(res, nranks, job);
	if (nranks < 1 || nranks > TH_MAX_RANKS) {
		snprintf(res->summary, sizeof(res->summary), "bad nranks %d", nranks);
		return -EINVAL;
	}
	crumbs = mmap(NULL, crumb_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (crumbs == MAP_FAILED) {
		snprintf(res->summary, sizeof(res->summary), "mmap: %s", strerror(errno));
		return -errno;
	}
	start = now_ms();
	deadline = start + o.wall_ms;
	fflush(NULL); /* children _exit, but unflushed parent output would be copied */
	for (i = 0; i < nranks; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			err = -errno;
			break;
		}
		if (pid == 0) {
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
				_exit(TH_EXIT_ORPHAN);
			crumb = crumbs + (size_t)i * CRUMB_LEN;
			_exit(rank_life(i, nranks, job, body, arg, &o));
		}
		pids[i] = pid;
		started++;
	}
	if (err) {
		for (i = 0; i < started; i++) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
		snprintf(res->summary, sizeof(res->summary), "fork failed after %d ranks: %s",
		         started, strerror(-err));
		munmap(crumbs, crumb_bytes);
		return err;
	}

	left = nranks;
	while (left > 0) {
		int64_t t;

		for (i = 0; i < nranks; i++) {
			th_rank_status *s = &res->rank[i];
			int st;

			if (s->done || waitpid(pids[i], &st, WNOHANG) != pids[i])
				continue;
			s->done = 1;
			left--;
			if (WIFEXITED(st))
				s->code = WEXITSTATUS(st);
			else if (WIFSIGNALED(st))
				s->signo = WTERMSIG(st);
			if (status_bad(s) && res->first_bad < 0) {
				res->first_bad = i;
				fail_deadline = now_ms() + o.grace_ms;
			}
		}
		if (left == 0)
			break;
		t = now_ms();
		if (t >= deadline || (fail_deadline >= 0 && t >= fail_deadline)) {
			res->timed_out = t >= deadline;
			for (i = 0; i < nranks; i++) {
				th_rank_status *s = &res->rank[i];
				int st;

				if (s->done)
					continue;
				kill(pids[i], SIGKILL);
				waitpid(pids[i], &st, 0);
				s->done = 1;
				s->killed = 1;
				s->signo = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
				s->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
			}
			break;
		}
		nap_us(nap);
		if (nap < 5000)
			nap *= 2;
	}
	result_finish(res, "process", now_ms() - start, crumbs);
	munmap(crumbs, crumb_bytes);
	return res->ok ? 0 : 1;
}

struct trun;

struct tslot {
	pthread_t tid;
	int rank;
	int code;
	_Atomic int done;
	struct trun *run;
};

struct trun {
	th_body_fn body;
	void *arg;
	th_opts o;
	char job[64];
	int nranks;
	struct tslot slot[TH_MAX_RANKS];
	char crumbs[TH_MAX_RANKS * CRUMB_LEN];
};

static void *thread_main(void *p)
{
	struct tslot *s = p;
	struct trun *r = s->run;

	crumb = r->crumbs + (size_t)s->rank * CRUMB_LEN;
	s->code = rank_life(s->rank, r->nranks, r->job, r->body, r->arg, &r->o);
	/* Pairs with the acquire load in th_run_threads(): code is read after done. */
	atomic_store_explicit(&s->done, 1, memory_order_release);
	return NULL;
}

int th_run_threads(int nranks, th_body_fn body, void *arg, const th_opts *opts, th_result *res)
{
	struct trun *r;
	int64_t start, deadline, fail_deadline = -1;
	int i, left, started = 0, rc = 0, leak = 0;
	long nap = 50;

	r = calloc(1, sizeof(*r));
	if (!r) {
		result_init(res, nranks, "-");
		snprintf(res->summary, sizeof(res->summary), "out of memory");
		return -ENOMEM;
	}
	opts_fill(&r->o, opts);
	th_job_name(r->job, sizeof(r->job));
	result_init(res, nranks, r->job);
	if (nranks < 1 || nranks > TH_MAX_RANKS) {
		snprintf(res->summary, sizeof(res->summary), "bad nranks %d", nranks);
		free(r);
		return -EINVAL;
	}
	r->body = body;
	r->arg = arg;
	r->nranks = nranks;
	start = now_ms();
	deadline = start + r->o.wall_ms;
	for (i = 0; i < nranks; i++) {
		r->slot[i].rank = i;
		r->slot[i].code = -1;
		r->slot[i].run = r;
		rc = pthread_create(&r->slot[i].tid, NULL, thread_main, &r->slot[i]);
		if (rc)
			break;
		started++;
	}
	if (rc) {
		/* The started ranks wait for peers that never come: their
		 * communicator times out (or they are left behind). */
		for (i = 0; i < started; i++)
			pthread_detach(r->slot[i].tid);
		snprintf(res->summary, sizeof(res->summary),
		         "pthread_create failed after %d ranks: %s", started, strerror(rc));
		return -rc;
	}

	left = nranks;
	while (left > 0) {
		int64_t t;

		for (i = 0; i < nranks; i++) {
			th_rank_status *s = &res->rank[i];

			/* Pairs with the release store in thread_main(). */
			if (s->done ||
			    !atomic_load_explicit(&r->slot[i].done, memory_order_acquire))
				continue;
			pthread_join(r->slot[i].tid, NULL);
			s->done = 1;
			s->code = r->slot[i].code;
			left--;
			if (status_bad(s) && res->first_bad < 0) {
				res->first_bad = i;
				fail_deadline = now_ms() + r->o.grace_ms;
			}
		}
		if (left == 0)
			break;
		t = now_ms();
		if (t >= deadline || (fail_deadline >= 0 && t >= fail_deadline)) {
			res->timed_out = t >= deadline;
			for (i = 0; i < nranks; i++)
				if (!res->rank[i].done)
					pthread_detach(r->slot[i].tid);
			leak = 1;
			break;
		}
		nap_us(nap);
		if (nap < 5000)
			nap *= 2;
	}
	result_finish(res, "thread", now_ms() - start, r->crumbs);
	if (!leak)
		free(r);
	return res->ok ? 0 : 1;
}

/* ---- 16-bit floats ---- */

uint16_t th_f32_to_f16(float f)
{
	uint32_t x, ax, sign, mant, r, rem, half;
	int shift;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	ax = x & 0x7fffffff;
	if (ax > 0x7f800000)
		return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
	if (ax >= 0x477ff000) /* >= 65520: rounds to infinity */
		return (uint16_t)(sign | 0x7c00);
	if (ax >= 0x38800000) { /* normal binary16: >= 2^-14 */
		r = ax + 0xfff + ((ax >> 13) & 1);
		return (uint16_t)(sign | ((r - 0x38000000) >> 13));
	}
	if (ax <= 0x33000000) /* <= 2^-25: ties to the even zero */
		return (uint16_t)sign;
	mant = (ax & 0x7fffff) | 0x800000;
	shift = 126 - (int)(ax >> 23); /* units of 2^-24 */
	r = mant >> shift;
	rem = mant & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (r & 1)))
		r++;
	return (uint16_t)(sign | r);
}

float th_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	float f;

	if (e == 0x1f) {
		x = sign | 0x7f800000 | (m << 13);
	} else if (e) {
		x = sign | ((e + 112) << 23) | (m << 13);
	} else {
		f = (float)m / 16777216.0f; /* m * 2^-24, exact */
		return sign ? -f : f;
	}
	memcpy(&f, &x, sizeof(f));
	return f;
}

uint16_t th_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float th_bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* ---- dtypes, ops, collectives ---- */

const char *th_dtype_name(shmcoll_dtype dt)
{
	static const char *const n[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
	                                "uint64", "float16", "bfloat16", "float32", "float64"};

	return (unsigned)dt < SHMCOLL_DTYPE_COUNT ? n[dt] : "?";
}

const char *th_op_name(shmcoll_op op)
{
	static const char *const n[] = {"sum", "prod", "min", "max", "avg", "band", "bor", "bxor"};

	return (unsigned)op < SHMCOLL_OP_COUNT ? n[op] : "?";
}

size_t th_dtype_size(shmcoll_dtype dt)
{
	static const size_t s[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

	return (unsigned)dt < SHMCOLL_DTYPE_COUNT ? s[dt] : 0;
}

int th_dtype_is_float(shmcoll_dtype dt)
{
	return dt >= SHMCOLL_FLOAT16 && dt <= SHMCOLL_FLOAT64;
}

int th_dtype_is_signed(shmcoll_dtype dt)
{
	return dt == SHMCOLL_INT8 || dt == SHMCOLL_INT32 || dt == SHMCOLL_INT64;
}

int th_op_valid(shmcoll_dtype dt, shmcoll_op op)
{
	if ((unsigned)dt >= SHMCOLL_DTYPE_COUNT || (unsigned)op >= SHMCOLL_OP_COUNT)
		return 0;
	return !th_dtype_is_float(dt) || op <= SHMCOLL_AVG;
}

const char *th_coll_name(th_coll c)
{
	static const char *const n[] = {"allreduce", "reduce",         "bcast",
	                                "allgather", "reduce_scatter", "gather",
	                                "scatter",   "alltoall",       "barrier"};

	return (unsigned)c < TH_COLL_COUNT ? n[c] : "?";
}

const char *th_sym_name(th_sym s)
{
	static const char *const n[] = {"malloc", "symmetric", "symmetric-on-even-ranks",
	                                "symmetric-send", "symmetric-recv"};

	return (unsigned)s < TH_SYM_COUNT ? n[s] : "?";
}

int th_sym_useful(th_variant v, th_sym sym)
{
	return v != TH_IN_PLACE || sym == TH_SYM_NONE || sym == TH_SYM_BOTH || sym == TH_SYM_EVEN;
}

int th_coll_rooted(th_coll c)
{
	return c == TH_REDUCE || c == TH_BCAST || c == TH_GATHER || c == TH_SCATTER;
}

int th_coll_reduces(th_coll c)
{
	return c == TH_ALLREDUCE || c == TH_REDUCE || c == TH_REDUCE_SCATTER;
}

int th_coll_variants(th_coll c, th_variant *v)
{
	switch (c) {
	case TH_BCAST:
		v[0] = TH_IN_PLACE;
		return 1;
	case TH_REDUCE:
		v[0] = TH_OUT_OF_PLACE;
		v[1] = TH_IN_PLACE;
		v[2] = TH_NULL_NONROOT;
		return 3;
	case TH_GATHER:
	case TH_SCATTER:
		v[0] = TH_OUT_OF_PLACE;
		v[1] = TH_NULL_NONROOT;
		return 2;
	case TH_BARRIER:
		v[0] = TH_OUT_OF_PLACE;
		return 1;
	default:
		v[0] = TH_OUT_OF_PLACE;
		v[1] = TH_IN_PLACE;
		return 2;
	}
}

static size_t coll_mult(th_coll c, int size)
{
	switch (c) {
	case TH_ALLGATHER:
	case TH_REDUCE_SCATTER:
	case TH_GATHER:
	case TH_SCATTER:
	case TH_ALLTOALL:
		return (size_t)size;
	case TH_BARRIER:
		return 0;
	default:
		return 1;
	}
}

size_t th_coll_region_elems(th_coll c, size_t count, int size)
{
	return coll_mult(c, size) * count;
}

size_t th_large_count(th_coll c, shmcoll_dtype dt, int size, size_t arena_bytes)
{
	size_t m = coll_mult(c, size) * th_dtype_size(dt);

	return m ? 2 * arena_bytes / m + 13 : 0;
}

int th_large_wanted(shmcoll_dtype dt, shmcoll_op op)
{
#ifdef TH_SANITIZED
	return op == SHMCOLL_SUM && (dt == SHMCOLL_INT8 || dt == SHMCOLL_FLOAT16 ||
	                             dt == SHMCOLL_FLOAT32 || dt == SHMCOLL_FLOAT64);
#else
	(void)dt;
	(void)op;
	return 1;
#endif
}

/* ---- checked collective calls ---- */

/* Reference data of one case shape, kept from call to call: the rows (each
 * rank's whole send data as generated, or the one that matters) and, for the
 * reductions, their reduction. A call of that shape takes its data rotated by
 * a fresh shift (see memo_use). */
struct th_memo {
	int valid;
	th_coll coll;
	shmcoll_dtype dtype;
	shmcoll_op op;
	int edge, root; /* root: -1 where the rows do not depend on it */
	size_t count;
	size_t len;          /* elements in a row */
	size_t shift;        /* the last call's, len before the first */
	unsigned char *rows; /* nrows x len elements */
	unsigned char *red;  /* len elements: the reduction of the rows of every rank */
	size_t rows_cap, red_cap;
};

struct th_checker {
	shmcoll_comm *comm;
	int rank, size;
	size_t cap, symcap;     /* region bytes of the ordinary / symmetric areas */
	unsigned char *a, *b;   /* ordinary areas: 2 GUARD + cap + GUARD */
	unsigned char *sa, *sb; /* symmetric areas: 2 GUARD + symcap + GUARD */
	unsigned char *in, *ex; /* this rank's input, expected output */
	int borrowed;           /* sa, sb belong to another checker */
	uint64_t seq;           /* calls so far: the same on every rank */
	int first_err;
	int printed;
	struct th_memo memo; /* reference data of the last case shape (see memo_use) */
};

th_checker *th_check_new(shmcoll_comm *comm, size_t max_bytes, size_t sym_bytes, int *err)
{
	th_checker *ck = calloc(1, sizeof(*ck));

	*err = TH_E_NOMEM;
	if (!ck)
		return NULL;
	ck->comm = comm;
	ck->rank = shmcoll_comm_rank(comm);
	ck->size = shmcoll_comm_size(comm);
	ck->cap = max_bytes;
	ck->a = malloc(max_bytes + AREA_EXTRA);
	ck->b = malloc(max_bytes + AREA_EXTRA);
	ck->in = malloc(max_bytes + 1);
	ck->ex = malloc(max_bytes + 1);
	if (!ck->a || !ck->b || !ck->in || !ck->ex)
		goto err;
	if (sym_bytes) {
		/* Collective: every rank gets here with the same sizes. */
		ck->sa = shmcoll_malloc(comm, sym_bytes + AREA_EXTRA);
		ck->sb = shmcoll_malloc(comm, sym_bytes + AREA_EXTRA);
		if (!ck->sa || !ck->sb) {
			fprintf(stderr, "[rank %d/%d] shmcoll_malloc(%zu) x2: %p %p: %s\n",
			        ck->rank, ck->size, sym_bytes + AREA_EXTRA, (void *)ck->sa,
			        (void *)ck->sb, shmcoll_last_error(comm));
			*err = TH_E_SYMALLOC;
			goto err;
		}
		ck->symcap = sym_bytes;
	}
	*err = 0;
	return ck;
err:
	/* A failed collective allocation leaves the ranks in step only if it
	 * failed on all of them; the caller stops using comm either way. */
	if (ck->sb)
		shmcoll_free(comm, ck->sb);
	if (ck->sa)
		shmcoll_free(comm, ck->sa);
	free(ck->ex);
	free(ck->in);
	free(ck->b);
	free(ck->a);
	free(ck);
	return NULL;
}

int th_check_free(th_checker *ck)
{
	int rc = 0;

	if (!ck)
		return 0;
	if (!ck->borrowed && ck->sb && shmcoll_free(ck->comm, ck->sb))
		rc = TH_E_SYMFREE;
	if (!ck->borrowed && ck->sa && shmcoll_free(ck->comm, ck->sa))
		rc = TH_E_SYMFREE;
	free(ck->memo.rows);
	free(ck->memo.red);
	free(ck->ex);
	free(ck->in);
	free(ck->b);
	free(ck->a);
	free(ck);
	return rc;
}

void th_check_borrow_sym(th_checker *ck, const th_checker *from)
{
	ck->sa = from->sa;
	ck->sb = from->sb;
	ck->symcap = from->symcap;
	ck->borrowed = 1;
}

int th_check_first_error(const th_checker *ck)
{
	return ck->first_err;
}

int th_check_sym_fits(const th_checker *ck, const th_case *kc)
{
	return kc->sym == TH_SYM_NONE ||
	       (ck->sa &&
	        th_coll_region_elems(kc->coll, kc->count, ck->size) * th_dtype_size(kc->dtype) <=
	            ck->symcap);
}

uint64_t th_input_int(shmcoll_dtype dt, uint64_t h)
{
	switch (dt) {
	case SHMCOLL_INT8:
		return (uint64_t)(int64_t)(int8_t)(uint8_t)h;
	case SHMCOLL_UINT8:
		return (uint8_t)h;
	case SHMCOLL_INT32:
		return (uint64_t)(int64_t)(int32_t)(uint32_t)h;
	case SHMCOLL_UINT32:
		return (uint32_t)h;
	default:
		return h;
	}
}

double th_input_float(shmcoll_op op, uint64_t h)
{
	double m;

	switch (op) {
	case SHMCOLL_SUM:
	case SHMCOLL_AVG:
		return ((int)(h % 512) - 256) / 16.0;
	case SHMCOLL_PROD:
		m = (h >> 12) % 8 == 0 ? 2.0 : (h >> 12) % 8 == 1 ? 0.5 : 1.0;
		return (h & 1) ? -m : m;
	default:
		return ((int)(h % 64) - 32) * 0.25;
	}
}

void th_store_float(shmcoll_dtype dt, void *dst, double d)
{
	float f = (float)d;
	uint16_t h;

	switch (dt) {
	case SHMCOLL_FLOAT16:
		h = th_f32_to_f16(f);
		memcpy(dst, &h, 2);
		break;
	case SHMCOLL_BFLOAT16:
		h = th_f32_to_bf16(f);
		memcpy(dst, &h, 2);
		break;
	case SHMCOLL_FLOAT32:
		memcpy(dst, &f, 4);
		break;
	default:
		memcpy(dst, &d, 8);
		break;
	}
}

/* Edge values of an integer type (sign- or zero-extended): min, max, 0, -1
 * (all ones), 1, min + 1, max - 1. */
static uint64_t edge_int(shmcoll_dtype dt, uint64_t h)
{
	int bits = (int)th_dtype_size(dt) * 8;
	uint64_t ones = bits == 64 ? ~0ull : (1ull << bits) - 1;
	uint64_t umin = 0, umax = ones, v;

	if (th_dtype_is_signed(dt)) {
		umax = ones >> 1;
		umin = ~umax; /* sign-extended minimum */
	}
	switch (h % 7) {
	case 0:
		v = umin;
		break;
	case 1:
		v = umax;
		break;
	case 2:
		v = 0;
		break;
	case 3:
		v = th_dtype_is_signed(dt) ? ~0ull : ones;
		break;
	case 4:
		v = 1;
		break;
	case 5:
		v = umin + 1;
		break;
	default:
		v = umax - 1;
		break;
	}
	return v;
}

/* Edge values of the float types, by class = element index % 4, each with one
 * answer whatever the order of folding (and exactly one rounding):
 * 0: the smallest subnormals x {1, 2, 3} (negative on odd ranks for MIN/MAX)
 *    - a flush-to-zero anywhere shows;
 * 1: -0 on every rank (SUM -0, PROD (-0)^P);
 * 2: the largest finite value on rank 0 and half its ulp on rank 1 (PROD: 2;
 *    AVG on float32/float64: 0), 0 (PROD: 1) elsewhere: the sum rounds to
 *    infinity (ties to even); for 16-bit types only in the final rounding;
 * 3: +inf on rank 0, -8 on rank 1, the rank elsewhere. */
static double edge_float(shmcoll_dtype dt, shmcoll_op op, int r, size_t idx)
{
	static const double tiny[] = {0x1p-24, 0x1p-133, 0x1p-149, 0x1p-1074};
	static const double max[] = {65504.0, 0x1.fep127, 0x1.fffffep127, DBL_MAX};
	static const double half_ulp[] = {16.0, 0x1p119, 0x1p103, 0x1p970};
	int t = (int)dt - SHMCOLL_FLOAT16;
	double v;

	switch (idx % 4) {
	case 0:
		v = tiny[t] * (double)(1 + ((size_t)r + idx) % 3);
		return (op == SHMCOLL_MIN || op == SHMCOLL_MAX) && (r & 1) ? -v : v;
	case 1:
		return -0.0;
	case 2:
		if (r == 0)
			return max[t];
		if (r == 1)
			return op == SHMCOLL_PROD                           ? 2.0
			       : op == SHMCOLL_AVG && dt >= SHMCOLL_FLOAT32 ? 0.0
			                                                    : half_ulp[t];
		return op == SHMCOLL_PROD ? 1.0 : 0.0;
	default:
		return r == 0 ? HUGE_VAL : r == 1 ? -8.0 : (double)r;
	}
}

static uint64_t in_int(const th_case *kc, uint64_t salt, int r, size_t idx)
{
	uint64_t h = th_hash(salt, r, idx);

	return kc->edge ? edge_int(kc->dtype, h) : th_input_int(kc->dtype, h);
}

static double in_float(const th_case *kc, uint64_t salt, int r, size_t idx)
{
	if (kc->edge)
		return edge_float(kc->dtype, kc->op, r, idx);
	return th_input_float(kc->op, th_hash(salt, r, idx));
}

/* Element idx of rank r's send data for this call. Data movement gets raw
 * hash bits (any bit pattern, NaNs included, must travel unchanged). */
static void gen_elem(const th_case *kc, uint64_t salt, int r, size_t idx, unsigned char *dst)
{
	uint64_t h = th_hash(salt, r, idx), u;
	size_t es = th_dtype_size(kc->dtype);

	if (!th_coll_reduces(kc->coll)) {
		memcpy(dst, &h, es); /* x86: the low bytes */
	} else if (th_dtype_is_float(kc->dtype)) {
		th_store_float(kc->dtype, dst, in_float(kc, salt, r, idx));
	} else {
		u = in_int(kc, salt, r, idx);
		memcpy(dst, &u, es);
	}
}

/* out[i] = op over ranks 0..size-1 of element base + i, from the definition. */
static void expect_reduce(const th_case *kc, uint64_t salt, int size, size_t base, size_t n,
                          unsigned char *out)
{
	shmcoll_dtype dt = kc->dtype;
	shmcoll_op op = kc->op;
	size_t es = th_dtype_size(dt), i;
	int r, sgn = th_dtype_is_signed(dt);
	uint64_t acc64;

	for (i = 0; i < n; i++) {
		if (th_dtype_is_float(dt)) {
			double acc = in_float(kc, salt, 0, base + i), v;

			for (r = 1; r < size; r++) {
				v = in_float(kc, salt, r, base + i);
				if (op == SHMCOLL_SUM || op == SHMCOLL_AVG)
					acc += v;
				else if (op == SHMCOLL_PROD)
					acc *= v;
				else if (op == SHMCOLL_MIN)
					acc = v < acc ? v : acc;
				else
					acc = v > acc ? v : acc;
			}
			if (op == SHMCOLL_AVG && dt == SHMCOLL_FLOAT64)
				acc = acc / size;
			else if (op == SHMCOLL_AVG) /* float32 division, then one rounding */
				acc = (double)((float)acc / (float)size);
			th_store_float(dt, out + i * es, acc);
		} else if (op == SHMCOLL_AVG) {
			/* The exact sum: 128 bits hold it for any type and size. */
			i128 sacc = 0;
			u128 uacc = 0;

			for (r = 0; r < size; r++) {
				uint64_t v = in_int(kc, salt, r, base + i);

				sacc += (int64_t)v;
				uacc += v;
			}
			acc64 =
			    sgn ? (uint64_t)(int64_t)(sacc / size) : (uint64_t)(uacc / (u128)size);
			memcpy(out + i * es, &acc64, es);
		} else {
			uint64_t acc = in_int(kc, salt, 0, base + i), v;

			for (r = 1; r < size; r++) {
				v = in_int(kc, salt, r, base + i);
				switch (op) {
				case SHMCOLL_SUM:
					acc += v;
					break;
				case SHMCOLL_PROD:
					acc *= v;
					break;
				case SHMCOLL_MIN:
					if (sgn ? (int64_t)v < (int64_t)acc : v < acc)
						acc = v;
					break;
				case SHMCOLL_MAX:
					if (sgn ? (int64_t)v > (int64_t)acc : v > acc)
						acc = v;
					break;
				case SHMCOLL_BAND:
					acc &= v;
					break;
				case SHMCOLL_BOR:
					acc |= v;
					break;
				default:
					acc ^= v;
					break;
				}
			}
			memcpy(out + i * es, &acc, es);
		}
	}
}

static unsigned char pat_byte(uint64_t seed, size_t off)
{
	return (unsigned char)((unsigned)seed + off * (((unsigned)(seed >> 8) & 0xfe) | 1));
}

/* The pattern repeats every 256 bytes: one period, copied or compared a
 * piece at a time (byte by byte, the guards' fills and checks were a fifth
 * of the matrix's time). */
static void pat_period(uint64_t seed, unsigned char t[256])
{
	size_t j;

	for (j = 0; j < 256; j++)
		t[j] = pat_byte(seed, j);
}

static void pat_fill(unsigned char *p, size_t from, size_t to, uint64_t seed)
{
	unsigned char t[256];
	size_t i, k;

	pat_period(seed, t);
	for (i = from; i < to; i += k) {
		k = 256 - (i & 255);
		k = k < to - i ? k : to - i;
		memcpy(p + i, t + (i & 255), k);
	}
}

static size_t pat_find_bad(const unsigned char *p, size_t from, size_t to, uint64_t seed)
{
	unsigned char t[256];
	size_t i, k, j;

	pat_period(seed, t);
	for (i = from; i < to; i += k) {
		k = 256 - (i & 255);
		k = k < to - i ? k : to - i;
		if (memcmp(p + i, t + (i & 255), k))
			for (j = i; j < i + k; j++)
				if (p[j] != t[j & 255])
					return j;
	}
	return SIZE_MAX;
}

static void describe(const th_checker *ck, const th_case *kc, char *buf, size_t len)
{
	char root[16] = "-", op[16] = "-";
	static const char *const vn[] = {"out-of-place", "in-place", "null-at-nonroot"};

	if (th_coll_rooted(kc->coll))
		snprintf(root, sizeof(root), "%d", kc->root);
	if (th_coll_reduces(kc->coll))
		snprintf(op, sizeof(op), "%s", th_op_name(kc->op));
	snprintf(buf, len,
	         "%s dtype=%s op=%s P=%d count=%zu root=%s %s buffers=%s misalign=%zu+%zu*rank%s "
	         "rank=%d",
	         th_coll_name(kc->coll), th_dtype_name(kc->dtype), op, ck->size, kc->count, root,
	         (unsigned)kc->variant < TH_VARIANT_COUNT ? vn[kc->variant] : "?",
	         th_sym_name(kc->sym), kc->misalign, kc->skew, kc->edge ? " edge-values" : "",
	         ck->rank);
}

void th_format_elem(shmcoll_dtype dt, const unsigned char *p, char *buf, size_t len)
{
	uint64_t u = 0;
	int64_t s;
	size_t es = th_dtype_size(dt);
	float f;
	double d;

	memcpy(&u, p, es);
	switch (dt) {
	case SHMCOLL_FLOAT16:
		snprintf(buf, len, "0x%04llx (%g)", (unsigned long long)u,
		         (double)th_f16_to_f32((uint16_t)u));
		break;
	case SHMCOLL_BFLOAT16:
		snprintf(buf, len, "0x%04llx (%g)", (unsigned long long)u,
		         (double)th_bf16_to_f32((uint16_t)u));
		break;
	case SHMCOLL_FLOAT32:
		memcpy(&f, p, 4);
		snprintf(buf, len, "0x%08llx (%.9g)", (unsigned long long)u, (double)f);
		break;
	case SHMCOLL_FLOAT64:
		memcpy(&d, p, 8);
		snprintf(buf, len, "0x%016llx (%.17g)", (unsigned long long)u, d);
		break;
	default:
		if (th_dtype_is_signed(dt)) {
			s = es == 1 ? (int8_t)u : es == 4 ? (int32_t)u : (int64_t)u;
			snprintf(buf, len, "0x%0*llx (%lld)", (int)(2 * es), (unsigned long long)u,
			         (long long)s);
		} else {
			snprintf(buf, len, "0x%0*llx (%llu)", (int)(2 * es), (unsigned long long)u,
			         (unsigned long long)u);
		}
		break;
	}
}

static int fail(th_checker *ck, const th_case *kc, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(th_checker *ck, const th_case *kc, int code, const char *fmt, ...)
{
	char what[256], msg[512];
	va_list ap;

	if (!ck->first_err)
		ck->first_err = code;
	if (ck->printed++ >= MAX_PRINTS)
		return code;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	describe(ck, kc, what, sizeof(what));
	fprintf(stderr, "FAIL %s: %s\n", what, msg);
	if (ck->printed == MAX_PRINTS)
		fprintf(stderr, "[rank %d] further failures not printed\n", ck->rank);
	return code;
}

/* Elements [0, n) of got against want; on a mismatch reports the first bad
 * index (plus elem_base, for blocks) and returns code. */
static int cmp_elems(th_checker *ck, const th_case *kc, const char *buf_name,
                     const unsigned char *got, const unsigned char *want, size_t n,
                     size_t elem_base, int code)
{
	size_t es = th_dtype_size(kc->dtype), i, nbad = 0, first = 0;
	char g[64], w[64];

	if (!memcmp(got, want, n * es))
		return 0;
	for (i = 0; i < n; i++) {
		if (memcmp(got + i * es, want + i * es, es)) {
			if (!nbad++)
				first = i;
		}
	}
	th_format_elem(kc->dtype, got + first * es, g, sizeof(g));
	th_format_elem(kc->dtype, want + first * es, w, sizeof(w));
	return fail(ck, kc, code, "%s: first bad index %zu got %s want %s (%zu of %zu bad)",
	            buf_name, elem_base + first, g, w, nbad, n);
}

/* The pattern bytes [from, to) of area p, whose buffer starts at offset off. */
static int cmp_pattern(th_checker *ck, const th_case *kc, const char *buf_name,
                       const unsigned char *p, size_t off, size_t from, size_t to, uint64_t seed,
                       int code)
{
	size_t bad = pat_find_bad(p, from, to, seed);

	if (bad == SIZE_MAX)
		return 0;
	return fail(ck, kc, code,
	            "%s: byte at offset %td from the buffer start changed: got 0x%02x want 0x%02x",
	            buf_name, (ptrdiff_t)bad - (ptrdiff_t)off, p[bad], pat_byte(seed, bad));
}

int th_call(shmcoll_comm *c, th_coll coll, const void *s, void *r, size_t n, shmcoll_dtype dt,
            shmcoll_op op, int root)
{
	switch (coll) {
	case TH_ALLREDUCE:
		return shmcoll_allreduce(s, r, n, dt, op, c);
	case TH_REDUCE:
		return shmcoll_reduce(s, r, n, dt, op, root, c);
	case TH_BCAST:
		return shmcoll_bcast(r, n, dt, root, c);
	case TH_ALLGATHER:
		return shmcoll_allgather(s, r, n, dt, c);
	case TH_REDUCE_SCATTER:
		return shmcoll_reduce_scatter(s, r, n, dt, op, c);
	case TH_GATHER:
		return shmcoll_gather(s, r, n, dt, root, c);
	case TH_SCATTER:
		return shmcoll_scatter(s, r, n, dt, root, c);
	case TH_ALLTOALL:
		return shmcoll_alltoall(s, r, n, dt, c);
	default:
		return shmcoll_barrier(c);
	}
}

static int call(const th_checker *ck, const th_case *kc, const void *s, void *r)
{
	return th_call(ck->comm, kc->coll, s, r, kc->count, kc->dtype, kc->op, kc->root);
}

void th_shape_of(th_coll coll, size_t count, int rank, int size, int root_rank, th_shape *sh)
{
	size_t n = count, pn = (size_t)size * n;
	int root = !th_coll_rooted(coll) || rank == root_rank;

	sh->has_input = 1;
	sh->has_output = 1;
	switch (coll) {
	case TH_ALLREDUCE:
	case TH_REDUCE:
		sh->sendn = n;
		sh->recvn = n;
		sh->has_output = root;
		break;
	case TH_BCAST:
		sh->sendn = 0;
		sh->recvn = n;
		sh->has_input = root;
		break;
	case TH_ALLGATHER:
	case TH_GATHER:
		sh->sendn = n;
		sh->recvn = pn;
		sh->has_output = root;
		break;
	case TH_REDUCE_SCATTER:
		sh->sendn = pn;
		sh->recvn = n;
		break;
	case TH_SCATTER:
		sh->sendn = pn;
		sh->recvn = n;
		sh->has_input = root;
		break;
	case TH_ALLTOALL:
		sh->sendn = pn;
		sh->recvn = pn;
		break;
	default:
		sh->sendn = sh->recvn = 0;
		sh->has_input = sh->has_output = 0;
		break;
	}
}

/* Fills ck->ex with what this rank must receive. */
static void expect(th_checker *ck, const th_case *kc, uint64_t salt)
{
	size_t n = kc->count, es = th_dtype_size(kc->dtype), i;
	int P = ck->size, me = ck->rank, r;

	switch (kc->coll) {
	case TH_ALLREDUCE:
	case TH_REDUCE:
		expect_reduce(kc, salt, P, 0, n, ck->ex);
		break;
	case TH_REDUCE_SCATTER:
		expect_reduce(kc, salt, P, (size_t)me * n, n, ck->ex);
		break;
	case TH_BCAST:
		for (i = 0; i < n; i++)
			gen_elem(kc, salt, kc->root, i, ck->ex + i * es);
		break;
	case TH_ALLGATHER:
	case TH_GATHER:
		for (r = 0; r < P; r++)
			for (i = 0; i < n; i++)
				gen_elem(kc, salt, r, i, ck->ex + ((size_t)r * n + i) * es);
		break;
	case TH_SCATTER:
		for (i = 0; i < n; i++)
			gen_elem(kc, salt, kc->root, (size_t)me * n + i, ck->ex + i * es);
		break;
	default:
		for (r = 0; r < P; r++)
			for (i = 0; i < n; i++)
				gen_elem(kc, salt, r, (size_t)me * n + i,
				         ck->ex + ((size_t)r * n + i) * es);
		break;
	}
}

/* Cases of MEMO_MIN_COUNT elements or more reuse their shape's reference data
 * (the hashing of every rank's data, at every rank, was most of the matrix's
 * time): call k of a shape sends, at index i, what the shape's rows hold at
 * (i + s_k) mod len, so every call's data differ from the last one's (a
 * result left over from the previous call does not pass) while the expected
 * values are the memo's, rotated the same way. Smaller cases, whose rotations
 * would repeat, get fresh data every call. */
#define MEMO_MIN_COUNT 64
#define MEMO_MAX_BYTES ((size_t)64 << 20)

/* Elements in a row: the index space of one rank's send data. */
static size_t memo_len(th_coll c, size_t n, int P)
{
	return c == TH_REDUCE_SCATTER || c == TH_SCATTER || c == TH_ALLTOALL ? (size_t)P * n : n;
}

/* dst[i] = row[(from + i) mod len], i < n. */
static void rotated(unsigned char *dst, const unsigned char *row, size_t len, size_t from, size_t n,
                    size_t es)
{
	size_t k;

	from %= len;
	while (n) {
		k = n < len - from ? n : len - from;
		memcpy(dst, row + from * es, k * es);
		dst += k * es;
		n -= k;
		from = 0;
	}
}

static int grow(unsigned char **p, size_t *cap, size_t need)
{
	unsigned char *q;

	if (need <= *cap)
		return 0;
	q = realloc(*p, need);
	if (!q)
		return -1;
	*p = q;
	*cap = need;
	return 0;
}

/* Makes the memo hold kc's shape, generating it from salt when it does not;
 * -1 when the case is not one the memo takes. Rows: this rank's
 * (reductions), the root's (bcast, scatter), every rank's (the rest). */
static int memo_ready(th_checker *ck, const th_case *kc, uint64_t salt)
{
	struct th_memo *m = &ck->memo;
	size_t n = kc->count, es = th_dtype_size(kc->dtype), len, nrows, i, k;
	int P = ck->size, reduces = th_coll_reduces(kc->coll);
	int by_root = kc->coll == TH_BCAST || kc->coll == TH_SCATTER;
	int root = by_root ? kc->root : -1, r;

	if (n < MEMO_MIN_COUNT || kc->coll == TH_BARRIER)
		return -1;
	if (m->valid && m->coll == kc->coll && m->dtype == kc->dtype && m->count == n &&
	    m->edge == kc->edge && m->root == root && (!reduces || m->op == kc->op))
		return 0;
	len = memo_len(kc->coll, n, P);
	nrows = reduces || by_root ? 1 : (size_t)P;
	if (len > MEMO_MAX_BYTES / es / nrows)
		return -1;
	m->valid = 0;
	if (grow(&m->rows, &m->rows_cap, nrows * len * es) ||
	    (reduces && grow(&m->red, &m->red_cap, len * es)))
		return -1;
	for (k = 0; k < nrows; k++) {
		r = reduces ? ck->rank : by_root ? root : (int)k;
		for (i = 0; i < len; i++)
			gen_elem(kc, salt, r, i, m->rows + (k * len + i) * es);
	}
	if (reduces)
		expect_reduce(kc, salt, P, 0, len, m->red);
	*m = (struct th_memo){
	    .valid = 1,
	    .coll = kc->coll,
	    .dtype = kc->dtype,
	    .op = kc->op,
	    .edge = kc->edge,
	    .root = root,
	    .count = n,
	    .len = len,
	    .shift = len,
	    .rows = m->rows,
	    .red = m->red,
	    .rows_cap = m->rows_cap,
	    .red_cap = m->red_cap,
	};
	return 0;
}

/* ck->in and ck->ex for kc from the memo, rotated by a shift other than the
 * last call's; -1 when the memo does not take the case (the caller generates). */
static int memo_use(th_checker *ck, const th_case *kc, const th_shape *sh, uint64_t salt)
{
	struct th_memo *m = &ck->memo;
	size_t n = kc->count, es = th_dtype_size(kc->dtype), len, s, me = (size_t)ck->rank;
	const unsigned char *own;
	int r;

	if (memo_ready(ck, kc, salt))
		return -1;
	len = m->len;
	s = th_mix(salt ^ 0x5bd1e995u) % len;
	if (s == m->shift)
		s = (s + 1) % len;
	m->shift = s;
	own = th_coll_reduces(kc->coll) || kc->coll == TH_BCAST || kc->coll == TH_SCATTER
	          ? m->rows
	          : m->rows + me * len * es;
	if (sh->has_input)
		rotated(ck->in, own, len, s, kc->coll == TH_BCAST ? n : sh->sendn, es);
	if (!sh->has_output)
		return 0;
	switch (kc->coll) {
	case TH_ALLREDUCE:
	case TH_REDUCE:
		rotated(ck->ex, m->red, len, s, n, es);
		break;
	case TH_REDUCE_SCATTER:
		rotated(ck->ex, m->red, len, me * n + s, n, es);
		break;
	case TH_BCAST:
		rotated(ck->ex, m->rows, len, s, n, es);
		break;
	case TH_SCATTER:
		rotated(ck->ex, m->rows, len, me * n + s, n, es);
		break;
	case TH_ALLGATHER:
	case TH_GATHER:
		for (r = 0; r < ck->size; r++)
			rotated(ck->ex + (size_t)r * n * es, m->rows + (size_t)r * len * es, len, s,
			        n, es);
		break;
	default: /* alltoall */
		for (r = 0; r < ck->size; r++)
			rotated(ck->ex + (size_t)r * n * es, m->rows + (size_t)r * len * es, len,
			        me * n + s, n, es);
		break;
	}
	return 0;
}

static int run_in_place(th_checker *ck, const th_case *kc, const th_shape *sh, unsigned char *A,
                        size_t off, uint64_t seed)
{
	size_t n = kc->count, es = th_dtype_size(kc->dtype);
	size_t bufn = sh->sendn > sh->recvn ? sh->sendn : sh->recvn;
	size_t nb = bufn * es, mine = (size_t)ck->rank * n * es;
	unsigned char *buf = A + off;
	int rc, err, e;

	pat_fill(A, 0, off + nb + GUARD, seed);
	if (kc->coll == TH_ALLGATHER)
		memcpy(buf + mine, ck->in, n * es);
	else if (sh->has_input)
		memcpy(buf, ck->in, (kc->coll == TH_BCAST ? n : sh->sendn) * es);

	switch (kc->coll) {
	case TH_ALLGATHER:
		rc = call(ck, kc, buf + mine, buf);
		break;
	case TH_REDUCE_SCATTER:
		rc = call(ck, kc, buf, buf + mine);
		break;
	default:
		rc = call(ck, kc, buf, buf);
		break;
	}
	if (rc)
		return fail(ck, kc, TH_E_CALL, "returned %d (%s): %s", rc, shmcoll_strerror(rc),
		            shmcoll_last_error(ck->comm));

	err = cmp_pattern(ck, kc, "in-place buffer guard", A, off, 0, off, seed, TH_E_GUARD);
	e = cmp_pattern(ck, kc, "in-place buffer guard", A, off, off + nb, off + nb + GUARD, seed,
	                TH_E_GUARD);
	err = err ? err : e;
	switch (kc->coll) {
	case TH_REDUCE:
		if (sh->has_output)
			e = cmp_elems(ck, kc, "recvbuf (in place)", buf, ck->ex, n, 0, TH_E_OUT);
		else
			e = cmp_elems(ck, kc, "non-root sendbuf==recvbuf", buf, ck->in, n, 0,
			              TH_E_UNTOUCHED);
		break;
	case TH_REDUCE_SCATTER:
		e = cmp_elems(ck, kc, "recvbuf block (in place)", buf + mine, ck->ex, n, 0,
		              TH_E_OUT);
		err = err ? err : e;
		e = cmp_elems(ck, kc, "sendbuf outside own block (in place)", buf, ck->in,
		              (size_t)ck->rank * n, 0, TH_E_SEND);
		err = err ? err : e;
		e = cmp_elems(ck, kc, "sendbuf outside own block (in place)", buf + mine + n * es,
		              ck->in + mine + n * es, sh->sendn - (size_t)(ck->rank + 1) * n,
		              (size_t)(ck->rank + 1) * n, TH_E_SEND);
		break;
	default:
		e = cmp_elems(ck, kc, "recvbuf (in place)", buf, ck->ex, sh->recvn, 0, TH_E_OUT);
		break;
	}
	return err ? err : e;
}

static int run_out_of_place(th_checker *ck, const th_case *kc, const th_shape *sh, unsigned char *A,
                            unsigned char *B, size_t off, uint64_t sa, uint64_t sb)
{
	size_t es = th_dtype_size(kc->dtype);
	size_t snb = sh->sendn * es, rnb = sh->recvn * es;
	int null_send = kc->variant == TH_NULL_NONROOT && !sh->has_input;
	int null_recv = kc->variant == TH_NULL_NONROOT && !sh->has_output;
	int rc, err = 0, e;

	pat_fill(A, 0, off + snb + GUARD, sa);
	if (sh->has_input)
		memcpy(A + off, ck->in, snb);
	pat_fill(B, 0, off + rnb + GUARD, sb);
	rc = call(ck, kc, null_send ? NULL : A + off, null_recv ? NULL : B + off);
	if (rc)
		return fail(ck, kc, TH_E_CALL, "returned %d (%s): %s", rc, shmcoll_strerror(rc),
		            shmcoll_last_error(ck->comm));

	if (!null_send) {
		e = cmp_pattern(ck, kc, "sendbuf guard", A, off, 0, off, sa, TH_E_GUARD);
		err = err ? err : e;
		e = cmp_pattern(ck, kc, "sendbuf guard", A, off, off + snb, off + snb + GUARD, sa,
		                TH_E_GUARD);
		err = err ? err : e;
		if (sh->has_input)
			e = cmp_elems(ck, kc, "sendbuf", A + off, ck->in, sh->sendn, 0, TH_E_SEND);
		else
			e = cmp_pattern(ck, kc, "non-root sendbuf", A, off, off, off + snb, sa,
			                TH_E_UNTOUCHED);
		err = err ? err : e;
	}
	if (!null_recv) {
		e = cmp_pattern(ck, kc, "recvbuf guard", B, off, 0, off, sb, TH_E_GUARD);
		err = err ? err : e;
		e = cmp_pattern(ck, kc, "recvbuf guard", B, off, off + rnb, off + rnb + GUARD, sb,
		                TH_E_GUARD);
		err = err ? err : e;
		if (sh->has_output)
			e = cmp_elems(ck, kc, "recvbuf", B + off, ck->ex, sh->recvn, 0, TH_E_OUT);
		else
			e = cmp_pattern(ck, kc, "non-root recvbuf", B, off, off, off + rnb, sb,
			                TH_E_UNTOUCHED);
		err = err ? err : e;
	}
	return err;
}

int th_check_run(th_checker *ck, const th_case *kc)
{
	uint64_t seq = ++ck->seq;
	uint64_t salt = th_mix(seq * 0x2545f4914f6cdd1dull + (uint64_t)kc->coll);
	size_t es = th_dtype_size(kc->dtype), i, cap, need, off;
	th_shape sh;
	unsigned char *A, *B;
	int rc, even = !(ck->rank & 1), sa, sb;

	if (crumb) {
		describe(ck, kc, crumb, CRUMB_LEN);
		crumb[CRUMB_LEN - 1] = '\0';
	}
	if (kc->coll == TH_BARRIER) {
		rc = shmcoll_barrier(ck->comm);
		if (rc)
			return fail(ck, kc, TH_E_CALL, "returned %d (%s): %s", rc,
			            shmcoll_strerror(rc), shmcoll_last_error(ck->comm));
		return 0;
	}
	th_shape_of(kc->coll, kc->count, ck->rank, ck->size, kc->root, &sh);
	sa = kc->sym == TH_SYM_BOTH || kc->sym == TH_SYM_SEND || (kc->sym == TH_SYM_EVEN && even);
	sb = kc->sym == TH_SYM_BOTH || kc->sym == TH_SYM_RECV || (kc->sym == TH_SYM_EVEN && even);
	if (kc->variant == TH_IN_PLACE)
		sa = sa || sb;
	need = (sh.sendn > sh.recvn ? sh.sendn : sh.recvn) * es;
	cap = sa || sb ? (ck->symcap < ck->cap ? ck->symcap : ck->cap) : ck->cap;
	if (!es || need > cap || (unsigned)kc->sym >= TH_SYM_COUNT || kc->misalign >= GUARD ||
	    ((sa || sb) && !ck->sa))
		return fail(ck, kc, TH_E_SETUP, "buffers of %zu bytes do not hold the case", cap);
	A = sa ? ck->sa : ck->a;
	B = sb ? ck->sb : ck->b;

	if (memo_use(ck, kc, &sh, salt)) {
		if (sh.has_input)
			for (i = 0; i < (kc->coll == TH_BCAST ? kc->count : sh.sendn); i++)
				gen_elem(kc, salt, ck->rank, i, ck->in + i * es);
		if (sh.has_output)
			expect(ck, kc, salt);
	}
	off = GUARD + (kc->misalign + kc->skew * (size_t)ck->rank) % GUARD;
	if (kc->variant == TH_IN_PLACE)
		return run_in_place(ck, kc, &sh, A, off, salt ^ 0xa5a5);
	return run_out_of_place(ck, kc, &sh, A, B, off, salt ^ 0x1234, salt ^ 0x5678);
}

int th_barrier_rounds(shmcoll_comm *comm, int rank, int size, _Atomic int *counters, int rounds)
{
	int k, j, c, rc;

	for (k = 1; k <= rounds; k++) {
		th_breadcrumb("barrier round %d of %d", k, rounds);
		/* Relaxed on purpose: the barrier itself must order this store
		 * before the peers' loads after it. */
		atomic_store_explicit(&counters[rank * TH_BARRIER_STRIDE], k, memory_order_relaxed);
		rc = shmcoll_barrier(comm);
		if (rc) {
			fprintf(stderr,
			        "FAIL barrier P=%d rank=%d round %d: returned %d (%s): %s\n", size,
			        rank, k, rc, shmcoll_strerror(rc), shmcoll_last_error(comm));
			return TH_E_CALL;
		}
		for (j = 0; j < size; j++) {
			c = atomic_load_explicit(&counters[j * TH_BARRIER_STRIDE],
			                         memory_order_relaxed);
			if (c < k || c > k + 1) {
				fprintf(stderr,
				        "FAIL barrier P=%d rank=%d: after barrier %d rank %d's "
				        "counter is %d (want %d or %d)\n",
				        size, rank, k, j, c, k, k + 1);
				return TH_E_BARRIER;
			}
		}
	}
	return 0;
}

/* Whether one process can read a sibling's memory with process_vm_readv
 * (the harness's ranks are siblings: Yama's ptrace_scope 1 allows reading a
 * child but not a sibling), found independently of the library: one forked
 * child reads a word another changed after the fork. */
int th_siblings_can_read(void)
{
	volatile uint64_t *w =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	static uint64_t mine;
	pid_t target, reader;
	int ok, st;

	if (w == MAP_FAILED)
		return 0;
	/* w[0]: the target is ready; w[1]: the reader's verdict + 1; */
	target = fork();
	if (target == 0) {
		mine = 0x5eed5eed5eedull;
		w[0] = 1;
		while (w[1] == 0)
			usleep(1000);
		_exit(0);
	}
	reader = target > 0 ? fork() : -1;
	if (reader == 0) {
		uint64_t got = 0;
		struct iovec l = {&got, sizeof(got)}, r = {&mine, sizeof(mine)};

		while (w[0] == 0)
			usleep(1000);
		w[1] = 1 + (process_vm_readv(target, &l, 1, &r, 1, 0) == (ssize_t)sizeof(got) &&
		            got == 0x5eed5eed5eedull);
		_exit(0);
	}
	if (reader < 0)
		w[1] = 1;
	if (reader > 0)
		waitpid(reader, &st, 0);
	if (target > 0)
		waitpid(target, &st, 0);
	ok = w[1] == 2;
	munmap((void *)w, 4096);
	return ok;
}
