#!/bin/sh
# Runs a perf tool and checks which memory its buffers were in, as its note
# (after the device lines) and its "# Using devices" lines say.
#
# Usage: check_memory.sh MODE TOOL_COMMAND...
#   host      the command (given --host-mem) ran on host buffers: "# --host-mem" line, [cpu] devices
#   auto      no flag: device buffers when a CUDA device is usable, else host
#             buffers with a "# no CUDA device: host buffers (why)" line
#   device    device buffers, every device line naming a GPU; exits 77 (skipped,
#             with the reason) when there is no CUDA device
#   graph     as device, with -G in the command: either it ran, or it stopped
#             with status 1 and the -G message saying Loom refused the capture
#   no-device a device-only flag (-g 2, -G, --memcpy-baseline) without a CUDA
#             device: status 2 and a message naming the flag; 77 when there is a device
set -u
mode=$1
shift
err=$(mktemp)
trap 'rm -f "$err"' EXIT
out=$("$@" 2>"$err")
status=$?
printf '%s\n' "$out"
cat "$err" >&2
fail() { echo "check_memory.sh ($mode): $*" >&2; exit 1; }
skip() { echo "check_memory.sh ($mode): skipped: $*"; exit 77; }
nodevice=$(printf '%s\n' "$out" | grep -m1 '^# no CUDA device: host buffers (' || true)
deviceLines() { printf '%s\n' "$out" | grep -E '^#  Rank +[0-9]+ ' || true; }
hostDevices() {
  lines=$(deviceLines)
  [ -n "$lines" ] || fail "no device lines"
  ! printf '%s\n' "$lines" | grep -vq '\[cpu\] host memory$' || fail "a rank is not on host memory"
}
gpuDevices() {
  lines=$(deviceLines)
  [ -n "$lines" ] || fail "no device lines"
  ! printf '%s\n' "$lines" | grep -q '\[cpu\]' || fail "a rank is on host memory although device buffers were chosen"
}
case $mode in
  host)
    [ "$status" -eq 0 ] || fail "exit status $status"
    printf '%s\n' "$out" | grep -qx '# --host-mem: host buffers' || fail "no --host-mem note"
    hostDevices ;;
  auto)
    [ "$status" -eq 0 ] || fail "exit status $status"
    if [ -n "$nodevice" ]; then hostDevices
    else
      printf '%s\n' "$out" | grep -q '^# device buffers: ' || fail "neither the no-device nor the device note"
      gpuDevices
    fi ;;
  device)
    [ -z "$nodevice" ] || skip "${nodevice#\# }"
    grep -q 'there is no CUDA device' "$err" && skip "$(cat "$err")"
    [ "$status" -eq 0 ] || fail "exit status $status"
    printf '%s\n' "$out" | grep -q '^# device buffers: ' || fail "no device-buffers note"
    gpuDevices ;;
  graph)
    grep -q 'there is no CUDA device' "$err" && skip "$(cat "$err")"
    if [ "$status" -eq 1 ] && grep -q '^rank [0-9]*: -G: .*captured into a CUDA graph' "$err"; then
      echo "check_memory.sh (graph): Loom refused the capture, with the -G message and status 1"
      exit 0
    fi
    [ "$status" -eq 0 ] || fail "exit status $status without the -G refusal message"
    printf '%s\n' "$out" | grep -q 'graph: [1-9]' || fail "the header does not show the graph launches"
    gpuDevices ;;
  no-device)
    [ "$status" -eq 0 ] && skip "a CUDA device is usable here, so the flag ran"
    [ "$status" -eq 2 ] || fail "exit status $status, expected 2"
    grep -q 'needs device buffers, but there is no CUDA device: ' "$err" || fail "no message naming the flag and why"
    ;;
  *) fail "unknown mode (host, auto, device, graph, no-device)" ;;
esac
