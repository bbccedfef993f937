#!/usr/bin/env bash
# run.sh - the MPI test (meson test 'mpi'): mpi_check under each MPI, without
# and with libshmcoll-mpi.so preloaded, at P = 1..4, and with the interposer
# switched off, over simulated nodes, and with two threads. Prints TAP, one
# case per run. A run passes when mpirun exits 0, mpi_check reports no
# difference, the interposer's statistics (SHMCOLL_MPI_STATS=1) show the calls
# went where they should (mpi_check prints, per collective, how many of its
# calls the interposer should take and how many pass on), and no arena of the
# run is left in /dev/shm.
#
# usage: run.sh [--skip-all REASON] [--sanitized] [--mpi NAME PROG LIB]...
#               [--missing NAME REASON]...
#   the arguments of common.sh, PROG being mpi_check; --sanitized runs the
#   cases with the interposer only (a few, the calls being the same), the
#   MPI's own leaks not reported
# Environment: MPI_CHECK_TIMEOUT bounds each run (seconds, default 900).
set -u
. "$(dirname "$0")/common.sh"
mpi_parse_args run.sh "$@"

timeout_s=${MPI_CHECK_TIMEOUT:-900}
colls=(MPI_Allreduce MPI_Reduce MPI_Bcast MPI_Allgather MPI_Reduce_scatter_block
	MPI_Gather MPI_Scatter MPI_Alltoall MPI_Barrier MPI_Reduce_scatter MPI_Scan MPI_Exscan
	MPI_Allgatherv MPI_Gatherv MPI_Scatterv MPI_Alltoallv MPI_Iallreduce MPI_Ireduce MPI_Ibcast
	MPI_Iallgather MPI_Ireduce_scatter_block MPI_Igather MPI_Iscatter MPI_Ialltoall MPI_Ibarrier
	MPI_Iallgatherv MPI_Igatherv MPI_Iscatterv MPI_Ialltoallv MPI_Ireduce_scatter MPI_Iscan
	MPI_Iexscan)
log=$(mktemp /tmp/shmcoll-mpi-test.XXXXXX)
trap 'rm -f "$log"' EXIT

# The cases of one MPI: "P|preload (0/1)|extra environment|expectation|name".
# Expectations: none (no interposer, so no statistics at all), all (exactly
# the calls mpi_check expects the interposer to take ran through shmcoll, and
# exactly the others fell back), off (none ran through shmcoll). Across
# simulated nodes (SHMCOLL_MPI_NODE_SPLIT) it is all as well, with the path
# the whole communicator's setup took (SHMCOLL_MPI_DEBUG=1): all:wide, through
# shmcoll's own multi-node communicator over PMPI (nodes of one size), or
# all:composed, the interposer's own composition (nodes of different sizes); every
# collective that composes there (the nine, and the blocking MPI_Allgatherv,
# MPI_Reduce_scatter, MPI_Gatherv and MPI_Scatterv) must, and a call that fell
# back to PMPI on a communicator that spans nodes would show as one fallback
# too many.
cases=()
if [ $sanitized = 1 ]; then
	# Last: a later setting of an option wins (scripts/test sets detect_leaks=1).
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
	cases+=("2|1||all|P=2 with the interposer, ASan+UBSan")
	cases+=("4|1|SHMCOLL_MPI_NODE_SPLIT=2|all:wide|P=4 on 2 nodes of 2 ranks, ASan+UBSan")
	cases+=("2|1|MPI_CHECK_ARGS=--threads|all|P=2, two threads at once, ASan+UBSan")
else
	# Without the interposer: mpi_check's own reference against the MPI, at a
	# power of two and not. (More ranks than CPUs cost MPICH a scheduler time
	# slice per wait, ~40 s a case: each case below earns its time.)
	for p in 2 3; do
		cases+=("$p|0||none|P=$p without the interposer")
	done
	for p in 1 2 3 4; do
		cases+=("$p|1||all|P=$p with the interposer")
	done
	cases+=("2|1|SHMCOLL_MPI=0|off|P=2 with the interposer switched off (SHMCOLL_MPI=0)")
	cases+=("4|1|SHMCOLL_MPI_NODE_SPLIT=2|all:wide|P=4 on 2 nodes of 2 ranks (SHMCOLL_MPI_NODE_SPLIT=2)")
	cases+=("3|1|SHMCOLL_MPI_NODE_SPLIT=2|all:composed|P=3 on nodes of 2 and 1 ranks (SHMCOLL_MPI_NODE_SPLIT=2)")
	cases+=("4|1|SHMCOLL_MPI_NODE_SPLIT=cyclic:2|all:wide|P=4 on 2 interleaved nodes (SHMCOLL_MPI_NODE_SPLIT=cyclic:2)")
	cases+=("3|1|SHMCOLL_MPI_NODE_SPLIT=cyclic:2|all:composed|P=3 on interleaved nodes of 2 and 1 ranks (SHMCOLL_MPI_NODE_SPLIT=cyclic:2)")
	# Every rank a node of its own: nothing for shared memory to do, so the
	# interposer leaves every call to PMPI (mpi_check expects that there).
	cases+=("2|1|SHMCOLL_MPI_NODE_SPLIT=1|all|P=2 on 2 nodes of 1 rank, all to PMPI (SHMCOLL_MPI_NODE_SPLIT=1)")
	cases+=("2|1|MPI_CHECK_ARGS=--threads|all|P=2 with the interposer, two threads at once (MPI_THREAD_MULTIPLE)")
