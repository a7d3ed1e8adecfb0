#!/usr/bin/env bash
# Compares Loom's all_reduce_perf with the Open MPI baseline (mpi_all_reduce_perf)
# on this machine, for 2 and 4 ranks (one process per rank), over the same sweep.
#
# Usage: perf/compare_mpi.sh [BUILD_DIR]      (default: $LOOM_BUILD_DIR, else ./build)
# Builds nothing: BUILD_DIR/bin must hold loomrun, all_reduce_perf and, for the
# baseline, mpi_all_reduce_perf (and loom_vs_mpi_latency for the last section:
# the 8 B ratio with both libraries in the same processes).
#
# What is reported: for each size, the median over REPS runs of the out-of-place
# time per all-reduce (each run's time is the mean over -n iterations after -w
# warm-ups, averaged over ranks: nccl-tests' -a 1), and the bus bandwidth of
# that median time (S / t x 2(n-1)/n).
# The sweep is -b 8 -e 64M -f 4 (8 B .. 32 MiB) plus a run at exactly 64 MiB,
# since 64 MiB is not a power of 4 times 8. The first repetition checks every
# result (-c 1); the others only time (-c 0).
# Each run also measures the host's stream bandwidth (all_reduce_perf's
# --mem-bound 1) and prints, per size >= 1 MiB, the share of the memory-traffic
# bound achieved ((3n-1) x size / stream bandwidth / time; perf/README.md);
# the table shows its median, and Loom's algorithm column.
#
# The summary checks Loom's targets against Open MPI: 8 B latency Loom/MPI <= 0.8 at 2
# ranks and <= 1.0 at 4 ranks, 64 MiB busbw Loom/MPI >= 1.5, and a 64 MiB
# memory-bound share >= 60%.
#
# Sizes up to 8 KiB run separately with SMALL_ITERS (2000) after SMALL_WARMUP (500),
# SMALL_REPS times (15): such a run lasts a few milliseconds, and this machine
# switches between states that last seconds (2 ranks at 8 B: 0.15, 0.23 or
# 0.45 us a call, for both libraries), so a median of 5 short runs is mostly
# a draw of states; the extra runs alternate the two libraries like the rest.
# BEFORE=OTHER_BUILD_DIR adds a third library in the same alternating rounds:
# Loom as built in OTHER_BUILD_DIR (e.g. the previous commit), with the same
# flags, and prints its median time and the after/before ratio per size (a
# refactor that must not change performance keeps them within a few percent).
# Environment knobs: REPS (5), SMALL_REPS (15), ITERS (20), MID_WARMUP (400), LARGE_WARMUP (25), RANKS ("2 4"),
# DTYPE (float), OP (sum), MPIRUN_ARGS (extra mpirun flags).
#
# Open MPI 4.1 is run on loopback shared memory only: --mca btl self,vader,
# --bind-to none (loomrun does not pin either), --oversubscribe (4 ranks on
# fewer cores), and --allow-run-as-root when run as root. Nothing else is set.
set -euo pipefail

build=${1:-${LOOM_BUILD_DIR:-./build}}
bin=$build/bin
reps=${REPS:-5}
iters=${ITERS:-20}
small_iters=${SMALL_ITERS:-2000}
small_warmup=${SMALL_WARMUP:-500}
small_reps=${SMALL_REPS:-15}
ranks_list=${RANKS:-"2 4"}
dtype=${DTYPE:-float}
op=${OP:-sum}

for tool in loomrun all_reduce_perf; do
  if [[ ! -x $bin/$tool ]]; then
    echo "compare_mpi.sh: $bin/$tool not found; build the targets loomrun and all_reduce_perf first" >&2
    exit 2
  fi
done

have_mpi=1
if ! command -v mpirun >/dev/null 2>&1; then
  have_mpi=0; mpi_missing="mpirun is not installed"
elif [[ ! -x $bin/mpi_all_reduce_perf ]]; then
  have_mpi=0; mpi_missing="$bin/mpi_all_reduce_perf was not built (Open MPI not found at configure time?)"
fi

mpirun_cmd=(mpirun --oversubscribe --mca btl self,vader --bind-to none)
[[ $(id -u) -eq 0 ]] && mpirun_cmd+=(--allow-run-as-root)
# shellcheck disable=SC2206  # word splitting of user-given flags is intended
[[ -n ${MPIRUN_ARGS:-} ]] && mpirun_cmd+=($MPIRUN_ARGS)

