"""The torch.distributed backend "shmcoll" (python/shmcoll/torch.py): every collective and
point-to-point call against a reference computed on every rank (and against gloo where gloo
can do the call), reduce ops and dtypes, async works (in flight while Python runs, completed
in order, their errors, outliving their group), subgroups, the gloo fallback, bad input, and
DistributedDataParallel giving gloo's parameters. Skipped where Debian's python3-torch is
not installed."""

import datetime
import os

import pytest

import shmcoll

torch = pytest.importorskip("torch", reason="python3-torch is not installed")
dist = pytest.importorskip("torch.distributed", reason="torch has no distributed package")
import shmcoll.torch as sct  # noqa: E402 (after the skip)

R = dist.ReduceOp


@pytest.fixture(scope="module")
def world():
    rank, size = int(os.environ.get("SHMCOLL_RANK", 0)), int(os.environ.get("SHMCOLL_SIZE", 1))
    job = os.environ.get("SHMCOLL_JOB", "solo%d" % os.getpid())
    path = "/tmp/shmcoll-torch-%d-%s" % (os.getuid(), job)
    dist.init_process_group(
        "shmcoll",
        init_method="file://" + path,
        rank=rank,
        world_size=size,
        timeout=datetime.timedelta(seconds=60),
    )
    gloo = dist.new_group(backend="gloo")
    yield rank, size, gloo
    try:
        dist.barrier()
    except (RuntimeError, OSError):  # shmcoll.Error: a failed test broke the group (it said so)
        pass
    dist.destroy_process_group()
    if rank == 0 and os.path.exists(path):
        os.unlink(path)


@pytest.fixture(autouse=True)
def break_on_failure(request, world):
    """A rank whose test fails breaks the group's communicator, so the others' next call
    raises instead of waiting for it."""
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed and dist.is_initialized():
        comm = getattr(dist.group.WORLD, "_comm", None)
        if comm is not None:
            comm.Break()


def value(rank, n, dtype):
    """Rank's input: small integers (exact in every dtype), different on every rank."""
    x = (torch.arange(n) % 5 + rank + 1).to(torch.int64)
    if dtype == torch.bool:
        return (x + rank) % 3 == 0
    return x.to(dtype)


def fold(size, n, dtype, fn):
    acc = value(0, n, dtype)
    for r in range(1, size):
        acc = fn(acc, value(r, n, dtype))
    return acc


def reference(size, n, dtype, op):
    if dtype == torch.bool:
        if op in (R.SUM, R.MAX, R.BOR):
            return fold(size, n, dtype, torch.logical_or)
        if op == R.BXOR:
            return fold(size, n, dtype, torch.logical_xor)
        return fold(size, n, dtype, torch.logical_and)
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    fns = {
        R.SUM: torch.add,
        R.PRODUCT: torch.mul,
        R.MIN: torch.minimum,
        R.MAX: torch.maximum,
        R.BAND: torch.bitwise_and,
        R.BOR: torch.bitwise_or,
        R.BXOR: torch.bitwise_xor,
    }
    if op == R.AVG:
        s = fold(size, n, wide, torch.add)
        if dtype.is_floating_point:
            return (s / size).to(dtype)
        return torch.div(s, size, rounding_mode="trunc").to(dtype)
    return fold(size, n, wide, fns[op]).to(dtype)


FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
CASES = [(dt, op) for dt in FLOATS for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG)]
CASES += [(dt, op) for dt in INTS for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR)]
CASES += [(torch.bool, op) for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR)]
CASES += [(torch.int32, R.AVG), (torch.int64, R.AVG)]


OP_NAMES = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR"]


def case_id(v):
    """The same test name on every rank (a ReduceOp prints as its address)."""
    for name in OP_NAMES:
        if v is getattr(R, name):
            return name
    return str(v).replace("torch.", "")


@pytest.mark.parametrize("dtype,op", CASES, ids=case_id)
def test_all_reduce(world, dtype, op):
    rank, size, _ = world
    for n in (1, 7, 3000):
        t = value(rank, n, dtype)
        dist.all_reduce(t, op=op)
        want = reference(size, n, dtype, op)
        assert torch.equal(t, want), (n, t[:8].tolist(), want[:8].tolist())


