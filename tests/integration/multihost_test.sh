#!/usr/bin/env bash
# One multi-host ctest entry: runs PROG under loomrun on K emulated hosts
# (scripts/netns_testbed.sh) and checks that every host's job succeeded and
# that exactly the transports EXPECT carried the traffic (from the
# LOOM_DEBUG=INFO "<transport> serves ... peer(s)" lines), so a run that
# silently fell back to another transport fails.
#
#   multihost_test.sh TESTBED LOOMRUN HOSTS RANKS_PER_HOST EXPECT PROG ARGS...
#     EXPECT: comma list of transports, e.g. "shm,tcp" or "tcp"
#
# Exit 77 (ctest SKIP_RETURN_CODE) with the reason when this machine does
# not let us create network namespaces (not root, no CAP_NET_ADMIN, ...).
set -uo pipefail

testbed="$1" loomrun="$2" hosts="$3" ranks="$4" expect="$5"
shift 5

if ! why=$("$testbed" check); then
  echo "SKIPPED: the multi-host test bed needs network namespaces: $why"
  exit 77
fi

log=$(mktemp /tmp/loom-multihost.XXXXXX)
trap 'rm -f "$log"' EXIT
LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=TRANSPORT LOOM_TIMEOUT="${LOOM_TIMEOUT:-60}" \
  "$testbed" --hosts "$hosts" --loomrun "$loomrun" loomrun -n "$ranks" --timeout 80 "$@" >"$log" 2>&1
status=$?
# The log minus the INFO lines (one per communicator and transport).
grep -v " LOOM INFO " "$log" | tail -n 60
if ((status != 0)); then
  echo "FAILED: the job failed on at least one host (status $status)"
  exit 1
fi

seen=$(grep -o "LOOM INFO TRANSPORT [a-z]* serves" "$log" | awk '{print $4}' | sort -u | paste -sd, -)
want=$(tr ',' '\n' <<<"$expect" | sort -u | paste -sd, -)
echo "transports that served peers: ${seen:-none} (expected $want)"
if [ "$seen" != "$want" ]; then
  echo "FAILED: expected the transports $want to carry the traffic, saw ${seen:-none}"
  exit 1
fi
passed=$(grep -c "\[  PASSED  \]" "$log" || true)
if ((passed != hosts * ranks)); then
  echo "FAILED: $passed of $((hosts * ranks)) ranks reported PASSED"
  exit 1
fi
echo "OK: $hosts hosts x $ranks ranks over $want"
