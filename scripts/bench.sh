#!/usr/bin/env bash
# bench.sh: runs the decode, loader, training and cross-validation benchmarks in one go and writes the
# benchmark page (docs/BENCHMARKS.md): the ratios against the issues' targets and a throughput plot
# (docs/benchmarks.png) first, then every figure next to the baseline measured in the same run and a machine
# description; every input of the page, every repeat included, goes to docs/benchmarks.json.
# and the whole-scene mapping benchmark (bench_predict.sh; BENCH_PREDICT_ROWS/COLS, default 1024 x 1024).
# Not a test. Run it on a quiet machine: the figures are only as good as the machine is idle (the page
# records the load average before the first benchmark, and says so when the machine was busy).
#
#   scripts/bench.sh [--out PAGE.md] [--plot PLOT.png] [--remote] [--work DIR] [--report-only DIR|DATA.json]
#     --out FILE         the page to write (default docs/BENCHMARKS.md; also BENCH_OUT)
#     --plot FILE        the PNG (default: benchmarks.png next to the page)
#                        (the data file is always benchmarks.json next to the page)
#     --remote           also run scripts/bench_remote.sh (needs nginx; slow); without it the page keeps the
#                        "Remote scenes" section of docs/BENCHMARKS.md as it is (it says when it was measured)
#     --work DIR         keep each benchmark's log and JSON in DIR (default: a temporary directory, removed)
#     --report-only DIR  run nothing: rewrite the page and plot from a DIR an earlier --work run kept, or from
#                        a benchmarks.json an earlier report wrote (the page's own data file)
#   HSIPIPE_BIN        the executable (default build/hsipipe)
#   Sizes: each script's defaults are the issues' sizes. BENCH_ROWS/BENCH_COLS/BENCH_BANDS, BENCH_REPEAT, BENCH_DECODE_REPEAT,
#   BENCH_BATCHES, BENCH_EPOCHS, BENCH_LABELED_FRACTION (and bench_train's ROWS/COLS/BANDS/EPOCHS) are passed
#   through for smoke tests at small sizes, and BENCH_REMOTE_SIZE="ROWS COLS BANDS" to bench_remote.sh; the page
#   then says, in bold, that sizes were overridden.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
PY=/usr/bin/python3
OUT_MD=${BENCH_OUT:-docs/BENCHMARKS.md}
PLOT='' REMOTE=0 WORK='' REPORT_ONLY=''
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT_MD=$2; shift 2 ;;
    --plot) PLOT=$2; shift 2 ;;
    --remote) REMOTE=1; shift ;;
    --work) WORK=$2; shift 2 ;;
    --report-only) REPORT_ONLY=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$PLOT" ] || PLOT=$(dirname "$OUT_MD")/benchmarks.png
mkdir -p "$(dirname "$OUT_MD")" "$(dirname "$PLOT")"
# the remote section is kept from the repository's page (read now: OUT_MD may be that page)
REMOTE_FROM=$(mktemp "${TMPDIR:-/tmp}/hsipipe-bench-remote-section.XXXXXX")
trap 'rm -f "$REMOTE_FROM"' EXIT
[ -f docs/BENCHMARKS.md ] && cp docs/BENCHMARKS.md "$REMOTE_FROM"

report() {  # work dir
  "$PY" scripts/bench_report.py report "$1" --out "$OUT_MD" --plot "$PLOT" --remote-from "$REMOTE_FROM"
  echo "bench.sh: wrote $OUT_MD and $PLOT"
}
if [ -n "$REPORT_ONLY" ]; then
  report "$REPORT_ONLY"
  exit 0
fi

