#!/bin/bash
# jobs/on_node.sh EXE ARGS...: how jobs/lib.sh runs hsipipe, as every task of a job step (under srun or
# mpiexec, on each node) and in the batch shell. Not submitted by itself.
# The node-local directory is resolved here, on the node that runs EXE: HSIPIPE_LOCAL_DIR if set, else
# $SLURM_TMPDIR, else $TMPDIR, else /tmp, as this task's environment has them (a site's prolog sets a per-job
# SLURM_TMPDIR or TMPDIR on each node; one computed in the batch shell would be the first node's). Every
# "{node-local}" in ARGS becomes that directory, then this process becomes EXE (exec: the signals srun and
# mpiexec forward reach hsipipe itself).
#   jobs/on_node.sh --local-root   prints the directory instead
set -euo pipefail
root=${HSIPIPE_LOCAL_DIR:-${SLURM_TMPDIR:-${TMPDIR:-/tmp}}}
if [[ ${1:-} == --local-root ]]; then
  echo "$root"
  exit 0
fi
[[ $# -gt 0 ]] || { echo "usage: $0 EXE ARGS... | --local-root" >&2; exit 2; }
args=()
for a in "$@"; do args+=("${a//\{node-local\}/$root}"); done
exec "${args[@]}"
