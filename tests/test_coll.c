/* test_coll.c - correctness of the nine collectives through the public API:
 * every dtype x valid op x P x count x root x in place x symmetric buffers,
 * each rank checking its own output (and every byte around it) exactly. */
#include <criterion/criterion.h>

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "shm/arena.h"
#include "tests/matrix.h"

static void run_matrix(th_coll coll, int P)
{
	struct th_matrix m = {.coll = coll, .phase = PHASE_SMALL_ARENA};
	th_opts o = {.arena_bytes = ARENA_SMALL, .timeout_ms = TIMEOUT_MS, .wall_ms = 180000};
	size_t map_bytes = TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int);
	th_result res;

	if (coll == TH_BARRIER) {
		void *p = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		               -1, 0);

		cr_assert(p != MAP_FAILED, "mmap of the barrier counters failed");
		m.counters = p;
		th_run_ranks(P, th_matrix_body, &m, &o, &res);
		munmap(p, map_bytes);
		cr_assert(res.ok, "barrier x %d rounds: %s", BARRIER_ROUNDS, res.summary);
		return;
	}
	th_run_ranks(P, th_matrix_body, &m, &o, &res);
	cr_assert(res.ok, "%s, arena %d: %s", th_coll_name(coll), ARENA_SMALL, res.summary);

	m.phase = PHASE_SYM;
	o.arena_bytes = th_matrix_sym_arena(coll, P);
	o.wall_ms = 100000;
	th_run_ranks(P, th_matrix_body, &m, &o, &res);
	cr_assert(res.ok, "%s, symmetric buffers, arena %zu: %s", th_coll_name(coll), o.arena_bytes,
	          res.summary);
}

