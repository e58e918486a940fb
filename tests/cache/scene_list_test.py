#!/usr/bin/python3
"""decode --scene-list FILE (issue 46, item 1), end to end under real mpiexec ranks, against numpy.

  many    150 small scenes (ENVI, HDF5 and MATLAB mixed) in one list, decoded on 2 ranks into one cache under
          `ulimit -n 100` (150 scenes open at once would not fit: checked), compared sample by sample with the
          scenes numpy wrote; the same cache from 1 and 3 ranks and from an INI `scene_list =`; progress names
          the scene ("scene K/150"); verify under the same limit
  errors  a broken scene on line N of a list (missing file, truncated data, lying headers, another band count,
          other wavelengths, labels of another size, a line of four fields): non-zero exit, a message naming the
          file and "line N", and nothing in the output folder (no cache, manifest, temporary or lock file)
Usage: scene_list_test.py GROUP...  (helpers from decode_test.py)
"""
import os
import resource
import subprocess
import sys

import h5py
import numpy as np
import scipy.io

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decode_test import check, load_arrays, manifest, run, run_groups, write_envi  # noqa: E402

B = 16
WAVELENGTHS = np.linspace(400, 2500, B)
FD_LIMIT = 100  # a 2-rank decode holds ~30 descriptors besides its scenes (Open MPI, the cache's files)


def wl_text(wl):
    return "wavelength units = Nanometers\nwavelength = {%s}\n" % ", ".join("%.1f" % w for w in wl)


def make_cube(i, H, W, bands=B):
    rng = np.random.default_rng(1000 + i)
    cube = (rng.integers(200, 4000, size=(1, 1, bands)) + rng.integers(-150, 150, size=(H, W, bands))).astype(np.int16)
    lab = np.where(rng.random((H, W)) < 0.5, rng.integers(1, 5, size=(H, W)), 0).astype(np.uint8)
    return cube, lab


def write_scene(d, i, fmt, H, W, bands=B, wl=WAVELENGTHS):
    """Scene i in format fmt under d/sNNN/; returns (list line fields relative to d, cube, labels)."""
    cube, lab = make_cube(i, H, W, bands)
    sub = "s%03d" % i
    os.makedirs(os.path.join(d, sub), exist_ok=True)
    write_envi(os.path.join(d, sub, "gt"), lab[:, :, None], 1, "classes = 5\n")
    if fmt == "envi":
        write_envi(os.path.join(d, sub, "scene"), cube, 2, wl_text(wl))
        scene = sub + "/scene.hdr"
    elif fmt == "h5":
        with h5py.File(os.path.join(d, sub, "scene.h5"), "w") as f:
            f.create_dataset("cube", data=cube).attrs["wavelength"] = np.asarray(wl, dtype=np.float64)
        scene = sub + "/scene.h5:/cube"
    else:
        scipy.io.savemat(os.path.join(d, sub, "scene.mat"), {"cube": cube})
        scene = sub + "/scene.mat:cube"
    return [scene, sub + "/gt.hdr"], cube, lab


def expected(scenes):
    """samples, labels, coords as decode --normalize none orders them: scene by scene, row-major, label != 0."""
    samples, labels, coords = [], [], []
    for s, (cube, lab) in enumerate(scenes):
        r, c = np.nonzero(lab)
        samples.append(cube[r, c, :].astype(np.float32))
        labels.append(lab[r, c].astype(np.int32))
        coords.append(np.stack([np.full_like(r, s), r, c], axis=1).astype(np.int32))
    return np.concatenate(samples), np.concatenate(labels), np.concatenate(coords)


def limit_fds():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(FD_LIMIT, hard), hard))


