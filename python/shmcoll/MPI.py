"""from shmcoll import MPI: mpi4py's MPI module over shmcoll.

A program written for mpi4py (3.1, and 4.0's API) runs with its import line changed, started
by ``shmcoll-run -n P python3 prog.py``. COMM_WORLD is the launcher's job, made on first use;
the communicators are shmcoll.Comm, whose methods have mpi4py's names, arguments and
semantics. What is not supported (intercommunicators, one-sided communication, MPI-IO,
dynamic processes, process topologies, generalized requests) raises NotImplementedError
naming the feature; docs/PYTHON.md lists what is there and what differs."""

import atexit as _atexit
import threading as _threading
import time as _time

from . import _api, _comm, _errors, _shmcoll
from ._comm import (  # noqa: F401 (mpi4py's names)
    APPNUM,
    COMM_TYPE_HW_GUIDED,
    COMM_TYPE_HW_UNGUIDED,
    COMM_TYPE_RESOURCE_GUIDED,
    COMM_TYPE_SHARED,
    HOST,
    IO,
    KEYVAL_INVALID,
    LASTUSEDCODE,
    TAG_UB,
    UNIVERSE_SIZE,
    WTIME_IS_GLOBAL,
    Cartcomm,
    Distgraphcomm,
    Graphcomm,
    Intercomm,
    Pickle,
    Topocomm,
    _comm_lock,
    _comm_lock_table,
    pickle,
)
from ._comm import BaseComm as Comm

if _api.MAJOR >= 4:
    # mpi4py 4 has no MPI.HOST (MPI-4.1 deprecates the attribute; mpi4py 4.0.3 has no name
    # for it), so a program written for it cannot use it; Get_attr(1) still answers.
    del HOST
from ._comm import _comm_lock_table as _lock_table  # mpi4py 3's name of it
from ._comm import Comm as Intracomm
from ._errors import CODES as _CODES
from ._group import GROUP_EMPTY, GROUP_NULL, Group  # noqa: F401
from ._info import (  # noqa: F401
    ERRHANDLER_NULL,
    ERRORS_ABORT,
    ERRORS_ARE_FATAL,
    ERRORS_RETURN,
    INFO_ENV,
    INFO_NULL,
    MAX_INFO_KEY,
    MAX_INFO_VAL,
    Errhandler,
    Info,
)
from ._message import MESSAGE_NO_PROC, MESSAGE_NULL, Message  # noqa: F401
from ._request import Grequest, Prequest  # noqa: F401
from ._status import Status  # noqa: F401

# ---- predefined objects of the C module: datatypes, ops, buffers ----

globals().update(_shmcoll._datatypes)  # every datatype mpi4py has, by its names
globals().update(_shmcoll._ops)  # SUM ... MAXLOC, MINLOC, LAND, REPLACE, NO_OP, OP_NULL
Datatype = _shmcoll.Datatype
Op = _shmcoll.Op
Request = _shmcoll.Request
BOTTOM = _shmcoll.BOTTOM
IN_PLACE = _shmcoll.IN_PLACE
REQUEST_NULL = _shmcoll.Request()  # inactive: equal to every completed request

