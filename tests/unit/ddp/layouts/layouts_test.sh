#!/bin/sh
# train_demo's 4-rank parallel layouts on a short run (4000 images, 1 epoch):
# ZeRO-3 (DP4), TP2 x DP2, PP2 x DP2 and TP2 x PP2 must train like plain
# DDP on the same ranks and data. Checked against the DDP run:
#   ZeRO-3: the final parameters' crc32 is equal (bit-identical training:
#           LOOM_DETERMINISTIC=1 folds the reduce-scatter's ranks in the
#           all-reduce's order);
#   TP, PP, TP x PP: the epoch's train loss and test accuracy as printed (4 and 2
#           decimals) are equal: only rounding differs (the all-reduces in
#           the layers, the micro-batch sums), far below what is printed;
# and every layout must reach --min-accuracy (60%) test accuracy.
#
# usage: layouts_test.sh LOOMRUN TRAIN_DEMO
set -u
loomrun=$1
demo=$2

data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: Fashion-MNIST is not installed in $data (Debian package dataset-fashion-mnist)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/layouts.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log; do echo "--- $log"; cat "$log"; done
  exit 1
}

export LOOM_DETERMINISTIC=1 LOOM_TIMEOUT=60 OPENBLAS_NUM_THREADS=1
run="--epochs 1 --train-limit 4000 --batch 128 --data-dir $data"

train() {  # name, options...
  name=$1
  shift
  "$loomrun" -n 4 "$demo" $run "$@" >"$work/$name.log" 2>&1 || fail "train_demo $* failed"
}
field() {  # log, sed expression picking one value from the epoch or done line
  sed -n "$2" "$work/$1.log" | head -n 1
}
loss() { field "$1" 's/.*train loss \([0-9.]*\).*/\1/p'; }
accuracy() { field "$1" 's/.*final test accuracy \([0-9.]*\)%.*/\1/p'; }
crc() { field "$1" 's/.*parameters crc32 \([0-9a-f]*\).*/\1/p'; }

train ddp
train zero3 --zero 3
train tp2 --tp 2
train pp2 --pp 2 --micro-batches 4
train tp2pp2 --tp 2 --pp 2 --micro-batches 4

for name in ddp zero3 tp2 pp2 tp2pp2; do
  a=$(accuracy $name)
  [ -n "$a" ] || fail "$name printed no final accuracy"
  awk -v a="$a" 'BEGIN { exit !(a >= 60) }' || fail "$name reached only $a% test accuracy (< 60%)"
  echo "$name: train loss $(loss $name), test accuracy $a%, crc32 $(crc $name)"
done
[ "$(crc zero3)" = "$(crc ddp)" ] || fail "ZeRO-3 ended with other parameters than DDP (crc32 $(crc zero3) vs $(crc ddp))"
grep -q "layout DP4, ZeRO-3" "$work/zero3.log" || fail "the ZeRO-3 run did not run the fully sharded layout"
for name in tp2 pp2 tp2pp2; do
  [ "$(loss $name)" = "$(loss ddp)" ] || fail "$name's train loss $(loss $name) differs from DDP's $(loss ddp)"
  [ "$(accuracy $name)" = "$(accuracy ddp)" ] || fail "$name's accuracy $(accuracy $name)% differs from DDP's $(accuracy ddp)%"
done
grep -q "layout DP2 x TP2 x PP1" "$work/tp2.log" || fail "the TP run did not run TP2 x DP2"
grep -q "pipeline bubble .* measured (stages .*) vs 20.0% = (P-1)/(M+P-1)" "$work/pp2.log" || fail "the PP run printed no bubble figures"
grep -q "layout DP1 x TP2 x PP2" "$work/tp2pp2.log" || fail "the TP x PP run did not run TP2 x PP2"
echo "PASS: ZeRO-3 bit-identical to DDP; TP2 x DP2, PP2 x DP2 and TP2 x PP2 train like DDP"
