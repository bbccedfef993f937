/* nodematrix.c - the correctness matrix of every collective (tests/matrix.c,
 * the small-arena phase: ordinary and symmetric buffers, counts from 0 to
 * larger than the arena, every dtype and op, every root) on the communicator
 * shmcoll_init() makes - in the multi-node tests, one over several nodes.
 * With arguments, only the named collectives ("allreduce bcast ..."); with
 * "chunks", the cases that span several of the leaders' chunks instead; with
 * "split", shmcoll_comm_split and _dup on a communicator over nodes; with "tasks", collectives
 * of every kind started without blocking, polled together and checked (tests/calls.c). Rank 0
 * prints a line per collective and the transport its node's leader uses;
 * the exit code is 0 only when every check of this rank passed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/api/probe.h"
#include "tests/calls.h"
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

/* Counts of about 2.5 chunks (the multi-node pipelines' chunk of the reduction's
 * wide elements, or of bytes for a bcast): the pipelined stages, a short last
 * chunk, every wide form. Each case in and out of place, aligned and not. */
static int run_chunks(shmcoll_comm *comm)
{
	const size_t C = shmcoll__probe_hier_chunk_bytes();
	int P = shmcoll_comm_size(comm), rank = shmcoll_comm_rank(comm), err = 0, k, v;
	const struct {
		th_coll coll;
		shmcoll_dtype dt;
		shmcoll_op op;
		size_t count;
		int root;
	} cases[] = {
	    {TH_ALLREDUCE, SHMCOLL_FLOAT32, SHMCOLL_SUM, 5 * C / 8 + 13, 0},
	    {TH_ALLREDUCE, SHMCOLL_INT32, SHMCOLL_AVG, 5 * C / 32 + 13, 0},   /* (q, r) pairs */
	    {TH_ALLREDUCE, SHMCOLL_BFLOAT16, SHMCOLL_SUM, 5 * C / 8 + 13, 0}, /* as float32 */
	    {TH_ALLREDUCE, SHMCOLL_FLOAT64, SHMCOLL_AVG, 5 * C / 16 + 13, 0},
	    {TH_REDUCE, SHMCOLL_FLOAT32, SHMCOLL_MAX, 5 * C / 8 + 13, -1},
	    {TH_REDUCE, SHMCOLL_INT8, SHMCOLL_AVG, 5 * C / 32 + 13, 1},
	    {TH_BCAST, SHMCOLL_UINT8, SHMCOLL_SUM, 5 * C / 2 + 13, -1},
	    {TH_BCAST, SHMCOLL_FLOAT64, SHMCOLL_SUM, 5 * C / 16 + 13, 0},
	};
	size_t max = 0;
	th_checker *ck;

	for (k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
		size_t b = th_coll_region_elems(cases[k].coll, cases[k].count, P) *
		           th_dtype_size(cases[k].dt);

		max = b > max ? b : max;
	}
	ck = th_check_new(comm, max, 0, &err);
	if (!ck)
		return err;
	for (k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
		for (v = 0; v < 2; v++) {
			th_case kc = {.coll = cases[k].coll,
			              .dtype = cases[k].dt,
			              .op = cases[k].op,
			              .count = cases[k].count,
			              .root = cases[k].root < 0 ? P - 1 : cases[k].root % P,
			              .variant = v && cases[k].coll != TH_BCAST ? TH_IN_PLACE
			                                                        : TH_OUT_OF_PLACE,
			              .sym = TH_SYM_NONE,
			              .misalign = (size_t)v};

			if (cases[k].coll == TH_BCAST)
				kc.variant = TH_IN_PLACE;
			th_check_run(ck, &kc);
		}
	}
	err = th_check_first_error(ck);
	k = th_check_free(ck);
	if (rank == 0 || err || k)
		printf("%s chunks rank %d of %d\n", err || k ? "FAIL" : "ok", rank, P);
	return err ? err : k;
}

/* An allreduce sum of (rank in comm + 1) on comm: 0 if right. */
static int sum_ok(shmcoll_comm *c)
{
	int64_t v = shmcoll_comm_rank(c) + 1, n = shmcoll_comm_size(c);

	return shmcoll_allreduce(&v, &v, 1, SHMCOLL_INT64, SHMCOLL_SUM, c) == 0 &&
	               v == n * (n + 1) / 2
	           ? 0
	           : -1;
}

