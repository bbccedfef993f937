"""mpi4py's MPI.Info (string keys to string values, in insertion order) and MPI.Errhandler.
shmcoll reads no hint, so an Info is only kept and given back; the error handlers are
names: errors always raise (mpi4py's default, ERRORS_RETURN)."""

import os
import sys

from . import _errors

MAX_INFO_KEY = 36
MAX_INFO_VAL = 256


def _err_info(what):
    _errors.raise_mpi(_errors.CODES["ERR_INFO"], "%s: the info is INFO_NULL" % what)


class Info:
    """Info(info=None): INFO_NULL, or the same info object as info."""

    __slots__ = ("_d", "_const")

    def __init__(self, info=None):
        if info is not None and not isinstance(info, Info):
            raise TypeError("Info() takes an Info, not %s" % type(info).__name__)
        self._d = info._d if info is not None else None
        self._const = False

    @classmethod
    def Create_env(cls, args=None):
        """mpi4py 4's (MPI 4): a new info object of the environment, INFO_ENV's keys; args
        (the program and its arguments, a str for the program alone) in place of this
        process's command line."""
        i = cls.Create()
        i._d.update(_env(args))
        return i

    @classmethod
    def Create(cls, items=None):
        """A new, empty info object (mpi4py 4 takes its items too)."""
        i = cls.__new__(cls)
        i._d, i._const = {}, False
        if items is not None:
            i.update(items)
        return i

    def _live(self, what):
        if self._d is None:
            _err_info(what)
        return self._d

    def Free(self):
        self._live("Info.Free")
        if self._const:
            _errors.raise_mpi(_errors.CODES["ERR_INFO"], "Info.Free: a predefined info")
        self._d = None

    def Dup(self):
        return type(self).Create(self._live("Info.Dup"))

    def free(self):
        """mpi4py 4's: Free, but a no-op for INFO_NULL and INFO_ENV."""
        if self._d is not None and not self._const:
            self._d = None

    def Get(self, key, maxlen=-1):
        v = self._live("Info.Get").get(_key(key, "Info.Get"))
        if v is not None and maxlen >= 0:
            v = v[:maxlen]
        return v

    def Set(self, key, value):
        if self._const:
            _errors.raise_mpi(_errors.CODES["ERR_INFO"], "Info.Set: a predefined info")
        value = str(value)
        if len(value) > MAX_INFO_VAL:
            _errors.raise_mpi(_errors.CODES["ERR_INFO_VALUE"], "Info.Set: value too long")
        self._live("Info.Set")[_key(key, "Info.Set")] = value

    def Delete(self, key):
        d = self._live("Info.Delete")
        key = _key(key, "Info.Delete")
        if key not in d:
            _errors.raise_mpi(_errors.CODES["ERR_INFO_NOKEY"],
                              "Info.Delete: no key %r" % key)
        del d[key]

    def Get_nkeys(self):
        return len(self._live("Info.Get_nkeys"))

    def Get_nthkey(self, n):
        keys = list(self._live("Info.Get_nthkey"))
        if not 0 <= n < len(keys):
            _errors.raise_mpi(_errors.CODES["ERR_ARG"],
                              "Info.Get_nthkey: %d is not below %d keys" % (n, len(keys)))
        return keys[n]

    def py2f(self):
        return id(self._d) if self._d is not None else 0

    # ---- the mapping protocol, as mpi4py's ----

    def __bool__(self):
        return self._d is not None

    def __eq__(self, other):
        if not isinstance(other, Info):
            return NotImplemented
        return self._d is other._d

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return id(self._d)

    def __reduce__(self):
        # As mpi4py 4: INFO_NULL and INFO_ENV unpickle to themselves, another info to a new
        # one of its items.
        if self._d is not None and not self._const and self != INFO_ENV:
            return (type(self).Create, (self.items(),))
        from . import MPI

        return MPI._reduce(self)

    def __len__(self):
        return 0 if self._d is None else len(self._d)

    def __iter__(self):
        return iter(list(self._d or ()))

    def __contains__(self, key):
        return self._d is not None and key in self._d

    def __getitem__(self, key):
        v = self.Get(key) if self._d is not None else None
        if v is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key, value):
        if self._d is None:
            raise KeyError(key)  # mpi4py's, for INFO_NULL
        self.Set(key, value)

    def __delitem__(self, key):
        if key not in self:
            raise KeyError(key)
        self.Delete(key)

    def get(self, key, default=None):
        if self._d is None:
            return default
        v = self.Get(key)
        return default if v is None else v

    def keys(self):
        return list(self._d or ())

    def values(self):
        return list((self._d or {}).values())

    def items(self):
        return list((self._d or {}).items())

    def update(self, other=(), **kw):
        if self._d is None:
            raise KeyError  # mpi4py's, for INFO_NULL
        if isinstance(other, Info):
            other = other.items()
        elif hasattr(other, "keys"):
            other = [(k, other[k]) for k in other.keys()]
        for k, v in other:
            self.Set(k, v)
        for k, v in kw.items():
            self.Set(k, v)

    def pop(self, key, *default):
        d = self._d or {}
        if key in d:
            v = d[key]
            self.Delete(key)
            return v
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        if not self._d:
            raise KeyError("popitem(): info is empty")
        key = next(reversed(list(self._d)))
        return key, self.pop(key)

    def copy(self):
        return self.Dup() if self._d is not None else type(self)()  # INFO_NULL's: null

    def clear(self):
        for k in self.keys():
            self.Delete(k)

    def __repr__(self):
        if self._d is None:
            return "<shmcoll.MPI.Info INFO_NULL>"
        return "<shmcoll.MPI.Info %r>" % (self._d,)


