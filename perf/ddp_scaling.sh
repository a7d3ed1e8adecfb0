#!/bin/sh
# The DDP scaling table: samples/s at 1, 2, 4 and 8 ranks, with ranks as
# processes (loomrun, DistributedDataParallel-style) and as threads of one
# process (ddp_bench --threads, DataParallel-style), and the efficiency
# relative to 1 rank: samples/s at N / (N * samples/s at 1). Weak scaling:
# the batch per rank stays fixed.
#
#   perf/ddp_scaling.sh [BUILD_DIR] [ddp_bench options, e.g. --hidden 1024 --depth 4 --steps 20]
#
# Every rank is one OpenBLAS thread; on a machine with fewer cores than
# ranks the efficiency mostly measures the oversubscription (the header
# prints the core count).
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
bench="$build/bin/ddp_bench"
loomrun="$build/bin/loomrun"
[ -x "$bench" ] && [ -x "$loomrun" ] || { echo "ddp_scaling.sh: build ddp_bench and loomrun in $build first" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1

echo "# DDP weak scaling on $(nproc) cores: ddp_bench --table scaling $*"
printf "%-6s %-10s %10s %14s %11s\n" ranks mode "step ms" "samples/s" efficiency
for mode in processes threads; do
  base=""
  for n in 1 2 4 8; do
    if [ "$mode" = processes ]; then
      line=$("$loomrun" -n "$n" "$bench" --table scaling "$@" | grep '^scaling:')
    else
      line=$("$bench" --threads "$n" --table scaling "$@" | grep '^scaling:')
    fi
    step=$(echo "$line" | sed 's/.*step_ms \([0-9.]*\).*/\1/')
    rate=$(echo "$line" | sed 's/.*samples_per_s \([0-9.]*\).*/\1/')
    [ -n "$base" ] || base=$rate
    printf "%-6s %-10s %10s %14s %10.0f%%\n" "$n" "$mode" "$step" "$rate" \
      "$(awk -v r="$rate" -v b="$base" -v n="$n" 'BEGIN { print 100 * r / (n * b) }')"
  done
done
