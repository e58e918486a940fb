#!/usr/bin/env bash
# Issue 35 item 9: Slurm's usual pair at preemption, SIGUSR1 and SIGTERM 0.3 s later, reaching a train task whose
# ranks Open MPI's mpiexec starts (HSIPIPE_MPI=mpiexec). hsipipe writes its checkpoint and every rank exits 75, but
# mpiexec itself may then crash (Open MPI's bug: a segfault in PMIx_Finalize, exit 139) or abort (exit 1, a SIGTERM
# reaching it): jobs/lib.sh must still take it for a preemption, requeue the task, and the next attempt must resume
# and end with the results of an uninterrupted run. Runs under scripts/slurm_test_cluster.sh run.
#  1. the real pair, the real mpiexec: USR1 to the batch shell (scancel --signal=USR1 --batch), 0.3 s later TERM
#     to every process of the batch step (--full: what Slurm's preemption sends), mpiexec and the ranks included;
#  2. the pair (both to the batch shell, which forwards them) through an mpiexec that exits 139 once the ranks exited
#     75 (the crash made certain, whether or not the real one crashed in 1): requeued, resumed, the same results;
#  3. a launcher that crashes (139) on the signal with no checkpoint written since: a failure, never a requeue.
source "$(dirname "$0")/common.sh"
: "${SLURM_CONF:?run under scripts/slurm_test_cluster.sh run}"
need_commands synth decode folds stage train
# shellcheck disable=SC1091
source "$HSIPIPE_SOURCE_DIR/scripts/mpi_env.sh"  # the by-hand runs' Open MPI settings; sbatch passes them to the jobs
W=$HSIPIPE_SLURM_DIR/work-preempt-pair
rm -rf "$W"
mkdir -p "$W"
H=$HSIPIPE_BIN
T0=$SECONDS
REAL_MPIEXEC=$(command -v mpiexec) || skip "no mpiexec"

"$H" synth --out "$W/scene" --rows 30 --cols 30 --bands 20 --classes 4 --seed 5 >/dev/null
synth_ini "$W/pair.ini" "$W/scene" 3 "${HSIPIPE_TEST_EPOCHS:-12}"
OUT=$W/out
"$H" decode --config "$W/pair.ini" --out "$OUT/cache" >/dev/null || fail "decode"
"$H" folds --config "$W/pair.ini" --cache "$OUT/cache" --out "$OUT/folds.json" >/dev/null || fail "folds"
# The uninterrupted run, by hand: 2 ranks, fold 0.
"$REAL_MPIEXEC" -n 2 --oversubscribe "$H" train --config "$W/pair.ini" --cache "$OUT/cache" --folds "$OUT/folds.json" \
  --fold 0 --out "$W/reference" --quiet >"$W/reference.log" 2>&1 || { cat "$W/reference.log"; fail "the reference run"; }

# An mpiexec that runs the real one and, when the ranks exited 75 (checkpointed and stopped), crashes as Open MPI's
# does: SIGSEGV, status 139.
mkdir -p "$W/crash"
cat >"$W/crash/mpiexec" <<EOF
#!/bin/bash
trap 'kill -USR1 \$child 2>/dev/null' USR1
trap 'kill -USR1 \$child 2>/dev/null' TERM
"$REAL_MPIEXEC" "\$@" &
child=\$!
while :; do rc=0; wait \$child || rc=\$?; kill -0 \$child 2>/dev/null || break; done
[[ \$rc != 75 ]] || exec sh -c 'kill -SEGV \$\$'
exit \$rc
EOF
# A launcher that crashes on the signal, before any rank wrote a checkpoint.
mkdir -p "$W/nockpt"
cat >"$W/nockpt/mpiexec" <<'EOF'
#!/bin/bash
trap 'exec sh -c "kill -SEGV \$\$"' USR1 TERM
touch "$HSIPIPE_OUT/started"
sleep 60 &
wait
EOF
chmod +x "$W/crash/mpiexec" "$W/nockpt/mpiexec"

