/* calls.c - collectives started without blocking and checked (calls.h). */
#include "tests/calls.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "lib/api/probe.h"
#include "tests/harness.h"

static const size_t sizes[] = {2, 100, 3000, 70000};

static int64_t input(int rank, int k, size_t i)
{
	return (int64_t)(th_hash(0x7a5c + (uint64_t)k, rank, i) % 1000000);
}

static int per_peer(int kind)
{
	return kind == TH_ALLGATHER || kind == TH_GATHER || kind == TH_SCATTER ||
	       kind == TH_ALLTOALL || kind == TH_REDUCE_SCATTER;
}

int tcall_start(shmcoll_comm *comm, struct tcall *c, int k, int big)
{
	int P = shmcoll_comm_size(comm), rank = shmcoll_comm_rank(comm);
	size_t i, len;

	memset(c, 0, sizeof(*c));
	c->kind = k % TH_COLL_COUNT;
	c->count = sizes[(k / TH_COLL_COUNT) % 4];
	/* Every third round, the pipelined collectives span 2.5 of the leaders' chunks. */
	if (big && (k / TH_COLL_COUNT) % 3 == 2 &&
	    (c->kind == TH_ALLREDUCE || c->kind == TH_REDUCE || c->kind == TH_BCAST))
		c->count = shmcoll__probe_hier_chunk_bytes() / sizeof(int64_t) * 5 / 2 + 13;
	if (per_peer(c->kind))
		c->count = c->count / (size_t)P + 1;
	c->root = k % P;
	len = per_peer(c->kind) ? c->count * (size_t)P : c->count;
	c->send = malloc(len * sizeof(int64_t));
	c->recv = malloc(len * sizeof(int64_t));
	if (!c->send || !c->recv)
		return 1;
	for (i = 0; i < len; i++) {
		c->send[i] = input(rank, k, i);
		c->recv[i] = -1;
	}
	if (c->kind == TH_BCAST && rank == c->root)
		memcpy(c->recv, c->send, c->count * sizeof(int64_t));
	c->call = shmcoll__probe_start(comm, th_coll_name((th_coll)c->kind), c->send, c->recv,
	                               c->count, SHMCOLL_INT64, SHMCOLL_SUM, c->root);
	return c->call ? 0 : 1;
}

void tcall_poll_all(shmcoll_comm *comm, struct tcall *calls, int n)
{
	int k, done, left;

	for (left = n; left;) {
		left = 0;
		for (k = 0; k < n; k++) {
			shmcoll__probe_test(comm, calls[k].call, &done);
			left += !done;
		}
		if (left)
			sched_yield();
	}
}

int tcall_check(shmcoll_comm *comm, const struct tcall *c, int k, int rc)
{
	int P = shmcoll_comm_size(comm), rank = shmcoll_comm_rank(comm), r;
	size_t i, n = c->count;
	int64_t want;

	if (rc != 0)
		return 150 + c->kind;
	for (i = 0; i < n * (size_t)P; i++) {
		switch (c->kind) {
		case TH_ALLREDUCE:
		case TH_REDUCE:
			if (i >= n || (c->kind == TH_REDUCE && rank != c->root))
				continue;
			for (want = 0, r = 0; r < P; r++)
				want += input(r, k, i);
			break;
		case TH_BCAST:
			if (i >= n)
				continue;
			want = input(c->root, k, i);
			break;
		case TH_ALLGATHER:
		case TH_GATHER:
			if (c->kind == TH_GATHER && rank != c->root)
				continue;
			want = input((int)(i / n), k, i % n);
			break;
		case TH_SCATTER:
			if (i >= n)
				continue;
			want = input(c->root, k, (size_t)rank * n + i);
			break;
		case TH_REDUCE_SCATTER:
			if (i >= n)
				continue;
			for (want = 0, r = 0; r < P; r++)
				want += input(r, k, (size_t)rank * n + i);
			break;
		case TH_ALLTOALL:
			want = input((int)(i / n), k, (size_t)rank * n + i % n);
			break;
		default:
			return 0;
		}
		if (c->recv[i] != want)
			return 100 + c->kind;
	}
	return 0;
}

void tcall_free(struct tcall *c)
{
	shmcoll__probe_free(c->call);
	free(c->send);
	free(c->recv);
	c->call = NULL;
	c->send = c->recv = NULL;
}
