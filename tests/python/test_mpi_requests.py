"""from shmcoll import MPI: requests as mpi4py's (persistent ones restarted, object requests
that become REQUEST_NULL), matched probes and messages, Free of a communicator with
operations outstanding, and the object prefix reductions and ops, on every rank against
hand-computed results."""

import numpy as np
import pytest

from shmcoll import MPI


def ring(comm):
    r, P = comm.rank, comm.size
    return (r + 1) % P, (r - 1) % P


# ---- persistent requests ----


def test_persistent_requests_restarted(comm):
    right, left = ring(comm)
    sbuf = np.zeros(5, "i")
    rbuf = np.zeros(5, "i")
    send = comm.Send_init(sbuf, dest=right, tag=3)
    recv = comm.Recv_init(rbuf, source=left, tag=3)
    assert isinstance(send, MPI.Prequest) and send and recv
    assert send != MPI.REQUEST_NULL  # not started: inactive, not null
    for i in range(6):
        sbuf[:] = 10 * comm.rank + i  # each Start sends the buffer as it is then
        if i % 2:
            MPI.Prequest.Startall([recv, send])
        else:
            recv.Start()
            send.Start()
        st = MPI.Status()
        if i % 3 == 0:
            MPI.Request.Waitall([send, recv])
        elif i % 3 == 1:
            assert recv.Wait(st) is True and send.Wait() is True
            assert st.Get_source() == left and st.Get_tag() == 3
        else:
            while not MPI.Request.Testall([send, recv]):
                pass
        assert (rbuf == 10 * left + i).all()
        # Completed: inactive, yet not REQUEST_NULL, and startable again.
        assert send and recv and send != MPI.REQUEST_NULL and recv != MPI.REQUEST_NULL
        assert send.Test() is True and recv.Wait() is True  # inactive: at once
    send.Free()
    recv.Free()
    assert send == MPI.REQUEST_NULL and recv == MPI.REQUEST_NULL and not send


def test_persistent_modes_and_waitany(comm):
    right, left = ring(comm)
    for init in (comm.Send_init, comm.Ssend_init, comm.Bsend_init, comm.Rsend_init):
        sbuf = np.arange(4.0) + comm.rank
        rbuf = np.zeros(4)
        # Rsend needs its receive posted: start the receive before every send, and let
        # every rank have posted it first.
        reqs = [comm.Recv_init(rbuf, left, 7), init(sbuf, right, 7)]
        reqs[0].Start()
        comm.Barrier()
        reqs[1].Start()
        done = {MPI.Prequest.Waitany(reqs), MPI.Prequest.Waitany(reqs)}
        assert done == {0, 1}
        assert MPI.Request.Waitany(reqs) == MPI.UNDEFINED  # both inactive now
        assert MPI.Request.Testany(reqs) == (MPI.UNDEFINED, True)
        assert MPI.Request.Waitsome(reqs) is None
        np.testing.assert_array_equal(rbuf, np.arange(4.0) + left)
        for q in reqs:
            q.Free()
    for init in (comm.Send_init, comm.Recv_init):
        q = init(None, MPI.PROC_NULL)
        q.Start()
        q.Wait()
        q.Free()


def test_persistent_start_twice_is_an_error(comm):
    q = comm.Recv_init(bytearray(1), MPI.PROC_NULL)
    q.Start()
    with pytest.raises(MPI.Exception) as e:
        q.Start()
    assert e.value.Get_error_class() == MPI.ERR_REQUEST
    q.Wait()
    q.Free()
    with pytest.raises(MPI.Exception):
        q.Start()


# ---- object requests become REQUEST_NULL ----


