#!/usr/bin/env bash
# wheel.sh - the Python package as a pip user gets it (pyproject.toml, meson-python): a wheel
# built from the source tree with `python3 -m build --wheel --no-isolation`, installed with pip
# into a new venv (--system-site-packages, for Debian's numpy, torch, pytest and mpi4py), then
# used from a directory outside the source tree with nothing but the venv's PATH: import
# shmcoll, an example under the venv's shmcoll-run at P = 4, the same under
# `python -m shmcoll.run`, and the Python tests (tests/python/run.sh) at P = 1..4 against the
# installed package, each of their lines one line here. Last, `pip install .` of the source
# tree into a second venv, and an example there. No index: --no-index, --no-build-isolation.
# Output is TAP for meson; the plan comes last (the Python tests' count is known only then).
# Takes about 2 minutes on 2 idle cores: the Python tests (1.5 of them) and two builds of the
# library and extension (about 10 s each).
#
# usage: tests/wheel.sh SOURCEDIR PYTHON, or tests/wheel.sh --skip REASON
#   PYTHON  the interpreter to build and install for (meson's python_exe)
set -u
export LC_ALL=C

if [ "${1:-}" = --skip ]; then
	echo "1..0 # SKIP $2"
	exit 0
fi
src=$(cd "$1" && pwd)
py=$2

# What building and installing with pip takes on Debian: python3-venv (venv with its pip),
# python3-build and python3-mesonpy (scripts/setup installs them).
for need in "venv, ensurepip|python3-venv" "build|python3-build" "mesonpy|python3-mesonpy"; do
	if ! "$py" -c "import ${need%|*}" 2>/dev/null; then
		echo "1..0 # SKIP $py cannot import ${need%|*} (scripts/setup installs ${need#*|})"
		exit 0
	fi
done

tmp=$(mktemp -d /tmp/shmcoll-wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/work"
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; tail -n 40 "$tmp/log" | sed 's/^/# /'; }
check() { local what=$1; shift; if "$@" >"$tmp/log" 2>&1; then ok "$what"; else not_ok "$what"; fi; }
# The rest of the checks only say why they did not run once a step they need failed.
skip_rest() {
	n=$((n + 1))
	echo "not ok $n - $1 # $2"
	echo "1..$n"
	exit 0
}
# This user's arenas, to show the installed package's jobs left none.
arenas() {
	local f
	for f in /dev/shm/shmcoll."$(id -u)".*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
	done
}
before=$(arenas)

echo "TAP version 13"
# The build runs in the source tree (meson-python builds in place, in a directory it removes).
check "python3 -m build --wheel --no-isolation" \
	sh -c 'cd "$1" && exec "$2" -m build --wheel --no-isolation --outdir "$3" .' sh "$src" "$py" "$tmp/dist"
whl=$(find "$tmp/dist" -name 'shmcoll-*.whl' 2>/dev/null | head -n 1)
[ -n "$whl" ] || skip_rest "a wheel" "none was built"
# The library inside the package, beside the extension; the launcher as a script; nothing for
# C programs (the meson install has those).
check "the wheel holds libshmcoll.so and the extension in shmcoll/, the modules and shmcoll-run, no header" \
	"$py" - "$whl" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
want = ["shmcoll/libshmcoll.so", "shmcoll/__init__.py", "shmcoll/run.py", "shmcoll/torch.py",
        "shmcoll/MPI.py"]
missing = [w for w in want if w not in names]
missing += [] if any(n.startswith("shmcoll/_shmcoll.") and n.endswith(".so") for n in names) else ["the extension"]
missing += [] if any(n.endswith(".data/scripts/shmcoll-run") for n in names) else ["shmcoll-run"]
extra = [n for n in names if n.endswith((".h", ".a", ".pc"))]
print("\n".join(names))
sys.exit(bool(missing or extra) and "missing %s, extra %s" % (missing, extra))
EOF

