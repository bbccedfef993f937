#!/usr/bin/env bash
# mpi4py_compare.sh - the mpi4py comparison (meson test 'mpi4py-compare'): each program of
# tests/python/mpi4py/ is an mpi4py program; it runs at P = 1, 2, 3 and 4 under Open MPI's mpirun
# with mpi4py, and again under shmcoll-run with its one import line changed to
# `from shmcoll import MPI`. The two outputs, sorted (ranks print in any order), must be
# the same. Prints TAP: one line per program and rank count, with the diff when they differ.
#
# usage: mpi4py_compare.sh SHMCOLL_RUN PYTHON PACKAGE_DIR PROGRAM_DIR, or --skip REASON
#   PYTHON       the interpreter the package was built for (it must import mpi4py too)
#   PACKAGE_DIR  the directory holding the built package shmcoll/ (PYTHONPATH)
# Environment: MPIRUN (default mpirun.openmpi), COMPARE_TIMEOUT per run (seconds, default 120).
set -u
export LC_ALL=C

if [ "${1:-}" = --skip ]; then
	echo "1..0 # SKIP $2"
	exit 0
fi
run=$1 py=$2 pkg=$3 dir=$4
mpirun=${MPIRUN:-mpirun.openmpi}
timeout_s=${COMPARE_TIMEOUT:-120}

if ! "$py" -c "import numpy" 2>/dev/null; then
	echo "1..0 # SKIP $py has no numpy (scripts/setup installs python3-numpy)"
	exit 0
fi
# Loaded, not initialized: an import initializes MPI, and Open MPI 5 started without mpirun
# (a singleton) leaves its sm_segment.* in /dev/shm at exit.
if ! "$py" -c "import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI" 2>/dev/null; then
	echo "1..0 # SKIP $py has no mpi4py (scripts/setup installs python3-mpi4py)"
	exit 0
fi
if ! command -v "$mpirun" >/dev/null; then
	echo "1..0 # SKIP no $mpirun (Open MPI's launcher, from python3-mpi4py's dependencies)"
	exit 0
fi

tmp=$(mktemp -d /tmp/shmcoll-mpi4py.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

n=0
for prog in "$dir"/*.py; do
	name=$(basename "$prog" .py)
	# The program as a shmcoll user runs it: its import line, and nothing else, changed.
	sed 's/^from mpi4py import MPI$/from shmcoll import MPI/' "$prog" >"$tmp/$name.py"
	if cmp -s "$prog" "$tmp/$name.py"; then
		n=$((n + 1))
		echo "not ok $n - $name: no line 'from mpi4py import MPI' to change"
		continue
	fi
	for P in 1 2 3 4; do
		n=$((n + 1))
		# Each rank prints to a file of its own (ranks that share one stdout can split each
		# other's lines); the launchers say the rank in OMPI_COMM_WORLD_RANK, SHMCOLL_RANK.
		# shellcheck disable=SC2016
		per_rank='exec "$0" "$1" >"$2.${OMPI_COMM_WORLD_RANK:-$SHMCOLL_RANK}"'
		rm -f "$tmp"/out.*
		# As root in a container Open MPI needs --allow-run-as-root, and more ranks than CPUs.
		timeout -k 10 "$timeout_s" "$mpirun" --allow-run-as-root --oversubscribe \
			-n "$P" sh -c "$per_rank" "$py" "$prog" "$tmp/out.m" \
			>"$tmp/$name.$P.mpi4py.err" 2>&1 </dev/null
		rc_m=$?
		timeout -k 10 "$timeout_s" env PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" \
			SHMCOLL_TIMEOUT_MS=60000 PYTHONDONTWRITEBYTECODE=1 \
			"$run" -n "$P" sh -c "$per_rank" "$py" "$tmp/$name.py" "$tmp/out.s" \
			>"$tmp/$name.$P.shmcoll.err" 2>&1 </dev/null
		rc_s=$?
		cat "$tmp"/out.m.* 2>/dev/null | sort >"$tmp/$name.$P.mpi4py"
		cat "$tmp"/out.s.* 2>/dev/null | sort >"$tmp/$name.$P.shmcoll"
		lines=$(wc -l <"$tmp/$name.$P.mpi4py")
		if [ "$rc_m" -ne 0 ]; then
			echo "not ok $n - $name P=$P: mpi4py's run exited with status $rc_m"
			tail -n 15 "$tmp/$name.$P.mpi4py.err" | sed 's/^/#   /'
			cat "$tmp"/out.m.* 2>/dev/null | tail -n 5 | sed 's/^/#   /'
		elif [ "$rc_s" -ne 0 ]; then
			echo "not ok $n - $name P=$P: shmcoll's run exited with status $rc_s"
			tail -n 15 "$tmp/$name.$P.shmcoll.err" | sed 's/^/#   /'
			cat "$tmp"/out.s.* 2>/dev/null | tail -n 5 | sed 's/^/#   /'
		elif [ "$lines" -eq 0 ]; then
			echo "not ok $n - $name P=$P: no output to compare"
		elif ! diff -u "$tmp/$name.$P.mpi4py" "$tmp/$name.$P.shmcoll" >"$tmp/diff"; then
			echo "not ok $n - $name P=$P: the outputs differ (- mpi4py, + shmcoll)"
			tail -n +3 "$tmp/diff" | head -n 30 | sed 's/^/#   /'
		else
			echo "ok $n - $name P=$P: $lines lines the same as mpi4py's"
		fi
	done
done
echo "1..$n"
