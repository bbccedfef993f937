"""Point-to-point messages with tags: tags as separate channels, receives from any source
with any tag read through a Status, and a deadlock-free ring exchange with Sendrecv.

    shmcoll-run -n 4 python3 examples/python/mpi4py_course/tags.py

Needs at least 2 ranks. Written for mpi4py: the import line is the only change. Each rank
checks every message it receives; a wrong one ends the job non-zero.
"""

import sys

import numpy as np

from shmcoll import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if size < 2:
    sys.exit("tags.py sends between ranks: run it with at least 2 (shmcoll-run -n 2 ...)")


def check(what, ok, detail=""):
    if not ok:
        sys.exit(f"tags: rank {rank}: {what} is wrong {detail}")


# 1. Tags are channels. Rank 0 sends a "weights" message (tag 31) and then a "step" message
# (tag 32); rank 1 asks for tag 32 first. Order holds per (source, tag) only, so each
# receive gets the message of its own tag, whatever was sent first.
WEIGHTS, STEP = 31, 32
if rank == 0:
    comm.Send(np.arange(4, dtype=np.float64), dest=1, tag=WEIGHTS)
    comm.Send(np.array([17], dtype=np.int32), dest=1, tag=STEP)
elif rank == 1:
    step = np.empty(1, np.int32)
    weights = np.empty(4, np.float64)
    comm.Recv(step, source=0, tag=STEP)
    comm.Recv(weights, source=0, tag=WEIGHTS)
    check("the tag-32 message", step[0] == 17, step)
    check("the tag-31 message", np.array_equal(weights, np.arange(4.0)), weights)
    print("rank 1: received tag 32 before tag 31, each with its own data", flush=True)

# 2. Any source, any tag: every other rank reports to rank 0 with its own tag and a message
# of its own length; rank 0 takes them in whatever order they come and learns from the
# Status who sent each, with which tag, and how many elements.
if rank == 0:
    seen = set()
    for _ in range(size - 1):
        status = MPI.Status()
        comm.Probe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        msg = np.empty(status.Get_count(MPI.INT), np.int32)
        comm.Recv(msg, source=status.Get_source(), tag=status.Get_tag(), status=status)
        src = status.Get_source()
        check("the status' tag", status.Get_tag() == 100 + src, status)
        check(f"the message of rank {src}", np.array_equal(msg, np.full(src, src)), msg)
        seen.add(src)
    check("the set of senders", seen == set(range(1, size)), seen)
    print(f"rank 0: heard from ranks {sorted(seen)} through ANY_SOURCE/ANY_TAG", flush=True)
else:
    comm.Send(np.full(rank, rank, dtype=np.int32), dest=0, tag=100 + rank)
# Wildcards match whatever comes first: the barrier keeps the next messages to rank 0 from
# being sent before it has received all of these.
comm.Barrier()

# Objects go the same way (pickled), with tags and a Status too.
if rank == 0:
    status = MPI.Status()
    replies = {}
    for _ in range(size - 1):
        obj = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        replies[status.Get_source()] = (status.Get_tag(), obj)
    check("the object messages",
          replies == {r: (7, {"rank": r, "ok": True}) for r in range(1, size)}, replies)
else:
    comm.send({"rank": rank, "ok": True}, dest=0, tag=7)
comm.Barrier()

# 3. A ring: each rank sends to its right neighbour and receives from its left one in one
# call, which cannot deadlock however large the messages are.
right, left = (rank + 1) % size, (rank - 1) % size
out = np.full(100_000, rank, dtype=np.int32)  # large enough not to be sent eagerly
got = np.empty_like(out)
status = MPI.Status()
comm.Sendrecv(out, dest=right, sendtag=30, recvbuf=got, source=left, recvtag=30, status=status)
check("the ring's message", np.array_equal(got, np.full(100_000, left)), got[:4])
check("the ring's status", status.Get_source() == left and status.Get_tag() == 30, status)
check("the ring's object", comm.sendrecv(f"from {rank}", dest=right, source=left),
      f"from {left}")

comm.Barrier()
if rank == 0:
    print(f"tags: every message checked on {size} ranks", flush=True)
