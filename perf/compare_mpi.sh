#!/usr/bin/env bash
# Compares Loom's all-reduce with the CPU libraries a user could pick instead:
# Open MPI, MPICH, Intel MPI, oneCCL and gloo, on this machine, for 2 and 4
# ranks (one process per rank, shared memory), in one run.
#
# Usage: perf/compare_mpi.sh [BUILD_DIR]      (default: $LOOM_BUILD_DIR, else ./build)
# BUILD_DIR/bin must hold loomrun and all_reduce_perf, and for Open MPI
# mpi_all_reduce_perf (configured with LOOM_WITH_MPI=ON). The other baselines
# are built or installed here, under BASELINES (default <repo>/.baselines,
# git-ignored), when their packages can be had:
#   MPICH      Debian's mpich + libmpich-dev (apt-get, as root, when missing);
#              mpi_all_reduce_perf.cc compiled with mpicxx.mpich
#   Intel MPI  PyPI's impi-rt + impi-devel in BASELINES/venv; mpi_all_reduce_perf.cc
#              compiled against the venv's mpi.h and linked to its libmpi.so.12
#              (rpath), run with I_MPI_FABRICS=shm. Debian's MPICH build cannot
#              stand in: it links libmpich.so.12, so it would run MPICH itself
#              under Intel's launcher
#   oneCCL     PyPI's oneccl-cpu + oneccl-cpu-devel in the same venv;
#              mpi_all_reduce_perf.cc with LOOM_PERF_ONECCL, libccl.a linked in,
#              started by Intel MPI's mpiexec, CCL_ATL_TRANSPORT=mpi
#   gloo       PyTorch's gloo backend from .venv-torch (scripts/setup_torch_venv.sh),
#              else from Debian's python3-torch
#              (perf/gloo/gloo_all_reduce_perf.py; its time includes the Python call)
# A library that cannot be had is reported as absent, with the reason, and its
# column shows "-". BASELINES_INSTALL=0 installs nothing (uses what is there).
# The venv's packages go in with --no-deps: impi-rt asks for libfabric, which
# shared memory does not use.
#
# Loom runs twice per round: blocking calls (-z 1, returning when done, like
# MPI_Allreduce) and calls on a stream (-z 0, nccl-tests' default).
# Every library runs every round, in an order that rotates by one each round,
# so none always follows the same one. Each run's time per size is the mean
# over -n calls after -w warm-ups, averaged over ranks (all_reduce_perf's -a 1);
# the table shows the median over REPS rounds. The first round checks results (-c 1).
# Sizes up to 8 KiB run with SMALL_ITERS calls after SMALL_WARMUP, from 16 KiB
# to 1 MiB with MID_ITERS after MID_WARMUP (Loom's online tuner explores a
# size's first calls: README; 20 calls of 1 MiB at 2 ranks last 2 ms, too
# short a window on a shared machine), larger ones with ITERS after LARGE_WARMUP.
#
# Knobs: SIZES ("8 1K 64K 1M 16M 64M"), RANKS ("2 4"), REPS (5), ITERS (20),
# SMALL_ITERS (2000), SMALL_WARMUP (500), MID_ITERS (100), MID_WARMUP (400),
# LARGE_WARMUP (10),
# LIBRARIES (all: loom-blocking loom-stream openmpi mpich intelmpi oneccl gloo),
# BASELINES, BASELINES_INSTALL (1), MPIRUN_ARGS (extra Open MPI flags);
# PIN: how ranks sit on cores, the same for every library that can be told:
#   none (default)  no library pins its ranks (Intel MPI: I_MPI_PIN=0, which
#                   it otherwise turns on by itself);
#   core            one core per rank, shared round-robin when there are more
#                   ranks than cores: loomrun --bind core, Open MPI --bind-to
#                   core:overload-allowed, MPICH -bind-to core, Intel MPI and
#                   oneCCL I_MPI_PIN=1 I_MPI_PIN_DOMAIN=core. gloo's launcher
#                   cannot pin, so it stays unpinned.
# BEFORE=OTHER_BUILD_DIR adds that build's Loom (blocking) to the rounds and
# prints after/before per size (a refactor that must not change performance).
#
# Printed: per rank count, one row per size with every library's median time
# (us), then Loom's time over the best other library's, for each mode (< 1:
# Loom is faster; the issue's target is <= 0.9), and stream over blocking at
# the smallest size (target <= 1.3). Each cell over 0.9 is listed with the
# rounds' times of Loom and of the best other library.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${LOOM_BUILD_DIR:-$root/build}}
bin=$build/bin
base=${BASELINES:-$root/.baselines}
install=${BASELINES_INSTALL:-1}
reps=${REPS:-5}
iters=${ITERS:-20}
mid_iters=${MID_ITERS:-100}
small_iters=${SMALL_ITERS:-2000}
small_warmup=${SMALL_WARMUP:-500}
mid_warmup=${MID_WARMUP:-400}
large_warmup=${LARGE_WARMUP:-10}
ranks_list=${RANKS:-"2 4"}
sizes_text=${SIZES:-"8 1K 64K 1M 16M 64M"}
libraries=${LIBRARIES:-"loom-blocking loom-stream openmpi mpich intelmpi oneccl gloo"}

