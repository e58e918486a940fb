#!/usr/bin/python3
"""End-to-end tests of `hsipipe decode` / `hsipipe verify` under real mpiexec ranks.

The scenes are written here with numpy (ENVI BSQ int16 + labels), read back independently with SPy
(spectral) and the expected cache contents computed with numpy: selection, band drop, normalisation,
PCA, patch cutting with numpy.pad. Usage: decode_test.py GROUP (ranks | values | lifecycle | errors | tiled | salinas).
Environment (set by ctest): HSIPIPE_BIN, OMPI_ALLOW_RUN_AS_ROOT...
"""
import fcntl
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import spectral.io.envi as envi

BIN = os.environ.get("HSIPIPE_BIN", "hsipipe")
MPIEXEC = shutil.which("mpiexec") or "mpiexec"
FAILS = []


def check(cond, what, log=None):
    """Records a check; on failure also prints `log` (the output of the command checked)."""
    if cond:
        print("ok   ", what)
    else:
        print("FAIL ", what)
        if log is not None:
            print("---- output:\n" + log)
        FAILS.append(what)
    return cond


def write_envi(path, cube, dtype_code, extra=""):
    """cube [H, W, B] -> BSQ little-endian ENVI file PATH.img + PATH.hdr"""
    H, W, B = cube.shape
    np.ascontiguousarray(np.transpose(cube, (2, 0, 1))).astype(cube.dtype.newbyteorder("<")).tofile(path + ".img")
    with open(path + ".hdr", "w") as f:
        f.write("ENVI\nsamples = %d\nlines = %d\nbands = %d\nheader offset = 0\nfile type = ENVI Standard\n"
                "data type = %d\ninterleave = bsq\nbyte order = 0\n%s" % (W, H, B, dtype_code, extra))


def make_scene(d, name, H=60, W=50, B=40, seed=1, classes=4, labeled_frac=0.4, ignore_value=None, uint16=False,
               bad_bands=None):
    rng = np.random.default_rng(seed)
    base = rng.integers(1500, 3000, size=(1, 1, B)).astype(np.float64)
    # a few "endmembers" with well separated variances, so PCA components are well defined
    cube = base + rng.normal(0, 3, size=(H, W, B))
    for k, amp in enumerate((600, 300, 150, 80, 40, 20)):
        spectrum = np.sin(np.linspace(0, (k + 1) * np.pi, B) + k) + 0.3 * rng.normal(size=B)
        field = rng.normal(size=(H, W))
        cube += amp * field[:, :, None] * spectrum[None, None, :]
    cube = np.clip(np.rint(cube), -30000, 30000).astype(np.int16)
    if uint16:  # ENVI data type 12, values 0 .. 60000 (above int16's range)
        cube = (cube.astype(np.int32) + 30000).astype(np.uint16)
    wl = ", ".join("%.1f" % w for w in np.linspace(400, 2500, B))
    extra = "wavelength units = Nanometers\nwavelength = {%s}\n" % wl
    if ignore_value is not None:
        cube[3, 7, :] = ignore_value
        extra += "data ignore value = %d\n" % ignore_value
    if bad_bands is not None:  # 1-based bands the header's bbl marks bad
        extra += "bbl = {%s}\n" % ", ".join("0" if b + 1 in bad_bands else "1" for b in range(B))
    write_envi(os.path.join(d, name), cube, 12 if uint16 else 2, extra)
    lab = np.where(rng.random((H, W)) < labeled_frac, rng.integers(1, classes + 1, size=(H, W)), 0).astype(np.uint8)
    write_envi(os.path.join(d, name + "_gt"), lab[:, :, None], 1)
    return os.path.join(d, name + ".hdr"), os.path.join(d, name + "_gt.hdr")


def run(args, ranks=1, env=None, check_rc=None, timeout=None):
    cmd = [MPIEXEC, "-n", str(ranks), "--oversubscribe", BIN] + args if ranks else [BIN] + args
    e = dict(os.environ)
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl_vader_single_copy_mechanism": "none"})
    if env:
        e.update(env)
    p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    out = p.stdout + p.stderr
    if check_rc is not None and p.returncode != check_rc:
        print("---- command:", " ".join(cmd), "rc", p.returncode)
        print(out)
    return p.returncode, out


def decode(scene, labels, out, ranks=1, extra=(), env=None):
    args = ["decode", "--scene", scene, "--out", out, "--no-progress"]
    if labels:
        args += ["--labels", labels]
    return run(args + list(extra), ranks=ranks, env=env)


def manifest(path):
    with open(os.path.join(path, "manifest.json")) as f:
        return json.load(f)


def load_arrays(path):
    """Every array of a cache as numpy, from npy or h5 files."""
    m = manifest(path)
    out = {}
    if m["backend"] == "npy":
        for f in sorted(glob.glob(os.path.join(path, "*.npy"))):
            out[os.path.basename(f)[:-4]] = np.load(f, mmap_mode="r")
    else:
        with h5py.File(os.path.join(path, "cache.h5"), "r") as f:
            for k in f:
                if isinstance(f[k], h5py.Group):
                    for s in f[k]:
                        out["cube_" + s] = f[k][s][()]
                else:
                    out[k] = f[k][()]
            out["_attr"] = f.attrs["manifest"]
    return m, out


# ------------------------------------------------------------------------------------------------
def reference(hdr, gt, drop=(), normalize="zscore", pca=0, layout="pixel", patch=1, border="reflect",
              dtype="float32", ignore=0, nodata=None, stats_all=False):
    """Independent numpy computation of the cache from SPy-decoded input."""
    img = np.asarray(envi.open(hdr).load(), dtype=np.float64)  # [H, W, B]
    if nodata is not None:  # ENVI 'data ignore value' in a kept band: the whole pixel is invalid (NaN)
        keep = [b for b in range(img.shape[2]) if b + 1 not in set(drop)]
        img[np.any(img[:, :, keep] == nodata, axis=2)] = np.nan
    lab = np.asarray(envi.open(gt).load())[:, :, 0].astype(np.int64) if gt else None
    return reference_of(img, lab, drop, normalize, pca, layout, patch, border, dtype, ignore, stats_all)


def reference_of(img, lab, drop=(), normalize="zscore", pca=0, layout="pixel", patch=1, border="reflect",
                 dtype="float32", ignore=0, stats_all=False):
    """reference() from arrays: img [H, W, B] float64 (NaN or +-Inf in a kept band: invalid pixel), lab [H, W]
    or None. stats_all: statistics over every valid pixel (--stats-over all-pixels), not the samples."""
    B = img.shape[2]
    keep = [b for b in range(B) if b + 1 not in set(drop)]
    x = img[:, :, keep].copy()
    x[np.any(~np.isfinite(x), axis=2)] = np.nan  # only the kept bands decide a pixel's validity
    if lab is not None:
        rows, cols = np.nonzero(lab != ignore)
    else:
        valid = ~np.isnan(x[:, :, 0])
        rows, cols = np.nonzero(valid)
    samples = x[rows, cols, :]
    stat_px = x[~np.isnan(x[:, :, 0])] if stats_all else samples
    mean = stat_px.mean(axis=0)
    std = stat_px.std(axis=0)
    if normalize == "zscore":
        shift, scale = mean, std
    elif normalize == "minmax":
        shift, scale = stat_px.min(axis=0), stat_px.max(axis=0) - stat_px.min(axis=0)
    else:
        shift, scale = np.zeros(len(keep)), np.ones(len(keep))
    scale = np.where(scale > 0, scale, 1.0)
    xn = (x - shift) / scale
    comps = None
    if pca:
        z = (samples - shift) / scale
        zc = z - z.mean(axis=0)
        cov = zc.T @ zc / len(zc)
        w, v = np.linalg.eigh(cov)
        order = np.argsort(w)[::-1][:pca]
        comps = v[:, order].T
        for k in range(pca):
            i = np.argmax(np.abs(comps[k]))
            if comps[k, i] < 0:
                comps[k] = -comps[k]
        xn = (xn - z.mean(axis=0)) @ comps.T
    xn = np.where(np.isnan(xn), 0.0, xn)  # an invalid pixel inside a patch or the cube is stored as 0
    xn = xn.astype(np.float32)
    if layout == "pixel":
        data = xn[rows, cols, :]
    elif layout == "patch":
        h = patch // 2
        mode = "reflect" if border == "reflect" else "constant"
        padded = np.pad(xn, ((h, h), (h, h), (0, 0)), mode=mode)
        data = np.stack([padded[r:r + patch, c:c + patch, :] for r, c in zip(rows, cols)])  # N, p, p, B
        data = np.transpose(data, (0, 3, 1, 2))
    else:
        data = xn
    if dtype == "float16":
        data = data.astype(np.float16)
    labels = lab[rows, cols] if lab is not None else -np.ones(len(rows), dtype=np.int64)
    return data, labels, np.stack([np.zeros_like(rows), rows, cols], axis=1), mean, std, comps


def close(a, b, dtype):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        print("     shape", a.shape, "vs", b.shape)
        return False
    tol = dict(rtol=2e-3, atol=2e-3) if dtype == "float16" else dict(rtol=1e-5, atol=1e-5)
    ok = np.allclose(a, b, equal_nan=True, **tol)
    if not ok:
        print("     max |diff|", np.nanmax(np.abs(a - b)))
    return ok


