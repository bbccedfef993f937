/* nodevcoll.c - the variable-count collectives and prefix reductions on the communicator
 * shmcoll_init() makes: in the multi-node tests, one whose ranks span several nodes
 * (node-major: rank = node * nproc + local rank), where lib/hier/vcolls.c composes each
 * call of the equal-count ones. The cases and their checks are tests/test_vcoll.c's
 * (tests/vcases.c, which both run): every rank derives every rank's counts, displacements
 * and data from the case alone and compares every byte of its buffers, and of guards around
 * them, with what they must hold.
 * Without arguments every rank runs:
 *   calls        every call, blocking and then without blocking (completed by wait, a test
 *                loop, waitall, testall or waitany), with blocks of at most 32 bytes, about
 *                1 KiB, tens of KiB and about HUGE_BYTES / P (the padded blocks of a call
 *                then span several of the leaders' chunks of 1 MiB); counts that differ per
 *                rank with zeros, all zero; blocks in reverse rank order with gaps, and in
 *                rank order; the in-place forms; roots on node 0 and on the last node
 *   outstanding  NOUT calls of every kind started together, completed by one waitall
 *   nulls        the cases of calls that pass NULL for a buffer with nothing to move (or
 *                that the call does not read on the rank)
 * and prints "ok vcoll rank R of S" if every check passed. A failed check prints a "FAIL"
 * line saying what; the rank then aborts the communicator, so that the others fail at once
 * instead of waiting, and exits 1. Rank 0 also prints its leader's transport and the time of
 * each phase.
 *
 * With "mismatch NAME", counts that disagree between ranks on different nodes (NAME:
 * allgatherv - rank 0's recvcounts[P-1] is one less than everyone else's, the largest block
 * unchanged; allgatherv-max - the same with recvcounts[P-1] the largest count on rank 0
 * only; gatherv - rank P-1 sends one element more than the root, rank 0, expects;
 * alltoallv - rank 0 sends rank P-1 one element more than it expects (no SHMCOLL_CHECK);
 * reduce_scatterv - as allgatherv): every rank prints "mismatch rank R: A B C", the results
 * of the call, of a barrier after it and of an allgatherv after that, and exits 0 if A is 0,
 * -EPROTO, -ECANCELED or -EOWNERDEAD (the connection to the node that found it lost first),
 * B an error and C -ECANCELED (the test checks across ranks that some rank saw -EPROTO, and,
 * where every rank waits for every other, that none returned 0).
 * Usage: nodevcoll [mismatch NAME] */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/api/probe.h"
#include "tests/harness.h"
#include "tests/vcases.h"

#define MIB        ((size_t)1 << 20)
#define HUGE_BYTES (3 * MIB / 2) /* a huge call's data: above the leaders' 1 MiB chunk */
#define NOUT       21

/* ---- messages ---- */

static int wrank, wsize, nproc; /* this rank, the ranks, the ranks of a node */
static const char *phase = "setup";

static void report(int me, const char *what, const char *msg)
{
	printf("FAIL vcoll rank %d of %d (node %d), %s: %s%s%s\n", me, wsize, me / nproc, phase,
	       what, *what ? ": " : "", msg);
	fflush(stdout);
}

const struct vc_env vc_env = {.huge_bytes = HUGE_BYTES, .report = report};

/* ---- the phases ---- */

static shmcoll_comm *comm;
static uint64_t salt = 1;
static int method;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int nulls; /* the cases run: those without NULL buffers (0), or only those with (1) */

static int go(struct vc c, int forms)
{
	c.salt = salt++;
	if (c.nulls != nulls)
		return 0;
	c.root %= wsize;
	return vc_run_case(comm, &c, wsize, wrank, forms, method++);
}

#define GO(forms, ...)                                                                             \
	do {                                                                                       \
		int rc_ = go((struct vc){__VA_ARGS__}, forms);                                     \
		if (rc_)                                                                           \
			return rc_;                                                                \
	} while (0)

/* Every call at every size, blocking and not, in and out of place, roots on the first and
 * the last node: the cases without NULL buffers (phase calls), then those with (nulls). */
