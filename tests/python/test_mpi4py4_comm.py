"""from shmcoll import MPI: what mpi4py 4 has of communicators, groups, infos, error handlers,
requests, statuses and messages beyond mpi4py 3.1 (Isendrecv, Request.Get_status_all ...,
pickled handles, the instance forms of Compare ...), and where the two differ the answer of
the version shmcoll/_api.py chose (SHMCOLL_MPI4PY): checked on every rank, at any P."""

from shmcoll import MPI, _api


def ring(comm):
    r, P = comm.rank, comm.size
    return (r + 1) % P, (r - 1) % P


# ---- error classes ----


def test_error_classes_have_open_mpi_numbers(comm):
    # Open MPI's mpi.h: RMA_FLAVOR is 70 and RMA_SHARED 71 (they were the other way round).
    assert (MPI.ERR_RMA_FLAVOR, MPI.ERR_RMA_SHARED) == (70, 71)
    # MPI 4's classes, which mpi4py 4 names, with Open MPI 5's numbers.
    assert (MPI.ERR_PROC_ABORTED, MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING,
            MPI.ERR_REVOKED, MPI.ERR_SESSION, MPI.ERR_VALUE_TOO_LARGE,
            MPI.ERR_ERRHANDLER) == (74, 75, 76, 77, 78, 79, 80)
    assert MPI.Get_error_class(MPI.ERR_ERRHANDLER) == MPI.ERR_ERRHANDLER
    assert MPI.Get_error_string(MPI.ERR_ERRHANDLER).startswith("MPI_ERR_ERRHANDLER: ")
    e = MPI.Exception(MPI.ERR_SESSION)
    assert e.Get_error_class() == MPI.ERR_SESSION and e.error_string.startswith(
        "MPI_ERR_SESSION: ")
    assert max(MPI.ERR_ERRHANDLER, MPI.ERR_RMA_SHARED) < MPI.ERR_LASTCODE


# ---- requests: Waitsome's statuses, Get_status_all/any/some ----


def _tags(statuses):
    return [(s.Get_source(), s.Get_tag()) for s in statuses]


def test_waitsome_fills_a_status_per_completed_request(comm):
    # mpi4py 3.1.4 and 4 alike: the list grows to the completions' number, and the statuses
    # after them, up to the requests' number, become empty; those beyond stay as they were.
    right, left = ring(comm)
    bufs = [bytearray(4) for _ in range(3)]
    reqs = [comm.Irecv(b, left, tag) for b, tag in zip(bufs, (1, 2, 3))]
    comm.Barrier()  # every receive is posted before anything is sent
    comm.Send(b"abcd", right, 2)
    st = []
    assert MPI.Request.Waitsome(reqs, st) == [1]
    assert len(st) == 1 and _tags(st) == [(left, 2)] and st[0].Get_count() == 4
    comm.Barrier()  # the left neighbour's next message only after this Waitsome
    comm.Send(b"efgh", right, 3)
    st = [MPI.Status() for _ in range(5)]
    for s in st:
        s.Set_tag(99)
    done = None
    while not done:
        done = MPI.Request.Testsome(reqs, st)
    assert done == [2] and len(st) == 5
    assert _tags(st) == [(left, 3), (MPI.ANY_SOURCE, MPI.ANY_TAG), (MPI.ANY_SOURCE, MPI.ANY_TAG),
                         (MPI.ANY_SOURCE, 99), (MPI.ANY_SOURCE, 99)]
    comm.Barrier()
    comm.Send(b"ijkl", right, 1)
    MPI.Request.Waitall(reqs)
    assert bytes(bufs[0]) == b"ijkl" and MPI.Request.Waitsome(reqs, st) is None
    comm.Barrier()


def test_object_waitsome_fills_a_status_per_completed_request(comm):
    right, left = ring(comm)
    reqs = [comm.irecv(source=left, tag=tag) for tag in (4, 5, 6)]
    comm.Barrier()
    comm.send("x", right, 5)
    st = []
    idx, objs = MPI.Request.waitsome(reqs, st)
    assert (idx, objs) == ([1], ["x"]) and _tags(st) == [(left, 5)]
    comm.Barrier()
    comm.send("y", right, 6)
    st = [MPI.Status() for _ in range(4)]
    for s in st:
        s.Set_tag(99)
    idx = None
    while not idx:
        idx, objs = MPI.Request.testsome(reqs, st)
    assert (idx, objs) == ([2], ["y"])
    assert _tags(st) == [(left, 6), (MPI.ANY_SOURCE, MPI.ANY_TAG), (MPI.ANY_SOURCE, MPI.ANY_TAG),
                         (MPI.ANY_SOURCE, 99)]
    comm.Barrier()
    comm.send("z", right, 4)
    assert MPI.Request.waitall(reqs) == ["z", None, None]
    comm.Barrier()


