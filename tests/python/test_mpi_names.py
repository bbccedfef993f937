"""from shmcoll import MPI: mpi4py's names (constants, predefined objects, the environment
functions, the error classes) and MPI.Status, checked on every rank against the values
Debian's mpi4py (3.1 over Open MPI) has and MPI's rules."""

import errno

import pytest

import shmcoll
from shmcoll import MPI

# Every datatype name mpi4py 3.1 has.
DATATYPES = """DATATYPE_NULL UB LB PACKED BYTE AINT OFFSET COUNT CHAR WCHAR SIGNED_CHAR SHORT INT
LONG LONG_LONG UNSIGNED_CHAR UNSIGNED_SHORT UNSIGNED UNSIGNED_LONG UNSIGNED_LONG_LONG FLOAT
DOUBLE LONG_DOUBLE C_BOOL INT8_T INT16_T INT32_T INT64_T UINT8_T UINT16_T UINT32_T UINT64_T
C_COMPLEX C_FLOAT_COMPLEX C_DOUBLE_COMPLEX C_LONG_DOUBLE_COMPLEX CXX_BOOL CXX_FLOAT_COMPLEX
CXX_DOUBLE_COMPLEX CXX_LONG_DOUBLE_COMPLEX SHORT_INT INT_INT TWOINT LONG_INT FLOAT_INT
DOUBLE_INT LONG_DOUBLE_INT CHARACTER LOGICAL INTEGER REAL DOUBLE_PRECISION COMPLEX
DOUBLE_COMPLEX LOGICAL1 LOGICAL2 LOGICAL4 LOGICAL8 INTEGER1 INTEGER2 INTEGER4 INTEGER8
INTEGER16 REAL2 REAL4 REAL8 REAL16 COMPLEX4 COMPLEX8 COMPLEX16 COMPLEX32 UNSIGNED_INT
SIGNED_SHORT SIGNED_INT SIGNED_LONG SIGNED_LONG_LONG BOOL SINT8_T SINT16_T SINT32_T SINT64_T
F_BOOL F_INT F_FLOAT F_DOUBLE F_COMPLEX F_FLOAT_COMPLEX F_DOUBLE_COMPLEX""".split()

OPS = "OP_NULL MAX MIN SUM PROD LAND BAND LOR BOR LXOR BXOR MAXLOC MINLOC REPLACE NO_OP".split()

# Open MPI's numbers, which Debian's mpi4py shows (tests/python/mpi4py/names.py prints them
# under both).
ERRORS = dict(SUCCESS=0, ERR_BUFFER=1, ERR_COUNT=2, ERR_TYPE=3, ERR_TAG=4, ERR_COMM=5,
              ERR_RANK=6, ERR_REQUEST=7, ERR_ROOT=8, ERR_GROUP=9, ERR_OP=10, ERR_TOPOLOGY=11,
              ERR_DIMS=12, ERR_ARG=13, ERR_UNKNOWN=14, ERR_TRUNCATE=15, ERR_OTHER=16,
              ERR_INTERN=17, ERR_IN_STATUS=18, ERR_PENDING=19, ERR_KEYVAL=36, ERR_NO_MEM=39,
              ERR_INFO=34, ERR_WIN=53, ERR_FILE=30, ERR_LASTCODE=92)


def test_datatypes_and_typedicts():
    for name in DATATYPES:
        assert isinstance(getattr(MPI, name), MPI.Datatype), name
    assert not MPI.DATATYPE_NULL and MPI.DOUBLE
    assert MPI.INT.Get_size() == 4 and MPI.LONG.Get_size() == 8 and MPI.DOUBLE_INT.size == 12
    assert MPI._typedict["i"] is MPI.INT and MPI._typedict["d"] is MPI.DOUBLE
    assert MPI._typedict_c["q"] is MPI.LONG_LONG and MPI._typedict_c["F"] is MPI.C_FLOAT_COMPLEX
    assert MPI._typedict_f["i"] is MPI.INTEGER and MPI._typedict_f["d"] is MPI.DOUBLE_PRECISION
    assert set(MPI._typedict_c) <= set(MPI._typedict)
    assert MPI._typecode(MPI.DOUBLE) == "d" and MPI._typecode(MPI.DATATYPE_NULL) is None


