#!/usr/bin/env bash
# gpu_check.sh: the GPU check, run ON a GPU machine from the repository root
# with .gpu/ present (packed by scripts/gpu_pack.sh on the build machine).
# Uses only the packed binaries and libraries: the GPU machine has the NVIDIA
# driver and CUDA but no GoogleTest or other -dev packages.
#
# Steps, each under `timeout`, continuing after a failed one:
#   1. the GPUs (nvidia-smi -L) and the driver
#   2. every test of every packed GPU test binary (.gpu/bin/*gpu*test), one
#      process per test, so that a test that hangs costs only its own timeout
#   3. a device all-reduce sweep (all_reduce_perf -b 8 -e 128M -f 4) at 1
#      rank, then 2 and 4 ranks as threads sharing the GPU (-t), each beside
#      a device-to-device cudaMemcpyAsync of every size in the same run
#      (--memcpy-baseline: the copy and %copy columns); a multi-rank sweep
#      that fails is repeated with -z 1 (a stream synchronize after every call)
#   3b. where gpu_pack.sh packed nccl-tests (NCCL_TESTS_DIR): its
#      all_reduce_perf on NVIDIA's NCCL (the baseline), then on Loom's drop-in
#      libnccl.so.2
#   4. -G: the all-reduce captured as a CUDA graph (or Loom's refusal); then
#      2 processes sharing the GPU (loomrun -n 2), 8 B .. 32 MiB; then the
#      PyTorch backend built for this machine's torch (gpu_torch_build.py)
#      and its CUDA-tensor check under torchrun (skipped without torch)
#   4d. the host path's scaling, perf/host_scale.sh at 2, 4, 8 and 16 ranks on
#      this machine's cores (GPU_CHECK_HOST_SCALE_RANKS changes the counts,
#      GPU_CHECK_HOST_SCALE=0 skips it)
#   5. compute-sanitizer memcheck, racecheck and synccheck over the GPU tests
#      that passed in step 2 (said so when the tool is missing or refuses)
# Then a table: step, status, seconds. A step whose timeout no longer fits in
# the budget (GPU_CHECK_BUDGET_S, default 400 s) is skipped, so the whole
# script stays well under 8 minutes.
#
# Logs: one file per step, plus summary.txt, in .gpu/logs/<UTC time>/; with
# $OUT set (the device tool brings it back) also $OUT/gpu_check_summary.txt
# and every log in $OUT/gpu_check_logs.tgz.
# Environment: GPU_CHECK_BUDGET_S (400), GPU_CHECK_TEST_TIMEOUT_S (45 per
# test), GPU_CHECK_SWEEP_TIMEOUT_S (75 per sweep), GPU_CHECK_SANITIZER_TIMEOUT_S
# (60 per run), GPU_CHECK_TORCH (1; 0 skips step 4c), LOOM_TIMEOUT (default
# here 15: a hung wait fails after 15 s).
# Exit status: 0 when no step failed or timed out, 1 otherwise, 2 when there
# is no GPU or no .gpu/ (nothing ran).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

budget=${GPU_CHECK_BUDGET_S:-400}
test_timeout=${GPU_CHECK_TEST_TIMEOUT_S:-45}
sweep_timeout=${GPU_CHECK_SWEEP_TIMEOUT_S:-75}
sanitizer_timeout=${GPU_CHECK_SANITIZER_TIMEOUT_S:-60}
export LOOM_TIMEOUT=${LOOM_TIMEOUT:-15}
started=$SECONDS

stop() {
  echo "gpu_check: $*" >&2
  exit 2
}

# Fail fast, before anything else, where there is no GPU to check.
command -v nvidia-smi >/dev/null || stop "no NVIDIA GPU: nvidia-smi is not installed (no NVIDIA driver on this machine)"
gpus=$(timeout 20 nvidia-smi -L 2>&1) || stop "no NVIDIA GPU: nvidia-smi -L failed: $gpus"
grep -q '^GPU ' <<<"$gpus" || stop "no NVIDIA GPU: nvidia-smi -L lists none: $gpus"
if [[ ! -d .gpu/bin && -f .gpu-archive/gpu.tar.xz ]]; then
  tar -xJf .gpu-archive/gpu.tar.xz || stop "cannot unpack .gpu-archive/gpu.tar.xz (is xz installed?)"
