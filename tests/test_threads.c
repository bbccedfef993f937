/* test_threads.c - the collectives with the ranks as threads of one process,
 * and two communicators alive at once in one process, used alternately. */
#include <criterion/criterion.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define ARENA_SMALL     (96 * 1024)
#define TIMEOUT_MS      30000
#define SMALL_SYM_COUNT 7
#define BARRIER_ROUNDS  2000

struct tmatrix {
	th_coll coll;
	_Atomic int *counters;
};

/* Every dtype with SUM, MIN, AVG and (integers) BXOR; counts {0, 1, 7, 4097,
 * larger than the arena}; every variant; symmetric buffers where they fit the
 * 64 KiB arena (counts {0, 1, 7}). */
static const shmcoll_op thread_ops[] = {SHMCOLL_SUM, SHMCOLL_MIN, SHMCOLL_AVG, SHMCOLL_BXOR};

/* Every root, variant and buffer kind of one (dtype, op, count). */
static void run_point(th_checker *ck, th_coll coll, int P, shmcoll_dtype dt, shmcoll_op op,
                      size_t count)
{
	th_variant vars[TH_VARIANT_COUNT];
	int nv = th_coll_variants(coll, vars);
	int nroots = th_coll_rooted(coll) && P > 1 ? 2 : 1, ri, vi, sy;
	th_case kc;

	for (ri = 0; ri < nroots; ri++) {
		for (vi = 0; vi < nv; vi++) {
			for (sy = 0; sy < TH_SYM_COUNT; sy++) {
				kc = (th_case){
				    .coll = coll,
				    .dtype = dt,
				    .op = op,
				    .count = count,
				    .root = ri ? P - 1 : 0,
				    .variant = vars[vi],
				    .sym = sy,
				};
				if (th_sym_useful(kc.variant, kc.sym) && th_check_sym_fits(ck, &kc))
					th_check_run(ck, &kc);
			}
		}
	}
}

static int tmatrix_body(shmcoll_comm *comm, int rank, void *arg)
{
	const struct tmatrix *m = arg;
	int P = shmcoll_comm_size(comm), dt, oi, nops, err, rc;
	size_t maxb = th_coll_region_elems(m->coll, 4097, P) * 8, b;
	th_checker *ck;

	if (m->coll == TH_BARRIER)
		return th_barrier_rounds(comm, rank, P, m->counters, BARRIER_ROUNDS);
	for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++) {
		b = th_coll_region_elems(m->coll, th_large_count(m->coll, dt, P, ARENA_SMALL), P) *
		    th_dtype_size(dt);
		maxb = b > maxb ? b : maxb;
	}
	ck = th_check_new(comm, maxb, th_coll_region_elems(m->coll, SMALL_SYM_COUNT, P) * 8, &err);
	if (!ck)
		return err;
	nops = th_coll_reduces(m->coll) ? (int)(sizeof(thread_ops) / sizeof(thread_ops[0])) : 1;
	for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++) {
		for (oi = 0; oi < nops; oi++) {
			if (!th_op_valid(dt, thread_ops[oi]))
				continue;
			run_point(ck, m->coll, P, dt, thread_ops[oi], 0);
			run_point(ck, m->coll, P, dt, thread_ops[oi], 1);
			run_point(ck, m->coll, P, dt, thread_ops[oi], SMALL_SYM_COUNT);
			run_point(ck, m->coll, P, dt, thread_ops[oi], 4097);
			if (th_large_wanted(dt, thread_ops[oi]))
				run_point(ck, m->coll, P, dt, thread_ops[oi],
				          th_large_count(m->coll, dt, P, ARENA_SMALL));
		}
	}
	err = th_check_first_error(ck);
	rc = th_check_free(ck);
	return err ? err : rc;
}

static void run_tmatrix(th_coll coll, int P)
{
	struct tmatrix m = {.coll = coll};
	th_opts o = {.arena_bytes = ARENA_SMALL, .timeout_ms = TIMEOUT_MS, .wall_ms = 240000};
	th_result res;

	if (coll == TH_BARRIER) {
		m.counters = calloc(TH_MAX_RANKS * TH_BARRIER_STRIDE, sizeof(*m.counters));
		cr_assert(m.counters, "out of memory");
	}
	th_run_threads(P, tmatrix_body, &m, &o, &res);
	/* Threads left behind at the deadline may still use the counters. */
	if (!res.timed_out)
		free(m.counters);
	cr_assert(res.ok, "%s, threads, arena %d: %s", th_coll_name(coll), ARENA_SMALL,
	          res.summary);
}

