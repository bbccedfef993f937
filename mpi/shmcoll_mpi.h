/* shmcoll_mpi.h - libshmcoll-mpi.so, a PMPI interposer: preloaded into an
 * unmodified MPI program, it runs the program's collectives on
 * intra-communicators through shmcoll and hands everything else to PMPI.
 *
 *   mpirun -n P env LD_PRELOAD=.../libshmcoll-mpi.so ./program
 *
 * One set of sources, built once per MPI (mpi/meson.build): the handles and
 * MPI_IN_PLACE are each MPI's own, so a build works only under the MPI it was
 * built for. This header is what the interposer's files share (their layout:
 * docs/ARCHITECTURE.md, "The MPI interposer"); no file outside mpi/ includes it.
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
 * MPI's own waits and tests accept (mpi/request.c),
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
 * shmcoll inside each node, PMPI among the leaders. Where every node has as
 * many ranks, the nodes' shmcoll communicators are also joined into one of
 * shmcoll's own over all of them (lead.c), with PMPI's point-to-point among
 * the leaders as its transport, and the calls it covers run through it
 * (hier.c says which); the rest is composed here. A node's ranks need not
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
#ifndef SHMCOLL_MPI_H
#define SHMCOLL_MPI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

	/* multi, every node as large: shmcoll over all of comm, each node's shm joined with
	 * PMPI among the leaders as the leaders' transport (lead.c); else NULL. */
	shmcoll_comm *wide;
	struct lead_net *lead_net; /* its transport's state */
};

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

/* What moves once shmcoll's call is over: bytes from src to dst (an in-place result shmcoll
 * leaves elsewhere than MPI wants it; a logical scan's rank 0 input, its result). */
struct move {
	char *dst;
	const char *src;
	size_t bytes;
};

static inline void do_move(const struct move *m)
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

/* A v-side: per rank i, counts[i] elements of a datatype at displs[i]
 * (in extents) of buf; n its bytes. */
struct vside {
	struct side t; /* of one element */
	const int *counts, *displs;
	size_t *bc, *bd; /* bytes: counts, and displacements in the buffer moved */
	size_t total;    /* the packed form's bytes */
	MPI_Aint base;   /* in order: where, from the caller's buffer, bd counts from */
};

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

/* The environment, read once (load_env). */
struct env {
	int off, stats, debug;
	int split, cyclic; /* SHMCOLL_MPI_NODE_SPLIT */
};
extern struct env env;
extern atomic_int finalized;
extern atomic_uint generation; /* bumped whenever a state is deleted */

/* module.c */
void load_env(void);
void link_state(struct cstate *st);
__attribute__((format(printf, 1, 2))) void debug(const char *fmt, ...);
int pmpi(enum coll c, int rc);
int via_shm(enum coll c);
void release(struct cstate *st);
void put_state(struct cstate *st);
int get_keyval(void);
int fail(struct cstate *st, enum coll c, const char *what, int rc);
int shm_done(struct cstate *st, enum coll c, const char *fn, int rc);
int prep_failed(struct cstate *st, enum coll c, const char *what, int rc);

/* comm.c */
struct cstate *state_of(MPI_Comm comm);
void *scratch(struct cstate *st, int i, size_t bytes);

/* datatype.c */
int red_args(MPI_Datatype dt, MPI_Op op, shmcoll_dtype *sdt, shmcoll_op *sop);
int side_of(MPI_Datatype dt, int count, struct side *s);
int pack_side(int unpack, void *buf, int count, MPI_Datatype dt, const struct side *s, void *packed,
              MPI_Comm comm);
int pack_blocks(int unpack, void *buf, int count, MPI_Datatype dt, const struct side *s, int n,
                void *packed, MPI_Comm comm);
int is_logical(MPI_Op op);
void to_logical(void *dst, const void *src, size_t n, shmcoll_dtype sdt);
const void *logical_in(struct cstate *st, enum coll c, const void *in, size_t n, shmcoll_dtype sdt);
int vside_of(size_t *vz, int P, int which, MPI_Datatype dt, const int *counts, const int *displs,
             struct vside *v);
int vpack(int unpack, void *buf, MPI_Datatype dt, const struct vside *v, int P, int only,
          void *packed, MPI_Comm comm);

/* loc.c */
int is_loc(MPI_Op op);
int loc_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm);
int loc_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm);
int loc_reduce_scatter(enum coll c, const void *sendbuf, void *recvbuf, const int *counts, int n,
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm);
int loc_scan(int ex, const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
             MPI_Comm comm);

