#!/usr/bin/env bash
# Installs dependencies (idempotent) and builds Loom into ${LOOM_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${LOOM_BUILD_DIR:-build}
BUILD_TYPE=${LOOM_BUILD_TYPE:-RelWithDebInfo}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@"
cmake --build "$BUILD_DIR" -j "$(nproc)"
