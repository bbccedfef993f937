"""shmcoll.malloc: NumPy arrays over symmetric memory. Every collective is checked against a
NumPy reference computed from every rank's input, on every rank, with the arrays as send
buffers (the library's zero-copy path), as receive buffers and in place; the arrays' lifetime
against their communicator's; and the bad arguments, raised before any rank calls in."""

import errno
import gc
import threading
import weakref

import numpy as np
import pytest

import shmcoll

REDUCIBLE = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
             "float64"]
SHAPES = [1, 7, (3, 5, 7), (2, 1000)]
PAIR = np.dtype([("id", "<i4"), ("x", "<f8"), ("tag", "S3")])  # a structured dtype


def data(rank, shape, dtype, salt=0):
    """Rank r's input: small values, so float sums are exact in every order."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    v = (i * 7 + rank * 13 + salt) % 5 + 1
    return v.astype(dtype).reshape(shape)


def fancy(rank, n, dtype):
    """Rank r's input of dtype, which may be one no reduction takes (complex128, PAIR)."""
    i = np.arange(n)
    if dtype == PAIR:
        out = np.zeros(n, PAIR)
        out["id"] = i + 1000 * rank
        out["x"] = i * 0.5 - rank
        out["tag"] = [b"r%d" % ((rank + k) % 10) for k in range(n)]
        return out
    if dtype.kind == "c":
        return (i + 1j * (rank + 1) * i - rank).astype(dtype)
    return (i + 100 * rank).astype(dtype)


def as_shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def test_an_array_over_symmetric_memory(comm):
    a = shmcoll.malloc(comm, (4, 6), "float32")
    assert isinstance(a, np.ndarray)
    assert a.shape == (4, 6) and a.dtype == np.float32
    assert a.flags.c_contiguous and a.flags.writeable and not a.flags.owndata
    buf = a.base
    assert isinstance(buf, shmcoll.SymmetricBuffer)
    assert buf.nbytes == a.nbytes == 96
    assert buf.address == a.ctypes.data and buf.address % 128 == 0  # the library's alignment
    assert buf.comm is comm
    view = memoryview(buf)
    assert view.format == "B" and view.nbytes == 96 and not view.readonly
    # The default dtype is float (float64), an int shape a 1-D array; the method is the same.
    b = comm.malloc(5)
    assert b.shape == (5,) and b.dtype == np.float64
    c = shmcoll.malloc(comm, (), "int64")  # 0-d: one element
    assert c.shape == () and c.nbytes == 8
    # Each allocation is memory of its own.
    a[...] = 1
    b[...] = 2
    c[...] = 3
    assert (a == 1).all() and (b == 2).all() and c == 3
    for x, y in ((a, b), (a, c), (b, c)):
        assert not np.shares_memory(x, y)


@pytest.mark.parametrize("dtype", REDUCIBLE)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_allreduce_from_into_and_in_place(comm, dtype, shape):
    shape = as_shape(shape)
    rows = np.stack([data(r, shape, dtype) for r in range(comm.size)])
    want = rows.sum(axis=0, dtype=dtype)
    send = shmcoll.malloc(comm, shape, dtype)
    recv = shmcoll.malloc(comm, shape, dtype)
    send[...] = data(comm.rank, shape, dtype)
    # Symmetric to symmetric.
    comm.Allreduce(send, recv, op=shmcoll.SUM)
    np.testing.assert_array_equal(recv, want)
    np.testing.assert_array_equal(send, data(comm.rank, shape, dtype), "sendbuf changed")
    # Symmetric to an ordinary array, and an ordinary array into symmetric memory.
    out = np.zeros(shape, dtype)
    comm.Allreduce(send, out, op=shmcoll.MAX)
    np.testing.assert_array_equal(out, rows.max(axis=0))
    recv[...] = 0
    comm.Allreduce(data(comm.rank, shape, dtype), recv, op=shmcoll.MIN)
    np.testing.assert_array_equal(recv, rows.min(axis=0))
    # In place.
    comm.Allreduce(shmcoll.IN_PLACE, send, op=shmcoll.SUM)
    np.testing.assert_array_equal(send, want)


