#!/bin/sh
# Kill-and-resume: a training run whose rank 1 dies mid-training
# (train_demo --fail-at-step) under `loomrun --max-restarts 1` must resume
# from its last checkpoint and end with exactly the parameters of an
# uninterrupted run. Exact (byte-identical) because every input of a step
# (batch, learning rate, parameters, optimizer state) is restored bit for bit
# and LOOM_DETERMINISTIC=1 makes the gradient sums independent of timing.
#
# usage: kill_and_resume_test.sh LOOMRUN TRAIN_DEMO [extra train_demo options]
set -u
loomrun=$1
demo=$2
shift 2

data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: Fashion-MNIST is not installed in $data (Debian package dataset-fashion-mnist)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kill_and_resume.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log; do echo "--- $log"; cat "$log"; done
  exit 1
}

export LOOM_DETERMINISTIC=1 LOOM_TIMEOUT=60 OPENBLAS_NUM_THREADS=1
# 6000 images, global batch 128 on 2 ranks: 47 steps; checkpoints at 10..40.
run="--epochs 1 --train-limit 6000 --batch 128 --data-dir $data $*"

"$loomrun" -n 2 "$demo" $run --save-params "$work/uninterrupted.bin" >"$work/uninterrupted.log" 2>&1 ||
  fail "the uninterrupted run failed"

"$loomrun" -n 2 --max-restarts 1 "$demo" $run --checkpoint-dir "$work/ckpt" --checkpoint-every 10 \
  --fail-at-step 25 --save-params "$work/resumed.bin" >"$work/resumed.log" 2>&1 ||
  fail "the run with a failure and a restart did not succeed"

grep -q "rank 1 failing on purpose before step 25" "$work/resumed.log" || fail "rank 1 did not fail at step 25"
grep -q "loomrun: attempt 0 failed with status 3; restarting all 2 local ranks (restart 1 of 1)" \
  "$work/resumed.log" || fail "loomrun did not restart the job"
grep -q "resumed from $work/ckpt/checkpoint-000000000020.ckpt: step 20" "$work/resumed.log" ||
  fail "the restarted job did not resume from the step-20 checkpoint"
grep -q "done after 47 steps" "$work/resumed.log" || fail "the resumed run did not finish all 47 steps"

size=$(wc -c <"$work/uninterrupted.bin")
[ "$size" -gt 0 ] || fail "no parameters saved"
cmp "$work/uninterrupted.bin" "$work/resumed.bin" >/dev/null ||
  fail "the resumed run ended with other parameters than the uninterrupted one"
echo "PASS: resumed run ends with the uninterrupted run's $size bytes of parameters"
grep "done after" "$work/resumed.log"
