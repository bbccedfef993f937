/* test_progress.c - MPI's progress rule (docs/ARCHITECTURE.md, "Progress"): while a rank waits
 * or tests on any request, or is blocked in any call, every operation it has outstanding, on
 * every communicator, moves. Each case keeps large calls (an iallreduce and an ibcast of
 * BIG elements, many staging chunks each: every chunk needs every rank's part again) and an
 * ibarrier outstanding on four communicators (the harness's and three dups), started in an
 * order of communicators that differs per rank, and completes them so that ranks wait on
 * different communicators at once:
 *  - shmcoll_wait one by one, each rank in its own order (rank 0 first to last, rank 1 the
 *    reverse, others shuffled);
 *  - shmcoll_waitall / shmcoll_testall / shmcoll_waitany over one array of all of them,
 *    each rank's array in its own order;
 *  - shmcoll_test polled on one request at a time, each rank in its own order;
 *  - a blocking allreduce and barrier on one communicator while the peer waits on calls of
 *    another that need this rank's part.
 * Without the rule every case hangs until the communicators' timeout (TIMEOUT_MS) and fails.
 * Each runs with SHMCOLL_PROGRESS_THREAD=0 and =1, ranks as processes and as threads.
 * Children never call cr_*: a body returns 0 or a code (1..199) and prints what failed. */
#include <criterion/criterion.h>

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness.h"

#define NCOMM      4 /* the harness's communicator and three dups */
#define NPER       3 /* calls per communicator: iallreduce, ibcast, ibarrier */
#define NREQ       (NCOMM * NPER)
#define ROUNDS     2
#define ARENA      (1u << 20) /* staging halves of 128 KiB and less: many chunks per call */
#define TIMEOUT_MS 20000      /* what a hang turns into: -ETIMEDOUT */

/* Elements (int32) of the large calls: 2 MiB, 16 staging chunks and more; less under
 * ThreadSanitizer, which runs them 5-20x slower (still 4 chunks). */
#define BIG (TH_UNDER_TSAN ? ((size_t)1 << 17) : ((size_t)1 << 19))

/* Codes a body returns (the messages on stderr say more). */
#define E_NOMEM   1
#define E_DUP     2
#define E_START   3
#define E_DONE    4 /* a completion returned an error */
#define E_REDUCE  5 /* an iallreduce's result is wrong */
#define E_BCAST   6 /* an ibcast's result is wrong */
#define E_BLOCK   7 /* a blocking call failed or gave a wrong result */
#define E_REQ     8 /* a completed request was not set to NULL, or a bad index */
#define E_DESTROY 9

enum how {
	HOW_WAIT,     /* shmcoll_wait, one by one */
	HOW_WAITALL,  /* shmcoll_waitall over all */
	HOW_TESTALL,  /* shmcoll_testall polled */
	HOW_WAITANY,  /* shmcoll_waitany until none is left */
	HOW_TEST,     /* shmcoll_test polled on one at a time */
	HOW_BLOCKING, /* blocking calls on one communicator, waits on another */
};

static const th_opts opts = {.arena_bytes = ARENA, .timeout_ms = TIMEOUT_MS, .wall_ms = 200000};

static const char *how_name(int how)
{
	static const char *names[] = {"wait", "waitall", "testall", "waitany", "test", "blocking"};
	return names[how];
}

/* This rank's order of 0..n-1: rank 0 in order, rank 1 reversed, the others shuffled by a
 * hash of (seed, rank). */
static void order(int *o, int n, int me, uint64_t seed)
{
	int i, j, t;

	for (i = 0; i < n; i++)
		o[i] = me == 1 ? n - 1 - i : i;
	if (me < 2)
		return;
	for (i = n - 1; i > 0; i--) {
		j = (int)(th_hash(seed, me, (uint64_t)i) % (uint64_t)(i + 1));
		t = o[i];
		o[i] = o[j];
		o[j] = t;
	}
}

static int32_t in_value(uint64_t salt, int r, size_t i)
{
	return (int32_t)(th_hash(salt, r, i) & 0xffff);
}

/* The calls of one communicator: send and receive of the iallreduce, the bcast buffer. */
struct calls {
	int32_t *send, *recv, *bc;
	uint64_t salt;
	int root;
};

