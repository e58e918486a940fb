# tests/slurm/common.sh: sourced by the slurm test drivers.
set -euo pipefail
: "${HSIPIPE_BIN:?HSIPIPE_BIN is not set (run through ctest)}"
: "${HSIPIPE_SOURCE_DIR:?HSIPIPE_SOURCE_DIR is not set (run through ctest)}"
PY=${HSIPIPE_PYTHON:-/usr/bin/python3}

# A prerequisite is missing: skip (ctest SKIP_RETURN_CODE 77), but fail under CI=true.
skip() {
  echo "SKIP: $*"
  if [[ ${CI:-} == true ]]; then echo "FAIL: CI=true requires it"; exit 1; fi
  exit 77
}
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# Requires the hsipipe commands named (they land from several engineers).
need_commands() {
  local c list
  list=$("$HSIPIPE_BIN" --help 2>/dev/null) || skip "$HSIPIPE_BIN does not run"
  for c in "$@"; do
    grep -q "^  $c " <<<"$list" || skip "hsipipe $c is not available in $HSIPIPE_BIN"
  done
}

# Flips every bit of the byte at OFFSET of FILE (size and everything else unchanged).
flip_byte() {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
path, off = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(off)
    b = f.read(1)
    f.seek(off)
    f.write(bytes([b[0] ^ 0xFF]))
PYEOF
}

# The states of job $1 (all its array tasks), sorted, unique, space separated: "COMPLETED", "PENDING RUNNING".
job_states() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
# How many times job $1 was requeued.
job_restarts() { scontrol show job "$1" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p' | head -1; }
# wait_jobs SECONDS JOBID...: until none of the jobs is pending, running or requeued; fails after SECONDS.
wait_jobs() {
  local limit=$1 t0=$SECONDS id busy
  shift
  while ((SECONDS - t0 < limit)); do
    busy=0
    for id in "$@"; do
      [[ $(job_states "$id") =~ PENDING|RUNNING|CONFIGURING|COMPLETING|REQUEUE|SUSPENDED ]] && busy=1
    done
    ((busy)) || return 0
    sleep 0.5
  done
  squeue
  fail "jobs $* not done after ${limit}s"
}
# wait_for_line SECONDS FILE REGEX: until a line of FILE matches (grep -E); fails after SECONDS.
wait_for_line() {
  local limit=$1 t0=$SECONDS
  until grep -Eq "$3" "$2" 2>/dev/null; do
    ((SECONDS - t0 < limit)) || fail "no line matching '$3' in $2 after ${limit}s"
    sleep 0.1
  done
}

# Open MPI between the nodes of the two-node test cluster: Slurm's PMIx names the ranks' nodes n1 and n2, so
# Open MPI takes them for two hosts and wants a network transport between them (shared memory stays within a
# node): TCP, here over the loopback, which the TCP transport skips unless told. The tests' one-node
# setting (OMPI_MCA_btl=self,vader) would make MPI_Init fail: "unable to reach each other".
two_node_mpi_env() { export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo; }

# same_summary SUMMARY_A SUMMARY_B K: two summary.json files with the same folds 0..K-1 and the same oa, aa and
# kappa for each, mean and std.
same_summary() {
  "$PY" - "$@" <<'PYEOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def folds(s):
    return sorted((f["fold"], f["oa"], f["aa"], f["kappa"]) for f in s["folds"])
fa, fb = folds(a), folds(b)
print(sys.argv[1] + ":", fa, "mean", a["mean"])
print(sys.argv[2] + ":", fb, "mean", b["mean"])
if [f[0] for f in fa] != list(range(int(sys.argv[3]))):
    sys.exit("%s does not cover folds 0..%d" % (sys.argv[1], int(sys.argv[3]) - 1))
if fa != fb or a["mean"] != b["mean"] or a["std"] != b["std"]:
    sys.exit("the summaries differ")
PYEOF
}

# synth_ini FILE SCENE_DIR K EPOCHS: the INI of the tests' runs on a synthetic scene made by `hsipipe synth --out
# SCENE_DIR`: a float32 pixel cache (npy, z-scores), K stratified folds, hu1d on the CPU, --deterministic.
synth_ini() {
  cat >"$1" <<INI
[scene.field]
path = $2/scene.hdr
labels = $2/labels.hdr

[decode]
layout = pixel
dtype = float32
backend = npy
normalize = zscore
no-progress = true

[folds]
k = $3
seed = 7
strategy = stratified

[train]
model = hu1d
epochs = $4
batch = 16
lr = 0.001
seed = 11
device = cpu
deterministic = true
INI
}
