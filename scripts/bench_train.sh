#!/usr/bin/env bash
# bench_train.sh: training throughput of hsipipe against PyTorch Python, and 2 ranks against 1.
# Not a test (no timed assertions); prints a table and writes it to $OUT/bench_train.md.
#
#   scripts/bench_train.sh [BUILD_DIR]      (default $HSIPIPE_BIN if set, else build-train, then build)
#   env: ROWS COLS BANDS (synthetic scene, default 160 x 160 x 103; BENCH_ROWS/BENCH_COLS/BENCH_BANDS are
#        used when these are unset), EPOCHS (3), BATCH (100), THREADS (1), OUT (a new /tmp directory)
#   BENCH_JSON  also write the figures as JSON to this file (scripts/bench.sh uses it)
#
# One run measures, on the same cache (tests/train/make_cache.py: npy, pixel layout, float32) and the
# same fold (fold 0 of 5, stratified):
#   1. hsipipe train --model hu1d on 1 rank (compute threads = cores), samples/s and eta from epochs.jsonl
#      (the training loop: data wait + compute + communication + idle; validation is timed apart);
#   2. PyTorch (/usr/bin/python3, Debian python3-torch) with the same hu1d network (layers, init), batch,
#      Adam, torch.set_num_threads(cores), a map-style Dataset over np.load(samples.npy, mmap_mode='r')
#      and a default DataLoader (num_workers=0, shuffle=True), timing the same training loop;
#   3. hsipipe train on 2 ranks (1 compute thread each): samples/s and the speed-up over 1 rank.
# The same ATen kernels run in both; the difference is the loader and the loop around them.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-}
if [[ -n $BUILD ]]; then
  BIN=$BUILD/hsipipe
elif [[ -n ${HSIPIPE_BIN:-} ]]; then
  BIN=$HSIPIPE_BIN
else
  for b in build-train build; do [[ -x $SRC/$b/hsipipe ]] && BUILD=$SRC/$b && break; done
  BIN=$BUILD/hsipipe
fi
[[ -x $BIN ]] || { echo "bench_train: no hsipipe binary (build first: cmake --build BUILD --target hsipipe)" >&2; exit 2; }
PY=/usr/bin/python3
MPIEXEC=${MPIEXEC:-mpiexec}
ROWS=${ROWS:-${BENCH_ROWS:-160}}; COLS=${COLS:-${BENCH_COLS:-160}}; BANDS=${BANDS:-${BENCH_BANDS:-103}}; EPOCHS=${EPOCHS:-3}; BATCH=${BATCH:-100}; THREADS=${THREADS:-1}
CORES=$(nproc)
OUT=${OUT:-$(mktemp -d /tmp/bench_train.XXXXXX)}
. "$SRC/scripts/mpi_env.sh"  # one-node Open MPI settings (shared memory, no fabric probing), run as root
export OMPI_MCA_rmaps_base_oversubscribe=1
echo "bench_train: $ROWS x $COLS x $BANDS synthetic scene, hu1d, batch $BATCH, $EPOCHS epochs, $CORES cores -> $OUT"

$PY "$SRC/tests/train/make_cache.py" "$OUT/cache" --rows "$ROWS" --cols "$COLS" --bands "$BANDS" --classes 9 \
  --layout pixel --unlabeled 0.2 --noise 1.0 > /dev/null
"$BIN" folds --cache "$OUT/cache" --k 5 --seed 1 --out "$OUT/folds.json" > /dev/null

train() {  # ranks run_dir
  "$MPIEXEC" -n "$1" --oversubscribe --bind-to none "$BIN" train --cache "$OUT/cache" --folds "$OUT/folds.json" \
    --model hu1d --fold 0 --epochs "$EPOCHS" --batch "$BATCH" --lr 0.001 --threads "$THREADS" --out "$2" --quiet > "$2.log" 2>&1 \
    || { cat "$2.log" >&2; exit 1; }
}
# samples/s and eta averaged over epochs 2.. (epoch 1 includes warm-up)
stats() {
  $PY - "$1/fold-0/epochs.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
use = recs[1:] if len(recs) > 1 else recs
sps = sum(r["samples_per_s"] for r in use) / len(use)
tot = sum(r["time_s"]["total"] for r in use)
split = {k: sum(r["time_s"][k] for r in use) / tot for k in ("data_wait", "compute", "communication", "evaluation", "checkpoint")}
print("%.1f %.3f %.1f %s" % (sps, split["compute"], recs[-1]["val"]["oa"] * 100, " ".join("%s=%.3f" % kv for kv in split.items())))
PY
}

echo "1/3 hsipipe, 1 rank ..."
OMP_NUM_THREADS=$CORES train 1 "$OUT/r1"
read -r S1 E1 OA1 SPLIT1 < <(stats "$OUT/r1")

