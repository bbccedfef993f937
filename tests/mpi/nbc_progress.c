/* nbc_progress.c - MPI's progress rule through the interposer, in the manner of MPICH's
 * test/mpi/coll/nonblocking3: up to WINDOW non-blocking collectives (and point-to-point
 * pairs, the MPI's own requests) outstanding at once on four MPI_Comm_dup'ed communicators,
 * started in the same order on every rank (a stream of pseudo-random numbers every rank
 * draws alike picks the call, its communicator and its size), and completed with
 * MPI_Testsome, MPI_Testany, MPI_Waitall, MPI_Waitany, MPI_Waitsome and MPI_Wait in an
 * order every rank chooses on its own (a stream of its own): so ranks wait on calls of
 * different communicators at once, and a rank's call moves only if every wait of its peers
 * moves everything outstanding. Now and then a blocking collective on one of the
 * communicators runs behind the outstanding ones. Every result is checked.
 *
 * A plain MPI program, built against each MPI; run by progress.sh with and without
 * libshmcoll-mpi.so preloaded. Prints one summary line on rank 0 ("nbc_progress: P=N: K
 * calls, E failed") and exits 1 on any failure.
 *
 * usage: nbc_progress [--iters N] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#define WINDOW  20
#define NCOMMS  4
#define SMALL   10
#define LARGE   (1 << 16) /* ints: 256 KiB, more than a staging chunk of shmcoll's */
#define MAXSIZE 64        /* ranks this program supports */

enum call {
	C_IBCAST,
	C_IBARRIER,
	C_IREDUCE,
	C_IALLREDUCE,
	C_IALLGATHER,
	C_IGATHER,
	C_ISCATTER,
	C_IALLTOALL,
	C_IREDUCE_SCATTER_BLOCK,
	C_ISCAN,
	C_IEXSCAN,
	C_PAIR, /* an MPI_Isend / MPI_Irecv between ranks 2k and 2k+1 */
	C_COUNT
};

static const char *names[] = {"MPI_Ibcast",     "MPI_Ibarrier",   "MPI_Ireduce",
                              "MPI_Iallreduce", "MPI_Iallgather", "MPI_Igather",
                              "MPI_Iscatter",   "MPI_Ialltoall",  "MPI_Ireduce_scatter_block",
                              "MPI_Iscan",      "MPI_Iexscan",    "MPI_Isend/MPI_Irecv"};

/* One call in the window: what it was and the buffers its check reads. */
struct slot {
	enum call c;
	int ci, n, seed;
	int *send, *recv;
};

static int rank, size, errs, checks;

/* A multiplicative congruential generator (m = 2^31 - 1, a = 48271): one stream every rank
 * draws alike, one of each rank's own. */
static uint32_t draw(uint32_t *s)
{
	*s = (uint32_t)((uint64_t)*s * 48271u % 2147483647u);
	return *s;
}

static int value(int seed, int r, int i)
{
	return (seed * 131 + r * 7919 + i * 17) % 1000;
}

static void fail(const struct slot *s, int i, int got, int want)
{
	if (++errs <= 10)
		fprintf(stderr, "nbc_progress: rank %d: %s on comm %d (n=%d): [%d] = %d, want %d\n",
		        rank, names[s->c], s->ci, s->n, i, got, want);
}

static void expect(const struct slot *s, int i, int got, int want)
{
	checks++;
	if (got != want)
		fail(s, i, got, want);
}

