"""shmcoll: shared-memory collectives for the processes of one machine.

Three faces over one C engine (docs/PYTHON.md):

    import shmcoll                 the array API: shmcoll.init(), shmcoll.Comm
    from shmcoll import MPI        mpi4py's commonly used API (python/shmcoll/MPI.py)
    import shmcoll.torch           the torch.distributed backend "shmcoll"

Start a program with ``shmcoll-run -n 4 python3 prog.py``::

    import numpy as np, shmcoll
    comm = shmcoll.init()
    x = np.full(4, comm.rank, dtype=np.float32)
    comm.Allreduce(shmcoll.IN_PLACE, x, op=shmcoll.SUM)
    y = shmcoll.malloc(comm, (2, 4), np.float32)   # symmetric memory: zero-copy sends

Every call goes to the C library with the GIL released. Errors are shmcoll.Error (an
OSError: .errno is the errno, the message the library's); a wait for a peer that runs out of
time raises shmcoll.TimeoutError, which is also the built-in TimeoutError.
"""

from ._shmcoll import (  # noqa: F401 (the package's names)
    ANY_SOURCE,
    ANY_TAG,
    AVG,
    BAND,
    BFLOAT16,
    BOR,
    BXOR,
    BYTE,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    IN_PLACE,
    INT8,
    INT32,
    INT64,
    MAX,
    PROC_NULL,
    MIN,
    PROD,
    SUM,
    UINT8,
    UINT32,
    UINT64,
    UNDEFINED,
    BufferError,
    Datatype,
    Error,
    Op,
    Request,
    SymmetricBuffer,
    TimeoutError,
    __version__,
    strerror,
)
from ._comm import Comm, Status, init, malloc  # noqa: F401