def test_object_requests_null_once_completed(comm):
    right, left = ring(comm)
    rreq = comm.irecv(source=left, tag=1)
    sreq = comm.isend({"from": comm.rank}, dest=right, tag=1)
    assert rreq and sreq and rreq != MPI.REQUEST_NULL
    index, obj = MPI.Request.waitany([rreq, sreq])
    other = 1 - index
    assert [rreq, sreq][index] == MPI.REQUEST_NULL and not [rreq, sreq][index]
    assert obj == ({"from": left} if index == 0 else None)
    index2, obj2 = MPI.Request.waitany([rreq, sreq])
    assert index2 == other and not rreq and not sreq
    assert MPI.Request.waitany([rreq, sreq]) == (MPI.UNDEFINED, None)
    req = comm.isend("x", dest=MPI.PROC_NULL)
    assert req.Wait() is True and not req and req == MPI.REQUEST_NULL
    req = comm.irecv(source=MPI.PROC_NULL)
    assert req.Test() is True and not req


def test_issend_to_self_completes_when_received(comm):
    req = comm.issend("me", dest=comm.rank, tag=5)
    assert req.test() == (False, None) and req  # nobody received it yet
    assert comm.iprobe(comm.rank, 5)
    assert req.Test() is False
    assert comm.recv(source=comm.rank, tag=5) == "me"
    assert req.test() == (True, None) and not req
    # Received by a posted irecv: waitall completes both.
    r = comm.irecv(source=comm.rank, tag=6)
    s = comm.issend([1, 2], dest=comm.rank, tag=6)
    assert MPI.Request.waitall([s, r]) == [None, [1, 2]]


# ---- matched probes ----


def test_mprobe_and_messages(comm):
    right, left = ring(comm)
    comm.isend(("obj", comm.rank), dest=right, tag=2).Wait()
    st = MPI.Status()
    m = comm.mprobe(source=left, tag=2, status=st)
    assert isinstance(m, MPI.Message) and m and st.Get_source() == left
    assert m.recv() == ("obj", left) and not m and m == MPI.MESSAGE_NULL
    s = comm.Isend(np.full(3, comm.rank, "i"), dest=right, tag=4)
    m = None
    while m is None:
        m = comm.Improbe(MPI.ANY_SOURCE, 4, st)
    assert st.Get_count(MPI.INT) == 3 and st.Get_tag() == 4
    buf = np.zeros(3, "i")
    r = m.Irecv(buf)
    assert not m
    MPI.Request.Waitall([s, r])
    assert (buf == left).all()
    comm.Barrier()
    assert comm.Improbe(left, 4) is None and MPI.Message.Iprobe(comm, left, 4) is None
    comm.send("again", dest=right, tag=8)
    m = MPI.Message.Probe(comm, left, 8)
    req = m.irecv()
    assert req.wait() == "again"


def test_message_no_proc(comm):
    st = MPI.Status()
    m = comm.Mprobe(MPI.PROC_NULL, status=st)
    assert m == MPI.MESSAGE_NO_PROC and m is not MPI.MESSAGE_NO_PROC and m
    assert st.Get_source() == MPI.PROC_NULL and st.Get_tag() == MPI.ANY_TAG
    m.Recv(None)
    assert m == MPI.MESSAGE_NULL
    assert comm.improbe(MPI.PROC_NULL).recv() is None
    MPI.MESSAGE_NO_PROC.Recv(None)
    assert MPI.MESSAGE_NO_PROC  # the predefined one stays itself
    req = MPI.Message(MPI.MESSAGE_NO_PROC).Irecv(None)
    assert req != MPI.REQUEST_NULL and req.Wait() and req == MPI.REQUEST_NULL


# ---- freeing a communicator with operations outstanding ----


def test_free_with_outstanding_iallreduce(comm):
    d = comm.Dup()
    x = np.full(1000, comm.rank + 1.0)
    y = np.zeros(1000)
    req = d.Iallreduce(x, y, op=MPI.SUM)
    d.Free()  # MPI: the communicator goes once its operations completed
    assert d == MPI.COMM_NULL and d.freed
    with pytest.raises(MPI.Exception):
        d.Barrier()
    assert req.Wait() is True and not req
    assert (y == comm.size * (comm.size + 1) / 2).all()
    comm.Barrier()


