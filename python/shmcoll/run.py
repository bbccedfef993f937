"""python3 -m shmcoll.run: the launcher, shmcoll-run, by a second name.

    python3 -m shmcoll.run -n 4 python3 prog.py      # the same as shmcoll-run -n 4 ...

It runs the shmcoll-run installed with this package (the same binary, its arguments passed
through unchanged), for where the environment's scripts directory is not on PATH: a venv not
activated, pip install --user without ~/.local/bin on PATH.
"""

import os
import shutil
import sys
import sysconfig

__all__ = ["launcher", "main"]


def launcher():
    """The path of the shmcoll-run installed with this package, or None.

    pip puts the package in some scheme's platlib and the launcher in the same scheme's
    scripts directory (a venv's bin/, ~/.local/bin, /usr/local/bin); the scheme is the one
    whose library directory holds this package. Failing that (a package copied by hand, a
    meson install with its own python_install_dir), the shmcoll-run on PATH."""
    here = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    default = getattr(sysconfig, "get_default_scheme", None)
    schemes = [default()] if default else []
    schemes += sorted(sysconfig.get_scheme_names())
    for scheme in schemes:
        try:
            paths = sysconfig.get_paths(scheme)
        except KeyError:
            continue
        libs = {os.path.realpath(paths[k]) for k in ("platlib", "purelib") if k in paths}
        if here in libs and "scripts" in paths:
            path = os.path.join(paths["scripts"], "shmcoll-run")
            if os.access(path, os.X_OK):
                return path
    return shutil.which("shmcoll-run")


def main(argv=None):
    """Replaces this process with shmcoll-run and argv (default: sys.argv[1:])."""
    args = sys.argv[1:] if argv is None else list(argv)
    path = launcher()
    if path is None:
        sys.stderr.write(
            "python3 -m shmcoll.run: no shmcoll-run installed with this package nor on PATH\n"
        )
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, ["shmcoll-run"] + args)


if __name__ == "__main__":
    sys.exit(main())
