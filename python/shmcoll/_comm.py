"""The communicator classes: the C type's buffer methods (python/src/) and, here, what mpi4py's
communicators have besides: groups, the making of communicators (Create, Create_group,
Split_type, ...), names, attributes, info, persistent requests, matched probes, and the object
methods (lower case), which pickle what they move.

BaseComm is mpi4py's MPI.Comm, Comm (shmcoll.Comm) its MPI.Intracomm: the class of
COMM_WORLD. A communicator knows the world ranks (COMM_WORLD's ranks) of its ranks, for its
group, and a name (_uid) that every rank of it gives alike, from which the communicators
made from it derive theirs (Create_group's arena among the group's members only)."""

import array
import errno
import functools
import hashlib
import operator
import os
import pickle as _pickle_mod
import socket
import sys
import threading
import time as _time
import warnings
import weakref

from . import _errors, _shmcoll
from ._group import ClassOrInstance, Group, _one_of
from ._info import ERRORS_ARE_FATAL, ERRORS_RETURN, INFO_NULL, Errhandler, Info
from ._message import Message
from ._request import Prequest
from ._status import Status

_LEN = "q"  # a pickle's length travels as one int64
_UNDEFINED = _shmcoll.UNDEFINED
_IDENT, _CONGRUENT, _SIMILAR, _UNEQUAL = 0, 1, 2, 3

# Comm.Get_attr's predefined keys (Open MPI's numbers, as Debian's mpi4py has them).
TAG_UB, HOST, IO, WTIME_IS_GLOBAL, UNIVERSE_SIZE, APPNUM, LASTUSEDCODE = 0, 1, 2, 3, 6, 4, 5
KEYVAL_INVALID = -1
COMM_TYPE_SHARED = 0
# mpi4py 4's hardware split types: one node is all the hardware shmcoll knows.
COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED, COMM_TYPE_RESOURCE_GUIDED = 1, 2, 3
_SPLIT_TYPES = (COMM_TYPE_SHARED, COMM_TYPE_HW_GUIDED, COMM_TYPE_HW_UNGUIDED,
                COMM_TYPE_RESOURCE_GUIDED)


class Pickle:
    """mpi4py's MPI.pickle: how the object methods serialize (Pickle(dumps, loads, protocol);
    a program may set its own with MPI.pickle.__init__(dumps, loads))."""

    def __init__(self, dumps=None, loads=None, protocol=None):
        self._dumps = dumps if dumps is not None else _pickle_mod.dumps
        self._loads = loads if loads is not None else _pickle_mod.loads
        if protocol is None and dumps is None:
            protocol = _pickle_mod.HIGHEST_PROTOCOL
        self.PROTOCOL = protocol

    def dumps(self, obj, buffer_callback=None):
        if self.PROTOCOL is None:
            return self._dumps(obj)
        return self._dumps(obj, self.PROTOCOL)

    def loads(self, data, buffers=None):
        # An empty message is None, as mpi4py receives one (a send of [None, 0, 'B']).
        if len(data) == 0:
            return None
        return self._loads(data)


pickle = Pickle()


def _lengths(n):
    return array.array(_LEN, [0]) * n


def _h(*parts):
    """A short name every rank derives alike from the same parts."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def _err_comm(what):
    _errors.raise_mpi(_errors.CODES["ERR_COMM"], "%s: the communicator is COMM_NULL" % what)


def _unsupported(feature):
    return NotImplementedError("shmcoll.MPI: %s is not supported" % feature)


# mpi4py's per-communicator locks (MPI._comm_lock_table): each object collective, and recv,
# holds the lock of its name while it runs, so two threads' calls of one kind on one
# communicator take turns instead of mixing their messages. The table lives in the
# communicator's __dict__, which its second handles share.
_locks_lock = threading.Lock()


def _comm_lock_table(comm):
    """The communicator's locks by name (a dict of threading.Lock): mpi4py's private
    MPI._comm_lock_table."""
    if not isinstance(comm, _shmcoll._Comm):
        raise TypeError("_comm_lock_table: expecting a communicator, not %s"
                        % type(comm).__name__)
    if comm.freed:
        _err_comm("_comm_lock_table")
    with _locks_lock:
        return comm.__dict__.setdefault("_locks", {})


def _comm_lock(comm, key=None):
    """The communicator's lock of that name, made on first use: mpi4py's MPI._comm_lock."""
    table = _comm_lock_table(comm)
    with _locks_lock:
        lock = table.get(key)
        if lock is None:
            lock = table[key] = threading.Lock()
        return lock


def _locked(name):
    """An object collective that holds its communicator's lock of its name while it runs."""

    def wrap(fn):
        @functools.wraps(fn)
        def call(self, *args, **kw):
            with self._lock(name):
                return fn(self, *args, **kw)

        return call

    return wrap


# Communicators by their py2f handle (for f2py).
_handles = weakref.WeakValueDictionary()


