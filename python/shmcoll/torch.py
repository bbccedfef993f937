"""The torch.distributed backend "shmcoll": ``import shmcoll.torch`` registers it.

    import torch.distributed as dist
    import shmcoll.torch  # noqa: F401
    dist.init_process_group("shmcoll")           # under torchrun, or with an init_method
    shmcoll.torch.init_process_group()           # the same under torchrun or shmcoll-run

The process group is a Python subclass of torch's ProcessGroup (torch accepts one from a
registered creator, on 1.13 and on 2.x), so nothing is built against libtorch. A collective
starts shmcoll's non-blocking call in the caller's thread (bad input raises there) and
returns a work whose future completes when the operation has, its copies back done: the
process's completer thread, or a thread that waits, completes the operations of every group
in the order they were issued, blocking in the library's wait with the GIL released. So
DistributedDataParallel's gradient all-reduce runs while backward computes. One of torch's
synchronous calls (no async_op) made with nothing outstanding skips all that: it runs to its
end in the caller's thread and returns a completed work (_Completer.run_now). torch's own
functions get a Work whose wait() raises the operation's error (shmcoll.Error); other
callers, which may be C++, a work made from a future (it stays alive when C++ keeps it).
isend/irecv return works that wait on shmcoll requests.

What shmcoll cannot do itself goes to a gloo group made from the same store, created the
first time it is needed (every rank of a group reaches that call together, as a collective):
a reduction shmcoll cannot do (an op it lacks, such as PREMUL_SUM, or a dtype it cannot widen:
bool reduces as bytes, int16 as int32, complex SUM as its real pairs), and everything in a
group over several machines whose ranks are not in equal blocks of consecutive ranks per
machine (the layout torchrun --nnodes makes is; the library's two-level scheme runs those).
"""

import atexit
import collections
import datetime
import os
import socket
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist
from torch._C import Future as _CFuture

from . import _shmcoll, _torchenv
from ._comm import Comm, Status

_IN_PLACE = _shmcoll.IN_PLACE

__all__ = ["ProcessGroupShmcoll", "BACKEND", "init_process_group"]

BACKEND = "shmcoll"

try:
    _create_work = dist._create_work_from_future
except AttributeError:  # torch 1.13 keeps it in the C module only
    from torch._C._distributed_c10d import _create_work_from_future as _create_work

_RO = dist.ReduceOp


def _op_key(op):
    """A ReduceOp (an object holding its RedOpType in .op, or the RedOpType itself) as an int."""
    return int(getattr(op, "op", op))


_OPS = {
    _op_key(_RO.SUM): _shmcoll.SUM,
    _op_key(_RO.PRODUCT): _shmcoll.PROD,
    _op_key(_RO.MIN): _shmcoll.MIN,
    _op_key(_RO.MAX): _shmcoll.MAX,
    _op_key(_RO.BAND): _shmcoll.BAND,
    _op_key(_RO.BOR): _shmcoll.BOR,
    _op_key(_RO.BXOR): _shmcoll.BXOR,
}
if hasattr(_RO, "AVG"):
    _OPS[_op_key(_RO.AVG)] = _shmcoll.AVG

# The dtypes shmcoll reduces (api.md's ten, less the unsigned ones torch 1.13 lacks).
_REDUCIBLE = {
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int32,
    torch.int64,
}
for _name in ("uint32", "uint64"):  # torch >= 2.3
    if hasattr(torch, _name):
        _REDUCIBLE.add(getattr(torch, _name))
_FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
# The dtypes the C module gives a datatype of their own (python/src/buffer.c); others move
# as bytes, counted in bytes.
_TYPED = _REDUCIBLE | {torch.int16, torch.bool, torch.complex64, torch.complex128}
for _name in ("uint16",):  # torch >= 2.3
    if hasattr(torch, _name):
        _TYPED.add(getattr(torch, _name))
_BITWISE = {_shmcoll.BAND, _shmcoll.BOR, _shmcoll.BXOR}


def _hash_is_op():
    """The class of the ReduceOp objects torch's options hold, if the hash of each (every op
    of this torch, PREMUL_SUM's too) is its RedOpType's value; else None. The hash then reads
    the op in one call, where .op and int() take three (0.1 against 0.75 us per collective)."""
    try:
        ops = [getattr(_RO, k) for k in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR",
                                        "AVG") if hasattr(_RO, k)]
        if hasattr(dist, "_make_nccl_premul_sum"):
            ops.append(dist._make_nccl_premul_sum(2.0))
        cls = None
        for op in ops:
            opts = dist.AllreduceOptions()
            opts.reduceOp = op
            r = opts.reduceOp
            if cls not in (None, type(r)) or hash(r) != _op_key(r):
                return None
            cls = type(r)
        return cls
    except Exception:
        return None


_HASHED_OP = _hash_is_op()


def _op_of(opts):
    """The shmcoll op of torch's options (or of a ReduceOp given alone); None if it has none."""
    try:
        op = getattr(opts, "reduceOp", opts)
        if type(op) is _HASHED_OP:
            return _OPS.get(hash(op))
        return _OPS.get(_op_key(op))
    except TypeError:
        return None


