#!/usr/bin/env bash
# Run ON THE GPU DEVICE (no internet), from the repository root, after scripts/device_prepare.sh here
# filled .device-debs/ (carried along). Unpacks those Debian packages into a private prefix (never
# into /), configures hsipipe against the image's CUDA libtorch (PyTorch 2.x) with NCCL and without
# GDAL, builds with all cores, then runs synth -> decode -> folds -> train --device cuda --backend nccl
# (one rank: NCCL cannot put two ranks on one GPU) for one fold of hybridsn and of hu1d (and li3d for
# the planner check), and writes ONE result file: $OUT/device_result.json (+ logs next to it).
# Must finish well inside 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
LOG=$OUT/device_check.log
exec > >(tee -a "$LOG") 2>&1
stamp() { echo "[device_check +$(( $(date +%s) - T0 ))s] $*"; }

PREFIX=${HSIPIPE_DEVICE_PREFIX:-/tmp/hsipipe-prefix}
ML=$PREFIX/usr/lib/x86_64-linux-gnu
stamp "unpacking $(ls .device-debs/*.deb | wc -l) packages into $PREFIX"
mkdir -p "$PREFIX"
for f in .device-debs/*.deb; do dpkg-deb -x "$f" "$PREFIX"; done

# Relocated Open MPI (Debian's is configured for /usr): OPAL_* tell it where it now lives.
export OPAL_PREFIX=$PREFIX/usr OPAL_SYSCONFDIR=$PREFIX/etc/openmpi
export PATH=$PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$ML:$ML/openmpi/lib:$ML/hdf5/openmpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_plm_rsh_agent=false
ln -sf mpiexec.openmpi "$PREFIX/usr/bin/mpiexec"
PY=$(command -v python3)
TORCH_PREFIX=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_VERSION=$("$PY" -c 'import torch; print(torch.__version__)')
stamp "torch $TORCH_VERSION at $TORCH_PREFIX; nvcc $(nvcc --version | tail -1)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

BUILD=${HSIPIPE_DEVICE_BUILD:-build-device}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr;$ML/cmake" \
  -DHSIPIPE_WITH_GDAL=OFF -DHSIPIPE_BUILD_TESTS=OFF \
  -DHDF5_ROOT="$ML/hdf5/openmpi" -DHDF5_C_INCLUDE_DIR="$PREFIX/usr/include/hdf5/openmpi" \
  -DMPI_CXX_SKIP_MPICXX=ON -DMPI_CXX_COMPILER="$PREFIX/usr/bin/mpicxx.openmpi" \
  -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc.openmpi" -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpiexec.openmpi" \
  -DBoost_ROOT="$PREFIX/usr" -DBoost_NO_SYSTEM_PATHS=ON \
  -DEigen3_DIR="$PREFIX/usr/share/eigen3/cmake" -Dnlohmann_json_DIR="$PREFIX/usr/share/cmake/nlohmann_json" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 \
  > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
stamp "configured; building with $(nproc) cores"
PKG_CONFIG_PATH=$ML/pkgconfig cmake --build "$BUILD" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { tail -60 "$OUT/build.log"; exit 1; }
HS=$PWD/$BUILD/hsipipe
stamp "built: $($HS --version)"

W=/tmp/hsipipe-device-work
rm -rf "$W" && mkdir -p "$W"
"$HS" synth --out "$W/scene" --rows 145 --cols 145 --bands 200 --classes 8 --seed 7
run1() { mpiexec -n 1 "$HS" "$@"; }
run1 decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" --layout cube --patch 11 \
  --dtype float16 --normalize zscore --backend npy --out "$W/cube"
run1 decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" --layout pixel \
  --dtype float16 --normalize zscore --backend npy --out "$W/pixel"
"$HS" folds --cache "$W/cube" --k 5 --seed 42 --strategy stratified --out "$W/folds_cube.json"
"$HS" folds --cache "$W/pixel" --k 5 --seed 42 --strategy stratified --out "$W/folds_pixel.json"
stamp "cache and folds ready"

train_one() {  # model cache folds precision epochs
  local model=$1 cache=$2 folds=$3 prec=$4 epochs=$5
  local out=$W/run-$model-$prec
  stamp "train $model ($prec)"
  run1 train --cache "$cache" --folds "$folds" --model "$model" --fold 0 --epochs "$epochs" --batch 256 \
    --device cuda --backend nccl --precision "$prec" --threads 4 --out "$out" 2>&1 | tail -5
  "$HS" plan --model "$model" --bands 200 --patch "$([ "$cache" = "$W/pixel" ] && echo 1 || echo 11)" \
    --batch 256 --precision "$prec" > "$out/plan.txt" 2>&1 || true
  cp "$out/fold-0/epochs.jsonl" "$OUT/epochs-$model-$prec.jsonl" 2>/dev/null || true
  cp "$out/plan.txt" "$OUT/plan-$model-$prec.txt" 2>/dev/null || true
}
train_one hybridsn "$W/cube" "$W/folds_cube.json" fp32 5
train_one hybridsn "$W/cube" "$W/folds_cube.json" bf16 5
train_one li3d "$W/cube" "$W/folds_cube.json" fp32 3
train_one hu1d "$W/pixel" "$W/folds_pixel.json" fp32 10

"$PY" - "$W" "$OUT/device_result.json" <<'PYEOF'
import json, sys, glob, os, re
w, dest = sys.argv[1], sys.argv[2]
out = {"runs": []}
for run in sorted(glob.glob(os.path.join(w, "run-*"))):
    name = os.path.basename(run)[4:]
    rec = {"run": name}
    ep = os.path.join(run, "fold-0", "epochs.jsonl")
    if os.path.exists(ep):
        lines = [json.loads(l) for l in open(ep) if l.strip()]
        if lines:
            rec["last_epoch"] = lines[-1]
    m = os.path.join(run, "fold-0", "metrics.json")
    if os.path.exists(m):
        rec["metrics"] = {k: v for k, v in json.load(open(m)).items() if k in ("oa", "aa", "kappa")}
    p = os.path.join(run, "plan.txt")
    if os.path.exists(p):
        rec["plan"] = open(p).read()[-2000:]
    out["runs"].append(rec)
json.dump(out, open(dest, "w"), indent=2)
print(json.dumps(out, indent=2)[:6000])
PYEOF
stamp "done: $OUT/device_result.json"
