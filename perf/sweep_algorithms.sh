#!/usr/bin/env bash
# Sweeps all-reduce over sizes for every Loom algorithm forced with LOOM_ALGO,
# Loom's own choice (auto) and Open MPI's MPI_Allreduce, in one run, for 2 and
# 4 ranks (one process per rank); writes a data file and a PNG per rank count
# and prints a table per size: each algorithm's time, auto's time and choice,
# the best forced algorithm, auto/best, MPI's time and Loom/MPI.
#
# Usage: perf/sweep_algorithms.sh [BUILD_DIR]   (default: $LOOM_BUILD_DIR, else ./build)
# Builds nothing: BUILD_DIR/bin must hold loomrun, all_reduce_perf and, for the
# baseline, mpi_all_reduce_perf.
#
# Environment knobs:
#   RANKS ("2 4")                      rank counts
#   ALGOS ("ring tree hd rd oneshot auto") LOOM_ALGO values; auto leaves LOOM_ALGO unset
#   MIN (8), MAX (256M), FACTOR (4)    sizes: MAX, MAX/FACTOR, ... down to above MIN, and MIN
#   ONESHOT_MAX (1M)                   oneshot is swept only up to here (it applies to small sizes)
#   REPS (3)                           repetitions; the median time counts
#   REPS_LARGE (1)                     repetitions of sizes >= 16 MiB (each is already a mean over
#                                      several long calls; more repetitions would double the runtime)
#   ITERS_SMALL/MEDIUM/LARGE (400/10/3) timed iterations below 256 KiB (after 100 warm-up calls:
#                                      a run's first sizes otherwise measure lazy set-up) / below 16 MiB / above
#   MPI (1)                            0 skips the Open MPI baseline
#   OUT (perf/results)                 where allreduce_np<N>.{dat,png,txt} go
#   RUN_TIMEOUT (300)                  seconds one tool run may take before it is killed
#   DTYPE (float), OP (sum), MPIRUN_ARGS (extra mpirun flags)
#   KEEP_WORK (unset)                  set: keep the tools' logs (their folder is printed)
#
# Every run makes blocking calls (-z 1: Loom's NULL stream, like MPI_Allreduce)
# and reports the out-of-place time averaged over ranks (-a 1); the first
# repetition checks every result (-c 1), the others only time. A forced
# algorithm's time counts only at sizes where the tool's algorithm column shows
# that the algorithm ran (LOOM_ALGO falls back to one that can run the call
# where the forced one does not apply, and ignores names it does not know); a
# forced algorithm that never ran gets a note. Runs that reach 1 MiB also
# measure the host's stream bandwidth (all_reduce_perf --mem-bound 1) and the table
# shows auto's share of the memory-traffic bound, (3n-1) x size / stream
# bandwidth / time (see perf/README.md).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-${LOOM_BUILD_DIR:-./build}}
bin=$build/bin
ranks_list=${RANKS:-"2 4"}
algos=${ALGOS:-"ring tree hd rd oneshot auto"}
reps=${REPS:-3}
reps_large=${REPS_LARGE:-1}
factor=${FACTOR:-4}
dtype=${DTYPE:-float}
op=${OP:-sum}
outdir=${OUT:-perf/results}
run_timeout=${RUN_TIMEOUT:-300}
use_mpi=${MPI:-1}

# to_bytes 64M -> 67108864
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
oneshot_max=$(to_bytes "${ONESHOT_MAX:-1M}")
if ((min < 1 || max < min || factor < 2)); then
  echo "sweep_algorithms.sh: need 1 <= MIN <= MAX and FACTOR >= 2 (MIN=$min MAX=$max FACTOR=$factor)" >&2
  exit 2
fi

for tool in loomrun all_reduce_perf; do
  if [[ ! -x $bin/$tool ]]; then
    echo "sweep_algorithms.sh: $bin/$tool not found; build the targets loomrun and all_reduce_perf first" >&2
    exit 2
  fi
done
have_mpi=0
mpi_note=""
if [[ $use_mpi != 1 ]]; then
  mpi_note="Open MPI baseline skipped (MPI=$use_mpi)"
