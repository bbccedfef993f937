/* colls.h - the collectives libshmcoll-mpi.so intercepts, in the order and
 * with the names of its SHMCOLL_MPI_STATS=1 lines, and the size limit of its
 * LOC reductions; shared with the test that reads those lines and holds the
 * interposer to them (tests/mpi/mpi_check.c). */
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
	C_IALLREDUCE,
	C_IREDUCE,
	C_IBCAST,
	C_IALLGATHER,
	C_IREDUCE_SCATTER_BLOCK,
	C_IGATHER,
	C_ISCATTER,
	C_IALLTOALL,
	C_IBARRIER,
	C_IALLGATHERV,
	C_IGATHERV,
	C_ISCATTERV,
	C_IALLTOALLV,
	C_IREDUCE_SCATTER,
	C_ISCAN,
	C_IEXSCAN,
	C_COUNT
};

static const char *const coll_names[C_COUNT] = {
    "MPI_Allreduce",
    "MPI_Reduce",
    "MPI_Bcast",
    "MPI_Allgather",
    "MPI_Reduce_scatter_block",
    "MPI_Gather",
    "MPI_Scatter",
    "MPI_Alltoall",
    "MPI_Barrier",
    "MPI_Reduce_scatter",
    "MPI_Scan",
    "MPI_Exscan",
    "MPI_Allgatherv",
    "MPI_Gatherv",
    "MPI_Scatterv",
    "MPI_Alltoallv",
    "MPI_Iallreduce",
    "MPI_Ireduce",
    "MPI_Ibcast",
    "MPI_Iallgather",
    "MPI_Ireduce_scatter_block",
    "MPI_Igather",
    "MPI_Iscatter",
    "MPI_Ialltoall",
    "MPI_Ibarrier",
    "MPI_Iallgatherv",
    "MPI_Igatherv",
    "MPI_Iscatterv",
    "MPI_Ialltoallv",
    "MPI_Ireduce_scatter",
    "MPI_Iscan",
    "MPI_Iexscan",
};

/* A MINLOC or MAXLOC reduction runs through shmcoll, on a communicator
 * within a node, while the pairs one rank gathers (the communicator's size
 * times the most pairs a rank gets, times the pair type's extent) are at
 * most LOC_MAX_BYTES(holes) bytes, holes saying whether the pair type has
 * padding (its size is less than its extent); larger ones go to PMPI. The
 * limits are where the MPI catches up, measured on two ranks
 * (docs/ARCHITECTURE.md): pairs without holes the MPIs reduce about as
 * fast as any type, and by 8 KiB gathered their own path is as quick as
 * gathering P blocks and folding them; pairs with holes go through their
 * datatype engines, which Open MPI's catches up with by 128 KiB to 1 MiB,
 * and MPICH 4.0's not by 8 MiB (some ten times slower at every size), so
 * there the bound is on the scratch memory. Shared with the test, which
 * expects the same; mpi.h comes first (MPICH is its macro). */
#define LOC_MAX_DENSE ((size_t)4 << 10)
#ifdef MPICH
#define LOC_MAX_HOLES ((size_t)16 << 20)
#else
#define LOC_MAX_HOLES ((size_t)256 << 10)
#endif
#define LOC_MAX_BYTES(holes) ((holes) ? LOC_MAX_HOLES : LOC_MAX_DENSE)

/* The C layouts of the LOC ops' pair types (MPI_FLOAT_INT ... MPI_2INT, and the Fortran
 * pairs as C's float and double), as the interposer folds them and the test reads them. */
struct float_int {
	float v;
	int k;
};
struct double_int {
	double v;
	int k;
};
struct long_int {
	long v;
	int k;
};
struct int_int {
	int v, k;
};
struct short_int {
	short v;
	int k;
};
struct long_double_int {
	long double v;
	int k;
};
struct float_float {
	float v, k;
};
struct double_double {
	double v, k;
};

#endif
