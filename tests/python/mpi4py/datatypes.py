"""Derived datatypes (their sizes, bounds and envelopes, and data moved with them), and the
reductions on every kind of predefined datatype and op: the output must be the same under
mpi4py and shmcoll.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def show(what, a):
    print("rank %d: %s %s" % (rank, what, np.asarray(a).tolist()))


def describe(name, t):
    print("%s: size %d extent %s true_extent %s envelope %s" % (
        name, t.Get_size(), t.Get_extent(), t.Get_true_extent(), t.Get_envelope()[:3]))


# Sizes and bounds (every rank prints the same; the first rank's lines are kept).
if rank == 0:
    for name in ("INT", "DOUBLE", "SHORT", "LONG_DOUBLE", "C_BOOL", "C_DOUBLE_COMPLEX",
                 "SHORT_INT", "TWOINT", "LONG_INT", "FLOAT_INT", "DOUBLE_INT", "BYTE"):
        t = getattr(MPI, name)
        print("%s: size %d extent %s" % (name, t.Get_size(), t.Get_extent()))
    made = {
        "contiguous(3) of DOUBLE": MPI.DOUBLE.Create_contiguous(3),
        "vector(3, 2, 4) of INT": MPI.INT.Create_vector(3, 2, 4),
        "hvector(2, 1, 24) of DOUBLE": MPI.DOUBLE.Create_hvector(2, 1, 24),
        "indexed([2, 1], [0, 5]) of INT": MPI.INT.Create_indexed([2, 1], [0, 5]),
        "hindexed([1, 2], [8, 0]) of SHORT": MPI.SHORT.Create_hindexed([1, 2], [8, 0]),
        "indexed_block(2, [1, 6]) of FLOAT": MPI.FLOAT.Create_indexed_block(2, [1, 6]),
        "struct(double, int)": MPI.Datatype.Create_struct([1, 1], [0, 8],
                                                          [MPI.DOUBLE, MPI.INT]),
        "struct(char, double)": MPI.Datatype.Create_struct([1, 1], [0, 8],
                                                           [MPI.CHAR, MPI.DOUBLE]),
        "subarray C": MPI.INT.Create_subarray([4, 5], [2, 3], [1, 1]),
        "subarray F": MPI.INT.Create_subarray([4, 5], [2, 3], [1, 1], order=MPI.ORDER_F),
        "resized(-4, 16) of INT": MPI.INT.Create_resized(-4, 16),
        "vector of resized": MPI.INT.Create_resized(0, 12).Create_vector(2, 2, 3),
    }
    for name, t in made.items():
        describe(name, t)
        t.Free()
    # Distributed arrays, Fortran's parametrized datatypes, Match_size: MPI's numbers, and
    # the combiner numbers and contents mpi4py shows.
    for args in ((4, 1, [4, 4], [0, 1], [-1, -1], [2, 2], 0),
                 (6, 5, [7, 5], [1, 0], [2, -1], [3, 2], 1),
                 (3, 1, [5, 4, 3], [0, 2, 1], [2, -1, 1], [3, 1, 1], 0),
                 (2, 0, [9], [1], [4], [2], 1)):
        for base in (MPI.INT, MPI.DOUBLE.Create_resized(-8, 24)):
            t = base.Create_darray(*args)
            old, comb, params = t.decode()
            describe("darray%s" % (args,), t)
            print("  combiner %d %s %s contents %s" % (t.combiner, comb, sorted(params.items()),
                                                       t.Get_contents()[:2]))
            t.Free()
    for make, args in ((MPI.Datatype.Create_f90_integer, (3,)),
                       (MPI.Datatype.Create_f90_integer, (10,)),
                       (MPI.Datatype.Create_f90_real, (6, 30)),
                       (MPI.Datatype.Create_f90_real, (16, 300)),
                       (MPI.Datatype.Create_f90_complex, (15, 300))):
        t = make(*args)
        describe("%s%s" % (make.__name__, args), t)
        print("  combiner %d %s contents %s predefined %s named %s" % (
            t.combiner, t.decode()[1:], t.Get_contents()[:2], t.is_predefined, t.is_named))
    for tc, nbytes in ((1, 1), (1, 2), (1, 4), (1, 8), (2, 4), (2, 8), (3, 8), (3, 16)):
        t = MPI.Datatype.Match_size(tc, nbytes)
        print("Match_size(%d, %d): %s" % (tc, nbytes, t.Get_name()))
    for name in ("contiguous", "vector", "hvector", "indexed", "hindexed", "indexed_block",
                 "hindexed_block", "struct", "subarray", "darray", "resized", "dup"):
        print("COMBINER_%s %d" % (name.upper(), getattr(MPI, "COMBINER_" + name.upper())))
    t = MPI.Datatype.Create_struct([1, 2], [0, 8], [MPI.CHAR, MPI.INT.Create_vector(2, 1, 3)])
    print("struct decode %s %s" % (t.decode()[1], sorted(
        (k, v) for k, v in t.decode()[2].items() if k != "datatypes")))
    t.Free()

# Data moved with derived datatypes: every rank's view of it.
vec = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
b = np.arange(6, dtype="f8") if rank == 0 else np.full(6, -1.0)
comm.Bcast([b, 1, vec], root=0)
show("Bcast vector", b)
idx = MPI.INT.Create_indexed_block(1, [0, 3, 4]).Commit()
g = np.full(5 * size, -1, "i4")
comm.Allgather(np.full(3, rank, "i4"), [g, 1, idx.Create_resized(0, 20).Commit()])
show("Allgather into indexed blocks", g)
st = MPI.Datatype.Create_struct([2, 1], [0, 16], [MPI.DOUBLE, MPI.INT]).Commit()
rec = np.zeros(2, dtype=np.dtype([("a", "f8", 2), ("n", "i4")], align=True))
rec["a"] = [[rank, rank + 0.5], [-rank, 1]]
rec["n"] = [rank, 10 + rank]
out = np.zeros(2 * size, dtype=rec.dtype)
comm.Allgather([rec, st], [out, st])
print("rank %d: Allgather struct %s" % (rank, [(list(x["a"]), int(x["n"])) for x in out]))
sub = MPI.INT.Create_subarray([3, 4], [2, 2], [1, 2]).Commit()
m = np.arange(12, dtype="i4").reshape(3, 4) + 100 * rank
dest = np.zeros((3, 4), "i4")
comm.Sendrecv([m, 1, sub], (rank + 1) % size, 5, [dest, 1, sub], (rank - 1) % size, 5)
show("Sendrecv subarray", dest)
dense = np.zeros(4, "i4")
comm.Sendrecv([m, 1, sub], (rank + 1) % size, 6, [dense, MPI.INT], (rank - 1) % size, 6)
show("Sendrecv subarray into INTs", dense)
# Every rank's part of a distributed array, gathered on every rank.
psizes = MPI.Compute_dims(size, [0, 0])
da = MPI.INT.Create_darray(size, rank, [5, 6], [MPI.DISTRIBUTE_BLOCK, MPI.DISTRIBUTE_CYCLIC],
                           [MPI.DISTRIBUTE_DFLT_DARG, 2], psizes).Commit()
whole = np.arange(30, dtype="i4") + 1000 * rank
mine = np.zeros(da.Get_size() // 4, "i4")
# To itself (Open MPI 4.1's Allgatherv of a darray hangs at P >= 3), then gathered.
comm.Sendrecv([whole, 1, da], rank, 7, [mine, MPI.INT], rank, 7)
show("darray parts", sum(comm.allgather(mine.tolist()), []))
for t in (vec, idx, st, sub, da):
    t.Free()

# Reductions on every kind of datatype: the library's own and those folded in rank order.
n = 4


def printable(a):
    return a.astype("f8") if a.dtype == np.longdouble else a

for dt, ops in (
    ("i1", ("SUM", "MAX", "BAND")),
    ("u1", ("PROD", "BOR")),
    ("i2", ("SUM", "PROD", "MIN", "MAX", "LAND", "BXOR")),
    ("u2", ("SUM", "LOR")),
    ("i4", ("SUM", "MAX", "LXOR", "BAND")),
    ("i8", ("PROD", "MIN", "BOR")),
    ("u8", ("SUM", "BXOR")),
    ("f4", ("SUM", "MIN")),
    ("f8", ("PROD", "MAX")),
    (np.longdouble, ("SUM", "MAX")),
    ("c8", ("SUM", "PROD")),
    ("c16", ("SUM",)),
    ("?", ("LAND", "LOR", "LXOR")),
):
    for op in ops:
        x = ((np.arange(n) + rank) % 3 + 1).astype(dt) if dt != "?" else \
            (np.arange(n) + rank) % 2 == 0
        r = np.zeros(n, dt)
        comm.Allreduce(x, r, op=getattr(MPI, op))
        show("Allreduce %s %s" % (np.dtype(dt).name, op), printable(r))
        s = np.zeros(n, dt)
        comm.Scan(x, s, op=getattr(MPI, op))
        show("Scan %s %s" % (np.dtype(dt).name, op), printable(s))

pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)
x = np.zeros(3, pair)
x["v"] = [rank % 2, -rank, 5.0]
x["i"] = rank
for op in ("MAXLOC", "MINLOC"):
    r = np.zeros(3, pair)
    comm.Allreduce([x, MPI.DOUBLE_INT], [r, MPI.DOUBLE_INT], op=getattr(MPI, op))
    print("rank %d: %s DOUBLE_INT %s" % (rank, op, [(float(a), int(b)) for a, b in r]))
ii = np.zeros(2, np.dtype([("v", "i4"), ("i", "i4")]))
ii["v"] = [rank * 3 % 4, 7]
ii["i"] = [rank, size - rank]
r = np.zeros(2, ii.dtype)
comm.Allreduce([ii, MPI.TWOINT], [r, MPI.TWOINT], op=MPI.MAXLOC)
print("rank %d: MAXLOC TWOINT %s" % (rank, [(int(a), int(b)) for a, b in r]))


def compose(inbuf, inoutbuf, datatype):
    # (a, b) o (c, d) = (a*c, a*d + b): affine maps, composed in rank order.
    a = np.frombuffer(inbuf, "i8").reshape(-1, 2)
    b = np.frombuffer(inoutbuf, "i8").reshape(-1, 2)
    b[:, 1] = a[:, 0] * b[:, 1] + a[:, 1]
    b[:, 0] = a[:, 0] * b[:, 0]


op = MPI.Op.Create(compose, commute=False)
mine = np.array([[rank + 2, rank], [1, rank + 1]], "i8")
r = np.zeros((2, 2), "i8")
comm.Allreduce(mine, r, op=op)
show("Allreduce user op", r)
comm.Scan(mine, r, op=op)
show("Scan user op", r)
e = np.full((2, 2), -1, "i8")
comm.Exscan(mine, e, op=op)
if rank > 0:
    show("Exscan user op", e)
op.Free()