elif ! command -v mpirun >/dev/null 2>&1; then
  mpi_note="Open MPI baseline unavailable: mpirun is not installed"
elif [[ ! -x $bin/mpi_all_reduce_perf ]]; then
  mpi_note="Open MPI baseline unavailable: $bin/mpi_all_reduce_perf was not built"
else
  have_mpi=1
fi
have_gnuplot=1
command -v gnuplot >/dev/null 2>&1 || have_gnuplot=0

# shellcheck disable=SC2054  # self,vader is one argument
mpirun_cmd=(mpirun --oversubscribe --mca btl self,vader --bind-to none)
[[ $(id -u) -eq 0 ]] && mpirun_cmd+=(--allow-run-as-root)
# shellcheck disable=SC2206  # word splitting of user-given flags is intended
[[ -n ${MPIRUN_ARGS:-} ]] && mpirun_cmd+=($MPIRUN_ARGS)

# The sizes, ascending: MAX / FACTOR^k while above MIN, then MIN.
sizes=()
for ((s = max; s > min; s /= factor)); do sizes=("$s" "${sizes[@]}"); done
sizes=("$min" "${sizes[@]}")

# tier SIZE -> "iters warmup": fewer iterations where one call takes long.
tier() {
  if (($1 < 256 << 10)); then echo "${ITERS_SMALL:-400} 100"
  elif (($1 < 16 << 20)); then echo "${ITERS_MEDIUM:-10} 2"
  else echo "${ITERS_LARGE:-3} 1"; fi
}

# The tool runs that cover sizes up to LIMIT: "first last iters warmup" per
# line, consecutive sizes a factor apart and of one tier joined into one run.
plan_runs() {
  local limit=$1 first="" last="" t="" s st
  for s in "${sizes[@]}"; do
    ((s > limit)) && break
    st=$(tier "$s")
    if [[ -n $first && $st == "$t" && $s -eq $((last * factor)) ]]; then
      last=$s
    else
      [[ -n $first ]] && echo "$first $last $t"
      first=$s last=$s t=$st
    fi
  done
  [[ -n $first ]] && echo "$first $last $t"
  return 0
}

work=$(mktemp -d)
trap '[[ -n ${KEEP_WORK:-} ]] && echo "# kept $work" || rm -rf "$work"' EXIT
mkdir -p "$outdir"

# run_series SERIES NRANKS REP: runs the planned sizes for one series (an
# algorithm name, "auto" or "mpi"); each run's output goes to
# $work/SERIES.NRANKS.REP.<run>.log. Returns non-zero when a run failed.
run_series() {
  local series=$1 n=$2 rep=$3 check=0 limit=$max k=0 first last iters warmup
  [[ $rep -eq 1 ]] && check=1
  [[ $series == oneshot ]] && ((oneshot_max < limit)) && limit=$oneshot_max
  local launcher=("$bin/loomrun" -n "$n" --no-tag-output "$bin/all_reduce_perf" -z 1)
  [[ $series == mpi ]] && launcher=("${mpirun_cmd[@]}" -np "$n" "$bin/mpi_all_reduce_perf")
  local env=(env -u LOOM_ALGO)
  [[ $series != auto && $series != mpi ]] && env=(env "LOOM_ALGO=$series")
  # The launchers get /dev/null as stdin: mpirun would otherwise read the plan.
  while read -r first last iters warmup; do
    local log=$work/$series.$n.$rep.$k.log bound=0
    ((first >= 16 << 20 && rep > reps_large)) && continue
    ((last >= 1 << 20)) && bound=1
    k=$((k + 1))
    if ! timeout "$run_timeout" "${env[@]}" "${launcher[@]}" -b "$first" -e "$last" -f "$factor" -n "$iters" \
        -w "$warmup" -c "$check" -d "$dtype" -o "$op" -a 1 --mem-bound "$bound" --algo-column </dev/null >"$log" 2>&1; then
      echo "# note: $series with $n ranks failed on $first..$last B (repetition $rep); its last lines:" >&2
      tail -5 "$log" | sed 's/^/#   /' >&2
      return 1
    fi
  done < <(plan_runs "$limit")
}

