"""pytest under shmcoll-run: every rank runs the same session, so every test calls the same
collectives in the same order on every rank (tests/python/run.sh starts it at P = 1..4).

Each test gets `comm`, a Dup of the job's communicator. When a test fails on a rank, that rank
breaks its dup on the way out, so the others' next call on it (at the latest the teardown's
barrier) raises instead of waiting for the failed rank: the failure shows on every rank, and
the next test starts on a fresh dup."""

import errno
import os

import pytest

import shmcoll
from shmcoll import MPI

def world():
    # The launcher's job, as mpi4py programs see it: one communicator for the session.
    return MPI.COMM_WORLD


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture
def comm(request):
    c = world().Dup()
    yield c
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        c.Break()
        try:
            c.Free()
        except shmcoll.Error as e:
            # Requests the failed test left (its traceback keeps them): the communicator
            # goes when they do.
            if e.errno != errno.EBUSY:
                raise
        return
    try:
        c.Barrier()
    finally:
        c.Free()


@pytest.fixture
def job(request):
    """A job name of this test in this process, for the communicators its threads make with
    shmcoll.Comm."""
    name = request.node.name.replace("[", "-").replace("]", "")
    return "pytest-%d-%s" % (os.getpid(), name)


def pytest_sessionfinish(session, exitstatus):
    # COMM_WORLD goes at exit (a program cannot free it, as in MPI).
    MPI.Finalize()
