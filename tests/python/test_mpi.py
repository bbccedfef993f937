"""from shmcoll import MPI: mpi4py's names and buffer forms, written the way mpi4py programs
are; and the variable-count calls against NumPy references on every rank."""

import numpy as np
import pytest

from shmcoll import MPI


def test_module_names(comm):
    world = MPI.COMM_WORLD
    assert world is MPI.COMM_WORLD  # made once
    assert world.Get_size() == comm.size and world.Get_rank() == comm.rank
    assert MPI.COMM_SELF.Get_size() == 1
    assert MPI.DOUBLE.Get_size() == 8 and MPI.INT.Get_size() == 4 and MPI.BYTE.Get_size() == 1
    assert isinstance(comm, MPI.Intracomm)
    t0 = MPI.Wtime()
    assert MPI.Wtime() >= t0 and MPI.Wtick() > 0
    assert isinstance(MPI.Get_processor_name(), str)
    MPI.Finalize()  # safe, and nothing stops working
    x = np.ones(2)
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
    assert (x == comm.size).all()


def test_tags_as_channels_and_proc_null(comm):
    # The classic halo exchange: send right, receive left; the edges talk to PROC_NULL.
    r, P = comm.rank, comm.size
    right = r + 1 if r + 1 < P else MPI.PROC_NULL
    left = r - 1 if r > 0 else MPI.PROC_NULL
    halo = np.full(3, -1.0)
    st = MPI.Status()
    comm.Sendrecv(np.full(3, float(r)), dest=right, sendtag=11, recvbuf=halo, source=left,
                  recvtag=11, status=st)
    if left == MPI.PROC_NULL:
        assert (halo == -1).all() and st.Get_source() == MPI.PROC_NULL
    else:
        assert (halo == left).all() and st.Get_source() == left and st.Get_tag() == 11
    comm.Send(np.zeros(1), dest=MPI.PROC_NULL)
    comm.Recv(np.zeros(1), source=MPI.PROC_NULL)


def test_isend_irecv_waitall(comm):
    # Every rank sends every other rank a message of its own; tags say from whom.
    r, P = comm.rank, comm.size
    bufs = [np.zeros(4, "i") for _ in range(P)]
    reqs = [comm.Irecv([bufs[p], MPI.INT], source=p, tag=p) for p in range(P) if p != r]
    reqs += [comm.Isend([np.full(4, 100 * r + p, "i"), MPI.INT], dest=p, tag=r)
             for p in range(P) if p != r]
    MPI.Request.Waitall(reqs)
    for p in range(P):
        if p != r:
            assert (bufs[p] == 100 * p + r).all()


def test_allgatherv_gatherv_scatterv(comm):
    r, P = comm.rank, comm.size
    counts = [p + 1 for p in range(P)]
    displs = [sum(counts[:p]) + 2 * p for p in range(P)]  # gaps between the blocks
    total = displs[-1] + counts[-1] + 3
    mine = np.full(counts[r], r + 0.5)
    out = np.full(total, -9.0)
    comm.Allgatherv(mine, [out, counts, displs, MPI.DOUBLE])
    want = np.full(total, -9.0)
    for p in range(P):
        want[displs[p] : displs[p] + counts[p]] = p + 0.5
    np.testing.assert_array_equal(out, want)  # the gaps untouched

    root = P - 1
    g = np.full(total, -9.0) if r == root else None
    comm.Gatherv(mine, [g, (counts, displs), MPI.DOUBLE] if r == root else None, root=root)
    if r == root:
        np.testing.assert_array_equal(g, want)

    src = np.arange(sum(counts), dtype="int64") if r == 0 else None
    part = np.zeros(counts[r], "int64")
    comm.Scatterv([src, counts, MPI.INT64_T] if r == 0 else None, part, root=0)
    start = sum(counts[:r])
    np.testing.assert_array_equal(part, np.arange(start, start + counts[r]))


