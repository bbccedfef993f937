"""The lower-case (pickled) methods: send/recv, isend/irecv with wait/test/waitall,
sendrecv, and the object collectives, with Python objects and NumPy arrays.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size


def show(what, obj):
    if isinstance(obj, np.ndarray):
        obj = ("ndarray", str(obj.dtype), obj.shape, obj.tolist())
    elif isinstance(obj, list):
        obj = [show(None, o) for o in obj]
    if what is None:
        return obj
    print("rank %d: %s %r" % (rank, what, obj))


# send / recv, with a status.
if rank == 0:
    for p in range(1, size):
        comm.send({"to": p, "list": list(range(p))}, dest=p, tag=11)
else:
    st = MPI.Status()
    show("recv", comm.recv(source=0, tag=11, status=st))
    show("recv status", (st.Get_source(), st.Get_tag()))

# isend to the right, then a blocking recv from the left: isend must not wait.
req = comm.isend(("ring", rank, "x" * 50000), dest=right, tag=12)
msg = comm.recv(source=left, tag=12)
show("ring", (msg[0], msg[1], len(msg[2])))
show("isend wait", req.wait())

# irecv with wildcards, wait with a status, test after completion.
rreq = comm.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
sreq = comm.isend([rank, rank * 2], dest=right, tag=13)
st = MPI.Status()
show("irecv", rreq.wait(st))
show("irecv status", (st.Get_source(), st.Get_tag()))
show("test after", rreq.test())
sreq.wait()
comm.barrier()  # the wildcard took the one message there was; the next ones come after

# waitall over receives from every peer.
reqs = [comm.irecv(source=p, tag=14) for p in range(size) if p != rank]
sends = [comm.isend("hello %d->%d" % (rank, p), dest=p, tag=14) for p in range(size) if p != rank]
show("waitall", MPI.Request.waitall(reqs))
MPI.Request.waitall(sends)

# test before the message can be there: the peer sends only after the barrier.
rreq = comm.irecv(source=left, tag=15)
show("test before", rreq.test())
comm.barrier()
sreq = comm.isend(rank * 100, dest=right, tag=15)
flag, obj = rreq.test()
while not flag:
    flag, obj = rreq.test()
show("test until", (flag, obj))
sreq.wait()

# sendrecv of objects.
show("sendrecv", comm.sendrecv(("sr", rank), dest=right, source=left))

# The collectives.
show("bcast", comm.bcast({"root": 0, "v": [1.5, 2.5]} if rank == 0 else None, root=0))
show("scatter", comm.scatter([("item", i) for i in range(size)] if rank == 1 % size else None,
                             root=1 % size))
show("gather", comm.gather(rank ** 2, root=0))
show("allgather", comm.allgather({"r": rank}))
show("alltoall", comm.alltoall([(rank, q) for q in range(size)]))
show("reduce", comm.reduce(rank + 1, op=MPI.SUM, root=size - 1))
show("allreduce sum", comm.allreduce(rank + 1, op=MPI.SUM))
show("allreduce max", comm.allreduce(rank * 3 % 5, op=MPI.MAX))
show("allreduce prod", comm.allreduce(rank + 1, op=MPI.PROD))
show("allreduce list", comm.allreduce([rank], op=MPI.SUM))

# NumPy arrays through the object collectives.
a = np.arange(6, dtype="float64").reshape(2, 3) * (rank + 1)
show("array allreduce", comm.allreduce(a, op=MPI.SUM))
show("array allreduce int8", comm.allreduce(np.arange(4, dtype="int8") + rank))
show("array reduce", comm.reduce(np.arange(3, dtype="int32") + rank, op=MPI.SUM, root=0))
show("array bcast", comm.bcast(np.ones((2, 2), dtype="float32") * 7 if rank == 0 else None))
show("array gather", comm.gather(np.full(rank + 1, rank, dtype="uint8"), root=0))
show("array allgather", comm.allgather(np.arange(rank + 1, dtype="int64")))
show("array scatter", comm.scatter([np.full(2, i) for i in range(size)] if rank == 0 else None))
show("array 0-d", comm.allreduce(np.array(rank + 0.5)))
comm.barrier()
