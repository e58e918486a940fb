#!/usr/bin/env bash
# Installs the Debian packages hsipipe needs (no apt call when all are present), then configures and
# builds Release into build/ (the executable is build/hsipipe). Idempotent; safe to run again.
#   HSIPIPE_BUILD_DIR   build folder (default build)
#   HSIPIPE_CMAKE_ARGS  extra CMake arguments
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake pkg-config git
  libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
  libtorch-dev libboost-program-options-dev catch2
  libopenblas0-openmp  # libtorch's CPU matrix products: Debian's default libblas.so.3 is the reference BLAS (hu1d training 5.9x slower)
  libmatio-dev libgdal-dev gdal-bin libxxhash-dev nlohmann-json3-dev libeigen3-dev libssl-dev libpng-dev
  python3 python3-numpy python3-scipy python3-h5py python3-spectral python3-torch python3-gdal python3-matplotlib python3-xxhash
  slurm-wlm munge
  nginx-light  # tests/remote: HTTP range server on 127.0.0.1 (the S3 server s3rver comes from npm)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all Debian packages present"
fi

BUILD_DIR=${HSIPIPE_BUILD_DIR:-build}
JOBS=$(nproc)
# libtorch translation units need ~1.5 GiB each: keep parallelism within memory.
MEM_GB=$(awk '/MemTotal/ {print int($2/1048576)}' /proc/meminfo)
(( JOBS > MEM_GB / 2 )) && JOBS=$(( MEM_GB / 2 > 0 ? MEM_GB / 2 : 1 ))
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${HSIPIPE_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built $BUILD_DIR/hsipipe ($("$BUILD_DIR"/hsipipe --version))"