static int calls(void)
{
	static const shmcoll_dtype dts[] = {SHMCOLL_INT32, SHMCOLL_UINT8, SHMCOLL_FLOAT64,
	                                    SHMCOLL_FLOAT16};
	static const shmcoll_op ops[] = {SHMCOLL_SUM, SHMCOLL_MAX, SHMCOLL_PROD, SHMCOLL_MIN};
	int k, sz, ip, i = 0;

	for (k = 0; k < VK_COUNT; k++) {
		for (sz = SZ_TINY; sz <= SZ_HUGE; sz++) {
			if (sz == SZ_SMALL)
				continue;
			for (ip = 0; ip < 2; ip++, i++) {
				if (ip && k == VK_ALLTOALLV)
					continue;
				GO(F_BOTH, .kind = k, .dt = dts[i % 4], .op = ops[i % 4],
				   .root = ip ? wsize - 1 : 0, .sz = sz, .cn = CN_VARIED,
				   .ly = sz == SZ_TINY && !ip ? LY_PACKED : LY_GAPS, .inplace = ip,
				   .nulls = i % 3 == 0);
			}
		}
		GO(F_BOTH, .kind = k, .dt = SHMCOLL_INT64, .op = SHMCOLL_BXOR, .root = 1,
		   .sz = SZ_TINY, .cn = CN_ZERO, .ly = LY_GAPS, .nulls = 1);
		GO(F_BOTH, .kind = k, .dt = SHMCOLL_BFLOAT16, .op = SHMCOLL_SUM, .root = wsize / 2,
		   .sz = SZ_KIB, .cn = CN_EQUAL, .ly = LY_PACKED, .inplace = k != VK_ALLTOALLV);
	}
	return 0;
}

static int phase_calls(void)
{
	salt = 1;
	nulls = 0;
	return calls();
}

static int phase_nulls(void)
{
	salt = 1;
	nulls = 1;
	return calls();
}

/* NOUT calls of every kind outstanding at once, then one waitall. */
static int phase_outstanding(void)
{
	struct vc_run *runs = calloc(NOUT, sizeof(*runs));
	shmcoll_request *reqs[NOUT] = {NULL};
	struct vc c;
	int i, rc = 0;

	if (!runs)
		return vc_failf(E_NOMEM, NULL, wrank, "out of memory");
	for (i = 0; i < NOUT && !rc; i++) {
		c = (struct vc){.kind = i % VK_COUNT,
		                .dt = (shmcoll_dtype)((i * 3) % SHMCOLL_DTYPE_COUNT),
		                .op = SHMCOLL_MAX,
		                .root = i % wsize,
		                .sz = i % 3 == 2   ? SZ_LARGE
		                      : i % 3 == 1 ? SZ_KIB
		                                   : SZ_TINY,
		                .cn = CN_VARIED,
		                .ly = i % 2 ? LY_GAPS : LY_PACKED,
		                .inplace = (i / 7) % 2 && i % VK_COUNT != VK_ALLTOALLV,
		                .salt = 9000 + (uint64_t)i};
		rc = vc_setup(&runs[i], &c, wsize, wrank);
		if (rc) {
			rc = vc_failf(rc, &c, wrank, "out of memory");
			break;
		}
		rc = vc_call_start(&runs[i], comm, &reqs[i]);
		if (rc || !reqs[i])
			rc = vc_failf(E_START, &c, wrank, "start returned %d (%s): %s", rc,
			              shmcoll_strerror(rc), shmcoll_last_error(comm));
	}
	if (!rc) {
		rc = shmcoll_waitall(NOUT, reqs, NULL);
		if (rc)
			rc = vc_failf(E_DONE, NULL, wrank, "waitall returned %d (%s): %s", rc,
			              shmcoll_strerror(rc), shmcoll_last_error(comm));
	}
	if (rc) {
		/* Complete what is outstanding (the abort ends it) before the buffers go. */
		shmcoll_comm_abort(comm);
		shmcoll_waitall(NOUT, reqs, NULL);
	}
	for (i = 0; i < NOUT && !rc; i++)
		rc = vc_run_check(&runs[i], "outstanding");
	for (i = 0; i < NOUT; i++)
		vc_run_free(&runs[i]);
	free(runs);
	return rc;
}

static const struct {
	const char *name;
	int (*run)(void);
} phases[] = {
    {"calls", phase_calls},
    {"outstanding", phase_outstanding},
    {"nulls", phase_nulls},
};

static int run_phases(void)
{
	const char *net = shmcoll__probe_transport(comm);
	int failed = 0, p;
	double t0;

	if (net && wrank == 0)
		printf("transport %s\n", net);
	for (p = 0; !failed && p < (int)(sizeof(phases) / sizeof(phases[0])); p++) {
		t0 = now_s();
		phase = phases[p].name;
		failed = phases[p].run() != 0;
		if (wrank == 0)
			printf("phase %s: %.2f s\n", phase, now_s() - t0);
	}
	if (failed)
		shmcoll_comm_abort(comm); /* the others may wait for this rank */
	p = shmcoll_comm_destroy(comm);
	if (p) {
		printf("FAIL vcoll rank %d: shmcoll_comm_destroy returned %d (%s)\n", wrank, p,
		       shmcoll_strerror(p));
		failed = 1;
	}
	if (!failed)
		printf("ok vcoll rank %d of %d\n", wrank, wsize);
	return failed;
}

