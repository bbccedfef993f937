/* nodematrix.c - the correctness matrix of every collective (tests/matrix.c,
 * the small-arena phase: ordinary and symmetric buffers, counts from 0 to
 * larger than the arena, every dtype and op, every root) on the communicator
 * shmcoll_init() makes - in the multi-node tests, one over several nodes.
 * With arguments, only the named collectives ("allreduce bcast ..."). Rank 0
 * prints a line per collective and the transport its node's leader uses;
 * the exit code is 0 only when every check of this rank passed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/hier.h"
#include "tests/matrix.h"

/* The barrier's ordering check needs counters every rank of the job sees:
 * the nodes of a test share this machine's /dev/shm, and the job token. */
static _Atomic int *shared_counters(shmcoll_comm *comm)
{
	size_t bytes = TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int);
	const char *tag = getenv("SHMCOLL_TOKEN");
	char name[300];
	void *p;
	int fd;

	snprintf(name, sizeof(name), "/nodematrix.%s", tag ? tag : getenv("SHMCOLL_JOB"));
	fd = shm_open(name, O_CREAT | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
		return NULL;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (shmcoll_barrier(comm) != 0 || p == MAP_FAILED)
		return NULL;
	if (shmcoll_comm_rank(comm) == 0)
		shm_unlink(name);
	/* Nobody opens it after this, so nobody recreates it. */
	if (shmcoll_barrier(comm) != 0)
		return NULL;
	return p;
}

static int wanted(int argc, char **argv, th_coll coll)
{
	int i;

	if (argc < 2)
		return 1;
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], th_coll_name(coll)))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	shmcoll_comm *comm;
	_Atomic int *counters;
	const char *net;
	int coll, rc, failed = 0, rank, size;

	rc = shmcoll_init(&comm);
	if (rc) {
		fprintf(stderr, "nodematrix: shmcoll_init: %s\n", shmcoll_last_error(NULL));
		return 1;
	}
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	net = shmcoll__hier_transport(comm);
	if (net && rank == 0)
		printf("transport %s\n", net);
	counters = shared_counters(comm);
	for (coll = 0; coll < TH_COLL_COUNT; coll++) {
		struct th_matrix m = {.coll = coll, .phase = PHASE_SMALL_ARENA, .counters = counters};

		if (!wanted(argc, argv, coll))
			continue;
		rc = coll == TH_BARRIER && !counters ? TH_E_SETUP : th_matrix_body(comm, rank, &m);
		if (rank == 0 || rc)
			printf("%s %s rank %d of %d\n", rc ? "FAIL" : "ok", th_coll_name(coll), rank,
			       size);
		fflush(stdout);
		failed |= rc != 0;
	}
	rc = shmcoll_comm_destroy(comm);
	return failed || rc;
}
