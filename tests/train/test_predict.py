#!/usr/bin/env python3
"""hsipipe predict end to end (issue 33), against independent readers (GDAL Python, SPy, numpy):

- labeled pixels match training: on the training scene, `predict --fold 0` gives exactly the classes of
  fold 0's predictions.csv for its validation samples (CPU fp32, --deterministic);
- rank count: the map is byte-identical for 1, 2 and 3 ranks;
- GIS readers agree: a georeferenced GeoTIFF scene and an ENVI scene with `map info` give maps whose
  geotransform and CRS equal the source's (GDAL Python and the gdalinfo binary), and the GeoTIFF's values
  equal the ENVI Classification file's as SPy reads it;
- the ensemble is the argmax of the k folds' averaged probabilities (numpy over each fold's --probabilities);
- a new scene of the same sensor is mapped from the run alone, its cache moved away;
- bad input (no finished checkpoint, wrong --fold, another band count, an output folder with foreign files)
  is refused with a message naming the file or field, a non-zero exit, and nothing left behind.
Run by ctest (HSIPIPE_BIN, HSIPIPE_SOURCE_DIR set); uses mpiexec with the test environment's Open MPI settings.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from osgeo import gdal, osr
import spectral.io.envi as envi

BIN = os.environ["HSIPIPE_BIN"]
gdal.UseExceptions()


def run(args, ranks=1, expect=0, cwd=None):
    cmd = ([] if ranks == 1 else ["mpiexec", "-n", str(ranks), "--oversubscribe"]) + [BIN] + args
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if (expect == 0) != (p.returncode == 0) or (expect not in (0, None) and p.returncode != expect):
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode}, expected {expect}\n{p.stdout}\n{p.stderr}")
    return p.stdout + p.stderr


def read_map(path):
    return gdal.Open(path).ReadAsArray()


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)
    print("ok:", what)


def main():
    w = tempfile.mkdtemp(prefix="hsipipe-predict-")
    try:
        body(w)
    finally:
        shutil.rmtree(w, ignore_errors=True)
    print("PASS")


def train_run(w):
    """A small synthetic scene, a patch cache (float16, p 5), 3 stratified folds, li3d trained deterministically."""
    run(["synth", "--out", f"{w}/s", "--rows", "36", "--cols", "40", "--bands", "24", "--classes", "4", "--seed", "3"])
    run(["decode", "--scene", f"{w}/s/scene.hdr", "--labels", f"{w}/s/labels.hdr", "--ignore-label", "0", "--layout", "patch",
         "--patch", "5", "--dtype", "float16", "--backend", "npy", "--out", f"{w}/cache", "--no-progress"], ranks=2)
    run(["folds", "--cache", f"{w}/cache", "--k", "3", "--seed", "7", "--out", f"{w}/folds.json"])
    run(["train", "--cache", f"{w}/cache", "--folds", f"{w}/folds.json", "--model", "li3d", "--fold", "all", "--epochs", "2",
         "--batch", "64", "--deterministic", "--device", "cpu", "--quiet", "--out", f"{w}/run"], ranks=2)


def body(w):
    train_run(w)
    scene, labels = f"{w}/s/scene.hdr", f"{w}/s/labels.hdr"
    base = ["predict", "--run", f"{w}/run", "--device", "cpu", "--batch", "100"]

    # rank count: byte-identical maps
    for r in (1, 2, 3):
        out = run(base + ["--fold", "0", "--scene", scene, "--labels", labels, "--out", f"{w}/p{r}"], ranks=r)
    check("accuracy on" in out, "predict prints the map's accuracy on the labeled pixels")
    m1 = read_map(f"{w}/p1/scene_class.tif")
    for r in (2, 3):
        check(open(f"{w}/p1/scene_class.img", "rb").read() == open(f"{w}/p{r}/scene_class.img", "rb").read()
              and np.array_equal(m1, read_map(f"{w}/p{r}/scene_class.tif")), f"the map is byte-identical for 1 and {r} ranks")

    # labeled pixels match training: fold 0's validation predictions
    rows = np.genfromtxt(f"{w}/run/fold-0/predictions.csv", delimiter=",", names=True, dtype=np.int64)
    got = m1[rows["row"], rows["col"]]
    check(np.array_equal(got, rows["predicted"]), f"the map gives fold 0's predicted class at all {len(rows)} validation samples")
    rec = json.load(open(f"{w}/p1/scene_predict.json"))
    lab = envi.open(labels).read_band(0)
    inclass = lab > 0
    check(abs(rec["accuracy"]["oa"] - float((m1[inclass] == lab[inclass]).mean())) < 1e-12, "the recorded OA is the map's accuracy on the labels")

    # the ENVI Classification file, read by SPy, holds the GeoTIFF's values; header fields
    img = envi.open(f"{w}/p1/scene_class.hdr", f"{w}/p1/scene_class.img")
    check(np.array_equal(np.asarray(img.read_band(0)), m1), "SPy reads the ENVI classification file's values as GDAL reads the GeoTIFF's")
    check(img.metadata.get("file type") == "ENVI Classification" and int(img.metadata["classes"]) == 5
          and len(img.metadata["class names"]) == 5 and img.metadata["class names"][0] == "nodata",
          "ENVI header: file type ENVI Classification, 5 classes (nodata and labels 1-4) with names")
    hdr = open(f"{w}/p1/scene_class.hdr").read()
    check(".tmp-" not in hdr, "the ENVI header names no temporary file")
    ds = gdal.Open(f"{w}/p1/scene_class.tif")
    band = ds.GetRasterBand(1)
    check(band.GetNoDataValue() == 0 and band.GetColorTable() is not None, "GeoTIFF: nodata 0 and a colour table")

    georeferenced(w, base, m1)
    ensemble(w, base, scene)
    new_scene(w, base)
    bad_input(w, base, scene)


def georeferenced(w, base, m1):
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    gt = (500000.0, 30.0, 0.0, 4100000.0, 0.0, -30.0)
    src = gdal.Open(f"{w}/s/scene.img")
    tif = gdal.GetDriverByName("GTiff").CreateCopy(f"{w}/geo.tif", src)
    tif.SetGeoTransform(gt)
    tif.SetProjection(srs.ExportToWkt())
    tif = None
    # an ENVI scene with map info: the synthetic scene's header plus GDAL-written georeferencing
    shutil.copy(f"{w}/s/scene.img", f"{w}/envigeo.img")
    text = open(f"{w}/s/scene.hdr").read()
    text += "map info = {UTM, 1, 1, 500000, 4100000, 30, 30, 33, North, WGS-84, units=Meters}\n"
    open(f"{w}/envigeo.hdr", "w").write(text)
    for name, path in (("geo", f"{w}/geo.tif"), ("envigeo", f"{w}/envigeo.hdr")):
        run(base + ["--fold", "0", "--scene", path, "--out", f"{w}/g"])
        src_ds = gdal.Open(path if path.endswith(".tif") else f"{w}/envigeo.img")
        for out in (f"{w}/g/{name}_class.tif", f"{w}/g/{name}_class.img"):
            ds = gdal.Open(out)
            check(np.allclose(ds.GetGeoTransform(), src_ds.GetGeoTransform(), rtol=0, atol=1e-9),
                  f"{os.path.basename(out)}: geotransform equals the source's")
            a, b = osr.SpatialReference(), osr.SpatialReference()
            a.ImportFromWkt(ds.GetProjection())
            b.ImportFromWkt(src_ds.GetProjection())
            check(a.IsSame(b), f"{os.path.basename(out)}: CRS equals the source's")
            check(np.array_equal(ds.ReadAsArray(), m1), f"{os.path.basename(out)}: the same classes as the ENVI scene's map")
        info = subprocess.run(["gdalinfo", f"{w}/g/{name}_class.tif"], capture_output=True, text=True)
        check(info.returncode == 0 and "UTM zone 33N" in info.stdout and "Color Table" in info.stdout,
              f"gdalinfo opens {name}_class.tif: UTM zone 33N, a colour table")


def ensemble(w, base, scene):
    probs = []
    for f in range(3):
        run(base + ["--fold", str(f), "--scene", scene, "--probabilities", "--out", f"{w}/f{f}"])
        probs.append(np.load(f"{w}/f{f}/scene_probabilities.npy").astype(np.float64))
    run(base + ["--ensemble", "--scene", scene, "--out", f"{w}/ens"], ranks=2)
    m = read_map(f"{w}/ens/scene_class.tif")
    avg = sum(probs) / 3
    valid = m != 0
    want = np.argmax(avg, axis=2) + 1  # label values 1..4
    agree = float((m[valid] == want[valid]).mean())
    # float16 probabilities round the scores: only near-ties may differ
    check(agree > 0.995, f"--ensemble is the argmax of the 3 folds' averaged probabilities ({agree:.4f} of the pixels)")
    check(np.allclose(probs[0][valid].sum(axis=1), 1, atol=5e-3), "probabilities sum to 1 over the classes")


def new_scene(w, base):
    run(["synth", "--out", f"{w}/s2", "--rows", "30", "--cols", "33", "--bands", "24", "--classes", "4", "--seed", "11"])
    os.rename(f"{w}/cache", f"{w}/cache.away")
    try:
        out = run(base + ["--fold", "1", "--scene", f"{w}/s2/scene.hdr", "--labels", f"{w}/s2/labels.hdr", "--out", f"{w}/new"])
    finally:
        os.rename(f"{w}/cache.away", f"{w}/cache")
    m = read_map(f"{w}/new/scene_class.tif")
    check(m.shape == (30, 33) and "accuracy on" in out, "a new scene of the same sensor is mapped from the run alone (cache moved away)")


def bad_input(w, base, scene):
    os.makedirs(f"{w}/emptyrun")
    msg = run(["predict", "--run", f"{w}/emptyrun", "--fold", "0", "--scene", scene, "--out", f"{w}/x1"], expect=None)
    check("checkpoint" in msg and not os.path.exists(f"{w}/x1"), "a run without checkpoints is refused, nothing written")
    shutil.copytree(f"{w}/run", f"{w}/run1")
    shutil.rmtree(f"{w}/run1/fold-2")
    msg = run(["predict", "--run", f"{w}/run1", "--ensemble", "--scene", scene, "--out", f"{w}/x2"], expect=2)
    check("fold 2" in msg and not os.path.exists(f"{w}/x2"), "--ensemble without fold 2's checkpoint is refused (exit 2)")
    msg = run(base + ["--fold", "7", "--scene", scene, "--out", f"{w}/x3"], expect=2)
    check("--fold 7" in msg and "k = 3" in msg and not os.path.exists(f"{w}/x3"), "a wrong --fold is refused (exit 2)")
    run(["synth", "--out", f"{w}/s3", "--rows", "10", "--cols", "10", "--bands", "20", "--classes", "4"])
    msg = run(base + ["--fold", "0", "--scene", f"{w}/s3/scene.hdr", "--out", f"{w}/x4"], expect=3)
    check("bands" in msg and "s3/scene.hdr" in msg and not os.path.exists(f"{w}/x4"), "a scene of 20 bands for a 24-band run is refused (exit 3)")
    os.makedirs(f"{w}/x5")
    open(f"{w}/x5/notes.txt", "w").write("mine")
    msg = run(base + ["--fold", "0", "--scene", scene, "--out", f"{w}/x5"], expect=2)
    check("notes.txt" in msg and os.listdir(f"{w}/x5") == ["notes.txt"], "an output folder with a foreign file is refused, left as it was")


if __name__ == "__main__":
    main()
