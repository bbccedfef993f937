/* colls.h - the collectives libshmcoll-mpi.so intercepts, in the order and
 * with the names of its SHMCOLL_MPI_STATS=1 lines; shared with the test that
 * reads those lines (tests/mpi/mpi_check.c). */
#ifndef SHMCOLL_MPI_COLLS_H
#define SHMCOLL_MPI_COLLS_H

enum coll {
	C_ALLREDUCE,
	C_REDUCE,
	C_BCAST,
	C_ALLGATHER,
	C_REDUCE_SCATTER_BLOCK,
	C_GATHER,
	C_SCATTER,
	C_ALLTOALL,
	C_BARRIER,
	C_REDUCE_SCATTER,
	C_SCAN,
	C_EXSCAN,
	C_ALLGATHERV,
	C_GATHERV,
	C_SCATTERV,
	C_ALLTOALLV,
	C_COUNT
};

static const char *const coll_names[C_COUNT] = {
    "MPI_Allreduce", "MPI_Reduce",  "MPI_Bcast",      "MPI_Allgather", "MPI_Reduce_scatter_block",
    "MPI_Gather",    "MPI_Scatter", "MPI_Alltoall",   "MPI_Barrier",   "MPI_Reduce_scatter",
    "MPI_Scan",      "MPI_Exscan",  "MPI_Allgatherv", "MPI_Gatherv",   "MPI_Scatterv",
    "MPI_Alltoallv",
};

#endif