static int calls_new(struct calls *k, uint64_t salt, int root, int me)
{
	size_t i;

	k->send = malloc(BIG * sizeof(int32_t));
	k->recv = malloc(BIG * sizeof(int32_t));
	k->bc = malloc(BIG * sizeof(int32_t));
	if (!k->send || !k->recv || !k->bc)
		return E_NOMEM;
	k->salt = salt;
	k->root = root;
	for (i = 0; i < BIG; i++) {
		k->send[i] = in_value(salt, me, i);
		k->recv[i] = -1;
		k->bc[i] = me == root ? (int32_t)th_hash(salt + 1, root, i) : -1;
	}
	return 0;
}

static void calls_free(struct calls *k)
{
	free(k->send);
	free(k->recv);
	free(k->bc);
	memset(k, 0, sizeof(*k));
}

static int calls_check(const struct calls *k, int P, int me, int c)
{
	size_t i;
	int r;

	for (i = 0; i < BIG; i++) {
		uint32_t want = 0;

		for (r = 0; r < P; r++)
			want += (uint32_t)in_value(k->salt, r, i);
		if ((uint32_t)k->recv[i] != want) {
			fprintf(stderr, "FAIL rank %d: comm %d iallreduce[%zu] = %d, want %d\n", me,
			        c, i, k->recv[i], (int32_t)want);
			return E_REDUCE;
		}
		if (k->bc[i] != (int32_t)th_hash(k->salt + 1, k->root, i)) {
			fprintf(stderr, "FAIL rank %d: comm %d ibcast[%zu] wrong\n", me, c, i);
			return E_BCAST;
		}
	}
	return 0;
}

static int start(shmcoll_comm *c, struct calls *k, shmcoll_request **r, int me, int ci)
{
	int rc;

	rc = shmcoll_iallreduce(k->send, k->recv, BIG, SHMCOLL_INT32, SHMCOLL_SUM, c, &r[0]);
	if (!rc)
		rc = shmcoll_ibcast(k->bc, BIG, SHMCOLL_INT32, k->root, c, &r[1]);
	if (!rc)
		rc = shmcoll_ibarrier(c, &r[2]);
	if (rc) {
		fprintf(stderr, "FAIL rank %d: start on comm %d: %d (%s): %s\n", me, ci, rc,
		        shmcoll_strerror(rc), shmcoll_last_error(c));
		return E_START;
	}
	return 0;
}

static int done_rc(int rc, int me, const char *what, int i)
{
	if (!rc)
		return 0;
	fprintf(stderr, "FAIL rank %d: %s of request %d: %d (%s)\n", me, what, i, rc,
	        shmcoll_strerror(rc));
	return E_DONE;
}

/* Completes the NREQ requests (reqs[c * NPER + j]: call j of communicator c) as how says,
 * in an order of this rank's. */
