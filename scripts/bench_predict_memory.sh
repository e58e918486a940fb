#!/usr/bin/env bash
# Peak memory of `hsipipe predict` against the scene's size (not a test; issue 46, item 3). predict streams each
# scene in chunks of rows (train/predict.cpp chunk_rows: at most ~64 MiB of float32 source rows per chunk, two in
# flight per rank: one read and transformed while the model runs on the other), so its memory should not grow
# with the scene, except by the class map (2 bytes a pixel, per rank for its rows, and on rank 0 for the whole
# scene) and, with --probabilities, C float16 scores a pixel on each rank for its rows.
#
# Trains hu1d 1 epoch on a small float32 scene (`hsipipe synth`), then maps, on 2 ranks, float32 scenes of
# BENCH_COLS (1250) columns x 200 bands and each of BENCH_ROWS rows (250 1000 2000 4500 6000 10000: 0.25 to 10 GB;
# the disk needs room for the largest), and records each rank's peak resident set (GNU time's %M). The chunk grows
# with the scene up to its cap (scenes of 4 GiB), so the fit peak = a + b * GB is made on the scenes of 4 to 9.5 GB
# and scaled to 10 GB, and set against the 10 GB scene measured. BENCH_PROBABILITIES=1 adds --probabilities.
#   HSIPIPE_BIN   the executable (default build/hsipipe); BENCH_DIR where the scenes go (default $TMPDIR or /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi_env.sh
BIN=${HSIPIPE_BIN:-build/hsipipe}
COLS=${BENCH_COLS:-1250} ROWS_LIST=${BENCH_ROWS:-"250 1000 2000 4500 6000 10000"} BANDS=200
[ -x "$BIN" ] || { echo "bench_predict_memory: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench_predict_memory: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 2; }
BIN=$(realpath "$BIN")
T=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/hsipipe-bench-predict-mem.XXXXXX")
trap 'rm -rf "$T"' EXIT
PROB=(); [ "${BENCH_PROBABILITIES:-0}" = 1 ] && PROB=(--probabilities)

"$BIN" synth --out "$T/train" --rows 64 --cols 64 --bands "$BANDS" --dtype float32 --seed 5 > /dev/null
mpiexec --oversubscribe -n 2 "$BIN" decode --scene "$T/train/scene.hdr" --labels "$T/train/labels.hdr" --out "$T/cache" --no-progress > /dev/null
"$BIN" folds --cache "$T/cache" --k 2 --out "$T/folds.json" > /dev/null
mpiexec --oversubscribe -n 2 "$BIN" train --cache "$T/cache" --folds "$T/folds.json" --model hu1d --fold 0 --epochs 1 \
  --device cpu --quiet --out "$T/run" > /dev/null
echo "== hsipipe predict --fold 0 of hu1d (200 bands), 2 ranks, float32 scenes of $COLS columns ${PROB[*]}"
printf '%-28s %10s %14s %14s %10s\n' scene GB "rank 0 MiB" "rank 1 MiB" "wall s"
: > "$T/points"
for rows in $ROWS_LIST; do
  rm -rf "$T/s" "$T/maps"
  "$BIN" synth --out "$T/s" --rows "$rows" --cols "$COLS" --bands "$BANDS" --dtype float32 --seed 6 > /dev/null
  gb=$(awk -v b="$(stat -c %s "$T/s/scene.img")" 'BEGIN { printf "%.3f", b / 1e9 }')
  t0=$(date +%s.%N)
  # shellcheck disable=SC2016  # expanded by each rank's shell: its own rank
  mpiexec --oversubscribe -n 2 bash -c '/usr/bin/time -f "peak_kb %M" -o "$0.$OMPI_COMM_WORLD_RANK" "${@}"' "$T/rss" \
    "$BIN" predict --run "$T/run" --fold 0 --scene "$T/s/scene.hdr" --device cpu --quiet "${PROB[@]}" --out "$T/maps" > /dev/null
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  r0=$(awk '/peak_kb/ { printf "%.1f", $2 / 1024 }' "$T/rss.0") r1=$(awk '/peak_kb/ { printf "%.1f", $2 / 1024 }' "$T/rss.1")
  printf '%-28s %10s %14s %14s %10s\n' "$rows x $COLS x $BANDS float32" "$gb" "$r0" "$r1" "$wall"
  echo "$gb $r0 $r1" >> "$T/points"
done
/usr/bin/python3 - "$T/points" "$COLS" "$BANDS" << 'EOF'
import sys
import numpy as np
p = np.loadtxt(sys.argv[1], ndmin=2)
row_bytes = int(sys.argv[2]) * int(sys.argv[3]) * 4
# train/predict.cpp chunk_rows: about rows / 64 a chunk, capped at 64 MiB of float32 rows: the chunk, and with it
# the memory, grows with the scene up to 64 x 64 MiB = 4 GiB, and stays there beyond
capped = p[:, 0] * 1e9 / 64 >= (64 << 20) - row_bytes
for col, who in ((1, "rank 0"), (2, "rank 1")):
    fit = capped & (p[:, 0] < 9.5)
    if fit.sum() >= 2:
        b, a = np.polyfit(p[fit, 0], p[fit, col], 1)
        print(f"{who}: chunks at their 64 MiB cap (scenes of {', '.join(f'{g:.2f}' for g in p[fit, 0])} GB): peak = {a:.1f} MiB + "
              f"{b:.1f} MiB per GB; scaled to a 10 GB scene: {a + 10 * b:.0f} MiB")
    else:
        b, a = np.polyfit(p[:, 0], p[:, col], 1)
        print(f"{who}: (no two scenes of 4-9.5 GB: chunks below their cap) peak = {a:.1f} MiB + {b:.1f} MiB per GB, an upper "
              f"bound at 10 GB: {a + 10 * b:.0f} MiB")
    for g, m in zip(p[:, 0], p[:, col]):
        if g >= 9.5:
            print(f"{who}: measured on the {g:.2f} GB scene: {m:.0f} MiB")
EOF
