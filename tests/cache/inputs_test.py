#!/usr/bin/python3
"""Issue 35's input-side cases, end to end under real mpiexec ranks, compared with scipy/numpy.

  matrix   2-D MATLAB [bands x pixels] scenes (the unmixing data sets): image size from the file or
           --image-size / INI image_size, pixels column-major; refused without a size; the default variable
           refused when several arrays could be the scene; the variable read recorded in the manifest
  stats    a prediction cache's manifest says what its statistics were taken over
  replace  decode --force, stage and synth never delete or mix in a user's files in a cache folder; no lock
           file stays beside OUT or DEST after a finished or refused decode/stage
  errors   ranks that fail alike print one whole line
  concurrent  two decodes of one --out at once: one builds it, the other is refused (or reuses it); valid cache
Usage: inputs_test.py GROUP...  (helpers from decode_test.py)
"""
import json
import glob
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import scipy.io

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_test import BIN, MPIEXEC, check, decode, load_arrays, make_scene, manifest, run, run_groups  # noqa: E402


def unmix_file(path, H, W, B, seed, size_names=("nRow", "nCol"), extra=None):
    """An unmixing-style .mat: Y [B x H*W] column-major, the image size in scalars, abundances S_GT
    [H x W x 3], endmembers M [B x 3]. Returns the [H, W, B] cube scipy + numpy say Y holds."""
    rng = np.random.default_rng(seed)
    cube = rng.integers(100, 4000, size=(H, W, B)).astype(np.float64)
    Y = cube.reshape(H * W, B, order="F").T  # column r + c*H is pixel (r, c)
    v = {"Y": Y, "S_GT": rng.random((H, W, 3)), "M": rng.random((B, 3))}
    if size_names:
        v.update({size_names[0]: float(H), size_names[1]: float(W)})
    v.update(extra or {})
    scipy.io.savemat(path, v)
    back = scipy.io.loadmat(path)["Y"]
    return back.T.reshape(H, W, B, order="F")


def row_major_pixels(cube):
    """A prediction cache's samples with --normalize none: every pixel, scenes' rows top-down"""
    H, W, B = cube.shape
    return cube.reshape(H * W, B).astype(np.float32)


