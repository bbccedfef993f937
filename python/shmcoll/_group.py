"""mpi4py's MPI.Group: an ordered set of processes, each named by its rank in the job (its
world rank, COMM_WORLD's). Local: every operation computes on those lists; a communicator
knows its ranks' world ranks from when it was made (python/shmcoll/_comm.py)."""

import operator

from . import _errors, _shmcoll

_UNDEFINED = _shmcoll.UNDEFINED
_IDENT, _SIMILAR, _UNEQUAL = 0, 2, 3  # CONGRUENT (1) is for communicators only


def _err_group(what):
    _errors.raise_mpi(_errors.CODES["ERR_GROUP"], "%s: the group is GROUP_NULL" % what)


def _err_rank(what, why):
    _errors.raise_mpi(_errors.CODES["ERR_RANK"], "%s: %s" % (what, why))


class ClassOrInstance:
    """A call that mpi4py 3 has as a classmethod of its operands (Group.Compare(group1,
    group2)) and mpi4py 4 as a method of the first (group.Compare(group)), answering both
    whatever the version, as 4's is an addition: through the class, fn(*args, **kw);
    through an instance, the instance is the first operand, unless the call gives that
    operand itself (3's classmethod called through an instance), which full(args, kw)
    tells."""

    def __init__(self, fn, full):
        self._fn, self._full = fn, full
        self.__doc__ = fn.__doc__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self._fn
        fn, full = self._fn, self._full

        def method(*args, **kw):
            if full(args, kw):
                return fn(*args, **kw)
            return fn(obj, *args, **kw)

        method.__name__, method.__doc__ = fn.__name__, fn.__doc__
        return method


def _one_of(old, new, old_name, new_name):
    """An argument mpi4py 3 and 4 name differently, given by either name (not both)."""
    if old is not None and new is not None:
        raise TypeError("%s and %s are the same argument (mpi4py 3's and 4's names)"
                        % (old_name, new_name))
    return new if old is None else old


class _Handle:
    """What a group is: the world ranks of its members in order, and this process's world
    rank (to say its rank in the group). Copies of one Group share it."""

    __slots__ = ("members", "me", "index")

    def __init__(self, members, me):
        self.members = tuple(members)
        self.me = me
        self.index = {w: i for i, w in enumerate(self.members)}


