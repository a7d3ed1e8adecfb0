#!/usr/bin/env bash
# Prints, for a build tree whose last ctest run had failures, each failed
# test's name and the last lines of its output. CI shows only the tail of a
# long log, so run_tests.sh calls this last: the failure's cause then sits
# where it is read, not buried 2000 tests up.
#   usage: ctest_failure_summary.sh BUILD_DIR [LINES]
set -uo pipefail
build_dir=$1
lines=${2:-40}
failed_list="$build_dir/Testing/Temporary/LastTestsFailed.log"
log="$build_dir/Testing/Temporary/LastTest.log"
[[ -s $failed_list ]] || exit 0
# ctest leaves the list of an earlier run in place when a later one passes.
if [[ -f $log ]] && (($(stat -c %Y "$failed_list") < $(stat -c %Y "$log") - 60)); then
  exit 0
fi
echo "== failed ctest tests ($build_dir):"
sed 's/^[0-9]*:/  /' "$failed_list"
[[ -f $log ]] || exit 0
while IFS=: read -r _ name; do
  echo "---- last $lines lines of $name"
  # A test's section runs from its "Testing: NAME" line to "<end of output>";
  # the few lines after that say how it ended (failed, timeout, signal).
  awk -v want="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Testing: / { sub(/^[0-9]+\/[0-9]+ Testing: /, ""); inside = ($0 == want); next }
    inside && /^<end of output>/ { inside = 0; after = 4; next }
    inside { print; next }
    after > 0 { after--; if (length($0)) print "  [ctest] " $0 }
  ' "$log" | tail -n "$lines"
done < "$failed_list"
