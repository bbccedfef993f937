/* shmcoll_mpi.c - libshmcoll-mpi.so, a PMPI interposer: preloaded into an
 * unmodified MPI program, it runs the program's collectives on
 * intra-communicators through shmcoll and hands everything else to PMPI.
 *
 *   mpirun -n P env LD_PRELOAD=.../libshmcoll-mpi.so ./program
 *
 * One source, built once per MPI (mpi/meson.build): the handles and MPI_IN_PLACE
 * are each MPI's own, so a build works only under the MPI it was built for.
 *
 * What goes through shmcoll: MPI_Allreduce, MPI_Reduce, MPI_Bcast,
 * MPI_Allgather, MPI_Reduce_scatter_block, MPI_Gather, MPI_Scatter,
 * MPI_Alltoall, MPI_Barrier, MPI_Allgatherv, MPI_Gatherv, MPI_Scatterv and
 * MPI_Reduce_scatter on an intra-communicator, and MPI_Alltoallv, MPI_Scan
 * and MPI_Exscan on one within a node, with
 *   - reductions: a predefined integer type of 8, 32 or 64 bits (the C
 *     integers, the fixed-width ones, MPI_AINT, MPI_COUNT),
 *     MPI_FLOAT or MPI_DOUBLE, and MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, or
 *     MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR on the
 *     integers (the logical ones but on MPI_AINT and MPI_COUNT);
 *   - MPI_MINLOC and MPI_MAXLOC on the pair types (MPI_FLOAT_INT,
 *     MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT, MPI_SHORT_INT,
 *     MPI_LONG_DOUBLE_INT, and the Fortran MPI_2INTEGER, MPI_2REAL,
 *     MPI_2DOUBLE_PRECISION) on a communicator within a node, gathered
 *     and folded here, up to a size (LOC_MAX_BYTES, mpi/colls.h);
 *   - data movement: any datatype, predefined or derived, moved as the
 *     bytes of its type signature: straight from the buffer where it holds
 *     them in order, else packed (PMPI_Pack) and unpacked at the other end;
 *   - MPI_IN_PLACE wherever the standard allows it.
 * Their non-blocking forms (MPI_Iallreduce ... MPI_Ibarrier, MPI_Iallgatherv
 * ... MPI_Ialltoallv, MPI_Ireduce_scatter, MPI_Iscan, MPI_Iexscan) go through
 * shmcoll on a communicator within a node, as generalized requests the
 * MPI's own waits and tests accept (see "Non-blocking collectives" below),
 * but for the LOC ops.
 * Everything else - reductions on derived datatypes, user-defined ops,
 * 16-bit integers, MPI_OFFSET, long double, complex, the LOC ops across
 * nodes or beyond that size, MPI_Alltoallv, MPI_Scan and MPI_Exscan across
 * nodes, inter-communicators - goes to PMPI
 * with the caller's arguments unchanged. A call of zero bytes returns at once: MPI asks nothing of
 * it, not even synchronisation.
 *
 * Setup, per communicator, on the first collective on it that the
 * interposer takes up (all ranks get there together, since collectives are
 * collective):
 *   1. MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) gives the ranks of this
 *      node; local rank 0 makes a job name and broadcasts it over them.
 *   2. Each node's ranks meet in a shmcoll communicator of that name.
 *   3. Every rank reports success; one failure anywhere (an allreduce with
 *      MPI_MIN) makes the whole communicator fall back to PMPI for good, so
 *      the ranks never disagree on which path a collective takes.
 * A communicator that spans nodes also gets a communicator of the node
 * leaders (local rank 0), and composes every one of the nine, and the
 * blocking MPI_Allgatherv, MPI_Reduce_scatter, MPI_Gatherv and MPI_Scatterv:
 * shmcoll inside each node, PMPI among the leaders. A node's ranks need not
 * be consecutive in the communicator, so the collectives that move blocks
 * by rank (allgather, reduce_scatter_block, gather, scatter, alltoall,
 * allgatherv, reduce_scatter) have the leaders exchange whole node blocks in
 * node order (PMPI's v-collectives) and copy them into or out of rank order,
 * a copy skipped where every node's ranks are consecutive (and, in an
 * allgatherv, its blocks back to back). The leaders' counts are ints: a
 * call whose leader would hold more than INT_MAX bytes (elements, in the
 * reduce-scatters) goes to PMPI, which every rank decides alike from sizes
 * all of them know. In a gatherv or scatterv only the root knows the
 * counts, so no rank could decide that: each node but the root's sends the
 * root its part (counts, then blocks, in pieces of at most INT_MAX bytes)
 * or gets it, the root's node leader relaying when the root is not it, and
 * a count that disagrees with the root's is an MPI error on the rank that
 * sees it.
 * The state is cached as an attribute of the communicator; its delete
 * callback (MPI_Comm_free, MPI_Comm_disconnect, and this library's
 * MPI_Finalize, which deletes every one still alive) releases it.
 *
 * The choice between shmcoll and PMPI must be the same on every rank of a
 * call, so it rests only on what MPI makes every rank agree on: for a
 * reduction the datatype, count and op (MPI's rule: the same on every
 * rank); for data movement the bytes of the type signature, never the
 * datatypes themselves (MPI lets a root gather into a derived type what the
 * others send as predefined elements, or a rank send vectors that another
 * receives as doubles). A rank whose datatype does not lay its bytes out in
 * order packs them; the others need not know.
 * A rank blocked in shmcoll does not drive MPI's progress engine either: a
 * large MPI_Isend still pending when its sender enters a collective may not
 * move until the collective is over. Like MPI, the interposer waits for a
 * late rank forever (one rank may write a checkpoint while the others sit in
 * MPI_Barrier) unless SHMCOLL_TIMEOUT_MS is set; a dead peer is found either
 * way, within about 50 ms.
 *
 * If a shmcoll call fails, the collective's state on the other ranks is
 * unknown: the node's shmcoll communicator is aborted (so the peers' calls
 * fail now instead of at the timeout), the MPI communicator goes to PMPI
 * from then on, and the error goes to the communicator's error handler as
 * MPI_ERR_OTHER (MPI_ERRORS_ARE_FATAL ends the job).
 *
 * Environment:
 *   SHMCOLL_MPI=0            the interposer is off: every call goes to PMPI
 *                            and nothing is set up.
 *   SHMCOLL_MPI_STATS=1      at MPI_Finalize, rank 0 of MPI_COMM_WORLD prints
 *                            to stderr, per collective, how many calls (summed
 *                            over all ranks) went through shmcoll and how many
 *                            fell back.
 *   SHMCOLL_MPI_DEBUG=1      says on stderr how each communicator was set up,
 *                            or why it stays with PMPI.
 *   SHMCOLL_MPI_NODE_SPLIT   a test knob, for running the multi-node paths on
 *                            one machine: k groups each communicator's ranks
 *                            in blocks of k consecutive ranks, cyclic:k by
 *                            rank % k, and treats each group as a node in
 *                            place of MPI_COMM_TYPE_SHARED.
 * shmcoll's own variables (SHMCOLL_TIMEOUT_MS, SHMCOLL_ARENA_BYTES, ...)
 * apply to every communicator it makes. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "mpi/colls.h"
#include "shmcoll.h"

/* The version script exports only MPI_*; this makes the wrappers the
 * exception to -fvisibility=hidden on the compiler's side too. */
#define EXPORT __attribute__((visibility("default")))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* One per MPI communicator that reached setup. A usable one is only ever
 * touched by the thread in a collective on its communicator (MPI's rule);
 * the list links are guarded by list_lock. */
struct cstate {
	struct cstate *prev, *next;
	/* The communicator's attribute holds one, each non-blocking call not complete one: the
	 * last to go releases the state. MPI_Comm_free may come before the calls' waits (MPI
	 * lets their communicator live until then); shmcoll_comm_destroy would refuse. */
	atomic_int refs;
	MPI_Comm comm;     /* the user's communicator */
	int usable;        /* 0: PMPI for good (inter-communicator, setup or a call failed) */
	int rank, size;    /* in comm */
	shmcoll_comm *shm; /* the whole of comm, or (multi) this rank's node */
	int multi;         /* comm spans nodes: compose */
	MPI_Comm node;     /* multi: this rank's node, in comm's rank order */
	MPI_Comm leaders;  /* multi: the nodes' local ranks 0; MPI_COMM_NULL elsewhere */
	int lrank;         /* multi: rank in node */
	int my_node;       /* multi: this node's rank in leaders */
	int *node_of;      /* multi: per rank of comm, its node's rank in leaders */
	int *lrank_of;     /* multi: per rank of comm, its rank in its node */
	/* Node order: node 0's ranks in local order, then node 1's, ...: how
	 * the leaders lay out whole node blocks (see node_order). */
	int nnodes;       /* multi: nodes, the size of leaders */
	int max_node;     /* multi: ranks in the largest node */
	int ordered;      /* multi: node order is comm's rank order */
	int *node_start;  /* multi: per node, its first position (nnodes + 1 entries) */
	int *rank_at;     /* multi: per position, the rank of comm there */
	int *vc;          /* multi: 4 * size ints, a leaders' v-collective's counts */
	size_t *vz;       /* 4 * size: a v-collective's byte counts and displacements (vside_of) */
	void *scratch[4]; /* multi: a leader's partial results and reordered blocks (0, 1); */
	size_t scratch_bytes[4]; /* packed forms of what this rank sends and receives (2, 3) */
};

/* The environment, read once. */
static struct {
	int off, stats, debug;
	int split, cyclic; /* SHMCOLL_MPI_NODE_SPLIT */
} env;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

/* Process-wide by nature: an interposer has no handle of its own to hang
 * state on. list_lock guards the keyval's creation and the list of live
 * states, which several threads may set up or free at once. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cstate *live;
static atomic_int keyval = MPI_KEYVAL_INVALID;
static atomic_int finalized;
static atomic_uint generation; /* bumped whenever a state is deleted */
static atomic_ullong n_shm[C_COUNT], n_pmpi[C_COUNT];
/* Set while this thread runs setup or teardown: a collective MPI makes on
 * our behalf then goes straight to PMPI. */
static _Thread_local int busy;

static int env_flag(const char *name)
{
	const char *s = getenv(name);

	return s && *s && strcmp(s, "0") != 0;
}

static void read_env(void)
{
	const char *s = getenv("SHMCOLL_MPI");
	char *end;
	long k;

	env.off = s && strcmp(s, "0") == 0;
	env.stats = env_flag("SHMCOLL_MPI_STATS");
	env.debug = env_flag("SHMCOLL_MPI_DEBUG");
	s = getenv("SHMCOLL_MPI_NODE_SPLIT");
	if (!s || !*s)
		return;
	if (strncmp(s, "cyclic:", 7) == 0) {
		env.cyclic = 1;
		s += 7;
	}
	errno = 0;
	k = strtol(s, &end, 10);
	if (errno || end == s || *end || k < 1 || k > INT_MAX) {
		fprintf(stderr,
		        "shmcoll-mpi: SHMCOLL_MPI_NODE_SPLIT=%s is not k or cyclic:k with "
		        "k >= 1; ignored\n",
		        getenv("SHMCOLL_MPI_NODE_SPLIT"));
		env.cyclic = 0;
		return;
	}
	env.split = (int)k;
}

/* One write per line, so that the ranks' lines do not interleave. */
__attribute__((format(printf, 1, 2))) static void debug(const char *fmt, ...)
{
	char line[256];
	va_list ap;

	if (!env.debug)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "shmcoll-mpi: %s\n", line);
}

/* Counts a call that went to PMPI and passes its return code on. */
static int pmpi(enum coll c, int rc)
{
	atomic_fetch_add_explicit(&n_pmpi[c], 1, memory_order_relaxed);
	return rc;
}

static int via_shm(enum coll c)
{
	atomic_fetch_add_explicit(&n_shm[c], 1, memory_order_relaxed);
	return MPI_SUCCESS;
}

/* Datatypes and ops */

enum kind { K_NONE, K_SINT, K_UINT, K_FLOAT };

/* Reduction types, mapped by kind and size (MPI_LONG is 4 or 8 bytes). The
 * handles are address constants in Open MPI and integers in MPICH: both
 * may initialise a static table. */
static const struct {
	MPI_Datatype dt;
	enum kind kind;
} red_types[] = {
    {MPI_INT, K_SINT},
    {MPI_DOUBLE, K_FLOAT},
    {MPI_FLOAT, K_FLOAT},
    {MPI_LONG, K_SINT},
    {MPI_UNSIGNED, K_UINT},
    {MPI_UNSIGNED_LONG, K_UINT},
    {MPI_LONG_LONG, K_SINT},
    {MPI_UNSIGNED_LONG_LONG, K_UINT},
    {MPI_SIGNED_CHAR, K_SINT},
    {MPI_UNSIGNED_CHAR, K_UINT},
    {MPI_INT8_T, K_SINT},
    {MPI_UINT8_T, K_UINT},
    {MPI_INT32_T, K_SINT},
    {MPI_UINT32_T, K_UINT},
    {MPI_INT64_T, K_SINT},
    {MPI_UINT64_T, K_UINT},
    /* Not MPI_OFFSET: Open MPI 4.1 reduces it as unsigned (MIN of -2 and
     * 4 is 4), and the results must be the MPI's own. */
    {MPI_AINT, K_SINT},
    {MPI_COUNT, K_SINT},
};

/* The logical ops run on inputs made 0 or 1 first (logical_in): then
 * LAND is their MIN, LOR their MAX and LXOR their BXOR, and each result is
 * 0 or 1 in the type's width, as MPI's (C's &&, || and !=). */
enum { OP_ARITH, OP_BITS, OP_LOGIC };
static const struct {
	MPI_Op op;
	shmcoll_op sop;
	int cls;
} red_ops[] = {
    {MPI_SUM, SHMCOLL_SUM, OP_ARITH},  {MPI_MAX, SHMCOLL_MAX, OP_ARITH},
    {MPI_MIN, SHMCOLL_MIN, OP_ARITH},  {MPI_PROD, SHMCOLL_PROD, OP_ARITH},
    {MPI_BAND, SHMCOLL_BAND, OP_BITS}, {MPI_BOR, SHMCOLL_BOR, OP_BITS},
    {MPI_BXOR, SHMCOLL_BXOR, OP_BITS}, {MPI_LAND, SHMCOLL_MIN, OP_LOGIC},
    {MPI_LOR, SHMCOLL_MAX, OP_LOGIC},  {MPI_LXOR, SHMCOLL_BXOR, OP_LOGIC},
};

/* shmcoll's dtype for a reduction type of each kind and size. */
static const struct {
	enum kind kind;
	int size;
	shmcoll_dtype sdt;
} red_map[] = {
    {K_SINT, 1, SHMCOLL_INT8},     {K_SINT, 4, SHMCOLL_INT32},    {K_SINT, 8, SHMCOLL_INT64},
    {K_UINT, 1, SHMCOLL_UINT8},    {K_UINT, 4, SHMCOLL_UINT32},   {K_UINT, 8, SHMCOLL_UINT64},
    {K_FLOAT, 4, SHMCOLL_FLOAT32}, {K_FLOAT, 8, SHMCOLL_FLOAT64},
};

/* 0 and shmcoll's dtype and op for a reduction shmcoll can run, else -1. A
 * bitwise or logical op on a float is an MPI error: PMPI reports it, as a
 * logical op on MPI_AINT or MPI_COUNT (not C integers) may be. */
static int red_args(MPI_Datatype dt, MPI_Op op, shmcoll_dtype *sdt, shmcoll_op *sop)
{
	enum kind kind = K_NONE;
	size_t i, o;
	int size;

	for (i = 0; i < ARRAY_SIZE(red_types) && kind == K_NONE; i++)
		if (red_types[i].dt == dt)
			kind = red_types[i].kind;
	if (kind == K_NONE || PMPI_Type_size(dt, &size) != MPI_SUCCESS)
		return -1;
	for (o = 0; o < ARRAY_SIZE(red_ops); o++)
		if (red_ops[o].op == op)
			break;
	if (o == ARRAY_SIZE(red_ops) || (red_ops[o].cls != OP_ARITH && kind == K_FLOAT) ||
	    (red_ops[o].cls == OP_LOGIC && (dt == MPI_AINT || dt == MPI_COUNT)))
		return -1;
	for (i = 0; i < ARRAY_SIZE(red_map); i++) {
		if (red_map[i].kind == kind && red_map[i].size == size) {
			*sdt = red_map[i].sdt;
			*sop = red_ops[o].sop;
			return 0;
		}
	}
	return -1;
}

/* One side of a data movement call, count elements of a datatype: what a
 * rank sends or receives. Its signature's bytes are what every rank agrees
 * on (MPI's matching rule: a root may gather into a derived type what the
 * others send as predefined elements), so they alone decide a call's path.
 * The data moves as those bytes: straight from the buffer when it holds
 * them in order (contig), else packed by PMPI_Pack into a scratch buffer
 * and unpacked at the other end, in signature order either way. */
struct side {
	long long bytes; /* count * size */
	MPI_Count size;  /* the signature's bytes per element */
	MPI_Aint extent; /* how far apart elements lie */
	int contig;      /* the bytes lie in order at the buffer */
};

/* Whether dt's data is its size in bytes at offset 0 of each element, in
 * signature order: a named type without holes, or a dup, contiguous run or
 * resizing (to its own size) of such a type. Any other constructor may put
 * data in another order than memory's (an indexed type with its blocks
 * backwards), so it is packed even where it has no holes. */
static int contig_type(MPI_Datatype dt, int depth)
{
	int ni, na, nd, comb, ints[1], rc;
	MPI_Aint lb, ext, tlb, text, addrs[2];
	MPI_Datatype old[1];
	MPI_Count size;

	if (depth > 16 || PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS ||
	    PMPI_Type_size_x(dt, &size) != MPI_SUCCESS ||
	    PMPI_Type_get_extent(dt, &lb, &ext) != MPI_SUCCESS ||
	    PMPI_Type_get_true_extent(dt, &tlb, &text) != MPI_SUCCESS)
		return 0;
	if (size <= 0 || lb != 0 || tlb != 0 || ext != size || text != size)
		return 0;
	if (comb == MPI_COMBINER_NAMED)
		return 1;
	if ((comb != MPI_COMBINER_DUP && comb != MPI_COMBINER_CONTIGUOUS &&
	     comb != MPI_COMBINER_RESIZED) ||
	    ni > 1 || na > 2 || nd != 1)
		return 0;
	if (PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, old) != MPI_SUCCESS)
		return 0;
	rc = contig_type(old[0], depth + 1);
	/* The handles of derived types get_contents gives are the caller's. */
	if (PMPI_Type_get_envelope(old[0], &ni, &na, &nd, &comb) == MPI_SUCCESS &&
	    comb != MPI_COMBINER_NAMED)
		PMPI_Type_free(&old[0]);
	return rc;
}

/* Fills s for count elements of dt: 0, or -1 (an invalid count or type: the
 * call goes to PMPI, which reports it). */
static int side_of(MPI_Datatype dt, int count, struct side *s)
{
	/* A few named types each thread saw last: a named type lives as long
	 * as MPI and never changes, so its handle keeps meaning the same
	 * layout, and the queries (a quarter of the interposer's cost on a
	 * small call) run once per type. Derived types are not cached: a
	 * freed one's handle may come back naming another. */
	static _Thread_local struct {
		MPI_Datatype dt;
		struct side s; /* size 0: empty */
	} seen[4];
	static _Thread_local unsigned next;
	int ni, na, nd, comb;
	MPI_Aint lb;
	unsigned i;

	if (count < 0 || dt == MPI_DATATYPE_NULL)
		return -1;
	for (i = 0; i < ARRAY_SIZE(seen); i++)
		if (seen[i].s.size && seen[i].dt == dt) {
			*s = seen[i].s;
			s->bytes = (long long)count * s->size;
			return 0;
		}
	if (PMPI_Type_size_x(dt, &s->size) != MPI_SUCCESS || s->size < 0 ||
	    PMPI_Type_get_extent(dt, &lb, &s->extent) != MPI_SUCCESS)
		return -1;
	if (s->size && (long long)count > LLONG_MAX / s->size)
		return -1;
	s->bytes = (long long)count * s->size;
	s->contig = contig_type(dt, 0);
	if (s->size && PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) == MPI_SUCCESS &&
	    comb == MPI_COMBINER_NAMED) {
		i = next++ % ARRAY_SIZE(seen);
		seen[i].dt = dt;
		seen[i].s = *s;
	}
	return 0;
}

