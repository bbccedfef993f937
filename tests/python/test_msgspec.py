"""Message specifications as mpi4py reads them (python/src/message.c): every form, in the calls
that take it, checked against NumPy on every rank; the root-only arguments ignored elsewhere;
malformed ones raising mpi4py's exception on the calling rank with the communicator left
usable; and the reductions the library does not do itself (folded in rank order)."""

import array

import numpy as np
import pytest

from shmcoll import MPI


def rank_data(comm, n, dtype="i4", salt=0):
    return (np.arange(n) * 7 + 100 * comm.rank + salt).astype(dtype)


# ---- the simple forms ----


@pytest.mark.parametrize(
    "form",
    ["buf", "buf_type", "buf_typecode", "buf_count", "buf_count_type", "buf_count_displ_type",
     "buf_pair_type", "buf_pair"],
)
def test_bcast_every_simple_form(comm, form):
    root = comm.size - 1
    data = np.arange(10, dtype="f8") + 0.5
    buf = data.copy() if comm.rank == root else np.full(10, -1.0)
    spec = {
        "buf": buf,
        "buf_type": [buf, MPI.DOUBLE],
        "buf_typecode": [buf, "d"],
        "buf_count": [buf, 10],
        "buf_count_type": [buf, 6, MPI.DOUBLE],
        "buf_count_displ_type": [buf, 6, 3, MPI.DOUBLE],
        "buf_pair_type": [buf, (6, 3), MPI.DOUBLE],
        "buf_pair": [buf, (6, 3)],
    }[form]
    comm.Bcast(spec, root=root)
    want = data.copy()
    if form in ("buf_count_type",):
        want[6:] = -1 if comm.rank != root else want[6:]
    if form in ("buf_count_displ_type", "buf_pair_type", "buf_pair"):
        if comm.rank != root:
            want[:3] = -1
            want[9:] = -1
    np.testing.assert_array_equal(buf, want)


def test_typecodes_and_numpy_dtypes_as_datatypes(comm):
    for code, np_type in (("i", "i4"), ("l", "i8"), ("f", "f4"), ("d", "f8"), ("h", "i2"),
                          ("b", "i1"), ("B", "u1"), ("g", np.longdouble), ("F", "c8"),
                          ("D", "c16"), ("?", "?")):
        s = np.ones(3, np_type)
        r = np.zeros(3, np_type)
        if code == "?":
            comm.Allreduce([s, code], [r, code], op=MPI.LAND)
            assert r.all()
            continue
        comm.Allreduce([s, code], [r, code], op=MPI.SUM)
        assert (r == comm.size).all(), code
    s = np.ones(2, "f8")
    r = np.zeros(2, "f8")
    comm.Allreduce([s, np.dtype("f8")], [r, np.dtype("f8")])
    assert (r == comm.size).all()
    assert MPI._typedict["i"] is MPI.INT and MPI._typedict["d"] is MPI.DOUBLE


def test_buffers_of_every_kind(comm):
    # array.array, bytearray, memoryview, a Fortran-ordered array (any contiguous layout
    # is one block of memory, as mpi4py takes it) and __array_interface__ objects.
    a = array.array("i", [comm.rank] * 4)
    out = array.array("i", [0] * 4)
    comm.Allreduce(a, out)
    assert list(out) == [sum(range(comm.size))] * 4
    f = np.asfortranarray(np.arange(6, dtype="f8").reshape(2, 3))
    g = np.zeros((2, 3), order="F")
    comm.Allreduce(f, g)
    np.testing.assert_array_equal(g, f * comm.size)

    class Iface:
        def __init__(self, arr):
            self.arr = arr
            self.__array_interface__ = arr.__array_interface__

    src = np.full(5, comm.rank + 1, "i8")
    dst = np.zeros(5, "i8")
    comm.Allreduce(Iface(src), Iface(dst), op=MPI.MAX)
    assert (dst == comm.size).all()
    b = bytearray(b"abc" if comm.rank == 0 else b"xyz")
    comm.Bcast(memoryview(b), root=0)
    assert b == bytearray(b"abc")


