/* test_nbc.c - the public non-blocking collectives (shmcoll_iallreduce ... shmcoll_ibarrier)
 * and their requests (shmcoll_wait, _test, _waitall, _testall, _waitany), with ranks as
 * processes and as threads:
 *  - each of the nine gives what its blocking form gives, byte for byte (both checked against
 *    values every rank derives on its own, and every byte around the buffers), for counts of
 *    1, a few hundred and more than the arena's staging holds, four (dtype, op) pairs, every
 *    root at P = 3, the in-place forms and NULL root-only buffers;
 *  - NOUT calls of every kind outstanding at once, completed by waitall, by wait in reverse
 *    order, by polling test, by testall, by waitany, each rank its own way, and across two
 *    communicators; send buffers (some symmetric) overwritten as soon as their request
 *    completes;
 *  - blocking calls made behind outstanding ones run after them;
 *  - count 0, NULL requests, statuses; argument errors; destroy with requests outstanding;
 *    overlapping computation with polling; abort with requests outstanding everywhere;
 *  - a subset again with SHMCOLL_PROGRESS_THREAD=1, and a rank that makes no call while its
 *    progress thread moves its part of large calls.
 * Children never call cr_*: a body returns 0 or a code (1..199) and prints what failed. */
#include <criterion/criterion.h>

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/harness.h"

#define ARENA      (1u << 20) /* staging halves of 29-128 KiB per rank at P = 8..1 */
#define TIMEOUT_MS 30000
#define GUARD      32 /* checked bytes on each side of every buffer */
#define NOUT       80 /* requests outstanding at once */
#define POOL_BYTES (16u * 1024)
#define NONE       SIZE_MAX

/* Codes a body returns (the messages on stderr say more). */
#define E_NOMEM    1
#define E_BLK_CALL 10 /* the blocking form failed */
#define E_BLK_OUT  11 /* the blocking form's buffers are wrong */
#define E_START    20 /* a start failed, or gave no request */
#define E_DONE     21 /* a completion returned an error */
#define E_NB_OUT   22 /* the non-blocking form's buffers are wrong */
#define E_REQ      23 /* a completed request was not set to NULL */
#define E_STATUS   24 /* a status's error field is wrong */
#define E_ORDER    25 /* a request not complete after a later blocking call returned */
#define E_INDEX    26 /* waitany gave a bad index */
#define E_BARRIER  27 /* a rank left an ibarrier before a peer entered it */
#define E_LOCAL    30 /* a local call (wait/test/... on NULL, count 0) misbehaved */
#define E_ARGS     40 /* an argument error was not -EINVAL with *req == NULL */
#define E_BUSY     50 /* destroy with requests outstanding */
#define E_ABORT    60 /* abort: a request or a later call did not fail as it should */
#define E_OVERLAP  70 /* the overlap test's results */
#define E_SYM      80 /* shmcoll_malloc / shmcoll_free */

static const th_opts opts = {.arena_bytes = ARENA, .timeout_ms = TIMEOUT_MS, .wall_ms = 240000};

/* (dtype, op) pairs whose results are exact, so they have one right answer. */
static const struct {
	shmcoll_dtype dt;
	shmcoll_op op;
} pairs[] = {
    {SHMCOLL_INT32, SHMCOLL_SUM},
    {SHMCOLL_FLOAT64, SHMCOLL_MAX},
    {SHMCOLL_UINT8, SHMCOLL_BXOR},
    {SHMCOLL_FLOAT16, SHMCOLL_SUM},
};
#define NPAIRS (sizeof(pairs) / sizeof(pairs[0]))

/* Elements in a call larger than any rank's staging (two halves of at most 128 KiB): at least
 * 300 KB, and 100003 elements for the wider types. Per-peer collectives split it over the
 * ranks, which still leaves each block more than a staging half at every P. */
static size_t big_count(th_coll kind, shmcoll_dtype dt, int P)
{
	size_t es = th_dtype_size(dt), n = es >= 4 ? 100003 : 300000 / es + 7;

	if (kind != TH_ALLREDUCE && kind != TH_REDUCE && kind != TH_BCAST)
		n = n / (size_t)P + 1;
	return n;
}

/* ---- one checked call ---- */

/* Memory of shmcoll_malloc, handed out from the bottom; whatever does not fit is malloc'd. */
struct pool {
	unsigned char *base;
	size_t size, used;
};

struct call {
	/* The call: the same on every rank. */
	th_coll kind;
	shmcoll_dtype dt;
	shmcoll_op op;
	size_t n; /* the count argument */
	int root;
	int inplace; /* the in-place form (bcast has only the one) */
	int nullbuf; /* out of place: NULL for the root-only buffer on non-roots */
	uint64_t salt;
	/* This rank's buffers: areas of GUARD + bytes + GUARD. */
	size_t es, abytes, bbytes;
	unsigned char *a, *b;   /* a: send (in place: the one buffer; bcast: buf); b: recv */
	unsigned char *a0, *b0; /* the whole areas before the call */
	unsigned char *wa, *wb; /* the data bytes each must hold after it */
	int a_pooled;
	const void *sp; /* the arguments */
	void *rp;
};

static int failf(int code, const struct call *c, int me, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int failf(int code, const struct call *c, int me, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c)
		fprintf(stderr,
		        "FAIL rank %d: %s dtype=%s op=%s count=%zu root=%d %s%s salt=%llu: %s\n",
		        me, th_coll_name(c->kind), th_dtype_name(c->dt), th_op_name(c->op), c->n,
		        c->root, c->inplace ? "in-place" : "out-of-place",
		        c->nullbuf ? " null-root-only-buffers" : "", (unsigned long long)c->salt,
		        msg);
	else
		fprintf(stderr, "FAIL rank %d: %s\n", me, msg);
	return code;
}

static void note(const struct call *c, const char *what)
{
	th_breadcrumb("%s %s dtype=%s count=%zu root=%d %s", what, th_coll_name(c->kind),
	              th_dtype_name(c->dt), c->n, c->root, c->inplace ? "in-place" : "out");
}

static double float_in(uint64_t h)
{
	return ((int)(h % 128) - 64) / 4.0; /* quarters in [-16, 16): sums over 8 ranks exact */
}

static uint64_t int_in(shmcoll_dtype dt, uint64_t h)
{
	switch (dt) {
	case SHMCOLL_INT8:
		return (uint64_t)(int64_t)(int8_t)(uint8_t)h;
	case SHMCOLL_INT32:
		return (uint64_t)(int64_t)(int32_t)(uint32_t)h;
	default:
		return h;
	}
}

static void store_float(shmcoll_dtype dt, double v, unsigned char *dst)
{
	uint16_t h;
	float f = (float)v;

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
		memcpy(dst, &v, 8);
		break;
	}
}

/* Element idx of rank r's send data. Moved data is raw hash bits (any pattern must travel
 * unchanged); reduced data is a value of the type whose result is exact. */
static void gen(const struct call *c, int r, size_t idx, unsigned char *dst)
{
	uint64_t h = th_hash(c->salt, r, idx), v;

	if (th_coll_reduces(c->kind) && th_dtype_is_float(c->dt)) {
		store_float(c->dt, float_in(h), dst);
		return;
	}
	v = th_coll_reduces(c->kind) ? int_in(c->dt, h) : h;
	memcpy(dst, &v, c->es); /* the low bytes (little-endian hosts) */
}

/* Element idx of op over every rank's send data, from the definition. Supported: SUM, MIN,
 * MAX on every type, BAND, BOR, BXOR on integers. */
