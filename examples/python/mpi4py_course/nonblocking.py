"""Non-blocking messages: Isend/Irecv completed by Waitall, a halo exchange that computes
while its messages travel, many messages in flight at once, checked through their Statuses,
and objects sent with isend/irecv.

    shmcoll-run -n 4 python3 examples/python/mpi4py_course/nonblocking.py

Written for mpi4py: the import line is the only change. Alone it is a job of one rank that
sends to itself. Each rank checks everything it receives; a wrong result ends the job
non-zero.
"""

import sys

import numpy as np

from shmcoll import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size


def check(what, ok, detail=""):
    if not ok:
        sys.exit(f"nonblocking: rank {rank}: {what} is wrong {detail}")


# 1. A ring: post the receive and the send, then wait for both. Neither call waits, so the
# order of the two lines does not matter and no rank can block another.
mine = np.full(1024, rank, dtype=np.float32)
theirs = np.empty_like(mine)
requests = [comm.Irecv(theirs, source=left, tag=20), comm.Isend(mine, dest=right, tag=20)]
MPI.Request.Waitall(requests)
check("the ring", np.array_equal(theirs, np.full(1024, left, np.float32)), theirs[:4])

# 2. A halo exchange: the array 0, 1, ..., n-1 is split over the ranks, and each needs one
# value from each neighbour (its "halo") to take a three-point average. The inner points need
# no halo, so they are computed while the messages are on their way. The ends of the whole
# array have no neighbour there: MPI.PROC_NULL makes those sends and receives do nothing.
PER_RANK = 1000
n = PER_RANK * size
u = np.zeros(PER_RANK + 2)  # u[0] and u[-1] are the halo
u[1:-1] = np.arange(rank * PER_RANK, (rank + 1) * PER_RANK)
down = rank - 1 if rank > 0 else MPI.PROC_NULL
up = rank + 1 if rank < size - 1 else MPI.PROC_NULL
requests = [
    comm.Irecv(u[0:1], source=down, tag=1),
    comm.Irecv(u[-1:], source=up, tag=2),
    comm.Isend(u[1:2], dest=down, tag=2),
    comm.Isend(u[-2:-1], dest=up, tag=1),
]
smooth = np.empty(PER_RANK)
smooth[1:-1] = (u[1:-3] + u[2:-2] + u[3:-1]) / 3  # the inner points, halo not needed
MPI.Request.Waitall(requests)
smooth[[0, -1]] = (u[[0, -3]] + u[[1, -2]] + u[[2, -1]]) / 3  # the two edges, with the halo

whole = np.arange(n, dtype=np.float64)  # the reference: the same average on the whole array
padded = np.concatenate([[0.0], whole, [0.0]])  # its ends average with 0, as the halo's zeros
want = (padded[:-2] + padded[1:-1] + padded[2:]) / 3
check("the halo exchange", np.allclose(smooth, want[rank * PER_RANK : (rank + 1) * PER_RANK]))

# 3. Many messages in flight: every rank sends one message to every rank (itself included),
# tagged with the sender's rank, and receives from anyone. The statuses say who sent what.
inbox = [np.empty(3, np.int64) for _ in range(size)]
recvs = [comm.Irecv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG) for buf in inbox]
outbox = [np.array([rank, dest, rank * dest], np.int64) for dest in range(size)]
sends = [comm.Isend(outbox[dest], dest=dest, tag=rank) for dest in range(size)]
statuses = [MPI.Status() for _ in recvs]
MPI.Request.Waitall(recvs, statuses)
MPI.Request.Waitall(sends)
senders = sorted(s.Get_source() for s in statuses)
check("the senders", senders == list(range(size)), senders)
for buf, st in zip(inbox, statuses):
    src = st.Get_source()
    check(f"the message from {src}", st.Get_tag() == src and
          np.array_equal(buf, [src, rank, src * rank]), (buf, st))
# Wildcard receives take whatever comes first: the barrier keeps the next part's messages
# from being sent before every rank has received all of these.
comm.Barrier()

# 4. Test instead of Wait: keep working until the message is there.
value = np.array([rank * 10.0])
got = np.empty(1)
recv = comm.Irecv(got, source=left, tag=5)
send = comm.Isend(value, dest=right, tag=5)
polls = 0
while not recv.Test():
    polls += 1  # work that goes on while the message travels
send.Wait()
check("the tested message", got[0] == left * 10.0, got)

# 5. Objects: isend and irecv move any picklable object; the receive's wait() returns it.
note = {"from": rank, "items": list(range(rank + 1))}
send = comm.isend(note, dest=right, tag=11)
recv = comm.irecv(source=left, tag=11)
got = recv.wait()
send.wait()
check("the object received", got == {"from": left, "items": list(range(left + 1))}, got)

comm.Barrier()
if rank == 0:
    print(f"nonblocking: the ring, the halo exchange, {size * size} messages in flight, a "
          f"polled receive and an object ring checked on {size} ranks", flush=True)
