# common.sh - what the MPI tests (run.sh, progress.sh) share, sourced by both: their
# arguments, how one MPI launches P ranks, why every case of an MPI is skipped, one timed run,
# and the arenas a run leaves in /dev/shm.
#
# Arguments: [--skip-all REASON] [--sanitized] [--mpi NAME PROG LIB]... [--missing NAME REASON]...
#   NAME      ompi (Open MPI) or mpich
#   PROG      the test program built against that MPI; LIB its libshmcoll-mpi.so
#   --missing every case of NAME is a SKIP with REASON (no build of it)
#   --skip-all every case is a SKIP with REASON
#   --sanitized PROG and LIB are built with ASan+UBSan (LIB's runtimes preloaded first)

export LC_ALL=C # a decimal point in $EPOCHREALTIME

mpis=(ompi mpich)
declare -A prog lib missing
declare -A mpi_label=([ompi]="Open MPI" [mpich]=MPICH)
declare -A launcher=([ompi]=mpirun.openmpi [mpich]=mpiexec.mpich)
skip_all=
sanitized=0
cpus=$(nproc)

# mpi_parse_args SCRIPT ARGS...: sets prog, lib, missing, skip_all and sanitized.
mpi_parse_args() {
	local me=$1
	shift
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
			echo "$me: unknown argument '$1'" >&2
			exit 2
			;;
		esac
	done
}

# mpi_skip_reason IMPL: why every case of IMPL is a SKIP, or nothing when it runs.
mpi_skip_reason() {
	local impl=$1
	if [ -n "$skip_all" ]; then
		echo "$skip_all"
	elif [ -n "${missing[$impl]:-}" ]; then
		echo "${missing[$impl]}"
	elif [ -z "${prog[$impl]:-}" ]; then
		echo "no build of it was given"
	elif ! command -v "${launcher[$impl]}" >/dev/null 2>&1; then
		echo "${launcher[$impl]} is not installed (scripts/setup installs it)"
	fi
}

# mpi_launch IMPL P PRELOAD: sets cmd, the launcher's command line for P ranks (oversubscribed
# and unbound past the CPUs), and envs, what every rank gets: the interposer's statistics,
# Open MPI's shared-memory transport (vader, as scripts/compare-mpi runs it) and, with
# PRELOAD=1, LD_PRELOAD of the interposer (after a sanitizer's runtimes, which must come
# first of all libraries).
mpi_launch() {
	local impl=$1 p=$2 preload=$3 runtimes=
	envs=(SHMCOLL_MPI_STATS=1)
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
	if [ "$preload" = 1 ]; then
		[ $sanitized = 1 ] &&
			runtimes=$(ldd "${lib[$impl]}" | awk '$1 ~ /^lib(a|ub)san\./ { print $3 }' | paste -sd:)
		envs+=("LD_PRELOAD=${runtimes:+$runtimes:}${lib[$impl]}")
	fi
}

# The arenas of the interposer's communicators (job names mpi.*, sanitised).
mpi_arenas() {
	local f
	for f in /dev/shm/shmcoll."$(id -u)".mpi_*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
	done
}

# mpi_run LOG TIMEOUT ARGV...: runs ARGV (stdin closed, output to LOG) for at most TIMEOUT
# seconds; sets rc (124 or 137: timed out), took (seconds) and left (the arenas it left in
# /dev/shm, one line each; empty when none).
mpi_run() {
	local log=$1 timeout_s=$2 before start
	shift 2
	before=$(mpi_arenas)
	start=$EPOCHREALTIME
	timeout -k 10 "$timeout_s" "$@" >"$log" 2>&1 </dev/null
	rc=$?
	took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	left=$(comm -13 <(echo "$before") <(mpi_arenas))
}