#define COLL_TESTS(name, which)                                                                    \
	Test(coll, name##_p1, .timeout = 300)                                                      \
	{                                                                                          \
		run_matrix(which, 1);                                                              \
	}                                                                                          \
	Test(coll, name##_p2, .timeout = 300)                                                      \
	{                                                                                          \
		run_matrix(which, 2);                                                              \
	}                                                                                          \
	Test(coll, name##_p3, .timeout = 300)                                                      \
	{                                                                                          \
		run_matrix(which, 3);                                                              \
	}                                                                                          \
	Test(coll, name##_p4, .timeout = 300)                                                      \
	{                                                                                          \
		run_matrix(which, 4);                                                              \
	}                                                                                          \
	Test(coll, name##_p8, .timeout = 300)                                                      \
	{                                                                                          \
		run_matrix(which, 8);                                                              \
	}

COLL_TESTS(allreduce, TH_ALLREDUCE)
COLL_TESTS(reduce, TH_REDUCE)
COLL_TESTS(bcast, TH_BCAST)
COLL_TESTS(allgather, TH_ALLGATHER)
COLL_TESTS(reduce_scatter, TH_REDUCE_SCATTER)
COLL_TESTS(gather, TH_GATHER)
COLL_TESTS(scatter, TH_SCATTER)
COLL_TESTS(alltoall, TH_ALLTOALL)
COLL_TESTS(barrier, TH_BARRIER)

/* Every protocol of a collective, forced through SHMCOLL_ALGO, passes the
 * same matrix (the auto choice above runs each only on its side of the
 * crossover). Criterion runs each test in its own process, so the variable
 * set here reaches only the ranks this test forks. */
static void run_forced(th_coll coll, const char *spec, int P)
{
	cr_assert(setenv("SHMCOLL_ALGO", spec, 1) == 0);
	run_matrix(coll, P);
}

#define ALGO_TESTS(name, which, spec)                                                              \
	Test(coll, name##_p2, .timeout = 300)                                                      \
	{                                                                                          \
		run_forced(which, spec, 2);                                                        \
	}                                                                                          \
	Test(coll, name##_p3, .timeout = 300)                                                      \
	{                                                                                          \
		run_forced(which, spec, 3);                                                        \
	}                                                                                          \
	Test(coll, name##_p8, .timeout = 300)                                                      \
	{                                                                                          \
		run_forced(which, spec, 8);                                                        \
	}

ALGO_TESTS(allreduce_flat, TH_ALLREDUCE, "allreduce:flat")
ALGO_TESTS(allreduce_direct, TH_ALLREDUCE, "allreduce:direct")
ALGO_TESTS(reduce_flat, TH_REDUCE, "reduce:flat")
ALGO_TESTS(reduce_direct, TH_REDUCE, "reduce:direct")
ALGO_TESTS(bcast_flat, TH_BCAST, "bcast:flat")
ALGO_TESTS(bcast_tree, TH_BCAST, "bcast:tree")
ALGO_TESTS(barrier_flat, TH_BARRIER, "barrier:flat")
ALGO_TESTS(barrier_tree, TH_BARRIER, "barrier:tree")
/* The single-copy protocol at every size (auto runs it on large blocks
 * only), and the staged one at every size (auto leaves it small blocks). */
ALGO_TESTS(bcast_cma, TH_BCAST, "bcast:cma")
ALGO_TESTS(allgather_cma, TH_ALLGATHER, "allgather:cma")
ALGO_TESTS(gather_cma, TH_GATHER, "gather:cma")
ALGO_TESTS(scatter_cma, TH_SCATTER, "scatter:cma")
ALGO_TESTS(alltoall_cma, TH_ALLTOALL, "alltoall:cma")
ALGO_TESTS(allgather_flat, TH_ALLGATHER, "allgather:flat")
ALGO_TESTS(gather_flat, TH_GATHER, "gather:flat")
ALGO_TESTS(scatter_flat, TH_SCATTER, "scatter:flat")
ALGO_TESTS(alltoall_flat, TH_ALLTOALL, "alltoall:flat")

/* With single copies turned off, a forced "cma" falls back to staging on
 * every rank alike. */
Test(coll, cma_off_falls_back_p3, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_CMA", "0", 1) == 0);
	run_forced(TH_ALLTOALL, "cma", 3);
}

/* The 32-bit step counter wraps (2^32 small calls take minutes). Every rank jumps to a few
 * steps before the wrap, then runs a collective's small-arena matrix: the first calls, and
 * so the wrap, are the small ones; run_wrapped_large puts a multi-chunk call on it. The jump
 * needs every rank outside any call, so the ranks meet in shared memory around it. */
struct wrap {
	struct th_matrix m;
	uint32_t start;      /* the last step before the matrix */
	int large;           /* instead of the matrix, one call of th_large_count, root 1 */
	_Atomic int meet[2]; /* ranks that finished create; ranks that jumped */
};

/* One checked call of many chunks. */
static int wrap_large(shmcoll_comm *c, th_coll coll)
{
	int P = shmcoll_comm_size(c), err = 0, rc;
	th_variant v[TH_VARIANT_COUNT];
	th_case kc = {.coll = coll,
	              .dtype = SHMCOLL_FLOAT32,
	              .op = SHMCOLL_SUM,
	              .count = th_large_count(coll, SHMCOLL_FLOAT32, P, ARENA_SMALL),
	              .root = 1,
	              .variant = (th_coll_variants(coll, v), v[0]), /* bcast has only one */
	              .sym = TH_SYM_NONE};
	th_checker *ck = th_check_new(
	    c, th_coll_region_elems(coll, kc.count, P) * th_dtype_size(kc.dtype), 0, &err);

	if (!ck)
		return err;
	rc = th_check_run(ck, &kc);
	if (th_check_free(ck) && !rc)
		rc = TH_E_SYMFREE;
	return rc;
}

static void meet(_Atomic int *count, int P)
{
	atomic_fetch_add(count, 1);
	while (atomic_load(count) < P)
		sched_yield();
}

static int wrap_body(shmcoll_comm *c, int rank, void *arg)
{
	struct wrap *w = arg;
	int P = shmcoll_comm_size(c);

	meet(&w->meet[0], P);
	shmcoll__probe_jump_steps(c, w->start);
	meet(&w->meet[1], P);
	if (shmcoll__probe_my_step(c) != w->start)
		return 90;
	return w->large ? wrap_large(c, w->m.coll) : th_matrix_body(c, rank, &w->m);
}

static void run_wrapped_how(th_coll coll, int P, uint32_t before_wrap, int large)
{
	struct wrap *w =
	    mmap(NULL, sizeof(*w), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	th_opts o = {.arena_bytes = ARENA_SMALL, .timeout_ms = TIMEOUT_MS, .wall_ms = 180000};
	th_result res;

	cr_assert(w != MAP_FAILED);
	memset(w, 0, sizeof(*w));
	w->m = (struct th_matrix){.coll = coll, .phase = PHASE_SMALL_ARENA};
	w->start = UINT32_MAX - before_wrap;
	w->large = large;
	if (coll == TH_BARRIER) {
		w->m.counters = mmap(NULL, TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int),
		                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		cr_assert(w->m.counters != MAP_FAILED);
	}
	th_run_ranks(P, wrap_body, w, &o, &res);
	cr_assert(res.ok, "%s%s from step %u: %s", th_coll_name(coll), large ? " (large)" : "",
	          w->start, res.summary);
	if (w->m.counters)
		munmap((void *)w->m.counters, TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int));
	munmap(w, sizeof(*w));
}

static void run_wrapped(th_coll coll, int P, uint32_t before_wrap)
{
	run_wrapped_how(coll, P, before_wrap, 0);
}

static void run_wrapped_large(th_coll coll, int P, uint32_t before_wrap)
{
	run_wrapped_how(coll, P, before_wrap, 1);
}

#define WRAP_TESTS(name, which)                                                                    \
	Test(coll, name##_across_the_step_wrap_p3, .timeout = 300)                                 \
	{                                                                                          \
		run_wrapped(which, 3, 2);                                                          \
	}

WRAP_TESTS(allreduce, TH_ALLREDUCE)
WRAP_TESTS(reduce, TH_REDUCE)
WRAP_TESTS(bcast, TH_BCAST)
WRAP_TESTS(allgather, TH_ALLGATHER)
WRAP_TESTS(reduce_scatter, TH_REDUCE_SCATTER)
WRAP_TESTS(gather, TH_GATHER)
WRAP_TESTS(scatter, TH_SCATTER)
WRAP_TESTS(alltoall, TH_ALLTOALL)
WRAP_TESTS(barrier, TH_BARRIER)

/* A call of many chunks whose first steps are the last before the wrap, for each of the
 * four positions of its first step around it, in the protocols that count chunks from the
 * first (bcast's tree guards its first two). The matrix's large count is a long pipeline. */
Test(coll, pipelines_across_the_step_wrap_p3, .timeout = 300)
{
	static const char *const specs[] = {"bcast:tree", "bcast:flat", "allreduce:direct",
	                                    "reduce:direct"};
	uint32_t k;
	size_t i;

	for (i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		cr_assert(setenv("SHMCOLL_ALGO", specs[i], 1) == 0);
		for (k = 0; k < 4; k++)
			run_wrapped_large(specs[i][0] == 'b'   ? TH_BCAST
			                  : specs[i][0] == 'a' ? TH_ALLREDUCE
			                                       : TH_REDUCE,
			                  3, k);
	}
	unsetenv("SHMCOLL_ALGO");
}

/* Mixed: one communicator carries a long deterministic sequence of
 * different collectives, dtypes, counts, roots, buffer kinds and alignments
 * back to back, so state carried from one call to the next (sequence
 * numbers, slot parity, pipelines) is exercised across collective
 * boundaries. Once with the library's default arena, once with the least
 * arena the library takes for the rank count (shmcoll__arena_min_bytes: a
 * header page, the control blocks, 512-byte staging halves, no symmetric
 * heap), where every call above the inline size is a long pipeline. */
#define MIXED_CALLS     600
#define MIXED_MAX_COUNT 40000

static const size_t mixed_counts[] = {0,  1,  2,  3,  5,  7,    8,    15,
                                      16, 17, 63, 64, 65, 1000, 4097, 40000};

struct mixed {
	size_t sym_count; /* symmetric buffers hold this count per peer; 0: none */
};

static int mixed_body(shmcoll_comm *comm, int rank, void *arg)
{
	const struct mixed *mx = arg;
	int P = shmcoll_comm_size(comm), i, err;
	size_t maxb = (size_t)P * MIXED_MAX_COUNT * 8;
	th_variant vars[TH_VARIANT_COUNT];
	th_checker *ck;
	th_case kc;
	uint64_t h;
	int nv;

	(void)rank;
	ck = th_check_new(comm, maxb, (size_t)P * mx->sym_count * 8, &err);
	if (!ck)
		return err;
	for (i = 0; i < MIXED_CALLS; i++) {
		h = th_mix(0x6d69786564ull + (uint64_t)i);
		memset(&kc, 0, sizeof(kc));
		kc.coll = (th_coll)(h % TH_COLL_COUNT);
		kc.dtype = (shmcoll_dtype)((h >> 8) % SHMCOLL_DTYPE_COUNT);
		do {
			kc.op = (shmcoll_op)((h >> 16) % SHMCOLL_OP_COUNT);
			h = th_mix(h);
		} while (!th_op_valid(kc.dtype, kc.op));
		kc.count =
		    mixed_counts[(h >> 24) % (sizeof(mixed_counts) / sizeof(mixed_counts[0]))];
		kc.root = (int)((h >> 32) % (uint64_t)P);
		nv = th_coll_variants(kc.coll, vars);
		kc.variant = vars[(h >> 40) % (uint64_t)nv];
		kc.sym = (th_sym)((h >> 48) % TH_SYM_COUNT);
		if (!th_check_sym_fits(ck, &kc))
			kc.sym = TH_SYM_NONE;
		kc.misalign = (h >> 56) % 16;
		kc.skew = (h >> 60) % 4 == 0 ? 8 : (h >> 60) % 4 == 1 ? 1 : 0;
		th_check_run(ck, &kc);
	}
	err = th_check_first_error(ck);
	i = th_check_free(ck);
	return err ? err : i;
}

static void run_mixed(int P, size_t arena, size_t sym_count)
{
	struct mixed mx = {.sym_count = sym_count};
	th_opts o = {.arena_bytes = arena, .timeout_ms = TIMEOUT_MS, .wall_ms = 200000};
	th_result res;
	int i, rejected = 1;

	th_run_ranks(P, mixed_body, &mx, &o, &res);
	for (i = 0; i < P; i++)
		rejected = rejected && res.rank[i].code == TH_EXIT_CREATE;
	if (arena && rejected)
		cr_skip_test("the library rejects a %zu-byte arena for %d ranks (see stderr): %s",
		             arena, P, res.summary);
	cr_assert(res.ok, "mixed sequence of %d calls, arena %zu: %s", MIXED_CALLS, arena,
	          res.summary);
}

Test(coll, mixed_p1, .timeout = 300)
{
	run_mixed(1, 0, 1024);
}

Test(coll, mixed_p2, .timeout = 300)
{
	run_mixed(2, 0, 1024);
}

Test(coll, mixed_p3, .timeout = 300)
{
	run_mixed(3, 0, 1024);
}

Test(coll, mixed_p8, .timeout = 300)
{
	run_mixed(8, 0, 1024);
}

Test(coll, mixed_p16, .timeout = 300)
{
	run_mixed(16, 0, 256);
}

Test(coll, tiny_arena_p2, .timeout = 300)
{
	run_mixed(2, (size_t)shmcoll__arena_min_bytes(2), 0);
}

Test(coll, tiny_arena_p3, .timeout = 300)
{
	run_mixed(3, (size_t)shmcoll__arena_min_bytes(3), 0);
}

Test(coll, tiny_arena_p8, .timeout = 300)
{
	run_mixed(8, (size_t)shmcoll__arena_min_bytes(8), 0);
}

/* The mixed sequence with the non-default protocols forced, so calls of
 * different protocols follow each other on one communicator: the reuse of
 * call words, descriptors and staging halves across protocol boundaries. */
#define ALT_ALGOS "barrier:tree,bcast:tree,allreduce:direct,reduce:direct"

Test(coll, mixed_alt_p3, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_ALGO", ALT_ALGOS, 1) == 0);
	run_mixed(3, 0, 1024);
}

Test(coll, mixed_alt_p8, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_ALGO", ALT_ALGOS, 1) == 0);
	run_mixed(8, 0, 1024);
}

/* Single copies and staged calls interleaved on one communicator. */
Test(coll, mixed_cma_p3, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_ALGO", "cma", 1) == 0);
	run_mixed(3, 0, 1024);
}

Test(coll, mixed_cma_tiny_arena_p3, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_CMA_MIN", "4096", 1) == 0);
	run_mixed(3, (size_t)shmcoll__arena_min_bytes(3), 0);
}

Test(coll, mixed_flat_p8, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_ALGO", "flat", 1) == 0);
	run_mixed(8, 0, 1024);
}

/* Run-ahead: small rooted calls travel in a ring of message lines, so a root
 * may be several calls ahead of a reader (shm/arena.h, msg_ring).
 * Rank 0 broadcasts and scatters a long run of distinct values, the other
 * ranks gather a reduce to rank 1 in between and hold back now and then so
 * the root fills the ring; a staged bcast every so often makes the ring
 * change hands with the staging halves. Every rank checks every value. */
#define AHEAD_CALLS 3000

static int ahead_body(shmcoll_comm *c, int rank, void *arg)
{
	int P = shmcoll_comm_size(c), i, q;
	int64_t v[4], w[4], big[256];
	int32_t sc[8], one;

	(void)arg;
	for (i = 0; i < AHEAD_CALLS; i++) {
		for (q = 0; q < 4; q++)
			v[q] = rank == 0 ? (int64_t)i * 4 + q : -1;
		if (shmcoll_bcast(v, 4, SHMCOLL_INT64, 0, c) != 0)
			return 1;
		for (q = 0; q < 4; q++)
			if (v[q] != (int64_t)i * 4 + q)
				return 2;
		if (i % 3 == 0) {
			for (q = 0; q < P; q++)
				sc[q] = i + q;
			if (shmcoll_scatter(sc, &one, 1, SHMCOLL_INT32, 0, c) != 0)
				return 3;
			if (one != i + rank)
				return 4;
		}
		if (i % 5 == 0) {
			for (q = 0; q < 4; q++)
				v[q] = (int64_t)i + rank + q;
			if (shmcoll_reduce(v, w, 4, SHMCOLL_INT64, SHMCOLL_SUM, 1, c) != 0)
				return 5;
			for (q = 0; rank == 1 && q < 4; q++)
				if (w[q] != (int64_t)P * (i + q) + (int64_t)P * (P - 1) / 2)
					return 6;
		}
		if (i % 97 == 0) {
			for (q = 0; q < 256; q++)
				big[q] = rank == 0 ? (int64_t)i * q : 0;
			if (shmcoll_bcast(big, 256, SHMCOLL_INT64, 0, c) != 0)
				return 7;
			for (q = 0; q < 256; q++)
				if (big[q] != (int64_t)i * q)
					return 8;
		}
		/* A reader that falls behind lets the root run the ring full. */
		if (rank == P - 1 && i % 64 == 0)
			usleep(200);
	}
	return shmcoll_barrier(c) == 0 ? 0 : 9;
}

Test(coll, rooted_inline_run_ahead, .timeout = 300)
{
	th_opts o = {.timeout_ms = TIMEOUT_MS, .wall_ms = 200000};
	th_result res;

	for (int P = 2; P <= 4; P++) {
		th_run_ranks(P, ahead_body, NULL, &o, &res);
		cr_assert(res.ok, "P=%d: %s", P, res.summary);
	}
}

/* The second ring (shm/arena.h, SHMCOLL_MSG_BIG): rooted calls and alltoall at and around each
 * message size a layout may have (1 KiB, SHMCOLL_MSG_DATA_MID, SHMCOLL_MSG_DATA_MAX), so one call
 * travels inline and the next of one byte more is staged, with rank 0 running ahead of the
 * others through whole rings of them; reduce in place, whose root folds in its own message
 * slot; every value checked on every rank. Run in the default arena (32 KiB slots), in one of
 * 4 MiB (4 KiB slots from 4 ranks on) and in the least one (1 KiB messages, no second ring). */
#define EDGE_MAX   (2 * SHMCOLL_MSG_DATA_MAX)
#define EDGE_CALLS 200

static const size_t edge_bytes[] = {1024,
                                    1025,
                                    SHMCOLL_MSG_DATA_MID - 1,
                                    SHMCOLL_MSG_DATA_MID,
                                    SHMCOLL_MSG_DATA_MID + 1,
                                    SHMCOLL_MSG_DATA_MAX - 1,
                                    SHMCOLL_MSG_DATA_MAX,
                                    SHMCOLL_MSG_DATA_MAX + 1};

static uint8_t edge_value(int i, int rank, size_t q)
{
	return (uint8_t)(i * 31 + rank * 7 + (int)(q % 251));
}

static int edges_body(shmcoll_comm *c, int rank, void *arg)
{
	int P = shmcoll_comm_size(c), i, p;
	size_t n, q, each;
	uint8_t *b = malloc((size_t)P * EDGE_MAX), *r = malloc((size_t)P * EDGE_MAX);
	int rc = 0;

	(void)arg;
	if (!b || !r) {
		free(b);
		free(r);
		return 1;
	}
	for (i = 0; i < EDGE_CALLS && rc == 0; i++) {
		n = edge_bytes[i % (sizeof(edge_bytes) / sizeof(edge_bytes[0]))];
		for (q = 0; q < n; q++)
			b[q] = rank == 0 ? edge_value(i, 0, q) : 0;
		if (shmcoll_bcast(b, n, SHMCOLL_UINT8, 0, c) != 0)
			rc = 2;
		for (q = 0; rc == 0 && q < n; q++)
			if (b[q] != edge_value(i, 0, q))
				rc = 3;
		/* scatter of n bytes in all from rank i % P: each rank's block n / P (the root's
		 * own block stays out of its message, so a root in the middle sends two pieces) */
		each = n / (size_t)P;
		for (q = 0; rank == i % P && q < each * (size_t)P; q++)
			b[q] = edge_value(i, (int)(q / each), q % each);
		if (rc == 0 && shmcoll_scatter(b, r, each, SHMCOLL_UINT8, i % P, c) != 0)
			rc = 4;
		for (q = 0; rc == 0 && q < each; q++)
			if (r[q] != edge_value(i, rank, q))
				rc = 5;
		/* alltoall of n bytes a rank: block p of rank s is (s, p)'s */
		for (q = 0; q < each * (size_t)P; q++)
			b[q] = edge_value(i, rank * 16 + (int)(q / each), q % each);
		if (rc == 0 && shmcoll_alltoall(b, r, each, SHMCOLL_UINT8, c) != 0)
			rc = 11;
		for (q = 0; rc == 0 && q < each * (size_t)P; q++)
			if (r[q] != edge_value(i, (int)(q / each) * 16 + rank, q % each))
				rc = 12;
		/* gather of n bytes a rank to rank 1 */
		for (q = 0; q < n; q++)
			b[q] = edge_value(i, rank, q);
		if (rc == 0 && shmcoll_gather(b, r, n, SHMCOLL_UINT8, 1, c) != 0)
			rc = 6;
		for (p = 0; rc == 0 && rank == 1 && p < P; p++)
			for (q = 0; q < n; q++)
				if (r[(size_t)p * n + q] != edge_value(i, p, q)) {
					rc = 7;
					break;
				}
		/* reduce in place at the root (rank 0): max of every rank's bytes */
		for (q = 0; q < n; q++)
			b[q] = edge_value(i, rank, q);
		if (rc == 0 && shmcoll_reduce(b, b, n, SHMCOLL_UINT8, SHMCOLL_MAX, 0, c) != 0)
			rc = 8;
		for (q = 0; rc == 0 && rank == 0 && q < n; q++) {
			uint8_t want = 0;

			for (p = 0; p < P; p++)
				if (edge_value(i, p, q) > want)
					want = edge_value(i, p, q);
			if (b[q] != want)
				rc = 9;
		}
		/* A reader that falls behind lets rank 0 run the ring full. */
		if (rank == P - 1 && i % 16 == 0)
			usleep(200);
	}
	free(b);
	free(r);
	if (rc)
		return rc;
	return shmcoll_barrier(c) == 0 ? 0 : 10;
}

static void run_edges(size_t arena)
{
	th_opts o = {.arena_bytes = arena, .timeout_ms = TIMEOUT_MS, .wall_ms = 200000};
	th_result res;

	for (int P = 2; P <= 4; P++) {
		if (arena && arena < shmcoll__arena_min_bytes((uint32_t)P))
			continue;
		th_run_ranks(P, edges_body, NULL, &o, &res);
		cr_assert(res.ok, "P=%d, arena %zu: %s", P, arena, res.summary);
	}
}

Test(coll, rooted_message_edges, .timeout = 300)
{
	run_edges(0);
	run_edges((size_t)4 << 20);
	run_edges((size_t)shmcoll__arena_min_bytes(4));
}