def test_free_with_outstanding_isend(comm):
    right, left = ring(comm)
    d = comm.Dup()
    reqs = [d.Isend(np.full(8, comm.rank, "i"), right, 1), d.Irecv(np.zeros(8, "i"), left, 1)]
    d.Free()
    MPI.Request.Waitall(reqs)
    comm.Barrier()


# ---- object collectives as mpi4py's ----


def test_scan_exscan_objects(comm):
    r = comm.rank
    assert comm.scan(r + 1) == (r + 1) * (r + 2) // 2
    assert comm.exscan(r + 1) == (None if r == 0 else r * (r + 1) // 2)
    assert comm.scan([r], op=MPI.SUM) == list(range(r + 1))  # lists add in rank order
    assert comm.exscan(r, op=lambda a, b: max(a, b)) == (None if r == 0 else r - 1)
    a = np.full(3, r + 1.0)
    np.testing.assert_array_equal(comm.scan(a), np.full(3, (r + 1) * (r + 2) / 2))
    e = comm.exscan(a, op=MPI.PROD)
    if r:
        np.testing.assert_array_equal(e, np.full(3, float(np.prod(np.arange(1, r + 1)))))
    else:
        assert e is None


def test_maxloc_minloc_and_user_ops_on_objects(comm):
    r, P = comm.rank, comm.size
    values = [5, 9, 9, 1][:P]  # ties go to the lowest rank, as MPI's
    assert comm.allreduce((values[r], r), op=MPI.MAXLOC) == (max(values),
                                                            values.index(max(values)))
    assert comm.allreduce((values[r], r), op=MPI.MINLOC) == (min(values),
                                                            values.index(min(values)))
    concat = MPI.Op.Create(lambda a, b, datatype: a + b, commute=False)
    assert comm.allreduce([r], op=concat) == list(range(P))
    assert comm.reduce(str(r), op=concat, root=P - 1) == ("".join(map(str, range(P)))
                                                          if r == P - 1 else None)
    concat.Free()
    assert comm.allreduce(r % 2 == 0, op=MPI.LAND) == (P == 1)
    assert comm.allreduce(r == 0, op=MPI.LOR) is True
    assert comm.allreduce(r, op=MPI.REPLACE) == P - 1
    assert comm.allreduce(r + 2, op=MPI.AVG) == (sum(range(2, P + 2)) // P)


def test_alltoall_objects(comm):
    r, P = comm.rank, comm.size
    got = comm.alltoall([(r, p) for p in range(P)])
    assert got == [(p, r) for p in range(P)]


def test_persistent_collectives(comm):
    # mpi4py 4's: each Start() runs the call again on the buffers as they are then.
    r, P = comm.rank, comm.size
    x = np.zeros(4)
    y = np.zeros(4)
    ar = comm.Allreduce_init(x, y, op=MPI.SUM)
    b = np.zeros(2, "i")
    bc = comm.Bcast_init(b, root=P - 1)
    g = np.zeros(P, "i")
    ga = comm.Allgather_init(np.array([r], "i"), g)
    sc = np.zeros(1)
    scan = comm.Scan_init(np.array([r + 1.0]), sc)
    bar = comm.Barrier_init()
    reqs = [ar, bc, ga, scan, bar]
    for k in range(4):
        x[:] = r + k
        if r == P - 1:
            b[:] = k
        MPI.Prequest.Startall(reqs)
        MPI.Request.Waitall(reqs)
        assert (y == sum(range(P)) + P * k).all() and (b == k).all()
        assert list(g) == list(range(P)) and sc[0] == (r + 1) * (r + 2) / 2
        assert all(q and q != MPI.REQUEST_NULL for q in reqs)
    for q in reqs:
        q.Free()
    with pytest.raises(NotImplementedError, match="partitioned"):
        comm.Psend_init(bytearray(4), 2, 0)
