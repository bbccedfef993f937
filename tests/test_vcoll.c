/* test_vcoll.c - the variable-count collectives and prefix reductions (shmcoll_allgatherv,
 * _gatherv, _scatterv, _alltoallv, _reduce_scatterv, _scan, _exscan) and their non-blocking
 * forms, with ranks as processes (P = 1, 2, 3, 4, 8) and as threads (P = 2, 4). Every rank
 * derives the counts, displacements and data of every rank from the case alone, computes what
 * its buffers must hold (every byte of them and of guards around them), and compares:
 *  - sweep_GROUP_pN (allgatherv and alltoallv; gatherv and scatterv; the reductions): every
 *    case in the blocking form, then every one again without blocking (completed by wait, a
 *    test loop, waitall, testall or waitany); every dtype through the four move calls, every
 *    valid (dtype, op) pair through reduce_scatterv, scan and exscan (and AVG refused by the
 *    prefix ones); counts that differ per rank with zeros among them, all zero, equal, and at
 *    the inline limits (a message of SHMCOLL_INLINE_MAX bytes, and one element more); blocks
 *    of at most 32 bytes, 33..232 bytes, about 1 KiB and tens of KiB (many steps of a small
 *    arena, point-to-point rendezvous); blocks in rank order, in reverse order with gaps
 *    (zero-count blocks pointing anywhere), and send blocks that overlap each other; the
 *    in-place forms; every root of gatherv and scatterv; arrays a rank must not read holding
 *    values that would fault;
 *  - null_buffers_GROUP_pN: the sweep's cases that pass NULL for a buffer with no bytes to
 *    move, and for the root-only buffers and arrays on the other ranks;
 *  - huge_blocks: blocks of about a MiB (4 MiB a call) at P = 2, 3 and 4;
 *  - large_blocks_without_single_copies: SHMCOLL_CMA=0, so large point-to-point blocks are
 *    streamed;
 *  - igatherv/iscatterv_point_to_point_blocks: one non-blocking call whose blocks go by
 *    rendezvous (the smallest form of the sweep's non-blocking rooted cases);
 *  - outstanding_*: NOUT calls of every kind started without blocking, a blocking call among
 *    them, completed by waitall, by wait in reverse, by each rank its own way;
 *  - argument_errors_*: each argument error of the contract (NULL arrays, blocks whose end
 *    overflows, overlapping receive blocks, send and receive buffers that overlap without
 *    being the in-place form, bad root, dtype and op, AVG on a prefix reduction, NULL comm
 *    or request), -EINVAL at once on every rank (a rooted call's non-roots pass an argument
 *    bad for them), with *req NULL, then a correct call on the same communicator;
 *  - mismatch_*: counts that disagree between ranks (gatherv and scatterv, inline, large
 *    and across the inline limit; allgatherv and reduce_scatterv with different recvcounts;
 *    alltoallv under SHMCOLL_CHECK=1; a rank's own counts): -EPROTO on the rank that sees it,
 *    an error (or, where the rank waits for nobody, 0) elsewhere, then errors from every later
 *    call, -ECANCELED from the second, on every rank, without a hang.
 * The cases, their buffers and checks are tests/vcases.c's (tests/progs/nodevcoll.c runs
 * them across nodes). Children never call cr_*: a body returns 0 or a code (1..199) and
 * prints what failed. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tests/harness.h"
#include "tests/vcases.h"

#define ARENA      (96u * 1024) /* staging halves of ~2-40 KiB: large blocks take steps */
#define ARENA_BIG  (1u << 20)   /* the huge cases */
#define TIMEOUT_MS 10000        /* a wait for a peer: far beyond any case here */
#define MM_TIMEOUT 10000        /* the mismatch jobs' */
#define MIB        ((size_t)1 << 20)
#define HUGE_BYTES (4 * MIB) /* the data of a huge call */
#define NOUT       40        /* calls outstanding at once */

/* Codes a body returns beyond vcases.h's (the messages on stderr say more). */
#define E_ARG    30 /* an argument error did not give -EINVAL (and *req == NULL) */
#define E_MM     40 /* a mismatch case: a return code outside what the contract allows */
#define E_BROKEN 41 /* a call after the mismatch did not fail with -ECANCELED */

/* ---- messages ---- */

static void report(int me, const char *what, const char *msg)
{
	fprintf(stderr, "FAIL rank %d: %s%s%s\n", me, what, *what ? ": " : "", msg);
}

const struct vc_env vc_env = {.huge_bytes = HUGE_BYTES, .report = report};

/* ---- sweep ---- */

struct sweep {
	shmcoll_comm *comm;
	int P, me, method;
	unsigned kinds; /* the kinds this sweep runs (bit k: kind k) */
	int forms;      /* F_* */
	int nulls;      /* -1: every case; 0: those without NULL buffers; 1: those with */
	uint64_t salt;
};

/* Runs c (salt, root and layout fitted to this sweep) if its kind is one of the sweep's. */
static int go(struct sweep *s, struct vc c)
{
	c.salt = s->salt++;
	if (!(s->kinds & 1u << c.kind) || (s->nulls >= 0 && s->nulls != c.nulls))
		return 0;
	if (c.root >= s->P)
		c.root %= s->P;
	if (c.kind >= VK_SCAN && c.ly == LY_SENDOVL)
		c.ly = LY_GAPS;
	return vc_run_case(s->comm, &c, s->P, s->me, s->forms, s->method++);
}

#define GO(...)                                                                                    \
	do {                                                                                       \
		int rc_ = go(s, (struct vc){__VA_ARGS__});                                         \
		if (rc_)                                                                           \
			return rc_;                                                                \
	} while (0)

/* Every dtype through the four calls that move data. */
static int sweep_dtypes(struct sweep *s)
{
	int k, dt;

	for (k = VK_ALLGATHERV; k <= VK_ALLTOALLV; k++)
		for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++)
			GO(.kind = k, .dt = dt, .root = dt, .sz = dt % 2 ? SZ_KIB : SZ_TINY,
			   .cn = CN_VARIED, .ly = dt % 3, .inplace = dt % 4 == 1,
			   .nulls = dt % 4 == 2);
	return 0;
}

/* Every kind through sizes, count patterns, layouts and the in-place form. */
static int sweep_shapes(struct sweep *s)
{
	static const shmcoll_dtype dts[] = {SHMCOLL_UINT8,   SHMCOLL_INT32,   SHMCOLL_FLOAT64,
	                                    SHMCOLL_FLOAT16, SHMCOLL_UINT64,  SHMCOLL_INT8,
	                                    SHMCOLL_FLOAT32, SHMCOLL_BFLOAT16};
	static const shmcoll_op ops[] = {SHMCOLL_SUM, SHMCOLL_MAX, SHMCOLL_MIN, SHMCOLL_SUM};
	int k, sz, cn, ly, ip, i = 0;

	for (k = 0; k < VK_COUNT; k++)
		for (sz = SZ_TINY; sz <= SZ_LARGE; sz++)
			for (cn = CN_VARIED; cn <= CN_EQUAL; cn++) {
				if (cn != CN_VARIED && sz != (cn == CN_ZERO ? SZ_TINY : SZ_SMALL))
					continue;
				for (ly = 0; ly < LY_COUNT; ly++) {
					if (ly == LY_SENDOVL && k != VK_SCATTERV &&
					    k != VK_ALLTOALLV)
						continue;
					if (k >= VK_REDUCE_SCATTERV && ly != LY_PACKED)
						continue; /* no displacements */
					for (ip = 0; ip < 2; ip++, i++) {
						if (ip && k == VK_ALLTOALLV)
							continue; /* no in-place form */
						GO(.kind = k, .dt = dts[i % 8], .op = ops[i % 4],
						   .root = i, .sz = sz, .cn = cn, .ly = ly,
						   .inplace = ip,
						   .nulls = cn == CN_ZERO ? !ip : i % 3 == 0);
					}
				}
			}
	return 0;
}