# ------------------------------------------------------------------------------------------------
def group_ranks(d):
    """Caches built with 1, 2, 3 and 4 ranks are identical, for h5 and npy, each layout."""
    hdr, gt = make_scene(d, "a")
    scene_bytes = os.path.getsize(hdr[:-4] + ".img")
    # (name, layout, options, environment, source bytes read / the scene's): PCA (covariance reduced across
    # ranks, projection in the write pass) in float32. An ENVI scene's pixel samples and cube rows are decoded
    # again by each pass (twice, three times with PCA); "pixel_kept" keeps the samples from the statistics
    # pass (a test knob; what scenes slow to decode get: GeoTIFF tiles, MATLAB, HDF5), in pieces for h5.
    keep = {"HSIPIPE_TEST_KEEP_SAMPLES": "1"}
    for name, layout, extra, env, reads in (
            ("pixel", "pixel", ["--dtype", "float16"], {}, 2),
            ("pixel_kept", "pixel", ["--dtype", "float16"], keep, 1),
            ("patch", "patch", ["--patch", "5", "--dtype", "float16"], {}, 1),
            ("cube", "cube", ["--patch", "3", "--dtype", "float16"], {}, 2),
            ("pixel_pca", "pixel", ["--pca", "4", "--dtype", "float32"], {}, 3)):
        sums = {}
        bytes_read = {}
        for backend in ("npy", "h5"):
            ref_arrays = None
            for R in (1, 2, 3, 4):
                out = os.path.join(d, "c_%s_%s_%d" % (name, backend, R))
                rc, log = decode(hdr, gt, out, R, ["--layout", layout, "--backend", backend,
                                                   "--drop-bands", "1-2,39"] + extra, env=env)
                if not check(rc == 0, "decode %s %s R=%d exits 0" % (name, backend, R), log):
                    continue
                m, arrs = load_arrays(out)
                sums[(backend, R)] = m["data_checksum"]
                bytes_read[(backend, R)] = m["source_bytes_read"]
                if layout != "pixel" or "--pca" in extra:
                    # decoded windows wait for the write pass in memory, but a raw (ENVI) scene's rows are
                    # decoded again instead (float32 copies of the whole scene cost more than a decode)
                    kept = re.search(r"decoded rows kept for the write pass \(rank 0\): (.*)", log)
                    check(kept is not None and (kept.group(1) == "none, decoded again") == (layout != "patch"),
                          "%s %s R=%d: the write pass's rows %s (%s)" % (
                              name, backend, R, "kept from the first pass" if layout == "patch" else "decoded again",
                              kept.group(1) if kept else "no summary line"), log)
                if layout == "pixel":
                    kept = re.search(r"samples kept for the write pass: (.*)", log)
                    want = "as int16" + (" in the output file's pages" if backend == "npy" else "") if env else \
                        "no (the write pass decodes them again)"
                    check(kept is not None and kept.group(1) == want, "%s %s R=%d: samples kept: %s (%s)" % (
                        name, backend, R, want, kept.group(1) if kept else "no summary line"), log)
                arrs.pop("_attr", None)
                if ref_arrays is None:
                    ref_arrays = arrs
                else:
                    same = sorted(arrs) == sorted(ref_arrays) and all(
                        np.asarray(arrs[k]).tobytes() == np.asarray(ref_arrays[k]).tobytes() for k in arrs)
                    check(same, "%s %s: R=%d arrays byte-identical to R=1" % (name, backend, R))
                if R in (2, 3) and ref_arrays is not None:
                    # small blocks (and h5 pixel pieces of 16 samples): many blocks per rank, ranks with
                    # different block counts (empty collective rounds), and h5 writes overlapped with building
                    # the next unit, or in turn; same bytes
                    for ov in ("1", "0") if backend == "h5" else ("1",):
                        out_s = out + "_blocks" + ov
                        rc, log = decode(hdr, gt, out_s, R, ["--layout", layout, "--backend", backend,
                                                             "--drop-bands", "1-2,39"] + extra,
                                         env=dict(env, HSIPIPE_TEST_BLOCK_BYTES="24000", HSIPIPE_TEST_DECODE_OVERLAP=ov,
                                                  HSIPIPE_TEST_PIECE_BYTES="1120", HSIPIPE_TEST_PATCH_PIECE_BYTES="8000"))
                        mode = "overlapped with building" if ov == "1" else "in turn with building"
                        if backend == "npy":
                            mode = "independent"
                        small = None
                        if rc == 0:
                            small = load_arrays(out_s)[1]
                            small.pop("_attr", None)
                        check(rc == 0 and mode in log and small is not None and sorted(small) == sorted(ref_arrays) and all(
                                  np.asarray(small[k]).tobytes() == np.asarray(ref_arrays[k]).tobytes() for k in small),
                              "%s %s R=%d, 3-row blocks, writes %s: arrays byte-identical to R=1" % (name, backend, R, mode),
                              log)
                        if backend == "h5" and rc == 0:
                            rounds = re.search(r"writes: collective, (\d+) rounds", log)
                            # kept pixel samples go in pieces of 15 samples, patches in pieces of 4 (of 1850
                            # bytes each; a block's pieces cut from its window transformed once): more rounds
                            # than blocks
                            check(rounds is not None and int(rounds.group(1)) >= (30 if name in ("pixel_kept", "patch") else 6),
                                  "%s h5 R=%d, 3-row blocks: several collective rounds (%s)" % (
                                      name, R, rounds.group(1) if rounds else "none"), log)
                if backend == "npy" and R == 2 and layout == "pixel":
                    # pixel samples are built in the file's mapping; the copying path (file systems that refuse a shared mapping) writes the same bytes
                    out_p = out + "_pwrite"
                    rc, log = decode(hdr, gt, out_p, R, ["--layout", layout, "--backend", backend,
                                                         "--drop-bands", "1-2,39"] + extra,
                                     env=dict(env, HSIPIPE_TEST_NPY_PWRITE="1"))
                    check(rc == 0 and all(open(f, "rb").read() == open(os.path.join(out_p, os.path.basename(f)), "rb").read()
                                          for f in glob.glob(os.path.join(out, "*.npy"))),
                          "%s npy R=2, HSIPIPE_TEST_NPY_PWRITE=1: .npy files byte-identical to the mapped path" % name)
                    # the working buffers without transparent huge pages: the same bytes
                    out_h = out + "_nohuge"
                    rc, log = decode(hdr, gt, out_h, R, ["--layout", layout, "--backend", backend,
                                                         "--drop-bands", "1-2,39", "--huge-pages", "off"] + extra,
                                     env=env)
                    check(rc == 0 and all(open(f, "rb").read() == open(os.path.join(out_h, os.path.basename(f)), "rb").read()
                                          for f in glob.glob(os.path.join(out, "*.npy"))),
                          "%s npy R=2, --huge-pages off: .npy files byte-identical to the default" % name, log)
                if backend == "npy":
                    files = sorted(glob.glob(os.path.join(out, "*.npy")))
                    r1 = os.path.join(d, "c_%s_npy_1" % name)
                    check(all(open(f, "rb").read() == open(os.path.join(r1, os.path.basename(f)), "rb").read()
                              for f in files), "%s npy R=%d: .npy files byte-identical to R=1" % (name, R))
                rc, log = run(["verify", out, "--samples", "8"], ranks=0)
                check(rc == 0 and "OK" in log, "verify %s %s R=%d" % (name, backend, R), log)
        check(len(set(sums.values())) == 1, "%s: data_checksum identical for npy/h5 and R=1..4 (%s)" %
              (name, sorted(set(sums.values()))))
        # each rank decodes only the rows its range needs: no source row is read twice in one pass, for any R
        # (a row two ranks need is decoded by one, which sends it)
        check(len(set(bytes_read.values())) == 1, "%s: source_bytes_read the same for npy/h5 and R=1..4 (%s)" %
              (name, sorted(set(bytes_read.values()))))
        if name != "patch":  # (patch: halo rows at the boundary of a rank's blocks are read again)
            check(set(bytes_read.values()) == {reads * scene_bytes}, "%s: source_bytes_read = %d x the scene's %d bytes (%s)" % (
                name, reads, scene_bytes, sorted(set(bytes_read.values()))))
    # A scene read through the HDF5 library (HDF5 input here; MATLAB v7.3 and GDAL's HDF drivers alike) is never
    # read beside the writing thread's HDF5 calls (the library is not thread-safe): the patch layout, which
    # reads the scene while writing, writes in turn even when overlap is asked for; the bytes are those of the
    # same scene from ENVI.
    cube = np.asarray(envi.open(hdr).load())
    h5in = os.path.join(d, "a_input.h5")
    with h5py.File(h5in, "w") as f:
        f.create_dataset("cube", data=cube.astype(np.int16))
    out_i = os.path.join(d, "c_patch_h5input_2")
    rc, log = decode(h5in + ":/cube", gt, out_i, 2, ["--layout", "patch", "--patch", "5", "--backend", "h5",
                                                      "--dtype", "float16", "--drop-bands", "1-2,39"],
                     env={"HSIPIPE_TEST_BLOCK_BYTES": "24000", "HSIPIPE_TEST_DECODE_OVERLAP": "1"})
    ok = rc == 0 and "in turn with building" in log
    if ok:
        a, b = load_arrays(out_i)[1], load_arrays(os.path.join(d, "c_patch_h5_1"))[1]
        ok = all(np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in ("samples", "labels", "coords"))
    check(ok, "patch h5 R=2 from an HDF5 input scene: writes in turn with reading; samples equal the ENVI scene's", log)
    # A scene slow to decode again (HDF5 input) keeps its pixel samples from the statistics pass, in the npy
    # file's pages (the ENVI scene's are decoded again): the same bytes, one source read
    out_k = os.path.join(d, "c_pixel_h5input_2")
    rc, log = decode(h5in + ":/cube", gt, out_k, 2, ["--layout", "pixel", "--backend", "npy", "--dtype", "float16",
                                                      "--drop-bands", "1-2,39"])
    kept = re.search(r"samples kept for the write pass: (.*)", log)
    ok = rc == 0 and kept is not None and kept.group(1) == "as int16 in the output file's pages"
    if ok:
        a, b = load_arrays(out_k)[1], load_arrays(os.path.join(d, "c_pixel_npy_1"))[1]
        ok = all(np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in ("samples", "labels", "coords"))
        ok = ok and manifest(out_k)["source_bytes_read"] == manifest(os.path.join(d, "c_pixel_npy_1"))["source_bytes_read"] // 2
    check(ok, "pixel npy R=2 from an HDF5 input scene: samples kept in the file's pages (%s), bytes equal the "
              "ENVI scene's, its rows read once" % (kept.group(1) if kept else "no summary line"), log)
    # Ranks that would decide differently (here: told differently) agree, collectively, to write in turn: the
    # writing thread's barrier is a collective call that a rank writing in turn would never make
    out_m = os.path.join(d, "c_mixed_overlap")
    args = ["decode", "--scene", hdr, "--labels", gt, "--out", out_m, "--no-progress", "--backend", "h5",
            "--dtype", "float16", "--drop-bands", "1-2,39"]
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HSIPIPE_TEST_BLOCK_BYTES="24000")
    try:
        p = subprocess.run([MPIEXEC, "--oversubscribe", "-n", "1", "env", "HSIPIPE_TEST_DECODE_OVERLAP=1", BIN] + args +
                           [":", "-n", "1", "env", "HSIPIPE_TEST_DECODE_OVERLAP=0", BIN] + args,
                           capture_output=True, text=True, env=e, timeout=120)
        log, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        log, rc = "timed out (ranks waiting in different collectives?)", -1
    ok = rc == 0 and "in turn with building" in log
    if ok:
        a, b = load_arrays(out_m)[1], load_arrays(os.path.join(d, "c_pixel_h5_1"))[1]
        ok = all(np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in ("samples", "labels", "coords"))
    check(ok, "h5 R=2, one rank asking to overlap and one not: both write in turn, same bytes", log)
    # Without HSIPIPE_TEST_DECODE_OVERLAP, a rank overlaps only when it may use a second CPU (its affinity mask)
    e = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", HSIPIPE_TEST_BLOCK_BYTES="24000")
    e.pop("HSIPIPE_TEST_DECODE_OVERLAP", None)
    for bind, want in (("core", "in turn with building"),
                       ("none", "overlapped with building" if len(os.sched_getaffinity(0)) >= 2 else "in turn with building")):
        out_b = os.path.join(d, "c_bind_" + bind)
        p = subprocess.run([MPIEXEC, "--bind-to", bind, "-n", "1", BIN, "decode", "--scene", hdr, "--labels", gt,
                            "--out", out_b, "--no-progress", "--backend", "h5"], capture_output=True, text=True, env=e)
        log = p.stdout + p.stderr
        check(p.returncode == 0 and want in log, "h5, 1 rank, mpiexec --bind-to %s: writes %s" % (bind, want), log)
    check_source_hashes(d)


def chunked_xxh3(path):
    """The manifest's source hash (core/hash.hpp), computed independently with python3-xxhash."""
    import xxhash
    hashes = b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(16 << 20)
            if not chunk:
                break
            hashes += xxhash.xxh3_64_intdigest(chunk).to_bytes(8, "little")
    return "%016x" % xxhash.xxh3_64_intdigest(hashes)


def check_source_hashes(d):
    """Source hashes: chunks hashed by every rank give xxhash's chunked value for any R; verify --deep."""
    hdr, gt = make_scene(d, "big", H=600, W=200, B=220, labeled_frac=0.05)  # 52.8 MB: 4 chunks, 1-2 per rank
    got = {}
    for R in (1, 3):
        out = os.path.join(d, "hash_%d" % R)
        rc, log = decode(hdr, gt, out, R)
        if not check(rc == 0, "decode of a 4-chunk scene with R=%d exits 0" % R, log):
            continue
        got[R] = {s["path"]: s["xxh3"] for s in manifest(out)["sources"]}
        rc, log = run(["verify", out, "--deep", "--samples", "4"], ranks=0)
        check(rc == 0 and "OK" in log, "verify --deep R=%d (sources hashed again)" % R)
    if got:
        want = {p: chunked_xxh3(p) for p in next(iter(got.values()))}
        check(all(g == want for g in got.values()),
              "manifest source hashes equal python3-xxhash's chunked xxh3 for R=1 and R=3 (%d files)" % len(want))
    check(manifest(os.path.join(d, "hash_1"))["format_version"] == 2, "format_version 2 (chunked source hashes)")


