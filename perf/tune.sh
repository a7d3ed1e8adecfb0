#!/usr/bin/env bash
# Measures every (algorithm, protocol) of all-reduce, broadcast and reduce on
# this machine and writes a tuning file for LOOM_TUNING_FILE.
#
# Usage: perf/tune.sh [BUILD_DIR] [OUT]     (defaults: $LOOM_BUILD_DIR or ./build; loom.tuning)
#
# For each rank count in RANKS, collective, algorithm and protocol it runs
# BUILD_DIR/bin/<coll>_perf under loomrun with LOOM_ALGO and LOOM_PROTO forced,
# over a size sweep (sizes an algorithm cannot run are skipped: rd up to one
# chunk, oneshot up to 64 KiB, LL up to LL_MAX), REPS times, without checking
# (-c 0). Every row becomes "coll algo proto nranks bytes time_us" (the faster
# of out-of-place and in-place) in OUT.raw; BUILD_DIR/bin/loom_tune_fit keeps
# the fastest of the repetitions (interference only adds time), fits the cost
# model's alpha and bandwidth per key and, with POINTS=1 (default), also
# writes the measured times as points.
#
# Knobs: RANKS ("2 4"), MAX (256M), LL_MAX (4M), REPS (2), COLLS ("all_reduce
# broadcast reduce"), SMALL_ITERS (100), LARGE_ITERS (5), POINTS (1).
# Runs take minutes; the machine should be otherwise idle.
set -euo pipefail

build=${1:-${LOOM_BUILD_DIR:-./build}}
out=${2:-loom.tuning}
bin=$build/bin
ranks_list=${RANKS:-"2 4"}
max=${MAX:-256M}
ll_max=${LL_MAX:-4M}
reps=${REPS:-2}
colls=${COLLS:-"all_reduce broadcast reduce"}
small_iters=${SMALL_ITERS:-100}
large_iters=${LARGE_ITERS:-5}
points=${POINTS:-1}
chunk=${LOOM_CHUNK_SIZE:-256K}

for tool in loomrun loom_tune_fit; do
  [[ -x $bin/$tool ]] || { echo "tune.sh: $bin/$tool not found (build first)" >&2; exit 2; }
done

bytes() {  # 256M -> 268435456
  local v=${1^^}
  case $v in
    *K) echo $(( ${v%K} << 10 )) ;;
    *M) echo $(( ${v%M} << 20 )) ;;
    *G) echo $(( ${v%G} << 30 )) ;;
    *) echo "$v" ;;
  esac
}
min() { (( $1 < $2 )) && echo "$1" || echo "$2"; }

algos_of() {
  case $1 in
    all_reduce) echo "ring rd tree hd oneshot" ;;
    broadcast|reduce) echo "chain tree" ;;
    reduce_scatter|all_gather) echo "ring" ;;
  esac
}

# The largest size (bytes) that `algo` over `proto` can run.
limit_of() {
  local algo=$1 proto=$2 lim
  lim=$(bytes "$max")
  [[ $proto == ll ]] && lim=$(min "$lim" "$(bytes "$ll_max")")
  [[ $algo == rd ]] && lim=$(min "$lim" "$([[ $proto == ll ]] && echo 8192 || bytes "$chunk")")
  [[ $algo == oneshot ]] && lim=$(min "$lim" 65536)
  echo "$lim"
}

# Runs one sweep and prints "coll algo proto n bytes us" rows.
sweep() {
  local coll=$1 algo=$2 proto=$3 n=$4 lo=$5 hi=$6 iters=$7 warm=$8
  (( lo <= hi )) || return 0
  LOOM_ALGO=$algo LOOM_PROTO=$proto "$bin/loomrun" -n "$n" "$bin/${coll}_perf" \
      -b "$lo" -e "$hi" -f 2 -n "$iters" -w "$warm" -c 0 --algo-column |
    awk -v c="$coll" -v a="$algo" -v p="$proto" -v n="$n" '
      { sub(/^\[[0-9]+\] */, "") }
      /^#/ && / size / && / count / && / time / {           # header: where the times (and algo) are
        nt = 0; for (i = 2; i <= NF; ++i) { if ($i == "time") t[++nt] = i - 1; if ($i == "algo" || $i == "algorithm") ac = i - 1 }
        next }
      /^#/ || NF < 6 || nt == 0 { next }
      {
        best = -1
        for (j = 1; j <= nt; ++j) { v = $(t[j]) + 0; if (v > 0 && (best < 0 || v < best)) best = v }
        if (ac && index($(ac), a "/") != 1) next   # the tool fell back to another algorithm
        if (best > 0) { gsub(/_/, "", c); print c, a, p, n, $1, best }
      }'
}

raw=$out.raw
: > "$raw"
for n in $ranks_list; do
  for coll in $colls; do
    for algo in $(algos_of "$coll"); do
      for proto in simple ll; do
        lim=$(limit_of "$algo" "$proto")
        for ((rep = 0; rep < reps; ++rep)); do
          sweep "$coll" "$algo" "$proto" "$n" 8 "$(min "$lim" 65536)" "$small_iters" 10 >> "$raw"
          sweep "$coll" "$algo" "$proto" "$n" 131072 "$lim" "$large_iters" 2 >> "$raw"
        done
        echo "tune.sh: n=$n $coll $algo/$proto done ($(wc -l < "$raw") rows)" >&2
      done
    done
  done
done

fit_args=(--chunk "$(bytes "$chunk")")
[[ $points == 1 ]] && fit_args+=(--points)
"$bin/loom_tune_fit" "${fit_args[@]}" < "$raw" > "$out"
echo "tune.sh: wrote $out (measurements in $raw); use it with LOOM_TUNING_FILE=$out" >&2
