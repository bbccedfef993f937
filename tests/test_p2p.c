/* test_p2p.c - point-to-point messages (lib/core/p2p.c) through the public API: every size
 * from 0 bytes across the eager limit to several MiB, in a ring and in pairs, with ranks as
 * processes and as threads; element types; MPI's matching and ordering rules, wildcards,
 * probes and truncation; messages to self; sendrecv; windows of requests completed every
 * way; unexpected messages; every rendezvous source (symmetric heap, streamed, a thread of
 * the same process, process_vm_readv); point-to-point beside collectives; argument errors;
 * destroy with requests outstanding; and a randomized matching stress. Every rank checks
 * what it received, its status and the bytes around it against values it derives on its
 * own; nothing depends on timing. What survivors see when a peer dies or the communicator
 * is aborted is in tests/test_faults.c. */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "shm/arena.h"
#include "shm/name.h"
#include "tests/harness.h"

#define GUARD         64    /* canary bytes on each side of a receive buffer */
#define EAGER_DEFAULT 16384 /* lib/core/p2p.c: the eager size where the ring allows it */
#define FRAME_HDR     40    /* lib/core/p2p.c: stamp + header; eager <= ring / 4 - this */
#define MIB           ((size_t)1 << 20)
#define TIMEOUT_MS    60000
#define WORD_STEP     0xd1b54a32d192ed03ull
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Codes bodies return (the harness's own are 200 and up). */
enum {
	E_CALL = 10,  /* a call returned the wrong code */
	E_STATUS,     /* a status field is wrong */
	E_DATA,       /* received bytes are wrong */
	E_GUARD,      /* bytes around a receive buffer changed */
	E_SEND,       /* a send buffer changed */
	E_NOMEM,      /* the test's own malloc failed */
	E_SYMALLOC,   /* shmcoll_malloc failed */
	E_REQ,        /* a request handle is not what it should be */
	E_MSG,        /* shmcoll_last_error does not say what it should */
	E_ORDER,      /* a message arrived out of order, twice, or not at all */
	E_COLL,       /* a collective beside point-to-point gave a wrong result */
	E_NO_CMA = 99 /* SHMCOLL_P2P_CMA_MIN is set, siblings may read each other, yet the
	               * communicator has no single copies */
};

/* What a body is told; the same on every rank. */
struct targ {
	size_t eager; /* the communicator's eager size (eager_of) */
	int mode;     /* what the body does, where it has choices */
	int cma;      /* SHMCOLL_P2P_CMA_MIN is set: the communicator must have single copies */
	uint64_t seed;
	int nmsgs;
	_Atomic int *flag; /* shared by the ranks (MAP_SHARED), where a body needs it */
};

/* ---- what every rank can derive ---- */

static int fail(int code, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(int code, int rank, const char *fmt, ...)
{
	char msg[640];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "FAIL p2p rank %d: %s\n", rank, msg);
	return code;
}

/* A call that must return want; anything else ends the body with E_CALL (the names c and
 * rank are the body's). */
#define CALL(want, expr)                                                                           \
	do {                                                                                       \
		int got_ = (expr);                                                                 \
		if (got_ != (want))                                                                \
			return fail(E_CALL, rank, "line %d: %s returned %d (%s), want %d: %s",     \
			            __LINE__, #expr, got_, shmcoll_strerror(got_), (int)(want),    \
			            shmcoll_last_error(c));                                        \
	} while (0)

/* The key of message msg from src to dst in one test (salt): its every byte. */
static uint64_t key_of(uint64_t salt, int src, int dst, uint64_t msg)
{
	return th_hash(th_mix(salt + 0x51ed27), src, ((uint64_t)(unsigned)dst << 32) ^ msg);
}

static void gen(void *dst, size_t n, uint64_t key)
{
	unsigned char *p = dst;
	uint64_t v;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		v = th_mix(key + (i / 8) * WORD_STEP);
		memcpy(p + i, &v, 8);
	}
	if (i < n) {
		v = th_mix(key + (i / 8) * WORD_STEP);
		memcpy(p + i, &v, n - i);
	}
}

/* The first byte of p[0, n) that is not gen(key)'s, or SIZE_MAX. */
static size_t first_bad(const void *src, size_t n, uint64_t key)
{
	const unsigned char *p = src;
	unsigned char w[8];
	size_t i, k, len;
	uint64_t v;

	for (i = 0; i < n; i += 8) {
		v = th_mix(key + (i / 8) * WORD_STEP);
		memcpy(w, &v, 8);
		len = n - i < 8 ? n - i : 8;
		if (memcmp(p + i, w, len))
			for (k = 0; k < len; k++)
				if (p[i + k] != w[k])
					return i + k;
	}
	return SIZE_MAX;
}

/* A receive buffer of cap bytes with GUARD canary bytes on each side. */
struct gbuf {
	unsigned char *base, *p;
	size_t cap;
	int owned; /* base is the gbuf's (malloc), not memory it was placed in */
};

static unsigned char canary(size_t i)
{
	return (unsigned char)(0xa7 ^ (i * 0x3d));
}

static void gb_reset(struct gbuf *g)
{
	size_t i;

	for (i = 0; i < g->cap + 2 * GUARD; i++)
		g->base[i] = canary(i);
}

static int gb_new(struct gbuf *g, size_t cap)
{
	g->cap = cap;
	g->owned = 1;
	g->base = malloc(cap + 2 * GUARD);
	g->p = g->base ? g->base + GUARD : NULL;
	if (!g->base)
		return -1;
	gb_reset(g);
	return 0;
}

/* In memory of the caller's (mem holds cap + 2 * GUARD bytes). */
static void gb_at(struct gbuf *g, void *mem, size_t cap)
{
	g->cap = cap;
	g->owned = 0;
	g->base = mem;
	g->p = g->base + GUARD;
	gb_reset(g);
}

static void gb_free(struct gbuf *g)
{
	if (g->owned)
		free(g->base);
	g->base = g->p = NULL;
}

/* got bytes of message key at the start of the buffer, canaries everywhere else. */
static int gb_check(const struct gbuf *g, size_t got, uint64_t key, int rank, const char *what)
{
	size_t i, bad = first_bad(g->p, got, key);

	if (bad != SIZE_MAX)
		return fail(E_DATA, rank, "%s: byte %zu of the %zu received is wrong", what, bad,
		            got);
	for (i = 0; i < GUARD; i++)
		if (g->base[i] != canary(i))
			return fail(E_GUARD, rank, "%s: byte %d before the buffer was written",
			            what, (int)i - GUARD);
	for (i = GUARD + got; i < g->cap + 2 * GUARD; i++)
		if (g->base[i] != canary(i))
			return fail(E_GUARD, rank,
			            "%s: byte %zu was written (%zu received, capacity %zu)", what,
			            i - GUARD, got, g->cap);
	return 0;
}

static int st_check(int rank, const char *what, const shmcoll_status *st, int src, int tag,
                    size_t count, size_t bytes, size_t total, int error)
{
	if (st->source != src || st->tag != tag || st->count != count || st->bytes != bytes ||
	    st->total != total || st->error != error)
		return fail(E_STATUS, rank,
		            "%s: status {source %d, tag %d, count %zu, bytes %zu, total %zu, error "
		            "%d}, want {%d, %d, %zu, %zu, %zu, %d}",
		            what, st->source, st->tag, st->count, st->bytes, st->total, st->error,
		            src, tag, count, bytes, total, error);
	return 0;
}

static void st_poison(shmcoll_status *st)
{
	memset(st, 0xa5, sizeof(*st));
}

static int st_poisoned(const shmcoll_status *st)
{
	shmcoll_status p;

	st_poison(&p);
	return !memcmp(st, &p, sizeof(p));
}

/* A checked allreduce: the sum of rank + 1 over P ranks. */
static int sum_check(shmcoll_comm *c, int rank)
{
	int64_t x = rank + 1, y = -1;
	int P = shmcoll_comm_size(c);

	CALL(0, shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT64, SHMCOLL_SUM, c));
	if (y != (int64_t)P * (P + 1) / 2)
		return fail(E_COLL, rank, "allreduce: %lld, want %d", (long long)y,
		            P * (P + 1) / 2);
	return 0;
}

/* ---- the parent's side ---- */

/* The eager size of a communicator of P ranks in an arena of arena bytes: as
 * lib/core/p2p.c sets it from the ring the layout gives (a quarter of it less a frame
 * header, at most EAGER_DEFAULT), lowered by SHMCOLL_P2P_EAGER. */
static size_t eager_of(int P, size_t arena)
{
	struct shmcoll_layout lay;
	const char *env = getenv("SHMCOLL_P2P_EAGER");
	char err[256];
	size_t e;

	cr_assert(shmcoll__arena_layout((uint32_t)P, arena, &lay, err, sizeof(err)) == 0,
	          "layout of %zu bytes for P=%d: %s", arena, P, err);
	e = (size_t)lay.ring_bytes / 4 - FRAME_HDR;
	if (e > EAGER_DEFAULT)
		e = EAGER_DEFAULT;
	if (env && *env && (size_t)strtoull(env, NULL, 10) < e)
		e = (size_t)strtoull(env, NULL, 10);
	return e;
}

static th_opts opts_for(size_t arena)
{
	th_opts o = {.arena_bytes = arena, .timeout_ms = TIMEOUT_MS, .wall_ms = 150000};

	return o;
}

static void run_with(const char *what, int P, int threads, th_body_fn body, struct targ *a,
                     size_t arena)
{
	th_opts o = opts_for(arena);
	th_result res;
	int i;

	a->eager = eager_of(P, arena);
	if (TH_UNDER_TSAN && !threads)
		return;
	if (threads)
		th_run_threads(P, body, a, &o, &res);
	else
		th_run_ranks(P, body, a, &o, &res);
	for (i = 0; i < P; i++)
		cr_assert(
		    res.rank[i].code != E_NO_CMA,
		    "%s, P=%d: SHMCOLL_P2P_CMA_MIN is set and sibling processes may read each "
		    "other here, but the communicator has no single copies: %s",
		    what, P, res.summary);
	cr_assert(res.ok, "%s, P=%d, %s, eager %zu: %s", what, P, threads ? "threads" : "processes",
	          a->eager, res.summary);
}

/* ---- 1. every size, in a ring and in pairs ---- */

enum { RING, PAIRS };

static size_t size_list(size_t eager, size_t *s)
{
	static const size_t fixed[] = {0, 1, 7, 8, 31, 32, 33, 100, 4095};
	size_t n = 0, i;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		s[n++] = fixed[i];
	if (eager)
		s[n++] = eager - 1;
	s[n++] = eager;
	s[n++] = eager + 1;
	s[n++] = 65536 + 13;
	s[n++] = MIB + 5;
	s[n++] = 3 * MIB + 17;
	return n;
}

/* Each size in turn: ring (rank r sends to r + 1, receives from r - 1) or pairs (r and
 * r ^ 1 exchange; a rank without a partner sends to itself), by three ways of calling:
 * irecv + send + wait, isend + recv + wait, irecv + isend + waitall. */
static int sizes_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	int P = shmcoll_comm_size(c), dest, src, tag, rc, e;
	size_t sizes[16], ns = size_list(a->eager, sizes), k, n;
	shmcoll_request *reqs[2];
	shmcoll_status st, sts[2];
	unsigned char *sb;
	struct gbuf g;
	char what[96];

	if (a->mode == RING) {
		dest = (rank + 1) % P;
		src = (rank + P - 1) % P;
	} else {
		dest = src = (rank ^ 1) < P ? rank ^ 1 : rank;
	}
	for (k = 0; k < ns; k++) {
		n = sizes[k];
		tag = 100 + (int)k;
		snprintf(what, sizeof(what), "%s P=%d, %zu bytes %d -> %d, way %zu",
		         a->mode == RING ? "ring" : "pairs", P, n, src, rank, k % 3);
		th_breadcrumb("%s", what);
		sb = malloc(n + 1);
		if (!sb || gb_new(&g, n))
			return E_NOMEM;
		gen(sb, n, key_of(k, rank, dest, 0));
		st_poison(&st);
		switch (k % 3) {
		case 0:
			CALL(0, shmcoll_irecv(g.p, n, SHMCOLL_UINT8, src, tag, c, &reqs[0]));
			CALL(0, shmcoll_send(sb, n, SHMCOLL_UINT8, dest, tag, c));
			CALL(0, shmcoll_wait(&reqs[0], &st));
			reqs[1] = NULL;
			break;
		case 1:
			CALL(0, shmcoll_isend(sb, n, SHMCOLL_UINT8, dest, tag, c, &reqs[1]));
			CALL(0, shmcoll_recv(g.p, n, SHMCOLL_UINT8, src, tag, c, &st));
			CALL(0, shmcoll_wait(&reqs[1], NULL));
			reqs[0] = NULL;
			break;
		default:
			CALL(0, shmcoll_irecv(g.p, n, SHMCOLL_UINT8, src, tag, c, &reqs[0]));
			CALL(0, shmcoll_isend(sb, n, SHMCOLL_UINT8, dest, tag, c, &reqs[1]));
			st_poison(&sts[1]);
			CALL(0, shmcoll_waitall(2, reqs, sts));
			st = sts[0];
			if (sts[1].error != 0)
				return fail(E_STATUS, rank, "%s: the send's error field is %d",
				            what, sts[1].error);
			break;
		}
		if (reqs[0] || reqs[1])
			return fail(E_REQ, rank, "%s: a completed request is not NULL", what);
		rc = st_check(rank, what, &st, src, tag, n, n, n, 0);
		e = gb_check(&g, n, key_of(k, src, rank, 0), rank, what);
		rc = rc ? rc : e;
		if (!rc && first_bad(sb, n, key_of(k, rank, dest, 0)) != SIZE_MAX)
			rc = fail(E_SEND, rank, "%s: the send buffer changed", what);
		free(sb);
		gb_free(&g);
		if (rc)
			return rc;
	}
	return sum_check(c, rank);
}

#define ARENA_SIZES (8 * MIB)

Test(p2p, sizes_ring_processes, .timeout = 300)
{
	struct targ a = {.mode = RING};
	static const int Ps[] = {1, 2, 3, 4, 8};

	TH_PROCESSES_ONLY();
	for (size_t i = 0; i < sizeof(Ps) / sizeof(Ps[0]); i++)
		run_with("sizes, ring", Ps[i], 0, sizes_body, &a, ARENA_SIZES);
}

Test(p2p, sizes_pairs_processes, .timeout = 300)
{
	struct targ a = {.mode = PAIRS};
	static const int Ps[] = {2, 3, 4, 8};

	TH_PROCESSES_ONLY();
	for (size_t i = 0; i < sizeof(Ps) / sizeof(Ps[0]); i++)
		run_with("sizes, pairs", Ps[i], 0, sizes_body, &a, ARENA_SIZES);
}

Test(p2p, sizes_threads, .timeout = 300)
{
	struct targ a = {.mode = RING};

	run_with("sizes, ring", 2, 1, sizes_body, &a, ARENA_SIZES);
	run_with("sizes, ring", 4, 1, sizes_body, &a, ARENA_SIZES);
	a.mode = PAIRS;
	run_with("sizes, pairs", 2, 1, sizes_body, &a, ARENA_SIZES);
	run_with("sizes, pairs", 4, 1, sizes_body, &a, ARENA_SIZES);
}

/* SHMCOLL_P2P_EAGER lowers the eager size: the sizes around it move with it. */
Test(p2p, sizes_lowered_eager, .timeout = 300)
{
	struct targ a = {.mode = RING};

	cr_assert(setenv("SHMCOLL_P2P_EAGER", "1000", 1) == 0);
	run_with("sizes, ring, SHMCOLL_P2P_EAGER=1000", 2, 0, sizes_body, &a, ARENA_SIZES);
	cr_assert_eq(a.eager, 1000);
	run_with("sizes, ring, SHMCOLL_P2P_EAGER=1000", 3, 0, sizes_body, &a, ARENA_SIZES);
	run_with("sizes, pairs, SHMCOLL_P2P_EAGER=1000", 2, 1, sizes_body, &a, ARENA_SIZES);
	/* 0: every message of a byte or more by rendezvous. */
	cr_assert(setenv("SHMCOLL_P2P_EAGER", "0", 1) == 0);
	run_with("sizes, ring, SHMCOLL_P2P_EAGER=0", 3, 0, sizes_body, &a, ARENA_SIZES);
	cr_assert_eq(a.eager, 0);
	run_with("sizes, pairs, SHMCOLL_P2P_EAGER=0", 2, 1, sizes_body, &a, ARENA_SIZES);
	unsetenv("SHMCOLL_P2P_EAGER");
}

