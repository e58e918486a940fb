#!/usr/bin/python3
"""Compares hsipipe's ENVI decoding with SPy's (Debian python3-spectral), bit for bit.

Writes every interleave x data type (1, 2, 3, 4, 5, 12, 13, 14, 15) x byte order with numpy and header
text written here (never with hsipipe's writer), with the header/data naming variants hsipipe accepts,
decodes each with tests/io/envi_dump (open_envi + read_rows, in several block sizes and on 2 threads),
and compares the float32 BIP cube with SPy's `open_image(hdr).load(scale=False)`. Where the header has a
`data ignore value`, or a float pixel holds a NaN, the expected cube is SPy's with that whole pixel set
to NaN (the rule documented in src/io/scene.hpp), computed here from SPy's native-type load.
Also compares ../shared/data/samson_1.img and the band metadata (wavelength, fwhm, bbl) with SPy's.

usage: envi_spy_compare.py ENVI_DUMP [--samson PATH]
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import spectral
from spectral.io import envi

warnings.simplefilter("ignore")  # SPy warns about NaN values and missing byte order

TYPES = {1: np.uint8, 2: np.int16, 3: np.int32, 4: np.float32, 5: np.float64,
         12: np.uint16, 13: np.uint32, 14: np.int64, 15: np.uint64}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def random_cube(rng, code, shape):
    t = np.dtype(TYPES[code])
    if t.kind in "iu":
        info = np.iinfo(t)
        raw = rng.integers(info.min, info.max, size=shape, dtype=t, endpoint=True)
        flat = raw.reshape(-1)
        flat[:4] = [info.min, info.max, 0, 1 if info.min == 0 else -1]  # extremes are covered
        return raw
    # floats: a wide range of exponents and the special values
    mant = rng.standard_normal(shape)
    expo = rng.integers(-40 if t == np.float32 else -300, 40 if t == np.float32 else 300, size=shape)
    raw = (mant * np.power(10.0, expo.astype(np.float64))).astype(t)
    flat = raw.reshape(-1)
    specials = [np.inf, -np.inf, -0.0, np.finfo(t).tiny / 4, np.finfo(t).max, 1.0, -1.5]
    if t == np.float64:
        specials += [3.4028235677973366e38, 1e300, -1e-300, 0.1]  # beyond float32 range / rounding
    flat[: len(specials)] = specials
    return raw


def write_variant(d, name, raw_bip, code, inter, order, offset=0, naming="hdr", ignore=None, extra=""):
    """Writes raw_bip (rows, cols, bands) in `inter` with numpy; returns the path to open."""
    rows, cols, bands = raw_bip.shape
    if inter == "bil":
        arr = raw_bip.transpose(0, 2, 1)
    elif inter == "bsq":
        arr = raw_bip.transpose(2, 0, 1)
    else:
        arr = raw_bip
    t = np.dtype(TYPES[code]).newbyteorder(">" if order == 1 else "<")
    payload = np.ascontiguousarray(arr).astype(t).tobytes()
    data = {"hdr": name + ".img", "imghdr": name + ".img", "dat": name + ".dat", "noext": name,
            "bsq": name + "." + inter}[naming]
    header = {"imghdr": data + ".hdr"}.get(naming, name + ".hdr")
    with open(os.path.join(d, data), "wb") as f:
        f.write(b"\x5a" * offset)
        f.write(payload)
    lines = ["ENVI", "description = {hsipipe test: %s %d %s bo=%d}" % (inter, code, naming, order),
             "samples = %d" % cols, "lines   = %d" % rows, "bands = %d" % bands,
             "header offset = %d" % offset, "file type = ENVI Standard",
             "data type = %d" % code, "interleave = %s" % inter, "byte order = %d" % order]
    if ignore is not None:
        lines.append("data ignore value = %s" % ignore)
    lines.append(extra)
    with open(os.path.join(d, header), "w") as f:
        f.write("\n".join(lines) + "\n")
    # which name to hand to envi_dump: alternate header and data file
    return os.path.join(d, header), os.path.join(d, data)


def expected_from_spy(hdr_path, data_path):
    img = envi.open(hdr_path, data_path)
    f32 = np.asarray(img.load(scale=False), dtype=np.float32)  # SPy's own astype(float32)
    native = np.asarray(img.load(dtype=img.dtype, scale=False))
    bad = np.zeros(f32.shape[:2], dtype=bool)
    meta = img.metadata
    if "data ignore value" in meta:
        ig = float(meta["data ignore value"])
        t = native.dtype
        if t.kind == "f":
            bad |= np.any(native == t.type(ig), axis=2)
        elif ig == np.floor(ig) and np.iinfo(t).min <= ig <= np.iinfo(t).max:
            bad |= np.any(native == t.type(int(ig)), axis=2)
    if native.dtype.kind == "f":  # NaN or +-Inf in float32 (a float64 beyond its range too): an invalid pixel
        bad |= np.any(~np.isfinite(f32), axis=2)
    exp = f32.copy()
    exp[bad] = np.nan
    return exp, img


def same_bits(a, b):
    """Equal bit for bit, except that every NaN equals every NaN (payloads are not compared)."""
    if a.shape != b.shape:
        return "shape %s vs %s" % (a.shape, b.shape)
    na, nb = np.isnan(a), np.isnan(b)
    if not np.array_equal(na, nb):
        idx = np.argwhere(na != nb)[0]
        return "NaN mismatch at %s: hsipipe %r, expected %r" % (tuple(idx), a[tuple(idx)], b[tuple(idx)])
    ua, ub = a.view(np.uint32), b.view(np.uint32)
    diff = (ua != ub) & ~na
    if diff.any():
        idx = tuple(np.argwhere(diff)[0])
        return "%d values differ, first at %s: hsipipe %r, expected %r" % (diff.sum(), idx, a[idx], b[idx])
    return None


def run_dump(dump, pairs, extra_args=()):
    cmd = [dump, *extra_args]
    for scene, out in pairs:
        cmd += [scene, out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("envi_dump failed (%d): %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout)


def main():
    dump = sys.argv[1]
    samson = None
    if "--samson" in sys.argv:
        samson = sys.argv[sys.argv.index("--samson") + 1]
        if not os.path.exists(samson):
            if os.environ.get("CI") == "true":
                raise SystemExit("FAIL: %s is missing (CI=true)" % samson)
            print("SKIP samson: %s is missing" % samson)
            samson = None
    rng = np.random.default_rng(20261129)
    with tempfile.TemporaryDirectory(prefix="hsipipe-envi-spy-") as d:
        cases = []  # (open_path, hdr, data, label)
        namings = ["hdr", "imghdr", "dat", "noext", "bsq"]
        n = 0
        for inter in ("bsq", "bil", "bip"):
            for code in TYPES:
                for order in (0, 1):
                    rows, cols, bands = 11 + n % 3, 7 + n % 5, 5 + n % 4
                    raw = random_cube(rng, code, (rows, cols, bands))
                    naming = namings[n % len(namings)]
                    offset = (0, 3, 128)[n % 3]
                    ignore = None
                    if n % 4 == 1:  # an ignore value present in a few pixels
                        ignore_val = raw[2, 3, 1]
                        raw[5, 1, 0] = ignore_val
                        ignore = repr(float(ignore_val)) if raw.dtype.kind == "f" else str(int(ignore_val))
                        if raw.dtype.kind == "f" and not np.isfinite(ignore_val):
                            ignore = None
                    if raw.dtype.kind == "f" and n % 2 == 0:
                        raw[4, 2, 3 % bands] = np.nan  # a NaN band invalidates the pixel
                    name = "v%02d_%s_%d_%d" % (n, inter, code, order)
                    hdr, data = write_variant(d, name, raw, code, inter, order, offset, naming, ignore)
                    open_path = hdr if n % 2 == 0 else data
                    cases.append((open_path, hdr, data, name))
                    n += 1
        if samson:
            cases.append((samson, samson + ".hdr", samson, "samson_1"))
        expected = {}
        meta = {}
        for open_path, hdr, data, name in cases:
            expected[name], meta[name] = expected_from_spy(hdr, data)
        for args in ([], ["--block-rows", "1"], ["--block-rows", "3"], ["--block-rows", "2", "--threads", "3"]):
            pairs = [(c[0], os.path.join(d, c[3] + ".f32")) for c in cases]
            results = run_dump(dump, pairs, args)
            for (open_path, hdr, data, name), res in zip(cases, results):
                if "error" in res:
                    fail("%s %s: envi_dump error: %s" % (name, args, res["error"]))
                    continue
                exp = expected[name]
                got = np.fromfile(os.path.join(d, name + ".f32"), dtype="<f4")
                if got.size != exp.size:
                    fail("%s %s: %d values, SPy %d" % (name, args, got.size, exp.size))
                    continue
                why = same_bits(got.reshape(exp.shape), exp)
                if why:
                    fail("%s %s: %s" % (name, args, why))
                if res["bytes_read"] != exp.size * np.dtype(meta[name].dtype).itemsize:
                    fail("%s: bytes_read %d" % (name, res["bytes_read"]))
        # band metadata of samson against SPy's parse
        if samson:
            res = run_dump(dump, [(samson, os.path.join(d, "s.f32"))])[0]
            img = meta["samson_1"]
            if not np.array_equal(np.array(res["wavelengths"]), np.array(img.bands.centers, dtype=float)):
                fail("samson wavelengths differ from SPy's")
            if img.bands.bandwidths and not np.array_equal(np.array(res["fwhm"]), np.array(img.bands.bandwidths, dtype=float)):
                fail("samson fwhm differ from SPy's")
            if res["units"] != img.metadata.get("wavelength units", ""):
                fail("samson units %r vs %r" % (res["units"], img.metadata.get("wavelength units")))
            if [res["rows"], res["cols"], res["bands"]] != [img.nrows, img.ncols, img.nbands]:
                fail("samson dims")
            print("samson_1: %d x %d x %d %s, %d wavelengths %.2f-%.2f equal to SPy" % (
                res["rows"], res["cols"], res["bands"], res["dtype"], len(res["wavelengths"]),
                min(res["wavelengths"]), max(res["wavelengths"])))
        print("compared %d ENVI files x 4 block/thread settings with SPy %s" % (len(cases), spectral.__version__))
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("all equal bit for bit")


if __name__ == "__main__":
    main()