for tool in loomrun all_reduce_perf; do
  if [[ ! -x $bin/$tool ]]; then
    echo "compare_mpi.sh: $bin/$tool not found; build the targets loomrun and all_reduce_perf first" >&2
    exit 2
  fi
done
perf_base=$build/lib/libloom_perf_base.a
# A build with CUDA compiled the harness's device buffers into perf_base: the
# baselines built here from it link the CUDA runtime that build found.
perf_libs=()
if [[ -f $perf_base ]] && nm -u "$perf_base" 2>/dev/null | grep -q ' U cuda'; then
  cudart=$(sed -n 's/^CUDA_cudart_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt" 2>/dev/null)
  [[ -f $cudart ]] && perf_libs=("$cudart" -Wl,-rpath,"$(dirname "$cudart")")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$base/bin"
declare -A absent=()

note() { echo "# $*"; }

# apt_have PACKAGE...: true when every package is installed, after trying apt-get as root.
apt_have() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  [[ $install == 1 && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null || return 1
  apt-get install -y -q "${missing[@]}" >"$work/apt.log" 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "${missing[@]}" >"$work/apt.log" 2>&1; }
}

# stale TARGET SOURCE...: true when TARGET is missing or older than a source.
stale() {
  local target=$1; shift
  [[ -x $target ]] || return 0
  for s in "$@"; do [[ $s -nt $target ]] && return 0; done
  return 1
}

# --- Open MPI: the build's mpi_all_reduce_perf (linked against Open MPI at configure time)
pin=${PIN:-none}
case $pin in
  none) loom_pin=(); openmpi_pin=(--bind-to none); mpich_pin=(); impi_pin=(I_MPI_PIN=0) ;;
  core) loom_pin=(--bind core); openmpi_pin=(--bind-to core:overload-allowed); mpich_pin=(-bind-to core)
        impi_pin=(I_MPI_PIN=1 I_MPI_PIN_DOMAIN=core) ;;
  *) echo "compare_mpi.sh: PIN=$pin: expected none or core" >&2; exit 2 ;;
esac
openmpi_run=(mpirun.openmpi --oversubscribe --mca btl self,vader "${openmpi_pin[@]}")
[[ $(id -u) -eq 0 ]] && openmpi_run+=(--allow-run-as-root)
# shellcheck disable=SC2206  # word splitting of user-given flags is intended
[[ -n ${MPIRUN_ARGS:-} ]] && openmpi_run+=($MPIRUN_ARGS)
if ! command -v mpirun.openmpi >/dev/null; then absent[openmpi]="mpirun.openmpi is not installed (Debian: openmpi-bin)"
elif [[ ! -x $bin/mpi_all_reduce_perf ]]; then absent[openmpi]="$bin/mpi_all_reduce_perf was not built (configure with -DLOOM_WITH_MPI=ON)"
fi

mpi_source=$root/perf/mpi/mpi_all_reduce_perf.cc
flags=(-std=c++20 -O2 -I"$root" -I"$root/include" -DMPICH_SKIP_MPICXX -DOMPI_SKIP_MPICXX)

# --- MPICH: the same source, compiled with MPICH's wrapper
mpich_tool=$base/bin/mpich_all_reduce_perf
if [[ ! -f $perf_base ]]; then
  absent[mpich]="$perf_base not found (build all_reduce_perf)"
elif ! apt_have mpich libmpich-dev; then
  absent[mpich]="Debian's mpich/libmpich-dev are not installed and could not be"
elif stale "$mpich_tool" "$mpi_source" "$perf_base" && ! mpicxx.mpich "${flags[@]}" "$mpi_source" "$perf_base" "${perf_libs[@]}" -o "$mpich_tool" >"$work/mpich.log" 2>&1; then
  absent[mpich]="mpicxx.mpich failed: $(head -c 300 "$work/mpich.log")"