read -r -a series_list <<<"$algos"
[[ $have_mpi -eq 1 ]] && series_list+=(mpi)
start=$SECONDS
echo "# all-reduce sweep on $(hostname) ($(nproc) cores), $dtype $op, out-of-place, blocking calls (-z 1)"
echo "# sizes ${sizes[0]} .. ${sizes[-1]} B (factor $factor), ranks: $ranks_list, series: ${series_list[*]}"
echo "# median of $reps repetitions ($reps_large from 16 MiB); iterations per tier (<256K, <16M, larger): ${ITERS_SMALL:-400}, ${ITERS_MEDIUM:-10}, ${ITERS_LARGE:-3}"
[[ -n $mpi_note ]] && echo "# $mpi_note"
[[ $have_gnuplot -eq 0 ]] && echo "# gnuplot not found: data files and tables only (scripts/setup.sh installs gnuplot-nox)"

# Repetitions are the outer loop so that every series sees the same drift of
# this shared machine (the medians then compare like with like).
failed=""
for n in $ranks_list; do
  for ((rep = 1; rep <= reps; ++rep)); do
    for series in "${series_list[@]}"; do
      [[ " $failed " == *" $series.$n "* ]] && continue
      if ! run_series "$series" "$n" "$rep"; then
        failed+=" $series.$n"
        rm -f "$work/$series.$n".*.log
      fi
    done
  done
done
echo "# runs took $((SECONDS - start)) s"

python3 - "$work" "$outdir" "$reps" "$factor" "$failed" "$ranks_list" "${series_list[@]}" <<'PY'
import collections, glob, math, os, re, statistics, sys

work, outdir, reps, factor, failed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
ranks = sys.argv[6].split()
series = sys.argv[7:]
forced = [s for s in series if s not in ("auto", "mpi")]

def load(name, n):
    """size -> {"t": [time us], "share": [...], "algo": Counter, "wrong": int}, and the stream bandwidths."""
    rows, streams, unknown = {}, [], False
    for path in sorted(glob.glob(f"{work}/{name}.{n}.*.log")):
        with open(path) as f:
            for line in f:
                if "unknown algorithm" in line:
                    unknown = True
                m = re.match(r"# Stream bandwidth: ([0-9.]+) GB/s", line)
                if m:
                    streams.append(float(m.group(1)))
                cols = line.split()
                if not cols or not re.fullmatch(r"[0-9]+", cols[0]) or len(cols) < 14:
                    continue
                r = rows.setdefault(int(cols[0]), {"t": [], "share": [], "algo": collections.Counter(), "wrong": 0})
                r["t"].append(float(cols[5]))
                if len(cols) >= 16 and cols[13] != "-":
                    r["share"].append(float(cols[13]))
                r["algo"][cols[-1].split("|")[0]] += 1
                for c in (cols[8], cols[12]):
                    if c != "N/A":
                        r["wrong"] += int(c)
    return rows, streams, unknown

def ran(name, algo):
    """Did the forced algorithm itself run? The column reads "name/Protocol"."""
    return name in ("auto", "mpi") or algo.split("/")[0] == name

def fmt(x, width=9, digits=2):
    """Fewer decimals as the number grows, as the tools print times, so that it fits."""
    if x is None:
        return f"{'-':>{width}}"
    if x >= 10 ** (width - digits - 1):
        digits = 0 if x >= 10 ** (width - 2) else 1
    return f"{x:>{width}.{digits}f}"