BIN=${HSIPIPE_BIN:-build/hsipipe}
[ -x "$BIN" ] || { echo "bench.sh: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
export HSIPIPE_BIN
HSIPIPE_BIN=$(realpath "$BIN")
if [ -n "$WORK" ]; then
  mkdir -p "$WORK"
  WORK=$(realpath "$WORK")
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-bench-all.XXXXXX")
  trap 'rm -f "$REMOTE_FROM"; rm -rf "$WORK"' EXIT
fi
rm -f "$WORK/steal.txt"  # this run's (a reused WORK keeps an earlier one's)
. scripts/mpi_env.sh  # one-node Open MPI settings (shared memory, no fabric probing), run as root

# Let the load of whatever ran just before settle (up to 3 minutes): the page records the load average it
# starts at and calls the run busy above half the cores.
for i in $(seq 36); do
  awk -v c="$(nproc)" '{ exit !($1 > 0.5 * c) }' /proc/loadavg || break
  [ "$i" = 1 ] && echo "bench.sh: waiting for the load average ($(cut -d' ' -f1 /proc/loadavg)) to settle"
  sleep 5
done
"$PY" scripts/bench_report.py machine "$WORK/machine.json" --bin "$HSIPIPE_BIN" --tmp "${TMPDIR:-/tmp}"
T0=$(date +%s)
# CPU steal time so far (/proc/stat, all CPUs, in ticks): on a virtual machine, the time its virtual CPUs were
# ready to run while the host ran something else; 0 where the kernel does not count it
steal_ticks() { awk '$1 == "cpu" { print ($9 == "" ? 0 : $9); exit }' /proc/stat; }
step() {  # name script [args]: runs one benchmark, its output shown and kept in WORK/name.log
  local name=$1
  shift
  echo
  echo "==== bench.sh: $name ($*), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  local t0 s0 s1
  t0=$(date +%s)
  s0=$(steal_ticks)
  if ! BENCH_JSON="$WORK/$name.json" "$@" 2>&1 | tee "$WORK/$name.log"; then
    echo "bench.sh: $name failed (log: $WORK/$name.log)" >&2
    exit 1
  fi
  # the CPU time the hypervisor gave to others while this benchmark ran (all CPUs), for the page
  s1=$(awk -v a="$s0" -v b="$(steal_ticks)" -v hz="$(getconf CLK_TCK)" 'BEGIN { print (b - a) / hz }')
  echo "$name $(( $(date +%s) - t0 )) $s1" >> "$WORK/steal.txt"
  echo "==== bench.sh: $name took $(( $(date +%s) - t0 )) s, CPU steal $s1 s"
}
step decode scripts/bench_decode.sh
step loader scripts/bench_loader.sh
OUT="$WORK/train-run" step train scripts/bench_train.sh
step cv scripts/bench_cv.sh
OUT="$WORK/predict-run" ROWS=${BENCH_PREDICT_ROWS:-1024} COLS=${BENCH_PREDICT_COLS:-1024} step predict scripts/bench_predict.sh
rm -rf "$WORK/predict-run"
if [ "$REMOTE" = 1 ]; then
  # shellcheck disable=SC2086  # BENCH_REMOTE_SIZE is "ROWS COLS BANDS" (bench_remote.sh's arguments)
  BENCH_DIR="$WORK/remote-run" step remote scripts/bench_remote.sh ${BENCH_REMOTE_SIZE:-}
  rm -rf "$WORK/remote-run"
fi
rm -rf "$WORK/train-run"

# what the page must say about this run: duration, load at the end, sizes overridden by the environment
"$PY" - "$WORK/run.json" "$T0" "$WORK/steal.txt" <<'PY'
import json, os, sys, time
keys = ("BENCH_PREDICT_ROWS", "BENCH_PREDICT_COLS", "BENCH_ROWS", "BENCH_COLS", "BENCH_BANDS", "BENCH_REPEAT", "BENCH_DECODE_REPEAT", "BENCH_BATCHES", "BENCH_EPOCHS",
        "BENCH_LABELED_FRACTION", "BENCH_REMOTE_SIZE", "ROWS", "COLS", "BANDS", "EPOCHS", "BATCH", "THREADS")
steal = {}
if os.path.exists(sys.argv[3]):
    for line in open(sys.argv[3]):
        name, wall, st = line.split()
        steal[name] = {"wall_s": float(wall), "steal_s": float(st)}
json.dump({"minutes": (time.time() - float(sys.argv[2])) / 60, "steal": steal,
           "overrides": {k: os.environ[k] for k in keys if os.environ.get(k)}}, open(sys.argv[1], "w"), indent=2)
PY
report "$WORK"
