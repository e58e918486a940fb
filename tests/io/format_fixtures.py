#!/usr/bin/python3
"""Test fixtures for the MATLAB, HDF5 and GDAL scene readers, with independently decoded references.

usage: format_fixtures.py {matlab|hdf5|gdal|salinas|bench} OUT_DIR [SHARED_DATA | ROWS COLS BANDS]

Writes scene files into OUT_DIR and, for each, a reference cube decoded by an independent
implementation (scipy.io.loadmat, h5py/numpy, numpy on the raw ENVI file, cross-checked against GDAL's
Python bindings) as raw float32 in BIP order (row, col, band; band fastest) with the io::Scene NaN
rule applied: a pixel with NaN or the nodata value in any band is NaN in all bands. OUT_DIR/manifest.json
lists {"name", "spec", "axes", "ref", "rows", "cols", "bands", ...} per scene and the expected errors.
Deterministic: fixed seeds.
"""
import json
import os
import subprocess
import sys

import numpy as np

RNG = np.random.default_rng(20261129)


def bip_reference(cube, nodata=None):
    """cube: (H, W, B) array -> float32 BIP with the Scene masking rule."""
    cube = np.asarray(cube)
    bad = np.zeros(cube.shape[:2], dtype=bool)
    if np.issubdtype(cube.dtype, np.floating):
        bad |= np.isnan(cube).any(axis=2)
    if nodata is not None:
        bad |= (cube.astype(np.float64) == float(nodata)).any(axis=2)
    out = cube.astype(np.float32)
    out[bad, :] = np.nan
    return np.ascontiguousarray(out)


def save_ref(out_dir, name, cube, nodata=None):
    ref = bip_reference(cube, nodata)
    path = os.path.join(out_dir, name + ".f32")
    ref.astype("<f4").tofile(path)
    h, w, b = ref.shape
    return {"ref": path, "rows": h, "cols": w, "bands": b}


