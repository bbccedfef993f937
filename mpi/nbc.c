/* nbc.c - the non-blocking collectives, MPI_Iallreduce ... MPI_Iexscan:
 * each decided as its blocking form is, started in shmcoll and handed to the
 * caller as a generalized request (mpi/request.c). */
#include <errno.h>

#include "mpi/shmcoll_mpi.h"

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
 * their blocking twins' helpers (allgatherv_sides ... in mpi/vcoll.c, scan_state ... in
 * mpi/coll.c), with buffers, counts and displacements of the request's own. The LOC ops go
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
