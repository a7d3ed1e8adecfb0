#!/usr/bin/env bash
# 64 MiB all-reduce between two emulated hosts (scripts/netns_testbed.sh,
# 1 rank each) against what the link gives: iperf3 between the same
# namespaces, Loom over TCP (LOOM_TRANSPORT=tcp, for several LOOM_NSOCKS),
# Open MPI's TCP BTL (pml ob1, btl tcp,self on the veth) and Loom over UCX
# when built. Two beds: unshaped veth, and veth shaped to RATE with tc tbf
# plus DELAY_US of latency (LOOM_TCP_TEST_DELAY_US: netem is missing from
# this kernel, so only Loom's TCP transport gets the delay; iperf3, MPI and
# UCX run without it, which favours them).
#
# Usage: perf/multihost_bench.sh [BUILD_DIR]   (root; default $LOOM_BUILD_DIR, else ./build)
# Knobs: REPS (3), RATE (10gbit), DELAY_US (50), NSOCKS ("1 2 4"), ITERS (10), WARMUP (3)
#
# Each repetition runs every contender once, interleaved, so a noisy machine
# hurts them alike; the table shows medians. busbw of a 2-rank all-reduce =
# size / time (each rank sends and receives `size` bytes); iperf3 is one TCP
# stream, one direction, in GB/s (10^9 bytes/s).
# Open MPI across namespaces: mpirun runs in host 0's namespace with
# --host 10.77.0.1,10.77.0.2 and starts its daemon on host 1 through
# perf/netns_rsh_agent.sh (an "ssh" that does `ip netns exec`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${1:-${LOOM_BUILD_DIR:-$here/build}}
bin=$(cd "$build/bin" && pwd)
reps=${REPS:-3}
rate=${RATE:-10gbit}
delay_us=${DELAY_US:-50}
nsocks_list=${NSOCKS:-"1 2 4"}
iters=${ITERS:-10}
warmup=${WARMUP:-3}
testbed="$here/scripts/netns_testbed.sh"
agent="$here/perf/netns_rsh_agent.sh"
name="mb$$"
export LOOM_TESTBED_NAME=$name

[[ $(id -u) -eq 0 ]] || { echo "multihost_bench.sh: needs root (network namespaces)" >&2; exit 2; }
for tool in loomrun all_reduce_perf; do
  [[ -x $bin/$tool ]] || { echo "multihost_bench.sh: $bin/$tool not found" >&2; exit 2; }
done
have_iperf=1; command -v iperf3 >/dev/null || have_iperf=0
have_mpi=1; { command -v mpirun >/dev/null && [[ -x $bin/mpi_all_reduce_perf ]]; } || have_mpi=0
have_ucx=0; LOOM_TRANSPORT=ucx "$bin/all_reduce_perf" -t 2 -b 8 -e 8 -n 1 -w 0 -c 0 >/dev/null 2>&1 && have_ucx=1

work=$(mktemp -d)
trap '"$testbed" --name "$name" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

perf_args=(-b 64M -e 64M -n "$iters" -w "$warmup" -z 1 -c 0)
# Prints the out-of-place busbw (GB/s) of the 64 MiB row of an all_reduce_perf log, or "fail".
busbw_of() { awk '$1 == 67108864 { printf "%.3f\n", 67108864 / ($6 * 1e3); found = 1 } END { if (!found) print "fail" }' "$1"; }

run_loom() {  # label env...
  local label=$1; shift
  local log="$work/$label.log"
  if env "$@" LOOM_TIMEOUT=120 "$testbed" --name "$name" --hosts 2 --loomrun "$bin/loomrun" \
       loomrun -n 1 --timeout 180 "$bin/all_reduce_perf" "${perf_args[@]}" >"$log" 2>&1; then
    sed -n 's/^\[h0\] \[0\] //p' "$log" >"$log.h0"  # rank 0's output without the tags
    busbw_of "$log.h0"
  else echo fail; fi
}