def test_all_reduce_matches_gloo(world):
    rank, size, gloo = world
    torch.manual_seed(rank)
    for n in (5, 4096, 70000):
        x = torch.randn(n)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-6)


def test_broadcast_and_reduce(world):
    rank, size, _ = world
    for root in range(size):
        t = torch.full((100,), float(rank))
        dist.broadcast(t, root)
        assert (t == root).all()
        t = value(rank, 50, torch.float32)
        dist.reduce(t, root, op=R.MAX)
        if rank == root:
            assert torch.equal(t, reference(size, 50, torch.float32, R.MAX))
        else:
            assert torch.equal(t, value(rank, 50, torch.float32))  # non-roots keep their input


def test_gathers_and_scatter(world):
    rank, size, _ = world
    mine = torch.full((2, 3), rank, dtype=torch.int64)
    outs = [torch.zeros(2, 3, dtype=torch.int64) for _ in range(size)]
    dist.all_gather(outs, mine)
    assert [int(o[1, 2]) for o in outs] == list(range(size))
    flat = torch.zeros(2 * size, 3, dtype=torch.int64)
    dist.all_gather_into_tensor(flat, mine)
    assert flat[:, 0].tolist() == [r for r in range(size) for _ in range(2)]
    for root in range(size):
        got = [torch.zeros(2, 3, dtype=torch.int64) for _ in range(size)] if rank == root else None
        dist.gather(mine, got, dst=root)
        if rank == root:
            assert [int(g.sum()) for g in got] == [6 * r for r in range(size)]
        out = torch.zeros(4)
        parts = [torch.full((4,), 10.0 * r + root) for r in range(size)] if rank == root else None
        dist.scatter(out, parts, src=root)
        assert (out == 10.0 * rank + root).all()


def test_reduce_scatter(world):
    rank, size, _ = world
    ins = [torch.full((3,), float(rank * size + r)) for r in range(size)]
    out = torch.zeros(3)
    dist.reduce_scatter(out, ins)
    assert (out == sum(p * size + rank for p in range(size))).all()
    big = torch.arange(4 * size, dtype=torch.float32) + rank
    out = torch.zeros(4)
    dist.reduce_scatter_tensor(out, big, op=R.MIN)
    assert out.tolist() == [float(4 * rank + i) for i in range(4)]
    bf = torch.ones(8 * size, dtype=torch.bfloat16)  # gloo 1.13 has neither call nor dtype
    out = torch.zeros(8, dtype=torch.bfloat16)
    dist.reduce_scatter_tensor(out, bf)
    assert (out == size).all()


