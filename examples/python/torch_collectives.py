"""The torch.distributed collectives with the "shmcoll" backend: what each call does to each
rank's tensors, the reduce ops, three small programs built from them (a distributed mean, a
distributed softmax, a distributed argmax) and a ring all-reduce made of send/recv. Every
result is checked on every rank against what one process computes from all the data.

    shmcoll-run -n 4 python3 examples/python/torch_collectives.py
    python3 -m torch.distributed.run --redirects 9:1 --tee 9:1 --nproc_per_node 4 \\
        examples/python/torch_collectives.py       # torchrun; the options: README

Only the backend's name differs from a gloo program; shmcoll.torch.init_process_group()
picks the rendezvous of whichever launcher started the job."""

import torch
import torch.distributed as dist

import shmcoll.torch


def check(ok, what):
    if not ok:
        raise SystemExit("rank %d: %s is wrong" % (dist.get_rank(), what))


def cheatsheet(rank, size):
    # broadcast: rank 0's tensor everywhere.
    t = torch.tensor([float(rank)] * 3)
    dist.broadcast(t, src=0)
    check((t == 0).all(), "broadcast")

    # all_reduce, in place, with each op.
    for op, fold in [
        (dist.ReduceOp.SUM, sum),
        (dist.ReduceOp.PRODUCT, lambda xs: torch.prod(torch.tensor(xs)).item()),
        (dist.ReduceOp.MIN, min),
        (dist.ReduceOp.MAX, max),
    ]:
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t, op=op)
        check(t.item() == fold([r + 1.0 for r in range(size)]), "all_reduce %s" % op)

    # reduce: the sum on rank 0 only.
    t = torch.tensor([rank + 1.0])
    dist.reduce(t, dst=0)
    if rank == 0:
        check(t.item() == size * (size + 1) / 2, "reduce")

    # all_gather, out of place: everyone gets every rank's tensor.
    gathered = [torch.zeros(2) for _ in range(size)]
    dist.all_gather(gathered, torch.tensor([rank, rank * 10.0]))
    check(all(g.tolist() == [r, r * 10.0] for r, g in enumerate(gathered)), "all_gather")

    # gather and scatter: to and from rank 0.
    got = [torch.zeros(1) for _ in range(size)] if rank == 0 else None
    dist.gather(torch.tensor([rank * 2.0]), got, dst=0)
    if rank == 0:
        check([g.item() for g in got] == [r * 2.0 for r in range(size)], "gather")
    part = torch.zeros(2)
    pieces = [torch.tensor([r, -r], dtype=torch.float32) for r in range(size)] if rank == 0 else None
    dist.scatter(part, pieces, src=0)
    check(part.tolist() == [rank, -rank], "scatter")

    # reduce_scatter: sum every rank's list, rank r keeps element r.
    out = torch.zeros(1)
    dist.reduce_scatter(out, [torch.tensor([float(rank + r)]) for r in range(size)])
    check(out.item() == sum(p + rank for p in range(size)), "reduce_scatter")

    # all_to_all: rank r's i-th tensor goes to rank i.
    outs = [torch.zeros(1) for _ in range(size)]
    dist.all_to_all(outs, [torch.tensor([100.0 * rank + i]) for i in range(size)])
    check([o.item() for o in outs] == [100.0 * p + rank for p in range(size)], "all_to_all")

    dist.barrier()


def distributed_mean(rank, size):
    # Each rank holds a different number of samples: the mean weighs them all alike.
    local = torch.arange(rank + 2, dtype=torch.float64) + 10 * rank
    stats = torch.tensor([local.sum().item(), float(local.numel())], dtype=torch.float64)
    dist.all_reduce(stats)
    every = torch.cat([torch.arange(r + 2, dtype=torch.float64) + 10 * r for r in range(size)])
    check(abs(stats[0] / stats[1] - every.mean()) < 1e-12, "distributed mean")


def distributed_softmax(rank, size):
    # One long vector, a slice per rank: softmax over all of it.
    g = torch.Generator().manual_seed(7)
    whole = torch.randn(size * 5, generator=g, dtype=torch.float64) * 4
    mine = whole[rank * 5:(rank + 1) * 5].clone()
    top = mine.max().clone()
    dist.all_reduce(top, op=dist.ReduceOp.MAX)  # for numerical stability
    e = torch.exp(mine - top)
    total = e.sum()
    dist.all_reduce(total)
    check(torch.allclose(e / total, torch.softmax(whole, 0)[rank * 5:(rank + 1) * 5]),
          "distributed softmax")


def distributed_argmax(rank, size):
    # The largest value anywhere, and the rank holding it (ties: the lowest rank).
    g = torch.Generator().manual_seed(11 + rank)
    mine = torch.rand(6, generator=g, dtype=torch.float64)
    best = mine.max().clone()
    dist.all_reduce(best, op=dist.ReduceOp.MAX)
    mine_has = torch.tensor([rank if mine.max() == best else size])
    dist.all_reduce(mine_has, op=dist.ReduceOp.MIN)
    every = [torch.rand(6, generator=torch.Generator().manual_seed(11 + r),
                        dtype=torch.float64) for r in range(size)]
    want = max(range(size), key=lambda r: (every[r].max().item(), -r))
    check(best.item() == every[want].max().item() and mine_has.item() == want,
          "distributed argmax")


def ring_all_reduce(t):
    """all_reduce(SUM) from send/recv: a reduce-scatter then an all-gather around the ring."""
    rank, size = dist.get_rank(), dist.get_world_size()
    chunks = list(t.clone().chunk(size))
    right, left = (rank + 1) % size, (rank - 1) % size
    incoming = torch.zeros_like(chunks[0])

    def shift(send_i):
        req = dist.isend(chunks[send_i].clone(), right)  # isend first: no rank waits on another
        dist.recv(incoming, left)
        req.wait()

    # After step s of the first phase, chunk (rank - s - 1) holds the sum of s + 2 ranks.
    for step in range(size - 1):
        shift((rank - step) % size)
        chunks[(rank - step - 1) % size] += incoming
    # Chunk (rank + 1) is complete here; pass the complete chunks around.
    for step in range(size - 1):
        shift((rank + 1 - step) % size)
        chunks[(rank - step) % size].copy_(incoming)
    return torch.cat(chunks)


def main():
    shmcoll.torch.init_process_group()
    rank, size = dist.get_rank(), dist.get_world_size()
    cheatsheet(rank, size)
    distributed_mean(rank, size)
    distributed_softmax(rank, size)
    distributed_argmax(rank, size)
    if size > 1:
        x = torch.arange(size * 3, dtype=torch.float64) * (rank + 1)
        want = x.clone()
        dist.all_reduce(want)
        check(torch.equal(ring_all_reduce(x), want), "ring all-reduce")
    if rank == 0:
        print("torch_collectives: %d ranks, backend %s: every check passed"
              % (size, dist.get_backend()))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
