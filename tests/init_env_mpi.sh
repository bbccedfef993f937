#!/usr/bin/env bash
# init_env_mpi.sh - shmcoll_init under the real launchers of Open MPI (mpirun.openmpi) and
# MPICH (mpiexec.hydra): tests/progs/init_env_prog.c run as 2 ranks, directly and (MPICH)
# under a wrapper shell, so the ranks' parent is not Hydra's proxy. A case passes when the
# launcher exits 0, every rank printed its ok line, and no arena of the launcher's kind is
# left in /dev/shm. A launcher that is not installed makes its cases SKIPs. Prints TAP.
# usage: init_env_mpi.sh PROG
set -u
prog=$1
timeout_s=${INIT_ENV_TIMEOUT:-300}
log=$(mktemp /tmp/shmcoll-init-env.XXXXXX)
trap 'rm -f "$log"' EXIT

# name|launcher|arena tag|command before PROG ...
cases=(
	"Open MPI, 2 ranks|mpirun.openmpi|ompi|mpirun.openmpi --allow-run-as-root --oversubscribe -n 2"
	"MPICH (Hydra), 2 ranks|mpiexec.hydra|mpich|mpiexec.hydra -n 2"
	"MPICH (Hydra), 2 ranks under a wrapper shell|mpiexec.hydra|mpich|mpiexec.hydra -n 2 sh -c '\"\$0\" \"\$1\"; exit \$?'"
)

# This user's arenas of one launcher's jobs (job names "<tag>-<hash>").
arenas() {
	local f
	for f in /dev/shm/shmcoll."$(id -u)"."$1"-*; do
		[ -e "$f" ] && echo "${f#/dev/shm/}"
	done
}

echo "TAP version 13"
echo "1..${#cases[@]}"
n=0
for c in "${cases[@]}"; do
	IFS='|' read -r name launcher tag cmd <<<"$c"
	n=$((n + 1))
	if ! command -v "$launcher" >/dev/null 2>&1; then
		echo "ok $n - $name # SKIP $launcher is not installed (scripts/setup installs it)"
		continue
	fi
	before=$(arenas "$tag")
	# The launchers' own variables must be the only ones: not a shmcoll-run job's.
	env -u SHMCOLL_RANK -u SHMCOLL_SIZE -u SHMCOLL_JOB SHMCOLL_TIMEOUT_MS=60000 \
		timeout -k 10 "$timeout_s" bash -c "$cmd \"\$0\" 2" "$prog" >"$log" 2>&1 </dev/null
	rc=$?
	after=$(arenas "$tag")
	why=
	left=$(comm -13 <(echo "$before") <(echo "$after"))
	if [ $rc -ne 0 ]; then
		why="exit status $rc"
	elif [ "$(grep -c '^init_env_prog: rank [01] of 2: ok$' "$log")" != 2 ]; then
		why="not every rank printed its ok line"
	elif [ -n "$left" ]; then
		why="arenas left in /dev/shm: $(echo "$left" | tr '\n' ' ')"
	fi
	if [ -z "$why" ]; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		echo "# $why"
		tail -n 30 "$log" | sed 's/^/#   /'
	fi
done
