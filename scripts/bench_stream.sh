#!/usr/bin/env bash
# Streamed-shard benchmark (not a test; issue 46, item 4). Trains fold 0 on 2 ranks with each rank's shard held
# in memory (the default when it fits) and streamed from the cache file (`--shard-memory-mb 0`: mapped, paged in
# as the shuffled batches need it), side by side, for
#   - hu1d on a pixel-layout cache (BENCH_HU_ROWS^2 pixels x 200 bands, float32), and
#   - hybridsn on a patch-layout cache (BENCH_HY_ROWS^2 pixels, 15 principal components, 9 x 9 patches),
# both made by `hsipipe synth` + `hsipipe decode` in a temporary directory (BENCH_DIR, default $TMPDIR or /tmp:
# point it at the node-local NVMe the caches live on in production).
#   page cache: the cache file is in the page cache; samples/s is the mean over epochs 2.. of
#               fold-0/epochs.jsonl, best of BENCH_REPEAT (2) rounds, the two modes taking turns in a round.
#   from disk:  `sync; echo 1 > /proc/sys/vm/drop_caches` before each run (root only; skipped otherwise): the
#               in-memory shard pays its read before epoch 1 ("shard loaded once in X s"); the streamed one reads
#               it once at open too (each sample's hash, checked against the cache's data_checksum, without
#               holding it) and pages it in again inside epoch 1 where the page cache has dropped it; both
#               figures are printed, with epoch 1's samples/s.
# Also `hsipipe bench` (the loader alone, no model) held against streamed, from the page cache.
# Larger than memory (root with a writable memory cgroup, v1 or v2; BENCH_BIG_ROWS=0 skips it): hu1d on a pixel
# cache of BENCH_BIG_ROWS^2 pixels (1400: 1.1 GB of samples) trained 2 epochs in a cgroup of BENCH_CGROUP_MB
# (800) MiB, where the shards cannot be held and the page cache cannot keep them (auto: --shard-memory-mb is
# not given), against the same run held in memory outside the cgroup; their predictions.csv must be the same.
# Goal: streaming from the page cache >= 0.8x in-memory samples/s.
#   HSIPIPE_BIN   the executable (default build/hsipipe)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi_env.sh
BIN=${HSIPIPE_BIN:-build/hsipipe}
BIG_ROWS=${BENCH_BIG_ROWS:-1400} CG_MB=${BENCH_CGROUP_MB:-800}
REPEAT=${BENCH_REPEAT:-2} HU_ROWS=${BENCH_HU_ROWS:-300} HY_ROWS=${BENCH_HY_ROWS:-120} EPOCHS=${BENCH_EPOCHS:-3}
[ -x "$BIN" ] || { echo "bench_stream: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
BIN=$(realpath "$BIN")
T=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/hsipipe-bench-stream.XXXXXX")
trap 'rm -rf "$T"' EXIT
CAN_DROP=0
if [ -w /proc/sys/vm/drop_caches ] && sync && echo 1 > /proc/sys/vm/drop_caches 2> /dev/null; then CAN_DROP=1; fi

make_cache() {  # NAME ROWS BANDS DECODE-OPTIONS...
  local name=$1 rows=$2 bands=$3; shift 3
  "$BIN" synth --out "$T/$name-scene" --rows "$rows" --cols "$rows" --bands "$bands" --seed 3 > /dev/null
  mpiexec --oversubscribe -n 2 "$BIN" decode --scene "$T/$name-scene/scene.hdr" --labels "$T/$name-scene/labels.hdr" \
    "$@" --out "$T/$name" --no-progress > /dev/null
  "$BIN" folds --cache "$T/$name" --k 5 --seed 42 --out "$T/$name.json" > /dev/null
  echo "cache $name: $(sed -n 's/.*"n_samples": *\([0-9]*\).*/\1/p' "$T/$name/manifest.json" | head -1) samples," \
       "$(du -b "$T/$name"/samples* | awk '{ s += $1 } END { printf "%.1f MB", s / 1e6 }') of samples; decode $*"
}

# mean samples/s over epochs FROM..TO (default: the last) of a run's fold 0
rate() {
  /usr/bin/python3 - "$1/fold-0/epochs.jsonl" "$2" "${3:-0}" << 'EOF'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]
e = e[int(sys.argv[2]) - 1:int(sys.argv[3]) or len(e)]
print(f"{sum(x['samples_per_s'] for x in e) / len(e):.1f}")
EOF
}
load_s() { sed -n 's/^shard loaded once in \([0-9.]*\) s.*/\1/p' "$1"; }
best() { printf '%s\n' "$@" | sort -g | tail -n1; }

