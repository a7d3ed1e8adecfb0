#!/bin/bash
# A perf tool started by another project's launcher is ONE job of all its
# processes: exactly one table, listing ranks 0..N-1 (one per process), and a
# clean exit. Skips (77, saying why) when the launcher is not installed.
#
# Usage: check_launchers.sh MODE TOOL [ARGS...]
#   mpirun    Open MPI's mpirun -np 2
#   mpich     MPICH's mpiexec.hydra -n 2
#   slurm     two processes with srun's variables (SLURM_PROCID, ...), started here
#   slurm-2nodes  the same as if on two nodes (one task each): the rendezvous
#             file goes to $HOME/.loom/rendezvous (a scratch HOME here)
#   torchrun  python3 -m torch.distributed.run --standalone --nproc_per_node 2 --no_python
#   bad-env   a partial environment (RANK without WORLD_SIZE): exit 1 naming WORLD_SIZE
# With PROBE=1 the program is launch_probe (a Loom program without MPI): each
# process prints "rank R of N ... sum S, expected S"; the check is then that
# every rank 0..N-1 printed, in a job of N, with the right sum.
set -u
mode=$1
shift
n=2
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT

case $mode in
  mpirun)
    command -v mpirun > /dev/null || { echo "SKIP: mpirun is not installed"; exit 77; }
    mpirun --version 2>&1 | grep -q "Open MPI" || { echo "SKIP: mpirun is not Open MPI's"; exit 77; }
    root=()
    [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
    timeout 120 mpirun "${root[@]}" --oversubscribe --bind-to none -np $n "$@" > "$out" 2>&1
    rc=$?
    ;;
  mpich)
    hydra=$(command -v mpiexec.hydra || command -v mpiexec.mpich || true)
    [ -n "$hydra" ] || { echo "SKIP: MPICH (mpiexec.hydra) is not installed"; exit 77; }
    timeout 120 "$hydra" -n $n "$@" > "$out" 2>&1
    rc=$?
    ;;
  slurm | slurm-2nodes)
    # What srun exports to each task of a one-node, two-task step; both are
    # children of this shell, as srun's tasks are of one slurmstepd.
    export SLURM_JOB_ID=$$ SLURM_STEP_ID=0 SLURM_NTASKS=$n SLURM_STEP_NUM_TASKS=$n SLURM_NNODES=1 SLURM_STEP_NUM_NODES=1
    if [ "$mode" = slurm-2nodes ]; then
      # Two nodes of one task each, both on loopback; HOME stands for the
      # home directory the nodes share.
      export SLURM_NNODES=$n SLURM_STEP_NUM_NODES=$n LOOM_BOOTSTRAP_ADDR=127.0.0.1 HOME=$(mktemp -d)
      scratch_home=$HOME
    fi
    pids=()
    for ((r = 0; r < n; r++)); do
      SLURM_PROCID=$r SLURM_LOCALID=$([ "$mode" = slurm ] && echo $r || echo 0) "$@" > "$out.$r" 2>&1 &
      pids+=($!)
    done
    # A rank that never finds the other must not hang the test; the
    # watchdog ends its own sleep when it is stopped.
    ( sleep 100 & s=$!; trap 'kill $s; exit 0' TERM; wait $s; kill "${pids[@]}" ) > /dev/null 2>&1 &
    watchdog=$!
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    kill $watchdog 2> /dev/null
    cat "$out".* > "$out"
    if [ -n "${scratch_home:-}" ]; then
      # The directory was made private, and rank 0 removed its file at exit.
      [ "$(stat -c %a "$scratch_home/.loom/rendezvous")" = 700 ] ||
        { echo "check_launchers.sh: $scratch_home/.loom/rendezvous is not 0700"; rc=1; }
      [ -z "$(ls -A "$scratch_home/.loom/rendezvous")" ] ||
        { echo "check_launchers.sh: rendezvous file left behind"; rc=1; }
      rm -rf "$scratch_home"
    fi
    ;;
  torchrun)
    py=${LOOM_TORCH_PYTHON:-$(dirname "$0")/../../../.venv-torch/bin/python}
    "$py" -c "import torch.distributed.run" 2> /dev/null ||
      { echo "SKIP: torch (torch.distributed.run) is not installed for $py"; exit 77; }
    logs=$(mktemp -d)
    timeout 120 "$py" -m torch.distributed.run --standalone --nproc_per_node $n \
      --log_dir "$logs" --monitor_interval 0.2 --no_python "$@" > "$out" 2>&1
    rc=$?
    rm -rf "$logs"
    ;;
  bad-env)
    env -u WORLD_SIZE RANK=0 "$@" > "$out" 2>&1
    rc=$?
    cat "$out"
    [ $rc = 1 ] || { echo "check_launchers.sh: exit $rc with RANK but no WORLD_SIZE, expected 1"; exit 1; }
    grep -q "WORLD_SIZE" "$out" || { echo "check_launchers.sh: the error does not name WORLD_SIZE"; exit 1; }
    ! grep -q "Collective test concluded" "$out" || { echo "check_launchers.sh: ran a job anyway"; exit 1; }
    exit 0
    ;;
  *) echo "check_launchers.sh: unknown mode $mode"; exit 2 ;;
esac

cat "$out"
[ $rc = 0 ] || { echo "check_launchers.sh: $mode: exit $rc"; exit 1; }
if [ "${PROBE:-0}" = 1 ]; then
  ranks=$(grep -E "rank [0-9]+ of $n \(" "$out" | sed -E 's/.*rank ([0-9]+) of.*/\1/' | sort -n | tr '\n' ' ')
  expected=$(seq 0 $((n - 1)) | tr '\n' ' ')
  [ "$ranks" = "$expected" ] || { echo "check_launchers.sh: $mode: ranks '$ranks' in jobs of $n, expected '$expected'"; exit 1; }
  echo "check_launchers.sh: $mode: one job of $n ranks (program without MPI)"
  exit 0
fi
# torchrun prefixes each line with "[default<rank>]:".
sed -E 's/^\[default[0-9]+\]://' "$out" > "$out.plain"
tables=$(grep -c "# Collective test concluded" "$out.plain")
[ "$tables" = 1 ] || { echo "check_launchers.sh: $mode: $tables tables, expected one job's one table"; exit 1; }
ranks=$(grep -E '^# +Rank +[0-9]+ ' "$out.plain" | awk '{print $3}' | sort -n | tr '\n' ' ')
expected=$(seq 0 $((n - 1)) | tr '\n' ' ')
[ "$ranks" = "$expected" ] || { echo "check_launchers.sh: $mode: ranks listed '$ranks', expected '$expected'"; exit 1; }
echo "check_launchers.sh: $mode: one job of $n ranks"