/* lead.c: st->wide. Create: collective over comm (multi, every node of max_node ranks),
 * 0 or shmcoll's error (its message in shmcoll_last_error(NULL)). Rank: a rank of comm's
 * rank in st->wide (node-major). */
int wide_create(struct cstate *st);
void wide_destroy(struct cstate *st);
int wide_rank(const struct cstate *st, int rank);

/* hier.c */
int allreduce_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                    MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop);
int reduce_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                 MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop, int root, size_t bytes);
int bcast_multi(struct cstate *st, void *buf, int root, size_t bytes);
int barrier_multi(struct cstate *st);
int fits(long long a, long long b, long long c);
int allgather_multi(struct cstate *st, const void *own, void *recvbuf, size_t b);
int reduce_scatter_multi(struct cstate *st, const void *in, void *out, int count, MPI_Datatype dt,
                         MPI_Op op, shmcoll_dtype sdt, shmcoll_op sop);
int gather_multi(struct cstate *st, const void *own, void *recvbuf, size_t b, int root);
int scatter_multi(struct cstate *st, const void *sendbuf, void *own, size_t b, int root);
int alltoall_multi(struct cstate *st, const void *in, void *recvbuf, size_t b);
int reduce_scatterv_multi(struct cstate *st, const struct rcall *c, MPI_Datatype dt, MPI_Op op,
                          shmcoll_dtype sdt, shmcoll_op sop);
int allgatherv_multi(struct cstate *st, struct vcall *v);
int gatherv_multi(struct cstate *st, struct vcall *v, int root);
int scatterv_multi(struct cstate *st, struct vcall *v, int root);

/* coll.c */
int block_sides(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
                MPI_Datatype recvtype, struct side *w, struct side *r);
int rooted_sides(const struct cstate *st, int root, MPI_Datatype own_t, int own_n,
                 MPI_Datatype root_t, int root_n, int root_in_place, struct side *own,
                 struct side *all);
struct cstate *scan_state(int ex, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                          shmcoll_dtype *sdt, shmcoll_op *sop);
int scan_prep(struct cstate *st, struct nbreq *q, struct rcall *c, const void *sendbuf,
              void *recvbuf, int count, shmcoll_dtype sdt, MPI_Op op);

/* vcoll.c */
struct cstate *rs_state(const int *recvcounts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int nb,
                        shmcoll_dtype *sdt, shmcoll_op *sop);
int rs_prep(struct cstate *st, struct nbreq *q, struct rcall *c, const void *sendbuf, void *recvbuf,
            const int *recvcounts, shmcoll_dtype sdt, MPI_Op op);
int allgatherv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, int sendcount,
                     MPI_Datatype sendtype, const int *recvcounts, const int *displs,
                     MPI_Datatype recvtype);
int gatherv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, int sendcount,
                  MPI_Datatype sendtype, const int *recvcounts, const int *displs,
                  MPI_Datatype recvtype, int root);
int gatherv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                 int sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Datatype recvtype,
                 int receives, MPI_Comm comm);
int scatterv_sides(struct cstate *st, struct vcall *v, const int *sendcounts, const int *displs,
                   MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   int root);
int scatterv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                  MPI_Datatype sendtype, void *recvbuf, int root, MPI_Comm comm);
int alltoallv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, const int *sendcounts,
                    const int *sdispls, MPI_Datatype sendtype, const int *recvcounts,
                    const int *rdispls, MPI_Datatype recvtype);
int alltoallv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                   MPI_Datatype sendtype, void *recvbuf, MPI_Datatype recvtype, MPI_Comm comm);

/* request.c */
void *call_buf(struct cstate *st, struct nbreq *q, int i, size_t bytes);
struct nbreq *nb_new(struct cstate *st, enum coll c, const char *fn);
int nb_started(struct nbreq *q, int rc, MPI_Request *request);
int nb_unpack_to(struct nbreq *q, void *buf, int count, MPI_Datatype dt, const struct side *s,
                 int nblocks);
void *nb_buf(void **slot, long long bytes);
size_t *nb_vz(struct nbreq *q);
int nb_keep(struct nbreq *q, struct vcall *v);
int nb_unpack_v(struct nbreq *q, struct vcall *v, void *buf, MPI_Datatype dt);
int nb_setup_failed(struct nbreq *q, const char *what, int rc, MPI_Request *request);

#endif
