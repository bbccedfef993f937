/* coll.c - the blocking collectives of equal counts: MPI_Allreduce,
 * MPI_Reduce, MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Gather, MPI_Scatter, MPI_Alltoall, MPI_Barrier, MPI_Scan and
 * MPI_Exscan. */
#include <errno.h>
#include <string.h>

#include "mpi/shmcoll_mpi.h"

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
int block_sides(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int recvcount,
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
int rooted_sides(const struct cstate *st, int root, MPI_Datatype own_t, int own_n,
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

EXPORT int MPI_Barrier(MPI_Comm comm)
{
	struct cstate *st = state_of(comm);

	if (!st)
		return pmpi(C_BARRIER, PMPI_Barrier(comm));
	if (st->multi)
		return barrier_multi(st);
	return shm_done(st, C_BARRIER, "shmcoll_barrier", shmcoll_barrier(st->shm));
}

/* Prefix reductions and reduce_scatter with counts: a reduction of a mapped
 * type and op, on one node (across nodes the scans go to PMPI: a node's
 * ranks need not be consecutive, so no composition keeps the prefix order
 * cheaply; reduce_scatter is composed, reduce_scatterv_multi). Every rank
 * decides alike: the datatype, op and communicator are the same on all of
 * them. These and the v-collectives (mpi/vcoll.c) are decided and prepared by
 * helpers their non-blocking forms (MPI_Iscan ..., mpi/nbc.c) share: a
 * *_state or *_sides helper takes the path from the
 * arguments alone, a *_prep helper sets up what shmcoll reads and writes,
 * in buffers call_buf gives. */

/* comm's state for a scan (ex: an exscan) of count elements of dt under op, with sdt and
 * sop filled; NULL: PMPI. MPI_Exscan with a logical op goes to PMPI: its rank 1 gets rank
 * 0's input unchanged, which the 0-or-1 inputs cannot give (see logical_in). The LOC ops
 * fail red_args: the blocking calls take them to loc_scan first. */
struct cstate *scan_state(int ex, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
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
int scan_prep(struct cstate *st, struct nbreq *q, struct rcall *c, const void *sendbuf,
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