static int complete(shmcoll_request **reqs, int how, int me, int round, uint64_t seed)
{
	shmcoll_request *arr[NREQ], *orig[NREQ];
	int o[NREQ], i, c, rc = 0, done;
	size_t idx, n;

	order(o, NREQ, me, seed);
	memcpy(orig, reqs, sizeof(orig));
	memset(reqs, 0, sizeof(orig)); /* arr has them now */
	for (i = 0; i < NREQ; i++)
		arr[i] = orig[o[i]];
	switch (how) {
	case HOW_WAIT:
		for (i = 0; i < NREQ && !rc; i++)
			rc = done_rc(shmcoll_wait(&arr[i], NULL), me, "wait", o[i]);
		break;
	case HOW_WAITALL:
		rc = done_rc(shmcoll_waitall(NREQ, arr, NULL), me, "waitall", -1);
		break;
	case HOW_TESTALL:
		do {
			rc = done_rc(shmcoll_testall(NREQ, arr, &done, NULL), me, "testall", -1);
			if (!done)
				sched_yield();
		} while (!rc && !done);
		break;
	case HOW_WAITANY:
		/* Round 0: over the calls of one communicator at a time (NPER consecutive
		 * entries of reqs), in this rank's order of communicators; round 1: over all. */
		memcpy(arr, orig, sizeof(arr));
		order(o, NCOMM, me, seed);
		for (c = 0; c < (round ? 1 : NCOMM) && !rc; c++) {
			shmcoll_request **sub = round ? arr : &arr[o[c] * NPER];
			size_t m = round ? NREQ : NPER;

			for (n = 0; n < m && !rc; n++) {
				rc =
				    done_rc(shmcoll_waitany(m, sub, &idx, NULL), me, "waitany", -1);
				if (!rc && (idx >= m || sub[idx])) {
					fprintf(stderr, "FAIL rank %d: waitany gave index %zu\n",
					        me, idx);
					rc = E_REQ;
				}
			}
		}
		break;
	case HOW_TEST:
		for (i = 0; i < NREQ && !rc; i++)
			do {
				rc = done_rc(shmcoll_test(&arr[i], &done, NULL), me, "test", o[i]);
				if (!done)
					sched_yield();
			} while (!rc && !done);
		break;
	}
	for (i = 0; i < NREQ && !rc; i++)
		if (arr[i]) {
			fprintf(stderr, "FAIL rank %d: request %d left set\n", me, o[i]);
			rc = E_REQ;
		}
	/* On failure: whatever is left, so the destroys below do not see it outstanding. */
	for (i = 0; i < NREQ; i++)
		if (arr[i])
			shmcoll_wait(&arr[i], NULL);
	return rc;
}

/* A blocking allreduce of BIG elements and a barrier on c, checked. */
static int blocking_call(shmcoll_comm *c, int P, int me, uint64_t salt)
{
	struct calls k = {0};
	size_t i;
	int rc = calls_new(&k, salt, 0, me), r;

	if (!rc) {
		rc = shmcoll_allreduce(k.send, k.recv, BIG, SHMCOLL_INT32, SHMCOLL_SUM, c);
		if (!rc)
			rc = shmcoll_barrier(c);
		if (rc) {
			fprintf(stderr, "FAIL rank %d: blocking call: %d (%s): %s\n", me, rc,
			        shmcoll_strerror(rc), shmcoll_last_error(c));
			rc = E_BLOCK;
		}
	}
	for (i = 0; i < BIG && !rc; i++) {
		uint32_t want = 0;

		for (r = 0; r < P; r++)
			want += (uint32_t)in_value(salt, r, i);
		if ((uint32_t)k.recv[i] != want) {
			fprintf(stderr, "FAIL rank %d: blocking allreduce[%zu] wrong\n", me, i);
			rc = E_BLOCK;
		}
	}
	calls_free(&k);
	return rc;
}

/* HOW_BLOCKING: even ranks make a blocking allreduce and barrier on comms[0] (behind its
 * outstanding calls) while their odd peers wait (shmcoll_wait) on the calls of comms[1] and
 * comms[3], which need the even ranks' part: only the blocking calls' waits can move it;
 * the odd ranks then make the same blocking calls. Then the reverse, with comms[2]. */
static int blocking(shmcoll_comm **comms, shmcoll_request **reqs, int P, int me, uint64_t salt)
{
	int rc = 0, i, side, c;

	for (side = 0; side < 2 && !rc; side++) {
		if (me % 2 != side)
			for (c = 1 + side; c < NCOMM && !rc; c += 2)
				for (i = 0; i < NPER && !rc; i++)
					rc = done_rc(shmcoll_wait(&reqs[c * NPER + i], NULL), me,
					             "wait", c * NPER + i);
		if (!rc)
			rc = blocking_call(comms[0], P, me, salt + 77 + (uint64_t)side);
	}
	/* What is left: comms[0]'s calls, and those this rank did not wait for above. */
	for (i = 0; i < NREQ && !rc; i++)
		rc = done_rc(shmcoll_wait(&reqs[i], NULL), me, "wait", i);
	return rc;
}

