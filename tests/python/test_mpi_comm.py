"""from shmcoll import MPI: groups and the communicators made from them (Get_group, Create,
Create_group among subsets that the other ranks do not join, Split_type, Compare, names,
attributes, info), each rank checking hand-computed results of its own."""

import numpy as np
import pytest

from shmcoll import MPI
from shmcoll._api import MAJOR


def world_ranks(comm):
    """Each rank's world rank, as the job's communicator numbers it."""
    return comm.allgather(MPI.COMM_WORLD.rank)


# ---- groups, against hand-computed lists ----


def test_group_of_a_communicator(comm):
    g = comm.Get_group()
    assert g.Get_size() == g.size == comm.size and g.Get_rank() == g.rank == comm.rank
    assert MPI.Group.Compare(g, MPI.COMM_WORLD.Get_group()) == MPI.IDENT  # a Dup of world
    assert MPI.Group.Compare(g, comm.group) == MPI.IDENT
    assert MPI.Group.Translate_ranks(g, list(range(comm.size))) == world_ranks(comm)
    s = MPI.COMM_SELF.Get_group()
    assert s.size == 1 and s.rank == 0
    assert MPI.Group.Translate_ranks(s, [0], g) == [comm.rank]
    g.Free()
    assert g == MPI.GROUP_NULL and not g
    with pytest.raises(MPI.Exception) as e:
        g.Get_size()
    assert e.value.Get_error_class() == MPI.ERR_GROUP


def test_group_operations():
    # Groups are local: these are lists of world ranks 0 .. 5, whatever the job's size.
    me = MPI.COMM_WORLD.rank
    g = MPI.Group._of(range(6), me)
    a = g.Incl([4, 1, 3])
    assert MPI.Group.Translate_ranks(a, [0, 1, 2], g) == [4, 1, 3]
    assert a.rank == {4: 0, 1: 1, 3: 2}.get(me, MPI.UNDEFINED)
    b = g.Excl([0, 2])
    assert MPI.Group.Translate_ranks(b, range(4), g) == [1, 3, 4, 5]
    down = g.Range_incl([(5, 3, -1)])
    assert MPI.Group.Translate_ranks(down, range(down.size), g) == [5, 4, 3]
    r = g.Range_incl([(0, 4, 2), (5, 5, 1)])
    assert MPI.Group.Translate_ranks(r, range(r.size), g) == [0, 2, 4, 5]
    x = g.Range_excl([(1, 5, 2)])
    assert MPI.Group.Translate_ranks(x, range(x.size), g) == [0, 2, 4]
    u = MPI.Group.Union(a, b)  # a's, then b's not in a
    assert MPI.Group.Translate_ranks(u, range(u.size), g) == [4, 1, 3, 5]
    i = MPI.Group.Intersection(b, a)  # b's order
    assert MPI.Group.Translate_ranks(i, range(i.size), g) == [1, 3, 4]
    assert MPI.Group.Intersect == MPI.Group.Intersection
    d = MPI.Group.Difference(b, a)
    assert MPI.Group.Translate_ranks(d, range(d.size), g) == [5]
    assert MPI.Group.Compare(i, g.Incl([1, 3, 4])) == MPI.IDENT
    assert MPI.Group.Compare(i, g.Incl([4, 3, 1])) == MPI.SIMILAR
    assert MPI.Group.Compare(i, g.Incl([1, 3])) == MPI.UNEQUAL
    assert MPI.Group.Translate_ranks(a, [0, MPI.PROC_NULL], b) == [2, MPI.PROC_NULL]
    assert MPI.Group.Translate_ranks(a, [1], d) == [MPI.UNDEFINED]
    assert MPI.Group.Translate_ranks(g, [2], MPI.GROUP_EMPTY) == [MPI.UNDEFINED]
    assert MPI.Group.Compare(g.Incl([]), MPI.GROUP_EMPTY) == MPI.IDENT
    assert g.Incl([]) == MPI.GROUP_EMPTY and MPI.Group.Difference(g, g) == MPI.GROUP_EMPTY
    dup = a.Dup()
    assert MPI.Group.Compare(dup, a) == MPI.IDENT and MPI.Group(a) == a
    for bad in ([6], [1, 1], [-1]):
        with pytest.raises(MPI.Exception) as e:
            g.Incl(bad)
        assert e.value.Get_error_class() == MPI.ERR_RANK
    MPI.GROUP_EMPTY.Free()  # stays itself, as under mpi4py and Open MPI
    assert MPI.GROUP_EMPTY and MPI.GROUP_EMPTY.size == 0
    with pytest.raises(MPI.Exception) as e:
        g.Range_incl([(0, 1, 0)])
    assert e.value.Get_error_class() == MPI.ERR_RANK
    with pytest.raises(MPI.Exception):
        MPI.Group.Compare(g, MPI.GROUP_NULL)