def test_none_and_bottom(comm):
    # [None, 0, type]: nothing, on every form that takes a message.
    comm.Bcast([None, 0, MPI.INT], root=0)
    comm.Allreduce([None, 0, MPI.INT], [None, 0, MPI.INT])
    comm.Allgather([None, 0, MPI.INT], [None, 0, MPI.INT])
    # BOTTOM: a datatype of absolute addresses describes where the data lies.
    x = np.full(3, comm.rank, "i4") if comm.rank == 0 else np.full(3, -1, "i4")
    y = np.full(2, 7.5 if comm.rank == 0 else -1.0)
    t = MPI.Datatype.Create_struct([3, 2], [MPI.Get_address(x), MPI.Get_address(y)],
                                   [MPI.INT, MPI.DOUBLE]).Commit()
    comm.Bcast([MPI.BOTTOM, 1, t], root=0)
    t.Free()
    assert (x == 0).all() and (y == 7.5).all()


def test_block_counts_are_per_block(comm):
    # mpi4py reads an explicit count of a block message per block: Alltoall([s, INT],
    # [r, 2, INT]) moves two elements to and from every rank.
    P, r = comm.size, comm.rank
    s = np.array([100 * r + q for q in range(P) for _ in range(2)], "i4")
    out = np.full(2 * P + 3, -1, "i4")
    comm.Alltoall([s, MPI.INT], [out, 2, MPI.INT])
    want = np.array([100 * q + r for q in range(P) for _ in range(2)], "i4")
    np.testing.assert_array_equal(out[: 2 * P], want)
    assert (out[2 * P:] == -1).all()
    g = np.full(3 * P, -1, "i4")
    comm.Allgather([np.full(3, r, "i4"), 3, MPI.INT], [g, 3, MPI.INT])
    np.testing.assert_array_equal(g, np.repeat(np.arange(P), 3))


def test_vector_forms(comm):
    P, r = comm.size, comm.rank
    counts = [q + 1 for q in range(P)]
    displs = [sum(counts[:q]) + q for q in range(P)]  # a gap after each block
    total = displs[-1] + counts[-1] + 1
    mine = np.full(r + 1, float(r))
    want = np.full(total, -1.0)
    for q in range(P):
        want[displs[q]: displs[q] + counts[q]] = q
    for spec in ("counts_displs_type", "pair_type", "pair"):
        out = np.full(total, -1.0)
        v = {
            "counts_displs_type": [out, counts, displs, MPI.DOUBLE],
            "pair_type": [out, (counts, displs), MPI.DOUBLE],
            "pair": [out, (counts, displs)],
        }[spec]
        comm.Allgatherv(mine, v)
        np.testing.assert_array_equal(out, want, err_msg=spec)
    # A buffer alone: split evenly (the first blocks one larger), as mpi4py does.
    n = 2 * P + 1
    out = np.full(n, -1, "i8")
    counts = [n // P + (n % P > q) for q in range(P)]
    comm.Allgatherv(np.full(counts[r], r, "i8"), out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(P), counts))
    # [buf, counts] with an int count: the same count for every block; an int displacement:
    # a stride.
    out = np.full(3 * P, -1, "i4")
    comm.Allgatherv(np.full(2, r, "i4"), [out, (2, 3), MPI.INT])
    for q in range(P):
        assert (out[3 * q: 3 * q + 2] == q).all() and out[3 * q + 2] == -1


