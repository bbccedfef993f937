/* test_tasks.c - resumable operations (lib/core/task.h): collectives started without
 * blocking, many outstanding per communicator, advanced by polling from any call or waited
 * for in any order, finished behind a blocking call, and all failed together when the
 * communicator breaks - with ranks as processes and as threads. Every result is checked
 * against values each rank derives on its own. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/probe.h"
#include "lib/coll/coll.h"
#include "lib/core/task.h"
#include "tests/harness.h"

/* The calls a rank starts, cycling through every collective and through sizes that take
 * every protocol: inline (<= 1 KiB), flat, direct (allreduce from 4 KiB), several chunks. */
#define NTASKS 64
static const size_t sizes[] = {2, 100, 3000, 70000};

struct call {
	struct shmcoll_task t;
	int kind; /* th_coll */
	size_t count;
	int root;
	int64_t *send, *recv;
};

static int64_t input(int rank, int k, size_t i)
{
	return (int64_t)(th_hash(0x7a5c + (uint64_t)k, rank, i) % 1000000);
}

static size_t region(int kind, size_t count, int P)
{
	return kind == TH_ALLGATHER || kind == TH_GATHER || kind == TH_SCATTER ||
	               kind == TH_ALLTOALL || kind == TH_REDUCE_SCATTER
	           ? count * (size_t)P
	           : count;
}

/* Makes call k of this rank and starts it (start) or leaves it to be run blocking. */
static int setup(struct shmcoll_node *n, struct call *c, int k, int rank, int P)
{
	size_t i, len;

	c->kind = k % (TH_BARRIER + 1);
	c->count = sizes[(k / (TH_BARRIER + 1)) % 4];
	if (c->kind == TH_ALLTOALL || c->kind == TH_SCATTER || c->kind == TH_REDUCE_SCATTER ||
	    c->kind == TH_GATHER || c->kind == TH_ALLGATHER)
		c->count = c->count / (size_t)P + 1;
	c->root = k % P;
	len = region(c->kind, c->count, P);
	c->send = malloc(len * sizeof(int64_t));
	c->recv = malloc(len * sizeof(int64_t));
	if (!c->send || !c->recv)
		return 1;
	for (i = 0; i < len; i++) {
		c->send[i] = input(rank, k, i);
		c->recv[i] = -1;
	}
	switch (c->kind) {
	case TH_ALLREDUCE:
		shmcoll__allreduce_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64,
		                        SHMCOLL_SUM);
		break;
	case TH_REDUCE:
		shmcoll__reduce_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64,
		                     SHMCOLL_SUM, c->root);
		break;
	case TH_BCAST:
		if (rank == c->root)
			memcpy(c->recv, c->send, c->count * sizeof(int64_t));
		shmcoll__bcast_init(n, &c->t, c->recv, c->count, SHMCOLL_INT64, c->root);
		break;
	case TH_ALLGATHER:
		shmcoll__allgather_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64);
		break;
	case TH_REDUCE_SCATTER:
		shmcoll__reduce_scatter_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64,
		                             SHMCOLL_SUM);
		break;
	case TH_GATHER:
		shmcoll__gather_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64, c->root);
		break;
	case TH_SCATTER:
		shmcoll__scatter_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64, c->root);
		break;
	case TH_ALLTOALL:
		shmcoll__alltoall_init(n, &c->t, c->send, c->recv, c->count, SHMCOLL_INT64);
		break;
	default:
		shmcoll__barrier_init(n, &c->t);
		break;
	}
	return 0;
}

/* Checks the result of call k on this rank: 0, or 100 + the call's kind. */
static int verify(const struct call *c, int k, int rank, int P)
{
	size_t i, n = c->count;
	int r;

	for (i = 0; i < n * (size_t)P; i++) {
		int64_t want = -1, got;

		switch (c->kind) {
		case TH_ALLREDUCE:
		case TH_REDUCE:
			if (i >= n || (c->kind == TH_REDUCE && rank != c->root))
				continue;
			for (want = 0, r = 0; r < P; r++)
				want += input(r, k, i);
			got = c->recv[i];
			break;
		case TH_BCAST:
			if (i >= n)
				continue;
			want = input(c->root, k, i);
			got = c->recv[i];
			break;
		case TH_ALLGATHER:
		case TH_GATHER:
			if (c->kind == TH_GATHER && rank != c->root)
				continue;
			want = input((int)(i / n), k, i % n);
			got = c->recv[i];
			break;
		case TH_SCATTER:
			if (i >= n)
				continue;
			want = input(c->root, k, (size_t)rank * n + i);
			got = c->recv[i];
			break;
		case TH_REDUCE_SCATTER:
			if (i >= n)
				continue;
			for (want = 0, r = 0; r < P; r++)
				want += input(r, k, (size_t)rank * n + i);
			got = c->recv[i];
			break;
		case TH_ALLTOALL:
			want = input((int)(i / n), k, (size_t)rank * n + i % n);
			got = c->recv[i];
			break;
		default:
			return 0;
		}
		if (got != want)
			return 100 + c->kind;
	}
	return 0;
}

