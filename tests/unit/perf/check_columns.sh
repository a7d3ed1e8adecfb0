#!/bin/sh
# Runs a perf tool and checks the columns of its table: every data row has
# FIELDS whitespace-separated fields, the last one names an algorithm as the
# library reports it ("name/Protocol"), and, when SHARE is 1, the
# memory-bound share of the out-of-place column (field 14) is a number for
# sizes >= 1 MiB and "-" below, after a "# Stream bandwidth: X GB/s" line.
#
# Usage: check_columns.sh FIELDS SHARE TOOL [ARGS...]
set -eu
fields=$1 share=$2
shift 2
out=$("$@") || { echo "check_columns.sh: $* failed" >&2; exit 1; }
printf '%s\n' "$out"
if [ "$share" = 1 ]; then
  printf '%s\n' "$out" | grep -Eq '^# Stream bandwidth: [0-9]+\.[0-9]+ GB/s' ||
    { echo "check_columns.sh: no stream bandwidth line" >&2; exit 1; }
else
  ! printf '%s\n' "$out" | grep -q '^# Stream bandwidth' ||
    { echo "check_columns.sh: stream bandwidth measured although off" >&2; exit 1; }
fi
printf '%s\n' "$out" | awk -v fields="$fields" -v share="$share" '
  /^#/ || NF == 0 { next }
  {
    rows++
    if (NF != fields) { printf "row %d has %d fields, expected %d: %s\n", rows, NF, fields, $0; bad = 1 }
    if ($NF !~ /^[a-z0-9_-]+\/[A-Za-z0-9]+(\|[a-z0-9_-]+\/[A-Za-z0-9]+)?$/) { printf "no algorithm in: %s\n", $0; bad = 1 }
    if (share == 1) {
      expectNumber = ($1 >= 1048576)
      isNumber = ($14 ~ /^[0-9]+\.[0-9]$/)
      if (expectNumber != isNumber) { printf "share column wrong for size %s: %s\n", $1, $14; bad = 1 }
    }
  }
  END { if (rows == 0) { print "no data rows"; bad = 1 } exit bad }' >&2
