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
    # The blocking receive likewise.
    comm.Send(b"efgh", right, 14)
    st = MPI.Status()
    try:
        comm.Recv(bytearray(3), left, 14, st)
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE
    else:
        raise AssertionError("a cut message did not raise")
    assert (st.Get_source(), st.Get_tag(), st.Get_count()) == (left, 14, 3)


# ---- Isendrecv, Isendrecv_replace ----


def test_isendrecv_ring(comm):
    import numpy as np

    right, left = ring(comm)
    for dtype in ("i1", "i4", "f8", "c16"):
        for n in (0, 1, 7, 5000):  # up to beyond the eager size
            sbuf = np.arange(n, dtype=dtype) + comm.rank
            rbuf = np.full(n + 1, -1, dtype=dtype)
            st = MPI.Status()
            req = comm.Isendrecv(sbuf, right, 3, [rbuf, n], left, 3)
            assert isinstance(req, MPI.Request) and req
            assert req.Wait(st) is True and not req and req == MPI.REQUEST_NULL
            np.testing.assert_array_equal(rbuf[:n], np.arange(n, dtype=dtype) + left)
            assert rbuf[n] == -1
            assert (st.Get_source(), st.Get_tag()) == (left, 3)
            assert st.Get_count(MPI._typedict[np.dtype(dtype).char]) == n
    # Keywords, and a wildcard receive.
    got = bytearray(2)
    req = comm.Isendrecv(sendbuf=b"ab", dest=right, sendtag=4, recvbuf=got,
                         source=MPI.ANY_SOURCE, recvtag=MPI.ANY_TAG)
    st = MPI.Status()
    while not req.Test(st):
        pass
    assert got == b"ab" and (st.source, st.tag) == (left, 4)


def test_isendrecv_derived_datatypes(comm):
    # Both sides non-contiguous: the packed send and the receive's scratch share the call's
    # scratch until the request completes.
    import numpy as np

    right, left = ring(comm)
    vec = MPI.INT.Create_vector(4, 1, 3).Commit()
    try:
        sbuf = np.arange(12, dtype="i") + 100 * comm.rank
        rbuf = np.full(12, -1, dtype="i")
        req = comm.Isendrecv([sbuf, 1, vec], right, 5, [rbuf, 1, vec], left, 5)
        sbuf[:] = -7  # the message was packed when the call started
        MPI.Request.Waitall([req])
        want = np.full(12, -1, dtype="i")
        want[::3] = np.arange(0, 12, 3) + 100 * left
        np.testing.assert_array_equal(rbuf, want)
        # A contiguous send into a non-contiguous receive, and the other way round.
        rbuf[:] = -1
        comm.Isendrecv(np.arange(4, dtype="i") + comm.rank, right, 6,
                       [rbuf, 1, vec], left, 6).Wait()
        np.testing.assert_array_equal(rbuf[::3], np.arange(4) + left)
        out = np.zeros(4, dtype="i")
        comm.Isendrecv([np.arange(12, dtype="i") + comm.rank, 1, vec], right, 7,
                       out, left, 7).Wait()
        np.testing.assert_array_equal(out, np.arange(0, 12, 3) + left)
    finally:
        vec.Free()


def test_isendrecv_replace(comm):
    import numpy as np

    right, left = ring(comm)
    for n in (0, 1, 3000):
        buf = np.full(n, comm.rank, dtype="f8")
        st = MPI.Status()
        req = comm.Isendrecv_replace(buf, right, 8, left, 8)
        assert req.Wait(st)
        assert (buf == left).all()
        assert (st.Get_source(), st.Get_count(MPI.DOUBLE)) == (left, n)
    vec = MPI.DOUBLE.Create_vector(3, 1, 2).Commit()
    try:
        buf = np.arange(6.0) + 10 * comm.rank
        req = comm.Isendrecv_replace([buf, 1, vec], dest=right, sendtag=9, source=left,
                                     recvtag=9)
        req.Wait()
        want = np.arange(6.0) + 10 * comm.rank
        want[::2] = np.arange(0.0, 6.0, 2) + 10 * left
        np.testing.assert_array_equal(buf, want)
    finally:
        vec.Free()


