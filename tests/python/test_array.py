"""The array API (import shmcoll): every buffer collective against a NumPy reference computed
from every rank's input, on every rank; in place; the object methods; point to point; the
errors, raised before any rank starts the call."""

import errno
import threading

import numpy as np
import pytest

import shmcoll

# The ten element types of the C API that NumPy has (bfloat16 is tested through torch).
DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
INTS = [d for d in DTYPES if not d.startswith("float")]
OPS = {
    "SUM": (shmcoll.SUM, lambda a: np.sum(a, axis=0, dtype=a.dtype)),
    "PROD": (shmcoll.PROD, lambda a: np.prod(a, axis=0, dtype=a.dtype)),
    "MIN": (shmcoll.MIN, lambda a: np.min(a, axis=0)),
    "MAX": (shmcoll.MAX, lambda a: np.max(a, axis=0)),
    "BAND": (shmcoll.BAND, lambda a: np.bitwise_and.reduce(a, axis=0)),
    "BOR": (shmcoll.BOR, lambda a: np.bitwise_or.reduce(a, axis=0)),
    "BXOR": (shmcoll.BXOR, lambda a: np.bitwise_xor.reduce(a, axis=0)),
}
COUNTS = [1, 7, 1000, 70000]


def data(rank, n, dtype, salt=0):
    """Rank r's input: small values, so float sums are exact in every order and integer
    products stay meaningful (they wrap as the library's do)."""
    i = np.arange(n, dtype=np.int64)
    v = (i * 7 + rank * 13 + salt) % 5 + (1 if dtype.startswith("float") else 0)
    return v.astype(dtype)


def every(comm, n, dtype, salt=0):
    return np.stack([data(r, n, dtype, salt) for r in range(comm.size)])


def fold(rows, fn):
    # In rank order, as the library folds: what every rank must get, bit for bit.
    with np.errstate(over="ignore"):
        return fn(rows).astype(rows.dtype)


def pairs():
    for d in DTYPES:
        for name in OPS:
            if name.startswith("B") and d not in INTS:
                continue
            yield d, name


@pytest.mark.parametrize("dtype,opname", list(pairs()))
def test_allreduce(comm, dtype, opname):
    op, fn = OPS[opname]
    for n in COUNTS:
        send = data(comm.rank, n, dtype)
        recv = np.zeros(n, dtype)
        comm.Allreduce(send, recv, op=op)
        want = fold(every(comm, n, dtype), fn)
        np.testing.assert_array_equal(recv, want, err_msg="n=%d" % n)
        np.testing.assert_array_equal(send, data(comm.rank, n, dtype), "sendbuf changed")


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_in_place_and_avg(comm, dtype):
    n = 1001
    buf = data(comm.rank, n, dtype)
    comm.Allreduce(shmcoll.IN_PLACE, buf, op=shmcoll.MAX)
    np.testing.assert_array_equal(buf, every(comm, n, dtype).max(axis=0))
    out = np.zeros(n, dtype)
    comm.Allreduce(data(comm.rank, n, dtype), out, op=shmcoll.AVG)
    rows = every(comm, n, dtype)
    if dtype in INTS:
        want = (rows.astype(np.int64).sum(axis=0) // comm.size).astype(dtype)
        np.testing.assert_array_equal(out, want)
    else:
        want = rows.astype(np.float64).sum(axis=0) / comm.size
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=1e-3)


@pytest.mark.parametrize("root", [0, -1])
def test_reduce(comm, root):
    root = root % comm.size
    n = 5000
    send = data(comm.rank, n, "float32")
    recv = np.zeros(n, "float32") if comm.rank == root else None
    comm.Reduce(send, recv, op=shmcoll.SUM, root=root)
    if comm.rank == root:
        np.testing.assert_array_equal(recv, every(comm, n, "float32").sum(axis=0))
    # The root in place.
    buf = data(comm.rank, n, "int64")
    if comm.rank == root:
        comm.Reduce(shmcoll.IN_PLACE, buf, op=shmcoll.MIN, root=root)
        np.testing.assert_array_equal(buf, every(comm, n, "int64").min(axis=0))
    else:
        comm.Reduce(buf, None, op=shmcoll.MIN, root=root)


