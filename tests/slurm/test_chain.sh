#!/usr/bin/env bash
# The real chain through scripts/submit.sh on a private single-node Slurm (run under
# scripts/slurm_test_cluster.sh run): synthetic 40x40x30 scene; decode with 2 ranks (srun --mpi=pmix);
# folds (k=3); a 3-task train array with 2 ranks per task, CPU, --deterministic; report; a predict array
# (submit.sh --predict: one task per scene of another INI, 2 ranks each) chained after them.
#  - every job ends COMPLETED and every fold's results exist;
#  - the predict tasks' maps (the k-fold ensemble) equal those of `hsipipe predict` run by hand, byte for byte;
#  - preemption: fold 1 gets SIGUSR1 (`scancel --signal=USR1 --batch`, what --signal=B:USR1@N does at
#    the time limit) during training: it checkpoints, requeues itself, and the next attempt resumes
#    from the checkpoint (its log says so) and completes;
#  - staging: the folds job copies the cache to node-local disk, the train tasks reuse that copy; a
#    corrupted staged copy is detected and replaced by the next job (train_all);
#  - the summary of the array + report equals the one of train_all for the same folds and seed.
source "$(dirname "$0")/common.sh"
: "${SLURM_CONF:?run under scripts/slurm_test_cluster.sh run}"
need_commands synth decode folds stage
# Without libtorch (HSIPIPE_WITH_TORCH=OFF) there is no train/report: run and check decode and folds
# through Slurm, then skip (a failure under CI=true, where the full chain is required).
have_train=1
"$HSIPIPE_BIN" --help | grep -q '^  train ' && "$HSIPIPE_BIN" --help | grep -q '^  report ' || have_train=0

W=$HSIPIPE_SLURM_DIR/work-chain
mkdir -p "$W"
H=$HSIPIPE_BIN
T0=$SECONDS
# A pause per training step (hsipipe's test hook; sbatch exports it to the jobs): the SIGUSR1 sent once fold 1
# logs its first epoch must land while that fold still trains, however fast the machine is.
export HSIPIPE_TEST_STEP_DELAY_MS=${HSIPIPE_TEST_STEP_DELAY_MS:-3}

"$H" synth --out "$W/scene" --rows 40 --cols 40 --bands 30 --classes 4 --seed 5 >/dev/null
synth_ini "$W/chain.ini" "$W/scene" 3 "${HSIPIPE_TEST_EPOCHS:-30}"
# The scenes the predict array maps: the training scene (with its labels: the map's accuracy) and another
# scene of the same sensor.
"$H" synth --out "$W/other" --rows 24 --cols 30 --bands 30 --classes 4 --seed 9 >/dev/null
cat >"$W/predict.ini" <<INI
[scene.field]
path = $W/scene/scene.hdr
labels = $W/scene/labels.hdr

[scene.other]
path = $W/other/scene.hdr

[predict]
device = cpu
INI

export HSIPIPE_EXE=$H HSIPIPE_SHARED_DIR=$W/shared HSIPIPE_LOCAL_DIR=$W/local
export HSIPIPE_DECODE_TASKS=2 HSIPIPE_TRAIN_TASKS=2 HSIPIPE_CPUS_PER_TASK=1
export HSIPIPE_TIME_DECODE=00:10:00 HSIPIPE_TIME_FOLDS=00:10:00 HSIPIPE_TIME_TRAIN=00:10:00
export HSIPIPE_TIME_TRAIN_ALL=00:10:00 HSIPIPE_TIME_REPORT=00:10:00
# Checkpoints only on the signal, so a resumed attempt can only have started from the signal's one.
export HSIPIPE_CHECKPOINT_EVERY=0
OUT=$W/shared/chain
LOGS=$OUT/logs

