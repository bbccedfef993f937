#!/usr/bin/env bash
# run.sh - one bounded libFuzzer run of one target, as a meson test: passes
# iff the fuzzer found nothing in SECONDS. The corpus grows in WORKDIR (in the
# build tree, kept between runs), seeded from SEEDDIR and, if given, from
# GENERATOR's output; a crashing input lands in WORKDIR/artifacts/.
# usage: tests/fuzz/run.sh FUZZER SECONDS WORKDIR SEEDDIR [GENERATOR]
set -u
[ $# -ge 4 ] || {
	echo "usage: run.sh FUZZER SECONDS WORKDIR SEEDDIR [GENERATOR]" >&2
	exit 2
}
fuzzer=$1 seconds=$2 work=$3 seeds=$4 gen=${5:-}
name=$(basename "$fuzzer")

mkdir -p "$work/corpus" "$work/artifacts" || exit 1
if [ -d "$seeds" ]; then
	cp -n "$seeds"/* "$work/corpus/" 2>/dev/null
fi
if [ -n "$gen" ]; then
	"$gen" "$work/corpus" || {
		echo "$name: the seed generator failed" >&2
		exit 1
	}
fi
# A finding of an earlier run is kept, out of the way of this one's.
if [ -n "$(ls "$work/artifacts" 2>/dev/null)" ]; then
	mkdir -p "$work/artifacts.old" && mv -f "$work/artifacts"/* "$work/artifacts.old/"
fi

# In-process, one job: the first crash, leak, timeout (10 s on one input) or
# out-of-memory ends the run. libFuzzer then exits with 77, which meson would
# read as "skipped": any failure leaves this script with status 1. The corpus
# directory is the only one it writes to, besides the artifact prefix.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus"
rc=$?
found=$(ls "$work/artifacts" 2>/dev/null)
if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
	echo "$name: FAILED (status $rc); reproduce with: $(realpath "$fuzzer") $work/artifacts/<file>" >&2
	[ -z "$found" ] || echo "$name: artifacts: $found" >&2
	exit 1
fi
echo "$name: no finding in ${seconds}s ($(ls "$work/corpus" | wc -l) inputs in the corpus)"
exit 0
