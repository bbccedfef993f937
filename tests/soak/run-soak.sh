#!/bin/sh
# run-soak.sh - the 'soak' test: shmcoll-soak through shmcoll-run at several rank
# counts and SHMCOLL_ALGO settings, as TAP (one line per run, the program's output
# as comments). SHMCOLL_SOAK_SECONDS (default 60) is split evenly among the runs;
# SHMCOLL_SOAK_SEED pins every run's seed (default: each run picks and prints one).
#
#   run-soak.sh SHMCOLL_RUN SHMCOLL_SOAK
set -u

if [ $# -ne 2 ]; then
	echo "usage: $0 SHMCOLL_RUN SHMCOLL_SOAK" >&2
	exit 2
fi
run=$1
soak=$2
total=${SHMCOLL_SOAK_SECONDS:-60}

# One run per line: ranks, SHMCOLL_ALGO ("-": unset), extra environment and extra
# soak arguments ("-": none). 2 and 8 ranks with the measured choice, 3 with
# every collective flat, 4 with the direct and tree protocols wherever a
# collective has them, 8 flat, 3 in a 256 KiB arena (tiny staging halves and
# heap: every large message is many chunks, the symmetric buffers shrink to
# fit), and 4 with messages of at most 2 KiB (the inline paths, some ten
# thousand calls a second: the most sequence-number turnover).
runs='2 - - -
3 flat - -
4 direct,tree - -
8 - - -
8 flat - -
3 direct,tree SHMCOLL_ARENA_BYTES=262144 -
4 - - --max-bytes=2048'
nruns=$(printf '%s\n' "$runs" | wc -l)
per=$(awk -v t="$total" -v n="$nruns" 'BEGIN { s = t / n; if (s < 1) s = 1; printf "%.1f", s }')
# Hard bound per run: its seconds plus room to finish the calls in flight and
# shut down; a wait for a peer gives up (an error) long before that.
bound=$(awk -v s="$per" 'BEGIN { printf "%d", s + 300 }')
out=$(mktemp "${TMPDIR:-/tmp}/shmcoll-soak.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

echo "1..$nruns"
i=0
failed=0
printf '%s\n' "$runs" | {
	while read -r P algo extra args; do
		i=$((i + 1))
		set --
		[ "$algo" != - ] && set -- "$@" "SHMCOLL_ALGO=$algo"
		[ "$extra" != - ] && set -- "$@" "$extra"
		seed=
		[ -n "${SHMCOLL_SOAK_SEED:-}" ] && seed="--seed $SHMCOLL_SOAK_SEED"
		desc="P=$P SHMCOLL_ALGO=$algo"
		[ "$algo" = - ] && desc="P=$P SHMCOLL_ALGO unset"
		[ "$extra" != - ] && desc="$desc $extra"
		[ "$args" != - ] && desc="$desc $args"
		[ "$args" = - ] && args=
		# shellcheck disable=SC2086
		env -u SHMCOLL_ALGO -u SHMCOLL_ARENA_BYTES "$@" \
			timeout -k 10 "$bound" "$run" -n "$P" --timeout-ms 120000 \
			"$soak" --seconds "$per" $seed $args </dev/null >"$out" 2>&1
		rc=$?
		summary=$(grep 'shmcoll-soak: summary' "$out" | tail -n 1 | sed 's/^shmcoll-soak: summary //')
		if [ "$rc" -eq 0 ] && [ -n "$summary" ]; then
			echo "ok $i - $desc: $summary"
		else
			echo "not ok $i - $desc: exit status $rc${summary:+: $summary}"
			failed=1
		fi
		sed 's/^/# /' "$out"
	done
	exit $failed
}
