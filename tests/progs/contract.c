/* contract.c - a program written only against the API contract, built
 * against the installed header and library (pkg-config) and run under the
 * installed shmcoll-run: the correctness matrix of every collective on the
 * job's communicator (SHMCOLL_ARENA_BYTES makes its arena small), then the
 * symmetric-buffer phase on a second communicator that the same ranks make
 * with shmcoll_comm_create. Rank 0 prints one line per part; the exit code is
 * 0 only when every check of this rank passed. */
#include <fcntl.h>
#include <shmcoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/matrix.h"

/* Counters every rank can see, for the barrier's ordering check: a small
 * shared-memory object named after the job, removed once all have mapped it. */
static _Atomic int *shared_counters(shmcoll_comm *comm, const char *job)
{
	size_t bytes = TH_MAX_RANKS * TH_BARRIER_STRIDE * sizeof(int);
	char name[300];
	void *p;
	int fd;

	snprintf(name, sizeof(name), "/contract-counters.%s", job);
	fd = shm_open(name, O_CREAT | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
		return NULL;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (shmcoll_barrier(comm) != 0 || p == MAP_FAILED)
		return NULL;
	if (shmcoll_comm_rank(comm) == 0)
		shm_unlink(name);
	return p;
}

static int check(shmcoll_comm *comm, th_coll coll, enum th_phase phase, _Atomic int *counters)
{
	struct th_matrix m = {.coll = coll, .phase = phase, .counters = counters};

	if (coll == TH_BARRIER && !counters)
		return TH_E_SETUP;
	return th_matrix_body(comm, shmcoll_comm_rank(comm), &m);
}

int main(void)
{
	shmcoll_comm *comm, *sym;
	_Atomic int *counters;
	char job[256];
	int coll, rc, failed = 0, rank, size;

	rc = shmcoll_init(&comm);
	if (rc) {
		fprintf(stderr, "contract: shmcoll_init: %s\n", shmcoll_last_error(NULL));
		return 1;
	}
	rank = shmcoll_comm_rank(comm);
	size = shmcoll_comm_size(comm);
	if (getenv("SHMCOLL_JOB"))
		snprintf(job, sizeof(job), "%s", getenv("SHMCOLL_JOB"));
	else
		snprintf(job, sizeof(job), "contract%d", (int)getpid());
	counters = shared_counters(comm, job);

	for (coll = 0; coll < TH_COLL_COUNT; coll++) {
		rc = check(comm, coll, PHASE_SMALL_ARENA, counters);
		if (rank == 0)
			printf("%s %s P=%d\n", rc ? "FAIL" : "ok", th_coll_name(coll), size);
		failed |= rc != 0;
	}

	/* Symmetric buffers at larger counts need a larger arena: a second
	 * communicator of the same ranks, one per collective. */
	snprintf(job + strnlen(job, sizeof(job) - 8), 8, ".sym");
	for (coll = 0; coll < TH_COLL_COUNT; coll++) {
		shmcoll_config cfg = {.rank = rank, .size = size, .job = job};

		if (coll == TH_BARRIER)
			continue;
		cfg.arena_bytes = th_matrix_sym_arena(coll, size);
		rc = shmcoll_comm_create(&cfg, &sym);
		if (rc) {
			fprintf(stderr, "contract: rank %d: %s\n", rank, shmcoll_last_error(NULL));
			failed = 1;
			break;
		}
		rc = check(sym, coll, PHASE_SYM, NULL);
		if (shmcoll_comm_destroy(sym))
			rc = 1;
		if (rank == 0)
			printf("%s %s symmetric P=%d\n", rc ? "FAIL" : "ok", th_coll_name(coll),
			       size);
		failed |= rc != 0;
	}
	shmcoll_comm_destroy(comm);
	return failed;
}