venv=$tmp/venv
check "a venv with --system-site-packages" "$py" -m venv --system-site-packages "$venv"
check "pip install --no-index --no-build-isolation the wheel" \
	"$venv/bin/python" -m pip install --no-index --no-build-isolation --no-cache-dir "$whl"

# From here on, as a user of the venv: its bin/ first on PATH, no LD_LIBRARY_PATH, no
# PYTHONPATH, a working directory outside the source tree.
cd "$tmp/work" || exit 1
export PATH="$venv/bin:$PATH" PYTHONDONTWRITEBYTECODE=1 SHMCOLL_TIMEOUT_MS=60000
unset LD_LIBRARY_PATH PYTHONPATH
check "import shmcoll: the venv's package, its library from inside it, the version pip knows" \
	python - "$venv" <<'EOF'
import importlib.metadata, os, sys
import shmcoll
pkg = os.path.dirname(os.path.realpath(shmcoll.__file__))
assert pkg.startswith(os.path.realpath(sys.argv[1]) + os.sep), pkg
libs = {l.split()[-1] for l in open("/proc/self/maps") if "libshmcoll.so" in l}
assert libs == {os.path.join(pkg, "libshmcoll.so")}, libs
assert shmcoll.__version__ == importlib.metadata.version("shmcoll"), shmcoll.__version__
EOF
check "shmcoll-run on PATH is the venv's" test "$(command -v shmcoll-run)" = "$venv/bin/shmcoll-run"
check "shmcoll-run -n 4 python examples/python/collectives_tour.py" \
	timeout -k 10 300 shmcoll-run -n 4 python "$src/examples/python/collectives_tour.py"
check "python -m shmcoll.run -n 2 python examples/python/global_stats.py" \
	timeout -k 10 300 python -m shmcoll.run -n 2 python "$src/examples/python/global_stats.py"
check "python -m shmcoll.run --version is shmcoll-run's" \
	test "$(python -m shmcoll.run --version 2>&1)" = "$(shmcoll-run --version 2>&1)"

# The Python tests against the installed package: the venv's launcher and interpreter, and an
# empty package directory (no PYTHONPATH), so "import shmcoll" finds the venv's.
bash "$src/tests/python/run.sh" "$venv/bin/shmcoll-run" "$venv/bin/python" "" "$src/tests/python" \
	>"$tmp/pytests.tap" 2>&1
if grep -q '^1\.\.0 # SKIP' "$tmp/pytests.tap"; then
	n=$((n + 1))
	echo "ok $n - tests/python against the installed package # SKIP $(sed -n 's/^1\.\.0 # SKIP //p' "$tmp/pytests.tap")"
elif ! grep -q '^1\.\.[1-9]' "$tmp/pytests.tap"; then
	cp "$tmp/pytests.tap" "$tmp/log"
	not_ok "tests/python against the installed package: no plan (it ended early)"
else
	# Each of its lines as one of ours, renumbered, and its comments kept.
	while IFS= read -r line; do
		case "$line" in
		"ok "* | "not ok "*)
			n=$((n + 1))
			status=${line%% [0-9]*}
			rest=${line#"$status "}
			rest=${rest#* - }
			echo "$status $n - installed: $rest"
			;;
		"#"*) echo "$line" ;;
		esac
	done <"$tmp/pytests.tap"
fi

# pip install . from the source tree (built in place by meson-python) into a second venv.
venv2=$tmp/venv2
check "a second venv" "$py" -m venv --system-site-packages "$venv2"
check "pip install --no-index --no-build-isolation . (the source tree)" \
	"$venv2/bin/python" -m pip install --no-index --no-build-isolation --no-cache-dir "$src"
check "there: shmcoll-run -n 4 python examples/python/global_stats.py" \
	env PATH="$venv2/bin:$PATH" timeout -k 10 300 shmcoll-run -n 4 python "$src/examples/python/global_stats.py"

check "no arena left in /dev/shm by the installed package's jobs" \
	sh -c '[ -z "$1" ] || { echo "left: $1"; exit 1; }' sh "$(comm -13 <(echo "$before") <(arenas) | tr '\n' ' ')"
echo "1..$n"
