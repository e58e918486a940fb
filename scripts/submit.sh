#!/usr/bin/env bash
# Submits the hsipipe chain to Slurm as jobs linked by --dependency=afterok:
#   decode (N ranks) -> folds -> train array (one fold per task, R ranks each) -> report
# and prints the job ids and where the results and logs will be.
#
# Usage: scripts/submit.sh [options] CONFIG
#   CONFIG            the hsipipe INI file (scenes and [decode], [folds], [train] options), e.g. config/demo.ini
#   --name NAME       run name (default: CONFIG's file name without .ini); results go to
#                     $HSIPIPE_SHARED_DIR/NAME unless --out
#   --out DIR         results root on the shared file system
#   --site FILE       site settings (default: $HSIPIPE_SITE or config/site.env); environment variables win
#   --k K             number of folds (default: k= of [folds] in CONFIG, else $HSIPIPE_FOLDS_K, else 5)
#   --stages LIST     which jobs, comma separated, in chain order: decode,folds,train,report (default)
#                     and/or train_all (all folds in one job), then predict; stages left out must have run before
#   --predict PCONFIG map the [scene.NAME] sections of PCONFIG after training (adds the predict stage): an
#                     array, one scene per task, `hsipipe predict --config PCONFIG --only NAME` with the run's
#                     k-fold ensemble (or the fold of PCONFIG's [predict] section) into OUT/maps; the predict
#                     stage alone (--stages predict) maps with CONFIG's scenes unless --predict is given
#   --all-in-one      the same as --stages decode,folds,train_all
#   --fold LIST       rerun only these folds (e.g. 2 or 0,3): train array with these tasks, then report;
#                     the fold directories are removed first so they train from scratch
#   --after JOBID     the first job waits for JOBID (afterok)
#   --dry-run         print the sbatch command lines, submit nothing
# Prints "job STAGE ID" lines, then "results ..." and "logs ..." lines; the same ids are written to
# OUT/jobs.env (sourceable: HSIPIPE_JOB_DECODE=... ).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "submit.sh: $*" >&2; exit 2; }

name="" out="" site="" k="" stages="decode,folds,train,report" folds_list="" after="" dry=0 config="" pconfig=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --name) name=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --site) site=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --all-in-one) stages="decode,folds,train_all"; shift ;;
    --fold) folds_list=$2; stages="train,report"; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --predict) pconfig=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z $config ]] || die "one CONFIG only (got '$config' and '$1')"; config=$1; shift ;;
  esac
done
[[ -n $config ]] || { usage >&2; exit 2; }
[[ -f $config ]] || die "CONFIG '$config' not found"
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
if [[ -n $pconfig ]]; then
  [[ -f $pconfig ]] || die "--predict: '$pconfig' not found"
  pconfig=$(cd "$(dirname "$pconfig")" && pwd)/$(basename "$pconfig")
  [[ ,$stages, == *,predict,* ]] || stages+=",predict"
fi

export HSIPIPE_ROOT=$ROOT
export HSIPIPE_SITE=${site:-${HSIPIPE_SITE:-$ROOT/config/site.env}}
[[ -f $HSIPIPE_SITE ]] || die "site file '$HSIPIPE_SITE' not found"
# shellcheck disable=SC1090
source "$HSIPIPE_SITE"

# k: command line, else the config's [folds] k (or a top-level k), else the site default, else 5.
source "$ROOT/jobs/ini.sh"  # ini_value, ini_scenes
k=${k:-$(ini_value "$config" folds k)}
k=${k:-${HSIPIPE_FOLDS_K:-5}}
[[ $k =~ ^[0-9]+$ && $k -ge 2 ]] || die "k must be an integer >= 2 (got '$k')"

name=${name:-$(basename "$config" .ini)}
out=${out:-$HSIPIPE_SHARED_DIR/$name}
if [[ $dry == 0 ]]; then
  mkdir -p "$out/logs" || die "cannot create $out/logs"
  out=$(cd "$out" && pwd)
