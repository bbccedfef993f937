/* comm.c - a communicator's state: set up on the first collective the
 * interposer takes up on it (node splitting, the leaders' communicator and
 * node order across nodes, the node's shmcoll communicator), found again by
 * state_of, and its scratch buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mpi/shmcoll_mpi.h"

/* Set while this thread runs setup or teardown: a collective MPI makes on
 * our behalf then goes straight to PMPI. */
static _Thread_local int busy;

/* A job name no other communicator on this node uses now or used before:
 * shmcoll names its arena after it. */
static void make_job(char *buf, size_t len)
{
	static atomic_uint counter;
	struct timespec ts;
	uint32_t rnd;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)ts.tv_nsec * 2654435761u;
	snprintf(buf, len, "mpi.%x.%llx.%08x.%x", (unsigned)getpid(), (unsigned long long)ts.tv_sec,
	         rnd, atomic_fetch_add(&counter, 1));
}

/* The node of each rank: MPI_COMM_TYPE_SHARED, or SHMCOLL_MPI_NODE_SPLIT's
 * groups. key = rank keeps comm's order inside a node, so local rank 0 is
 * the node's lowest rank in comm. */
static int split_nodes(struct cstate *st, MPI_Comm *node)
{
	int color;

	if (!env.split)
		return PMPI_Comm_split_type(st->comm, MPI_COMM_TYPE_SHARED, st->rank, MPI_INFO_NULL,
		                            node);
	color = env.cyclic ? st->rank % env.split : st->rank / env.split;
	return PMPI_Comm_split(st->comm, color, st->rank, node);
}

/* Node order, from node_of and lrank_of, on every rank alike. Nodes are
 * numbered by their lowest rank (leaders is split by rank) and a node's
 * ranks are in rank order, but a node's ranks need not be consecutive in
 * comm (a cyclic mapping), so a leader that exchanges whole node blocks
 * copies them into or out of rank order; when every node's ranks are
 * consecutive (ordered: the usual block mapping) node order is rank order
 * and nothing is copied. */
static void node_order(struct cstate *st)
{
	int r, n, i;

	st->nnodes = 0;
	for (r = 0; r < st->size; r++)
		if (st->node_of[r] >= st->nnodes)
			st->nnodes = st->node_of[r] + 1;
	memset(st->node_start, 0, (size_t)(st->nnodes + 1) * sizeof(int));
	for (r = 0; r < st->size; r++)
		st->node_start[st->node_of[r] + 1]++;
	st->max_node = 0;
	for (n = 0; n < st->nnodes; n++) {
		if (st->node_start[n + 1] > st->max_node)
			st->max_node = st->node_start[n + 1];
		st->node_start[n + 1] += st->node_start[n];
	}
	st->ordered = 1;
	for (r = 0; r < st->size; r++) {
		i = st->node_start[st->node_of[r]] + st->lrank_of[r];
		st->rank_at[i] = r;
		st->ordered &= i == r;
	}
}

/* The leaders' communicator and, on every rank, each rank's node (its
 * leader's rank in leaders) and local rank: the rooted collectives need the
 * root's, the others node order. */
static int setup_multi(struct cstate *st)
{
	int rc;

	rc = PMPI_Comm_split(st->comm, st->lrank == 0 ? 0 : MPI_UNDEFINED, st->rank, &st->leaders);
	if (rc == MPI_SUCCESS && st->lrank == 0)
		rc = PMPI_Comm_rank(st->leaders, &st->my_node);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Bcast(&st->my_node, 1, MPI_INT, 0, st->node);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Allgather(&st->my_node, 1, MPI_INT, st->node_of, 1, MPI_INT, st->comm);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Allgather(&st->lrank, 1, MPI_INT, st->lrank_of, 1, MPI_INT, st->comm);
	if (rc == MPI_SUCCESS)
		node_order(st);
	return rc;
}

/* Collective over comm: sets up and caches comm's state. Every rank makes
 * the same MPI calls whatever fails locally, and the ranks agree at the end
 * on whether shmcoll is usable. NULL (use PMPI, this time) only when there
 * is no memory for the state, before any MPI call; the peers' setup then
 * stalls, which is the best an allocation of a few bytes failing allows. */
static struct cstate *setup(MPI_Comm comm, int kv)
{
	char job[64] = "";
	shmcoll_config cfg = {0};
	struct cstate *st;
	MPI_Comm node = MPI_COMM_NULL;
	int inter = 0, lsize = 0, alone = 0, ok, rc;

	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	atomic_init(&st->refs, 1);
	st->comm = comm;
	st->node = st->leaders = MPI_COMM_NULL;
	rc = PMPI_Comm_test_inter(comm, &inter);
	if (rc != MPI_SUCCESS || inter) {
		debug("an inter-communicator: PMPI");
		goto cache;
	}
	rc = PMPI_Comm_rank(comm, &st->rank);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Comm_size(comm, &st->size);
	if (rc != MPI_SUCCESS)
		goto cache;
	st->node_of = malloc((size_t)st->size * sizeof(int));
	st->lrank_of = malloc((size_t)st->size * sizeof(int));
	st->node_start = malloc(((size_t)st->size + 1) * sizeof(int));
	st->rank_at = malloc((size_t)st->size * sizeof(int));
	st->vc = malloc(4 * (size_t)st->size * sizeof(int));
	st->vz = malloc(4 * (size_t)st->size * sizeof(*st->vz));
	if (!st->node_of || !st->lrank_of || !st->node_start || !st->rank_at || !st->vc ||
	    !st->vz) {
		release(st);
		return NULL;
	}