/* Packs (or, with unpack, unpacks) count elements of dt at buf to or from
 * their packed form at packed, in pieces of at most INT_MAX bytes (PMPI's
 * sizes are ints). 0, or the MPI error; a packed form of another length
 * than the signature's bytes (a representation that is not the native
 * one) is MPI_ERR_TYPE. */
static int pack_side(int unpack, void *buf, int count, MPI_Datatype dt, const struct side *s,
                     void *packed, MPI_Comm comm)
{
	long long per = s->size ? INT_MAX / s->size : 0, at = 0, k;
	int pos, rc;

	if (!s->bytes)
		return MPI_SUCCESS;
	if (per < 1)
		return MPI_ERR_TYPE; /* one element of more than INT_MAX bytes */
	for (; at < count; at += k) {
		k = count - at < per ? count - at : per;
		pos = 0;
		if (unpack)
			rc = PMPI_Unpack((char *)packed + at * s->size, (int)(k * s->size), &pos,
			                 (char *)buf + at * s->extent, (int)k, dt, comm);
		else
			rc = PMPI_Pack((char *)buf + at * s->extent, (int)k, dt,
			               (char *)packed + at * s->size, (int)(k * s->size), &pos,
			               comm);
		if (rc != MPI_SUCCESS)
			return rc;
		if (pos != k * s->size)
			return MPI_ERR_TYPE;
	}
	return MPI_SUCCESS;
}

/* The same for n blocks of count elements each, block i at buf + i * count *
 * extent and at packed + i * count * size (a gather's or alltoall's
 * buffer). */
static int pack_blocks(int unpack, void *buf, int count, MPI_Datatype dt, const struct side *s,
                       int n, void *packed, MPI_Comm comm)
{
	int i, rc = MPI_SUCCESS;

	for (i = 0; i < n && rc == MPI_SUCCESS; i++)
		rc = pack_side(unpack, (char *)buf + (MPI_Aint)i * count * s->extent, count, dt, s,
		               (char *)packed + (long long)i * s->bytes, comm);
	return rc;
}

/* Whether op is one of the logical ops (red_ops). */
static int is_logical(MPI_Op op)
{
	return op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
}

/* Setup and teardown */

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

/* Releases what st holds; local, so the order in which ranks do it does
 * not matter. */
static void release(struct cstate *st)
{
	if (st->shm)
		shmcoll_comm_destroy(st->shm);
	if (st->node != MPI_COMM_NULL)
		PMPI_Comm_free(&st->node);
	if (st->leaders != MPI_COMM_NULL)
		PMPI_Comm_free(&st->leaders);
	free(st->node_of);
	free(st->lrank_of);
	free(st->node_start);
	free(st->rank_at);
	free(st->vc);
	free(st->vz);
	for (size_t i = 0; i < ARRAY_SIZE(st->scratch); i++)
		free(st->scratch[i]);
	free(st);
}

static void unlink_state(struct cstate *st)
{
	pthread_mutex_lock(&list_lock);
	if (st->prev)
		st->prev->next = st->next;
	else if (live == st)
		live = st->next;
	if (st->next)
		st->next->prev = st->prev;
	st->prev = st->next = NULL;
	pthread_mutex_unlock(&list_lock);
}

/* Drops a reference to st: the last releases it. */
static void put_state(struct cstate *st)
{
	if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) == 1)
		release(st);
}

/* The attribute's delete callback: MPI_Comm_free, MPI_Comm_disconnect,
 * MPI_Comm_delete_attr in our MPI_Finalize. Calling PMPI_Comm_free here is
 * allowed: our node and leader communicators carry no attributes. */
static int delete_state(MPI_Comm comm, int kv, void *attr, void *extra)
{
	struct cstate *st = attr;

	/* Before the state goes: no thread's cached lookup (state_of) matches
	 * from now on, though the handle may come back for a new communicator. */
	atomic_fetch_add_explicit(&generation, 1, memory_order_release);
	unlink_state(st);
	/* Calls still running unpack at completion, which names a communicator only for its
	 * data representation: the handle is the caller's no more. */
	st->comm = MPI_COMM_SELF;
	put_state(st);
	return MPI_SUCCESS;
}

static int get_keyval(void)
{
	int kv = atomic_load_explicit(&keyval, memory_order_acquire);

	if (kv != MPI_KEYVAL_INVALID)
		return kv;
	pthread_mutex_lock(&list_lock);
	kv = atomic_load_explicit(&keyval, memory_order_relaxed);
	if (kv == MPI_KEYVAL_INVALID &&
	    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &kv, NULL) == MPI_SUCCESS)
		/* Pairs with the acquire above: a thread that sees the keyval
		 * sees it created. */
		atomic_store_explicit(&keyval, kv, memory_order_release);
	pthread_mutex_unlock(&list_lock);
	return kv;
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
	busy = 0;
	if (ok) {
		st->usable = 1;
		if (st->rank == 0)
			debug("a communicator of size %d: %s", st->size,
			      st->multi ? "shmcoll in each node, PMPI among leaders" : "shmcoll");
	} else {
		if (st->rank == 0)
			debug("a communicator of size %d: %s; PMPI", st->size,
			      alone ? "every rank is a node of its own" : "setup failed");
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
	pthread_mutex_lock(&list_lock);
	st->next = live;
	if (live)
		live->prev = st;
	live = st;
	pthread_mutex_unlock(&list_lock);
	return st;
}

/* comm's usable state, set up on first use; NULL: use PMPI. */
static struct cstate *state_of(MPI_Comm comm)
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

	pthread_once(&env_once, read_env);
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

/* A collective failed part way: see the file's opening comment. rc is
 * shmcoll's (< 0) or PMPI's (> 0). */
static int fail(struct cstate *st, enum coll c, const char *what, int rc)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (rc < 0) {
		/* shmcoll's own message names the function. */
		if (*shmcoll_last_error(st->shm))
			fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s\n", coll_names[c], st->rank,
			        shmcoll_last_error(st->shm));
		else
			fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s: %s\n", coll_names[c],
			        st->rank, what, shmcoll_strerror(rc));
		rc = MPI_ERR_OTHER;
	} else {
		PMPI_Error_string(rc, msg, &len);
		fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s: %s\n", coll_names[c], st->rank,
		        what, msg);
	}
	shmcoll_comm_abort(st->shm);
	st->usable = 0;
	PMPI_Comm_call_errhandler(st->comm, rc);
	return rc;
}

/* The end of a collective that went to shmcoll. */
static int shm_done(struct cstate *st, enum coll c, const char *fn, int rc)
{
	return rc < 0 ? fail(st, c, fn, rc) : via_shm(c);
}

/* Scratch buffer i (0 or 1 of a leader, or of a root off its node's
 * leader, or 0 of any rank in a composed allgatherv, or 0 and 1 of a
 * composed gatherv's or scatterv's root; 2 and 3 of a rank packing its
 * data, 3 for a logical op's inputs or a LOC op's gathered pairs), grown as
 * needed and kept: a program calls the same collectives over and over.
 * Growing it loses what it held. */
static void *scratch(struct cstate *st, int i, size_t bytes)
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

/* The input of a logical op, each of its n elements (of shmcoll type sdt,
 * an integer of 1, 4 or 8 bytes) made 0 or 1, in scratch buffer 3; NULL
 * with the call failed. The call then runs out of place from there,
 * whatever MPI_IN_PLACE said: the result lands where the in-place form
 * wants it. An MPI applies the op only where two values meet: a result of
 * one contribution is that input unchanged (5 stays 5). So a communicator
 * of one rank takes its input as it is (in is returned), and a scan's rank
 * 0 keeps its own (MPI_Scan); MPI_Exscan, where rank 1 gets rank 0's input
 * unchanged, goes to PMPI with a logical op. */
/* n elements of shmcoll type sdt (an integer of 1, 4 or 8 bytes) at src, each made 0 or 1,
 * into dst. */
static void to_logical(void *dst, const void *src, size_t n, shmcoll_dtype sdt)
{
	size_t es = shmcoll_dtype_size(sdt), i;
	const uint8_t *p = src;
	uint8_t *out = dst;

	for (i = 0; i < n; i++) {
		if (es == 1) {
			out[i] = p[i] != 0;
		} else if (es == 4) {
			uint32_t v;

			memcpy(&v, p + i * 4, 4);
			v = v != 0;
			memcpy(out + i * 4, &v, 4);
		} else {
			uint64_t v;

			memcpy(&v, p + i * 8, 8);
			v = v != 0;
			memcpy(out + i * 8, &v, 8);
		}
	}
}

static const void *logical_in(struct cstate *st, enum coll c, const void *in, size_t n,
                              shmcoll_dtype sdt)
{
	uint8_t *out;

	if (st->size == 1)
		return in;
	if (!(out = scratch(st, 3, n * shmcoll_dtype_size(sdt) + 1))) {
		fail(st, c, "a buffer for the logical op's input", -ENOMEM);
		return NULL;
	}
	to_logical(out, in, n, sdt);
	return out;
}

/* The LOC ops */

/* MPI_MINLOC and MPI_MAXLOC reduce (value, index) pairs: the smaller
 * (MINLOC) or larger (MAXLOC) value wins, and between equal values the
 * smaller index, for both ops. shmcoll has no such op, so a call gathers
 * the pairs each rank needs, as bytes, into scratch buffer 3 (an
 * allgather; a gather to a reduce's root; an alltoallv for the
 * reduce-scatters, which moves each pair once), and each rank folds its own
 * in rank order. No value is ever computed, only chosen: the result's
 * value is copied, bytes and all, from a pair that holds it, and its index
 * is the least among the pairs with that value, whatever the order of the
 * fold, so the result is the MPIs' own byte for byte. (Only 0.0 against
 * -0.0, and NaN, depend on the order in which values meet; there the MPIs'
 * results depend on their algorithms too.)
 *
 * MPI defines the pair types as these C structs (struct {double; int} is 16
 * bytes, 4 of them padding); a type whose size or extent in the MPI says
 * otherwise goes to PMPI. The Fortran pairs (MPI_2INTEGER, MPI_2REAL,
 * MPI_2DOUBLE_PRECISION) hold value and index in one type, so their sizes
 * show whether the compiler's INTEGER and REAL are C's int and float. Only
 * the fields are read and written, never the padding: a buffer of count
 * pairs need not reach the padding after its last index (C's arrays of the
 * structs do, an MPI buffer need not). The structs are in mpi/colls.h. */

/* fold_T(out, in, stride, nb, n, max): the n pairs at out become the fold,
 * pair by pair, of nb blocks of n pairs, the first block at in and each
 * next one stride bytes on (a rank's block in the gathered pairs). A pair
 * takes the place of the best so far only with a strictly better value,
 * so on equal values the earlier rank's value bytes stay, and the index
 * is the least of theirs. */
#define LOC_FOLD(T)                                                                                \
	static void fold_##T(char *out, const char *in, size_t stride, int nb, size_t n, int max)  \
	{                                                                                          \
		struct T best, x;                                                                  \
		const char *p, *from;                                                              \
		size_t i;                                                                          \
		int b;                                                                             \
                                                                                                   \
		for (i = 0; i < n; i++, in += sizeof(struct T), out += sizeof(struct T)) {         \
			from = p = in;                                                             \
			memcpy(&best.v, p, sizeof(best.v));                                        \
			memcpy(&best.k, p + offsetof(struct T, k), sizeof(best.k));                \
			for (b = 1; b < nb; b++) {                                                 \
				p += stride;                                                       \
				memcpy(&x.v, p, sizeof(x.v));                                      \
				memcpy(&x.k, p + offsetof(struct T, k), sizeof(x.k));              \
				if (max ? x.v > best.v : x.v < best.v) {                           \
					best.v = x.v;                                              \
					best.k = x.k;                                              \
					from = p;                                                  \
				} else if (x.v == best.v && x.k < best.k) {                        \
					best.k = x.k;                                              \
				}                                                                  \
			}                                                                          \
			memcpy(out, from, sizeof(best.v));                                         \
			memcpy(out + offsetof(struct T, k), &best.k, sizeof(best.k));              \
		}                                                                                  \
	}
LOC_FOLD(float_int)
LOC_FOLD(double_int)
LOC_FOLD(long_int)
LOC_FOLD(int_int)
LOC_FOLD(short_int)
LOC_FOLD(long_double_int)
LOC_FOLD(float_float)
LOC_FOLD(double_double)
#undef LOC_FOLD

#define FIELD_SIZE(T, f) sizeof(((struct T *)0)->f)
#define LOC_TYPE(dt, T)                                                                            \
	{                                                                                          \
		dt, FIELD_SIZE(T, v) + FIELD_SIZE(T, k), sizeof(struct T),                         \
		    offsetof(struct T, k) + FIELD_SIZE(T, k), fold_##T                             \
	}
static const struct loc_type {
	MPI_Datatype dt;
	size_t size;   /* the fields' bytes: the MPI's type size */
	size_t extent; /* sizeof the struct: the MPI's extent */
	size_t end;    /* where the index ends: a pair's bytes but its tail padding */
	void (*fold)(char *out, const char *in, size_t stride, int nb, size_t n, int max);
} loc_types[] = {
    LOC_TYPE(MPI_DOUBLE_INT, double_int),
    LOC_TYPE(MPI_2INT, int_int),
    LOC_TYPE(MPI_FLOAT_INT, float_int),
    LOC_TYPE(MPI_LONG_INT, long_int),
    LOC_TYPE(MPI_SHORT_INT, short_int),
    LOC_TYPE(MPI_LONG_DOUBLE_INT, long_double_int),
    LOC_TYPE(MPI_2INTEGER, int_int),
    LOC_TYPE(MPI_2REAL, float_float),
    LOC_TYPE(MPI_2DOUBLE_PRECISION, double_double),
};
#undef LOC_TYPE
#undef FIELD_SIZE

/* A MINLOC or MAXLOC call the interposer runs: its pair type and op. */
struct loc {
	const struct loc_type *t;
	int max;
};

static int is_loc(MPI_Op op)
{
	return op == MPI_MINLOC || op == MPI_MAXLOC;
}

/* The bytes n pairs span: their extents but the last one's tail padding. */
static size_t loc_span(const struct loc *l, size_t n)
{
	return n ? (n - 1) * l->t->extent + l->t->end : 0;
}

/* comm's state for a MINLOC or MAXLOC reduction (op) on n pairs of dt
 * from each rank, or (counts) counts[q] to rank q, with l filled; NULL:
 * PMPI. Every rank decides alike: the datatype, op and counts are the same
 * on all of them (MPI's rule), and so is the communicator's size. Across
 * nodes the call goes to PMPI, and so does one whose largest gather (P
 * blocks of the most pairs a rank gets) passes LOC_MAX_BYTES (mpi/colls.h),
 * which depends on whether the pairs have holes: an allreduce's every rank
 * gathers and folds all P blocks, where the MPI's own algorithms move about
 * two blocks' worth whatever P, so from some size on the MPI is faster (and
 * needs no scratch of P blocks). */
static struct cstate *loc_state(struct loc *l, MPI_Comm comm, MPI_Datatype dt, MPI_Op op, int n,
                                const int *counts)
{
	struct cstate *st;
	MPI_Aint lb, extent;
	size_t i;
	int size, most = n;

	l->t = NULL;
	l->max = op == MPI_MAXLOC;
	for (i = 0; i < ARRAY_SIZE(loc_types) && !l->t; i++)
		if (loc_types[i].dt == dt)
			l->t = &loc_types[i];
	if (!l->t || n < 0 || PMPI_Type_size(dt, &size) != MPI_SUCCESS ||
	    PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS || (size_t)size != l->t->size ||
	    lb != 0 || (size_t)extent != l->t->extent)
		return NULL;
	st = state_of(comm);
	if (!st || st->multi)
		return NULL;
	for (i = 0; counts && i < (size_t)st->size; i++) {
		if (counts[i] < 0)
			return NULL; /* erroneous: PMPI says so */
		if (counts[i] > most)
			most = counts[i];
	}
	if ((size_t)most >
	    LOC_MAX_BYTES(l->t->size < l->t->extent) / (size_t)st->size / l->t->extent)
		return NULL;
	return st;
}

/* Scratch buffer 3 for nb blocks of n pairs, or NULL with the call failed. */
static char *loc_buf(struct cstate *st, enum coll c, const struct loc *l, int nb, size_t n)
{
	/* At least a byte: shmcoll takes no NULL buffer, even for nothing. */
	char *p = scratch(st, 3, (size_t)nb * loc_span(l, n) + 1);

	if (!p)
		fail(st, c, "a buffer for the gathered pairs", -ENOMEM);
	return p;
}

/* Every rank gathers every rank's pairs and folds all of them. */
static int loc_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                         MPI_Comm comm)
{
	struct loc l;
	struct cstate *st = loc_state(&l, comm, dt, op, count, NULL);
	char *all;
	int rc;

	if (!st)
		return pmpi(C_ALLREDUCE, PMPI_Allreduce(sendbuf, recvbuf, count, dt, op, comm));
	if (!count)
		return via_shm(C_ALLREDUCE);
	if (!(all = loc_buf(st, C_ALLREDUCE, &l, st->size, (size_t)count)))
		return MPI_ERR_NO_MEM;
	rc = shmcoll_allgather(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, all,
	                       loc_span(&l, (size_t)count), SHMCOLL_UINT8, st->shm);
	if (rc == 0)
		l.t->fold(recvbuf, all, loc_span(&l, (size_t)count), st->size, (size_t)count,
		          l.max);
	return shm_done(st, C_ALLREDUCE, "shmcoll_allgather", rc);
}

/* The root gathers every rank's pairs and folds them. */
static int loc_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                      int root, MPI_Comm comm)
{
	struct loc l;
	struct cstate *st = loc_state(&l, comm, dt, op, count, NULL);
	char *all = NULL;
	int rc;

	/* MPI_IN_PLACE off the root is an error PMPI reports. */
	if (!st || root < 0 || root >= st->size || (sendbuf == MPI_IN_PLACE && st->rank != root))
		return pmpi(C_REDUCE, PMPI_Reduce(sendbuf, recvbuf, count, dt, op, root, comm));
	if (!count)
		return via_shm(C_REDUCE);
	if (st->rank == root && !(all = loc_buf(st, C_REDUCE, &l, st->size, (size_t)count)))
		return MPI_ERR_NO_MEM;
	rc = shmcoll_gather(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, all,
	                    loc_span(&l, (size_t)count), SHMCOLL_UINT8, root, st->shm);
	if (rc == 0 && st->rank == root)
		l.t->fold(recvbuf, all, loc_span(&l, (size_t)count), st->size, (size_t)count,
		          l.max);
	return shm_done(st, C_REDUCE, "shmcoll_gather", rc);
}

/* MPI_Reduce_scatter (counts) and MPI_Reduce_scatter_block (counts NULL,
 * every block n pairs): rank q's block of every rank's pairs goes to q (an
 * alltoallv, from the block's place in the input to the sender's place in
 * scratch), and each rank folds its own. In place, the input is recvbuf
 * and the result lands at its start: the alltoallv has read all of it by
 * then. */