@pytest.mark.parametrize("n", COUNTS)
def test_bcast(comm, n):
    root = comm.size - 1
    buf = data(comm.rank, n, "uint8", salt=1) if comm.rank == root else np.zeros(n, "uint8")
    comm.Bcast(buf, root=root)
    np.testing.assert_array_equal(buf, data(root, n, "uint8", salt=1))


@pytest.mark.parametrize("n", [1, 300, 40000])
def test_allgather_gather_scatter_alltoall(comm, n):
    P, r = comm.size, comm.rank
    mine = data(r, n, "int32")
    rows = every(comm, n, "int32")
    out = np.zeros(P * n, "int32")
    comm.Allgather(mine, out)
    np.testing.assert_array_equal(out, rows.ravel())
    # Allgather in place: this rank's block already in recvbuf.
    out2 = np.zeros(P * n, "int32")
    out2[r * n : (r + 1) * n] = mine
    comm.Allgather(shmcoll.IN_PLACE, out2)
    np.testing.assert_array_equal(out2, rows.ravel())

    root = P // 2
    g = np.zeros(P * n, "int32") if r == root else None
    comm.Gather(mine, g, root=root)
    if r == root:
        np.testing.assert_array_equal(g, rows.ravel())

    full = np.arange(P * n, dtype="float64") * 3 if r == root else None
    part = np.zeros(n, "float64")
    comm.Scatter(full, part, root=root)
    np.testing.assert_array_equal(part, np.arange(r * n, (r + 1) * n, dtype="float64") * 3)

    # Alltoall: block q of rank p is p * 1000 + q, repeated.
    send = np.repeat(np.arange(P, dtype="int64") + 1000 * r, n)
    recv = np.zeros(P * n, "int64")
    comm.Alltoall(send, recv)
    np.testing.assert_array_equal(recv, np.repeat(np.arange(P, dtype="int64") * 1000 + r, n))


def test_reduce_scatter_block_scan_exscan(comm):
    P, r, n = comm.size, comm.rank, 333
    send = data(r, P * n, "uint32")
    recv = np.zeros(n, "uint32")
    comm.Reduce_scatter_block(send, recv, op=shmcoll.SUM)
    total = every(comm, P * n, "uint32").sum(axis=0, dtype="uint32")
    np.testing.assert_array_equal(recv, total[r * n : (r + 1) * n])

    x = data(r, n, "int64")
    rows = every(comm, n, "int64")
    s = np.zeros(n, "int64")
    comm.Scan(x, s, op=shmcoll.SUM)
    np.testing.assert_array_equal(s, rows[: r + 1].sum(axis=0))
    e = np.full(n, -7, "int64")
    comm.Exscan(x, e, op=shmcoll.SUM)
    if r > 0:  # rank 0's result is undefined, as in MPI
        np.testing.assert_array_equal(e, rows[:r].sum(axis=0))


def test_buffers_other_than_numpy(comm):
    # bytearray and memoryview move as bytes; array.array reduces by its typecode.
    import array

    b = bytearray(b"x" * 10) if comm.rank == 0 else bytearray(10)
    comm.Bcast(memoryview(b), root=0)
    assert b == bytearray(b"x" * 10)
    a = array.array("d", [comm.rank + 0.5] * 3)
    out = array.array("d", [0.0] * 3)
    comm.Allreduce(a, out, op=shmcoll.SUM)
    assert list(out) == [sum(p + 0.5 for p in range(comm.size))] * 3
    # mpi4py's list forms.
    x = np.arange(8, dtype="float64")
    y = np.zeros(8, "float64")
    comm.Allreduce([x, shmcoll.FLOAT64], [y, shmcoll.FLOAT64], op=shmcoll.MAX)
    np.testing.assert_array_equal(y, x)
    y[:] = 0
    comm.Allreduce([x, 5, shmcoll.FLOAT64], [y, 5, shmcoll.FLOAT64], op=shmcoll.SUM)
    np.testing.assert_array_equal(y[:5], x[:5] * comm.size)
    assert (y[5:] == 0).all()