def group_values(d):
    """h5py/numpy read every layout/dtype; values equal an independent numpy computation from SPy."""
    hdr, gt = make_scene(d, "v", seed=5)
    cases = [
        ("pixel", "float32", "zscore", 0, 1, "reflect", "npy"),
        ("pixel", "float16", "zscore", 0, 1, "reflect", "h5"),
        ("pixel", "float32", "minmax", 0, 1, "reflect", "h5"),
        ("pixel", "float32", "none", 0, 1, "reflect", "npy"),
        ("patch", "float32", "zscore", 0, 5, "reflect", "h5"),
        ("patch", "float16", "zscore", 0, 3, "zero", "npy"),
        ("cube", "float32", "zscore", 0, 5, "reflect", "npy"),
        ("cube", "float16", "zscore", 0, 1, "reflect", "h5"),
        ("pixel", "float32", "zscore", 5, 1, "reflect", "npy"),
        ("patch", "float16", "zscore", 4, 3, "reflect", "h5"),
        ("cube", "float32", "zscore", 3, 1, "reflect", "npy"),  # decoded three times: stats, PCA, write pass
    ]
    drop = (1, 2, 3, 20, 40)
    for i, (layout, dtype, norm, pca, patch, border, backend) in enumerate(cases):
        name = "%s/%s/%s/pca%d/p%d/%s/%s" % (layout, dtype, norm, pca, patch, border, backend)
        out = os.path.join(d, "val%d" % i)
        extra = ["--layout", layout, "--dtype", dtype, "--normalize", norm, "--pca", str(pca), "--border", border,
                 "--backend", backend, "--drop-bands", "1-3,20,40"]
        if layout != "pixel":
            extra += ["--patch", str(patch)]
        rc, log = decode(hdr, gt, out, 2, extra)
        if not check(rc == 0, "decode " + name, log):
            continue
        m, a = load_arrays(out)
        data, labels, coords, mean, std, comps = reference(hdr, gt, drop, norm, pca, layout, patch, border, dtype)
        got = a["cube_0"] if layout == "cube" else a["samples"]
        check(got.dtype == np.dtype(dtype), name + ": stored dtype %s read as numpy %s" % (dtype, got.dtype))
        check(close(got, data, dtype), name + ": values equal the numpy/SPy computation")
        check(np.array_equal(a["labels"], labels), name + ": labels")
        check(np.array_equal(a["coords"], coords), name + ": coords (scene, row, col)")
        check(np.allclose(a["band_mean"], mean, rtol=1e-12) and np.allclose(a["band_std"], std, rtol=1e-10),
              name + ": band_mean/band_std equal numpy's (float64)")
        check(np.allclose(a["wavelengths"], np.delete(np.linspace(400, 2500, 40), [0, 1, 2, 19, 39]), atol=0.06),
              name + ": wavelengths of the kept bands")
        if pca:
            check(np.allclose(a["pca_components"], comps, atol=1e-8), name + ": pca_components")
        if backend == "h5":
            check(json.loads(a["_attr"])["data_checksum"] == m["data_checksum"], name + ": manifest attribute")
        for k in ("format_version", "n_samples", "n_bands", "layout", "dtype", "data_checksum", "sources", "backend",
                  "patch", "border", "scenes", "label_values", "statistics", "libraries", "hsipipe_version", "ranks",
                  "hsipipe_commit", "created", "host", "shape", "params", "bytes", "source_bytes_read"):
            check(k in m, name + ": manifest has " + k)
        check(all(k in m["libraries"] for k in ("hdf5", "mpi", "matio", "gdal", "eigen")) and
              re.match(r"\d+\.\d+\.\d+$", m["libraries"]["hdf5"]) and m["libraries"]["mpi"] and
              "\0" not in m["libraries"]["mpi"],
              name + ": manifest libraries: hdf5, mpi, matio, gdal, eigen (%s)" % m.get("libraries"))
        check(list(m["shape"][0] if layout == "cube" else m["shape"]) == list(got.shape) and m["params"]["layout"] == layout and m["params"]["dtype"] == dtype,
              name + ": manifest shape %s and params match the stored array" % (m.get("shape"),))
        check(all(s["size"] == os.path.getsize(s["path"]) and re.match(r"[0-9a-f]{16}$", s["xxh3"]) for s in m["sources"]),
              name + ": every source with its size and xxh3")
        if backend == "h5":
            with h5py.File(os.path.join(out, "cache.h5"), "r") as f:
                ds = f["cube/0"] if layout == "cube" else f["samples"]
                ch = ds.chunks
                check(ch is not None and tuple(ch[1:]) == tuple(ds.shape[1:]) and 1 <= ch[0] <= ds.shape[0],
                      name + ": h5 %s chunked along its first axis only (chunks %s, shape %s)" % (ds.name, ch, ds.shape))
        check(m["n_bands"] == (pca or 35) and m["n_samples"] == len(labels), name + ": n_bands/n_samples")
    # several scenes, one without labels (valid pixels only; the ignore-value pixel is not a sample)
    hdr2, _ = make_scene(d, "w", H=30, W=20, seed=9, ignore_value=-9999)
    out = os.path.join(d, "multi")
    rc, log = run(["decode", "--scene", hdr, "--scene", hdr2, "--labels", gt, "--out", out, "--no-progress"], ranks=1)
    check(rc == 2 and "--labels" in log, "one --labels for two --scene is refused")
    rc, log = run(["decode", "--scene", hdr2, "--out", out, "--no-progress", "--layout", "patch", "--patch", "3"], ranks=3)
    check(rc == 0, "unlabeled scene decodes (prediction cache)")
    if rc == 0:
        m, a = load_arrays(out)
        data, labels, coords, mean, std, _ = reference(hdr2, None, (), "zscore", 0, "patch", 3, "reflect", "float32",
                                                       nodata=-9999)
        check(m["n_samples"] == 30 * 20 - 1 and np.all(a["labels"] == -1), "unlabeled: every valid pixel, label -1")
        check(close(a["samples"], data, "float32"), "unlabeled: values equal numpy (NaN pixel kept out)")
        check(not np.isnan(a["samples"]).any(), "unlabeled: the invalid pixel inside neighbours' patches is stored as 0")
        # reused without the validity pass (which decodes every row of an unlabeled scene): only hashing reads
        rc, log = run(["decode", "--scene", hdr2, "--out", out, "--no-progress", "--layout", "patch", "--patch", "3"], ranks=3)
        check(rc == 0 and "decode skipped: cache is current" in log and
              re.search(r"cache reused; read .* \(hashing the sources\) and 0 B of the scenes' pixels, decoded 0 samples", log),
              "unlabeled: the reused cache reads no pixel of the scene", log)
    # NaN in one band of an unlabeled pixel next to a labeled one (a float32 scene): the pixel is invalid,
    # stored as 0 where a patch or the cube holds it; no NaN reaches the cache (training would learn NaN)
    lab = np.asarray(envi.open(gt).load())[:, :, 0]
    x = np.asarray(envi.open(hdr).load()).astype(np.float32)
    (r, c), = [(r, c) for r, c in np.argwhere(lab == 0) if 0 < r < lab.shape[0] - 1 and lab[r, c + 1 if c + 1 < lab.shape[1] else c - 1] != 0][:1]
    x[r, c, 7] = np.nan
    nan_scene = os.path.join(d, "nanpx")
    write_envi(nan_scene, x, 4)
    img = x.astype(np.float64)
    img[r, c, :] = np.nan
    for layout, backend in (("patch", "npy"), ("cube", "h5")):
        out = os.path.join(d, "nanpx_" + layout)
        rc, log = decode(nan_scene + ".hdr", gt, out, 2, ["--layout", layout, "--patch", "5", "--backend", backend])
        if not check(rc == 0, "decode %s with a NaN pixel beside a sample" % layout, log):
            continue
        m, a = load_arrays(out)
        data = reference_of(img, lab.astype(np.int64), layout=layout, patch=5)[0]
        got = a["cube_0"] if layout == "cube" else a["samples"]
        check(close(got, data, "float32") and not np.isnan(got).any() and m["params"]["invalid_pixels"] == "zero",
              "%s: the invalid pixel is stored as 0, the rest equals numpy" % layout)
    # two labeled scenes in order, through an INI file
    ini = os.path.join(d, "two.ini")
    with open(ini, "w") as f:
        f.write("[scene.first]\npath = %s\nlabels = %s\n[scene.second]\npath = %s\nlabels = %s\n"
                "[decode]\nlayout = pixel\nbackend = h5\nout = %s\nno-progress = true\n" %
                (hdr, gt, os.path.join(d, "v2.hdr"), os.path.join(d, "v2_gt.hdr"), os.path.join(d, "two")))
    make_scene(d, "v2", H=35, W=25, seed=11)
    rc, log = run(["decode", "--config", ini], ranks=2)
    check(rc == 0, "two scenes from an INI file")
    if rc == 0:
        m, a = load_arrays(os.path.join(d, "two"))
        l1 = np.asarray(envi.open(gt).load())[:, :, 0]
        l2 = np.asarray(envi.open(os.path.join(d, "v2_gt.hdr")).load())[:, :, 0]
        n1, n2 = int((l1 != 0).sum()), int((l2 != 0).sum())
        check([s["name"] for s in m["scenes"]] == ["first", "second"], "scenes in the given order")
        check(m["n_samples"] == n1 + n2 and np.all(a["coords"][:n1, 0] == 0) and np.all(a["coords"][n1:, 0] == 1),
              "sample order: scene 0 then scene 1, row-major")
        x1 = np.asarray(envi.open(hdr).load(), dtype=np.float64)
        x2 = np.asarray(envi.open(os.path.join(d, "v2.hdr")).load(), dtype=np.float64)
        s = np.concatenate([x1[l1 != 0], x2[l2 != 0]])
        check(close(a["samples"], ((s - s.mean(0)) / s.std(0)).astype(np.float32), "float32"),
              "two scenes: statistics over both, values equal numpy")
    # command-line values win, repeatable ones too: --scene/--labels/--name replace the file's, not add to them
    with open(ini, "a") as f:
        f.write("name = from_ini\n")
    one = os.path.join(d, "one_cli")
    rc, log = run(["decode", "--config", ini, "--scene", hdr, "--labels", gt, "--name", "cli", "--out", one], ranks=1)
    check(rc == 0, "--config with --scene/--labels/--name on the command line", log)
    if rc == 0:
        m, _ = load_arrays(one)
        check([s["name"] for s in m["scenes"]] == ["cli"], "the command line's one scene and name, not the file's")
    check_options(d, hdr, gt)
    check_kept_samples(d)
    check_dropped_band_validity(d)
    check_label_nodata(d)


