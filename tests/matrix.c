/* matrix.c - every dtype x valid op x count x root x variant x buffer kind
 * of one collective, checked by th_check_run() on every rank. */
#include "tests/matrix.h"

static size_t sym_large_count(th_coll c, shmcoll_dtype dt, int P)
{
	return SYM_LARGE_BYTES / (th_coll_region_elems(c, 1, P) * th_dtype_size(dt)) + 5;
}

/* The largest region (bytes) of any dtype's case in phase ph. */
static size_t max_region_bytes(th_coll c, int P, enum th_phase ph)
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
static void run_point(th_checker *ck, const struct th_matrix *m, int P, shmcoll_dtype dt,
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

int th_matrix_body(shmcoll_comm *comm, int rank, void *arg)
{
	const struct th_matrix *m = arg;
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
				if (th_large_wanted(dt, op))
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
			if ((!th_coll_reduces(m->coll) || op == SHMCOLL_SUM || op == SHMCOLL_MAX) &&
			    th_large_wanted(dt, op))
				run_point(ck, m, P, dt, op, sym_large_count(m->coll, dt, P), 0);
		}
	}
	err = th_check_first_error(ck);
	rc = th_check_free(ck);
	return err ? err : rc;
}

/* The symmetric job's arena: two symmetric buffers per rank (plus guards)
 * for every rank, doubled for the library's own layout. */
size_t th_matrix_sym_arena(th_coll c, int P)
{
	return 4 * (size_t)P * (max_region_bytes(c, P, PHASE_SYM) + 4096) + (1u << 20);
}