before_bin=""
if [[ -n ${BEFORE:-} ]]; then
  before_bin=$BEFORE/bin
  for tool in loomrun all_reduce_perf; do
    if [[ ! -x $before_bin/$tool ]]; then
      echo "compare_mpi.sh: BEFORE=$BEFORE: $before_bin/$tool not found" >&2
      exit 2
    fi
  done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(-d "$dtype" -o "$op" -n "$iters" -a 1)

small_range="-b 8 -e 8K -f 4"
mid_range="-b 32K -e 512K -f 4"
all_ranges=("$small_range" "$mid_range" "-b 2M -e 32M -f 4" "-b 64M -e 64M")
# Warm-ups that cover Loom's first exploration of each size (online tuning,
# README: up to 384 calls below 64 KiB, 96 below 1 MiB, 24 above), so that
# the timed calls measure what a loop repeating the call gets; MPI gets the same.
mid_warmup=${MID_WARMUP:-400}
large_warmup=${LARGE_WARMUP:-25}

# run_tool LIBRARY NRANKS REP RANGE...: appends the tool's table rows to $work/LIBRARY.NRANKS.REP
run_tool() {
  local library=$1 n=$2 rep=$3 check=0 out=$work/$1.$2.$3
  shift 3
  [[ $rep -eq 1 ]] && check=1
  # -z 1: blocking calls on Loom's NULL stream, like MPI_Allreduce.
  # --mem-bound 1 --algo-column: the bound share and the algorithm after nccl-tests' columns.
  local extra=(--mem-bound 1 --algo-column)
  local launcher=("$bin/loomrun" -n "$n" --no-tag-output "$bin/all_reduce_perf" -z 1 "${extra[@]}")
  [[ $library == mpi ]] && launcher=("${mpirun_cmd[@]}" -np "$n" "$bin/mpi_all_reduce_perf" "${extra[@]}")
  if [[ $library == before ]]; then
    # A build from before these flags prints both columns by default.
    "$before_bin/all_reduce_perf" -h | grep -q -- --mem-bound || extra=()
    launcher=("$before_bin/loomrun" -n "$n" --no-tag-output "$before_bin/all_reduce_perf" -z 1 "${extra[@]}")
  fi
  # Sizes up to 8 KiB get their own run with many more warm-up and timed
  # calls: both libraries set connections up lazily, and with -w 5 the first
  # row of a run still measures that (Open MPI's 8 B: 1.7 us at -w 5, 0.55 us
  # at -w 100), which would decide the latency comparison.
  local small=(-n "$small_iters" -w "$small_warmup")
  for range in "$@"; do
    local counts=("${common[@]}" -w "$large_warmup")
    [[ $range == "$mid_range" ]] && counts=("${common[@]}" -w "$mid_warmup")
    [[ $range == "$small_range" ]] && counts=("${common[@]}" "${small[@]}")
    # shellcheck disable=SC2086  # $range holds several flags
    if ! "${launcher[@]}" $range -c "$check" "${counts[@]}" >"$out.log" 2>&1; then
      echo "compare_mpi.sh: $library with $n ranks failed (repetition $rep):" >&2
      tail -20 "$out.log" >&2
      exit 1
    fi
    grep -v '^#' "$out.log" | grep -E '^ *[0-9]' >>"$out" || true
    grep '^# Stream bandwidth:' "$out.log" >>"$out.streams" || true
  done
}

echo "# Loom vs Open MPI all-reduce on $(hostname) ($(nproc) cores), $dtype $op, out-of-place"
echo "# median of $reps runs (sizes up to 8 KiB: $small_reps runs of -n $small_iters after -w $small_warmup);"
echo "# each run: -n $iters timed iterations after -w $mid_warmup (32-512 KiB) or -w $large_warmup (from 2 MiB), time averaged over ranks;"
echo "# busbw (GB/s) = size / median time x 2(n-1)/n; both sides make blocking calls (Loom: -z 1, NULL stream)"
echo "# time ratio = MPI time / Loom time and busbw ratio = Loom busbw / MPI busbw: > 1 means Loom is faster"
[[ -n $before_bin ]] && echo "# before = Loom as built in $BEFORE, run in the same alternating rounds; after/before = this build's time / that build's time"
[[ $have_mpi -eq 0 ]] && echo "# Open MPI baseline unavailable: $mpi_missing; showing Loom alone"