/* Splitting a communicator over nodes: groups within a node work (a node
 * each; one rank alone), groups across nodes are -ENOTSUP on every rank
 * (dup included) and leave the communicator usable. */
static int run_split(shmcoll_comm *comm)
{
	int rank = shmcoll_comm_rank(comm), P = atoi(getenv("SHMCOLL_LOCAL_SIZE"));
	shmcoll_comm *c = NULL;
	int err = 0;

	if (shmcoll_comm_split(comm, rank / P, rank, &c) != 0 || !c || shmcoll_comm_size(c) != P ||
	    shmcoll_comm_rank(c) != rank % P || sum_ok(c) || shmcoll_comm_destroy(c) != 0)
		err = 1;
	else if (shmcoll_comm_split(comm, rank ? SHMCOLL_UNDEFINED : 5, 0, &c) != 0 ||
	         (rank == 0) != (c != NULL) || (c && (shmcoll_comm_size(c) != 1 || sum_ok(c))) ||
	         (c && shmcoll_comm_destroy(c) != 0))
		err = 2;
	else if (shmcoll_comm_split(comm, rank % P, 0, &c) != -ENOTSUP || c ||
	         !strstr(shmcoll_last_error(comm), "within a node"))
		err = 3;
	else if (shmcoll_comm_dup(comm, &c) != -ENOTSUP || c)
		err = 4;
	else if (sum_ok(comm))
		err = 5;
	if (err)
		fprintf(stderr, "nodematrix: split case %d failed on rank %d: %s\n", err, rank,
		        shmcoll_last_error(comm));
	if (rank == 0 || err)
		printf("%s split rank %d of %d\n", err ? "FAIL" : "ok", rank,
		       shmcoll_comm_size(comm));
	return err;
}

/* Calls of every collective started without blocking, several of them spanning the
 * pipelines' chunks, polled until all are done, then checked. */
#define NCALLS 36
static int run_tasks(shmcoll_comm *comm)
{
	static struct tcall calls[NCALLS];
	int rank = shmcoll_comm_rank(comm), k, done, err = 0;

	for (k = 0; k < NCALLS && !err; k++)
		err = tcall_start(comm, &calls[k], k, 1) ? 1 : 0;
	if (!err)
		tcall_poll_all(comm, calls, NCALLS);
	for (k = 0; k < NCALLS && !err; k++) {
		err = tcall_check(comm, &calls[k], k,
		                  shmcoll__probe_test(comm, calls[k].call, &done));
		if (err)
			fprintf(stderr, "nodematrix: call %d failed on rank %d (%d): %s\n", k, rank,
			        err, shmcoll_last_error(comm));
	}
	for (k = 0; k < NCALLS; k++)
		tcall_free(&calls[k]);
	if (rank == 0 || err)
		printf("%s tasks rank %d of %d\n", err ? "FAIL" : "ok", rank,
		       shmcoll_comm_size(comm));
	return err;
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
	net = shmcoll__probe_transport(comm);
	if (net && rank == 0)
		printf("transport %s\n", net);
	if (argc == 2 && !strcmp(argv[1], "tasks")) {
		failed = run_tasks(comm) != 0;
		rc = shmcoll_comm_destroy(comm);
		return failed || rc;
	}
	if (argc == 2 && (!strcmp(argv[1], "chunks") || !strcmp(argv[1], "split"))) {
		failed = (argv[1][0] == 'c' ? run_chunks(comm) : run_split(comm)) != 0;
		rc = shmcoll_comm_destroy(comm);
		return failed || rc;
	}
	counters = shared_counters(comm);
	for (coll = 0; coll < TH_COLL_COUNT; coll++) {
		struct th_matrix m = {
		    .coll = coll, .phase = PHASE_SMALL_ARENA, .counters = counters};

		if (!wanted(argc, argv, coll))
			continue;
		rc = coll == TH_BARRIER && !counters ? TH_E_SETUP : th_matrix_body(comm, rank, &m);
		if (rank == 0 || rc)
			printf("%s %s rank %d of %d\n", rc ? "FAIL" : "ok", th_coll_name(coll),
			       rank, size);
		fflush(stdout);
		failed |= rc != 0;
	}
	rc = shmcoll_comm_destroy(comm);
	return failed || rc;
}
