#!/usr/bin/env bash
# Two nodes, n1 and n2 (scripts/slurm_test_cluster.sh with HSIPIPE_SLURM_NODES=2: real slurmctld, two real
# slurmd on this host), the jobs/ scripts and real MPI ranks on both nodes (srun --mpi=pmix):
#  1. decode: jobs/decode.sbatch with 2 nodes x 2 ranks writes one cache on the shared path, with the data
#     checksum of a 1-rank decode;
#  2. stage: jobs/lib.sh's hsipipe_stage_cache in a 2-node job copies the cache once per node into that node's
#     own SLURM_TMPDIR (distinct per node, set by the cluster's TaskProlog), verified; a second call reuses both;
#     n2's copy corrupted: the third call replaces it and reuses n1's; the log names n1 and n2;
#  3. train: jobs/train.sbatch for fold 0 with one rank on each node gives the weights (parameter hash of
#     every epoch), metrics and predictions of 2 ranks on one node (--deterministic);
#  4. preemption: SIGUSR1 to the batch shell (scancel --signal=USR1 --batch), and SKEWED runs (default 10) in
#     which SIGUSR1 reaches the two nodes' ranks at different times (kill on one node mid-training, on the other
#     0-400 ms later, or only after training returned): every task requeues once, resumes from its checkpoint
#     and ends with the uninterrupted run's weights; every rank exits 75 itself (none killed by the signal or
#     by srun).
source "$(dirname "$0")/common.sh"
: "${SLURM_CONF:?run under scripts/slurm_test_cluster.sh run (HSIPIPE_SLURM_NODES=2)}"
need_commands synth decode folds stage train
[[ $(sinfo -h -N -o '%N' | sort | tr '\n' ' ') == "n1 n2 " ]] || fail "not the two-node test cluster: $(sinfo -h -N -o '%N')"
T0=$SECONDS
W=$HSIPIPE_SLURM_DIR/work-two
mkdir -p "$W/out/logs"
H=$HSIPIPE_BIN
SRC=$HSIPIPE_SOURCE_DIR
SKEWED=${HSIPIPE_TEST_SKEWED_RUNS:-10}

"$H" synth --out "$W/scene" --rows 24 --cols 24 --bands 16 --classes 4 --seed 5 >/dev/null
synth_ini "$W/two.ini" "$W/scene" 2 12
# The jobs' environment (sbatch exports it): no HSIPIPE_LOCAL_DIR, so each node stages into its SLURM_TMPDIR.
unset HSIPIPE_LOCAL_DIR SLURM_TMPDIR
export HSIPIPE_ROOT=$SRC HSIPIPE_EXE=$H HSIPIPE_CONFIG=$W/two.ini HSIPIPE_OUT=$W/out HSIPIPE_K=2
export HSIPIPE_CHECKPOINT_EVERY=0  # checkpoints only on a signal: a resumed run started from the signal's
export OMP_NUM_THREADS=1
two_node_mpi_env
OUT=$W/out
two=(--nodes=2 --ntasks=2 --ntasks-per-node=1)
show() { local f; for f in "$@"; do echo "===== $f"; cat "$f"; done; }
checksum() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['data_checksum'])" "$1/manifest.json"; }
nodes_of() { scontrol show job "$1" | sed -n 's/^ *NodeList=\([^ ]*\).*/\1/p' | head -1; }

# ---------------------------------------------------------------- 1. decode, 2 nodes x 2 ranks
"$H" decode --config "$W/two.ini" --out "$W/ref-cache" >/dev/null
d=$(sbatch --parsable --nodes=2 --ntasks=4 --ntasks-per-node=2 -o "$OUT/logs/decode.out" "$SRC/jobs/decode.sbatch")
wait_jobs 120 "$d"
[[ $(job_states "$d") == COMPLETED ]] || { show "$OUT/logs/decode.out"; fail "decode job: $(job_states "$d")"; }
[[ $(nodes_of "$d") == "n[1-2]" ]] || fail "decode ran on $(nodes_of "$d"), not n1 and n2"
grep -q "decoding into the shared path $OUT/cache" "$OUT/logs/decode.out" || fail "a 2-node decode did not write to the shared path"
"$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if m.get('ranks')==4 else 'ranks=%s' % m.get('ranks'))" \
  "$OUT/cache/manifest.json" || fail "the cache was not decoded by 4 ranks"