train() {  # CACHE MODEL OUT MODE(mem|stream) [extra...]
  local cache=$1 model=$2 out=$3 mode=$4; shift 4
  local lim=(); [ "$mode" = stream ] && lim=(--shard-memory-mb 0)
  rm -rf "$out"
  mpiexec --oversubscribe -n 2 "$BIN" train --cache "$T/$cache" --folds "$T/$cache.json" --model "$model" --fold 0 \
    --epochs "$EPOCHS" --batch 64 --device cpu --out "$out" "${lim[@]}" "$@" > "$out.log" 2>&1 \
    || { tail -20 "$out.log"; exit 1; }
  if [ "$mode" = stream ]; then grep -q "shard streamed from the cache file" "$out.log" || { echo "not streamed" >&2; exit 1; }
  else ! grep -q "shard streamed" "$out.log" || { echo "streamed unasked" >&2; exit 1; }; fi
}

bench_model() {  # CACHE MODEL
  local cache=$1 model=$2 m s mem=() str=() lm ls
  echo "== $model on $cache, 2 ranks, batch 64, $EPOCHS epochs, fold 0 of 5"
  cat "$T/$cache"/samples* > /dev/null
  for _ in $(seq "$REPEAT"); do
    train "$cache" "$model" "$T/run-mem" mem; mem+=("$(rate "$T/run-mem" 2)")
    train "$cache" "$model" "$T/run-stream" stream; str+=("$(rate "$T/run-stream" 2)")
  done
  m=$(best "${mem[@]}") s=$(best "${str[@]}")
  printf '  page cache: in memory %9.1f samples/s, streamed %9.1f samples/s: streamed / in memory %.2fx (goal >= 0.8x)\n' \
    "$m" "$s" "$(awk -v a="$s" -v b="$m" 'BEGIN { print a / b }')"
  /usr/bin/python3 -c "import json, sys; io = json.load(open(sys.argv[1]))['train']['io']
print('  streamed run: shard bytes per rank', io['shard_bytes_per_rank'], 'read from the mapping', io['streamed_bytes_read_per_rank'])" \
    "$T/run-stream/fold-0/metrics.json"
  if [ "$CAN_DROP" = 1 ]; then
    sync; echo 1 > /proc/sys/vm/drop_caches; train "$cache" "$model" "$T/run-mem" mem
    sync; echo 1 > /proc/sys/vm/drop_caches; train "$cache" "$model" "$T/run-stream" stream
    lm=$(load_s "$T/run-mem.log") ls=$(load_s "$T/run-stream.log")
    printf '  from disk:  in memory: shard read %.2f s, epoch 1 %9.1f samples/s, epochs 2.. %9.1f\n' \
      "$lm" "$(rate "$T/run-mem" 1 1)" "$(rate "$T/run-mem" 2)"
    printf '              streamed:  shard open %.2f s, epoch 1 %9.1f samples/s, epochs 2.. %9.1f\n' \
      "$ls" "$(rate "$T/run-stream" 1 1)" \
      "$(rate "$T/run-stream" 2)"
  else
    echo "  from disk: skipped (cannot write /proc/sys/vm/drop_caches: run as root to drop the page cache)"
  fi
}

