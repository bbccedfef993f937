"""Buffers as mpi4py 4 has them (python/src/buffer.c, message.c; docs/PYTHON.md, "Buffers and
message specifications"): a count counts the buffer's own elements for every dtype and every
kind of buffer (the buffer protocol, DLPack 0.x and 1.0, __array_interface__,
__cuda_array_interface__ over host memory, torch tensors); DLPack 1.0's versioned capsules;
None as IN_PLACE; MPI.buffer; and the errors that differ between mpi4py 3 and 4, checked
as each (the C module switched for the test, the same on every rank) and as the one
shmcoll.MPI chose at import. Every collective's result is checked on every rank."""

import contextlib
import ctypes

import numpy as np
import pytest

import shmcoll
from shmcoll import MPI, _api, _shmcoll

try:
    import torch
except ImportError:
    torch = None


@contextlib.contextmanager
def answering_as(major):
    """The C module answers as mpi4py `major` within the block, then as shmcoll.MPI chose."""
    _shmcoll._mpi4py_api(major)
    try:
        yield
    finally:
        _shmcoll._mpi4py_api(_api.MAJOR)


# ---- buffers of every kind over a NumPy array ----

kDLCPU, kDLCUDA = 1, 2
kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 3, 4, 5, 6


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Managed(ctypes.Structure):  # DLPack 0.x's DLManagedTensor
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class ManagedVersioned(ctypes.Structure):  # DLPack 1.0's DLManagedTensorVersioned
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
capsule_name = ctypes.pythonapi.PyCapsule_GetName
capsule_name.restype = ctypes.c_char_p
capsule_name.argtypes = [ctypes.py_object]
# A capsule keeps a pointer to its name: these live as long as the module.
CAPSULE_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}

deleted = []  # the addresses of the managed tensors whose deleter ran


@DELETER
def deleter(address):
    deleted.append(address)


def dl_dtype(dt):
    """The DLPack dtype a producer gives for NumPy's dt: complex long double as two lanes of
    its float (2 * 128 bits do not fit the 8 bits of bits), what has no code as opaque."""
    codes = {"i": kDLInt, "u": kDLUInt, "f": kDLFloat, "c": kDLComplex, "b": kDLBool}
    bits = 8 * dt.itemsize
    if dt.kind == "c" and bits > 255:
        return kDLFloat, bits // 2, 2
    if dt.kind in codes and dt.fields is None:
        return codes[dt.kind], bits, 1
    return (kDLOpaqueHandle, bits, 1) if bits <= 255 else (kDLUInt, 8, dt.itemsize)


class DLPackArray:
    """A NumPy array behind DLPack 1.0: __dlpack__(max_version=(1, x)) gives a
    "dltensor_versioned" capsule (with flags and a major version as set), without it a
    0.x capsule. It records each call's arguments and keeps every capsule it gave."""

    def __init__(self, arr, device=kDLCPU, flags=0, major=1, dtype=None):
        self.arr, self.device, self.flags, self.major = arr, device, flags, major
        self.dtype = dtype or dl_dtype(arr.dtype)
        self.calls, self.capsules, self.managed = [], [], []

    def __dlpack_device__(self):
        return (self.device, 0)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"stream": stream, "max_version": max_version})
        versioned = max_version is not None and max_version[0] >= 1
        m = ManagedVersioned() if versioned else Managed()
        shape = (ctypes.c_int64 * 1)(self.arr.size)
        t = m.dl_tensor
        t.data = self.arr.ctypes.data if self.arr.size else None
        t.device = DLDevice(self.device, 0)
        t.ndim, t.shape, t.byte_offset = 1, shape, 0
        t.dtype = DLDataType(*self.dtype)
        m.deleter = deleter
        if versioned:
            m.major, m.minor, m.flags = self.major, 0, self.flags
        self.managed.append((m, shape))
        cap = capsule_new(ctypes.addressof(m), CAPSULE_NAMES[versioned], None)
        self.capsules.append(cap)
        return cap


class DLPackArrayV0(DLPackArray):
    """A DLPack 0.x producer: its __dlpack__ knows no max_version."""

    def __dlpack__(self, stream=None):
        return super().__dlpack__(stream=stream)


class ArrayInterface:
    def __init__(self, arr):
        self.arr = arr

    @property
    def __array_interface__(self):
        return self.arr.__array_interface__


