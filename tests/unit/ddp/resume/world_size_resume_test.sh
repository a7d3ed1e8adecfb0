#!/bin/sh
# Resume on another number of ranks (the checkpoint side of elastic
# training): a ZeRO-3 run on 4 ranks stops at step 25 (rank 1 exits, no
# restart) after writing a checkpoint at step 20; a 2-rank job resumes from
# it, re-partitioning the sampler and the parameter and optimizer shards,
# and must end within 1e-5 of every parameter of an uninterrupted 4-rank
# run (measured: 1.5e-8; only the summation order over ranks differs, with
# LOOM_DETERMINISTIC=1 for the rest).
#
# usage: world_size_resume_test.sh LOOMRUN TRAIN_DEMO
set -u
loomrun=$1
demo=$2

data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: Fashion-MNIST is not installed in $data (Debian package dataset-fashion-mnist)"
  exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to compare the parameters"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/world_size_resume.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log; do echo "--- $log"; cat "$log"; done
  exit 1
}

export LOOM_DETERMINISTIC=1 LOOM_TIMEOUT=60 OPENBLAS_NUM_THREADS=1
run="--epochs 1 --train-limit 6000 --batch 128 --zero 3 --data-dir $data"

"$loomrun" -n 4 "$demo" $run --save-params "$work/uninterrupted.bin" >"$work/uninterrupted.log" 2>&1 ||
  fail "the uninterrupted run failed"
"$loomrun" -n 4 "$demo" $run --checkpoint-dir "$work/ckpt" --checkpoint-every 10 --fail-at-step 25 \
  >"$work/stopped.log" 2>&1 && fail "the 4-rank run did not stop at step 25"
grep -q "rank 1 failing on purpose before step 25" "$work/stopped.log" || fail "rank 1 did not fail at step 25"
"$loomrun" -n 2 "$demo" $run --checkpoint-dir "$work/ckpt" --save-params "$work/resumed.bin" >"$work/resumed.log" 2>&1 ||
  fail "the 2-rank resume failed"
grep -q "the checkpoint was written by 4 ranks; continuing on 2" "$work/resumed.log" || fail "no re-partitioning message"
grep -q "resumed from $work/ckpt/checkpoint-000000000020.ckpt: step 20" "$work/resumed.log" ||
  fail "the 2-rank job did not resume from the step-20 checkpoint"
grep -q "done after 47 steps" "$work/resumed.log" || fail "the resumed run did not finish all 47 steps"

worst=$(python3 - "$work/uninterrupted.bin" "$work/resumed.bin" <<'PY'
import array, sys
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read())
b.frombytes(open(sys.argv[2], "rb").read())
print("size" if len(a) != len(b) or not a else max(abs(x - y) for x, y in zip(a, b)))
PY
)
[ "$worst" != size ] || fail "the saved parameter files differ in size or are empty"
awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "largest parameter difference $worst > 1e-5"
echo "PASS: resumed on 2 ranks from a 4-rank checkpoint; largest parameter difference $worst"
