"""JAX-style collectives over a shmcoll communicator: psum, pmean, pmax, pmin and all_gather
as small functions, then global statistics and a data-parallel linear regression.

    shmcoll-run -n 4 python3 examples/python/global_stats.py

Where JAX names an axis of devices, these helpers take the communicator: every rank is one
"device". Each rank's data comes from a seed, so every rank can also compute the answers
alone on all the data; every result is checked against that (a wrong one ends the job with a
message and a non-zero exit).
"""

import sys

import numpy as np

import shmcoll


def _reduce(comm, x, op):
    out = np.array(x, ndmin=1)  # a copy, at least 1-d, in x's dtype (Python floats: float64)
    comm.Allreduce(shmcoll.IN_PLACE, out, op=op)
    return out.reshape(np.shape(x))


def psum(comm, x):
    """The element-wise sum of x over every rank, on every rank."""
    return _reduce(comm, x, shmcoll.SUM)


def pmean(comm, x):
    """The element-wise mean of x over the ranks (shmcoll.AVG: the sum divided by size)."""
    return _reduce(comm, x, shmcoll.AVG)


def pmax(comm, x):
    return _reduce(comm, x, shmcoll.MAX)


def pmin(comm, x):
    return _reduce(comm, x, shmcoll.MIN)


def all_gather(comm, x):
    """Every rank's x stacked along a new first axis, in rank order."""
    x = np.ascontiguousarray(x)
    out = np.empty((comm.size,) + x.shape, x.dtype)
    comm.Allgather(x, out)
    return out


comm = shmcoll.init()
rank, size = comm.rank, comm.size


def check(what, ok, detail=""):
    if not ok:
        sys.exit(f"global_stats: rank {rank}: {what} is wrong {detail}")


def close(a, b, tol=1e-10):
    return np.allclose(a, b, rtol=tol, atol=tol)


# ---- global statistics of data of different lengths on each rank ----
def samples(r):
    return np.random.default_rng(42 + r).normal(2.0, 1.5, 100 + 10 * r)


x = samples(rank)
every = np.concatenate([samples(r) for r in range(size)])  # the reference: all the data here

count = psum(comm, x.size)
total = psum(comm, x.sum())
total_sq = psum(comm, (x**2).sum())
mean = total / count
std = np.sqrt(total_sq / count - mean**2)
hi, lo = pmax(comm, x.max()), pmin(comm, x.min())
mean_of_means = pmean(comm, x.mean())  # not the global mean: the ranks hold different counts
check("psum of the counts", count == every.size)
check("the global mean", close(mean, every.mean()), f"{mean} vs {every.mean()}")
check("the global std", close(std, every.std()), f"{std} vs {every.std()}")
check("pmax and pmin", hi == every.max() and lo == every.min())
check("pmean", close(mean_of_means, np.mean([samples(r).mean() for r in range(size)])))

# Normalised with the global statistics, all the data has mean 0 and std 1.
z = (x - mean) / std
check("the normalised mean", abs(psum(comm, z.sum()) / count) < 1e-12)
check("the normalised std", close(psum(comm, (z**2).sum()) / count, 1.0))

# Which rank holds the largest value: the smallest rank whose maximum is the global one.
holder = pmin(comm, rank if x.max() == hi else size)
check("the holder of the maximum", holder == np.argmax([samples(r).max() for r in range(size)]))

# all_gather: every rank's first three values, everywhere.
firsts = all_gather(comm, x[:3])
check("all_gather", np.array_equal(firsts, [samples(r)[:3] for r in range(size)]))
if rank == 0:
    print(f"global statistics over {count} values on {size} ranks: mean {mean:.4f}, "
          f"std {std:.4f}, min {lo:.3f}, max {hi:.3f} (on rank {holder}); "
          f"the mean of the ranks' means is {mean_of_means:.4f}")


# ---- data-parallel training: each rank's batch, gradients averaged with pmean ----
DIM, BATCH, STEPS, LR = 6, 32, 60, 0.1
true_w = np.linspace(-1.0, 1.0, DIM)


def batch(r):
    """Rank r's training data: y = X @ true_w + 0.5 + noise."""
    g = np.random.default_rng(1000 + r)
    X = g.standard_normal((BATCH, DIM))
    return X, X @ true_w + 0.5 + 0.01 * g.standard_normal(BATCH)


def loss_and_grads(w, b, X, y):
    err = X @ w + b - y
    return (err**2).mean(), 2 * X.T @ err / len(y), 2 * err.mean()


def train(step_grads):
    w, b, losses = np.zeros(DIM), 0.0, []
    for _ in range(STEPS):
        loss, gw, gb = step_grads(w, b)
        w, b = w - LR * gw, b - LR * gb
        losses.append(loss)
    return w, b, losses


X, y = batch(rank)


def synced(w, b):
    loss, gw, gb = loss_and_grads(w, b, X, y)
    # Every batch has the same size, so the mean of the ranks' gradients is the gradient on
    # all the data: after the update every rank holds the same parameters.
    return pmean(comm, loss), pmean(comm, gw), pmean(comm, gb)


w, b, losses = train(synced)

# The same training in one process on all the batches together.
X_all = np.concatenate([batch(r)[0] for r in range(size)])
y_all = np.concatenate([batch(r)[1] for r in range(size)])
w_ref, b_ref, losses_ref = train(lambda w, b: loss_and_grads(w, b, X_all, y_all))

check("the parameters' agreement across ranks",
      np.array_equal(pmax(comm, w), pmin(comm, w)) and pmax(comm, b) == pmin(comm, b))
check("the trained weights", close(w, w_ref), f"{w} vs {w_ref}")
check("the trained bias", close(b, b_ref), f"{b} vs {b_ref}")
check("the losses", close(losses, losses_ref), f"{losses[-1]} vs {losses_ref[-1]}")
check("the fit", close(w, true_w, tol=0.05) and abs(b - 0.5) < 0.05, f"w {w}, b {b}")
if rank == 0:
    print(f"data-parallel training on {size} x {BATCH} samples: loss {losses[0]:.3f} -> "
          f"{losses[-1]:.5f} in {STEPS} steps, w {np.round(w, 3)}, b {b:.3f}; "
          f"the same as one process on all the data")

comm.Free()
