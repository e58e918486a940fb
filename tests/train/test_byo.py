#!/usr/bin/python3
"""Bring your own network (issue 44): TorchScript networks through every path, and the training recipe.

The networks are the examples users copy from (models/), scripted with models/script_model.py by Debian's
PyTorch; PyTorch is the independent side: it computes the exported network's scores and the schedule's rates.
- 2 ranks train the spectral-spatial transformer over all folds; fold 1 of `--fold all` equals fold 1 alone
  (each fold starts from the file's weights, not the previous fold's);
- the residual CNN (BatchNorm, dropout, a residual branch) interrupted by SIGUSR1 on 2 ranks and resumed gives
  the uninterrupted run's checkpoint weights, scores and predictions, byte for byte (--deterministic);
- predict (one fold and the ensemble) maps the scene; export writes TorchScript that torch.jit.load reads and
  whose softmax reproduces the fold's validation scores;
- refusals naming the file: not TorchScript, a file too new for libtorch, the wrong output shape, a forward that
  throws, another file on --resume or into the run; nothing is left in --out;
- the recipe: adamw, step and cosine schedules with warm-up against the formula, the schedule's horizon on
  --resume --epochs N (refused without --schedule-epochs, extended with it), balanced class weights and label
  smoothing recorded in the identity, another recipe into the run refused naming the option.
"""
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import torch

BIN = os.environ["HSIPIPE_BIN"]
SRC = os.environ["HSIPIPE_SOURCE_DIR"]
FAILS = []


def run(args, ranks=1, env=None, timeout=600):
    cmd = ([] if ranks == 1 else ["mpiexec", "-n", str(ranks), "--oversubscribe"]) + [BIN] + args
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def must(args, **kw):
    rc, out = run(args, **kw)
    if rc != 0:
        sys.exit(f"FAIL (set-up): hsipipe {' '.join(args)}: exit {rc}\n{out}")
    return out


def check(cond, what, log=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)
        if log:
            print("     " + log.strip().replace("\n", "\n     ")[-2000:])


def refused(args, want_rc, words, what, **kw):
    rc, out = run(args, **kw)
    check(rc == want_rc and all(x in out for x in words), f"{what}: exit {rc}, message names {words}", out)
    return out


def script(name, path, bands, patch, classes, seed=0):
    p = subprocess.run([sys.executable, f"{SRC}/models/script_model.py", name, "--bands", str(bands), "--patch", str(patch),
                        "--classes", str(classes), "--out", path, "--seed", str(seed)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL (set-up): script_model.py {name}: {p.stdout}{p.stderr}")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def epochs(run_dir, fold):
    with open(f"{run_dir}/fold-{fold}/epochs.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]


def interrupt(args, run_dir, after_epochs, ranks=2, delay_ms=15):
    """Starts hsipipe ARGS under mpiexec with a pause per step, sends mpiexec SIGUSR1 (forwarded to the ranks)
    once `after_epochs` epochs are recorded; returns (exit status, output)."""
    cmd = ["mpiexec", "-n", str(ranks), "--oversubscribe", BIN] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "HSIPIPE_TEST_STEP_DELAY_MS": str(delay_ms)})
    log = f"{run_dir}/fold-0/epochs.jsonl"
    for _ in range(2400):
        if os.path.exists(log) and open(log).read().count("\n") >= after_epochs:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGUSR1)
    out, _ = p.communicate(timeout=300)
    return p.returncode, out