fi

# --- Intel MPI and oneCCL: PyPI packages in a project-local venv
venv=$base/venv
if [[ $install == 1 && ! -x $venv/bin/mpiexec.hydra ]]; then
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q --no-deps impi-rt impi-devel; } >"$work/impi.log" 2>&1 || true
fi
if [[ $install == 1 && -x $venv/bin/pip && ! -f $venv/lib/ccl/cpu/lib/libccl.a ]]; then
  "$venv/bin/pip" install -q --no-deps oneccl-cpu oneccl-cpu-devel >"$work/ccl.log" 2>&1 || true
fi
intel_env=(env I_MPI_ROOT="$venv" LD_LIBRARY_PATH="$venv/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" I_MPI_FABRICS=shm "${impi_pin[@]}")
[[ $(id -u) -eq 0 ]] && intel_env+=(I_MPI_HYDRA_BOOTSTRAP=fork)
intel_run=("${intel_env[@]}" "$venv/bin/mpiexec.hydra")
impi_tool=$base/bin/impi_all_reduce_perf
if [[ ! -x $venv/bin/mpiexec.hydra || ! -f $venv/include/mpi.h ]]; then
  absent[intelmpi]="PyPI's impi-rt/impi-devel are not installed in $venv and could not be: $(tail -c 300 "$work/impi.log" 2>/dev/null)"
elif [[ ! -f $perf_base ]]; then
  absent[intelmpi]="$perf_base not found (build all_reduce_perf)"
elif stale "$impi_tool" "$mpi_source" "$perf_base" && ! g++ "${flags[@]}" -I"$venv/include" "$mpi_source" "$perf_base" "${perf_libs[@]}" \
    -L"$venv/lib" -Wl,-rpath,"$(cd "$venv/lib" && pwd)" -lmpi -o "$impi_tool" >"$work/impi_build.log" 2>&1; then
  absent[intelmpi]="building against Intel MPI failed: $(head -c 300 "$work/impi_build.log")"
elif [[ $(LD_LIBRARY_PATH= ldd "$impi_tool" 2>&1) != *"$venv/lib/libmpi.so.12"* ]]; then
  absent[intelmpi]="$impi_tool does not load Intel MPI's libmpi.so.12 from $venv/lib"
fi
ccl_tool=$base/bin/oneccl_all_reduce_perf
stubs=$root/perf/mpi/oneccl_link_stubs.c
ccl_lib=$venv/lib/ccl/cpu/lib/libccl.a
if [[ ! -f $ccl_lib || ! -f $venv/include/oneapi/ccl.hpp ]]; then
  absent[oneccl]="PyPI's oneccl-cpu(-devel) are not installed in $venv and could not be"
elif [[ -n ${absent[intelmpi]:-} ]]; then
  absent[oneccl]="starts through Intel MPI, which is absent"
# The wheel's libccl.so asks for a libccl.so.2 it does not ship, and its
# lib/libccl.a is the SYCL build: link the CPU build's static library, with
# oneccl_link_stubs.c for the Intel-compiler and ittnotify symbols it expects.
elif stale "$ccl_tool" "$mpi_source" "$perf_base" "$stubs" && ! { gcc -O2 -c "$stubs" -o "$work/stubs.o" &&
    g++ "${flags[@]}" -DLOOM_PERF_ONECCL -I"$venv/include" "$mpi_source" "$work/stubs.o" "$perf_base" "${perf_libs[@]}" "$ccl_lib" \
      -L"$venv/lib" -Wl,-rpath,"$venv/lib" -lmpi -lhwloc -ldl -lpthread -o "$ccl_tool"; } >"$work/ccl_build.log" 2>&1; then
  absent[oneccl]="building against oneCCL failed: $(head -c 300 "$work/ccl_build.log")"
fi

# --- gloo: PyTorch's backend, from the project's torch venv
# (scripts/setup_torch_venv.sh) when it is there, else Debian's python3-torch
gloo_tool=$root/perf/gloo/gloo_all_reduce_perf.py
has_gloo() { "$1" -c 'import torch.distributed as d; assert d.is_gloo_available()' >/dev/null 2>&1; }
gloo_python=${LOOM_TORCH_VENV:-$root/.venv-torch}/bin/python
if ! has_gloo "$gloo_python"; then
  gloo_python=/usr/bin/python3
  if ! has_gloo "$gloo_python" && ! { apt_have python3-torch && has_gloo "$gloo_python"; }; then
    absent[gloo]="PyTorch with gloo is importable neither from .venv-torch (scripts/setup_torch_venv.sh) nor by /usr/bin/python3 (Debian: python3-torch)"
  fi
