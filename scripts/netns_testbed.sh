#!/usr/bin/env bash
# Emulated multi-host test bed: K network namespaces ("hosts") joined by veth
# pairs on a bridge that lives in a namespace of its own, so nothing of it
# touches the machine's own network. Host i is namespace loom-<name>-h<i> with
# interface veth-loom at 10.77.0.<i+1>/24 (and lo up); the bridge is
# loom-<name>-br. Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN).
#
#   netns_testbed.sh [options] up                 create the hosts and leave them
#   netns_testbed.sh [options] down               remove everything named loom-<name>-*
#   netns_testbed.sh [options] run I CMD...       run CMD in host I with its environment
#   netns_testbed.sh [options] loomrun -n R [--port P] [--timeout S] PROG ARGS...
#        create the hosts (or use those `up` left under this --name), run
#        `loomrun --nnodes K --node-rank i --master-addr 10.77.0.1 --master-port P
#        -n R PROG ARGS...` in every host at once, collect the exit codes, remove
#        what it created; fails if any host fails.
#   netns_testbed.sh check                        exit 0 if namespaces can be made here,
#                                                 else print why and exit 77
# Options:
#   --hosts K       number of hosts (default 2)
#   --name N        names the namespaces (default: t<pid>), so concurrent runs do not clash
#   --rate R        shape every host's egress with tc tbf (e.g. 10gbit); default unshaped
#   --delay-us D    ranks get LOOM_TCP_TEST_DELAY_US=D (netem is missing here: the TCP
#                   transport holds each chunk D microseconds before sending it)
#   --loomrun PATH  loomrun binary (default: build/bin/loomrun, $LOOM_BUILD_DIR/bin/loomrun)
#
# Every command a host runs gets LOOM_HOST_ID=loom-h<i> (namespaces share
# /dev/shm, the boot id and the host name, so Loom would otherwise take them
# for one host), LOOM_SOCKET_IFNAME==veth-loom and UCX_NET_DEVICES=veth-loom.
# The up/loomrun modes remove what they created on failure and on Ctrl-C
# (loomrun mode also on success); `down` removes a bed left by `up`.
set -euo pipefail

hosts=2
name="t$$"
rate=""
delay_us=""
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
loomrun_bin="${LOOM_BUILD_DIR:-$here/build}/bin/loomrun"
readonly ifname="veth-loom"
readonly subnet="10.77.0"

die() { echo "netns_testbed: $*" >&2; exit 1; }

while (($#)); do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --delay-us) delay_us="$2"; shift 2 ;;
    --loomrun) loomrun_bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) die "unknown option $1" ;;
    *) break ;;
  esac
