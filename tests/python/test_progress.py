"""MPI's progress rule from Python: while a rank waits on any request, every operation it has
outstanding moves, on every communicator. Ranks wait in different orders on large
non-blocking collectives of several communicators; without the rule each would wait for a
peer that waits for it (until the timeout). Nothing here depends on timing."""

import numpy as np
import pytest

from shmcoll import MPI

N = 1 << 20  # 8 MiB of float64: a collective of many steps, not one that completes at once


def test_waits_in_opposite_orders_on_two_communicators(comm):
    if comm.size < 2:
        pytest.skip("needs two ranks")
    a, b = comm.Dup(), comm.Dup()
    try:
        x = np.full(N, comm.rank + 1.0)
        y = np.full(N, 2.0 * (comm.rank + 1))
        ra = a.Iallreduce(MPI.IN_PLACE, x)
        rb = b.Iallreduce(MPI.IN_PLACE, y)
        # Even ranks wait on a first, odd ranks on b first.
        first, second = (ra, rb) if comm.rank % 2 == 0 else (rb, ra)
        assert first.Wait() is True
        assert second.Wait() is True
        total = comm.size * (comm.size + 1) / 2
        assert (x == total).all() and (y == 2 * total).all()
    finally:
        a.Free()
        b.Free()


def test_waitall_any_some_over_communicators(comm):
    if comm.size < 2:
        pytest.skip("needs two ranks")
    comms = [comm.Dup() for _ in range(3)]
    try:
        bufs = [np.full(N // 4, float(comm.rank + k)) for k in range(3)]
        reqs = [c.Iallreduce(MPI.IN_PLACE, buf) for c, buf in zip(comms, bufs)]
        reqs.append(comms[0].Ibarrier())
        # Every rank takes them in its own order: Waitany here, Waitsome there.
        if comm.rank % 2:
            done = []
            while len(done) < len(reqs):
                done += MPI.Request.Waitsome(reqs) or []
        else:
            for _ in range(len(reqs)):
                assert MPI.Request.Waitany(reqs) != MPI.UNDEFINED
        assert all(not r for r in reqs)
        for k, buf in enumerate(bufs):
            assert (buf == sum(p + k for p in range(comm.size))).all()
    finally:
        for c in comms:
            c.Free()


def test_blocking_collective_beside_a_pending_one(comm):
    # Rank 0 blocks in a barrier of one communicator while the others first wait on an
    # ibcast of another, which needs rank 0's progress there: the barrier's wait moves it.
    if comm.size < 2:
        pytest.skip("needs two ranks")
    a, b = comm.Dup(), comm.Dup()
    try:
        data = np.arange(N // 8, dtype="f8") if comm.rank == 0 else np.zeros(N // 8)
        req = b.Ibcast(data, root=0)
        if comm.rank == 0:
            a.Barrier()
            req.Wait()
        else:
            req.Wait()
            a.Barrier()
        np.testing.assert_array_equal(data, np.arange(N // 8, dtype="f8"))
    finally:
        a.Free()
        b.Free()
