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

hsipipe_log "host $(hostname -s), job ${SLURM_JOB_ID:-?}${SLURM_ARRAY_TASK_ID:+ array task $SLURM_ARRAY_JOB_ID/$SLURM_ARRAY_TASK_ID}," \
  "${SLURM_NTASKS:-1} tasks on ${SLURM_JOB_NUM_NODES:-1} node(s), attempt $(( ${SLURM_RESTART_COUNT:-0} + 1 ))"

# Node-local root, evaluated here on the compute node.
hsipipe_local_root() {
  local d=${HSIPIPE_LOCAL_DIR:-${SLURM_TMPDIR:-${TMPDIR:-/tmp}}}
  echo "$d"
}

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
hsipipe_launch() { "${HSIPIPE_LAUNCH[@]}" "$HSIPIPE_EXE_PATH" "$@"; }

# Runs `hsipipe ARGS...` once (rank-local commands: folds, report, stage --publish).
hsipipe_once() { "$HSIPIPE_EXE_PATH" "$@"; }

# Stages the run's cache to node-local disk on every node of the job (one `hsipipe stage` per node;
# concurrent jobs on a node wait for each other through the lock) and sets HSIPIPE_LOCAL_CACHE to the
# local path. Call it as a command, not inside $(...): bash turns `set -e` off in a command substitution,
# so a failed stage there would not end the job. The path holds the user and a hash of the shared cache's
# path, so two users' (or two results roots') runs of the same name never share, or fail on, one copy.
hsipipe_stage_cache() {
  local key
  key=$(printf '%s' "$(realpath -m "$HSIPIPE_CACHE")" | cksum | cut -d' ' -f1)
  # (the user in the top folder's name: a shared hsipipe-stage/ made by one user would refuse the others)
  HSIPIPE_LOCAL_CACHE="$(hsipipe_local_root)/hsipipe-stage-${USER:-$(id -un)}/$HSIPIPE_RUN_NAME-$key/cache"
  mkdir -p "$(dirname "$HSIPIPE_LOCAL_CACHE")"
  if [[ ${SLURM_JOB_NUM_NODES:-1} -gt 1 ]]; then
    srun --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --mpi=none \
      "$HSIPIPE_EXE_PATH" stage "$HSIPIPE_CACHE" "$HSIPIPE_LOCAL_CACHE" >&2
  else
    "$HSIPIPE_EXE_PATH" stage "$HSIPIPE_CACHE" "$HSIPIPE_LOCAL_CACHE" >&2
  fi
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
  [[ -n ${HSIPIPE_CHECKPOINTS_AT_SIGNAL+set} ]] || HSIPIPE_CHECKPOINTS_AT_SIGNAL=$(hsipipe_checkpoint_state)
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

# Runs `hsipipe ARGS...` (a training) on all tasks under the preemption handling above.
hsipipe_run_preemptible() {
  local rc
  [[ -z $HSIPIPE_SIGNALLED ]] || hsipipe_requeue
  # The launcher itself is the background child, so that the signal reaches it (srun forwards
  # SIGUSR1/SIGTERM to every task; Open MPI's mpiexec forwards SIGUSR1, which hsipipe_on_signal sends it).
  "${HSIPIPE_LAUNCH[@]}" "$HSIPIPE_EXE_PATH" "$@" &
  HSIPIPE_CHILD=$!
  while :; do
    rc=0
    wait "$HSIPIPE_CHILD" || rc=$?
    # A trap interrupts `wait` while hsipipe still runs (or is an unreaped zombie): wait again.
    kill -0 "$HSIPIPE_CHILD" 2>/dev/null || break
  done
  HSIPIPE_CHILD=""
  # Every rank exits 75 after a preemption, but not at the same instant, and srun --kill-on-bad-exit ends the
  # tasks still running when the first one exits non-zero (SIGTERM, then SIGKILL): srun then reports their
  # 143 or 137. A checkpoint written since the signal says hsipipe did stop cleanly.
  if [[ ($rc == 143 || $rc == 137) && -n $HSIPIPE_SIGNALLED && -n ${HSIPIPE_CHECKPOINTS_AT_SIGNAL+set} ]]; then
    local now
    now=$(hsipipe_checkpoint_state)
    if [[ -n $now && $now != "$HSIPIPE_CHECKPOINTS_AT_SIGNAL" ]]; then
      hsipipe_log "${HSIPIPE_LAUNCH[0]} exited with status $rc, but a checkpoint was written after SIG$HSIPIPE_SIGNALLED ($HSIPIPE_CHECKPOINTS): a rank ended by the launcher after the first one exited $HSIPIPE_EXIT_PREEMPTED"
      rc=$HSIPIPE_EXIT_PREEMPTED
    fi
  fi
  if [[ $rc == "$HSIPIPE_EXIT_PREEMPTED" ]]; then
    hsipipe_log "preempted${HSIPIPE_SIGNALLED:+ (SIG$HSIPIPE_SIGNALLED)}: hsipipe wrote its checkpoint"
    hsipipe_requeue
  fi
  [[ $rc == 0 ]] || hsipipe_log "error: hsipipe exited with status $rc"
  return "$rc"
}