done
(($#)) || die "missing command (up, down, run, loomrun, check); see --help"
[[ "$hosts" =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= 200)) || die "--hosts must be 1..200, got '$hosts'"
[[ "$name" =~ ^[A-Za-z0-9_]{1,20}$ ]] || die "--name must be 1..20 letters, digits or _, got '$name'"

ns_of() { echo "loom-$name-h$1"; }
bridge_ns="loom-$name-br"

# Whether this process may create namespaces; prints the reason when not.
can_make_namespaces() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root (uid $(id -u)): creating network namespaces needs root"; return 1
  fi
  command -v ip >/dev/null || { echo "the ip command (iproute2) is missing"; return 1; }
  local probe="loom-probe-$$"
  local err
  if ! err=$(ip netns add "$probe" 2>&1); then
    echo "ip netns add failed: $err"; return 1
  fi
  if ! err=$(ip netns exec "$probe" ip link set lo up 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    echo "cannot use a new network namespace: $err"; return 1
  fi
  if ! err=$(ip -n "$probe" link add vprobe0 type veth peer name vprobe1 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    echo "cannot create veth pairs: $err"; return 1
  fi
  ip netns del "$probe"
}

# Kills what still runs inside our namespaces (started by this script), then removes them.
teardown() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^loom-$name-(h[0-9]+|br)$" || true); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -TERM $pids 2>/dev/null || true
      sleep 0.5
      # shellcheck disable=SC2086
      kill -KILL $(ip netns pids "$ns" 2>/dev/null || true) 2>/dev/null || true
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
}

bring_up() {
  ((hosts <= 250)) || die "at most 250 hosts fit in $subnet.0/24"
  if ip netns list | awk '{print $1}' | grep -qE "^loom-$name-"; then
    die "namespaces loom-$name-* exist already (another run with --name $name? remove them with: $0 --name $name down)"
  fi
  ip netns add "$bridge_ns"
  ip -n "$bridge_ns" link set lo up
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  local i ns
  for ((i = 0; i < hosts; i++)); do
    ns=$(ns_of "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # One end in the host, the other on the bridge; neither ever lives in the root namespace.
    ip link add "$ifname" netns "$ns" type veth peer name "port$i" netns "$bridge_ns"
    ip -n "$bridge_ns" link set "port$i" master br0 up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    if [ -n "$rate" ]; then
      # Burst: at least 1 ms of traffic (timer granularity) and a 64 KiB GSO packet.
      ip netns exec "$ns" tc qdisc add dev "$ifname" root tbf rate "$rate" burst 4mb latency 10ms
      ip netns exec "$bridge_ns" tc qdisc add dev "port$i" root tbf rate "$rate" burst 4mb latency 10ms
    fi
  done
  # Wait until every bridge port forwards (immediately without STP, but say so if not).
  for ((i = 0; i < hosts; i++)); do
    local ok=0 try
    for try in $(seq 1 50); do
      if ip -n "$bridge_ns" -d link show "port$i" | grep -q "state forwarding"; then ok=1; break; fi
      sleep 0.1
    done
    ((ok)) || die "bridge port of host $i does not forward"
  done
}

# The environment of host i's processes.
host_env() {
  local i="$1"
  echo "LOOM_HOST_ID=loom-h$i" "LOOM_SOCKET_IFNAME==$ifname" "UCX_NET_DEVICES=$ifname"
  [ -z "$delay_us" ] || echo "LOOM_TCP_TEST_DELAY_US=$delay_us"
}

run_in_host() {
  local i="$1"; shift
  [[ "$i" =~ ^[0-9]+$ ]] && ((i < hosts)) || die "host index '$i' out of range [0, $hosts)"
  # shellcheck disable=SC2046
  exec ip netns exec "$(ns_of "$i")" env $(host_env "$i") "$@"
}

run_loomrun() {
  local ranks="" port=29500 limit=300
  while (($#)); do
    case "$1" in
      -n) ranks="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --timeout) limit="$2"; shift 2 ;;
      *) break ;;
    esac
  done
  [ -n "$ranks" ] || die "loomrun mode needs -n RANKS_PER_HOST"
  (($#)) || die "loomrun mode needs a program"
  [ -x "$loomrun_bin" ] || die "loomrun not found at $loomrun_bin (build it, or pass --loomrun PATH)"
  if ip netns list | awk '{print $1}' | grep -qx "$(ns_of 0)"; then
    # A bed left by `up` with this --name: use it and leave it for `down`.
    for ((i = 0; i < hosts; i++)); do
      ip netns list | awk '{print $1}' | grep -qx "$(ns_of "$i")" || die "$(ns_of "$i") is missing from the existing bed"
    done
  else
    trap 'teardown' EXIT
    trap 'exit 130' INT TERM
    bring_up
  fi
  # Every host's loomrun must present the same job secret.
  local secret
  secret=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  local pids=() i
  for ((i = 0; i < hosts; i++)); do
    (
      # shellcheck disable=SC2046
      ip netns exec "$(ns_of "$i")" env $(host_env "$i") LOOM_JOB_SECRET="$secret" \
        timeout -k 5 "$limit" "$loomrun_bin" --nnodes "$hosts" --node-rank "$i" --master-addr "$subnet.1" \
        --master-port "$port" -n "$ranks" "$@" 2>&1 | sed -u "s/^/[h$i] /"
      exit "${PIPESTATUS[0]}"
    ) &
    pids+=($!)
  done
  local failed=0 status
  for ((i = 0; i < hosts; i++)); do
    if wait "${pids[$i]}"; then status=0; else status=$?; fi
    echo "[netns_testbed] host $i (loom-h$i): exit status $status"
    ((status == 0)) || failed=1
  done
  return "$failed"
}

cmd="$1"; shift
case "$cmd" in
  check)
    if why=$(can_make_namespaces); then exit 0; fi
    echo "netns_testbed: cannot create network namespaces: $why"; exit 77 ;;
  up)
    trap 'teardown' EXIT
    trap 'exit 130' INT TERM
    bring_up
    trap - EXIT INT TERM
    for ((i = 0; i < hosts; i++)); do echo "$(ns_of "$i") $subnet.$((i + 1)) $ifname"; done ;;
  down) teardown ;;
  run) (($# >= 2)) || die "usage: run I CMD..."; run_in_host "$@" ;;
  loomrun) run_loomrun "$@" ;;
  *) die "unknown command '$cmd' (up, down, run, loomrun, check)" ;;
esac
