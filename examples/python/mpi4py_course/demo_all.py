"""Every collective of an mpi4py course, in its buffer form (NumPy arrays, capitalised
methods) and its object form (any picklable object, lower-case methods).

    shmcoll-run -n 4 python3 examples/python/mpi4py_course/demo_all.py

Written for mpi4py: the import line is the only change (under Open MPI or MPICH,
`from mpi4py import MPI` and `mpiexec -n 4 python3 demo_all.py`). Each rank checks what it
received against what every rank must have sent; a wrong result ends the job non-zero.
"""

import sys

import numpy as np

from shmcoll import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = 6  # elements per block


def check(what, got, want):
    """Every rank calls it (want is None where nothing arrives); rank 0 reports."""
    if not np.array_equal(got, want):
        sys.exit(f"demo_all: rank {rank}: {what}: got {got!r}, expected {want!r}")
    comm.Barrier()
    if rank == 0:
        print(f"  ok  {what}", flush=True)


def block(r):
    """The block rank r contributes: N numbers that say whose they are."""
    return np.arange(N, dtype=np.int32) + 100 * r


if rank == 0:
    print(f"every collective, buffer and object forms, on {size} ranks", flush=True)

# Bcast: the root's buffer overwrites everyone's.
buf = block(7) if rank == 0 else np.zeros(N, np.int32)
comm.Bcast(buf, root=0)
check("Bcast", buf, block(7))
check("bcast", comm.bcast({"lr": 0.01, "layers": [64, 32]} if rank == 0 else None, root=0),
      {"lr": 0.01, "layers": [64, 32]})

# Scatter: rank r gets block r of the root's array.
send = np.concatenate([block(r) for r in range(size)]) if rank == 0 else None
recv = np.empty(N, np.int32)
comm.Scatter(send, recv, root=0)
check("Scatter", recv, block(rank))
check("scatter", comm.scatter([f"task {r}" for r in range(size)] if rank == 0 else None),
      f"task {rank}")

# Gather: the root gets every rank's block, in rank order.
out = np.empty((size, N), np.int32) if rank == 0 else None
comm.Gather(block(rank), out, root=0)
check("Gather", out, [block(r) for r in range(size)] if rank == 0 else None)
got = comm.gather((rank, rank**2), root=0)
check("gather", got, [(r, r**2) for r in range(size)] if rank == 0 else None)

# Allgather: every rank gets every block.
out = np.empty((size, N), np.int32)
comm.Allgather(block(rank), out)
check("Allgather", out, [block(r) for r in range(size)])
check("allgather", comm.allgather(f"r{rank}"), [f"r{r}" for r in range(size)])

# Reduce / Allreduce: element-wise sums (and a maximum), to the root / to everyone.
want = sum(block(r) for r in range(size))
out = np.empty(N, np.int32) if rank == 0 else None
comm.Reduce(block(rank), out, op=MPI.SUM, root=0)
check("Reduce(SUM)", out, want if rank == 0 else None)
check("reduce(SUM)", comm.reduce(rank + 1, op=MPI.SUM, root=0),
      size * (size + 1) // 2 if rank == 0 else None)
out = np.empty(N, np.int32)
comm.Allreduce(block(rank), out, op=MPI.SUM)
check("Allreduce(SUM)", out, want)
x = block(rank).astype(np.float64)
comm.Allreduce(MPI.IN_PLACE, x, op=MPI.MAX)
check("Allreduce(IN_PLACE, MAX)", x, block(size - 1))
check("allreduce(MAX)", comm.allreduce(rank, op=MPI.MAX), size - 1)

# Reduce_scatter: reduce size blocks, rank r keeps the sum of everyone's block r. The
# _block form has one count for all; Reduce_scatter takes a count per rank (here r + 1).
send = np.concatenate([block(r) + rank for r in range(size)])
out = np.empty(N, np.int32)
comm.Reduce_scatter_block(send, out, op=MPI.SUM)
check("Reduce_scatter_block", out, size * block(rank) + sum(range(size)))
counts = [r + 1 for r in range(size)]
send = np.arange(sum(counts), dtype=np.float64) * (rank + 1)
out = np.empty(counts[rank])
comm.Reduce_scatter(send, out, recvcounts=counts, op=MPI.SUM)
start = sum(counts[:rank])
check("Reduce_scatter", out,
      np.arange(start, start + counts[rank], dtype=np.float64) * size * (size + 1) / 2)

# Alltoall: block q of rank r's send goes to rank q, landing there as block r.
send = np.array([[1000 * rank + q] * 2 for q in range(size)], np.int32)
out = np.empty((size, 2), np.int32)
comm.Alltoall(send, out)
check("Alltoall", out, [[1000 * r + rank] * 2 for r in range(size)])
check("alltoall", comm.alltoall([(rank, q) for q in range(size)]),
      [(r, rank) for r in range(size)])

# barrier: the object form of Barrier.
comm.barrier()
if rank == 0:
    print("demo_all: every collective checked", flush=True)
