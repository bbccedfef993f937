"""Every message specification form mpi4py reads, through the calls that take it, and the
exception each malformed one raises: the output must be the same under mpi4py and shmcoll.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import array

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def show(what, a):
    print("rank %d: %s %s" % (rank, what, np.asarray(a).tolist()))


def raises(what, fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the class is what is compared)
        kind = type(e).__name__
        if isinstance(e, MPI.Exception):
            kind = "MPI.Exception"
        print("rank %d: %s raises %s" % (rank, what, kind))
    else:
        print("rank %d: %s raises nothing" % (rank, what))


# Bcast in every simple form.
for name, spec in (
    ("buf", lambda b: b),
    ("[buf, DOUBLE]", lambda b: [b, MPI.DOUBLE]),
    ("[buf, 'd']", lambda b: [b, "d"]),
    ("[buf, 5]", lambda b: [b, 5]),
    ("[buf, 4, DOUBLE]", lambda b: [b, 4, MPI.DOUBLE]),
    ("[buf, (3, 2), DOUBLE]", lambda b: [b, (3, 2), MPI.DOUBLE]),
    ("[buf, 3, 2, DOUBLE]", lambda b: [b, 3, 2, MPI.DOUBLE]),
    ("(buf, (2, 1))", lambda b: (b, (2, 1))),
):
    b = np.arange(8, dtype="f8") + 0.25 if rank == 0 else np.full(8, -1.0)
    comm.Bcast(spec(b), root=0)
    show("Bcast %s" % name, b)

# Buffers other than NumPy's.
a = array.array("i", [rank + 1] * 3)
o = array.array("i", [0] * 3)
comm.Allreduce(a, o, op=MPI.PROD)
show("Allreduce array.array PROD", list(o))
ba = bytearray(b"hello!" if rank == 0 else b"......")
comm.Bcast(ba, root=0)
print("rank %d: Bcast bytearray %r" % (rank, bytes(ba)))
f = np.asfortranarray(np.arange(6, dtype="i8").reshape(2, 3) + rank)
g = np.zeros((2, 3), dtype="i8", order="F")
comm.Allreduce(f, g, op=MPI.MAX)
show("Allreduce Fortran order MAX", g)

# Per-block counts of the block calls.
s = np.array([10 * rank + q for q in range(size) for _ in range(2)], "i4")
r = np.full(2 * size + 2, -1, "i4")
comm.Alltoall([s, MPI.INT], [r, 2, MPI.INT])
show("Alltoall [r, 2, INT]", r)
g = np.full(3 * size, -1, "i8")
comm.Allgather([np.full(3, rank, "i8"), MPI.LONG], [g, 3, MPI.LONG])
show("Allgather [g, 3, LONG]", g)
for root in range(size):
    out = np.full(2 * size, -1, "f4") if rank == root else None
    comm.Gather(np.full(2, rank, "f4"), out, root=root)
    if rank == root:
        show("Gather root %d" % root, out)
    mine = np.full(2, -1, "i2")
    comm.Scatter(np.arange(2 * size, dtype="i2") if rank == root else None, mine, root=root)
    show("Scatter root %d" % root, mine)

# The vector forms.
counts = [q + 1 for q in range(size)]
displs = [sum(counts[:q]) + q for q in range(size)]
total = displs[-1] + counts[-1]
for name, spec in (
    ("[out, counts, displs, DOUBLE]", lambda o: [o, counts, displs, MPI.DOUBLE]),
    ("[out, (counts, displs), DOUBLE]", lambda o: [o, (counts, displs), MPI.DOUBLE]),
    ("[out, (counts, displs)]", lambda o: [o, (counts, displs)]),
    ("[out, counts, DOUBLE]", lambda o: [o, counts, MPI.DOUBLE]),
    ("[out, counts]", lambda o: [o, counts]),
):
    o = np.full(total, -1.0)
    comm.Allgatherv(np.full(rank + 1, float(rank)), spec(o))
    show("Allgatherv %s" % name, o)
n = 2 * size + 1
o = np.full(n, -1, "i8")
mine = np.full(n // size + (n % size > rank), rank, "i8")
comm.Allgatherv(mine, o)
show("Allgatherv plain buffer split evenly", o)
o = np.full(3 * size, -1, "i4")
comm.Allgatherv(np.full(2, rank, "i4"), [o, (2, 3), MPI.INT])
show("Allgatherv int count, int stride", o)
sc = [(rank + q) % 3 for q in range(size)]
rc = [(q + rank) % 3 for q in range(size)]
sb = np.concatenate([np.full(sc[q], 10 * rank + q, "f8") for q in range(size)] + [np.zeros(0)])
rb = np.full(sum(rc), -1.0)
comm.Alltoallv([sb, sc], [rb, rc])
show("Alltoallv [sb, sc] [rb, rc]", rb)
for root in range(size):
    full = np.arange(sum(counts), dtype="i4")
    part = np.full(counts[rank], -1, "i4")
    comm.Scatterv([full, counts, MPI.INT] if rank == root else None, part, root=root)
    show("Scatterv root %d" % root, part)
    back = np.full(sum(counts), -1, "i4") if rank == root else None
    comm.Gatherv(part, [back, counts, MPI.INT] if rank == root else None, root=root)
    if rank == root:
        show("Gatherv root %d" % root, back)

# Receive blocks that overlap (erroneous in MPI, run by both MPIs all the same): rank 1's at
# rank 0's, the others in reverse rank order overlapping by half. A block's values are those
# of the places it lands on, so which rank writes last does not show.
m = 4
d = [(size - 1 - q) * (m // 2) for q in range(size)]
if size > 1:
    d[1] = d[0]
span = max(d) + m
placed = np.arange(span, dtype="i4") * 7 + 3
mine = placed[d[rank]: d[rank] + m].copy()
o = np.full(span, -1, "i4")
comm.Allgatherv(mine, [o, ([m] * size, d), MPI.INT])
show("Allgatherv overlapping blocks", o)
o = np.full(span, -1, "i4")
comm.Iallgatherv(mine, [o, ([m] * size, d), MPI.INT]).Wait()
show("Iallgatherv overlapping blocks", o)
o = np.full(span, -1, "i4") if rank == 0 else None
comm.Gatherv(mine, [o, ([m] * size, d), MPI.INT] if rank == 0 else None, root=0)
if rank == 0:
    show("Gatherv overlapping blocks", o)
o = np.full(span, -1, "i4")
comm.Alltoallv([np.tile(mine, size), [m] * size], [o, ([m] * size, d), MPI.INT])
show("Alltoallv overlapping blocks", o)

# IN_PLACE where MPI allows it.
x = np.full(3, rank + 1.0)
comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
show("Allreduce IN_PLACE", x)
g = np.full(2 * size, -1, "i4")
g[2 * rank: 2 * rank + 2] = rank
comm.Allgather(MPI.IN_PLACE, [g, MPI.INT])
show("Allgather IN_PLACE", g)
rs = np.array([rank + q for q in range(size) for _ in range(2)], "i8")
comm.Reduce_scatter_block(MPI.IN_PLACE, rs, op=MPI.SUM)
show("Reduce_scatter_block IN_PLACE", rs[:2])
sc = np.full(2, rank + 1, "i4")
comm.Scan(MPI.IN_PLACE, sc, op=MPI.SUM)
show("Scan IN_PLACE", sc)

# The receive counts of Reduce_scatter left out: gathered from every rank.
out = np.zeros(counts[rank], "f8")
comm.Reduce_scatter(np.arange(sum(counts), dtype="f8") + rank, out, op=MPI.SUM)
show("Reduce_scatter default counts", out)

# Malformed specifications: the exception raised on the calling rank, every rank alike.
z = np.zeros(4, "i4")
raises("Bcast(42)", lambda: comm.Bcast(42))
raises("Bcast([z])", lambda: comm.Bcast([z]))
raises("Bcast 5 items", lambda: comm.Bcast([z, 1, 0, MPI.INT, 5]))
raises("Bcast unknown typecode", lambda: comm.Bcast([z, "?!"]))
raises("Bcast negative count", lambda: comm.Bcast([z, -1, MPI.INT]))
raises("Bcast negative displ", lambda: comm.Bcast([z, (1, -1), MPI.INT]))
raises("Bcast displ past the end", lambda: comm.Bcast([z, (1, 9), MPI.INT]))
raises("Bcast None with a count", lambda: comm.Bcast([None, 2, MPI.INT]))
raises("Bcast length not a multiple", lambda: comm.Bcast([np.zeros(5, "i1"), MPI.INT]))
raises("Allreduce types differ", lambda: comm.Allreduce(z, np.zeros(4, "f4")))
raises("Allreduce counts differ", lambda: comm.Allreduce(z, np.zeros(3, "i4")))
raises("Allgather not whole elements", lambda: comm.Allgather(z, [np.zeros(16 * size + 1, "i1"), MPI.INT]))
if size > 1:
    raises("Allgather not whole blocks", lambda: comm.Allgather(z, np.zeros(4 * size + 1, "i4")))
raises("Allgatherv wrong number of counts", lambda: comm.Allgatherv(z, [np.zeros(9, "i4"), [1] * (size + 1)]))
raises("Bcast root out of range", lambda: comm.Bcast(z, root=size))
raises("Send to no rank", lambda: comm.Send(z, dest=size))
# The communicator works after all of them.
y = np.ones(2)
comm.Allreduce(MPI.IN_PLACE, y, op=MPI.SUM)
show("after the errors", y)
