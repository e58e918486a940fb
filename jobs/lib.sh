# jobs/lib.sh: sourced by every jobs/*.sbatch (not run by itself). Reads the site settings, derives the
# paths of one run, and provides the launch, staging and preemption helpers.
#
# Inputs (exported by scripts/submit.sh; set them yourself to sbatch a script by hand):
#   HSIPIPE_ROOT    repository root (default: the submit directory)
#   HSIPIPE_CONFIG  the hsipipe INI file of the run (scenes, [decode], [folds], [train] options)
#   HSIPIPE_OUT     results root of the run on the shared file system
#   HSIPIPE_K       number of folds
#   HSIPIPE_SITE    site settings file (default config/site.env)
# Layout of HSIPIPE_OUT: cache/ (the decoded cache), folds.json, run/ (fold-I/ per array task,
# summary.json from report), run-all/ (train_all), logs/ (one file per job or array task).
set -euo pipefail

: "${HSIPIPE_ROOT:=${SLURM_SUBMIT_DIR:-$PWD}}"
: "${HSIPIPE_SITE:=$HSIPIPE_ROOT/config/site.env}"
source "$HSIPIPE_ROOT/jobs/ini.sh"  # ini_value, ini_scenes
# shellcheck disable=SC1090
source "$HSIPIPE_SITE"
: "${HSIPIPE_CONFIG:?HSIPIPE_CONFIG (the INI file of the run) is not set; submit with scripts/submit.sh}"
: "${HSIPIPE_OUT:?HSIPIPE_OUT (the results root of the run) is not set; submit with scripts/submit.sh}"
: "${HSIPIPE_K:=5}"
: "${HSIPIPE_RUN_NAME:=$(basename "$HSIPIPE_OUT")}"
HSIPIPE_CACHE=${HSIPIPE_CACHE:-$HSIPIPE_OUT/cache}
HSIPIPE_FOLDS_FILE=${HSIPIPE_FOLDS_FILE:-$HSIPIPE_OUT/folds.json}
HSIPIPE_RUN_DIR=${HSIPIPE_RUN_DIR:-$HSIPIPE_OUT/run}
HSIPIPE_RUN_ALL_DIR=${HSIPIPE_RUN_ALL_DIR:-$HSIPIPE_OUT/run-all}
export HSIPIPE_LOCAL_DIR  # (a site file's value) for jobs/on_node.sh on every node
HSIPIPE_ON_NODE=$HSIPIPE_ROOT/jobs/on_node.sh
# Stands for the node-local directory in the arguments of hsipipe_launch, hsipipe_once and
# hsipipe_run_preemptible: jobs/on_node.sh puts in each node's own, resolved on that node.
HSIPIPE_NODE_LOCAL='{node-local}'
case $HSIPIPE_EXE in
  /*) HSIPIPE_EXE_PATH=$HSIPIPE_EXE ;;
  *) HSIPIPE_EXE_PATH=$HSIPIPE_ROOT/$HSIPIPE_EXE ;;
esac

hsipipe_log() { echo "[hsipipe ${SLURM_JOB_NAME:-job} ${SLURM_JOB_ID:-?} $(date -u +%H:%M:%S)] $*"; }

if [[ -n $HSIPIPE_MODULES ]]; then
  hsipipe_log "site modules: $HSIPIPE_MODULES"
  eval "$HSIPIPE_MODULES"
fi
[[ -x $HSIPIPE_EXE_PATH ]] || { hsipipe_log "error: $HSIPIPE_EXE_PATH is not an executable (HSIPIPE_EXE)"; exit 2; }

hsipipe_log "node ${SLURMD_NODENAME:-$(hostname -s)} (host $(hostname -s)), job ${SLURM_JOB_ID:-?}${SLURM_ARRAY_TASK_ID:+ array task $SLURM_ARRAY_JOB_ID/$SLURM_ARRAY_TASK_ID}," \
  "${SLURM_NTASKS:-1} tasks on ${SLURM_JOB_NUM_NODES:-1} node(s), attempt $(( ${SLURM_RESTART_COUNT:-0} + 1 ))"

# Node-local root of the node this runs on (the batch shell's: the job's first node).
hsipipe_local_root() { "$HSIPIPE_ON_NODE" --local-root; }

# The launcher of the MPI ranks of this job (all its tasks): srun --mpi=PLUGIN, or the MPI library's
# mpiexec inside the allocation.
# Each rank gets the job's --cpus-per-task cores for its threads (OMP_NUM_THREADS): srun does not inherit
# it from sbatch since Slurm 22.05, and Open MPI's mpiexec binds a rank to one core unless told PE=N.
hsipipe_launcher() {
  local cpus=${SLURM_CPUS_PER_TASK:-1}
  case $HSIPIPE_MPI in
    mpiexec)
      HSIPIPE_LAUNCH=(mpiexec -n "${SLURM_NTASKS:-1}")
      [[ $cpus -le 1 ]] || HSIPIPE_LAUNCH+=(--map-by "slot:PE=$cpus")
      ;;
    *)
      HSIPIPE_LAUNCH=(srun --mpi="$HSIPIPE_MPI" --kill-on-bad-exit=1)
      [[ -z ${SLURM_CPUS_PER_TASK:-} ]] || HSIPIPE_LAUNCH+=(--cpus-per-task="$SLURM_CPUS_PER_TASK")
      ;;
  esac
}
hsipipe_launcher

# Runs `hsipipe ARGS...` as the MPI ranks of this job.
hsipipe_launch() { "${HSIPIPE_LAUNCH[@]}" "$HSIPIPE_ON_NODE" "$HSIPIPE_EXE_PATH" "$@"; }

# Runs `hsipipe ARGS...` once, here (rank-local commands: folds, report, stage --publish).
hsipipe_once() { "$HSIPIPE_ON_NODE" "$HSIPIPE_EXE_PATH" "$@"; }

# Stages the run's cache to node-local disk on every node of the job (one `hsipipe stage` per node, into
# that node's own local directory; concurrent jobs on a node wait for each other through the lock) and sets
# HSIPIPE_LOCAL_CACHE to the copy's path, {node-local}/...: hsipipe_launch, hsipipe_once and
# hsipipe_run_preemptible give each node its own copy. Call it as a command, not inside $(...): bash turns
# `set -e` off in a command substitution, so a failed stage there would not end the job. The path holds the
# user and a hash of the shared cache's path, so two users' (or two results roots') runs of the same name
# never share, or fail on, one copy.
hsipipe_stage_cache() {
  local key rc=0
  key=$(printf '%s' "$(realpath -m "$HSIPIPE_CACHE")" | cksum | cut -d' ' -f1)
  # (the user in the top folder's name: a shared hsipipe-stage/ made by one user would refuse the others)
  HSIPIPE_LOCAL_CACHE="$HSIPIPE_NODE_LOCAL/hsipipe-stage-${USER:-$(id -un)}/$HSIPIPE_RUN_NAME-$key/cache"
  if [[ ${SLURM_JOB_NUM_NODES:-1} -gt 1 ]]; then
    srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --mpi=none \
      "$HSIPIPE_ON_NODE" "$HSIPIPE_EXE_PATH" stage "$HSIPIPE_CACHE" "$HSIPIPE_LOCAL_CACHE" >&2 || rc=$?
  else
    hsipipe_once stage "$HSIPIPE_CACHE" "$HSIPIPE_LOCAL_CACHE" >&2 || rc=$?
  fi
  if [[ $rc == 138 || $rc == 143 ]]; then
    # (stage keeps the default actions: ended, it leaves only a temporary copy that the next stage removes)
    hsipipe_log "error: hsipipe stage was ended by SIG$([[ $rc == 138 ]] && echo USR1 || echo TERM) sent to the job's" \
      "steps rather than to this batch shell; to preempt a job, signal the batch shell: scancel --signal=USR1 --batch JOB"
  fi
  return "$rc"
}

# The id `scontrol requeue` needs: for an array task ARRAYID_TASK (SLURM_JOB_ID of the first task equals
# the array's id, and requeueing that would requeue every task).
hsipipe_self_id() {
  if [[ -n ${SLURM_ARRAY_JOB_ID:-} ]]; then
    echo "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
  else
    echo "$SLURM_JOB_ID"
  fi
}

# Exit status of `hsipipe train` after a SIGUSR1/SIGTERM made it checkpoint and stop (src/train/trainer.hpp).
HSIPIPE_EXIT_PREEMPTED=75

# Identity (device, inode, size, mtime) of every checkpoint matching the glob HSIPIPE_CHECKPOINTS (set by the
# train scripts), one line each. hsipipe writes a checkpoint under a temporary name and renames it, so a
# checkpoint written since an earlier call has a new inode: no clock is compared (the batch node's and the
# shared file system's need not agree, nor their timestamps' resolution).
hsipipe_checkpoint_state() {
  local f
  [[ -n ${HSIPIPE_CHECKPOINTS:-} ]] || return 0
  while IFS= read -r f; do
    stat -c '%n %d %i %s %Y' "$f" 2>/dev/null || true
  done < <(compgen -G "$HSIPIPE_CHECKPOINTS" || true)
}
HSIPIPE_SIGNALLED=""
HSIPIPE_CHILD=""

hsipipe_on_signal() {
  if [[ -n ${HSIPIPE_REQUEUEING:-} ]]; then
    hsipipe_log "SIG$1: this attempt ends (requeued)"
    return
  fi
  HSIPIPE_SIGNALLED=$1
  # the checkpoints as the signal found them: one written in answer to it differs (see hsipipe_run_preemptible)
  if [[ -z ${HSIPIPE_CHECKPOINTS_AT_SIGNAL+set} ]]; then
    HSIPIPE_CHECKPOINTS_AT_SIGNAL=$(hsipipe_checkpoint_state)
    HSIPIPE_FIRST_SIGNAL=$1  # (the pair's first: the checkpoints are compared with those it found)
  fi
  if [[ -n $HSIPIPE_CHILD ]]; then
    # hsipipe treats SIGUSR1 and SIGTERM alike. Open MPI's mpiexec forwards SIGUSR1 and exits with the
    # ranks' status (75), but turns SIGTERM into a job abort (SIGKILL 1 s later, exit status 1): send it USR1.
    local fwd=$1
    [[ ${HSIPIPE_LAUNCH[0]} != mpiexec ]] || fwd=USR1
    hsipipe_log "SIG$1: asking hsipipe to checkpoint and stop (SIG$fwd to ${HSIPIPE_LAUNCH[0]})"
    kill -"$fwd" "$HSIPIPE_CHILD" 2>/dev/null || true
  else
    hsipipe_log "SIG$1 before training started: the job will requeue without training"
  fi
}

# Preemption handling for a training job; call it first thing, so that a signal arriving while the
# cache is being staged is not fatal (bash's default for SIGUSR1 is to exit).
#  - SIGUSR1 (sent by Slurm to this batch shell --signal=B:USR1@SECONDS before the time limit, or by
#    `scancel --signal=USR1 --batch`) and SIGTERM are forwarded to hsipipe, which writes
#    RUN_DIR/fold-I/checkpoint.pt and exits with 75;
#  - the job then requeues itself (it was submitted with --requeue) and the next attempt resumes from
#    the checkpoint (the caller passes --resume).
hsipipe_trap_preemption() {
  trap 'hsipipe_on_signal USR1' USR1
  trap 'hsipipe_on_signal TERM' TERM
}

# Requeues this job (array task) and waits for slurmctld to end this attempt.
hsipipe_requeue() {
  local id
  id=$(hsipipe_self_id)
  hsipipe_log "requeueing $id; the next attempt resumes from the checkpoint"
  HSIPIPE_REQUEUEING=1
  if scontrol requeue "$id"; then
    # slurmctld now ends this attempt; leaving first could record it as finished.
    sleep 300 &
    wait $! || true
    exit 0
  fi
  hsipipe_log "error: scontrol requeue $id failed (job cancelled, or requeue not allowed here); rerun it to resume"
  exit "$HSIPIPE_EXIT_PREEMPTED"
}

# Whether the per-task statuses srun printed (its stderr, file $1: "srun: error: NODE: task(s) N: STATUS")
# are all those of a preemption: exited 75 (hsipipe checkpointed and stopped), "User defined signal 1" (138:
# a SIGUSR1 before hsipipe could handle it), "Terminated"/"Killed" (143/137: ended by srun --kill-on-bad-exit
# after the first rank exited non-zero). A task that exited 0 prints nothing; any other status is a failure.
hsipipe_preempted_tasks() {
  local statuses
  statuses=$(sed -n 's/^srun: error: [^:]*: tasks\{0,1\} [0-9,-]*: //p' "$1" | sort -u)
  [[ -n $statuses ]] || return 1
  ! grep -qvxE 'Exited with exit code 75|User defined signal 1|Terminated|Killed' <<<"$statuses"
}

# Runs `hsipipe ARGS...` (a training) on all tasks under the preemption handling above.
# The ranks may also get the signal themselves, at different times (`scancel --signal=USR1 JOB` without
# --batch signals the job's steps, not this shell): hsipipe train handles SIGUSR1/SIGTERM for its whole
# life, the ranks agree on a stop at the next step, and every one exits 75.
hsipipe_run_preemptible() {
  local rc err tailer
  [[ -z $HSIPIPE_SIGNALLED ]] || hsipipe_requeue
  HSIPIPE_CHECKPOINTS_AT_LAUNCH=$(hsipipe_checkpoint_state)
  # srun's messages (and the ranks' stderr) go through a file, copied to the log as they come, so that the
  # tasks' statuses can be read afterwards.
  err=$(mktemp "${TMPDIR:-/tmp}/hsipipe-launch-${SLURM_JOB_ID:-$$}.XXXXXX")
  # The launcher itself is the background child, so that the signal reaches it (srun forwards
  # SIGUSR1/SIGTERM to every task; Open MPI's mpiexec forwards SIGUSR1, which hsipipe_on_signal sends it).
  "${HSIPIPE_LAUNCH[@]}" "$HSIPIPE_ON_NODE" "$HSIPIPE_EXE_PATH" "$@" 2>"$err" &
  HSIPIPE_CHILD=$!
  tail -n +1 -s 0.2 -f --pid="$HSIPIPE_CHILD" "$err" >&2 &
  tailer=$!
  while :; do
    rc=0
    wait "$HSIPIPE_CHILD" || rc=$?
    # A trap interrupts `wait` while hsipipe still runs (or is an unreaped zombie): wait again.
    kill -0 "$HSIPIPE_CHILD" 2>/dev/null || break
  done
  HSIPIPE_CHILD=""
  while kill -0 "$tailer" 2>/dev/null; do wait "$tailer" || true; done
  # Every rank exits 75 after a preemption, but not at the same instant, and srun --kill-on-bad-exit ends the
  # tasks still running when the first one exits non-zero (SIGTERM, then SIGKILL); a SIGUSR1 sent to the
  # ranks may also reach one before hsipipe handles it. srun then reports 143, 137 or 138 for the whole mix.
  # Open MPI's mpiexec, given Slurm's usual pair (SIGUSR1, then SIGTERM 0.3 s later), may itself crash after the
  # ranks exited 75: a segfault in PMIx_Finalize, status 139 (Open MPI's bug, issue 35 item 9), or exit 1 when a
  # SIGTERM reached it directly and it aborted the ranks. It is a preemption when a checkpoint was written since
  # the signal (since the launch when this shell did not get one) and, under srun, every task ended in one of
  # the ways above; under mpiexec, which reports no per-rank statuses, when this shell forwarded the signal,
  # whatever the launcher's status.
  if [[ $rc != 0 && $rc != "$HSIPIPE_EXIT_PREEMPTED" ]]; then
    local now before=$HSIPIPE_CHECKPOINTS_AT_LAUNCH since="the launch" how=""
    [[ -z ${HSIPIPE_CHECKPOINTS_AT_SIGNAL+set} ]] || before=$HSIPIPE_CHECKPOINTS_AT_SIGNAL since=SIG$HSIPIPE_FIRST_SIGNAL
    if [[ ${HSIPIPE_LAUNCH[0]} == srun ]]; then
      if [[ $rc == 143 || $rc == 137 || $rc == 138 ]] && hsipipe_preempted_tasks "$err"; then
        how="every task exited $HSIPIPE_EXIT_PREEMPTED or was ended by a signal"
      fi
    elif [[ -n $HSIPIPE_SIGNALLED ]]; then
      how="this shell forwarded SIG$HSIPIPE_FIRST_SIGNAL"
    fi
    now=$(hsipipe_checkpoint_state)
    if [[ -n $how && -n $now && $now != "$before" ]]; then
      hsipipe_log "${HSIPIPE_LAUNCH[0]} exited with status $rc, but a checkpoint was written after $since" \
        "($HSIPIPE_CHECKPOINTS) and $how: a preemption"
      rc=$HSIPIPE_EXIT_PREEMPTED
    fi
  fi
  rm -f "$err"
  if [[ $rc == "$HSIPIPE_EXIT_PREEMPTED" ]]; then
    hsipipe_log "preempted${HSIPIPE_SIGNALLED:+ (SIG$HSIPIPE_SIGNALLED)}: hsipipe wrote its checkpoint"
    hsipipe_requeue
  fi
  [[ $rc == 0 ]] || hsipipe_log "error: hsipipe exited with status $rc"
  return "$rc"
}