wait_done() {  # wait_done SECONDS JOBID...: until the jobs are done, SECONDS after the test started at the latest
  local limit=$1
  shift
  wait_jobs $((limit - (SECONDS - T0))) "$@"
}
# The node-local copy jobs/lib.sh stages: under the user and a hash of the shared cache's path.
stage_dir() {
  local u=${USER:-$(id -un)}
  echo "$W/local/hsipipe-stage-$u/chain-$(printf '%s' "$(realpath -m "$OUT/cache")" | cksum | cut -d' ' -f1)/cache"
}
show_logs() { for f in "$LOGS"/*; do echo "===== $f"; cat "$f"; done; }
trap 'rc=$?; if ((rc != 0 && rc != 77)); then show_logs; fi' EXIT

# ---------------------------------------------------------------- the chain
stages=decode,folds,train,report
predict=(--predict "$W/predict.ini")
((have_train)) || { stages=decode,folds; predict=(); }
out=$("$HSIPIPE_SOURCE_DIR/scripts/submit.sh" --name chain --stages "$stages" "${predict[@]}" "$W/chain.ini")
echo "$out"
# shellcheck disable=SC1091
source "$OUT/jobs.env"
if ((!have_train)); then
  wait_done 300 "$HSIPIPE_JOB_DECODE" "$HSIPIPE_JOB_FOLDS"
  for id in "$HSIPIPE_JOB_DECODE" "$HSIPIPE_JOB_FOLDS"; do
    [[ $(job_states "$id") == COMPLETED ]] || fail "job $id ended $(job_states "$id")"
  done
  "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if m.get('ranks')==2 else 'ranks=%s' % m.get('ranks'))" \
    "$OUT/cache/manifest.json" || fail "the cache was not decoded by 2 ranks"
  fp=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['fingerprint'])" "$OUT/folds.json")
  grep -q "$fp" "$LOGS/hsipipe-folds-$HSIPIPE_JOB_FOLDS.out" || fail "folds fingerprint $fp not in the folds log"
  grep -q "copied to $(stage_dir)" "$LOGS/hsipipe-folds-$HSIPIPE_JOB_FOLDS.out" || fail "folds did not stage"
  ok "decode (2 ranks) and folds through Slurm"
  skip "hsipipe train/report are not built (HSIPIPE_WITH_TORCH=OFF): the train array, preemption and report were not run"
fi
for v in HSIPIPE_JOB_DECODE HSIPIPE_JOB_FOLDS HSIPIPE_JOB_TRAIN HSIPIPE_JOB_REPORT HSIPIPE_JOB_PREDICT; do
  [[ ${!v:-} =~ ^[0-9]+$ ]] || fail "submit.sh did not record $v"
  grep -qi "^job ${v#HSIPIPE_JOB_} ${!v}$" <<<"$out" || fail "submit.sh did not print the id of $v"
done
A=$HSIPIPE_JOB_TRAIN

# ---------------------------------------------------------------- preempt fold 1 during training
flog=$LOGS/hsipipe-train-${A}_1.out
while ! grep -q "^fold 1 epoch 1/" "$flog" 2>/dev/null; do
  ((SECONDS - T0 < 400)) || fail "fold 1 never reached its first epoch"
  [[ $(job_states "${A}_1") =~ COMPLETED|FAILED|CANCELLED ]] && fail "fold 1 ended before it could be preempted"
  sleep 0.2
done
scancel --signal=USR1 --batch "${A}_1"
echo "sent SIGUSR1 to the batch shell of ${A}_1"

P=$HSIPIPE_JOB_PREDICT
wait_done 660 "$HSIPIPE_JOB_DECODE" "$HSIPIPE_JOB_FOLDS" "$A" "$HSIPIPE_JOB_REPORT" "$P"
echo "chain done after $((SECONDS - T0)) s"
for id in "$HSIPIPE_JOB_DECODE" "$HSIPIPE_JOB_FOLDS" "$A" "$HSIPIPE_JOB_REPORT" "$P"; do
  [[ $(job_states "$id") == COMPLETED ]] || fail "job $id ended $(job_states "$id")"
done
[[ $(scontrol show job "$A" | grep -c 'JobState=COMPLETED') == 3 ]] || fail "not 3 completed array tasks"
[[ $(scontrol show job "$P" | grep -c 'JobState=COMPLETED') == 2 ]] || fail "not 2 completed predict tasks"
ok "decode, folds, 3 array tasks, report and 2 predict tasks all COMPLETED"

# decode: 2 ranks, node-local decode published to the shared path.
dlog=$LOGS/hsipipe-decode-$HSIPIPE_JOB_DECODE.out
"$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if m.get('ranks')==2 else 'ranks=%s' % m.get('ranks'))" \
  "$OUT/cache/manifest.json" || fail "the cache was not decoded by 2 ranks"
grep -q "decoding on node-local disk" "$dlog" && grep -q "copied to $OUT/cache" "$dlog" || fail "decode did not publish from local disk"
ok "decode with 2 ranks, published to the shared path"

# folds: fingerprint in the job log; the file checks against the cache.
fp=$("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['fingerprint'])" "$OUT/folds.json")
grep -q "$fp" "$LOGS/hsipipe-folds-$HSIPIPE_JOB_FOLDS.out" || fail "folds fingerprint $fp not in the folds log"
"$H" folds --check "$OUT/folds.json" --cache "$OUT/cache" >/dev/null || fail "hsipipe folds --check failed"
ok "folds fingerprint $fp"

# results of every fold, and the summary.
for f in 0 1 2; do
  for file in metrics.json predictions.csv confusion.csv; do
    [[ -s $OUT/run/fold-$f/$file ]] || fail "missing $OUT/run/fold-$f/$file"
  done
done
[[ -s $OUT/run/summary.json ]] || fail "report wrote no summary.json"
ok "fold results and summary"

# predict: one task per scene, after the training (afterok on report), 2 ranks each; the maps equal a
# hand-run predict of the same run (the ensemble of the 3 folds), byte for byte.
report_end=$(scontrol show job "$HSIPIPE_JOB_REPORT" | sed -n 's/.*EndTime=\([^ ]*\).*/\1/p')
predict_start=$(scontrol show job "$P" | sed -n 's/.*StartTime=\([^ ]*\).*/\1/p' | sort | head -1)
[[ -n $report_end && ! $predict_start < $report_end ]] || fail "a predict task started ($predict_start) before report ended ($report_end)"
"$H" predict --run "$OUT/run" --ensemble --device cpu --quiet --scene "$W/scene/scene.hdr" --name field \
  --scene "$W/other/scene.hdr" --name other --out "$W/maps-by-hand" || fail "hsipipe predict by hand failed"
for name in field other; do
  plog=$LOGS/hsipipe-predict-${P}_$([[ $name == field ]] && echo 0 || echo 1).out
  grep -q "scene $name (" "$plog" || fail "the predict task's log does not name scene $name"
  for ext in _class.tif _class.img _class.hdr _preview.png _predict.json; do
    [[ -s $OUT/maps/$name$ext ]] || fail "missing $OUT/maps/$name$ext"
  done
  cmp -s "$OUT/maps/${name}_class.img" "$W/maps-by-hand/${name}_class.img" || fail "$name: the predict task's map differs from predict by hand"
done
grep -q "accuracy on [0-9]* labeled pixels" "$LOGS/hsipipe-predict-${P}_0.out" || fail "the field's map has no accuracy in its log"
"$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['ensemble'] and j['ranks']==2 else 'ensemble/ranks: %s %s' % (j.get('ensemble'), j.get('ranks')))" \
  "$OUT/maps/field_predict.json" || fail "field_predict.json: not the 2-rank ensemble"
ok "predict array after the training: 2 scenes, 2 ranks each, the same maps as predict by hand"

# staging: the folds job copied the cache to node-local disk, every train task reused that copy.
stage_dir=$(stage_dir)
grep -q "copied to $stage_dir" "$LOGS/hsipipe-folds-$HSIPIPE_JOB_FOLDS.out" || fail "the folds job did not stage the cache"
for f in 0 1 2; do
  grep -q "reused the valid copy at $stage_dir" "$LOGS/hsipipe-train-${A}_$f.out" || fail "train task $f did not reuse the staged copy"
done
ok "staged once, reused by the train tasks"

# preemption of fold 1: signal -> checkpoint -> requeue -> resume -> complete.
cat "$flog"
grep -q "SIGUSR1: asking hsipipe to checkpoint and stop" "$flog" || fail "the batch shell did not forward SIGUSR1"
grep -Eq "^fold 1 epoch [0-9]+ step [0-9]+/[0-9]+: signal 10 received; checkpoint written, exiting for requeue" "$flog" \
  || fail "hsipipe did not checkpoint on the signal"
grep -q "requeueing ${A}_1" "$flog" || fail "the task did not requeue itself"
grep -q "attempt 2" "$flog" || fail "no second attempt in the log"
grep -q "resumed from checkpoint $OUT/run/fold-1/checkpoint.pt at fold 1" "$flog" || fail "the second attempt did not resume"
[[ $(scontrol show job "${A}_1" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p') == 1 ]] || fail "fold 1 was not restarted exactly once"
for f in 0 2; do
  ! grep -q "resumed from checkpoint" "$LOGS/hsipipe-train-${A}_$f.out" || fail "fold $f resumed without being preempted"
done
ok "fold 1 preempted, requeued, resumed from its checkpoint and completed"

# ---------------------------------------------------------------- corrupted staged copy, train_all
flip_byte "$stage_dir/samples.npy" $(( $(stat -c %s "$stage_dir/samples.npy") - 3 ))
out=$("$HSIPIPE_SOURCE_DIR/scripts/submit.sh" --name chain --stages train_all "$W/chain.ini")
echo "$out"
source "$OUT/jobs.env"
wait_done 800 "$HSIPIPE_JOB_TRAIN_ALL"
[[ $(job_states "$HSIPIPE_JOB_TRAIN_ALL") == COMPLETED ]] || fail "train_all ended $(job_states "$HSIPIPE_JOB_TRAIN_ALL")"
alog=$LOGS/hsipipe-train-all-$HSIPIPE_JOB_TRAIN_ALL.out
grep -q "samples.npy: content changed since it was staged" "$alog" || fail "the corrupted staged copy was not detected"
grep -q "replaced the invalid copy at $stage_dir" "$alog" || fail "the corrupted staged copy was not replaced"
cmp -s "$OUT/cache/samples.npy" "$stage_dir/samples.npy" || fail "the replaced copy differs from the cache"
ok "corrupted staged copy detected and replaced"

# ---------------------------------------------------------------- same summary both ways
same_summary "$OUT/run/summary.json" "$OUT/run-all/summary.json" 3 || fail "array + report and train_all: the summaries differ"
ok "array + report summary equals train_all's"
echo "PASS ($((SECONDS - T0)) s)"