/* ---- 2. element types ---- */

/* One message of rank 0's, received by rank 1 with another dtype and capacity. */
struct dcase {
	shmcoll_dtype sdt;
	size_t scount; /* elements of sdt sent */
	shmcoll_dtype rdt;
	size_t rcount; /* capacity, in elements of rdt */
};

static int dtypes_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	size_t N = a->mode ? 40000 : 3; /* 0: eager; 1: rendezvous (160000 bytes and more) */
	const struct dcase cases[] = {
	    {SHMCOLL_INT32, N, SHMCOLL_UINT8, 4 * N},             /* as bytes */
	    {SHMCOLL_UINT8, 4 * N, SHMCOLL_INT32, N},             /* bytes as int32 */
	    {SHMCOLL_UINT8, 4 * N + 3, SHMCOLL_INT32, N + 1},     /* not whole elements */
	    {SHMCOLL_UINT8, 4 * N + 3, SHMCOLL_INT32, N},         /* cut at whole elements */
	    {SHMCOLL_FLOAT64, N, SHMCOLL_FLOAT16, 4 * N},         /* 8-byte as 2-byte */
	    {SHMCOLL_INT8, 13, SHMCOLL_INT64, 1},                 /* 13 bytes into 8 */
	    {SHMCOLL_INT64, 0, SHMCOLL_INT64, 5},                 /* nothing */
	    {SHMCOLL_BFLOAT16, 2 * N + 1, SHMCOLL_UINT32, N + 1}, /* 4N + 2 bytes in 4N + 4 */
	};
	size_t k, sbytes, rcap, got, es;
	shmcoll_status st;
	unsigned char *sb;
	struct gbuf g;
	int rc, tag, want;
	char what[96];

	if (shmcoll_comm_size(c) != 2)
		return E_CALL;
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct dcase *d = &cases[k];

		tag = 200 + (int)k;
		sbytes = d->scount * th_dtype_size(d->sdt);
		es = th_dtype_size(d->rdt);
		rcap = d->rcount * es;
		snprintf(what, sizeof(what), "dtypes: %zu x %s received as %zu x %s", d->scount,
		         th_dtype_name(d->sdt), d->rcount, th_dtype_name(d->rdt));
		th_breadcrumb("%s", what);
		if (rank == 0) {
			sb = malloc(sbytes + 1);
			if (!sb)
				return E_NOMEM;
			gen(sb, sbytes, key_of(2, 0, 1, k));
			CALL(0, shmcoll_send(sb, d->scount, d->sdt, 1, tag, c));
			free(sb);
			continue;
		}
		if (gb_new(&g, rcap))
			return E_NOMEM;
		st_poison(&st);
		want = sbytes > rcap ? -EMSGSIZE : 0;
		CALL(want, shmcoll_recv(g.p, d->rcount, d->rdt, 0, tag, c, &st));
		got = sbytes < rcap ? sbytes : rcap;
		rc = st_check(rank, what, &st, 0, tag, got / es, got, sbytes, want);
		if (!rc)
			rc = gb_check(&g, got, key_of(2, 0, 1, k), rank, what);
		gb_free(&g);
		if (rc)
			return rc;
	}
	return sum_check(c, rank);
}

Test(p2p, dtypes, .timeout = 120)
{
	struct targ a = {.mode = 0};

	run_with("dtypes, eager", 2, 0, dtypes_body, &a, 4 * MIB);
	run_with("dtypes, eager", 2, 1, dtypes_body, &a, 4 * MIB);
	a.mode = 1;
	run_with("dtypes, rendezvous", 2, 0, dtypes_body, &a, 4 * MIB);
	run_with("dtypes, rendezvous", 2, 1, dtypes_body, &a, 4 * MIB);
}

/* ---- 3. ordering ---- */

#define ORD_N 48

/* Message j of the one-tag stream: eager and rendezvous mixed; kind 10 from the heap. */
static size_t ord_size(size_t eager, int j)
{
	switch (j % 12) {
	case 0:
		return 0;
	case 1:
		return 5;
	case 2:
		return eager;
	case 3:
		return eager + 1;
	case 4:
		return 100 + (size_t)j;
	case 5:
		return 70000 + (size_t)j;
	case 6:
		return 3;
	case 7:
		return 20000 + (size_t)j;
	case 8:
		return eager - 1;
	case 9:
		return 1000;
	case 10:
		return 150000 + (size_t)j;
	default:
		return 64;
	}
}

static int ord_heap(int j)
{
	return j % 12 == 10;
}

/* Rank 0 sends ORD_N messages (isend, all outstanding) at once; rank 1 receives them one at
 * a time into a buffer that holds any. salt tells the streams apart; tagged: the tag is
 * j % 5 and rank 1 receives with SHMCOLL_ANY_TAG (every other one with
 * SHMCOLL_ANY_SOURCE too), else one tag and a specific receive. */
static int ord_stream(shmcoll_comm *c, int rank, const struct targ *a, uint64_t salt, int tagged,
                      unsigned char *heap, unsigned char *area, struct gbuf *g)
{
	shmcoll_request *reqs[ORD_N];
	shmcoll_status sts[ORD_N], st;
	size_t off = 0, hoff = 0, n;
	int j, rc, tag;
	char what[96];

	for (j = 0; j < ORD_N; j++) {
		n = ord_size(a->eager, j);
		tag = tagged ? j % 5 : 7;
		if (rank == 0) {
			unsigned char *p = ord_heap(j) ? heap + hoff : area + off;

			if (ord_heap(j))
				hoff += n;
			else
				off += n;
			gen(p, n, key_of(salt, 0, 1, (uint64_t)j));
			CALL(0, shmcoll_isend(p, n, SHMCOLL_UINT8, 1, tag, c, &reqs[j]));
			continue;
		}
		snprintf(what, sizeof(what), "order (salt %llu) message %d, %zu bytes",
		         (unsigned long long)salt, j, n);
		th_breadcrumb("%s", what);
		gb_reset(g);
		st_poison(&st);
		CALL(0, shmcoll_recv(g->p, g->cap, SHMCOLL_UINT8,
		                     tagged && (j & 1) ? SHMCOLL_ANY_SOURCE : 0,
		                     tagged ? SHMCOLL_ANY_TAG : 7, c, &st));
		rc = st_check(rank, what, &st, 0, tag, n, n, n, 0);
		if (!rc)
			rc = gb_check(g, n, key_of(salt, 0, 1, (uint64_t)j), rank, what);
		if (rc)
			return rc;
	}
	if (rank == 0) {
		for (j = 0; j < ORD_N; j++)
			st_poison(&sts[j]);
		CALL(0, shmcoll_waitall(ORD_N, reqs, sts));
		for (j = 0; j < ORD_N; j++)
			if (reqs[j] || sts[j].error)
				return fail(E_REQ, rank, "order: send %d: request %p, error %d", j,
				            (void *)reqs[j], sts[j].error);
	}
	return 0;
}

/* Two messages with different tags, received in the other order: independent streams. */
static int ord_two_tags(shmcoll_comm *c, int rank, uint64_t salt, size_t na, size_t nb,
                        unsigned char *bufa, unsigned char *bufb)
{
	shmcoll_request *reqs[2];
	shmcoll_status st;
	struct gbuf g;
	int rc;
	char what[96];

	snprintf(what, sizeof(what), "two tags: A %zu bytes then B %zu bytes, received B first", na,
	         nb);
	th_breadcrumb("%s", what);
	if (rank == 0) {
		gen(bufa, na, key_of(salt, 0, 1, 1));
		gen(bufb, nb, key_of(salt, 0, 1, 2));
		CALL(0, shmcoll_isend(bufa, na, SHMCOLL_UINT8, 1, 21, c, &reqs[0]));
		CALL(0, shmcoll_isend(bufb, nb, SHMCOLL_UINT8, 1, 22, c, &reqs[1]));
		CALL(0, shmcoll_waitall(2, reqs, NULL));
		return 0;
	}
	if (gb_new(&g, nb))
		return E_NOMEM;
	CALL(0, shmcoll_recv(g.p, nb, SHMCOLL_UINT8, 0, 22, c, &st));
	rc = st_check(rank, what, &st, 0, 22, nb, nb, nb, 0);
	if (!rc)
		rc = gb_check(&g, nb, key_of(salt, 0, 1, 2), rank, what);
	gb_free(&g);
	if (rc)
		return rc;
	if (gb_new(&g, na))
		return E_NOMEM;
	CALL(0, shmcoll_recv(g.p, na, SHMCOLL_UINT8, 0, 21, c, &st));
	rc = st_check(rank, what, &st, 0, 21, na, na, na, 0);
	if (!rc)
		rc = gb_check(&g, na, key_of(salt, 0, 1, 1), rank, what);
	gb_free(&g);
	return rc;
}

/* Receives posted in an order other than the messages': tags 3, 2, 1 posted, then sent 1,
 * 2, 3; three receives of one tag take its three messages in order; a SHMCOLL_ANY_TAG
 * receive posted before a tag-6 one takes the first tag-6 message. */
#define POSTED_N 8
static int ord_posted(shmcoll_comm *c, int rank, const struct targ *a, unsigned char *heap,
                      unsigned char *area)
{
	/* In the order rank 1 posts them. */
	static const int post_tag[POSTED_N] = {3, 2, 1, 5, 5, 5, SHMCOLL_ANY_TAG, 6};
	/* The message each receive must get: its index in the send order below. */
	static const int gets[POSTED_N] = {2, 1, 0, 3, 4, 5, 6, 7};
	static const int send_tag[POSTED_N] = {1, 2, 3, 5, 5, 5, 6, 6};
	size_t sizes[POSTED_N] = {70000, 10, 30000, 10, a->eager + 1, 0, 100, 70001};
	size_t off = 0, cap = 70001;
	shmcoll_request *reqs[POSTED_N];
	shmcoll_status sts[POSTED_N];
	struct gbuf g[POSTED_N];
	int i, m, rc = 0;
	char what[96];

	if (rank == 1)
		for (i = 0; i < POSTED_N; i++) {
			if (gb_new(&g[i], cap))
				return E_NOMEM;
			st_poison(&sts[i]);
			CALL(0, shmcoll_irecv(g[i].p, cap, SHMCOLL_UINT8, 0, post_tag[i], c,
			                      &reqs[i]));
		}
	/* The receives are posted before any of the messages is sent. */
	CALL(0, shmcoll_barrier(c));
	if (rank == 0) {
		for (i = 0; i < POSTED_N; i++) {
			/* The third from the heap: a receive posted long before its RTS. */
			unsigned char *p = i == 2 ? heap : area + off;

			off += sizes[i];
			gen(p, sizes[i], key_of(5, 0, 1, (uint64_t)i));
			CALL(0, shmcoll_send(p, sizes[i], SHMCOLL_UINT8, 1, send_tag[i], c));
		}
		return 0;
	}
	CALL(0, shmcoll_waitall(POSTED_N, reqs, sts));
	for (i = 0; i < POSTED_N && !rc; i++) {
		m = gets[i];
		snprintf(what, sizeof(what), "posted receive %d (tag %d) gets message %d", i,
		         post_tag[i], m);
		rc = st_check(rank, what, &sts[i], 0, send_tag[m], sizes[m], sizes[m], sizes[m], 0);
		if (!rc)
			rc = gb_check(&g[i], sizes[m], key_of(5, 0, 1, (uint64_t)m), rank, what);
	}
	for (i = 0; i < POSTED_N; i++)
		gb_free(&g[i]);
	return rc;
}

static int order_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	size_t area_bytes = 0, heap_bytes = 0, maxn = 0, n;
	unsigned char *heap, *area;
	struct gbuf g;
	int j, rc;

	if (shmcoll_comm_size(c) != 2)
		return E_CALL;
	for (j = 0; j < ORD_N; j++) {
		n = ord_size(a->eager, j);
		*(ord_heap(j) ? &heap_bytes : &area_bytes) += n;
		maxn = n > maxn ? n : maxn;
	}
	heap = shmcoll_malloc(c, heap_bytes); /* collective: rank 1's stays unused */
	area = malloc(area_bytes + 200000);
	if (!heap)
		return fail(E_SYMALLOC, rank, "shmcoll_malloc(%zu): %s", heap_bytes,
		            shmcoll_last_error(c));
	if (!area || gb_new(&g, maxn))
		return E_NOMEM;
	rc = ord_stream(c, rank, a, 1, 0, heap, area, &g);
	if (!rc)
		rc = shmcoll_barrier(c) ? E_CALL : 0;
	if (!rc)
		rc = ord_stream(c, rank, a, 2, 1, heap, area, &g);
	if (!rc)
		rc = shmcoll_barrier(c) ? E_CALL : 0;
	/* Rendezvous then eager, eager then rendezvous, both rendezvous (one from the heap),
	 * both eager. */
	if (!rc)
		rc = ord_two_tags(c, rank, 3, 100000, 10, area, area + 100000);
	if (!rc)
		rc = ord_two_tags(c, rank, 4, 10, 100000, area, area + 100000);
	if (!rc)
		rc = ord_two_tags(c, rank, 5, 150000, 70000, heap, area);
	if (!rc)
		rc = ord_two_tags(c, rank, 6, a->eager, a->eager - 1, area, area + a->eager);
	if (!rc)
		rc = shmcoll_barrier(c) ? E_CALL : 0;
	if (!rc)
		rc = ord_posted(c, rank, a, heap, area);
	gb_free(&g);
	free(area);
	if (rc)
		return rc;
	CALL(0, shmcoll_free(c, heap));
	return sum_check(c, rank);
}

Test(p2p, ordering, .timeout = 200)
{
	struct targ a = {0};

	run_with("ordering", 2, 0, order_body, &a, 8 * MIB);
	run_with("ordering", 2, 1, order_body, &a, 8 * MIB);
	/* Small rings: few frames fit, sends queue behind each other. */
	run_with("ordering, small arena", 2, 0, order_body, &a, 2 * MIB);
}

/* ---- 4. SHMCOLL_ANY_SOURCE ---- */

#define AS_K 12

static size_t as_size(size_t eager, int src, int j)
{
	switch ((src + j) % 6) {
	case 0:
		return 10 + (size_t)j;
	case 1:
		return eager + 1;
	case 2:
		return 0;
	case 3:
		return 3000;
	case 4:
		return 70000 + (size_t)src;
	default:
		return eager;
	}
}

static int as_tag(int src, int j)
{
	return (src * 3 + j) % 4;
}

/* Every rank (rank 0 too, to itself) sends AS_K messages to rank 0, which receives them
 * all with SHMCOLL_ANY_SOURCE and SHMCOLL_ANY_TAG (blocking sends: a rendezvous one
 * waits for its receive); then AS_K more each with tags 50 and 51 alternating (isend, all
 * outstanding), which rank 0 receives with SHMCOLL_ANY_SOURCE, first every tag-50 one,
 * then every tag-51 one. Per source, each arrives in the order sent, and once. */
