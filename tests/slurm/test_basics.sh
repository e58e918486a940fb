#!/usr/bin/env bash
# The test cluster itself and the chain mechanics, without hsipipe: runs under
# scripts/slurm_test_cluster.sh run (SLURM_CONF and HSIPIPE_SLURM_DIR set). A batch job, an MPI job
# through srun --mpi=pmix (the default MPI plugin of config/site.env), a dependency chain that stops at
# a failing job, and scripts/submit.sh --dry-run.
source "$(dirname "$0")/common.sh"
: "${SLURM_CONF:?run under scripts/slurm_test_cluster.sh run}"
W=$HSIPIPE_SLURM_DIR/work-basics
mkdir -p "$W"

wait_done() {  # wait_done JOBID...: until none is PENDING/RUNNING/...; 120 s at most
  local id state
  for _ in $(seq 1 240); do
    local busy=0
    for id in "$@"; do
      state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | sort -u | tr '\n' ' ')
      [[ $state =~ PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUE|SUSPENDED ]] && busy=1
    done
    ((busy)) || return 0
    sleep 0.5
  done
  fail "jobs $* still running after 120 s"
}
job_state() { scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }

# A batch job.
j1=$(sbatch --parsable -o "$W/j1.out" --wrap 'echo "hello from $SLURM_JOB_ID on $(hostname -s)"')
wait_done "$j1"
[[ $(job_state "$j1") == COMPLETED ]] || fail "batch job: $(job_state "$j1")"
grep -q "hello from $j1" "$W/j1.out" || fail "batch job output: $(cat "$W/j1.out")"
ok "batch job"

# srun's PMIx plugin starts the tasks as PMIx clients (the MPI start-up itself is exercised by the
# 2-rank decode of the chain test).
out=$(srun --mpi=pmix -n 2 bash -c 'echo "rank $PMIX_RANK of $SLURM_NTASKS"' | sort)
[[ $out == $'rank 0 of 2\nrank 1 of 2' ]] || fail "srun --mpi=pmix: $out"
ok "srun --mpi=pmix gives PMIx ranks"

# A dependency chain: b waits for a, c for b; a failing job cancels its dependents.
a=$(sbatch --parsable -o "$W/a.out" --wrap 'sleep 1; date +%s.%N > '"$W"'/a.t')
b=$(sbatch --parsable -o "$W/b.out" --dependency="afterok:$a" --kill-on-invalid-dep=yes --wrap 'date +%s.%N > '"$W"'/b.t')
f=$(sbatch --parsable -o "$W/f.out" --dependency="afterok:$b" --kill-on-invalid-dep=yes --wrap 'exit 3')
g=$(sbatch --parsable -o "$W/g.out" --dependency="afterok:$f" --kill-on-invalid-dep=yes --wrap 'touch '"$W"'/g.ran')
wait_done "$a" "$b" "$f" "$g"
[[ $(job_state "$a") == COMPLETED && $(job_state "$b") == COMPLETED ]] || fail "chain: a $(job_state "$a"), b $(job_state "$b")"
"$PY" -c "import sys; a, b = (float(open(p).read()) for p in sys.argv[1:]); sys.exit(0 if b >= a else 1)" "$W/a.t" "$W/b.t" \
  || fail "b ran before a finished"
[[ $(job_state "$f") == FAILED ]] || fail "failing job: $(job_state "$f")"
[[ $(job_state "$g") == CANCELLED && ! -e $W/g.ran ]] || fail "dependent of a failed job: $(job_state "$g")"
ok "afterok chain, and a failure cancels its dependents"

# submit.sh --dry-run: the four sbatch lines of the chain, each depending on the previous one.
printf '[folds]\nk = 4\n' >"$W/x.ini"
out=$(HSIPIPE_SHARED_DIR=$W/shared "$HSIPIPE_SOURCE_DIR/scripts/submit.sh" --dry-run "$W/x.ini")
echo "$out"
[[ ! -e $W/shared ]] || fail "--dry-run created files"
[[ $(grep -c '^JOB_[A-Z]*=$(sbatch ' <<<"$out") == 4 ]] || fail "--dry-run: not 4 sbatch lines"
grep -q 'JOB_TRAIN=.*--dependency=afterok:$JOB_FOLDS .*--array=0-3 .*--requeue --signal=B:USR1@' <<<"$out" \
  || fail "--dry-run: train line"
grep -q 'JOB_REPORT=.*--dependency=afterok:$JOB_TRAIN ' <<<"$out" || fail "--dry-run: report line"
out=$(HSIPIPE_SHARED_DIR=$W/shared HSIPIPE_PARTITION=gpu HSIPIPE_GPUS_PER_TASK=1 HSIPIPE_GPU_TYPE=a100 \
  "$HSIPIPE_SOURCE_DIR/scripts/submit.sh" --dry-run --fold 2 "$W/x.ini")
grep -q -- '--partition=gpu .*--array=2 .*--gpus-per-task=a100:1' <<<"$out" || fail "--dry-run with site settings: $out"
ok "submit.sh --dry-run"