def test_isendrecv_proc_null(comm):
    right, left = ring(comm)
    st = MPI.Status()
    comm.Isendrecv(None, MPI.PROC_NULL, 0, None, MPI.PROC_NULL, 0).Wait(st)
    assert (st.source, st.tag, st.Get_count()) == (MPI.PROC_NULL, MPI.ANY_TAG, 0)
    comm.Isendrecv_replace(None, MPI.PROC_NULL, 0, MPI.PROC_NULL, 0).Wait(st)
    assert st.source == MPI.PROC_NULL
    # A send alone: the status is PROC_NULL's receive's.
    req = comm.Isendrecv(b"xy", right, 1, None, MPI.PROC_NULL)
    got = bytearray(2)
    comm.Recv(got, left, 1)
    req.Wait(st)
    assert got == b"xy" and st.source == MPI.PROC_NULL
    buf = bytearray(b"zw")
    req = comm.Isendrecv_replace(buf, right, 2, MPI.PROC_NULL)
    comm.Recv(got, left, 2)
    req.Wait(st)
    assert got == b"zw" and buf == b"zw" and st.source == MPI.PROC_NULL
    # A receive alone.
    req = comm.Isendrecv(None, MPI.PROC_NULL, 0, got, left, 3)
    comm.Send(b"uv", right, 3)
    req.Wait(st)
    assert got == b"uv" and (st.source, st.tag) == (left, 3)
    buf = bytearray(2)
    req = comm.Isendrecv_replace(buf, MPI.PROC_NULL, 0, left, 4)
    comm.Send(b"rs", right, 4)
    req.Wait()
    assert buf == b"rs"


def test_isendrecv_bad_dest_starts_nothing(comm):
    right, left = ring(comm)
    for call in (lambda: comm.Isendrecv(b"a", comm.size, 0, bytearray(1), left, 0),
                 lambda: comm.Isendrecv(b"a", right, -5, bytearray(1), left, 0),
                 lambda: comm.Isendrecv_replace(bytearray(1), -7, 0, left, 0)):
        try:
            call()
        except MPI.Exception as e:
            assert e.Get_error_class() in (MPI.ERR_RANK, MPI.ERR_TAG)
        else:
            raise AssertionError("a bad dest or tag did not raise")
    # No receive was left posted: the next message from the left goes where it is meant.
    got = bytearray(1)
    req = comm.Irecv(got, left, 0)
    comm.Send(b"b", right, 0)
    req.Wait()
    assert got == b"b"


def test_isendrecv_moves_while_its_rank_blocks_elsewhere(comm):
    # Rank 0 blocks in a barrier of one communicator while the others wait on Isendrecvs of
    # another, which need rank 0's part: the barrier's wait moves it (the progress rule).
    import numpy as np

    a, b = comm.Dup(), comm.Dup()
    try:
        right, left = ring(b)
        n = 1 << 17  # 1 MiB of float64: far beyond the eager size
        sbuf = np.full(n, float(b.rank))
        rbuf = np.zeros(n)
        req = b.Isendrecv(sbuf, right, 1, rbuf, left, 1)
        other = b.Isendrecv_replace(np.full(n, float(b.rank)), right, 2, left, 2)
        if b.rank == 0:
            a.Barrier()
            assert MPI.Request.Waitany([req, other]) in (0, 1)
            MPI.Request.Waitall([req, other])
        else:
            MPI.Request.Waitall([req, other])
            a.Barrier()
        assert (rbuf == left).all() and not req and not other
    finally:
        a.Free()
        b.Free()


# ---- Compare and Translate_ranks: mpi4py 3's classmethods and 4's methods ----


