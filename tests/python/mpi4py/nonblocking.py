"""Isend/Irecv with Waitall, Testall and Wait(status): every rank exchanges with every other.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

bufs = {p: np.zeros(3, dtype="d") for p in range(size) if p != rank}
recvs = [comm.Irecv([bufs[p], MPI.DOUBLE], source=p, tag=100 + p) for p in sorted(bufs)]
sends = [comm.Isend([np.full(3, 10.0 * rank + p), MPI.DOUBLE], dest=p, tag=100 + rank)
         for p in sorted(bufs)]
statuses = [MPI.Status() for _ in recvs]
MPI.Request.Waitall(recvs, statuses)
MPI.Request.Waitall(sends)
for p, st in zip(sorted(bufs), statuses):
    print("rank %d: from %d %s source %d tag %d" %
          (rank, p, bufs[p].tolist(), st.Get_source(), st.Get_tag()))

# A large message each way (far above any eager size), both sides posting sends first.
right, left = (rank + 1) % size, (rank - 1) % size
out = np.arange(200000, dtype="int64") * (rank + 1)
inn = np.zeros_like(out)
s = comm.Isend([out, MPI.LONG], dest=right, tag=5)
r = comm.Irecv([inn, MPI.LONG], source=left, tag=5)
st = MPI.Status()
r.Wait(st)
s.Wait()
print("rank %d: big from %d sum %d count %d" % (rank, st.Get_source(), int(inn.sum()),
                                               st.Get_count(MPI.LONG)))

# Testall until done (no sleeping: each call makes progress).
x = np.zeros(1, dtype="i")
reqs = [comm.Irecv([x, MPI.INT], source=left, tag=6),
        comm.Isend([np.array([rank], dtype="i"), MPI.INT], dest=right, tag=6)]
while not MPI.Request.Testall(reqs):
    pass
print("rank %d: testall got %d" % (rank, x[0]))

# A non-blocking collective next to the point-to-point ones.
y = np.array([rank + 1.0])
req = comm.Iallreduce(MPI.IN_PLACE, y, op=MPI.SUM)
req.Wait()
print("rank %d: iallreduce %.1f" % (rank, y[0]))
