"""mpi4py's MPI.Message: a message found by Comm.Mprobe or Improbe, to be received by its
Recv or Irecv (recv, irecv for an object). The library has no matched probe: a Message is
the probed message's source and tag, and its receive takes the earliest message of that
source and tag, which is the probed one unless another receive of this rank takes it first
(MPI removes a matched message from every other receive's reach; shmcoll does not)."""

from . import _shmcoll
from ._status import Status

_NULL, _NO_PROC, _MSG = 0, 1, 2


class Message:
    """Message(message=None): MESSAGE_NULL, or the same message as message."""

    __slots__ = ("_kind", "_comm", "_source", "_tag", "_nbytes", "_const")

    def __init__(self, message=None):
        if message is not None and not isinstance(message, Message):
            raise TypeError("Message() takes a Message, not %s" % type(message).__name__)
        if message is None:
            self._kind, self._comm, self._source, self._tag, self._nbytes = _NULL, None, 0, 0, 0
        else:
            self._kind, self._comm = message._kind, message._comm
            self._source, self._tag, self._nbytes = (message._source, message._tag,
                                                     message._nbytes)
        self._const = False

    @classmethod
    def _found(cls, comm, st):
        m = cls()
        m._kind, m._comm = _MSG, comm
        m._source, m._tag, m._nbytes = st.source, st.tag, st.nbytes
        return m

    @classmethod
    def _no_proc(cls):
        m = cls()
        m._kind = _NO_PROC
        return m

    def __bool__(self):
        return self._kind != _NULL

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        if self._kind != _MSG or other._kind != _MSG:
            return self._kind == other._kind
        return (self._comm is other._comm and self._source == other._source
                and self._tag == other._tag)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash((self._kind, id(self._comm), self._source, self._tag))

    def __reduce__(self):
        # Pickled as mpi4py 4 pickles handles (MPI._reduce): the predefined ones
        # and those equal to them.
        from . import MPI

        return MPI._reduce(self)

    def __repr__(self):
        if self._kind == _MSG:
            return "<shmcoll.MPI.Message from %d, tag %d, %d bytes>" % (
                self._source, self._tag, self._nbytes)
        return "<shmcoll.MPI.Message %s>" % ("MESSAGE_NULL", "MESSAGE_NO_PROC")[self._kind]

    def _take(self, what):
        """The message's (kind, comm, source, tag); it becomes MESSAGE_NULL (the predefined
        MESSAGE_NO_PROC stays itself)."""
        if self._kind == _NULL:
            from . import _errors

            _errors.raise_mpi(_errors.CODES["ERR_REQUEST"],
                              "%s: the message is MESSAGE_NULL" % what)
        got = (self._kind, self._comm, self._source, self._tag)
        if not self._const:
            self._kind, self._comm = _NULL, None
        return got

    # ---- probes, as classmethods ----

    @classmethod
    def Probe(cls, comm, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        return comm.Mprobe(source, tag, status)

    @classmethod
    def Iprobe(cls, comm, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        return comm.Improbe(source, tag, status)

    probe = Probe
    iprobe = Iprobe

    # ---- receives ----

    def Recv(self, buf, status=None):
        kind, comm, source, tag = self._take("Message.Recv")
        if kind == _NO_PROC:
            _null_status(status)
            return
        comm.Recv(buf, source, tag, status)

    def Irecv(self, buf):
        kind, comm, source, tag = self._take("Message.Irecv")
        if kind == _NO_PROC:
            return _shmcoll._Comm.Irecv(_null_comm(), buf, _shmcoll.PROC_NULL)
        r = comm.Irecv(buf, source, tag)
        return r

    def recv(self, status=None):
        """The message's object (None from MESSAGE_NO_PROC)."""
        nbytes = self._nbytes
        kind, comm, source, tag = self._take("Message.recv")
        if kind == _NO_PROC:
            _null_status(status)
            return None
        from ._comm import pickle

        data = bytearray(nbytes)
        comm.Recv(data, source, tag, status)
        return pickle.loads(data)

    def irecv(self):
        """A request whose wait() returns the message's object. The message has arrived, so
        it is received here and now."""
        from ._comm import _ObjRequest

        nbytes = self._nbytes
        kind, comm, source, tag = self._take("Message.irecv")
        r = _ObjRequest._recv(comm, source, tag)
        if kind == _NO_PROC:
            r._deliver(None, None)
            return r
        data = bytearray(nbytes)
        st = Status()
        comm.Recv(data, source, tag, st)
        r._deliver(data, st)
        return r

    def free(self):
        """mpi4py 4's: a message not received becomes MESSAGE_NULL (not the predefined
        ones)."""
        if not self._const:
            self._kind, self._comm = _NULL, None

    def py2f(self):
        return id(self) if self._kind == _MSG else self._kind


def _null_status(status):
    if status is not None:
        status.source, status.tag, status.error = _shmcoll.PROC_NULL, _shmcoll.ANY_TAG, 0
        status.nbytes = status.total = 0
        status.cancelled = False


def _null_comm():
    from . import MPI

    return MPI.COMM_SELF


MESSAGE_NULL = Message()
MESSAGE_NULL._const = True
MESSAGE_NO_PROC = Message._no_proc()
MESSAGE_NO_PROC._const = True
