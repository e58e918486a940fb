#!/usr/bin/env bash
# Builds hsipipe (via setup.sh) and runs every test through ctest. Extra arguments go to ctest
# (e.g. scripts/test.sh -R folds). Real MPI ranks, real parallel HDF5, real Slurm daemons.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${HSIPIPE_BUILD_DIR:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 "$@"
