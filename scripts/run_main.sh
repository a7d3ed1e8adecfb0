#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, measure this machine for the
# tuner (perf/tune.sh, about a minute), then an all-reduce sweep on 4 local
# ranks started by loomrun (nccl-tests' output format, plus the algorithm that
# ran and the share of the memory-traffic bound: --algo-column, --mem-bound 1),
# then the training demo: an MLP trained data-parallel on Fashion-MNIST by 4
# ranks (DDP over Loom).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
BUILD_DIR=${LOOM_BUILD_DIR:-build}
NRANKS=${LOOM_NRANKS:-4}
if [[ -z ${LOOM_TUNING_FILE:-} ]]; then
  echo "== perf/tune.sh: measuring every algorithm and protocol on $NRANKS ranks for the tuner"
  RANKS="$NRANKS" MAX=64M REPS=2 bash perf/tune.sh "$BUILD_DIR" "$BUILD_DIR/loom.tuning" | tail -1
  export LOOM_TUNING_FILE=$BUILD_DIR/loom.tuning
fi
# Two runs: the warm-ups cover the tuner's first exploration of each size
# (online tuning: up to 384 calls below 64 KiB, 96 below 1 MiB, 24 above),
# so the timed calls show what a loop repeating the call gets.
echo "== loomrun -n $NRANKS all_reduce_perf -b 8 -e 64M -f 2   (LOOM_TUNING_FILE=$LOOM_TUNING_FILE)"
"$BUILD_DIR/bin/loomrun" -n "$NRANKS" "$BUILD_DIR/bin/all_reduce_perf" -b 8 -e 512K -f 2 -w 400 -n 20 --algo-column
"$BUILD_DIR/bin/loomrun" -n "$NRANKS" "$BUILD_DIR/bin/all_reduce_perf" -b 1M -e 64M -f 2 -w 25 -n 20 --mem-bound 1 --algo-column
echo "== loomrun -n $NRANKS train_demo   (Fashion-MNIST, MLP 784-256-256-10, DDP, AdamW)"
# A fresh checkpoint folder: a rank that fails makes loomrun restart the job,
# which resumes from the last checkpoint of this run.
rm -rf "$BUILD_DIR/train_demo_checkpoints"
"$BUILD_DIR/bin/loomrun" -n "$NRANKS" --max-restarts 2 "$BUILD_DIR/bin/train_demo" \
  --checkpoint-dir "$BUILD_DIR/train_demo_checkpoints"