def test_compare_as_classmethod_and_as_method(comm):
    world = MPI.COMM_WORLD
    dup = comm.Dup()
    try:
        for c1, c2, want in ((comm, comm, MPI.IDENT), (comm, dup, MPI.CONGRUENT),
                             (world, comm, MPI.CONGRUENT)):
            assert c1.Compare(c2) == want  # mpi4py 4
            assert c1.Compare(comm=c2) == want
            assert MPI.Comm.Compare(c1, c2) == want  # mpi4py 3 (and 4 through the class)
            assert MPI.Intracomm.Compare(comm1=c1, comm2=c2) == want
            assert MPI.COMM_SELF.Compare(c1, c2) == want  # 3's classmethod via an instance
        if comm.size > 1:
            assert comm.Compare(MPI.COMM_SELF) == MPI.UNEQUAL
            rev = comm.Split(0, -comm.rank)
            assert comm.Compare(rev) == MPI.SIMILAR
            rev.Free()
        for bad in (lambda: MPI.COMM_NULL.Compare(comm), lambda: comm.Compare(MPI.COMM_NULL)):
            try:
                bad()
            except MPI.Exception as e:
                assert e.Get_error_class() == MPI.ERR_COMM
            else:
                raise AssertionError("COMM_NULL compared")
    finally:
        dup.Free()
    g = comm.Get_group()
    assert g.Compare(g) == MPI.IDENT == MPI.Group.Compare(g, g)
    assert g.Compare(group=MPI.GROUP_EMPTY) == MPI.UNEQUAL
    assert MPI.GROUP_EMPTY.Compare(MPI.GROUP_EMPTY) == MPI.IDENT
    assert MPI.GROUP_EMPTY.Compare(g, g) == MPI.IDENT
    assert MPI.Group.Compare(group1=g, group2=MPI.GROUP_EMPTY) == MPI.UNEQUAL
    if comm.size > 1:
        assert g.Compare(g.Incl(list(range(comm.size))[::-1])) == MPI.SIMILAR


def test_translate_ranks_both_forms(comm):
    g = comm.Get_group()
    w = MPI.COMM_WORLD.Get_group()
    mine = list(range(comm.size))
    world = MPI.Group.Translate_ranks(g, mine, w)
    assert world == list(range(comm.size))  # a Dup of the world
    # mpi4py 4: a method, ranks=None (all of them), group=None (the world's group).
    assert g.Translate_ranks() == world
    assert g.Translate_ranks(group=g) == mine
    assert g.Translate_ranks(ranks=[0], group=w) == world[:1]
    assert g.Translate_ranks(mine[::-1], w) == world[::-1]
    assert MPI.GROUP_EMPTY.Translate_ranks() == []
    assert MPI.GROUP_EMPTY.Translate_ranks(group=g) == []
    # mpi4py 3: a classmethod, also through an instance and by its keywords.
    assert MPI.Group.Translate_ranks(g, [0], g) == [0]
    assert w.Translate_ranks(g, mine) == world
    assert MPI.Group.Translate_ranks(group1=g, ranks1=mine, group2=g) == mine
    assert MPI.Group.Translate_ranks(g, [MPI.PROC_NULL]) == [MPI.PROC_NULL]
    sub = g.Incl([comm.rank])
    assert sub.Translate_ranks(group=g) == [comm.rank]
    assert g.Translate_ranks(mine, sub) == [0 if r == comm.rank else MPI.UNDEFINED
                                            for r in mine]
    try:
        g.Translate_ranks(mine, ranks=mine)
    except TypeError:
        pass
    else:
        raise AssertionError("ranks given twice")


# ---- names, recv(buf), the communicator locks ----


