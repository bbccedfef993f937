"""from shmcoll import MPI: the commonly used part of mpi4py's MPI module over shmcoll.

A program written for mpi4py runs with its import line changed, started by
``shmcoll-run -n P python3 prog.py``. COMM_WORLD is the launcher's job, made on first use;
the communicators are shmcoll.Comm, whose methods have mpi4py's names, arguments and
semantics (docs/PYTHON.md lists them)."""

import socket as _socket
import time as _time

from . import _shmcoll
from ._comm import Comm, Status  # noqa: F401
from ._comm import init as _init

Intracomm = Comm
Request = _shmcoll.Request
Datatype = _shmcoll.Datatype
Op = _shmcoll.Op
Exception = _shmcoll.Error  # noqa: A001 (mpi4py's name for its error class)

IN_PLACE = _shmcoll.IN_PLACE
ANY_SOURCE = _shmcoll.ANY_SOURCE
ANY_TAG = _shmcoll.ANY_TAG
PROC_NULL = _shmcoll.PROC_NULL
UNDEFINED = _shmcoll.UNDEFINED
COMM_NULL = None
REQUEST_NULL = None
SUCCESS = 0

SUM = _shmcoll.SUM
PROD = _shmcoll.PROD
MIN = _shmcoll.MIN
MAX = _shmcoll.MAX
BAND = _shmcoll.BAND
BOR = _shmcoll.BOR
BXOR = _shmcoll.BXOR

# mpi4py's datatype names: C's fixed-width ones, and the C types of this platform (LP64).
INT8_T = SIGNED_CHAR = _shmcoll.INT8
UINT8_T = UNSIGNED_CHAR = _shmcoll.UINT8
INT32_T = INT = _shmcoll.INT32
UINT32_T = UNSIGNED = UNSIGNED_INT = _shmcoll.UINT32
INT64_T = LONG = LONG_LONG = _shmcoll.INT64
UINT64_T = UNSIGNED_LONG = UNSIGNED_LONG_LONG = _shmcoll.UINT64
FLOAT = _shmcoll.FLOAT32
DOUBLE = _shmcoll.FLOAT64
BYTE = CHAR = _shmcoll.BYTE

_world = None
_self = None
_finalized = False


def _world_comm():
    global _world
    if _world is None:
        _world = _init()
    return _world


def _self_comm():
    global _self
    if _self is None:
        import os

        _self = Comm(0, 1, "mpi-self-%d" % os.getpid())
    return _self


def __getattr__(name):
    # COMM_WORLD and COMM_SELF are made on first use, as the launcher's job and a job of one.
    if name == "COMM_WORLD":
        return _world_comm()
    if name == "COMM_SELF":
        return _self_comm()
    raise AttributeError("module 'shmcoll.MPI' has no attribute %r" % name)


def Wtime():
    """Seconds since an arbitrary time in the past, as MPI_Wtime."""
    return _time.perf_counter()


def Wtick():
    return _time.get_clock_info("perf_counter").resolution


def Init():
    _world_comm()


def Init_thread(required=None):
    _world_comm()
    return 3  # MPI_THREAD_MULTIPLE: calls release the GIL; one thread per communicator


def Is_initialized():
    return _world is not None


def Is_finalized():
    return _finalized


def Finalize():
    """Safe to call (mpi4py calls it at exit too); the communicators go with the process."""
    global _finalized
    _finalized = True


def Get_processor_name():
    return _socket.gethostname()


def Get_version():
    return (3, 1)
