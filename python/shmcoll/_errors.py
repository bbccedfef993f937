"""MPI's error classes over shmcoll's errors: the ERR_* numbers, their strings, and the
methods of mpi4py's MPI.Exception, which is shmcoll.Error (every failed call raises it).

A shmcoll.Error carries an errno (EINVAL, EMSGSIZE, ETIMEDOUT, ...) and the library's
message; its MPI error class is the errno's closest (EMSGSIZE is ERR_TRUNCATE), or for
EINVAL, what the message names (a root, a rank, a tag, a datatype ...). An error raised by
this package with an MPI class of its own (a group's rank out of range) carries that class.
MPI.Exception(code), made by a program, is the error of that MPI code."""

import errno as _errno
import re as _re

from . import _shmcoll

# MPI's error classes, numbered as Open MPI numbers them (what Debian's mpi4py shows).
SUCCESS = 0
_CLASSES = (
    ("ERR_BUFFER", 1, "invalid buffer pointer"),
    ("ERR_COUNT", 2, "invalid count argument"),
    ("ERR_TYPE", 3, "invalid datatype"),
    ("ERR_TAG", 4, "invalid tag"),
    ("ERR_COMM", 5, "invalid communicator"),
    ("ERR_RANK", 6, "invalid rank"),
    ("ERR_REQUEST", 7, "invalid request"),
    ("ERR_ROOT", 8, "invalid root"),
    ("ERR_GROUP", 9, "invalid group"),
    ("ERR_OP", 10, "invalid reduce operation"),
    ("ERR_TOPOLOGY", 11, "invalid communicator topology"),
    ("ERR_DIMS", 12, "invalid topology dimension"),
    ("ERR_ARG", 13, "invalid argument of some other kind"),
    ("ERR_UNKNOWN", 14, "unknown error"),
    ("ERR_TRUNCATE", 15, "message truncated"),
    ("ERR_OTHER", 16, "known error not in list"),
    ("ERR_INTERN", 17, "internal error"),
    ("ERR_IN_STATUS", 18, "error code in status"),
    ("ERR_PENDING", 19, "pending request"),
    ("ERR_ACCESS", 20, "invalid access mode"),
    ("ERR_AMODE", 21, "invalid amode argument"),
    ("ERR_ASSERT", 22, "invalid assert argument"),
    ("ERR_BAD_FILE", 23, "bad file"),
    ("ERR_BASE", 24, "invalid base"),
    ("ERR_CONVERSION", 25, "error in data conversion"),
    ("ERR_DISP", 26, "invalid displacement"),
    ("ERR_DUP_DATAREP", 27, "error duplicating data representation"),
    ("ERR_FILE_EXISTS", 28, "file exists already"),
    ("ERR_FILE_IN_USE", 29, "file already in use"),
    ("ERR_FILE", 30, "invalid file"),
    ("ERR_INFO_KEY", 31, "invalid key argument for info object"),
    ("ERR_INFO_NOKEY", 32, "unknown key for given info object"),
    ("ERR_INFO_VALUE", 33, "invalid value argument for info object"),
    ("ERR_INFO", 34, "invalid info object"),
    ("ERR_IO", 35, "input/output error"),
    ("ERR_KEYVAL", 36, "invalid key value"),
    ("ERR_LOCKTYPE", 37, "invalid lock"),
    ("ERR_NAME", 38, "invalid name argument"),
    ("ERR_NO_MEM", 39, "out of memory"),
    ("ERR_NOT_SAME", 40, "objects are not identical"),
    ("ERR_NO_SPACE", 41, "no space left on device"),
    ("ERR_NO_SUCH_FILE", 42, "no such file or directory"),
    ("ERR_PORT", 43, "invalid port"),
    ("ERR_QUOTA", 44, "out of quota"),
    ("ERR_READ_ONLY", 45, "file is read only"),
    ("ERR_RMA_CONFLICT", 46, "rma conflict during operation"),
    ("ERR_RMA_SYNC", 47, "error executing rma sync"),
    ("ERR_SERVICE", 48, "unknown service name"),
    ("ERR_SIZE", 49, "invalid size"),
    ("ERR_SPAWN", 50, "could not spawn processes"),
    ("ERR_UNSUPPORTED_DATAREP", 51, "data representation not supported"),
    ("ERR_UNSUPPORTED_OPERATION", 52, "operation not supported"),
    ("ERR_WIN", 53, "invalid window"),
    ("ERR_RMA_RANGE", 68, "invalid RMA address range"),
    ("ERR_RMA_ATTACH", 69, "could not attach RMA segment"),
    ("ERR_RMA_FLAVOR", 70, "wrong flavor of RMA window"),
    ("ERR_RMA_SHARED", 71, "memory cannot be shared"),
    # MPI 4's classes (mpi4py 4 names them; Open MPI 5's numbers, 74 .. 77 its ULFM ones).
    ("ERR_PROC_ABORTED", 74, "operation failed because a peer process has aborted"),
    ("ERR_PROC_FAILED", 75, "process has failed"),
    ("ERR_PROC_FAILED_PENDING", 76, "process has failed (a pending operation)"),
    ("ERR_REVOKED", 77, "communication object has been revoked"),
    ("ERR_SESSION", 78, "invalid session"),
    ("ERR_VALUE_TOO_LARGE", 79, "value is too large to store"),
    ("ERR_ERRHANDLER", 80, "invalid error handler"),
)
ERR_LASTCODE = 92

