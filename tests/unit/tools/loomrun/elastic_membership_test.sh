#!/bin/sh
# Elastic membership with local "nodes": several loomrun agents on this
# machine, each `--nnodes MIN:MAX -n 1`, meeting at one --rdzv-endpoint.
#  1. leave and join: three agents start train_demo (3 ranks); once it has
#     checkpointed, one agent is killed with SIGKILL; the other two meet in a
#     new round and resume on 2 ranks from the checkpoint; then a fourth
#     agent joins, the job restarts on 3 ranks, resumes again and finishes.
#  2. fewer than MIN: a lone agent of --nnodes 2:3 gets a clear error naming
#     the counts within its join timeout; and two agents of --nnodes 2:2 lose
#     one: the survivor gets the same error instead of running on alone.
# With TESTBED (scripts/netns_testbed.sh), part 1 runs across emulated hosts
# instead: agent a, b, c, d in network namespaces h0..h3, meeting at h0's
# 10.77.0.1; it needs root and skips with the reason otherwise.
#
# usage: elastic_membership_test.sh LOOMRUN TRAIN_DEMO [TESTBED]
set -u
loomrun=$1
demo=$2
testbed=${3:-}

data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: Fashion-MNIST is not installed in $data (Debian package dataset-fashion-mnist)"
  exit 77
fi

rdzv_host=127.0.0.1
bed=""
on_host() { shift; "$@"; }  # on_host INDEX CMD...: where agent INDEX runs CMD
if [ -n "$testbed" ]; then
  why=$(bash "$testbed" check) || { echo "SKIP: the emulated hosts need network namespaces: $why"; exit 77; }
  bed="el$$"
  bash "$testbed" --hosts 4 --name "$bed" up >/dev/null || { echo "FAIL: netns_testbed.sh up failed"; exit 1; }
  rdzv_host=10.77.0.1
  on_host() { i=$1; shift; bash "$testbed" --hosts 4 --name "$bed" run "$i" "$@"; }
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/elastic_membership.XXXXXX")
pids=""
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null; done
  [ -z "$bed" ] || bash "$testbed" --hosts 4 --name "$bed" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log; do echo "--- $log"; cat "$log"; done
  exit 1
}
# A port for the rendezvous: the test's pid spreads parallel ctest runs.
port=$((20000 + $$ % 20000))