/* ---- counts that disagree ---- */

static int run_mismatch(const char *name)
{
	size_t cnt[VMAXP], dsp[VMAXP], c2[VMAXP], d2[VMAXP], n = 5, p, elems;
	int32_t *sb, *rb, x[4] = {1, 2, 3, 4}, y[4 * VMAXP];
	int rc0, rc1, rc2, bad;

	elems = (n + 2) * (size_t)wsize * 2;
	sb = calloc(elems, sizeof(*sb));
	rb = calloc(elems, sizeof(*rb));
	if (!sb || !rb) {
		shmcoll_comm_abort(comm);
		shmcoll_comm_destroy(comm);
		return 1;
	}
	for (p = 0; p < (size_t)wsize; p++) {
		cnt[p] = n;
		dsp[p] = (n + 2) * p;
	}
	/* The largest count stays the same everywhere: only the counts themselves differ. */
	cnt[0] = n + 1;
	memcpy(c2, cnt, sizeof(c2));
	memcpy(d2, dsp, sizeof(d2));
	if (!strcmp(name, "allgatherv") || !strcmp(name, "allgatherv-max")) {
		if (wrank == 0)
			c2[wsize - 1] = name[10] ? n + 2 : n - 1;
		rc0 = shmcoll_allgatherv(sb, c2[wrank], rb, c2, dsp, SHMCOLL_INT32, comm);
	} else if (!strcmp(name, "gatherv")) {
		rc0 = shmcoll_gatherv(sb, cnt[wrank] + (wrank == wsize - 1), rb, cnt, dsp,
		                      SHMCOLL_INT32, 0, comm);
	} else if (!strcmp(name, "alltoallv")) {
		if (wrank == 0)
			c2[wsize - 1] = n + 1;
		rc0 = shmcoll_alltoallv(sb, c2, d2, rb, cnt, dsp, SHMCOLL_INT32, comm);
	} else if (!strcmp(name, "reduce_scatterv")) {
		if (wrank == 0)
			c2[wsize - 1] = n - 1;
		rc0 = shmcoll_reduce_scatterv(sb, rb, c2, SHMCOLL_INT32, SHMCOLL_SUM, comm);
	} else {
		printf("nodevcoll: unknown mismatch '%s'\n", name);
		shmcoll_comm_abort(comm);
		shmcoll_comm_destroy(comm);
		return 2;
	}
	rc1 = shmcoll_barrier(comm);
	for (p = 0; p < (size_t)wsize; p++) {
		c2[p] = 4;
		d2[p] = 4 * p;
	}
	rc2 = shmcoll_allgatherv(x, 4, y, c2, d2, SHMCOLL_INT32, comm);
	printf("mismatch rank %d: %d %d %d (%s)\n", wrank, rc0, rc1, rc2,
	       rc0 ? shmcoll_last_error(comm) : "");
	/* On another node than the one that found it, a rank may see the lost connection first. */
	bad = (rc0 && rc0 != -EPROTO && rc0 != -ECANCELED && rc0 != -EOWNERDEAD) || !rc1 ||
	      rc2 != -ECANCELED;
	if (bad)
		printf(
		    "FAIL vcoll rank %d: mismatch %s: the call %d, the barrier after %d, the call "
		    "after that %d\n",
		    wrank, name, rc0, rc1, rc2);
	shmcoll_comm_destroy(comm);
	free(sb);
	free(rb);
	return bad;
}

int main(int argc, char **argv)
{
	const char *ls = getenv("SHMCOLL_LOCAL_SIZE");
	int rc;

	if (shmcoll_init(&comm)) {
		fprintf(stderr, "nodevcoll: shmcoll_init: %s\n", shmcoll_last_error(NULL));
		return 1;
	}
	wrank = shmcoll_comm_rank(comm);
	wsize = shmcoll_comm_size(comm);
	nproc = ls ? atoi(ls) : wsize;
	if (nproc < 1 || wsize % nproc || wsize > VMAXP || (argc != 1 && argc != 3) ||
	    (argc == 3 && strcmp(argv[1], "mismatch"))) {
		fprintf(stderr,
		        "usage: nodevcoll [mismatch NAME], as at most %d ranks in nodes of "
		        "SHMCOLL_LOCAL_SIZE=%s\n",
		        VMAXP, ls ? ls : "(unset)");
		shmcoll_comm_abort(comm);
		shmcoll_comm_destroy(comm);
		return 2;
	}
	rc = argc == 3 ? run_mismatch(argv[2]) : run_phases();
	fflush(stdout);
	return rc;
}
