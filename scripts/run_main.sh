#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, then an all-reduce bandwidth
# sweep on 4 local ranks started by loomrun (nccl-tests' output format).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${LOOM_BUILD_DIR:-build}
NRANKS=${LOOM_NRANKS:-4}
echo "== loomrun -n $NRANKS all_reduce_perf -b 8 -e 64M -f 2"
"$BUILD_DIR/bin/loomrun" -n "$NRANKS" "$BUILD_DIR/bin/all_reduce_perf" -b 8 -e 64M -f 2 -w 5 -n 20
