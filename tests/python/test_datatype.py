"""Datatypes (python/src/datatype.c): the predefined ones' sizes and names, the derived ones'
type maps, bounds and envelopes, packing (native and external32), and data moved with them
by collectives and point to point, against NumPy on every rank."""

import struct

import numpy as np
import pytest

from shmcoll import MPI, _api


def test_predefined_sizes_and_identity():
    sizes = {"BYTE": 1, "CHAR": 1, "SHORT": 2, "INT": 4, "LONG": 8, "LONG_LONG": 8,
             "FLOAT": 4, "DOUBLE": 8, "LONG_DOUBLE": np.dtype(np.longdouble).itemsize,
             "C_BOOL": 1, "INT16_T": 2, "UINT64_T": 8, "C_FLOAT_COMPLEX": 8,
             "C_DOUBLE_COMPLEX": 16, "WCHAR": 4}
    for name, size in sizes.items():
        t = getattr(MPI, name)
        assert t.Get_size() == size and t.size == size and t.extent == size, name
        assert t.is_predefined and t.Get_name() == "MPI_" + name
    # Two MPI types of one layout are two datatypes; two names of one type are one.
    assert MPI.INT != MPI.INT32_T and MPI.UNSIGNED is MPI.UNSIGNED_INT
    assert MPI.TWOINT is MPI.INT_INT and MPI._typedict["i"] is MPI.INT
    # Pairs: MPI's size (no padding) and extent (with it).
    assert (MPI.DOUBLE_INT.size, MPI.DOUBLE_INT.extent) == (12, 16)
    assert (MPI.SHORT_INT.size, MPI.SHORT_INT.extent) == (6, 8)
    assert not MPI.DATATYPE_NULL and MPI.Datatype() == MPI.DATATYPE_NULL
    with pytest.raises(MPI.Exception):
        MPI.INT.Free()


def test_derived_bounds_and_envelopes():
    v = MPI.INT.Create_vector(3, 2, 4)  # blocks of 2 ints every 4
    assert (v.size, v.lb, v.extent, v.true_extent) == (24, 0, 40, 40)
    if _api.MAJOR >= 4:  # mpi4py 4's have large counts (none here) before the datatypes
        assert v.Get_envelope() == (3, 0, 0, 1, MPI.COMBINER_VECTOR)
        assert v.Get_contents() == ([3, 2, 4], [], [], [MPI.INT])
    else:
        assert v.Get_envelope() == (3, 0, 1, MPI.COMBINER_VECTOR)
        assert v.Get_contents() == ([3, 2, 4], [], [MPI.INT])
    s = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.CHAR, MPI.DOUBLE])
    assert (s.size, s.extent) == (9, 16)  # padded to the double's alignment, as C
    r = MPI.INT.Create_resized(-4, 16)
    assert (r.lb, r.ub, r.true_lb, r.true_extent) == (-4, 12, 0, 4)
    sub = MPI.INT.Create_subarray([4, 5], [2, 3], [1, 1])
    assert (sub.size, sub.extent, sub.true_lb) == (24, 80, 24)
    ib = MPI.FLOAT.Create_indexed_block(2, [1, 6])
    assert (ib.size, ib.lb, ib.extent) == (16, 4, 28)
    d = v.Dup()
    assert d != v and (d.size, d.extent) == (v.size, v.extent)
    for t in (v, s, r, sub, ib, d):
        t.Commit()
        t.Free()
        assert t == MPI.DATATYPE_NULL and not t


def test_pack_and_unpack_roundtrip():
    vec = MPI.DOUBLE.Create_vector(2, 1, 3).Commit()
    x = np.arange(4, dtype="f8")  # one element of vec: x[0], x[3]
    ints = np.array([7, -8, 9], "i4")
    size = vec.Pack_size(1, MPI.COMM_SELF) + MPI.INT.Pack_size(3, MPI.COMM_SELF)
    assert size == 16 + 12
    buf = bytearray(size)
    pos = vec.Pack(x, buf, 0, MPI.COMM_SELF)
    pos = MPI.INT.Pack(ints, buf, pos, MPI.COMM_SELF)
    assert pos == size
    assert struct.unpack("=dd3i", bytes(buf)) == (0.0, 3.0, 7, -8, 9)
    y = np.full(4, -1.0)
    got = np.zeros(3, "i4")
    pos = vec.Unpack(buf, 0, y, MPI.COMM_SELF)
    MPI.INT.Unpack(buf, pos, got, MPI.COMM_SELF)
    np.testing.assert_array_equal(y, [0, -1, -1, 3])
    np.testing.assert_array_equal(got, ints)
    with pytest.raises(ValueError):
        MPI.INT.Pack(ints, bytearray(8), 0, MPI.COMM_SELF)  # does not fit
    vec.Free()


def test_external32_is_big_endian():
    x = np.array([1, 2], "i4")
    out = bytearray(MPI.INT.Pack_external_size("external32", 2))
    assert MPI.INT.Pack_external("external32", x, out, 0) == 8
    assert bytes(out) == b"\x00\x00\x00\x01\x00\x00\x00\x02"
    back = np.zeros(2, "i4")
    MPI.INT.Unpack_external("external32", out, 0, back)
    np.testing.assert_array_equal(back, x)
    pair = np.zeros(1, np.dtype([("v", "f8"), ("i", "i4")], align=True))
    pair["v"], pair["i"] = 1.5, 3
    out = bytearray(12)
    MPI.DOUBLE_INT.Pack_external("external32", pair, out, 0)
    assert bytes(out) == struct.pack(">di", 1.5, 3)
    with pytest.raises(ValueError):
        MPI.INT.Pack_external("native", x, out, 0)


def test_collectives_and_p2p_with_derived_types(comm):
    P, r = comm.size, comm.rank
    # Allgather into every other element of the receive buffer: a resized vector.
    every_other = MPI.INT.Create_vector(2, 1, 2).Create_resized(0, 16).Commit()
    out = np.full(4 * P, -1, "i4")
    comm.Allgather(np.array([r, 10 + r], "i4"), [out, 1, every_other])
    want = np.full(4 * P, -1, "i4")
    want[0::4] = np.arange(P)
    want[2::4] = 10 + np.arange(P)
    np.testing.assert_array_equal(out, want)
    # A struct of a double and an int, as NumPy's aligned record, through Bcast.
    rec = np.dtype([("a", "f8"), ("n", "i4")], align=True)
    st = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.INT]).Commit()
    x = np.zeros(3, rec)
    if r == 0:
        x["a"], x["n"] = [0.5, 1.5, 2.5], [1, 2, 3]
    comm.Bcast([x, st], root=0)
    assert list(x["a"]) == [0.5, 1.5, 2.5] and list(x["n"]) == [1, 2, 3]
    # A sum over a subarray: the 2x2 corner of each rank's 3x3 matrix.
    sub = MPI.DOUBLE.Create_subarray([3, 3], [2, 2], [1, 1]).Commit()
    m = np.full((3, 3), float(r + 1))
    res = np.zeros((3, 3))
    comm.Allreduce([m, 1, sub], [res, 1, sub], op=MPI.SUM)
    assert (res[1:, 1:] == P * (P + 1) / 2).all() and (res[0] == 0).all() and res[1, 0] == 0
    if P > 1:
        if r == 0:
            comm.Send([m, 1, sub], dest=1, tag=2)
        elif r == 1:
            flat = np.zeros(4)
            comm.Recv([flat, MPI.DOUBLE], source=0, tag=2)
            assert (flat == 1.0).all()
    for t in (every_other, st, sub):
        t.Free()
