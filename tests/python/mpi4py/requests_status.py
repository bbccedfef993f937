"""Requests and statuses as mpi4py's: persistent requests started several times,
Waitany/Testany/Waitsome over them, object requests that become REQUEST_NULL, matched
probes, and the counts a Status gives.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size

sbuf = np.zeros(4, "i")
rbuf = np.zeros(4, "i")
send = comm.Send_init([sbuf, MPI.INT], right, tag=1)
recv = comm.Recv_init([rbuf, MPI.INT], left, tag=1)
for k in range(3):
    sbuf[:] = 100 * rank + k
    MPI.Prequest.Startall([recv, send])
    got = sorted([MPI.Request.Waitany([send, recv]), MPI.Request.Waitany([send, recv])])
    st = MPI.Status()
    recv.Wait(st)
    print("rank %d: round %d got %s waitany %s then undefined %s, active-free %s %s, count %d" % (
        rank, k, rbuf.tolist(), got, MPI.Request.Waitany([send, recv]) == MPI.UNDEFINED,
        send == MPI.REQUEST_NULL, bool(recv), st.Get_count(MPI.INT)))
send.Free()
recv.Free()
print("rank %d: freed %s %s" % (rank, send == MPI.REQUEST_NULL, recv == MPI.REQUEST_NULL))

r = comm.irecv(source=left, tag=2)
s = comm.isend(("hello", rank), dest=right, tag=2)
st = MPI.Status()
obj = r.wait(st)
s.wait()
print("rank %d: irecv %s from %d tag %d, null %s %s" % (
    rank, obj, st.Get_source(), st.Get_tag(), r == MPI.REQUEST_NULL, not s))

comm.send([rank] * 3, dest=right, tag=3)
m = comm.mprobe(source=left, tag=3, status=st)
print("rank %d: mprobe source %d tag %d, message %s, recv %s, then null %s" % (
    rank, st.Get_source(), st.Get_tag(), bool(m), m.recv(), m == MPI.MESSAGE_NULL))
m = comm.mprobe(MPI.PROC_NULL)
print("rank %d: no proc %s %s" % (rank, m == MPI.MESSAGE_NO_PROC, m.recv()))

x = np.arange(6, dtype="d") + rank
req = comm.Isend([x, MPI.DOUBLE], dest=right, tag=4)
comm.Probe(left, 4, st)
print("rank %d: probe count double %d int %d byte %d elements %d" % (
    rank, st.Get_count(MPI.DOUBLE), st.Get_count(MPI.INT), st.Get_count(MPI.BYTE),
    st.Get_elements(MPI.DOUBLE)))
y = np.zeros(8)
comm.Recv([y, MPI.DOUBLE], left, 4, st)
req.Wait()
print("rank %d: recv count %d cancelled %s" % (rank, st.Get_count(MPI.DOUBLE),
                                               st.Is_cancelled()))
s = MPI.Status()
s.Set_elements(MPI.BYTE, 7)
t = MPI.Datatype.Create_struct([2, 1], [0, 8], [MPI.INT, MPI.DOUBLE]).Commit()
print("rank %d: set 7 bytes: count int %s elements int %s; struct %s %s" % (
    rank, s.Get_count(MPI.INT) == MPI.UNDEFINED, s.Get_elements(MPI.INT) == MPI.UNDEFINED,
    s.Get_elements(t) == MPI.UNDEFINED, s.Get_count(t) == MPI.UNDEFINED))
s.Set_elements(t, 4)
print("rank %d: struct elements 4 = %d bytes" % (rank, s.Get_count(MPI.BYTE)))
t.Free()
print("rank %d: scan %s exscan %s maxloc %s" % (
    rank, comm.scan(rank + 1), comm.exscan(rank + 1),
    comm.allreduce((rank % 3, rank), op=MPI.MAXLOC)))
# (Free of a communicator with an Iallreduce outstanding is tested in test_mpi_requests.py:
# Open MPI 4.1.4's libnbc crashes on it.)