static int any_source_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	int P = shmcoll_comm_size(c), j, i, src, rc, t, round;
	int next[TH_MAX_RANKS] = {0};
	shmcoll_request *reqs[AS_K], *r;
	size_t cap = 70000 + TH_MAX_RANKS, n, off;
	unsigned char *sb;
	shmcoll_status st;
	struct gbuf g;
	char what[96];

	sb = malloc((size_t)AS_K * cap);
	if (!sb || gb_new(&g, cap))
		return E_NOMEM;
	/* Round 1: blocking sends; rank 0 sends its own to itself first. */
	for (j = 0; j < AS_K; j++) {
		n = as_size(a->eager, rank, j);
		gen(sb, n, key_of(3, rank, 0, (uint64_t)j));
		CALL(0, shmcoll_send(sb, n, SHMCOLL_UINT8, 0, as_tag(rank, j), c));
	}
	if (rank == 0) {
		for (i = 0; i < P * AS_K; i++) {
			gb_reset(&g);
			st_poison(&st);
			if (i & 1) {
				CALL(0, shmcoll_irecv(g.p, cap, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE,
				                      SHMCOLL_ANY_TAG, c, &r));
				CALL(0, shmcoll_wait(&r, &st));
			} else {
				CALL(0, shmcoll_recv(g.p, cap, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE,
				                     SHMCOLL_ANY_TAG, c, &st));
			}
			src = st.source;
			if (src < 0 || src >= P || next[src] >= AS_K)
				return fail(E_ORDER, rank,
				            "any source: receive %d came from rank %d (next %d)", i,
				            src, src >= 0 && src < P ? next[src] : -1);
			j = next[src]++;
			n = as_size(a->eager, src, j);
			snprintf(what, sizeof(what),
			         "any source: receive %d, message %d of rank %d", i, j, src);
			rc = st_check(rank, what, &st, src, as_tag(src, j), n, n, n, 0);
			if (!rc)
				rc = gb_check(&g, n, key_of(3, src, 0, (uint64_t)j), rank, what);
			if (rc)
				return rc;
		}
		for (src = 0; src < P; src++)
			if (next[src] != AS_K)
				return fail(E_ORDER, rank,
				            "any source: %d messages of rank %d, want %d",
				            next[src], src, AS_K);
	}
	/* Round 2 (once round 1 is all in): isend, every one outstanding; receives by tag. */
	CALL(0, shmcoll_barrier(c));
	for (j = 0, off = 0; j < AS_K; j++) {
		n = as_size(a->eager, rank, j);
		gen(sb + off, n, key_of(4, rank, 0, (uint64_t)j));
		CALL(0, shmcoll_isend(sb + off, n, SHMCOLL_UINT8, 0, 50 + j % 2, c, &reqs[j]));
		off += n;
	}
	if (rank == 0)
		for (round = 0; round < 2; round++) {
			for (src = 0; src < P; src++)
				next[src] = round;
			for (i = 0; i < P * AS_K / 2; i++) {
				gb_reset(&g);
				st_poison(&st);
				CALL(0, shmcoll_recv(g.p, cap, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE,
				                     50 + round, c, &st));
				src = st.source;
				if (src < 0 || src >= P || next[src] >= AS_K)
					return fail(
					    E_ORDER, rank,
					    "any source, tag %d: receive %d came from rank %d",
					    50 + round, i, src);
				j = next[src];
				next[src] += 2;
				n = as_size(a->eager, src, j);
				t = 50 + round;
				snprintf(what, sizeof(what),
				         "any source, tag %d: receive %d, message %d of rank %d", t,
				         i, j, src);
				rc = st_check(rank, what, &st, src, t, n, n, n, 0);
				if (!rc)
					rc = gb_check(&g, n, key_of(4, src, 0, (uint64_t)j), rank,
					              what);
				if (rc)
					return rc;
			}
		}
	CALL(0, shmcoll_waitall(AS_K, reqs, NULL));
	free(sb);
	gb_free(&g);
	return sum_check(c, rank);
}

Test(p2p, any_source, .timeout = 200)
{
	struct targ a = {0};

	run_with("any source", 4, 0, any_source_body, &a, 4 * MIB);
	run_with("any source", 8, 0, any_source_body, &a, 8 * MIB);
	run_with("any source", 3, 1, any_source_body, &a, 4 * MIB);
}

/* ---- 5. truncation ---- */

struct tcase {
	size_t msg, cap;
	int heap;  /* rank 0 sends from its symmetric heap */
	int nonbl; /* isend / irecv + wait instead of send / recv */
};

/* Rank 0 sends each message, rank 1 receives it into less room: -EMSGSIZE, the first cap
 * bytes written and nothing beyond, the status says what arrived; the sender succeeds and
 * the communicator stays usable. */
static int truncation_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	const struct tcase cases[] = {
	    {100, 60, 0, 0},
	    {100, 0, 0, 1},
	    {a->eager, a->eager - 1, 0, 0},
	    {a->eager + 1, a->eager, 0, 1},
	    {200000, 150001, 0, 0},
	    {200000, 150001, 0, 1},
	    {200000, 0, 0, 0},
	    {MIB + 5, 65536 + 13, 0, 0},
	    {200000, 150001, 1, 0},
	    {200000, 150001, 1, 1},
	    {200000, 0, 1, 0},
	};
	size_t k, ncase = sizeof(cases) / sizeof(cases[0]);
	shmcoll_request *r;
	shmcoll_status st;
	unsigned char *heap, *sb, *p;
	struct gbuf g;
	int rc, tag;
	char what[128];

	if (shmcoll_comm_size(c) != 2)
		return E_CALL;
	if (a->cma && !shmcoll__probe_cma(c))
		return E_NO_CMA;
	heap = shmcoll_malloc(c, 200000);
	sb = malloc(MIB + 5);
	if (!heap)
		return fail(E_SYMALLOC, rank, "shmcoll_malloc: %s", shmcoll_last_error(c));
	if (!sb)
		return E_NOMEM;
	for (k = 0; k < ncase; k++) {
		const struct tcase *t = &cases[k];

		tag = 30 + (int)k;
		snprintf(what, sizeof(what), "truncation: %zu bytes%s into %zu (%s)", t->msg,
		         t->heap ? " from the heap" : "", t->cap,
		         t->nonbl ? "isend/irecv" : "send/recv");
		th_breadcrumb("%s", what);
		if (rank == 0) {
			p = t->heap ? heap : sb;
			gen(p, t->msg, key_of(6, 0, 1, k));
			if (t->nonbl) {
				CALL(0, shmcoll_isend(p, t->msg, SHMCOLL_UINT8, 1, tag, c, &r));
				CALL(0, shmcoll_wait(&r, NULL));
			} else {
				CALL(0, shmcoll_send(p, t->msg, SHMCOLL_UINT8, 1, tag, c));
			}
		} else {
			if (gb_new(&g, t->cap))
				return E_NOMEM;
			st_poison(&st);
			if (t->nonbl) {
				CALL(0, shmcoll_irecv(g.p, t->cap, SHMCOLL_UINT8, 0, tag, c, &r));
				CALL(-EMSGSIZE, shmcoll_wait(&r, &st));
			} else {
				CALL(-EMSGSIZE,
				     shmcoll_recv(g.p, t->cap, SHMCOLL_UINT8, 0, tag, c, &st));
				if (!shmcoll_last_error(c)[0])
					return fail(E_MSG, rank, "%s: no message after -EMSGSIZE",
					            what);
			}
			rc = st_check(rank, what, &st, 0, tag, t->cap, t->cap, t->msg, -EMSGSIZE);
			if (!rc)
				rc = gb_check(&g, t->cap, key_of(6, 0, 1, k), rank, what);
			gb_free(&g);
			if (rc)
				return rc;
		}
		/* Still usable: a collective, and the next message. */
		rc = sum_check(c, rank);
		if (rc)
			return rc;
	}
	/* And a message the other way, whole. */
	if (gb_new(&g, 1000))
		return E_NOMEM;
	if (rank == 1) {
		gen(sb, 1000, key_of(7, 1, 0, 0));
		CALL(0, shmcoll_send(sb, 1000, SHMCOLL_UINT8, 0, 99, c));
	} else {
		CALL(0, shmcoll_recv(g.p, 1000, SHMCOLL_UINT8, 1, 99, c, &st));
		rc = gb_check(&g, 1000, key_of(7, 1, 0, 0), rank, "after the truncations");
		if (rc)
			return rc;
	}
	gb_free(&g);
	free(sb);
	CALL(0, shmcoll_free(c, heap));
	return sum_check(c, rank);
}

Test(p2p, truncation, .timeout = 120)
{
	struct targ a = {0};

	run_with("truncation", 2, 0, truncation_body, &a, 4 * MIB);
	run_with("truncation", 2, 1, truncation_body, &a, 4 * MIB);
}

Test(p2p, truncation_cma, .timeout = 120)
{
	struct targ a = {.cma = 1};

	TH_PROCESSES_ONLY();
	if (!th_siblings_can_read())
		cr_skip_test("process_vm_readv between sibling processes is not allowed here "
		             "(Yama ptrace_scope, seccomp): no single-copy rendezvous to truncate");
	cr_assert(setenv("SHMCOLL_P2P_CMA_MIN", "1", 1) == 0);
	run_with("truncation, SHMCOLL_P2P_CMA_MIN=1", 2, 0, truncation_body, &a, 4 * MIB);
	unsetenv("SHMCOLL_P2P_CMA_MIN");
}

/* ---- 6. messages to self ---- */

static int self_one(shmcoll_comm *c, int rank, size_t n, int way, int tag)
{
	shmcoll_request *rs, *rr, *reqs[2];
	shmcoll_status st, sts[2];
	size_t cap = way == 5 ? n / 2 : n;
	int want = cap < n ? -EMSGSIZE : 0, rc;
	unsigned char *sb = malloc(n + 1);
	uint64_t key = key_of(8, rank, rank, (uint64_t)tag);
	struct gbuf g;
	char what[96];

	snprintf(what, sizeof(what), "self: %zu bytes, way %d", n, way);
	th_breadcrumb("%s", what);
	if (!sb || gb_new(&g, cap))
		return E_NOMEM;
	gen(sb, n, key);
	st_poison(&st);
	switch (way) {
	case 0: /* send, then recv */
		CALL(0, shmcoll_send(sb, n, SHMCOLL_UINT8, rank, tag, c));
		CALL(0, shmcoll_recv(g.p, n, SHMCOLL_UINT8, rank, tag, c, &st));
		break;
	case 1: /* isend before irecv; the receive waited for first */
		CALL(0, shmcoll_isend(sb, n, SHMCOLL_UINT8, rank, tag, c, &rs));
		CALL(0, shmcoll_irecv(g.p, n, SHMCOLL_UINT8, rank, tag, c, &rr));
		CALL(0, shmcoll_wait(&rr, &st));
		CALL(0, shmcoll_wait(&rs, NULL));
		break;
	case 2: /* irecv before isend */
		CALL(0, shmcoll_irecv(g.p, n, SHMCOLL_UINT8, rank, tag, c, &reqs[0]));
		CALL(0, shmcoll_isend(sb, n, SHMCOLL_UINT8, rank, tag, c, &reqs[1]));
		CALL(0, shmcoll_waitall(2, reqs, sts));
		st = sts[0];
		break;
	case 3: /* sendrecv, dest = source = self */
		CALL(0, shmcoll_sendrecv(sb, n, SHMCOLL_UINT8, rank, tag, g.p, n, SHMCOLL_UINT8,
		                         rank, tag, c, &st));
		break;
	case 4: /* sendrecv to self, received with wildcards */
		CALL(0, shmcoll_sendrecv(sb, n, SHMCOLL_UINT8, rank, tag, g.p, n, SHMCOLL_UINT8,
		                         SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, c, &st));
		break;
	default: /* truncated */
		CALL(0, shmcoll_send(sb, n, SHMCOLL_UINT8, rank, tag, c));
		CALL(want, shmcoll_recv(g.p, cap, SHMCOLL_UINT8, rank, tag, c, &st));
		break;
	}
	rc = st_check(rank, what, &st, rank, tag, cap, cap, n, want);
	if (!rc)
		rc = gb_check(&g, cap, key, rank, what);
	if (!rc && first_bad(sb, n, key) != SIZE_MAX)
		rc = fail(E_SEND, rank, "%s: the send buffer changed", what);
	free(sb);
	gb_free(&g);
	return rc;
}

static int self_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	const size_t sizes[] = {0, 33, a->eager + 1, MIB + 5};
	int way, rc, tag = 0;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (way = 0; way < 6; way++) {
			rc = self_one(c, rank, sizes[k], way, tag++);
			if (rc)
				return rc;
		}
	return sum_check(c, rank);
}

Test(p2p, self, .timeout = 120)
{
	struct targ a = {0};

	run_with("self", 1, 0, self_body, &a, 4 * MIB);
	run_with("self", 2, 0, self_body, &a, 4 * MIB);
	run_with("self", 2, 1, self_body, &a, 4 * MIB);
}

/* ---- 6b. synchronous sends ----
 *
 * shmcoll_issend completes only once a receive has matched its message, however small: the
 * sender tests it before a barrier its receiver posts the receive after, so the test must
 * find it pending (nothing here depends on timing: the receive cannot be posted before the
 * sender reaches the barrier). Pairs (r, r ^ 1), the even rank sending; a rank without a
 * partner, and every rank for the second half, sends to itself: pending after a probe has
 * seen the message, complete once it is received. Then shmcoll_ssend both ways. */
static int ssend_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	const size_t sizes[] = {0, 33, a->eager + 1, MIB + 5};
	int P = shmcoll_comm_size(c), partner = (rank ^ 1) < P ? rank ^ 1 : rank, done, flag;
	unsigned char *sb = malloc(MIB + 5);
	shmcoll_request *rq;
	shmcoll_status st;
	struct gbuf g;
	char what[96];
	int rc = 0;

	if (!sb)
		return E_NOMEM;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && !rc; k++) {
		size_t n = sizes[k];
		uint64_t key = key_of(21, rank & ~1, rank | 1, k); /* even sends to odd */

		snprintf(what, sizeof(what), "issend of %zu bytes to rank %d", n, partner);
		th_breadcrumb("%s", what);
		if (gb_new(&g, n))
			return E_NOMEM;
		if (partner == rank || !(rank & 1)) {
			/* The sender (or a rank alone, to itself). */
			gen(sb, n, partner == rank ? key_of(22, rank, rank, k) : key);
			CALL(0, shmcoll_issend(sb, n, SHMCOLL_UINT8, partner, 7, c, &rq));
			CALL(0, shmcoll_test(&rq, &done, NULL));
			if (done)
				rc = fail(E_REQ, rank, "%s: complete before any receive", what);
			if (partner == rank) {
				CALL(0, shmcoll_iprobe(rank, 7, SHMCOLL_UINT8, c, &flag, &st));
				CALL(0, shmcoll_test(&rq, &done, NULL));
				if (!flag || done)
					rc = fail(E_REQ, rank,
					          "%s: probe %d, complete %d (want 1, 0)", what,
					          flag, done);
				CALL(0, shmcoll_recv(g.p, n, SHMCOLL_UINT8, rank, 7, c, &st));
				if (!rc)
					rc = gb_check(&g, n, key_of(22, rank, rank, k), rank, what);
			}
			CALL(0, shmcoll_barrier(c));
			CALL(0, shmcoll_wait(&rq, NULL));
		} else {
			CALL(0, shmcoll_barrier(c));
			CALL(0, shmcoll_recv(g.p, n, SHMCOLL_UINT8, partner, 7, c, &st));
			rc = st_check(rank, what, &st, partner, 7, n, n, n, 0);
			if (!rc)
				rc = gb_check(&g, n, key, rank, what);
		}
		gb_free(&g);
		/* Blocking, both ways: the odd rank first, so neither waits on the other. */
		if (!rc && partner != rank) {
			if (gb_new(&g, n))
				return E_NOMEM;
			gen(sb, n, key_of(23, rank, partner, k));
			if (rank & 1) {
				CALL(0, shmcoll_ssend(sb, n, SHMCOLL_UINT8, partner, 8, c));
				CALL(0, shmcoll_recv(g.p, n, SHMCOLL_UINT8, partner, 8, c, &st));
			} else {
				CALL(0, shmcoll_recv(g.p, n, SHMCOLL_UINT8, partner, 8, c, &st));
				CALL(0, shmcoll_ssend(sb, n, SHMCOLL_UINT8, partner, 8, c));
			}
			rc = gb_check(&g, n, key_of(23, partner, rank, k), rank, what);
			gb_free(&g);
		}
	}
	free(sb);
	return rc ? rc : sum_check(c, rank);
}

Test(p2p, ssend, .timeout = 120)
{
	struct targ a = {0};

	run_with("ssend", 1, 0, ssend_body, &a, 4 * MIB);
	run_with("ssend", 2, 0, ssend_body, &a, 4 * MIB);
	run_with("ssend", 3, 0, ssend_body, &a, 4 * MIB);
	run_with("ssend", 2, 1, ssend_body, &a, 4 * MIB);
}

/* ---- 7. sendrecv ---- */

/* A ring shift of every size (the last with wildcard receives), then partners (r, r ^ 1)
 * exchanging large messages of different sizes with one call each. */
