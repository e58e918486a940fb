#!/usr/bin/env bash
# Cross-validation benchmark (not a test; issue 6): 5-fold cross-validation on a tiled, DEFLATE-compressed
# GeoTIFF scene made from the synthetic scene with gdal_translate, with a small model (hu1d, 3 epochs) and
# sparse ground truth, so that the naive pipeline spends several times as long decoding a fold as training
# it (the case the source articles describe: a large flight line, field plots labeled on a few % of it).
#   scene:   1536 x 1536 x 200 int16 (944 MB decoded), 128 x 128 DEFLATE tiles; labels only in survey plots
#            covering 0.15 % of the pixels (`hsipipe synth --labeled-fraction`: a disc in every labeled parcel).
#            The size is what keeps hsipipe's fixed costs (process start-up, MPI_Init, libtorch's start-up in
#            the train command; this script prints them as the train command's overhead) within 10% of its
#            decode plus five folds;
#   naive:   for each fold, decode the GeoTIFF again (GDAL python bindings, /usr/bin/python3), select the
#            labeled pixels, z-score, then train the same hu1d with a PyTorch DataLoader (2 threads);
#   hsipipe: decode once (`hsipipe decode`, 2 ranks), then `hsipipe train --fold all` (2 ranks).
# Both use the same folds (the folds file hsipipe writes) and the same model, epochs, batch, optimizer and
# learning rate. Prints total wall time, the decode/train split of each, the naive decode/train ratio per fold
# (the premise: >= 3x; a loud warning when not), bytes decoded (5x vs 1x) and the ratios.
# Targets: decoded bytes exactly 1x; hsipipe total within 10% of its one decode plus five fold trainings;
# at least 3x faster than naive in total.
#   HSIPIPE_BIN (default build/hsipipe)  BENCH_ROWS/BENCH_COLS/BENCH_BANDS (1536/1536/200)
#   BENCH_LABELED_FRACTION (0.0015)  BENCH_EPOCHS (3)
#   BENCH_JSON  also write the figures as JSON to this file (scripts/bench.sh uses it)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${HSIPIPE_BIN:-build/hsipipe}
PY=/usr/bin/python3
ROWS=${BENCH_ROWS:-1536} COLS=${BENCH_COLS:-1536} BANDS=${BENCH_BANDS:-200} EPOCHS=${BENCH_EPOCHS:-3}
FRACTION=${BENCH_LABELED_FRACTION:-0.0015}
[ -x "$BIN" ] || { echo "bench_cv: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
BIN=$(realpath "$BIN")
. scripts/mpi_env.sh  # one-node Open MPI settings (shared memory, no fabric probing), run as root
W=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-bench-cv.XXXXXX")
trap 'rm -rf "$W"' EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }

echo "== ${ROWS} x ${COLS} x ${BANDS} synthetic scene, labels on survey plots covering $FRACTION -> tiled DEFLATE GeoTIFF ($W)"
"$BIN" synth --out "$W/envi" --rows "$ROWS" --cols "$COLS" --bands "$BANDS" --classes 8 --seed 11 \
  --labeled-fraction "$FRACTION" | sed -n 2p
gdal_translate -q -of GTiff -co TILED=YES -co BLOCKXSIZE=128 -co BLOCKYSIZE=128 -co COMPRESS=DEFLATE \
  -co INTERLEAVE=PIXEL "$W/envi/scene.img" "$W/scene.tif"
gdal_translate -q -of GTiff -co TILED=YES -co COMPRESS=DEFLATE "$W/envi/labels.img" "$W/labels.tif"
echo "GeoTIFF: $(du -h "$W/scene.tif" | cut -f1) on disk, $(( ROWS * COLS * BANDS * 2 / 1000000 )) MB decoded"
cat "$W/scene.tif" "$W/labels.tif" > /dev/null

echo "== hsipipe: decode once, train --fold all (2 ranks)"
T0=$(now)
t=$(now)
mpiexec -n 2 --oversubscribe "$BIN" decode --scene "$W/scene.tif" --labels "$W/labels.tif" --layout pixel \
  --dtype float32 --normalize zscore --backend npy --out "$W/cache" --no-progress > "$W/decode.log" 2>&1 \
  || { cat "$W/decode.log"; exit 1; }
HS_DECODE=$(since "$t")
t=$(now)
"$BIN" folds --cache "$W/cache" --k 5 --seed 42 --strategy stratified --out "$W/folds.json" > /dev/null
HS_FOLDS=$(since "$t")
t=$(now)
mpiexec -n 2 --oversubscribe "$BIN" train --cache "$W/cache" --folds "$W/folds.json" --model hu1d --fold all \
  --epochs "$EPOCHS" --batch 256 --lr 0.001 --optimizer adam --seed 1 --out "$W/run" --quiet > "$W/train.log" 2>&1 \
  || { cat "$W/train.log"; exit 1; }
HS_TRAIN=$(since "$t")
HS_TOTAL=$(since "$T0")
sed -n '/decode summary/,$p' "$W/decode.log"
# what the readers decoded: the GeoTIFF storage bytes of the tile rows they decoded (each rank counts a tile row
# once), exact, from the manifest; compared below with the storage bytes of all the scene's tiles
HS_READ=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["source_bytes_read"])' "$W/cache/manifest.json")

