#!/usr/bin/env python3
"""bench_train_ssftt.py CACHE FOLDS THREADS [MODEL]: the PyTorch baseline of `hsipipe train --model MODEL` (issue 45;
MODEL ssftt by default, or spectralformer or any network of hsipipe_models.MODELS).
The twin network of scripts/hsipipe_models.py, Adam 1e-3, batch 64, torch.set_num_threads(THREADS), a default
DataLoader over the npy cache's samples.npy (all labeled samples: the per-sample cost is the same as a fold's),
3 epochs; prints training samples/s (mean of epochs 2..) and eval-mode predict samples/s (batch 256).
Not yet folded into scripts/bench_train.sh. Figures: docs/BENCHMARKS.md."""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hsipipe_models as hm  # noqa: E402

cache, folds, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = sys.argv[4] if len(sys.argv) > 4 else "ssftt"
torch.set_num_threads(threads)
torch.manual_seed(1)
x = np.array(np.load(f"{cache}/samples.npy", mmap_mode="r"), dtype=np.float32)
lab = np.load(f"{cache}/labels.npy")
vals = sorted(set(lab.tolist()))
y = np.searchsorted(vals, lab)
net = hm.build(model, x.shape[1], len(vals), x.shape[2])
opt = torch.optim.Adam(net.parameters(), 1e-3)
ds = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
rates = []
for ep in range(3):
    t, n = time.perf_counter(), 0
    for xb, yb in torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xb), yb).backward()
        opt.step()
        n += len(xb)
    rates.append(n / (time.perf_counter() - t))
net.eval()
t = time.perf_counter()
with torch.no_grad():
    for xb, _ in torch.utils.data.DataLoader(ds, batch_size=256):
        net(xb)
print(f"pytorch {model}, {threads} threads: train {np.mean(rates[1:]):.0f} samples/s, predict {len(ds) / (time.perf_counter() - t):.0f} samples/s")