for n in $ranks_list; do
  for ((rep = 1; rep <= reps || rep <= small_reps; ++rep)); do
    ranges=("${all_ranges[@]}")
    ((rep > reps)) && ranges=("$small_range")
    # With BEFORE, odd rounds run the other build first, so neither build always follows MPI.
    if [[ -n $before_bin ]] && ((rep % 2)); then run_tool before "$n" "$rep" "${ranges[@]}"; fi
    run_tool loom "$n" "$rep" "${ranges[@]}"
    if [[ -n $before_bin ]] && ! ((rep % 2)); then run_tool before "$n" "$rep" "${ranges[@]}"; fi
    [[ $have_mpi -eq 1 ]] && run_tool mpi "$n" "$rep" "${ranges[@]}"
  done
done

python3 - "$work" "$((reps > small_reps ? reps : small_reps))" "$have_mpi" "${before_bin:+1}" $ranks_list <<'PY'
import os, statistics, sys
work, reps, have_mpi, have_before, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5:]

def load(library, n):
    """size -> (median time us, its busbw in GB/s, total wrong, median memory-bound
    share or None, most frequent algorithm) over the repetitions.

    busbw is recomputed from the median time (S/t x 2(n-1)/n) rather than read
    from the tools' two-decimal column, so small sizes keep their precision.
    The share (column 14) and the algorithm (the last column) come after
    nccl-tests' 13 columns; the share is there when the run measured it."""
    times, wrong, shares, algos = {}, {}, {}, {}
    factor = 2 * (int(n) - 1) / int(n)
    for rep in range(1, reps + 1):  # runs beyond REPS hold the small sizes only
        with open(f"{work}/{library}.{n}.{rep}") as f:
            for line in f:
                cols = line.split()
                size = int(cols[0])
                times.setdefault(size, []).append(float(cols[5]))
                if cols[8] != "N/A":
                    wrong[size] = wrong.get(size, 0) + int(cols[8]) + int(cols[12])
                if len(cols) >= 16 and cols[13] != "-":
                    shares.setdefault(size, []).append(float(cols[13]))
                if len(cols) >= 14:
                    algos.setdefault(size, []).append(cols[-1])
    result = {}
    for size, samples in times.items():
        t = statistics.median(samples)
        share = statistics.median(shares[size]) if size in shares else None
        algo = max(set(algos.get(size, ["-"])), key=algos.get(size, ["-"]).count)
        result[size] = (t, size / (t * 1e3) * factor if t > 0 else 0.0, wrong.get(size, 0), share, algo)
    return result

def streams(library, n):
    """The stream bandwidths (GB/s) the runs measured."""
    found = []
    for rep in range(1, reps + 1):
        if not os.path.exists(f"{work}/{library}.{n}.{rep}.streams"):
            continue
        with open(f"{work}/{library}.{n}.{rep}.streams") as f:
            found += [float(line.split()[3]) for line in f if line.startswith("# Stream bandwidth:")]
    return found

def ratio(a, b):
    return f"{a / b:8.2f}" if b > 0 else "     n/a"

def share_text(s):
    return f"{s:>6.1f}" if s is not None else f"{'-':>6}"

summary = []
before_ratios = []
for n in ranks:
    loom = load("loom", n)
    mpi = load("mpi", n) if have_mpi else {}
    before = load("before", n) if have_before else {}
    print(f"\n## {n} ranks")
    stream = statistics.median(streams("loom", n) or [0])
    if stream:
        print(f"# stream bandwidth {stream:.2f} GB/s (median over the Loom runs); %mem = share of the"
              f" memory-traffic bound, {3 * int(n) - 1} x size / stream bandwidth / time")
    if have_mpi:
        print(f"{'size(B)':>10} {'loom(us)':>10} {'mpi(us)':>10} {'mpi/loom':>8} {'loom busbw':>11} {'mpi busbw':>10}"
              f" {'loom/mpi':>8} {'loom%mem':>8} {'mpi%mem':>7}  loom algorithm")
    else:
        print(f"{'size(B)':>10} {'loom(us)':>10} {'loom busbw':>11} {'loom%mem':>8}  loom algorithm")
    for size in sorted(loom):
        lt, lb, _, ls, la = loom[size]
        if have_mpi and size in mpi:
            mt, mb, _, ms, _ = mpi[size]
            print(f"{size:>10} {lt:>10.2f} {mt:>10.2f} {ratio(mt, lt)} {lb:>11.3f} {mb:>10.3f} {ratio(lb, mb)}"
                  f"   {share_text(ls)} {share_text(ms):>7}  {la}")
        else:
            print(f"{size:>10} {lt:>10.2f} {lb:>11.3f}   {share_text(ls)}  {la}")
    wrong = sum(v[2] for v in loom.values()) + sum(v[2] for v in mpi.values()) + sum(v[2] for v in before.values())
    print(f"# wrong values in the checked run: {wrong}")
    summary.append((n, loom, mpi))
    if have_before:
        print(f"# this build (after) vs BEFORE, same rounds")
        print(f"{'size(B)':>10} {'after(us)':>10} {'before(us)':>10} {'after/before':>12}  after / before algorithm")
        for size in sorted(loom):
            if size not in before:
                continue
            lt, bt = loom[size][0], before[size][0]
            r = lt / bt if bt > 0 else float("nan")
            before_ratios.append((n, size, r))
            print(f"{size:>10} {lt:>10.2f} {bt:>10.2f} {r:>12.3f}  {loom[size][4]} / {before[size][4]}")

