#!/usr/bin/env python3
"""hsipipe export (issue 33): a fold's final model loaded by PyTorch (Debian's python3-torch) with the layer
definitions of scripts/hsipipe_models.py, checked against hsipipe's own numbers:

- the export's example logits (hsipipe's network on 100 seeded inputs) are reproduced within 1e-5;
- on 100 real validation samples of fold 0 (read from the cache's samples.npy), the exported network's
  softmax equals the fold's scores.npy (hsipipe's validation probabilities) within 1e-5, and its argmax the
  classes of predictions.csv;
- hsipipe_models.preprocess + patches applied to the raw scene (SPy) give the cache's stored samples, so the
  Python side can map a new scene exactly as `hsipipe predict` does;
- for hu1d and hybridsn (patch 9), trained on one patch cache;
- a wrong --fold, a missing run and --out naming a folder are refused (exit 2), nothing written.
Run by ctest (HSIPIPE_BIN, HSIPIPE_SOURCE_DIR set).
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import spectral.io.envi as envi
import torch

BIN = os.environ["HSIPIPE_BIN"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from hsitest import run, check, softmax  # noqa: E402
sys.path.insert(0, os.path.join(os.environ["HSIPIPE_SOURCE_DIR"], "scripts"))
import hsipipe_models as hm  # noqa: E402


def main():
    torch.set_num_threads(1)
    w = tempfile.mkdtemp(prefix="hsipipe-export-")
    try:
        body(w)
    finally:
        shutil.rmtree(w, ignore_errors=True)
    print("PASS")


def body(w):
    run(["synth", "--out", f"{w}/s", "--rows", "30", "--cols", "32", "--bands", "24", "--classes", "4", "--seed", "5"])
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", "--layout", "patch",
         "--patch", "9", "--dtype", "float16", "--backend", "npy", "--out", f"{w}/cache", "--no-progress"], ranks=2)
    run(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7", "--out", f"{w}/folds.json"])
    samples = np.load(f"{w}/cache/samples.npy", mmap_mode="r")
    manifest = json.load(open(f"{w}/cache/manifest.json"))
    for model in ("hu1d", "hybridsn"):
        run(["train", "--cache", f"{w}/cache", "--folds", f"{w}/folds.json", "--model", model, "--fold", "0", "--epochs", "2",
             "--batch", "64", "--deterministic", "--device", "cpu", "--quiet", "--out", f"{w}/run-{model}"], ranks=2)
        out = run(["export", "--run", f"{w}/run-{model}", "--fold", "0", "--out", f"{w}/{model}.pt"])
        check(os.path.exists(f"{w}/{model}.pt") and "hsipipe export" in out, f"{model}: export writes model.pt")
        net, d = hm.load(f"{w}/{model}.pt")
        check(d["model"] == model and d["bands"] == 24 and d["n_classes"] == 4 and list(d["label_values"]) == [1, 2, 3, 4]
              and d["patch"] == (9 if model == "hybridsn" else 1), f"{model}: the export names the model, input shape and labels")
        with torch.no_grad():
            got = net(d["example_input"]).numpy()
        want = d["example_logits"].numpy()
        err = float(np.abs(got - want).max())
        check(np.allclose(got, want, rtol=1e-5, atol=1e-5), f"{model}: PyTorch reproduces hsipipe's logits on 100 inputs (max |diff| {err:.2e})")
        real_samples(w, model, net, d, samples)
    python_preprocessing(w, manifest, samples)
    bad_input(w)


def real_samples(w, model, net, d, samples):
    rows = np.genfromtxt(f"{w}/run-{model}/fold-0/predictions.csv", delimiter=",", names=True, dtype=np.int64)[:100]
    scores = np.load(f"{w}/run-{model}/fold-0/scores.npy")[:100]
    x = torch.from_numpy(np.asarray(samples[rows["sample_id"]], dtype=np.float32))
    if d["patch"] == 1:
        x = hm.centre(x).contiguous()
    with torch.no_grad():
        prob = softmax(net(x).numpy().astype(np.float64))
    err = float(np.abs(prob - scores).max())
    check(np.allclose(prob, scores, rtol=0, atol=1e-5), f"{model}: softmax on 100 validation samples equals scores.npy (max |diff| {err:.2e})")
    labels = np.asarray(d["label_values"])[prob.argmax(axis=1)]
    check(np.array_equal(labels, rows["predicted"]), f"{model}: their classes are predictions.csv's")


def python_preprocessing(w, manifest, samples):
    _, d = hm.load(f"{w}/hybridsn.pt")
    meta = d["meta"]
    check(meta["preprocessing"]["manifest"]["data_checksum"] == manifest["data_checksum"], "the export's preprocessing is the cache's")
    cube = np.asarray(envi.open(f"{w}/s/scene.hdr").load(scale=False), dtype=np.float32)  # raw values (no reflectance scale)
    H, W, B = cube.shape
    t = hm.preprocess(cube.reshape(-1, B), meta).reshape(H, W, -1)
    rows = np.genfromtxt(f"{w}/run-hybridsn/fold-0/predictions.csv", delimiter=",", names=True, dtype=np.int64)[:200]
    p = hm.patches(t, rows["row"], rows["col"], 9, manifest.get("border", "reflect"))
    stored = np.asarray(samples[rows["sample_id"]], dtype=np.float32)
    check(np.array_equal(p, stored), "hsipipe_models.preprocess + patches on the raw scene give the cache's stored patches, bit for bit")


def bad_input(w):
    msg = run(["export", "--run", f"{w}/run-hu1d", "--fold", "2", "--out", f"{w}/x.pt"], expect=None)
    check("fold 2" in msg and not os.path.exists(f"{w}/x.pt"), "a fold that was not trained is refused, nothing written")
    msg = run(["export", "--run", f"{w}/run-hu1d", "--fold", "5", "--out", f"{w}/x.pt"], expect=2)
    check("--fold 5" in msg and not os.path.exists(f"{w}/x.pt"), "a wrong --fold is refused (exit 2)")
    msg = run(["export", "--run", f"{w}/nope", "--fold", "0", "--out", f"{w}/x.pt"], expect=2)
    check("nope" in msg and not os.path.exists(f"{w}/x.pt"), "a missing run is refused (exit 2)")
    msg = run(["export", "--run", f"{w}/run-hu1d", "--fold", "0", "--out", w], expect=2)
    check("is a folder" in msg, "--out naming a folder is refused (exit 2)")
    check(not [n for n in os.listdir(w) if ".tmp-" in n], "no temporary file is left")


if __name__ == "__main__":
    main()