def sample_cube(dtype, shape):
    """Values spanning the type's range (extremes included) so conversion errors show."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
        a = RNG.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64 if info.min < 0 else np.uint64)
        a = a.astype(dtype)
        a.flat[0], a.flat[-1] = info.min, info.max
        return a
    a = (RNG.standard_normal(shape) * 1000).astype(dtype)
    a.flat[1] = np.finfo(np.float32).max if dtype.itemsize >= 4 else np.finfo(dtype).max
    a[2, 3, 1] = np.nan  # pixel (2, 3) must come out NaN in every band
    return a


# --------------------------------------------------------------------------------------------- MATLAB
def write_mat73(path, variables):
    """MATLAB v7.3 layout: HDF5 with a 512-byte user block holding the MAT header, each array stored
    with its dimensions reversed (MATLAB is column-major) and a MATLAB_class attribute."""
    import h5py

    classes = {"int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16", "int32": "int32",
               "uint32": "uint32", "int64": "int64", "uint64": "uint64", "float32": "single",
               "float64": "double"}
    with h5py.File(path, "w", userblock_size=512, libver="earliest") as f:
        for name, (arr, chunked) in variables.items():
            data = np.asarray(arr).T  # (H, W, B) -> HDF5 dims (B, W, H)
            kw = {"chunks": True, "compression": "gzip"} if chunked else {}
            ds = f.create_dataset(name, data=data, **kw)
            # MATLAB writes a fixed-size, NULLTERM string exactly as long as the text (no room for the
            # NUL); h5py's default is NULLPAD, which libmatio converts with one character lost.
            text = classes[str(arr.dtype)].encode()
            tid = h5py.h5t.C_S1.copy()
            tid.set_size(len(text))
            tid.set_strpad(h5py.h5t.STR_NULLTERM)
            attr = h5py.h5a.create(ds.id, b"MATLAB_class", tid, h5py.h5s.create(h5py.h5s.SCALAR))
            attr.write(np.array(text, dtype=f"S{len(text)}"), mtype=tid)
    text = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Sun Nov 29 00:00:00 2026 HDF5 schema 1.00 ."
    header = text.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as f:
        f.write(header)


def make_matlab(out):
    import scipy.io

    scenes, errors = [], []
    shape = (7, 5, 4)
    for dt in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]:
        cube = sample_cube(dt, shape)
        for compressed in (False, True):
            name = f"cube_{dt}_{'z' if compressed else 'u'}"
            path = os.path.join(out, name + ".mat")
            scipy.io.savemat(path, {"cube": cube, "wl": np.arange(4.0)}, do_compression=compressed)
            back = scipy.io.loadmat(path)["cube"]  # the independent decode
            assert back.dtype == cube.dtype and back.shape == shape
            scenes.append({"name": name, "spec": path, **save_ref(out, name, back)})

    # MATLAB v7.3 (HDF5 inside), contiguous and chunked+gzip, decoded from the numpy arrays written.
    for dt, chunked in [("int16", False), ("float64", True), ("uint8", True)]:
        cube = sample_cube(dt, (9, 6, 5))
        name = f"v73_{dt}_{'chunked' if chunked else 'contig'}"
        path = os.path.join(out, name + ".mat")
        write_mat73(path, {"hsi": (cube, chunked)})
        scenes.append({"name": name, "spec": path + ":hsi", "format": "MATLAB v7.3", **save_ref(out, name, cube)})
    # v7.3 label raster (2-D) picked by default.
    gt = RNG.integers(0, 6, size=(9, 6), dtype=np.uint8)
    path = os.path.join(out, "v73_labels.mat")
    write_mat73(path, {"gt": (gt, False)})
    scenes.append({"name": "v73_labels", "spec": path, "labels": gt.astype(int).ravel().tolist(),
                   **save_ref(out, "v73_labels", gt[:, :, None])})

    # A labels-only v5 file with a vector beside the raster: the 2-D raster is the default.
    gt5 = RNG.integers(0, 4, size=(6, 8), dtype=np.uint8)
    path = os.path.join(out, "labels5.mat")
    scipy.io.savemat(path, {"gt": gt5, "classes": np.arange(1, 4, dtype=np.uint8)[None, :]})
    back = scipy.io.loadmat(path)["gt"]
    scenes.append({"name": "labels5", "spec": path, "labels": back.astype(int).ravel().tolist(),
                   **save_ref(out, "labels5", back[:, :, None])})

    # [bands x pixels] matrices (the unmixing data sets: Jasper Ridge, Samson, Urban): Y is B x (H*W), the
    # pixels in column-major order, the image size in scalars beside it; S_GT (abundance maps, H x W x E) is
    # the file's only 3-D array. The reference is scipy's loadmat + numpy's column-major reshape.
    H, W, B, E = 7, 5, 6, 3
    for compressed in (False, True):
        for pair in (("nRow", "nCol"), ("lines", "cols"), ("nr", "nc")):
            tag = "%s_%s" % (pair[0], "z" if compressed else "u")
            path = os.path.join(out, "unmix_%s.mat" % tag)
            Y = sample_cube("float64", (B, H * W, 2))[:, :, 0].copy()
            Y[2, 3 + 2 * H] = np.nan  # pixel (3, 2): NaN in every band
            gt = RNG.integers(0, 4, size=(H, W), dtype=np.uint8)
            scipy.io.savemat(path, {"Y": Y, pair[0]: float(H), pair[1]: float(W), "nBand": float(B),
                                    "S_GT": RNG.random((H, W, E)), "A": RNG.random((E, H * W)), "M": RNG.random((B, E)),
                                    "gt": gt}, do_compression=compressed)
            back = scipy.io.loadmat(path)
            cube = back["Y"].T.reshape(H, W, B, order="F")
            scenes.append({"name": "unmix_" + tag, "spec": path + ":Y", "image_size": "",
                           **save_ref(out, "unmix_" + tag, cube)})
            errors.append({"spec": path, "role": "scene", "expect": ["unmix_%s.mat" % tag, "could be the scene",
                                                                    "Y (6x35 double)", "S_GT (7x5x3 double)", "A (3x35 double)"]})
            if pair[0] == "nRow":  # label rasters stay H x W, whatever the file names
                scenes.append({"name": "unmix_gt_" + tag, "spec": path + ":gt", "labels": back["gt"].astype(int).ravel().tolist(),
                               **save_ref(out, "unmix_gt_" + tag, back["gt"][:, :, None])})
    # v7.3: Y chunked + gzip, nRow/nCol scalars
    Y = sample_cube("int16", (B, H * W, 2))[:, :, 0].copy()
    path = os.path.join(out, "unmix_v73.mat")
    write_mat73(path, {"Y": (Y, True), "nRow": (np.array([[float(H)]]), False), "nCol": (np.array([[float(W)]]), False)})
    scenes.append({"name": "unmix_v73", "spec": path, "image_size": "", **save_ref(out, "unmix_v73", Y.T.reshape(H, W, B, order="F"))})
    # no size in the file: the option gives it; without it a scene is refused, saying what to add
    bare = os.path.join(out, "bare_Y.mat")
    Y = sample_cube("uint16", (B, H * W, 2))[:, :, 0].copy()
    scipy.io.savemat(bare, {"Y": Y})
    cube = scipy.io.loadmat(bare)["Y"].T.reshape(H, W, B, order="F")
    scenes.append({"name": "bare_Y", "spec": bare, "image_size": "%dx%d" % (H, W), **save_ref(out, "bare_Y", cube)})
    errors += [
        {"spec": bare, "role": "scene", "expect": ["bare_Y.mat", "Y", "6 x 35", "--image-size", "nRow"]},
        {"spec": bare, "role": "scene", "image_size": "5x5", "expect": ["bare_Y.mat", "Y", "25 pixels", "35"]},
    ]
    wrong = os.path.join(out, "wrong_size.mat")
    scipy.io.savemat(wrong, {"Y": np.ones((6, 30)), "nRow": 4.0, "nCol": 5.0})
    errors += [{"spec": wrong + ":Y", "role": "scene", "expect": ["wrong_size.mat", "Y", "nRow/nCol", "20 pixels"]},
               {"spec": path + ":Y", "image_size": "6x6", "expect": ["unmix_v73.mat", "36 pixels"]},
               {"spec": os.path.join(out, "cube_int16_u.mat"), "image_size": "7x5", "expect": ["cube_int16_u.mat", "2-D"]}]

    # Bad input.
    multi = os.path.join(out, "multi.mat")
    scipy.io.savemat(multi, {"alpha": sample_cube("int16", shape), "beta": sample_cube("int16", shape),
                             "title": "a string", "parts": np.array([1, "x"], dtype=object),
                             "z": np.ones((3, 3, 2)) * (1 + 2j)})
    errors += [
        {"spec": multi, "expect": ["multi.mat", "alpha", "beta", "title"]},           # ambiguous default
        {"spec": multi + ":gamma", "expect": ["multi.mat", "gamma", "alpha", "beta", "parts"]},  # unknown
        {"spec": multi + ":title", "expect": ["multi.mat", "title", "char"]},         # non-numeric
        {"spec": multi + ":parts", "expect": ["multi.mat", "parts", "cell"]},
        {"spec": multi + ":z", "expect": ["multi.mat", "z", "complex"]},
        {"spec": os.path.join(out, "missing.mat"), "expect": ["missing.mat"]},
    ]
    # Truncated files (libmatio reads a short v4/v5 file without an error: zeros for the missing part).
    def truncated(name, data, keep):
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(data[:keep])
        return path
    for compressed in (False, True):
        full = os.path.join(out, "full_%s.mat" % ("z" if compressed else "u"))
        scipy.io.savemat(full, {"X": sample_cube("float32", (30, 20, 10)), "Y": np.ones((30, 20), np.uint8)},
                         do_compression=compressed)
        with open(full, "rb") as f:
            data = f.read()
        tag = "z" if compressed else "u"
        errors += [
            {"spec": truncated("half_%s.mat" % tag, data, len(data) // 2) + ":X", "expect": ["half_%s.mat" % tag, "X", "truncated"]},
            {"spec": truncated("short_%s.mat" % tag, data, len(data) - 3) + ":X", "expect": ["short_%s.mat" % tag, "Y", "truncated"]},
        ]
    v4 = os.path.join(out, "full_v4.mat")
    scipy.io.savemat(v4, {"X": np.arange(600.0).reshape(30, 20)}, format="4")
    with open(v4, "rb") as f:
        data = f.read()
    errors.append({"spec": truncated("half_v4.mat", data, len(data) // 2) + ":X", "expect": ["half_v4.mat", "X", "truncated"]})
    v73 = os.path.join(out, "full_v73.mat")
    write_mat73(v73, {"hsi": (sample_cube("int16", (9, 6, 5)), False)})
    with open(v73, "rb") as f:
        data = f.read()
    errors.append({"spec": truncated("half_v73.mat", data, len(data) // 2) + ":hsi", "expect": ["half_v73.mat", "truncated"]})
    notmat = os.path.join(out, "garbage.mat")
    with open(notmat, "wb") as f:
        f.write(b"this is not a MAT-file" * 20)
    errors.append({"spec": notmat, "expect": ["garbage.mat"]})
    return scenes, errors


def make_salinas(out, data):
    import scipy.io

    cube = scipy.io.loadmat(os.path.join(data, "SalinasA.mat"))["salinasA"]
    gt = scipy.io.loadmat(os.path.join(data, "SalinasA_gt.mat"))["salinasA_gt"]
    assert cube.shape == (83, 86, 224) and gt.shape == (83, 86)
    classes, counts = np.unique(gt, return_counts=True)
    scenes = [{"name": "salinasA", "spec": os.path.join(data, "SalinasA.mat"), "dtype": str(cube.dtype),
               **save_ref(out, "salinasA", cube)},
              {"name": "salinasA_gt", "spec": os.path.join(data, "SalinasA_gt.mat"),
               "labels": gt.astype(int).ravel().tolist(),
               "counts": {str(int(c)): int(n) for c, n in zip(classes, counts)},
               **save_ref(out, "salinasA_gt", gt[:, :, None])}]
    # Samson (ENVI, 95 x 95 x 156 int16 BSQ) stored the way its authors' .mat is: V [bands x pixels], pixels
    # column-major, nRow/nCol/nBand scalars; the reference is the ENVI file read with numpy
    h, w, b = 95, 95, 156
    samson = read_envi_raw(os.path.join(data, "samson_1.img"), "int16", (h, w, b))
    path = os.path.join(out, "samson_1.mat")
    scipy.io.savemat(path, {"V": samson.reshape(h * w, b, order="F").T, "nRow": float(h), "nCol": float(w),
                            "nBand": float(b)})
    scenes.append({"name": "samson_matrix", "spec": path, "image_size": "", **save_ref(out, "samson_matrix", samson)})
    ip = scipy.io.loadmat(os.path.join(data, "Indian_pines_gt.mat"))["indian_pines_gt"]
    scenes.append({"name": "indian_pines_gt", "spec": os.path.join(data, "Indian_pines_gt.mat"),
                   "labels": ip.astype(int).ravel().tolist(), **save_ref(out, "indian_pines_gt", ip[:, :, None])})
    return scenes, []


# ----------------------------------------------------------------------------------------------- HDF5
def make_hdf5(out):
    import h5py

    scenes, errors = [], []
    path = os.path.join(out, "scenes.h5")
    with h5py.File(path, "w") as f:
        for dt in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
                   "float32", "float64"]:
            cube = sample_cube(dt, (9, 7, 4))
            stored = {"hwb": cube, "bhw": cube.transpose(2, 0, 1), "whb": cube.transpose(1, 0, 2)}
            for axes, arr in stored.items():
                chunked = axes == "whb"
                kw = {"chunks": (3, 2, 2), "compression": "gzip"} if chunked else {}
                name = f"{dt}/{axes}"
                f.create_dataset(name, data=arr, **kw)
                back = f[name][...]  # h5py's own decode, then back to (H, W, B)
                hwb = {"hwb": back, "bhw": back.transpose(1, 2, 0), "whb": back.transpose(1, 0, 2)}[axes]
                scenes.append({"name": f"h5_{dt}_{axes}", "spec": f"{path}:/{name}", "axes": axes,
                               **save_ref(out, f"h5_{dt}_{axes}", hwb)})
        # Attributes: wavelengths and an ignore value.
        cube = sample_cube("int16", (5, 4, 3))
        cube[1, 2, 0] = -999
        ds = f.create_dataset("meta/cube", data=cube)
        ds.attrs["wavelength"] = np.array([450.0, 550.0, 650.0])
        ds.attrs["wavelength units"] = "Nanometers"
        ds.attrs["data ignore value"] = np.int16(-999)
        scenes.append({"name": "h5_meta", "spec": f"{path}:/meta/cube", "axes": "hwb",
                       "wavelengths": [450.0, 550.0, 650.0], "ignore": -999,
                       **save_ref(out, "h5_meta", cube, nodata=-999)})
        f.create_dataset("notes", data=np.array([b"abc", b"de"]))
        f.create_dataset("four_d", data=np.zeros((2, 2, 2, 2), dtype="u1"))
    # A labels-only file: the single 2-D dataset is the default.
    lpath = os.path.join(out, "labels.h5")
    gt = RNG.integers(0, 9, size=(9, 7), dtype=np.uint16)
    with h5py.File(lpath, "w") as f:
        f.create_dataset("gt", data=gt)
        f.create_dataset("class_names", data=np.array([b"a", b"b"]))
    scenes.append({"name": "h5_labels", "spec": lpath, "labels": gt.astype(int).ravel().tolist(),
                   **save_ref(out, "h5_labels", gt[:, :, None])})
    errors += [
        {"spec": path, "expect": ["scenes.h5", "/int8/hwb", "/float16/bhw", "more"]},  # ambiguous default
        {"spec": path + ":/nothing", "expect": ["scenes.h5", "/nothing", "/int16/bhw"]},
        {"spec": path + ":/notes", "expect": ["scenes.h5", "/notes", "string"]},
        {"spec": path + ":/four_d", "expect": ["scenes.h5", "/four_d", "4 dimensions"]},
        {"spec": path + ":/int16/hwb", "axes": "hbw", "expect": ["scenes.h5", "hbw"]},
    ]
    return scenes, errors


# ----------------------------------------------------------------------------------------------- GDAL
def write_envi(path, cube, dtype_code, nodata=None, wavelengths=None):
    """cube (H, W, B) -> BSQ ENVI file, little-endian."""
    h, w, b = cube.shape
    np.ascontiguousarray(cube.transpose(2, 0, 1)).astype(cube.dtype.newbyteorder("<")).tofile(path)
    hdr = ["ENVI", f"samples = {w}", f"lines = {h}", f"bands = {b}", "header offset = 0",
           "file type = ENVI Standard", f"data type = {dtype_code}", "interleave = bsq", "byte order = 0"]
    if wavelengths is not None:
        hdr += ["wavelength units = Nanometers", "wavelength = {" + ", ".join(f"{x:g}" for x in wavelengths) + "}"]
    if nodata is not None:
        hdr.append(f"data ignore value = {nodata}")
    with open(os.path.splitext(path)[0] + ".hdr", "w") as f:
        f.write("\n".join(hdr) + "\n")


def read_envi_raw(path, dtype, shape):
    """Independent decode of our BSQ file with numpy: (B, H, W) on disk -> (H, W, B)."""
    h, w, b = shape
    return np.fromfile(path, dtype=np.dtype(dtype).newbyteorder("<")).reshape(b, h, w).transpose(1, 2, 0)


VARIANTS = {
    "tiled_deflate_pixel": ["TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16", "COMPRESS=DEFLATE", "INTERLEAVE=PIXEL"],
    "tiled_deflate_band": ["TILED=YES", "BLOCKXSIZE=32", "BLOCKYSIZE=16", "COMPRESS=DEFLATE", "INTERLEAVE=BAND"],
    "tiled_lzw_pixel": ["TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=32", "COMPRESS=LZW", "INTERLEAVE=PIXEL"],
    "tiled_zstd_band": ["TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16", "COMPRESS=ZSTD", "INTERLEAVE=BAND"],
    "striped_lzw_band": ["COMPRESS=LZW", "BLOCKYSIZE=5", "INTERLEAVE=BAND"],
    "striped_deflate_pixel": ["COMPRESS=DEFLATE", "PREDICTOR=2", "BLOCKYSIZE=3", "INTERLEAVE=PIXEL"],
    "striped_zstd_pixel": ["COMPRESS=ZSTD", "BLOCKYSIZE=8", "INTERLEAVE=PIXEL"],
    "striped_raw_band": ["BLOCKYSIZE=1", "INTERLEAVE=BAND"],
}


def gdal_translate(src, dst, options, extra=()):
    cmd = ["gdal_translate", "-q", "-of", "GTiff"] + [x for o in options for x in ("-co", o)] + list(extra) + [src, dst]
    subprocess.run(cmd, check=True)


def make_gdal(out):
    from osgeo import gdal

    gdal.UseExceptions()
    scenes, errors = [], []
    h, w, b = 37, 53, 6
    wl = [400.0 + 25.5 * i for i in range(b)]
    sources = {}
    cube = RNG.integers(-3000, 12000, size=(h, w, b), dtype=np.int16)
    sources["i16"] = (cube, 2, "int16", None)
    cube_nd = cube.copy()
    cube_nd[3, 4, 2] = -1
    cube_nd[20, 50, :] = -1
    cube_nd[36, 0, 5] = -1
    sources["i16nd"] = (cube_nd, 2, "int16", -1)
    cube_f = (RNG.standard_normal((h, w, b)) * 0.2).astype(np.float32)
    cube_f[5, 6, 3] = np.nan
    sources["f32"] = (cube_f, 4, "float32", None)
    sources["u16"] = (RNG.integers(0, 65535, size=(h, w, b), dtype=np.uint16, endpoint=True), 12, "uint16", None)

    for key, (arr, code, dt, nodata) in sources.items():
        envi = os.path.join(out, f"src_{key}.img")
        write_envi(envi, arr, code, nodata, wl)
        raw = read_envi_raw(envi, dt, (h, w, b))
        assert np.array_equal(raw, arr, equal_nan=True)
        variants = VARIANTS if key == "i16" else {k: VARIANTS[k] for k in ("tiled_deflate_pixel", "striped_lzw_band")}
        for vname, opts in variants.items():
            name = f"{key}_{vname}"
            tif = os.path.join(out, name + ".tif")
            gdal_translate(envi, tif, opts)
            # Cross-check the file against GDAL's Python bindings: same values as the raw ENVI data.
            ds = gdal.Open(tif)
            via_gdal = ds.ReadAsArray().transpose(1, 2, 0)
            assert np.array_equal(via_gdal, raw, equal_nan=True), name
            nd = ds.GetRasterBand(1).GetNoDataValue()
            assert (nd is None) == (nodata is None)
            ds = None
            scenes.append({"name": name, "spec": tif, "tiled": vname.startswith("tiled"),
                           "wavelengths": wl, "ignore": nodata, **save_ref(out, name, raw, nodata)})

    # Label raster: a 1-band uint8 GeoTIFF, and one with nodata 255 (kept as the integer 255).
    gt = RNG.integers(0, 7, size=(h, w), dtype=np.uint8)
    gt[0, 0] = 255
    envi = os.path.join(out, "labels.img")
    write_envi(envi, gt[:, :, None], 1)
    for name, extra in [("labels_plain", []), ("labels_nodata", ["-a_nodata", "255"])]:
        tif = os.path.join(out, name + ".tif")
        gdal_translate(envi, tif, ["TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16", "COMPRESS=DEFLATE"], extra)
        assert np.array_equal(gdal.Open(tif).ReadAsArray(), gt)
        scenes.append({"name": name, "spec": tif, "labels": gt.astype(int).ravel().tolist(),
                       "ignore": 255 if extra else None,
                       **save_ref(out, name, gt[:, :, None], 255 if extra else None)})
    # Label raster one row short of the scene, for check_labels_match.
    short = os.path.join(out, "labels_short.tif")
    gdal_translate(envi, short, ["COMPRESS=LZW"], ["-srcwin", "0", "0", str(w), str(h - 1)])
    # Bad input: a truncated GeoTIFF and a file GDAL cannot open.
    whole = open(os.path.join(out, "i16_striped_raw_band.tif"), "rb").read()
    with open(os.path.join(out, "truncated.tif"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    with open(os.path.join(out, "garbage.xyz"), "wb") as f:
        f.write(b"\x01\x02 not a raster " * 50)
    errors += [{"spec": os.path.join(out, "truncated.tif"), "expect": ["truncated.tif"], "read": True},
               {"spec": os.path.join(out, "garbage.xyz"), "expect": ["garbage.xyz"]}]
    extra = {"labels_short": short, "scene_for_labels": os.path.join(out, "i16_tiled_deflate_pixel.tif")}
    return scenes, errors, extra


def make_bench(out, rows=512, cols=512, bands=224):
    """A field-like int16 scene (smooth spectra x smooth abundance maps + noise) as a tiled DEFLATE
    GeoTIFF, 256 x 256 tiles, pixel interleaved: for timing block reads, not for comparisons."""
    yy, xx = np.mgrid[0:rows, 0:cols] / max(rows, cols)
    wl = np.linspace(0.0, 1.0, bands)
    spectra = np.stack([1.0 + 0.5 * np.sin(6.0 * wl + k) - 0.3 * np.exp(-((wl - 0.3 * k) ** 2) / 0.002)
                        for k in range(3)])
    maps = np.stack([0.5 + 0.5 * np.sin(9.0 * xx + 4.0 * yy), 0.5 + 0.5 * np.cos(7.0 * yy), 0.5 + 0.5 * xx * yy])
    cube = np.einsum("khw,kb->hwb", maps, spectra) * 2000.0 + RNG.normal(0.0, 15.0, (rows, cols, bands))
    cube = cube.astype(np.int16)
    envi = os.path.join(out, "bench_src.img")
    write_envi(envi, cube, 2)
    tif = os.path.join(out, "bench.tif")
    gdal_translate(envi, tif, ["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "COMPRESS=DEFLATE", "INTERLEAVE=PIXEL"])
    return [{"name": "bench", "spec": tif, "rows": rows, "cols": cols, "bands": bands,
             "raw_bytes": int(cube.nbytes)}], []


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    extra = {}
    if kind == "matlab":
        scenes, errors = make_matlab(out)
    elif kind == "salinas":
        scenes, errors = make_salinas(out, sys.argv[3])
    elif kind == "hdf5":
        scenes, errors = make_hdf5(out)
    elif kind == "bench":
        scenes, errors = make_bench(out, *[int(x) for x in sys.argv[3:6]])
    elif kind == "gdal":
        scenes, errors, extra = make_gdal(out)
    else:
        sys.exit(f"unknown fixture kind {kind!r}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"scenes": scenes, "errors": errors, **extra}, f, indent=1)


if __name__ == "__main__":
    main()
