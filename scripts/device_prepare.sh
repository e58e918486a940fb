#!/usr/bin/env bash
# Run HERE (the Debian build machine, with network to Debian's mirror): downloads into .device-debs/
# (git-ignored) the Debian packages the GPU device image lacks, so scripts/device_check.sh can unpack
# them there without internet: Open MPI, parallel HDF5, Boost.Program_options, matio, xxhash, JSON,
# Eigen, and their runtime libraries. GDAL is left out: the device build uses HSIPIPE_WITH_GDAL=OFF.
# The image brings CUDA 13, NCCL and PyTorch 2.x (its CUDA libtorch is what hsipipe builds against).
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.device-debs
PACKAGES=(
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libhwloc15 libhwloc-plugins libpmix2 libpmix-dev
  libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-dev libfabric1 libucx0 libpsm2-2
  libpsm-infinipath1 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libxnvctrl0
  libhdf5-openmpi-103-1 libhdf5-openmpi-dev libhdf5-103-1 libsz2 libaec0 libaec-dev
  libboost-program-options1.74.0 libboost-program-options1.74-dev libboost1.74-dev
  libmatio11 libmatio-dev libxxhash0 libxxhash-dev nlohmann-json3-dev libeigen3-dev
  libpng-dev libpng16-16 zlib1g zlib1g-dev libssl-dev
)
mkdir -p "$DEST"
if ! apt-cache show openmpi-bin >/dev/null 2>&1; then apt-get update -qq; fi
(cd "$DEST" && apt-get download -qq "${PACKAGES[@]}")
# the plain PyTorch script the GPU figures are compared with (shared/ does not travel to the device)
mkdir -p .device-bench
cp ../shared/bench/py_gpu_baseline.py .device-bench/
size=$(du -sm "$DEST" | cut -f1)
echo "device_prepare: $(ls "$DEST"/*.deb | wc -l) packages, ${size} MiB in $DEST"
if (( size >= 40 )); then
  echo "device_prepare: warning: ${size} MiB exceeds the 40 MiB travel budget" >&2
  exit 1
fi
echo "device_prepare: now call the device tool with carry [\"$DEST\", \".device-bench\"] and command 'bash scripts/device_check.sh'"