fi
[[ -d .gpu/bin && -d .gpu/lib ]] ||
  stop ".gpu/ is missing: run scripts/gpu_pack.sh on the build machine, and carry .gpu here"

# The device tool brings back only a few files from $OUT, so with $OUT set
# the per-step logs are written aside and travel as one archive.
logs=.gpu/logs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$logs" || stop "cannot create the log folder $logs"
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

step_names=()
step_states=()
step_seconds=()
failed=0

record() {  # NAME STATUS SECONDS
  step_names+=("$1")
  step_states+=("$2")
  step_seconds+=("$3")
  echo "-- $1: $2 (${3}s)"
}

# What a finished step's exit status and log say.
judge() {  # KIND RC LOG
  local kind=$1 rc=$2 log=$3 line
  if ((rc == 124 || rc == 137)); then
    echo TIMEOUT
    return
  fi
  case $kind in
    gtest)
      if ((rc == 0)) && grep -q '^\[  SKIPPED \]' "$log"; then
        line=$(grep -m1 -A1 'Skipped$' "$log" | tail -n 1)
        echo "SKIP: ${line:0:60}"
      elif ((rc == 0)); then echo ok
      else echo "FAIL (exit $rc)"
      fi ;;
    sanitizer)
      if ((rc == 0)); then echo "ok ($(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?' "$log" || echo 'no summary'))"
      elif ((rc == 99)); then echo "ERRORS: $(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?' "$log")"
      elif line=$(grep -m1 -iE 'not supported|unsupported|Internal Sanitizer Error|terminated before first instrumented' "$log"); then
        echo "REFUSED: ${line:0:70}"
      else echo "FAIL (exit $rc)"
      fi ;;
    graph)
      if ((rc == 0)); then echo ok
      elif ((rc == 1)) && grep -q -- '-G: .*captured into a CUDA graph' "$log"; then echo "REFUSED by Loom (exit 1, -G message)"
      else echo "FAIL (exit $rc)"
      fi ;;
    skippable)
      if ((rc == 77)); then line=$(grep -m1 '^SKIP' "$log"); echo "SKIP: ${line:6:60}"
      elif ((rc == 0)); then echo ok
      else echo "FAIL (exit $rc)"
      fi ;;
    *)
      if ((rc == 0)); then echo ok; else echo "FAIL (exit $rc)"; fi ;;
  esac
}

# step NAME TIMEOUT KIND COMMAND...: runs COMMAND under timeout with its
# output in $logs/NAME.log; KIND (plain, gtest, sanitizer, graph, sweep,
# skippable: exit 77 is a skip)
# says how to read the result and what to print here.
step() {
  local name=$1 limit=$2 kind=$3
  shift 3
  local log=$logs/${name//\//_}.log left=$((budget - (SECONDS - started)))
  if ((limit > left)); then
    record "$name" "SKIP (budget: ${left}s left)" 0
    return 0
  fi
  echo "== $name (timeout ${limit}s): $*"
  local t0=$SECONDS rc state
  timeout -k 10 "$limit" "$@" </dev/null >"$log" 2>&1
  rc=$?
  state=$(judge "$kind" "$rc" "$log")
  case $kind in
    sweep | graph | plain) cat "$log" ;;
    *) [[ $state == ok* ]] || tail -n 15 "$log" ;;
  esac
  record "$name" "$state" $((SECONDS - t0))
  case $state in
    FAIL* | TIMEOUT* | ERRORS*) failed=1; return 1 ;;
  esac
  return 0
}

# 1. The machine.
step gpus 20 plain sh -c 'nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv'
step driver 20 plain sh -c 'nvidia-smi | head -n 4 | tail -n 2; (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | tail -n 2'

