/* loc.c - MPI_MINLOC and MPI_MAXLOC, which shmcoll has no op for: the
 * pairs gathered through shmcoll and folded here, by the blocking calls. */
#include <errno.h>
#include <string.h>

#include "mpi/shmcoll_mpi.h"

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

int is_loc(MPI_Op op)
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
int loc_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
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
int loc_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm)
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
int loc_reduce_scatter(enum coll c, const void *sendbuf, void *recvbuf, const int *counts, int n,
                       MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
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
int loc_scan(int ex, const void *sendbuf, void *recvbuf, int count, MPI_Datatype dt, MPI_Op op,
             MPI_Comm comm)
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