CODES = {name: code for name, code, _ in _CLASSES}
CODES["SUCCESS"] = SUCCESS
CODES["ERR_LASTCODE"] = ERR_LASTCODE
_STRINGS = {code: "MPI_%s: %s" % (name, text) for name, code, text in _CLASSES}
_STRINGS[SUCCESS] = "MPI_SUCCESS: no errors"
globals().update(CODES)  # ERR_ARG ... as names of this module

# The errno of a failed call -> its MPI class (EINVAL: see _EINVAL).
_ERRNO = {
    _errno.EMSGSIZE: CODES["ERR_TRUNCATE"],
    _errno.ENOMEM: CODES["ERR_NO_MEM"],
    _errno.ENOSPC: CODES["ERR_NO_MEM"],  # no room in /dev/shm for an arena
    _errno.ENOTSUP: CODES["ERR_UNSUPPORTED_OPERATION"],
    _errno.ENOSYS: CODES["ERR_UNSUPPORTED_OPERATION"],
    _errno.EBUSY: CODES["ERR_PENDING"],  # operations still outstanding
}
# EINVAL: the argument the library's message names, first match wins ("root 5 is not a rank"
# is the root's); none: ERR_ARG.
_EINVAL = (
    (_re.compile(r"\broot\b"), CODES["ERR_ROOT"]),
    (_re.compile(r"\b(dest|source|rank|ranks)\b"), CODES["ERR_RANK"]),
    (_re.compile(r"\btag\b"), CODES["ERR_TAG"]),
    (_re.compile(r"\bop\b|\bop [A-Z_]+\b"), CODES["ERR_OP"]),
    (_re.compile(r"\b(dtype|datatype|type)\b"), CODES["ERR_TYPE"]),
    (_re.compile(r"\bcount\b"), CODES["ERR_COUNT"]),
    (_re.compile(r"\bgroup\b"), CODES["ERR_GROUP"]),
    (_re.compile(r"\brequest\b"), CODES["ERR_REQUEST"]),
    (_re.compile(r"\bcommunicator\b|\bCOMM_NULL\b"), CODES["ERR_COMM"]),
    (_re.compile(r"\bbuffer\b"), CODES["ERR_BUFFER"]),
)


def error_class(code):
    """The MPI class of an MPI error code (every code is its own class here)."""
    code = int(code)
    if code == SUCCESS or code in _STRINGS or 0 < code <= ERR_LASTCODE:
        return code
    raise _shmcoll.Error(_errno.EINVAL, "Get_error_class: %d is not an MPI error code" % code)


def error_string(code):
    code = int(code)
    try:
        return _STRINGS[code]
    except KeyError:
        if 0 < code <= ERR_LASTCODE:
            return "MPI_ERR_UNKNOWN: unknown error"
        raise _shmcoll.Error(_errno.EINVAL,
                             "Get_error_string: %d is not an MPI error code" % code) from None


def raise_mpi(code, msg, err=_errno.EINVAL):
    """Raises shmcoll.Error(err, msg) of MPI class code."""
    e = _shmcoll.Error(err, msg)
    e._mpi_code = code
    raise e


def _code(self):
    """The error's MPI code: its own (MPI.Exception(code), or one this package gave), else
    its errno's class."""
    code = self.__dict__.get("_mpi_code")
    if code is not None:
        return code
    if self.errno is None:
        if len(self.args) == 1 and isinstance(self.args[0], int):
            return self.args[0]  # MPI.Exception(code)
        return CODES["ERR_OTHER"] if self.args else SUCCESS
    return errno_class(self.errno, self.strerror)


def errno_class(err, msg=None):
    """The MPI class of a failure with errno err (positive) and the library's message."""
    if err == 0:
        return SUCCESS
    if err == _errno.EINVAL:
        for rx, code in _EINVAL:
            if rx.search(msg or ""):
                return code
        return CODES["ERR_ARG"]
    return _ERRNO.get(err, CODES["ERR_OTHER"])


def _is_mpi_form(e):
    return e.errno is None and len(e.args) == 1 and isinstance(e.args[0], int)


def _str(self):
    if _is_mpi_form(self):
        return error_string(self.args[0])
    return _os_str(self)


def _repr(self):
    if _is_mpi_form(self):
        return "MPI.Exception(%d)" % self.args[0]
    return _os_repr(self)


def _eq(self, other):
    if isinstance(other, BaseException) and not isinstance(other, _shmcoll.Error):
        return NotImplemented
    try:
        return _code(self) == int(other)
    except (TypeError, ValueError):
        return NotImplemented


def _ne(self, other):
    r = _eq(self, other)
    return r if r is NotImplemented else not r


_os_str = _shmcoll.Error.__str__
_os_repr = _shmcoll.Error.__repr__

# mpi4py's MPI.Exception API on shmcoll.Error (a class made by the extension at import).
_E = _shmcoll.Error
_E.Get_error_code = _code
_E.Get_error_class = lambda self: error_class(_code(self))
_E.Get_error_string = lambda self: error_string(_code(self))
_E.error_code = property(_code)
_E.error_class = property(lambda self: error_class(_code(self)))
_E.error_string = property(lambda self: error_string(_code(self)))
_E.__int__ = _code
_E.__bool__ = lambda self: _code(self) != SUCCESS
_E.__eq__ = _eq
_E.__ne__ = _ne
_E.__hash__ = lambda self: hash(_code(self))
_E.__str__ = _str
_E.__repr__ = _repr
