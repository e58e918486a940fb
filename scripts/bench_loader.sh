#!/usr/bin/env bash
# Loader benchmark (not a test; issue 6). Samples/s delivered to a consumer that only touches each
# batch, for 11 x 11 patches cut from a `cube` cache of a 512 x 512 x 224 synthetic scene (float16 on
# disk, float32 batches of 256), in one run:
#   - hsipipe's loader (`hsipipe bench`), 1 and 2 producer threads;
#   - PyTorch (/usr/bin/python3, Debian python3-torch): a Dataset cutting the same patches from the same
#     cube via np.load(mmap_mode='r'): default DataLoader (num_workers=0), and the best of num_workers 1-2
#     with pin_memory and persistent workers;
#   - this machine's memcpy bandwidth, and the loader's rate as a fraction of the bound for the bytes a
#     batch reads (float16 patch) and writes (float32 patch);
#   - the training consumption rate of hu1d (`hsipipe train`, 1 rank) and its data-wait share.
# Targets: >= 5x the default DataLoader, >= half the bandwidth bound, >= 10x hu1d's consumption rate.
#   HSIPIPE_BIN  (default build/hsipipe)   BENCH_ROWS/BENCH_COLS/BENCH_BANDS   BENCH_BATCHES (default 300)
#   BENCH_JSON   also write the figures as JSON to this file (scripts/bench.sh uses it)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${HSIPIPE_BIN:-build/hsipipe}
PY=/usr/bin/python3
ROWS=${BENCH_ROWS:-512} COLS=${BENCH_COLS:-512} BANDS=${BENCH_BANDS:-224} BATCHES=${BENCH_BATCHES:-300}
[ -x "$BIN" ] || { echo "bench_loader: $BIN not found: run scripts/setup.sh first (or set HSIPIPE_BIN)" >&2; exit 2; }
BIN=$(realpath "$BIN")
. scripts/mpi_env.sh  # one-node Open MPI settings (shared memory, no fabric probing), run as root
W=$(mktemp -d "${TMPDIR:-/tmp}/hsipipe-bench-loader.XXXXXX")
trap 'rm -rf "$W"' EXIT

echo "== scene ${ROWS} x ${COLS} x ${BANDS} and caches in $W"
"$BIN" synth --out "$W/scene" --rows "$ROWS" --cols "$COLS" --bands "$BANDS" --classes 8 --seed 3 > /dev/null
mpiexec -n 2 --oversubscribe "$BIN" decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" \
  --layout cube --patch 11 --dtype float16 --normalize zscore --backend npy --out "$W/cube" --no-progress | tail -n 3
mpiexec -n 2 --oversubscribe "$BIN" decode --scene "$W/scene/scene.hdr" --labels "$W/scene/labels.hdr" \
  --layout pixel --dtype float16 --normalize zscore --backend npy --out "$W/pixel" --no-progress | tail -n 1
