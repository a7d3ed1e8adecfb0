#!/bin/sh
# ddp_bench's memory and strategies tables on a tiny model, ranks as threads:
# every row is printed, and ZeRO-3 holds at most half of DDP's parameter
# bytes per rank on 4 ranks (1/4 plus padding), ZeRO-1 less optimizer state.
# usage: bench_tables_test.sh DDP_BENCH
set -u
out=$("$1" --threads 4 --hidden 64 --depth 2 --batch 8 --steps 2 --warmup 1 --table all 2>&1) || {
  echo "FAIL: ddp_bench failed"; echo "$out"; exit 1; }
echo "$out"
fail() { echo "FAIL: $*"; exit 1; }
column() {  # row name, column number (from the end of the name)
  echo "$out" | grep "^$1 " | head -n 1 | sed "s/^$1 *//" | awk -v c="$2" '{ print $c }'
}
for row in "DDP (replicated)" "ZeRO-1" "ZeRO-2" "ZeRO-3 (fully sharded)" "parameter server, 1 server" \
           "parameter server, 4 servers" "DDP all-reduce, ring" "DDP all-reduce, tree" "scaling: ranks 4 mode threads"; do
  echo "$out" | grep -q "^$row" || fail "no row '$row'"
done
ddp=$(column "DDP (replicated)" 2)
zero3=$(column "ZeRO-3 (fully sharded)" 2)
awk -v a="$zero3" -v b="$ddp" 'BEGIN { exit !(a > 0 && a <= b / 2) }' || fail "ZeRO-3 holds $zero3 MB of parameters per rank, DDP $ddp MB"
awk -v a="$(column ZeRO-1 4)" -v b="$(column "DDP (replicated)" 4)" 'BEGIN { exit !(a < b) }' ||
  fail "ZeRO-1's optimizer state is not smaller than DDP's"
echo "PASS"