static int body(shmcoll_comm *world, int me, void *arg)
{
	int how = *(const int *)arg, P = shmcoll_comm_size(world), rc = 0, rc2, c, round, o[NCOMM];
	shmcoll_comm *comms[NCOMM] = {world};
	shmcoll_request *reqs[NREQ] = {0};
	struct calls k[NCOMM] = {0};

	for (c = 1; c < NCOMM && !rc; c++) {
		rc = shmcoll_comm_dup(world, &comms[c]);
		if (rc) {
			fprintf(stderr, "FAIL rank %d: dup: %d (%s)\n", me, rc,
			        shmcoll_strerror(rc));
			comms[c] = NULL;
			rc = E_DUP;
		}
	}
	for (round = 0; round < ROUNDS && !rc; round++) {
		uint64_t salt = 1000 * (uint64_t)how + 100 * (uint64_t)round;

		th_breadcrumb("%s, round %d: starting", how_name(how), round);
		/* Each rank starts on the communicators in its own order. */
		order(o, NCOMM, me, salt + 5);
		for (c = 0; c < NCOMM && !rc; c++)
			rc =
			    calls_new(&k[o[c]], salt + 10 * (uint64_t)o[c], (o[c] + round) % P, me);
		for (c = 0; c < NCOMM && !rc; c++)
			rc = start(comms[o[c]], &k[o[c]], &reqs[o[c] * NPER], me, o[c]);
		th_breadcrumb("%s, round %d: completing", how_name(how), round);
		if (!rc)
			rc = how == HOW_BLOCKING ? blocking(comms, reqs, P, me, salt)
			                         : complete(reqs, how, me, round, salt + 7);
		for (c = 0; c < NCOMM && !rc; c++)
			rc = calls_check(&k[c], P, me, c);
		for (c = 0; c < NREQ; c++)
			if (reqs[c])
				shmcoll_wait(&reqs[c], NULL);
		for (c = 0; c < NCOMM; c++)
			calls_free(&k[c]);
	}
	for (c = 1; c < NCOMM; c++) {
		if (!comms[c])
			continue;
		rc2 = shmcoll_comm_destroy(comms[c]);
		if (rc2 && !rc) {
			fprintf(stderr, "FAIL rank %d: destroy: %d (%s)\n", me, rc2,
			        shmcoll_strerror(rc2));
			rc = E_DESTROY;
		}
	}
	return rc;
}

/* Every way of running how: SHMCOLL_PROGRESS_THREAD=0 and =1; processes at P = 2 and 4 (4:
 * more ranks than this machine's CPUs, so waits yield at once), threads at P = 2 and 3. */
static void run(int how)
{
	static const char *pt[] = {"0", "1"};
	th_result res;
	int t;

	for (t = 0; t < 2; t++) {
		cr_assert(setenv("SHMCOLL_PROGRESS_THREAD", pt[t], 1) == 0);
		if (!TH_UNDER_TSAN) {
			th_run_ranks(2, body, &how, &opts, &res);
			cr_assert(res.ok, "%s, SHMCOLL_PROGRESS_THREAD=%s, processes P=2: %s",
			          how_name(how), pt[t], res.summary);
			th_run_ranks(4, body, &how, &opts, &res);
			cr_assert(res.ok, "%s, SHMCOLL_PROGRESS_THREAD=%s, processes P=4: %s",
			          how_name(how), pt[t], res.summary);
		}
		th_run_threads(2, body, &how, &opts, &res);
		cr_assert(res.ok, "%s, SHMCOLL_PROGRESS_THREAD=%s, threads P=2: %s", how_name(how),
		          pt[t], res.summary);
		th_run_threads(3, body, &how, &opts, &res);
		cr_assert(res.ok, "%s, SHMCOLL_PROGRESS_THREAD=%s, threads P=3: %s", how_name(how),
		          pt[t], res.summary);
	}
	unsetenv("SHMCOLL_PROGRESS_THREAD");
}

Test(progress, wait_in_different_orders, .timeout = 600)
{
	run(HOW_WAIT);
}

Test(progress, waitall_over_communicators, .timeout = 600)
{
	run(HOW_WAITALL);
}

Test(progress, testall_over_communicators, .timeout = 600)
{
	run(HOW_TESTALL);
}

Test(progress, waitany_over_communicators, .timeout = 600)
{
	run(HOW_WAITANY);
}

Test(progress, test_one_at_a_time, .timeout = 600)
{
	run(HOW_TEST);
}

Test(progress, blocking_call_while_peer_waits_on_another, .timeout = 600)
{
	run(HOW_BLOCKING);
}