static int loc_reduce_scatter(enum coll c, const void *sendbuf, void *recvbuf, const int *counts,
                              int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
	struct loc l;
	struct cstate *st;
	size_t *scnt, *sdis, *rcnt, *rdis, at = 0, mine;
	char *all;
	int i, P, rc;

	/* MPI_Reduce_scatter without counts is an error PMPI reports. */
	st = c == C_REDUCE_SCATTER && !counts ? NULL : loc_state(&l, comm, dt, op, n, counts);
	if (!st && c == C_REDUCE_SCATTER)
		return pmpi(c, PMPI_Reduce_scatter(sendbuf, recvbuf, counts, dt, op, comm));
	if (!st)
		return pmpi(c, PMPI_Reduce_scatter_block(sendbuf, recvbuf, n, dt, op, comm));
	P = st->size;
	scnt = st->vz;
	sdis = scnt + P;
	rcnt = sdis + P;
	rdis = rcnt + P;
	mine = (size_t)(counts ? counts[st->rank] : n);
	for (i = 0; i < P; i++) {
		size_t k = (size_t)(counts ? counts[i] : n);

		scnt[i] = loc_span(&l, k);
		sdis[i] = at * l.t->extent;
		at += k;
		rcnt[i] = loc_span(&l, mine);
		rdis[i] = (size_t)i * rcnt[i];
	}
	if (!at)
		return via_shm(c);
	if (!(all = loc_buf(st, c, &l, P, mine)))
		return MPI_ERR_NO_MEM;
	rc = shmcoll_alltoallv(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, scnt, sdis, all, rcnt,
	                       rdis, SHMCOLL_UINT8, st->shm);
	if (rc == 0)
		l.t->fold(recvbuf, all, loc_span(&l, mine), P, mine, l.max);
	return shm_done(st, c, "shmcoll_alltoallv", rc);
}

/* MPI_Scan and MPI_Exscan (ex): every rank gathers every rank's pairs and
 * folds those of the ranks before it (and its own, in a scan). Exscan's
 * rank 0 has nothing to fold, and its recvbuf stays as it was (MPI leaves
 * it undefined). One contribution is folded as it is, so exscan's rank 1
 * gets rank 0's pairs unchanged, as from the MPIs. */
static int loc_scan(int ex, const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt,
                    MPI_Op op, MPI_Comm comm)
{
	enum coll c = ex ? C_EXSCAN : C_SCAN;
	struct loc l;
	struct cstate *st = loc_state(&l, comm, dt, op, count, NULL);
	int nb, rc;
	char *all;

	if (!st)
		return pmpi(c, ex ? PMPI_Exscan(sendbuf, recvbuf, count, dt, op, comm)
		                  : PMPI_Scan(sendbuf, recvbuf, count, dt, op, comm));
	if (!count)
		return via_shm(c);
	if (!(all = loc_buf(st, c, &l, st->size, (size_t)count)))
		return MPI_ERR_NO_MEM;
	rc = shmcoll_allgather(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, all,
	                       loc_span(&l, (size_t)count), SHMCOLL_UINT8, st->shm);
	nb = ex ? st->rank : st->rank + 1;
	if (rc == 0 && nb > 0)
		l.t->fold(recvbuf, all, loc_span(&l, (size_t)count), nb, (size_t)count, l.max);
	return shm_done(st, c, "shmcoll_allgather", rc);
}

/* Composed collectives (multi: the communicator spans nodes) */

/* Reduce to each node's leader, allreduce among leaders, bcast in the node. */
static int allreduce_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                           MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop)
{
	int rc;

	rc = shmcoll_reduce(in, st->lrank == 0 ? out : NULL, (size_t)count, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLREDUCE, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		rc = PMPI_Allreduce(MPI_IN_PLACE, out, count, dt, op, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLREDUCE, "MPI_Allreduce among leaders", rc);
	}
	rc = shmcoll_bcast(out, (size_t)count, sdt, 0, st->shm);
	return shm_done(st, C_ALLREDUCE, "shmcoll_bcast", rc);
}

/* Reduce to each node's leader, reduce among leaders to the root's node's
 * leader, then, if the root is not that leader, one message from it to the
 * root. A leader's partial result goes to scratch, and the leaders' reduce
 * is not in place: MPICH 4.0.2's MPI_Reduce with MPI_IN_PLACE at a root
 * other than 0 reads MPI_IN_PLACE as a buffer from about 2 KiB on
 * (MPIR_CVAR_REDUCE_DEVICE_COLLECTIVE=0 avoids it). in is the root's recvbuf
 * when it reduces in place. */
static int reduce_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                        MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop, int root, size_t bytes)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], rc = MPI_SUCCESS;
	char *part = NULL, *dst = NULL;

	if (st->lrank == 0) {
		/* The root's node's leader needs a second buffer unless it is the root. */
		part = scratch(st, 0, st->my_node == rnode && rlocal != 0 ? 2 * bytes : bytes);
		if (!part)
			return fail(st, C_REDUCE, "scratch buffer", MPI_ERR_NO_MEM);
		if (st->my_node == rnode)
			dst = rlocal == 0 ? out : part + bytes;
	}
	rc = shmcoll_reduce(in, part, (size_t)count, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_REDUCE, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		rc = PMPI_Reduce(part, dst, count, dt, op, rnode, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE, "MPI_Reduce among leaders", rc);
	}
	if (st->my_node == rnode && rlocal != 0) {
		if (st->lrank == 0)
			rc = PMPI_Send(dst, count, dt, rlocal, 0, st->node);
		else if (st->rank == root)
			rc = PMPI_Recv(out, count, dt, 0, 0, st->node, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE, "leader to root", rc);
	}
	return via_shm(C_REDUCE);
}

/* The root's node first (everyone there, its leader included, gets the
 * data from the root), then the leaders (as bytes, in pieces of at most
 * INT_MAX: each leader may hold them packed or as its own type), then
 * every other node. */
static int bcast_multi(struct cstate *st, void *buf, int root, size_t bytes)
{
	int rnode = st->node_of[root], rc = MPI_SUCCESS;
	size_t at, k;

	if (st->my_node == rnode) {
		rc = shmcoll_bcast(buf, bytes, SHMCOLL_UINT8, st->lrank_of[root], st->shm);
		if (rc < 0)
			return fail(st, C_BCAST, "shmcoll_bcast", rc);
	}
	if (st->lrank == 0) {
		for (at = 0; at < bytes && rc == MPI_SUCCESS; at += k) {
			k = bytes - at < INT_MAX ? bytes - at : INT_MAX;
			rc = PMPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, rnode, st->leaders);
		}
		if (rc != MPI_SUCCESS)
			return fail(st, C_BCAST, "MPI_Bcast among leaders", rc);
	}
	if (st->my_node == rnode)
		return via_shm(C_BCAST);
	rc = shmcoll_bcast(buf, bytes, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_BCAST, "shmcoll_bcast", rc);
}

/* Nobody leaves the second node barrier before its leader left the
 * leaders' barrier, which no leader leaves before every node's first. */
static int barrier_multi(struct cstate *st)
{
	int rc;

	rc = shmcoll_barrier(st->shm);
	if (rc < 0)
		return fail(st, C_BARRIER, "shmcoll_barrier", rc);
	if (st->lrank == 0) {
		rc = PMPI_Barrier(st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_BARRIER, "MPI_Barrier among leaders", rc);
	}
	return shm_done(st, C_BARRIER, "shmcoll_barrier", shmcoll_barrier(st->shm));
}

/* The other five move whole node blocks among the leaders with PMPI's
 * v-collectives (MPI_BYTE for data movement, so that no rank depends on
 * another's datatype; the caller's type for reduce-scatter), and a leader
 * copies blocks from node order into rank order or back (see node_order)
 * unless the two are the same. Those counts and displacements are ints: a
 * call whose leader would hold more than INT_MAX bytes (elements, in
 * reduce_scatter_block) goes to PMPI, decided by every rank from the size,
 * the nodes and the block, which all know (see fits). */

/* Whether a * b * c (a, b >= 1, c >= 0) fits an int. */
static int fits(long long a, long long b, long long c)
{
	return c <= INT_MAX / a / b;
}

static int node_size(const struct cstate *st, int n)
{
	return st->node_start[n + 1] - st->node_start[n];
}

/* Blocks of b bytes, all size of them, from node order in src to rank order
 * in dst, or back. */
static void to_rank_order(const struct cstate *st, void *dst, const void *src, size_t b)
{
	int i;

	for (i = 0; i < st->size; i++)
		memcpy((char *)dst + (size_t)st->rank_at[i] * b, (const char *)src + (size_t)i * b,
		       b);
}

static void to_node_order(const struct cstate *st, void *dst, const void *src, size_t b)
{
	int i;

	for (i = 0; i < st->size; i++)
		memcpy((char *)dst + (size_t)i * b, (const char *)src + (size_t)st->rank_at[i] * b,
		       b);
}

/* A leaders' v-collective's counts and displacements for whole node blocks
 * of per bytes per rank, in node order: into vc and vc + nnodes. */
static void node_counts(struct cstate *st, size_t per)
{
	int n;

	for (n = 0; n < st->nnodes; n++) {
		st->vc[n] = (int)((size_t)node_size(st, n) * per);
		st->vc[st->nnodes + n] = (int)((size_t)st->node_start[n] * per);
	}
}

/* Gather to each node's leader, at its node's place in node order; an
 * allgatherv of whole node blocks among the leaders; the leader puts them
 * in rank order; bcast of all of recvbuf in the node. Ordered, the leader
 * gathers and exchanges in recvbuf itself, nothing copied (in place, its own
 * block already sits where its gather puts it: shmcoll's in-place form). An
 * allgather in the node first would still need the bcast of the other
 * nodes' blocks: one node call more for nothing. own is this rank's block,
 * in recvbuf when in place. */
static int allgather_multi(struct cstate *st, const void *own, void *recvbuf, size_t b)
{
	char *all = recvbuf, *mine = NULL;
	int rc;

	if (st->lrank == 0) {
		if (!st->ordered && !(all = scratch(st, 0, (size_t)st->size * b)))
			return fail(st, C_ALLGATHER, "scratch buffer", MPI_ERR_NO_MEM);
		mine = all + (size_t)st->node_start[st->my_node] * b;
	}
	rc = shmcoll_gather(own, mine, b, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLGATHER, "shmcoll_gather", rc);
	if (st->lrank == 0) {
		node_counts(st, b);
		rc = PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, all, st->vc, st->vc + st->nnodes,
		                     MPI_BYTE, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLGATHER, "MPI_Allgatherv among leaders", rc);
		if (!st->ordered)
			to_rank_order(st, recvbuf, all, b);
	}
	rc = shmcoll_bcast(recvbuf, (size_t)st->size * b, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_ALLGATHER, "shmcoll_bcast", rc);
}

/* Reduce all of the vector to each node's leader; the leader puts its
 * blocks in node order; the leaders reduce-scatter it (MPI_Reduce_scatter,
 * each node's leader getting just its own ranks' blocks: about half the
 * traffic of an allreduce of everything, which would hand every leader
 * blocks it throws away); scatter in the node. The leader's partial (part, in rank order) and the
 * vector in node order (vec) are two buffers unless ordered, where part is
 * the vector; the result reuses whichever the vector is not. in is recvbuf
 * in place, and out is written only by the last step, so MPI's in-place
 * form needs nothing more. */
static int reduce_scatter_multi(struct cstate *st, const void *in, void *out, int count,
                                MPI_Datatype dt, MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop)
{
	size_t b = shmcoll_dtype_size(sdt) * (size_t)count, all = b * (size_t)st->size;
	char *part = NULL, *vec = NULL, *res = NULL;
	int n, rc;

	if (st->lrank == 0) {
		part = scratch(st, 0, all);
		res = scratch(st, 1, st->ordered ? (size_t)node_size(st, st->my_node) * b : all);
		if (!part || !res)
			return fail(st, C_REDUCE_SCATTER_BLOCK, "scratch buffer", MPI_ERR_NO_MEM);
		vec = part;
		if (!st->ordered) {
			vec = res;
			res = part;
		}
	}
	rc = shmcoll_reduce(in, part, (size_t)count * (size_t)st->size, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_REDUCE_SCATTER_BLOCK, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		if (!st->ordered)
			to_node_order(st, vec, part, b);
		for (n = 0; n < st->nnodes; n++)
			st->vc[n] = node_size(st, n) * count;
		rc = PMPI_Reduce_scatter(vec, res, st->vc, dt, op, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE_SCATTER_BLOCK, "MPI_Reduce_scatter among leaders",
			            rc);
	}
	rc = shmcoll_scatter(res, out, b, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_REDUCE_SCATTER_BLOCK, "shmcoll_scatter", rc);
}

/* Gather to each node's leader in node order; a gatherv of whole node blocks
 * among the leaders to the root's node's leader, which puts them in rank
 * order; if the root is not that leader, one message of all of it from the
 * leader to the root (as in reduce_multi). A root that is its node's leader
 * gathers into recvbuf itself when ordered. own is this rank's block, in
 * recvbuf at an in-place root; recvbuf is NULL off the root. Gathering the
 * root's node to the root itself would spare those blocks the round trip
 * through the leader, but the other nodes' blocks would then have to land
 * between them in rank order: a derived type per call, or a second copy at
 * the root. One path for every root is worth the bytes. */
static int gather_multi(struct cstate *st, const void *own, void *recvbuf, size_t b, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], rc = MPI_SUCCESS;
	size_t all = (size_t)st->size * b;
	char *nodes = NULL, *ranked = NULL, *mine = NULL;

	if (st->lrank == 0 && st->my_node != rnode) {
		mine = scratch(st, 0, (size_t)node_size(st, st->my_node) * b);
		if (!mine)
			return fail(st, C_GATHER, "scratch buffer", MPI_ERR_NO_MEM);
	} else if (st->lrank == 0) {
		/* Every node's blocks in node order (nodes), then in rank
		 * order (ranked): recvbuf at the root; else what goes to it. */
		nodes = rlocal == 0 && st->ordered ? recvbuf : scratch(st, 0, all);
		ranked = rlocal == 0 ? recvbuf : st->ordered ? nodes : scratch(st, 1, all);
		if (!nodes || !ranked)
			return fail(st, C_GATHER, "scratch buffer", MPI_ERR_NO_MEM);
		mine = nodes + (size_t)st->node_start[rnode] * b;
	}
	rc = shmcoll_gather(own, mine, b, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_GATHER, "shmcoll_gather", rc);
	if (st->lrank == 0) {
		/* The counts on every leader: only the root's matter, but an
		 * MPI may check them anywhere. */
		node_counts(st, b);
		if (st->my_node == rnode)
			rc = PMPI_Gatherv(MPI_IN_PLACE, 0, MPI_BYTE, nodes, st->vc,
			                  st->vc + st->nnodes, MPI_BYTE, rnode, st->leaders);
		else
			rc = PMPI_Gatherv(mine, st->vc[st->my_node], MPI_BYTE, NULL, st->vc,
			                  st->vc + st->nnodes, MPI_BYTE, rnode, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_GATHER, "MPI_Gatherv among leaders", rc);
		if (st->my_node == rnode && !st->ordered)
			to_rank_order(st, ranked, nodes, b);
	}
	if (st->my_node == rnode && rlocal != 0) {
		if (st->lrank == 0)
			rc = PMPI_Send(ranked, (int)all, MPI_BYTE, rlocal, 0, st->node);
		else if (st->rank == root)
			rc = PMPI_Recv(recvbuf, (int)all, MPI_BYTE, 0, 0, st->node,
			               MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return fail(st, C_GATHER, "leader to root", rc);
	}
	return via_shm(C_GATHER);
}

/* gather_multi backwards: if the root is not its node's leader, one message
 * of all of sendbuf from it to the leader; the leader puts it in node order
 * (a root that is the leader, ordered, scatters from sendbuf itself); a
 * scatterv of whole node blocks among the leaders; scatter from each
 * leader in the node. own is where this rank's block goes: NULL at an
 * in-place root, whose block stays in sendbuf. */
static int scatter_multi(struct cstate *st, const void *sendbuf, void *own, size_t b, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], rc = MPI_SUCCESS;
	size_t all = (size_t)st->size * b;
	const char *nodes = NULL;
	char *mine = NULL, *ranked = NULL, *buf = NULL;

	if (st->lrank == 0 && st->my_node != rnode) {
		mine = scratch(st, 0, (size_t)node_size(st, st->my_node) * b);
		if (!mine)
			return fail(st, C_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
	} else if (st->lrank == 0) {
		/* sendbuf in rank order (at the root, or received from it
		 * into ranked), then in node order (nodes, in buf). */
		if (rlocal == 0 && st->ordered) {
			nodes = sendbuf;
		} else {
			nodes = buf = scratch(st, 0, all);
			ranked = rlocal != 0 && !st->ordered ? scratch(st, 1, all) : buf;
			if (!buf || !ranked)
				return fail(st, C_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
		}
	} else if (st->rank == root && !own) {
		/* An in-place root off the leader takes its block too; it
		 * does not go into sendbuf, which the root keeps as it is. */
		own = scratch(st, 0, b);
		if (!own)
			return fail(st, C_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
	}
	if (st->my_node == rnode && rlocal != 0) {
		if (st->lrank == 0)
			rc = PMPI_Recv(ranked, (int)all, MPI_BYTE, rlocal, 0, st->node,
			               MPI_STATUS_IGNORE);
		else if (st->rank == root)
			rc = PMPI_Send(sendbuf, (int)all, MPI_BYTE, 0, 0, st->node);
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTER, "root to leader", rc);
	}
	if (st->lrank == 0) {
		if (st->my_node == rnode && !st->ordered)
			to_node_order(st, buf, rlocal == 0 ? sendbuf : ranked, b);
		node_counts(st, b);
		if (st->my_node == rnode) {
			rc = PMPI_Scatterv(nodes, st->vc, st->vc + st->nnodes, MPI_BYTE,
			                   MPI_IN_PLACE, 0, MPI_BYTE, rnode, st->leaders);
			mine = (char *)nodes + (size_t)st->node_start[rnode] * b;
		} else {
			rc = PMPI_Scatterv(NULL, st->vc, st->vc + st->nnodes, MPI_BYTE, mine,
			                   st->vc[st->my_node], MPI_BYTE, rnode, st->leaders);
		}
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTER, "MPI_Scatterv among leaders", rc);
		/* An in-place root that is the leader: shmcoll's in-place
		 * form, which writes nothing (mine may be sendbuf's). */
		if (!own)
			own = mine;
	}
	rc = shmcoll_scatter(mine, own, b, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_SCATTER, "shmcoll_scatter", rc);
}

/* Gather every rank's whole sendbuf to its node's leader (into a: local
 * rank l's row of size blocks, one per destination in rank order); the
 * leader packs one piece per destination node (into x: for node m, [q][l],
 * the block from its local rank l to m's local rank q); an alltoallv of the
 * pieces among the leaders (into a, whose rows are packed by then); the
 * leader builds each local rank's recvbuf (into x: row q, its block from
 * each rank in rank order) and scatters the rows in the node. Packing is
 * what makes each leader's share one contiguous message (a row holds a
 * block for every node); the pieces are laid out so that a receiver whose
 * node order is rank order unpacks whole runs of a node's blocks. Two
 * buffers of node size * size blocks on each leader, like the gather it
 * starts with. in is recvbuf in place: the gather has read it before the
 * scatter writes it. */