static int sendrecv_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	const size_t sizes[] = {5, a->eager + 1, MIB + 5, 3 * MIB + 17, 70000};
	size_t nk = sizeof(sizes) / sizeof(sizes[0]), k, n, mine, theirs;
	int P = shmcoll_comm_size(c), dest = (rank + 1) % P, src = (rank + P - 1) % P, rc;
	int partner = rank ^ 1, wild;
	unsigned char *sb = malloc(3 * MIB + 17);
	shmcoll_status st;
	struct gbuf g;
	char what[96];

	if (!sb)
		return E_NOMEM;
	for (k = 0; k < nk; k++) {
		n = sizes[k];
		wild = k == nk - 1;
		snprintf(what, sizeof(what), "sendrecv ring shift, %zu bytes%s", n,
		         wild ? ", wildcard receive" : "");
		th_breadcrumb("%s", what);
		if (gb_new(&g, n))
			return E_NOMEM;
		gen(sb, n, key_of(9, rank, dest, k));
		st_poison(&st);
		CALL(0, shmcoll_sendrecv(sb, n, SHMCOLL_UINT8, dest, 40, g.p, n, SHMCOLL_UINT8,
		                         wild ? SHMCOLL_ANY_SOURCE : src,
		                         wild ? SHMCOLL_ANY_TAG : 40, c, &st));
		rc = st_check(rank, what, &st, src, 40, n, n, n, 0);
		if (!rc)
			rc = gb_check(&g, n, key_of(9, src, rank, k), rank, what);
		gb_free(&g);
		if (rc)
			return rc;
	}
	/* Truncated: the receive says -EMSGSIZE, the send in the same call succeeded. */
	n = 70000;
	if (gb_new(&g, n / 2))
		return E_NOMEM;
	gen(sb, n, key_of(9, rank, dest, 99));
	CALL(-EMSGSIZE, shmcoll_sendrecv(sb, n, SHMCOLL_UINT8, dest, 42, g.p, n / 2, SHMCOLL_UINT8,
	                                 src, 42, c, &st));
	rc = st_check(rank, "sendrecv, truncated", &st, src, 42, n / 2, n / 2, n, -EMSGSIZE);
	if (!rc)
		rc = gb_check(&g, n / 2, key_of(9, src, rank, 99), rank, "sendrecv, truncated");
	gb_free(&g);
	if (rc)
		return rc;
	/* Every ring message is in before a pair message could meet the wildcard receive. */
	CALL(0, shmcoll_barrier(c));
	if (partner < P) {
		mine = rank & 1 ? MIB + 5 : 2 * MIB + 3;
		theirs = rank & 1 ? 2 * MIB + 3 : MIB + 5;
		snprintf(what, sizeof(what), "sendrecv pair: %zu bytes out, %zu in", mine, theirs);
		th_breadcrumb("%s", what);
		if (gb_new(&g, theirs))
			return E_NOMEM;
		gen(sb, mine, key_of(10, rank, partner, 0));
		CALL(0, shmcoll_sendrecv(sb, mine, SHMCOLL_UINT8, partner, 41, g.p, theirs,
		                         SHMCOLL_UINT8, partner, 41, c, &st));
		rc = st_check(rank, what, &st, partner, 41, theirs, theirs, theirs, 0);
		if (!rc)
			rc = gb_check(&g, theirs, key_of(10, partner, rank, 0), rank, what);
		gb_free(&g);
		if (rc)
			return rc;
	}
	free(sb);
	return sum_check(c, rank);
}

Test(p2p, sendrecv, .timeout = 200)
{
	struct targ a = {0};

	run_with("sendrecv", 2, 0, sendrecv_body, &a, 4 * MIB);
	run_with("sendrecv", 3, 0, sendrecv_body, &a, 4 * MIB);
	run_with("sendrecv", 4, 0, sendrecv_body, &a, 4 * MIB);
	run_with("sendrecv", 8, 0, sendrecv_body, &a, 8 * MIB);
	run_with("sendrecv", 4, 1, sendrecv_body, &a, 4 * MIB);
}

/* ---- 8. windows of requests ---- */

#define WIN      64
#define WIN_TAGS 8
enum { W_WAITALL, W_TESTALL, W_TEST, W_WAITANY, W_MODES };
static const char *const win_mode_name[] = {"waitall", "testall", "test", "waitany"};

static size_t win_size(size_t eager, int j)
{
	if (j == WIN - 1)
		return 50; /* into 40 bytes: truncated */
	if (j % 16 == 5)
		return eager + 1 + (size_t)j;
	if (j % 16 == 9)
		return 70000;
	return (size_t)(j * 37) % 300;
}

static size_t win_cap(size_t eager, int j)
{
	return j == WIN - 1 ? 40 : win_size(eager, j);
}

/* Slot i of the request array: receive (i % 3 == 0), NULL, send, for (peer, j) =
 * ((i / 3) / WIN, (i / 3) % WIN). */
static int win_check(shmcoll_comm *c, int rank, const struct targ *a, int mode, size_t i, int rc,
                     const shmcoll_status *st, struct gbuf *rb, int is_status_of_test)
{
	int q = (int)(i / 3 / WIN), j = (int)(i / 3 % WIN);
	size_t n = win_size(a->eager, j), cap = win_cap(a->eager, j);
	int want = cap < n ? -EMSGSIZE : 0, e;
	char what[96];

	(void)c;
	snprintf(what, sizeof(what), "window (%s) %s %d of peer %d", win_mode_name[mode],
	         i % 3 == 0 ? "receive" : "send", j, q);
	if (i % 3 == 1)
		return fail(E_REQ, rank, "window (%s): slot %zu (NULL) completed",
		            win_mode_name[mode], i);
	if (i % 3 == 2) {
		if (rc != 0)
			return fail(E_CALL, rank, "%s: %d", what, rc);
		/* wait, test, waitany leave a send's status alone; waitall sets its error. */
		if (is_status_of_test && !st_poisoned(st))
			return fail(E_STATUS, rank, "%s: the send's status was written", what);
		if (!is_status_of_test && st->error != 0)
			return fail(E_STATUS, rank, "%s: error field %d", what, st->error);
		return 0;
	}
	if (rc != want)
		return fail(E_CALL, rank, "%s: %d, want %d", what, rc, want);
	e = st_check(rank, what, st, q, j % WIN_TAGS, cap, cap, n, want);
	return e ? e : gb_check(rb, cap, key_of(11, q, rank, (uint64_t)j), rank, what);
}

static int window_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	int P = shmcoll_comm_size(c), q, j, mode, done, rc, first;
	size_t n = (size_t)3 * P * WIN, i, k, idx, left;
	shmcoll_request **reqs = calloc(n, sizeof(*reqs)), **saved = calloc(n, sizeof(*reqs));
	shmcoll_status *sts = calloc(n, sizeof(*sts)), *poison = calloc(n, sizeof(*sts)), st;
	struct gbuf *rb = calloc((size_t)P * WIN, sizeof(*rb));
	unsigned char **sb = calloc((size_t)P * WIN, sizeof(*sb));

	if (!reqs || !saved || !sts || !poison || !rb || !sb)
		return E_NOMEM;
	for (i = 0; i < n; i++)
		st_poison(&poison[i]);
	for (mode = 0; mode < W_MODES; mode++) {
		if (a->mode && !(a->mode & (1 << mode)))
			continue;
		th_breadcrumb("window, %s", win_mode_name[mode]);
		/* Post: for each j, a receive from and a send to every peer (self included). */
		for (j = 0; j < WIN; j++)
			for (q = 0; q < P; q++) {
				k = (size_t)q * WIN + (size_t)j;
				i = 3 * k;
				if (gb_new(&rb[k], win_cap(a->eager, j)) ||
				    !(sb[k] = malloc(win_size(a->eager, j) + 1)))
					return E_NOMEM;
				gen(sb[k], win_size(a->eager, j), key_of(11, rank, q, (uint64_t)j));
				CALL(0, shmcoll_irecv(rb[k].p, rb[k].cap, SHMCOLL_UINT8, q,
				                      j % WIN_TAGS, c, &reqs[i]));
				reqs[i + 1] = NULL;
				CALL(0, shmcoll_isend(sb[k], win_size(a->eager, j), SHMCOLL_UINT8,
				                      q, j % WIN_TAGS, c, &reqs[i + 2]));
			}
		memcpy(sts, poison, n * sizeof(*sts));
		switch (mode) {
		case W_WAITALL:
		case W_TESTALL:
			if (mode == W_WAITALL) {
				rc = shmcoll_waitall(n, reqs, sts);
			} else {
				for (;;) {
					memcpy(saved, reqs, n * sizeof(*reqs));
					rc = shmcoll_testall(n, reqs, &done, sts);
					if (done)
						break;
					if (rc != 0 || memcmp(saved, reqs, n * sizeof(*reqs)) ||
					    memcmp(sts, poison, n * sizeof(*sts)))
						return fail(
						    E_REQ, rank,
						    "testall not done: returned %d or changed "
						    "requests or statuses",
						    rc);
					sched_yield();
				}
			}
			/* The first error in array order: peer 0's truncated receive. */
			if (rc != -EMSGSIZE)
				return fail(E_CALL, rank, "window (%s): %d, want -EMSGSIZE",
				            win_mode_name[mode], rc);
			for (i = 0; i < n; i++) {
				if (reqs[i])
					return fail(E_REQ, rank, "window (%s): slot %zu not NULL",
					            win_mode_name[mode], i);
				if (i % 3 == 1)
					continue;
				rc = win_check(c, rank, a, mode, i, sts[i].error, &sts[i],
				               &rb[i / 3], 0);
				if (rc)
					return rc;
			}
			break;
		case W_TEST:
			for (left = n / 3 * 2; left;) {
				for (i = 0; i < n; i++) {
					if (!reqs[i])
						continue;
					st_poison(&st);
					done = -1;
					rc = shmcoll_test(&reqs[i], &done, &st);
					if (done == 0) {
						if (rc != 0 || !reqs[i])
							return fail(E_REQ, rank,
							            "test not done: %d, request %p",
							            rc, (void *)reqs[i]);
						continue;
					}
					if (done != 1 || reqs[i])
						return fail(E_REQ, rank,
						            "test done %d, request %p not NULL",
						            done, (void *)reqs[i]);
					rc = win_check(c, rank, a, mode, i, rc, &st, &rb[i / 3],
					               i % 3 == 2);
					if (rc)
						return rc;
					left--;
				}
				sched_yield();
			}
			break;
		default:
			for (left = n / 3 * 2;; left--) {
				st_poison(&st);
				idx = 7;
				rc = shmcoll_waitany(n, reqs, &idx, &st);
				if (idx == SIZE_MAX)
					break;
				if (idx >= n || reqs[idx])
					return fail(E_REQ, rank, "waitany: index %zu, request %p",
					            idx, idx < n ? (void *)reqs[idx] : NULL);
				first = win_check(c, rank, a, mode, idx, rc, &st, &rb[idx / 3],
				                  idx % 3 == 2);
				if (first)
					return first;
			}
			if (rc != 0 || left != 0)
				return fail(E_REQ, rank,
				            "waitany: SIZE_MAX with %zu requests left, returned %d",
				            left, rc);
			break;
		}
		for (k = 0; k < (size_t)P * WIN; k++) {
			gb_free(&rb[k]);
			free(sb[k]);
		}
	}
	/* No request at all. */
	idx = 7;
	CALL(0, shmcoll_waitany(0, NULL, &idx, NULL));
	if (idx != SIZE_MAX)
		return fail(E_REQ, rank, "waitany of none: index %zu", idx);
	done = 0;
	CALL(0, shmcoll_testall(n, reqs, &done, NULL));
	if (done != 1)
		return fail(E_REQ, rank, "testall of NULL requests: done %d", done);
	free(reqs);
	free(saved);
	free(sts);
	free(poison);
	free(rb);
	free(sb);
	return sum_check(c, rank);
}

Test(p2p, windows, .timeout = 200)
{
	struct targ a = {0};

	run_with("windows", 2, 0, window_body, &a, 4 * MIB);
	run_with("windows", 2, 1, window_body, &a, 4 * MIB);
	/* More than 256 requests at once, completed by test and waitany here (waitall and
	 * testall: waitall_more_requests_than_kept). */
	a.mode = 1 << W_TEST | 1 << W_WAITANY;
	run_with("windows, test and waitany", 4, 0, window_body, &a, 4 * MIB);
	run_with("windows, test and waitany", 3, 1, window_body, &a, 4 * MIB);
}

/* More requests than a communicator keeps for reuse (256): the ones beyond are freed as
 * they complete, and shmcoll_waitall must not look at one after it released it (it once
 * did: a use after free that left a send's status error unwritten, and that
 * AddressSanitizer reports). 200 messages to self, 400 requests, one waitall. */
static int many_reqs_body(shmcoll_comm *c, int rank, void *arg)
{
	enum { N = 200 };
	shmcoll_request *reqs[2 * N];
	shmcoll_status sts[2 * N];
	unsigned char out[N], in[N];
	int i;

	(void)arg;
	for (i = 0; i < N; i++) {
		out[i] = (unsigned char)i;
		CALL(0, shmcoll_irecv(&in[i], 1, SHMCOLL_UINT8, rank, 1, c, &reqs[2 * i]));
		CALL(0, shmcoll_isend(&out[i], 1, SHMCOLL_UINT8, rank, 1, c, &reqs[2 * i + 1]));
		st_poison(&sts[2 * i]);
		st_poison(&sts[2 * i + 1]);
	}
	CALL(0, shmcoll_waitall(2 * N, reqs, sts));
	for (i = 0; i < 2 * N; i++)
		if (sts[i].error != 0)
			return fail(E_STATUS, rank,
			            "waitall of %d requests: status %d (%s) has error field %d",
			            2 * N, i, i & 1 ? "send" : "receive", sts[i].error);
	for (i = 0; i < N; i++)
		if (in[i] != (unsigned char)i)
			return fail(E_DATA, rank, "message %d", i);
	return 0;
}

Test(p2p, waitall_more_requests_than_kept, .timeout = 120)
{
	struct targ a = {0};

	run_with("waitall of 400 requests", 1, 0, many_reqs_body, &a, 2 * MIB);
	run_with("waitall of 400 requests", 1, 1, many_reqs_body, &a, 2 * MIB);
	a.mode = 1 << W_WAITALL | 1 << W_TESTALL;
	run_with("windows, waitall and testall", 4, 0, window_body, &a, 4 * MIB);
	run_with("windows, waitall and testall", 3, 1, window_body, &a, 4 * MIB);
}

/* ---- 9. probe ---- */

static int probe_body(shmcoll_comm *c, int rank, void *arg)
{
	const size_t small = 102, big = 100000;
	shmcoll_status st, st2;
	unsigned char *sb;
	shmcoll_request *r;
	struct gbuf g;
	int flag, rc;

	(void)arg;
	if (shmcoll_comm_size(c) != 2)
		return E_CALL;
	flag = -1;
	CALL(0, shmcoll_iprobe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, SHMCOLL_UINT8, c, &flag, NULL));
	if (flag != 0)
		return fail(E_STATUS, rank, "iprobe before any message: flag %d", flag);
	CALL(0, shmcoll_barrier(c));
	if (rank == 0) {
		sb = malloc(big);
		if (!sb)
			return E_NOMEM;
		gen(sb, small, key_of(12, 0, 1, 9));
		CALL(0, shmcoll_send(sb, small, SHMCOLL_UINT8, 1, 9, c));
		gen(sb, big, key_of(12, 0, 1, 10));
		CALL(0, shmcoll_isend(sb, big, SHMCOLL_UINT8, 1, 10, c, &r));
		CALL(0, shmcoll_wait(&r, NULL));
		free(sb);
	} else {
		/* Until the message is there: no timing, a loop. */
		for (flag = 0; !flag;) {
			st_poison(&st);
			CALL(0, shmcoll_iprobe(0, 9, SHMCOLL_INT32, c, &flag, &st));
			if (!flag)
				sched_yield();
		}
		rc = st_check(rank, "iprobe", &st, 0, 9, small / 4, small, small, 0);
		if (rc)
			return rc;
		/* Not consumed: found again, as the same message. */
		st_poison(&st2);
		CALL(0, shmcoll_iprobe(SHMCOLL_ANY_SOURCE, 9, SHMCOLL_INT32, c, &flag, &st2));
		if (!flag || memcmp(&st, &st2, sizeof(st)))
			return fail(E_STATUS, rank, "a second iprobe: flag %d or another status",
			            flag);
		CALL(0, shmcoll_iprobe(0, 11, SHMCOLL_UINT8, c, &flag, NULL));
		if (flag)
			return fail(E_STATUS, rank, "iprobe of a tag never sent: flag 1");
		/* probe waits for the rendezvous message; a receive sized from its status. */
		CALL(0, shmcoll_probe(SHMCOLL_ANY_SOURCE, 10, SHMCOLL_UINT8, c, &st));
		rc = st_check(rank, "probe (rendezvous)", &st, 0, 10, big, big, big, 0);
		if (rc)
			return rc;
		if (gb_new(&g, st.count))
			return E_NOMEM;
		CALL(0, shmcoll_recv(g.p, st.count, SHMCOLL_UINT8, st.source, st.tag, c, &st2));
		rc = st_check(rank, "recv after probe", &st2, 0, 10, big, big, big, 0);
		if (!rc)
			rc = gb_check(&g, big, key_of(12, 0, 1, 10), rank, "recv after probe");
		gb_free(&g);
		if (rc)
			return rc;
		/* The eager one is still there; its count in int64 rounds down. */
		CALL(0, shmcoll_probe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, SHMCOLL_INT64, c, &st));
		rc = st_check(rank, "probe (eager, int64)", &st, 0, 9, small / 8, small, small, 0);
		if (rc)
			return rc;
		if (gb_new(&g, st.bytes))
			return E_NOMEM;
		CALL(0, shmcoll_recv(g.p, st.bytes, SHMCOLL_UINT8, st.source, st.tag, c, &st2));
		rc = gb_check(&g, small, key_of(12, 0, 1, 9), rank, "recv after probe (eager)");
		gb_free(&g);
		if (rc)
			return rc;
		CALL(0, shmcoll_iprobe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, SHMCOLL_UINT8, c, &flag,
		                       NULL));
		if (flag)
			return fail(E_STATUS, rank, "iprobe after every message was received: 1");
	}
	/* A message to self, probed. */
	sb = malloc(7);
	if (!sb || gb_new(&g, 7))
		return E_NOMEM;
	gen(sb, 7, key_of(12, rank, rank, 13));
	CALL(0, shmcoll_send(sb, 7, SHMCOLL_UINT8, rank, 13, c));
	CALL(0, shmcoll_iprobe(rank, 13, SHMCOLL_UINT8, c, &flag, &st));
	rc = flag ? st_check(rank, "iprobe (self)", &st, rank, 13, 7, 7, 7, 0)
	          : fail(E_STATUS, rank, "iprobe after a send to self: 0");
	if (rc)
		return rc;
	CALL(0, shmcoll_probe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, SHMCOLL_UINT8, c, &st));
	CALL(0, shmcoll_recv(g.p, st.count, SHMCOLL_UINT8, rank, 13, c, &st));
	rc = gb_check(&g, 7, key_of(12, rank, rank, 13), rank, "recv after probe (self)");
	free(sb);
	gb_free(&g);
	return rc ? rc : sum_check(c, rank);
}