static void start(struct slot *s, MPI_Comm *comms, MPI_Request *req)
{
	MPI_Comm comm = comms[s->ci];
	int n = s->n, i, r, total = n * size;

	s->send = malloc((size_t)total * sizeof(int));
	s->recv = malloc((size_t)total * sizeof(int));
	if (!s->send || !s->recv) {
		fprintf(stderr, "nbc_progress: rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (i = 0; i < total; i++) {
		s->send[i] = value(s->seed, rank, i);
		s->recv[i] = -1;
	}
	*req = MPI_REQUEST_NULL;
	switch (s->c) {
	case C_IBCAST:
		if (rank != s->seed % size)
			for (i = 0; i < n; i++)
				s->send[i] = -1;
		MPI_Ibcast(s->send, n, MPI_INT, s->seed % size, comm, req);
		break;
	case C_IBARRIER:
		MPI_Ibarrier(comm, req);
		break;
	case C_IREDUCE:
		MPI_Ireduce(s->send, s->recv, n, MPI_INT, MPI_SUM, s->seed % size, comm, req);
		break;
	case C_IALLREDUCE:
		MPI_Iallreduce(s->send, s->recv, n, MPI_INT, MPI_SUM, comm, req);
		break;
	case C_IALLGATHER:
		MPI_Iallgather(s->send, n, MPI_INT, s->recv, n, MPI_INT, comm, req);
		break;
	case C_IGATHER:
		MPI_Igather(s->send, n, MPI_INT, s->recv, n, MPI_INT, s->seed % size, comm, req);
		break;
	case C_ISCATTER:
		MPI_Iscatter(s->send, n, MPI_INT, s->recv, n, MPI_INT, s->seed % size, comm, req);
		break;
	case C_IALLTOALL:
		MPI_Ialltoall(s->send, n, MPI_INT, s->recv, n, MPI_INT, comm, req);
		break;
	case C_IREDUCE_SCATTER_BLOCK:
		MPI_Ireduce_scatter_block(s->send, s->recv, n, MPI_INT, MPI_SUM, comm, req);
		break;
	case C_ISCAN:
		MPI_Iscan(s->send, s->recv, n, MPI_INT, MPI_SUM, comm, req);
		break;
	case C_IEXSCAN:
		MPI_Iexscan(s->send, s->recv, n, MPI_INT, MPI_SUM, comm, req);
		break;
	case C_PAIR:
		r = rank ^ 1;
		if (r >= size)
			break;
		if (rank % 2 == 0)
			MPI_Isend(s->send, n, MPI_INT, r, s->seed, comm, req);
		else
			MPI_Irecv(s->recv, n, MPI_INT, r, s->seed, comm, req);
		break;
	default:
		break;
	}
}

static void check(struct slot *s)
{
	int n = s->n, i, r, b, sum, root = s->seed % size;

	switch (s->c) {
	case C_IBCAST:
		for (i = 0; i < n; i++)
			expect(s, i, s->send[i], value(s->seed, root, i));
		break;
	case C_IREDUCE:
	case C_IALLREDUCE:
		if (s->c == C_IREDUCE && rank != root)
			break;
		for (i = 0; i < n; i++) {
			for (sum = 0, r = 0; r < size; r++)
				sum += value(s->seed, r, i);
			expect(s, i, s->recv[i], sum);
		}
		break;
	case C_IALLGATHER:
	case C_IGATHER:
		if (s->c == C_IGATHER && rank != root)
			break;
		for (r = 0; r < size; r++)
			for (i = 0; i < n; i++)
				expect(s, r * n + i, s->recv[r * n + i], value(s->seed, r, i));
		break;
	case C_ISCATTER:
		for (i = 0; i < n; i++)
			expect(s, i, s->recv[i], value(s->seed, root, rank * n + i));
		break;
	case C_IALLTOALL:
		for (r = 0; r < size; r++)
			for (i = 0; i < n; i++)
				expect(s, r * n + i, s->recv[r * n + i],
				       value(s->seed, r, rank * n + i));
		break;
	case C_IREDUCE_SCATTER_BLOCK:
		for (i = 0; i < n; i++) {
			for (sum = 0, r = 0; r < size; r++)
				sum += value(s->seed, r, rank * n + i);
			expect(s, i, s->recv[i], sum);
		}
		break;
	case C_ISCAN:
	case C_IEXSCAN:
		b = s->c == C_ISCAN ? rank + 1 : rank;
		if (b == 0)
			break; /* exscan's rank 0: undefined */
		for (i = 0; i < n; i++) {
			for (sum = 0, r = 0; r < b; r++)
				sum += value(s->seed, r, i);
			expect(s, i, s->recv[i], sum);
		}
		break;
	case C_PAIR:
		if (rank % 2 == 1)
			for (i = 0; i < n; i++)
				expect(s, i, s->recv[i], value(s->seed, rank ^ 1, i));
		break;
	default:
		checks++;
		break;
	}
	free(s->send);
	free(s->recv);
	s->send = s->recv = NULL;
}

/* Completes some (at least one) or all of the k calls of the window in a way this rank
 * draws from its own stream; returns how many remain, the window compacted. A completed
 * request is MPI_REQUEST_NULL (so is a pair's request on an odd rank out, complete from the
 * start). */
static int complete(struct slot *w, MPI_Request *reqs, int k, uint32_t *mine, int all)
{
	MPI_Status st[WINDOW]; /* not MPI_STATUSES_IGNORE: gcc's -Wstringop-overflow */
	int idx[WINDOW], out = 0, i, j, flag = 0, how = (int)(draw(mine) % 6);

	if (all)
		how = how % 2 ? 0 : 5; /* Waitall, or Wait one by one */
	switch (how) {
	case 0:
		MPI_Waitall(k, reqs, st);
		break;
	case 1:
		while (out == 0)
			MPI_Testsome(k, reqs, &out, idx, st);
		break;
	case 2:
		while (!flag)
			MPI_Testany(k, reqs, &idx[0], &flag, MPI_STATUS_IGNORE);
		break;
	case 3:
		MPI_Waitany(k, reqs, &idx[0], MPI_STATUS_IGNORE);
		break;
	case 4:
		MPI_Waitsome(k, reqs, &out, idx, st);
		break;
	default:
		/* Wait, one by one, from a place of this rank's choosing round the window. */
		j = (int)(draw(mine) % (uint32_t)k);
		for (i = 0; i < k; i++)
			MPI_Wait(&reqs[(i + j) % k], MPI_STATUS_IGNORE);
		break;
	}
	for (i = j = 0; i < k; i++) {
		if (reqs[i] == MPI_REQUEST_NULL) {
			check(&w[i]);
			continue;
		}
		w[j] = w[i];
		reqs[j++] = reqs[i];
	}
	return j;
}

int main(int argc, char **argv)
{
	MPI_Comm comms[NCOMMS];
	MPI_Request reqs[WINDOW];
	struct slot w[WINDOW];
	uint32_t shared = 12345, mine;
	int iters = 1000, it, k = 0, i, total;

	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size > MAXSIZE)
		MPI_Abort(MPI_COMM_WORLD, 2);
	mine = 1000003u * (uint32_t)(rank + 1);
	for (i = 0; i < NCOMMS; i++)
		MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
	for (it = 0; it < iters; it++) {
		struct slot *s = &w[k];
		uint32_t x = draw(&shared);

		/* Now and then a blocking collective behind the outstanding calls of one
		 * communicator (all ranks alike: the shared stream decides). */
		if (x % 29 == 0) {
			int in = rank + it, sum = 0;

			MPI_Allreduce(&in, &sum, 1, MPI_INT, MPI_SUM, comms[x / 29 % NCOMMS]);
			checks++;
			if (sum != size * (size - 1) / 2 + size * it && ++errs <= 10)
				fprintf(stderr, "nbc_progress: rank %d: MPI_Allreduce gave %d\n",
				        rank, sum);
			continue;
		}
		s->c = (enum call)(x % C_COUNT);
		s->ci = (int)(draw(&shared) % NCOMMS);
		/* Large calls need many steps of every rank; pairs stay small (eager): a
		 * rank blocked in one of shmcoll's blocking collectives does not drive the
		 * MPI's engine, which a large message's handshake would need (mpi/shmcoll_mpi.h
		 * says so). */
		s->n = draw(&shared) % 8 == 0 && s->c != C_PAIR ? LARGE : SMALL;
		s->seed = it;
		start(s, comms, &reqs[k]);
		k++;
		if (k == WINDOW)
			k = complete(w, reqs, k, &mine, 0);
	}
	while (k > 0)
		k = complete(w, reqs, k, &mine, 1);
	for (i = 0; i < NCOMMS; i++)
		MPI_Comm_free(&comms[i]);
	MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	total = checks;
	MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("nbc_progress: P=%d: %d iterations, %d checks, %d failed\n", size, iters,
		       total, errs);
	MPI_Finalize();
	return errs ? 1 : 0;
}
