"""mpi4py's MPI.Status: what a receive got. The C module fills source, tag, error, nbytes,
total (the message's bytes, more than nbytes when it was truncated) and cancelled
(python/src/request.c, py__status_fill); counts in elements of a datatype derive from
nbytes, as MPI derives them from the bytes received."""

from . import _errors, _shmcoll

_UNDEFINED = _shmcoll.UNDEFINED


def dtype_of(obj):
    """A datatype argument as mpi4py takes it: a Datatype, or a typecode ('i', 'd', a NumPy
    dtype's character)."""
    if isinstance(obj, _shmcoll.Datatype):
        return obj
    code = getattr(obj, "char", obj)  # a NumPy dtype
    try:
        return _shmcoll._typedict[code]
    except (KeyError, TypeError):
        raise TypeError("expecting a Datatype or a typecode, not %r" % (obj,)) from None


def _blocks(t):
    """One element of derived datatype t as its parts in type-map order: (n, oldtype), n
    copies of oldtype each."""
    contents = t.Get_contents()  # as mpi4py 4, with large counts before the datatypes
    ints, types = contents[0], contents[-1]
    comb = t.combiner
    if comb in (_shmcoll.COMBINER_DUP, _shmcoll.COMBINER_RESIZED):
        return [(1, types[0])]
    if comb == _shmcoll.COMBINER_CONTIGUOUS:
        return [(ints[0], types[0])]
    if comb in (_shmcoll.COMBINER_VECTOR, _shmcoll.COMBINER_HVECTOR,
                _shmcoll.COMBINER_INDEXED_BLOCK, _shmcoll.COMBINER_HINDEXED_BLOCK):
        return [(ints[0] * ints[1], types[0])]
    if comb in (_shmcoll.COMBINER_INDEXED, _shmcoll.COMBINER_HINDEXED):
        return [(sum(ints[1 : 1 + ints[0]]), types[0])]
    if comb == _shmcoll.COMBINER_STRUCT:
        return list(zip(ints[1 : 1 + ints[0]], types))
    if comb == _shmcoll.COMBINER_SUBARRAY:
        n = 1
        for s in ints[1 + ints[0] : 1 + 2 * ints[0]]:
            n *= s
        return [(n, types[0])]
    old = types[0]  # DARRAY: its share of the array, in elements of its oldtype
    return [(t.Get_size() // old.Get_size() if old.Get_size() else 0, old)]


def _nbasic(t):
    """Basic elements in one element of t."""
    if t.is_predefined:
        return 1
    return sum(n * _nbasic(old) for n, old in _blocks(t))


def _elements_in(t, nbytes):
    """Basic elements of t's type map that nbytes (< one element's size) hold, in order; None
    when they end inside a basic element."""
    if nbytes == 0:
        return 0
    if t.is_predefined:
        return None  # a part of a basic element
    got = 0
    for n, old in _blocks(t):
        size = old.Get_size()
        if size == 0:
            continue
        whole = min(n, nbytes // size)
        got += whole * _nbasic(old)
        nbytes -= whole * size
        if whole < n:
            rest = _elements_in(old, nbytes)
            return None if rest is None else got + rest
    return got if nbytes == 0 else None


def _bytes_of(t, count):
    """Bytes of the first count basic elements of t's type map (repeated past one
    element)."""
    per = _nbasic(t)
    if per == 0:
        return 0
    whole, rest = divmod(count, per)
    nbytes = whole * t.Get_size()
    if rest:
        for n, old in _blocks(t):
            per_old = _nbasic(old)
            take = min(n * per_old, rest)
            nbytes += _bytes_of(old, take)
            rest -= take
            if not rest:
                break
    return nbytes


class Status:
    """Status(status=None): the empty status (source ANY_SOURCE, tag ANY_TAG, no bytes, no
    error), or a copy of status."""

    __slots__ = ("source", "tag", "_error", "nbytes", "total", "cancelled")

    def __init__(self, status=None):
        if status is not None and not isinstance(status, Status):
            raise TypeError("Status() takes a Status, not %s" % type(status).__name__)
        if status is None:
            self.source = _shmcoll.ANY_SOURCE
            self.tag = _shmcoll.ANY_TAG
            self._error = _errors.SUCCESS
            self.nbytes = self.total = 0
            self.cancelled = False
        else:
            for f in Status.__slots__:
                setattr(self, f, getattr(status, f))

    # The C module stores the library's result (0 or a negative errno); MPI's is a class.
    @property
    def error(self):
        e = self._error
        if e < 0:
            return _errors.errno_class(-e)
        return e

    @error.setter
    def error(self, value):
        self._error = int(value)

    def Get_source(self):
        return self.source

    def Set_source(self, source):
        self.source = int(source)

    def Get_tag(self):
        return self.tag

    def Set_tag(self, tag):
        self.tag = int(tag)

    def Get_error(self):
        return self.error

    def Set_error(self, error):
        self.error = error

    def Get_count(self, datatype=None):
        """Whole elements of datatype (default BYTE) received; UNDEFINED when the bytes are
        not a whole number of them."""
        size = 1 if datatype is None else dtype_of(datatype).Get_size()
        if size == 0:
            return 0 if self.nbytes == 0 else _UNDEFINED
        n, rest = divmod(self.nbytes, size)
        return _UNDEFINED if rest else n

    def Get_elements(self, datatype):
        """Basic elements of datatype received (a partial element's too); UNDEFINED when the
        bytes end inside a basic element."""
        t = dtype_of(datatype)
        size = t.Get_size()
        if size == 0:
            return 0
        whole, rest = divmod(self.nbytes, size)
        part = _elements_in(t, rest)
        if part is None:
            return _UNDEFINED
        return whole * _nbasic(t) + part

    def Set_elements(self, datatype, count):
        count = int(count)
        if count < 0:
            _errors.raise_mpi(_errors.CODES["ERR_COUNT"],
                              "Status.Set_elements: count %d is negative" % count)
        self.nbytes = self.total = _bytes_of(dtype_of(datatype), count)

    def Is_cancelled(self):
        return bool(self.cancelled)

    def Set_cancelled(self, flag):
        self.cancelled = bool(flag)

    @property
    def count(self):
        return self.Get_count()

    @count.setter
    def count(self, value):
        self.Set_elements(_shmcoll.BYTE, value)

    def py2f(self):
        return [self.source, self.tag, self.error, int(self.cancelled), self.nbytes, 0]

    @classmethod
    def f2py(cls, arg):
        s = cls()
        s.source, s.tag, s.error, cancelled, s.nbytes = list(arg)[:5]
        s.cancelled, s.total = bool(cancelled), s.nbytes
        return s

    def __eq__(self, other):
        if not isinstance(other, Status):
            return NotImplemented
        return (self.source, self.tag, self.error, self.nbytes, bool(self.cancelled)) == (
            other.source, other.tag, other.error, other.nbytes, bool(other.cancelled))

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None  # mutable, as mpi4py's

    def __reduce__(self):
        # Pickles (as mpi4py 4's) at every protocol: the slots' values as its state.
        return (type(self), (), {f: getattr(self, f) for f in Status.__slots__})

    def __setstate__(self, state):
        for f, v in state.items():
            setattr(self, f, v)

    def __repr__(self):
        return "Status(source=%d, tag=%d, nbytes=%d)" % (self.source, self.tag, self.nbytes)