def set_up(w):
    must(["synth", "--out", f"{w}/scene", "--rows", "30", "--cols", "30", "--bands", "20", "--classes", "4", "--seed", "5"])
    must(["decode", "--scene", f"{w}/scene/scene.hdr", "--labels", f"{w}/scene/labels.hdr", "--out", f"{w}/cache",
          "--layout", "patch", "--patch", "5", "--backend", "npy", "--no-progress"])
    must(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7", "--out", f"{w}/folds.json"])
    script("spectral_spatial_transformer", f"{w}/sst.pt", 20, 5, 4)
    script("residual_cnn", f"{w}/rcnn.pt", 20, 5, 4)
    return ["--cache", f"{w}/cache", "--folds", f"{w}/folds.json", "--batch", "32", "--deterministic", "--quiet"]


def transformer_all_folds(w, tr):
    out = must(["train"] + tr + ["--model", f"{w}/sst.pt", "--fold", "all", "--epochs", "4", "--out", f"{w}/sst"], ranks=2)
    s = json.load(open(f"{w}/sst/summary.json"))
    check(s["mean"]["oa"] > 0.85, f"the transformer trained on 2 ranks over 3 folds: mean OA {s['mean']['oa']:.3f} > 0.85", out)
    check(s["run"]["config"]["model"] == "torchscript" and len(s["run"]["config"]["model_sha256"]) == 64,
          "the run's identity holds the network's SHA-256, not its path")
    check(read_bytes(f"{w}/sst/model.pt") == read_bytes(f"{w}/sst.pt"), "the run keeps the network's file (RUN/model.pt)")
    must(["train"] + tr + ["--model", f"{w}/sst.pt", "--fold", "1", "--epochs", "4", "--out", f"{w}/sst1"], ranks=2)
    check(read_bytes(f"{w}/sst/fold-1/predictions.csv") == read_bytes(f"{w}/sst1/fold-1/predictions.csv"),
          "fold 1 of --fold all equals fold 1 alone: each fold starts from the file's weights")
    out = must(["predict", "--run", f"{w}/sst", "--ensemble", "--scene", f"{w}/scene/scene.hdr", "--labels",
                f"{w}/scene/labels.hdr", "--out", f"{w}/maps/"], ranks=2)
    check("OA 0.9" in out or "OA 1.0" in out, "predict --ensemble maps the scene with the scripted folds (OA >= 0.9)", out)


def resume_bit_identical(w, tr):
    args = ["train"] + tr + ["--model", f"{w}/rcnn.pt", "--fold", "0", "--epochs", "6", "--augment", "flip,rot90"]
    must(args + ["--out", f"{w}/ref"], ranks=2)
    rc, out = interrupt(args + ["--out", f"{w}/int"], f"{w}/int", 2)
    check(rc == 75 and os.path.exists(f"{w}/int/fold-0/checkpoint.pt") and not os.path.exists(f"{w}/int/fold-0/metrics.json"),
          f"SIGUSR1 on 2 ranks: a checkpoint, exit {rc} (75)", out)
    out = must(args + ["--out", f"{w}/int", "--resume"], ranks=2)
    same = all(read_bytes(f"{w}/ref/fold-0/{f}") == read_bytes(f"{w}/int/fold-0/{f}") for f in ("predictions.csv", "scores.npy"))
    check(same and "resumed from checkpoint" in out, "interrupted + resumed == uninterrupted: predictions.csv and scores.npy", out)
    for d in ("ref", "int"):
        must(["export", "--run", f"{w}/{d}", "--fold", "0", "--out", f"{w}/{d}.pt"])
    wa = {k: v for k, v in torch.jit.load(f"{w}/ref.pt").state_dict().items()}
    wb = {k: v for k, v in torch.jit.load(f"{w}/int.pt").state_dict().items()}
    check(wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa),
          f"the resumed network's {len(wa)} parameters and buffers (BatchNorm statistics included) equal the uninterrupted one's")
    bn = [k for k in wa if k.endswith("running_mean")]
    script("residual_cnn", f"{w}/fresh.pt", 20, 5, 4)
    fresh = torch.jit.load(f"{w}/fresh.pt").state_dict()
    check(bn and not torch.equal(wa[bn[0]], fresh[bn[0]]), "BatchNorm's running statistics were trained (they moved from the file's)")


def export_in_pytorch(w):
    extra = {"hsipipe.json": ""}
    net = torch.jit.load(f"{w}/ref.pt", _extra_files=extra)
    meta = json.loads(extra["hsipipe.json"])
    net.eval()
    samples = np.load(f"{w}/cache/samples.npy")
    ids = [int(line.split(",")[0]) for line in open(f"{w}/ref/fold-0/predictions.csv").read().splitlines()[1:]]
    with torch.no_grad():
        got = torch.softmax(net(torch.from_numpy(samples[ids].astype(np.float32))), dim=1).numpy()
    want = np.load(f"{w}/ref/fold-0/scores.npy")
    err = float(np.abs(got - want).max())
    check(meta["model"] == "torchscript" and meta["bands"] == 20 and meta["patch"] == 5 and got.shape == want.shape and err < 1e-5,
          f"export: torch.jit.load'ed network reproduces fold 0's validation scores (max |diff| {err:.1e}), record in hsipipe.json")