# ---- communicators made from groups ----


def test_create_even_ranks(comm):
    r, P = comm.rank, comm.size
    evens = comm.Get_group().Incl(list(range(0, P, 2)))
    new = comm.Create(evens)
    if r % 2:
        assert new == MPI.COMM_NULL and not new
        return
    assert new.size == (P + 1) // 2 and new.rank == r // 2
    assert MPI.Group.Compare(new.Get_group(), evens) == MPI.IDENT
    x = np.array([r], "i")
    y = np.zeros(1, "i")
    new.Allreduce(x, y)
    assert y[0] == sum(range(0, P, 2))
    new.Free()
    assert new == MPI.COMM_NULL


def test_create_reordered_is_congruent_only_in_order(comm):
    P = comm.size
    rev = comm.Get_group().Incl(list(reversed(range(P))))
    new = comm.Create(rev)
    assert new.rank == P - 1 - comm.rank
    assert MPI.Comm.Compare(comm, new) == (MPI.CONGRUENT if P == 1 else MPI.SIMILAR)
    same = comm.Create(comm.Get_group())
    assert MPI.Comm.Compare(comm, same) == MPI.CONGRUENT
    new.Free()
    same.Free()


def test_create_group_among_subsets(comm):
    # Ranks pair up (0,1), (2,3), ...; each pair makes its own communicator, twice with the
    # same tag and once with another; a lone last rank makes one alone. No rank calls for a
    # group it is not in.
    r, P = comm.rank, comm.size
    first = r - r % 2
    members = [p for p in (first, first + 1) if p < P]
    g = comm.Get_group().Incl(members)
    comms = [comm.Create_group(g), comm.Create_group(g, tag=0), comm.Create_group(g, tag=5)]
    for c in comms:
        assert c.size == len(members) and c.rank == members.index(r)
        assert MPI.Group.Translate_ranks(c.Get_group(), range(c.size), comm.Get_group()) == \
            members
        got = c.allgather(r)
        assert got == members
    for c in comms:
        c.Free()
    comm.Barrier()


def test_create_group_of_rank_zero_only(comm):
    # Only rank 0 calls: the others do other things meanwhile.
    if comm.rank == 0:
        c = comm.Create_group(comm.Get_group().Incl([0]), tag=3)
        assert c.size == 1 and c.rank == 0 and c.allreduce(5) == 5
        c.Free()
    comm.Barrier()


def test_create_group_not_a_member(comm):
    if comm.size == 1:
        pytest.skip("needs 2 ranks")
    g = comm.Get_group().Incl([(comm.rank + 1) % comm.size])
    with pytest.raises(MPI.Exception) as e:
        comm.Create_group(g)
    assert e.value.Get_error_class() == MPI.ERR_GROUP


def test_split_keeps_world_ranks(comm):
    r, P = comm.rank, comm.size
    c = comm.Split(r % 2, key=-r)  # descending
    mine = [p for p in range(P) if p % 2 == r % 2][::-1]
    assert c.rank == mine.index(r) and c.size == len(mine)
    assert MPI.Group.Translate_ranks(c.group, range(c.size), comm.group) == mine
    c.Free()
    assert comm.Split(MPI.UNDEFINED) == MPI.COMM_NULL


def test_split_type_shared(comm):
    c = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    assert MPI.Comm.Compare(comm, c) == MPI.CONGRUENT  # one node
    c.Free()
    for root in range(comm.size):
        t = MPI.COMM_TYPE_SHARED if comm.rank == root else MPI.UNDEFINED
        c = comm.Split_type(t)
        if comm.rank == root:
            assert c.size == 1 and c.rank == 0
            c.Free()
        else:
            assert c == MPI.COMM_NULL