def test_vector_calls_against_numpy(comm):
    P, r = comm.size, comm.rank
    sc = [(r + q) % 3 for q in range(P)]
    rc = [(q + r) % 3 for q in range(P)]
    send = np.concatenate([np.full(sc[q], 10 * r + q, "f4") for q in range(P)]) if sum(sc) \
        else np.zeros(0, "f4")
    recv = np.full(sum(rc), -1, "f4")
    comm.Alltoallv([send, sc], [recv, rc])
    want = np.concatenate([np.full(rc[q], 10 * q + r, "f4") for q in range(P)]) if sum(rc) \
        else np.zeros(0, "f4")
    np.testing.assert_array_equal(recv, want)
    for root in range(P):
        counts = [q + 2 for q in range(P)]
        full = np.arange(sum(counts), dtype="i8")
        part = np.full(counts[r], -1, "i8")
        comm.Scatterv([full, counts, MPI.INT64_T] if r == root else None, part, root=root)
        start = sum(counts[:r])
        np.testing.assert_array_equal(part, full[start: start + counts[r]])
        back = np.full(sum(counts), -1, "i8")
        comm.Gatherv(part, [back, counts] if r == root else None, root=root)
        if r == root:
            np.testing.assert_array_equal(back, full)


def test_in_place_everywhere_mpi_allows(comm):
    P, r = comm.size, comm.rank
    x = np.full(4, r + 1.0)
    comm.Allreduce(MPI.IN_PLACE, x)
    assert (x == P * (P + 1) / 2).all()
    g = np.full(3 * P, -1, "i4")
    g[3 * r: 3 * r + 3] = r
    comm.Allgather(MPI.IN_PLACE, [g, MPI.INT])
    np.testing.assert_array_equal(g, np.repeat(np.arange(P), 3))
    a = np.array([100 * r + q for q in range(P)], "i8")
    comm.Alltoall(MPI.IN_PLACE, a)
    np.testing.assert_array_equal(a, [100 * q + r for q in range(P)])
    for root in range(P):
        buf = np.full(2 * P, -1, "i4")
        if r == root:
            buf[2 * r: 2 * r + 2] = r
            comm.Gather(MPI.IN_PLACE, buf, root=root)
            np.testing.assert_array_equal(buf, np.repeat(np.arange(P), 2))
        else:
            comm.Gather(np.full(2, r, "i4"), None, root=root)
        full = np.repeat(np.arange(P), 2).astype("i4")
        mine = np.full(2, -1, "i4")
        if r == root:
            comm.Scatter(full, MPI.IN_PLACE, root=root)
        else:
            comm.Scatter(None, mine, root=root)
            assert (mine == r).all()
        red = np.full(3, r + 1, "i4")
        if r == root:
            comm.Reduce(MPI.IN_PLACE, red, root=root)
            assert (red == P * (P + 1) // 2).all()
        else:
            comm.Reduce(red, None, root=root)
    rs = np.array([r + q for q in range(P) for _ in range(2)], "i8")
    comm.Reduce_scatter_block(MPI.IN_PLACE, rs)
    assert (rs[:2] == sum(q + r for q in range(P))).all()
    sc = np.full(3, r + 1, "i4")
    comm.Scan(MPI.IN_PLACE, sc)
    assert (sc == (r + 1) * (r + 2) // 2).all()


def test_root_only_arguments_are_not_looked_at(comm):
    # A non-root's receive side of Gather and Reduce and send side of Scatter are ignored:
    # not parsed, so anything goes there (mpi4py's rule), and nothing breaks.
    P, r = comm.size, comm.rank
    junk = object()
    for root in range(P):
        rbuf = np.full(P, -1, "i4") if r == root else junk
        comm.Gather(np.full(1, r, "i4"), rbuf, root=root)
        if r == root:
            np.testing.assert_array_equal(rbuf, np.arange(P))
        sbuf = np.arange(P, dtype="i4") if r == root else junk
        out = np.full(1, -1, "i4")
        comm.Scatter(sbuf, out, root=root)
        assert out[0] == r
        red = np.zeros(2, "f8") if r == root else junk
        comm.Reduce(np.ones(2), red, root=root)
        if r == root:
            assert (red == P).all()
        v = np.full(P, -1, "i4") if r == root else [junk, "nonsense"]
        comm.Gatherv(np.full(1, r, "i4"), v, root=root)
        if r == root:
            np.testing.assert_array_equal(v, np.arange(P))


def test_malformed_messages_raise_mpi4pys_exceptions(comm):
    x = np.zeros(4, "i4")
    cases = [
        (TypeError, lambda: comm.Bcast(42)),
        (TypeError, lambda: comm.Bcast(None)),
        (ValueError, lambda: comm.Bcast([x])),
        (ValueError, lambda: comm.Bcast([x, 1, 0, MPI.INT, 5])),
        (KeyError, lambda: comm.Bcast([x, "?!"])),
        (ValueError, lambda: comm.Bcast([x, -1, MPI.INT])),
        (ValueError, lambda: comm.Bcast([x, (1, -1), MPI.INT])),
        (ValueError, lambda: comm.Bcast([x, (1, 9), MPI.INT])),
        (ValueError, lambda: comm.Bcast([None, 2, MPI.INT])),
        (ValueError, lambda: comm.Bcast([np.zeros(5, "i1"), MPI.INT])),
        (ValueError, lambda: comm.Bcast([x, 9, MPI.INT])),  # past the buffer's end
        (ValueError, lambda: comm.Allreduce(x, np.zeros(4, "f4"))),
        (ValueError, lambda: comm.Allreduce(x, np.zeros(3, "i4"))),
        (ValueError, lambda: comm.Allgather(x, np.zeros(4 * comm.size + 1, "i4"))),
        (ValueError, lambda: comm.Allgatherv(x, [np.zeros(9, "i4"), [1, 2]]
                                             if comm.size != 2 else [np.zeros(9, "i4"), [1]])),
        (TypeError, lambda: comm.Allreduce(np.zeros(2, "c8"), np.zeros(2, "c8"), op=MPI.MAX)),
        (TypeError, lambda: comm.Allreduce(x, np.zeros(4, "i4"), op=42)),
    ]
    for exc, call in cases:
        with pytest.raises(exc):
            call()
    # Nothing was started on any rank: the communicator works as before.
    y = np.ones(3)
    comm.Allreduce(MPI.IN_PLACE, y)
    assert (y == comm.size).all()


def test_a_rank_alone_raising_leaves_the_communicator_usable(comm):
    # The cascade of before: a non-root's Gather with an empty receive buffer. It is not
    # looked at now, so no rank raises and the calls after it work.
    r, P = comm.rank, comm.size
    out = np.full(P, -1, "i4") if r == 0 else np.zeros(0, "i4")
    comm.Gather(np.full(1, r, "i4"), out, root=0)
    if r == 0:
        np.testing.assert_array_equal(out, np.arange(P))
    # And a malformed argument, on every rank, before any call: nothing is started.
    with pytest.raises(ValueError):
        comm.Gather(np.zeros(3, "i4"), [np.zeros(3 * P + 1, "i4"), MPI.INT], root=r)
    comm.Barrier()
    z = np.full(2, 1.0)
    comm.Allreduce(MPI.IN_PLACE, z)
    assert (z == P).all()


# ---- reductions the library does not do: folded here, in rank order ----


@pytest.mark.parametrize("dtype,op", [
    ("i2", "SUM"), ("u2", "PROD"), ("i2", "MAX"), (np.longdouble, "SUM"),
    (np.longdouble, "MIN"), ("c8", "PROD"), ("c16", "SUM"), ("i4", "LAND"), ("i8", "LXOR"),
    ("?", "LOR"), ("u1", "BXOR"),
])
def test_folded_reductions(comm, dtype, op):
    P, r = comm.size, comm.rank
    n = 5
    def contribution(q):
        base = np.arange(n) % 3 + q + 1
        if dtype == "?":
            return (base + q) % 2 == 0
        return base.astype(dtype)
    ref = contribution(0)
    for q in range(1, P):
        b = contribution(q)
        ref = {
            "SUM": lambda a, b: a + b, "PROD": lambda a, b: a * b,
            "MAX": np.maximum, "MIN": np.minimum,
            "LAND": lambda a, b: np.logical_and(a, b).astype(a.dtype),
            "LOR": lambda a, b: np.logical_or(a, b).astype(a.dtype),
            "LXOR": lambda a, b: np.logical_xor(a, b).astype(a.dtype),
            "BXOR": np.bitwise_xor,
        }[op](ref, b)
    mpi_op = getattr(MPI, op)
    out = np.zeros(n, dtype)
    comm.Allreduce(contribution(r), out, op=mpi_op)
    np.testing.assert_array_equal(out, ref)
    red = np.zeros(n, dtype) if r == 0 else None
    comm.Reduce(contribution(r), red, op=mpi_op, root=0)
    if r == 0:
        np.testing.assert_array_equal(red, ref)
    req = comm.Iallreduce(contribution(r), out, op=mpi_op)
    req.Wait()
    np.testing.assert_array_equal(out, ref)


def test_user_ops_fold_in_rank_order(comm):
    # A non-commutative op: a 2x2 matrix product, each rank's matrix in its slot. The result
    # is M0 @ M1 @ ... on every rank, and the scan's prefix on rank r.
    P, r = comm.size, comm.rank

    def matmul(inbuf, inoutbuf, datatype):
        a = np.frombuffer(inbuf, "i8").reshape(-1, 2, 2)
        b = np.frombuffer(inoutbuf, "i8").reshape(-1, 2, 2)
        b[...] = a @ b

    op = MPI.Op.Create(matmul, commute=False)
    try:
        mats = [np.array([[1, q + 1], [0, 1]], "i8") for q in range(P)]
        want = np.eye(2, dtype="i8")
        prefix = []
        for m in mats:
            want = want @ m
            prefix.append(want.copy())
        out = np.zeros((2, 2), "i8")
        comm.Allreduce(mats[r], out, op=op)
        np.testing.assert_array_equal(out, want)
        comm.Scan(mats[r], out, op=op)
        np.testing.assert_array_equal(out, prefix[r])
        ex = np.full((2, 2), -1, "i8")
        comm.Exscan(mats[r], ex, op=op)
        if r > 0:
            np.testing.assert_array_equal(ex, prefix[r - 1])
    finally:
        op.Free()


def test_maxloc_minloc_on_pairs(comm):
    P, r = comm.size, comm.rank
    pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)
    x = np.zeros(3, pair)
    x["v"] = [r % 2, -r, 5]  # ties in the first and last: the smallest index wins
    x["i"] = r
    out = np.zeros(3, pair)
    comm.Allreduce([x, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=MPI.MAXLOC)
    assert out["v"][0] == (1 if P > 1 else 0) and out["i"][0] == (1 if P > 1 else 0)
    assert out["v"][1] == 0 and out["i"][1] == 0
    assert out["v"][2] == 5 and out["i"][2] == 0
    comm.Allreduce([x, MPI.DOUBLE_INT], [out, MPI.DOUBLE_INT], op=MPI.MINLOC)
    assert out["v"][1] == -(P - 1) and out["i"][1] == P - 1
    assert out["v"][0] == 0 and out["i"][0] == 0


def test_reduce_scatter_forms(comm):
    P, r = comm.size, comm.rank
    counts = [q + 1 for q in range(P)]
    send = np.arange(sum(counts), dtype="i2") + r  # int16: folded here
    out = np.zeros(counts[r], "i2")
    comm.Reduce_scatter(send, out, counts, op=MPI.SUM)
    start = sum(counts[:r])
    want = sum(np.arange(sum(counts), dtype="i2") + q for q in range(P))[start: start + counts[r]]
    np.testing.assert_array_equal(out, want)
    # recvcounts left out: every rank's receive count, gathered (mpi4py's default).
    out2 = np.zeros(counts[r], "f8")
    comm.Reduce_scatter(send.astype("f8"), out2, op=MPI.SUM)
    np.testing.assert_array_equal(out2, want.astype("f8"))
    blk = np.arange(2 * P, dtype="i2") * (r + 1)
    mine = np.zeros(2, "i2")
    comm.Reduce_scatter_block(blk, mine, op=MPI.SUM)
    np.testing.assert_array_equal(mine, np.arange(2 * r, 2 * r + 2) * sum(range(1, P + 1)))
    req = comm.Ireduce_scatter_block(blk.astype("f4"), mine.astype("f4"), op=MPI.SUM)
    req.Wait()


def test_nonblocking_forms(comm):
    P, r = comm.size, comm.rank
    reqs, checks = [], []
    a = np.full(3, r + 1.0)
    ar = np.zeros(3)
    reqs.append(comm.Iallreduce(a, ar))
    checks.append(lambda: (ar == P * (P + 1) / 2).all())
    g = np.full(2 * P, -1, "i4")
    reqs.append(comm.Iallgatherv(np.full(2, r, "i4"), [g, 2]))
    checks.append(lambda: (g == np.repeat(np.arange(P), 2)).all())
    t = np.full(P, -1, "i8")
    reqs.append(comm.Ialltoallv(np.arange(P, dtype="i8") + 10 * r, [t, 1]))
    checks.append(lambda: (t == np.arange(P) * 10 + r).all())
    gv = np.full(P, -1, "i4") if r == 0 else None
    reqs.append(comm.Igatherv(np.full(1, r, "i4"), [gv, 1] if r == 0 else None, root=0))
    checks.append(lambda: r != 0 or (gv == np.arange(P)).all())
    sv = np.full(1, -1, "i4")
    reqs.append(comm.Iscatterv([np.arange(P, dtype="i4"), 1] if r == 0 else None, sv, root=0))
    checks.append(lambda: sv[0] == r)
    rs = np.zeros(1, "f8")
    reqs.append(comm.Ireduce_scatter(np.ones(P), rs, [1] * P))
    checks.append(lambda: rs[0] == P)
    sc = np.zeros(2, "i4")
    reqs.append(comm.Iscan(np.ones(2, "i4"), sc))
    checks.append(lambda: (sc == r + 1).all())
    ex = np.full(2, -1, "i4")
    reqs.append(comm.Iexscan(np.ones(2, "i4"), ex))
    checks.append(lambda: r == 0 or (ex == r).all())
    assert MPI.Request.Waitall(reqs) is True
    for c in checks:
        assert c()
    assert all(not q for q in reqs) and all(q == MPI.REQUEST_NULL for q in reqs)


def test_p2p_with_datatypes(comm):
    P, r = comm.size, comm.rank
    if P < 2:
        pytest.skip("needs two ranks")
    vec = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()  # every other element
    try:
        if r == 0:
            x = np.arange(6, dtype="f8")
            comm.Send([x, 1, vec], dest=1, tag=3)
            y = np.arange(6, dtype="f8") * 10
            comm.Send([y, 2, 2, MPI.DOUBLE], dest=1, tag=4)
        elif r == 1:
            got = np.full(3, -1.0)
            st = MPI.Status()
            comm.Recv([got, MPI.DOUBLE], source=0, tag=3, status=st)
            np.testing.assert_array_equal(got, [0, 2, 4])
            assert st.Get_count(MPI.DOUBLE) == 3 and st.Get_source() == 0
            into = np.full(6, -1.0)
            comm.Recv([into, 1, vec], source=0, tag=4)  # two doubles land at 0 and 2
            np.testing.assert_array_equal(into, [20, -1, 30, -1, -1, -1])
    finally:
        vec.Free()
    buf = np.full(4, r, "i4")
    comm.Sendrecv_replace(buf, dest=(r + 1) % P, source=(r - 1) % P)
    assert (buf == (r - 1) % P).all()