def check_label_nodata(d):
    """A label raster's own nodata (ENVI 'data ignore value') pixels are not samples, as `info` counts them:
    before, 255 became a class; the header's 'classes = N' bounds the ids."""
    hdr, gt = make_scene(d, "lnd", H=20, W=16, B=8, seed=23)
    lab = np.asarray(envi.open(gt).load())[:, :, 0].astype(np.uint8)
    lab[::3, ::2] = 255  # labeled and unlabeled pixels alike
    gt2 = os.path.join(d, "lnd_gt255")
    write_envi(gt2, lab[:, :, None], 1, "classes = 5\ndata ignore value = 255\n")
    out = os.path.join(d, "lnd")
    rc, log = decode(hdr, gt2 + ".hdr", out, 2)
    if check(rc == 0, "a label raster with nodata 255 and classes = 5 decodes", log):
        m, a = load_arrays(out)
        img = np.asarray(envi.open(hdr).load(), dtype=np.float64)
        want = np.where(lab == 255, 0, lab).astype(np.int64)
        data, labels, coords, _, _, _ = reference_of(img, want)
        check(m["n_samples"] == int(((lab != 0) & (lab != 255)).sum()) and 255 not in m["label_values"] and
              m["params"]["label_nodata"] == "not_a_sample" and np.array_equal(a["labels"], labels) and
              close(a["samples"], data, "float32"),
              "label nodata 255: not a sample, not a class; values equal numpy (%d samples)" % m["n_samples"])
    bad = os.path.join(d, "lnd_gt_classes")
    write_envi(bad, lab[:, :, None], 1, "classes = 3\ndata ignore value = 255\n")  # ids up to 4
    out = os.path.join(d, "lnd_bad")
    rc, log = decode(hdr, bad + ".hdr", out, 2)
    check(rc == 3 and "lnd_gt_classes.hdr" in log and "field 'classes'" in log and not os.path.exists(out),
          "a label id beyond the header's classes = 3 is refused naming the file and field", log)
    ig = lab.copy()
    ig[(ig == 3) | (ig == 4)] = 9  # beyond classes = 3, but the ignore label: no sample
    write_envi(bad, ig[:, :, None], 1, "classes = 3\ndata ignore value = 255\n")
    rc, log = decode(hdr, bad + ".hdr", out, 2, ["--ignore-label", "9"])
    check(rc == 0 and manifest(out)["n_samples"] == int(((ig != 9) & (ig != 255)).sum()),
          "classes = 3 bounds the samples' ids only (--ignore-label 9 pixels are none)", log)
    shutil.rmtree(out, ignore_errors=True)
    none = os.path.join(d, "lnd_gt_none")
    write_envi(none, np.where(lab == 0, 0, 255).astype(np.uint8)[:, :, None], 1, "data ignore value = 255\n")
    rc, log = decode(hdr, none + ".hdr", out, 2)
    check(rc == 2 and "zero samples" in log and "lnd_gt_none.hdr" in log and "nodata value 255" in log and
          not os.path.exists(out), "zero samples: the message names the label file and its nodata value", log)