Test(p2p, probe, .timeout = 120)
{
	struct targ a = {0};

	run_with("probe", 2, 0, probe_body, &a, 4 * MIB);
	run_with("probe", 2, 1, probe_body, &a, 4 * MIB);
}

/* ---- 10. unexpected messages ---- */

#define UX_N 40
enum { UX_BARRIER, UX_COMPUTE };

static size_t ux_size(size_t eager, int j)
{
	if (j >= UX_N) /* the two rendezvous ones of UX_COMPUTE */
		return j == UX_N ? eager + 1 : 70000;
	return j % 4 == 3 ? eager / 2 + (size_t)j : eager - (size_t)(j % 3);
}

/* Every rank but 0 sends rank 0 UX_N eager messages (tag j: far more than its ring holds)
 * before rank 0 posts any receive: with blocking sends while rank 0 waits in a barrier, or
 * with isends (and two rendezvous ones) while rank 0 computes. Then rank 0 receives them
 * in reverse tag order. */
static int unexpected_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	int P = shmcoll_comm_size(c), s, j, rc, nmsg = a->mode == UX_COMPUTE ? UX_N + 2 : UX_N;
	shmcoll_request *reqs[UX_N + 2];
	size_t n, off = 0, total = 0;
	unsigned char *sb;
	shmcoll_status st;
	struct gbuf g;
	char what[96];

	for (j = 0; j < nmsg; j++)
		total += ux_size(a->eager, j);
	if (rank != 0) {
		sb = malloc(total);
		if (!sb)
			return E_NOMEM;
		for (j = 0; j < nmsg; j++) {
			n = ux_size(a->eager, j);
			gen(sb + off, n, key_of(13, rank, 0, (uint64_t)j));
			if (a->mode == UX_BARRIER)
				CALL(0, shmcoll_send(sb + off, n, SHMCOLL_UINT8, 0, j, c));
			else
				CALL(0,
				     shmcoll_isend(sb + off, n, SHMCOLL_UINT8, 0, j, c, &reqs[j]));
			off += n;
		}
		CALL(0, shmcoll_barrier(c));
		if (a->mode == UX_COMPUTE)
			CALL(0, shmcoll_waitall((size_t)nmsg, reqs, NULL));
		free(sb);
		return sum_check(c, rank);
	}
	if (a->mode == UX_COMPUTE) {
		/* Work outside the library: a fixed amount, not a time. */
		uint64_t x = 0;
		unsigned char *w = malloc(MIB);

		if (!w)
			return E_NOMEM;
		for (j = 0; j < 8; j++) {
			gen(w, MIB, (uint64_t)j);
			x ^= th_mix(w[j * 1000]);
		}
		free(w);
		th_breadcrumb("unexpected: computed %llx", (unsigned long long)x);
	}
	CALL(0, shmcoll_barrier(c));
	if (gb_new(&g, 70000))
		return E_NOMEM;
	for (j = nmsg - 1; j >= 0; j--)
		for (s = 1; s < P; s++) {
			n = ux_size(a->eager, j);
			snprintf(what, sizeof(what), "unexpected: tag %d of rank %d, %zu bytes", j,
			         s, n);
			gb_reset(&g);
			CALL(0, shmcoll_recv(g.p, g.cap, SHMCOLL_UINT8, s, j, c, &st));
			rc = st_check(rank, what, &st, s, j, n, n, n, 0);
			if (!rc)
				rc = gb_check(&g, n, key_of(13, s, 0, (uint64_t)j), rank, what);
			if (rc)
				return rc;
		}
	gb_free(&g);
	return sum_check(c, rank);
}

Test(p2p, unexpected, .timeout = 200)
{
	struct targ a = {.mode = UX_BARRIER};

	run_with("unexpected, receiver in a barrier", 2, 0, unexpected_body, &a, 4 * MIB);
	run_with("unexpected, receiver in a barrier", 3, 0, unexpected_body, &a, 4 * MIB);
	run_with("unexpected, receiver in a barrier", 2, 1, unexpected_body, &a, 4 * MIB);
	a.mode = UX_COMPUTE;
	run_with("unexpected, receiver computing", 2, 0, unexpected_body, &a, 4 * MIB);
	run_with("unexpected, receiver computing", 3, 0, unexpected_body, &a, 4 * MIB);
	run_with("unexpected, receiver computing", 2, 1, unexpected_body, &a, 4 * MIB);
}

/* ---- 11. rendezvous sources ---- */

enum { RS_ORDINARY, RS_HEAP, RS_HEAP_ODD, RS_HEAP_BOTH, RS_KINDS };
static const char *const rs_name[] = {"ordinary", "heap", "heap + 8", "heap to heap"};

/* In a ring, each rendezvous size from each kind of send buffer: ordinary memory (streamed
 * between processes; memcpy between threads; process_vm_readv with SHMCOLL_P2P_CMA_MIN),
 * the symmetric heap (read where it is), at an odd offset in it, and into a receive
 * buffer in the heap too. */
static int rdv_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	const size_t sizes[] = {a->eager + 1, 65536 + 13, MIB + 5};
	const size_t hbytes = MIB + 5 + 2 * GUARD + 64;
	int P = shmcoll_comm_size(c), dest = (rank + 1) % P, src = (rank + P - 1) % P;
	unsigned char *hs, *hr, *ord = malloc(MIB + 5), *p;
	int kind, rc, tag = 0;
	shmcoll_request *r;
	shmcoll_status st;
	struct gbuf g;
	char what[96];

	if (a->cma && !shmcoll__probe_cma(c))
		return E_NO_CMA;
	hs = shmcoll_malloc(c, hbytes);
	hr = hs ? shmcoll_malloc(c, hbytes) : NULL;
	if (!hs || !hr)
		return fail(E_SYMALLOC, rank, "shmcoll_malloc(%zu) x2 (heap %zu): %s", hbytes,
		            shmcoll__probe_heap_bytes(c), shmcoll_last_error(c));
	if (!ord)
		return E_NOMEM;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (kind = 0; kind < RS_KINDS; kind++, tag++) {
			size_t n = sizes[k];

			snprintf(what, sizeof(what), "rendezvous from %s memory, %zu bytes",
			         rs_name[kind], n);
			th_breadcrumb("%s", what);
			p = kind == RS_ORDINARY ? ord : kind == RS_HEAP_ODD ? hs + 8 : hs;
			gen(p, n, key_of(14, rank, dest, (uint64_t)tag));
			if (kind == RS_HEAP_BOTH)
				gb_at(&g, hr, n);
			else if (gb_new(&g, n))
				return E_NOMEM;
			CALL(0, shmcoll_irecv(g.p, n, SHMCOLL_UINT8, src, tag, c, &r));
			CALL(0, shmcoll_send(p, n, SHMCOLL_UINT8, dest, tag, c));
			CALL(0, shmcoll_wait(&r, &st));
			rc = st_check(rank, what, &st, src, tag, n, n, n, 0);
			if (!rc)
				rc = gb_check(&g, n, key_of(14, src, rank, (uint64_t)tag), rank,
				              what);
			if (!rc &&
			    first_bad(p, n, key_of(14, rank, dest, (uint64_t)tag)) != SIZE_MAX)
				rc = fail(E_SEND, rank, "%s: the send buffer changed", what);
			gb_free(&g);
			if (rc)
				return rc;
			/* Nobody rewrites a send buffer a peer may still be reading. */
			CALL(0, shmcoll_barrier(c));
		}
	free(ord);
	CALL(0, shmcoll_free(c, hr));
	CALL(0, shmcoll_free(c, hs));
	return sum_check(c, rank);
}

Test(p2p, rendezvous_sources, .timeout = 200)
{
	struct targ a = {0};

	run_with("rendezvous sources", 2, 0, rdv_body, &a, 16 * MIB);
	run_with("rendezvous sources", 3, 0, rdv_body, &a, 16 * MIB);
	run_with("rendezvous sources", 2, 1, rdv_body, &a, 16 * MIB);
	run_with("rendezvous sources", 3, 1, rdv_body, &a, 16 * MIB);
}

Test(p2p, rendezvous_cma, .timeout = 200)
{
	struct targ a = {.cma = 1};

	TH_PROCESSES_ONLY();
	if (!th_siblings_can_read())
		cr_skip_test("process_vm_readv between sibling processes is not allowed here "
		             "(Yama ptrace_scope, seccomp): no single-copy rendezvous");
	/* From 64 KiB: the eager + 1 message still streams. */
	cr_assert(setenv("SHMCOLL_P2P_CMA_MIN", "65536", 1) == 0);
	run_with("rendezvous, SHMCOLL_P2P_CMA_MIN=65536", 2, 0, rdv_body, &a, 16 * MIB);
	run_with("rendezvous, SHMCOLL_P2P_CMA_MIN=65536", 3, 0, rdv_body, &a, 16 * MIB);
	unsetenv("SHMCOLL_P2P_CMA_MIN");
}

/* ---- 12. beside collectives ---- */

/* Collectives whose results every rank checks: small and pipelined allreduce, bcast,
 * allgather, alltoall, barrier. */
static int colls(shmcoll_comm *c, int rank, uint64_t salt)
{
	int P = shmcoll_comm_size(c), q, i, root = P - 1;
	const size_t big = 50000;
	int32_t *x = malloc(big * sizeof(*x)), *y = malloc(big * sizeof(*y));
	int32_t ag[3 * TH_MAX_RANKS], me[3], a2s[2 * TH_MAX_RANKS], a2r[2 * TH_MAX_RANKS];
	unsigned char bc[1000];
	int rc;

	if (!x || !y)
		return E_NOMEM;
	rc = sum_check(c, rank);
	if (rc)
		return rc;
	for (size_t k = 0; k < big; k++)
		x[k] = (int32_t)k + rank;
	CALL(0, shmcoll_allreduce(x, y, big, SHMCOLL_INT32, SHMCOLL_SUM, c));
	for (size_t k = 0; k < big; k++)
		if (y[k] != (int32_t)k * P + P * (P - 1) / 2)
			return fail(E_COLL, rank, "allreduce beside point-to-point: element %zu",
			            k);
	if (rank == root)
		gen(bc, sizeof(bc), key_of(salt, root, 0, 0));
	else
		memset(bc, 0, sizeof(bc));
	CALL(0, shmcoll_bcast(bc, sizeof(bc), SHMCOLL_UINT8, root, c));
	if (first_bad(bc, sizeof(bc), key_of(salt, root, 0, 0)) != SIZE_MAX)
		return fail(E_COLL, rank, "bcast beside point-to-point");
	for (i = 0; i < 3; i++)
		me[i] = rank * 10 + i;
	CALL(0, shmcoll_allgather(me, ag, 3, SHMCOLL_INT32, c));
	for (q = 0; q < P; q++)
		for (i = 0; i < 3; i++)
			if (ag[q * 3 + i] != q * 10 + i)
				return fail(E_COLL, rank, "allgather beside point-to-point");
	for (q = 0; q < P; q++)
		for (i = 0; i < 2; i++)
			a2s[q * 2 + i] = rank * 100 + q * 10 + i;
	CALL(0, shmcoll_alltoall(a2s, a2r, 2, SHMCOLL_INT32, c));
	for (q = 0; q < P; q++)
		for (i = 0; i < 2; i++)
			if (a2r[q * 2 + i] != q * 100 + rank * 10 + i)
				return fail(E_COLL, rank, "alltoall beside point-to-point");
	/* gatherv and scatterv run on point-to-point messages of their own context. */
	{
		size_t cnt[TH_MAX_RANKS], dsp[TH_MAX_RANKS], tot = 0;
		int32_t gv[TH_MAX_RANKS * (2 * TH_MAX_RANKS + 1)], mine[2 * TH_MAX_RANKS + 1];

		for (q = P - 1; q >= 0; q--) { /* blocks in reverse rank order */
			cnt[q] = (size_t)q + 1;
			dsp[q] = tot;
			tot += cnt[q];
		}
		for (i = 0; i <= rank; i++)
			mine[i] = rank * 100 + i;
		CALL(0, shmcoll_gatherv(mine, (size_t)rank + 1, gv, cnt, dsp, SHMCOLL_INT32, 0, c));
		if (rank == 0)
			for (q = 0; q < P; q++)
				for (i = 0; i <= q; i++)
					if (gv[dsp[q] + (size_t)i] != q * 100 + i)
						return fail(
						    E_COLL, rank,
						    "gatherv beside point-to-point: rank %d's "
						    "element %d",
						    q, i);
		for (q = 0, tot = 0; q < P; q++) {
			cnt[q] = 2 * (size_t)q + 1;
			dsp[q] = tot;
			tot += cnt[q];
			for (i = 0; i < (int)cnt[q] && rank == root; i++)
				gv[dsp[q] + (size_t)i] = 1000 * q + i;
		}
		CALL(0, shmcoll_scatterv(gv, cnt, dsp, mine, 2 * (size_t)rank + 1, SHMCOLL_INT32,
		                         root, c));
		for (i = 0; i <= 2 * rank; i++)
			if (mine[i] != 1000 * rank + i)
				return fail(E_COLL, rank,
				            "scatterv beside point-to-point: element %d", i);
	}
	CALL(0, shmcoll_barrier(c));
	free(x);
	free(y);
	return 0;
}

/* 1: sends to every rank outstanding (eager, rendezvous, streamed) while every rank runs
 * collectives; the receives after, in reverse tag order. 2: receives posted (one with
 * both wildcards) while the collectives run, which must not complete them; the messages
 * come after. 3: point-to-point and non-blocking collectives in one waitall. */
