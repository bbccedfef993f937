"""Times every collective over message sizes, writes the times as CSV and fits the alpha-beta
model T = alpha + beta * m (m in bytes) to each collective's times by least squares.

    shmcoll-run -n 4 python3 examples/python/mpi4py_course/bench.py > results.csv
    shmcoll-run -n 4 python3 examples/python/mpi4py_course/bench.py --csv results.csv
    shmcoll-run -n 2 python3 examples/python/mpi4py_course/bench.py --quick

Written for mpi4py: the import line is the only change. The CSV has the columns of the
project's C benchmark (bench/shmcoll-bench), so the two join row by row:
impl,op,ranks,bytes,lat_us,algbw_GBps,busbw_GBps, where bytes is the whole vector of a
reduction or broadcast and the total over the ranks for the others (each rank's block is
bytes / ranks, rounded down to whole float32 elements; sizes without one element per rank are
left out), and lat_us the slowest rank's mean time per call. The fit (alpha in us, and
1/beta as a bandwidth in GB/s) goes to the terminal: stderr when the CSV is on stdout.

Every collective's result is checked once per size before it is timed, and at the end rank 0
reads the CSV back and checks its form and that every fit ran; the checks never depend on the
times measured. --quick runs tiny sizes with a few iterations, for CI.
"""

import argparse
import csv
import io
import math
import sys

import numpy as np

from shmcoll import MPI

HEADER = ["impl", "op", "ranks", "bytes", "lat_us", "algbw_GBps", "busbw_GBps"]
OPS = ["allreduce", "reduce", "bcast", "allgather", "reduce_scatter", "alltoall", "gather",
       "scatter", "barrier"]

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def fail(what):
    sys.exit(f"bench: rank {rank}: {what}")


class Case:
    """One collective at one size: its buffers, the call, and the check of its result."""

    def __init__(self, op, nbytes):
        self.op = op
        self.send = self.recv = self.want = None  # a barrier moves nothing
        divided = op not in ("allreduce", "reduce", "bcast")
        count = nbytes // 4
        self.block = count // size if divided else count
        self.count = self.block * size if divided else count
        P, b, me = size, self.block, rank
        total = P * (P + 1) / 2  # the sum of every rank's (rank + 1)
        if op in ("allreduce", "reduce", "reduce_scatter"):
            self.send = np.full(self.count, me + 1, np.float32)
            self.recv = np.empty(b if op == "reduce_scatter" else self.count, np.float32)
            self.want = np.full(len(self.recv), total, np.float32)
        elif op == "bcast":
            pattern = np.arange(self.count, dtype=np.float32) % 251
            self.send, self.recv, self.want = None, np.zeros(self.count, np.float32), pattern
            self.pattern = pattern
        elif op in ("allgather", "gather"):
            self.send = np.full(b, me, np.float32)
            self.recv = np.empty(self.count, np.float32)
            self.want = np.repeat(np.arange(P, dtype=np.float32), b)
        elif op == "alltoall":
            self.send = np.repeat(np.arange(P, dtype=np.float32) + me * P, b)
            self.recv = np.empty(self.count, np.float32)
            self.want = np.repeat(np.arange(P, dtype=np.float32) * P + me, b)
        elif op == "scatter":
            self.send = np.repeat(np.arange(P, dtype=np.float32), b)
            self.recv = np.empty(b, np.float32)
            self.want = np.full(b, me, np.float32)
        if op in ("reduce", "gather") and me != 0:
            self.recv = self.want = None  # only the root receives

    def run(self):
        op, s, r = self.op, self.send, self.recv
        if op == "allreduce":
            comm.Allreduce(s, r, op=MPI.SUM)
        elif op == "reduce":
            comm.Reduce(s, r, op=MPI.SUM, root=0)
        elif op == "bcast":
            comm.Bcast(r, root=0)
        elif op == "allgather":
            comm.Allgather(s, r)
        elif op == "reduce_scatter":
            comm.Reduce_scatter_block(s, r, op=MPI.SUM)
        elif op == "alltoall":
            comm.Alltoall(s, r)
        elif op == "gather":
            comm.Gather(s, r, root=0)
        elif op == "scatter":
            comm.Scatter(s, r, root=0)
        else:
            comm.Barrier()

    def check(self, nbytes):
        if self.op == "barrier":
            return
        if self.op == "bcast":
            self.recv[:] = self.pattern if rank == 0 else 0
        self.run()
        if self.recv is not None and not np.array_equal(self.recv, self.want):
            fail(f"{self.op} of {nbytes} bytes gave a wrong result")


