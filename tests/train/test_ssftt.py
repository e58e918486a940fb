#!/usr/bin/env python3
"""ssftt (issue 45): hsipipe's C++ SSFTT against its PyTorch twin (scripts/hsipipe_models.py), and what it refuses.

- trained 2 epochs on a PCA 12 / patch 7 cache (2 ranks), exported, loaded into the twin: the export's
  example logits (the C++ network on 100 seeded inputs, batch-norm running statistics from training) are
  reproduced within 1e-5, and the softmax on 100 real validation samples equals the fold's scores.npy;
- the twin's parameter count is the C++ one (plan's parameter total);
- a patch 3 cache is refused (exit 2, naming the patch range) before any training, nothing written.
Run by ctest (HSIPIPE_BIN, HSIPIPE_SOURCE_DIR set).
"""
import json
import os
import sys

import numpy as np
import torch

BIN = os.environ["HSIPIPE_BIN"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from hsitest import run, check, softmax, in_temp_dir  # noqa: E402
sys.path.insert(0, os.path.join(os.environ["HSIPIPE_SOURCE_DIR"], "scripts"))
import hsipipe_models as hm  # noqa: E402


def body(w):
    run(["synth", "--out", f"{w}/s", "--rows", "30", "--cols", "32", "--bands", "24", "--classes", "4", "--seed", "5"])
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", "--layout", "patch",
         "--patch", "7", "--pca", "12", "--backend", "npy", "--out", f"{w}/cache", "--no-progress"], ranks=2)
    run(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7", "--out", f"{w}/folds.json"])
    run(["train", "--cache", f"{w}/cache", "--folds", f"{w}/folds.json", "--model", "ssftt", "--fold", "0", "--epochs", "2",
         "--batch", "64", "--deterministic", "--device", "cpu", "--quiet", "--out", f"{w}/run"], ranks=2)
    run(["export", "--run", f"{w}/run", "--fold", "0", "--out", f"{w}/ssftt.pt"])
    net, d = hm.load(f"{w}/ssftt.pt")
    check(d["model"] == "ssftt" and d["bands"] == 12 and d["patch"] == 7, "the export names ssftt, 12 bands, patch 7")
    rv = d["state_dict"]["bn2d.running_var"]
    check(not torch.allclose(rv, torch.ones_like(rv)), "batch-norm running statistics were trained (not the initial ones)")
    with torch.no_grad():
        got = net(d["example_input"]).numpy()
    want = d["example_logits"].numpy()
    err = float(np.abs(got - want).max())
    check(np.allclose(got, want, rtol=1e-5, atol=1e-5), f"PyTorch twin reproduces hsipipe's ssftt logits on 100 inputs (max |diff| {err:.2e})")
    n_twin = sum(p.numel() for p in net.parameters())
    plan = json.loads(run(["plan", "--model", "ssftt", "--bands", "12", "--patch", "7", "--classes", "4", "--batch", "256",
                           "--device", "cpu", "--json"]))
    check(n_twin == sum(layer["params"] for layer in plan["layers"]), f"the twin has the {n_twin} parameters of plan's C++ trace")
    samples = np.load(f"{w}/cache/samples.npy", mmap_mode="r")
    rows = np.genfromtxt(f"{w}/run/fold-0/predictions.csv", delimiter=",", names=True, dtype=np.int64)[:100]
    scores = np.load(f"{w}/run/fold-0/scores.npy")[:100]
    with torch.no_grad():
        prob = softmax(net(torch.from_numpy(np.asarray(samples[rows["sample_id"]], dtype=np.float32))).numpy().astype(np.float64))
    err = float(np.abs(prob - scores).max())
    check(np.allclose(prob, scores, rtol=0, atol=1e-5), f"softmax on 100 validation samples equals scores.npy (max |diff| {err:.2e})")
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", "--layout", "patch",
         "--patch", "3", "--backend", "npy", "--out", f"{w}/cache3", "--no-progress"])
    run(["folds", "--cache", f"{w}/cache3", "--k", "3", "--seed", "7", "--out", f"{w}/folds3.json"])
    msg = run(["train", "--cache", f"{w}/cache3", "--folds", f"{w}/folds3.json", "--model", "ssftt", "--fold", "0", "--epochs", "1",
               "--device", "cpu", "--quiet", "--out", f"{w}/run3"], expect=2)
    check("ssftt" in msg and "[5, 99]" in msg and not os.path.exists(f"{w}/run3/fold-0"), "a patch 3 cache is refused (exit 2), naming [5, 99]")


def main():
    torch.set_num_threads(1)
    in_temp_dir("hsipipe-ssftt-", body)


if __name__ == "__main__":
    main()