echo "2/3 PyTorch Python, default DataLoader ..."
read -r SP EP OAP < <($PY - "$OUT" "$BATCH" "$EPOCHS" "$CORES" <<'PY'
import json, math, sys, time
import numpy as np
import torch
from torch import nn
out, batch, epochs, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(cores)
torch.manual_seed(0)
X = np.load(out + "/cache/samples.npy", mmap_mode="r")
labels = np.load(out + "/cache/labels.npy")
manifest = json.load(open(out + "/cache/manifest.json"))
values = manifest["label_values"]
lut = {v: i for i, v in enumerate(values)}
folds = json.load(open(out + "/folds.json"))
fold = np.array(folds["fold"])
train_ids = np.nonzero((fold >= 0) & (fold != 0))[0]
val_ids = np.nonzero(fold == 0)[0]
excl = set(folds.get("excluded", [[]])[0]) if folds.get("excluded") else set()
train_ids = np.array([i for i in train_ids if i not in excl])

class Samples(torch.utils.data.Dataset):
    def __init__(self, ids): self.ids = ids
    def __len__(self): return len(self.ids)
    def __getitem__(self, k):
        i = self.ids[k]
        return torch.from_numpy(np.array(X[i], dtype=np.float32)), lut[int(labels[i])]

class Hu1d(nn.Module):  # the layers and initialisation of src/train/models.cpp
    def __init__(self, bands, n_classes):
        super().__init__()
        k = math.ceil(bands / 9); p = math.ceil(k / 5)
        self.conv = nn.Conv1d(1, 20, k); self.pool = nn.MaxPool1d(p)
        self.features = 20 * ((bands - k + 1) // p)
        self.fc1 = nn.Linear(self.features, 100); self.fc2 = nn.Linear(100, n_classes)
        with torch.no_grad():
            for n, q in self.named_parameters():
                q.zero_() if "bias" in n else q.uniform_(-0.05, 0.05)
    def forward(self, x):
        h = torch.tanh(self.pool(self.conv(x.unsqueeze(1)))).view(-1, self.features)
        return self.fc2(torch.tanh(self.fc1(h)))

model = Hu1d(X.shape[1], len(values))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = torch.utils.data.DataLoader(Samples(train_ids), batch_size=batch, shuffle=True)  # default: num_workers=0
rates = []
for e in range(epochs):
    t0 = time.perf_counter(); n = 0
    for x, y in loader:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward(); opt.step(); n += len(y)
    rates.append(n / (time.perf_counter() - t0))
use = rates[1:] if len(rates) > 1 else rates
with torch.no_grad():
    xv = torch.from_numpy(np.asarray(X[val_ids], dtype=np.float32))
    yv = torch.tensor([lut[int(v)] for v in labels[val_ids]])
    oa = (model(xv).argmax(1) == yv).float().mean().item()
# the loop has no separate compute timer; eta is not measured for PyTorch
print("%.1f nan %.1f" % (sum(use) / len(use), oa * 100))
PY
)

echo "3/3 hsipipe, 2 ranks ..."
OMP_NUM_THREADS=$(( CORES / 2 > 0 ? CORES / 2 : 1 )) train 2 "$OUT/r2"
read -r S2 E2 OA2 SPLIT2 < <(stats "$OUT/r2")

RATIO_PT=$($PY -c "print('%.2f' % ($S1 / $SP))")
RATIO_R=$($PY -c "print('%.2f' % ($S2 / $S1))")
{
  echo "## bench_train (load average at start: $(cut -d' ' -f1-3 /proc/loadavg))"
  echo
  echo "### run ($(date -u +%Y-%m-%dT%H:%MZ), $(hostname), $CORES cores, CPU only: no GPU in this run)"
  echo
  echo "hu1d, ${ROWS}x${COLS}x${BANDS} synthetic scene, fold 0 of 5, batch $BATCH, $EPOCHS epochs (mean over epochs 2..)"
  echo
  echo "| run | samples/s | eta (compute/total) | val OA % |"
  echo "|---|---:|---:|---:|"
  echo "| hsipipe, 1 rank x $CORES threads | $S1 | $E1 | $OA1 |"
  echo "| PyTorch Python, default DataLoader, $CORES threads | $SP | n/a | $OAP |"
  echo "| hsipipe, 2 ranks x $(( CORES / 2 > 0 ? CORES / 2 : 1 )) threads | $S2 | $E2 | $OA2 |"
  echo
  echo "hsipipe / PyTorch: ${RATIO_PT}x; 2 ranks / 1 rank: ${RATIO_R}x (target 1.7x)"
  echo
  echo "time split 1 rank: $SPLIT1"
  echo "time split 2 ranks: $SPLIT2"
} | tee "$OUT/bench_train.md"
if [[ -n ${BENCH_JSON:-} ]]; then
  $PY - "$BENCH_JSON" "$ROWS" "$COLS" "$BANDS" "$EPOCHS" "$BATCH" "$CORES" "$S1" "$E1" "$OA1" "$SP" "$OAP" "$S2" "$E2" "$OA2" \
    "$SPLIT1" "$SPLIT2" <<'PY'
import json, sys
a = sys.argv
rows, cols, bands, epochs, batch, cores = map(int, a[2:8])
s1, e1, oa1, sp, oap, s2, e2, oa2 = map(float, a[8:16])
split = lambda t: {k: float(v) for k, v in (kv.split("=") for kv in t.split())}
json.dump({
    "scene": {"rows": rows, "cols": cols, "bands": bands}, "model": "hu1d", "epochs": epochs, "batch": batch,
    "cores": cores,
    "samples_per_s": {"hsipipe_1_rank": s1, "pytorch_default_dataloader": sp, "hsipipe_2_ranks": s2},
    "eta": {"hsipipe_1_rank": e1, "hsipipe_2_ranks": e2},
    "val_oa_percent": {"hsipipe_1_rank": oa1, "pytorch_default_dataloader": oap, "hsipipe_2_ranks": oa2},
    "time_split": {"hsipipe_1_rank": split(a[16]), "hsipipe_2_ranks": split(a[17])},
    "ratios": {"hsipipe_vs_pytorch": s1 / sp, "ranks_2_vs_1": s2 / s1},
}, open(a[1], "w"), indent=2)
PY
fi
