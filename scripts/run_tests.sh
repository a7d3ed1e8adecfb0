#!/usr/bin/env bash
# The whole test suite on a fresh machine: set up, build, run every ctest test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${LOOM_BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure -j "${LOOM_TEST_JOBS:-2}" --timeout 900
