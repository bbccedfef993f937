"""from shmcoll import MPI: what mpi4py 4 has of communicators, groups, infos, error handlers,
requests, statuses and messages beyond mpi4py 3.1 (Isendrecv, Request.Get_status_all ...,
pickled handles, the instance forms of Compare ...), and where the two differ the answer of
the version shmcoll/_api.py chose (SHMCOLL_MPI4PY): checked on every rank, at any P."""

from shmcoll import MPI, _api


def ring(comm):
    r, P = comm.rank, comm.size
    return (r + 1) % P, (r - 1) % P


# ---- error classes ----


def test_error_classes_have_open_mpi_numbers(comm):
    # Open MPI's mpi.h: RMA_FLAVOR is 70 and RMA_SHARED 71 (they were the other way round).
    assert (MPI.ERR_RMA_FLAVOR, MPI.ERR_RMA_SHARED) == (70, 71)
    # MPI 4's classes, which mpi4py 4 names, with Open MPI 5's numbers.
    assert (MPI.ERR_PROC_ABORTED, MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING,
            MPI.ERR_REVOKED, MPI.ERR_SESSION, MPI.ERR_VALUE_TOO_LARGE,
            MPI.ERR_ERRHANDLER) == (74, 75, 76, 77, 78, 79, 80)
    assert MPI.Get_error_class(MPI.ERR_ERRHANDLER) == MPI.ERR_ERRHANDLER
    assert MPI.Get_error_string(MPI.ERR_ERRHANDLER).startswith("MPI_ERR_ERRHANDLER: ")
    e = MPI.Exception(MPI.ERR_SESSION)
    assert e.Get_error_class() == MPI.ERR_SESSION and e.error_string.startswith(
        "MPI_ERR_SESSION: ")
    assert max(MPI.ERR_ERRHANDLER, MPI.ERR_RMA_SHARED) < MPI.ERR_LASTCODE
