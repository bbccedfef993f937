#!/usr/bin/env bash
# run.sh - the Python examples (meson test 'examples-python'): every program of
# examples/python/ under shmcoll-run at P = 1..4 with the build tree's package. Each program
# checks its own results and exits non-zero on a wrong one. Prints TAP: one line per program
# and rank count, ok when the job exited 0 and left no arena of its own in /dev/shm.
#
# usage: run.sh SHMCOLL_RUN PYTHON PACKAGE_DIR EXAMPLES_DIR, or run.sh --skip REASON
#   PYTHON       the interpreter the package was built for (meson's python_exe)
#   PACKAGE_DIR  the directory holding the built package shmcoll/ (PYTHONPATH)
#   EXAMPLES_DIR this directory (examples/python of the source tree)
# Environment: EXAMPLE_TIMEOUT bounds each job (seconds, default 120).
set -u
export LC_ALL=C

if [ "${1:-}" = --skip ]; then
	echo "1..0 # SKIP $2"
	exit 0
fi
run=$1 py=$2 pkg=$3 dir=$4
timeout_s=${EXAMPLE_TIMEOUT:-120}

if ! "$py" -c "import numpy" 2>/dev/null; then
	echo "1..0 # SKIP $py has no numpy (scripts/setup installs python3-numpy)"
	exit 0
fi

tmp=$(mktemp -d /tmp/shmcoll-pyexamples.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# torch_collectives.py needs torch (python3-torch); without it, it is skipped with the reason.
have_torch=0
"$py" -c "import torch.distributed" 2>/dev/null && have_torch=1

# program, its arguments, the fewest ranks it runs on (with the reason), and a module it needs
progs=(
	"collectives_tour.py"
	"global_stats.py"
	"mpi4py_course/demo_all.py"
	"mpi4py_course/tags.py|2|it sends messages between ranks"
	"mpi4py_course/nonblocking.py"
	"mpi4py_course/bench.py --quick --csv $tmp/bench.csv"
	"torch_collectives.py|1||torch"
)

n=0
for P in 1 2 3 4; do
	for entry in "${progs[@]}"; do
		IFS='|' read -r cmd min why needs <<<"$entry"
		read -r -a argv <<<"$cmd"
		name=${argv[0]}
		n=$((n + 1))
		if [ "$P" -lt "${min:-1}" ]; then
			echo "ok $n - P=$P $name # SKIP needs at least $min ranks: $why"
			continue
		fi
		if [ "${needs:-}" = torch ] && [ "$have_torch" = 0 ]; then
			echo "ok $n - P=$P $name # SKIP $py has no torch (scripts/setup installs python3-torch)"
			continue
		fi
		# The launcher records its pid, which names its job's arenas (j<pid>-...): a run
		# may only be blamed for its own, not for those of suites running beside it.
		start=$EPOCHREALTIME
		# shellcheck disable=SC2016 # $$, $0 and $@ are the inner shell's
		timeout -k 10 "$timeout_s" env PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" \
			SHMCOLL_TIMEOUT_MS=60000 PYTHONDONTWRITEBYTECODE=1 \
			sh -c 'echo $$ >"$0"; exec "$@"' "$tmp/pid" \
			"$run" -n "$P" "$py" "$dir/$name" "${argv[@]:1}" >"$tmp/log" 2>&1 </dev/null
		rc=$?
		took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
		left=()
		for f in /dev/shm/shmcoll."$(id -u)".j"$(cat "$tmp/pid")"-*; do
			[ -e "$f" ] && left+=("$f")
		done
		why=
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			why="timed out after $timeout_s s"
		elif [ "$rc" -ne 0 ]; then
			why="exited with status $rc"
		elif [ ${#left[@]} -gt 0 ]; then
			why="arenas left in /dev/shm: ${left[*]}"
		fi
		if [ -z "$why" ]; then
			echo "ok $n - P=$P $name ($took s)"
		else
			echo "not ok $n - P=$P $name: $why"
			tail -n 30 "$tmp/log" | sed 's/^/#   /'
			[ ${#left[@]} -gt 0 ] && rm -f "${left[@]}"  # this job's own, reported above
		fi
	done
done
echo "1..$n"
