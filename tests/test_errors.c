/* test_errors.c - bad arguments per the contract: -EINVAL with a message that
 * names the argument, no crash, no hang, no buffer touched, and the
 * communicator still works after. P=1 in this process; P=2 as processes and
 * as threads, every rank passing the same bad argument. */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define TIMEOUT_MS 10000
#define N          4    /* the count of the bad calls */
#define BUF_BYTES  4096 /* each buffer; every call stays inside it */

/* Exit codes: which kind of check failed (stderr says which call). */
#define E_NOT_EINVAL 40 /* a bad call did not return -EINVAL */
#define E_NO_MSG     41 /* shmcoll_last_error empty after a bad call */
#define E_MSG_NAME   42 /* the message does not name the argument */
#define E_TOUCHED    43 /* a failed call wrote a buffer */
#define E_AFTER      44 /* a correct allreduce after a bad call failed */
#define E_ACCEPTED   45 /* an accepted form (in place, NULL with count 0, adjacent) failed */
#define E_STRERROR   46 /* shmcoll_strerror */
#define E_CREATE     47 /* shmcoll_comm_create accepted a bad config */
#define E_HEAP       48 /* shmcoll_malloc / shmcoll_free */
#define E_NULLCOMM   49 /* a NULL comm was not rejected */

struct ectx {
	shmcoll_comm *comm;
	int rank, size;
	int first;            /* first failure code */
	unsigned char *S, *R; /* BUF_BYTES each, pattern-filled before every bad call */
	uint64_t seed;
	char note[64]; /* loop variables of the failing call, if any */
};

static void efail(struct ectx *e, int code, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void efail(struct ectx *e, int code, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!e->first)
		e->first = code;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write per line: ranks share stderr. */
	fprintf(stderr, "FAIL errors P=%d rank=%d line %d%s%s: %s\n", e->size, e->rank, line,
	        *e->note ? " " : "", e->note, msg);
}

static unsigned char pat(uint64_t seed, size_t i)
{
	return (unsigned char)(th_hash(seed, 0, i / 8) >> (8 * (i % 8)));
}

static void prep(struct ectx *e)
{
	size_t i;

	e->seed++;
	for (i = 0; i < BUF_BYTES; i++) {
		e->S[i] = pat(e->seed, i);
		e->R[i] = pat(e->seed ^ 0xffff, i);
	}
}

static int touched(const struct ectx *e)
{
	size_t i;

	for (i = 0; i < BUF_BYTES; i++)
		if (e->S[i] != pat(e->seed, i) || e->R[i] != pat(e->seed ^ 0xffff, i))
			return 1;
	return 0;
}

/* A correct int32 SUM allreduce with a known result. */
static int sanity(struct ectx *e, int line)
{
	int32_t s[5], r[5];
	int i, rc, want;

	for (i = 0; i < 5; i++) {
		s[i] = e->rank * 10 + i;
		r[i] = -1;
	}
	rc = shmcoll_allreduce(s, r, 5, SHMCOLL_INT32, SHMCOLL_SUM, e->comm);
	if (rc) {
		efail(e, E_AFTER, line, "correct allreduce after the bad call returned %d (%s): %s",
		      rc, shmcoll_strerror(rc), shmcoll_last_error(e->comm));
		return 1;
	}
	for (i = 0; i < 5; i++) {
		want = 10 * e->size * (e->size - 1) / 2 + e->size * i;
		if (r[i] != want) {
			efail(e, E_AFTER, line,
			      "correct allreduce after the bad call: [%d] = %d want %d", i,
			      (int)r[i], want);
			return 1;
		}
	}
	return 0;
}

static void bad_done(struct ectx *e, int line, const char *call, const char *arg, int rc)
{
	const char *msg = shmcoll_last_error(e->comm);

	if (rc != -EINVAL)
		efail(e, E_NOT_EINVAL, line, "%s returned %d (%s), want -EINVAL", call, rc,
		      rc <= 0 ? shmcoll_strerror(rc) : "positive");
	else if (!msg || !*msg)
		efail(e, E_NO_MSG, line, "%s: shmcoll_last_error is empty", call);
	else if (arg && !strcasestr(msg, arg))
		efail(e, E_MSG_NAME, line, "%s: shmcoll_last_error \"%s\" does not name \"%s\"",
		      call, msg, arg);
	if (touched(e))
		efail(e, E_TOUCHED, line, "%s (returned %d) wrote a buffer", call, rc);
	sanity(e, line);
}

