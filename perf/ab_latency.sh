#!/usr/bin/env bash
# One all-reduce size, two builds of Loom, alternating runs: for a size where
# compare_mpi.sh (BEFORE=...) shows the two builds apart, this measures that
# size alone in many more rounds. Each round runs both builds, the order
# swapped every round; prints each build's median time and the median of the
# per-round ratios (B over A: above 1 means B is slower).
#
# Usage: perf/ab_latency.sh BUILD_A BUILD_B SIZE [ROUNDS (21)]
# Knobs: NRANKS (2), ITERS (50000), WARMUP (2000); blocking calls (-z 1),
# no checking, no memory-bandwidth probe.
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 BUILD_A BUILD_B SIZE [ROUNDS]" >&2
  exit 2
fi
build_a=$1 build_b=$2 size=$3 rounds=${4:-21}
nranks=${NRANKS:-2} iters=${ITERS:-50000} warmup=${WARMUP:-2000}
for build in "$build_a" "$build_b"; do
  for tool in loomrun all_reduce_perf; do
    [[ -x $build/bin/$tool ]] || { echo "$0: $build/bin/$tool not found" >&2; exit 2; }
  done
done

one_run() {  # build -> the out-of-place time in us
  "$1/bin/loomrun" -n "$nranks" --no-tag-output "$1/bin/all_reduce_perf" -b "$size" -e "$size" -z 1 \
    -n "$iters" -w "$warmup" -c 0 | awk -v s="$size" '!/^#/ && $1 == s {print $6; exit}'
}

for ((round = 1; round <= rounds; ++round)); do
  if ((round % 2)); then
    a=$(one_run "$build_a"); b=$(one_run "$build_b")
  else
    b=$(one_run "$build_b"); a=$(one_run "$build_a")
  fi
  echo "$a $b"
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin if len(line.split()) == 2]
a = [r[0] for r in rows]
b = [r[1] for r in rows]
print("%d rounds, %s B, %s ranks: A median %.3f us, B median %.3f us, B/A of medians %.3f, median of per-round B/A %.3f"
      % (len(rows), sys.argv[1], sys.argv[2], statistics.median(a), statistics.median(b),
         statistics.median(b) / statistics.median(a), statistics.median([y / x for x, y in rows])))
' "$size" "$nranks"