export LOOM_JOB_SECRET=5ec2e75ec2e75ec2e75ec2e75ec2e75e LOOM_DETERMINISTIC=1 LOOM_TIMEOUT=30 OPENBLAS_NUM_THREADS=1
epochs=16
steps=$((epochs * 16))  # 1920 images in global batches of 120 (divisible by 2 and 3 ranks): 16 steps an epoch
demo_args="--epochs $epochs --train-limit 1920 --batch 120 --data-dir $data --checkpoint-dir $work/ckpt --checkpoint-every 4"
agent() {  # agent NAME HOST_INDEX MIN:MAX [more loomrun options]
  name=$1 index=$2 nnodes=$3
  shift 3
  on_host "$index" "$loomrun" --nnodes "$nnodes" -n 1 --rdzv-endpoint "$rdzv_host:$port" --rdzv-id elastic-test \
    --rdzv-conf last_call_timeout=1,join_timeout=20 --max-restarts 3 --kill-timeout 2 "$@" \
    "$demo" $demo_args >"$work/$name.log" 2>&1
  echo $? >"$work/$name.rc"
}
latest_step() {  # the step of the newest checkpoint, 0 when none
  last=$(ls "$work/ckpt" 2>/dev/null | grep '^checkpoint-.*\.ckpt$' | sort | tail -n 1)
  [ -n "$last" ] || { echo 0; return; }
  echo "$last" | sed 's/^checkpoint-0*\([0-9][0-9]*\)\.ckpt$/\1/'
}
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  limit=$1 what=$2
  shift 2
  i=0
  while ! "$@"; do
    i=$((i + 1))
    [ $i -le $((limit * 20)) ] || fail "timed out after $limit s waiting for $what"
    sleep 0.05
  done
}
step_at_least() { [ "$(latest_step)" -ge "$1" ]; }
logs_show() { cat "$work"/*.log | grep -q "$1"; }

start=$(date +%s)
# --- 1. leave, then join ------------------------------------------------------
# Agent a first: it hosts the rendezvous, and c, the one killed, must not.
agent a 0 2:3 & pids="$pids $!"
wait_for 10 "agent a to host the rendezvous" grep -qs "hosting rendezvous" "$work/a.log"
agent b 1 2:3 & pids="$pids $!"
agent c 2 2:3 & agent_c=$!
pids="$pids $agent_c"
wait_for 30 "the 3-rank round to checkpoint step 12" step_at_least 12
# SIGKILL the subshell's loomrun (the subshell itself waits on it; the
# test bed's `run` execs into loomrun, so it is the child either way).
kill -9 $(pgrep -P "$agent_c" -x loomrun) || fail "could not find agent c's loomrun"
wait_for 30 "a 2-rank round resuming from the checkpoint" logs_show "the checkpoint was written by 3 ranks; continuing on 2"
resumed_at=$(cat "$work"/*.log | grep -m 1 "^train_demo: resumed from" | sed 's/.*: step \([0-9]*\),.*/\1/')
wait_for 30 "the 2-rank round to write its own checkpoint" step_at_least $((resumed_at + 8))
agent d 3 2:3 & pids="$pids $!"
wait_for 30 "a 3-rank round resuming after agent d joined" logs_show "the checkpoint was written by 2 ranks; continuing on 3"
for name in a b d; do
  wait_for 60 "agent $name to finish" test -f "$work/$name.rc"
  [ "$(cat "$work/$name.rc")" = 0 ] || fail "agent $name exited with status $(cat "$work/$name.rc")"
done
grep -q "a node left" "$work/a.log" || fail "agent a did not report the node that left"
grep -q "a node joined" "$work/a.log" || fail "agent a did not report the node that joined"
grep -q "rendezvous round 1: .*WORLD_SIZE 2" "$work/a.log" || fail "agent a's round 1 was not 2 ranks"
grep -q "rendezvous round 2: .*WORLD_SIZE 3" "$work/a.log" || fail "agent a's round 2 was not 3 ranks"
logs_show "done after $steps steps" || fail "the job did not finish all $steps steps"
rounds=$(cat "$work"/*.log | grep -c "^train_demo: resumed from")
grep -h "rendezvous round\|a node \|continuing on\|resumed from\|done after" "$work/a.log"
where=${bed:+ across emulated hosts 10.77.0.1-4}
echo "leave and join$where: 3 -> 2 ranks (resumed at step $resumed_at) -> 3 ranks; finished $steps steps; $rounds resumes"

if [ -n "$bed" ]; then
  echo "PASS: elastic leave and join across emulated hosts in $(($(date +%s) - start)) s"
  exit 0
fi
# --- 2. fewer than MIN ----------------------------------------------------------
port=$((port + 1))
t0=$(date +%s)
"$loomrun" --nnodes 2:3 -n 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id lone --rdzv-timeout 2 \
  true >"$work/lone.log" 2>&1 && fail "a lone agent of --nnodes 2:3 succeeded"
took=$(($(date +%s) - t0))
grep -q "only 1 of the minimum 2 nodes joined rendezvous 'lone' within the join timeout of 2 s (--nnodes 2:3)" \
  "$work/lone.log" || fail "no clear error for the lone agent"
[ $took -le 5 ] || fail "the lone agent took $took s to give up (join timeout 2 s)"
echo "fewer than MIN: $(grep 'only 1' "$work/lone.log") after $took s"

port=$((port + 1))
rm -rf "$work/ckpt"
"$loomrun" --nnodes 2:2 -n 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id survivor --rdzv-timeout 3 \
  --max-restarts 1 --kill-timeout 1 sh -c 'sleep 30' >"$work/survivor.log" 2>&1 &
survivor=$!
pids="$pids $survivor"
wait_for 10 "the survivor to host the rendezvous" grep -qs "hosting rendezvous" "$work/survivor.log"
"$loomrun" --nnodes 2:2 -n 1 --rdzv-endpoint "127.0.0.1:$port" --rdzv-id survivor --rdzv-timeout 3 \
  --max-restarts 1 sh -c 'sleep 30' >"$work/leaver.log" 2>&1 &
leaver=$!
pids="$pids $leaver"
wait_for 10 "the 2-node round" logs_show "rendezvous round 0: node 1 of 2"
kill -9 $leaver
t0=$(date +%s)
wait "$survivor"
rc=$?
took=$(($(date +%s) - t0))
[ $rc = 1 ] || fail "the survivor exited with $rc, expected 1"
grep -q "only 1 of the minimum 2 nodes joined rendezvous 'survivor'" "$work/survivor.log" ||
  fail "no clear error for the survivor"
[ $took -le 8 ] || fail "the survivor took $took s to give up (join timeout 3 s)"
echo "fewer than MIN left: $(grep 'only 1' "$work/survivor.log") after $took s"
echo "PASS: elastic membership in $(($(date +%s) - start)) s"
