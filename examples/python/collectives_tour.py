"""A tour of the collectives with NumPy arrays: broadcast, all-reduce, gather, scatter and
barrier, then statistics of an array scattered over the ranks.

    shmcoll-run -n 4 python3 examples/python/collectives_tour.py

(alone it is a job of one rank). Every rank checks every result against NumPy on data it
can make itself (each rank's inputs come from a seed, so any rank can rebuild any other's);
a wrong result ends the job with a message and a non-zero exit.
"""

import os
import shutil
import sys
import tempfile

import numpy as np

import shmcoll

comm = shmcoll.init()
rank, size = comm.rank, comm.size


def section(title):
    if rank == 0:
        print(f"\n== {title}", flush=True)


def report(text):
    """Every rank calls it; rank 0 prints all ranks' lines in rank order (an object gather)."""
    lines = comm.gather(text, root=0)
    if rank == 0:
        for r, line in enumerate(lines):
            print(f"[rank {r}] {line}", flush=True)


def check(what, ok, detail=""):
    if not ok:
        sys.exit(f"collectives_tour: rank {rank}: {what} is wrong {detail}")


def values_of(r):
    """Rank r's own five numbers, the same wherever they are made."""
    return np.random.default_rng(100 + r).standard_normal(5)


# 1. Broadcast: the root's settings reach every rank.
section("broadcast: rank 0 sends its settings to everyone")
settings = np.array([0.01, 0.9, 256.0]) if rank == 0 else np.zeros(3)
comm.Bcast(settings, root=0)
report(f"learning rate {settings[0]}, momentum {settings[1]}, batch {settings[2]:.0f}")
check("Bcast", np.array_equal(settings, [0.01, 0.9, 256.0]), settings)

# 2. All-reduce: element-wise sums and maxima, delivered to every rank.
section("all-reduce: every rank gets the element-wise sum and maximum")
mine = values_of(rank)
total = np.empty_like(mine)
comm.Allreduce(mine, total, op=shmcoll.SUM)
biggest = mine.copy()
comm.Allreduce(shmcoll.IN_PLACE, biggest, op=shmcoll.MAX)  # in place: biggest is overwritten
everyone = np.array([values_of(r) for r in range(size)])
report(f"mine {mine.round(2)} -> sum {total.round(2)}, max {biggest.round(2)}")
check("Allreduce(SUM)", np.allclose(total, everyone.sum(axis=0), rtol=1e-12, atol=1e-12))
check("Allreduce(MAX)", np.array_equal(biggest, everyone.max(axis=0)))

# 3. Gather: each rank's summary (mean, std, count) lands on the root, in rank order.
section("gather: rank 0 collects every rank's mean, std and count")
summary = np.array([mine.mean(), mine.std(), mine.size])
table = np.empty((size, 3)) if rank == 0 else None
comm.Gather(summary, table, root=0)
if rank == 0:
    for r, (mean, std, n) in enumerate(table):
        print(f"  rank {r}: mean {mean:+.4f}, std {std:.4f}, n {n:.0f}")
    want = np.array([[v.mean(), v.std(), v.size] for v in everyone])
    check("Gather", np.array_equal(table, want))

# 4. Scatter: the root deals out equal slices of one array.
section("scatter: rank 0 deals out four numbers to each rank")
work = np.arange(4.0 * size) if rank == 0 else None
chunk = np.empty(4)
comm.Scatter(work, chunk, root=0)
report(f"my chunk {chunk}")
check("Scatter", np.array_equal(chunk, np.arange(4.0 * rank, 4.0 * rank + 4)), chunk)

# 5. Barrier: nobody passes until everyone has arrived. Each rank leaves a file in a
# directory rank 0 made; after the barrier every rank must see all of them.
section("barrier: each rank leaves a mark, then waits for the others")
where = comm.bcast(tempfile.mkdtemp(prefix="shmcoll-tour-") if rank == 0 else None, root=0)
sum(i * i for i in range(20000 * rank))  # some ranks have more to do before they arrive
open(os.path.join(where, f"rank{rank}"), "w").close()
comm.Barrier()
seen = sorted(os.listdir(where))
report(f"after the barrier I see {len(seen)} marks")
check("Barrier", len(seen) == size, f"({seen})")
comm.Barrier()  # everyone has looked before the directory goes
if rank == 0:
    shutil.rmtree(where)

# 6. Statistics of one array spread over the ranks: every rank holds a slice, and
# reductions of per-slice numbers give the whole array's mean, variance, range and histogram.
section("distributed statistics of an array scattered from rank 0")
n_per_rank = 2500
whole = np.random.default_rng(7).normal(10.0, 3.0, n_per_rank * size)  # any rank can make it
part = np.empty(n_per_rank)
comm.Scatter(whole if rank == 0 else None, part, root=0)

count_sum = np.array([part.size, part.sum()])
comm.Allreduce(shmcoll.IN_PLACE, count_sum, op=shmcoll.SUM)
mean = count_sum[1] / count_sum[0]
sq_dev = np.array([((part - mean) ** 2).sum()])  # a second pass, around the global mean
comm.Allreduce(shmcoll.IN_PLACE, sq_dev, op=shmcoll.SUM)
variance = sq_dev[0] / count_sum[0]
lo, hi = np.array([part.min()]), np.array([part.max()])
comm.Allreduce(shmcoll.IN_PLACE, lo, op=shmcoll.MIN)
comm.Allreduce(shmcoll.IN_PLACE, hi, op=shmcoll.MAX)
edges = np.linspace(lo[0], hi[0], 11)  # the same ten bins on every rank
counts = np.histogram(part, bins=edges)[0].astype(np.int64)
comm.Allreduce(shmcoll.IN_PLACE, counts, op=shmcoll.SUM)

if rank == 0:
    print(f"  n {count_sum[0]:.0f}, mean {mean:.4f}, variance {variance:.4f}, "
          f"min {lo[0]:.3f}, max {hi[0]:.3f}")
    peak = counts.max()
    for left, c in zip(edges, counts):
        print(f"  {left:7.2f} | {'#' * int(round(40 * c / peak)):<40} {c}")
check("the global count", count_sum[0] == whole.size)
check("the global mean", np.isclose(mean, whole.mean(), rtol=1e-12), f"{mean} vs {whole.mean()}")
check("the global variance", np.isclose(variance, whole.var(), rtol=1e-10),
      f"{variance} vs {whole.var()}")
check("the global min and max", lo[0] == whole.min() and hi[0] == whole.max())
check("the histogram", np.array_equal(counts, np.histogram(whole, bins=edges)[0]),
      f"{counts} vs {np.histogram(whole, bins=edges)[0]}")

comm.Barrier()
if rank == 0:
    print(f"\ncollectives_tour: every result checked on all {size} ranks", flush=True)
comm.Free()