def run_limited(args, ranks, env=None):
    """run() of decode_test.py, with at most FD_LIMIT open files per process (mpiexec and its ranks)."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit_fds()  # inherited by the subprocess; restored for this one
    try:
        return run(args, ranks=ranks, env=env)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


def fds_fit(n):
    """Whether n files open at once fit under FD_LIMIT (in a child process: the limit is real)."""
    code = "import tempfile\nfs = [tempfile.TemporaryFile() for _ in range(%d)]\n" % n
    p = subprocess.run([sys.executable, "-c", code], preexec_fn=limit_fds, capture_output=True, text=True)
    return p.returncode == 0


def group_many(d):
    n = 150
    lines, scenes = ["# 150 scenes, paths relative to this file", ""], []
    for i in range(n):
        fmt = "h5" if i % 10 == 3 else "mat" if i % 10 == 7 else "envi"
        fields, cube, lab = write_scene(d, i, fmt, H=8 + i % 6, W=6 + i % 5)
        if i % 25 == 0:
            fields.append("field_%d" % i)  # a NAME (else: the file's stem, "scene" for all: refused as twice)
        else:
            fields.append("s%03d" % i)
        lines.append("  ".join(fields) + ("   # an HDF5 scene" if fmt == "h5" else ""))
        scenes.append((cube, lab))
    lst = os.path.join(d, "scenes.txt")
    with open(lst, "w") as f:
        f.write("\n".join(lines) + "\n")
    samples, labels, coords = expected(scenes)
    check(not fds_fit(n + 10) and fds_fit(20), "ulimit -n %d: 160 files open at once do not fit, 20 do" % FD_LIMIT)

    out = os.path.join(d, "cache")
    args = ["decode", "--scene-list", lst, "--out", out, "--normalize", "none"]
    rc, log = run_limited(args, ranks=2, env={"HSIPIPE_TEST_DELAY_STATS_MS": "15"})
    if not check(rc == 0, "150 scenes from a list, 2 ranks, ulimit -n %d: decode succeeds" % FD_LIMIT, log):
        return
    check("decode: 150 scenes, %d samples" % len(labels) in log, "the first line counts 150 scenes", log)
    check("scene files: 150 scenes, at most 8 open at once per rank; peak 8, 8;" in log,
          "the summary: at most 8 scene files open per rank, and each rank's peak is 8", log)
    check(any("statistics pass, rank 0:" in l and ", scene " in l and "/150" in l for l in log.splitlines()),
          "progress lines name the scene: 'scene K/150'", log)
    m, a = load_arrays(out)
    check(m["n_samples"] == len(labels) and len(m["params"]["scenes"]) == n, "manifest: %d samples of 150 scenes" % len(labels))
    check(np.array_equal(a["labels"], labels) and np.array_equal(a["coords"], coords),
          "labels and (scene, row, col) equal numpy's, in list order")
    check(a["samples"].dtype == np.float32 and np.array_equal(a["samples"], samples), "every sample equals numpy's read")
    pick = np.random.default_rng(5).choice(len(labels), 5, replace=False)
    for i in pick:
        s, r, c = coords[i]
        check(np.array_equal(a["samples"][i], scenes[s][0][r, c].astype(np.float32)),
              "sample %d = scene %d (row %d, col %d) of the list, as numpy wrote it" % (i, s, r, c))
    check(np.allclose(a["band_mean"], samples.astype(np.float64).mean(axis=0), rtol=1e-12),
          "band means equal numpy's over all 150 scenes")
    check([s["name"] for s in m["params"]["scenes"]][:2] == ["field_0", "s001"], "the list's NAME fields name the scenes")

    rc, vlog = run_limited(["verify", out, "--samples", "64"], ranks=0)
    check(rc == 0 and "OK" in vlog, "verify of the 150-scene cache under ulimit -n %d: OK" % FD_LIMIT, vlog)
    for R in (1, 3):
        o = os.path.join(d, "cache_%d" % R)
        rc, log = run_limited(args[:4] + [o, "--normalize", "none", "--no-progress"], ranks=R)
        check(rc == 0 and manifest(o)["data_checksum"] == m["data_checksum"],
              "%d rank(s): the same data_checksum as 2 ranks" % R, log)
    ini = os.path.join(d, "conf", "decode.ini")
    os.makedirs(os.path.dirname(ini))
    with open(ini, "w") as f:
        f.write("[decode]\nscene_list = ../scenes.txt\nnormalize = none\n")
    o = os.path.join(d, "cache_ini")
    rc, log = run(["decode", "--config", ini, "--out", o, "--no-progress"], ranks=2)
    check(rc == 0 and manifest(o)["data_checksum"] == m["data_checksum"],
          "INI scene_list = (relative to the INI file): the same cache", log)


def error_cases():
    """(name, how to break scene 5 of the list, what the message says besides the file and the line)."""
    def truncate(d, sub):
        p = os.path.join(d, sub, "scene.img")
        with open(p, "r+b") as f:
            f.truncate(os.path.getsize(p) - 100)

    def edit(path, old, new):
        with open(path) as f:
            t = f.read()
        assert old in t, (path, old)
        with open(path, "w") as f:
            f.write(t.replace(old, new))

    def rewrite(d, sub, **kw):
        write_scene(d, int(sub[1:]), "envi", H=10, W=8, **kw)

    return [
        ("missing file", lambda d, sub: os.remove(os.path.join(d, sub, "scene.hdr")), "no such file", "scene.hdr"),
        ("truncated data file", truncate, "truncated", "scene.img"),
        ("lying header (lines)", lambda d, sub: edit(os.path.join(d, sub, "scene.hdr"), "lines = 10", "lines = 12"),
         "truncated", "scene.img"),
        ("lying header (classes)", lambda d, sub: edit(os.path.join(d, sub, "gt.hdr"), "classes = 5", "classes = 3"),
         "classes = 3", "gt.hdr"),
        ("another band count", lambda d, sub: rewrite(d, sub, bands=B + 1, wl=np.linspace(400, 2500, B + 1)),
         "different band counts", "scene.hdr"),
        ("other wavelengths", lambda d, sub: rewrite(d, sub, wl=WAVELENGTHS + 5), "different wavelengths", "scene.hdr"),
        ("labels of another size",
         lambda d, sub: write_envi(os.path.join(d, sub, "gt"), np.ones((9, 8, 1), np.uint8), 1), "labels", "gt.hdr"),
    ]


def group_errors(d):
    n, bad = 12, 5  # scene 5 is on line 8 of the list (two comment lines first)
    for name, breaks, says, file in error_cases() + [("four fields", None, "found 4 fields", "scenes.txt")]:
        case = os.path.join(d, name.replace(" ", "_").replace("(", "").replace(")", ""))
        lines = ["# broken: " + name, "# scene, labels, name"]
        for i in range(n):
            fields, _, _ = write_scene(case, i, "envi", H=10, W=8)
            lines.append(" ".join(fields + ["s%03d" % i] + (["extra"] if breaks is None and i == bad else [])))
        if breaks:
            breaks(case, "s%03d" % bad)
        lst = os.path.join(case, "scenes.txt")
        with open(lst, "w") as f:
            f.write("\n".join(lines) + "\n")
        outdir = os.path.join(case, "out")
        os.makedirs(outdir)
        rc, log = run(["decode", "--scene-list", lst, "--out", os.path.join(outdir, "cache"), "--no-progress"], ranks=2)
        where = "scene list %s line %d" % (lst, bad + 3)
        named = file == "scenes.txt" or os.path.join(case, "s%03d" % bad, file) in log
        check(rc != 0 and where in log and named and says in log,
              "%s: exit %d, the message names %s and '%s' (%s)" % (name, rc, file, where, says), log)
        check(os.listdir(outdir) == [], "%s: nothing left in the output folder (%s)" % (name, os.listdir(outdir)))


if __name__ == "__main__":
    run_groups({"many": group_many, "errors": group_errors}, "hsipipe-scene-list-")