def test_ops_are_the_modules():
    for name in OPS:
        op = getattr(MPI, name)
        assert isinstance(op, MPI.Op) and op is getattr(shmcoll._shmcoll, name), name
    assert not MPI.OP_NULL and MPI.SUM
    assert MPI.MAXLOC((1.0, 3), (2.0, 0)) == (2.0, 0) and MPI.SUM(2, 3) == 5


def test_constants():
    assert MPI.ANY_SOURCE == MPI.ANY_TAG == -1 and MPI.PROC_NULL == -2 and MPI.ROOT == -4
    assert (MPI.IDENT, MPI.CONGRUENT, MPI.SIMILAR, MPI.UNEQUAL) == (0, 1, 2, 3)
    assert (MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED,
            MPI.THREAD_MULTIPLE) == (0, 1, 2, 3)
    assert MPI.UNDEFINED == shmcoll.UNDEFINED and MPI.KEYVAL_INVALID == -1
    assert MPI.TAG_UB == 0 and MPI.COMM_TYPE_SHARED == 0 and MPI.BSEND_OVERHEAD >= 0
    assert MPI.MAX_PROCESSOR_NAME == 256 and MPI.MAX_ERROR_STRING == 256
    assert MPI.MAX_OBJECT_NAME == 64
    for name, value in ERRORS.items():
        assert getattr(MPI, name) == value, name


def test_null_handles():
    assert not MPI.REQUEST_NULL and MPI.Request() == MPI.REQUEST_NULL
    assert MPI.Request() is not MPI.REQUEST_NULL
    assert not MPI.COMM_NULL and MPI.Comm() == MPI.COMM_NULL and MPI.Comm() is not MPI.COMM_NULL
    assert MPI.Intracomm() == MPI.COMM_NULL and MPI.Intercomm() == MPI.COMM_NULL
    assert not MPI.GROUP_NULL and MPI.Group() == MPI.GROUP_NULL
    assert MPI.GROUP_EMPTY and MPI.GROUP_EMPTY.size == 0
    assert MPI.GROUP_EMPTY.rank == MPI.UNDEFINED
    assert not MPI.INFO_NULL and MPI.Info() == MPI.INFO_NULL and MPI.INFO_ENV
    assert not MPI.ERRHANDLER_NULL and MPI.Errhandler() == MPI.ERRHANDLER_NULL
    assert MPI.ERRORS_RETURN and MPI.ERRORS_ARE_FATAL != MPI.ERRORS_RETURN
    assert not MPI.MESSAGE_NULL and MPI.MESSAGE_NO_PROC
    assert MPI.Message() == MPI.MESSAGE_NULL != MPI.MESSAGE_NO_PROC
    assert MPI.BOTTOM is shmcoll._shmcoll.BOTTOM and MPI.IN_PLACE is shmcoll.IN_PLACE
    assert not MPI.WIN_NULL and not MPI.FILE_NULL


def test_environment():
    assert MPI.Is_initialized() and MPI.Is_finalized() in (False, True)  # test_mpi finalizes
    assert MPI.Init_thread(MPI.THREAD_SINGLE) == MPI.THREAD_MULTIPLE
    assert MPI.Query_thread() == MPI.THREAD_MULTIPLE and MPI.Is_thread_main()
    name, version = MPI.get_vendor()
    assert name == "shmcoll" and len(version) == 3 and all(isinstance(v, int) for v in version)
    assert MPI.Get_version() == (3, 1) and "shmcoll" in MPI.Get_library_version()
    assert MPI.Wtick() > 0 and MPI.Wtime() <= MPI.Wtime()
    assert isinstance(MPI.Get_processor_name(), str)
    MPI.Pcontrol(1)
    MPI.Init()  # again: nothing