def group_matrix(d):
    H, W, B = 12, 9, 8
    mat = os.path.join(d, "jasper_like.mat")
    cube = unmix_file(mat, H, W, B, 35)
    plain = ["--normalize", "none", "--no-progress"]
    # no :VAR: Y and S_GT could both be the scene (3-D S_GT was "the only 3-D array" before)
    out = os.path.join(d, "default")
    rc, log = run(["decode", "--scene", mat, "--out", out] + plain, ranks=2)
    check(rc == 3 and "could be the scene" in log and "Y (8x108 double)" in log and "S_GT (12x9x3 double)" in log
          and not os.path.exists(out) and not os.path.exists(out + ".lock"),
          "default variable with Y and S_GT: refused (exit 3), each candidate with its shape, nothing written", log)
    # file.mat:Y: the image size from nRow/nCol, pixels column-major, on 2 ranks
    out = os.path.join(d, "y")
    rc, log = run(["decode", "--scene", mat + ":Y", "--out", out] + plain, ranks=2)
    if check(rc == 0, "file.mat:Y decodes with nRow/nCol from the file", log):
        m, a = load_arrays(out)
        check(m["scenes"][0]["rows"] == H and m["scenes"][0]["cols"] == W and m["n_bands"] == B,
              "  ... as a %d x %d x %d image" % (H, W, B))
        check(np.array_equal(a["samples"], row_major_pixels(cube)),
              "  ... samples equal scipy's Y.T.reshape(H, W, B, order='F')")
        sp = m["params"]["scenes"][0]
        check(sp["variable"] == "Y" and sp["image_size"] == "%dx%d" % (H, W), "  ... params record Y and %dx%d" % (H, W), json.dumps(sp))
        rc, log = run(["verify", out, "--samples", "20"], ranks=0)
        check(rc == 0 and "OK" in log, "  ... verify re-decodes it from the manifest", log)
    # the other names of the image size
    for names in (("lines", "cols"), ("nr", "nc")):
        f = os.path.join(d, "named_%s.mat" % names[0])
        c2 = unmix_file(f, H, W, B, 36, size_names=names)
        out = os.path.join(d, "named_" + names[0])
        rc, log = run(["decode", "--scene", f + ":Y", "--out", out] + plain, ranks=1)
        check(rc == 0 and np.array_equal(load_arrays(out)[1]["samples"], row_major_pixels(c2)),
              "image size from %s/%s" % names, log)
    # no size in the file: refused, saying what to add; --image-size and INI image_size decode it
    bare = os.path.join(d, "bare.mat")
    c3 = unmix_file(bare, H, W, B, 37, size_names=None)
    out = os.path.join(d, "bare")
    rc, log = run(["decode", "--scene", bare + ":Y", "--out", out] + plain, ranks=2)
    check(rc == 3 and "--image-size" in log and "nRow" in log and "bare.mat" in log and not os.path.exists(out)
          and not os.path.exists(out + ".lock"), "a 2-D Y without its size: refused, naming what to add", log)
    rc, log = run(["decode", "--scene", bare + ":Y", "--image-size", "%dx%d" % (H, W), "--out", out] + plain, ranks=2)
    check(rc == 0 and np.array_equal(load_arrays(out)[1]["samples"], row_major_pixels(c3)), "--image-size 12x9 decodes it", log)
    ini = os.path.join(d, "bare.ini")
    with open(ini, "w") as f:
        f.write("normalize = none\n[scene.bare]\npath = bare.mat\nvariable = Y\nimage_size = %dx%d\n" % (H, W))
    out2 = os.path.join(d, "bare_ini")
    rc, log = run(["decode", "--config", ini, "--out", out2, "--no-progress"], ranks=2)
    check(rc == 0 and manifest(out2)["data_checksum"] == manifest(out)["data_checksum"], "INI image_size: the same cache", log)
    rc, log = run(["decode", "--scene", bare + ":Y", "--image-size", "10x10", "--out", os.path.join(d, "wrong")] + plain, ranks=1)
    check(rc == 3 and "100 pixels" in log, "--image-size that does not fit: refused", log)
    # labels stay 2-D H x W beside the matrix scene
    lab = np.random.default_rng(3).integers(0, 4, size=(H, W)).astype(np.uint8)
    lab[0, 0] = 1
    gt = os.path.join(d, "gt.mat")
    scipy.io.savemat(gt, {"gt": lab, "nRow": float(H), "nCol": float(W)})
    out = os.path.join(d, "labeled")
    rc, log = run(["decode", "--scene", mat + ":Y", "--labels", gt, "--out", out] + plain, ranks=2)
    if check(rc == 0, "matrix scene + 2-D label raster", log):
        m, a = load_arrays(out)
        rr, cc = np.nonzero(lab)
        check(np.array_equal(a["labels"], lab[rr, cc]) and np.array_equal(a["samples"], cube[rr, cc].astype(np.float32)),
              "  ... labels H x W, samples at their pixels")
        check(m["params"]["scenes"][0]["labels"]["variable"] == "gt", "  ... the labels' default variable recorded")
        check(m["statistics"]["over"] == "labeled", "  ... statistics over the labeled pixels")

    # the default variable, recorded; an older manifest's "" compares equal to it
    one = os.path.join(d, "one.mat")
    scipy.io.savemat(one, {"img": np.random.default_rng(4).integers(0, 999, size=(10, 7, 5)).astype(np.int16)})
    out = os.path.join(d, "one")
    rc, log = run(["decode", "--scene", one, "--out", out, "--no-progress"], ranks=1)
    check(rc == 0 and manifest(out)["params"]["scenes"][0]["variable"] == "img", "the default variable is recorded (img)", log)
    m = manifest(out)
    m["params"]["scenes"][0]["variable"] = ""
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(m, f)
    rc, log = run(["decode", "--scene", one, "--out", out, "--no-progress"], ranks=1)
    check(rc == 0 and "decode skipped" in log, "a cache recording \"variable\": \"\" (older hsipipe) is still current", log)
    rc, log = run(["decode", "--scene", one + ":img", "--out", out, "--no-progress"], ranks=1)
    check(rc == 0 and "decode skipped" in log, "... and one:img names the same cache", log)