static void release(struct call *calls, int count)
{
	for (int k = 0; k < count; k++) {
		free(calls[k].send);
		free(calls[k].recv);
	}
}

/* Starts NTASKS calls, then polls them all until every one is done, yielding between
 * polls (ranks may share CPUs). The results must be every call's. */
static int poll_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct shmcoll_node *n = shmcoll__probe_node(comm);
	int P = shmcoll_comm_size(comm), k, done, left, rc = 0;
	struct call *calls = calloc(NTASKS, sizeof(*calls));

	(void)arg;
	if (!calls)
		return 1;
	for (k = 0; k < NTASKS && !rc; k++) {
		rc = setup(n, &calls[k], k, rank, P);
		if (!rc)
			shmcoll__task_start(n, &calls[k].t);
	}
	for (left = NTASKS; !rc && left;) {
		left = 0;
		for (k = 0; k < NTASKS; k++) {
			shmcoll__task_test(n, &calls[k].t, &done);
			left += !done;
		}
		if (left)
			sched_yield();
	}
	for (k = 0; k < NTASKS && !rc; k++) {
		if (calls[k].t.rc != 0)
			rc = 2;
		else
			rc = verify(&calls[k], k, rank, P);
	}
	release(calls, NTASKS);
	free(calls);
	return rc;
}

/* Starts NTASKS calls and waits for the last first (which runs all before it), then makes
 * a blocking call behind more outstanding ones, and checks every result. */
static int order_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct shmcoll_node *n = shmcoll__probe_node(comm);
	int P = shmcoll_comm_size(comm), k, done, rc = 0;
	struct call *calls = calloc(NTASKS, sizeof(*calls));
	int64_t x = rank + 1, y = 0;

	(void)arg;
	if (!calls)
		return 1;
	for (k = 0; k < NTASKS / 2 && !rc; k++) {
		rc = setup(n, &calls[k], k, rank, P);
		if (!rc)
			shmcoll__task_start(n, &calls[k].t);
	}
	if (!rc && shmcoll__task_wait(n, &calls[NTASKS / 2 - 1].t) != 0)
		rc = 3;
	for (k = 0; k < NTASKS / 2 && !rc; k++) {
		shmcoll__task_test(n, &calls[k].t, &done);
		if (!done)
			rc = 4;
	}
	for (k = NTASKS / 2; k < NTASKS && !rc; k++) {
		rc = setup(n, &calls[k], k, rank, P);
		if (!rc)
			shmcoll__task_start(n, &calls[k].t);
	}
	/* A blocking call behind outstanding ones finishes them first; the communicator
	 * refuses to go while any is outstanding. */
	if (!rc && !calls[NTASKS - 1].t.done && shmcoll_comm_destroy(comm) != -EBUSY)
		rc = 5;
	if (!rc && (shmcoll_allreduce(&x, &y, 1, SHMCOLL_INT64, SHMCOLL_SUM, comm) != 0 ||
	            y != (int64_t)P * (P + 1) / 2))
		rc = 6;
	for (k = 0; k < NTASKS && !rc; k++) {
		if (!calls[k].t.done || calls[k].t.rc != 0)
			rc = 7;
		else
			rc = verify(&calls[k], k, rank, P);
	}
	release(calls, NTASKS);
	free(calls);
	return rc;
}

/* Rank 1 aborts while every other rank has calls outstanding (barriers rank 1 never
 * joins): every call completes with -ECANCELED, and later calls fail too. */
static int abort_body(shmcoll_comm *comm, int rank, void *arg)
{
	struct shmcoll_node *n = shmcoll__probe_node(comm);
	int P = shmcoll_comm_size(comm), k, done, left, failed = 0, rc = 0;
	struct shmcoll_task t[8];
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
		shmcoll__barrier_init(n, &t[k]);
		shmcoll__task_start(n, &t[k]);
	}
	for (left = 8; left;) {
		left = 0;
		for (k = 0; k < 8; k++) {
			shmcoll__task_test(n, &t[k], &done);
			left += !done;
		}
		if (left)
			sched_yield();
	}
	for (k = 0; k < 8; k++)
		failed += t[k].rc == -ECANCELED;
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
