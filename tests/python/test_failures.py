"""A rank that raises, and a rank killed with SIGKILL, in jobs of Python processes: every other
rank gets a shmcoll.Error (no hang: the children have a timeout far longer than the library
needs to notice), and nothing of the job stays in /dev/shm.

The jobs are the test's own (shmcoll.Comm over child processes), made by rank 0 of the
session only: the other ranks have nothing to do here."""

import glob
import os
import signal
import subprocess
import sys

import pytest

CHILD = r"""
import errno, os, signal, sys
import numpy as np
import shmcoll

rank, size, job, fate = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
comm = shmcoll.Comm(rank, size, job, timeout_ms=120000)
x = np.ones(1000, np.float32)
comm.Allreduce(shmcoll.IN_PLACE, x)
assert (x == size).all()
if rank == 1 and fate == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
try:
    if rank == 1 and fate == "raise":
        with comm:
            raise RuntimeError("rank 1 fails on purpose")
    for _ in range(3):
        comm.Allreduce(shmcoll.IN_PLACE, x)
except shmcoll.Error as e:
    print("rank %d: shmcoll.Error errno=%s" % (rank, errno.errorcode.get(e.errno, e.errno)))
    sys.exit(3)
except RuntimeError as e:
    print("rank %d: %s" % (rank, e))
    sys.exit(4)
print("rank %d: no error" % rank)
sys.exit(0)
"""


def run_job(fate, size, job):
    env = dict(os.environ)
    for k in ("SHMCOLL_RANK", "SHMCOLL_SIZE", "SHMCOLL_JOB"):
        env.pop(k, None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(r), str(size), job, fate],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(size)
    ]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a %s job hung: the survivors did not notice" % fate)
        outs.append((p.returncode, out.strip()))
    return outs


@pytest.mark.parametrize("fate", ["raise", "kill"])
def test_survivors_get_an_error_and_nothing_is_left(comm, job, fate):
    if comm.rank != 0:
        return
    name = "%s-%s" % (job, fate)
    outs = run_job(fate, 3, name)
    if fate == "kill":
        assert outs[1][0] == -signal.SIGKILL, outs[1]
        expect = "EOWNERDEAD"
    else:
        assert outs[1][0] == 4 and "on purpose" in outs[1][1], outs[1]
        expect = "ECANCELED"
    for r in (0, 2):
        rc, out = outs[r]
        assert rc == 3 and "shmcoll.Error" in out, (r, rc, out)
        assert expect in out, (r, out)
    left = glob.glob("/dev/shm/shmcoll.%d.%s*" % (os.getuid(), name))
    assert not left, left


def test_a_cut_receive_says_what_was_cut(comm):
    """A non-blocking receive into too little room: EMSGSIZE with the library's message (the
    sizes, the sender, the tag), as the blocking receive has."""
    import errno

    import numpy as np

    import shmcoll

    if comm.size < 2 or comm.rank > 1:
        return
    if comm.rank == 0:
        comm.Send(np.arange(100, dtype=np.uint8), 1, tag=9)
        return
    req = comm.Irecv(np.zeros(10, np.uint8), 0, 9)
    with pytest.raises(shmcoll.Error) as e:
        req.Wait()
    assert e.value.errno == errno.EMSGSIZE
    assert "100 bytes from rank 0 (tag 9) was cut to 10" in str(e.value), str(e.value)
