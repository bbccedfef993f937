/* test_tasks.c - resumable operations (lib/core/task.h): collectives started without
 * blocking, many outstanding per communicator, advanced by polling from any call or waited
 * for in any order, finished behind a blocking call, and all failed together when the
 * communicator breaks - with ranks as processes and as threads. Every result is checked
 * against values each rank derives on its own (tests/calls.c); the same calls run across
 * nodes in tests/test_multinode.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "lib/api/probe.h"
#include "tests/calls.h"
#include "tests/harness.h"

#define NTASKS 64

/* Starts NTASKS calls (every collective, every protocol), then polls them all until every
 * one is done; the results must be every call's. */
static int poll_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct tcall *calls = calloc(NTASKS, sizeof(*calls));
	int k, done, rc = 0;

	(void)rank;
	(void)arg;
	if (!calls)
		return 1;
	for (k = 0; k < NTASKS && !rc; k++)
		rc = tcall_start(comm, &calls[k], k, 0);
	if (!rc)
		tcall_poll_all(comm, calls, NTASKS);
	for (k = 0; k < NTASKS && !rc; k++)
		rc = tcall_check(comm, &calls[k], k,
		                 shmcoll__probe_test(comm, calls[k].call, &done));
	for (k = 0; k < NTASKS; k++)
		tcall_free(&calls[k]);
	free(calls);
	return rc;
}

/* Starts half the calls and waits for the last first (which runs all before it); starts
 * the rest and makes a blocking call behind them (destroy says -EBUSY meanwhile); checks
 * every result. */
static int order_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct tcall *calls = calloc(NTASKS, sizeof(*calls));
	int P = shmcoll_comm_size(comm), k, done, rc = 0;
	int64_t x = rank + 1, y = 0;

	(void)arg;
	if (!calls)
		return 1;
	for (k = 0; k < NTASKS / 2 && !rc; k++)
		rc = tcall_start(comm, &calls[k], k, 0);
	if (!rc && shmcoll__probe_wait(comm, calls[NTASKS / 2 - 1].call) != 0)
		rc = 3;
	for (k = 0; k < NTASKS / 2 && !rc; k++) {
		shmcoll__probe_test(comm, calls[k].call, &done);
		if (!done)
			rc = 4;
	}
	for (k = NTASKS / 2; k < NTASKS && !rc; k++)
		rc = tcall_start(comm, &calls[k], k, 0);
	if (!rc) {
		shmcoll__probe_test(comm, calls[NTASKS - 1].call, &done);
		if (!done && shmcoll_comm_destroy(comm) != -EBUSY)
			rc = 5;
	}
	if (!rc && (shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT64, SHMCOLL_SUM, comm) != 0 ||
	            y != (int64_t)P * (P + 1) / 2))
		rc = 6;
	for (k = 0; k < NTASKS && !rc; k++) {
		int got = shmcoll__probe_test(comm, calls[k].call, &done);

		rc = done ? tcall_check(comm, &calls[k], k, got) : 7;
	}
	for (k = 0; k < NTASKS; k++)
		tcall_free(&calls[k]);
	free(calls);
	return rc;
}

/* Rank 1 aborts while every other rank has barriers outstanding that rank 1 never joins:
 * every one completes with -ECANCELED, and later calls fail too. */
static int abort_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct shmcoll_probe_call *calls[8];
	int P = shmcoll_comm_size(comm), k, done, left, failed = 0, rc = 0;
	uint32_t mine = shmcoll__probe_my_step(comm);

	(void)arg;
	if (rank == 1) {
		/* Every peer is inside the first barrier: it published its step. */
		for (int p = 0; p < P; p++)
			while (p != 1 && shmcoll__probe_step(comm, p) != mine + 1)
				sched_yield();
		shmcoll_comm_abort(comm);
		return shmcoll_barrier(comm) == -ECANCELED ? 0 : 20;
	}
	for (k = 0; k < 8; k++) {
		calls[k] = shmcoll__probe_start(comm, "barrier", NULL, NULL, 0, SHMCOLL_UINT8,
		                                SHMCOLL_SUM, 0);
		if (!calls[k])
			return 1;
	}
	for (left = 8; left;) {
		left = 0;
		for (k = 0; k < 8; k++) {
			shmcoll__probe_test(comm, calls[k], &done);
			left += !done;
		}
		if (left)
			sched_yield();
	}
	for (k = 0; k < 8; k++) {
		failed += shmcoll__probe_test(comm, calls[k], &done) == -ECANCELED;
		shmcoll__probe_free(calls[k]);
	}
	if (failed != 8)
		rc = 10 + failed;
	if (!rc && shmcoll_barrier(comm) != -ECANCELED)
		rc = 30;
	return rc;
}

static th_opts opts = {.arena_bytes = 1 << 20, .timeout_ms = 60000, .wall_ms = 200000};

Test(tasks, many_outstanding_polled, .timeout = 600)
{
	th_result res;

	for (int P = 1; P <= 4; P++) {
		th_run_ranks(P, poll_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes, P=%d: %s", P, res.summary);
		th_run_threads(P, poll_body, NULL, &opts, &res);
		cr_assert(res.ok, "threads, P=%d: %s", P, res.summary);
	}
	th_run_ranks(8, poll_body, NULL, &opts, &res);
	cr_assert(res.ok, "processes, P=8: %s", res.summary);
}

Test(tasks, waited_out_of_order_and_behind_a_blocking_call, .timeout = 600)
{
	th_result res;

	for (int P = 1; P <= 4; P++) {
		th_run_ranks(P, order_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes, P=%d: %s", P, res.summary);
		th_run_threads(P, order_body, NULL, &opts, &res);
		cr_assert(res.ok, "threads, P=%d: %s", P, res.summary);
	}
}

Test(tasks, abort_completes_every_outstanding_call, .timeout = 300)
{
	th_result res;

	for (int P = 2; P <= 4; P++) {
		th_run_ranks(P, abort_body, NULL, &opts, &res);
		cr_assert(res.ok, "processes, P=%d: %s", P, res.summary);
		th_run_threads(P, abort_body, NULL, &opts, &res);
		cr_assert(res.ok, "threads, P=%d: %s", P, res.summary);
	}
}