static int alltoall_multi(struct cstate *st, const void *in, void *recvbuf, size_t b)
{
	int ln = node_size(st, st->my_node), n, q, l, rc;
	int *sc = st->vc, *sd = sc + st->nnodes, *rcnt = sd + st->nnodes, *rd = rcnt + st->nnodes;
	size_t row = (size_t)st->size * b, mine = (size_t)ln * row;
	char *a = NULL, *x = NULL, *piece;

	if (st->lrank == 0) {
		a = scratch(st, 0, mine);
		x = scratch(st, 1, mine);
		if (!a || !x)
			return fail(st, C_ALLTOALL, "scratch buffer", MPI_ERR_NO_MEM);
	}
	rc = shmcoll_gather(in, a, row, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLTOALL, "shmcoll_gather", rc);
	if (st->lrank == 0) {
		for (n = 0; n < st->nnodes; n++) {
			int ns = node_size(st, n), first = st->node_start[n];

			sc[n] = rcnt[n] = (int)((size_t)ln * (size_t)ns * b);
			sd[n] = rd[n] = (int)((size_t)ln * (size_t)first * b);
			piece = x + (size_t)sd[n];
			for (q = 0; q < ns; q++)
				for (l = 0; l < ln; l++)
					memcpy(piece + ((size_t)q * (size_t)ln + (size_t)l) * b,
					       a + (size_t)l * row +
					           (size_t)st->rank_at[first + q] * b,
					       b);
		}
		rc = PMPI_Alltoallv(x, sc, sd, MPI_BYTE, a, rcnt, rd, MPI_BYTE, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLTOALL, "MPI_Alltoallv among leaders", rc);
		/* From node n: [q][l], to local rank q from n's local rank l. */
		for (n = 0; n < st->nnodes; n++) {
			int ns = node_size(st, n), first = st->node_start[n];

			piece = a + (size_t)rd[n];
			for (q = 0; q < ln; q++) {
				if (st->ordered) {
					memcpy(x + (size_t)q * row + (size_t)first * b,
					       piece + (size_t)q * (size_t)ns * b, (size_t)ns * b);
					continue;
				}
				for (l = 0; l < ns; l++)
					memcpy(x + (size_t)q * row +
					           (size_t)st->rank_at[first + l] * b,
					       piece + ((size_t)q * (size_t)ns + (size_t)l) * b, b);
			}
		}
	}
	rc = shmcoll_scatter(x, recvbuf, row, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_ALLTOALL, "shmcoll_scatter", rc);
}

/* The wrappers. Each first decides, from arguments every rank agrees on,
 * whether shmcoll can run the call, and otherwise passes it to PMPI as is.
 * Zero bytes: MPI asks nothing of such a call (no synchronisation either),
 * so it returns at once, and counts as shmcoll's. */

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm)
{
	const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	struct cstate *st = NULL;
	shmcoll_dtype sdt;
	shmcoll_op sop;

	if (is_loc(op))
		return loc_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
	if (count >= 0 && red_args(datatype, op, &sdt, &sop) == 0)
		st = state_of(comm);
	if (!st)
		return pmpi(C_ALLREDUCE,
		            PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm));
	if (!count)
		return via_shm(C_ALLREDUCE);
	if (is_logical(op) && !(in = logical_in(st, C_ALLREDUCE, in, (size_t)count, sdt)))
		return MPI_ERR_NO_MEM;
	if (st->multi)
		return allreduce_multi(st, in, recvbuf, count, datatype, op, sdt, sop);
	return shm_done(st, C_ALLREDUCE, "shmcoll_allreduce",
	                shmcoll_allreduce(in, recvbuf, (size_t)count, sdt, sop, st->shm));
}

EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, int root, MPI_Comm comm)
{
	struct cstate *st = NULL;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	const void *in = sendbuf;
	void *out = NULL;

	if (is_loc(op))
		return loc_reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
	if (count >= 0 && red_args(datatype, op, &sdt, &sop) == 0)
		st = state_of(comm);
	/* MPI_IN_PLACE off the root is an error PMPI reports. */
	if (!st || root < 0 || root >= st->size || (sendbuf == MPI_IN_PLACE && st->rank != root))
		return pmpi(C_REDUCE,
		            PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm));
	if (!count)
		return via_shm(C_REDUCE);
	if (st->rank == root) {
		out = recvbuf;
		if (sendbuf == MPI_IN_PLACE)
			in = recvbuf;
	}
	if (is_logical(op) && !(in = logical_in(st, C_REDUCE, in, (size_t)count, sdt)))
		return MPI_ERR_NO_MEM;
	if (st->multi)
		return reduce_multi(st, in, out, count, datatype, op, sdt, sop, root,
		                    shmcoll_dtype_size(sdt) * (size_t)count);
	return shm_done(st, C_REDUCE, "shmcoll_reduce",
	                shmcoll_reduce(in, out, (size_t)count, sdt, sop, root, st->shm));
}

/* Data movement. Every rank takes shmcoll's path from what all of them agree
 * on (the signature's bytes, the root, and for a multi-node call whether
 * the leaders' int counts hold them), never from its own datatypes; a side
 * whose buffer does not hold its bytes in order is packed into scratch
 * buffer 2 (what this rank sends) or 3 (what it receives) and unpacked from
 * there. Where packing fails the call fails as a shmcoll call would: the
 * node's communicator is aborted, so no peer waits for this rank. */

/* Buffer i of st for a packed side of bytes, or NULL with the call failed
 * (fail() says why). */
static void *packed_buf(struct cstate *st, enum coll c, int i, long long bytes)
{
	void *p = scratch(st, i, (size_t)bytes);

	if (!p)
		fail(st, c, "a buffer for packed data", -ENOMEM);
	return p;
}

EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
	struct side s;
	struct cstate *st = side_of(datatype, count, &s) < 0 ? NULL : state_of(comm);
	void *p = buffer;
	int rc;

	if (!st || root < 0 || root >= st->size)
		return pmpi(C_BCAST, PMPI_Bcast(buffer, count, datatype, root, comm));
	if (!s.bytes)
		return via_shm(C_BCAST);
	if (!s.contig) {
		if (!(p = packed_buf(st, C_BCAST, 2, s.bytes)))
			return MPI_ERR_NO_MEM;
		if (st->rank == root &&
		    (rc = pack_side(0, buffer, count, datatype, &s, p, comm)) != MPI_SUCCESS)
			return fail(st, C_BCAST, "MPI_Pack", rc);
	}
	if (st->multi)
		rc = bcast_multi(st, p, root, (size_t)s.bytes);
	else
		rc = shm_done(st, C_BCAST, "shmcoll_bcast",
		              shmcoll_bcast(p, (size_t)s.bytes, SHMCOLL_UINT8, root, st->shm));
	if (rc == MPI_SUCCESS && !s.contig && st->rank != root &&
	    (rc = pack_side(1, buffer, count, datatype, &s, p, comm)) != MPI_SUCCESS)
		return fail(st, C_BCAST, "MPI_Unpack", rc);
	return rc;
}

/* The sides of an allgather or alltoall (MPI gives them the same
 * arguments): 0 with r (a receive block) and, unless in place, w (a send
 * block) filled, or -1 (PMPI). */
static int block_sides(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                       MPI_Datatype recvtype, struct side *w, struct side *r)
{
	if (side_of(recvtype, recvcount, r) < 0)
		return -1;
	if (sendbuf == MPI_IN_PLACE) {
		*w = *r;
		return 0;
	}
	return side_of(sendtype, sendcount, w) < 0 || w->bytes != r->bytes ? -1 : 0;
}

EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	struct side w, r;
	int inplace = sendbuf == MPI_IN_PLACE, rc;
	struct cstate *st =
	    block_sides(sendbuf, sendcount, sendtype, recvcount, recvtype, &w, &r) < 0
	        ? NULL
	        : state_of(comm);
	const void *in;
	char *out = recvbuf;

	if (!st || (st->multi && !fits(st->size, 1, r.bytes)))
		return pmpi(C_ALLGATHER, PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf,
		                                        recvcount, recvtype, comm));
	if (!r.bytes)
		return via_shm(C_ALLGATHER);
	if (!r.contig && !(out = packed_buf(st, C_ALLGATHER, 3, r.bytes * st->size)))
		return MPI_ERR_NO_MEM;
	rc = MPI_SUCCESS;
	if (inplace) {
		/* This rank's block is already in recvbuf (packed here if need be):
		 * shmcoll's in-place form. */
		in = out + (size_t)st->rank * (size_t)r.bytes;
		if (!r.contig)
			rc = pack_side(0,
			               (char *)recvbuf + (MPI_Aint)st->rank * recvcount * r.extent,
			               recvcount, recvtype, &r, (void *)in, comm);
	} else if (w.contig) {
		in = sendbuf;
	} else {
		if (!(in = packed_buf(st, C_ALLGATHER, 2, w.bytes)))
			return MPI_ERR_NO_MEM;
		rc = pack_side(0, (void *)sendbuf, sendcount, sendtype, &w, (void *)in, comm);
	}
	if (rc != MPI_SUCCESS)
		return fail(st, C_ALLGATHER, "MPI_Pack", rc);
	if (st->multi)
		rc = allgather_multi(st, in, out, (size_t)r.bytes);
	else
		rc = shm_done(st, C_ALLGATHER, "shmcoll_allgather",
		              shmcoll_allgather(in, out, (size_t)r.bytes, SHMCOLL_UINT8, st->shm));
	if (rc == MPI_SUCCESS && !r.contig &&
	    (rc = pack_blocks(1, recvbuf, recvcount, recvtype, &r, st->size, out, comm)) !=
	        MPI_SUCCESS)
		return fail(st, C_ALLGATHER, "MPI_Unpack", rc);
	return rc;
}

EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	struct cstate *st = NULL;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	size_t bytes;
	char *own;
	int rc;

	if (is_loc(op))
		return loc_reduce_scatter(C_REDUCE_SCATTER_BLOCK, sendbuf, recvbuf, NULL, recvcount,
		                          datatype, op, comm);
	if (recvcount >= 0 && red_args(datatype, op, &sdt, &sop) == 0)
		st = state_of(comm);
	if (!st || (st->multi && !fits(st->size, 1, recvcount)))
		return pmpi(
		    C_REDUCE_SCATTER_BLOCK,
		    PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm));
	if (!recvcount)
		return via_shm(C_REDUCE_SCATTER_BLOCK);
	if (is_logical(op) && !(sendbuf = logical_in(st, C_REDUCE_SCATTER_BLOCK,
	                                             sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
	                                             (size_t)recvcount * (size_t)st->size, sdt)))
		return MPI_ERR_NO_MEM;
	if (st->multi)
		return reduce_scatter_multi(st, sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf,
		                            recvbuf, recvcount, datatype, op, sdt, sop);
	if (sendbuf != MPI_IN_PLACE)
		return shm_done(
		    st, C_REDUCE_SCATTER_BLOCK, "shmcoll_reduce_scatter",
		    shmcoll_reduce_scatter(sendbuf, recvbuf, (size_t)recvcount, sdt, sop, st->shm));
	/* MPI's in place takes the input from recvbuf and leaves the result at
	 * its start; shmcoll's leaves it at the rank's own block, so the
	 * result moves down (rank > 0: the two blocks are disjoint). */
	bytes = shmcoll_dtype_size(sdt) * (size_t)recvcount;
	own = (char *)recvbuf + (size_t)st->rank * bytes;
	rc = shmcoll_reduce_scatter(recvbuf, own, (size_t)recvcount, sdt, sop, st->shm);
	if (rc == 0 && st->rank > 0)
		memcpy(recvbuf, own, bytes);
	return shm_done(st, C_REDUCE_SCATTER_BLOCK, "shmcoll_reduce_scatter", rc);
}

/* The sides of a rooted gather or scatter, 0 or -1 for PMPI. own_* is what
 * every rank but an in-place root passes for its own block (gather's send*,
 * scatter's recv*), root_* what counts only at the root (gather's recv*,
 * scatter's send*); both describe the same bytes there. Every rank's block
 * is the same size (MPI's rule), so across nodes all of them agree on
 * whether the leaders' exchange fits. */
static int rooted_sides(const struct cstate *st, int root, MPI_Datatype own_t, int own_n,
                        MPI_Datatype root_t, int root_n, int root_in_place, struct side *own,
                        struct side *all)
{
	long long block;

	if (!st || root < 0 || root >= st->size)
		return -1;
	if (st->rank != root) {
		if (side_of(own_t, own_n, own) < 0)
			return -1;
		block = own->bytes;
	} else {
		if (side_of(root_t, root_n, all) < 0)
			return -1;
		block = all->bytes;
		if (root_in_place)
			*own = *all;
		else if (side_of(own_t, own_n, own) < 0 || own->bytes != block)
			return -1;
	}
	if (block > 0 && st->multi && !fits(st->size, 1, block))
		return -1;
	return 0;
}

EXPORT int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                      int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	struct cstate *st = state_of(comm);
	int inplace = sendbuf == MPI_IN_PLACE, rc;
	struct side w, r;
	const void *in = sendbuf;
	char *out = NULL;
	int is_root;

	if (rooted_sides(st, root, sendtype, sendcount, recvtype, recvcount, inplace, &w, &r) < 0)
		return pmpi(C_GATHER, PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
		                                  recvtype, root, comm));
	if (!w.bytes)
		return via_shm(C_GATHER);
	is_root = st->rank == root;
	if (is_root) {
		out = recvbuf;
		if (!r.contig && !(out = packed_buf(st, C_GATHER, 3, r.bytes * st->size)))
			return MPI_ERR_NO_MEM;
		if (inplace)
			in = out + (size_t)root * (size_t)r.bytes;
		if (inplace && !r.contig &&
		    (rc = pack_side(0, (char *)recvbuf + (MPI_Aint)root * recvcount * r.extent,
		                    recvcount, recvtype, &r, (void *)in, comm)) != MPI_SUCCESS)
			return fail(st, C_GATHER, "MPI_Pack", rc);
	}
	if (!inplace && !w.contig) {
		if (!(in = packed_buf(st, C_GATHER, 2, w.bytes)))
			return MPI_ERR_NO_MEM;
		if ((rc = pack_side(0, (void *)sendbuf, sendcount, sendtype, &w, (void *)in,
		                    comm)) != MPI_SUCCESS)
			return fail(st, C_GATHER, "MPI_Pack", rc);
	}
	if (st->multi)
		rc = gather_multi(st, in, out, (size_t)w.bytes, root);
	else
		rc = shm_done(
		    st, C_GATHER, "shmcoll_gather",
		    shmcoll_gather(in, out, (size_t)w.bytes, SHMCOLL_UINT8, root, st->shm));
	if (rc == MPI_SUCCESS && is_root && !r.contig &&
	    (rc = pack_blocks(1, recvbuf, recvcount, recvtype, &r, st->size, out, comm)) !=
	        MPI_SUCCESS)
		return fail(st, C_GATHER, "MPI_Unpack", rc);
	return rc;
}

EXPORT int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
	struct cstate *st = state_of(comm);
	int inplace = recvbuf == MPI_IN_PLACE, rc;
	struct side r, w;
	const char *in = NULL;
	void *out = inplace ? NULL : recvbuf;
	int is_root;

	if (rooted_sides(st, root, recvtype, recvcount, sendtype, sendcount, inplace, &r, &w) < 0)
		return pmpi(C_SCATTER, PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf,
		                                    recvcount, recvtype, root, comm));
	if (!r.bytes)
		return via_shm(C_SCATTER);
	is_root = st->rank == root;
	if (is_root) {
		in = sendbuf;
		if (!w.contig) {
			if (!(in = packed_buf(st, C_SCATTER, 2, w.bytes * st->size)))
				return MPI_ERR_NO_MEM;
			if ((rc = pack_blocks(0, (void *)sendbuf, sendcount, sendtype, &w, st->size,
			                      (void *)in, comm)) != MPI_SUCCESS)
				return fail(st, C_SCATTER, "MPI_Pack", rc);
		}
	}
	if (!inplace && !r.contig && !(out = packed_buf(st, C_SCATTER, 3, r.bytes)))
		return MPI_ERR_NO_MEM;
	/* Across nodes the root's block may not be where its node's scatter
	 * reads it from: scatter_multi takes in place as NULL. On one node, in
	 * place is the root's block of what it sends (packed or not). */
	if (st->multi)
		rc = scatter_multi(st, in, out, (size_t)r.bytes, root);
	else
		rc = shm_done(st, C_SCATTER, "shmcoll_scatter",
		              shmcoll_scatter(
		                  in, inplace ? (void *)(in + (size_t)root * (size_t)r.bytes) : out,
		                  (size_t)r.bytes, SHMCOLL_UINT8, root, st->shm));
	if (rc == MPI_SUCCESS && !inplace && !r.contig &&
	    (rc = pack_side(1, recvbuf, recvcount, recvtype, &r, out, comm)) != MPI_SUCCESS)
		return fail(st, C_SCATTER, "MPI_Unpack", rc);
	return rc;
}

EXPORT int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
	struct side w, r;
	int inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
	struct cstate *st =
	    block_sides(sendbuf, sendcount, sendtype, recvcount, recvtype, &w, &r) < 0
	        ? NULL
	        : state_of(comm);
	const void *in = inplace ? recvbuf : sendbuf;
	void *out = recvbuf;

	if (!st || (st->multi && !fits(st->max_node, st->size, r.bytes)))
		return pmpi(C_ALLTOALL, PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf,
		                                      recvcount, recvtype, comm));
	if (!r.bytes)
		return via_shm(C_ALLTOALL);
	if (!r.contig && !(out = packed_buf(st, C_ALLTOALL, 3, r.bytes * st->size)))
		return MPI_ERR_NO_MEM;
	/* In place, what this rank sends is in recvbuf as recvtype: packed
	 * apart when that is not in order, since the result goes elsewhere. */
	if (inplace && !r.contig) {
		if (!(in = packed_buf(st, C_ALLTOALL, 2, r.bytes * st->size)))
			return MPI_ERR_NO_MEM;
		rc = pack_blocks(0, recvbuf, recvcount, recvtype, &r, st->size, (void *)in, comm);
	} else if (!inplace && !w.contig) {
		if (!(in = packed_buf(st, C_ALLTOALL, 2, w.bytes * st->size)))
			return MPI_ERR_NO_MEM;
		rc = pack_blocks(0, (void *)sendbuf, sendcount, sendtype, &w, st->size, (void *)in,
		                 comm);
	}
	if (rc != MPI_SUCCESS)
		return fail(st, C_ALLTOALL, "MPI_Pack", rc);
	if (st->multi)
		rc = alltoall_multi(st, in, out, (size_t)r.bytes);
	else
		rc = shm_done(st, C_ALLTOALL, "shmcoll_alltoall",
		              shmcoll_alltoall(in, out, (size_t)r.bytes, SHMCOLL_UINT8, st->shm));
	if (rc == MPI_SUCCESS && !r.contig &&
	    (rc = pack_blocks(1, recvbuf, recvcount, recvtype, &r, st->size, out, comm)) !=
	        MPI_SUCCESS)
		return fail(st, C_ALLTOALL, "MPI_Unpack", rc);
	return rc;
}

/* Prefix reductions and reduce_scatter with counts: a reduction of a mapped
 * type and op, on one node (across nodes the scans go to PMPI: a node's
 * ranks need not be consecutive, so no composition keeps the prefix order
 * cheaply; reduce_scatter is composed, reduce_scatterv_multi). Every rank
 * decides alike: the datatype, op and communicator are the same on all of
 * them. These and the v-collectives below are decided and prepared by
 * helpers their non-blocking forms (MPI_Iscan ..., "Non-blocking
 * collectives") share: a *_state or *_sides helper takes the path from the
 * arguments alone, a *_prep helper sets up what shmcoll reads and writes,
 * in buffers call_buf gives. */

/* The non-blocking forms own their buffers (defined with them). */
struct nbreq;
static void *nb_slot(struct nbreq *q, int i, size_t bytes);
static size_t *nb_vz(struct nbreq *q);

/* Buffer i (2: what this rank sends, packed or made 0/1; 3: what it receives, packed, or a
 * logical op's input) of bytes for a call: st's scratch buffer for a blocking call (q NULL),
 * kept for the next; for a non-blocking one, the request's own, freed at its completion,
 * since a later call on the communicator may reuse the scratch before then. NULL: no
 * memory. */
static void *call_buf(struct cstate *st, struct nbreq *q, int i, size_t bytes)
{
	return q ? nb_slot(q, i, bytes) : scratch(st, i, bytes);
}