summary_lines = []
for n in ranks:
    factor_bw = 2 * (int(n) - 1) / int(n)
    data, notes, streams = {}, [], []
    for name in series:
        if f"{name}.{n}" in failed:
            notes.append(f"{name}: a run failed (see above); left out")
            continue
        rows, st, unknown = load(name, n)
        if name == "auto":
            streams = st
        if not rows:
            notes.append(f"{name}: no rows in its output")
            continue
        times = {}
        for size, r in rows.items():
            algo = r["algo"].most_common(1)[0][0]
            if ran(name, algo):
                times[size] = (statistics.median(r["t"]), algo,
                               statistics.median(r["share"]) if r["share"] else None, r["wrong"])
        if name in forced and not times:
            others = sorted({r["algo"].most_common(1)[0][0] for r in rows.values()})
            why = "LOOM_ALGO named an unknown algorithm" if unknown else "it never applied or is not registered"
            notes.append(f"{name}: never ran ({why}; ran {', '.join(others) or 'nothing'} instead)")
            continue
        elif name in forced and len(times) < len(rows):
            notes.append(f"{name}: ran up to {max(times)} B only ({len(rows) - len(times)} sizes fell back)")
        wrong = sum(r["wrong"] for r in rows.values())
        if wrong:
            notes.append(f"{name}: {wrong} WRONG values in the checked repetition")
        data[name] = times

    sizes = sorted({s for t in data.values() for s in t})
    names = [s for s in series if s in data]
    # The data file for gnuplot: times, then busbw, NaN where a series did not run.
    dat = os.path.join(outdir, f"allreduce_np{n}.dat")
    with open(dat, "w") as f:
        f.write("size " + " ".join(names) + " " + " ".join(names) + "\n")
        for size in sizes:
            t = [data[s][size][0] if size in data[s] else None for s in names]
            bw = [size / (x * 1e3) * factor_bw if x else None for x in t]
            f.write(f"{size} " + " ".join("NaN" if x is None else f"{x:.6g}" for x in t + bw) + "\n")

    lines = []
    out = lines.append
    out(f"\n## {n} ranks: time per all-reduce (us), median of the repetitions")
    if streams:
        out(f"# stream bandwidth {statistics.median(streams):.2f} GB/s (median of {len(streams)} measurements);"
            f" %mem = auto's share of the memory-traffic bound ({3 * int(n) - 1} x size / stream bw / time)")
    head = f"{'size(B)':>10}" + "".join(f" {s:>9}" for s in forced if s in data)
    head += f" {'auto':>9} {'auto ran':>14} {'best':>9} {'best is':>8} {'auto/best':>9}"
    if "mpi" in data:
        head += f" {'mpi':>9} {'best/mpi':>8} {'auto/mpi':>8}"
    head += f" {'%mem':>6}"
    out(head)
    for size in sizes:
        row = f"{size:>10}"
        best = None
        for s in forced:
            if s not in data:
                continue
            t = data[s].get(size)
            row += " " + fmt(t[0] if t else None)
            if t and (best is None or t[0] < best[0]):
                best = (t[0], s)
        auto = data.get("auto", {}).get(size)
        mpi = data.get("mpi", {}).get(size)
        row += " " + fmt(auto[0] if auto else None) + f" {auto[1] if auto else '-':>14}"
        row += " " + fmt(best[0] if best else None) + f" {best[1] if best else '-':>8}"
        row += " " + fmt(auto[0] / best[0] if auto and best else None)
        if "mpi" in data:
            loom_best = min(x for x in (best[0] if best else None, auto[0] if auto else None) if x is not None) \
                if (best or auto) else None
            row += " " + fmt(mpi[0] if mpi else None)
            row += " " + fmt(loom_best / mpi[0] if loom_best and mpi else None, 8)
            row += " " + fmt(auto[0] / mpi[0] if auto and mpi else None, 8)
        row += " " + fmt(auto[2] if auto and auto[2] is not None else None, 6, 1)
        out(row)
    out("# best = fastest forced algorithm; best/mpi uses the fastest of the forced ones and auto;"
        " time ratios < 1 mean the first is faster")
    for note in notes:
        out(f"# note: {note}")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(outdir, f"allreduce_np{n}.txt"), "w") as f:
        f.write(text.lstrip("\n") + "\n")
    print(f"# data: {dat}")
PY

if [[ $have_gnuplot -eq 1 ]]; then
  for n in $ranks_list; do
    dat=$outdir/allreduce_np$n.dat
    png=$outdir/allreduce_np$n.png
    nseries=$(($(head -1 "$dat" | wc -w) / 2))
    if ((nseries == 0)) || [[ $(wc -l <"$dat") -lt 2 ]]; then
      echo "# no data for $n ranks; no plot"
      continue
    fi
    gnuplot -e "datafile='$dat'; outfile='$png'; nseries=$nseries; heading='all-reduce, $n ranks (processes), $dtype $op, blocking'" \
      "$here/plot_sweep.gp"
    echo "# plot: $png"
  done
fi
