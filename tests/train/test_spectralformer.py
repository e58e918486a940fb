#!/usr/bin/env python3
"""spectralformer (issue 45): hsipipe's C++ SpectralFormer against its PyTorch twin (scripts/hsipipe_models.py),
what it learns, and what it refuses.

- trained 6 epochs on 2 ranks on a 24-band, patch 5 synthetic cache (4 classes): validation OA clearly above
  chance (> 0.6 against 0.25);
- exported and loaded into the twin (eval mode): the export's example logits (the C++ network on 100 seeded
  inputs) are reproduced within 1e-5, and the softmax on 100 real validation samples equals scores.npy;
- the twin's parameter count is the C++ one (plan's parameter total) and the formula's;
- a pixel-layout cache and a 2-component cache are refused (exit 2, naming why) before any training.
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


def decode(w, out, *extra, ranks=1):
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", *extra,
         "--backend", "npy", "--out", f"{w}/{out}", "--no-progress"], ranks=ranks)
    run(["folds", "--cache", f"{w}/{out}", "--k", "3", "--seed", "7", "--out", f"{w}/{out}.json"])


def parity(w):
    run(["export", "--run", f"{w}/run", "--fold", "0", "--out", f"{w}/sf.pt"])
    net, d = hm.load(f"{w}/sf.pt")
    check(d["model"] == "spectralformer" and d["bands"] == 24 and d["patch"] == 5, "the export names spectralformer, 24 bands, patch 5")
    with torch.no_grad():
        got = net(d["example_input"]).numpy()
    want = d["example_logits"].numpy()
    err = float(np.abs(got - want).max())
    check(np.allclose(got, want, rtol=1e-5, atol=1e-5), f"PyTorch twin reproduces hsipipe's spectralformer logits on 100 inputs (max |diff| {err:.2e})")
    n_twin = sum(p.numel() for p in net.parameters())
    plan = json.loads(run(["plan", "--model", "spectralformer", "--bands", "24", "--patch", "5", "--classes", "4", "--batch", "256",
                           "--device", "cpu", "--json"]))
    # embedding 3*25*64+64, positions 25*64, class token 64, 5 layers of 17,800, 3 fusions 25*25*2+25, head 128+4*64+4
    formula = 4864 + 1600 + 64 + 5 * 17800 + 3 * 1275 + 388
    check(n_twin == sum(layer["params"] for layer in plan["layers"]) == formula,
          f"the twin has the {n_twin} parameters of plan's C++ trace (= the formula's {formula})")
    samples = np.load(f"{w}/cache/samples.npy", mmap_mode="r")
    rows = np.genfromtxt(f"{w}/run/fold-0/predictions.csv", delimiter=",", names=True, dtype=np.int64)[:100]
    scores = np.load(f"{w}/run/fold-0/scores.npy")[:100]
    with torch.no_grad():
        prob = softmax(net(torch.from_numpy(np.asarray(samples[rows["sample_id"]], dtype=np.float32))).numpy().astype(np.float64))
    err = float(np.abs(prob - scores).max())
    check(np.allclose(prob, scores, rtol=0, atol=1e-5), f"softmax on 100 validation samples equals scores.npy (max |diff| {err:.2e})")


def refusals(w):
    decode(w, "pix", "--layout", "pixel")
    msg = run(["train", "--cache", f"{w}/pix", "--folds", f"{w}/pix.json", "--model", "spectralformer", "--fold", "0", "--epochs", "1",
               "--device", "cpu", "--quiet", "--out", f"{w}/run_pix"], expect=2)
    check("spectralformer" in msg and "layout pixel" in msg and not os.path.exists(f"{w}/run_pix/fold-0"),
          "a pixel-layout cache is refused (exit 2), naming the layout")
    decode(w, "pca2", "--layout", "patch", "--patch", "5", "--pca", "2")
    msg = run(["train", "--cache", f"{w}/pca2", "--folds", f"{w}/pca2.json", "--model", "spectralformer", "--fold", "0", "--epochs", "1",
               "--device", "cpu", "--quiet", "--out", f"{w}/run_pca2"], expect=2)
    check("spectralformer" in msg and "at least 3 bands" in msg and not os.path.exists(f"{w}/run_pca2/fold-0"),
          "a 2-band cache is refused (exit 2), naming the 3 bands needed")


def body(w):
    run(["synth", "--out", f"{w}/s", "--rows", "30", "--cols", "32", "--bands", "24", "--classes", "4", "--seed", "5"])
    decode(w, "cache", "--layout", "patch", "--patch", "5", ranks=2)
    run(["train", "--cache", f"{w}/cache", "--folds", f"{w}/cache.json", "--model", "spectralformer", "--fold", "0", "--epochs", "6",
         "--batch", "32", "--lr", "0.001", "--deterministic", "--device", "cpu", "--quiet", "--out", f"{w}/run"], ranks=2)
    oa = json.load(open(f"{w}/run/fold-0/metrics.json"))["metrics"]["oa"]
    check(oa > 0.6, f"2 ranks, 6 epochs: validation OA {oa:.3f}, clearly above chance (0.25)")
    parity(w)
    refusals(w)


def main():
    torch.set_num_threads(1)
    in_temp_dir("hsipipe-spectralformer-", body)


if __name__ == "__main__":
    main()
