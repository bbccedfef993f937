"""Groups and the communicators made from them: Get_group, Incl, Excl, Range_incl, Union,
Intersection, Difference, Translate_ranks, Compare; Create, Create_group among pairs, Split,
Split_type, Dup, Compare of communicators, names.

An mpi4py program (tests/python/mpi4py_compare.sh)."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
world = comm.Get_group()


def ranks_of(g):
    return MPI.Group.Translate_ranks(g, list(range(g.Get_size())), world)


print("rank %d: world group size %d rank %d" % (rank, world.Get_size(), world.Get_rank()))
evens = world.Incl(list(range(0, size, 2)))
odds = world.Excl(list(range(0, size, 2)))
back = world.Range_incl([(size - 1, 0, -1)])


def rank_in(g):
    r = g.Get_rank()
    return "UNDEFINED" if r == MPI.UNDEFINED else r


print("rank %d: evens %s rank %s, odds %s rank %s, back %s rank %s" % (
    rank, ranks_of(evens), rank_in(evens), ranks_of(odds), rank_in(odds), ranks_of(back),
    rank_in(back)))
u = MPI.Group.Union(odds, evens)
i = MPI.Group.Intersection(back, evens)
d = MPI.Group.Difference(world, odds)
print("rank %d: union %s intersection %s difference %s" % (rank, ranks_of(u), ranks_of(i),
                                                           ranks_of(d)))
print("rank %d: compare world/back %d world/union %d evens/odds %d empty/empty %d" % (
    rank, MPI.Group.Compare(world, back), MPI.Group.Compare(world, u),
    MPI.Group.Compare(evens, odds), MPI.Group.Compare(MPI.GROUP_EMPTY, world.Incl([]))))
print("rank %d: translate %s" % (rank, MPI.Group.Translate_ranks(back, [0, MPI.PROC_NULL],
                                                                 evens)
                                 == [0 if size % 2 else MPI.UNDEFINED, MPI.PROC_NULL]))

new = comm.Create(back)
print("rank %d: create reversed rank %d size %d compare %d" % (
    rank, new.Get_rank(), new.Get_size(), MPI.Comm.Compare(comm, new)))
new.Free()
half = comm.Create(evens)
if half == MPI.COMM_NULL:
    print("rank %d: create evens COMM_NULL" % rank)
else:
    print("rank %d: create evens rank %d of %d sum %d" % (
        rank, half.Get_rank(), half.Get_size(), half.allreduce(rank)))
    half.Free()

first = rank - rank % 2
pair = world.Incl([p for p in (first, first + 1) if p < size])
pc = comm.Create_group(pair, tag=7)
print("rank %d: create_group rank %d of %d members %s" % (
    rank, pc.Get_rank(), pc.Get_size(), pc.allgather(rank)))
pc.Free()

sp = comm.Split(rank % 2, -rank)
print("rank %d: split rank %d of %d group %s" % (rank, sp.Get_rank(), sp.Get_size(),
                                                ranks_of(sp.Get_group())))
sp.Free()
st = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
print("rank %d: split_type shared size %d compare %d" % (rank, st.Get_size(),
                                                         MPI.Comm.Compare(comm, st)))
st.Free()
dup = comm.Dup()
print("rank %d: dup compare %d self compare %d ident %d name %r world name %r" % (
    rank, MPI.Comm.Compare(comm, dup), MPI.Comm.Compare(comm, MPI.COMM_SELF),
    MPI.Comm.Compare(comm, comm), dup.Get_name(), comm.Get_name()))
dup.Set_name("mine")
print("rank %d: named %r intra %s inter %s topo %d" % (
    rank, dup.name, dup.Is_intra(), dup.Is_inter(), dup.Get_topology() == MPI.UNDEFINED))
dup.Free()
print("rank %d: freed equals COMM_NULL %s" % (rank, dup == MPI.COMM_NULL))
