"""from shmcoll import MPI: mpi4py's names and buffer forms, written the way mpi4py programs
are; and the variable-count calls against NumPy references on every rank."""

import numpy as np

from shmcoll import MPI


def test_module_names(comm):
    world = MPI.COMM_WORLD
    assert world is MPI.COMM_WORLD  # made once
    assert world.Get_size() == comm.size and world.Get_rank() == comm.rank
    assert MPI.COMM_SELF.Get_size() == 1
    assert MPI.DOUBLE.Get_size() == 8 and MPI.INT.Get_size() == 4 and MPI.BYTE.Get_size() == 1
    assert isinstance(comm, MPI.Intracomm)
    t0 = MPI.Wtime()
    assert MPI.Wtime() >= t0 and MPI.Wtick() > 0
    assert isinstance(MPI.Get_processor_name(), str)
    MPI.Finalize()  # safe, and nothing stops working
    x = np.ones(2)
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
    assert (x == comm.size).all()


def test_tags_as_channels_and_proc_null(comm):
    # The classic halo exchange: send right, receive left; the edges talk to PROC_NULL.
    r, P = comm.rank, comm.size
    right = r + 1 if r + 1 < P else MPI.PROC_NULL
    left = r - 1 if r > 0 else MPI.PROC_NULL
    halo = np.full(3, -1.0)
    st = MPI.Status()
    comm.Sendrecv(np.full(3, float(r)), dest=right, sendtag=11, recvbuf=halo, source=left,
                  recvtag=11, status=st)
    if left == MPI.PROC_NULL:
        assert (halo == -1).all() and st.Get_source() == MPI.PROC_NULL
    else:
        assert (halo == left).all() and st.Get_source() == left and st.Get_tag() == 11
    comm.Send(np.zeros(1), dest=MPI.PROC_NULL)
    comm.Recv(np.zeros(1), source=MPI.PROC_NULL)


def test_isend_irecv_waitall(comm):
    # Every rank sends every other rank a message of its own; tags say from whom.
    r, P = comm.rank, comm.size
    bufs = [np.zeros(4, "i") for _ in range(P)]
    reqs = [comm.Irecv([bufs[p], MPI.INT], source=p, tag=p) for p in range(P) if p != r]
    reqs += [comm.Isend([np.full(4, 100 * r + p, "i"), MPI.INT], dest=p, tag=r)
             for p in range(P) if p != r]
    MPI.Request.Waitall(reqs)
    for p in range(P):
        if p != r:
            assert (bufs[p] == 100 * p + r).all()


def test_allgatherv_gatherv_scatterv(comm):
    r, P = comm.rank, comm.size
    counts = [p + 1 for p in range(P)]
    displs = [sum(counts[:p]) + 2 * p for p in range(P)]  # gaps between the blocks
    total = displs[-1] + counts[-1] + 3
    mine = np.full(counts[r], r + 0.5)
    out = np.full(total, -9.0)
    comm.Allgatherv(mine, [out, counts, displs, MPI.DOUBLE])
    want = np.full(total, -9.0)
    for p in range(P):
        want[displs[p] : displs[p] + counts[p]] = p + 0.5
    np.testing.assert_array_equal(out, want)  # the gaps untouched

    root = P - 1
    g = np.full(total, -9.0) if r == root else None
    comm.Gatherv(mine, [g, (counts, displs), MPI.DOUBLE] if r == root else None, root=root)
    if r == root:
        np.testing.assert_array_equal(g, want)

    src = np.arange(sum(counts), dtype="int64") if r == 0 else None
    part = np.zeros(counts[r], "int64")
    comm.Scatterv([src, counts, MPI.INT64_T] if r == 0 else None, part, root=0)
    start = sum(counts[:r])
    np.testing.assert_array_equal(part, np.arange(start, start + counts[r]))


def test_alltoallv_uneven(comm):
    # Rank r sends q + r + 1 elements of value 1000 r + q to rank q (mixture-of-experts
    # routing with uneven token counts); counts exchanged first with Alltoall.
    r, P = comm.rank, comm.size
    scounts = np.array([q + r + 1 for q in range(P)], "int64")
    rcounts = np.zeros(P, "int64")
    comm.Alltoall(scounts, rcounts)
    np.testing.assert_array_equal(rcounts, [r + p + 1 for p in range(P)])
    sdispls = np.concatenate([[0], np.cumsum(scounts)[:-1]])
    rdispls = np.concatenate([[0], np.cumsum(rcounts)[:-1]])
    send = np.concatenate([np.full(scounts[q], 1000 * r + q, "float32") for q in range(P)])
    recv = np.zeros(rcounts.sum(), "float32")
    comm.Alltoallv([send, (scounts, sdispls), MPI.FLOAT], [recv, (rcounts, rdispls), MPI.FLOAT])
    want = np.concatenate([np.full(rcounts[p], 1000 * p + r, "float32") for p in range(P)])
    np.testing.assert_array_equal(recv, want)


def test_reduce_scatter(comm):
    r, P = comm.rank, comm.size
    counts = [2 * p + 1 for p in range(P)]
    n = sum(counts)
    send = np.arange(n, dtype="int32") * (r + 1)
    recv = np.zeros(counts[r], "int32")
    comm.Reduce_scatter(send, recv, recvcounts=counts, op=MPI.SUM)
    total = np.arange(n, dtype="int32") * sum(p + 1 for p in range(P))
    start = sum(counts[:r])
    np.testing.assert_array_equal(recv, total[start : start + counts[r]])
    # Counts left out: every rank's receive buffer's.
    recv2 = np.zeros(counts[r], "int32")
    comm.Reduce_scatter(send, recv2, op=MPI.SUM)
    np.testing.assert_array_equal(recv2, recv)
    # In place: the input in recvbuf, this rank's block at its start.
    buf = send.copy()
    comm.Reduce_scatter(MPI.IN_PLACE, buf, recvcounts=counts, op=MPI.SUM)
    np.testing.assert_array_equal(buf[: counts[r]], recv)


def test_vector_blocks_past_the_end_raise(comm):
    out = np.zeros(comm.size)
    try:
        comm.Allgatherv(np.zeros(1), [out, [1] * comm.size, [comm.size] * comm.size, MPI.DOUBLE])
    except ValueError:
        pass
    else:
        raise AssertionError("a block past the end of recvbuf was accepted")
