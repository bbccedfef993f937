"""python3 -m shmcoll.torchrun: torch's own launcher (torchrun), made to start where Debian's
torch builds cannot.

    python3 -m shmcoll.torchrun --standalone --nproc_per_node 4 train.py

It is torch.distributed.run, with torchrun's arguments and behaviour, after two repairs:

- torch 2.4 and later built without libuv (Debian 13's torch 2.6): torchrun's agent asks every
  store it makes for libuv and fails to start whatever the backend, gloo's too. Here its stores
  default to the other transport, and USE_LIBUV=0 is passed to the ranks (torch's env://
  rendezvous reads it), unless the user set USE_LIBUV.
- torch 1.13 on Python 3.11 and later (Debian 12's): torchrun fails while parsing its default
  ``--redirects``/``--tee`` ("'NoneType' object has no attribute 'get'"); here the parse
  finds the flag by its value.

Without libuv, each rank starts as ``python3 -u -m shmcoll._torchworker SCRIPT ARGS`` (which
repairs the rank's stores and runs SCRIPT as python would); ``--no-python`` and
``--run-path`` programs start as given, and must import shmcoll.torch (or set the default
themselves) before init_process_group.

Where neither applies (a torch from an index, built with libuv) it is torchrun unchanged.
Nothing in it is specific to the shmcoll backend: a program of any backend runs under it.
"""

import sys

__all__ = ["main"]


def main(argv=None):
    """Run torchrun with ``argv`` (default: this process's arguments); returns its exit code."""
    from . import _torchenv

    _torchenv.fix_std_parse()
    without_libuv = _torchenv.stores_without_libuv()
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.argv[0] = "torchrun"
    args = torchrun.parse_args(argv if argv is not None else sys.argv[1:])
    if without_libuv and not args.no_python and not getattr(args, "run_path", False):
        # The ranks' own stores ask for libuv too: each rank starts through _torchworker,
        # which repairs them and then runs the program as python would have.
        target = ["-m", args.training_script] if args.module else [args.training_script]
        args.module = True
        args.training_script = "shmcoll._torchworker"
        args.training_script_args = target + list(args.training_script_args)
    record(torchrun.run)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