# ---- comparing, copying, naming ----


def test_compare_and_handles(comm):
    assert MPI.Comm.Compare(comm, comm) == MPI.IDENT
    d = comm.Dup()
    assert MPI.Comm.Compare(comm, d) == MPI.CONGRUENT and d != comm
    c = comm.Clone()
    assert MPI.Comm.Compare(c, d) == MPI.CONGRUENT and type(c) is type(comm)
    same = MPI.Comm(comm)  # a second handle of the same communicator
    assert same == comm and same is not comm and MPI.Comm.Compare(same, comm) == MPI.IDENT
    assert same.rank == comm.rank and same.Get_name() == comm.Get_name()
    new, req = comm.Idup()
    assert req.Wait() and MPI.Comm.Compare(new, comm) == MPI.CONGRUENT
    expected = MPI.CONGRUENT if comm.size == 1 else MPI.UNEQUAL
    assert MPI.Comm.Compare(MPI.COMM_SELF, comm) == expected
    d.Set_errhandler(MPI.ERRORS_ARE_FATAL)
    dd = d.Dup()
    assert dd.Get_errhandler() == MPI.ERRORS_RETURN  # mpi4py sets it on every new one
    dd.Free()
    for x in (d, c, new):
        x.Free()
        assert x == MPI.COMM_NULL and not x
        with pytest.raises(MPI.Exception) as e:
            x.Get_size()  # a freed communicator is COMM_NULL: no rank, no size
        assert e.value.Get_error_class() == MPI.ERR_COMM
    with pytest.raises(TypeError):
        MPI.Comm((1, 2, 3))


def test_freeing_a_second_handle_frees_the_communicator(comm):
    d = comm.Dup()
    alias = MPI.Intracomm(d)
    alias.Free()
    assert d == MPI.COMM_NULL and d.freed
    with pytest.raises(MPI.Exception) as e:
        d.Barrier()
    assert e.value.Get_error_class() == MPI.ERR_COMM


def test_properties_names_info_errhandlers(comm):
    assert comm.Is_intra() and comm.is_intra and not comm.Is_inter() and not comm.is_inter
    assert comm.Get_topology() == comm.topology == MPI.UNDEFINED and not comm.is_topo
    assert MPI.COMM_WORLD.Get_name() == MPI.COMM_WORLD.name == "MPI_COMM_WORLD"
    assert MPI.COMM_SELF.Get_name() == "MPI_COMM_SELF"
    assert comm.Get_name() == ""
    comm.Set_name("mine")
    assert comm.name == "mine"
    comm.name = "again"
    assert comm.Get_name() == "again"
    assert MPI.Comm.Get_parent() == MPI.COMM_NULL
    info = MPI.Info.Create()
    info["k"] = "v"
    comm.Set_info(info)
    got = comm.Get_info()
    assert got.Get("k") == "v" and got is not info
    d = comm.Dup(info)
    assert d.info.items() == [("k", "v")]
    d.Free()
    comm.Dup_with_info(MPI.INFO_NULL).Free()
    assert comm.Get_errhandler() == MPI.ERRORS_RETURN
    comm.Set_errhandler(MPI.ERRORS_ARE_FATAL)
    assert comm.Get_errhandler() == MPI.ERRORS_ARE_FATAL
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    with pytest.raises(MPI.Exception):  # errors raise, whatever the handler
        comm.Send(bytearray(1), dest=comm.size)


