#!/usr/bin/env bash
# Does Loom's own choice (auto) match the best forced all-reduce algorithm?
# Runs all_reduce_perf --algos (one communicator per algorithm in the same
# processes, measured interleaved: see perf/harness/algo_compare.h) for 2 and
# 4 ranks, one process per rank under loomrun, over 8 B .. 256 MiB, prints
# per size every algorithm's median time, auto's time and choice, the best
# forced algorithm, auto/best (ratio of medians) and "paired" (the median
# over rounds of auto's time over a forced algorithm's in the same round,
# against the algorithm auto loses to most: see algo_table.h), and the worst
# ratios. Sizes whose paired ratio exceeds THRESHOLD are measured again
# (RECHECK_REPS rounds, alone in their own run) and the table shows the
# re-measured paired ratio too; the worst "confirmed" ratio takes the
# re-measured value where there is one.
#
# Usage: perf/auto_vs_forced.sh [BUILD_DIR]   (default: $LOOM_BUILD_DIR, else ./build)
# Builds nothing: BUILD_DIR/bin must hold loomrun and all_reduce_perf.
#
# Environment knobs:
#   RANKS ("2 4")                        rank counts
#   ALGOS (ring,tree,hd,rd,oneshot,auto) the --algos list
#   MIN (8), MAX (256M), FACTOR (4)      sizes MIN, MIN*FACTOR, ... up to MAX
#   REPS (7)                             interleaved rounds per size (median counts)
#   ITERS_SMALL/MEDIUM/LARGE (200/20/2)  calls per round below 256 KiB / below 16 MiB / above
#   WARMUP_SMALL/MEDIUM/LARGE (400/96/25) warm-up calls per communicator and size: cover
#                                        auto's first exploration (online tuning: up to 384
#                                        calls below 64 KiB, 96 below 1 MiB, 24 above), a
#                                        one-time cost per repeated call, as in a training loop
#   THRESHOLD (1.05), RECHECK_REPS (31)  re-measure sizes above it (RECHECK=0: never), in
#   RECHECK_REPS_SMALL (41)              RECHECK_REPS rounds, RECHECK_REPS_SMALL below 256 KiB
#   OUT (perf/results)                   where auto_vs_forced_np<N>.txt go
#   RUN_TIMEOUT (600)                    seconds one tool run may take
#   DTYPE (float), OP (sum)
set -euo pipefail

build=${1:-${LOOM_BUILD_DIR:-./build}}
bin=$build/bin
ranks_list=${RANKS:-"2 4"}
algos=${ALGOS:-ring,tree,hd,rd,oneshot,auto}
reps=${REPS:-7}
factor=${FACTOR:-4}
threshold=${THRESHOLD:-1.05}
recheck=${RECHECK:-1}
recheck_reps=${RECHECK_REPS:-31}
recheck_reps_small=${RECHECK_REPS_SMALL:-41}
outdir=${OUT:-perf/results}
run_timeout=${RUN_TIMEOUT:-600}
dtype=${DTYPE:-float}
op=${OP:-sum}

to_bytes() {
  local v=$1 n
  n=${v%[KkMmGg]}
  case $v in
    *[Kk]) echo $((n << 10)) ;; *[Mm]) echo $((n << 20)) ;; *[Gg]) echo $((n << 30)) ;;
    *) echo "$n" ;;
  esac
}
min=$(to_bytes "${MIN:-8}")
max=$(to_bytes "${MAX:-256M}")
if ((min < 1 || max < min || factor < 2)); then
  echo "auto_vs_forced.sh: need 1 <= MIN <= MAX and FACTOR >= 2 (MIN=$min MAX=$max FACTOR=$factor)" >&2
  exit 2
fi
[[ ,$algos, == *,auto,* ]] || { echo "auto_vs_forced.sh: ALGOS must list auto" >&2; exit 2; }
for tool in loomrun all_reduce_perf; do
  if [[ ! -x $bin/$tool ]]; then
    echo "auto_vs_forced.sh: $bin/$tool not found; build the targets loomrun and all_reduce_perf first" >&2
    exit 2
  fi
done