static int with_colls_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	int P = shmcoll_comm_size(c), q, t, rc, done;
	const size_t sizes[3] = {100, a->eager + 1, 200000};
	shmcoll_request *reqs[6 * TH_MAX_RANKS + 4], *any;
	shmcoll_status sts[6 * TH_MAX_RANKS + 4], st;
	struct gbuf *g = calloc((size_t)P * 3, sizeof(*g)), ga;
	unsigned char **sb = calloc((size_t)P * 3, sizeof(*sb));
	unsigned char *s2 = malloc((size_t)P * 300 + 10), *s3 = malloc((size_t)P * sizes[1]);
	size_t k, nr = 0;
	int64_t x, y;
	char what[96];

	if (!g || !sb || !s2 || !s3)
		return E_NOMEM;
	/* 1 */
	th_breadcrumb("with collectives: sends outstanding");
	for (q = 0; q < P; q++)
		for (t = 0; t < 3; t++) {
			k = (size_t)q * 3 + (size_t)t;
			sb[k] = malloc(sizes[t]);
			if (!sb[k])
				return E_NOMEM;
			gen(sb[k], sizes[t], key_of(15, rank, q, (uint64_t)t));
			CALL(0,
			     shmcoll_isend(sb[k], sizes[t], SHMCOLL_UINT8, q, t, c, &reqs[nr++]));
		}
	rc = colls(c, rank, 16);
	if (rc)
		return rc;
	for (q = 0; q < P; q++)
		for (t = 2; t >= 0; t--) {
			k = (size_t)q * 3 + (size_t)t;
			if (gb_new(&g[k], sizes[t]))
				return E_NOMEM;
			CALL(0,
			     shmcoll_irecv(g[k].p, sizes[t], SHMCOLL_UINT8, q, t, c, &reqs[nr++]));
		}
	CALL(0, shmcoll_waitall(nr, reqs, sts));
	for (q = 0, nr = (size_t)P * 3; q < P; q++)
		for (t = 2; t >= 0; t--, nr++) {
			k = (size_t)q * 3 + (size_t)t;
			snprintf(what, sizeof(what), "with collectives: tag %d of rank %d", t, q);
			rc = st_check(rank, what, &sts[nr], q, t, sizes[t], sizes[t], sizes[t], 0);
			if (!rc)
				rc = gb_check(&g[k], sizes[t], key_of(15, q, rank, (uint64_t)t),
				              rank, what);
			if (rc)
				return rc;
			gb_free(&g[k]);
		}
	/* 2 */
	th_breadcrumb("with collectives: receives outstanding");
	nr = 0;
	for (q = 0; q < P; q++) {
		if (gb_new(&g[q], 300))
			return E_NOMEM;
		CALL(0, shmcoll_irecv(g[q].p, 300, SHMCOLL_UINT8, q, 5, c, &reqs[nr++]));
	}
	if (gb_new(&ga, 64))
		return E_NOMEM;
	CALL(0,
	     shmcoll_irecv(ga.p, 64, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, c, &any));
	rc = colls(c, rank, 17);
	if (rc)
		return rc;
	/* No point-to-point message was sent in this phase yet: nothing may have matched. */
	CALL(0, shmcoll_test(&any, &done, &st));
	if (done)
		return fail(E_ORDER, rank, "a wildcard receive completed during collectives");
	for (k = 0; k < nr; k++) {
		CALL(0, shmcoll_test(&reqs[k], &done, &st));
		if (done)
			return fail(E_ORDER, rank, "a receive completed during collectives");
	}
	CALL(0, shmcoll_barrier(c));
	for (q = 0; q < P; q++) {
		gen(s2 + (size_t)q * 300, 300, key_of(18, rank, q, 5));
		CALL(0,
		     shmcoll_isend(s2 + (size_t)q * 300, 300, SHMCOLL_UINT8, q, 5, c, &reqs[nr++]));
	}
	gen(s2 + (size_t)P * 300, 10, key_of(18, rank, (rank + 1) % P, 6));
	CALL(0, shmcoll_isend(s2 + (size_t)P * 300, 10, SHMCOLL_UINT8, (rank + 1) % P, 6, c,
	                      &reqs[nr++]));
	CALL(0, shmcoll_waitall(nr, reqs, sts));
	for (q = 0; q < P; q++) {
		rc = st_check(rank, "with collectives: posted before", &sts[q], q, 5, 300, 300, 300,
		              0);
		if (!rc)
			rc = gb_check(&g[q], 300, key_of(18, q, rank, 5), rank, "posted before");
		if (rc)
			return rc;
		gb_free(&g[q]);
	}
	q = (rank + P - 1) % P;
	CALL(0, shmcoll_wait(&any, &st));
	rc = st_check(rank, "with collectives: the wildcard receive", &st, q, 6, 10, 10, 10, 0);
	if (!rc)
		rc = gb_check(&ga, 10, key_of(18, q, rank, 6), rank, "the wildcard receive");
	if (rc)
		return rc;
	gb_free(&ga);
	/* 3: once every phase-2 message is in (else a tag-7 one could meet a wildcard). */
	th_breadcrumb("with collectives: non-blocking collectives in the same waitall");
	CALL(0, shmcoll_barrier(c));
	nr = 0;
	x = rank + 1;
	y = -1;
	CALL(0, shmcoll_iallreduce(&x, &y, 1, SHMCOLL_INT64, SHMCOLL_SUM, c, &reqs[nr++]));
	for (q = 0; q < P; q++) {
		if (gb_new(&g[q], sizes[1]))
			return E_NOMEM;
		CALL(0, shmcoll_irecv(g[q].p, sizes[1], SHMCOLL_UINT8, q, 7, c, &reqs[nr++]));
		gen(s3 + (size_t)q * sizes[1], sizes[1], key_of(19, rank, q, 7));
	}
	CALL(0, shmcoll_ibarrier(c, &reqs[nr++]));
	for (q = 0; q < P; q++)
		CALL(0, shmcoll_isend(s3 + (size_t)q * sizes[1], sizes[1], SHMCOLL_UINT8, q, 7, c,
		                      &reqs[nr++]));
	CALL(0, shmcoll_waitall(nr, reqs, sts));
	if (y != (int64_t)P * (P + 1) / 2)
		return fail(E_COLL, rank, "iallreduce beside point-to-point: %lld", (long long)y);
	for (q = 0; q < P; q++) {
		rc = st_check(rank, "with collectives: beside iallreduce", &sts[1 + q], q, 7,
		              sizes[1], sizes[1], sizes[1], 0);
		if (!rc)
			rc = gb_check(&g[q], sizes[1], key_of(19, q, rank, 7), rank,
			              "beside iallreduce");
		if (rc)
			return rc;
		gb_free(&g[q]);
	}
	for (k = 0; k < (size_t)P * 3; k++)
		free(sb[k]);
	free(sb);
	free(s2);
	free(s3);
	free(g);
	return sum_check(c, rank);
}

Test(p2p, with_collectives, .timeout = 200)
{
	struct targ a = {0};

	run_with("with collectives", 3, 0, with_colls_body, &a, 4 * MIB);
	run_with("with collectives", 4, 0, with_colls_body, &a, 4 * MIB);
	run_with("with collectives", 3, 1, with_colls_body, &a, 4 * MIB);
}

/* ---- 13. argument errors ---- */

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* The source a body is told to receive from (finished_body). */
static int a_source(const void *arg)
{
	return ((const struct targ *)arg)->mode;
}

/* Whether the last message on c lacks word (never, for word NULL). */
static int msg_lacks(const shmcoll_comm *c, const char *word)
{
	return word && !strstr(shmcoll_last_error(c), word);
}

/* A call that must fail with -EINVAL at once; word (if not NULL) must be in the message. */
#define EINVAL_NAMING(expr, word)                                                                  \
	do {                                                                                       \
		int got_ = (expr);                                                                 \
		if (got_ != -EINVAL)                                                               \
			return fail(E_CALL, rank, "line %d: %s returned %d (%s), want -EINVAL",    \
			            __LINE__, #expr, got_, shmcoll_strerror(got_));                \
		if (msg_lacks(c, (word)))                                                          \
			return fail(E_MSG, rank, "line %d: %s: message \"%s\" does not name %s",   \
			            __LINE__, #expr, shmcoll_last_error(c), or_empty(word));       \
	} while (0)

/* A request handle the library must overwrite with NULL on failure. */
#define REQ_SET_NULL(expr, word)                                                                   \
	do {                                                                                       \
		r = sentinel;                                                                      \
		EINVAL_NAMING(expr, word);                                                         \
		if (r != NULL)                                                                     \
			return fail(E_REQ, rank, "line %d: %s failed but left *req as it was",     \
			            __LINE__, #expr);                                              \
	} while (0)

static int bad_args_body(shmcoll_comm *c, int rank, void *arg)
{
	int P = shmcoll_comm_size(c), peer = rank ^ 1, flag, done;
	unsigned char buf[64], in[64];
	char dummy[64];
	shmcoll_request *r, *sentinel = (shmcoll_request *)(void *)dummy, *reqs[3] = {0};
	shmcoll_status st;
	size_t idx;
	const shmcoll_dtype bad_dt = SHMCOLL_DTYPE_COUNT, neg_dt = (shmcoll_dtype)-1;
	const size_t huge = SIZE_MAX / 2;

	(void)arg;
	memset(buf, 1, sizeof(buf));
	/* shmcoll_send */
	EINVAL_NAMING(shmcoll_send(buf, 4, SHMCOLL_UINT8, P, 0, c), "dest");
	EINVAL_NAMING(shmcoll_send(buf, 4, SHMCOLL_UINT8, -2, 0, c), "dest");
	EINVAL_NAMING(shmcoll_send(buf, 4, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, 0, c), "dest");
	EINVAL_NAMING(shmcoll_send(buf, 4, SHMCOLL_UINT8, peer, SHMCOLL_ANY_TAG, c), "tag");
	EINVAL_NAMING(shmcoll_send(buf, 4, SHMCOLL_UINT8, peer, -7, c), "tag");
	EINVAL_NAMING(shmcoll_send(NULL, 4, SHMCOLL_UINT8, peer, 0, c), "buf");
	EINVAL_NAMING(shmcoll_send(buf, 4, bad_dt, peer, 0, c), "dtype");
	EINVAL_NAMING(shmcoll_send(buf, 4, neg_dt, peer, 0, c), "dtype");
	EINVAL_NAMING(shmcoll_send(buf, huge, SHMCOLL_INT32, peer, 0, c), "overflow");
	EINVAL_NAMING(shmcoll_send(buf, 4, SHMCOLL_UINT8, peer, 0, NULL), NULL);
	/* shmcoll_recv */
	EINVAL_NAMING(shmcoll_recv(in, 4, SHMCOLL_UINT8, P, 0, c, &st), "source");
	EINVAL_NAMING(shmcoll_recv(in, 4, SHMCOLL_UINT8, -2, 0, c, &st), "source");
	EINVAL_NAMING(shmcoll_recv(in, 4, SHMCOLL_UINT8, peer, -2, c, &st), "tag");
	EINVAL_NAMING(shmcoll_recv(NULL, 4, SHMCOLL_UINT8, peer, 0, c, &st), "buf");
	EINVAL_NAMING(shmcoll_recv(in, 4, bad_dt, peer, 0, c, &st), "dtype");
	EINVAL_NAMING(shmcoll_recv(in, huge, SHMCOLL_INT64, peer, 0, c, &st), "overflow");
	EINVAL_NAMING(shmcoll_recv(in, 4, SHMCOLL_UINT8, peer, 0, NULL, &st), NULL);
	/* isend / irecv: *req = NULL on failure */
	REQ_SET_NULL(shmcoll_isend(buf, 4, SHMCOLL_UINT8, P, 0, c, &r), "dest");
	REQ_SET_NULL(shmcoll_isend(buf, 4, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, 0, c, &r), "dest");
	REQ_SET_NULL(shmcoll_isend(buf, 4, SHMCOLL_UINT8, peer, SHMCOLL_ANY_TAG, c, &r), "tag");
	REQ_SET_NULL(shmcoll_isend(NULL, 4, SHMCOLL_UINT8, peer, 0, c, &r), "buf");
	REQ_SET_NULL(shmcoll_isend(buf, 4, bad_dt, peer, 0, c, &r), "dtype");
	REQ_SET_NULL(shmcoll_irecv(in, 4, SHMCOLL_UINT8, P, 0, c, &r), "source");
	REQ_SET_NULL(shmcoll_irecv(in, 4, SHMCOLL_UINT8, peer, -9, c, &r), "tag");
	REQ_SET_NULL(shmcoll_irecv(NULL, 4, SHMCOLL_UINT8, peer, 0, c, &r), "buf");
	REQ_SET_NULL(shmcoll_irecv(in, 4, neg_dt, peer, 0, c, &r), "dtype");
	/* The messages are checked in null_out_pointer_named. */
	EINVAL_NAMING(shmcoll_isend(buf, 4, SHMCOLL_UINT8, peer, 0, c, NULL), NULL);
	EINVAL_NAMING(shmcoll_irecv(in, 4, SHMCOLL_UINT8, peer, 0, c, NULL), NULL);
	/* sendrecv */
	EINVAL_NAMING(shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, peer, 0, buf + 4, 8, SHMCOLL_UINT8,
	                               peer, 0, c, &st),
	              "overlap");
	EINVAL_NAMING(shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, peer, 0, buf, 8, SHMCOLL_UINT8, peer,
	                               0, c, &st),
	              "overlap");
	EINVAL_NAMING(shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, 0, in, 8,
	                               SHMCOLL_UINT8, peer, 0, c, &st),
	              "dest");
	EINVAL_NAMING(
	    shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, peer, 0, in, 8, SHMCOLL_UINT8, P, 0, c, &st),
	    "source");
	EINVAL_NAMING(shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, peer, SHMCOLL_ANY_TAG, in, 8,
	                               SHMCOLL_UINT8, peer, 0, c, &st),
	              "tag");
	EINVAL_NAMING(
	    shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, peer, 0, in, 8, bad_dt, peer, 0, c, &st),
	    "dtype");
	EINVAL_NAMING(shmcoll_sendrecv(buf, 8, SHMCOLL_UINT8, peer, 0, in, 8, SHMCOLL_UINT8, peer,
	                               0, NULL, &st),
	              NULL);
	/* probes */
	EINVAL_NAMING(shmcoll_iprobe(P, 0, SHMCOLL_UINT8, c, &flag, &st), "source");
	EINVAL_NAMING(shmcoll_iprobe(peer, -3, SHMCOLL_UINT8, c, &flag, &st), "tag");
	EINVAL_NAMING(shmcoll_iprobe(peer, 0, bad_dt, c, &flag, &st), "dtype");
	EINVAL_NAMING(shmcoll_iprobe(peer, 0, SHMCOLL_UINT8, c, NULL, &st), NULL);
	EINVAL_NAMING(shmcoll_iprobe(peer, 0, SHMCOLL_UINT8, NULL, &flag, &st), NULL);
	EINVAL_NAMING(shmcoll_probe(-2, 0, SHMCOLL_UINT8, c, &st), "source");
	EINVAL_NAMING(shmcoll_probe(peer, -3, SHMCOLL_UINT8, c, &st), "tag");
	EINVAL_NAMING(shmcoll_probe(peer, 0, SHMCOLL_UINT8, NULL, &st), NULL);
	/* completion calls */
	EINVAL_NAMING(shmcoll_wait(NULL, &st), NULL);
	EINVAL_NAMING(shmcoll_test(NULL, &done, &st), NULL);
	r = NULL;
	EINVAL_NAMING(shmcoll_test(&r, NULL, &st), NULL);
	EINVAL_NAMING(shmcoll_waitall(3, NULL, NULL), NULL);
	EINVAL_NAMING(shmcoll_testall(3, NULL, &done, NULL), NULL);
	EINVAL_NAMING(shmcoll_testall(3, reqs, NULL, NULL), NULL);
	EINVAL_NAMING(shmcoll_waitany(3, NULL, &idx, NULL), NULL);
	EINVAL_NAMING(shmcoll_waitany(3, reqs, NULL, NULL), NULL);
	/* ... and what is not an error */
	r = NULL;
	CALL(0, shmcoll_wait(&r, &st));
	done = 0;
	CALL(0, shmcoll_test(&r, &done, &st));
	if (done != 1)
		return fail(E_REQ, rank, "test of a NULL request: done %d", done);
	CALL(0, shmcoll_waitall(0, NULL, NULL));
	CALL(0, shmcoll_waitall(3, reqs, NULL));
	idx = 0;
	CALL(0, shmcoll_waitany(3, reqs, &idx, &st));
	if (idx != SIZE_MAX)
		return fail(E_REQ, rank, "waitany of NULL requests: index %zu", idx);
	CALL(0, shmcoll_send(NULL, 0, SHMCOLL_UINT8, rank, SHMCOLL_TAG_MAX, c));
	st_poison(&st);
	CALL(0, shmcoll_recv(NULL, 0, SHMCOLL_UINT8, rank, SHMCOLL_TAG_MAX, c, &st));
	if (st_check(rank, "a 0-byte message with NULL buffers", &st, rank, SHMCOLL_TAG_MAX, 0, 0,
	             0, 0))
		return E_STATUS;
	/* Nobody hung and the communicator works: a message each way and a collective. */
	gen(buf, sizeof(buf), key_of(20, rank, peer, 0));
	CALL(0, shmcoll_sendrecv(buf, sizeof(buf), SHMCOLL_UINT8, peer, 1, in, sizeof(in),
	                         SHMCOLL_UINT8, peer, 1, c, &st));
	if (first_bad(in, sizeof(in), key_of(20, peer, rank, 0)) != SIZE_MAX)
		return fail(E_DATA, rank, "the message after the argument errors");
	return sum_check(c, rank);
}

Test(p2p, bad_arguments, .timeout = 60)
{
	struct targ a = {0};

	run_with("argument errors", 2, 0, bad_args_body, &a, 2 * MIB);
	run_with("argument errors", 2, 1, bad_args_body, &a, 2 * MIB);
}