fi

before_bin=""
if [[ -n ${BEFORE:-} ]]; then
  before_bin=$BEFORE/bin
  [[ -x $before_bin/loomrun && -x $before_bin/all_reduce_perf ]] || { echo "compare_mpi.sh: BEFORE=$BEFORE has no loomrun/all_reduce_perf" >&2; exit 2; }
  libraries="$libraries before"
fi

run_libraries=()
for lib in $libraries; do [[ -z ${absent[$lib]:-} ]] && run_libraries+=("$lib"); done

# Sizes in bytes, and the classes that set the call counts.
sizes=()
for s in $sizes_text; do
  case $s in *K) s=$((${s%K} << 10)) ;; *M) s=$((${s%M} << 20)) ;; esac
  sizes+=("$s")
done

# launcher LIBRARY NRANKS: the command line that runs LIBRARY's tool with NRANKS ranks.
launcher() {
  local n=$2
  case $1 in
    loom-blocking) echo "$bin/loomrun ${loom_pin[*]} -n $n --no-tag-output $bin/all_reduce_perf -z 1" ;;
    loom-stream) echo "$bin/loomrun ${loom_pin[*]} -n $n --no-tag-output $bin/all_reduce_perf -z 0" ;;
    before) echo "$before_bin/loomrun ${loom_pin[*]} -n $n --no-tag-output $before_bin/all_reduce_perf -z 1" ;;
    openmpi) echo "${openmpi_run[*]} -np $n $bin/mpi_all_reduce_perf" ;;
    mpich) echo "mpiexec.mpich ${mpich_pin[*]} -n $n $mpich_tool" ;;
    intelmpi) echo "${intel_run[*]} -n $n $impi_tool" ;;
    oneccl) echo "${intel_run[*]} -n $n env CCL_ATL_TRANSPORT=mpi CCL_LOG_LEVEL=error $ccl_tool" ;;
    gloo) echo "$gloo_python $gloo_tool --np $n" ;;
  esac
}

# run_size LIBRARY NRANKS ROUND SIZE: appends the tool's row for SIZE to $work/LIBRARY.NRANKS.
run_size() {
  local library=$1 n=$2 round=$3 size=$4 check=0 counts
  [[ $round -eq 1 ]] && check=1
  if ((size <= 8192)); then counts="-n $small_iters -w $small_warmup"
  elif ((size <= 1 << 20)); then counts="-n $mid_iters -w $mid_warmup"
  else counts="-n $iters -w $large_warmup"; fi
  local log=$work/run.log
  # shellcheck disable=SC2046  # the launcher and the counts are several words
  if ! timeout 600 $(launcher "$library" "$n") -b "$size" -e "$size" -d float -o sum -a 1 -c "$check" $counts >"$log" 2>&1; then
    echo "compare_mpi.sh: $library with $n ranks at $size B failed (round $round):" >&2
    tail -20 "$log" >&2
    echo "$size FAILED" >>"$work/$library.$n"
    return 0
  fi
  # The MPI tools name the library they called in their header: a column
  # filled by another library (a binary linked to the wrong libmpi) is refused.
  case $library in
    openmpi | mpich | intelmpi | oneccl)
      if ! grep -q "host memory ($library)" "$log"; then
        echo "compare_mpi.sh: the $library run called another library: $(grep -o 'host memory ([a-z]*)' "$log" | head -1)" >&2
        echo "$size FAILED" >>"$work/$library.$n"
        return 0
      fi ;;
  esac
  grep -v '^#' "$log" | grep -E '^ *[0-9]' | awk -v s="$size" '$1 == s {print $1, $6, $9; exit}' >>"$work/$library.$n"
}

echo "# Loom vs CPU libraries, all-reduce float32 sum, out-of-place (gloo: in place), $(hostname), $(nproc) cores, PIN=$pin"
echo "# median of $reps rounds, library order rotating per round; per run: sizes <= 8 KiB -n $small_iters -w $small_warmup,"
echo "# <= 1 MiB -n $mid_iters -w $mid_warmup, larger -n $iters -w $large_warmup; time per call in us, averaged over ranks"
for lib in $libraries; do
  if [[ -n ${absent[$lib]:-} ]]; then note "$lib: absent: ${absent[$lib]}"; else note "$lib: $(launcher "$lib" N)"; fi
