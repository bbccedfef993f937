"""mpi4py's persistent and generalized requests. A persistent request (Comm.Send_init,
Recv_init, ...) keeps its call and its arguments; each Start() starts that call anew, and
Wait or Test complete it, leaving the request inactive (ignored by Waitany and the like) but
not REQUEST_NULL: it can be started again, until Free(). Generalized requests are not
supported."""

from . import _errors, _shmcoll


def _err_request(what, why):
    _errors.raise_mpi(_errors.CODES["ERR_REQUEST"], "%s: %s" % (what, why))


class Prequest(_shmcoll.Request):
    """A persistent request: Start() starts its operation, Wait() and Test() complete it;
    Prequest.Startall(requests) starts each."""

    __slots__ = ("_start", "_inner", "_freed")

    def __init__(self, request=None):
        # Prequest() and Prequest(REQUEST_NULL) are null; mpi4py copies a handle, which
        # for a persistent request is the same request.
        if request is not None and not isinstance(request, _shmcoll.Request):
            raise TypeError("Prequest() takes a Request")
        src = request if isinstance(request, Prequest) else None
        self._start = src._start if src is not None else None
        self._inner = src._inner if src is not None else None
        self._freed = src._freed if src is not None else True

    @classmethod
    def _make(cls, start):
        """A persistent request whose Start() calls start() -> a started Request."""
        r = cls()
        r._start, r._inner, r._freed = start, None, False
        return r

    # ---- what the C waits look at (python/src/request.c): active, _ready, Test, Wait ----

    def _active(self):
        return self._inner is not None

    def _ready(self):
        return self._inner is None or self._inner._ready()

    def __bool__(self):
        return not self._freed  # mpi4py: not REQUEST_NULL, active or not

    def __eq__(self, other):
        if not isinstance(other, _shmcoll.Request):
            return NotImplemented
        return self is other or (not self and not other)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    def __hash__(self):
        return id(self)

    def Start(self):
        if self._freed:
            _err_request("Prequest.Start", "the request was freed (REQUEST_NULL)")
        if self._inner is not None:
            _err_request("Prequest.Start", "the request is active (started and not yet "
                         "completed by Wait or Test)")
        self._inner = self._start()

    @classmethod
    def Startall(cls, requests):
        for r in requests:
            r.Start()

    def Wait(self, status=None):
        inner = self._inner
        if inner is None:
            return _shmcoll.Request().Wait(status)  # inactive: the empty status
        try:
            return inner.Wait(status)
        finally:
            if not inner:
                self._inner = None

    def Test(self, status=None):
        inner = self._inner
        if inner is None:
            return _shmcoll.Request().Test(status)
        try:
            flag = inner.Test(status)
        finally:
            if not inner:
                self._inner = None
        return flag

    def Get_status(self, status=None):
        if self._inner is None:
            return _shmcoll.Request().Get_status(status)
        return self._inner.Get_status(status)

    def get_status(self, status=None):
        return self.Get_status(status)

    def wait(self, status=None):
        self.Wait(status)

    def test(self, status=None):
        return (self.Test(status), None)

    def Cancel(self):
        if self._inner is not None:
            self._inner.Cancel()

    def Free(self):
        """Lets the request go (REQUEST_NULL); an operation it started completes anyway."""
        if self._inner is not None:
            self._inner.Free()
        self._inner, self._start, self._freed = None, None, True

    @property
    def completed(self):
        return self._inner is None


class Grequest(_shmcoll.Request):
    """Generalized requests: not supported (Start raises NotImplementedError)."""

    __slots__ = ()

    @classmethod
    def Start(cls, query_fn=None, free_fn=None, cancel_fn=None, args=None, kwargs=None):
        raise NotImplementedError("shmcoll.MPI: generalized requests (Grequest) are not "
                                  "supported")

    def Complete(self):
        raise NotImplementedError("shmcoll.MPI: generalized requests (Grequest) are not "
                                  "supported")