def _done(result):
    # torch._C.Future, not torch.futures.Future: the same object without the Python
    # constructor's device handling (a microsecond per call).
    fut = _CFuture([])
    fut.set_result(result)
    return _create_work(fut)


def _value(fut):
    return fut.value()  # raises the operation's error, which then fails the chained future


# torch's own functions (dist.all_reduce and the rest) keep the work they get in Python;
# every other caller may be C++ (DistributedDataParallel's reducer, _broadcast_coalesced).
_TORCH_API = "torch.distributed.distributed_c10d"


def _api_frame():
    """The frame that called into this module from outside it (past the group's own methods:
    allgather_coalesced calls allgather), or None."""
    f = sys._getframe(2)
    while f is not None and f.f_globals.get("__name__") == __name__:
        f = f.f_back
    return f


def _sync_locals():
    """The local variables of the caller when it is one of torch's collectives called without
    async_op, which waits for its work as soon as it has it (torch 1.13 and 2.x: `if
    async_op: return work` then `work.wait()`); else None."""
    f = _api_frame()
    if f is None or f.f_globals.get("__name__") != _TORCH_API:
        return None
    loc = f.f_locals
    return loc if loc.get("async_op", True) is False else None


def _waited_at_once():
    return _sync_locals() is not None


# ReduceOp's named ops by identity: each is one object for the life of the process (torch
# 1.13 and 2.x), and torch's all_reduce puts the one it was given into its options
# (`opts.reduceOp = op`), so when its frame holds the options we got, its `op` is read
# without the options' getter, which makes a new object (0.35 of the 0.5 us of _op_of).
_OP_BY_ID = {id(getattr(_RO, k)): _OPS[_op_key(getattr(_RO, k))]
             for k in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG")
             if hasattr(_RO, k)}


def _sync_op(loc, opts):
    """The op of a synchronous all_reduce of torch's whose locals are loc (_sync_locals)."""
    if opts is None:
        return _shmcoll.SUM
    if loc.get("opts") is opts:
        op = _OP_BY_ID.get(id(loc.get("op")))
        if op is not None:
            return op
    return _op_of(opts)


def _work(op):
    """The work torch gets for op (a gloo work passes through). torch's own functions get a
    Work subclass, whose wait() raises the operation's error (shmcoll.Error) and whose
    future is op's; any other caller a work made from a future chained on op's
    (_create_work_from_future), which stays alive when C++ keeps it, as a Python subclass
    does not: the chained future fails with a RuntimeError, and its wait() does not raise
    (torch's FutureWrappingWork waits without looking)."""
    if not isinstance(op, _Op):
        return op
    f = _api_frame()
    if f is not None and f.f_globals.get("__name__") == _TORCH_API:
        return _Work(op)
    return _create_work(op.fut.then(_value))


def _reducible(t, op):
    return op is not None and t.dtype in _REDUCIBLE and not (op in _BITWISE and t.dtype in _FLOATS)


# bool reduces as bytes: SUM, MAX and BOR are "any", PROD, MIN and BAND "all" (as NCCL does).
_BOOL_OPS = {
    _shmcoll.SUM: _shmcoll.BOR,
    _shmcoll.MAX: _shmcoll.BOR,
    _shmcoll.BOR: _shmcoll.BOR,
    _shmcoll.PROD: _shmcoll.BAND,
    _shmcoll.MIN: _shmcoll.BAND,
    _shmcoll.BAND: _shmcoll.BAND,
    _shmcoll.BXOR: _shmcoll.BXOR,
}


def _reduction(t, op):
    """(flat tensor to reduce, op, tensor to copy the result back into or None) for t and op,
    or None when shmcoll cannot reduce them (the caller hands the call to gloo)."""
    if _reducible(t, op):
        return t, op, None
    if op is None or not t.is_contiguous():
        return None
    if t.dtype == torch.bool and op in _BOOL_OPS:
        return t.reshape(-1).view(torch.uint8), _BOOL_OPS[op], None
    if t.dtype == torch.int16:
        # Widened: int32 arithmetic modulo 2^32 narrows to int16's modulo 2^16.
        return t.reshape(-1).to(torch.int32), op, t
    if t.dtype.is_complex and op in (_shmcoll.SUM, _shmcoll.AVG):
        return torch.view_as_real(t), op, None
    return None


def _reduce_all(tensors, op):
    """The plans of _reduction for every tensor, or None if one cannot be reduced here."""
    plans = [_reduction(t, op) for t in tensors]
    return None if any(p is None for p in plans) else plans


def _copy_back(plan):
    flat, _, back = plan
    if back is not None:
        back.copy_(flat.reshape(back.shape))


def _wait_all(reqs):
    """Waits for every request, even after one failed (each holds buffers); returns the
    first error, or None."""
    error = None
    for r in reqs:
        try:
            r.Wait()
        except Exception as e:
            error = error or e
    return error