/* A non-blocking start that fails returns its error "with *req = NULL" (the contract), a
 * NULL communicator included: a caller that waits on it afterwards must not find a stale
 * handle. */
Test(p2p, failed_start_clears_req, .timeout = 30)
{
	char dummy[64], buf[8] = {0};
	shmcoll_request *r = (shmcoll_request *)(void *)dummy;

	cr_assert_eq(shmcoll_isend(buf, 1, SHMCOLL_UINT8, 0, 0, NULL, &r), -EINVAL);
	cr_expect_null(r, "shmcoll_isend(comm NULL) returned -EINVAL but left *req as it was");
	r = (shmcoll_request *)(void *)dummy;
	cr_assert_eq(shmcoll_irecv(buf, 1, SHMCOLL_UINT8, 0, 0, NULL, &r), -EINVAL);
	cr_expect_null(r, "shmcoll_irecv(comm NULL) returned -EINVAL but left *req as it was");
	r = (shmcoll_request *)(void *)dummy;
	cr_assert_eq(shmcoll_ibarrier(NULL, &r), -EINVAL);
	cr_expect_null(r, "shmcoll_ibarrier(comm NULL) returned -EINVAL but left *req as it was");
}

/* A NULL req (or iprobe's NULL flag) on a good communicator is -EINVAL with a message that
 * names the argument, as every other bad argument is. Each check starts from "" (a
 * collective that succeeded clears it). */
static int null_out_body(shmcoll_comm *c, int rank, void *arg)
{
	unsigned char buf[4] = {0};
	int32_t x = 0;

	(void)arg;
	CALL(0, shmcoll_barrier(c));
	EINVAL_NAMING(shmcoll_isend(buf, 1, SHMCOLL_UINT8, rank, 0, c, NULL), "req");
	CALL(0, shmcoll_barrier(c));
	EINVAL_NAMING(shmcoll_irecv(buf, 1, SHMCOLL_UINT8, rank, 0, c, NULL), "req");
	CALL(0, shmcoll_barrier(c));
	EINVAL_NAMING(shmcoll_iprobe(rank, 0, SHMCOLL_UINT8, c, NULL, NULL), "flag");
	CALL(0, shmcoll_barrier(c));
	EINVAL_NAMING(shmcoll_iallreduce(&x, &x, 1, SHMCOLL_INT32, SHMCOLL_SUM, c, NULL), "req");
	return 0;
}

Test(p2p, null_out_pointer_named, .timeout = 30)
{
	struct targ a = {0};

	run_with("NULL req named in shmcoll_last_error", 1, 1, null_out_body, &a, 2 * MIB);
}

/* A rank that finished - destroyed its communicator and exited, as every rank does at the
 * end - is not dead to a peer still waiting in point-to-point for somebody else (the
 * liveness check once took any exited process for dead, without looking at its `left`
 * flag, and failed rank 0's receive with "rank 1 died"). Rank 1 sends its message and
 * leaves; rank 2 sends its own once rank 1 is gone and rank 0 has had time to look (the
 * sleep only gives the check its chance: a correct library passes whatever the timing). */
static int finished_body(shmcoll_comm *c, int rank, void *arg)
{
	unsigned char b = (unsigned char)rank, in = 0;
	const struct timespec look = {0, 200 * 1000 * 1000};
	struct pollfd pfd = {.events = POLLIN};
	shmcoll_status st;

	if (rank == 1) {
		CALL(0, shmcoll_send(&b, 1, SHMCOLL_UINT8, 0, 1, c));
		return 0; /* the harness destroys the communicator, then the process exits */
	}
	if (rank == 2) {
		/* ESRCH: rank 1 is gone (and reaped) already, which is all this waits for. */
		pfd.fd = (int)syscall(SYS_pidfd_open, shmcoll__probe_pid(c, 1), 0u);
		if (pfd.fd < 0 && errno != ESRCH)
			return fail(E_CALL, rank, "pidfd_open of rank 1: %s", strerror(errno));
		while (pfd.fd >= 0 && poll(&pfd, 1, -1) != 1)
			;
		if (pfd.fd >= 0)
			close(pfd.fd);
		nanosleep(&look, NULL);
		CALL(0, shmcoll_send(&b, 1, SHMCOLL_UINT8, 0, 2, c));
		return 0;
	}
	CALL(0, shmcoll_recv(&in, 1, SHMCOLL_UINT8, 1, 1, c, &st));
	CALL(0, shmcoll_recv(&in, 1, SHMCOLL_UINT8, a_source(arg), 2, c, &st));
	return in == 2 && st.source == 2 ? 0 : fail(E_DATA, rank, "got %d from %d", in, st.source);
}

Test(p2p, finished_peer_is_not_dead, .timeout = 60)
{
	struct targ a = {.mode = 2};

	TH_PROCESSES_ONLY();
	run_with("recv from rank 2 after rank 1 left", 3, 0, finished_body, &a, 2 * MIB);
	a.mode = SHMCOLL_ANY_SOURCE;
	run_with("recv from any source after rank 1 left", 3, 0, finished_body, &a, 2 * MIB);
}

/* ---- 14. destroy with requests outstanding ---- */

static int destroy_busy_body(shmcoll_comm *c, int rank, void *arg)
{
	unsigned char *sb = malloc(200000);
	shmcoll_request *r;
	shmcoll_status st;
	struct gbuf g;
	int rc;

	(void)arg;
	if (!sb || gb_new(&g, 200000))
		return E_NOMEM;
	if (rank == 0) {
		/* A receive not yet matched. */
		CALL(0, shmcoll_irecv(g.p, 100, SHMCOLL_UINT8, 1, 1, c, &r));
		CALL(-EBUSY, shmcoll_comm_destroy(c));
		if (shmcoll_comm_rank(c) != 0 || shmcoll_comm_size(c) != 2)
			return fail(E_CALL, rank, "rank or size changed after -EBUSY");
		CALL(0, shmcoll_barrier(c));
		CALL(0, shmcoll_wait(&r, &st));
		rc = st_check(rank, "receive across -EBUSY", &st, 1, 1, 100, 100, 100, 0);
		if (!rc)
			rc = gb_check(&g, 100, key_of(21, 1, 0, 1), rank, "receive across -EBUSY");
		if (rc)
			return rc;
		/* An eager send, finished in the background but not returned. */
		gen(sb, 100, key_of(21, 0, 1, 2));
		CALL(0, shmcoll_isend(sb, 100, SHMCOLL_UINT8, 1, 2, c, &r));
		CALL(0, shmcoll_barrier(c));
		CALL(-EBUSY, shmcoll_comm_destroy(c));
		CALL(0, shmcoll_wait(&r, NULL));
		/* A rendezvous send not yet matched. */
		gen(sb, 200000, key_of(21, 0, 1, 3));
		CALL(0, shmcoll_isend(sb, 200000, SHMCOLL_UINT8, 1, 3, c, &r));
		CALL(-EBUSY, shmcoll_comm_destroy(c));
		CALL(0, shmcoll_barrier(c));
		CALL(0, shmcoll_wait(&r, NULL));
	} else {
		CALL(0, shmcoll_barrier(c));
		gen(sb, 100, key_of(21, 1, 0, 1));
		CALL(0, shmcoll_send(sb, 100, SHMCOLL_UINT8, 0, 1, c));
		CALL(0, shmcoll_barrier(c));
		CALL(0, shmcoll_recv(g.p, 100, SHMCOLL_UINT8, 0, 2, c, &st));
		rc = gb_check(&g, 100, key_of(21, 0, 1, 2), rank, "eager send across -EBUSY");
		if (rc)
			return rc;
		CALL(0, shmcoll_barrier(c));
		gb_reset(&g);
		CALL(0, shmcoll_recv(g.p, 200000, SHMCOLL_UINT8, 0, 3, c, &st));
		rc = gb_check(&g, 200000, key_of(21, 0, 1, 3), rank, "rendezvous across -EBUSY");
		if (rc)
			return rc;
	}
	free(sb);
	gb_free(&g);
	/* The harness destroys the communicator now: it must succeed (TH_EXIT_DESTROY). */
	return sum_check(c, rank);
}

Test(p2p, destroy_busy, .timeout = 60)
{
	struct targ a = {0};

	run_with("destroy with requests outstanding", 2, 0, destroy_busy_body, &a, 2 * MIB);
	run_with("destroy with requests outstanding", 2, 1, destroy_busy_body, &a, 2 * MIB);
}

/* ---- 15. randomized matching ---- */

#define SEED 0x5eedf00dull

struct smsg {
	int dest, tag, heap;
	size_t size;
};

/* Message j of sender s in the plan every rank can compute. */
static void plan(uint64_t seed, size_t eager, int heap_ok, int P, int s, int j, struct smsg *m)
{
	uint64_t h = th_hash(seed, s, (uint64_t)j);
	unsigned k = (unsigned)((h >> 16) % 16);
	size_t x = (size_t)(h >> 24);

	m->dest = (int)(h % (uint64_t)P);
	m->tag = (int)((h >> 8) % 4);
	m->heap = 0;
	if (k < 7) {
		m->size = x % 200;
	} else if (k < 10) {
		m->size = eager - 1 + x % 3;
	} else if (k < 13) {
		m->size = 1000 + x % 6000;
	} else {
		m->size = eager + 1 + x % 40000;
		m->heap = heap_ok && k == 15;
	}
}

#define STRESS_MAXSIZE (EAGER_DEFAULT + 40001)

/* Incoming messages of this rank, per source in send order. */
struct sin {
	int j, tag, done;
	size_t size;
};

/* The earliest message of src not yet received (with tag, or any tag if tag < 0): its
 * index in in[src], or -1. */
static int head_of(struct sin *const *in, const int *nin, int src, int tag)
{
	for (int i = 0; i < nin[src]; i++)
		if (!in[src][i].done && (tag < 0 || in[src][i].tag == tag))
			return i;
	return -1;
}

/* Checks one received message against the plan, marks it done. want_src, want_tag: the
 * receive's (SHMCOLL_ANY_* for wildcards). Receives are checked in the order they were
 * posted, so a second receive of one stream finds the first's message done. */
static int stress_got(int rank, const struct targ *a, struct sin **in, const int *nin, int P,
                      const shmcoll_status *st, const struct gbuf *g, int want_src, int want_tag)
{
	int src = st->source, tag = st->tag, i;
	char what[128];

	if (src < 0 || src >= P || tag < 0 || tag > 3 || (want_src >= 0 && src != want_src) ||
	    (want_tag >= 0 && tag != want_tag))
		return fail(E_ORDER, rank, "stress: receive (%d, %d) got source %d tag %d",
		            want_src, want_tag, src, tag);
	/* Non-overtaking: the earliest of its (source, tag); with SHMCOLL_ANY_TAG, the
	 * earliest of its source. */
	i = head_of(in, nin, src, want_tag < 0 ? -1 : tag);
	if (i < 0 || in[src][i].tag != tag)
		return fail(
		    E_ORDER, rank,
		    "stress: receive (%d, %d) got a message from %d with tag %d that is not "
		    "the earliest one left (index %d)",
		    want_src, want_tag, src, tag, i);
	snprintf(what, sizeof(what), "stress: message %d of rank %d (tag %d, %zu bytes)",
	         in[src][i].j, src, tag, in[src][i].size);
	if (st_check(rank, what, st, src, tag, in[src][i].size, in[src][i].size, in[src][i].size,
	             0))
		return E_STATUS;
	if (gb_check(g, in[src][i].size, key_of(a->seed, src, rank, (uint64_t)in[src][i].j), rank,
	             what))
		return E_DATA;
	in[src][i].done = 1;
	return 0;
}

/* Picks a message not yet received, from h: its source and index there. */
static void pick(uint64_t h, struct sin **in, const int *nin, const int *left, int P, int *src,
                 int *idx)
{
	int s = (int)(h % (uint64_t)P), d, k, i;

	for (d = 0; d < P && !left[(s + d) % P]; d++)
		;
	s = (s + d) % P;
	k = (int)((h >> 32) % (uint64_t)left[s]);
	for (i = 0; i < nin[s]; i++)
		if (!in[s][i].done && k-- == 0)
			break;
	*src = s;
	*idx = i;
}

/* Every rank isends its planned messages (to any rank, itself too; some from the heap),
 * then receives what the plan sends it, each receive chosen at random among: specific,
 * SHMCOLL_ANY_SOURCE with a tag, a source with SHMCOLL_ANY_TAG, both wildcards, and a
 * window of two specific receives; by recv, irecv + wait, or irecv + test. Each one
 * targets a message still due, so every receive finds one; each message must be the
 * earliest left of its (source, tag), or of its source under SHMCOLL_ANY_TAG. */
static int stress_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	int P = shmcoll_comm_size(c), M = a->nmsgs, s, j, i, i2, s2, kind, how, left_all = 0, rc;
	int nin[TH_MAX_RANKS] = {0}, left[TH_MAX_RANKS] = {0}, done, step;
	struct sin *in[TH_MAX_RANKS];
	size_t heap_need = 0, hsum, area = 0, off, hoff;
	shmcoll_request **sreq = calloc((size_t)M, sizeof(*sreq)), *rq[2];
	shmcoll_status st, sts[2];
	unsigned char *sb, *heap;
	struct smsg m;
	struct gbuf g[2];
	uint64_t h;

	if (!sreq)
		return E_NOMEM;
	/* Every rank's heap need, for one collective shmcoll_malloc of the largest. */
	for (s = 0; s < P; s++) {
		for (j = 0, hsum = 0; j < M; j++) {
			plan(a->seed, a->eager, !a->mode, P, s, j, &m);
			hsum += m.heap ? m.size : 0;
			if (s == rank && !m.heap)
				area += m.size;
			if (m.dest == rank)
				nin[s]++;
		}
		heap_need = hsum > heap_need ? hsum : heap_need;
		in[s] = calloc((size_t)nin[s] + 1, sizeof(*in[s]));
		if (!in[s])
			return E_NOMEM;
		for (j = 0, i = 0; j < M; j++) {
			plan(a->seed, a->eager, !a->mode, P, s, j, &m);
			if (m.dest == rank)
				in[s][i++] = (struct sin){.j = j, .tag = m.tag, .size = m.size};
		}
		left[s] = nin[s];
		left_all += nin[s];
	}
	/* heap_need is the same on every rank: all allocate, or none. */
	heap = heap_need ? shmcoll_malloc(c, heap_need) : NULL;
	if (heap_need && !heap)
		return fail(E_SYMALLOC, rank, "shmcoll_malloc(%zu) (heap %zu): %s", heap_need,
		            shmcoll__probe_heap_bytes(c), shmcoll_last_error(c));
	sb = malloc(area + 1);
	if (!sb || gb_new(&g[0], STRESS_MAXSIZE) || gb_new(&g[1], STRESS_MAXSIZE))
		return E_NOMEM;
	for (j = 0, off = 0, hoff = 0; j < M; j++) {
		unsigned char *p;

		plan(a->seed, a->eager, !a->mode, P, rank, j, &m);
		p = m.heap ? heap + hoff : sb + off;
		*(m.heap ? &hoff : &off) += m.size;
		gen(p, m.size, key_of(a->seed, rank, m.dest, (uint64_t)j));
		CALL(0, shmcoll_isend(p, m.size, SHMCOLL_UINT8, m.dest, m.tag, c, &sreq[j]));
	}
	for (step = 0; left_all > 0; step++) {
		int want_src, want_tag;

		h = th_hash(a->seed ^ 0xabcdef, rank, (uint64_t)step);
		pick(h, in, nin, left, P, &s, &i);
		kind = (int)((h >> 20) % 6);
		how = (int)((h >> 28) % 3);
		want_src = kind == 2 || kind == 4 ? SHMCOLL_ANY_SOURCE : s;
		want_tag = kind == 3 || kind == 4 ? SHMCOLL_ANY_TAG : in[s][i].tag;
		th_breadcrumb("stress step %d: receive (%d, %d) kind %d how %d", step, want_src,
		              want_tag, kind, how);
		if (kind == 5 && left_all >= 2) {
			/* Two specific receives at once; a second of one stream gets the next. */
			pick(th_mix(h), in, nin, left, P, &s2, &i2);
			if (s2 == s && i2 == i)
				goto single;
			gb_reset(&g[0]);
			gb_reset(&g[1]);
			CALL(0, shmcoll_irecv(g[0].p, g[0].cap, SHMCOLL_UINT8, s, in[s][i].tag, c,
			                      &rq[0]));
			CALL(0, shmcoll_irecv(g[1].p, g[1].cap, SHMCOLL_UINT8, s2, in[s2][i2].tag,
			                      c, &rq[1]));
			CALL(0, shmcoll_waitall(2, rq, sts));
			rc = stress_got(rank, a, in, nin, P, &sts[0], &g[0], s, in[s][i].tag);
			if (rc)
				return rc;
			rc = stress_got(rank, a, in, nin, P, &sts[1], &g[1], s2, in[s2][i2].tag);
			if (rc)
				return rc;
			left[s]--;
			left[s2]--;
			left_all -= 2;
			continue;
		}
	single:
		gb_reset(&g[0]);
		st_poison(&st);
		if (how == 0) {
			CALL(0, shmcoll_recv(g[0].p, g[0].cap, SHMCOLL_UINT8, want_src, want_tag, c,
			                     &st));
		} else {
			CALL(0, shmcoll_irecv(g[0].p, g[0].cap, SHMCOLL_UINT8, want_src, want_tag,
			                      c, &rq[0]));
			if (how == 1)
				CALL(0, shmcoll_wait(&rq[0], &st));
			else
				for (done = 0; !done;) {
					CALL(0, shmcoll_test(&rq[0], &done, &st));
					if (!done)
						sched_yield();
				}
		}
		rc = stress_got(rank, a, in, nin, P, &st, &g[0], want_src, want_tag);
		if (rc)
			return rc;
		left[st.source]--;
		left_all--;
	}
	CALL(0, shmcoll_waitall((size_t)M, sreq, NULL));
	for (s = 0; s < P; s++)
		for (i = 0; i < nin[s]; i++)
			if (!in[s][i].done || left[s])
				return fail(E_ORDER, rank,
				            "stress: message %d of rank %d never came", in[s][i].j,
				            s);
	for (s = 0; s < P; s++)
		free(in[s]);
	free(sreq);
	free(sb);
	gb_free(&g[0]);
	gb_free(&g[1]);
	CALL(0, shmcoll_free(c, heap)); /* NULL: a no-op */
	return sum_check(c, rank);
}