else
  out=$(realpath -m "$out")  # the dry run creates nothing; its script does (below)
fi
export HSIPIPE_CONFIG=$config HSIPIPE_OUT=$out HSIPIPE_K=$k HSIPIPE_RUN_NAME=$name
# predict: the scenes (PCONFIG's, else CONFIG's) and the run it maps with (train_all's when that stage is here)
export HSIPIPE_PREDICT_CONFIG=${pconfig:-$config}
export HSIPIPE_PREDICT_RUN=$out/run
[[ ,$stages, != *,train_all,* ]] || HSIPIPE_PREDICT_RUN=$out/run-all

# Options every job gets.
common=(--parsable --kill-on-invalid-dep=yes)
[[ -n $HSIPIPE_PARTITION ]] && common+=(--partition="$HSIPIPE_PARTITION")
[[ -n $HSIPIPE_ACCOUNT ]] && common+=(--account="$HSIPIPE_ACCOUNT")
[[ -n $HSIPIPE_QOS ]] && common+=(--qos="$HSIPIPE_QOS")
[[ -n $HSIPIPE_MEM_PER_CPU ]] && common+=(--mem-per-cpu="$HSIPIPE_MEM_PER_CPU")
# shellcheck disable=SC2206
[[ -n $HSIPIPE_SBATCH_EXTRA ]] && common+=($HSIPIPE_SBATCH_EXTRA)

train_opts=(--nodes="$HSIPIPE_TRAIN_NODES" --ntasks="$HSIPIPE_TRAIN_TASKS" --cpus-per-task="$HSIPIPE_CPUS_PER_TASK"
            --requeue --signal="B:USR1@$HSIPIPE_SIGNAL_SECONDS")
if [[ $HSIPIPE_GPUS_PER_TASK -gt 0 ]]; then
  train_opts+=(--gpus-per-task="${HSIPIPE_GPU_TYPE:+$HSIPIPE_GPU_TYPE:}$HSIPIPE_GPUS_PER_TASK")
fi

predict_opts=(--nodes=1 --ntasks="$HSIPIPE_PREDICT_TASKS" --cpus-per-task="$HSIPIPE_CPUS_PER_TASK")
if [[ $HSIPIPE_GPUS_PER_TASK -gt 0 ]]; then
  predict_opts+=(--gpus-per-task="${HSIPIPE_GPU_TYPE:+$HSIPIPE_GPU_TYPE:}$HSIPIPE_GPUS_PER_TASK")
fi