def test_attributes(comm):
    assert comm.Get_attr(MPI.TAG_UB) == 2**31 - 1
    # MPI.HOST as mpi4py 3 names it; mpi4py 4 has no name for keyval 1.
    assert comm.Get_attr(getattr(MPI, "HOST", 1)) == MPI.PROC_NULL
    assert comm.Get_attr(MPI.IO) == MPI.ANY_SOURCE
    assert hasattr(MPI, "HOST") == (MAJOR == 3)
    assert comm.Get_attr(MPI.WTIME_IS_GLOBAL) == 0 and comm.Get_attr(MPI.APPNUM) == 0
    assert comm.Get_attr(MPI.UNIVERSE_SIZE) == MPI.COMM_WORLD.size
    deleted = []
    k_copy = MPI.Comm.Create_keyval(copy_fn=lambda c, k, v: v + 1,
                                    delete_fn=lambda c, k, v: deleted.append(v))
    k_none = MPI.Comm.Create_keyval()
    assert comm.Get_attr(k_copy) is None
    comm.Set_attr(k_copy, 10)
    comm.Set_attr(k_none, "x")
    d = comm.Dup()
    assert d.Get_attr(k_copy) == 11 and d.Get_attr(k_none) is None
    d.Free()
    assert deleted == [11]
    comm.Delete_attr(k_copy)
    assert deleted == [11, 10] and comm.Get_attr(k_copy) is None
    comm.Delete_attr(k_none)
    assert MPI.Comm.Free_keyval(k_copy) == MPI.KEYVAL_INVALID
    MPI.Comm.Free_keyval(k_none)
    with pytest.raises(MPI.Exception) as e:
        comm.Get_attr(k_copy)
    assert e.value.Get_error_class() == MPI.ERR_KEYVAL


def test_info_is_a_mapping():
    i = MPI.Info.Create()
    i.Set("a", "1")
    i["b"] = "2"
    assert len(i) == i.Get_nkeys() == 2 and i.Get_nthkey(1) == "b" and list(i) == ["a", "b"]
    assert i.items() == [("a", "1"), ("b", "2")] and i.keys() == ["a", "b"]
    assert i.values() == ["1", "2"] and "a" in i and i.get("c", "z") == "z"
    assert i.Get("nope") is None
    c = i.Dup()
    c.Delete("a")
    assert "a" in i and "a" not in c
    with pytest.raises(MPI.Exception) as e:
        c.Delete("a")
    assert e.value.Get_error_class() == MPI.ERR_INFO_NOKEY
    i.update({"c": "3"}, d="4")
    assert i.pop("c") == "3" and i.popitem() == ("d", "4")
    i.clear()
    assert len(i) == 0
    i.Free()
    c.Free()
    assert i == MPI.INFO_NULL and not i


def test_mpi4py_4_names(comm):
    # mpi4py 4's: a communicator straight from a group, collective over its members only.
    r, P = comm.rank, comm.size
    if r < 2:
        g = MPI.COMM_WORLD.Get_group().Incl(list(range(min(P, 2))))
        c = MPI.Intracomm.Create_from_group(g, "org.shmcoll.test")
        assert c.size == min(P, 2) and c.rank == r and c.allreduce(1) == c.size
        c.Free()
    comm.Barrier()
    h = comm.py2f()
    assert h == comm.handle == comm.tohandle() and MPI.Comm.f2py(h) == comm
    buf = MPI.Alloc_mem(100)
    comm.Attach_buffer(buf)
    comm.Flush_buffer()
    assert comm.Detach_buffer() is buf and not comm.Iflush_buffer()


def test_predefined_communicators_are_not_freed(comm):
    for c in (MPI.COMM_WORLD, MPI.COMM_SELF):
        with pytest.raises(MPI.Exception) as e:
            c.Free()
        assert e.value.Get_error_class() == MPI.ERR_COMM and not c.freed
    with pytest.raises(MPI.Exception) as e:
        MPI.COMM_NULL.Abort()  # an error, not the end of this process
    assert e.value.Get_error_class() == MPI.ERR_COMM
    MPI.COMM_WORLD.Barrier()


def test_safe_free(comm):
    # mpi4py 4's free(): Free, but a no-op for null and predefined objects.
    for obj in (MPI.COMM_NULL, MPI.GROUP_NULL, MPI.INFO_NULL, MPI.ERRHANDLER_NULL,
                MPI.MESSAGE_NULL):
        obj.free()
        assert not obj
    for obj in (MPI.COMM_WORLD, MPI.COMM_SELF, MPI.GROUP_EMPTY, MPI.INFO_ENV, MPI.ERRORS_RETURN,
                MPI.MESSAGE_NO_PROC):
        obj.free()
        assert obj
    for obj in (comm.Dup(), comm.Get_group(), MPI.Info.Create(), comm.Get_errhandler()):
        obj.free()
        obj.free()
        assert not obj
