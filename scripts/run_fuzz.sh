#!/usr/bin/env bash
# Fuzzes every parser of untrusted input for a bounded time.
#
#   bash scripts/run_fuzz.sh [seconds-per-target]   # default 12
#   bash scripts/run_fuzz.sh --update-corpus [secs]  # also merge new, minimized inputs into the corpus
#   bash scripts/run_fuzz.sh --regen-seeds            # rewrite the binary seeds with the real encoders
#
# Builds the libFuzzer targets of tests/fuzz with clang (libFuzzer + ASan +
# UBSan, the libraries instrumented too) into their own build directory
# (LOOM_FUZZ_BUILD_DIR, default build-fuzz), then runs each target from its
# committed corpus tests/fuzz/corpus/<target>/ for the given time, two at a
# time on two cores (LOOM_FUZZ_JOBS). New inputs go to a scratch corpus in the
# build directory, so a CI run leaves the tree unchanged. Exits non-zero if
# any target crashes, leaks, times out or trips a sanitizer; the input that
# did it is saved as <build>/fuzz/artifacts/<target>-crash-* (reproduce with
# <build>/fuzz/fuzz_<target> <that file>).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=run
case "${1:-}" in
  --update-corpus) mode=update; shift ;;
  --regen-seeds) mode=seeds; shift ;;
esac
SECONDS_PER_TARGET=${1:-12}
BUILD_DIR=${LOOM_FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${LOOM_FUZZ_JOBS:-$(nproc)}
TARGETS=(bootstrap_wire unique_id tuning_file shm_header p2p_header config loomrun_options)
start=$(date +%s)

# clang and its libFuzzer runtime come from Debian (clang-14, libclang-rt-14-dev).
bash scripts/setup.sh >/dev/null
CXX_BIN=$(command -v clang++-14 || command -v clang++ || true)
if [ -z "$CXX_BIN" ] || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "[fuzz] installing clang and its libFuzzer runtime"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev
  CXX_BIN=$(command -v clang++-14 || command -v clang++)
fi
CC_BIN=${CXX_BIN/clang++/clang}

SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $SAN" -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link $SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DLOOM_BUILD_FUZZERS=ON -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_PERF=OFF -DLOOM_WITH_MPI=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target loom_fuzzers fuzz_seed_corpus
built=$(date +%s)
echo "[fuzz] built in $((built - start)) s"

FUZZ_BIN="$BUILD_DIR/fuzz"
CORPUS=tests/fuzz/corpus
if [ "$mode" = seeds ]; then
  for t in "${TARGETS[@]}"; do mkdir -p "$CORPUS/$t"; done
  "$FUZZ_BIN/fuzz_seed_corpus" "$CORPUS"
  echo "[fuzz] binary seeds rewritten under $CORPUS"
  exit 0
fi

mkdir -p "$FUZZ_BIN/artifacts" "$FUZZ_BIN/logs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Runs one target; its log is $FUZZ_BIN/logs/<target>.log.
run_target() {
  local t=$1 work="$FUZZ_BIN/corpus-work/$1" rc=0
  rm -rf "$work" && mkdir -p "$work" "$CORPUS/$t"
  # -timeout: an input taking over 5 s is a hang; -rss_limit_mb: a parser
  # that allocates what a length field says must not get far.
  "$FUZZ_BIN/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=5 -rss_limit_mb=1024 \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$FUZZ_BIN/artifacts/$t-" \
    "$work" "$CORPUS/$t" >"$FUZZ_BIN/logs/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$FUZZ_BIN/logs/$t.rc"
}

failed=()
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  run_target "$t" &
done
wait
for t in "${TARGETS[@]}"; do
  log="$FUZZ_BIN/logs/$t.log"
  if [ "$(cat "$FUZZ_BIN/logs/$t.rc" 2>/dev/null)" = 0 ]; then
    execs=$(grep -o 'number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    echo "[fuzz] $t: ok, $execs runs, coverage $cov, corpus $(ls "$CORPUS/$t" | wc -l) committed + $(ls "$FUZZ_BIN/corpus-work/$t" | wc -l) new"
  else
    failed+=("$t")
    echo "[fuzz] $t: FAILED (log: $log)"
    tail -40 "$log"
  fi
done

if [ "$mode" = update ]; then
  for t in "${TARGETS[@]}"; do
    # -merge=1 keeps only inputs that add coverage, minimized.
    "$FUZZ_BIN/fuzz_$t" -merge=1 -max_len=4096 "$CORPUS/$t" "$FUZZ_BIN/corpus-work/$t" >/dev/null 2>&1
    echo "[fuzz] $t: corpus now $(ls "$CORPUS/$t" | wc -l) files"
  done
fi

echo "[fuzz] total $(( $(date +%s) - start )) s (build $((built - start)) s, ${SECONDS_PER_TARGET} s per target, $JOBS at a time)"
if ((${#failed[@]})); then
  echo "[fuzz] crashing targets: ${failed[*]}"
  exit 1
fi
