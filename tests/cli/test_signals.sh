#!/usr/bin/env bash
# Which commands survive SIGUSR1/SIGTERM (core/signals.hpp): `hsipipe train` records them for its whole life,
# also after the command returned; every other command keeps the default actions, so SIGTERM ends it. The
# signals land in the pause HSIPIPE_TEST_EXIT_MS makes after the command (train --help: no MPI, no cache).
set -euo pipefail
: "${HSIPIPE_BIN:?HSIPIPE_BIN is not set (run through ctest)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-signals.XXXXXX")
trap 'rm -rf "$W"' EXIT

# run_signalled SIGNAL CMD...: starts CMD with a 2 s pause after it, signals it in that pause (its main thread
# sleeping in clock_nanosleep, x86-64 system call 230, or nanosleep, 35), prints its exit status.
run_signalled() {
  local sig=$1 pid rc=0 call=""
  shift
  HSIPIPE_TEST_EXIT_MS=2000 "$@" >"$W/out" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do
    call=$(cut -d' ' -f1 "/proc/$pid/syscall" 2>/dev/null || true)
    [[ $call == 230 || $call == 35 ]] && break
    sleep 0.02
  done
  [[ $call == 230 || $call == 35 ]] || fail "$*: never reached the pause after the command"
  kill -"$sig" "$pid" || fail "$*: ended before the signal"
  wait "$pid" || rc=$?
  echo "$rc"
}

"$HSIPIPE_BIN" --help | grep -q '^  train ' || { echo "SKIP: train is not built"; [[ ${CI:-} != true ]] || exit 1; exit 77; }
[[ $(run_signalled USR1 "$HSIPIPE_BIN" train --help) == 0 ]] || fail "train --help died of SIGUSR1 after the command"
[[ $(run_signalled TERM "$HSIPIPE_BIN" train --help) == 0 ]] || fail "train --help died of SIGTERM after the command"
echo "ok: train survives SIGUSR1 and SIGTERM after the command returned"
[[ $(run_signalled TERM "$HSIPIPE_BIN" folds --help) == 143 ]] || fail "folds --help did not die of SIGTERM"
[[ $(run_signalled USR1 "$HSIPIPE_BIN" decode --help) == 138 ]] || fail "decode --help did not die of SIGUSR1"
echo "ok: other commands keep the default actions"
echo PASS