done

for n in $ranks_list; do
  for ((round = 1; round <= reps; ++round)); do
    count=${#run_libraries[@]}
    for ((k = 0; k < count; ++k)); do
      lib=${run_libraries[$(((k + round - 1) % count))]}
      for size in "${sizes[@]}"; do run_size "$lib" "$n" "$round" "$size"; done
    done
  done
done

python3 - "$work" "$libraries" "${run_libraries[*]}" "${sizes[*]}" $ranks_list <<'PY'
import statistics, sys
work, libraries, ran, sizes, ranks = sys.argv[1], sys.argv[2].split(), set(sys.argv[3].split()), \
    [int(s) for s in sys.argv[4].split()], sys.argv[5:]
LOOM = {"loom-blocking", "loom-stream", "before"}
others = [l for l in libraries if l not in LOOM]
TARGET, STREAM_TARGET = 0.9, 1.3

def load(lib, n):
    times, wrong, failed = {}, {}, set()
    try:
        with open(f"{work}/{lib}.{n}") as f:
            for line in f:
                cols = line.split()
                size = int(cols[0])
                if cols[1] == "FAILED":
                    failed.add(size)
                    continue
                times.setdefault(size, []).append(float(cols[1]))
                if cols[2] not in ("N/A",):
                    wrong[size] = wrong.get(size, 0) + int(cols[2])
    except FileNotFoundError:
        pass
    return {s: statistics.median(t) for s, t in times.items()}, wrong, failed, times

def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"

def cell(t):
    return f"{t:.2f}" if t < 10 else f"{t:.1f}" if t < 1000 else f"{t:.0f}"

header = ["ranks", "size"] + libraries + ["blocking / best other", "stream / best other", "best other"]
print("\n| " + " | ".join(header) + " |")
print("|" + "---|" * len(header))
misses, notes = [], []
for n in ranks:
    data = {lib: load(lib, n) for lib in libraries if lib in ran}
    for size in sizes:
        row, best = [n, human(size)], None
        for lib in libraries:
            t = data[lib][0].get(size) if lib in data else None
            row.append(cell(t) if t is not None else ("absent" if lib not in ran else "failed"))
            if lib in others and t is not None and (best is None or t < best[1]):
                best = (lib, t)
        for mode in ("loom-blocking", "loom-stream"):
            t = data[mode][0].get(size) if mode in data else None
            if t is None or best is None:
                row.append("-")
                continue
            r = t / best[1]
            row.append(f"**{r:.2f}**" if r > TARGET else f"{r:.2f}")
            if r > TARGET:
                # Each round's time, in the order run: one slow round among
                # fast ones reads differently from a whole run in a slow mode.
                rounds = "; ".join(f"{lib} " + " ".join(cell(x) for x in data[lib][3].get(size, []))
                                   for lib in (mode, best[0]))
                misses.append(f"{n} ranks {human(size)} {mode}: {r:.2f} x {best[0]} (rounds: {rounds})")
        row.append(best[0] if best else "-")
        print("| " + " | ".join(str(c) for c in row) + " |")
    for lib, (_, wrong, failed, _) in data.items():
        if sum(wrong.values()):
            notes.append(f"{n} ranks {lib}: {sum(wrong.values())} wrong values in the checked round")
        if failed:
            notes.append(f"{n} ranks {lib}: failed at {', '.join(human(s) for s in sorted(failed))}")

print(f"\n# targets: Loom / best other <= {TARGET} per size and mode; stream / blocking <= {STREAM_TARGET} at the smallest size")
for n in ranks:
    b = load("loom-blocking", n)[0] if "loom-blocking" in ran else {}
    s = load("loom-stream", n)[0] if "loom-stream" in ran else {}
    small = min(sizes)
    if small in b and small in s:
        r = s[small] / b[small]
        print(f"{n} ranks: stream / blocking at {human(small)}: {s[small]:.2f} / {b[small]:.2f} us = {r:.2f}"
              f" ({'met' if r <= STREAM_TARGET else 'MISSED'})")
    if "before" in ran and b:
        before = load("before", n)[0]
        pairs = [(z, b[z] / before[z]) for z in sizes if z in b and z in before]
        print(f"{n} ranks: after/before (blocking) " + ", ".join(f"{human(z)} {r:.3f}" for z, r in pairs))
print(f"# cells over {TARGET}: {len(misses)}" + ("" if not misses else ": " + "; ".join(misses)))
for line in notes:
    print("# " + line)
PY
