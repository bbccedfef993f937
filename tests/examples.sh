#!/usr/bin/env bash
# examples.sh - runs every example program under shmcoll-run at several rank counts; each
# checks its own results and exits non-zero on a wrong one. Output is TAP for meson.
# usage: tests/examples.sh BUILDDIR
set -u
build=$1
run=$build/lib/shmcoll-run
n=0
fails=0
cases=()
for p in 1 2 3 4; do
	cases+=("$p demo")
	cases+=("$p ring_allreduce 100003")
	cases+=("$p moe_alltoallv 2000 24")
	cases+=("$p overlap 4 65536")
done
cases+=("8 ring_allreduce 30011" "8 moe_alltoallv 500 16" "8 overlap 3 20000")
echo "1..${#cases[@]}"
for c in "${cases[@]}"; do
	read -r p prog args <<<"$c"
	n=$((n + 1))
	# shellcheck disable=SC2086
	if out=$(timeout 300 "$run" -n "$p" "$build/examples/$prog" $args 2>&1); then
		echo "ok $n - $prog $args, $p ranks"
	else
		echo "not ok $n - $prog $args, $p ranks"
		printf '%s\n' "$out" | sed 's/^/# /' | tail -20
		fails=$((fails + 1))
	fi
done
exit 0
