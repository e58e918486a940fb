#!/usr/bin/env bash
# The whole scripts/submit.sh chain (decode -> folds -> train array -> report) on the two-node test cluster
# (HSIPIPE_SLURM_NODES=2), twice at once on a synthetic scene: on one node (decode with 1 rank, 2 ranks per
# fold) and on two (HSIPIPE_DECODE_NODES=2 with 4 decode ranks, HSIPIPE_TRAIN_NODES=2 with one rank per node
# per fold), each node staging into its own local directory. Every job COMPLETED, the two-node jobs on n1 and
# n2; the same data checksum, the same folds, the same weights at every epoch of every fold, and equal reports.
source "$(dirname "$0")/common.sh"
: "${SLURM_CONF:?run under scripts/slurm_test_cluster.sh run (HSIPIPE_SLURM_NODES=2)}"
need_commands synth decode folds stage train report
[[ $(sinfo -h -N -o '%N' | sort | tr '\n' ' ') == "n1 n2 " ]] || fail "not the two-node test cluster: $(sinfo -h -N -o '%N')"
T0=$SECONDS
W=$HSIPIPE_SLURM_DIR/work-two-chain
mkdir -p "$W"
H=$HSIPIPE_BIN

"$H" synth --out "$W/scene" --rows 24 --cols 24 --bands 16 --classes 4 --seed 5 >/dev/null
synth_ini "$W/chain.ini" "$W/scene" 2 6
# No HSIPIPE_LOCAL_DIR: each node stages into the SLURM_TMPDIR its TaskProlog gives it.
unset HSIPIPE_LOCAL_DIR SLURM_TMPDIR
export HSIPIPE_EXE=$H HSIPIPE_SHARED_DIR=$W/shared HSIPIPE_CPUS_PER_TASK=1 HSIPIPE_CHECKPOINT_EVERY=0
export HSIPIPE_TIME_DECODE=00:10:00 HSIPIPE_TIME_FOLDS=00:10:00 HSIPIPE_TIME_TRAIN=00:10:00 HSIPIPE_TIME_REPORT=00:10:00
two_node_mpi_env

submit() {  # submit NAME DECODE_NODES DECODE_TASKS TRAIN_NODES: the chain NAME; prints submit.sh's output
  HSIPIPE_DECODE_NODES=$2 HSIPIPE_DECODE_TASKS=$3 HSIPIPE_TRAIN_NODES=$4 HSIPIPE_TRAIN_TASKS=2 \
    "$HSIPIPE_SOURCE_DIR/scripts/submit.sh" --name "$1" "$W/chain.ini"
}
submit one 1 1 1
submit two 2 4 2
jobs_of() { (source "$W/shared/$1/jobs.env" && echo "$HSIPIPE_JOB_DECODE $HSIPIPE_JOB_FOLDS $HSIPIPE_JOB_TRAIN $HSIPIPE_JOB_REPORT"); }
read -r -a one <<<"$(jobs_of one)"
read -r -a two <<<"$(jobs_of two)"
[[ ${#one[@]} == 4 && ${#two[@]} == 4 ]] || fail "submit.sh did not record 4 jobs per chain"
show_logs() { local f; for f in "$W"/shared/*/logs/*; do echo "===== $f"; cat "$f"; done; }
trap 'rc=$?; if ((rc != 0 && rc != 77)); then show_logs; fi' EXIT
wait_jobs 400 "${one[@]}" "${two[@]}"
echo "both chains done after $((SECONDS - T0)) s"
for id in "${one[@]}" "${two[@]}"; do
  [[ $(job_states "$id") == COMPLETED ]] || fail "job $id ended $(job_states "$id")"
done
[[ $(scontrol show job "${two[2]}" | grep -c 'JobState=COMPLETED') == 2 ]] || fail "not 2 completed array tasks"
# The two-node chain's decode and every fold ran on both nodes; the one-node chain's on one.
nodelists() { scontrol show job "$1" | sed -n 's/^ *NodeList=\([^ ]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
for id in "${two[0]}" "${two[2]}"; do
  [[ $(nodelists "$id") == "n[1-2]" ]] || fail "two-node job $id ran on '$(nodelists "$id")'"
done
[[ $(nodelists "${one[2]}") =~ ^n[12]( n[12])?$ ]] || fail "one-node train tasks ran on '$(nodelists "${one[2]}")'"
ok "both chains COMPLETED; the two-node decode and fold tasks on n1 and n2"

# decode: 4 ranks on 2 nodes, the data checksum of 1 rank; the same folds.
field() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
[[ $(field "$W/shared/two/cache/manifest.json" ranks) == 4 && $(field "$W/shared/one/cache/manifest.json" ranks) == 1 ]] \
  || fail "decode ranks: two $(field "$W/shared/two/cache/manifest.json" ranks), one $(field "$W/shared/one/cache/manifest.json" ranks)"
c1=$(field "$W/shared/one/cache/manifest.json" data_checksum) c2=$(field "$W/shared/two/cache/manifest.json" data_checksum)
[[ $c1 == "$c2" ]] || fail "data checksum: 1 rank $c1, 2 nodes x 2 ranks $c2"
[[ $(field "$W/shared/one/folds.json" fingerprint) == "$(field "$W/shared/two/folds.json" fingerprint)" ]] || fail "the folds differ"
ok "decode on 2 nodes (4 ranks): data checksum $c2, as 1 rank; the same folds"

# staging: in each two-node fold task, n1 and n2 staged into their own local directories.
for f in 0 1; do
  log=$W/shared/two/logs/hsipipe-train-${two[2]}_$f.out
  for n in n1 n2; do
    grep -q "^stage\[$n\]: copied to $HSIPIPE_SLURM_DIR/tmp/$n/job-" "$log" || fail "fold $f: $n did not stage into its own local directory"
  done
done
ok "each node of each two-node fold staged into its own local directory"

# training: the same weights at every epoch of every fold, and equal reports.
hashes() { "$PY" -c "import json,sys; print(' '.join(json.loads(l)['parameter_hash'] for l in open(sys.argv[1])))" "$1"; }
for f in 0 1; do
  h1=$(hashes "$W/shared/one/run/fold-$f/epochs.jsonl") h2=$(hashes "$W/shared/two/run/fold-$f/epochs.jsonl")
  [[ -n $h1 && $h1 == "$h2" ]] || fail "fold $f: parameter hashes one node '$h1', two nodes '$h2'"
done
same_summary "$W/shared/one/run/summary.json" "$W/shared/two/run/summary.json" 2 || fail "the two-node report differs from the one-node report"
ok "two-node chain: the one-node chain's weights and report"
echo "PASS ($((SECONDS - T0)) s)"