def iterations(nbytes):
    """As the C benchmark: 64 MiB worth of calls, at least 20 and at most 10000."""
    return max(20, min(10000, (1 << 26) // max(nbytes, 4)))


def time_it(case, iters):
    """The slowest rank's mean time per call, in microseconds (on rank 0; None elsewhere)."""
    for _ in range(iters // 10 + 2):  # warm up
        case.run()
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iters):
        case.run()
    mine = np.array([(MPI.Wtime() - t0) / iters * 1e6])
    slowest = np.zeros(1)
    comm.Reduce(mine, slowest, op=MPI.MAX, root=0)
    return slowest[0] if rank == 0 else None


def busbw_factor(op):
    if op == "allreduce":
        return 2 * (size - 1) / size
    return 1.0 if op in ("bcast", "reduce") else (size - 1) / size


def fit(points):
    """T = alpha + beta * m by least squares on the relative error (each point weighted by
    1/T: the sizes span six orders of magnitude, and unweighted the largest would decide
    alpha too). Returns alpha in us and beta in us per byte."""
    m = np.array([p[0] for p in points], dtype=np.float64)
    t = np.array([p[1] for p in points], dtype=np.float64)
    w = 1 / np.maximum(t, 1e-9)
    A = np.column_stack([np.ones_like(m), m]) * w[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(A, t * w, rcond=None)
    return alpha, beta


def check_csv(text, sizes):
    """The CSV as written: its header, one well-formed row per collective and size."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0] != HEADER:
        fail(f"the CSV's header is {rows[:1]}, not {HEADER}")
    seen = set()
    for row in rows[1:]:
        if len(row) != len(HEADER):
            fail(f"a CSV row has {len(row)} fields: {row}")
        impl, op, ranks, nbytes, *numbers = row
        if op not in OPS or int(ranks) != size or int(nbytes) < 0 or not impl:
            fail(f"a bad CSV row: {row}")
        if not all(math.isfinite(float(x)) and float(x) >= 0 for x in numbers):
            fail(f"a CSV row with a bad number: {row}")
        seen.add((op, int(nbytes)))
    want = {("barrier", 0)} | {(op, b) for op in OPS[:-1] for b in sizes[op]}
    if seen != want or len(rows) != len(want) + 1:
        fail(f"the CSV has rows for {sorted(seen)}, expected {sorted(want)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--min-bytes", type=int, default=4)
    ap.add_argument("--max-bytes", type=int, default=1 << 22)
    ap.add_argument("--iters", type=int, default=0, help="calls timed per size (default: "
                    "64 MiB worth, from 10000 for the smallest sizes down to 20)")
    ap.add_argument("--csv", help="write the CSV to this file instead of stdout")
    ap.add_argument("--impl", default="python-" + MPI.__name__.split(".")[0],
                    help="the CSV's first column")
    ap.add_argument("--quick", action="store_true", help="4 B to 4 KiB, 3 calls per size")
    a = ap.parse_args()
    if a.quick:
        a.min_bytes, a.max_bytes, a.iters = 4, 4096, 3
    if a.min_bytes < 1 or a.max_bytes < a.min_bytes or a.iters < 0:
        ap.error("the sizes need 1 <= --min-bytes <= --max-bytes, and --iters >= 0")

    lines = [",".join(HEADER)]
    points = {op: [] for op in OPS}
    sizes = {op: [] for op in OPS}
    for op in OPS:
        nbytes = 0 if op == "barrier" else a.min_bytes
        while nbytes <= a.max_bytes:
            case = Case(op, nbytes)
            if op == "barrier" or case.block > 0:  # blocks of at least one element
                case.check(nbytes)
                lat = time_it(case, a.iters or iterations(nbytes))
                if rank == 0:
                    alg = nbytes / (lat * 1e-6) / 1e9 if lat > 0 else 0.0
                    lines.append(f"{a.impl},{op},{size},{nbytes},{lat:.3f},{alg:.4f},"
                                 f"{alg * busbw_factor(op):.4f}")
                    points[op].append((nbytes, lat))
                    if op != "barrier":
                        sizes[op].append(nbytes)
            if op == "barrier":
                break
            nbytes *= 2

    if rank == 0:
        text = "\n".join(lines) + "\n"
        if a.csv:
            with open(a.csv, "w") as f:
                f.write(text)
            with open(a.csv) as f:
                text = f.read()  # checked as it landed in the file
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
        check_csv(text, sizes)

        out = sys.stdout if a.csv else sys.stderr
        print(f"alpha-beta fit, T = alpha + beta * m, on {size} ranks:", file=out)
        print(f"  {'op':<15} {'alpha (us)':>11} {'1/beta (GB/s)':>14} {'sizes':>6}", file=out)
        fits = 0
        for op in OPS[:-1]:
            if len(points[op]) < 2:
                continue
            alpha, beta = fit(points[op])
            if not (math.isfinite(alpha) and math.isfinite(beta)):
                fail(f"the fit of {op} gave alpha {alpha}, beta {beta}")
            # A slope at or below zero: no cost per byte showed in these sizes.
            bw = f"{1e-3 / beta:14.3f}" if beta > 0 else f"{'-':>14}"
            print(f"  {op:<15} {alpha:11.3f} {bw} {len(points[op]):6d}", file=out)
            fits += 1
        if fits != sum(len(points[op]) >= 2 for op in OPS[:-1]) or fits == 0:
            fail("not every collective was fitted")
        barrier = points["barrier"][0][1]
        print(f"  {'barrier':<15} {barrier:11.3f} {'':>14} {1:6d}", file=out)
    comm.Barrier()


main()
