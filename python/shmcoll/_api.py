"""Which mpi4py shmcoll.MPI answers as where mpi4py 3 and 4 differ (a few calls: docs/PYTHON.md,
"mpi4py 3 and 4"). A program was written for one of them; this picks it:

- SHMCOLL_MPI4PY=3 or 4 in the environment;
- otherwise the major version of the mpi4py installed for this interpreter, read from its
  metadata (mpi4py is not imported): a program on a machine with mpi4py 3.1 was written for it;
- otherwise 4, the API current mpi4py has."""

import os

from . import _shmcoll


def _choose():
    v = os.environ.get("SHMCOLL_MPI4PY", "").strip()
    if v:
        major = v.split(".")[0]
        if major not in ("3", "4"):
            raise ValueError("SHMCOLL_MPI4PY=%r: expected 3 or 4 (mpi4py's major version)" % v)
        return int(major)
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # Python < 3.8
        return 4
    try:
        return 3 if int(version("mpi4py").split(".")[0]) <= 3 else 4
    except (PackageNotFoundError, ValueError):
        return 4


MAJOR = _choose()
_shmcoll._mpi4py_api(MAJOR)