fi

echo "TAP version 13"
echo "1..$((${#mpis[@]} * ${#cases[@]}))"
n=0

# The statistics line of collective $1 in the log: "SHM FALLBACK", or nothing;
# want: mpi_check's expectation of it, alike.
stat() {
	sed -n "s/^shmcoll-mpi: $1 \([0-9]*\) via shmcoll, \([0-9]*\) fallback\$/\1 \2/p" "$log" | tail -n 1
}
want() {
	sed -n "s/^mpi_check: expect $1 \([0-9]*\) via shmcoll, \([0-9]*\) fallback\$/\1 \2/p" "$log" | tail -n 1
}

# Checks the log against expectation $1; prints why not on stdout.
check_stats() {
	local c s w
	case $1 in
	none)
		if grep -q '^shmcoll-mpi:' "$log"; then
			echo "statistics printed without the interposer"
		fi
		return
		;;
	esac
	for c in "${colls[@]}"; do
		s=$(stat "$c")
		w=$(want "$c")
		if [ -z "$s" ]; then
			echo "no statistics line for $c"
			continue
		fi
		if [ -z "$w" ]; then
			echo "no expectation from mpi_check for $c"
			continue
		fi
		case $1 in
		all)
			[ "${w% *}" -gt 0 ] || echo "mpi_check expects no call of $c through shmcoll ($w)"
			[ "$s" = "$w" ] ||
				echo "$c: $s (via shmcoll, fallback), mpi_check expects $w"
			;;
		off)
			[ "$s" = "0 $((${w% *} + ${w#* }))" ] ||
				echo "$c: $s (via shmcoll, fallback) although SHMCOLL_MPI=0, mpi_check made $w"
			;;
		esac
	done
}

# Checks that the setup of the communicator of all P ranks took path $1 (wide or composed).
check_path() {
	local wide="^shmcoll-mpi: a communicator of size $p: shmcoll across nodes"
	local composed="^shmcoll-mpi: a communicator of size $p: shmcoll in each node, PMPI among"
	case $1 in
	wide) grep -q "$wide" "$log" || echo "the communicator of $p ranks did not go through shmcoll's multi-node communicator" ;;
	composed) grep -q "$composed" "$log" || echo "the communicator of $p ranks was not composed by the interposer" ;;
	esac
}

run_case() {
	local impl=$1 p=$2 preload=$3 extra=$4 expect=$5 name=$6
	local cmd=() envs=() args=() more=() why path=

	mpi_launch "$impl" "$p" "$preload"
	case $expect in
	*:*) path=${expect#*:} expect=${expect%%:*} && envs+=(SHMCOLL_MPI_DEBUG=1) ;;
	esac
	# MPICH 4.0.2's device-level MPI_Reduce with MPI_IN_PLACE at a root other than 0 reads
	# MPI_IN_PLACE as a buffer from about 2 KiB on (a segfault, with or without the
	# interposer): its generic reduce does not.
	[ "$impl" = mpich ] && envs+=(MPIR_CVAR_REDUCE_DEVICE_COLLECTIVE=0)
	# More ranks than CPUs: an MPI call may wait out a scheduler time slice
	# (MPICH's take ~6 ms then), so the full matrix would take minutes.
	# Every type and op is checked at P <= CPUs; the mapping of types and
	# ops does not depend on P.
	[ "$p" -gt "$cpus" ] && args+=(--quick)
	case $extra in
	MPI_CHECK_ARGS=*) read -r -a more <<<"${extra#MPI_CHECK_ARGS=}" && args+=("${more[@]}") ;;
	?*) envs+=("$extra") ;;
	esac
	mpi_run "$log" "$timeout_s" "${cmd[@]}" env "${envs[@]}" "${prog[$impl]}" "${args[@]}"
	why=
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		why="timed out after $timeout_s s"
	elif [ $rc -ne 0 ]; then
		why="exit status $rc"
	elif ! grep -q "^mpi_check: P=$p: [0-9]* checks, 0 failed\$" "$log"; then
		why="no summary line from mpi_check"
	else
		why=$(check_stats "$expect")
		[ -z "$why" ] && [ -n "$path" ] && why=$(check_path "$path")
		[ -z "$why" ] && [ -n "$left" ] && why="arenas left in /dev/shm: ${left//$'\n'/ }"
	fi
	n=$((n + 1))
	if [ -z "$why" ]; then
		echo "ok $n - ${mpi_label[$impl]}: $name"
		echo "# ${cmd[*]} env ${envs[*]} ${prog[$impl]##*/} ${args[*]}: $took s"
		grep -E '^(mpi_check|shmcoll-mpi):' "$log" | sed 's/^/# /'
	else
		echo "not ok $n - ${mpi_label[$impl]}: $name"
		printf '%s\n' "$why" | sed 's/^/# /'
		tail -n 60 "$log" | sed 's/^/#   /'
	fi
}

for impl in "${mpis[@]}"; do
	reason=$(mpi_skip_reason "$impl")
	for c in "${cases[@]}"; do
		IFS='|' read -r p preload extra expect name <<<"$c"
		if [ -n "$reason" ]; then
			n=$((n + 1))
			echo "ok $n - ${mpi_label[$impl]}: $name # SKIP $reason"
			continue
		fi
		run_case "$impl" "$p" "$preload" "$extra" "$expect" "$name"
	done
done