class CudaArrayInterface:
    """__cuda_array_interface__ over host memory (shmcoll checks it is readable here)."""

    def __init__(self, arr, readonly=False):
        self.arr = arr
        self.__cuda_array_interface__ = {
            "shape": arr.shape, "typestr": arr.dtype.str, "version": 3, "strides": None,
            "data": (arr.ctypes.data, readonly)}


def wrap(kind, arr):
    return {"buffer": lambda a: a, "dlpack0": DLPackArrayV0, "dlpack1": DLPackArray,
            "array_interface": ArrayInterface, "cai": CudaArrayInterface}[kind](arr)


def data(dt, n, rank, salt=0):
    """n elements of dt of bytes that differ by rank and element (any bytes: compared as such)."""
    raw = bytes((rank * 37 + salt * 5 + i * 11 + 1) % 251 for i in range(n * dt.itemsize))
    return np.frombuffer(raw, dt).copy()


def filled(dt, n):
    return np.frombuffer(b"\xee" * (n * dt.itemsize), dt).copy()


DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "g", "c8", "c16",
          "G", "?", "S5", "V6", "M8[s]", [("a", "<i4"), ("b", "<f8")]]
KINDS = ["buffer", "dlpack0", "dlpack1", "array_interface", "cai"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES,
                         ids=lambda d: np.dtype(d).name.replace("[", "-").rstrip("]"))
def test_a_count_counts_the_buffers_own_elements(comm, kind, dtype):
    # [buf, count] without a datatype: count elements of the buffer's own type, whatever
    # the kind (DLPack long double moved count bytes; so did records and unnamed dtypes).
    dt = np.dtype(dtype)
    if kind == "buffer" and dt.kind == "M":
        pytest.skip("NumPy exports no buffer of datetime64")
    if kind == "cai" and dt.kind == "M":
        pytest.skip("mpi4py's __cuda_array_interface__ reads no datetime unit")
    P, r, isz = comm.size, comm.rank, dt.itemsize
    right, left = (r + 1) % P, (r - 1) % P
    out, st = filled(dt, 3), MPI.Status()
    comm.Sendrecv([wrap(kind, data(dt, 3, r)), 2], right, 7, [wrap(kind, out), 2], left, 7, st)
    assert out.tobytes() == data(dt, 3, left).tobytes()[:2 * isz] + b"\xee" * isz
    assert st.Get_count(MPI.BYTE) == 2 * isz
    # A v-collective and Alltoallv, with counts in the buffer's elements.
    out = filled(dt, 2 * P)
    comm.Allgatherv([wrap(kind, data(dt, 3, r)), 2], [wrap(kind, out), [2] * P])
    assert out.tobytes() == b"".join(data(dt, 3, q).tobytes()[:2 * isz] for q in range(P))
    out = filled(dt, P)
    comm.Alltoallv([wrap(kind, data(dt, P, r, 1)), [1] * P], [wrap(kind, out), [1] * P])
    assert out.tobytes() == b"".join(data(dt, P, q, 1)[r:r + 1].tobytes() for q in range(P))


def test_an_mpi_buffer_counts_bytes(comm):
    # MPI.buffer's element is a byte ("B"): its count is in bytes, as mpi4py's.
    P, r = comm.size, comm.rank
    src = data(np.dtype("f8"), 3, r)
    out = filled(np.dtype("f8"), 3)
    comm.Sendrecv([MPI.buffer(src), 16], (r + 1) % P, 3, [MPI.buffer(out), 16], (r - 1) % P, 3)
    assert out.tobytes() == data(np.dtype("f8"), 3, (r - 1) % P).tobytes()[:16] + b"\xee" * 8


TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16",
                "int32", "int64", "bool", "complex64", "complex128", "complex32"]


