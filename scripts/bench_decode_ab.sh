#!/usr/bin/env bash
# A/B comparison of two settings of `hsipipe decode` (not a test): the benchmark's decode (1024 x 1024 x 224
# int16 BIL scene, pixel, float16, zscore) run PAIRS times per setting, in ABBA order (A B, B A, A B, ...).
# Back-to-back decodes on a virtual machine can alternate fast and slow (host page reuse: 0.94, 0.81,
# 1.15, 0.80 s for one command on the development VM), so a plain A B A B order would credit one setting
# with the fast runs. Prints, per setting, the min / first quartile / median of the whole mpiexec command
# and of the run's own "decode + write" phase.
#   usage: scripts/bench_decode_ab.sh "SETTING_A" "SETTING_B" [ranks=2] [pairs=8]
#   e.g.   scripts/bench_decode_ab.sh "HSIPIPE_TEST_DECODE_OVERLAP=0" "HSIPIPE_TEST_DECODE_OVERLAP=1" 1
#          scripts/bench_decode_ab.sh "--huge-pages on" "--huge-pages off"
#   BENCH_BACKEND (h5|npy, default h5), BENCH_MPIEXEC_ARGS (e.g. "--bind-to none"), HSIPIPE_BIN,
#   BENCH_ROWS/BENCH_COLS/BENCH_BANDS as in bench_decode.sh. SETTING_A/SETTING_B: VAR=VALUE words (the
#   environment) and decode options (from the first word starting with --), "" for none.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
A=$1 B=$2 R=${3:-2} PAIRS=${4:-8}
BIN=${HSIPIPE_BIN:-build/hsipipe}
[ -x "$BIN" ] || { echo "bench_decode_ab: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
BIN=$(realpath "$BIN")
BE=${BENCH_BACKEND:-h5}
. scripts/mpi_env.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-ab.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$BIN" synth --out "$T/scene" --rows "${BENCH_ROWS:-1024}" --cols "${BENCH_COLS:-1024}" --bands "${BENCH_BANDS:-224}" \
  --interleave bil --dtype int16 > /dev/null
cat "$T/scene/scene.img" > /dev/null  # from the page cache, like bench_decode.sh

declare -A WALL PHASE
run() {  # run A|B
  local setting=$A envs='' opts='' w t0 t1
  [ "$1" = B ] && setting=$B
  for w in $setting; do
    if [ -n "$opts" ] || [ "${w#--}" != "$w" ]; then opts+="$w "; else envs+="$w "; fi
  done
  rm -rf "$T/cache"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # envs, opts and BENCH_MPIEXEC_ARGS are word lists
  env $envs mpiexec ${BENCH_MPIEXEC_ARGS:-} -n "$R" --oversubscribe "$BIN" decode --scene "$T/scene/scene.hdr" \
    --labels "$T/scene/labels.hdr" --layout pixel --dtype float16 --normalize zscore --backend "$BE" --out "$T/cache" \
    --no-progress $opts > "$T/log" 2>&1 || { cat "$T/log" >&2; exit 1; }
  t1=$(date +%s.%N)
  WALL[$1]+="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') "
  PHASE[$1]+="$(sed -n 's/.*decode + write \([0-9.]*\) s.*/\1/p' "$T/log") "
}
for i in $(seq "$PAIRS"); do
  if ((i % 2)); then run A; run B; else run B; run A; fi
done
stats() { printf '%s\n' $1 | sort -g | awk '{ a[NR] = $1 } END { printf "min %.3f  q1 %.3f  median %.3f", a[1], a[int((NR + 3) / 4)], a[int((NR + 1) / 2)] }'; }
echo "decode $BE, $R rank(s), $PAIRS ABBA pairs ${BENCH_MPIEXEC_ARGS:+(mpiexec $BENCH_MPIEXEC_ARGS)}"
for k in A B; do
  envs=$A; [ $k = B ] && envs=$B
  printf '%s [%s]\n   wall s:           %s\n   decode + write s: %s\n' "$k" "${envs:-defaults}" "$(stats "${WALL[$k]}")" "$(stats "${PHASE[$k]}")"
done