[[ $(checksum "$OUT/cache") == "$(checksum "$W/ref-cache")" ]] \
  || fail "2 nodes x 2 ranks: data checksum $(checksum "$OUT/cache"), 1 rank: $(checksum "$W/ref-cache")"
ok "decode with 2 nodes x 2 ranks: one cache, the 1-rank data checksum $(checksum "$OUT/cache")"
"$H" folds --cache "$OUT/cache" --k 2 --seed 7 --strategy stratified --out "$OUT/folds.json" >/dev/null

# ---------------------------------------------------------------- 2. stage once per node
cat >"$W/stage.sbatch" <<'EOF'
#!/bin/bash
source "$HSIPIPE_ROOT/jobs/lib.sh"
where() { srun --nodes=1 --ntasks=1 -w "$1" "$HSIPIPE_ON_NODE" --local-root; }
echo "local n1 $(where n1)"
echo "local n2 $(where n2)"
echo "== first"; hsipipe_stage_cache
echo "copy $HSIPIPE_LOCAL_CACHE"
echo "== second"; hsipipe_stage_cache
copy2=${HSIPIPE_LOCAL_CACHE//"$HSIPIPE_NODE_LOCAL"/$(where n2)}
# a byte of n2's copy corrupted, on n2
srun --nodes=1 --ntasks=1 -w n2 "$HSIPIPE_PYTHON" -c "
import sys; f = open(sys.argv[1], 'r+b'); f.seek(-3, 2); b = f.read(1); f.seek(-3, 2); f.write(bytes([b[0] ^ 0xFF]))" \
  "$copy2/samples.npy"
echo "== third"; hsipipe_stage_cache
EOF
s=$(HSIPIPE_PYTHON=$PY sbatch --parsable "${two[@]}" -o "$OUT/logs/stage.out" "$W/stage.sbatch")
wait_jobs 120 "$s"
slog=$OUT/logs/stage.out
cat "$slog"
[[ $(job_states "$s") == COMPLETED ]] || fail "stage job: $(job_states "$s")"
l1=$(sed -n 's/^local n1 //p' "$slog") l2=$(sed -n 's/^local n2 //p' "$slog")
[[ $l1 == "$HSIPIPE_SLURM_DIR/tmp/n1/job-$s" && $l2 == "$HSIPIPE_SLURM_DIR/tmp/n2/job-$s" ]] \
  || fail "the nodes' local directories: n1 '$l1', n2 '$l2' (expected each node's SLURM_TMPDIR)"
rel=$(sed -n 's/^copy {node-local}//p' "$slog")
[[ -n $rel ]] || fail "HSIPIPE_LOCAL_CACHE does not start with {node-local}"
c1=$l1$rel c2=$l2$rel
step_lines() { sed -n "/^== $1/,/^== /p" "$slog"; }
for n in 1 2; do
  c=c$n
  step_lines first | grep -q "^stage\[n$n\]: copied to ${!c} " || fail "first stage: n$n did not copy to ${!c}"
  step_lines second | grep -q "^stage\[n$n\]: reused the valid copy at ${!c} " || fail "second stage: n$n did not reuse its copy"
  cmp -s "$OUT/cache/samples.npy" "${!c}/samples.npy" || fail "n$n's copy differs from the cache"
done
step_lines third | grep -q "^stage\[n2\]: .*samples.npy: content changed since it was staged" || fail "n2's corrupted copy not detected"
step_lines third | grep -q "^stage\[n2\]: replaced the invalid copy at $c2 " || fail "n2's corrupted copy not replaced"
step_lines third | grep -q "^stage\[n1\]: reused the valid copy at $c1 " || fail "n1's copy not reused on the third call"
[[ $(grep -c "^stage\[$(hostname -s)\]" "$slog") == 0 ]] || fail "stage logs name the host, not the Slurm node"
grep -q "node n1 (host $(hostname -s))" "$slog" || fail "the job log does not name its node"
ok "stage: one copy per node in its own local directory, verified, reused, n2's corrupted copy replaced"

# ---------------------------------------------------------------- 3. one rank per node == 2 ranks on one node
# (a pause per step, so that the signals of part 4 land mid-training, and after each process's command, so
# that a signal can land after training returned)
export HSIPIPE_TEST_STEP_DELAY_MS=25 HSIPIPE_TEST_EXIT_MS=1500
train_job() {  # train_job NAME SBATCH_OPTIONS...: fold 0 into $OUT/NAME, log $OUT/logs/NAME.out; prints the id
  local name=$1
  shift
  HSIPIPE_FOLD=0 HSIPIPE_RUN_DIR=$OUT/$name sbatch --parsable "$@" -o "$OUT/logs/$name.out" "$SRC/jobs/train.sbatch"
}
hashes() { "$PY" -c "import json,sys; print(' '.join(json.loads(l)['parameter_hash'] for l in open(sys.argv[1])))" "$1/fold-0/epochs.jsonl"; }
same_results() {  # same_results RUN_A RUN_B: same weights at every epoch, same predictions and metrics
  [[ -n $(hashes "$1") && $(hashes "$1") == "$(hashes "$2")" ]] || { echo "parameter hashes: $(hashes "$1") | $(hashes "$2")"; return 1; }
  cmp -s "$1/fold-0/predictions.csv" "$2/fold-0/predictions.csv" || { echo "predictions differ"; return 1; }
  "$PY" - "$1/fold-0/metrics.json" "$2/fold-0/metrics.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
sys.exit(0 if a["metrics"] == b["metrics"] else "metrics differ")
PYEOF
}
one=$(train_job run-1node --nodes=1 --ntasks=2)
ref=$(train_job run-2node "${two[@]}")
wait_jobs 180 "$one" "$ref"
for j in "$one:run-1node" "$ref:run-2node"; do
  [[ $(job_states "${j%%:*}") == COMPLETED ]] || { show "$OUT/logs/${j#*:}.out"; fail "${j#*:}: $(job_states "${j%%:*}")"; }
done
[[ $(nodes_of "$ref") == "n[1-2]" ]] || fail "the 2-node training ran on $(nodes_of "$ref")"
same_results "$OUT/run-1node" "$OUT/run-2node" || fail "one rank on each of 2 nodes differs from 2 ranks on one node"
ok "fold 0 with one rank per node: the weights, predictions and metrics of 2 ranks on one node"

# ---------------------------------------------------------------- 4. preemption
# The job's `hsipipe train` rank on node $2 (its pid), or nothing. (Bash builtins only: a fork per process of
# the machine takes seconds on 2 busy cores, and the signal must land mid-training.)
rank_pid() {
  local p c e env cmd job node
  for p in /proc/[0-9]*; do
    { read -r c <"$p/comm"; } 2>/dev/null || continue
    [[ $c == hsipipe ]] || continue
    p=${p#/proc/}
    mapfile -d '' env 2>/dev/null <"/proc/$p/environ" || continue
    mapfile -d '' cmd 2>/dev/null <"/proc/$p/cmdline" || continue
    [[ ${cmd[1]:-} == train ]] || continue
    job=0 node=0
    for e in "${env[@]}"; do
      [[ $e == "SLURM_JOB_ID=$1" ]] && job=1
      [[ $e == "SLURMD_NODENAME=$2" ]] && node=1
    done
    if ((job && node)); then echo "$p"; return 0; fi
  done
}
signal_rank() {  # signal_rank JOBID NODE: SIGUSR1 to that rank, which must still be running
  local pid
  pid=$(rank_pid "$1" "$2")
  [[ -n $pid ]] && kill -USR1 "$pid" || fail "job $1: no train rank on $2 to signal"
}
# Checks of a preempted run NAME (job $1): requeued once, resumed, every rank exited 75, the reference weights.
check_preempted() {
  local id=$1 name=$2 log=$OUT/logs/$2.out
  [[ $(job_states "$id") == COMPLETED ]] || { show "$log"; fail "$name: $(job_states "$id")"; }
  [[ $(job_restarts "$id") == 1 ]] || { show "$log"; fail "$name: $(job_restarts "$id") restarts, expected 1"; }
  grep -Eq "^fold 0 epoch [0-9]+ step [0-9]+/[0-9]+: signal 10 received; checkpoint written, exiting for requeue" "$log" \
    || { show "$log"; fail "$name: no checkpoint on the signal"; }
  grep -q "preempted.*hsipipe wrote its checkpoint" "$log" || { show "$log"; fail "$name: not taken for a preemption"; }
  grep -q "resumed from checkpoint $OUT/$name/fold-0/checkpoint.pt at fold 0" "$log" || { show "$log"; fail "$name: did not resume"; }
  ! grep -Eq "srun: error: .*: (User defined signal 1|Terminated|Killed)" "$log" \
    || { show "$log"; fail "$name: a rank was ended by a signal instead of exiting 75"; }
  same_results "$OUT/run-2node" "$OUT/$name" || { show "$log"; fail "$name: resumed weights differ from the uninterrupted run's"; }
}

# a. SIGUSR1 to the batch shell (what --signal=B:USR1@N does): srun forwards it to both nodes' ranks.
b=$(train_job run-batch "${two[@]}")
# b. skewed: SIGUSR1 to one node's rank mid-training, to the other's later. Three jobs at a time.
skewed() {  # skewed I: one run, run-skew-I
  local i=$1 id first second mode log=$OUT/logs/run-skew-$1.out
  id=$(train_job "run-skew-$i" "${two[@]}")
  first=n$((1 + i % 2)) second=n$((2 - i % 2)) mode=$((i % 3))
  wait_for_line 120 "$log" "^fold 0 epoch 1/"
  signal_rank "$id" "$first"
  case $mode in
    0) sleep "0.$((RANDOM % 400 + 100))" ;;                                     # later, still training
    1) wait_for_line 60 "$log" "checkpoint written, exiting for requeue" ;;     # after training returned
    2) ;;                                                                       # at once
  esac
  signal_rank "$id" "$second"
  echo "run-skew-$i (job $id): SIGUSR1 to $first's rank, then to $second's $(case $mode in 0) echo "0.1-0.5 s later" ;; 1) echo "after training returned" ;; 2) echo "at once" ;; esac)"
  wait_jobs 180 "$id"
  check_preempted "$id" "run-skew-$i"
}
wait_for_line 120 "$OUT/logs/run-batch.out" "^fold 0 epoch 1/"
scancel --signal=USR1 --batch "$b"
pids=()
for i in $(seq 0 $((SKEWED - 1))); do
  skewed "$i" >"$W/skew-$i.txt" 2>&1 &
  pids+=($!)
  if ((${#pids[@]} == 3)); then
    for p in "${pids[@]}"; do wait "$p" || { cat "$W"/skew-*.txt; fail "a skewed preemption failed"; }; done
    pids=()
  fi
done
for p in ${pids[@]+"${pids[@]}"}; do wait "$p" || { cat "$W"/skew-*.txt; fail "a skewed preemption failed"; }; done
cat "$W"/skew-*.txt
wait_jobs 60 "$b"
grep -q "SIGUSR1: asking hsipipe to checkpoint and stop" "$OUT/logs/run-batch.out" || fail "the batch shell did not forward SIGUSR1"
check_preempted "$b" run-batch
ok "preemption: SIGUSR1 to the batch shell, and $SKEWED runs with SIGUSR1 reaching the nodes' ranks at different times: requeued once, resumed, the uninterrupted weights"
echo "PASS ($((SECONDS - T0)) s)"
