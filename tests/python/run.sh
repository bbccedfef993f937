#!/usr/bin/env bash
# run.sh - the Python test (meson test 'python'): the pytest files of tests/python/ run by
# shmcoll-run at P = 1..4 with the build tree's package. Prints TAP: one line per test and
# rank count, ok when the test passed (or skipped, with its reason) on every rank; a run that
# ended badly on some rank (a crash, a hang cut by the timeout) is one more line, not ok, with
# the end of its output. A run also fails when it leaves an arena in /dev/shm.
#
# usage: run.sh SHMCOLL_RUN PYTHON PACKAGE_DIR TEST_DIR, or run.sh --skip REASON
#   PYTHON       the interpreter the package was built for (meson's python_exe)
#   PACKAGE_DIR  the directory holding the built package shmcoll/ (PYTHONPATH)
# Environment: PYTEST_TIMEOUT bounds each run (seconds, default 600).
set -u
export LC_ALL=C

if [ "${1:-}" = --skip ]; then
	echo "1..0 # SKIP $2"
	exit 0
fi
run=$1 py=$2 pkg=$3 dir=$4
timeout_s=${PYTEST_TIMEOUT:-600}

if ! "$py" -c "import pytest, numpy" 2>/dev/null; then
	echo "1..0 # SKIP $py has no pytest or numpy (scripts/setup installs python3-pytest and python3-numpy)"
	exit 0
fi

tmp=$(mktemp -d /tmp/shmcoll-pytest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The arenas a run can leave: the launcher's jobs (j...) with their dups and splits, and the
# tests' own jobs (pytest-...) and torch process groups' (pt...); not those of other suites.
arenas() {
	local f
	for f in /dev/shm/shmcoll."$(id -u)".j* /dev/shm/shmcoll."$(id -u)".pytest-* /dev/shm/shmcoll."$(id -u)".pt*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
	done
}

n=0
for P in 1 2 3 4; do
	before=$(arenas)
	start=$EPOCHREALTIME
	# SHMCOLL_TIMEOUT_MS bounds a wait for a rank that failed out of step with the others.
	timeout -k 10 "$timeout_s" env PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" \
		SHMCOLL_TIMEOUT_MS=60000 PYTHONDONTWRITEBYTECODE=1 \
		"$run" -n "$P" sh -c 'exec "$0" -m pytest -q -p no:cacheprovider -o junit_family=xunit2 \
			--junitxml="$1/P$2-rank$SHMCOLL_RANK.xml" "$3"' "$py" "$tmp" "$P" "$dir" \
		>"$tmp/P$P.log" 2>&1 </dev/null
	rc=$?
	took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	after=$(arenas)
	# Per test: its outcome on every rank; ok when it passed or skipped everywhere.
	"$py" - "$tmp" "$P" "$n" <<'EOF' >"$tmp/P$P.tap"
import glob, sys, xml.etree.ElementTree as ET
tmp, P, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tests = {}
files = sorted(glob.glob("%s/P%d-rank*.xml" % (tmp, P)))
for f in files:
    rank = f.rsplit("rank", 1)[1][:-4]
    for case in ET.parse(f).getroot().iter("testcase"):
        name = "%s::%s" % (case.get("classname", "").rsplit(".", 1)[-1], case.get("name"))
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skip = case.find("skipped")
        tests.setdefault(name, []).append((rank, bad, skip))
for name, outs in tests.items():
    n += 1
    bad = [(r, b) for r, b, s in outs if b is not None]
    if len(outs) != P:
        print("not ok %d - P=%d %s # ran on %d of %d ranks" % (n, P, name, len(outs), P))
    elif bad:
        print("not ok %d - P=%d %s" % (n, P, name))
        for r, b in bad[:2]:
            for line in (b.get("message") or "").splitlines()[:6]:
                print("#   rank %s: %s" % (r, line))
    elif all(s is not None for _, _, s in outs):
        why = (outs[0][2].get("message") or "skipped").splitlines()[0]
        print("ok %d - P=%d %s # SKIP %s" % (n, P, name, why))
    else:
        print("ok %d - P=%d %s" % (n, P, name))
print("# files %d" % len(files))
EOF
	cat "$tmp/P$P.tap"
	n=$((n + $(grep -c '^\(not \)\?ok ' "$tmp/P$P.tap")))
	files=$(sed -n 's/^# files //p' "$tmp/P$P.tap")
	why=
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		why="timed out after $timeout_s s"
	elif [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$tmp/P$P.tap"; then
		why="shmcoll-run exited with status $rc"
	elif [ "${files:-0}" -ne "$P" ]; then
		why="only ${files:-0} of $P ranks wrote their results"
	elif [ -n "$(comm -13 <(echo "$before") <(echo "$after"))" ]; then
		why="arenas left in /dev/shm: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
	fi
	n=$((n + 1))
	if [ -z "$why" ]; then
		echo "ok $n - P=$P: the run ended cleanly ($took s)"
	else
		echo "not ok $n - P=$P: $why"
		tail -n 40 "$tmp/P$P.log" | sed 's/^/#   /'
	fi
done
# The Python benchmark runs and reports (its numbers are for docs/BENCHMARKS.md, not here).
n=$((n + 1))
bench=$dir/../../bench/python/overhead.py
if env PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" timeout -k 10 300 "$run" -n 2 "$py" "$bench" \
	--reps 2 --iters 200 >"$tmp/bench.log" 2>&1 && grep -q "Python's cost per call" "$tmp/bench.log"; then
	echo "ok $n - bench/python/overhead.py under shmcoll-run -n 2"
else
	echo "not ok $n - bench/python/overhead.py under shmcoll-run -n 2"
	tail -n 20 "$tmp/bench.log" | sed 's/^/#   /'
fi
echo "1..$n"
