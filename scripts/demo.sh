#!/usr/bin/env bash
# The main job end to end on the embedded default, the synthetic field scene (README's first command):
# set-up if needed, `synth`, `decode` with 2 ranks, `folds`, `train --fold all` with 2 ranks, then the
# summary table (per fold and mean +- std of OA, AA, kappa), the cache and folds fingerprints, the time
# split and where the maps and confusion matrices are. Options come from config/demo.ini.
#   HSIPIPE_BUILD_DIR  build folder (default build)     HSIPIPE_DEMO_RANKS  ranks (default 2)
#   Files go to out/demo (the paths in config/demo.ini).
set -euo pipefail
cd "$(dirname "$0")/.."
T_START=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
step() { echo; echo "== [$(elapsed "$T_START") s] $*"; }

step "set-up (scripts/setup.sh: Debian packages, Release build)"
scripts/setup.sh
BIN=${HSIPIPE_BUILD_DIR:-build}/hsipipe
RANKS=${HSIPIPE_DEMO_RANKS:-2}
OUT=out/demo
CONFIG=config/demo.ini
. scripts/mpi_env.sh  # one-node Open MPI settings (shared memory, no fabric probing), run as root
MPI=(mpiexec -n "$RANKS" --oversubscribe)
mkdir -p "$OUT"

step "synth: the synthetic field scene -> $OUT/scene.hdr, $OUT/labels.hdr"
if [ -f "$OUT/scene.hdr" ] && [ -f "$OUT/labels.hdr" ]; then
  echo "already there (delete $OUT/scene.* and $OUT/labels.* to regenerate)"
else
  "$BIN" synth --out "$OUT"
fi
"$BIN" info "$OUT/labels.hdr" | tail -n 12

step "decode with $RANKS ranks (phase one: decode once) -> $OUT/cache"
t0=$(date +%s.%N)
# --force: this is the demo's own cache, reused when it is current, rebuilt when an earlier run left one
# from other parameters or an older cache format (decode refuses to replace a cache without it)
"${MPI[@]}" "$BIN" decode --config "$CONFIG" --force
T_DECODE=$(elapsed "$t0")

step "folds -> $OUT/folds.json"
"$BIN" folds --config "$CONFIG"

step "train --fold all with $RANKS ranks (phase two: every fold reuses the decoded cache) -> $OUT/run"
t0=$(date +%s.%N)
# --force: the demo's own run directory, replaced when an earlier demo left one (train refuses to overwrite it)
"${MPI[@]}" "$BIN" train --config "$CONFIG" --fold all --force
T_TRAIN=$(elapsed "$t0")

step "summary"
/usr/bin/python3 - "$OUT" "$T_DECODE" "$T_TRAIN" <<'PY'
import glob, json, os, sys
out, t_decode, t_train = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
manifest = json.load(open(os.path.join(out, "cache", "manifest.json")))
folds = json.load(open(os.path.join(out, "folds.json")))
summary = json.load(open(os.path.join(out, "run", "summary.json")))
print(f"{'fold':>6} {'OA':>8} {'AA':>8} {'kappa':>8} {'n':>7} {'train s':>8} {'valid s':>8}")
for f in summary["folds"]:
    m = json.load(open(os.path.join(out, "run", f"fold-{f['fold']}", "metrics.json")))
    train = m.get("train", {})
    epochs = train.get("epochs", [])
    evaluation = sum(e.get("time_s", {}).get("evaluation", 0.0) for e in epochs)
    print(f"{f['fold']:>6} {f['oa']:8.4f} {f['aa']:8.4f} {f['kappa']:8.4f} {f.get('n', 0):7d} "
          f"{train.get('train_seconds', 0.0):8.1f} {evaluation:8.1f}")
mean, std = summary["mean"], summary["std"]
print(f"{'mean':>6} {mean['oa']:8.4f} {mean['aa']:8.4f} {mean['kappa']:8.4f}")
print(f"{'+-std':>6} {std['oa']:8.4f} {std['aa']:8.4f} {std['kappa']:8.4f}   (sample std, n-1)")
print()
print(f"cache:  {os.path.join(out, 'cache')}  layout {manifest['layout']} {manifest['dtype']} "
      f"{manifest['n_samples']} samples x {manifest['n_bands']} bands, data_checksum {manifest['data_checksum']}")
print(f"folds:  {os.path.join(out, 'folds.json')}  {folds['strategy']} k={folds['k']} seed={folds['seed']}, "
      f"fingerprint {folds['fingerprint']}")
print(f"time:   decode {t_decode:.1f} s (once) | train --fold all {t_train:.1f} s "
      f"({', '.join(str(round(json.load(open(p)).get('train', {}).get('train_seconds', 0.0), 1)) for p in sorted(glob.glob(os.path.join(out, 'run', 'fold-*', 'metrics.json'))))} s per fold)")
print(f"maps:   {os.path.join(out, 'run', 'fold-*', 'map.png')}")
print(f"confusion matrices: {os.path.join(out, 'run', 'fold-*', 'confusion.png')} (and confusion.csv)")
print(f"summary: {os.path.join(out, 'run', 'summary.md')}")
PY
echo
echo "demo finished in $(elapsed "$T_START") s"