def test_alltoallv_uneven(comm):
    # Rank r sends q + r + 1 elements of value 1000 r + q to rank q (mixture-of-experts
    # routing with uneven token counts); counts exchanged first with Alltoall.
    r, P = comm.rank, comm.size
    scounts = np.array([q + r + 1 for q in range(P)], "int64")
    rcounts = np.zeros(P, "int64")
    comm.Alltoall(scounts, rcounts)
    np.testing.assert_array_equal(rcounts, [r + p + 1 for p in range(P)])
    sdispls = np.concatenate([[0], np.cumsum(scounts)[:-1]])
    rdispls = np.concatenate([[0], np.cumsum(rcounts)[:-1]])
    send = np.concatenate([np.full(scounts[q], 1000 * r + q, "float32") for q in range(P)])
    recv = np.zeros(rcounts.sum(), "float32")
    comm.Alltoallv([send, (scounts, sdispls), MPI.FLOAT], [recv, (rcounts, rdispls), MPI.FLOAT])
    want = np.concatenate([np.full(rcounts[p], 1000 * p + r, "float32") for p in range(P)])
    np.testing.assert_array_equal(recv, want)


def test_reduce_scatter(comm):
    r, P = comm.rank, comm.size
    counts = [2 * p + 1 for p in range(P)]
    n = sum(counts)
    send = np.arange(n, dtype="int32") * (r + 1)
    recv = np.zeros(counts[r], "int32")
    comm.Reduce_scatter(send, recv, recvcounts=counts, op=MPI.SUM)
    total = np.arange(n, dtype="int32") * sum(p + 1 for p in range(P))
    start = sum(counts[:r])
    np.testing.assert_array_equal(recv, total[start : start + counts[r]])
    # Counts left out: every rank's receive buffer's.
    recv2 = np.zeros(counts[r], "int32")
    comm.Reduce_scatter(send, recv2, op=MPI.SUM)
    np.testing.assert_array_equal(recv2, recv)
    # In place: the input in recvbuf, this rank's block at its start.
    buf = send.copy()
    comm.Reduce_scatter(MPI.IN_PLACE, buf, recvcounts=counts, op=MPI.SUM)
    np.testing.assert_array_equal(buf[: counts[r]], recv)


def test_vector_blocks_past_the_end_raise(comm):
    out = np.zeros(comm.size)
    try:
        comm.Allgatherv(np.zeros(1), [out, [1] * comm.size, [comm.size] * comm.size, MPI.DOUBLE])
    except ValueError:
        pass
    else:
        raise AssertionError("a block past the end of recvbuf was accepted")


# ---- object point-to-point: isend, irecv and their requests ----

BIG = 300_000  # int64 elements: a pickle far above the eager size, so it needs its receiver


