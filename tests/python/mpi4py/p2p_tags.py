"""Send/Recv with tags as channels, ANY_SOURCE and ANY_TAG, and what Status says.

An mpi4py program: tests/python/mpi4py_compare.sh runs it under mpirun with mpi4py and, with
its import line changed, under shmcoll-run, and compares the sorted outputs."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

# Every rank but 0 sends rank 0 three messages: tags 10 + k, k = 0..2, rank-dependent data.
if rank != 0:
    for k in range(3):
        comm.Send([np.arange(rank + k + 1, dtype="i") * (k + 1), MPI.INT], dest=0, tag=10 + k)
else:
    got = []
    st = MPI.Status()
    for _ in range(3 * (size - 1)):
        buf = np.zeros(16, dtype="i")
        comm.Recv([buf, MPI.INT], source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
        n = st.Get_count(MPI.INT)
        got.append((st.Get_source(), st.Get_tag(), n, buf[:n].tolist()))
    for src, tag, n, data in sorted(got):
        print("rank 0: from %d tag %d count %d data %s" % (src, tag, n, data))
# ANY_TAG above would take the next section's messages too if they could be there already.
comm.Barrier()

# Tags pick the stream: rank 0 asks each peer for tag 2 first, though tag 1 went first.
if rank != 0:
    comm.Send([np.array([1.5 * rank]), MPI.DOUBLE], dest=0, tag=1)
    comm.Send([np.array([2.5 * rank]), MPI.DOUBLE], dest=0, tag=2)
else:
    for p in range(1, size):
        a, b = np.zeros(1), np.zeros(1)
        st = MPI.Status()
        comm.Recv([b, MPI.DOUBLE], source=p, tag=2, status=st)
        comm.Recv([a, MPI.DOUBLE], source=p, tag=MPI.ANY_TAG)
        print("rank 0: peer %d tag2 %.1f then %.1f status %d/%d/%d bytes" %
              (p, b[0], a[0], st.Get_source(), st.Get_tag(), st.Get_count(MPI.BYTE)))

# Probe sizes a receive.
if rank == size - 1:
    comm.Send(np.arange(5, dtype="int64"), dest=0, tag=77)
if rank == 0:
    st = MPI.Status()
    comm.Probe(source=MPI.ANY_SOURCE, tag=77, status=st)
    buf = np.zeros(st.Get_count(MPI.LONG), dtype="int64")
    comm.Recv([buf, MPI.LONG], source=st.Get_source(), tag=77)
    print("rank 0: probed %d longs from %d: %s" % (len(buf), st.Get_source(), buf.tolist()))

# PROC_NULL: nothing is sent or received.
buf = np.full(2, -1.0)
comm.Send([buf, MPI.DOUBLE], dest=MPI.PROC_NULL)
st = MPI.Status()
comm.Recv([buf, MPI.DOUBLE], source=MPI.PROC_NULL, status=st)
print("rank %d: proc_null source %d buf %s" % (rank, st.Get_source(), buf.tolist()))
