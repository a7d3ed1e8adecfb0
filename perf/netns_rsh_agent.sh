#!/usr/bin/env bash
# Open MPI's "ssh" for the emulated hosts of scripts/netns_testbed.sh: mpirun
# (started inside host 0's namespace) calls `AGENT [options] HOST COMMAND...`
# to start its daemon on HOST; HOST is a test-bed address 10.77.0.<i+1>, and
# the daemon runs in that host's namespace. LOOM_TESTBED_NAME names the bed.
set -euo pipefail
while [[ $# -gt 0 && $1 == -* ]]; do shift; done   # ssh-style options mpirun may pass
host="$1"; shift
[[ $host =~ ^10\.77\.0\.([0-9]+)$ ]] || { echo "netns_rsh_agent: unknown host '$host'" >&2; exit 255; }
ns="loom-${LOOM_TESTBED_NAME:?set LOOM_TESTBED_NAME}-h$((BASH_REMATCH[1] - 1))"
# ssh hands the remote command to a shell as one string.
exec ip netns exec "$ns" /bin/sh -c "$*"
