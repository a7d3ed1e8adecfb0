#!/usr/bin/env bash
# The ctest job of run_tests.sh: every ctest test of BUILD_DIR, then, if some
# failed, those tests once more, one at a time. A test that fails and then
# passes alone is reported as flaky (name and its first failure's output in
# BUILD_DIR/Testing/Temporary/Flaky.log, which run_tests.sh repeats at the
# end of the log) rather than failing the job; a test that fails twice fails
# it. The first failure is never hidden: its output is printed here too.
#   usage: run_ctest.sh BUILD_DIR [JOBS]
set -uo pipefail
build_dir=$1
jobs=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
tmp="$build_dir/Testing/Temporary"
rm -f "$tmp/Flaky.log"
# Exhaustive matrices carry labels of their own (engine_full: the device
# engine's whole collective x type x op x size matrix; integration_full: the
# integration matrix with 4M+3 for every dtype, op and placement at 1-4
# ranks); CI runs their sampled versions, which are in the default set.
(cd "$build_dir" && ctest --output-on-failure -j "$jobs" --timeout 900 -LE '^(engine_full|integration_full)$') && exit 0
[[ -s $tmp/LastTestsFailed.log ]] || exit 1  # ctest itself failed, not a test
first_summary=$(bash "$here/ctest_failure_summary.sh" "$build_dir" 30)
cp "$tmp/LastTestsFailed.log" "$tmp/FirstRunFailed.log"
echo "== $(wc -l <"$tmp/FirstRunFailed.log") test(s) failed; running them again, one at a time"
(cd "$build_dir" && ctest --rerun-failed --output-on-failure -j 1 --timeout 900)
rerun_status=$?
# Flaky: failed the first time, not the second (the rerun's list holds only
# the tests that failed again, or nothing when all passed).
again=()
((rerun_status == 0)) || mapfile -t again < <(cut -d: -f2- "$tmp/LastTestsFailed.log")
flaky=()
while IFS=: read -r _ name; do
  [[ " ${again[*]} " == *" $name "* ]] || flaky+=("$name")
done <"$tmp/FirstRunFailed.log"
if ((${#flaky[@]})); then
  { echo "== FLAKY: these tests failed once and passed when run again alone: ${flaky[*]}"
    echo "   (their first failure, with any test that failed twice:)"
    printf '%s\n' "$first_summary"; } >"$tmp/Flaky.log"
  cat "$tmp/Flaky.log"
fi
exit "$rerun_status"
