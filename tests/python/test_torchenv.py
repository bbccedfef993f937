"""shmcoll._torchenv and shmcoll._torchworker: the repairs python3 -m shmcoll.torchrun makes to
Debian's torch builds (the launcher itself runs in the meson test torch-unchanged)."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="python3-torch is not installed")
from shmcoll import _torchenv  # noqa: E402 (after the skip)
from torch.distributed.elastic.multiprocessing import api  # noqa: E402


def test_std_parse():
    """torchrun's --redirects/--tee values, parsed by value: 0..3 or rank:value lists."""
    std = api.Std
    for v in range(4):
        assert _torchenv._std_from_str(std, str(v)) == std(v)
    assert _torchenv._std_from_str(std, "0") is std.NONE
    assert _torchenv._std_from_str(std, "0:3,1:0,12:1") == {0: std.ALL, 1: std.NONE, 12: std.OUT}
    for bad in ("", "4", "1:4", "0:1,", "a", "-1"):
        with pytest.raises(ValueError):
            _torchenv._std_from_str(std, bad)


def test_std_parse_repaired():
    """After fix_std_parse, torch's own parse gives the flag of value 0 (on the torch and
    Python where it returned None, and unchanged where it did not)."""
    _torchenv.fix_std_parse()
    assert api.Std.from_str("0") is api.Std.NONE
    assert api.Std.from_str("1:2") == {1: api.Std.ERR}


def test_stores_without_libuv():
    """Where libuv is missing, a store made without the argument starts; elsewhere nothing
    changes."""
    import torch.distributed as dist

    missing = _torchenv.stores_without_libuv()
    assert missing == _torchenv.libuv_missing()
    store = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    store.set("k", "v")
    assert store.get("k") == b"v"


@pytest.mark.parametrize("as_module", [False, True])
def test_worker_runs_program_as_python(tmp_path, as_module):
    """_torchworker runs a script, or a module with -m, as python would: __name__, argv,
    sys.path[0], the exit status."""
    prog = tmp_path / "prog_torchworker.py"
    prog.write_text(
        "import sys\n"
        "print(__name__, sys.argv[1:], sys.path[0])\n"
        "sys.exit(int(sys.argv[-1]))\n")
    target = ["-m", "prog_torchworker"] if as_module else [str(prog)]
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(_torchenv.__file__)))
    path = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=pkg + (os.pathsep + path if path else ""))
    r = subprocess.run([sys.executable, "-m", "shmcoll._torchworker"] + target + ["a", "3"],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert r.stdout.split() == ["__main__", "['a',", "'3']", str(tmp_path)]
