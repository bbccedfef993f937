"""Sendrecv around a ring and a halo exchange with PROC_NULL edges.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

# Pass a token all the way round: after size steps it is back, summed over every rank.
token = np.array([rank], dtype="int64")
total = np.zeros(1, dtype="int64")
for step in range(size):
    got = np.zeros(1, dtype="int64")
    comm.Sendrecv([token, MPI.LONG], dest=right, sendtag=step, recvbuf=[got, MPI.LONG],
                  source=left, recvtag=step)
    total += got
    token = got
print("rank %d: ring total %d token %d" % (rank, total[0], token[0]))

# A 1-D halo exchange: the ends talk to PROC_NULL.
up = rank + 1 if rank + 1 < size else MPI.PROC_NULL
down = rank - 1 if rank > 0 else MPI.PROC_NULL
field = np.full(6, float(rank))
halo = np.full(2, -1.0)
st = MPI.Status()
comm.Sendrecv([field[-2:].copy(), MPI.DOUBLE], dest=up, sendtag=3, recvbuf=[halo, MPI.DOUBLE],
              source=down, recvtag=3, status=st)
print("rank %d: halo %s from %d" % (rank, halo.tolist(), st.Get_source()))

# Sendrecv of a large block both ways at once.
big = np.arange(100000, dtype="d") + rank
got = np.empty_like(big)
comm.Sendrecv([big, MPI.DOUBLE], dest=right, recvbuf=[got, MPI.DOUBLE], source=left)
print("rank %d: big first %.1f last %.1f" % (rank, got[0], got[-1]))