@pytest.mark.skipif(torch is None, reason="torch is not installed")
@pytest.mark.filterwarnings("ignore::UserWarning")  # complex32 is experimental
@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_a_count_counts_a_tensors_elements(comm, name):
    P, r = comm.size, comm.rank
    dtype = getattr(torch, name)

    def tensor(rank, fill=None):
        t = torch.empty(3, dtype=dtype)
        n = 3 * t.element_size()
        raw = fill * n if fill else bytes((rank * 29 + i * 7 + 1) % 251 for i in range(n))
        ctypes.memmove(t.data_ptr(), raw, n)
        return t

    def raw(t):
        return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())

    isz = tensor(0).element_size()
    out, st = tensor(0, b"\xee"), MPI.Status()
    comm.Sendrecv([tensor(r), 2], (r + 1) % P, 9, [out, 2], (r - 1) % P, 9, st)
    assert raw(out) == raw(tensor((r - 1) % P))[:2 * isz] + b"\xee" * isz
    assert st.Get_count(MPI.BYTE) == 2 * isz


# ---- DLPack 1.0 ----


def test_dlpack_versioned_capsules_are_taken_and_spent(comm):
    P, r = comm.size, comm.rank
    src = np.arange(4, dtype="i4") + 10 * r
    want = np.concatenate([np.arange(4, dtype="i4") + 10 * q for q in range(P)])
    for cls, name in ((DLPackArray, b"used_dltensor_versioned"), (DLPackArrayV0, b"used_dltensor")):
        out = np.zeros(4 * P, "i4")
        s, o = cls(src), cls(out)
        comm.Allgather(s, o)
        np.testing.assert_array_equal(out, want)
        # Asked for 1.0 (a 0.x producer's TypeError, then asked again without), on the CPU
        # without a stream; each capsule's deleter ran, and the capsule is spent.
        assert s.calls == [{"stream": None, "max_version": (1, 0) if cls is DLPackArray else None}]
        assert [capsule_name(c) for c in s.capsules + o.capsules] == [name, name]
        assert all(ctypes.addressof(m) in deleted for m, _ in s.managed + o.managed)


def test_dlpack_versioned_read_only_flag(comm):
    P, r = comm.size, comm.rank
    src = np.full(2, r, "i4")
    readonly = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
    assert _shmcoll._mem(DLPackArray(src, flags=readonly))[2] is True
    assert _shmcoll._mem(DLPackArray(src))[2] is False
    out = np.zeros(2 * P, "i4")
    comm.Allgather(DLPackArray(src, flags=readonly), DLPackArray(out))  # a send may be
    np.testing.assert_array_equal(out, np.repeat(np.arange(P), 2))
    with pytest.raises(BufferError, match="readonly"):  # every rank: nothing starts
        comm.Allgather(DLPackArray(src), DLPackArray(out, flags=readonly))


def test_dlpack_errors(comm):
    src = np.arange(4, dtype="i4")
    for major in (0, 2):  # another major version: refused, its deleter still runs
        b = DLPackArray(src, major=major)
        with pytest.raises(BufferError, match="version"):
            MPI.Get_address(b)
        assert ctypes.addressof(b.managed[0][0]) in deleted
    b = DLPackArray(src)
    b.__dlpack__ = lambda *a, **k: None
    with pytest.raises(BufferError, match="invalid capsule"):
        MPI.Get_address(b)
    b = DLPackArray(src, device=kDLCUDA)  # a device's memory: refused, saying so
    with pytest.raises(BufferError, match="device's memory.*host memory only"):
        comm.Allreduce(b, np.zeros(4, "i4"))
    assert b.calls == []  # refused before its memory is asked for
    # bfloat16 names its datatype (the library reduces it).
    x = DLPackArray(np.full(4, 0x3F80, "u2"), dtype=(kDLBfloat, 16, 1))  # bfloat16 1.0
    y = np.zeros(4, "u2")
    comm.Allreduce(x, DLPackArray(y, dtype=(kDLBfloat, 16, 1)), op=MPI.SUM)
    want = np.frombuffer(np.float32(comm.size).tobytes(), "u2")[1]
    assert (y == want).all()


# ---- None as IN_PLACE ----


def call(comm, name, form, *args, **kw):
    """comm.<name>, or its I form waited for, or its _init form started and waited for."""
    if form == "I":
        getattr(comm, "I" + name[0].lower() + name[1:])(*args, **kw).Wait()
    elif form == "_init":
        req = getattr(comm, name + "_init")(*args, **kw)
        try:
            req.Start()
            req.Wait()
        finally:
            req.Free()
    else:
        getattr(comm, name)(*args, **kw)