# mpi4py's typecode dictionaries: all its codes; the C types'; Fortran's.
_typedict = dict(_shmcoll._typedict)
_typedict_c = {k: _typedict[k] for k in (
    "?", "b", "h", "i", "l", "q", "B", "H", "I", "L", "Q", "f", "d", "g", "F", "D", "G", "b1",
    "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "c8", "f8", "c16", "f16", "c32")}
_typedict_f = {k: _shmcoll._datatypes[v] for k, v in (
    ("?", "F_BOOL"), ("i", "F_INT"), ("s", "F_FLOAT"), ("r", "F_FLOAT"), ("d", "F_DOUBLE"),
    ("c", "F_COMPLEX"), ("z", "F_DOUBLE_COMPLEX"), ("?1", "LOGICAL1"), ("?2", "LOGICAL2"),
    ("?4", "LOGICAL4"), ("?8", "LOGICAL8"), ("i1", "INTEGER1"), ("i2", "INTEGER2"),
    ("i4", "INTEGER4"), ("i8", "INTEGER8"), ("r4", "REAL4"), ("r8", "REAL8"),
    ("r16", "REAL16"), ("c8", "COMPLEX8"), ("c16", "COMPLEX16"), ("c32", "COMPLEX32"))}


def _typecode(datatype):
    """mpi4py's: the typecode of a predefined datatype, or None (mpi4py 4's: tocode()'s, a
    Dup's its base's)."""
    if _api.MAJOR >= 4:
        try:
            return datatype.tocode()
        except ValueError:
            return None
    for k, v in _typedict.items():
        if v is datatype:
            return k
    return None


# mpi4py 4's: what pickling a derived datatype calls, and decode() as a function.
_datatype_create = _shmcoll._datatype_create
_datatype_decode = _shmcoll._datatype_decode


# ---- constants ----

UNDEFINED = _shmcoll.UNDEFINED
ANY_SOURCE = _shmcoll.ANY_SOURCE
ANY_TAG = _shmcoll.ANY_TAG
PROC_NULL = _shmcoll.PROC_NULL
ROOT = -4
IDENT, CONGRUENT, SIMILAR, UNEQUAL = 0, 1, 2, 3
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
VERSION, SUBVERSION = 3, 1
MAX_PROCESSOR_NAME = 256
MAX_ERROR_STRING = 256
MAX_OBJECT_NAME = 64
MAX_PORT_NAME = 1024
MAX_DATAREP_STRING = 128
MAX_LIBRARY_VERSION_STRING = 256
BSEND_OVERHEAD = 128
CART, GRAPH, DIST_GRAPH = 1, 2, 3
UNWEIGHTED, WEIGHTS_EMPTY = 2, 3
TYPECLASS_INTEGER, TYPECLASS_REAL, TYPECLASS_COMPLEX = 1, 2, 3
DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC, DISTRIBUTE_NONE, DISTRIBUTE_DFLT_DARG = 0, 1, 2, -1
ORDER_C, ORDER_FORTRAN = _shmcoll.ORDER_C, _shmcoll.ORDER_FORTRAN
ORDER_F = ORDER_FORTRAN
# Datatype.Get_envelope's combiners (COMBINER_NAMED, COMBINER_VECTOR ...).
globals().update({k: getattr(_shmcoll, k) for k in dir(_shmcoll) if k.startswith("COMBINER_")})
# One-sided communication and MPI-IO are not supported; their names are mpi4py's.
WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_FLAVOR, WIN_MODEL = 7, 8, 9, 10, 10, 11
WIN_FLAVOR_CREATE, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED = 1, 2, 3, 4
WIN_SEPARATE, WIN_UNIFIED = 1, 0
MODE_NOCHECK, MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED = 1, 8, 4, 2, 16
LOCK_EXCLUSIVE, LOCK_SHARED = 1, 2
MODE_RDONLY, MODE_WRONLY, MODE_RDWR, MODE_CREATE, MODE_EXCL = 2, 4, 8, 1, 64
MODE_DELETE_ON_CLOSE, MODE_UNIQUE_OPEN, MODE_SEQUENTIAL, MODE_APPEND = 16, 32, 256, 128
SEEK_SET, SEEK_CUR, SEEK_END = 600, 602, 604
DISPLACEMENT_CURRENT = DISP_CUR = -54278278

# ---- errors ----

globals().update(_CODES)  # SUCCESS, ERR_ARG ... ERR_LASTCODE
Exception = _shmcoll.Error  # noqa: A001 (mpi4py's name: every failed call raises it)


def Get_error_class(errorcode):
    return _errors.error_class(errorcode)


def Get_error_string(errorcode):
    return _errors.error_string(errorcode)


def Add_error_class():
    raise NotImplementedError("shmcoll.MPI: user error classes (Add_error_class) are not "
                              "supported")


def Add_error_code(errorclass):
    raise NotImplementedError("shmcoll.MPI: user error codes (Add_error_code) are not "
                              "supported")


def Add_error_string(errorcode, string):
    raise NotImplementedError("shmcoll.MPI: user error strings (Add_error_string) are not "
                              "supported")


# ---- communicators ----

COMM_NULL = Comm()
_world = None
_self = None
_finalized = False


def _world_comm():
    global _world
    if _world is None:
        _world = _comm.init()
        _world.__dict__.update(_name="MPI_COMM_WORLD", _world=True, _predefined=True)
        _atexit.register(_free_predefined)
    return _world


def _free_predefined():
    """At exit, as MPI_Finalize: COMM_SELF and COMM_WORLD go (local: no peer waits)."""
    for c in (_self, _world):
        if c is not None and not c.freed:
            try:
                _shmcoll._Comm.Free(c)
            except _shmcoll.Error:
                pass


def _self_comm():
    global _self
    if _self is None:
        import os

        world = _world_comm()
        _self = Intracomm(0, 1, "mpi-self-%d" % os.getpid())
        _self.__dict__.update(_wr=(world.rank,), _name="MPI_COMM_SELF", _predefined=True)
    return _self


def __getattr__(name):
    # COMM_WORLD and COMM_SELF are made on first use, as the launcher's job and a job of one.
    if name == "COMM_WORLD":
        return _world_comm()
    if name == "COMM_SELF":
        return _self_comm()
    raise AttributeError("module 'shmcoll.MPI' has no attribute %r" % name)


# ---- pickling of handles, as mpi4py 4 ----


def _predefined(name):
    """The predefined handle of that name, which a pickled one unpickles to (the same
    object, as in mpi4py 4)."""
    if name == "COMM_WORLD":
        return _world_comm()
    if name == "COMM_SELF":
        return _self_comm()
    return globals()[name]


def _predefined_like(obj):
    """The names of the predefined handles of obj's kind, the null one first."""
    if isinstance(obj, _shmcoll._Comm):
        return ("COMM_NULL", "COMM_WORLD", "COMM_SELF")
    if isinstance(obj, Group):
        return ("GROUP_NULL", "GROUP_EMPTY")
    if isinstance(obj, Info):
        return ("INFO_NULL", "INFO_ENV")
    if isinstance(obj, Errhandler):
        return ("ERRHANDLER_NULL", "ERRORS_RETURN", "ERRORS_ABORT", "ERRORS_ARE_FATAL")
    if isinstance(obj, Message):
        return ("MESSAGE_NULL", "MESSAGE_NO_PROC")
    if isinstance(obj, Request):
        return ("REQUEST_NULL",)
    return ("%s_NULL" % type(obj).__name__.upper(),)  # Win, File, Session: null only


def _mpi_class(obj):
    """obj's class as mpi4py names it (shmcoll.Comm is MPI.Intracomm, an object request an
    MPI.Request ...)."""
    cls = type(obj)
    if isinstance(obj, Request) and not isinstance(obj, (Prequest, Grequest)):
        return Request
    return cls


def _reduce(obj):
    """obj.__reduce__ of the handles (communicators, groups, infos, error handlers, messages,
    requests), as mpi4py 4's: a predefined handle unpickles to itself; one equal to a
    predefined handle (Comm() or a freed communicator, MPI.Intracomm(COMM_WORLD),
    Group(GROUP_EMPTY), a completed request ...) to a new handle of its class equal to it;
    any other cannot be pickled: ValueError as mpi4py 4, TypeError as mpi4py 3 (whose
    handles do not pickle at all)."""
    names = _predefined_like(obj)
    handles = [(n, globals().get(n) if n not in ("COMM_WORLD", "COMM_SELF") else
                (_world if n == "COMM_WORLD" else _self)) for n in names]
    for name, h in handles:
        if obj is h:
            return (_predefined, (name,))
    cls = _mpi_class(obj)
    for i, (name, h) in enumerate(handles):
        if h is not None and obj == h:
            return (cls, ()) if i == 0 else (cls, (h,))  # a new null handle is Cls()
    name = {Comm: "Comm", Intracomm: "Intracomm"}.get(cls, cls.__name__)
    if _api.MAJOR >= 4:
        raise ValueError("cannot serialize 'shmcoll.MPI.%s' instance" % name)
    raise TypeError("cannot pickle 'shmcoll.MPI.%s' object" % name)


# ---- the environment ----


def Init():
    _world_comm()


def Init_thread(required=THREAD_MULTIPLE):
    """THREAD_MULTIPLE: calls release the GIL, and a communicator takes calls of one thread
    at a time."""
    _world_comm()
    return THREAD_MULTIPLE


def Query_thread():
    return THREAD_MULTIPLE


def Is_thread_main():
    return _threading.current_thread() is _threading.main_thread()


def Is_initialized():
    """True, as mpi4py's after its import (COMM_WORLD itself is made on first use)."""
    return True


def Is_finalized():
    return _finalized


def Finalize():
    """Safe to call (mpi4py calls it at exit too); the communicators go with the process."""
    global _finalized
    _finalized = True


def Pcontrol(level):
    pass


def get_vendor():
    """("shmcoll", its version as three numbers)."""
    parts = [int(p) if p.isdigit() else 0 for p in _shmcoll.__version__.split(".")[:3]]
    return ("shmcoll", tuple(parts + [0] * (3 - len(parts))))


def Get_version():
    return (VERSION, SUBVERSION)


def Get_library_version():
    return "shmcoll %s (shared-memory collectives; mpi4py's API as shmcoll.MPI)" % (
        _shmcoll.__version__)


def Get_processor_name():
    import socket

    return socket.gethostname()


def Wtime():
    """Seconds since an arbitrary time in the past, as MPI_Wtime."""
    return _time.perf_counter()


def Wtick():
    return _time.get_clock_info("perf_counter").resolution


# ---- memory ----


def _buffer_info(obj, writable=False):
    """(address, bytes, readonly) of a buffer argument, resolved as the calls resolve it
    (the buffer protocol, DLPack, __cuda_array_interface__, __array_interface__, torch
    tensors, MPI.buffer)."""
    return _shmcoll._mem(obj, writable)


# mpi4py 4's MPI.buffer, a class of the C module (buffer.c): bytes of memory over any buffer
# the calls take, an address (fromaddress) or new memory (allocate), with .address, .obj,
# .nbytes, .readonly, .format, .itemsize, cast(), tobytes(), toreadonly(), release(), the
# buffer protocol, len(), indexing and slicing. memory is its name in mpi4py 3.
buffer = _shmcoll.buffer
memory = buffer


def Alloc_mem(size, info=INFO_NULL):
    """size bytes of new memory, an MPI.buffer (for Attach_buffer, or anything)."""
    return buffer.allocate(size)


def Free_mem(mem):
    """Lets go of Alloc_mem's memory: mem is empty after it (as mpi4py's)."""
    if not isinstance(mem, buffer):
        raise TypeError("Free_mem: expected an MPI.buffer (of Alloc_mem), got %s"
                        % type(mem).__name__)
    mem.release()


def Get_address(location):
    """The address of a buffer's first byte (0 for BOTTOM)."""
    if location is BOTTOM:
        return 0
    return _buffer_info(location)[0]


def Aint_add(base, disp):
    return base + disp


def Aint_diff(addr1, addr2):
    return addr1 - addr2


BUFFER_AUTOMATIC = BOTTOM  # mpi4py 4: a buffer the library manages (every send's here)
_attached = [None]


def Attach_buffer(buf):
    """Bsend's buffer: kept and given back by Detach_buffer; shmcoll's sends need none. It
    must be writable memory (BufferError otherwise), as mpi4py's; None and BUFFER_AUTOMATIC
    are taken as they are."""
    if buf is not None and buf is not BUFFER_AUTOMATIC:
        _buffer_info(buf, True)
    _attached[0] = buf


def Detach_buffer():
    buf, _attached[0] = _attached[0], None
    return buf


def Flush_buffer():
    pass


def Iflush_buffer():
    return Request()


def Get_hw_resource_info():
    """mpi4py 4's: what is known of the hardware (nothing)."""
    return Info.Create()


def Compute_dims(nnodes, dims):
    """A balanced split of nnodes over the dimensions (dims: their count, or a list with
    fixed dimensions and 0s), each as large as the next or larger (MPI_Dims_create)."""
    try:
        dims = [0] * int(dims)
    except TypeError:
        dims = [int(d) for d in dims]
    fixed = 1
    for d in dims:
        if d < 0:
            _errors.raise_mpi(_CODES["ERR_DIMS"], "Compute_dims: a negative dimension")
        if d:
            fixed *= d
    free = [i for i, d in enumerate(dims) if d == 0]
    if (free and nnodes % fixed) or (not free and fixed != nnodes):
        _errors.raise_mpi(_CODES["ERR_DIMS"], "Compute_dims: %d nodes do not fit %s"
                          % (nnodes, dims))
    if not free:
        return dims
    rest, factors, p = nnodes // fixed, [], 2
    while rest > 1:
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    sizes = [1] * len(free)
    for f in sorted(factors, reverse=True):
        sizes[sizes.index(min(sizes))] *= f
    for i, s in zip(free, sorted(sizes, reverse=True)):
        dims[i] = s
    return dims


# ---- what shmcoll does not do ----


def _unsupported(feature):
    def fn(*args, **kw):
        raise NotImplementedError("shmcoll.MPI: %s is not supported" % feature)

    fn.__name__ = feature.split("(")[-1].rstrip(")")
    return fn


Open_port = _unsupported("dynamic processes (Open_port)")
Close_port = _unsupported("dynamic processes (Close_port)")
Publish_name = _unsupported("dynamic processes (Publish_name)")
Unpublish_name = _unsupported("dynamic processes (Unpublish_name)")
Lookup_name = _unsupported("dynamic processes (Lookup_name)")
Register_datarep = _unsupported("MPI-IO (Register_datarep)")


class _Unsupported:
    """A class of a feature shmcoll does not have: its instance is the null handle, and
    every method raises NotImplementedError naming the feature."""

    _feature = ""

    def __init__(self, handle=None):
        pass

    def __bool__(self):
        return False

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return 0

    def __reduce__(self):
        return _reduce(self)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return _unsupported("%s (%s.%s)" % (self._feature, type(self).__name__, name))


class Win(_Unsupported):
    """One-sided communication is not supported: Win() is WIN_NULL; making a window, and
    every method, raises NotImplementedError."""

    _feature = "one-sided communication"
    Create = classmethod(_unsupported("one-sided communication (Win.Create)"))
    Allocate = classmethod(_unsupported("one-sided communication (Win.Allocate)"))
    Allocate_shared = classmethod(_unsupported("one-sided communication (Win.Allocate_shared)"))
    Create_dynamic = classmethod(_unsupported("one-sided communication (Win.Create_dynamic)"))


class File(_Unsupported):
    """MPI-IO is not supported: File() is FILE_NULL; File.Open, and every method, raise
    NotImplementedError."""

    _feature = "MPI-IO"
    Open = classmethod(_unsupported("MPI-IO (File.Open)"))
    Delete = classmethod(_unsupported("MPI-IO (File.Delete)"))


class Session(_Unsupported):
    """MPI 4 sessions are not supported."""

    _feature = "sessions"
    Init = classmethod(_unsupported("sessions (Session.Init)"))


WIN_NULL = Win()
FILE_NULL = File()
SESSION_NULL = Session()