def group_stats(d):
    hdr, gt = make_scene(d, "s", H=20, W=15, B=10, seed=5)
    out = os.path.join(d, "pred")
    rc, log = decode(hdr, None, out, 2)
    check(rc == 0 and manifest(out)["statistics"]["over"] == "all-pixels",
          "prediction cache (no labels): statistics.over says all-pixels, what was used", log)
    out = os.path.join(d, "train")
    rc, log = decode(hdr, gt, out, 2)
    check(rc == 0 and manifest(out)["statistics"]["over"] == "labeled", "training cache: statistics.over labeled", log)


def listing(p):
    return sorted(os.listdir(p))


def group_replace(d):
    hdr, gt = make_scene(d, "r", H=20, W=15, B=10, seed=6)
    out = os.path.join(d, "c")
    rc, log = decode(hdr, gt, out, 2)
    check(rc == 0 and not os.path.exists(out + ".lock"), "a finished decode leaves no OUT.lock beside the cache", log)
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("my notes\n")
    os.makedirs(os.path.join(out, "plots"))
    before, cs = listing(out), manifest(out)["data_checksum"]
    for extra, what in ((["--force", "--dtype", "float16"], "replacing"), (["--force"], "rebuilding a current one")):
        rc, log = decode(hdr, gt, out, 2, extra)
        check(rc == 2 and "notes.txt" in log and "plots/" in log and listing(out) == before and
              manifest(out)["data_checksum"] == cs and not os.path.exists(out + ".lock"),
              "decode --force %s: refused naming notes.txt and plots/, nothing changed, no lock left" % what, log)
    rc, log = decode(hdr, gt, out, 2)
    check(rc == 0 and "decode skipped" in log and listing(out) == before, "reusing it keeps the user's files", log)
    # a refused decode (the folder of the scenes as --out) leaves no lock beside it
    rc, log = decode(hdr, gt, d, 1, ["--force"])
    check(rc != 0 and not os.path.exists(d + ".lock"), "a refused decode leaves no lock", log)
    # a decode refused for its input after it took the lock (a labeled pixel that is nodata, found while decoding)
    # leaves none of the folders it made for --out's parent, and no lock (issue 35 item 14: it left newdir/sub/)
    bad_hdr, bad_gt = make_scene(d, "bad", H=10, W=9, B=6, seed=3, labeled_frac=1.0, ignore_value=-9999)
    newdir = os.path.join(d, "newdir")
    for ranks in (1, 2):
        rc, log = decode(bad_hdr, bad_gt, os.path.join(newdir, "sub", "cache"), ranks)
        check(rc == 3 and "labeled pixel (row 3, col 7)" in log and not os.path.exists(newdir),
              "decode --out newdir/sub/cache refused for its input (%d rank%s): no newdir/ left" % (ranks, "s"[:ranks - 1]), log)
    # stage: a user's file in DEST is not deleted by replacing the copy
    clean = os.path.join(d, "clean")
    rc, log = decode(hdr, gt, clean, 1, ["--backend", "npy"])
    # a stage refused because its source is corrupt (found once copied) leaves none of the folders it made for DEST
    corrupt = os.path.join(d, "corrupt")
    shutil.copytree(clean, corrupt)
    with open(os.path.join(corrupt, "samples.npy"), "r+b") as f:
        f.seek(-3, os.SEEK_END)
        b = f.read(1)
        f.seek(-3, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))
    newstage = os.path.join(d, "newstage")
    rc, log = run(["stage", corrupt, os.path.join(newstage, "sub", "copy")], ranks=0)
    check(rc == 5 and "fails its data checksum" in log and not os.path.exists(newstage),
          "stage CORRUPT newstage/sub/copy refused: no newstage/ left", log)
    dest = os.path.join(d, "local", "copy")
    rc, log = run(["stage", clean, dest], ranks=0)
    check(rc == 0 and not os.path.exists(dest + ".lock"), "stage: copied, no DEST.lock left", log)
    with open(os.path.join(dest, "mine.txt"), "w") as f:
        f.write("x\n")
    rc, log = run(["stage", clean, dest], ranks=0)
    check(rc == 2 and "mine.txt" in log and os.path.exists(os.path.join(dest, "mine.txt")) and not os.path.exists(dest + ".lock"),
          "stage over a copy holding a user's file: refused naming it, kept", log)
    # synth into a cache: refused, nothing added
    before = listing(clean)
    rc, log = run(["synth", "--out", clean, "--rows", "8", "--cols", "8", "--bands", "4"], ranks=0)
    check(rc == 2 and "is a cache" in log and listing(clean) == before, "synth --out CACHE: refused, nothing written", log)


