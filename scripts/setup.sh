#!/usr/bin/env bash
# Installs the Debian packages hsipipe needs (no apt call when all are present), then configures and
# builds Release into build/ (the executable is build/hsipipe). Idempotent; safe to run again. It prints a
# few lines (what it installs, the build's percentage, where the log is); apt's and the compiler's output go
# to BUILD_DIR/setup.log, whose tail is printed when a step fails.
#   HSIPIPE_BUILD_DIR   build folder (default build)
#   HSIPIPE_CMAKE_ARGS  extra CMake arguments
#   HSIPIPE_LOG_DIR     where setup.log goes (default: the build folder)
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

LOG_DIR=${HSIPIPE_LOG_DIR:-${HSIPIPE_BUILD_DIR:-build}}
mkdir -p "$LOG_DIR"
LOG=$(cd "$LOG_DIR" && pwd)/setup.log
: > "$LOG"
# On failure: what failed and the tail of the full log (the compiler's or apt's own words).
fail() {
  echo "setup: $1 failed; the last lines of $LOG:" >&2
  tail -n 40 "$LOG" >&2
  exit 1
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages (apt-get; about 2 GB on a fresh machine): ${missing[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    >>"$LOG" 2>&1 || fail "apt-get install"
else
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
fi

BUILD_DIR=${HSIPIPE_BUILD_DIR:-build}
JOBS=$(nproc)
# libtorch translation units need ~1.5 GiB each: keep parallelism within memory.
MEM_GB=$(awk '/MemTotal/ {print int($2/1048576)}' /proc/meminfo)
(( JOBS > MEM_GB / 2 )) && JOBS=$(( MEM_GB / 2 > 0 ? MEM_GB / 2 : 1 ))
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${HSIPIPE_CMAKE_ARGS:-} >>"$LOG" 2>&1 || fail "cmake configure"
# The compiler's output goes to the log; the terminal gets one updating line (a new line per 10% when it is
# not a terminal, so CI logs stay short).
echo "setup: building $BUILD_DIR with $JOBS jobs (full log: $LOG)"
set +e
cmake --build "$BUILD_DIR" -j "$JOBS" 2>&1 | tee -a "$LOG" | awk -v tty="$([ -t 1 ] && echo 1 || echo 0)" '
  match($0, /^\[ *[0-9]+%\]/) {
    pct = substr($0, RSTART + 1, RLENGTH - 2) + 0
    if (tty) { printf "\rsetup: build %3d%%", pct; fflush() }
    else if (pct >= last + 10 || (pct == 100 && last < 100)) { printf "setup: build %3d%%\n", pct; last = pct; fflush() }
  }
  END { if (tty) printf "\n" }'
rc=${PIPESTATUS[0]}
set -e
((rc == 0)) || fail "the build"
echo "setup: built $BUILD_DIR/hsipipe ($("$BUILD_DIR"/hsipipe --version))"
