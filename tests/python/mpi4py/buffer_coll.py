"""The buffer collectives with mpi4py's buffer specs: [buf, MPI.DOUBLE],
[buf, (counts, displs), MPI.DOUBLE], [buf, counts, displs, type], IN_PLACE.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def show(what, a):
    print("rank %d: %s %s" % (rank, what, np.asarray(a).tolist()))


x = np.zeros(4)
if rank == 0:
    x[:] = [1.5, 2.5, 3.5, 4.5]
comm.Bcast([x, MPI.DOUBLE], root=0)
show("Bcast", x)

s = np.arange(4, dtype="d") + rank
r = np.zeros(4)
comm.Allreduce([s, MPI.DOUBLE], [r, MPI.DOUBLE], op=MPI.SUM)
show("Allreduce", r)
r = np.zeros(4, dtype="i")
comm.Allreduce(np.arange(4, dtype="i") * (rank + 1), r, op=MPI.MAX)
show("Allreduce max", r)
y = np.full(3, rank + 1, dtype="int64")
comm.Allreduce(MPI.IN_PLACE, [y, MPI.LONG], op=MPI.PROD)
show("Allreduce in place", y)
r = np.zeros(4) if rank == 0 else None
comm.Reduce([s, MPI.DOUBLE], [r, MPI.DOUBLE] if rank == 0 else None, op=MPI.SUM, root=0)
if rank == 0:
    show("Reduce", r)

g = np.zeros(2 * size) if rank == size - 1 else None
comm.Gather([np.array([rank, -rank], dtype="d"), MPI.DOUBLE],
            [g, MPI.DOUBLE] if rank == size - 1 else None, root=size - 1)
if rank == size - 1:
    show("Gather", g)
src = np.arange(3 * size, dtype="i") if rank == 0 else None
part = np.zeros(3, dtype="i")
comm.Scatter([src, MPI.INT] if rank == 0 else None, [part, MPI.INT], root=0)
show("Scatter", part)
ag = np.zeros(size, dtype="f")
comm.Allgather([np.array([rank * 0.5], dtype="f"), MPI.FLOAT], [ag, MPI.FLOAT])
show("Allgather", ag)
send = np.array([100 * rank + q for q in range(size)], dtype="i")
recv = np.zeros(size, dtype="i")
comm.Alltoall([send, MPI.INT], [recv, MPI.INT])
show("Alltoall", recv)

# Variable counts: rank p has p + 1 elements; the blocks sit with gaps of one.
counts = [p + 1 for p in range(size)]
displs = [sum(counts[:p]) + p for p in range(size)]
total = displs[-1] + counts[-1]
mine = np.full(counts[rank], rank + 0.25)
out = np.full(total, -1.0)
comm.Allgatherv([mine, MPI.DOUBLE], [out, (counts, displs), MPI.DOUBLE])
show("Allgatherv", out)
out = np.full(total, -1.0) if rank == 0 else None
comm.Gatherv([mine, MPI.DOUBLE], [out, counts, displs, MPI.DOUBLE] if rank == 0 else None,
             root=0)
if rank == 0:
    show("Gatherv", out)
src = np.arange(total, dtype="d") if rank == size - 1 else None
part = np.zeros(counts[rank])
comm.Scatterv([src, (counts, displs), MPI.DOUBLE] if rank == size - 1 else None,
              [part, MPI.DOUBLE], root=size - 1)
show("Scatterv", part)

sc = [q + 1 for q in range(size)]  # rank r sends q + 1 elements to q
sd = [sum(sc[:q]) for q in range(size)]
sb = np.concatenate([np.full(sc[q], 10.0 * rank + q) for q in range(size)])
rc = [rank + 1] * size
rd = [p * (rank + 1) for p in range(size)]
rb = np.zeros(sum(rc))
comm.Alltoallv([sb, (sc, sd), MPI.DOUBLE], [rb, (rc, rd), MPI.DOUBLE])
show("Alltoallv", rb)

rcounts = [2] * size
sbuf = np.arange(2 * size, dtype="d") * (rank + 1)
rbuf = np.zeros(2)
comm.Reduce_scatter([sbuf, MPI.DOUBLE], [rbuf, MPI.DOUBLE], recvcounts=rcounts, op=MPI.SUM)
show("Reduce_scatter", rbuf)
rbuf = np.zeros(2)
comm.Reduce_scatter_block([sbuf, MPI.DOUBLE], [rbuf, MPI.DOUBLE], op=MPI.SUM)
show("Reduce_scatter_block", rbuf)

v = np.array([rank + 1, 2 * rank], dtype="i")
sc_out = np.zeros(2, dtype="i")
comm.Scan([v, MPI.INT], [sc_out, MPI.INT], op=MPI.SUM)
show("Scan", sc_out)
ex_out = np.zeros(2, dtype="i")
comm.Exscan([v, MPI.INT], [ex_out, MPI.INT], op=MPI.SUM)
if rank > 0:  # rank 0's Exscan result is undefined in MPI
    show("Exscan", ex_out)
comm.Barrier()