/* A blocking call whose preparation failed with rc (an MPI code, or -ENOMEM): see fail(). */
static int prep_failed(struct cstate *st, enum coll c, const char *what, int rc)
{
	int mrc = fail(st, c, what, rc);

	return rc == -ENOMEM ? MPI_ERR_NO_MEM : mrc;
}

/* What moves once shmcoll's call is over: bytes from src to dst (an in-place result shmcoll
 * leaves elsewhere than MPI wants it; a logical scan's rank 0 input, its result). */
struct move {
	char *dst;
	const char *src;
	size_t bytes;
};

static void do_move(const struct move *m)
{
	if (m->bytes)
		memmove(m->dst, m->src, m->bytes);
}

/* A reduction's call to shmcoll, as scan_prep and rs_prep leave it for either form. */
struct rcall {
	const void *in;
	void *out;
	size_t *counts; /* reduce_scatter's recvcounts, as size_t */
	size_t total;   /* their sum */
	struct move after;
	const char *what; /* what failed, when a helper returns an error */
};

/* comm's state for a scan (ex: an exscan) of count elements of dt under op, with sdt and
 * sop filled; NULL: PMPI. MPI_Exscan with a logical op goes to PMPI: its rank 1 gets rank
 * 0's input unchanged, which the 0-or-1 inputs cannot give (see logical_in). The LOC ops
 * fail red_args: the blocking calls take them to loc_scan first. */
static struct cstate *scan_state(int ex, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                 shmcoll_dtype *sdt, shmcoll_op *sop)
{
	struct cstate *st;

	if (count < 0 || (ex && is_logical(op)) || red_args(dt, op, sdt, sop) < 0)
		return NULL;
	st = state_of(comm);
	return st && !st->multi ? st : NULL;
}

/* A scan's input and output, count > 0. A logical op's input is made 0 or 1 into buffer 3;
 * rank 0's result is then its input as it is (see logical_in), so shmcoll writes rank 0's
 * into buffer 2 and the input is copied to recvbuf after. */
static int scan_prep(struct cstate *st, struct nbreq *q, struct rcall *c, const void *sendbuf,
                     void *recvbuf, int count, shmcoll_dtype sdt, MPI_Op op)
{
	size_t bytes = (size_t)count * shmcoll_dtype_size(sdt);
	const void *raw = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	void *in;

	c->in = raw;
	c->out = recvbuf;
	if (!is_logical(op) || st->size == 1)
		return MPI_SUCCESS;
	c->what = "a buffer for the logical op's input";
	if (!(in = call_buf(st, q, 3, bytes)) ||
	    (st->rank == 0 && !(c->out = call_buf(st, q, 2, bytes))))
		return -ENOMEM;
	to_logical(in, raw, (size_t)count, sdt);
	c->in = in;
	if (st->rank == 0 && raw != recvbuf)
		c->after = (struct move){recvbuf, raw, bytes};
	return MPI_SUCCESS;
}

/* MPI_Scan and MPI_Exscan (ex). Exscan's rank 0's recvbuf is undefined in MPI; shmcoll
 * leaves it unchanged. */
static int scan(int ex, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                MPI_Op op, MPI_Comm comm)
{
	enum coll c = ex ? C_EXSCAN : C_SCAN;
	struct rcall call = {0};
	struct cstate *st;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	int rc;

	if (is_loc(op))
		return loc_scan(ex, sendbuf, recvbuf, count, datatype, op, comm);
	if (!(st = scan_state(ex, count, datatype, op, comm, &sdt, &sop)))
		return pmpi(c, ex ? PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm)
		                  : PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm));
	if (!count)
		return via_shm(c);
	if ((rc = scan_prep(st, NULL, &call, sendbuf, recvbuf, count, sdt, op)) != MPI_SUCCESS)
		return prep_failed(st, c, call.what, rc);
	rc = ex ? shmcoll_exscan(call.in, call.out, (size_t)count, sdt, sop, st->shm)
	        : shmcoll_scan(call.in, call.out, (size_t)count, sdt, sop, st->shm);
	if (rc == 0)
		do_move(&call.after);
	return shm_done(st, c, ex ? "shmcoll_exscan" : "shmcoll_scan", rc);
}

EXPORT int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm)
{
	return scan(0, sendbuf, recvbuf, count, datatype, op, comm);
}

EXPORT int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm)
{
	return scan(1, sendbuf, recvbuf, count, datatype, op, comm);
}

/* comm's state for MPI_Reduce_scatter with these arguments, sdt and sop filled; NULL:
 * PMPI, also for a negative count (erroneous: PMPI says so; every rank sees the same
 * counts). The LOC ops fail red_args, as in scan_state. Across nodes only the blocking form
 * (nb 0) is composed, and only while the vector's elements, the leaders' counts' sum, fit
 * an int: every rank knows them from recvcounts. */
static struct cstate *rs_state(const int *recvcounts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                               int nb, shmcoll_dtype *sdt, shmcoll_op *sop)
{
	struct cstate *st;
	long long total = 0;
	int i;

	if (!recvcounts || red_args(dt, op, sdt, sop) < 0 || !(st = state_of(comm)) ||
	    (st->multi && nb))
		return NULL;
	for (i = 0; i < st->size; i++) {
		if (recvcounts[i] < 0)
			return NULL;
		total += recvcounts[i];
	}
	return st->multi && total > INT_MAX ? NULL : st;
}

/* Its counts as size_t (in st->vz, or the request's own) and their total; unless that is 0,
 * its input and output. MPI's in place takes the input from recvbuf and leaves the result
 * at its start; shmcoll's at the rank's own block, which may overlap the start: moved down
 * after. A logical op's input, made 0 or 1 into buffer 3, runs out of place either way. */
static int rs_prep(struct cstate *st, struct nbreq *q, struct rcall *c, const void *sendbuf,
                   void *recvbuf, const int *recvcounts, shmcoll_dtype sdt, MPI_Op op)
{
	size_t es = shmcoll_dtype_size(sdt), before = 0;
	void *in;
	int i;

	c->what = "memory for the counts";
	if (!(c->counts = q ? nb_vz(q) : st->vz))
		return -ENOMEM;
	for (i = 0; i < st->size; i++) {
		c->counts[i] = (size_t)recvcounts[i];
		c->total += c->counts[i];
		if (i < st->rank)
			before += c->counts[i];
	}
	c->in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	c->out = recvbuf;
	if (!c->total)
		return MPI_SUCCESS;
	if (is_logical(op) && st->size > 1) {
		c->what = "a buffer for the logical op's input";
		if (!(in = call_buf(st, q, 3, c->total * es)))
			return -ENOMEM;
		to_logical(in, c->in, c->total, sdt);
		c->in = in;
	} else if (sendbuf == MPI_IN_PLACE && !st->multi) {
		/* Across nodes the result goes to recvbuf's start (reduce_scatterv_multi). */
		c->out = (char *)recvbuf + before * es;
		if (before)
			c->after = (struct move){recvbuf, c->out, c->counts[st->rank] * es};
	}
	return MPI_SUCCESS;
}

/* reduce_scatter_multi with a count per rank (c from rs_prep: counts, total, in; out is
 * recvbuf): reduce all of the vector to each node's leader; the leader puts the blocks in node
 * order; the leaders reduce-scatter it with whole node counts (vc, elements), each getting its
 * node's blocks; scatterv in the node with the node's counts. The leader's buffers are
 * reduce_scatter_multi's (part in rank order, vec in node order, res the node's blocks; one
 * of them spared when ordered). vz is c->counts in its first P, then each rank's element
 * offset in rank order, then the node's local counts and offsets for the scatterv. As there,
 * the input (recvbuf in place) has been read before the scatterv writes recvbuf. */
static int reduce_scatterv_multi(struct cstate *st, const struct rcall *c, MPI_Datatype dt,
                                 MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop)
{
	size_t es = shmcoll_dtype_size(sdt), *cnt = c->counts, *roff = st->vz + st->size;
	size_t *lc = st->vz + 2 * (size_t)st->size, *ld = st->vz + 3 * (size_t)st->size, at = 0;
	int P = st->size, first = st->node_start[st->my_node], ln = node_size(st, st->my_node);
	int i, n, rc;
	char *part = NULL, *vec = NULL, *res = NULL;

	for (i = 0; i < P; i++) {
		roff[i] = at;
		at += cnt[i];
	}
	if (st->lrank == 0) {
		for (i = 0, at = 0; i < ln; i++) {
			lc[i] = cnt[st->rank_at[first + i]];
			ld[i] = at;
			at += lc[i];
		}
		/* at: the node's elements (a byte more: res is passed even when empty) */
		part = scratch(st, 0, c->total * es);
		res = scratch(st, 1, st->ordered ? at * es + 1 : c->total * es);
		if (!part || !res)
			return fail(st, C_REDUCE_SCATTER, "scratch buffer", MPI_ERR_NO_MEM);
		vec = part;
		if (!st->ordered) {
			vec = res;
			res = part;
		}
	}
	rc = shmcoll_reduce(c->in, part, c->total, sdt, sop, 0, st->shm);
	if (rc < 0)
		return fail(st, C_REDUCE_SCATTER, "shmcoll_reduce", rc);
	if (st->lrank == 0) {
		for (n = 0; n < st->nnodes; n++) {
			for (at = 0, i = st->node_start[n]; i < st->node_start[n + 1]; i++)
				at += cnt[st->rank_at[i]];
			st->vc[n] = (int)at;
		}
		if (!st->ordered)
			for (i = 0, at = 0; i < P; i++) {
				memcpy(vec + at * es, part + roff[st->rank_at[i]] * es,
				       cnt[st->rank_at[i]] * es);
				at += cnt[st->rank_at[i]];
			}
		rc = PMPI_Reduce_scatter(vec, res, st->vc, dt, op, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_REDUCE_SCATTER, "MPI_Reduce_scatter among leaders", rc);
	}
	rc = shmcoll_scatterv(res, st->lrank == 0 ? lc : NULL, st->lrank == 0 ? ld : NULL, c->out,
	                      cnt[st->rank], sdt, 0, st->shm);
	return shm_done(st, C_REDUCE_SCATTER, "shmcoll_scatterv", rc);
}

EXPORT int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
	struct rcall c = {0};
	struct cstate *st;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	int rc;

	if (is_loc(op))
		return loc_reduce_scatter(C_REDUCE_SCATTER, sendbuf, recvbuf, recvcounts, 0,
		                          datatype, op, comm);
	if (!(st = rs_state(recvcounts, datatype, op, comm, 0, &sdt, &sop)))
		return pmpi(C_REDUCE_SCATTER,
		            PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm));
	if ((rc = rs_prep(st, NULL, &c, sendbuf, recvbuf, recvcounts, sdt, op)) != MPI_SUCCESS)
		return prep_failed(st, C_REDUCE_SCATTER, c.what, rc);
	if (!c.total)
		return via_shm(C_REDUCE_SCATTER);
	if (st->multi)
		return reduce_scatterv_multi(st, &c, datatype, op, sdt, sop);
	rc = shmcoll_reduce_scatterv(c.in, c.out, c.counts, sdt, sop, st->shm);
	if (rc == 0)
		do_move(&c.after);
	return shm_done(st, C_REDUCE_SCATTER, "shmcoll_reduce_scatterv", rc);
}

/* The v-collectives, within a node (across nodes, allgatherv, gatherv and
 * scatterv are composed, their *_multi; alltoallv goes to PMPI, decided alike
 * on every rank). Blocks move as bytes, as the equal-count calls' do: a side
 * whose datatype holds its bytes in order is read or written in place, at
 * byte displacement displs[i] * extent; any other goes through a packed
 * buffer where the blocks lie back to back, each unpacked to its
 * displacement. Counts are the ranks' agreed ones (MPI's matching rule);
 * only an erroneous call (a count that is negative, or this rank's block
 * of another size than its peers expect) goes to PMPI. */

/* A v-side: per rank i, counts[i] elements of a datatype at displs[i]
 * (in extents) of buf; n its bytes. */
struct vside {
	struct side t; /* of one element */
	const int *counts, *displs;
	size_t *bc, *bd; /* bytes: counts, and displacements in the buffer moved */
	size_t total;    /* the packed form's bytes */
	MPI_Aint base;   /* in order: where, from the caller's buffer, bd counts from */
};

/* Whether two non-empty blocks of a side moved in order overlap. One pass settles blocks in
 * rank order; any other layout is checked pair by pair (rare, and P is a node's ranks). */
static int vside_overlaps(const struct vside *v, int P)
{
	size_t end = 0;
	int i, j, ordered = 1;

	for (i = 0; i < P && ordered; i++) {
		if (!v->bc[i])
			continue;
		ordered = v->bd[i] >= end;
		end = v->bd[i] + v->bc[i];
	}
	if (ordered)
		return 0;
	for (i = 0; i < P; i++)
		for (j = i + 1; j < P; j++)
			if (v->bc[i] && v->bc[j] && v->bd[i] < v->bd[j] + v->bc[j] &&
			    v->bd[j] < v->bd[i] + v->bc[i])
				return 1;
	return 0;
}

/* Fills v for P ranks' blocks: 0, or -1 (a negative count or an invalid
 * type: an erroneous call, PMPI reports it). bc and bd are vz + 2 * which
 * * P and the P after. Displacements may be negative (they only name
 * addresses, and the root's or a rank's own need not look like the
 * others'): a side moved in order counts its byte displacements from the
 * lowest. Receive blocks that overlap (which = 1) make an erroneous call
 * that both MPIs run all the same (MPICH's allgatherv4 has several ranks'
 * blocks at displacement 0); shmcoll refuses it, and only the root of a
 * gatherv knows its layout, so such a side is received packed, as a
 * derived type's is, and unpacked block by block in rank order: the last
 * rank's bytes win where blocks overlap. */
static int vside_of(size_t *vz, int P, int which, MPI_Datatype dt, const int *counts,
                    const int *displs, struct vside *v)
{
	int i, low = 0;

	if (!counts || !displs || side_of(dt, 1, &v->t) < 0)
		return -1;
	v->counts = counts;
	v->displs = displs;
	v->bc = vz + 2 * (size_t)which * (size_t)P;
	v->bd = v->bc + P;
	v->total = 0;
	for (i = 0; i < P; i++) {
		if (counts[i] < 0)
			return -1;
		if (displs[i] < low)
			low = displs[i];
	}
	v->base = v->t.contig ? (MPI_Aint)low * v->t.extent : 0;
	for (i = 0; i < P; i++) {
		v->bc[i] = (size_t)counts[i] * (size_t)v->t.size;
		v->bd[i] =
		    v->t.contig ? (size_t)((MPI_Aint)(displs[i] - low) * v->t.extent) : v->total;
		v->total += v->bc[i];
	}
	if (which == 1 && v->t.contig && vside_overlaps(v, P)) {
		v->t.contig = 0;
		v->base = 0;
		for (i = 0, v->total = 0; i < P; i++) {
			v->bd[i] = v->total;
			v->total += v->bc[i];
		}
	}
	return 0;
}

/* Packs (or unpacks) block only of v (-1: every block) between buf and
 * packed. */
static int vpack(int unpack, void *buf, MPI_Datatype dt, const struct vside *v, int P, int only,
                 void *packed, MPI_Comm comm)
{
	struct side s = v->t;
	int i, rc = MPI_SUCCESS;

	for (i = 0; i < P && rc == MPI_SUCCESS; i++) {
		if (only >= 0 && i != only)
			continue;
		s.bytes = (long long)v->bc[i];
		rc = pack_side(unpack, (char *)buf + (MPI_Aint)v->displs[i] * v->t.extent,
		               v->counts[i], dt, &s, (char *)packed + v->bd[i], comm);
	}
	return rc;
}

/* A v-collective's call to shmcoll, for either form. Its *_sides helper decides whether
 * shmcoll runs it and fills the sides, their byte counts and displacements in vz (st->vz; a
 * non-blocking call then keeps a copy of its own, nb_keep); its *_prep helper sets up in
 * and out, packing what needs it. */
struct vcall {
	size_t *vz;        /* 4 * P: the v-sides' bc and bd */
	struct vside s, r; /* the v-side sent (scatterv, alltoallv) and received (the others) */
	struct side w;     /* this rank's block: sent (allgatherv, gatherv), received (scatterv) */
	const void *in;
	void *out;
	size_t mine;      /* this rank's block's bytes */
	const char *what; /* what failed, when a helper returns an error */
};

/* What this rank sends, count elements of dt at buf (w): buf itself, or packed into
 * buffer 2. */
static int send_block(struct cstate *st, struct nbreq *q, struct vcall *v, const void *buf,
                      int count, MPI_Datatype dt, MPI_Comm comm)
{
	void *p;

	v->in = buf;
	if (v->w.contig || !v->w.bytes)
		return MPI_SUCCESS;
	v->what = "a buffer for packed data";
	if (!(p = call_buf(st, q, 2, (size_t)v->w.bytes)))
		return -ENOMEM;
	v->in = p;
	v->what = "MPI_Pack";
	return pack_side(0, (void *)buf, count, dt, &v->w, p, comm);
}

/* Where shmcoll writes what r receives: recvbuf from r's base when r holds its bytes in
 * order, else buffer 3 (a byte more: shmcoll takes no NULL buffer, even for nothing). */
static int recv_vbuf(struct cstate *st, struct nbreq *q, struct vcall *v, void *recvbuf)
{
	v->out = (char *)recvbuf + v->r.base;
	if (v->r.t.contig)
		return MPI_SUCCESS;
	v->what = "a buffer for packed data";
	return (v->out = call_buf(st, q, 3, v->r.total + 1)) ? MPI_SUCCESS : -ENOMEM;
}

/* After a blocking call's shmcoll part returned rc: r's blocks unpacked from where shmcoll
 * wrote them, if packed. */
static int unpack_recv(struct cstate *st, enum coll c, int rc, void *recvbuf, MPI_Datatype dt,
                       const struct vcall *v, MPI_Comm comm)
{
	if (rc != MPI_SUCCESS || v->r.t.contig)
		return rc;
	if ((rc = vpack(1, recvbuf, dt, &v->r, st->size, -1, v->out, comm)) != MPI_SUCCESS)
		return fail(st, c, "MPI_Unpack", rc);
	return rc;
}

/* Across nodes (blocking only: the non-blocking form goes to PMPI there), the leaders' counts
 * are ints: a call whose bytes, which every rank knows from recvcounts, pass INT_MAX goes to
 * PMPI on every rank. */
static int allgatherv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, const int *recvcounts, const int *displs,
                            MPI_Datatype recvtype)
{
	if (!st)
		return -1;
	v->vz = st->vz;
	if (vside_of(v->vz, st->size, 1, recvtype, recvcounts, displs, &v->r) < 0 ||
	    (st->multi && v->r.total > INT_MAX))
		return -1;
	v->mine = v->r.bc[st->rank];
	if (sendbuf == MPI_IN_PLACE)
		return 0;
	return side_of(sendtype, sendcount, &v->w) < 0 || (size_t)v->w.bytes != v->mine ? -1 : 0;
}

/* A rooted v-call's sides, 0 or -1 for PMPI: side (which: 1 receives, gatherv's; 0 sends,
 * scatterv's) of vtype, counts and displs at the root; w, wcount of wtype, on every rank but an
 * in-place root, whose block the v-side gives. Across nodes (blocking only) the call is
 * always composed: no rank but the root knows the total, and gatherv_multi's and
 * scatterv_multi's messages between leaders go in pieces of at most INT_MAX bytes, so nothing
 * needs it. */