#define THREAD_TESTS(name, which)                                                                  \
	Test(threads, name##_p1, .timeout = 300)                                                   \
	{                                                                                          \
		run_tmatrix(which, 1);                                                             \
	}                                                                                          \
	Test(threads, name##_p2, .timeout = 300)                                                   \
	{                                                                                          \
		run_tmatrix(which, 2);                                                             \
	}                                                                                          \
	Test(threads, name##_p4, .timeout = 300)                                                   \
	{                                                                                          \
		run_tmatrix(which, 4);                                                             \
	}                                                                                          \
	Test(threads, name##_p8, .timeout = 300)                                                   \
	{                                                                                          \
		run_tmatrix(which, 8);                                                             \
	}

THREAD_TESTS(allreduce, TH_ALLREDUCE)
THREAD_TESTS(reduce, TH_REDUCE)
THREAD_TESTS(bcast, TH_BCAST)
THREAD_TESTS(allgather, TH_ALLGATHER)
THREAD_TESTS(reduce_scatter, TH_REDUCE_SCATTER)
THREAD_TESTS(gather, TH_GATHER)
THREAD_TESTS(scatter, TH_SCATTER)
THREAD_TESTS(alltoall, TH_ALLTOALL)
THREAD_TESTS(barrier, TH_BARRIER)

/* Two communicators of the same ranks, different jobs (and arena sizes),
 * alive at once: calls alternate between them, each with its own checker,
 * so a mix-up of arenas, sequence numbers or per-thread state between the
 * two shows as wrong data or a hang. Every third call runs on the first
 * communicator with buffers from the second one's shmcoll_malloc (ordinary
 * memory as far as the first is concerned). */
#define TWO_CALLS     600
#define TWO_MAX_COUNT 20000

static const size_t two_counts[] = {0, 1, 7, 64, 1000, 4097, 20000};

struct two {
	char job2[64];
};

static int two_body(shmcoll_comm *comm, int rank, void *arg)
{
	const struct two *t = arg;
	int P = shmcoll_comm_size(comm), i, err = 0, e, nv;
	shmcoll_config cfg = {.rank = rank,
	                      .size = P,
	                      .job = t->job2,
	                      .arena_bytes = 1 << 20,
	                      .timeout_ms = TIMEOUT_MS};
	size_t maxb = (size_t)P * TWO_MAX_COUNT * 8;
	th_variant vars[TH_VARIANT_COUNT];
	shmcoll_comm *comm2 = NULL;
	th_checker *ck[3] = {NULL, NULL, NULL}, *k;
	th_case kc;
	uint64_t h;

	e = shmcoll_comm_create(&cfg, &comm2);
	if (e) {
		fprintf(stderr, "[rank %d] second shmcoll_comm_create: %d (%s): %s\n", rank, e,
		        shmcoll_strerror(e), shmcoll_last_error(NULL));
		return 30;
	}
	if (shmcoll_comm_rank(comm2) != rank || shmcoll_comm_size(comm2) != P) {
		fprintf(stderr, "[rank %d] second comm: rank %d size %d\n", rank,
		        shmcoll_comm_rank(comm2), shmcoll_comm_size(comm2));
		err = 31;
		goto out;
	}
	ck[0] = th_check_new(comm, maxb, (size_t)P * SMALL_SYM_COUNT * 8, &err);
	if (!ck[0])
		goto out;
	ck[1] = th_check_new(comm2, maxb, (size_t)P * 512 * 8, &err);
	if (!ck[1])
		goto out;
	ck[2] = th_check_new(comm, maxb, 0, &err);
	if (!ck[2])
		goto out;
	th_check_borrow_sym(ck[2], ck[1]);
	for (i = 0; i < TWO_CALLS; i++) {
		h = th_mix(0x74776full + (uint64_t)i);
		memset(&kc, 0, sizeof(kc));
		kc.coll = (th_coll)(h % TH_COLL_COUNT);
		kc.dtype = (shmcoll_dtype)((h >> 8) % SHMCOLL_DTYPE_COUNT);
		kc.op = (shmcoll_op)((h >> 16) % (SHMCOLL_AVG + 1));
		kc.count = two_counts[(h >> 24) % (sizeof(two_counts) / sizeof(two_counts[0]))];
		kc.root = (int)((h >> 32) % (uint64_t)P);
		nv = th_coll_variants(kc.coll, vars);
		kc.variant = vars[(h >> 40) % (uint64_t)nv];
		kc.sym = (th_sym)((h >> 48) % TH_SYM_COUNT);
		k = ck[i % 3];
		if (!th_check_sym_fits(k, &kc))
			kc.sym = TH_SYM_NONE;
		kc.misalign = (h >> 56) % 8;
		kc.skew = (h >> 60) % 2 ? 8 : 0;
		th_check_run(k, &kc);
	}
	err = th_check_first_error(ck[0]);
	if (!err)
		err = th_check_first_error(ck[1]);
	if (!err)
		err = th_check_first_error(ck[2]);
out:
	e = th_check_free(ck[2]);
	err = err ? err : e;
	e = th_check_free(ck[1]);
	err = err ? err : e;
	e = th_check_free(ck[0]);
	err = err ? err : e;
	e = shmcoll_comm_destroy(comm2);
	if (e) {
		fprintf(stderr, "[rank %d] second shmcoll_comm_destroy: %d (%s)\n", rank, e,
		        shmcoll_strerror(e));
		err = err ? err : 32;
	}
	return err;
}

static void run_two(int P, int threads)
{
	th_opts o = {.arena_bytes = ARENA_SMALL, .timeout_ms = TIMEOUT_MS, .wall_ms = 200000};
	struct two *t = malloc(sizeof(*t)); /* leaked if threads are left behind */
	th_result res;

	cr_assert(t, "out of memory");
	th_job_name(t->job2, sizeof(t->job2));
	if (threads)
		th_run_threads(P, two_body, t, &o, &res);
	else
		th_run_ranks(P, two_body, t, &o, &res);
	if (!res.timed_out)
		free(t);
	cr_assert(res.ok, "two communicators, %s: %s", threads ? "threads" : "processes",
	          res.summary);
}

Test(threads, two_comms_threads_p1, .timeout = 300)
{
	run_two(1, 1);
}

Test(threads, two_comms_threads_p2, .timeout = 300)
{
	run_two(2, 1);
}

Test(threads, two_comms_threads_p4, .timeout = 300)
{
	run_two(4, 1);
}

Test(threads, two_comms_processes_p2, .timeout = 300)
{
	run_two(2, 0);
}

Test(threads, two_comms_processes_p3, .timeout = 300)
{
	run_two(3, 0);
}