static void fold(const struct call *c, int P, size_t idx, unsigned char *dst)
{
	int r, sgn = th_dtype_is_signed(c->dt);

	if (th_dtype_is_float(c->dt)) {
		double acc = float_in(th_hash(c->salt, 0, idx)), v;

		for (r = 1; r < P; r++) {
			v = float_in(th_hash(c->salt, r, idx));
			if (c->op == SHMCOLL_SUM)
				acc += v;
			else if (c->op == SHMCOLL_MIN)
				acc = v < acc ? v : acc;
			else
				acc = v > acc ? v : acc;
		}
		store_float(c->dt, acc, dst);
		return;
	}
	uint64_t acc = int_in(c->dt, th_hash(c->salt, 0, idx)), v;

	for (r = 1; r < P; r++) {
		v = int_in(c->dt, th_hash(c->salt, r, idx));
		switch (c->op) {
		case SHMCOLL_SUM:
			acc += v;
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
	memcpy(dst, &acc, c->es);
}

/* This rank's send data: cnt elements (of the root's for bcast and scatter). */
static void make_input(const struct call *c, int me, size_t cnt, unsigned char *dst)
{
	int src = c->kind == TH_BCAST || c->kind == TH_SCATTER ? c->root : me;
	size_t i;

	for (i = 0; i < cnt; i++)
		gen(c, src, i, dst + i * c->es);
}

/* What this rank receives: cnt elements (its shape's recvn). */
static void make_output(const struct call *c, int me, int P, size_t cnt, unsigned char *dst)
{
	size_t n = c->n, es = c->es, i;

	for (i = 0; i < cnt; i++) {
		unsigned char *d = dst + i * es;
		int r = n ? (int)(i / n) : 0;

		switch (c->kind) {
		case TH_ALLREDUCE:
		case TH_REDUCE:
			fold(c, P, i, d);
			break;
		case TH_REDUCE_SCATTER:
			fold(c, P, (size_t)me * n + i, d);
			break;
		case TH_BCAST:
			gen(c, c->root, i, d);
			break;
		case TH_SCATTER:
			gen(c, c->root, (size_t)me * n + i, d);
			break;
		case TH_ALLGATHER:
		case TH_GATHER:
			gen(c, r, i % n, d);
			break;
		default: /* alltoall: block me of rank r's send data */
			gen(c, r, (size_t)me * n + i % n, d);
			break;
		}
	}
}

static unsigned char guard_byte(size_t i)
{
	return (unsigned char)(0xa5 + i * 7);
}

static unsigned char canary_byte(uint64_t salt, size_t i)
{
	return (unsigned char)(0x5a ^ (i * 13) ^ salt);
}

/* An area of GUARD + bytes + GUARD: guards and canaries, input at element in_off, and the
 * wanted data (*want) with the output at element out_off (NONE: none). */
static unsigned char *area_new(struct call *c, int me, int P, struct pool *pool, size_t elems,
                               size_t in_off, size_t in_n, size_t out_off, size_t out_n,
                               unsigned char **snap, unsigned char **want, int *pooled)
{
	size_t bytes = elems * c->es, tot = bytes + 2 * GUARD, i;
	unsigned char *p = NULL;

	*pooled = 0;
	if (pool && pool->base && pool->used + tot <= pool->size) {
		p = pool->base + pool->used;
		pool->used += (tot + 127) & ~(size_t)127;
		*pooled = 1;
	} else {
		p = malloc(tot);
	}
	*snap = malloc(tot);
	*want = malloc(bytes + 1);
	if (!p || !*snap || !*want)
		return p;
	for (i = 0; i < GUARD; i++) {
		p[i] = guard_byte(i);
		p[GUARD + bytes + i] = guard_byte(i + 1000);
	}
	for (i = 0; i < bytes; i++)
		p[GUARD + i] = canary_byte(c->salt, i);
	if (in_off != NONE)
		make_input(c, me, in_n, p + GUARD + in_off * c->es);
	memcpy(*want, p + GUARD, bytes);
	if (out_off != NONE)
		make_output(c, me, P, out_n, *want + out_off * c->es);
	memcpy(*snap, p, tot);
	return p;
}

static void call_free(struct call *c)
{
	if (!c->a_pooled)
		free(c->a);
	free(c->b);
	free(c->a0);
	free(c->b0);
	free(c->wa);
	free(c->wb);
	c->a = c->b = c->a0 = c->b0 = c->wa = c->wb = NULL;
}

/* Buffers and wanted results of this rank for c (its kind .. salt set). Symmetric memory from
 * pool for the first area where it fits (pool may be NULL). 0 or E_NOMEM. */
static int call_setup(struct call *c, int me, int P, struct pool *pool)
{
	size_t n = c->n, pn = (size_t)P * n, in_n, an = 0, ain = NONE, aout = NONE;
	size_t soff = 0, roff = 0, bn = 0, bout = NONE;
	int is_root = !th_coll_rooted(c->kind) || me == c->root, b_pooled, s_null = 0, r_null = 0;
	th_shape sh;

	c->es = th_dtype_size(c->dt);
	c->a = c->b = c->a0 = c->b0 = c->wa = c->wb = NULL;
	c->sp = c->rp = NULL;
	c->abytes = c->bbytes = 0;
	c->a_pooled = 0;
	if (c->kind == TH_BARRIER)
		return 0;
	th_shape_of(c->kind, n, me, P, c->root, &sh);
	in_n = c->kind == TH_BCAST ? n : sh.sendn;
	if (c->kind == TH_BCAST) {
		an = n;
		ain = sh.has_input ? 0 : NONE;
		aout = 0;
	} else if (!c->inplace) {
		an = sh.sendn;
		ain = sh.has_input ? 0 : NONE;
		bn = sh.recvn;
		bout = sh.has_output ? 0 : NONE;
		s_null = c->nullbuf && !is_root && c->kind == TH_SCATTER;
		r_null = c->nullbuf && !is_root && (c->kind == TH_REDUCE || c->kind == TH_GATHER);
		if (r_null)
			bn = 0;
		if (s_null)
			an = 0;
	} else {
		switch (c->kind) {
		case TH_ALLGATHER:
			an = pn;
			ain = soff = (size_t)me * n;
			aout = 0;
			break;
		case TH_REDUCE_SCATTER:
			an = pn;
			ain = 0;
			aout = roff = (size_t)me * n;
			break;
		case TH_GATHER:
			an = is_root ? pn : n;
			ain = soff = is_root ? (size_t)c->root * n : 0;
			aout = is_root ? 0 : NONE;
			r_null = !is_root;
			break;
		case TH_SCATTER:
			an = is_root ? pn : n;
			ain = is_root ? 0 : NONE;
			aout = roff = is_root ? (size_t)c->root * n : 0;
			s_null = !is_root;
			break;
		default: /* allreduce, reduce, alltoall */
			an = sh.sendn;
			ain = 0;
			aout = sh.has_output ? 0 : NONE;
			break;
		}
	}
	if (an) {
		c->abytes = an * c->es;
		c->a = area_new(c, me, P, pool, an, ain, in_n, aout, sh.recvn, &c->a0, &c->wa,
		                &c->a_pooled);
		if (!c->a || !c->a0 || !c->wa)
			return E_NOMEM;
	}
	if (bn) {
		c->bbytes = bn * c->es;
		c->b = area_new(c, me, P, NULL, bn, NONE, 0, bout, sh.recvn, &c->b0, &c->wb,
		                &b_pooled);
		if (!c->b || !c->b0 || !c->wb)
			return E_NOMEM;
	}
	if (c->kind == TH_BCAST) {
		c->rp = c->a + GUARD;
	} else if (!c->inplace) {
		c->sp = s_null ? NULL : c->a + GUARD;
		c->rp = r_null ? NULL : c->b + GUARD;
	} else {
		c->sp = s_null ? NULL : c->a + GUARD + soff * c->es;
		c->rp = r_null ? NULL : c->a + GUARD + roff * c->es;
	}
	return 0;
}

/* Back to the state before the call. */
static void call_restore(struct call *c)
{
	if (c->a)
		memcpy(c->a, c->a0, c->abytes + 2 * GUARD);
	if (c->b)
		memcpy(c->b, c->b0, c->bbytes + 2 * GUARD);
}

static int area_check(const struct call *c, int me, const char *what, const char *name,
                      const unsigned char *p, const unsigned char *want, size_t bytes, int code)
{
	size_t i, bad = 0, first = NONE;
	char g[64], w[64];

	for (i = 0; i < GUARD; i++)
		if (p[i] != guard_byte(i) || p[GUARD + bytes + i] != guard_byte(i + 1000))
			return failf(code, c, me, "%s: a byte around %s was written", what, name);
	if (!memcmp(p + GUARD, want, bytes))
		return 0;
	for (i = 0; i < bytes / c->es; i++)
		if (memcmp(p + GUARD + i * c->es, want + i * c->es, c->es)) {
			bad++;
			first = first == NONE ? i : first;
		}
	th_format_elem(c->dt, p + GUARD + first * c->es, g, sizeof(g));
	th_format_elem(c->dt, want + first * c->es, w, sizeof(w));
	return failf(code, c, me, "%s: %s element %zu is %s, want %s (%zu of %zu wrong)", what,
	             name, first, g, w, bad, bytes / c->es);
}

static int call_check(const struct call *c, int me, const char *what, int code)
{
	int rc = 0;

	if (c->a)
		rc = area_check(c, me, what, c->b || c->kind == TH_BCAST ? "sendbuf" : "the buffer",
		                c->a, c->wa, c->abytes, code);
	if (!rc && c->b)
		rc = area_check(c, me, what, "recvbuf", c->b, c->wb, c->bbytes, code);
	return rc;
}

static int call_blocking(const struct call *c, shmcoll_comm *comm)
{
	switch (c->kind) {
	case TH_ALLREDUCE:
		return shmcoll_allreduce(c->sp, c->rp, c->n, c->dt, c->op, comm);
	case TH_REDUCE:
		return shmcoll_reduce(c->sp, c->rp, c->n, c->dt, c->op, c->root, comm);
	case TH_BCAST:
		return shmcoll_bcast(c->rp, c->n, c->dt, c->root, comm);
	case TH_ALLGATHER:
		return shmcoll_allgather(c->sp, c->rp, c->n, c->dt, comm);
	case TH_REDUCE_SCATTER:
		return shmcoll_reduce_scatter(c->sp, c->rp, c->n, c->dt, c->op, comm);
	case TH_GATHER:
		return shmcoll_gather(c->sp, c->rp, c->n, c->dt, c->root, comm);
	case TH_SCATTER:
		return shmcoll_scatter(c->sp, c->rp, c->n, c->dt, c->root, comm);
	case TH_ALLTOALL:
		return shmcoll_alltoall(c->sp, c->rp, c->n, c->dt, comm);
	default:
		return shmcoll_barrier(comm);
	}
}

static int call_start(const struct call *c, shmcoll_comm *comm, shmcoll_request **req)
{
	switch (c->kind) {
	case TH_ALLREDUCE:
		return shmcoll_iallreduce(c->sp, c->rp, c->n, c->dt, c->op, comm, req);
	case TH_REDUCE:
		return shmcoll_ireduce(c->sp, c->rp, c->n, c->dt, c->op, c->root, comm, req);
	case TH_BCAST:
		return shmcoll_ibcast(c->rp, c->n, c->dt, c->root, comm, req);
	case TH_ALLGATHER:
		return shmcoll_iallgather(c->sp, c->rp, c->n, c->dt, comm, req);
	case TH_REDUCE_SCATTER:
		return shmcoll_ireduce_scatter(c->sp, c->rp, c->n, c->dt, c->op, comm, req);
	case TH_GATHER:
		return shmcoll_igather(c->sp, c->rp, c->n, c->dt, c->root, comm, req);
	case TH_SCATTER:
		return shmcoll_iscatter(c->sp, c->rp, c->n, c->dt, c->root, comm, req);
	case TH_ALLTOALL:
		return shmcoll_ialltoall(c->sp, c->rp, c->n, c->dt, comm, req);
	default:
		return shmcoll_ibarrier(comm, req);
	}
}

/* Starts c: 0, or a failure printed. */
static int start_checked(const struct call *c, shmcoll_comm *comm, int me, shmcoll_request **req)
{
	int rc;

	*req = NULL;
	rc = call_start(c, comm, req);
	if (rc || !*req)
		return failf(E_START, c, me, "start returned %d (%s), request %p: %s", rc,
		             shmcoll_strerror(rc), (void *)*req, shmcoll_last_error(comm));
	return 0;
}

/* The send data of a completed out-of-place call overwritten at once (its request said the
 * buffer is the caller's again: a peer still reading it would get garbage); what the area
 * must hold is then the garbage. */
static void scribble(struct call *c)
{
	if (!c->a || !c->b || c->inplace || c->kind == TH_BCAST)
		return;
	memset(c->a + GUARD, 0xee, c->abytes);
	memset(c->wa, 0xee, c->abytes);
}

/* Completes one request by method m (0: wait, 1: polling test, 2: waitall of one with a
 * status); its result. */
static int complete_one(shmcoll_request **req, int m, int *bad_req)
{
	shmcoll_status st;
	int rc, done = 0;

	*bad_req = 0;
	switch (m % 3) {
	case 0:
		rc = shmcoll_wait(req, NULL);
		break;
	case 1:
		for (;;) {
			rc = shmcoll_test(req, &done, NULL);
			if (done || rc)
				break;
			sched_yield();
		}
		*bad_req = !done;
		break;
	default:
		st.error = 12345;
		rc = shmcoll_waitall(1, req, &st);
		*bad_req = st.error != rc;
		break;
	}
	*bad_req = *bad_req || *req != NULL;
	return rc;
}

/* ---- 1. every non-blocking collective against its blocking form ---- */

struct match_arg {
	_Atomic int *counters; /* ibarrier rounds: one slot per rank (TH_BARRIER_STRIDE) */
};

/* One case: the blocking form, then (same inputs, same buffers restored) the non-blocking
 * one; each must leave exactly the wanted bytes, so they agree byte for byte. */
static int match_case(shmcoll_comm *comm, int me, int P, struct call *c, int method)
{
	shmcoll_request *req;
	int rc, bad_req;

	rc = call_setup(c, me, P, NULL);
	if (rc) {
		call_free(c);
		return failf(rc, c, me, "out of memory");
	}
	note(c, "blocking");
	rc = call_blocking(c, comm);
	if (rc) {
		call_free(c);
		return failf(E_BLK_CALL, c, me, "blocking form returned %d (%s): %s", rc,
		             shmcoll_strerror(rc), shmcoll_last_error(comm));
	}
	rc = call_check(c, me, "blocking form", E_BLK_OUT);
	call_restore(c);
	note(c, "non-blocking");
	if (!rc)
		rc = start_checked(c, comm, me, &req);
	if (!rc) {
		rc = complete_one(&req, method, &bad_req);
		if (rc)
			rc = failf(E_DONE, c, me, "completion %d returned %d (%s): %s", method, rc,
			           shmcoll_strerror(rc), shmcoll_last_error(comm));
		else if (bad_req)
			rc = failf(E_REQ, c, me, "completion %d left the request or status wrong",
			           method);
	}
	if (!rc)
		rc = call_check(c, me, "non-blocking form", E_NB_OUT);
	call_free(c);
	return rc;
}

/* ibarrier: before round k every rank writes k in its slot; once its ibarrier completes,
 * every slot holds k or k + 1. */
static int ibarrier_rounds(shmcoll_comm *comm, int me, int P, _Atomic int *ctr, int rounds)
{
	shmcoll_request *req;
	int k, j, v, rc, bad_req;

	for (k = 1; k <= rounds; k++) {
		th_breadcrumb("ibarrier round %d", k);
		atomic_store_explicit(&ctr[me * TH_BARRIER_STRIDE], k, memory_order_relaxed);
		rc = shmcoll_ibarrier(comm, &req);
		if (rc || !req)
			return failf(E_START, NULL, me, "ibarrier round %d: start returned %d", k,
			             rc);
		rc = complete_one(&req, k, &bad_req);
		if (rc || bad_req)
			return failf(E_DONE, NULL, me, "ibarrier round %d: completion %d: %d", k,
			             k % 3, rc);
		for (j = 0; j < P; j++) {
			v = atomic_load_explicit(&ctr[j * TH_BARRIER_STRIDE], memory_order_relaxed);
			if (v < k || v > k + 1)
				return failf(E_BARRIER, NULL, me,
				             "after ibarrier %d rank %d's slot holds %d", k, j, v);
		}
	}
	return 0;
}

static int match_body(shmcoll_comm *comm, int me, void *arg)
{
	const struct match_arg *m = arg;
	int P = shmcoll_comm_size(comm), kind, root, nroots, ip, rc, method = 0;
	uint64_t salt = 1;
	size_t pi, ci;

	for (pi = 0; pi < NPAIRS; pi++) {
		for (ci = 0; ci < 3; ci++) {
			for (kind = 0; kind < TH_BARRIER; kind++) {
				nroots = th_coll_rooted(kind) && P == 3 ? P : 1;
				for (root = 0; root < nroots; root++) {
					for (ip = 0; ip < 2; ip++) {
						struct call c = {
						    .kind = kind,
						    .dt = pairs[pi].dt,
						    .op = pairs[pi].op,
						    .n = ci == 0 ? 1
						         : ci == 1
						             ? 333
						             : big_count(kind, pairs[pi].dt, P),
						    .root = nroots > 1 ? root : P - 1,
						    .inplace = ip || kind == TH_BCAST,
						    .nullbuf = (int)(pi & 1),
						    .salt = salt++,
						};

						if (kind == TH_BCAST && ip)
							continue;
						rc = match_case(comm, me, P, &c, method++);
						if (rc)
							return rc;
					}
				}
			}
		}
	}
	return ibarrier_rounds(comm, me, P, m->counters, 12);
}

static _Atomic int *counters_new(void)
{
	size_t bytes = TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert(p != MAP_FAILED, "mmap of the barrier counters failed");
	memset(p, 0, bytes);
	return p;
}

static void counters_free(_Atomic int *p)
{
	munmap((void *)p, TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int));
}

static void run_match(int P, int threads)
{
	struct match_arg m = {.counters = counters_new()};
	th_result res;

	if (threads)
		th_run_threads(P, match_body, &m, &opts, &res);
	else
		th_run_ranks(P, match_body, &m, &opts, &res);
	counters_free(m.counters);
	cr_assert(res.ok, "%s P=%d: %s", threads ? "threads" : "processes", P, res.summary);
}

Test(nbc, matches_blocking_p1, .timeout = 300)
{
	TH_PROCESSES_ONLY();
	run_match(1, 0);
}

Test(nbc, matches_blocking_p2, .timeout = 300)
{
	TH_PROCESSES_ONLY();
	run_match(2, 0);
}

Test(nbc, matches_blocking_p3, .timeout = 300)
{
	TH_PROCESSES_ONLY();
	run_match(3, 0);
}

Test(nbc, matches_blocking_p4, .timeout = 300)
{
	TH_PROCESSES_ONLY();
	run_match(4, 0);
}

Test(nbc, matches_blocking_p8, .timeout = 300)
{
	TH_PROCESSES_ONLY();
	run_match(8, 0);
}

Test(nbc, matches_blocking_threads_p2, .timeout = 300)
{
	run_match(2, 1);
}

Test(nbc, matches_blocking_threads_p4, .timeout = 300)
{
	run_match(4, 1);
}

/* ---- 2. many outstanding, completed every way ---- */

enum how { HOW_WAITALL, HOW_WAIT_REVERSE, HOW_TEST, HOW_TESTALL, HOW_WAITANY };

/* Call k of a mixed sequence: every kind, pair, count, root and form in turn; a few of them
 * larger than the staging. */
static void mix_call(struct call *c, int k, int P, uint64_t base)
{
	static const size_t counts[] = {1, 3, 64, 333, 1200};
	th_coll kind = (th_coll)(k % TH_COLL_COUNT);
	size_t pi = (size_t)(k / TH_COLL_COUNT) % NPAIRS;

	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->dt = pairs[pi].dt;
	c->op = pairs[pi].op;
	c->n = counts[(k / 2) % 5];
	if (k % 23 == 11 || k == 45)
		c->n = big_count(kind, c->dt, P);
	c->root = (k / TH_COLL_COUNT + k) % P;
	c->inplace = (k / 3) % 2 || kind == TH_BCAST;
	c->nullbuf = (k / 6) % 2;
	c->salt = base + (uint64_t)k;
}

/* Sets up calls [0, n) (symmetric send buffers from pool for every third, where they fit). */
static int mix_setup(struct call *calls, int n, int me, int P, uint64_t base, struct pool *pool)
{
	int k, rc;

	for (k = 0; k < n; k++) {
		mix_call(&calls[k], k, P, base);
		rc = call_setup(&calls[k], me, P, k % 3 == 0 ? pool : NULL);
		if (rc)
			return failf(rc, &calls[k], me, "out of memory");
	}
	return 0;
}

static int mix_check(struct call *calls, int n, int me)
{
	int k, rc;

	for (k = 0; k < n; k++) {
		rc = call_check(&calls[k], me, "outstanding call", E_NB_OUT);
		if (rc)
			return rc;
	}
	return 0;
}

static int pool_new(shmcoll_comm *comm, struct pool *pool, int me)
{
	pool->size = POOL_BYTES;
	pool->used = 0;
	pool->base = shmcoll_malloc(comm, POOL_BYTES);
	if (!pool->base)
		return failf(E_SYM, NULL, me, "shmcoll_malloc(%u): %s", POOL_BYTES,
		             shmcoll_last_error(comm));
	return 0;
}

static int pool_free(shmcoll_comm *comm, struct pool *pool, int me)
{
	int rc = shmcoll_free(comm, pool->base);

	pool->base = NULL;
	if (rc)
		return failf(E_SYM, NULL, me, "shmcoll_free: %d (%s)", rc, shmcoll_strerror(rc));
	return 0;
}

/* Completes reqs[0, n) the way how says; every result must be 0 and every entry NULL after.
 * Each send buffer is overwritten once its request has completed. */
static int complete_all(struct call *calls, shmcoll_request **reqs, int n, enum how how, int me)
{
	shmcoll_status st[NOUT];
	shmcoll_request *before[NOUT];
	char seen[NOUT] = {0};
	int k, rc, done, left, got = 0;
	size_t idx;

	for (k = 0; k < n; k++)
		st[k].error = 12345;
	switch (how) {
	case HOW_WAITALL:
		rc = shmcoll_waitall((size_t)n, reqs, st);
		if (rc)
			return failf(E_DONE, NULL, me, "waitall returned %d (%s)", rc,
			             shmcoll_strerror(rc));
		for (k = 0; k < n; k++) {
			if (st[k].error != 0)
				return failf(E_STATUS, &calls[k], me, "status error %d",
				             st[k].error);
			scribble(&calls[k]);
		}
		break;
	case HOW_WAIT_REVERSE:
		for (k = n - 1; k >= 0; k--) {
			rc = shmcoll_wait(&reqs[k], NULL);
			if (rc)
				return failf(E_DONE, &calls[k], me, "wait returned %d (%s)", rc,
				             shmcoll_strerror(rc));
			scribble(&calls[k]);
		}
		break;
	case HOW_TEST:
		for (left = n; left;) {
			for (k = 0; k < n; k++) {
				if (!reqs[k])
					continue;
				done = -1;
				rc = shmcoll_test(&reqs[k], &done, NULL);
				if (rc)
					return failf(E_DONE, &calls[k], me, "test returned %d (%s)",
					             rc, shmcoll_strerror(rc));
				if (done != 0 && done != 1)
					return failf(E_LOCAL, &calls[k], me, "test set done=%d",
					             done);
				if (done) {
					scribble(&calls[k]);
					left--;
				}
			}
			if (left)
				sched_yield();
		}
		break;
	case HOW_TESTALL:
		for (;;) {
			memcpy(before, reqs, sizeof(*reqs) * (size_t)n);
			done = -1;
			rc = shmcoll_testall((size_t)n, reqs, &done, st);
			if (rc)
				return failf(E_DONE, NULL, me, "testall returned %d (%s)", rc,
				             shmcoll_strerror(rc));
			if (done == 1)
				break;
			if (done != 0 || memcmp(before, reqs, sizeof(*reqs) * (size_t)n))
				return failf(E_LOCAL, NULL, me,
				             "testall not done (%d) but changed the requests",
				             done);
			sched_yield();
		}
		for (k = 0; k < n; k++) {
			if (st[k].error != 0)
				return failf(E_STATUS, &calls[k], me, "status error %d",
				             st[k].error);
			scribble(&calls[k]);
		}
		break;
	case HOW_WAITANY:
		for (got = 0; got < n; got++) {
			idx = 7;
			rc = shmcoll_waitany((size_t)n, reqs, &idx, NULL);
			if (idx >= (size_t)n || seen[idx] || reqs[idx])
				return failf(E_INDEX, NULL, me, "waitany %d gave index %zu", got,
				             idx);
			seen[idx] = 1;
			if (rc)
				return failf(E_DONE, &calls[idx], me, "waitany returned %d (%s)",
				             rc, shmcoll_strerror(rc));
			scribble(&calls[idx]);
		}
		rc = shmcoll_waitany((size_t)n, reqs, &idx, NULL);
		if (rc || idx != SIZE_MAX)
			return failf(E_INDEX, NULL, me,
			             "waitany with none left gave %d and index %zu (want SIZE_MAX)",
			             rc, idx);
		break;
	}
	for (k = 0; k < n; k++)
		if (reqs[k])
			return failf(E_REQ, &calls[k], me, "request not NULL after completion");
	return 0;
}

#define HOW_MIXED (-1) /* rank r completes by method r % 5 */

static int outstanding_body(shmcoll_comm *comm, int me, void *arg)
{
	int how_arg = *(const int *)arg;
	enum how how = (enum how)(how_arg == HOW_MIXED ? me % 5 : how_arg);
	int P = shmcoll_comm_size(comm), k, rc, rc2;
	struct call *calls = calloc(NOUT, sizeof(*calls));
	shmcoll_request *reqs[NOUT];
	struct pool pool;

	if (!calls)
		return E_NOMEM;
	rc = pool_new(comm, &pool, me);
	if (!rc)
		rc = mix_setup(calls, NOUT, me, P, 1000, &pool);
	for (k = 0; k < NOUT && !rc; k++) {
		note(&calls[k], "start");
		rc = start_checked(&calls[k], comm, me, &reqs[k]);
	}
	th_breadcrumb("completing %d requests, method %d", NOUT, (int)how);
	if (!rc)
		rc = complete_all(calls, reqs, NOUT, how, me);
	if (!rc)
		rc = mix_check(calls, NOUT, me);
	for (k = 0; k < NOUT; k++)
		call_free(&calls[k]);
	free(calls);
	rc2 = pool.base ? pool_free(comm, &pool, me) : 0;
	return rc ? rc : rc2;
}

static void run_outstanding(int how)
{
	static const int procs[] = {1, 2, 3, 8}, threads[] = {2, 4};
	th_result res;
	size_t i;

	for (i = 0; i < sizeof(procs) / sizeof(procs[0]) && !TH_UNDER_TSAN; i++) {
		th_run_ranks(procs[i], outstanding_body, &how, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", procs[i], res.summary);
	}
	for (i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
		th_run_threads(threads[i], outstanding_body, &how, &opts, &res);
		cr_assert(res.ok, "threads P=%d: %s", threads[i], res.summary);
	}
}

Test(nbc, outstanding_waitall, .timeout = 300)
{
	run_outstanding(HOW_WAITALL);
}

Test(nbc, outstanding_wait_reverse, .timeout = 300)
{
	run_outstanding(HOW_WAIT_REVERSE);
}

Test(nbc, outstanding_test_polled, .timeout = 300)
{
	run_outstanding(HOW_TEST);
}

Test(nbc, outstanding_testall, .timeout = 300)
{
	run_outstanding(HOW_TESTALL);
}

Test(nbc, outstanding_waitany, .timeout = 300)
{
	run_outstanding(HOW_WAITANY);
}

/* Each rank its own way: some block in waitall while others poll. */
Test(nbc, outstanding_each_rank_its_own_way, .timeout = 300)
{
	run_outstanding(HOW_MIXED);
}

/* Requests of two communicators (comm and a dup) in one array, completed by waitany (which
 * then moves each communicator along by testing), by testall and by waitall. */
static int twocomm_body(shmcoll_comm *comm, int me, void *arg)
{
	int P = shmcoll_comm_size(comm), k, round, rc = 0, rc2;
	struct call *calls = calloc(NOUT / 2, sizeof(*calls));
	shmcoll_request *reqs[NOUT / 2] = {0};
	shmcoll_comm *d = NULL;

	(void)arg;
	if (!calls)
		return E_NOMEM;
	rc = shmcoll_comm_dup(comm, &d);
	if (rc || !d) {
		free(calls);
		return failf(E_START, NULL, me, "comm_dup: %d (%s)", rc, shmcoll_strerror(rc));
	}
	for (round = 0; round < 3 && !rc; round++) {
		th_breadcrumb("two communicators, round %d", round);
		rc = mix_setup(calls, NOUT / 2, me, P, 20000 + 100 * (uint64_t)round, NULL);
		for (k = 0; k < NOUT / 2 && !rc; k++)
			rc = start_checked(&calls[k], (k + round) % 2 ? d : comm, me, &reqs[k]);
		if (!rc)
			rc = complete_all(calls, reqs, NOUT / 2,
			                  round == 0   ? HOW_WAITANY
			                  : round == 1 ? HOW_TESTALL
			                               : HOW_WAITALL,
			                  me);
		if (!rc)
			rc = mix_check(calls, NOUT / 2, me);
		for (k = 0; k < NOUT / 2; k++) {
			if (reqs[k])
				shmcoll_wait(&reqs[k], NULL);
			call_free(&calls[k]);
		}
	}
	free(calls);
	rc2 = shmcoll_comm_destroy(d);
	if (rc2 && !rc)
		rc = failf(E_BUSY, NULL, me, "destroy of the dup: %d", rc2);
	return rc;
}

Test(nbc, outstanding_on_two_communicators, .timeout = 300)
{
	th_result res;

	th_run_ranks(2, twocomm_body, NULL, &opts, &res);
	cr_assert(res.ok, "processes P=2: %s", res.summary);
	th_run_ranks(3, twocomm_body, NULL, &opts, &res);
	cr_assert(res.ok, "processes P=3: %s", res.summary);
	th_run_threads(3, twocomm_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=3: %s", res.summary);
}

/* ---- 3. blocking calls behind outstanding ones ---- */

/* NOUT - 14 calls outstanding, then a blocking call: it runs after every outstanding one (on
 * one node, tasks complete in the order they started: docs/ARCHITECTURE.md, "Tasks"), so each
 * of them then tests complete at once; then eight times one more started and a blocking call
 * behind it, the blocking calls of every kind in turn. Every result checked. */
static int behind_body(shmcoll_comm *comm, int me, void *arg)
{
	int P = shmcoll_comm_size(comm), nfirst = NOUT - TH_COLL_COUNT - 5, k, j, rc, done;
	struct call *calls = calloc(NOUT, sizeof(*calls)), blk;
	shmcoll_request *reqs[NOUT] = {0};

	(void)arg;
	if (!calls)
		return E_NOMEM;
	rc = mix_setup(calls, nfirst + TH_COLL_COUNT - 1, me, P, 5000, NULL);
	for (k = 0; k < nfirst && !rc; k++)
		rc = start_checked(&calls[k], comm, me, &reqs[k]);
	for (j = 0; j < TH_COLL_COUNT && !rc; j++) {
		if (j > 0) {
			k = nfirst + j - 1;
			note(&calls[k], "start");
			rc = start_checked(&calls[k], comm, me, &reqs[k]);
			if (rc)
				break;
		}
		mix_call(&blk, 3 + j * (TH_COLL_COUNT + 1), P, 7000); /* kind (3 + j) % 9, small */
		rc = call_setup(&blk, me, P, NULL);
		if (rc) {
			call_free(&blk);
			break;
		}
		note(&blk, "blocking behind");
		rc = call_blocking(&blk, comm);
		if (rc)
			rc =
			    failf(E_BLK_CALL, &blk, me, "blocking call behind returned %d (%s): %s",
			          rc, shmcoll_strerror(rc), shmcoll_last_error(comm));
		else
			rc = call_check(&blk, me, "blocking call behind outstanding ones",
			                E_BLK_OUT);
		call_free(&blk);
		/* Every call started before it is complete. */
		for (k = 0; k < nfirst + j && !rc; k++) {
			if (!reqs[k])
				continue;
			done = 0;
			rc = shmcoll_test(&reqs[k], &done, NULL);
			if (rc)
				rc = failf(E_DONE, &calls[k], me, "test returned %d (%s)", rc,
				           shmcoll_strerror(rc));
			else if (!done || reqs[k])
				rc = failf(E_ORDER, &calls[k], me,
				           "not complete after the blocking %s behind it returned",
				           th_coll_name((th_coll)j));
		}
	}
	if (!rc)
		rc = mix_check(calls, nfirst + TH_COLL_COUNT - 1, me);
	/* On failure, whatever is left: the harness's destroy must not see it outstanding. */
	for (k = 0; k < NOUT; k++)
		if (reqs[k])
			shmcoll_wait(&reqs[k], NULL);
	for (k = 0; k < NOUT; k++)
		call_free(&calls[k]);
	free(calls);
	return rc;
}

Test(nbc, blocking_calls_run_behind_outstanding, .timeout = 300)
{
	th_result res;
	int P;

	for (P = 1; P <= 4; P++) {
		th_run_ranks(P, behind_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", P, res.summary);
	}
	th_run_ranks(8, behind_body, NULL, &opts, &res);
	cr_assert(res.ok, "processes P=8: %s", res.summary);
	th_run_threads(2, behind_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
	th_run_threads(4, behind_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=4: %s", res.summary);
}

/* ---- 4. count 0, NULL requests, statuses ---- */

#define LOCAL_CHECK(cond, ...)                                                                     \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL rank %d line %d: %s: ", me, __LINE__, #cond);        \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			bad++;                                                                     \
		}                                                                                  \
	} while (0)

/* Starts kind with count 0 and NULL buffers (valid: nothing to move). */
static int start_zero(th_coll kind, shmcoll_comm *comm, shmcoll_request **req)
{
	struct call c = {.kind = kind, .dt = SHMCOLL_INT32, .op = SHMCOLL_SUM, .n = 0, .root = 0};

	return call_start(&c, comm, req);
}

static int local_body(shmcoll_comm *comm, int me, void *arg)
{
	int P = shmcoll_comm_size(comm), bad = 0, rc, done, kind, k;
	shmcoll_request *req, *reqs[6];
	shmcoll_status st[6];
	struct call live[3];
	size_t idx;

	(void)arg;
	/* Count 0: a request that is complete at once, with 0, whatever the peers do. */
	for (kind = 0; kind < TH_BARRIER; kind++) {
		th_breadcrumb("count 0 %s", th_coll_name((th_coll)kind));
		req = NULL;
		rc = start_zero((th_coll)kind, comm, &req);
		LOCAL_CHECK(rc == 0 && req, "%s count 0: start %d", th_coll_name((th_coll)kind),
		            rc);
		done = 0;
		rc = shmcoll_test(&req, &done, NULL);
		LOCAL_CHECK(rc == 0 && done == 1 && !req, "%s count 0: test %d done %d",
		            th_coll_name((th_coll)kind), rc, done);
		if (req)
			shmcoll_wait(&req, NULL);
		rc = start_zero((th_coll)kind, comm, &req);
		LOCAL_CHECK(rc == 0 && req, "count 0: start %d", rc);
		rc = shmcoll_wait(&req, NULL);
		LOCAL_CHECK(rc == 0 && !req, "%s count 0: wait %d", th_coll_name((th_coll)kind),
		            rc);
	}
	if (bad)
		return E_LOCAL;

	/* NULL requests, and bad pointers to them. */
	req = NULL;
	LOCAL_CHECK(shmcoll_wait(&req, NULL) == 0 && !req, "wait on a NULL request");
	LOCAL_CHECK(shmcoll_wait(NULL, NULL) == -EINVAL, "wait(NULL)");
	done = 0;
	LOCAL_CHECK(shmcoll_test(&req, &done, NULL) == 0 && done == 1, "test on a NULL request");
	LOCAL_CHECK(shmcoll_test(NULL, &done, NULL) == -EINVAL, "test(NULL, &done)");
	LOCAL_CHECK(shmcoll_test(&req, NULL, NULL) == -EINVAL, "test(&req, NULL)");
	LOCAL_CHECK(shmcoll_waitall(0, NULL, NULL) == 0, "waitall(0, NULL)");
	LOCAL_CHECK(shmcoll_waitall(2, NULL, NULL) == -EINVAL, "waitall(2, NULL)");
	done = 0;
	LOCAL_CHECK(shmcoll_testall(0, NULL, &done, NULL) == 0 && done == 1, "testall(0, NULL)");
	LOCAL_CHECK(shmcoll_testall(2, NULL, &done, NULL) == -EINVAL, "testall(2, NULL)");
	idx = 0;
	LOCAL_CHECK(shmcoll_waitany(0, NULL, &idx, NULL) == 0 && idx == SIZE_MAX,
	            "waitany(0, NULL): index %zu", idx);
	LOCAL_CHECK(shmcoll_waitany(2, NULL, &idx, NULL) == -EINVAL, "waitany(2, NULL)");
	for (k = 0; k < 6; k++)
		reqs[k] = NULL;
	done = 0;
	LOCAL_CHECK(shmcoll_testall(6, reqs, &done, NULL) == 0 && done == 1, "testall of NULLs");
	idx = 0;
	LOCAL_CHECK(shmcoll_waitany(6, reqs, &idx, NULL) == 0 && idx == SIZE_MAX,
	            "waitany of NULLs: index %zu", idx);
	for (k = 0; k < 6; k++)
		st[k].error = 777;
	LOCAL_CHECK(shmcoll_waitall(6, reqs, st) == 0, "waitall of NULLs");
	for (k = 0; k < 6; k++)
		LOCAL_CHECK(st[k].error == 0, "waitall of NULLs: status %d error %d", k,
		            st[k].error);
	if (bad)
		return E_LOCAL;

	/* waitall over live, count-0 and NULL entries: NULLs skipped, every entry NULL after,
	 * every status's error field 0; a count-0 request among live ones is complete at once. */
	for (k = 0; k < 3; k++) {
		mix_call(&live[k], k * 10, P, 9000); /* allreduce, reduce, bcast */
		if (call_setup(&live[k], me, P, NULL))
			return E_NOMEM;
	}
	rc = start_checked(&live[0], comm, me, &reqs[1]);
	rc = rc ? rc : start_zero(TH_ALLGATHER, comm, &reqs[3]);
	rc = rc ? rc : start_checked(&live[1], comm, me, &reqs[4]);
	if (rc)
		return E_START;
	done = 0;
	rc = shmcoll_test(&reqs[3], &done, NULL);
	LOCAL_CHECK(rc == 0 && done == 1 && !reqs[3], "count 0 behind a live call: %d %d", rc,
	            done);
	rc = start_zero(TH_ALLTOALL, comm, &reqs[3]);
	rc = rc ? rc : start_checked(&live[2], comm, me, &reqs[5]);
	if (rc)
		return E_START;
	/* Bad arguments with live requests: -EINVAL and nothing changed. */
	idx = 0;
	LOCAL_CHECK(shmcoll_waitany(6, reqs, NULL, NULL) == -EINVAL && reqs[1] && reqs[5],
	            "waitany(index NULL)");
	LOCAL_CHECK(shmcoll_testall(6, reqs, NULL, NULL) == -EINVAL && reqs[1] && reqs[5],
	            "testall(done NULL)");
	for (k = 0; k < 6; k++)
		st[k].error = 777;
	rc = shmcoll_waitall(6, reqs, st);
	LOCAL_CHECK(rc == 0, "waitall: %d", rc);
	for (k = 0; k < 6; k++) {
		LOCAL_CHECK(!reqs[k], "waitall left entry %d", k);
		LOCAL_CHECK(st[k].error == 0, "waitall: status %d error %d", k, st[k].error);
	}
	for (k = 0; k < 3; k++) {
		if (call_check(&live[k], me, "waitall among NULLs", E_NB_OUT))
			bad++;
		call_free(&live[k]);
	}
	return bad ? E_LOCAL : 0;
}

Test(nbc, count_zero_null_requests_and_statuses, .timeout = 120)
{
	th_result res;
	int P;

	for (P = 1; P <= 3; P++) {
		th_run_ranks(P, local_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", P, res.summary);
	}
	th_run_threads(2, local_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
}

/* ---- 5. argument errors ---- */

static char bogus_storage[64];
#define BOGUS ((shmcoll_request *)(void *)bogus_storage)

/* call must return -EINVAL and leave *req NULL (req is the variable it was given). */
#define EXPECT_EINVAL(call)                                                                        \
	do {                                                                                       \
		int rc_;                                                                           \
		req = BOGUS;                                                                       \
		rc_ = (call);                                                                      \
		if (rc_ != -EINVAL || req != NULL) {                                               \
			fprintf(stderr,                                                            \
			        "FAIL rank %d line %d: %s: returned %d (want %d), *req %s\n", me,  \
			        __LINE__, #call, rc_, -EINVAL,                                     \
			        req == NULL    ? "NULL"                                            \
			        : req == BOGUS ? "unchanged"                                       \
			                       : "a request");                                     \
			bad++;                                                                     \
			if (req && req != BOGUS)                                                   \
				shmcoll_wait(&req, NULL);                                          \
		}                                                                                  \
	} while (0)

/* With req == NULL: -EINVAL, nothing started. */
#define EXPECT_EINVAL_NOREQ(call)                                                                  \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != -EINVAL) {                                                              \
			fprintf(stderr, "FAIL rank %d line %d: %s: returned %d (want %d)\n", me,   \
			        __LINE__, #call, rc_, -EINVAL);                                    \
			bad++;                                                                     \
		}                                                                                  \
	} while (0)

static int args_body(shmcoll_comm *comm, int me, void *arg)
{
	int P = shmcoll_comm_size(comm), bad = 0, k, rc;
	int32_t x[8 * 4 + 8] = {0}, y[8 * 4 + 8] = {0};
	const shmcoll_dtype BADT = SHMCOLL_DTYPE_COUNT, NEGT = (shmcoll_dtype)-1;
	const shmcoll_op BADO = SHMCOLL_OP_COUNT;
	const shmcoll_dtype I32 = SHMCOLL_INT32;
	shmcoll_request *req, *pre[3];
	struct call live[3];

	(void)arg;
	/* Valid calls outstanding while the bad ones are refused. */
	for (k = 0; k < 3; k++) {
		mix_call(&live[k], k * 10 + 1, P, 11000);
		if (call_setup(&live[k], me, P, NULL))
			return E_NOMEM;
		if (start_checked(&live[k], comm, me, &pre[k]))
			return E_START;
	}
	th_breadcrumb("argument errors");
	/* NULL request pointer, valid otherwise. */
	EXPECT_EINVAL_NOREQ(shmcoll_iallreduce(x, y, 4, I32, SHMCOLL_SUM, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_ireduce(x, y, 4, I32, SHMCOLL_SUM, 0, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_ibcast(x, 4, I32, 0, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_iallgather(x, y, 4, I32, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_ireduce_scatter(x, y, 4, I32, SHMCOLL_SUM, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_igather(x, y, 4, I32, 0, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_iscatter(x, y, 4, I32, 0, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_ialltoall(x, y, 4, I32, comm, NULL));
	EXPECT_EINVAL_NOREQ(shmcoll_ibarrier(comm, NULL));
	/* Unknown dtypes. */
	EXPECT_EINVAL(shmcoll_iallreduce(x, y, 4, BADT, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_iallreduce(x, y, 4, NEGT, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(x, y, 4, BADT, SHMCOLL_SUM, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_ibcast(x, 4, BADT, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_ibcast(x, 4, NEGT, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_iallgather(x, y, 4, BADT, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce_scatter(x, y, 4, BADT, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_igather(x, y, 4, BADT, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_iscatter(x, y, 4, BADT, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_ialltoall(x, y, 4, NEGT, comm, &req));
	/* The message names the non-blocking function. */
	shmcoll_iallgather(x, y, 4, BADT, comm, &req);
	if (!strstr(shmcoll_last_error(comm), "shmcoll_iallgather")) {
		fprintf(stderr, "FAIL rank %d: last error after a bad iallgather: \"%s\"\n", me,
		        shmcoll_last_error(comm));
		bad++;
	}
	/* Unknown ops, and a bitwise op on a float type. */
	EXPECT_EINVAL(shmcoll_iallreduce(x, y, 4, I32, BADO, comm, &req));
	EXPECT_EINVAL(shmcoll_iallreduce(x, y, 4, I32, (shmcoll_op)-1, comm, &req));
	EXPECT_EINVAL(shmcoll_iallreduce(x, y, 4, SHMCOLL_FLOAT32, SHMCOLL_BXOR, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(x, y, 4, I32, BADO, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(x, y, 4, SHMCOLL_FLOAT64, SHMCOLL_BAND, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce_scatter(x, y, 4, I32, BADO, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce_scatter(x, y, 4, SHMCOLL_FLOAT16, SHMCOLL_BOR, comm, &req));
	/* Roots out of range. */
	EXPECT_EINVAL(shmcoll_ireduce(x, y, 4, I32, SHMCOLL_SUM, -1, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(x, y, 4, I32, SHMCOLL_SUM, P, comm, &req));
	EXPECT_EINVAL(shmcoll_ibcast(x, 4, I32, -1, comm, &req));
	EXPECT_EINVAL(shmcoll_ibcast(x, 4, I32, P, comm, &req));
	EXPECT_EINVAL(shmcoll_igather(x, y, 4, I32, -1, comm, &req));
	EXPECT_EINVAL(shmcoll_igather(x, y, 4, I32, P, comm, &req));
	EXPECT_EINVAL(shmcoll_iscatter(x, y, 4, I32, -1, comm, &req));
	EXPECT_EINVAL(shmcoll_iscatter(x, y, 4, I32, P, comm, &req));
	/* Buffers that partly overlap (not the in-place form); roots are this rank, where the
	 * root-only buffer is checked. */
	EXPECT_EINVAL(shmcoll_iallreduce(x, x + 1, 4, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_iallreduce(x + 1, x, 4, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(x, x + 2, 4, I32, SHMCOLL_SUM, me, comm, &req));
	EXPECT_EINVAL(shmcoll_iallgather(x + 4 * me + 1, x, 4, I32, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce_scatter(x, x + 4 * me + 1, 4, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_igather(x + 4 * me + 1, x, 4, I32, me, comm, &req));
	EXPECT_EINVAL(shmcoll_iscatter(x, x + 4 * me + 1, 4, I32, me, comm, &req));
	EXPECT_EINVAL(shmcoll_ialltoall(x, x + 1, 4, I32, comm, &req));
	EXPECT_EINVAL(shmcoll_ialltoall(x + 3, x, 4, I32, comm, &req));
	/* NULL buffers with something to move. */
	EXPECT_EINVAL(shmcoll_iallreduce(NULL, y, 4, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_iallreduce(x, NULL, 4, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(NULL, y, 4, I32, SHMCOLL_SUM, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce(x, NULL, 4, I32, SHMCOLL_SUM, me, comm, &req));
	EXPECT_EINVAL(shmcoll_ibcast(NULL, 4, I32, 0, comm, &req));
	EXPECT_EINVAL(shmcoll_iallgather(NULL, y, 4, I32, comm, &req));
	EXPECT_EINVAL(shmcoll_ireduce_scatter(x, NULL, 4, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_igather(x, NULL, 4, I32, me, comm, &req));
	EXPECT_EINVAL(shmcoll_iscatter(NULL, y, 4, I32, me, comm, &req));
	EXPECT_EINVAL(shmcoll_ialltoall(x, NULL, 4, I32, comm, &req));
	/* A byte size that overflows. */
	EXPECT_EINVAL(shmcoll_iallreduce(x, y, SIZE_MAX / 2, I32, SHMCOLL_SUM, comm, &req));
	EXPECT_EINVAL(shmcoll_ialltoall(x, y, SIZE_MAX / 3, I32, comm, &req));
	EXPECT_EINVAL(shmcoll_iallgather(x, y, SIZE_MAX / 3, I32, comm, &req));

	/* The communicator is usable: the calls outstanding complete right, and new ones run. */
	th_breadcrumb("after the argument errors");
	rc = shmcoll_waitall(3, pre, NULL);
	if (rc)
		return failf(E_DONE, NULL, me, "waitall after the errors: %d (%s)", rc,
		             shmcoll_strerror(rc));
	for (k = 0; k < 3; k++) {
		rc = call_check(&live[k], me, "outstanding across argument errors", E_NB_OUT);
		call_free(&live[k]);
		if (rc)
			return rc;
	}
	for (k = 0; k < 2; k++) {
		struct call c;

		mix_call(&c, 40 + k, P, 12000); /* reduce_scatter, gather */
		rc = match_case(comm, me, P, &c, k);
		if (rc)
			return rc;
	}
	return bad ? E_ARGS : 0;
}

Test(nbc, argument_errors_leave_the_communicator_usable, .timeout = 120)
{
	th_result res;
	int P;

	for (P = 1; P <= 3; P++) {
		th_run_ranks(P, args_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", P, res.summary);
	}
	th_run_threads(2, args_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
}

/* A NULL communicator: -EINVAL and *req = NULL (the contract of every start: "an error with
 * *req = NULL"), with no rank needed. */
Test(nbc, null_communicator_clears_the_request, .timeout = 30)
{
	int32_t x[4] = {0}, y[4] = {0};
	const shmcoll_dtype I32 = SHMCOLL_INT32;
	shmcoll_request *req;
	int rc;

#define NULL_COMM(call)                                                                            \
	do {                                                                                       \
		req = BOGUS;                                                                       \
		rc = (call);                                                                       \
		cr_expect(rc == -EINVAL && req == NULL, "%s: returned %d, *req %s", #call, rc,     \
		          req == NULL    ? "NULL"                                                  \
		          : req == BOGUS ? "left unchanged"                                        \
		                         : "a request");                                           \
	} while (0)
	NULL_COMM(shmcoll_iallreduce(x, y, 4, I32, SHMCOLL_SUM, NULL, &req));
	NULL_COMM(shmcoll_ireduce(x, y, 4, I32, SHMCOLL_SUM, 0, NULL, &req));
	NULL_COMM(shmcoll_ibcast(x, 4, I32, 0, NULL, &req));
	NULL_COMM(shmcoll_iallgather(x, y, 4, I32, NULL, &req));
	NULL_COMM(shmcoll_ireduce_scatter(x, y, 4, I32, SHMCOLL_SUM, NULL, &req));
	NULL_COMM(shmcoll_igather(x, y, 4, I32, 0, NULL, &req));
	NULL_COMM(shmcoll_iscatter(x, y, 4, I32, 0, NULL, &req));
	NULL_COMM(shmcoll_ialltoall(x, y, 4, I32, NULL, &req));
	NULL_COMM(shmcoll_ibarrier(NULL, &req));
#undef NULL_COMM
}

/* ---- 6. destroy with requests outstanding ---- */

/* On a dup of the communicator (the harness destroys its own): destroy is -EBUSY while a
 * request is outstanding - pending, complete underneath (a later blocking call ran it) but
 * not waited, or of count 0 - and changes nothing (the communicator keeps working, the
 * requests complete right); once every one is returned, it is 0. The same -EBUSY on the
 * harness's communicator, which its own destroy then finds idle. */
static int busy_body(shmcoll_comm *comm, int me, void *arg)
{
	int P = shmcoll_comm_size(comm), rc, done, k;
	shmcoll_comm *d = NULL;
	shmcoll_request *a = NULL, *z = NULL, *m = NULL;
	struct call ca, cb, cm;

	(void)arg;
	th_breadcrumb("dup");
	rc = shmcoll_comm_dup(comm, &d);
	if (rc || !d)
		return failf(E_BUSY, NULL, me, "comm_dup: %d (%s)", rc, shmcoll_strerror(rc));
	mix_call(&ca, 0, P, 13000);  /* allreduce */
	mix_call(&cb, 16, P, 13000); /* alltoall */
	mix_call(&cm, 21, P, 13000); /* allgather */
	if (call_setup(&ca, me, P, NULL) || call_setup(&cb, me, P, NULL) ||
	    call_setup(&cm, me, P, NULL))
		return E_NOMEM;
	rc = start_checked(&ca, d, me, &a);
	rc = rc ? rc : start_zero(TH_REDUCE, d, &z);
	rc = rc ? rc : start_checked(&cm, comm, me, &m);
	if (rc || !z)
		return E_START;
	th_breadcrumb("destroy while busy");
	for (k = 0; k < 2; k++) {
		rc = shmcoll_comm_destroy(k ? comm : d);
		if (rc != -EBUSY)
			return failf(E_BUSY, NULL, me, "destroy(%s) with requests outstanding: %d",
			             k ? "comm" : "dup", rc);
	}
	/* Still usable: a blocking call on the dup, behind a, which it completes underneath. */
	rc = call_blocking(&cb, d);
	if (rc)
		return failf(E_BUSY, &cb, me, "blocking call after -EBUSY: %d", rc);
	rc = call_check(&cb, me, "blocking call after -EBUSY", E_BLK_OUT);
	if (rc)
		return rc;
	rc = shmcoll_comm_destroy(d);
	if (rc != -EBUSY)
		return failf(E_BUSY, NULL, me, "destroy with a request complete but not waited: %d",
		             rc);
	rc = shmcoll_wait(&a, NULL);
	if (rc)
		return failf(E_DONE, &ca, me, "wait after -EBUSY: %d", rc);
	rc = call_check(&ca, me, "request across -EBUSY", E_NB_OUT);
	if (rc)
		return rc;
	rc = shmcoll_comm_destroy(d);
	if (rc != -EBUSY)
		return failf(E_BUSY, NULL, me, "destroy with a count-0 request outstanding: %d",
		             rc);
	done = 0;
	rc = shmcoll_test(&z, &done, NULL);
	if (rc || !done)
		return failf(E_DONE, NULL, me, "count-0 request: test %d done %d", rc, done);
	th_breadcrumb("destroy when idle");
	rc = shmcoll_comm_destroy(d);
	if (rc)
		return failf(E_BUSY, NULL, me, "destroy once every request is returned: %d", rc);
	rc = shmcoll_wait(&m, NULL);
	if (rc)
		return failf(E_DONE, &cm, me, "wait on comm after its -EBUSY: %d", rc);
	rc = call_check(&cm, me, "request across -EBUSY", E_NB_OUT);
	call_free(&ca);
	call_free(&cb);
	call_free(&cm);
	return rc; /* the harness's destroy of comm must now succeed */
}

Test(nbc, destroy_with_requests_outstanding_is_busy, .timeout = 120)
{
	th_result res;
	int P;

	for (P = 1; P <= 3; P++) {
		th_run_ranks(P, busy_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", P, res.summary);
	}
	th_run_threads(2, busy_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
}

/* ---- 7. computation overlapped with collectives ---- */

#define BUCKETS     6
#define BUCKET_N    60000 /* int32: 240 KB, more than a staging half */
#define SLICE_N     4000
#define OVERLAP_KEY 0x0ce1a9ull

static int32_t bucket_in(int b, int r, size_t i)
{
	return (int32_t)(uint32_t)th_hash(OVERLAP_KEY + (uint64_t)b, r, i);
}

/* Polls every bucket still outstanding once. */
static int poll_buckets(shmcoll_request **reqs, int n, int me, long *polls)
{
	int b, done, rc;

	for (b = 0; b < n; b++) {
		if (!reqs[b])
			continue;
		rc = shmcoll_test(&reqs[b], &done, NULL);
		++*polls;
		if (rc)
			return failf(E_OVERLAP, NULL, me, "test of bucket %d: %d (%s)", b, rc,
			             shmcoll_strerror(rc));
	}
	return 0;
}

/* As a training step does with gradients: each bucket is computed (in slices, polling the
 * buckets already started between slices) and its iallreduce started (odd buckets in
 * place); the sums wanted are then computed the same way, the rest waited for, and every
 * bucket checked. The amount of computation between polls does not matter. */
static int overlap_body(shmcoll_comm *comm, int me, void *arg)
{
	int P = shmcoll_comm_size(comm), b, r, rc = 0;
	int32_t *in[BUCKETS] = {0}, *out[BUCKETS] = {0}, *want = malloc(BUCKET_N * sizeof(int32_t));
	shmcoll_request *reqs[BUCKETS] = {0};
	size_t i, s;
	long polls = 0;

	(void)arg;
	for (b = 0; b < BUCKETS && want; b++) {
		in[b] = malloc(BUCKET_N * sizeof(int32_t));
		out[b] = b & 1 ? in[b] : malloc(BUCKET_N * sizeof(int32_t));
		if (!in[b] || !out[b])
			goto nomem;
	}
	if (!want)
		goto nomem;
	for (b = 0; b < BUCKETS && !rc; b++) {
		th_breadcrumb("overlap: bucket %d", b);
		for (s = 0; s < BUCKET_N && !rc; s += SLICE_N) {
			for (i = s; i < s + SLICE_N && i < BUCKET_N; i++)
				in[b][i] = bucket_in(b, me, i);
			rc = poll_buckets(reqs, b, me, &polls);
		}
		if (!rc)
			rc = shmcoll_iallreduce(in[b], out[b], BUCKET_N, SHMCOLL_INT32, SHMCOLL_SUM,
			                        comm, &reqs[b]);
		if (rc)
			rc = failf(E_OVERLAP, NULL, me, "iallreduce of bucket %d: %d", b, rc);
	}
	for (b = 0; b < BUCKETS && !rc; b++) {
		th_breadcrumb("overlap: checking bucket %d", b);
		for (s = 0; s < BUCKET_N && !rc; s += SLICE_N) {
			for (i = s; i < s + SLICE_N && i < BUCKET_N; i++) {
				uint32_t sum = 0;

				for (r = 0; r < P; r++)
					sum += (uint32_t)bucket_in(b, r, i);
				want[i] = (int32_t)sum;
			}
			rc = poll_buckets(reqs, BUCKETS, me, &polls);
		}
		if (!rc && reqs[b]) {
			rc = shmcoll_wait(&reqs[b], NULL);
			if (rc)
				rc = failf(E_OVERLAP, NULL, me, "wait of bucket %d: %d", b, rc);
		}
		for (i = 0; i < BUCKET_N && !rc; i++)
			if (out[b][i] != want[i])
				rc = failf(E_OVERLAP, NULL, me,
				           "bucket %d element %zu is %d, want %d (%s)", b, i,
				           out[b][i], want[i], b & 1 ? "in place" : "out of place");
	}
	for (b = 0; b < BUCKETS; b++)
		if (reqs[b])
			shmcoll_wait(&reqs[b], NULL);
	if (!rc && polls == 0)
		rc = failf(E_OVERLAP, NULL, me, "never polled");
	goto out;
nomem:
	rc = E_NOMEM;
out:
	for (b = 0; b < BUCKETS; b++) {
		if (out[b] != in[b])
			free(out[b]);
		free(in[b]);
	}
	free(want);
	return rc;
}

Test(nbc, computation_overlapped_with_polling, .timeout = 120)
{
	th_result res;
	int P;

	for (P = 1; P <= 4; P *= 2) {
		th_run_ranks(P, overlap_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", P, res.summary);
	}
	th_run_ranks(3, overlap_body, NULL, &opts, &res);
	cr_assert(res.ok, "processes P=3: %s", res.summary);
	th_run_ranks(8, overlap_body, NULL, &opts, &res);
	cr_assert(res.ok, "processes P=8: %s", res.summary);
	th_run_threads(2, overlap_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
	th_run_threads(4, overlap_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=4: %s", res.summary);
}

/* ---- 8. abort with requests outstanding ---- */

#define ABORT_SHARED 2  /* calls every rank starts, the aborting one included */
#define ABORT_CALLS  14 /* calls the others start */

struct abort_arg {
	int aborter;
	_Atomic int started; /* ranks other than the aborter that started all their calls */
};

/* Call k of the abort test: the first ABORT_SHARED may complete before the abort; the rest
 * cannot complete on any rank without the aborter, which never starts them (every kind here
 * needs every rank's data on every rank: a bcast's root is the aborter). */
static void abort_call(struct call *c, int k, int P, int aborter)
{
	static const th_coll kinds[] = {TH_ALLREDUCE, TH_BARRIER,   TH_ALLGATHER,
	                                TH_ALLTOALL,  TH_BCAST,     TH_REDUCE_SCATTER,
	                                TH_BARRIER,   TH_ALLREDUCE, TH_ALLTOALL};
	size_t pi = (size_t)k % NPAIRS;

	memset(c, 0, sizeof(*c));
	c->kind = kinds[k % 9];
	c->dt = pairs[pi].dt;
	c->op = pairs[pi].op;
	c->n = k == 7 ? big_count(c->kind, c->dt, P) : (size_t)(1 + 37 * k);
	c->root = aborter;
	c->inplace = k & 1;
	c->salt = 15000 + (uint64_t)k;
}

/* The aborter starts the shared calls, waits (between calls) until every other rank has
 * started all of its calls, and aborts; every rank then completes what it started: each
 * shared call right or with an error, every other one with an error (not the timeout, which
 * is 30 s away), by waitall, polling test or waitany (by rank). Later calls: -ECANCELED. */
static int abort_body(shmcoll_comm *comm, int me, void *arg)
{
	struct abort_arg *a = arg;
	int P = shmcoll_comm_size(comm), mine = me == a->aborter ? ABORT_SHARED : ABORT_CALLS;
	struct call calls[ABORT_CALLS];
	shmcoll_request *reqs[ABORT_CALLS] = {0};
	shmcoll_status st[ABORT_CALLS];
	int rcs[ABORT_CALLS], k, rc = 0, done, left, got, failed = 0;
	int32_t x = 1, y = 0;
	size_t idx;

	/* A good call first: the ranks are all there. */
	if (shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_SUM, comm) || y != P)
		return failf(E_ABORT, NULL, me, "allreduce before the abort");
	for (k = 0; k < mine; k++) {
		abort_call(&calls[k], k, P, a->aborter);
		if (call_setup(&calls[k], me, P, NULL))
			return E_NOMEM;
		rcs[k] = 1;
		note(&calls[k], "start before abort");
		rc = start_checked(&calls[k], comm, me, &reqs[k]);
		if (rc)
			return rc;
	}
	if (me == a->aborter) {
		th_breadcrumb("aborter: waiting for the others to start");
		while (atomic_load(&a->started) < P - 1)
			sched_yield();
		th_breadcrumb("aborting");
		rc = shmcoll_comm_abort(comm);
		if (rc)
			return failf(E_ABORT, NULL, me, "comm_abort returned %d", rc);
	} else {
		atomic_fetch_add(&a->started, 1);
	}
	th_breadcrumb("completing after the abort (method %d)", me % 3);
	switch (me % 3) {
	case 0:
		for (k = 0; k < mine; k++)
			st[k].error = 12345;
		rc = shmcoll_waitall((size_t)mine, reqs, st);
		for (k = 0, got = 0; k < mine; k++) {
			rcs[k] = st[k].error;
			got = got ? got : rcs[k]; /* the first error in array order */
		}
		if (got != rc)
			return failf(E_STATUS, NULL, me,
			             "waitall returned %d, first status error %d", rc, got);
		break;
	case 1:
		for (left = mine; left;) {
			for (k = 0; k < mine; k++) {
				if (!reqs[k])
					continue;
				rc = shmcoll_test(&reqs[k], &done, NULL);
				if (done) {
					rcs[k] = rc;
					left--;
				} else if (rc) {
					return failf(E_ABORT, &calls[k], me,
					             "test returned %d but not done", rc);
				}
			}
			if (left)
				sched_yield();
		}
		break;
	default:
		for (got = 0; got < mine; got++) {
			idx = SIZE_MAX;
			rc = shmcoll_waitany((size_t)mine, reqs, &idx, NULL);
			if (idx >= (size_t)mine || rcs[idx] != 1)
				return failf(E_INDEX, NULL, me, "waitany after abort: index %zu",
				             idx);
			rcs[idx] = rc;
		}
		break;
	}
	for (k = 0; k < mine; k++) {
		if (reqs[k])
			return failf(E_REQ, &calls[k], me, "request not NULL after completion");
		if (rcs[k] == -ETIMEDOUT || rcs[k] > 0 || (rcs[k] == 0 && k >= ABORT_SHARED))
			return failf(E_ABORT, &calls[k], me,
			             "completed with %d (%s) after the abort", rcs[k],
			             shmcoll_strerror(rcs[k]));
		if (rcs[k] == 0 && call_check(&calls[k], me, "completed before the abort", E_ABORT))
			return E_ABORT;
		failed += rcs[k] != 0;
		call_free(&calls[k]);
	}
	if (me != a->aborter && failed < ABORT_CALLS - ABORT_SHARED)
		return E_ABORT;
	/* Every later call fails, and starts nothing. */
	th_breadcrumb("calls after the abort");
	shmcoll_request *req = BOGUS;

	rc = shmcoll_iallreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_SUM, comm, &req);
	if (rc != -ECANCELED || req)
		return failf(E_ABORT, NULL, me, "iallreduce after the abort: %d, *req %p", rc,
		             (void *)req);
	req = BOGUS;
	rc = shmcoll_ibarrier(comm, &req);
	if (rc != -ECANCELED || req)
		return failf(E_ABORT, NULL, me, "ibarrier after the abort: %d", rc);
	req = BOGUS;
	rc = shmcoll_ibcast(&x, 0, SHMCOLL_INT32, 0, comm, &req);
	if (rc != -ECANCELED || req)
		return failf(E_ABORT, NULL, me, "ibcast of count 0 after the abort: %d", rc);
	rc = shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT32, SHMCOLL_SUM, comm);
	if (rc != -ECANCELED)
		return failf(E_ABORT, NULL, me, "allreduce after the abort: %d", rc);
	rc = shmcoll_barrier(comm);
	if (rc != -ECANCELED)
		return failf(E_ABORT, NULL, me, "barrier after the abort: %d", rc);
	return 0;
}

static void run_abort(int P, int aborter, int threads)
{
	struct abort_arg *a =
	    mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = opts;
	th_result res;

	cr_assert(a != MAP_FAILED);
	a->aborter = aborter;
	atomic_init(&a->started, 0);
	o.wall_ms = 60000;
	if (threads)
		th_run_threads(P, abort_body, a, &o, &res);
	else
		th_run_ranks(P, abort_body, a, &o, &res);
	munmap(a, sizeof(*a));
	cr_assert(res.ok, "%s P=%d, rank %d aborts: %s", threads ? "threads" : "processes", P,
	          aborter, res.summary);
}

Test(nbc, abort_fails_every_outstanding_request, .timeout = 300)
{
	run_abort(2, 1, 0);
	run_abort(2, 0, 0);
	run_abort(3, 1, 0);
	run_abort(3, 0, 0);
	run_abort(4, 2, 0);
	run_abort(5, 4, 0);
	run_abort(2, 1, 1);
	run_abort(4, 1, 1);
	run_abort(4, 3, 1);
}

/* ---- the same with a progress thread (SHMCOLL_PROGRESS_THREAD=1) ---- */

/* Criterion runs each test in a process of its own: the variable set here reaches only the
 * ranks this test starts. */
static void progress_thread_on(void)
{
	cr_assert(setenv("SHMCOLL_PROGRESS_THREAD", "1", 1) == 0);
}

Test(nbc, with_progress_thread_outstanding, .timeout = 300)
{
	int how = HOW_MIXED;
	th_result res;

	progress_thread_on();
	th_run_ranks(3, outstanding_body, &how, &opts, &res);
	cr_assert(res.ok, "processes P=3: %s", res.summary);
	th_run_threads(2, outstanding_body, &how, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
	th_run_ranks(2, behind_body, NULL, &opts, &res);
	cr_assert(res.ok, "behind, processes P=2: %s", res.summary);
	th_run_threads(2, busy_body, NULL, &opts, &res);
	cr_assert(res.ok, "destroy, threads P=2: %s", res.summary);
	th_run_threads(2, overlap_body, NULL, &opts, &res);
	cr_assert(res.ok, "overlap, threads P=2: %s", res.summary);
}

Test(nbc, with_progress_thread_matches_blocking, .timeout = 300)
{
	progress_thread_on();
	run_match(2, 1);
}

Test(nbc, with_progress_thread_abort, .timeout = 300)
{
	progress_thread_on();
	run_abort(3, 1, 0);
	run_abort(2, 0, 1);
	run_abort(3, 2, 1);
}

struct idle_arg {
	_Atomic int peer_done; /* waits of ranks but 0 that returned */
	_Atomic int zero_done; /* waits of rank 0 that returned */
};

/* Rank 0 starts a call of many chunks (an allreduce, a bcast from it, an alltoall) and then
 * makes no shmcoll call until every peer's wait for it has returned: only its progress
 * thread can move its part along. (Without
 * one the peers would time out, then free rank 0, and the test fails instead of hanging.) */
static int idle_body(shmcoll_comm *comm, int me, void *arg)
{
	struct idle_arg *a = arg;
	int P = shmcoll_comm_size(comm), rc, k;
	shmcoll_request *req = NULL;
	struct call c;

	for (k = 0; k < 3; k++) {
		mix_call(&c, 45, P, 30000 + (uint64_t)k);
		c.kind = k == 0 ? TH_ALLREDUCE : k == 1 ? TH_BCAST : TH_ALLTOALL;
		c.n = big_count(c.kind, c.dt, P);
		c.root = 0;
		if (call_setup(&c, me, P, NULL))
			return E_NOMEM;
		note(&c, "idle caller");
		rc = start_checked(&c, comm, me, &req);
		if (rc)
			return rc;
		if (me == 0) {
			while (atomic_load(&a->peer_done) < (P - 1) * (k + 1))
				sched_yield();
		}
		rc = shmcoll_wait(&req, NULL);
		if (me != 0) {
			/* Stay until rank 0 has its result too, but for the last call: then
			 * the peers destroy their communicators and exit while rank 0's part
			 * may still be finishing, which must not make them dead to it. */
			atomic_fetch_add(&a->peer_done, 1);
			while (k < 2 && atomic_load(&a->zero_done) < k + 1)
				sched_yield();
		} else {
			atomic_fetch_add(&a->zero_done, 1);
		}
		if (rc)
			return failf(E_DONE, &c, me, "wait: %d (%s): %s", rc, shmcoll_strerror(rc),
			             shmcoll_last_error(comm));
		rc = call_check(&c, me, "completed by the progress thread", E_NB_OUT);
		call_free(&c);
		if (rc)
			return rc;
	}
	return 0;
}

static void run_idle(int P, int threads)
{
	struct idle_arg *a =
	    mmap(NULL, sizeof(*a), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_result res;

	cr_assert(a != MAP_FAILED);
	atomic_init(&a->peer_done, 0);
	atomic_init(&a->zero_done, 0);
	if (threads)
		th_run_threads(P, idle_body, a, &opts, &res);
	else
		th_run_ranks(P, idle_body, a, &opts, &res);
	munmap(a, sizeof(*a));
	cr_assert(res.ok, "%s P=%d: %s", threads ? "threads" : "processes", P, res.summary);
}

Test(nbc, with_progress_thread_a_caller_that_makes_no_call, .timeout = 300)
{
	progress_thread_on();
	run_idle(2, 0);
	run_idle(3, 0);
	run_idle(2, 1);
}
