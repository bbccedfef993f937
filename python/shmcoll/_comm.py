"""The communicator class: the C type's buffer methods (python/src/) and, here, the
object methods of mpi4py (lower case), which pickle what they move."""

import os
import pickle
import sys
import time as _time

from . import _shmcoll

_LEN = "q"  # a pickle's length travels as one int64


def _lengths(n):
    import array

    return array.array(_LEN, [0]) * n


class Status:
    """What a receive got (mpi4py's MPI.Status): source, tag and its size in bytes."""

    def __init__(self):
        self.source = _shmcoll.ANY_SOURCE
        self.tag = _shmcoll.ANY_TAG
        self.nbytes = 0
        self.total = 0

    def Get_source(self):
        return self.source

    def Get_tag(self):
        return self.tag

    def Get_count(self, datatype=None):
        size = 1 if datatype is None else datatype.Get_size()
        return self.nbytes // size

    def Get_elements(self, datatype):
        return self.Get_count(datatype)

    def __repr__(self):
        return "Status(source=%d, tag=%d, nbytes=%d)" % (self.source, self.tag, self.nbytes)


def _vspec(spec, size, what):
    """mpi4py's vector buffer forms -> (buffer, counts, displs): [buf, counts, displs, dtype],
    [buf, (counts, displs), dtype], [buf, counts, dtype], [buf, (counts, displs)],
    [buf, counts], or a buffer alone (no counts). Displacements left out are the counts'
    prefix sums; counts and displacements are in elements."""
    if spec is None or spec is _shmcoll.IN_PLACE:
        return spec, None, None
    dtype = None
    if isinstance(spec, (list, tuple)):
        items = list(spec)
        buf = items.pop(0)
        if items and isinstance(items[-1], _shmcoll.Datatype):
            dtype = items.pop()
        counts = displs = None
        if len(items) == 2:
            counts, displs = items
        elif len(items) == 1:
            counts = items[0]
            if isinstance(counts, tuple) and len(counts) == 2 and not isinstance(counts[0], int):
                counts, displs = counts
        elif items:
            raise TypeError("%s: a vector buffer is [buf, counts, displs, datatype]" % what)
    else:
        buf, counts, displs = spec, None, None
    bufspec = [buf, dtype] if dtype is not None else buf
    if counts is None:
        return bufspec, None, None  # the caller says whether it needs them
    if isinstance(counts, int):
        counts = [counts] * size
    counts = [int(c) for c in counts]
    if displs is None:
        displs, at = [], 0
        for c in counts:
            displs.append(at)
            at += c
    return bufspec, counts, list(displs)