Test(p2p, stress_p4, .timeout = 200)
{
	struct targ a = {.seed = SEED, .nmsgs = 64};

	TH_PROCESSES_ONLY();
	run_with("randomized matching", 4, 0, stress_body, &a, 4 * MIB);
	a.seed = SEED + 1;
	run_with("randomized matching, another seed", 4, 0, stress_body, &a, 4 * MIB);
}

Test(p2p, stress_p8, .timeout = 200)
{
	struct targ a = {.seed = SEED + 8, .nmsgs = 40};

	TH_PROCESSES_ONLY();
	run_with("randomized matching", 8, 0, stress_body, &a, 8 * MIB);
}

Test(p2p, stress_threads, .timeout = 200)
{
	struct targ a = {.seed = SEED + 4, .nmsgs = 48};

	run_with("randomized matching", 4, 1, stress_body, &a, 4 * MIB);
}

/* The smallest rings (256 bytes: 24-byte eager messages, 64-byte data frames): nearly every
 * message by rendezvous, streamed a frame at a time, sends queued behind each other. */
Test(p2p, stress_small_rings, .timeout = 200)
{
	struct targ a = {.seed = SEED + 16, .nmsgs = 32, .mode = 1 /* no heap */};

	run_with("randomized matching, smallest arena", 4, 0, stress_body, &a,
	         (size_t)shmcoll__arena_min_bytes(4));
	cr_assert_eq(a.eager, 24, "the smallest ring is 256 bytes: eager %zu", a.eager);
	a.seed++;
	run_with("randomized matching, smallest arena", 8, 0, stress_body, &a,
	         (size_t)shmcoll__arena_min_bytes(8));
	a.seed++;
	run_with("randomized matching, smallest arena", 3, 1, stress_body, &a,
	         (size_t)shmcoll__arena_min_bytes(3));
}

/* ---- more: communicators, progress, the environment ---- */

/* Messages on a dup and on its parent never match each other (one waitany over requests of
 * both); in a split, sources and destinations are ranks of the new communicator. */
static int comms_body(shmcoll_comm *c, int rank, void *arg)
{
	int P = shmcoll_comm_size(c), dest = (rank + 1) % P, src = (rank + P - 1) % P, k, rc;
	int color = rank % 2, members[TH_MAX_RANKS], m = 0, me = -1, sp, sdst, ssrc;
	unsigned char out[2][300], sout[100];
	shmcoll_request *reqs[4], *rr[2];
	shmcoll_comm *d = NULL, *sc = NULL;
	shmcoll_status st;
	struct gbuf g[2];
	size_t idx;

	(void)arg;
	CALL(0, shmcoll_comm_dup(c, &d));
	for (k = 0; k < 2; k++) {
		gen(out[k], sizeof(out[k]), key_of(22 + (uint64_t)k, rank, dest, 0));
		if (gb_new(&g[k], sizeof(out[k])))
			return E_NOMEM;
	}
	/* The same tag, the same peers, on both. */
	CALL(0, shmcoll_isend(out[0], 300, SHMCOLL_UINT8, dest, 1, c, &reqs[0]));
	CALL(0, shmcoll_isend(out[1], 300, SHMCOLL_UINT8, dest, 1, d, &reqs[1]));
	CALL(0, shmcoll_irecv(g[1].p, 300, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, d,
	                      &rr[1]));
	CALL(0, shmcoll_irecv(g[0].p, 300, SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG, c,
	                      &rr[0]));
	for (k = 0; k < 2; k++) {
		idx = SIZE_MAX;
		st_poison(&st);
		CALL(0, shmcoll_waitany(2, rr, &idx, &st));
		if (idx > 1 || rr[idx])
			return fail(E_REQ, rank, "waitany over two communicators: index %zu", idx);
		rc = st_check(rank, idx ? "on the dup" : "on the parent", &st, src, 1, 300, 300,
		              300, 0);
		if (!rc)
			rc = gb_check(&g[idx], 300, key_of(22 + idx, src, rank, 0), rank,
			              idx ? "on the dup" : "on the parent");
		if (rc)
			return rc;
	}
	CALL(0, shmcoll_waitall(2, reqs, NULL));
	/* Split by parity, ranked in reverse: new rank k is the k-th largest of the color. */
	CALL(0, shmcoll_comm_split(c, color, -rank, &sc));
	for (k = P - 1; k >= 0; k--)
		if (k % 2 == color) {
			if (k == rank)
				me = m;
			members[m++] = k;
		}
	if (shmcoll_comm_size(sc) != m || shmcoll_comm_rank(sc) != me)
		return fail(E_CALL, rank, "split: rank %d of %d, want %d of %d",
		            shmcoll_comm_rank(sc), shmcoll_comm_size(sc), me, m);
	sp = m;
	sdst = (me + 1) % sp;
	ssrc = (me + sp - 1) % sp;
	gb_free(&g[0]);
	if (gb_new(&g[0], sizeof(sout)))
		return E_NOMEM;
	gen(sout, sizeof(sout), key_of(24, rank, members[sdst], 0));
	CALL(0, shmcoll_sendrecv(sout, sizeof(sout), SHMCOLL_UINT8, sdst, 2, g[0].p, sizeof(sout),
	                         SHMCOLL_UINT8, SHMCOLL_ANY_SOURCE, 2, sc, &st));
	rc =
	    st_check(rank, "in a split", &st, ssrc, 2, sizeof(sout), sizeof(sout), sizeof(sout), 0);
	if (!rc)
		rc = gb_check(&g[0], sizeof(sout), key_of(24, members[ssrc], rank, 0), rank,
		              "in a split");
	if (rc)
		return rc;
	gb_free(&g[0]);
	gb_free(&g[1]);
	CALL(0, shmcoll_comm_destroy(sc));
	CALL(0, shmcoll_comm_destroy(d));
	return sum_check(c, rank);
}

Test(p2p, dup_and_split, .timeout = 120)
{
	struct targ a = {0};

	run_with("dup and split", 4, 0, comms_body, &a, 4 * MIB);
	run_with("dup and split", 3, 1, comms_body, &a, 4 * MIB);
}

enum { PROG_IPROBE, PROG_TEST, PROG_NONE };

/* Rank 0 starts a streamed rendezvous send (its data moves only when rank 0 progresses),
 * then makes other calls on the communicator - iprobe, or shmcoll_test of an unrelated
 * receive - until rank 1 says (through shared memory) that its receive is complete; with
 * PROG_NONE it makes no call at all, which only a progress thread can cover. */
static int progress_body(shmcoll_comm *c, int rank, void *arg)
{
	const struct targ *a = arg;
	const size_t n = MIB + 5;
	unsigned char *sb = malloc(n);
	shmcoll_request *r, *other = NULL;
	shmcoll_status st;
	struct gbuf g;
	unsigned char tiny = 0;
	int flag, done, rc;

	if (!sb || shmcoll_comm_size(c) != 2)
		return E_NOMEM;
	if (rank == 0) {
		if (a->mode == PROG_TEST)
			CALL(0, shmcoll_irecv(&tiny, 1, SHMCOLL_UINT8, 1, 99, c, &other));
		gen(sb, n, key_of(25, 0, 1, 0));
		CALL(0, shmcoll_isend(sb, n, SHMCOLL_UINT8, 1, 5, c, &r));
		while (atomic_load(a->flag) == 0) {
			if (a->mode == PROG_IPROBE)
				CALL(0, shmcoll_iprobe(SHMCOLL_ANY_SOURCE, SHMCOLL_ANY_TAG,
				                       SHMCOLL_UINT8, c, &flag, NULL));
			else if (a->mode == PROG_TEST)
				CALL(0, shmcoll_test(&other, &done, NULL));
			sched_yield();
		}
		if (atomic_load(a->flag) != 1)
			return fail(E_CALL, rank, "rank 1's receive failed");
		CALL(0, shmcoll_wait(&r, NULL));
		CALL(0, shmcoll_wait(&other, NULL));
		free(sb);
		return sum_check(c, rank);
	}
	if (gb_new(&g, n))
		return E_NOMEM;
	rc = shmcoll_recv(g.p, n, SHMCOLL_UINT8, 0, 5, c, &st);
	if (rc) {
		atomic_store(a->flag, 2);
		return fail(E_CALL, rank, "recv of a %zu-byte message while the sender %s: %d (%s)",
		            n,
		            a->mode == PROG_NONE ? "makes no call (SHMCOLL_PROGRESS_THREAD=1)"
		                                 : "calls other functions",
		            rc, shmcoll_last_error(c));
	}
	rc = gb_check(&g, n, key_of(25, 0, 1, 0), rank, "progress");
	atomic_store(a->flag, rc ? 2 : 1);
	if (a->mode == PROG_TEST)
		CALL(0, shmcoll_send(&tiny, 1, SHMCOLL_UINT8, 0, 99, c));
	gb_free(&g);
	free(sb);
	return rc ? rc : sum_check(c, rank);
}

static void run_progress(int mode, const char *what, int timeout_ms)
{
	_Atomic int *flag =
	    mmap(NULL, sizeof(*flag), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct targ a = {.mode = mode};
	th_opts o = opts_for(4 * MIB);
	th_result res;

	cr_assert(flag != MAP_FAILED);
	atomic_init(flag, 0);
	a.flag = flag;
	o.timeout_ms = timeout_ms;
	th_run_ranks(2, progress_body, &a, &o, &res);
	munmap((void *)flag, sizeof(*flag));
	cr_assert(res.ok, "%s: %s", what, res.summary);
}

Test(p2p, progress_in_other_calls, .timeout = 120)
{
	TH_PROCESSES_ONLY();
	run_progress(PROG_IPROBE, "the sender polls shmcoll_iprobe", TIMEOUT_MS);
	run_progress(PROG_TEST, "the sender polls shmcoll_test of another request", TIMEOUT_MS);
}

/* SHMCOLL_PROGRESS_THREAD=1: a thread of each rank moves operations while the caller
 * computes. A streamed send whose sender makes no call at all completes; and windows,
 * randomized matching and point-to-point beside collectives run with the thread beside the
 * caller (ranks as threads too, for ThreadSanitizer). */
Test(p2p, progress_thread, .timeout = 200)
{
	struct targ a = {0};

	cr_assert(setenv("SHMCOLL_PROGRESS_THREAD", "1", 1) == 0);
	if (!TH_UNDER_TSAN)
		run_progress(PROG_NONE, "SHMCOLL_PROGRESS_THREAD=1, the sender makes no call",
		             TIMEOUT_MS);
	run_with("progress thread: windows", 2, 0, window_body, &a, 4 * MIB);
	run_with("progress thread: windows", 2, 1, window_body, &a, 4 * MIB);
	run_with("progress thread: with collectives", 3, 1, with_colls_body, &a, 4 * MIB);
	a.seed = SEED + 32;
	a.nmsgs = 48;
	run_with("progress thread: randomized matching", 4, 0, stress_body, &a, 4 * MIB);
	run_with("progress thread: randomized matching", 4, 1, stress_body, &a, 4 * MIB);
	unsetenv("SHMCOLL_PROGRESS_THREAD");
}

/* A bad SHMCOLL_P2P_EAGER or SHMCOLL_P2P_CMA_MIN: create fails with -EINVAL, saying which,
 * and leaves no arena behind. */
Test(p2p, bad_environment, .timeout = 30)
{
	static const char *const vars[] = {"SHMCOLL_P2P_EAGER", "SHMCOLL_P2P_CMA_MIN"};
	static const char *const vals[] = {"lots", "-5", "12k", "99999999999999999999"};
	char job[64], path[256];
	shmcoll_comm *comm;
	size_t i, k;
	int rc;

	for (i = 0; i < 2; i++)
		for (k = 0; k < 4; k++) {
			shmcoll_config cfg = {.rank = 0, .size = 1, .job = job, .arena_bytes = MIB};

			th_job_name(job, sizeof(job));
			cr_assert(setenv(vars[i], vals[k], 1) == 0);
			comm = (shmcoll_comm *)(void *)job;
			rc = shmcoll_comm_create(&cfg, &comm);
			cr_assert_eq(rc, -EINVAL, "%s=%s: create returned %d", vars[i], vals[k],
			             rc);
			cr_assert_null(comm, "%s=%s: *comm not NULL after a failed create", vars[i],
			               vals[k]);
			cr_assert(strstr(shmcoll_last_error(NULL), vars[i]),
			          "%s=%s: the message \"%s\" does not name it", vars[i], vals[k],
			          shmcoll_last_error(NULL));
			cr_assert(shmcoll__arena_name(path, sizeof(path), job) == 0);
			memmove(path + 8, path, strlen(path) + 1);
			memcpy(path, "/dev/shm", 8);
			cr_assert(access(path, F_OK) != 0, "%s=%s: %s left behind", vars[i],
			          vals[k], path);
			unsetenv(vars[i]);
		}
}

/* ---- the rings' counters wrap ---- */

#define WRAP_MSG   (32 * MIB)
#define WRAP_COUNT 132 /* 4.125 GiB: past 2^32 bytes through the ring from rank 0 to 1 */

/* The rings' heads and tails are 32-bit counters that only grow: rank 0 streams more than
 * 4 GiB to rank 1 (data frames one way, clear-to-send frames the other), each message
 * stamped with its number, all checked. */
static int wrap_body(shmcoll_comm *c, int rank, void *arg)
{
	unsigned char *buf = malloc(WRAP_MSG), *want = rank ? malloc(WRAP_MSG) : NULL;
	shmcoll_status st;
	uint64_t stamp;
	int k;

	(void)arg;
	if (!buf || (rank && !want))
		return E_NOMEM;
	gen(rank ? want : buf, WRAP_MSG, key_of(26, 0, 1, 0));
	for (k = 0; k < WRAP_COUNT; k++) {
		th_breadcrumb("wrap: message %d of %d", k, WRAP_COUNT);
		stamp = (uint64_t)k * 0x100000001ull;
		if (rank == 0) {
			memcpy(buf + WRAP_MSG / 2, &stamp, sizeof(stamp));
			CALL(0, shmcoll_send(buf, WRAP_MSG, SHMCOLL_UINT8, 1, 3, c));
			continue;
		}
		CALL(0, shmcoll_recv(buf, WRAP_MSG, SHMCOLL_UINT8, 0, 3, c, &st));
		memcpy(want + WRAP_MSG / 2, &stamp, sizeof(stamp));
		if (st.bytes != WRAP_MSG || memcmp(buf, want, WRAP_MSG))
			return fail(E_DATA, rank, "wrap: message %d (%zu bytes) is wrong", k,
			            st.bytes);
	}
	free(buf);
	free(want);
	return sum_check(c, rank);
}

Test(p2p, counters_wrap, .timeout = 300)
{
	struct targ a = {0};

	TH_PROCESSES_ONLY();
	run_with("more than 4 GiB each way", 2, 0, wrap_body, &a, 4 * MIB);
}