class BaseComm(_shmcoll._Comm):
    """A communicator (mpi4py's MPI.Comm). BaseComm() is a null one, equal to COMM_NULL and to
    every freed communicator; BaseComm(comm) the same communicator as comm (one handle: freeing
    either frees it); Comm(rank, size, job, arena_bytes=0, timeout_ms=0) makes one over the
    ranks that pass the same job (processes or threads of this machine)."""

    def __init__(self, *args, **kw):
        # A communicator made from a job name: its ranks share that name (the C type's
        # constructor took the arguments).
        job = args[2] if len(args) > 2 else kw.get("job")
        if job is not None:
            self.__dict__["_id"] = _h("job", job)

    def __repr__(self):
        if self.freed:
            return "<shmcoll.%s COMM_NULL>" % type(self).__name__
        return "<shmcoll.%s rank %d of %d>" % (type(self).__name__, self.rank, self.size)

    # ---- handles: null, equality ----

    def __bool__(self):
        return not self.freed

    def __eq__(self, other):
        if not isinstance(other, _shmcoll._Comm):
            return NotImplemented
        if self.freed or other.freed:
            return self.freed and other.freed
        return self._handle is other._handle

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return 0 if self.freed else id(self._handle)

    def __reduce__(self):
        # Pickled as mpi4py 4 pickles handles (MPI._reduce): the predefined ones
        # and those equal to them.
        from . import MPI

        return MPI._reduce(self)

    def _live(self, what):
        if self.freed:
            _err_comm(what)

    def _lock(self, name):
        """The lock of that name in the communicator's table (_comm_lock_table)."""
        table = self.__dict__.get("_locks")
        lock = table.get(name) if table is not None else None
        return lock if lock is not None else _comm_lock(self, name)

    # ---- what every rank knows of the communicator ----

    def _wranks(self):
        """The world ranks of its ranks, in rank order."""
        w = self.__dict__.get("_wr")
        if w is None:
            w = self.__dict__["_wr"] = tuple(range(self.size))
        return w

    def _uid(self):
        u = self.__dict__.get("_id")
        if u is None:
            _errors.raise_mpi(_errors.CODES["ERR_COMM"],
                              "Create_group: this communicator has no name its ranks share "
                              "(it was not made by MPI.COMM_WORLD, shmcoll.init or "
                              "shmcoll.Comm)")
        return u

    def _next(self):
        """The number of the next communicator made from this one (collective calls count on
        every rank alike)."""
        n = self.__dict__.get("_made", 0)
        self.__dict__["_made"] = n + 1
        return n

    def _adopt(self, new, wranks, uid, info=None):
        """new, made from self: its world ranks, its name and its info."""
        d = new.__dict__
        d["_wr"], d["_id"] = tuple(wranks), uid  # and ERRORS_RETURN, as mpi4py sets
        if info is not None:
            d["_info"] = dict(info.items()) if info else {}
        return new

    def _null(self):
        return type(self)()

    # ---- groups ----

    def Get_group(self):
        self._live("Comm.Get_group")
        w = self._wranks()
        return Group._of(w, w[self.rank])

    @property
    def group(self):
        return self.Get_group()

    def Compare(comm1, comm2=None, *, comm=None):
        """IDENT: the same communicator; CONGRUENT: the same ranks in the same order; SIMILAR:
        the same ranks; UNEQUAL. mpi4py 3's Comm.Compare(comm1, comm2) and 4's
        comm.Compare(comm)."""
        comm2 = _one_of(comm2, comm, "comm2", "comm")
        for c in (comm1, comm2):
            if not isinstance(c, _shmcoll._Comm):
                raise TypeError("Comm.Compare: expecting communicators")
            if c.freed:
                _err_comm("Comm.Compare")
        if comm1 == comm2:
            return _IDENT
        a, b = comm1._wranks(), comm2._wranks()
        if a == b:
            return _CONGRUENT
        if len(a) == len(b) and set(a) == set(b):
            return _SIMILAR
        return _UNEQUAL

    Compare = ClassOrInstance(Compare, lambda args, kw: len(args) > 1 or "comm1" in kw)

    # ---- making communicators (collective over self but Create_group) ----

    def Dup(self, info=None):
        self._live("Comm.Dup")
        n = self._next()
        new = _shmcoll._Comm.Dup(self)
        self._adopt(new, self._wranks(), _h(self._uid_or_none(), "dup", n),
                    info if info is not None else self.Get_info())
        self._copy_attrs(new)
        return new

    def _uid_or_none(self):
        return self.__dict__.get("_id")

    def Dup_with_info(self, info):
        return self.Dup(info)

    def Clone(self):
        return self.Dup()

    def Idup(self, info=None):
        """(a Dup, a request): the Dup is made at once, so the request is complete."""
        return self.Dup(info), _shmcoll.Request()

    def Idup_with_info(self, info):
        return self.Idup(info)

    def Split(self, color=0, key=0):
        """The ranks of one color (>= 0) get a communicator ranked by key (then by rank);
        color UNDEFINED gets COMM_NULL."""
        self._live("Comm.Split")
        n = self._next()
        new = _shmcoll._Comm.Split(self, color, key)
        if new is None:
            return self._null()
        mine = array.array(_LEN, [self._wranks()[self.rank]])
        every = _lengths(new.size)
        new.Allgather(mine, every)
        return self._adopt(new, every, _h(self._uid_or_none(), "split", n, color), INFO_NULL)

    def Create(self, group):
        """Collective over self: the members of group get a communicator ranked as in group;
        the others COMM_NULL."""
        self._live("Comm.Create")
        members = self._members(group, "Comm.Create")
        n = self._next()
        me = self._wranks()[self.rank]
        g = {w: i for i, w in enumerate(members)}
        color = 0 if me in g else _UNDEFINED
        new = _shmcoll._Comm.Split(self, color, g.get(me, 0))
        if new is None:
            return self._null()
        return self._adopt(new, members, _h(self._uid_or_none(), "create", n), INFO_NULL)

    def Create_group(self, group, tag=0):
        """Collective over the members of group only: a communicator of theirs, ranked as in
        group. They meet in an arena of their own, named alike by every member from this
        communicator's name, the members, the tag and how many times they made one so."""
        self._live("Comm.Create_group")
        members = self._members(group, "Comm.Create_group")
        me = self._wranks()[self.rank]
        if me not in members:
            _errors.raise_mpi(_errors.CODES["ERR_GROUP"],
                              "Comm.Create_group: this rank is not in the group")
        key = (members, int(tag))
        counts = self.__dict__.setdefault("_cg", {})
        k = counts.get(key, 0)
        counts[key] = k + 1
        job = "pyg-" + _h(self._uid(), members, int(tag), k)
        new = type(self)(members.index(me), len(members), job)
        return self._adopt(new, members, job, INFO_NULL)

    def _members(self, group, what):
        if not isinstance(group, Group):
            raise TypeError("%s: expecting a Group, not %s" % (what, type(group).__name__))
        if not group:
            _errors.raise_mpi(_errors.CODES["ERR_GROUP"], "%s: the group is GROUP_NULL" % what)
        members = group._h.members
        mine = set(self._wranks())
        if any(w not in mine for w in members):
            _errors.raise_mpi(_errors.CODES["ERR_GROUP"],
                              "%s: the group has processes outside the communicator" % what)
        return members

    def Split_type(self, split_type, key=0, info=INFO_NULL):
        """COMM_TYPE_SHARED: a communicator per node (every rank of a communicator within one
        node gets one over them all); UNDEFINED: COMM_NULL."""
        self._live("Comm.Split_type")
        if split_type != _UNDEFINED and split_type not in _SPLIT_TYPES:
            _errors.raise_mpi(_errors.CODES["ERR_ARG"],
                              "Comm.Split_type: unknown split type %r" % (split_type,))
        color = 0
        if int(os.environ.get("SHMCOLL_NNODES", "1") or 1) > 1:
            hosts = self.allgather(socket.gethostname())
            color = hosts.index(hosts[self.rank])
        return self.Split(color if split_type != _UNDEFINED else _UNDEFINED, key)

    def Free(self):
        """Frees the communicator on this rank: it becomes COMM_NULL. Its operations still
        outstanding complete (their requests' Wait and Test work); the C communicator goes
        when the last of them has. COMM_WORLD and COMM_SELF are not freed by a program (MPI:
        ERR_COMM); they go at its exit."""
        self._live("Comm.Free")
        if self.__dict__.get("_predefined"):
            _errors.raise_mpi(_errors.CODES["ERR_COMM"], "Comm.Free: %s is not freed by a "
                              "program (it goes at exit)" % self.Get_name())
        self._delete_attrs()
        self.__dict__.pop("_locks", None)
        _shmcoll._Comm.Free(self)

    def Disconnect(self):
        self.Free()

    def free(self):
        """mpi4py 4's: Free, but a no-op for COMM_NULL, COMM_WORLD and COMM_SELF."""
        if not self.freed and not self.__dict__.get("_predefined"):
            self.Free()

    # ---- what mpi4py asks of every communicator ----

    def Is_inter(self):
        self._live("Comm.Is_inter")
        return False

    def Is_intra(self):
        self._live("Comm.Is_intra")
        return True

    is_inter = property(Is_inter)
    is_intra = property(Is_intra)

    def Get_topology(self):
        self._live("Comm.Get_topology")
        return _UNDEFINED

    topology = property(Get_topology)
    is_topo = property(lambda self: False)

    @classmethod
    def Get_parent(cls):
        """COMM_NULL: no process here was spawned."""
        from . import MPI

        return MPI.Intercomm()

    @classmethod
    def Join(cls, fd):
        raise _unsupported("dynamic processes (Comm.Join)")

    def Get_name(self):
        """The name Set_name gave (MPI_COMM_WORLD, MPI_COMM_SELF, else empty). COMM_NULL's:
        mpi4py 4 (over Open MPI 5) gives "MPI_COMM_NULL", mpi4py 3 raises ERR_COMM."""
        if self.freed:
            from . import _api

            if _api.MAJOR >= 4:
                return "MPI_COMM_NULL"
        self._live("Comm.Get_name")
        return self.__dict__.get("_name", "")

    def Set_name(self, name):
        self._live("Comm.Set_name")
        self.__dict__["_name"] = str(name)

    name = property(Get_name, Set_name)

    def Get_info(self):
        self._live("Comm.Get_info")
        return Info.Create(self.__dict__.get("_info", {}))

    def Set_info(self, info):
        self._live("Comm.Set_info")
        self.__dict__["_info"] = dict(info.items()) if info else {}

    info = property(Get_info, Set_info)

    def Get_errhandler(self):
        self._live("Comm.Get_errhandler")
        return Errhandler(self.__dict__.get("_errh", ERRORS_RETURN))

    def Set_errhandler(self, errhandler):
        """Takes ERRORS_RETURN, ERRORS_ARE_FATAL, ERRORS_ABORT; errors always raise
        MPI.Exception (mpi4py's default)."""
        self._live("Comm.Set_errhandler")
        if not isinstance(errhandler, Errhandler):
            raise TypeError("Comm.Set_errhandler: expecting an error handler")
        if not errhandler:
            _errors.raise_mpi(_errors.CODES["ERR_ARG"], "Comm.Set_errhandler: ERRHANDLER_NULL")
        self.__dict__["_errh"] = Errhandler(errhandler)

    def Call_errhandler(self, errorcode):
        self._live("Comm.Call_errhandler")
        if self.__dict__.get("_errh") == ERRORS_ARE_FATAL:
            self.Abort(errorcode)

    def Abort(self, errorcode=0):
        """Ends this process with errorcode, breaking the communicator for every rank (their
        calls raise instead of waiting for this one). COMM_NULL raises ERR_COMM instead."""
        self._live("Comm.Abort")
        _shmcoll._Comm.Abort(self, errorcode)

    def py2f(self):
        if self.freed:
            return 0
        h = id(self._handle) & 0x3FFFFFFF or 1
        _handles[h] = self._handle
        return h

    @classmethod
    def f2py(cls, arg):
        try:
            return cls(_handles[arg])
        except KeyError:
            return cls()

    # mpi4py 4's names of the same.
    tohandle = py2f
    fromhandle = f2py
    handle = property(py2f)

    # mpi4py 4's buffer of the buffered sends, per communicator: kept, not needed.
    def Attach_buffer(self, buf):
        self.__dict__["_bsend_buf"] = buf

    def Detach_buffer(self):
        return self.__dict__.pop("_bsend_buf", None)

    def Flush_buffer(self):
        pass

    def Iflush_buffer(self):
        return _shmcoll.Request()

    # ---- attributes ----

    def Get_attr(self, keyval):
        self._live("Comm.Get_attr")
        if keyval == TAG_UB:
            return 0x7FFFFFFF
        if keyval == HOST:
            return _shmcoll.PROC_NULL
        if keyval == IO:
            return _shmcoll.ANY_SOURCE  # every rank can do I/O
        if keyval == WTIME_IS_GLOBAL:
            return 0
        if keyval == UNIVERSE_SIZE:
            return len(self._wranks()) if self.__dict__.get("_world") else _world_size()
        if keyval == APPNUM:
            return 0
        if keyval == LASTUSEDCODE:
            return _errors.ERR_LASTCODE
        _keyval(keyval, "Comm.Get_attr")
        return self.__dict__.get("_attrs", {}).get(keyval)

    def Set_attr(self, keyval, attrval):
        self._live("Comm.Set_attr")
        kv = _keyval(keyval, "Comm.Set_attr")
        attrs = self.__dict__.setdefault("_attrs", {})
        if keyval in attrs and kv[1] is not None:
            kv[1](self, keyval, attrs[keyval])
        attrs[keyval] = attrval

    def Delete_attr(self, keyval):
        self._live("Comm.Delete_attr")
        kv = _keyval(keyval, "Comm.Delete_attr")
        attrs = self.__dict__.get("_attrs", {})
        if keyval not in attrs:
            _errors.raise_mpi(_errors.CODES["ERR_KEYVAL"],
                              "Comm.Delete_attr: no attribute of keyval %d" % keyval)
        val = attrs.pop(keyval)
        if kv[1] is not None:
            kv[1](self, keyval, val)

    @classmethod
    def Create_keyval(cls, copy_fn=None, delete_fn=None, nopython=False):
        """A new attribute key. copy_fn(comm, keyval, value) -> the Dup's value
        (NotImplemented: none); None: not copied; True: copied as is."""
        k = _next_keyval[0]
        _next_keyval[0] += 1
        _keyvals[k] = (copy_fn, delete_fn)
        return k

    @classmethod
    def Free_keyval(cls, keyval):
        _keyval(keyval, "Comm.Free_keyval")
        del _keyvals[keyval]
        return KEYVAL_INVALID

    def _copy_attrs(self, new):
        attrs = self.__dict__.get("_attrs")
        if not attrs:
            return
        out = {}
        for k, v in attrs.items():
            copy_fn = _keyvals.get(k, (None, None))[0]
            if copy_fn is None or copy_fn is False:
                continue
            nv = v if copy_fn is True else copy_fn(self, k, v)
            if nv is not NotImplemented:
                out[k] = nv
        new.__dict__["_attrs"] = out

    def _delete_attrs(self):
        attrs = self.__dict__.pop("_attrs", None)
        for k, v in (attrs or {}).items():
            delete_fn = _keyvals.get(k, (None, None))[1]
            if delete_fn is not None:
                delete_fn(self, k, v)

    # ---- point to point: persistent requests, matched probes ----

    def Send_init(self, buf, dest, tag=0):
        """A persistent request whose each Start() is Isend(buf, dest, tag)."""
        self._live("Comm.Send_init")
        return Prequest._make(lambda: self.Isend(buf, dest, tag))

    def Ssend_init(self, buf, dest, tag=0):
        self._live("Comm.Ssend_init")
        return Prequest._make(lambda: self.Issend(buf, dest, tag))

    def Bsend_init(self, buf, dest, tag=0):
        self._live("Comm.Bsend_init")
        return Prequest._make(lambda: self.Ibsend(buf, dest, tag))

    def Rsend_init(self, buf, dest, tag=0):
        self._live("Comm.Rsend_init")
        return Prequest._make(lambda: self.Irsend(buf, dest, tag))

    def Recv_init(self, buf, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG):
        """A persistent request whose each Start() is Irecv(buf, source, tag)."""
        self._live("Comm.Recv_init")
        return Prequest._make(lambda: self.Irecv(buf, source, tag))

    # ---- persistent collectives (mpi4py 4): each Start() starts the non-blocking call ----

    def _init(self, what, call, *args):
        self._live("Comm." + what)
        start = getattr(self, call)
        return Prequest._make(lambda: start(*args))

    def Barrier_init(self, info=INFO_NULL):
        return self._init("Barrier_init", "Ibarrier")

    def Bcast_init(self, buf, root=0, info=INFO_NULL):
        return self._init("Bcast_init", "Ibcast", buf, root)

    def Gather_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL):
        return self._init("Gather_init", "Igather", sendbuf, recvbuf, root)

    def Gatherv_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL):
        return self._init("Gatherv_init", "Igatherv", sendbuf, recvbuf, root)

    def Scatter_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL):
        return self._init("Scatter_init", "Iscatter", sendbuf, recvbuf, root)

    def Scatterv_init(self, sendbuf, recvbuf, root=0, info=INFO_NULL):
        return self._init("Scatterv_init", "Iscatterv", sendbuf, recvbuf, root)

    def Allgather_init(self, sendbuf, recvbuf, info=INFO_NULL):
        return self._init("Allgather_init", "Iallgather", sendbuf, recvbuf)

    def Allgatherv_init(self, sendbuf, recvbuf, info=INFO_NULL):
        return self._init("Allgatherv_init", "Iallgatherv", sendbuf, recvbuf)

    def Alltoall_init(self, sendbuf, recvbuf, info=INFO_NULL):
        return self._init("Alltoall_init", "Ialltoall", sendbuf, recvbuf)

    def Alltoallv_init(self, sendbuf, recvbuf, info=INFO_NULL):
        return self._init("Alltoallv_init", "Ialltoallv", sendbuf, recvbuf)

    def Alltoallw_init(self, sendbuf, recvbuf, info=INFO_NULL):
        return self._init("Alltoallw_init", "Ialltoallw", sendbuf, recvbuf)

    def Reduce_init(self, sendbuf, recvbuf, op=_shmcoll.SUM, root=0, info=INFO_NULL):
        return self._init("Reduce_init", "Ireduce", sendbuf, recvbuf, op, root)

    def Allreduce_init(self, sendbuf, recvbuf, op=_shmcoll.SUM, info=INFO_NULL):
        return self._init("Allreduce_init", "Iallreduce", sendbuf, recvbuf, op)

    def Reduce_scatter_block_init(self, sendbuf, recvbuf, op=_shmcoll.SUM, info=INFO_NULL):
        return self._init("Reduce_scatter_block_init", "Ireduce_scatter_block", sendbuf,
                          recvbuf, op)

    def Reduce_scatter_init(self, sendbuf, recvbuf, recvcounts=None, op=_shmcoll.SUM,
                            info=INFO_NULL):
        return self._init("Reduce_scatter_init", "Ireduce_scatter", sendbuf, recvbuf,
                          recvcounts, op)

    def Psend_init(self, buf, partitions, dest, tag=0, info=INFO_NULL):
        raise _unsupported("partitioned communication (Psend_init)")

    def Precv_init(self, buf, partitions, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG,
                   info=INFO_NULL):
        raise _unsupported("partitioned communication (Precv_init)")

    def Mprobe(self, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        """Waits for a message matching source and tag: a Message to receive it with."""
        if source == _shmcoll.PROC_NULL:
            _null_status(status)
            return Message._no_proc()
        self._serve_queue()
        st = Status()
        self.Probe(source, tag, st)
        _copy_status(st, status)
        return Message._found(self, st)

    def Improbe(self, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        """A Message of a matching message that has arrived, or None."""
        if source == _shmcoll.PROC_NULL:
            _null_status(status)
            return Message._no_proc()
        self._serve_queue()
        st = Status()
        if not self.Iprobe(source, tag, st):
            return None
        _copy_status(st, status)
        return Message._found(self, st)

    def _serve_queue(self):
        # Messages that queued object receives take are not there for a probe (MPI matched
        # them when they arrived).
        if self.__dict__.get("_objq"):
            self._match()

    # ---- object point to point ----

    def probe(self, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        self._serve_queue()
        return self.Probe(source, tag, status)

    def iprobe(self, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        self._serve_queue()
        return self.Iprobe(source, tag, status)

    def mprobe(self, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        return self.Mprobe(source, tag, status)

    def improbe(self, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        return self.Improbe(source, tag, status)

    # An object receive does not know its size before the message is there, so irecv posts
    # nothing in C: it joins this communicator's queue of object receives (in the order they
    # were posted), and whichever object call waits or tests next matches the messages that
    # have arrived to the queue as MPI does - each to the earliest posted receive it matches
    # (_match). An isend is a C Isend of its pickle, which never waits for the receiver.
    # bsend and ibsend are send and isend (sends need no attached buffer); ssend and issend
    # are the library's synchronous sends (Ssend, Issend), complete once a receive has
    # matched the message, to another rank or to this one.

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
        return _ObjRequest._send(self, self.Isend(pickle.dumps(obj), dest, tag))

    ibsend = isend

    def issend(self, obj, dest, tag=0):
        return _ObjRequest._send(self, self.Issend(pickle.dumps(obj), dest, tag))

    def irecv(self, buf=None, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG):
        # buf is accepted for mpi4py's signature; the message's own size is allocated.
        r = _ObjRequest._recv(self, source, tag)
        if source == _shmcoll.PROC_NULL:
            r._deliver(None, None)
        else:
            self._objrecvs().append(r)
        return r

    def send(self, obj, dest, tag=0):
        self._send_obj(obj, dest, tag, False)

    bsend = send

    def ssend(self, obj, dest, tag=0):
        self._send_obj(obj, dest, tag, True)

    def _send_obj(self, obj, dest, tag, sync):
        data = pickle.dumps(obj)
        if not self.__dict__.get("_objq"):
            (self.Ssend if sync else self.Send)(data, dest, tag)
            return
        # Object receives are queued: a large message to a peer whose own send waits for
        # one of them must not wait for that peer, so this send serves them while it waits.
        _ObjRequest._send(self, (self.Issend if sync else self.Isend)(data, dest, tag)).wait()

    def recv(self, buf=None, source=_shmcoll.ANY_SOURCE, tag=_shmcoll.ANY_TAG, status=None):
        if buf is not None:
            return self._recv_into(buf, source, tag, status)
        if source == _shmcoll.PROC_NULL:
            _null_status(status)
            return None
        if not self.__dict__.get("_objq"):
            st = Status()
            with self._lock("recv"):  # another thread's recv must not take the probed one
                self.Probe(source, tag, st)
                data = bytearray(st.nbytes)
                self.Recv(data, st.source, st.tag, status)
            return pickle.loads(data)
        # Receives posted before this one take their messages first.
        return self.irecv(None, source, tag).wait(status)

    def _recv_into(self, buf, source, tag, status):
        """recv(buf) as mpi4py 3.1 and 4 do it: a UserWarning (buf is deprecated), then the
        message received into buf (an int: that many bytes), one that does not fit cut with
        ERR_TRUNCATE."""
        warnings.warn("the 'buf' argument is deprecated", UserWarning, stacklevel=3)
        if source == _shmcoll.PROC_NULL:
            _null_status(status)
            return None
        try:
            mem = bytearray(operator.index(buf))
        except TypeError:
            mem = memoryview(buf)
            if mem.readonly:
                raise BufferError("Object is not writable.") from None
            if not mem.contiguous:
                raise BufferError("recv: the buffer is not contiguous") from None
            mem = mem.cast("B")
        st = Status()
        if not self.__dict__.get("_objq"):
            try:
                self.Recv(mem, source, tag, st)  # a longer message raises ERR_TRUNCATE
            finally:
                _copy_status(st, status)
        else:
            # Queued object receives take their messages first; this one's is whole.
            r = _ObjRequest._recv(self, source, tag)
            self._objrecvs().append(r)
            r._finish()
            data, r._data, r._taken = r._data, None, True
            r._status_to(st)
            if len(data) > len(mem):
                st.nbytes = len(mem)
                _copy_status(st, status)
                _errors.raise_mpi(_errors.CODES["ERR_TRUNCATE"], "recv: a message of %d "
                                  "bytes was cut to the buffer's %d" % (len(data), len(mem)),
                                  errno.EMSGSIZE)
            mem[: len(data)] = data
        _copy_status(st, status)
        return pickle.loads(mem[: st.nbytes]) if st.nbytes else None

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

    # ---- object collectives: a header per object, then its pickle or its raw bytes ----
    #
    # Every object goes out as a header of _HDR int64 (_describe): a NumPy array of a
    # supported dtype as its dtype, shape and bytes, anything else as the length of its
    # pickle. The blocks then move with the byte calls (Bcast, Gatherv, Allgatherv) and are
    # decoded by their headers, so ranks may mix arrays and other objects. A reduction whose
    # headers are all the same array (dtype and shape) with a reduction op runs Allreduce or
    # Reduce on the arrays themselves; every rank sees every header, so all take one path.
    # Any other reduction folds the objects in rank order with op(a, b), as mpi4py's.

    @_locked("bcast")
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

    @_locked("gather")
    def gather(self, sendobj, root=0):
        h, payload = _describe(sendobj)
        every = self._headers(h, root)
        return self._gather_blocks(payload, every, root)

    def _gather_blocks(self, payload, every, root):
        send = _bytes_of(payload)
        if self.rank != root:
            self.Gatherv([send, _shmcoll.BYTE], None, root)
            return None
        counts, displs, out = _layout(every)
        self.Gatherv(send, [out, (counts, displs), _shmcoll.BYTE], root)
        return [_decode(every[i], out, displs[i]) for i in range(self.size)]

    @_locked("allgather")
    def allgather(self, sendobj):
        h, payload = _describe(sendobj)
        return self._allgather_blocks(payload, self._headers(h))

    def _allgather_blocks(self, payload, every):
        counts, displs, out = _layout(every)
        self.Allgatherv(_bytes_of(payload), [out, (counts, displs), _shmcoll.BYTE])
        return [_decode(every[i], out, displs[i]) for i in range(self.size)]

    @_locked("scatter")
    def scatter(self, sendobj, root=0):
        if self.rank == root:
            if sendobj is None or len(sendobj) != self.size:
                raise ValueError("scatter: the root needs a sequence of %d objects" % self.size)
            datas = [pickle.dumps(o) for o in sendobj]
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

    @_locked("alltoall")
    def alltoall(self, sendobj):
        if sendobj is None or len(sendobj) != self.size:
            raise ValueError("alltoall: needs a sequence of %d objects" % self.size)
        datas = [pickle.dumps(o) for o in sendobj]
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

    @_locked("allreduce")
    def allreduce(self, sendobj, op=_shmcoll.SUM):
        h, payload = _describe(sendobj)
        every = self._headers(h)
        if _raw_reduction(every, op):
            out = _empty(every[0])
            self.Allreduce(payload, out, op=op)
            return out
        # Every rank folds the same list in rank order: the same result everywhere.
        return _fold(self._allgather_blocks(payload, every), op)

    @_locked("reduce")
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


class Comm(BaseComm):
    """An intracommunicator (mpi4py's MPI.Intracomm, the class of COMM_WORLD): a
    communicator, with the prefix reductions; topologies, intercommunicators and dynamic
    processes raise NotImplementedError."""

    def malloc(self, shape, dtype=float):
        """shmcoll.malloc(self, shape, dtype): a NumPy array over symmetric memory."""
        return malloc(self, shape, dtype)

    @_locked("scan")
    def scan(self, sendobj, op=_shmcoll.SUM):
        """op over the objects of ranks 0 .. this one, folded in rank order."""
        h, payload = _describe(sendobj)
        every = self._headers(h)
        if _raw_reduction(every, op, prefix=True):
            out = _empty(every[0])
            self.Scan(payload, out, op=op)
            return out
        objs = self._allgather_blocks(payload, every)
        return _fold(objs[: self.rank + 1], op)

    @_locked("exscan")
    def exscan(self, sendobj, op=_shmcoll.SUM):
        """op over the objects of ranks 0 .. this one - 1; None on rank 0."""
        h, payload = _describe(sendobj)
        every = self._headers(h)
        if _raw_reduction(every, op, prefix=True):
            out = _empty(every[0])
            self.Exscan(payload, out, op=op)
            return out if self.rank else None
        objs = self._allgather_blocks(payload, every)
        return _fold(objs[: self.rank], op) if self.rank else None

    @classmethod
    def Create_from_group(cls, group, stringtag="org.mpi4py", info=INFO_NULL, errhandler=None):
        """mpi4py 4's: a communicator of group's members, collective over them only (as
        Create_group over COMM_WORLD, the string tag naming it)."""
        from . import MPI

        new = MPI.COMM_WORLD.Create_group(group, tag=int(_h("from_group", stringtag), 16))
        if info:
            new.Set_info(info)
        if errhandler is not None:
            new.Set_errhandler(errhandler)
        return new

    def Scan_init(self, sendbuf, recvbuf, op=_shmcoll.SUM, info=INFO_NULL):
        return self._init("Scan_init", "Iscan", sendbuf, recvbuf, op)

    def Exscan_init(self, sendbuf, recvbuf, op=_shmcoll.SUM, info=INFO_NULL):
        return self._init("Exscan_init", "Iexscan", sendbuf, recvbuf, op)

    def Create_cart(self, dims, periods=None, reorder=False):
        raise _unsupported("process topologies (Create_cart)")

    def Create_graph(self, index, edges, reorder=False):
        raise _unsupported("process topologies (Create_graph)")

    def Create_dist_graph_adjacent(self, sources, destinations, sourceweights=None,
                                   destweights=None, info=INFO_NULL, reorder=False):
        raise _unsupported("process topologies (Create_dist_graph_adjacent)")

    def Create_dist_graph(self, sources, degrees, destinations, weights=None, info=INFO_NULL,
                          reorder=False):
        raise _unsupported("process topologies (Create_dist_graph)")

    def Cart_map(self, dims, periods=None):
        raise _unsupported("process topologies (Cart_map)")

    def Graph_map(self, index, edges):
        raise _unsupported("process topologies (Graph_map)")

    def Create_intercomm(self, local_leader, peer_comm, remote_leader, tag=0):
        raise _unsupported("intercommunicators (Create_intercomm)")

    def Spawn(self, command, args=None, maxprocs=1, info=INFO_NULL, root=0, errcodes=None):
        raise _unsupported("dynamic processes (Spawn)")

    def Spawn_multiple(self, command, args=None, maxprocs=None, info=INFO_NULL, root=0,
                       errcodes=None):
        raise _unsupported("dynamic processes (Spawn_multiple)")

    def Accept(self, port_name, info=INFO_NULL, root=0):
        raise _unsupported("dynamic processes (Accept)")

    def Connect(self, port_name, info=INFO_NULL, root=0):
        raise _unsupported("dynamic processes (Connect)")


class Intercomm(BaseComm):
    """Intercommunicators are not supported: Intercomm() is a null one (COMM_NULL)."""

    def __new__(cls, *args, **kw):
        if args or kw:
            raise _unsupported("intercommunicators (Intercomm)")
        return super().__new__(cls)

    def Get_remote_group(self):
        self._live("Intercomm.Get_remote_group")  # a null one is COMM_NULL's error
        raise _unsupported("intercommunicators (Get_remote_group)")

    def Get_remote_size(self):
        self._live("Intercomm.Get_remote_size")
        raise _unsupported("intercommunicators (Get_remote_size)")

    def Merge(self, high=False):
        self._live("Intercomm.Merge")
        raise _unsupported("intercommunicators (Merge)")

    remote_group = property(Get_remote_group)
    remote_size = property(Get_remote_size)


class Topocomm(Comm):
    """Process topologies are not supported: Topocomm() and its subclasses are null."""

    def __new__(cls, *args, **kw):
        if args or kw:
            raise _unsupported("process topologies (%s)" % cls.__name__)
        return super().__new__(cls)


class Cartcomm(Topocomm):
    pass


class Graphcomm(Topocomm):
    pass


class Distgraphcomm(Topocomm):
    pass


def _null_status(status):
    if status is not None:
        status.source = _shmcoll.PROC_NULL
        status.tag = _shmcoll.ANY_TAG
        status.error = 0
        status.nbytes = status.total = 0
        status.cancelled = False


def _copy_status(st, status):
    if status is not None:
        status.source, status.tag, status.error = st.source, st.tag, st.error
        status.nbytes, status.total, status.cancelled = st.nbytes, st.total, False


def _world_size():
    from . import MPI

    return MPI.COMM_WORLD.size


# Attribute keys: keyval -> (copy_fn, delete_fn).
_keyvals = {}
_next_keyval = [100]


def _keyval(keyval, what):
    try:
        return _keyvals[keyval]
    except (KeyError, TypeError):
        _errors.raise_mpi(_errors.CODES["ERR_KEYVAL"], "%s: keyval %r is not one of "
                          "Create_keyval's" % (what, keyval))


class _ObjRequest(_shmcoll.Request):
    """The request of an object isend or irecv: mpi4py's wait(status=None) (the object
    received, None for a send) and test() -> (flag, object), and Wait/Test as every request.
    The object is returned once, by the call that completes the request, as in mpi4py; that
    call makes the request inactive (false, equal to REQUEST_NULL)."""

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
        return self._taken

    def __bool__(self):
        # Active (MPI's non-null request) until a wait or test has completed it.
        return not self._taken

    def _active(self):
        return not self._taken

    def _ready(self):
        # Whether it completed, moving messages on the way; nothing is taken from it.
        if self._done:
            return True
        if self._c is not None:
            if self._comm.__dict__.get("_objq"):
                self._comm._match()
            if self._c.Test():
                self._done = True
            return self._done
        self._comm._match()
        return self._done

    def _status_to(self, status):
        if status is None:
            return
        if self._st is not None:
            status.source, status.tag, status.nbytes = self._st
            status.total, status.error, status.cancelled = self._st[2], 0, False
        elif self._c is None and not self._taken:
            _null_status(status)
        else:
            _copy_status(Status(), status)  # a send's, or a request completed before

    def _result(self, status):
        """Completes the request: fills status, returns the object (once)."""
        self._status_to(status)
        self._taken = True
        data, self._data = self._data, None
        return None if data is None else pickle.loads(data)

    def _finish(self):
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

    def wait(self, status=None):
        if self._taken:
            _copy_status(Status(), status)
            return None
        self._finish()
        return self._result(status)

    def test(self, status=None):
        if self._taken:
            _copy_status(Status(), status)
            return (True, None)
        if not self._ready():
            return (False, None)
        return (True, self._result(status))

    def Wait(self, status=None):
        self.wait(status)
        return True

    def Test(self, status=None):
        return self.test(status)[0]

    def Get_status(self, status=None):
        if self._taken or self._ready():
            self._status_to(status)
            return True
        return False

    get_status = Get_status

    def Free(self):
        """Lets the request go: a send completes anyway; a receive still takes its message
        (dropped when it comes)."""
        if self._c is not None:
            self._c.Free()
        self._taken = True
        self._data = None

    def Cancel(self):
        pass

    cancel = Cancel


_HDR = 12  # kind (a dtype's index, or -1: a pickle), bytes, ndim, 8 dims, 0
_MAXDIM = 8
# The NumPy dtypes that travel raw: the C API's element types NumPy has.
_RAW = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
_RAW_INT = 6  # _RAW[:6] are the integers (BAND, BOR, BXOR)
_ALIGN = 64  # where each block starts in a gathered buffer


def _hdr_array(h=None, n=1):
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
    data = pickle.dumps(obj)
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


_RAW_OPS = ("SUM", "PROD", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR")


def _raw_reduction(every, op, prefix=False):
    """Whether a reduction runs on the arrays themselves: every rank's header the same
    array (dtype and shape) and op one of the C library's that the dtype has (AVG has no
    prefix form)."""
    first = every[0]
    if first[0] < 0 or any(h != first for h in every[1:]):
        return False
    if not isinstance(op, _shmcoll.Op) or id(op) not in _RAW_OP_IDS:
        return False
    if prefix and op is _shmcoll.AVG:
        return False
    bitwise = op is _shmcoll.BAND or op is _shmcoll.BOR or op is _shmcoll.BXOR
    return not bitwise or first[0] < _RAW_INT


_RAW_OP_IDS = {id(getattr(_shmcoll, n)) for n in _RAW_OPS}


def _fold(objs, op):
    """op(op(objs[0], objs[1]), ...), in rank order, as mpi4py folds: an Op is called on
    two objects (MAXLOC on (value, index) pairs, a user op's function with datatype None),
    and so is any function of two arguments. AVG is the sum over the count (an int sum
    truncated toward zero)."""
    if op is _shmcoll.AVG:
        total = _fold(objs, _shmcoll.SUM)
        n = len(objs)
        if isinstance(total, int):
            return total // n if total >= 0 else -(-total // n)
        return total / n
    if not callable(op):
        raise TypeError("the object reductions take an MPI.Op or a function of two "
                        "arguments, not %s" % type(op).__name__)
    acc = objs[0]
    for o in objs[1:]:
        acc = op(acc, o)
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
    # Through the communicator's first handle, which counts the buffers over its memory
    # (a second handle, MPI.Comm(comm), frees the same memory).
    buf = comm._handle._malloc(nbytes)
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
    comm = _shmcoll.init(Comm)
    _name_job(comm)
    return comm


_jobs = [0]  # the launcher's communicators made so far in this process


def _name_job(comm):
    """Gives the launcher's communicator a name every rank gives alike, unique on this
    machine: shmcoll-run's job and how many this process made before, else rank 0's random
    number."""
    k = _jobs[0]
    _jobs[0] += 1
    job = os.environ.get("SHMCOLL_JOB")
    if job and os.environ.get("SHMCOLL_SIZE") == str(comm.size):
        comm.__dict__["_id"] = _h("job", job, k)
        return
    token = array.array(_LEN, [int.from_bytes(os.urandom(7), "little")])
    comm.Bcast(token, 0)
    comm.__dict__["_id"] = _h("job", token[0], k)
