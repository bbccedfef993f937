/* test_coll.c - correctness of the nine collectives through the public API:
 * every dtype x valid op x P x count x root x in place x symmetric buffers,
 * each rank checking its own output (and every byte around it) exactly. */
#include <criterion/criterion.h>

#include <stdatomic.h>
#include <sys/mman.h>

#include "tests/harness.h"

/* A small arena keeps "larger than the arena" cheap: 64 KiB holds the
 * header, control lines, staging slots and the per-rank symmetric heaps of
 * up to 8 ranks (at P=8, as measured on the library: 1.75 KiB staging halves
 * and a 3.5 KiB heap per rank). Symmetric buffers live in that heap, so the
 * small-arena job uses them only for counts {0, 1, 7}; a second job with an
 * arena sized for them runs symmetric buffers at count 4097 and at a ~300 KB
 * message (several staging chunks read in place). Counts larger than the
 * arena are by definition ordinary buffers only. Integer inputs are
 * arbitrary values of the type (SUM/PROD wrap, AVG needs the exact sum);
 * float inputs are chosen so every result is exact or rounds exactly once
 * (see gen_float() in harness.c). */
#define ARENA_SMALL     (64 * 1024)
#define TIMEOUT_MS      30000
#define SMALL_SYM_COUNT 7
#define MID_COUNT       4097
#define SYM_LARGE_BYTES 300000
#define BARRIER_ROUNDS  2000

enum phase {
	PHASE_SMALL_ARENA, /* malloc: {0, 1, 7, 4097, large}; symmetric: {0, 1, 7} */
	PHASE_SYM,         /* symmetric (every kind but malloc): {4097, ~300 KB} */
};

struct matrix {
	th_coll coll;
	enum phase phase;
	_Atomic int *counters; /* barrier: one slot per rank, shared by the forked ranks */
};

static size_t sym_large_count(th_coll c, shmcoll_dtype dt, int P)
{
	return SYM_LARGE_BYTES / (th_coll_region_elems(c, 1, P) * th_dtype_size(dt)) + 5;
}

/* The largest region (bytes) of any dtype's case in phase ph. */
static size_t max_region_bytes(th_coll c, int P, enum phase ph)
{
	size_t max = th_coll_region_elems(c, MID_COUNT, P) * 8, b, n;
	int dt;

	for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++) {
		n = ph == PHASE_SMALL_ARENA ? th_large_count(c, dt, P, ARENA_SMALL)
		                            : sym_large_count(c, dt, P);
		b = th_coll_region_elems(c, n, P) * th_dtype_size(dt);
		if (b > max)
			max = b;
	}
	return max;
}

/* Runs kc if its buffer kind applies and fits; at counts 7 and 4097 with
 * malloc or symmetric buffers also at an odd address (misaligned by 1), and
 * with symmetric buffers at 8 * rank bytes further (a different heap offset
 * on every rank). */
static void run_case(th_checker *ck, th_case *kc)
{
	if (!th_sym_useful(kc->variant, kc->sym) || !th_check_sym_fits(ck, kc))
		return;
	kc->misalign = 0;
	kc->skew = 0;
	th_check_run(ck, kc);
	if (kc->count != SMALL_SYM_COUNT && kc->count != MID_COUNT)
		return;
	if (kc->sym == TH_SYM_NONE || kc->sym == TH_SYM_BOTH) {
		kc->misalign = 1;
		th_check_run(ck, kc);
	}
	if (kc->sym == TH_SYM_BOTH || kc->sym == TH_SYM_EVEN) {
		kc->misalign = 0;
		kc->skew = 8;
		th_check_run(ck, kc);
	}
}

/* Every root, variant and buffer kind of one (dtype, op, count); with edge
 * values (reductions) malloc buffers only. */
static void run_point(th_checker *ck, const struct matrix *m, int P, shmcoll_dtype dt,
                      shmcoll_op op, size_t count, int edge)
{
	th_variant vars[TH_VARIANT_COUNT];
	int nv = th_coll_variants(m->coll, vars);
	int nroots = th_coll_rooted(m->coll) && P > 1 ? 2 : 1, ri, vi, sy;
	th_case kc;

	for (ri = 0; ri < nroots; ri++) {
		for (vi = 0; vi < nv; vi++) {
			sy = m->phase == PHASE_SYM ? TH_SYM_BOTH : TH_SYM_NONE;
			for (; sy < TH_SYM_COUNT; sy++) {
				kc = (th_case){
				    .coll = m->coll,
				    .dtype = dt,
				    .op = op,
				    .count = count,
				    .root = ri ? P - 1 : 0,
				    .variant = vars[vi],
				    .sym = sy,
				    .edge = edge,
				};
				if (!edge || sy == TH_SYM_NONE)
					run_case(ck, &kc);
			}
		}
	}
}