# tier SIZE -> "iters warmup"
tier() {
  if (($1 < 256 << 10)); then echo "${ITERS_SMALL:-200} ${WARMUP_SMALL:-400}"
  elif (($1 < 16 << 20)); then echo "${ITERS_MEDIUM:-20} ${WARMUP_MEDIUM:-96}"
  else echo "${ITERS_LARGE:-2} ${WARMUP_LARGE:-25}"; fi
}

# run_tool NRANKS FIRST LAST ITERS WARMUP REPS LOG: one --algos run.
run_tool() {
  local n=$1 first=$2 last=$3 iters=$4 warmup=$5 rounds=$6 log=$7
  if ! timeout "$run_timeout" env -u LOOM_ALGO "$bin/loomrun" -n "$n" --no-tag-output "$bin/all_reduce_perf" \
      -b "$first" -e "$last" -f "$factor" -n "$iters" -w "$warmup" -z 1 -a 1 -c 1 -d "$dtype" -o "$op" \
      --reps "$rounds" --algos "$algos" </dev/null >"$log" 2>"$log.err"; then
    echo "# auto_vs_forced.sh: $n ranks, $first..$last B failed; its last lines:" >&2
    tail -5 "$log" "$log.err" | sed 's/^/#   /' >&2
    return 1
  fi
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$outdir"
start=$SECONDS
status=0
# Noise is the enemy here: say how busy the machine was.
context="$(date -u '+%F %H:%M UTC') on $(hostname) ($(nproc) cores), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $ranks_list; do
  # One run per tier of consecutive sizes (iteration counts differ per tier).
  k=0 first="" last="" t=""
  runs=()
  for ((s = min; s <= max; s *= factor)); do
    st=$(tier "$s")
    if [[ -n $first && $st == "$t" ]]; then last=$s
    else
      [[ -n $first ]] && runs+=("$first $last $t")
      first=$s last=$s t=$st
    fi
  done
  runs+=("$first $last $t")
  for r in "${runs[@]}"; do
    read -r first last iters warmup <<<"$r"
    k=$((k + 1))
    run_tool "$n" "$first" "$last" "$iters" "$warmup" "$reps" "$work/main.$n.$k.log" || status=1
  done
  # Re-measure the sizes whose ratio is above the threshold, each alone.
  if [[ $recheck == 1 ]]; then
    for s in $(cat "$work"/main."$n".*.log 2>/dev/null |
               awk -v th="$threshold" '!/^#/ && NF > 2 && $NF ~ /^[0-9.]+$/ && $NF + 0 > th { print $1 }'); do
      read -r iters warmup <<<"$(tier "$s")"
      # Below 256 KiB a round takes milliseconds: more of them cost little.
      rounds=$recheck_reps
      ((s < 256 << 10)) && rounds=$recheck_reps_small
      run_tool "$n" "$s" "$s" "$iters" "$warmup" "$rounds" "$work/recheck.$n.$s.log" || status=1
    done
  fi
  python3 - "$work" "$n" "$threshold" "$reps" "$recheck_reps_small/$recheck_reps" "$outdir/auto_vs_forced_np$n.txt" "$context" <<'PY'
import glob, re, sys
work, n, threshold, reps, recheck_reps, out, context = sys.argv[1:8]
threshold = float(threshold)

def read(paths):
    """The header line, data rows by size, the n/a and wrong-value notes, the what-ran lines."""
    head, rows, notes, ran = None, {}, [], {}
    for p in paths:
        for line in open(p):
            line = line.rstrip("\n")
            if line.startswith("#  ") and "size(B)" in line:
                head = line
            elif line.startswith("# n/a:") or line.startswith("# wrong values:"):
                notes.append(line)
            elif re.match(r"^# +[0-9]+: ", line):
                ran[int(line[1:].split(":")[0])] = line
            elif line and not line.startswith("#"):
                rows[int(line.split()[0])] = line
    return head, rows, notes, ran

def choice_ratio(head, row, ran_line):
    """Time of the forced column that ran exactly what auto ran, over the best time; None if none did."""
    names = head.lstrip("#").split()[1:]            # size(B) excluded: ring tree ... auto "auto ran" ...
    cols = names[:names.index("auto") + 1]
    fields = row.split()
    times = dict(zip(cols, fields[1:1 + len(cols)]))
    ran_by = dict(item.split("=", 1) for item in ran_line.split(":", 1)[-1].split() if "=" in item)
    best = fields[1 + len(cols) + 1]                # after the times: auto ran, best time, best is, ratios
    auto_ran = ran_by.get("auto")
    if auto_ran is None or not re.fullmatch(r"[0-9.]+", best):
        return None
    same = [times[c] for c in cols if c != "auto" and ran_by.get(c) == auto_ran and re.fullmatch(r"[0-9.]+", times[c])]
    return min(float(t) for t in same) / float(best) if same else None

def key(p):
    return int(re.search(r"\.([0-9]+)\.log$", p).group(1))

head, rows, notes, ran = read(sorted(glob.glob(f"{work}/main.{n}.*.log"), key=key))
_, again, again_notes, again_ran = read(glob.glob(f"{work}/recheck.{n}.*.log"))
lines = [f"## {n} ranks (processes): all-reduce, interleaved --algos runs, median of {reps} rounds, us",
         f"# {context}"]
if head is None:
    lines.append("# no table: every run failed")
else:
    lines.append(head + f" {'re-measured':>12} {'choice/best':>12}")
    worst, worst_confirmed, worst_choice = (0.0, None), (0.0, None), (0.0, None)
    for size in sorted(rows):
        row = rows[size]
        ratio = row.split()[-1]
        extra = ""
        confirmed = float(ratio) if re.fullmatch(r"[0-9.]+", ratio) else None
        if confirmed is not None and confirmed > worst[0]:
            worst = (confirmed, size)
        if size in again:
            r2 = again[size].split()[-1]
            extra = f" {r2:>12}"
            confirmed = float(r2) if re.fullmatch(r"[0-9.]+", r2) else confirmed
        else:
            extra = f" {'':>12}"
        if confirmed is not None and confirmed > worst_confirmed[0]:
            worst_confirmed = (confirmed, size)
        # The tuner's choice, timed as a forced algorithm (see the note below).
        use_again = size in again and size in again_ran
        c = choice_ratio(head, (again if use_again else rows)[size], (again_ran if use_again else ran).get(size, ""))
        extra += f" {c:>12.3f}" if c is not None else f" {'n/a':>12}"
        if c is not None and c > worst_choice[0]:
            worst_choice = (c, size)
        lines.append(row + extra)
    lines.append(f"# worst paired: {worst[0]:.3f} at {worst[1]} B")
    lines.append(f"# worst paired, re-measured where above {threshold}: {worst_confirmed[0]:.3f} at "
                 f"{worst_confirmed[1]} B ({recheck_reps} rounds alone below/from 256 KiB)")
    medians = [float(f[-2]) for f in (r.split() for r in rows.values()) if re.fullmatch(r"[0-9.]+", f[-2])]
    if medians:
        lines.append(f"# worst auto/best (ratio of medians, first runs): {max(medians):.3f}")
    lines.append(f"# worst choice/best: {worst_choice[0]:.3f} at {worst_choice[1]} B (re-measured rows where there are)")
    lines.append("# choice/best: the time of the forced algorithm that ran what auto ran (same algorithm and"
                 " protocol), over the best (ratio of medians); with online tuning (LOOM_TUNER_ONLINE) auto may"
                 " run more than one, and this column shows n/a there")
    final = [(again.get(size) or rows[size]).split() for size in sorted(rows)]
    final = [f for f in final if re.fullmatch(r"[0-9.]+", f[-1])]
    same = sum(f[-5] == f[-3] for f in final)
    lines.append(f"# auto ran the best's algorithm/protocol at {same} of {len(final)} sizes (re-measured rows where"
                 " there are)")
    for size in sorted(again):
        lines.append(f"# re-measured {size} B: {' '.join(again[size].split()[1:])}")
    lines.extend(sorted(set(notes)))
    lines.append("# what ran:")
    lines.extend(ran[s] for s in sorted(ran))
text = "\n".join(lines)
print(text)
open(out, "w").write(text + "\n")
PY
done
echo "# runs took $((SECONDS - start)) s; tables in $outdir/auto_vs_forced_np{${ranks_list// /,}}.txt"
exit $status
