#!/usr/bin/env bash
# progress.sh - the MPI progress test (meson test 'mpi-progress'): nbc_progress under each
# MPI, without and with libshmcoll-mpi.so preloaded, at P = 2..4 and with shmcoll's
# progress thread. Prints TAP, one case per run. A run passes when mpirun exits 0 before the
# timeout (a hang is the failure this test exists for), nbc_progress reports no failed
# check, under the interposer its statistics (SHMCOLL_MPI_STATS=1) show non-blocking
# collectives that ran through shmcoll, and no arena of the run is left in /dev/shm.
#
# usage: progress.sh [--skip-all REASON] [--sanitized] [--mpi NAME PROG LIB]...
#                    [--missing NAME REASON]...
#   the arguments of common.sh, PROG being nbc_progress; --sanitized runs the case with the
#   interposer at P = 2 only, the MPI's own leaks not reported
# Environment: NBC_PROGRESS_TIMEOUT bounds each run (seconds, default 300).
set -u
. "$(dirname "$0")/common.sh"
mpi_parse_args progress.sh "$@"

timeout_s=${NBC_PROGRESS_TIMEOUT:-300}
log=$(mktemp /tmp/shmcoll-mpi-progress.XXXXXX)
trap 'rm -f "$log"' EXIT

# The cases of one MPI: "P|preload (0/1)|extra environment|name".
cases=()
if [ $sanitized = 1 ]; then
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
	cases+=("2|1||P=2 with the interposer, ASan+UBSan")
else
	cases+=("2|0||P=2 without the interposer")
	for p in 2 3 4; do
		cases+=("$p|1||P=$p with the interposer")
	done
	cases+=("2|1|SHMCOLL_PROGRESS_THREAD=1|P=2 with the interposer and shmcoll's progress thread")
fi

echo "TAP version 13"
echo "1..$((${#mpis[@]} * ${#cases[@]}))"
n=0

run_case() {
	local impl=$1 p=$2 preload=$3 extra=$4 name=$5
	local cmd=() envs=() args=() why via iters=1000

	mpi_launch "$impl" "$p" "$preload"
	# More ranks than CPUs: an MPI wait may sit out a scheduler time slice.
	[ "$p" -gt "$cpus" ] && iters=300
	args+=(--iters "$iters")
	[ -n "$extra" ] && envs+=("$extra")
	mpi_run "$log" "$timeout_s" "${cmd[@]}" env "${envs[@]}" "${prog[$impl]}" "${args[@]}"
	why=
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		why="timed out after $timeout_s s (a hang)"
	elif [ $rc -ne 0 ]; then
		why="exit status $rc"
	elif ! grep -q "^nbc_progress: P=$p: $iters iterations, [0-9]* checks, 0 failed\$" "$log"; then
		why="no summary line from nbc_progress"
	elif [ "$preload" = 1 ]; then
		via=$(sed -n 's/^shmcoll-mpi: MPI_Iallreduce \([0-9]*\) via shmcoll.*/\1/p' "$log" | tail -n 1)
		[ "${via:-0}" -gt 0 ] ||
			why="no MPI_Iallreduce ran through shmcoll (statistics: '${via}')"
	elif grep -q '^shmcoll-mpi:' "$log"; then
		why="statistics printed without the interposer"
	fi
	[ -z "$why" ] && [ -n "$left" ] && why="arenas left in /dev/shm: ${left//$'\n'/ }"
	n=$((n + 1))
	if [ -z "$why" ]; then
		echo "ok $n - ${mpi_label[$impl]}: $name"
		echo "# ${cmd[*]} env ${envs[*]} ${prog[$impl]##*/} ${args[*]}: $took s"
		grep -E '^nbc_progress:|^shmcoll-mpi: MPI_I(allreduce|bcast|barrier) ' "$log" | sed 's/^/# /'
	else
		echo "not ok $n - ${mpi_label[$impl]}: $name"
		printf '%s\n' "$why" | sed 's/^/# /'
		tail -n 40 "$log" | sed 's/^/#   /'
	fi
}

for impl in "${mpis[@]}"; do
	reason=$(mpi_skip_reason "$impl")
	for c in "${cases[@]}"; do
		IFS='|' read -r p preload extra name <<<"$c"
		if [ -n "$reason" ]; then
			n=$((n + 1))
			echo "ok $n - ${mpi_label[$impl]}: $name # SKIP $reason"
			continue
		fi
		run_case "$impl" "$p" "$preload" "$extra" "$name"
	done
done
