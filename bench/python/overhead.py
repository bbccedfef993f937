"""The cost of Python per call: Comm.Allreduce made from Python against the same calls made
from C on the same communicator, in the same process, interleaved.

    shmcoll-run -n 2 python3 bench/python/overhead.py [--bytes 8] [--reps 21] [--iters 20000]

Each repeat times a block of --iters back-to-back Allreduce(SUM) calls of float32 made one
by one from Python (NumPy arrays, as a user writes them), and a block of the same calls made
by a loop in C (Comm._allreduce_loop: the buffers resolved once); which goes first
alternates. A block's time is the slowest rank's. Prints, on rank 0, the medians of both
per call and of their difference per repeat: the target of issue 17 is <= 1 us at 8 B.
With --csv FILE the per-repeat rows go there too (impl,bytes,rep,python_us,c_us)."""

import argparse
import statistics
import sys
import time

import numpy as np

import shmcoll


def block(comm, fn, iters):
    comm.Barrier()
    t = np.zeros(1)
    t[0] = fn(iters)
    comm.Allreduce(shmcoll.IN_PLACE, t, op=shmcoll.MAX)
    return t[0] / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=int, default=8)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--csv")
    a = ap.parse_args()
    comm = shmcoll.init()
    n = max(1, a.bytes // 4)
    x = np.ones(n, np.float32)
    y = np.zeros(n, np.float32)

    def from_python(iters):
        allreduce, op = comm.Allreduce, shmcoll.SUM
        t0 = time.perf_counter()
        for _ in range(iters):
            allreduce(x, y, op)
        return time.perf_counter() - t0

    def from_c(iters):
        return comm._allreduce_loop(x, y, iters)

    block(comm, from_python, a.iters // 10)  # warm up both
    block(comm, from_c, a.iters // 10)
    py, c = [], []
    for rep in range(a.reps):
        order = [(py, from_python), (c, from_c)]
        if rep % 2:
            order.reverse()
        for out, fn in order:
            out.append(block(comm, fn, a.iters) * 1e6)
    if comm.rank == 0:
        diff = [p - q for p, q in zip(py, c)]
        print("ranks %d, %d B float32 Allreduce(SUM), %d repeats of %d calls"
              % (comm.size, n * 4, a.reps, a.iters))
        print("from Python: median %.3f us/call (min %.3f)" % (statistics.median(py), min(py)))
        print("from C:      median %.3f us/call (min %.3f)" % (statistics.median(c), min(c)))
        print("Python's cost per call: median %.3f us (target: <= 1 us)" % statistics.median(diff))
        if a.csv:
            with open(a.csv, "w") as f:
                f.write("impl,bytes,rep,python_us,c_us\n")
                for i, (p, q) in enumerate(zip(py, c)):
                    f.write("shmcoll,%d,%d,%.4f,%.4f\n" % (n * 4, i, p, q))
    comm.Free()
    return 0


if __name__ == "__main__":
    sys.exit(main())