def too_new(src, dst):
    """The scripted file with its archive's format version raised past any libtorch's."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("/version") or item.filename == "version":
                data = b"99\n"
            zout.writestr(item, data)


def refusals(w, tr):
    with open(f"{w}/junk.pt", "wb") as f:
        f.write(os.urandom(4096))
    too_new(f"{w}/sst.pt", f"{w}/new.pt")
    script("spectral_spatial_transformer", f"{w}/three.pt", 20, 5, 3)
    script("spectral_spatial_transformer", f"{w}/bands.pt", 24, 5, 4)
    cases = [("junk.pt", ["not a TorchScript file", "junk.pt", "libtorch 1.13"]),
             ("new.pt", ["not a TorchScript file", "new.pt"]),
             ("three.pt", ["three.pt", "[2, 3]", "needs logits [2, 4]", "4 classes"]),
             ("bands.pt", ["bands.pt", "forward on a batch of two failed", "20 bands", "patch 5"])]
    for name, words in cases:
        out_dir = f"{w}/refused-{name}"
        refused(["train"] + tr + ["--model", f"{w}/{name}", "--fold", "0", "--epochs", "1", "--out", out_dir], 2, words,
                f"--model {name} refused before training")
        check(not os.path.exists(out_dir), f"--model {name}: nothing left at --out")
    script("spectral_spatial_transformer", f"{w}/other.pt", 20, 5, 4, seed=9)
    refused(["train"] + tr + ["--model", f"{w}/other.pt", "--fold", "0", "--epochs", "6", "--augment", "flip,rot90", "--out",
                              f"{w}/int", "--resume"], 2,
            ["--model", "SHA-256"], "--resume with another network file")
    refused(["train"] + tr + ["--model", f"{w}/other.pt", "--fold", "2", "--epochs", "4", "--out", f"{w}/sst"], 2,
            ["--model (the TorchScript file's SHA-256)", "preprocessing.json"], "another network file trained into the run")
    refused(["train"] + tr + ["--model", "nosuchnet", "--fold", "0", "--out", f"{w}/x"], 2, ["unknown model 'nosuchnet'", "TorchScript file"],
            "an unknown model name")


def schedule_lr(kind, base, warm, horizon, e):
    """The documented schedule (docs/BYO_NETWORK.md, train/schedule.hpp), written again."""
    if e < warm:
        return base * (e + 1) / warm
    if kind == "none":
        return base
    span = max(1, horizon - warm)
    if kind == "step":
        return base * 0.1 ** ((e >= round(warm + span / 2)) + (e >= round(warm + 3 * span / 4)))
    return base * 0.5 * (1 + math.cos(math.pi * (min(e, horizon - 1) - warm) / span))


def recipe(w, tr):
    base = ["train"] + tr + ["--model", "mlp", "--fold", "0", "--lr", "0.01"]
    for kind, warm in (("cosine", 2), ("step", 0)):
        out = must(base + ["--optimizer", "adamw", "--weight-decay", "0.01", "--schedule", kind, "--warmup-epochs", str(warm),
                           "--epochs", "8", "--out", f"{w}/lr-{kind}"])
        got = [r["lr"] for r in epochs(f"{w}/lr-{kind}", 0)]
        want = [schedule_lr(kind, 0.01, warm, 8, e) for e in range(8)]
        check(len(got) == 8 and all(abs(a - b) < 1e-12 for a, b in zip(got, want)), f"--schedule {kind} --warmup-epochs {warm}: lr per epoch {got}", out)
    # the trap of --resume --epochs N: an interrupted 8-epoch cosine run extended to 10 epochs
    cos = base + ["--optimizer", "adamw", "--weight-decay", "0.01", "--schedule", "cosine", "--warmup-epochs", "2"]
    rc, out = interrupt(cos + ["--epochs", "8", "--out", f"{w}/ext"], f"{w}/ext", 3, ranks=1, delay_ms=40)
    check(rc == 75, f"the cosine run interrupted (exit {rc})", out)
    refused(cos + ["--epochs", "10", "--out", f"{w}/ext", "--resume"], 2, ["--schedule-epochs", "8"],
            "--resume --epochs 10 without --schedule-epochs: the schedule would change mid-run")
    out = must(cos + ["--epochs", "10", "--schedule-epochs", "8", "--out", f"{w}/ext", "--resume"])
    got = [r["lr"] for r in epochs(f"{w}/ext", 0)]
    want = [schedule_lr("cosine", 0.01, 2, 8, e) for e in range(10)]
    check(len(got) == 10 and all(abs(a - b) < 1e-12 for a, b in zip(got, want)),
          f"--resume --epochs 10 --schedule-epochs 8 extends the run under its schedule: {got}", out)
    out = must(base + ["--class-weights", "balanced", "--label-smoothing", "0.1", "--epochs", "2", "--out", f"{w}/cw"])
    cfg = json.load(open(f"{w}/cw/fold-0/metrics.json"))["run"]["config"]
    check(cfg.get("class_weights") == "balanced" and cfg.get("label_smoothing") == 0.1, f"the recipe is in the run's identity: {cfg}", out)
    fold1 = [a if a != "0" else "1" for a in base]  # --fold 1
    refused(fold1 + ["--class-weights", "balanced", "--label-smoothing", "0.2", "--epochs", "2", "--out", f"{w}/cw"], 2,
            ["--label-smoothing", "0.2", "0.1"], "a fold of another recipe into the run")
    refused(base + ["--schedule", "linear", "--out", f"{w}/bad"], 2, ["--schedule", "linear"], "an unknown schedule")
    rc, out = run(["train"] + tr + ["--model", f"{w}/sst.pt", "--fold", "0", "--epochs", "1", "--precision", "bf16", "--out", f"{w}/bf16"], ranks=2)
    check(rc == 0, "the TorchScript network under --precision bf16 on 2 ranks", out)


def main():
    w = tempfile.mkdtemp(prefix="hsipipe-byo-")
    try:
        tr = set_up(w)
        transformer_all_folds(w, tr)
        resume_bit_identical(w, tr)
        export_in_pytorch(w)
        refusals(w, tr)
        recipe(w, tr)
    finally:
        if not os.environ.get("HSIPIPE_TEST_KEEP"):
            shutil.rmtree(w, ignore_errors=True)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