/* Every rank passes the same bad argument: each must get -EINVAL at once. */
#define BAD(e, arg, call)                                                                          \
	do {                                                                                       \
		prep(e);                                                                           \
		bad_done((e), __LINE__, #call, (arg), (call));                                     \
	} while (0)

/* NULL comm: -EINVAL, no buffer touched. */
#define NULLCOMM(e, call)                                                                          \
	do {                                                                                       \
		int rc_;                                                                           \
		prep(e);                                                                           \
		rc_ = (call);                                                                      \
		if (rc_ != -EINVAL)                                                                \
			efail((e), E_NULLCOMM, __LINE__, "%s returned %d, want -EINVAL", #call,    \
			      rc_);                                                                \
		if (touched(e))                                                                    \
			efail((e), E_TOUCHED, __LINE__, "%s wrote a buffer", #call);               \
	} while (0)

/* Accepted: returns 0 (the caller checks the data). */
#define OK(e, call)                                                                                \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_)                                                                           \
			efail((e), E_ACCEPTED, __LINE__, "%s returned %d (%s): %s", #call, rc_,    \
			      shmcoll_strerror(rc_), shmcoll_last_error((e)->comm));               \
	} while (0)

static void null_comm_cases(struct ectx *e)
{
	void *S = e->S, *R = e->R;

	NULLCOMM(e, shmcoll_allreduce(S, R, N, SHMCOLL_INT32, SHMCOLL_SUM, NULL));
	NULLCOMM(e, shmcoll_reduce(S, R, N, SHMCOLL_INT32, SHMCOLL_SUM, 0, NULL));
	NULLCOMM(e, shmcoll_bcast(R, N, SHMCOLL_INT32, 0, NULL));
	NULLCOMM(e, shmcoll_allgather(S, R, N, SHMCOLL_INT32, NULL));
	NULLCOMM(e, shmcoll_reduce_scatter(S, R, N, SHMCOLL_INT32, SHMCOLL_SUM, NULL));
	NULLCOMM(e, shmcoll_gather(S, R, N, SHMCOLL_INT32, 0, NULL));
	NULLCOMM(e, shmcoll_scatter(S, R, N, SHMCOLL_INT32, 0, NULL));
	NULLCOMM(e, shmcoll_alltoall(S, R, N, SHMCOLL_INT32, NULL));
	NULLCOMM(e, shmcoll_barrier(NULL));
	NULLCOMM(e, shmcoll_comm_destroy(NULL));
	NULLCOMM(e, shmcoll_comm_abort(NULL));
	NULLCOMM(e, shmcoll_comm_rank(NULL));
	NULLCOMM(e, shmcoll_comm_size(NULL));
	NULLCOMM(e, shmcoll_free(NULL, S));
	NULLCOMM(e, shmcoll_init(NULL));
	if (shmcoll_malloc(NULL, 64) != NULL)
		efail(e, E_NULLCOMM, __LINE__, "shmcoll_malloc(NULL, 64) did not return NULL");
	if (!shmcoll_last_error(NULL))
		efail(e, E_NULLCOMM, __LINE__, "shmcoll_last_error(NULL) returned NULL");
	sanity(e, __LINE__);
}

static void null_buffer_cases(struct ectx *e)
{
	void *S = e->S, *R = e->R;
	shmcoll_comm *c = e->comm;
	int root_only = e->size == 1; /* root-only buffers: only then do all ranks fail */

	BAD(e, "sendbuf", shmcoll_allreduce(NULL, R, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "recvbuf", shmcoll_allreduce(S, NULL, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "sendbuf", shmcoll_reduce(NULL, R, N, SHMCOLL_INT32, SHMCOLL_SUM, 0, c));
	if (root_only)
		BAD(e, "recvbuf", shmcoll_reduce(S, NULL, N, SHMCOLL_INT32, SHMCOLL_SUM, 0, c));
	BAD(e, "buf", shmcoll_bcast(NULL, N, SHMCOLL_INT32, 0, c));
	BAD(e, "sendbuf", shmcoll_allgather(NULL, R, N, SHMCOLL_INT32, c));
	BAD(e, "recvbuf", shmcoll_allgather(S, NULL, N, SHMCOLL_INT32, c));
	BAD(e, "sendbuf", shmcoll_reduce_scatter(NULL, R, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "recvbuf", shmcoll_reduce_scatter(S, NULL, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "sendbuf", shmcoll_gather(NULL, R, N, SHMCOLL_INT32, 0, c));
	if (root_only) {
		BAD(e, "recvbuf", shmcoll_gather(S, NULL, N, SHMCOLL_INT32, 0, c));
		BAD(e, "sendbuf", shmcoll_scatter(NULL, R, N, SHMCOLL_INT32, 0, c));
	}
	BAD(e, "recvbuf", shmcoll_scatter(S, NULL, N, SHMCOLL_INT32, 0, c));
	BAD(e, "sendbuf", shmcoll_alltoall(NULL, R, N, SHMCOLL_INT32, c));
	BAD(e, "recvbuf", shmcoll_alltoall(S, NULL, N, SHMCOLL_INT32, c));

	/* NULL with count 0 is fine, on every collective. */
	OK(e, shmcoll_allreduce(NULL, NULL, 0, SHMCOLL_INT32, SHMCOLL_SUM, c));
	OK(e, shmcoll_reduce(NULL, NULL, 0, SHMCOLL_INT32, SHMCOLL_SUM, 0, c));
	OK(e, shmcoll_bcast(NULL, 0, SHMCOLL_INT32, 0, c));
	OK(e, shmcoll_allgather(NULL, NULL, 0, SHMCOLL_INT32, c));
	OK(e, shmcoll_reduce_scatter(NULL, NULL, 0, SHMCOLL_INT32, SHMCOLL_SUM, c));
	OK(e, shmcoll_gather(NULL, NULL, 0, SHMCOLL_INT32, 0, c));
	OK(e, shmcoll_scatter(NULL, NULL, 0, SHMCOLL_INT32, 0, c));
	OK(e, shmcoll_alltoall(NULL, NULL, 0, SHMCOLL_INT32, c));
	sanity(e, __LINE__);
}

static void root_cases(struct ectx *e)
{
	void *S = e->S, *R = e->R;
	shmcoll_comm *c = e->comm;
	int roots[2] = {-1, e->size}, i;

	for (i = 0; i < 2; i++) {
		snprintf(e->note, sizeof(e->note), "(root %d)", roots[i]);
		BAD(e, "root", shmcoll_reduce(S, R, N, SHMCOLL_INT32, SHMCOLL_SUM, roots[i], c));
		BAD(e, "root", shmcoll_bcast(R, N, SHMCOLL_INT32, roots[i], c));
		BAD(e, "root", shmcoll_gather(S, R, N, SHMCOLL_INT32, roots[i], c));
		BAD(e, "root", shmcoll_scatter(S, R, N, SHMCOLL_INT32, roots[i], c));
	}
	e->note[0] = '\0';
	BAD(e, "root", shmcoll_bcast(R, N, SHMCOLL_INT32, INT_MAX, c));
	BAD(e, "root", shmcoll_reduce(S, R, N, SHMCOLL_INT32, SHMCOLL_SUM, INT_MIN, c));
}

static void dtype_op_cases(struct ectx *e)
{
	void *S = e->S, *R = e->R;
	shmcoll_comm *c = e->comm;
	shmcoll_dtype bad_dt[2] = {SHMCOLL_DTYPE_COUNT, (shmcoll_dtype)-1};
	shmcoll_op bad_op[2] = {SHMCOLL_OP_COUNT, (shmcoll_op)-1};
	shmcoll_dtype dt;
	shmcoll_op op;
	int i;

	for (i = 0; i < 2; i++) {
		dt = bad_dt[i];
		snprintf(e->note, sizeof(e->note), "(dtype %d)", (int)dt);
		BAD(e, "dtype", shmcoll_allreduce(S, R, N, dt, SHMCOLL_SUM, c));
		BAD(e, "dtype", shmcoll_reduce(S, R, N, dt, SHMCOLL_SUM, 0, c));
		BAD(e, "dtype", shmcoll_bcast(R, N, dt, 0, c));
		BAD(e, "dtype", shmcoll_allgather(S, R, N, dt, c));
		BAD(e, "dtype", shmcoll_reduce_scatter(S, R, N, dt, SHMCOLL_SUM, c));
		BAD(e, "dtype", shmcoll_gather(S, R, N, dt, 0, c));
		BAD(e, "dtype", shmcoll_scatter(S, R, N, dt, 0, c));
		BAD(e, "dtype", shmcoll_alltoall(S, R, N, dt, c));
	}
	for (i = 0; i < 2; i++) {
		op = bad_op[i];
		snprintf(e->note, sizeof(e->note), "(op %d)", (int)op);
		BAD(e, "op", shmcoll_allreduce(S, R, N, SHMCOLL_INT32, op, c));
		BAD(e, "op", shmcoll_reduce(S, R, N, SHMCOLL_INT32, op, 0, c));
		BAD(e, "op", shmcoll_reduce_scatter(S, R, N, SHMCOLL_INT32, op, c));
	}
	for (dt = SHMCOLL_FLOAT16; dt <= SHMCOLL_FLOAT64; dt++) {
		for (op = SHMCOLL_BAND; op <= SHMCOLL_BXOR; op++) {
			snprintf(e->note, sizeof(e->note), "(dtype %s op %s)", th_dtype_name(dt),
			         th_op_name(op));
			BAD(e, "op", shmcoll_allreduce(S, R, N, dt, op, c));
			BAD(e, "op", shmcoll_reduce(S, R, N, dt, op, 0, c));
			BAD(e, "op", shmcoll_reduce_scatter(S, R, N, dt, op, c));
		}
	}
	e->note[0] = '\0';
}

static void overflow_cases(struct ectx *e)
{
	void *S = e->S, *R = e->R;
	shmcoll_comm *c = e->comm;
	size_t big = SIZE_MAX / 2, big64 = SIZE_MAX / 8 + 1;
	/* count * 4 fits, size * count * 4 does not (size >= 2). */
	size_t pbig = SIZE_MAX / (4 * (size_t)e->size) + 1;

	BAD(e, "count", shmcoll_allreduce(S, R, big, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "count", shmcoll_allreduce(S, R, big64, SHMCOLL_INT64, SHMCOLL_SUM, c));
	BAD(e, "count", shmcoll_reduce(S, R, big, SHMCOLL_INT32, SHMCOLL_SUM, 0, c));
	BAD(e, "count", shmcoll_bcast(R, big, SHMCOLL_INT32, 0, c));
	BAD(e, "count", shmcoll_allgather(S, R, big, SHMCOLL_INT32, c));
	BAD(e, "count", shmcoll_reduce_scatter(S, R, big, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "count", shmcoll_gather(S, R, big, SHMCOLL_INT32, 0, c));
	BAD(e, "count", shmcoll_scatter(S, R, big, SHMCOLL_INT32, 0, c));
	BAD(e, "count", shmcoll_alltoall(S, R, big, SHMCOLL_INT32, c));
	if (e->size >= 2) {
		/* Only the size * count products overflow. Gather and scatter
		 * have them on the root only, so all ranks fail only for these. */
		BAD(e, "count", shmcoll_allgather(S, R, pbig, SHMCOLL_INT32, c));
		BAD(e, "count", shmcoll_alltoall(S, R, pbig, SHMCOLL_INT32, c));
		BAD(e, "count", shmcoll_reduce_scatter(S, R, pbig, SHMCOLL_INT32, SHMCOLL_SUM, c));
	}
}

/* Partial overlap is -EINVAL; the exact in-place forms and buffers that
 * merely touch are accepted and give the right answer. X is R. */
static void overlap_cases(struct ectx *e)
{
	unsigned char *X = e->R;
	shmcoll_comm *c = e->comm;
	size_t es = 4, me = (size_t)e->rank, P = (size_t)e->size;
	int32_t *v = (int32_t *)(void *)X;
	int root_only = e->size == 1;
	size_t i, j;
	int32_t want;

	BAD(e, "overlap", shmcoll_allreduce(X, X + es, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "overlap", shmcoll_allreduce(X + es, X, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "overlap", shmcoll_allreduce(X, X + (N - 1) * es, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "overlap", shmcoll_allgather(X + (me * N + 1) * es, X, N, SHMCOLL_INT32, c));
	BAD(e, "overlap", shmcoll_allgather(X + (P * N - 1) * es, X, N, SHMCOLL_INT32, c));
	BAD(e, "overlap",
	    shmcoll_reduce_scatter(X, X + (me * N + 1) * es, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	BAD(e, "overlap", shmcoll_alltoall(X, X + es, N, SHMCOLL_INT32, c));
	BAD(e, "overlap", shmcoll_alltoall(X + es, X, N, SHMCOLL_INT32, c));
	if (root_only) {
		BAD(e, "overlap", shmcoll_reduce(X, X + es, N, SHMCOLL_INT32, SHMCOLL_SUM, 0, c));
		BAD(e, "overlap", shmcoll_gather(X + es, X, N, SHMCOLL_INT32, 0, c));
		BAD(e, "overlap", shmcoll_scatter(X, X + es, N, SHMCOLL_INT32, 0, c));
	}

	/* Accepted: in place. */
	for (i = 0; i < N; i++)
		v[i] = (int32_t)(me + i);
	OK(e, shmcoll_allreduce(X, X, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	for (i = 0; i < N; i++) {
		want = (int32_t)(P * (P - 1) / 2 + P * i);
		if (v[i] != want)
			efail(e, E_ACCEPTED, __LINE__, "in-place allreduce [%zu] = %d want %d", i,
			      (int)v[i], (int)want);
	}
	for (i = 0; i < P * N; i++)
		v[i] = i / N == me ? (int32_t)(100 * me + i % N) : -7;
	OK(e, shmcoll_allgather(X + me * N * es, X, N, SHMCOLL_INT32, c));
	for (i = 0; i < P * N; i++) {
		want = (int32_t)(100 * (i / N) + i % N);
		if (v[i] != want)
			efail(e, E_ACCEPTED, __LINE__, "in-place allgather [%zu] = %d want %d", i,
			      (int)v[i], (int)want);
	}
	for (i = 0; i < P * N; i++)
		v[i] = (int32_t)(me * 1000 + i);
	OK(e, shmcoll_reduce_scatter(X, X + me * N * es, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	for (i = 0; i < N; i++) {
		want = (int32_t)(1000 * P * (P - 1) / 2 + P * (me * N + i));
		if (v[me * N + i] != want)
			efail(e, E_ACCEPTED, __LINE__, "in-place reduce_scatter [%zu] = %d want %d",
			      i, (int)v[me * N + i], (int)want);
	}
	for (i = 0; i < P * N; i++)
		v[i] = (int32_t)(me * 1000 + i);
	OK(e, shmcoll_alltoall(X, X, N, SHMCOLL_INT32, c));
	for (j = 0; j < P; j++)
		for (i = 0; i < N; i++) {
			want = (int32_t)(j * 1000 + me * N + i);
			if (v[j * N + i] != want)
				efail(e, E_ACCEPTED, __LINE__,
				      "in-place alltoall [%zu] = %d want %d", j * N + i,
				      (int)v[j * N + i], (int)want);
		}
	for (i = 0; i < N; i++)
		v[i] = (int32_t)(me + i);
	OK(e, shmcoll_reduce(X, X, N, SHMCOLL_INT32, SHMCOLL_SUM, 0, c));
	for (i = 0; i < N; i++) {
		want = me == 0 ? (int32_t)(P * (P - 1) / 2 + P * i) : (int32_t)(me + i);
		if (v[i] != want)
			efail(e, E_ACCEPTED, __LINE__, "in-place reduce [%zu] = %d want %d", i,
			      (int)v[i], (int)want);
	}

	/* Accepted: recvbuf right after sendbuf (they touch, no overlap). */
	for (i = 0; i < 2 * N; i++)
		v[i] = i < N ? (int32_t)(me + i) : -7;
	OK(e, shmcoll_allreduce(X, X + N * es, N, SHMCOLL_INT32, SHMCOLL_SUM, c));
	for (i = 0; i < N; i++) {
		want = (int32_t)(P * (P - 1) / 2 + P * i);
		if (v[N + i] != want || v[i] != (int32_t)(me + i))
			efail(e, E_ACCEPTED, __LINE__,
			      "adjacent allreduce [%zu]: send %d recv %d want %d", i, (int)v[i],
			      (int)v[N + i], (int)want);
	}
	for (i = 0; i < (P + 1) * N; i++)
		v[i] = i < N ? (int32_t)(100 * me + i) : -7;
	OK(e, shmcoll_allgather(X, X + N * es, N, SHMCOLL_INT32, c));
	for (i = 0; i < P * N; i++) {
		want = (int32_t)(100 * (i / N) + i % N);
		if (v[N + i] != want)
			efail(e, E_ACCEPTED, __LINE__, "adjacent allgather [%zu] = %d want %d", i,
			      (int)v[N + i], (int)want);
	}
	sanity(e, __LINE__);
}

static void create_cases(struct ectx *e)
{
	char job[64];
	shmcoll_config good, cfg;
	shmcoll_comm *out = NULL;
	const char *msg;
	int rc, i;
	struct {
		const char *what;
		int rank, size;
		const char *job;
		const char *arg;
	} bad[] = {
	    {"size 0", 0, 0, job, "size"},      {"size -1", 0, -1, job, "size"},
	    {"rank -1", -1, 2, job, "rank"},    {"rank == size", 2, 2, job, "rank"},
	    {"rank > size", 5, 2, job, "rank"}, {"NULL job", 0, 1, NULL, "job"},
	    {"empty job", 0, 1, "", "job"},
	};

	th_job_name(job, sizeof(job));
	good = (shmcoll_config){.rank = 0, .size = 1, .job = job, .timeout_ms = TIMEOUT_MS};
	for (i = 0; i < (int)(sizeof(bad) / sizeof(bad[0])); i++) {
		cfg = good;
		cfg.rank = bad[i].rank;
		cfg.size = bad[i].size;
		cfg.job = bad[i].job;
		out = NULL;
		rc = shmcoll_comm_create(&cfg, &out);
		msg = shmcoll_last_error(NULL);
		if (rc != -EINVAL) {
			efail(e, E_CREATE, __LINE__,
			      "shmcoll_comm_create(%s) returned %d, want -EINVAL", bad[i].what, rc);
			if (!rc && out)
				shmcoll_comm_destroy(out);
		} else if (!msg || !*msg) {
			efail(e, E_CREATE, __LINE__,
			      "shmcoll_comm_create(%s): shmcoll_last_error(NULL) is empty",
			      bad[i].what);
		} else if (!strcasestr(msg, bad[i].arg)) {
			efail(e, E_CREATE, __LINE__,
			      "shmcoll_comm_create(%s): message \"%s\" does not name \"%s\"",
			      bad[i].what, msg, bad[i].arg);
		}
	}
	rc = shmcoll_comm_create(NULL, &out);
	if (rc != -EINVAL)
		efail(e, E_CREATE, __LINE__, "shmcoll_comm_create(NULL cfg) returned %d", rc);
	rc = shmcoll_comm_create(&good, NULL);
	if (rc != -EINVAL)
		efail(e, E_CREATE, __LINE__, "shmcoll_comm_create(out NULL) returned %d", rc);

	/* The good config (a private job of size 1) works after all that. */
	out = NULL;
	rc = shmcoll_comm_create(&good, &out);
	if (rc || !out) {
		efail(e, E_CREATE, __LINE__, "shmcoll_comm_create(good, size 1) returned %d: %s",
		      rc, shmcoll_last_error(NULL));
	} else {
		rc = shmcoll_comm_destroy(out);
		if (rc)
			efail(e, E_CREATE, __LINE__, "shmcoll_comm_destroy(size 1) returned %d",
			      rc);
	}
}

static void heap_cases(struct ectx *e)
{
	shmcoll_comm *c = e->comm;
	unsigned char *p;
	void *q;
	int local, rc;
	const char *msg;

	q = shmcoll_malloc(c, 0);
	msg = shmcoll_last_error(c);
	if (q) {
		efail(e, E_HEAP, __LINE__, "shmcoll_malloc(comm, 0) returned %p, want NULL", q);
		shmcoll_free(c, q);
	} else if (!msg || !*msg) {
		efail(e, E_HEAP, __LINE__, "shmcoll_malloc(comm, 0): shmcoll_last_error is empty");
	}
	sanity(e, __LINE__);
	q = shmcoll_malloc(c, SIZE_MAX);
	if (q) {
		efail(e, E_HEAP, __LINE__, "shmcoll_malloc(comm, SIZE_MAX) returned %p", q);
		shmcoll_free(c, q);
	}
	sanity(e, __LINE__);

	p = shmcoll_malloc(c, 64);
	if (!p) {
		efail(e, E_HEAP, __LINE__, "shmcoll_malloc(comm, 64) failed: %s",
		      shmcoll_last_error(c));
		return;
	}
	BAD(e, NULL, shmcoll_free(c, &local));
	BAD(e, NULL, shmcoll_free(c, e->S));
	BAD(e, NULL, shmcoll_free(c, p + 8));
	rc = shmcoll_free(c, p);
	if (rc)
		efail(e, E_HEAP, __LINE__, "shmcoll_free(comm, p) returned %d: %s", rc,
		      shmcoll_last_error(c));
	else
		BAD(e, NULL, shmcoll_free(c, p)); /* twice */
	sanity(e, __LINE__);
}

static void strerror_cases(struct ectx *e)
{
	static const int codes[] = {0,          -EINVAL,     -ENOMEM, -ENOSPC,
	                            -ETIMEDOUT, -EOWNERDEAD, -EPROTO, -ECANCELED};
	const int n = (int)(sizeof(codes) / sizeof(codes[0]));
	const char *s[sizeof(codes) / sizeof(codes[0])];
	static const int unknown[] = {-9999, 9999, INT_MIN, INT_MAX, 1};
	int i, j;

	for (i = 0; i < n; i++) {
		s[i] = shmcoll_strerror(codes[i]);
		if (!s[i] || !*s[i])
			efail(e, E_STRERROR, __LINE__, "shmcoll_strerror(%d) is %s", codes[i],
			      s[i] ? "empty" : "NULL");
	}
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (s[i] && s[j] && !strcmp(s[i], s[j]))
				efail(e, E_STRERROR, __LINE__,
				      "shmcoll_strerror(%d) == shmcoll_strerror(%d) == \"%s\"",
				      codes[i], codes[j], s[i]);
	for (i = 0; i < (int)(sizeof(unknown) / sizeof(unknown[0])); i++)
		if (!shmcoll_strerror(unknown[i]))
			efail(e, E_STRERROR, __LINE__, "shmcoll_strerror(%d) is NULL", unknown[i]);
}

static int errors_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct ectx e = {.comm = comm, .rank = rank, .size = shmcoll_comm_size(comm)};

	(void)arg;
	e.S = malloc(BUF_BYTES);
	e.R = malloc(BUF_BYTES);
	if (!e.S || !e.R) {
		free(e.S);
		free(e.R);
		return TH_E_NOMEM;
	}
	e.seed = th_mix((uint64_t)rank + 1);
	strerror_cases(&e);
	create_cases(&e);
	null_comm_cases(&e);
	null_buffer_cases(&e);
	root_cases(&e);
	dtype_op_cases(&e);
	overflow_cases(&e);
	overlap_cases(&e);
	heap_cases(&e);
	free(e.S);
	free(e.R);
	return e.first;
}

Test(errors, p1_in_process, .timeout = 120)
{
	char job[64];
	shmcoll_config cfg = {.rank = 0, .size = 1, .job = job, .timeout_ms = TIMEOUT_MS};
	shmcoll_comm *comm = NULL;
	int rc;

	th_job_name(job, sizeof(job));
	rc = shmcoll_comm_create(&cfg, &comm);
	cr_assert(rc == 0, "shmcoll_comm_create(size 1): %d (%s): %s", rc, shmcoll_strerror(rc),
	          shmcoll_last_error(NULL));
	rc = errors_body(comm, 0, NULL);
	cr_expect(rc == 0, "P=1 in process: check %d failed (see stderr)", rc);
	rc = shmcoll_comm_destroy(comm);
	cr_assert(rc == 0, "shmcoll_comm_destroy: %d", rc);
}

Test(errors, p2_processes, .timeout = 120)
{
	th_opts o = {.timeout_ms = TIMEOUT_MS, .wall_ms = 100000};
	th_result res;

	th_run_ranks(2, errors_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

Test(errors, p2_threads, .timeout = 120)
{
	th_opts o = {.timeout_ms = TIMEOUT_MS, .wall_ms = 100000};
	th_result res;

	th_run_threads(2, errors_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}

Test(errors, p3_processes, .timeout = 120)
{
	th_opts o = {.timeout_ms = TIMEOUT_MS, .wall_ms = 100000};
	th_result res;

	th_run_ranks(3, errors_body, NULL, &o, &res);
	cr_assert(res.ok, "%s", res.summary);
}