class Comm(_shmcoll._Comm):
    """One rank's communicator: Comm(rank, size, job, arena_bytes=0, timeout_ms=0) makes one
    over the ranks that pass the same job (processes or threads of this machine); init()
    makes the launcher's. A context manager: leaving the block frees it on every rank
    together, or breaks it for every rank when leaving on an exception."""

    def __repr__(self):
        state = "freed" if self.freed else "rank %d of %d" % (self.rank, self.size)
        return "<shmcoll.Comm %s>" % state

    def malloc(self, shape, dtype=float):
        """shmcoll.malloc(self, shape, dtype): a NumPy array over symmetric memory."""
        return malloc(self, shape, dtype)

    # ---- variable counts (buffer specs parsed here, the call in python/src/coll.c) ----

    def Allgatherv(self, sendbuf, recvbuf):
        rb, rc, rd = _vspec(recvbuf, self.size, "Allgatherv")
        if rc is None:
            raise TypeError("Allgatherv: recvbuf needs its counts: [buf, counts, displs, type]")
        self._vcall(0, sendbuf, None, None, rb, rc, rd, 0, _shmcoll.SUM)

    def Gatherv(self, sendbuf, recvbuf, root=0):
        rb, rc, rd = (None, None, None)
        if self.rank == root:
            rb, rc, rd = _vspec(recvbuf, self.size, "Gatherv")
            if rc is None:
                raise TypeError("Gatherv: the root's recvbuf needs its counts")
        self._vcall(1, sendbuf, None, None, rb, rc, rd, root, _shmcoll.SUM)

    def Scatterv(self, sendbuf, recvbuf, root=0):
        sb, sc, sd = (None, None, None)
        if self.rank == root:
            sb, sc, sd = _vspec(sendbuf, self.size, "Scatterv")
            if sc is None:
                raise TypeError("Scatterv: the root's sendbuf needs its counts")
        self._vcall(2, sb, sc, sd, recvbuf, None, None, root, _shmcoll.SUM)

    def Alltoallv(self, sendbuf, recvbuf):
        sb, sc, sd = _vspec(sendbuf, self.size, "Alltoallv")
        rb, rc, rd = _vspec(recvbuf, self.size, "Alltoallv")
        if sc is None or rc is None:
            raise TypeError("Alltoallv: both buffers need their counts")
        self._vcall(3, sb, sc, sd, rb, rc, rd, 0, _shmcoll.SUM)

    def Reduce_scatter(self, sendbuf, recvbuf, recvcounts=None, op=_shmcoll.SUM):
        if recvcounts is None:
            # mpi4py's default: every rank's receive buffer, as many elements as it holds.
            import array

            mine = array.array(_LEN, [len(memoryview(recvbuf).cast("B"))])
            every = _lengths(self.size)
            self.Allgather(mine, every)
            size = memoryview(recvbuf).itemsize
            recvcounts = [n // size for n in every]
        self._vcall(4, sendbuf, None, None, recvbuf, list(recvcounts), None, 0, op)

    # ---- object methods (pickled, as mpi4py's) ----

    # ---- object collectives: a header per object, then its pickle or its raw bytes ----
    #
    # Every object goes out as a header of _HDR int64 (_describe): a NumPy array of a
    # supported dtype as its dtype, shape and bytes, anything else as the length of its
    # pickle. The blocks then move with the byte calls (Bcast, Gatherv, Allgatherv) and are
    # decoded by their headers, so ranks may mix arrays and other objects. A reduction whose
    # headers are all the same array (dtype and shape) with a reduction op runs Allreduce or
    # Reduce on the arrays themselves; every rank sees every header, so all take one path.

    def bcast(self, obj, root=0):
        hdr = _hdr_array()
        if self.rank == root:
            h, payload = _describe(obj)
            hdr[:] = _hdr_array(h)
        self.Bcast(hdr, root)
        if self.rank == root:
            if hdr[1]:
                self.Bcast(_bytes_of(payload), root)
            # mpi4py's root gets a copy too, not the object it passed.
            return payload.copy() if hdr[0] >= 0 else pickle.loads(payload)
        if hdr[0] >= 0:
            out = _empty(hdr)
            if hdr[1]:
                self.Bcast(_bytes_of(out), root)
            return out
        data = bytearray(hdr[1])
        if hdr[1]:
            self.Bcast(data, root)
        return pickle.loads(data)

    def _headers(self, h, root=None):
        """Every rank's header (root None: on every rank; else on the root, None elsewhere)."""
        mine = _hdr_array(h)
        every = _hdr_array(n=self.size) if root is None or self.rank == root else None
        if root is None:
            self.Allgather(mine, every)
        else:
            self.Gather(mine, every, root)
        if every is None:
            return None
        return [every[i * _HDR : (i + 1) * _HDR] for i in range(self.size)]

    def gather(self, sendobj, root=0):
        h, payload = _describe(sendobj)
        every = self._headers(h, root)
        return self._gather_blocks(payload, every, root)

    def _gather_blocks(self, payload, every, root):
        send = _bytes_of(payload)
        if self.rank != root:
            self.Gatherv(send, None, root)
            return None
        counts, displs, out = _layout(every)
        self.Gatherv(send, [out, counts, displs], root)
        return [_decode(every[i], out, displs[i]) for i in range(self.size)]

    def allgather(self, sendobj):
        h, payload = _describe(sendobj)
        return self._allgather_blocks(payload, self._headers(h))

    def _allgather_blocks(self, payload, every):
        counts, displs, out = _layout(every)
        self.Allgatherv(_bytes_of(payload), [out, counts, displs])
        return [_decode(every[i], out, displs[i]) for i in range(self.size)]

    def scatter(self, sendobj, root=0):
        if self.rank == root:
            if sendobj is None or len(sendobj) != self.size:
                raise ValueError("scatter: the root needs a sequence of %d objects" % self.size)
            datas = [pickle.dumps(o, pickle.HIGHEST_PROTOCOL) for o in sendobj]
        lens = _lengths(self.size)
        if self.rank == root:
            for i, d in enumerate(datas):
                lens[i] = len(d)
        self.Bcast(lens, root)
        width = max(lens)
        send = None
        if self.rank == root:
            send = b"".join(d + bytes(width - len(d)) for d in datas)
        out = bytearray(width)
        self.Scatter(send, out, root)
        return pickle.loads(out[: lens[self.rank]])

    def alltoall(self, sendobj):
        if sendobj is None or len(sendobj) != self.size:
            raise ValueError("alltoall: needs a sequence of %d objects" % self.size)
        datas = [pickle.dumps(o, pickle.HIGHEST_PROTOCOL) for o in sendobj]
        lens = _lengths(self.size)
        for i, d in enumerate(datas):
            lens[i] = len(d)
        got = _lengths(self.size)
        self.Alltoall(lens, got)
        mine = _lengths(1)
        mine[0] = max(lens)
        longest = _lengths(1)
        self.Allreduce(mine, longest, op=_shmcoll.MAX)
        width = longest[0]
        out = bytearray(width * self.size)
        self.Alltoall(b"".join(d + bytes(width - len(d)) for d in datas), out)
        return [pickle.loads(out[i * width : i * width + got[i]]) for i in range(self.size)]

    def allreduce(self, sendobj, op=_shmcoll.SUM):
        h, payload = _describe(sendobj)
        every = self._headers(h)
        if _raw_reduction(every, op):
            out = _empty(every[0])
            self.Allreduce(payload, out, op=op)
            return out
        # Every rank folds the same list in rank order: the same result everywhere.
        return _fold(self._allgather_blocks(payload, every), op)

    def reduce(self, sendobj, op=_shmcoll.SUM, root=0):
        h, payload = _describe(sendobj)
        every = self._headers(h)
        if _raw_reduction(every, op):
            out = _empty(every[0]) if self.rank == root else None
            self.Reduce(payload, out, op=op, root=root)
            return out
        objs = self._gather_blocks(payload, every if self.rank == root else None, root)
        return _fold(objs, op) if self.rank == root else None

    def barrier(self):
        self.Barrier()

    # ---- object point-to-point: one message per object, its pickle ----
    #
    # An object receive does not know its size before the message is there, so irecv posts
    # nothing in C: it joins this communicator's queue of object receives (in the order they
    # were posted), and whichever object call waits or tests next matches the messages that
    # have arrived to the queue as MPI does - each to the earliest posted receive it matches
    # (_match). An isend is a C Isend of its pickle, which never waits for the receiver.

    def _objrecvs(self):
        try:
            return self.__dict__["_objq"]
        except KeyError:
            q = self.__dict__["_objq"] = []
            return q

    def _match(self):
        """Gives arrived messages to the queued object receives, each to the earliest posted
        one it matches. Returns whether any receive completed."""
        q = self._objrecvs()
        got = False
        st = Status()
        while q:
            hit = None
            for i, r in enumerate(q):
                if self.Iprobe(r.source, r.tag, st):
                    hit = i
                    break
            if hit is None:
                return got
            # A message that came in during the scan may match an earlier receive, which
            # takes precedence: probe those again until none of them has one.
            again = True
            while again:
                again = False
                for i in range(hit):
                    if self.Iprobe(q[i].source, q[i].tag, st):
                        hit, again = i, True
                        break
            # st is q[hit]'s latest probe (a probe that finds nothing leaves it alone); its
            # message is the earliest of its sender that matches q[hit], so the receive by
            # that sender and tag takes exactly it.
            r = q.pop(hit)
            data = bytearray(st.nbytes)
            self.Recv(data, st.source, st.tag)
            r._deliver(data, st)
            got = True
        return got

    def _progress(self, done):
        """Matches object receives until done() is true; sleeps a little longer each time
        nothing moved (other ranks share the CPUs)."""
        nap = 0.0
        while not done():
            if self._match():
                nap = 0.0
                continue
            if done():
                return
            if nap == 0.0:
                nap = 1e-6
                os.sched_yield()
            else:
                _time.sleep(nap)
                nap = min(nap * 2, 1e-3)

    def isend(self, obj, dest, tag=0):
        data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
        return _ObjRequest._send(self, self.Isend(data, dest, tag))

    def irecv(self, buf=None, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG):
        # buf is accepted for mpi4py's signature; the message's own size is allocated.
        r = _ObjRequest._recv(self, source, tag)
        if source == _shmcoll.PROC_NULL:
            r._deliver(None, None)
        else:
            self._objrecvs().append(r)
        return r

    def send(self, obj, dest, tag=0):
        data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
        if not self.__dict__.get("_objq"):
            self.Send(data, dest, tag)
            return
        # Object receives are queued: a large message to a peer whose own send waits for
        # one of them must not wait for that peer, so this send serves them while it waits.
        _ObjRequest._send(self, self.Isend(data, dest, tag)).wait()

    def recv(self, buf=None, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        if source == _shmcoll.PROC_NULL:
            if status is not None:
                _null_status(status)
            return None
        if not self.__dict__.get("_objq"):
            st = Status()
            self.Probe(source, tag, st)
            data = bytearray(st.nbytes)
            self.Recv(data, st.source, st.tag, status)
            return pickle.loads(data)
        # Receives posted before this one take their messages first.
        return self.irecv(None, source, tag).wait(status)

    def sendrecv(
        self,
        sendobj,
        dest,
        sendtag=0,
        recvbuf=None,
        source=_shmcoll.ANY_SOURCE,
        recvtag=_shmcoll.ANY_TAG,
        status=None,
    ):
        # The send never waits for its receiver (isend), so two ranks that sendrecv to each
        # other both get to their receive; the peer may receive with recv or irecv.
        req = self.isend(sendobj, dest, sendtag) if dest != _shmcoll.PROC_NULL else None
        obj = self.recv(recvbuf, source, recvtag, status)
        if req is not None:
            req.wait()
        return obj


def _null_status(status):
    status.source = _shmcoll.PROC_NULL
    status.tag = _shmcoll.ANY_TAG
    status.nbytes = 0
    status.total = 0


class _ObjRequest(_shmcoll.Request):
    """The request of an object isend or irecv: mpi4py's wait(status=None) (the object
    received, None for a send) and test() -> (flag, object), and Wait/Test as every request.
    The object is returned once, by the call that completes the request, as in mpi4py."""

    __slots__ = ("_comm", "_c", "source", "tag", "_done", "_data", "_st", "_taken")

    @classmethod
    def _send(cls, comm, creq):
        r = cls()
        r._comm, r._c, r.source, r.tag = comm, creq, None, None
        r._done, r._data, r._st, r._taken = False, None, None, False
        return r

    @classmethod
    def _recv(cls, comm, source, tag):
        r = cls()
        r._comm, r._c, r.source, r.tag = comm, None, source, tag
        r._done, r._data, r._st, r._taken = False, None, None, False
        return r

    def _deliver(self, data, st):
        self._done, self._data = True, data
        if st is not None:
            self._st = (st.source, st.tag, st.nbytes)

    @property
    def completed(self):
        return self._ready()

    def _ready(self):
        # Whether it completed, moving messages on the way; nothing is taken from it.
        if self._done:
            return True
        if self._c is not None:
            if self._c.Test():
                self._done = True
                return True
            if self._comm.__dict__.get("_objq"):
                self._comm._match()
            return False
        self._comm._match()
        return self._done

    def _result(self, status):
        if status is not None:
            if self._st is not None:
                status.source, status.tag, status.nbytes = self._st
                status.total = self._st[2]
            elif self._c is None:
                _null_status(status)
        if self._taken or self._data is None:
            self._taken = True
            return None
        self._taken = True
        data, self._data = self._data, None
        return pickle.loads(data)

    def wait(self, status=None):
        if not self._done:
            comm = self._comm
            q = comm.__dict__.get("_objq")
            if self._c is not None and not q:
                self._c.Wait()  # nothing to serve while it waits
                self._done = True
            elif self._c is None and q == [self]:
                # The only receive queued: it takes the first matching message to come.
                st = Status()
                comm.Probe(self.source, self.tag, st)
                comm._match()
                if not self._done:
                    comm._progress(lambda: self._done)
            else:
                comm._progress(self._ready)
        return self._result(status)

    def test(self, status=None):
        if not self._ready():
            return (False, None)
        return (True, self._result(status))

    def Wait(self, status=None):
        self.wait(status)

    def Test(self, status=None):
        if not self._ready():
            return False
        if status is not None:
            self._result_status(status)
        return True

    def _result_status(self, status):
        if self._st is not None:
            status.source, status.tag, status.nbytes = self._st
            status.total = self._st[2]


_HDR = 12  # kind (a dtype's index, or -1: a pickle), bytes, ndim, 8 dims, 0
_MAXDIM = 8
# The NumPy dtypes that travel raw: the C API's element types NumPy has.
_RAW = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
_RAW_INT = 6  # _RAW[:6] are the integers (BAND, BOR, BXOR)
_ALIGN = 64  # where each block starts in a gathered buffer


def _hdr_array(h=None, n=1):
    import array

    if h is not None:
        return array.array(_LEN, h)
    return array.array(_LEN, [0]) * (_HDR * n)


def _describe(obj):
    """(header, payload): a NumPy array of a supported dtype (native byte order, 1 to 8
    dimensions, no subclass) as itself, C-contiguous; anything else as its pickle."""
    np = sys.modules.get("numpy")  # no array without NumPy imported
    if (
        np is not None
        and type(obj) is np.ndarray
        and 1 <= obj.ndim <= _MAXDIM
        and obj.dtype.isnative
        and obj.dtype.name in _RAW
    ):
        a = np.ascontiguousarray(obj)
        dims = list(a.shape) + [0] * (_MAXDIM - a.ndim)
        return [_RAW.index(a.dtype.name), a.nbytes, a.ndim] + dims + [0], a
    data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
    return [-1, len(data), 0] + [0] * (_MAXDIM + 1), data


def _bytes_of(payload):
    # The payload as bytes for the calls that move bytes (an empty array's too).
    m = memoryview(payload)
    return m.cast("B") if m.nbytes else b""


def _empty(h):
    import numpy as np

    return np.empty(tuple(h[3 : 3 + h[2]]), _RAW[h[0]])


def _layout(every):
    """Counts and displacements (bytes) of the blocks every header announces, each block at
    a multiple of _ALIGN so the arrays decoded from it are aligned; and the buffer."""
    counts, displs, at = [], [], 0
    for h in every:
        counts.append(h[1])
        displs.append(at)
        at += -(-h[1] // _ALIGN) * _ALIGN
    np = sys.modules.get("numpy")
    if np is not None and any(h[0] >= 0 for h in every):
        out = np.empty(max(at, 1), np.uint8)  # NumPy's allocation is aligned
    else:
        out = bytearray(max(at, 1))
    return counts, displs, out


def _decode(h, out, at):
    if h[0] < 0:
        return pickle.loads(memoryview(out)[at : at + h[1]])
    import numpy as np

    a = np.frombuffer(out, np.uint8, h[1], at).view(_RAW[h[0]])
    return a.reshape(tuple(h[3 : 3 + h[2]]))


_RAW_OPS = ("SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR")


def _raw_reduction(every, op):
    """Whether a reduction runs on the arrays themselves: every rank's header the same
    array (dtype and shape) and op one of the C library's that the dtype has."""
    first = every[0]
    if first[0] < 0 or any(h != first for h in every[1:]):
        return False
    if not isinstance(op, _shmcoll.Op) or id(op) not in _RAW_OP_IDS:
        return False
    bitwise = op is _shmcoll.BAND or op is _shmcoll.BOR or op is _shmcoll.BXOR
    return not bitwise or first[0] < _RAW_INT


_RAW_OP_IDS = {id(getattr(_shmcoll, n)) for n in _RAW_OPS}


_PY_OPS = {
    id(_shmcoll.SUM): lambda a, b: a + b,
    id(_shmcoll.PROD): lambda a, b: a * b,
    id(_shmcoll.MIN): min,
    id(_shmcoll.MAX): max,
    id(_shmcoll.BAND): lambda a, b: a & b,
    id(_shmcoll.BOR): lambda a, b: a | b,
    id(_shmcoll.BXOR): lambda a, b: a ^ b,
}


def _fold(objs, op):
    if callable(op) and not isinstance(op, _shmcoll.Op):
        fn = op
    elif isinstance(op, _shmcoll.Op) and id(op) in _PY_OPS:
        fn = _PY_OPS[id(op)]
    else:
        raise TypeError("the object reductions take SUM, PROD, MIN, MAX, BAND, BOR, BXOR or a "
                        "function of two arguments")
    acc = objs[0]
    for o in objs[1:]:
        acc = fn(acc, o)
    return acc


def malloc(comm, shape, dtype=float):
    """A NumPy array of shape and dtype over symmetric memory of comm (shmcoll_malloc): zero
    copy, C-contiguous, writable, its contents unspecified (as numpy.empty's). A collective
    call whose send buffer is such an array is read by the peers where it lies, with no
    staging copy; otherwise it is an ordinary array, and every call takes it.

    Collective: every rank of comm calls it, in the same order as comm's other collectives,
    with the same shape and dtype (the same bytes; ranks that differ break comm and raise
    shmcoll.Error with EPROTO). dtype is anything numpy.dtype() accepts but one holding
    Python objects. A shape with a negative or non-integer entry, no bytes (an empty shape
    or a zero-size dtype) or a dtype NumPy rejects raise ValueError or TypeError on the
    rank that passed it, before it calls into the library; as with the other calls, a rank
    whose check fails while the others' pass leaves them waiting in the call (until comm's
    timeout, or until the failing rank breaks comm). A failure of the library (no room in
    /dev/shm, a broken communicator) raises shmcoll.Error with its message.

    The memory stays until the communicator is freed: dropping the array frees nothing (a
    free would be collective). The array holds comm, so it keeps working when comm's last
    other reference goes; and Free() on comm while such arrays are alive frees the
    communicator for use (comm.freed is true, its calls raise) but keeps its memory mapped
    until the last of those arrays goes (docs/PYTHON.md, "Symmetric memory")."""
    import numpy as np

    dt = np.dtype(dtype)  # TypeError for what NumPy rejects
    if dt.hasobject:
        raise TypeError("malloc: dtype %s holds Python objects, which cannot live in "
                        "shared memory" % dt)
    dims = _shape(shape)
    count = 1
    for d in dims:
        count *= d
    nbytes = count * dt.itemsize
    if nbytes == 0:
        raise ValueError("malloc: shape %s of dtype %s holds no bytes (shmcoll_malloc takes "
                         "1 or more)" % (dims, dt))
    if nbytes > sys.maxsize:
        raise ValueError("malloc: shape %s of dtype %s is %d bytes, more than an address space"
                         % (dims, dt, nbytes))
    buf = comm._malloc(nbytes)
    # The array's base is buf, which holds comm: buf goes with the last array over it.
    return np.ndarray(dims, dt, buffer=buf)


def _shape(shape):
    """shape as a tuple of non-negative ints: an int n is (n,)."""
    import operator

    try:
        dims = (operator.index(shape),)
    except TypeError:
        try:
            dims = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise TypeError("malloc: shape must be an int or a sequence of ints, got %r"
                            % (shape,)) from None
    if any(d < 0 for d in dims):
        raise ValueError("malloc: negative dimension in shape %s" % (dims,))
    return dims


def init(timeout_ms=None):
    """The launcher's job, as shmcoll_init finds it: shmcoll-run's, torchrun's, Open MPI's,
    MPICH's or Slurm's (docs/PYTHON.md), or a job of one rank of its own when none.
    timeout_ms, when given, sets SHMCOLL_TIMEOUT_MS for it."""
    if timeout_ms is not None:
        os.environ["SHMCOLL_TIMEOUT_MS"] = str(int(timeout_ms))
    return _shmcoll.init(Comm)
