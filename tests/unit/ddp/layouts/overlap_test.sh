#!/bin/sh
# train_demo's DDP overlap report on a tiny synthetic Fashion-MNIST (256
# training and 256 test images, so the large model's one step stays short),
# at 2 ranks:
#   --model large: the preset's MLP (784-2048x4-10) and global batch (2048);
#   every run: the epoch line's "comm hidden N% (ranks A..B%; X ms comm,
#   Y ms exposed per step)" parses, with A <= N <= B (the share over all
#   ranks is a weighted mean of theirs) and Y <= X (exposed time is part of
#   the communication time); "of it W ms waiting for a slower rank's
#   backward, L ms exposed on the rank that ended it last" follows, with
#   W + L = Y up to rounding (each step's least exposure over ranks is the
#   last rank's, the rest waiting); where the line explains a low share ("at most
#   Z% can be hidden"), Z >= N (the bound holds by construction); a share
#   below 80% is always explained ("at most Z% can be hidden" or "below 80%
#   though up to Z% could be hidden", with Z >= 80 there).
# --chunk-mb: the communicator uses the chunk asked for (LOOM_DEBUG=INFO log).
# No timing threshold: what share is hidden depends on the machine.
#
# usage: overlap_test.sh LOOMRUN TRAIN_DEMO
set -u
loomrun=$1
demo=$2

command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 (to write the synthetic IDX files) is not installed"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/overlap.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log; do echo "--- $log"; cat "$log"; done
  exit 1
}

# IDX files: big-endian magic (0x803 images, 0x801 labels) and sizes, then bytes.
python3 - "$work" <<'PY' || fail "cannot write the synthetic data set"
import random, struct, sys
rng = random.Random(5)
for split in ("train", "t10k"):
    n = 256
    labels = bytes(rng.randrange(10) for _ in range(n))
    # Each class a different bright band, so the model has something to learn.
    pixels = bytearray()
    for label in labels:
        for p in range(784):
            pixels.append(200 if p // 78 == label else rng.randrange(40))
    with open(f"{sys.argv[1]}/{split}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + pixels)
    with open(f"{sys.argv[1]}/{split}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels)
PY

export LOOM_TIMEOUT=60 OPENBLAS_NUM_THREADS=1
train() {  # name, options...
  name=$1
  shift
  "$loomrun" -n 2 "$demo" --epochs 1 --data-dir "$work" "$@" >"$work/$name.log" 2>&1 || fail "train_demo $* failed"
}
check_share() {  # name
  line=$(grep "^epoch" "$work/$1.log" | head -n 1)
  figures=$(echo "$line" | sed -n 's/.*comm hidden \([0-9]*\)% (ranks \([0-9]*\)\.\.\([0-9]*\)%; \([0-9.]*\) ms comm, \([0-9.]*\) ms exposed per step).*/\1 \2 \3 \4 \5/p')
  [ -n "$figures" ] || fail "$1: no hidden share in the epoch line: $line"
  set -- "$1" $figures
  awk -v n="$2" -v a="$3" -v b="$4" 'BEGIN { exit !(a <= n && n <= b && b <= 100) }' ||
    fail "$1: hidden share $2% outside the ranks' range $3..$4%"
  awk -v x="$5" -v y="$6" 'BEGIN { exit !(y <= x + 0.05) }' || fail "$1: exposed $6 ms > communication $5 ms"
  split=$(echo "$line" | sed -n "s/.*per step); of it \([0-9.]*\) ms waiting for a slower rank's backward, \([0-9.]*\) ms exposed on the rank that ended it last.*/\1 \2/p")
  [ -n "$split" ] || fail "$1: no split of the exposed time in the epoch line: $line"
  set -- "$@" $split
  awk -v y="$6" -v w="$7" -v l="$8" 'BEGIN { d = w + l - y; exit !(d <= 0.15 && d >= -0.15) }' ||
    fail "$1: waiting $7 ms + last rank's $8 ms is not the exposed $6 ms"
  bound=$(echo "$line" | sed -n 's/.*at most \([0-9]*\)% can be hidden.*/\1/p')
  if [ -n "$bound" ]; then
    [ "$bound" -ge "$2" ] || fail "$1: bound $bound% below the hidden share $2%"
  fi
  reachable=$(echo "$line" | sed -n 's/.*below 80% though up to \([0-9]*\)% could be hidden (.*).*/\1/p')
  if [ -n "$reachable" ]; then
    [ "$reachable" -ge 80 ] && [ "$2" -le 80 ] || fail "$1: 'below 80%' with share $2% and bound $reachable%"
  fi
  if [ "$2" -lt 80 ] && [ -z "$bound" ] && [ -z "$reachable" ]; then
    fail "$1: hidden share $2% below 80% without a reason in the epoch line: $line"
  fi
  echo "$1: comm hidden $2% (ranks $3..$4%), $5 ms comm, $6 ms exposed per step ($7 waiting, $8 on the last rank)${bound:+, at most $bound% hideable}${reachable:+, below 80% though $reachable% hideable}"
}

train small
train large --model large
grep -q "MLP 784-2048-2048-2048-2048-10 " "$work/large.log" || fail "--model large did not train the 784-2048x4-10 MLP"
grep -q "global batch 2048 " "$work/large.log" || fail "--model large did not set the global batch to 2048"
grep -q "last 6.1[23] MiB" "$work/large.log" || fail "the large model's last bucket is not the input layer's weight alone (6.125 MiB)"
check_share small
check_share large

# --chunk-mb reaches the communicator (every rank logs its Simple chunk at
# LOOM_DEBUG=INFO), the default leaves the chunk to Loom, and a chunk outside
# loomConfig_t.chunkBytes's range is refused naming the option.
LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=TUNER train chunk --chunk-mb 1
grep -q "Loom chunk 1024 KiB (--chunk-mb)" "$work/chunk.log" || fail "--chunk-mb 1 is not reported as a 1024 KiB chunk"
[ "$(grep -c 'Simple (1048576 B chunks)' "$work/chunk.log")" -eq 2 ] || fail "not both ranks use 1 MiB chunks with --chunk-mb 1"
check_share chunk
grep -q "Loom chunk LOOM_CHUNK_SIZE or Loom's default" "$work/small.log" || fail "the default run does not leave the chunk to Loom"
if "$demo" --chunk-mb 100 >"$work/bad_chunk.log" 2>&1; then fail "--chunk-mb 100 (above 64 MiB) was accepted"; fi
grep -q "option '--chunk-mb'" "$work/bad_chunk.log" || fail "--chunk-mb 100 is refused without naming the option"
echo "PASS: the hidden share parses and is consistent for the default and the large model; --chunk-mb reaches Loom"
