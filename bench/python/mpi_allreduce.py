"""Allreduce from Python: shmcoll.MPI against mpi4py, with the same program. The module is
the only difference: --impl shmcoll imports `from shmcoll import MPI`, --impl mpi4py
`from mpi4py import MPI` (under Open MPI, with or without the interposer preloaded).

    shmcoll-run -n 2 python3 bench/python/mpi_allreduce.py --impl shmcoll
    mpirun.openmpi -n 2 python3 bench/python/mpi_allreduce.py --impl mpi4py
    mpirun.openmpi -n 2 env LD_PRELOAD=build/mpi/ompi/libshmcoll-mpi.so \\
        python3 bench/python/mpi_allreduce.py --impl mpi4py --label mpi4py+interposer

Times comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM) on float32 NumPy arrays, 8 B to 64 MiB:
for each size, --reps blocks of calls (about --budget seconds each), a block's time per call
the slowest rank's; prints CSV (impl,bytes,calls,p50_us,min_us) with the median and the best
of the blocks. scripts/ or a shell loop interleaves the implementations' runs."""

import argparse
import statistics
import sys
import time

import numpy as np

SIZES = [8, 64, 1024, 8 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=["shmcoll", "mpi4py"], required=True)
    ap.add_argument("--label", help="the impl column (default: --impl)")
    ap.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=SIZES)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--header", action="store_true")
    a = ap.parse_args()
    if a.impl == "shmcoll":
        from shmcoll import MPI
    else:
        from mpi4py import MPI
    comm = MPI.COMM_WORLD
    label = a.label or a.impl
    if comm.rank == 0 and a.header:
        print("impl,bytes,calls,p50_us,min_us")
    t = np.zeros(1)
    for nbytes in a.sizes:
        x = np.ones(max(1, nbytes // 4), np.float32)
        comm.Barrier()
        t0 = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
        t[0] = time.perf_counter() - t0
        comm.Allreduce(MPI.IN_PLACE, t, op=MPI.MAX)
        calls = int(max(3, min(20000, a.budget / max(t[0], 1e-7))))
        blocks = []
        for _ in range(a.reps):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
            t[0] = (time.perf_counter() - t0) / calls
            comm.Allreduce(MPI.IN_PLACE, t, op=MPI.MAX)
            blocks.append(t[0])
        if comm.rank == 0:
            print("%s,%d,%d,%.3f,%.3f" % (label, nbytes, calls, statistics.median(blocks) * 1e6,
                                          min(blocks) * 1e6), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
