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
#   NAME      ompi (Open MPI) or mpich
#   PROG      nbc_progress built against that MPI; LIB its libshmcoll-mpi.so
#   --missing every case of NAME is a SKIP with REASON (no build of it)
#   --skip-all every case is a SKIP with REASON
#   --sanitized PROG and LIB are built with ASan+UBSan: the case with the interposer at
#             P = 2 only, the MPI's own leaks not reported
# Environment: NBC_PROGRESS_TIMEOUT bounds each run (seconds, default 300).
set -u
export LC_ALL=C # a decimal point in $EPOCHREALTIME

declare -A prog lib missing
skip_all=
sanitized=0
while [ $# -gt 0 ]; do
	case $1 in
	--skip-all)
		skip_all=$2
		shift 2
		;;
	--sanitized)
		sanitized=1
		shift
		;;
	--mpi)
		prog[$2]=$3
		lib[$2]=$4
		shift 4
		;;
	--missing)
		missing[$2]=$3
		shift 3
		;;
	*)
		echo "progress.sh: unknown argument '$1'" >&2
		exit 2
		;;
	esac
done

timeout_s=${NBC_PROGRESS_TIMEOUT:-300}
cpus=$(nproc)
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

mpis=(ompi mpich)
declare -A mpi_label=([ompi]="Open MPI" [mpich]=MPICH)
declare -A launcher=([ompi]=mpirun.openmpi [mpich]=mpiexec.mpich)

echo "TAP version 13"
echo "1..$((${#mpis[@]} * ${#cases[@]}))"
n=0

# The arenas of the interposer's communicators (job names mpi.*, sanitised).
arenas() {
	local f
	for f in /dev/shm/shmcoll."$(id -u)".mpi_*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
	done
}

run_case() {
	local impl=$1 p=$2 preload=$3 extra=$4 name=$5
	local cmd=() envs=(SHMCOLL_MPI_STATS=1) args=() why rc before after start took via
	local runtimes= iters=1000

	[ $sanitized = 1 ] &&
		runtimes=$(ldd "${lib[$impl]}" | awk '$1 ~ /^lib(a|ub)san\./ { print $3 }' | paste -sd:)
	case $impl in
	ompi)
		cmd=(mpirun.openmpi --allow-run-as-root -np "$p")
		[ "$p" -gt "$cpus" ] && cmd+=(--oversubscribe --bind-to none)
		envs+=("OMPI_MCA_btl=vader,self")
		;;
	mpich)
		cmd=(mpiexec.mpich -launcher fork -np "$p")
		;;
	esac
	# More ranks than CPUs: an MPI wait may sit out a scheduler time slice.
	[ "$p" -gt "$cpus" ] && iters=300
	args+=(--iters "$iters")
	[ "$preload" = 1 ] && envs+=("LD_PRELOAD=${runtimes:+$runtimes:}${lib[$impl]}")
	[ -n "$extra" ] && envs+=("$extra")
	before=$(arenas)
	start=$EPOCHREALTIME
	timeout -k 10 "$timeout_s" "${cmd[@]}" env "${envs[@]}" "${prog[$impl]}" "${args[@]}" \
		>"$log" 2>&1 </dev/null
	rc=$?
	took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	after=$(arenas)
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
	if [ -z "$why" ] && [ -n "$(comm -13 <(echo "$before") <(echo "$after"))" ]; then
		why="arenas left in /dev/shm: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"
	fi
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
	reason=$skip_all
	[ -z "$reason" ] && [ -n "${missing[$impl]:-}" ] && reason=${missing[$impl]}
	[ -z "$reason" ] && [ -z "${prog[$impl]:-}" ] && reason="no build of it was given"
	if [ -z "$reason" ] && ! command -v "${launcher[$impl]}" >/dev/null 2>&1; then
		reason="${launcher[$impl]} is not installed (scripts/setup installs it)"
	fi
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