static int vrooted_sides(struct cstate *st, struct vcall *v, struct vside *side, int which,
                         MPI_Datatype vtype, const int *counts, const int *displs, int inplace,
                         MPI_Datatype wtype, int wcount, int root)
{
	int is_root;

	if (!st || root < 0 || root >= st->size)
		return -1;
	v->vz = st->vz;
	is_root = st->rank == root;
	if (is_root && vside_of(v->vz, st->size, which, vtype, counts, displs, side) < 0)
		return -1;
	if (is_root && inplace) {
		v->mine = side->bc[root];
		return 0;
	}
	if (side_of(wtype, wcount, &v->w) < 0 || (is_root && (size_t)v->w.bytes != side->bc[root]))
		return -1;
	v->mine = (size_t)v->w.bytes;
	return 0;
}

static int gatherv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, int sendcount,
                         MPI_Datatype sendtype, const int *recvcounts, const int *displs,
                         MPI_Datatype recvtype, int root)
{
	return vrooted_sides(st, v, &v->r, 1, recvtype, recvcounts, displs, sendbuf == MPI_IN_PLACE,
	                     sendtype, sendcount, root);
}

/* An allgatherv's, or a gatherv's (receives: at the root). In place, this rank's block is
 * already in recvbuf (packed apart if need be): shmcoll's in-place form. */
static int gatherv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                        int sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Datatype recvtype,
                        int receives, MPI_Comm comm)
{
	int rc;

	if (receives && (rc = recv_vbuf(st, q, v, recvbuf)) != MPI_SUCCESS)
		return rc;
	if (!receives || sendbuf != MPI_IN_PLACE)
		return send_block(st, q, v, sendbuf, sendcount, sendtype, comm);
	v->in = (char *)v->out + v->r.bd[st->rank];
	v->what = "MPI_Pack";
	return v->r.t.contig ? MPI_SUCCESS
	                     : vpack(0, recvbuf, recvtype, &v->r, st->size, st->rank, v->out, comm);
}

/* Across nodes: gatherv of the node's blocks to its leader, packed back to back in node order
 * (off, cnt: vz's first 2 * P, free in an allgatherv), into scratch buffer 0; an allgatherv of
 * whole node parts among the leaders (bytes); bcast of all of it in the node; every rank copies
 * each block to where v->out wants it, so recvbuf's gaps between blocks are never written.
 * Where v->out is laid out that way already (blocks back to back in node order: packed and
 * ordered, or a contiguous type whose displacements are so), the stages work in it and
 * nothing is copied; an in-place rank's block, at v->out then, is where its node's gather
 * wants it (shmcoll's in-place form). Unpacking, if r is packed, follows as on one node. */
static int allgatherv_multi(struct cstate *st, struct vcall *v)
{
	size_t *off = v->vz, *cnt = v->vz + st->size, at = 0;
	int P = st->size, first = st->node_start[st->my_node], direct = 1, i, n, rc;
	char *buf = v->out;

	for (i = 0; i < P; i++) {
		off[i] = at;
		cnt[i] = v->r.bc[st->rank_at[i]];
		direct &= v->r.bd[st->rank_at[i]] == at;
		at += cnt[i];
	}
	if (!direct && !(buf = scratch(st, 0, at + 1)))
		return fail(st, C_ALLGATHERV, "scratch buffer", MPI_ERR_NO_MEM);
	rc = shmcoll_gatherv(v->in, v->mine, st->lrank == 0 ? buf : NULL, cnt + first, off + first,
	                     SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLGATHERV, "shmcoll_gatherv", rc);
	if (st->lrank == 0) {
		for (n = 0; n < st->nnodes; n++) {
			size_t end = st->node_start[n + 1] < P ? off[st->node_start[n + 1]] : at;

			st->vc[st->nnodes + n] = (int)off[st->node_start[n]];
			st->vc[n] = (int)(end - off[st->node_start[n]]);
		}
		rc = PMPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, buf, st->vc, st->vc + st->nnodes,
		                     MPI_BYTE, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_ALLGATHERV, "MPI_Allgatherv among leaders", rc);
	}
	rc = shmcoll_bcast(buf, at, SHMCOLL_UINT8, 0, st->shm);
	if (rc < 0)
		return fail(st, C_ALLGATHERV, "shmcoll_bcast", rc);
	if (!direct)
		for (i = 0; i < P; i++)
			if (cnt[i])
				memcpy((char *)v->out + v->r.bd[st->rank_at[i]], buf + off[i],
				       cnt[i]);
	return via_shm(C_ALLGATHERV);
}

EXPORT int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                          MPI_Comm comm)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	int rc;

	if (allgatherv_sides(st, &v, sendbuf, sendcount, sendtype, recvcounts, displs, recvtype) <
	    0)
		return pmpi(C_ALLGATHERV, PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf,
		                                          recvcounts, displs, recvtype, comm));
	rc = gatherv_prep(st, NULL, &v, sendbuf, sendcount, sendtype, recvbuf, recvtype, 1, comm);
	if (rc != MPI_SUCCESS)
		return prep_failed(st, C_ALLGATHERV, v.what, rc);
	if (st->multi)
		rc = v.r.total ? allgatherv_multi(st, &v) : via_shm(C_ALLGATHERV);
	else
		rc = shm_done(st, C_ALLGATHERV, "shmcoll_allgatherv",
		              shmcoll_allgatherv(v.in, v.mine, v.out, v.r.bc, v.r.bd, SHMCOLL_UINT8,
		                                 st->shm));
	return unpack_recv(st, C_ALLGATHERV, rc, recvbuf, recvtype, &v, comm);
}

/* Gatherv and scatterv across nodes. Only the root knows the counts, so the leaders cannot
 * run PMPI's v-collectives (every leader would need every node's total); instead each node
 * other than the root's sends the root one part, and the root's node runs shmcoll's call with
 * the root itself as its root. A part is two messages on the leaders' communicator (or, when
 * the root is not its node's leader, forwarded by that leader on the node's): the node's
 * per-rank byte counts (uint64_t, in local order), then their blocks back to back, in pieces
 * of at most INT_MAX bytes, whose total both ends know from the counts. The helper
 * communicators carry nothing else, so the messages match nothing of the program's. */

/* bytes at buf sent to (send) or received from peer on comm, in pieces of at most INT_MAX. */
static int part_bytes(int send, void *buf, size_t bytes, int peer, MPI_Comm comm)
{
	size_t at, k;
	int rc = MPI_SUCCESS;

	for (at = 0; at < bytes && rc == MPI_SUCCESS; at += k) {
		k = bytes - at < INT_MAX ? bytes - at : INT_MAX;
		rc = send ? PMPI_Send((char *)buf + at, (int)k, MPI_BYTE, peer, 0, comm)
		          : PMPI_Recv((char *)buf + at, (int)k, MPI_BYTE, peer, 0, comm,
		                      MPI_STATUS_IGNORE);
	}
	return rc;
}

/* Sends (send) or receives one part of ns ranks: counts (ns uint64_t, scratch buffer 1 when
 * received), then data (its blocks, scratch buffer 0 when received); *total is their sum. */
static int part_move(struct cstate *st, int send, int ns, uint64_t **counts, char **data,
                     size_t *total, int peer, MPI_Comm comm)
{
	int i, rc;

	if (!send && !(*counts = scratch(st, 1, (size_t)ns * sizeof(uint64_t) + 1)))
		return MPI_ERR_NO_MEM;
	rc = send ? PMPI_Send(*counts, ns * (int)sizeof(uint64_t), MPI_BYTE, peer, 0, comm)
	          : PMPI_Recv(*counts, ns * (int)sizeof(uint64_t), MPI_BYTE, peer, 0, comm,
	                      MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		return rc;
	for (*total = 0, i = 0; i < ns; i++)
		*total += (size_t)(*counts)[i];
	if (!send && !(*data = scratch(st, 0, *total + 1)))
		return MPI_ERR_NO_MEM;
	return part_bytes(send, *data, *total, peer, comm);
}

/* The root's node: shmcoll_gatherv to the root, which passes its recvcounts for the node's
 * ranks (in vz's first 2 * P: the root's r is in the last), so shmcoll finds a rank whose
 * count disagrees (-EPROTO). Every other node: a gather of each rank's count (8 bytes) to
 * the leader, a gatherv of the blocks to it back to back (scratch buffer 0), and the part to
 * the root; the root's node's leader, if not the root, forwards each part in node order.
 * The root takes each part's blocks to where v->out wants them, after comparing the counts
 * with its recvcounts: any that disagrees is MPI_ERR_COUNT on the root, and nothing of that
 * part or those after it is written (each is still received, so no sender waits). */
static int gatherv_multi(struct cstate *st, struct vcall *v, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], is_root = st->rank == root;
	int ns = node_size(st, st->my_node), first = st->node_start[st->my_node], bad = 0;
	int n, l, rc = MPI_SUCCESS;
	size_t *lc = v->vz, *ld = v->vz + st->size, total = 0;
	uint64_t mine = v->mine, *cnt = NULL;
	char *data = NULL;

	if (st->my_node == rnode) {
		if (is_root)
			for (l = 0; l < ns; l++) {
				lc[l] = v->r.bc[st->rank_at[first + l]];
				ld[l] = v->r.bd[st->rank_at[first + l]];
			}
		rc = shmcoll_gatherv(v->in, v->mine, is_root ? v->out : NULL, is_root ? lc : NULL,
		                     is_root ? ld : NULL, SHMCOLL_UINT8, rlocal, st->shm);
		if (rc < 0)
			return fail(st, C_GATHERV, "shmcoll_gatherv", rc);
	} else {
		if (st->lrank == 0 && !(cnt = scratch(st, 1, (size_t)ns * sizeof(uint64_t))))
			return fail(st, C_GATHERV, "scratch buffer", MPI_ERR_NO_MEM);
		rc = shmcoll_gather(&mine, cnt, 1, SHMCOLL_UINT64, 0, st->shm);
		if (rc < 0)
			return fail(st, C_GATHERV, "shmcoll_gather", rc);
		if (st->lrank == 0) {
			for (l = 0; l < ns; l++) {
				lc[l] = (size_t)cnt[l];
				ld[l] = total;
				total += lc[l];
			}
			if (!(data = scratch(st, 0, total + 1)))
				return fail(st, C_GATHERV, "scratch buffer", MPI_ERR_NO_MEM);
		}
		rc = shmcoll_gatherv(v->in, v->mine, data, lc, ld, SHMCOLL_UINT8, 0, st->shm);
		if (rc < 0)
			return fail(st, C_GATHERV, "shmcoll_gatherv", rc);
		if (st->lrank == 0 && (rc = part_move(st, 1, ns, &cnt, &data, &total, rnode,
		                                      st->leaders)) != MPI_SUCCESS)
			return fail(st, C_GATHERV, "a node's part to the root", rc);
		return via_shm(C_GATHERV);
	}
	for (n = 0; n < st->nnodes; n++) {
		if (n == rnode || (!is_root && st->lrank != 0))
			continue;
		rc = part_move(st, 0, node_size(st, n), &cnt, &data, &total,
		               rlocal && is_root ? 0 : n,
		               rlocal && is_root ? st->node : st->leaders);
		if (rc == MPI_SUCCESS && !is_root)
			rc = part_move(st, 1, node_size(st, n), &cnt, &data, &total, rlocal,
			               st->node);
		if (rc != MPI_SUCCESS)
			return fail(st, C_GATHERV, "a node's part to the root", rc);
		if (!is_root)
			continue;
		for (l = 0; l < node_size(st, n); l++)
			bad |= cnt[l] != v->r.bc[st->rank_at[st->node_start[n] + l]];
		for (l = 0, total = 0; !bad && l < node_size(st, n); l++) {
			memcpy((char *)v->out + v->r.bd[st->rank_at[st->node_start[n] + l]],
			       data + total, (size_t)cnt[l]);
			total += (size_t)cnt[l];
		}
	}
	return bad ? fail(st, C_GATHERV, "a count other than the root's recvcounts", MPI_ERR_COUNT)
	           : via_shm(C_GATHERV);
}

EXPORT int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                       MPI_Comm comm)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	int is_root, rc;

	if (gatherv_sides(st, &v, sendbuf, sendcount, sendtype, recvcounts, displs, recvtype,
	                  root) < 0)
		return pmpi(C_GATHERV, PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf,
		                                    recvcounts, displs, recvtype, root, comm));
	is_root = st->rank == root;
	rc = gatherv_prep(st, NULL, &v, sendbuf, sendcount, sendtype, recvbuf, recvtype, is_root,
	                  comm);
	if (rc != MPI_SUCCESS)
		return prep_failed(st, C_GATHERV, v.what, rc);
	if (st->multi)
		rc = gatherv_multi(st, &v, root);
	else
		rc = shm_done(st, C_GATHERV, "shmcoll_gatherv",
		              shmcoll_gatherv(v.in, v.mine, v.out, is_root ? v.r.bc : NULL,
		                              is_root ? v.r.bd : NULL, SHMCOLL_UINT8, root,
		                              st->shm));
	return is_root ? unpack_recv(st, C_GATHERV, rc, recvbuf, recvtype, &v, comm) : rc;
}

static int scatterv_sides(struct cstate *st, struct vcall *v, const int *sendcounts,
                          const int *displs, MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, int root)
{
	return vrooted_sides(st, v, &v->s, 0, sendtype, sendcounts, displs, recvbuf == MPI_IN_PLACE,
	                     recvtype, recvcount, root);
}

/* The root's blocks from sendbuf, or packed into buffer 2; this rank's block into recvbuf,
 * or buffer 3 to unpack from. In place, the root's block stays where it is in what it
 * sends. */
static int scatterv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                         MPI_Datatype sendtype, void *recvbuf, int root, MPI_Comm comm)
{
	void *p;
	int rc;

	if (st->rank == root) {
		v->in = (const char *)sendbuf + v->s.base;
		if (!v->s.t.contig) {
			v->what = "a buffer for packed data";
			if (!(p = call_buf(st, q, 2, v->s.total + 1)))
				return -ENOMEM;
			v->in = p;
			v->what = "MPI_Pack";
			if ((rc = vpack(0, (void *)sendbuf, sendtype, &v->s, st->size, -1, p,
			                comm)) != MPI_SUCCESS)
				return rc;
		}
		if (recvbuf == MPI_IN_PLACE) {
			v->out = (char *)v->in + v->s.bd[root];
			return MPI_SUCCESS;
		}
	}
	v->out = recvbuf;
	if (v->w.contig)
		return MPI_SUCCESS;
	v->what = "a buffer for packed data";
	return (v->out = call_buf(st, q, 3, (size_t)v->w.bytes + 1)) ? MPI_SUCCESS : -ENOMEM;
}

/* gatherv_multi backwards: the root sends every other node its part, in node order (through
 * its node's leader if it is not that leader), the blocks packed back to back from v->in into
 * scratch buffer 0; each such node's leader scatters its part in the node with the counts it
 * came with. Then the root's node scatters from the root with its sendcounts for the node's
 * ranks (in vz's last 2 * P: the root's s is in the first). shmcoll_scatterv compares every
 * rank's recvcount with its count (-EPROTO on that rank), in every node. */
static int scatterv_multi(struct cstate *st, struct vcall *v, int root)
{
	int rnode = st->node_of[root], rlocal = st->lrank_of[root], is_root = st->rank == root;
	int ns = node_size(st, st->my_node), first = st->node_start[st->my_node];
	int n, l, rc = MPI_SUCCESS;
	size_t *lc = v->vz + 2 * (size_t)st->size, *ld = lc + st->size, total = 0;
	uint64_t *cnt = NULL;
	char *data = NULL;

	for (n = 0; n < st->nnodes && st->my_node == rnode; n++) {
		int nn = node_size(st, n), at = st->node_start[n];

		if (n == rnode || (!is_root && st->lrank != 0))
			continue;
		if (is_root) {
			if (!(cnt = scratch(st, 1, (size_t)nn * sizeof(uint64_t))))
				return fail(st, C_SCATTERV, "scratch buffer", MPI_ERR_NO_MEM);
			for (total = 0, l = 0; l < nn; l++)
				total += (size_t)(cnt[l] = v->s.bc[st->rank_at[at + l]]);
			if (!(data = scratch(st, 0, total + 1)))
				return fail(st, C_SCATTERV, "scratch buffer", MPI_ERR_NO_MEM);
			for (total = 0, l = 0; l < nn; l++) {
				memcpy(data + total,
				       (const char *)v->in + v->s.bd[st->rank_at[at + l]],
				       (size_t)cnt[l]);
				total += (size_t)cnt[l];
			}
			rc = part_move(st, 1, nn, &cnt, &data, &total, rlocal ? 0 : n,
			               rlocal ? st->node : st->leaders);
		} else {
			rc = part_move(st, 0, nn, &cnt, &data, &total, rlocal, st->node);
			if (rc == MPI_SUCCESS)
				rc = part_move(st, 1, nn, &cnt, &data, &total, n, st->leaders);
		}
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTERV, "the root's part to a node", rc);
	}
	if (st->my_node == rnode) {
		if (is_root)
			for (l = 0; l < ns; l++) {
				lc[l] = v->s.bc[st->rank_at[first + l]];
				ld[l] = v->s.bd[st->rank_at[first + l]];
			}
		rc = shmcoll_scatterv(v->in, is_root ? lc : NULL, is_root ? ld : NULL, v->out,
		                      v->mine, SHMCOLL_UINT8, rlocal, st->shm);
		return shm_done(st, C_SCATTERV, "shmcoll_scatterv", rc);
	}
	if (st->lrank == 0) {
		rc = part_move(st, 0, ns, &cnt, &data, &total, rnode, st->leaders);
		if (rc != MPI_SUCCESS)
			return fail(st, C_SCATTERV, "the root's part to a node", rc);
		for (total = 0, l = 0; l < ns; l++) {
			lc[l] = (size_t)cnt[l];
			ld[l] = total;
			total += lc[l];
		}
	}
	rc = shmcoll_scatterv(data, lc, ld, v->out, v->mine, SHMCOLL_UINT8, 0, st->shm);
	return shm_done(st, C_SCATTERV, "shmcoll_scatterv", rc);
}

EXPORT int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                        MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                        int root, MPI_Comm comm)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	int is_root, rc;

	if (scatterv_sides(st, &v, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
	                   root) < 0)
		return pmpi(C_SCATTERV, PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype,
		                                      recvbuf, recvcount, recvtype, root, comm));
	is_root = st->rank == root;
	if ((rc = scatterv_prep(st, NULL, &v, sendbuf, sendtype, recvbuf, root, comm)) !=
	    MPI_SUCCESS)
		return prep_failed(st, C_SCATTERV, v.what, rc);
	if (st->multi)
		rc = scatterv_multi(st, &v, root);
	else
		rc = shm_done(st, C_SCATTERV, "shmcoll_scatterv",
		              shmcoll_scatterv(v.in, is_root ? v.s.bc : NULL,
		                               is_root ? v.s.bd : NULL, v.out, v.mine,
		                               SHMCOLL_UINT8, root, st->shm));
	if (rc == MPI_SUCCESS && recvbuf != MPI_IN_PLACE && !v.w.contig &&
	    (rc = pack_side(1, recvbuf, recvcount, recvtype, &v.w, v.out, comm)) != MPI_SUCCESS)
		return fail(st, C_SCATTERV, "MPI_Unpack", rc);
	return rc;
}

static int alltoallv_sides(struct cstate *st, struct vcall *v, const void *sendbuf,
                           const int *sendcounts, const int *sdispls, MPI_Datatype sendtype,
                           const int *recvcounts, const int *rdispls, MPI_Datatype recvtype)
{
	if (!st || st->multi)
		return -1;
	v->vz = st->vz;
	if (vside_of(v->vz, st->size, 1, recvtype, recvcounts, rdispls, &v->r) < 0 ||
	    (sendbuf != MPI_IN_PLACE &&
	     vside_of(v->vz, st->size, 0, sendtype, sendcounts, sdispls, &v->s) < 0))
		return -1;
	return 0;
}

/* What this rank sends from sendbuf, or packed into buffer 2; what it receives into
 * recvbuf, or buffer 3. In place, what it sends is recvbuf as the receive describes it;
 * shmcoll has no in-place form, so it is packed apart first, back to back. */