def test_memory_and_buffers():
    mem = MPI.Alloc_mem(64)
    assert len(mem) == 64 and MPI.Get_address(mem) != 0
    mem[0] = 7
    MPI.Attach_buffer(mem)
    assert MPI.Detach_buffer() is mem
    MPI.Free_mem(mem)
    assert MPI.Get_address(MPI.BOTTOM) == 0
    b = bytearray(b"abcd")
    assert MPI.Get_address(memoryview(b)[2:]) == MPI.Get_address(b) + 2
    assert bytes(MPI.memory(b)[1:3]) == b"bc"
    assert MPI.Aint_add(10, 6) == 16 and MPI.Aint_diff(16, 10) == 6
    assert MPI.Compute_dims(12, 2) == [4, 3] and MPI.Compute_dims(6, [0, 3, 0]) == [2, 3, 1]


def test_pickle_is_mpi4pys():
    data = MPI.pickle.dumps({"a": 1})
    assert MPI.pickle.loads(data) == {"a": 1}
    assert MPI.pickle.loads(b"") is None  # an empty message is None, as in mpi4py


def test_unsupported_features_say_what():
    for call, what in [
        (lambda: MPI.Win.Create(bytearray(8)), "one-sided"),
        (lambda: MPI.Win.Allocate(8), "one-sided"),
        (lambda: MPI.File.Open(MPI.COMM_SELF, "x"), "MPI-IO"),
        (lambda: MPI.Open_port(), "dynamic processes"),
        (lambda: MPI.COMM_SELF.Create_cart([1]), "topologies"),
        (lambda: MPI.COMM_SELF.Create_intercomm(0, MPI.COMM_SELF, 0), "intercommunicators"),
        (lambda: MPI.COMM_SELF.Spawn("x"), "dynamic processes"),
        (lambda: MPI.Grequest.Start(None, None, None), "generalized requests"),
        (lambda: MPI.Intercomm(MPI.COMM_SELF), "intercommunicators"),
    ]:
        with pytest.raises(NotImplementedError, match=what):
            call()


# ---- errors: MPI.Exception is shmcoll.Error ----


def test_exception_from_a_code():
    e = MPI.Exception(MPI.ERR_ARG)
    assert isinstance(e, RuntimeError) and isinstance(e, shmcoll.Error)
    assert e.Get_error_code() == e.Get_error_class() == MPI.ERR_ARG == e.error_class
    assert str(e) == e.Get_error_string() == MPI.Get_error_string(MPI.ERR_ARG)
    assert str(e) == "MPI_ERR_ARG: invalid argument of some other kind"
    assert repr(e) == "MPI.Exception(13)" and int(e) == 13 and e == MPI.ERR_ARG and e
    assert MPI.Get_error_class(MPI.ERR_TRUNCATE) == MPI.ERR_TRUNCATE
    assert MPI.Get_error_string(MPI.SUCCESS) == "MPI_SUCCESS: no errors"


@pytest.mark.parametrize("err, msg, cls", [
    (errno.EINVAL, "shmcoll_send: dest 5 out of range 0..1", "ERR_RANK"),
    (errno.EINVAL, "Bcast: root 7 is not a rank (0 .. 3)", "ERR_ROOT"),
    (errno.EINVAL, "shmcoll_recv: tag -3 out of range 0..2147483647", "ERR_TAG"),
    (errno.EINVAL, "shmcoll_allreduce: op BAND is not defined on dtype float32", "ERR_OP"),
    (errno.EINVAL, "the communicator was freed (COMM_NULL)", "ERR_COMM"),
    (errno.EINVAL, "something else", "ERR_ARG"),
    (errno.EMSGSIZE, "the message was longer", "ERR_TRUNCATE"),
    (errno.ETIMEDOUT, "rank 1 did not come", "ERR_OTHER"),
    (errno.EOWNERDEAD, "rank 1 died", "ERR_OTHER"),
    (errno.ECANCELED, "aborted", "ERR_OTHER"),
    (errno.EPROTO, "mismatched calls", "ERR_OTHER"),
    (errno.ENOTSUP, "across nodes", "ERR_UNSUPPORTED_OPERATION"),
])
def test_errno_to_class(err, msg, cls):
    e = shmcoll.Error(err, msg)
    assert e.Get_error_class() == getattr(MPI, cls)
    assert e.errno == err and msg in str(e)  # still the OSError it was


