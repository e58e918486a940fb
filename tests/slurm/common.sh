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
