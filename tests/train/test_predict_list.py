#!/usr/bin/env python3
"""predict --scene-list (issue 46): a campaign's scenes mapped from one list file, as decode reads them.

A run (hu1d, 1 epoch, fold 0) is trained on one synthetic scene; then 2 ranks map N (60) synthetic scenes of the same
sensor, two in three of them rewritten as HDF5 (h5py; an HDF5 reader holds its file open), named in a list with
comments, blank lines, labels for every scene and a NAME on all lines but one, under `ulimit -n 64` (a 2-rank
predict needs ~45 descriptors of its own: 40 scenes held open at once would not fit):
- every scene's NAME_class.img and NAME_predict.json exist, named by the list's NAME (else the file's stem);
- each map is byte-identical to mapping that scene alone with --scene (1 rank), and its accuracy on the labels too;
- the log counts the scenes (scene K/N).
A list whose line 5 names a truncated scene fails before any scene is mapped: non-zero exit, the error names the file
and "scene list FILE line 5", and --out holds no map. --scene-list with --scene is refused.
Run by ctest (HSIPIPE_BIN set).
"""
import json
import re
import os
import sys
import tempfile

import h5py
import numpy as np

BIN = os.environ["HSIPIPE_BIN"]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from hsitest import run, check, read  # noqa: E402
N = 60


def to_hdf5(d):
    """d/scene.hdr (synth: int16 BIL) rewritten as d/scene.h5:/cube [H, W, B] with the header's wavelengths."""
    hdr = open(f"{d}/scene.hdr").read()
    H, W, B = (int(re.search(rf"^{k} = (\d+)", hdr, re.M).group(1)) for k in ("lines", "samples", "bands"))
    wl = [float(x) for x in re.search(r"^wavelength = \{([^}]*)\}", hdr, re.M).group(1).split(",")]
    cube = np.fromfile(f"{d}/scene.img", dtype="<i2").reshape(H, B, W).transpose(0, 2, 1)
    with h5py.File(f"{d}/scene.h5", "w") as f:
        f.create_dataset("cube", data=cube).attrs["wavelength"] = np.asarray(wl, dtype=np.float64)
    return "scene.h5:/cube"


def main():
    with tempfile.TemporaryDirectory(prefix="hsipipe-predict-list-") as w:
        run(["synth", "--out", f"{w}/train", "--rows", "40", "--cols", "40", "--bands", "24", "--seed", "1"])
        run(["decode", "--scene", f"{w}/train/scene.hdr", "--labels", f"{w}/train/labels.hdr", "--out", f"{w}/cache", "--no-progress"])
        run(["folds", "--cache", f"{w}/cache", "--k", "3", "--out", f"{w}/folds.json"])
        run(["train", "--cache", f"{w}/cache", "--folds", f"{w}/folds.json", "--model", "hu1d", "--fold", "0", "--epochs", "1",
             "--device", "cpu", "--quiet", "--out", f"{w}/run"])
        lines = ["# a campaign: SCENE LABELS [NAME]", ""]
        names, paths = [], []
        for i in range(N):
            run(["synth", "--out", f"{w}/scenes/s{i}", "--rows", "12", "--cols", "14", "--bands", "24", "--seed", str(100 + i)])
            # every line gives a NAME but one, whose name is its file's stem, 'scene'
            name = "scene" if i == 5 else f"flight_{i:03d}"
            names.append(name)
            scene = f"scenes/s{i}/" + (to_hdf5(f"{w}/scenes/s{i}") if i % 3 else "scene.hdr")
            paths.append(scene)
            lines.append(f"{scene} scenes/s{i}/labels.hdr" + ("" if i == 5 else f" {name}") + f"   # scene {i}")
            if i % 7 == 0:
                lines.append("")
        with open(f"{w}/campaign.txt", "w") as f:
            f.write("\n".join(lines) + "\n")

        log = run(["predict", "--run", f"{w}/run", "--fold", "0", "--scene-list", f"{w}/campaign.txt", "--device", "cpu",
                   "--out", f"{w}/maps"], ranks=2, ulimit=64)
        check(all(os.path.exists(f"{w}/maps/{n}_class.img") and os.path.exists(f"{w}/maps/{n}_predict.json") for n in names),
              f"2 ranks under ulimit -n 64 mapped all {N} scenes of the list, named by its NAME field")
        check(f"scene {N}/{N}: {names[-1]}" in log and f"scene 1/{N}: {names[0]}" in log, "the log counts the scenes")
        for i in (0, 5, 29, N - 1):
            one = f"{w}/one{i}"
            run(["predict", "--run", f"{w}/run", "--fold", "0", "--scene", f"{w}/{paths[i]}", "--labels",
                 f"{w}/scenes/s{i}/labels.hdr", "--name", names[i], "--device", "cpu", "--quiet", "--out", one])
            check(read(f"{one}/{names[i]}_class.img") == read(f"{w}/maps/{names[i]}_class.img"),
                  f"scene {i}: the list's map is byte-identical to mapping it alone with --scene")
            a = json.load(open(f"{one}/{names[i]}_predict.json"))["accuracy"]
            b = json.load(open(f"{w}/maps/{names[i]}_predict.json"))["accuracy"]
            check(a == b, f"scene {i}: the same accuracy on its labels (OA {b['oa']:.4f})")

        # a truncated scene on line 5 of the list: named, and nothing mapped
        img = f"{w}/scenes/s3/scene.img"  # an ENVI scene (3 % 3 == 0)
        with open(img, "r+b") as f:
            f.truncate(os.path.getsize(img) // 2)
        bad = ["scenes/s0/scene.hdr scenes/s0/labels.hdr a", "scenes/s1/scene.hdr scenes/s1/labels.hdr b", "",
               "# the next line is broken", "scenes/s3/scene.hdr scenes/s3/labels.hdr c", "scenes/s4/scene.hdr scenes/s4/labels.hdr d"]
        with open(f"{w}/bad.txt", "w") as f:
            f.write("\n".join(bad) + "\n")
        out = run(["predict", "--run", f"{w}/run", "--fold", "0", "--scene-list", f"{w}/bad.txt", "--device", "cpu",
                   "--out", f"{w}/badmaps"], ranks=2, expect=3)
        check("s3/scene" in out and f"scene list {w}/bad.txt line 5" in out, "a truncated scene on line 5: the error names its file and line")
        check(not os.path.exists(f"{w}/badmaps") or not any(n.endswith("_class.img") for n in os.listdir(f"{w}/badmaps")),
              "no scene of that list was mapped (every scene is checked first)")
        out = run(["predict", "--run", f"{w}/run", "--scene-list", f"{w}/bad.txt", "--scene", f"{w}/scenes/s0/scene.hdr",
                   "--out", f"{w}/x"], expect=2)
        check("both give scenes" in out, "--scene-list with --scene is refused")


if __name__ == "__main__":
    main()
