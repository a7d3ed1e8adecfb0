#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, build, run every ctest
# test, then the reliability jobs: the parsers' fuzzers for a bounded time
# (scripts/run_fuzz.sh, clang) and the suite under sanitizers
# (scripts/run_sanitizers.sh: ASan+UBSan, TSan). Every job runs even if an
# earlier one failed; the exit status is non-zero if any failed. A ctest
# test that fails and then passes when run again alone is reported as flaky
# at the end of the log (scripts/run_ctest.sh), not counted as a failure.
#   LOOM_SKIP_FUZZ=1 / LOOM_SKIP_SANITIZERS=1 leave those jobs out.
set -uo pipefail
cd "$(dirname "$0")/.."
# Without a visible GPU the CUDA code is compiled only to check that it
# compiles (nothing here can run it): one architecture does that, at half
# the compile time of the longest steps. LOOM_CUDA_ARCHS sets the list.
cuda_args=()
if [[ -n ${LOOM_CUDA_ARCHS:-} ]]; then
  cuda_args=(-DCMAKE_CUDA_ARCHITECTURES="$LOOM_CUDA_ARCHS")
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "[run_tests] no GPU visible: CUDA code compiled for sm_90 only (LOOM_CUDA_ARCHS=\"80;90\" for both)"
  cuda_args=(-DCMAKE_CUDA_ARCHITECTURES=90)
fi
bash scripts/build.sh "${cuda_args[@]}" || exit 1
BUILD_DIR=${LOOM_BUILD_DIR:-build}

failed=()
# Failure lists newer than this marker come from this run.
run_marker=$(mktemp)
trap 'rm -f "$run_marker"' EXIT
run_job() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name"
  if "$@"; then
    echo "== $name: passed in $((SECONDS - start)) s"
  else
    echo "== $name: FAILED after $((SECONDS - start)) s"
    failed+=("$name")
  fi
}

run_job ctest bash scripts/run_ctest.sh "$BUILD_DIR" "${LOOM_TEST_JOBS:-2}"
[[ ${LOOM_SKIP_FUZZ:-0} == 1 ]] || run_job fuzz bash scripts/run_fuzz.sh "${LOOM_FUZZ_SECONDS:-12}"
[[ ${LOOM_SKIP_SANITIZERS:-0} == 1 ]] || LOOM_SKIP_SETUP=1 run_job sanitizers bash scripts/run_sanitizers.sh all

# Tests that failed once and passed alone (scripts/run_ctest.sh), repeated
# here so they are seen and fixed, not forgotten.
[[ -s $BUILD_DIR/Testing/Temporary/Flaky.log ]] && cat "$BUILD_DIR/Testing/Temporary/Flaky.log"
if ((${#failed[@]})); then
  # Repeat which ctest tests failed, with their output's tail, at the end:
  # that is the part of a CI log that gets read.
  for dir in "$BUILD_DIR" "${LOOM_ASAN_BUILD_DIR:-build-asan}"/tests{,/sanitizers} \
    "${LOOM_TSAN_BUILD_DIR:-build-tsan}"/tests{,/sanitizers}; do
    list="$dir/Testing/Temporary/LastTestsFailed.log"
    [[ -f $list && $list -nt $run_marker ]] && bash scripts/ctest_failure_summary.sh "$dir" 30
  done
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all test jobs passed"