class Group:
    """Group(group=None): GROUP_NULL, or the same group as group."""

    __slots__ = ("_h", "_const")

    def __init__(self, group=None):
        if group is not None and not isinstance(group, Group):
            raise TypeError("Group() takes a Group, not %s" % type(group).__name__)
        self._h = group._h if group is not None else None
        self._const = False

    @classmethod
    def _of(cls, members, me):
        g = cls.__new__(cls)
        g._h = _Handle(members, me)
        g._const = False
        return g

    def _live(self, what):
        if self._h is None:
            _err_group(what)
        return self._h

    def __bool__(self):
        return self._h is not None

    def __eq__(self, other):
        if not isinstance(other, Group):
            return NotImplemented
        return self._h is other._h or (
            self._h is not None and other._h is not None and not self._h.members
            and not other._h.members)  # every empty group is GROUP_EMPTY

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash(id(self._h)) if self._h is not None and self._h.members else 0

    def __reduce__(self):
        # Pickled as mpi4py 4 pickles handles (MPI._reduce): the predefined ones
        # and those equal to them.
        from . import MPI

        return MPI._reduce(self)

    def __repr__(self):
        if self._h is None:
            return "<shmcoll.MPI.Group GROUP_NULL>"
        return "<shmcoll.MPI.Group of world ranks %s>" % (list(self._h.members),)

    # ---- accessors ----

    def Get_size(self):
        return len(self._live("Group.Get_size").members)

    def Get_rank(self):
        h = self._live("Group.Get_rank")
        return h.index.get(h.me, _UNDEFINED)

    size = property(Get_size, doc="number of processes in the group")
    rank = property(Get_rank, doc="this process's rank in the group, UNDEFINED if not in it")

    def Translate_ranks(group1, ranks1=None, group2=None, *, ranks=None, group=None):
        """The ranks in group2 (default: COMM_WORLD's group) of ranks ranks1 (default: all) of
        group1; UNDEFINED for those not in group2, PROC_NULL for PROC_NULL. mpi4py 3's
        classmethod Group.Translate_ranks(group1, ranks1, group2=None) and mpi4py 4's method
        group.Translate_ranks(ranks=None, group=None)."""
        ranks1 = _one_of(ranks1, ranks, "ranks1", "ranks")
        group2 = _one_of(group2, group, "group2", "group")
        h1 = _check(group1, "Group.Translate_ranks")
        if group2 is None:
            h2 = None  # world ranks are ranks of the world group
        else:
            h2 = _check(group2, "Group.Translate_ranks")
        if ranks1 is None:
            ranks1 = range(len(h1.members))
        out = []
        for r in _ranks(ranks1, "Group.Translate_ranks"):
            if r == _shmcoll.PROC_NULL:
                out.append(r)
                continue
            if not 0 <= r < len(h1.members):
                _err_rank("Group.Translate_ranks", "rank %d is not in group1 (size %d)"
                          % (r, len(h1.members)))
            w = h1.members[r]
            out.append(w if h2 is None else h2.index.get(w, _UNDEFINED))
        return out

    # Through an instance, 3's form is told by its first operand: a group, not ranks.
    Translate_ranks = ClassOrInstance(
        Translate_ranks, lambda args, kw: "group1" in kw or (
            bool(args) and isinstance(args[0], Group)))

    def Compare(group1, group2=None, *, group=None):
        """IDENT: the same members in the same order; SIMILAR: the same members; else
        UNEQUAL. mpi4py 3's Group.Compare(group1, group2) and 4's group.Compare(group)."""
        group2 = _one_of(group2, group, "group2", "group")
        a = _check(group1, "Group.Compare").members
        b = _check(group2, "Group.Compare").members
        if a == b:
            return _IDENT
        if len(a) == len(b) and set(a) == set(b):
            return _SIMILAR
        return _UNEQUAL

    Compare = ClassOrInstance(Compare, lambda args, kw: len(args) > 1 or "group1" in kw)

    # ---- constructors ----

    def Dup(self):
        h = self._live("Group.Dup")
        return type(self)._of(h.members, h.me)

    @classmethod
    def Union(cls, group1, group2):
        """group1's members, then group2's that are not in group1."""
        h1 = _check(group1, "Group.Union")
        h2 = _check(group2, "Group.Union")
        members = list(h1.members) + [w for w in h2.members if w not in h1.index]
        return cls._of(members, _me(h1, h2))

    @classmethod
    def Intersection(cls, group1, group2):
        """group1's members that are in group2, in group1's order."""
        h1 = _check(group1, "Group.Intersection")
        h2 = _check(group2, "Group.Intersection")
        return cls._of([w for w in h1.members if w in h2.index], _me(h1, h2))

    Intersect = Intersection

    @classmethod
    def Difference(cls, group1, group2):
        """group1's members that are not in group2, in group1's order."""
        h1 = _check(group1, "Group.Difference")
        h2 = _check(group2, "Group.Difference")
        return cls._of([w for w in h1.members if w not in h2.index], _me(h1, h2))

    def Incl(self, ranks):
        """The members of these ranks, in this order (distinct ranks of this group)."""
        h = self._live("Group.Incl")
        ranks = _distinct(_ranks(ranks, "Group.Incl"), len(h.members), "Group.Incl")
        return type(self)._of([h.members[r] for r in ranks], h.me)

    def Excl(self, ranks):
        """The members but those of these ranks, in this group's order."""
        h = self._live("Group.Excl")
        out = set(_distinct(_ranks(ranks, "Group.Excl"), len(h.members), "Group.Excl"))
        return type(self)._of([w for i, w in enumerate(h.members) if i not in out], h.me)

    def Range_incl(self, ranks):
        """Incl of the ranks of (first, last, stride) triplets, in order."""
        h = self._live("Group.Range_incl")
        return self.Incl(_expand(ranks, len(h.members), "Group.Range_incl"))

    def Range_excl(self, ranks):
        h = self._live("Group.Range_excl")
        return self.Excl(_expand(ranks, len(h.members), "Group.Range_excl"))

    @classmethod
    def Create_from_session_pset(cls, session, pset_name):
        raise NotImplementedError("shmcoll.MPI: sessions (Group.Create_from_session_pset) "
                                  "are not supported")

    def Free(self):
        """The group becomes GROUP_NULL (GROUP_EMPTY stays itself, as in mpi4py over Open
        MPI)."""
        self._live("Group.Free")
        if not self._const:
            self._h = None

    def free(self):
        """mpi4py 4's: Free, but a no-op for GROUP_NULL and the predefined groups."""
        if self._h is not None and not self._const:
            self._h = None

    def py2f(self):
        return id(self._h) if self._h is not None else 0


def _check(group, what):
    if not isinstance(group, Group):
        raise TypeError("%s: expecting a Group, not %s" % (what, type(group).__name__))
    if group._h is None:
        _err_group(what)
    return group._h


def _me(h1, h2):
    return h1.me if h1.me is not None else h2.me


def _ranks(ranks, what):
    try:
        return [operator.index(r) for r in ranks]
    except TypeError:
        raise TypeError("%s: expecting a sequence of ranks" % what) from None


def _distinct(ranks, size, what):
    seen = set()
    for r in ranks:
        if not 0 <= r < size:
            _err_rank(what, "rank %d is not in the group (size %d)" % (r, size))
        if r in seen:
            _err_rank(what, "rank %d is listed twice" % r)
        seen.add(r)
    return ranks


def _expand(triplets, size, what):
    out = []
    for t in triplets:
        try:
            first, last, stride = (operator.index(x) for x in t)
        except (TypeError, ValueError):
            raise TypeError("%s: expecting (first, last, stride) triplets" % what) from None
        if stride == 0:
            _err_rank(what, "a stride of 0")  # Open MPI's class for it
        if (last - first) * stride < 0:
            continue  # an empty range
        out.extend(range(first, last + (1 if stride > 0 else -1), stride))
    return out


GROUP_NULL = Group()
GROUP_NULL._const = True
GROUP_EMPTY = Group._of((), None)
GROUP_EMPTY._const = True