array="0-$((k - 1))"
if [[ -n $folds_list ]]; then
  for f in ${folds_list//,/ }; do
    [[ $f =~ ^[0-9]+$ && $f -lt $k ]] || die "--fold: '$f' is not a fold of 0..$((k - 1))"
  done
  array=$folds_list
fi

declare -A ids=()
prev=$after
submit() {  # submit STAGE SCRIPT OPTIONS...: submits after $prev, records the id
  local stage=$1 script=$2
  shift 2
  local dep=()
  [[ -n $prev ]] && dep=(--dependency="afterok:$prev")
  local cmd=(sbatch "${common[@]}" ${dep[@]+"${dep[@]}"} "$@" "$ROOT/jobs/$script")  # (empty arrays and set -u: bash < 4.4)
  if [[ $dry == 1 ]]; then
    # A runnable script: JOB_<STAGE>=$(sbatch ...), later jobs depending on $JOB_<PREVIOUS>.
    local line="" a
    for a in "${cmd[@]}"; do
      if [[ $a == --dependency=afterok:\$* ]]; then line+="--dependency=afterok:${a#--dependency=afterok:} "
      else line+="$(printf '%q' "$a") "; fi
    done
    echo "JOB_${stage^^}=\$(${line% })"
    ids[$stage]="\$JOB_${stage^^}"
  else
    local id
    id=$("${cmd[@]}") || die "sbatch failed for $stage"
    id=${id%%;*}
    ids[$stage]=$id
    echo "job $stage $id"
  fi
  prev=${ids[$stage]}
}

if [[ $dry == 1 ]]; then
  echo "# the environment the jobs get (sbatch exports it), and their log folder:"
  for v in HSIPIPE_ROOT HSIPIPE_SITE HSIPIPE_CONFIG HSIPIPE_OUT HSIPIPE_K HSIPIPE_RUN_NAME HSIPIPE_PREDICT_CONFIG HSIPIPE_PREDICT_RUN; do echo "export $v=$(printf '%q' "${!v}")"; done
  echo "mkdir -p $(printf '%q' "$out/logs")"
fi
IFS=, read -r -a stage_list <<<"$stages"
for s in "${stage_list[@]}"; do
  case $s in
    decode)
      submit decode decode.sbatch --nodes="$HSIPIPE_DECODE_NODES" --ntasks="$HSIPIPE_DECODE_TASKS" \
        --time="$HSIPIPE_TIME_DECODE" --output="$out/logs/%x-%j.out"
      ;;
    folds)
      submit folds folds.sbatch --time="$HSIPIPE_TIME_FOLDS" --output="$out/logs/%x-%j.out"
      ;;
    train)
      if [[ -n $folds_list ]]; then  # rerun those folds from scratch (the dry run prints the commands)
        for f in ${folds_list//,/ }; do
          if [[ $dry == 0 ]]; then rm -rf "$out/run/fold-$f"; else echo "rm -rf $(printf '%q' "$out/run/fold-$f")"; fi
        done
      fi
      submit train train.sbatch --array="$array" "${train_opts[@]}" --time="$HSIPIPE_TIME_TRAIN" \
        --output="$out/logs/%x-%A_%a.out"
      ;;
    train_all)
      submit train_all train_all.sbatch "${train_opts[@]}" --time="${HSIPIPE_TIME_TRAIN_ALL:-$HSIPIPE_TIME_TRAIN}" \
        --output="$out/logs/%x-%j.out"
      ;;
    report)
      submit report report.sbatch --time="$HSIPIPE_TIME_REPORT" --output="$out/logs/%x-%j.out"
      ;;
    predict)
      n_scenes=$(ini_scenes "$HSIPIPE_PREDICT_CONFIG" | wc -l)
      ((n_scenes > 0)) || die "predict: $HSIPIPE_PREDICT_CONFIG has no [scene.NAME] section to map"
      submit predict predict.sbatch --array="0-$((n_scenes - 1))" "${predict_opts[@]}" \
        --time="$HSIPIPE_TIME_PREDICT" --output="$out/logs/%x-%A_%a.out"
      ;;
    *) die "--stages: unknown stage '$s' (decode, folds, train, report, train_all, predict)" ;;
  esac
done

if [[ $dry == 0 ]]; then
  {
    for s in "${!ids[@]}"; do echo "HSIPIPE_JOB_${s^^}=${ids[$s]}"; done
    echo "HSIPIPE_OUT=$out"
  } >"$out/jobs.env.tmp" && mv "$out/jobs.env.tmp" "$out/jobs.env"
fi
c=""
[[ $dry == 0 ]] || c="# "  # the dry run's output is a script: the summary as comments
echo "${c}results $out"
echo "${c}  cache   $out/cache"
echo "${c}  folds   $out/folds.json"
[[ ,$stages, != *,train,* ]] || echo "${c}  fold-I  $out/run/fold-I/ (I in $array)"
[[ ,$stages, != *,report,* ]] || echo "${c}  summary $out/run/summary.json, summary.md"
[[ ,$stages, != *,train_all,* ]] || echo "${c}  summary $out/run-all/summary.json (train_all)"
[[ ,$stages, != *,predict,* ]] || echo "${c}  maps    $out/maps/NAME_class.tif, .img/.hdr, _preview.png (NAME: $(ini_scenes "$HSIPIPE_PREDICT_CONFIG" | paste -sd' '))"
echo "${c}logs    $out/logs"
