#!/usr/bin/env bash
# Compares Loom's all_reduce_perf with the Open MPI baseline (mpi_all_reduce_perf)
# on this machine, for 2 and 4 ranks (one process per rank), over the same sweep.
#
# Usage: perf/compare_mpi.sh [BUILD_DIR]      (default: $LOOM_BUILD_DIR, else ./build)
# Builds nothing: BUILD_DIR/bin must hold loomrun, all_reduce_perf and, for the
# baseline, mpi_all_reduce_perf.
#
# What is reported: for each size, the median over REPS runs of the out-of-place
# time per all-reduce (each run's time is the mean over -n iterations after -w
# warm-ups, averaged over ranks: nccl-tests' -a 1), and the bus bandwidth of
# that median time (S / t x 2(n-1)/n).
# The sweep is -b 8 -e 64M -f 4 (8 B .. 32 MiB) plus a run at exactly 64 MiB,
# since 64 MiB is not a power of 4 times 8. The first repetition checks every
# result (-c 1); the others only time (-c 0).
#
# Environment knobs: REPS (5), ITERS (20), WARMUP (5), RANKS ("2 4"), DTYPE (float),
# OP (sum), MPIRUN_ARGS (extra mpirun flags).
#
# Open MPI 4.1 is run on loopback shared memory only: --mca btl self,vader,
# --bind-to none (loomrun does not pin either), --oversubscribe (4 ranks on
# fewer cores), and --allow-run-as-root when run as root. Nothing else is set.
set -euo pipefail

build=${1:-${LOOM_BUILD_DIR:-./build}}
bin=$build/bin
reps=${REPS:-5}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
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

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=(-d "$dtype" -o "$op" -n "$iters" -w "$warmup" -a 1)

# run_tool LIBRARY NRANKS REP: appends the tool's table rows to $work/LIBRARY.NRANKS.REP
run_tool() {
  local library=$1 n=$2 rep=$3 check=0 out=$work/$1.$2.$3
  [[ $rep -eq 1 ]] && check=1
  # -z 1: blocking calls on Loom's NULL stream, like MPI_Allreduce.
  local launcher=("$bin/loomrun" -n "$n" --no-tag-output "$bin/all_reduce_perf" -z 1)
  [[ $library == mpi ]] && launcher=("${mpirun_cmd[@]}" -np "$n" "$bin/mpi_all_reduce_perf")
  for range in "-b 8 -e 64M -f 4" "-b 64M -e 64M"; do
    # shellcheck disable=SC2086  # $range holds several flags
    if ! "${launcher[@]}" $range -c "$check" "${common[@]}" >"$out.log" 2>&1; then
      echo "compare_mpi.sh: $library with $n ranks failed (repetition $rep):" >&2
      tail -20 "$out.log" >&2
      exit 1
    fi
    grep -v '^#' "$out.log" | grep -E '^ *[0-9]' >>"$out" || true
  done
}

echo "# Loom vs Open MPI all-reduce on $(hostname) ($(nproc) cores), $dtype $op, out-of-place"
echo "# median of $reps runs; each run: -n $iters timed iterations after -w $warmup, time averaged over ranks;"
echo "# busbw (GB/s) = size / median time x 2(n-1)/n; both sides make blocking calls (Loom: -z 1, NULL stream)"
echo "# time ratio = MPI time / Loom time and busbw ratio = Loom busbw / MPI busbw: > 1 means Loom is faster"
[[ $have_mpi -eq 0 ]] && echo "# Open MPI baseline unavailable: $mpi_missing; showing Loom alone"

for n in $ranks_list; do
  for ((rep = 1; rep <= reps; ++rep)); do
    run_tool loom "$n" "$rep"
    [[ $have_mpi -eq 1 ]] && run_tool mpi "$n" "$rep"
  done
done

python3 - "$work" "$reps" "$have_mpi" $ranks_list <<'PY'
import statistics, sys
work, reps, have_mpi, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4:]

def load(library, n):
    """size -> (median time us, its busbw in GB/s, total wrong) over the repetitions.

    busbw is recomputed from the median time (S/t x 2(n-1)/n) rather than read
    from the tools' two-decimal column, so small sizes keep their precision."""
    times, wrong = {}, {}
    factor = 2 * (int(n) - 1) / int(n)
    for rep in range(1, reps + 1):
        with open(f"{work}/{library}.{n}.{rep}") as f:
            for line in f:
                cols = line.split()
                size = int(cols[0])
                times.setdefault(size, []).append(float(cols[5]))
                if cols[8] != "N/A":
                    wrong[size] = wrong.get(size, 0) + int(cols[8]) + int(cols[12])
    result = {}
    for size, samples in times.items():
        t = statistics.median(samples)
        result[size] = (t, size / (t * 1e3) * factor if t > 0 else 0.0, wrong.get(size, 0))
    return result

def ratio(a, b):
    return f"{a / b:8.2f}" if b > 0 else "     n/a"

summary = []
for n in ranks:
    loom = load("loom", n)
    mpi = load("mpi", n) if have_mpi else {}
    print(f"\n## {n} ranks")
    if have_mpi:
        print(f"{'size(B)':>10} {'loom(us)':>10} {'mpi(us)':>10} {'mpi/loom':>8} {'loom busbw':>11} {'mpi busbw':>10} {'loom/mpi':>8}")
    else:
        print(f"{'size(B)':>10} {'loom(us)':>10} {'loom busbw':>11}")
    for size in sorted(loom):
        lt, lb, _ = loom[size]
        if have_mpi and size in mpi:
            mt, mb, _ = mpi[size]
            print(f"{size:>10} {lt:>10.2f} {mt:>10.2f} {ratio(mt, lt)} {lb:>11.3f} {mb:>10.3f} {ratio(lb, mb)}")
        else:
            print(f"{size:>10} {lt:>10.2f} {lb:>11.3f}")
    wrong = sum(w for _, _, w in loom.values()) + sum(w for _, _, w in mpi.values())
    print(f"# wrong values in the checked run: {wrong}")
    summary.append((n, loom, mpi))

print("\n## summary")
for n, loom, mpi in summary:
    small, large = min(loom), max(loom)
    if have_mpi and small in mpi and large in mpi:
        print(f"{n} ranks: {small} B latency loom {loom[small][0]:.2f} us, mpi {mpi[small][0]:.2f} us, "
              f"ratio mpi/loom {mpi[small][0] / loom[small][0]:.2f}; "
              f"{large >> 20} MiB busbw loom {loom[large][1]:.3f} GB/s, mpi {mpi[large][1]:.3f} GB/s, "
              f"ratio loom/mpi {loom[large][1] / mpi[large][1] if mpi[large][1] > 0 else float('nan'):.2f}")
    else:
        print(f"{n} ranks: {small} B latency loom {loom[small][0]:.2f} us; "
              f"{large >> 20} MiB busbw loom {loom[large][1]:.3f} GB/s")
PY