def in_place_calls(comm, ip, form):
    """Every call with ip (IN_PLACE or None) where IN_PLACE may go; the results each rank
    holds after each, in order."""
    P, r, root = comm.size, comm.rank, comm.size - 1
    at_root = r == root
    res = []
    # Gather, Gatherv: the root's block in place.
    g = np.full(2 * P, -1, "i4")
    g[2 * r:2 * r + 2] = r
    call(comm, "Gather", form, ip if at_root else np.full(2, r, "i4"),
         g if at_root else None, root=root)
    res.append(g)
    counts = [q + 1 for q in range(P)]
    gv = np.full(sum(counts), -1, "i4")
    gv[sum(counts[:r]):sum(counts[:r + 1])] = r
    call(comm, "Gatherv", form, ip if at_root else np.full(r + 1, r, "i4"),
         [gv, counts] if at_root else None, root=root)
    res.append(gv)
    # Scatter, Scatterv: the root keeps its block where it is.
    full = np.repeat(np.arange(P), 2).astype("i4")
    mine = np.full(2, -1, "i4")
    call(comm, "Scatter", form, full if at_root else None, ip if at_root else mine, root=root)
    res += [full, mine]
    fullv = np.repeat(np.arange(P), counts).astype("i4")
    minev = np.full(r + 1, -1, "i4")
    call(comm, "Scatterv", form, [fullv, counts] if at_root else None,
         ip if at_root else minev, root=root)
    res += [fullv, minev]
    # The rootless calls: every rank's send in place.
    a = np.full(2 * P, -1, "i4")
    a[2 * r:2 * r + 2] = r
    call(comm, "Allgather", form, ip, a)
    av = np.full(sum(counts), -1, "i4")
    av[sum(counts[:r]):sum(counts[:r + 1])] = r
    call(comm, "Allgatherv", form, ip, [av, counts])
    t = np.array([100 * r + q for q in range(P)], "i8")
    call(comm, "Alltoall", form, ip, t)
    tv = np.array([100 * r + q for q in range(P)], "i8")
    call(comm, "Alltoallv", form, ip, [tv, [1] * P])
    tw = np.array([100 * r + q for q in range(P)], "i8")
    call(comm, "Alltoallw", form, ip, [tw, ([1] * P, [8 * q for q in range(P)]), MPI.INT64_T])
    x = np.full(4, r + 1.0)
    call(comm, "Allreduce", form, ip, x)
    red = np.full(3, r + 1, "i4")
    call(comm, "Reduce", form, ip if at_root else red, red if at_root else None, root=root)
    rsb = np.array([r + q for q in range(P) for _ in range(2)], "i8")
    call(comm, "Reduce_scatter_block", form, ip, rsb)
    rs = np.array([r + q for q in range(P) for _ in range(2)], "i8")
    call(comm, "Reduce_scatter", form, ip, rs, [2] * P)
    sc = np.full(3, r + 1, "i4")
    call(comm, "Scan", form, ip, sc)
    ex = np.full(3, r + 1, "i4")
    call(comm, "Exscan", form, ip, ex)
    res += [a, av, t, tv, tw, x, red, rsb[:2], rs[:2], sc, ex if r else ex[:0]]
    return res


@pytest.mark.parametrize("form", ["", "I", "_init"])
def test_none_is_in_place_as_mpi4py_4(comm, form):
    P, r = comm.size, comm.rank
    with answering_as(4):
        with_none = in_place_calls(comm, None, form)
    with_in_place = in_place_calls(comm, MPI.IN_PLACE, form)
    assert len(with_none) == len(with_in_place)
    for got, want in zip(with_none, with_in_place):
        np.testing.assert_array_equal(got, want)
    # And what IN_PLACE gives is right: a few of them against their definition.
    if r == P - 1:  # the root: Gather's result, Scatter's buffer as it was
        np.testing.assert_array_equal(with_none[0], np.repeat(np.arange(P), 2))
        np.testing.assert_array_equal(with_none[2], np.repeat(np.arange(P), 2))
    else:  # Scatter's block
        np.testing.assert_array_equal(with_none[3], np.full(2, r))
    np.testing.assert_array_equal(with_none[6], np.repeat(np.arange(P), 2))  # Allgather
    np.testing.assert_array_equal(with_none[8], [100 * q + r for q in range(P)])  # Alltoall