echo "== naive: decode the GeoTIFF again for every fold, then train (PyTorch, /usr/bin/python3)"
PYTHONUNBUFFERED=1 "$PY" - "$W" "$EPOCHS" <<'PY'
import json, math, os, sys, time
import numpy as np
import torch
from osgeo import gdal
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

gdal.UseExceptions()
w, epochs = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(2)
folds = json.load(open(os.path.join(w, "folds.json")))
fold_of = np.array(folds["fold"])
k = folds["k"]

class Hu1d(nn.Module):  # the same layers as hsipipe's hu1d (src/train/models.cpp)
    def __init__(self, bands, classes):
        super().__init__()
        self.kernel = math.ceil(bands / 9)
        self.pool_k = math.ceil(self.kernel / 5)
        self.conv = nn.Conv1d(1, 20, self.kernel)
        self.pool = nn.MaxPool1d(self.pool_k)
        self.features = 20 * ((bands - self.kernel + 1) // self.pool_k)
        self.fc1 = nn.Linear(self.features, 100)
        self.fc2 = nn.Linear(100, classes)
        for n, p in self.named_parameters():
            nn.init.zeros_(p) if "bias" in n else nn.init.uniform_(p, -0.05, 0.05)
    def forward(self, x):
        h = torch.tanh(self.pool(self.conv(x.unsqueeze(1))))
        return self.fc2(torch.tanh(self.fc1(h.view(-1, self.features))))

res = {"folds": []}
decoded = 0
t_all = time.perf_counter()
for f in range(k):
    t0 = time.perf_counter()
    ds = gdal.Open(os.path.join(w, "scene.tif"))
    cube = ds.ReadAsArray()  # [B, H, W], every tile decompressed again
    decoded += cube.nbytes
    labels = gdal.Open(os.path.join(w, "labels.tif")).ReadAsArray()
    mask = labels != 0
    x = cube[:, mask].T.astype(np.float32)  # labeled pixels, row-major: the same sample order as hsipipe
    y = labels[mask].astype(np.int64)
    mean, std = x.mean(axis=0, dtype=np.float64), x.std(axis=0, dtype=np.float64)
    x = ((x - mean) / np.where(std > 0, std, 1)).astype(np.float32)
    del cube
    t_decode = time.perf_counter() - t0

    t1 = time.perf_counter()
    classes = np.unique(y)
    yi = np.searchsorted(classes, y)
    tr, va = fold_of != f, fold_of == f
    torch.manual_seed(1)
    model = Hu1d(x.shape[1], len(classes))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    dl = DataLoader(TensorDataset(torch.from_numpy(x[tr]), torch.from_numpy(yi[tr])), batch_size=256, shuffle=True)
    for _ in range(epochs):
        for xb, yb in dl:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    with torch.no_grad():
        pred = model(torch.from_numpy(x[va])).argmax(1).numpy()
    oa = float((pred == yi[va]).mean())
    t_train = time.perf_counter() - t1
    res["folds"].append({"fold": f, "decode_s": t_decode, "train_s": t_train, "oa": oa})
    print(f"naive fold {f}: decode {t_decode:.2f} s, train {t_train:.2f} s, OA {oa:.4f}", flush=True)
res["total_s"] = time.perf_counter() - t_all
res["decoded_bytes"] = decoded
json.dump(res, open(os.path.join(w, "naive.json"), "w"))
PY

"$PY" - "$W" "$HS_DECODE" "$HS_TRAIN" "$HS_TOTAL" "$HS_FOLDS" "$ROWS" "$COLS" "$BANDS" "$EPOCHS" "$FRACTION" \
  "${HS_READ:-0}" "${BENCH_JSON:-}" <<'PY'
import json, os, sys
from osgeo import gdal
gdal.UseExceptions()
w = sys.argv[1]
hs_decode, hs_train, hs_total, hs_folds = map(float, sys.argv[2:6])
rows, cols, bands, epochs = map(int, sys.argv[6:10])
fraction, hs_read = float(sys.argv[10]), float(sys.argv[11])
dest = sys.argv[12]
naive = json.load(open(os.path.join(w, "naive.json")))
summary = json.load(open(os.path.join(w, "run", "summary.json")))
manifest = json.load(open(os.path.join(w, "cache", "manifest.json")))
# hsipipe's fold trainings: the wall time of each fold in the train job (model, epochs, validation and the
# fold's result files), from RUN_DIR/io.json; what the job spends beyond them is start-up and the summary
io = json.load(open(os.path.join(w, "run", "io.json")))  # summary.json holds only what report makes of the folds
fold_train = [fw["seconds"] for fw in io["fold_wall_seconds"]]
scene_bytes = rows * cols * bands * 2
nf = naive["folds"]
n_dec = sum(f["decode_s"] for f in nf)
n_tr = sum(f["train_s"] for f in nf)
naive_oa = sum(f["oa"] for f in nf) / len(nf)
n_samples = manifest["n_samples"]
# the storage bytes of every tile of the scene (what one full decode reads), as hsipipe's reader counts them
ds = gdal.Open(os.path.join(w, "scene.tif"))
bx, by = ds.GetRasterBand(1).GetBlockSize()
tiles = sum(int(ds.GetRasterBand(1).GetMetadataItem(f"BLOCK_SIZE_{x}_{y}", "TIFF") or 0)
            for y in range((rows + by - 1) // by) for x in range((cols + bx - 1) // bx))
hs_ratio = hs_read / tiles if tiles else float("nan")
print()
print(f"scene {rows} x {cols} x {bands} int16, {scene_bytes:,} bytes decoded; {n_samples:,} labeled samples "
      f"({100 * n_samples / (rows * cols):.2f}% of the pixels); hu1d, {epochs} epoch(s), batch 256, Adam 1e-3, 5 folds")
print(f"{'fold':>4} {'naive decode s':>15} {'naive train s':>14} {'decode/train':>13} {'hsipipe train s':>16}")
for f, ft in zip(nf, fold_train + [float('nan')] * (len(nf) - len(fold_train))):
    print(f"{f['fold']:>4} {f['decode_s']:15.2f} {f['train_s']:14.2f} {f['decode_s'] / f['train_s']:12.1f}x {ft:16.2f}")
print()
print(f"{'':28} {'total s':>9} {'decode s':>9} {'train s':>9} {'decoded bytes':>15} {'mean OA':>8}")
print(f"{'naive (decode per fold)':28} {naive['total_s']:9.2f} {n_dec:9.2f} {n_tr:9.2f} {naive['decoded_bytes']:15,d} {naive_oa:8.4f}")
print(f"{'hsipipe (decode once)':28} {hs_total:9.2f} {hs_decode:9.2f} {hs_train:9.2f} {round(hs_ratio * scene_bytes):15,d} {summary['mean']['oa']:8.4f}")
parts = hs_decode + sum(fold_train)
ratio_fold = n_dec / n_tr if n_tr else float("inf")
out = {
    "scene": {"rows": rows, "cols": cols, "bands": bands, "bytes": scene_bytes, "labeled_fraction": fraction,
              "labeled_samples": n_samples, "tile_bytes": tiles, "tile": [bx, by]},
    "model": "hu1d", "epochs": epochs, "batch": 256, "folds": len(nf),
    "naive_total_s": naive["total_s"], "naive_decode_s": n_dec, "naive_train_s": n_tr, "naive_folds": nf,
    "naive_mean_oa": naive_oa,
    "naive_decode_to_train_per_fold": ratio_fold,
    "hsipipe_total_s": hs_total, "hsipipe_decode_s": hs_decode, "hsipipe_folds_s": hs_folds,
    "hsipipe_train_s": hs_train, "hsipipe_fold_train_s": fold_train, "hsipipe_mean_oa": summary["mean"]["oa"],
    "hsipipe_shard_load_s": io.get("shard_load_seconds"),
    "decoded_scenes_naive": naive["decoded_bytes"] / scene_bytes,
    "decoded_bytes_naive": naive["decoded_bytes"],
    "decoded_scenes_hsipipe": hs_ratio,
    "decoded_bytes_hsipipe": round(hs_ratio * scene_bytes),
    "hsipipe_reader_storage_bytes": hs_read,
    "decoded_ratio": naive["decoded_bytes"] / (hs_ratio * scene_bytes) if hs_ratio else None,
    "hsipipe_parts_s": parts,
    "hsipipe_total_over_parts": hs_total / parts if parts else None,
    "speedup": naive["total_s"] / hs_total,
}
print()
print(f"naive decode / train per fold: {ratio_fold:.1f}x   (the premise of the test: >= 3x)")
if ratio_fold < 3:
    bar = "!" * 100
    print(f"{bar}\nWARNING: the naive pipeline's decode is only {ratio_fold:.1f}x its training per fold (< 3x): this run\n"
          "does not test the case the issue describes, and its speed-up is not the claim. Run it on a quiet\n"
          "machine, or lower BENCH_LABELED_FRACTION (the ratio does not depend on the scene's size).\n" + bar)
print(f"bytes decoded: naive {out['decoded_scenes_naive']:.2f}x the scene ({naive['decoded_bytes']:,} B: every tile, every fold); "
      f"hsipipe {hs_ratio:.3f}x (its readers decoded tiles holding {hs_read / 2**20:.1f} MiB of the {tiles / 2**20:.1f} "
      f"MiB of tiles; > 1 would mean a tile row decoded twice)   (target: exactly 1x)")
print(f"hsipipe: decode {hs_decode:.2f} s + folds {hs_folds:.2f} s + train command {hs_train:.2f} s (5 folds "
      f"{sum(fold_train):.2f} s; process start-up, shard load and summary {hs_train - sum(fold_train):.2f} s)")
print(f"hsipipe total / (one decode + five fold trainings = {parts:.2f} s): {out['hsipipe_total_over_parts']:.2f}   "
      "(target <= 1.10)")
print(f"speed-up over naive: {out['speedup']:.1f}x   (target >= 3x)")
if dest:
    json.dump(out, open(dest, "w"), indent=2)
PY