def test_raised_errors_have_their_class(comm):
    with pytest.raises(MPI.Exception) as e:
        comm.Send(bytearray(1), dest=comm.size)
    assert e.value.Get_error_class() == MPI.ERR_RANK
    with pytest.raises(MPI.Exception) as e:
        MPI.COMM_NULL.Get_size()
    assert e.value.Get_error_class() == MPI.ERR_COMM
    with pytest.raises(MPI.Exception) as e:
        MPI.GROUP_NULL.Get_size()
    assert e.value.Get_error_class() == MPI.ERR_GROUP
    with pytest.raises(MPI.Exception) as e:
        MPI.INFO_NULL.Get_nkeys()
    assert e.value.Get_error_class() == MPI.ERR_INFO


# ---- MPI.Status ----


def test_status_fields_and_copies():
    s = MPI.Status()
    assert (s.Get_source(), s.Get_tag(), s.Get_error()) == (MPI.ANY_SOURCE, MPI.ANY_TAG, 0)
    assert s.Get_count(MPI.BYTE) == 0 and s.Get_elements(MPI.BYTE) == 0
    assert s.Is_cancelled() is False and s.count == 0
    s.Set_source(1)
    s.Set_tag(2)
    s.Set_error(MPI.ERR_ARG)
    s.Set_cancelled(True)
    assert (s.source, s.tag, s.error, s.cancelled) == (1, 2, MPI.ERR_ARG, True)
    c = MPI.Status(s)
    assert c == s and c is not s and (c.source, c.tag, c.error) == (1, 2, MPI.ERR_ARG)
    c.tag = 3
    assert c != s
    with pytest.raises(TypeError):
        MPI.Status(123)
    assert MPI.Status() == MPI.Status()


def test_status_counts_and_elements():
    s = MPI.Status()
    s.Set_elements(MPI.BYTE, 7)
    assert s.Get_count() == 7 and s.Get_count(MPI.BYTE) == 7 and s.Get_elements(MPI.BYTE) == 7
    assert s.Get_count(MPI.INT) == MPI.UNDEFINED and s.Get_elements(MPI.INT) == MPI.UNDEFINED
    s.Set_elements(MPI.DOUBLE_INT, 3)
    assert s.Get_count(MPI.BYTE) == 36 and s.Get_count(MPI.DOUBLE_INT) == 3
    s.Set_elements("d", 4)  # a typecode, as mpi4py takes one
    assert s.Get_count(MPI.DOUBLE) == 4 and s.Get_count("i") == 8
    # A struct of 2 ints and a double (16 bytes, 3 basic elements); Open MPI's answers.
    t = MPI.Datatype.Create_struct([2, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
    for nbytes, count, elements in [(16, 1, 3), (20, MPI.UNDEFINED, 4), (24, MPI.UNDEFINED, 5),
                                    (32, 2, 6), (18, MPI.UNDEFINED, MPI.UNDEFINED)]:
        s.Set_elements(MPI.BYTE, nbytes)
        assert (s.Get_count(t), s.Get_elements(t)) == (count, elements), nbytes
    s.Set_elements(t, 4)  # one element and one int
    assert (s.Get_count(MPI.BYTE), s.Get_count(t), s.Get_elements(t)) == (20, MPI.UNDEFINED, 4)
    v = MPI.INT.Create_vector(2, 2, 3).Commit()  # 4 ints
    s.Set_elements(v, 6)
    assert s.Get_count(MPI.BYTE) == 24 and s.Get_elements(v) == 6
    t.Free()
    v.Free()


def test_status_of_a_receive(comm):
    r, P = comm.rank, comm.size
    st = MPI.Status()
    comm.Sendrecv(bytearray(12), dest=(r + 1) % P, sendtag=4, recvbuf=bytearray(16),
                  source=(r - 1) % P, recvtag=4, status=st)
    assert st.Get_source() == (r - 1) % P and st.Get_tag() == 4 and st.Get_error() == 0
    assert st.Get_count(MPI.BYTE) == 12 and st.Get_count(MPI.INT) == 3
    assert st.Get_elements(MPI.INT) == 3 and not st.Is_cancelled()
