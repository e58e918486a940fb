#!/usr/bin/env bash
# Run ON THE GPU DEVICE (no internet), from the repository root, after scripts/device_prepare.sh here
# filled .device-debs/ (carried along). Unpacks those Debian packages into a private prefix (never
# into /), configures hsipipe against the image's CUDA libtorch (PyTorch 2.x) with NCCL and without
# GDAL, builds with all cores, then runs synth -> decode -> folds -> train --device cuda --backend nccl
# (one rank: NCCL cannot put two ranks on one GPU) for fold 0 of every model at fp32 and bf16, each beside
# the plain PyTorch script ../shared/bench/py_gpu_baseline.py (carried as .device-bench/, see
# device_prepare.sh) on the same cache and folds file, and writes ONE result file:
# $OUT/device_result.json (figures, ratios, planner vs measured memory, both accuracy figures) and
# $OUT/device_table.md (the table for docs/BENCHMARKS.md), logs next to them. Budget: 6 minutes.
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
# Debian's -dev packages link some libraries by absolute path (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.x),
# which the image may not have: point every absolute link that has a target inside the prefix there.
find "$PREFIX" -type l -lname '/*' | while read -r l; do
  t=$(readlink "$l")
  [ -e "$PREFIX$t" ] && ln -sf "$PREFIX$t" "$l"
done

# Relocated Open MPI (Debian's is configured for /usr): OPAL_* tell it where it now lives.
export OPAL_PREFIX=$PREFIX/usr OPAL_SYSCONFDIR=$PREFIX/etc/openmpi
export PATH=$PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$ML:$PREFIX/lib/x86_64-linux-gnu:$ML/openmpi/lib:$ML/hdf5/openmpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# PMIx looks for a compression library for its messages; one node needs none: no warning on every mpiexec
export PMIX_MCA_pcompress_base_silence_warning=1
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
# --bind-to none: Open MPI binds one or two ranks to a core each, and the loader threads would share it
run1() { mpiexec -n 1 --bind-to none "$HS" "$@"; }
run1 decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" --layout cube --patch 11 \
  --dtype float16 --normalize zscore --backend npy --out "$W/cube"
run1 decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" --layout pixel \
  --dtype float16 --normalize zscore --backend npy --out "$W/pixel"
"$HS" folds --cache "$W/cube" --k 5 --seed 42 --strategy stratified --out "$W/folds_cube.json"
"$HS" folds --cache "$W/pixel" --k 5 --seed 42 --strategy stratified --out "$W/folds_pixel.json"
stamp "cache and folds ready"

BASELINE=.device-bench/py_gpu_baseline.py
one() {  # model cache folds patch precision epochs: hsipipe, its plan, then the PyTorch script
  local model=$1 cache=$2 folds=$3 patch=$4 prec=$5 epochs=$6
  local out=$W/run-$model-$prec
  stamp "train $model ($prec, $epochs epochs)"
  run1 train --cache "$cache" --folds "$folds" --model "$model" --fold 0 --epochs "$epochs" --batch 256 \
    --device cuda --backend nccl --precision "$prec" --out "$out" > "$OUT/train-$model-$prec.log" 2>&1 || {
    tail -20 "$OUT/train-$model-$prec.log"; }
  grep -E "epoch|error" "$OUT/train-$model-$prec.log" | tail -3 || true
  "$HS" plan --device cuda --model "$model" --bands 200 --patch "$patch" --batch 256 --classes 8 --precision "$prec" \
    --json > "$out.plan.json" 2> "$OUT/plan-$model-$prec.err" || true
  if [ -f "$BASELINE" ]; then
    stamp "pytorch script $model ($prec)"
    timeout 120 "$PY" "$BASELINE" "$cache" "$folds" "$model" "$prec" "$epochs" 256 8 > "$out.baseline.json" \
      2> "$OUT/baseline-$model-$prec.err" || tail -5 "$OUT/baseline-$model-$prec.err"
  fi
}
for prec in fp32 bf16; do
  one hybridsn "$W/cube" "$W/folds_cube.json" 11 "$prec" "$([ "$prec" = fp32 ] && echo 5 || echo 3)"
  one li3d "$W/cube" "$W/folds_cube.json" 11 "$prec" 3
  one hamida3d "$W/cube" "$W/folds_cube.json" 11 "$prec" 3
  one hu1d "$W/pixel" "$W/folds_pixel.json" 1 "$prec" 3
  one mlp "$W/pixel" "$W/folds_pixel.json" 1 "$prec" 3
done
"$PY" scripts/device_report.py "$W" "$OUT/device_result.json" "$OUT/device_table.md"
stamp "done: $OUT/device_result.json"