static int alltoallv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                          MPI_Datatype sendtype, void *recvbuf, MPI_Datatype recvtype,
                          MPI_Comm comm)
{
	int P = st->size, i, rc;
	void *p;

	if (sendbuf == MPI_IN_PLACE) {
		v->s = v->r;
		v->s.bc = v->vz;
		v->s.bd = v->vz + P;
		v->s.total = 0;
		for (i = 0; i < P; i++) {
			v->s.bc[i] = v->r.bc[i];
			v->s.bd[i] = v->s.total;
			v->s.total += v->s.bc[i];
		}
		v->s.t.contig = 0;
		sendbuf = recvbuf;
		sendtype = recvtype;
	}
	v->in = (const char *)sendbuf + v->s.base;
	if (!v->s.t.contig) {
		v->what = "a buffer for packed data";
		if (!(p = call_buf(st, q, 2, v->s.total + 1)))
			return -ENOMEM;
		v->in = p;
		v->what = "MPI_Pack";
		if ((rc = vpack(0, (void *)sendbuf, sendtype, &v->s, P, -1, p, comm)) !=
		    MPI_SUCCESS)
			return rc;
	}
	return recv_vbuf(st, q, v, recvbuf);
}

EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                         MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                         const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	int rc;

	if (alltoallv_sides(st, &v, sendbuf, sendcounts, sdispls, sendtype, recvcounts, rdispls,
	                    recvtype) < 0)
		return pmpi(C_ALLTOALLV,
		            PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
		                           recvcounts, rdispls, recvtype, comm));
	if ((rc = alltoallv_prep(st, NULL, &v, sendbuf, sendtype, recvbuf, recvtype, comm)) !=
	    MPI_SUCCESS)
		return prep_failed(st, C_ALLTOALLV, v.what, rc);
	rc = shm_done(
	    st, C_ALLTOALLV, "shmcoll_alltoallv",
	    shmcoll_alltoallv(v.in, v.s.bc, v.s.bd, v.out, v.r.bc, v.r.bd, SHMCOLL_UINT8, st->shm));
	return unpack_recv(st, C_ALLTOALLV, rc, recvbuf, recvtype, &v, comm);
}

EXPORT int MPI_Barrier(MPI_Comm comm)
{
	struct cstate *st = state_of(comm);

	if (!st)
		return pmpi(C_BARRIER, PMPI_Barrier(comm));
	if (st->multi)
		return barrier_multi(st);
	return shm_done(st, C_BARRIER, "shmcoll_barrier", shmcoll_barrier(st->shm));
}

/* Finalize */

/* Rank 0 of MPI_COMM_WORLD prints the counts summed over all ranks. */
static void print_stats(void)
{
	unsigned long long mine[2 * C_COUNT], sum[2 * C_COUNT];
	int c, rank = -1;

	for (c = 0; c < C_COUNT; c++) {
		mine[c] = atomic_load_explicit(&n_shm[c], memory_order_relaxed);
		mine[C_COUNT + c] = atomic_load_explicit(&n_pmpi[c], memory_order_relaxed);
	}
	if (PMPI_Reduce(mine, sum, 2 * C_COUNT, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
	                MPI_COMM_WORLD) != MPI_SUCCESS ||
	    PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || rank != 0)
		return;
	if (env.off)
		fprintf(stderr, "shmcoll-mpi: off (SHMCOLL_MPI=0): every call went to PMPI\n");
	for (c = 0; c < C_COUNT; c++)
		fprintf(stderr, "shmcoll-mpi: %s %llu via shmcoll, %llu fallback\n", coll_names[c],
		        sum[c], sum[C_COUNT + c]);
}

/* The first state still cached, NULL when none is. */
static struct cstate *first_live(void)
{
	struct cstate *st;

	pthread_mutex_lock(&list_lock);
	st = live;
	pthread_mutex_unlock(&list_lock);
	return st;
}

/* Deletes the attribute of every communicator still cached (its callback
 * unlinks and releases the state), then the keyval. */
static void release_all(void)
{
	int kv = atomic_load_explicit(&keyval, memory_order_acquire);
	struct cstate *st;

	if (kv == MPI_KEYVAL_INVALID)
		return;
	for (st = first_live(); st; st = first_live()) {
		if (PMPI_Comm_delete_attr(st->comm, kv) == MPI_SUCCESS && first_live() != st)
			continue;
		/* The callback did not run: release the state here. */
		unlink_state(st);
		release(st);
	}
	atomic_store_explicit(&keyval, MPI_KEYVAL_INVALID, memory_order_relaxed);
	PMPI_Comm_free_keyval(&kv);
}

/* Non-blocking collectives. MPI_Iallreduce ... MPI_Ibarrier, MPI_Iallgatherv ...
 * MPI_Ialltoallv, MPI_Ireduce_scatter, MPI_Iscan and MPI_Iexscan on a communicator within a
 * node start shmcoll's non-blocking call and hand the caller a generalized request
 * (MPI_Grequest_start), which the MPI's own MPI_Wait, MPI_Test, MPI_Waitall ... accept. An
 * MPI completes a generalized request only when someone calls MPI_Grequest_complete: the
 * interposer does, from its wrappers of the wait and test calls. MPI's progress rule (every
 * outstanding operation of the process moves while it waits or tests on any) holds there
 * by one loop: each round tests the calls of ours (shmcoll's test moves every shmcoll
 * communicator of the process, in every wait) and completes those done, then tests the
 * caller's requests with PMPI (which moves the MPI's own engine, so a native message a peer
 * waits for moves too); a round in which nothing completed yields, and after many sleeps
 * 50 us. No wait blocks inside the MPI while a call of ours is outstanding. Everything a call needs
 * after its start (packed buffers, a logical op's input, counts and displacements as shmcoll reads
 * them, where to unpack) belongs to its request; the request is freed by the MPI's free callback.
 * The path is decided as for the blocking calls, from what every rank agrees on (MPI_Iexscan with a
 * logical op goes to PMPI, as MPI_Exscan does); across nodes, and for the LOC ops, the calls go to
 * PMPI. A program that never starts one pays one atomic load per wait or test. */

/* A call in flight. */
struct nbreq {
	struct nbreq *prev, *next; /* on the list of those not yet complete */
	MPI_Request req;           /* the generalized request the caller holds */
	shmcoll_request *sreq;     /* shmcoll's call; NULL once it is over */
	pthread_t owner;           /* the thread that started it */
	int src;                   /* shmcoll's result, once its test said complete */
	struct cstate *st;
	enum coll c;
	const char *fn;
	int rc; /* the MPI result, for the query callback */
	/* After shmcoll's call: unpack nblocks blocks of ucount utype elements from packed
	 * to ubuf (utype dup'ed here when derived), or, a v-collective's, uv's blocks; and
	 * move what after says (an in-place result shmcoll left elsewhere). */
	void *ubuf;
	int ucount, nblocks, udup;
	MPI_Datatype utype;
	struct side us;
	struct vside uv; /* counts NULL: not a v-collective's; else its arrays are in vz */
	void *packed;
	struct move after;
	void *tmp; /* what this rank sends, packed or made 0/1 */
	/* A v-collective's or reduce_scatter's counts and displacements, which shmcoll reads
	 * until completion (4 * P size_t, nb_keep), then uv's counts and displs (2 * P ints:
	 * MPI says the caller's stay unchanged until then; a copy costs little). */
	size_t *vz;
};

static pthread_mutex_t nb_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nbreq *nb_head;
static atomic_int nb_live; /* calls not complete: zero keeps the wait wrappers cheap */

static int nb_query(void *extra, MPI_Status *status)
{
	struct nbreq *q = extra;

	/* A collective's status is empty. */
	PMPI_Status_set_elements(status, MPI_BYTE, 0);
	PMPI_Status_set_cancelled(status, 0);
	status->MPI_SOURCE = MPI_ANY_SOURCE;
	status->MPI_TAG = MPI_ANY_TAG;
	return q->rc;
}

static int nb_free(void *extra)
{
	free(extra);
	return MPI_SUCCESS;
}

static int nb_cancel(void *extra, int complete)
{
	(void)extra;
	(void)complete;
	return MPI_SUCCESS; /* a collective cannot be cancelled: it completes */
}

/* A call failed after its start: said on stderr, the node's communicator aborted (the
 * peers' calls fail now) and left to PMPI from then on, as a blocking call's failure does;
 * the error reaches the caller through the request. */
static int nb_failed(struct nbreq *q, const char *what, int rc)
{
	struct cstate *st = q->st;

	if (rc < 0 && *shmcoll_last_error(st->shm))
		fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s\n", coll_names[q->c], st->rank,
		        shmcoll_last_error(st->shm));
	else
		fprintf(stderr, "shmcoll-mpi: %s on rank %d: %s failed (%d)\n", coll_names[q->c],
		        st->rank, what, rc);
	shmcoll_comm_abort(st->shm);
	st->usable = 0;
	return MPI_ERR_OTHER;
}

/* The end of q: its buffers freed, its result mrc (an MPI code) for the query callback,
 * and the request complete. */
static void nb_complete(struct nbreq *q, int mrc)
{
	q->sreq = NULL;
	if (q->udup)
		PMPI_Type_free(&q->utype);
	q->udup = 0;
	free(q->packed);
	free(q->tmp);
	free(q->vz);
	q->packed = q->tmp = NULL;
	q->vz = NULL;
	q->rc = mrc;
	PMPI_Grequest_complete(q->req);
	put_state(q->st);
	q->st = NULL;
}

/* shmcoll's call is over with rc: the unpacking, then the completion. */
static void nb_finish(struct nbreq *q, int rc)
{
	int mrc = MPI_SUCCESS;

	if (rc < 0) {
		mrc = nb_failed(q, q->fn, rc);
	} else {
		if (q->ubuf && q->uv.counts)
			mrc = vpack(1, q->ubuf, q->utype, &q->uv, q->st->size, -1, q->packed,
			            q->st->comm);
		else if (q->ubuf)
			mrc = pack_blocks(1, q->ubuf, q->ucount, q->utype, &q->us, q->nblocks,
			                  q->packed, q->st->comm);
		if (mrc != MPI_SUCCESS)
			mrc = nb_failed(q, "MPI_Unpack", mrc);
		else
			do_move(&q->after);
	}
	nb_complete(q, mrc);
}

static void nb_put_back(struct nbreq *q)
{
	pthread_mutex_lock(&nb_lock);
	q->prev = NULL;
	q->next = nb_head;
	if (nb_head)
		nb_head->prev = q;
	nb_head = q;
	atomic_fetch_add(&nb_live, 1);
	pthread_mutex_unlock(&nb_lock);
}

/* Whether r is in reqs[0 .. n-1]. */
static int nb_among(MPI_Request r, int n, const MPI_Request *reqs)
{
	int i;

	for (i = 0; reqs && i < n; i++)
		if (reqs[i] == r)
			return 1;
	return 0;
}

/* One round of the progress rule for the calls of ours: each one this thread started, or
 * that is among the n requests the caller waits on or tests, tested once (the first test
 * that finds its call pending also moves every shmcoll communicator of the process, so
 * the others, another thread's included, move too), and those done completed. Another
 * thread's calls are left to it: it may be inside a call on their communicator. Whether any
 * completed. */
static int nb_progress(int n, const MPI_Request *reqs)
{
	struct nbreq *q, *next, *done = NULL;
	pthread_t me = pthread_self();
	int fin, any = 0;

	if (!atomic_load_explicit(&nb_live, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&nb_lock);
	for (q = nb_head; q; q = next) {
		next = q->next;
		if (!pthread_equal(q->owner, me) && !nb_among(q->req, n, reqs))
			continue;
		q->src = shmcoll_test(&q->sreq, &fin, NULL);
		if (!fin && q->src >= 0)
			continue;
		if (q->prev)
			q->prev->next = q->next;
		else
			nb_head = q->next;
		if (q->next)
			q->next->prev = q->prev;
		atomic_fetch_sub(&nb_live, 1);
		q->next = done;
		done = q;
	}
	pthread_mutex_unlock(&nb_lock);
	for (q = done; q; q = next) {
		next = q->next;
		nb_finish(q, q->src);
		any = 1;
	}
	return any;
}

/* After a round of a wait: *idle counts rounds in which nothing completed. Such a round
 * yields (ranks may outnumber the CPUs: no round spins without letting a peer run), and
 * after 2000 of them (a few ms) each sleeps 50 us. */
static void nb_idle(unsigned *idle, int moved)
{
	const struct timespec nap = {0, 50000};

	if (moved) {
		*idle = 0;
		return;
	}
	if (++*idle < 2000)
		sched_yield();
	else
		nanosleep(&nap, NULL);
}

/* Whether any call of ours is outstanding: then no wait may block inside the MPI. */
static int nb_outstanding(void)
{
	return atomic_load_explicit(&nb_live, memory_order_acquire) != 0;
}

/* A new call of c on st (its generalized request started): NULL with the failure
 * reported (the node's communicator aborted, so no peer waits for this rank). */
static struct nbreq *nb_new(struct cstate *st, enum coll c, const char *fn)
{
	struct nbreq *q = calloc(1, sizeof(*q));
	int rc;

	if (!q) {
		fail(st, c, "memory for a request", -ENOMEM);
		return NULL;
	}
	q->st = st;
	q->c = c;
	q->fn = fn;
	q->owner = pthread_self();
	rc = PMPI_Grequest_start(nb_query, nb_free, nb_cancel, q, &q->req);
	if (rc != MPI_SUCCESS) {
		free(q);
		fail(st, c, "MPI_Grequest_start", rc);
		return NULL;
	}
	atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
	return q;
}

/* After shmcoll's start returned rc (q->sreq set, or NULL for a call with nothing to
 * move): the request goes to the caller. */
static int nb_started(struct nbreq *q, int rc, MPI_Request *request)
{
	MPI_Comm comm = q->st->comm;
	enum coll c = q->c;

	*request = q->req;
	if (rc < 0 || !q->sreq) {
		/* Complete at once: MPI_Wait returns the error, if any. */
		nb_finish(q, rc);
		if (rc < 0)
			PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
		return rc < 0 ? MPI_ERR_OTHER : via_shm(c);
	}
	nb_put_back(q);
	return via_shm(q->c);
}

/* The unpacking q owes at completion: nblocks blocks of count dt elements into buf. */
static int nb_unpack_to(struct nbreq *q, void *buf, int count, MPI_Datatype dt,
                        const struct side *s, int nblocks)
{
	int ni, na, nd, comb;

	q->ubuf = buf;
	q->ucount = count;
	q->nblocks = nblocks;
	q->us = *s;
	q->utype = dt;
	/* The caller may free a derived type once the call started. */
	if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS)
		return MPI_ERR_TYPE;
	if (comb != MPI_COMBINER_NAMED) {
		if (PMPI_Type_dup(dt, &q->utype) != MPI_SUCCESS)
			return MPI_ERR_TYPE;
		q->udup = 1;
	}
	return MPI_SUCCESS;
}

/* Buffer bytes of q's own (for packed data), or NULL. */
static void *nb_buf(void **slot, long long bytes)
{
	*slot = malloc(bytes > 0 ? (size_t)bytes : 1);
	return *slot;
}

/* Buffer i of q (call_buf): 2 is tmp, 3 packed. */
static void *nb_slot(struct nbreq *q, int i, size_t bytes)
{
	return nb_buf(i == 2 ? &q->tmp : &q->packed, (long long)bytes);
}

/* q's vz (4 * P size_t, then 2 * P ints), allocated on first use; NULL: no memory. */
static size_t *nb_vz(struct nbreq *q)
{
	size_t P = (size_t)q->st->size;

	if (!q->vz)
		q->vz = malloc(4 * P * sizeof(*q->vz) + 2 * P * sizeof(int));
	return q->vz;
}

/* A v-side's byte counts and displacements (if filled) moved from from to the same place
 * in to. */
static void keep_vside(struct vside *s, const size_t *from, size_t *to, size_t P)
{
	size_t at;

	if (!s->bc)
		return;
	at = (size_t)(s->bc - from);
	memcpy(to + at, s->bc, 2 * P * sizeof(*to)); /* bc, then bd */
	s->bc = to + at;
	s->bd = s->bc + P;
}

/* A v-collective's sides were decided in st->vz, which the communicator's next call may
 * overwrite before this one completes: their arrays go to q's own, and the call is
 * prepared there. */
static int nb_keep(struct nbreq *q, struct vcall *v)
{
	size_t P = (size_t)q->st->size, *from = v->vz;

	v->what = "memory for the counts";
	if (!(v->vz = nb_vz(q)))
		return -ENOMEM;
	keep_vside(&v->s, from, v->vz, P);
	keep_vside(&v->r, from, v->vz, P);
	return MPI_SUCCESS;
}

/* The unpacking q owes at completion: every block of v's receive side into buf (dt), from
 * q->packed; the side's counts and displs copied into q (after nb_keep). */
static int nb_unpack_v(struct nbreq *q, struct vcall *v, void *buf, MPI_Datatype dt)
{
	size_t P = (size_t)q->st->size;
	int *ints = (int *)(void *)(q->vz + 4 * P);

	memcpy(ints, v->r.counts, P * sizeof(int));
	memcpy(ints + P, v->r.displs, P * sizeof(int));
	q->uv = v->r;
	q->uv.counts = ints;
	q->uv.displs = ints + P;
	v->what = "MPI_Type_dup";
	return nb_unpack_to(q, buf, 0, dt, &v->r.t, 1);
}

/* A call that could not be set up after its request started: completed with the error,
 * nothing written to the caller's buffers, and the node's communicator aborted (the peers
 * that started theirs fail now). */
static int nb_setup_failed(struct nbreq *q, const char *what, int rc, MPI_Request *request)
{
	MPI_Comm comm = q->st->comm;

	*request = q->req;
	nb_complete(q, nb_failed(q, what, rc));
	PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
	return MPI_ERR_OTHER;
}

EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	struct cstate *st = NULL;
	struct nbreq *q;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	int rc = 0;

	if (!is_loc(op) && count >= 0 && red_args(datatype, op, &sdt, &sop) == 0)
		st = state_of(comm);
	if (!st || st->multi)
		return pmpi(C_IALLREDUCE,
		            PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request));
	if (!(q = nb_new(st, C_IALLREDUCE, "shmcoll_iallreduce")))
		return MPI_ERR_NO_MEM;
	if (count && is_logical(op) && st->size > 1) {
		if (!nb_buf(&q->tmp, (long long)count * (long long)shmcoll_dtype_size(sdt)))
			return nb_setup_failed(q, "memory for the logical op's input", -ENOMEM,
			                       request);
		to_logical(q->tmp, in, (size_t)count, sdt);
		in = q->tmp;
	}
	if (count)
		rc = shmcoll_iallreduce(in, recvbuf, (size_t)count, sdt, sop, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, int root, MPI_Comm comm, MPI_Request *request)
{
	struct cstate *st = NULL;
	const void *in = sendbuf;
	void *out = NULL;
	struct nbreq *q;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	int rc = 0;

	if (!is_loc(op) && count >= 0 && red_args(datatype, op, &sdt, &sop) == 0)
		st = state_of(comm);
	if (!st || st->multi || root < 0 || root >= st->size ||
	    (sendbuf == MPI_IN_PLACE && st->rank != root))
		return pmpi(C_IREDUCE, PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root,
		                                    comm, request));
	if (!(q = nb_new(st, C_IREDUCE, "shmcoll_ireduce")))
		return MPI_ERR_NO_MEM;
	if (st->rank == root) {
		out = recvbuf;
		if (sendbuf == MPI_IN_PLACE)
			in = recvbuf;
	}
	if (count && is_logical(op) && st->size > 1) {
		if (!nb_buf(&q->tmp, (long long)count * (long long)shmcoll_dtype_size(sdt)))
			return nb_setup_failed(q, "memory for the logical op's input", -ENOMEM,
			                       request);
		to_logical(q->tmp, in, (size_t)count, sdt);
		in = q->tmp;
	}
	if (count)
		rc = shmcoll_ireduce(in, out, (size_t)count, sdt, sop, root, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                      MPI_Request *request)
{
	struct side s;
	struct cstate *st = side_of(datatype, count, &s) < 0 ? NULL : state_of(comm);
	struct nbreq *q;
	void *p = buffer;
	int rc = 0;

	if (!st || st->multi || root < 0 || root >= st->size)
		return pmpi(C_IBCAST, PMPI_Ibcast(buffer, count, datatype, root, comm, request));
	if (!(q = nb_new(st, C_IBCAST, "shmcoll_ibcast")))
		return MPI_ERR_NO_MEM;
	if (s.bytes && !s.contig) {
		if (!(p = nb_buf(&q->packed, s.bytes)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		if (st->rank == root)
			rc = pack_side(0, buffer, count, datatype, &s, p, comm);
		else
			rc = nb_unpack_to(q, buffer, count, datatype, &s, 1);
		if (rc != MPI_SUCCESS)
			return nb_setup_failed(q, "MPI_Pack", rc, request);
	}
	if (s.bytes)
		rc = shmcoll_ibcast(p, (size_t)s.bytes, SHMCOLL_UINT8, root, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	struct side w, r;
	int inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
	struct cstate *st =
	    block_sides(sendbuf, sendcount, sendtype, recvcount, recvtype, &w, &r) < 0
	        ? NULL
	        : state_of(comm);
	const void *in = sendbuf;
	char *out = recvbuf;
	struct nbreq *q;

	if (!st || st->multi)
		return pmpi(C_IALLGATHER, PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
		                                          recvcount, recvtype, comm, request));
	if (!(q = nb_new(st, C_IALLGATHER, "shmcoll_iallgather")))
		return MPI_ERR_NO_MEM;
	if (!r.bytes)
		return nb_started(q, 0, request);
	if (!r.contig) {
		if (!(out = nb_buf(&q->packed, r.bytes * st->size)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = nb_unpack_to(q, recvbuf, recvcount, recvtype, &r, st->size);
	}
	if (rc == MPI_SUCCESS && inplace) {
		in = out + (size_t)st->rank * (size_t)r.bytes;
		if (!r.contig)
			rc = pack_side(0,
			               (char *)recvbuf + (MPI_Aint)st->rank * recvcount * r.extent,
			               recvcount, recvtype, &r, (void *)in, comm);
	} else if (rc == MPI_SUCCESS && !w.contig) {
		if (!(in = nb_buf(&q->tmp, w.bytes)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = pack_side(0, (void *)sendbuf, sendcount, sendtype, &w, (void *)in, comm);
	}
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, "MPI_Pack", rc, request);
	rc = shmcoll_iallgather(in, out, (size_t)r.bytes, SHMCOLL_UINT8, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                     MPI_Request *request)
{
	struct cstate *st = NULL;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	const void *in = sendbuf;
	char *out = recvbuf;
	struct nbreq *q;
	size_t bytes;
	int rc = 0;

	if (!is_loc(op) && recvcount >= 0 && red_args(datatype, op, &sdt, &sop) == 0)
		st = state_of(comm);
	if (!st || st->multi)
		return pmpi(C_IREDUCE_SCATTER_BLOCK,
		            PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op,
		                                       comm, request));
	if (!(q = nb_new(st, C_IREDUCE_SCATTER_BLOCK, "shmcoll_ireduce_scatter")))
		return MPI_ERR_NO_MEM;
	if (!recvcount)
		return nb_started(q, 0, request);
	bytes = shmcoll_dtype_size(sdt) * (size_t)recvcount;
	if (sendbuf == MPI_IN_PLACE) {
		/* The input is recvbuf; shmcoll leaves the result at the rank's own block, and
		 * MPI wants it at the start: moved down at completion. */
		in = recvbuf;
		out = (char *)recvbuf + (size_t)st->rank * bytes;
		if (st->rank > 0)
			q->after = (struct move){recvbuf, out, bytes};
	}
	if (is_logical(op) && st->size > 1) {
		if (!nb_buf(&q->tmp, (long long)bytes * st->size))
			return nb_setup_failed(q, "memory for the logical op's input", -ENOMEM,
			                       request);
		to_logical(q->tmp, in, (size_t)recvcount * (size_t)st->size, sdt);
		in = q->tmp;
	}
	rc = shmcoll_ireduce_scatter(in, out, (size_t)recvcount, sdt, sop, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                       int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                       MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	int inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
	struct side w, r;
	const void *in = sendbuf;
	char *out = NULL;
	struct nbreq *q;

	if ((st && st->multi) ||
	    rooted_sides(st, root, sendtype, sendcount, recvtype, recvcount, inplace, &w, &r) < 0)
		return pmpi(C_IGATHER, PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf,
		                                    recvcount, recvtype, root, comm, request));
	if (!(q = nb_new(st, C_IGATHER, "shmcoll_igather")))
		return MPI_ERR_NO_MEM;
	if (!w.bytes)
		return nb_started(q, 0, request);
	if (st->rank == root) {
		out = recvbuf;
		if (!r.contig) {
			if (!(out = nb_buf(&q->packed, r.bytes * st->size)))
				return nb_setup_failed(q, "memory for packed data", -ENOMEM,
				                       request);
			rc = nb_unpack_to(q, recvbuf, recvcount, recvtype, &r, st->size);
		}
		if (inplace)
			in = out + (size_t)root * (size_t)r.bytes;
		if (rc == MPI_SUCCESS && inplace && !r.contig)
			rc = pack_side(0, (char *)recvbuf + (MPI_Aint)root * recvcount * r.extent,
			               recvcount, recvtype, &r, (void *)in, comm);
	}
	if (rc == MPI_SUCCESS && !inplace && !w.contig) {
		if (!(in = nb_buf(&q->tmp, w.bytes)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = pack_side(0, (void *)sendbuf, sendcount, sendtype, &w, (void *)in, comm);
	}
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, "MPI_Pack", rc, request);
	rc = shmcoll_igather(in, out, (size_t)w.bytes, SHMCOLL_UINT8, root, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                        MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	int inplace = recvbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
	struct side r, w;
	const char *in = NULL;
	void *out = inplace ? NULL : recvbuf;
	struct nbreq *q;

	if ((st && st->multi) ||
	    rooted_sides(st, root, recvtype, recvcount, sendtype, sendcount, inplace, &r, &w) < 0)
		return pmpi(C_ISCATTER, PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf,
		                                      recvcount, recvtype, root, comm, request));
	if (!(q = nb_new(st, C_ISCATTER, "shmcoll_iscatter")))
		return MPI_ERR_NO_MEM;
	if (!r.bytes)
		return nb_started(q, 0, request);
	if (st->rank == root) {
		in = sendbuf;
		if (!w.contig) {
			if (!(in = nb_buf(&q->tmp, w.bytes * st->size)))
				return nb_setup_failed(q, "memory for packed data", -ENOMEM,
				                       request);
			rc = pack_blocks(0, (void *)sendbuf, sendcount, sendtype, &w, st->size,
			                 (void *)in, comm);
		}
	}
	if (rc == MPI_SUCCESS && !inplace && !r.contig) {
		if (!(out = nb_buf(&q->packed, r.bytes)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = nb_unpack_to(q, recvbuf, recvcount, recvtype, &r, 1);
	}
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, "MPI_Pack", rc, request);
	if (inplace)
		out = (void *)(in + (size_t)root * (size_t)r.bytes);
	rc = shmcoll_iscatter(in, out, (size_t)r.bytes, SHMCOLL_UINT8, root, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                         int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
	struct side w, r;
	int inplace = sendbuf == MPI_IN_PLACE, rc = MPI_SUCCESS;
	struct cstate *st =
	    block_sides(sendbuf, sendcount, sendtype, recvcount, recvtype, &w, &r) < 0
	        ? NULL
	        : state_of(comm);
	const void *in = inplace ? recvbuf : sendbuf;
	void *out = recvbuf;
	struct nbreq *q;

	if (!st || st->multi)
		return pmpi(C_IALLTOALL, PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf,
		                                        recvcount, recvtype, comm, request));
	if (!(q = nb_new(st, C_IALLTOALL, "shmcoll_ialltoall")))
		return MPI_ERR_NO_MEM;
	if (!r.bytes)
		return nb_started(q, 0, request);
	if (!r.contig) {
		if (!(out = nb_buf(&q->packed, r.bytes * st->size)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = nb_unpack_to(q, recvbuf, recvcount, recvtype, &r, st->size);
	}
	/* In place, what this rank sends is in recvbuf as recvtype: packed apart when that
	 * is not in order, since the result goes elsewhere. */
	if (rc == MPI_SUCCESS && inplace && !r.contig) {
		if (!(in = nb_buf(&q->tmp, r.bytes * st->size)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = pack_blocks(0, recvbuf, recvcount, recvtype, &r, st->size, (void *)in, comm);
	} else if (rc == MPI_SUCCESS && !inplace && !w.contig) {
		if (!(in = nb_buf(&q->tmp, w.bytes * st->size)))
			return nb_setup_failed(q, "memory for packed data", -ENOMEM, request);
		rc = pack_blocks(0, (void *)sendbuf, sendcount, sendtype, &w, st->size, (void *)in,
		                 comm);
	}
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, "MPI_Pack", rc, request);
	rc = shmcoll_ialltoall(in, out, (size_t)r.bytes, SHMCOLL_UINT8, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	struct nbreq *q;

	if (!st || st->multi)
		return pmpi(C_IBARRIER, PMPI_Ibarrier(comm, request));
	if (!(q = nb_new(st, C_IBARRIER, "shmcoll_ibarrier")))
		return MPI_ERR_NO_MEM;
	return nb_started(q, shmcoll_ibarrier(st->shm, &q->sreq), request);
}

/* The v-collectives' and the prefix reductions' non-blocking forms: decided and prepared by
 * their blocking twins' helpers (allgatherv_sides ..., scan_state ...; see "Prefix
 * reductions"), with buffers, counts and displacements of the request's own. The LOC ops go
 * to PMPI: gathering and folding their pairs would be a second step at completion, where
 * the blocking calls' loc_* run it at once. */

EXPORT int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                           const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                           MPI_Comm comm, MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	struct nbreq *q;
	int rc;

	if (!st || st->multi ||
	    allgatherv_sides(st, &v, sendbuf, sendcount, sendtype, recvcounts, displs, recvtype) <
	        0)
		return pmpi(C_IALLGATHERV,
		            PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
		                             displs, recvtype, comm, request));
	if (!(q = nb_new(st, C_IALLGATHERV, "shmcoll_iallgatherv")))
		return MPI_ERR_NO_MEM;
	rc = nb_keep(q, &v);
	if (rc == MPI_SUCCESS)
		rc = gatherv_prep(st, q, &v, sendbuf, sendcount, sendtype, recvbuf, recvtype, 1,
		                  comm);
	if (rc == MPI_SUCCESS && !v.r.t.contig)
		rc = nb_unpack_v(q, &v, recvbuf, recvtype);
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, v.what, rc, request);
	rc = shmcoll_iallgatherv(v.in, v.mine, v.out, v.r.bc, v.r.bd, SHMCOLL_UINT8, st->shm,
	                         &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                        MPI_Comm comm, MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	struct nbreq *q;
	int is_root, rc;

	if (!st || st->multi ||
	    gatherv_sides(st, &v, sendbuf, sendcount, sendtype, recvcounts, displs, recvtype,
	                  root) < 0)
		return pmpi(C_IGATHERV,
		            PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
		                          recvtype, root, comm, request));
	if (!(q = nb_new(st, C_IGATHERV, "shmcoll_igatherv")))
		return MPI_ERR_NO_MEM;
	is_root = st->rank == root;
	rc = nb_keep(q, &v);
	if (rc == MPI_SUCCESS)
		rc = gatherv_prep(st, q, &v, sendbuf, sendcount, sendtype, recvbuf, recvtype,
		                  is_root, comm);
	if (rc == MPI_SUCCESS && is_root && !v.r.t.contig)
		rc = nb_unpack_v(q, &v, recvbuf, recvtype);
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, v.what, rc, request);
	rc = shmcoll_igatherv(v.in, v.mine, v.out, is_root ? v.r.bc : NULL, is_root ? v.r.bd : NULL,
	                      SHMCOLL_UINT8, root, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Iscatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                         MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                         int root, MPI_Comm comm, MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	struct nbreq *q;
	int is_root, rc;

	if (!st || st->multi ||
	    scatterv_sides(st, &v, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
	                   root) < 0)
		return pmpi(C_ISCATTERV,
		            PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
		                           recvcount, recvtype, root, comm, request));
	if (!(q = nb_new(st, C_ISCATTERV, "shmcoll_iscatterv")))
		return MPI_ERR_NO_MEM;
	is_root = st->rank == root;
	rc = nb_keep(q, &v);
	if (rc == MPI_SUCCESS)
		rc = scatterv_prep(st, q, &v, sendbuf, sendtype, recvbuf, root, comm);
	if (rc == MPI_SUCCESS && recvbuf != MPI_IN_PLACE && !v.w.contig) {
		v.what = "MPI_Type_dup";
		rc = nb_unpack_to(q, recvbuf, recvcount, recvtype, &v.w, 1);
	}
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, v.what, rc, request);
	rc = shmcoll_iscatterv(v.in, is_root ? v.s.bc : NULL, is_root ? v.s.bd : NULL, v.out,
	                       v.mine, SHMCOLL_UINT8, root, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                          MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                          const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                          MPI_Request *request)
{
	struct cstate *st = state_of(comm);
	struct vcall v = {0};
	struct nbreq *q;
	int rc;

	if (alltoallv_sides(st, &v, sendbuf, sendcounts, sdispls, sendtype, recvcounts, rdispls,
	                    recvtype) < 0)
		return pmpi(C_IALLTOALLV,
		            PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
		                            recvcounts, rdispls, recvtype, comm, request));
	if (!(q = nb_new(st, C_IALLTOALLV, "shmcoll_ialltoallv")))
		return MPI_ERR_NO_MEM;
	rc = nb_keep(q, &v);
	if (rc == MPI_SUCCESS)
		rc = alltoallv_prep(st, q, &v, sendbuf, sendtype, recvbuf, recvtype, comm);
	if (rc == MPI_SUCCESS && !v.r.t.contig)
		rc = nb_unpack_v(q, &v, recvbuf, recvtype);
	if (rc != MPI_SUCCESS)
		return nb_setup_failed(q, v.what, rc, request);
	rc = shmcoll_ialltoallv(v.in, v.s.bc, v.s.bd, v.out, v.r.bc, v.r.bd, SHMCOLL_UINT8, st->shm,
	                        &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                               MPI_Request *request)
{
	struct rcall c = {0};
	struct cstate *st;
	struct nbreq *q;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	int rc = 0;

	if (!(st = rs_state(recvcounts, datatype, op, comm, 1, &sdt, &sop)))
		return pmpi(C_IREDUCE_SCATTER, PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts,
		                                                    datatype, op, comm, request));
	if (!(q = nb_new(st, C_IREDUCE_SCATTER, "shmcoll_ireduce_scatterv")))
		return MPI_ERR_NO_MEM;
	if ((rc = rs_prep(st, q, &c, sendbuf, recvbuf, recvcounts, sdt, op)) != MPI_SUCCESS)
		return nb_setup_failed(q, c.what, rc, request);
	q->after = c.after;
	if (c.total)
		rc = shmcoll_ireduce_scatterv(c.in, c.out, c.counts, sdt, sop, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

/* MPI_Iscan and MPI_Iexscan (ex). */
static int iscan(int ex, const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                 MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	enum coll c = ex ? C_IEXSCAN : C_ISCAN;
	struct rcall call = {0};
	struct cstate *st;
	struct nbreq *q;
	shmcoll_dtype sdt;
	shmcoll_op sop;
	int rc = 0;

	if (!(st = scan_state(ex, count, datatype, op, comm, &sdt, &sop)))
		return pmpi(c,
		            ex ? PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, request)
		               : PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, request));
	if (!(q = nb_new(st, c, ex ? "shmcoll_iexscan" : "shmcoll_iscan")))
		return MPI_ERR_NO_MEM;
	if (!count)
		return nb_started(q, 0, request);
	if ((rc = scan_prep(st, q, &call, sendbuf, recvbuf, count, sdt, op)) != MPI_SUCCESS)
		return nb_setup_failed(q, call.what, rc, request);
	q->after = call.after;
	rc = ex ? shmcoll_iexscan(call.in, call.out, (size_t)count, sdt, sop, st->shm, &q->sreq)
	        : shmcoll_iscan(call.in, call.out, (size_t)count, sdt, sop, st->shm, &q->sreq);
	return nb_started(q, rc, request);
}

EXPORT int MPI_Iscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	return iscan(0, sendbuf, recvbuf, count, datatype, op, comm, request);
}

EXPORT int MPI_Iexscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
	return iscan(1, sendbuf, recvbuf, count, datatype, op, comm, request);
}

/* The waits and tests. A test: one round of nb_progress, then the MPI's test. A wait: while
 * any call of ours is outstanding, rounds of nb_progress and the MPI's test until it says
 * done; with none, the MPI's own wait. */

EXPORT int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
	unsigned idle = 0;
	int rc, flag, moved;

	while (request && nb_outstanding()) {
		moved = nb_progress(1, request);
		rc = PMPI_Test(request, &flag, status);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Wait(request, status);
}

EXPORT int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
	nb_progress(request ? 1 : 0, request);
	return PMPI_Test(request, flag, status);
}

EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
	unsigned idle = 0;
	int rc, flag, moved;

	while (requests && nb_outstanding()) {
		moved = nb_progress(count, requests);
		rc = PMPI_Testall(count, requests, &flag, statuses);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Waitall(count, requests, statuses);
}

EXPORT int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[])
{
	nb_progress(count, requests);
	return PMPI_Testall(count, requests, flag, statuses);
}

EXPORT int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status)
{
	unsigned idle = 0;
	int rc, flag, moved;

	while (requests && nb_outstanding()) {
		moved = nb_progress(count, requests);
		rc = PMPI_Testany(count, requests, index, &flag, status);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Waitany(count, requests, index, status);
}

EXPORT int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status)
{
	nb_progress(count, requests);
	return PMPI_Testany(count, requests, index, flag, status);
}

EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
	unsigned idle = 0;
	int rc, moved;

	while (requests && nb_outstanding()) {
		moved = nb_progress(incount, requests);
		rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
		if (rc != MPI_SUCCESS || *outcount != 0)
			return rc;
		nb_idle(&idle, moved);
	}
	return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                        MPI_Status statuses[])
{
	nb_progress(incount, requests);
	return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

EXPORT int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
	nb_progress(1, &request);
	return PMPI_Request_get_status(request, flag, status);
}

/* Whether r is one of ours not complete yet. */
static int nb_pending(MPI_Request r)
{
	struct nbreq *q;

	if (r == MPI_REQUEST_NULL || !nb_outstanding())
		return 0;
	pthread_mutex_lock(&nb_lock);
	for (q = nb_head; q && q->req != r; q = q->next)
		;
	pthread_mutex_unlock(&nb_lock);
	return q != NULL;
}

/* A freed request's call must still complete: ours is completed first. */
EXPORT int MPI_Request_free(MPI_Request *request)
{
	unsigned idle = 0;

	while (request && nb_pending(*request))
		nb_idle(&idle, nb_progress(1, request));
	return PMPI_Request_free(request);
}

EXPORT int MPI_Finalize(void)
{
	pthread_once(&env_once, read_env);
	if (env.stats)
		print_stats();
	atomic_store_explicit(&finalized, 1, memory_order_relaxed);
	release_all();
	return PMPI_Finalize();
}
