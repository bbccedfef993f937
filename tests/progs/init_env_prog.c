/* init_env_prog.c - one rank of a job a foreign launcher started (tests/init_env_mpi.sh runs
 * it under mpirun and mpiexec.hydra): shmcoll_init, the rank and size it expects, an
 * allreduce checked, destroy. Prints "init_env_prog: rank R of P: ok" and exits 0, or says
 * what failed and exits 1.
 * usage: init_env_prog EXPECTED_SIZE */
#include <stdio.h>
#include <stdlib.h>

#include "shmcoll.h"

int main(int argc, char **argv)
{
	shmcoll_comm *c = NULL;
	long long in, out = 0;
	int rc, rank, size, want = argc > 1 ? atoi(argv[1]) : 0;

	rc = shmcoll_init(&c);
	if (rc < 0) {
		fprintf(stderr, "init_env_prog: shmcoll_init: %s\n", shmcoll_last_error(NULL));
		return 1;
	}
	rank = shmcoll_comm_rank(c);
	size = shmcoll_comm_size(c);
	if (size != want) {
		fprintf(stderr, "init_env_prog: rank %d: size %d, not %d\n", rank, size, want);
		return 1;
	}
	in = rank + 1;
	rc = shmcoll_allreduce(&in, &out, 1, SHMCOLL_INT64, SHMCOLL_SUM, c);
	if (rc < 0 || out != (long long)size * (size + 1) / 2) {
		fprintf(stderr, "init_env_prog: rank %d: allreduce: %d (%s), sum %lld\n", rank, rc,
		        shmcoll_last_error(c), out);
		return 1;
	}
	if (shmcoll_comm_destroy(c) < 0) {
		fprintf(stderr, "init_env_prog: rank %d: destroy failed\n", rank);
		return 1;
	}
	printf("init_env_prog: rank %d of %d: ok\n", rank, size);
	return 0;
}