class _Op:
    """A group's operation in flight: the shmcoll requests it started (completed in order),
    what they read and write (kept alive until then), what runs once they have (the copies
    back of staged, widened or non-contiguous results), the value its future completes with,
    and that future."""

    __slots__ = ("group", "reqs", "keep", "finish", "value", "fut", "waited")

    def __init__(self, group, reqs, keep, value, finish=None, waited=False):
        # When it was issued if its caller waits for it at once (_waited_at_once), else 0.
        self.waited = time.monotonic() if waited else 0
        self.group = group
        self.reqs = reqs
        self.keep = keep
        self.finish = finish
        self.value = value
        # torch.futures.Future, not torch._C.Future: only its set_exception makes wait()
        # and value() raise the exception itself (shmcoll.Error) rather than a RuntimeError.
        self.fut = torch.futures.Future()

    def run(self):
        """Waits for the requests (the GIL released) holding the group's lock, as the
        communicator is used by one thread at a time, then finishes and completes the
        future: its then() callbacks run here, after the lock is let go."""
        with self.group._lock:
            error = _wait_all(self.reqs)
        if error is None and self.finish is not None:
            try:
                self.finish()
            except Exception as e:
                error = e
        self.keep = self.reqs = None
        if error is not None:
            self.fut.set_exception(error)
        else:
            self.fut.set_result(self.value)


class _Completer:
    """Completes the operations of every shmcoll group of the process, in the order they
    were issued, one at a time: the process's completer thread (made at the first
    operation; a fork's child starts without one), which sleeps on a condition while nothing
    is outstanding and otherwise blocks in the library's wait of the oldest operation (which
    moves every operation the process has outstanding, MPI's progress rule), so it never
    spins; and any thread that waits for an operation (work.wait(), a gloo fallback,
    shutdown, exit), which completes the oldest ones itself when no other thread is at it,
    rather than hand over to the completer thread and back.

    The completer thread leaves an operation at the head of the queue to the thread that
    issued it when that thread is one of torch's synchronous calls (no async_op), which waits
    for it at once: completing it there saves two thread switches, which on a busy machine
    are two waits for a CPU (P=2 beside two busy processes, 8 B: 41 against 8 us per call).
    It is not woken for one. Should that caller not come (a path of torch's that does not
    wait), any wait takes the operation at once, and the thread takes it once it is _LEFT
    old, when it wakes for a later one."""

    def __init__(self):
        self._mutex = threading.Lock()  # the condition's lock, taken without its wrapper
        self._cv = threading.Condition(self._mutex)
        self._queue = collections.deque()
        self._count = 0  # operations submitted and not yet completed
        self._runner = None  # the thread completing one now
        self._waiters = 0  # threads other than the completer thread asleep on the condition
        self._thread = None

    def submit(self, op):
        with self._cv:
            op.group._inflight += 1
            self._count += 1
            self._queue.append(op)
            if op.waited:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._until, args=(lambda: False,), name="shmcoll-torch-completer",
                    daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def _until(self, done):
        """Completes operations, or waits for the thread completing one, until done() (read
        under the condition's lock). The thread completing an operation may come back here
        from one of its future's then() callbacks: it completes the later ones itself, and
        returns when none is left that it could wait for."""
        me = threading.get_ident()
        thread = self._thread is not None and self._thread.ident == me
        with self._cv:
            while not done():
                left = self._left_to_caller() if thread else 0
                if self._queue and self._runner in (None, me) and left <= 0:
                    op = self._queue.popleft()
                elif self._runner == me:
                    return
                elif left > 0 and self._runner is None:
                    self._cv.wait(left)
                    continue
                else:
                    self._waiters += not thread
                    self._cv.wait()
                    self._waiters -= not thread
                    continue
                outer, self._runner = self._runner, me
                self._cv.release()
                try:
                    op.run()
                finally:
                    self._cv.acquire()
                    op.group._inflight -= 1
                    self._count -= 1
                    self._runner = outer
                    # Not the idle completer thread for an operation it leaves alone.
                    if self._waiters or (self._queue and not self._queue[0].waited):
                        self._cv.notify_all()

    _LEFT = 0.01  # seconds: how long the completer thread leaves a waited-for operation

    def _left_to_caller(self):
        """How much longer the completer thread leaves the head of the queue to the thread
        that issued it (an operation torch waits for at once); after _LEFT it takes it all
        the same (a caller that did not come, by a path of torch's that does not wait)."""
        if not self._queue or not self._queue[0].waited:
            return 0
        return self._queue[0].waited + self._LEFT - time.monotonic()

    def _enter_now(self, group):
        """Makes the calling thread the runner when no operation of any group is outstanding
        (True), else leaves everything as it is (False)."""
        with self._mutex:
            if self._count:
                return False
            self._count = 1
            group._inflight += 1
            self._runner = threading.get_ident()
        return True

    def _leave_now(self, group):
        with self._mutex:
            group._inflight -= 1
            self._count -= 1
            self._runner = None
            if self._waiters or (self._queue and not self._queue[0].waited):
                self._cv.notify_all()

    def run_now(self, group, starts, finish):
        """Runs an operation from start to finish in the calling thread when no operation of
        any group is outstanding, and returns True; else False (the caller issues it to the
        queue). This is torch's synchronous call on an otherwise idle process, the common
        one: it waits for its work at once, so the queue's future, work and condition would
        only cost time (about 5 us a call, more than the call itself at small sizes). The
        operation's error is raised here. While it runs, the thread is the runner: an
        operation submitted meanwhile (another thread's, another group's) waits for it."""
        if not self._enter_now(group):
            return False
        try:
            reqs, error = [], None
            with group._lock:
                try:
                    for start in starts:
                        reqs.append(start())
                finally:  # those started, even after a start failed
                    error = _wait_all(reqs)
            if error is not None:
                raise error
            if finish is not None:
                finish()
        finally:
            self._leave_now(group)
        return True

    def call_now(self, group, call, *args):
        """run_now for an operation that is one blocking call of the library (call(*args),
        which releases the GIL while it waits): the same rules, without the request, the
        list of starts and their closures (a microsecond of a small call's four)."""
        if not self._enter_now(group):
            return False
        try:
            with group._lock:
                call(*args)
        finally:
            self._leave_now(group)
        return True

    def wait(self, op):
        self._until(op.fut.done)
        op.fut.wait()  # raises the operation's error

    def drain(self, group=None):
        """Until group's operations (every group's with None) have completed."""
        if group is None:
            self._until(lambda: not self._count)
        else:
            self._until(lambda: not group._inflight)


