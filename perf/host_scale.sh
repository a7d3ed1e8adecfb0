#!/usr/bin/env bash
# host_scale.sh BIN_DIR [RANKS...]
# How Loom's host all-reduce scales with the number of ranks on one machine:
# one process per rank (loomrun), host buffers, float sum, out of place.
# For each rank count (default: 2 4 8 16, those that fit the cores first;
# larger counts are oversubscribed and say so):
#   1. blocking (-z 1) and stream (-z 0) sweeps, 8 B .. 16 MiB (x2 steps),
#      with the algorithm each size ran, 40 calls a size; then 8 B and 1 KiB
#      again over 2000 calls after 500 warm-up ones (SMALL_ITERS,
#      SMALL_WARMUP), which the table's small columns use: 40 calls of a few
#      microseconds right after init time the start-up (placement of the
#      ranks on cores, first touches, the online tuner's trials) more than
#      the call;
#   2. at 8 B and 1 KiB, the small-message algorithms timed against each
#      other and the tuner's pick (--algos rd,tree,oneshot,auto), 500 calls
#      a round after 100 warm-up ones, so the tuner's choice can be read
#      against what was fastest.
# Then one table: time per call at 8 B, 1 KiB, 64 KiB and 1 MiB, busbw at
# 16 MiB, and the algorithm at 8 B, per rank count and mode.
#
# BIN_DIR holds loomrun and all_reduce_perf (build/bin, or .gpu/bin on a GPU
# machine, where --host-mem keeps the buffers on the host). Every run is under
# `timeout` (HOST_SCALE_TIMEOUT_S, default 60 s per run). Logs go to
# $HOST_SCALE_LOGS (default: a temporary folder, printed).
set -uo pipefail
bin=${1:?usage: host_scale.sh BIN_DIR [RANKS...]}
shift
ranks=("$@")
((${#ranks[@]})) || ranks=(2 4 8 16)
limit=${HOST_SCALE_TIMEOUT_S:-60}
logs=${HOST_SCALE_LOGS:-$(mktemp -d)}
mkdir -p "$logs"
cores=$(nproc)
for tool in loomrun all_reduce_perf; do
  [[ -x $bin/$tool ]] || { echo "host_scale: $bin/$tool is missing" >&2; exit 2; }
done
export LOOM_TIMEOUT=${LOOM_TIMEOUT:-20}
small_iters=${SMALL_ITERS:-2000}
small_warmup=${SMALL_WARMUP:-500}

# Out-of-place time (us) of SIZE in an nccl-tests table, and its algorithm.
time_at() { awk -v s="$2" '$1 == s && $3 == "float" { print $6; exit }' "$1"; }
busbw_at() { awk -v s="$2" '$1 == s && $3 == "float" { print $8; exit }' "$1"; }
algo_at() { awk -v s="$2" '$1 == s && $3 == "float" { print $NF; exit }' "$1"; }

rows=()
for n in "${ranks[@]}"; do
  note=""
  ((n > cores)) && note=" (oversubscribed: $cores cores)"
  for z in 1 0; do
    mode=$([[ $z == 1 ]] && echo blocking || echo stream)
    log=$logs/sweep_n${n}_${mode}.log
    echo "== $n ranks, $mode$note"
    timeout -k 5 "$limit" "$bin/loomrun" -n "$n" "$bin/all_reduce_perf" --host-mem -b 8 -e 16M -f 2 \
      -n 40 -w 5 -z "$z" --algo-column >"$log" 2>&1
    rc=$?
    if ((rc != 0)); then
      echo "host_scale: $n ranks $mode exited $rc; the log's end:"
      tail -n 8 "$log"
      rows+=("$(printf '%5s  %-8s  %s' "$n" "$mode" "FAILED (exit $rc)")")
      continue
    fi
    grep -E '^ +[0-9]+ ' "$log"
    small=$logs/small_n${n}_${mode}.log
    echo "== $n ranks, $mode, 8 B and 1 KiB over $small_iters calls$note"
    if ! timeout -k 5 "$limit" "$bin/loomrun" -n "$n" "$bin/all_reduce_perf" --host-mem -b 8 -e 1K -f 128 \
      -n "$small_iters" -w "$small_warmup" -z "$z" --algo-column >"$small" 2>&1; then
      echo "host_scale: the $small_iters-call run at $n ranks $mode failed; the table shows the sweep's 40 calls"
      small=$log
    fi
    grep -E '^ +[0-9]+ ' "$small"
    rows+=("$(printf '%5s  %-8s  %9s  %9s  %9s  %9s  %10s  %s' "$n" "$mode" \
      "$(time_at "$small" 8)" "$(time_at "$small" 1024)" "$(time_at "$log" 65536)" \
      "$(time_at "$log" 1048576)" "$(busbw_at "$log" 16777216)" "$(algo_at "$small" 8)$note")")
  done
  log=$logs/algos_n${n}.log
  echo "== $n ranks: small-message algorithms at 8 B and 1 KiB$note"
  timeout -k 5 "$limit" "$bin/loomrun" -n "$n" "$bin/all_reduce_perf" --host-mem -b 8 -e 1K -f 128 \
    -n 500 -w 100 --algos rd,tree,oneshot,auto --reps 5 >"$log" 2>&1 ||
    echo "host_scale: the --algos run at $n ranks failed (exit $?)"
  grep -vE '^#? *$' "$log" | tail -n 12
done

echo
echo "host_scale: $(uname -n), $cores cores; float sum, out of place, one process per rank; logs in $logs"
printf '%5s  %-8s  %9s  %9s  %9s  %9s  %10s  %s\n' ranks mode "8B us" "1KiB us" "64KiB us" "1MiB us" \
  "16MiB GB/s" "algorithm at 8 B"
printf '%s\n' "${rows[@]}"