run_mpi() {
  local log="$work/mpi.log"
  if timeout 180 ip netns exec "loom-$name-h0" mpirun --allow-run-as-root --host 10.77.0.1,10.77.0.2 -np 2 \
       --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include veth-loom --mca pml ob1 --mca btl tcp,self \
       --mca btl_tcp_if_include veth-loom --bind-to none "$bin/mpi_all_reduce_perf" -b 64M -e 64M -n "$iters" \
       -w "$warmup" -c 0 >"$log" 2>&1; then
    busbw_of "$log"
  else echo fail; fi
}

run_iperf() {
  ip netns exec "loom-$name-h1" iperf3 -s -1 -D -p 5201 >/dev/null 2>&1 || { echo fail; return; }
  sleep 0.3
  ip netns exec "loom-$name-h0" iperf3 -c 10.77.0.2 -p 5201 -t 3 -J 2>/dev/null |
    python3 -c 'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e9))' ||
    echo fail
}

results="$work/results"
for bed in unshaped shaped; do
  args=(--name "$name" --hosts 2)
  delay_env=()
  if [[ $bed == shaped ]]; then args+=(--rate "$rate"); delay_env=(LOOM_TCP_TEST_DELAY_US="$delay_us"); fi
  "$testbed" "${args[@]}" up >/dev/null
  for ((rep = 1; rep <= reps; ++rep)); do
    [[ $have_iperf -eq 1 ]] && echo "$bed iperf3 $(run_iperf)" >>"$results"
    for k in $nsocks_list; do
      echo "$bed loom-tcp-nsocks$k $(run_loom "tcp$k" LOOM_TRANSPORT=tcp LOOM_NSOCKS="$k" "${delay_env[@]}")" >>"$results"
    done
    [[ $have_mpi -eq 1 ]] && echo "$bed mpi-tcp $(run_mpi)" >>"$results"
    [[ $have_ucx -eq 1 ]] && echo "$bed loom-ucx $(run_loom ucx LOOM_TRANSPORT=ucx UCX_TLS=tcp,self)" >>"$results"
    echo "# $bed repetition $rep done" >&2
  done
  "$testbed" --name "$name" down
done

echo "# 64 MiB float all-reduce, 2 emulated hosts x 1 rank, busbw GB/s (median of $reps; min..max)"
echo "# shaped = tc tbf $rate on every veth + LOOM_TCP_TEST_DELAY_US=$delay_us (Loom TCP only); machine: $(nproc) cores"
[[ $have_iperf -eq 1 ]] || echo "# iperf3 missing (apt-get install iperf3)"
[[ $have_mpi -eq 1 ]] || echo "# Open MPI baseline missing (mpirun or mpi_all_reduce_perf)"
[[ $have_ucx -eq 1 ]] || echo "# UCX transport not built"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    bed, who, value = line.split()
    rows.setdefault((bed, who), []).append(None if value == "fail" else float(value))
for bed in ("unshaped", "shaped"):
    med = {}
    print(f"\n{bed}:")
    print(f"  {'contender':<20} {'busbw':>8} {'range':>15} {'runs':>5}")
    for (b, who), values in rows.items():
        if b != bed:
            continue
        ok = [v for v in values if v is not None]
        if not ok:
            print(f"  {who:<20} {'failed':>8} {'':>15} {len(values):>5}")
            continue
        med[who] = statistics.median(ok)
        print(f"  {who:<20} {med[who]:8.3f} {min(ok):7.3f}..{max(ok):<7.3f} {len(ok):>3}/{len(values)}")
    loom = {w: v for w, v in med.items() if w.startswith("loom-tcp")}
    if not loom:
        continue
    best_who = max(loom, key=loom.get)
    best = loom[best_who]
    line = f"  best Loom TCP: {best_who} {best:.3f} GB/s"
    if "iperf3" in med:
        r = best / med["iperf3"]
        line += f"; Loom/iperf3 {r:.2f} (target >= 0.90: {'met' if r >= 0.9 else 'MISSED'})"
    if "mpi-tcp" in med:
        r = best / med["mpi-tcp"]
        line += f"; Loom/MPI {r:.2f} (target >= 1.00: {'met' if r >= 1.0 else 'MISSED'})"
    if "loom-ucx" in med:
        line += f"; Loom UCX/TCP {med['loom-ucx'] / best:.2f}"
    print(line)
PY