def test_objects(comm):
    P, r = comm.size, comm.rank
    assert comm.bcast({"k": [1, 2, r]} if r == 0 else None, root=0) == {"k": [1, 2, 0]}
    assert comm.allgather(("r", r)) == [("r", p) for p in range(P)]
    g = comm.gather("x" * r, root=0)
    assert g == (["x" * p for p in range(P)] if r == 0 else None)
    assert comm.scatter([p * p for p in range(P)] if r == P - 1 else None, root=P - 1) == r * r
    assert comm.alltoall([(r, q) for q in range(P)]) == [(p, r) for p in range(P)]
    assert comm.allreduce(r + 1) == P * (P + 1) // 2
    assert comm.allreduce([r], op=shmcoll.SUM) == list(range(P))
    assert comm.reduce(r, op=shmcoll.MAX, root=0) == (P - 1 if r == 0 else None)
    comm.barrier()


def test_point_to_point(comm):
    P, r = comm.size, comm.rank
    if P == 1:
        # A message to oneself, then received.
        req_data = np.arange(4, dtype="int32")
        comm.Sendrecv(req_data, 0, 5, out := np.zeros(4, "int32"), 0, 5)
        np.testing.assert_array_equal(out, req_data)
        return
    right, left = (r + 1) % P, (r - 1) % P
    # A ring with tags as channels; the receive's status says who and what.
    send = np.full(100, r, "float64")
    recv = np.zeros(100, "float64")
    st = shmcoll.Status()
    comm.Sendrecv(send, right, 7, recv, left, 7, st)
    assert (recv == left).all()
    assert st.Get_source() == left and st.Get_tag() == 7
    assert st.Get_count(shmcoll.FLOAT64) == 100
    # Send/Recv with any source and tag; Probe sizes the message first. (The barriers keep
    # each phase's messages out of the next one's wildcard receives.)
    comm.Barrier()
    if r == 0:
        got = set()
        for _ in range(P - 1):
            st = shmcoll.Status()
            comm.Probe(shmcoll.ANY_SOURCE, shmcoll.ANY_TAG, st)
            buf = bytearray(st.nbytes)
            comm.Recv(buf, st.source, st.tag)
            got.add((st.source, st.tag, bytes(buf)))
        assert got == {(p, 100 + p, b"m%d" % p) for p in range(1, P)}
    else:
        comm.Send(bytearray(b"m%d" % r), 0, tag=100 + r)
    comm.Barrier()
    # Objects.
    if r == 0:
        comm.send({"to": 1}, dest=1, tag=3)
    elif r == 1:
        assert comm.recv(source=0, tag=3) == {"to": 1}
    assert comm.sendrecv(("from", r), dest=right, source=left) == ("from", left)


def test_non_blocking(comm):
    P, r, n = comm.size, comm.rank, 20000
    out = np.zeros(n, "float64")
    # The send buffer is a temporary: the request keeps it alive until it completes.
    req = comm.Iallreduce(data(r, n, "float64"), out, op=shmcoll.SUM)
    b = np.arange(10, dtype="int32") if r == 0 else np.zeros(10, "int32")
    req2 = comm.Ibcast(b, root=0)
    bar = comm.Ibarrier()
    shmcoll.Request.Waitall([req, req2, bar])
    np.testing.assert_array_equal(out, every(comm, n, "float64").sum(axis=0))
    np.testing.assert_array_equal(b, np.arange(10, dtype="int32"))
    assert req.completed and req2.completed
    # Point to point: a ring of Isend/Irecv, waited for in any order; Test until done.
    right, left = (r + 1) % P, (r - 1) % P
    got = np.zeros(5, "int64")
    rr = comm.Irecv(got, source=left, tag=9)
    sr = comm.Isend(np.full(5, r, "int64"), dest=right, tag=9)
    st = shmcoll.Status()
    while not rr.Test(st):
        pass
    sr.Wait()
    assert (got == left).all() and st.source == left and st.tag == 9
    # Gather and Alltoall started together, completed together.
    g = np.zeros(P * 3, "int32")
    a = np.zeros(P, "int64")
    reqs = [comm.Iallgather(np.full(3, r, "int32"), g), comm.Ialltoall(np.arange(P) + 10 * r, a)]
    while not shmcoll.Request.Testall(reqs):
        pass
    np.testing.assert_array_equal(g, np.repeat(np.arange(P, dtype="int32"), 3))
    np.testing.assert_array_equal(a, np.arange(P) * 10 + r)


