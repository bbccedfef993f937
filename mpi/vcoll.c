/* vcoll.c - the blocking collectives with a count per rank:
 * MPI_Reduce_scatter, MPI_Allgatherv, MPI_Gatherv, MPI_Scatterv and
 * MPI_Alltoallv, and the helpers that decide and prepare them for their
 * non-blocking forms too. */
#include <errno.h>
#include <limits.h>

#include "mpi/shmcoll_mpi.h"

/* MPI_Reduce_scatter is decided and prepared like the prefix reductions (mpi/coll.c), the
 * v-collectives as below. */

/* comm's state for MPI_Reduce_scatter with these arguments, sdt and sop filled; NULL:
 * PMPI, also for a negative count (erroneous: PMPI says so; every rank sees the same
 * counts). The LOC ops fail red_args, as in scan_state. Across nodes only the blocking form
 * (nb 0) is composed, and only while the vector's elements, the leaders' counts' sum, fit
 * an int: every rank knows them from recvcounts. */
struct cstate *rs_state(const int *recvcounts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm, int nb,
                        shmcoll_dtype *sdt, shmcoll_op *sop)
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
int rs_prep(struct cstate *st, struct nbreq *q, struct rcall *c, const void *sendbuf, void *recvbuf,
            const int *recvcounts, shmcoll_dtype sdt, MPI_Op op)
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
int allgatherv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, int sendcount,
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

int gatherv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, int sendcount,
                  MPI_Datatype sendtype, const int *recvcounts, const int *displs,
                  MPI_Datatype recvtype, int root)
{
	return vrooted_sides(st, v, &v->r, 1, recvtype, recvcounts, displs, sendbuf == MPI_IN_PLACE,
	                     sendtype, sendcount, root);
}

/* An allgatherv's, or a gatherv's (receives: at the root). In place, this rank's block is
 * already in recvbuf (packed apart if need be): shmcoll's in-place form. */
int gatherv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
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

int scatterv_sides(struct cstate *st, struct vcall *v, const int *sendcounts, const int *displs,
                   MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   int root)
{
	return vrooted_sides(st, v, &v->s, 0, sendtype, sendcounts, displs, recvbuf == MPI_IN_PLACE,
	                     recvtype, recvcount, root);
}

/* The root's blocks from sendbuf, or packed into buffer 2; this rank's block into recvbuf,
 * or buffer 3 to unpack from. In place, the root's block stays where it is in what it
 * sends. */
int scatterv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
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

int alltoallv_sides(struct cstate *st, struct vcall *v, const void *sendbuf, const int *sendcounts,
                    const int *sdispls, MPI_Datatype sendtype, const int *recvcounts,
                    const int *rdispls, MPI_Datatype recvtype)
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
int alltoallv_prep(struct cstate *st, struct nbreq *q, struct vcall *v, const void *sendbuf,
                   MPI_Datatype sendtype, void *recvbuf, MPI_Datatype recvtype, MPI_Comm comm)
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