	busy = 1;
	rc = split_nodes(st, &node);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Comm_rank(node, &st->lrank);
	if (rc == MPI_SUCCESS)
		rc = PMPI_Comm_size(node, &lsize);
	/* A node holding all of comm on one rank holds it on every rank. */
	if (rc == MPI_SUCCESS && lsize < st->size) {
		st->multi = 1;
		st->node = node;
		rc = setup_multi(st);
		/* Every rank a node of its own: no stage for shared memory,
		 * only the composition's extra steps and copies (with one rank
		 * per node, simulated, the composed collectives measured
		 * 0.16-1.0x of plain Open MPI): PMPI. Every rank has the same
		 * max_node. */
		alone = rc == MPI_SUCCESS && st->max_node == 1;
	}
	if (rc == MPI_SUCCESS && !alone) {
		if (st->lrank == 0)
			make_job(job, sizeof(job));
		rc = PMPI_Bcast(job, sizeof(job), MPI_CHAR, 0, node);
	}
	if (rc == MPI_SUCCESS && !alone) {
		const char *tmo = getenv("SHMCOLL_TIMEOUT_MS");

		cfg.rank = st->lrank;
		cfg.size = lsize;
		cfg.job = job;
		/* MPI waits for a late rank forever, and so do we unless told
		 * otherwise: a dead peer is found regardless (lib/live.c). */
		cfg.timeout_ms = tmo && *tmo ? 0 : -1;
		rc = shmcoll_comm_create(&cfg, &st->shm);
		if (rc < 0)
			debug("rank %d: %s", st->rank, shmcoll_last_error(NULL));
	}
	ok = rc == 0 && !alone;
	if (PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
		ok = 0;
	/* Nodes of one size (lib/hier's ranks are node-major over equal nodes): shmcoll's own
	 * composition over all of comm, which every rank makes or none keeps. Its failure
	 * leaves shm broken, so the communicator goes to PMPI. */
	if (ok && st->multi && st->nnodes * st->max_node == st->size) {
		rc = wide_create(st);
		if (rc < 0)
			debug("rank %d: %s", st->rank, shmcoll_last_error(NULL));
		ok = rc == 0;
		if (PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
			ok = 0;
	}
	busy = 0;
	if (ok) {
		st->usable = 1;
		if (st->rank == 0)
			debug("a communicator of size %d: %s", st->size,
			      st->wide    ? "shmcoll across nodes, PMPI as its leaders' transport"
			      : st->multi ? "shmcoll in each node, PMPI among leaders"
			                  : "shmcoll");
	} else {
		if (st->rank == 0)
			debug("a communicator of size %d: %s; PMPI", st->size,
			      alone ? "every rank is a node of its own" : "setup failed");
		wide_destroy(st);
		if (st->shm)
			shmcoll_comm_destroy(st->shm);
		st->shm = NULL;
	}
	if (!st->multi) {
		if (node != MPI_COMM_NULL)
			PMPI_Comm_free(&node);
		free(st->node_of);
		free(st->lrank_of);
		free(st->node_start);
		free(st->rank_at);
		free(st->vc);
		st->node_of = st->lrank_of = st->node_start = st->rank_at = st->vc = NULL;
	}
cache:
	if (PMPI_Comm_set_attr(comm, kv, st) != MPI_SUCCESS) {
		release(st);
		return NULL;
	}
	link_state(st);
	return st;
}

/* comm's usable state, set up on first use; NULL: use PMPI. */
struct cstate *state_of(MPI_Comm comm)
{
	/* The communicator this thread used last and its state, while no
	 * state has been deleted since: most programs call collectives on one
	 * or two communicators, and this spares the attribute lookup. */
	static _Thread_local struct {
		MPI_Comm comm;
		struct cstate *st;
		unsigned gen;
	} last;
	struct cstate *st = NULL;
	unsigned gen;
	int kv, flag = 0;

	load_env();
	if (env.off || busy || comm == MPI_COMM_NULL ||
	    atomic_load_explicit(&finalized, memory_order_relaxed))
		return NULL;
	gen = atomic_load_explicit(&generation, memory_order_acquire);
	if (last.st && last.comm == comm && last.gen == gen)
		return last.st->usable ? last.st : NULL;
	kv = get_keyval();
	if (kv == MPI_KEYVAL_INVALID)
		return NULL;
	if (PMPI_Comm_get_attr(comm, kv, &st, &flag) != MPI_SUCCESS)
		return NULL;
	if (!flag)
		st = setup(comm, kv);
	if (st) {
		last.comm = comm;
		last.st = st;
		last.gen = gen;
	}
	return st && st->usable ? st : NULL;
}

/* Scratch buffer i (0 or 1 of a leader, or of a root off its node's
 * leader, or 0 of any rank in a composed allgatherv, or 0 and 1 of a
 * composed gatherv's or scatterv's root; 2 and 3 of a rank packing its
 * data, 3 for a logical op's inputs or a LOC op's gathered pairs), grown as
 * needed and kept: a program calls the same collectives over and over.
 * Growing it loses what it held. */
void *scratch(struct cstate *st, int i, size_t bytes)
{
	void *p;

	if (bytes <= st->scratch_bytes[i])
		return st->scratch[i];
	/* Not realloc: nothing in it is worth copying. */
	free(st->scratch[i]);
	st->scratch_bytes[i] = 0;
	p = st->scratch[i] = malloc(bytes);
	if (p)
		st->scratch_bytes[i] = bytes;
	return p;
}