def test_errors_raise_before_the_call(comm):
    x = np.zeros((4, 4), "float32")
    with pytest.raises(shmcoll.BufferError) as e:
        comm.Allreduce(x[:, 1], np.zeros(4, "float32"))
    assert isinstance(e.value, ValueError) and isinstance(e.value, BufferError)
    # A reduction a datatype does not have (MPI's rules): TypeError.
    with pytest.raises(TypeError):
        comm.Allreduce(np.zeros(4, "complex64"), np.zeros(4, "complex64"), op=shmcoll.MAX)
    with pytest.raises(TypeError):
        comm.Allreduce(np.zeros(4, "float32"), np.zeros(4, "float32"), op=shmcoll.BXOR)
    # Send and receive that disagree: ValueError, as mpi4py's.
    with pytest.raises(ValueError):
        comm.Allreduce(np.zeros(4, "float32"), np.zeros(4, "float64"))
    with pytest.raises(ValueError):
        comm.Allreduce(np.zeros(4, "float32"), np.zeros(3, "float32"))
    # A root that is no rank: shmcoll.Error (MPI.Exception, a RuntimeError as mpi4py's).
    with pytest.raises(shmcoll.Error) as e:
        comm.Bcast(np.zeros(4), root=comm.size)
    assert isinstance(e.value, RuntimeError) and e.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        comm.Allreduce([1, 2], np.zeros(2))
    ro = np.zeros(4, "float32")
    ro.flags.writeable = False
    with pytest.raises(shmcoll.BufferError):
        comm.Allreduce(np.zeros(4, "float32"), ro)
    # The communicator still works after every one of them.
    y = np.ones(3)
    comm.Allreduce(shmcoll.IN_PLACE, y)
    assert (y == comm.size).all()


def test_error_classes(job):
    assert issubclass(shmcoll.Error, OSError)
    assert issubclass(shmcoll.TimeoutError, shmcoll.Error)
    assert issubclass(shmcoll.TimeoutError, TimeoutError)
    # Rank 0 of a job of two whose rank 1 never comes.
    with pytest.raises(shmcoll.TimeoutError) as e:
        shmcoll.Comm(0, 2, job, timeout_ms=200)
    assert e.value.errno == errno.ETIMEDOUT
    assert "rank" in str(e.value)


def run_threads(n, body):
    """body(rank) on n threads; the exceptions they raised, by rank."""
    errors = [None] * n

    def run(r):
        try:
            body(r)
        except BaseException as exc:  # noqa: B902 (reported to the test)
            errors[r] = exc

    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
        assert not t.is_alive(), "a thread hangs"
    return errors


def test_threads_release_the_gil(job):
    # Two threads of this process are two ranks: a call that held the GIL while waiting for
    # its peer would never return.
    out = {}

    def body(r):
        with shmcoll.Comm(r, 2, job, timeout_ms=60000) as c:
            x = np.full(1000, r + 1, "int64")
            c.Allreduce(shmcoll.IN_PLACE, x)
            out[r] = x

    assert run_threads(2, body) == [None, None]
    assert (out[0] == 3).all() and (out[1] == 3).all()


def test_with_block_breaks_the_communicator_on_an_exception(job):
    class Boom(Exception):
        pass

    def body(r):
        with shmcoll.Comm(r, 2, job, timeout_ms=60000) as c:
            c.Barrier()
            if r == 0:
                raise Boom()
            c.Barrier()  # rank 0 never comes: the break ends this wait

    errors = run_threads(2, body)
    assert isinstance(errors[0], Boom)
    assert isinstance(errors[1], shmcoll.Error)
    assert errors[1].errno in (errno.ECANCELED, errno.EPROTO, errno.EOWNERDEAD)


def test_freed_communicator(job):
    c = shmcoll.Comm(0, 1, job)
    c.Free()
    with pytest.raises(shmcoll.Error) as e:
        c.Barrier()
    assert e.value.errno == errno.EINVAL


def test_the_benchmarks_c_loop(comm):
    # bench/python/overhead.py times Python's calls against this loop of the same calls in C.
    x = np.full(2, comm.rank + 1, "float32")
    y = np.zeros(2, "float32")
    secs = comm._allreduce_loop(x, y, 10)
    assert secs > 0
    assert (y == comm.size * (comm.size + 1) / 2).all()

