/* nodefault.c - a job in which one rank fails on purpose, for the multi-node
 * fault tests: every rank runs allreduce and bcast calls in a loop; at call
 * AT the victim rank either dies (kill: SIGKILL to itself), stops answering
 * (stop: SIGSTOP to itself; it never resumes), or aborts its communicator
 * (abort). Every other rank reports what its failing call returned, checks
 * that the next call returns -ECANCELED, and exits with
 *   10 -EOWNERDEAD   11 -ETIMEDOUT   12 -ECANCELED   13 another error
 *   14 the call after the failure did not return -ECANCELED
 *   15 no call failed   1 shmcoll_init failed
 * Usage: nodefault kill|stop|abort VICTIM AT */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shmcoll.h"

#define CALLS 400
#define COUNT 3000

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static int send[COUNT], recv[COUNT];
	shmcoll_comm *comm;
	int victim, at, rank, i, rc = 0, code;
	double t0 = 0;

	if (argc != 4)
		return 2;
	victim = atoi(argv[2]);
	at = atoi(argv[3]);
	if (shmcoll_init(&comm)) {
		fprintf(stderr, "nodefault: shmcoll_init: %s\n", shmcoll_last_error(NULL));
		return 1;
	}
	rank = shmcoll_comm_rank(comm);
	for (i = 0; i < COUNT; i++)
		send[i] = rank + i;
	for (i = 0; i < CALLS && rc == 0; i++) {
		if (i == at && rank == victim) {
			if (!strcmp(argv[1], "kill"))
				raise(SIGKILL);
			if (!strcmp(argv[1], "stop"))
				raise(SIGSTOP);
			if (!strcmp(argv[1], "abort")) {
				shmcoll_comm_abort(comm);
				printf("rank %d aborted\n", rank);
				return shmcoll_comm_destroy(comm) ? 16 : 0;
			}
		}
		t0 = now_s();
		/* Small calls (inline, recursive doubling) and larger ones. */
		rc = i % 2 ? shmcoll_allreduce(send, recv, i % 4 == 1 ? 8 : COUNT, SHMCOLL_INT32,
		                               SHMCOLL_SUM, comm)
		           : shmcoll_bcast(recv, i % 4 == 0 ? 16 : COUNT, SHMCOLL_INT32,
		                           i % shmcoll_comm_size(comm), comm);
	}
	if (rc == 0) {
		printf("rank %d: no call failed\n", rank);
		shmcoll_comm_destroy(comm);
		return 15;
	}
	printf("rank %d: call %d returned %d (%s) after %.2f s: %s\n", rank, i - 1, rc,
	       shmcoll_strerror(rc), now_s() - t0, shmcoll_last_error(comm));
	code = rc == -EOWNERDEAD ? 10 : rc == -ETIMEDOUT ? 11 : rc == -ECANCELED ? 12 : 13;
	rc = shmcoll_barrier(comm);
	if (rc != -ECANCELED) {
		printf("rank %d: the next call returned %d, not -ECANCELED\n", rank, rc);
		code = 14;
	}
	shmcoll_comm_destroy(comm);
	return code;
}