/* Every root of the rooted calls, in and out of place, small and around 1 KiB. */
static int sweep_roots(struct sweep *s)
{
	int k, root;

	for (k = VK_GATHERV; k <= VK_SCATTERV; k++)
		for (root = 0; root < s->P; root++) {
			GO(.kind = k, .dt = SHMCOLL_INT32, .root = root, .sz = SZ_TINY,
			   .cn = CN_VARIED, .ly = LY_GAPS, .inplace = root % 2, .nulls = root % 2);
			GO(.kind = k, .dt = SHMCOLL_UINT8, .root = root, .sz = SZ_KIB,
			   .cn = CN_VARIED, .ly = root % 2 ? LY_SENDOVL : LY_PACKED,
			   .inplace = !(root % 2), .nulls = 0);
		}
	return 0;
}

/* Counts that fill an inline message exactly, and one element more. */
static int sweep_edges(struct sweep *s)
{
	static const shmcoll_dtype dts[] = {SHMCOLL_UINT8, SHMCOLL_FLOAT16, SHMCOLL_INT32,
	                                    SHMCOLL_UINT64};
	int k, cn, d;

	for (k = 0; k < VK_COUNT; k++)
		for (cn = CN_EDGE; cn <= CN_EDGE1; cn++)
			for (d = 0; d < 4; d++)
				GO(.kind = k, .dt = dts[d], .op = SHMCOLL_SUM, .root = d + 1,
				   .sz = 0, .cn = cn, .ly = d % 2 ? LY_GAPS : LY_PACKED,
				   .inplace = d == 2, .nulls = 0);
	return 0;
}

/* Every valid (dtype, op) pair of the reductions (scan and exscan: all but AVG). */
static int sweep_ops(struct sweep *s)
{
	static const int sizes[] = {SZ_TINY, SZ_SMALL, SZ_KIB};
	int k, dt, op, i = 0;

	for (k = VK_REDUCE_SCATTERV; k < VK_COUNT; k++)
		for (dt = 0; dt < SHMCOLL_DTYPE_COUNT; dt++)
			for (op = 0; op < SHMCOLL_OP_COUNT; op++, i++) {
				if (!th_op_valid(dt, op) ||
				    (k != VK_REDUCE_SCATTERV && op == SHMCOLL_AVG))
					continue;
				GO(.kind = k, .dt = dt, .op = op, .sz = sizes[i % 3],
				   .cn = CN_VARIED, .ly = LY_PACKED, .inplace = i % 2,
				   .nulls = i % 5 == 0);
			}
	/* A few large ones: many steps of the staging halves. */
	for (k = VK_REDUCE_SCATTERV; k < VK_COUNT; k++) {
		GO(.kind = k, .dt = SHMCOLL_FLOAT16, .op = SHMCOLL_SUM, .sz = SZ_LARGE,
		   .cn = CN_VARIED, .inplace = 1);
		GO(.kind = k, .dt = SHMCOLL_INT64, .op = SHMCOLL_PROD, .sz = SZ_LARGE,
		   .cn = CN_VARIED, .inplace = 0);
		GO(.kind = k, .dt = SHMCOLL_UINT8, .op = SHMCOLL_BXOR, .sz = SZ_LARGE,
		   .cn = CN_VARIED, .inplace = 0);
	}
	return 0;
}

/* SHMCOLL_AVG has no prefix form: -EINVAL at once on every rank (and a NULL request), the
 * communicator usable after. */
static int avg_prefix(struct sweep *s)
{
	int64_t x[4] = {1, 2, 3, 4}, y[4];
	shmcoll_request *q;
	int k, rc;

	if (!(s->kinds & 1u << VK_SCAN))
		return 0;
	for (k = VK_SCAN; k <= VK_EXSCAN; k++) {
		rc = k == VK_SCAN ? shmcoll_scan(x, y, 4, SHMCOLL_INT64, SHMCOLL_AVG, s->comm)
		                  : shmcoll_exscan(x, y, 4, SHMCOLL_INT64, SHMCOLL_AVG, s->comm);
		if (rc != -EINVAL)
			return vc_failf(E_ARG, NULL, s->me,
			                "%s with SHMCOLL_AVG returned %d, want -EINVAL", vk_name[k],
			                rc);
		q = (shmcoll_request *)(uintptr_t)1;
		rc = k == VK_SCAN
		         ? shmcoll_iscan(x, y, 4, SHMCOLL_FLOAT32, SHMCOLL_AVG, s->comm, &q)
		         : shmcoll_iexscan(x, y, 4, SHMCOLL_FLOAT32, SHMCOLL_AVG, s->comm, &q);
		if (rc != -EINVAL || q)
			return vc_failf(
			    E_ARG, NULL, s->me,
			    "i%s with SHMCOLL_AVG returned %d and request %p, want -EINVAL "
			    "and NULL",
			    vk_name[k], rc, (void *)q);
		GO(.kind = k, .dt = SHMCOLL_INT64, .op = SHMCOLL_SUM, .sz = SZ_TINY,
		   .cn = CN_VARIED);
	}
	return 0;
}

struct sweep_arg {
	unsigned kinds;
	int nulls; /* as struct sweep's */
};

/* Every case of the sweep in the blocking form, then every one again without blocking (so
 * a failure of one form leaves the other's results in the log). */
static int sweep_body(shmcoll_comm *comm, int me, void *arg)
{
	const struct sweep_arg *a = arg;
	struct sweep s = {.comm = comm, .P = shmcoll_comm_size(comm), .me = me};
	int rc = 0, f;

	s.kinds = a->kinds;
	s.nulls = a->nulls;
	for (f = F_BLOCKING; f <= F_NONBLOCKING && !rc; f++) {
		s.forms = f;
		s.salt = 1000 * (uint64_t)s.P + 1;
		rc = sweep_dtypes(&s);
		if (!rc)
			rc = sweep_shapes(&s);
		if (!rc)
			rc = sweep_roots(&s);
		if (!rc)
			rc = sweep_edges(&s);
		if (!rc)
			rc = sweep_ops(&s);
		if (!rc)
			rc = avg_prefix(&s);
	}
	return rc;
}

static const th_opts opts = {
    .arena_bytes = ARENA, .timeout_ms = TIMEOUT_MS, .wall_ms = 240000, .grace_ms = 5000};

#define K_ALL     (1u << VK_ALLGATHERV | 1u << VK_ALLTOALLV)
#define K_ROOTED  (1u << VK_GATHERV | 1u << VK_SCATTERV)
#define K_REDUCES (1u << VK_REDUCE_SCATTERV | 1u << VK_SCAN | 1u << VK_EXSCAN)

/* The cases of the kinds in kinds, without NULL buffers (nulls 0) or only those with them
 * (nulls 1: a rank's buffers with no bytes to move, and the root-only buffers and arrays of
 * the other ranks, NULL). */
static void run_sweep(unsigned kinds, int nulls, int P, int threads)
{
	struct sweep_arg a = {.kinds = kinds, .nulls = nulls};
	th_result res;

	if (threads)
		th_run_threads(P, sweep_body, &a, &opts, &res);
	else
		th_run_ranks(P, sweep_body, &a, &opts, &res);
	cr_assert(res.ok, "%s P=%d: %s", threads ? "threads" : "processes", P, res.summary);
}

/* One test per group of calls and P: allgatherv and alltoallv; gatherv and scatterv;
 * reduce_scatterv, scan and exscan. */
