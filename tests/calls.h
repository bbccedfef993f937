/* calls.h - collectives started without blocking and checked (the resumable-operation tests:
 * tests/test_tasks.c on one node, tests/progs/nodematrix.c "tasks" across nodes). Call k of
 * a rank is a collective of every kind in turn, at sizes that take every protocol, on
 * int64 values every rank derives on its own. No Criterion here. */
#ifndef SHMCOLL_TESTS_CALLS_H
#define SHMCOLL_TESTS_CALLS_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll.h"

struct tcall {
	struct shmcoll_probe_call *call;
	int kind; /* th_coll */
	size_t count;
	int root;
	int64_t *send, *recv;
};

/* Sets up call k of this rank (buffers, inputs) and starts it. big: also sizes beyond the
 * multi-node pipelines' chunk. 0, or 1 when out of memory. */
int tcall_start(shmcoll_comm *comm, struct tcall *c, int k, int big);

/* Polls calls [0, n) until every one is done, yielding between rounds (ranks may share
 * CPUs). */
void tcall_poll_all(shmcoll_comm *comm, struct tcall *calls, int n);

/* The result of done call k on this rank: 0, 100 + the kind for a wrong value, or 150 + the
 * kind when the call failed. */
int tcall_check(shmcoll_comm *comm, const struct tcall *c, int k, int rc);

void tcall_free(struct tcall *c);

#endif