@pytest.mark.parametrize("form", ["", "I", "_init"])
def test_none_is_no_message_as_mpi4py_3(comm, form):
    # mpi4py 3.1 raises TypeError for None in each place (every rank passes it: every rank
    # raises before the call, and the communicator stays usable).
    P, r, root = comm.size, comm.rank, comm.size - 1
    cases = [
        ("Gather", lambda: (None, np.zeros(2 * P, "i4") if r == root else None),
         {"root": root}),
        ("Scatter", lambda: (np.zeros(2 * P, "i4") if r == root else None, None),
         {"root": root}),
        ("Allgather", lambda: (None, np.zeros(2 * P, "i4")), {}),
        ("Allgatherv", lambda: (None, [np.zeros(P, "i4"), [1] * P]), {}),
        ("Alltoall", lambda: (None, np.zeros(P, "i4")), {}),
        ("Alltoallw", lambda: (None, [np.zeros(P, "i8"), ([1] * P, [8 * q for q in range(P)]),
                                      MPI.INT64_T]), {}),
        ("Allreduce", lambda: (None, np.zeros(3, "i4")), {}),
        ("Reduce", lambda: (None, np.zeros(3, "i4") if r == root else None), {"root": root}),
        ("Scan", lambda: (None, np.zeros(3, "i4")), {}),
    ]
    with answering_as(3):
        for name, args, kw in cases:
            with pytest.raises(TypeError):
                call(comm, name, form, *args(), **kw)
    comm.Barrier()


def test_none_follows_the_mpi4py_chosen_at_import(comm):
    P, r = comm.size, comm.rank
    a = np.full(2 * P, -1, "i4")
    a[2 * r:2 * r + 2] = r
    if _api.MAJOR >= 4:
        comm.Allgather(None, a)
        np.testing.assert_array_equal(a, np.repeat(np.arange(P), 2))
    else:
        with pytest.raises(TypeError):
            comm.Allgather(None, a)


# ---- MPI.buffer ----


def test_mpi_buffer_names_and_memory_functions():
    assert MPI.memory is MPI.buffer and isinstance(MPI.buffer(), MPI.buffer)
    mem = MPI.Alloc_mem(32)
    assert type(mem) is MPI.buffer and mem.nbytes == 32 and mem.address != 0
    assert not mem.readonly and len(mem) == 32
    MPI.Attach_buffer(mem)
    assert MPI.Detach_buffer() is mem
    MPI.Free_mem(mem)
    assert (mem.address, mem.nbytes, mem.readonly, len(mem)) == (0, 0, False, 0)
    with pytest.raises(TypeError):
        MPI.Free_mem(bytearray(4))
    with pytest.raises(BufferError):
        MPI.Attach_buffer(MPI.buffer(b"abc"))  # read-only memory, as mpi4py
    MPI.Attach_buffer(MPI.BUFFER_AUTOMATIC)
    assert MPI.Detach_buffer() is MPI.BUFFER_AUTOMATIC


def test_mpi_buffer_over_objects():
    empty = MPI.buffer()
    assert (empty.address, empty.obj, empty.nbytes, empty.readonly) == (0, None, 0, False)
    assert (empty.format, empty.itemsize, len(empty), bool(empty)) == ("B", 1, 0, False)
    m = memoryview(empty)
    assert (m.format, m.itemsize, m.ndim, m.shape, m.strides, m.tobytes()) == (
        "B", 1, 1, (0,), (1,), b"")
    for bad in (None, 0, 0.0, [], ()):
        with pytest.raises(TypeError):
            MPI.buffer(bad)
        with pytest.raises(TypeError):
            MPI.buffer.frombuffer(bad)
    b = MPI.buffer(b"abc")
    assert b.obj == b"abc" and b.readonly and b.nbytes == 3 and b.tobytes() == b"abc"
    assert b.address == MPI.Get_address(b"abc")
    with pytest.raises(TypeError):
        b[:] = 0  # read-only
    a = np.arange(3, dtype="i4")
    b = MPI.buffer(a)
    assert b.obj is a and b.nbytes == 12 and b.itemsize == 4 and b.address == a.ctypes.data
    b = MPI.buffer.frombuffer(bytearray(b"xyz"), readonly=True)
    assert b.readonly and memoryview(b).readonly
    with pytest.raises(BufferError):
        MPI.buffer.frombuffer(b"xyz")  # writable asked of bytes
    # Every kind the calls take: DLPack, __cuda_array_interface__, __array_interface__.
    for obj in (DLPackArray(a), ArrayInterface(a), CudaArrayInterface(a)):
        b = MPI.buffer.frombuffer(obj)
        assert b.obj is obj and b.address == a.ctypes.data and b.nbytes == 12