@pytest.mark.parametrize("dtype", ["int32", "float64", "complex128", "PAIR"])
def test_allgather_and_bcast(comm, dtype):
    dt = PAIR if dtype == "PAIR" else np.dtype(dtype)
    n = 37
    every = np.stack([fancy(r, n, dt) for r in range(comm.size)])
    send = shmcoll.malloc(comm, n, dt)
    send[...] = fancy(comm.rank, n, dt)
    # Allgather: symmetric into symmetric, into an ordinary array, ordinary into symmetric.
    recv = shmcoll.malloc(comm, (comm.size, n), dt)
    comm.Allgather(send, recv)
    np.testing.assert_array_equal(recv, every)
    out = np.zeros((comm.size, n), dt)
    comm.Allgather(send, out)
    np.testing.assert_array_equal(out, every)
    recv[...] = np.zeros((), dt)
    comm.Allgather(fancy(comm.rank, n, dt), recv)
    np.testing.assert_array_equal(recv, every)
    # Bcast from every root, in symmetric memory.
    buf = shmcoll.malloc(comm, (2, n), dt)
    for root in range(comm.size):
        buf[...] = fancy(comm.rank, n, dt)
        comm.Bcast(buf, root)
        np.testing.assert_array_equal(buf, np.stack([fancy(root, n, dt)] * 2))


def test_the_other_collectives(comm):
    p, r, n = comm.size, comm.rank, 100
    rows = np.stack([data(q, (p, n), "float64") for q in range(p)])
    send = shmcoll.malloc(comm, (p, n), "float64")
    send[...] = data(r, (p, n), "float64")
    got = shmcoll.malloc(comm, (p, n), "float64")
    comm.Alltoall(send, got)
    np.testing.assert_array_equal(got, rows[:, r, :])
    mine = shmcoll.malloc(comm, n, "float64")
    comm.Reduce_scatter_block(send, mine, op=shmcoll.SUM)
    np.testing.assert_array_equal(mine, rows.sum(axis=0)[r])
    for root in range(p):
        comm.Reduce(send, got if r == root else None, op=shmcoll.SUM, root=root)
        if r == root:
            np.testing.assert_array_equal(got, rows.sum(axis=0))
        comm.Gather(send[0], got if r == root else None, root=root)
        if r == root:
            np.testing.assert_array_equal(got, rows[:, 0, :])
    req = comm.Iallreduce(send, got, op=shmcoll.SUM)
    req.Wait()
    np.testing.assert_array_equal(got, rows.sum(axis=0))
    # The object methods take them as any array.
    total = comm.allreduce(send)
    np.testing.assert_array_equal(total, rows.sum(axis=0))


def test_a_heap_that_grows(comm):
    # More than the arena's heap (4 MiB per rank by default): a new segment.
    n = 6 << 20 >> 3
    a = shmcoll.malloc(comm, n, "float64")
    a[...] = comm.rank + 1
    comm.Allreduce(shmcoll.IN_PLACE, a)
    want = comm.size * (comm.size + 1) // 2
    assert a[0] == want and a[-1] == want and (a == want).all()


def test_the_array_keeps_its_communicator(comm):
    d = comm.Dup()
    ref = weakref.ref(d)
    a = shmcoll.malloc(d, (3, 4), "int64")
    del d
    gc.collect()
    assert ref() is not None and a.base.comm is ref()  # the array holds it
    a[...] = data(comm.rank, (3, 4), "int64")
    ref().Allreduce(shmcoll.IN_PLACE, a, op=shmcoll.SUM)
    want = sum(data(r, (3, 4), "int64") for r in range(comm.size))
    np.testing.assert_array_equal(a, want)
    # Views keep it too; the communicator goes with the last of them.
    v = a[1:]
    del a
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(v, want[1:])
    ref().Barrier()
    ref().Free()
    del v
    gc.collect()
    assert ref() is None


