"""What two of Debian's torch builds need before torch.distributed can start a job.

- torch 2.4 on made libuv its TCPStore's default transport, and a torch built without libuv
  (Debian 13's 2.6) refuses every store that asks for it: torch's env:// rendezvous asks
  unless USE_LIBUV=0, and torchrun's agent asks for every store it makes, with no way to
  say otherwise. ``libuv_missing`` tells whether this torch is one of those.
- torch 1.13's elastic launcher parses ``--redirects``/``--tee`` with a loop over its Std
  flag, which on Python 3.11 no longer yields the flag of value 0, so torchrun's default
  "0" parses to None and the launch fails (``fix_std_parse``).

Only ``shmcoll.torch``, ``shmcoll.torchrun`` and its ranks' ``shmcoll._torchworker`` import
this module.
"""

import os
import re

_VALUE = re.compile(r"[0-3]")
_MAPPING = re.compile(r"(\d+:[0-3],)*\d+:[0-3]")


def libuv_missing():
    """True where TCPStore takes ``use_libuv`` but this torch was built without libuv.

    torch exposes no build flag for it, so it asks for a store of one on a port the kernel
    picks: where libuv is missing the store refuses before opening a socket (about 15 us);
    where it is there, the store starts and is closed at once (about 0.3 ms). A torch older
    than 2.4 has no such argument and needs nothing."""
    import torch.distributed as dist

    try:
        probe = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False, use_libuv=True)
    except TypeError:
        return False
    except RuntimeError as e:
        return "libuv" in str(e)
    del probe
    return False


def stores_without_libuv():
    """Where this torch lacks libuv, make torch.distributed.TCPStore (and every loaded torch
    module's copy of the name) a subclass whose ``use_libuv`` defaults to False, and tell
    torch's env:// rendezvous the same through USE_LIBUV=0 unless the user chose. A store that
    asks for libuv explicitly is left to fail as before. Returns whether libuv is missing.

    torch's own calls pass the argument in some places and leave it to its default in others
    (torchrun's agent, and a rank's client of the agent's store), so setting USE_LIBUV=0 alone
    does not reach them."""
    import sys

    import torch.distributed as dist

    if not libuv_missing():
        return False
    os.environ.setdefault("USE_LIBUV", "0")
    base = dist.TCPStore
    if getattr(base, "_shmcoll_without_libuv", False):
        return True

    class TCPStore(base):
        __doc__ = base.__doc__
        _shmcoll_without_libuv = True

        def __init__(self, *args, **kwargs):
            if len(args) < 9:  # use_libuv is the ninth positional argument
                kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    TCPStore.__name__ = TCPStore.__qualname__ = base.__name__
    TCPStore.__module__ = base.__module__
    for name, mod in list(sys.modules.items()):
        if name.startswith("torch.distributed") and getattr(mod, "TCPStore", None) is base:
            mod.TCPStore = TCPStore
    dist.TCPStore = TCPStore
    return True


def _std_from_str(cls, vm):
    """Std.from_str with the flag found by value: "0".."3", or "rank:flag,..." as a dict."""
    if _VALUE.fullmatch(vm):
        return cls(int(vm))
    if _MAPPING.fullmatch(vm):
        return {int(rank): cls(int(flag)) for rank, flag in (m.split(":") for m in vm.split(","))}
    raise ValueError("%s does not match: <[0-3]> or <rank:[0-3],...>" % vm)


def fix_std_parse():
    """Make torch's elastic Std.from_str find Std.NONE where its own loop does not (torch
    1.13 on Python 3.11 and later). Returns whether anything was changed."""
    try:
        from torch.distributed.elastic.multiprocessing import api
    except ImportError:
        return False
    std = getattr(api, "Std", None)
    if std is None or not hasattr(std, "from_str"):
        return False
    try:
        if std.from_str("0") is not None:
            return False
    except Exception:
        pass
    std.from_str = classmethod(_std_from_str)
    return True