# 2. The GPU tests, one process per test.
passed_tests=()  # "binary filter" pairs that passed: what the sanitizers run
mapfile -t test_bins < <(find .gpu/bin -maxdepth 1 -type f -name '*gpu*test' | sort)
((${#test_bins[@]} > 0)) || record "gpu tests" "FAIL: no .gpu/bin/*gpu*test (repack)" 0
for bin in "${test_bins[@]}"; do
  base=$(basename "$bin")
  if ! list=$(timeout 30 "$bin" --gtest_list_tests 2>&1); then
    record "$base --gtest_list_tests" "FAIL: ${list:0:60}" 0
    failed=1
    continue
  fi
  suite=
  while IFS= read -r line; do
    if [[ $line =~ ^([A-Za-z0-9_/]+\.)$ ]]; then suite=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\ \ ([A-Za-z0-9_/]+) ]]; then
      name=$suite${BASH_REMATCH[1]}
      if step "$base/$name" "$test_timeout" gtest "$bin" --gtest_filter="$name"; then
        [[ ${step_states[-1]} == ok ]] && passed_tests+=("$bin $name")
      fi
    fi
  done <<<"$list"
done

# nvidia-smi lists a GPU, so a GPU test that skips means the CUDA runtime
# could not use it: a failure when none ran at all.
gpu_test_steps=0
gpu_test_skips=0
for i in "${!step_names[@]}"; do
  [[ ${step_names[$i]} == *gpu*test/* ]] || continue
  ((++gpu_test_steps))
  [[ ${step_states[$i]} == SKIP:* ]] && ((++gpu_test_skips))
done
if ((gpu_test_steps > 0 && gpu_test_skips == gpu_test_steps)); then
  record "gpu tests" "FAIL: all $gpu_test_steps skipped although nvidia-smi lists a GPU" 0
  failed=1
fi

# 3. The sweep beside cudaMemcpy.
sweep=(.gpu/bin/all_reduce_perf -b 8 -e 128M -f 4 --memcpy-baseline --algo-column -T "$LOOM_TIMEOUT")
step allreduce_1rank "$sweep_timeout" sweep "${sweep[@]}"
for n in 2 4; do
  step "allreduce_${n}ranks" "$sweep_timeout" sweep "${sweep[@]}" -t "$n" ||
    step "allreduce_${n}ranks_z1" "$sweep_timeout" sweep "${sweep[@]}" -t "$n" -z 1
done

# 3b. NVIDIA's NCCL on the same sizes, when gpu_pack.sh packed nccl-tests'
# all_reduce_perf (NCCL_TESTS_DIR): the baseline, against the NCCL library
# this machine has (PyTorch's nvidia-nccl package or the toolkit's); then the
# same nccl-tests binary against Loom's drop-in libnccl.so.2, which also
# checks every result (nccl-tests' -c 1). One rank: nccl-tests itself wants
# a GPU per thread.
nccl_tests=.gpu/nccl-tests/all_reduce_perf
if [[ -x $nccl_tests ]]; then
  nvidia_nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  [[ -f $nvidia_nccl/libnccl.so.2 ]] || nvidia_nccl=$(dirname "$(ldconfig -p | awk '/libnccl.so.2 /{print $NF; exit}')" 2>/dev/null)
  nccl_sweep=("$nccl_tests" -b 8 -e 128M -f 4 -g 1)
  if [[ -f $nvidia_nccl/libnccl.so.2 ]]; then
    step nccl_1rank "$sweep_timeout" sweep env LD_LIBRARY_PATH="$nvidia_nccl:$LD_LIBRARY_PATH" "${nccl_sweep[@]}"
  else
    record nccl_1rank "MISSING: no NVIDIA libnccl.so.2 (nvidia-nccl package or ldconfig)" 0
  fi
  if [[ -f .gpu/lib/nccl-shim/libnccl.so.2 ]]; then
    step nccl_tests_on_loom_1rank "$sweep_timeout" sweep env LD_LIBRARY_PATH="$PWD/.gpu/lib/nccl-shim:$LD_LIBRARY_PATH" "${nccl_sweep[@]}"
  fi
fi

# 4. CUDA graph capture.
step allreduce_graph_1rank 30 graph .gpu/bin/all_reduce_perf -b 8 -e 1M -f 32 -G 5 -T "$LOOM_TIMEOUT"
step allreduce_graph_2ranks 30 graph .gpu/bin/all_reduce_perf -b 8 -e 1M -f 32 -G 5 -t 2 -T "$LOOM_TIMEOUT"

# 4b. Two processes sharing the GPU (loomrun), a shorter sweep.
step allreduce_2procs "$sweep_timeout" sweep .gpu/bin/loomrun -n 2 --no-tag-output \
  .gpu/bin/all_reduce_perf -b 8 -e 32M -f 8 --memcpy-baseline -T "$LOOM_TIMEOUT"

# 4c. The PyTorch backend on CUDA tensors: the extension is built here for
# this machine's Python and torch against the packed libloom, then
# cuda_check.py runs under torchrun on 2 processes (exit 77: a skip).
torch_ext=$logs/torch_ext
if [[ ${GPU_CHECK_TORCH:-1} == 0 ]]; then
  record torch_build "SKIP (GPU_CHECK_TORCH=0)" 0
elif step torch_build 180 plain python3 scripts/gpu_torch_build.py .gpu/lib "$torch_ext"; then
  step torch_cuda_2procs 120 skippable env PYTHONPATH="$torch_ext" \
    python3 tests/unit/bindings/torch/run_torchrun.py --probe 2 tests/unit/bindings/torch/cuda_check.py
fi

# 4d. The host path at 2-16 ranks on this machine's cores (perf/host_scale.sh):
# a GPU machine is the only one with enough cores to time 16 ranks unshared.
if [[ ${GPU_CHECK_HOST_SCALE:-1} == 0 ]]; then
  record host_scale "SKIP (GPU_CHECK_HOST_SCALE=0)" 0
else
  read -ra scale_ranks <<<"${GPU_CHECK_HOST_SCALE_RANKS:-2 4 8 16}"
  step host_scale 150 plain env HOST_SCALE_TIMEOUT_S=40 HOST_SCALE_LOGS="$logs/host_scale" \
    perf/host_scale.sh .gpu/bin "${scale_ranks[@]}"
fi

# 5. compute-sanitizer over what passed, one run per binary and tool.
sanitizer=$(command -v compute-sanitizer || true)
[[ -n $sanitizer || ! -x /usr/local/cuda/bin/compute-sanitizer ]] || sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [[ -z $sanitizer ]]; then
  record compute-sanitizer "MISSING: not on PATH nor in /usr/local/cuda/bin" 0
elif ((${#passed_tests[@]} == 0)); then
  record compute-sanitizer "SKIP: no GPU test passed" 0
else
  for tool in memcheck racecheck synccheck; do
    for bin in "${test_bins[@]}"; do
      filter=
      for entry in "${passed_tests[@]}"; do
        [[ ${entry%% *} == "$bin" ]] && filter+=${filter:+:}${entry#* }
      done
      [[ -n $filter ]] || continue
      step "$tool/$(basename "$bin")" "$sanitizer_timeout" sanitizer \
        "$sanitizer" --tool "$tool" --error-exitcode 99 "$bin" --gtest_filter="$filter"
    done
  done
fi

# The table.
{
  echo
  echo "gpu_check summary ($(date -u +%FT%TZ), $(head -n 1 <<<"$gpus"), total $((SECONDS - started))s, logs in $logs)"
  printf '%-72s  %-50s  %5s\n' step status s
  for i in "${!step_names[@]}"; do
    printf '%-72s  %-50s  %5s\n' "${step_names[$i]}" "${step_states[$i]}" "${step_seconds[$i]}"
  done
} | tee "$logs/summary.txt"
if [[ -n ${OUT:-} ]]; then
  cp "$logs/summary.txt" "$OUT/gpu_check_summary.txt"
  tar -czf "$OUT/gpu_check_logs.tgz" -C "$(dirname "$logs")" "$(basename "$logs")"
fi
exit "$failed"