def test_get_status_all_any_some_complete_nothing(comm):
    right, left = ring(comm)
    rbuf = bytearray(3)
    r = comm.Irecv(rbuf, left, 11)
    o = comm.irecv(source=left, tag=12)
    st = MPI.Status()
    sts = []
    # Nothing sent yet: nothing is complete, and no status is touched.
    for reqs in ([r], [o], [None, r, o]):
        assert MPI.Request.Get_status_all(reqs, sts) is False and sts == []
        assert MPI.Request.Get_status_any(reqs, st) == (MPI.UNDEFINED, False)
        assert MPI.Request.Get_status_some(reqs, sts) == [] and sts == []
    assert st.Get_tag() == MPI.ANY_TAG
    comm.Barrier()
    s = comm.Isend(b"abc", right, 11)
    while not MPI.Request.Get_status_all([r, s], sts):
        pass
    assert len(sts) == 2 and _tags(sts) == [(left, 11), (MPI.ANY_SOURCE, MPI.ANY_TAG)]
    assert sts[0].Get_count() == 3 and sts[0].Get_error() == MPI.SUCCESS
    # Still to be completed by Wait or Test, as MPI_Request_get_status leaves them.
    assert r and s and r != MPI.REQUEST_NULL
    assert MPI.Request.Get_status_any([None, r, s], st) == (1, True)
    assert (st.Get_source(), st.Get_tag(), st.Get_count()) == (left, 11, 3)
    sts = []
    assert MPI.Request.Get_status_some([None, r, s, o], sts) == [1, 2]
    assert len(sts) == 2 and _tags(sts)[0] == (left, 11)
    assert MPI.Request.get_status_some([s]) == [0] and MPI.Request.get_status_all([r, s])
    assert MPI.Request.get_status_any([o, r]) == (1, True)
    assert r.Wait() and s.Wait() and not r and not s and bytes(rbuf) == b"abc"
    # The object receive: its Get_status answers for it.
    comm.Barrier()  # every rank looked at its object receive before it can complete
    comm.send(("obj", comm.rank), right, 12)
    while MPI.Request.Get_status_any([o], st) != (0, True):
        pass
    assert (st.Get_source(), st.Get_tag()) == (left, 12) and o
    assert o.wait() == ("obj", left) and not o
    comm.Barrier()


def test_get_status_of_inactive_requests(comm):
    reqs = [MPI.Request(), None, MPI.REQUEST_NULL]
    sts = [MPI.Status() for _ in range(3)]
    for s in sts:
        s.Set_source(0)
        s.Set_tag(0)
        s.Set_error(MPI.ERR_OTHER)
    assert MPI.Request.Get_status_all(reqs, sts) is True
    assert _tags(sts) == [(MPI.ANY_SOURCE, MPI.ANY_TAG)] * 3
    assert [s.Get_error() for s in sts] == [MPI.SUCCESS] * 3
    st = sts[0]
    st.Set_tag(5)
    assert MPI.Request.Get_status_any(reqs, st) == (MPI.UNDEFINED, True)
    assert st.Get_tag() == MPI.ANY_TAG
    assert MPI.Request.Get_status_some(reqs, sts) is None and len(sts) == 3
    p = comm.Recv_init(bytearray(1), MPI.PROC_NULL)  # persistent, not started: inactive
    assert MPI.Request.Get_status_all([p]) and MPI.Request.Get_status_some([p]) is None
    p.Free()


def test_failed_request_fills_its_status_and_raises_its_error(comm):
    # The status is filled before the error is raised (filling it after raised SystemError).
    right, left = ring(comm)
    r = comm.Irecv(bytearray(2), left, 13)
    comm.Barrier()
    comm.Send(b"abcd", right, 13)
    st = MPI.Status()
    try:
        r.Wait(st)
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE
    else:
        raise AssertionError("a cut message did not raise")
    assert (st.Get_source(), st.Get_tag(), st.Get_error()) == (left, 13, MPI.ERR_TRUNCATE)
    assert not r