def test_null_communicator_name(comm):
    dup = comm.Dup()
    dup.Free()
    for null in (MPI.COMM_NULL, MPI.Comm(), MPI.Intracomm(), MPI.Intercomm(), dup):
        if _api.MAJOR >= 4:  # mpi4py 4 over Open MPI 5
            assert null.Get_name() == "MPI_COMM_NULL" and null.name == "MPI_COMM_NULL"
        else:  # mpi4py 3.1.4 over Open MPI 4.1
            try:
                null.Get_name()
            except MPI.Exception as e:
                assert e.Get_error_class() == MPI.ERR_COMM
            else:
                raise AssertionError("COMM_NULL has a name as mpi4py 3")
        try:
            null.Set_name("x")  # both: a null communicator takes no name
        except MPI.Exception as e:
            assert e.Get_error_class() == MPI.ERR_COMM
        else:
            raise AssertionError("COMM_NULL took a name")
    assert MPI.COMM_WORLD.Get_name() == "MPI_COMM_WORLD" and comm.Get_name() == ""


def _warns_buf(fn):
    import warnings

    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        res = fn()
    assert [(w.category, str(w.message)) for w in got] == [
        (UserWarning, "the 'buf' argument is deprecated")]
    return res


def test_recv_with_a_buffer_warns_and_receives_into_it(comm):
    # mpi4py 3.1.4 and 4 alike: a UserWarning, then the message received into buf (an int:
    # that many bytes); one that does not fit raises ERR_TRUNCATE.
    import warnings

    right, left = ring(comm)
    assert _warns_buf(lambda: comm.recv(bytearray(0), MPI.PROC_NULL)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            comm.recv(bytearray(8), MPI.PROC_NULL)
        except UserWarning:
            pass
        else:
            raise AssertionError("no warning")
        assert comm.recv(None, MPI.PROC_NULL) is None  # no buf: no warning
    comm.send(("a", comm.rank), right, 1)
    assert _warns_buf(lambda: comm.recv(128, left, 1)) == ("a", left)
    buf = bytearray(128)
    st = MPI.Status()
    comm.send([comm.rank], right, 2)
    assert _warns_buf(lambda: comm.recv(buf, left, 2, st)) == [left]
    import pickle

    assert bytes(buf[: st.Get_count()]) == pickle.dumps([left], pickle.HIGHEST_PROTOCOL)
    assert (st.Get_source(), st.Get_tag()) == (left, 2)
    # sendrecv's recvbuf is recv's buf.
    assert _warns_buf(lambda: comm.sendrecv("s", right, 3, bytearray(64), left, 3)) == "s"
    # Too small: the message is cut, and taken.
    comm.send("x" * 100, right, 4)
    try:
        _warns_buf(lambda: comm.recv(8, left, 4))
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE
    else:
        raise AssertionError("a cut message did not raise")
    comm.Barrier()
    assert not comm.iprobe(left, 4)
    # Not a writable buffer.
    for bad, exc in ((b"x" * 64, BufferError), ("x", TypeError)):
        try:
            _warns_buf(lambda: comm.recv(bad, left, 5))
        except exc:
            pass
        else:
            raise AssertionError("%r taken as a receive buffer" % (bad,))
    # With object receives queued, they take their messages first.
    early = comm.irecv(source=left, tag=6)
    comm.send("first", right, 6)
    comm.send("second", right, 6)
    assert _warns_buf(lambda: comm.recv(bytearray(64), left, 6)) == "second"
    assert early.wait() == "first"
    early = comm.irecv(source=left, tag=7)
    comm.send("y", right, 7)
    comm.send("z" * 100, right, 7)
    try:
        _warns_buf(lambda: comm.recv(16, left, 7))
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_TRUNCATE
    else:
        raise AssertionError("a cut message did not raise")
    assert early.wait() == "y"
    comm.Barrier()


def test_comm_lock_table(comm):
    import threading

    dup = comm.Dup()
    try:
        table = MPI._comm_lock_table(dup)
        assert isinstance(table, dict) and "bcast" not in table
        assert MPI._lock_table(dup) is table and MPI._comm_lock_table(MPI.Comm(dup)) is table
        assert dup.bcast("b", root=0) == "b"
        lock_type = type(threading.Lock())
        assert isinstance(table["bcast"], lock_type) and not table["bcast"].locked()
        for call in (lambda: dup.gather(1), lambda: dup.scatter(None if dup.rank else
                                                                 list(range(dup.size))),
                     lambda: dup.allgather(1), lambda: dup.alltoall(list(range(dup.size))),
                     lambda: dup.allreduce(1), lambda: dup.reduce(1), lambda: dup.scan(1),
                     lambda: dup.exscan(1)):
            call()
        assert {"gather", "scatter", "allgather", "alltoall", "allreduce", "reduce", "scan",
                "exscan"} <= set(table)
        assert MPI._comm_lock(dup, "bcast") is table["bcast"]
        mine = MPI._comm_lock(dup)
        assert table[None] is mine and isinstance(mine, lock_type)
        # A bcast waits for another thread's turn with the lock.
        with table["bcast"]:
            t = threading.Thread(target=dup.bcast, args=(None,))
            t.start()
            t.join(0.05)
            assert t.is_alive()
        t.join()
    finally:
        dup.Free()
    try:
        MPI._comm_lock_table(dup)
    except MPI.Exception as e:
        assert e.Get_error_class() == MPI.ERR_COMM
    else:
        raise AssertionError("a freed communicator has locks")


# ---- Info ----


def test_info_null_mapping_methods(comm):
    null = MPI.INFO_NULL
    for fn in (lambda: null.update([]), lambda: null.update({}), lambda: null.update(a="1"),
               lambda: null.popitem(), lambda: null.pop("k"), lambda: null["k"],
               lambda: null.__setitem__("k", "v"), lambda: null.__delitem__("k")):
        try:
            fn()
        except KeyError:
            pass
        else:
            raise AssertionError("INFO_NULL took it")
    copy = null.copy()
    assert copy == null and copy is not null and not copy
    assert null.pop("k", 5) == 5 and null.get("k", 3) == 3 and null.clear() is None
    assert (null.keys(), null.values(), null.items(), len(null)) == ([], [], [], 0)


def test_info_create_env(comm):
    import sys

    keys = ("command", "argv", "maxprocs", "soft", "host", "arch", "wdir", "thread_level")
    env = MPI.Info.Create_env()
    try:
        assert env and env != MPI.INFO_ENV
        for k in keys:
            assert env.Get(k) == MPI.INFO_ENV.Get(k)
        env.Set("mine", "1")  # a new info object of the program's, unlike INFO_ENV
        dup = env.Dup()
        assert dup.items() == env.items()
        dup.Free()
    finally:
        env.Free()
    for args, command, argv in ((None, MPI.INFO_ENV.Get("command"), MPI.INFO_ENV.Get("argv")),
                                ([], "", ""), ((), "", ""), (sys.executable, sys.executable, ""),
                                ([sys.executable, "-c", "pass"], sys.executable, "-c pass")):
        for env in (MPI.Info.Create_env(args), MPI.Info.Create_env(args=args)):
            assert (env.Get("command"), env.Get("argv")) == (command, argv)
            assert env.Get("maxprocs") == MPI.INFO_ENV.Get("maxprocs")
            env.Free()
    try:
        MPI.Info.Create_env([1, 2])
    except TypeError:
        pass
    else:
        raise AssertionError("args of ints")


# ---- pickling of handles ----


def _roundtrip(obj):
    import pickle

    outs = [pickle.loads(pickle.dumps(obj, p)) for p in range(pickle.HIGHEST_PROTOCOL + 1)]
    assert all(type(o) is type(outs[0]) for o in outs)
    return outs


def _cannot_pickle(obj):
    import pickle

    exc = ValueError if _api.MAJOR >= 4 else TypeError  # mpi4py 3's handles never pickle
    for p in range(pickle.HIGHEST_PROTOCOL + 1):
        try:
            pickle.dumps(obj, p)
        except exc:
            pass
        else:
            raise AssertionError("%r pickled" % (obj,))


def test_predefined_handles_unpickle_to_themselves(comm):
    for name in ("COMM_NULL", "COMM_WORLD", "COMM_SELF", "GROUP_NULL", "GROUP_EMPTY",
                 "INFO_NULL", "INFO_ENV", "ERRHANDLER_NULL", "ERRORS_RETURN", "ERRORS_ABORT",
                 "ERRORS_ARE_FATAL", "MESSAGE_NULL", "MESSAGE_NO_PROC", "REQUEST_NULL",
                 "WIN_NULL", "FILE_NULL", "SESSION_NULL"):
        h = getattr(MPI, name)
        assert all(o is h for o in _roundtrip(h)), name


def test_handles_equal_to_predefined_ones_unpickle_to_equal_handles(comm):
    dup = comm.Dup()
    dup.Free()
    done = comm.Isend(b"", MPI.PROC_NULL)
    done.Wait()
    pre = comm.Send_init(b"", MPI.PROC_NULL)
    pre.Free()
    obj = comm.isend(None, MPI.PROC_NULL)
    obj.wait()
    for h, cls in ((MPI.Comm(MPI.COMM_NULL), MPI.Comm), (MPI.Intracomm(MPI.COMM_WORLD),
                   MPI.Intracomm), (MPI.Comm(MPI.COMM_SELF), MPI.Comm), (dup, MPI.Intracomm),
                   (MPI.Intercomm(), MPI.Intercomm), (MPI.Group(MPI.GROUP_NULL), MPI.Group),
                   (MPI.Group(MPI.GROUP_EMPTY), MPI.Group), (comm.group.Incl([]), MPI.Group),
                   (MPI.Info(), MPI.Info), (MPI.Info(MPI.INFO_ENV), MPI.Info),
                   (MPI.Errhandler(MPI.ERRORS_RETURN), MPI.Errhandler),
                   (MPI.Message(MPI.MESSAGE_NO_PROC), MPI.Message), (MPI.Message(), MPI.Message),
                   (MPI.Request(), MPI.Request), (done, MPI.Request), (pre, MPI.Prequest),
                   (obj, MPI.Request), (MPI.Win(), MPI.Win)):
        for o in _roundtrip(h):
            assert type(o) is cls and o == h and o is not h, (h, o)
    assert _roundtrip(MPI.Intracomm(MPI.COMM_WORLD))[0].Get_size() == MPI.COMM_WORLD.size


def test_other_handles_do_not_pickle(comm):
    right, left = ring(comm)
    _cannot_pickle(comm)
    _cannot_pickle(MPI.Intracomm(comm))
    _cannot_pickle(comm.Get_group())
    _cannot_pickle(MPI.COMM_WORLD.Get_group())
    req = comm.Irecv(bytearray(1), left, 3)
    _cannot_pickle(req)
    pre = comm.Recv_init(bytearray(1), MPI.PROC_NULL)  # not null, though inactive
    _cannot_pickle(pre)
    pre.Free()
    comm.Send(b"x", right, 4)
    msg = comm.Mprobe(left, 4)
    _cannot_pickle(msg)
    msg.Recv(bytearray(1))
    comm.Send(b"y", right, 3)
    req.Wait()
    # A status, and an info of the program's (as a new info of its items), pickle.
    info = MPI.Info.Create({"a": "1", "b": "2"})
    for o in _roundtrip(info):
        assert o.items() == [("a", "1"), ("b", "2")] and o != info
        o.Free()
    info.Free()
    st = MPI.Status()
    st.Set_source(1)
    st.Set_tag(2)
    assert [(o.source, o.tag) for o in _roundtrip(st)][0] == (1, 2)
