"""torch.distributed.all_reduce with the "shmcoll" backend against "gloo", in one job, as torch
users run it: ranks started by torch.multiprocessing (not pinned to cores unless --pin),
float32 SUM, every call timed on its own.

    python3 bench/python/torch_allreduce.py [--nproc 2] [--pin] [--hog [N]] [--csv FILE]
    python3 bench/python/torch_allreduce.py --ddp [--nproc 2] [--steps 60] [--width 128]

Every rank joins the default group (shmcoll) and a gloo group over the same ranks. For each
size, --reps blocks of each backend alternate (which goes first alternates too); a block is
a barrier then calls timed one by one on rank 0. Prints per size the median, p10 and p99 of
the calls of each backend and gloo's median over shmcoll's, and, not pinned, how often the
ranks were all on one CPU when looked at. --hog N starts N busy processes
beside the job, free to run on any core (--hog alone: one per core; a loaded machine). --ddp times DistributedDataParallel training
steps of a small MLP instead (three layers, --width wide, batch 64), the backends
alternating in blocks of steps: gloo, shmcoll as it is (each bucket's all-reduce returns at
once and completes in the background while backward goes on), and "shmcoll-blocking", the
same with a communication hook that waits for each bucket's all-reduce before it returns
(what a backend whose works are complete when returned gives DDP).
With --csv FILE the rows go there too (impl,bytes,calls,p10_us,p50_us,p99_us,pin,hog,nproc,mode; hog: how many)."""

import argparse
import datetime
import os
import socket
import statistics
import sys
import time