def test_free_with_live_arrays(comm):
    d = comm.Dup()
    a = shmcoll.malloc(d, 64, "int32")
    a[...] = comm.rank
    # An operation outstanding: Free frees it for use, and the operation completes (MPI);
    # with the array alive, the memory stays after that too ...
    req = d.Ibarrier()
    d.Free()
    assert d.freed
    assert req.Wait() is True and not req
    with pytest.raises(shmcoll.Error) as e:
        d.Barrier()
    assert e.value.errno == errno.EINVAL
    with pytest.raises(shmcoll.Error) as e:
        shmcoll.malloc(d, 8)
    assert e.value.errno == errno.EINVAL
    # ... and its memory stays, an ordinary array for any other communicator.
    assert (a == comm.rank).all()
    a += 1
    out = np.zeros(64, "int32")
    comm.Allreduce(a, out)
    assert (out == comm.size * (comm.size + 1) // 2).all()
    del a
    gc.collect()


def test_leaving_a_with_block_with_live_arrays(comm):
    with comm.Dup() as d:
        a = d.malloc((2, 3), "float32")
        a[...] = comm.rank
        d.Allreduce(shmcoll.IN_PLACE, a)
    assert d.freed
    assert (a == sum(range(comm.size))).all()  # still mapped
    comm.Allreduce(shmcoll.IN_PLACE, a)
    assert (a == comm.size * sum(range(comm.size))).all()


def test_bad_arguments_raise_before_the_call(comm):
    # Every rank raises the same way without calling into the library: the next malloc and
    # collective on comm are still in step on every rank.
    bad = [
        ((-1,), "float64", ValueError),
        ((3, -2), "int8", ValueError),
        (0, "float64", ValueError),
        ((4, 0), "float64", ValueError),
        (4, "V0", ValueError),  # a dtype of no bytes
        (2.5, "float64", TypeError),
        ((2, "x"), "float64", TypeError),
        (4, "not-a-dtype", TypeError),
        (4, object, TypeError),
        (4, [("a", "i4"), ("o", object)], TypeError),
    ]
    for shape, dtype, exc in bad:
        with pytest.raises(exc):
            shmcoll.malloc(comm, shape, dtype)
    with pytest.raises(ValueError):
        comm._malloc(0)
    a = shmcoll.malloc(comm, 5, "int64")
    a[...] = 1
    comm.Allreduce(shmcoll.IN_PLACE, a)
    assert (a == comm.size).all()


def test_a_failure_of_the_library(comm):
    # More than the symmetric heap can hold, on every rank: shmcoll.Error with the library's
    # message, and comm stays usable.
    with pytest.raises(shmcoll.Error) as e:
        shmcoll.malloc(comm, 1 << 60, "uint8")
    assert e.value.errno == errno.ENOMEM and "shmcoll_malloc" in str(e.value)
    a = shmcoll.malloc(comm, 3, "float64")
    a[...] = 1
    comm.Allreduce(shmcoll.IN_PLACE, a)
    assert (a == comm.size).all()


def test_ranks_that_pass_different_sizes(comm):
    if comm.size == 1:
        pytest.skip("needs two ranks")
    d = comm.Dup()
    try:
        with pytest.raises(shmcoll.Error) as e:
            shmcoll.malloc(d, 10 + comm.rank, "uint8")
        # The communicator broke: EPROTO, with the library's message.
        assert e.value.errno == errno.EPROTO, e.value
        assert "mismatched" in str(e.value)
        with pytest.raises(shmcoll.Error):
            d.Barrier()
    finally:
        d.Free()


def test_a_peer_that_never_comes(job):
    # Two threads are a job of two ranks; rank 1 never calls malloc: rank 0's raises
    # shmcoll.TimeoutError with the library's message once the timeout passes.
    done = threading.Event()
    errors = {}

    def body(r):
        c = shmcoll.Comm(r, 2, job, timeout_ms=2000)
        try:
            if r == 0:
                try:
                    shmcoll.malloc(c, 16)
                except shmcoll.Error as exc:
                    errors[r] = exc
                finally:
                    done.set()
            else:
                done.wait(60)
        finally:
            c.Free()

    ts = [threading.Thread(target=body, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
        assert not t.is_alive(), "a thread hangs"
    assert isinstance(errors.get(0), shmcoll.TimeoutError), errors
    assert errors[0].errno == errno.ETIMEDOUT and "timed out" in str(errors[0])