if before_ratios:
    print("\n## after/before: this build's median time over BEFORE's, per size (1.000 = the same)")
    for n in ranks:
        rs = [r for m, _, r in before_ratios if m == n]
        worst = max(rs, key=lambda r: abs(r - 1))
        within = sum(abs(r - 1) <= 0.05 for r in rs)
        print(f"{n} ranks: median {statistics.median(rs):.3f}, furthest from 1: {worst:.3f},"
              f" within 5%: {within} of {len(rs)} sizes")

# Loom's targets; "met"/"MISSED" compare the medians above.
LATENCY_TARGET = {"2": 0.8, "4": 1.0}  # Loom/MPI time at the smallest size, at most
BUSBW_TARGET = 1.5                     # Loom/MPI busbw at 64 MiB, at least
SHARE_TARGET = 60.0                    # Loom's memory-bound share at 64 MiB (%), at least
LARGE = 64 << 20

def verdict(ok):
    return "met" if ok else "MISSED"

print("\n## summary: the targets (Loom/MPI time ratios < 1 and busbw ratios > 1 mean Loom is faster)")
for n, loom, mpi in summary:
    small = min(loom)
    large = LARGE if LARGE in loom else max(loom)
    lt = loom[small][0]
    if have_mpi and small in mpi:
        r = lt / mpi[small][0]
        target = LATENCY_TARGET.get(n)
        goal = f"target <= {target:.2f}: {verdict(r <= target)}" if target else "no target at this rank count"
        print(f"{n} ranks: {small} B latency loom {lt:.2f} us, mpi {mpi[small][0]:.2f} us, loom/mpi {r:.2f} ({goal})")
    else:
        print(f"{n} ranks: {small} B latency loom {lt:.2f} us")
    lb = loom[large][1]
    if have_mpi and large in mpi and mpi[large][1] > 0:
        r = lb / mpi[large][1]
        print(f"{n} ranks: {large >> 20} MiB busbw loom {lb:.3f} GB/s, mpi {mpi[large][1]:.3f} GB/s, loom/mpi {r:.2f}"
              f" (target >= {BUSBW_TARGET:.1f}: {verdict(r >= BUSBW_TARGET)})")
    else:
        print(f"{n} ranks: {large >> 20} MiB busbw loom {lb:.3f} GB/s")
    share = loom[large][3]
    if share is not None:
        mpi_share = mpi[large][3] if large in mpi and mpi[large][3] is not None else None
        also = f"; mpi {mpi_share:.1f}%" if mpi_share is not None else ""
        print(f"{n} ranks: {large >> 20} MiB memory-bound share loom {share:.1f}%{also}"
              f" (target >= {SHARE_TARGET:.0f}%: {verdict(share >= SHARE_TARGET)})")
    else:
        print(f"{n} ranks: {large >> 20} MiB memory-bound share not measured")
PY

# The smallest size once more, with both libraries in the same processes
# (loom_vs_mpi_latency: alternating blocks, ABBA), so that both see the same
# machine state; the separate runs above can land in different ones.
paired=$bin/loom_vs_mpi_latency
if [[ $have_mpi -eq 1 && -x $paired ]]; then
  echo
  echo "## 8 B latency, Loom and Open MPI in the same processes ($(basename "$paired"), 40 block pairs of 2000 calls)"
  for n in $ranks_list; do
    line=$("${mpirun_cmd[@]}" -np "$n" "$paired" -b 8 -e 8 --blocks 40 --iters 2000 | grep -v '^#')
    read -r size loom_us mpi_us ratio_median q25 q75 <<<"$line"
    target=$([[ $n == 2 ]] && echo 0.8 || echo 1.0)
    verdict=$(python3 -c "print('met' if $ratio_median <= $target else 'MISSED')")
    echo "$n ranks: $size B loom $loom_us us, mpi $mpi_us us, loom/mpi median of block pairs $ratio_median" \
      "(quartiles $q25-$q75; target <= $target: $verdict)"
  done
fi