SIZES = [8, 1024, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def calls_for(nbytes, budget_s, guess_s):
    return max(5, min(2000, int(budget_s / max(guess_s, 1e-6))))


def bench_allreduce(a, rank, size, gloo, torch, dist):
    rows = []
    for nbytes in a.sizes:
        x = torch.ones(max(1, nbytes // 4))
        groups = {"shmcoll": None, "gloo": gloo}
        times = {k: [] for k in groups}
        # A first call of each sizes the blocks: about --budget seconds per block.
        guess = {}
        for name, g in groups.items():
            dist.barrier(group=g)
            t0 = time.perf_counter()
            dist.all_reduce(x, group=g)
            guess[name] = time.perf_counter() - t0
        n = {k: calls_for(nbytes, a.budget, v) for k, v in guess.items()}
        # Every rank must make the same number of calls: rank 0's counts decide.
        counts = torch.tensor([n["shmcoll"], n["gloo"]], dtype=torch.int64)
        dist.broadcast(counts, 0)
        n = {"shmcoll": int(counts[0]), "gloo": int(counts[1])}
        for rep in range(a.reps):
            order = list(groups.items())
            if rep % 2:
                order.reverse()
            for name, g in order:
                dist.barrier(group=g)
                out = times[name]
                for _ in range(n[name]):
                    t0 = time.perf_counter()
                    dist.all_reduce(x, group=g)
                    out.append(time.perf_counter() - t0)
        if rank == 0:
            for name, ts in times.items():
                rows.append((name, nbytes, len(ts), pct(ts, 0.10) * 1e6,
                             statistics.median(ts) * 1e6, pct(ts, 0.99) * 1e6))
    return rows


def bench_ddp(a, rank, size, gloo, torch, dist):
    width = a.width

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                   torch.nn.Linear(width, width), torch.nn.ReLU(),
                                   torch.nn.Linear(width, 10))
    def blocking_hook(state, bucket):
        # DDP's default hook (average), but the all-reduce done before the hook returns.
        t = bucket.buffer().div_(size)
        dist.all_reduce(t)
        fut = torch.futures.Future()
        fut.set_result(t)
        return fut

    ddps = {"shmcoll": torch.nn.parallel.DistributedDataParallel(model()),
            "shmcoll-blocking": torch.nn.parallel.DistributedDataParallel(model()),
            "gloo": torch.nn.parallel.DistributedDataParallel(model(), process_group=gloo)}
    ddps["shmcoll-blocking"].register_comm_hook(None, blocking_hook)
    opts = {k: torch.optim.SGD(m.parameters(), lr=0.01) for k, m in ddps.items()}
    x = torch.randn(64, width)
    y = torch.randint(0, 10, (64,))
    times = {k: [] for k in ddps}
    block = max(1, a.steps // a.reps)
    for rep in range(a.reps + 1):
        order = list(ddps)
        if rep % 2:
            order.reverse()
        for name in order:
            m, opt = ddps[name], opts[name]
            dist.barrier()
            for _ in range(block):
                t0 = time.perf_counter()
                opt.zero_grad()
                torch.nn.functional.cross_entropy(m(x), y).backward()
                opt.step()
                if rep:  # the first block warms up
                    times[name].append(time.perf_counter() - t0)
    rows = []
    if rank == 0:
        params = sum(p.numel() for p in ddps["gloo"].parameters())
        for name, ts in times.items():
            rows.append((name, params * 4, len(ts), pct(ts, 0.10) * 1e6,
                         statistics.median(ts) * 1e6, pct(ts, 0.99) * 1e6))
    return rows


def worker(rank, a, port):
    import torch
    import torch.distributed as dist

    import shmcoll.torch  # noqa: F401 (registers "shmcoll")

    torch.set_num_threads(1)
    if a.pin:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    dist.init_process_group("shmcoll", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=a.nproc, timeout=datetime.timedelta(minutes=10))
    gloo = dist.new_group(backend="gloo")
    fn = bench_ddp if a.ddp else bench_allreduce
    rows = fn(a, rank, a.nproc, gloo, torch, dist)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        report(a, rows)


def report(a, rows):
    what = "DDP step of a %d-byte MLP" % rows[0][1] if a.ddp else "all_reduce float32 SUM"
    print("# %s, P=%d, %s, %s" % (what, a.nproc, "pinned" if a.pin else "not pinned",
                                   "%d busy processes beside" % a.hog if a.hog else "idle"))
    print("%10s %12s %10s %10s %12s %10s %10s %8s" % ("bytes", "shmcoll p50", "p10", "p99",
                                                    "gloo p50", "p10", "p99", "ratio"))
    by = {}
    for r in rows:
        by.setdefault(r[1], {})[r[0]] = r
    for nbytes, d in by.items():
        s, g = d["shmcoll"], d["gloo"]
        print("%10d %12.1f %10.1f %10.1f %12.1f %10.1f %10.1f %7.1fx" % (
            nbytes, s[4], s[3], s[5], g[4], g[3], g[5], g[4] / s[4]))
        b = d.get("shmcoll-blocking")
        if b:
            print("%10s %12.1f %10.1f %10.1f   (shmcoll, each bucket waited for in its hook;"
                  " %.2fx shmcoll's p50)" % ("blocking", b[4], b[3], b[5], b[4] / s[4]))
    if a.csv:
        new = not os.path.exists(a.csv)
        with open(a.csv, "a") as f:
            if new:
                f.write("impl,bytes,calls,p10_us,p50_us,p99_us,pin,hog,nproc,mode\n")
            for r in rows:
                f.write("%s,%d,%d,%.2f,%.2f,%.2f,%d,%d,%d,%s\n" % (
                    r + (int(a.pin), int(a.hog), a.nproc, "ddp" if a.ddp else "allreduce")))


# How often the launching process looks where the ranks run (not pinned, the scheduler places
# them: beside busy processes two ranks sharing one CPU was what made a run slow, 48-88% of the
# looks in one sitting; docs/BENCHMARKS.md, "Two ranks on one CPU").
PLACE_EVERY_S = 0.1


def cpu_of(pid):
    """The CPU process pid last ran on (field 39 of /proc/PID/stat), or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[36]) if len(fields) > 36 else None


def hog():
    os.nice(0)
    while True:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--pin", action="store_true", help="pin rank r to core r mod cores")
    ap.add_argument("--hog", type=int, nargs="?", const=-1, default=0, metavar="N",
                    help="N busy processes beside (--hog alone: one per core)")
    ap.add_argument("--ddp", action="store_true", help="DDP training steps, not all_reduce")
    ap.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=SIZES)
    ap.add_argument("--reps", type=int, default=5, help="blocks per backend and size")
    ap.add_argument("--budget", type=float, default=0.2, help="seconds per block (about)")
    ap.add_argument("--steps", type=int, default=60, help="--ddp: timed steps per backend")
    ap.add_argument("--width", type=int, default=128, help="--ddp: the MLP's hidden width")
    ap.add_argument("--csv")
    a = ap.parse_args()
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hogs = []
    if a.hog < 0:
        a.hog = os.cpu_count()
    if a.hog:
        ctx = mp.get_context("fork")
        hogs = [ctx.Process(target=hog, daemon=True) for _ in range(a.hog)]
        for h in hogs:
            h.start()
    try:
        job = mp.spawn(worker, args=(a, port), nprocs=a.nproc, join=False)
        together = looks = 0
        while not job.join(timeout=PLACE_EVERY_S):
            cpus = [cpu_of(p.pid) for p in job.processes]
            if None not in cpus:
                looks += 1
                together += len(set(cpus)) == 1
    finally:
        for h in hogs:
            h.kill()
    if looks and not a.pin:
        print("# the ranks were all on one CPU in %d of %d looks (every %g s): where the"
              " scheduler put them, which decides a busy machine's medians"
              % (together, looks, PLACE_EVERY_S))
    return 0


if __name__ == "__main__":
    sys.exit(main())
