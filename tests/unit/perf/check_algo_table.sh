#!/bin/sh
# Runs all_reduce_perf --algos ring,rd,oneshot,auto on sizes 8 B and 1 MiB and
# checks the table's structure (not its timings): two data rows of 10 fields
# (size, ring, rd, oneshot, auto, auto ran, best, best is, auto/best, paired); at 8 B
# every forced algorithm ran (a time), at 1 MiB rd (one chunk at most) and
# oneshot (64 KiB at most) show n/a while ring ran; "ran" columns read
# name/Protocol; the ratios are numbers; the worst-ratio, n/a and wrong-value
# lines are there, and no value was wrong.
#
# Usage: check_algo_table.sh TOOL_COMMAND...   (the command gets the flags appended)
set -eu
out=$("$@" -b 8 -e 1M -f 131072 -n 2 -w 1 --reps 2 --algos ring,rd,oneshot,auto) ||
  { echo "check_algo_table.sh: $* failed" >&2; exit 1; }
printf '%s\n' "$out"
for pattern in '^# worst auto/best: [0-9]+\.[0-9]{3} at [0-9]+ B' '^# worst paired: [0-9]+\.[0-9]{3} at [0-9]+ B' \
               '^# n/a: oneshot did not run at 1048576 B' '^# n/a: rd did not run at 1048576 B' \
               '^# wrong values: 0 \(' '^# what ran:' "^# auto ran the best's algorithm/protocol at [0-9] of 2 sizes"; do
  printf '%s\n' "$out" | grep -Eq "$pattern" || { echo "check_algo_table.sh: no line matching $pattern" >&2; exit 1; }
done
printf '%s\n' "$out" | awk '
  /^#/ || NF == 0 { next }
  function time(x) { return x ~ /^[0-9]+\.[0-9]+$/ }
  function ran(x) { return x ~ /^[a-z0-9_]+\/[A-Za-z0-9]+(\|[a-z0-9_]+\/[A-Za-z0-9]+)*$/ }
  {
    rows++
    if (NF != 10) { printf "row %d has %d fields, expected 10: %s\n", rows, NF, $0; bad = 1; next }
    want = rows == 1 ? 8 : 1048576
    if ($1 != want) { printf "row %d is for %s B, expected %s\n", rows, $1, want; bad = 1 }
    if (!time($2)) { printf "ring has no time at %s B: %s\n", $1, $2; bad = 1 }
    if (rows == 1 && !(time($3) && time($4))) { printf "rd or oneshot did not run at 8 B: %s\n", $0; bad = 1 }
    if (rows == 2 && !($3 == "n/a" && $4 == "n/a")) { printf "rd and oneshot must be n/a at 1 MiB: %s\n", $0; bad = 1 }
    if (!time($5) || !ran($6)) { printf "auto time or choice missing: %s\n", $0; bad = 1 }
    if (!time($7) || !ran($8)) { printf "best time or name missing: %s\n", $0; bad = 1 }
    if (rows == 2 && $8 !~ /^ring\//) { printf "at 1 MiB only ring ran, yet best is %s\n", $8; bad = 1 }
    if ($9 !~ /^[0-9]+\.[0-9][0-9][0-9]$/) { printf "auto/best is not a ratio: %s\n", $9; bad = 1 }
    if ($10 !~ /^[0-9]+\.[0-9][0-9][0-9]$/) { printf "paired is not a ratio: %s\n", $10; bad = 1 }
  }
  END { if (rows != 2) { printf "%d data rows, expected 2\n", rows; bad = 1 } exit bad }' >&2