def test_mpi_buffer_allocate_fromaddress_toreadonly():
    for n in (0, 1, 2):
        b = MPI.buffer.allocate(n)
        assert b.nbytes == n and b.address != 0 and memoryview(b.obj).nbytes == n
    b = MPI.buffer.allocate(64, clear=True)
    assert b.tobytes() == bytes(64)
    with pytest.raises(TypeError):
        MPI.buffer.allocate(None)
    with pytest.raises(ValueError):
        MPI.buffer.allocate(-1)
    arr = bytearray(b"\x01\x02\x03")
    addr = MPI.Get_address(arr)
    b = MPI.buffer.fromaddress(addr, 3)
    assert b.obj is None and b.address == addr and not b.readonly
    b[1:] = b"\x07\x08"
    assert arr == bytearray(b"\x01\x07\x08")
    assert MPI.buffer.fromaddress(addr, 3, readonly=True).readonly
    with pytest.raises(ValueError):
        MPI.buffer.fromaddress(addr, -1)
    with pytest.raises(ValueError):
        MPI.buffer.fromaddress(0, 1)
    b1 = MPI.buffer.frombuffer(arr)
    b2 = b1.toreadonly()
    assert not b1.readonly and b2.readonly and b2.address == b1.address
    assert b2.obj is b1.obj and b2.nbytes == b1.nbytes
    with pytest.raises(TypeError):
        b2[0] = 1


