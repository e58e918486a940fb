"""The remote-scene test world: a synthetic scene made with GDAL's Python bindings (independent of
hsipipe), converted to a COG by `hsipipe cog`, served by nginx, by two fault-injecting proxies and by
s3rver. Used by run_reader_test.py and test_remote_decode.py; /usr/bin/python3 only.
"""
import contextlib
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import servers  # noqa: E402

ROWS, COLS, BANDS = 100, 90, 24
TILE = 16
NODATA = 0
BUCKET, KEY = "hsi", "scenes/scene.cog.tif"


def make_scene(d):
    """scene.tif (striped GeoTIFF, uint16, nodata 0, wavelengths) and labels.tif (int16, 0 = unlabeled)."""
    from osgeo import gdal
    gdal.UseExceptions()
    rng = np.random.default_rng(20261129)
    yy, xx = np.mgrid[0:ROWS, 0:COLS]
    cube = np.empty((BANDS, ROWS, COLS), np.uint16)
    for b in range(BANDS):
        smooth = 2000 + 800 * np.sin(xx / 9.0 + b / 5.0) + 600 * np.cos(yy / 13.0 - b / 7.0)
        cube[b] = np.clip(smooth + rng.normal(0, 40, (ROWS, COLS)), 1, 65535).astype(np.uint16)
    cube[:, 5, 7] = NODATA          # an invalid pixel (all bands)
    cube[3, 50, 40] = NODATA        # invalid through one band
    scene = os.path.join(d, "scene.tif")
    ds = gdal.GetDriverByName("GTiff").Create(scene, COLS, ROWS, BANDS, gdal.GDT_UInt16, ["INTERLEAVE=BAND"])
    for b in range(BANDS):
        band = ds.GetRasterBand(b + 1)
        band.WriteArray(cube[b])
        band.SetNoDataValue(NODATA)
        band.SetMetadataItem("wavelength", str(400.0 + 10.0 * b))
        band.SetMetadataItem("wavelength_units", "Nanometers")
    ds = None
    labels = np.zeros((ROWS, COLS), np.int16)
    labels[10:40, 10:30] = 1
    labels[20:70, 50:80] = 2
    labels[60:95, 5:45] = 3
    labels[80:98, 60:88] = 4
    labels[rng.random((ROWS, COLS)) < 0.3] = 0  # sparse labels, as in real scenes
    lab = os.path.join(d, "labels.tif")
    ds = gdal.GetDriverByName("GTiff").Create(lab, COLS, ROWS, 1, gdal.GDT_Int16)
    ds.GetRasterBand(1).WriteArray(labels)
    ds = None
    return scene, lab, cube, labels


def hsipipe():
    return os.environ.get("HSIPIPE_BIN", "hsipipe")


def run(cmd, env=None, check=True, timeout=600):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=full_env,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return r


def make_cog(d):
    scene, lab, cube, labels = make_scene(d)
    cog = os.path.join(d, "www", "scene.cog.tif")
    os.makedirs(os.path.dirname(cog), exist_ok=True)
    run([hsipipe(), "cog", scene, cog, "--tile", str(TILE), "--compress", "deflate", "--predictor"])
    lab_cog = os.path.join(d, "www", "labels.tif")
    run([hsipipe(), "cog", lab, lab_cog, "--tile", str(TILE)])
    return scene, lab, cog, lab_cog, cube, labels


class World:
    """Paths and URLs of one prepared world (see remote_world())."""


@contextlib.contextmanager
def remote_world(d, s3=True, every=4):
    """Prepares the COG in d/www and serves it; yields a World. Servers stop on exit, also on error."""
    w = World()
    w.dir = d
    w.scene, w.labels_local, w.cog, w.labels_cog, w.cube, w.label_array = make_cog(d)
    with contextlib.ExitStack() as stack:
        ng = stack.enter_context(servers.Nginx(os.path.join(d, "www")))
        w.nginx = ng
        w.http = f"{ng.url}/scene.cog.tif"
        w.http_labels = f"{ng.url}/labels.tif"
        w.http_missing = f"{ng.url}/missing.tif"
        w.http_forbidden = f"{ng.url}/forbidden/scene.cog.tif"
        p503 = stack.enter_context(servers.FaultProxy(ng.port, every=every, mode="503"))
        prst = stack.enter_context(servers.FaultProxy(ng.port, every=every, mode="reset"))
        w.proxy503, w.proxyreset = p503, prst
        w.fault503 = f"{p503.url}/scene.cog.tif"
        w.faultreset = f"{prst.url}/scene.cog.tif"
        w.s3 = None
        w.s3_env = {}
        if s3:
            s3srv = stack.enter_context(servers.S3rver(BUCKET))
            s3srv.put(w.cog, KEY)
            w.s3 = f"s3://{BUCKET}/{KEY}"
            w.s3_missing = f"s3://{BUCKET}/scenes/missing.tif"
            w.s3_env = s3srv.env()
            w.s3_server = s3srv
        # Fast retries for the tests (the defaults back off from 0.5 s).
        w.env = {"GDAL_HTTP_RETRY_DELAY": "0.05", "GDAL_HTTP_MAX_RETRY": "6", **w.s3_env}
        yield w