_completer = _Completer()
# Operations still outstanding at exit complete first (their peers reach them too), while
# the completer still runs; a fork's child has no completer thread, so it starts afresh.
atexit.register(_completer.drain)
os.register_at_fork(after_in_child=_completer.__init__)


class _DoneWork(dist.Work):
    """The work of an operation that completed before its collective returned
    (_Completer.run_now): torch's synchronous calls, which wait for it at once."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def result(self):
        return self._value

    def synchronize(self):
        pass

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(self._value)
        return fut


# The work every synchronous call of torch's that completed at once returns (_sync_done):
# torch waits for it and drops it, so one object serves them all, where making a work costs
# half a microsecond.
_SYNC_DONE = _DoneWork([])


def _sync_done(value):
    """The completed work for a call of torch's own made without async_op (_waited_at_once),
    whose value is value."""
    _SYNC_DONE._value = value
    return _SYNC_DONE


class _Work(dist.Work):
    """A work of torch's own functions over an _Op (see _work)."""

    def __init__(self, op):
        super().__init__()
        self._op = op

    def wait(self, timeout=None):
        _completer.wait(self._op)
        return True

    def is_completed(self):
        return self._op.fut.done()

    def is_success(self):
        return self.is_completed() and self.exception() is None

    def exception(self):
        if not self._op.fut.done():
            return None
        try:
            self._op.fut.value()
        except Exception as e:
            return e
        return None

    def result(self):
        self.wait()
        return self._op.value

    def synchronize(self):
        pass

    def get_future(self):
        return self._op.fut


class _P2PWork(dist.Work):
    """A send or a receive in flight: wait() and is_completed() ask the shmcoll request."""

    def __init__(self, group, req, tensors, src=-1):
        super().__init__()
        self._lock = group._lock
        self._req = req
        self._tensors = tensors
        self._src = src
        self._status = None if src >= 0 else Status()
        self._waited = False

    def wait(self, timeout=None):
        if not self._waited:
            with self._lock:
                self._req.Wait(self._status)
            self._waited = True
        return True

    def is_completed(self):
        if not self._waited:
            with self._lock:
                self._waited = self._req.Test(self._status)
        return self._waited

    def is_success(self):
        return self.is_completed()

    def exception(self):
        return None

    def _source_rank(self):
        self.wait()
        return self._status.source if self._status is not None else self._src

    def source_rank(self):
        return self._source_rank()

    def result(self):
        self.wait()
        return self._tensors

    def get_future(self):
        self.wait()
        fut = _CFuture([])
        fut.set_result(self._tensors)
        return fut


def _timeout_ms(timeout):
    if timeout is None:
        return 0
    if isinstance(timeout, datetime.timedelta):
        return max(1, int(timeout.total_seconds() * 1000))
    return max(1, int(timeout))