"$BIN" folds --cache "$W/pixel" --k 5 --seed 1 --strategy stratified --out "$W/folds.json" > /dev/null
cat "$W"/cube/*.npy > /dev/null

echo "== hsipipe loader"
"$BIN" bench --cache "$W/cube" --threads 1 --batch 256 --batches "$BATCHES" --json > "$W/hs1.json"
"$BIN" bench --cache "$W/cube" --threads 2 --batch 256 --batches "$BATCHES" --json --memcpy-mib 0 > "$W/hs2.json"

echo "== hu1d training consumption (1 rank, 1 epoch on the pixel cache)"
mpiexec -n 1 "$BIN" train --cache "$W/pixel" --folds "$W/folds.json" --model hu1d --fold 0 --epochs 1 \
  --batch 256 --out "$W/run" --quiet > /dev/null
cp "$W/run/fold-0/epochs.jsonl" "$W/hu1d.jsonl"

echo "== PyTorch DataLoader"
PYTHONUNBUFFERED=1 "$PY" - "$W" "$BATCHES" <<'PY'
import json, os, sys, time
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

w, batches = sys.argv[1], int(sys.argv[2])
p = 11
r = p // 2

class PatchDataset(Dataset):
    """Cuts p x p patches around labeled pixels from the float16 cube (mmap), reflect border, float32 [B, p, p]."""
    def __init__(self, cube_path, coords_path, labels_path):
        self.cube_path = cube_path
        self.cube = None
        self.coords = np.load(coords_path)
        self.labels = np.load(labels_path).astype(np.int64)
        shape = np.load(cube_path, mmap_mode="r").shape
        self.h, self.w = shape[0], shape[1]
    def __len__(self):
        return len(self.labels)
    def __getitem__(self, i):
        if self.cube is None:  # opened lazily so each worker maps the file itself
            self.cube = np.load(self.cube_path, mmap_mode="r")
        _, row, col = self.coords[i]
        rows = np.abs(np.arange(row - r, row + r + 1))
        rows = np.where(rows >= self.h, 2 * (self.h - 1) - rows, rows)
        cols = np.abs(np.arange(col - r, col + r + 1))
        cols = np.where(cols >= self.w, 2 * (self.w - 1) - cols, cols)
        patch = self.cube[rows[:, None], cols[None, :], :]  # [p, p, B] float16
        return torch.from_numpy(np.ascontiguousarray(patch.transpose(2, 0, 1), dtype=np.float32)), int(self.labels[i])

ds = PatchDataset(os.path.join(w, "cube", "cube_0.npy"), os.path.join(w, "cube", "coords.npy"), os.path.join(w, "cube", "labels.npy"))
sampler = torch.utils.data.RandomSampler(ds, replacement=True, num_samples=256 * (batches + 5), generator=torch.Generator().manual_seed(0))

def rate(loader, n):
    it = iter(loader)
    for _ in range(5):
        next(it)
    t0 = time.perf_counter()
    s = 0.0
    for _ in range(n):
        x, y = next(it)
        s += float(x.view(-1)[::1024].sum())
    return n * 256 / (time.perf_counter() - t0)

res = {}
n0 = max(20, batches // 10)  # the default loader is slow: time fewer batches
res["default_num_workers_0"] = rate(DataLoader(ds, batch_size=256, sampler=sampler), n0)
print(f"PyTorch DataLoader num_workers=0: {res['default_num_workers_0']:.0f} samples/s", flush=True)
best = 0.0
for nw in (1, 2):
    dl = DataLoader(ds, batch_size=256, sampler=sampler, num_workers=nw, pin_memory=True, persistent_workers=True, prefetch_factor=4)
    v = rate(dl, n0)
    res[f"num_workers_{nw}_pinned_persistent"] = v
    print(f"PyTorch DataLoader num_workers={nw}, pin_memory, persistent: {v:.0f} samples/s", flush=True)
    best = max(best, v)
    del dl
res["best_tuned"] = best
json.dump(res, open(os.path.join(w, "torch.json"), "w"))
PY

echo
"$PY" - "$W" "${BENCH_JSON:-}" "$ROWS" "$COLS" "$BANDS" "$BATCHES" <<'PY'
import json, os, sys
w, dest = sys.argv[1], sys.argv[2]
s_rows, s_cols, s_bands, batches = map(int, sys.argv[3:7])
hs1 = json.load(open(os.path.join(w, "hs1.json")))
hs2 = json.load(open(os.path.join(w, "hs2.json")))
tv = json.load(open(os.path.join(w, "torch.json")))
ep = [json.loads(l) for l in open(os.path.join(w, "hu1d.jsonl")) if l.strip()][-1]
bw = hs1["memcpy_bytes_per_s"]
bound = bw / (hs1["bytes_read_per_sample"] + hs1["bytes_written_per_sample"])
best_hs = max(hs1["samples_per_s"], hs2["samples_per_s"])
hu1d = ep["samples_per_s"]
t = ep["time_s"]
wait = t["data_wait"] / t["total"] if t["total"] else 0.0
rows = [
    ("hsipipe loader, 1 thread", hs1["samples_per_s"]),
    ("hsipipe loader, 2 threads", hs2["samples_per_s"]),
    ("PyTorch DataLoader, num_workers=0 (default)", tv["default_num_workers_0"]),
    ("PyTorch DataLoader, best of num_workers 1-2, pinned, persistent", tv["best_tuned"]),
    ("memcpy bandwidth bound for these bytes", bound),
    ("hu1d training consumption (1 rank)", hu1d),
]
print(f"11 x 11 x {hs1['bytes_read_per_sample'] / 242:.0f}-band patches, batch 256; bytes per sample: "
      f"{hs1['bytes_read_per_sample']:.0f} read (float16) + {hs1['bytes_written_per_sample']:.0f} written (float32)")
print(f"memcpy bandwidth: {bw / 1e9:.2f} GB/s (read + write)")
print(f"{'':64} {'samples/s':>12}")
for name, v in rows:
    print(f"{name:64} {v:12.0f}")
ratios = {
    "hsipipe_vs_default_dataloader": best_hs / tv["default_num_workers_0"],
    "hsipipe_vs_tuned_dataloader": best_hs / tv["best_tuned"],
    "fraction_of_bandwidth_bound": best_hs / bound,
    "hsipipe_vs_hu1d_consumption": best_hs / hu1d,
    "hu1d_data_wait_fraction": wait,
}
print()
print(f"hsipipe / default DataLoader: {ratios['hsipipe_vs_default_dataloader']:.1f}x   (target >= 5x)")
print(f"hsipipe / tuned DataLoader:   {ratios['hsipipe_vs_tuned_dataloader']:.1f}x")
print(f"fraction of the bandwidth bound: {ratios['fraction_of_bandwidth_bound']:.2f}   (target >= 0.5)")
print(f"hsipipe / hu1d consumption:   {ratios['hsipipe_vs_hu1d_consumption']:.1f}x   (target >= 10x)")
print(f"hu1d data wait: {100 * wait:.1f}% of the epoch   (target < 5%)")
if dest:
    json.dump({"rows": rows, "ratios": ratios, "memcpy_bytes_per_s": bw, "batches": batches,
               "scene": f"a {s_rows} x {s_cols} x {s_bands} synthetic scene", "hu1d_epoch": ep}, open(dest, "w"), indent=2)
PY
