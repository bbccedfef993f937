"""The communicator class: the C type's buffer methods (python/_shmcoll.c) and, here, the
object methods of mpi4py (lower case), which pickle what they move."""

import pickle

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

    # ---- variable counts (buffer specs parsed here, the call in _shmcoll.c) ----

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

    def _bcast_bytes(self, data, root):
        n = _lengths(1)
        if self.rank == root:
            n[0] = len(data)
        self.Bcast(n, root)
        if self.rank != root:
            data = bytearray(n[0])
        if n[0]:
            self.Bcast(data, root)
        return data

    def bcast(self, obj, root=0):
        data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL) if self.rank == root else None
        data = self._bcast_bytes(data, root)
        return obj if self.rank == root else pickle.loads(data)

    def _padded(self, data, n):
        # Every rank's pickle padded to the longest, so the equal-count calls move them.
        longest = _lengths(1)
        self.Allreduce(n, longest, op=_shmcoll.MAX)
        return bytes(data) + bytes(longest[0] - len(data)), longest[0]

    def gather(self, sendobj, root=0):
        data = pickle.dumps(sendobj, pickle.HIGHEST_PROTOCOL)
        mine = _lengths(1)
        mine[0] = len(data)
        lens = _lengths(self.size) if self.rank == root else None
        self.Gather(mine, lens, root)
        block, width = self._padded(data, mine)
        out = bytearray(width * self.size) if self.rank == root else None
        self.Gather(block, out, root)
        if self.rank != root:
            return None
        return [pickle.loads(out[i * width : i * width + lens[i]]) for i in range(self.size)]

    def allgather(self, sendobj):
        data = pickle.dumps(sendobj, pickle.HIGHEST_PROTOCOL)
        mine = _lengths(1)
        mine[0] = len(data)
        lens = _lengths(self.size)
        self.Allgather(mine, lens)
        width = max(lens)
        out = bytearray(width * self.size)
        self.Allgather(bytes(data) + bytes(width - len(data)), out)
        return [pickle.loads(out[i * width : i * width + lens[i]]) for i in range(self.size)]

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
        # Every rank folds the same list in rank order: the same result everywhere.
        return _fold(self.allgather(sendobj), op)

    def reduce(self, sendobj, op=_shmcoll.SUM, root=0):
        objs = self.gather(sendobj, root)
        return _fold(objs, op) if self.rank == root else None

    def barrier(self):
        self.Barrier()

    def send(self, obj, dest, tag=0):
        self.Send(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL), dest, tag)

    def recv(self, buf=None, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        st = Status()
        self.Probe(source, tag, st)
        data = bytearray(st.nbytes)
        self.Recv(data, st.source, st.tag, status)
        return pickle.loads(data)

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
        # The send goes first only when it cannot wait for the receive: small pickles are
        # eager; a larger one is sent with Sendrecv against a probed size.
        data = pickle.dumps(sendobj, pickle.HIGHEST_PROTOCOL)
        n = _lengths(1)
        n[0] = len(data)
        got = _lengths(1)
        st = Status()
        self.Sendrecv(n, dest, sendtag, got, source, recvtag, st)
        out = bytearray(got[0])
        self.Sendrecv(data, dest, sendtag, out, st.source, st.tag, status)
        return pickle.loads(out)


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


def init(timeout_ms=None):
    """The launcher's job: shmcoll-run's (SHMCOLL_RANK, SHMCOLL_SIZE, SHMCOLL_JOB), or a job of
    one rank of its own when none. timeout_ms, when given, sets SHMCOLL_TIMEOUT_MS for it."""
    if timeout_ms is not None:
        import os

        os.environ["SHMCOLL_TIMEOUT_MS"] = str(int(timeout_ms))
    return _shmcoll.init(Comm)