def _key(key, what):
    if not isinstance(key, str):
        raise TypeError("%s: a key is a str, not %s" % (what, type(key).__name__))
    if len(key) > MAX_INFO_KEY:
        _errors.raise_mpi(_errors.CODES["ERR_INFO_KEY"], "%s: key too long" % what)
    return key


INFO_NULL = Info()
INFO_NULL._const = True


def _env(args=None):
    """INFO_ENV's keys: of this process, or of the command line args (Info.Create_env)."""
    if args is None:
        command, argv = os.path.basename(sys.executable), sys.argv[1:]
    else:
        args = [args] if isinstance(args, str) else list(args)
        if not all(isinstance(a, str) for a in args):
            raise TypeError("Info.Create_env: args are str (the program and its arguments)")
        command, argv = (args[0] if args else ""), args[1:]
    return {
        "command": command,
        "argv": " ".join(argv),
        "maxprocs": os.environ.get("SHMCOLL_SIZE", "1"),
        "soft": os.environ.get("SHMCOLL_SIZE", "1"),
        "host": os.uname().nodename,
        "arch": os.uname().machine,
        "wdir": os.getcwd(),
        "thread_level": "MPI_THREAD_MULTIPLE",
    }


def _env_info():
    i = Info.Create()
    i._d.update(_env())
    i._const = True
    return i


INFO_ENV = _env_info()


class Errhandler:
    """Errhandler(errhandler=None): ERRHANDLER_NULL, or the same handler. shmcoll's calls
    always raise their errors (MPI.Exception), which is mpi4py's default, ERRORS_RETURN."""

    __slots__ = ("_kind", "_const")

    def __init__(self, errhandler=None):
        if errhandler is not None and not isinstance(errhandler, Errhandler):
            raise TypeError("Errhandler() takes an Errhandler")
        self._kind = errhandler._kind if errhandler is not None else None
        self._const = False

    @classmethod
    def _named(cls, kind):
        e = cls()
        e._kind, e._const = kind, True
        return e

    def Free(self):
        if self._kind is None:
            _errors.raise_mpi(_errors.CODES["ERR_ARG"], "Errhandler.Free: ERRHANDLER_NULL")
        if not self._const:
            self._kind = None

    def free(self):
        if not self._const:
            self._kind = None

    def __bool__(self):
        return self._kind is not None

    def __eq__(self, other):
        if not isinstance(other, Errhandler):
            return NotImplemented
        return self._kind == other._kind

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return hash(self._kind)

    def __reduce__(self):
        # Pickled as mpi4py 4 pickles handles (MPI._reduce): the predefined ones
        # and those equal to them.
        from . import MPI

        return MPI._reduce(self)

    def py2f(self):
        return {None: 0, "return": 1, "fatal": 2, "abort": 3}[self._kind]

    def __repr__(self):
        return "<shmcoll.MPI.Errhandler %s>" % (self._kind or "ERRHANDLER_NULL")


ERRHANDLER_NULL = Errhandler._named(None)
ERRORS_RETURN = Errhandler._named("return")
ERRORS_ARE_FATAL = Errhandler._named("fatal")
ERRORS_ABORT = Errhandler._named("abort")
