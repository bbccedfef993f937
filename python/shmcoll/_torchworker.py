"""A rank of python3 -m shmcoll.torchrun where torch lacks libuv: the rank's program, run as
python would run it, after torch's stores are told not to ask for libuv.

    python3 -u -m shmcoll._torchworker SCRIPT ARGS...       as python3 -u SCRIPT ARGS...
    python3 -u -m shmcoll._torchworker -m MODULE ARGS...    as python3 -u -m MODULE ARGS...

torchrun's ranks reach the agent's store through a TCPStore that asks for libuv whatever the
environment says, so a program that does not import shmcoll.torch (a gloo one) would fail in
init_process_group; shmcoll.torchrun starts its ranks through this module instead.
"""

import os
import runpy
import sys


def main():
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "-m":
        target, args, as_module = argv[1], argv[2:], True
    elif argv:
        target, args, as_module = argv[0], argv[1:], False
    else:
        sys.exit("usage: python3 -m shmcoll._torchworker SCRIPT|-m MODULE [ARGS...]")
    from . import _torchenv

    _torchenv.stores_without_libuv()
    # What python itself puts first on sys.path: a script's folder, or for -m the current one.
    sys.path[0] = os.getcwd() if as_module else os.path.dirname(os.path.abspath(target))
    sys.argv = [target] + args
    if as_module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