bench_loader() {  # CACHE
  local cache=$1 h=() s=() j
  for _ in $(seq "$REPEAT"); do
    j=$("$BIN" bench --cache "$T/$cache" --json --threads 2 --memcpy-mib 0 --batches 4000); h+=("$(echo "$j" | sed -n 's/.*"samples_per_s":\([0-9.e+]*\).*/\1/p')")
    j=$("$BIN" bench --cache "$T/$cache" --json --threads 2 --memcpy-mib 0 --batches 4000 --shard-memory-mb 0)
    echo "$j" | grep -q '"shard_streamed":true' || { echo "bench did not stream" >&2; exit 1; }
    s+=("$(echo "$j" | sed -n 's/.*"samples_per_s":\([0-9.e+]*\).*/\1/p')")
  done
  printf '== loader alone (hsipipe bench, 2 threads, batch 256) on %s: in memory %.0f, streamed %.0f samples/s: %.2fx\n' \
    "$cache" "$(best "${h[@]}")" "$(best "${s[@]}")" "$(awk -v a="$(best "${s[@]}")" -v b="$(best "${h[@]}")" 'BEGIN { print a / b }')"
}

# a memory cgroup of CG_MB MiB (v2, else v1) in $CG, its limit file in $CG_LIMIT; CG empty when none can be made
make_cgroup() {
  CG= CG_LIMIT=
  [ "$(id -u)" = 0 ] || return 0
  if [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2> /dev/null; then
    CG=/sys/fs/cgroup/hsipipe-bench-$$ CG_LIMIT=memory.max
  elif [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/memory ]; then
    CG=/sys/fs/cgroup/memory/hsipipe-bench-$$ CG_LIMIT=memory.limit_in_bytes
  else return 0; fi
  mkdir -p "$CG" && echo $((CG_MB << 20)) > "$CG/$CG_LIMIT" || CG=
}

bench_bigger_than_memory() {
  make_cgroup
  if [ -z "$CG" ]; then echo "== larger than memory: skipped (needs root and a writable memory cgroup)"; return; fi
  trap 'rmdir "$CG" 2> /dev/null; rm -rf "$T"' EXIT
  make_cache big "$BIG_ROWS" 200 --layout pixel --dtype float32
  rm -rf "$T/big-scene"
  echo "== hu1d on big, 2 ranks, batch 64, 2 epochs, fold 0 of 5: held in memory (no limit) against auto in a $CG_MB MiB cgroup"
  local saved=$EPOCHS; EPOCHS=2
  cat "$T/big"/samples* > /dev/null
  train big hu1d "$T/run-held" mem
  sync; echo 1 > /proc/sys/vm/drop_caches 2> /dev/null || true
  rm -rf "$T/run-cg"
  (echo "$BASHPID" > "$CG/cgroup.procs"
   exec mpiexec --oversubscribe -n 2 "$BIN" train --cache "$T/big" --folds "$T/big.json" --model hu1d --fold 0 --epochs 2 \
     --batch 64 --device cpu --out "$T/run-cg") > "$T/run-cg.log" 2>&1 || { tail -20 "$T/run-cg.log"; exit 1; }
  EPOCHS=$saved
  grep -E "^host memory|shard streamed" "$T/run-cg.log" | sed 's/^/  /'
  cmp -s "$T/run-held/fold-0/predictions.csv" "$T/run-cg/fold-0/predictions.csv" \
    || { echo "predictions differ between the held and the streamed run" >&2; exit 1; }
  printf '  held, page cache: %9.1f samples/s (epochs 1-2); streamed in %s MiB: %9.1f samples/s: %.2fx; predictions.csv identical\n' \
    "$(rate "$T/run-held" 1)" "$CG_MB" "$(rate "$T/run-cg" 1)" "$(awk -v a="$(rate "$T/run-cg" 1)" -v b="$(rate "$T/run-held" 1)" 'BEGIN { print a / b }')"
}

echo "== in $T (drop caches: $([ "$CAN_DROP" = 1 ] && echo yes || echo no)), $(nproc) cores"
make_cache pixel "$HU_ROWS" 200 --layout pixel --dtype float32
make_cache patch "$HY_ROWS" 100 --layout patch --patch 9 --pca 15
bench_loader pixel
bench_loader patch
bench_model pixel hu1d
bench_model patch hybridsn
[ "$BIG_ROWS" = 0 ] || bench_bigger_than_memory
