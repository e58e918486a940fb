#!/usr/bin/env bash
# Scene-list benchmark (not a test; issue 46, item 1). Makes, with `hsipipe synth`, in a temporary directory
# (outside the repository):
#   - BENCH_SCENES (150) scenes of BENCH_ROWS x BENCH_COLS x BENCH_BANDS (64 x 80 x 100) int16 BIL, with labels,
#     named one a line in a scene list;
#   - one scene of the same total size: (BENCH_SCENES * BENCH_ROWS) x BENCH_COLS x BENCH_BANDS;
# and times, from the page cache, `mpiexec -n 2 hsipipe decode` of each (pixel layout, z-score, npy) and then
# `hsipipe verify` of its cache (one process: verify is rank-local), without labels (every pixel a sample: the
# same samples in both) and with them. Each figure is the best of BENCH_REPEAT
# (5) rounds, the two inputs taking turns within a round. Goal: the list's decode within 1.5x the single
# scene's.
#   HSIPIPE_BIN   the executable (default build/hsipipe)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi_env.sh
BIN=${HSIPIPE_BIN:-build/hsipipe}
N=${BENCH_SCENES:-150} ROWS=${BENCH_ROWS:-64} COLS=${BENCH_COLS:-80} BANDS=${BENCH_BANDS:-100} REPEAT=${BENCH_REPEAT:-5}
[ -x "$BIN" ] || { echo "bench_scene_list: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
BIN=$(realpath "$BIN")
T=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-bench-list.XXXXXX")
trap 'rm -rf "$T"' EXIT

echo "== $N scenes of $ROWS x $COLS x $BANDS int16, and one of $((N * ROWS)) x $COLS x $BANDS, in $T"
: > "$T/scenes.txt"
for i in $(seq 1 "$N"); do
  "$BIN" synth --out "$T/s$i" --rows "$ROWS" --cols "$COLS" --bands "$BANDS" --seed "$i" > /dev/null
  echo "s$i/scene.hdr s$i/labels.hdr s$i" >> "$T/scenes.txt"
done
"$BIN" synth --out "$T/one" --rows $((N * ROWS)) --cols "$COLS" --bands "$BANDS" --seed 1 > /dev/null
cat "$T"/s*/scene.img "$T"/one/scene.img > /dev/null  # warm the page cache
echo "data: list $(du -cb "$T"/s*/scene.img | tail -1 | cut -f1) B in $N files, single $(stat -c %s "$T/one/scene.img") B"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.4f", b - a }'; }
best() { printf '%s\n' "$@" | sort -g | head -n1; }
# MODE labels: the synthetic labels (the list's scenes hold fewer labeled pixels than the one scene's parcels:
# the sample counts are printed); MODE all: no labels, every pixel a sample (a prediction cache: the same samples
# in both, and the validity pass decodes every scene once more)
bench_mode() {
  local mode=$1 list=$T/scenes.txt one_labels=(--labels "$T/one/labels.hdr")
  if [ "$mode" = all ]; then list=$T/scenes_nolabels.txt one_labels=(); fi
  local LIST_DECODE=(mpiexec --oversubscribe -n 2 "$BIN" decode --scene-list "$list" --out "$T/cache_list" --no-progress)
  local ONE_DECODE=(mpiexec --oversubscribe -n 2 "$BIN" decode --scene "$T/one/scene.hdr" "${one_labels[@]}"
                    --out "$T/cache_one" --no-progress)
  echo "== $mode: list:   ${LIST_DECODE[*]//$T/\$T}; hsipipe verify \$T/cache_list"
  echo "== $mode: single: ${ONE_DECODE[*]//$T/\$T}; hsipipe verify \$T/cache_one"
  local ld=() lv=() od=() ov=() which cmd d v t0
  for _ in $(seq "$REPEAT"); do
    for which in list one; do
      rm -rf "$T/cache_$which"
      if [ "$which" = list ]; then cmd=("${LIST_DECODE[@]}"); else cmd=("${ONE_DECODE[@]}"); fi
      t0=$(now); "${cmd[@]}" > "$T/$which.log"; d=$(since "$t0")
      t0=$(now); "$BIN" verify "$T/cache_$which" > "$T/$which.verify.log"; v=$(since "$t0")
      grep -q ": OK" "$T/$which.verify.log" || { cat "$T/$which.verify.log"; exit 1; }
      if [ "$which" = list ]; then ld+=("$d"); lv+=("$v"); else od+=("$d"); ov+=("$v"); fi
    done
  done
  grep -h "scene files:" "$T/list.log" || true
  local nl no
  nl=$(sed -n 's/^decode: wrote .* (\([0-9]*\) samples.*/\1/p' "$T/list.log")
  no=$(sed -n 's/^decode: wrote .* (\([0-9]*\) samples.*/\1/p' "$T/one.log")
  local LD LV OD OV
  LD=$(best "${ld[@]}") LV=$(best "${lv[@]}") OD=$(best "${od[@]}") OV=$(best "${ov[@]}")
  printf '%-44s %8s %8s %8s\n' "$mode: best of $REPEAT (s)" decode verify both
  printf '%-44s %8.3f %8.3f %8.3f\n' "$N scenes (--scene-list), $nl samples" "$LD" "$LV" "$(awk -v a="$LD" -v b="$LV" 'BEGIN { print a + b }')"
  printf '%-44s %8.3f %8.3f %8.3f\n' "1 scene of the same size, $no samples" "$OD" "$OV" "$(awk -v a="$OD" -v b="$OV" 'BEGIN { print a + b }')"
  awk -v m="$mode" -v ld="$LD" -v lv="$LV" -v od="$OD" -v ov="$OV" 'BEGIN {
    printf "%s: ratio list / single: decode %.2fx (goal <= 1.5x), verify %.2fx, decode + verify %.2fx\n", m, ld / od, lv / ov, (ld + lv) / (od + ov) }'
}
sed 's/ s[0-9]*\/labels.hdr / - /' "$T/scenes.txt" > "$T/scenes_nolabels.txt"
bench_mode all
bench_mode labels