static int matrix_body(shmcoll_comm *comm, int rank, void *arg)
{
	const struct matrix *m = arg;
	int P = shmcoll_comm_size(comm), dt, op, nops, err, rc;
	size_t maxb = max_region_bytes(m->coll, P, m->phase), sym;
	th_checker *ck;

	if (m->coll == TH_BARRIER)
		return th_barrier_rounds(comm, rank, P, m->counters, BARRIER_ROUNDS);

	sym = maxb;
	if (m->phase == PHASE_SMALL_ARENA)
		sym = th_coll_region_elems(m->coll, SMALL_SYM_COUNT, P) * 8;
	ck = th_check_new(comm, maxb, sym, &err);
	if (!ck)
		return err;
	nops = th_coll_reduces(m->coll) ? SHMCOLL_OP_COUNT : 1;
	for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++) {
		for (op = 0; op < nops; op++) {
			if (th_coll_reduces(m->coll) && !th_op_valid(dt, op))
				continue;
			if (m->phase == PHASE_SMALL_ARENA) {
				run_point(ck, m, P, dt, op, 0, 0);
				run_point(ck, m, P, dt, op, 1, 0);
				run_point(ck, m, P, dt, op, SMALL_SYM_COUNT, 0);
				run_point(ck, m, P, dt, op, MID_COUNT, 0);
				run_point(ck, m, P, dt, op,
				          th_large_count(m->coll, dt, P, ARENA_SMALL), 0);
				if (th_coll_reduces(m->coll)) {
					run_point(ck, m, P, dt, op, SMALL_SYM_COUNT, 1);
					run_point(ck, m, P, dt, op, MID_COUNT, 1);
				}
				continue;
			}
			run_point(ck, m, P, dt, op, MID_COUNT, 0);
			/* The ~300 KB symmetric reductions: SUM and MAX only
			 * (every op runs at 4097), to bound the time. */
			if (!th_coll_reduces(m->coll) || op == SHMCOLL_SUM || op == SHMCOLL_MAX)
				run_point(ck, m, P, dt, op, sym_large_count(m->coll, dt, P), 0);
		}
	}
	err = th_check_first_error(ck);
	rc = th_check_free(ck);
	return err ? err : rc;
}

/* The symmetric job's arena: two symmetric buffers per rank (plus guards)
 * for every rank, doubled for the library's own layout. */
static size_t sym_arena(th_coll c, int P)
{
	return 4 * (size_t)P * (max_region_bytes(c, P, PHASE_SYM) + 4096) + (1u << 20);
}

static void run_matrix(th_coll coll, int P)
{
	struct matrix m = {.coll = coll, .phase = PHASE_SMALL_ARENA};
	th_opts o = {.arena_bytes = ARENA_SMALL, .timeout_ms = TIMEOUT_MS, .wall_ms = 180000};
	size_t map_bytes = TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int);
	th_result res;

	if (coll == TH_BARRIER) {
		void *p = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		               -1, 0);

		cr_assert(p != MAP_FAILED, "mmap of the barrier counters failed");
		m.counters = p;
		th_run_ranks(P, matrix_body, &m, &o, &res);
		munmap(p, map_bytes);
		cr_assert(res.ok, "barrier x %d rounds: %s", BARRIER_ROUNDS, res.summary);
		return;
	}
	th_run_ranks(P, matrix_body, &m, &o, &res);
	cr_assert(res.ok, "%s, arena %d: %s", th_coll_name(coll), ARENA_SMALL, res.summary);

	m.phase = PHASE_SYM;
	o.arena_bytes = sym_arena(coll, P);
	o.wall_ms = 100000;
	th_run_ranks(P, matrix_body, &m, &o, &res);
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

/* Mixed: one communicator carries a long deterministic sequence of
 * different collectives, dtypes, counts, roots, buffer kinds and alignments
 * back to back, so state carried from one call to the next (sequence
 * numbers, slot parity, pipelines) is exercised across collective
 * boundaries. Once with the library's default arena, once with a 16 KiB
 * arena (the least the library takes for 8 ranks: one-line staging halves,
 * no symmetric heap), where every large call is a long pipeline. */
#define MIXED_CALLS     600
#define MIXED_MAX_COUNT 40000
#define TINY_ARENA      (16 * 1024)

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
	run_mixed(2, TINY_ARENA, 0);
}

Test(coll, tiny_arena_p3, .timeout = 300)
{
	run_mixed(3, TINY_ARENA, 0);
}

Test(coll, tiny_arena_p8, .timeout = 300)
{
	run_mixed(8, TINY_ARENA, 0);
}
