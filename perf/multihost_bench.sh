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
# Knobs: REPS (3), RATE (10gbit), DELAY_US (50), NSOCKS ("1 2 4"), ITERS (10), WARMUP (3),
#        RAW_RESULTS (file to keep every run's figure in), UCX_ENV (extra env for the UCX run),
#        REF_CHUNK (also run Loom TCP with LOOM_CHUNK_SIZE=REF_CHUNK, shown as ref-*, not in the ratios)
#
# Each repetition runs every contender once, interleaved, so a noisy machine
# hurts them alike; the table shows medians. busbw of a 2-rank all-reduce =
# size / time (each rank sends and receives `size` bytes, at the same time);
# iperf3 is one TCP stream, one direction, in GB/s (10^9 bytes/s); iperf3-bidir
# runs both directions at once and reports per direction (mean of the two),
# the like-for-like bound for a 2-rank all-reduce (on 2 cores both directions
# compete for CPU); -P N uses N streams like LOOM_NSOCKS=N.
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
       loomrun -n 1 --timeout 180 --tag-output "$bin/all_reduce_perf" "${perf_args[@]}" >"$log" 2>&1; then
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

# Prints iperf3's throughput in GB/s between host 0 (client) and host 1; "fail" on error.
# Args: extra iperf3 client options (e.g. --bidir, -P 4). With --bidir, both
# directions run at once and the figure is the mean of the two directions'
# received rates, i.e. per direction, comparable with a 2-rank all-reduce busbw
# (each rank sends and receives at once).
run_iperf() {
  ip netns exec "loom-$name-h1" iperf3 -s -1 -D -p 5201 >/dev/null 2>&1 || { echo fail; return; }
  sleep 0.3
  ip netns exec "loom-$name-h0" iperf3 -c 10.77.0.2 -p 5201 -t 3 -J "$@" 2>/dev/null |
    python3 -c 'import json,sys
end = json.load(sys.stdin)["end"]
rates = [end["sum_received"]["bits_per_second"]]
if "sum_received_bidir_reverse" in end: rates.append(end["sum_received_bidir_reverse"]["bits_per_second"])
print("%.3f" % (sum(rates) / len(rates) / 8e9))' || echo fail
  sleep 0.3  # the one-off server exits after its test
}

results="$work/results"
iperf_streams=$(printf "%s\n" $nsocks_list | sort -n | tail -1)
for bed in unshaped shaped; do
  args=(--name "$name" --hosts 2)
  delay_env=()
  if [[ $bed == shaped ]]; then args+=(--rate "$rate"); delay_env=(LOOM_TCP_TEST_DELAY_US="$delay_us"); fi
  "$testbed" "${args[@]}" up >/dev/null
  for ((rep = 1; rep <= reps; ++rep)); do
    if [[ $have_iperf -eq 1 ]]; then
      echo "$bed iperf3 $(run_iperf)" >>"$results"
      echo "$bed iperf3-bidir $(run_iperf --bidir)" >>"$results"
      # As many streams as Loom's largest LOOM_NSOCKS, to compare like with like.
      if ((iperf_streams > 1)); then
        echo "$bed iperf3-P$iperf_streams $(run_iperf -P "$iperf_streams")" >>"$results"
        echo "$bed iperf3-bidir-P$iperf_streams $(run_iperf --bidir -P "$iperf_streams")" >>"$results"
      fi
    fi
    for k in $nsocks_list; do
      echo "$bed loom-tcp-nsocks$k $(run_loom "tcp$k" LOOM_TRANSPORT=tcp LOOM_NSOCKS="$k" "${delay_env[@]}")" >>"$results"
    done
    # The same at another chunk size (e.g. the pre-TCP-default 256K), for before/after tables.
    [[ -z ${REF_CHUNK:-} ]] || echo "$bed ref-tcp-nsocks2-chunk$REF_CHUNK $(run_loom tcpref LOOM_TRANSPORT=tcp LOOM_NSOCKS=2 \
      LOOM_CHUNK_SIZE="$REF_CHUNK" "${delay_env[@]}")" >>"$results"
    [[ $have_mpi -eq 1 ]] && echo "$bed mpi-tcp $(run_mpi)" >>"$results"
    # shellcheck disable=SC2086  # UCX_ENV: space-separated VAR=value words
    [[ $have_ucx -eq 1 ]] && echo "$bed loom-ucx $(run_loom ucx LOOM_TRANSPORT=ucx UCX_TLS=tcp,self ${UCX_ENV:-})" >>"$results"
    echo "# $bed repetition $rep done" >&2
  done
  "$testbed" --name "$name" down
done

[[ -z ${RAW_RESULTS:-} ]] || cp "$results" "$RAW_RESULTS"  # one line per run: bed contender GB/s
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
    print(f"  {'contender':<28} {'busbw':>8} {'range':>15} {'runs':>5}")
    for (b, who), values in rows.items():
        if b != bed:
            continue
        ok = [v for v in values if v is not None]
        if not ok:
            print(f"  {who:<28} {'failed':>8} {'':>15} {len(values):>5}")
            continue
        med[who] = statistics.median(ok)
        print(f"  {who:<28} {med[who]:8.3f} {min(ok):7.3f}..{max(ok):<7.3f} {len(ok):>3}/{len(values)}")
    loom = {w: v for w, v in med.items() if w.startswith("loom-tcp")}
    if not loom:
        continue
    best_who = max(loom, key=loom.get)
    best = loom[best_who]
    line = f"  best Loom TCP: {best_who} {best:.3f} GB/s"
    print(line)
    # The bandwidth target is against one-way iperf3; a 2-rank all-reduce sends and
    # receives at once, so the bidirectional figure is the like-for-like bound.
    for who in sorted(w for w in med if w.startswith("iperf3")):
        r = best / med[who]
        kind = "both directions at once, per direction" if "bidir" in who else "one direction"
        target = f" (target >= 0.90: {'met' if r >= 0.9 else 'MISSED'})" if who == "iperf3" else ""
        print(f"  Loom/{who:<16} {r:5.2f}  [{kind}]{target}")
    if "mpi-tcp" in med:
        r = best / med["mpi-tcp"]
        print(f"  Loom/{'mpi-tcp':<16} {r:5.2f}  (target >= 1.00: {'met' if r >= 1.0 else 'MISSED'})")
    if "loom-ucx" in med:
        print(f"  {'loom-ucx/Loom TCP':<21} {med['loom-ucx'] / best:5.2f}")
PY