def group_errors(d):
    """Several ranks with one error: printed once, each line whole (it was "hsipipe hsipipe decode: error: ..."
    with the rest of the line after the other rank's)."""
    hdr, gt = make_scene(d, "e", H=10, W=8, B=6, seed=8)
    for i in range(3):
        rc, log = run(["decode", "--scene", hdr, "--out", os.path.join(d, "x"), "--no-progress", "--no-progress"], ranks=4)
        lines = [ln for ln in log.splitlines() if "hsipipe" in ln]
        check(rc == 2 and log.count("cannot be specified more than once") == 1 and
              all(ln.startswith("hsipipe decode: error: ") and ln.count("hsipipe decode: error:") == 1 for ln in lines),
              "4 ranks with one option error: one whole line (run %d)" % i, log)


def group_concurrent(d):
    """Two decodes of one --out at once (issue 35 item 14): the lock lets one build it; the other is refused at once,
    naming the holder, or, once the cache is published, reuses it. The winner's cache is valid, and neither leaves a
    lock file or a temporary copy."""
    hdr, gt = make_scene(d, "k", H=40, W=30, B=12, seed=9)
    out = os.path.join(d, "new", "cache")
    base = [MPIEXEC, "-n", "2", "--oversubscribe", BIN, "decode", "--scene", hdr, "--labels", gt, "--out", out, "--no-progress"]
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # A holds the lock for 3 s before publishing (its temporary copy is there meanwhile): B arrives in that window
    a = subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(e, HSIPIPE_TEST_DELAY_PUBLISH_MS="3000"))
    t0 = time.time()
    while time.time() - t0 < 60 and not glob.glob(out + ".tmp-*"):
        time.sleep(0.05)
    rc_b, log_b = run(["decode", "--scene", hdr, "--labels", gt, "--out", out, "--no-progress"], ranks=2)
    log_a = a.communicate(timeout=120)[0]
    check(a.returncode == 0 and "decode: wrote " + out in log_a, "A, holding the lock: wrote the cache", log_a)
    check(rc_b == 1 and "another decode is building this cache now (lock held by pid " in log_b and
          time.time() - t0 < 60, "B, while A held the lock: refused at once, naming the holder (exit 1)", log_b)
    rc, log = run(["verify", out], ranks=0)
    check(rc == 0 and not os.path.exists(out + ".lock") and not glob.glob(out + ".*"),
          "A's cache verifies; no lock file, no temporary copy", log)
    # both started at once, three times, each on a new --out: exactly one builds; the other is refused or reuses
    for i in range(3):
        o = os.path.join(d, "race%d" % i, "cache")
        cmd = [c if c != out else o for c in base]
        ps = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e) for _ in range(2)]
        res = [(p.wait(timeout=120), p.stdout.read()) for p in ps]
        wrote = [r for r in res if r[0] == 0 and "decode: wrote " + o in r[1]]
        other = [r for r in res if r not in wrote]
        ok_other = len(other) == 1 and ((other[0][0] == 0 and "decode skipped: cache is current" in other[0][1]) or
                                        (other[0][0] == 1 and "another decode is building this cache now" in other[0][1]))
        rc, log = run(["verify", o], ranks=0)
        check(len(wrote) == 1 and ok_other and rc == 0 and not glob.glob(o + ".*"),
              "race %d: one decode built the cache, the other was refused or reused it; the cache verifies, nothing left"
              % i, "\n".join(r[1] for r in res) + log)


if __name__ == "__main__":
    run_groups({"matrix": group_matrix, "stats": group_stats, "replace": group_replace, "errors": group_errors,
                "concurrent": group_concurrent},
               "hsipipe-inputs-")