def test_all_to_all(world):
    rank, size, _ = world
    x = torch.tensor([100 * rank + p for p in range(size)], dtype=torch.float64)
    y = torch.zeros(size, dtype=torch.float64)
    dist.all_to_all_single(y, x)
    assert y.tolist() == [100.0 * p + rank for p in range(size)]
    # Uneven: rank r sends p + 1 rows of 2 to rank p.
    send = torch.cat([torch.full((p + 1, 2), rank * 10 + p) for p in range(size)])
    recv = torch.zeros((rank + 1) * size, 2, dtype=send.dtype)
    dist.all_to_all_single(
        recv,
        send,
        output_split_sizes=[rank + 1] * size,
        input_split_sizes=[p + 1 for p in range(size)],
    )
    want = torch.cat([torch.full((rank + 1, 2), p * 10 + rank) for p in range(size)])
    assert torch.equal(recv, want)
    ins = [torch.full((p + 1,), float(rank)) for p in range(size)]
    outs = [torch.zeros(rank + 1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    assert [o.tolist() for o in outs] == [[float(p)] * (rank + 1) for p in range(size)]
    # dtypes the library moves as bytes: counts scale by the element's size.
    for dt in (torch.int16, torch.complex64):
        send = torch.cat([torch.full((p + 1, 2), rank * 10 + p, dtype=dt) for p in range(size)])
        recv = torch.zeros((rank + 1) * size, 2, dtype=dt)
        dist.all_to_all_single(
            recv,
            send,
            output_split_sizes=[rank + 1] * size,
            input_split_sizes=[p + 1 for p in range(size)],
        )
        want = torch.cat([torch.full((rank + 1, 2), p * 10 + rank, dtype=dt) for p in range(size)])
        assert torch.equal(recv, want), dt
        outs = [torch.zeros(rank + 1, dtype=dt) for _ in range(size)]
        dist.all_to_all(outs, [torch.full((p + 1,), rank, dtype=dt) for p in range(size)])
        assert all((o == p).all() for p, o in enumerate(outs)), dt


def test_async_works(world):
    rank, size, _ = world
    t = torch.ones(10)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert w.is_completed() and (t == size).all()
    w = dist.broadcast(t, 0, async_op=True)
    w.wait()
    w = dist.barrier(async_op=True)
    w.wait()
    outs = [torch.zeros(1) for _ in range(size)]
    dist.all_gather(outs, torch.ones(1) * rank, async_op=True).wait()
    assert [o.item() for o in outs] == list(range(size))


def test_futures(world):
    """A work's future (torch 1.8 on, the form torch 2.x's DDP hooks and user code chain on):
    its value is the call's tensors, and then() runs after the call completed."""
    rank, size, _ = world
    t = torch.full((5,), float(rank))
    fut = dist.all_reduce(t, async_op=True).get_future()
    got = fut.wait()
    want = [float(sum(range(size)))] * 5
    assert isinstance(got, list) and got[0].tolist() == want and t.tolist() == want
    t = torch.ones(3)
    doubled = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    assert doubled.wait().tolist() == [2.0 * size] * 3


def test_in_flight_while_python_runs(world):
    """A collective is in flight while Python runs on: rank 0's all_reduce is not complete
    when it returns, nor after, since the last rank issues its own only once rank 0 has
    looked (it waits for rank 0 in a gloo barrier first). Then every rank waits."""
    rank, size, gloo = world
    if size == 1:
        pytest.skip("a rank alone completes its all_reduce with nobody to wait for")
    t = torch.full((1000,), float(rank + 1))
    if rank == size - 1:
        dist.barrier(group=gloo)
        w = dist.all_reduce(t, async_op=True)
    else:
        w = dist.all_reduce(t, async_op=True)
        fut = w.get_future()
        if rank == 0:
            assert not w.is_completed() and not fut.done()
            assert float(torch.arange(10).sum()) == 45.0  # Python and torch run meanwhile
            assert not w.is_completed()
        dist.barrier(group=gloo)
    w.wait()
    assert w.is_completed() and (t == size * (size + 1) / 2).all()
    assert w.get_future().wait()[0] is t


def test_who_completes_a_work(world, monkeypatch):
    """A synchronous collective (no async_op), which torch waits for at once, is run start to
    finish by the thread that called it when nothing else is outstanding, without the queue
    (no _Op); when something is, it is queued, marked waited, and completes after it; an
    asynchronous one nobody waits for is completed by the completer thread while the caller
    only looks."""
    import threading
    import time

    rank, size, _ = world
    ran, now = [], []
    run, enter_now = sct._Op.run, sct._Completer._enter_now

    def recording(op):
        ran.append((op.waited, threading.get_ident()))
        run(op)

    def recording_now(completer, group):  # run_now and call_now: whether it runs at once
        done = enter_now(completer, group)
        now.append((done, threading.get_ident()))
        return done

    monkeypatch.setattr(sct._Op, "run", recording)
    monkeypatch.setattr(sct._Completer, "_enter_now", recording_now)
    me = threading.get_ident()
    t = torch.ones(4)
    assert dist.all_reduce(t) is None
    assert now == [(True, me)] and ran == [] and (t == size).all()
    # Behind an asynchronous work: either queued (waited) and completed after it, or run at
    # once if the completer thread finished the first already. Which one is the machine's.
    now.clear()
    u = torch.ones(3)
    w = dist.all_reduce(u, async_op=True)
    dist.all_reduce(t)
    assert w.is_completed() and (u == size).all() and (t == size * size).all()
    assert len(now) == 1 and now[0][1] == me
    if not now[0][0]:
        assert [r[0] > 0 for r in ran] == [False, True]
    w.wait()
    t.fill_(size)
    ran.clear()
    now.clear()
    w = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 30
    while not w.is_completed() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert w.is_completed()
    assert len(ran) == 1 and ran[0][0] == 0 and ran[0][1] != me
    w.wait()
    assert (t == size * size).all()


def test_works_complete_in_order(world):
    """Works of one group complete in the order they were issued; their copies back
    (int16 widened to int32, the list forms' staging) are done when they complete."""
    rank, size, _ = world
    ts = [torch.full((7,), rank + 1, dtype=torch.int16) for _ in range(3)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    outs = [torch.zeros(2) for _ in range(size)]
    works.append(dist.all_gather(outs, torch.full((2,), float(rank)), async_op=True))
    seen = []
    for i, w in enumerate(works):
        w.get_future().then(lambda f, i=i: seen.append(i))
    works[-1].wait()
    assert all(w.is_completed() for w in works)
    for w in works:
        w.wait()
    assert seen == list(range(len(works)))
    want = size * (size + 1) // 2
    assert all(t.dtype == torch.int16 and (t == want).all() for t in ts)
    assert [o.tolist() for o in outs] == [[float(p)] * 2 for p in range(size)]


def test_error_through_wait_and_future(world):
    """An operation that fails in flight (its group broken by rank 0 while it waits)
    raises shmcoll.Error from wait() and from its future's wait(), on every rank."""
    rank, size, gloo = world
    if size == 1:
        pytest.skip("a rank alone completes its all_reduce before anything can break it")
    g = dist.new_group()
    t = torch.ones(10)
    if rank == 0:
        w = dist.all_reduce(t, group=g, async_op=True)
        assert not w.is_completed()
        g._comm.Break()
        dist.barrier(group=gloo)
        with pytest.raises(shmcoll.Error):
            w.wait()
        with pytest.raises(shmcoll.Error):
            w.get_future().wait()
        assert isinstance(w.exception(), shmcoll.Error) and not w.is_success()
    else:
        dist.barrier(group=gloo)
        with pytest.raises(shmcoll.Error):  # from the start or from the wait
            dist.all_reduce(t, group=g, async_op=True).wait()
    dist.destroy_process_group(g)


def test_destroy_with_works_outstanding(world):
    """A group destroyed with works outstanding: they still complete, with their results."""
    rank, size, _ = world
    g = dist.new_group()
    ts = [torch.full((1000,), float(rank)) for _ in range(4)]
    works = [dist.all_reduce(t, group=g, async_op=True) for t in ts]
    dist.destroy_process_group(g)
    for w in works:
        w.wait()
    assert all((t == sum(range(size))).all() for t in ts)


def test_batched_point_to_point(world):
    """batch_isend_irecv (a ring shift), as torch 2.x's pipeline schedules use it."""
    rank, size, _ = world
    if size == 1:
        pytest.skip("a ring shift needs two ranks")
    got = torch.zeros(4, dtype=torch.int32)
    ops = [
        dist.P2POp(dist.isend, torch.full((4,), rank, dtype=torch.int32), (rank + 1) % size),
        dist.P2POp(dist.irecv, got, (rank - 1) % size),
    ]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert got.tolist() == [(rank - 1) % size] * 4


def test_backend_registration(world):
    """What registering the backend gives a program, on each torch version. 2.x: the backend
    is registered for the CPU alone (``devices``), so the group's configuration reads
    "cpu:shmcoll", and a device-qualified name makes a group of it. 1.13 has neither
    ``devices`` nor device-qualified names (torch refuses "cpu:shmcoll" before any rank waits).
    On both a group takes ``pg_options=None`` and the name "shmcoll" in any case."""
    rank, size, gloo = world
    assert dist.Backend("SHMCOLL") == "shmcoll"
    assert dist.Backend.SHMCOLL.lower() == "shmcoll"  # 1.13 keeps the name as registered upper
    assert dist.get_backend() == "shmcoll"
    assert isinstance(dist.group.WORLD, sct.ProcessGroupShmcoll)
    assert dist.group.WORLD.name() == "shmcoll"
    if int(torch.__version__.split(".")[0]) >= 2:
        assert dist.Backend.backend_capability["shmcoll"] == ["cpu"]
        assert dist.is_backend_available("shmcoll")
        assert dist.get_backend_config() == "cpu:shmcoll"
        g = dist.new_group(backend="cpu:shmcoll")
        assert isinstance(g, sct.ProcessGroupShmcoll)
        assert dist.get_backend_config(g) == "cpu:shmcoll"
    else:
        assert not hasattr(dist.Backend, "backend_capability")
        with pytest.raises(ValueError, match="cpu:shmcoll"):
            dist.new_group(backend="cpu:shmcoll")
        g = dist.new_group(backend="shmcoll")
    h = dist.new_group(ranks=list(range(size))[::-1], backend="SHMCOLL", pg_options=None)
    for group in (g, h):
        t = torch.full((5,), float(rank + 1))
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.full((5,), size * (size + 1) / 2))
    # The name torch gave each group, which 2.x looks up to destroy a group and to resolve
    # one for its functional collectives.
    names = {dist.group.WORLD.group_name, g.group_name, h.group_name}
    assert len(names) == 3 and all(isinstance(n, str) for n in names)
    try:
        import torch.distributed._functional_collectives as funcol
    except ImportError:  # torch 1.13 has none
        funcol = None
    if funcol is not None:
        t = funcol.all_reduce(torch.full((3,), float(rank)), "sum", h)
        assert torch.equal(torch.as_tensor(t.wait() if hasattr(t, "wait") else t),
                           torch.full((3,), size * (size - 1) / 2))
    dist.destroy_process_group(h)
    dist.destroy_process_group(g)


def test_barrier_forms(world):
    """barrier(device_ids=...) is torch's to accept: 2.x takes it for any backend (the ids
    name GPUs, which a CPU backend does not use), 1.13 refuses it before any rank waits.
    monitored_barrier is gloo's alone in every version (torch raises before any rank
    waits); on the group's gloo subgroup it runs."""
    rank, size, gloo = world
    if int(torch.__version__.split(".")[0]) >= 2:
        dist.barrier(device_ids=[0])
    else:
        with pytest.raises(RuntimeError, match="device_ids"):
            dist.barrier(device_ids=[0])
    with pytest.raises((RuntimeError, ValueError), match="GLOO"):
        dist.monitored_barrier()
    dist.monitored_barrier(group=gloo, timeout=datetime.timedelta(seconds=60))
    dist.barrier()


def test_send_recv(world):
    rank, size, _ = world
    if size == 1:
        pytest.skip("point to point needs two ranks")
    right, left = (rank + 1) % size, (rank - 1) % size
    # Every rank sends first: isend must not wait for the receive.
    out = torch.full((1000,), float(rank))
    got = torch.zeros(1000)
    s = dist.isend(out, right, tag=3)
    r = dist.irecv(got, left, tag=3)
    s.wait()
    r.wait()
    assert (got == left).all()
    if rank == 0:
        srcs = set()
        for _ in range(size - 1):
            t = torch.zeros(1, dtype=torch.int64)
            srcs.add(dist.recv(t, tag=5))  # any source: recv returns the sender
            assert t.item() == 7
        assert srcs == set(range(1, size))
    else:
        dist.send(torch.tensor([7]), 0, tag=5)  # not 0: the batch below sends with tag 0
    ops = [
        dist.P2POp(dist.isend, torch.full((3,), float(rank)), right),
        dist.P2POp(dist.irecv, got[:3], left),
    ]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    assert (got[:3] == left).all()


def test_ring_allreduce_from_send_recv(world):
    """The tutorial's ring all-reduce, built from dist.send/dist.recv, equals all_reduce."""
    rank, size, _ = world
    if size == 1:
        pytest.skip("a ring needs two ranks")
    x = torch.arange(size * 4, dtype=torch.float64) * (rank + 1)
    want = x.clone()
    dist.all_reduce(want)
    chunks = list(x.chunk(size))
    right, left = (rank + 1) % size, (rank - 1) % size
    buf = torch.zeros_like(chunks[0])
    for step in range(size - 1):  # reduce-scatter
        send_i, recv_i = (rank - step) % size, (rank - step - 1) % size
        req = dist.isend(chunks[send_i].clone(), right)
        dist.recv(buf, left)
        req.wait()
        chunks[recv_i] += buf
    for step in range(size - 1):  # all-gather
        send_i, recv_i = (rank - step + 1) % size, (rank - step) % size
        req = dist.isend(chunks[send_i].clone(), right)
        dist.recv(buf, left)
        req.wait()
        chunks[recv_i].copy_(buf)
    assert torch.equal(torch.cat(chunks), want)


def test_subgroups(world):
    rank, size, _ = world
    evens = list(range(0, size, 2))
    g = dist.new_group(evens)  # every rank calls new_group; only members use it
    if rank in evens:
        t = torch.ones(5) * rank
        dist.all_reduce(t, group=g)
        assert (t == sum(evens)).all()
        b = torch.zeros(2)
        if rank == evens[-1]:
            b += 9
        dist.broadcast(b, evens[-1], group=g)
        assert (b == 9).all()
    dist.barrier()


def test_two_level_over_machines(world, monkeypatch):
    """Ranks that look like two machines (0..k-1 and k..2k-1) get the library's two-level
    communicator, its machines' leaders meeting over TCP on this host."""
    rank, size, _ = world
    if size % 2:
        pytest.skip("two machines of equal halves need an even number of ranks")
    monkeypatch.setattr(sct, "_machine", lambda: "machine-%d" % (rank // (size // 2)))
    g = dist.new_group(list(range(size)), backend="shmcoll")
    assert g._comm is not None
    t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(t, group=g)
    assert torch.equal(t, torch.arange(1000, dtype=torch.float32) * (size * (size + 1) // 2))
    b = torch.full((5,), float(rank))
    dist.broadcast(b, size - 1, group=g)
    assert (b == size - 1).all()
    outs = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(outs, torch.full((2,), float(rank)), group=g)
    assert [o[0].item() for o in outs] == list(range(size))
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(3)
    req = dist.isend(torch.full((3,), float(rank)), right, group=g)
    dist.recv(got, left, group=g)
    req.wait()
    assert (got == left).all()
    dist.barrier(group=g)


def test_gloo_fallback(world, monkeypatch):
    """A group over machines in a layout the two-level scheme does not take (here every rank
    on a machine of its own but the last two together) runs through its gloo twin."""
    rank, size, _ = world
    if size < 3:
        pytest.skip("an uneven layout over machines needs three ranks")
    monkeypatch.setattr(sct, "_machine", lambda: "machine-%d" % min(rank, size - 2))
    g = dist.new_group(list(range(size)), backend="shmcoll")
    assert g._comm is None
    t = torch.ones(3) * (rank + 1)
    dist.all_reduce(t, group=g)
    assert (t == size * (size + 1) // 2).all()
    outs = [torch.zeros(1) for _ in range(size)]
    dist.all_gather(outs, torch.ones(1) * rank, group=g)
    assert [o.item() for o in outs] == list(range(size))
    dist.barrier(group=g)


def test_bad_input_raises_everywhere(world):
    rank, size, _ = world
    with pytest.raises(ValueError, match="world_size"):
        dist.all_gather([torch.zeros(2)] * (size + 1), torch.zeros(2))
    with pytest.raises(ValueError, match="world_size"):
        dist.all_gather_into_tensor(torch.zeros(3 * size + 1), torch.zeros(3))
    with pytest.raises(ValueError, match="contiguous"):
        dist.all_reduce(torch.zeros(4, 4)[:, 1])
    t = torch.ones(2)
    dist.all_reduce(t)  # the group still works
    assert (t == size).all()


def test_requires_grad_and_bfloat16(world):
    rank, size, _ = world
    w = torch.ones(6, dtype=torch.bfloat16, requires_grad=True)
    with torch.no_grad():
        dist.all_reduce(w)
    assert (w == size).all()


def _train(group, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + dist.get_rank())
    for _ in range(steps):
        x = torch.randn(32, 8, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def test_ddp_parity_with_gloo(world):
    rank, size, gloo = world
    ours = _train(None)
    theirs = _train(gloo)
    for a, b in zip(ours, theirs):
        if size <= 2:
            assert torch.equal(a, b)  # a sum of two is the same in any order
        else:
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    # Every rank holds the same parameters.
    for p in ours:
        first = p.clone()
        dist.broadcast(first, 0)
        assert torch.equal(first, p)