def _machine():
    """What two processes of one machine (and one boot of it) share."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return "%s/%s/%d" % (socket.gethostname(), boot, os.getuid())


def _address():
    """This machine's address as the other machines of the job reach it: the interface that
    faces torch's MASTER_ADDR, else what the host name resolves to."""
    master = os.environ.get("MASTER_ADDR")
    try:
        if master:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((master, 9))  # no packet is sent: this only picks the route
                return s.getsockname()[0]
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _two_level(store, rank, size, job, machines, timeout):
    """A communicator over several machines through the library's two-level scheme (the
    ranks of each machine share memory; one rank per machine talks to the others over TCP),
    made as shmcoll-run --nnodes makes it: each machine's first rank listens and publishes its
    address in the store, and shmcoll_init reads the job from SHMCOLL_* variables set for the
    call. None when the ranks are not in equal blocks of consecutive ranks per machine (the
    scheme's layout): the group then runs through gloo."""
    order = []
    for m in machines:
        if m not in order:
            order.append(m)
    nnodes = len(order)
    lsize = size // nnodes
    if size % nnodes or any(machines[r] != order[r // lsize] for r in range(size)):
        return None
    node, lrank = rank // lsize, rank % lsize
    listener = None
    if lrank == 0:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("", 0))
        listener.listen(64)
        store.set("shmcoll/leader/%d" % node, "%s:%d" % (_address(), listener.getsockname()[1]))
        store.set("shmcoll/node-job/%d" % node, "%s-n%d" % (job, node))
    if rank == 0:
        store.set("shmcoll/token", os.urandom(12).hex())
    env = {
        "SHMCOLL_RANK": rank,
        "SHMCOLL_SIZE": size,
        "SHMCOLL_JOB": store.get("shmcoll/node-job/%d" % node).decode(),
        "SHMCOLL_NNODES": nnodes,
        "SHMCOLL_NODE_RANK": node,
        "SHMCOLL_LOCAL_RANK": lrank,
        "SHMCOLL_LOCAL_SIZE": lsize,
        "SHMCOLL_TOKEN": store.get("shmcoll/token").decode(),
        "SHMCOLL_NODES": ",".join(
            store.get("shmcoll/leader/%d" % n).decode() for n in range(nnodes)
        ),
        "SHMCOLL_NET_FD": listener.fileno() if listener is not None else None,
        "SHMCOLL_TIMEOUT_MS": _timeout_ms(timeout),
    }
    saved = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = str(v)
        return _shmcoll.init(Comm)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if listener is not None:
            listener.close()  # the library accepted what it needed; it does not keep it


class ProcessGroupShmcoll(dist.ProcessGroup):
    """A torch process group over a shmcoll communicator (see the module's docstring).

    Made by torch through the registered creator: ``ProcessGroupShmcoll(store, rank, size,
    timeout)``. Rank 0 names the group's job and publishes it in the store, every rank its
    machine: one machine makes one shmcoll communicator, several the two-level one."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._store = store
        self._timeout = timeout if timeout is not None else datetime.timedelta(minutes=30)
        self._gloo_pg = None
        self._comm = None
        # The communicator is used by one thread at a time: the caller's starts and the
        # completer's waits take turns (see _Completer).
        self._lock = threading.Lock()
        self._inflight = 0  # operations handed to the completer, not yet complete
        store.set("shmcoll/machine/%d" % rank, _machine())
        if rank == 0:
            store.set("shmcoll/job", "pt%d-%s" % (os.getpid(), os.urandom(6).hex()))
        job = store.get("shmcoll/job").decode()
        machines = [store.get("shmcoll/machine/%d" % r).decode() for r in range(size)]
        if len(set(machines)) == 1:
            self._comm = Comm(rank, size, job, timeout_ms=_timeout_ms(timeout))
        else:
            self._comm = _two_level(store, rank, size, job, machines, timeout)

    # ---- what torch asks of every process group ----

    def getBackendName(self):
        return BACKEND

    def name(self):
        return BACKEND

    def _get_backend_name(self):
        return BACKEND

    @property
    def group_name(self):
        """The name torch gave the group. torch 2.x keeps it on a group's c10d backends, and a
        Python group has none, so torch's own property raises ("ProcessGroup name not set")
        where torch asks for it: destroy_process_group(group), and resolving the group by name
        (functional collectives). The registered creator is given it."""
        name = getattr(self, "_group_name", None)
        if name is None:
            raise RuntimeError("ProcessGroup name not set: the group is not (or no longer) "
                               "one of torch.distributed's")
        return name

    def __repr__(self):
        return "ProcessGroupShmcoll(rank=%d, size=%d%s)" % (
            self.rank(),
            self.size(),
            "" if self._comm is not None else ", through gloo",
        )

    def _gloo(self):
        """The group's gloo twin, made from the same store on first use (a collective)."""
        if self._gloo_pg is None:
            store = dist.PrefixStore("shmcoll/gloo", self._store)
            self._gloo_pg = dist.ProcessGroupGloo(store, self.rank(), self.size(), self._timeout)
        return self._gloo_pg

    def _to_gloo(self, method, *args, opts=None):
        # After the group's operations in flight: they may use the same tensors, and the
        # group's calls complete in the order they were made.
        _completer.drain(self)
        fn = getattr(self._gloo(), method)
        return fn(*args) if opts is None else fn(*args, opts)

    def _gloo_each(self, method, outputs, inputs, opts):
        """A coalesced call gloo lacks, one pair at a time through it, complete on return."""
        for o, i in zip(outputs, inputs):
            self._to_gloo(method, o, i, opts=opts).wait()
        return _done(outputs)

    def shutdown(self):
        _completer.drain(self)
        if self._comm is not None:
            with self._lock:
                self._comm.Free()
                self._comm = None

    # ---- collectives ----
    # Each starts its shmcoll requests under the group's lock and hands them to the completer
    # with what they keep alive, its value and what runs at completion; staging (stacks,
    # widening) happens here, before the start, and bad input raises here, on every rank.

    def _issue(self, starts, keep, value, finish=None, waited=None, at_once=True):
        """at_once=False: the caller's call_now found an operation outstanding already."""
        if waited is None:
            waited = _waited_at_once()
        if waited and at_once and _completer.run_now(self, starts, finish):
            return _sync_done(value)
        reqs = []
        with self._lock:
            try:
                for start in starts:
                    reqs.append(start())
            except BaseException:
                if reqs:  # those started complete in the background; the error is raised
                    _completer.submit(_Op(self, reqs, keep, None))
                raise
            op = _Op(self, reqs, keep, value, finish, waited)
            _completer.submit(op)
        return op

    def _reduce_plans(self, plans, value, start):
        """An op over one start per plan, the plans' copies back at completion."""
        backs = [p for p in plans if p[2] is not None]
        finish = None
        if backs:
            def finish():
                for plan in backs:
                    _copy_back(plan)
        return self._issue([lambda p=p: start(p) for p in plans], plans, value, finish)

    def allreduce(self, tensors, opts=None):
        loc = _sync_locals()
        comm, at_once = self._comm, True
        if loc is not None and comm is not None and len(tensors) == 1:
            # torch's synchronous all_reduce of one tensor, the commonest call of all: one
            # blocking call of the library when nothing else is outstanding.
            t, op = tensors[0], _sync_op(loc, opts)
            if _reducible(t, op):
                if _completer.call_now(self, comm.Allreduce, _IN_PLACE, t, op):
                    return _sync_done(tensors)
                at_once = False
        return _work(self._allreduce(tensors, opts, loc is not None, at_once))

    def _allreduce(self, tensors, opts, waited=None, at_once=True):
        op = _op_of(opts) if opts is not None else _shmcoll.SUM
        comm = self._comm
        if len(tensors) == 1 and comm is not None:
            t = tensors[0]
            if _reducible(t, op):  # the common call: the C module checks the tensor itself
                return self._issue(
                    [lambda: comm.Iallreduce(_IN_PLACE, t, op)], tensors, tensors,
                    waited=waited, at_once=at_once)
        plans = _reduce_all(tensors, op) if comm is not None else None
        if plans is None:
            return self._to_gloo("allreduce", tensors, opts=opts)
        return self._reduce_plans(
            plans, tensors, lambda p: comm.Iallreduce(_shmcoll.IN_PLACE, p[0], p[1]))

    def allreduce_coalesced(self, tensors, opts=None):
        return _work(self._allreduce(tensors, opts))

    def broadcast(self, tensors, opts=None):
        if self._comm is None:
            return self._to_gloo("broadcast", tensors, opts=opts)
        root = opts.rootRank if opts is not None else 0
        comm = self._comm
        waited, at_once = _waited_at_once(), True
        if len(tensors) == 1 and waited:
            if _completer.call_now(self, comm.Bcast, tensors[0], root):
                return _sync_done(tensors)
            at_once = False
        return _work(self._issue(
            [lambda t=t: comm.Ibcast(t, root) for t in tensors], tensors, tensors,
            waited=waited, at_once=at_once))

    def reduce(self, tensors, opts=None):
        plans = _reduce_all(tensors, _op_of(opts)) if self._comm is not None else None
        if plans is None:
            return self._to_gloo("reduce", tensors, opts=opts)
        root, comm = opts.rootRank, self._comm
        if self.rank() == root:
            return _work(self._reduce_plans(
                plans, tensors, lambda p: comm.Ireduce(_shmcoll.IN_PLACE, p[0], p[1], root)))
        # Non-roots keep their input: nothing comes back to them.
        return _work(self._issue(
            [lambda p=p: comm.Ireduce(p[0], None, p[1], root) for p in plans], plans, tensors))

    def allgather(self, output_tensors, input_tensors, opts=None):
        if self._comm is None:
            return self._to_gloo("allgather", output_tensors, input_tensors, opts=opts)
        comm, starts, copies = self._comm, [], []
        for outs, t in zip(output_tensors, input_tensors):
            self._check_list(outs, t, "all_gather")
            stage = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)
            src = t.contiguous()
            starts.append(lambda src=src, stage=stage: comm.Iallgather(src, stage))
            copies.append((outs, stage, src))

        def finish():
            for outs, stage, _ in copies:
                for o, s in zip(outs, stage):
                    o.copy_(s)

        return _work(self._issue(starts, copies, output_tensors, finish))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        return self.allgather(output_lists, input_list, opts)

    def _allgather_check(self, output, input):
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            raise ValueError(
                "shmcoll: all_gather_into_tensor: the output must hold world_size (%d) times "
                "the input's %d elements of %s, not %d of %s"
                % (self.size(), input.numel(), input.dtype, output.numel(), output.dtype)
            )

    def _allgather_base(self, output, input, opts=None):
        if self._comm is None:
            return self._to_gloo("_allgather_base", output, input, opts=opts)
        self._allgather_check(output, input)
        comm = self._comm
        return _work(self._issue(
            [lambda: comm.Iallgather(input, output)], (input, output), [output]))

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        if self._comm is None:
            return self._gloo_each("_allgather_base", outputs, inputs, opts)
        for o, i in zip(outputs, inputs):
            self._allgather_check(o, i)
        comm = self._comm
        return _work(self._issue(
            [lambda o=o, i=i: comm.Iallgather(i, o) for o, i in zip(outputs, inputs)],
            (outputs, inputs), outputs))

    def gather(self, output_tensors, input_tensors, opts=None):
        if self._comm is None:
            return self._to_gloo("gather", output_tensors, input_tensors, opts=opts)
        root, comm = opts.rootRank, self._comm
        t = input_tensors[0].contiguous()
        if self.rank() != root:
            return _work(self._issue(
                [lambda: comm.Igather(t, None, root)], t, output_tensors))
        self._check_list(output_tensors[0], t, "gather")
        stage = torch.empty((self.size(),) + tuple(t.shape), dtype=t.dtype)

        def finish():
            for o, s in zip(output_tensors[0], stage):
                o.copy_(s)

        return _work(self._issue(
            [lambda: comm.Igather(t, stage, root)], (t, stage), output_tensors, finish))

    def scatter(self, output_tensors, input_tensors, opts=None):
        if self._comm is None:
            return self._to_gloo("scatter", output_tensors, input_tensors, opts=opts)
        root, comm = opts.rootRank, self._comm
        out = output_tensors[0]
        stage = None
        if self.rank() == root:
            self._check_list(input_tensors[0], out, "scatter")
            stage = torch.stack([x.reshape(out.shape) for x in input_tensors[0]])
        return _work(self._issue(
            [lambda: comm.Iscatter(stage, out, root)], (stage, out), output_tensors))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = output_tensors[0]
        if self._comm is None:
            return self._to_gloo("reduce_scatter", output_tensors, input_tensors, opts=opts)
        self._check_list(input_tensors[0], out, "reduce_scatter")
        stage = torch.stack([x.reshape(out.shape) for x in input_tensors[0]])
        return _work(self._reduce_scatter(out, stage, opts, output_tensors))

    def _reduce_scatter_base(self, output, input, opts=None):
        return _work(self._reduce_scatter(output, input, opts, [output]))

    def _reduce_scatter_plan(self, output, input, op):
        if input.numel() != output.numel() * self.size() or output.dtype != input.dtype:
            raise ValueError(
                "shmcoll: reduce_scatter: the input must hold world_size (%d) times "
                "the output's %d elements of %s, not %d of %s"
                % (self.size(), output.numel(), output.dtype, input.numel(), input.dtype)
            )
        src = _reduction(input, op) if self._comm is not None else None
        dst = _reduction(output, op) if src is not None else None
        return None if dst is None else (src, dst)

    def _reduce_scatter(self, output, input, opts, value):
        plan = self._reduce_scatter_plan(output, input, _op_of(opts))
        if plan is None:
            return self._to_gloo("_reduce_scatter_base", output, input, opts=opts)
        src, dst = plan
        comm = self._comm
        return self._issue(
            [lambda: comm.Ireduce_scatter_block(src[0], dst[0], dst[1])], (src, dst), value,
            None if dst[2] is None else lambda: _copy_back(dst))

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        op = _op_of(opts)
        plans = [self._reduce_scatter_plan(o, i, op) for o, i in zip(outputs, inputs)]
        if any(p is None for p in plans):
            return self._gloo_each("_reduce_scatter_base", outputs, inputs, opts)
        comm = self._comm
        backs = [dst for _, dst in plans if dst[2] is not None]
        return _work(self._issue(
            [lambda s=s, d=d: comm.Ireduce_scatter_block(s[0], d[0], d[1]) for s, d in plans],
            plans, outputs, (lambda: [_copy_back(d) for d in backs]) if backs else None))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        if self._comm is None:
            return self._to_gloo(
                "alltoall_base", output, input, output_split_sizes, input_split_sizes, opts=opts
            )
        P, comm = self.size(), self._comm
        if not output_split_sizes and not input_split_sizes:
            if input.numel() % P or output.numel() != input.numel() or output.dtype != input.dtype:
                raise ValueError(
                    "shmcoll: all_to_all_single: input and output must hold the same number of "
                    "elements of one dtype, divisible by world_size (%d); got %d and %d"
                    % (P, input.numel(), output.numel())
                )
            return _work(self._issue(
                [lambda: comm.Ialltoall(input, output)], (input, output), [output]))
        scale = _units(input)
        sc = [n * scale for n in self._splits(input, input_split_sizes, "input")]
        rc = [n * scale for n in self._splits(output, output_split_sizes, "output")]
        return _work(self._issue(
            [lambda: comm.Ialltoallv([input, sc], [output, rc])], (input, output), [output]))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if self._comm is None:
            return self._to_gloo("alltoall", output_tensors, input_tensors, opts=opts)
        dt = input_tensors[0].dtype
        if any(t.dtype != dt for t in list(input_tensors) + list(output_tensors)):
            raise ValueError("shmcoll: all_to_all: every tensor must have one dtype")
        src = torch.cat([t.reshape(-1) for t in input_tensors])
        lens = [t.numel() for t in output_tensors]
        dst = torch.empty(sum(lens), dtype=dt)
        scale, comm = _units(src), self._comm
        sc = [t.numel() * scale for t in input_tensors]
        rc = [n * scale for n in lens]

        def finish():
            for t, piece in zip(output_tensors, torch.split(dst, lens)):
                t.copy_(piece.reshape(t.shape))

        return _work(self._issue(
            [lambda: comm.Ialltoallv([src, sc], [dst, rc])], (src, dst), output_tensors,
            finish))

    def barrier(self, opts=None):
        if self._comm is None:
            return self._to_gloo("barrier", opts=opts)
        comm = self._comm
        waited = _waited_at_once()
        if waited and _completer.call_now(self, comm.Barrier):
            return _sync_done([])
        return _work(self._issue([comm.Ibarrier], None, [], waited=waited, at_once=False))

    # ---- point to point ----

    def send(self, tensors, dst, tag=0):
        if self._comm is None:
            return self._gloo().send(tensors, dst, tag)
        with self._lock:
            req = self._comm.Isend(tensors[0], dst, tag)
        return _P2PWork(self, req, tensors, self.rank())

    def recv(self, tensors, src, tag=0):
        if self._comm is None:
            return self._gloo().recv(tensors, src, tag)
        with self._lock:
            req = self._comm.Irecv(tensors[0], src, tag)
        return _P2PWork(self, req, tensors, src)

    def recv_anysource(self, tensors, tag=0):
        if self._comm is None:
            return self._gloo().recv_anysource(tensors, tag)
        with self._lock:
            req = self._comm.Irecv(tensors[0], _shmcoll.ANY_SOURCE, tag)
        return _P2PWork(self, req, tensors)

    # ---- helpers ----

    def _check_list(self, tensors, like, what):
        if len(tensors) != self.size():
            raise ValueError(
                "shmcoll: %s: the list must hold world_size (%d) tensors, not %d"
                % (what, self.size(), len(tensors))
            )
        for x in tensors:
            if x.numel() != like.numel() or x.dtype != like.dtype:
                raise ValueError(
                    "shmcoll: %s: every tensor of the list must have the input's %d elements "
                    "of %s (got %d of %s)" % (what, like.numel(), like.dtype, x.numel(), x.dtype)
                )

    def _splits(self, t, splits, what):
        P = self.size()
        rows = t.shape[0] if t.dim() else 1
        per_row = t.numel() // rows if rows else 0
        if not splits:
            if rows % P:
                raise ValueError(
                    "shmcoll: all_to_all_single: the %s's %d rows do not split evenly among "
                    "%d ranks" % (what, rows, P)
                )
            splits = [rows // P] * P
        if len(splits) != P or sum(splits) != rows or min(splits) < 0:
            raise ValueError(
                "shmcoll: all_to_all_single: %s_split_sizes %s must be %d non-negative row "
                "counts adding up to the %s's %d rows" % (what, list(splits), P, what, rows)
            )
        return [int(n) * per_row for n in splits]


def _units(t):
    """What the C module counts t in, per element: 1 for a dtype it knows, the element's
    bytes for one it moves as bytes."""
    return 1 if t.dtype in _TYPED else t.element_size()


def init_process_group(backend=BACKEND, **kwargs):
    """dist.init_process_group(backend) for the launcher that started this process: where
    MASTER_ADDR is set (torchrun, shmcoll-run), torch's env:// rendezvous; where only
    SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_JOB are (a job set up by hand), a file store named
    after the job; alone, a group of one. Arguments given (init_method, rank, world_size,
    timeout...) are passed on and win."""
    env = os.environ
    if "init_method" not in kwargs and "store" not in kwargs and "MASTER_ADDR" not in env:
        job = env.get("SHMCOLL_JOB") or "solo%d-%s" % (os.getpid(), os.urandom(4).hex())
        kwargs["init_method"] = "file://%s/shmcoll-torch-%d-%s" % (
            tempfile.gettempdir(), os.getuid(), job)
        kwargs.setdefault("rank", int(env.get("SHMCOLL_RANK", 0)))
        kwargs.setdefault("world_size", int(env.get("SHMCOLL_SIZE", 1)))
    dist.init_process_group(backend, **kwargs)


def _create(opts, pg_options):
    """torch's extended creator (1.13 and 2.x): the group's store, rank, size and timeout, and
    the name torch gives it, which a Python group has to keep itself (``group_name``).
    ``pg_options`` is for torch's own backends; shmcoll has no options to take from it."""
    pg = ProcessGroupShmcoll(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    pg._group_name = str(opts.group_id)
    return pg


def _register():
    if getattr(dist.Backend, BACKEND.upper(), None) is None:
        try:
            dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
        except TypeError:  # torch < 2.0 has no devices argument
            dist.Backend.register_backend(BACKEND, _create, extended_api=True)


# A torch built without libuv (Debian 13's 2.6) fails every env:// rendezvous, shmcoll-run's
# and torchrun's alike, before any backend is made, unless its stores are told not to ask.
_torchenv.stores_without_libuv()
_register()