# jobs/lib.sh's preemption path when srun --kill-on-bad-exit ends a rank: every rank exits 75 after the
# checkpoint, but the first to do so makes srun end the others, and srun reports their 143. The ranks here are
# a script doing what hsipipe train's ranks do on SIGUSR1, with task 1 deliberately late (the race made
# certain); srun, Slurm's signal delivery and requeue, and lib.sh are the real ones. The job must requeue.
cat >"$W/ranks.sh" <<'EOF'
#!/bin/bash
[[ ${SLURM_RESTART_COUNT:-0} == 0 ]] || exit 0  # the requeued attempt: "resumed and finished"
stop=0
trap 'stop=1' USR1
touch "$HSIPIPE_OUT/started.$SLURM_PROCID"
while ((!stop)); do sleep 0.1; done
if [[ $SLURM_PROCID == 0 ]]; then
  echo checkpoint >"$HSIPIPE_CHECKPOINTS.tmp" && mv "$HSIPIPE_CHECKPOINTS.tmp" "$HSIPIPE_CHECKPOINTS"
  exit 75
fi
# Task 1 is still busy when srun ends it. `exec`: the task is the sleep itself, so SIGTERM ends it (143).
# With `sleep 30; exit 75`, bash could reap the killed sleep and exit 75 before its own SIGTERM came (seen
# once: srun then reports 75, another path of lib.sh than the one this test is about).
exec sleep 30
EOF
chmod +x "$W/ranks.sh"
cat >"$W/preempt.sbatch" <<EOF
#!/bin/bash
#SBATCH --requeue
#SBATCH --open-mode=append
source "$HSIPIPE_SOURCE_DIR/jobs/lib.sh"
hsipipe_trap_preemption
export HSIPIPE_CHECKPOINTS=\$HSIPIPE_OUT/checkpoint.pt
hsipipe_run_preemptible
EOF
mkdir -p "$W/p"
p=$(HSIPIPE_ROOT=$HSIPIPE_SOURCE_DIR HSIPIPE_EXE=$W/ranks.sh HSIPIPE_CONFIG=/dev/null HSIPIPE_OUT=$W/p \
  sbatch --parsable -n 2 -o "$W/p.out" "$W/preempt.sbatch")
for _ in $(seq 1 120); do [[ -e $W/p/started.0 && -e $W/p/started.1 ]] && break; sleep 0.5; done
[[ -e $W/p/started.0 && -e $W/p/started.1 ]] || fail "preemption job: the 2 tasks did not start ($(cat "$W/p.out"))"
scancel --signal=USR1 --batch "$p"
wait_done "$p"
cat "$W/p.out"
[[ $(job_state "$p") == COMPLETED ]] || fail "preemption job with a rank ended by srun: $(job_state "$p")"
grep -Eq "srun exited with status 1[0-9][0-9], but a checkpoint was written after SIGUSR1" "$W/p.out" \
  || fail "lib.sh did not recognise the clean stop"
grep -q "requeueing $p" "$W/p.out" || fail "the job did not requeue itself"
[[ $(scontrol show job "$p" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p') == 1 ]] || fail "not exactly one restart"
ok "preempted ranks that srun ended after the first exited 75: requeued, not failed"

# The signal sent to the ranks rather than to the batch shell (`scancel --signal=USR1` without --batch): this shell
# never hears of it. Task 0 checkpoints and exits 75; task 1 has no handler, so SIGUSR1 kills it (138), unless srun
# ended it first (143). lib.sh reads srun's per-task statuses: a preemption, the job requeues. Then the same
# statuses' other side: task 0 writes a checkpoint and FAILS (exit 1), srun ends task 1 (143), no signal at all: the
# job must fail, not requeue.
cat >"$W/ranks2.sh" <<'EOF'
#!/bin/bash
[[ ${SLURM_RESTART_COUNT:-0} == 0 ]] || exit 0
touch "$HSIPIPE_OUT/started.$SLURM_PROCID"
[[ $SLURM_PROCID == 0 ]] || exec sleep 30
ckpt() { echo checkpoint >"$HSIPIPE_CHECKPOINTS.tmp" && mv "$HSIPIPE_CHECKPOINTS.tmp" "$HSIPIPE_CHECKPOINTS"; }
if [[ $MODE == error ]]; then sleep 1; ckpt; exit 1; fi
stop=0
trap 'stop=1' USR1
while ((!stop)); do sleep 0.1; done
ckpt
exit 75
EOF
chmod +x "$W/ranks2.sh"
for mode in mix error; do
  mkdir -p "$W/$mode"
  q=$(MODE=$mode HSIPIPE_ROOT=$HSIPIPE_SOURCE_DIR HSIPIPE_EXE=$W/ranks2.sh HSIPIPE_CONFIG=/dev/null HSIPIPE_OUT=$W/$mode \
    sbatch --parsable -n 2 -o "$W/$mode.out" "$W/preempt.sbatch")
  for _ in $(seq 1 120); do [[ -e $W/$mode/started.0 && -e $W/$mode/started.1 ]] && break; sleep 0.5; done
  [[ $mode == error ]] || scancel --signal=USR1 "$q"
  wait_done "$q"
  cat "$W/$mode.out"
  if [[ $mode == mix ]]; then
    [[ $(job_state "$q") == COMPLETED && $(scontrol show job "$q" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p') == 1 ]] \
      || fail "ranks signalled, one exiting 75 and one killed: $(job_state "$q"), not requeued once"
    grep -Eq "srun exited with status 1[0-9][0-9], but a checkpoint was written after the launch" "$W/$mode.out" \
      || fail "lib.sh did not recognise the preemption of the ranks"
  else
    [[ $(job_state "$q") == FAILED ]] || fail "a rank failing after a checkpoint, the other ended by srun: $(job_state "$q")"
    ! grep -q "requeueing" "$W/$mode.out" || fail "a failed rank was taken for a preemption"
  fi
done
ok "SIGUSR1 to the ranks (not the batch shell): 75 + a killed rank requeues; a failed rank + a checkpoint does not"
echo PASS