# train_task NAME PATH_PREFIX: submits jobs/train.sbatch for fold 0 of a results root of its own (the cache and folds
# of $OUT), 2 tasks, ranks started by mpiexec (the first one on PATH_PREFIX:$PATH); prints the job id.
train_task() {
  local o=$W/$1
  mkdir -p "$o"
  PATH=$2:$PATH HSIPIPE_CACHE=$OUT/cache HSIPIPE_FOLDS_FILE=$OUT/folds.json HSIPIPE_ROOT=$HSIPIPE_SOURCE_DIR HSIPIPE_CONFIG=$W/pair.ini HSIPIPE_OUT=$o HSIPIPE_K=3 HSIPIPE_EXE=$H \
    HSIPIPE_MPI=mpiexec HSIPIPE_FOLD=0 HSIPIPE_CHECKPOINT_EVERY=0 HSIPIPE_LOCAL_DIR=$W/local/$1 HSIPIPE_TEST_STEP_DELAY_MS=20 \
    sbatch --parsable -n 2 --job-name="pair-$1" -o "$W/$1.out" "$HSIPIPE_SOURCE_DIR/jobs/train.sbatch"
}
# send_pair JOBID [--full|--batch]: SIGUSR1 to the batch shell, SIGTERM 0.3 s later to every process of the batch
# step (--full, the default: what Slurm's preemption does) or to the batch shell only (--batch)
send_pair() {
  scancel --signal=USR1 --batch "$1"
  sleep 0.3
  scancel --signal=TERM "${2:---full}" "$1" 2>/dev/null || true  # (a job that failed on the first has ended)
}
# preempt_when_training JOBID LOG [--full|--batch]: once LOG shows fold 0 training, sends the pair
preempt_when_training() {
  while ! grep -q "^fold 0 epoch 1/" "$2" 2>/dev/null; do
    ((SECONDS - T0 < 400)) || fail "job $1 never reached its first epoch ($(cat "$2" 2>/dev/null))"
    [[ $(job_states "$1") =~ COMPLETED|FAILED|CANCELLED ]] && { cat "$2"; fail "job $1 ended before it could be preempted"; }
    sleep 0.2
  done
  send_pair "$1" "${3:---full}"
  echo "sent SIGUSR1, then SIGTERM (${3:---full}) 0.3 s later, to job $1"
}
# check_requeued NAME JOBID: the task requeued once, resumed from its checkpoint, and its fold's results equal the
# uninterrupted run's
check_requeued() {
  local log=$W/$1.out run=$W/$1/run/fold-0
  cat "$log"
  [[ $(job_states "$2") == COMPLETED ]] || fail "$1: the task ended $(job_states "$2"), not requeued and completed"
  [[ $(job_restarts "$2") == 1 ]] || fail "$1: restarted $(job_restarts "$2") times, not once"
  grep -Eq "^fold 0 epoch [0-9]+ step [0-9]+/[0-9]+: signal [0-9]+ received; checkpoint written, exiting for requeue" "$log" \
    || fail "$1: hsipipe did not checkpoint on the signal"
  grep -q "requeueing $2" "$log" || fail "$1: the task did not requeue itself"
  grep -q "resumed from checkpoint $run/checkpoint.pt at fold 0" "$log" || fail "$1: the second attempt did not resume"
  cmp "$run/predictions.csv" "$W/reference/fold-0/predictions.csv" || fail "$1: predictions differ from the uninterrupted run's"
  "$PY" - "$run/metrics.json" "$W/reference/fold-0/metrics.json" <<'PYEOF' || fail "$1: metrics differ from the uninterrupted run's"
import json, sys
a, b = (json.load(open(p))["metrics"] for p in sys.argv[1:3])
for k in ("oa", "aa", "kappa"):
    print(k, a[k], b[k])
    if a[k] != b[k]:
        sys.exit(k + " differs")
PYEOF
}

# ---------------------------------------------------------------- 1. the real mpiexec
j1=$(train_task real "$W/none")
preempt_when_training "$j1" "$W/real.out"
wait_jobs 400 "$j1"
check_requeued real "$j1"
status=$(sed -n 's/.*\] mpiexec exited with status \([0-9]*\), but a checkpoint was written.*/\1/p' "$W/real.out" | head -1)
ok "the real pair under Open MPI's mpiexec: requeued, resumed, the uninterrupted run's results (mpiexec's status: ${status:-75})"

# ---------------------------------------------------------------- 2. mpiexec crashing after the checkpoint
j2=$(train_task crash "$W/crash")
preempt_when_training "$j2" "$W/crash.out" --batch
wait_jobs 400 "$j2"
check_requeued crash "$j2"
grep -q "mpiexec exited with status 139, but a checkpoint was written after SIGUSR1" "$W/crash.out" \
  || fail "lib.sh did not recognise the clean stop behind mpiexec's 139"
ok "mpiexec exiting 139 after the ranks checkpointed: requeued, resumed, the uninterrupted run's results"

# ---------------------------------------------------------------- 3. a crash with no new checkpoint
j3=$(train_task nockpt "$W/nockpt")
for _ in $(seq 1 240); do [[ -e $W/nockpt/started ]] && break; sleep 0.5; done
[[ -e $W/nockpt/started ]] || fail "the no-checkpoint launcher did not start ($(cat "$W/nockpt.out"))"
send_pair "$j3"
wait_jobs 120 "$j3"
cat "$W/nockpt.out"
[[ $(job_states "$j3") == FAILED ]] || fail "a launcher crash without a new checkpoint: $(job_states "$j3"), not FAILED"
! grep -q "requeueing" "$W/nockpt.out" || fail "a launcher crash without a new checkpoint was taken for a preemption"
grep -q "error: hsipipe exited with status 139" "$W/nockpt.out" || fail "the failure's status is not in the log"
ok "a launcher crash (139) without a new checkpoint: FAILED, not requeued"
echo "PASS ($((SECONDS - T0)) s)"