def check_dropped_band_validity(d):
    """Only the kept bands decide a pixel's validity: NaN, Inf or the data ignore value in a dropped band (a
    water-absorption band, a dead detector) costs no pixel, and is no error on a labeled one."""
    hdr, gt = make_scene(d, "dropv", H=24, W=20, B=12, seed=21)
    lab = np.asarray(envi.open(gt).load())[:, :, 0].astype(np.int64)
    x = np.asarray(envi.open(hdr).load()).astype(np.float32)
    labeled = np.argwhere(lab != 0)
    (r1, c1), (r2, c2) = labeled[0], labeled[len(labeled) // 2]
    x[r1, c1, 2] = np.nan  # band 3
    x[r2, c2, 11] = np.inf  # band 12
    f32 = os.path.join(d, "dropv_f32")
    write_envi(f32, x, 4)
    rc, log = decode(f32 + ".hdr", gt, os.path.join(d, "dropv_kept"), 2)
    check(rc == 3 and "nodata, NaN or infinite" in log and not os.path.exists(os.path.join(d, "dropv_kept")),
          "a labeled pixel with NaN or Inf in a kept band is refused", log)
    for layout, backend in (("pixel", "npy"), ("patch", "h5")):
        out = os.path.join(d, "dropv_" + layout)
        rc, log = decode(f32 + ".hdr", gt, out, 2, ["--drop-bands", "3,12", "--layout", layout, "--backend", backend] +
                         (["--patch", "3"] if layout == "patch" else []))
        if not check(rc == 0, "%s: NaN and Inf only in dropped bands of labeled pixels decode" % layout, log):
            continue
        m, a = load_arrays(out)
        data, labels, _, _, _, _ = reference_of(x.astype(np.float64), lab, drop=(3, 12), layout=layout,
                                                patch=3 if layout == "patch" else 1)
        check(m["params"]["validity_bands"] == "kept" and m["n_samples"] == len(labeled) and
              close(a["samples"], data, "float32") and np.array_equal(a["labels"], labels),
              "%s: every labeled pixel a sample, values equal numpy over the kept bands" % layout)
        rc, log = run(["verify", out, "--samples", "100000"], ranks=0)
        check(rc == 0, "%s: verify re-decodes every sample alike" % layout, log)
    # an unlabeled int16 scene, the data ignore value in band 1 of one pixel: a sample when band 1 is dropped
    xi = np.asarray(envi.open(hdr).load()).astype(np.int16)
    xi[5, 6, 0] = -9999
    ig = os.path.join(d, "dropv_ig")
    write_envi(ig, xi, 2, "data ignore value = -9999\n")
    for drop, n in (("1", 24 * 20), ("2", 24 * 20 - 1)):
        out = os.path.join(d, "dropv_ig" + drop)
        rc, log = decode(ig + ".hdr", None, out, 3, ["--drop-bands", drop])
        if check(rc == 0, "unlabeled scene, --drop-bands %s, decodes" % drop, log):
            m, a = load_arrays(out)
            data = reference(ig + ".hdr", None, drop=(int(drop),), nodata=-9999)[0]
            check(m["n_samples"] == n and close(a["samples"], data, "float32"),
                  "unlabeled: the ignore value in band 1 %s the pixel (%d samples)" % (
                      "costs nothing when band 1 is dropped:" if drop == "1" else "invalidates", m["n_samples"]))


def check_options(d, hdr, gt):
    """--stats-over all-pixels, --ignore-label, --bad-bands-from-header: values equal numpy's."""
    for name, extra, ref_kw, R, backend in (
            ("stats over all pixels", ["--stats-over", "all-pixels"], dict(stats_all=True), 3, "npy"),
            ("stats over all pixels, minmax", ["--stats-over", "all-pixels", "--normalize", "minmax"],
             dict(stats_all=True, normalize="minmax"), 2, "h5"),
            ("--ignore-label 2 (label 0 is a class)", ["--ignore-label", "2"], dict(ignore=2), 2, "h5")):
        out = os.path.join(d, "opt_" + re.sub(r"\W+", "_", name))
        rc, log = decode(hdr, gt, out, R, ["--backend", backend, "--drop-bands", "1,40"] + extra)
        if not check(rc == 0, "decode, %s, R=%d %s" % (name, R, backend), log):
            continue
        m, a = load_arrays(out)
        data, labels, coords, mean, std, _ = reference(hdr, gt, drop=(1, 40), **ref_kw)
        check(close(a["samples"], data, "float32") and np.array_equal(a["labels"], labels) and
              np.array_equal(a["coords"], coords), "%s: samples, labels and coords equal numpy's" % name)
        check(np.allclose(a["band_mean"], mean, rtol=1e-12) and np.allclose(a["band_std"], std, rtol=1e-10),
              "%s: band_mean/band_std equal numpy's over the same pixels" % name)
        want_count = 60 * 50 if ref_kw.get("stats_all") else len(labels)
        check(m["statistics"]["count"] == want_count,
              "%s: statistics over %d pixels (manifest: %s)" % (name, want_count, m["statistics"]["count"]))
        if ref_kw.get("stats_all"):
            # the statistics pass reads every row once, split at other rows than the samples', and the
            # write pass the samples' rows: the same cache and source bytes read with 1 rank
            rc, log = decode(hdr, gt, out + "_1", 1, ["--backend", backend, "--drop-bands", "1,40"] + extra)
            m1 = manifest(out + "_1") if rc == 0 else {}
            check(rc == 0 and m1["data_checksum"] == m["data_checksum"] and
                  m1["source_bytes_read"] == m["source_bytes_read"],
                  "%s: R=1 and R=%d give one cache and read the same source bytes (%s, %s)" % (
                      name, R, m1.get("source_bytes_read"), m["source_bytes_read"]), log)
    # the header's bad-band list: every scene's bad bands are dropped, with --drop-bands on top
    hb, gb = make_scene(d, "bb", seed=21, bad_bands=(5, 6, 30))
    hb2, gb2 = make_scene(d, "bb2", H=30, W=20, seed=22, bad_bands=(10,))
    out = os.path.join(d, "opt_bbl")
    rc, log = decode(hb, gb, out, 2, ["--bad-bands-from-header", "--drop-bands", "1"])
    if check(rc == 0, "decode --bad-bands-from-header --drop-bands 1", log):
        m, a = load_arrays(out)
        data = reference(hb, gb, drop=(1, 5, 6, 30))[0]
        check(m["bands"]["kept"] == [b for b in range(1, 41) if b not in (1, 5, 6, 30)] and close(a["samples"], data, "float32"),
              "--bad-bands-from-header: bands 5, 6, 30 (bbl) and 1 dropped; values equal numpy's (kept %s)" % m["bands"]["kept"])
    out = os.path.join(d, "opt_bbl2")
    rc, log = run(["decode", "--scene", hb, "--labels", gb, "--scene", hb2, "--labels", gb2, "--out", out, "--no-progress",
                   "--bad-bands-from-header"], ranks=2)
    check(rc == 0 and manifest(out)["bands"]["kept"] == [b for b in range(1, 41) if b not in (5, 6, 10, 30)],
          "--bad-bands-from-header, two scenes: a band bad in either scene is dropped", log)
    out = os.path.join(d, "opt_bbl3")
    rc, log = run(["decode", "--scene", hb, "--labels", gb, "--scene", hdr, "--labels", gt, "--out", out, "--no-progress",
                   "--bad-bands-from-header"], ranks=2)
    check(rc == 2 and hdr in log and "bbl" in log and not os.path.exists(out),
          "--bad-bands-from-header: a scene without a bbl is refused, naming it (rc %d)" % rc, log)


def check_kept_samples(d):
    """The statistics pass keeps pixel samples as int16/uint16 when every scene holds such integers, as
    float32 otherwise, and drops them (the write pass decodes again) when a value is not a 16-bit integer;
    npy keeps them in the samples' own slots in the file's pages when they fit there (the write pass
    overwrites them): the same cache every way. ENVI scenes are decoded again instead (see group_ranks), so
    the decodes here keep them with a test knob, as a scene slow to decode would be."""
    def decode_kept(*args, env=None):
        return decode(*args, env=dict(env or {}, HSIPIPE_TEST_KEEP_SAMPLES="1"))

    pages = " in the output file's pages"
    def kept(log):
        m = re.search(r"samples kept for the write pass: (.*)", log)
        return m.group(1) if m else ""

    def checksum(out):
        return manifest(out)["data_checksum"]

    # 39 of 40 bands kept, so that the scalar tail after the 8-value SIMD steps runs too
    base = ["--layout", "pixel", "--dtype", "float32", "--normalize", "zscore", "--drop-bands", "1"]
    # uint16 scene, values above int16's range: kept as uint16, values equal numpy's
    hdr, gt = make_scene(d, "u16", seed=21, uint16=True)
    sums = []
    for backend, R in (("npy", 1), ("h5", 2)):
        out = os.path.join(d, "u16_%s_%d" % (backend, R))
        rc, log = decode_kept(hdr, gt, out, R, base + ["--backend", backend])
        if not check(rc == 0, "uint16 scene decodes (%s, %d ranks)" % (backend, R), log):
            continue
        want = "as uint16" + (pages if backend == "npy" else "")
        check(kept(log) == want, "uint16 scene: samples kept %s (%s)" % (want, kept(log)), log)
        data = reference(hdr, gt, drop=(1,))[0]
        check(close(load_arrays(out)[1]["samples"], data, "float32"), "uint16 scene: values equal numpy (%s)" % backend)
        sums.append(checksum(out))
    out = os.path.join(d, "u16_f32")
    rc, log = decode_kept(hdr, gt, out, 2, base + ["--backend", "h5"], env={"HSIPIPE_TEST_KEEP_F32": "1"})
    if check(rc == 0, "uint16 scene, samples kept as float32", log):
        check(kept(log) == "as float32", "the test knob keeps float32 (%s)" % kept(log), log)
        check(sums and all(c == checksum(out) for c in sums), "uint16 scene: the same checksum kept as uint16 or float32")
    # npy, float16 output (a uint16 slot per band, as big as the kept value), 2 ranks in 3-row blocks (a
    # staged range per block): kept in the file's pages, or (test knob) in a buffer of the rank's own; the
    # same bytes, equal to numpy within float16 rounding
    f16 = ["--layout", "pixel", "--dtype", "float16", "--normalize", "zscore", "--drop-bands", "1", "--backend", "npy"]
    got = {}
    for knob, want in (("0", "as uint16" + pages), ("1", "as uint16")):
        out = os.path.join(d, "u16_f16_stage%s" % knob)
        rc, log = decode_kept(hdr, gt, out, 2, f16, env={"HSIPIPE_TEST_NO_STAGE": knob, "HSIPIPE_TEST_BLOCK_BYTES": "24000"})
        if check(rc == 0, "uint16 scene, float16 npy, HSIPIPE_TEST_NO_STAGE=%s" % knob, log):
            check(kept(log) == want, "float16 npy: samples kept %s (%s)" % (want, kept(log)), log)
            got[knob] = open(os.path.join(out, "samples.npy"), "rb").read()
            check(close(load_arrays(out)[1]["samples"], reference(hdr, gt, drop=(1,))[0], "float16"),
                  "float16 npy, HSIPIPE_TEST_NO_STAGE=%s: values equal numpy" % knob)
    check(len(got) == 2 and got["0"] == got["1"], "float16 npy: staged and buffered samples.npy byte-identical")
    # float32 scene: kept as float32. Forced to int16 (a test knob), the fractional values of row 140 make
    # rank 0, which owns rows 0-149, drop its kept samples in the middle of the pass (300 rows are read in
    # slices of 1 MiB, 134 rows, and row 140 is in the second); rank 1's values are whole numbers
    hdr, gt = make_scene(d, "f32", H=300, seed=23)
    cube = np.asarray(envi.open(hdr).load(), dtype=np.float32)
    cube[140] += 0.25
    write_envi(hdr[:-4], cube, 4)
    ref = os.path.join(d, "f32_ref")
    rc, log = decode_kept(hdr, gt, ref, 1, base + ["--backend", "h5"])
    if check(rc == 0, "float32 scene decodes", log):
        check(kept(log) == "as float32", "float32 scene: samples kept as float32 (%s)" % kept(log), log)
        check(close(load_arrays(ref)[1]["samples"], reference(hdr, gt, drop=(1,))[0], "float32"),
              "float32 scene: values equal numpy")
        dropped = "dropped (a value is not a 16-bit integer; decoded again)"
        for R, backend, want in ((1, "h5", dropped), (2, "h5", "rank 0 %s, rank 1 as int16" % dropped),
                                 # npy: rank 0 drops slots it staged in the file, which the write pass overwrites
                                 (2, "npy", "rank 0 %s, rank 1 as int16%s" % (dropped, pages))):
            out = os.path.join(d, "f32_i16_%s_%d" % (backend, R))
            rc, log = decode_kept(hdr, gt, out, R, base + ["--backend", backend], env={"HSIPIPE_TEST_KEEP_I16": "1"})
            if check(rc == 0, "float32 scene, int16 forced, %s, %d ranks" % (backend, R), log):
                check(kept(log) == want, "%s %d ranks: kept samples: %s" % (backend, R, kept(log)), log)
                check(checksum(out) == checksum(ref), "%s %d ranks: the same cache as with float32 kept" % (backend, R))
        # npy: float32 values fit a float32 output's slots (kept there), not a float16 output's (a buffer)
        for dt, want in (("float32", "as float32" + pages), ("float16", "as float32")):
            out = os.path.join(d, "f32_npy_" + dt)
            rc, log = decode_kept(hdr, gt, out, 1, base[:3] + [dt] + base[4:] + ["--backend", "npy"])
            if check(rc == 0, "float32 scene, %s npy" % dt, log):
                check(kept(log) == want, "float32 scene, %s npy: kept %s (%s)" % (dt, want, kept(log)), log)
                check(close(load_arrays(out)[1]["samples"], reference(hdr, gt, drop=(1,))[0], dt),
                      "float32 scene, %s npy: values equal numpy" % dt)
                if dt == "float32":
                    check(checksum(out) == checksum(ref), "float32 scene: npy (kept in the file) and h5 give one cache")


def group_lifecycle(d):
    """Reuse, refusal when a source changed, --force, the lock, kill -9 mid-write, verify."""
    hdr, gt = make_scene(d, "l", seed=3)
    out = os.path.join(d, "cache")
    common = ["--layout", "patch", "--patch", "3", "--backend", "h5"]
    rc, log = decode(hdr, gt, out, 2, common)
    check(rc == 0, "first decode")
    cs = manifest(out)["data_checksum"]
    rc, log = decode(hdr, gt, out, 2, common)
    check(rc == 0 and "decode skipped: cache is current" in log and
          re.search(r"decode summary \(2 ranks, .* cache reused; read .* \(hashing the sources\) and 0 B of the scenes' "
                    r"pixels, decoded 0 samples", log),
          "second decode reuses the cache, and says so in its summary", log)
    rc, log = decode(hdr, gt, out, 1, common + ["--dtype", "float16"])
    check(rc != 0 and "dtype" in log and "--force" in log, "different parameters are refused, naming dtype")
    # --drop-bands is one parameter however it is spelt: the manifest records the band set in one spelling
    outd = os.path.join(d, "cache_drop")
    rc, log = decode(hdr, gt, outd, 2, ["--backend", "npy", "--drop-bands", "3,1-2,40"])
    check(rc == 0 and manifest(outd)["params"]["drop_bands"] == "1-3,40", "drop_bands recorded as 1-3,40", log)
    rc, log = decode(hdr, gt, outd, 1, ["--backend", "npy", "--drop-bands", "40, 1,2,3"])
    check(rc == 0 and "decode skipped: cache is current" in log, "another spelling of the bands reuses the cache", log)
    rc, log = decode(hdr, gt, outd, 1, ["--backend", "npy", "--drop-bands", "1-3"])
    check(rc != 0 and "drop_bands" in log, "another band set is refused, naming drop_bands", log)
    # a cache whose manifest spelt the list as written (before this was recorded in one spelling)
    mp = os.path.join(outd, "manifest.json")
    m = manifest(outd)
    m["params"]["drop_bands"] = "40,3,1-2"
    with open(mp, "w") as f:
        json.dump(m, f)
    rc, log = decode(hdr, gt, outd, 1, ["--backend", "npy", "--drop-bands", "1-3,40"])
    check(rc == 0 and "decode skipped: cache is current" in log, "an older manifest's spelling is compared as a band set", log)
    # a cache made before params recorded validity_bands / label_nodata: reused where those rules cannot have
    # changed it (no band dropped, no label nodata), refused saying so where they can
    m_old = manifest(outd)
    for k in ("validity_bands", "label_nodata"):
        del m_old["params"][k]
    with open(mp, "w") as f:
        json.dump(m_old, f)
    rc, log = decode(hdr, gt, outd, 1, ["--backend", "npy", "--drop-bands", "1-3,40"])
    check(rc == 5 and "validity_bands" in log and "older hsipipe" in log and "label_nodata" not in log,
          "an older cache with dropped bands: refused, saying the rule is newer than it (rc %d)" % rc, log)
    plain = os.path.join(d, "cache_plain")
    rc, log = decode(hdr, gt, plain, 1, ["--backend", "npy"])
    m_old = manifest(plain)
    for k in ("validity_bands", "label_nodata"):
        del m_old["params"][k]
    with open(os.path.join(plain, "manifest.json"), "w") as f:
        json.dump(m_old, f)
    rc, log = decode(hdr, gt, plain, 1, ["--backend", "npy"])
    check(rc == 0 and "decode skipped: cache is current" in log,
          "an older cache no newer rule changes (no band dropped, no label nodata): reused", log)
    with open(mp, "w") as f:
        json.dump(m, f)
    # a manifest whose sources leave out a file its parameters name: verify cannot check it, and says so
    rc, log = run(["verify", outd], ranks=0)
    check(rc == 0, "verify accepts the npy cache", log)
    gt_abs = os.path.abspath(gt)
    m["sources"] = [s for s in m["sources"] if s["path"] != gt_abs]
    with open(mp, "w") as f:
        json.dump(m, f)
    rc, log = run(["verify", outd], ranks=0)
    check(rc != 0 and "is not among the sources" in log and gt_abs in log,
          "verify refuses a manifest whose sources leave out the label file (rc %d)" % rc, log)
    rc, log = run(["verify", out, "--deep"], ranks=0)
    check(rc == 0 and "OK" in log, "verify --deep accepts the fresh cache")
    # change the source: one value, same size
    img = hdr[:-4] + ".img"
    time.sleep(0.01)
    with open(img, "r+b") as f:
        f.seek(1000)
        b = f.read(2)
        f.seek(1000)
        f.write(bytes([b[0] ^ 0x55, b[1]]))
    rc, log = decode(hdr, gt, out, 2, common)
    check(rc != 0 and "source" in log and img in log, "a changed source is refused, naming the file")
    rc, log = run(["verify", out, "--deep"], ranks=0)
    check(rc != 0 and "modified" in log and "content hash" in log, "verify --deep names the changed source")
    check(manifest(out)["data_checksum"] == cs, "the refused decode left the old cache alone")
    rc, log = decode(hdr, gt, out, 2, common + ["--force"])
    check(rc == 0 and manifest(out)["data_checksum"] != cs, "--force replaces it")
    check(not glob.glob(out + ".tmp-*") and not glob.glob(out + ".old-*"), "no temporary or old directory left")
    # the same through two renames (file systems without renameat2's exchange, e.g. NFS)
    rc, log = decode(hdr, gt, out, 2, common + ["--force", "--dtype", "float16"], env={"HSIPIPE_TEST_NO_EXCHANGE": "1"})
    check(rc == 0 and manifest(out)["dtype"] == "float16" and not glob.glob(out + ".tmp-*") and
          not glob.glob(out + ".old-*"), "--force through two renames: replaced, nothing left beside it", log)
    rc, log = decode(hdr, gt, out, 2, common + ["--force"])
    check(rc == 0 and manifest(out)["dtype"] == "float32", "--force back to float32 (the exchange)")
    rc, log = run(["verify", out, "--deep", "--samples", "50"], ranks=0)
    check(rc == 0, "verify accepts the forced rebuild")
    # corrupt one stored value: verify names the checksum and the sample
    npy_out = os.path.join(d, "npycache")
    rc, _ = decode(hdr, gt, npy_out, 2, ["--layout", "pixel"])
    n = manifest(npy_out)["n_samples"]
    with open(os.path.join(npy_out, "samples.npy"), "r+b") as f:
        f.seek(-4 * 35, 2)
        f.write(b"\x00\x00\xc0\x7f")  # a NaN in the last sample
    rc, log = run(["verify", npy_out, "--samples", str(n)], ranks=0)
    check(rc != 0 and "data checksum" in log and ("sample %d " % (n - 1)) in log, "verify names a corrupted sample")
    # a cache that matches its sources and parameters is rebuilt when asked (--force), damaged or not
    rc, log = decode(hdr, gt, npy_out, 2, ["--layout", "pixel", "--force"])
    check(rc == 0 and "rebuilding" in log and "decode skipped" not in log, "--force rebuilds a current cache", log)
    rc, log = run(["verify", npy_out, "--samples", str(n)], ranks=0)
    check(rc == 0 and "OK" in log, "verify accepts the rebuilt cache", log)
    # lock held by someone else: fail fast naming the holder
    with open(out + ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lk.write("pid 4242 on host testhost\n")
        lk.flush()
        t0 = time.time()
        rc, log = decode(hdr, gt, out, 2, common + ["--force"])
        check(rc != 0 and "pid 4242 on host testhost" in log and time.time() - t0 < 30, "held lock: clear fast failure")
        fcntl.flock(lk, fcntl.LOCK_UN)
    os.unlink(out + ".lock")  # this test's own lock file
    # kill -9 of one rank while writing
    for backend in ("npy", "h5"):
        kout = os.path.join(d, "killed_" + backend)
        e = dict(os.environ, HSIPIPE_TEST_DELAY_WRITE_MS="1500", OMPI_ALLOW_RUN_AS_ROOT="1",
                 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        p = subprocess.Popen([MPIEXEC, "-n", "2", "--oversubscribe", BIN, "decode", "--scene", hdr, "--labels", gt,
                              "--out", kout, "--no-progress", "--backend", backend, "--layout", "patch", "--patch", "3"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e)
        victim = None
        t0 = time.time()
        while time.time() - t0 < 60 and victim is None:
            tmps = glob.glob(kout + ".tmp-*/*")
            if tmps:
                for pid in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split():
                    try:
                        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
                    except OSError:
                        continue
                    if b"OMPI_COMM_WORLD_RANK=1" in env:
                        victim = int(pid)
            time.sleep(0.05)
        check(victim is not None, "%s: found rank 1 while it writes" % backend)
        if victim:
            os.kill(victim, signal.SIGKILL)
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        check(p.returncode != 0, "%s: the killed job exits non-zero" % backend)
        check(not os.path.exists(kout), "%s: nothing published at the cache path" % backend)
        rc, log = run(["verify", kout], ranks=0)
        check(rc != 0, "%s: verify refuses the path" % backend)
        for t in [kout] + glob.glob(kout + ".tmp-*"):
            if t != kout:
                rc, log = run(["verify", t], ranks=0)
                check(rc != 0 and "did not finish" in log, "%s: verify/CacheReader::open refuse %s" % (backend, t), log)
            rc, log = run(["folds", "--cache", t, "--k", "3", "--out", os.path.join(d, "killed_folds.json")], ranks=0)
            check(rc != 0 and not os.path.exists(os.path.join(d, "killed_folds.json")),
                  "%s: folds refuses %s (rc %d)" % (backend, t, rc), log)
        rc, log = decode(hdr, gt, kout, 2, ["--backend", backend, "--layout", "patch", "--patch", "3"])
        check(rc == 0 and not glob.glob(kout + ".tmp-*"), "%s: the rerun succeeds and cleans up" % backend)
        rc, log = run(["verify", kout], ranks=0)
        check(rc == 0, "%s: verify accepts the rerun" % backend)
    check_progress(d)
    check_paths_and_staleness(d)


def check_paths_and_staleness(d):
    """What --out may name and what --force may replace; leftovers; consumers (folds, train) and a stale
    cache; a source given a new time but not new bytes."""
    sd = os.path.join(d, "src_paths")
    os.makedirs(sd)
    hdr, gt = make_scene(sd, "p", H=30, W=24, B=12, seed=7)
    # --force never replaces what is not a cache: here the folder of the scenes
    keep = sorted(os.listdir(sd))
    rc, log = decode(hdr, gt, sd, 2, ["--force"])
    check(rc != 0 and "holds no manifest.json" in log and sorted(os.listdir(sd)) == keep,
          "--force with --out the scenes' folder: refused, nothing removed", log)
    # a trailing '/': the cache is published at the path without it, and reused through either spelling
    out = os.path.join(d, "slash")
    rc, log = decode(hdr, gt, out + "/", 2)
    check(rc == 0 and os.path.isfile(os.path.join(out, "manifest.json")) and not os.path.exists(out + ".lock"),
          "--out with a trailing '/': published, no lock left beside it", log)
    rc, log = decode(hdr, gt, out, 1)
    check(rc == 0 and "decode skipped" in log, "... and reused without the '/'", log)
    # a symbolic link: its target is replaced, the link stays
    link = os.path.join(d, "link")
    os.symlink(out, link)
    rc, log = decode(hdr, gt, link, 2, ["--force", "--dtype", "float16"])
    check(rc == 0 and os.path.islink(link) and manifest(out)["dtype"] == "float16" and "symbolic link" in log,
          "--out a symbolic link: its target rebuilt, the link kept", log)
    # leftovers: only the names a job gives its copies are removed (under the lock)
    os.makedirs(out + ".old-keep")
    os.makedirs(out + ".tmp-deadhost-4242")
    shutil.copytree(out, out + ".tmp-deadhost-4243")  # a complete copy: a job killed while publishing
    for t in (out + ".tmp-deadhost-4243",):
        rc, log = run(["verify", t], ranks=0)
        check(rc != 0 and "did not finish" in log, "verify refuses a complete job copy by its name", log)
        rc, log = run(["folds", "--cache", t, "--k", "3", "--out", os.path.join(d, "copy_folds.json")], ranks=0)
        check(rc != 0 and "did not finish" in log, "folds refuses it too", log)
    rc, log = decode(hdr, gt, out, 1, ["--dtype", "float16"])
    check(rc == 0 and "decode skipped" in log and os.path.isdir(out + ".old-keep") and
          not os.path.exists(out + ".tmp-deadhost-4242") and not os.path.exists(out + ".tmp-deadhost-4243"),
          "a job's leftovers removed, a user's out.old-keep kept", log)
    # a source touched (new time, same bytes): the cache is still current for decode, verify and folds
    img = hdr[:-4] + ".img"
    st = os.stat(img)
    os.utime(img, ns=(st.st_atime_ns, st.st_mtime_ns + 5 * 10**9))
    rc, log = decode(hdr, gt, out, 2, ["--dtype", "float16"])
    check(rc == 0 and "decode skipped" in log, "a touched source: the cache is reused", log)
    rc, log = run(["verify", out], ranks=0)
    check(rc == 0 and "content the same" in log, "verify: OK, noting the touched source", log)
    fj = os.path.join(d, "paths_folds.json")
    rc, log = run(["folds", "--cache", out, "--k", "3", "--out", fj], ranks=0)
    check(rc == 0 and os.path.exists(fj), "folds of the touched source's cache", log)
    # a source changed (same size): folds and train refuse the stale cache, naming it and the file
    with open(img, "r+b") as f:
        f.seek(64)
        b = f.read(1)
        f.seek(64)
        f.write(bytes([b[0] ^ 0x10]))
    rc, log = run(["folds", "--cache", out, "--k", "3", "--out", os.path.join(d, "stale_folds.json")], ranks=0)
    check(rc != 0 and "stale cache" in log and img in log and not os.path.exists(os.path.join(d, "stale_folds.json")),
          "folds refuses a stale cache, naming the source", log)
    rc, log = run(["train", "--cache", out, "--folds", fj, "--model", "mlp", "--fold", "0", "--epochs", "1",
                   "--device", "cpu", "--out", os.path.join(d, "stale_run")], ranks=2)
    check(rc != 0 and "stale cache" in log and img in log, "train refuses it on 2 ranks", log)
    rc, log = decode(hdr, gt, out, 2, ["--dtype", "float16", "--force"])
    check(rc == 0 and "replacing" in log, "--force rebuilds it", log)
    # a source missing where the cache is used (a copy on another node): used, with a note
    moved = os.path.join(d, "src_paths_moved")
    os.rename(sd, moved)
    rc, log = run(["folds", "--cache", out, "--k", "3", "--out", fj], ranks=0)
    check(rc == 0 and "missing here" in log, "folds of a cache whose sources are not here: used, noted", log)
    os.rename(moved, sd)
    check_read_only_reuse(d)


def check_read_only_reuse(d):
    """A current cache where the user cannot create the lock file (another user's folder, a read-only mount)
    is reused, writing nothing; a rebuild there fails with the lock's error. Run as root: the second user is
    nobody (setpriv)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("skip  read-only reuse (needs root and setpriv)")
        return
    sd = os.path.join(d, "ro")
    os.makedirs(sd)
    hdr, gt = make_scene(sd, "s", H=20, W=16, B=8, seed=31)
    out = os.path.join(sd, "cache")
    rc, log = decode(hdr, gt, out, 1)
    check(rc == 0, "ro: the cache is built by its owner", log)
    p = sd
    while True:  # nobody must reach the files: every folder above them searchable (the temporary one is 0700)
        os.chmod(p, os.stat(p).st_mode | 0o055)
        if p == os.path.dirname(p) or p == tempfile.gettempdir():
            break
        p = os.path.dirname(p)
    before = sorted(os.listdir(sd))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", BIN, "decode", "--scene", hdr,
                 "--labels", gt, "--out", out, "--no-progress"]
    # Open MPI's session directory: nobody's own under /tmp (ctest gives each test one below the build folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_MCA_orte_tmpdir")}
    env["TMPDIR"] = "/tmp"
    r = subprocess.run(as_nobody, capture_output=True, text=True, env=env)
    log = r.stdout + r.stderr
    check(r.returncode == 0 and "decode skipped: cache is current" in log and "without its lock, read-only" in log and
          sorted(os.listdir(sd)) == before, "ro: another user reuses the current cache, writing nothing", log)
    # a decode building there now (its exclusive lock) is seen, also without the right to create the lock
    with open(out + ".lock", "a") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        r = subprocess.run(as_nobody, capture_output=True, text=True, env=env)
        fcntl.flock(lk, fcntl.LOCK_UN)
    before.append(os.path.basename(out) + ".lock")  # this test's own lock file, root's: nobody cannot take it
    before.sort()
    log = r.stdout + r.stderr
    check(r.returncode != 0 and "another decode is building this cache now" in log,
          "ro: a decode building there meanwhile is seen through a shared lock (rc %d)" % r.returncode, log)
    r = subprocess.run(as_nobody + ["--force"], capture_output=True, text=True, env=env)
    log = r.stdout + r.stderr
    check(r.returncode == 4 and out + ".lock" in log and "Permission denied" in log and sorted(os.listdir(sd)) == before,
          "ro: a rebuild there fails with the lock's error (rc %d), nothing changed" % r.returncode, log)


def check_progress(d):
    """Rank 0's progress lines: each pass (statistics, PCA, write) that lasts over a second reports rows or
    samples done, the rate and an ETA, ending at 100%; a short decode prints none."""
    hdr, gt = make_scene(d, "prog", seed=4)
    n = int((np.asarray(envi.open(gt).load())[:, :, 0] != 0).sum())
    line = re.compile(r"^decode: (statistics pass|PCA pass|write pass), rank 0: (\d+)/(\d+) (rows|samples) "
                      r"\(([\d.]+)%\), \d+ (rows|samples)/s, ETA \d+ s$", re.M)
    slow = {"HSIPIPE_TEST_BLOCK_BYTES": "24000", "HSIPIPE_TEST_DELAY_STATS_MS": "150", "HSIPIPE_TEST_DELAY_WRITE_MS": "200"}
    for extra, passes in (([], ("statistics pass", "write pass")), (["--pca", "3"], ("statistics pass", "PCA pass", "write pass"))):
        out = os.path.join(d, "prog_%d" % len(extra))
        rc, log = run(["decode", "--scene", hdr, "--labels", gt, "--out", out, "--backend", "npy"] + extra, ranks=2, env=slow)
        if not check(rc == 0, "slowed decode %s with progress exits 0" % " ".join(extra), log):
            continue
        got = {}
        for m in line.finditer(log):
            got.setdefault(m.group(1), []).append((int(m.group(2)), int(m.group(3)), m.group(4)))
        for ps in passes:
            seen = got.get(ps, [])
            done = [x[0] for x in seen]
            check(len(seen) >= 2 and done == sorted(done) and seen[-1][0] == seen[-1][1] and len({x[1] for x in seen}) == 1,
                  "%s%s: progress lines with an ETA, rising to 100%% (%s)" % (ps, " (--pca 3)" if extra else "", seen), log)
        if got.get("write pass"):
            check(got["write pass"][-1][1] == (n + 1) // 2 and got["write pass"][-1][2] == "samples",
                  "write pass: rank 0's total is its share of the %d samples" % n)
    rc, log = run(["decode", "--scene", hdr, "--labels", gt, "--out", os.path.join(d, "prog_fast"), "--backend", "npy"], ranks=2)
    check(rc == 0 and not line.search(log), "a decode under a second prints no progress line", log)


def group_errors(d):
    """Bad configuration: a clear error (exit 2) before anything is written."""
    hdr, gt = make_scene(d, "e", H=20, W=15, B=12, seed=2)
    hdr_b, gt_b = make_scene(d, "f", H=20, W=15, B=10, seed=2)
    zero_gt = os.path.join(d, "zero_gt")
    write_envi(zero_gt, np.zeros((20, 15, 1), np.uint8), 1)
    cases = [
        (["--layout", "diamond"], "unknown layout 'diamond'"),
        (["--drop-bands", "3-13"], "out of range"),
        (["--layout", "patch", "--patch", "4"], "must be odd"),
        (["--layout", "patch", "--patch", "17"], "larger than scene"),
        (["--layout", "patch"], "needs --patch"),
        (["--pca", "20"], "--pca"),
        (["--backend", "zarr"], "unknown backend"),
        (["--dtype", "float64"], "--dtype"),
        (["--normalize", "l2"], "--normalize"),
    ]
    for i, (extra, msg) in enumerate(cases):
        out = os.path.join(d, "bad%d" % i)
        rc, log = decode(hdr, gt, out, 2, extra)
        check(rc == 2 and msg in log, "bad option %s: exit 2 and '%s' (rc %d)" % (" ".join(extra), msg, rc), log)
        check(not os.path.exists(out) and not glob.glob(out + ".tmp-*"), "  ... nothing written")
    out = os.path.join(d, "zero")
    rc, log = decode(hdr, zero_gt + ".hdr", out, 2)
    check(rc == 2 and "zero samples" in log and not os.path.exists(out),
          "zero samples: clear error, nothing written (rc %d)" % rc, log)
    out = os.path.join(d, "mixed")
    rc, log = run(["decode", "--scene", hdr, "--scene", hdr_b, "--labels", gt, "--labels", gt_b, "--out", out], ranks=2)
    check(rc == 2 and "different band counts" in log and not os.path.exists(out),
          "scenes with different band counts: clear error, nothing written")
    rc, log = decode(hdr, os.path.join(d, "missing_gt.hdr"), os.path.join(d, "m"), 2)
    check(rc != 0 and "missing_gt" in log, "missing labels file named")
    rc, log = run(["verify", os.path.join(d, "nothing")], ranks=0)
    check(rc != 0 and "no such cache" in log, "verify of a missing cache")
    check_bad_values(d, hdr, gt)
    check_full_disk(d)


def bad_labels(d, hdr, name, lab, envi_type, says, pixel, what):
    """Decodes hdr with the label raster `lab` (ENVI data type envi_type): exit 3 naming the labels file,
    `says` and the pixel, nothing written."""
    gt = os.path.join(d, name + "_gt")
    write_envi(gt, lab[:, :, None], envi_type)
    out = os.path.join(d, name + "_cache")
    rc, log = decode(hdr, gt + ".hdr", out, 2)
    check(rc == 3 and name + "_gt" in log and says in log and "(row %d, col %d)" % pixel in log and not os.path.exists(out),
          "%s (rc %d)" % (what, rc), log)


def check_bad_values(d, hdr, gt):
    """Bad values and bad configurations found late: an error naming file and field, nothing written."""
    labels = np.asarray(envi.open(gt).load())[:, :, 0]
    r, c = map(int, np.argwhere(labels != 0)[0])
    # +Inf in one band of a labeled pixel of a float32 scene: not valid data (like NaN)
    x = np.asarray(envi.open(hdr).load()).astype(np.float32)
    x[r, c, 3] = np.inf
    inf_scene = os.path.join(d, "inf")
    write_envi(inf_scene, x, 4)
    out = os.path.join(d, "inf_cache")
    rc, log = decode(inf_scene + ".hdr", gt, out, 2)
    check(rc == 3 and "inf.hdr" in log and "(row %d, col %d)" % (r, c) in log and "infinite" in log and not os.path.exists(out),
          "an infinite value in a labeled pixel: exit 3 naming the file and the pixel, nothing written (rc %d)" % rc, log)
    rc, log = decode(inf_scene + ".hdr", gt, out, 2, ["--stats-over", "all-pixels"])
    check(rc == 3 and "(row %d, col %d)" % (r, c) in log and not os.path.exists(out),
          "... also with --stats-over all-pixels (rc %d)" % rc, log)
    # float16 cannot hold a band's values without normalisation (1e6 > 65504): refused, not stored as Inf
    big = x.copy()
    big[np.isinf(big)] = 0
    big[r, c, 5] = 1.0e6
    big_scene = os.path.join(d, "big")
    write_envi(big_scene, big, 4)
    out = os.path.join(d, "big_cache")
    rc, log = decode(big_scene + ".hdr", gt, out, 2, ["--normalize", "none", "--dtype", "float16"])
    check(rc == 2 and "band 6 reaches" in log and "65504" in log and not os.path.exists(out),
          "float16 without normalisation of a value beyond 65504: refused naming the band (rc %d)" % rc, log)
    rc, log = decode(big_scene + ".hdr", gt, out, 2, ["--normalize", "zscore", "--dtype", "float16"])
    check(rc == 0, "... and decoded with z-score", log)
    # the same beyond 65504 in an unlabeled pixel, which the statistics do not see but the cube stores
    r2, c2 = map(int, np.argwhere(labels == 0)[0])
    big2 = x.copy()
    big2[np.isinf(big2)] = 0
    big2[r2, c2, 5] = 1.0e6
    write_envi(big_scene + "2", big2, 4)
    out = os.path.join(d, "big2_cache")
    rc, log = decode(big_scene + "2.hdr", gt, out, 2, ["--normalize", "none", "--dtype", "float16", "--layout", "cube"])
    check(rc == 2 and "65520" in log and "big2.hdr" in log and not os.path.exists(out),
          "float16 cube with an unlabeled value beyond 65504: refused in the write pass naming the scene, nothing left "
          "(rc %d)" % rc, log)
    # PCA of unnormalised values whose squares leave the exact covariance accumulator's range (2^80)
    huge = x.copy()
    huge[np.isinf(huge)] = 0
    huge[r, c, 5] = 1.0e20
    write_envi(big_scene + "3", huge, 4)
    out = os.path.join(d, "big3_cache")
    rc, log = decode(big_scene + "3.hdr", gt, out, 2, ["--normalize", "none", "--pca", "2"])
    check(rc == 2 and "big3.hdr" in log and "--pca 2" in log and "--normalize zscore" in log and not os.path.exists(out),
          "PCA of values beyond the covariance's range: refused naming the scene and the remedy (rc %d)" % rc, log)
    # an int32 label raster holding a class id float32 cannot hold exactly (2^24 + 1 would be stored as 2^24)
    big_lab = labels.astype(np.int32)
    big_lab[r, c] = 2**24 + 1
    bad_labels(d, hdr, "bigid", big_lab, 3, "16777216", (r, c),
               "a class id from 2^24 on: exit 3 naming the labels file and the pixel, not stored rounded")
    # a pipe as the scene (it would block the open forever); --out below a regular file: I/O errors, exit 4
    fifo = os.path.join(d, "scene.fifo")
    os.mkfifo(fifo)
    out = os.path.join(d, "fifo_cache")
    try:
        rc, log = run(["decode", "--scene", fifo, "--out", out, "--no-progress"], ranks=2, timeout=60)
    except subprocess.TimeoutExpired:
        rc, log = -1, "timed out"
    check(rc == 4 and "scene.fifo" in log and "not a regular file" in log and not os.path.exists(out),
          "a FIFO as the scene: exit 4 naming it, no hang (rc %d)" % rc, log)
    afile = os.path.join(d, "a_file")
    open(afile, "w").close()
    rc, log = decode(hdr, gt, os.path.join(afile, "sub", "out"), 2)
    check(rc == 4 and afile in log and "Not a directory" in log and "filesystem error" not in log,
          "--out below a regular file: exit 4 naming the path (rc %d)" % rc, log)
    # a negative label that is not the ignore label
    neg = labels.astype(np.int16)
    neg[r, c] = -3
    bad_labels(d, hdr, "neg", neg, 2, "label -3", (r, c), "a negative label: exit 3 naming the labels file and the pixel")
    # --labels with the scenes of a config file would pair with nothing; a misspelt scene section
    ini = os.path.join(d, "cfg.ini")
    with open(ini, "w") as f:
        f.write("[scene.a]\npath = %s\n" % hdr)
    out = os.path.join(d, "cfg_cache")
    rc, log = run(["decode", "--config", ini, "--labels", gt, "--out", out, "--no-progress"], ranks=1)
    check(rc == 2 and "--labels needs --scene" in log and not os.path.exists(out),
          "--labels with the config's scenes: refused (rc %d)" % rc, log)
    with open(ini, "a") as f:
        f.write("[secne.b]\npath = %s\n" % hdr)
    rc, log = run(["decode", "--config", ini, "--out", out, "--no-progress"], ranks=1)
    check(rc == 2 and "unknown section [secne.b]" in log and "cfg.ini" in log and not os.path.exists(out),
          "a misspelt [scene.NAME] section: refused naming the file (rc %d)" % rc, log)
    with open(ini, "w") as f:
        f.write("[scene.a]\npath = %s\n[scene.a]\npath = %s\n" % (hdr, hdr))
    rc, log = run(["decode", "--config", ini, "--out", out, "--no-progress"], ranks=1)
    check(rc == 2 and "[scene.a] gives 'path' more than once" in log, "a scene section given twice: refused (rc %d)" % rc, log)
    # a :VARIABLE after an ENVI file, --axes or a section's axes for scenes that are no HDF5 dataset: refused,
    # not ignored
    for args, says in ((["--scene", hdr + ":band1"], "only MATLAB and HDF5 files"),
                       (["--scene", hdr, "--labels", gt, "--axes", "bhw"], "--axes bhw: orders the dimensions of HDF5")):
        rc, log = run(["decode"] + args + ["--out", out, "--no-progress"], ranks=1)
        check(rc == 2 and says in log and not os.path.exists(out), "decode %s: refused (rc %d)" % (" ".join(args[-2:]), rc), log)
    # ... and taken for one: the same scene as an HDF5 [B, H, W] dataset gives the same cache
    h5p = os.path.join(d, "bhw.h5")
    with h5py.File(h5p, "w") as f:
        f["cube"] = np.transpose(np.asarray(envi.open(hdr).load()), (2, 0, 1))
    ref_out, h5_out = os.path.join(d, "axes_ref"), os.path.join(d, "axes_h5")
    rc1, log1 = decode(hdr, gt, ref_out, 1)
    rc2, log2 = run(["decode", "--scene", h5p + ":/cube", "--labels", gt, "--axes", "bhw", "--out", h5_out,
                     "--no-progress"], ranks=2)
    check(rc1 == 0 and rc2 == 0 and manifest(ref_out)["data_checksum"] == manifest(h5_out)["data_checksum"],
          "--axes bhw for an HDF5 scene: the same cache as from the ENVI file", log1 + log2)
    h5l = os.path.join(d, "labels_bhw.h5")
    with h5py.File(h5l, "w") as f:
        f["l"] = np.asarray(envi.open(gt).load())[:, :, 0][None, :, :]
    rc, log = run(["decode", "--scene", hdr, "--labels", h5l + ":/l", "--axes", "bhw", "--out", h5_out + "_l",
                   "--no-progress"], ranks=1)
    check(rc == 0 and manifest(h5_out + "_l")["data_checksum"] == manifest(ref_out)["data_checksum"],
          "--axes bhw for HDF5 labels of an ENVI scene: taken, the same cache", log)
    for key in ("axes = whb", "variable = cube"):
        with open(ini, "w") as f:
            f.write("[scene.a]\npath = %s\nlabels = %s\n%s\n" % (hdr, gt, key))
        rc, log = run(["decode", "--config", ini, "--out", out, "--no-progress"], ranks=1)
        check(rc == 2 and ("HDF5" in log or "no variables" in log) and not os.path.exists(out),
              "an ENVI scene's section with '%s': refused (rc %d)" % (key, rc), log)
    # a section named after no command would lose its options without a word; other commands' sections are fine
    for sec, key in (("decod", "layout = patch"), ("scene", "path = " + hdr), ("fold", "k = 3")):
        with open(ini, "w") as f:
            f.write("[scene.a]\npath = %s\nlabels = %s\n[folds]\nk = 3\n[train]\nepochs = 1\n[%s]\n%s\n" % (hdr, gt, sec, key))
        rc, log = run(["decode", "--config", ini, "--out", out, "--no-progress"], ranks=1)
        check(rc == 2 and "unknown section [%s]" % sec in log and "cfg.ini" in log and "decode" in log and
              not os.path.exists(out), "a misspelt section [%s]: refused naming the file and the known ones (rc %d)" % (sec, rc), log)
    # scenes with labels and scenes without in one cache, as on the command line: refused
    hdr_m, _ = make_scene(d, "mix", H=12, W=10, seed=4)
    with open(ini, "w") as f:
        f.write("[scene.a]\npath = %s\nlabels = %s\n[scene.b]\npath = %s\n" % (hdr, gt, hdr_m))
    rc, log = run(["decode", "--config", ini, "--out", out, "--no-progress"], ranks=1)
    check(rc == 2 and "scene 'a' has labels but scene 'b'" in log and not os.path.exists(out),
          "INI scenes with and without labels: refused (rc %d)" % rc, log)
    # a negative value for an unsigned option (Boost would read -1 as 2^64 - 1)
    rc, log = decode(hdr, gt, out, 1, ["--memory-mb", "-1"])
    check(rc == 2 and "--memory-mb: expected a number >= 0" in log and not os.path.exists(out),
          "--memory-mb -1: refused (rc %d)" % rc, log)
    # one scene given twice: each pixel would be two samples
    rc, log = run(["decode", "--scene", hdr, "--scene", hdr, "--labels", gt, "--labels", gt, "--out", out, "--no-progress"], ranks=1)
    check(rc == 2 and "the same data" in log and not os.path.exists(out), "a scene given twice: refused (rc %d)" % rc, log)
    # a manifest without its statistics: verify names the field
    good = os.path.join(d, "good_cache")
    rc, log = decode(hdr, gt, good, 1, ["--backend", "npy"])
    check(rc == 0, "decode for the manifest check", log)
    if rc == 0:
        trailing = os.path.join(d, "trailing_cache")
        shutil.copytree(good, trailing)
        with open(os.path.join(trailing, "samples.npy"), "ab") as f:
            f.write(b"\0" * 8)
        rc, log = run(["verify", trailing], ranks=0)
        check(rc == 5 and "bytes after the array" in log and "samples.npy" in log,
              "verify of a samples.npy with bytes after its array: refused naming the file (rc %d)" % rc, log)
        mp = os.path.join(good, "manifest.json")
        m = manifest(good)
        del m["statistics"]
        with open(mp, "w") as f:
            json.dump(m, f)
        rc, log = run(["verify", good], ranks=0)
        check(rc == 3 and "manifest.json" in log and "statistics" in log and "json.exception" not in log.split("(")[0],
              "verify of a manifest without statistics: exit 3 naming the file and field (rc %d)" % rc, log)


def check_full_disk(d):
    """A file system with room for about the samples, not for the whole cache: a clear I/O error naming the
    file, on every rank (no rank left waiting in a collective call, no SIGBUS in a store to the mapped file),
    and nothing left. h5 reserves the file's blocks up front (fallocate), so it fails before any write; npy
    on tmpfs reserves nothing (see reserve_blocks) and fails where a rank faults in its pages."""
    hdr, gt = make_scene(d, "full", seed=5)
    n = int((np.asarray(envi.open(gt).load())[:, :, 0] != 0).sum())
    page = 4096
    size = (64 + n * 40 * 4 + page - 1) // page * page + page  # about samples.npy's room: not the whole cache
    mnt = os.path.join(d, "small_disk")
    os.makedirs(mnt)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", mnt], capture_output=True, text=True)
    if p.returncode != 0:  # not root, or no mount permission in this container
        print("skip  full disk: cannot mount a small tmpfs here (%s)" % p.stderr.strip())
        return
    try:
        # the patch cache would need 25x the room: refused before anything is written, with its size
        out = os.path.join(mnt, "cache_patch")
        rc, log = decode(hdr, gt, out, 2, ["--layout", "patch", "--patch", "5", "--dtype", "float32"])
        m = re.search(r"size by layout: pixel ([\d.]+ \w+), patch 5x5 ([\d.]+ \w+), cube ([\d.]+ \w+); building patch", log)
        check(rc == 2 and m is not None and "use --layout cube" in log and "free" in log,
              "patch cache larger than the free space: refused up front, sizes of each layout printed (rc %d)" % rc, log)
        check(not [f for f in glob.glob(os.path.join(mnt, "cache_patch*")) if not f.endswith(".lock")],
              "  ... nothing left in %s but the lock file" % mnt)
        for f in glob.glob(os.path.join(mnt, "*")):
            shutil.rmtree(f) if os.path.isdir(f) else os.remove(f)
        for backend, R in (("npy", 2), ("h5", 2)):
            out = os.path.join(mnt, "cache_" + backend)
            rc, log = decode(hdr, gt, out, R, ["--backend", backend, "--dtype", "float32"])
            named = re.search(r"(samples|labels|coords)\.npy", log) if backend == "npy" else "cache.h5" in log
            # npy on tmpfs: no blocks reserved (see reserve_blocks), the page faults of place() fail
            check(rc == 4 and named and ("No space left" in log or "no space left?" in log),
                  "%s, disk too small for the cache: I/O error naming the file (rc %d)" % (backend, rc), log)
            check(not os.path.exists(out) and not glob.glob(out + ".tmp-*"), "  ... nothing left in %s" % mnt)
            for f in glob.glob(os.path.join(mnt, "*")):  # the lock file, so that the h5 case has the same room
                shutil.rmtree(f) if os.path.isdir(f) else os.remove(f)
    finally:
        subprocess.run(["umount", mnt])


def group_tiled(d):
    """A tiled GeoTIFF (16 x 16 tiles) decodes to the ENVI scene's cache with 1, 2 and 3 ranks, and each tile
    row is decoded by one rank only: the bytes read are the same for every R (boundary rows are exchanged)."""
    hdr, gt = make_scene(d, "t", H=61, W=50, B=24)
    tif, gtif = os.path.join(d, "tiled.tif"), os.path.join(d, "tiled_gt.tif")
    for src, dst in ((hdr[:-4] + ".img", tif), (gt[:-4] + ".img", gtif)):
        subprocess.run(["gdal_translate", "-q", "-of", "GTiff", "-co", "TILED=YES", "-co", "BLOCKXSIZE=16",
                        "-co", "BLOCKYSIZE=16", "-co", "COMPRESS=DEFLATE", src, dst], check=True)
    for layout, extra in (("pixel", []), ("patch", ["--patch", "5"]), ("cube", ["--patch", "3"])):
        rc, log = decode(hdr, gt, os.path.join(d, "envi_" + layout), 1, ["--layout", layout, "--backend", "npy"] + extra)
        check(rc == 0, "tiled: ENVI reference %s decodes" % layout)
        want = manifest(os.path.join(d, "envi_" + layout))["data_checksum"] if rc == 0 else None
        totals = {}
        for R in (1, 2, 3):
            out = os.path.join(d, "tif_%s_%d" % (layout, R))
            rc, log = decode(tif, gtif, out, R, ["--layout", layout, "--backend", "npy"] + extra)
            if not check(rc == 0, "tiled: %s R=%d exits 0" % (layout, R), log):
                continue
            check(manifest(out)["data_checksum"] == want,
                  "tiled: %s R=%d data_checksum equals the ENVI scene's" % (layout, R))
            totals[R] = manifest(out)["source_bytes_read"]
        check(len(set(totals.values())) == 1,
              "tiled: %s bytes read the same for R=1,2,3 (no tile row decoded twice): %s" % (layout, totals))


def group_salinas(d):
    """The shipped config/salinas_a.ini (../shared/data/SalinasA.mat, MATLAB v5) decodes, run from the project
    root as docs/ACCURACY.md says, to what scipy.io.loadmat + numpy compute: bands 108-112, 154-167, 224 dropped,
    z-score over the labeled pixels, 5 x 5 reflect patches in float32; 1 and 3 ranks give one cache. Without
    the data the group skips, except under CI=true, where it fails."""
    import scipy.io
    data = os.environ.get("HSIPIPE_SHARED_DATA", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data"))
    mat, gt_mat = os.path.join(data, "SalinasA.mat"), os.path.join(data, "SalinasA_gt.mat")
    if not (os.path.exists(mat) and os.path.exists(gt_mat)):
        if os.environ.get("CI") == "true":
            check(False, "salinas: %s missing under CI=true" % mat)
        else:
            print("skip  salinas: %s not found" % mat)
        return
    src = os.environ.get("HSIPIPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    img = scipy.io.loadmat(mat)["salinasA"].astype(np.float64)
    lab = scipy.io.loadmat(gt_mat)["salinasA_gt"].astype(np.int64)
    drop = list(range(108, 113)) + list(range(154, 168)) + [224]
    data_ref, labels, coords, mean, std, _ = reference_of(img, lab, drop=drop, layout="patch", patch=5, border="reflect")
    sums = []
    for R in (1, 3):
        out = os.path.join(d, "salinas_%d" % R)
        cmd = [MPIEXEC, "-n", str(R), "--oversubscribe", BIN, "decode", "--config", "config/salinas_a.ini",
               "--out", out, "--no-progress"]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=src)
        log = p.stdout + p.stderr
        if not check(p.returncode == 0, "salinas: decode --config config/salinas_a.ini, R=%d" % R, log):
            continue
        m, a = load_arrays(out)
        sums.append(m["data_checksum"])
        check(m["n_samples"] == 5348 and m["n_bands"] == 204 and m["layout"] == "patch" and m["backend"] == "h5",
              "salinas R=%d: 5348 samples x 204 bands, patch, h5 (%s x %s)" % (R, m["n_samples"], m["n_bands"]))
        check(a["samples"].dtype == np.float32 and close(a["samples"], data_ref, "float32"),
              "salinas R=%d: samples equal scipy.io.loadmat + numpy's" % R)
        check(np.array_equal(a["labels"], labels) and np.array_equal(a["coords"], coords),
              "salinas R=%d: labels and (scene, row, col) equal numpy's" % R)
        check(np.allclose(a["band_mean"], mean, rtol=1e-12) and np.allclose(a["band_std"], std, rtol=1e-10),
              "salinas R=%d: band statistics equal numpy's" % R)
        check(any(os.path.realpath(s["path"]) == os.path.realpath(mat) for s in m["sources"]),
              "salinas R=%d: the manifest names SalinasA.mat among its sources" % R)
    check(len(sums) == 2 and sums[0] == sums[1], "salinas: R=1 and R=3 give one data_checksum (%s)" % sums)


def run_groups(groups, prefix):
    """Runs the groups named on the command line (all by default), each in its own folder of one temporary
    directory, then reports the failed checks (exit 1) or that all passed. Shared by the Python drivers."""
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        for g in sys.argv[1:] or list(groups):
            sub = os.path.join(d, g)
            os.makedirs(sub)
            groups[g](sub)
    if FAILS:
        print("%d check(s) failed:" % len(FAILS))
        for f in FAILS:
            print("  ", f)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    run_groups({"ranks": group_ranks, "values": group_values, "lifecycle": group_lifecycle, "errors": group_errors,
                "tiled": group_tiled, "salinas": group_salinas}, "hsipipe-decode-")
