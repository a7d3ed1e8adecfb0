#!/usr/bin/env bash
# The GPU suite: builds Loom with CUDA (LOOM_ENABLE_CUDA=ON) and runs every
# ctest test labelled "cuda" on this machine's GPU(s), after printing them.
# Exits 2, saying why, when there is no GPU (no driver, nvidia-smi finds
# none) or no nvcc; fails when every GPU test skipped (the CUDA runtime found
# no usable device although nvidia-smi lists one).
#   LOOM_BUILD_DIR      build directory (default build-gpu)
#   LOOM_CUDA_ARCHS     CMAKE_CUDA_ARCHITECTURES (default: Loom's "80;90")
#   LOOM_TEST_JOBS      parallel ctest jobs (default 1: the tests share the GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${LOOM_BUILD_DIR:-build-gpu}

fail() {
  echo "run_gpu_tests: $*" >&2
  exit 2
}

command -v nvidia-smi >/dev/null || fail "nvidia-smi not found: no NVIDIA driver on this machine, so no GPU to test on"
gpus=$(nvidia-smi -L 2>&1) || fail "nvidia-smi -L failed: $gpus"
grep -q '^GPU ' <<<"$gpus" || fail "nvidia-smi -L lists no GPU: $gpus"
echo "$gpus"
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
command -v nvcc >/dev/null || fail "nvcc not found (install the CUDA toolkit or put its bin/ on PATH)"
nvcc --version | tail -n 2

archs=()
[[ -n ${LOOM_CUDA_ARCHS:-} ]] && archs=("-DCMAKE_CUDA_ARCHITECTURES=$LOOM_CUDA_ARCHS")
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_ENABLE_CUDA=ON "${archs[@]}" ||
  fail "configure failed"
cmake --build "$BUILD_DIR" -j "$(nproc)" || fail "build failed"

# -L takes a regex: ^cuda$ selects the label "cuda" only.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
(cd "$BUILD_DIR" && ctest -L '^cuda$' --no-tests=error --output-on-failure -j "${LOOM_TEST_JOBS:-1}" --timeout 600) |
  tee "$log"
status=${PIPESTATUS[0]}
ran=$(grep -cE 'Test +#[0-9]+: ' "$log")
skipped=$(grep -c '\*\*\*Skipped' "$log")
if ((status != 0)); then
  echo "run_gpu_tests: GPU tests FAILED" >&2
  exit 1
fi
if ((ran > 0 && skipped == ran)); then
  echo "run_gpu_tests: all $ran GPU tests skipped although nvidia-smi lists a GPU (see the skip messages above)" >&2
  exit 1
fi
((skipped == 0)) || echo "run_gpu_tests: note: $skipped of $ran GPU tests skipped (messages above)"
echo "run_gpu_tests: $((ran - skipped)) GPU tests passed"