#define SWEEP(group, kinds)                                                                        \
	Test(vcoll, sweep_##group##_p1, .timeout = 300)                                            \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 0, 1, 0);                                                         \
	}                                                                                          \
	Test(vcoll, sweep_##group##_p2, .timeout = 300)                                            \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 0, 2, 0);                                                         \
	}                                                                                          \
	Test(vcoll, sweep_##group##_p3, .timeout = 300)                                            \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 0, 3, 0);                                                         \
	}                                                                                          \
	Test(vcoll, sweep_##group##_p4, .timeout = 300)                                            \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 0, 4, 0);                                                         \
	}                                                                                          \
	Test(vcoll, sweep_##group##_p8, .timeout = 300)                                            \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 0, 8, 0);                                                         \
	}                                                                                          \
	Test(vcoll, sweep_##group##_threads_p2, .timeout = 300)                                    \
	{                                                                                          \
		run_sweep(kinds, 0, 2, 1);                                                         \
	}                                                                                          \
	Test(vcoll, sweep_##group##_threads_p4, .timeout = 300)                                    \
	{                                                                                          \
		run_sweep(kinds, 0, 4, 1);                                                         \
	}

SWEEP(allgatherv_alltoallv, K_ALL)
SWEEP(gatherv_scatterv, K_ROOTED)
SWEEP(reductions, K_REDUCES)

/* The sweep's cases that pass NULL for buffers with nothing to move and for what a rank does
 * not read, per group of calls. */
#define NULLS(group, kinds)                                                                        \
	Test(vcoll, null_buffers_##group##_p3, .timeout = 300)                                     \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 1, 3, 0);                                                         \
	}                                                                                          \
	Test(vcoll, null_buffers_##group##_p8, .timeout = 300)                                     \
	{                                                                                          \
		TH_PROCESSES_ONLY();                                                               \
		run_sweep(kinds, 1, 8, 0);                                                         \
	}                                                                                          \
	Test(vcoll, null_buffers_##group##_threads_p2, .timeout = 300)                             \
	{                                                                                          \
		run_sweep(kinds, 1, 2, 1);                                                         \
	}

NULLS(allgatherv_alltoallv, K_ALL)
NULLS(gatherv_scatterv, K_ROOTED)
NULLS(reductions, K_REDUCES)

/* ---- huge: about 4 MiB a call ---- */

/* The kinds in the order the huge and large cases run them: gatherv and scatterv last, so a
 * failure of theirs leaves the others' results in the log. */
static const int kind_order[VK_COUNT] = {VK_ALLGATHERV, VK_ALLTOALLV, VK_REDUCE_SCATTERV, VK_SCAN,
                                         VK_EXSCAN,     VK_GATHERV,   VK_SCATTERV};

static int huge_body(shmcoll_comm *comm, int me, void *arg)
{
	struct sweep sw = {.comm = comm,
	                   .P = shmcoll_comm_size(comm),
	                   .me = me,
	                   .kinds = ~0u,
	                   .forms = F_BLOCKING,
	                   .nulls = -1,
	                   .salt = 5000};
	struct sweep *s = &sw;
	int i, k;

	(void)arg;
	for (; sw.forms <= F_NONBLOCKING; sw.forms++)
		for (i = 0; i < VK_COUNT; i++) {
			k = kind_order[i];
			GO(.kind = k, .dt = k % 2 ? SHMCOLL_FLOAT32 : SHMCOLL_UINT64,
			   .op = SHMCOLL_SUM, .root = 1, .sz = SZ_HUGE, .cn = CN_VARIED,
			   .ly = LY_GAPS, .inplace = k % 2);
		}
	return 0;
}

Test(vcoll, huge_blocks, .timeout = 300)
{
	const th_opts o = {.arena_bytes = ARENA_BIG, .timeout_ms = TIMEOUT_MS, .wall_ms = 240000};
	th_result res;

	TH_PROCESSES_ONLY();
	th_run_ranks(2, huge_body, NULL, &o, &res);
	cr_assert(res.ok, "processes P=2: %s", res.summary);
	th_run_ranks(4, huge_body, NULL, &o, &res);
	cr_assert(res.ok, "processes P=4: %s", res.summary);
}

Test(vcoll, huge_blocks_threads, .timeout = 300)
{
	const th_opts o = {.arena_bytes = ARENA_BIG, .timeout_ms = TIMEOUT_MS, .wall_ms = 240000};
	th_result res;

	th_run_threads(3, huge_body, NULL, &o, &res);
	cr_assert(res.ok, "threads P=3: %s", res.summary);
}

/* ---- large blocks without single copies: gatherv's and scatterv's point-to-point
 * rendezvous streamed through the arena ---- */

static int large_body(shmcoll_comm *comm, int me, void *arg)
{
	struct sweep sw = {.comm = comm,
	                   .P = shmcoll_comm_size(comm),
	                   .me = me,
	                   .kinds = ~0u,
	                   .forms = F_BLOCKING,
	                   .nulls = -1,
	                   .salt = 7000};
	struct sweep *s = &sw;
	static const int kinds[] = {VK_ALLTOALLV, VK_GATHERV, VK_SCATTERV};
	int i, ip;

	(void)arg;
	for (; sw.forms <= F_NONBLOCKING; sw.forms++)
		for (i = 0; i < 3; i++)
			for (ip = 0; ip < 2; ip++)
				GO(.kind = kinds[i], .dt = SHMCOLL_INT32, .root = ip,
				   .sz = SZ_LARGE, .cn = CN_VARIED, .ly = ip ? LY_GAPS : LY_PACKED,
				   .inplace = ip && kinds[i] != VK_ALLTOALLV);
	return 0;
}

Test(vcoll, large_blocks_without_single_copies, .timeout = 300)
{
	th_result res;

	cr_assert(setenv("SHMCOLL_CMA", "0", 1) == 0);
	if (!TH_UNDER_TSAN) {
		th_run_ranks(3, large_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=3: %s", res.summary);
	}
	th_run_threads(2, large_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
}

/* ---- point-to-point blocks of the non-blocking rooted calls ---- */

/* One igatherv or iscatterv whose blocks (80 KB) go by point-to-point rendezvous, completed by
 * waitall: the smallest case of the sweep's non-blocking gatherv/scatterv failures. */
static int p2p_block_body(shmcoll_comm *comm, int me, void *arg)
{
	struct vc c = {.kind = *(const int *)arg,
	               .dt = SHMCOLL_INT32,
	               .root = 0,
	               .sz = SZ_LARGE,
	               .cn = CN_EQUAL,
	               .ly = LY_PACKED,
	               .salt = 31};

	return vc_run_case(comm, &c, shmcoll_comm_size(comm), me, F_NONBLOCKING, 2);
}

static void run_p2p_block(int kind)
{
	/* The default arena; a rank left waiting fails in 5 s. */
	const th_opts o = {.timeout_ms = 5000, .wall_ms = 30000, .grace_ms = 6000};
	th_result res;

	if (!TH_UNDER_TSAN) {
		th_run_ranks(3, p2p_block_body, &kind, &o, &res);
		cr_assert(res.ok, "processes P=3: %s", res.summary);
	}
	th_run_threads(2, p2p_block_body, &kind, &o, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
}

Test(vcoll, igatherv_point_to_point_blocks, .timeout = 120)
{
	run_p2p_block(VK_GATHERV);
}

Test(vcoll, iscatterv_point_to_point_blocks, .timeout = 120)
{
	run_p2p_block(VK_SCATTERV);
}

/* ---- many calls outstanding ---- */

enum { HOW_WAITALL, HOW_REVERSE, HOW_MIXED };

/* NOUT calls of every kind started in one go (a blocking one in the middle), completed as
 * how says (HOW_MIXED: rank r by waitall, reverse waits, polling test, testall or waitany
 * as r % 5), then every buffer checked. */
static int outstanding_body(shmcoll_comm *comm, int me, void *arg)
{
	int how = *(const int *)arg, P = shmcoll_comm_size(comm), i, j, rc = 0, done, m;
	struct vc_run *runs = calloc(NOUT, sizeof(*runs)), mid;
	shmcoll_request *reqs[NOUT] = {NULL};
	struct vc c, cm;
	size_t idx;

	if (!runs)
		return E_NOMEM;
	for (i = 0; i < NOUT && !rc; i++) {
		c = (struct vc){.kind = i % VK_COUNT,
		                .dt = (shmcoll_dtype)((i * 3) % SHMCOLL_DTYPE_COUNT),
		                .op = SHMCOLL_MAX,
		                .root = i % P,
		                .sz = i % 4 == 3 ? SZ_LARGE : i % 4,
		                .cn = i % 9 == 8 ? CN_ZERO : CN_VARIED,
		                .ly = i % 2 ? LY_GAPS : LY_PACKED,
		                .inplace = (i / 7) % 2 && i % VK_COUNT != VK_ALLTOALLV,
		                .nulls = i % 5 == 0,
		                .salt = 9000 + (uint64_t)i};
		rc = vc_setup(&runs[i], &c, P, me);
		if (rc) {
			rc = vc_failf(rc, &c, me, "out of memory");
			break;
		}
		vc_crumb(&c, "outstanding start");
		rc = vc_call_start(&runs[i], comm, &reqs[i]);
		if (rc || !reqs[i]) {
			rc = vc_failf(E_START, &c, me, "start returned %d (%s): %s", rc,
			              shmcoll_strerror(rc), shmcoll_last_error(comm));
			break;
		}
		if (i == NOUT / 2) {
			/* A blocking call behind the outstanding ones. */
			cm = (struct vc){.kind = VK_ALLGATHERV,
			                 .dt = SHMCOLL_INT64,
			                 .sz = SZ_SMALL,
			                 .cn = CN_VARIED,
			                 .ly = LY_GAPS,
			                 .salt = 8999};
			rc = vc_setup(&mid, &cm, P, me);
			if (!rc) {
				vc_crumb(&cm, "blocking among outstanding");
				rc = vc_call_blocking(&mid, comm);
				if (rc)
					rc = vc_failf(E_CALL, &cm, me, "returned %d (%s): %s", rc,
					              shmcoll_strerror(rc),
					              shmcoll_last_error(comm));
			}
			if (!rc)
				rc = vc_run_check(&mid, "blocking among outstanding");
			vc_run_free(&mid);
		}
	}
	if (rc) {
		/* Peers may wait for this rank: break the communicator, then finish. */
		shmcoll_comm_abort(comm);
		shmcoll_waitall(NOUT, reqs, NULL);
		goto out;
	}
	th_breadcrumb("outstanding: completing (how %d)", how);
	m = how == HOW_MIXED ? me % 5 : how == HOW_WAITALL ? 0 : 1;
	switch (m) {
	case 0:
		rc = shmcoll_waitall(NOUT, reqs, NULL);
		break;
	case 1:
		for (i = NOUT - 1; i >= 0 && !rc; i--)
			rc = shmcoll_wait(&reqs[i], NULL);
		break;
	case 2:
		for (done = 0; !rc && done < NOUT;)
			for (i = 0, done = 0; i < NOUT && !rc; i++) {
				j = 1;
				rc = shmcoll_test(&reqs[i], &j, NULL);
				done += j;
			}
		break;
	case 3:
		for (done = 0; !rc && !done;)
			rc = shmcoll_testall(NOUT, reqs, &done, NULL);
		break;
	default:
		for (j = 0; j < NOUT && !rc; j++) {
			rc = shmcoll_waitany(NOUT, reqs, &idx, NULL);
			if (!rc && (idx >= NOUT || reqs[idx]))
				rc = vc_failf(E_REQ, NULL, me, "waitany gave index %zu", idx);
		}
		break;
	}
	if (rc) {
		rc = vc_failf(rc > 0 ? rc : E_DONE, NULL, me, "completion %d returned %d (%s): %s",
		              m, rc, shmcoll_strerror(rc), shmcoll_last_error(comm));
		shmcoll_comm_abort(comm);
		shmcoll_waitall(NOUT, reqs, NULL);
		goto out;
	}
	for (i = 0; i < NOUT; i++)
		if (reqs[i]) {
			rc = vc_failf(E_REQ, NULL, me, "request %d not NULL after completion %d", i,
			              m);
			goto out;
		}
	for (i = 0; i < NOUT && !rc; i++)
		rc = vc_run_check(&runs[i], "outstanding");
out:
	for (i = 0; i < NOUT; i++)
		vc_run_free(&runs[i]);
	free(runs);
	return rc;
}

static void run_outstanding(int how, const int *procs, int np, const int *threads, int nt)
{
	th_result res;
	int i;

	for (i = 0; i < np && !TH_UNDER_TSAN; i++) {
		th_run_ranks(procs[i], outstanding_body, &how, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", procs[i], res.summary);
	}
	for (i = 0; i < nt; i++) {
		th_run_threads(threads[i], outstanding_body, &how, &opts, &res);
		cr_assert(res.ok, "threads P=%d: %s", threads[i], res.summary);
	}
}

Test(vcoll, outstanding_waitall, .timeout = 300)
{
	static const int procs[] = {1, 2, 4, 8}, threads[] = {2};

	run_outstanding(HOW_WAITALL, procs, 4, threads, 1);
}

Test(vcoll, outstanding_wait_reverse, .timeout = 300)
{
	static const int procs[] = {3}, threads[] = {4};

	run_outstanding(HOW_REVERSE, procs, 1, threads, 1);
}

Test(vcoll, outstanding_each_rank_its_own_way, .timeout = 300)
{
	static const int procs[] = {5}, threads[] = {3};

	run_outstanding(HOW_MIXED, procs, 1, threads, 1);
}

/* ---- argument errors ---- */

/* A call that must return -EINVAL at once. */
#define BAD(call)                                                                                  \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ != -EINVAL)                                                                \
			return vc_failf(E_ARG, NULL, me,                                           \
			                "line %d: %s returned %d (%s), want -EINVAL", __LINE__,    \
			                #call, rc_, shmcoll_strerror(rc_));                        \
	} while (0)

/* A start that must return -EINVAL and set its request to NULL. */
#define BADI(call)                                                                                 \
	do {                                                                                       \
		int rc_;                                                                           \
		q = (shmcoll_request *)(uintptr_t)1;                                               \
		rc_ = (call);                                                                      \
		if (rc_ != -EINVAL || q)                                                           \
			return vc_failf(                                                           \
			    E_ARG, NULL, me,                                                       \
			    "line %d: %s returned %d (%s) and request %p, want -EINVAL "           \
			    "and NULL",                                                            \
			    __LINE__, #call, rc_, shmcoll_strerror(rc_), (void *)q);               \
	} while (0)

/* The communicator still works: a correct (checked) call of kind k. */
#define AFTER(k, r)                                                                                \
	GO(.kind = (k), .dt = SHMCOLL_INT64, .op = SHMCOLL_SUM, .root = (r), .sz = SZ_TINY,        \
	   .cn = CN_VARIED, .ly = LY_GAPS)

#define I64   SHMCOLL_INT64
#define NODT  ((shmcoll_dtype)SHMCOLL_DTYPE_COUNT)
#define NEGDT ((shmcoll_dtype)-1)

struct ebufs {
	int64_t sb[4 * VMAXP], rb[4 * VMAXP];
	size_t cnt[VMAXP], dsp[VMAXP], d2[VMAXP], c2[VMAXP];
};

static int errors_allgatherv(struct sweep *s, struct ebufs *b)
{
	shmcoll_comm *comm = s->comm;
	int me = s->me, P = s->P, nx = (me + 1) % P;
	int64_t *sb = b->sb, *rb = b->rb;
	shmcoll_request *q;

	BAD(shmcoll_allgatherv(sb, 2, rb, NULL, b->dsp, I64, comm));
	BADI(shmcoll_iallgatherv(sb, 2, rb, NULL, b->dsp, I64, comm, &q));
	AFTER(VK_ALLGATHERV, 0);
	BAD(shmcoll_allgatherv(sb, 2, rb, b->cnt, NULL, I64, comm));
	BADI(shmcoll_iallgatherv(sb, 2, rb, b->cnt, NULL, I64, comm, &q));
	AFTER(VK_ALLGATHERV, 0);
	/* The end of block P-1 overflows size_t bytes: by the multiplication, by the sum. */
	memcpy(b->d2, b->dsp, sizeof(b->d2));
	b->d2[P - 1] = SIZE_MAX / 8;
	BAD(shmcoll_allgatherv(sb, 2, rb, b->cnt, b->d2, I64, comm));
	b->d2[P - 1] = SIZE_MAX - 1;
	BADI(shmcoll_iallgatherv(sb, 2, rb, b->cnt, b->d2, I64, comm, &q));
	AFTER(VK_ALLGATHERV, 0);
	if (P > 1) {
		/* Receive blocks that overlap: 0 and 1 (in rank order), 0 and P-1 (reversed). */
		memcpy(b->d2, b->dsp, sizeof(b->d2));
		b->d2[1] = 1;
		BAD(shmcoll_allgatherv(sb, 2, rb, b->cnt, b->d2, I64, comm));
		memcpy(b->d2, b->dsp, sizeof(b->d2));
		b->d2[0] = b->dsp[P - 1] + 1;
		BADI(shmcoll_iallgatherv(sb, 2, rb, b->cnt, b->d2, I64, comm, &q));
		AFTER(VK_ALLGATHERV, 1);
		/* sendbuf is another rank's block of recvbuf. */
		BAD(shmcoll_allgatherv(rb + b->dsp[nx], 2, rb, b->cnt, b->dsp, I64, comm));
		AFTER(VK_ALLGATHERV, 1);
	}
	/* sendbuf overlaps this rank's block without being it. */
	BAD(shmcoll_allgatherv(rb + b->dsp[me] + 1, 2, rb, b->cnt, b->dsp, I64, comm));
	BADI(shmcoll_iallgatherv(rb + b->dsp[me] + 1, 2, rb, b->cnt, b->dsp, I64, comm, &q));
	AFTER(VK_ALLGATHERV, 1);
	BAD(shmcoll_allgatherv(sb, 2, NULL, b->cnt, b->dsp, I64, comm));
	BAD(shmcoll_allgatherv(NULL, 2, rb, b->cnt, b->dsp, I64, comm));
	BAD(shmcoll_allgatherv(sb, 2, rb, b->cnt, b->dsp, NODT, comm));
	BADI(shmcoll_iallgatherv(sb, 2, rb, b->cnt, b->dsp, NEGDT, comm, &q));
	BAD(shmcoll_allgatherv(sb, 2, rb, b->cnt, b->dsp, I64, NULL));
	BAD(shmcoll_iallgatherv(sb, 2, rb, b->cnt, b->dsp, I64, comm, NULL));
	AFTER(VK_ALLGATHERV, 1);
	return 0;
}

/* The rooted calls: where only the root reads an argument, the others pass one bad for them
 * (a NULL buffer with elements to move), so every rank fails at once and none waits. */
static int errors_gatherv(struct sweep *s, struct ebufs *b)
{
	shmcoll_comm *comm = s->comm;
	int me = s->me, P = s->P, root = P - 1, nx = (root + 1) % P, isroot = me == root;
	int64_t *sb = b->sb, *rb = b->rb;
	shmcoll_request *q;

	BAD(shmcoll_gatherv(sb, 2, rb, b->cnt, b->dsp, I64, -1, comm));
	BADI(shmcoll_igatherv(sb, 2, rb, b->cnt, b->dsp, I64, P, comm, &q));
	AFTER(VK_GATHERV, root);
	BAD(isroot ? shmcoll_gatherv(sb, 2, rb, NULL, b->dsp, I64, root, comm)
	           : shmcoll_gatherv(NULL, 2, NULL, NULL, NULL, I64, root, comm));
	BADI(isroot ? shmcoll_igatherv(sb, 2, rb, b->cnt, NULL, I64, root, comm, &q)
	            : shmcoll_igatherv(NULL, 2, NULL, NULL, NULL, I64, root, comm, &q));
	AFTER(VK_GATHERV, root);
	memcpy(b->d2, b->dsp, sizeof(b->d2));
	b->d2[0] = SIZE_MAX / 4;
	BAD(isroot ? shmcoll_gatherv(sb, 2, rb, b->cnt, b->d2, I64, root, comm)
	           : shmcoll_gatherv(sb, 2, NULL, NULL, NULL, NODT, root, comm));
	AFTER(VK_GATHERV, root);
	if (P > 1) {
		memcpy(b->d2, b->dsp, sizeof(b->d2));
		b->d2[nx] = b->dsp[root] + 1;
		BAD(isroot ? shmcoll_gatherv(sb, 2, rb, b->cnt, b->d2, I64, root, comm)
		           : shmcoll_gatherv(NULL, 2, NULL, NULL, NULL, I64, root, comm));
		BADI(isroot ? shmcoll_igatherv(rb + b->dsp[nx], 2, rb, b->cnt, b->dsp, I64, root,
		                               comm, &q)
		            : shmcoll_igatherv(NULL, 2, NULL, NULL, NULL, I64, root, comm, &q));
		AFTER(VK_GATHERV, 0);
	}
	BAD(isroot ? shmcoll_gatherv(rb + b->dsp[root] + 1, 2, rb, b->cnt, b->dsp, I64, root, comm)
	           : shmcoll_gatherv(NULL, 2, NULL, NULL, NULL, I64, root, comm));
	BAD(isroot ? shmcoll_gatherv(sb, 2, NULL, b->cnt, b->dsp, I64, root, comm)
	           : shmcoll_gatherv(NULL, 2, NULL, NULL, NULL, I64, root, comm));
	BAD(shmcoll_gatherv(sb, 2, rb, b->cnt, b->dsp, NEGDT, root, comm));
	BAD(shmcoll_gatherv(sb, 2, rb, b->cnt, b->dsp, I64, root, NULL));
	BAD(shmcoll_igatherv(sb, 2, rb, b->cnt, b->dsp, I64, root, comm, NULL));
	AFTER(VK_GATHERV, 0);
	return 0;
}

static int errors_scatterv(struct sweep *s, struct ebufs *b)
{
	shmcoll_comm *comm = s->comm;
	int me = s->me, P = s->P, root = 0, nx = 1 % P, isroot = me == root;
	int64_t *sb = b->sb, *rb = b->rb;
	shmcoll_request *q;

	BAD(shmcoll_scatterv(sb, b->cnt, b->dsp, rb, 2, I64, P, comm));
	BADI(shmcoll_iscatterv(sb, b->cnt, b->dsp, rb, 2, I64, -5, comm, &q));
	AFTER(VK_SCATTERV, root);
	BAD(isroot ? shmcoll_scatterv(sb, NULL, b->dsp, rb, 2, I64, root, comm)
	           : shmcoll_scatterv(NULL, NULL, NULL, NULL, 2, I64, root, comm));
	BADI(isroot ? shmcoll_iscatterv(sb, b->cnt, NULL, rb, 2, I64, root, comm, &q)
	            : shmcoll_iscatterv(NULL, NULL, NULL, NULL, 2, I64, root, comm, &q));
	AFTER(VK_SCATTERV, root);
	memcpy(b->d2, b->dsp, sizeof(b->d2));
	b->d2[P - 1] = SIZE_MAX - 1;
	BAD(isroot ? shmcoll_scatterv(sb, b->cnt, b->d2, rb, 2, I64, root, comm)
	           : shmcoll_scatterv(NULL, NULL, NULL, rb, 2, NODT, root, comm));
	AFTER(VK_SCATTERV, root);
	if (P > 1) {
		/* recvbuf is another rank's block of sendbuf. */
		BADI(isroot ? shmcoll_iscatterv(sb, b->cnt, b->dsp, sb + b->dsp[nx], 2, I64, root,
		                                comm, &q)
		            : shmcoll_iscatterv(NULL, NULL, NULL, NULL, 2, I64, root, comm, &q));
		AFTER(VK_SCATTERV, 1);
	}
	BAD(isroot ? shmcoll_scatterv(sb, b->cnt, b->dsp, sb + b->dsp[root] + 1, 2, I64, root, comm)
	           : shmcoll_scatterv(NULL, NULL, NULL, NULL, 2, I64, root, comm));
	BAD(isroot ? shmcoll_scatterv(NULL, b->cnt, b->dsp, rb, 2, I64, root, comm)
	           : shmcoll_scatterv(NULL, NULL, NULL, NULL, 2, I64, root, comm));
	BAD(shmcoll_scatterv(sb, b->cnt, b->dsp, rb, 2, NODT, root, comm));
	BAD(shmcoll_scatterv(sb, b->cnt, b->dsp, rb, 2, I64, root, NULL));
	BAD(shmcoll_iscatterv(sb, b->cnt, b->dsp, rb, 2, I64, root, comm, NULL));
	AFTER(VK_SCATTERV, 0);
	return 0;
}

static int errors_alltoallv(struct sweep *s, struct ebufs *b)
{
	shmcoll_comm *comm = s->comm;
	int me = s->me, P = s->P;
	int64_t *sb = b->sb, *rb = b->rb;
	const size_t *c = b->cnt, *d = b->dsp;
	shmcoll_request *q;

	BAD(shmcoll_alltoallv(sb, NULL, d, rb, c, d, I64, comm));
	BAD(shmcoll_alltoallv(sb, c, NULL, rb, c, d, I64, comm));
	BADI(shmcoll_ialltoallv(sb, c, d, rb, NULL, d, I64, comm, &q));
	BADI(shmcoll_ialltoallv(sb, c, d, rb, c, NULL, I64, comm, &q));
	AFTER(VK_ALLTOALLV, 0);
	memcpy(b->d2, d, sizeof(b->d2));
	b->d2[P - 1] = SIZE_MAX / 8;
	BAD(shmcoll_alltoallv(sb, c, b->d2, rb, c, d, I64, comm));
	BADI(shmcoll_ialltoallv(sb, c, d, rb, c, b->d2, I64, comm, &q));
	AFTER(VK_ALLTOALLV, 0);
	if (P > 1) {
		memcpy(b->d2, d, sizeof(b->d2));
		b->d2[P - 1] = 0;
		BAD(shmcoll_alltoallv(sb, c, d, rb, c, b->d2, I64, comm));
		/* Send blocks may overlap each other: that is no error (the sweep runs it). */
		AFTER(VK_ALLTOALLV, 0);
	}
	/* No in-place form: the same buffer, or buffers that overlap, are -EINVAL. */
	BAD(shmcoll_alltoallv(rb, c, d, rb, c, d, I64, comm));
	BADI(shmcoll_ialltoallv(rb + 1, c, d, rb, c, d, I64, comm, &q));
	BAD(shmcoll_alltoallv(NULL, c, d, rb, c, d, I64, comm));
	BAD(shmcoll_alltoallv(sb, c, d, NULL, c, d, I64, comm));
	BAD(shmcoll_alltoallv(sb, c, d, rb, c, d, NEGDT, comm));
	BAD(shmcoll_alltoallv(sb, c, d, rb, c, d, I64, NULL));
	BAD(shmcoll_ialltoallv(sb, c, d, rb, c, d, I64, comm, NULL));
	AFTER(VK_ALLTOALLV, 0);
	return 0;
}

static int errors_reductions(struct sweep *s, struct ebufs *b)
{
	shmcoll_comm *comm = s->comm;
	int me = s->me, P = s->P, k, p;
	int64_t *sb = b->sb, *rb = b->rb;
	size_t off = 2 * (size_t)me;
	shmcoll_request *q;

	BAD(shmcoll_reduce_scatterv(sb, rb, NULL, I64, SHMCOLL_SUM, comm));
	BADI(shmcoll_ireduce_scatterv(sb, rb, NULL, I64, SHMCOLL_SUM, comm, &q));
	AFTER(VK_REDUCE_SCATTERV, 0);
	/* The sum of recvcounts overflows size_t bytes. */
	for (p = 0; p < P; p++)
		b->c2[p] = P > 1 ? SIZE_MAX / 2 : SIZE_MAX / 4;
	BAD(shmcoll_reduce_scatterv(sb, rb, b->c2, I64, SHMCOLL_SUM, comm));
	/* recvbuf overlaps sendbuf without being this rank's block of it. */
	BAD(shmcoll_reduce_scatterv(sb, sb + off + 1, b->cnt, I64, SHMCOLL_SUM, comm));
	BADI(shmcoll_ireduce_scatterv(sb, sb + off + 1, b->cnt, I64, SHMCOLL_MAX, comm, &q));
	BAD(shmcoll_reduce_scatterv(sb, rb, b->cnt, I64, SHMCOLL_OP_COUNT, comm));
	BAD(shmcoll_reduce_scatterv(sb, rb, b->cnt, SHMCOLL_FLOAT32, SHMCOLL_BAND, comm));
	BAD(shmcoll_reduce_scatterv(sb, rb, b->cnt, NODT, SHMCOLL_SUM, comm));
	BAD(shmcoll_reduce_scatterv(NULL, rb, b->cnt, I64, SHMCOLL_SUM, comm));
	BAD(shmcoll_reduce_scatterv(sb, NULL, b->cnt, I64, SHMCOLL_SUM, comm));
	BAD(shmcoll_reduce_scatterv(sb, rb, b->cnt, I64, SHMCOLL_SUM, NULL));
	BAD(shmcoll_ireduce_scatterv(sb, rb, b->cnt, I64, SHMCOLL_SUM, comm, NULL));
	AFTER(VK_REDUCE_SCATTERV, 0);
	for (k = VK_SCAN; k <= VK_EXSCAN; k++) {
#define PREFIX(sbuf, rbuf, n, dt, op)                                                              \
	(k == VK_SCAN ? shmcoll_scan(sbuf, rbuf, n, dt, op, comm)                                  \
	              : shmcoll_exscan(sbuf, rbuf, n, dt, op, comm))
#define IPREFIX(sbuf, rbuf, n, dt, op, c, req)                                                     \
	(k == VK_SCAN ? shmcoll_iscan(sbuf, rbuf, n, dt, op, c, req)                               \
	              : shmcoll_iexscan(sbuf, rbuf, n, dt, op, c, req))
		BAD(PREFIX(sb, rb, 4, I64, SHMCOLL_AVG));
		BAD(PREFIX(sb, rb, 4, I64, SHMCOLL_OP_COUNT));
		BAD(PREFIX(sb, rb, 4, SHMCOLL_FLOAT64, SHMCOLL_BXOR));
		BADI(IPREFIX(sb, rb, 4, SHMCOLL_BFLOAT16, SHMCOLL_BOR, comm, &q));
		BAD(PREFIX(sb, rb, SIZE_MAX / 8 + 1, I64, SHMCOLL_SUM));
		BAD(PREFIX(rb + 1, rb, 4, I64, SHMCOLL_SUM));
		BADI(IPREFIX(rb, rb + 3, 4, I64, SHMCOLL_SUM, comm, &q));
		BAD(PREFIX(NULL, rb, 4, I64, SHMCOLL_SUM));
		BAD(PREFIX(sb, NULL, 4, I64, SHMCOLL_SUM));
		BAD(PREFIX(sb, rb, 4, NEGDT, SHMCOLL_SUM));
		BAD(IPREFIX(sb, rb, 4, I64, SHMCOLL_SUM, NULL, &q));
		BAD(IPREFIX(sb, rb, 4, I64, SHMCOLL_SUM, comm, NULL));
		AFTER(k, 0);
#undef PREFIX
#undef IPREFIX
	}
	return 0;
}

static int errors_body(shmcoll_comm *comm, int me, void *arg)
{
	struct sweep s = {.comm = comm,
	                  .P = shmcoll_comm_size(comm),
	                  .me = me,
	                  .kinds = ~0u,
	                  .forms = F_BOTH,
	                  .nulls = -1,
	                  .salt = 20000};
	struct ebufs *b = calloc(1, sizeof(*b));
	int p, rc;

	(void)arg;
	if (!b)
		return E_NOMEM;
	for (p = 0; p < s.P; p++) {
		b->cnt[p] = 2;
		b->dsp[p] = 2 * (size_t)p;
	}
	rc = errors_allgatherv(&s, b);
	if (!rc)
		rc = errors_gatherv(&s, b);
	if (!rc)
		rc = errors_scatterv(&s, b);
	if (!rc)
		rc = errors_alltoallv(&s, b);
	if (!rc)
		rc = errors_reductions(&s, b);
	free(b);
	return rc;
}

Test(vcoll, argument_errors_leave_the_communicator_usable, .timeout = 300)
{
	static const int procs[] = {1, 2, 3, 8};
	th_result res;
	size_t i;

	for (i = 0; i < sizeof(procs) / sizeof(procs[0]) && !TH_UNDER_TSAN; i++) {
		th_run_ranks(procs[i], errors_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes P=%d: %s", procs[i], res.summary);
	}
	th_run_threads(2, errors_body, NULL, &opts, &res);
	cr_assert(res.ok, "threads P=2: %s", res.summary);
}

/* ---- mismatched counts ---- */

enum {
	MM_GATHERV_MORE,     /* rank P-1 sends one element more than the root's recvcounts */
	MM_GATHERV_LESS,     /* ... one less */
	MM_GATHERV_LARGE,    /* 30000 where the root expects 20000 (both beyond a message) */
	MM_GATHERV_SHORTER,  /* 100 (inline) where the root expects 1000 (out of line) */
	MM_GATHERV_LONGER,   /* 1000 where the root expects 100 */
	MM_SCATTERV_SMALL,   /* rank P-1's recvcount is one more than the root sends it */
	MM_SCATTERV_LARGE,   /* 30000 where the root sends 20000 */
	MM_SCATTERV_LONGER,  /* 10000 where the root sends 20000 */
	MM_SCATTERV_ROOT,    /* the root's recvcount is not its sendcounts[root] */
	MM_ALLGATHERV_SMALL, /* rank 0 passes other recvcounts than the others */
	MM_ALLGATHERV_LARGE,
	MM_ALLGATHERV_OWN, /* rank 0's sendcount is not its recvcounts[0] */
	MM_RSV_SMALL,      /* rank 0 passes other recvcounts than the others */
	MM_RSV_LARGE,
	MM_ALLTOALLV_SMALL, /* rank 0 sends rank 1 one element more than rank 1 expects */
	MM_ALLTOALLV_LARGE,
	MM_ALLTOALLV_OWN, /* rank 0's sendcounts[0] is not its recvcounts[0] */
	/* Without SHMCOLL_CHECK: the inline messages' counts. */
	MM_ALLTOALLV_TABLE, /* as MM_ALLTOALLV_SMALL: rank 0's blocks differ, so a table */
	MM_ALLTOALLV_EVEN,  /* rank 0 sends every rank one more: its blocks even, no table */
	MM_COUNT
};

static const char *const mm_name[MM_COUNT] = {
    "gatherv, one more",
    "gatherv, one less",
    "gatherv, large",
    "gatherv, inline for out of line",
    "gatherv, out of line for inline",
    "scatterv, small",
    "scatterv, large",
    "scatterv, longer than the room",
    "scatterv, the root's own",
    "allgatherv, small recvcounts differ",
    "allgatherv, large recvcounts differ",
    "allgatherv, own sendcount",
    "reduce_scatterv, small recvcounts differ",
    "reduce_scatterv, large recvcounts differ",
    "alltoallv, small",
    "alltoallv, large",
    "alltoallv, own counts",
    "alltoallv, inline with a table",
    "alltoallv, inline without a table",
};

/* The rank that must see the mismatch (-EPROTO), or -1: every rank waits for every other,
 * so none may return 0 and at least one -EPROTO. */
static int mm_detector(int m, int P)
{
	switch (m) {
	case MM_GATHERV_MORE:
	case MM_GATHERV_LESS:
	case MM_GATHERV_LARGE:
	case MM_GATHERV_SHORTER:
	case MM_GATHERV_LONGER:
	case MM_SCATTERV_ROOT:
	case MM_ALLGATHERV_OWN:
	case MM_ALLTOALLV_OWN:
		return 0;
	case MM_SCATTERV_SMALL:
	case MM_SCATTERV_LARGE:
	case MM_SCATTERV_LONGER:
		return P - 1;
	case MM_ALLTOALLV_TABLE:
	case MM_ALLTOALLV_EVEN:
		return 1; /* rank 0, whose peers send it what it expects, may return 0 */
	default:
		return -1;
	}
}

struct mm_arg {
	int m;
	int *codes; /* shared: 3 per rank (the call, the barrier after, the call after that) */
};

/* The mismatched call of m, with every buffer large enough for either count. */
static int mm_call(int m, shmcoll_comm *comm, int me, int P, int32_t *sb, int32_t *rb)
{
	size_t cnt[VMAXP], dsp[VMAXP], c2[VMAXP], d2[VMAXP], mine, n = 3;
	int p, last = me == P - 1;

	switch (m) {
	case MM_GATHERV_LARGE:
	case MM_SCATTERV_LARGE:
	case MM_SCATTERV_LONGER:
	case MM_ALLGATHERV_LARGE:
	case MM_RSV_LARGE:
	case MM_ALLTOALLV_LARGE:
		n = 20000;
		break;
	case MM_GATHERV_SHORTER:
		n = 1000;
		break;
	case MM_GATHERV_LONGER:
		n = 100;
		break;
	}
	for (p = 0; p < P; p++) {
		cnt[p] = n;
		dsp[p] = n * (size_t)p;
	}
	switch (m) {
	case MM_GATHERV_MORE:
	case MM_GATHERV_LESS:
	case MM_GATHERV_LARGE:
	case MM_GATHERV_SHORTER:
	case MM_GATHERV_LONGER:
		mine = !last                     ? n
		       : m == MM_GATHERV_MORE    ? n + 1
		       : m == MM_GATHERV_LESS    ? n - 1
		       : m == MM_GATHERV_LARGE   ? 30000
		       : m == MM_GATHERV_SHORTER ? 100
		                                 : 1000;
		return shmcoll_gatherv(sb, mine, rb, cnt, dsp, SHMCOLL_INT32, 0, comm);
	case MM_SCATTERV_SMALL:
	case MM_SCATTERV_LARGE:
	case MM_SCATTERV_LONGER:
	case MM_SCATTERV_ROOT:
		mine = m == MM_SCATTERV_ROOT    ? (me == 0 ? n + 2 : n)
		       : !last                  ? n
		       : m == MM_SCATTERV_SMALL ? n + 1
		       : m == MM_SCATTERV_LARGE ? 30000
		                                : 10000;
		return shmcoll_scatterv(sb, cnt, dsp, rb, mine, SHMCOLL_INT32, 0, comm);
	case MM_ALLGATHERV_SMALL:
	case MM_ALLGATHERV_LARGE:
	case MM_ALLGATHERV_OWN:
		memcpy(c2, cnt, sizeof(c2));
		if (me == 0 && m != MM_ALLGATHERV_OWN)
			c2[P - 1] = n + 1;
		return shmcoll_allgatherv(sb, m == MM_ALLGATHERV_OWN && me == 0 ? n - 1 : c2[me],
		                          rb, c2, dsp, SHMCOLL_INT32, comm);
	case MM_RSV_SMALL:
	case MM_RSV_LARGE:
		memcpy(c2, cnt, sizeof(c2));
		if (me == 0)
			c2[P - 1] = n - 1;
		return shmcoll_reduce_scatterv(sb, rb, c2, SHMCOLL_INT32, SHMCOLL_SUM, comm);
	default: /* alltoallv */
		memcpy(c2, cnt, sizeof(c2));
		memcpy(d2, dsp, sizeof(d2));
		if (m == MM_ALLTOALLV_EVEN) {
			/* Receive displacements room for n + 1 on every rank. */
			for (p = 0; p < P; p++) {
				dsp[p] = (n + 1) * (size_t)p;
				if (me == 0) {
					c2[p] = n + 1;
					d2[p] = (n + 1) * (size_t)p;
				}
			}
			if (me == 0)
				cnt[0] = n + 1; /* its own block */
			return shmcoll_alltoallv(sb, c2, d2, rb, cnt, dsp, SHMCOLL_INT32, comm);
		}
		if (me == 0 && m != MM_ALLTOALLV_OWN) {
			c2[1] = n + 1; /* to rank 1, which expects n */
			d2[1] = n * (size_t)P;
		}
		if (me == 0 && m == MM_ALLTOALLV_OWN)
			c2[0] = n + 1;
		return shmcoll_alltoallv(sb, c2, d2, rb, cnt, dsp, SHMCOLL_INT32, comm);
	}
}

static int mm_body(shmcoll_comm *comm, int me, void *arg)
{
	const struct mm_arg *a = arg;
	int P = shmcoll_comm_size(comm), rc0, rc1, rc2, bad = 0;
	size_t elems = 40000 * (size_t)P, i;
	int32_t *sb = malloc(elems * sizeof(*sb)), *rb = malloc(elems * sizeof(*rb));
	int32_t x[4] = {1, 2, 3, 4}, y[4 * VMAXP];
	size_t c[VMAXP], d[VMAXP];

	if (!sb || !rb) {
		free(sb);
		free(rb);
		return E_NOMEM;
	}
	for (i = 0; i < elems; i++)
		sb[i] = (int32_t)i;
	th_breadcrumb("mismatch: %s", mm_name[a->m]);
	rc0 = mm_call(a->m, comm, me, P, sb, rb);
	th_breadcrumb("mismatch: %s: returned %d; the barrier after", mm_name[a->m], rc0);
	rc1 = shmcoll_barrier(comm);
	for (i = 0; i < (size_t)P; i++) {
		c[i] = 4;
		d[i] = 4 * i;
	}
	th_breadcrumb("mismatch: %s: the allgatherv after", mm_name[a->m]);
	rc2 = shmcoll_allgatherv(x, 4, y, c, d, SHMCOLL_INT32, comm);
	a->codes[me * 3] = rc0;
	a->codes[me * 3 + 1] = rc1;
	a->codes[me * 3 + 2] = rc2;
	if (rc0 != 0 && rc0 != -EPROTO && rc0 != -ECANCELED)
		bad = vc_failf(E_MM, NULL, me, "%s: the call returned %d (%s): %s", mm_name[a->m],
		               rc0, shmcoll_strerror(rc0), shmcoll_last_error(comm));
	else if (rc0 ? rc1 != -ECANCELED : rc1 != -EPROTO && rc1 != -ECANCELED)
		bad = vc_failf(E_BROKEN, NULL, me,
		               "%s: the call returned %d, the barrier after it %d (%s): %s",
		               mm_name[a->m], rc0, rc1, shmcoll_strerror(rc1),
		               shmcoll_last_error(comm));
	else if (rc2 != -ECANCELED)
		bad = vc_failf(E_BROKEN, NULL, me, "%s: the second call after returned %d (%s)",
		               mm_name[a->m], rc2, shmcoll_strerror(rc2));
	free(sb);
	free(rb);
	return bad;
}

/* Runs mismatch m on P ranks; checks across ranks what no rank can alone. */
static void run_mm(int m, int P, int threads)
{
	const th_opts o = {.arena_bytes = ARENA, .timeout_ms = MM_TIMEOUT, .wall_ms = 60000};
	size_t bytes = VMAXP * 3 * sizeof(int);
	struct mm_arg a = {.m = m};
	int det = mm_detector(m, P), p, eproto = 0, zero = 0;
	char codes[256] = "";
	th_result res;

	a.codes = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(a.codes != MAP_FAILED);
	if (threads)
		th_run_threads(P, mm_body, &a, &o, &res);
	else
		th_run_ranks(P, mm_body, &a, &o, &res);
	for (p = 0; p < P; p++) {
		eproto += a.codes[p * 3] == -EPROTO;
		zero += a.codes[p * 3] == 0;
		snprintf(codes + strlen(codes), sizeof(codes) - strlen(codes), " %d",
		         a.codes[p * 3]);
	}
	cr_assert(res.ok, "%s, %s P=%d: %s", mm_name[m], threads ? "threads" : "processes", P,
	          res.summary);
	if (det >= 0)
		cr_assert(a.codes[det * 3] == -EPROTO,
		          "%s, %s P=%d: rank %d, which sees the mismatch, returned %d (calls:%s)",
		          mm_name[m], threads ? "threads" : "processes", P, det, a.codes[det * 3],
		          codes);
	else
		cr_assert(eproto >= 1 && zero == 0,
		          "%s, %s P=%d: want -EPROTO somewhere and no 0 (calls:%s)", mm_name[m],
		          threads ? "threads" : "processes", P, codes);
	munmap(a.codes, bytes);
}

static void run_mm_range(int from, int to)
{
	int m;

	for (m = from; m <= to; m++) {
		if (!TH_UNDER_TSAN) {
			run_mm(m, 2, 0);
			run_mm(m, 3, 0);
		}
		run_mm(m, 3, 1);
	}
}

Test(vcoll, mismatch_gatherv, .timeout = 300)
{
	run_mm_range(MM_GATHERV_MORE, MM_GATHERV_LONGER);
}

Test(vcoll, mismatch_scatterv, .timeout = 300)
{
	run_mm_range(MM_SCATTERV_SMALL, MM_SCATTERV_ROOT);
}

Test(vcoll, mismatch_allgatherv, .timeout = 300)
{
	run_mm_range(MM_ALLGATHERV_SMALL, MM_ALLGATHERV_OWN);
}

Test(vcoll, mismatch_reduce_scatterv, .timeout = 300)
{
	run_mm_range(MM_RSV_SMALL, MM_RSV_LARGE);
}

/* Without SHMCOLL_CHECK a small call goes inline: each rank checks the count a peer's
 * message gives it, read from the message's table or, every block the same, its length. */
Test(vcoll, mismatch_alltoallv_inline, .timeout = 300)
{
	run_mm_range(MM_ALLTOALLV_TABLE, MM_ALLTOALLV_EVEN);
}

/* SHMCOLL_CHECK=1 is read when the communicator is made: set here, before the harness makes
 * the ranks' communicators (Criterion runs each test in a process of its own). */
Test(vcoll, mismatch_alltoallv_checked, .timeout = 300)
{
	cr_assert(setenv("SHMCOLL_CHECK", "1", 1) == 0);
	run_mm_range(MM_ALLTOALLV_SMALL, MM_ALLTOALLV_OWN);
}
