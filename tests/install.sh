#!/usr/bin/env bash
# install.sh - shmcoll as a user gets it: `meson install` into a staging root,
# programs written only against the contract built with
# `cc ... $(pkg-config --cflags --libs shmcoll)` against the installed header,
# the contract program run under the installed shmcoll-run for P = 1..8, and
# the installed benchmark, shmcoll-bench, run under it, and the Python package imported
# from where Debian's /usr/bin/python3 looks for it.
# Output is TAP (one line per check) for meson.
# usage: tests/install.sh BUILDDIR SOURCEDIR
set -u
build=$1
src=$2
root=$(mktemp -d /tmp/shmcoll-install.XXXXXX)
trap 'rm -rf "$root"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' "$root/log"; }
check() { local what=$1; shift; if "$@" >"$root/log" 2>&1; then ok "$what"; else not_ok "$what"; fi; }

echo "TAP version 13"
# An instrumented libshmcoll.so cannot load into the uninstrumented programs
# built here (ASan must come first): say so instead of failing.
sanitize=$(meson introspect --buildoptions "$build" 2>/dev/null |
	python3 -c 'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"), "none"))' 2>/dev/null)
if [ -n "$sanitize" ] && [ "$sanitize" != none ]; then
	echo "1..0 # SKIP sanitizer build (b_sanitize=$sanitize): installed programs are not instrumented"
	exit 0
fi
echo "1..20"
check "meson install into a staging root" meson install -C "$build" --destdir "$root/stage" --no-rebuild
pc=$(find "$root/stage" -name shmcoll.pc | head -n 1)
run=$(find "$root/stage" -name shmcoll-run -type f | head -n 1)
hdr=$(find "$root/stage" -name shmcoll.h | head -n 1)
lib=$(find "$root/stage" -name 'libshmcoll.so*' | head -n 1)
bench=$(find "$root/stage" -name shmcoll-bench -type f | head -n 1)
check "installed: shmcoll.h, libshmcoll.so, libshmcoll.a, shmcoll-run, shmcoll.pc" \
	test -n "$pc" -a -n "$run" -a -n "$hdr" -a -n "$lib" -a -n "$(find "$root/stage" -name libshmcoll.a)"
export PKG_CONFIG_PATH=$(dirname "${pc:-/nonexistent}")
export PKG_CONFIG_SYSROOT_DIR=$root/stage
flags=$(pkg-config --cflags --libs shmcoll 2>"$root/log")
# -I "$src" only for the tests' own headers (tests/matrix.h, tests/harness.h);
# shmcoll.h comes from the installed include directory.
check "contract program builds with pkg-config flags" \
	cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Werror -I "$src" -o "$root/contract" "$src/tests/progs/contract.c" \
	"$src/tests/matrix.c" "$src/tests/harness.c" $flags
check "demo builds with pkg-config flags" \
	cc -std=c11 -O2 -Wall -Werror -o "$root/demo" "$src/examples/demo.c" $flags
export LD_LIBRARY_PATH=$(dirname "${lib:-/nonexistent}")
# The benchmark is installed next to the launcher, and runs from there.
check "installed: shmcoll-bench, next to shmcoll-run" \
	test -n "$bench" -a -x "${bench:-/nonexistent}" -a "$(dirname "${bench:-/a}")" = "$(dirname "${run:-/b}")"
check "installed shmcoll-bench --help" sh -c '"$1" --help | grep -q "shmcoll-bench p2p"' sh "${bench:-/nonexistent}"
check "installed shmcoll-bench p2p under installed shmcoll-run -n 2" \
	timeout 600 "$run" -n 2 "${bench:-/nonexistent}" p2p --max-bytes 1K --iters-scale 0.01
tune=$(find "$root/stage" -name shmcoll-tune -type f | head -n 1)
check "installed: shmcoll-tune, next to shmcoll-run" \
	test -n "$tune" -a -x "${tune:-/nonexistent}" -a "$(dirname "${tune:-/a}")" = "$(dirname "${run:-/b}")"
# It finds the installed launcher and benchmark beside itself, and checks what it wrote.
check "installed shmcoll-tune --quick writes a file it then takes" \
	env -u SHMCOLL_RUN -u SHMCOLL_BENCH SHMCOLL_TUNE=none timeout 600 "${tune:-/nonexistent}" \
	--quick -n 2 -o "$root/tune"
export SHMCOLL_ARENA_BYTES=98304 SHMCOLL_TIMEOUT_MS=60000
for p in 1 2 3 4 5 6 7 8; do
	check "contract program under shmcoll-run -n $p" timeout 600 "$run" -n "$p" "$root/contract"
done
# The Python package: installed into a directory on the sys.path of the interpreter it was
# built for (python_exe), so "import shmcoll" works there without PYTHONPATH once installed.
py=$(meson introspect --buildoptions "$build" 2>/dev/null |
	python3 -c 'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "python_exe"), ""))' 2>/dev/null)
ext=$(find "$root/stage" -name '_shmcoll*.so' | head -n 1)
if [ -z "$ext" ]; then
	for what in "installed: the Python package shmcoll" "on the sys.path of $py" \
		"the installed package under the installed shmcoll-run -n 2"; do
		n=$((n + 1))
		echo "ok $n - $what # SKIP the package was not built (no python3-dev for ${py:-python3})"
	done
	exit 0
fi
pkgdir=$(dirname "$(dirname "$ext")")
check "installed: the Python package shmcoll" test -f "$pkgdir/shmcoll/__init__.py" -a -f "$pkgdir/shmcoll/_comm.py" \
	-a -f "$pkgdir/shmcoll/MPI.py" -a -f "$pkgdir/shmcoll/torch.py"
check "on the sys.path of $py: ${pkgdir#"$root/stage"}" \
	"$py" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "${pkgdir#"$root/stage"}"
cat >"$root/prog.py" <<'PY'
import array, shmcoll
c = shmcoll.init()
x = array.array("d", [c.rank + 1.0])
c.Allreduce(shmcoll.IN_PLACE, x)
assert x[0] == c.size * (c.size + 1) / 2, x
assert c.allgather(c.rank) == list(range(c.size))
PY
check "the installed package under the installed shmcoll-run -n 2" \
	env PYTHONPATH="$pkgdir" timeout 600 "$run" -n 2 "$py" "$root/prog.py"