def test_obj_isend_then_recv_exchange(comm):
    # Every rank isends to its right neighbour and then receives from its left one: each
    # isend would wait for a receive that is only posted after it, were it to block.
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    for n in (3, BIG):
        req = comm.isend(np.arange(n) * (r + 1), dest=right, tag=4)
        got = comm.recv(source=left, tag=4)
        assert req.wait() is None
        np.testing.assert_array_equal(got, np.arange(n) * (left + 1))
    # The same with irecv and both waited by waitall, sends first.
    sreq = comm.isend({"from": r, "data": list(range(BIG // 100))}, dest=right, tag=5)
    rreq = comm.irecv(source=left, tag=5)
    out = MPI.Request.waitall([sreq, rreq])
    assert out[0] is None and out[1] == {"from": left, "data": list(range(BIG // 100))}


def test_obj_irecv_before_blocking_send(comm):
    # MPI's receive-first exchange: the posted irecv lets the peer's large blocking send
    # finish while this rank is in its own.
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    req = comm.irecv(source=left, tag=9)
    comm.send(np.full(BIG, r), dest=right, tag=9)
    st = MPI.Status()
    got = req.wait(st)
    np.testing.assert_array_equal(got, np.full(BIG, left))
    assert st.Get_source() == left and st.Get_tag() == 9 and st.Get_count() > 8 * BIG


def test_obj_irecv_wildcards_keep_order(comm):
    # Every rank sends rank 0 K messages on each of two tags, numbered; rank 0 posts all its
    # receives with ANY_SOURCE / ANY_TAG and waits for them in reverse. Whatever the
    # interleaving, each (source, tag) stream comes in the order it was sent, and every
    # message arrives once.
    r, P = comm.rank, comm.size
    K = 5
    sends = [comm.isend((r, tag, k), dest=0, tag=tag) for k in range(K) for tag in (1, 2)]
    if r == 0:
        reqs = [comm.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) for _ in range(2 * K * P)]
        statuses = [MPI.Status() for _ in reqs]
        got = [None] * len(reqs)
        for i in reversed(range(len(reqs))):
            got[i] = reqs[i].wait(statuses[i])
        assert sorted(got) == sorted((p, t, k) for p in range(P) for t in (1, 2) for k in range(K))
        for (src, tag, _), st in zip(got, statuses):
            assert st.Get_source() == src and st.Get_tag() == tag
        for p in range(P):
            for t in (1, 2):
                assert [k for s, tg, k in got if (s, tg) == (p, t)] == list(range(K))
    MPI.Request.Waitall(sends)


def test_obj_irecv_specific_before_wildcard(comm):
    # A receive for (left, tag 7) posted before an ANY_SOURCE/ANY_TAG one gets the tag-7
    # message even when the wildcard is waited for first: receives match in posting order.
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    specific = comm.irecv(source=left, tag=7)
    wild = comm.irecv()
    comm.barrier()  # both posted on every rank before any message goes
    s7 = comm.isend(("seven", r), dest=right, tag=7)
    s8 = comm.isend(("eight", r), dest=right, tag=8)
    st = MPI.Status()
    assert wild.wait(st) == ("eight", left) and st.Get_tag() == 8 and st.Get_source() == left
    assert specific.wait() == ("seven", left)
    assert MPI.Request.waitall([s7, s8]) == [None, None]


def test_obj_test_before_and_after(comm):
    r, P = comm.rank, comm.size
    right, left = (r + 1) % P, (r - 1) % P
    req = comm.irecv(source=left, tag=3)
    assert req.test() == (False, None)  # nothing is sent before the barrier
    assert req.Test() is False and not MPI.Request.Testall([req])
    assert MPI.Request.testall([req]) == (False, None)
    comm.barrier()
    sreq = comm.isend([r, "x"], dest=right, tag=3)
    flag, obj = req.test()
    while not flag:  # each test moves messages on; no sleep, no timing
        flag, obj = req.test()
    assert obj == [left, "x"]
    assert req.test() == (True, None)  # the object is returned once, as mpi4py's
    assert req.wait() is None
    flag, objs = MPI.Request.testall([sreq])
    while not flag:
        flag, objs = MPI.Request.testall([sreq])
    assert objs == [None]
    # testall gives the objects only once every request completed, and keeps them till then.
    a = comm.irecv(source=left, tag=21)
    b = comm.irecv(source=left, tag=22)
    s1 = comm.isend("one", dest=right, tag=21)
    comm.barrier()
    flag, objs = MPI.Request.testall([a, b])
    assert not flag and objs is None
    comm.barrier()
    s2 = comm.isend("two", dest=right, tag=22)
    flag, objs = MPI.Request.testall([a, b])
    while not flag:
        flag, objs = MPI.Request.testall([a, b])
    assert objs == ["one", "two"]
    MPI.Request.Waitall([s1, s2])


def test_obj_proc_null_and_sendrecv(comm):
    r, P = comm.rank, comm.size
    st = MPI.Status()
    assert comm.irecv(source=MPI.PROC_NULL).wait(st) is None
    assert st.Get_source() == MPI.PROC_NULL
    assert comm.isend("lost", dest=MPI.PROC_NULL).wait() is None
    assert comm.recv(source=MPI.PROC_NULL) is None
    right, left = (r + 1) % P, (r - 1) % P
    # sendrecv's message is one message: the peer may take it with recv.
    if P > 1 and r == 0:
        assert comm.recv(source=1, tag=6) == "from 1"
        comm.send("to 1", dest=1, tag=6)
    elif r == 1:
        assert comm.sendrecv("from 1", dest=0, sendtag=6, source=0, recvtag=6) == "to 1"
    big = np.arange(BIG) + r
    got = comm.sendrecv(big, dest=right, sendtag=1, source=left, recvtag=1, status=st)
    np.testing.assert_array_equal(got, np.arange(BIG) + left)
    assert st.Get_source() == left and st.Get_tag() == 1


# ---- NumPy arrays in the object collectives: raw bytes, mpi4py's results ----

RAW_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
              "float64"]


class _NoArrayPickle:
    """Stands for the pickle module in shmcoll._comm: an array of a supported dtype must
    not be pickled."""

    dumps_arrays = 0

    def __init__(self, real):
        self.real = real
        self.HIGHEST_PROTOCOL = real.HIGHEST_PROTOCOL
        self.loads = real.loads

    def dumps(self, obj, *args):
        if isinstance(obj, np.ndarray) and obj.dtype.name in RAW_DTYPES and obj.ndim:
            raise AssertionError("an array of %s was pickled" % obj.dtype)
        return self.real.dumps(obj, *args)


@pytest.fixture
def no_array_pickle(monkeypatch):
    import pickle

    import shmcoll._comm

    monkeypatch.setattr(shmcoll._comm, "pickle", _NoArrayPickle(pickle))


def _value(p, shape, dtype):
    # Small integers, exact in every dtype (float16 too), different per rank.
    return ((np.arange(int(np.prod(shape))) % 7 + p) % 11).astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", RAW_DTYPES)
def test_raw_allreduce_reduce(comm, dtype, no_array_pickle):
    r, P = comm.rank, comm.size
    shape = (3, 4)
    everyone = [_value(p, shape, dtype) for p in range(P)]
    ops = [(MPI.SUM, lambda a, b: a + b), (MPI.MAX, np.maximum), (MPI.MIN, np.minimum),
           (MPI.PROD, lambda a, b: a * b)]
    if dtype.startswith(("int", "uint")):
        ops.append((MPI.BXOR, np.bitwise_xor))
    for op, fn in ops:
        want = everyone[0]
        for a in everyone[1:]:
            want = fn(want, a)
        got = comm.allreduce(everyone[r], op=op)
        assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == shape
        np.testing.assert_array_equal(got, want)
        root = P - 1
        got = comm.reduce(everyone[r], op=op, root=root)
        if r == root:
            assert got.dtype == want.dtype and got.shape == shape
            np.testing.assert_array_equal(got, want)
        else:
            assert got is None


@pytest.mark.parametrize("dtype", RAW_DTYPES)
def test_raw_bcast_gather_allgather(comm, dtype, no_array_pickle):
    r, P = comm.rank, comm.size
    # Every rank its own shape (and rank 0 an empty array), as mpi4py allows.
    shapes = [(0,)] + [(p, 2, 3) if p % 2 else (p + 2,) for p in range(1, P)]
    everyone = [_value(p, shapes[p], dtype) for p in range(P)]
    for root in {0, P - 1}:
        mine = everyone[root].copy() if r == root else None
        got = comm.bcast(mine, root=root)
        assert got.dtype == dtype and got.shape == shapes[root]
        np.testing.assert_array_equal(got, everyone[root])
        if r == root:
            assert got is not mine  # a copy, as mpi4py's root gets
        got = comm.gather(everyone[r], root=root)
        if r == root:
            assert len(got) == P
            for g, w in zip(got, everyone):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g, w)
        else:
            assert got is None
    got = comm.allgather(everyone[r])
    for g, w in zip(got, everyone):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
        g += 1  # writable, and each its own
    # A non-contiguous view travels as its contiguous copy.
    got = comm.allgather(np.arange(12, dtype=dtype).reshape(3, 4)[:, ::2] + r)
    for p, g in enumerate(got):
        np.testing.assert_array_equal(g, np.arange(12, dtype=dtype).reshape(3, 4)[:, ::2] + p)


def test_raw_and_pickled_mixed(comm):
    # Arrays that do not agree, or other objects, take the pickle path with mpi4py's
    # results (NumPy's own + for the fold).
    r, P = comm.rank, comm.size
    got = comm.allreduce(np.arange(4, dtype="int32") if r else np.arange(4, dtype="float64"))
    want = np.arange(4, dtype="float64") + (P - 1) * np.arange(4, dtype="int32")
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    # A rank with a list among ranks with arrays: every rank still agrees on the path.
    mine = [r, r] if r == 0 else np.array([r, r])
    np.testing.assert_array_equal(comm.allreduce(mine), np.array([1, 1]) * sum(range(P))
                                  if P > 1 else [0, 0])
    out = comm.allgather(mine)
    assert out[0] == [0, 0] and all((out[p] == [p, p]).all() for p in range(1, P))
    # dtypes the C API has not (int16, bool, complex) and 0-d arrays are pickled.
    for x in (np.arange(3, dtype="int16"), np.array([True, False]), np.ones(2, "complex128"),
              np.array(2.5)):
        got = comm.allreduce(x)
        assert got.dtype == (x + x).dtype and np.shape(got) == x.shape
        np.testing.assert_array_equal(got, sum([x] * (P - 1), x))
        got = comm.bcast(x if r == 0 else None)
        assert got.dtype == x.dtype and got.shape == x.shape
    # Broadcasting shapes fold as NumPy does.
    got = comm.allreduce(np.ones((2, 1)) if r % 2 else np.ones(3))
    assert got.shape == ((2, 3) if P > 1 else (3,))
