#!/usr/bin/env bash
# Builds hsipipe (via setup.sh) and runs every test through ctest. Extra arguments go to ctest
# (e.g. scripts/test.sh -R folds). Real MPI ranks, real parallel HDF5, real Slurm daemons.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${HSIPIPE_BUILD_DIR:-build}
. scripts/mpi_env.sh  # one-node Open MPI settings (shared memory, no fabric probing), run as root
cd "$BUILD_DIR"
if (($#)); then
  exec ctest --output-on-failure --timeout 900 "$@"
fi
# Everything but the Slurm tests two at a time (MPI tests oversubscribe the 2 cores), then the Slurm
# tests alone: their preemption test signals a job mid-training and wants a machine that is not busy.
rc=0
ctest --output-on-failure --timeout 900 -j "$(nproc)" -LE slurm || rc=$?
ctest --output-on-failure --timeout 900 -L slurm || rc=$?
exit "$rc"
