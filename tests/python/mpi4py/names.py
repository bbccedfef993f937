"""mpi4py's names: error classes, their strings and exceptions, constants, null handles,
Info, and what a communicator's attributes say.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()

for name in ("SUCCESS", "ERR_BUFFER", "ERR_COUNT", "ERR_TYPE", "ERR_TAG", "ERR_COMM",
             "ERR_RANK", "ERR_REQUEST", "ERR_ROOT", "ERR_GROUP", "ERR_OP", "ERR_TOPOLOGY",
             "ERR_DIMS", "ERR_ARG", "ERR_UNKNOWN", "ERR_TRUNCATE", "ERR_OTHER", "ERR_INTERN",
             "ERR_IN_STATUS", "ERR_PENDING", "ERR_INFO", "ERR_KEYVAL", "ERR_LASTCODE"):
    code = getattr(MPI, name)
    print("rank %d: %s %d %r" % (rank, name, code, MPI.Get_error_string(code)
                                 if code != MPI.ERR_LASTCODE else ""))
e = MPI.Exception(MPI.ERR_ROOT)
print("rank %d: exception %s %r class %d code %d %s" % (
    rank, e, e, e.Get_error_class(), e.Get_error_code(), isinstance(e, RuntimeError)))
try:
    comm.Bcast(bytearray(1), root=comm.Get_size())
except MPI.Exception as err:
    print("rank %d: bad root raises class %s" % (rank, MPI.Get_error_string(
        err.Get_error_class())))
try:
    MPI.COMM_NULL.Get_size()
except MPI.Exception as err:
    print("rank %d: COMM_NULL raises %s" % (rank, err.Get_error_class()))
try:
    MPI.GROUP_NULL.Get_rank()
except MPI.Exception as err:
    print("rank %d: GROUP_NULL raises %s" % (rank, err.Get_error_class()))

print("rank %d: consts %s" % (rank, [MPI.ANY_SOURCE, MPI.ANY_TAG, MPI.PROC_NULL, MPI.ROOT,
                                    MPI.IDENT, MPI.CONGRUENT, MPI.SIMILAR, MPI.UNEQUAL,
                                    MPI.THREAD_SINGLE, MPI.THREAD_MULTIPLE, MPI.TAG_UB,
                                    MPI.KEYVAL_INVALID, MPI.COMM_TYPE_SHARED,
                                    MPI.MAX_PROCESSOR_NAME, MPI.MAX_ERROR_STRING,
                                    MPI.MAX_OBJECT_NAME, MPI.BSEND_OVERHEAD]))
print("rank %d: nulls %s" % (rank, [bool(MPI.COMM_NULL), bool(MPI.GROUP_NULL),
                                   bool(MPI.GROUP_EMPTY), bool(MPI.REQUEST_NULL),
                                   bool(MPI.INFO_NULL), bool(MPI.MESSAGE_NULL),
                                   bool(MPI.MESSAGE_NO_PROC), bool(MPI.OP_NULL),
                                   bool(MPI.DATATYPE_NULL), bool(MPI.ERRHANDLER_NULL),
                                   MPI.Comm() == MPI.COMM_NULL, MPI.Group() == MPI.GROUP_NULL,
                                   MPI.Request() == MPI.REQUEST_NULL,
                                   MPI.Message() == MPI.MESSAGE_NULL]))
print("rank %d: thread %d main %s init %s fin %s version %s" % (
    rank, MPI.Query_thread(), MPI.Is_thread_main(), MPI.Is_initialized(), MPI.Is_finalized(),
    MPI.Get_version()))
# MPI.HOST is mpi4py 3's alone: whether the name is there is part of what is compared.
print("rank %d: attrs %s HOST %s" % (rank, [comm.Get_attr(MPI.TAG_UB), comm.Get_attr(MPI.IO),
                                           comm.Get_attr(MPI.WTIME_IS_GLOBAL),
                                           comm.Get_attr(MPI.APPNUM)], hasattr(MPI, "HOST")))
print("rank %d: errhandler return %s" % (rank, comm.Get_errhandler() == MPI.ERRORS_RETURN))
info = MPI.Info.Create()
info["a"] = "1"
info.Set("b", "2")
dup = info.Dup()
dup.Delete("a")
print("rank %d: info %s %d %s %s %s" % (rank, info.items(), info.Get_nkeys(),
                                        info.Get_nthkey(1), dup.items(), info.Get("x")))
info.Free()
print("rank %d: freed info null %s" % (rank, info == MPI.INFO_NULL))
g = MPI.GROUP_EMPTY
print("rank %d: empty group %d %s" % (rank, g.Get_size(), g.Get_rank() == MPI.UNDEFINED))