def test_mpi_buffer_as_a_sequence_of_bytes():
    n = 16
    mem = MPI.buffer.allocate(n)
    mem[:] = 0
    for i in range(n):
        mem[i] = i
    assert list(mem) == list(range(n)) and [mem[i] for i in range(-n, 0)] == list(range(n))
    mem[: n // 2] = 255
    assert mem[0] == 255 and mem[n - 1] == n - 1
    mem[1:5] = b"abcd"
    s = mem[1:5]
    assert type(s) is MPI.buffer and s.obj is mem and s.tobytes() == b"abcd"
    assert s.address == mem.address + 1
    for bad, exc in ((n, IndexError), (-n - 1, IndexError), (slice(None, None, 2), IndexError),
                     (None, TypeError)):
        with pytest.raises(exc):
            mem[bad]
        with pytest.raises(exc):
            mem[bad] = 0
    with pytest.raises(TypeError):
        del mem[0]
    with pytest.raises(ValueError):
        mem[0:1] = mem[1:3]  # lengths differ
    with pytest.raises(OverflowError):
        mem[0] = 256
    assert mem.tobytes() == mem.tobytes("C") == mem.tobytes("i")  # order taken, unused
    c = mem.cast("i")
    c[0] = -1
    assert mem[:4].tobytes() == b"\xff" * 4
    assert mem.cast("i", (2, 2)).tolist()[0][0] == -1 and mem.cast("i", shape=[4]).nbytes == n


def test_mpi_buffer_release_keeps_memory_under_views():
    # release() empties the buffer at once, as mpi4py's; memoryviews and slices over it keep
    # their memory (the exporter stays held until the last goes).
    arr = bytearray(b"abcdef")
    b = MPI.buffer(arr)
    view, part = memoryview(b), b[2:4]
    b.release()
    assert (b.address, b.nbytes, len(b)) == (0, 0, 0)
    assert view.tobytes() == b"abcdef" and part.tobytes() == b"cd"
    with pytest.raises(BufferError):
        arr.append(0)  # still exported: not resized under the view
    del view
    part.release()
    arr.append(0)  # the last export went
    b.release()  # again: nothing


def test_mpi_buffer_of_device_memory_is_not_read_here(comm):
    # As mpi4py's: memory that came through __cuda_array_interface__ is not accessed by the
    # CPU through MPI.buffer (BufferError), while the calls still move it.
    P, r = comm.size, comm.rank
    src = np.full(2, r, "i4")
    b = MPI.buffer.frombuffer(CudaArrayInterface(src))
    for access in (lambda: b.cast("i"), lambda: b.tobytes("i"), lambda: b[0],
                   lambda: b.__setitem__(0, 1), lambda: memoryview(b), lambda: b[0:2].tobytes()):
        with pytest.raises(BufferError):
            access()
    out = np.zeros(2 * P, "i4")
    comm.Allgather([b, MPI.INT], out)
    np.testing.assert_array_equal(out, np.repeat(np.arange(P), 2))
    # A DLPack array on the CPU is host memory.
    c = MPI.buffer.frombuffer(DLPackArray(src))
    assert c.cast("i").tolist() == [r, r] and c[0] == r


def test_calls_take_mpi_buffers(comm):
    P, r = comm.size, comm.rank
    mem = MPI.Alloc_mem(4 * P)
    src = MPI.buffer(np.full(4, r, "u1"))
    comm.Allgather(src, mem)
    assert list(mem) == [q for q in range(P) for _ in range(4)]
    with pytest.raises(BufferError):
        comm.Allgather(src, mem.toreadonly())  # every rank: nothing starts
    # Released during a non-blocking call: the call keeps the memory.
    out = bytearray(4 * P)
    ob = MPI.buffer(out)
    req = comm.Iallgather(src, ob)
    ob.release()
    req.Wait()
    assert list(out) == [q for q in range(P) for _ in range(4)]
    MPI.Free_mem(mem)


# ---- errors that differ between mpi4py 3 and 4 ----


@pytest.mark.parametrize("major", [3, 4])
def test_non_native_byte_order(comm, major):
    P, r = comm.size, comm.rank
    swapped = np.full(3, r, ">i4")  # big-endian: not this machine's order
    out = np.zeros(3 * P, ">i4")
    with answering_as(major):
        for s, o in ((swapped, out), (ArrayInterface(swapped), ArrayInterface(out))):
            if major >= 4:
                with pytest.raises(BufferError, match="non-native"):
                    comm.Allgather(s, o)
            else:
                with pytest.raises(KeyError, match=">i"):
                    comm.Allgather(s, o)
            # With a datatype it moves, as in both.
            comm.Allgather([s, MPI.INT], [o, MPI.INT])
            np.testing.assert_array_equal(out, np.repeat(np.arange(P), 3))
            out[:] = 0


@pytest.mark.parametrize("major", [3, 4])
def test_reduce_checks_the_roots_messages_as_mpi4py_4(major):
    # The root's send and receive of another datatype or count: mpi4py 4 raises ValueError,
    # mpi4py 3 runs (with the send's). On COMM_SELF: every rank is the root of its own.
    s = np.array([1, 2], "i4")
    with answering_as(major):
        for rmsg in ([np.zeros(2, "f4"), 1, MPI.FLOAT], [np.zeros(2, "i4"), 2, MPI.INT]):
            if major >= 4:
                with pytest.raises(ValueError, match="mismatch"):
                    MPI.COMM_SELF.Reduce([s, 1, MPI.INT], rmsg, MPI.SUM, 0)
            else:
                MPI.COMM_SELF.Reduce([s, 1, MPI.INT], rmsg, MPI.SUM, 0)
                assert rmsg[0].view("i4")[0] == 1
        r = np.zeros(2, "i4")
        MPI.COMM_SELF.Reduce([s, 2, MPI.INT], [r, 2, MPI.INT], MPI.SUM, 0)  # agreeing: runs
        np.testing.assert_array_equal(r, s)


def test_alltoallw_over_bottom_needs_counts_and_displacements(comm):
    P = comm.size
    rmsg = [np.zeros(P, "u1"), [1] * P, list(range(P)), MPI.BYTE]
    for smsg in ([MPI.BOTTOM, None, [0] * P, [MPI.BYTE] * P],
                 [MPI.BOTTOM, [0] * P, None, [MPI.BYTE] * P],
                 [None, None, [0] * P, MPI.BYTE]):
        with pytest.raises(ValueError, match="BOTTOM requires"):
            comm.Alltoallw(smsg, rmsg)
    comm.Barrier()


def test_errors_leave_the_error_types_shmcoll_had():
    # shmcoll.BufferError is both, so code that catches ValueError keeps working.
    assert issubclass(shmcoll.BufferError, BufferError)
    assert issubclass(shmcoll.BufferError, ValueError)
