"""A torch.distributed program as written for torchrun, run unchanged under shmcoll-run and
under torchrun itself (python3 -m shmcoll.torchrun, torch's launcher made to start on
Debian's torch builds).

As a rank (under shmcoll-run), MODE is what the program does:
  shmcoll   import shmcoll.torch; dist.init_process_group("shmcoll") with no other argument,
            an all_reduce checked on every rank, then a gloo group over the same ranks
  gloo      dist.init_process_group("gloo", init_method="env://"), an all_reduce checked

    shmcoll-run -n 4 python3 torch_unchanged.py shmcoll

As the meson test (--tap SHMCOLL_RUN PACKAGE_DIR), it runs both modes at P = 1..4 under
shmcoll-run and under torchrun (its static rendezvous on a free port, and at P = 4 its
--standalone c10d one) and prints TAP: ok when every rank checked its results and the
launcher exited 0;
the whole test is skipped, saying why, where torch or the package cannot be imported.
"""

import os
import socket
import subprocess
import sys


def expect(cond, what):
    if not cond:
        raise SystemExit("rank %s: %s" % (os.environ.get("RANK"), what))


def rank_main(mode):
    import torch
    import torch.distributed as dist

    env = os.environ
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT"):
        expect(name in env, "%s is not set" % name)
    if mode == "shmcoll":
        import shmcoll.torch  # noqa: F401  (registers the backend)

        dist.init_process_group("shmcoll")
    else:
        dist.init_process_group("gloo", init_method="env://")
    rank, size = dist.get_rank(), dist.get_world_size()
    expect(rank == int(env["RANK"]) and size == int(env["WORLD_SIZE"]),
           "rank %d of %d, the environment says %s of %s" % (rank, size, env["RANK"],
                                                              env["WORLD_SIZE"]))
    expect(dist.get_backend() == mode, "backend %s" % dist.get_backend())
    t = torch.arange(1000, dtype=torch.float32) + rank
    dist.all_reduce(t)
    want = torch.arange(1000, dtype=torch.float32) * size + size * (size - 1) / 2
    expect(torch.equal(t, want), "all_reduce: %s, want %s" % (t[:4].tolist(), want[:4].tolist()))
    if mode == "shmcoll":
        # A second group over the same ranks, of torch's own backend, from the same store.
        gloo = dist.new_group(backend="gloo")
        u = torch.full((17,), float(rank + 1), dtype=torch.float64)
        dist.all_reduce(u, group=gloo)
        expect(torch.equal(u, torch.full((17,), size * (size + 1) / 2, dtype=torch.float64)),
               "gloo all_reduce: %s" % u[:2].tolist())
        dist.barrier()
    dist.destroy_process_group()
    # One write of the whole line: torchrun makes the ranks' output unbuffered, where print
    # writes the text and its newline apart and the ranks' lines interleave.
    sys.stdout.write("rank %d of %d: %s ok\n" % (rank, size, mode))
    sys.stdout.flush()


def free_port():
    """A TCP port free now on the loopback interface, for torchrun's store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tap_main(run, pkg):
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["SHMCOLL_TIMEOUT_MS"] = "60000"
    probe = subprocess.run([sys.executable, "-c", "import os, torch.distributed, shmcoll.torch; "
                            "print(os.environ.get('USE_LIBUV', ''))"],
                           env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["import failed"])[-1]
        print("1..0 # SKIP %s cannot import torch.distributed and shmcoll.torch: %s"
              % (sys.executable, why))
        return 0
    # A torch >= 2.4 built without libuv (Debian 13's) fails env:// rendezvous unless told
    # USE_LIBUV=0, under torchrun as under shmcoll-run; importing shmcoll.torch tells it
    # (the probe shows it did). The gloo program does not import it, so it is told here,
    # as its user would have to under shmcoll-run; the shmcoll program gets no help, nor does
    # any program under shmcoll.torchrun, which tells the ranks itself.
    gloo_env = dict(env)
    if probe.stdout.strip() == "0" and "USE_LIBUV" not in env:
        gloo_env["USE_LIBUV"] = "0"
    cases = [(launcher, p, mode) for launcher in ("shmcoll-run", "torchrun")
             for p in (1, 2, 3, 4) for mode in ("shmcoll", "gloo")]
    cases += [("torchrun --standalone", 4, mode) for mode in ("shmcoll", "gloo")]
    print("1..%d" % len(cases))
    failed = 0
    prog = os.path.abspath(__file__)
    for n, (launcher, p, mode) in enumerate(cases, 1):
        if launcher == "shmcoll-run":
            argv = [run, "-n", str(p)]
        elif launcher == "torchrun":
            argv = [sys.executable, "-m", "shmcoll.torchrun", "--nproc_per_node", str(p),
                    "--master_port", str(free_port())]
        else:
            argv = [sys.executable, "-m", "shmcoll.torchrun", "--standalone",
                    "--nproc_per_node", str(p)]
        argv += [sys.executable, prog, mode] if launcher == "shmcoll-run" else [prog, mode]
        try:
            r = subprocess.run(argv, env=gloo_env if (mode, launcher) == ("gloo", "shmcoll-run") else env,
                               stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=300)
            rc, out, err = r.returncode, r.stdout, r.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", e.stdout or "", e.stderr or ""
            out = out.decode() if isinstance(out, bytes) else out
            err = err.decode() if isinstance(err, bytes) else err
        oks = sorted(line for line in out.splitlines() if line.endswith(" ok"))
        want = sorted("rank %d of %d: %s ok" % (r, p, mode) for r in range(p))
        if rc == 0 and oks == want:
            print("ok %d - P=%d %s: torch unchanged under %s" % (n, p, mode, launcher))
        else:
            failed += 1
            print("not ok %d - P=%d %s under %s # exit %s" % (n, p, mode, launcher, rc))
            for line in (out + err).splitlines()[-15:]:
                print("#   %s" % line)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--skip":
        print("1..0 # SKIP %s" % sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--tap":
        sys.exit(tap_main(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 2 and sys.argv[1] in ("shmcoll", "gloo"):
        rank_main(sys.argv[1])
        sys.exit(0)
    sys.exit("usage: torch_unchanged.py shmcoll|gloo | --tap SHMCOLL_RUN PACKAGE_DIR | "
             "--skip REASON")
